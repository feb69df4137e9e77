/* fixture.c - the hand-built plan of the plan-format tests (see fixture.h). Layout, in the language:
 *   topology { domain_size = 2; nic_gbps = 400; nvlink_gbps = 3600; }
 *   mesh train [tp = 2] = ranks 0..2;  mesh infer [tp = 2] = ranks 2..4;  mesh all [r = 4] = ranks 0..4;
 *   tensor w : bf16[4, 6];  src w on train { tp: shard(0) } as "layers.0.w";
 *                           dst w on infer { tp: shard(1) } as "model.w";
 *   tensor b : fp32[8];     src b on train { tp = 0 } as "b";   dst b on infer {} as "model.b";
 *   tensor e : int8[2, 4];  src e on all { r = 3 } as "e.src";  dst e on infer { tp: shard(0) } as "e.dst" : [1, 4];
 * Ranks 0 and 1 pack their halves of w for ranks 2 and 3 (NET); rank 0 sends b zero-copy to rank 2's
 * staging, which unpacks it and forwards the same staging bytes to rank 3 over NVLink; rank 3 copies its row of e locally and sends the other. */
#include "fixture.h"

#include <stdlib.h>
#include <string.h>

#include "plan_io.h"
#include "util.h"

static uint32_t add_mesh(rs_layout *L, const char *name, const char *axis, int first, int n)
{
    rs_mesh *m = &L->meshes[L->nmeshes];
    m->name = rs_layout_name(L, name, strlen(name));
    m->naxes = 1;
    m->axis[0] = rs_layout_name(L, axis, strlen(axis));
    m->size[0] = n;
    m->nranks = (uint32_t)n;
    m->ranks = rs_xcalloc((size_t)n, sizeof *m->ranks);
    m->index_of = rs_xcalloc(L->topo.world, sizeof *m->index_of);
    for (uint32_t r = 0; r < L->topo.world; r++) m->index_of[r] = -1;
    for (int k = 0; k < n; k++) {
        m->ranks[k] = first + k;
        m->index_of[first + k] = k;
    }
    return L->nmeshes++;
}

static uint32_t add_buffer(rs_layout *L, const char *name, rs_side side, rs_dtype dt, uint32_t ndim, const int64_t *shape)
{
    rs_buffer *b = &L->buffers[L->nbuffers];
    b->name = rs_layout_name(L, name, strlen(name));
    b->side = side;
    b->dtype = dt;
    b->ndim = ndim;
    for (uint32_t d = 0; d < ndim; d++) b->shape[d] = shape[d];
    return L->nbuffers++;
}

static void add_piece(rs_layout *L, uint32_t t, uint32_t mesh, uint32_t buf, rs_side side, int kind, int dim, int64_t arg,
                      uint32_t box)
{
    rs_piece *p = &L->pieces[L->npieces++];
    memset(p, 0, sizeof *p);
    p->tensor = t, p->mesh = mesh, p->buffer = buf, p->side = (uint8_t)side;
    p->slice = RS_NONE;
    p->box = box;
    p->place = L->nplaces;
    p->nplace = 0;
    if (kind >= 0) {
        rs_place *q = &L->places[L->nplaces++];
        memset(q, 0, sizeof *q);
        q->axis = 0, q->kind = (uint8_t)kind, q->dim = (uint8_t)dim, q->arg = arg;
        p->nplace = 1;
    }
}

