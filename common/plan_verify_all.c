/* plan_verify_all.c - whole-plan verification: every rank's structure (rs_plan_verify_rank), SEND/RECV
 * matching per lane, peer pair, order and size, deadlock freedom by simulating every rank's steps (lane
 * order, waits, group matching), no staging race between steps that may run concurrently, relays (reads
 * of destination bytes) only after the one write of those bytes is complete, and, by region algebra over
 * the layout, that every destination element is written exactly once with the right source element. The
 * data check follows byte runs symbolically from source bindings (or relayed destination bindings) through
 * PACK, SEND/RECV, forwarding and UNPACK (or COPY) to destination bindings, maps both ends to tensor
 * elements through the pieces the layout puts in those buffers, and compares them; coverage is checked per
 * rank and destination piece with tensor boxes. Errors name the rank, step, op and tensor. On a large plan
 * and two CPUs (rs_threads) the per-rank checks and coverage split the ranks over two threads, the piece
 * index is built beside matching, and the simulation hands its delivery checks to a checker thread; the
 * verdict, the first problem's message and the work counted are those of one thread. */
#include "plan.h"
#include "util.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VND RS_MAX_DIMS
#define VNF (2 * RS_MAX_DIMS)

typedef rs_vec(rs_desc) desc_vec;

/* ---- pieces as seen from a binding ---- */

/* A piece as seen from one (rank, binding) (hundreds of thousands on a large plan, so kept small): its
 * per-dimension numbers live in the context's pool dv, from `dim` on: the block blo[nd], bhi[nd] (tensor
 * coords), the box in the buffer box_lo[bnd], box_hi[bnd] and the buffer strides bstride[bnd] (elements);
 * once built, from `fdim` on, the common refinement F of block and box shapes, outer to inner: radices
 * frad[nf], buffer strides fphi[nf] and tensor linear strides ftau[nf] (elements). */
typedef struct {
    uint32_t piece, tensor, rank;
    uint32_t dim, fdim; /* into dv */
    uint8_t es, nd, bnd, nf;
    uint8_t built, noref; /* noref: no common refinement (mapped by row runs) */
    uint64_t volume;      /* elements */
    uint64_t box_off;     /* element offset of the box origin */
    uint64_t T0;          /* tensor linear index of the block origin (once built) */
} vpiece;
#define V_BLO(C, P) ((C)->dv.v + (P)->dim)
#define V_BHI(C, P) ((C)->dv.v + (P)->dim + (P)->nd)
#define V_BOXLO(C, P) ((C)->dv.v + (P)->dim + 2 * (P)->nd)
#define V_BOXHI(C, P) ((C)->dv.v + (P)->dim + 2 * (P)->nd + (P)->bnd)
#define V_BSTR(C, P) ((C)->dv.v + (P)->dim + 2 * (P)->nd + 2 * (P)->bnd)
#define V_FRAD(C, P) ((C)->dv.v + (P)->fdim)
#define V_FPHI(C, P) ((C)->dv.v + (P)->fdim + (P)->nf)
#define V_FTAU(C, P) ((C)->dv.v + (P)->fdim + 2 * (P)->nf)

typedef struct {
    uint32_t begin, n; /* into vp_index */
    uint8_t es;        /* element bytes */
    uint8_t whole;     /* one piece, whose box is the whole binding (of nel elements, ndim >= 1) */
    uint64_t nel;
} vbind;

/* a decomposed stream segment: len bytes of piece `vp` at tensor byte addresses td */
typedef struct {
    uint32_t vp;
    uint64_t len;
    rs_desc td;
} vseg;
typedef rs_vec(vseg) vseg_vec;

/* staging content, per rank in pages of 16 MiB (a message touches fewer pages than with 1 MiB ones: 20%
 * faster on DeepSeek-V3): each page keeps, sorted by start, the byte ranges of it that hold data: bytes
 * [start, start + len) hold the stream of desc d (over binding loc of rank src) from position pos (d ==
 * NULL: the bytes of the binding from offset pos). */
#define PG_SHIFT 24 /* 16 MiB pages, larger when a rank's staging would need more than PG_MAX pages */
#define PG_MAX 65536
#define RUNS_MAX (1ull << 31) /* byte runs the data check follows at most (a hostile plan gets an error) */
#define STEP_RUNS_MAX (1ull << 24)
typedef struct {
    uint64_t start, pos, len;
    uint32_t d; /* descriptor index on rank src, RS_NONE: binding bytes */
    uint32_t src, loc;
} pent;
typedef struct {
    pent *v;
    uint32_t n, cap;
} page;

typedef struct {
    uint32_t src, loc;
    uint32_t d; /* descriptor index on rank src, RS_NONE: the bytes of binding loc from pos */
    uint64_t pos, len;
} prov;
typedef rs_vec(prov) prov_vec;

/* a tensor box written into piece vp (coverage) */
typedef struct {
    uint32_t vp;
    int64_t lo[VND], hi[VND];
} vbox;
typedef rs_vec(vbox) vbox_vec;
typedef rs_vec(uint32_t) u32_vec;

typedef struct {
    const rs_plan *P;
    const rs_layout *L;
    uint32_t world;
    char *err;
    size_t errlen;
    int failed;
    /* pieces per (rank, binding) */
    vpiece *vp;
    uint32_t nvp;
    rs_vec(int64_t) dv; /* the pieces' per-dimension numbers */
    uint8_t *reads_dst; /* [world]: the rank reads destination bindings (relays) */
    uint32_t *vp_index;
    vbind **vb; /* [world][nbindings] */
    /* staging content */
    page **pages;     /* [world][staging pages], allocated when first used */
    uint32_t *npages; /* [world] */
    uint8_t *pgshift; /* [world] */
    uint64_t runs_left;
    /* scratch */
    desc_vec slice_a, slice_b;
    vseg_vec ld, ls;
    prov_vec pv;
    prov_vec msg, unp; /* a message's content (do_transfer), an UNPACK's sources (do_phase3) */
    rs_vec(pent) tw, tnew, tout; /* staging writes of a step or message; one page's new and merged entries */
    uint64_t budget;
    /* error context */
    uint32_t cur_rank, cur_step, cur_op;
    /* source descriptors that map to one tensor desc as a whole (direct-mapped by address) */
    struct dcache_ent *dcache;
    void *dcache_mem;
    struct dmulti_seg *dmulti; /* [DCACHE_SLOTS * DM_SEGS] */
    /* coverage from the simulation's destination decompositions (coverage would repeat all of them):
     * per rank, the tensor boxes written, as words vp, lo[0], hi[0], lo[1], ... (the tensor's dims) */
    u32_vec *cov;        /* [world]; NULL: not collected */
    uint64_t cov_budget; /* what those decompositions took of the budget */
    int cov_off;         /* incomplete (a coordinate over 32 bits, an UNPACK not simulated): decompose again */
    vbox_vec cbx;        /* scratch */
    /* the descriptors of the rank the per-rank checks are on, unpacked once for all of them (NULL: each
     * check unpacks what it reads) */
    const rs_desc *dt;
    /* the simulation's delivery checks go to a checker thread (NULL: they run where they arise) */
    struct dpipe *dp;
} vctx;

/* Descriptor i of rank program g (the one c->dt holds, when set). */
#define VDESC(c, g, i, buf) rs_prog_desc_from((c)->dt, (g), (i), (buf))

/* A dcache entry: 128 bytes, 64-byte aligned, so that the tensor desc of a source of up to 3 dims (97 %
 * of them on DeepSeek-V3) is in the entry's first cache line: every delivery looks one up at random. */
#define DC_WORDS 13
struct dcache_ent {
    uint32_t d;           /* descriptor index (RS_NONE: empty) */
    uint32_t nmulti;      /* a source that maps to 2 .. DM_SEGS tensor descs: how many (in dmulti) */
    uint64_t offset;      /* of the tensor desc */
    uint32_t rank;
    uint32_t vp_nd;       /* piece << 8 | the tensor desc's ndim; ndim 0: the source does not map as a whole */
    uint64_t w[DC_WORDS]; /* count[0], stride[0], count[1], ..., count[ndim - 1] (the innermost stride is 1) */
};
#define DCACHE_SLOTS 65536
/* A source that maps to a few tensor descs (a PACK of several group members: on the 2.5 T MoE 45 % of the
 * sources, mostly 2 to 4 descs of up to 3 dims, each staging run of it inside one of them) keeps them
 * beside its dcache slot, DM_SEGS of DM_WORDS words at most: a delivery of a run then slices the one desc
 * that holds it instead of decomposing the run again. */
#define DM_SEGS 4
#define DM_WORDS 5
struct dmulti_seg {
    uint32_t vp_nd, pad_; /* as in dcache_ent */
    uint64_t len, offset; /* bytes of the source's stream it covers; its tensor desc's offset */
    uint64_t w[DM_WORDS];
};

static int vfail(vctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int vfail(vctx *c, const char *fmt, ...)
{
    if (c->failed) return -1;
    c->failed = 1;
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->err && c->errlen) snprintf(c->err, c->errlen, "bad plan (%s)", msg);
    return -1;
}

/* A context copied for a second thread gets an error buffer of its own (ctx_own_err); its problem becomes
 * c's, when the first thread's part had none (ctx_take_err, -1). */
static void ctx_own_err(vctx *k, const vctx *c)
{
    k->errlen = c->errlen ? c->errlen : 1;
    k->err = rs_xcalloc(k->errlen, 1);
}

static int ctx_take_err(vctx *c, const vctx *k)
{
    c->failed = 1;
    if (c->err && c->errlen) snprintf(c->err, c->errlen, "%s", k->err);
    return -1;
}

static const char *op_where(vctx *c, char *buf, size_t n)
{
    const rs_rank_prog *g = &c->P->ranks[c->cur_rank];
    snprintf(buf, n, "rank %u, step %u, op %u %s", c->cur_rank, c->cur_step, c->cur_op,
             c->cur_op < g->nops ? rs_op_name(g->ops[c->cur_op].code) : "?");
    return buf;
}

/* ---- layout pieces per binding ---- */

/* tensor linear strides (elements) of the piece's tensor: tstr[d] for dim d, tstr[nd] = 1 */
static void tensor_strides(const vctx *c, const vpiece *v, uint64_t *tstr)
{
    const rs_tensor *t = &c->L->tensors[v->tensor];
    uint32_t nd = t->ndim;
    tstr[nd] = 1;
    for (int d = (int)nd - 1; d >= 0; d--) tstr[d] = tstr[d + 1] * (uint64_t)t->shape[d];
}

static void vp_build(vctx *c, vpiece *v)
{
    uint32_t nd = v->nd, bnd = v->bnd;
    const int64_t *blo = V_BLO(c, v), *bhi = V_BHI(c, v), *box_lo = V_BOXLO(c, v), *box_hi = V_BOXHI(c, v),
                  *bstride = V_BSTR(c, v);
    v->built = 1;
    int64_t A[VND], SA[VND + 1], SB[VND + 1];
    uint64_t tstr[VND + 1];
    tensor_strides(c, v, tstr);
    v->T0 = 0;
    for (uint32_t d = 0; d < nd; d++) {
        A[d] = bhi[d] - blo[d];
        v->T0 += (uint64_t)blo[d] * tstr[d + 1];
    }
    SA[nd] = 1;
    for (int d = (int)nd - 1; d >= 0; d--) SA[d] = SA[d + 1] * A[d];
    SB[bnd] = 1;
    for (int d = (int)bnd - 1; d >= 0; d--) SB[d] = SB[d + 1] * (box_hi[d] - box_lo[d]);
    int64_t vals[2 * VND + 2];
    uint32_t n = 0;
    for (uint32_t d = 0; d <= nd; d++) vals[n++] = SA[d];
    for (uint32_t d = 0; d <= bnd; d++) vals[n++] = SB[d];
    for (uint32_t i = 1; i < n; i++) /* insertion sort: a few values */
        for (uint32_t j = i; j > 0 && vals[j - 1] > vals[j]; j--) {
            int64_t t = vals[j];
            vals[j] = vals[j - 1];
            vals[j - 1] = t;
        }
    uint32_t u = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!u || vals[u - 1] != vals[i]) vals[u++] = vals[i];
    for (uint32_t i = 0; i + 1 < u; i++)
        if (vals[i] == 0 || vals[i + 1] % vals[i]) {
            v->noref = 1;
            return;
        }
    int64_t frad[VNF], fphi[VNF], ftau[VNF];
    uint32_t nf = 0;
    for (int i = (int)u - 2; i >= 0; i--) {
        int64_t w = vals[i];
        uint32_t d = 0, j = 0;
        while (!(SA[d + 1] <= w && w < SA[d])) d++;
        while (!(SB[j + 1] <= w && w < SB[j])) j++;
        frad[nf] = vals[i + 1] / w;
        ftau[nf] = (int64_t)((uint64_t)(w / SA[d + 1]) * tstr[d + 1]);
        fphi[nf] = (int64_t)((uint64_t)(w / SB[j + 1]) * (uint64_t)bstride[j]);
        /* a dim contiguous with the next one in both the buffer and the tensor joins it (a block of whole
         * rows of the tensor is then one dim: affine divides once per F dim) */
        if (nf && fphi[nf - 1] == frad[nf] * fphi[nf] && ftau[nf - 1] == frad[nf] * ftau[nf]) {
            frad[nf - 1] *= frad[nf];
            fphi[nf - 1] = fphi[nf];
            ftau[nf - 1] = ftau[nf];
            continue;
        }
        nf++;
    }
    /* appended to the pool (which may move: blo.. are not used below) */
    v->nf = (uint8_t)nf;
    v->fdim = (uint32_t)c->dv.n;
    rs_vec_reserve(&c->dv, 3 * nf + 1);
    memcpy(c->dv.v + c->dv.n, frad, nf * sizeof *frad);
    memcpy(c->dv.v + c->dv.n + nf, fphi, nf * sizeof *fphi);
    memcpy(c->dv.v + c->dv.n + 2 * nf, ftau, nf * sizeof *ftau);
    c->dv.n += 3 * nf;
}

typedef struct {
    uint32_t rank, loc, vp;
} vp_rec;

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int build_pieces(vctx *c)
{
    const rs_layout *L = c->L;
    int rc = 0;
    uint64_t explored = 0;
#define BP_FAIL(...)                                                                               \
    do {                                                                                           \
        rc = vfail(c, __VA_ARGS__);                                                                \
        goto out;                                                                                  \
    } while (0)
    /* per rank: (buffer << 32 | binding) sorted, for lookups */
    uint64_t **bl = rs_xcalloc(c->world, sizeof *bl);
    for (uint32_t r = 0; r < c->world; r++) {
        const rs_rank_prog *g = &c->P->ranks[r];
        bl[r] = rs_xmalloc((g->nbindings + 1) * sizeof **bl);
        int sorted = 1; /* (the planner binds in buffer order) */
        for (uint32_t i = 0; i < g->nbindings; i++) {
            bl[r][i] = (uint64_t)g->bindings[i].buffer << 32 | i;
            if (i && bl[r][i] < bl[r][i - 1]) sorted = 0;
        }
        if (!sorted) qsort(bl[r], g->nbindings, sizeof **bl, u64_cmp);
    }
    rs_vec(vpiece) vp = {0};
    rs_vec(vp_rec) recs = {0};
    {
        /* room for a piece on every rank of its mesh (at most: pins and empty blocks leave some out;
         * pages never written cost nothing, while growing by doubling copied and touched twice the room) */
        uint64_t most = 0;
        for (uint32_t pi = 0; pi < L->npieces; pi++) most += L->meshes[L->pieces[pi].mesh].nranks;
        if (most > (1u << 24)) most = 1u << 24;
        rs_vec_reserve(&vp, (size_t)most + 1);
        rs_vec_reserve(&recs, (size_t)most + 1);
    }
    int64_t coord[VND], lo[VND], hi[VND];
    for (uint32_t pi = 0; pi < L->npieces; pi++) {
        const rs_piece *p = &L->pieces[pi];
        const rs_mesh *m = &L->meshes[p->mesh];
        const rs_buffer *b = &L->buffers[p->buffer];
        const rs_tensor *t = &L->tensors[p->tensor];
        uint32_t es = (uint32_t)rs_dtype_size(t->dtype);
        int64_t fixed[VND];
        for (uint32_t a = 0; a < m->naxes; a++) fixed[a] = -1;
        for (uint32_t k = 0; k < p->nplace; k++) {
            const rs_place *q = &L->places[p->place + k];
            if (q->kind == RS_PLACE_PIN) fixed[q->axis] = q->arg;
        }
        for (uint32_t a = 0; a < m->naxes; a++) coord[a] = fixed[a] >= 0 ? fixed[a] : 0;
        for (;;) {
            uint64_t lin = 0;
            for (uint32_t a = 0; a < m->naxes; a++) lin = lin * (uint64_t)m->size[a] + (uint64_t)coord[a];
            if (++explored > (1u << 24))
                BP_FAIL("layout too large to verify (more than 2^24 rank-piece pairs)");
            int64_t n = rs_piece_block(L, p, coord, lo, hi);
            uint32_t rank = (uint32_t)m->ranks[lin];
            const rs_rank_prog *g = &c->P->ranks[rank];
            uint32_t loc = RS_NONE;
            {
                uint32_t lo2 = 0, hi2 = g->nbindings;
                while (lo2 < hi2) {
                    uint32_t mid = (lo2 + hi2) / 2;
                    if ((bl[rank][mid] >> 32) < p->buffer) lo2 = mid + 1;
                    else hi2 = mid;
                }
                if (lo2 < g->nbindings && (bl[rank][lo2] >> 32) == p->buffer) loc = (uint32_t)bl[rank][lo2];
            }
            if (n > 0) {
                if (loc == RS_NONE)
                    BP_FAIL("rank %u does not bind buffer '%s' that holds tensor '%s'", rank, b->name, t->name);
                vpiece v;
                memset(&v, 0, sizeof v);
                v.piece = pi;
                v.tensor = p->tensor;
                v.es = (uint8_t)es;
                v.rank = rank;
                v.volume = (uint64_t)n;
                v.nd = (uint8_t)t->ndim;
                const rs_binding *x = &g->bindings[loc];
                v.bnd = (uint8_t)(b->ndim ? b->ndim : t->ndim);
                if (x->ndim != v.bnd) BP_FAIL("rank %u: binding of '%s' has the wrong rank", rank, b->name);
                if (c->dv.n > UINT32_MAX - 8 * VND) BP_FAIL("layout too large to verify");
                v.dim = (uint32_t)c->dv.n;
                rs_vec_reserve(&c->dv, 2 * (size_t)v.nd + 3 * (size_t)v.bnd + 1); /* (+1: never NULL) */
                c->dv.n += 2 * (size_t)v.nd + 3 * (size_t)v.bnd;
                memcpy(V_BLO(c, &v), lo, v.nd * sizeof lo[0]);
                memcpy(V_BHI(c, &v), hi, v.nd * sizeof hi[0]);
                int64_t *box_lo = V_BOXLO(c, &v), *box_hi = V_BOXHI(c, &v), *bstride = V_BSTR(c, &v);
                uint64_t s = 1;
                for (int d = (int)v.bnd - 1; d >= 0; d--) {
                    bstride[d] = (int64_t)s;
                    s *= (uint64_t)x->shape[d];
                }
                v.box_off = 0;
                for (uint32_t d = 0; d < v.bnd; d++) {
                    if (b->ndim == 0) {
                        box_lo[d] = 0;
                        box_hi[d] = hi[d] - lo[d];
                        if (x->shape[d] != box_hi[d])
                            BP_FAIL("rank %u: binding of '%s' does not have the block's shape", rank, b->name);
                    } else {
                        box_lo[d] = p->box == RS_NONE ? 0 : L->i64[p->box + d];
                        box_hi[d] = p->box == RS_NONE ? b->shape[d] : L->i64[p->box + b->ndim + d];
                    }
                    v.box_off += (uint64_t)box_lo[d] * (uint64_t)bstride[d];
                }
                uint64_t bv = 1;
                for (uint32_t d = 0; d < v.bnd; d++) bv *= (uint64_t)(box_hi[d] - box_lo[d]);
                if (bv != v.volume)
                    BP_FAIL("tensor '%s': a block of %llu elements does not fill its box of %llu in '%s'",
                                 t->name, (unsigned long long)v.volume, (unsigned long long)bv, b->name);
                vp_rec r = {rank, loc, (uint32_t)vp.n};
                rs_vec_push(&vp, v);
                rs_vec_push(&recs, r);
            }
            if (!rs_mesh_next_coord(m, fixed, coord)) break;
        }
    }
out:
    for (uint32_t q = 0; q < c->world; q++) free(bl[q]);
    free(bl);
    if (rc) {
        rs_vec_free(&vp);
        rs_vec_free(&recs);
        return rc;
    }
    c->vp = vp.v;
    c->nvp = (uint32_t)vp.n;
    /* vp_index: the pieces by (rank, binding), each binding's in the order found (a counting sort: qsort
     * of the records was 1.7 % of issue 3's compile) */
    c->vp_index = rs_xmalloc((recs.n + 1) * sizeof *c->vp_index);
    c->vb = rs_xcalloc(c->world, sizeof *c->vb);
    for (uint32_t r = 0; r < c->world; r++) c->vb[r] = rs_xcalloc(c->P->ranks[r].nbindings + 1, sizeof(vbind));
    for (size_t i = 0; i < recs.n; i++) c->vb[recs.v[i].rank][recs.v[i].loc].n++;
    uint32_t at = 0;
    for (uint32_t r = 0; r < c->world; r++)
        for (uint32_t i = 0; i <= c->P->ranks[r].nbindings; i++) {
            vbind *b = &c->vb[r][i];
            b->begin = b->n ? at : 0;
            at += b->n;
            b->n = 0;
        }
    for (size_t i = 0; i < recs.n; i++) {
        vbind *b = &c->vb[recs.v[i].rank][recs.v[i].loc];
        c->vp_index[b->begin + b->n++] = recs.v[i].vp;
    }
    rs_vec_free(&recs);
    for (uint32_t r = 0; r < c->world; r++) {
        const rs_rank_prog *g = &c->P->ranks[r];
        for (uint32_t i = 0; i < g->nbindings; i++) {
            vbind *b = &c->vb[r][i];
            const rs_binding *x = &g->bindings[i];
            b->es = (uint8_t)rs_dtype_size(L->buffers[x->buffer].dtype);
            rs_assert(b->es && !(b->es & (b->es - 1))); /* (dec_desc divides by shifts) */
            if (b->n != 1 || x->ndim == 0) continue;
            const vpiece *v = &c->vp[c->vp_index[b->begin]];
            const int64_t *box_lo = V_BOXLO(c, v), *box_hi = V_BOXHI(c, v);
            uint64_t nel = 1;
            int whole = 1;
            for (uint32_t d = 0; d < x->ndim && whole; d++) {
                if (box_lo[d] != 0 || box_hi[d] != x->shape[d] || rs_umul_ovf(nel, (uint64_t)x->shape[d], &nel))
                    whole = 0;
            }
            b->whole = (uint8_t)whole;
            b->nel = nel;
        }
    }
    return 0;
#undef BP_FAIL
}

