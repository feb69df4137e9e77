/* schedule.c - from routed parts to per-rank programs. Each sender's bytes form one stream ordered by
 * (window of its tensors, receiver in a rotation that starts at a different receiver for every sender,
 * tensor), cut into rounds of a fixed byte budget, so a round moves a tile of (a few tensors x a few
 * receivers) and every rank sends and receives about the same per round. A round is a NET step and an
 * NVL step on every rank involved; round k uses staging half k % 2, so the NVLink fan-out of round k runs
 * while round k + 1 crosses the network. All fragments from a sender to a receiver in a round form one
 * message (segments grouped by the set of ranks the receiver forwards them to, so forwarding reuses the
 * receive offsets); large contiguous fragments travel zero-copy on their own. Ops are merged on the fly
 * when their descriptors differ by constant strides (affine merging, with staging offsets kept symbolic
 * until the staging layout is known). */
#define _GNU_SOURCE
#include "plan_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#define ALIGN 16u
static inline uint64_t align_up(uint64_t x) { return (x + ALIGN - 1) & ~(uint64_t)(ALIGN - 1); }

/* ---- senders and flows ---- */

/* The flow of (lane, sender, receiver, key), created when new (pass 1; later passes take the flow of
 * each part from c->pflow). */
static uint32_t flow_get(pl_ctx *c, uint8_t lane, uint32_t s, uint32_t r, uint32_t fset)
{
    uint64_t k0 = (uint64_t)lane << 62 | (uint64_t)s << 32 | r, k1 = fset;
    if (c->last_flow_key == k0 + 1 && c->last_flow >> 32 == fset) return (uint32_t)c->last_flow;
    uint32_t id;
    if (c->world <= PL_FLOW_DIRECT) {
        /* the flows of (s, r) in a chain from a table over all pairs */
        if (!c->flow_first) {
            c->flow_first = rs_xmalloc((size_t)c->world * c->world * sizeof *c->flow_first);
            memset(c->flow_first, 0xff, (size_t)c->world * c->world * sizeof *c->flow_first);
        }
        uint32_t *at = &c->flow_first[(size_t)s * c->world + r];
        while (*at != RS_NONE && (c->flows.v[*at].lane != lane || c->flows.v[*at].fset != fset))
            at = &c->flows.v[*at].next;
        id = *at;
        if (id == RS_NONE) {
            pl_flow f = {.s = s, .r = r, .fset = fset, .lane = lane, .next = RS_NONE};
            id = *at = (uint32_t)c->flows.n; /* before the push: at may point into flows */
            rs_vec_push(&c->flows, f);
        }
    } else {
        int created;
        uint64_t *v = pl_map_put(&c->flow_index, k0, k1, &created);
        if (created) {
            pl_flow f = {.s = s, .r = r, .fset = fset, .lane = lane, .next = RS_NONE};
            *v = c->flows.n;
            rs_vec_push(&c->flows, f);
        }
        id = (uint32_t)*v;
    }
    c->last_flow_key = k0 + 1;
    c->last_flow = (uint64_t)fset << 32 | id;
    return id;
}

static void sender_add(pl_ctx *c, uint32_t s, uint32_t unit, uint64_t bytes)
{
    pl_sender *x = &c->snd[s];
    size_t n = x->unit.n;
    if (n && x->unit.v[n - 1] == unit) {
        x->ubytes.v[n - 1] += bytes;
        return;
    }
    rs_vec_push(&x->unit, unit);
    rs_vec_push(&x->ubytes, bytes);
}

/* Window of the sender's unit (binary search in its sorted units; the last answer is remembered). */
static uint32_t sender_window(pl_ctx *c, uint32_t s, uint32_t unit)
{
    pl_sender *x = &c->snd[s];
    if (x->last_unit == unit + 1) return x->last_win;
    size_t lo = 0, hi = x->unit.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (x->unit.v[mid] < unit) lo = mid + 1;
        else hi = mid;
    }
    rs_assert(lo < x->unit.n && x->unit.v[lo] == unit);
    x->last_unit = unit + 1;
    x->last_win = x->win.v[lo];
    return x->win.v[lo];
}

/* ---- step builders ---- */

static void helper_sync(pl_ctx *c);
static void adder_sync(pl_ctx *c);

/* Before a push of `more` onto a vector the helper reads (steps, segments, forwarded copies) moves it: the
 * helper first finishes what it was given (a doubling, so a few times a plan). */
static inline void helper_grow_guard(pl_ctx *c, size_t n, size_t cap, size_t more)
{
    if (n + more > cap) {
        if (c->helper) helper_sync(c);
        if (c->adder) adder_sync(c); /* (it writes step builders) */
    }
}

/* Where seg_make puts a segment, its forwarded copies and the step builders it creates: at the ends of
 * their vectors (no ids given), or at the ids given (seg_precreate's two halves, each with room made and
 * its ids counted in advance, the round's slots of rank_steps there already). */
typedef struct {
    uint32_t seg, inst, sb; /* the next ids */
    uint32_t nrounds;       /* rounds seen (c->nrounds, set from it after) */
} seg_ids;

static uint32_t sb_get(pl_ctx *c, uint32_t rank, uint8_t lane, int32_t round);

static uint32_t sb_at(pl_ctx *c, uint32_t rank, uint8_t lane, uint32_t round, seg_ids *ids)
{
    if (!ids) return sb_get(c, rank, lane, (int32_t)round);
    uint32_t *slot = &c->rank_steps[rank * 2 + lane].v[round];
    if (*slot == RS_NONE) {
        pl_stepb *b = &c->steps.v[ids->sb];
        memset(b, 0, sizeof *b);
        b->rank = rank;
        *slot = ids->sb++;
        if (round + 1 > ids->nrounds) ids->nrounds = round + 1;
    }
    return *slot;
}

static uint32_t sb_get(pl_ctx *c, uint32_t rank, uint8_t lane, int32_t round)
{
    uint32_t *slot;
    if (round < 0) {
        slot = &c->local_step[rank];
    } else {
        pl_u32vec *v = &c->rank_steps[rank * 2 + lane];
        while (v->n <= (size_t)round) rs_vec_push(v, RS_NONE);
        slot = &v->v[round];
    }
    if (*slot == RS_NONE) {
        pl_stepb b;
        memset(&b, 0, sizeof b);
        b.rank = rank;
        *slot = (uint32_t)c->steps.n;
        helper_grow_guard(c, c->steps.n, c->steps.cap, 1);
        rs_vec_push(&c->steps, b);
        if (round >= 0 && (uint32_t)round + 1 > c->nrounds) c->nrounds = (uint32_t)round + 1;
    }
    return *slot;
}

/* ---- affine merging of ops ---- */

static uint64_t desc_span(const pl_pop *p, int side)
{
    const uint32_t *cnt = pl_pcnt_c(p, side);
    const uint64_t *str = pl_pstr_c(p, side);
    uint32_t nd = p->nd[side];
    uint64_t span = cnt[nd - 1];
    for (int i = (int)nd - 2; i >= 0; i--)
        if (cnt[i] > 1) span = (cnt[i] - 1) * str[i] + span;
    return span;
}

static int side_is_staging(const pl_pop *p, int side) { return p->sym == side + 1; }

/* Same dims (counts, strides and item steps) from dim `ya` of y and `xa` of x on. */
static int same_dims(const pl_pop *y, int side, uint32_t ya, const pl_pop *x, uint32_t xa)
{
    const uint32_t *ac = pl_pcnt_c(y, side), *bc = pl_pcnt_c(x, side);
    const uint64_t *as = pl_pstr_c(y, side), *bs = pl_pstr_c(x, side);
    if (y->nd[side] - ya != x->nd[side] - xa) return 0;
    for (uint32_t i = 0; i + ya < y->nd[side]; i++) {
        if (ac[ya + i] != bc[xa + i] || as[ya + i] != bs[xa + i]) return 0;
        if (side_is_staging(y, side) && y->dl[ya + i] != x->dl[xa + i]) return 0;
    }
    return 1;
}

/* Try to make x part of y (y grows, x is dropped). */
static int try_extend(pl_pop *y, const pl_pop *x, int relaxed)
{
    if (y->code != x->code || y->sym != x->sym) return 0;
    /* contiguous append: one-dim on both sides, x starts where y ends */
    if (y->nd[0] == 1 && y->nd[1] == 1 && x->nd[0] == 1 && x->nd[1] == 1 && (!y->sym || y->item == x->item)) {
        if (x->off[0] == y->off[0] + y->cnt[0] && x->off[1] == y->off[1] + y->cnt[1] &&
            (uint64_t)y->cnt[0] + x->cnt[0] <= UINT32_MAX) {
            y->cnt[0] += x->cnt[0];
            y->cnt[1] += x->cnt[1];
            if (y->tensor != x->tensor) y->tensor = RS_NONE;
            return 1;
        }
    }
    /* (a) one more step of y's outermost dim */
    int ok = 1;
    for (int s = 0; s < 2 && ok; s++) {
        const uint32_t *ac = pl_pcnt_c(y, s);
        const uint64_t *as = pl_pstr_c(y, s);
        if (y->nd[s] != x->nd[s] + 1 || !same_dims(y, s, 1, x, 0)) ok = 0;
        else if (x->off[s] != y->off[s] + ac[0] * as[0]) ok = 0;
        else if (side_is_staging(y, s) && x->item != y->item + (int64_t)ac[0] * y->dl[0]) ok = 0;
    }
    if (ok && pl_pcnt_c(y, 0)[0] < UINT32_MAX && pl_pcnt_c(y, 1)[0] < UINT32_MAX) {
        pl_pcnt(y, 0)[0]++;
        pl_pcnt(y, 1)[0]++;
        if (y->tensor != x->tensor) y->tensor = RS_NONE;
        return 1;
    }
    /* (b) a new outer dim of two */
    if (y->nd[0] + y->nd[1] + 2 > PL_PT) return 0;
    int64_t delta[2], dl = 0;
    for (int s = 0; s < 2; s++) {
        if (y->nd[s] != x->nd[s] || y->nd[s] + 1 > PL_PD || !same_dims(y, s, 0, x, 0)) return 0;
        delta[s] = (int64_t)(x->off[s] - y->off[s]);
        /* side 0 is the one read: with strided reads it may step by less than its span (even 0) */
        int loose = relaxed && s == 0;
        if (side_is_staging(y, s)) {
            dl = x->item - y->item;
            if (dl < 0 || dl > INT16_MAX || (dl == 0 && (delta[s] < 0 || (!loose && (delta[s] == 0 || (uint64_t)delta[s] < desc_span(y, s))))))
                return 0;
        } else if (delta[s] < 0 || (!loose && (delta[s] == 0 || (uint64_t)delta[s] < desc_span(y, s)))) {
            return 0;
        }
    }
    /* [side 0 | side 1] -> [2, side 0 | 2, side 1] */
    uint32_t n0 = y->nd[0], n1 = y->nd[1];
    memmove(y->cnt + n0 + 2, y->cnt + n0, n1 * sizeof y->cnt[0]);
    memmove(y->str + n0 + 2, y->str + n0, n1 * sizeof y->str[0]);
    memmove(y->cnt + 1, y->cnt, n0 * sizeof y->cnt[0]);
    memmove(y->str + 1, y->str, n0 * sizeof y->str[0]);
    y->cnt[0] = y->cnt[n0 + 1] = 2;
    y->str[0] = (uint64_t)delta[0];
    y->str[n0 + 1] = (uint64_t)delta[1];
    if (y->sym) {
        memmove(y->dl + 1, y->dl, y->nd[y->sym - 1] * sizeof y->dl[0]);
        y->dl[0] = (int16_t)dl;
    }
    y->nd[0]++;
    y->nd[1]++;
    if (y->tensor != x->tensor) y->tensor = RS_NONE;
    return 1;
}

/* Does op p split into pieces inside one member of each buffer group it touches (docs/format.md; the
 * same test as rs_op_group_chunk, on the op's dims; a staging side's offset is symbolic, but only a group
 * side's offset matters)? */
static int pop_group_ok(const pl_pop *p, uint64_t m0, uint64_t m1)
{
    const uint32_t n[2] = {p->nd[0], p->nd[1]};
    uint64_t wide[PL_PT];
    for (uint32_t i = 0; i < n[0] + n[1]; i++) wide[i] = p->cnt[i];
    const uint64_t *const cnt[2] = {wide, wide + n[0]};
    const uint64_t *const str[2] = {pl_pstr_c(p, 0), pl_pstr_c(p, 1)};
    const uint64_t off[2] = {p->off[0], p->off[1]}, m[2] = {m0, m1};
    return rs_dims_group_chunk(n, cnt, str, off, m) != 0;
}

/* When x can only join y as a new outer dim of two (try_extend's last case: y and x have as many dims on
 * each side, more than one dim in all), is it certain that the result does not split into pieces inside
 * one member of a group side s (m[s] its member bytes)? That is so when the new dim steps inside a member
 * (by less than m[s], or not by whole members) while y already steps across members on that side
 * (rs_dims_member_chunk: no member-stepping dim inside a member-local one). A step back also fails. On
 * DeepSeek-V3 this turns away 0.8 M of the 1.0 M such joins of expert packs without building them. */
static int new_dim_splits_member(const pl_pop *y, const pl_pop *x, const uint64_t m[2])
{
    if (y->nd[0] != x->nd[0] || y->nd[1] != x->nd[1] || (y->nd[0] == 1 && y->nd[1] == 1)) return 0;
    for (int s = 0; s < 2; s++) {
        if (!m[s]) continue;
        if (x->off[s] < y->off[s]) return 1;
        uint64_t delta = x->off[s] - y->off[s];
        if (delta >= m[s] && delta % m[s] == 0) continue; /* steps by whole members */
        const uint32_t *cnt = pl_pcnt_c(y, s);
        const uint64_t *str = pl_pstr_c(y, s);
        int across = 0;
        for (uint32_t i = 0; i < y->nd[s]; i++) {
            if (cnt[i] == 0) return 0; /* (nothing moves: any split will do) */
            if (cnt[i] > 1 && str[i] >= m[s]) across = 1;
        }
        if (across) return 1;
    }
    return 0;
}

/* try_extend, keeping an op on a buffer group splittable at member boundaries. y is a copy (fold's): when
 * this returns 0 it may have been changed all the same. */
static int extend(const pl_ctx *c, const pl_stepb *b, pl_pop *y, const pl_pop *x)
{
    if (!c->bind_mb) return try_extend(y, x, c->o->strided_reads);
    uint64_t m[2] = {pl_loc_mbytes(c, b->rank, y->loc[0]), pl_loc_mbytes(c, b->rank, y->loc[1])};
    if ((m[0] || m[1]) && new_dim_splits_member(y, x, m)) return 0;
    if (!try_extend(y, x, c->o->strided_reads)) return 0;
    return !(m[0] || m[1]) || pop_group_ok(y, m[0], m[1]);
}

static inline uint32_t mslot_hash(uint32_t sloc, uint32_t dloc, uint32_t tag)
{
    uint64_t h = ((uint64_t)sloc << 32 | dloc) * 0x9e3779b97f4a7c15ull ^ (uint64_t)tag * 0xc2b2ae3d27d4eb4full;
    return (uint32_t)(h >> 32);
}

/* A step's merge table holds a few keys (the 2.5 T MoE: 1 to 13, 3.5 on average): tables of up to
 * MSLOT_LINEAR slots (2, 4, 6, 8) are searched in order, larger ones are open-addressed hash tables of a
 * power of two. (Hash tables from 4 slots at three quarters full held 7.2 M slots for its 4.4 M keys;
 * growing 1, 2, 3, 4, 6, 8 held 4.5 M but cost 2 % of its compile in malloc; 2, 4, 6, 8 cost 12 MB more.) */
#define MSLOT_LINEAR 8

/* The slot of (sloc, dloc, tag) in b's table, or an empty one (cur == 0) where it would go; NULL when it
 * is not there and a table searched in order is full. */
static pl_mslot *mslot_find(pl_stepb *b, uint32_t sloc, uint32_t dloc, uint32_t tag)
{
    if (b->mcap <= MSLOT_LINEAR) {
        for (uint32_t j = 0; j < b->mn; j++) {
            pl_mslot *e = &b->mt[j];
            if (e->sloc == sloc && e->dloc == dloc && e->tag == tag) return e;
        }
        return b->mn < b->mcap ? &b->mt[b->mn] : NULL;
    }
    for (uint32_t j = mslot_hash(sloc, dloc, tag) & (b->mcap - 1);; j = (j + 1) & (b->mcap - 1)) {
        pl_mslot *e = &b->mt[j];
        if (!e->cur || (e->sloc == sloc && e->dloc == dloc && e->tag == tag)) return e;
    }
}

static pl_mslot *mslot_new(pl_ctx *c, pl_stepb *b, uint32_t sloc, uint32_t dloc, uint32_t tag);
static void *pool_carve(pl_popool *pool, size_t bytes);

/* The slot held in the step goes back to its table entry. */
static void mslot_flush(pl_stepb *b)
{
    if (b->hot.cur) b->mt[b->hot_at] = b->hot;
    b->hot.cur = 0;
}

/* The merge slot of (tag, sloc, dloc) in step b; a new one has cur == 0 (the caller sets it). Its state is
 * held in the step itself until another slot is used: consecutive ops of a step mostly use one slot (the
 * same buffer), and the step is read anyway, while its table is one more cache miss. */
static pl_mslot *mslot_get(pl_ctx *c, pl_stepb *b, uint32_t sloc, uint32_t dloc, uint32_t tag)
{
    pl_mslot *h = &b->hot;
    if (h->cur && h->sloc == sloc && h->dloc == dloc && h->tag == tag) return h;
    mslot_flush(b);
    pl_mslot *e = b->mcap ? mslot_find(b, sloc, dloc, tag) : NULL;
    if (!e || !e->cur) e = mslot_new(c, b, sloc, dloc, tag);
    b->hot_at = (uint32_t)(e - b->mt);
    *h = *e;
    if (e->cur == UINT32_MAX) h->cur = 0; /* new */
    return h;
}

/* A new table entry for (tag, sloc, dloc), marked taken (cur UINT32_MAX) until the step's slot is flushed. */
static pl_mslot *mslot_new(pl_ctx *c, pl_stepb *b, uint32_t sloc, uint32_t dloc, uint32_t tag)
{
    uint32_t cap = b->mcap;
    if (cap <= MSLOT_LINEAR ? b->mn == cap : (b->mn + 1) * 4 > cap * 3) {
        uint32_t ncap = cap < MSLOT_LINEAR ? cap + 2 : cap * 2;
        if (ncap <= MSLOT_LINEAR) {
            /* from the rank's blocks, which go back with its program built (a realloc each, 0.7 M on
             * DeepSeek-V3 (B), cost 0.9 % of its compile; the tables left behind take at most 12 slots) */
            pl_mslot *nt = pool_carve(&c->popool[b->rank], ncap * sizeof *b->mt);
            if (cap) memcpy(nt, b->mt, cap * sizeof *b->mt);
            memset(nt + cap, 0, (ncap - cap) * sizeof *b->mt);
            b->mt = nt;
            b->mcap = ncap;
        } else {
            pl_mslot *old = b->mt;
            b->mcap = ncap;
            b->mt = rs_xcalloc(ncap, sizeof *b->mt);
            for (uint32_t i = 0; i < cap; i++)
                if (old[i].cur) *mslot_find(b, old[i].sloc, old[i].dloc, old[i].tag) = old[i];
            if (cap > MSLOT_LINEAR) free(old); /* (a table searched in order is in the rank's blocks) */
        }
    }
    pl_mslot *e = mslot_find(b, sloc, dloc, tag);
    e->sloc = sloc;
    e->dloc = dloc;
    e->tag = tag;
    e->cur = UINT32_MAX;
    e->prev = 0;
    b->mn++;
    return e;
}

/* Room k of a step's chain holds room_cap[k] ops. A step holds a few ops (1 to 12 on the 2.5 T MoE, 5 on
 * average): rooms of 2, 3, 4, 6, ... left 3.7 M of its 15.9 M op slots empty, and rooms of 1, 1, 2, 2, 3,
 * 4, 6, ... with a 16-byte header (a capacity next to the link) still cost 409 MB of empty slots and headers
 * over its 2.5 M steps; these rooms, with an 8-byte header, cost 206 MB (from the histogram of its steps'
 * op counts). */
static const uint32_t room_cap[PL_POP_CLASSES] = {
    1, 1, 1, 2, 2, 2, 3, 4, 5, 6, 7, 9, 11, 14, 18, 23, 29, 37, 48, 62, 80, 104, 135, 175,
    227, 295, 383, 497, 646, 839, 1090, 1417, 1842, 2394, 3112, 4045, 5258, 6835, 8885, 11550,
    15015, 19519, 25374, 32986, 42881, 55745, 72468, 94208, 122470, 159211, 206974, 269066, 349785, 454720,
    591136, 768476, 999018, 1298723, 1688339, 2194840, 2853292, 3709279, 4822062, 6268680, 8149284, 10594069,
    13772289, 17903975, 23275167, 30257717, 39335032, 51135541};

/* A rank's blocks are POOL_BLOCK bytes from mappings of the planner's own, not from the heap. Every rank
 * has a last block it has not filled; in 4 KiB pages only what was written of it is resident. (In huge
 * pages, which these mappings had until the twentieth session, all of it was, so blocks were 64 KiB: with
 * 256 KiB the 2.5 T MoE's 1536 ranks held 1024 MB of blocks for 725 MB of rooms, with 64 KiB 742 MB. In 4 KiB
 * pages 256 KiB blocks peak as 64 KiB ones did, within 3 MiB on B, C and G, and go back in a quarter of
 * the calls.) A built rank's blocks go back: up to POOL_HOT of them stay resident for the ranks still
 * planned, the others (and all once no tensor is left) are handed to the system (madvise) and faulted in
 * again if taken: POOL_PEND at a time, sorted by address so that adjacent blocks go in one call (each call
 * flushes the other CPU's TLB: the 2.5 T MoE's blocks go back in 1903 calls, in 64 KiB blocks 6920; until
 * a batch is full its blocks are taken first). As malloc'd blocks they went back only when a heap trim
 * found them, so the peak moved with the heap's layout (the 2.5 T MoE 1.38-1.84 GB); kept resident until
 * pl_finalize, the 2.5 T MoE's peak held 707 MB of free blocks (all its ranks are built as its last tensors
 * are done, before pl_finalize).
 * Rooms larger than a block are malloc'd. Under AddressSanitizer every block is malloc'd (its bounds and
 * leak checks). */
#define POOL_BLOCK ((size_t)256 << 10)
#define POOL_MAP ((size_t)32 << 20)
#define POOL_HOT 64  /* blocks: 16 MiB */
#define POOL_PEND 64 /* blocks: 16 MiB */

struct pl_blocksrc {
    pthread_mutex_t mu;
    rs_vec(void *) maps;
    char *at, *end; /* the newest mapping's blocks not handed out yet */
    void *hot;      /* blocks given back and resident, linked through their first word */
    rs_vec(char *) pend; /* blocks to go back to the system, resident until POOL_PEND of them are */
    rs_vec(char *) cold; /* blocks given back to the system too (still mapped; a list through them would
                          * fault a page of each in again) */
    uint32_t nhot;
    int closed;     /* no tensor is left: no block stays resident */
    int shared;     /* the op adder runs: pools are carved under their locks (set before it starts, cleared
                     * once it is gone; the helper may be carving from the pools of ranks it builds) */
};

static pl_blocksrc *blocksrc_new(void)
{
    pl_blocksrc *s = rs_xcalloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    return s;
}

