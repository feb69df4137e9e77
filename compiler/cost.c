/* cost.c - the cost model: lower bound of a layout (per-tensor, per-domain box unions), an event-driven
 * simulation of per-rank step programs on per-GPU links, a plan's programs and two baselines built
 * from the layout (gather-then-broadcast, direct), and plan traffic statistics. docs/cost-model.md. */
#include "cost.h"
#include "util.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GBPS_TO_BPS(x) ((x) * 1e9 / 8.0) /* Gb/s -> bytes/s */

/* qsort that accepts an empty (possibly NULL) array */
static void sort_(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 1) qsort(base, n, size, cmp);
}

void rs_cost_params_default(rs_cost_params *p, const rs_topology *topo)
{
    memset(p, 0, sizeof *p);
    p->nic_gbps = topo && topo->nic_gbps > 0 ? topo->nic_gbps : 400.0;
    p->nvlink_gbps = topo && topo->nvlink_gbps > 0 ? topo->nvlink_gbps : 3600.0;
    p->hbm_gbps = 24000.0;
    p->latency_us = 5.0;
    p->bucket_bytes = 1ull << 30;
    p->chunk_bytes = 512ull << 10;
    p->gb_roots = 1;
}

static int params_check(const rs_cost_params *p, char *err, size_t errlen)
{
    if (!(p->nic_gbps > 0) || !(p->nvlink_gbps > 0) || !(p->hbm_gbps > 0) || !(p->latency_us >= 0) ||
        !isfinite(p->nic_gbps) || !isfinite(p->nvlink_gbps) || !isfinite(p->hbm_gbps) ||
        !isfinite(p->latency_us) || p->bucket_bytes == 0) {
        snprintf(err, errlen, "cost model: bandwidths and the bucket size must be positive, latency >= 0");
        return -1;
    }
    return 0;
}

static uint64_t sat_add(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }
static uint64_t sat_mul(uint64_t a, uint64_t b)
{
    uint64_t r;
    return rs_umul_ovf(a, b, &r) ? UINT64_MAX : r;
}

/* ======================================================================================
 * Projections: a piece's block on a rank depends only on the rank's coordinates on the axes its
 * placements shard or pin. For a mesh and a set of such axes ("mask"), group the mesh's ranks by
 * their coordinates on those axes ("tuples"), with the distinct NVLink domains of each group. A
 * piece then computes one block per tuple instead of one per rank.
 * ====================================================================================== */
typedef struct {
    uint32_t mesh, mask;
    uint32_t naxes;
    uint8_t axes[RS_MAX_DIMS];
    uint32_t ntuples;
    uint32_t *rank_begin; /* [ntuples + 1] into ranks */
    uint32_t *ranks;      /* by tuple, ascending rank */
    uint32_t *dom_begin;  /* [ntuples + 1] into doms */
    uint32_t *doms;       /* distinct domains of each tuple, ascending */
    uint8_t *marked;      /* [ntuples]: bit 0 ranks marked as destination, bit 1 as source */
} proj;

typedef struct {
    const rs_layout *L;
    proj **pj; /* each allocated on its own: blocks keep pointers to them while the cache grows */
    uint32_t npj, cappj;
} projcache;

static void projcache_free(projcache *c)
{
    for (uint32_t i = 0; i < c->npj; i++) {
        free(c->pj[i]->rank_begin);
        free(c->pj[i]->ranks);
        free(c->pj[i]->dom_begin);
        free(c->pj[i]->doms);
        free(c->pj[i]->marked);
        free(c->pj[i]);
    }
    free(c->pj);
    memset(c, 0, sizeof *c);
}

static uint32_t piece_mask(const rs_layout *L, const rs_piece *p)
{
    uint32_t mask = 0;
    const rs_place *pl = L->places + p->place;
    for (uint32_t i = 0; i < p->nplace; i++)
        if (pl[i].kind == RS_PLACE_SHARD || pl[i].kind == RS_PLACE_PIN) mask |= 1u << pl[i].axis;
    return mask;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static const proj *projcache_get(projcache *c, uint32_t mesh, uint32_t mask)
{
    for (uint32_t i = 0; i < c->npj; i++)
        if (c->pj[i]->mesh == mesh && c->pj[i]->mask == mask) return c->pj[i];
    const rs_layout *L = c->L;
    const rs_mesh *m = L->meshes + mesh;
    if (c->npj == c->cappj) {
        c->cappj = c->cappj ? 2 * c->cappj : 8;
        c->pj = rs_xrealloc(c->pj, c->cappj * sizeof *c->pj);
    }
    proj *pj = rs_xcalloc(1, sizeof *pj);
    c->pj[c->npj++] = pj;
    pj->mesh = mesh;
    pj->mask = mask;
    uint64_t nt = 1;
    for (uint32_t a = 0; a < m->naxes; a++)
        if (mask >> a & 1) {
            pj->axes[pj->naxes++] = (uint8_t)a;
            nt *= (uint64_t)m->size[a];
        }
    rs_assert(nt <= m->nranks);
    pj->ntuples = (uint32_t)nt;
    uint32_t *tup = rs_xmalloc((m->nranks + 1) * sizeof *tup);
    pj->rank_begin = rs_xcalloc(nt + 1, sizeof *pj->rank_begin);
    int64_t coord[RS_MAX_DIMS];
    for (uint32_t i = 0; i < m->nranks; i++) {
        rs_mesh_coord(m, i, coord);
        uint64_t t = 0;
        for (uint32_t k = 0; k < pj->naxes; k++) t = t * (uint64_t)m->size[pj->axes[k]] + (uint64_t)coord[pj->axes[k]];
        tup[i] = (uint32_t)t;
        pj->rank_begin[t + 1]++;
    }
    for (uint64_t t = 0; t < nt; t++) pj->rank_begin[t + 1] += pj->rank_begin[t];
    pj->ranks = rs_xmalloc((m->nranks + 1) * sizeof *pj->ranks);
    uint32_t *fill = rs_xmalloc((nt + 1) * sizeof *fill);
    memcpy(fill, pj->rank_begin, nt * sizeof *fill);
    for (uint32_t i = 0; i < m->nranks; i++) pj->ranks[fill[tup[i]]++] = (uint32_t)m->ranks[i];
    /* distinct domains per tuple */
    pj->dom_begin = rs_xcalloc(nt + 1, sizeof *pj->dom_begin);
    pj->doms = rs_xmalloc((m->nranks + 1) * sizeof *pj->doms);
    uint32_t nd = 0;
    for (uint64_t t = 0; t < nt; t++) {
        uint32_t b = pj->rank_begin[t], e = pj->rank_begin[t + 1];
        sort_(pj->ranks + b, e - b, sizeof *pj->ranks, cmp_u32);
        uint32_t start = nd;
        for (uint32_t k = b; k < e; k++) pj->doms[nd++] = L->topo.domain_of[pj->ranks[k]];
        sort_(pj->doms + start, nd - start, sizeof *pj->doms, cmp_u32);
        uint32_t w = start;
        for (uint32_t k = start; k < nd; k++)
            if (k == start || pj->doms[k] != pj->doms[w - 1]) pj->doms[w++] = pj->doms[k];
        nd = w;
        pj->dom_begin[t + 1] = nd;
    }
    pj->marked = rs_xcalloc(nt + 1, 1);
    free(tup);
    free(fill);
    return pj;
}

/* Decode tuple t of pj into a full mesh coordinate (axes outside the mask at 0). */
static void proj_coord(const rs_layout *L, const proj *pj, uint32_t t, int64_t *coord)
{
    const rs_mesh *m = L->meshes + pj->mesh;
    for (uint32_t a = 0; a < m->naxes; a++) coord[a] = 0;
    for (int k = (int)pj->naxes - 1; k >= 0; k--) {
        int64_t n = m->size[pj->axes[k]];
        coord[pj->axes[k]] = (int64_t)t % n;
        t = (uint32_t)((int64_t)t / n);
    }
}

/* A non-empty block of a piece, for one tuple of its projection. */
typedef struct {
    int64_t lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
    const proj *pj;
    uint32_t tuple;
    uint32_t piece;
} pblock;

typedef rs_vec(pblock) pblock_vec;

/* Append the non-empty blocks of every piece of tensor t on one side. */
static void tensor_blocks(projcache *c, uint32_t t, rs_side side, pblock_vec *out)
{
    const rs_layout *L = c->L;
    const rs_tensor *T = L->tensors + t;
    uint32_t b = T->piece_begin + (side == RS_SRC ? 0 : T->nsrc);
    uint32_t e = b + (side == RS_SRC ? T->nsrc : T->ndst);
    int64_t coord[RS_MAX_DIMS];
    for (uint32_t pi = b; pi < e; pi++) {
        const rs_piece *p = L->pieces + pi;
        const proj *pj = projcache_get(c, p->mesh, piece_mask(L, p));
        const rs_mesh *m = L->meshes + p->mesh;
        /* visit only the tuples whose pinned coordinates match: mixed radix over the other axes */
        int64_t pin[RS_MAX_DIMS];
        int dead = 0;
        for (uint32_t k = 0; k < pj->naxes; k++) pin[k] = -1;
        const rs_place *pl = L->places + p->place;
        for (uint32_t i = 0; i < p->nplace; i++)
            if (pl[i].kind == RS_PLACE_PIN)
                for (uint32_t k = 0; k < pj->naxes; k++)
                    if (pj->axes[k] == pl[i].axis) {
                        if (pl[i].arg < 0 || pl[i].arg >= m->size[pl[i].axis] || (pin[k] >= 0 && pin[k] != pl[i].arg))
                            dead = 1;
                        pin[k] = pl[i].arg;
                    }
        if (dead) continue;
        int64_t digit[RS_MAX_DIMS];
        for (uint32_t k = 0; k < pj->naxes; k++) digit[k] = pin[k] >= 0 ? pin[k] : 0;
        for (;;) {
            uint64_t tu64 = 0;
            for (uint32_t k = 0; k < pj->naxes; k++) tu64 = tu64 * (uint64_t)m->size[pj->axes[k]] + (uint64_t)digit[k];
            uint32_t tu = (uint32_t)tu64;
            /* next tuple (last free axis fastest) */
            int k = (int)pj->naxes - 1;
            for (; k >= 0; k--) {
                if (pin[k] >= 0) continue;
                if (++digit[k] < m->size[pj->axes[k]]) break;
                digit[k] = 0;
            }
            int last = k < 0;
            proj_coord(L, pj, tu, coord);
            pblock pb;
            if (rs_piece_holds(L, p, coord) && rs_piece_block(L, p, coord, pb.lo, pb.hi) > 0) {
                for (uint32_t d = T->ndim; d < RS_MAX_DIMS; d++) pb.lo[d] = pb.hi[d] = 0;
                pb.pj = pj;
                pb.tuple = tu;
                pb.piece = pi;
                rs_vec_push(out, pb);
            }
            if (last) break;
        }
    }
}

/* ======================================================================================
 * Box volumes: union of axis-aligned boxes by a recursive slab sweep (breakpoints of dimension d,
 * boxes covering each slab, recurse on d + 1). Boxes come deduplicated; replicas repeat blocks.
 * ====================================================================================== */
typedef struct {
    int64_t lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
    uint32_t dom;
    uint32_t kind; /* 0 needed, 1 held */
} cbox;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int64_t box_vol(const cbox *b, uint32_t d0, uint32_t nd)
{
    int64_t v = 1;
    for (uint32_t d = d0; d < nd; d++) v *= b->hi[d] - b->lo[d];
    return v;
}

/* Leaf predicates over the boxes covering one cell. */
enum { PRED_ANY = 0, PRED_NEED_NOT_HELD = 1 };

static int leaf_pred(const cbox *const *bx, size_t n, int pred)
{
    if (pred == PRED_ANY) return n > 0;
    /* some domain needs the cell while no source rank of that domain holds it */
    for (size_t i = 0; i < n; i++) {
        if (bx[i]->kind != 0) continue;
        int held = 0;
        for (size_t j = 0; j < n && !held; j++) held = bx[j]->kind == 1 && bx[j]->dom == bx[i]->dom;
        if (!held) return 1;
    }
    return 0;
}

/* v[0..n) ascending: by insertion for the few points most sweeps have, else qsort */
static void sort_i64(int64_t *v, size_t n)
{
    if (n > 32) {
        qsort(v, n, sizeof *v, cmp_i64);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        int64_t x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1] > x; j--) v[j] = v[j - 1];
        v[j] = x;
    }
}

