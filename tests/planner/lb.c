/* lb.c - the planner tests' layout builder (see lb.h). */
#include "lb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void lb_init(rs_layout *L, uint32_t world, uint32_t domain_size, const uint32_t *domain_of)
{
    memset(L, 0, sizeof *L);
    L->topo.world = world;
    L->topo.domain_of = rs_xmalloc(world * sizeof *L->topo.domain_of);
    uint32_t nd = 0;
    for (uint32_t r = 0; r < world; r++) {
        L->topo.domain_of[r] = domain_of ? domain_of[r] : r / domain_size;
        if (L->topo.domain_of[r] + 1 > nd) nd = L->topo.domain_of[r] + 1;
    }
    L->topo.ndomains = nd;
    L->topo.domain_size = domain_of ? 0 : domain_size;
    L->topo.nic_gbps = 400;
    L->topo.nvlink_gbps = 3600;
}

uint32_t lb_mesh(rs_layout *L, uint32_t naxes, const int64_t *sizes, const int32_t *ranks, int32_t first)
{
    L->meshes = rs_xrealloc(L->meshes, (L->nmeshes + 1) * sizeof *L->meshes);
    rs_mesh *m = &L->meshes[L->nmeshes];
    memset(m, 0, sizeof *m);
    char name[32];
    snprintf(name, sizeof name, "m%u", L->nmeshes);
    m->name = rs_layout_name(L, name, strlen(name));
    m->naxes = naxes;
    uint32_t n = 1;
    for (uint32_t a = 0; a < naxes; a++) {
        snprintf(name, sizeof name, "a%u", a);
        m->axis[a] = rs_layout_name(L, name, strlen(name));
        m->size[a] = sizes[a];
        n *= (uint32_t)sizes[a];
    }
    m->nranks = n;
    m->ranks = rs_xmalloc(n * sizeof *m->ranks);
    m->index_of = rs_xmalloc(L->topo.world * sizeof *m->index_of);
    for (uint32_t r = 0; r < L->topo.world; r++) m->index_of[r] = -1;
    for (uint32_t i = 0; i < n; i++) {
        m->ranks[i] = ranks ? ranks[i] : first + (int32_t)i;
        m->index_of[m->ranks[i]] = (int32_t)i;
    }
    return L->nmeshes++;
}

uint32_t lb_tensor(rs_layout *L, const char *name, rs_dtype dt, uint32_t ndim, const int64_t *shape)
{
    L->tensors = rs_xrealloc(L->tensors, (L->ntensors + 1) * sizeof *L->tensors);
    rs_tensor *t = &L->tensors[L->ntensors];
    memset(t, 0, sizeof *t);
    t->name = rs_layout_name(L, name, strlen(name));
    t->dtype = dt;
    t->ndim = ndim;
    for (uint32_t d = 0; d < ndim; d++) t->shape[d] = shape[d];
    return L->ntensors++;
}

uint32_t lb_buffer(rs_layout *L, const char *name, rs_side side, rs_dtype dt, uint32_t ndim, const int64_t *shape)
{
    for (uint32_t i = 0; i < L->nbuffers; i++)
        if (L->buffers[i].side == side && !strcmp(L->buffers[i].name, name)) return i;
    L->buffers = rs_xrealloc(L->buffers, (L->nbuffers + 1) * sizeof *L->buffers);
    rs_buffer *b = &L->buffers[L->nbuffers];
    memset(b, 0, sizeof *b);
    b->name = rs_layout_name(L, name, strlen(name));
    b->side = side;
    b->dtype = dt;
    b->ndim = ndim;
    for (uint32_t d = 0; d < ndim; d++) b->shape[d] = shape[d];
    return L->nbuffers++;
}

static uint32_t push_i64(rs_layout *L, const int64_t *v, uint32_t n)
{
    L->i64 = rs_xrealloc(L->i64, (L->ni64 + n + 1) * sizeof *L->i64);
    memcpy(L->i64 + L->ni64, v, n * sizeof *v);
    uint32_t at = L->ni64;
    L->ni64 += n;
    return at;
}

uint32_t lb_piece(rs_layout *L, uint32_t tensor, rs_side side, uint32_t mesh, uint32_t buffer, uint32_t nplace,
                  const rs_place *place, const int64_t *slice, const int64_t *box)
{
    L->pieces = rs_xrealloc(L->pieces, (L->npieces + 1) * sizeof *L->pieces);
    rs_piece *p = &L->pieces[L->npieces];
    memset(p, 0, sizeof *p);
    p->tensor = tensor;
    p->mesh = mesh;
    p->buffer = buffer;
    p->side = (uint8_t)side;
    p->nplace = (uint8_t)nplace;
    p->place = L->nplaces;
    L->places = rs_xrealloc(L->places, (L->nplaces + nplace + 1) * sizeof *L->places);
    if (nplace) memcpy(L->places + L->nplaces, place, nplace * sizeof *place);
    L->nplaces += nplace;
    p->slice = slice ? push_i64(L, slice, 2 * L->tensors[tensor].ndim) : RS_NONE;
    p->box = box ? push_i64(L, box, 2 * L->buffers[buffer].ndim) : RS_NONE;
    return L->npieces++;
}

typedef struct {
    uint32_t tensor, side, idx;
} pkey;
static int pkey_cmp(const void *a, const void *b)
{
    const pkey *x = a, *y = b;
    if (x->tensor != y->tensor) return x->tensor < y->tensor ? -1 : 1;
    if (x->side != y->side) return x->side < y->side ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

void lb_finish(rs_layout *L)
{
    pkey *k = rs_xmalloc((L->npieces + 1) * sizeof *k);
    for (uint32_t i = 0; i < L->npieces; i++) k[i] = (pkey){L->pieces[i].tensor, L->pieces[i].side, i};
    qsort(k, L->npieces, sizeof *k, pkey_cmp);
    rs_piece *np = rs_xmalloc((L->npieces + 1) * sizeof *np);
    for (uint32_t i = 0; i < L->npieces; i++) np[i] = L->pieces[k[i].idx];
    free(L->pieces);
    free(k);
    L->pieces = np;
    for (uint32_t t = 0; t < L->ntensors; t++) {
        L->tensors[t].piece_begin = L->npieces;
        L->tensors[t].nsrc = L->tensors[t].ndst = 0;
    }
    for (uint32_t i = 0; i < L->npieces; i++) {
        rs_tensor *t = &L->tensors[L->pieces[i].tensor];
        if (i < t->piece_begin) t->piece_begin = i;
        if (L->pieces[i].side == RS_SRC) t->nsrc++;
        else t->ndst++;
    }
    for (uint32_t t = 0; t < L->ntensors; t++)
        if (L->tensors[t].piece_begin == L->npieces) L->tensors[t].piece_begin = 0;
}
