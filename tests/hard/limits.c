/* limits.c - hostile layouts against the front end's documented limits (docs/language.md "Limits"): each
 * one is refused with one clean error at the right file, line and column, inside a memory cap (RLIMIT_AS,
 * as `ulimit -v`; not under AddressSanitizer, which reserves terabytes of address space). Cheap limits are
 * hit at their defaults; tensors, pieces and nested loop iterations with a lowered (overridden) limit and a
 * layout that asks for a thousand times more. Each case runs in a child process: its own cap, its own peak
 * memory (printed). front_api.c checks the same limits' messages with tiny overrides; this adds positions,
 * defaults, memory and scale. */
#define _GNU_SOURCE
#include <limits.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hard.h"
#include "ir.h"
#include "util.h"

static const char *HEAD = "topology { domain_size = 4; }\nmesh m [x = 2] = ranks 0..2;\n";
static char scratch[PATH_MAX];
static int failures;

typedef struct {
    const char *name;
    char *text;                 /* main.layout */
    rs_front_opts o;
    const char *file;           /* the file the error is in (main.layout or an include) */
    uint32_t line;
    const char *marker;         /* the column is where this text starts in that line (NULL: any column) */
    const char *message;
    long max_rss_mb;            /* peak resident memory allowed */
    long cap_mb;                /* address space of this case (0: the run's cap) */
} lcase;

/* The peak allowed: under AddressSanitizer a quarter more (its shadow and quarantine: the tensor and piece
 * cases peaked at 180 and 292 MB uninstrumented, at 401 and 604 MB under ASan on 2026-12-02's VM, against
 * limits of 400 and 600 set when they peaked lower there). */
static long max_rss_mb(const lcase *c)
{
#ifdef RS_ASAN
    return c->max_rss_mb + c->max_rss_mb / 4;
#else
    return c->max_rss_mb;
#endif
}

static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *s = NULL;
    if (vasprintf(&s, f, ap) < 0) rs_die("out of memory");
    va_end(ap);
    return s;
}

static char *repeat(const char *a, int n, const char *mid, const char *b, int m, const char *tail)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = rs_xmalloc(strlen(HEAD) + 16 + la * (size_t)n + strlen(mid) + lb * (size_t)m + strlen(tail) + 1);
    char *p = s + sprintf(s, "%sconst A = ", HEAD);
    for (int i = 0; i < n; i++) p = memcpy(p, a, la), p += la;
    p += sprintf(p, "%s", mid);
    for (int i = 0; i < m; i++) p = memcpy(p, b, lb), p += lb;
    sprintf(p, "%s", tail);
    return s;
}

static void write_file(const char *name, const char *text)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", scratch, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) rs_die("cannot write %s", path);
}

/* The 1-based column of `marker` in line `line` of file `name` (0 when absent). */
static uint32_t column_of(const char *name, uint32_t line, const char *marker)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", scratch, name);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n;
    uint32_t at = 0, col = 0;
    while ((n = getline(&buf, &cap, f)) >= 0)
        if (++at == line) {
            char *m = strstr(buf, marker);
            col = m ? (uint32_t)(m - buf) + 1 : 0;
            break;
        }
    free(buf);
    fclose(f);
    return col;
}

/* In the child: cap the address space, load, print the diagnostics on stdout (the parent reads them). */
static void child(const lcase *c, long cap_mb)
{
#ifndef RS_ASAN
    struct rlimit rl = {(rlim_t)cap_mb << 20, (rlim_t)cap_mb << 20};
    if (setrlimit(RLIMIT_AS, &rl)) _exit(90);
#else
    (void)cap_mb;
#endif
    if (chdir(scratch)) _exit(91);
    rs_ir ir;
    int n = rs_front_load("main.layout", &c->o, &ir, stdout);
    fflush(stdout);
    if (n == 0) rs_ir_free(&ir);
    _exit(n > 0 ? 1 : 0);
}

