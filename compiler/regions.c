/* regions.c - what each rank holds and needs, as regions: per tensor, the shard grid of every piece
 * (nested, ragged and fixed-block shards inside slices, pins), the cells where a destination block meets
 * the source grids (an interval sweep per dimension, never a loop over source x destination ranks), the
 * ranks holding each block, the map from tensor sub-boxes to strided buffer regions (including blocks
 * that refill a box of another shape row-major), box splitting, and every rank's bindings. */
#include "plan_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- bindings ---- */

typedef struct {
    uint32_t rank, buffer, nd, piece;
    int64_t shape[PL_ND];
} bind_rec;

/* One stable counting pass over the records in[0..n) by rank or by buffer (keys below nk), into out. */
static void bind_pass(const bind_rec *v, size_t n, const uint32_t *in, uint32_t *out, uint32_t *cnt, uint32_t nk,
                      int by_rank)
{
    memset(cnt, 0, ((size_t)nk + 1) * sizeof *cnt);
    for (size_t i = 0; i < n; i++) cnt[(by_rank ? v[i].rank : v[i].buffer) + 1]++;
    for (uint32_t k = 0; k < nk; k++) cnt[k + 1] += cnt[k];
    for (size_t i = 0; i < n; i++) {
        const bind_rec *r = &v[in[i]];
        out[cnt[by_rank ? r->rank : r->buffer]++] = in[i];
    }
}

/* Every (rank, buffer) a piece binds: explicit buffers whenever the piece is held, implicit ones when
 * the local block is not empty (its shape is the block's). */
int pl_bindings(pl_ctx *c)
{
    const rs_layout *L = c->L;
    rs_vec(bind_rec) v = {0};
    int64_t coord[PL_ND], lo[PL_ND], hi[PL_ND];
    for (uint32_t pi = 0; pi < L->npieces; pi++) {
        const rs_piece *p = &L->pieces[pi];
        const rs_mesh *m = &L->meshes[p->mesh];
        const rs_buffer *b = &L->buffers[p->buffer];
        const rs_tensor *t = &L->tensors[p->tensor];
        /* iterate only over the coordinates the pins allow */
        int64_t fixed[PL_ND];
        for (uint32_t a = 0; a < m->naxes; a++) fixed[a] = -1;
        for (uint32_t k = 0; k < p->nplace; k++) {
            const rs_place *q = &L->places[p->place + k];
            if (q->kind == RS_PLACE_PIN) fixed[q->axis] = q->arg;
        }
        int ok = 1;
        for (uint32_t a = 0; a < m->naxes; a++) {
            if (fixed[a] >= m->size[a]) ok = 0;
            coord[a] = fixed[a] >= 0 ? fixed[a] : 0;
        }
        if (!ok) continue;
        for (;;) {
            uint64_t lin = 0;
            for (uint32_t a = 0; a < m->naxes; a++) lin = lin * (uint64_t)m->size[a] + (uint64_t)coord[a];
            int64_t n = rs_piece_block(L, p, coord, lo, hi);
            if (b->ndim || n > 0) {
                bind_rec r = {.rank = (uint32_t)m->ranks[lin], .buffer = p->buffer, .piece = pi};
                if (b->ndim) {
                    r.nd = b->ndim;
                    memcpy(r.shape, b->shape, b->ndim * sizeof r.shape[0]);
                } else {
                    r.nd = t->ndim;
                    for (uint32_t d = 0; d < t->ndim; d++) r.shape[d] = hi[d] - lo[d];
                }
                rs_vec_push(&v, r);
            }
            if (!rs_mesh_next_coord(m, fixed, coord)) break;
        }
    }
    /* the records in (rank, buffer, piece) order: they were made in piece order, so a stable counting sort
     * by buffer and then one by rank (a qsort was 1 % of issue 3's compile) */
    rs_assert(v.n < UINT32_MAX);
    uint32_t *ord = rs_xmalloc((v.n + 1) * sizeof *ord), *tmp = rs_xmalloc((v.n + 1) * sizeof *tmp);
    uint32_t nk = L->nbuffers > c->world ? L->nbuffers : c->world;
    uint32_t *cnt = rs_xmalloc(((size_t)nk + 1) * sizeof *cnt);
    for (size_t i = 0; i < v.n; i++) ord[i] = (uint32_t)i;
    bind_pass(v.v, v.n, ord, tmp, cnt, L->nbuffers, 0);
    bind_pass(v.v, v.n, tmp, ord, cnt, c->world, 1);
    free(cnt);
    free(tmp);
    c->bind_begin = rs_xcalloc(c->world + 1, sizeof *c->bind_begin);
    c->bind_buf = rs_xmalloc((v.n + 1) * sizeof *c->bind_buf);
    c->bind_shape = rs_xmalloc((v.n + 1) * sizeof *c->bind_shape);
    c->bind_nd = rs_xmalloc((v.n + 1) * sizeof *c->bind_nd);
    c->bind_memo = rs_xcalloc(c->world + 1, sizeof *c->bind_memo);
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < v.n; i++) {
        const bind_rec *r = &v.v[ord[i]];
        if (n && c->bind_buf[n - 1] == r->buffer && i && v.v[ord[i - 1]].rank == r->rank) {
            if (c->bind_nd[n - 1] != r->nd || memcmp(c->bind_shape[n - 1], r->shape, r->nd * sizeof r->shape[0])) {
                rc = pl_fail(c, r->piece, "buffer '%s' has two different shapes on rank %u (an implicit buffer "
                             "holds exactly one block per rank)", L->buffers[r->buffer].name, r->rank);
                break;
            }
            continue;
        }
        c->bind_buf[n] = r->buffer;
        c->bind_nd[n] = r->nd;
        memcpy(c->bind_shape[n], r->shape, sizeof r->shape);
        c->bind_begin[r->rank + 1] = (uint32_t)(n + 1);
        n++;
    }
    for (uint32_t r = 1; r <= c->world; r++)
        if (c->bind_begin[r] < c->bind_begin[r - 1]) c->bind_begin[r] = c->bind_begin[r - 1];
    rs_vec_free(&v);
    free(ord);
    for (size_t i = 0; i < n; i++) {
        const rs_buffer *b = &L->buffers[c->bind_buf[i]];
        if (!b->group) continue;
        if (!c->bind_mb) c->bind_mb = rs_xcalloc(n, sizeof *c->bind_mb);
        uint64_t mb = (uint64_t)rs_dtype_size(b->dtype);
        for (uint32_t d = b->group; d < c->bind_nd[i]; d++) mb *= (uint64_t)c->bind_shape[i][d];
        c->bind_mb[i] = mb;
    }
    return rc;
}

