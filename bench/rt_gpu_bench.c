/* rt_gpu_bench.c - the GPU table: (1) pack/unpack kernel bandwidth against cudaMemcpyAsync device-to-device
 * of the same bytes, for fragments of 256 bytes (a head's row of bf16) to 4 MiB, with the kernel's variants
 * (loads in flight per thread, long-segment threshold); (2) host time per rsExecRun call per step on the NCCL
 * transport over the visible GPUs; (3) a whole replay captured in a CUDA graph against plain runs; (4) CUDA
 * single-process replays of plan files given as arguments (scaled examples), checked element by element.
 * Exits 77 without a GPU. Run through bench/gpu.sh. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#ifdef RESHARD_HAVE_NCCL
#include <nccl.h>
#endif

#include "kernels.h"
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
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, rsGetLastError());             \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---------------------------------------------------------------- (1) kernels */

/* The job the runtime builds (rs_kjob_build, 64 KiB tiles as for any copy of 256 KiB or more on an H200) for n
 * fragments of f bytes, source fragments `sstride` bytes apart, destination ones `dstride` apart. */
static rs_kjob frag_job(const char *src, char *dst, uint64_t n, uint64_t f, uint64_t sstride, uint64_t dstride,
                        uint64_t *ntiles)
{
    uint64_t sc[2] = {n, f}, ss[2] = {sstride, 1}, dc[2] = {n, f}, ds[2] = {dstride, 1};
    uint32_t snd = 2, dnd = 2; /* canonical shapes: a contiguous side is one run of n * f bytes */
    if (sstride == f) snd = 1, sc[0] = n * f, ss[0] = 1;
    if (dstride == f) dnd = 1, dc[0] = n * f, ds[0] = 1;
    rs_kjob j;
    *ntiles = rs_kjob_build(&j, src, snd, sc, ss, dst, dnd, dc, ds, n * f, 65536, 0);
    return j;
}

static float time_ms(cudaStream_t s, cudaEvent_t a, cudaEvent_t b, void (*fn)(void *), void *arg)
{
    float best = 1e30f;
    fn(arg); /* warm up */
    for (int i = 0; i < 10; i++) {
        CK(cudaEventRecord(a, s));
        fn(arg);
        CK(cudaEventRecord(b, s));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (ms < best) best = ms;
    }
    return best;
}

typedef struct {
    cudaStream_t s;
    rs_kjob *djob;
    uint64_t ntiles;
    char *src, *dst;
    uint64_t bytes, n, f;
    int inflight, long_segment; /* 0: the runtime's kernel; else rs_cuda_copy_launch_variant's */
} kargs;

static void run_kernel(void *p)
{
    kargs *k = p;
    if (k->inflight)
        CK((cudaError_t)rs_cuda_copy_launch_variant(k->djob, 1, k->ntiles, k->s, k->inflight, k->long_segment));
    else
        CK((cudaError_t)rs_cuda_copy_launch(k->djob, 1, k->ntiles, k->s));
}

/* GB/s of the kernel (variant inflight / long_segment, 0 for the runtime's) on job q */
static double kernel_gbs(kargs *k, cudaEvent_t e0, cudaEvent_t e1, const rs_kjob *q, uint64_t ntiles, int inflight,
                         int long_segment)
{
    CK(cudaMemcpy(k->djob, q, sizeof *q, cudaMemcpyHostToDevice));
    k->ntiles = ntiles, k->inflight = inflight, k->long_segment = long_segment;
    double gbs = (double)k->bytes / (time_ms(k->s, e0, e1, run_kernel, k) * 1e-3) / 1e9;
    k->inflight = 0;
    return gbs;
}

static const char *size_text(char *buf, size_t len, uint64_t f)
{
    if (f >= 1024) snprintf(buf, len, "%llu KiB", (unsigned long long)(f >> 10));
    else snprintf(buf, len, "%llu B", (unsigned long long)f);
    return buf;
}
static void run_memcpy(void *p)
{
    kargs *k = p;
    CK(cudaMemcpyAsync(k->dst, k->src, k->bytes, cudaMemcpyDeviceToDevice, k->s));
}
static void run_memcpy_each(void *p)
{
    kargs *k = p;
    for (uint64_t i = 0; i < k->n; i++)
        CK(cudaMemcpyAsync(k->dst + i * k->f, k->src + 2 * i * k->f, k->f, cudaMemcpyDeviceToDevice, k->s));
}