static void run(lcase *c, long cap_mb)
{
    write_file("main.layout", c->text);
    int pfd[2];
    if (pipe(pfd)) rs_die("pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) rs_die("fork");
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 1);
        child(c, cap_mb);
    }
    close(pfd[1]);
    char *out = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len + 4096 > cap) out = rs_xrealloc(out, cap = cap ? cap * 2 : 65536);
        ssize_t k = read(pfd[0], out + len, cap - len - 1);
        if (k <= 0) break;
        len += (size_t)k;
    }
    close(pfd[0]);
    out = rs_xrealloc(out, len + 1);
    out[len] = 0;
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid) rs_die("wait4");
    long rss_mb = ru.ru_maxrss / 1024;
    char where[PATH_MAX + 64];
    uint32_t col = c->marker ? column_of(c->file, c->line, c->marker) : 0;
    if (c->marker) snprintf(where, sizeof where, "%s:%u:%u: error: ", c->file, c->line, col);
    else snprintf(where, sizeof where, "%s:%u:", c->file, c->line);
    const char *e = strstr(out, where);
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 1 && e && strstr(e, c->message) &&
             strstr(e, c->message) < strchr(e, '\n') && strchr(e, '^') /* the source line and a caret */ &&
             rss_mb <= max_rss_mb(c);
    int elen = e ? (int)(strchr(e, '\n') ? strchr(e, '\n') - e : (ptrdiff_t)strlen(e)) : 0;
    printf("%-22s %s peak %4ld MB  %.*s\n", c->name, ok ? "ok  " : "FAIL", rss_mb, e ? elen : 26,
           e ? e : "(no error at the position)");
    if (!ok) {
        failures++;
        fprintf(stderr, "%s: expected '%s%s' (exit 1, peak <= %ld MB); got exit %s%d, peak %ld MB:\n%s\n", c->name,
                where, c->message, max_rss_mb(c), WIFEXITED(st) ? "" : "signal ",
                WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), rss_mb, out);
    }
    free(out);
}

