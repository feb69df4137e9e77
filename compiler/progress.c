/* progress.c - reshardc's progress line on stderr (see progress.h): phase, done / total units, percentage,
 * elapsed seconds; rate-limited redraws, erased at the end of each phase. Off unless stderr is a terminal. */
#include "progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
    int on, forced, drawn;
    char phase[96], unit[32];
    uint64_t total, done;
    double start, last;
} P;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void rs_progress_setup(int quiet)
{
    memset(&P, 0, sizeof P);
    const char *env = getenv("RESHARDC_PROGRESS");
    if (env && !strcmp(env, "0")) return;
    if (env && !strcmp(env, "1")) {
        P.on = P.forced = 1;
        return;
    }
    const char *term = getenv("TERM");
    P.on = !quiet && isatty(STDERR_FILENO) && !(term && !strcmp(term, "dumb"));
}

int rs_progress_on(void) { return P.on; }

static void draw(double t)
{
    char line[256];
    int n = snprintf(line, sizeof line, "reshardc: %s", P.phase);
    if (P.total && n < (int)sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, ": %llu/%llu %s (%d%%)", (unsigned long long)P.done,
                      (unsigned long long)P.total, P.unit, (int)(100.0 * (double)P.done / (double)P.total));
    else if (P.done && n < (int)sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, ": %llu %s", (unsigned long long)P.done, P.unit);
    if (n < (int)sizeof line) snprintf(line + n, sizeof line - (size_t)n, ", %.1f s", t - P.start);
    /* terminal: back to column 0, the line, erase what an older, longer line left; forced: one line each */
    if (P.forced) fprintf(stderr, "%s\n", line);
    else fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
    P.drawn = 1;
    P.last = t;
}

void rs_progress_begin(const char *phase, uint64_t total, const char *unit)
{
    if (!P.on) return;
    if (P.phase[0]) rs_progress_end();
    snprintf(P.phase, sizeof P.phase, "%s", phase ? phase : "");
    snprintf(P.unit, sizeof P.unit, "%s", unit ? unit : "");
    P.total = total;
    P.done = 0;
    P.start = P.last = now_s();
}

void rs_progress_update(uint64_t done)
{
    if (!P.on || !P.phase[0]) return;
    P.done = done;
    double t = now_s();
    double delay = P.forced ? 0.1 : 0.5;
    if (t - P.start < delay || (P.drawn && t - P.last < 0.1)) return;
    draw(t);
}

void rs_progress_end(void)
{
    if (!P.on || !P.phase[0]) return;
    if (P.forced) {
        P.done = P.total ? P.total : P.done;
        draw(now_s());
    } else if (P.drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    P.phase[0] = 0;
    P.drawn = 0;
}
