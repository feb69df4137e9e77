/* test_gpu.c - GPU tests (CTest label `gpu`): replays plans on the CUDA single-process transport (every rank
 * of a plan in this process, on the visible GPUs, even one) and on the NCCL transport (one rank per visible
 * GPU), checking every destination element; also replays a run captured in a CUDA graph. Plan files given on
 * the command line are replayed too. Exits 77 (skip) when no GPU is present. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#ifdef RESHARD_HAVE_NCCL
#include <nccl.h>
#endif

#include "replay.h"
#include "reshard.h"
#include "rt_samples.h"

#define CK(call)                                                                                         \
    do {                                                                                                 \
        cudaError_t e_ = (call);                                                                         \
        if (e_ != cudaSuccess) {                                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));       \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)
#define OK(call)                                                                                         \
    do {                                                                                                 \
        rsResult_t r_ = (call);                                                                          \
        if (r_ != rsSuccess) {                                                                           \
            fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call, rsGetErrorString(r_),      \
                    rsGetLastError());                                                                   \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

static int ndev;

/* ---------------------------------------------------------------- device memory hooks for the replay driver */

static void *d_alloc(void *ctx, uint32_t rank, uint64_t bytes)
{
    (void)ctx;
    void *p = NULL;
    CK(cudaSetDevice((int)(rank % (uint32_t)ndev)));
    CK(cudaMalloc(&p, bytes));
    return p;
}
static void d_up(void *ctx, uint32_t rank, void *dev, const void *host, uint64_t bytes)
{
    (void)ctx, (void)rank;
    CK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
}
static void d_down(void *ctx, uint32_t rank, void *host, const void *dev, uint64_t bytes)
{
    (void)ctx, (void)rank;
    CK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
}
static void d_free(void *ctx, uint32_t rank, void *dev)
{
    (void)ctx, (void)rank;
    cudaFree(dev);
}
static const rs_replay_mem dmem = {d_alloc, d_up, d_down, d_free, NULL};

static int failures;

static void replay_local(const char *name, rsPlan_t plan)
{
    rs_replay_opts o;
    memset(&o, 0, sizeof o);
    o.transport = rsTransportCudaLocal;
    o.timeout_ms = 60000;
    o.iters = 3;
    o.last = UINT32_MAX;
    o.inject_rank = -1;
    o.mem = &dmem;
    rs_replay_result res;
    int bad = rs_replay_run(plan, &o, &res);
    printf("%-28s cuda-local: %s, %llu elements checked, %llu wrong; best run %.3f ms (%.1f MiB/s)\n", name,
           bad ? "FAILED" : "ok", (unsigned long long)res.rep.checked, (unsigned long long)res.rep.wrong,
           1e3 * res.best_s, res.best_s > 0 ? res.all_dst_bytes / res.best_s / 1048576.0 : 0.0);
    if (res.result != rsSuccess) printf("  %s: %s\n", rsGetErrorString(res.result), res.error);
    for (int i = 0; i < res.rep.nreport; i++) printf("  %s\n", res.rep.report[i]);
    failures += bad;
}

static rsPlan_t load_img(uint8_t *img, size_t len)
{
    rsPlan_t p;
    OK(rsPlanLoadMemory(img, len, RS_ALL_RANKS, &p));
    free(img);
    return p;
}

/* ---------------------------------------------------------------- NCCL: one thread per GPU */

#ifdef RESHARD_HAVE_NCCL
typedef struct {
    rsPlan_t plan;
    ncclComm_t comm;
    const ncclUniqueId *id; /* with comm NULL: rsExecCreateNcclFromId(id, nranks, rank) on `device` */
    int nranks, device;
    int rank;
    int graph;
    rs_replay_report rep;
    rsResult_t res;
    char err[1024];
} nccl_arg;