static void kernels_table(void)
{
    const uint64_t total = 256ull << 20;
    char *a, *b;
    CK(cudaMalloc((void **)&a, 2 * total));
    CK(cudaMalloc((void **)&b, 2 * total));
    CK(cudaMemset(a, 1, 2 * total));
    cudaStream_t s;
    cudaEvent_t e0, e1;
    CK(cudaStreamCreate(&s));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    rs_kjob *dj;
    CK(cudaMalloc((void **)&dj, sizeof(rs_kjob)));
    kargs k = {s, dj, 0, a, b, total, 0, 0, 0, 0};
    float ref = time_ms(s, e0, e1, run_memcpy, &k);
    printf("\n(1) pack/unpack kernel vs cudaMemcpyAsync D2D, %llu MiB per copy (GB/s = bytes copied / s)\n",
           (unsigned long long)(total >> 20));
    printf("    cudaMemcpyAsync, one contiguous copy: %.1f GB/s\n", total / (ref * 1e-3) / 1e9);
    printf("    fragments f bytes, 2f apart on the strided side; the runtime's kernel (%d loads in flight per thread,\n"
           "    segments of %d+ vectors walked by a block), then the pack with other (in flight, long segment):\n",
           RS_KJOB_INFLIGHT, RS_KJOB_LONG_SEGMENT);
    printf("    %9s %8s %10s %10s %10s %8s %10s %10s %10s %10s\n", "fragment", "count", "pack GB/s", "unpack",
           "memcpy/f", "pack/ref", "(1, 64)", "(1, 1024)", "(2, 1024)", "(4, 1024)");
    static const int var[4][2] = {{1, 64}, {1, 1024}, {2, 1024}, {4, 1024}};
    for (uint64_t f = 256; f <= (4u << 20); f <<= 1) {
        uint64_t n = total / f, nt, ntu;
        rs_kjob pack = frag_job(a, b, n, f, 2 * f, f, &nt), unpack = frag_job(b, a, n, f, f, 2 * f, &ntu);
        k.n = n, k.f = f;
        double gp = kernel_gbs(&k, e0, e1, &pack, nt, 0, 0), gu = kernel_gbs(&k, e0, e1, &unpack, ntu, 0, 0);
        char each[32] = "-"; /* one cudaMemcpyAsync per fragment: only where that is not a million calls */
        if (n <= 16384)
            snprintf(each, sizeof each, "%.1f", total / (time_ms(s, e0, e1, run_memcpy_each, &k) * 1e-3) / 1e9);
        char fs[16];
        printf("    %9s %8llu %10.1f %10.1f %10s %7.2fx", size_text(fs, sizeof fs, f), (unsigned long long)n, gp, gu,
               each, gp / (total / (ref * 1e-3) / 1e9));
        for (int i = 0; i < 4; i++) printf(" %10.1f", kernel_gbs(&k, e0, e1, &pack, nt, var[i][0], var[i][1]));
        printf("\n");
    }
    /* a source grid of 64 x (n / 64) fragments (two segment dims: the kernel's mixed-radix offsets divide) */
    printf("    the pack from a 64 x (n / 64) grid of fragments (rows 2 * (n / 64) * f apart), same columns:\n");
    for (uint64_t f = 256; f <= (64u << 10); f <<= 2) {
        uint64_t n = total / f, cols = n / 64, nt;
        uint64_t sc[3] = {64, cols, f}, ss[3] = {2 * cols * f, 2 * f, 1}, dc[1] = {total}, ds[1] = {1};
        rs_kjob q;
        nt = rs_kjob_build(&q, a, 3, sc, ss, b, 1, dc, ds, total, 65536, 0);
        double gp = kernel_gbs(&k, e0, e1, &q, nt, 0, 0);
        char fs[16];
        printf("    %9s %8llu %10.1f %10s %10s %7.2fx", size_text(fs, sizeof fs, f), (unsigned long long)n, gp, "", "",
               gp / (total / (ref * 1e-3) / 1e9));
        for (int i = 0; i < 4; i++) printf(" %10.1f", kernel_gbs(&k, e0, e1, &q, nt, var[i][0], var[i][1]));
        printf("\n");
    }
    cudaFree(dj);
    cudaFree(a);
    cudaFree(b);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaStreamDestroy(s);
}