/* Index of the first of p[0..n) not below x (p ascending). */
static size_t lower_i64(const int64_t *p, size_t n, int64_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

#define SWEEP_STACK 32 /* boxes whose scratch fits on the stack */

static int64_t sweep(const cbox *const *bx, size_t n, uint32_t d, uint32_t nd, int pred)
{
    if (n == 0) return 0;
    if (d == nd) return leaf_pred(bx, n, pred);
    if (n == 1) return leaf_pred(bx, 1, pred) ? box_vol(bx[0], d, nd) : 0;
    /* every box with one extent along d (replicas, or a split along a later dim): one slab */
    size_t same = 1;
    while (same < n && bx[same]->lo[d] == bx[0]->lo[d] && bx[same]->hi[d] == bx[0]->hi[d]) same++;
    if (same == n) return bx[0]->hi[d] > bx[0]->lo[d] ? (bx[0]->hi[d] - bx[0]->lo[d]) * sweep(bx, n, d + 1, nd, pred) : 0;
    /* scratch: the breakpoints (2n), the boxes in order of their start and the active ones (n each), a
     * bucket per breakpoint (2n + 1) and each box's start breakpoint (n) */
    int64_t pbuf[2 * SWEEP_STACK];
    const cbox *bbuf[2 * SWEEP_STACK];
    uint32_t cbuf[3 * SWEEP_STACK + 1];
    int small = n <= SWEEP_STACK;
    int64_t *pts = small ? pbuf : rs_xmalloc(2 * n * sizeof *pts);
    const cbox **start = small ? bbuf : rs_xmalloc(2 * n * sizeof *start), **act = start + n;
    uint32_t *cnt = small ? cbuf : rs_xmalloc((3 * n + 1) * sizeof *cnt), *at = cnt + 2 * n + 1;
    for (size_t i = 0; i < n; i++) {
        pts[2 * i] = bx[i]->lo[d];
        pts[2 * i + 1] = bx[i]->hi[d];
    }
    sort_i64(pts, 2 * n);
    size_t np = 0;
    for (size_t i = 0; i < 2 * n; i++)
        if (np == 0 || pts[i] != pts[np - 1]) pts[np++] = pts[i];
    /* the boxes by start: a stable counting sort over the breakpoints */
    memset(cnt, 0, (np + 1) * sizeof *cnt);
    for (size_t i = 0; i < n; i++) cnt[(at[i] = (uint32_t)lower_i64(pts, np, bx[i]->lo[d])) + 1]++;
    for (size_t k = 0; k < np; k++) cnt[k + 1] += cnt[k];
    for (size_t i = 0; i < n; i++) start[cnt[at[i]]++] = bx[i];
    /* slab by slab, the active boxes (those with lo <= x0 and hi >= x1) kept up to date: boxes ending at x0
     * leave, boxes starting there join; while the set stays the same, so does the cross-section */
    int64_t vol = 0, v = 0;
    size_t na = 0, s = 0;
    int valid = 0;
    for (size_t k = 0; k + 1 < np; k++) {
        int64_t x0 = pts[k], x1 = pts[k + 1];
        size_t w = 0;
        for (size_t j = 0; j < na; j++)
            if (act[j]->hi[d] > x0) act[w++] = act[j];
        int changed = w != na;
        na = w;
        for (; s < n && start[s]->lo[d] == x0; s++)
            if (start[s]->hi[d] > x0) act[na++] = start[s], changed = 1;
        if (!na) {
            valid = 0;
            continue;
        }
        if (changed || !valid) {
            v = sweep(act, na, d + 1, nd, pred);
            valid = 1;
        }
        vol += (x1 - x0) * v;
    }
    if (!small) {
        free(cnt);
        free(start);
        free(pts);
    }
    return vol;
}

static int64_t boxes_volume(const cbox *const *bx, size_t n, uint32_t nd, int pred)
{
    return sweep(bx, n, 0, nd, pred);
}

static _Thread_local uint32_t box_ndim_g; /* dimension count for the qsort comparators below (set before each
                                           * sort; per thread: the gather-broadcast baseline runs on its own) */

static int cmp_box_geom(const cbox *x, const cbox *y)
{
    for (uint32_t d = 0; d < box_ndim_g; d++) {
        if (x->lo[d] != y->lo[d]) return x->lo[d] < y->lo[d] ? -1 : 1;
        if (x->hi[d] != y->hi[d]) return x->hi[d] < y->hi[d] ? -1 : 1;
    }
    return 0;
}

static int cmp_cbox_dom(const void *a, const void *b)
{
    const cbox *x = a, *y = b;
    if (x->dom != y->dom) return x->dom < y->dom ? -1 : 1;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    return cmp_box_geom(x, y);
}

static int cmp_cboxp_geom(const void *a, const void *b)
{
    return cmp_box_geom(*(const cbox *const *)a, *(const cbox *const *)b);
}

typedef rs_vec(cbox) cbox_vec;
typedef rs_vec(const cbox *) cboxp_vec;
typedef rs_vec(uint32_t) u32_vec;

/* Volume of the union of the boxes in ptrs (deduplicated here; the array is reordered). */
static int64_t union_volume(cboxp_vec *ptrs, uint32_t nd)
{
    if (ptrs->n == 0) return 0;
    box_ndim_g = nd;
    sort_(ptrs->v, ptrs->n, sizeof *ptrs->v, cmp_cboxp_geom);
    size_t w = 0;
    for (size_t i = 0; i < ptrs->n; i++)
        if (w == 0 || cmp_box_geom(ptrs->v[i], ptrs->v[w - 1]) != 0) ptrs->v[w++] = ptrs->v[i];
    ptrs->n = w;
    return boxes_volume(ptrs->v, w, nd, PRED_ANY);
}

typedef struct {
    cbox b;
    uint32_t rbegin, nranks; /* into tinfo.ranks, ascending */
    uint64_t rr;             /* round-robin counter over the ranks (source blocks: holders) */
} dblk;

typedef struct {
    rs_vec(dblk) dst, src;
    u32_vec ranks;
    pblock_vec tmp;
    cboxp_vec ptrs;
    uint32_t nd;
    uint64_t dts;
    int64_t need_vol; /* distinct elements any destination needs */
} tinfo;

static void tinfo_free(tinfo *ti)
{
    rs_vec_free(&ti->dst);
    rs_vec_free(&ti->src);
    rs_vec_free(&ti->ranks);
    rs_vec_free(&ti->tmp);
    rs_vec_free(&ti->ptrs);
}

static int cmp_pblock_geom(const void *a, const void *b)
{
    const pblock *x = a, *y = b;
    for (uint32_t d = 0; d < box_ndim_g; d++) {
        if (x->lo[d] != y->lo[d]) return x->lo[d] < y->lo[d] ? -1 : 1;
        if (x->hi[d] != y->hi[d]) return x->hi[d] < y->hi[d] ? -1 : 1;
    }
    return 0;
}

static void distinct_side(projcache *c, uint32_t t, rs_side side, tinfo *ti)
{
    ti->tmp.n = 0;
    tensor_blocks(c, t, side, &ti->tmp);
    box_ndim_g = ti->nd;
    sort_(ti->tmp.v, ti->tmp.n, sizeof *ti->tmp.v, cmp_pblock_geom);
    for (size_t i = 0; i < ti->tmp.n;) {
        size_t j = i;
        while (j < ti->tmp.n && cmp_pblock_geom(&ti->tmp.v[i], &ti->tmp.v[j]) == 0) j++;
        dblk d = {0};
        memcpy(d.b.lo, ti->tmp.v[i].lo, sizeof d.b.lo);
        memcpy(d.b.hi, ti->tmp.v[i].hi, sizeof d.b.hi);
        d.rbegin = (uint32_t)ti->ranks.n;
        for (size_t k = i; k < j; k++) {
            const proj *pj = ti->tmp.v[k].pj;
            uint32_t tu = ti->tmp.v[k].tuple;
            for (uint32_t q = pj->rank_begin[tu]; q < pj->rank_begin[tu + 1]; q++) rs_vec_push(&ti->ranks, pj->ranks[q]);
        }
        uint32_t *rk = ti->ranks.v + d.rbegin;
        size_t n = ti->ranks.n - d.rbegin;
        sort_(rk, n, sizeof *rk, cmp_u32);
        size_t w = 0;
        for (size_t k = 0; k < n; k++)
            if (w == 0 || rk[k] != rk[w - 1]) rk[w++] = rk[k];
        ti->ranks.n = d.rbegin + w;
        d.nranks = (uint32_t)w;
        if (side == RS_SRC) rs_vec_push(&ti->src, d);
        else rs_vec_push(&ti->dst, d);
        i = j;
    }
}

static void tinfo_build(projcache *c, uint32_t t, tinfo *ti)
{
    const rs_tensor *T = c->L->tensors + t;
    ti->nd = T->ndim;
    ti->dts = (uint64_t)rs_dtype_size(T->dtype);
    ti->dst.n = ti->src.n = ti->ranks.n = 0;
    distinct_side(c, t, RS_DST, ti);
    distinct_side(c, t, RS_SRC, ti);
    ti->ptrs.n = 0;
    for (size_t i = 0; i < ti->dst.n; i++) rs_vec_push(&ti->ptrs, &ti->dst.v[i].b);
    ti->need_vol = union_volume(&ti->ptrs, ti->nd);
}

static int rank_in(const uint32_t *rk, uint32_t n, uint32_t r)
{
    return bsearch(&r, rk, n, sizeof *rk, cmp_u32) != NULL;
}

static int64_t box_intersect(const cbox *a, const cbox *b, uint32_t nd)
{
    int64_t v = 1;
    for (uint32_t d = 0; d < nd; d++) {
        int64_t lo = a->lo[d] > b->lo[d] ? a->lo[d] : b->lo[d];
        int64_t hi = a->hi[d] < b->hi[d] ? a->hi[d] : b->hi[d];
        if (hi <= lo) return 0;
        v *= hi - lo;
    }
    return v;
}

/* Distinct-volume factor of a tensor's source blocks: |union| / sum of volumes (1 unless source pieces
 * overlap, in which case every overlapping block contributes pro rata). */
static double src_overlap_factor(tinfo *ti)
{
    double sum = 0;
    ti->ptrs.n = 0;
    for (size_t i = 0; i < ti->src.n; i++) {
        sum += (double)box_vol(&ti->src.v[i].b, 0, ti->nd);
        rs_vec_push(&ti->ptrs, &ti->src.v[i].b);
    }
    if (sum <= 0) return 1;
    double u = (double)union_volume(&ti->ptrs, ti->nd);
    return u < sum ? u / sum : 1;
}

typedef struct {
    uint64_t key, bytes;
    uint32_t first, n, off; /* off: its ranks in the pool */
} hset;

#define HSET_SUBSETS 4096 /* distinct holder sets up to which each one's subsets are summed (quadratic) */

/* Ranks a[0..na) all among b[0..nb) (both ascending). */
static int ranks_subset(const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb)
{
    uint32_t j = 0;
    for (uint32_t i = 0; i < na; i++) {
        while (j < nb && b[j] < a[i]) j++;
        if (j == nb || b[j] != a[i]) return 0;
        j++;
    }
    return 1;
}

static int cmp_hset(const void *x, const void *y)
{
    const hset *a = x, *b = y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    if (a->n != b->n) return a->n < b->n ? -1 : 1;
    return a->first < b->first ? -1 : a->first > b->first;
}

/* What one tensor adds to the bound: needed, model and distinct bytes; bytes per needing domain; bytes only
 * one rank holds (per rank, in order); holder sets of several ranks (their ranks in rk). */
typedef rs_vec(uint64_t) u64_vec;
typedef struct {
    uint64_t need, model, distinct;
    u64_vec dom;  /* domain, bytes, ... */
    u64_vec held; /* rank, bytes, ... */
    rs_vec(hset) hs;
    u32_vec rk;
} tadd;

/* The per-tensor figures depend only on the tensor's blocks (boxes, projections and tuples, both sides) and
 * element size: a model's layers repeat them (DeepSeek-V3's stacked experts: 792 tensors, 3 of 4 alike on
 * each stage), so a tensor whose blocks equal an earlier one's adds what that one added (found by a hash of
 * the blocks, confirmed by comparing them; kept for LB_MEMO_WORDS words of blocks at most). */
typedef struct {
    uint64_t h;
    size_t sig, nsig;                    /* its words in sigs */
    uint64_t need, model, distinct;
    size_t dom, ndom, held, nheld, hs, nhs, rk, nrk; /* its entries in the pools below */
} lbmemo;
#define LB_MEMO_WORDS ((size_t)1 << 21)
typedef struct {
    u64_vec sigs, dom, held;
    rs_vec(hset) hs;
    u32_vec rk;
    rs_vec(lbmemo) v;
    uint32_t *slot; /* open addressing: memo index + 1 (0: empty) */
    uint32_t cap;
} lbmemo_tab;

/* The words of a tensor's blocks (dst blocks [0, ndst) of blk, then src): element size, dims, counts, and
 * per block its box, projection and tuple. */
static void lb_sig(const pblock_vec *blk, size_t ndst, uint32_t nd, uint64_t dts, u64_vec *w)
{
    w->n = 0;
    rs_vec_reserve(w, 4 + blk->n * (2 * (size_t)nd + 2));
    uint64_t *o = w->v;
    size_t k = 0;
    o[k++] = dts, o[k++] = nd, o[k++] = ndst, o[k++] = blk->n - ndst;
    for (size_t i = 0; i < blk->n; i++) {
        const pblock *pb = &blk->v[i];
        for (uint32_t d = 0; d < nd; d++) o[k++] = (uint64_t)pb->lo[d], o[k++] = (uint64_t)pb->hi[d];
        o[k++] = (uint64_t)(uintptr_t)pb->pj;
        o[k++] = pb->tuple;
    }
    w->n = k;
}

static const lbmemo *lb_find(const lbmemo_tab *T, const u64_vec *w, uint64_t h)
{
    if (!T->cap) return NULL;
    for (uint32_t i = (uint32_t)h & (T->cap - 1);; i = (i + 1) & (T->cap - 1)) {
        if (!T->slot[i]) return NULL;
        const lbmemo *m = &T->v.v[T->slot[i] - 1];
        if (m->h == h && m->nsig == w->n && !memcmp(T->sigs.v + m->sig, w->v, w->n * sizeof *w->v)) return m;
    }
}

static void lb_keep(lbmemo_tab *T, const u64_vec *w, uint64_t h, const tadd *a)
{
    if (T->sigs.n + w->n > LB_MEMO_WORDS) return;
    if (2 * (T->v.n + 1) > T->cap) {
        uint32_t ncap = T->cap ? 2 * T->cap : 256;
        free(T->slot);
        T->slot = rs_xcalloc(ncap, sizeof *T->slot);
        T->cap = ncap;
        for (size_t q = 0; q < T->v.n; q++) {
            uint32_t i = (uint32_t)T->v.v[q].h & (ncap - 1);
            while (T->slot[i]) i = (i + 1) & (ncap - 1);
            T->slot[i] = (uint32_t)q + 1;
        }
    }
    lbmemo m = {h, T->sigs.n, w->n, a->need, a->model, a->distinct, T->dom.n, a->dom.n, T->held.n, a->held.n,
                T->hs.n, a->hs.n, T->rk.n, a->rk.n};
    for (size_t i = 0; i < w->n; i++) rs_vec_push(&T->sigs, w->v[i]);
    for (size_t i = 0; i < a->dom.n; i++) rs_vec_push(&T->dom, a->dom.v[i]);
    for (size_t i = 0; i < a->held.n; i++) rs_vec_push(&T->held, a->held.v[i]);
    for (size_t i = 0; i < a->hs.n; i++) rs_vec_push(&T->hs, a->hs.v[i]);
    for (size_t i = 0; i < a->rk.n; i++) rs_vec_push(&T->rk, a->rk.v[i]);
    uint32_t i = (uint32_t)h & (T->cap - 1);
    while (T->slot[i]) i = (i + 1) & (T->cap - 1);
    rs_vec_push(&T->v, m);
    T->slot[i] = (uint32_t)T->v.n;
}

static void lbmemo_free(lbmemo_tab *T)
{
    rs_vec_free(&T->sigs);
    rs_vec_free(&T->dom);
    rs_vec_free(&T->held);
    rs_vec_free(&T->hs);
    rs_vec_free(&T->rk);
    rs_vec_free(&T->v);
    free(T->slot);
}

/* Scratch of the per-tensor computation (kept from tensor to tensor). */
typedef struct {
    uint64_t *dom_need; /* (only to stamp: the domains needing the tensor) */
    uint32_t *dom_stamp;
    uint8_t *dom_disjoint;
    cbox_vec boxes;
    cboxp_vec ptrs;
    tinfo ti;
    u32_vec mult;
} lbscratch;

/* What tensor t adds (into a, cleared first), from its blocks blk: dst blocks [0, ndst), then src. */
static void tensor_adds(projcache *c, uint32_t t, const pblock_vec *blk, size_t ndst, lbscratch *S, tadd *a)
{
    const rs_layout *L = c->L;
    const rs_tensor *T = L->tensors + t;
    uint64_t dts = (uint64_t)rs_dtype_size(T->dtype);
    uint32_t nd = T->ndim;
    cbox_vec *bx = &S->boxes;
    cboxp_vec *px = &S->ptrs;
    a->need = a->model = a->distinct = 0;
    a->dom.n = a->held.n = a->hs.n = a->rk.n = 0;
    bx->n = 0;
    for (size_t i = 0; i < ndst; i++) {
        const pblock *pb = &blk->v[i];
        const proj *pj = pb->pj;
        for (uint32_t k = pj->dom_begin[pb->tuple]; k < pj->dom_begin[pb->tuple + 1]; k++) {
            cbox b;
            memcpy(b.lo, pb->lo, sizeof b.lo);
            memcpy(b.hi, pb->hi, sizeof b.hi);
            b.dom = pj->doms[k];
            b.kind = 0;
            rs_vec_push(bx, b);
            S->dom_stamp[b.dom] = t;
        }
    }
    size_t nneed = bx->n;
    for (size_t i = ndst; i < blk->n; i++) {
        const pblock *pb = &blk->v[i];
        const proj *pj = pb->pj;
        for (uint32_t k = pj->dom_begin[pb->tuple]; k < pj->dom_begin[pb->tuple + 1]; k++) {
            if (S->dom_stamp[pj->doms[k]] != t) continue; /* held where nobody needs it */
            cbox b;
            memcpy(b.lo, pb->lo, sizeof b.lo);
            memcpy(b.hi, pb->hi, sizeof b.hi);
            b.dom = pj->doms[k];
            b.kind = 1;
            rs_vec_push(bx, b);
        }
    }
    if (nneed == 0) return;
    int any_held = bx->n > nneed;
    box_ndim_g = nd;
    sort_(bx->v, bx->n, sizeof *bx->v, cmp_cbox_dom);
    size_t w = 0;
    for (size_t i = 0; i < bx->n; i++)
        if (w == 0 || cmp_cbox_dom(&bx->v[i], &bx->v[w - 1]) != 0) bx->v[w++] = bx->v[i];
    bx->n = w;
    /* per domain: |U_a \ H_a| = |U_a u H_a| - |H_a| */
    for (size_t i = 0; i < bx->n;) {
        size_t j = i;
        while (j < bx->n && bx->v[j].dom == bx->v[i].dom) j++;
        px->n = 0;
        size_t nheld = 0;
        for (size_t k = i; k < j; k++) {
            rs_vec_push(px, &bx->v[k]);
            nheld += bx->v[k].kind == 1;
        }
        int64_t v = union_volume(px, nd);
        int64_t vsum = 0;
        for (size_t k = i; k < j; k++) vsum += bx->v[k].kind == 0 ? box_vol(&bx->v[k], 0, nd) : 0;
        S->dom_disjoint[bx->v[i].dom] = !nheld && vsum == v; /* its needed boxes do not overlap */
        if (nheld) {
            px->n = 0;
            for (size_t k = i; k < j; k++)
                if (bx->v[k].kind == 1) rs_vec_push(px, &bx->v[k]);
            v -= union_volume(px, nd);
        }
        uint64_t bytes = sat_mul((uint64_t)v, dts);
        rs_vec_push(&a->dom, bx->v[i].dom);
        rs_vec_push(&a->dom, bytes);
        a->need = sat_add(a->need, bytes);
        i = j;
    }
    /* distinct bytes needed anywhere, and needed from outside some domain */
    px->n = 0;
    for (size_t k = 0; k < bx->n; k++)
        if (bx->v[k].kind == 0) rs_vec_push(px, &bx->v[k]);
    int64_t model = union_volume(px, nd);
    a->model = sat_mul((uint64_t)model, dts);
    int64_t distinct = model;
    if (any_held) {
        px->n = 0;
        for (size_t k = 0; k < bx->n; k++) rs_vec_push(px, &bx->v[k]);
        distinct = boxes_volume(px->v, px->n, nd, PRED_NEED_NOT_HELD);
    }
    a->distinct = sat_mul((uint64_t)distinct, dts);
    /* bytes only one rank holds: without relays they leave its NIC once per other domain needing
     * them (skipped for tensors whose source blocks overlap: a smaller, still valid figure) */
    tinfo *tip = &S->ti;
    tinfo_build(c, t, tip);
    if (src_overlap_factor(tip) < 1) return;
    /* (only domains whose needed boxes are disjoint, where the volume is a plain sum; others are
     * skipped, which again only lowers the figure) */
    /* the needed boxes of those domains, each distinct box once with the number of domains */
    px->n = 0;
    for (size_t k = 0; k < bx->n; k++)
        if (bx->v[k].kind == 0 && S->dom_disjoint[bx->v[k].dom]) rs_vec_push(px, &bx->v[k]);
    box_ndim_g = nd;
    sort_(px->v, px->n, sizeof *px->v, cmp_cboxp_geom);
    S->mult.n = 0;
    size_t nu = 0;
    for (size_t k = 0; k < px->n; k++) {
        if (nu && cmp_box_geom(px->v[k], px->v[nu - 1]) == 0) {
            S->mult.v[nu - 1]++;
            continue;
        }
        px->v[nu++] = px->v[k];
        rs_vec_push(&S->mult, 1);
    }
    px->n = nu;
    for (size_t j = 0; j < tip->src.n; j++) {
        const dblk *sb = &tip->src.v[j];
        const uint32_t *hr = &tip->ranks.v[sb->rbegin];
        int64_t v = 0;
        for (size_t k = 0; k < px->n; k++) v += (int64_t)S->mult.v[k] * box_intersect(px->v[k], &sb->b, nd);
        /* (a holder's own domain is never among them: where it needs part of the tensor, the holder's
         * block is among its held boxes, so it is not disjoint) */
        uint64_t key = 14695981039346656037ull; /* FNV-1a of the (ascending) holder ranks */
        for (uint32_t i = 0; i < sb->nranks; i++) key = (key ^ hr[i]) * 1099511628211ull;
        uint64_t bytes = sat_mul((uint64_t)v, dts);
        if (sb->nranks == 1) {
            rs_vec_push(&a->held, hr[0]);
            rs_vec_push(&a->held, bytes);
        } else if (v > 0) {
            hset e = {key, bytes, hr[0], sb->nranks, (uint32_t)a->rk.n};
            rs_vec_push(&a->hs, e);
            for (uint32_t i = 0; i < sb->nranks; i++) rs_vec_push(&a->rk, hr[i]);
        }
    }
}

int rs_cost_lower_bound(const rs_layout *L, const rs_cost_params *p, rs_cost_bound *out, char *err,
                        size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->dst_domain = RS_NONE;
    if (params_check(p, err, errlen)) return -1;
    uint32_t world = L->topo.world, ndom = L->topo.ndomains;
    uint8_t *is_dst = rs_xcalloc(world + 1, 1), *is_src = rs_xcalloc(world + 1, 1);
    uint64_t *dom_need = rs_xcalloc(ndom + 1, sizeof *dom_need);
    uint32_t *dom_stamp = rs_xmalloc((ndom + 1) * sizeof *dom_stamp);
    for (uint32_t a = 0; a < ndom; a++) dom_stamp[a] = RS_NONE;
    projcache c = {.L = L};
    pblock_vec blk = {0};
    uint64_t *held_only = rs_xcalloc(world + 1, sizeof *held_only);
    uint8_t *dom_disjoint = rs_xcalloc(ndom + 1, 1);
    /* bytes only a set of several ranks holds (one entry per source block, merged by rank set below) */
    rs_vec(hset) hsets = {0};
    u32_vec hpool = {0};

    lbscratch S;
    memset(&S, 0, sizeof S);
    S.dom_need = dom_need, S.dom_stamp = dom_stamp, S.dom_disjoint = dom_disjoint;
    lbmemo_tab memo = {0};
    tadd ad = {0};
    u64_vec sig = {0};
    for (uint32_t t = 0; t < L->ntensors; t++) {
        const rs_tensor *T = L->tensors + t;
        blk.n = 0;
        tensor_blocks(&c, t, RS_DST, &blk);
        size_t ndst = blk.n;
        tensor_blocks(&c, t, RS_SRC, &blk);
        for (size_t i = 0; i < blk.n; i++) {
            const pblock *pb = &blk.v[i];
            proj *pj = (proj *)pb->pj;
            uint8_t bit = i < ndst ? 1 : 2;
            if (pj->marked[pb->tuple] & bit) continue;
            pj->marked[pb->tuple] |= bit;
            uint8_t *mark = i < ndst ? is_dst : is_src;
            for (uint32_t k = pj->rank_begin[pb->tuple]; k < pj->rank_begin[pb->tuple + 1]; k++) mark[pj->ranks[k]] = 1;
        }
        lb_sig(&blk, ndst, T->ndim, (uint64_t)rs_dtype_size(T->dtype), &sig);
        uint64_t h = rs_hash64(sig.v, sig.n * sizeof *sig.v, 0x6c62);
        const lbmemo *m = lb_find(&memo, &sig, h);
        uint64_t need, model, distinct;
        const uint64_t *dm, *ho;
        const hset *hs;
        const uint32_t *rk;
        size_t ndm, nho, nhs;
        if (m) {
            need = m->need, model = m->model, distinct = m->distinct;
            dm = memo.dom.v + m->dom, ndm = m->ndom, ho = memo.held.v + m->held, nho = m->nheld;
            hs = memo.hs.v + m->hs, nhs = m->nhs, rk = memo.rk.v + m->rk;
        } else {
            tensor_adds(&c, t, &blk, ndst, &S, &ad);
            lb_keep(&memo, &sig, h, &ad);
            need = ad.need, model = ad.model, distinct = ad.distinct;
            dm = ad.dom.v, ndm = ad.dom.n, ho = ad.held.v, nho = ad.held.n, hs = ad.hs.v, nhs = ad.hs.n, rk = ad.rk.v;
        }
        out->need_bytes = sat_add(out->need_bytes, need);
        out->model_bytes = sat_add(out->model_bytes, model);
        out->distinct_bytes = sat_add(out->distinct_bytes, distinct);
        for (size_t i = 0; i < ndm; i += 2) dom_need[dm[i]] = sat_add(dom_need[dm[i]], dm[i + 1]);
        for (size_t i = 0; i < nho; i += 2) held_only[ho[i]] = sat_add(held_only[ho[i]], ho[i + 1]);
        for (size_t i = 0; i < nhs; i++) {
            hset e = hs[i];
            e.off = (uint32_t)hpool.n;
            rs_vec_push(&hsets, e);
            for (uint32_t k = 0; k < hs[i].n; k++) rs_vec_push(&hpool, rk[hs[i].off + k]);
        }
    }
    lbmemo_free(&memo);
    rs_vec_free(&ad.dom);
    rs_vec_free(&ad.held);
    rs_vec_free(&ad.hs);
    rs_vec_free(&ad.rk);
    rs_vec_free(&sig);
    tinfo_free(&S.ti);
    rs_vec_free(&S.ptrs);
    rs_vec_free(&S.boxes);
    rs_vec_free(&S.mult);

    uint32_t *recv = rs_xcalloc(ndom + 1, sizeof *recv);
    for (uint32_t r = 0; r < world; r++) {
        out->ndst_gpus += is_dst[r];
        out->nsrc_gpus += is_src[r];
        if (is_dst[r]) recv[L->topo.domain_of[r]]++;
    }
    double nic = GBPS_TO_BPS(p->nic_gbps);
    for (uint32_t a = 0; a < ndom; a++) {
        if (!recv[a]) continue;
        out->ndomains++;
        double s = (double)dom_need[a] / (nic * recv[a]);
        if (out->dst_domain == RS_NONE || s > out->dst_s) {
            out->dst_s = s;
            out->dst_domain = a;
            out->dst_domain_bytes = dom_need[a];
            out->dst_domain_gpus = recv[a];
        }
    }
    if (out->nsrc_gpus) {
        out->src_s = (double)out->distinct_bytes / (nic * out->nsrc_gpus);
        out->src_norelay_s = (double)out->need_bytes / (nic * out->nsrc_gpus);
    }
    out->holder_rank = RS_NONE;
    for (uint32_t r = 0; r < world; r++)
        if (held_only[r] > out->holder_bytes || (out->holder_rank == RS_NONE && held_only[r])) {
            out->holder_bytes = held_only[r];
            out->holder_rank = r;
        }
    out->holder_norelay_s = (double)out->holder_bytes / nic;
    /* sets of several holders: the same per NIC of the set (reported; the planner's relay choice does not
     * use it). Entries of one set are merged by (key, size, first rank); a set's figure counts also what
     * its members alone hold and, up to HSET_SUBSETS sets, what the sets inside it hold (a pipeline
     * stage's replicas of a norm: with its TP shards' replica sets and its ranks' own experts). */
    sort_(hsets.v, hsets.n, sizeof *hsets.v, cmp_hset);
    size_t m = 0;
    for (size_t i = 0; i < hsets.n;) {
        size_t j = i + 1;
        for (; j < hsets.n && !cmp_hset(&hsets.v[i], &hsets.v[j]); j++)
            hsets.v[i].bytes = sat_add(hsets.v[i].bytes, hsets.v[j].bytes);
        hsets.v[m++] = hsets.v[i];
        i = j;
    }
    out->group_first = RS_NONE;
    for (size_t i = 0; i < m; i++) {
        const hset *H = &hsets.v[i];
        const uint32_t *hr = hpool.v + H->off;
        uint64_t bytes = H->bytes;
        for (uint32_t k = 0; k < H->n; k++) bytes = sat_add(bytes, held_only[hr[k]]);
        if (m <= HSET_SUBSETS)
            for (size_t j = 0; j < m; j++) {
                const hset *G = &hsets.v[j];
                if (j != i && G->n < H->n && G->first >= H->first && ranks_subset(hpool.v + G->off, G->n, hr, H->n))
                    bytes = sat_add(bytes, G->bytes);
            }
        double s = (double)bytes / (nic * H->n);
        if (out->group_first == RS_NONE || s > out->group_norelay_s) {
            out->group_norelay_s = s;
            out->group_first = H->first;
            out->group_nranks = H->n;
            out->group_bytes = bytes;
        }
    }
    out->bound_s = out->dst_s > out->src_s ? out->dst_s : out->src_s;
    out->bound_norelay_s = out->dst_s > out->src_norelay_s ? out->dst_s : out->src_norelay_s;
    if (out->holder_norelay_s > out->bound_norelay_s) out->bound_norelay_s = out->holder_norelay_s;

    free(recv);
    free(held_only);
    free(dom_disjoint);
    rs_vec_free(&hsets);
    rs_vec_free(&hpool);
    rs_vec_free(&blk);
    projcache_free(&c);
    free(dom_stamp);
    free(dom_need);
    free(is_src);
    free(is_dst);
    return 0;
}

/* ======================================================================================
 * The simulation. Programs: per rank, steps on lanes (each lane runs its steps in order); a step
 * waits for listed steps, then (1) packs (its HBM bytes at device-memory bandwidth), (2) runs its
 * messages as one group (a message flows once both its endpoints' steps have posted; the group ends
 * when all its messages have), (3) unpacks, then (4) an optional fixed delay. Links: each GPU's NIC
 * out and in, NVLink out and in, and its HBM. A message between two ranks of one NVLink domain uses
 * their NVLink links, otherwise their NICs, whatever the lane. Each link serves the messages on it
 * by processor sharing (n messages: bandwidth / n each); a message occupies its sender's out-link
 * and its receiver's in-link, and is done when it has passed both. A message counts latency x
 * bandwidth extra bytes on each link, so a link's busy time is the sum over its messages of
 * bytes / bandwidth + latency, and a round of messages with no other constraint takes the maximum
 * over links of that sum. Each link keeps a virtual clock (the service each of its messages has
 * received), so every event costs O(log n).
 * ====================================================================================== */
#define SIM_LANES 18 /* a plan uses 2; the gather-broadcast baseline one per broadcast root + 2 */

typedef struct {
    uint32_t rank;
    uint8_t lane;
    double pre, post; /* bytes moved through HBM before the group and after it */
    double delay;     /* seconds after the unpack */
} sstep;
typedef struct {
    uint32_t from, to; /* step ids */
    double bytes;
} smsg;
typedef struct {
    uint32_t step, on;
} swait;

typedef struct {
    uint32_t world;
    const uint32_t *domain_of;
    rs_vec(sstep) steps;
    rs_vec(smsg) msgs;
    rs_vec(swait) waits;
} ssim;

static uint32_t ssim_step(ssim *S, uint32_t rank, int lane)
{
    sstep s = {.rank = rank, .lane = (uint8_t)lane};
    rs_vec_push(&S->steps, s);
    return (uint32_t)(S->steps.n - 1);
}
static void ssim_msg(ssim *S, uint32_t from, uint32_t to, double bytes)
{
    smsg m = {from, to, bytes};
    rs_vec_push(&S->msgs, m);
}
static void ssim_wait(ssim *S, uint32_t step, uint32_t on)
{
    swait w = {step, on};
    rs_vec_push(&S->waits, w);
}
static void ssim_free(ssim *S)
{
    rs_vec_free(&S->steps);
    rs_vec_free(&S->msgs);
    rs_vec_free(&S->waits);
}

enum { PT_MSG, PT_PRE, PT_POST };

/* A part: a message's (or a pack's) passage over one link. Its slot is reused once it is served: only
 * the parts in flight take memory (the 2.5 T MoE's gather-broadcast baseline made 50 M parts, 800 MB,
 * when each had a slot of its own); seq, the order in which parts were made, breaks ties as the slot
 * number did then. */
typedef struct {
    double tag;     /* virtual time of the link at which the part is served */
    uint64_t seq;   /* parts made before it */
    uint32_t owner; /* message or step id */
    uint8_t type;
} part;

typedef struct {
    double V, t_last, bw; /* virtual clock, when it was last advanced, bandwidth */
    uint32_t n;           /* parts being served */
    uint32_t *h;          /* min-heap of part ids by (tag, id) */
    size_t cap;
    int32_t gpos;         /* position in the heap of links, -1 when idle */
    double next;          /* real time of its next completion */
} plink;

typedef struct {
    double t;
    uint32_t step;
} timer;

typedef struct {
    const ssim *S;
    double now;
    double bw[RS_NLINK_KINDS];
    double lat_s;
    rs_vec(part) parts;
    u32_vec free_parts; /* slots of parts served */
    uint64_t nparts;    /* parts made */
    plink *links;
    uint32_t *lheap; /* links with parts, by (next, id) */
    size_t nlheap;
    rs_vec(timer) timers; /* min-heap by (t, step) */
    /* per step */
    uint32_t *deps, *pending, *next_lane, *wdep_begin, *wdep;
    uint8_t *posted, *moving;
    uint32_t *msg_begin, *msg_list;
    uint8_t *msg_left; /* parts of each message still moving */
    rs_cost_step_time *tm; /* per step, when the caller keeps them (else NULL) */
    double t_end;          /* when the last step was done */
    u32_vec ready;
    size_t ready_head;
    uint64_t ndone;
    double *link_s;
} simstate;

static int part_less(const simstate *st, uint32_t a, uint32_t b)
{
    const part *x = &st->parts.v[a], *y = &st->parts.v[b];
    return x->tag != y->tag ? x->tag < y->tag : x->seq < y->seq;
}

static void link_heap_up(simstate *st, plink *L, size_t i)
{
    while (i > 0 && part_less(st, L->h[i], L->h[(i - 1) / 2])) {
        uint32_t t = L->h[i];
        L->h[i] = L->h[(i - 1) / 2];
        L->h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}
static void link_heap_down(simstate *st, plink *L, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < L->n && part_less(st, L->h[l], L->h[m])) m = l;
        if (r < L->n && part_less(st, L->h[r], L->h[m])) m = r;
        if (m == i) return;
        uint32_t t = L->h[i];
        L->h[i] = L->h[m];
        L->h[m] = t;
        i = m;
    }
}

