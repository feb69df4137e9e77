/* local.c - in-process groups, shared by the CPU threads and CUDA single-process transports: plan
 * agreement at creation, one host thread per lane and rank, NCCL-style send/receive matching through
 * per-peer FIFOs, cross-lane waits, failure propagation (timeouts, aborts, injected errors) to every rank. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt.h"
#include "util.h"

/* Per-rank state. Owned by the group (freed with it), so that a peer may still touch a rank's mailbox or
 * acknowledge its messages while that rank is being torn down after a failure. */
typedef struct rs_local {
    struct rsGroup *g;
    rs_exec *x; /* valid while live */
    int live;
    const rs_local_ops *ops;
    void *priv;
    pthread_mutex_t mu;
    pthread_cond_t cv;               /* run control: start, lanes done, quit */
    pthread_cond_t lane_cv[RS_NLANES]; /* lane l: its messages arrived or were taken, the other lane progressed */
    /* mailbox, per lane: the peers this rank receives from (sorted) and a FIFO per peer */
    uint32_t npeer[RS_NLANES];
    uint32_t *peer[RS_NLANES];
    rs_msg **head[RS_NLANES], **tail[RS_NLANES];
    rs_msg *msgs[RS_NLANES]; /* outgoing messages of the step in progress */
    uint32_t *rpend[RS_NLANES]; /* the step's receives not taken yet (indices into its p2p list) */
    int *rslot[RS_NLANES];       /* their peers' slots (peer_slot), side by side with rpend */
    uint32_t *rseen[RS_NLANES];  /* per peer slot: the scan of rpend that met a receive from it last */
    uint32_t rscan[RS_NLANES];
    uint32_t progress[RS_NLANES];
    /* lane threads */
    pthread_t th[RS_NLANES];
    int has_th[RS_NLANES];
    uint64_t gen;
    int quit;
    int lanes_left;
    double t0;
} rs_local;

struct gslot {
    int arrived;
    rs_agree_rec rec;
    rs_local *loc;
};

struct rsGroup {
    rsTransport_t kind;
    uint32_t n;
    int timeout_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct gslot *slots;
    uint32_t narrived, nlive;
    int agreed;
    uint64_t *finished; /* per rank: runs whose lanes all completed without error */
    atomic_int failed;
    rsResult_t fail_code;
    uint32_t fail_rank;
    char fail_msg[RS_ERRLEN];
};

static void cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

static struct timespec deadline(int ms)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (ms <= 0) {
        t.tv_sec += 1 << 30; /* forever */
        return t;
    }
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
    return t;
}

/* ---------------------------------------------------------------- groups */

rsResult_t rs_local_group_new(rsTransport_t kind, uint32_t n, int timeout_ms, struct rsGroup **out)
{
    struct rsGroup *g = calloc(1, sizeof *g);
    if (!g || !(g->slots = calloc(n, sizeof *g->slots)) || !(g->finished = calloc(n, sizeof *g->finished))) {
        if (g) free(g->slots);
        free(g);
        return rs_rt_err(rsSystemError, "out of memory creating a group of %u ranks", n);
    }
    g->kind = kind;
    g->n = n;
    g->timeout_ms = timeout_ms;
    pthread_mutex_init(&g->mu, NULL);
    cond_init(&g->cv);
    atomic_init(&g->failed, 0);
    *out = g;
    return rsSuccess;
}

int rs_local_group_kind(const struct rsGroup *g) { return g->kind; }
int rs_local_group_timeout(const struct rsGroup *g) { return g->timeout_ms; }

static void local_free(rs_local *L)
{
    if (!L) return;
    for (int l = 0; l < RS_NLANES; l++) {
        free(L->peer[l]);
        free(L->head[l]);
        free(L->tail[l]);
        free(L->msgs[l]);
        free(L->rpend[l]);
        free(L->rslot[l]);
        free(L->rseen[l]);
    }
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->cv);
    for (int l = 0; l < RS_NLANES; l++) pthread_cond_destroy(&L->lane_cv[l]);
    free(L);
}

