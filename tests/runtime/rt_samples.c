/* rt_samples.c - the sample plans shared by the runtime tests, the GPU test, rt_mkplans and the benchmarks. */
#include "rt_samples.h"

#include <stdio.h>

static const char *AX1[] = {"x"}, *AX2[] = {"a", "b"};

static uint8_t *finish(rtb *b, size_t *len)
{
    rs_plan P;
    rtb_finish(b, &P);
    uint8_t *img = rtb_encode(&P, len);
    rs_plan_free(&P);
    return img;
}

uint8_t *rts_2d(uint32_t ns, uint32_t nd, int64_t R, int64_t C, int dst_dim, rs_dtype dt, rtb_opts o,
                uint32_t domain_size, size_t *len)
{
    rtb *b = rtb_new(ns + nd, domain_size);
    int64_t s1[] = {ns}, s2[] = {nd}, shape[] = {R, C};
    uint32_t ms = rtb_mesh(b, "train", 1, AX1, s1, 0), md = rtb_mesh(b, "infer", 1, AX1, s2, ns);
    uint32_t t = rtb_tensor(b, "w", dt, 2, shape);
    rs_place ps = rtb_shard(0, 0), pd = rtb_shard(0, (uint32_t)dst_dim);
    rtb_piece(b, RS_SRC, t, ms, 1, &ps, "w.src");
    rtb_piece(b, RS_DST, t, md, 1, &pd, "w.dst");
    rtb_layout_done(b);
    rtb_autoplan(b, &o);
    return finish(b, len);
}

uint8_t *rts_mixed(rtb_opts o, size_t *len)
{
    rtb *b = rtb_new(8, 4);
    int64_t a24[] = {2, 4}, a8[] = {8}, a3[] = {3};
    uint32_t train = rtb_mesh(b, "train", 2, AX2, a24, 0); /* a = pp-like, b = tp-like */
    uint32_t all = rtb_mesh(b, "all", 1, AX1, a8, 0);
    uint32_t inf = rtb_mesh(b, "infer", 1, AX1, a3, 5);
    int64_t s1[] = {7, 10, 6}, s2[] = {13, 5}, s3[] = {11}, s4[] = {4, 9, 2};
    uint32_t t1 = rtb_tensor(b, "qkv", RS_DT_BF16, 3, s1);
    uint32_t t2 = rtb_tensor(b, "norm", RS_DT_FP64, 2, s2);
    uint32_t t3 = rtb_tensor(b, "bias", RS_DT_INT8, 1, s3);
    uint32_t t4 = rtb_tensor(b, "exp", RS_DT_INT32, 3, s4);
    rs_place p[3];
    p[0] = rtb_pin(0, 1), p[1] = rtb_shard(1, 1); /* stage 1, tp shards dim 1 (ragged: 10 / 4) */
    rtb_piece(b, RS_SRC, t1, train, 2, p, "qkv.src");
    p[0] = rtb_shard(0, 2); /* infer shards dim 2 (6 / 3) */
    rtb_piece(b, RS_DST, t1, inf, 1, p, "qkv.dst");
    p[0] = rtb_pin(0, 0); /* replicated over tp on stage 0 */
    rtb_piece(b, RS_SRC, t2, train, 1, p, "norm.src");
    rtb_piece(b, RS_DST, t2, all, 0, p, "norm.dst"); /* replicated everywhere (colocated) */
    p[0] = rtb_shard(0, 0), p[1] = rtb_shard(1, 0); /* nested: a outer, b inner (ragged 11 / 8) */
    rtb_piece(b, RS_SRC, t3, train, 2, p, "bias.src");
    p[0] = rtb_shard(0, 0);
    rtb_piece(b, RS_DST, t3, inf, 1, p, "bias.dst");
    p[0] = rtb_shard(0, 1); /* 9 / 8 ragged: trailing empty blocks */
    rtb_piece(b, RS_SRC, t4, all, 1, p, "exp.src");
    p[0] = rtb_shard(0, 0), p[1] = rtb_shard(0, 2); /* 4 / 3 and 2 / 3 */
    rtb_piece(b, RS_DST, t4, inf, 1, p, "exp.dst");
    rtb_layout_done(b);
    rtb_autoplan(b, &o);
    return finish(b, len);
}

