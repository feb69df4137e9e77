/* planner.c - the planner's driver: three passes over every tensor's cells (route and collect, size the
 * flows, emit the ops), source choice between the first two, then the per-rank programs and the
 * whole-plan verification. Also the small containers the passes share. */
#include "plan_int.h"

#include "cost.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* ---- hash map ---- */

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static size_t slot_of(const pl_map *m, uint64_t k0, uint64_t k1)
{
    return (size_t)(mix64(k0 ^ mix64(k1 + 0x9e3779b97f4a7c15ull)) & (m->cap - 1));
}

uint64_t *pl_map_get(const pl_map *m, uint64_t k0, uint64_t k1)
{
    if (!m->cap) return NULL;
    for (size_t i = slot_of(m, k0, k1);; i = (i + 1) & (m->cap - 1)) {
        pl_mapent *e = &m->e[i];
        if (e->k0 == UINT64_MAX) return NULL;
        if (e->k0 == k0 && e->k1 == k1) return &e->v;
    }
}

static void map_grow(pl_map *m)
{
    pl_map n = {0};
    n.cap = m->cap ? m->cap * 2 : 64;
    n.e = rs_xmalloc(n.cap * sizeof *n.e);
    for (size_t i = 0; i < n.cap; i++) n.e[i].k0 = UINT64_MAX;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->e[i].k0 == UINT64_MAX) continue;
        size_t j = slot_of(&n, m->e[i].k0, m->e[i].k1);
        while (n.e[j].k0 != UINT64_MAX) j = (j + 1) & (n.cap - 1);
        n.e[j] = m->e[i];
    }
    n.n = m->n;
    free(m->e);
    *m = n;
}

uint64_t *pl_map_put(pl_map *m, uint64_t k0, uint64_t k1, int *created)
{
    rs_assert(k0 != UINT64_MAX);
    if ((m->n + 1) * 2 > m->cap) map_grow(m);
    size_t i = slot_of(m, k0, k1);
    for (; m->e[i].k0 != UINT64_MAX; i = (i + 1) & (m->cap - 1))
        if (m->e[i].k0 == k0 && m->e[i].k1 == k1) {
            if (created) *created = 0;
            return &m->e[i].v;
        }
    m->e[i].k0 = k0;
    m->e[i].k1 = k1;
    m->e[i].v = 0;
    m->n++;
    if (created) *created = 1;
    return &m->e[i].v;
}

void pl_map_clear(pl_map *m)
{
    if (m->cap && m->n)
        for (size_t i = 0; i < m->cap; i++) m->e[i].k0 = UINT64_MAX;
    m->n = 0;
}

void pl_map_free(pl_map *m)
{
    free(m->e);
    memset(m, 0, sizeof *m);
}

/* ---- interned lists ---- */

void pl_intern_init(pl_intern *t)
{
    memset(t, 0, sizeof *t);
    rs_vec_push(&t->begin, 0);
    rs_vec_push(&t->begin, 0); /* id 0: the empty list */
}

uint32_t pl_intern_add(pl_intern *t, const uint32_t *v, uint32_t n)
{
    if (n == 0) return 0;
    uint32_t m0;
    const uint32_t *w0 = pl_intern_list(t, t->last, &m0);
    if (m0 == n && !memcmp(v, w0, n * sizeof *v)) return t->last;
    uint64_t h = rs_hash64(v, n * sizeof *v, n) >> 1; /* never all ones */
    for (uint64_t probe = 0;; probe++) {
        int created;
        uint64_t *slot = pl_map_put(&t->index, h, probe, &created);
        if (created) {
            uint32_t id = (uint32_t)(t->begin.n - 1);
            rs_vec_reserve(&t->data, n);
            memcpy(t->data.v + t->data.n, v, n * sizeof *v);
            t->data.n += n;
            rs_vec_push(&t->begin, (uint32_t)t->data.n);
            *slot = id;
            return t->last = id;
        }
        uint32_t m, id = (uint32_t)*slot;
        const uint32_t *w = pl_intern_list(t, id, &m);
        if (m == n && !memcmp(v, w, n * sizeof *v)) return t->last = id;
    }
}

void pl_intern_free(pl_intern *t)
{
    pl_map_free(&t->index);
    rs_vec_free(&t->data);
    rs_vec_free(&t->begin);
}

/* ---- arena ---- */

void *pl_alloc_slow(pl_arena *a, size_t n)
{
    if (a->buf) rs_vec_push(&a->old, a->buf);
    a->cap = n > (1u << 20) ? n : (1u << 20);
    a->buf = rs_xmalloc(a->cap);
    a->used = n;
    return a->buf;
}