rsResult_t rsGroupDestroy(rsGroup_t g)
{
    if (!g) return rs_rt_err(rsInvalidArgument, "rsGroupDestroy: group is NULL");
    pthread_mutex_lock(&g->mu);
    uint32_t live = g->nlive;
    pthread_mutex_unlock(&g->mu);
    if (live) return rs_rt_err(rsInvalidUsage, "rsGroupDestroy: %u executors still use the group", live);
    for (uint32_t i = 0; i < g->n; i++) local_free(g->slots[i].loc);
    free(g->slots);
    free(g->finished);
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
    return rsSuccess;
}

/* Wake every waiter of every rank (after the group failed). Never called with g->mu held. */
static void wake_all(struct rsGroup *g)
{
    for (uint32_t i = 0; i < g->n; i++) {
        pthread_mutex_lock(&g->mu);
        rs_local *L = g->slots[i].loc;
        pthread_mutex_unlock(&g->mu);
        if (!L) continue;
        pthread_mutex_lock(&L->mu);
        pthread_cond_broadcast(&L->cv);
        for (int l = 0; l < RS_NLANES; l++) pthread_cond_broadcast(&L->lane_cv[l]);
        pthread_mutex_unlock(&L->mu);
    }
    pthread_mutex_lock(&g->mu);
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* First failure wins; every rank's waits then end with it. Called with g->mu held. */
static void fail_locked(struct rsGroup *g, uint32_t rank, rsResult_t code, const char *msg)
{
    if (atomic_load(&g->failed)) return;
    g->fail_code = code;
    g->fail_rank = rank;
    snprintf(g->fail_msg, sizeof g->fail_msg, "%s", msg);
    atomic_store(&g->failed, 1);
    pthread_cond_broadcast(&g->cv);
}

static void group_fail(struct rsGroup *g, uint32_t rank, rsResult_t code, const char *msg)
{
    pthread_mutex_lock(&g->mu);
    fail_locked(g, rank, code, msg);
    pthread_mutex_unlock(&g->mu);
    wake_all(g);
}

/* The error a rank reports when it stops because the group failed. */
static rsResult_t group_error(struct rsGroup *g, uint32_t rank)
{
    rsResult_t code = g->fail_code == rsAborted ? rsAborted : g->fail_rank == rank ? g->fail_code : rsRemoteError;
    if (g->fail_rank == rank) return rs_rt_err(code, "%s", g->fail_msg);
    return rs_rt_err(code, "rank %u: run cancelled: %s", rank, g->fail_msg);
}

/* ---------------------------------------------------------------- agreement */

void rs_format_ranks(const uint32_t *r, uint32_t n, char *out, size_t len)
{
    size_t k = 0;
    out[0] = 0;
    for (uint32_t i = 0; i < n && k < len;) {
        uint32_t j = i;
        while (j + 1 < n && r[j + 1] == r[j] + 1) j++;
        int w = j == i ? snprintf(out + k, len - k, "%s%u", i ? "," : "", r[i])
                       : snprintf(out + k, len - k, "%s%u-%u", i ? "," : "", r[i], r[j]);
        if (w < 0) break;
        k += (size_t)w;
        i = j + 1;
    }
}

static size_t append(char *msg, size_t k, size_t len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static size_t append(char *msg, size_t k, size_t len, const char *fmt, ...)
{
    if (k >= len) return k;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(msg + k, len - k, fmt, ap);
    va_end(ap);
    return w < 0 ? k : k + (size_t)w;
}

rsResult_t rs_agree_check(const rs_agree_rec *recs, uint32_t n, char *msg, size_t len)
{
    uint32_t *list = malloc((size_t)n * sizeof *list);
    uint8_t *seen = calloc(n, 1);
    char ranks[256];
    size_t k = 0;
    rsResult_t res = rsSuccess;
    msg[0] = 0;
    if (!list || !seen) {
        free(list);
        free(seen);
        snprintf(msg, len, "out of memory comparing plans");
        return rsSystemError;
    }
    /* Root causes first: the world size and the rank numbering (of the ranks that set up fine), then ranks
     * that failed locally, then the plans themselves. */
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!recs[i].status && recs[i].world != n) list[m++] = i;
    if (m) {
        rs_format_ranks(list, m, ranks, sizeof ranks);
        snprintf(msg, len, "world size mismatch: %u ranks joined, but rank%s %s loaded a plan for %u ranks", n,
                 m > 1 ? "s" : "", ranks, recs[list[0]].world);
        res = rsMismatch;
        goto out;
    }
    m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!recs[i].status && recs[i].rank != i) list[m++] = i;
    if (m) {
        rs_format_ranks(list, m, ranks, sizeof ranks);
        snprintf(msg, len, "rank numbering mismatch: communicator rank%s %s run plan rank %u%s", m > 1 ? "s" : "",
                 ranks, recs[list[0]].rank, m > 1 ? ", ..." : "");
        res = rsMismatch;
        goto out;
    }
    m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (recs[i].status) list[m++] = i;
    if (m) {
        rs_format_ranks(list, m, ranks, sizeof ranks);
        snprintf(msg, len, "plan agreement failed: rank%s %s could not set up %s executor%s (first: %s)",
                 m > 1 ? "s" : "", ranks, m > 1 ? "their" : "its", m > 1 ? "s" : "",
                 rsGetErrorString((rsResult_t)recs[list[0]].status));
        res = rsRemoteError;
        goto out;
    }
    int differ = 0;
    for (uint32_t i = 1; i < n; i++) differ |= recs[i].plan_fp != recs[0].plan_fp;
    if (differ) {
        /* Group ranks by fingerprint, in order of first appearance: same text on every rank. */
        k = append(msg, k, len, "plan fingerprints differ:");
        int first = 1;
        for (uint32_t i = 0; i < n; i++) {
            if (seen[i]) continue;
            m = 0;
            for (uint32_t j = i; j < n; j++)
                if (!seen[j] && recs[j].plan_fp == recs[i].plan_fp) seen[j] = 1, list[m++] = j;
            rs_format_ranks(list, m, ranks, sizeof ranks);
            k = append(msg, k, len, "%s rank%s %s %s plan %016llx", first ? "" : ";", m > 1 ? "s" : "", ranks,
                       m > 1 ? "have" : "has", (unsigned long long)recs[i].plan_fp);
            first = 0;
        }
        res = rsMismatch;
    }
out:
    free(list);
    free(seen);
    return res;
}