static int lk_less(const simstate *st, uint32_t a, uint32_t b)
{
    double x = st->links[a].next, y = st->links[b].next;
    return x != y ? x < y : a < b;
}
static void lk_swap(simstate *st, size_t i, size_t j)
{
    uint32_t t = st->lheap[i];
    st->lheap[i] = st->lheap[j];
    st->lheap[j] = t;
    st->links[st->lheap[i]].gpos = (int32_t)i;
    st->links[st->lheap[j]].gpos = (int32_t)j;
}
static void lk_fix(simstate *st, size_t i)
{
    while (i > 0 && lk_less(st, st->lheap[i], st->lheap[(i - 1) / 2])) {
        lk_swap(st, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < st->nlheap && lk_less(st, st->lheap[l], st->lheap[m])) m = l;
        if (r < st->nlheap && lk_less(st, st->lheap[r], st->lheap[m])) m = r;
        if (m == i) return;
        lk_swap(st, i, m);
        i = m;
    }
}

/* Advance link l's virtual clock to now. */
static void link_advance(simstate *st, plink *L)
{
    if (L->n) L->V += (st->now - L->t_last) * L->bw / L->n;
    L->t_last = st->now;
}

/* Recompute when link l next completes a part and place it in the heap of links. */
static void link_resched(simstate *st, uint32_t l)
{
    plink *L = &st->links[l];
    if (L->n) {
        double d = st->parts.v[L->h[0]].tag - L->V;
        L->next = st->now + (d > 0 ? d * L->n / L->bw : 0);
        if (L->gpos < 0) {
            L->gpos = (int32_t)st->nlheap;
            st->lheap[st->nlheap++] = l;
        }
        lk_fix(st, (size_t)L->gpos);
    } else if (L->gpos >= 0) {
        size_t i = (size_t)L->gpos;
        st->nlheap--;
        if (i != st->nlheap) {
            lk_swap(st, i, st->nlheap);
            lk_fix(st, i);
        }
        L->gpos = -1;
    }
}

