/* cmd_compile.c - `reshardc LAYOUT -o PLAN [-D NAME=VALUE]... [--staging BYTES] [--fanout-split BYTES]
 * [--relays auto|on|off] [--relay-fanout N] [--no-verify] [--quiet]`:
 * the pass pipeline: front end (parse, elaborate, check) -> planner (regions, fan-out, sources, steps)
 * -> whole-plan verification, while plan.bin is written atomically beside it (put in place only if the plan
 * passes). Exit 0 ok, 1 invalid layout (or a plan that
 * fails verification: a planner bug), 2 bad command line. A failed compile never writes the output. */
#define _GNU_SOURCE /* gettid */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "ir.h"
#include "plan.h"
#include "planner.h"
#include "progress.h"
#include "util.h"

static const char compile_usage[] =
    "usage: reshardc LAYOUT -o PLAN [-D NAME=VALUE]... [--staging BYTES] [--fanout-split BYTES]\n"
    "                [--fanout-zero-copy BYTES] [--relays auto|on|off] [--relay-fanout N] [--no-verify] [--quiet]\n";

static int bad_usage(const char *fmt, const char *arg)
{
    fputs("reshardc: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    fputs(compile_usage, stderr);
    return 2;
}

/* Is argument a the option `name` ("--name VALUE" or "--name=VALUE")? Then *v is its value (NULL when
 * missing) and *i has moved past it. */
static int opt_value(const char *a, const char *name, int argc, char **argv, int *i, const char **v)
{
    size_t n = strlen(name);
    if (strncmp(a, name, n)) return 0;
    if (a[n] == '=') *v = a + n + 1;
    else if (!a[n]) *v = *i + 1 < argc ? argv[++*i] : NULL;
    else return 0;
    return 1;
}

/* BYTES: a decimal integer, optionally with a binary suffix K, M, G (or KiB, MiB, GiB). */
static int parse_bytes(const char *s, uint64_t *out)
{
    if (!s || !*s) return -1;
    uint64_t v = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10) return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (p == s) return -1;
    unsigned shift = 0;
    if (*p == 'k' || *p == 'K') shift = 10, p++;
    else if (*p == 'm' || *p == 'M') shift = 20, p++;
    else if (*p == 'g' || *p == 'G') shift = 30, p++;
    if (shift && (!strcmp(p, "iB") || !strcmp(p, "ib") || !strcmp(p, "B") || !strcmp(p, "b"))) p += strlen(p);
    if (*p) return -1;
    if (shift && v > (UINT64_MAX >> shift)) return -1;
    *out = v << shift;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The plan is written on a thread of its own while it is verified here, and put in place only if it
 * passes (rs_plan_write_file_gated): the write (the kernel copying the file into the page cache, about 0.1 s
 * per 10 MB here) no longer follows verification. Interrupting signals are held on both threads until the
 * file is in place or removed, as rs_write_file holds them on its own (one arriving on this thread would
 * end the process with the temporary file left behind), so Ctrl-C during verification takes effect when
 * it ends. Returns verification's result (-1 with verr); *wrc the write's (-1 with werr; 0 when it was
 * verification that failed); *t_verified when verification ended. */
/* Tests (tests/format.cmake, format_write_unverified): the first SEND one byte longer than its RECV, as a
 * planner bug could make it, so that verification fails while the plan is written. */
static void damage_plan(rs_plan *P)
{
    for (uint32_t r = 0; r < P->layout.topo.world; r++)
        for (uint32_t i = 0; i < P->ranks[r].nops; i++)
            if (P->ranks[r].ops[i].code == RS_OP_SEND) {
                P->ranks[r].ops[i].bytes++;
                return;
            }
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int verdict; /* 0 not yet, 1 verified, -1 failed */
    rs_plan *P;
    const char *out;
    char err[600];
    int rc;
} write_job;

static int write_gate(void *arg)
{
    write_job *j = arg;
    pthread_mutex_lock(&j->mu);
    while (!j->verdict) pthread_cond_wait(&j->cv, &j->mu);
    int v = j->verdict;
    pthread_mutex_unlock(&j->mu);
    return v != 1;
}

static void *write_thread(void *arg)
{
    write_job *j = arg;
    /* lowest priority: it takes what the verifier's threads leave of the CPUs (competing with them, it
     * slowed DeepSeek-V3's simulation by more than the write took) */
    setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
    j->rc = rs_plan_write_file_gated(j->P, j->out, write_gate, j, j->err, sizeof j->err);
    return NULL;
}

static int verify_and_write(rs_plan *P, rs_plan_stats *S, const char *out, char *verr, size_t verrlen, int *wrc,
                            char *werr, size_t werrlen, double *t_verified)
{
    write_job j;
    memset(&j, 0, sizeof j);
    j.P = P;
    j.out = out;
    sigset_t was;
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.cv, NULL);
    pthread_t th;
    int threaded = rs_threads(1, 0) > 1; /* (RESHARD_THREADS=1, or one CPU: verified, then written) */
    if (threaded) {
        rs_hold_interrupts(&was);
        threaded = pthread_create(&th, NULL, write_thread, &j) == 0;
        if (!threaded) pthread_sigmask(SIG_SETMASK, &was, NULL);
    }
    int vrc = rs_planner_verify(P, S, verr, verrlen);
    *t_verified = now_s();
    *wrc = 0;
    if (threaded) {
        pthread_mutex_lock(&j.mu);
        j.verdict = vrc ? -1 : 1;
        pthread_cond_signal(&j.cv);
        pthread_mutex_unlock(&j.mu);
        pthread_join(th, NULL);
        pthread_sigmask(SIG_SETMASK, &was, NULL); /* a signal held meanwhile is delivered here */
        if (!vrc && j.rc) *wrc = -1, snprintf(werr, werrlen, "%s", j.err);
    } else if (!vrc) {
        *wrc = rs_plan_write_file(P, out, werr, werrlen);
    }
    pthread_mutex_destroy(&j.mu);
    pthread_cond_destroy(&j.cv);
    return vrc;
}