static void *block_get(pl_blocksrc *s)
{
#if defined(__SANITIZE_ADDRESS__)
    (void)s;
    return rs_xmalloc(POOL_BLOCK);
#else
    pthread_mutex_lock(&s->mu);
    void *b;
    if (s->hot) {
        b = s->hot;
        s->hot = *(void **)b;
        s->nhot--;
    } else if (s->pend.n) {
        b = s->pend.v[--s->pend.n];
    } else if (s->cold.n) {
        b = s->cold.v[--s->cold.n];
    } else {
        if (s->at == s->end) {
            s->at = rs_map_aligned(POOL_MAP);
            if (!s->at) rs_die("out of memory (%zu bytes)", POOL_MAP);
            s->end = s->at + POOL_MAP;
            rs_vec_push(&s->maps, (void *)s->at);
        }
        b = s->at;
        s->at += POOL_BLOCK;
    }
    pthread_mutex_unlock(&s->mu);
    return b;
#endif
}

#if !defined(__SANITIZE_ADDRESS__)
static void push_block(void **list, void *b)
{
    *(void **)b = *list;
    *list = b;
}

static int addr_cmp(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(char *const *)a, y = (uintptr_t)*(char *const *)b;
    return (x > y) - (x < y);
}

/* The blocks waiting in pend go to the system: sorted by address, one madvise per run of adjacent blocks
 * (each call interrupts the other threads to flush their TLBs: a tenth of the 2.5 T MoE's samples, one call
 * per block), then onto the cold list. Called with s->mu held; returns with it released (the madvise calls
 * run without it). */
static void pend_flush_unlock(pl_blocksrc *s)
{
    char **v = s->pend.v;
    size_t n = s->pend.n;
    s->pend.v = NULL;
    s->pend.n = s->pend.cap = 0;
    pthread_mutex_unlock(&s->mu);
    if (!n) {
        free(v);
        return;
    }
    qsort(v, n, sizeof *v, addr_cmp);
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && v[j] == v[j - 1] + POOL_BLOCK; j++)
            ;
        madvise(v[i], (size_t)(j - i) * POOL_BLOCK, MADV_DONTNEED);
    }
    pthread_mutex_lock(&s->mu);
    rs_vec_reserve(&s->cold, n);
    memcpy(s->cold.v + s->cold.n, v, n * sizeof *v);
    s->cold.n += n;
    pthread_mutex_unlock(&s->mu);
    free(v);
}
#endif

static void blocks_put(pl_blocksrc *s, void **v, size_t n)
{
#if defined(__SANITIZE_ADDRESS__)
    (void)s;
    for (size_t i = 0; i < n; i++) free(v[i]);
#else
    pthread_mutex_lock(&s->mu);
    size_t i = 0;
    for (; i < n && !s->closed && s->nhot < POOL_HOT; i++, s->nhot++) push_block(&s->hot, v[i]);
    for (; i < n; i++) rs_vec_push(&s->pend, (char *)v[i]);
    if (s->pend.n >= POOL_PEND || (s->closed && s->pend.n)) pend_flush_unlock(s);
    else pthread_mutex_unlock(&s->mu);
#endif
}

/* No tensor is left: the resident blocks given back go to the system, and so will every block from now on. */
static void blocksrc_close(pl_blocksrc *s)
{
    if (!s) return;
#if !defined(__SANITIZE_ADDRESS__)
    pthread_mutex_lock(&s->mu);
    s->closed = 1;
    while (s->hot) {
        void *b = s->hot;
        s->hot = *(void **)b;
        rs_vec_push(&s->pend, (char *)b);
    }
    s->nhot = 0;
    pend_flush_unlock(s);
#endif
}

static void blocksrc_free(pl_blocksrc *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->maps.n; i++) rs_unmap_aligned(s->maps.v[i], POOL_MAP);
    rs_vec_free(&s->maps);
    rs_vec_free(&s->pend);
    rs_vec_free(&s->cold);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Room of `bytes` from the rank's blocks. */
static void *pool_carve(pl_popool *pool, size_t bytes)
{
    /* with the op adder running, its thread and the tensor loop's carve from the same ranks' pools (ops
     * and merge tables there, item lists here) */
    int two = __atomic_load_n(&pool->src->shared, __ATOMIC_RELAXED);
    if (two)
        while (__atomic_test_and_set(&pool->lock, __ATOMIC_ACQUIRE))
            ;
    bytes = (bytes + 7) & ~(size_t)7; /* (ops hold 64-bit fields) */
    void *v;
    if (bytes > POOL_BLOCK) {
        v = rs_xmalloc(bytes);
        rs_vec_push(&pool->big, v);
    } else {
        if (bytes > pool->left) {
            pool->at = block_get(pool->src);
            pool->left = POOL_BLOCK;
            rs_vec_push(&pool->blocks, (void *)pool->at);
        }
        v = pool->at;
        pool->at += bytes;
        pool->left -= bytes;
    }
    if (two) __atomic_clear(&pool->lock, __ATOMIC_RELEASE);
    return v;
}

/* The slot of a new last op of b (a new room when the last one is full). */
static pl_spop *pop_push(pl_ctx *c, pl_stepb *b)
{
    if (!b->last || b->nops - b->last_base == room_cap[b->pcls]) {
        uint32_t k = b->last ? b->pcls + 1u : 0;
        rs_assert(k < PL_POP_CLASSES);
        size_t cap = room_cap[k];
        pl_room *r = pool_carve(&c->popool[b->rank], sizeof(pl_room) + cap * sizeof(pl_spop));
        r->next = NULL;
        if (b->last) {
            b->last_base += room_cap[b->pcls];
            b->last->next = r;
        } else {
            b->first = r;
            b->last_base = 0;
        }
        b->last = r;
        b->pcls = (uint8_t)k;
    }
    return &b->last->p[b->nops++ - b->last_base];
}

/* Op i of b (0-based): the last room at once, older ones by walking the chain. */
static pl_spop *pop_at(const pl_stepb *b, uint32_t i)
{
    if (i >= b->last_base) return &b->last->p[i - b->last_base];
    const pl_room *r = b->first;
    for (uint32_t k = 0; i >= room_cap[k]; k++) {
        i -= room_cap[k];
        r = r->next;
    }
    return (pl_spop *)&r->p[i];
}

/* In-order walk over a step's ops: for (pop_it it = pop_begin(b); (p = pop_next(&it));) */
typedef struct {
    pl_room *r;
    uint32_t i, left, k; /* k: the room's place in the chain */
} pop_it;

static pop_it pop_begin(const pl_stepb *b) { return (pop_it){b->first, 0, b->nops, 0}; }

static pl_spop *pop_next(pop_it *it)
{
    if (!it->left) return NULL;
    if (it->i == room_cap[it->k]) {
        it->r = it->r->next;
        it->i = 0;
        it->k++;
    }
    it->left--;
    return &it->r->p[it->i++];
}

/* The rank's steps are resolved: every room goes back at once. */
static void popool_release(pl_popool *pool)
{
    if (pool->blocks.n) blocks_put(pool->src, pool->blocks.v, pool->blocks.n);
    for (size_t i = 0; i < pool->big.n; i++) free(pool->big.v[i]);
    rs_vec_free(&pool->blocks);
    rs_vec_free(&pool->big);
    pl_blocksrc *src = pool->src;
    memset(pool, 0, sizeof *pool);
    pool->src = src;
}

static void pops_drop(pl_stepb *b)
{
    b->first = b->last = NULL;
    b->nops = b->last_base = 0;
}

/* Has wide op w a dim on each side, both with stride 1 innermost (so only its outer strides are kept)? */
static int pop_inner1(const pl_pop *w)
{
    uint32_t n0 = w->nd[0], n = n0 + w->nd[1];
    return n0 && n > n0 && w->str[n0 - 1] == 1 && w->str[n - 1] == 1;
}

/* Does wide op w keep its dims in the op itself as stored? */
static int pop_fits(const pl_pop *w) { return (uint32_t)w->nd[0] + w->nd[1] <= PL_PI && pop_inner1(w); }

/* RESHARD_CHECK_WIDE (tests): every op keeps its dims in a wide record, with every stride, so that the
 * record's general layout (an innermost stride other than 1; no descriptor has one) is exercised; the plans
 * must not change. Set by pl_after_pass2, before any op is stored or any helper thread starts. */
static int wide_only;

/* The fields the wide and the narrow form share, from s to d. */
#define POP_HEAD(d, s)                                                                             \
    do {                                                                                           \
        (d)->code = (s)->code, (d)->dead = (s)->dead, (d)->sym = (s)->sym;                         \
        (d)->nd[0] = (s)->nd[0], (d)->nd[1] = (s)->nd[1];                                          \
        (d)->tensor = (s)->tensor, (d)->item = (s)->item;                                          \
        (d)->loc[0] = (s)->loc[0], (d)->loc[1] = (s)->loc[1];                                      \
        (d)->off[0] = (s)->off[0], (d)->off[1] = (s)->off[1];                                      \
    } while (0)

/* The wide form of stored op s (dims past its own are left as they are). */
static void pop_load(pl_pop *w, const pl_spop *s)
{
    POP_HEAD(w, s);
    if (s->ext) {
        const uint8_t *e = s->d.ext;
        uint32_t n0 = s->nd[0], n = n0 + s->nd[1], ns = n;
        if (s->ext & PL_EXT_OUTER) {
            ns = 0;
            for (uint32_t i = 0; i < n; i++)
                if (i == n0 - 1 || i == n - 1) w->str[i] = 1;
                else memcpy(&w->str[i], e + 8 * ns++, 8);
        } else {
            memcpy(w->str, e, 8 * (size_t)n);
        }
        memcpy(w->cnt, e + 8 * ns, 4 * (size_t)n);
        memcpy(w->dl, e + 8 * ns + 4 * n, sizeof w->dl);
        return;
    }
    memcpy(w->cnt, s->d.in.cnt, sizeof s->d.in.cnt);
    memcpy(w->dl, s->d.in.dl, sizeof s->d.in.dl);
    uint32_t n0 = s->nd[0], n = n0 + s->nd[1], k = 0;
    if (n == 2) { /* most ops: one dim a side, no outer stride */
        w->str[0] = w->str[1] = 1;
        return;
    }
    /* side 0's outer strides, its innermost 1, side 1's outer strides, its innermost 1 */
    for (; k + 1 < n0; k++) w->str[k] = s->d.in.str[k];
    w->str[n0 - 1] = 1;
    for (uint32_t i = n0; i + 1 < n; i++) w->str[i] = s->d.in.str[k++];
    w->str[n - 1] = 1;
}

/* Store wide op w in slot s of a step of the rank whose blocks are `pool`; a slot that is not fresh and
 * already keeps its dims outside reuses that record. */
static void pop_store(pl_popool *pool, pl_spop *s, const pl_pop *w, int fresh)
{
    uint8_t *e = !fresh && s->ext ? s->d.ext : NULL;
    uint32_t have = e ? s->ext & PL_EXT_WORDS : 0;
    POP_HEAD(s, w);
    if (!e && !wide_only && pop_fits(w)) {
        s->ext = 0;
        memcpy(s->d.in.cnt, w->cnt, sizeof s->d.in.cnt);
        memcpy(s->d.in.dl, w->dl, sizeof s->d.in.dl);
        uint32_t n0 = w->nd[0], n = n0 + w->nd[1], k = 0;
        for (uint32_t i = 0; i < n; i++)
            if (i != n0 - 1 && i != n - 1) s->d.in.str[k++] = w->str[i];
        return;
    }
    uint32_t n0 = w->nd[0], n = n0 + w->nd[1], ns = 0;
    int outer = !wide_only && pop_inner1(w);
    uint32_t words = ((outer ? n - 2 : n) * 8 + n * 4 + (uint32_t)sizeof w->dl + 7) / 8;
    if (words > have) e = pool_carve(pool, 8 * (size_t)words), have = words;
    for (uint32_t i = 0; i < n; i++)
        if (!outer || (i != n0 - 1 && i != n - 1)) memcpy(e + 8 * ns++, &w->str[i], 8);
    memcpy(e + 8 * ns, w->cnt, 4 * (size_t)n);
    memcpy(e + 8 * ns + 4 * n, w->dl, sizeof w->dl);
    s->d.ext = e;
    s->ext = (uint8_t)(have | (outer ? PL_EXT_OUTER : 0));
}

/* Make x part of stored op ys if it can (extend). */
static int fold(pl_ctx *c, const pl_stepb *b, pl_spop *ys, const pl_pop *x)
{
    pl_pop y;
    pop_load(&y, ys);
    if (!extend(c, b, &y, x)) return 0;
    pop_store(&c->popool[b->rank], ys, &y, 0);
    return 1;
}

/* Add op x to step sbid: it extends the latest op of its (code, row tag, locs), or that one is folded into
 * the live op before it, and x becomes the latest. */
static void add_pop(pl_ctx *c, uint32_t sbid, const pl_pop *x, uint32_t lane_tag)
{
    pl_stepb *b = &c->steps.v[sbid];
    rs_assert(!c->rank_built[b->rank]); /* pass 1 saw every part that involves the rank */
    pl_mslot *e = mslot_get(c, b, x->loc[0], x->loc[1], x->code | lane_tag << 8);
    uint32_t cur = e->cur, prev = e->prev;
    if (cur) {
        pl_spop *ys = pop_at(b, cur - 1);
        if (fold(c, b, ys, x)) return;
        pl_pop y;
        if (prev) pop_load(&y, ys);
        if (prev && fold(c, b, pop_at(b, prev - 1), &y)) {
            ys->dead = 1;
            if (cur == b->nops) b->nops--; /* the last op: x takes its place (no slot refers to it) */
        } else {
            prev = cur;
        }
    }
    pop_store(&c->popool[b->rank], pop_push(c, b), x, 1);
    e->cur = b->nops;
    e->prev = prev;
}

/* No op comes to step b any more: fold each merge slot's latest op into the one before it if it can. */
static void close_step_merges(pl_ctx *c, pl_stepb *b)
{
    mslot_flush(b);
    for (uint32_t j = 0; j < b->mcap; j++) {
        uint32_t cur = b->mt[j].cur, prev = b->mt[j].prev;
        if (!cur || !prev) continue;
        pl_spop *ys = pop_at(b, cur - 1);
        pl_pop y;
        pop_load(&y, ys);
        if (fold(c, b, pop_at(b, prev - 1), &y)) ys->dead = 1;
    }
    if (b->mcap > MSLOT_LINEAR) free(b->mt);
    b->mt = NULL;
    b->mcap = b->mn = 0;
}

/* ---- the op adder ---- */

/* On two threads, the ops pass 3 makes go to their steps (add_pop: merging, the wide form stored narrow) on
 * a thread of their own, in the order they are made, in batches: on the 2.5 T MoE every rank takes part in
 * its last two tensors, so no rank is built during the tensor loop and the helper thread has nothing to do
 * there, while add_pop is two fifths of the loop's instructions. Each step gets its ops in the same order
 * as on one thread, so the plan is the same. The adder writes only the ops, merge state and rooms of the
 * steps it is given (pl_stepb's pcls, first, last, nops, last_base, mt, mcap, mn, hot, hot_at) and carves from
 * their ranks' pools, which the loop carves item lists from too: while it runs, pools are carved under a lock
 * each. What must see the ops, or moves the step builders, waits for it (adder_sync): building ranks, a
 * growth of the step builders' vector (helper_grow_guard), the last tensor. The ring holds 64 batches
 * (2.6 MB): with 8, the loop waited for room 0.17-0.25 s of DeepSeek-V3/H100's pass 3 (while the helper
 * took the adder's core, the adder fell 2048 ops behind), with 64 0.08-0.1 s. */
#define ADD_BATCH 256
#define ADD_RING 64
typedef struct {
    uint32_t sbid, tag;
    pl_pop x;
} add_ent;

typedef struct pl_adder {
    pl_ctx *c;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t work, room;
    add_ent *ring;             /* ADD_RING batches of ADD_BATCH */
    uint32_t nfill[ADD_RING];  /* the entries of each handed-over batch */
    uint64_t head, tail;       /* batches handed over and not yet done: [head, tail) (mod ADD_RING) */
    uint32_t n;                /* entries in the batch being filled, slot tail % ADD_RING */
    int stop;
} pl_adder;

static void *adder_main(void *arg)
{
    pl_adder *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (a->head == a->tail && !a->stop) pthread_cond_wait(&a->work, &a->mu);
        if (a->head == a->tail) break;
        const add_ent *e = a->ring + (a->head % ADD_RING) * ADD_BATCH;
        uint32_t n = a->nfill[a->head % ADD_RING];
        pthread_mutex_unlock(&a->mu);
        for (uint32_t i = 0; i < n; i++) add_pop(a->c, e[i].sbid, &e[i].x, e[i].tag);
        pthread_mutex_lock(&a->mu);
        a->head++;
        pthread_cond_signal(&a->room);
    }
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

/* Hand the batch being filled over (waits while every slot is taken). */
static void adder_hand(pl_adder *a)
{
    pthread_mutex_lock(&a->mu);
    a->nfill[a->tail % ADD_RING] = a->n;
    a->tail++;
    a->n = 0;
    pthread_cond_signal(&a->work);
    while (a->tail - a->head >= ADD_RING) pthread_cond_wait(&a->room, &a->mu);
    pthread_mutex_unlock(&a->mu);
}

/* Every op made so far is in its step. */
static void adder_sync(pl_ctx *c)
{
    pl_adder *a = c->adder;
    if (!a) return;
    if (a->n) adder_hand(a);
    pthread_mutex_lock(&a->mu);
    while (a->head != a->tail) pthread_cond_wait(&a->room, &a->mu);
    pthread_mutex_unlock(&a->mu);
}

/* Start the adder (pass 3) when the plan is worth a second thread; nothing when it cannot be started. */
#define PL_ADDER_MIN_PARTS 4096
static void adder_start(pl_ctx *c)
{
    if (rs_threads(c->pflow.n, PL_ADDER_MIN_PARTS) < 2) return;
    pl_adder *a = rs_xcalloc(1, sizeof *a);
    a->c = c;
    a->ring = rs_xmalloc((size_t)ADD_RING * ADD_BATCH * sizeof *a->ring);
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->work, NULL);
    pthread_cond_init(&a->room, NULL);
    /* (atomic: the helper, building ranks, carves from theirs, alone, locked or not) */
    __atomic_store_n(&c->blocksrc->shared, 1, __ATOMIC_RELAXED);
    if (rs_thread_start(&a->th, adder_main, a)) {
        __atomic_store_n(&c->blocksrc->shared, 0, __ATOMIC_RELAXED);
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->work);
        pthread_cond_destroy(&a->room);
        free(a->ring);
        free(a);
        return;
    }
    c->adder = a;
}

/* Let the adder finish what it was given and go (a no-op without one). */
static void adder_stop(pl_ctx *c)
{
    pl_adder *a = c->adder;
    if (!a) return;
    if (a->n) adder_hand(a);
    pthread_mutex_lock(&a->mu);
    a->stop = 1;
    pthread_cond_signal(&a->work);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->th, NULL);
    __atomic_store_n(&c->blocksrc->shared, 0, __ATOMIC_RELAXED);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->work);
    pthread_cond_destroy(&a->room);
    free(a->ring);
    free(a);
    c->adder = NULL;
}

/* add_pop, on the adder when it runs. */
static void pop_add(pl_ctx *c, uint32_t sbid, const pl_pop *x, uint32_t lane_tag)
{
    pl_adder *a = c->adder;
    if (!a) {
        add_pop(c, sbid, x, lane_tag);
        return;
    }
    add_ent *e = a->ring + (a->tail % ADD_RING) * ADD_BATCH + a->n++;
    e->sbid = sbid;
    e->tag = lane_tag;
    e->x = *x;
    if (a->n == ADD_BATCH) adder_hand(a);
}

/* ---- segments ---- */

/* A step's out and in lists hold about one item each (2.7 M segments over 2.5 M step builders on the 2.5 T
 * MoE): grown from 2, not from rs_vec's 16 (which took 300 MB there), in rooms carved from the blocks of
 * `pool` (the step's rank), which go back with the rank's program built (no malloc and free per list). */
#define item_push(pool, vp, x)                                                                     \
    do {                                                                                           \
        if ((vp)->n == (vp)->cap) {                                                                \
            uint32_t nc_ = (vp)->cap ? (vp)->cap * 2 : 2;                                          \
            void *nv_ = pool_carve((pool), nc_ * sizeof *(vp)->v);                                 \
            if ((vp)->n) memcpy(nv_, (vp)->v, (vp)->n * sizeof *(vp)->v);                          \
            (vp)->v = nv_;                                                                         \
            (vp)->cap = nc_;                                                                       \
        }                                                                                          \
        (vp)->v[(vp)->n++] = (x);                                                                  \
    } while (0)

static uint32_t seg_make(pl_ctx *c, uint32_t flow, uint32_t round, uint32_t tensor, seg_ids *ids)
{
    const pl_flow *fl = &c->flows.v[flow];
    uint32_t s = fl->s, r = fl->r, fset = PL_KEY_FSET(fl->fset); /* the flow's key without class and relay bits */
    uint8_t lane = fl->lane;
    pl_seg g;
    memset(&g, 0, sizeof g);
    g.s = s;
    g.r = r;
    g.src_loc = g.dst_loc = RS_NONE;
    g.sbase = g.rbase = UINT64_MAX; /* laid out with the sender's / receiver's program */
    g.tensor = tensor;
    uint32_t id = ids ? ids->seg++ : (uint32_t)c->segs.n;
    uint32_t sbid = sb_at(c, s, lane, round, ids);
    g.sb = sbid;
    pl_stepb *sb = &c->steps.v[sbid];
    g.out_idx = (uint32_t)sb->out.n;
    item_push(&c->popool[s], &sb->out, id);
    uint32_t rbid = sb_at(c, r, lane, round, ids);
    g.rb = rbid;
    pl_stepb *rb = &c->steps.v[rbid];
    g.in_idx = (uint32_t)rb->in.n;
    item_push(&c->popool[r], &rb->in, (uint64_t)id << 1);
    uint32_t nf;
    const uint32_t *f = pl_intern_list(&c->fsets, fset, &nf);
    if (!ids) {
        helper_grow_guard(c, c->insts.n, c->insts.cap, nf);
        helper_grow_guard(c, c->segs.n, c->segs.cap, 1);
    }
    uint32_t i0 = ids ? ids->inst : (uint32_t)c->insts.n;
    g.inst = i0;
    g.ninst = nf;
    if (nf) sb_at(c, r, RS_LANE_NVL, round, ids); /* the forwarder's fan-out step */
    for (uint32_t q = 0; q < nf; q++) {
        pl_inst in;
        memset(&in, 0, sizeof in);
        in.seg = id;
        in.f = f[q];
        in.dst_loc = RS_NONE;
        uint32_t fbid = sb_at(c, f[q], RS_LANE_NVL, round, ids);
        in.fb = fbid;
        pl_stepb *fb = &c->steps.v[fbid];
        in.in_idx = (uint32_t)fb->in.n;
        item_push(&c->popool[f[q]], &fb->in, (uint64_t)(i0 + q) << 1 | 1);
        if (ids) c->insts.v[i0 + q] = in;
        else rs_vec_push(&c->insts, in);
    }
    if (ids) {
        ids->inst += nf;
        c->segs.v[id] = g;
    } else {
        rs_vec_push(&c->segs, g);
    }
    return id;
}

static uint32_t seg_new(pl_ctx *c, uint32_t flow, uint32_t round, uint32_t tensor)
{
    return seg_make(c, flow, round, tensor, NULL);
}

static uint64_t usage_at(pl_ctx *c, uint32_t rank, uint32_t k)
{
    return k < c->usage[rank].n ? c->usage[rank].v[k] : 0;
}

static void usage_add(pl_ctx *c, uint32_t rank, uint32_t k, uint64_t add)
{
    if (!add) return;
    while (c->usage[rank].n <= k) rs_vec_push(&c->usage[rank], 0);
    c->usage[rank].v[k] += add;
}

/* ---- pass work ---- */