/* ---------------------------------------------------------------- (2) + (3) NCCL host time, CUDA graph */

#ifdef RESHARD_HAVE_NCCL
typedef struct {
    rsPlan_t plan;
    ncclComm_t comm;
    int rank;
    double host_us_per_run, run_ms, graph_ms, graph_launch_us;
    int nsteps;
    int ok;
} nrank;

static void *nccl_rank(void *arg)
{
    nrank *a = arg;
    const rs_plan *P = rs_replay_plan(a->plan);
    const rs_rank_prog *g = &P->ranks[a->rank];
    CK(cudaSetDevice(a->rank));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    rsConfig_t cfg = RS_CONFIG_INITIALIZER;
    cfg.stream = s;
    rsExec_t x;
    OK(rsExecCreateNccl(a->plan, (struct ncclComm *)a->comm, &cfg, &x));
    uint32_t ns = rs_replay_nslots(a->plan, a->rank); /* a buffer group's members are bound one by one */
    void **dev = calloc(ns + 1, sizeof *dev);
    for (uint32_t k = 0; k < ns; k++) {
        uint32_t i;
        uint64_t off, n = rs_replay_slot(a->plan, a->rank, k, &i, &off);
        CK(cudaMalloc(&dev[k], n + 1));
        OK(rsExecBindIndex(x, (int)k, dev[k], n));
    }
    a->nsteps = (int)g->nsteps;
    for (int i = 0; i < 5; i++) {
        OK(rsExecRun(x));
        OK(rsExecSynchronize(x));
    }
    const int N = 200;
    double host = 0, t0 = now();
    for (int i = 0; i < N; i++) {
        double h = now();
        OK(rsExecRun(x));
        host += now() - h;
        OK(rsExecSynchronize(x));
    }
    a->run_ms = 1e3 * (now() - t0) / N;
    a->host_us_per_run = 1e6 * host / N;
    cudaGraph_t graph;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    OK(rsExecRun(x));
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiate(&ge, graph, 0));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    double launch = 0;
    t0 = now();
    for (int i = 0; i < N; i++) {
        double h = now();
        CK(cudaGraphLaunch(ge, s));
        launch += now() - h;
        CK(cudaStreamSynchronize(s));
    }
    a->graph_ms = 1e3 * (now() - t0) / N;
    a->graph_launch_us = 1e6 * launch / N;
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(graph));
    OK(rsExecDestroy(x));
    for (uint32_t k = 0; k < ns; k++) cudaFree(dev[k]);
    free(dev);
    cudaStreamDestroy(s);
    a->ok = 1;
    return NULL;
}

