/* test_cost.c - hand-computed cost-model cases: the bound, the modeled time of a hand-written plan and
 * both baselines, each checked against a formula worked out on paper (docs/cost-model.md). Defaults:
 * NIC 400 Gb/s = 50e9 B/s, NVLink 3600 Gb/s = 450e9 B/s, HBM 3e12 B/s (a copy of B bytes costs
 * 2B / HBM), 5 us per message (latency x bandwidth extra bytes on each link), 512 KiB broadcast chunk.
 * Usage: test_cost [--svg FILE] [CASE]. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "cost.h"

static int failures;
static const char *svg_out; /* --svg FILE: also draw the report of the case */

#define NIC 50e9
#define NVL 450e9
#define HBM 3e12
#define LAT 5e-6
#define HOP_NET (LAT + 524288.0 / NIC)
#define HOP_NVL (LAT + 524288.0 / NVL)
#define MSG_NET(b) (((double)(b) + LAT * NIC) / NIC) /* one message alone on its NICs */
#define COPY(b) (2.0 * (double)(b) / HBM)

static void near(const char *what, double got, double want)
{
    double tol = 1e-9 * fabs(want) + 1e-15;
    if (fabs(got - want) > tol) {
        fprintf(stderr, "FAIL %s: got %.12g, want %.12g\n", what, got, want);
        failures++;
    } else
        printf("ok   %-34s %.9g\n", what, got);
}

static void eq_u64(const char *what, uint64_t got, uint64_t want)
{
    if (got != want) {
        fprintf(stderr, "FAIL %s: got %llu, want %llu\n", what, (unsigned long long)got, (unsigned long long)want);
        failures++;
    } else
        printf("ok   %-34s %llu\n", what, (unsigned long long)got);
}

static rs_cost_report report(rs_plan *P)
{
    tb_roundtrip(P);
    rs_cost_params p;
    rs_cost_params_default(&p, &P->layout.topo);
    rs_cost_report r;
    char err[512];
    if (rs_cost_report_build(P, &p, &r, err, sizeof err)) {
        fprintf(stderr, "report: %s\n", err);
        exit(1);
    }
    if (svg_out && rs_stats_svg(P, &r, svg_out, err, sizeof err)) {
        fprintf(stderr, "svg: %s\n", err);
        exit(1);
    }
    return r;
}

static const char *const AX1[] = {"a"};

/* Two ranks in two domains: rank 0 holds w (1e8 bytes), rank 1 needs all of it. */
static void two_ranks(void)
{
    rs_plan P;
    uint32_t dom[] = {0, 1};
    tb_init(&P, 2, dom, 400, 3600);
    int64_t one = 1;
    int32_t r0 = 0, r1 = 1;
    uint32_t ms = tb_mesh(&P, "train", 1, AX1, &one, &r0), md = tb_mesh(&P, "infer", 1, AX1, &one, &r1);
    int64_t shape[] = {50000000};
    tb_tensor(&P, "w", RS_DT_BF16, 1, shape);
    tb_piece(&P, RS_SRC, ms, "w.src", 0, NULL);
    tb_piece(&P, RS_DST, md, "w.dst", 0, NULL);
    tb_bind(&P);
    tb_step(&P, 0, RS_LANE_NET, 0, NULL);
    tb_send(&P, 0, 1, tb_loc(&P, 0, "w.src"), 0, 100000000);
    tb_step(&P, 1, RS_LANE_NET, 0, NULL);
    tb_recv(&P, 1, 0, tb_loc(&P, 1, "w.dst"), 0, 100000000);
    rs_cost_report r = report(&P);
    double S = 1e8;
    near("two_ranks bound", r.bound.bound_s, S / NIC);
    near("two_ranks dst bound", r.bound.dst_s, S / NIC);
    near("two_ranks src bound", r.bound.src_s, S / NIC);
    near("two_ranks modeled", r.plan.time_s, MSG_NET(S));
    /* root 0 holds everything: pack the bucket, stream it to rank 1, rank 1 copies it out, plus one
     * network hop of pipeline fill */
    near("two_ranks gather-broadcast", r.gather_broadcast.time_s, COPY(S) + MSG_NET(S) + COPY(S) + HOP_NET);
    near("two_ranks direct", r.direct.time_s, COPY(S) + MSG_NET(S) + COPY(S));
    eq_u64("two_ranks net bytes", r.traffic.net_bytes, 100000000);
    eq_u64("two_ranks nvl bytes", r.traffic.nvl_bytes, 0);
    eq_u64("two_ranks relay bytes", r.traffic.relay_bytes, 0);
    eq_u64("two_ranks model bytes", r.bound.model_bytes, 100000000);
    near("two_ranks busiest link", r.plan.busiest_s, MSG_NET(S));
    rs_cost_report_free(&r);
    rs_plan_free(&P);
}

