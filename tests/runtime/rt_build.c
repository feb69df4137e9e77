/* rt_build.c - in-memory plans for the runtime tests and benchmarks: a layout built from code and a naive
 * planner (each destination block intersected with each distinct source block, one message per fragment),
 * or programs written op by op. Only implicit buffers (the local block is the whole buffer). */
#include "rt_build.h"

#include <string.h>

#include "util.h"

typedef struct {
    rs_vec(rs_binding) bind;
    rs_vec(rs_step) steps;
    rs_vec(rs_op) ops;
    rs_vec(rs_desc) descs;
    rs_vec(uint32_t) waits;
    uint64_t staging;
} rank_build;

typedef struct {
    rs_piece p;
    rs_place pl[RS_MAX_DIMS];
    uint32_t seq;
} piece_build;

struct rtb {
    rs_plan P;
    rs_vec(rs_mesh) meshes;
    rs_vec(rs_tensor) tensors;
    rs_vec(rs_buffer) buffers;
    rs_vec(piece_build) pieces;
    rank_build *rk;
};

rtb *rtb_new(uint32_t world, uint32_t domain_size)
{
    rtb *b = rs_xcalloc(1, sizeof *b);
    rs_topology *T = &b->P.layout.topo;
    T->world = world;
    T->domain_size = domain_size;
    T->domain_of = rs_xcalloc(world, sizeof(uint32_t));
    for (uint32_t r = 0; r < world; r++) T->domain_of[r] = r / domain_size;
    T->ndomains = (world + domain_size - 1) / domain_size;
    T->nic_gbps = 400;
    T->nvlink_gbps = 3600;
    b->rk = rs_xcalloc(world, sizeof *b->rk);
    b->P.staging_budget = 256ull << 20;
    return b;
}

uint32_t rtb_mesh(rtb *b, const char *name, uint32_t naxes, const char *const *axes, const int64_t *sizes,
                  uint32_t first_rank)
{
    rs_layout *L = &b->P.layout;
    rs_mesh m;
    memset(&m, 0, sizeof m);
    m.name = rs_layout_name(L, name, strlen(name));
    m.naxes = naxes;
    m.nranks = 1;
    for (uint32_t a = 0; a < naxes; a++) {
        m.axis[a] = rs_layout_name(L, axes[a], strlen(axes[a]));
        m.size[a] = sizes[a];
        m.nranks *= (uint32_t)sizes[a];
    }
    m.ranks = rs_xcalloc(m.nranks, sizeof(int32_t));
    m.index_of = rs_xcalloc(L->topo.world, sizeof(int32_t));
    for (uint32_t r = 0; r < L->topo.world; r++) m.index_of[r] = -1;
    for (uint32_t i = 0; i < m.nranks; i++) {
        m.ranks[i] = (int32_t)(first_rank + i);
        rs_assert(first_rank + i < L->topo.world);
        m.index_of[first_rank + i] = (int32_t)i;
    }
    rs_vec_push(&b->meshes, m);
    return (uint32_t)b->meshes.n - 1;
}

uint32_t rtb_tensor(rtb *b, const char *name, rs_dtype dt, uint32_t ndim, const int64_t *shape)
{
    rs_tensor t;
    memset(&t, 0, sizeof t);
    t.name = rs_layout_name(&b->P.layout, name, strlen(name));
    t.dtype = dt;
    t.ndim = ndim;
    memcpy(t.shape, shape, ndim * sizeof *shape);
    rs_vec_push(&b->tensors, t);
    return (uint32_t)b->tensors.n - 1;
}

void rtb_piece(rtb *b, rs_side side, uint32_t tensor, uint32_t mesh, uint32_t nplace, const rs_place *pl,
               const char *buffer)
{
    rs_buffer buf;
    memset(&buf, 0, sizeof buf);
    buf.name = rs_layout_name(&b->P.layout, buffer, strlen(buffer));
    buf.side = side;
    buf.dtype = b->tensors.v[tensor].dtype;
    rs_vec_push(&b->buffers, buf);
    piece_build pb;
    memset(&pb, 0, sizeof pb);
    pb.p.tensor = tensor;
    pb.p.mesh = mesh;
    pb.p.buffer = (uint32_t)b->buffers.n - 1;
    pb.p.side = (uint8_t)side;
    pb.p.nplace = (uint8_t)nplace;
    pb.p.slice = RS_NONE;
    pb.p.box = RS_NONE;
    if (nplace) memcpy(pb.pl, pl, nplace * sizeof *pl);
    pb.seq = (uint32_t)b->pieces.n;
    rs_vec_push(&b->pieces, pb);
}