static void part_add(simstate *st, uint32_t l, int type, uint32_t owner, double amount)
{
    plink *L = &st->links[l];
    link_advance(st, L);
    part x = {.tag = L->V + amount, .seq = st->nparts++, .owner = owner, .type = (uint8_t)type};
    uint32_t id;
    if (st->free_parts.n) {
        id = st->free_parts.v[--st->free_parts.n];
        st->parts.v[id] = x;
    } else {
        id = (uint32_t)st->parts.n;
        rs_vec_push(&st->parts, x);
    }
    if (L->n == L->cap) {
        L->cap = L->cap ? 2 * L->cap : 8;
        L->h = rs_xrealloc(L->h, L->cap * sizeof *L->h);
    }
    L->h[L->n++] = id;
    link_heap_up(st, L, L->n - 1);
    st->link_s[l] += amount / L->bw;
    link_resched(st, l);
}

static void timer_add(simstate *st, double t, uint32_t step)
{
    timer x = {t, step};
    rs_vec_push(&st->timers, x);
    size_t i = st->timers.n - 1;
    timer *h = st->timers.v;
    while (i > 0 && (h[i].t < h[(i - 1) / 2].t || (h[i].t == h[(i - 1) / 2].t && h[i].step < h[(i - 1) / 2].step))) {
        timer tt = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = tt;
        i = (i - 1) / 2;
    }
}
static timer timer_pop(simstate *st)
{
    timer *h = st->timers.v, top = h[0];
    h[0] = h[--st->timers.n];
    size_t i = 0, n = st->timers.n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
#define TL(a, b) (h[a].t < h[b].t || (h[a].t == h[b].t && h[a].step < h[b].step))
        if (l < n && TL(l, m)) m = l;
        if (r < n && TL(r, m)) m = r;
#undef TL
        if (m == i) break;
        timer tt = h[i];
        h[i] = h[m];
        h[m] = tt;
        i = m;
    }
    return top;
}

