/* test_runtime.c - the runtime on the CPU threads transport with plans built in memory: replays checked
 * element by element, binding errors, plan agreement (fingerprints, world size), a rank that never
 * arrives, abort from another thread, an injected transport error. `test_runtime NAME` runs one case. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "replay.h"
#include "reshard.h"
#include "rt.h"
#include "kernels.h"
#include "rt_samples.h"

#define EXPECT(call, want)                                                                               \
    do {                                                                                                 \
        rsResult_t r_ = (call);                                                                          \
        if (r_ != (want)) {                                                                              \
            fprintf(stderr, "%s:%d: %s returned %s (%s), want %s\n", __FILE__, __LINE__, #call,          \
                    rsGetErrorString(r_), rsGetLastError(), rsGetErrorString(want));                     \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)
#define OK(call) EXPECT(call, rsSuccess)
#define HAS(s, sub)                                                                                      \
    do {                                                                                                 \
        if (!strstr((s), (sub))) {                                                                       \
            fprintf(stderr, "%s:%d: message '%s' lacks '%s'\n", __FILE__, __LINE__, (s), (sub));         \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

static const char *AX1[] = {"x"};

static rsPlan_t load(uint8_t *img, size_t len)
{
    rsPlan_t plan;
    OK(rsPlanLoadMemory(img, len, RS_ALL_RANKS, &plan));
    free(img);
    return plan;
}

/* ---------------------------------------------------------------- plans (tests/runtime/rt_samples.c) */

static rsPlan_t plan_2d(uint32_t ns, uint32_t nd, int64_t R, int64_t C, int dst_dim, rtb_opts o, uint32_t dom,
                        uint8_t **img_out, size_t *len_out)
{
    size_t len;
    uint8_t *img = rts_2d(ns, nd, R, C, dst_dim, RS_DT_FP32, o, dom, &len);
    rsPlan_t plan;
    OK(rsPlanLoadMemory(img, len, RS_ALL_RANKS, &plan));
    if (img_out) *img_out = img, *len_out = len;
    else free(img);
    return plan;
}

static rsPlan_t plan_mixed(rtb_opts o)
{
    size_t len;
    uint8_t *img = rts_mixed(o, &len);
    return load(img, len);
}

static rsPlan_t plan_forward(void)
{
    size_t len;
    uint8_t *img = rts_forward(&len);
    return load(img, len);
}

static int replay(rsPlan_t plan, int inject_rank, uint32_t inject_step, rs_replay_result *res)
{
    rs_replay_opts o;
    memset(&o, 0, sizeof o);
    o.transport = rsTransportCpu;
    o.timeout_ms = 10000;
    o.iters = 2;
    o.first = 0;
    o.last = UINT32_MAX;
    o.inject_rank = inject_rank;
    o.inject_step = inject_step;
    int bad = rs_replay_run(plan, &o, res);
    if (bad) {
        fprintf(stderr, "replay: %s: %s; %llu wrong, %llu untouched-bad, %llu src changed, %llu plan errors\n",
                rsGetErrorString(res->result), res->error, (unsigned long long)res->rep.wrong,
                (unsigned long long)res->rep.untouched, (unsigned long long)res->rep.src_changed,
                (unsigned long long)res->rep.plan_errors);
        for (int i = 0; i < res->rep.nreport; i++) fprintf(stderr, "  %s\n", res->rep.report[i]);
    }
    return bad;
}

static void replay_ok(rsPlan_t plan, uint64_t min_checked)
{
    rs_replay_result res;
    RT_CHECK(replay(plan, -1, 0, &res) == 0);
    RT_CHECK(res.rep.checked >= min_checked);
    printf("checked %llu elements, %llu destination bytes per run\n", (unsigned long long)res.rep.checked,
           (unsigned long long)res.all_dst_bytes);
}

/* ---------------------------------------------------------------- replays */

static int t_replay_row(void)
{
    rtb_opts o = {1, 0, 1};
    rsPlan_t p = plan_2d(4, 8, 96, 40, 0, o, 8, NULL, NULL);
    replay_ok(p, 96 * 40);
    rsPlanDestroy(p);
    return 0;
}

static int t_replay_transpose(void)
{
    rtb_opts o = {1, 0, 2};
    rsPlan_t p = plan_2d(3, 5, 50, 37, 1, o, 4, NULL, NULL);
    replay_ok(p, 50 * 37);
    rsPlanDestroy(p);
    return 0;
}

static int t_replay_mixed(void)
{
    rtb_opts variants[] = {{1, 1, 1}, {0, 1, 3}, {1, 0, 2}, {0, 0, 1}};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        rsPlan_t p = plan_mixed(variants[i]);
        replay_ok(p, 1);
        rsPlanDestroy(p);
    }
    return 0;
}

static int t_replay_forward(void)
{
    rsPlan_t p = plan_forward();
    replay_ok(p, 2 * 8 * 16);
    rsPlanDestroy(p);
    return 0;
}