void pl_arena_reset(pl_arena *a)
{
    for (size_t i = 0; i < a->old.n; i++) free(a->old.v[i]);
    a->old.n = 0;
    a->used = 0;
}

void pl_arena_free(pl_arena *a)
{
    pl_arena_reset(a);
    rs_vec_free(&a->old);
    free(a->buf);
    memset(a, 0, sizeof *a);
}

int pl_fail(pl_ctx *c, uint32_t piece, const char *fmt, ...)
{
    if (c->failed) return -1;
    c->failed = 1;
    c->bad_piece = piece;
    va_list ap;
    va_start(ap, fmt);
    if (c->err && c->errlen) vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- options and stats ---- */

void rs_plan_opts_default(rs_plan_opts *o)
{
    memset(o, 0, sizeof *o);
    o->staging_bytes = 256ull << 20;
    o->zero_copy_min = 1ull << 20;
    o->fanout_split_min = 1ull << 20;
    o->fine_min = 64u << 10;
    o->verify = 1;
    o->strided_reads = -1;
    o->relays = RS_RELAYS_AUTO;
    o->relay_fanout = 1;
}

/* Does the per-rank verifier accept a PACK whose source steps by less than its span? (A one-rank plan
 * with one such op.) */
static int probe_strided_reads(void)
{
    rs_plan P;
    memset(&P, 0, sizeof P);
    uint32_t dom = 0;
    rs_buffer b = {.name = "probe", .side = RS_SRC, .dtype = RS_DT_UINT8, .ndim = 1, .shape = {64}};
    P.layout.topo.world = 1;
    P.layout.topo.ndomains = 1;
    P.layout.topo.domain_of = &dom;
    P.layout.buffers = &b;
    P.layout.nbuffers = 1;
    rs_binding bind = {.buffer = 0, .ndim = 1, .shape = {64}, .bytes = 64};
    rs_desc d[2];
    memset(d, 0, sizeof d);
    d[0].loc = 0;
    d[0].ndim = 2;
    d[0].count[0] = 2;
    d[0].count[1] = 32;
    d[0].stride[0] = 16; /* rows 16 bytes apart, 32 bytes each: they overlap */
    d[0].stride[1] = 1;
    d[1].loc = RS_LOC_STAGING;
    d[1].ndim = 1;
    d[1].count[0] = 64;
    d[1].stride[0] = 1;
    rs_op op = {.code = RS_OP_PACK, .tensor = RS_NONE, .src = 0, .dst = 1, .bytes = 64};
    rs_step st = {.lane = RS_LANE_NET, .op_begin = 0, .nops = 1};
    rs_rank_prog g = {.rank = 0, .staging_bytes = 64, .bindings = &bind, .nbindings = 1, .steps = &st, .nsteps = 1,
                      .ops = &op, .nops = 1, .loaded = 1};
    rs_prog_desc_add(&g, &d[0]);
    rs_prog_desc_add(&g, &d[1]);
    P.ranks = &g;
    char err[256];
    int ok = rs_plan_verify_rank(&P, 0, err, sizeof err) == 0;
    free(g.dpool);
    free(g.doff);
    return ok;
}

void rs_plan_stats_free(rs_plan_stats *s)
{
    if (!s) return;
    free(s->domain_need);
    free(s->domain_net_in);
    free(s->rank_net_out);
    free(s->built_at);
    memset(s, 0, sizeof *s);
}

/* ---- driver ---- */

/* Share of the network-fed domains of a fragment that its holders feed (1: no relays). Auto: when the
 * layout's bound without relays is more than 1.02x, more than two rounds and more than 1 ms (message
 * latencies) above the bound with them,
 * the sources' NICs can keep pace with the destinations' for bound / bound-without-relays of the domains;
 * the others are relayed (each relay hop adds two rounds of pipeline fill, which small layouts, a few
 * rounds long, would not win back).
 * Every fragment is relayed alike, replicated ones included: a domain that gets some of its bytes by
 * relay and the rest from the holders would have the two arrive in the same rounds, since the rounds
 * are filled before relays are placed (DeepSeek-V3 on GB200, relaying only fragments with fewer holders
 * than domains: 1.18x of the bound; relaying all: 1.11x). */
static double relay_heads(const rs_layout *L, const rs_plan_opts *o)
{
    if (o->relays == RS_RELAYS_OFF) return 1;
    if (o->relays == RS_RELAYS_ON) return 0;
    rs_cost_params cp;
    rs_cost_params_default(&cp, &L->topo);
    rs_cost_bound b;
    char err[256];
    if (rs_cost_lower_bound(L, &cp, &b, err, sizeof err) || !(b.bound_norelay_s > 1.02 * b.bound_s))
        return 1;
    /* a relay hop delays the relayed domain by two rounds: a round moves at most half the staging, or
     * all a busiest receiver needs, through its NIC */
    double round_s = (double)o->staging_bytes / 2 / (cp.nic_gbps * 1e9 / 8);
    if (round_s > b.bound_s) round_s = b.bound_s;
    if (b.bound_norelay_s - b.bound_s < 2 * round_s || b.bound_norelay_s - b.bound_s < 1e-3) return 1;
    return b.bound_s / b.bound_norelay_s;
}

static uint64_t peak_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)ru.ru_maxrss;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void ctx_free(pl_ctx *c)
{
    pl_arena_free(&c->ar);
    pl_arena_free(&c->tar);
    pl_map_free(&c->tcache);
    free(c->bind_begin);
    free(c->bind_buf);
    free(c->bind_shape);
    free(c->bind_nd);
    free(c->bind_memo);
    free(c->bind_mb);
    free(c->net_in);
    free(c->nvl_out);
    free(c->nic_out);
    free(c->relay_out);
    pl_intern_free(&c->cands);
    pl_intern_free(&c->fsets);
    rs_vec_free(&c->lpt);
    free(c->lpt_choice);
    rs_vec_free(&c->tmp_u32);
    pl_schedule_free(c);
}

