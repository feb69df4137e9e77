/* rt_mkplans.c - writes the in-memory test plans as plan.bin files for the reshard-replay CLI tests:
 * row (zero-copy row shards), transpose (packed), mixed (dtypes, ragged, nested, colocated, NVL lane),
 * forward (NVLink forwarding with a cross-lane wait) and wrong (a plan that delivers wrong bytes). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "rt_build.h"

static const char *AX1[] = {"x"}, *AX2[] = {"a", "b"};

static void write_plan(rs_plan *P, const char *dir, const char *name)
{
    char path[1024], err[256];
    snprintf(path, sizeof path, "%s/%s.plan", dir, name);
    if (rs_plan_write_file(P, path, err, sizeof err)) {
        fprintf(stderr, "rt_mkplans: %s: %s\n", path, err);
        exit(1);
    }
    rs_plan_free(P);
}

static void two_d(const char *dir, const char *name, uint32_t ns, uint32_t nd, int64_t R, int64_t C, int dim,
                  rtb_opts o, uint32_t dom)
{
    rtb *b = rtb_new(ns + nd, dom);
    int64_t s1[] = {ns}, s2[] = {nd}, shape[] = {R, C};
    uint32_t ms = rtb_mesh(b, "train", 1, AX1, s1, 0), md = rtb_mesh(b, "infer", 1, AX1, s2, ns);
    uint32_t t = rtb_tensor(b, "w", RS_DT_BF16, 2, shape);
    rs_place ps = rtb_shard(0, 0), pd = rtb_shard(0, (uint32_t)dim);
    rtb_piece(b, RS_SRC, t, ms, 1, &ps, "w.src");
    rtb_piece(b, RS_DST, t, md, 1, &pd, "w.dst");
    rtb_layout_done(b);
    rtb_autoplan(b, &o);
    rs_plan P;
    rtb_finish(b, &P);
    write_plan(&P, dir, name);
}

static void mixed(const char *dir)
{
    rtb *b = rtb_new(8, 4);
    int64_t a24[] = {2, 4}, a8[] = {8}, a3[] = {3};
    uint32_t train = rtb_mesh(b, "train", 2, AX2, a24, 0), all = rtb_mesh(b, "all", 1, AX1, a8, 0);
    uint32_t inf = rtb_mesh(b, "infer", 1, AX1, a3, 5);
    int64_t s1[] = {7, 10, 6}, s2[] = {13, 5}, s3[] = {11};
    uint32_t t1 = rtb_tensor(b, "qkv", RS_DT_BF16, 3, s1), t2 = rtb_tensor(b, "norm", RS_DT_FP64, 2, s2);
    uint32_t t3 = rtb_tensor(b, "bias", RS_DT_INT8, 1, s3);
    rs_place p[2];
    p[0] = rtb_pin(0, 1), p[1] = rtb_shard(1, 1);
    rtb_piece(b, RS_SRC, t1, train, 2, p, "qkv.src");
    p[0] = rtb_shard(0, 2);
    rtb_piece(b, RS_DST, t1, inf, 1, p, "qkv.dst");
    p[0] = rtb_pin(0, 0);
    rtb_piece(b, RS_SRC, t2, train, 1, p, "norm.src");
    rtb_piece(b, RS_DST, t2, all, 0, p, "norm.dst");
    p[0] = rtb_shard(0, 0), p[1] = rtb_shard(1, 0);
    rtb_piece(b, RS_SRC, t3, train, 2, p, "bias.src");
    p[0] = rtb_shard(0, 0);
    rtb_piece(b, RS_DST, t3, inf, 1, p, "bias.dst");
    rtb_layout_done(b);
    rtb_opts o = {0, 1, 3};
    rtb_autoplan(b, &o);
    rs_plan P;
    rtb_finish(b, &P);
    write_plan(&P, dir, "mixed");
}

static void forward(const char *dir)
{
    rtb *b = rtb_new(4, 2);
    int64_t a2[] = {2}, shape[] = {8, 16};
    uint32_t ms = rtb_mesh(b, "src", 1, AX1, a2, 0), md = rtb_mesh(b, "dst", 1, AX1, a2, 2);
    uint32_t t = rtb_tensor(b, "t", RS_DT_FP32, 2, shape);
    rs_place p = rtb_shard(0, 0);
    rtb_piece(b, RS_SRC, t, ms, 1, &p, "t");
    rtb_piece(b, RS_DST, t, md, 0, &p, "t");
    rtb_layout_done(b);
    const uint64_t half = 4 * 16 * 4;
    uint32_t s0 = rtb_binding(b, 0, "t", RS_SRC), s1 = rtb_binding(b, 1, "t", RS_SRC);
    uint32_t d2 = rtb_binding(b, 2, "t", RS_DST), d3 = rtb_binding(b, 3, "t", RS_DST);
    rtb_staging(b, 0, half);
    rtb_step(b, 0, RS_LANE_NET, 0, NULL);
    rtb_copy(b, 0, RS_OP_PACK, rtb_range(s0, 0, half), rtb_range(RS_LOC_STAGING, 0, half));
    rtb_p2p(b, 0, 1, 2, RS_LOC_STAGING, 0, half);
    rtb_step(b, 1, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 1, 1, 3, s1, 0, half);
    rtb_p2p(b, 1, 1, 2, s1, 0, half);
    rtb_staging(b, 2, half);
    rtb_step(b, 2, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 2, 0, 0, RS_LOC_STAGING, 0, half);
    rtb_p2p(b, 2, 0, 1, d2, half, half);
    uint32_t w0 = 0;
    rtb_step(b, 2, RS_LANE_NVL, 1, &w0);
    rtb_p2p(b, 2, 1, 3, RS_LOC_STAGING, 0, half);
    rtb_copy(b, 2, RS_OP_UNPACK, rtb_range(RS_LOC_STAGING, 0, half), rtb_range(d2, 0, half));
    rtb_staging(b, 3, half);
    rtb_step(b, 3, RS_LANE_NVL, 0, NULL);
    rtb_p2p(b, 3, 0, 2, RS_LOC_STAGING, 0, half);
    rtb_copy(b, 3, RS_OP_UNPACK, rtb_range(RS_LOC_STAGING, 0, half), rtb_range(d3, 0, half));
    rtb_step(b, 3, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 3, 0, 1, d3, half, half);
    rs_plan P;
    rtb_finish(b, &P);
    write_plan(&P, dir, "forward");
}

static void wrong(const char *dir)
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
    rtb_p2p(b, 0, 1, 1, s, 0, 16);
    rtb_step(b, 1, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 1, 0, 0, d, 16, 16);
    rs_plan P;
    rtb_finish(b, &P);
    write_plan(&P, dir, "wrong");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: rt_mkplans DIR\n");
        return 2;
    }
    mkdir(argv[1], 0777);
    rtb_opts zc = {1, 0, 1}, packed = {1, 1, 2};
    two_d(argv[1], "row", 4, 8, 512, 96, 0, zc, 8);
    two_d(argv[1], "transpose", 4, 8, 512, 96, 1, packed, 4);
    mixed(argv[1]);
    forward(argv[1]);
    wrong(argv[1]);
    return 0;
}