/* ---------------------------------------------------------------- lane threads */

typedef struct {
    rs_exec *x;
    int lane;
} lane_arg;

static void record_error(rs_exec *x, rsResult_t r)
{
    rs_local *L = x->tp;
    pthread_mutex_lock(&x->mu);
    if (!x->run_res) {
        x->run_res = r;
        snprintf(x->run_err, sizeof x->run_err, "%s", rs_rt_err_msg());
    }
    pthread_mutex_unlock(&x->mu);
    /* Own failures fail the group; a rank that stopped because of the group keeps the group's error. */
    if (!atomic_load(&L->g->failed)) group_fail(L->g, x->rank, r, rs_rt_err_msg());
}

/* The rank's lanes all ended this run: count it for the group when it went well (see rs_local_sync). */
static void run_finished(rs_exec *x)
{
    rs_local *L = x->tp;
    pthread_mutex_lock(&x->mu);
    int ok = x->run_res == rsSuccess;
    pthread_mutex_unlock(&x->mu);
    if (!ok) return;
    pthread_mutex_lock(&L->g->mu);
    L->g->finished[x->rank]++;
    pthread_cond_broadcast(&L->g->cv);
    pthread_mutex_unlock(&L->g->mu);
}

static void *lane_main(void *arg)
{
    lane_arg a = *(lane_arg *)arg;
    free(arg);
    rs_exec *x = a.x;
    rs_local *L = x->tp;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&L->mu);
        while (!L->quit && L->gen == seen) pthread_cond_wait(&L->cv, &L->mu);
        int quit = L->quit;
        seen = L->gen;
        pthread_mutex_unlock(&L->mu);
        if (quit) break;
        rs_rt_err_clear();
        rsResult_t r = rsSuccess;
        if (atomic_load(&L->g->failed)) r = group_error(L->g, x->rank);
        if (r == rsSuccess && L->ops->lane_begin) r = L->ops->lane_begin(x, a.lane);
        if (r == rsSuccess) r = rs_exec_walk(x, a.lane, &x->abort_flag);
        if (r == rsSuccess && L->ops->lane_end) r = L->ops->lane_end(x, a.lane);
        if (r != rsSuccess) record_error(x, r);
        pthread_mutex_lock(&L->mu);
        int last = --L->lanes_left == 0;
        if (last) x->last_run_seconds = rs_now() - L->t0;
        pthread_cond_broadcast(&L->cv);
        pthread_mutex_unlock(&L->mu);
        if (last) run_finished(x);
    }
    return NULL;
}