uint32_t pl_binding(const pl_ctx *c, uint32_t rank, uint32_t buffer)
{
    uint32_t lo = c->bind_begin[rank], hi = c->bind_begin[rank + 1];
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (c->bind_buf[mid] < buffer) lo = mid + 1;
        else hi = mid;
    }
    if (lo < c->bind_begin[rank + 1] && c->bind_buf[lo] == buffer) return lo - c->bind_begin[rank];
    return RS_NONE;
}

/* ---- per-tensor grids ---- */

static void build_tp(pl_ctx *c, uint32_t gi, pl_tp *x)
{
    const rs_layout *L = c->L;
    const rs_piece *p = &L->pieces[gi];
    const rs_tensor *t = &L->tensors[p->tensor];
    const rs_mesh *m = &L->meshes[p->mesh];
    memset(x, 0, sizeof *x);
    x->gi = gi;
    x->p = p;
    x->m = m;
    x->held = 1;
    uint32_t stride[PL_ND];
    uint32_t s = 1;
    for (int a = (int)m->naxes - 1; a >= 0; a--) {
        stride[a] = s;
        s *= (uint32_t)m->size[a];
    }
    uint8_t role[PL_ND] = {0}; /* 0 replicate, 1 shard, 2 pin */
    const rs_place *pl = L->places + p->place;
    for (uint32_t k = 0; k < p->nplace; k++) {
        role[pl[k].axis] = pl[k].kind == RS_PLACE_SHARD ? 1 : pl[k].kind == RS_PLACE_PIN ? 2 : 0;
        if (pl[k].kind == RS_PLACE_PIN) {
            if (pl[k].arg < 0 || pl[k].arg >= m->size[pl[k].axis]) x->held = 0;
            else x->pin_base += (uint32_t)pl[k].arg * stride[pl[k].axis];
        }
    }
    /* replicated axes: every combination, the last axis fastest (in the mesh's order: block_ranks then
     * finds its ranks sorted when the mesh lists them in order; the first axis fastest left DeepSeek-V3's
     * replicas in reverse, and their insertion sort took 2 % of issue 3's compile) */
    x->nrep = 1;
    for (uint32_t a = 0; a < m->naxes; a++)
        if (role[a] == 0) x->nrep *= (uint32_t)m->size[a];
    x->rep = pl_alloc(&c->tar, x->nrep * sizeof *x->rep);
    x->rep[0] = 0;
    uint32_t n = 1;
    for (uint32_t a = m->naxes; a-- > 0;) {
        if (role[a] != 0 || m->size[a] == 1) continue;
        uint32_t sz = (uint32_t)m->size[a];
        for (uint32_t j = n * sz; j-- > 0;) x->rep[j] = x->rep[j % n] + (j / n) * stride[a];
        n *= sz;
    }
    x->span = 1;
    /* intervals per dim, nested shards in the order written */
    int64_t slo[PL_ND], shi[PL_ND];
    rs_piece_slice(L, p, slo, shi);
    for (uint32_t d = 0; d < t->ndim; d++) {
        uint32_t K = 1;
        for (uint32_t k = 0; k < p->nplace; k++)
            if (pl[k].kind == RS_PLACE_SHARD && pl[k].dim == d) K *= (uint32_t)m->size[pl[k].axis];
        x->K[d] = K;
        x->lo[d] = pl_alloc(&c->tar, K * sizeof(int64_t));
        x->hi[d] = pl_alloc(&c->tar, K * sizeof(int64_t));
        x->lin[d] = pl_alloc(&c->tar, K * sizeof(uint32_t));
        x->lo[d][0] = slo[d];
        x->hi[d][0] = shi[d];
        x->lin[d][0] = 0;
        uint32_t cur = 1;
        for (uint32_t k = 0; k < p->nplace; k++) {
            if (pl[k].kind != RS_PLACE_SHARD || pl[k].dim != d) continue;
            uint32_t sz = (uint32_t)m->size[pl[k].axis];
            /* expand in place from the back: interval i becomes i * sz + j */
            for (uint32_t i = cur; i-- > 0;) {
                int64_t plo = x->lo[d][i], phi = x->hi[d][i];
                uint32_t lin = x->lin[d][i];
                for (uint32_t j = sz; j-- > 0;) {
                    uint32_t o = i * sz + j;
                    rs_shard_interval(plo, phi, sz, pl[k].arg, j, &x->lo[d][o], &x->hi[d][o]);
                    x->lin[d][o] = lin + j * stride[pl[k].axis];
                }
            }
            cur *= sz;
        }
        uint32_t mx = 0;
        for (uint32_t k = 0; k < K; k++)
            if (x->lin[d][k] > mx) mx = x->lin[d][k];
        x->span += mx;
    }
}