int main(int argc, char **argv)
{
    long cap_mb = argc > 1 ? atol(argv[1]) : 1024;
    if (rs_hard_scratch(scratch, sizeof scratch, "rs_limits")) rs_die("no scratch directory");
#ifdef RS_ASAN
    printf("AddressSanitizer build: no address-space cap\n");
#else
    printf("address space capped at %ld MB in each case (ulimit -v %ld)\n", cap_mb, cap_mb << 10);
#endif
    /* an include chain deeper than the default 32 levels */
    for (int i = 0; i < 40; i++) {
        char name[32], text[64];
        snprintf(name, sizeof name, "inc_%d.layout", i);
        snprintf(text, sizeof text, "include \"inc_%d.layout\";\n", i + 1);
        write_file(name, text);
    }
    write_file("inc_40.layout", "const Z = 1;\n");

    rs_front_opts d;
    rs_front_opts_default(&d);
    rs_front_opts tensors = d, pieces = d, iters = d;
    tensors.max_tensors = 1000000;
    pieces.max_pieces = 1000000;
    iters.max_iterations = 1000000;
    lcase cases[] = {
        /* expanded tensors and pieces: a lowered limit, a layout asking for 50 x and 1000 x more */
        {"tensors (1e6 of 5e7)", fmt("%sfor i in 0..50000000 { tensor \"t{i}\" : bf16[1]; }\n", HEAD), tensors,
         "main.layout", 3, "\"t{i}\"", "more than 1000000 tensors (the tensor limit)", 400, 0},
        {"pieces (1e6 of 1e9)",
         fmt("%stensor w : bf16[2];\nsrc w on m as \"w\";\nfor i in 0..1000 { for j in 0..1000000 {\n"
             "  dst w on m { x = 0 } as \"d{i}_{j}\";\n} }\n", HEAD),
         pieces, "main.layout", 6, "dst", "more than 1000000 pieces (the piece limit)", 600, 0},
        /* pieces at the default limit (4e6): 2,000 x 2,001 pieces, each its own buffer name, end at the limit's
         * message in about 1.15 GB; the old default (16e6) ran out of memory under this cap first */
        {"pieces (default 4e6)",
         fmt("%stensor w : bf16[2];\nsrc w on m as \"w\";\nfor i in 0..2000 { for j in 0..2001 {\n"
             "  dst w on m { x = 0 } as \"d{i}_{j}\";\n} }\n", HEAD),
         d, "main.layout", 6, "dst", "more than 4000000 pieces (the piece limit)", 1400, 2048},
        /* ranks, at the default limit (1,048,576): checked before anything is allocated for them */
        {"mesh ranks", fmt("topology { domain_size = 4; }\nmesh m [x = 2000000] = ranks 0..2000000;\n"), d,
         "main.layout", 2, "2000000", "mesh 'm' has more than 1048576 positions (the rank limit)", 64, 0},
        {"mesh rank list", fmt("topology { domain_size = 4; }\nmesh m [x = 2] = ranks [0, 5000000];\n"), d,
         "main.layout", 2, "5000000", "rank 5000000 is past the rank limit (1048576 ranks)", 64, 0},
        {"world", fmt("topology { domain_size = 4; world = 2000000; }\nmesh m [x = 2] = ranks 0..2;\n"), d,
         "main.layout", 1, "2000000", "world of 2000000 ranks is past the rank limit (1048576)", 64, 0},
        {"domains", fmt("topology { domains = [0..2000000]; }\nmesh m [x = 2] = ranks 0..2;\n"), d, "main.layout",
         1, "0..2000000", "rank 1999999 is past the rank limit (1048576 ranks)", 64, 0},
        /* buffer groups compared in pairs (names equal but for the digits next to '{*}'), 2e7 pairs */
        {"buffer group pairs",
         fmt("%stensor w : bf16[2, 2];\nfor i in 1000..8000 { src w on m { x = 0 } as \"g{i}{*}\"; }\n"
             "dst w on m { x = 1 } as \"d\";\n", HEAD),
         d, "main.layout", 4, "\"g{i}{*}\"",
         "more than 20000000 pairs of buffer groups whose names differ only in the digits next to '{*}'", 200, 0},
        /* include depth, default 32 */
        {"include depth", fmt("%sinclude \"inc_0.layout\";\n", HEAD), d, "inc_31.layout", 1, "\"inc_32.layout\"",
         "includes nested too deeply (more than 32 levels)", 64, 0},
        /* loop trip counts: one loop refused before it runs (default 1e8); nested loops (lowered to 1e6) */
        {"loop trip count", fmt("%sfor i in 0..1000000000 { }\n", HEAD), d, "main.layout", 3, "for",
         "this loop runs 1000000000 iterations, which takes the layout past its limit of 100000000 loop iterations",
         64, 0},
        {"nested loops (1e6)", fmt("%sfor i in 0..1000000 {\n  for j in 0..1000000 { }\n}\n", HEAD), iters,
         "main.layout", 4, "for", "past its limit of 1000000 loop iterations", 64, 0},
        /* expression depth, default 256: unary, binary, calls, conditionals */
        {"expr depth: unary", repeat("- ", 300, "1", "", 0, ";\n"), d, "main.layout", 3, NULL,
         "expression nested too deeply (more than 256 levels)", 64, 0},
        {"expr depth: binary", repeat("(1 + ", 300, "1", ")", 300, ";\n"), d, "main.layout", 3, NULL,
         "expression nested too deeply (more than 256 levels)", 64, 0},
        {"expr depth: min()", repeat("min(", 300, "1", ")", 300, ";\n"), d, "main.layout", 3, NULL,
         "expression nested too deeply (more than 256 levels)", 64, 0},
        {"expr depth: ?:", repeat("1 ? ", 300, "1", " : 1", 300, ";\n"), d, "main.layout", 3, NULL,
         "expression nested too deeply (more than 256 levels)", 64, 0},
        /* parentheses make no tree node: 100,000 of them end at the parser's stack, still a clean error */
        {"parentheses 1e5", repeat("(", 100000, "1", ")", 100000, ";\n"), d, "main.layout", 3, NULL,
         "nesting too deep: the parser ran out of stack", 64, 0},
        /* block nesting (for/if), 256 */
        {"block nesting", NULL, d, "main.layout", 259, "if", "blocks nested too deeply (more than 256 levels)", 64,
         0},
    };
    size_t ncases = sizeof cases / sizeof *cases;
    {
        size_t n = strlen(HEAD) + 300 * 7 + 300 * 2 + 1;
        char *t = rs_xmalloc(n), *p = t + sprintf(t, "%s", HEAD);
        for (int i = 0; i < 300; i++) p += sprintf(p, "if 1 {\n");
        for (int i = 0; i < 300; i++) p += sprintf(p, "}\n");
        cases[ncases - 1].text = t;
    }
    for (size_t i = 0; i < ncases; i++) {
#ifdef RS_ASAN
        if (cases[i].cap_mb) { /* a case sized for its own cap: ASan's shadow memory would triple its peak */
            printf("%-22s skipped under AddressSanitizer\n", cases[i].name);
            free(cases[i].text);
            continue;
        }
#endif
        run(&cases[i], cases[i].cap_mb ? cases[i].cap_mb : cap_mb);
        free(cases[i].text);
    }
    for (int i = 0; i <= 40; i++) {
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/inc_%d.layout", scratch, i);
        unlink(path);
    }
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/main.layout", scratch);
    unlink(path);
    rmdir(scratch);
    if (failures) {
        fprintf(stderr, "hard_limits: %d failures\n", failures);
        return 1;
    }
    printf("hard_limits: %zu hostile layouts, each a clean error at its position\n", ncases);
    return 0;
}
