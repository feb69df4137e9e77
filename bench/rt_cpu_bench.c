/* rt_cpu_bench.c - CPU threads transport replay throughput (destination bytes per second) against memcpy of
 * the same total bytes in the same run, for a mostly zero-copy row-sharded plan and a plan that transposes
 * shard dims (pack and unpack on every byte); plan files given as arguments are measured too.
 *     bench_runtime_cpu [--mib N] [--iters K] [PLAN...]
 * Targets (issue 4): row-sharded >= 0.5x memcpy, transposed >= 0.25x memcpy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "replay.h"
#include "reshard.h"
#include "rt_samples.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Best of `iters` single-threaded memcpy of `bytes` (buffers touched first). */
static double memcpy_best(uint64_t bytes, int iters)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    double best = 1e30;
    for (int i = 0; i < iters; i++) {
        double t0 = now();
        memcpy(b, a, bytes);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    volatile char sink = b[bytes / 2];
    (void)sink;
    free(a);
    free(b);
    return best;
}

static int row(const char *name, rsPlan_t plan, int iters, double target)
{
    rs_replay_opts o;
    memset(&o, 0, sizeof o);
    o.transport = rsTransportCpu;
    o.timeout_ms = 600000;
    o.iters = iters;
    o.last = UINT32_MAX;
    o.inject_rank = -1;
    rs_replay_result res;
    int bad = rs_replay_run(plan, &o, &res);
    if (bad) {
        printf("%-22s FAILED: %s %s (%llu wrong)\n", name, rsGetErrorString(res.result), res.error,
               (unsigned long long)res.rep.wrong);
        return 1;
    }
    double mc = memcpy_best(res.all_dst_bytes, iters > 3 ? iters : 3);
    double gbs = res.all_dst_bytes / res.best_s / 1e9, mgbs = res.all_dst_bytes / mc / 1e9;
    double ratio = gbs / mgbs;
    rsPlanInfo_t info;
    rsPlanGetInfo(plan, &info);
    printf("%-22s %5d %9.1f %9.1f %9.2f %10.2f %10.2f %6.2fx", name, info.worldSize, res.all_dst_bytes / 1048576.0,
           (res.sent[0] + res.sent[1]) / 1048576.0, 1e3 * res.best_s, gbs, mgbs, ratio);
    if (target > 0) printf("  %s %.2fx", ratio >= target ? ">=" : "BELOW", target);
    printf("\n");
    return 0;
}

int main(int argc, char **argv)
{
    int mib = 256, iters = 5, bad = 0;
    int first_file = argc;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else {
            first_file = i;
            break;
        }
    }
    /* bf16 [R, C] with R*C*2 = mib MiB; C = 4096 columns (a hidden size), 12 ranks: 4 sources, 8 destinations */
    int64_t C = 4096, R = ((int64_t)mib << 20) / (2 * C);
    R -= R % 32;
    printf("CPU threads transport: replay vs memcpy of the same bytes (best of %d runs, %d cores online)\n", iters,
           (int)sysconf(_SC_NPROCESSORS_ONLN));
    printf("%-22s %5s %9s %9s %9s %10s %10s %7s\n", "plan", "ranks", "dst MiB", "sent MiB", "run ms", "replay GB/s",
           "memcpy GB/s", "ratio");
    size_t n;
    rsPlan_t p;
    rtb_opts zc = {1, 0, 1}, packed = {1, 1, 4};
    uint8_t *img = rts_2d(4, 8, R, C, 0, RS_DT_BF16, zc, 8, &n);
    if (rsPlanLoadMemory(img, n, RS_ALL_RANKS, &p) != rsSuccess) return fprintf(stderr, "%s\n", rsGetLastError()), 1;
    free(img);
    bad |= row("row-sharded (0-copy)", p, iters, 0.5);
    rsPlanDestroy(p);
    img = rts_2d(4, 8, R, C, 1, RS_DT_BF16, packed, 8, &n);
    if (rsPlanLoadMemory(img, n, RS_ALL_RANKS, &p) != rsSuccess) return fprintf(stderr, "%s\n", rsGetLastError()), 1;
    free(img);
    bad |= row("transposed (packed)", p, iters, 0.25);
    rsPlanDestroy(p);
    for (int i = first_file; i < argc; i++) {
        if (rsPlanLoad(argv[i], RS_ALL_RANKS, &p) != rsSuccess) {
            fprintf(stderr, "%s: %s\n", argv[i], rsGetLastError());
            bad = 1;
            continue;
        }
        const char *base = strrchr(argv[i], '/');
        bad |= row(base ? base + 1 : argv[i], p, iters, 0);
        rsPlanDestroy(p);
    }
    return bad;
}