uint8_t *rts_forward(size_t *len)
{
    rtb *b = rtb_new(4, 2);
    int64_t a2[] = {2}, shape[] = {8, 16};
    uint32_t ms = rtb_mesh(b, "src", 1, AX1, a2, 0), md = rtb_mesh(b, "dst", 1, AX1, a2, 2);
    uint32_t t = rtb_tensor(b, "t", RS_DT_FP32, 2, shape);
    rs_place p = rtb_shard(0, 0);
    rtb_piece(b, RS_SRC, t, ms, 1, &p, "t");
    rtb_piece(b, RS_DST, t, md, 0, &p, "t"); /* replicated on ranks 2 and 3 */
    rtb_layout_done(b);
    const uint64_t half = 4 * 16 * 4;
    uint32_t s0 = rtb_binding(b, 0, "t", RS_SRC), s1 = rtb_binding(b, 1, "t", RS_SRC);
    uint32_t d2 = rtb_binding(b, 2, "t", RS_DST), d3 = rtb_binding(b, 3, "t", RS_DST);
    /* rank 0: pack its half (rows 0..4) into staging, send it to rank 2 */
    rtb_staging(b, 0, half);
    rtb_step(b, 0, RS_LANE_NET, 0, NULL);
    rtb_copy(b, 0, RS_OP_PACK, rtb_range(s0, 0, half), rtb_range(RS_LOC_STAGING, 0, half));
    rtb_p2p(b, 0, 1, 2, RS_LOC_STAGING, 0, half);
    /* rank 1: its half (rows 4..8) zero-copy to ranks 3 and 2 */
    rtb_step(b, 1, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 1, 1, 3, s1, 0, half);
    rtb_p2p(b, 1, 1, 2, s1, 0, half);
    /* rank 2: NET step 0 receives rows 0..4 into staging and rows 4..8 into its buffer; NVL step 1 waits for
     * step 0, forwards the staging bytes to rank 3 and unpacks its own copy */
    rtb_staging(b, 2, half);
    rtb_step(b, 2, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 2, 0, 0, RS_LOC_STAGING, 0, half);
    rtb_p2p(b, 2, 0, 1, d2, half, half);
    uint32_t w0 = 0;
    rtb_step(b, 2, RS_LANE_NVL, 1, &w0);
    rtb_p2p(b, 2, 1, 3, RS_LOC_STAGING, 0, half);
    rtb_copy(b, 2, RS_OP_UNPACK, rtb_range(RS_LOC_STAGING, 0, half), rtb_range(d2, 0, half));
    /* rank 3: NVL step receives the forwarded rows 0..4; NET step receives rows 4..8 zero-copy */
    rtb_staging(b, 3, half);
    rtb_step(b, 3, RS_LANE_NVL, 0, NULL);
    rtb_p2p(b, 3, 0, 2, RS_LOC_STAGING, 0, half);
    rtb_copy(b, 3, RS_OP_UNPACK, rtb_range(RS_LOC_STAGING, 0, half), rtb_range(d3, 0, half));
    rtb_step(b, 3, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 3, 0, 1, d3, half, half);
    return finish(b, len);
}

uint8_t *rts_wrong(size_t *len)
{
    rtb *b = rtb_new(2, 2);
    int64_t a1[] = {1}, shape[] = {4, 4};
    uint32_t ms = rtb_mesh(b, "s", 1, AX1, a1, 0), md = rtb_mesh(b, "d", 1, AX1, a1, 1);
    uint32_t t = rtb_tensor(b, "t", RS_DT_INT16, 2, shape);
    rtb_piece(b, RS_SRC, t, ms, 0, NULL, "t");
    rtb_piece(b, RS_DST, t, md, 0, NULL, "t");
    rtb_layout_done(b);
    uint32_t s = rtb_binding(b, 0, "t", RS_SRC), d = rtb_binding(b, 1, "t", RS_DST);
    rtb_step(b, 0, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 0, 1, 1, s, 0, 16); /* only half of the 32 bytes, landing in the wrong half */
    rtb_step(b, 1, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 1, 0, 0, d, 16, 16);
    return finish(b, len);
}