static void step_done(simstate *st, uint32_t s)
{
    if (st->tm) st->tm[s].t_done = st->now;
    st->t_end = st->now; /* (time only moves forward) */
    st->ndone++;
    uint32_t n = st->next_lane[s];
    if (n != RS_NONE && --st->deps[n] == 0) rs_vec_push(&st->ready, n);
    for (uint32_t k = st->wdep_begin[s]; k < st->wdep_begin[s + 1]; k++)
        if (--st->deps[st->wdep[k]] == 0) rs_vec_push(&st->ready, st->wdep[k]);
}

static void step_post_done(simstate *st, uint32_t s)
{
    const sstep *x = &st->S->steps.v[s];
    if (x->delay > 0) timer_add(st, st->now + x->delay, s);
    else step_done(st, s);
}

static void step_xfer_done(simstate *st, uint32_t s)
{
    const sstep *x = &st->S->steps.v[s];
    if (st->tm) {
        st->tm[s].t_xfer = st->now;
        if (!st->moving[s]) st->tm[s].t_move = st->now;
    }
    if (x->post > 0) part_add(st, x->rank * RS_NLINK_KINDS + RS_LINK_HBM, PT_POST, s, x->post);
    else step_post_done(st, s);
}

static void msg_start(simstate *st, uint32_t m)
{
    const smsg *x = &st->S->msgs.v[m];
    if (!st->moving[x->from] && st->tm) st->tm[x->from].t_move = st->now;
    if (!st->moving[x->to] && st->tm) st->tm[x->to].t_move = st->now;
    st->moving[x->from] = st->moving[x->to] = 1;
    uint32_t a = st->S->steps.v[x->from].rank, b = st->S->steps.v[x->to].rank;
    int nvl = st->S->domain_of[a] == st->S->domain_of[b];
    double bytes = x->bytes + st->lat_s * st->bw[nvl ? RS_LINK_NVL_OUT : RS_LINK_NIC_OUT];
    st->msg_left[m] = 2;
    part_add(st, a * RS_NLINK_KINDS + (nvl ? RS_LINK_NVL_OUT : RS_LINK_NIC_OUT), PT_MSG, m, bytes);
    part_add(st, b * RS_NLINK_KINDS + (nvl ? RS_LINK_NVL_IN : RS_LINK_NIC_IN), PT_MSG, m, bytes);
}

static void step_post(simstate *st, uint32_t s)
{
    if (st->tm) st->tm[s].t_post = st->now;
    st->posted[s] = 1;
    st->pending[s] = st->msg_begin[s + 1] - st->msg_begin[s];
    if (!st->pending[s]) {
        step_xfer_done(st, s);
        return;
    }
    for (uint32_t k = st->msg_begin[s]; k < st->msg_begin[s + 1]; k++) {
        uint32_t m = st->msg_list[k];
        const smsg *x = &st->S->msgs.v[m];
        uint32_t other = x->from == s ? x->to : x->from;
        if (st->posted[other]) msg_start(st, m);
    }
}

static void step_start(simstate *st, uint32_t s)
{
    const sstep *x = &st->S->steps.v[s];
    if (st->tm) st->tm[s].t_ready = st->now;
    if (x->pre > 0) part_add(st, x->rank * RS_NLINK_KINDS + RS_LINK_HBM, PT_PRE, s, x->pre);
    else step_post(st, s);
}

static void msg_done(simstate *st, uint32_t m)
{
    const smsg *x = &st->S->msgs.v[m];
    if (--st->pending[x->from] == 0) step_xfer_done(st, x->from);
    if (--st->pending[x->to] == 0) step_xfer_done(st, x->to);
}

/* Run the programs. keep_steps: hand the per-step timeline to out. */
static int ssim_run(const ssim *S, const rs_cost_params *p, rs_cost_sim *out, int keep_steps, char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t ns = S->steps.n, nm = S->msgs.n, nl = (size_t)S->world * RS_NLINK_KINDS;
    simstate st = {.S = S};
    st.bw[RS_LINK_NIC_OUT] = st.bw[RS_LINK_NIC_IN] = GBPS_TO_BPS(p->nic_gbps);
    st.bw[RS_LINK_NVL_OUT] = st.bw[RS_LINK_NVL_IN] = GBPS_TO_BPS(p->nvlink_gbps);
    st.bw[RS_LINK_HBM] = GBPS_TO_BPS(p->hbm_gbps);
    st.lat_s = p->latency_us * 1e-6;
    st.links = rs_xcalloc(nl + 1, sizeof *st.links);
    for (size_t l = 0; l < nl; l++) {
        st.links[l].bw = st.bw[l % RS_NLINK_KINDS];
        st.links[l].gpos = -1;
    }
    st.lheap = rs_xmalloc((nl + 1) * sizeof *st.lheap);
    st.link_s = rs_xcalloc(nl + 1, sizeof *st.link_s);
    st.deps = rs_xcalloc(ns + 1, sizeof *st.deps);
    st.pending = rs_xcalloc(ns + 1, sizeof *st.pending);
    st.next_lane = rs_xmalloc((ns + 1) * sizeof *st.next_lane);
    st.posted = rs_xcalloc(ns + 1, 1);
    st.moving = rs_xcalloc(ns + 1, 1);
    st.msg_left = rs_xcalloc(nm + 1, 1);
    if (keep_steps) st.tm = rs_xcalloc(ns + 1, sizeof *st.tm); /* (the baselines: 115 MB of the 2.5 T MoE's) */
    /* lane order: each step depends on the previous step of its rank and lane */
    uint32_t *last = rs_xmalloc(((size_t)S->world * SIM_LANES + 1) * sizeof *last);
    for (size_t i = 0; i < (size_t)S->world * SIM_LANES; i++) last[i] = RS_NONE;
    for (size_t s = 0; s < ns; s++) {
        const sstep *x = &S->steps.v[s];
        rs_assert(x->rank < S->world && x->lane < SIM_LANES);
        st.next_lane[s] = RS_NONE;
        if (st.tm) {
            st.tm[s].rank = x->rank;
            st.tm[s].lane = x->lane;
        }
        uint32_t *l = &last[(size_t)x->rank * SIM_LANES + x->lane];
        if (*l != RS_NONE) {
            st.next_lane[*l] = (uint32_t)s;
            st.deps[s]++;
        }
        *l = (uint32_t)s;
    }
    free(last);
    /* waits: CSR of the steps waiting on each step */
    st.wdep_begin = rs_xcalloc(ns + 2, sizeof *st.wdep_begin);
    for (size_t i = 0; i < S->waits.n; i++) {
        st.wdep_begin[S->waits.v[i].on + 1]++;
        st.deps[S->waits.v[i].step]++;
    }
    for (size_t s = 0; s < ns; s++) st.wdep_begin[s + 1] += st.wdep_begin[s];
    st.wdep = rs_xmalloc((S->waits.n + 1) * sizeof *st.wdep);
    uint32_t *fill = rs_xmalloc((ns + 1) * sizeof *fill);
    memcpy(fill, st.wdep_begin, (ns + 1) * sizeof *fill);
    for (size_t i = 0; i < S->waits.n; i++) st.wdep[fill[S->waits.v[i].on]++] = S->waits.v[i].step;
    /* messages of each step */
    st.msg_begin = rs_xcalloc(ns + 2, sizeof *st.msg_begin);
    for (size_t m = 0; m < nm; m++) {
        st.msg_begin[S->msgs.v[m].from + 1]++;
        st.msg_begin[S->msgs.v[m].to + 1]++;
    }
    for (size_t s = 0; s < ns; s++) st.msg_begin[s + 1] += st.msg_begin[s];
    st.msg_list = rs_xmalloc((2 * nm + 1) * sizeof *st.msg_list);
    memcpy(fill, st.msg_begin, (ns + 1) * sizeof *fill);
    for (size_t m = 0; m < nm; m++) {
        st.msg_list[fill[S->msgs.v[m].from]++] = (uint32_t)m;
        st.msg_list[fill[S->msgs.v[m].to]++] = (uint32_t)m;
    }
    free(fill);

    for (size_t s = 0; s < ns; s++)
        if (!st.deps[s]) rs_vec_push(&st.ready, (uint32_t)s);
    for (;;) {
        while (st.ready_head < st.ready.n) step_start(&st, st.ready.v[st.ready_head++]);
        int have_link = st.nlheap > 0, have_timer = st.timers.n > 0;
        if (!have_link && !have_timer) break;
        if (have_timer && (!have_link || st.timers.v[0].t < st.links[st.lheap[0]].next)) {
            timer t = timer_pop(&st);
            if (t.t > st.now) st.now = t.t;
            step_done(&st, t.step);
            continue;
        }
        uint32_t l = st.lheap[0];
        plink *L = &st.links[l];
        if (L->next > st.now) st.now = L->next;
        link_advance(&st, L);
        uint32_t pid = L->h[0];
        L->h[0] = L->h[--L->n];
        link_heap_down(&st, L, 0);
        if (L->n == 0) L->V = 0; /* idle: restart the clock (keeps tags small) */
        link_resched(&st, l);
        part x = st.parts.v[pid];
        rs_vec_push(&st.free_parts, pid);
        switch (x.type) {
        case PT_MSG:
            if (--st.msg_left[x.owner] == 0) msg_done(&st, x.owner);
            break;
        case PT_PRE: step_post(&st, x.owner); break;
        default: step_post_done(&st, x.owner); break;
        }
    }

    int rc = 0;
    if (st.ndone < ns) {
        /* name the first step posted but never finished (messages that never match), else the first
         * step never started (waiting on it) */
        size_t s = ns;
        for (size_t i = 0; i < ns && s == ns; i++)
            if (st.posted[i] && st.pending[i]) s = i;
        for (size_t i = 0; i < ns && s == ns; i++)
            if (!st.posted[i]) s = i;
        if (s == ns) s = 0;
        snprintf(err, errlen,
                 "cost model: the programs cannot complete (%llu of %llu steps done): rank %u, its %s-lane "
                 "step %s",
                 (unsigned long long)st.ndone, (unsigned long long)ns, S->steps.v[s].rank,
                 S->steps.v[s].lane == RS_LANE_NET ? "NET" : "NVL",
                 st.posted[s] ? "waits for messages that never come" : "never starts");
        rc = -1;
    }
    out->world = S->world;
    out->nmsgs = nm;
    out->nsteps = ns;
    out->time_s = st.t_end;
    out->link_s = st.link_s;
    out->busiest_rank = 0;
    out->busiest_kind = RS_LINK_NIC_OUT;
    for (size_t l = 0; l < nl; l++)
        if (st.link_s[l] > out->busiest_s) {
            out->busiest_s = st.link_s[l];
            out->busiest_rank = (uint32_t)(l / RS_NLINK_KINDS);
            out->busiest_kind = (int)(l % RS_NLINK_KINDS);
        }
    if (keep_steps && rc == 0) out->steps = st.tm;
    else free(st.tm);
    for (size_t l = 0; l < nl; l++) free(st.links[l].h);
    free(st.links);
    free(st.lheap);
    free(st.deps);
    free(st.pending);
    free(st.next_lane);
    free(st.posted);
    free(st.moving);
    free(st.msg_left);
    free(st.wdep_begin);
    free(st.wdep);
    free(st.msg_begin);
    free(st.msg_list);
    rs_vec_free(&st.parts);
    rs_vec_free(&st.free_parts);
    rs_vec_free(&st.timers);
    rs_vec_free(&st.ready);
    if (rc) {
        free(out->link_s);
        out->link_s = NULL;
    }
    return rc;
}