/* ---------------------------------------------------------------- creation */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static rs_local *local_new(rs_exec *x, struct rsGroup *g, const rs_local_ops *ops)
{
    rs_local *L = calloc(1, sizeof *L);
    if (!L) return NULL;
    L->g = g;
    L->x = x;
    L->ops = ops;
    pthread_mutex_init(&L->mu, NULL);
    cond_init(&L->cv);
    for (int l = 0; l < RS_NLANES; l++) cond_init(&L->lane_cv[l]);
    for (int l = 0; l < RS_NLANES; l++) {
        /* peers this rank receives from on lane l */
        uint32_t n = 0;
        for (uint32_t s = 0; s < x->nlane[l]; s++) n += x->xs[x->lane_steps[l][s]].nrecv;
        L->peer[l] = calloc(n ? n : 1, sizeof(uint32_t));
        L->msgs[l] = calloc(x->max_send ? x->max_send : 1, sizeof(rs_msg));
        L->rpend[l] = calloc(x->max_recv ? x->max_recv : 1, sizeof(uint32_t));
        L->rslot[l] = calloc(x->max_recv ? x->max_recv : 1, sizeof(int));
        if (!L->peer[l] || !L->msgs[l] || !L->rpend[l] || !L->rslot[l]) goto oom;
        n = 0;
        for (uint32_t s = 0; s < x->nlane[l]; s++) {
            const rs_xstep *xs = &x->xs[x->lane_steps[l][s]];
            for (uint32_t i = 0; i < xs->np2p; i++)
                if (!x->p2p[xs->p2p + i].send) L->peer[l][n++] = x->p2p[xs->p2p + i].peer;
        }
        qsort(L->peer[l], n, sizeof(uint32_t), cmp_u32);
        uint32_t u = 0;
        for (uint32_t i = 0; i < n; i++)
            if (!u || L->peer[l][u - 1] != L->peer[l][i]) L->peer[l][u++] = L->peer[l][i];
        L->npeer[l] = u;
        L->head[l] = calloc(u ? u : 1, sizeof(rs_msg *));
        L->tail[l] = calloc(u ? u : 1, sizeof(rs_msg *));
        L->rseen[l] = calloc(u ? u : 1, sizeof(uint32_t));
        if (!L->head[l] || !L->tail[l] || !L->rseen[l]) goto oom;
    }
    return L;
oom:
    local_free(L);
    return NULL;
}