/* The piece of (rank, loc) whose box holds element offset e (binding element units), or RS_NONE. */
static uint32_t find_piece(vctx *c, uint32_t rank, uint32_t loc, uint64_t e, int64_t *idx)
{
    const vbind *b = &c->vb[rank][loc];
    if (b->whole) return e < b->nel ? c->vp_index[b->begin] : RS_NONE; /* (no element index needed) */
    const rs_binding *x = &c->P->ranks[rank].bindings[loc];
    if (!b->n) return RS_NONE;
    uint64_t rem = e;
    for (int d = (int)x->ndim - 1; d >= 0; d--) {
        uint64_t s = (uint64_t)x->shape[d];
        if (d == 0) idx[0] = (int64_t)rem;
        else {
            idx[d] = s ? (int64_t)(rem % s) : 0;
            rem = s ? rem / s : 0;
        }
    }
    for (uint32_t i = 0; i < b->n; i++) {
        const vpiece *v = &c->vp[c->vp_index[b->begin + i]];
        const int64_t *box_lo = V_BOXLO(c, v), *box_hi = V_BOXHI(c, v);
        int in = 1;
        for (uint32_t d = 0; d < v->bnd && in; d++)
            if (idx[d] < box_lo[d] || idx[d] >= box_hi[d]) in = 0;
        if (in) return c->vp_index[b->begin + i];
    }
    return RS_NONE;
}

/* ---- descriptors ---- */

static uint64_t dbytes(const rs_desc *d)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < d->ndim; i++) n *= d->count[i];
    return n;
}

/* Fold dims whose stride equals the span inside them, drop unit dims: the canonical form. In place (it
 * runs once per delivery: no copies when there is nothing to change). */
static void dnorm(rs_desc *d)
{
    uint32_t k = 0, n = d->ndim;
    for (uint32_t i = 0; i < n; i++) {
        if (d->count[i] == 1 && i + 1 < n) continue;
        if (k != i) {
            d->count[k] = d->count[i];
            d->stride[k] = d->stride[i];
        }
        k++;
    }
    uint32_t w = k;
    for (int i = (int)w - 2; i >= 0; i--) {
        if (d->stride[i] == d->count[i + 1] * d->stride[i + 1]) {
            d->count[i + 1] *= d->count[i];
            for (uint32_t j = (uint32_t)i; j + 1 < w; j++) {
                d->count[j] = d->count[j + 1];
                d->stride[j] = d->stride[j + 1];
            }
            w--;
        }
    }
    d->ndim = w;
}

static int desc_eq(const rs_desc *x, const rs_desc *y)
{
    if (x->ndim != y->ndim || x->offset != y->offset) return 0;
    for (uint32_t i = 0; i < x->ndim; i++)
        if (x->count[i] != y->count[i] || x->stride[i] != y->stride[i]) return 0;
    return 1;
}

/* Stream range [u, u + n) of d as a list of descs (appended to out). */
static void dslice(const rs_desc *d, uint64_t u, uint64_t n, desc_vec *out)
{
    if (n == 0) return;
    if (d->ndim == 1) {
        rs_desc e = *d;
        e.offset += u;
        e.count[0] = n;
        rs_vec_push(out, e);
        return;
    }
    uint64_t inner = 1;
    for (uint32_t i = 1; i < d->ndim; i++) inner *= d->count[i];
    if (u % inner == 0 && n % inner == 0) {
        rs_desc e = *d;
        e.offset += (u / inner) * d->stride[0];
        e.count[0] = n / inner;
        rs_vec_push(out, e);
        return;
    }
    rs_desc sub = *d;
    memmove(sub.count, sub.count + 1, (sub.ndim - 1) * sizeof sub.count[0]);
    memmove(sub.stride, sub.stride + 1, (sub.ndim - 1) * sizeof sub.stride[0]);
    sub.ndim--;
    uint64_t i0 = u / inner, end = u + n;
    uint64_t base = d->offset;
    if (u % inner) {
        uint64_t take = (i0 + 1) * inner - u;
        if (take > n) take = n;
        sub.offset = base + i0 * d->stride[0];
        dslice(&sub, u - i0 * inner, take, out);
        u += take;
        n -= take;
        i0++;
    }
    if (n == 0) return;
    uint64_t full = n / inner;
    if (full) {
        rs_desc e = *d;
        e.offset = base + i0 * d->stride[0];
        e.count[0] = full;
        rs_vec_push(out, e);
        u += full * inner;
        n -= full * inner;
        i0 += full;
    }
    if (n) {
        sub.offset = base + i0 * d->stride[0];
        dslice(&sub, 0, n, out);
    }
    (void)end;
}

/* The stream range [u, u + n) of d when it is one desc (no allocation); 0 otherwise. */
static int dslice1(const rs_desc *d, uint64_t u, uint64_t n, rs_desc *e)
{
    uint32_t nd = d->ndim;
    if (nd == 1) {
        *e = *d;
        e->offset += u;
        e->count[0] = n;
        return 1;
    }
    uint64_t inner[RS_DESC_MAX_DIMS];
    inner[nd - 1] = d->count[nd - 1];
    for (int k = (int)nd - 2; k >= 0; k--) inner[k] = inner[k + 1] * d->count[k];
    if (u == 0 && n == inner[0]) { /* the whole stream */
        *e = *d;
        return 1;
    }
    /* inner[k]: bytes of one element of dim k - 1 (the span of dims k..); find the outermost dim k the
     * range is whole elements of, descending into one element of each dim above it */
    uint64_t off = d->offset;
    uint32_t k = 0;
    for (;; k++) {
        if (k == nd - 1) break;
        uint64_t in = inner[k + 1];
        if (u % in == 0 && n % in == 0) break;
        uint64_t i0 = u / in;
        if ((u + n - 1) / in != i0) return 0;
        off += i0 * d->stride[k];
        u -= i0 * in;
    }
    uint64_t in = k == nd - 1 ? 1 : inner[k + 1];
    /* dims k.. only (a whole copy and two memmoves took a third of this; the dims past ndim are not read) */
    e->loc = d->loc;
    e->ndim = nd - k;
    for (uint32_t i = k; i < nd; i++) {
        e->count[i - k] = d->count[i];
        e->stride[i - k] = d->stride[i];
    }
    e->offset = k == nd - 1 ? off + u : off + (u / in) * e->stride[0];
    e->count[0] = n / in;
    return 1;
}

/* dslice1 then dnorm, of a desc d in dnorm's canonical form (dnorm would leave it as it is): the tensor
 * descs of segments are, as affine makes them (no count of 1 but the innermost, no dims left to fold),
 * and so are this function's results. A delivery takes whole rows of the outermost dim (a row of a
 * PACK's source, a stretch of an UNPACK's destination): those come out canonical without the general
 * slicer, copying only the dims in use (this runs twice per delivery, millions of times; checking that
 * d is canonical took a quarter of it). */
static int dslice_norm(const rs_desc *d, uint64_t u, uint64_t n, rs_desc *e)
{
    uint32_t nd = d->ndim;
    if (nd == 1) {
        e->loc = d->loc;
        e->ndim = 1;
        e->offset = d->offset + u;
        e->count[0] = n;
        e->stride[0] = d->stride[0];
        return 1;
    }
    if (nd > 1) {
        uint64_t in = 1;
        for (uint32_t i = 1; i < nd; i++) in *= d->count[i];
        if (u % in == 0 && n % in == 0) {
            uint32_t f = n == in; /* one row: its dim goes (dnorm drops a count of 1) */
            e->loc = d->loc;
            e->ndim = nd - f;
            e->offset = d->offset + (u / in) * d->stride[0];
            for (uint32_t i = f; i < nd; i++) {
                e->count[i - f] = d->count[i];
                e->stride[i - f] = d->stride[i];
            }
            if (!f) e->count[0] = n / in;
            return 1;
        }
    }
    if (!dslice1(d, u, n, e)) return 0;
    dnorm(e);
    return 1;
}

/* ---- mapping binding regions to tensor elements ---- */

/* a / b and a % b, in 32 bits when both fit (most offsets inside a piece do): a 64-bit divide has the longer
 * latency on the x86 cores measured here. (The samples that seemed to sit on affine's first divide were the
 * cache miss of loading its divisor: docs/benchmarks.md, "Planner".) */
static inline uint64_t udivmod(uint64_t a, uint64_t b, uint64_t *rem)
{
    uint64_t q = (a | b) >> 32 ? a / b : (uint32_t)a / (uint32_t)b;
    *rem = a - q * b;
    return q;
}

/* Try e (element units, innermost stride 1) as one affine image inside piece v; writes td (bytes). Marked
 * hot: GCC took the tail after its many early returns for cold code and cleared td with `rep stos` there
 * (a sixth of affine's samples), whatever the build's string-op strategy. */
__attribute__((hot)) static int affine(const vctx *c, const vpiece *v, const rs_desc *e, uint64_t rel, rs_desc *td)
{
    if (v->noref) {
        if (e->ndim != 1) return 0;
        const int64_t *box_lo = V_BOXLO(c, v), *box_hi = V_BOXHI(c, v), *bstride = V_BSTR(c, v),
                      *blo = V_BLO(c, v), *bhi = V_BHI(c, v);
        uint64_t tstr[VND + 1];
        tensor_strides(c, v, tstr);
        /* box-linear index of rel, inside one box row and one block row */
        uint64_t l = 0, mul = 1, r2 = rel;
        int64_t bi[VND];
        for (int d = (int)v->bnd - 1; d >= 0; d--) {
            uint64_t s = d ? (uint64_t)(bstride[d - 1] / bstride[d]) : 0;
            bi[d] = d ? (int64_t)(r2 % s) : (int64_t)r2;
            if (d) r2 /= s;
        }
        for (int d = (int)v->bnd - 1; d >= 0; d--) {
            int64_t ext = box_hi[d] - box_lo[d];
            if (bi[d] < 0 || bi[d] >= ext) return 0;
            l += (uint64_t)bi[d] * mul;
            mul *= (uint64_t)ext;
        }
        uint64_t n = e->count[0];
        uint64_t bl = (uint64_t)(box_hi[v->bnd - 1] - box_lo[v->bnd - 1]);
        uint64_t al = v->nd ? (uint64_t)(bhi[v->nd - 1] - blo[v->nd - 1]) : 1;
        if (l % bl + n > bl || l % al + n > al) return 0;
        /* block multi-index of l */
        uint64_t tl = v->T0, r3 = l;
        for (int d = (int)v->nd - 1; d >= 0; d--) {
            uint64_t a = (uint64_t)(bhi[d] - blo[d]);
            tl += (r3 % a) * tstr[d + 1];
            r3 /= a;
        }
        memset(td, 0, sizeof *td);
        td->offset = tl * v->es;
        td->ndim = 1;
        td->count[0] = n * v->es;
        td->stride[0] = 1;
        return 1;
    }
    uint32_t nf = v->nf;
    const int64_t *frad = V_FRAD(c, v);
    const uint64_t *fphi = (const uint64_t *)V_FPHI(c, v), *ftau = (const uint64_t *)V_FTAU(c, v);
    int64_t x[VNF], maxc[VNF];
    uint64_t r = rel;
    for (uint32_t k = 0; k < nf; k++) {
        x[k] = (int64_t)udivmod(r, fphi[k], &r);
        if (x[k] >= frad[k]) return 0;
        maxc[k] = x[k];
    }
    if (r) return 0;
    if (nf == 0) {
        /* a single element */
        if (e->count[e->ndim - 1] != 1) return 0;
        for (uint32_t i = 0; i + 1 < e->ndim; i++)
            if (e->count[i] > 1) return 0;
        memset(td, 0, sizeof *td);
        td->offset = v->T0 * v->es;
        td->ndim = 1;
        td->count[0] = v->es;
        td->stride[0] = 1;
        return 1;
    }
    uint64_t cnt[VNF + RS_DESC_MAX_DIMS + 1], str[VNF + RS_DESC_MAX_DIMS + 1];
    uint32_t nt = 0;
    /* outer dims of e */
    for (uint32_t i = 0; i + 1 < e->ndim; i++) {
        uint64_t s = e->stride[i], tau = 0;
        for (uint32_t k = 0; k < nf; k++) {
            uint64_t m = udivmod(s, fphi[k], &s);
            if (m && e->count[i] > 1) {
                maxc[k] += (int64_t)((e->count[i] - 1) * m);
                tau += m * ftau[k];
            }
        }
        if (s) return 0;
        cnt[nt] = e->count[i];
        str[nt] = tau;
        nt++;
    }
    /* the innermost run over the innermost F dims */
    uint64_t m = e->count[e->ndim - 1];
    uint64_t rc[VNF], rs[VNF];
    uint32_t nr = 0;
    int k = (int)nf - 1;
    for (;;) {
        if (x[k] + (int64_t)m <= frad[k]) {
            maxc[k] += (int64_t)m - 1;
            rc[nr] = m;
            rs[nr] = ftau[k];
            nr++;
            break;
        }
        if (x[k] == 0 && m % (uint64_t)frad[k] == 0 && k > 0 && fphi[k - 1] == (uint64_t)frad[k] * fphi[k]) {
            maxc[k] += frad[k] - 1;
            rc[nr] = (uint64_t)frad[k];
            rs[nr] = ftau[k];
            nr++;
            m /= (uint64_t)frad[k];
            k--;
            continue;
        }
        return 0;
    }
    for (uint32_t q = 0; q < nf; q++)
        if (maxc[q] >= frad[q]) return 0;
    for (uint32_t q = nr; q-- > 0;) {
        cnt[nt] = rc[q];
        str[nt] = rs[q];
        nt++;
    }
    uint64_t toff = v->T0;
    for (uint32_t q = 0; q < nf; q++) toff += (uint64_t)x[q] * ftau[q];
    /* bytes: scale, the element's bytes innermost, and fold each dim into the next inner one where they are
     * one dim (its stride the inner one's span), from the innermost out (so oc/os hold the dims reversed).
     * Written in place, unused dims zero: fixed-size clears, then a reversed copy. (Copies and shifts over
     * w dims became memcpy/memmove calls of w * 8 bytes, which the build's string-op strategy inlines as
     * byte loops: about 130 instructions per call, a quarter of affine on issue 3's case.) */
    uint64_t oc[VNF + RS_DESC_MAX_DIMS + 1], os[VNF + RS_DESC_MAX_DIMS + 1];
    uint32_t w = 1;
    oc[0] = v->es, os[0] = 1;
    for (uint32_t q = nt; q-- > 0;) {
        if (cnt[q] == 1) continue;
        uint64_t sq = str[q] * v->es;
        if (sq == oc[w - 1] * os[w - 1]) oc[w - 1] *= cnt[q];
        else oc[w] = cnt[q], os[w] = sq, w++;
    }
    if (w > RS_DESC_MAX_DIMS) return 0;
    td->loc = 0;
    td->ndim = w;
    td->offset = toff * v->es;
    memset(td->count, 0, sizeof td->count);
    memset(td->stride, 0, sizeof td->stride);
    for (uint32_t i = 0; i < w; i++) {
        td->count[i] = oc[w - 1 - i];
        td->stride[i] = os[w - 1 - i];
    }
    return 1;
}

/* The digits x[nf] of element offset rel (from the box origin) over the common refinement F of piece v:
 * 1 when rel is such a point (every digit inside its radix, no remainder), 0 when not. */
static int f_digits(const vctx *c, const vpiece *v, uint64_t rel, uint64_t *x)
{
    const int64_t *frad = V_FRAD(c, v);
    const uint64_t *fphi = (const uint64_t *)V_FPHI(c, v);
    uint64_t r = rel;
    for (uint32_t k = 0; k < v->nf; k++) {
        x[k] = udivmod(r, fphi[k], &r);
        if (x[k] >= (uint64_t)frad[k]) return 0;
    }
    return r == 0;
}

/* The longest run of m < n elements from rel (a one-dim e) that affine maps as one image, in closed form
 * (0: not known, search). Such runs are m <= frad[K] - x[K] along the innermost F dim, or, while the run
 * starts at 0 of that dim and the next one out is contiguous with it, whole multiples of its span: a
 * relay's byte ranges over a destination binding end mid-row, and a binary search with affine (which is
 * not monotone over those runs) took its rows one by one, O(log n) affine calls each. */
static uint64_t affine_prefix(const vctx *c, const vpiece *v, uint64_t rel, uint64_t n)
{
    if (v->noref || v->nf == 0 || n < 2) return 0;
    uint32_t nf = v->nf;
    const int64_t *frad = V_FRAD(c, v);
    const uint64_t *fphi = (const uint64_t *)V_FPHI(c, v);
    uint64_t x[VNF];
    if (!f_digits(c, v, rel, x)) return 0;
    uint64_t best = 0, span = 1; /* span: elements of one step of dim k */
    for (int k = (int)nf - 1; k >= 0; k--) {
        uint64_t j = (n - 1) / span, room = (uint64_t)frad[k] - x[k];
        if (j > room) j = room;
        if (j && span * j > best) best = span * j;
        if (x[k] != 0 || k == 0 || fphi[k - 1] != (uint64_t)frad[k] * fphi[k]) break;
        span *= (uint64_t)frad[k];
        if (span > n - 1) break;
    }
    return best;
}

/* A guess at the longest prefix of outer dim k of e (element units) that affine maps as one image: the
 * elements left from rel along the innermost dim of the piece that the dim's stride moves along. A dim
 * that runs over two dims of the piece (a stage's layers x experts, stacked, against a piece of one layer
 * each) breaks there; the guess ignores what the other dims of e take, so the caller confirms it with
 * affine and searches when it is wrong. Each such desc took about ten affine calls by search alone
 * (galloping from 2, then halving); with the guess, two. 0: no guess. */
static uint64_t affine_dim_guess(const vctx *c, const vpiece *v, const rs_desc *e, uint64_t rel, uint32_t k)
{
    if (v->noref || v->nf == 0) return 0;
    uint32_t nf = v->nf;
    const int64_t *frad = V_FRAD(c, v);
    const uint64_t *fphi = (const uint64_t *)V_FPHI(c, v);
    uint64_t x[VNF];
    if (!f_digits(c, v, rel, x)) return 0;
    uint64_t s = e->stride[k], m = 0;
    uint32_t at = 0;
    for (uint32_t q = 0; q < nf; q++) {
        uint64_t mq = udivmod(s, fphi[q], &s);
        if (mq) m = mq, at = q;
    }
    if (s || !m) return 0;
    return ((uint64_t)frad[at] - 1 - x[at]) / m + 1;
}