/* A replay that needs more host memory than the limit is refused before anything is allocated; one that
 * fits runs. The estimate covers every bound buffer and every rank's staging. */
static int t_host_memory(void)
{
    rsPlan_t p = plan_forward();
    rs_replay_opts o;
    memset(&o, 0, sizeof o);
    o.transport = rsTransportCpu;
    o.timeout_ms = 10000;
    o.last = UINT32_MAX;
    o.inject_rank = -1;
    rsPlanInfo_t info;
    RT_CHECK(rsPlanGetInfo(p, &info) == rsSuccess);
    uint64_t bound = 0;
    for (int r = 0; r < info.worldSize; r++) {
        int n = 0;
        size_t st = 0;
        RT_CHECK(rsPlanBufferCount(p, r, &n) == rsSuccess && rsPlanStagingBytes(p, r, &st) == rsSuccess);
        bound += st;
        for (int i = 0; i < n; i++) {
            rsBufferInfo_t b;
            RT_CHECK(rsPlanGetBuffer(p, r, i, &b) == rsSuccess);
            bound += b.bytes;
        }
    }
    uint64_t need = rs_replay_host_bytes(p, &o);
    RT_CHECK(bound > 0 && need >= bound);
    rs_replay_result res;
    o.host_limit = need - 1;
    RT_CHECK(rs_replay_run(p, &o, &res) == 1);
    RT_CHECK(res.result == rsSystemError && strstr(res.error, "GiB of host memory") && res.rep.checked == 0);
    o.host_limit = need;
    RT_CHECK(rs_replay_run(p, &o, &res) == 0 && res.rep.checked > 0);
    rsPlanDestroy(p);
    return 0;
}

/* A group's receives complete in any order (as NCCL's do, and as the whole-plan verifier assumes): a plan the
 * verifier accepts whose receives arrive out of program order replays (the CPU transport took them in
 * program order and hung on it until its timeout). */
static int t_recv_order(void)
{
    size_t len;
    uint8_t *img = rts_recv_order(&len);
    rsPlan_t p = load(img, len);
    char err[512];
    RT_CHECK(rs_plan_verify_all(&p->P, err, sizeof err) == 0);
    replay_ok(p, 3 * 16 * 8);
    rsPlanDestroy(p);
    return 0;
}

/* A broken plan must be caught by the checker. */
static int t_checker_bites(void)
{
    size_t len;
    uint8_t *img = rts_wrong(&len);
    rsPlan_t plan = load(img, len);
    rs_replay_result res;
    RT_CHECK(replay(plan, -1, 0, &res) == 1);
    RT_CHECK(res.result == rsSuccess && res.rep.wrong == 16);
    rsPlanDestroy(plan);
    return 0;
}

/* One rank, both sides: local copies only. */
static int t_replay_local(void)
{
    size_t len;
    uint8_t *img = rts_local(33, 20, 1, &len);
    rsPlan_t p = load(img, len);
    replay_ok(p, 33 * 20);
    rsPlanDestroy(p);
    return 0;
}

/* ---------------------------------------------------------------- threads helpers */

typedef struct {
    rsPlan_t plan;
    rsGroup_t group;
    int rank;
    int timeout;
    rsExec_t exec;
    rsResult_t res;
    char err[1024];
} ctx;

static void *create_main(void *arg)
{
    ctx *c = arg;
    rsConfig_t cfg = RS_CONFIG_INITIALIZER;
    cfg.timeoutMs = c->timeout;
    c->res = rsExecCreateLocal(c->plan, c->group, c->rank, &cfg, &c->exec);
    snprintf(c->err, sizeof c->err, "%s", rsGetLastError());
    return NULL;
}

/* Create executors for ranks[0..n) concurrently; the others never arrive. */
static void create_all(ctx *c, int n)
{
    pthread_t th[64];
    for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, create_main, &c[i]);
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
}

/* Allocate and bind every buffer of every executor in c (host memory, filled for a replay). */
static void **bind_all(rsPlan_t plan, ctx *c, int n)
{
    const rs_plan *P = rs_replay_plan(plan);
    void **mem = calloc((size_t)n, sizeof *mem);
    for (int i = 0; i < n; i++) {
        const rs_rank_prog *g = &P->ranks[c[i].rank];
        void **bufs = calloc(g->nbindings + 1, sizeof *bufs);
        for (uint32_t k = 0; k < g->nbindings; k++) bufs[k] = malloc(g->bindings[k].bytes + 1);
        rs_replay_fill(P, (uint32_t)c[i].rank, bufs);
        for (uint32_t k = 0; k < g->nbindings; k++) OK(rsExecBindIndex(c[i].exec, (int)k, bufs[k], g->bindings[k].bytes));
        mem[i] = bufs;
    }
    return mem;
}

