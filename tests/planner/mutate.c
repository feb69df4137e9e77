/* mutate.c - damage to plans for the verifier's tests: one random change to a decoded plan (a region or
 * message offset shifted, an op emptied, a wait weakened, destinations swapped, a peer or size changed, a
 * receive moved, ops of a step reordered, an op moved into the next or the previous step). test_planner's `mutate` compares the verifier's verdict with the
 * reference executor's; test_planned's MUTATIONS argument replays every damaged plan the verifier accepts on the
 * runtime's CPU transport, which must then deliver every element (or the verifier is unsound for it). */
#include <string.h>

#include "mutate.h"

static uint64_t *rnd_state;
static uint64_t rnd(void)
{
    *rnd_state ^= *rnd_state << 13;
    *rnd_state ^= *rnd_state >> 7;
    *rnd_state ^= *rnd_state << 17;
    return *rnd_state;
}

/* Two ops of one step with codes a and b (a == b: two different ops of that code), chosen at random;
 * 0 when the step has none. */
static int pick_pair(const rs_rank_prog *g, uint32_t s, uint32_t ca, uint32_t cb, uint32_t *i, uint32_t *j)
{
    const rs_step *st = &g->steps[s];
    uint32_t na = 0, nb = 0;
    for (uint32_t k = 0; k < st->nops; k++) {
        na += g->ops[st->op_begin + k].code == ca;
        nb += g->ops[st->op_begin + k].code == cb;
    }
    if (!na || !nb || (ca == cb && na < 2)) return 0;
    uint32_t x = (uint32_t)(rnd() % na), y = (uint32_t)(rnd() % (ca == cb ? na - 1 : nb));
    if (ca == cb && y >= x) y++;
    uint32_t ka = 0, kb = 0;
    *i = *j = UINT32_MAX;
    for (uint32_t k = 0; k < st->nops; k++) {
        uint32_t c = g->ops[st->op_begin + k].code;
        if (c == ca && ka++ == x) *i = st->op_begin + k;
        if (c == cb && kb++ == y) *j = st->op_begin + k;
    }
    return 1;
}