/* Side 0 is set before side 1 (side 1's dims follow side 0's). */
static void set_local(pl_pop *p, int side, uint32_t loc, const rs_desc *d)
{
    rs_assert(d->ndim <= PL_PD && (side ? p->nd[0] + d->ndim <= PL_PT : p->nd[1] == 0));
    p->loc[side] = loc;
    p->nd[side] = (uint8_t)d->ndim;
    p->off[side] = d->offset;
    uint32_t *cnt = pl_pcnt(p, side);
    uint64_t *str = pl_pstr(p, side);
    /* (one loop: a memcpy of the ndim strides, a variable size, was inlined as a byte loop under the
     * build's string-op strategy, 84 instructions a call) */
    for (uint32_t i = 0; i < d->ndim; i++) {
        rs_assert(d->count[i] <= UINT32_MAX);
        cnt[i] = (uint32_t)d->count[i];
        str[i] = d->stride[i];
    }
}

/* p is zeroed (its other dims and item steps stay 0); side 0 is set before side 1. */
static void set_staging(pl_pop *p, int side, uint32_t item, uint64_t off, uint64_t bytes)
{
    rs_assert((side || p->nd[1] == 0) && bytes <= UINT32_MAX);
    p->loc[side] = RS_LOC_STAGING;
    p->nd[side] = 1;
    p->off[side] = off;
    pl_pcnt(p, side)[0] = (uint32_t)bytes;
    pl_pstr(p, side)[0] = 1;
    p->sym = (uint8_t)(side + 1);
    p->item = (int32_t)item;
}

/* Index of flow f's round table entry holding byte `off` (rt_begin[f + 1] past the end). The last
 * answer is remembered: a part's first chunk asks again what the part asked. */
static uint32_t rt_index(pl_ctx *c, uint32_t f, uint64_t off)
{
    if (c->rt_memo_f == f + 1 && c->rt_memo_off == off) return c->rt_memo_i;
    uint32_t lo = c->rt_begin[f], hi = c->rt_begin[f + 1];
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (c->rt_end[mid] <= off) lo = mid + 1;
        else hi = mid;
    }
    c->rt_memo_f = f + 1;
    c->rt_memo_off = off;
    c->rt_memo_i = lo;
    return lo;
}

/* Round table entry of byte `off` of flow f (the last one past the end). */
static uint32_t rt_entry(pl_ctx *c, uint32_t f, uint64_t off)
{
    rs_assert(c->rt_begin[f] < c->rt_begin[f + 1]);
    uint32_t i = rt_index(c, f, off);
    return i < c->rt_begin[f + 1] ? i : c->rt_begin[f + 1] - 1;
}

/* End of the byte range of flow f's round table entry holding byte `off` (UINT64_MAX past the end). */
static uint64_t flow_round_end(pl_ctx *c, uint32_t f, uint64_t off)
{
    uint32_t i = rt_index(c, f, off);
    return i < c->rt_begin[f + 1] ? c->rt_end[i] : UINT64_MAX;
}

typedef struct {
    const pl_bmap *sm, *dm;
    uint32_t fi;          /* the part's flow (not LOCAL) */
    uint32_t sloc;        /* source binding on the sender */
    uint32_t dloc;        /* destination binding on the receiver */
    uint32_t nf;
    const uint32_t *f;
    uint32_t floc[64];
    uint32_t *flocs;
    uint32_t win; /* the sender's window of this part's source unit */
} chunk_env;

#define FAN_ZC_PEERS 4 /* forward peers from which a contiguous chunk goes zero-copy at a quarter of pmax */

/* The first round from k on where the chunk's staging fits on its sender (cs), receiver (cr) and forward
 * peers (cf each). */
static uint32_t fit_round(pl_ctx *c, const pl_part *p, const chunk_env *E, uint32_t k, uint64_t cs, uint64_t cr,
                          uint64_t cf)
{
    for (;; k++) {
        if (usage_at(c, p->s, k) + cs > c->half) continue;
        if (cr && usage_at(c, p->r, k) + cr > c->half) continue;
        int ok = 1;
        for (uint32_t q = 0; q < E->nf && ok; q++)
            if (cf && usage_at(c, E->f[q], k) + cf > c->half) ok = 0;
        if (ok) return k;
    }
}

static int emit_chunk(pl_ctx *c, const pl_cell *cell, const pl_part *p, chunk_env *E, const int64_t *lo,
                      const int64_t *hi)
{
    rs_desc sd, dd;
    if (pl_bmap_desc(E->sm, lo, hi, &sd) != 1 || pl_bmap_desc(E->dm, lo, hi, &dd) != 1) return 1; /* cut it */
    if (sd.ndim + dd.ndim > PL_PT) return 2; /* more dims than an op keeps: halve it */
    uint64_t bytes = pl_box_elems(cell->ndim, lo, hi) * cell->es;
    if (bytes > UINT32_MAX) return 2; /* an op counts in 32 bits (a staging budget over 32 GiB makes such chunks) */
    pl_pop x;
    memset(&x, 0, sizeof x);
    x.tensor = cell->tensor;
    if (p->kind == PL_LOCAL) {
        c->st->chunks++;
        x.code = RS_OP_COPY;
        set_local(&x, 0, E->sloc, &sd);
        set_local(&x, 1, E->dloc, &dd);
        /* Both sides map one box through the common refinement of block and buffer shapes (or row runs
         * inside one row of each), so a group side's member-local run is a suffix of F dims, at which the
         * other side's folded dims always cut. */
        rs_assert(!c->bind_mb || !(E->sm->mbytes || E->dm->mbytes) ||
                  pop_group_ok(&x, pl_loc_mbytes(c, p->r, E->sloc), pl_loc_mbytes(c, p->r, E->dloc)));
        pop_add(c, sb_get(c, p->r, RS_LANE_NVL, -1), &x, 0);
        return 0;
    }
    uint32_t w = E->win;
    uint32_t fi = E->fi;
    uint32_t wi = c->flows.v[fi].win_base + w;
    uint64_t off = c->fw_base[wi] + c->fw_run[wi];
    /* relays: two rounds after the round that brought the bytes (their flows are not in the round tables):
     * the bytes are unpacked in NVL step k, and NET step k + 2 (and its pack step) comes after it */
    uint32_t kmin = c->chunk_kmin;
    uint32_t rte = p->relay ? RS_NONE : rt_entry(c, fi, off);
    uint32_t k = p->relay ? kmin : c->rt_round[rte];
    if (k < kmin) k = kmin;

    /* zero-copy only for chunks of the largest size: a smaller fragment costs less packed into its round's
     * message (2 bytes of device-memory traffic per byte) than as a message of its own (zero-copy from the
     * fine chunk size on left Kimi K2 at 1.06x of the bound instead of 1.04x). Except a chunk that FAN_ZC_PEERS
     * or more domain peers take, contiguous in their buffers: staged, its copies would fill those peers'
     * staging (k receivers of a domain: a rank's network intake per round capped near half / k), so it goes
     * zero-copy from a quarter of that size, or from --fanout-zero-copy (docs/planner.md: vLLM data-parallel
     * attention, DeepSeek-V3 TP1 x DP256, 2.47x -> 1.32x of the bound; plans with fewer peers per chunk are
     * unchanged). */
    uint64_t zmin = c->o->zero_copy_min > c->pmax ? c->o->zero_copy_min : c->pmax;
    uint64_t fz = c->o->fanout_zero_copy ? c->o->fanout_zero_copy : c->pmax / 4;
    if (E->nf >= FAN_ZC_PEERS && dd.ndim == 1 && fz < zmin) zmin = c->o->zero_copy_min > fz ? c->o->zero_copy_min : fz;
    int direct = bytes >= zmin && (sd.ndim == 1 || dd.ndim == 1);
    int zc_src = direct && sd.ndim == 1;
    int zc_dst = direct && dd.ndim == 1; /* a forwarder too: it sends its peers' copies from its buffer */
    int zc_f = direct && dd.ndim == 1;
    uint64_t cs_ = zc_src ? 0 : bytes + ALIGN, cr = zc_dst ? 0 : bytes + ALIGN, cf = zc_f ? 0 : bytes + ALIGN;
    uint32_t k0 = k;
    k = fit_round(c, p, E, k0, cs_, cr, cf);
    /* A staged chunk at least zero_copy_min long and contiguous in its receivers' buffers goes zero-copy on
     * the receiving side when, staged, it would wait for a later round than it would so (its receivers'
     * staging taken): first for chunks that FAN_ZC_PEERS or more domain peers take (Qwen3-235B TP1 1.59x ->
     * 1.37x of the bound, DeepSeek-V3 (B) 1.08x -> 1.07x), now for every chunk (issue 3's case 150.0 ->
     * 146.2 ms; docs/planner.md). */
    if (!direct && k > k0 && dd.ndim == 1 && bytes >= c->o->zero_copy_min) {
        uint64_t cs2 = sd.ndim == 1 ? 0 : bytes + ALIGN;
        uint32_t k2 = fit_round(c, p, E, k0, cs2, 0, 0);
        if (k2 < k) {
            direct = zc_dst = zc_f = 1, zc_src = sd.ndim == 1;
            cs_ = cs2, cr = cf = 0, k = k2;
            c->st->zc_spill++;
        }
    }

    /* A staged chunk that would still wait for a later round is cut in two while it is at least twice
     * zero_copy_min (emit_aligned halves its outermost dim and tries each half): the halves fill what is left
     * of the round, or come out contiguous on the receiving side and go zero-copy there (above). Without
     * it, a chunk of up to pmax moving on whole left its round short: DeepSeek-V3 with a stage's experts
     * stacked (14.7 MB per receiver and round) modeled 169.3 ms against 144.9 ms with it (docs/planner.md). */
    if (k > k0 && !direct && bytes >= 2 * c->o->zero_copy_min) {
        c->st->spill_halves++;
        return 2;
    }
    c->st->chunks++;
    c->fw_run[wi] += bytes;
    usage_add(c, p->s, k, cs_);
    while (c->chunk_k.n <= c->cur_chunk) rs_vec_push(&c->chunk_k, 0);
    if (k > c->chunk_k.v[c->cur_chunk]) c->chunk_k.v[c->cur_chunk] = k;
    usage_add(c, p->r, k, cr);
    for (uint32_t q = 0; q < E->nf; q++) usage_add(c, E->f[q], k, cf);

    uint32_t gid;
    if (direct) {
        gid = seg_new(c, fi, k, cell->tensor);
    } else if (rte != RS_NONE && c->rt_round[rte] == k) {
        gid = c->rt_seg[rte]; /* the segment laid out for this byte's round */
    } else {
        /* the segment laid out for round k of the flow before this pass (seg_precreate: found in the flow's
         * round table, a short scan, only for spilled chunks), or one made for a spilled chunk (a map of
         * those few: indexing every laid-out segment took 192 MiB on the 2.5 T MoE) */
        uint64_t key = ((uint64_t)fi << 32 | k) + 1;
        if (c->last_seg_key == key) {
            gid = (uint32_t)c->last_seg;
        } else {
            gid = RS_NONE;
            for (uint32_t i = c->rt_begin[fi]; i < c->rt_begin[fi + 1] && gid == RS_NONE; i++)
                if (c->rt_round[i] == k) gid = c->rt_seg[i];
            if (gid == RS_NONE) {
                uint64_t *v = pl_map_get(&c->seg_index, fi, k);
                if (v) {
                    gid = (uint32_t)*v;
                } else {
                    gid = seg_new(c, fi, k, cell->tensor);
                    *pl_map_put(&c->seg_index, fi, k, NULL) = gid;
                }
            }
            c->last_seg_key = key;
            c->last_seg = gid;
        }
    }
    pl_seg *g = &c->segs.v[gid];
    rs_assert(!c->rank_built[g->s] && !c->rank_built[g->r]);
    if (g->bytes == 0) g->tensor = cell->tensor;
    else if (g->tensor != cell->tensor) g->tensor = RS_NONE;
    uint64_t y = g->bytes;
    g->bytes += bytes;
    if (zc_src) {
        g->zc_src = 1;
        g->src_loc = E->sloc;
        g->src_off = sd.offset;
    } else {
        x.code = RS_OP_PACK;
        set_local(&x, 0, E->sloc, &sd);
        set_staging(&x, 1, g->out_idx, y, bytes);
        uint32_t sbid = g->sb;
        uint64_t inner = 0; /* a row's bytes (a 64-bit division: only where it is needed) */
        if (!c->o->strided_reads && sd.ndim >= 2 && sd.count[0] <= 4 &&
            sd.stride[0] >= 2 * (inner = bytes / (sd.count[0] ? sd.count[0] : 1))) {
            /* a few far-apart rows (gate and up of one expert): pack each row on its own, so that row r of
             * consecutive receivers' fragments merge into one op without overlapping dims */
            for (uint64_t r = 0; r < sd.count[0]; r++) {
                pl_pop z = x; /* side 0 without its outer dim, then side 1 */
                z.off[0] = sd.offset + r * sd.stride[0];
                memmove(z.cnt, z.cnt + 1, (size_t)(z.nd[0] + z.nd[1] - 1) * sizeof z.cnt[0]);
                memmove(z.str, z.str + 1, (size_t)(z.nd[0] + z.nd[1] - 1) * sizeof z.str[0]);
                z.nd[0]--;
                z.off[1] = y + r * inner;
                pl_pcnt(&z, 1)[0] = (uint32_t)inner;
                pop_add(c, sbid, &z, (uint32_t)r + 1);
            }
        } else {
            pop_add(c, sbid, &x, 0);
        }
    }
    if (zc_dst) {
        g->zc_dst = 1;
        g->dst_loc = E->dloc;
        g->dst_off = dd.offset;
    } else {
        memset(&x, 0, sizeof x);
        x.tensor = cell->tensor;
        x.code = RS_OP_UNPACK;
        set_staging(&x, 0, g->in_idx, y, bytes);
        set_local(&x, 1, E->dloc, &dd);
        pop_add(c, g->rb, &x, 0);
    }
    for (uint32_t q = 0; q < E->nf; q++) {
        pl_inst *in = &c->insts.v[g->inst + q];
        rs_assert(in->f == E->f[q] && !c->rank_built[in->f]);
        if (zc_f) {
            in->zc = 1;
            in->dst_loc = E->flocs[q];
            in->dst_off = dd.offset;
        } else {
            memset(&x, 0, sizeof x);
            x.tensor = cell->tensor;
            x.code = RS_OP_UNPACK;
            set_staging(&x, 0, in->in_idx, y, bytes);
            set_local(&x, 1, E->flocs[q], &dd);
            pop_add(c, in->fb, &x, 0);
        }
    }
    return 0;
}

/* Split [lo, hi) until both maps take every piece as one region; emit the pieces in order. */
static int emit_aligned(pl_ctx *c, const pl_cell *cell, const pl_part *p, chunk_env *E, const int64_t *lo,
                        const int64_t *hi)
{
    if (E->sm->simple && E->dm->simple) {
        int r = emit_chunk(c, cell, p, E, lo, hi);
        if (r <= 0) return r;
        /* more dims than an op keeps: cut it below */
    }
    rs_vec(int64_t) stack = {0}; /* boxes: lo[PL_ND] then hi[PL_ND]; the top is processed next */
    rs_vec_reserve(&stack, 2 * PL_ND);
    memcpy(stack.v, lo, PL_ND * sizeof *lo);
    memcpy(stack.v + PL_ND, hi, PL_ND * sizeof *hi);
    stack.n = 2 * PL_ND;
    int rc = 0;
    while (stack.n && !rc) {
        int64_t l[PL_ND], h[PL_ND];
        stack.n -= 2 * PL_ND;
        memcpy(l, stack.v + stack.n, sizeof l);
        memcpy(h, stack.v + stack.n + PL_ND, sizeof h);
        uint32_t d;
        int64_t cut;
        if (!pl_bmap_cut(E->sm, l, h, &d, &cut) && !pl_bmap_cut(E->dm, l, h, &d, &cut)) {
            rc = emit_chunk(c, cell, p, E, l, h);
            if (rc == 1) rs_die("a chunk maps to no single region");
            if (rc != 2) continue;
            /* more dims on both sides together than an op keeps: halve the outermost dim that can be
             * halved (a box of single elements is one run on each side) */
            rc = 0;
            for (d = 0; d < cell->ndim && h[d] - l[d] < 2; d++) {
            }
            rs_assert(d < cell->ndim);
            cut = l[d] + (h[d] - l[d]) / 2;
        }
        rs_vec_reserve(&stack, 4 * PL_ND);
        int64_t *a = stack.v + stack.n, *b = a + 2 * PL_ND;
        /* second half below, first half on top */
        memcpy(a, l, sizeof l);
        memcpy(a + PL_ND, h, sizeof h);
        a[d] = cut;
        memcpy(b, l, sizeof l);
        memcpy(b + PL_ND, h, sizeof h);
        b[PL_ND + d] = cut;
        stack.n += 4 * PL_ND;
    }
    rs_vec_free(&stack);
    return rc;
}

/* The buffer map of a block (slot, mesh base), built once per tensor. NULL when the block does not fill its box. */
static const pl_bmap *bmap_cached(pl_ctx *c, uint32_t slot, uint32_t base, const int64_t *lo, const int64_t *hi)
{
    uint64_t *v = pl_block_cache(c, slot, base) + 2;
    if (*v) return (const pl_bmap *)(uintptr_t)*v;
    pl_bmap *m = pl_alloc(&c->tar, sizeof *m);
    if (pl_bmap_build(c->L, c->t->piece_begin + slot, lo, hi, m)) return NULL;
    *v = (uint64_t)(uintptr_t)m;
    return m;
}

/* The fine boxes of a part: [lo, hi) cut into boxes of at most pm bytes (nearly equal sub-boxes along the
 * outer dims, recursively, as pl_box_split cuts), handed to visit one by one in order, without being stored
 * (DeepSeek-V3 (B) cuts 6.7 M of them: listing them first, 128 bytes each, with a malloc per level, and a
 * round-table search per box took a tenth of its compile). visit returns nonzero to stop the walk. */
typedef struct fine_walk {
    uint32_t nd;
    uint64_t es, pm;
    int (*visit)(struct fine_walk *w, const int64_t *lo, const int64_t *hi);
    /* optional: take the fine boxes of [lo, hi) (bytes, n of them; UINT64_MAX: those of fine_box, not counted
     * yet) at once, as their visits would; 1 when it did, 0 when they are to be visited (nothing changed) */
    int (*whole)(struct fine_walk *w, const int64_t *lo, const int64_t *hi, uint64_t bytes, uint64_t n);
    /* with whole: before a box whose first fine box has at most bmin bytes is offered, what the first visit
     * would do anyway; 0 when none of it can be taken whole (nothing changed) */
    int (*prep)(struct fine_walk *w, uint64_t bmin);
    /* with whole, after prep: how much of a run of parts from lo along dim d (cross bytes per index of d; the
     * other dims as in lo, hi) whole would take: at most the bytes returned and *nmax fine boxes */
    uint64_t (*limit)(struct fine_walk *w, const int64_t *lo, const int64_t *hi, uint32_t d, uint64_t cross,
                      uint64_t *nmax);
    int rc;
    /* while whole takes parts [cut_i, cut_j) of a cut along dim cut_d (NULL: a box as fine_box cuts it) */
    const struct fine_parts *cut;
    uint32_t cut_d, cut_i, cut_j;
} fine_walk;

static void fine_cut(fine_walk *w, int64_t *lo, int64_t *hi, uint32_t k);
static uint64_t fine_count(uint32_t nd, uint64_t es, uint64_t pm, int64_t *lo, int64_t *hi);
static uint64_t fine_count_cut(uint32_t nd, uint64_t es, uint64_t pm, int64_t *lo, int64_t *hi, uint32_t k);

/* lo, hi: the box, PL_ND coordinates each (changed during the walk, restored after it); offer: whether to
 * offer it whole first (fine_cut offers its parts itself) */
static void fine_box(fine_walk *w, int64_t *lo, int64_t *hi, int offer)
{
    if (w->rc) return;
    uint64_t bytes = pl_box_elems(w->nd, lo, hi) * w->es;
    if (bytes <= w->pm || bytes <= w->es) {
        w->rc = w->visit(w, lo, hi);
        return;
    }
    if (offer && w->whole && w->prep(w, bytes) && w->whole(w, lo, hi, bytes, UINT64_MAX)) return;
    fine_cut(w, lo, hi, (uint32_t)((bytes + w->pm - 1) / w->pm));
}

/* The number of fine boxes fine_box cuts [lo, hi) into (lo, hi as there), without walking them: the parts
 * of a cut have at most two shapes (extents q and q + 1 along the cut dim, or shares k / ext and
 * k / ext + 1 of one index each), so each shape is counted once. */
static uint64_t fine_count(uint32_t nd, uint64_t es, uint64_t pm, int64_t *lo, int64_t *hi)
{
    uint64_t bytes = pl_box_elems(nd, lo, hi) * es;
    if (bytes <= pm || bytes <= es) return 1;
    return fine_count_cut(nd, es, pm, lo, hi, (uint32_t)((bytes + pm - 1) / pm));
}

static uint64_t fine_count_cut(uint32_t nd, uint64_t es, uint64_t pm, int64_t *lo, int64_t *hi, uint32_t k)
{
    uint32_t d = 0;
    while (d < nd && hi[d] - lo[d] <= 1) d++;
    if (k <= 1 || d == nd) return fine_count(nd, es, pm, lo, hi);
    uint64_t ext = (uint64_t)(hi[d] - lo[d]), n = 0;
    int64_t h0 = hi[d];
    if (ext >= k) {
        /* ext % k parts of extent q + 1, the others of q */
        uint64_t q = ext / k, r = ext % k;
        hi[d] = lo[d] + (int64_t)q;
        n += (k - r) * fine_count(nd, es, pm, lo, hi);
        if (r) {
            hi[d] = lo[d] + (int64_t)q + 1;
            n += r * fine_count(nd, es, pm, lo, hi);
        }
    } else {
        /* one part per index: k % ext of them cut in k / ext + 1, the others in k / ext */
        uint32_t a = k / (uint32_t)ext, b = k % (uint32_t)ext;
        hi[d] = lo[d] + 1;
        n += (ext - b) * fine_count_cut(nd, es, pm, lo, hi, a);
        if (b) n += b * fine_count_cut(nd, es, pm, lo, hi, a + 1);
    }
    hi[d] = h0;
    return n;
}

/* The parts of a cut of [lo, hi) along dim d: part i spans [l0 + ext * i / k, l0 + ext * (i + 1) / k) when
 * ext >= k (extents q = ext / k and q + 1), or index i when ext < k (cut again into k / ext, or one more for
 * the first k % ext of them). Runs of consecutive parts are offered whole, as long as the walk's limit
 * allows: the fine boxes of a run are those of its parts, one after the other (a run is not cut as one box
 * of its size would be). */
typedef struct fine_parts {
    int64_t l0;
    uint64_t ext, cross; /* extent along d, bytes per index of it */
    uint32_t k, nparts;
    uint64_t cnt[2];     /* fine boxes of a short and of a long part (UINT64_MAX: not counted yet) */
} fine_parts;

static int64_t part_at(const fine_parts *P, uint32_t i)
{
    return P->l0 + (int64_t)(P->ext >= P->k ? P->ext * i / P->k : i);
}

/* long parts among [i, j): extent q + 1, or cut in one more */
static uint64_t parts_long(const fine_parts *P, uint32_t i, uint32_t j)
{
    if (P->ext >= P->k) return (uint64_t)(part_at(P, j) - part_at(P, i)) - (P->ext / P->k) * (j - i);
    uint32_t b = P->k % (uint32_t)P->ext;
    return j <= b ? j - i : i < b ? b - i : 0;
}