uint64_t *pl_block_cache(pl_ctx *c, uint32_t slot, uint32_t base)
{
    pl_tp *x = &c->tp[slot];
    if (!x->cache) {
        x->cache = pl_alloc(&c->tar, (size_t)x->span * 3 * sizeof *x->cache);
        memset(x->cache, 0, (size_t)x->span * 3 * sizeof *x->cache);
    }
    rs_assert(base >= x->pin_base && base - x->pin_base < x->span);
    return x->cache + (size_t)(base - x->pin_base) * 3;
}

int pl_tensor_begin(pl_ctx *c, uint32_t ti)
{
    pl_arena_reset(&c->tar);
    pl_arena_reset(&c->ar);
    pl_map_clear(&c->tcache);
    c->ti = ti;
    c->t = &c->L->tensors[ti];
    c->npiece = c->t->nsrc + c->t->ndst;
    c->tp = pl_alloc(&c->tar, (c->npiece + 1) * sizeof *c->tp);
    for (uint32_t k = 0; k < c->npiece; k++) build_tp(c, c->t->piece_begin + k, &c->tp[k]);
    return 0;
}

void pl_block_of(const pl_ctx *c, uint32_t slot, const uint32_t *ks, int64_t *lo, int64_t *hi)
{
    const pl_tp *x = &c->tp[slot];
    for (uint32_t d = 0; d < c->t->ndim; d++) {
        lo[d] = x->lo[d][ks[d]];
        hi[d] = x->hi[d][ks[d]];
    }
}

/* Ranks holding block `base` of slot, sorted by (domain, rank) (dst) or by rank (src); cached per tensor. */
static const uint32_t *block_ranks(pl_ctx *c, uint32_t slot, uint32_t base, uint32_t *n, int by_domain)
{
    const pl_tp *x = &c->tp[slot];
    uint64_t *v = pl_block_cache(c, slot, base);
    if (*v) {
        uint32_t *r = (uint32_t *)(uintptr_t)*v;
        *n = r[0];
        return r + 1;
    }
    uint32_t *r = pl_alloc(&c->tar, (x->nrep + 1) * sizeof *r);
    r[0] = x->nrep;
    for (uint32_t j = 0; j < x->nrep; j++) r[1 + j] = (uint32_t)x->m->ranks[base + x->rep[j]];
    /* insertion sort: replica lists are short and usually sorted already */
    const uint32_t *dom = c->L->topo.domain_of;
    for (uint32_t i = 2; i <= x->nrep; i++) {
        uint32_t v2 = r[i], j = i;
        uint64_t key = by_domain ? (uint64_t)dom[v2] << 32 | v2 : v2;
        while (j > 1) {
            uint64_t kp = by_domain ? (uint64_t)dom[r[j - 1]] << 32 | r[j - 1] : r[j - 1];
            if (kp <= key) break;
            r[j] = r[j - 1];
            j--;
        }
        r[j] = v2;
    }
    *v = (uint64_t)(uintptr_t)r;
    *n = x->nrep;
    return r + 1;
}