/* One domain of replicas: 4 source replicas (domain 0) of w [4, 5e7] bf16 (4e8 bytes), 4 destination
 * replicas (domain 1). Plan: source i sends row i to destination i (NET, into staging, unpacked),
 * then each destination sends its row to the 3 others over NVLink (from staging) and unpacks theirs. */
static void replicas(void)
{
    rs_plan P;
    uint32_t dom[] = {0, 0, 0, 0, 1, 1, 1, 1};
    tb_init(&P, 8, dom, 400, 3600);
    const char *ax[] = {"dp"};
    int64_t four = 4;
    int32_t rs[] = {0, 1, 2, 3}, rd[] = {4, 5, 6, 7};
    uint32_t ms = tb_mesh(&P, "train", 1, ax, &four, rs), md = tb_mesh(&P, "infer", 1, ax, &four, rd);
    int64_t shape[] = {4, 50000000};
    tb_tensor(&P, "w", RS_DT_BF16, 2, shape);
    tb_piece(&P, RS_SRC, ms, "w.src", 0, NULL);
    tb_piece(&P, RS_DST, md, "w.dst", 0, NULL);
    tb_bind(&P);
    const uint64_t ROW = 100000000;
    for (uint32_t i = 0; i < 4; i++) {
        tb_step(&P, i, RS_LANE_NET, 0, NULL);
        tb_send(&P, i, 4 + i, tb_loc(&P, i, "w.src"), i * ROW, ROW);
    }
    for (uint32_t i = 0; i < 4; i++) {
        uint32_t r = 4 + i, loc = tb_loc(&P, r, "w.dst");
        uint32_t s0 = tb_step(&P, r, RS_LANE_NET, 0, NULL);
        tb_recv(&P, r, i, RS_LOC_STAGING, 0, ROW);
        tb_copy(&P, r, RS_OP_UNPACK, RS_LOC_STAGING, 0, 0, loc, i * ROW, 0, 1, ROW);
        tb_step(&P, r, RS_LANE_NVL, 1, &s0);
        for (uint32_t j = 0; j < 4; j++)
            if (j != i) tb_send(&P, r, 4 + j, RS_LOC_STAGING, 0, ROW);
        uint32_t slot = 1;
        for (uint32_t j = 0; j < 4; j++)
            if (j != i) tb_recv(&P, r, 4 + j, RS_LOC_STAGING, slot++ * ROW, ROW);
        slot = 1;
        for (uint32_t j = 0; j < 4; j++)
            if (j != i) tb_copy(&P, r, RS_OP_UNPACK, RS_LOC_STAGING, slot++ * ROW, 0, loc, j * ROW, 0, 1, ROW);
    }
    rs_cost_report r = report(&P);
    double S = 4e8, Q = 1e8;
    near("replicas bound", r.bound.bound_s, S / (4 * NIC));
    near("replicas dst bound", r.bound.dst_s, S / (4 * NIC));
    near("replicas src bound", r.bound.src_s, S / (4 * NIC));
    /* NET: 4 independent messages; unpack one row; NVL: 3 flows on each NVLink out and in, each at
     * 450e9 / 3; unpack three rows */
    double nvl3 = 3.0 * (Q + LAT * NVL) / NVL;
    near("replicas modeled", r.plan.time_s, MSG_NET(Q) + COPY(Q) + nvl3 + COPY(3 * Q));
    /* direct: destination i fetches the whole tensor from source i (round-robin over the replicas) */
    near("replicas direct", r.direct.time_s, COPY(S) + MSG_NET(S) + COPY(S));
    /* gather-broadcast: root 0 holds all; 4 channels leave its NIC at a quarter of its bandwidth each;
     * channel j enters the domain at destination j and rings through the other three over NVLink
     * meanwhile; fill: one network hop and three NVLink hops */
    near("replicas gather-broadcast", r.gather_broadcast.time_s,
         COPY(S) + 4.0 * (Q + LAT * NIC) / NIC + COPY(S) + HOP_NET + 3 * HOP_NVL);
    eq_u64("replicas net bytes", r.traffic.net_bytes, 4 * ROW);
    eq_u64("replicas nvl bytes", r.traffic.nvl_bytes, 12 * ROW);
    eq_u64("replicas relay bytes", r.traffic.relay_bytes, 0);
    rs_cost_report_free(&r);
    rs_plan_free(&P);
}