void rs_local_arrive_failed(struct rsGroup *g, int rank, rsResult_t status)
{
    pthread_mutex_lock(&g->mu);
    if (rank >= 0 && (uint32_t)rank < g->n && !g->slots[rank].arrived) {
        g->slots[rank].arrived = 1;
        g->slots[rank].rec.status = (uint32_t)status;
        g->slots[rank].rec.rank = (uint32_t)rank;
        g->narrived++;
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
}

rsResult_t rs_local_create(struct rsGroup *g, rs_exec *x, const rs_local_ops *ops)
{
    if (x->rank >= g->n) {
        return rs_rt_err(rsMismatch, "rank %u is outside the group of %u ranks (the plan is for %u ranks)", x->rank,
                         g->n, x->world);
    }
    rs_local *L = local_new(x, g, ops);
    if (!L) {
        rs_local_arrive_failed(g, (int)x->rank, rsSystemError);
        return rs_rt_err(rsSystemError, "out of memory creating rank %u's executor", x->rank);
    }
    x->tp = L;
    rs_agree_rec rec = {x->P->plan_fp, x->P->source_fp, x->world, x->rank, 0, (uint32_t)x->has_nvl};
    rsResult_t res = rsSuccess;
    pthread_mutex_lock(&g->mu);
    struct gslot *sl = &g->slots[x->rank];
    if (sl->arrived) {
        pthread_mutex_unlock(&g->mu);
        x->tp = NULL;
        local_free(L);
        return rs_rt_err(rsInvalidUsage, "rank %u already joined this group", x->rank);
    }
    sl->arrived = 1;
    sl->rec = rec;
    sl->loc = L;
    L->live = 1;
    g->narrived++;
    g->nlive++;
    pthread_cond_broadcast(&g->cv);
    struct timespec dl = deadline(x->cfg.timeoutMs);
    while (!atomic_load(&g->failed) && g->narrived < g->n) {
        if (pthread_cond_timedwait(&g->cv, &g->mu, &dl) == ETIMEDOUT && g->narrived < g->n) {
            uint32_t *miss = malloc(g->n * sizeof *miss), m = 0;
            char ranks[256] = "?", msg[RS_ERRLEN];
            if (miss) {
                for (uint32_t i = 0; i < g->n; i++)
                    if (!g->slots[i].arrived) miss[m++] = i;
                rs_format_ranks(miss, m, ranks, sizeof ranks);
                free(miss);
            }
            snprintf(msg, sizeof msg, "plan agreement timed out after %d ms: rank%s %s never created %s executor",
                     x->cfg.timeoutMs, m > 1 ? "s" : "", ranks, m > 1 ? "their" : "its");
            fail_locked(g, x->rank, rsTimeout, msg);
            break;
        }
    }
    if (!atomic_load(&g->failed) && !g->agreed) {
        rs_agree_rec *recs = malloc(g->n * sizeof *recs);
        char msg[RS_ERRLEN];
        if (!recs) {
            fail_locked(g, x->rank, rsSystemError, "out of memory comparing plans");
        } else {
            for (uint32_t i = 0; i < g->n; i++) recs[i] = g->slots[i].rec;
            rsResult_t r = rs_agree_check(recs, g->n, msg, sizeof msg);
            free(recs);
            g->agreed = 1;
            if (r != rsSuccess) fail_locked(g, x->rank, r, msg);
        }
    }
    if (atomic_load(&g->failed)) {
        res = g->fail_code == rsAborted ? rsAborted : g->fail_code;
        rs_rt_err(res, "%s", g->fail_msg);
        sl->loc = L; /* stays with the group */
        L->live = 0;
        L->x = NULL;
        g->nlive--;
    }
    pthread_mutex_unlock(&g->mu);
    if (res != rsSuccess) {
        x->tp = NULL;
        wake_all(g);
        return res;
    }
    /* Lane threads, for the lanes that have steps. */
    for (int l = 0; l < RS_NLANES; l++) {
        if (!x->nlane[l]) continue;
        lane_arg *a = malloc(sizeof *a);
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 256 << 10);
        int e = a ? (a->x = x, a->lane = l, pthread_create(&L->th[l], &at, lane_main, a)) : ENOMEM;
        pthread_attr_destroy(&at);
        if (e) {
            free(a);
            rs_rt_err(rsSystemError, "rank %u: cannot start a lane thread: %s", x->rank, strerror(e));
            group_fail(g, x->rank, rsSystemError, rs_rt_err_msg());
            rs_local_destroy(x);
            return rsSystemError;
        }
        L->has_th[l] = 1;
    }
    return rsSuccess;
}

void *rs_local_priv(rs_exec *x) { return ((rs_local *)x->tp)->priv; }
void rs_local_set_priv(rs_exec *x, void *p) { ((rs_local *)x->tp)->priv = p; }
struct rsGroup *rs_local_group(rs_exec *x) { return ((rs_local *)x->tp)->g; }

void rs_local_destroy(rs_exec *x)
{
    rs_local *L = x->tp;
    if (!L) return;
    pthread_mutex_lock(&L->mu);
    L->quit = 1;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    for (int l = 0; l < RS_NLANES; l++)
        if (L->has_th[l]) pthread_join(L->th[l], NULL), L->has_th[l] = 0;
    struct rsGroup *g = L->g;
    pthread_mutex_lock(&L->mu);
    L->live = 0;
    L->x = NULL;
    pthread_mutex_unlock(&L->mu);
    pthread_mutex_lock(&g->mu);
    g->nlive--;
    pthread_mutex_unlock(&g->mu);
    x->tp = NULL;
}

/* ---------------------------------------------------------------- runs */

