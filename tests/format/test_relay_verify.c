/* test_relay_verify.c - relays (a destination rank forwarding bytes it received, from its destination
 * buffer) through the whole-plan verifier and the CPU-transport replay: a pipelined chain across four
 * domains, relays combined with NVLink fan-out, and broken variants that must be refused with their reason.
 * The planner tests' reference executor (tests/planner/interp.c) is a second opinion on every plan.
 * `test_relay_verify NAME` runs one case. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"
#include "plan.h"
#include "replay.h"
#include "reshard.h"
#include "rt_build.h"

static const char *AX1[] = {"x"};

/* tensor t : fp32[8, 16] = 512 bytes, replicated on every destination rank (implicit buffer "t") */
#define TB 512u
#define H (TB / 2)
#define Q (TB / 4)

enum {
    V_OK,
    V_SAME_STEP,    /* rank 1 relays chunk B in the step that receives it */
    V_NEVER,        /* rank 1 relays chunk B that nobody sends it */
    V_TWICE,        /* rank 1 receives chunk B over chunk A */
    V_WRONG_PACK,   /* rank 2 packs rows 0..2 twice instead of rows 0..2 and 2..4 (wrong data at rank 3) */
    V_WRONG_SEND,   /* rank 1 relays chunk A twice (wrong data at rank 2) */
    V_OTHER_LANE,   /* fan-out: rank 2 forwards over NVLink without waiting for the receive */
    V_STALE_LANE,   /* fan-out: rank 4's NVL relay waits for nothing at all (not even through its lane) */
};

static uint32_t layout(rtb *b, uint32_t first_dst, uint32_t ndst)
{
    int64_t one[] = {1}, nd[] = {ndst}, shape[] = {8, 16};
    uint32_t ms = rtb_mesh(b, "src", 1, AX1, one, 0), md = rtb_mesh(b, "dst", 1, AX1, nd, first_dst);
    uint32_t t = rtb_tensor(b, "t", RS_DT_FP32, 2, shape);
    rtb_piece(b, RS_SRC, t, ms, 0, NULL, "t");
    rtb_piece(b, RS_DST, t, md, 0, NULL, "t"); /* replicated */
    rtb_layout_done(b);
    return t;
}

/* Ranks 0..3, one per domain. Rank 0 holds t and sends it in two chunks A = [0, H), B = [H, 2H) to rank 1,
 * straight into its destination buffer. Rank 1 relays A from its buffer while receiving B, then relays B.
 * Rank 2 receives the same way and relays each chunk to rank 3 through staging (PACK from its destination
 * buffer, the two quarters of a chunk swapped in staging); rank 3 unpacks them into place. */
static void chain(int v, rs_plan *P)
{
    rtb *b = rtb_new(4, 1);
    layout(b, 1, 3);
    uint32_t s0 = rtb_binding(b, 0, "t", RS_SRC), d1 = rtb_binding(b, 1, "t", RS_DST);
    uint32_t d2 = rtb_binding(b, 2, "t", RS_DST), d3 = rtb_binding(b, 3, "t", RS_DST);
    const uint32_t S = RS_LOC_STAGING;
    /* rank 0 */
    rtb_step(b, 0, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 0, 1, 1, s0, 0, H);
    if (v != V_NEVER) {
        rtb_step(b, 0, RS_LANE_NET, 0, NULL);
        rtb_p2p(b, 0, 1, 1, s0, H, H);
    }
    /* rank 1 */
    rtb_step(b, 1, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 1, 0, 0, d1, 0, H);
    rtb_step(b, 1, RS_LANE_NET, 0, NULL);
    if (v != V_NEVER) rtb_p2p(b, 1, 0, 0, d1, v == V_TWICE ? 0 : H, H);
    rtb_p2p(b, 1, 1, 2, d1, 0, H);
    if (v != V_SAME_STEP) rtb_step(b, 1, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 1, 1, 2, d1, v == V_WRONG_SEND ? 0 : H, H);
    /* rank 2 */
    rtb_staging(b, 2, TB);
    rtb_step(b, 2, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 2, 0, 1, d2, 0, H);
    for (uint32_t k = 0; k < 2; k++) { /* step 1: receive B, relay A; step 2: relay B */
        rtb_step(b, 2, RS_LANE_NET, 0, NULL);
        if (k == 0) rtb_p2p(b, 2, 0, 1, d2, H, H);
        uint64_t c = k * H;
        rtb_copy(b, 2, RS_OP_PACK, rtb_range(d2, c, Q), rtb_range(S, c + Q, Q));
        rtb_copy(b, 2, RS_OP_PACK, rtb_range(d2, v == V_WRONG_PACK ? c : c + Q, Q), rtb_range(S, c, Q));
        rtb_p2p(b, 2, 1, 3, S, c, H);
    }
    /* rank 3 */
    rtb_staging(b, 3, TB);
    for (uint32_t k = 0; k < 2; k++) {
        uint64_t c = k * H;
        rtb_step(b, 3, RS_LANE_NET, 0, NULL);
        rtb_p2p(b, 3, 0, 2, S, c, H);
        rtb_copy(b, 3, RS_OP_UNPACK, rtb_range(S, c + Q, Q), rtb_range(d3, c, Q));
        rtb_copy(b, 3, RS_OP_UNPACK, rtb_range(S, c, Q), rtb_range(d3, c + Q, Q));
    }
    rtb_finish(b, P);
}

