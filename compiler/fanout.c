/* fanout.c - routing one cell to the ranks that need it, NVLink domain by domain: a rank that holds the
 * source itself copies locally; a domain with a source rank of its own is fed over NVLink directly;
 * any other domain gets the bytes over the network exactly once, split among its k receivers by bytes
 * (large fragments split into k nearly equal boxes, small ones whole to the least-loaded receiver), and
 * each receiver forwards its share to the other k - 1 over NVLink. */
#include "plan_int.h"

#include <string.h>

/* Slot of rank r in a candidate list (pairs rank, slot sorted by rank), or RS_NONE. */
static uint32_t cand_slot(const uint32_t *cand, uint32_t n, uint32_t r)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (cand[2 * mid] < r) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && cand[2 * lo] == r ? cand[2 * lo + 1] : RS_NONE;
}

static int emit(pl_ctx *c, const pl_cell *cell, pl_part *p, uint32_t ncand)
{
    p->key = p->fset | (ncand > 1 ? 1u << 31 : 0);
    if (c->pass == 1) {
        c->st->parts++;
        if (p->kind == PL_LOCAL) c->st->local_bytes += p->bytes;
        else if (p->kind == PL_NVL) c->st->nvl_bytes += p->bytes;
        else {
            c->st->net_bytes += p->bytes;
            uint32_t nf;
            pl_intern_list(&c->fsets, p->fset, &nf);
            c->st->fwd_bytes += p->bytes * nf;
            c->st->domain_net_in[c->L->topo.domain_of[p->r]] += p->bytes;
        }
    }
    return pl_do_part(c, cell, p);
}

int pl_route(pl_ctx *c, const pl_cell *cell)
{
    const uint32_t *dom = c->L->topo.domain_of;
    uint32_t ncand;
    const uint32_t *cand = pl_intern_list(&c->cands, cell->cand, &ncand);
    ncand /= 2;
    uint32_t nd = cell->ndim;
    pl_part p;
    memset(&p, 0, sizeof p);
    uint32_t rest_buf[64], *rest = rest_buf;
    if (cell->ndr > 64) rest = pl_alloc(&c->ar, cell->ndr * sizeof *rest);

    for (uint32_t i = 0; i < cell->ndr;) {
        uint32_t dm = dom[cell->dr[i]], j = i;
        while (j < cell->ndr && dom[cell->dr[j]] == dm) j++;
        /* same rank: local copy; others of the domain need a transfer */
        uint32_t nrest = 0;
        for (uint32_t q = i; q < j; q++) {
            uint32_t r = cell->dr[q];
            uint32_t slot = cand_slot(cand, ncand, r);
            if (slot != RS_NONE) {
                p.kind = PL_LOCAL;
                p.s = p.r = r;
                p.sslot = slot;
                p.fset = 0;
                memcpy(p.lo, cell->lo, nd * sizeof p.lo[0]);
                memcpy(p.hi, cell->hi, nd * sizeof p.hi[0]);
                p.bytes = cell->bytes;
                if (emit(c, cell, &p, ncand)) return -1;
            } else {
                rest[nrest++] = r;
            }
        }
        i = j;
        if (!nrest) continue;
        int in_domain = 0;
        for (uint32_t q = 0; q < ncand && !in_domain; q++)
            if (dom[cand[2 * q]] == dm) in_domain = 1;
        if (in_domain) {
            for (uint32_t q = 0; q < nrest; q++) {
                p.kind = PL_NVL;
                p.r = rest[q];
                p.s = pl_nvl_sender(c, cell, dm, cell->bytes, &p.sslot);
                p.fset = 0;
                memcpy(p.lo, cell->lo, nd * sizeof p.lo[0]);
                memcpy(p.hi, cell->hi, nd * sizeof p.hi[0]);
                p.bytes = cell->bytes;
                if (emit(c, cell, &p, ncand)) return -1;
            }
            continue;
        }
        /* over the network, once into this domain */
        if (c->pass == 1) c->st->domain_need[dm] += cell->bytes;
        uint32_t k = 1;
        if (nrest > 1 && cell->bytes >= c->o->fanout_split_min) k = nrest;
        int64_t one[1][2 * PL_ND];
        int64_t (*box)[2 * PL_ND] = k > 1 ? pl_alloc(&c->ar, k * sizeof *box) : one;
        uint32_t m = k > 1 ? pl_box_split(nd, cell->lo, cell->hi, k, box) : 0;
        if (m <= 1) {
            m = 1;
            memcpy(box[0], cell->lo, nd * sizeof(int64_t));
            memcpy(box[0] + PL_ND, cell->hi, nd * sizeof(int64_t));
        }
        /* receivers by current network ingress, least loaded first (ties: lower rank) */
        uint32_t order_buf[64], *order = order_buf;
        if (nrest > 64) order = pl_alloc(&c->ar, nrest * sizeof *order);
        for (uint32_t q = 0; q < nrest; q++) {
            uint32_t r = rest[q], z = q;
            while (z > 0 && (c->net_in[order[z - 1]] > c->net_in[r] ||
                             (c->net_in[order[z - 1]] == c->net_in[r] && order[z - 1] > r))) {
                order[z] = order[z - 1];
                z--;
            }
            order[z] = r;
        }
        uint32_t fw_buf[64], *fw = fw_buf;
        if (nrest > 64) fw = pl_alloc(&c->ar, nrest * sizeof *fw);
        for (uint32_t q = 0; q < m; q++) {
            p.kind = PL_NET;
            p.r = order[q];
            memcpy(p.lo, box[q], nd * sizeof p.lo[0]);
            memcpy(p.hi, box[q] + PL_ND, nd * sizeof p.hi[0]);
            p.bytes = pl_box_elems(nd, p.lo, p.hi) * cell->es;
            uint32_t nf = 0;
            for (uint32_t z = 0; z < nrest; z++)
                if (rest[z] != p.r) fw[nf++] = rest[z];
            p.fset = pl_intern_add(&c->fsets, fw, nf);
            c->net_in[p.r] += p.bytes;
            p.key = p.fset | (ncand > 1 ? 1u << 31 : 0);
            p.s = pl_net_sender(c, cell, p.bytes, p.r, p.key, &p.sslot);
            if (emit(c, cell, &p, ncand)) return -1;
        }
    }
    return 0;
}
