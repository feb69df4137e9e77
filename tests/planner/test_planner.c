/* test_planner.c - planner tests: hand-built layouts with specific expectations (unit), random layouts
 * compiled, verified and replayed on the reference executor (prop), random damage to valid plans that
 * the whole-plan verifier must catch whenever the executor sees wrong results (mutate), and byte-identical
 * output for the same input (determinism), and the cost model's lower bound against counting elements
 * (bound). Usage: test_planner unit | prop N SEED | bound N SEED | mutate N SEED | determinism. A failing random case prints its seed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "gen.h"
#include "interp.h"
#include "lb.h"
#include "mutate.h"
#include "plan_dump.h"
#include "planner.h"
#include "util.h"

static int failures;
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                  \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static int desc_cmp(const void *a, const void *b)
{
    const rs_desc *x = a, *y = b;
    if (x->loc != y->loc) return x->loc < y->loc ? -1 : 1;
    if (x->ndim != y->ndim) return x->ndim < y->ndim ? -1 : 1;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    for (uint32_t i = 0; i < x->ndim; i++) {
        if (x->count[i] != y->count[i]) return x->count[i] < y->count[i] ? -1 : 1;
        if (x->stride[i] != y->stride[i]) return x->stride[i] < y->stride[i] ? -1 : 1;
    }
    return 0;
}

/* the planner writes each distinct descriptor of a rank once (ops share them) */
static int descs_distinct(const rs_plan *P)
{
    for (uint32_t r = 0; r < P->layout.topo.world; r++) {
        const rs_rank_prog *g = &P->ranks[r];
        if (g->ndescs < 2) continue;
        rs_desc *d = malloc(g->ndescs * sizeof *d);
        for (uint32_t i = 0; i < g->ndescs; i++) rs_prog_desc(g, i, &d[i]);
        qsort(d, g->ndescs, sizeof *d, desc_cmp);
        int dup = 0;
        for (uint32_t i = 1; i < g->ndescs && !dup; i++) dup = !desc_cmp(&d[i - 1], &d[i]);
        free(d);
        if (dup) return 0;
    }
    return 1;
}

/* RESHARD_THREADS for what follows: 1 or 2 threads, 0 as the machine allows */
static void threads(int n)
{
    if (n) setenv("RESHARD_THREADS", n == 1 ? "1" : "2", 1);
    else unsetenv("RESHARD_THREADS");
}

static int plan_it(rs_layout *L, uint64_t staging, rs_plan *P, rs_plan_stats *S)
{
    rs_plan_opts o;
    rs_plan_opts_default(&o);
    if (staging) o.staging_bytes = staging;
    char err[600];
    if (rs_planner_plan(L, &o, P, S, err, sizeof err, NULL)) {
        fprintf(stderr, "plan failed: %s\n", err);
        failures++;
        return -1;
    }
    CHECK(descs_distinct(P));
    /* the verifier's parts ran in turn inside the verification phase, the simulation always */
    double parts = 0;
    for (int i = 0; i < RS_VERIFY_PARTS; i++) {
        CHECK(S->verify_seconds[i] >= 0);
        parts += S->verify_seconds[i];
    }
    CHECK(S->verify_seconds[RS_VERIFY_SIMULATE] > 0);
    CHECK(parts <= S->seconds[5] + 1e-6);
    char msg[600];
    for (int s = 0; s < 2; s++)
        if (rs_interp_run(P, (uint64_t)s, msg, sizeof msg)) {
            fprintf(stderr, "executor: %s\n", msg);
            failures++;
            return -1;
        }
    return 0;
}

static uint64_t count_ops(const rs_plan *P, int code, int lane, int zero_copy)
{
    uint64_t n = 0;
    for (uint32_t r = 0; r < P->layout.topo.world; r++) {
        const rs_rank_prog *g = &P->ranks[r];
        for (uint32_t s = 0; s < g->nsteps; s++)
            for (uint32_t k = 0; k < g->steps[s].nops; k++) {
                const rs_op *o = &g->ops[g->steps[s].op_begin + k];
                if (o->code != code || (lane >= 0 && g->steps[s].lane != lane)) continue;
                if (zero_copy >= 0 && (o->loc != RS_LOC_STAGING) != zero_copy) continue;
                n++;
            }
    }
    return n;
}

static uint64_t lane_bytes(const rs_plan *P, int lane, uint32_t rank_or_all, int code)
{
    uint64_t n = 0;
    for (uint32_t r = 0; r < P->layout.topo.world; r++) {
        if (rank_or_all != RS_NONE && r != rank_or_all) continue;
        const rs_rank_prog *g = &P->ranks[r];
        for (uint32_t s = 0; s < g->nsteps; s++)
            for (uint32_t k = 0; k < g->steps[s].nops; k++) {
                const rs_op *o = &g->ops[g->steps[s].op_begin + k];
                if (o->code == code && g->steps[s].lane == lane) n += o->bytes;
            }
    }
    return n;
}

/* ---- unit cases ---- */

/* An fp32 tensor `name` of `shape`, sharded along dim `dim` over the nsrc ranks from 0, needed whole by the
 * ndst ranks from dst_first (world ranks in domains of dom), planned with the default options. */
static int plan_shard_to_whole(uint32_t world, uint32_t dom, int64_t nsrc, int64_t ndst, uint32_t dst_first,
                               const char *name, const int64_t shape[2], uint32_t dim, rs_plan *P, rs_plan_stats *S)
{
    rs_layout L;
    lb_init(&L, world, dom, NULL);
    uint32_t src = lb_mesh(&L, 1, &nsrc, NULL, 0), dst = lb_mesh(&L, 1, &ndst, NULL, (int32_t)dst_first);
    uint32_t t = lb_tensor(&L, name, RS_DT_FP32, 2, shape);
    rs_place p = lb_shard(0, (uint8_t)dim, 0);
    lb_piece(&L, t, RS_SRC, src, lb_buffer(&L, name, RS_SRC, RS_DT_FP32, 0, NULL), 1, &p, NULL, NULL);
    lb_piece(&L, t, RS_DST, dst, lb_buffer(&L, name, RS_DST, RS_DT_FP32, 0, NULL), 0, NULL, NULL, NULL);
    lb_finish(&L);
    return plan_it(&L, 0, P, S);
}

/* rows on 4 ranks -> columns on 4 other ranks (two domains of 4) */
/* A 64 x 48 bf16 tensor row-sharded over ranks 0..4, column-sharded over ranks 4..8 (domains of 4). */
static void row_to_column_layout(rs_layout *L)
{
    lb_init(L, 8, 4, NULL);
    int64_t four = 4, shape[2] = {64, 48};
    uint32_t src = lb_mesh(L, 1, &four, NULL, 0), dst = lb_mesh(L, 1, &four, NULL, 4);
    uint32_t t = lb_tensor(L, "w", RS_DT_BF16, 2, shape);
    rs_place p0 = lb_shard(0, 0, 0), p1 = lb_shard(0, 1, 0);
    lb_piece(L, t, RS_SRC, src, lb_buffer(L, "w", RS_SRC, RS_DT_BF16, 0, NULL), 1, &p0, NULL, NULL);
    lb_piece(L, t, RS_DST, dst, lb_buffer(L, "w", RS_DST, RS_DT_BF16, 0, NULL), 1, &p1, NULL, NULL);
    lb_finish(L);
}

static void unit_row_to_column(void)
{
    rs_layout L;
    row_to_column_layout(&L);
    rs_plan P;
    rs_plan_stats S;
    if (plan_it(&L, 0, &P, &S)) return;
    /* every source sends one message to every destination, all over the network */
    CHECK(count_ops(&P, RS_OP_SEND, RS_LANE_NET, -1) == 16);
    CHECK(S.net_bytes == 64 * 48 * 2);
    CHECK(S.fwd_bytes == 0 && S.local_bytes == 0 && S.nvl_bytes == 0);
    /* each sender packs its 4 column blocks with one strided read (the receiver is the outer dim, stepping
     * by one block's width: the verifier lets a source descriptor step inside its span); each receiver gets
     * 4 row blocks that are contiguous in staging and in its buffer: one merged UNPACK */
    CHECK(count_ops(&P, RS_OP_PACK, -1, -1) == 4);
    CHECK(count_ops(&P, RS_OP_UNPACK, -1, -1) == 4);
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* A plan whose binding disagrees with the layout's piece there (a destination rank's binding of the wrong
 * rank, as a damaged file could have it): the verifier's piece index refuses it, with the same message on
 * one thread and on two (where the index is built beside matching). */
