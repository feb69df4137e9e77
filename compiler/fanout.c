/* fanout.c - routing one cell to the ranks that need it, NVLink domain by domain: a rank that holds the
 * source itself copies locally; a domain with a source rank of its own is fed over NVLink directly;
 * any other domain gets the bytes over the network exactly once, split among its k receivers by bytes
 * (into min(k, bytes / fanout_split_min) nearly equal boxes, each to the least-loaded receiver so far), and
 * each receiver forwards its share to the other k - 1 over NVLink.
 *
 * Relays (c->relay_heads < 1): the domains fed over the network are cut into h = floor(share x count)
 * groups of consecutive domains (sizes differing by at most one); the first domain of
 * a group (its head) is fed by the holders, every other one by a domain of its group that got the bytes
 * before it (chains, or trees of fan-out o->relay_fanout): the receiver of box q there sends box q on
 * from its destination buffer two rounds after each chunk arrived (the chunk is unpacked in the NVL step
 * of its round; or, when the two domains split the fragment differently, one of its ranks sends the whole
 * box two rounds after the last piece arrived, once the NVLink fan-out has brought it). */
#include "plan_int.h"

#include <math.h>
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
    rs_assert(p->fset < PL_KEY_RELAY);
    p->key = p->fset | (p->relay ? PL_KEY_RELAY : ncand > 1 ? PL_KEY_CLASS : 0);
    if (c->pass == 1) {
        /* the ranks this part involves (a sender chosen by LPT: when it is chosen) */
        if (p->s != RS_NONE) pl_involve(c, p->s);
        pl_involve(c, p->r);
        c->st->parts++;
        if (p->kind == PL_LOCAL) c->st->local_bytes += p->bytes;
        else if (p->kind == PL_NVL) c->st->nvl_bytes += p->bytes;
        else {
            c->st->net_bytes += p->bytes;
            if (p->relay) c->st->relay_bytes += p->bytes;
            uint32_t nf;
            const uint32_t *f = pl_intern_list(&c->fsets, p->fset, &nf);
            for (uint32_t q = 0; q < nf; q++) pl_involve(c, f[q]); /* the forwarders */
            c->st->fwd_bytes += p->bytes * nf;
            c->st->domain_net_in[c->L->topo.domain_of[p->r]] += p->bytes;
        }
    }
    c->chunk_k.n = 0;
    c->cur_chunk = UINT32_MAX; /* incremented before each chunk */
    return pl_do_part(c, cell, p);
}

/* A domain fed over the network: its ranks needing the cell, the boxes it is split into, who receives
 * each and (pass 3) the latest round any piece of it arrived in. */
typedef struct {
    uint32_t dm, nrest, m;
    uint32_t *rest, *order;
    uint32_t **krec, *nkrec; /* per box: the latest round of each of its chunks */
    uint64_t *kpm;           /* per box: its chunk size */
    int64_t (*box)[2 * PL_ND];
} netdom;