/* Ranks 0..5 in domains {0,1} {2,3} {4,5}; rank 0 holds t, ranks 2..5 need all of it (rank 1 idle).
 * Rank 0 sends t once into rank 2's buffer. Domain {2,3}: rank 2 fans it out to rank 3 over NVLink
 * straight from its buffer (NVL step waiting for the NET receive), then relays A to rank 4 (NET, later on
 * its lane); rank 3 relays B to rank 5 through staging (NET step waiting for its NVL receive). Domain {4,5}:
 * rank 5 forwards its staging copy of B to rank 4 (the classic fan-out) and unpacks it; rank 4 receives B
 * over NVLink in a step waiting for its NET receive, then relays A to rank 5 from its buffer in a later NVL
 * step that waits for nothing itself: the NET receive is ordered before it through its lane. */
static void fanout(int v, rs_plan *P)
{
    rtb *b = rtb_new(6, 2);
    layout(b, 2, 4);
    const uint32_t S = RS_LOC_STAGING, w0 = 0;
    uint32_t s0 = rtb_binding(b, 0, "t", RS_SRC);
    uint32_t d[6];
    for (uint32_t r = 2; r < 6; r++) d[r] = rtb_binding(b, r, "t", RS_DST);
    rtb_step(b, 0, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 0, 1, 2, s0, 0, TB);
    /* rank 2: 0 NET receive, 1 NVL fan-out to 3, 2 NET relay of A to 4 */
    rtb_step(b, 2, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 2, 0, 0, d[2], 0, TB);
    rtb_step(b, 2, RS_LANE_NVL, v == V_OTHER_LANE ? 0 : 1, &w0);
    rtb_p2p(b, 2, 1, 3, d[2], 0, TB);
    rtb_step(b, 2, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 2, 1, 4, d[2], 0, H);
    /* rank 3: 0 NVL receive, 1 NET relay of B to 5 through staging */
    rtb_staging(b, 3, H);
    rtb_step(b, 3, RS_LANE_NVL, 0, NULL);
    rtb_p2p(b, 3, 0, 2, d[3], 0, TB);
    rtb_step(b, 3, RS_LANE_NET, 1, &w0);
    rtb_copy(b, 3, RS_OP_PACK, rtb_range(d[3], H, H), rtb_range(S, 0, H));
    rtb_p2p(b, 3, 1, 5, S, 0, H);
    /* rank 4: 0 NET receive A, 1 NVL receive B (waits 0), 2 NVL relay of A to 5 */
    rtb_step(b, 4, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 4, 0, 2, d[4], 0, H);
    rtb_step(b, 4, RS_LANE_NVL, v == V_STALE_LANE ? 0 : 1, &w0);
    rtb_p2p(b, 4, 0, 5, d[4], H, H);
    rtb_step(b, 4, RS_LANE_NVL, 0, NULL);
    rtb_p2p(b, 4, 1, 5, d[4], 0, H);
    /* rank 5: 0 NET receive B into staging, 1 NVL forward of staging to 4 + unpack, 2 NVL receive A */
    rtb_staging(b, 5, H);
    rtb_step(b, 5, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 5, 0, 3, S, 0, H);
    rtb_step(b, 5, RS_LANE_NVL, 1, &w0);
    rtb_p2p(b, 5, 1, 4, S, 0, H);
    rtb_copy(b, 5, RS_OP_UNPACK, rtb_range(S, 0, H), rtb_range(d[5], H, H));
    rtb_step(b, 5, RS_LANE_NVL, 0, NULL);
    rtb_p2p(b, 5, 0, 4, d[5], 0, H);
    rtb_finish(b, P);
}