rsResult_t rs_local_run(rs_exec *x)
{
    rs_local *L = x->tp;
    if (atomic_load(&L->g->failed)) return group_error(L->g, x->rank);
    if (atomic_load(&x->abort_flag)) return rs_rt_err(rsAborted, "rank %u: the executor was aborted", x->rank);
    pthread_mutex_lock(&x->mu);
    x->run_res = rsSuccess;
    x->run_err[0] = 0;
    pthread_mutex_unlock(&x->mu);
    if (L->ops->run_begin) RS_TRY(L->ops->run_begin(x));
    pthread_mutex_lock(&L->mu);
    L->progress[0] = L->progress[1] = 0;
    L->lanes_left = L->has_th[0] + L->has_th[1];
    L->t0 = rs_now();
    if (!L->lanes_left) x->last_run_seconds = 0;
    L->gen++;
    int idle = !L->lanes_left;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    if (idle) run_finished(x);
    return rsSuccess;
}

rsResult_t rs_local_sync(rs_exec *x, int wait)
{
    rs_local *L = x->tp;
    pthread_mutex_lock(&L->mu);
    while (L->lanes_left > 0) {
        if (!wait) {
            pthread_mutex_unlock(&L->mu);
            return rsInProgress;
        }
        pthread_cond_wait(&L->cv, &L->mu); /* every wait inside a lane is bounded */
    }
    pthread_mutex_unlock(&L->mu);
    pthread_mutex_lock(&x->mu);
    rsResult_t r = x->run_res;
    pthread_mutex_unlock(&x->mu);
    if (r == rsSuccess && L->ops->finish) {
        r = L->ops->finish(x, wait);
        if (r == rsInProgress) return r;
        if (r != rsSuccess) record_error(x, r);
    }
    if (r != rsSuccess) return rs_rt_err(x->run_res, "%s", x->run_err);
    /* A run succeeds only when every rank of the group finished it: a rank whose part is done still reports the
     * failure of any other rank, so no destination is reported updated by a refit that failed somewhere. */
    struct rsGroup *g = L->g;
    uint64_t want = L->gen;
    struct timespec dl = deadline(x->cfg.timeoutMs);
    pthread_mutex_lock(&g->mu);
    int failed = 0;
    for (;;) {
        uint32_t behind = 0;
        for (uint32_t i = 0; i < g->n; i++) behind += g->finished[i] < want;
        if (!behind) break; /* everyone finished this run, whatever happened since */
        if ((failed = atomic_load(&g->failed))) break;
        if (!wait) {
            pthread_mutex_unlock(&g->mu);
            return rsInProgress;
        }
        if (pthread_cond_timedwait(&g->cv, &g->mu, &dl) == ETIMEDOUT && !atomic_load(&g->failed)) {
            uint32_t *list = malloc(g->n * sizeof *list), m = 0;
            char ranks[256] = "?", msg[RS_ERRLEN];
            if (list) {
                for (uint32_t i = 0; i < g->n; i++)
                    if (g->finished[i] < want) list[m++] = i;
                rs_format_ranks(list, m, ranks, sizeof ranks);
                free(list);
            }
            snprintf(msg, sizeof msg, "rank %u: run %llu: rank%s %s did not finish it within %d ms", x->rank,
                     (unsigned long long)want, m > 1 ? "s" : "", ranks, x->cfg.timeoutMs);
            fail_locked(g, x->rank, rsTimeout, msg);
            failed = 1;
            break;
        }
    }
    pthread_mutex_unlock(&g->mu);
    if (failed) {
        wake_all(g);
        r = group_error(g, x->rank);
        pthread_mutex_lock(&x->mu);
        if (!x->run_res) {
            x->run_res = r;
            snprintf(x->run_err, sizeof x->run_err, "%s", rs_rt_err_msg());
        }
        pthread_mutex_unlock(&x->mu);
        return r;
    }
    return rsSuccess;
}

void rs_local_abort(rs_exec *x)
{
    rs_local *L = x->tp;
    if (!L) return;
    char msg[128];
    snprintf(msg, sizeof msg, "rank %u called rsExecAbort", x->rank);
    group_fail(L->g, x->rank, rsAborted, msg);
}

/* ---------------------------------------------------------------- primitives */