static void add_tensor(rs_layout *L, const char *name, rs_dtype dt, uint32_t ndim, const int64_t *shape)
{
    rs_tensor *t = &L->tensors[L->ntensors++];
    t->name = rs_layout_name(L, name, strlen(name));
    t->dtype = dt;
    t->ndim = ndim;
    for (uint32_t d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->piece_begin = L->npieces;
    t->nsrc = 1, t->ndst = 1;
}

typedef struct {
    rs_rank_prog *g;
    uint32_t cap_ops, cap_descs, cap_steps, cap_waits;
} pb;

static void bind(rs_rank_prog *g, uint32_t buffer, uint32_t ndim, const int64_t *shape, int esize)
{
    rs_binding *x = &g->bindings[g->nbindings++];
    memset(x, 0, sizeof *x);
    x->buffer = buffer;
    x->ndim = ndim;
    x->bytes = (uint64_t)esize;
    for (uint32_t d = 0; d < ndim; d++) x->shape[d] = shape[d], x->bytes *= (uint64_t)shape[d];
}

static void step(rs_rank_prog *g, int lane, int nwaits, const uint32_t *waits)
{
    rs_step *s = &g->steps[g->nsteps++];
    memset(s, 0, sizeof *s);
    s->lane = (uint8_t)lane;
    s->wait_begin = g->nwaits;
    s->nwaits = (uint32_t)nwaits;
    for (int i = 0; i < nwaits; i++) g->waits[g->nwaits++] = waits[i];
    s->op_begin = g->nops;
}

static uint32_t desc(rs_rank_prog *g, uint32_t loc, uint64_t off, int ndim, const uint64_t *count, const uint64_t *stride)
{
    rs_desc d;
    memset(&d, 0, sizeof d);
    d.loc = loc, d.offset = off, d.ndim = (uint32_t)ndim;
    for (int i = 0; i < ndim; i++) d.count[i] = count[i], d.stride[i] = stride[i];
    return rs_prog_desc_add(g, &d);
}

static void op_xfer(rs_rank_prog *g, int code, uint32_t tensor, uint32_t peer, uint32_t loc, uint64_t off, uint64_t bytes)
{
    rs_op *o = &g->ops[g->nops++];
    memset(o, 0, sizeof *o);
    o->code = (uint8_t)code, o->tensor = tensor, o->peer = peer, o->loc = loc, o->off = off, o->bytes = bytes;
    g->steps[g->nsteps - 1].nops++;
}

static void op_copy(rs_rank_prog *g, int code, uint32_t tensor, uint32_t src, uint32_t dst)
{
    rs_op *o = &g->ops[g->nops++];
    memset(o, 0, sizeof *o);
    o->code = (uint8_t)code, o->tensor = tensor, o->src = src, o->dst = dst;
    rs_desc d;
    o->bytes = rs_desc_bytes(rs_prog_desc(g, src, &d));
    g->steps[g->nsteps - 1].nops++;
}

void fx_build(rs_plan *P)
{
    memset(P, 0, sizeof *P);
    rs_layout *L = &P->layout;
    L->topo.world = 4;
    L->topo.ndomains = 2;
    L->topo.domain_size = 2;
    L->topo.nic_gbps = 400;
    L->topo.nvlink_gbps = 3600;
    L->topo.domain_of = rs_xcalloc(4, sizeof *L->topo.domain_of);
    for (uint32_t r = 0; r < 4; r++) L->topo.domain_of[r] = r / 2;
    L->meshes = rs_xcalloc(3, sizeof *L->meshes);
    L->tensors = rs_xcalloc(3, sizeof *L->tensors);
    L->buffers = rs_xcalloc(6, sizeof *L->buffers);
    L->pieces = rs_xcalloc(6, sizeof *L->pieces);
    L->places = rs_xcalloc(6, sizeof *L->places);
    L->i64 = rs_xcalloc(4, sizeof *L->i64);
    uint32_t train = add_mesh(L, "train", "tp", 0, 2), infer = add_mesh(L, "infer", "tp", 2, 2);
    uint32_t all = add_mesh(L, "all", "r", 0, 4);

    int64_t s46[] = {4, 6}, s43[] = {4, 3}, s8[] = {8}, s24[] = {2, 4}, s14[] = {1, 4}, s26[] = {2, 6};
    uint32_t b_lw = add_buffer(L, "layers.0.w", RS_SRC, RS_DT_BF16, 0, NULL);
    uint32_t b_mw = add_buffer(L, "model.w", RS_DST, RS_DT_BF16, 2, s43);
    uint32_t b_b = add_buffer(L, "b", RS_SRC, RS_DT_FP32, 0, NULL);
    uint32_t b_mb = add_buffer(L, "model.b", RS_DST, RS_DT_FP32, 0, NULL);
    uint32_t b_es = add_buffer(L, "e.src", RS_SRC, RS_DT_INT8, 0, NULL);
    uint32_t b_ed = add_buffer(L, "e.dst", RS_DST, RS_DT_INT8, 2, s14);

    add_tensor(L, "w", RS_DT_BF16, 2, s46);
    add_piece(L, 0, train, b_lw, RS_SRC, RS_PLACE_SHARD, 0, 0, RS_NONE);
    add_piece(L, 0, infer, b_mw, RS_DST, RS_PLACE_SHARD, 1, 0, RS_NONE);
    add_tensor(L, "b", RS_DT_FP32, 1, s8);
    add_piece(L, 1, train, b_b, RS_SRC, RS_PLACE_PIN, 0, 0, RS_NONE);
    add_piece(L, 1, infer, b_mb, RS_DST, -1, 0, 0, RS_NONE);
    add_tensor(L, "e", RS_DT_INT8, 2, s24);
    add_piece(L, 2, all, b_es, RS_SRC, RS_PLACE_PIN, 0, 3, RS_NONE);
    /* box [0:1, 0:4] of e.dst, explicit to exercise the i64 pool */
    L->i64[0] = 0, L->i64[1] = 0, L->i64[2] = 1, L->i64[3] = 4;
    L->ni64 = 4;
    add_piece(L, 2, infer, b_ed, RS_DST, RS_PLACE_SHARD, 0, 0, 0);

    P->staging_budget = 1 << 20;
    P->source_fp = 0x0123456789abcdefull;
    P->ranks = rs_xcalloc(4, sizeof *P->ranks);
    for (uint32_t r = 0; r < 4; r++) {
        rs_rank_prog *g = &P->ranks[r];
        g->rank = r;
        g->loaded = 1;
        g->bindings = rs_xcalloc(8, sizeof *g->bindings);
        g->steps = rs_xcalloc(8, sizeof *g->steps);
        g->ops = rs_xcalloc(16, sizeof *g->ops);
        g->waits = rs_xcalloc(8, sizeof *g->waits);
    }
    const uint64_t c1[] = {12}, c24[] = {24}, c2x6[] = {2, 6}, st12[] = {12, 1}, one[] = {1}, c4[] = {4};
    const uint32_t w0[] = {0};
    for (uint32_t r = 0; r < 2; r++) { /* sources of w (rows 2r..2r+2) */
        rs_rank_prog *g = &P->ranks[r];
        bind(g, b_lw, 2, s26, 2);
        if (r == 0) bind(g, b_b, 1, s8, 4);
        g->staging_bytes = 24;
        step(g, RS_LANE_NET, 0, NULL);
        uint32_t a = desc(g, 0, 0, 2, c2x6, st12), sa = desc(g, RS_LOC_STAGING, 0, 1, c1, one);
        uint32_t b = desc(g, 0, 6, 2, c2x6, st12), sb = desc(g, RS_LOC_STAGING, 12, 1, c1, one);
        op_copy(g, RS_OP_PACK, 0, a, sa);
        op_copy(g, RS_OP_PACK, 0, b, sb);
        op_xfer(g, RS_OP_SEND, 0, 2, RS_LOC_STAGING, 0, 12);
        op_xfer(g, RS_OP_SEND, 0, 3, RS_LOC_STAGING, 12, 12);
        if (r == 0) op_xfer(g, RS_OP_SEND, 1, 2, 1, 0, 32);
    }
    { /* rank 2: w columns 0:3, b (through staging, then forwarded from there over NVLink), e row 0 */
        rs_rank_prog *g = &P->ranks[2];
        const uint64_t c32[] = {32};
        bind(g, b_mw, 2, s43, 2);
        bind(g, b_mb, 1, s8, 4);
        bind(g, b_ed, 2, s14, 1);
        g->staging_bytes = 44;
        step(g, RS_LANE_NET, 0, NULL);
        uint32_t s = desc(g, RS_LOC_STAGING, 0, 1, c1, one), d = desc(g, 0, 0, 1, c1, one);
        uint32_t sb = desc(g, RS_LOC_STAGING, 12, 1, c32, one), db = desc(g, 1, 0, 1, c32, one);
        op_xfer(g, RS_OP_RECV, 0, 0, RS_LOC_STAGING, 0, 12);
        op_xfer(g, RS_OP_RECV, 0, 1, 0, 12, 12);
        op_xfer(g, RS_OP_RECV, 1, 0, RS_LOC_STAGING, 12, 32);
        op_copy(g, RS_OP_UNPACK, 0, s, d);
        op_copy(g, RS_OP_UNPACK, 1, sb, db);
        step(g, RS_LANE_NVL, 1, w0);
        op_xfer(g, RS_OP_SEND, 1, 3, RS_LOC_STAGING, 12, 32);
        op_xfer(g, RS_OP_RECV, 2, 3, 2, 0, 4);
    }
    { /* rank 3: w columns 3:6, b from rank 2, e row 1 locally, e row 0 to rank 2 */
        rs_rank_prog *g = &P->ranks[3];
        bind(g, b_mw, 2, s43, 2);
        bind(g, b_mb, 1, s8, 4);
        bind(g, b_es, 2, s24, 1);
        bind(g, b_ed, 2, s14, 1);
        g->staging_bytes = 24;
        step(g, RS_LANE_NET, 0, NULL);
        uint32_t s = desc(g, RS_LOC_STAGING, 0, 1, c24, one), d = desc(g, 0, 0, 1, c24, one);
        uint32_t es = desc(g, 2, 4, 1, c4, one), ed = desc(g, 3, 0, 1, c4, one);
        op_xfer(g, RS_OP_RECV, 0, 0, RS_LOC_STAGING, 0, 12);
        op_xfer(g, RS_OP_RECV, 0, 1, RS_LOC_STAGING, 12, 12);
        op_copy(g, RS_OP_UNPACK, 0, s, d);
        op_copy(g, RS_OP_COPY, 2, es, ed);
        step(g, RS_LANE_NVL, 0, NULL);
        op_xfer(g, RS_OP_RECV, 1, 2, 1, 0, 32);
        op_xfer(g, RS_OP_SEND, 2, 2, 2, 0, 4);
    }
}

/* ---- comparison ---- */

#define DIFF(what)                                                                                 \
    do {                                                                                           \
        fprintf(stderr, "plans differ: %s\n", what);                                               \
        return 0;                                                                                  \
    } while (0)

static int same_str(const char *a, const char *b) { return a && b && !strcmp(a, b); }

int fx_same_plan(const rs_plan *a, const rs_plan *b, int rank)
{
    const rs_layout *A = &a->layout, *B = &b->layout;
    if (A->topo.world != B->topo.world || A->topo.ndomains != B->topo.ndomains ||
        A->topo.domain_size != B->topo.domain_size || A->topo.nic_gbps != B->topo.nic_gbps ||
        A->topo.nvlink_gbps != B->topo.nvlink_gbps ||
        memcmp(A->topo.domain_of, B->topo.domain_of, A->topo.world * sizeof *A->topo.domain_of))
        DIFF("topology");
    if (A->nmeshes != B->nmeshes || A->ntensors != B->ntensors || A->nbuffers != B->nbuffers ||
        A->npieces != B->npieces || A->nplaces != B->nplaces || A->ni64 != B->ni64)
        DIFF("layout table sizes");
    for (uint32_t i = 0; i < A->nmeshes; i++) {
        const rs_mesh *x = &A->meshes[i], *y = &B->meshes[i];
        if (!same_str(x->name, y->name) || x->naxes != y->naxes || x->nranks != y->nranks ||
            memcmp(x->size, y->size, sizeof x->size) || memcmp(x->ranks, y->ranks, x->nranks * sizeof *x->ranks) ||
            memcmp(x->index_of, y->index_of, A->topo.world * sizeof *x->index_of))
            DIFF("mesh");
        for (uint32_t k = 0; k < x->naxes; k++)
            if (!same_str(x->axis[k], y->axis[k])) DIFF("mesh axis");
    }
    for (uint32_t i = 0; i < A->ntensors; i++) {
        const rs_tensor *x = &A->tensors[i], *y = &B->tensors[i];
        if (!same_str(x->name, y->name) || x->dtype != y->dtype || x->ndim != y->ndim ||
            memcmp(x->shape, y->shape, x->ndim * sizeof x->shape[0]) || x->piece_begin != y->piece_begin ||
            x->nsrc != y->nsrc || x->ndst != y->ndst)
            DIFF("tensor");
    }
    for (uint32_t i = 0; i < A->nbuffers; i++) {
        const rs_buffer *x = &A->buffers[i], *y = &B->buffers[i];
        if (!same_str(x->name, y->name) || x->side != y->side || x->dtype != y->dtype || x->ndim != y->ndim ||
            x->group != y->group || memcmp(x->shape, y->shape, x->ndim * sizeof x->shape[0]))
            DIFF("buffer");
    }
    for (uint32_t i = 0; i < A->npieces; i++) {
        const rs_piece *x = &A->pieces[i], *y = &B->pieces[i];
        if (x->tensor != y->tensor || x->mesh != y->mesh || x->buffer != y->buffer || x->side != y->side ||
            x->nplace != y->nplace || x->place != y->place || x->slice != y->slice || x->box != y->box)
            DIFF("piece");
    }
    for (uint32_t i = 0; i < A->nplaces; i++) {
        const rs_place *x = &A->places[i], *y = &B->places[i];
        if (x->axis != y->axis || x->kind != y->kind || x->dim != y->dim || x->arg != y->arg) DIFF("place");
    }
    if (A->ni64 && memcmp(A->i64, B->i64, A->ni64 * sizeof *A->i64)) DIFF("i64 pool");
    if (a->staging_budget != b->staging_budget || a->source_fp != b->source_fp) DIFF("header facts");
    for (uint32_t r = 0; r < A->topo.world; r++) {
        if (rank >= 0 && r != (uint32_t)rank) continue;
        const rs_rank_prog *x = &a->ranks[r], *y = &b->ranks[r];
        if (x->rank != y->rank || x->staging_bytes != y->staging_bytes || x->nbindings != y->nbindings ||
            x->nsteps != y->nsteps || x->nops != y->nops || x->ndescs != y->ndescs || x->nwaits != y->nwaits)
            DIFF("rank counts");
        for (uint32_t i = 0; i < x->nbindings; i++) {
            const rs_binding *p = &x->bindings[i], *q = &y->bindings[i];
            if (p->buffer != q->buffer || p->ndim != q->ndim || p->bytes != q->bytes ||
                memcmp(p->shape, q->shape, p->ndim * sizeof p->shape[0]))
                DIFF("binding");
        }
        for (uint32_t i = 0; i < x->nsteps; i++) {
            const rs_step *p = &x->steps[i], *q = &y->steps[i];
            if (p->lane != q->lane || p->wait_begin != q->wait_begin || p->nwaits != q->nwaits ||
                p->op_begin != q->op_begin || p->nops != q->nops)
                DIFF("step");
        }
        if (x->nwaits && memcmp(x->waits, y->waits, x->nwaits * sizeof *x->waits)) DIFF("waits");
        for (uint32_t i = 0; i < x->nops; i++) {
            const rs_op *p = &x->ops[i], *q = &y->ops[i];
            int xfer = p->code == RS_OP_SEND || p->code == RS_OP_RECV;
            if (p->code != q->code || p->tensor != q->tensor || p->bytes != q->bytes ||
                (xfer && (p->peer != q->peer || p->loc != q->loc || p->off != q->off)) ||
                (!xfer && (p->src != q->src || p->dst != q->dst)))
                DIFF("op");
        }
        for (uint32_t i = 0; i < x->ndescs; i++) {
            rs_desc pb, qb;
            const rs_desc *p = rs_prog_desc(x, i, &pb), *q = rs_prog_desc(y, i, &qb);
            if (p->loc != q->loc || p->ndim != q->ndim || p->offset != q->offset ||
                memcmp(p->count, q->count, p->ndim * sizeof p->count[0]) ||
                memcmp(p->stride, q->stride, p->ndim * sizeof p->stride[0]))
                DIFF("descriptor");
        }
    }
    return 1;
}

/* ---- resealing ---- */

int fx_reseal(uint8_t *img, size_t len)
{
    if (len < RS_HDR_SIZE_1_0) return -1;
    uint32_t hl = rs_rd32(img + RS_HDR_LEN), ns = rs_rd32(img + RS_HDR_NSECTIONS);
    if (hl < RS_HDR_SIZE_1_0 || hl > 4096 || ns > RS_SEC_MAX) return -1;
    uint64_t tend = hl + (uint64_t)ns * RS_SEC_ENTRY_SIZE;
    if (tend > len) return -1;
    const uint8_t *secs[RS_SEC_MAX];
    uint8_t *dir = NULL, *prog = NULL;
    uint64_t dirlen = 0, proglen = 0;
    for (uint32_t i = 0; i < ns; i++) {
        uint8_t *e = img + hl + (size_t)i * RS_SEC_ENTRY_SIZE;
        uint64_t off = rs_rd64(e + 8), n = rs_rd64(e + 16);
        if (off > len || n > len - off) return -1;
        secs[i] = img + off;
        if (rs_rd32(e) == RS_SEC_RANKS) dir = img + off, dirlen = n;
        if (rs_rd32(e) == RS_SEC_PROGRAMS) prog = img + off, proglen = n;
    }
    if (dir && prog)
        for (uint64_t k = 0; k + RS_DIR_ENTRY_SIZE <= dirlen; k += RS_DIR_ENTRY_SIZE) {
            uint64_t off = rs_rd64(dir + k), n = rs_rd64(dir + k + 8);
            if (off <= proglen && n <= proglen - off) rs_le32(dir + k + 24, rs_crc32c(0, prog + off, (size_t)n));
        }
    for (uint32_t i = 0; i < ns; i++) {
        uint8_t *e = img + hl + (size_t)i * RS_SEC_ENTRY_SIZE;
        rs_le32(e + 24, rs_crc32c(0, secs[i], (size_t)rs_rd64(e + 16)));
    }
    rs_le64(img + RS_HDR_PLAN_FP, rs_plan_content_fp(img, secs));
    rs_le32(img + RS_HDR_CRC, rs_plan_header_crc(img, (size_t)tend));
    return 0;
}