static void *nccl_rank(void *arg)
{
    nccl_arg *a = arg;
    const rs_plan *P = rs_replay_plan(a->plan);
    const rs_rank_prog *g = &P->ranks[a->rank];
    int gdev = a->comm ? a->rank : a->device;
    CK(cudaSetDevice(gdev));
    rsConfig_t cfg = RS_CONFIG_INITIALIZER;
    cfg.timeoutMs = 60000;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cfg.stream = s;
    rsExec_t x;
    if (a->comm) {
        a->res = rsExecCreateNccl(a->plan, (struct ncclComm *)a->comm, &cfg, &x);
    } else {
        /* the executor on `device`, the thread's current device another one where there are two: every
         * call must leave the current device as it found it */
        cfg.device = gdev;
        CK(cudaSetDevice(gdev == 0 && ndev > 1 ? 1 : 0));
        a->res = rsExecCreateNcclFromId(a->plan, a->id, a->nranks, a->rank, &cfg, &x);
        int cur = -1;
        CK(cudaGetDevice(&cur));
        if (a->res == rsSuccess && cur != (gdev == 0 && ndev > 1 ? 1 : 0)) {
            snprintf(a->err, sizeof a->err, "rsExecCreateNcclFromId left device %d current", cur);
            rsExecDestroy(x);
            a->res = rsInternalError;
        }
        CK(cudaSetDevice(gdev));
    }
    if (a->res != rsSuccess) {
        if (!a->err[0]) snprintf(a->err, sizeof a->err, "%s", rsGetLastError());
        cudaStreamDestroy(s);
        return NULL;
    }
    /* host: one block per binding; dev: one allocation per bindable buffer (each member of a group) */
    uint32_t ns = rs_replay_nslots(a->plan, (uint32_t)a->rank);
    void **host = calloc(g->nbindings + 1, sizeof *host), **dev = calloc(ns + 1, sizeof *dev);
    for (uint32_t i = 0; i < g->nbindings; i++) host[i] = malloc(g->bindings[i].bytes + 1);
    rs_replay_fill(P, (uint32_t)a->rank, host);
    for (uint32_t k = 0; k < ns; k++) {
        uint32_t i;
        uint64_t off, n = rs_replay_slot(a->plan, (uint32_t)a->rank, k, &i, &off);
        CK(cudaMalloc(&dev[k], n + 1));
        CK(cudaMemcpy(dev[k], (char *)host[i] + off, n, cudaMemcpyHostToDevice));
        OK(rsExecBindIndex(x, (int)k, dev[k], n));
    }
    if (a->graph) {
        /* The whole replay captured once, launched twice. */
        cudaGraph_t graph;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        a->res = rsExecRun(x);
        CK(cudaStreamEndCapture(s, &graph));
        /* A captured run ran nothing: it is complete at once, and the executor stays usable. */
        if (a->res == rsSuccess) a->res = rsExecQuery(x);
        if (a->res == rsSuccess) a->res = rsExecSynchronize(x);
        if (a->res == rsSuccess) {
            CK(cudaGraphInstantiate(&ge, graph, 0));
            for (int i = 0; i < 2; i++) CK(cudaGraphLaunch(ge, s));
            CK(cudaStreamSynchronize(s));
            CK(cudaGraphExecDestroy(ge));
        }
        CK(cudaGraphDestroy(graph));
    } else {
        int other = gdev == 0 && ndev > 1 ? 1 : 0;
        for (int i = 0; i < 3 && a->res == rsSuccess; i++) {
            if (!a->comm) CK(cudaSetDevice(other)); /* run and wait from another current device */
            a->res = rsExecRun(x);
            if (a->res == rsSuccess) a->res = rsExecSynchronize(x);
            int cur = -1;
            CK(cudaGetDevice(&cur));
            if (a->res == rsSuccess && cur != (a->comm ? gdev : other)) {
                snprintf(a->err, sizeof a->err, "rsExecRun/rsExecSynchronize left device %d current", cur);
                a->res = rsInternalError;
            }
            CK(cudaSetDevice(gdev));
        }
    }
    if (a->res != rsSuccess && !a->err[0]) snprintf(a->err, sizeof a->err, "%s", rsGetLastError());
    for (uint32_t k = 0; k < ns; k++) {
        uint32_t i;
        uint64_t off, n = rs_replay_slot(a->plan, (uint32_t)a->rank, k, &i, &off);
        CK(cudaMemcpy((char *)host[i] + off, dev[k], n, cudaMemcpyDeviceToHost));
    }
    rs_replay_check(P, (uint32_t)a->rank, host, &a->rep);
    if (a->graph && a->res == rsSuccess) { /* plain runs after the graph's */
        a->res = rsExecRun(x);
        if (a->res == rsSuccess) a->res = rsExecSynchronize(x);
        if (a->res != rsSuccess) snprintf(a->err, sizeof a->err, "after the graph: %s", rsGetLastError());
    }
    rsExecDestroy(x);
    for (uint32_t i = 0; i < g->nbindings; i++) free(host[i]);
    for (uint32_t k = 0; k < ns; k++) cudaFree(dev[k]);
    free(host);
    free(dev);
    cudaStreamDestroy(s);
    return NULL;
}