/* Wait on L->cv (held) until the deadline; returns an error when the group failed or time ran out. */
static rsResult_t wait_locked(rs_local *L, int lane, rs_exec *x, const struct timespec *dl, const char *what)
{
    if (atomic_load(&L->g->failed)) return group_error(L->g, x->rank);
    if (atomic_load(&x->abort_flag)) return rs_rt_err(rsAborted, "rank %u: aborted", x->rank);
    if (pthread_cond_timedwait(&L->lane_cv[lane], &L->mu, dl) == ETIMEDOUT) {
        if (atomic_load(&L->g->failed)) return group_error(L->g, x->rank);
        return rs_rt_err(rsTimeout, "rank %u: %s for %d ms", x->rank, what, x->cfg.timeoutMs);
    }
    return rsSuccess;
}

rsResult_t rs_local_wait_step(rs_exec *x, int lane, uint32_t step)
{
    rs_local *L = x->tp;
    const rs_xstep *t = &x->xs[step];
    struct timespec dl = deadline(x->cfg.timeoutMs);
    char what[96];
    rsResult_t r = rsSuccess;
    pthread_mutex_lock(&L->mu);
    while (L->progress[t->lane] <= t->lane_pos && r == rsSuccess) {
        snprintf(what, sizeof what, "a step of lane %s waited for step %u", lane ? "NVL" : "NET", step);
        r = wait_locked(L, lane, x, &dl, what);
    }
    pthread_mutex_unlock(&L->mu);
    return r;
}

rsResult_t rs_local_step_done(rs_exec *x, int lane, uint32_t step)
{
    (void)step;
    rs_local *L = x->tp;
    pthread_mutex_lock(&L->mu);
    L->progress[lane]++;
    pthread_cond_broadcast(&L->lane_cv[1 - lane]);
    pthread_mutex_unlock(&L->mu);
    return rsSuccess;
}

static int peer_slot(const rs_local *L, int lane, uint32_t peer)
{
    uint32_t lo = 0, hi = L->npeer[lane];
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (L->peer[lane][mid] < peer) lo = mid + 1;
        else hi = mid;
    }
    return lo < L->npeer[lane] && L->peer[lane][lo] == peer ? (int)lo : -1;
}

static rs_local *peer_local(struct rsGroup *g, uint32_t peer)
{
    pthread_mutex_lock(&g->mu);
    rs_local *P = peer < g->n ? g->slots[peer].loc : NULL;
    pthread_mutex_unlock(&g->mu);
    return P;
}