static void unit_verify_pieces_error(void)
{
    rs_layout L;
    row_to_column_layout(&L);
    rs_plan P;
    rs_plan_stats S;
    if (plan_it(&L, 0, &P, &S)) return;
    rs_binding *b = &P.ranks[6].bindings[0];
    b->shape[0] *= b->shape[1];
    b->ndim = 1;
    char err[2][600];
    for (int k = 0; k < 2; k++) {
        threads(k + 1);
        CHECK(rs_plan_verify_all(&P, err[k], sizeof err[k]) != 0);
    }
    threads(0);
    CHECK(strstr(err[0], "rank 6: binding of 'w' has the wrong rank") != NULL);
    CHECK(!strcmp(err[0], err[1]));
    if (strcmp(err[0], err[1]) || !strstr(err[0], "wrong rank")) fprintf(stderr, "  %s\n  %s\n", err[0], err[1]);
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* a tensor on domain 0 replicated on the 8 ranks of domain 1: crosses the network once, split 8 ways,
 * then fanned out over NVLink */
static void unit_replicated_one_domain(void)
{
    const int64_t shape[2] = {1024, 2048}; /* boxes of at least fanout_split_min (1 MiB) */
    rs_plan P;
    rs_plan_stats S;
    if (plan_shard_to_whole(16, 8, 2, 8, 8, "emb", shape, 0, &P, &S)) return;
    uint64_t bytes = 1024 * 2048 * 4;
    CHECK(S.domain_need[1] == bytes);
    CHECK(S.domain_net_in[1] == bytes);                    /* no duplicate over the network */
    CHECK(lane_bytes(&P, RS_LANE_NET, RS_NONE, RS_OP_RECV) == bytes);
    CHECK(lane_bytes(&P, RS_LANE_NVL, RS_NONE, RS_OP_RECV) == 7 * bytes); /* each byte to the 7 others */
    /* the split is balanced: every receiver gets 1/8 over the network */
    for (uint32_t r = 8; r < 16; r++) CHECK(lane_bytes(&P, RS_LANE_NET, r, RS_OP_RECV) == bytes / 8);
    /* both source ranks send half (balanced by bytes) */
    CHECK(S.rank_net_out[0] == bytes / 2 && S.rank_net_out[1] == bytes / 2);
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* replicated across domains: each domain needs its own copy over the network; sources balanced by bytes */
static void unit_replicated_across_domains(void)
{
    rs_layout L;
    lb_init(&L, 12, 4, NULL); /* 3 domains */
    int64_t s4 = 4, d2[2] = {2, 4}, shape[1] = {1000};
    uint32_t src = lb_mesh(&L, 1, &s4, NULL, 0);
    uint32_t dst = lb_mesh(&L, 2, d2, NULL, 4); /* dp across domains 1 and 2, tp inside */
    uint32_t t = lb_tensor(&L, "norm", RS_DT_FP32, 1, shape);
    lb_piece(&L, t, RS_SRC, src, lb_buffer(&L, "norm", RS_SRC, RS_DT_FP32, 0, NULL), 0, NULL, NULL, NULL);
    rs_place p = lb_shard(1, 0, 0);
    lb_piece(&L, t, RS_DST, dst, lb_buffer(&L, "norm", RS_DST, RS_DT_FP32, 0, NULL), 1, &p, NULL, NULL);
    lb_finish(&L);
    rs_plan P;
    rs_plan_stats S;
    if (plan_it(&L, 0, &P, &S)) return;
    CHECK(S.domain_net_in[1] == 4000 && S.domain_net_in[2] == 4000);
    CHECK(S.fwd_bytes == 0);
    /* 8 transfers of 500 bytes over 4 replicas: 2 each */
    for (uint32_t r = 0; r < 4; r++) CHECK(S.rank_net_out[r] == 2000);
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* pipeline stages: layer l lives on stage l / 2 (pinned); destination replicated TP-sharded */
static void unit_pipeline_pins(void)
{
    rs_layout L;
    lb_init(&L, 16, 4, NULL);
    int64_t tr[2] = {4, 2}, inf[1] = {8}, shape[2] = {32, 16};
    uint32_t src = lb_mesh(&L, 2, tr, NULL, 0), dst = lb_mesh(&L, 1, inf, NULL, 8);
    for (int l = 0; l < 8; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer%d", l);
        uint32_t t = lb_tensor(&L, name, RS_DT_BF16, 2, shape);
        rs_place sp[2] = {lb_pin(0, l / 2), lb_shard(1, 0, 0)};
        lb_piece(&L, t, RS_SRC, src, lb_buffer(&L, name, RS_SRC, RS_DT_BF16, 0, NULL), 2, sp, NULL, NULL);
        rs_place dp = lb_shard(0, 1, 0);
        lb_piece(&L, t, RS_DST, dst, lb_buffer(&L, name, RS_DST, RS_DT_BF16, 0, NULL), 1, &dp, NULL, NULL);
    }
    lb_finish(&L);
    rs_plan P;
    rs_plan_stats S;
    if (plan_it(&L, 0, &P, &S)) return;
    /* only stage ranks send; every rank of a stage sends its half */
    for (uint32_t r = 0; r < 8; r++) CHECK(S.rank_net_out[r] == 2 * 32 * 16 * 2 / 2);
    /* a stage's programs are built (and their planning ops freed) once its two layers are planned; the
     * receivers' after the last layer */
    for (uint32_t r = 0; r < 8; r++) CHECK(S.built_at[r] == 2 * (r / 2) + 2);
    for (uint32_t r = 8; r < 16; r++) CHECK(S.built_at[r] == 8);
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* experts: 16 experts pinned to 4 EP ranks, stacked into one destination buffer per rank and TP-sharded
 * over 8 ranks; the unpacks into the stacked buffer merge into few ops */
static void unit_experts(void)
{
    rs_layout L;
    lb_init(&L, 12, 4, NULL);
    int64_t ep = 4, tp = 8, E = 16, shape[3] = {16, 32, 64};
    uint32_t src = lb_mesh(&L, 1, &ep, NULL, 0), dst = lb_mesh(&L, 1, &tp, NULL, 4);
    uint32_t t = lb_tensor(&L, "w13", RS_DT_BF16, 3, shape);
    for (int e = 0; e < E; e++) {
        char name[32];
        snprintf(name, sizeof name, "fc1.%d", e % 4);
        int64_t slice[6] = {e, 0, 0, e + 1, 32, 64};
        rs_place p = lb_pin(0, e / 4);
        lb_piece(&L, t, RS_SRC, src, lb_buffer(&L, name, RS_SRC, RS_DT_BF16, 0, NULL), 1, &p, slice, NULL);
    }
    rs_place dp = lb_shard(0, 1, 0);
    lb_piece(&L, t, RS_DST, dst, lb_buffer(&L, "w13_weight", RS_DST, RS_DT_BF16, 0, NULL), 1, &dp, NULL, NULL);
    lb_finish(&L);
    rs_plan P;
    rs_plan_stats S;
    if (plan_it(&L, 0, &P, &S)) return;
    CHECK(S.cells == 16 * 8);
    /* receivers: 4 messages each; unpacks merged across experts (and senders) */
    CHECK(count_ops(&P, RS_OP_RECV, -1, -1) == 8 * 4);
    CHECK(count_ops(&P, RS_OP_UNPACK, -1, -1) <= 8 * 2);
    /* senders: one pack per source buffer (merged across the 8 receivers) */
    CHECK(count_ops(&P, RS_OP_PACK, -1, -1) <= 16);
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* stacked experts on the source side (one buffer [4 experts, 64, 64] per EP rank, as Megatron's legacy
 * GroupedMLP keeps them) to column shards on inference (TP8: [16, 64, 8] each): a sender's block for one
 * receiver is a column 8 elements wide down 4 x 64 rows, one descriptor dim that runs over two dims of the
 * piece. The verifier maps it onto the tensor in a few images; it took it row by row before (and ran out of
 * budget on DeepSeek-V3 at full size, refusing a correct plan as a planner bug). */
static void unit_stacked_experts(void)
{
    rs_layout L;
    lb_init(&L, 12, 4, NULL);
    int64_t ep = 4, tp = 8, shape[3] = {16, 64, 64};
    uint32_t src = lb_mesh(&L, 1, &ep, NULL, 0), dst = lb_mesh(&L, 1, &tp, NULL, 4);
    uint32_t t = lb_tensor(&L, "w2", RS_DT_BF16, 3, shape);
    rs_place sp = lb_shard(0, 0, 0), dp = lb_shard(0, 2, 0);
    lb_piece(&L, t, RS_SRC, src, lb_buffer(&L, "fc2", RS_SRC, RS_DT_BF16, 0, NULL), 1, &sp, NULL, NULL);
    lb_piece(&L, t, RS_DST, dst, lb_buffer(&L, "w2_weight", RS_DST, RS_DT_BF16, 0, NULL), 1, &dp, NULL, NULL);
    lb_finish(&L);
    rs_plan P;
    rs_plan_stats S;
    if (plan_it(&L, 0, &P, &S)) return;
    CHECK(S.cells == 4 * 8);
    uint64_t work = 0, ndescs = 0;
    char err[600];
    CHECK(rs_plan_verify_all_work(&P, err, sizeof err, &work) == 0);
    for (uint32_t r = 0; r < P.layout.topo.world; r++) ndescs += P.ranks[r].ndescs;
    /* a few units per descriptor: 148 for 24 descriptors; 16,468 when each column went row by row */
    if (work > 16 * ndescs) {
        fprintf(stderr, "stacked experts: verification took %llu units for %llu descriptors\n",
                (unsigned long long)work, (unsigned long long)ndescs);
        failures++;
    }
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* ragged chunks, nested shards, fixed blocks and slices on both sides */
static void unit_ragged(void)
{
    rs_layout L;
    lb_init(&L, 14, 7, NULL);
    int64_t a[2] = {3, 2}, b[1] = {7}, shape[2] = {17, 11};
    uint32_t src = lb_mesh(&L, 2, a, NULL, 0), dst = lb_mesh(&L, 1, b, NULL, 7);
    uint32_t t = lb_tensor(&L, "v", RS_DT_FP32, 2, shape);
    rs_place sp[2] = {lb_shard(0, 0, 0), lb_shard(1, 0, 0)}; /* nested: 3 then 2 on dim 0 */
    lb_piece(&L, t, RS_SRC, src, lb_buffer(&L, "v", RS_SRC, RS_DT_FP32, 0, NULL), 2, sp, NULL, NULL);
    rs_place dp = lb_shard(0, 1, 2); /* fixed block of 2 columns: 7 * 2 = 14 > 10 */
    int64_t slice[4] = {1, 1, 17, 11};
    lb_piece(&L, t, RS_DST, dst, lb_buffer(&L, "v", RS_DST, RS_DT_FP32, 0, NULL), 1, &dp, slice, NULL);
    lb_finish(&L);
    rs_plan P;
    rs_plan_stats S;
    if (plan_it(&L, 0, &P, &S)) return;
    CHECK(S.net_bytes == 16 * 10 * 4);
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* colocated: the same ranks hold source and destination; local copies, NVLink inside the domain */
static void unit_colocated(void)
{
    rs_layout L;
    lb_init(&L, 4, 4, NULL);
    int64_t four = 4, shape[2] = {8, 8};
    uint32_t m = lb_mesh(&L, 1, &four, NULL, 0);
    uint32_t t = lb_tensor(&L, "w", RS_DT_FP32, 2, shape);
    rs_place p0 = lb_shard(0, 0, 0), p1 = lb_shard(0, 1, 0);
    lb_piece(&L, t, RS_SRC, m, lb_buffer(&L, "w", RS_SRC, RS_DT_FP32, 0, NULL), 1, &p0, NULL, NULL);
    lb_piece(&L, t, RS_DST, m, lb_buffer(&L, "w", RS_DST, RS_DT_FP32, 0, NULL), 1, &p1, NULL, NULL);
    lb_finish(&L);
    rs_plan P;
    rs_plan_stats S;
    if (plan_it(&L, 0, &P, &S)) return;
    CHECK(S.local_bytes == 4 * 2 * 2 * 4);
    CHECK(S.nvl_bytes == 12 * 2 * 2 * 4);
    CHECK(S.net_bytes == 0);
    CHECK(count_ops(&P, RS_OP_COPY, -1, -1) == 4);
    CHECK(count_ops(&P, RS_OP_SEND, RS_LANE_NET, -1) == 0);
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* An op counts in 32 bits while planning: a 6 GiB tensor copied on one rank and sent across domains with
 * 128 GiB of staging (chunks of 8 GiB, halved; contiguous ones do not merge past 4 GiB in one dim) plans,
 * verifies and moves every byte (an op of more bytes keeps them in more dims). */
static void unit_huge_chunks(void)
{
    for (int colocated = 0; colocated < 2; colocated++) {
        rs_layout L;
        lb_init(&L, colocated ? 1 : 2, 1, NULL);
        int64_t one = 1, shape[1] = {(int64_t)3 << 29}; /* 1.5 G fp32 elements */
        uint32_t src = lb_mesh(&L, 1, &one, NULL, 0), dst = lb_mesh(&L, 1, &one, NULL, colocated ? 0 : 1);
        uint32_t t = lb_tensor(&L, "w", RS_DT_FP32, 1, shape);
        lb_piece(&L, t, RS_SRC, src, lb_buffer(&L, "w", RS_SRC, RS_DT_FP32, 0, NULL), 0, NULL, NULL, NULL);
        lb_piece(&L, t, RS_DST, dst, lb_buffer(&L, "w", RS_DST, RS_DT_FP32, 0, NULL), 0, NULL, NULL, NULL);
        lb_finish(&L);
        rs_plan_opts o;
        rs_plan_opts_default(&o);
        o.staging_bytes = (uint64_t)128 << 30;
        rs_plan P;
        rs_plan_stats S;
        char err[600];
        if (rs_planner_plan(&L, &o, &P, &S, err, sizeof err, NULL)) {
            fprintf(stderr, "huge chunks (%s): %s\n", colocated ? "colocated" : "across domains", err);
            failures++;
            continue;
        }
        uint64_t moved = 0;
        for (uint32_t r = 0; r < P.layout.topo.world; r++) {
            const rs_rank_prog *g = &P.ranks[r];
            for (uint32_t i = 0; i < g->nops; i++)
                if (g->ops[i].code == (colocated ? RS_OP_COPY : RS_OP_RECV)) moved += g->ops[i].bytes;
            for (uint32_t i = 0; i < g->ndescs; i++) {
                rs_desc d;
                rs_prog_desc(g, i, &d);
                for (uint32_t k = 0; k < d.ndim; k++) CHECK(d.count[k] <= UINT32_MAX);
            }
        }
        CHECK(moved == (uint64_t)6 << 30);
        rs_plan_stats_free(&S);
        rs_plan_free(&P);
    }
}

/* a block refilling a box of another shape, in a fused buffer with another tensor */
static void unit_refill(void)
{
    rs_layout L;
    lb_init(&L, 4, 2, NULL);
    int64_t two = 2, sq[3] = {2, 6, 5}, sk[2] = {4, 5};
    uint32_t src = lb_mesh(&L, 1, &two, NULL, 0), dst = lb_mesh(&L, 1, &two, NULL, 2);
    uint32_t q = lb_tensor(&L, "q", RS_DT_BF16, 3, sq), k = lb_tensor(&L, "k", RS_DT_BF16, 2, sk);
    rs_place p0 = lb_shard(0, 0, 0);
    lb_piece(&L, q, RS_SRC, src, lb_buffer(&L, "q", RS_SRC, RS_DT_BF16, 0, NULL), 1, &p0, NULL, NULL);
    lb_piece(&L, k, RS_SRC, src, lb_buffer(&L, "k", RS_SRC, RS_DT_BF16, 0, NULL), 1, &p0, NULL, NULL);
    /* destination: q's [2, 3, 5] block on each rank fills rows 0..6 of a [8, 5] buffer; k's [2, 5] rows 6..8 */
    int64_t fshape[2] = {8, 5};
    uint32_t fb = lb_buffer(&L, "qk", RS_DST, RS_DT_BF16, 2, fshape);
    rs_place d1 = lb_shard(0, 1, 0), d0 = lb_shard(0, 0, 0);
    int64_t qbox[4] = {0, 0, 6, 5}, kbox[4] = {6, 0, 8, 5};
    lb_piece(&L, q, RS_DST, dst, fb, 1, &d1, NULL, qbox);
    lb_piece(&L, k, RS_DST, dst, fb, 1, &d0, NULL, kbox);
    lb_finish(&L);
    rs_plan P;
    rs_plan_stats S;
    if (plan_it(&L, 0, &P, &S)) return;
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* a small staging budget: many rounds, every rank within the budget, fan-out overlapped with waits */
static void unit_staging_budget(void)
{
    rs_layout L;
    lb_init(&L, 8, 4, NULL);
    int64_t four = 4, shape[2] = {512, 128};
    uint32_t src = lb_mesh(&L, 1, &four, NULL, 0), dst = lb_mesh(&L, 1, &four, NULL, 4);
    uint32_t t = lb_tensor(&L, "w", RS_DT_FP32, 2, shape);
    rs_place p0 = lb_shard(0, 1, 0);
    lb_piece(&L, t, RS_SRC, src, lb_buffer(&L, "w", RS_SRC, RS_DT_FP32, 0, NULL), 1, &p0, NULL, NULL);
    lb_piece(&L, t, RS_DST, dst, lb_buffer(&L, "w", RS_DST, RS_DT_FP32, 0, NULL), 0, NULL, NULL, NULL);
    lb_finish(&L);
    rs_plan P;
    rs_plan_stats S;
    uint64_t budget = 64 << 10;
    if (plan_it(&L, budget, &P, &S)) return;
    CHECK(S.rounds > 4);
    for (uint32_t r = 0; r < 8; r++) CHECK(P.ranks[r].staging_bytes <= budget);
    /* the fan-out steps wait for their round's network step */
    uint64_t waits = 0;
    for (uint32_t r = 4; r < 8; r++) waits += P.ranks[r].nwaits;
    CHECK(waits > 0);
    CHECK(S.domain_net_in[1] == S.domain_need[1]);
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* One 2-dim tensor `name`, its rows sharded over nsrc source ranks (0 ..) and over ndst destination ranks
 * (after them), in NVLink domains of dom ranks. */
static void rows_layout(rs_layout *L, int64_t nsrc, int64_t ndst, uint32_t dom, const char *name, rs_dtype dt,
                        const int64_t shape[2])
{
    lb_init(L, (uint32_t)(nsrc + ndst), dom, NULL);
    uint32_t src = lb_mesh(L, 1, &nsrc, NULL, 0), dst = lb_mesh(L, 1, &ndst, NULL, (int32_t)nsrc);
    uint32_t t = lb_tensor(L, name, dt, 2, shape);
    rs_place p0 = lb_shard(0, 0, 0);
    lb_piece(L, t, RS_SRC, src, lb_buffer(L, name, RS_SRC, dt, 0, NULL), 1, &p0, NULL, NULL);
    lb_piece(L, t, RS_DST, dst, lb_buffer(L, name, RS_DST, dt, 0, NULL), 1, &p0, NULL, NULL);
    lb_finish(L);
}

/* large contiguous fragments travel zero-copy: a whole chunk of at least zero_copy_min (1 MiB); with 16 MiB
 * of staging a chunk is at most 1 MiB, so each rank's 1 MiB block is one zero-copy message */
static void unit_zero_copy(void)
{
    rs_layout L;
    int64_t shape[2] = {1024, 1024};
    rows_layout(&L, 2, 2, 2, "big", RS_DT_BF16, shape);
    rs_plan P;
    rs_plan_stats S;
    if (plan_it(&L, 16u << 20, &P, &S)) return;
    CHECK(count_ops(&P, RS_OP_SEND, -1, 1) == count_ops(&P, RS_OP_SEND, -1, -1));
    CHECK(count_ops(&P, RS_OP_RECV, -1, 1) == count_ops(&P, RS_OP_RECV, -1, -1));
    CHECK(count_ops(&P, RS_OP_PACK, -1, -1) == 0 && count_ops(&P, RS_OP_UNPACK, -1, -1) == 0);
    for (uint32_t r = 0; r < 4; r++) CHECK(P.ranks[r].staging_bytes == 0);
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* Messages that continue each other on both sides become one (pl_merge_messages). A [1024, 2048] fp32
 * tensor, blocks of the 16 ranks of domains 0 and 1, is needed whole by the 8 ranks of domain 2: each block
 * (512 KiB, under fanout_split_min) enters the domain once, whole, and the 8 receivers get two blocks each
 * from two senders, back to back in staging. Each forwards both to its 7 peers: one message per peer, not
 * two. Column blocks (rows = 0) are not contiguous in the buffer, so the peers take them into staging. Row
 * blocks are, so a peer could take a forwarded copy straight into its buffer, but a receiver's two blocks
 * are not next to each other there and two such messages could not merge: a peer keeps forwarded copies
 * that follow each other from one forwarder staged (zc_moves), and the forwards merge again (56 messages,
 * where taking one pair's copies straight in left 57). */
static void unit_merge_messages(int rows)
{
    const int64_t shape[2] = {1024, 2048};
    rs_plan P;
    rs_plan_stats S;
    if (plan_shard_to_whole(24, 8, 16, 8, 16, "w", shape, rows ? 0 : 1, &P, &S)) return;
    CHECK(count_ops(&P, RS_OP_SEND, RS_LANE_NET, -1) == 16);
    CHECK(count_ops(&P, RS_OP_SEND, RS_LANE_NVL, -1) == 8 * 7);
    CHECK(count_ops(&P, RS_OP_RECV, RS_LANE_NVL, 0) == 8 * 7);
    CHECK(S.merged_messages == 8 * 7);
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* Segments too small for zero-copy whose PACKs would read or whose UNPACKs would write one contiguous stretch
 * of a buffer are sent from / received into it (zc_moves). Rank 0 holds a 64 x 64 fp32 tensor (16 KiB, far
 * below zero_copy_min); (a) rank 2 (another domain) needs all of it: one SEND from rank 0's buffer, one RECV
 * into rank 2's, no PACK, UNPACK or staging; (b) ranks 2 and 3 (one domain) both need it: the domain's
 * receiver takes it into staging, UNPACKs and forwards it, and its peer receives the forwarded copy straight
 * into its buffer. */
static void unit_zc_moves(int replicated)
{
    rs_layout L;
    lb_init(&L, 4, 2, NULL);
    int64_t one = 1, two = 2, shape[2] = {64, 64};
    uint32_t src = lb_mesh(&L, 1, &one, NULL, 0), dst = lb_mesh(&L, 1, replicated ? &two : &one, NULL, 2);
    uint32_t t = lb_tensor(&L, "w", RS_DT_FP32, 2, shape);
    lb_piece(&L, t, RS_SRC, src, lb_buffer(&L, "w", RS_SRC, RS_DT_FP32, 0, NULL), 0, NULL, NULL, NULL);
    lb_piece(&L, t, RS_DST, dst, lb_buffer(&L, "w", RS_DST, RS_DT_FP32, 0, NULL), 0, NULL, NULL, NULL);
    lb_finish(&L);
    rs_plan P;
    rs_plan_stats S;
    if (plan_it(&L, 0, &P, &S)) return;
    CHECK(count_ops(&P, RS_OP_SEND, RS_LANE_NET, 1) == 1 && count_ops(&P, RS_OP_PACK, -1, -1) == 0);
    CHECK(P.ranks[0].staging_bytes == 0);
    if (!replicated) {
        CHECK(count_ops(&P, RS_OP_RECV, -1, 1) == 1 && count_ops(&P, RS_OP_RECV, -1, 0) == 0);
        CHECK(count_ops(&P, RS_OP_UNPACK, -1, -1) == 0);
        CHECK(P.ranks[2].staging_bytes == 0);
    } else {
        CHECK(S.fwd_bytes == 64 * 64 * 4);
        CHECK(count_ops(&P, RS_OP_RECV, RS_LANE_NET, 0) == 1); /* the receiver: staged, it forwards */
        CHECK(count_ops(&P, RS_OP_UNPACK, -1, -1) == 1);
        CHECK(count_ops(&P, RS_OP_RECV, RS_LANE_NVL, 1) == 1); /* the peer: straight into its buffer */
    }
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* 8-dim tensors: fragments whose regions need more dims than an op keeps are cut until they fit */
static void unit_many_dims(void)
{
    rs_layout L;
    lb_init(&L, 3, 1, NULL);
    int64_t one = 1, two = 2, shape[8] = {2, 2, 2, 2, 2, 2, 2, 4};
    uint32_t src = lb_mesh(&L, 1, &one, NULL, 0), dst = lb_mesh(&L, 1, &two, NULL, 1);
    uint32_t t = lb_tensor(&L, "x8", RS_DT_BF16, 8, shape);
    lb_piece(&L, t, RS_SRC, src, lb_buffer(&L, "x8", RS_SRC, RS_DT_BF16, 0, NULL), 0, NULL, NULL, NULL);
    /* each destination block [1, 2, 2, 2, 2, 2, 2, 4] in a padded [1, 3, 3, 3, 3, 3, 3, 5] buffer: 7 dims */
    int64_t bshape[8] = {1, 3, 3, 3, 3, 3, 3, 5}, box[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 2, 2, 4};
    rs_place p0 = lb_shard(0, 0, 0);
    lb_piece(&L, t, RS_DST, dst, lb_buffer(&L, "x8", RS_DST, RS_DT_BF16, 8, bshape), 1, &p0, NULL, box);
    lb_finish(&L);
    rs_plan P;
    rs_plan_stats S;
    if (plan_it(&L, 0, &P, &S)) return;
    CHECK(S.chunks > S.parts); /* cut */
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* a local copy between padded boxes of 5 dims on both sides: 10 dims together are more than an op keeps
 * while planning (PL_PT), so the chunk is halved until each COPY fits; the executor checks every element */
static void unit_many_dims_copy(void)
{
    rs_layout L;
    lb_init(&L, 1, 1, NULL);
    int64_t one = 1, shape[5] = {2, 2, 2, 2, 4};
    uint32_t m = lb_mesh(&L, 1, &one, NULL, 0);
    uint32_t t = lb_tensor(&L, "x5", RS_DT_BF16, 5, shape);
    int64_t sshape[5] = {3, 3, 3, 3, 5}, dshape[5] = {2, 3, 4, 3, 6};
    int64_t sbox[10] = {1, 1, 1, 1, 1, 3, 3, 3, 3, 5}, dbox[10] = {0, 1, 2, 0, 2, 2, 3, 4, 2, 6};
    lb_piece(&L, t, RS_SRC, m, lb_buffer(&L, "x5", RS_SRC, RS_DT_BF16, 5, sshape), 0, NULL, NULL, sbox);
    lb_piece(&L, t, RS_DST, m, lb_buffer(&L, "x5", RS_DST, RS_DT_BF16, 5, dshape), 0, NULL, NULL, dbox);
    lb_finish(&L);
    rs_plan P;
    rs_plan_stats S;
    if (plan_it(&L, 0, &P, &S)) return;
    CHECK(S.local_bytes == 2 * 2 * 2 * 2 * 4 * 2);
    CHECK(S.chunks > S.parts); /* halved */
    uint64_t copies = 0;
    const rs_rank_prog *g = &P.ranks[0];
    for (uint32_t i = 0; i < g->nops; i++) {
        if (g->ops[i].code != RS_OP_COPY) continue;
        copies++;
        rs_desc a, b;
        CHECK(rs_prog_desc(g, g->ops[i].src, &a)->ndim + rs_prog_desc(g, g->ops[i].dst, &b)->ndim <= 8);
    }
    CHECK(copies >= 2);
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* a destination element no source holds is an error about that piece */
static void unit_uncovered(void)
{
    rs_layout L;
    lb_init(&L, 4, 2, NULL);
    int64_t two = 2, shape[1] = {10};
    uint32_t src = lb_mesh(&L, 1, &two, NULL, 0), dst = lb_mesh(&L, 1, &two, NULL, 2);
    uint32_t t = lb_tensor(&L, "x", RS_DT_FP32, 1, shape);
    rs_place p0 = lb_shard(0, 0, 3); /* 2 x 3 = 6 of 10 */
    lb_piece(&L, t, RS_SRC, src, lb_buffer(&L, "x", RS_SRC, RS_DT_FP32, 0, NULL), 1, &p0, NULL, NULL);
    lb_piece(&L, t, RS_DST, dst, lb_buffer(&L, "x", RS_DST, RS_DT_FP32, 0, NULL), 0, NULL, NULL, NULL);
    lb_finish(&L);
    rs_plan_opts o;
    rs_plan_opts_default(&o);
    rs_plan P;
    char err[400];
    uint32_t piece;
    CHECK(rs_planner_plan(&L, &o, &P, NULL, err, sizeof err, &piece) == -1);
    CHECK(piece == 1);
    CHECK(strstr(err, "tensor 'x'") && strstr(err, "[6:10]"));
    CHECK(L.ntensors == 1); /* the layout is left to the caller */
    rs_layout_free(&L);
}

/* The relay layouts: ranks 0 and 1 (domain 0) hold a rows x cols fp32 tensor split by rows; 4 destination
 * domains of 2 ranks (ranks 2..10) each need all of it, split by columns. The plan is verified inside the
 * planner and here, and run on the reference executor. */
static int plan_relay_layout(int64_t rows, int64_t cols, const rs_plan_opts *o, rs_plan *P, rs_plan_stats *S)
{
    rs_layout L;
    lb_init(&L, 10, 2, NULL);
    int64_t two = 2, d2[2] = {4, 2}, shape[2] = {rows, cols};
    uint32_t src = lb_mesh(&L, 1, &two, NULL, 0), dst = lb_mesh(&L, 2, d2, NULL, 2);
    uint32_t t = lb_tensor(&L, "w", RS_DT_FP32, 2, shape);
    rs_place p0 = lb_shard(0, 0, 0), p1 = lb_shard(1, 1, 0);
    lb_piece(&L, t, RS_SRC, src, lb_buffer(&L, "w", RS_SRC, RS_DT_FP32, 0, NULL), 1, &p0, NULL, NULL);
    lb_piece(&L, t, RS_DST, dst, lb_buffer(&L, "w", RS_DST, RS_DT_FP32, 0, NULL), 1, &p1, NULL, NULL);
    lb_finish(&L);
    char err[600];
    if (rs_planner_plan(&L, o, P, S, err, sizeof err, NULL)) {
        fprintf(stderr, "relays %d fanout %u: plan failed: %s\n", o->relays, o->relay_fanout, err);
        failures++;
        return -1;
    }
    CHECK(rs_plan_verify_all(P, err, sizeof err) == 0);
    for (uint64_t s = 0; s < 2; s++)
        if (rs_interp_run(P, s, err, sizeof err)) {
            fprintf(stderr, "relays %d fanout %u: executor: %s\n", o->relays, o->relay_fanout, err);
            failures++;
        }
    return 0;
}

/* relays (issue 9): one source domain (2 ranks, rows split) and 4 destination domains that each need the
 * whole 4 KiB tensor (columns split over the domain's 2 ranks). Relays on: the holders send the tensor once,
 * all to one domain, and the other 3 domains get it from destination ranks (chain: every domain but the
 * last relays one copy; fan-out 2: a heap-shaped tree, 2 + 1 + 0 + 0 copies); relays off: the holders send
 * it 4 times. Every plan is verified inside the planner and run on the reference executor. */
static void unit_relays_case(int relays, uint32_t fanout)
{
    rs_plan_opts o;
    rs_plan_opts_default(&o);
    o.relays = relays;
    o.relay_fanout = fanout;
    rs_plan P;
    rs_plan_stats S;
    if (plan_relay_layout(16, 64, &o, &P, &S)) return;
    const uint64_t need = 16 * 64 * 4;
    CHECK(S.ndomains == 5 && S.world == 10);
    for (uint32_t d = 1; d < 5; d++) {
        CHECK(S.domain_need[d] == need);
        CHECK(S.domain_net_in[d] == need); /* each domain takes each byte over the network once */
    }
    CHECK(S.net_bytes == 4 * need);
    CHECK(S.fwd_bytes == 0 && S.nvl_bytes == 0 && S.local_bytes == 0);
    /* bytes the network brings into each destination domain from the sources, and sent out by each domain */
    uint64_t from_src[5] = {0}, dom_out[5] = {0};
    for (uint32_t r = 0; r < 10; r++) {
        const rs_rank_prog *g = &P.ranks[r];
        for (uint32_t k = 0; k < g->nops; k++) {
            const rs_op *op = &g->ops[k];
            if (op->code != RS_OP_SEND) continue;
            dom_out[r / 2] += op->bytes;
            CHECK(op->peer / 2 != r / 2); /* no NVLink traffic here: every message crosses domains */
            if (r < 2) from_src[op->peer / 2] += op->bytes;
        }
        CHECK(lane_bytes(&P, RS_LANE_NET, r, RS_OP_SEND) == S.rank_net_out[r]);
    }
    if (relays == RS_RELAYS_ON) {
        CHECK(S.relay_bytes == 3 * need);
        /* the sources send the tensor once, half each, all of it into one domain (the head) */
        CHECK(S.rank_net_out[0] == need / 2 && S.rank_net_out[1] == need / 2);
        uint32_t heads = 0;
        for (uint32_t d = 1; d < 5; d++) {
            if (from_src[d]) heads++;
            CHECK(from_src[d] == 0 || from_src[d] == need);
        }
        CHECK(heads == 1);
        /* copies relayed per destination domain, sorted: chain 1 1 1 0, binary tree 2 1 0 0 */
        uint64_t c[4];
        for (uint32_t d = 1; d < 5; d++) {
            CHECK(dom_out[d] % need == 0);
            c[d - 1] = dom_out[d] / need;
        }
        for (int i = 0; i < 4; i++)
            for (int j = i + 1; j < 4; j++)
                if (c[j] > c[i]) {
                    uint64_t x = c[i];
                    c[i] = c[j];
                    c[j] = x;
                }
        if (fanout == 1) CHECK(c[0] == 1 && c[1] == 1 && c[2] == 1 && c[3] == 0);
        else CHECK(c[0] == 2 && c[1] == 1 && c[2] == 0 && c[3] == 0);
        /* relaying takes extra rounds: a chain of 4 is 4 rounds deep, the tree 3 */
        CHECK(S.rounds >= (fanout == 1 ? 4u : 3u));
    } else {
        CHECK(S.relay_bytes == 0);
        /* the sources send the tensor 4 times (balanced), every domain from them, none relays */
        CHECK(S.rank_net_out[0] == 2 * need && S.rank_net_out[1] == 2 * need);
        for (uint32_t d = 1; d < 5; d++) CHECK(from_src[d] == need && dom_out[d] == 0);
    }
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

/* relays of parts that span round boundaries: one source domain (2 ranks, rows split) and 4 destination
 * domains needing the whole 4 MiB tensor (columns split over each domain's 2 ranks), relayed in a chain
 * through 1 MiB staging halves, so every 1 MiB part spans rounds and goes in fine boxes (64 KiB, the
 * floor) grouped by round into chunks of up to 128 KiB (1/8 of a half). A relay cuts the same fine boxes and
 * groups them by its parent's rounds: the relayed bytes go in as few chunks as the holders' bytes, not one
 * per fine box (DeepSeek-V3 on H100 had 6.7 M such chunks). */
static void unit_relays_grouped(void)
{
    rs_plan_opts o;
    rs_plan_opts_default(&o);
    o.relays = RS_RELAYS_ON;
    o.staging_bytes = 2u << 20;
    o.zero_copy_min = 64u << 10;
    rs_plan P;
    rs_plan_stats S;
    if (plan_relay_layout(1024, 1024, &o, &P, &S)) return;
    const uint64_t need = 1024 * 1024 * 4, fine = 64u << 10;
    CHECK(S.relay_bytes == 3 * need);
    /* 4 x 64 fine boxes in all; grouped, each domain's 4 MiB goes in chunks of about 128 KiB */
    CHECK(S.chunks >= 4 * need / (2 * fine));
    CHECK(S.chunks < 4 * need / fine * 3 / 4);
    CHECK(S.rounds >= 4 * need / 4 / (1u << 20)); /* the chain still pipelines through the rounds */
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

static void unit_relays(void)
{
    unit_relays_case(RS_RELAYS_ON, 1);
    unit_relays_case(RS_RELAYS_ON, 2);
    unit_relays_case(RS_RELAYS_OFF, 1);
    unit_relays_case(RS_RELAYS_AUTO, 1); /* 4 KiB: far below auto's 1 ms, so no relays */
}

/* Twice as many senders as receivers: a receiver's NIC carries twice a sender's bytes, and the rounds' link
 * budget must come from the busiest link, the receivers' (from the senders' bytes it was half as large, and
 * the plan took twice the rounds: 1381 instead of 699 on the 2.5 T MoE) */
static void unit_fewer_receivers(void)
{
    rs_layout L;
    int64_t shape[2] = {1024, 256};
    rows_layout(&L, 8, 4, 4, "w", RS_DT_FP32, shape);
    rs_plan P;
    rs_plan_stats S;
    uint64_t budget = 64 << 10, half = budget / 2, in = 256 << 10; /* each receiver: 256 KiB from 2 senders */
    if (plan_it(&L, budget, &P, &S)) return;
    /* rounds of about 85 % of a staging half through each receiver's NIC (and a round or two of slack) */
    uint64_t want = (in + half / 20 * 17 - 1) / (half / 20 * 17);
    if (S.rounds > want + 2) fprintf(stderr, "fewer receivers: %u rounds, want about %llu\n", S.rounds,
                                     (unsigned long long)want);
    CHECK(S.rounds >= want && S.rounds <= want + 2);
    for (uint32_t r = 0; r < 12; r++) CHECK(P.ranks[r].staging_bytes <= budget);
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
}

static int run_unit(void)
{
    unit_row_to_column();
    unit_verify_pieces_error();
    unit_replicated_one_domain();
    unit_replicated_across_domains();
    unit_pipeline_pins();
    unit_experts();
    unit_stacked_experts();
    unit_many_dims_copy();
    unit_ragged();
    unit_colocated();
    unit_huge_chunks();
    unit_refill();
    unit_staging_budget();
    unit_fewer_receivers();
    unit_zero_copy();
    unit_zc_moves(0);
    unit_zc_moves(1);
    unit_merge_messages(0);
    unit_merge_messages(1);
    unit_many_dims();
    unit_uncovered();
    unit_relays();
    unit_relays_grouped();
    return failures;
}

/* ---- random layouts ---- */

static void rand_opts(uint64_t seed, rs_plan_opts *o)
{
    rs_plan_opts_default(o);
    static const uint64_t st[] = {256, 1024, 4096, 1 << 16, 256 << 20};
    o->staging_bytes = st[seed % 5];
    o->zero_copy_min = (seed / 5) % 2 ? 64 : 1 << 20;
    o->fanout_split_min = (seed / 10) % 2 ? 16 : 64 << 10;
    /* half the cases relay (issue 9): every fragment several domains need over the network enters one of
     * them from its holders and is relayed on, in chains or trees of fan-out 2 or 3; the rest run under the
     * default (auto, which stays off for layouts this small) */
    if ((seed / 20) % 2) {
        o->relays = RS_RELAYS_ON;
        o->relay_fanout = 1 + (uint32_t)((seed / 40) % 3);
    }
    /* fine chunks from 16 bytes: parts of these small layouts that span rounds go in fine boxes grouped by
     * round (and their relays by their parents' rounds), which the 64 KiB default leaves to large layouts */
    if ((seed / 120) % 2) o->fine_min = 16;
}

static int run_prop(uint64_t n, uint64_t seed0)
{
    uint64_t relayed = 0, grouped = 0, merged = 0;
    for (uint64_t seed = seed0; seed < seed0 + n; seed++) {
        rs_layout L;
        gen_layout(&L, seed, NULL);
        rs_plan_opts o;
        rand_opts(seed, &o);
        rs_plan P;
        rs_plan_stats S;
        char err[600];
        if (rs_planner_plan(&L, &o, &P, &S, err, sizeof err, NULL)) {
            fprintf(stderr, "seed %llu: %s%s\n", (unsigned long long)seed,
                    o.relays == RS_RELAYS_ON ? "(relays on) " : "", err);
            rs_layout_free(&L);
            failures++;
            continue;
        }
        if (S.relay_bytes) relayed++;
        if (S.merged_messages) merged++;
        for (uint32_t b = 0; b < P.layout.nbuffers; b++)
            if (P.layout.buffers[b].group) {
                grouped++;
                break;
            }
        rs_plan_stats_free(&S);
        /* the reference executor on every fourth case (verification ran inside the planner) */
        if (seed % 4 == 0 && rs_interp_run(&P, seed, err, sizeof err)) {
            fprintf(stderr, "seed %llu: executor: %s\n", (unsigned long long)seed, err);
            failures++;
        }
        rs_plan_free(&P);
    }
    printf("prop: %llu random layouts from seed %llu (%llu with relayed bytes, %llu with buffer groups, %llu with "
           "merged messages), %d failures\n",
           (unsigned long long)n, (unsigned long long)seed0, (unsigned long long)relayed, (unsigned long long)grouped,
           (unsigned long long)merged, failures);
    return failures;
}

/* ---- the cost model's lower bound against element counting ---- */

/* Mark in m[dom * ne + e] (bit `bit`) every element of tensor t that a rank of domain dom holds (side). */
static void mark_side(const rs_layout *L, uint32_t t, rs_side side, uint8_t *m, uint64_t ne, uint8_t bit)
{
    const rs_tensor *T = &L->tensors[t];
    uint32_t b = T->piece_begin + (side == RS_SRC ? 0 : T->nsrc), e = b + (side == RS_SRC ? T->nsrc : T->ndst);
    for (uint32_t pi = b; pi < e; pi++) {
        const rs_piece *p = &L->pieces[pi];
        const rs_mesh *M = &L->meshes[p->mesh];
        for (uint32_t lin = 0; lin < M->nranks; lin++) {
            int64_t coord[RS_MAX_DIMS], lo[RS_MAX_DIMS], hi[RS_MAX_DIMS], x[RS_MAX_DIMS];
            rs_mesh_coord(M, lin, coord);
            if (!rs_piece_holds(L, p, coord) || rs_piece_block(L, p, coord, lo, hi) <= 0) continue;
            uint32_t dom = L->topo.domain_of[M->ranks[lin]];
            memcpy(x, lo, sizeof x);
            for (;;) {
                uint64_t at = 0;
                for (uint32_t d = 0; d < T->ndim; d++) at = at * (uint64_t)T->shape[d] + (uint64_t)x[d];
                m[dom * ne + at] |= bit;
                int d = (int)T->ndim - 1;
                for (; d >= 0; d--) {
                    if (++x[d] < hi[d]) break;
                    x[d] = lo[d];
                }
                if (d < 0) break;
            }
        }
    }
}

/* rs_cost_lower_bound's byte totals (box unions per tensor and domain) against counting every element of
 * random layouts, some with wide meshes (many boxes per union). */
static int run_bound(uint64_t n, uint64_t seed0)
{
    for (uint64_t seed = seed0; seed < seed0 + n; seed++) {
        rs_layout L;
        gen_opts go = {seed % 3 ? 24 : 160, 4, seed % 3 ? 12 : 40};
        gen_layout(&L, seed, &go);
        rs_cost_params cp;
        rs_cost_params_default(&cp, &L.topo);
        rs_cost_bound b;
        char err[256];
        if (rs_cost_lower_bound(&L, &cp, &b, err, sizeof err)) {
            fprintf(stderr, "bound seed %llu: %s\n", (unsigned long long)seed, err);
            failures++;
            rs_layout_free(&L);
            continue;
        }
        uint64_t need = 0, model = 0, distinct = 0;
        uint32_t nd = L.topo.ndomains;
        for (uint32_t t = 0; t < L.ntensors; t++) {
            const rs_tensor *T = &L.tensors[t];
            uint64_t ne = 1, es = (uint64_t)rs_dtype_size(T->dtype);
            for (uint32_t d = 0; d < T->ndim; d++) ne *= (uint64_t)T->shape[d];
            uint8_t *m = rs_xcalloc(nd * ne + 1, 1); /* bit 1: a domain needs it, bit 2: holds it */
            mark_side(&L, t, RS_DST, m, ne, 1);
            mark_side(&L, t, RS_SRC, m, ne, 2);
            for (uint64_t e = 0; e < ne; e++) {
                int any = 0, unheld = 0;
                for (uint32_t a = 0; a < nd; a++) {
                    uint8_t v = m[a * ne + e];
                    any |= v & 1;
                    if (v == 1) {
                        unheld = 1;
                        need += es;
                    }
                }
                model += any ? es : 0;
                distinct += unheld ? es : 0;
            }
            free(m);
        }
        if (b.need_bytes != need || b.model_bytes != model || b.distinct_bytes != distinct) {
            fprintf(stderr,
                    "bound seed %llu: need %llu (counted %llu), model %llu (%llu), distinct %llu (%llu)\n",
                    (unsigned long long)seed, (unsigned long long)b.need_bytes, (unsigned long long)need,
                    (unsigned long long)b.model_bytes, (unsigned long long)model,
                    (unsigned long long)b.distinct_bytes, (unsigned long long)distinct);
            failures++;
        }
        rs_layout_free(&L);
    }
    printf("bound: %llu random layouts from seed %llu, %d failures\n", (unsigned long long)n,
           (unsigned long long)seed0, failures);
    return failures;
}

/* ---- the verifier bites ---- */


/* Damage one rank's bindings (its last one dropped, or a dim of one's shape grown); NULL when the plan has
 * no binding. */
static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static const char *damage_bindings(rs_plan *Q, uint64_t *state)
{
    uint32_t world = Q->layout.topo.world, r0 = (uint32_t)(xorshift(state) % world);
    for (uint32_t k = 0; k < world; k++) {
        rs_rank_prog *g = &Q->ranks[(r0 + k) % world];
        if (!g->nbindings) continue;
        rs_binding *x = &g->bindings[xorshift(state) % g->nbindings];
        if (xorshift(state) % 2 || !x->ndim) {
            g->nbindings--;
            return "a binding dropped";
        }
        uint32_t d = (uint32_t)(xorshift(state) % x->ndim);
        x->bytes = x->bytes / (uint64_t)x->shape[d] * (uint64_t)(x->shape[d] + 1); /* (its bytes still match) */
        x->shape[d]++;
        return "a binding's shape grown";
    }
    return NULL;
}

static int run_mutate(uint64_t n, uint64_t seed0)
{
    uint64_t caught = 0, both_ok = 0, strict = 0, tried = 0;
    for (uint64_t seed = seed0; seed < seed0 + n; seed++) {
        rs_layout L;
        gen_layout(&L, seed, NULL);
        rs_plan_opts o;
        rand_opts(seed, &o);
        rs_plan P;
        char err[600];
        if (rs_planner_plan(&L, &o, &P, NULL, err, sizeof err, NULL)) {
            fprintf(stderr, "seed %llu: %s\n", (unsigned long long)seed, err);
            rs_layout_free(&L);
            failures++;
            continue;
        }
        uint8_t *img;
        size_t len;
        if (rs_plan_encode(&P, &img, &len, err, sizeof err)) {
            fprintf(stderr, "seed %llu: encode: %s\n", (unsigned long long)seed, err);
            failures++;
            rs_plan_free(&P);
            continue;
        }
        uint64_t rnd_state = seed * 0x9e3779b97f4a7c15ull + 1;
        for (int m = 0; m < 4; m++) {
            rs_plan Q;
            if (rs_plan_decode(img, len, -1, &Q, err, sizeof err)) {
                failures++;
                break;
            }
            /* the fourth copy: a rank's bindings damaged instead (what only the piece index reads: a binding
             * dropped, or its shape changed), so that its problems are compared below too */
            const char *what = m == 3 ? damage_bindings(&Q, &rnd_state) : rs_mutate(&Q, &rnd_state);
            if (!what) {
                rs_plan_free(&Q);
                continue;
            }
            tried++;
            char msg[600];
            int bad_exec = rs_interp_run(&Q, 1, msg, sizeof msg) || rs_interp_run(&Q, 2, msg, sizeof msg);
            /* the verifier on one thread, with its checker thread, and with the piece index made ahead on
             * its own thread (as the planner has it made): the same verdict, message and work */
            uint64_t work;
            threads(1);
            int bad_ver = rs_plan_verify_all_work(&Q, err, sizeof err, &work) != 0;
            for (int way = 1; way <= 2; way++) {
                threads(2);
                char err2[600];
                uint64_t work2;
                int bad2 = way == 1 ? rs_plan_verify_all_work(&Q, err2, sizeof err2, &work2) != 0
                                    : rs_plan_verify_all_pre(&Q, rs_plan_verify_pre_start(&Q, &Q.layout), err2,
                                                             sizeof err2, &work2, NULL) != 0;
                if (bad2 != bad_ver || strcmp(err, err2) || work2 != work) {
                    fprintf(stderr, "seed %llu: mutation '%s': one thread: %s (work %llu); %s: %s (work %llu)\n",
                            (unsigned long long)seed, what, bad_ver ? err : "accepted", (unsigned long long)work,
                            way == 1 ? "two" : "index ahead", bad2 ? err2 : "accepted", (unsigned long long)work2);
                    failures++;
                }
            }
            threads(0);
            if (bad_exec && !bad_ver) {
                fprintf(stderr, "seed %llu: mutation '%s' breaks the plan (%s) but the verifier accepts it\n",
                        (unsigned long long)seed, what, msg);
                failures++;
            } else if (bad_ver && bad_exec) {
                caught++;
            } else if (bad_ver) {
                strict++; /* rejected although this executor run was fine (e.g. a race it did not hit) */
                if (getenv("RS_MUTATE_VERBOSE")) fprintf(stderr, "seed %llu: %s: verifier only: %s\n", (unsigned long long)seed, what, err);
            } else {
                both_ok++; /* harmless damage (e.g. an offset into padding that nothing reads) */
            }
            rs_plan_free(&Q);
        }
        free(img);
        rs_plan_free(&P);
    }
    printf("mutate: %llu damaged plans: %llu caught, %llu rejected by the verifier only, %llu harmless, %d missed\n",
           (unsigned long long)tried, (unsigned long long)caught, (unsigned long long)strict,
           (unsigned long long)both_ok, failures);
    return failures;
}

/* ---- determinism: the same layout twice gives the same bytes, planned on one thread and on two ---- */

static int run_determinism(void)
{
    for (uint64_t seed = 0; seed < 50; seed++) {
        uint8_t *img[2];
        size_t len[2];
        for (int k = 0; k < 2; k++) {
            threads(k + 1);
            rs_layout L;
            gen_layout(&L, seed, NULL);
            rs_plan_opts o;
            rand_opts(seed, &o);
            rs_plan P;
            char err[600];
            if (rs_planner_plan(&L, &o, &P, NULL, err, sizeof err, NULL) ||
                rs_plan_encode(&P, &img[k], &len[k], err, sizeof err)) {
                fprintf(stderr, "seed %llu: %s\n", (unsigned long long)seed, err);
                return 1;
            }
            rs_plan_free(&P);
        }
        threads(0);
        CHECK(len[0] == len[1] && !memcmp(img[0], img[1], len[0]));
        free(img[0]);
        free(img[1]);
    }
    return failures;
}

/* ---- program blocks: a planned plan's programs lie in the plan's blocks (rs_prog_block_alloc, where blocks
 * are used); moved out by rs_prog_unblock, by rs_prog_desc_trim or by an edit that grows them, they are the
 * same programs (the same bytes encoded), and rs_plan_free frees both kinds ---- */

static int run_blocks(void)
{
    for (uint64_t seed = 0; seed < 60; seed++) {
        threads((int)(seed % 2) + 1);
        rs_layout L[2];
        rs_plan P[2];
        rs_plan_opts o;
        char err[600];
        uint8_t *img[3] = {0};
        size_t len[3];
        for (int k = 0; k < 2; k++) {
            gen_layout(&L[k], seed, NULL);
            rand_opts(seed, &o);
            if (rs_planner_plan(&L[k], &o, &P[k], NULL, err, sizeof err, NULL)) {
                fprintf(stderr, "seed %llu: %s\n", (unsigned long long)seed, err);
                rs_layout_free(&L[k]);
                return 1;
            }
        }
        uint32_t world = P[0].layout.topo.world, nin = 0;
        for (uint32_t r = 0; r < world; r++) nin += P[0].ranks[r].in_blocks != 0;
#if defined(__SANITIZE_ADDRESS__)
        CHECK(nin == 0 && !P[0].blocks); /* each array an allocation of its own, for the bounds checks */
#else
        CHECK(nin == world && P[0].blocks);
#endif
        CHECK(!rs_plan_encode(&P[0], &img[0], &len[0], err, sizeof err));
        for (uint32_t r = 0; r < world; r++) {
            if (r % 2) rs_prog_unblock(&P[0].ranks[r]);
            else rs_prog_desc_trim(&P[0].ranks[r]);
            CHECK(!P[0].ranks[r].in_blocks);
        }
        P[0].verified = 0; /* (encoded with its per-rank checks) */
        CHECK(!rs_plan_encode(&P[0], &img[1], &len[1], err, sizeof err));
        CHECK(len[0] == len[1] && !memcmp(img[0], img[1], len[0]));
        /* a descriptor added to each rank that has one: in blocks (it moves them out to grow) and out of them */
        uint32_t added = 0;
        for (uint32_t r = 0; r < world; r++)
            for (int k = 0; k < 2; k++) {
                rs_rank_prog *g = &P[k].ranks[r];
                if (!g->ndescs) continue;
                rs_desc d;
                rs_prog_desc(g, 0, &d);
                uint32_t i = rs_prog_desc_add(g, &d);
                rs_desc e;
                rs_prog_desc(g, i, &e);
                CHECK(i + 1 == g->ndescs && !g->in_blocks && e.offset == d.offset && e.ndim == d.ndim);
                added++;
            }
        P[1].verified = 0;
        free(img[1]);
        CHECK(!rs_plan_encode(&P[0], &img[1], &len[1], err, sizeof err));
        CHECK(!rs_plan_encode(&P[1], &img[2], &len[2], err, sizeof err));
        CHECK(len[1] == len[2] && !memcmp(img[1], img[2], len[1]) && (len[1] > len[0] || !added));
        for (int k = 0; k < 3; k++) free(img[k]);
        for (int k = 0; k < 2; k++) rs_plan_free(&P[k]); /* (the layouts went into the plans) */
    }
    threads(0);
    return failures;
}

/* The verifier's work is a property of the plan, not of where it sits in memory: the plan as planned and
 * two decoded copies of it (other addresses) take the same work units. (Its descriptor cache was once
 * indexed by address: the work then varied from run to run on plans with more descriptors than slots.) */
/* The layout argv[2] with the `-D NAME=VALUE` pairs after it, through the front end (defs: 32). */
static int load_args(int argc, char **argv, rs_define *defs, rs_front_opts *fo, rs_ir *ir)
{
    rs_front_opts_default(fo);
    char err[600];
    for (int i = 3; i + 1 < argc && fo->ndefines < 32; i += 2)
        if (!strcmp(argv[i], "-D") && rs_parse_define(argv[i + 1], &defs[fo->ndefines++], err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
    fo->defines = defs;
    return rs_front_load(argv[2], fo, ir, stderr);
}

static int run_verify_work(int argc, char **argv)
{
    rs_define defs[32];
    rs_front_opts fo;
    char err[600];
    rs_ir ir;
    if (load_args(argc, argv, defs, &fo, &ir)) return 1;
    rs_plan_opts o;
    rs_plan_opts_default(&o);
    o.verify = 0;
    rs_plan P;
    if (rs_planner_run(&ir, &o, &P, NULL, stderr)) return 1;
    uint8_t *img;
    size_t len;
    CHECK(rs_plan_encode(&P, &img, &len, err, sizeof err) == 0);
    uint64_t work[3] = {0, 0, 0}, ndescs = 0;
    CHECK(rs_plan_verify_all_work(&P, err, sizeof err, &work[0]) == 0);
    for (uint32_t r = 0; r < P.layout.topo.world; r++) ndescs += P.ranks[r].ndescs;
    for (int k = 1; k < 3; k++) {
        rs_plan Q;
        void *pad = malloc(4096 * (size_t)k); /* the copies land elsewhere */
        CHECK(rs_plan_decode(img, len, -1, &Q, err, sizeof err) == 0);
        CHECK(rs_plan_verify_all_work(&Q, err, sizeof err, &work[k]) == 0);
        rs_plan_free(&Q);
        free(pad);
    }
    printf("%llu descriptors; verification work %llu, %llu, %llu\n", (unsigned long long)ndescs,
           (unsigned long long)work[0], (unsigned long long)work[1], (unsigned long long)work[2]);
    CHECK(work[0] == work[1] && work[1] == work[2]);
    free(img);
    rs_plan_free(&P);
    for (uint32_t i = 0; i < fo.ndefines; i++) free((char *)defs[i].name);
    rs_ir_free(&ir);
    return failures;
}

/* A staged chunk that would wait for a later round goes zero-copy to its receivers when it is contiguous there,
 * and is cut in two otherwise (schedule.c, emit_chunk). fanout-spill: the layout has chunks of the first kind
 * (Qwen3-235B with vLLM data-parallel attention, 8 layers at full width: about 800 forwarded ones);
 * spill-halves: of both kinds (DeepSeek-V3 with a stage's experts stacked, 4 stages of 4 layers: thousands).
 * Either way the plan verifies. */
static int run_fanout_spill(int argc, char **argv, int halves)
{
    rs_define defs[32];
    rs_front_opts fo;
    rs_ir ir;
    if (load_args(argc, argv, defs, &fo, &ir)) return 1;
    rs_plan_opts o;
    rs_plan_opts_default(&o); /* verification on */
    rs_plan P;
    rs_plan_stats S;
    if (rs_planner_run(&ir, &o, &P, &S, stderr)) return 1;
    printf("%llu chunks sent zero-copy and %llu cut in two to keep their round, of %llu chunks\n",
           (unsigned long long)S.zc_spill, (unsigned long long)S.spill_halves, (unsigned long long)S.chunks);
    CHECK(S.zc_spill > 0);
    /* spill-halves: 8,157 zero-copy at this layout's commit; 451 when only chunks that 4 or more domain peers
     * take may go zero-copy so (the halves of a stacked chunk, contiguous at their receiver, have none) */
    if (halves) CHECK(S.spill_halves > 0 && S.zc_spill > 2000);
    rs_plan_stats_free(&S);
    rs_plan_free(&P);
    for (uint32_t i = 0; i < fo.ndefines; i++) free((char *)defs[i].name);
    rs_ir_free(&ir);
    return failures;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "unit")) return run_unit() != 0;
    if (argc >= 2 && !strcmp(argv[1], "determinism")) return run_determinism() != 0;
    if (argc >= 2 && !strcmp(argv[1], "blocks")) return run_blocks() != 0;
    if (argc >= 3 && !strcmp(argv[1], "verify-work")) return run_verify_work(argc, argv) != 0;
    if (argc >= 3 && !strcmp(argv[1], "fanout-spill")) return run_fanout_spill(argc, argv, 0) != 0;
    if (argc >= 3 && !strcmp(argv[1], "spill-halves")) return run_fanout_spill(argc, argv, 1) != 0;
    if (argc >= 4 && !strcmp(argv[1], "prop")) return run_prop(strtoull(argv[2], 0, 0), strtoull(argv[3], 0, 0)) != 0;
    if (argc >= 4 && !strcmp(argv[1], "bound")) return run_bound(strtoull(argv[2], 0, 0), strtoull(argv[3], 0, 0)) != 0;
    if (argc >= 4 && !strcmp(argv[1], "mutate"))
        return run_mutate(strtoull(argv[2], 0, 0), strtoull(argv[3], 0, 0)) != 0;
    fprintf(stderr, "usage: test_planner unit | determinism | blocks | prop N SEED | bound N SEED | mutate N SEED | verify-work LAYOUT [-D N=V]...\n");
    return 2;
}
