/* front_bench.c - front-end benchmark: parses and checks big layouts (by default the two forms that
 * gen_big_layout writes: loops, and every statement written out) in fresh processes and prints a
 * table of CPU time, wall time and peak RSS (best of N runs). Not a test: numbers, not verdicts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ir.h"

#ifndef GEN_BIG_LAYOUT
#define GEN_BIG_LAYOUT "gen_big_layout"
#endif

typedef struct {
    double cpu, wall, rss_mib;
    unsigned long tensors, pieces, world;
    int errors;
} result;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One run in a child process, so peak RSS and CPU time are this run's alone. */
static int run_once(const char *path, result *r)
{
    int fd[2];
    if (pipe(fd)) return -1;
    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fd[0]);
        rs_front_opts o;
        rs_front_opts_default(&o);
        rs_ir ir;
        int n = rs_front_load(path, &o, &ir, stderr);
        char msg[128];
        int k = snprintf(msg, sizeof msg, "%d %u %u %u\n", n, ir.L.ntensors, ir.L.npieces, ir.L.topo.world);
        if (write(fd[1], msg, (size_t)k) != k) _exit(3);
        _exit(0); /* the layout goes with the process, as with reshardc */
    }
    close(fd[1]);
    char msg[128] = {0};
    ssize_t got = read(fd[0], msg, sizeof msg - 1);
    close(fd[0]);
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || got <= 0) return -1;
    r->wall = now() - t0;
    r->cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
             1e-6 * (double)ru.ru_stime.tv_usec;
    r->rss_mib = (double)ru.ru_maxrss / 1024.0;
    if (sscanf(msg, "%d %lu %lu %lu", &r->errors, &r->tensors, &r->pieces, &r->world) != 4) return -1;
    return 0;
}

int main(int argc, char **argv)
{
    int runs = 3;
    const char *paths[16];
    const char *labels[16];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: bench_front [--runs N] [LAYOUT]...\n"
                            "  without layouts: generates the loop and flat forms with %s\n",
                    GEN_BIG_LAYOUT);
            return 2;
        } else if (n < 16) {
            paths[n] = argv[i];
            labels[n++] = argv[i];
        }
    }
    static char loop_path[512], flat_path[512];
    if (n == 0) {
        const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(loop_path, sizeof loop_path, "%s/rs_bench_front_loops.layout", dir);
        snprintf(flat_path, sizeof flat_path, "%s/rs_bench_front_flat.layout", dir);
        char cmd[2048];
        snprintf(cmd, sizeof cmd, "'%s' -o '%s' && '%s' --flat -o '%s'", GEN_BIG_LAYOUT, loop_path, GEN_BIG_LAYOUT,
                 flat_path);
        if (system(cmd) != 0) {
            fprintf(stderr, "bench_front: generating the layouts failed: %s\n", cmd);
            return 1;
        }
        paths[0] = loop_path;
        labels[0] = "gen_big_layout (loops)";
        paths[1] = flat_path;
        labels[1] = "gen_big_layout --flat";
        n = 2;
    }
    printf("front end: parse, elaborate and check (rs_front_load), best of %d runs, each in a fresh process\n\n", runs);
    printf("%-26s %12s %8s %8s %6s %7s %7s %9s\n", "layout", "text_bytes", "tensors", "pieces", "ranks", "cpu_s",
           "wall_s", "peak_MiB");
    int rc = 0;
    for (int i = 0; i < n; i++) {
        struct stat sb;
        long long bytes = stat(paths[i], &sb) == 0 ? (long long)sb.st_size : -1;
        result best = {0}, r;
        int ok = 0;
        for (int k = 0; k < runs; k++) {
            if (run_once(paths[i], &r) != 0) break;
            if (!ok || r.cpu < best.cpu) best = r;
            ok = 1;
        }
        if (!ok || best.errors) {
            printf("%-26s %12lld  failed (%d errors)\n", labels[i], bytes, ok ? best.errors : -1);
            rc = 1;
            continue;
        }
        printf("%-26s %12lld %8lu %8lu %6lu %7.2f %7.2f %9.1f\n", labels[i], bytes, best.tensors, best.pieces,
               best.world, best.cpu, best.wall, best.rss_mib);
    }
    return rc;
}