rsResult_t rs_local_group_p2p(rs_exec *x, int lane, uint32_t step)
{
    rs_local *L = x->tp;
    struct rsGroup *g = L->g;
    const rs_xstep *xs = &x->xs[step];
    const char *ln = lane ? "NVL" : "NET";
    rs_msg *msgs = L->msgs[lane];
    uint32_t ns = 0;
    for (uint32_t i = 0; i < xs->np2p; i++) {
        const rs_xp2p *p = &x->p2p[xs->p2p + i];
        if (!p->send) continue;
        rs_msg *m = &msgs[ns++];
        memset(m, 0, sizeof *m);
        m->ptr = p->ptr;
        m->bytes = p->bytes;
        m->from = x->rank;
        m->to = p->peer;
        m->op = p->op;
    }
    if (ns && L->ops->pre_send) RS_TRY(L->ops->pre_send(x, lane, step, msgs, ns));
    /* Post every send (never blocks), in program order: the k-th message to a peer is its k-th receive. */
    ns = 0;
    for (uint32_t i = 0; i < xs->np2p; i++) {
        const rs_xp2p *p = &x->p2p[xs->p2p + i];
        if (!p->send) continue;
        rs_msg *m = &msgs[ns++];
        rs_local *P = peer_local(g, p->peer);
        if (!P) return rs_rt_err(rsTransportError, "rank %u step %u: peer rank %u has no executor", x->rank, step, p->peer);
        int k = peer_slot(P, lane, x->rank);
        if (k < 0)
            return rs_rt_err(rsMismatch, "rank %u step %u (%s): rank %u never receives from rank %u on this lane "
                                         "(the ranks run different plans?)", x->rank, step, ln, p->peer, x->rank);
        pthread_mutex_lock(&P->mu);
        if (!P->live) {
            pthread_mutex_unlock(&P->mu);
            return rs_rt_err(rsTransportError, "rank %u step %u: peer rank %u destroyed its executor", x->rank, step,
                             p->peer);
        }
        if (P->tail[lane][k]) P->tail[lane][k]->next = m;
        else P->head[lane][k] = m;
        P->tail[lane][k] = m;
        pthread_cond_signal(&P->lane_cv[lane]); /* one thread per lane waits there */
        pthread_mutex_unlock(&P->mu);
    }
    /* Receive whichever message of the step has arrived, as NCCL progresses a group's receives independently:
     * taken in program order, a receive could wait for a sender that waits for another of this step's
     * receives to take its message (a cycle the plan verifier rightly does not count as a deadlock). The
     * earliest pending receive from a peer takes that peer's next message, so per peer the k-th send still
     * matches the k-th receive. */
    struct timespec dl = deadline(x->cfg.timeoutMs);
    uint32_t *pend = L->rpend[lane], np = 0;
    int *slot = L->rslot[lane];
    for (uint32_t i = 0; i < xs->np2p; i++)
        if (!x->p2p[xs->p2p + i].send) slot[np] = peer_slot(L, lane, x->p2p[xs->p2p + i].peer), pend[np++] = i;
    while (np) {
        rs_msg *m = NULL;
        uint32_t at = 0; /* the pending receive that takes m */
        rsResult_t r = rsSuccess;
        pthread_mutex_lock(&L->mu);
        for (;;) {
            uint32_t scan = ++L->rscan[lane];
            if (!scan) { /* the stamps wrapped: clear them */
                memset(L->rseen[lane], 0, L->npeer[lane] * sizeof(uint32_t));
                scan = L->rscan[lane] = 1;
            }
            for (at = 0; at < np; at++) {
                int k = slot[at];
                if (L->rseen[lane][k] == scan) continue; /* an earlier pending receive from this peer */
                L->rseen[lane][k] = scan;
                if ((m = L->head[lane][k])) {
                    L->head[lane][k] = m->next;
                    if (!m->next) L->tail[lane][k] = NULL;
                    break;
                }
            }
            if (m) break;
            char what[128];
            snprintf(what, sizeof what, "step %u (%s): no message from rank %u", step, ln,
                     x->p2p[xs->p2p + pend[0]].peer);
            r = wait_locked(L, lane, x, &dl, what);
            if (r != rsSuccess) break;
        }
        pthread_mutex_unlock(&L->mu);
        if (r != rsSuccess) return r;
        const rs_xp2p *p = &x->p2p[xs->p2p + pend[at]];
        memmove(pend + at, pend + at + 1, (np - at - 1) * sizeof *pend);
        memmove(slot + at, slot + at + 1, (np - at - 1) * sizeof *slot);
        np--;
        if (m->bytes != p->bytes)
            r = rs_rt_err(rsMismatch, "rank %u step %u (%s): rank %u sent %llu bytes where %llu were expected (the "
                                      "ranks run different plans?)", x->rank, step, ln, p->peer,
                          (unsigned long long)m->bytes, (unsigned long long)p->bytes);
        else if (atomic_load(&g->failed)) r = group_error(g, x->rank);
        else r = L->ops->recv_copy(x, lane, m, p);
        rs_local *S = peer_local(g, m->from);
        pthread_mutex_lock(&S->mu);
        m->acked = 1;
        pthread_cond_signal(&S->lane_cv[lane]);
        pthread_mutex_unlock(&S->mu);
        if (r != rsSuccess) return r;
    }
    /* The group completes when every receiver has taken its message. */
    rsResult_t r = rsSuccess;
    pthread_mutex_lock(&L->mu);
    for (uint32_t i = 0; i < ns && r == rsSuccess; i++) {
        while (!msgs[i].acked && r == rsSuccess) {
            char what[128];
            snprintf(what, sizeof what, "step %u (%s): rank %u did not take a message", step, ln, msgs[i].to);
            r = wait_locked(L, lane, x, &dl, what);
        }
    }
    pthread_mutex_unlock(&L->mu);
    if (r != rsSuccess) return r;
    if (ns && L->ops->post_send) RS_TRY(L->ops->post_send(x, lane, step, msgs, ns));
    return rsSuccess;
}