/* Decompose one desc (bytes, element aligned) of (rank, loc) into pieces and tensor descs. */
static int dec_desc(vctx *c, uint32_t rank, uint32_t loc, const rs_desc *d0, vseg_vec *out, int depth)
{
    /* the rest of a run is taken in a loop (a long run over many pieces would otherwise recurse once per
     * piece), in cur: d0 is copied there only when the loop goes on (most descs map whole) */
    rs_desc cur;
    const rs_desc *d = d0;
again:
    if (d->ndim == 0) return 0;
    if (++c->budget > 400000000ull) return vfail(c, "verification budget exhausted (plan too irregular)");
    uint64_t len = dbytes(d);
    if (len == 0) return 0;
    int64_t idx[VND];
    /* element bytes: a power of two (build_pieces), so divisions are shifts */
    uint32_t es = c->vb[rank][loc].es, esh = (uint32_t)__builtin_ctz(es);
    uint64_t em = es - 1;
    {
        int bad = (d->offset & em) || (d->count[d->ndim - 1] & em);
        for (uint32_t i = 0; i + 1 < d->ndim; i++)
            if (d->stride[i] & em) bad = 1;
        if (bad) {
            char w[160];
            return vfail(c, "%s: a transfer on rank %u splits an element", op_where(c, w, sizeof w), rank);
        }
    }
    uint32_t vi = find_piece(c, rank, loc, d->offset >> esh, idx);
    if (vi == RS_NONE) {
        char w[160];
        const rs_binding *x = &c->P->ranks[rank].bindings[loc];
        return vfail(c, "%s: touches bytes of '%s' (offset %llu) outside every piece on rank %u", op_where(c, w, sizeof w),
                     c->L->buffers[x->buffer].name, (unsigned long long)d->offset, rank);
    }
    const vpiece *v = &c->vp[vi];
    if (!v->built) vp_build(c, &c->vp[vi]);
    /* element units */
    rs_desc e = *d;
    e.offset >>= esh;
    for (uint32_t i = 0; i + 1 < e.ndim; i++) e.stride[i] >>= esh;
    e.count[e.ndim - 1] >>= esh;
    uint64_t rel = e.offset - v->box_off;
    if (e.offset >= v->box_off) {
        rs_vec_reserve(out, 1); /* (the image is written in place: no copy of the desc) */
        vseg *sg = &out->v[out->n];
        if (affine(c, v, &e, rel, &sg->td)) {
            sg->vp = vi;
            sg->len = len;
            out->n++;
            return 0;
        }
    }
    /* split: the outermost dim into its elements, a run into two */
    if (d->ndim > 1) {
        uint32_t k = 0;
        while (k + 1 < d->ndim && d->count[k] == 1) k++;
        rs_desc sub = *d;
        if (k + 1 < d->ndim && e.offset >= v->box_off && d->count[k] > 2) {
            /* the longest prefix of dim k that maps as one image (galloping, then halving), when two
             * elements do; then, when the prefix repeats, as many whole prefixes as dim k holds, as one
             * image with one more dim: a dim that runs over several dims of the piece (a column of 16
             * stacked experts x 7168 rows, or [gate; up] rows of 16 experts) goes in one or a few images
             * instead of element by element */
            rs_desc t = e, td;
            uint64_t lo = 0, hi = d->count[k]; /* lo maps (0: not known that 2 do), hi does not (the whole did not) */
            uint64_t g = affine_dim_guess(c, v, &e, rel, k);
            if (g >= 2 && g < hi) {
                t.count[k] = g;
                if (affine(c, v, &t, rel, &td)) {
                    lo = g;
                    t.count[k] = g + 1;
                    if (g + 1 < hi && affine(c, v, &t, rel, &td)) lo = g + 1;
                    else hi = g + 1;
                } else {
                    hi = g;
                }
            }
            t.count[k] = 2;
            if (!lo && hi > 2 && affine(c, v, &t, rel, &td)) lo = 2;
            if (lo) {
                while (2 * lo < hi) {
                    t.count[k] = 2 * lo;
                    if (!affine(c, v, &t, rel, &td)) {
                        hi = 2 * lo;
                        break;
                    }
                    lo *= 2;
                }
                while (lo + 1 < hi) {
                    uint64_t mid = lo + (hi - lo) / 2;
                    t.count[k] = mid;
                    if (affine(c, v, &t, rel, &td)) lo = mid;
                    else hi = mid;
                }
                rs_desc pre = *d;
                pre.count[k] = lo;
                uint64_t q = d->count[k] / lo;
                int whole = 0;
                if (q >= 2 && e.ndim < RS_DESC_MAX_DIMS) {
                    /* dim k as (q, lo) */
                    rs_desc w = e;
                    memmove(w.count + k + 1, w.count + k, (w.ndim - k) * sizeof w.count[0]);
                    memmove(w.stride + k + 1, w.stride + k, (w.ndim - k) * sizeof w.stride[0]);
                    w.ndim++;
                    w.count[k] = q, w.stride[k] = lo * e.stride[k];
                    w.count[k + 1] = lo;
                    if (affine(c, v, &w, rel, &td)) {
                        whole = 1;
                        pre.count[k] = q * lo;
                    }
                }
                if (!whole) {
                    t.count[k] = lo;
                    rs_assert(affine(c, v, &t, rel, &td));
                }
                vseg sg = {vi, dbytes(&pre), td};
                rs_vec_push(out, sg);
                if (d != &cur) cur = *d, d = &cur;
                cur.offset += pre.count[k] * d->stride[k];
                cur.count[k] -= pre.count[k];
                goto again;
            }
        }
        if (k + 1 < d->ndim) {
            memmove(sub.count + k, sub.count + k + 1, (sub.ndim - k - 1) * sizeof sub.count[0]);
            memmove(sub.stride + k, sub.stride + k + 1, (sub.ndim - k - 1) * sizeof sub.stride[0]);
            sub.ndim--;
            for (uint64_t i = 0; i < d->count[k]; i++) {
                rs_desc s2 = sub;
                s2.offset = d->offset + i * d->stride[k];
                if (dec_desc(c, rank, loc, &s2, out, depth + 1)) return -1;
            }
            return 0;
        }
        /* only the innermost dim is not 1: treat as a run */
        sub.ndim = 1;
        sub.count[0] = d->count[d->ndim - 1];
        sub.stride[0] = 1;
        for (uint32_t i = 0; i + 1 < d->ndim; i++) sub.offset += 0;
        return dec_desc(c, rank, loc, &sub, out, depth + 1);
    }
    uint64_t n = d->count[0] >> esh;
    if (n <= 1) {
        char w[160];
        return vfail(c, "%s: an element of rank %u cannot be mapped to its tensor", op_where(c, w, sizeof w), rank);
    }
    /* cut the run where the piece's innermost structure ends: the longest mappable prefix, or one found by
     * halving */
    uint64_t lo = 1, hi = n; /* lo is mappable (one element maps when inside the piece) */
    rs_desc pre = *d;
    if (e.offset >= v->box_off) {
        uint64_t m = affine_prefix(c, v, rel, n);
        rs_desc t = e, td;
        t.count[0] = m;
        if (m && affine(c, v, &t, rel, &td)) lo = hi = m; /* (affine confirms: it may still refuse, e.g. dims) */
    }
    while (lo + 1 < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        rs_desc t = e, td;
        t.count[0] = mid;
        if (e.offset >= v->box_off && affine(c, v, &t, rel, &td)) lo = mid;
        else hi = mid;
    }
    pre.count[0] = lo * es;
    if (dec_desc(c, rank, loc, &pre, out, depth + 1)) return -1;
    if (d != &cur) cur = *d, d = &cur;
    cur.offset += lo * es;
    cur.count[0] -= lo * es;
    goto again;
}

/* Decompose the stream range [u, u + n) of desc d over (rank, loc). */
static int decompose(vctx *c, uint32_t rank, uint32_t loc, const rs_desc *d, uint64_t u, uint64_t n, vseg_vec *out)
{
    out->n = 0;
    rs_desc one;
    if (dslice1(d, u, n, &one)) return dec_desc(c, rank, loc, &one, out, 0);
    desc_vec parts = {0};
    dslice(d, u, n, &parts);
    int rc = 0;
    for (size_t i = 0; i < parts.n && !rc; i++) rc = dec_desc(c, rank, loc, &parts.v[i], out, 0);
    rs_vec_free(&parts);
    return rc;
}

/* Compare the tensor byte streams of two desc lists of equal total length. */
static int same_stream(vctx *c, desc_vec *A, desc_vec *B)
{
    size_t ia = 0, ib = 0;
    uint64_t oa = 0, ob = 0; /* consumed bytes of A.v[ia], B.v[ib] */
    while (ia < A->n && ib < B->n) {
        if (++c->budget > 400000000ull) return 0;
        rs_desc a = A->v[ia], b = B->v[ib];
        uint64_t la = dbytes(&a) - oa, lb = dbytes(&b) - ob;
        uint64_t m = la < lb ? la : lb;
        desc_vec sa = {0}, sb = {0};
        dslice(&a, oa, m, &sa);
        dslice(&b, ob, m, &sb);
        int ok;
        if (sa.n == 1 && sb.n == 1) {
            dnorm(&sa.v[0]);
            dnorm(&sb.v[0]);
            ok = sa.v[0].ndim == sb.v[0].ndim && sa.v[0].offset == sb.v[0].offset &&
                 !memcmp(sa.v[0].count, sb.v[0].count, sa.v[0].ndim * sizeof sa.v[0].count[0]) &&
                 !memcmp(sa.v[0].stride, sb.v[0].stride, sa.v[0].ndim * sizeof sa.v[0].stride[0]);
            if (!ok && !(sa.v[0].ndim == 1 && sb.v[0].ndim == 1)) {
                /* different factorizations of maybe the same stream: compare element by element of
                 * the outer dim of the one with more dims */
                rs_desc *x = sa.v[0].ndim >= sb.v[0].ndim ? &sa.v[0] : &sb.v[0];
                desc_vec ex = {0};
                uint64_t inner = dbytes(x) / x->count[0];
                for (uint64_t i = 0; i < x->count[0]; i++) dslice(x, i * inner, inner, &ex);
                if (x == &sa.v[0]) ok = same_stream(c, &ex, &sb);
                else ok = same_stream(c, &sa, &ex);
                rs_vec_free(&ex);
            }
        } else {
            ok = same_stream(c, &sa, &sb);
        }
        rs_vec_free(&sa);
        rs_vec_free(&sb);
        if (!ok) return 0;
        oa += m;
        ob += m;
        if (oa == dbytes(&A->v[ia])) ia++, oa = 0;
        if (ob == dbytes(&B->v[ib])) ib++, ob = 0;
    }
    return 1;
}

