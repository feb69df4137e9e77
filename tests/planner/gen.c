/* gen.c - random layouts for the planner property tests (see gen.h). */
#include "gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lb.h"
#include "util.h"

typedef struct {
    uint64_t s;
} rng;

static uint64_t next(rng *r)
{
    r->s += 0x9e3779b97f4a7c15ull;
    uint64_t z = r->s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint32_t below(rng *r, uint32_t n) { return n ? (uint32_t)(next(r) % n) : 0; }
static int chance(rng *r, uint32_t pct) { return below(r, 100) < pct; }

static uint32_t make_mesh(rs_layout *L, rng *R, uint32_t world)
{
    /* 1..3 axes, total <= world, over a random rank list */
    uint32_t naxes = 1 + below(R, 3);
    int64_t sizes[3];
    uint32_t total = 1;
    for (uint32_t a = 0; a < naxes; a++) {
        uint32_t maxs = world / total;
        if (maxs < 1) maxs = 1;
        if (maxs > 6) maxs = 6;
        sizes[a] = 1 + below(R, maxs);
        total *= (uint32_t)sizes[a];
    }
    int32_t *perm = rs_xmalloc(world * sizeof *perm);
    for (uint32_t i = 0; i < world; i++) perm[i] = (int32_t)i;
    if (chance(R, 50)) {
        uint32_t start = below(R, world - total + 1); /* contiguous range */
        for (uint32_t i = 0; i < total; i++) perm[i] = (int32_t)(start + i);
    } else {
        for (uint32_t i = world - 1; i > 0; i--) {
            uint32_t j = below(R, i + 1);
            int32_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
    }
    uint32_t m = lb_mesh(L, naxes, sizes, perm, 0);
    free(perm);
    return m;
}

static const rs_dtype dts[] = {RS_DT_BF16, RS_DT_FP32, RS_DT_INT8, RS_DT_FP64, RS_DT_INT16};

/* placements on mesh m for a tensor of nd dims; coverage: when full, every block is held somewhere and
 * fixed blocks never leave gaps */
static uint32_t make_places(rng *R, const rs_mesh *m, uint32_t nd, const int64_t *ext, int full, rs_place *pl)
{
    uint32_t n = 0;
    int64_t parts[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    for (uint32_t a = 0; a < m->naxes; a++) {
        uint32_t k = below(R, 10);
        if (k < 5 && nd > 0) {
            uint8_t d = (uint8_t)below(R, nd);
            int64_t block = 0;
            parts[d] *= m->size[a];
            if (chance(R, 25)) {
                /* fixed block: at least ceil when covering */
                int64_t need = (ext[d] + parts[d] - 1) / parts[d];
                block = need + (full ? (int64_t)below(R, 2) : (int64_t)below(R, 3)) - (full ? 0 : 1);
                if (block < 1) block = 1;
                if (full && block * parts[d] < ext[d]) block = need;
                /* nested fixed blocks inside chunked parents may still leave gaps; keep it simple */
                if (parts[d] != m->size[a]) block = 0;
            } else if (chance(R, 20)) {
                block = RS_SHARD_BALANCED; /* the longer blocks first, as vLLM splits experts */
            }
            pl[n++] = lb_shard((uint8_t)a, d, block);
        } else if (k < 7) {
            pl[n++] = lb_pin((uint8_t)a, below(R, (uint32_t)m->size[a]));
        } else if (k < 8) {
            pl[n++] = lb_repl((uint8_t)a);
        }
    }
    /* shuffle the order of the placements (nesting order of shards of one dim changes meaning) */
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = below(R, i);
        rs_place t = pl[i - 1];
        pl[i - 1] = pl[j];
        pl[j] = t;
    }
    return n;
}

/* Do all holders of piece p have the same block shape? Writes it. */
static int same_block_shape(const rs_layout *L, const rs_piece *p, int64_t *shape)
{
    const rs_mesh *m = &L->meshes[p->mesh];
    const rs_tensor *t = &L->tensors[p->tensor];
    int64_t coord[RS_MAX_DIMS], lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
    int first = 1;
    for (uint32_t k = 0; k < m->nranks; k++) {
        rs_mesh_coord(m, k, coord);
        if (!rs_piece_holds(L, p, coord)) continue;
        rs_piece_block(L, p, coord, lo, hi);
        for (uint32_t d = 0; d < t->ndim; d++) {
            if (first) shape[d] = hi[d] - lo[d];
            else if (shape[d] != hi[d] - lo[d]) return 0;
        }
        first = 0;
    }
    return !first;
}

/* Give piece pi an explicit buffer: the block in a larger buffer, possibly reshaped. */
static void explicit_buffer(rs_layout *L, rng *R, uint32_t pi, const char *name)
{
    rs_piece *p = &L->pieces[pi];
    const rs_tensor *t = &L->tensors[p->tensor];
    int64_t A[RS_MAX_DIMS];
    if (!same_block_shape(L, p, A)) return;
    /* box shape B: A, A with two adjacent dims merged, A with a unit dim added, or A with a dim split */
    int64_t B[RS_MAX_DIMS + 1];
    uint32_t bnd = t->ndim;
    memcpy(B, A, t->ndim * sizeof *A);
    uint32_t how = below(R, 4);
    if (how == 1 && t->ndim >= 2) {
        uint32_t d = below(R, t->ndim - 1);
        B[d] = A[d] * A[d + 1];
        memmove(B + d + 1, B + d + 2, (t->ndim - d - 2) * sizeof *B);
        bnd--;
    } else if (how == 2 && t->ndim < RS_MAX_DIMS) {
        uint32_t d = below(R, t->ndim + 1);
        memmove(B + d + 1, B + d, (t->ndim - d) * sizeof *B);
        B[d] = 1;
        bnd++;
    } else if (how == 3 && t->ndim >= 1 && t->ndim < RS_MAX_DIMS) {
        uint32_t d = below(R, t->ndim);
        int64_t f = A[d] % 2 == 0 ? 2 : A[d] % 3 == 0 ? 3 : 1;
        if (f > 1) {
            memmove(B + d + 1, B + d, (t->ndim - d) * sizeof *B);
            B[d] = f;
            B[d + 1] = A[d] / f;
            bnd++;
        }
    }
    if (bnd == 0) {
        B[0] = 1;
        bnd = 1;
    }
    int64_t shape[RS_MAX_DIMS], box[2 * RS_MAX_DIMS];
    for (uint32_t d = 0; d < bnd; d++) {
        int64_t pad = below(R, 3), off = pad ? below(R, (uint32_t)pad + 1) : 0;
        shape[d] = B[d] + pad;
        box[d] = off;
        box[bnd + d] = off + B[d];
    }
    char xname[80];
    snprintf(xname, sizeof xname, "%s.x", name);
    uint32_t b = lb_buffer(L, xname, p->side, t->dtype, bnd, shape);
    p = &L->pieces[pi];
    p->buffer = b;
    L->i64 = rs_xrealloc(L->i64, (L->ni64 + 2 * bnd + 1) * sizeof *L->i64);
    memcpy(L->i64 + L->ni64, box, 2 * bnd * sizeof *box);
    p->box = L->ni64;
    L->ni64 += 2 * bnd;
}

/* Make buffer b (of nd dims) a buffer group "NAME.{*}" (its first dim indexes members
 * bound separately) one time in three, drawing from G so that R, and with it the rest of the layout, is
 * the same as without groups. */
static void maybe_group(rs_layout *L, rng *G, uint32_t b, uint32_t nd)
{
    if (!chance(G, 33) || nd < 2) return;
    char gname[80];
    snprintf(gname, sizeof gname, "%s.{*}", L->buffers[b].name);
    L->buffers[b].name = rs_layout_name(L, gname, strlen(gname));
    L->buffers[b].group = 1;
}

/* The same for piece pi's buffer, implicit or explicit (a padded box, or a block refilled into another
 * shape: member ends and row ends of the box need not line up). */
static void maybe_group_piece(rs_layout *L, rng *G, uint32_t pi, uint32_t nd)
{
    uint32_t b = L->pieces[pi].buffer;
    maybe_group(L, G, b, L->buffers[b].ndim ? L->buffers[b].ndim : nd);
}

void gen_layout(rs_layout *L, uint64_t seed, const gen_opts *o)
{
    gen_opts def = {24, 4, 12};
    if (!o) o = &def;
    rng R = {seed * 7919 + 1}, G = {seed * 6151 + 0x5bd1e995};
    uint32_t world = 2 + below(&R, o->max_world - 1);
    if (chance(&R, 70)) {
        uint32_t ds[] = {1, 2, 3, 4, 8};
        lb_init(L, world, ds[below(&R, 5)], NULL);
    } else {
        uint32_t nd = 1 + below(&R, world);
        uint32_t *dom = rs_xmalloc(world * sizeof *dom);
        for (uint32_t r = 0; r < world; r++) dom[r] = r < nd ? r : below(&R, nd);
        for (uint32_t r = world - 1; r > 0; r--) {
            uint32_t j = below(&R, r + 1);
            uint32_t t = dom[r];
            dom[r] = dom[j];
            dom[j] = t;
        }
        lb_init(L, world, 0, dom);
        free(dom);
    }
    uint32_t nmesh = 2 + below(&R, 3);
    for (uint32_t i = 0; i < nmesh; i++) make_mesh(L, &R, world);
    uint32_t nt = 1 + below(&R, o->max_tensors);
    char name[64];
    for (uint32_t ti = 0; ti < nt; ti++) {
        uint32_t nd = below(&R, 5);
        int64_t shape[RS_MAX_DIMS];
        for (uint32_t d = 0; d < nd; d++) shape[d] = 1 + below(&R, (uint32_t)o->max_extent);
        snprintf(name, sizeof name, "t%u", ti);
        rs_dtype dt = dts[below(&R, 5)];
        uint32_t t = lb_tensor(L, name, dt, nd, shape);
        /* sources: one covering piece, maybe a partial extra one */
        uint32_t nsrc = 1 + (chance(&R, 30) ? 1 : 0);
        for (uint32_t k = 0; k < nsrc; k++) {
            uint32_t m = below(&R, L->nmeshes);
            rs_place pl[8];
            int64_t slice[2 * RS_MAX_DIMS], ext[RS_MAX_DIMS];
            int sliced = k > 0 && nd > 0 && chance(&R, 60);
            for (uint32_t d = 0; d < nd; d++) {
                int64_t lo = 0, hi = shape[d];
                if (sliced) {
                    lo = below(&R, (uint32_t)shape[d]);
                    hi = lo + 1 + below(&R, (uint32_t)(shape[d] - lo));
                }
                slice[d] = lo;
                slice[nd + d] = hi;
                ext[d] = hi - lo;
            }
            uint32_t np = make_places(&R, &L->meshes[m], nd, ext, k == 0, pl);
            snprintf(name, sizeof name, "s%u.%u", ti, k);
            uint32_t b = lb_buffer(L, name, RS_SRC, dt, 0, NULL);
            uint32_t pi = lb_piece(L, t, RS_SRC, m, b, np, pl, sliced ? slice : NULL, NULL);
            if (chance(&R, 30)) explicit_buffer(L, &R, pi, name);
            maybe_group_piece(L, &G, pi, nd);
        }
        uint32_t ndst = 1 + (chance(&R, 40) ? 1 : 0);
        for (uint32_t k = 0; k < ndst; k++) {
            uint32_t m = below(&R, L->nmeshes);
            rs_place pl[8];
            int64_t slice[2 * RS_MAX_DIMS], ext[RS_MAX_DIMS];
            int sliced = nd > 0 && chance(&R, 40);
            for (uint32_t d = 0; d < nd; d++) {
                int64_t lo = 0, hi = shape[d];
                if (sliced) {
                    lo = below(&R, (uint32_t)shape[d]);
                    hi = lo + 1 + below(&R, (uint32_t)(shape[d] - lo));
                }
                slice[d] = lo;
                slice[nd + d] = hi;
                ext[d] = hi - lo;
            }
            uint32_t np = make_places(&R, &L->meshes[m], nd, ext, 0, pl);
            snprintf(name, sizeof name, "d%u.%u", ti, k);
            uint32_t b = lb_buffer(L, name, RS_DST, dt, 0, NULL);
            uint32_t pi = lb_piece(L, t, RS_DST, m, b, np, pl, sliced ? slice : NULL, NULL);
            if (chance(&R, 40)) explicit_buffer(L, &R, pi, name);
            maybe_group_piece(L, &G, pi, nd);
        }
    }
    lb_finish(L);
}