static uint64_t parts_count(fine_walk *w, fine_parts *P, int64_t *lo, int64_t *hi, uint32_t d, uint32_t i, uint32_t j)
{
    for (int z = 0; z < 2; z++) {
        if (P->cnt[z] != UINT64_MAX) continue;
        int64_t l = lo[d], h = hi[d];
        lo[d] = P->l0;
        if (P->ext >= P->k) {
            hi[d] = P->l0 + (int64_t)(P->ext / P->k) + z;
            P->cnt[z] = fine_count(w->nd, w->es, w->pm, lo, hi);
        } else {
            hi[d] = P->l0 + 1;
            P->cnt[z] = fine_count_cut(w->nd, w->es, w->pm, lo, hi, P->k / (uint32_t)P->ext + (uint32_t)z);
        }
        lo[d] = l, hi[d] = h;
    }
    uint64_t nl = parts_long(P, i, j);
    return (j - i - nl) * P->cnt[0] + nl * P->cnt[1];
}

/* Offer parts [i, j) whole for the longest j that limit allows; returns j (i: none taken). */
static uint32_t parts_take(fine_walk *w, fine_parts *P, int64_t *lo, int64_t *hi, uint32_t d, uint32_t i)
{
    lo[d] = part_at(P, i);
    uint64_t bmin = (uint64_t)(part_at(P, i + 1) - lo[d]) * P->cross;
    if (!w->prep(w, bmin)) return i;
    uint64_t nmax, lim = w->limit(w, lo, hi, d, P->cross, &nmax);
    if (lim < bmin) return i;
    /* the last j with part_at(j) - l0 <= a: ext * j / k <= a, so j < (a + 1) * k / ext */
    uint64_t a = lim / P->cross + (uint64_t)(lo[d] - P->l0);
    uint64_t jm = a >= P->ext ? P->nparts : P->ext >= P->k ? ((a + 1) * P->k - 1) / P->ext : a;
    uint32_t j = jm < P->nparts ? (uint32_t)jm : P->nparts;
    rs_assert(j > i);
    uint64_t n = parts_count(w, P, lo, hi, d, i, j);
    if (n > nmax) {
        /* the last j whose fine boxes are few enough (counts grow with j) */
        uint32_t okj = i, badj = j;
        while (okj + 1 < badj) {
            uint32_t mid = okj + (badj - okj) / 2;
            if (parts_count(w, P, lo, hi, d, i, mid) <= nmax) okj = mid;
            else badj = mid;
        }
        if ((j = okj) == i) return i;
        n = parts_count(w, P, lo, hi, d, i, j);
    }
    hi[d] = part_at(P, j);
    w->cut = P, w->cut_d = d, w->cut_i = i, w->cut_j = j;
    rs_assert(w->whole(w, lo, hi, (uint64_t)(hi[d] - lo[d]) * P->cross, n));
    w->cut = NULL;
    return j;
}

/* k nearly equal parts along the outermost dim longer than one, or one part per index of it (each cut
 * again into its share of k) when it is shorter than k; each part then as fine_box takes it */
static void fine_cut(fine_walk *w, int64_t *lo, int64_t *hi, uint32_t k)
{
    uint32_t d = 0;
    while (d < w->nd && hi[d] - lo[d] <= 1) d++;
    if (k <= 1 || d == w->nd) {
        fine_box(w, lo, hi, 1);
        return;
    }
    int64_t ext = hi[d] - lo[d], l0 = lo[d], h0 = hi[d];
    fine_parts P = {l0, (uint64_t)ext, 0, k, (uint64_t)ext >= k ? k : (uint32_t)ext, {UINT64_MAX, UINT64_MAX}};
    if (w->whole) {
        hi[d] = l0 + 1;
        P.cross = pl_box_elems(w->nd, lo, hi) * w->es;
    }
    for (uint32_t i = 0; i < P.nparts && !w->rc;) {
        if (w->whole) {
            uint32_t j = parts_take(w, &P, lo, hi, d, i);
            if (j > i) {
                i = j;
                continue;
            }
        }
        lo[d] = part_at(&P, i);
        hi[d] = part_at(&P, i + 1);
        if ((uint64_t)ext >= k) fine_box(w, lo, hi, 0);
        else fine_cut(w, lo, hi, k / (uint32_t)ext + (i < k % (uint32_t)ext ? 1 : 0));
        i++;
    }
    lo[d] = l0;
    hi[d] = h0;
}

/* Visit with s the fine boxes that w's whole is taking: those of [lo, hi), or of its cut's parts (checks of
 * whole-taking: RESHARD_CHECK_FINE). */
static void walk_taken(fine_walk *s, const fine_walk *w, const int64_t *lo, const int64_t *hi)
{
    int64_t l[PL_ND], h[PL_ND];
    memcpy(l, lo, sizeof l);
    memcpy(h, hi, sizeof h);
    s->rc = 0;
    if (!w->cut) {
        fine_box(s, l, h, 0);
        return;
    }
    const fine_parts *P = w->cut;
    uint32_t d = w->cut_d;
    for (uint32_t i = w->cut_i; i < w->cut_j; i++) {
        l[d] = part_at(P, i);
        h[d] = part_at(P, i + 1);
        if (P->ext >= P->k) fine_box(s, l, h, 0);
        else fine_cut(s, l, h, P->k / (uint32_t)P->ext + (i < P->k % (uint32_t)P->ext ? 1 : 0));
    }
}

static int fine_walk_run(fine_walk *w, const int64_t *lo, const int64_t *hi)
{
    int64_t l[PL_ND], h[PL_ND];
    memcpy(l, lo, sizeof l);
    memcpy(h, hi, sizeof h);
    w->rc = 0;
    fine_box(w, l, h, 1);
    return w->rc;
}

/* A walk over the fine boxes of one part (what its chunks are emitted with). */
typedef struct {
    fine_walk w;
    pl_ctx *c;
    const pl_cell *cell;
    const pl_part *p;
    chunk_env *E;
} part_walk;

/* chunks_of's walk: each fine box is a chunk */
typedef struct {
    part_walk pw;
    int relay_each;
} chunk_walk;

static int chunk_visit(fine_walk *w, const int64_t *lo, const int64_t *hi)
{
    chunk_walk *x = (chunk_walk *)w;
    pl_ctx *c = x->pw.c;
    const pl_part *p = x->pw.p;
    c->cur_chunk++;
    if (x->relay_each)
        c->chunk_kmin = p->kmin_chunk && c->cur_chunk < p->nkmin ? p->kmin_chunk[c->cur_chunk] + 2 : p->kmin;
    return emit_aligned(c, x->pw.cell, p, x->pw.E, lo, hi);
}

/* [lo, hi) in chunks of at most pm bytes (the fine boxes above), in order; relay_each: a relay whose chunk
 * i goes two rounds after its parent's chunk i arrived. */
static int chunks_of(pl_ctx *c, const pl_cell *cell, const pl_part *p, chunk_env *E, const int64_t *lo,
                     const int64_t *hi, uint64_t pm, int relay_each)
{
    chunk_walk x = {{{cell->ndim, cell->es, pm, chunk_visit, NULL, NULL, NULL, 0, NULL, 0, 0, 0}, c, cell, p, E}, relay_each};
    return fine_walk_run(&x.pw.w, lo, hi);
}

/* Staging room in round k on the part's sender, receiver and forward peers (what emit_chunk checks). */
static uint64_t group_room(pl_ctx *c, const pl_part *p, const chunk_env *E, uint32_t k)
{
    uint64_t u = usage_at(c, p->s, k), v = usage_at(c, p->r, k);
    if (v > u) u = v;
    for (uint32_t q = 0; q < E->nf; q++)
        if ((v = usage_at(c, E->f[q], k)) > u) u = v;
    return u < c->half ? c->half - u : 0;
}

/* Box a and box b (lo[PL_ND] then hi[PL_ND]) side by side along one dim and equal in all others: their
 * union into a. */
static int box_join(uint32_t nd, int64_t *a, const int64_t *b)
{
    uint32_t d = nd;
    for (uint32_t e = 0; e < nd; e++) {
        if (b[e] == a[e] && b[PL_ND + e] == a[PL_ND + e]) continue;
        if (d != nd || b[e] != a[PL_ND + e]) return 0;
        d = e;
    }
    if (d == nd) return 0;
    a[PL_ND + d] = b[PL_ND + d];
    return 1;
}

/* grouped_chunks' walk: the open run (its round key r, the room it may take, its bytes, its boxes merged
 * where they form one) and, for a part that is not a relay, a cursor in its flow's round table (the
 * offsets only grow: one step instead of a search per fine box) */
typedef struct {
    part_walk pw;
    uint64_t off;      /* the flow offset where the open run starts */
    uint32_t j;        /* fine boxes seen */
    uint32_t r;        /* the open run's round key */
    uint64_t room, run;
    int open;
    uint32_t rt, rt_end; /* round table cursor: entry rt of [.., rt_end) */
    uint32_t pend_r;     /* group_prep: the key and room of a run to be opened */
    uint64_t pend_room;
    /* a relay with per-box keys: kend[i], the end of the fine boxes from i on with box i's key
     * (kend[nkend]: for those past its parent's boxes; UINT32_MAX: no end) */
    const uint32_t *kend;
    uint32_t nkend;
} group_walk;

/* Round key of fine box i at flow offset off: the flow's round of that byte (the round table entry from *rt
 * on, which moves there: offsets only grow), or for a relay two rounds after the round its parent's box i
 * arrived in. */
static uint32_t key_at(const group_walk *x, uint64_t off, uint32_t i, uint32_t *rt)
{
    const pl_ctx *c = x->pw.c;
    const pl_part *p = x->pw.p;
    if (p->relay) {
        uint32_t k = p->kmin;
        if (p->kmin_chunk && i < p->nkmin && p->kmin_chunk[i] + 2 > k) k = p->kmin_chunk[i] + 2;
        return k;
    }
    while (*rt < x->rt_end && c->rt_end[*rt] <= off) (*rt)++;
    return c->rt_round[*rt < x->rt_end ? *rt : x->rt_end - 1];
}

static uint32_t group_key(group_walk *x, uint64_t off, uint32_t i) { return key_at(x, off, i, &x->rt); }

/* Emit the open run: each merged box a chunk; every fine box of it takes its chunk's latest round. */
static int group_flush(group_walk *x)
{
    pl_ctx *c = x->pw.c;
    c->chunk_kmin = x->pw.p->relay ? x->r : 0;
    int rc = 0;
    size_t n = c->gst.n;
    for (size_t q = 0; q < n && !rc; q++) {
        c->cur_chunk++;
        rc = emit_aligned(c, x->pw.cell, x->pw.p, x->pw.E, c->gst.v[q].box, c->gst.v[q].box + PL_ND);
        uint32_t kk = c->cur_chunk < c->chunk_k.n ? c->chunk_k.v[c->cur_chunk] : 0;
        uint32_t z1 = q + 1 < n ? c->gst.v[q + 1].first : x->j;
        for (uint32_t z = c->gst.v[q].first; z < z1; z++) rs_vec_push(&c->fine_k, kk);
    }
    x->off += x->run;
    x->open = 0;
    return rc;
}

/* Push box [lo, hi) of bb bytes, fine boxes from `first` on, onto stack v (room reserved), and merge the top
 * boxes while they form one box of at most pmax (halves of a slab, then the slabs: the run's boxes stay
 * few). Returns the new depth. */
static size_t gst_push(pl_gbox *v, size_t n, uint32_t nd, uint64_t pmax, const int64_t *lo, const int64_t *hi,
                       uint64_t bb, uint32_t first)
{
    pl_gbox *g = &v[n++];
    memcpy(g->box, lo, PL_ND * sizeof *lo);
    memcpy(g->box + PL_ND, hi, PL_ND * sizeof *hi);
    g->bytes = bb;
    g->first = first;
    while (n >= 2 && v[n - 2].bytes + v[n - 1].bytes <= pmax && box_join(nd, v[n - 2].box, v[n - 1].box)) {
        v[n - 2].bytes += v[n - 1].bytes;
        n--;
    }
    return n;
}

static int group_visit(fine_walk *w, const int64_t *lo, const int64_t *hi)
{
    group_walk *x = (group_walk *)w;
    pl_ctx *c = x->pw.c;
    uint32_t nd = x->pw.cell->ndim;
    uint64_t bb = pl_box_elems(nd, lo, hi) * x->pw.cell->es;
    /* a run: consecutive fine boxes with one round key, no more than the round's staging still takes on
     * every rank it touches (a chunk that does not fit goes whole to a later round) */
    if (x->open && (x->run + bb + ALIGN > x->room || group_key(x, x->off + x->run, x->j) != x->r)) {
        int rc = group_flush(x);
        if (rc) return rc;
    }
    if (!x->open) {
        x->r = group_key(x, x->off, x->j);
        x->room = group_room(c, x->pw.p, x->pw.E, x->r);
        x->run = 0;
        x->open = 1;
        c->gst.n = 0;
    }
    x->run += bb;
    rs_vec_reserve(&c->gst, 1);
    c->gst.n = gst_push(c->gst.v, c->gst.n, nd, c->pmax, lo, hi, bb, x->j++);
    return 0;
}

/* Whether the top t of a run's stack v[0..n) leaves the fine boxes of [lo, hi) (bytes) to merge into that
 * box before t takes part: t cannot join a union of its first fine boxes short of the whole, or only unions
 * that grow along one dim to the whole within pmax, which the box below t cannot join. A union that t joins
 * starts where [lo, hi) starts: t differs from it in the start of exactly one dim e and ends where it
 * starts there, and such a union has t's extent in every other dim (none does when t ends past [lo, hi) in
 * one of them). When that is [lo, hi)'s extent, each
 * such union grows along e, and together (within pmax) they end as t joined with [lo, hi), as pushing the
 * whole does, unless the box below t joins t with a part of them (its extent along e starting with t's and
 * ending inside [lo, hi)). Otherwise: not known, cut. */
static int gst_top_apart(const pl_gbox *v, size_t n, uint32_t nd, const int64_t *lo, const int64_t *hi,
                         uint64_t bytes, uint64_t pmax)
{
    const int64_t *t = v[n - 1].box;
    uint32_t e = nd, ndiff = 0;
    for (uint32_t d = 0; d < nd; d++)
        if (t[d] != lo[d]) e = d, ndiff++;
    if (ndiff != 1 || t[PL_ND + e] != lo[e]) return 1; /* never adjacent to such a union */
    for (uint32_t d = 0; d < nd; d++)
        if (d != e && t[PL_ND + d] > hi[d]) return 1; /* longer than every such union in dim d */
    for (uint32_t d = 0; d < nd; d++)
        if (d != e && t[PL_ND + d] != hi[d]) return 0;
    if (v[n - 1].bytes + bytes > pmax) return 0;
    if (n >= 2) {
        const int64_t *u = v[n - 2].box;
        if (u[e] == t[e] && u[PL_ND + e] > lo[e] && u[PL_ND + e] < hi[e]) return 0;
    }
    return 1;
}

/* RESHARD_CHECK_FINE: a box taken whole (group_whole) is also walked fine box by fine box over a copy of the
 * run, which must end the same (tests/planner.cmake runs plans with it). */
typedef struct {
    fine_walk w;
    group_walk *x;
    rs_vec(pl_gbox) st;
    uint64_t run;
    uint32_t j, rt;
} group_shadow;

static int shadow_visit(fine_walk *w, const int64_t *lo, const int64_t *hi)
{
    group_shadow *y = (group_shadow *)w;
    group_walk *x = y->x;
    pl_ctx *c = x->pw.c;
    uint64_t bb = pl_box_elems(w->nd, lo, hi) * w->es;
    if (y->run + bb + ALIGN > x->room || key_at(x, x->off + y->run, y->j, &y->rt) != x->r)
        rs_die("fine-box check: a box taken whole ends its run");
    y->run += bb;
    rs_vec_reserve(&y->st, 1);
    y->st.n = gst_push(y->st.v, y->st.n, w->nd, c->pmax, lo, hi, bb, y->j++);
    return 0;
}

static void group_check_whole(group_walk *x, const int64_t *lo, const int64_t *hi, group_shadow *y, int after)
{
    pl_ctx *c = x->pw.c;
    if (!after) {
        memset(y, 0, sizeof *y);
        y->w = (fine_walk){x->pw.w.nd, x->pw.w.es, x->pw.w.pm, shadow_visit, NULL, NULL, NULL, 0, NULL, 0, 0, 0};
        y->x = x;
        rs_vec_reserve(&y->st, c->gst.n + 1);
        if (c->gst.n) memcpy(y->st.v, c->gst.v, c->gst.n * sizeof *c->gst.v);
        y->st.n = c->gst.n;
        y->run = x->run;
        y->j = x->j;
        y->rt = x->rt;
        walk_taken(&y->w, &x->pw.w, lo, hi);
        return;
    }
    int same = y->st.n == c->gst.n && y->run == x->run && y->j == x->j;
    for (size_t i = 0; i < y->st.n && same; i++)
        same = !memcmp(y->st.v[i].box, c->gst.v[i].box, sizeof y->st.v[i].box) &&
               y->st.v[i].bytes == c->gst.v[i].bytes && y->st.v[i].first == c->gst.v[i].first;
    if (!same) {
        uint32_t nd = x->pw.w.nd;
        fprintf(stderr, "X:"); for (uint32_t d = 0; d < nd; d++) fprintf(stderr, " [%lld,%lld)", (long long)lo[d], (long long)hi[d]);
        fprintf(stderr, "\nrun %llu/%llu j %u/%u pm %llu pmax %llu es %llu\n", (unsigned long long)y->run, (unsigned long long)x->run, y->j, x->j, (unsigned long long)x->pw.w.pm, (unsigned long long)c->pmax, (unsigned long long)x->pw.w.es);
        for (int z = 0; z < 2; z++) {
            const pl_gbox *v = z ? c->gst.v : y->st.v; size_t n = z ? c->gst.n : y->st.n;
            fprintf(stderr, "%s:\n", z ? "fast" : "shadow");
            for (size_t i = 0; i < n; i++) { fprintf(stderr, "  "); for (uint32_t d = 0; d < nd; d++) fprintf(stderr, " [%lld,%lld)", (long long)v[i].box[d], (long long)v[i].box[PL_ND + d]); fprintf(stderr, " bytes %llu first %u\n", (unsigned long long)v[i].bytes, v[i].first); }
        }
        rs_die("fine-box check: a box taken whole ends its run otherwise than its fine boxes do");
    }
    rs_vec_free(&y->st);
}

/* grouped_chunks' prep: the run the first fine box (at most bmin bytes) of what is offered next joins. An
 * open run that takes it ends there when its round key is not the run's (as the visit would end it); a run
 * to be opened gets its key and room (kept in pending until something is taken). 0: nothing can be taken
 * (the open run may not take bmin). */
static int group_prep(fine_walk *w, uint64_t bmin)
{
    group_walk *x = (group_walk *)w;
    pl_ctx *c = x->pw.c;
    if (x->open) {
        if (x->run + bmin + ALIGN > x->room) return 0;
        if (group_key(x, x->off + x->run, x->j) == x->r) return 1;
        int rc = group_flush(x);
        if (rc) {
            w->rc = rc;
            return 0;
        }
    }
    x->pend_r = group_key(x, x->off, x->j);
    x->pend_room = group_room(c, x->pw.p, x->pw.E, x->pend_r);
    return 1;
}

/* A relay's fine boxes from the next one on that share its key (UINT64_MAX: all). */
static uint64_t group_kleft(const group_walk *x)
{
    if (!x->kend) return UINT64_MAX;
    uint32_t e = x->kend[x->j < x->nkend ? x->j : x->nkend];
    return e == UINT32_MAX ? UINT64_MAX : e - x->j;
}

/* grouped_chunks' limit: what group_whole below takes of a run of parts from lo along d, in closed form:
 * within pmax, the room and the round table entry (or for a relay, the fine boxes of one key), and with
 * the stack's top t: apart from every such run, or from those that end before t along d (t next to them
 * along another dim), or (t and the run one box along d) within pmax less t and not past the end along d
 * of the box below t, when that starts along d where t does (gst_top_apart). */
static uint64_t group_limit(fine_walk *w, const int64_t *lo, const int64_t *hi, uint32_t d, uint64_t cross,
                            uint64_t *nmax)
{
    group_walk *x = (group_walk *)w;
    pl_ctx *c = x->pw.c;
    uint32_t nd = w->nd;
    uint64_t run = x->open ? x->run : 0, room = x->open ? x->room : x->pend_room;
    if (room < run + ALIGN) return 0;
    uint64_t lim = c->pmax < room - run - ALIGN ? c->pmax : room - run - ALIGN;
    *nmax = UINT64_MAX;
    if (x->pw.p->relay) {
        *nmax = group_kleft(x);
    } else if (x->rt < x->rt_end) {
        uint64_t left = c->rt_end[x->rt] - (x->off + run); /* (the cursor is at the entry holding the start) */
        if (left < lim) lim = left;
    }
    if (x->open && c->gst.n) {
        const pl_gbox *tb = &c->gst.v[c->gst.n - 1];
        const int64_t *t = tb->box;
        uint32_t e = nd, ndiff = 0;
        for (uint32_t f = 0; f < nd; f++)
            if (t[f] != lo[f]) e = f, ndiff++;
        int apart = ndiff != 1 || t[PL_ND + e] != lo[e];
        for (uint32_t f = 0; f < nd && !apart; f++)
            if (f != e && f != d && t[PL_ND + f] > hi[f]) apart = 1;
        if (!apart && e != d) {
            /* apart from runs that end before t does along d */
            if (t[PL_ND + d] - lo[d] <= 1) return 0;
            if ((uint64_t)(t[PL_ND + d] - 1 - lo[d]) * cross < lim) lim = (uint64_t)(t[PL_ND + d] - 1 - lo[d]) * cross;
        } else if (!apart) {
            for (uint32_t f = 0; f < nd; f++)
                if (f != d && t[PL_ND + f] != hi[f]) return 0;
            if (tb->bytes >= c->pmax) return 0;
            if (c->pmax - tb->bytes < lim) lim = c->pmax - tb->bytes;
            if (c->gst.n >= 2) {
                const int64_t *u = c->gst.v[c->gst.n - 2].box;
                if (u[d] == t[d] && u[PL_ND + d] > lo[d] && (uint64_t)(u[PL_ND + d] - lo[d]) * cross < lim)
                    lim = (uint64_t)(u[PL_ND + d] - lo[d]) * cross;
            }
        }
    }
    return lim;
}

/* grouped_chunks' whole: [lo, hi) (bytes, n fine boxes), after group_prep, when its fine boxes would all go
 * into the run (the room takes them; one round key: inside one entry of the round table, or for a relay,
 * fine boxes whose parent boxes arrived in rounds of one key: kend) and merge into it as one box (at most
 * pmax, the box below apart: gst_top_apart). The run's state ends as after their visits, which are skipped:
 * most of the fine boxes of DeepSeek-V3 (B), 6.7 M, are rejoined halves of slabs and slabs of one chunk. */
static int group_whole(fine_walk *w, const int64_t *lo, const int64_t *hi, uint64_t bytes, uint64_t n)
{
    group_walk *x = (group_walk *)w;
    pl_ctx *c = x->pw.c;
    uint32_t nd = w->nd;
    uint64_t run = x->open ? x->run : 0, room = x->open ? x->room : x->pend_room;
    if (bytes > c->pmax || run + bytes + ALIGN > room) return 0;
    if (n == UINT64_MAX) {
        int64_t l[PL_ND], h[PL_ND];
        memcpy(l, lo, sizeof l);
        memcpy(h, hi, sizeof h);
        n = fine_count(nd, w->es, w->pm, l, h);
    }
    if (x->pw.p->relay) {
        if (group_kleft(x) < n) return 0;
    } else if (x->rt < x->rt_end && c->rt_end[x->rt] < x->off + run + bytes) {
        return 0; /* may reach the next entry */
    }
    if (x->open && c->gst.n && !gst_top_apart(c->gst.v, c->gst.n, nd, lo, hi, bytes, c->pmax)) return 0;
    if (!x->open) {
        x->r = x->pend_r;
        x->room = x->pend_room;
        x->run = 0;
        x->open = 1;
        c->gst.n = 0;
    }
    group_shadow y;
    if (c->check_fine) group_check_whole(x, lo, hi, &y, 0);
    rs_assert(x->j + n <= UINT32_MAX);
    x->run += bytes;
    rs_vec_reserve(&c->gst, 1);
    c->gst.n = gst_push(c->gst.v, c->gst.n, nd, c->pmax, lo, hi, bytes, x->j);
    x->j += (uint32_t)n;
    if (c->check_fine) group_check_whole(x, lo, hi, &y, 1);
    return 1;
}