int pl_route(pl_ctx *c, const pl_cell *cell)
{
    const uint32_t *dom = c->L->topo.domain_of;
    uint32_t ncand;
    const uint32_t *cand = pl_intern_list(&c->cands, cell->cand, &ncand);
    ncand /= 2;
    uint32_t nd = cell->ndim;
    pl_part p;
    memset(&p, 0, sizeof p);
    if (cell->ndr == 1) {
        /* One rank needs the cell (a destination sharded over every rank: DeepSeek-V3's routed experts,
         * 7.6 M cells): the walk below without its per-domain lists, boxes and relay groups (a single
         * domain is never relayed and gets one box). */
        uint32_t r = cell->dr[0];
        p.r = r;
        memcpy(p.lo, cell->lo, sizeof p.lo); /* whole arrays: a fixed size copies without a call */
        memcpy(p.hi, cell->hi, sizeof p.hi);
        p.bytes = cell->bytes;
        uint32_t slot = cand_slot(cand, ncand, r);
        if (slot != RS_NONE) {
            p.kind = PL_LOCAL;
            p.s = r;
            p.sslot = slot;
            return emit(c, cell, &p, ncand);
        }
        uint32_t dm = dom[r];
        for (uint32_t q = 0; q < ncand; q++)
            if (dom[cand[2 * q]] == dm) {
                p.kind = PL_NVL;
                p.s = pl_nvl_sender(c, cell, dm, cell->bytes, &p.sslot);
                return emit(c, cell, &p, ncand);
            }
        if (c->pass == 1) c->st->domain_need[dm] += cell->bytes;
        p.kind = PL_NET;
        c->net_in[r] += p.bytes;
        p.key = ncand > 1 ? PL_KEY_CLASS : 0; /* no forward set */
        p.s = pl_net_sender(c, cell, p.bytes, r, p.key, &p.sslot);
        return emit(c, cell, &p, ncand);
    }
    netdom nb_buf[8], *nb = nb_buf;
    uint32_t nnet = 0, cap = 8;

    for (uint32_t i = 0; i < cell->ndr;) {
        uint32_t dm = dom[cell->dr[i]], j = i;
        while (j < cell->ndr && dom[cell->dr[j]] == dm) j++;
        /* same rank: local copy; others of the domain need a transfer */
        uint32_t *rest = pl_alloc(&c->ar, (j - i) * sizeof *rest), nrest = 0;
        for (uint32_t q = i; q < j; q++) {
            uint32_t r = cell->dr[q];
            uint32_t slot = cand_slot(cand, ncand, r);
            if (slot != RS_NONE) {
                memset(&p, 0, sizeof p);
                p.kind = PL_LOCAL;
                p.s = p.r = r;
                p.sslot = slot;
                memcpy(p.lo, cell->lo, sizeof p.lo); /* whole arrays: a fixed size copies without a call */
                memcpy(p.hi, cell->hi, sizeof p.hi);
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
                memset(&p, 0, sizeof p);
                p.kind = PL_NVL;
                p.r = rest[q];
                p.s = pl_nvl_sender(c, cell, dm, cell->bytes, &p.sslot);
                memcpy(p.lo, cell->lo, sizeof p.lo); /* whole arrays: a fixed size copies without a call */
                memcpy(p.hi, cell->hi, sizeof p.hi);
                p.bytes = cell->bytes;
                if (emit(c, cell, &p, ncand)) return -1;
            }
            continue;
        }
        if (nnet == cap) {
            netdom *n = pl_alloc(&c->ar, 2 * cap * sizeof *n);
            memcpy(n, nb, cap * sizeof *n);
            nb = n;
            cap *= 2;
        }
        netdom *x = &nb[nnet++];
        memset(x, 0, sizeof *x);
        x->dm = dm;
        x->rest = rest;
        x->nrest = nrest;
    }

    /* relay groups: h heads fed by the holders; the nnet domains in h groups of consecutive domains, the
     * first nnet % h of them one longer */
    uint32_t h = nnet, N = c->o->relay_fanout ? c->o->relay_fanout : 1;
    if (nnet > 1 && c->relay_heads < 1) {
        h = (uint32_t)floor((double)nnet * c->relay_heads + 1e-9);
        if (h < 1) h = 1;
        if (h > nnet) h = nnet;
    }
    uint32_t gbase = nnet / (h ? h : 1), grem = nnet % (h ? h : 1);
    int relayed = h < nnet; /* some domain has a parent: the domains record what their boxes' chunks did */

    for (uint32_t t = 0; t < nnet; t++) {
        netdom *x = &nb[t];
        uint32_t nrest = x->nrest, *rest = x->rest;
        /* over the network, once into this domain */
        if (c->pass == 1) c->st->domain_need[x->dm] += cell->bytes;
        uint32_t k = 1;
        if (nrest > 1) {
            /* boxes of at least fanout_split_min bytes: every box costs a message per forward peer */
            uint64_t q = c->o->fanout_split_min ? cell->bytes / c->o->fanout_split_min : nrest;
            k = q < nrest ? (q < 1 ? 1 : (uint32_t)q) : nrest;
        }
        x->box = pl_alloc(&c->ar, k * sizeof *x->box);
        uint32_t m = k > 1 ? pl_box_split(nd, cell->lo, cell->hi, k, x->box) : 0;
        if (m <= 1) {
            m = 1;
            memcpy(x->box[0], cell->lo, sizeof cell->lo);
            memcpy(x->box[0] + PL_ND, cell->hi, sizeof cell->hi);
        }
        x->m = m;
        /* receivers by current network ingress, least loaded first (ties: lower rank) */
        uint32_t *order = x->order = pl_alloc(&c->ar, nrest * sizeof *order);
        for (uint32_t q = 0; q < nrest; q++) {
            uint32_t r = rest[q], z = q;
            while (z > 0 && (c->net_in[order[z - 1]] > c->net_in[r] ||
                             (c->net_in[order[z - 1]] == c->net_in[r] && order[z - 1] > r))) {
                order[z] = order[z - 1];
                z--;
            }
            order[z] = r;
        }
        if (relayed) {
            x->krec = pl_alloc(&c->ar, m * sizeof *x->krec);
            x->nkrec = pl_alloc(&c->ar, m * sizeof *x->nkrec);
            x->kpm = pl_alloc(&c->ar, m * sizeof *x->kpm);
        }
        /* the domain this one is relayed from, if any */
        uint32_t gpos = !relayed ? 0 : t < grem * (gbase + 1) ? t % (gbase + 1) : (t - grem * (gbase + 1)) % gbase;
        const netdom *par = gpos ? &nb[t - gpos + (gpos - 1) / N] : NULL;
        int same = par && par->m == m;
        for (uint32_t q = 0; same && q < m; q++)
            if (memcmp(par->box[q], x->box[q], nd * sizeof(int64_t)) ||
                memcmp(par->box[q] + PL_ND, x->box[q] + PL_ND, nd * sizeof(int64_t)))
                same = 0;
        uint32_t pk = 0;
        if (par)
            for (uint32_t q = 0; q < par->m; q++)
                for (uint32_t i = 0; i < par->nkrec[q]; i++)
                    if (par->krec[q][i] > pk) pk = par->krec[q][i];
        uint32_t fw_buf[64], *fw = fw_buf;
        if (nrest > 64) fw = pl_alloc(&c->ar, nrest * sizeof *fw);
        for (uint32_t q = 0; q < m; q++) {
            memset(&p, 0, sizeof p);
            p.kind = PL_NET;
            p.r = order[q];
            memcpy(p.lo, x->box[q], sizeof p.lo); /* past nd: never read */
            memcpy(p.hi, x->box[q] + PL_ND, sizeof p.hi);
            p.bytes = pl_box_elems(nd, p.lo, p.hi) * cell->es;
            uint32_t nf = 0;
            for (uint32_t z = 0; z < nrest; z++)
                if (rest[z] != p.r) fw[nf++] = rest[z];
            p.fset = pl_intern_add(&c->fsets, fw, nf);
            c->net_in[p.r] += p.bytes;
            if (!par) {
                p.key = p.fset | (ncand > 1 ? PL_KEY_CLASS : 0);
                p.s = pl_net_sender(c, cell, p.bytes, p.r, p.key, &p.sslot);
            } else {
                p.relay = 1;
                p.sslot = cell->dslot;
                if (same) {
                    p.s = par->order[q];
                    p.kmin_chunk = par->krec[q];
                    p.nkmin = par->nkrec[q];
                    p.pm = par->kpm[q];
                } else {
                    /* any rank of the parent domain has the whole cell once its fan-out is done */
                    uint32_t best = par->rest[0];
                    for (uint32_t z = 1; z < par->nrest; z++)
                        if (c->relay_out[par->rest[z]] < c->relay_out[best]) best = par->rest[z];
                    p.s = best;
                    p.kmin = pk + 2;
                }
                c->relay_out[p.s] += p.bytes;
            }
            if (emit(c, cell, &p, ncand)) return -1;
            if (!relayed) continue;
            x->nkrec[q] = (uint32_t)c->chunk_k.n;
            x->kpm[q] = c->cur_pm;
            x->krec[q] = NULL;
            if (c->chunk_k.n) {
                x->krec[q] = pl_alloc(&c->ar, c->chunk_k.n * sizeof *x->krec[q]);
                memcpy(x->krec[q], c->chunk_k.v, c->chunk_k.n * sizeof *x->krec[q]);
            }
        }
    }
    return 0;
}