static int verify(rs_plan *P, char *err, size_t n)
{
    int rc = rs_plan_verify_all(P, err, n);
    printf("verify: %s\n", rc ? err : "ok");
    return rc;
}

/* The plan replays on the CPU threads transport and every destination element checks out. */
static void replay_ok(rs_plan *P, uint64_t want_checked)
{
    size_t len;
    uint8_t *img = rtb_encode(P, &len);
    rsPlan_t plan;
    rsResult_t r = rsPlanLoadMemory(img, len, RS_ALL_RANKS, &plan);
    free(img);
    if (r != rsSuccess) {
        fprintf(stderr, "load: %s: %s\n", rsGetErrorString(r), rsGetLastError());
        exit(1);
    }
    rs_replay_opts o;
    memset(&o, 0, sizeof o);
    o.transport = rsTransportCpu;
    o.timeout_ms = 10000;
    o.iters = 2;
    o.first = 0;
    o.last = UINT32_MAX;
    o.inject_rank = -1;
    rs_replay_result res;
    int bad = rs_replay_run(plan, &o, &res);
    if (bad) {
        fprintf(stderr, "replay: %s: %s; %llu wrong\n", rsGetErrorString(res.result), res.error,
                (unsigned long long)res.rep.wrong);
        for (int i = 0; i < res.rep.nreport; i++) fprintf(stderr, "  %s\n", res.rep.report[i]);
    }
    RT_CHECK(!bad);
    printf("replay: checked %llu elements\n", (unsigned long long)res.rep.checked);
    RT_CHECK(res.rep.checked == want_checked && res.rep.wrong == 0);
    rsPlanDestroy(plan);
}

/* The reference executor, in 16 random orders the execution semantics allow: 1 when every run is right. */
static int interp_ok(const rs_plan *P)
{
    char msg[600];
    for (uint64_t seed = 1; seed <= 16; seed++)
        if (rs_interp_run(P, seed, msg, sizeof msg)) {
            printf("reference executor (seed %llu): %s\n", (unsigned long long)seed, msg);
            return 0;
        }
    return 1;
}

/* interp: 1 when the reference executor must find the plan wrong as well (wrong bytes in any order) */
static void expect_fail(void (*build)(int, rs_plan *), int v, const char *a, const char *b2, int interp)
{
    rs_plan P;
    build(v, &P);
    char err[700];
    if (interp) RT_CHECK(!interp_ok(&P));
    RT_CHECK(verify(&P, err, sizeof err) != 0);
    if (!strstr(err, a) || (b2 && !strstr(err, b2))) {
        fprintf(stderr, "message '%s' lacks '%s'%s%s\n", err, a, b2 ? " or " : "", b2 ? b2 : "");
        exit(1);
    }
    rs_plan_free(&P);
}

static int t_chain(void)
{
    rs_plan P;
    chain(V_OK, &P);
    char err[700];
    RT_CHECK(verify(&P, err, sizeof err) == 0);
    RT_CHECK(interp_ok(&P));
    replay_ok(&P, 3 * 128);
    rs_plan_free(&P);
    return 0;
}

static int t_fanout(void)
{
    rs_plan P;
    fanout(V_OK, &P);
    char err[700];
    RT_CHECK(verify(&P, err, sizeof err) == 0);
    RT_CHECK(interp_ok(&P));
    replay_ok(&P, 4 * 128);
    rs_plan_free(&P);
    return 0;
}

static int t_same_step(void)
{
    expect_fail(chain, V_SAME_STEP,
                "rank 1, step 1, op 3 SEND: relays bytes 256..512 of destination buffer 't' (tensor 't') before they "
                "are written (step 1, op 1 RECV writes them in the same step, not an earlier phase)",
                NULL, 0);
    return 0;
}

static int t_never_written(void)
{
    expect_fail(chain, V_NEVER,
                "rank 1, step 2, op 2 SEND: relays bytes 256..512 of destination buffer 't' (tensor 't') that no op "
                "of the plan writes on rank 1",
                NULL, 1);
    return 0;
}

static int t_twice(void)
{
    expect_fail(chain, V_TWICE, "rank 1: bytes 0..256 of destination buffer 't' (tensor 't') are written twice", NULL, 1);
    return 0;
}

static int t_wrong_pack(void)
{
    expect_fail(chain, V_WRONG_PACK, "wrong data: rank 3 expects tensor 't' element [", "from rank 2", 1);
    return 0;
}