static int run_pass(pl_ctx *c, int pass)
{
    c->pass = pass;
    c->lpt_seq = 0;
    memset(c->net_in, 0, c->world * sizeof *c->net_in);
    memset(c->nvl_out, 0, c->world * sizeof *c->nvl_out);
    memset(c->relay_out, 0, c->world * sizeof *c->relay_out);
    for (uint32_t ti = 0; ti < c->L->ntensors; ti++) {
        if (pl_tensor_begin(c, ti) || pl_tensor_cells(c)) return -1;
        if (pass == 3) pl_tensor_planned(c); /* build the programs of the ranks it was the last for */
    }
    return 0;
}

int rs_planner_plan(rs_layout *L, const rs_plan_opts *o, rs_plan *out, rs_plan_stats *stats, char *err,
                    size_t errlen, uint32_t *bad_piece)
{
    rs_plan_opts def;
    if (!o) {
        rs_plan_opts_default(&def);
        o = &def;
    }
    rs_plan_opts resolved;
    if (o->strided_reads < 0) {
        resolved = *o;
        resolved.strided_reads = probe_strided_reads();
        o = &resolved;
    }
    memset(out, 0, sizeof *out);
    if (stats) memset(stats, 0, sizeof *stats);
    if (bad_piece) *bad_piece = RS_NONE;
    if (err && errlen) err[0] = 0;

    pl_ctx c = {0};
    c.L = L;
    c.o = o;
    c.err = err;
    c.errlen = errlen;
    c.bad_piece = RS_NONE;
    c.world = L->topo.world;
    c.check_fine = getenv("RESHARD_CHECK_FINE") != NULL; /* tests: schedule.c's group_whole checked */
    if (o->staging_bytes < 256) {
        snprintf(err, errlen, "staging budget of %llu bytes is below the minimum of 256",
                 (unsigned long long)o->staging_bytes);
        return -1;
    }
    /* Staging: two halves (round k uses half k % 2, so the fan-out of round k overlaps the network
     * transfer of round k + 1). A chunk is at most 1/8 of a half; a sender's round carries half - pmax
     * bytes of its stream, so with the one chunk that may straddle the boundary it stays in its half. */
    c.half = (o->staging_bytes / 2) & ~(uint64_t)15;
    c.pmax = (c.half / 8) & ~(uint64_t)15;
    if (c.pmax < 16) c.pmax = 16;
    c.cs = c.half - c.pmax;

    rs_plan_stats local_stats;
    c.st = stats ? stats : &local_stats;
    memset(c.st, 0, sizeof *c.st);
    c.st->world = c.world;
    c.st->ndomains = L->topo.ndomains;
    c.st->domain_need = rs_xcalloc(L->topo.ndomains, sizeof(uint64_t));
    c.st->domain_net_in = rs_xcalloc(L->topo.ndomains, sizeof(uint64_t));
    c.st->rank_net_out = rs_xcalloc(c.world, sizeof(uint64_t));
    c.st->built_at = rs_xcalloc(c.world + 1, sizeof(uint32_t));

    c.net_in = rs_xcalloc(c.world, sizeof *c.net_in);
    c.nvl_out = rs_xcalloc(c.world, sizeof *c.nvl_out);
    c.nic_out = rs_xcalloc(c.world, sizeof *c.nic_out);
    c.relay_out = rs_xcalloc(c.world, sizeof *c.relay_out);
    c.relay_heads = relay_heads(L, o);
    c.st->relay_heads = c.relay_heads;
    pl_intern_init(&c.cands);
    pl_intern_init(&c.fsets);
    c.snd = rs_xcalloc(c.world, sizeof *c.snd);
    c.rank_last = rs_xcalloc(c.world + 1, sizeof *c.rank_last);
    c.out = out;

    double t = now_s(), t2;
#define LAP(i) (t2 = now_s(), c.st->seconds[i] = t2 - t, c.st->peak_kib[i] = peak_kib(), t = t2)
    int rc = pl_bindings(&c);
    if (!rc) {
        /* every rank's bindings now, so that the verifier's piece index is made from them on another
         * core while the one-threaded start of planning (pass 1, the rounds) leaves it idle */
        pl_rank_bindings(&c);
        if (o->verify || o->verify_ahead) out->verify_pre = rs_plan_verify_pre_start(out, L);
    }
    LAP(0);
    if (!rc) rc = run_pass(&c, 1);
    if (!rc) {
        pl_lpt_solve(&c);
        pl_after_pass1(&c);
        LAP(1);
        pl_pass2(&c);
        LAP(2);
    }
    if (!rc) {
        pl_after_pass2(&c);
        rc = run_pass(&c, 3);
        LAP(3);
    }
    if (!rc) {
        /* what routing kept (cell sweeps, candidate and forward sets, LPT records) is not needed to build
         * the programs: give it back before they take their memory */
        pl_arena_free(&c.ar);
        pl_arena_free(&c.tar);
        pl_map_free(&c.tcache);
        pl_intern_free(&c.cands);
        pl_intern_free(&c.fsets);
        rs_vec_free(&c.lpt);
        free(c.lpt_choice);
        c.lpt_choice = NULL;
        rc = pl_finalize(&c, out);
        if (!rc) c.st->merged_messages = pl_merge_messages(out, L);
    }
    LAP(4);
    if (bad_piece) *bad_piece = c.bad_piece;
    ctx_free(&c);
    if (rc && out->ranks) {
        /* programs built before the failure (out has no layout yet, so rs_plan_free would not see them) */
        out->layout.topo.world = c.world;
        rs_plan_free(out);
    }
    if (rc) {
        if (!stats) rs_plan_stats_free(&local_stats);
        rs_plan_free(out);
        memset(out, 0, sizeof *out);
        return -1;
    }
    out->layout = *L;
    memset(L, 0, sizeof *L);
    out->staging_budget = o->staging_bytes;
    if (o->verify && rs_planner_verify(out, stats, err, errlen)) {
        *L = out->layout;
        memset(&out->layout, 0, sizeof out->layout);
        rs_plan_free(out);
        memset(out, 0, sizeof *out);
        if (!stats) rs_plan_stats_free(&local_stats);
        return -1;
    }
    if (!stats) rs_plan_stats_free(&local_stats);
    return 0;
}