/* Candidate set of a cell: (rank, slot) pairs over the covering source pieces, by rank, first slot kept. */
static uint32_t cell_cands(pl_ctx *c, uint32_t ncover, const uint32_t *slot, uint32_t (*ks)[PL_ND])
{
    uint32_t nd = c->t->ndim;
    if (ncover == 1) {
        uint32_t base = c->tp[slot[0]].pin_base;
        for (uint32_t d = 0; d < nd; d++) base += c->tp[slot[0]].lin[d][ks[0][d]];
        uint64_t *v = pl_block_cache(c, slot[0], base) + 1;
        if (*v) return (uint32_t)(*v - 1);
        uint32_t n;
        const uint32_t *r = block_ranks(c, slot[0], base, &n, 0);
        c->tmp_u32.n = 0;
        for (uint32_t j = 0; j < n; j++) {
            rs_vec_push(&c->tmp_u32, r[j]);
            rs_vec_push(&c->tmp_u32, slot[0]);
        }
        uint32_t id = pl_intern_add(&c->cands, c->tmp_u32.v, (uint32_t)c->tmp_u32.n);
        pl_block_cache(c, slot[0], base)[1] = (uint64_t)id + 1;
        return id;
    }
    /* several covering pieces: merge their holders */
    rs_vec(uint64_t) all = {0};
    for (uint32_t i = 0; i < ncover; i++) {
        uint32_t base = c->tp[slot[i]].pin_base;
        for (uint32_t d = 0; d < nd; d++) base += c->tp[slot[i]].lin[d][ks[i][d]];
        uint32_t n;
        const uint32_t *r = block_ranks(c, slot[i], base, &n, 0);
        for (uint32_t j = 0; j < n; j++) rs_vec_push(&all, (uint64_t)r[j] << 32 | (uint64_t)i << 16 | slot[i]);
    }
    /* sort by (rank, covering order) */
    for (size_t i = 1; i < all.n; i++) {
        uint64_t v = all.v[i];
        size_t j = i;
        while (j > 0 && all.v[j - 1] > v) {
            all.v[j] = all.v[j - 1];
            j--;
        }
        all.v[j] = v;
    }
    c->tmp_u32.n = 0;
    for (size_t i = 0; i < all.n; i++) {
        uint32_t rank = (uint32_t)(all.v[i] >> 32);
        if (i && (uint32_t)(all.v[i - 1] >> 32) == rank) continue;
        rs_vec_push(&c->tmp_u32, rank);
        rs_vec_push(&c->tmp_u32, (uint32_t)(all.v[i] & 0xffff));
    }
    rs_vec_free(&all);
    return pl_intern_add(&c->cands, c->tmp_u32.v, (uint32_t)c->tmp_u32.n);
}

typedef struct {
    int64_t lo, hi;
    uint32_t kd;
    uint32_t cov, ncov; /* pairs (slot, ks) in covs */
} elem_iv;

static void fmt_box(char *buf, size_t n, uint32_t nd, const int64_t *lo, const int64_t *hi)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (uint32_t d = 0; d < nd && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld:%lld", d ? ", " : "", (long long)lo[d], (long long)hi[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Binary search of slot in a cover list sorted by slot: the interval index, or -1. */
static int64_t cov_find(const uint32_t *cv, uint32_t n, uint32_t slot)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (cv[2 * mid] < slot) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && cv[2 * lo] == slot ? (int64_t)cv[2 * lo + 1] : -1;
}