static int t_wrong_send(void)
{
    expect_fail(chain, V_WRONG_SEND, "wrong data: rank 2 expects tensor 't' element [4, 0] but gets tensor 't' element [0, 0] from rank 1",
                NULL, 1);
    return 0;
}

static int t_other_lane(void)
{
    expect_fail(fanout, V_OTHER_LANE,
                "rank 2, step 1, op 1 SEND: relays bytes 0..512 of destination buffer 't' (tensor 't') before they are "
                "written (step 0, op 0 RECV writes them on the other lane, not waited for)",
                NULL, 0);
    return 0;
}

static int t_stale_lane(void)
{
    expect_fail(fanout, V_STALE_LANE, "rank 4, step 2, op 2 SEND: relays bytes 0..256 of destination buffer 't'",
                "not waited for", 0);
    return 0;
}

/* ---- random relays of a matrix: the verifier's strip form against a byte-by-byte oracle ----
 * Tensor m : uint8[R, C] on rank 0, needed whole by ranks 1 and 2 (one domain each). Rank 0 sends it to
 * rank 1 in chunks that tile it (rectangles through staging, or byte ranges straight into rank 1's
 * buffer), one step each; rank 1 relays it to rank 2 in chunks of another tiling (rectangles packed from
 * its buffer, or byte ranges sent from it), after the writes. Broken variants: one relayed chunk in the
 * step that writes its last bytes (before they are written), one more chunk written on top (written
 * twice), one chunk never sent (no op writes). The verifier must accept the good plans and refuse each
 * broken one for its own reason, whatever the shapes: rectangles at the row pitch, ranges crossing rows,
 * partial rows, skewed windows whose runs cross rows, a pitch-1 binding when every chunk is a range. */

typedef struct {
    int kind;       /* 0: rows [r0, r1) x columns [c0, c1); 1: bytes [a, b); 2: n runs of k bytes from a, C apart */
    uint64_t a, b;  /* (a skewed window's runs may cross from one row into the next) */
    uint64_t r0, r1, c0, c1;
    uint64_t n, k;
} mchunk;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A random tiling of the R x C matrix, of one kind (mode 0): guillotine rectangles; (1) byte ranges;
 * (2) column windows of the matrix shifted by o bytes (runs C apart that cross rows) and the two ranges
 * left at its ends. */
static uint32_t tiling(uint64_t *s, uint64_t R, uint64_t C, int mode, mchunk *out, uint32_t max)
{
    uint32_t n = 0;
    uint64_t N = R * C;
    if (mode == 2 && R >= 2 && C >= 2) {
        uint64_t o = 1 + rnd(s) % (C - 1), c = 0;
        out[n++] = (mchunk){1, 0, o, 0, 0, 0, 0, 0, 0};
        out[n++] = (mchunk){1, o + (R - 1) * C, N, 0, 0, 0, 0, 0, 0};
        while (c < C) {
            uint64_t k = n + 1 == max ? C - c : 1 + rnd(s) % C;
            if (k > C - c) k = C - c;
            out[n++] = (mchunk){2, o + c, 0, 0, 0, 0, 0, R - 1, k};
            c += k;
        }
        return n;
    }
    if (mode) {
        uint64_t at = 0;
        while (at < N) {
            uint64_t len = n + 1 == max ? N - at : 1 + rnd(s) % (2 * C);
            if (len > N - at) len = N - at;
            out[n++] = (mchunk){1, at, at + len, 0, 0, 0, 0, 0, 0};
            at += len;
        }
        return n;
    }
    out[n++] = (mchunk){0, 0, 0, 0, R, 0, C, 0, 0};
    for (uint32_t tries = 0; tries < 3 * max && n < max; tries++) { /* split a random chunk */
        mchunk *x = &out[rnd(s) % n];
        int rows = rnd(s) & 1;
        uint64_t lo = rows ? x->r0 : x->c0, hi = rows ? x->r1 : x->c1;
        if (hi - lo < 2) continue;
        uint64_t cut = lo + 1 + rnd(s) % (hi - lo - 1);
        mchunk y = *x;
        if (rows) x->r1 = cut, y.r0 = cut;
        else x->c1 = cut, y.c0 = cut;
        out[n++] = y;
    }
    return n;
}

static uint64_t mbytes(const mchunk *x)
{
    return x->kind == 1 ? x->b - x->a : x->kind == 2 ? x->n * x->k : (x->r1 - x->r0) * (x->c1 - x->c0);
}