void rs_cost_sim_free(rs_cost_sim *s)
{
    if (!s) return;
    free(s->link_s);
    free(s->steps);
    memset(s, 0, sizeof *s);
}

const char *rs_cost_link_name(int kind)
{
    static const char *names[] = {"NIC out", "NIC in", "NVLink out", "NVLink in", "HBM"};
    return kind >= 0 && kind < RS_NLINK_KINDS ? names[kind] : "?";
}

/* ======================================================================================
 * A plan's programs as simulation programs: steps one to one, PACK + COPY bytes before the group,
 * UNPACK bytes after it, and the k-th SEND from A to B on a lane matched with the k-th RECV from A
 * on B on that lane (NCCL's rule, as the runtime executes it).
 * ====================================================================================== */
typedef struct {
    uint32_t lane, a, b;
    uint64_t seq;
    uint32_t step;
    uint64_t bytes;
} xrec;

static int cmp_xrec(const void *x, const void *y)
{
    const xrec *p = x, *q = y;
    if (p->lane != q->lane) return p->lane < q->lane ? -1 : 1;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    if (p->b != q->b) return p->b < q->b ? -1 : 1;
    if (p->seq != q->seq) return p->seq < q->seq ? -1 : 1;
    return 0;
}

static int plan_all_loaded(const rs_plan *P, char *err, size_t errlen)
{
    for (uint32_t r = 0; r < P->layout.topo.world; r++)
        if (!P->ranks[r].loaded) {
            snprintf(err, errlen, "cost model: rank %u's program is not loaded (load every rank)", r);
            return -1;
        }
    return 0;
}

/* merge_net (a diagnostic): every NET step of a rank becomes one group (staging ignored), NVL steps
 * that waited for NET steps wait for it. */
static int plan_to_ssim(const rs_plan *P, ssim *S, int merge_net, char *err, size_t errlen)
{
    uint32_t world = P->layout.topo.world;
    S->world = world;
    S->domain_of = P->layout.topo.domain_of;
    rs_vec(xrec) sends = {0}, recvs = {0};
    uint32_t *sid = NULL;
    size_t capsid = 0;
    for (uint32_t r = 0; r < world; r++) {
        const rs_rank_prog *rp = &P->ranks[r];
        uint64_t seq = 0;
        if (rp->nsteps + 1 > capsid) {
            capsid = 2 * (rp->nsteps + 1);
            sid = rs_xrealloc(sid, capsid * sizeof *sid);
        }
        uint32_t net = RS_NONE;
        for (uint32_t si = 0; si < rp->nsteps; si++) {
            const rs_step *st = &rp->steps[si];
            uint32_t id;
            if (merge_net && st->lane == RS_LANE_NET) {
                if (net == RS_NONE) net = ssim_step(S, r, RS_LANE_NET);
                id = net;
            } else
                id = ssim_step(S, r, st->lane);
            sid[si] = id;
            sstep *x = &S->steps.v[id];
            for (uint32_t w = 0; w < st->nwaits && !(merge_net && st->lane == RS_LANE_NET); w++) {
                uint32_t on = sid[rp->waits[st->wait_begin + w]];
                if (on != id) ssim_wait(S, id, on);
            }
            for (uint32_t k = 0; k < st->nops; k++) {
                const rs_op *op = &rp->ops[st->op_begin + k];
                switch (op->code) {
                case RS_OP_PACK:
                case RS_OP_COPY: x->pre += 2.0 * (double)op->bytes; break;
                case RS_OP_UNPACK: x->post += 2.0 * (double)op->bytes; break;
                case RS_OP_SEND: {
                    xrec q = {st->lane, r, op->peer, seq++, id, op->bytes};
                    rs_vec_push(&sends, q);
                    break;
                }
                case RS_OP_RECV: {
                    xrec q = {st->lane, op->peer, r, seq++, id, op->bytes};
                    rs_vec_push(&recvs, q);
                    break;
                }
                default: break;
                }
            }
        }
    }
    free(sid);
    sort_(sends.v, sends.n, sizeof *sends.v, cmp_xrec);
    sort_(recvs.v, recvs.n, sizeof *recvs.v, cmp_xrec);
    int rc = 0;
    size_t i = 0, j = 0;
    while (i < sends.n || j < recvs.n) {
        const xrec *s = i < sends.n ? &sends.v[i] : NULL, *q = j < recvs.n ? &recvs.v[j] : NULL;
        int c = !s ? 1 : !q ? -1 : (s->lane != q->lane ? (s->lane < q->lane ? -1 : 1)
                                    : s->a != q->a     ? (s->a < q->a ? -1 : 1)
                                    : s->b != q->b     ? (s->b < q->b ? -1 : 1)
                                                       : 0);
        if (c != 0) {
            const xrec *e = c < 0 ? s : q;
            snprintf(err, errlen, "cost model: a %s from rank %u to rank %u on the %s lane has no matching %s",
                     c < 0 ? "send" : "receive", e->a, e->b, e->lane == RS_LANE_NET ? "NET" : "NVL",
                     c < 0 ? "receive" : "send");
            rc = -1;
            break;
        }
        if (s->bytes != q->bytes) {
            snprintf(err, errlen,
                     "cost model: rank %u sends %llu bytes to rank %u on the %s lane, which receives %llu", s->a,
                     (unsigned long long)s->bytes, s->b, s->lane == RS_LANE_NET ? "NET" : "NVL",
                     (unsigned long long)q->bytes);
            rc = -1;
            break;
        }
        ssim_msg(S, s->step, q->step, (double)s->bytes);
        i++;
        j++;
    }
    rs_vec_free(&sends);
    rs_vec_free(&recvs);
    return rc;
}

int rs_cost_model_plan(const rs_plan *P, const rs_cost_params *p, rs_cost_sim *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (params_check(p, err, errlen) || plan_all_loaded(P, err, errlen)) return -1;
    ssim S = {0};
    int rc = plan_to_ssim(P, &S, p->merge_net_steps, err, errlen);
    if (!rc) rc = ssim_run(&S, p, out, 1, err, errlen);
    ssim_free(&S);
    return rc;
}

/* ======================================================================================
 * Traffic of a plan. Relay bytes: bytes a rank sends to another domain that came from what it
 * received, not from a source buffer: sends from a destination buffer, sends from staging written by
 * a RECV (or packed from a destination buffer). Ranks without source buffers only forward.
 * ====================================================================================== */
typedef struct {
    uint64_t lo, hi;
    int fwd; /* 1: bytes received (forwardable), 0: packed from a source buffer */
} sival;
typedef rs_vec(sival) sival_vec;

static int cmp_sival(const void *x, const void *y)
{
    const sival *p = x, *q = y;
    return p->lo < q->lo ? -1 : p->lo > q->lo;
}

/* Mark [lo, hi) of staging as written with kind fwd, trimming what was there (intervals stay sorted
 * and disjoint). */
static void sival_write(sival_vec *v, uint64_t lo, uint64_t hi, int fwd)
{
    if (lo >= hi) return;
    size_t n = v->n;
    for (size_t i = 0; i < n; i++) {
        sival *x = &v->v[i];
        if (x->hi <= lo || x->lo >= hi) continue;
        if (x->lo < lo && x->hi > hi) { /* split around the new interval */
            sival right = {hi, x->hi, x->fwd};
            x->hi = lo;
            rs_vec_push(v, right);
            x = &v->v[i];
        } else if (x->lo < lo)
            x->hi = lo;
        else if (x->hi > hi)
            x->lo = hi;
        else
            x->lo = x->hi = 0; /* covered: dropped below */
    }
    sival c = {lo, hi, fwd};
    rs_vec_push(v, c);
    size_t w = 0;
    for (size_t i = 0; i < v->n; i++)
        if (v->v[i].lo < v->v[i].hi) v->v[w++] = v->v[i];
    v->n = w;
    sort_(v->v, v->n, sizeof *v->v, cmp_sival);
}

static uint64_t sival_fwd_bytes(const sival_vec *v, uint64_t lo, uint64_t hi)
{
    uint64_t n = 0;
    for (size_t i = 0; i < v->n; i++) {
        if (!v->v[i].fwd || v->v[i].hi <= lo || v->v[i].lo >= hi) continue;
        uint64_t a = v->v[i].lo > lo ? v->v[i].lo : lo, b = v->v[i].hi < hi ? v->v[i].hi : hi;
        n += b - a;
    }
    return n;
}

static int binding_is_dst(const rs_plan *P, const rs_rank_prog *rp, uint32_t loc)
{
    return loc < rp->nbindings && P->layout.buffers[rp->bindings[loc].buffer].side == RS_DST;
}

int rs_cost_plan_traffic(const rs_plan *P, rs_cost_traffic *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (plan_all_loaded(P, err, errlen)) return -1;
    const rs_topology *T = &P->layout.topo;
    uint32_t world = T->world, nd = T->ndomains;
    out->world = world;
    out->ndomains = nd;
    out->nic_out = rs_xcalloc(world + 1, sizeof *out->nic_out);
    out->nic_in = rs_xcalloc(world + 1, sizeof *out->nic_in);
    out->nvl_out = rs_xcalloc(world + 1, sizeof *out->nvl_out);
    out->nvl_in = rs_xcalloc(world + 1, sizeof *out->nvl_in);
    out->dom_matrix = rs_xcalloc((size_t)nd * nd + 1, sizeof *out->dom_matrix);
    if (world <= RS_COST_RANK_MATRIX_MAX) out->rank_matrix = rs_xcalloc((size_t)world * world + 1, sizeof(uint64_t));
    sival_vec iv = {0};
    for (uint32_t r = 0; r < world; r++) {
        const rs_rank_prog *rp = &P->ranks[r];
        int has_src = 0, has_recv_staging = 0;
        for (uint32_t b = 0; b < rp->nbindings; b++)
            has_src |= P->layout.buffers[rp->bindings[b].buffer].side == RS_SRC;
        for (uint32_t k = 0; k < rp->nops; k++)
            has_recv_staging |= rp->ops[k].code == RS_OP_RECV && rp->ops[k].loc == RS_LOC_STAGING;
        int track = has_src && has_recv_staging;
        iv.n = 0;
        out->nsteps += rp->nsteps;
        for (uint32_t si = 0; si < rp->nsteps; si++) {
            const rs_step *st = &rp->steps[si];
            out->nsteps_lane[st->lane < RS_NLANES ? st->lane : 0]++;
            const rs_op *ops = rp->ops + st->op_begin;
            for (uint32_t k = 0; k < st->nops; k++) { /* phase 1 */
                const rs_op *op = &ops[k];
                if (op->code == RS_OP_PACK) out->pack_bytes += op->bytes;
                if (op->code == RS_OP_COPY) out->copy_bytes += op->bytes;
                if (track && (op->code == RS_OP_PACK || op->code == RS_OP_COPY)) {
                    rs_desc db, sb;
                    const rs_desc *d = rs_prog_desc(rp, op->dst, &db), *s = rs_prog_desc(rp, op->src, &sb);
                    uint64_t end;
                    if (d->loc == RS_LOC_STAGING && !rs_desc_extent(d, &end))
                        sival_write(&iv, d->offset, end, binding_is_dst(P, rp, s->loc));
                }
            }
            for (uint32_t k = 0; k < st->nops; k++) { /* phase 2 */
                const rs_op *op = &ops[k];
                if (op->code != RS_OP_SEND) continue;
                uint32_t q = op->peer;
                if (q >= world) continue;
                uint32_t da = T->domain_of[r], db = T->domain_of[q];
                out->nmsgs++;
                if (da == db) {
                    out->nvl_bytes += op->bytes;
                    out->nvl_out[r] += op->bytes;
                    out->nvl_in[q] += op->bytes;
                } else {
                    out->net_bytes += op->bytes;
                    out->nic_out[r] += op->bytes;
                    out->nic_in[q] += op->bytes;
                    if (!has_src) out->relay_bytes += op->bytes;
                    else if (op->loc != RS_LOC_STAGING) {
                        if (binding_is_dst(P, rp, op->loc)) out->relay_bytes += op->bytes;
                    } else if (track)
                        out->relay_bytes += sival_fwd_bytes(&iv, op->off, op->off + op->bytes);
                }
                out->dom_matrix[(size_t)da * nd + db] += op->bytes;
                if (out->rank_matrix) out->rank_matrix[(size_t)r * world + q] += op->bytes;
            }
            for (uint32_t k = 0; k < st->nops; k++) { /* received bytes, then phase 3 */
                const rs_op *op = &ops[k];
                if (track && op->code == RS_OP_RECV && op->loc == RS_LOC_STAGING)
                    sival_write(&iv, op->off, op->off + op->bytes, 1);
                if (op->code == RS_OP_UNPACK) out->unpack_bytes += op->bytes;
            }
        }
    }
    rs_vec_free(&iv);
    return 0;
}

