/* sources.c - source choice: among all ranks holding a fragment (data-parallel copies, replicated norms,
 * expert-data-parallel copies), pick senders so that the BYTES each NIC sends are balanced. Fragments
 * with one holder are fixed first; the others are assigned largest first to the least-loaded holder
 * (LPT greedy; ties: fewer bytes so far, then the lower rank, then first seen). Senders feeding a domain
 * over NVLink are chosen greedily by NVLink bytes among the holders inside that domain. */
#include "plan_int.h"

#include <stdlib.h>

static uint32_t slot_of_rank(const uint32_t *cand, uint32_t n, uint32_t r)
{
    for (uint32_t q = 0; q < n; q++)
        if (cand[2 * q] == r) return cand[2 * q + 1];
    rs_die("sender %u is not a holder", r);
}

/* Network sender of a part of `bytes` for receiver r. Pass 1 records parts with several holders and
 * returns RS_NONE for them; later passes replay the LPT decision in the same order. */
uint32_t pl_net_sender(pl_ctx *c, const pl_cell *cell, uint64_t bytes, uint32_t r, uint32_t fset, uint32_t *slot)
{
    uint32_t n;
    const uint32_t *cand = pl_intern_list(&c->cands, cell->cand, &n);
    n /= 2;
    if (n == 1) {
        if (c->pass == 1) c->nic_out[cand[0]] += bytes;
        *slot = cand[1];
        return cand[0];
    }
    uint32_t seq = c->lpt_seq++;
    if (c->pass == 1) {
        pl_lpt rec = {.bytes = bytes, .cand = cell->cand, .seq = seq, .unit = RS_NONE, .r = r, .fset = fset,
                      .tensor = c->ti};
        rs_vec_push(&c->lpt, rec);
        *slot = RS_NONE;
        return RS_NONE;
    }
    uint32_t s = c->lpt_choice[seq];
    *slot = slot_of_rank(cand, n, s);
    return s;
}

uint32_t pl_nvl_sender(pl_ctx *c, const pl_cell *cell, uint32_t domain, uint64_t bytes, uint32_t *slot)
{
    uint32_t n;
    const uint32_t *cand = pl_intern_list(&c->cands, cell->cand, &n);
    n /= 2;
    const uint32_t *dom = c->L->topo.domain_of;
    uint32_t best = RS_NONE, bslot = RS_NONE;
    for (uint32_t q = 0; q < n; q++) {
        uint32_t s = cand[2 * q];
        if (dom[s] != domain) continue;
        if (best == RS_NONE || c->nvl_out[s] < c->nvl_out[best]) {
            best = s;
            bslot = cand[2 * q + 1];
        }
    }
    rs_assert(best != RS_NONE);
    c->nvl_out[best] += bytes;
    *slot = bslot;
    return best;
}

void pl_lpt_solve(pl_ctx *c)
{
    size_t n = c->lpt.n;
    c->lpt_choice = rs_xmalloc((n + 1) * sizeof *c->lpt_choice);
    /* largest first, ties in arrival order (seq, the record's index): a stable radix sort of the indices by
     * bytes below the largest (qsort of the records was 62 M of issue 3's 7 G instructions) */
    uint64_t maxb = 0;
    for (size_t i = 0; i < n; i++) {
        rs_assert(c->lpt.v[i].seq == i);
        if (c->lpt.v[i].bytes > maxb) maxb = c->lpt.v[i].bytes;
    }
    uint64_t *key = rs_xmalloc((n + 1) * sizeof *key);
    for (size_t i = 0; i < n; i++) key[i] = maxb - c->lpt.v[i].bytes;
    size_t *ord = rs_radix_order(key, n, maxb ? 64 - (unsigned)__builtin_clzll(maxb) : 0);
    free(key);
    pl_lpt *order = rs_xmalloc((n + 1) * sizeof *order);
    for (size_t i = 0; i < n; i++) order[i] = c->lpt.v[ord[i]];
    free(ord);
    for (size_t i = 0; i < n; i++) {
        uint32_t m;
        const uint32_t *cand = pl_intern_list(&c->cands, order[i].cand, &m);
        m /= 2;
        uint32_t best = cand[0];
        for (uint32_t q = 1; q < m; q++)
            if (c->nic_out[cand[2 * q]] < c->nic_out[best]) best = cand[2 * q];
        c->nic_out[best] += order[i].bytes;
        c->lpt_choice[order[i].seq] = best;
        if (c->rank_last[best] < order[i].tensor + 1) c->rank_last[best] = order[i].tensor + 1;
    }
    free(order);
}