static int dst_cells(pl_ctx *c, uint32_t dslot)
{
    const pl_tp *D = &c->tp[dslot];
    const rs_tensor *t = c->t;
    uint32_t nd = t->ndim, nsrc = t->nsrc;
    if (!D->held) return 0;
    elem_iv *el[PL_ND];
    uint32_t nel[PL_ND];
    uint32_t *covs[PL_ND];
    for (uint32_t d = 0; d < nd; d++) {
        /* breakpoints: the destination's intervals and every source interval */
        uint32_t cap = 2 * D->K[d];
        for (uint32_t s = 0; s < nsrc; s++)
            if (c->tp[s].held) cap += 2 * c->tp[s].K[d];
        int64_t *bp = pl_alloc(&c->tar, (cap + 1) * sizeof *bp);
        uint32_t nb = 0;
        for (uint32_t k = 0; k < D->K[d]; k++)
            if (D->lo[d][k] < D->hi[d][k]) bp[nb++] = D->lo[d][k], bp[nb++] = D->hi[d][k];
        for (uint32_t s = 0; s < nsrc; s++) {
            if (!c->tp[s].held) continue;
            for (uint32_t k = 0; k < c->tp[s].K[d]; k++)
                if (c->tp[s].lo[d][k] < c->tp[s].hi[d][k]) bp[nb++] = c->tp[s].lo[d][k], bp[nb++] = c->tp[s].hi[d][k];
        }
        qsort(bp, nb, sizeof *bp, cmp_i64);
        uint32_t u = 0;
        for (uint32_t i = 0; i < nb; i++)
            if (!u || bp[u - 1] != bp[i]) bp[u++] = bp[i];
        /* elementary intervals inside destination intervals (ordered, non-overlapping) */
        el[d] = pl_alloc(&c->tar, (u + 1) * sizeof(elem_iv));
        nel[d] = 0;
        uint32_t k = 0;
        for (uint32_t i = 0; i + 1 < u; i++) {
            int64_t x = bp[i], y = bp[i + 1];
            while (k < D->K[d] && (D->hi[d][k] <= x || D->lo[d][k] == D->hi[d][k])) k++;
            if (k == D->K[d]) break;
            if (D->lo[d][k] > x) continue;
            el[d][nel[d]++] = (elem_iv){.lo = x, .hi = y, .kd = k};
        }
        if (nel[d] == 0) return 0; /* the destination piece is empty */
    }

    /* dims where every held source piece covers every elementary interval with its only interval: no
     * search needed there */
    uint8_t trivial[PL_ND];
    int all_trivial = 1;
    for (uint32_t d = 0; d < nd; d++) {
        trivial[d] = 1;
        for (uint32_t s = 0; s < nsrc && trivial[d]; s++)
            if (c->tp[s].held && (c->tp[s].K[d] != 1 || c->tp[s].lo[d][0] >= c->tp[s].hi[d][0] ||
                                  c->tp[s].lo[d][0] > el[d][0].lo || c->tp[s].hi[d][0] < el[d][nel[d] - 1].hi))
                trivial[d] = 0;
        if (!trivial[d]) all_trivial = 0;
    }

    /* covering source intervals per elementary interval (sorted by slot), where the cells look them up:
     * the dims that are not trivial (dim 0 when all are) */
    for (uint32_t d = 0; d < nd; d++) {
        if (trivial[d] && !(all_trivial && d == 0)) continue;
        uint32_t *cnt = pl_alloc(&c->tar, (nel[d] + 1) * sizeof *cnt);
        memset(cnt, 0, (nel[d] + 1) * sizeof *cnt);
        for (int fill = 0; fill < 2; fill++) {
            for (uint32_t s = 0; s < nsrc; s++) {
                const pl_tp *S = &c->tp[s];
                if (!S->held) continue;
                for (uint32_t q = 0; q < S->K[d]; q++) {
                    int64_t a = S->lo[d][q], b = S->hi[d][q];
                    if (a >= b) continue;
                    /* first elementary interval with lo >= a */
                    uint32_t lo = 0, hi = nel[d];
                    while (lo < hi) {
                        uint32_t mid = (lo + hi) / 2;
                        if (el[d][mid].lo < a) lo = mid + 1;
                        else hi = mid;
                    }
                    for (uint32_t e = lo; e < nel[d] && el[d][e].hi <= b; e++) {
                        if (!fill) cnt[e]++;
                        else {
                            covs[d][2 * (el[d][e].cov + el[d][e].ncov)] = s;
                            covs[d][2 * (el[d][e].cov + el[d][e].ncov) + 1] = q;
                            el[d][e].ncov++;
                        }
                    }
                }
            }
            if (!fill) {
                uint32_t tot = 0;
                for (uint32_t e = 0; e < nel[d]; e++) {
                    el[d][e].cov = tot;
                    tot += cnt[e];
                }
                covs[d] = pl_alloc(&c->tar, (2 * (size_t)tot + 2) * sizeof(uint32_t));
            }
        }
    }

    /* cells: the product of the elementary intervals */
    uint32_t idx[PL_ND] = {0};
    uint32_t es = (uint32_t)rs_dtype_size(t->dtype);
    pl_cell cell;
    memset(&cell, 0, sizeof cell);
    cell.tensor = c->ti;
    cell.ndim = nd;
    cell.es = es;
    cell.dslot = dslot;
    int64_t dlo[PL_ND], dhi[PL_ND];
    cell.dlo = dlo;
    cell.dhi = dhi;
    uint32_t cover_slot_buf[64];
    uint32_t cover_ks_buf[64][PL_ND];
    uint32_t *cover_slot = cover_slot_buf;
    uint32_t (*cover_ks)[PL_ND] = cover_ks_buf;
    if (nsrc > 64) {
        cover_slot = pl_alloc(&c->tar, nsrc * sizeof *cover_slot);
        cover_ks = pl_alloc(&c->tar, nsrc * sizeof *cover_ks);
    }
    /* The covering sources (and so the candidates) depend only on the elementary intervals of the dims
     * that have cover lists: consecutive cells that differ elsewhere (mostly the innermost dims) reuse
     * them. */
    uint8_t cdim[PL_ND];
    for (uint32_t d = 0; d < nd; d++) cdim[d] = !trivial[d] || (all_trivial && d == 0);
    uint32_t cidx[PL_ND] = {0}, ncover = 0, cand = 0;
    int have_cover = 0;
    for (;;) {
        uint64_t elems = 1;
        uint32_t base = D->pin_base;
        uint32_t best = 0;
        int same = have_cover;
        for (uint32_t d = 0; d < nd; d++) {
            const elem_iv *e = &el[d][idx[d]];
            cell.lo[d] = e->lo;
            cell.hi[d] = e->hi;
            elems *= (uint64_t)(e->hi - e->lo);
            base += D->lin[d][e->kd];
            dlo[d] = D->lo[d][e->kd];
            dhi[d] = D->hi[d][e->kd];
            if (!trivial[d] && (trivial[best] || e->ncov < el[best][idx[best]].ncov)) best = d;
            if (cdim[d] && cidx[d] != idx[d]) same = 0;
        }
        if (!same) {
            /* covering sources: the pieces of the shortest cover list present in every dim */
            ncover = 0;
            if (nd == 0) {
                for (uint32_t s = 0; s < nsrc; s++)
                    if (c->tp[s].held) cover_slot[ncover++] = s;
            } else {
                const elem_iv *eb = &el[best][idx[best]];
                for (uint32_t i = 0; i < eb->ncov; i++) {
                    uint32_t s = covs[best][2 * (eb->cov + i)];
                    int ok = 1;
                    for (uint32_t d = 0; d < nd && ok; d++) {
                        const elem_iv *e = &el[d][idx[d]];
                        int64_t q = d == best   ? (int64_t)covs[best][2 * (eb->cov + i) + 1]
                                    : trivial[d] ? 0
                                                 : cov_find(covs[d] + 2 * e->cov, e->ncov, s);
                        if (q < 0) ok = 0;
                        else cover_ks[ncover][d] = (uint32_t)q;
                    }
                    if (ok) cover_slot[ncover++] = s;
                }
            }
            cand = RS_NONE; /* made for the first cell that needs it */
            memcpy(cidx, idx, sizeof cidx);
            have_cover = 1;
        }
        if (elems > 0) {
            if (ncover == 0) {
                char box[256];
                fmt_box(box, sizeof box, nd, cell.lo, cell.hi);
                uint32_t n;
                const uint32_t *r = block_ranks(c, dslot, base, &n, 1);
                return pl_fail(c, D->gi, "tensor '%s': elements %s needed by rank %u are held by no source piece",
                               t->name, box, n ? r[0] : 0);
            }
            cell.bytes = elems * es;
            cell.dbase = base;
            cell.dr = block_ranks(c, dslot, base, &cell.ndr, 1);
            cell.ncover = ncover;
            cell.cover_slot = cover_slot;
            cell.cover_ks = cover_ks;
            if (cand == RS_NONE) cand = cell_cands(c, ncover, cover_slot, cover_ks);
            cell.cand = cand;
            if (c->pass == 1) c->st->cells++;
            if (cell.ndr && pl_route(c, &cell)) return -1;
            pl_arena_reset(&c->ar); /* the routing's scratch */
        }
        int d = (int)nd - 1;
        for (; d >= 0; d--) {
            if (++idx[d] < nel[d]) break;
            idx[d] = 0;
        }
        if (d < 0) break;
    }
    return 0;
}