/* Row to column: w [1000, 100000] bf16 (2e8 bytes); sources 0, 1 shard rows, destinations 2, 3 shard
 * columns; every rank its own domain. Sources pack two quarters into staging and send each;
 * destinations receive straight into their buffers (their rows are contiguous). */
static void row_to_col(void)
{
    rs_plan P;
    uint32_t dom[] = {0, 1, 2, 3};
    tb_init(&P, 4, dom, 400, 3600);
    const char *ax[] = {"tp"};
    int64_t two = 2;
    int32_t rs[] = {0, 1}, rd[] = {2, 3};
    uint32_t ms = tb_mesh(&P, "train", 1, ax, &two, rs), md = tb_mesh(&P, "infer", 1, ax, &two, rd);
    int64_t shape[] = {1000, 100000};
    tb_tensor(&P, "w", RS_DT_BF16, 2, shape);
    const int64_t rows[][3] = {{0, RS_PLACE_SHARD, 0}}, cols[][3] = {{0, RS_PLACE_SHARD, 1}};
    tb_piece(&P, RS_SRC, ms, "w.src", 1, rows);
    tb_piece(&P, RS_DST, md, "w.dst", 1, cols);
    tb_bind(&P);
    const uint64_t QB = 50000000, ROWB = 200000, HALF = 100000;
    for (uint32_t i = 0; i < 2; i++) {
        uint32_t loc = tb_loc(&P, i, "w.src");
        tb_step(&P, i, RS_LANE_NET, 0, NULL);
        for (uint32_t j = 0; j < 2; j++)
            tb_copy(&P, i, RS_OP_PACK, loc, j * HALF, ROWB, RS_LOC_STAGING, j * QB, HALF, 500, HALF);
        for (uint32_t j = 0; j < 2; j++) tb_send(&P, i, 2 + j, RS_LOC_STAGING, j * QB, QB);
    }
    for (uint32_t j = 0; j < 2; j++) {
        uint32_t loc = tb_loc(&P, 2 + j, "w.dst");
        tb_step(&P, 2 + j, RS_LANE_NET, 0, NULL);
        for (uint32_t i = 0; i < 2; i++) tb_recv(&P, 2 + j, i, loc, i * QB, QB);
    }
    rs_cost_report r = report(&P);
    double S = 2e8, Q = 5e7;
    near("row_to_col bound", r.bound.bound_s, (S / 2) / NIC);
    near("row_to_col src bound", r.bound.src_s, S / (2 * NIC));
    /* pack 1e8 bytes, then 2 messages on every NIC, each at half the bandwidth */
    near("row_to_col modeled", r.plan.time_s, COPY(2 * Q) + 2.0 * (Q + LAT * NIC) / NIC);
    near("row_to_col direct", r.direct.time_s, COPY(2 * Q) + 2.0 * (Q + LAT * NIC) / NIC + COPY(2 * Q));
    /* gather: rank 1 sends its half to root 0, which packs the whole tensor; broadcast: a chain
     * 0 -> 2 -> 3 streaming the tensor (every hop alone on its NICs); rank 3 is two hops deep */
    double gather = MSG_NET(S / 2) + COPY(S);
    near("row_to_col gather-broadcast", r.gather_broadcast.time_s, gather + MSG_NET(S) + COPY(S / 2) + 2 * HOP_NET);
    eq_u64("row_to_col net bytes", r.traffic.net_bytes, 4 * QB);
    eq_u64("row_to_col pack bytes", r.traffic.pack_bytes, 4 * QB);
    eq_u64("row_to_col max nic out", r.traffic.nic_out[0], 2 * QB);
    rs_cost_report_free(&r);
    rs_plan_free(&P);
}

/* Relay: rank 0 (domain 0) holds w (1e8 bytes); ranks 1 and 2 (domains 1, 2) need it. Rank 1
 * receives it into staging, unpacks it and forwards it to rank 2: relay bytes 1e8, and the bound
 * with relays (each byte leaves the source once) is half the bound without. */