static int cmp_piece(const void *a, const void *c)
{
    const piece_build *x = a, *y = c;
    if (x->p.tensor != y->p.tensor) return x->p.tensor < y->p.tensor ? -1 : 1;
    if (x->p.side != y->p.side) return x->p.side < y->p.side ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Block of piece p on rank r (count 0 when the rank does not hold it or the block is empty). */
static int64_t block_on(const rs_layout *L, const rs_piece *p, uint32_t r, int64_t *lo, int64_t *hi)
{
    const rs_mesh *m = &L->meshes[p->mesh];
    if (m->index_of[r] < 0) return 0;
    int64_t c[RS_MAX_DIMS];
    rs_mesh_coord(m, (uint32_t)m->index_of[r], c);
    if (!rs_piece_holds(L, p, c)) return 0;
    return rs_piece_block(L, p, c, lo, hi);
}

void rtb_layout_done(rtb *b)
{
    rs_layout *L = &b->P.layout;
    qsort(b->pieces.v, b->pieces.n, sizeof *b->pieces.v, cmp_piece);
    L->nmeshes = (uint32_t)b->meshes.n;
    L->meshes = b->meshes.v;
    L->ntensors = (uint32_t)b->tensors.n;
    L->tensors = b->tensors.v;
    L->nbuffers = (uint32_t)b->buffers.n;
    L->buffers = b->buffers.v;
    L->npieces = (uint32_t)b->pieces.n;
    L->pieces = rs_xcalloc(L->npieces + 1, sizeof *L->pieces);
    L->places = rs_xcalloc(L->npieces * RS_MAX_DIMS + 1, sizeof *L->places);
    for (uint32_t i = 0; i < L->npieces; i++) {
        rs_piece p = b->pieces.v[i].p;
        p.place = L->nplaces;
        for (uint32_t k = 0; k < p.nplace; k++) L->places[L->nplaces++] = b->pieces.v[i].pl[k];
        L->pieces[i] = p;
        rs_tensor *t = &L->tensors[p.tensor];
        if (t->nsrc + t->ndst == 0) t->piece_begin = i;
        if (p.side == RS_SRC) t->nsrc++;
        else t->ndst++;
    }
    for (uint32_t r = 0; r < L->topo.world; r++) {
        for (uint32_t i = 0; i < L->npieces; i++) {
            const rs_piece *p = &L->pieces[i];
            int64_t lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
            if (block_on(L, p, r, lo, hi) <= 0) continue;
            rs_binding bd;
            memset(&bd, 0, sizeof bd);
            bd.buffer = p->buffer;
            bd.ndim = L->tensors[p->tensor].ndim;
            bd.bytes = (uint64_t)rs_dtype_size(L->tensors[p->tensor].dtype);
            for (uint32_t d = 0; d < bd.ndim; d++) {
                bd.shape[d] = hi[d] - lo[d];
                bd.bytes *= (uint64_t)bd.shape[d];
            }
            rs_vec_push(&b->rk[r].bind, bd);
        }
    }
}

uint32_t rtb_binding(rtb *b, uint32_t rank, const char *buffer, rs_side side)
{
    rank_build *k = &b->rk[rank];
    for (uint32_t i = 0; i < k->bind.n; i++) {
        const rs_buffer *bf = &b->P.layout.buffers[k->bind.v[i].buffer];
        if (!strcmp(bf->name, buffer) && bf->side == side) return i;
    }
    rs_die("rank %u binds no buffer '%s'", rank, buffer);
}

uint32_t rtb_step(rtb *b, uint32_t rank, int lane, uint32_t nwaits, const uint32_t *waits)
{
    rank_build *k = &b->rk[rank];
    rs_step s;
    memset(&s, 0, sizeof s);
    s.lane = (uint8_t)lane;
    s.op_begin = (uint32_t)k->ops.n;
    s.wait_begin = (uint32_t)k->waits.n;
    s.nwaits = nwaits;
    for (uint32_t i = 0; i < nwaits; i++) rs_vec_push(&k->waits, waits[i]);
    rs_vec_push(&k->steps, s);
    return (uint32_t)k->steps.n - 1;
}

static void push_op(rtb *b, uint32_t rank, rs_op op)
{
    rank_build *k = &b->rk[rank];
    rs_assert(k->steps.n > 0);
    op.tensor = RS_NONE;
    rs_vec_push(&k->ops, op);
    k->steps.v[k->steps.n - 1].nops++;
}

void rtb_p2p(rtb *b, uint32_t rank, int send, uint32_t peer, uint32_t loc, uint64_t off, uint64_t bytes)
{
    rs_op op;
    memset(&op, 0, sizeof op);
    op.code = send ? RS_OP_SEND : RS_OP_RECV;
    op.peer = peer;
    op.loc = loc;
    op.off = off;
    op.bytes = bytes;
    push_op(b, rank, op);
}

rs_desc rtb_range(uint32_t loc, uint64_t off, uint64_t bytes) { return rs_desc_range(loc, off, bytes); }

void rtb_copy(rtb *b, uint32_t rank, int code, rs_desc src, rs_desc dst)
{
    rank_build *k = &b->rk[rank];
    rs_op op;
    memset(&op, 0, sizeof op);
    op.code = (uint8_t)code;
    op.src = (uint32_t)k->descs.n;
    rs_vec_push(&k->descs, src);
    op.dst = (uint32_t)k->descs.n;
    rs_vec_push(&k->descs, dst);
    op.bytes = rs_desc_bytes(&src);
    push_op(b, rank, op);
}

void rtb_staging(rtb *b, uint32_t rank, uint64_t bytes) { b->rk[rank].staging = bytes; }

/* ---------------------------------------------------------------- naive planner */

typedef struct {
    uint32_t src, dst; /* ranks */
    int lane;
    int local;
    rs_desc sd, dd; /* regions in the bound buffers */
    int contiguous;
    uint64_t bytes;
    uint64_t soff, doff; /* staging offsets on each side (packed messages) */
    uint32_t step;       /* step index within the lane split */
} frag;

/* Region of box [flo, fhi) inside a block [lo, hi) laid out row-major in binding `loc`. */
static rs_desc region(uint32_t loc, uint32_t nd, const int64_t *lo, const int64_t *hi, const int64_t *flo,
                      const int64_t *fhi, uint64_t es, int *contiguous)
{
    rs_desc d;
    memset(&d, 0, sizeof d);
    d.loc = loc;
    d.ndim = nd;
    uint64_t stride = es;
    for (int i = (int)nd - 1; i >= 0; i--) {
        uint64_t ext = (uint64_t)(hi[i] - lo[i]);
        d.count[i] = (uint64_t)(fhi[i] - flo[i]);
        d.stride[i] = stride;
        d.offset += (uint64_t)(flo[i] - lo[i]) * stride;
        stride *= ext;
    }
    d.count[nd - 1] *= es;
    d.stride[nd - 1] = 1;
    /* contiguous: after the first dim (from the outside) with count > 1, every inner dim is whole */
    int c = 1, seen = 0;
    for (uint32_t i = 0; i < nd; i++) {
        if (seen && fhi[i] - flo[i] != hi[i] - lo[i]) c = 0;
        if (fhi[i] - flo[i] > 1) seen = 1;
    }
    *contiguous = c;
    return d;
}

void rtb_autoplan(rtb *b, const rtb_opts *o)
{
    rs_layout *L = &b->P.layout;
    uint32_t W = L->topo.world;
    int nsteps = o->steps > 0 ? o->steps : 1;
    rs_vec(frag) fr = {0};
    for (uint32_t t = 0; t < L->ntensors; t++) {
        const rs_tensor *T = &L->tensors[t];
        uint64_t es = (uint64_t)rs_dtype_size(T->dtype);
        uint32_t nd = T->ndim;
        for (uint32_t dpi = 0; dpi < T->ndst; dpi++) {
            const rs_piece *dp = &L->pieces[T->piece_begin + T->nsrc + dpi];
            for (uint32_t r = 0; r < W; r++) {
                int64_t dlo[RS_MAX_DIMS], dhi[RS_MAX_DIMS];
                if (block_on(L, dp, r, dlo, dhi) <= 0) continue;
                for (uint32_t spi = 0; spi < T->nsrc; spi++) {
                    const rs_piece *sp = &L->pieces[T->piece_begin + spi];
                    /* distinct source blocks, each from one holder: the rank itself, else one in r's domain,
                     * else the lowest rank */
                    for (uint32_t q = 0; q < W; q++) {
                        int64_t slo[RS_MAX_DIMS], shi[RS_MAX_DIMS];
                        if (block_on(L, sp, q, slo, shi) <= 0) continue;
                        int64_t flo[RS_MAX_DIMS], fhi[RS_MAX_DIMS];
                        int empty = 0;
                        for (uint32_t d = 0; d < nd; d++) {
                            flo[d] = slo[d] > dlo[d] ? slo[d] : dlo[d];
                            fhi[d] = shi[d] < dhi[d] ? shi[d] : dhi[d];
                            if (fhi[d] <= flo[d]) empty = 1;
                        }
                        if (empty) continue;
                        /* is there a better holder of the same block? */
                        uint32_t best = q;
                        int score = q == r ? 2 : L->topo.domain_of[q] == L->topo.domain_of[r];
                        int first = 1;
                        for (uint32_t q2 = 0; q2 < W; q2++) {
                            int64_t lo2[RS_MAX_DIMS], hi2[RS_MAX_DIMS];
                            if (block_on(L, sp, q2, lo2, hi2) <= 0) continue;
                            if (memcmp(lo2, slo, nd * sizeof *lo2) || memcmp(hi2, shi, nd * sizeof *hi2)) continue;
                            if (q2 < q) first = 0; /* this block was handled at q2 */
                            int sc = q2 == r ? 2 : L->topo.domain_of[q2] == L->topo.domain_of[r];
                            if (sc > score) score = sc, best = q2;
                        }
                        if (!first) continue;
                        frag f;
                        memset(&f, 0, sizeof f);
                        f.src = best;
                        f.dst = r;
                        f.local = best == r;
                        f.lane = o->nvl && L->topo.domain_of[best] == L->topo.domain_of[r] ? RS_LANE_NVL : RS_LANE_NET;
                        int c1, c2;
                        uint32_t sb = RS_NONE, db = RS_NONE;
                        for (uint32_t i = 0; i < b->rk[best].bind.n; i++)
                            if (b->rk[best].bind.v[i].buffer == sp->buffer) sb = i;
                        for (uint32_t i = 0; i < b->rk[r].bind.n; i++)
                            if (b->rk[r].bind.v[i].buffer == dp->buffer) db = i;
                        rs_assert(sb != RS_NONE && db != RS_NONE);
                        f.sd = region(sb, nd, slo, shi, flo, fhi, es, &c1);
                        f.dd = region(db, nd, dlo, dhi, flo, fhi, es, &c2);
                        f.contiguous = c1 && c2;
                        f.bytes = rs_desc_bytes(&f.sd);
                        rs_vec_push(&fr, f);
                    }
                }
            }
        }
    }
    /* Staging offsets for packed messages; step index round-robin per (sender) to spread messages. */
    uint64_t *sst = rs_xcalloc(W, sizeof *sst);
    uint32_t *cnt = rs_xcalloc(W, sizeof *cnt);
    for (size_t i = 0; i < fr.n; i++) {
        frag *f = &fr.v[i];
        f->step = cnt[f->src]++ % (uint32_t)nsteps;
        if (f->local || (o->zero_copy && f->contiguous)) continue;
        f->soff = sst[f->src];
        sst[f->src] += f->bytes;
        f->doff = sst[f->dst];
        sst[f->dst] += f->bytes;
    }
    /* Programs: for k in steps, NET step then NVL step; ops PACK/COPY, SEND/RECV in fragment order, UNPACK. */
    for (uint32_t r = 0; r < W; r++) {
        rtb_staging(b, r, sst[r]);
        for (int k = 0; k < nsteps; k++) {
            for (int lane = 0; lane < RS_NLANES; lane++) {
                int any = 0;
                for (size_t i = 0; i < fr.n; i++) {
                    frag *f = &fr.v[i];
                    if ((int)f->step != k || (f->src != r && f->dst != r)) continue;
                    if ((f->local ? RS_LANE_NET : f->lane) != lane) continue;
                    any = 1;
                }
                if (!any) continue;
                rtb_step(b, r, lane, 0, NULL);
                for (int phase = 0; phase < 3; phase++) {
                    for (size_t i = 0; i < fr.n; i++) {
                        frag *f = &fr.v[i];
                        if ((int)f->step != k || (f->src != r && f->dst != r)) continue;
                        if ((f->local ? RS_LANE_NET : f->lane) != lane) continue;
                        int zc = o->zero_copy && f->contiguous;
                        if (f->local) {
                            if (phase == 0) rtb_copy(b, r, RS_OP_COPY, f->sd, f->dd);
                        } else if (phase == 0 && f->src == r && !zc) {
                            rtb_copy(b, r, RS_OP_PACK, f->sd, rtb_range(RS_LOC_STAGING, f->soff, f->bytes));
                        } else if (phase == 1 && f->src == r) {
                            if (zc) rtb_p2p(b, r, 1, f->dst, f->sd.loc, f->sd.offset, f->bytes);
                            else rtb_p2p(b, r, 1, f->dst, RS_LOC_STAGING, f->soff, f->bytes);
                        } else if (phase == 1 && f->dst == r) {
                            if (zc) rtb_p2p(b, r, 0, f->src, f->dd.loc, f->dd.offset, f->bytes);
                            else rtb_p2p(b, r, 0, f->src, RS_LOC_STAGING, f->doff, f->bytes);
                        } else if (phase == 2 && f->dst == r && !zc) {
                            rtb_copy(b, r, RS_OP_UNPACK, rtb_range(RS_LOC_STAGING, f->doff, f->bytes), f->dd);
                        }
                    }
                }
            }
        }
    }
    free(sst);
    free(cnt);
    rs_vec_free(&fr);
}

uint8_t *rtb_encode(rs_plan *P, size_t *len)
{
    uint8_t *img = NULL;
    char err[256];
    if (rs_plan_encode(P, &img, len, err, sizeof err) != 0) rs_die("encoding a test plan: %s", err);
    return img;
}

void rtb_finish(rtb *b, rs_plan *P)
{
    rs_layout *L = &b->P.layout;
    uint32_t W = L->topo.world;
    b->P.ranks = rs_xcalloc(W, sizeof *b->P.ranks);
    for (uint32_t r = 0; r < W; r++) {
        rank_build *k = &b->rk[r];
        rs_rank_prog *g = &b->P.ranks[r];
        g->rank = r;
        g->loaded = 1;
        g->staging_bytes = k->staging;
        g->bindings = k->bind.v, g->nbindings = (uint32_t)k->bind.n;
        g->steps = k->steps.v, g->nsteps = (uint32_t)k->steps.n;
        g->ops = k->ops.v, g->nops = (uint32_t)k->ops.n;
        for (size_t i = 0; i < k->descs.n; i++) rs_prog_desc_add(g, &k->descs.v[i]);
        rs_vec_free(&k->descs);
        g->waits = k->waits.v, g->nwaits = (uint32_t)k->waits.n;
    }
    free(b->rk);
    b->rk = NULL;
    rs_vec_free(&b->pieces);
    *P = b->P;
    free(b);
    /* plan_fp: set by encoding */
    size_t len;
    uint8_t *img = rtb_encode(P, &len);
    free(img);
}
