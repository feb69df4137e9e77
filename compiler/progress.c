/* progress.c - reshardc's progress line on stderr (see progress.h): phase, done / total units, percentage,
 * elapsed seconds. A ticker thread redraws it ten times a second (so phases that report nothing, such as
 * verification, still show their time); updates only store a counter. Off unless stderr is a terminal. */
#include "progress.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
    int on, forced, drawn, active;
    char phase[96], unit[32];
    uint64_t total;
    double start, last;
    pthread_mutex_t mu;
    pthread_t ticker;
    int ticking;
    double delay; /* a terminal shows phases longer than this (RESHARDC_PROGRESS_DELAY, default 0.5 s) */
} P = {.mu = PTHREAD_MUTEX_INITIALIZER};
static _Atomic uint64_t done_units;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Called with P.mu held. */
static void draw(double t)
{
    char line[256];
    uint64_t done = atomic_load(&done_units);
    int n = snprintf(line, sizeof line, "reshardc: %s", P.phase);
    if (P.total && n < (int)sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, ": %llu/%llu %s (%d%%)", (unsigned long long)done,
                      (unsigned long long)P.total, P.unit, (int)(100.0 * (double)done / (double)P.total));
    else if (done && n < (int)sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, ": %llu %s", (unsigned long long)done, P.unit);
    if (n < (int)sizeof line) snprintf(line + n, sizeof line - (size_t)n, ", %.1f s", t - P.start);
    /* terminal: back to column 0, the line, erase what a longer line left; forced: one line each */
    if (P.forced) fprintf(stderr, "%s\n", line);
    else fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
    P.drawn = 1;
    P.last = t;
}

static void *tick(void *arg)
{
    (void)arg;
    const struct timespec tenth = {0, 100 * 1000 * 1000};
    for (;;) {
        nanosleep(&tenth, NULL);
        pthread_mutex_lock(&P.mu);
        double t = now_s();
        /* a terminal shows phases longer than the delay, redrawn every tenth; forced: once a second */
        if (P.active && t - P.start >= (P.forced ? 1.0 : P.delay) && t - P.last >= (P.forced ? 1.0 : 0.09)) draw(t);
        pthread_mutex_unlock(&P.mu);
    }
    return NULL;
}

void rs_progress_setup(int quiet)
{
    pthread_mutex_lock(&P.mu);
    P.on = P.forced = 0;
    const char *env = getenv("RESHARDC_PROGRESS");
    const char *term = getenv("TERM"), *delay = getenv("RESHARDC_PROGRESS_DELAY");
    P.delay = delay ? atof(delay) : 0.5;
    if (env && !strcmp(env, "1")) P.on = P.forced = 1;
    else if (!(env && !strcmp(env, "0")))
        P.on = !quiet && isatty(STDERR_FILENO) && !(term && !strcmp(term, "dumb"));
    if (P.on && !P.ticking) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&P.ticker, &at, tick, NULL) == 0) P.ticking = 1;
        else P.on = 0; /* no thread, no progress: never an error */
        pthread_attr_destroy(&at);
    }
    pthread_mutex_unlock(&P.mu);
}

int rs_progress_on(void) { return P.on; }

static void end_locked(void)
{
    if (!P.active) return;
    if (P.forced) draw(now_s()); /* the final count */
    else if (P.drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    P.active = P.drawn = 0;
}

void rs_progress_begin(const char *phase, uint64_t total, const char *unit)
{
    if (!P.on) return;
    pthread_mutex_lock(&P.mu);
    end_locked();
    snprintf(P.phase, sizeof P.phase, "%s", phase ? phase : "");
    snprintf(P.unit, sizeof P.unit, "%s", unit ? unit : "");
    P.total = total;
    atomic_store(&done_units, 0);
    P.start = P.last = now_s();
    P.active = 1;
    pthread_mutex_unlock(&P.mu);
}

void rs_progress_update(uint64_t done)
{
    if (P.on) atomic_store_explicit(&done_units, done, memory_order_relaxed);
}

void rs_progress_end(void)
{
    if (!P.on) return;
    pthread_mutex_lock(&P.mu);
    end_locked();
    pthread_mutex_unlock(&P.mu);
}
