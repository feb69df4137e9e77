/* build.c - builders for the cost-model tests' hand-made layouts and plans (see build.h). */
#include "build.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tb_init(rs_plan *P, uint32_t world, const uint32_t *domain_of, double nic_gbps, double nvlink_gbps)
{
    memset(P, 0, sizeof *P);
    rs_topology *T = &P->layout.topo;
    T->world = world;
    T->domain_of = rs_xmalloc(world * sizeof *T->domain_of);
    T->ndomains = 0;
    for (uint32_t r = 0; r < world; r++) {
        T->domain_of[r] = domain_of[r];
        if (domain_of[r] + 1 > T->ndomains) T->ndomains = domain_of[r] + 1;
    }
    T->nic_gbps = nic_gbps;
    T->nvlink_gbps = nvlink_gbps;
    P->staging_budget = 256u << 20;
    P->ranks = rs_xcalloc(world, sizeof *P->ranks);
    for (uint32_t r = 0; r < world; r++) {
        P->ranks[r].rank = r;
        P->ranks[r].loaded = 1;
    }
}

uint32_t tb_mesh(rs_plan *P, const char *name, uint32_t naxes, const char *const *axes, const int64_t *sizes,
                 const int32_t *ranks)
{
    rs_layout *L = &P->layout;
    L->meshes = rs_xrealloc(L->meshes, (L->nmeshes + 1) * sizeof *L->meshes);
    rs_mesh *m = &L->meshes[L->nmeshes];
    memset(m, 0, sizeof *m);
    m->name = rs_layout_name(L, name, strlen(name));
    m->naxes = naxes;
    m->nranks = 1;
    for (uint32_t a = 0; a < naxes; a++) {
        m->axis[a] = rs_layout_name(L, axes[a], strlen(axes[a]));
        m->size[a] = sizes[a];
        m->nranks *= (uint32_t)sizes[a];
    }
    m->ranks = rs_xmalloc(m->nranks * sizeof *m->ranks);
    m->index_of = rs_xmalloc(L->topo.world * sizeof *m->index_of);
    for (uint32_t r = 0; r < L->topo.world; r++) m->index_of[r] = -1;
    for (uint32_t i = 0; i < m->nranks; i++) {
        m->ranks[i] = ranks[i];
        m->index_of[ranks[i]] = (int32_t)i;
    }
    return L->nmeshes++;
}