void rs_cost_traffic_free(rs_cost_traffic *t)
{
    if (!t) return;
    free(t->nic_out);
    free(t->nic_in);
    free(t->nvl_out);
    free(t->nvl_in);
    free(t->dom_matrix);
    free(t->rank_matrix);
    memset(t, 0, sizeof *t);
}

/* ======================================================================================
 * Baselines. Both walk the tensors in layout order, in buckets of params.bucket_bytes (a bucket
 * closes once it holds more than that, as NeMo RL's packed broadcast does), and need, per tensor,
 * its distinct destination blocks (with the ranks needing each) and distinct source blocks (with
 * their holders).
 * ====================================================================================== */
/* Per-rank byte accumulator with the list of ranks touched (reset per bucket). */
typedef struct {
    double *v;
    uint8_t *on;
    u32_vec touched;
} racc;

static void racc_init(racc *a, uint32_t world)
{
    a->v = rs_xcalloc(world + 1, sizeof *a->v);
    a->on = rs_xcalloc(world + 1, 1);
    memset(&a->touched, 0, sizeof a->touched);
}
static void racc_add(racc *a, uint32_t r, double x)
{
    if (!a->on[r]) {
        a->on[r] = 1;
        rs_vec_push(&a->touched, r);
    }
    a->v[r] += x;
}
static void racc_sort(racc *a) { sort_(a->touched.v, a->touched.n, sizeof *a->touched.v, cmp_u32); }
static void racc_reset(racc *a)
{
    for (size_t i = 0; i < a->touched.n; i++) {
        a->v[a->touched.v[i]] = 0;
        a->on[a->touched.v[i]] = 0;
    }
    a->touched.n = 0;
}
static void racc_free(racc *a)
{
    free(a->v);
    free(a->on);
    rs_vec_free(&a->touched);
}

/* Byte contributions of one tensor to a bucket: (rank, bytes) entries, added pro rata when the tensor
 * is split across buckets. */
typedef struct {
    uint32_t rank;
    double bytes;
} rbytes;
typedef rs_vec(rbytes) rbytes_vec;

/* ---- gather-then-broadcast ----
 * Root R: the lowest source rank (NeMo RL broadcasts from training rank 0). With p->gb_roots = k > 1,
 * buckets are dealt in turn to k roots (the lowest source rank of each of the first k domains holding
 * sources), each with its own two-buffer pipeline and rings (a sensitivity knob, not NeMo RL's
 * behaviour; docs/cost-model.md). Tensors in layout order
 * fill buckets of params.bucket_bytes, a tensor larger than the room left being split pro rata (NeMo
 * RL's buckets hold Hugging Face tensors, one expert at a time, so they are full and even). Per bucket:
 *  - gather (root lane 0): every needed element of the bucket's tensors reaches R from one holder
 *    (R itself when it holds it, else a holder in R's NVLink domain, else the holders in turn);
 *    R then packs the bucket (HBM). Gathering bucket k+1 overlaps broadcasting bucket k (two
 *    buffers: gathering bucket k+2 waits until bucket k is broadcast).
 *  - broadcast (lane 1): NCCL's ring over the destination ranks that need any of the bucket, split
 *    into C channels (C = min(8, most receivers in a domain)) of total / C bytes each. Channel j
 *    visits the domains in order of their lowest receiver; inside a domain of n receivers it enters
 *    at the (j mod n)-th, passes through all n over NVLink, and leaves from the last to the next
 *    domain over the network. All hops of the ring stream at once once R has the bucket; a receiver
 *    of the i-th domain finishes later by the ring's depth up to the end of its domain:
 *    (i + 1) network hops and (receivers so far - i - 1) NVLink hops (hop = latency + chunk /
 *    bandwidth). Every receiver then copies its part out of the bucket (HBM). */
int rs_cost_gather_broadcast(const rs_layout *L, const rs_cost_params *p, rs_cost_sim *out, char *err,
                             size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (params_check(p, err, errlen)) return -1;
    uint32_t world = L->topo.world, ndom = L->topo.ndomains;
    projcache c = {.L = L};
    /* the roots: the lowest source rank, then (more roots) the lowest source rank of each further
     * NVLink domain */
    uint32_t nroots = p->gb_roots ? p->gb_roots : 1;
    if (nroots > SIM_LANES - 2) nroots = SIM_LANES - 2;
    uint32_t *dom_root = rs_xmalloc((ndom + 1) * sizeof *dom_root);
    for (uint32_t d = 0; d < ndom; d++) dom_root[d] = RS_NONE;
    pblock_vec blk = {0};
    for (uint32_t t = 0; t < L->ntensors; t++) {
        blk.n = 0;
        tensor_blocks(&c, t, RS_SRC, &blk);
        for (size_t i = 0; i < blk.n; i++) {
            const proj *pj = blk.v[i].pj;
            for (uint32_t k = pj->rank_begin[blk.v[i].tuple]; k < pj->rank_begin[blk.v[i].tuple + 1]; k++) {
                uint32_t r = pj->ranks[k], d = L->topo.domain_of[r];
                if (r < dom_root[d]) dom_root[d] = r;
            }
        }
    }
    rs_vec_free(&blk);
    uint32_t roots[SIM_LANES], nr = 0;
    for (uint32_t d = 0; d < ndom && nr < nroots; d++) { /* domains in order of their lowest source rank */
        uint32_t best = RS_NONE;
        for (uint32_t e = 0; e < ndom; e++) {
            int used = 0;
            for (uint32_t q = 0; q < nr; q++) used |= roots[q] == dom_root[e];
            if (!used && dom_root[e] < best) best = dom_root[e];
        }
        if (best == RS_NONE) break;
        roots[nr++] = best;
    }
    free(dom_root);
    ssim S = {.world = world, .domain_of = L->topo.domain_of};
    if (!nr) { /* nothing to send */
        int rc = ssim_run(&S, p, out, 0, err, errlen);
        projcache_free(&c);
        return rc;
    }
    uint32_t nb = 0, ri = 0, R = roots[0], Rdom = L->topo.domain_of[R];
    uint32_t bprev[SIM_LANES][2]; /* per root: its last two broadcast steps */
    uint32_t nbr[SIM_LANES] = {0};
    double nic = GBPS_TO_BPS(p->nic_gbps), nvl = GBPS_TO_BPS(p->nvlink_gbps), lat = p->latency_us * 1e-6;
    double hop_net = lat + (double)p->chunk_bytes / nic, hop_nvl = lat + (double)p->chunk_bytes / nvl;
    double cap = (double)p->bucket_bytes;
    tinfo ti = {0};
    racc gat, need;
    racc_init(&gat, world);
    racc_init(&need, world);
    rbytes_vec tg = {0}, tn = {0};
    u32_vec dom_first = {0}, order = {0};
    uint32_t *step_of = rs_xmalloc((world + 1) * sizeof *step_of);
    uint32_t *dcount = rs_xcalloc(ndom + 1, sizeof *dcount), *dpos = rs_xmalloc((ndom + 1) * sizeof *dpos);
    double total = 0;
    for (uint32_t t = 0; t <= L->ntensors; t++) {
        double left = 0, tbytes = 0, f = 1;
        uint32_t tg_root = RS_NONE;
        if (t < L->ntensors) {
            tinfo_build(&c, t, &ti);
            tbytes = (double)ti.need_vol * (double)ti.dts;
            if (tbytes <= 0) continue;
            tg.n = tn.n = 0;
            for (size_t i = 0; i < ti.dst.n; i++) {
                const dblk *d = &ti.dst.v[i];
                double v = (double)box_vol(&d->b, 0, ti.nd) * (double)ti.dts;
                for (uint32_t k = 0; k < d->nranks; k++) {
                    rbytes x = {ti.ranks.v[d->rbegin + k], v};
                    rs_vec_push(&tn, x);
                }
            }
            double srcvol = 0;
            for (size_t i = 0; i < ti.src.n; i++) srcvol += (double)box_vol(&ti.src.v[i].b, 0, ti.nd);
            f = srcvol > (double)ti.need_vol ? (double)ti.need_vol / srcvol : 1.0;
            left = tbytes;
        }
        for (;;) {
            if (left > 0 && tg_root != R) { /* who sends what of this tensor to the current root */
                tg.n = 0;
                uint64_t rr = 0;
                for (size_t i = 0; i < ti.src.n; i++) {
                    const dblk *s = &ti.src.v[i];
                    const uint32_t *hk = ti.ranks.v + s->rbegin;
                    if (rank_in(hk, s->nranks, R)) continue; /* the root holds it */
                    uint32_t local[64], nlocal = 0;
                    for (uint32_t k = 0; k < s->nranks && nlocal < 64; k++)
                        if (L->topo.domain_of[hk[k]] == Rdom) local[nlocal++] = hk[k];
                    rbytes x = {nlocal ? local[rr % nlocal] : hk[rr % s->nranks],
                                (double)box_vol(&s->b, 0, ti.nd) * (double)ti.dts * f};
                    rr++;
                    rs_vec_push(&tg, x);
                }
                tg_root = R;
            }
            if (left > 0) { /* move what fits of the tensor into the bucket */
                double take = cap - total < left ? cap - total : left;
                double frac = take / tbytes;
                for (size_t i = 0; i < tg.n; i++) racc_add(&gat, tg.v[i].rank, tg.v[i].bytes * frac);
                for (size_t i = 0; i < tn.n; i++) racc_add(&need, tn.v[i].rank, tn.v[i].bytes * frac);
                total += take;
                left -= take;
                if (left < 1e-6 * tbytes) left = 0;
            }
            if (total < cap && (t < L->ntensors || total <= 0)) break;
            /* flush the bucket (root R, the ri-th) */
            uint32_t g = ssim_step(&S, R, 0);
            S.steps.v[g].post = 2.0 * total;
            if (nbr[ri] >= 2) ssim_wait(&S, g, bprev[ri][nbr[ri] % 2]);
            racc_sort(&gat);
            for (size_t i = 0; i < gat.touched.n; i++) {
                uint32_t h = gat.touched.v[i];
                if (gat.v[h] <= 0) continue;
                /* one lane per root for holders too, so that roots do not queue behind each other */
                ssim_msg(&S, ssim_step(&S, h, nr > 1 ? 2 + (int)ri : 0), g, gat.v[h]);
            }
            uint32_t b = ssim_step(&S, R, 1);
            ssim_wait(&S, b, g);
            bprev[ri][nbr[ri]++ % 2] = b;
            /* receivers grouped by domain, domains in order of their lowest receiver */
            racc_sort(&need);
            dom_first.n = 0;
            uint32_t maxn = 0;
            for (size_t i = 0; i < need.touched.n; i++) {
                uint32_t r = need.touched.v[i], d = L->topo.domain_of[r];
                if (r == R) {
                    S.steps.v[b].post += 2.0 * need.v[r];
                    continue;
                }
                if (!dcount[d]++) {
                    dpos[d] = (uint32_t)dom_first.n;
                    rs_vec_push(&dom_first, d);
                }
                if (dcount[d] > maxn) maxn = dcount[d];
            }
            size_t nd = dom_first.n;
            uint32_t *dbegin = rs_xcalloc(nd + 2, sizeof *dbegin);
            for (size_t i = 0; i < nd; i++) dbegin[i + 1] = dbegin[i] + dcount[dom_first.v[i]];
            order.n = 0;
            rs_vec_reserve(&order, dbegin[nd] + 1);
            order.n = dbegin[nd];
            for (size_t i = 0; i < nd; i++) dcount[dom_first.v[i]] = 0; /* reused as fill counters */
            for (size_t i = 0; i < need.touched.n; i++) {
                uint32_t r = need.touched.v[i], d = L->topo.domain_of[r];
                if (r != R) order.v[dbegin[dpos[d]] + dcount[d]++] = r;
            }
            for (size_t i = 0; i < nd; i++) dcount[dom_first.v[i]] = 0;
            for (size_t di = 0; di < nd; di++)
                for (uint32_t q = dbegin[di]; q < dbegin[di + 1]; q++) {
                    uint32_t r = order.v[q];
                    uint32_t s = ssim_step(&S, r, 2 + (int)ri);
                    step_of[r] = s;
                    S.steps.v[s].post = 2.0 * need.v[r];
                    /* pipeline fill: the depth of the ring up to the end of this domain */
                    S.steps.v[s].delay = (double)(di + 1) * hop_net + (double)(dbegin[di + 1] - (di + 1)) * hop_nvl;
                    ssim_wait(&S, s, g); /* a ring hop cannot forward what the root has not gathered */
                }
            uint32_t C = maxn < 8 ? maxn : 8;
            for (uint32_t j = 0; j < C; j++) { /* channel j: one ring through every receiver */
                uint32_t prev = b;
                for (size_t di = 0; di < nd; di++) {
                    uint32_t n = dbegin[di + 1] - dbegin[di];
                    for (uint32_t q = 0; q < n; q++) {
                        uint32_t r = order.v[dbegin[di] + (j + q) % n];
                        ssim_msg(&S, prev, step_of[r], total / C);
                        prev = step_of[r];
                    }
                }
            }
            free(dbegin);
            racc_reset(&gat);
            racc_reset(&need);
            total = 0;
            nb++;
            ri = nb % nr;
            R = roots[ri];
            Rdom = L->topo.domain_of[R];
            if (left <= 0) break;
        }
    }
    int rc = ssim_run(&S, p, out, 0, err, errlen);
    free(step_of);
    free(dcount);
    free(dpos);
    rs_vec_free(&dom_first);
    rs_vec_free(&order);
    rs_vec_free(&tg);
    rs_vec_free(&tn);
    racc_free(&gat);
    racc_free(&need);
    tinfo_free(&ti);
    ssim_free(&S);
    projcache_free(&c);
    return rc;
}