static rs_desc mdesc(uint32_t loc, const mchunk *x, uint64_t C)
{
    if (x->kind == 1) return rtb_range(loc, x->a, x->b - x->a);
    rs_desc d;
    memset(&d, 0, sizeof d);
    d.loc = loc;
    d.ndim = 2;
    d.offset = x->kind == 2 ? x->a : x->r0 * C + x->c0;
    d.count[0] = x->kind == 2 ? x->n : x->r1 - x->r0, d.stride[0] = C;
    d.count[1] = x->kind == 2 ? x->k : x->c1 - x->c0, d.stride[1] = 1;
    return d;
}

static int minside(const mchunk *x, uint64_t C, uint64_t byte)
{
    if (x->kind == 1) return byte >= x->a && byte < x->b;
    if (x->kind == 2) return byte >= x->a && (byte - x->a) / C < x->n && (byte - x->a) % C < x->k;
    uint64_t r = byte / C, c = byte % C;
    return r >= x->r0 && r < x->r1 && c >= x->c0 && c < x->c1;
}

enum { M_OK, M_EARLY, M_TWICE, M_HOLE, M_NVARIANTS };

/* Builds case `seed` (variant v) into P. */
static void matrix_case(uint64_t seed, int v, rs_plan *P, uint64_t *Rp, uint64_t *Cp)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    uint64_t R = 1 + rnd(&s) % 9, C = 1 + rnd(&s) % 13, N = R * C;
    *Rp = R, *Cp = C;
    mchunk w[12], rd[12];
    uint32_t nw = tiling(&s, R, C, (int)(rnd(&s) % 3), w, 8);
    uint32_t nr = tiling(&s, R, C, (int)(rnd(&s) % 3), rd, 8);
    if (v == M_TWICE) { /* one more chunk over what is written */
        mchunk extra[12];
        uint32_t ne = tiling(&s, R, C, (int)(rnd(&s) % 3), extra, 4);
        w[nw++] = extra[rnd(&s) % ne];
    }
    uint32_t hole = v == M_HOLE ? (uint32_t)(rnd(&s) % nw) : UINT32_MAX;
    /* each read's step on rank 1: after the writes, or (early) the step of the last write it touches */
    uint32_t rstep[12], early = v == M_EARLY ? (uint32_t)(rnd(&s) % nr) : UINT32_MAX;
    for (uint32_t j = 0; j < nr; j++) {
        rstep[j] = nw + j;
        if (j != early) continue;
        uint32_t last = 0;
        for (uint32_t i = 0; i < nw; i++)
            for (uint64_t x = 0; x < N; x++)
                if (minside(&w[i], C, x) && minside(&rd[j], C, x)) last = i;
        rstep[j] = last;
    }
    rtb *b = rtb_new(3, 1);
    int64_t one[] = {1}, two[] = {2}, shape[] = {(int64_t)R, (int64_t)C};
    uint32_t ms = rtb_mesh(b, "src", 1, AX1, one, 0), md = rtb_mesh(b, "dst", 1, AX1, two, 1);
    uint32_t t = rtb_tensor(b, "m", RS_DT_UINT8, 2, shape);
    rtb_piece(b, RS_SRC, t, ms, 0, NULL, "m");
    rtb_piece(b, RS_DST, t, md, 0, NULL, "m");
    rtb_layout_done(b);
    uint32_t s0 = rtb_binding(b, 0, "m", RS_SRC), d1 = rtb_binding(b, 1, "m", RS_DST),
             d2 = rtb_binding(b, 2, "m", RS_DST);
    const uint32_t S = RS_LOC_STAGING;
    uint64_t woff[12], roff[12], at = 0;
    for (uint32_t i = 0; i < nw; i++) woff[i] = at, at += mbytes(&w[i]);
    uint64_t wtotal = at;
    at = 0;
    for (uint32_t j = 0; j < nr; j++) roff[j] = at, at += mbytes(&rd[j]);
    rtb_staging(b, 0, wtotal);
    rtb_staging(b, 1, wtotal + N);
    rtb_staging(b, 2, N);
    /* rank 0: one step per written chunk */
    for (uint32_t i = 0; i < nw; i++) {
        if (i == hole) continue;
        rtb_step(b, 0, RS_LANE_NET, 0, NULL);
        if (w[i].kind == 1) {
            rtb_p2p(b, 0, 1, 1, s0, w[i].a, mbytes(&w[i]));
        } else {
            rtb_copy(b, 0, RS_OP_PACK, mdesc(s0, &w[i], C), rtb_range(S, woff[i], mbytes(&w[i])));
            rtb_p2p(b, 0, 1, 1, S, woff[i], mbytes(&w[i]));
        }
    }
    /* rank 1: step i receives written chunk i; reads in their steps (packs, then the p2p, then unpacks) */
    uint32_t order[12], no = 0;
    for (uint32_t st = 0; st < nw + nr; st++) {
        int any = st < nw && st != hole;
        for (uint32_t j = 0; j < nr; j++) any |= rstep[j] == st;
        if (!any) continue;
        rtb_step(b, 1, RS_LANE_NET, 0, NULL);
        for (uint32_t j = 0; j < nr; j++)
            if (rstep[j] == st && rd[j].kind != 1)
                rtb_copy(b, 1, RS_OP_PACK, mdesc(d1, &rd[j], C), rtb_range(S, wtotal + roff[j], mbytes(&rd[j])));
        if (st < nw && st != hole) {
            if (w[st].kind == 1) rtb_p2p(b, 1, 0, 0, d1, w[st].a, mbytes(&w[st]));
            else rtb_p2p(b, 1, 0, 0, S, woff[st], mbytes(&w[st]));
        }
        for (uint32_t j = 0; j < nr; j++)
            if (rstep[j] == st) {
                if (rd[j].kind == 1) rtb_p2p(b, 1, 1, 2, d1, rd[j].a, mbytes(&rd[j]));
                else rtb_p2p(b, 1, 1, 2, S, wtotal + roff[j], mbytes(&rd[j]));
                order[no++] = j;
            }
        if (st < nw && st != hole && w[st].kind != 1)
            rtb_copy(b, 1, RS_OP_UNPACK, rtb_range(S, woff[st], mbytes(&w[st])), mdesc(d1, &w[st], C));
    }
    /* rank 2: receives the relayed chunks in the order rank 1 sends them */
    for (uint32_t q = 0; q < no; q++) {
        uint32_t j = order[q];
        rtb_step(b, 2, RS_LANE_NET, 0, NULL);
        if (rd[j].kind == 1) {
            rtb_p2p(b, 2, 0, 1, d2, rd[j].a, mbytes(&rd[j]));
        } else {
            rtb_p2p(b, 2, 0, 1, S, roff[j], mbytes(&rd[j]));
            rtb_copy(b, 2, RS_OP_UNPACK, rtb_range(S, roff[j], mbytes(&rd[j])), mdesc(d2, &rd[j], C));
        }
    }
    rtb_finish(b, P);
}