static void replay_nccl(const char *name, rsPlan_t plan, int graph)
{
    rsPlanInfo_t info;
    OK(rsPlanGetInfo(plan, &info));
    if (info.worldSize != ndev) {
        printf("%-28s nccl: skipped (plan for %d ranks, %d GPUs)\n", name, info.worldSize, ndev);
        return;
    }
    ncclComm_t comms[64];
    if (ncclCommInitAll(comms, ndev, NULL) != ncclSuccess) {
        printf("%-28s nccl: FAILED: ncclCommInitAll\n", name);
        failures++;
        return;
    }
    nccl_arg a[64];
    pthread_t th[64];
    for (int r = 0; r < ndev; r++) {
        memset(&a[r], 0, sizeof a[r]);
        a[r].plan = plan, a[r].comm = comms[r], a[r].rank = r, a[r].graph = graph;
        pthread_create(&th[r], NULL, nccl_rank, &a[r]);
    }
    int bad = 0;
    uint64_t checked = 0;
    for (int r = 0; r < ndev; r++) {
        pthread_join(th[r], NULL);
        checked += a[r].rep.checked;
        if (a[r].res != rsSuccess) printf("  rank %d: %s: %s\n", r, rsGetErrorString(a[r].res), a[r].err);
        for (int i = 0; i < a[r].rep.nreport; i++) printf("  %s\n", a[r].rep.report[i]);
        bad |= a[r].res != rsSuccess || a[r].rep.wrong || a[r].rep.untouched || a[r].rep.src_changed;
    }
    for (int r = 0; r < ndev; r++) ncclCommDestroy(comms[r]);
    printf("%-28s nccl%s: %s, %llu elements checked\n", name, graph ? " (CUDA graph)" : "", bad ? "FAILED" : "ok",
           (unsigned long long)checked);
    failures += bad;
}

/* rsExecCreateNcclFromId: a one-rank id replays, plainly and captured in a CUDA graph (the communicator is
 * made non-blocking, since the executor has a timeout; a one-rank plan has local copies only, so of NCCL
 * this exercises creation and the agreement, not sends); rank 0 of a two-rank id whose rank 1 never comes
 * fails with rsTimeout within about timeoutMs instead of waiting in ncclCommInitRank forever. */
