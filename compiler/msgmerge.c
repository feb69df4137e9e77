/* msgmerge.c - the messages of one sender to one receiver on a lane that follow each other in one step
 * on both sides, and whose byte ranges continue each other on both sides, become one message.
 *
 * Most such pairs are NVLink forwards: a receiver forwards what it got in a round from several senders to
 * each domain peer, one message per received segment, and those segments lie back to back in its staging
 * (sorted by forward set, then sender); the peer lays out the copies the same way. On the DeepSeek-V3
 * case of issue 3, a third of the NVLink messages went this way. The pass runs on the finished programs,
 * before verification, so every merge is proved like the rest of the plan. */
#include "plan_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t *key;  /* lane * world + peer, ascending */
    uint32_t *op;   /* the SEND (or RECV) op, in program order within a key */
    uint32_t *step; /* the op's step */
    uint32_t n;
} msg_index;

typedef struct {
    uint32_t k2, op, step; /* k2: 2 * (lane * world + peer) + (RECV) */
} msg_rec;

typedef struct {
    msg_rec *a, *b; /* the rank's messages, and room for the sort */
    size_t cap;
    uint32_t keybits; /* bits of the largest k2 */
} msg_scratch;

/* The rank's SENDs and RECVs, each sorted by (lane, peer) and program order: one walk over the ops into
 * scratch, then a stable radix sort by k2, a byte at a time (work in the rank's messages, not in the world:
 * a counting sort over every (lane, peer) cost 4 x world per rank, which a world of 2^20 ranks cannot pay). */
static void index_rank(const rs_rank_prog *g, uint32_t world, msg_scratch *x, msg_index *snd, msg_index *rcv)
{
    uint32_t n[2] = {0, 0}, m = 0;
    for (uint32_t s = 0; s < g->nsteps; s++) {
        const rs_step *st = &g->steps[s];
        for (uint32_t k = 0; k < st->nops; k++) {
            const rs_op *o = &g->ops[st->op_begin + k];
            if (o->code != RS_OP_SEND && o->code != RS_OP_RECV) continue;
            uint32_t rv = o->code == RS_OP_RECV;
            if (m == x->cap) {
                x->cap = x->cap ? x->cap * 2 : 1024;
                x->a = rs_xrealloc(x->a, x->cap * sizeof *x->a);
                x->b = rs_xrealloc(x->b, x->cap * sizeof *x->b);
            }
            msg_rec e = {2 * (st->lane * world + o->peer) + rv, st->op_begin + k, s};
            x->a[m++] = e;
            n[rv]++;
        }
    }
    msg_index *out[2] = {snd, rcv};
    for (int i = 0; i < 2; i++) {
        out[i]->n = n[i];
        out[i]->key = rs_xmalloc((n[i] + 1) * sizeof *out[i]->key);
        out[i]->op = rs_xmalloc((n[i] + 1) * sizeof *out[i]->op);
        out[i]->step = rs_xmalloc((n[i] + 1) * sizeof *out[i]->step);
    }
    msg_rec *a = x->a, *b = x->b;
    for (uint32_t sh = 0; sh < x->keybits && m > 1; sh += 8) {
        uint32_t cnt[257] = {0};
        for (uint32_t i = 0; i < m; i++) cnt[(a[i].k2 >> sh & 255) + 1]++;
        for (uint32_t d = 0; d < 256; d++) cnt[d + 1] += cnt[d];
        for (uint32_t i = 0; i < m; i++) b[cnt[a[i].k2 >> sh & 255]++] = a[i];
        msg_rec *t = a;
        a = b;
        b = t;
    }
    uint32_t at[2] = {0, 0};
    for (uint32_t i = 0; i < m; i++) {
        uint32_t rv = a[i].k2 & 1, j = at[rv]++;
        out[rv]->key[j] = a[i].k2 >> 1;
        out[rv]->op[j] = a[i].op;
        out[rv]->step[j] = a[i].step;
    }
}

/* [lo, hi) of key in x */
static void key_range(const msg_index *x, uint32_t key, uint32_t *lo, uint32_t *hi)
{
    uint32_t a = 0, b = x->n;
    while (a < b) {
        uint32_t m = a + (b - a) / 2;
        if (x->key[m] < key) a = m + 1;
        else b = m;
    }
    *lo = a;
    b = x->n;
    while (a < b) {
        uint32_t m = a + (b - a) / 2;
        if (x->key[m] <= key) a = m + 1;
        else b = m;
    }
    *hi = a;
}