uint32_t tb_tensor(rs_plan *P, const char *name, rs_dtype dt, uint32_t ndim, const int64_t *shape)
{
    rs_layout *L = &P->layout;
    L->tensors = rs_xrealloc(L->tensors, (L->ntensors + 1) * sizeof *L->tensors);
    rs_tensor *t = &L->tensors[L->ntensors];
    memset(t, 0, sizeof *t);
    t->name = rs_layout_name(L, name, strlen(name));
    t->dtype = dt;
    t->ndim = ndim;
    for (uint32_t d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->piece_begin = L->npieces;
    return L->ntensors++;
}

uint32_t tb_piece(rs_plan *P, rs_side side, uint32_t mesh, const char *buffer, uint32_t nplace,
                  const int64_t (*place)[3])
{
    rs_layout *L = &P->layout;
    rs_tensor *t = &L->tensors[L->ntensors - 1];
    L->buffers = rs_xrealloc(L->buffers, (L->nbuffers + 1) * sizeof *L->buffers);
    rs_buffer *b = &L->buffers[L->nbuffers];
    memset(b, 0, sizeof *b);
    b->name = rs_layout_name(L, buffer, strlen(buffer));
    b->side = side;
    b->dtype = t->dtype;
    L->places = rs_xrealloc(L->places, (L->nplaces + nplace + 1) * sizeof *L->places);
    for (uint32_t i = 0; i < nplace; i++) {
        rs_place *pl = &L->places[L->nplaces + i];
        memset(pl, 0, sizeof *pl);
        pl->axis = (uint8_t)place[i][0];
        pl->kind = (uint8_t)place[i][1];
        if (pl->kind == RS_PLACE_SHARD) pl->dim = (uint8_t)place[i][2];
        else pl->arg = place[i][2];
    }
    L->pieces = rs_xrealloc(L->pieces, (L->npieces + 1) * sizeof *L->pieces);
    rs_piece *p = &L->pieces[L->npieces++];
    memset(p, 0, sizeof *p);
    p->tensor = L->ntensors - 1;
    p->mesh = mesh;
    p->buffer = L->nbuffers;
    p->side = (uint8_t)side;
    p->nplace = (uint8_t)nplace;
    p->place = L->nplaces;
    p->slice = RS_NONE;
    p->box = RS_NONE;
    L->nplaces += nplace;
    if (side == RS_SRC) t->nsrc++;
    else t->ndst++;
    return L->nbuffers++;
}

void tb_bind(rs_plan *P)
{
    rs_layout *L = &P->layout;
    for (uint32_t pi = 0; pi < L->npieces; pi++) {
        const rs_piece *p = &L->pieces[pi];
        const rs_mesh *m = &L->meshes[p->mesh];
        const rs_tensor *t = &L->tensors[p->tensor];
        for (uint32_t i = 0; i < m->nranks; i++) {
            int64_t coord[RS_MAX_DIMS], lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
            rs_mesh_coord(m, i, coord);
            if (!rs_piece_holds(L, p, coord) || rs_piece_block(L, p, coord, lo, hi) == 0) continue;
            rs_rank_prog *g = &P->ranks[m->ranks[i]];
            g->bindings = rs_xrealloc(g->bindings, (g->nbindings + 1) * sizeof *g->bindings);
            rs_binding *b = &g->bindings[g->nbindings++];
            memset(b, 0, sizeof *b);
            b->buffer = p->buffer;
            b->ndim = t->ndim;
            uint64_t n = (uint64_t)rs_dtype_size(t->dtype);
            for (uint32_t d = 0; d < t->ndim; d++) {
                b->shape[d] = hi[d] - lo[d];
                n *= (uint64_t)b->shape[d];
            }
            b->bytes = n;
        }
    }
}

uint32_t tb_step(rs_plan *P, uint32_t rank, int lane, uint32_t nwaits, const uint32_t *waits)
{
    rs_rank_prog *g = &P->ranks[rank];
    g->steps = rs_xrealloc(g->steps, (g->nsteps + 1) * sizeof *g->steps);
    rs_step *s = &g->steps[g->nsteps];
    memset(s, 0, sizeof *s);
    s->lane = (uint8_t)lane;
    s->op_begin = g->nops;
    s->wait_begin = g->nwaits;
    s->nwaits = nwaits;
    g->waits = rs_xrealloc(g->waits, (g->nwaits + nwaits + 1) * sizeof *g->waits);
    for (uint32_t i = 0; i < nwaits; i++) g->waits[g->nwaits++] = waits[i];
    return g->nsteps++;
}

static rs_op *add_op(rs_plan *P, uint32_t rank, int code)
{
    rs_rank_prog *g = &P->ranks[rank];
    rs_assert(g->nsteps > 0);
    g->ops = rs_xrealloc(g->ops, (g->nops + 1) * sizeof *g->ops);
    rs_op *o = &g->ops[g->nops++];
    memset(o, 0, sizeof *o);
    o->code = (uint8_t)code;
    o->tensor = RS_NONE;
    g->steps[g->nsteps - 1].nops++;
    return o;
}

static void staging_covers(rs_plan *P, uint32_t rank, uint32_t loc, uint64_t end)
{
    if (loc == RS_LOC_STAGING && end > P->ranks[rank].staging_bytes) P->ranks[rank].staging_bytes = end;
}

void tb_send(rs_plan *P, uint32_t rank, uint32_t peer, uint32_t loc, uint64_t off, uint64_t bytes)
{
    rs_op *o = add_op(P, rank, RS_OP_SEND);
    o->peer = peer;
    o->loc = loc;
    o->off = off;
    o->bytes = bytes;
    staging_covers(P, rank, loc, off + bytes);
}

void tb_recv(rs_plan *P, uint32_t rank, uint32_t peer, uint32_t loc, uint64_t off, uint64_t bytes)
{
    rs_op *o = add_op(P, rank, RS_OP_RECV);
    o->peer = peer;
    o->loc = loc;
    o->off = off;
    o->bytes = bytes;
    staging_covers(P, rank, loc, off + bytes);
}

static uint32_t add_desc(rs_plan *P, uint32_t rank, uint32_t loc, uint64_t off, uint64_t stride, uint64_t rows,
                         uint64_t rowbytes)
{
    rs_rank_prog *g = &P->ranks[rank];
    rs_desc d;
    memset(&d, 0, sizeof d);
    d.loc = loc;
    d.offset = off;
    if (rows == 1) {
        d.ndim = 1;
        d.count[0] = rowbytes;
        d.stride[0] = 1;
    } else {
        d.ndim = 2;
        d.count[0] = rows;
        d.stride[0] = stride;
        d.count[1] = rowbytes;
        d.stride[1] = 1;
    }
    staging_covers(P, rank, loc, off + (rows - 1) * stride + rowbytes);
    return rs_prog_desc_add(g, &d);
}

void tb_copy(rs_plan *P, uint32_t rank, int code, uint32_t sloc, uint64_t soff, uint64_t sstride, uint32_t dloc,
             uint64_t doff, uint64_t dstride, uint64_t rows, uint64_t rowbytes)
{
    uint32_t s = add_desc(P, rank, sloc, soff, sstride, rows, rowbytes);
    uint32_t d = add_desc(P, rank, dloc, doff, dstride, rows, rowbytes);
    rs_op *o = add_op(P, rank, code);
    o->src = s;
    o->dst = d;
    o->bytes = rows * rowbytes;
}

uint32_t tb_loc(const rs_plan *P, uint32_t rank, const char *name)
{
    const rs_rank_prog *g = &P->ranks[rank];
    for (uint32_t i = 0; i < g->nbindings; i++)
        if (!strcmp(P->layout.buffers[g->bindings[i].buffer].name, name)) return i;
    rs_die("rank %u has no binding '%s'", rank, name);
}

void tb_roundtrip(rs_plan *P)
{
    char err[512];
    uint8_t *img;
    size_t len;
    /* the budget covers every rank's staging, as the planner's does (the loader refuses a rank over it) */
    for (uint32_t r = 0; r < P->layout.topo.world; r++)
        if (P->ranks[r].staging_bytes > P->staging_budget) P->staging_budget = P->ranks[r].staging_bytes;
    if (rs_plan_encode(P, &img, &len, err, sizeof err)) rs_die("encode: %s", err);
    rs_plan Q;
    if (rs_plan_decode(img, len, -1, &Q, err, sizeof err)) rs_die("decode: %s", err);
    free(img);
    if (rs_plan_verify_all(&Q, err, sizeof err)) rs_die("verify: %s", err);
    rs_plan_free(P);
    *P = Q;
}