/* A part that spans round boundaries: fine sub-boxes (pfine), and consecutive ones with the same round key
 * (group_key) that together form a box go as one chunk (at most pmax): a round still overshoots its budget
 * by at most one fine box, with far fewer chunks (ops and descriptors). A relay of the part cuts the same
 * fine boxes and groups them by its parent's rounds, so it sends each group two rounds after it arrived
 * (DeepSeek-V3 relays with one chunk per fine box: 6.7 M chunks). Afterwards chunk_k holds the round of
 * every fine box (its group's latest), which is what this part's own relays read. */
static int grouped_chunks(pl_ctx *c, const pl_cell *cell, const pl_part *p, chunk_env *E, uint32_t fi, uint32_t wi)
{
    group_walk x;
    memset(&x, 0, sizeof x);
    x.pw = (part_walk){{cell->ndim, cell->es, c->pfine, group_visit, group_whole, group_prep, group_limit, 0, NULL, 0, 0, 0}, c, cell, p, E};
    x.off = c->fw_base[wi] + c->fw_run[wi];
    if (!p->relay) {
        x.rt = rt_index(c, fi, x.off);
        x.rt_end = c->rt_begin[fi + 1];
        rs_assert(c->rt_begin[fi] < x.rt_end);
    }
    if (p->relay && p->kmin_chunk) {
        /* kend from the last box back; the boxes past the parent's have key kmin */
        uint32_t nk = p->nkmin, *e;
        c->kend.n = 0;
        rs_vec_reserve(&c->kend, (size_t)nk + 1);
        e = c->kend.v;
        e[nk] = UINT32_MAX;
        uint32_t knext = p->kmin;
        for (uint32_t i = nk; i-- > 0;) {
            uint32_t k = key_at(&x, 0, i, NULL);
            e[i] = k == knext ? e[i + 1] : i + 1;
            knext = k;
        }
        x.kend = e;
        x.nkend = nk;
    }
    c->fine_k.n = 0;
    int rc = fine_walk_run(&x.pw.w, p->lo, p->hi);
    if (!rc && x.open) rc = group_flush(&x);
    c->chunk_k.n = 0;
    if (!rc) {
        rs_vec_reserve(&c->chunk_k, c->fine_k.n);
        memcpy(c->chunk_k.v, c->fine_k.v, c->fine_k.n * sizeof *c->fine_k.v);
        c->chunk_k.n = c->fine_k.n;
    }
    return rc;
}

static int part_pass3(pl_ctx *c, const pl_cell *cell, const pl_part *p)
{
    const rs_layout *L = c->L;
    chunk_env E;
    E.nf = 0;
    E.f = NULL;
    E.flocs = E.floc;
    uint32_t sgi = c->t->piece_begin + p->sslot, dgi = c->t->piece_begin + cell->dslot;
    const pl_bmap *sm;
    if (p->relay) {
        /* a relay reads its own destination block */
        sm = bmap_cached(c, cell->dslot, cell->dbase, cell->dlo, cell->dhi);
    } else {
        /* source map: the sender's block of its piece */
        uint32_t ci = 0;
        while (ci < cell->ncover && cell->cover_slot[ci] != p->sslot) ci++;
        rs_assert(ci < cell->ncover);
        uint32_t sbase = c->tp[p->sslot].pin_base;
        for (uint32_t d = 0; d < cell->ndim; d++) sbase += c->tp[p->sslot].lin[d][cell->cover_ks[ci][d]];
        uint64_t *v = pl_block_cache(c, p->sslot, sbase) + 2;
        sm = (const pl_bmap *)(uintptr_t)*v;
        if (!sm) {
            /* the block's extent only to build its map (once per tensor) */
            int64_t slo[PL_ND], shi[PL_ND];
            pl_block_of(c, p->sslot, cell->cover_ks[ci], slo, shi);
            sm = bmap_cached(c, p->sslot, sbase, slo, shi);
        }
    }
    if (!sm)
        return pl_fail(c, sgi, "tensor '%s': a block does not fill its box in buffer '%s' (element counts differ)",
                       c->t->name, L->buffers[L->pieces[sgi].buffer].name);
    const pl_bmap *dm = bmap_cached(c, cell->dslot, cell->dbase, cell->dlo, cell->dhi);
    if (!dm)
        return pl_fail(c, dgi, "tensor '%s': a block does not fill its box in buffer '%s' (element counts differ)",
                       c->t->name, L->buffers[L->pieces[dgi].buffer].name);
    E.sm = sm;
    E.dm = dm;
    if (p->kind != PL_LOCAL) {
        E.win = sender_window(c, p->s, sgi);
        /* pass 1 met the same parts in the same order */
        rs_assert(c->pseq < c->pflow.n);
        E.fi = c->pflow.v[c->pseq++];
        rs_assert(c->flows.v[E.fi].s == p->s && c->flows.v[E.fi].r == p->r && c->flows.v[E.fi].fset == p->key);
    }
    E.sloc = pl_binding_memo(c, p->s, L->pieces[sgi].buffer);
    E.dloc = pl_binding_memo(c, p->r, L->pieces[dgi].buffer);
    rs_assert(E.sloc != RS_NONE && E.dloc != RS_NONE);
    if (p->kind == PL_NET) {
        E.f = pl_intern_list(&c->fsets, p->fset, &E.nf);
        if (E.nf > 64) E.flocs = pl_alloc(&c->ar, E.nf * sizeof *E.flocs);
        for (uint32_t q = 0; q < E.nf; q++) {
            E.flocs[q] = pl_binding_memo(c, E.f[q], L->pieces[dgi].buffer);
            rs_assert(E.flocs[q] != RS_NONE);
        }
    }
    /* Chunk size: a part whose bytes all fall in one round of its flow goes in chunks as large as staging
     * allows (pmax); one that spans a round boundary in fine chunks (a chunk goes whole to the round of its
     * first byte, so fine chunks keep each round near its budget). A relay uses its parent's size. */
    uint64_t pm = c->pmax;
    c->chunk_kmin = 0;
    if (p->relay) {
        if (p->pm) pm = p->pm;
    } else if (p->kind != PL_LOCAL) {
        uint32_t fi = E.fi;
        uint32_t wi = c->flows.v[fi].win_base + E.win;
        uint64_t off = c->fw_base[wi] + c->fw_run[wi];
        if (off + p->bytes > flow_round_end(c, fi, off)) pm = c->pfine;
    }
    c->cur_pm = pm;
    if (p->kind == PL_LOCAL) {
        c->cur_chunk++;
        return emit_aligned(c, cell, p, &E, p->lo, p->hi);
    }
    /* fine chunks grouped by round (a relay of such a part: by its parent's rounds) */
    if (pm == c->pfine && pm < c->pmax)
        return grouped_chunks(c, cell, p, &E, E.fi, c->flows.v[E.fi].win_base + E.win);
    return chunks_of(c, cell, p, &E, p->lo, p->hi, pm, p->relay);
}

int pl_do_part(pl_ctx *c, const pl_cell *cell, const pl_part *p)
{
    if (p->kind == PL_LOCAL) return c->pass == 3 ? part_pass3(c, cell, p) : 0;
    uint8_t lane = p->kind == PL_NET ? RS_LANE_NET : RS_LANE_NVL;
    if (c->pass == 1) {
        if (p->s == RS_NONE) {
            /* several holders: the sender is chosen after pass 1 (LPT); its unit then is the piece it
             * holds: remember where the tensor's pieces begin */
            c->lpt.v[c->lpt.n - 1].unit = c->t->piece_begin;
            pl_prec rec = {(uint32_t)(c->lpt.n - 1) | PL_REC_LPT, 0, p->bytes};
            rs_vec_push(&c->precs, rec);
            rs_vec_push(&c->pflow, rec.flow);
            return 0;
        }
        uint32_t unit = c->t->piece_begin + p->sslot;
        sender_add(c, p->s, unit, p->bytes);
        uint32_t fi = flow_get(c, lane, p->s, p->r, p->key);
        rs_vec_push(&c->pflow, fi);
        size_t n = c->precs.n;
        if (n && c->precs.v[n - 1].flow == fi && c->precs.v[n - 1].unit == unit) {
            c->precs.v[n - 1].bytes += p->bytes;
        } else {
            pl_prec rec = {fi, unit, p->bytes};
            rs_vec_push(&c->precs, rec);
        }
        return 0;
    }
    rs_assert(c->pass == 3); /* pass 2 replays pass 1's records (pl_pass2) */
    return part_pass3(c, cell, p);
}

/* ---- between passes ---- */

static int flow_cmp_ctx(const void *a, const void *b, void *ctx)
{
    const pl_flow *f = ctx;
    const pl_flow *x = &f[*(const uint32_t *)a], *y = &f[*(const uint32_t *)b];
    if (x->r != y->r) return x->r < y->r ? -1 : 1;
    if (x->lane != y->lane) return x->lane < y->lane ? -1 : 1;
    return x->fset < y->fset ? -1 : x->fset > y->fset;
}

typedef struct {
    uint32_t unit;
    uint64_t bytes;
} unit_rec;

static int unit_cmp(const void *a, const void *b)
{
    const unit_rec *x = a, *y = b;
    return x->unit < y->unit ? -1 : x->unit > y->unit;
}

void pl_after_pass1(pl_ctx *c)
{
    /* parts with several holders: their chosen senders now send them */
    for (size_t i = 0; i < c->lpt.n; i++) {
        const pl_lpt *q = &c->lpt.v[i];
        uint32_t s = c->lpt_choice[q->seq], n;
        const uint32_t *cand = pl_intern_list(&c->cands, q->cand, &n);
        uint32_t slot = RS_NONE;
        for (uint32_t k = 0; k < n / 2; k++)
            if (cand[2 * k] == s) slot = cand[2 * k + 1];
        rs_assert(slot != RS_NONE);
        sender_add(c, s, q->unit + slot, q->bytes);
        uint32_t fi = flow_get(c, RS_LANE_NET, s, q->r, q->fset);
        c->lpt.v[i].flow = fi; /* for pass 2 */
        c->lpt.v[i].unit = q->unit + slot;
    }
    /* flows per sender, by receiver */
    for (size_t f = 0; f < c->flows.n; f++) rs_vec_push(&c->snd[c->flows.v[f].s].flows, (uint32_t)f);
    uint32_t nfw = 0;
    rs_vec(unit_rec) tmp = {0};
    for (uint32_t s = 0; s < c->world; s++) {
        pl_sender *x = &c->snd[s];
        if (!x->flows.n) continue;
        qsort_r(x->flows.v, x->flows.n, sizeof *x->flows.v, flow_cmp_ctx, c->flows.v);
        /* units sorted, duplicates added up */
        tmp.n = 0;
        for (size_t q = 0; q < x->unit.n; q++) {
            unit_rec u = {x->unit.v[q], x->ubytes.v[q]};
            rs_vec_push(&tmp, u);
        }
        if (tmp.n > 1) qsort(tmp.v, tmp.n, sizeof *tmp.v, unit_cmp);
        x->unit.n = x->ubytes.n = 0;
        x->total = 0;
        for (size_t q = 0; q < tmp.n; q++) {
            x->total += tmp.v[q].bytes;
            if (x->unit.n && x->unit.v[x->unit.n - 1] == tmp.v[q].unit) {
                x->ubytes.v[x->ubytes.n - 1] += tmp.v[q].bytes;
                continue;
            }
            rs_vec_push(&x->unit, tmp.v[q].unit);
            rs_vec_push(&x->ubytes, tmp.v[q].bytes);
        }
        /* windows: contiguous runs of units of about equal bytes, so that a round moves a tile of
         * (units x receivers) of balanced sides: W ~ sqrt(units x rounds / receivers) */
        double rounds = (double)x->total / (double)c->cs;
        double nb = (double)x->unit.n, nr = (double)x->flows.n;
        uint32_t W = 1;
        if (rounds > 1) {
            double w = 0;
            for (double g = 1; g * g <= nb * rounds / nr + 0.25 && g <= nb; g++) w = g;
            W = w < 1 ? 1 : (uint32_t)w;
        }
        x->win.n = 0;
        uint64_t cum = 0;
        uint32_t maxw = 0;
        for (size_t q = 0; q < x->unit.n; q++) {
            uint32_t wq = x->total ? (uint32_t)((__uint128_t)cum * W / x->total) : 0;
            if (wq >= W) wq = W - 1;
            rs_vec_push(&x->win, wq);
            if (wq > maxw) maxw = wq;
            cum += x->ubytes.v[q];
        }
        x->nwin = maxw + 1;
        for (size_t q = 0; q < x->flows.n; q++) {
            c->flows.v[x->flows.v[q]].win_base = nfw;
            nfw += x->nwin;
        }
    }
    rs_vec_free(&tmp);
    c->nfw = nfw;
    c->fw_bytes = rs_xcalloc(nfw + 1, sizeof *c->fw_bytes);
    c->fw_base = rs_xcalloc(nfw + 1, sizeof *c->fw_base);
    c->fw_run = rs_xcalloc(nfw + 1, sizeof *c->fw_run);
    c->last_flow_key = 0;
}

void pl_pass2(pl_ctx *c)
{
    c->pass = 2;
    uint32_t ls = RS_NONE, lu = RS_NONE, lw = 0;
    for (size_t i = 0; i < c->precs.n; i++) {
        const pl_prec *q = &c->precs.v[i];
        uint32_t fi = q->flow, unit = q->unit;
        if (fi & PL_REC_LPT) {
            const pl_lpt *l = &c->lpt.v[fi & ~PL_REC_LPT];
            fi = l->flow;
            unit = l->unit;
        }
        const pl_flow *fl = &c->flows.v[fi];
        if (fl->lane == RS_LANE_NET) c->st->rank_net_out[fl->s] += q->bytes;
        if (fl->s != ls || unit != lu) {
            ls = fl->s;
            lu = unit;
            lw = sender_window(c, ls, unit);
        }
        c->fw_bytes[fl->win_base + lw] += q->bytes;
    }
    rs_vec_free(&c->precs);
    /* the parts with several holders: their chosen sender's flow */
    for (size_t i = 0; i < c->pflow.n; i++)
        if (c->pflow.v[i] & PL_REC_LPT) c->pflow.v[i] = c->lpt.v[c->pflow.v[i] & ~PL_REC_LPT].flow;
    c->pseq = 0;
    pl_map_free(&c->flow_index);
    free(c->flow_first);
    c->flow_first = NULL;
}

/* Create the coalesced segments of every (flow, round) the senders' streams give, sorted by (round, kind
 * (forward set and class), sender, receiver): then every step's out list runs by kind and receiver and
 * its in lists by kind and sender, so the packs of one buffer for consecutive receivers, and the unpacks
 * of consecutive senders into one stacked buffer, are consecutive equally sized items that merge into
 * one op each. */
typedef struct {
    uint32_t k, key, s, r, flow, rt; /* rt: the round table entry */
} pre_rec;