/* ---- direct ----
 * Every destination rank receives each element it needs straight from a holder: itself when it
 * holds it (a local copy), else the holders of that source block in turn (round-robin by count, as
 * NCCL M2N's uniform mode), never through another destination rank. Work is cut into items, one per
 * source block of each tensor (one expert, one shard), taken in layout order into buckets of
 * params.bucket_bytes (an item larger than the room left is split pro rata); per bucket, every rank
 * taking part runs one step with all its sends and receives of the bucket, merged per peer (packed
 * before, unpacked after), like one M2N call per bucket. With bucket_bytes = UINT64_MAX everything
 * moves in one step per rank (the concurrent variant). */
typedef struct {
    uint32_t from, to;
    double bytes;
} pairb;
typedef rs_vec(pairb) pairb_vec;

static int cmp_pairb(const void *a, const void *b)
{
    const pairb *x = a, *y = b;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    return 0;
}

/* Bytes per (sender, receiver) pair, merged as they come (open addressing, linear probing). */
typedef struct {
    uint64_t *key; /* (from << 32 | to) + 1; 0 = empty */
    double *val;
    size_t cap, n;
} pairmap;

static void pairmap_add(pairmap *m, uint32_t from, uint32_t to, double bytes)
{
    if (2 * (m->n + 1) > m->cap) {
        pairmap g = {.cap = m->cap ? 2 * m->cap : 1024};
        g.key = rs_xcalloc(g.cap, sizeof *g.key);
        g.val = rs_xcalloc(g.cap, sizeof *g.val);
        for (size_t i = 0; i < m->cap; i++)
            if (m->key[i]) {
                size_t j = (size_t)((m->key[i] * 0x9E3779B97F4A7C15ull) >> 20) & (g.cap - 1);
                while (g.key[j]) j = (j + 1) & (g.cap - 1);
                g.key[j] = m->key[i];
                g.val[j] = m->val[i];
                g.n++;
            }
        free(m->key);
        free(m->val);
        *m = g;
    }
    uint64_t k = ((uint64_t)from << 32 | to) + 1;
    size_t j = (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & (m->cap - 1);
    while (m->key[j] && m->key[j] != k) j = (j + 1) & (m->cap - 1);
    if (!m->key[j]) {
        m->key[j] = k;
        m->n++;
    }
    m->val[j] += bytes;
}

int rs_cost_direct(const rs_layout *L, const rs_cost_params *p, rs_cost_sim *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (params_check(p, err, errlen)) return -1;
    uint32_t world = L->topo.world;
    projcache c = {.L = L};
    ssim S = {.world = world, .domain_of = L->topo.domain_of};
    tinfo ti = {0};
    pairb_vec pairs = {0}, item = {0};
    pairmap pm = {0};
    racc sent, recvd;
    racc_init(&sent, world);
    racc_init(&recvd, world);
    u32_vec ranks = {0};
    uint32_t *step_of = rs_xmalloc((world + 1) * sizeof *step_of);
    double cap = p->bucket_bytes == UINT64_MAX ? INFINITY : (double)p->bucket_bytes;
    double total = 0;
    for (uint32_t t = 0; t <= L->ntensors; t++) {
        size_t nitems = 0;
        double f = 1;
        if (t < L->ntensors) {
            tinfo_build(&c, t, &ti);
            if (ti.need_vol <= 0) continue;
            nitems = ti.src.n;
            f = src_overlap_factor(&ti);
        }
        for (size_t j = 0; j <= nitems; j++) {
            double left = 0, ibytes = 0;
            item.n = 0;
            if (j < nitems) { /* the pairs of source block j */
                dblk *s = &ti.src.v[j];
                const uint32_t *hk = ti.ranks.v + s->rbegin;
                double covered = 0;
                for (size_t i = 0; i < ti.dst.n; i++) {
                    const dblk *d = &ti.dst.v[i];
                    int64_t v = box_intersect(&d->b, &s->b, ti.nd);
                    if (!v) continue;
                    covered += (double)v;
                    double bytes = (double)v * (double)ti.dts * f;
                    for (uint32_t k = 0; k < d->nranks; k++) {
                        uint32_t r = ti.ranks.v[d->rbegin + k];
                        pairb q = {rank_in(hk, s->nranks, r) ? r : hk[s->rr++ % s->nranks], r, bytes};
                        rs_vec_push(&item, q);
                    }
                }
                double sv = (double)box_vol(&s->b, 0, ti.nd);
                ibytes = (covered < sv ? covered : sv) * (double)ti.dts * f;
                if (ibytes <= 0 || !item.n) continue;
                left = ibytes;
            } else if (t < L->ntensors)
                break; /* next tensor */
            for (;;) {
                if (left > 0) {
                    double take = cap - total < left ? cap - total : left;
                    double frac = take / ibytes;
                    for (size_t i = 0; i < item.n; i++) {
                        pairb q = item.v[i];
                        q.bytes *= frac;
                        racc_add(&recvd, q.to, q.bytes);
                        if (q.from == q.to) continue; /* local copy */
                        racc_add(&sent, q.from, q.bytes);
                        pairmap_add(&pm, q.from, q.to, q.bytes);
                    }
                    total += take;
                    left -= take;
                    if (left < 1e-6 * ibytes) left = 0;
                }
                if (total < cap && (t < L->ntensors || total <= 0)) break;
                /* flush: one step per rank taking part, all its messages of the bucket in it */
                pairs.n = 0;
                for (size_t i = 0; i < pm.cap; i++)
                    if (pm.key[i]) {
                        pairb q = {(uint32_t)((pm.key[i] - 1) >> 32), (uint32_t)(pm.key[i] - 1), pm.val[i]};
                        rs_vec_push(&pairs, q);
                        pm.key[i] = 0;
                        pm.val[i] = 0;
                    }
                pm.n = 0;
                sort_(pairs.v, pairs.n, sizeof *pairs.v, cmp_pairb);
                ranks.n = 0;
                for (size_t i = 0; i < sent.touched.n; i++) rs_vec_push(&ranks, sent.touched.v[i]);
                for (size_t i = 0; i < recvd.touched.n; i++)
                    if (!sent.on[recvd.touched.v[i]]) rs_vec_push(&ranks, recvd.touched.v[i]);
                sort_(ranks.v, ranks.n, sizeof *ranks.v, cmp_u32);
                for (size_t i = 0; i < ranks.n; i++) {
                    uint32_t r = ranks.v[i];
                    uint32_t st = ssim_step(&S, r, 0);
                    step_of[r] = st;
                    S.steps.v[st].pre = 2.0 * (sent.on[r] ? sent.v[r] : 0);
                    S.steps.v[st].post = 2.0 * (recvd.on[r] ? recvd.v[r] : 0);
                }
                for (size_t i = 0; i < pairs.n;) {
                    size_t k = i;
                    double bytes = 0;
                    while (k < pairs.n && pairs.v[k].from == pairs.v[i].from && pairs.v[k].to == pairs.v[i].to)
                        bytes += pairs.v[k++].bytes;
                    ssim_msg(&S, step_of[pairs.v[i].from], step_of[pairs.v[i].to], bytes);
                    i = k;
                }
                pairs.n = 0;
                racc_reset(&sent);
                racc_reset(&recvd);
                total = 0;
                if (left <= 0) break;
            }
            if (t == L->ntensors) break;
        }
    }
    int rc = ssim_run(&S, p, out, 0, err, errlen);
    free(step_of);
    rs_vec_free(&ranks);
    racc_free(&sent);
    racc_free(&recvd);
    rs_vec_free(&pairs);
    rs_vec_free(&item);
    free(pm.key);
    free(pm.val);
    tinfo_free(&ti);
    ssim_free(&S);
    projcache_free(&c);
    return rc;
}

/* ---- the report ---- */
/* The gather-broadcast baseline on a thread of its own (it needs only the layout): half of `reshardc stats`
 * on the 2.5 T MoE, beside the plan's own model and the direct baseline on the calling thread. */
typedef struct {
    const rs_layout *L;
    const rs_cost_params *p;
    rs_cost_sim *out;
    int rc;
    char err[512];
} gb_job;

static void *gb_main(void *arg)
{
    gb_job *j = arg;
    j->rc = rs_cost_gather_broadcast(j->L, j->p, j->out, j->err, sizeof j->err);
    return NULL;
}

#define REPORT_THREAD_MIN_OPS ((uint64_t)1 << 16)

int rs_cost_report_build(const rs_plan *P, const rs_cost_params *p, rs_cost_report *out, char *err,
                         size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->params = *p;
    uint64_t ops = 0;
    for (uint32_t r = 0; r < P->layout.topo.world && P->ranks; r++) ops += P->ranks[r].nops;
    gb_job j = {.L = &P->layout, .p = p, .out = &out->gather_broadcast};
    pthread_t th;
    int two = rs_threads(ops, REPORT_THREAD_MIN_OPS) >= 2 && !rs_thread_start(&th, gb_main, &j);
    rs_cost_params all = *p; /* direct: every rank's messages in one step, no buckets */
    all.bucket_bytes = UINT64_MAX;
    /* the first problem in this order: bound, traffic, the plan's model, gather-broadcast, direct */
    int rc = rs_cost_lower_bound(&P->layout, p, &out->bound, err, errlen) ||
             rs_cost_plan_traffic(P, &out->traffic, err, errlen) || rs_cost_model_plan(P, p, &out->plan, err, errlen);
    char derr[512] = "";
    int drc = !rc && two ? rs_cost_direct(&P->layout, &all, &out->direct, derr, sizeof derr) != 0 : 0;
    if (two) {
        pthread_join(th, NULL);
        if (!rc && j.rc) rc = 1, snprintf(err, errlen, "%s", j.err);
    } else if (!rc) {
        rc = rs_cost_gather_broadcast(&P->layout, p, &out->gather_broadcast, err, errlen) != 0;
    }
    if (!rc && two && drc) rc = 1, snprintf(err, errlen, "%s", derr);
    if (!rc && !two) rc = rs_cost_direct(&P->layout, &all, &out->direct, err, errlen) != 0;
    if (rc) {
        rs_cost_report_free(out);
        return -1;
    }
    return 0;
}

void rs_cost_report_free(rs_cost_report *r)
{
    if (!r) return;
    rs_cost_traffic_free(&r->traffic);
    rs_cost_sim_free(&r->plan);
    rs_cost_sim_free(&r->gather_broadcast);
    rs_cost_sim_free(&r->direct);
}