static void relay(void)
{
    rs_plan P;
    uint32_t dom[] = {0, 1, 2};
    tb_init(&P, 3, dom, 400, 3600);
    int64_t one = 1, two = 2;
    int32_t r0 = 0, rd[] = {1, 2};
    const char *ax[] = {"dp"};
    uint32_t ms = tb_mesh(&P, "train", 1, AX1, &one, &r0), md = tb_mesh(&P, "infer", 1, ax, &two, rd);
    int64_t shape[] = {50000000};
    tb_tensor(&P, "w", RS_DT_BF16, 1, shape);
    tb_piece(&P, RS_SRC, ms, "w.src", 0, NULL);
    tb_piece(&P, RS_DST, md, "w.dst", 0, NULL);
    tb_bind(&P);
    const uint64_t S = 100000000;
    tb_step(&P, 0, RS_LANE_NET, 0, NULL);
    tb_send(&P, 0, 1, tb_loc(&P, 0, "w.src"), 0, S);
    tb_step(&P, 1, RS_LANE_NET, 0, NULL);
    tb_recv(&P, 1, 0, RS_LOC_STAGING, 0, S);
    tb_copy(&P, 1, RS_OP_UNPACK, RS_LOC_STAGING, 0, 0, tb_loc(&P, 1, "w.dst"), 0, 0, 1, S);
    tb_step(&P, 1, RS_LANE_NET, 0, NULL);
    tb_send(&P, 1, 2, RS_LOC_STAGING, 0, S);
    tb_step(&P, 2, RS_LANE_NET, 0, NULL);
    tb_recv(&P, 2, 1, tb_loc(&P, 2, "w.dst"), 0, S);
    rs_cost_report r = report(&P);
    near("relay bound", r.bound.bound_s, (double)S / NIC);
    near("relay bound without relays", r.bound.bound_norelay_s, 2.0 * (double)S / NIC);
    near("relay modeled", r.plan.time_s, MSG_NET(S) + COPY(S) + MSG_NET(S));
    eq_u64("relay relay bytes", r.traffic.relay_bytes, S);
    eq_u64("relay net bytes", r.traffic.net_bytes, 2 * S);
    rs_cost_report_free(&r);
    rs_plan_free(&P);
}

/* The lower bound of P's layout with the default parameters (exits on an error). */
static rs_cost_bound bound_of(const rs_plan *P)
{
    rs_cost_params p;
    rs_cost_params_default(&p, &P->layout.topo);
    rs_cost_bound b;
    char err[256];
    if (rs_cost_lower_bound(&P->layout, &p, &b, err, sizeof err)) {
        fprintf(stderr, "bound: %s\n", err);
        exit(1);
    }
    return b;
}

/* Held in the domain: w [2, 5e7] bf16; rank 0 (domain 0) holds all of it, rank 1 (domain 0) and rank 2
 * (domain 1) need it; rank 3 (domain 1) holds row 1 only (a second source piece). Domain 0
 * needs nothing from outside; domain 1 needs row 0 (1e8 bytes) from outside. */
static void held_in_domain(void)
{
    rs_plan P;
    uint32_t dom[] = {0, 0, 1, 1};
    tb_init(&P, 4, dom, 400, 3600);
    int64_t one = 1, two = 2;
    int32_t r0 = 0, rb[] = {0, 3}, rd[] = {1, 2};
    const char *ax[] = {"dp"};
    uint32_t m0 = tb_mesh(&P, "a", 1, AX1, &one, &r0), mb = tb_mesh(&P, "b", 1, ax, &two, rb);
    uint32_t md = tb_mesh(&P, "infer", 1, ax, &two, rd);
    int64_t shape[] = {2, 50000000};
    tb_tensor(&P, "w", RS_DT_BF16, 2, shape);
    tb_piece(&P, RS_SRC, m0, "w.src", 0, NULL);
    /* mesh b = ranks [0, 3] sharding dim 0: rank 0 row 0 (held twice), rank 3 row 1 */
    const int64_t rows[][3] = {{0, RS_PLACE_SHARD, 0}};
    tb_piece(&P, RS_SRC, mb, "w.src2", 1, rows);
    tb_piece(&P, RS_DST, md, "w.dst", 0, NULL);
    tb_bind(&P);
    rs_cost_bound b = bound_of(&P);
    double ROW = 1e8;
    eq_u64("held need bytes", b.need_bytes, (uint64_t)ROW);
    eq_u64("held distinct bytes", b.distinct_bytes, (uint64_t)ROW);
    eq_u64("held model bytes", b.model_bytes, (uint64_t)(2 * ROW));
    eq_u64("held source gpus", b.nsrc_gpus, 2);
    eq_u64("held destination gpus", b.ndst_gpus, 2);
    eq_u64("held binding domain", b.dst_domain, 1);
    near("held dst bound", b.dst_s, ROW / NIC);
    near("held src bound", b.src_s, ROW / (2 * NIC));
    near("held bound", b.bound_s, ROW / NIC);
    rs_plan_free(&P);
}