static void free_all(rsPlan_t plan, ctx *c, int n, void **mem)
{
    const rs_plan *P = rs_replay_plan(plan);
    for (int i = 0; i < n; i++)
        if (c[i].exec) OK(rsExecDestroy(c[i].exec));
    for (int i = 0; mem && i < n; i++) {
        void **bufs = mem[i];
        for (uint32_t k = 0; k < P->ranks[c[i].rank].nbindings; k++) free(bufs[k]);
        free(bufs);
    }
    free(mem);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---------------------------------------------------------------- binding errors */

static int t_bind_errors(void)
{
    rtb_opts o = {1, 0, 1};
    rsPlan_t plan = plan_2d(1, 1, 8, 8, 0, o, 2, NULL, NULL);
    rsGroup_t g;
    OK(rsGroupCreate(rsTransportCpu, 2, NULL, &g));
    ctx c[2] = {{plan, g, 0, 5000, NULL, 0, ""}, {plan, g, 1, 5000, NULL, 0, ""}};
    create_all(c, 2);
    OK(c[0].res);
    OK(c[1].res);
    int n;
    rsBufferInfo_t bi;
    OK(rsPlanBufferCount(plan, 0, &n));
    RT_CHECK(n == 1);
    OK(rsPlanGetBuffer(plan, 0, 0, &bi));
    RT_CHECK(!strcmp(bi.name, "w.src") && bi.side == rsSideSource && bi.bytes == 8 * 8 * 4 && !strcmp(bi.dtype, "fp32"));
    RT_CHECK(bi.ndim == 2 && bi.shape[0] == 8 && bi.shape[1] == 8);
    EXPECT(rsPlanGetBuffer(plan, 0, 1, &bi), rsInvalidArgument);
    static float a[64], bb[64], big[65];
    /* run before every buffer is bound */
    EXPECT(rsExecRun(c[0].exec), rsInvalidUsage);
    HAS(rsGetLastError(), "unbound");
    HAS(rsGetLastError(), "'w.src'");
    /* unknown name, wrong sizes, NULL pointer */
    EXPECT(rsExecBind(c[0].exec, "w.dst", a, sizeof a), rsBindingError);
    HAS(rsGetLastError(), "no buffer named 'w.dst'");
    EXPECT(rsExecBind(c[0].exec, "w.src", big, sizeof big), rsBindingError);
    HAS(rsGetLastError(), "256 bytes in the plan, not 260");
    EXPECT(rsExecBind(c[0].exec, "w.src", a, sizeof a - 4), rsBindingError);
    EXPECT(rsExecBind(c[0].exec, "w.src", NULL, sizeof a), rsInvalidArgument);
    EXPECT(rsExecBindIndex(c[0].exec, 1, a, sizeof a), rsBindingError);
    EXPECT(rsExecBind(c[0].exec, NULL, a, sizeof a), rsInvalidArgument);
    /* bind, duplicate, unbind, rebind */
    OK(rsExecBind(c[0].exec, "w.src", a, sizeof a));
    EXPECT(rsExecBind(c[0].exec, "w.src", a, sizeof a), rsBindingError);
    HAS(rsGetLastError(), "already bound");
    OK(rsExecUnbind(c[0].exec, "w.src"));
    EXPECT(rsExecUnbind(c[0].exec, "w.src"), rsBindingError);
    OK(rsExecBind(c[0].exec, "w.src", a, sizeof a));
    OK(rsExecBind(c[1].exec, "w.dst", bb, sizeof bb));
    /* rank 0 runs alone: it is in progress (waiting for rank 1); binding now is refused */
    OK(rsExecRun(c[0].exec));
    usleep(20000);
    EXPECT(rsExecQuery(c[0].exec), rsInProgress);
    EXPECT(rsExecUnbind(c[0].exec, "w.src"), rsInvalidUsage);
    HAS(rsGetLastError(), "in progress");
    EXPECT(rsExecBind(c[0].exec, "w.src", big, sizeof a), rsInvalidUsage); /* re-binding during a run */
    HAS(rsGetLastError(), "while a run is in progress");
    EXPECT(rsExecRun(c[0].exec), rsInvalidUsage);
    OK(rsExecRun(c[1].exec));
    OK(rsExecSynchronize(c[0].exec));
    OK(rsExecSynchronize(c[1].exec));
    rsExecStats_t st;
    OK(rsExecGetStats(c[1].exec, &st));
    RT_CHECK(st.runsCompleted == 1 && st.destinationBytes == 256);
    free_all(plan, c, 2, NULL);
    OK(rsGroupDestroy(g));
    rsPlanDestroy(plan);

    /* A destination overlapping another binding, and a name that is both a source and a destination. */
    rtb *b = rtb_new(1, 1);
    int64_t a1[] = {1}, shape[] = {4};
    uint32_t m = rtb_mesh(b, "m", 1, AX1, a1, 0);
    uint32_t t = rtb_tensor(b, "t", RS_DT_FP32, 1, shape), t2 = rtb_tensor(b, "u", RS_DT_FP32, 1, shape);
    rtb_piece(b, RS_SRC, t, m, 0, NULL, "x");
    rtb_piece(b, RS_DST, t, m, 0, NULL, "x");
    rtb_piece(b, RS_SRC, t2, m, 0, NULL, "u.src");
    rtb_piece(b, RS_DST, t2, m, 0, NULL, "u.dst");
    rtb_layout_done(b);
    rtb_opts o2 = {1, 0, 1};
    rtb_autoplan(b, &o2);
    rs_plan P;
    rtb_finish(b, &P);
    size_t len;
    uint8_t *img = rtb_encode(&P, &len);
    rs_plan_free(&P);
    OK(rsPlanLoadMemory(img, len, 0, &plan));
    free(img);
    OK(rsGroupCreate(rsTransportCpu, 1, NULL, &g));
    rsExec_t x;
    OK(rsExecCreateLocal(plan, g, 0, NULL, &x));
    static float buf[16];
    EXPECT(rsExecBind(x, "x", buf, 16), rsBindingError);
    HAS(rsGetLastError(), "both a source and a destination");
    OK(rsPlanBufferCount(plan, 0, &n));
    RT_CHECK(n == 4);
    for (int i = 0; i < n; i++) {
        OK(rsPlanGetBuffer(plan, 0, i, &bi));
        /* u.dst overlaps u.src: refused when the set completes */
        void *p = !strcmp(bi.name, "u.dst") ? buf + 10 : !strcmp(bi.name, "u.src") ? buf + 8
                : bi.side == rsSideSource ? buf : buf + 4;
        rsResult_t r = rsExecBindIndex(x, i, p, bi.bytes);
        if (r != rsSuccess) {
            RT_CHECK(r == rsBindingError && i == n - 1);
            HAS(rsGetLastError(), "overlaps");
            OK(rsExecBindIndex(x, i, !strcmp(bi.name, "u.dst") ? buf + 12 : buf + 12, bi.bytes));
        }
    }
    for (int i = 0; i < 16; i++) buf[i] = (float)i;
    OK(rsExecRun(x));
    OK(rsExecSynchronize(x));
    RT_CHECK(buf[4] == 0 && buf[7] == 3); /* x copied locally */
    OK(rsExecDestroy(x));
    OK(rsGroupDestroy(g));
    rsPlanDestroy(plan);
    return 0;
}

/* ---------------------------------------------------------------- agreement */

static int t_fingerprint_mismatch(void)
{
    rtb_opts o = {1, 0, 1};
    rsPlan_t a = plan_2d(2, 2, 16, 8, 0, o, 4, NULL, NULL), b = plan_2d(2, 2, 16, 8, 1, o, 4, NULL, NULL);
    rsPlanInfo_t ia, ib;
    OK(rsPlanGetInfo(a, &ia));
    OK(rsPlanGetInfo(b, &ib));
    RT_CHECK(ia.fingerprint != ib.fingerprint && ia.worldSize == 4);
    rsGroup_t g;
    OK(rsGroupCreate(rsTransportCpu, 4, NULL, &g));
    ctx c[4] = {{a, g, 0, 5000, NULL, 0, ""}, {a, g, 1, 5000, NULL, 0, ""}, {b, g, 2, 5000, NULL, 0, ""},
                {a, g, 3, 5000, NULL, 0, ""}};
    double t0 = now();
    create_all(c, 4);
    RT_CHECK(now() - t0 < 2.0); /* no waiting for a timeout */
    for (int i = 0; i < 4; i++) {
        RT_CHECK(c[i].res == rsMismatch && !c[i].exec);
        HAS(c[i].err, "plan fingerprints differ");
        HAS(c[i].err, "ranks 0-1,3 have plan");
        HAS(c[i].err, "rank 2 has plan");
        printf("rank %d: %s\n", i, c[i].err);
    }
    OK(rsGroupDestroy(g));
    rsPlanDestroy(a);
    rsPlanDestroy(b);
    return 0;
}

static int t_world_mismatch(void)
{
    rtb_opts o = {1, 0, 1};
    rsPlan_t p = plan_2d(2, 2, 16, 8, 0, o, 4, NULL, NULL);
    /* a group of 2 ranks running a plan for 4: every rank fails */
    rsGroup_t g;
    OK(rsGroupCreate(rsTransportCpu, 2, NULL, &g));
    ctx c[2] = {{p, g, 0, 5000, NULL, 0, ""}, {p, g, 1, 5000, NULL, 0, ""}};
    create_all(c, 2);
    for (int i = 0; i < 2; i++) {
        RT_CHECK(c[i].res == rsMismatch);
        HAS(c[i].err, "world size mismatch: 2 ranks joined, but ranks 0-1 loaded a plan for 4 ranks");
    }
    OK(rsGroupDestroy(g));
    rsPlanDestroy(p);
    /* a plan loaded for one rank used for another */
    uint8_t *img;
    size_t len;
    rsPlan_t q = plan_2d(1, 1, 4, 4, 0, o, 2, &img, &len);
    rsPlan_t r0, r1;
    OK(rsPlanLoadMemory(img, len, 0, &r0));
    OK(rsPlanLoadMemory(img, len, 1, &r1));
    free(img);
    OK(rsGroupCreate(rsTransportCpu, 2, NULL, &g));
    ctx d[2] = {{r0, g, 0, 5000, NULL, 0, ""}, {r0, g, 1, 5000, NULL, 0, ""}};
    create_all(d, 2);
    RT_CHECK(d[1].res == rsMismatch);
    HAS(d[1].err, "loaded for rank 0, not for rank 1");
    RT_CHECK(d[0].res == rsRemoteError);
    HAS(d[0].err, "rank 1 could not set up its executor");
    OK(rsGroupDestroy(g));
    rsPlanDestroy(q);
    rsPlanDestroy(r0);
    rsPlanDestroy(r1);
    return 0;
}

/* Each rank loads only its own section, as a worker does, and the replay is still exact. */
static int t_per_rank_load(void)
{
    rtb_opts o = {1, 1, 2};
    uint8_t *img;
    size_t len;
    rsPlan_t all = plan_2d(3, 5, 30, 11, 1, o, 4, &img, &len);
    rsPlan_t own[8];
    rsGroup_t g;
    OK(rsGroupCreate(rsTransportCpu, 8, NULL, &g));
    ctx c[8];
    for (int r = 0; r < 8; r++) {
        OK(rsPlanLoadMemory(img, len, r, &own[r]));
        rsPlanInfo_t in;
        OK(rsPlanGetInfo(own[r], &in));
        RT_CHECK(in.rank == r && in.worldSize == 8);
        c[r] = (ctx){own[r], g, r, 5000, NULL, 0, ""};
    }
    free(img);
    create_all(c, 8);
    for (int r = 0; r < 8; r++) OK(c[r].res);
    /* plans may be released once the executors hold them */
    for (int r = 0; r < 8; r++) OK(rsPlanDestroy(own[r]));
    void **mem = bind_all(all, c, 8);
    for (int it = 0; it < 3; it++) {
        for (int r = 0; r < 8; r++) OK(rsExecRun(c[r].exec));
        for (int r = 0; r < 8; r++) OK(rsExecSynchronize(c[r].exec));
    }
    rs_replay_report rep;
    memset(&rep, 0, sizeof rep);
    for (int r = 0; r < 8; r++) rs_replay_check(rs_replay_plan(all), (uint32_t)r, mem[r], &rep);
    RT_CHECK(rep.checked == 30 * 11 && !rep.wrong && !rep.untouched && !rep.src_changed && !rep.plan_errors);
    free_all(all, c, 8, mem);
    OK(rsGroupDestroy(g));
    rsPlanDestroy(all);
    return 0;
}

/* ---------------------------------------------------------------- failure modes */

static int t_never_arrives(void)
{
    rtb_opts o = {1, 0, 1};
    rsPlan_t p = plan_2d(2, 2, 16, 8, 0, o, 4, NULL, NULL);
    /* at creation: ranks 0-2 arrive, rank 3 never does */
    rsGroup_t g;
    OK(rsGroupCreate(rsTransportCpu, 4, NULL, &g));
    ctx c[4];
    for (int i = 0; i < 4; i++) c[i] = (ctx){p, g, i, 300, NULL, 0, ""};
    double t0 = now();
    create_all(c, 3);
    double dt = now() - t0;
    RT_CHECK(dt >= 0.25 && dt < 3.0);
    for (int i = 0; i < 3; i++) {
        RT_CHECK(c[i].res == rsTimeout && !c[i].exec);
        HAS(c[i].err, "rank 3 never created its executor");
    }
    /* the late rank finds the group failed, immediately */
    create_all(c + 3, 1);
    RT_CHECK(c[3].res == rsTimeout);
    OK(rsGroupDestroy(g));

    /* during a run: rank 2 (a destination) never calls rsExecRun; with destinations sharded by columns,
     * both sources send to it and must fail (rank 3 may complete: it needs nothing from rank 2) */
    rsPlanDestroy(p);
    p = plan_2d(2, 2, 16, 8, 1, o, 4, NULL, NULL);
    OK(rsGroupCreate(rsTransportCpu, 4, NULL, &g));
    for (int i = 0; i < 4; i++) c[i] = (ctx){p, g, i, 300, NULL, 0, ""};
    create_all(c, 4);
    for (int i = 0; i < 4; i++) OK(c[i].res);
    void **mem = bind_all(p, c, 4);
    t0 = now();
    for (int i = 0; i < 4; i++)
        if (i != 2) OK(rsExecRun(c[i].exec));
    int timeouts = 0;
    for (int i = 0; i < 4; i++) {
        if (i == 2) continue;
        rsResult_t r = rsExecSynchronize(c[i].exec);
        printf("rank %d: %s: %s\n", i, rsGetErrorString(r), r ? rsGetLastError() : "");
        rsExecStats_t st;
        OK(rsExecGetStats(c[i].exec, &st));
        if (i == 3 && r == rsSuccess) {
            RT_CHECK(st.runsCompleted == 1);
            continue;
        }
        RT_CHECK(r == rsTimeout || r == rsRemoteError);
        timeouts += r == rsTimeout;
        RT_CHECK(st.runsCompleted == 0);
        EXPECT(rsExecRun(c[i].exec), rsInvalidUsage); /* failed executors only accept destroy */
        HAS(rsGetLastError(), "did not take a message");
    }
    RT_CHECK(timeouts >= 1);
    RT_CHECK(now() - t0 < 5.0);
    /* the late rank's run fails at once */
    rsResult_t r = rsExecRun(c[2].exec);
    RT_CHECK(r == rsRemoteError || r == rsTimeout);
    free_all(p, c, 4, mem);
    OK(rsGroupDestroy(g));
    rsPlanDestroy(p);
    return 0;
}

typedef struct {
    rsExec_t x;
    int delay_ms;
} abort_arg;

static void *abort_main(void *arg)
{
    abort_arg *a = arg;
    usleep((useconds_t)a->delay_ms * 1000);
    rsExecAbort(a->x);
    return NULL;
}

static int t_abort(void)
{
    rtb_opts o = {0, 0, 2};
    rsPlan_t p = plan_2d(2, 2, 16, 8, 1, o, 4, NULL, NULL);
    rsGroup_t g;
    OK(rsGroupCreate(rsTransportCpu, 4, NULL, &g));
    ctx c[4];
    for (int i = 0; i < 4; i++) c[i] = (ctx){p, g, i, 60000, NULL, 0, ""};
    create_all(c, 4);
    for (int i = 0; i < 4; i++) OK(c[i].res);
    void **mem = bind_all(p, c, 4);
    /* one good run first */
    for (int i = 0; i < 4; i++) OK(rsExecRun(c[i].exec));
    for (int i = 0; i < 4; i++) OK(rsExecSynchronize(c[i].exec));
    /* ranks 0, 1 and 3 run; rank 2 never does; another thread aborts rank 2's executor: nobody waits for
     * the (one minute) timeout */
    double t0 = now();
    for (int i = 0; i < 4; i++)
        if (i != 2) OK(rsExecRun(c[i].exec));
    pthread_t th;
    abort_arg a = {c[2].exec, 100};
    pthread_create(&th, NULL, abort_main, &a);
    for (int i = 0; i < 4; i++) {
        if (i == 2) continue;
        rsResult_t r = rsExecSynchronize(c[i].exec);
        printf("rank %d: %s: %s\n", i, rsGetErrorString(r), rsGetLastError());
        RT_CHECK(r == rsAborted);
        HAS(rsGetLastError(), "rank 2 called rsExecAbort");
        rsExecStats_t st;
        OK(rsExecGetStats(c[i].exec, &st));
        RT_CHECK(st.runsCompleted == 1 && st.runsStarted == 2);
    }
    pthread_join(th, NULL);
    RT_CHECK(now() - t0 < 5.0);
    EXPECT(rsExecRun(c[2].exec), rsAborted);
    OK(rsExecAbort(c[2].exec)); /* idempotent */
    free_all(p, c, 4, mem);
    OK(rsGroupDestroy(g));
    rsPlanDestroy(p);
    return 0;
}

static int t_inject(void)
{
    rtb_opts o = {0, 1, 3};
    rsPlan_t p = plan_mixed(o);
    /* through the replay driver: the replay fails on every rank */
    rs_replay_result res;
    RT_CHECK(replay(p, 5, 1, &res) == 1);
    RT_CHECK(res.result == rsTransportError || res.result == rsRemoteError);
    /* step by step: a good run, then an injected error in the middle of the next */
    rsGroup_t g;
    OK(rsGroupCreate(rsTransportCpu, 8, NULL, &g));
    ctx c[8];
    for (int i = 0; i < 8; i++) c[i] = (ctx){p, g, i, 10000, NULL, 0, ""};
    create_all(c, 8);
    for (int i = 0; i < 8; i++) OK(c[i].res);
    void **mem = bind_all(p, c, 8);
    for (int i = 0; i < 8; i++) OK(rsExecRun(c[i].exec));
    for (int i = 0; i < 8; i++) OK(rsExecSynchronize(c[i].exec));
    rs_exec_inject_fault(c[5].exec, 1);
    /* a rank starting after rank 5 failed gets the error from rsExecRun already */
    for (int i = 0; i < 8; i++) {
        rsResult_t r = rsExecRun(c[i].exec);
        RT_CHECK(r == rsSuccess || r == rsRemoteError);
    }
    int own = 0, remote = 0;
    for (int i = 0; i < 8; i++) {
        rsResult_t r = rsExecSynchronize(c[i].exec);
        rsExecStats_t st;
        OK(rsExecGetStats(c[i].exec, &st));
        RT_CHECK(st.runsCompleted == 1); /* the failed run updated nothing */
        if (r == rsTransportError) {
            own++;
            RT_CHECK(i == 5);
            HAS(rsGetLastError(), "injected transport error");
        } else if (r == rsRemoteError) {
            remote++;
            HAS(rsGetLastError(), "rank 5 step 1");
        } else {
            fprintf(stderr, "rank %d: unexpected %s: %s\n", i, rsGetErrorString(r), rsGetLastError());
            return 1;
        }
        EXPECT(rsExecQuery(c[i].exec), r); /* the error sticks */
    }
    RT_CHECK(own == 1 && remote == 7);
    free_all(p, c, 8, mem);
    OK(rsGroupDestroy(g));
    rsPlanDestroy(p);
    return 0;
}

/* ---------------------------------------------------------------- API odds and ends */

static int t_api(void)
{
    for (int r = 0; r < rsNumResults; r++) RT_CHECK(rsGetErrorString((rsResult_t)r)[0]);
    int v;
    OK(rsGetVersion(&v));
    RT_CHECK(v == RESHARD_VERSION_CODE);
    rsPlan_t p;
    EXPECT(rsPlanLoad("/nonexistent/plan.bin", 0, &p), rsPlanInvalid);
    EXPECT(rsPlanLoad(NULL, 0, &p), rsInvalidArgument);
    static const uint8_t junk[64] = "not a plan";
    EXPECT(rsPlanLoadMemory(junk, sizeof junk, 0, &p), rsPlanInvalid);
    printf("junk plan: %s\n", rsGetLastError());
    uint8_t *img;
    size_t len;
    rtb_opts o = {1, 0, 1};
    rsPlan_t q = plan_2d(1, 1, 4, 4, 0, o, 2, &img, &len);
    img[len / 2] ^= 0x40; /* one flipped bit: the checksum catches it */
    EXPECT(rsPlanLoadMemory(img, len, 0, &p), rsPlanInvalid);
    img[len / 2] ^= 0x40;
    EXPECT(rsPlanLoadMemory(img, len - 1, 0, &p), rsPlanInvalid);
    EXPECT(rsPlanLoadMemory(img, len, 7, &p), rsPlanInvalid);
    free(img);
    int n;
    EXPECT(rsPlanBufferCount(q, 5, &n), rsInvalidArgument);
    size_t st;
    OK(rsPlanStagingBytes(q, 0, &st));
    rsGroup_t g;
    rsConfig_t cfg = RS_CONFIG_INITIALIZER;
    cfg.version = 99;
    EXPECT(rsGroupCreate(rsTransportCpu, 2, &cfg, &g), rsInvalidArgument);
    cfg.version = RS_CONFIG_VERSION;
    cfg.size = 3;
    EXPECT(rsGroupCreate(rsTransportCpu, 2, &cfg, &g), rsInvalidArgument);
    EXPECT(rsGroupCreate(rsTransportNccl, 2, NULL, &g), rsInvalidArgument);
    EXPECT(rsGroupCreate(rsTransportCpu, 0, NULL, &g), rsInvalidArgument);
    int avail;
    OK(rsTransportAvailable(rsTransportCpu, &avail));
    RT_CHECK(avail == 1);
    OK(rsTransportAvailable(rsTransportNccl, &avail));
    printf("NCCL transport available: %d\n", avail);
    /* an older, smaller config struct is accepted */
    rsConfig_t old = RS_CONFIG_INITIALIZER;
    old.size = offsetof(rsConfig_t, stream);
    old.timeoutMs = 1000;
    OK(rsGroupCreate(rsTransportCpu, 1, &old, &g));
    rsExec_t x;
    EXPECT(rsExecCreateLocal(q, g, 0, &old, &x), rsMismatch); /* world 2 plan on a group of 1 */
    EXPECT(rsGroupDestroy(NULL), rsInvalidArgument);
    OK(rsGroupDestroy(g));
    EXPECT(rsExecRun(NULL), rsInvalidArgument);
    EXPECT(rsExecCreateNccl(q, NULL, NULL, &x), rsInvalidArgument);
    rsPlanDestroy(q);
    return 0;
}

/* ---------------------------------------------------------------- GPU copy descriptors, on the host */

static uint64_t rnd_state = 0x243f6a8885a308d3ull;
static uint64_t rnd(uint64_t n)
{
    rnd_state ^= rnd_state << 13, rnd_state ^= rnd_state >> 7, rnd_state ^= rnd_state << 17;
    return n ? rnd_state % n : 0;
}

/* A random strided shape of `total` bytes: element size es, 1..4 dims with gaps between rows. */
static void rnd_shape(rs_shape *s, uint64_t total, uint64_t es)
{
    uint64_t elems = total / es, dims[4];
    uint32_t nd = 1 + (uint32_t)rnd(3);
    /* factor elems into nd counts */
    for (uint32_t i = 0; i + 1 < nd; i++) {
        uint64_t f = 1;
        for (uint64_t c = 2 + rnd(5); c > 1; c--)
            if (elems % c == 0) {
                f = c;
                break;
            }
        dims[i] = f;
        elems /= f;
    }
    dims[nd - 1] = elems;
    memset(s, 0, sizeof *s);
    s->ndim = nd;
    uint64_t stride = 1;
    for (int i = (int)nd - 1; i >= 0; i--) {
        uint64_t run = i == (int)nd - 1 ? dims[i] * es : dims[i];
        s->count[i] = run;
        s->stride[i] = stride;
        stride = i == (int)nd - 1 ? run + es * rnd(3) : stride * run + es * rnd(2) * stride / (stride ? stride : 1);
    }
}

static uint64_t shape_span(const rs_shape *s)
{
    uint64_t e = 1;
    for (uint32_t i = 0; i < s->ndim; i++) e += (s->count[i] - 1) * s->stride[i];
    return e;
}

/* The kernel's job building and index math (host emulation) against rs_host_copy, on random shapes, element
 * sizes and misalignments. */
static int t_kjob_random(void)
{
    int paths[2] = {0, 0}; /* jobs that took the short-segment / long-segment path */
    for (int it = 0; it < 400; it++) {
        uint64_t es = 1ull << rnd(4), total = es * (1 + rnd(2000));
        if (it % 7 == 0) total = es * 4096 * (1 + rnd(4)); /* long segments: the block-walk path */
        rs_shape a, b;
        rnd_shape(&a, total, es);
        rnd_shape(&b, total, es);
        uint64_t sa = shape_span(&a), sb = shape_span(&b), oa = es * rnd(3), ob = es * rnd(3);
        char *src = malloc(sa + oa + 16), *d1 = calloc(1, sb + ob + 16), *d2 = calloc(1, sb + ob + 16);
        for (uint64_t i = 0; i < sa + oa + 16; i++) src[i] = (char)rnd(256);
        rs_host_copy(d1 + ob, &b, src + oa, &a);
        rs_kjob j;
        uint64_t tile = rs_kjob_tile_bytes(total, 1 + (int)rnd(132));
        uint64_t nt = rs_kjob_build(&j, src + oa, a.ndim, a.count, a.stride, d2 + ob, b.ndim, b.count, b.stride,
                                    total, tile, 0);
        rs_kjob_emulate(&j, 1, nt, 1 + (uint32_t)rnd(300));
        paths[j.vps >= RS_KJOB_LONG_SEGMENT]++;
        if (memcmp(d1, d2, sb + ob + 16)) {
            fprintf(stderr, "kjob mismatch at iteration %d (%llu bytes, vlog %u)\n", it, (unsigned long long)total, j.vlog);
            return 1;
        }
        free(src);
        free(d1);
        free(d2);
    }
    printf("kjob_random: %d jobs on the short-segment path, %d on the long-segment path\n", paths[0], paths[1]);
    RT_CHECK(paths[0] > 0 && paths[1] > 0);
    /* A batch of several jobs in one launch: tiles are found by the kernel's binary search. */
    char *src = malloc(1 << 16), *d1 = calloc(1, 1 << 16), *d2 = calloc(1, 1 << 16);
    for (int i = 0; i < 1 << 16; i++) src[i] = (char)rnd(256);
    rs_kjob jobs[5];
    uint64_t tiles = 0;
    for (int k = 0; k < 5; k++) {
        rs_shape a = {1, {(uint64_t)(1000 + 3 * k)}, {1}};
        rs_host_copy(d1 + 8192 * k, &a, src + 5000 * k, &a);
        tiles += rs_kjob_build(&jobs[k], src + 5000 * k, 1, a.count, a.stride, d2 + 8192 * k, 1, a.count, a.stride,
                               a.count[0], 4096, tiles);
    }
    rs_kjob_emulate(jobs, 5, tiles, RS_KJOB_THREADS);
    RT_CHECK(!memcmp(d1, d2, 1 << 16));
    free(src);
    free(d1);
    free(d2);
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(void);
} tests[] = {
    {"replay_row", t_replay_row},
    {"replay_transpose", t_replay_transpose},
    {"replay_mixed", t_replay_mixed},
    {"replay_forward", t_replay_forward},
    {"checker_bites", t_checker_bites},
    {"host_memory", t_host_memory},
    {"recv_order", t_recv_order},
    {"replay_local", t_replay_local},
    {"bind_errors", t_bind_errors},
    {"fingerprint_mismatch", t_fingerprint_mismatch},
    {"world_mismatch", t_world_mismatch},
    {"per_rank_load", t_per_rank_load},
    {"never_arrives", t_never_arrives},
    {"abort", t_abort},
    {"inject", t_inject},
    {"api", t_api},
    {"kjob_random", t_kjob_random},
};

int main(int argc, char **argv)
{
    int ran = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (argc > 1 && strcmp(argv[1], tests[i].name)) continue;
        printf("== %s\n", tests[i].name);
        fflush(stdout);
        if (tests[i].fn()) return 1;
        ran++;
    }
    if (!ran) {
        fprintf(stderr, "unknown test '%s'\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    return 0;
}