int rs_cmd_compile(int argc, char **argv)
{
    rs_front_opts fo;
    rs_front_opts_default(&fo);
    rs_plan_opts po;
    rs_plan_opts_default(&po);
    rs_define *defs = rs_xcalloc((size_t)argc + 1, sizeof *defs);
    uint32_t ndefs = 0;
    const char *path = NULL, *out = NULL;
    int quiet = 0, rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(compile_usage, stdout);
            fputs("Compiles a layout into a verified per-rank transfer plan. --staging: staging bytes per rank\n"
                  "(default 256M; suffixes K, M, G). --fanout-split: a fragment several ranks of a destination\n"
                  "domain need crosses the network in boxes of at least BYTES, one per receiver, each forwarded to\n"
                  "the others over NVLink (default 1M). --fanout-zero-copy: such a box that 4 or more ranks take,\n"
                  "contiguous in their buffers, goes straight into them from BYTES (default: a quarter of the\n"
                  "largest chunk, 4M with the default staging). --relays: destination ranks forward what they\n"
                  "received to other domains: auto (default: where the sources' NICs bound the refit), on (every\n"
                  "fragment enters one network-fed domain from its holders), off. --relay-fanout N: domains each\n"
                  "relaying domain feeds (1: chains, the default; 2: binary trees). --no-verify skips the\n"
                  "whole-plan check (not recommended).\n"
                  "Exit status: 0 success, 1 invalid layout, 2 bad command line.\n",
                  stdout);
            rc = 0;
            goto done;
        }
        if (!strncmp(a, "-D", 2)) {
            const char *d = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
            if (!d) {
                rc = bad_usage("-D needs NAME=VALUE%s", "");
                goto done;
            }
            char err[256];
            if (rs_parse_define(d, &defs[ndefs], err, sizeof err) != 0) {
                rc = bad_usage("%s", err);
                goto done;
            }
            ndefs++;
            continue;
        }
        if (!strncmp(a, "-o", 2) || !strcmp(a, "--output") || !strncmp(a, "--output=", 9)) {
            const char *v;
            if (!strcmp(a, "-o") || !strcmp(a, "--output")) v = i + 1 < argc ? argv[++i] : NULL;
            else if (a[1] == 'o') v = a + 2;
            else v = a + 9;
            if (!v || !*v) {
                rc = bad_usage("-o needs a file name%s", "");
                goto done;
            }
            if (out) {
                rc = bad_usage("-o given twice%s", "");
                goto done;
            }
            out = v;
            continue;
        }
        const char *v;
        if (opt_value(a, "--staging", argc, argv, &i, &v) || opt_value(a, "--fanout-split", argc, argv, &i, &v) ||
            opt_value(a, "--fanout-zero-copy", argc, argv, &i, &v)) {
            int staging = a[2] == 's', zc = !strncmp(a, "--fanout-zero-copy", 18);
            uint64_t b, min = staging ? 256 : 1;
            if (parse_bytes(v, &b) || b < min) {
                fprintf(stderr, "reshardc: %s needs a byte count of at least %s, a whole number with an optional K, M "
                                "or G (e.g. %s), not '%s'\n",
                        staging ? "--staging" : zc ? "--fanout-zero-copy" : "--fanout-split", staging ? "256" : "1",
                        staging ? "268435456 or 256M" : "1048576 or 1M", v ? v : "");
                fputs(compile_usage, stderr);
                rc = 2;
                goto done;
            }
            if (staging) po.staging_bytes = b;
            else if (zc) po.fanout_zero_copy = b;
            else po.fanout_split_min = b;
            continue;
        }
        if (opt_value(a, "--relays", argc, argv, &i, &v)) {
            if (v && !strcmp(v, "auto")) po.relays = RS_RELAYS_AUTO;
            else if (v && !strcmp(v, "on")) po.relays = RS_RELAYS_ON;
            else if (v && !strcmp(v, "off")) po.relays = RS_RELAYS_OFF;
            else {
                rc = bad_usage("--relays takes auto, on or off, not '%s'", v ? v : "");
                goto done;
            }
            continue;
        }
        if (opt_value(a, "--relay-fanout", argc, argv, &i, &v)) {
            char *end = NULL;
            unsigned long n = v ? strtoul(v, &end, 10) : 0;
            if (!v || !*v || *end || n < 1 || n > 64 || v[0] == '-' || v[0] == '+') {
                rc = bad_usage("--relay-fanout takes a count of domains from 1 to 64, not '%s'", v ? v : "");
                goto done;
            }
            po.relay_fanout = (uint32_t)n;
            continue;
        }
        if (!strcmp(a, "--no-verify")) {
            po.verify = 0;
            continue;
        }
        if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            quiet = 1;
            continue;
        }
        if (a[0] == '-' && a[1]) {
            rc = bad_usage("unknown option '%s'", a);
            goto done;
        }
        if (path) {
            rc = bad_usage("one layout at a time (got '%s' too)", a);
            goto done;
        }
        path = a;
    }
    if (!path) {
        rc = bad_usage("no layout given%s", "");
        goto done;
    }
    if (!out) {
        rc = bad_usage("no output given (-o PLAN)%s", "");
        goto done;
    }

    fo.defines = defs;
    fo.ndefines = ndefs;
    double t0 = now_s();
    rs_progress_setup(quiet); /* progress line on a terminal (compiler/progress.c) */
    rs_progress_begin("front end", 0, "");
    rs_ir ir;
    int nerr = rs_front_load(path, &fo, &ir, stderr);
    rs_progress_end();
    if (nerr) {
        rc = ir.define_errors ? 2 : 1;
        rs_ir_free(&ir);
        goto done;
    }
    /* -o naming the layout or a file it includes would replace that file with the plan */
    for (uint32_t i = 0; i < ir.nfiles; i++) {
        if (!rs_same_file(out, ir.files[i])) continue;
        fprintf(stderr, "reshardc: -o %s is the %s '%s': the plan would replace it\n", out,
                i ? "layout's include" : "layout", ir.files[i]);
        rs_ir_free(&ir);
        rc = 2;
        goto done;
    }
    double t1 = now_s();
    /* the source fingerprint: layout text, -D values and compiler version (front end), plus the options */
    struct {
        uint64_t front, staging, zero_copy, split, relays, relay_fanout;
    } fp = {ir.source_fp, po.staging_bytes, po.zero_copy_min, po.fanout_split_min, (uint64_t)po.relays, po.relay_fanout};
    rs_plan P;
    rs_plan_stats S;
    /* progress: the planner's diagnostics are held back until the progress line is erased */
    char *pdiag = NULL;
    size_t pdiag_len = 0;
    FILE *pd = rs_progress_on() ? open_memstream(&pdiag, &pdiag_len) : NULL;
    int verify = po.verify;
    po.verify = 0; /* verified below, while the plan is written */
    po.verify_ahead = verify;
    rs_progress_begin("planning", 0, "");
    int prc = rs_planner_run(&ir, &po, &P, &S, pd ? pd : stderr);
    rs_progress_end();
    if (pd) {
        fclose(pd);
        fputs(pdiag, stderr);
        free(pdiag);
    }
    if (prc) {
        rs_ir_free(&ir);
        rc = 1;
        goto done;
    }
    rs_ir_free(&ir);
    P.source_fp = rs_hash64(&fp, sizeof fp, 0x7265736861726463ull);
    if (po.fanout_zero_copy) /* hashed only when given: plans made without it keep their fingerprints */
        P.source_fp = rs_hash64(&po.fanout_zero_copy, sizeof po.fanout_zero_copy, P.source_fp);
    char err[600];
    double t2 = now_s();
    int wrc;
    if (getenv("RESHARD_TEST_DAMAGE_PLAN")) damage_plan(&P); /* tests: a plan that fails verification */
    if (verify) {
        char verr[600];
        rs_progress_begin("verifying and writing", 0, "");
        int vrc = verify_and_write(&P, &S, out, verr, sizeof verr, &wrc, err, sizeof err, &t2);
        rs_progress_end();
        if (vrc) {
            fprintf(stderr, "reshardc: error: %s\n", verr);
            rs_plan_free(&P);
            rs_plan_stats_free(&S);
            rc = 1;
            goto done;
        }
    } else {
        rs_progress_begin("writing", 0, "");
        wrc = rs_plan_write_file(&P, out, err, sizeof err);
        rs_progress_end();
    }
    if (wrc) {
        fprintf(stderr, "reshardc: %s\n", err);
        rs_plan_free(&P);
        rs_plan_stats_free(&S);
        rc = 1;
        goto done;
    }
    double t3 = now_s();
    if (!quiet) {
        unsigned long long steps = 0, ops = 0, maxst = 0;
        for (uint32_t r = 0; r < P.layout.topo.world; r++) {
            steps += P.ranks[r].nsteps;
            ops += P.ranks[r].nops;
            if (P.ranks[r].staging_bytes > maxst) maxst = P.ranks[r].staging_bytes;
        }
        printf("%s: %u ranks, %u rounds, %llu steps, %llu ops, staging up to %llu bytes per rank; network %llu bytes, "
               "NVLink %llu direct + %llu forwarded, local %llu; %s (front end %.2f s, planner %.2f s, write %.2f s)\n",
               out, P.layout.topo.world, S.rounds, steps, ops, maxst, (unsigned long long)S.net_bytes,
               (unsigned long long)S.nvl_bytes, (unsigned long long)S.fwd_bytes, (unsigned long long)S.local_bytes,
               verify ? "verified" : "NOT verified", t1 - t0, t2 - t1, t3 - t2);
    }
    if (getenv("RESHARDC_TIMING"))
        fprintf(stderr, "reshardc: bindings %.3f s, pass 1 %.3f s, pass 2 %.3f s, pass 3 %.3f s, programs %.3f s, "
                "verification %.3f s (per-rank checks %.3f, matching %.3f, pieces %.3f, relays %.3f, simulation %.3f, "
                "coverage %.3f)\n", S.seconds[0], S.seconds[1], S.seconds[2], S.seconds[3], S.seconds[4], S.seconds[5],
                S.verify_seconds[RS_VERIFY_RANKS], S.verify_seconds[RS_VERIFY_MATCH], S.verify_seconds[RS_VERIFY_PIECES],
                S.verify_seconds[RS_VERIFY_RELAYS], S.verify_seconds[RS_VERIFY_SIMULATE],
                S.verify_seconds[RS_VERIFY_COVERAGE]);
    rs_plan_free(&P);
    rs_plan_stats_free(&S);
    rc = 0;
done:
    for (uint32_t i = 0; i < ndefs; i++) free((void *)defs[i].name);
    free(defs);
    return rc;
}