/* Sets of holders: ranks 0 and 1 (domain 0) alone hold w1 (1e8 bytes), rank 2 (domain 1) alone holds w2 (1e7),
 * rank 0 alone holds w3 (2e7), ranks 0, 1 and 7 (domain 5) hold w4 (3e8); ranks 3, 4, 5 (domains 2, 3, 4) and
 * 6 (domain 0) need all four. Without relays, domains 2-4 take each from outside (4.3e8 each: the bound),
 * domain 0 only w2. The set {0, 1, 7} must send w4 three times, and also what only its members hold: w1 three
 * times (the set {0, 1} inside it) and w3 three times (rank 0): 1.26e9 bytes over 3 NICs. */
static void holder_group(void)
{
    rs_plan P;
    uint32_t dom[] = {0, 0, 1, 2, 3, 4, 0, 5};
    tb_init(&P, 8, dom, 400, 3600);
    int64_t one = 1, two = 2, three = 3, four = 4;
    int32_t ra[] = {0, 1}, rb = 2, r0 = 0, rc[] = {0, 1, 7}, rd[] = {3, 4, 5, 6};
    const char *ax[] = {"dp"};
    uint32_t ma = tb_mesh(&P, "a", 1, ax, &two, ra), mb = tb_mesh(&P, "b", 1, AX1, &one, &rb);
    uint32_t m0 = tb_mesh(&P, "z", 1, AX1, &one, &r0), mc = tb_mesh(&P, "c", 1, ax, &three, rc);
    uint32_t md = tb_mesh(&P, "infer", 1, ax, &four, rd);
    const struct {
        const char *name;
        int64_t elems;
        uint32_t mesh;
    } w[] = {{"w1", 50000000, ma}, {"w2", 5000000, mb}, {"w3", 10000000, m0}, {"w4", 150000000, mc}};
    for (int i = 0; i < 4; i++) {
        char src[8], dst[8];
        snprintf(src, sizeof src, "%s.src", w[i].name);
        snprintf(dst, sizeof dst, "%s.dst", w[i].name);
        tb_tensor(&P, w[i].name, RS_DT_BF16, 1, &w[i].elems);
        tb_piece(&P, RS_SRC, w[i].mesh, src, 0, NULL);
        tb_piece(&P, RS_DST, md, dst, 0, NULL);
    }
    tb_bind(&P);
    rs_cost_bound b = bound_of(&P);
    near("group bound", b.bound_s, 4.3e8 / NIC);
    near("group source side without relays", b.src_norelay_s, 1.3e9 / (4 * NIC));
    near("group single holder", b.holder_norelay_s, 6e7 / NIC);
    eq_u64("group single holder rank", b.holder_rank, 0);
    near("group holder set", b.group_norelay_s, 1.26e9 / (3 * NIC));
    eq_u64("group holder set first rank", b.group_first, 0);
    eq_u64("group holder set ranks", b.group_nranks, 3);
    eq_u64("group holder set bytes", b.group_bytes, 1260000000);
    rs_plan_free(&P);
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--svg")) {
        svg_out = argv[2];
        argc -= 2;
        argv += 2;
    }
    const char *which = argc > 1 ? argv[1] : "all";
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {{"two_ranks", two_ranks}, {"replicas", replicas}, {"row_to_col", row_to_col},
                 {"relay", relay},         {"held_in_domain", held_in_domain}, {"holder_group", holder_group}};
    int ran = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!strcmp(which, "all") || !strcmp(which, cases[i].name)) {
            cases[i].fn();
            ran++;
        }
    if (!ran) {
        fprintf(stderr, "unknown case %s\n", which);
        return 2;
    }
    return failures ? 1 : 0;
}