static int t_matrices(void)
{
    static const char *want[M_NVARIANTS] = {NULL, "before they are written", "are written twice",
                                            "that no op of the plan writes on rank 1"};
    uint32_t n = 0;
    for (uint64_t seed = 1; seed <= 1500; seed++)
        for (int v = 0; v < M_NVARIANTS; v++) {
            rs_plan P;
            uint64_t R, C;
            matrix_case(seed, v, &P, &R, &C);
            char err[700];
            int rc = rs_plan_verify_all(&P, err, sizeof err);
            if (v == M_OK ? rc != 0 : rc == 0 || !strstr(err, want[v])) {
                fprintf(stderr, "seed %llu variant %d (%llu x %llu): %s (want %s)\n", (unsigned long long)seed, v,
                        (unsigned long long)R, (unsigned long long)C, rc ? err : "accepted",
                        want[v] ? want[v] : "accepted");
                return 1;
            }
            rs_plan_free(&P);
            n++;
        }
    printf("matrices: %u plans judged right\n", n);
    return 0;
}

static const struct {
    const char *name;
    int (*f)(void);
} tests[] = {
    {"chain", t_chain},           {"fanout", t_fanout},         {"same_step", t_same_step},
    {"never_written", t_never_written}, {"twice", t_twice},     {"wrong_pack", t_wrong_pack},
    {"wrong_send", t_wrong_send}, {"other_lane", t_other_lane}, {"stale_lane", t_stale_lane},
    {"matrices", t_matrices},
};

int main(int argc, char **argv)
{
    int ran = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (argc > 1 && strcmp(argv[1], tests[i].name)) continue;
        printf("== %s\n", tests[i].name);
        if (tests[i].f()) return 1;
        ran++;
    }
    if (!ran) {
        fprintf(stderr, "unknown test '%s'\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    return 0;
}