static void nccl_table(int ndev)
{
    size_t n;
    uint8_t *img;
    rtb_opts o = {1, 1, 16};
    if (ndev == 1) img = rts_local(256, 1024, 64, &n);
    else img = rts_2d((uint32_t)ndev / 2, (uint32_t)(ndev - ndev / 2), 8192, 4096, 1, RS_DT_BF16, o, 8, &n);
    rsPlan_t plan;
    OK(rsPlanLoadMemory(img, n, RS_ALL_RANKS, &plan));
    free(img);
    ncclComm_t comms[64];
    if (ncclCommInitAll(comms, ndev, NULL) != ncclSuccess) {
        printf("\n(2) NCCL: ncclCommInitAll failed\n");
        return;
    }
    nrank a[64];
    pthread_t th[64];
    for (int r = 0; r < ndev; r++) {
        memset(&a[r], 0, sizeof a[r]);
        a[r].plan = plan, a[r].comm = comms[r], a[r].rank = r;
        pthread_create(&th[r], NULL, nccl_rank, &a[r]);
    }
    for (int r = 0; r < ndev; r++) pthread_join(th[r], NULL);
    printf("\n(2) host time per rsExecRun call per step, NCCL transport, %d GPU(s), plan: %s\n", ndev,
           ndev == 1 ? "64 steps of local copy kernels (one GPU: no peers)"
                     : "transposed bf16 8192x4096, 16 steps per lane");
    printf("(3) the same replay captured once in a CUDA graph\n");
    printf("    %4s %6s %14s %12s %12s %16s %12s\n", "rank", "steps", "host us/run", "us/step", "run ms",
           "graph launch us", "graph ms");
    for (int r = 0; r < ndev; r++)
        printf("    %4d %6d %14.1f %12.2f %12.3f %16.1f %12.3f\n", r, a[r].nsteps, a[r].host_us_per_run,
               a[r].nsteps ? a[r].host_us_per_run / a[r].nsteps : 0.0, a[r].run_ms, a[r].graph_launch_us,
               a[r].graph_ms);
    for (int r = 0; r < ndev; r++) ncclCommDestroy(comms[r]);
    rsPlanDestroy(plan);
}
#endif

/* ---------------------------------------------------------------- (4) CUDA single-process replays */

static int ndev_g;
static void *d_alloc(void *c, uint32_t r, uint64_t b)
{
    (void)c;
    void *p;
    CK(cudaSetDevice((int)(r % (uint32_t)ndev_g)));
    CK(cudaMalloc(&p, b));
    return p;
}
static void d_up(void *c, uint32_t r, void *d, const void *h, uint64_t b)
{
    (void)c, (void)r;
    CK(cudaMemcpy(d, h, b, cudaMemcpyHostToDevice));
}
static void d_down(void *c, uint32_t r, void *h, const void *d, uint64_t b)
{
    (void)c, (void)r;
    CK(cudaMemcpy(h, d, b, cudaMemcpyDeviceToHost));
}
static void d_free(void *c, uint32_t r, void *d)
{
    (void)c, (void)r;
    cudaFree(d);
}

int main(int argc, char **argv)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("bench_runtime_gpu: no CUDA device: nothing measured\n");
        return 77;
    }
    if (ndev > 64) ndev = 64;
    ndev_g = ndev;
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("bench_runtime_gpu: %d x %s (%d SMs)\n", ndev, prop.name, prop.multiProcessorCount);
    CK(cudaSetDevice(0));
    kernels_table();
#ifdef RESHARD_HAVE_NCCL
    nccl_table(ndev);
#endif
    if (argc > 1)
        printf("\n(4) CUDA single-process replays (every rank in this process), checked element by element\n");
    rs_replay_mem mem = {d_alloc, d_up, d_down, d_free, NULL};
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        rsPlan_t p;
        if (rsPlanLoad(argv[i], RS_ALL_RANKS, &p) != rsSuccess) {
            printf("    %s: %s\n", argv[i], rsGetLastError());
            bad = 1;
            continue;
        }
        rs_replay_opts o;
        memset(&o, 0, sizeof o);
        o.transport = rsTransportCudaLocal;
        o.timeout_ms = 600000;
        o.iters = 5;
        o.last = UINT32_MAX;
        o.inject_rank = -1;
        o.mem = &mem;
        rs_replay_result res;
        int b = rs_replay_run(p, &o, &res);
        printf("    %-40s %s: %.1f MiB, best %.3f ms, %.1f GB/s, %llu elements checked, %llu wrong\n", argv[i],
               b ? "FAILED" : "ok", res.all_dst_bytes / 1048576.0, 1e3 * res.best_s,
               res.best_s > 0 ? res.all_dst_bytes / res.best_s / 1e9 : 0.0, (unsigned long long)res.rep.checked,
               (unsigned long long)res.rep.wrong);
        bad |= b;
        rsPlanDestroy(p);
    }
    return bad;
}