int pl_tensor_cells(pl_ctx *c)
{
    const rs_tensor *t = c->t;
    for (uint32_t k = 0; k < t->ndst; k++) {
        if (dst_cells(c, t->nsrc + k)) return -1;
    }
    return 0;
}

/* ---- buffer maps ---- */

int pl_bmap_build(const rs_layout *L, uint32_t piece, const int64_t *blo, const int64_t *bhi, pl_bmap *m)
{
    const rs_piece *p = &L->pieces[piece];
    const rs_tensor *t = &L->tensors[p->tensor];
    const rs_buffer *b = &L->buffers[p->buffer];
    memset(m, 0, sizeof *m);
    m->ndim = t->ndim;
    m->es = (uint32_t)rs_dtype_size(t->dtype);
    int64_t A[PL_ND], SA[PL_ND + 1];
    uint64_t N = 1;
    for (uint32_t d = 0; d < t->ndim; d++) {
        m->blo[d] = blo[d];
        m->ext[d] = A[d] = bhi[d] - blo[d];
        N *= (uint64_t)A[d];
    }
    SA[t->ndim] = 1;
    for (int d = (int)t->ndim - 1; d >= 0; d--) SA[d] = SA[d + 1] * A[d];
    /* the buffer box: B with byte strides over the buffer shape */
    uint32_t bnd;
    int64_t B[PL_ND], SB[PL_ND + 1];
    uint64_t bstr[PL_ND];
    m->base = 0;
    if (b->ndim == 0) {
        bnd = t->ndim;
        uint64_t s = m->es;
        for (int d = (int)bnd - 1; d >= 0; d--) {
            B[d] = A[d];
            bstr[d] = s;
            s *= (uint64_t)A[d];
        }
    } else {
        bnd = b->ndim;
        uint64_t s = m->es;
        uint64_t NB = 1;
        for (int d = (int)bnd - 1; d >= 0; d--) {
            int64_t lo = p->box == RS_NONE ? 0 : L->i64[p->box + d];
            int64_t hi = p->box == RS_NONE ? b->shape[d] : L->i64[p->box + bnd + d];
            B[d] = hi - lo;
            NB *= (uint64_t)B[d];
            bstr[d] = s;
            m->base += (uint64_t)lo * s;
            s *= (uint64_t)b->shape[d];
        }
        if (NB != N) return -1;
    }
    SB[bnd] = 1;
    for (int d = (int)bnd - 1; d >= 0; d--) SB[d] = SB[d + 1] * B[d];
    m->bnd = bnd;
    m->mbytes = b->group && bnd >= b->group ? bstr[b->group - 1] : 0;
    for (uint32_t d = 0; d < bnd; d++) {
        m->bext[d] = B[d];
        m->bstr[d] = bstr[d];
    }
    if (N == 0) return 0;
    /* common refinement: the union of the suffix products must be a divisor chain */
    int64_t v[2 * PL_ND + 2];
    uint32_t nv = 0;
    for (uint32_t d = 0; d <= t->ndim; d++) v[nv++] = SA[d];
    for (uint32_t d = 0; d <= bnd; d++) v[nv++] = SB[d];
    for (uint32_t i = 1; i < nv; i++) {
        int64_t x = v[i];
        uint32_t j = i;
        while (j > 0 && v[j - 1] > x) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
    uint32_t u = 0;
    for (uint32_t i = 0; i < nv; i++)
        if (!u || v[u - 1] != v[i]) v[u++] = v[i];
    for (uint32_t i = 0; i + 1 < u; i++)
        if (v[i + 1] % v[i]) {
            m->noref = 1;
            return 0;
        }
    /* F dims, outer to inner: weight v[i], radix v[i+1] / v[i] */
    uint32_t nf = 0;
    uint32_t per_dim[PL_ND] = {0};
    for (int i = (int)u - 2; i >= 0; i--) {
        int64_t w = v[i], rad = v[i + 1] / v[i];
        uint32_t d = 0, j = 0;
        while (!(SA[d + 1] <= w && w < SA[d])) d++;
        while (!(SB[j + 1] <= w && w < SB[j])) j++;
        m->fdim[nf] = (uint8_t)d;
        m->frad[nf] = rad;
        m->fw[nf] = w / SA[d + 1];
        m->fstr[nf] = (uint64_t)(w / SB[j + 1]) * bstr[j];
        per_dim[d]++;
        nf++;
    }
    m->nf = nf;
    m->simple = 1;
    for (uint32_t d = 0; d < t->ndim; d++)
        if (per_dim[d] > 1) m->simple = 0;
    m->off0 = m->base;
    for (uint32_t k = 0; k < nf; k++) m->off0 -= (uint64_t)m->blo[m->fdim[k]] * m->fstr[k];
    return 0;
}

/* For tensor dim d: range [x, y) relative to the block, through d's F dims (first..last). Writes the
 * start digit and count of every F dim of d; returns -1 when the range is not a box of them, with the
 * cut position in *cut. */
static int dim_fbox(const pl_bmap *m, uint32_t first, uint32_t last, int64_t x, int64_t y, int64_t *start,
                    int64_t *count, int64_t *cut)
{
    uint32_t p = last + 1;
    for (uint32_t k = first; k <= last; k++)
        if ((x / m->fw[k]) % m->frad[k] != ((y - 1) / m->fw[k]) % m->frad[k]) {
            p = k;
            break;
        }
    for (uint32_t k = first; k <= last; k++) {
        if (k < p || p > last) {
            start[k] = (x / m->fw[k]) % m->frad[k];
            count[k] = 1;
        } else if (k == p) {
            if (x % m->fw[k] || y % m->fw[k]) {
                int64_t xa = (x + m->fw[k] - 1) / m->fw[k] * m->fw[k];
                *cut = x % m->fw[k] ? xa : y / m->fw[k] * m->fw[k];
                return -1;
            }
            start[k] = (x / m->fw[k]) % m->frad[k];
            count[k] = (y - x) / m->fw[k];
        } else {
            start[k] = 0;
            count[k] = m->frad[k];
        }
    }
    return 0;
}

/* Fold dims whose outer stride equals the inner span, drop unit dims. On a buffer group (members of mb
 * bytes) a dim stepping through members is never folded into one inside a member. */
static void desc_fold(rs_desc *d, uint64_t *cnt, uint64_t *str, uint32_t n, uint64_t mb)
{
    uint64_t c[PL_NF + 1], s[PL_NF + 1];
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (cnt[i] == 1 && i + 1 < n) continue;
        c[k] = cnt[i];
        s[k] = str[i];
        k++;
    }
    /* from the inside out */
    uint32_t w = k;
    for (int i = (int)k - 2; i >= 0; i--) {
        uint32_t in = (uint32_t)i + 1;
        if (s[i] == c[in] * s[in] && !(mb && s[i] >= mb && s[in] < mb)) {
            c[in] *= c[i];
            /* remove dim i */
            for (uint32_t j = (uint32_t)i; j + 1 < w; j++) {
                c[j] = c[j + 1];
                s[j] = s[j + 1];
            }
            w--;
        }
    }
    d->ndim = w;
    for (uint32_t i = 0; i < w && i < RS_DESC_MAX_DIMS; i++) {
        d->count[i] = c[i];
        d->stride[i] = s[i];
    }
}