int rs_planner_verify(rs_plan *P, rs_plan_stats *stats, char *err, size_t errlen)
{
    double t = now_s();
    char verr[512];
    rs_verify_pre *pre = P->verify_pre; /* (taken and freed by the verifier) */
    P->verify_pre = NULL;
    int vrc = rs_plan_verify_all_pre(P, pre, verr, sizeof verr, NULL, stats ? stats->verify_seconds : NULL);
    if (stats) stats->seconds[5] = now_s() - t, stats->peak_kib[5] = peak_kib();
    /* No heap trim here (there was one, for the peak while the plan was encoded after this): handing back
     * the verifier's pages split the huge pages the programs lie in, and issue 3's case was encoded in
     * 0.23 s instead of 0.04 from the small pages left, at the same peak (docs/planner.md). */
    if (vrc) {
        snprintf(err, errlen, "internal error: the plan failed verification (a planner bug): %s", verr);
        return -1;
    }
    P->verified = 1; /* every rank's structure was checked there: the writer need not repeat it */
    return 0;
}

int rs_planner_run(rs_ir *ir, const rs_plan_opts *o, rs_plan *out, rs_plan_stats *stats, FILE *diag)
{
    char err[1024];
    uint32_t piece;
    if (rs_planner_plan(&ir->L, o, out, stats, err, sizeof err, &piece) == 0) return 0;
    if (diag) {
        if (piece != RS_NONE && ir->piece_loc && ir->files && ir->piece_loc[piece].file < ir->nfiles) {
            const rs_loc *at = &ir->piece_loc[piece];
            fprintf(diag, "%s:%u:%u: error: %s\n", ir->files[at->file], at->line, at->col, err);
        } else {
            fprintf(diag, "reshardc: error: %s\n", err);
        }
    }
    return -1;
}