static void fmt_td(vctx *c, char *buf, size_t n, const vseg *s)
{
    const vpiece *v = &c->vp[s->vp];
    const rs_tensor *t = &c->L->tensors[v->tensor];
    uint64_t g = s->td.offset / v->es;
    int64_t idx[VND];
    for (int d = (int)t->ndim - 1; d >= 0; d--) {
        idx[d] = t->shape[d] ? (int64_t)(g % (uint64_t)t->shape[d]) : 0;
        g = t->shape[d] ? g / (uint64_t)t->shape[d] : 0;
    }
    size_t k = (size_t)snprintf(buf, n, "tensor '%s' element [", t->name);
    for (uint32_t d = 0; d < t->ndim && k < n; d++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* The dcache slot of a source desc. It comes from (rank, descriptor index), not the address, so the work
 * done (and the budget it takes) is the same in every run. */
static inline struct dcache_ent *dcache_slot(const vctx *c, const prov *p)
{
    uint64_t key = (uint64_t)p->src << 32 | p->d;
    return &c->dcache[key * 0x9e3779b97f4a7c15ull >> 48];
}

static inline int dcache_has(const struct dcache_ent *ce, const prov *p) { return ce->d == p->d && ce->rank == p->src; }

/* A segment's tensor desc packed into `words` words (count[0], stride[0], ..., count[ndim - 1]) and its
 * offset: piece << 8 | ndim, or 0 when it does not fit (a piece index of 24 bits or more, too many dims, an
 * innermost stride other than 1). */
static uint32_t td_pack(const vseg *g, uint32_t words, uint64_t *offset, uint64_t *w)
{
    const rs_desc *t = &g->td;
    if (g->vp >= (1u << 24) || t->ndim < 1 || 2 * t->ndim - 1 > words || t->stride[t->ndim - 1] != 1) return 0;
    *offset = t->offset;
    for (uint32_t i = 0; i < t->ndim; i++) {
        w[2 * i] = t->count[i];
        if (i + 1 < t->ndim) w[2 * i + 1] = t->stride[i];
    }
    return g->vp << 8 | t->ndim;
}

static void td_unpack(rs_desc *td, uint32_t nd, uint64_t offset, const uint64_t *w)
{
    td->loc = 0;
    td->ndim = nd;
    td->offset = offset;
    for (uint32_t i = 0; i < nd; i++) {
        td->count[i] = w[2 * i];
        td->stride[i] = i + 1 < nd ? w[2 * i + 1] : 1;
    }
}

/* A delivery: the stream range [du, du + n) of the destination decomposition `ld` (of one op, from
 * position base) receives the bytes of provenance p (ce: its dcache slot when it has a desc). */
static int check_delivery(vctx *c, uint32_t drank, const vseg_vec *ld, uint64_t ld_base, uint64_t du, const prov *p,
                          struct dcache_ent *ce)
{
    if (p->d == RS_NONE) {
        /* contiguous binding bytes: a one-dim desc */
        rs_desc cd = rs_desc_range(p->loc, p->pos, p->len);
        if (decompose(c, p->src, p->loc, &cd, 0, p->len, &c->ls)) return -1;
    } else {
        /* a whole source desc maps to one tensor desc most of the time: decompose it once (the desc
         * itself is read only when it is not cached, or its slice does not map as one) */
        rs_desc pd;
        int have_pd = 0;
        struct dmulti_seg *dm = c->dmulti + (size_t)(ce - c->dcache) * DM_SEGS;
        if (!dcache_has(ce, p)) {
            rs_prog_desc(&c->P->ranks[p->src], p->d, &pd);
            have_pd = 1;
            ce->d = p->d;
            ce->rank = p->src;
            ce->vp_nd = 0;
            ce->nmulti = 0;
            if (decompose(c, p->src, p->loc, &pd, 0, dbytes(&pd), &c->ls)) return -1;
            if (c->ls.n == 1) {
                ce->vp_nd = td_pack(&c->ls.v[0], DC_WORDS, &ce->offset, ce->w);
            } else if (c->ls.n >= 2 && c->ls.n <= DM_SEGS) {
                uint32_t k = 0;
                while (k < c->ls.n && (dm[k].vp_nd = td_pack(&c->ls.v[k], DM_WORDS, &dm[k].offset, dm[k].w))) {
                    dm[k].len = c->ls.v[k].len;
                    k++;
                }
                if (k == c->ls.n) ce->nmulti = k;
            }
        }
        c->ls.n = 0;
        rs_vec_reserve(&c->ls, 1);
        vseg *sg = &c->ls.v[0];
        rs_desc td;
        uint32_t tnd = ce->vp_nd & 0xff, tvp = ce->vp_nd >> 8;
        uint64_t tpos = p->pos;
        if (tnd) {
            td_unpack(&td, tnd, ce->offset, ce->w);
        } else if (ce->nmulti) {
            /* the one of the source's tensor descs that holds the run (none: decomposed below) */
            uint64_t at = 0;
            for (uint32_t k = 0; k < ce->nmulti; at += dm[k++].len)
                if (tpos >= at && tpos - at < dm[k].len) {
                    if (tpos - at + p->len <= dm[k].len) {
                        tnd = dm[k].vp_nd & 0xff, tvp = dm[k].vp_nd >> 8;
                        td_unpack(&td, tnd, dm[k].offset, dm[k].w);
                        tpos -= at;
                    }
                    break;
                }
        }
        if (tnd && dslice_norm(&td, tpos, p->len, &sg->td)) {
            sg->vp = tvp;
            sg->len = p->len;
            c->ls.n = 1;
        } else {
            if (!have_pd) rs_prog_desc(&c->P->ranks[p->src], p->d, &pd);
            if (decompose(c, p->src, p->loc, &pd, p->pos, p->len, &c->ls)) return -1;
        }
    }
    /* walk the destination segments overlapping [du, du + len) */
    uint64_t pos = ld_base, want = du, end = du + p->len;
    size_t i = 0;
    while (i < ld->n && pos + ld->v[i].len <= want) pos += ld->v[i++].len;
    size_t j = 0;
    uint64_t jpos = du;
    while (want < end) {
        if (i >= ld->n || j >= c->ls.n) return vfail(c, "internal: delivery walk out of range");
        const vseg *a = &ld->v[i], *b = &c->ls.v[j];
        uint64_t a_end = pos + a->len, b_end = jpos + b->len;
        uint64_t stop = a_end < b_end ? a_end : b_end;
        if (stop > end) stop = end;
        const vpiece *va = &c->vp[a->vp], *vb = &c->vp[b->vp];
        if (va->tensor != vb->tensor) {
            char w[160];
            return vfail(c, "%s: rank %u receives tensor '%s' into a piece of tensor '%s' (from rank %u)",
                         op_where(c, w, sizeof w), drank, c->L->tensors[vb->tensor].name,
                         c->L->tensors[va->tensor].name, p->src);
        }
        if (a->td.ndim == 1 && b->td.ndim == 1 && a->td.offset + (want - pos) == b->td.offset + (want - jpos)) {
            /* two contiguous runs of tensor bytes from the same start: the same stream (the common case) */
            want = stop;
            if (want == a_end) pos = a_end, i++;
            if (want == b_end) jpos = b_end, j++;
            continue;
        }
        /* the two slices as single descs in canonical form (whole segments are canonical already: from
         * affine, or normalized below): equal descs, the same stream */
        rs_desc x1, y1;
        const rs_desc *xs = &x1, *ys = &y1;
        int ok1 = 1;
        if (want == pos && stop == a_end) xs = &a->td;
        else ok1 = dslice_norm(&a->td, want - pos, stop - want, &x1);
        if (!ok1) {
        } else if (want == jpos && stop == b_end) ys = &b->td;
        else ok1 = dslice_norm(&b->td, want - jpos, stop - want, &y1);
        if (ok1 && desc_eq(xs, ys)) {
            want = stop;
            if (want == a_end) pos = a_end, i++;
            if (want == b_end) jpos = b_end, j++;
            continue;
        }
        desc_vec x = {0}, y = {0};
        dslice(&a->td, want - pos, stop - want, &x);
        dslice(&b->td, want - jpos, stop - want, &y);
        int ok = same_stream(c, &x, &y);
        if (!ok && !c->failed) {
            char w[160], ta[200], tb[200];
            vseg sa = {a->vp, 0, x.v[0]}, sb = {b->vp, 0, y.v[0]};
            fmt_td(c, ta, sizeof ta, &sa);
            fmt_td(c, tb, sizeof tb, &sb);
            vfail(c, "%s: wrong data: rank %u expects %s but gets %s from rank %u", op_where(c, w, sizeof w), drank, ta,
                  tb, p->src);
        }
        rs_vec_free(&x);
        rs_vec_free(&y);
        if (!ok) return -1;
        want = stop;
        if (want == a_end) pos = a_end, i++;
        if (want == b_end) jpos = b_end, j++;
    }
    return 0;
}

/* ---- staging content (pages of sorted byte ranges) ---- */

static int charge_runs(vctx *c, uint64_t n);

static page *page_of(vctx *c, uint32_t rank, uint64_t pg)
{
    if (!c->pages[rank]) {
        uint8_t sh = PG_SHIFT;
        while ((c->P->ranks[rank].staging_bytes >> sh) + 1 > PG_MAX) sh++;
        c->pgshift[rank] = sh;
        c->npages[rank] = (uint32_t)((c->P->ranks[rank].staging_bytes >> sh) + 1);
        c->pages[rank] = rs_xcalloc(c->npages[rank], sizeof(page));
    }
    rs_assert(pg < c->npages[rank]);
    return &c->pages[rank][pg];
}

/* first entry of the page ending after x */
static uint32_t page_find(const page *p, uint64_t x)
{
    uint32_t lo = 0, hi = p->n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (p->v[mid].start + p->v[mid].len <= x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void page_put(page *p, uint32_t at, uint32_t nremove, const pent *ins, uint32_t nins)
{
    if (p->n - nremove + nins > p->cap) {
        p->cap = (p->n - nremove + nins) * 2 + 4;
        p->v = rs_xrealloc(p->v, p->cap * sizeof *p->v);
    }
    memmove(p->v + at + nins, p->v + at + nremove, (p->n - at - nremove) * sizeof *p->v);
    memcpy(p->v + at, ins, nins * sizeof *ins);
    p->n = p->n - nremove + nins;
}

/* Sort w[0..n) by start (stably): a natural merge sort, since a step's PACK writes are a few ascending
 * runs (one per PACK), with c->tnew as the second buffer. Returns where the sorted entries are (w or
 * c->tnew: copying them back cost as much as a merge pass). */
static pent *pent_sort(vctx *c, pent *w, size_t n)
{
    if (n < 2) return w;
    c->tnew.n = 0;
    rs_vec_reserve(&c->tnew, n);
    pent *src = w, *dst = c->tnew.v;
    for (;;) {
        size_t i = 0;
        while (i < n) {
            size_t m = i + 1;
            while (m < n && src[m].start >= src[m - 1].start) m++;
            if (i == 0 && m == n) return src;
            size_t e = m;
            if (m < n)
                for (e = m + 1; e < n && src[e].start >= src[e - 1].start;) e++;
            size_t a = i, b = m, k = i;
            while (a < m && b < e) dst[k++] = src[b].start < src[a].start ? src[b++] : src[a++];
            while (a < m) dst[k++] = src[a++];
            while (b < e) dst[k++] = src[b++];
            i = e;
        }
        pent *t = src;
        src = dst;
        dst = t;
    }
}

/* Several writes at once: w[0..n) sorted by start, non-overlapping, non-empty (a step's PACKs, or the
 * pieces of one message). Each page they touch is rebuilt once: its old entries between the first and
 * the last new byte are clipped around the new ones (what sticks out on either side is kept). The new
 * entries of a page are w[k0..k1), the first from byte d0 of it, the last cut at the page end when it
 * runs over (read in place: copying them out first cost as much as the merge). */
static int tassign_batch(vctx *c, uint32_t rank, const pent *w, size_t n)
{
    if (!n) return 0;
    page_of(c, rank, 0); /* sets the rank's page size */
    uint8_t sh = c->pgshift[rank];
    uint64_t npg = 0;
    for (size_t k = 0; k < n; k++) npg += ((w[k].start + w[k].len - 1) >> sh) - (w[k].start >> sh) + 1;
    if (charge_runs(c, npg)) return -1;
    size_t k = 0;
    uint64_t kdone = 0; /* bytes of w[k] placed on earlier pages */
    while (k < n) {
        uint64_t pg = (w[k].start + kdone) >> sh, pb = (pg + 1) << sh;
        page *p = page_of(c, rank, pg);
        size_t k0 = k, k1 = k + 1;
        uint64_t d0 = kdone;
        while (k1 < n && w[k1].start < pb) k1++;
        size_t nn = k1 - k0;
        uint64_t lastend = w[k1 - 1].start + w[k1 - 1].len;
        int cut = lastend > pb;
        if (cut) {
            k = k1 - 1;
            kdone = pb - w[k].start;
        } else {
            k = k1;
            kdone = 0;
        }
        uint64_t lo = w[k0].start + d0, hi = cut ? pb : lastend;
        uint32_t i = page_find(p, lo), j = i;
        while (j < p->n && p->v[j].start < hi) j++;
        /* the old entries' parts in the gaps before, between and after the new entries (at most one
         * per old entry and gap it overlaps, and the new ones) */
        c->tout.n = 0;
        rs_vec_reserve(&c->tout, (j - i) + 2 * nn + 2);
        pent *out = c->tout.v;
        size_t no = 0;
        uint32_t o = i;
        uint64_t g0 = 0;
        for (size_t m = 0; m <= nn; m++) {
            pent q;
            uint64_t g1 = UINT64_MAX;
            if (m < nn) {
                q = w[k0 + m];
                if (m == 0 && d0) {
                    q.start += d0;
                    q.pos += d0;
                    q.len -= d0;
                }
                if (m + 1 == nn && cut) q.len = pb - q.start;
                g1 = q.start;
            }
            while (o < j) {
                const pent *e = &p->v[o];
                uint64_t es = e->start, ee = e->start + e->len;
                if (es >= g1) break;
                uint64_t a = es > g0 ? es : g0, b = ee < g1 ? ee : g1;
                if (a < b) {
                    pent *y = &out[no++];
                    *y = *e;
                    y->start = a;
                    y->pos = e->pos + (a - es);
                    y->len = b - a;
                }
                if (ee > g1) break;
                o++;
            }
            if (m < nn) {
                out[no++] = q;
                g0 = q.start + q.len;
            }
        }
        page_put(p, i, j - i, out, (uint32_t)no);
    }
    return 0;
}

/* Content of staging [a, b) of rank: provenance pieces in order (adjacent pieces of one stream joined);
 * -1 when some byte holds no data. */
static int tquery(vctx *c, uint32_t rank, uint64_t a, uint64_t b, prov_vec *out)
{
    out->n = 0;
    uint64_t at = a;
    if (!c->pages[rank]) return a < b ? -1 : 0;
    uint8_t sh = c->pgshift[rank];
    for (uint64_t pg = a >> sh; a < b && pg <= (b - 1) >> sh; pg++) {
        if (pg >= c->npages[rank]) return -1;
        const page *p = &c->pages[rank][pg];
        for (uint32_t i = page_find(p, at); i < p->n && p->v[i].start < b; i++) {
            const pent *e = &p->v[i];
            uint64_t s = e->start > at ? e->start : at, t = e->start + e->len < b ? e->start + e->len : b;
            if (s != at) return -1;
            prov q = {e->src, e->loc, e->d, e->pos + (s - e->start), t - s};
            prov *last = out->n ? &out->v[out->n - 1] : NULL;
            if (last && last->src == q.src && last->loc == q.loc && last->d == q.d && last->pos + last->len == q.pos)
                last->len += q.len;
            else
                rs_vec_push(out, q);
            at = t;
        }
    }
    return at == b ? 0 : -1;
}

/* ---- matching ---- */

typedef struct {
    uint64_t key; /* lane, a, b */
    uint32_t seq, gop;
    uint8_t kind; /* 0 send, 1 recv */
} mrec;

/* ---- the verifier ---- */

typedef struct {
    uint32_t *step_base, *op_base; /* [world + 1] */
    uint32_t nsteps, nops;
    uint32_t *op_step;   /* global op -> global step */
    uint32_t *partner;   /* global op -> global op (send/recv) */
    uint32_t *pstep;     /* global op -> its partner's global step (send/recv): the simulation reads it in op
                          * order, where through the partner op it was a dependent cache miss a message */
} vglob;

static void free_all(vctx *c, vglob *g)
{
    free(c->vp);
    rs_vec_free(&c->dv);
    free(c->vp_index);
    if (c->vb) {
        for (uint32_t r = 0; r < c->world; r++) free(c->vb[r]);
        free(c->vb);
    }
    if (c->pages) {
        for (uint32_t r = 0; r < c->world; r++) {
            for (uint32_t i = 0; c->pages[r] && i < c->npages[r]; i++) free(c->pages[r][i].v);
            free(c->pages[r]);
        }
        free(c->pages);
    }
    free(c->npages);
    free(c->pgshift);
    free(c->reads_dst);
    free(c->dcache_mem);
    free(c->dmulti);
    rs_vec_free(&c->slice_a);
    rs_vec_free(&c->slice_b);
    rs_vec_free(&c->ld);
    rs_vec_free(&c->ls);
    rs_vec_free(&c->pv);
    rs_vec_free(&c->msg);
    rs_vec_free(&c->unp);
    rs_vec_free(&c->tw);
    rs_vec_free(&c->tnew);
    rs_vec_free(&c->tout);
    if (c->cov)
        for (uint32_t r = 0; r < c->world; r++) rs_vec_free(&c->cov[r]);
    free(c->cov);
    rs_vec_free(&c->cbx);
    free(g->step_base);
    free(g->op_base);
    free(g->op_step);
    free(g->partner);
    free(g->pstep);
}

static int loc_is_dst(const vctx *c, uint32_t rank, uint32_t loc)
{
    return loc != RS_LOC_STAGING && c->L->buffers[c->P->ranks[rank].bindings[loc].buffer].side == RS_DST;
}

/* Binding regions must be whole elements (the data check reasons per element). Reads of destination
 * buffers (relays) are checked by check_relays. One rank (bk: scratch); quiet: returns 1 at the first
 * problem without reporting it, otherwise reports it (-1). */
typedef rs_vec(uint8_t) u8_vec;
static int check_alignment_rank(vctx *c, uint32_t r, u8_vec *bk, int quiet)
{
    const rs_rank_prog *g = &c->P->ranks[r];
    /* per binding of the rank: element bytes, and 0x80 when it is a destination binding */
    bk->n = 0;
    rs_vec_reserve(bk, g->nbindings);
    for (uint32_t i = 0; i < g->nbindings; i++) {
        const rs_buffer *b = &c->L->buffers[g->bindings[i].buffer];
        bk->v[i] = (uint8_t)(rs_dtype_size(b->dtype) | (b->side == RS_DST ? 0x80 : 0));
    }
#define ES_OF(loc) ((loc) == RS_LOC_STAGING ? 1u : (uint32_t)(bk->v[loc] & 0x7f))
#define IS_DST(loc) ((loc) != RS_LOC_STAGING && (bk->v[loc] & 0x80))
    for (uint32_t s = 0; s < g->nsteps; s++)
        for (uint32_t k = 0; k < g->steps[s].nops; k++) {
            uint32_t oi = g->steps[s].op_begin + k;
            const rs_op *o = &g->ops[oi];
            c->cur_rank = r, c->cur_step = s, c->cur_op = oi;
            char w[160];
            if (o->code == RS_OP_SEND || o->code == RS_OP_RECV) {
                uint32_t es = ES_OF(o->loc);
                if (o->off % es || o->bytes % es) {
                    if (quiet) return 1;
                    return vfail(c, "%s: buffer range not made of whole elements", op_where(c, w, sizeof w));
                }
                if (o->code == RS_OP_SEND && o->bytes && IS_DST(o->loc)) c->reads_dst[r] = 1;
                continue;
            }
            for (int side = 0; side < 2; side++) {
                rs_desc db_;
                const rs_desc *d = VDESC(c, g, side ? o->dst : o->src, &db_);
                if (d->loc == RS_LOC_STAGING) continue;
                uint32_t es = ES_OF(d->loc);
                int bad = d->offset % es || d->count[d->ndim - 1] % es;
                for (uint32_t i = 0; i + 1 < d->ndim; i++)
                    if (d->stride[i] % es) bad = 1;
                if (bad) {
                    if (quiet) return 1;
                    return vfail(c, "%s: buffer region not made of whole elements", op_where(c, w, sizeof w));
                }
                if (!side && (o->code == RS_OP_PACK || o->code == RS_OP_COPY) && IS_DST(d->loc)) c->reads_dst[r] = 1;
            }
        }
#undef ES_OF
#undef IS_DST
    return 0;
}

static int check_alignment(vctx *c)
{
    u8_vec bk = {0};
    int rc = 0;
    if (!c->reads_dst) c->reads_dst = rs_xcalloc(c->world + 1, 1);
    else memset(c->reads_dst, 0, c->world + 1);
    for (uint32_t r = 0; r < c->world && !rc; r++) rc = check_alignment_rank(c, r, &bk, 0);
    rs_vec_free(&bk);
    return rc;
}

/* Put the n elements of `size` bytes at base in the order ord (from rs_radix_order). */
static void permute(void *base, size_t n, size_t size, const size_t *ord)
{
    char *out = rs_xmalloc(n * size + 1), *b = base;
    for (size_t i = 0; i < n; i++) memcpy(out + i * size, b + ord[i] * size, size);
    memcpy(base, out, n * size);
    free(out);
}

/* One (lane, a, b): the q-th send of a pairs with the q-th receive of b. */
static int match_key(vctx *c, vglob *G, uint32_t lane, uint32_t a, uint32_t b, const uint32_t *sv, size_t sn,
                     const uint32_t *rv, size_t rn)
{
    if (sn != rn)
        return vfail(c, "%s lane: rank %u sends %zu messages to rank %u, which receives %zu", lane ? "NVL" : "NET", a, sn,
                     b, rn);
    for (size_t q = 0; q < sn; q++) {
        uint32_t so = sv[q], ro = rv[q];
        const rs_op *x = &c->P->ranks[a].ops[so - G->op_base[a]], *y = &c->P->ranks[b].ops[ro - G->op_base[b]];
        if (x->bytes != y->bytes)
            return vfail(c, "%s lane: message %zu from rank %u to rank %u: %llu bytes sent, %llu received",
                         lane ? "NVL" : "NET", q, a, b, (unsigned long long)x->bytes, (unsigned long long)y->bytes);
        G->partner[so] = ro;
        G->partner[ro] = so;
        G->pstep[so] = G->op_step[ro];
        G->pstep[ro] = G->op_step[so];
    }
    return 0;
}

/* Sort v[0..n) stably by bits [lo, lo + bits) (LSD radix, passes of at most 13 bits), tmp of n words. */
static void radix_sort_u64(uint64_t *v, uint64_t *tmp, size_t n, unsigned lo, unsigned bits)
{
    unsigned passes = (bits + 12) / 13, db = passes ? (bits + passes - 1) / passes : 1;
    uint64_t mask = (1ull << db) - 1;
    size_t cnt[1u << 13];
    uint64_t *src = v, *dst = tmp;
    for (unsigned sh = lo; sh < lo + bits; sh += db) {
        memset(cnt, 0, ((size_t)1 << db) * sizeof *cnt);
        for (size_t i = 0; i < n; i++) cnt[(src[i] >> sh) & mask]++;
        size_t sum = 0;
        for (size_t d = 0; d < ((size_t)1 << db); d++) {
            size_t t = cnt[d];
            cnt[d] = sum;
            sum += t;
        }
        for (size_t i = 0; i < n; i++) dst[cnt[(src[i] >> sh) & mask]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != v) memcpy(v, src, n * sizeof *v);
}

/* Every rank's ops: record each op's global step, and hand each SEND/RECV to `put` as its message end
 * (lane, a = sender, b = receiver; recv; global op), in rank-program order. Both matchers start here. */
static inline void msg_ends(vctx *c, vglob *G, void (*put)(void *, uint32_t, uint32_t, uint32_t, int, uint32_t),
                            void *ctx)
{
    for (uint32_t r = 0; r < c->world; r++) {
        const rs_rank_prog *g = &c->P->ranks[r];
        for (uint32_t s = 0; s < g->nsteps; s++)
            for (uint32_t k = 0; k < g->steps[s].nops; k++) {
                uint32_t oi = g->steps[s].op_begin + k;
                const rs_op *o = &g->ops[oi];
                G->op_step[G->op_base[r] + oi] = G->step_base[r] + s;
                if (o->code != RS_OP_SEND && o->code != RS_OP_RECV) continue;
                int recv = o->code == RS_OP_RECV;
                put(ctx, g->steps[s].lane, recv ? o->peer : r, recv ? r : o->peer, recv, G->op_base[r] + oi);
            }
    }
}

typedef struct {
    uint64_t *x;
    size_t n;
    unsigned wb;
} packed_ends;

static void put_packed(void *ctx, uint32_t lane, uint32_t a, uint32_t b, int recv, uint32_t gop)
{
    packed_ends *e = ctx;
    uint64_t key = (uint64_t)lane << (2 * e->wb) | (uint64_t)a << e->wb | b;
    e->x[e->n++] = key << 33 | (uint64_t)recv << 32 | gop;
}

typedef struct {
    rs_vec(mrec) recs;
    unsigned wb;
} rec_ends;

static void put_rec(void *ctx, uint32_t lane, uint32_t a, uint32_t b, int recv, uint32_t gop)
{
    rec_ends *e = ctx;
    mrec m = {(uint64_t)lane << (2 * e->wb) | (uint64_t)a << e->wb | b, 0, gop, (uint8_t)recv};
    rs_vec_push(&e->recs, m);
}

/* The message ends x[i0..i1) sorted by (key, kind), whole keys: each key's sends and receives paired. */
static int match_range(vctx *c, vglob *G, const uint64_t *x, size_t i0, size_t i1, unsigned wb)
{
    int rc = 0;
    rs_vec(uint32_t) gv = {0};
    rs_vec_reserve(&gv, 1);
    for (size_t i = i0; i < i1 && !rc;) {
        uint64_t key = x[i] >> 33;
        size_t j = i, m;
        gv.n = 0;
        while (j < i1 && x[j] >> 33 == key) {
            rs_vec_push(&gv, (uint32_t)x[j]);
            j++;
        }
        for (m = i; m < j && !(x[m] >> 32 & 1); m++) {
        }
        uint64_t wm = (1ull << wb) - 1;
        rc = match_key(c, G, (uint32_t)(key >> (2 * wb)), (uint32_t)(key >> wb & wm), (uint32_t)(key & wm), gv.v,
                       m - i, gv.v + (m - i), j - m);
        i = j;
    }
    rs_vec_free(&gv);
    return rc;
}

/* The second half of match_range's keys on a thread, on a context of its own (plans of this many ops). */
#define MATCH_TWO_MIN_OPS 16384
typedef struct {
    vctx c;
    vglob *G;
    const uint64_t *x;
    size_t i0, i1;
    unsigned wb;
    int rc;
} match_half;

static void *match_thread(void *arg)
{
    match_half *m = arg;
    m->rc = match_range(&m->c, m->G, m->x, m->i0, m->i1, m->wb);
    return NULL;
}

/* match_ops on up to 2^15 ranks: each SEND/RECV as one word (lane, a, b, kind, global op), 16 bytes a
 * message end in all instead of the records' ~80 with their sort (a ~70 MB of fresh pages per verify on
 * DeepSeek-V3, expensive to fault in); the same pairs and the same first error. */
static int match_ops_packed(vctx *c, vglob *G, unsigned wb)
{
    packed_ends e = {rs_xmalloc((G->nops + 1) * sizeof *e.x), 0, wb}; /* untaken pages stay untouched */
    msg_ends(c, G, put_packed, &e);
    uint64_t *x = e.x;
    size_t n = e.n;
    /* by (key, kind), stably: per key the sends, then the receives, each in program order */
    if (n > 1) {
        uint64_t *tmp = rs_xmalloc(n * sizeof *tmp);
        radix_sort_u64(x, tmp, n, 32, 2 * wb + 2);
        free(tmp);
    }
    /* the pairs on two threads, each a half of the keys (a pair's ops and partner entries are its own); the
     * second half's problem is reported only when the first has none, as on one thread */
    size_t h = n;
    match_half b;
    memset(&b, 0, sizeof b);
    b.G = G, b.x = x, b.wb = wb;
    pthread_t th;
    int two = 0;
    if (n >= 2 && rs_threads(G->nops, MATCH_TWO_MIN_OPS) > 1) {
        h = n / 2;
        while (h < n && x[h] >> 33 == x[h - 1] >> 33) h++;
        if (h < n) {
            b.c = *c;
            ctx_own_err(&b.c, c);
            b.i0 = h, b.i1 = n;
            two = !rs_thread_start(&th, match_thread, &b);
            if (!two) {
                free(b.c.err);
                h = n;
            }
        }
    }
    int rc = match_range(c, G, x, 0, h, wb);
    if (two) {
        pthread_join(th, NULL);
        if (!rc && b.rc) rc = ctx_take_err(c, &b.c);
        free(b.c.err);
    }
    free(x);
    return rc;
}

static int match_ops(vctx *c, vglob *G)
{
    /* the key (lane, a, b) in as few bits as the world needs: as many radix passes as that takes (2 instead
     * of 4 on 512 ranks), and the same order as lane << 42 | a << 21 | b */
    unsigned wb = 1;
    while (wb < 21 && (c->world - 1) >> wb) wb++;
    if (wb <= 15) return match_ops_packed(c, G, wb);
    rec_ends e = {{0}, wb};
    msg_ends(c, G, put_rec, &e);
    __typeof__(e.recs) recs = e.recs;
    /* sequence numbers per (key, kind) in program order: records are in rank-program order already, so a
     * stable count per key works after grouping; do it with a sort by (key, kind, gop) */
    for (size_t i = 0; i < recs.n; i++) recs.v[i].seq = recs.v[i].gop;
    /* by key, then gop (program order of one rank): the records are in gop order, so a stable radix sort
     * by the 43-bit key gives mrec_cmp's order */
    if (recs.n > 1) {
        uint64_t *keys = rs_xmalloc(recs.n * sizeof *keys);
        for (size_t i = 0; i < recs.n; i++) keys[i] = recs.v[i].key;
        size_t *ord = rs_radix_order(keys, recs.n, 2 * wb + 1);
        permute(recs.v, recs.n, sizeof *recs.v, ord);
        free(ord);
        free(keys);
    }
    /* within a key: sends come from one rank and receives from another; number each kind */
    size_t i = 0;
    int rc = 0;
    rs_vec(uint32_t) sends = {0}, recvs = {0};
    while (i < recs.n && !rc) {
        size_t j = i;
        while (j < recs.n && recs.v[j].key == recs.v[i].key) j++;
        sends.n = recvs.n = 0;
        for (size_t q = i; q < j; q++) {
            if (recs.v[q].kind == 0) rs_vec_push(&sends, recs.v[q].gop);
            else rs_vec_push(&recvs, recs.v[q].gop);
        }
        uint64_t wm = (1ull << wb) - 1;
        rc = match_key(c, G, (uint32_t)(recs.v[i].key >> (2 * wb)), (uint32_t)(recs.v[i].key >> wb & wm),
                       (uint32_t)(recs.v[i].key & wm), sends.v, sends.n, recvs.v, recvs.n);
        i = j;
    }
    rs_vec_free(&sends);
    rs_vec_free(&recvs);
    rs_vec_free(&recs);
    return rc;
}

/* ---- races between steps of one rank ---- */

typedef struct {
    uint64_t a, b;
    uint8_t w; /* written */
    uint8_t what; /* 0 PACK write, 1 RECV write, 2 SEND read, 3 UNPACK read */
} iv;

static int iv_cmp(const void *x, const void *y)
{
    const iv *a = x, *b = y;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    return a->b < b->b ? -1 : a->b > b->b;
}

typedef rs_vec(iv) iv_vec;

/* Take n byte runs from the budget; an error when it is spent. */
static int charge_runs(vctx *c, uint64_t n)
{
    if (n > c->runs_left) {
        c->runs_left = 0;
        return vfail(c, "plan too large to verify (more than 2^31 byte runs, or 2^24 in one step)");
    }
    c->runs_left -= n;
    return 0;
}

static uint64_t desc_nruns(const rs_desc *d)
{
    uint64_t run = d->count[d->ndim - 1];
    return run ? dbytes(d) / run : 0;
}

static void desc_runs(const rs_desc *d, uint8_t w, uint8_t what, iv_vec *out)
{
    uint64_t run = d->count[d->ndim - 1];
    uint64_t nrun = dbytes(d) / (run ? run : 1);
    if (!run) return;
    uint64_t idx[RS_DESC_MAX_DIMS] = {0};
    for (uint64_t q = 0; q < nrun; q++) {
        uint64_t off = d->offset;
        for (uint32_t k = 0; k + 1 < d->ndim; k++) off += idx[k] * d->stride[k];
        iv x = {off, off + run, w, what};
        rs_vec_push(out, x);
        for (int k = (int)d->ndim - 2; k >= 0; k--) {
            if (++idx[k] < d->count[k]) break;
            idx[k] = 0;
        }
    }
}

static inline int iv_lt(const iv *x, const iv *y) { return x->a < y->a || (x->a == y->a && x->b < y->b); }

/* Sort by (a, b) like iv_cmp: a natural merge sort (a footprint is a few ascending runs: the PACKs, the
 * sends, the receives, the UNPACKs), using tmp as the second buffer. */
static void iv_sort(iv *v, size_t n, iv_vec *tmp)
{
    if (n < 2) return;
    if (tmp->cap < n) {
        tmp->cap = n;
        tmp->v = rs_xrealloc(tmp->v, n * sizeof *tmp->v);
    }
    iv *src = v, *dst = tmp->v;
    for (;;) {
        size_t i = 0;
        while (i < n) {
            size_t m = i + 1;
            while (m < n && !iv_lt(&src[m], &src[m - 1])) m++;
            if (i == 0 && m == n) {
                if (src != v) memcpy(v, src, n * sizeof *v);
                return;
            }
            size_t e = m;
            if (m < n)
                for (e = m + 1; e < n && !iv_lt(&src[e], &src[e - 1]);) e++;
            size_t a = i, b = m, k = i;
            while (a < m && b < e) dst[k++] = iv_lt(&src[b], &src[a]) ? src[b++] : src[a++];
            while (a < m) dst[k++] = src[a++];
            while (b < e) dst[k++] = src[b++];
            i = e;
        }
        iv *t = src;
        src = dst;
        dst = t;
    }
}

/* Appends step s's sorted staging footprint to out (-1: too many runs). acc: quiet, the runs are added
 * to *acc instead of taken from the budget (1: too many in the step or in all). */
static int step_footprint(vctx *c, const rs_rank_prog *g, uint32_t s, iv_vec *out, iv_vec *tmp, uint64_t *acc)
{
    size_t base = out->n;
    const rs_step *st = &g->steps[s];
    uint64_t nr = 0;
    for (uint32_t k = 0; k < st->nops; k++) {
        const rs_op *o = &g->ops[st->op_begin + k];
        rs_desc db_;
        if (o->code == RS_OP_PACK) nr += desc_nruns(VDESC(c, g, o->dst, &db_));
        else if (o->code == RS_OP_UNPACK) nr += desc_nruns(VDESC(c, g, o->src, &db_));
        else nr++;
        if (nr > STEP_RUNS_MAX) return acc ? 1 : charge_runs(c, UINT64_MAX);
    }
    if (acc) {
        *acc += nr;
        if (*acc > RUNS_MAX) return 1;
    } else if (charge_runs(c, nr)) {
        return -1;
    }
    for (uint32_t k = 0; k < st->nops; k++) {
        const rs_op *o = &g->ops[st->op_begin + k];
        rs_desc db_;
        switch (o->code) {
        case RS_OP_PACK: desc_runs(VDESC(c, g, o->dst, &db_), 1, 0, out); break;
        case RS_OP_UNPACK: desc_runs(VDESC(c, g, o->src, &db_), 0, 3, out); break;
        case RS_OP_SEND:
            if (o->loc == RS_LOC_STAGING && o->bytes) {
                iv x = {o->off, o->off + o->bytes, 0, 2};
                rs_vec_push(out, x);
            }
            break;
        case RS_OP_RECV:
            if (o->loc == RS_LOC_STAGING && o->bytes) {
                iv x = {o->off, o->off + o->bytes, 1, 1};
                rs_vec_push(out, x);
            }
            break;
        default: break;
        }
    }
    int sorted = 1;
    for (size_t i = base + 1; i < out->n && sorted; i++)
        if (iv_cmp(&out->v[i - 1], &out->v[i]) > 0) sorted = 0;
    if (!sorted) iv_sort(out->v + base, out->n - base, tmp);
    return 0;
}

/* within one step: writes never overlap each other, and a RECV never writes what a SEND reads (quiet:
 * 1 at a problem, unreported) */
static int step_internal(vctx *c, uint32_t r, uint32_t s, const iv *fv, size_t fn, int quiet)
{
    uint64_t wend = 0, recv_end = 0, send_end = 0;
    for (size_t i = 0; i < fn; i++) {
        const iv *x = &fv[i];
        if (x->w) {
            if (x->a < wend)
                return quiet ? 1 : vfail(c, "rank %u, step %u: staging bytes %llu.. written twice in one step", r, s,
                             (unsigned long long)x->a);
            if (x->what == 1 && x->a < send_end)
                return quiet ? 1 : vfail(c, "rank %u, step %u: a receive overwrites staging bytes %llu.. a send of the same step reads",
                             r, s, (unsigned long long)x->a);
            if (x->b > wend) wend = x->b;
            if (x->what == 1 && x->b > recv_end) recv_end = x->b;
        } else if (x->what == 2) {
            if (x->a < recv_end)
                return quiet ? 1 : vfail(c, "rank %u, step %u: a send reads staging bytes %llu.. a receive of the same step writes",
                             r, s, (unsigned long long)x->a);
            if (x->b > send_end) send_end = x->b;
        }
    }
    return 0;
}

static int overlap_conflict(const iv *av, size_t an, const iv *bv, size_t bn, uint64_t *at)
{
    size_t i = 0, j = 0;
    /* interval lists sorted by start; check every overlapping pair with a write (two-pointer on ends) */
    while (i < an && j < bn) {
        const iv *x = &av[i], *y = &bv[j];
        if (x->b <= y->a) {
            i++;
            continue;
        }
        if (y->b <= x->a) {
            j++;
            continue;
        }
        if (x->w || y->w) {
            *at = x->a > y->a ? x->a : y->a;
            return 1;
        }
        if (x->b < y->b) i++;
        else j++;
    }
    return 0;
}

/* The race check of rank r (fp, tmp, at: scratch). acc: quiet (see step_footprint), 1 at a problem. */
typedef rs_vec(size_t) size_vec;
static int races_rank(vctx *c, uint32_t r, iv_vec *fp, iv_vec *tmp, size_vec *at, uint64_t *acc)
{
    const rs_rank_prog *g = &c->P->ranks[r];
    int rc = 0, quiet = acc != NULL;
    if (!g->nsteps) return 0;
    /* every step's footprint, once */
    fp->n = 0;
    at->n = 0;
    for (uint32_t s = 0; s < g->nsteps && !rc; s++) {
        rs_vec_push(at, fp->n);
        rc = step_footprint(c, g, s, fp, tmp, acc);
    }
    if (rc) return rc;
    rs_vec_push(at, fp->n);
    for (uint32_t s = 0; s < g->nsteps && !rc; s++)
        rc = step_internal(c, r, s, fp->v + at->v[s], at->v[s + 1] - at->v[s], quiet);
    /* lane sequences and, per step, the last step of the other lane known complete before it starts */
    uint32_t *lane_idx = rs_xmalloc(g->nsteps * sizeof *lane_idx);
    int64_t *before = rs_xmalloc(g->nsteps * sizeof *before);
    rs_vec(uint32_t) seq[2] = {{0}, {0}};
    int64_t run[2] = {-1, -1};
    for (uint32_t s = 0; s < g->nsteps; s++) {
        int lane = g->steps[s].lane;
        lane_idx[s] = (uint32_t)seq[lane].n;
        rs_vec_push(&seq[lane], s);
        for (uint32_t w = 0; w < g->steps[s].nwaits; w++) {
            uint32_t t = g->waits[g->steps[s].wait_begin + w];
            if ((int64_t)lane_idx[t] > run[lane]) run[lane] = lane_idx[t];
        }
        before[s] = run[lane];
    }
    /* each NET step against the NVL steps that may run at the same time */
    for (size_t i = 0; i < seq[0].n && !rc; i++) {
        uint32_t s = seq[0].v[i];
        int64_t lo = before[s] + 1; /* NVL lane indices >= lo are not known to be complete */
        if (at->v[s + 1] == at->v[s]) continue;
        for (size_t j = (size_t)(lo < 0 ? 0 : lo); j < seq[1].n; j++) {
            uint32_t t = seq[1].v[j];
            if (before[t] >= (int64_t)i) break; /* this NVL step (and later ones) start after s */
            uint64_t x;
            if (overlap_conflict(fp->v + at->v[s], at->v[s + 1] - at->v[s], fp->v + at->v[t], at->v[t + 1] - at->v[t], &x)) {
                rc = quiet ? 1
                           : vfail(c, "rank %u: steps %u (NET) and %u (NVL) may run at the same time and both touch staging byte %llu, one writing",
                                   r, s, t, (unsigned long long)x);
                break;
            }
        }
    }
    free(lane_idx);
    free(before);
    rs_vec_free(&seq[0]);
    rs_vec_free(&seq[1]);
    return rc;
}

static int check_races(vctx *c)
{
    iv_vec fp = {0}, tmp = {0};
    size_vec at = {0};
    int rc = 0;
    for (uint32_t r = 0; r < c->world && !rc; r++) rc = races_rank(c, r, &fp, &tmp, &at, NULL);
    rs_vec_free(&fp);
    rs_vec_free(&tmp);
    rs_vec_free(&at);
    return rc;
}

/* ---- relays: reads of destination buffers ---- */

/* A destination byte run written or read by one op: [a, b) of binding loc, at (step, phase). Phases of a
 * step: 1 PACK and COPY, 2 SEND and RECV (one group), 3 UNPACK. */
typedef struct {
    uint32_t loc;
    uint32_t step, op;
    uint8_t phase;
    uint64_t a, b;
} drun;
typedef rs_vec(drun) drun_vec;

static int drun_cmp(const void *x, const void *y)
{
    const drun *p = x, *q = y;
    if (p->loc != q->loc) return p->loc < q->loc ? -1 : 1;
    if (p->a != q->a) return p->a < q->a ? -1 : 1;
    return p->b < q->b ? -1 : p->b > q->b;
}

/* Runs are pushed row by row of each descriptor, so they come as a few ascending stretches (a few hundred
 * among 650 k runs on a relaying rank, interleaved in address): merge them through a heap of stretch heads
 * (ties: the earlier stretch, so the merge is stable). Reads each stretch and writes the output in order,
 * where a radix sort permutes the runs at random. Returns 0 (nothing done) when there are many stretches. */
static int drun_merge_stretches(drun_vec *W, const uint64_t *keys)
{
    size_t n = W->n, k = 1;
    for (size_t i = 1; i < n; i++) k += keys[i] < keys[i - 1];
    if (k == 1) return 1;
    if (k > n / 16 || k > 65536) return 0;
    size_t *at = rs_xmalloc(k * sizeof *at), *end = rs_xmalloc(k * sizeof *end);
    uint32_t *h = rs_xmalloc(k * sizeof *h); /* min-heap of stretches by (key at its head, stretch) */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || keys[i] < keys[i - 1]) {
            if (m) end[m - 1] = i;
            at[m++] = i;
        }
    end[m - 1] = n;
#define HLESS(x, y) (keys[at[x]] < keys[at[y]] || (keys[at[x]] == keys[at[y]] && (x) < (y)))
    for (size_t j = 0; j < m; j++) {
        size_t z = j;
        h[z] = (uint32_t)j;
        while (z && HLESS(h[z], h[(z - 1) / 2])) {
            uint32_t t = h[z];
            h[z] = h[(z - 1) / 2];
            h[(z - 1) / 2] = t;
            z = (z - 1) / 2;
        }
    }
    drun *out = rs_xmalloc(n * sizeof *out);
    size_t hn = m;
    for (size_t o = 0; o < n; o++) {
        uint32_t q = h[0];
        out[o] = W->v[at[q]++];
        if (at[q] == end[q]) h[0] = h[--hn];
        for (size_t z = 0;;) {
            size_t l = 2 * z + 1, r = l + 1, b = z;
            if (l < hn && HLESS(h[l], h[b])) b = l;
            if (r < hn && HLESS(h[r], h[b])) b = r;
            if (b == z) break;
            uint32_t t = h[z];
            h[z] = h[b];
            h[b] = t;
            z = b;
        }
    }
#undef HLESS
    memcpy(W->v, out, n * sizeof *out);
    free(out);
    free(h);
    free(at);
    free(end);
    return 1;
}

/* Sort runs by (loc, a), stably (millions of runs on a relaying rank); qsort when the key does not fit 64
 * bits. */
static void drun_sort(drun_vec *W)
{
    size_t n = W->n;
    if (n < 2) return;
    uint64_t maxa = 0;
    uint32_t maxloc = 0;
    for (size_t i = 0; i < n; i++) {
        if (W->v[i].a > maxa) maxa = W->v[i].a;
        if (W->v[i].loc > maxloc) maxloc = W->v[i].loc;
    }
    unsigned abits = 0, lbits = 0;
    while (abits < 64 && (maxa >> abits)) abits++;
    while (lbits < 32 && (maxloc >> lbits)) lbits++;
    if (abits + lbits > 64) {
        qsort(W->v, n, sizeof *W->v, drun_cmp);
        return;
    }
    uint64_t *keys = rs_xmalloc(n * sizeof *keys);
    for (size_t i = 0; i < n; i++) keys[i] = (lbits ? (uint64_t)W->v[i].loc << abits : 0) | W->v[i].a;
    if (drun_merge_stretches(W, keys)) {
        free(keys);
        return;
    }
    size_t *ord = rs_radix_order(keys, n, abits + lbits);
    permute(W->v, n, sizeof *W->v, ord);
    free(ord);
    free(keys);
}

static int push_druns(vctx *c, const rs_desc *d, uint32_t s, uint32_t oi, uint8_t phase, drun_vec *out)
{
    uint64_t run = d->count[d->ndim - 1];
    if (!run || !dbytes(d)) return 0;
    uint64_t nrun = dbytes(d) / run, idx[RS_DESC_MAX_DIMS] = {0};
    if (charge_runs(c, nrun)) return -1;
    for (uint64_t q = 0; q < nrun; q++) {
        uint64_t off = d->offset;
        for (uint32_t k = 0; k + 1 < d->ndim; k++) off += idx[k] * d->stride[k];
        drun x = {d->loc, s, oi, phase, off, off + run};
        rs_vec_push(out, x);
        for (int k = (int)d->ndim - 2; k >= 0; k--) {
            if (++idx[k] < d->count[k]) break;
            idx[k] = 0;
        }
    }
    return 0;
}

/* First interval of U (sorted, disjoint, by (loc, a)) of binding loc ending after a, from j on. */
static size_t u_seek(const drun *U, size_t nu, size_t j, uint32_t loc, uint64_t a)
{
    /* gallop from j, then binary search */
    size_t lo = j, step = 1, hi = j;
    while (hi < nu && (U[hi].loc < loc || (U[hi].loc == loc && U[hi].b <= a))) {
        lo = hi + 1;
        hi += step;
        step *= 2;
    }
    if (hi > nu) hi = nu;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (U[mid].loc < loc || (U[mid].loc == loc && U[mid].b <= a)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Append the parts of runs x[0..n) (ascending, one binding) that fall inside U, clipped. */
static int clip_runs(vctx *c, const drun *x, size_t n, const drun *U, size_t nu, drun_vec *out)
{
    size_t j = 0;
    uint64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        j = x[i].a < prev || i == 0 ? u_seek(U, nu, 0, x[i].loc, x[i].a) : u_seek(U, nu, j, x[i].loc, x[i].a);
        prev = x[i].a;
        for (size_t q = j; q < nu && U[q].loc == x[i].loc && U[q].a < x[i].b; q++) {
            if (charge_runs(c, 1)) return -1;
            drun y = x[i];
            if (U[q].a > y.a) y.a = U[q].a;
            if (U[q].b < y.b) y.b = U[q].b;
            rs_vec_push(out, y);
        }
    }
    return 0;
}

/* push_druns, keeping only what falls inside U */
static int push_druns_in(vctx *c, const rs_desc *d, uint32_t s, uint32_t oi, uint8_t phase, const drun *U, size_t nu,
                         drun_vec *out)
{
    uint64_t run = d->count[d->ndim - 1];
    if (!run || !dbytes(d) || !nu) return 0;
    uint64_t span = run;
    for (int k = (int)d->ndim - 2; k >= 0; k--)
        if (d->count[k] > 1) span = (d->count[k] - 1) * d->stride[k] + span;
    size_t j = u_seek(U, nu, 0, d->loc, d->offset);
    if (j == nu || U[j].loc != d->loc || U[j].a >= d->offset + span) return 0; /* nothing read in its span */
    uint64_t nrun = dbytes(d) / run, idx[RS_DESC_MAX_DIMS] = {0}, prev = d->offset;
    for (uint64_t q = 0; q < nrun; q++) {
        uint64_t off = d->offset;
        for (uint32_t k = 0; k + 1 < d->ndim; k++) off += idx[k] * d->stride[k];
        j = u_seek(U, nu, off < prev ? 0 : j, d->loc, off);
        prev = off;
        for (size_t z = j; z < nu && U[z].loc == d->loc && U[z].a < off + run; z++) {
            if (charge_runs(c, 1)) return -1;
            drun x = {d->loc, s, oi, phase, off > U[z].a ? off : U[z].a, off + run < U[z].b ? off + run : U[z].b};
            rs_vec_push(out, x);
        }
        for (int k = (int)d->ndim - 2; k >= 0; k--) {
            if (++idx[k] < d->count[k]) break;
            idx[k] = 0;
        }
    }
    return 0;
}

/* "destination buffer 'name' (tensor 't') bytes a..b" for messages */
static void fmt_dbytes(vctx *c, uint32_t r, uint32_t loc, uint64_t a, uint64_t b, char *buf, size_t n)
{
    const rs_binding *x = &c->P->ranks[r].bindings[loc];
    const rs_buffer *bf = &c->L->buffers[x->buffer];
    uint32_t es = (uint32_t)rs_dtype_size(bf->dtype);
    int64_t idx[VND];
    uint32_t vi = find_piece(c, r, loc, a / es, idx);
    if (vi != RS_NONE)
        snprintf(buf, n, "bytes %llu..%llu of destination buffer '%s' (tensor '%s')", (unsigned long long)a,
                 (unsigned long long)b, bf->name, c->L->tensors[c->vp[vi].tensor].name);
    else
        snprintf(buf, n, "bytes %llu..%llu of destination buffer '%s' (outside every piece)", (unsigned long long)a,
                 (unsigned long long)b, bf->name);
}

/* The verdict on one rank's destination runs, W (writes, clipped to what is read) and R (reads), both
 * sorted by (loc, a): a byte is written once, and every byte read is written by an op that completes
 * before the read starts. Quiet (the strip form, where addresses are not bytes): returns 1 at the first
 * problem without reporting it; otherwise reports it (-1). */
static int relay_verdict(vctx *c, uint32_t r, const drun_vec *W, const drun_vec *R, int quiet)
{
    const rs_rank_prog *g = &c->P->ranks[r];
    int rc = 0;
    /* per step: its lane index and the last step of the other lane known complete when it starts */
    uint32_t *lane_idx = rs_xmalloc((g->nsteps + 1) * sizeof *lane_idx);
    int64_t *before = rs_xmalloc((g->nsteps + 1) * sizeof *before);
    {
        uint32_t nl[2] = {0, 0};
        int64_t known[2] = {-1, -1};
        for (uint32_t s = 0; s < g->nsteps; s++) {
            int lane = g->steps[s].lane;
            lane_idx[s] = nl[lane]++;
            for (uint32_t w = 0; w < g->steps[s].nwaits; w++) {
                uint32_t t = g->waits[g->steps[s].wait_begin + w];
                if ((int64_t)lane_idx[t] > known[lane]) known[lane] = lane_idx[t];
            }
            before[s] = known[lane];
        }
    }
    /* a destination byte is written once */
    for (size_t i = 1; i < W->n && !rc; i++) {
        const drun *p = &W->v[i - 1], *q = &W->v[i];
        if (p->loc == q->loc && q->a < p->b) {
            if (quiet) {
                rc = 1;
                break;
            }
            char what[300];
            fmt_dbytes(c, r, q->loc, q->a, q->b < p->b ? q->b : p->b, what, sizeof what);
            rc = vfail(c, "rank %u: %s are written twice (step %u, op %u %s and step %u, op %u %s)", r, what, p->step,
                       p->op, rs_op_name(g->ops[p->op].code), q->step, q->op, rs_op_name(g->ops[q->op].code));
        }
    }
    /* every read run (by address): covered by writes, each complete before the read starts */
    size_t lo = 0;
    for (size_t i = 0; i < R->n && !rc; i++) {
        const drun *x = &R->v[i];
        lo = u_seek(W->v, W->n, i && x->a >= R->v[i - 1].a && x->loc == R->v[i - 1].loc ? lo : 0, x->loc, x->a);
        uint64_t at = x->a;
        c->cur_rank = r, c->cur_step = x->step, c->cur_op = x->op;
        for (size_t j = lo; at < x->b && !rc; j++) {
            const drun *w = j < W->n ? &W->v[j] : NULL;
            char wh[160], what[300];
            if (!w || w->loc != x->loc || w->a > at) {
                if (quiet) {
                    rc = 1;
                    break;
                }
                uint64_t end = w && w->loc == x->loc && w->a < x->b ? w->a : x->b;
                fmt_dbytes(c, r, x->loc, at, end, what, sizeof what);
                rc = vfail(c, "%s: relays %s that no op of the plan writes on rank %u", op_where(c, wh, sizeof wh),
                           what, r);
                break;
            }
            uint32_t t = w->step, s = x->step;
            int ok = t == s ? w->phase < x->phase
                            : g->steps[t].lane == g->steps[s].lane ? t < s : (int64_t)lane_idx[t] <= before[s];
            if (!ok) {
                if (quiet) {
                    rc = 1;
                    break;
                }
                uint64_t end = w->b < x->b ? w->b : x->b;
                fmt_dbytes(c, r, x->loc, at, end, what, sizeof what);
                const char *why = t == s ? "in the same step, not an earlier phase"
                                  : g->steps[t].lane == g->steps[s].lane ? "by a later step of the same lane"
                                                                         : "on the other lane, not waited for";
                rc = vfail(c, "%s: relays %s before they are written (step %u, op %u %s writes them %s)",
                           op_where(c, wh, sizeof wh), what, t, w->op, rs_op_name(g->ops[w->op].code), why);
                break;
            }
            at = w->b;
        }
    }
    free(lane_idx);
    free(before);
    return rc;
}

/* U := the union of R (sorted by (loc, a)): disjoint intervals by (loc, a) */
static void drun_union(const drun_vec *R, drun_vec *U)
{
    U->n = 0;
    if (R->n) rs_vec_reserve(U, R->n);
    size_t m = 0;
    for (size_t i = 0; i < R->n; i++) {
        if (m && U->v[m - 1].loc == R->v[i].loc && R->v[i].a <= U->v[m - 1].b) {
            if (R->v[i].b > U->v[m - 1].b) U->v[m - 1].b = R->v[i].b;
        } else {
            U->v[m++] = R->v[i];
        }
    }
    U->n = m;
}

/* The relay check of rank r row by row: one run per row of every descriptor that reads the destination
 * bindings rd[] or writes them (inside what is read). Exact byte addresses, so it names the bytes of a
 * problem; the slow form (tens of millions of runs on a relaying rank). */
static int relay_rows(vctx *c, uint32_t r, const uint8_t *rd, drun_vec *W, drun_vec *R, drun_vec *U)
{
    const rs_rank_prog *g = &c->P->ranks[r];
    int rc = 0;
    W->n = R->n = 0;
    /* the reads first; then only the writes inside what is read (a relaying rank writes millions of
     * runs, most of which nothing reads) */
    for (int pass = 0; pass < 2 && !rc; pass++) {
        for (uint32_t s = 0; s < g->nsteps && !rc; s++)
            for (uint32_t k = 0; k < g->steps[s].nops && !rc; k++) {
                uint32_t oi = g->steps[s].op_begin + k;
                const rs_op *o = &g->ops[oi];
                if (o->code == RS_OP_SEND || o->code == RS_OP_RECV) {
                    if (o->loc == RS_LOC_STAGING || !rd[o->loc] || !o->bytes) continue;
                    if ((o->code == RS_OP_SEND) != (pass == 0)) continue;
                    drun x = {o->loc, s, oi, 2, o->off, o->off + o->bytes};
                    if (pass == 0) {
                        if (charge_runs(c, 1)) rc = -1;
                        else rs_vec_push(R, x);
                    } else {
                        rc = clip_runs(c, &x, 1, U->v, U->n, W);
                    }
                    continue;
                }
                rs_desc sdb_, ddb_;
                const rs_desc *sd = rs_prog_desc(g, o->src, &sdb_), *dd = rs_prog_desc(g, o->dst, &ddb_);
                uint8_t ph = o->code == RS_OP_UNPACK ? 3 : 1;
                if (pass == 1 && dd->loc != RS_LOC_STAGING && rd[dd->loc])
                    rc = push_druns_in(c, dd, s, oi, ph, U->v, U->n, W);
                if (pass == 0 && sd->loc != RS_LOC_STAGING && rd[sd->loc]) rc = push_druns(c, sd, s, oi, ph, R);
            }
        if (pass == 0 && !rc) {
            drun_sort(R);
            drun_union(R, U);
        }
    }
    if (rc) return rc;
    drun_sort(W);
    return relay_verdict(c, r, W, R, 0);
}

/* ---- the relay check on strips ----
 * A relaying rank reads and writes its destination bindings as rows of matrices: each descriptor is a
 * rectangle (rows x byte columns) at the binding's row pitch. Cut every binding into column strips at the
 * column edges of all its rectangles: each rectangle then covers whole strips, and "strip k, row i" is a
 * cell that every read and write covers entirely or not at all. Numbering the cells k x rows + i turns a
 * rectangle into one run per strip it crosses, and the check of relay_rows runs unchanged on these runs:
 * written once, covered, ordered, cell by cell exactly as byte by byte. A few runs per descriptor instead
 * of one per row (73 M -> about 1 M on Qwen3-32B asym). Runs are not bytes, so a problem found here is
 * reported by running relay_rows on the rank. */

typedef struct {
    uint32_t loc, step, op;
    uint8_t phase, read;
    uint64_t r0, r1, c0, c1; /* rows [r0, r1) x byte columns [c0, c1) at the binding's pitch */
} drect;
typedef rs_vec(drect) drect_vec;

typedef struct {
    uint32_t loc;
    uint64_t v; /* a row pitch (stride) or a column edge */
} dlocv;
typedef rs_vec(dlocv) dlocv_vec;

static int dlocv_cmp(const void *x, const void *y)
{
    const dlocv *p = x, *q = y;
    if (p->loc != q->loc) return p->loc < q->loc ? -1 : 1;
    return p->v < q->v ? -1 : p->v > q->v;
}

/* Bytes [a, b) of a binding at pitch S as at most three rectangles (a partial row, whole rows, a partial
 * row). */
static void drect_range(drect_vec *out, drect x, uint64_t S, uint64_t a, uint64_t b)
{
    if (a >= b) return;
    uint64_t row = a / S, ca = a % S;
    if (ca + (b - a) <= S) {
        x.r0 = row, x.r1 = row + 1, x.c0 = ca, x.c1 = ca + (b - a);
        rs_vec_push(out, x);
        return;
    }
    if (ca) {
        x.r0 = row, x.r1 = row + 1, x.c0 = ca, x.c1 = S;
        rs_vec_push(out, x);
        row++;
        a = row * S;
    }
    uint64_t full = (b - a) / S;
    if (full) {
        x.r0 = row, x.r1 = row + full, x.c0 = 0, x.c1 = S;
        rs_vec_push(out, x);
        row += full;
    }
    if ((b - a) % S) {
        x.r0 = row, x.r1 = row + 1, x.c0 = 0, x.c1 = (b - a) % S;
        rs_vec_push(out, x);
    }
}

/* The rectangles of descriptor d (canonical) at pitch S: one per outer index when its rows step by S and
 * stay inside a row, else its rows' ranges. Stops early (returns 1) once out->n exceeds cap. */
static int drect_desc(drect_vec *out, drect x, uint64_t S, const rs_desc *d, size_t cap)
{
    uint32_t nd = d->ndim;
    if (nd == 1) {
        drect_range(out, x, S, d->offset, d->offset + d->count[0]);
        return out->n > cap;
    }
    uint64_t run = d->count[nd - 1], n = d->count[nd - 2], st = d->stride[nd - 2];
    uint64_t idx[RS_DESC_MAX_DIMS] = {0}, nouter = 1;
    for (uint32_t k = 0; k + 2 < nd; k++) nouter *= d->count[k];
    for (uint64_t q = 0; q < nouter; q++) {
        uint64_t base = d->offset;
        for (uint32_t k = 0; k + 2 < nd; k++) base += idx[k] * d->stride[k];
        if (st == S && base % S + run <= S) {
            x.r0 = base / S, x.r1 = base / S + n, x.c0 = base % S, x.c1 = base % S + run;
            rs_vec_push(out, x);
        } else {
            for (uint64_t i = 0; i < n; i++) drect_range(out, x, S, base + i * st, base + i * st + run);
        }
        if (out->n > cap) return 1;
        for (int k = (int)nd - 3; k >= 0; k--) {
            if (++idx[k] < d->count[k]) break;
            idx[k] = 0;
        }
    }
    return 0;
}

/* The relay check of rank r on strips. Returns 0 (checked, all right), 1 (run relay_rows: a problem to
 * report, or strips that would not save work) or -1. */
static int relay_strips(vctx *c, uint32_t r, const uint8_t *rd, drun_vec *W, drun_vec *R, drun_vec *U)
{
    const rs_rank_prog *g = &c->P->ranks[r];
    uint32_t nb = g->nbindings;
    dlocv_vec pv = {0}, ev = {0};
    drect_vec X = {0};
    uint64_t *pitch = rs_xcalloc(nb + 1, sizeof *pitch);
    int rc = 0;
    /* each binding's pitch: the most common row stride of its descriptors; how many rows relay_rows walks */
    uint64_t nrows = 0;
    for (uint32_t oi = 0; oi < g->nops; oi++) {
        const rs_op *o = &g->ops[oi];
        if (o->code == RS_OP_SEND || o->code == RS_OP_RECV) {
            nrows += o->loc != RS_LOC_STAGING && rd[o->loc];
            continue;
        }
        for (int side = 0; side < 2; side++) {
            rs_desc d;
            rs_prog_desc(g, side ? o->dst : o->src, &d);
            if (d.loc == RS_LOC_STAGING || !rd[d.loc] || !dbytes(&d)) continue;
            nrows += desc_nruns(&d);
            dnorm(&d);
            if (d.ndim >= 2) rs_vec_push(&pv, ((dlocv){d.loc, d.stride[d.ndim - 2]}));
        }
    }
    if (pv.n) qsort(pv.v, pv.n, sizeof *pv.v, dlocv_cmp);
    for (size_t i = 0, best = 0; i < pv.n;) {
        size_t j = i;
        while (j < pv.n && pv.v[j].loc == pv.v[i].loc && pv.v[j].v == pv.v[i].v) j++;
        if (i == 0 || pv.v[i].loc != pv.v[i - 1].loc) best = 0;
        if (j - i > best) best = j - i, pitch[pv.v[i].loc] = pv.v[i].v;
        i = j;
    }
    /* every read and write as rectangles, in program order (a binding without rows of its own: pitch 1,
     * one row per byte, i.e. byte runs); rows when strips would not save half the runs (small ranks always
     * take strips, so the tests exercise them) */
    size_t cap = nrows / 2 + 4096;
    for (uint32_t s = 0; s < g->nsteps && !rc; s++)
        for (uint32_t k = 0; k < g->steps[s].nops && !rc; k++) {
            uint32_t oi = g->steps[s].op_begin + k;
            const rs_op *o = &g->ops[oi];
            if (o->code == RS_OP_SEND || o->code == RS_OP_RECV) {
                if (o->loc == RS_LOC_STAGING || !rd[o->loc] || !o->bytes) continue;
                drect x = {o->loc, s, oi, 2, o->code == RS_OP_SEND, 0, 0, 0, 0};
                uint64_t S = pitch[o->loc] ? pitch[o->loc] : 1;
                drect_range(&X, x, S, o->off, o->off + o->bytes);
                rc = X.n > cap;
                continue;
            }
            uint8_t ph = o->code == RS_OP_UNPACK ? 3 : 1;
            for (int side = 0; side < 2 && !rc; side++) {
                rs_desc d;
                rs_prog_desc(g, side ? o->dst : o->src, &d);
                if (d.loc == RS_LOC_STAGING || !rd[d.loc] || !dbytes(&d)) continue;
                dnorm(&d);
                drect x = {d.loc, s, oi, ph, side == 0, 0, 0, 0, 0};
                rc = drect_desc(&X, x, pitch[d.loc] ? pitch[d.loc] : 1, &d, cap);
            }
        }
    /* column edges per binding, then one run per strip a rectangle crosses: k x rows + i */
    uint64_t *rows = rs_xcalloc(nb + 1, sizeof *rows);
    size_t *e0 = rs_xcalloc(nb + 2, sizeof *e0);
    if (!rc) {
        for (size_t i = 0; i < X.n; i++) {
            drect *x = &X.v[i];
            if (x->r1 > rows[x->loc]) rows[x->loc] = x->r1;
            rs_vec_push(&ev, ((dlocv){x->loc, x->c0}));
            rs_vec_push(&ev, ((dlocv){x->loc, x->c1}));
        }
        qsort(ev.v, ev.n, sizeof *ev.v, dlocv_cmp);
        size_t m = 0;
        for (size_t i = 0; i < ev.n; i++)
            if (!m || ev.v[m - 1].loc != ev.v[i].loc || ev.v[m - 1].v != ev.v[i].v) ev.v[m++] = ev.v[i];
        ev.n = m;
        for (size_t i = 0; i < ev.n; i++) e0[ev.v[i].loc + 1] = i + 1; /* e0[loc + 1]: end of loc's edges */
        for (uint32_t l = 1; l <= nb + 1; l++)
            if (e0[l] < e0[l - 1]) e0[l] = e0[l - 1];
    }
    W->n = R->n = 0;
    drun_vec Wall = {0};
    size_t nv = 0;
    for (size_t i = 0; i < X.n && !rc; i++) {
        const drect *x = &X.v[i];
        const dlocv *E = ev.v + e0[x->loc];
        size_t ne = e0[x->loc + 1] - e0[x->loc], lo = 0, hi = ne;
        while (lo < hi) { /* the edge at c0 */
            size_t mid = lo + (hi - lo) / 2;
            if (E[mid].v < x->c0) lo = mid + 1;
            else hi = mid;
        }
        for (size_t k = lo; k + 1 < ne && E[k].v < x->c1; k++) {
            drun y = {x->loc, x->step, x->op, x->phase, k * rows[x->loc] + x->r0, k * rows[x->loc] + x->r1};
            rs_vec_push(x->read ? R : &Wall, y);
            if (++nv > cap) rc = 1;
        }
    }
    if (!rc) {
        drun_sort(R);
        drun_union(R, U);
        rc = charge_runs(c, nv) ? -1 : 0;
        if (!rc) {
            drun_sort(&Wall); /* clip_runs walks U once per binding; W comes out sorted */
            rc = clip_runs(c, Wall.v, Wall.n, U->v, U->n, W);
        }
        if (!rc) {
            rc = relay_verdict(c, r, W, R, 1);
        }
    }
    rs_vec_free(&Wall);
    rs_vec_free(&X);
    rs_vec_free(&pv);
    rs_vec_free(&ev);
    free(pitch);
    free(rows);
    free(e0);
    return rc;
}

/* A rank may read its destination buffers (SEND from a destination binding, PACK or COPY from a
 * destination region): relays forward bytes the rank has received. Every byte read must be written on
 * the rank by exactly one op of the plan (RECV into the binding, UNPACK or COPY) that completes before
 * the read starts: an earlier phase of the same step, an earlier step of the same lane, or a step of the
 * other lane that the reading step waits for (directly or through earlier steps of its own lane). The
 * data check then follows the bytes as content of the destination pieces (written right, or reported). */
static int check_relays(vctx *c)
{
    drun_vec W = {0}, R = {0}, U = {0};
    int rc = 0;
    for (uint32_t r = 0; r < c->world && !rc; r++) {
        const rs_rank_prog *g = &c->P->ranks[r];
        if (!c->reads_dst[r]) continue; /* (found by check_alignment) */
        /* the destination bindings this rank reads */
        uint8_t *rd = NULL;
        for (uint32_t oi = 0; oi < g->nops; oi++) {
            const rs_op *o = &g->ops[oi];
            uint32_t loc = RS_LOC_STAGING;
            if (o->code == RS_OP_SEND) loc = o->bytes ? o->loc : RS_LOC_STAGING;
            else if (o->code == RS_OP_PACK || o->code == RS_OP_COPY) loc = rs_prog_desc_loc(g, o->src);
            if (!loc_is_dst(c, r, loc)) continue;
            if (!rd) rd = rs_xcalloc(g->nbindings + 1, 1);
            rd[loc] = 1;
        }
        if (!rd) continue;
        rc = relay_strips(c, r, rd, &W, &R, &U);
        if (rc == 1) rc = relay_rows(c, r, rd, &W, &R, &U);
        free(rd);
    }
    rs_vec_free(&W);
    rs_vec_free(&R);
    rs_vec_free(&U);
    return rc;
}

/* ---- simulation with data ---- */

static void cov_collect(vctx *c, uint32_t r, const vseg_vec *ld, uint64_t budget);

#define UL_AHEAD1 8
#define UL_AHEAD2 4
static inline void ul_prefetch_desc(const vctx *c, const prov *p, const struct dcache_ent *ce)
{
    if (p->d == RS_NONE || dcache_has(ce, p)) return;
    const rs_rank_prog *g = &c->P->ranks[p->src];
    const char *d = (const char *)(g->dpool + g->doff[p->d]);
    __builtin_prefetch(d);
    __builtin_prefetch(d + 64);
}

static int unpack_like(vctx *c, uint32_t r, const rs_desc *dst, const prov *sp, size_t np)
{
    /* destination decomposition once, then each source piece against its slice (into the context's
     * vector: a fresh one grew by reallocation on each of the ~0.7 M calls) */
    vseg_vec *ld = &c->ld;
    /* the sources' dcache slots and (when not cached) descs are cold: prefetched ahead of their checks,
     * in two stages (the slot says whether the desc will be read), the first while dst is decomposed */
    struct dcache_ent *ce[UL_AHEAD1] = {0}; /* the slots of pieces i .. i + UL_AHEAD1 - 1, by i % UL_AHEAD1 */
    for (size_t i = 0; i < np && i < UL_AHEAD1; i++)
        if (sp[i].d != RS_NONE) __builtin_prefetch(ce[i] = dcache_slot(c, &sp[i]));
    uint64_t b0 = c->budget, nb = dbytes(dst);
    if (decompose(c, r, dst->loc, dst, 0, nb, ld)) return -1;
    if (c->cov && nb) cov_collect(c, r, ld, c->budget - b0);
    for (size_t i = 0; i < np && i < UL_AHEAD2; i++) ul_prefetch_desc(c, &sp[i], ce[i]);
    uint64_t at = 0;
    int rc = 0;
    for (size_t i = 0; i < np && !rc; i++) {
        struct dcache_ent *me = ce[i % UL_AHEAD1];
        if (i + UL_AHEAD1 < np && sp[i + UL_AHEAD1].d != RS_NONE)
            __builtin_prefetch(ce[i % UL_AHEAD1] = dcache_slot(c, &sp[i + UL_AHEAD1]));
        if (i + UL_AHEAD2 < np) ul_prefetch_desc(c, &sp[i + UL_AHEAD2], ce[(i + UL_AHEAD2) % UL_AHEAD1]);
        rc = check_delivery(c, r, ld, 0, at, &sp[i], me);
        at += sp[i].len;
    }
    return rc;
}

/* ---- the delivery checks, on a second thread ----
 * A delivery check (an UNPACK's, a COPY's, or a RECV's straight into a binding: unpack_like) reads the
 * plan, the layout's pieces and caches of its own, never the staging contents: the simulation hands the
 * checks, with the staging runs they read, to a checker thread in batches, in simulation order, and goes
 * on with the next steps. For the simulation's duration the checker owns what the checks change (the
 * descriptor cache, the decomposition budget, the pieces' refinements, the coverage boxes), so it does the
 * same work in the same order as one thread would: the verdict, the first problem's message and the work
 * counted are the same. Its first problem comes before any the simulation finds after handing that check
 * over, so it is the one reported. */
enum { DJ_COPY, DJ_RECV, DJ_UNPACK };
typedef struct {
    uint32_t r, step, op, kind;
    size_t pbeg, np; /* its sources: provs [pbeg, pbeg + np) of its batch (DJ_COPY: none, the op has it) */
} djob;
typedef struct {
    rs_vec(djob) jobs;
    prov_vec provs;
} dbatch;
/* batches in flight: the one being filled and the rest checked or waiting (with 4, the 2.5 T MoE's
 * simulation waited 0.6 s for the checker in its busy stretches, and the checker for it in others) */
#define DQ_BATCHES 16
#define DQ_JOBS 2048    /* a batch is handed over at this many checks */
#define DQ_PROVS 65536  /* or this many sources */
#define PRE_MIN_PAIRS 4096 /* layouts with fewer (rank, piece) pairs index them when verified (a thread ahead costs more) */
#define DQ_MIN_OPS 16384 /* plans with fewer ops are checked on one thread (a thread costs more than it saves) */
struct dpipe {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dbatch b[DQ_BATCHES];
    uint32_t head, tail; /* batches handed over, batches checked (b[head % DQ_BATCHES] is being filled) */
    int closed, failed;
    vctx cc; /* the checker's context */
    char *cerr;
    pthread_t th;
};

/* One delivery check. */
static int run_job(vctx *c, const djob *j, const prov *sp)
{
    const rs_rank_prog *g = &c->P->ranks[j->r];
    const rs_op *o = &g->ops[j->op];
    c->cur_rank = j->r, c->cur_step = j->step, c->cur_op = j->op;
    if (j->kind == DJ_RECV) {
        rs_desc dd = rs_desc_range(o->loc, o->off, o->bytes);
        return unpack_like(c, j->r, &dd, sp, j->np);
    }
    rs_desc ddb_;
    const rs_desc *dd = rs_prog_desc(g, o->dst, &ddb_);
    if (j->kind == DJ_COPY) {
        rs_desc sdb_;
        const rs_desc *sd = rs_prog_desc(g, o->src, &sdb_);
        prov p = {j->r, sd->loc, o->src, 0, dbytes(sd)};
        return unpack_like(c, j->r, dd, &p, 1);
    }
    return unpack_like(c, j->r, dd, sp, j->np);
}

static void *dq_checker(void *arg)
{
    struct dpipe *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (q->head == q->tail && !q->closed) pthread_cond_wait(&q->cv, &q->mu);
        if (q->head == q->tail) break;
        const dbatch *b = &q->b[q->tail % DQ_BATCHES];
        pthread_mutex_unlock(&q->mu);
        int rc = 0;
        for (size_t i = 0; i < b->jobs.n && !rc; i++)
            rc = run_job(&q->cc, &b->jobs.v[i], b->provs.v + b->jobs.v[i].pbeg);
        pthread_mutex_lock(&q->mu);
        q->tail++;
        q->failed = rc != 0;
        pthread_cond_broadcast(&q->cv);
        if (rc) break;
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Start the checker thread (none when it cannot be started: the checks then run in the simulation). */
static void dq_start(vctx *c)
{
    struct dpipe *q = rs_xcalloc(1, sizeof *q);
    q->cc = *c; /* the plan, the pieces, the descriptor cache, the coverage vectors: shared */
    vctx *k = &q->cc;
    memset(&k->slice_a, 0, sizeof k->slice_a);
    memset(&k->slice_b, 0, sizeof k->slice_b);
    memset(&k->ld, 0, sizeof k->ld);
    memset(&k->ls, 0, sizeof k->ls);
    memset(&k->pv, 0, sizeof k->pv);
    memset(&k->msg, 0, sizeof k->msg);
    memset(&k->unp, 0, sizeof k->unp);
    memset(&k->tw, 0, sizeof k->tw);
    memset(&k->tnew, 0, sizeof k->tnew);
    memset(&k->tout, 0, sizeof k->tout);
    memset(&k->cbx, 0, sizeof k->cbx);
    k->pages = NULL; /* staging is the simulation's */
    k->dp = NULL;
    ctx_own_err(k, c);
    q->cerr = k->err;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    if (rs_thread_start(&q->th, dq_checker, q)) {
        pthread_mutex_destroy(&q->mu);
        pthread_cond_destroy(&q->cv);
        free(q->cerr);
        free(q);
        return;
    }
    c->dp = q;
}

/* Hand the batch being filled to the checker and take the next free one; -1 when the checker has found a
 * problem (the simulation stops: that problem is the one reported). */
static int dq_hand_over(struct dpipe *q)
{
    pthread_mutex_lock(&q->mu);
    q->head++;
    pthread_cond_broadcast(&q->cv);
    while (q->head - q->tail >= DQ_BATCHES && !q->failed) pthread_cond_wait(&q->cv, &q->mu);
    int failed = q->failed;
    pthread_mutex_unlock(&q->mu);
    dbatch *b = &q->b[q->head % DQ_BATCHES];
    b->jobs.n = b->provs.n = 0;
    return failed ? -1 : 0;
}

/* The end of the simulation: the checks handed over are done, and what the checker owned is c's again.
 * -1 when a check found a problem (its message is c's). */
static int dq_finish(vctx *c)
{
    struct dpipe *q = c->dp;
    pthread_mutex_lock(&q->mu);
    if (q->b[q->head % DQ_BATCHES].jobs.n) q->head++;
    q->closed = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->th, NULL);
    vctx *k = &q->cc;
    c->budget = k->budget;
    c->cov_budget = k->cov_budget;
    c->cov_off |= k->cov_off;
    c->dv = k->dv; /* refinements were added to the pool (which may have moved) */
    int rc = 0;
    if (q->failed) {
        c->failed = 1;
        if (c->err && c->errlen) snprintf(c->err, c->errlen, "%s", q->cerr);
        rc = -1;
    }
    rs_vec_free(&k->slice_a);
    rs_vec_free(&k->slice_b);
    rs_vec_free(&k->ld);
    rs_vec_free(&k->ls);
    rs_vec_free(&k->pv);
    rs_vec_free(&k->msg);
    rs_vec_free(&k->unp);
    rs_vec_free(&k->tw);
    rs_vec_free(&k->tnew);
    rs_vec_free(&k->tout);
    rs_vec_free(&k->cbx);
    for (int i = 0; i < DQ_BATCHES; i++) {
        rs_vec_free(&q->b[i].jobs);
        rs_vec_free(&q->b[i].provs);
    }
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q->cerr);
    free(q);
    c->dp = NULL;
    return rc;
}

/* Where the sources of the next delivery check go (dl_check takes them from `pbeg` on). */
static prov_vec *dl_provs(vctx *c)
{
    if (c->dp) return &c->dp->b[c->dp->head % DQ_BATCHES].provs;
    c->unp.n = 0;
    return &c->unp;
}

/* A delivery check whose sources were put into dl_provs(c) from pbeg on: run now, or handed over. */
static int dl_check(vctx *c, uint32_t kind, uint32_t r, uint32_t s, uint32_t op, size_t pbeg)
{
    struct dpipe *q = c->dp;
    if (!q) {
        djob j = {r, s, op, kind, pbeg, c->unp.n - pbeg};
        return run_job(c, &j, c->unp.v + pbeg);
    }
    dbatch *b = &q->b[q->head % DQ_BATCHES];
    djob j = {r, s, op, kind, pbeg, b->provs.n - pbeg};
    rs_vec_push(&b->jobs, j);
    if (b->jobs.n < DQ_JOBS && b->provs.n < DQ_PROVS) return 0;
    return dq_hand_over(q);
}

/* The descriptors of a step's op a little ahead (a step's first ops find its rank's program cold: the
 * first DESC_AHEAD at once, then each op DESC_AHEAD before it is reached). */
#define DESC_AHEAD 8
static inline void desc_prefetch(const rs_rank_prog *g, const rs_op *o)
{
    if (o->code != RS_OP_PACK && o->code != RS_OP_UNPACK && o->code != RS_OP_COPY) return;
    __builtin_prefetch(g->dpool + g->doff[o->src]);
    __builtin_prefetch(g->dpool + g->doff[o->dst]);
}

static int do_phase1(vctx *c, uint32_t r, uint32_t s)
{
    const rs_rank_prog *g = &c->P->ranks[r];
    const rs_step *st = &g->steps[s];
    c->tw.n = 0; /* the step's PACK writes, put into staging at once (they never overlap: check_races) */
    for (uint32_t k = 0; k < st->nops && k < DESC_AHEAD; k++) desc_prefetch(g, &g->ops[st->op_begin + k]);
    for (uint32_t k = 0; k < st->nops; k++) {
        uint32_t oi = st->op_begin + k;
        const rs_op *o = &g->ops[oi];
        c->cur_rank = r, c->cur_step = s, c->cur_op = oi;
        if (k + DESC_AHEAD < st->nops) desc_prefetch(g, &g->ops[oi + DESC_AHEAD]);
        if (o->code == RS_OP_PACK) {
            rs_desc ddb_;
            const rs_desc *dd = rs_prog_desc(g, o->dst, &ddb_);
            uint64_t run = dd->count[dd->ndim - 1];
            if (!run) continue;
            uint64_t nrun = dbytes(dd) / run, idx[RS_DESC_MAX_DIMS] = {0};
            if (charge_runs(c, nrun)) return -1;
            for (uint64_t q = 0; q < nrun; q++) {
                uint64_t off = dd->offset;
                for (uint32_t i = 0; i + 1 < dd->ndim; i++) off += idx[i] * dd->stride[i];
                pent e = {off, q * run, run, o->src, r, rs_prog_desc_loc(g, o->src)};
                rs_vec_push(&c->tw, e);
                for (int i = (int)dd->ndim - 2; i >= 0; i--) {
                    if (++idx[i] < dd->count[i]) break;
                    idx[i] = 0;
                }
            }
        } else if (o->code == RS_OP_COPY) {
            if (dl_check(c, DJ_COPY, r, s, oi, dl_provs(c)->n)) return -1;
        }
    }
    int sorted = 1;
    for (size_t i = 1; i < c->tw.n && sorted; i++)
        if (c->tw.v[i - 1].start > c->tw.v[i].start) sorted = 0;
    return tassign_batch(c, r, sorted ? c->tw.v : pent_sort(c, c->tw.v, c->tw.n), c->tw.n);
}

/* What decomposing an UNPACK's destination reads first, DST_AHEAD UNPACKs before it is reached (its desc is
 * in cache by then: desc_prefetch): the binding's entry, the binding's first piece and that piece's
 * refinement. Each was a cache miss per UNPACK (the simulation moves from rank to rank): on issue 3's case
 * the destinations' decomposition took 0.27-0.38 s without, 0.16-0.20 s with. */
#define DST_AHEAD 3
static inline void dst_prefetch(const vctx *c, uint32_t r, const rs_rank_prog *g, const rs_op *o)
{
    uint32_t loc = rs_prog_desc_loc(g, o->dst);
    if (loc >= g->nbindings) return;
    const vbind *vb = &c->vb[r][loc];
    __builtin_prefetch(vb);
    if (!vb->n) return;
    const vpiece *v = &c->vp[c->vp_index[vb->begin]];
    __builtin_prefetch(v);
    if (v->built) __builtin_prefetch(c->dv.v + v->fdim);
}

static int do_phase3(vctx *c, uint32_t r, uint32_t s)
{
    const rs_rank_prog *g = &c->P->ranks[r];
    const rs_step *st = &g->steps[s];
    int rc = 0;
    for (uint32_t k = 0; k < st->nops && k < DESC_AHEAD; k++) desc_prefetch(g, &g->ops[st->op_begin + k]);
    for (uint32_t k = 0; k < st->nops && !rc; k++) {
        uint32_t oi = st->op_begin + k;
        const rs_op *o = &g->ops[oi];
        if (k + DESC_AHEAD < st->nops) desc_prefetch(g, &g->ops[oi + DESC_AHEAD]);
        if (!c->dp && k + DST_AHEAD < st->nops && g->ops[oi + DST_AHEAD].code == RS_OP_UNPACK)
            dst_prefetch(c, r, g, &g->ops[oi + DST_AHEAD]); /* (the checker's pieces, with one) */
        if (o->code != RS_OP_UNPACK) continue;
        c->cur_rank = r, c->cur_step = s, c->cur_op = oi;
        rs_desc sdb_, ddb_;
        const rs_desc *sd = rs_prog_desc(g, o->src, &sdb_), *dd = rs_prog_desc(g, o->dst, &ddb_);
        /* the staging runs of the source, in stream order, and what they hold */
        prov_vec *all = dl_provs(c);
        size_t pbeg = all->n;
        uint64_t run = sd->count[sd->ndim - 1];
        if (!run) {
            if (dbytes(dd)) c->cov_off = 1; /* coverage would decompose dd: it must do so itself */
            continue;
        }
        uint64_t nrun = dbytes(sd) / run, idx[RS_DESC_MAX_DIMS] = {0};
        if (charge_runs(c, nrun)) {
            rc = -1;
            break;
        }
        for (uint64_t q = 0; q < nrun && !rc; q++) {
            uint64_t off = sd->offset;
            for (uint32_t i = 0; i + 1 < sd->ndim; i++) off += idx[i] * sd->stride[i];
            if (tquery(c, r, off, off + run, &c->pv)) {
                char w[160];
                rc = vfail(c, "%s: reads staging bytes %llu..%llu that hold no data", op_where(c, w, sizeof w),
                           (unsigned long long)off, (unsigned long long)(off + run));
                break;
            }
            for (size_t i = 0; i < c->pv.n; i++) rs_vec_push(all, c->pv.v[i]);
            for (int i = (int)sd->ndim - 2; i >= 0; i--) {
                if (++idx[i] < sd->count[i]) break;
                idx[i] = 0;
            }
        }
        if (!rc) rc = dl_check(c, DJ_UNPACK, r, s, oi, pbeg);
    }
    return rc;
}

/* a matched SEND (rank a, op so) and RECV (rank b, op ro): move the content */
static int do_transfer(vctx *c, uint32_t a, uint32_t so, uint32_t b, uint32_t ro, uint32_t rstep)
{
    const rs_op *x = &c->P->ranks[a].ops[so], *y = &c->P->ranks[b].ops[ro];
    prov_vec *content = &c->msg;
    content->n = 0;
    if (!x->bytes) return 0;
    if (x->loc == RS_LOC_STAGING) {
        if (tquery(c, a, x->off, x->off + x->bytes, content)) {
            return vfail(c, "rank %u sends staging bytes %llu..%llu to rank %u that hold no data", a,
                         (unsigned long long)x->off, (unsigned long long)(x->off + x->bytes), b);
        }
    } else {
        prov p = {a, x->loc, RS_NONE, x->off, x->bytes};
        rs_vec_push(content, p);
    }
    int rc = 0;
    if (y->loc == RS_LOC_STAGING) {
        uint64_t at = y->off;
        c->tw.n = 0;
        for (size_t i = 0; i < content->n; i++) {
            const prov *q = &content->v[i];
            pent e = {at, q->pos, q->len, q->d, q->src, q->loc};
            if (q->len) rs_vec_push(&c->tw, e);
            at += q->len;
        }
        rc = tassign_batch(c, b, c->tw.v, c->tw.n);
    } else {
        /* straight into a binding (a zero-copy receive): a delivery check */
        c->cur_rank = b, c->cur_step = rstep, c->cur_op = ro;
        prov_vec *pv = dl_provs(c);
        size_t pbeg = pv->n;
        for (size_t i = 0; i < content->n; i++) rs_vec_push(pv, content->v[i]);
        rc = dl_check(c, DJ_RECV, b, rstep, ro, pbeg);
    }
    return rc;
}

/* A step in the simulation: what the steps around it read of it together (a partner's state and pending
 * count, its rank) in one record, one cache miss instead of one per array. */
typedef struct {
    uint32_t deps;      /* steps it still waits for: the previous one of its lane and its waits */
    uint32_t pending;   /* its SEND/RECV whose partner step had not started when it ran */
    uint32_t next_lane; /* the next step of its lane (RS_NONE: none) */
    uint32_t rank_st;   /* rank | state << 30 (0 not started, 1 started, 2 complete) */
} sim_step;
#define SIM_RANK(x) ((x).rank_st & ((1u << 30) - 1))
#define SIM_STATE(x) ((x).rank_st >> 30)

/* The partner steps' records a step's SEND and RECV read are cache misses (the partner is on another
 * rank): asked for SIM_AHEAD ops ahead, and the partner's op (when its step has started, which the record
 * says) two ops ahead. */
#define SIM_AHEAD 16
static inline void sim_prefetch(const sim_step *S, const rs_rank_prog *g, const uint32_t *pst, uint32_t oi)
{
    uint8_t code = g->ops[oi].code;
    if (code == RS_OP_SEND || code == RS_OP_RECV) __builtin_prefetch(&S[pst[oi]]);
}
static inline void partner_prefetch(const vctx *c, const vglob *G, const sim_step *S, const rs_rank_prog *g,
                                    const uint32_t *pop, const uint32_t *pst, uint32_t oi)
{
    uint8_t code = g->ops[oi].code;
    if (code != RS_OP_SEND && code != RS_OP_RECV) return;
    const sim_step *p = &S[pst[oi]];
    if (!SIM_STATE(*p)) return;
    uint32_t pr = SIM_RANK(*p);
    __builtin_prefetch(&c->P->ranks[pr].ops[pop[oi] - G->op_base[pr]]);
}
static int simulate(vctx *c, vglob *G)
{
    uint32_t ns = G->nsteps;
    sim_step *S = rs_xmalloc((ns + 1) * sizeof *S);
    /* waiters (CSR) */
    uint32_t *wbeg = rs_xcalloc(ns + 2, sizeof *wbeg);
    uint64_t nw = 0;
    for (uint32_t r = 0; r < c->world; r++) nw += c->P->ranks[r].nwaits;
    uint32_t *wl = rs_xmalloc((nw + 1) * sizeof *wl);
    for (uint32_t r = 0; r < c->world; r++) {
        const rs_rank_prog *g = &c->P->ranks[r];
        uint32_t last[2] = {RS_NONE, RS_NONE};
        for (uint32_t s = 0; s < g->nsteps; s++) {
            uint32_t gs = G->step_base[r] + s;
            S[gs] = (sim_step){0, 0, RS_NONE, r};
            int lane = g->steps[s].lane;
            if (last[lane] != RS_NONE) {
                S[last[lane]].next_lane = gs;
                S[gs].deps++;
            }
            last[lane] = gs;
            for (uint32_t w = 0; w < g->steps[s].nwaits; w++) {
                wbeg[G->step_base[r] + g->waits[g->steps[s].wait_begin + w] + 1]++;
                S[gs].deps++;
            }
        }
    }
    for (uint32_t i = 0; i < ns; i++) wbeg[i + 1] += wbeg[i];
    uint32_t *fill = rs_xmalloc((ns + 1) * sizeof *fill);
    memcpy(fill, wbeg, ns * sizeof *fill);
    for (uint32_t r = 0; r < c->world; r++) {
        const rs_rank_prog *g = &c->P->ranks[r];
        for (uint32_t s = 0; s < g->nsteps; s++)
            for (uint32_t w = 0; w < g->steps[s].nwaits; w++)
                wl[fill[G->step_base[r] + g->waits[g->steps[s].wait_begin + w]]++] = G->step_base[r] + s;
    }
    free(fill);
    /* Ready steps on a stack: the step a finished one releases (the next of its lane, a waiter of the same
     * rank) runs next, while that rank's program and staging state are in cache (a FIFO went from rank to
     * rank: DeepSeek-V3/H100's simulation 1.99 -> 1.70 s). Any order the dependencies allow gives the same
     * result: steps that may run at the same time touch no common staging byte (check_races). */
    uint32_t *queue = rs_xmalloc((ns + 1) * sizeof *queue);
    uint32_t qt = 0;
    for (uint32_t i = ns; i-- > 0;)
        if (!S[i].deps) queue[qt++] = i;
    uint32_t done = 0;
    int rc = 0;
    rs_vec(uint32_t) completed = {0};
    if (rs_threads(G->nops, DQ_MIN_OPS) > 1) dq_start(c);
    while (qt && !rc) {
        uint32_t gs = queue[--qt];
        uint32_t r = SIM_RANK(S[gs]), s = gs - G->step_base[r];
        const rs_rank_prog *g = &c->P->ranks[r];
        S[gs].rank_st = r | 1u << 30;
        const uint32_t *pop = G->partner + G->op_base[r], *pst = G->pstep + G->op_base[r];
        uint32_t ob = g->steps[s].op_begin, oe = ob + g->steps[s].nops;
        for (uint32_t oi = ob; oi < oe && oi < ob + SIM_AHEAD; oi++) sim_prefetch(S, g, pst, oi);
        rc = do_phase1(c, r, s);
        completed.n = 0;
        for (uint32_t oi = ob; oi < oe && !rc; oi++) {
            if (oi + SIM_AHEAD < oe) sim_prefetch(S, g, pst, oi + SIM_AHEAD);
            if (oi + 2 < oe) partner_prefetch(c, G, S, g, pop, pst, oi + 2);
            const rs_op *o = &g->ops[oi];
            if (o->code != RS_OP_SEND && o->code != RS_OP_RECV) continue;
            uint32_t ps = pst[oi];
            if (SIM_STATE(S[ps]) == 0) {
                S[gs].pending++;
                continue;
            }
            uint32_t po = pop[oi], pr = SIM_RANK(S[ps]);
            if (o->code == RS_OP_SEND) rc = do_transfer(c, r, oi, pr, po - G->op_base[pr], ps - G->step_base[pr]);
            else rc = do_transfer(c, pr, po - G->op_base[pr], r, oi, s);
            if (--S[ps].pending == 0) rs_vec_push(&completed, ps);
        }
        if (!rc && S[gs].pending == 0) rs_vec_push(&completed, gs);
        for (size_t i = 0; i < completed.n && !rc; i++) {
            uint32_t x = completed.v[i];
            uint32_t xr = SIM_RANK(S[x]);
            rc = do_phase3(c, xr, x - G->step_base[xr]);
            S[x].rank_st = xr | 2u << 30;
            done++;
            if (S[x].next_lane != RS_NONE && --S[S[x].next_lane].deps == 0) queue[qt++] = S[x].next_lane;
            for (uint32_t w = wbeg[x]; w < wbeg[x + 1]; w++)
                if (--S[wl[w]].deps == 0) queue[qt++] = wl[w];
        }
    }
    if (c->dp && dq_finish(c)) rc = -1; /* (a check's problem comes first: it was handed over earlier) */
    if (!rc && done < ns) {
        /* report the first rank that is stuck */
        for (uint32_t i = 0; i < ns; i++) {
            if (SIM_STATE(S[i]) == 2) continue;
            uint32_t r = SIM_RANK(S[i]), s = i - G->step_base[r];
            const rs_rank_prog *g = &c->P->ranks[r];
            rc = vfail(c, "deadlock: %u of %u steps complete; rank %u, step %u (%s lane) %s", done, ns, r, s,
                       g->steps[s].lane ? "NVL" : "NET",
                       SIM_STATE(S[i]) ? "waits for messages that never come" : "never starts");
            break;
        }
    }
    rs_vec_free(&completed);
    free(S);
    free(wbeg);
    free(wl);
    free(queue);
    return rc;
}

/* ---- coverage: per rank and destination piece, the written tensor boxes tile the block ---- */

/* tensor desc (bytes, element aligned) of piece v -> boxes */
static void td_boxes(vctx *c, const vpiece *v, const rs_desc *td, vbox_vec *out)
{
    const rs_tensor *t = &c->L->tensors[v->tensor];
    uint32_t nd = t->ndim, es = v->es;
    uint64_t T[VND + 1];
    T[nd] = 1;
    for (int d = (int)nd - 1; d >= 0; d--) T[d] = T[d + 1] * (uint64_t)t->shape[d];
    /* element units: dims (count, stride) with the innermost run as a stride-1 dim */
    uint64_t cnt[RS_DESC_MAX_DIMS], str[RS_DESC_MAX_DIMS];
    uint32_t n = td->ndim;
    for (uint32_t i = 0; i < n; i++) {
        cnt[i] = td->count[i];
        str[i] = td->stride[i] / es;
    }
    cnt[n - 1] /= es;
    str[n - 1] = 1;
    uint64_t g0 = td->offset / es;
    /* try: every dim is a run along tensor dims (stride T[d+1] for a unique d, no wrap) */
    int64_t start[VND];
    uint64_t g = g0;
    for (int d = (int)nd - 1; d >= 0; d--) {
        start[d] = (int64_t)(g % (uint64_t)t->shape[d]);
        g /= (uint64_t)t->shape[d];
    }
    vbox b;
    memset(&b, 0, sizeof b);
    b.vp = (uint32_t)(v - c->vp);
    for (uint32_t d = 0; d < nd; d++) {
        b.lo[d] = start[d];
        b.hi[d] = start[d] + 1;
    }
    int ok = 1;
    for (uint32_t i = 0; i < n && ok; i++) {
        /* dim i: count cnt[i] with stride str[i]: split into tensor dims from the innermost one it hits */
        uint64_t m = cnt[i];
        if (m <= 1) continue;
        int d = (int)nd - 1;
        while (d >= 0 && T[d + 1] < str[i]) d--;
        if (d < 0 || T[d + 1] != str[i]) {
            ok = 0;
            break;
        }
        while (m > 1) {
            if (d < 0) {
                ok = 0;
                break;
            }
            int64_t room = t->shape[d] - b.lo[d];
            if (b.hi[d] - b.lo[d] != 1) {
                ok = 0;
                break;
            }
            if ((int64_t)m <= room) {
                b.hi[d] = b.lo[d] + (int64_t)m;
                m = 1;
            } else if (b.lo[d] == 0 && m % (uint64_t)t->shape[d] == 0) {
                b.hi[d] = t->shape[d];
                m /= (uint64_t)t->shape[d];
                d--;
            } else {
                ok = 0; /* it wraps into the next index of an outer dim: split below */
                break;
            }
        }
    }
    if (ok) {
        rs_vec_push(out, b);
        return;
    }
    /* split: the outermost dim (cut where it runs past the end of a tensor dim, else index by index), or the
     * run in two along a row */
    if (n > 1) {
        /* the outermost dim steps along one tensor dim and runs past its end (the (expert, gate / up)
         * pairs of a stacked w13, one refinement dim): cut it there, a head up to the end of that dim, whole
         * runs of it, a tail, each a box with what is inside (a box per index was 3x the boxes on
         * DeepSeek-V3) */
        int d = (int)nd - 1;
        while (d >= 0 && T[d + 1] < str[0]) d--;
        if (cnt[0] > 2 && d >= 0 && T[d + 1] == str[0]) {
            uint64_t S = (uint64_t)t->shape[d], m0 = cnt[0], cut = 0;
            if (start[d]) cut = S - (uint64_t)start[d];
            else if (m0 > S && m0 % S) cut = m0 - m0 % S;
            if (cut > 0 && cut < m0) {
                rs_desc a = *td, bb = *td;
                a.count[0] = cut;
                bb.offset += cut * td->stride[0];
                bb.count[0] = m0 - cut;
                td_boxes(c, v, &a, out);
                td_boxes(c, v, &bb, out);
                return;
            }
        }
        rs_desc sub = *td;
        memmove(sub.count, sub.count + 1, (n - 1) * sizeof sub.count[0]);
        memmove(sub.stride, sub.stride + 1, (n - 1) * sizeof sub.stride[0]);
        sub.ndim = n - 1;
        for (uint64_t i = 0; i < td->count[0]; i++) {
            rs_desc s2 = sub;
            s2.offset = td->offset + i * td->stride[0];
            td_boxes(c, v, &s2, out);
        }
        return;
    }
    uint64_t elems = cnt[0];
    if (elems <= 1) return; /* one element always maps: unreachable */
    /* staircase: a head up to the next boundary it crosses, or whole units then a tail */
    uint64_t first = 0, U = 1;
    for (int d = (int)nd - 1; d >= 0 && !first; d--) {
        uint64_t U2 = U * (uint64_t)t->shape[d];
        if (g0 / U2 != (g0 + elems - 1) / U2) {
            if (g0 % U2) first = U2 - g0 % U2;
        } else if (g0 % U == 0 && elems % U && elems > U) {
            first = elems - elems % U;
        }
        U = U2;
    }
    if (!first || first >= elems) first = elems / 2;
    rs_desc a = *td, bb = *td;
    a.count[0] = first * es;
    bb.offset += first * es;
    bb.count[0] = (elems - first) * es;
    td_boxes(c, v, &a, out);
    td_boxes(c, v, &bb, out);
}

/* by piece, then by the start in dim 0 (all the disjointness sweep needs) */
static int vbox_cmp(const void *x, const void *y)
{
    const vbox *a = x, *b = y;
    if (a->vp != b->vp) return a->vp < b->vp ? -1 : 1;
    return a->lo[0] < b->lo[0] ? -1 : a->lo[0] > b->lo[0];
}

/* Sort boxes as vbox_cmp does (stably): a radix sort by (piece, start in dim 0) when that fits 64 bits. */
static void vbox_sort(vbox_vec *B)
{
    size_t n = B->n;
    uint64_t maxlo = 0;
    uint32_t maxvp = 0;
    int neg = 0;
    for (size_t i = 0; i < n; i++) {
        if (B->v[i].lo[0] < 0) neg = 1;
        else if ((uint64_t)B->v[i].lo[0] > maxlo) maxlo = (uint64_t)B->v[i].lo[0];
        if (B->v[i].vp > maxvp) maxvp = B->v[i].vp;
    }
    unsigned lbits = 0, vbits = 0;
    while (lbits < 64 && (maxlo >> lbits)) lbits++;
    while (vbits < 32 && (maxvp >> vbits)) vbits++;
    if (neg || lbits + vbits > 64) {
        qsort(B->v, n, sizeof *B->v, vbox_cmp);
        return;
    }
    uint64_t *keys = rs_xmalloc((n + 1) * sizeof *keys);
    for (size_t i = 0; i < n; i++) keys[i] = (vbits ? (uint64_t)B->v[i].vp << lbits : 0) | (uint64_t)B->v[i].lo[0];
    size_t *ord = rs_radix_order(keys, n, lbits + vbits);
    permute(B->v, n, sizeof *B->v, ord);
    free(ord);
    free(keys);
}

/* The simulation decomposed destination ld (on rank r), taking `budget` of the budget: keep its boxes. */
static void cov_collect(vctx *c, uint32_t r, const vseg_vec *ld, uint64_t budget)
{
    c->cov_budget += budget;
    if (c->cov_off) return;
    c->cbx.n = 0;
    for (size_t i = 0; i < ld->n; i++) td_boxes(c, &c->vp[ld->v[i].vp], &ld->v[i].td, &c->cbx);
    u32_vec *w = &c->cov[r];
    for (size_t i = 0; i < c->cbx.n; i++) {
        const vbox *b = &c->cbx.v[i];
        uint32_t nd = c->L->tensors[c->vp[b->vp].tensor].ndim;
        rs_vec_reserve(w, 1 + 2 * nd);
        w->v[w->n++] = b->vp;
        for (uint32_t d = 0; d < nd; d++) {
            if (b->lo[d] < 0 || b->hi[d] > (int64_t)UINT32_MAX) {
                c->cov_off = 1;
                return;
            }
            w->v[w->n++] = (uint32_t)b->lo[d];
            w->v[w->n++] = (uint32_t)b->hi[d];
        }
    }
}

/* Rank r's boxes: per piece disjoint, and the volumes add up to the block. quiet: a problem returns 1
 * without a message (the caller finds it again the slow way, to report it as always). */
static int cover_rank(vctx *c, uint32_t r, vbox_vec *B, uint8_t *seen, int quiet)
{
    vbox_vec boxes = *B;
    int rc = 0;
    int sorted = 1;
    for (size_t i = 1; i < boxes.n && sorted; i++)
        if (vbox_cmp(&boxes.v[i - 1], &boxes.v[i]) > 0) sorted = 0;
    if (!sorted) vbox_sort(&boxes);
    /* per piece: disjoint, and the volumes add up to the block */
    for (size_t i = 0; i < boxes.n && !rc;) {
        size_t j = i;
        uint32_t vpi = boxes.v[i].vp;
        const vpiece *v = &c->vp[vpi];
        uint32_t nd = c->L->tensors[v->tensor].ndim;
        uint64_t vol = 0;
        while (j < boxes.n && boxes.v[j].vp == vpi) {
            uint64_t e = 1;
            for (uint32_t d = 0; d < nd; d++) e *= (uint64_t)(boxes.v[j].hi[d] - boxes.v[j].lo[d]);
            vol += e;
            j++;
        }
        seen[vpi] = 1;
        /* disjointness: sweep along dim 0 with the boxes still open */
        for (size_t a = i; a < j && !rc; a++)
            for (size_t b = a + 1; b < j; b++) {
                const vbox *x = &boxes.v[a], *y = &boxes.v[b];
                if (nd && y->lo[0] >= x->hi[0]) break;
                int inter = 1;
                for (uint32_t d = 0; d < nd && inter; d++)
                    if (x->hi[d] <= y->lo[d] || y->hi[d] <= x->lo[d]) inter = 0;
                if (inter) {
                    if (quiet) return 1;
                    char el[200];
                    vseg sg;
                    memset(&sg, 0, sizeof sg);
                    sg.vp = vpi;
                    uint64_t gidx = 0;
                    const rs_tensor *t = &c->L->tensors[v->tensor];
                    for (uint32_t d = 0; d < nd; d++) {
                        int64_t q = x->lo[d] > y->lo[d] ? x->lo[d] : y->lo[d];
                        gidx = gidx * (uint64_t)t->shape[d] + (uint64_t)q;
                    }
                    sg.td.offset = gidx * v->es;
                    fmt_td(c, el, sizeof el, &sg);
                    rc = vfail(c, "rank %u: %s is written more than once", r, el);
                    break;
                }
            }
        if (!rc && vol != v->volume) {
            if (quiet) return 1;
            rc = vfail(c, "rank %u: tensor '%s' (piece %u): %llu of the block's %llu elements are written", r,
                       c->L->tensors[v->tensor].name, v->piece, (unsigned long long)vol,
                       (unsigned long long)v->volume);
        }
        i = j;
    }
    *B = boxes;
    return rc;
}

/* destination pieces never written at all */
static int cover_unwritten(vctx *c, const uint8_t *seen, int quiet)
{
    for (uint32_t i = 0; i < c->nvp; i++) {
        const vpiece *v = &c->vp[i];
        if (seen[i] || c->L->pieces[v->piece].side != RS_DST) continue;
        if (quiet) return 1;
        return vfail(c, "rank %u: tensor '%s' (piece %u): none of the block's %llu elements are written", v->rank,
                     c->L->tensors[v->tensor].name, v->piece, (unsigned long long)v->volume);
    }
    return 0;
}

/* coverage by decomposing every destination again (reports the first problem in rank and op order) */
static int coverage_decompose(vctx *c)
{
    vbox_vec boxes = {0};
    vseg_vec segs = {0};
    int rc = 0;
    uint8_t *seen = rs_xcalloc(c->nvp + 1, 1);
    for (uint32_t r = 0; r < c->world && !rc; r++) {
        const rs_rank_prog *g = &c->P->ranks[r];
        boxes.n = 0;
        for (uint32_t s = 0; s < g->nsteps && !rc; s++)
            for (uint32_t k = 0; k < g->steps[s].nops && !rc; k++) {
                uint32_t oi = g->steps[s].op_begin + k;
                const rs_op *o = &g->ops[oi];
                rs_desc dd;
                if (o->code == RS_OP_UNPACK || o->code == RS_OP_COPY) {
                    rs_prog_desc(g, o->dst, &dd);
                } else if (o->code == RS_OP_RECV && o->loc != RS_LOC_STAGING) {
                    dd = rs_desc_range(o->loc, o->off, o->bytes);
                } else {
                    continue;
                }
                if (!dbytes(&dd)) continue;
                c->cur_rank = r, c->cur_step = s, c->cur_op = oi;
                rc = decompose(c, r, dd.loc, &dd, 0, dbytes(&dd), &segs);
                for (size_t i = 0; i < segs.n && !rc; i++) td_boxes(c, &c->vp[segs.v[i].vp], &segs.v[i].td, &boxes);
            }
        if (rc) break;
        rc = cover_rank(c, r, &boxes, seen, 0);
    }
    if (!rc) rc = cover_unwritten(c, seen, 0);
    free(seen);
    rs_vec_free(&boxes);
    rs_vec_free(&segs);
    return rc;
}

/* cover_rank over ranks [r0, r1) from the boxes the simulation collected (quietly: bad is 1 on a problem). */
typedef struct {
    vctx *c;
    uint32_t r0, r1;
    uint8_t *seen;
    int bad;
} cover_part;

static void cover_ranks(cover_part *p)
{
    vctx *c = p->c;
    /* The boxes are put in cover_rank's order (piece, start in dim 0) as they are unpacked from the words,
     * by a radix order of their records: sorting the unpacked boxes moved 136 bytes per box twice. */
    rs_vec(uint64_t) keys = {0};
    rs_vec(size_t) at = {0};
    vbox_vec cbx = {0};
    int bad = 0;
    for (uint32_t r = p->r0; r < p->r1 && !bad; r++) {
        const u32_vec *w = &c->cov[r];
        keys.n = at.n = 0;
        uint32_t maxlo = 0, maxvp = 0;
        for (size_t i = 0; i < w->n;) {
            uint32_t vp = w->v[i], nd = c->L->tensors[c->vp[vp].tensor].ndim;
            uint32_t lo0 = nd ? w->v[i + 1] : 0;
            rs_vec_push(&at, i);
            rs_vec_push(&keys, (uint64_t)vp << 32 | lo0);
            if (vp > maxvp) maxvp = vp;
            if (lo0 > maxlo) maxlo = lo0;
            i += 1 + 2 * (size_t)nd;
        }
        int sorted = 1;
        for (size_t i = 1; i < keys.n && sorted; i++)
            if (keys.v[i - 1] > keys.v[i]) sorted = 0;
        size_t *ord = NULL;
        if (!sorted) {
            unsigned lbits = 0, vbits = 0;
            while (lbits < 32 && (maxlo >> lbits)) lbits++;
            while (vbits < 32 && (maxvp >> vbits)) vbits++;
            for (size_t i = 0; i < keys.n; i++) keys.v[i] = (keys.v[i] >> 32) << lbits | (keys.v[i] & 0xffffffffu);
            ord = rs_radix_order(keys.v, keys.n, lbits + vbits);
        }
        cbx.n = 0;
        rs_vec_reserve(&cbx, at.n);
        for (size_t k = 0; k < at.n; k++) {
            const uint32_t *x = w->v + at.v[ord ? ord[k] : k];
            vbox *b = &cbx.v[cbx.n++];
            b->vp = x[0];
            uint32_t nd = c->L->tensors[c->vp[b->vp].tensor].ndim;
            for (uint32_t d = 0; d < nd; d++) {
                b->lo[d] = x[1 + 2 * d];
                b->hi[d] = x[2 + 2 * d];
            }
        }
        free(ord);
        bad = cover_rank(c, r, &cbx, p->seen, 1);
    }
    rs_vec_free(&keys);
    rs_vec_free(&at);
    rs_vec_free(&cbx);
    p->bad = bad;
}

static void *cover_thread(void *arg)
{
    cover_ranks(arg);
    return NULL;
}

/* Coverage from the boxes the simulation collected: the same decompositions, so the same boxes (in another
 * order, which the verdict does not depend on). A problem, or a budget the decompositions again would
 * exhaust, goes the slow way, which reports it in its order. On two threads, the second takes the ranks of
 * the second half of the boxes (a rank's pieces, and so its marks in `seen`, are its own). */
static int coverage(vctx *c)
{
    if (!c->cov || c->cov_off || c->budget + c->cov_budget > 400000000ull) return coverage_decompose(c);
    uint8_t *seen = rs_xcalloc(c->nvp + 1, 1);
    cover_part a = {c, 0, c->world, seen, 0}, b = a;
    uint64_t words = 0, half = 0;
    for (uint32_t r = 0; r < c->world; r++) words += c->cov[r].n;
    pthread_t th;
    int two = 0;
    if (rs_threads(words, 1u << 20) > 1) {
        uint32_t h = 0;
        while (h < c->world && 2 * half < words) half += c->cov[h++].n;
        b.r0 = a.r1 = h;
        two = h < c->world && !rs_thread_start(&th, cover_thread, &b);
        if (!two) a.r1 = c->world;
    }
    cover_ranks(&a);
    if (two) pthread_join(th, NULL);
    int bad = a.bad || (two && b.bad);
    if (!bad) bad = cover_unwritten(c, seen, 1);
    free(seen);
    if (bad) return coverage_decompose(c);
    c->budget += c->cov_budget;
    return 0;
}

int rs_plan_verify_all(const rs_plan *P, char *err, size_t errlen) { return rs_plan_verify_all_work(P, err, errlen, NULL); }

int rs_plan_verify_all_work(const rs_plan *P, char *err, size_t errlen, uint64_t *work)
{
    return rs_plan_verify_all_timed(P, err, errlen, work, NULL);
}

/* The piece index, then the relay check (which reads the pieces only to name a problem's bytes), on a
 * thread of its own beside matching, on a context of its own. The relay check runs only when the race
 * checks, which come before it, pass without a second look (their runs taken from the budget first). */
typedef struct {
    vctx c;
    rs_verify_pre *pre; /* the index made ahead, taken here (NULL: made here) */
    int rc;         /* build_pieces' */
    int relays;     /* run the relay check after it */
    int relays_rc;  /* its verdict (its problem is in c.err only when rc is 0) */
} pieces_job;

/* The piece index made ahead (rs_plan_verify_pre_start): build_pieces on a thread of its own, from the
 * layout and every rank's bindings alone, while the planner builds the programs. */
struct rs_verify_pre {
    rs_layout L; /* a copy of the layout's fields (the planner moves the layout; its arrays stay put) */
    vctx c;
    pthread_t th;
    int rc;
};

static void *pre_main(void *arg)
{
    rs_verify_pre *v = arg;
    v->rc = build_pieces(&v->c);
    return NULL;
}

rs_verify_pre *rs_plan_verify_pre_start(const rs_plan *P, const rs_layout *L)
{
    uint64_t pairs = 0; /* (rank, piece) pairs, as build_pieces counts them at most */
    for (uint32_t pi = 0; pi < L->npieces; pi++) pairs += L->meshes[L->pieces[pi].mesh].nranks;
    if (!P->ranks || rs_threads(pairs, PRE_MIN_PAIRS) < 2) return NULL;
    rs_verify_pre *v = rs_xcalloc(1, sizeof *v);
    v->L = *L;
    v->c.P = P;
    v->c.L = &v->L;
    v->c.world = L->topo.world;
    v->c.errlen = 512;
    v->c.err = rs_xcalloc(v->c.errlen, 1);
    if (rs_thread_start(&v->th, pre_main, v)) {
        free(v->c.err);
        free(v);
        return NULL;
    }
    return v;
}

/* Wait for v's index and move it into c (its problem, if any, into c's error); v is freed. */
static int pre_take(rs_verify_pre *v, vctx *c)
{
    pthread_join(v->th, NULL);
    c->vp = v->c.vp, c->nvp = v->c.nvp, c->dv = v->c.dv, c->vp_index = v->c.vp_index, c->vb = v->c.vb;
    int rc = v->rc ? ctx_take_err(c, &v->c) : 0;
    free(v->c.err);
    free(v);
    return rc;
}

void rs_plan_verify_pre_free(rs_verify_pre *v)
{
    if (!v) return;
    vctx c;
    memset(&c, 0, sizeof c);
    c.world = v->c.world;
    pre_take(v, &c);
    free(c.vp);
    rs_vec_free(&c.dv);
    free(c.vp_index);
    if (c.vb)
        for (uint32_t r = 0; r < c.world; r++) free(c.vb[r]);
    free(c.vb);
}

static void *pieces_thread(void *arg)
{
    pieces_job *j = arg;
    j->rc = j->pre ? pre_take(j->pre, &j->c) : build_pieces(&j->c);
    if (!j->rc && j->relays) j->relays_rc = check_relays(&j->c);
    return NULL;
}

/* The per-rank checks of ranks [r0, r1) (rs_plan_verify_all_timed), on a context of their own. */
typedef struct {
    vctx c;
    uint32_t r0, r1;
    int rc, align_bad, races_bad;
    uint64_t race_runs;
} rank_part;

static void rank_checks(rank_part *p)
{
    vctx *c = &p->c;
    const rs_plan *P = c->P;
    u8_vec bk = {0};
    iv_vec fp = {0}, tmp = {0};
    size_vec at = {0};
    desc_vec dt = {0}; /* the rank's descriptors, unpacked once for the three checks */
    int rc = 0;
    for (uint32_t r = p->r0; r < p->r1 && !rc; r++) {
        const rs_rank_prog *g = &P->ranks[r];
        c->dt = NULL;
        if (g->loaded && g->ndescs && g->dpool && g->doff) {
            dt.n = 0;
            rs_vec_reserve(&dt, g->ndescs);
            for (uint32_t i = 0; i < g->ndescs; i++) rs_prog_desc(g, i, &dt.v[i]);
            c->dt = dt.v;
        }
        if (!g->loaded)
            rc = vfail(c, "rank %u's program was not loaded (whole-plan checks need every rank)", r);
        else if (rs_plan_verify_rank_unpacked(P, r, c->dt, c->err, c->errlen))
            rc = -1;
        if (rc) break;
        if (!p->align_bad) p->align_bad = check_alignment_rank(c, r, &bk, 1);
        /* (after an alignment problem, which fails the plan, the races are not needed) */
        if (!p->races_bad && !p->align_bad) p->races_bad = races_rank(c, r, &fp, &tmp, &at, &p->race_runs);
    }
    c->dt = NULL;
    rs_vec_free(&dt);
    rs_vec_free(&bk);
    rs_vec_free(&fp);
    rs_vec_free(&tmp);
    rs_vec_free(&at);
    p->rc = rc;
}

static void *rank_checks_thread(void *arg)
{
    rank_checks(arg);
    return NULL;
}

/* The race checks' second look, when the first one asks for it, then the relay check: here, or its verdict
 * from the pieces thread (pj), which ran it with the budget the races left. */
static int relays_after(vctx *c, int races_bad, uint64_t race_runs, const pieces_job *pj)
{
    if (races_bad || race_runs > c->runs_left) {
        if (check_races(c)) return -1;
    } else {
        c->runs_left -= race_runs;
    }
    if (!pj || !pj->relays) return check_relays(c);
    c->runs_left = pj->c.runs_left;
    return pj->relays_rc ? ctx_take_err(c, &pj->c) : 0;
}

static double wall_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int rs_plan_verify_all_timed(const rs_plan *P, char *err, size_t errlen, uint64_t *work, double *seconds)
{
    return rs_plan_verify_all_pre(P, NULL, err, errlen, work, seconds);
}

int rs_plan_verify_all_pre(const rs_plan *P, rs_verify_pre *pre, char *err, size_t errlen, uint64_t *work,
                           double *seconds)
{
    double t_ = seconds ? wall_now() : 0;
    if (seconds)
        for (int i = 0; i < RS_VERIFY_PARTS; i++) seconds[i] = 0;
    /* part k ends: its time, and the next one starts */
#define PART_DONE(k)                                                                               \
    do {                                                                                           \
        if (seconds) {                                                                             \
            double n_ = wall_now();                                                                \
            seconds[k] = n_ - t_;                                                                  \
            t_ = n_;                                                                               \
        }                                                                                          \
    } while (0)
    vctx c;
    memset(&c, 0, sizeof c);
    vglob G;
    memset(&G, 0, sizeof G);
    c.P = P;
    c.L = &P->layout;
    c.err = err;
    c.errlen = errlen;
    c.world = P->layout.topo.world;
    if (err && errlen) err[0] = 0;
    if (!P->ranks) {
        rs_plan_verify_pre_free(pre);
        return vfail(&c, "no programs");
    }
    /* Each rank's alignment and race checks run right after its structural check, while its program is
     * in cache (each pass over all programs streamed hundreds of MB from memory), quietly: the checks
     * between them come first, so a problem (or a run budget they would exceed) is left to the checks in
     * their order, which report it. The runs the race check takes are taken where it would run. On two
     * threads, the second takes the ranks of the plan's second half of ops; its problem is reported only
     * when the first half has none (the first in rank order, as on one thread). */
    int align_bad, races_bad;
    uint64_t race_runs;
    {
        c.reads_dst = rs_xcalloc(c.world + 1, 1);
        rank_part a, b;
        memset(&a, 0, sizeof a);
        a.c = c;
        a.r1 = c.world;
        uint64_t nops = 0, half = 0;
        for (uint32_t r = 0; r < c.world; r++) nops += P->ranks[r].nops;
        int two = 0;
        pthread_t th;
        if (rs_threads(nops, DQ_MIN_OPS) > 1) {
            uint32_t h = 0;
            while (h < c.world && 2 * half < nops) half += P->ranks[h++].nops;
            b = a;
            ctx_own_err(&b.c, &c);
            b.r0 = a.r1 = h;
            two = h < c.world && !rs_thread_start(&th, rank_checks_thread, &b);
            if (!two) {
                a.r1 = c.world;
                free(b.c.err);
            }
        }
        rank_checks(&a);
        int rc = a.rc;
        align_bad = a.align_bad, races_bad = a.races_bad, race_runs = a.race_runs;
        if (two) {
            pthread_join(th, NULL);
            if (!rc && b.rc) rc = ctx_take_err(&c, &b.c);
            align_bad |= b.align_bad, races_bad |= b.races_bad, race_runs += b.race_runs;
            free(b.c.err);
        }
        if (rc) {
            free(c.reads_dst);
            rs_plan_verify_pre_free(pre);
            return -1;
        }
    }
    PART_DONE(RS_VERIFY_RANKS);
    c.runs_left = RUNS_MAX;
    int rc = align_bad ? check_alignment(&c) : 0;
    if (!rc) {
        G.step_base = rs_xcalloc(c.world + 1, sizeof *G.step_base);
        G.op_base = rs_xcalloc(c.world + 1, sizeof *G.op_base);
        for (uint32_t r = 0; r < c.world; r++) {
            G.step_base[r + 1] = G.step_base[r] + P->ranks[r].nsteps;
            G.op_base[r + 1] = G.op_base[r] + P->ranks[r].nops;
        }
        G.nsteps = G.step_base[c.world];
        G.nops = G.op_base[c.world];
        G.op_step = rs_xmalloc((G.nops + 1) * sizeof *G.op_step);
        G.partner = rs_xmalloc((G.nops + 1) * sizeof *G.partner);
        G.pstep = rs_xmalloc((G.nops + 1) * sizeof *G.pstep);
        /* the piece index (which matching does not read) and the relay check are made beside it on two
         * threads; their problems are reported only when matching has none, in the order of one thread
         * (matching, pieces, races, relays). The races were checked with the ranks: when a problem or the
         * budget makes check_races look again, that fails the plan before the relays are reached. */
        pieces_job pj;
        pthread_t th;
        int two = rs_threads(G.nops, DQ_MIN_OPS) > 1;
        if (two) {
            pj.c = c;
            pj.pre = pre;
            pj.relays = !races_bad && race_runs <= c.runs_left;
            pj.relays_rc = 0;
            if (pj.relays) pj.c.runs_left -= race_runs;
            ctx_own_err(&pj.c, &c);
            if ((two = !rs_thread_start(&th, pieces_thread, &pj)) == 0) free(pj.c.err);
            else pre = NULL; /* (the thread takes it) */
        }
        rc = match_ops(&c, &G);
        PART_DONE(RS_VERIFY_MATCH);
        if (two) {
            pthread_join(th, NULL);
            c.vp = pj.c.vp, c.nvp = pj.c.nvp, c.dv = pj.c.dv, c.vp_index = pj.c.vp_index, c.vb = pj.c.vb;
            if (!rc && pj.rc) rc = ctx_take_err(&c, &pj.c);
            PART_DONE(RS_VERIFY_PIECES);
            if (!rc) rc = relays_after(&c, races_bad, race_runs, &pj);
            free(pj.c.err);
        } else {
            if (!rc && pre) rc = pre_take(pre, &c), pre = NULL;
            else if (!rc) rc = build_pieces(&c);
            PART_DONE(RS_VERIFY_PIECES);
            if (!rc) rc = relays_after(&c, races_bad, race_runs, NULL);
        }
    } else {
        PART_DONE(RS_VERIFY_MATCH);
        PART_DONE(RS_VERIFY_PIECES);
    }
    PART_DONE(RS_VERIFY_RELAYS);
    if (!rc) {
        c.pages = rs_xcalloc(c.world, sizeof *c.pages);
        c.npages = rs_xcalloc(c.world, sizeof *c.npages);
        c.pgshift = rs_xcalloc(c.world, sizeof *c.pgshift);
        c.dcache_mem = rs_xcalloc(DCACHE_SLOTS + 1, sizeof *c.dcache);
        c.dcache = (struct dcache_ent *)(((uintptr_t)c.dcache_mem + 63) & ~(uintptr_t)63);
        for (size_t i = 0; i < DCACHE_SLOTS; i++) c.dcache[i].d = RS_NONE;
        c.dmulti = rs_xcalloc((size_t)DCACHE_SLOTS * DM_SEGS, sizeof *c.dmulti); /* (pages touched when used) */
        c.cov = rs_xcalloc(c.world, sizeof *c.cov);
        rc = simulate(&c, &G);
    }
    PART_DONE(RS_VERIFY_SIMULATE);
    if (!rc) rc = coverage(&c);
    PART_DONE(RS_VERIFY_COVERAGE);
#undef PART_DONE
    if (work) *work = c.budget;
    rs_plan_verify_pre_free(pre); /* (not taken: an earlier check failed) */
    free_all(&c, &G);
    return rc ? -1 : 0;
}