int pl_bmap_desc(const pl_bmap *m, const int64_t *lo, const int64_t *hi, rs_desc *d)
{
    uint64_t cnt[PL_NF + 1], str[PL_NF + 1];
    memset(d, 0, sizeof *d);
    if (m->noref) {
        /* a single row run inside one row of the box */
        uint32_t nd = m->ndim;
        for (uint32_t k = 0; k + 1 < nd; k++)
            if (hi[k] - lo[k] != 1) return 0;
        uint64_t l0 = 0, n = nd ? (uint64_t)(hi[nd - 1] - lo[nd - 1]) : 1;
        for (uint32_t k = 0; k < nd; k++) l0 = l0 * (uint64_t)m->ext[k] + (uint64_t)(lo[k] - m->blo[k]);
        uint64_t bl = m->bnd ? (uint64_t)m->bext[m->bnd - 1] : 1;
        if (l0 / bl != (l0 + n - 1) / bl) return 0;
        uint64_t off = m->base, rem = l0;
        for (int j = (int)m->bnd - 1; j >= 0; j--) {
            off += (rem % (uint64_t)m->bext[j]) * m->bstr[j];
            rem /= (uint64_t)m->bext[j];
        }
        d->offset = off;
        d->ndim = 1;
        d->count[0] = n * m->es;
        d->stride[0] = 1;
        return 1;
    }
    uint64_t off = m->base;
    uint32_t n = 0;
    int64_t start[PL_NF], count[PL_NF];
    if (m->simple) {
        /* every non-unit tensor dim is one F dim: any sub-box maps directly */
        off = m->off0;
        for (uint32_t k = 0; k < m->nf; k++) {
            uint32_t dd = m->fdim[k];
            off += (uint64_t)lo[dd] * m->fstr[k];
            cnt[n] = (uint64_t)(hi[dd] - lo[dd]);
            str[n] = m->fstr[k];
            n++;
        }
    }
    for (uint32_t k = m->simple ? m->nf : 0; k < m->nf;) {
        uint32_t dd = m->fdim[k], last = k;
        while (last + 1 < m->nf && m->fdim[last + 1] == dd) last++;
        int64_t cut;
        if (dim_fbox(m, k, last, lo[dd] - m->blo[dd], hi[dd] - m->blo[dd], start, count, &cut)) return 0;
        for (uint32_t q = k; q <= last; q++) {
            off += (uint64_t)start[q] * m->fstr[q];
            cnt[n] = (uint64_t)count[q];
            str[n] = m->fstr[q];
            n++;
        }
        k = last + 1;
    }
    /* the innermost F dim has the element as its stride: make it bytes */
    if (n == 0 || str[n - 1] != m->es || (m->mbytes && str[n - 1] >= m->mbytes)) {
        cnt[n] = m->es;
        str[n] = 1;
        n++;
    } else {
        cnt[n - 1] *= m->es;
        str[n - 1] = 1;
    }
    d->offset = off;
    desc_fold(d, cnt, str, n, m->mbytes);
    if (d->ndim > PL_PD) return -1; /* the planner's ops keep at most PL_PD dims */
    return 1;
}