/* Flows by (key, sender, receiver, id): the order of a round's segments. */
static int pre_flow_cmp(const void *a, const void *b, void *ctx)
{
    const pl_flow *f = ctx;
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    const pl_flow *x = &f[i], *y = &f[j];
    if (x->fset != y->fset) return x->fset < y->fset ? -1 : 1;
    if (x->s != y->s) return x->s < y->s ? -1 : 1;
    if (x->r != y->r) return x->r < y->r ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* seg_precreate's records [i0, i1) with the ids given */
typedef struct {
    pl_ctx *c;
    const pre_rec *v;
    size_t i0, i1;
    seg_ids ids;
} pre_half;

static void *pre_half_run(void *arg)
{
    pre_half *h = arg;
    uint32_t id = 0;
    for (size_t i = h->i0; i < h->i1; i++) {
        const pre_rec *x = &h->v[i];
        if (i == h->i0 || x->flow != h->v[i - 1].flow || x->k != h->v[i - 1].k)
            id = seg_make(h->c, x->flow, x->k, RS_NONE, &h->ids);
        h->c->rt_seg[x->rt] = id;
    }
    return NULL;
}

/* A step builder key (rank, lane) in round k: new when it was last seen in an earlier round (the records go
 * by round). last: round + 1 of each key's last sighting. */
static inline void key_seen(uint32_t *last, uint32_t rank, uint8_t lane, uint32_t k, uint32_t *n)
{
    uint32_t *x = &last[(size_t)rank * 2 + lane];
    if (*x != k + 1) *x = k + 1, (*n)++;
}

/* The segments of records v[0..n) made on two threads, the second taking the rounds from the middle on: the
 * segments, forwarded copies and step builders of the first half are counted in advance, so each half
 * gives them the ids one thread would (the second half's start where the first half's end), and the
 * slots of every rank_steps vector are made first. A step builder's items all come from its own round, so
 * from one half, in the order one thread pushes them: the plan is the same. 0 when it is not worth a thread
 * (or the vectors are not empty, as they are here): the caller makes them on its own. */
#define PRE_TWO_MIN 65536
static int seg_precreate_two(pl_ctx *c, const pre_rec *v, size_t n)
{
    if (n < 2 || rs_threads(n, PRE_TWO_MIN) < 2 || c->segs.n || c->insts.n || c->steps.n) return 0;
    size_t h = n / 2;
    while (h < n && v[h].k == v[h - 1].k) h++;
    if (h == n) return 0;
    uint32_t *last = rs_xcalloc((size_t)c->world * 2 + 1, sizeof *last);
    uint32_t nseg[2] = {0, 0}, ninst[2] = {0, 0}, nsb[2] = {0, 0};
    for (size_t i = 0; i < n; i++) {
        if (i && v[i].flow == v[i - 1].flow && v[i].k == v[i - 1].k) continue;
        int b = i >= h;
        const pl_flow *fl = &c->flows.v[v[i].flow];
        uint32_t nf, k = v[i].k;
        const uint32_t *f = pl_intern_list(&c->fsets, PL_KEY_FSET(fl->fset), &nf);
        nseg[b]++;
        ninst[b] += nf;
        key_seen(last, fl->s, fl->lane, k, &nsb[b]);
        key_seen(last, fl->r, fl->lane, k, &nsb[b]);
        if (nf) key_seen(last, fl->r, RS_LANE_NVL, k, &nsb[b]);
        for (uint32_t q = 0; q < nf; q++) key_seen(last, f[q], RS_LANE_NVL, k, &nsb[b]);
    }
    rs_vec_reserve(&c->segs, nseg[0] + nseg[1]);
    rs_vec_reserve(&c->insts, ninst[0] + ninst[1]);
    rs_vec_reserve(&c->steps, nsb[0] + nsb[1]);
    for (size_t x = 0; x < (size_t)c->world * 2; x++) {
        pl_u32vec *rv = &c->rank_steps[x];
        if (!last[x]) continue;
        rs_vec_reserve(rv, last[x]);
        for (; rv->n < last[x]; rv->n++) rv->v[rv->n] = RS_NONE;
    }
    free(last);
    pre_half a = {c, v, 0, h, {0, 0, 0, 0}}, b = {c, v, h, n, {nseg[0], ninst[0], nsb[0], 0}};
    pthread_t th;
    __atomic_store_n(&c->blocksrc->shared, 1, __ATOMIC_RELAXED); /* (both carve item lists from the pools) */
    int two = !rs_thread_start(&th, pre_half_run, &b);
    pre_half_run(&a);
    if (two) pthread_join(th, NULL);
    else pre_half_run(&b);
    __atomic_store_n(&c->blocksrc->shared, 0, __ATOMIC_RELAXED);
    rs_assert(a.ids.seg == nseg[0] && a.ids.inst == ninst[0] && a.ids.sb == nsb[0]);
    rs_assert(b.ids.seg == nseg[0] + nseg[1] && b.ids.inst == ninst[0] + ninst[1] && b.ids.sb == nsb[0] + nsb[1]);
    c->segs.n = b.ids.seg;
    c->insts.n = b.ids.inst;
    c->steps.n = b.ids.sb;
    if (a.ids.nrounds > c->nrounds) c->nrounds = a.ids.nrounds;
    if (b.ids.nrounds > c->nrounds) c->nrounds = b.ids.nrounds;
    return 1;
}

static void seg_precreate(pl_ctx *c)
{
    /* The records sorted by (round, key, sender, receiver, flow): the flows sorted once by the last four,
     * then their records distributed by round (a stable counting sort), instead of sorting the records
     * (half a million on Qwen3-235B). */
    uint32_t nfl = (uint32_t)c->flows.n;
    uint32_t *ford = rs_xmalloc((nfl + 1) * sizeof *ford);
    for (uint32_t f = 0; f < nfl; f++) ford[f] = f;
    if (nfl > 1) qsort_r(ford, nfl, sizeof *ford, pre_flow_cmp, c->flows.v);
    uint32_t nk = 0;
    size_t nrec = 0;
    for (uint32_t f = 0; f < nfl; f++)
        for (uint32_t i = c->rt_begin[f]; i < c->rt_begin[f + 1]; i++) {
            if (i > c->rt_begin[f] && c->rt_round[i] == c->rt_round[i - 1]) continue;
            if (c->rt_round[i] + 1 > nk) nk = c->rt_round[i] + 1;
            nrec++;
        }
    size_t *kat = rs_xcalloc((size_t)nk + 1, sizeof *kat);
    for (uint32_t f = 0; f < nfl; f++)
        for (uint32_t i = c->rt_begin[f]; i < c->rt_begin[f + 1]; i++) {
            if (i > c->rt_begin[f] && c->rt_round[i] == c->rt_round[i - 1]) continue;
            kat[c->rt_round[i] + 1]++;
        }
    for (uint32_t k = 0; k < nk; k++) kat[k + 1] += kat[k];
    rs_vec(pre_rec) v = {0};
    rs_vec_reserve(&v, nrec);
    v.n = nrec;
    for (uint32_t q = 0; q < nfl; q++) {
        uint32_t f = ford[q];
        const pl_flow *fl = &c->flows.v[f];
        for (uint32_t i = c->rt_begin[f]; i < c->rt_begin[f + 1]; i++) {
            if (i > c->rt_begin[f] && c->rt_round[i] == c->rt_round[i - 1]) continue;
            pre_rec r = {c->rt_round[i], fl->fset, fl->s, fl->r, f, i};
            v.v[kat[r.k]++] = r;
        }
    }
    free(kat);
    free(ford);
    /* Room for the segments and forwarded copies made here and (about a tenth more, on the examples) in
     * pass 3, and for about as many step builders as segments: grown by doubling, each of these vectors was
     * copied several times over (B: this took 0.26-0.41 s, now 0.15-0.32) */
    size_t ninst = 0;
    for (size_t i = 0; i < v.n; i++) {
        if (i && v.v[i].flow == v.v[i - 1].flow && v.v[i].k == v.v[i - 1].k) continue;
        uint32_t nf;
        (void)pl_intern_list(&c->fsets, PL_KEY_FSET(c->flows.v[v.v[i].flow].fset), &nf);
        ninst += nf;
    }
    rs_vec_reserve(&c->segs, v.n + v.n / 8);
    rs_vec_reserve(&c->insts, ninst + ninst / 8);
    rs_vec_reserve(&c->steps, v.n);
    uint32_t nrt = c->rt_begin[c->flows.n];
    c->rt_seg = rs_xmalloc((nrt + 1) * sizeof *c->rt_seg);
    if (!seg_precreate_two(c, v.v, v.n)) {
        uint32_t id = 0;
        for (size_t i = 0; i < v.n; i++) {
            if (!i || v.v[i].flow != v.v[i - 1].flow || v.v[i].k != v.v[i - 1].k) {
                id = seg_new(c, v.v[i].flow, v.v[i].k, RS_NONE);
            }
            c->rt_seg[v.v[i].rt] = id;
        }
    }
    /* entries that continue the previous entry's round share its segment */
    for (uint32_t f = 0; f < (uint32_t)c->flows.n; f++)
        for (uint32_t i = c->rt_begin[f] + 1; i < c->rt_begin[f + 1]; i++)
            if (c->rt_round[i] == c->rt_round[i - 1]) c->rt_seg[i] = c->rt_seg[i - 1];
    rs_vec_free(&v);
}

/* ---- rounds: every flow's bytes filled into rounds of balanced links ----
 *
 * A round is one NET step and one NVL step on every rank involved, ended by the slowest message of the
 * step; a round therefore costs what its busiest link carries. The senders' streams (window by window,
 * receivers in a rotation that starts at a different receiver for every sender) are walked in the order
 * their bytes would leave at full rate (stream offset, then sender), and each piece of a flow goes to the
 * earliest rounds in which both its sender's out-budget and its receiver's in-budget (c->cs per lane)
 * have room, splitting across rounds as needed: every round moves at most one budget through every NIC
 * and no NIC waits for a round that is full elsewhere. Slivers below a sixteenth of the budget are not
 * cut off a piece that is larger (each costs a message of its own). */

typedef struct {
    uint64_t at;
    uint32_t s, flow, r, wi; /* wi: the (flow, window) entry of the fw arrays */
    uint8_t lane;
} fill_item;

/* The k-way merge's heap: each sender's run by the offset of its next item, then by run (runs are made in
 * sender order). The key is in the node: comparing through the run's position and item was two dependent
 * loads per comparison, a fifth of the 2.5 T MoE's fill_rounds. */
typedef struct {
    uint64_t at;
    uint32_t run;
} fill_node;

static inline int fill_less(const fill_node *x, const fill_node *y)
{
    return x->at < y->at || (x->at == y->at && x->run < y->run);
}

static void fill_sift(fill_node *heap, uint32_t n, uint32_t i)
{
    fill_node x = heap[i];
    for (;;) {
        uint32_t l = 2 * i + 1, m = l;
        if (l >= n) break;
        if (l + 1 < n && fill_less(&heap[l + 1], &heap[l])) m = l + 1;
        if (!fill_less(&heap[m], &x)) break;
        heap[i] = heap[m];
        i = m;
    }
    heap[i] = x;
}

typedef struct {
    pl_u64vec v; /* bytes per round */
    uint32_t first; /* no round below it has room for a sliver */
    pl_u32vec nx; /* rounds without room for a sliver point past themselves (union-find; nx[k] == k, or k
                     past the end: room) */
} round_load;

static uint64_t rl_at(const round_load *l, uint32_t k) { return k < l->v.n ? l->v.v[k] : 0; }

/* The first round from k on with room for a sliver (loads only grow, so a round that lost it never gets
 * it back). */
static uint32_t rl_room(round_load *l, uint32_t k)
{
    uint32_t r = k, n = (uint32_t)l->nx.n;
    while (r < n && l->nx.v[r] != r) r = l->nx.v[r];
    while (k < n && l->nx.v[k] != k) {
        uint32_t p = l->nx.v[k];
        l->nx.v[k] = r;
        k = p;
    }
    return r;
}

static void rl_add(round_load *l, uint32_t k, uint64_t b, uint64_t C, uint64_t sliver)
{
    while (l->v.n <= k) rs_vec_push(&l->v, 0);
    l->v.v[k] += b;
    if (C - (l->v.v[k] < C ? l->v.v[k] : C) < sliver) {
        while (l->nx.n <= k) {
            uint32_t self = (uint32_t)l->nx.n;
            rs_vec_push(&l->nx, self);
        }
        l->nx.v[k] = k + 1;
    }
}

typedef struct {
    uint32_t flow, round;
    uint64_t end;
} fill_rec;

#define FILL_AHEAD 8
static void fill_rounds(pl_ctx *c)
{
    /* stream order of every (flow, window) */
    rs_vec(fill_item) gen = {0};
    uint32_t nsenders = 0;
    for (uint32_t s = 0; s < c->world; s++)
        if (c->snd[s].flows.n) nsenders++;
    uint32_t *run_end = rs_xmalloc((nsenders + 1) * sizeof *run_end);
    uint32_t *pos = rs_xmalloc((nsenders + 1) * sizeof *pos);
    uint32_t ord = 0, nruns = 0;
    for (uint32_t s = 0; s < c->world; s++) {
        pl_sender *x = &c->snd[s];
        if (!x->flows.n) continue;
        uint32_t nr = (uint32_t)x->flows.n;
        uint32_t phi = (uint32_t)((uint64_t)ord * nr / nsenders);
        ord++;
        uint64_t cur = 0;
        size_t first = gen.n;
        for (uint32_t w = 0; w < x->nwin; w++)
            for (uint32_t q = 0; q < nr; q++) {
                uint32_t f = x->flows.v[(phi + q) % nr];
                const pl_flow *fl = &c->flows.v[f];
                uint64_t n = c->fw_bytes[fl->win_base + w];
                if (!n || (fl->fset & PL_KEY_RELAY)) continue; /* relays: rounds set in pass 3 */
                fill_item it = {cur, s, f, fl->r, fl->win_base + w, fl->lane};
                rs_vec_push(&gen, it);
                cur += n;
            }
        if (gen.n > first) {
            pos[nruns] = (uint32_t)first;
            run_end[nruns++] = (uint32_t)gen.n;
        }
    }
    /* Stream order: by offset, then sender. A sender's items have strictly increasing offsets and the
     * runs are by sender, so a k-way merge of the runs gives it (glibc's qsort of the items took 0.1 s
     * on Qwen3-235B). */
    rs_vec(fill_item) items = {0};
    rs_vec_reserve(&items, gen.n);
    {
        fill_node *heap = rs_xmalloc((nruns + 1) * sizeof *heap);
        uint32_t nh = nruns;
        for (uint32_t i = 0; i < nruns; i++) heap[i] = (fill_node){gen.v[pos[i]].at, i};
        for (uint32_t i = nh / 2; i-- > 0;) fill_sift(heap, nh, i);
        while (nh) {
            uint32_t a = heap[0].run;
            items.v[items.n++] = gen.v[pos[a]++];
            if (pos[a] == run_end[a]) heap[0] = heap[--nh];
            else heap[0].at = gen.v[pos[a]].at;
            fill_sift(heap, nh, 0);
        }
        free(heap);
    }
    rs_vec_free(&gen);
    free(run_end);
    free(pos);

    uint64_t C = c->cs, sliver = C / 16 ? C / 16 : 1;
    size_t nl = (size_t)c->world * 4; /* (lane, out/in, rank) */
    round_load *load = rs_xcalloc(nl, sizeof *load);
    uint64_t *fofs = rs_xcalloc(c->flows.n + 1, sizeof *fofs);
    rs_vec(fill_rec) recs = {0};
    for (size_t i = 0; i < items.n; i++) {
        const fill_item *it = &items.v[i];
        if (i + FILL_AHEAD < items.n) {
            /* the arrays by flow and by (flow, window) are read at random (stream order): a fifth of the 2.5 T
             * MoE's fill_rounds waited for them */
            const fill_item *ah = &items.v[i + FILL_AHEAD];
            __builtin_prefetch(&c->fw_bytes[ah->wi]);
            __builtin_prefetch(&c->fw_base[ah->wi], 1);
            __builtin_prefetch(&fofs[ah->flow], 1);
            __builtin_prefetch(&load[((size_t)ah->lane * 2 + 1) * c->world + ah->r]);
        }
        round_load *o = &load[((size_t)it->lane * 2 + 0) * c->world + it->s];
        round_load *n = &load[((size_t)it->lane * 2 + 1) * c->world + it->r];
        uint32_t wi = it->wi;
        uint64_t rem = c->fw_bytes[wi];
        c->fw_base[wi] = fofs[it->flow];
        uint32_t k = o->first > n->first ? o->first : n->first;
        for (; rem; k++) {
            if (rem >= sliver) {
                /* the first round from k on where both links have room for a sliver (what the scan
                 * below finds for such a piece), skipping full rounds (a receiver fed by many senders
                 * has many: Qwen3-235B scanned 70 rounds per piece) */
                for (uint32_t k2;;) {
                    k = rl_room(o, k);
                    if ((k2 = rl_room(n, k)) == k) break;
                    k = k2;
                }
            }
            uint64_t lo = rl_at(o, k), li = rl_at(n, k);
            uint64_t ao = lo < C ? C - lo : 0, ai = li < C ? C - li : 0, av = ao < ai ? ao : ai;
            if (!av || av < (rem < sliver ? rem : sliver)) continue;
            uint64_t t = av < rem ? av : rem;
            rl_add(o, k, t, C, sliver);
            rl_add(n, k, t, C, sliver);
            fofs[it->flow] += t;
            rem -= t;
            size_t m = recs.n;
            if (m && recs.v[m - 1].flow == it->flow && recs.v[m - 1].round == k) {
                recs.v[m - 1].end = fofs[it->flow];
            } else {
                fill_rec r = {it->flow, k, fofs[it->flow]};
                rs_vec_push(&recs, r);
            }
        }
        while (C - (rl_at(o, o->first) < C ? rl_at(o, o->first) : C) < sliver) o->first++;
        while (C - (rl_at(n, n->first) < C ? rl_at(n, n->first) : C) < sliver) n->first++;
    }
    /* round tables per flow (records of one flow are in offset order already) */
    c->rt_begin = rs_xcalloc(c->flows.n + 2, sizeof *c->rt_begin);
    for (size_t i = 0; i < recs.n; i++) c->rt_begin[recs.v[i].flow + 1]++;
    for (size_t f = 0; f < c->flows.n; f++) c->rt_begin[f + 1] += c->rt_begin[f];
    c->rt_end = rs_xmalloc((recs.n + 1) * sizeof *c->rt_end);
    c->rt_round = rs_xmalloc((recs.n + 1) * sizeof *c->rt_round);
    uint32_t *at = rs_xmalloc((c->flows.n + 1) * sizeof *at);
    memcpy(at, c->rt_begin, c->flows.n * sizeof *at);
    for (size_t i = 0; i < recs.n; i++) {
        uint32_t j = at[recs.v[i].flow]++;
        c->rt_end[j] = recs.v[i].end;
        c->rt_round[j] = recs.v[i].round;
    }
    free(at);
    for (size_t i = 0; i < nl; i++) {
        rs_vec_free(&load[i].v);
        rs_vec_free(&load[i].nx);
    }
    free(load);
    free(fofs);
    rs_vec_free(&recs);
    rs_vec_free(&items);
}

static void done_order_init(pl_ctx *c);

void pl_after_pass2(pl_ctx *c)
{
    /* Bytes per round of a sender's stream: a rank's staging per round carries what it sends, receives
     * and gets forwarded; with R rounds in all, each rank's average stays at 85% of a half, so receivers
     * fed by several senders at once rarely overflow (an overflowing chunk waits for a later round, in a
     * segment of its own that merges with nothing). */
    {
        uint64_t *T = rs_xcalloc((size_t)c->world * 5, sizeof *T), *link = T + c->world; /* (lane, out/in, rank) */
        uint64_t smax = 0, tmax = 0;
        for (size_t f = 0; f < c->flows.n; f++) {
            const pl_flow *fl = &c->flows.v[f];
            uint64_t b = 0;
            for (uint32_t w = 0; w < c->snd[fl->s].nwin; w++) b += c->fw_bytes[fl->win_base + w];
            T[fl->s] += b;
            T[fl->r] += b;
            uint32_t nf;
            const uint32_t *fs = pl_intern_list(&c->fsets, PL_KEY_FSET(fl->fset), &nf);
            for (uint32_t q = 0; q < nf; q++) T[fs[q]] += b;
            link[((size_t)fl->lane * 2 + 0) * c->world + fl->s] += b;
            link[((size_t)fl->lane * 2 + 1) * c->world + fl->r] += b;
        }
        /* smax: the busiest link, a sender's or a receiver's NIC on either lane, relays included (they take
         * the rounds after their arrival, outside the fill, but through the same NICs; with 1024 senders
         * and 512 receivers, as on the 2.5 T MoE, the receivers carry twice a sender's bytes: a budget
         * from the senders' bytes took twice the R rounds meant, 1381 instead of about 690) */
        for (uint32_t r = 0; r < c->world; r++)
            if (T[r] > tmax) tmax = T[r];
        for (size_t i = 0; i < (size_t)c->world * 4; i++)
            if (link[i] > smax) smax = link[i];
        free(T);
        uint64_t room = c->half / 20 * 17;
        uint64_t R = (smax + c->cs - 1) / c->cs;
        uint64_t R2 = (tmax + room - 1) / room;
        if (R2 > R) R = R2;
        if (R && smax) {
            uint64_t cs = (smax + R - 1) / R;
            if (cs < c->pmax) cs = c->pmax;
            if (cs < c->cs) c->cs = cs;
        }
        /* chunks: a 32nd of a round's budget (a chunk goes whole to the round its first byte falls in, so
         * a round's links carry their budget to within a chunk), but not below the zero-copy size */
        uint64_t pm = (c->cs / 32) & ~(uint64_t)15;
        if (pm < c->o->zero_copy_min) pm = (c->o->zero_copy_min + 15) & ~(uint64_t)15;
        if (pm < c->o->fine_min) pm = (c->o->fine_min + 15) & ~(uint64_t)15;
        c->pfine = pm < c->pmax ? pm : c->pmax;
    }
    fill_rounds(c);
    c->last_flow_key = 0;
    c->rank_steps = rs_xcalloc((size_t)c->world * 2, sizeof *c->rank_steps);
    c->local_step = rs_xmalloc(c->world * sizeof *c->local_step);
    for (uint32_t r = 0; r < c->world; r++) c->local_step[r] = RS_NONE;
    c->usage = rs_xcalloc(c->world, sizeof *c->usage);
    c->popool = rs_xcalloc(c->world, sizeof *c->popool);
    c->blocksrc = blocksrc_new();
    wide_only = getenv("RESHARD_CHECK_WIDE") != NULL;
    for (uint32_t r = 0; r < c->world; r++) c->popool[r].src = c->blocksrc;
    done_order_init(c);
    seg_precreate(c);
    adder_start(c);
}

/* ---- finalize: staging layout, messages, waits, resolved ops ---- */

typedef struct {
    rs_vec(rs_op) ops;
    rs_rank_prog *g; /* put_op writes the descriptors straight into g's packed pool (pl_ctx.dscr) */
    rs_vec(rs_step) steps;
    rs_vec(uint32_t) waits;
    uint64_t *dtab; /* by content (open addressing): hash << 32 | descriptor index + 1; ops share equal ones */
    uint32_t dmask;
    int ops_in_block; /* ops.v was reserved in the plan's blocks (build_rank), where it must not be realloc'd */
} prog_out;

/* Room for one more op. The reserve bounds the ops a rank resolves to; were it ever short, the ops move
 * out of the block into memory that can grow. */
static inline rs_op *op_slot(prog_out *o)
{
    if (o->ops_in_block && o->ops.n == o->ops.cap) {
        rs_op *v = rs_xmalloc(2 * o->ops.cap * sizeof *v);
        memcpy(v, o->ops.v, o->ops.n * sizeof *v);
        o->ops.v = v;
        o->ops.cap *= 2;
        o->ops_in_block = 0;
    }
    rs_vec_reserve(&o->ops, 1);
    return &o->ops.v[o->ops.n++];
}

/* Hash of a packed descriptor's n words. */
static uint64_t desc_hash(const uint64_t *w, uint32_t n)
{
    uint64_t h = w[0] * 0x9e3779b97f4a7c15ull ^ w[1] * 0xc2b2ae3d27d4eb4full;
    for (uint32_t i = 2; i < n; i += 2) {
        h = (h ^ w[i]) * 0x9e3779b97f4a7c15ull;
        h = (h ^ w[i + 1]) * 0xc2b2ae3d27d4eb4full;
    }
    return h ^ h >> 29;
}

static uint32_t desc_words(const uint64_t *w) { return 2 + 2 * (uint32_t)(w[0] >> 32); }

static void dtab_insert(prog_out *o, uint32_t idx)
{
    const uint64_t *w = o->g->dpool + o->g->doff[idx];
    uint64_t h = desc_hash(w, desc_words(w));
    uint32_t j = (uint32_t)h & o->dmask;
    while (o->dtab[j]) j = (j + 1) & o->dmask;
    o->dtab[j] = (h & ~(uint64_t)UINT32_MAX) | (idx + 1);
}

/* An empty interning table of cap slots: written before it is read (calloc's fresh pages are the shared
 * zero page until written, and the first write after a probe read copied it and flushed every CPU's TLB:
 * a tenth of DeepSeek-V3/GB200's last builds in those flushes, with the pool's). */
static uint64_t *dtab_new(uint32_t cap)
{
    uint64_t *t = rs_xmalloc((size_t)cap * sizeof *t);
    memset(t, 0, (size_t)cap * sizeof *t);
    return t;
}

/* The index of a descriptor equal to the one just written (packed, n words) past the end of the program's
 * pool, or the new one's (then it is kept). Packing the same source region for several receivers (an
 * expert's rows for every engine that needs them) gave half of DeepSeek-V3's descriptors twice or more.
 * (Descriptors were interned as whole rs_desc values and packed afterwards: written twice, 144 bytes each.) */
static uint32_t desc_intern(prog_out *o, uint32_t n)
{
    rs_rank_prog *g = o->g;
    uint32_t idx = g->ndescs;
    if (2 * ((size_t)idx + 1) > (size_t)o->dmask) { /* (build_rank sized it for two an op: splits may need more) */
        uint32_t cap = 2 * (o->dmask + 1);
        while (2 * ((size_t)idx + 1) > cap - 1) cap *= 2;
        free(o->dtab);
        o->dtab = dtab_new(cap);
        o->dmask = cap - 1;
        for (uint32_t i = 0; i < idx; i++) dtab_insert(o, i);
    }
    const uint64_t *w = g->dpool + g->dpool_n;
    /* the hash's high half is kept with the index: only a likely match reads the other descriptor */
    uint64_t h = desc_hash(w, n), hi = h & ~(uint64_t)UINT32_MAX;
    for (uint32_t j = (uint32_t)h & o->dmask;; j = (j + 1) & o->dmask) {
        uint64_t e = o->dtab[j];
        if (!e) {
            o->dtab[j] = hi | (idx + 1);
            rs_assert(g->dpool_n + n < UINT32_MAX);
            g->doff[idx] = (uint32_t)g->dpool_n;
            g->dpool_n += n;
            g->ndescs++;
            return idx;
        }
        uint32_t k = (uint32_t)e - 1;
        const uint64_t *x = g->dpool + g->doff[k];
        if ((e & ~(uint64_t)UINT32_MAX) == hi && x[0] == w[0] && !memcmp(x + 1, w + 1, (n - 1) * sizeof *w))
            return k;
    }
}

typedef struct {
    uint32_t peer, kind, key;
    uint32_t loc;
    uint64_t off, bytes;
    uint32_t tensor;
} msg;

typedef rs_vec(msg) msg_vec;

static int msg_cmp(const void *a, const void *b)
{
    const msg *x = a, *y = b;
    if (x->peer != y->peer) return x->peer < y->peer ? -1 : 1;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* Sort a step's messages by msg_cmp: in place when they are nearly in order (most are: segments are made
 * in (round, forward set, sender, receiver) order), else by qsort. (peer, kind, key) is unique within a
 * step, so both give the one order. qsort's calls were 1 % of issue 3's compile. */
static void msgs_sort(msg_vec *v)
{
    size_t moves = 0;
    for (size_t i = 1; i < v->n; i++) {
        if (msg_cmp(&v->v[i - 1], &v->v[i]) <= 0) continue;
        if (++moves > 16) {
            qsort(v->v, v->n, sizeof *v->v, msg_cmp);
            return;
        }
        msg x = v->v[i];
        size_t j = i;
        for (; j > 0 && msg_cmp(&v->v[j - 1], &x) > 0; j--) v->v[j] = v->v[j - 1];
        v->v[j] = x;
    }
}

/* Staging offset of item i of a step list (out: the seg's sender base; in: receiver or instance base). */
static uint64_t item_base(const pl_ctx *c, const pl_stepb *b, int out, int64_t i)
{
    if (out) return c->segs.v[b->out.v[i]].sbase;
    uint64_t it = b->in.v[i];
    if (it & 1) return c->insts.v[it >> 1].base;
    return c->segs.v[it >> 1].rbase;
}

static void desc_check_ok(const pl_pop *p, int side, int *ok, int loose)
{
    const uint32_t *cnt = pl_pcnt_c(p, side);
    const uint64_t *str = pl_pstr_c(p, side);
    uint32_t nd = p->nd[side];
    if (loose) {
        for (uint32_t i = 0; i + 1 < nd; i++)
            if (cnt[i] > 1 && (int64_t)str[i] < 0) *ok = 0;
        return;
    }
    uint64_t span = cnt[nd - 1];
    for (int i = (int)nd - 2; i >= 0; i--) {
        if (cnt[i] > 1) {
            if ((int64_t)str[i] < 0 || str[i] < span) {
                *ok = 0;
                return;
            }
            span = (cnt[i] - 1) * str[i] + span;
        }
    }
}

/* A lane's steps in a rank's program by round: le[k] is the program index of its latest step of round k or
 * earlier (-1: none); a step of round k exists when le[k] differs from le[k - 1]. Rounds are set in
 * increasing order. (The waits looked for the latest step before a round by walking back over the rounds:
 * 0.9 G steps of that walk on the 2.5 T MoE.) */
typedef struct {
    rs_vec(int32_t) le;
} round_prog;

static void rp_set(round_prog *p, uint32_t k, int32_t step)
{
    rs_assert(p->le.n <= k);
    while (p->le.n <= k) {
        int32_t last = p->le.n ? p->le.v[p->le.n - 1] : -1;
        rs_vec_push(&p->le, last);
    }
    p->le.v[k] = step;
}

/* The program index of the lane's latest step of round j or earlier, -1 when none. */
static int32_t rp_latest(const round_prog *p, int64_t j)
{
    if (j < 0 || !p->le.n) return -1;
    return p->le.v[(size_t)j < p->le.n ? (size_t)j : p->le.n - 1];
}

static void rp_free(round_prog *p) { rs_vec_free(&p->le); }

static void put_op(prog_out *o, const pl_pop *p)
{
    /* written in place: the arrays were reserved for the rank's program (build_rank) */
    rs_op *op = op_slot(o);
    memset(op, 0, sizeof *op);
    op->code = p->code;
    op->tensor = p->tensor;
    rs_rank_prog *g = o->g;
    for (int sd = 0; sd < 2; sd++) {
        uint32_t nd = p->nd[sd], n = 2 + 2 * nd;
        if (g->ndescs + 1 > g->dcap || g->dpool_n + n > g->dpool_cap) rs_prog_desc_reserve(g, 1, n);
        uint64_t *w = g->dpool + g->dpool_n; /* (common/plan.h's packing) */
        w[0] = p->loc[sd] | (uint64_t)nd << 32;
        w[1] = p->off[sd];
        const uint32_t *cnt = pl_pcnt_c(p, sd);
        const uint64_t *str = pl_pstr_c(p, sd);
        for (uint32_t i = 0; i < nd; i++) {
            w[2 + 2 * i] = cnt[i];
            w[3 + 2 * i] = str[i];
        }
        *(sd ? &op->dst : &op->src) = desc_intern(o, n);
    }
    uint64_t bytes = p->nd[0] ? 1 : 0; /* (rs_desc_bytes of the source) */
    for (uint32_t i = 0; i < p->nd[0]; i++)
        if (rs_umul_ovf(bytes, p->cnt[i], &bytes)) {
            bytes = UINT64_MAX;
            break;
        }
    op->bytes = bytes;
}

/* Drop dim k of both sides (the outer dims are merged ones, shared by the sides), stepping to index i of it. */
static void pop_take_dim(pl_pop *s, const pl_pop *p, uint32_t k, uint64_t i)
{
    *s = *p;
    uint32_t n0 = p->nd[0], n1 = p->nd[1];
    s->off[0] += i * p->str[k];
    s->off[1] += i * p->str[n0 + k];
    uint32_t cnt[PL_PT];
    uint64_t str[PL_PT];
    uint32_t n = 0;
    for (uint32_t j = 0; j < n0 + n1; j++) {
        if (j == k || j == n0 + k) continue;
        cnt[n] = p->cnt[j];
        str[n] = p->str[j];
        n++;
    }
    memcpy(s->cnt, cnt, n * sizeof cnt[0]);
    memcpy(s->str, str, n * sizeof str[0]);
    if (p->sym) memmove(s->dl + k, s->dl + k + 1, (p->nd[p->sym - 1] - k - 1) * sizeof s->dl[0]);
    s->nd[0]--;
    s->nd[1]--;
    s->item = p->item + (int32_t)(i * (uint64_t)(int64_t)p->dl[k]);
}

/* Resolve the staging side of p (items -> offsets); split along dims whose items are not evenly spaced. */
static void resolve(const pl_ctx *c, const pl_stepb *b, const pl_pop *p, prog_out *o)
{
    if (!p->sym) {
        put_op(o, p);
        return;
    }
    int side = p->sym - 1, out = p->code == RS_OP_PACK;
    const uint32_t *cnt = pl_pcnt_c(p, side);
    const uint64_t *str = pl_pstr_c(p, side);
    /* dims stepping through items */
    uint32_t nd = p->nd[side];
    int any = 0;
    for (uint32_t i = 0; i < nd; i++)
        if (p->dl[i]) any = 1;
    pl_pop q = *p;
    uint64_t b0 = item_base(c, b, out, p->item);
    if (!any) {
        q.off[side] = b0 + p->off[side];
        q.sym = 0;
        int ok = 1;
        desc_check_ok(&q, side, &ok, c->o->strided_reads && side == 0);
        rs_assert(ok);
        put_op(o, &q);
        return;
    }
    /* actual strides from the first step of every item dim; check every combination */
    int ok = 1;
    uint64_t strides[PL_PD];
    for (uint32_t i = 0; i < nd; i++) {
        strides[i] = str[i];
        if (p->dl[i] && cnt[i] > 1) strides[i] = item_base(c, b, out, p->item + p->dl[i]) - b0 + str[i];
    }
    uint32_t idx[PL_PD] = {0};
    for (;;) {
        int64_t item = p->item;
        uint64_t rel = p->off[side], want = p->off[side];
        for (uint32_t i = 0; i < nd; i++) {
            if (!p->dl[i]) continue;
            item += (int64_t)idx[i] * p->dl[i];
            rel += idx[i] * str[i];
            want += idx[i] * strides[i];
        }
        if (item_base(c, b, out, item) - b0 + rel != want) {
            ok = 0;
            break;
        }
        int i = (int)nd - 1;
        for (; i >= 0; i--) {
            if (!p->dl[i]) continue;
            if (++idx[i] < cnt[i]) break;
            idx[i] = 0;
        }
        if (i < 0) break;
    }
    if (ok) {
        memcpy(pl_pstr(&q, side), strides, nd * sizeof strides[0]);
        memset(q.dl, 0, sizeof q.dl);
        q.off[side] = b0 + p->off[side];
        q.sym = 0;
        desc_check_ok(&q, side, &ok, c->o->strided_reads && side == 0);
        if (ok) {
            put_op(o, &q);
            return;
        }
    }
    /* split the outermost dim (it steps items or its stride broke the layout) */
    uint32_t k = 0;
    while (k + 1 < nd && cnt[k] == 1) k++;
    rs_assert(nd > 1 || p->dl[0]);
    for (uint64_t i = 0; i < cnt[k]; i++) {
        pl_pop s;
        pop_take_dim(&s, p, k, i);
        if (s.nd[0] == 0 || s.nd[1] == 0) rs_die("split of a one-dim op");
        resolve(c, b, &s, o);
    }
}

static void resolve_stored(const pl_ctx *c, const pl_stepb *b, const pl_spop *p, prog_out *o)
{
    pl_pop w;
    pop_load(&w, p);
    resolve(c, b, &w, o);
}

/* Lay out one step's out and in lists from `at`, in list order (segments were created sorted by
 * (round, forward set and class, sender, receiver), so a list's items of one kind are consecutive and
 * follow peer order); returns the end. Every segment is its own message. */
static uint64_t layout_step(pl_ctx *c, pl_stepb *b, uint64_t at)
{
    for (size_t i = 0; i < b->out.n; i++) {
        pl_seg *g = &c->segs.v[b->out.v[i]];
        if (g->zc_src || g->sbase != UINT64_MAX || !g->bytes) continue;
        g->sbase = at;
        at = align_up(at + g->bytes);
    }
    for (size_t i = 0; i < b->in.n; i++) {
        uint64_t it = b->in.v[i];
        if (it & 1) {
            pl_inst *in = &c->insts.v[it >> 1];
            if (in->zc || !c->segs.v[in->seg].bytes) continue;
            in->base = at;
            at = align_up(at + c->segs.v[in->seg].bytes);
            continue;
        }
        pl_seg *g = &c->segs.v[it >> 1];
        if (g->zc_dst || g->rbase != UINT64_MAX || !g->bytes) continue;
        g->rbase = at;
        at = align_up(at + g->bytes);
    }
    return at;
}

/* Messages of a step: one per segment (zero-copy ones from / into their buffers), forwards of the
 * segments received in the same round's NET step, forwarded instances received. Each side sorts by
 * (peer, segment): the k-th send to a peer matches the k-th receive from it. */
static void step_msgs(pl_ctx *c, const pl_stepb *b, const pl_stepb *fwd_from, msg_vec *snd, msg_vec *rcv)
{
    snd->n = rcv->n = 0;
    for (size_t i = 0; i < b->out.n; i++) {
        const pl_seg *g = &c->segs.v[b->out.v[i]];
        msg m = {g->r, 0, b->out.v[i], g->zc_src ? g->src_loc : RS_LOC_STAGING, g->zc_src ? g->src_off : g->sbase,
                 g->bytes, g->tensor};
        rs_vec_push(snd, m);
    }
    if (fwd_from) {
        for (size_t i = 0; i < fwd_from->in.n; i++) {
            uint64_t it = fwd_from->in.v[i];
            if (it & 1) continue;
            const pl_seg *g = &c->segs.v[it >> 1];
            for (uint32_t q = 0; q < g->ninst; q++) {
                const pl_inst *in = &c->insts.v[g->inst + q];
                msg m = {in->f, 0, in->seg, g->zc_dst ? g->dst_loc : RS_LOC_STAGING, g->zc_dst ? g->dst_off : g->rbase,
                         g->bytes, g->tensor};
                rs_vec_push(snd, m);
            }
        }
    }
    for (size_t i = 0; i < b->in.n; i++) {
        uint64_t it = b->in.v[i];
        if (it & 1) {
            const pl_inst *in = &c->insts.v[it >> 1];
            const pl_seg *g = &c->segs.v[in->seg];
            msg m = {g->r, 0, in->seg, in->zc ? in->dst_loc : RS_LOC_STAGING, in->zc ? in->dst_off : in->base, g->bytes,
                     g->tensor};
            rs_vec_push(rcv, m);
            continue;
        }
        const pl_seg *g = &c->segs.v[it >> 1];
        msg m = {g->s, 0, (uint32_t)(it >> 1), g->zc_dst ? g->dst_loc : RS_LOC_STAGING,
                 g->zc_dst ? g->dst_off : g->rbase, g->bytes, g->tensor};
        rs_vec_push(rcv, m);
    }
    msgs_sort(snd);
    msgs_sort(rcv);
}

static void put_msgs(prog_out *o, const msg_vec *v, int code)
{
    for (size_t i = 0; i < v->n; i++) {
        if (!v->v[i].bytes) continue; /* a segment laid out ahead whose chunks all went elsewhere */
        rs_op op;
        memset(&op, 0, sizeof op);
        op.code = (uint8_t)code;
        op.tensor = v->v[i].tensor;
        op.peer = v->v[i].peer;
        op.loc = v->v[i].loc;
        op.off = v->v[i].off;
        op.bytes = v->v[i].bytes;
        *op_slot(o) = op;
    }
}

static uint32_t step_of(const pl_ctx *c, uint32_t rank, int lane, uint32_t k)
{
    const pl_u32vec *v = &c->rank_steps[rank * 2 + lane];
    return k < v->n ? v->v[k] : RS_NONE;
}

static void free_pass_state(pl_ctx *c);

/* Bytes of a dense region (each outer stride the span inside it), or 0 when it has gaps. */
static uint64_t dense_bytes(const uint32_t *cnt, const uint64_t *str, uint32_t nd)
{
    if (!nd || str[nd - 1] != 1) return 0;
    uint64_t run = cnt[nd - 1];
    for (uint32_t i = nd - 1; i-- > 0;) {
        if (cnt[i] > 1 && str[i] != run) return 0;
        run *= cnt[i];
    }
    return run;
}

/* The segment of item i of step b's out list (out) or in list (a segment received directly, or a forwarded
 * copy of one) that may still move straight from / into a buffer: staged on that side, not forwarded on (a
 * forwarder sends its copies from staging), not empty; else NULL. */
static const pl_seg *zc_candidate(const pl_ctx *c, const pl_stepb *b, int out, size_t i)
{
    if (out) {
        const pl_seg *g = &c->segs.v[b->out.v[i]];
        return !g->zc_src && g->bytes ? g : NULL;
    }
    uint64_t it = b->in.v[i];
    if (it & 1) {
        const pl_inst *in = &c->insts.v[it >> 1];
        const pl_seg *g = &c->segs.v[in->seg];
        return !in->zc && g->bytes ? g : NULL;
    }
    const pl_seg *g = &c->segs.v[it >> 1];
    return !g->ninst && !g->zc_dst && g->bytes ? g : NULL;
}

/* A segment too small for zero-copy when its chunks were cut, whose PACKs (out) would read, or whose
 * UNPACKs (in: received, or a forwarded copy, not forwarded on) would write, one contiguous stretch of one
 * buffer in staging order and inside one group member, is sent from / received into that stretch
 * instead: the message is the same, its PACKs or UNPACKs and its staging on that side go. DeepSeek-V3/H100:
 * a receiver gets each sender's experts of its TP slice as one contiguous block per round (ops 4.19 M ->
 * 3.49 M, plan 73 -> 60 MiB); on GB200 the peers of a 63-rank fan-out take their copies so (95 -> 80 MB).
 * Checked on step b of rank r, whose merges are closed. */
static void zc_moves(pl_ctx *c, pl_builder *w, pl_stepb *b, uint32_t r, int out)
{
    size_t n = out ? b->out.n : b->in.n;
    if (!n) return;
    int code = out ? RS_OP_PACK : RS_OP_UNPACK, st = out ? 1 : 0, bs = 1 - st; /* staging and buffer sides */
    /* the step's ops first (building the program reads them next anyway), the segments only for items
     * whose ops qualify (a segment lookup per item of every step was 2 % of the 2.5 T MoE's compile in perf;
     * this whole function is now 1.3 %), in a scratch reused across steps */
    w->zscr.n = 0;
    rs_vec_reserve(&w->zscr, n);
    pl_zcitem *z = w->zscr.v;
    memset(z, 0, n * sizeof *z);
    int any = 0;
    pl_spop *sp;
    pl_pop wide, *p = &wide;
    for (pop_it it = pop_begin(b); (sp = pop_next(&it));) {
        if (sp->dead || sp->code != code || sp->sym != st + 1) continue;
        pop_load(p, sp);
        any = 1;
        const uint32_t *sc = pl_pcnt_c(p, st);
        const uint64_t *ss = pl_pstr_c(p, st);
        int64_t lo = p->item, hi = p->item;
        for (uint32_t d = 0; d < p->nd[st]; d++)
            if (p->dl[d] && sc[d] > 1) {
                int64_t ext = (int64_t)(sc[d] - 1) * p->dl[d];
                if (ext < 0) lo += ext;
                else hi += ext;
            }
        if (lo != hi) { /* merged across items: those items stay staged */
            for (int64_t q = lo < 0 ? 0 : lo; q <= hi && q < (int64_t)n; q++) z[q].bad = 1;
            continue;
        }
        if (p->item < 0 || (size_t)p->item >= n) continue;
        pl_zcitem *e = &z[p->item];
        uint64_t sb = dense_bytes(sc, ss, p->nd[st]);
        uint64_t db = dense_bytes(pl_pcnt_c(p, bs), pl_pstr_c(p, bs), p->nd[bs]);
        if (e->bad || !sb || sb != db || p->off[st] != e->next_s ||
            (e->npops && (p->loc[bs] != e->dloc || p->off[bs] != e->next_d))) {
            e->bad = 1;
            continue;
        }
        if (!e->npops) {
            e->dloc = p->loc[bs];
            e->first_d = p->off[bs];
        }
        e->npops++;
        e->next_s += sb;
        e->next_d = p->off[bs] + db;
    }
    if (!any) return;
    int hit = 0;
    for (size_t i = 0; i < n; i++) {
        pl_zcitem *e = &z[i];
        if (!out && (b->in.v[i] & 1) && !e->bad && e->npops) {
            /* a forwarded copy next to another from the same forwarder stays staged: the forwarder sends
             * them from one stretch of its staging, and staged on both sides the two messages merge into
             * one (pl_merge_messages), where a copy taken straight into the buffer keeps its own message.
             * DeepSeek-V3/GB200 (its 63-peer fan-outs): 191 k fewer messages, modeled 463.1 -> 459.2 ms;
             * the UNPACKs that come back cost less than a message's latency */
            uint32_t fw = c->segs.v[c->insts.v[b->in.v[i] >> 1].seg].r;
            for (int side = 0; side < 2; side++) {
                size_t j = side ? i + 1 : i - 1; /* (i - 1 wraps past n for i == 0) */
                if (j < n && (b->in.v[j] & 1) && c->segs.v[c->insts.v[b->in.v[j] >> 1].seg].r == fw) e->bad = 1;
            }
        }
        const pl_seg *g = e->bad || !e->npops ? NULL : zc_candidate(c, b, out, i);
        if (!g || e->next_s != g->bytes) {
            e->bad = 1;
            continue;
        }
        /* a group member's bytes: one message stays inside one member */
        uint64_t mb = pl_loc_mbytes(c, r, e->dloc);
        if (mb && e->first_d / mb != (e->first_d + g->bytes - 1) / mb) {
            e->bad = 1;
            continue;
        }
        if (out) {
            pl_seg *w = &c->segs.v[b->out.v[i]];
            w->zc_src = 1;
            w->src_loc = e->dloc;
            w->src_off = e->first_d;
        } else if (b->in.v[i] & 1) {
            pl_inst *in = &c->insts.v[b->in.v[i] >> 1];
            in->zc = 1;
            in->dst_loc = e->dloc;
            in->dst_off = e->first_d;
        } else {
            pl_seg *w = &c->segs.v[b->in.v[i] >> 1];
            w->zc_dst = 1;
            w->dst_loc = e->dloc;
            w->dst_off = e->first_d;
        }
        hit = 1;
    }
    if (hit)
        for (pop_it it = pop_begin(b); (sp = pop_next(&it));)
            if (!sp->dead && sp->code == code && sp->sym == st + 1 && sp->item >= 0 && (size_t)sp->item < n &&
                !z[sp->item].bad)
                sp->dead = 1;
}

/* After the last tensor no op or segment comes to a step any more, and a rank's steps are read only by
 * building its program (through rank_steps and local_step). The step builders of the ranks built by then
 * go (half of the 2.5 T MoE's 2.5 M, 139 MB, at its height): the others move down in order and are
 * renumbered. The step ids kept in segments and instances are stale from here on (nothing reads them). */
static void compact_steps(pl_ctx *c)
{
    uint32_t *to = rs_xmalloc((c->steps.n + 1) * sizeof *to);
    size_t n = 0;
    for (size_t i = 0; i < c->steps.n; i++) {
        if (c->rank_built[c->steps.v[i].rank]) {
            to[i] = RS_NONE;
            continue;
        }
        to[i] = (uint32_t)n;
        if (n != i) c->steps.v[n] = c->steps.v[i];
        n++;
    }
    for (uint32_t r = 0; r < c->world; r++) {
        for (int lane = 0; lane < 2; lane++) {
            pl_u32vec *v = &c->rank_steps[r * 2 + lane];
            if (c->rank_built[r]) {
                rs_vec_free(v);
                continue;
            }
            for (size_t k = 0; k < v->n; k++)
                if (v->v[k] != RS_NONE) v->v[k] = to[v->v[k]];
        }
        if (c->local_step[r] != RS_NONE) c->local_step[r] = c->rank_built[r] ? RS_NONE : to[c->local_step[r]];
    }
    free(to);
    c->steps.v = rs_xrealloc(c->steps.v, (n + 1) * sizeof *c->steps.v);
    c->steps.n = n;
    c->steps.cap = n + 1;
}

/* The finished arrays of program g (its counts set) at their exact sizes (the vectors grew by doubling; the
 * ops were reserved at a bound): in the plan's blocks, where the heap trims below do not split their huge
 * pages (in the small pages left, B, C and G compiled 16-22 % slower: docs/planner.md), else in memory of
 * their own. */
static void place_program(pl_ctx *c, pl_builder *w, rs_rank_prog *g, prog_out *o)
{
    size_t sz[5] = {((size_t)g->nsteps + 1) * sizeof *g->steps, ((size_t)g->nops + 1) * sizeof *g->ops,
                    ((size_t)g->nwaits + 1) * sizeof *g->waits, (size_t)g->dcap * sizeof *g->doff,
                    g->dpool_cap * sizeof *g->dpool};
    uint8_t *at[5] = {0};
    if (o->ops_in_block) {
        rs_prog_block_shrink(&w->cur, o->ops.v, sz[1]);
        at[1] = (uint8_t *)o->ops.v;
    }
    size_t rest = 0;
    for (int i = 0; i < 5; i++)
        if (!at[i]) rest += rs_prog_block_room(sz[i]);
    uint8_t *b = rs_prog_block_alloc(c->out, &w->cur, rest);
    if (b) {
        for (int i = 0; i < 5; i++)
            if (!at[i]) {
                at[i] = b;
                b += rs_prog_block_room(sz[i]);
            }
        g->steps = (rs_step *)at[0], g->ops = (rs_op *)at[1], g->waits = (uint32_t *)at[2];
        g->doff = (uint32_t *)at[3], g->dpool = (uint64_t *)at[4];
        /* (a vector that never grew has no memory: nothing to copy from NULL) */
        if (g->nsteps) memcpy(g->steps, o->steps.v, (size_t)g->nsteps * sizeof *g->steps);
        if (g->nwaits) memcpy(g->waits, o->waits.v, (size_t)g->nwaits * sizeof *g->waits);
        if (!o->ops_in_block) {
            if (g->nops) memcpy(g->ops, o->ops.v, (size_t)g->nops * sizeof *g->ops);
            free(o->ops.v);
        }
        free(o->steps.v);
        free(o->waits.v);
        g->in_blocks = 1;
    } else {
        g->steps = rs_xrealloc(o->steps.v, sz[0]);
        if (o->ops_in_block) { /* (the block stays the plan's, unused) */
            g->ops = rs_xmalloc(sz[1]);
            if (g->nops) memcpy(g->ops, o->ops.v, (size_t)g->nops * sizeof *g->ops);
        } else {
            g->ops = rs_xrealloc(o->ops.v, sz[1]);
        }
        g->waits = rs_xrealloc(o->waits.v, sz[2]);
        g->doff = rs_xmalloc(sz[3]);
        g->dpool = rs_xmalloc(sz[4]);
    }
    if (g->ndescs) memcpy(g->doff, o->g->doff, (size_t)g->ndescs * sizeof *g->doff);
    if (g->dpool_n) memcpy(g->dpool, o->g->dpool, g->dpool_n * sizeof *g->dpool);
}

/* Rank r's program: its staging layout, messages, waits and resolved ops; its ops while planning go back. */
static void build_rank(pl_ctx *c, pl_builder *w, uint32_t r)
{
    rs_plan *out = c->out;
    msg_vec snd = {0}, rcv = {0};
    rs_assert(!c->rank_built[r]);
    c->rank_built[r] = 1;
    {
        uint32_t sb = c->local_step[r];
        if (sb != RS_NONE) close_step_merges(c, &c->steps.v[sb]);
        for (int lane = 0; lane < 2; lane++) {
            const pl_u32vec *v = &c->rank_steps[r * 2 + lane];
            for (size_t k = 0; k < v->n; k++) {
                /* the step builders are cold (the 2.5 T MoE: 2.5 M of them): fetched a few ahead, and the
                 * merge table of the one after next */
                if (k + 4 < v->n && v->v[k + 4] != RS_NONE) {
                    const char *sb4 = (const char *)&c->steps.v[v->v[k + 4]];
                    __builtin_prefetch(sb4);
                    __builtin_prefetch(sb4 + 64);
                    __builtin_prefetch(sb4 + sizeof(pl_stepb) - 1);
                }
                if (k + 2 < v->n && v->v[k + 2] != RS_NONE && c->steps.v[v->v[k + 2]].mt)
                    __builtin_prefetch(c->steps.v[v->v[k + 2]].mt);
                if (v->v[k] != RS_NONE) {
                    close_step_merges(c, &c->steps.v[v->v[k]]);
                    zc_moves(c, w, &c->steps.v[v->v[k]], r, 1);
                    zc_moves(c, w, &c->steps.v[v->v[k]], r, 0);
                }
            }
        }
    }
    rs_rank_prog *g = &out->ranks[r];
    g->loaded = 1; /* (its bindings were set by pl_rank_bindings) */
    /* staging: each round's NET then NVL areas, in half k % 2 */
    uint32_t nk = 0;
    for (int lane = 0; lane < 2; lane++) {
        uint32_t n = (uint32_t)c->rank_steps[r * 2 + lane].n;
        if (n > nk) nk = n;
    }
    uint64_t hmax[2] = {0, 0};
    uint64_t *used = rs_xcalloc(nk + 1, sizeof *used);
    for (uint32_t k = 0; k < nk; k++) {
        uint64_t at = 0;
        for (int lane = 0; lane < 2; lane++) {
            uint32_t sb = step_of(c, r, lane, k);
            if (sb != RS_NONE) at = layout_step(c, &c->steps.v[sb], at);
        }
        used[k] = at;
        if (at > hmax[k & 1]) hmax[k & 1] = at;
    }
    uint64_t half_base[2] = {0, align_up(hmax[0])};
    g->staging_bytes = half_base[1] + hmax[1];
    if (g->staging_bytes > c->o->staging_bytes) rs_die("rank %u: staging %llu over the budget", r,
                                                       (unsigned long long)g->staging_bytes);
    /* shift odd rounds into the second half */
    for (uint32_t k = 1; k < nk; k += 2)
        for (int lane = 0; lane < 2; lane++) {
            uint32_t sb = step_of(c, r, lane, k);
            if (sb == RS_NONE) continue;
            pl_stepb *b = &c->steps.v[sb];
            for (size_t i = 0; i < b->out.n; i++) {
                pl_seg *x = &c->segs.v[b->out.v[i]];
                if (x->sbase != UINT64_MAX) x->sbase += half_base[1];
            }
            for (size_t i = 0; i < b->in.n; i++) {
                uint64_t it = b->in.v[i];
                if (it & 1) {
                    pl_inst *in = &c->insts.v[it >> 1];
                    if (!in->zc) in->base += half_base[1];
                } else if (c->segs.v[it >> 1].rbase != UINT64_MAX) {
                    c->segs.v[it >> 1].rbase += half_base[1];
                }
            }
        }
    free(used);

    /* programs */
    prog_out o;
    memset(&o, 0, sizeof o);
    uint32_t dcap0; /* the interning table's size at the start (desc_intern may grow it) */
    {
        /* Reserve the program at once: every live op resolves to at least one op (splits make
         * more: room for one per op, a third of them split on DeepSeek-V3), plus one SEND or RECV
         * per segment item and forward. Grown by doubling, the arrays were copied about once more
         * and touched twice the memory (DeepSeek-V3: 0.7 GB of descriptors). The reserve is made in the
         * plan's blocks and cut to the ops written (place_program), so the next rank's arrays take the
         * rest. */
        size_t npop = 0, nmsg = 0;
        for (int32_t k = -1; k < (int32_t)nk; k++)
            for (int lane = 0; lane < 2; lane++) {
                uint32_t sb = k < 0 ? (lane == RS_LANE_NVL ? c->local_step[r] : RS_NONE)
                                    : step_of(c, r, lane, (uint32_t)k);
                if (sb == RS_NONE) continue;
                const pl_stepb *b = &c->steps.v[sb];
                npop += b->nops;
                nmsg += b->out.n + b->in.n;
                if (lane == RS_LANE_NET)
                    for (size_t i = 0; i < b->in.n; i++)
                        if (!(b->in.v[i] & 1)) nmsg += c->segs.v[b->in.v[i] >> 1].ninst;
            }
        size_t ncap = 2 * npop + nmsg + 1; /* + 1: the exact size is nops + 1 */
        o.ops.v = rs_prog_block_alloc(c->out, &w->cur, ncap * sizeof *o.ops.v);
        if (o.ops.v) o.ops.cap = ncap, o.ops_in_block = 1;
        else rs_vec_reserve(&o.ops, ncap);
        /* descriptors: in a scratch pool kept from rank to rank (two an op, mostly of 1 to 3 dims; it grows
         * by doubling past that), copied to the program at the end in exactly the room they take (a pool
         * of the program's own, reserved and trimmed, left the heap fragmented: DeepSeek-V3/GB200 593 MiB
         * instead of 568) */
        o.g = &w->dscr;
        o.g->ndescs = 0;
        o.g->dpool_n = 0;
        rs_prog_desc_reserve(o.g, (uint32_t)(4 * npop + 1), 16 * (uint64_t)npop + 8);
        /* the interning table at once at its size for two descriptors an op (it was rehashed as it grew) */
        uint32_t cap = 4096;
        while (cap < 4 * npop + 2 && cap < (1u << 30)) cap *= 2;
        dcap0 = cap;
        if (w->dtab_cap < cap) {
            free(w->dtab);
            w->dtab = dtab_new(cap);
            w->dtab_cap = cap;
        } else {
            memset(w->dtab, 0, (size_t)cap * sizeof *w->dtab);
        }
        o.dtab = w->dtab; /* (the builder's, kept for its next rank; desc_intern may replace it by a larger) */
        o.dmask = cap - 1;
    }
    int32_t last_net_waited = -1, last_nvl_waited = -1;
    round_prog nvl_prog = {{0}}, net_prog = {{0}};
    struct { int32_t *v; size_t n, cap; } pack_prog = {0}; /* round -> program index of its pack step */
    /* The UNPACKs of what NET step k received run in NVL step k (which waits for NET step k), so the
     * network lane goes on to round k + 1 at once; NET step k + 2, the next user of the staging half,
     * waits for NVL step k anyway (and so do relays, which read those bytes two rounds later). */
    pl_stepb empty;
    pl_spop *p; /* the op a walk over a step is at */
    memset(&empty, 0, sizeof empty);
    for (int32_t k = -1; k < (int32_t)nk; k++) {
        for (int lane = 0; lane < 2; lane++) {
            uint32_t sb = k < 0 ? (lane == RS_LANE_NVL ? c->local_step[r] : RS_NONE) : step_of(c, r, lane, (uint32_t)k);
            pl_stepb *fwd = NULL; /* NVL step: its round's NET step */
            if (lane == RS_LANE_NVL && k >= 0) {
                uint32_t nsb = step_of(c, r, RS_LANE_NET, (uint32_t)k);
                if (nsb != RS_NONE) fwd = &c->steps.v[nsb];
            }
            int moved = 0; /* NVL step k runs NET step k's UNPACKs */
            if (fwd)
                for (pop_it it = pop_begin(fwd); !moved && (p = pop_next(&it));)
                    if (!p->dead && p->code == RS_OP_UNPACK) moved = 1;
            if (sb == RS_NONE && !moved) {
                if (fwd) pops_drop(fwd);
                continue;
            }
            pl_stepb *b = sb != RS_NONE ? &c->steps.v[sb] : &empty;
            step_msgs(c, b, fwd, &snd, &rcv);
            int forwards = 0;
            if (fwd)
                for (size_t i = 0; i < fwd->in.n && !forwards; i++)
                    if (!(fwd->in.v[i] & 1) && c->segs.v[fwd->in.v[i] >> 1].ninst &&
                        c->segs.v[fwd->in.v[i] >> 1].bytes)
                        forwards = 1;
            rs_step st;
            memset(&st, 0, sizeof st);
            st.lane = (uint8_t)lane;
            st.wait_begin = (uint32_t)o.waits.n;
            st.op_begin = (uint32_t)o.ops.n;
            int32_t me = (int32_t)o.steps.n;
            int32_t saved_net = last_net_waited, saved_nvl = last_nvl_waited;
            if (k >= 0) {
                if (lane == RS_LANE_NVL) {
                    /* fan-out waits for its round's receive; otherwise for the NET step that last used
                     * this half (round <= k - 2) */
                    int32_t w = -1;
                    if (forwards || moved) {
                        w = rp_latest(&net_prog, k); /* NET step k itself */
                        rs_assert((size_t)k < net_prog.le.n && w > rp_latest(&net_prog, (int64_t)k - 1));
                    }
                    else
                        w = rp_latest(&net_prog, (int64_t)k - 2);
                    if (w > last_net_waited) {
                        rs_vec_push(&o.waits, (uint32_t)w);
                        last_net_waited = w;
                    }
                } else {
                    int32_t w = rp_latest(&nvl_prog, (int64_t)k - 2);
                    if ((size_t)k < pack_prog.n && pack_prog.v[k] > w) w = pack_prog.v[k]; /* its packs */
                    if (w > last_nvl_waited) {
                        rs_vec_push(&o.waits, (uint32_t)w);
                        last_nvl_waited = w;
                    }
                }
            }
            /* phase 1, 2, 3 (a NET step's PACKs may have run ahead, in a pack step of the NVL lane) */
            int packed = lane == RS_LANE_NET && k >= 0 && (size_t)k < pack_prog.n && pack_prog.v[k] >= 0;
            if (!packed)
                for (pop_it it = pop_begin(b); (p = pop_next(&it));)
                    if (!p->dead && p->code != RS_OP_UNPACK) resolve_stored(c, b, p, &o);
            put_msgs(&o, &snd, RS_OP_SEND);
            put_msgs(&o, &rcv, RS_OP_RECV);
            int keep = lane == RS_LANE_NET && k >= 0; /* its UNPACKs go to NVL step k */
            if (!keep)
                for (pop_it it = pop_begin(b); (p = pop_next(&it));)
                    if (!p->dead && p->code == RS_OP_UNPACK) resolve_stored(c, b, p, &o);
            if (moved)
                for (pop_it it = pop_begin(fwd); (p = pop_next(&it));)
                    if (!p->dead && p->code == RS_OP_UNPACK) resolve_stored(c, fwd, p, &o);
            if (fwd) pops_drop(fwd);
            st.nwaits = (uint32_t)o.waits.n - st.wait_begin;
            st.nops = (uint32_t)o.ops.n - st.op_begin;
            if (st.nops == 0) {
                /* nothing to do: drop its waits again */
                o.waits.n = st.wait_begin;
                last_net_waited = saved_net;
                last_nvl_waited = saved_nvl;
                if (!keep) pops_drop(b);
                continue;
            }
            rs_vec_push(&o.steps, st);
            if (k >= 0) rp_set(lane == RS_LANE_NET ? &net_prog : &nvl_prog, (uint32_t)k, me);
            if (!keep) pops_drop(b);
        }
        /* the pack step of round k + 2 on the NVL lane: after NVL step k and NET step k (the last users of
         * the staging half, and the writers of what a relay in round k + 2 reads), while round k + 1
         * crosses the network; NET step k + 2 waits for it. */
        uint32_t psb = k >= 0 ? step_of(c, r, RS_LANE_NET, (uint32_t)k + 2) : RS_NONE;
        pl_stepb *pb = psb != RS_NONE ? &c->steps.v[psb] : NULL;
        int any = 0;
        if (pb)
            for (pop_it it = pop_begin(pb); !any && (p = pop_next(&it));)
                if (!p->dead && p->code == RS_OP_PACK) any = 1;
        if (any) {
            rs_step st;
            memset(&st, 0, sizeof st);
            st.lane = RS_LANE_NVL;
            st.wait_begin = (uint32_t)o.waits.n;
            st.op_begin = (uint32_t)o.ops.n;
            int32_t w = rp_latest(&net_prog, k);
            if (w > last_net_waited) {
                rs_vec_push(&o.waits, (uint32_t)w);
                last_net_waited = w;
            }
            for (pop_it it = pop_begin(pb); (p = pop_next(&it));)
                if (!p->dead && p->code == RS_OP_PACK) resolve_stored(c, pb, p, &o);
            st.nwaits = (uint32_t)o.waits.n - st.wait_begin;
            st.nops = (uint32_t)o.ops.n - st.op_begin;
            while (pack_prog.n <= (size_t)k + 2) rs_vec_push(&pack_prog, -1);
            pack_prog.v[k + 2] = (int32_t)o.steps.n;
            rs_vec_push(&o.steps, st);
        }
    }
    rp_free(&nvl_prog);
    rp_free(&net_prog);
    rs_vec_free(&pack_prog);
    g->nsteps = (uint32_t)o.steps.n;
    g->nops = (uint32_t)o.ops.n;
    g->nwaits = (uint32_t)o.waits.n;
    g->ndescs = o.g->ndescs;
    g->dcap = g->ndescs + 1;
    g->dpool_n = o.g->dpool_n;
    g->dpool_cap = g->dpool_n + 1;
    place_program(c, w, g, &o);
    if (o.dmask + 1 != dcap0) { /* (desc_intern grew it, freeing the builder's) */
        w->dtab = o.dtab;
        w->dtab_cap = o.dmask + 1;
    }
    popool_release(&c->popool[r]);
    /* The ops of the steps just resolved were freed into the heap in pieces too small for the large
     * arrays of the next ranks' programs: hand their pages back, or the peak holds both (DeepSeek-V3:
     * 1.6 GiB instead of 1.05). */
    w->trim_bytes += g->nops * sizeof *g->ops + g->dpool_n * sizeof *g->dpool + g->ndescs * sizeof *g->doff;
    if (w->trim_bytes > PL_TRIM_MIN_FREE) {
        rs_heap_trim(0);
        w->trim_bytes = 0;
    }
    rs_vec_free(&snd);
    rs_vec_free(&rcv);
}

static int done_cmp(const void *a, const void *b, void *ctx)
{
    const uint32_t *last = ctx, x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    uint32_t kx = last[x] ? last[x] : UINT32_MAX, ky = last[y] ? last[y] : UINT32_MAX;
    if (kx != ky) return kx < ky ? -1 : 1;
    return x < y ? -1 : x > y;
}

void pl_involve(pl_ctx *c, uint32_t rank)
{
    if (c->rank_last[rank] < c->ti + 1) c->rank_last[rank] = c->ti + 1;
}

/* Before pass 3: the order in which ranks are done (ranks in no part last, built by pl_finalize). */
static void done_order_init(pl_ctx *c)
{
    c->done_order = rs_xmalloc((c->world + 1) * sizeof *c->done_order);
    for (uint32_t r = 0; r < c->world; r++) c->done_order[r] = r;
    qsort_r(c->done_order, c->world, sizeof *c->done_order, done_cmp, c->rank_last);
    c->done_at = 0;
    c->rank_built = rs_xcalloc(c->world + 1, 1);
}

void pl_rank_bindings(pl_ctx *c)
{
    const rs_layout *L = c->L;
    c->out->ranks = rs_xcalloc(c->world, sizeof *c->out->ranks);
    for (uint32_t r = 0; r < c->world; r++) {
        rs_rank_prog *g = &c->out->ranks[r];
        uint32_t nb = c->bind_begin[r + 1] - c->bind_begin[r];
        g->rank = r;
        g->nbindings = nb;
        g->bindings = rs_xcalloc(nb + 1, sizeof *g->bindings);
        for (uint32_t i = 0; i < nb; i++) {
            uint32_t j = c->bind_begin[r] + i;
            rs_binding *x = &g->bindings[i];
            x->buffer = c->bind_buf[j];
            x->ndim = c->bind_nd[j];
            memcpy(x->shape, c->bind_shape[j], sizeof x->shape);
            uint64_t bytes = (uint64_t)rs_dtype_size(L->buffers[x->buffer].dtype);
            for (uint32_t d = 0; d < x->ndim; d++) bytes *= (uint64_t)x->shape[d];
            x->bytes = bytes;
        }
    }
}

static void free_pass_state(pl_ctx *c);

static void builder_free(pl_builder *w)
{
    free(w->dscr.doff);
    free(w->dscr.dpool);
    rs_vec_free(&w->zscr);
    free(w->dtab);
    memset(w, 0, sizeof *w);
}

/* Ranks built by two threads (after the last tensor): each takes the next one in done order. Building a
 * rank reads and writes its own steps and ops, its side of the segments and forwarded copies it sends or
 * receives (staging offsets, zero-copy choices) and its thread's builder, nothing another rank's building
 * writes: the programs are the same whichever thread builds which, in whatever order. */
typedef struct {
    pl_ctx *c;
    pl_builder bld;
    uint32_t *next, end; /* done_order[*next .. end) are left */
} build_share;

static void build_some(pl_ctx *c, pl_builder *w, uint32_t *next, uint32_t end)
{
    for (;;) {
        uint32_t i = __atomic_fetch_add(next, 1, __ATOMIC_RELAXED);
        if (i >= end) return;
        uint32_t r = c->done_order[i];
        build_rank(c, w, r);
        c->st->built_at[r] = c->ti + 1;
    }
}

static void *build_thread(void *arg)
{
    build_share *j = arg;
    build_some(j->c, &j->bld, j->next, j->end);
    return NULL;
}

/* Two threads build done_order[c->done_at .. end) when that is worth a thread (else nothing is built). */
#define PL_PAR_MIN_STEPS 4096
static void build_two(pl_ctx *c, uint32_t end)
{
    if (end - c->done_at < 2 || rs_threads(c->steps.n, PL_PAR_MIN_STEPS) < 2) return;
    uint32_t next = c->done_at;
    build_share j;
    memset(&j, 0, sizeof j);
    j.c = c, j.next = &next, j.end = end;
    pthread_t th;
    if (rs_thread_start(&th, build_thread, &j)) return;
    build_some(c, &c->bld, &next, end);
    pthread_join(th, NULL);
    builder_free(&j.bld);
    c->done_at = end;
}

/* During the tensor loop, the ranks whose last tensor has passed (the sources, mostly) are built by a helper
 * thread, in done order, while the loop goes on: a rank so built is not touched by the loop any more (no
 * part involves it), and what the loop grows that the helper reads (steps, segments, forwarded copies) is
 * only moved once the helper has finished (helper_grow_guard). On DeepSeek-V3 (B) these builds were 0.35 s
 * of the one-thread loop. */
typedef struct pl_helper {
    pl_ctx *c;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t work, idle;
    pl_u64vec q; /* rank | built_at << 32, in done order */
    size_t head; /* q.v[head ..) are left */
    int busy, stop;
    pl_builder bld;
} pl_helper;

static void *helper_main(void *arg)
{
    pl_helper *h = arg;
    pthread_mutex_lock(&h->mu);
    for (;;) {
        while (h->head == h->q.n && !h->stop) pthread_cond_wait(&h->work, &h->mu);
        if (h->head == h->q.n) break;
        uint64_t e = h->q.v[h->head++];
        h->busy = 1;
        pthread_mutex_unlock(&h->mu);
        build_rank(h->c, &h->bld, (uint32_t)e);
        h->c->st->built_at[(uint32_t)e] = (uint32_t)(e >> 32);
        pthread_mutex_lock(&h->mu);
        h->busy = 0;
        if (h->head == h->q.n) pthread_cond_broadcast(&h->idle);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* Wait until the helper has built every rank it was given. */
static void helper_sync(pl_ctx *c)
{
    pl_helper *h = c->helper;
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    while (h->head < h->q.n || h->busy) pthread_cond_wait(&h->idle, &h->mu);
    h->q.n = h->head = 0;
    pthread_mutex_unlock(&h->mu);
}

/* Let the helper finish and go (a no-op without one). */
static void helper_stop(pl_ctx *c)
{
    pl_helper *h = c->helper;
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_cond_signal(&h->work);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->th, NULL);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->work);
    pthread_cond_destroy(&h->idle);
    rs_vec_free(&h->q);
    builder_free(&h->bld);
    free(h);
    c->helper = NULL;
}

/* Hand rank r (built_at: its tensor) to the helper, started at the first such rank when the plan is worth a
 * second thread; 0 when there is none (the caller builds it). */
#define PL_HELPER_MIN_PARTS 4096
static int helper_take(pl_ctx *c, uint32_t r, uint32_t built_at)
{
    if (!c->helper_tried) {
        c->helper_tried = 1;
        if (rs_threads(c->pflow.n, PL_HELPER_MIN_PARTS) >= 2) {
            pl_helper *h = rs_xcalloc(1, sizeof *h);
            h->c = c;
            pthread_mutex_init(&h->mu, NULL);
            pthread_cond_init(&h->work, NULL);
            pthread_cond_init(&h->idle, NULL);
            if (rs_thread_start(&h->th, helper_main, h)) {
                pthread_mutex_destroy(&h->mu);
                pthread_cond_destroy(&h->work);
                pthread_cond_destroy(&h->idle);
                free(h);
            } else {
                c->helper = h;
            }
        }
    }
    pl_helper *h = c->helper;
    if (!h) return 0;
    pthread_mutex_lock(&h->mu);
    rs_vec_push(&h->q, (uint64_t)r | (uint64_t)built_at << 32);
    pthread_cond_signal(&h->work);
    pthread_mutex_unlock(&h->mu);
    return 1;
}

void pl_tensor_planned(pl_ctx *c)
{
    /* After the last tensor, the ranks left (the destinations, mostly) are built at once, by two threads:
     * the routing state goes first (the 2.5 T MoE: 170 MB of flows, round tables and part records) */
    if (c->ti + 1 == c->L->ntensors) {
        rs_assert(c->pseq == c->pflow.n); /* every routed part was planned */
        adder_stop(c);
        helper_stop(c);
        free_pass_state(c);
        compact_steps(c);
        c->pseq = 0;
        uint32_t end = c->done_at;
        while (end < c->world && c->rank_last[c->done_order[end]] && c->rank_last[c->done_order[end]] <= c->ti + 1)
            end++;
        build_two(c, end);
    }
    if (c->done_at < c->world && c->adder) {
        uint32_t r = c->done_order[c->done_at];
        if (c->rank_last[r] && c->rank_last[r] <= c->ti + 1) adder_sync(c); /* ranks to build: their ops first */
    }
    while (c->done_at < c->world) {
        uint32_t r = c->done_order[c->done_at];
        if (!c->rank_last[r] || c->rank_last[r] > c->ti + 1) break;
        if (c->ti + 1 == c->L->ntensors || !helper_take(c, r, c->ti + 1)) {
            build_rank(c, &c->bld, r);
            c->st->built_at[r] = c->ti + 1;
        }
        c->done_at++;
    }
}

int pl_finalize(pl_ctx *c, rs_plan *out)
{
    rs_assert(c->pseq == c->pflow.n && out == c->out);
    /* (each rank's steps close their merges as it is built: a pass over every step builder here only
     * read them all from memory once more) */
    adder_stop(c);
    helper_stop(c);
    blocksrc_close(c->blocksrc);
    free_pass_state(c);
    c->st->rounds = c->nrounds;
    for (uint32_t r = 0; r < c->world; r++)
        if (!c->rank_built[r]) build_rank(c, &c->bld, r);
    return 0;
}

/* What only the passes use (senders, flows, round tables, the segment index): freed before the programs
 * take their memory, and again (a no-op then) by pl_schedule_free. */
static void free_pass_state(pl_ctx *c)
{
    if (c->snd) {
        for (uint32_t s = 0; s < c->world; s++) {
            rs_vec_free(&c->snd[s].unit);
            rs_vec_free(&c->snd[s].ubytes);
            rs_vec_free(&c->snd[s].win);
            rs_vec_free(&c->snd[s].flows);
        }
        free(c->snd);
        c->snd = NULL;
    }
    pl_map_free(&c->flow_index);
    free(c->flow_first);
    c->flow_first = NULL;
    rs_vec_free(&c->flows);
    rs_vec_free(&c->precs);
    rs_vec_free(&c->pflow);
    free(c->fw_bytes);
    free(c->fw_base);
    free(c->fw_run);
    c->fw_bytes = c->fw_base = c->fw_run = NULL;
    free(c->rt_begin);
    free(c->rt_end);
    free(c->rt_round);
    free(c->rt_seg);
    c->rt_begin = c->rt_round = c->rt_seg = NULL;
    c->rt_end = NULL;
    pl_map_free(&c->seg_index);
    rs_vec_free(&c->chunk_k);
    rs_vec_free(&c->gst);
    rs_vec_free(&c->fine_k);
    rs_vec_free(&c->kend);
    rs_vec_free(&c->bld.zscr);
}

void pl_schedule_free(pl_ctx *c)
{
    adder_stop(c); /* (a failed pass 3) */
    helper_stop(c);
    free_pass_state(c);
    rs_vec_free(&c->segs);
    rs_vec_free(&c->insts);
    if (c->popool)
        for (uint32_t r = 0; r < c->world; r++) popool_release(&c->popool[r]);
    free(c->popool);
    c->popool = NULL;
    blocksrc_free(c->blocksrc);
    c->blocksrc = NULL;
    builder_free(&c->bld);
    for (size_t i = 0; i < c->steps.n; i++) {
        pops_drop(&c->steps.v[i]);
        if (c->steps.v[i].mcap > MSLOT_LINEAR) free(c->steps.v[i].mt); /* a failed pass 3 */
    }
    rs_vec_free(&c->steps);
    if (c->rank_steps) {
        for (size_t i = 0; i < (size_t)c->world * 2; i++) rs_vec_free(&c->rank_steps[i]);
        free(c->rank_steps);
    }
    free(c->local_step);
    free(c->rank_last);
    free(c->done_order);
    free(c->rank_built);
    c->rank_last = c->done_order = NULL;
    c->rank_built = NULL;
    if (c->usage) {
        for (uint32_t r = 0; r < c->world; r++) rs_vec_free(&c->usage[r]);
        free(c->usage);
    }
    rs_heap_trim(PL_TRIM_AFTER_PLAN); /* the planning state was freed in many small pieces: its pages, for the verifier */
}