/* Does op b continue op a (same location, next byte), the two staying inside one member of a group? */
static int continues(const rs_layout *L, const rs_rank_prog *g, const rs_op *a, const rs_op *b)
{
    if (a->loc != b->loc || b->off != a->off + a->bytes) return 0;
    if (a->loc == RS_LOC_STAGING) return 1;
    uint64_t m = rs_binding_member_bytes(L, &g->bindings[a->loc]);
    return !m || a->off / m == (b->off + b->bytes - 1) / m;
}

#define OP_DEAD 0xffu

/* The ranks' indexes: each rank's is its own (program in, index out, scratch of its thread's), so two threads
 * take the ranks in turn (an atomic counter) on a plan worth it, with the same indexes. */
typedef struct {
    const rs_plan *P;
    uint32_t world, *next;
    msg_index *snd, *rcv;
    uint32_t keybits;
} index_share;

/* The next ranks [*r0, *r1) for a thread that takes them in turn with another (next: the shared counter); 0
 * when none is left. */
#define MM_TAKE 8 /* ranks taken at a time */
static int take_ranks(uint32_t *next, uint32_t world, uint32_t *r0, uint32_t *r1)
{
    uint32_t a = __atomic_fetch_add(next, MM_TAKE, __ATOMIC_RELAXED);
    if (a >= world) return 0;
    *r0 = a;
    *r1 = world - a < MM_TAKE ? world : a + MM_TAKE;
    return 1;
}

static void index_some(index_share *j)
{
    msg_scratch scr = {NULL, NULL, 0, j->keybits};
    for (uint32_t r0, r1; take_ranks(j->next, j->world, &r0, &r1);)
        for (uint32_t r = r0; r < r1; r++) index_rank(&j->P->ranks[r], j->world, &scr, &j->snd[r], &j->rcv[r]);
    free(scr.a);
    free(scr.b);
}

static void *index_thread(void *arg)
{
    index_some(arg);
    return NULL;
}

/* The merges and the compaction on two threads (pl_merge_messages) */
typedef struct {
    rs_plan *P;
    const rs_layout *L;
    uint32_t world;
    const msg_index *snd, *rcv;
    uint32_t next;             /* the next sender (or rank) to take */
    uint32_t *first_dead[2];   /* per thread: each rank's first merged op (compaction: [0], combined) */
    uint64_t merged[2];
} merge_share;

typedef struct {
    merge_share *m;
    int t;
} merge_arg;

/* The messages of sender s to each peer on each lane that continue each other on both sides, merged. */
static uint64_t merge_sender(merge_share *m, uint32_t s, uint32_t *first_dead)
{
    uint32_t world = m->world;
    const msg_index *x = &m->snd[s];
    rs_rank_prog *gs = &m->P->ranks[s];
    uint64_t merged = 0;
    for (uint32_t i = 0, j; i < x->n; i = j) {
        uint32_t key = x->key[i], lane = key / world, p = key % world, lo, hi;
        for (j = i + 1; j < x->n && x->key[j] == key; j++) {}
        const msg_index *y = &m->rcv[p];
        rs_rank_prog *gp = &m->P->ranks[p];
        key_range(y, lane * world + s, &lo, &hi);
        if (hi - lo != j - i) continue; /* unmatched: the verifier says so */
        /* k-th SEND matches k-th RECV; h: the message the current one would join */
        for (uint32_t k = 1, h = 0; k < j - i; k++) {
            rs_op *a = &gs->ops[x->op[i + h]], *b = &gs->ops[x->op[i + k]];
            rs_op *ra = &gp->ops[y->op[lo + h]], *rb = &gp->ops[y->op[lo + k]];
            if (x->step[i + h] != x->step[i + k] || y->step[lo + h] != y->step[lo + k] ||
                !continues(m->L, gs, a, b) || !continues(m->L, gp, ra, rb)) {
                h = k;
                continue;
            }
            a->bytes += b->bytes;
            ra->bytes += rb->bytes;
            if (a->tensor != b->tensor) a->tensor = RS_NONE;
            if (ra->tensor != rb->tensor) ra->tensor = RS_NONE;
            b->code = rb->code = OP_DEAD;
            if (x->op[i + k] < first_dead[s]) first_dead[s] = x->op[i + k];
            if (y->op[lo + k] < first_dead[p]) first_dead[p] = y->op[lo + k];
            merged++;
        }
    }
    return merged;
}