static void nccl_from_id(void)
{
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) {
        printf("%-28s nccl: FAILED: ncclGetUniqueId\n", "from-id");
        failures++;
        return;
    }
    size_t n; /* two statements: the order in which a call's arguments are evaluated is unspecified */
    uint8_t *img = rts_local(1024, 515, 1, &n);
    rsPlan_t plan = load_img(img, n);
    int bad = 0;
    for (int graph = 0; graph < 2; graph++) { /* plain runs, then a run captured in a CUDA graph */
        ncclUniqueId gid;
        if (graph && ncclGetUniqueId(&gid) != ncclSuccess) {
            failures++;
            break;
        }
        nccl_arg a;
        memset(&a, 0, sizeof a);
        a.plan = plan, a.id = graph ? &gid : &id, a.nranks = 1, a.rank = 0, a.device = 0, a.graph = graph;
        nccl_rank(&a);
        bad = a.res != rsSuccess || a.rep.wrong || a.rep.untouched || a.rep.src_changed;
        if (a.res != rsSuccess) printf("  %s: %s\n", rsGetErrorString(a.res), a.err);
        printf("%-28s nccl%s: %s, %llu elements checked\n", "from-id (1 rank)", graph ? " (CUDA graph)" : "",
               bad ? "FAILED" : "ok", (unsigned long long)a.rep.checked);
        failures += bad;
    }

    ncclUniqueId id2;
    if (ncclGetUniqueId(&id2) != ncclSuccess) {
        failures++;
        rsPlanDestroy(plan);
        return;
    }
    rsConfig_t cfg = RS_CONFIG_INITIALIZER;
    cfg.timeoutMs = 3000;
    cfg.device = 0;
    rsExec_t x = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rsResult_t r = rsExecCreateNcclFromId(plan, &id2, 2, 0, &cfg, &x);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    bad = r != rsTimeout || x != NULL || s > 30;
    printf("%-28s nccl: %s after %.1f s (%s: %s)\n", "from-id (rank 1 absent)", bad ? "FAILED" : "timed out, ok", s,
           rsGetErrorString(r), rsGetLastError());
    if (x) rsExecDestroy(x);
    failures += bad;
    rsPlanDestroy(plan);
}
#endif

int main(int argc, char **argv)
{
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("test_gpu: no CUDA device: skipped\n");
        return 77;
    }
    if (ndev > 64) ndev = 64;
    printf("test_gpu: %d CUDA device(s)\n", ndev);
    size_t n;
    rtb_opts zc = {1, 0, 1}, packed = {1, 1, 2}, nvl = {0, 1, 3}, loose = {1, 0, 3};
    struct {
        const char *name;
        uint8_t *img;
        size_t len;
    } s[8];
    int k = 0;
    s[k].img = rts_2d(4, 8, 1000, 333, 0, RS_DT_BF16, zc, 8, &n), s[k].len = n, s[k++].name = "row-sharded";
    s[k].img = rts_2d(4, 8, 1000, 333, 1, RS_DT_FP32, packed, 4, &n), s[k].len = n, s[k++].name = "transpose";
    s[k].img = rts_mixed(nvl, &n), s[k].len = n, s[k++].name = "mixed";
    s[k].img = rts_mixed(loose, &n), s[k].len = n, s[k++].name = "mixed-zero-copy";
    s[k].img = rts_forward(&n), s[k].len = n, s[k++].name = "forward";
    s[k].img = rts_local(777, 129, 1, &n), s[k].len = n, s[k++].name = "local";
    for (int i = 0; i < k; i++) {
        rsPlan_t p = load_img(s[i].img, s[i].len);
        replay_local(s[i].name, p);
        rsPlanDestroy(p);
    }
    for (int i = 1; i < argc; i++) {
        rsPlan_t p;
        OK(rsPlanLoad(argv[i], RS_ALL_RANKS, &p));
        replay_local(argv[i], p);
        rsPlanDestroy(p);
    }
#ifdef RESHARD_HAVE_NCCL
    /* NCCL over the visible GPUs: a plan for exactly that many ranks. */
    uint8_t *img;
    if (ndev == 1) img = rts_local(1024, 515, 1, &n);
    else img = rts_2d((uint32_t)ndev / 2, (uint32_t)(ndev - ndev / 2), 1000, 335, 1, RS_DT_BF16, nvl, 4, &n);
    rsPlan_t p = load_img(img, n);
    replay_nccl("nccl-world", p, 0);
    replay_nccl("nccl-world", p, 1);
    rsPlanDestroy(p);
    nccl_from_id();
#endif
    printf("test_gpu: %s\n", failures ? "FAILED" : "all GPU replays correct");
    return failures ? 1 : 0;
}
