/* msgmerge.c - the messages of one sender to one receiver on a lane that follow each other in one step
 * on both sides, and whose byte ranges continue each other on both sides, become one message.
 *
 * Most such pairs are NVLink forwards: a receiver forwards what it got in a round from several senders to
 * each domain peer, one message per received segment, and those segments lie back to back in its staging
 * (sorted by forward set, then sender); the peer lays out the copies the same way. On the DeepSeek-V3
 * case of issue 3, a third of the NVLink messages went this way. The pass runs on the finished programs,
 * before verification, so every merge is proved like the rest of the plan. */
#include "plan_int.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t *key;  /* lane * world + peer, ascending */
    uint32_t *op;   /* the SEND (or RECV) op, in program order within a key */
    uint32_t *step; /* the op's step */
    uint32_t n;
} msg_index;

/* The rank's SENDs and RECVs, each sorted by (lane, peer) and program order (one counting sort over keys
 * 2 * (lane * world + peer) + (RECV); cnt holds 4 * world + 1 zeros and is handed back so). */
static void index_rank(const rs_rank_prog *g, uint32_t world, uint32_t *cnt, msg_index *snd, msg_index *rcv)
{
    uint32_t n[2] = {0, 0};
    for (uint32_t s = 0; s < g->nsteps; s++) {
        const rs_step *st = &g->steps[s];
        for (uint32_t k = 0; k < st->nops; k++) {
            const rs_op *o = &g->ops[st->op_begin + k];
            if (o->code != RS_OP_SEND && o->code != RS_OP_RECV) continue;
            uint32_t rv = o->code == RS_OP_RECV;
            cnt[2 * (st->lane * world + o->peer) + rv + 1]++;
            n[rv]++;
        }
    }
    msg_index *x[2] = {snd, rcv};
    for (int i = 0; i < 2; i++) {
        x[i]->n = n[i];
        x[i]->key = rs_xmalloc((n[i] + 1) * sizeof *x[i]->key);
        x[i]->op = rs_xmalloc((n[i] + 1) * sizeof *x[i]->op);
        x[i]->step = rs_xmalloc((n[i] + 1) * sizeof *x[i]->step);
    }
    if (!n[0] && !n[1]) return;
    /* prefix sums per kind: the SEND keys' positions in snd, the RECV keys' in rcv */
    uint32_t at[2] = {0, 0};
    for (uint32_t i = 0; i < 4 * world; i++) {
        uint32_t c = cnt[i + 1];
        cnt[i + 1] = at[i & 1];
        at[i & 1] += c;
    }
    for (uint32_t s = 0; s < g->nsteps; s++) {
        const rs_step *st = &g->steps[s];
        for (uint32_t k = 0; k < st->nops; k++) {
            uint32_t oi = st->op_begin + k;
            const rs_op *o = &g->ops[oi];
            if (o->code != RS_OP_SEND && o->code != RS_OP_RECV) continue;
            uint32_t rv = o->code == RS_OP_RECV, key = st->lane * world + o->peer;
            uint32_t j = cnt[2 * key + rv + 1]++;
            x[rv]->key[j] = key;
            x[rv]->op[j] = oi;
            x[rv]->step[j] = s;
        }
    }
    memset(cnt, 0, (4 * (size_t)world + 1) * sizeof *cnt);
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

uint64_t pl_merge_messages(rs_plan *P, const rs_layout *L)
{
    uint32_t world = L->topo.world;
    uint32_t *cnt = rs_xcalloc(4 * (size_t)world + 1, sizeof *cnt);
    msg_index *snd = rs_xcalloc(world + 1, sizeof *snd), *rcv = rs_xcalloc(world + 1, sizeof *rcv);
    for (uint32_t r = 0; r < world; r++) index_rank(&P->ranks[r], world, cnt, &snd[r], &rcv[r]);
    free(cnt);
    uint64_t merged = 0;
    for (uint32_t s = 0; s < world; s++) {
        const msg_index *x = &snd[s];
        rs_rank_prog *gs = &P->ranks[s];
        for (uint32_t i = 0, j; i < x->n; i = j) {
            uint32_t key = x->key[i], lane = key / world, p = key % world, lo, hi;
            for (j = i + 1; j < x->n && x->key[j] == key; j++) {}
            const msg_index *y = &rcv[p];
            rs_rank_prog *gp = &P->ranks[p];
            key_range(y, lane * world + s, &lo, &hi);
            if (hi - lo != j - i) continue; /* unmatched: the verifier says so */
            /* k-th SEND matches k-th RECV; h: the message the current one would join */
            for (uint32_t k = 1, h = 0; k < j - i; k++) {
                rs_op *a = &gs->ops[x->op[i + h]], *b = &gs->ops[x->op[i + k]];
                rs_op *ra = &gp->ops[y->op[lo + h]], *rb = &gp->ops[y->op[lo + k]];
                if (x->step[i + h] != x->step[i + k] || y->step[lo + h] != y->step[lo + k] ||
                    !continues(L, gs, a, b) || !continues(L, gp, ra, rb)) {
                    h = k;
                    continue;
                }
                a->bytes += b->bytes;
                ra->bytes += rb->bytes;
                if (a->tensor != b->tensor) a->tensor = RS_NONE;
                if (ra->tensor != rb->tensor) ra->tensor = RS_NONE;
                b->code = rb->code = OP_DEAD;
                merged++;
            }
        }
    }
    for (uint32_t r = 0; r < world; r++) {
        free(snd[r].key), free(snd[r].op), free(snd[r].step);
        free(rcv[r].key), free(rcv[r].op), free(rcv[r].step);
    }
    free(snd);
    free(rcv);
    if (!merged) return 0;
    /* drop the merged ops; the steps' op ranges follow */
    for (uint32_t r = 0; r < world; r++) {
        rs_rank_prog *g = &P->ranks[r];
        uint32_t w = 0;
        for (uint32_t s = 0; s < g->nsteps; s++) {
            rs_step *st = &g->steps[s];
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
    return merged;
}