/* Damage one thing in the plan; returns a short name of what, or NULL when nothing applies. */
const char *rs_mutate(rs_plan *P, uint64_t *state)
{
    rnd_state = state;
    uint32_t world = P->layout.topo.world;
    for (int tries = 0; tries < 50; tries++) {
        uint32_t r = (uint32_t)(rnd() % world);
        rs_rank_prog *g = &P->ranks[r];
        if (!g->nops) continue;
        rs_op *o = &g->ops[rnd() % g->nops];
        uint32_t kind = (uint32_t)(rnd() % 13);
        switch (kind) {
        case 0: /* shift a buffer or staging region */
            if (o->code == RS_OP_PACK || o->code == RS_OP_UNPACK || o->code == RS_OP_COPY) {
                uint32_t di = rnd() % 2 ? o->src : o->dst;
                rs_desc d;
                rs_prog_desc(g, di, &d);
                uint64_t step = d.count[d.ndim - 1] < 8 ? d.count[d.ndim - 1] : 8;
                if (d.offset >= step && rnd() % 2) d.offset -= step;
                else d.offset += step;
                rs_prog_desc_set(g, di, &d);
                return "region shifted";
            }
            break;
        case 1: /* send/recv offset */
            if (o->code == RS_OP_SEND || o->code == RS_OP_RECV) {
                if (o->off >= 8 && rnd() % 2) o->off -= 8;
                else o->off += 8;
                return "message offset";
            }
            break;
        case 2: /* drop a copy */
            if (o->code == RS_OP_UNPACK || o->code == RS_OP_COPY || o->code == RS_OP_PACK) {
                for (int side = 0; side < 2; side++) {
                    rs_desc d;
                    rs_prog_desc(g, side ? o->dst : o->src, &d);
                    d.count[0] = 0;
                    rs_prog_desc_set(g, side ? o->dst : o->src, &d);
                }
                o->bytes = 0;
                return "op emptied";
            }
            break;
        case 3: /* a wait removed (pointed at the first step of the other lane) */
            for (uint32_t s = 0; s < g->nsteps; s++)
                if (g->steps[s].nwaits) {
                    uint32_t *w = &g->waits[g->steps[s].wait_begin];
                    for (uint32_t t = 0; t < *w; t++)
                        if (g->steps[t].lane != g->steps[s].lane) {
                            if (t == *w) break;
                            *w = t;
                            return "wait weakened";
                        }
                }
            break;
        case 4: /* swap the destinations of two unpacks of a step */
            for (uint32_t s = 0; s < g->nsteps; s++) {
                const rs_step *st = &g->steps[s];
                int a = -1, b = -1;
                for (uint32_t k = 0; k < st->nops; k++) {
                    const rs_op *x = &g->ops[st->op_begin + k];
                    if (x->code != RS_OP_UNPACK) continue;
                    if (a < 0) a = (int)(st->op_begin + k);
                    else if (g->ops[a].bytes == x->bytes) {
                        b = (int)(st->op_begin + k);
                        break;
                    }
                }
                if (b >= 0) {
                    rs_desc da, db;
                    rs_prog_desc(g, g->ops[a].dst, &da);
                    rs_prog_desc(g, g->ops[b].dst, &db);
                    rs_prog_desc_set(g, g->ops[a].dst, &db);
                    rs_prog_desc_set(g, g->ops[b].dst, &da);
                    if (memcmp(&da, &db, sizeof da)) return "unpack destinations swapped";
                }
            }
            break;
        case 5: /* a message to another peer of the same lane's allowed set */
            if (o->code == RS_OP_SEND) {
                uint32_t p = (uint32_t)(rnd() % world);
                if (p != r && p != o->peer) {
                    o->peer = p;
                    return "send peer changed";
                }
            }
            break;
        case 6: /* a staging byte count */
            if ((o->code == RS_OP_SEND || o->code == RS_OP_RECV) && o->bytes > 1) {
                o->bytes -= 1;
                return "message size";
            }
            break;
        case 7: /* move a step's staging: every staging region of one op into another half */
            if (o->code == RS_OP_RECV && o->loc == RS_LOC_STAGING && g->staging_bytes > 2 * o->bytes) {
                o->off = (o->off + g->staging_bytes / 2) % (g->staging_bytes - o->bytes);
                return "receive moved";
            }
            break;
        case 8: /* two ops of one code in one step change places (posting order, copy order) */
        case 9: { /* a SEND and a RECV of one step's group change places */
            if (!g->nsteps) break;
            uint32_t s = (uint32_t)(rnd() % g->nsteps), i, j;
            static const uint32_t codes[] = {RS_OP_SEND, RS_OP_RECV, RS_OP_PACK, RS_OP_UNPACK, RS_OP_COPY};
            uint32_t c = codes[rnd() % 5];
            if (!(kind == 8 ? pick_pair(g, s, c, c, &i, &j) : pick_pair(g, s, RS_OP_SEND, RS_OP_RECV, &i, &j))) break;
            rs_op t = g->ops[i];
            g->ops[i] = g->ops[j];
            g->ops[j] = t;
            return kind == 8 ? "ops of a step swapped" : "a send and a receive swapped";
        }
        case 10: { /* a step's receives posted in reverse order */
            if (!g->nsteps) break;
            const rs_step *st = &g->steps[rnd() % g->nsteps];
            uint32_t idx[64], n = 0;
            for (uint32_t k = 0; k < st->nops && n < 64; k++)
                if (g->ops[st->op_begin + k].code == RS_OP_RECV) idx[n++] = st->op_begin + k;
            if (n < 2) break;
            for (uint32_t a = 0, b = n - 1; a < b; a++, b--) {
                rs_op t = g->ops[idx[a]];
                g->ops[idx[a]] = g->ops[idx[b]];
                g->ops[idx[b]] = t;
            }
            return "receives reversed";
        }
        case 11: /* the last op of a step slides into the next step (in program order, any lane) */
        case 12: { /* the first op of a step slides back into the step before */
            if (g->nsteps < 2) break;
            uint32_t s = (uint32_t)(rnd() % (g->nsteps - 1));
            rs_step *a = &g->steps[s], *b = &g->steps[s + 1];
            if (kind == 11 ? a->nops < 2 : b->nops < 2) break; /* no step left empty */
            if (a->op_begin + a->nops != b->op_begin) break;
            if (kind == 11) a->nops--, b->op_begin--, b->nops++;
            else a->nops++, b->op_begin++, b->nops--;
            return kind == 11 ? "op moved to the next step" : "op moved to the step before";
        }
        }
    }
    return NULL;
}