static void *merge_thread(void *arg)
{
    merge_arg *a = arg;
    merge_share *m = a->m;
    for (uint32_t s0, s1; take_ranks(&m->next, m->world, &s0, &s1);)
        for (uint32_t s = s0; s < s1; s++) m->merged[a->t] += merge_sender(m, s, m->first_dead[a->t]);
    return NULL;
}

/* The merged ops of rank r dropped; the steps' op ranges follow. */
static void compact_rank(rs_rank_prog *g, uint32_t first_dead)
{
    if (first_dead == RS_NONE) return;
    uint32_t w = 0;
    for (uint32_t s = 0; s < g->nsteps; s++) {
        rs_step *st = &g->steps[s];
        if (st->op_begin + st->nops <= first_dead) { /* before the first merged op: in place */
            w = st->op_begin + st->nops;
            continue;
        }
        uint32_t begin = w;
        for (uint32_t k = 0; k < st->nops; k++) {
            const rs_op *o = &g->ops[st->op_begin + k];
            if (o->code != OP_DEAD) g->ops[w++] = *o;
        }
        st->op_begin = begin;
        st->nops = w - begin;
    }
    g->nops = w;
}

static void *compact_thread(void *arg)
{
    merge_share *m = arg;
    for (uint32_t r0, r1; take_ranks(&m->next, m->world, &r0, &r1);)
        for (uint32_t r = r0; r < r1; r++) compact_rank(&m->P->ranks[r], m->first_dead[0][r]);
    return NULL;
}

#define MM_PAR_MIN_OPS 16384
uint64_t pl_merge_messages(rs_plan *P, const rs_layout *L)
{
    uint32_t world = L->topo.world;
    msg_index *snd = rs_xcalloc(world + 1, sizeof *snd), *rcv = rs_xcalloc(world + 1, sizeof *rcv);
    uint32_t keybits = 1, next = 0;
    while (keybits < 32 && (4ull * world - 1) >> keybits) keybits++;
    uint64_t nops = 0;
    for (uint32_t r = 0; r < world; r++) nops += P->ranks[r].nops;
    index_share j = {P, world, &next, snd, rcv, keybits};
    pthread_t th;
    int two = world > 1 && rs_threads(nops, MM_PAR_MIN_OPS) >= 2 && !rs_thread_start(&th, index_thread, &j);
    index_some(&j);
    if (two) pthread_join(th, NULL);
    /* the merges, senders taken in turn by the threads (a pair's merges touch only the pair's messages), each
     * noting the first merged op of every rank in an array of its own; then the compaction, ranks in turn */
    merge_share m = {P, L, world, snd, rcv, 0, {NULL, NULL}, {0, 0}};
    m.first_dead[0] = rs_xmalloc((world + 1) * sizeof *m.first_dead[0]);
    memset(m.first_dead[0], 0xff, (world + 1) * sizeof *m.first_dead[0]);
    if (two) {
        m.first_dead[1] = rs_xmalloc((world + 1) * sizeof *m.first_dead[1]);
        memset(m.first_dead[1], 0xff, (world + 1) * sizeof *m.first_dead[1]);
        merge_arg b = {&m, 1};
        two = !rs_thread_start(&th, merge_thread, &b);
        merge_arg a = {&m, 0};
        merge_thread(&a);
        if (two) pthread_join(th, NULL);
        for (uint32_t r = 0; r < world; r++)
            if (m.first_dead[1][r] < m.first_dead[0][r]) m.first_dead[0][r] = m.first_dead[1][r];
        free(m.first_dead[1]);
    } else {
        merge_arg a = {&m, 0};
        merge_thread(&a);
    }
    uint64_t merged = m.merged[0] + m.merged[1];
    for (uint32_t r = 0; r < world; r++) {
        free(snd[r].key), free(snd[r].op), free(snd[r].step);
        free(rcv[r].key), free(rcv[r].op), free(rcv[r].step);
    }
    free(snd);
    free(rcv);
    m.next = 0;
    if (two && !rs_thread_start(&th, compact_thread, &m)) {
        compact_thread(&m);
        pthread_join(th, NULL);
    } else {
        compact_thread(&m);
    }
    free(m.first_dead[0]);
    return merged;
}
