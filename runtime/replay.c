/* replay.c - reshard-replay: replays every rank of a plan on the CPU transport (each rank a set of threads)
 * with every source element set to a function of (tensor, global index), checks every destination element,
 * and prints the bytes moved and the throughput. Exit status 0 ok, 1 wrong data or a failed run, 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "reshard.h"

static const char usage[] =
    "usage: reshard-replay PLAN [--ranks N-M] [--iters K] [--timeout MS] [--inject RANK:STEP] [--quiet]\n"
    "                           [--no-memory-check]\n"
    "\n"
    "Replays every rank of PLAN on the CPU threads transport, with every source element set to a function of\n"
    "(tensor, global index), and checks every element of every destination buffer, that destination bytes\n"
    "outside every piece are untouched and that sources are unchanged.\n"
    "  --ranks N-M      check only the destinations of ranks N..M (inclusive); every rank still runs, since\n"
    "                   each rank's program depends on its peers\n"
    "  --iters K        timed runs after the checked one (default 3)\n"
    "  --timeout MS     bound on every wait for a peer (default 60000)\n"
    "  --inject R:S     testing: rank R fails step S with a transport error (the replay must then fail)\n"
    "  --no-memory-check  replay even when the host memory it takes (every rank's buffers, filled) is more\n"
    "                   than /proc/meminfo says is available (it is refused otherwise, before allocating)\n"
    "Exit status: 0 every element correct, 1 wrong data or a failed replay, 2 bad command line or plan.\n";

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* A decimal count in [lo, hi] for option `opt`; exits with status 2 on anything else. */
static int count_arg(const char *opt, const char *v, long lo, long hi)
{
    char *e;
    long x = strtol(v, &e, 10);
    if (e == v || *e || x < lo || x > hi) {
        fprintf(stderr, "reshard-replay: %s needs a whole number from %ld to %ld, not '%s'\n", opt, lo, hi, v);
        exit(2);
    }
    return (int)x;
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    long first = -1, last = -1;
    rs_replay_opts o;
    memset(&o, 0, sizeof o);
    o.transport = rsTransportCpu;
    o.timeout_ms = 60000;
    o.iters = 3;
    o.inject_rank = -1;
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--ranks") && i + 1 < argc) {
            char *e;
            first = strtol(argv[++i], &e, 10);
            last = *e == '-' ? strtol(e + 1, &e, 10) : first;
            if (*e || first < 0 || last < first) {
                fprintf(stderr, "reshard-replay: bad --ranks '%s' (want N-M)\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--iters") && i + 1 < argc) {
            o.iters = count_arg(a, argv[++i], 0, 1000000);
        } else if (!strcmp(a, "--timeout") && i + 1 < argc) {
            o.timeout_ms = count_arg(a, argv[++i], 1, 86400000);
        } else if (!strcmp(a, "--no-memory-check")) {
            o.host_limit = UINT64_MAX;
        } else if (!strcmp(a, "--inject") && i + 1 < argc) {
            const char *v = argv[++i];
            char *e = NULL;
            unsigned long r = v[0] >= '0' && v[0] <= '9' ? strtoul(v, &e, 10) : 0, s = 0;
            int ok = e && *e == ':' && e[1] >= '0' && e[1] <= '9' && r < (1ul << 30);
            if (ok) s = strtoul(e + 1, &e, 10);
            if (!ok || *e || s >= (1ul << 31)) {
                fprintf(stderr, "reshard-replay: bad --inject '%s' (want RANK:STEP)\n", v);
                return 2;
            }
            o.inject_rank = (int)r;
            o.inject_step = (uint32_t)s;
        } else if (!strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (a[0] == '-' || path) {
            if (a[0] != '-') fprintf(stderr, "reshard-replay: one plan only ('%s' and '%s')\n", path, a);
            else if (!strcmp(a, "--ranks") || !strcmp(a, "--iters") || !strcmp(a, "--timeout") ||
                     !strcmp(a, "--inject"))
                fprintf(stderr, "reshard-replay: %s needs a value\n", a);
            else fprintf(stderr, "reshard-replay: unknown option '%s'\n", a);
            fputs(usage, stderr);
            return 2;
        } else {
            path = a;
        }
    }
    if (!path) {
        fputs(usage, stderr);
        return 2;
    }
    rsPlan_t plan;
    if (rsPlanLoad(path, RS_ALL_RANKS, &plan) != rsSuccess) {
        fprintf(stderr, "reshard-replay: %s\n", rsGetLastError());
        return 2;
    }
    rsPlanInfo_t info;
    rsPlanGetInfo(plan, &info);
    uint32_t W = (uint32_t)info.worldSize;
    if (first >= (long)W || last >= (long)W) {
        fprintf(stderr, "reshard-replay: --ranks %ld-%ld outside the plan's %u ranks\n", first, last, W);
        rsPlanDestroy(plan);
        return 2;
    }
    /* an injection that can never happen would let a replay meant to fail pass */
    if (o.inject_rank >= 0) {
        uint32_t r = (uint32_t)o.inject_rank, n = r < W ? rs_replay_plan(plan)->ranks[r].nsteps : 0;
        if (r >= W || o.inject_step >= n) {
            if (r >= W) fprintf(stderr, "reshard-replay: --inject %u:%u: rank %u is outside the plan's %u ranks\n", r,
                                o.inject_step, r, W);
            else fprintf(stderr, "reshard-replay: --inject %u:%u: rank %u has %u steps (0 to %u)\n", r, o.inject_step, r,
                         n, n ? n - 1 : 0);
            rsPlanDestroy(plan);
            return 2;
        }
    }
    o.first = first < 0 ? 0 : (uint32_t)first;
    o.last = first < 0 ? W : (uint32_t)last + 1;
    rs_replay_result res;
    int bad = rs_replay_run(plan, &o, &res);
    if (!quiet || bad)
        printf("reshard-replay: %s: %u ranks, %u steps, plan %016llx\n", path, W, res.nsteps,
               (unsigned long long)info.fingerprint);
    if (res.result != rsSuccess) {
        printf("FAILED: %s: %s\n", rsGetErrorString(res.result), res.error);
        rsPlanDestroy(plan);
        return 1;
    }
    const rs_replay_report *rep = &res.rep;
    if (!quiet || bad) {
        printf("  moved per run: %.3f MiB into destinations, %.3f MiB sent over NET, %.3f MiB over NVL, %.3f MiB "
               "packed/unpacked/copied\n",
               mib(res.all_dst_bytes), mib(res.sent[0]), mib(res.sent[1]), mib(res.copied));
        printf("  checked %llu destination elements on ranks %u-%u: %llu wrong, %llu bytes outside pieces "
               "overwritten, %llu source bytes changed\n",
               (unsigned long long)rep->checked, o.first, o.last - 1, (unsigned long long)rep->wrong,
               (unsigned long long)rep->untouched, (unsigned long long)rep->src_changed);
        double t = res.best_s > 0 ? res.best_s : res.first_s;
        printf("  run time: first %.3f ms, best %.3f ms, mean %.3f ms; throughput %.1f MiB/s (destination bytes, "
               "best run)\n",
               1e3 * res.first_s, 1e3 * res.best_s, 1e3 * res.mean_s, t > 0 ? mib(res.all_dst_bytes) / t : 0.0);
    }
    for (int i = 0; i < rep->nreport; i++) printf("  mismatch: %s\n", rep->report[i]);
    if (bad) printf("FAILED: the replay produced wrong data\n");
    else if (!quiet) printf("OK\n");
    rsPlanDestroy(plan);
    if (fflush(stdout) || ferror(stdout)) { /* a report that did not arrive is a failure too */
        fputs("reshard-replay: cannot write to standard output\n", stderr);
        return 1;
    }
    return bad ? 1 : 0;
}