int pl_bmap_cut(const pl_bmap *m, const int64_t *lo, const int64_t *hi, uint32_t *dim, int64_t *cutp)
{
    if (m->noref) {
        uint32_t nd = m->ndim;
        for (uint32_t k = 0; k + 1 < nd; k++)
            if (hi[k] - lo[k] > 1) {
                *dim = k;
                *cutp = lo[k] + 1;
                return 1;
            }
        if (nd == 0) return 0;
        uint64_t l0 = 0, n = (uint64_t)(hi[nd - 1] - lo[nd - 1]);
        for (uint32_t k = 0; k < nd; k++) l0 = l0 * (uint64_t)m->ext[k] + (uint64_t)(lo[k] - m->blo[k]);
        uint64_t bl = m->bnd ? (uint64_t)m->bext[m->bnd - 1] : 1;
        if (l0 / bl == (l0 + n - 1) / bl) return 0;
        *dim = nd - 1;
        *cutp = lo[nd - 1] + (int64_t)(bl - l0 % bl);
        return 1;
    }
    int64_t start[PL_NF], count[PL_NF];
    for (uint32_t k = 0; k < m->nf;) {
        uint32_t dd = m->fdim[k], last = k;
        while (last + 1 < m->nf && m->fdim[last + 1] == dd) last++;
        int64_t cut;
        if (dim_fbox(m, k, last, lo[dd] - m->blo[dd], hi[dd] - m->blo[dd], start, count, &cut)) {
            *dim = dd;
            *cutp = m->blo[dd] + cut;
            return 1;
        }
        k = last + 1;
    }
    rs_desc d;
    if (pl_bmap_desc(m, lo, hi, &d) < 0) {
        /* too many dims after folding: halve the outermost dim that can be halved */
        for (uint32_t k = 0; k < m->ndim; k++)
            if (hi[k] - lo[k] > 1) {
                *dim = k;
                *cutp = lo[k] + (hi[k] - lo[k]) / 2;
                return 1;
            }
    }
    return 0;
}

/* ---- box splitting ---- */

static uint32_t split_rec(uint32_t nd, int64_t *lo, int64_t *hi, uint32_t k, int64_t (*out)[2 * PL_ND],
                          uint32_t n)
{
    uint32_t d = 0;
    while (d < nd && hi[d] - lo[d] <= 1) d++;
    if (k <= 1 || d == nd) {
        memcpy(out[n], lo, nd * sizeof *lo);
        memcpy(out[n] + PL_ND, hi, nd * sizeof *hi);
        return n + 1;
    }
    int64_t ext = hi[d] - lo[d], l0 = lo[d], h0 = hi[d];
    if ((uint64_t)ext >= k) {
        for (uint32_t i = 0; i < k; i++) {
            lo[d] = l0 + (int64_t)((uint64_t)ext * i / k);
            hi[d] = l0 + (int64_t)((uint64_t)ext * (i + 1) / k);
            memcpy(out[n], lo, nd * sizeof *lo);
            memcpy(out[n] + PL_ND, hi, nd * sizeof *hi);
            n++;
        }
    } else {
        for (int64_t i = 0; i < ext; i++) {
            uint32_t ki = k / (uint32_t)ext + ((uint32_t)i < k % (uint32_t)ext ? 1 : 0);
            lo[d] = l0 + i;
            hi[d] = l0 + i + 1;
            n = split_rec(nd, lo, hi, ki, out, n);
        }
    }
    lo[d] = l0;
    hi[d] = h0;
    return n;
}

uint32_t pl_box_split(uint32_t ndim, const int64_t *lo, const int64_t *hi, uint32_t k, int64_t (*out)[2 * PL_ND])
{
    int64_t l[PL_ND], h[PL_ND];
    memcpy(l, lo, ndim * sizeof *l);
    memcpy(h, hi, ndim * sizeof *h);
    return split_rec(ndim, l, h, k ? k : 1, out, 0);
}
