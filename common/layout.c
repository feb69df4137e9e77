/* layout.c - placement math over the elaborated layout: which ranks hold a piece, and which block
 * of the tensor each holds. The compiler, the plan verifier and the replay checker all use this. */
#include "layout.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int size;
} dtypes[] = {
#define X(e, s, b) {s, b},
    RS_DTYPES(X)
#undef X
};

int rs_dtype_size(rs_dtype dt) { return (unsigned)dt < RS_DT_COUNT ? dtypes[dt].size : 0; }
const char *rs_dtype_name(rs_dtype dt) { return (unsigned)dt < RS_DT_COUNT ? dtypes[dt].name : "?"; }

int rs_dtype_parse(const char *s)
{
    for (int i = 0; i < RS_DT_COUNT; i++)
        if (strcmp(s, dtypes[i].name) == 0) return i;
    return -1;
}

void rs_mesh_coord(const rs_mesh *m, uint32_t linear, int64_t *coord)
{
    for (int a = (int)m->naxes - 1; a >= 0; a--) {
        coord[a] = (int64_t)linear % m->size[a];
        linear = (uint32_t)((int64_t)linear / m->size[a]);
    }
}

int rs_mesh_next_coord(const rs_mesh *m, const int64_t *fixed, int64_t *coord)
{
    for (int a = (int)m->naxes - 1; a >= 0; a--) {
        if (fixed[a] >= 0) continue;
        if (++coord[a] < m->size[a]) return 1;
        coord[a] = 0;
    }
    return 0;
}

int rs_piece_holds(const rs_layout *L, const rs_piece *p, const int64_t *coord)
{
    const rs_place *pl = L->places + p->place;
    for (uint32_t i = 0; i < p->nplace; i++)
        if (pl[i].kind == RS_PLACE_PIN && coord[pl[i].axis] != pl[i].arg) return 0;
    return 1;
}

void rs_shard_interval(int64_t plo, int64_t phi, int64_t n, int64_t b, int64_t j, int64_t *lo, int64_t *hi)
{
    int64_t len = phi - plo;
    if (b == RS_SHARD_BALANCED) {
        int64_t q = len / n, r = len % n;
        *lo = plo + j * q + (j < r ? j : r);
        *hi = *lo + q + (j < r);
        return;
    }
    int64_t bs = b > 0 ? b : (len + n - 1) / n;
    /* j * bs may exceed len for trailing empty chunks; clamp without overflow (j < n, bs <= len or b). */
    int64_t a = (bs != 0 && j > len / bs) ? len : j * bs;
    if (a > len) a = len;
    int64_t e = (bs != 0 && j + 1 > len / bs) ? len : (j + 1) * bs;
    if (e > len) e = len;
    *lo = plo + a;
    *hi = plo + e;
}

void rs_piece_slice(const rs_layout *L, const rs_piece *p, int64_t *lo, int64_t *hi)
{
    const rs_tensor *t = L->tensors + p->tensor;
    for (uint32_t d = 0; d < t->ndim; d++) {
        lo[d] = p->slice == RS_NONE ? 0 : L->i64[p->slice + d];
        hi[d] = p->slice == RS_NONE ? t->shape[d] : L->i64[p->slice + t->ndim + d];
    }
}

int64_t rs_piece_block(const rs_layout *L, const rs_piece *p, const int64_t *coord, int64_t *lo, int64_t *hi)
{
    const rs_tensor *t = L->tensors + p->tensor;
    const rs_mesh *m = L->meshes + p->mesh;
    const rs_place *pl = L->places + p->place;
    rs_piece_slice(L, p, lo, hi);
    for (uint32_t i = 0; i < p->nplace; i++) {
        if (pl[i].kind != RS_PLACE_SHARD) continue;
        int d = pl[i].dim;
        rs_shard_interval(lo[d], hi[d], m->size[pl[i].axis], pl[i].arg, coord[pl[i].axis], &lo[d], &hi[d]);
    }
    int64_t n = 1;
    for (uint32_t d = 0; d < t->ndim; d++) n *= hi[d] - lo[d]; /* sema checked the product fits */
    return n;
}

uint32_t rs_piece_buffer_box(const rs_layout *L, const rs_piece *p, const int64_t *blo, const int64_t *bhi,
                             int64_t *shape, int64_t *box_lo, int64_t *box_hi)
{
    const rs_buffer *b = L->buffers + p->buffer;
    if (b->ndim == 0) {
        uint32_t nd = L->tensors[p->tensor].ndim;
        for (uint32_t d = 0; d < nd; d++) {
            shape[d] = bhi[d] - blo[d];
            box_lo[d] = 0;
            box_hi[d] = shape[d];
        }
        return nd;
    }
    for (uint32_t d = 0; d < b->ndim; d++) {
        shape[d] = b->shape[d];
        box_lo[d] = p->box == RS_NONE ? 0 : L->i64[p->box + d];
        box_hi[d] = p->box == RS_NONE ? b->shape[d] : L->i64[p->box + b->ndim + d];
    }
    return b->ndim;
}

/* Names are appended to the newest block; a new block starts when it is full. The block's first
 * 8 bytes hold its used size. */
#define NAME_BLOCK (1u << 20)
const char *rs_layout_name(rs_layout *L, const char *s, size_t len)
{
    char *blk = L->nname_blocks ? L->name_blocks[L->nname_blocks - 1] : NULL;
    size_t used = 0;
    if (blk) memcpy(&used, blk, sizeof used);
    if (!blk || used + len + 1 > NAME_BLOCK) {
        size_t cap = len + 1 + sizeof used > NAME_BLOCK ? len + 1 + sizeof used : NAME_BLOCK;
        blk = rs_xmalloc(cap);
        used = sizeof used;
        L->name_blocks = rs_xrealloc(L->name_blocks, (L->nname_blocks + 1) * sizeof *L->name_blocks);
        L->name_blocks[L->nname_blocks++] = blk;
    }
    char *d = blk + used;
    memcpy(d, s, len);
    d[len] = 0;
    used += len + 1;
    memcpy(blk, &used, sizeof used);
    return d;
}

void rs_layout_free(rs_layout *L)
{
    if (!L) return;
    for (uint32_t i = 0; i < L->nmeshes; i++) {
        free(L->meshes[i].ranks);
        free(L->meshes[i].index_of);
    }
    free(L->meshes);
    free(L->tensors);
    free(L->buffers);
    free(L->pieces);
    free(L->places);
    free(L->i64);
    free(L->topo.domain_of);
    for (uint32_t i = 0; i < L->nname_blocks; i++) free(L->name_blocks[i]);
    free(L->name_blocks);
    memset(L, 0, sizeof *L);
}