uint8_t *rts_recv_order(size_t *len)
{
    rtb *b = rtb_new(3, 1);
    int64_t a1[] = {1}, shape[] = {16, 8};
    uint32_t m[3];
    for (uint32_t r = 0; r < 3; r++) {
        char name[8];
        snprintf(name, sizeof name, "r%u", r);
        m[r] = rtb_mesh(b, name, 1, AX1, a1, r);
    }
    uint32_t ta = rtb_tensor(b, "a", RS_DT_FP32, 2, shape), tb = rtb_tensor(b, "b", RS_DT_FP32, 2, shape),
             tc = rtb_tensor(b, "c", RS_DT_FP32, 2, shape);
    rtb_piece(b, RS_SRC, ta, m[0], 0, NULL, "sa");
    rtb_piece(b, RS_SRC, tb, m[0], 0, NULL, "sb");
    rtb_piece(b, RS_SRC, tc, m[2], 0, NULL, "sc");
    rtb_piece(b, RS_DST, ta, m[1], 0, NULL, "da");
    rtb_piece(b, RS_DST, tb, m[2], 0, NULL, "db");
    rtb_piece(b, RS_DST, tc, m[1], 0, NULL, "dc");
    rtb_layout_done(b);
    const uint64_t n = 16 * 8 * 4;
    /* rank 0: a to rank 1, then (next step) b to rank 2 */
    rtb_step(b, 0, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 0, 1, 1, rtb_binding(b, 0, "sa", RS_SRC), 0, n);
    rtb_step(b, 0, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 0, 1, 2, rtb_binding(b, 0, "sb", RS_SRC), 0, n);
    /* rank 1: one step receiving c from rank 2 (listed first) and a from rank 0 */
    rtb_step(b, 1, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 1, 0, 2, rtb_binding(b, 1, "dc", RS_DST), 0, n);
    rtb_p2p(b, 1, 0, 0, rtb_binding(b, 1, "da", RS_DST), 0, n);
    /* rank 2: b from rank 0, then (next step) c to rank 1 */
    rtb_step(b, 2, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 2, 0, 0, rtb_binding(b, 2, "db", RS_DST), 0, n);
    rtb_step(b, 2, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 2, 1, 1, rtb_binding(b, 2, "sc", RS_SRC), 0, n);
    return finish(b, len);
}

uint8_t *rts_local(int64_t R, int64_t C, int steps, size_t *len)
{
    rtb *b = rtb_new(1, 1);
    int64_t a1[] = {1}, a11[] = {1, 1}, shape[] = {R, C};
    uint32_t m = rtb_mesh(b, "m", 1, AX1, a1, 0), m2 = rtb_mesh(b, "m2", 2, AX2, a11, 0);
    /* one tensor per step: the naive planner spreads a rank's fragments round-robin over the steps */
    for (int k = 0; k < (steps > 0 ? steps : 1); k++) {
        char name[32], src[32], dst[32];
        snprintf(name, sizeof name, "w%d", k);
        snprintf(src, sizeof src, "w%d.src", k);
        snprintf(dst, sizeof dst, "w%d.dst", k);
        uint32_t t = rtb_tensor(b, name, RS_DT_BF16, 2, shape);
        rs_place p = rtb_shard(0, 1);
        rtb_piece(b, RS_SRC, t, m, 1, &p, src);
        p = rtb_shard(1, 0);
        rtb_piece(b, RS_DST, t, m2, 1, &p, dst);
    }
    rtb_layout_done(b);
    rtb_opts o = {1, 0, steps};
    rtb_autoplan(b, &o);
    return finish(b, len);
}
