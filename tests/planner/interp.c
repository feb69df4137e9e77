/* interp.c - reference executor on provenance tags (see interp.h). Deliberately simple and slow. */
#include "interp.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

typedef struct {
    uint64_t *tag;   /* per byte */
    uint8_t *writes; /* per byte, destination bindings */
    uint64_t n;
    int dst;
} mem;

typedef struct {
    const rs_plan *P;
    uint32_t world;
    mem **bind;    /* [world][nbindings] */
    mem *staging;  /* [world] */
    char *msg;
    size_t msglen;
    int failed;
    uint64_t rng;
} ictx;

static int fail(ictx *c, const char *fmt, ...)
{
    if (c->failed) return -1;
    c->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, c->msglen, fmt, ap);
    va_end(ap);
    return -1;
}

static uint64_t rnd(ictx *c)
{
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return c->rng;
}

static uint64_t tag_of(uint32_t t, uint64_t g, uint32_t b) { return (uint64_t)(t + 1) << 44 | g << 3 | b; }

static mem *loc_mem(ictx *c, uint32_t rank, uint32_t loc)
{
    if (loc == RS_LOC_STAGING) return &c->staging[rank];
    if (loc >= c->P->ranks[rank].nbindings) return NULL;
    return &c->bind[rank][loc];
}

/* Byte offsets of a descriptor's stream, in order (NULL when outside its memory). */
static uint64_t *desc_offsets(ictx *c, uint32_t rank, const rs_desc *d, uint64_t *n)
{
    mem *m = loc_mem(c, rank, d->loc);
    uint64_t end;
    if (!m || d->ndim < 1 || d->ndim > RS_DESC_MAX_DIMS || rs_desc_extent(d, &end) || end > m->n) return NULL;
    uint64_t tot = rs_desc_bytes(d);
    uint64_t *o = rs_xmalloc((tot + 1) * sizeof *o);
    uint64_t idx[RS_DESC_MAX_DIMS] = {0};
    for (uint64_t i = 0; i < tot; i++) {
        uint64_t off = d->offset;
        for (uint32_t k = 0; k < d->ndim; k++) off += idx[k] * d->stride[k];
        o[i] = off;
        for (int k = (int)d->ndim - 1; k >= 0; k--) {
            if (++idx[k] < d->count[k]) break;
            idx[k] = 0;
        }
    }
    *n = tot;
    return o;
}

static int copy_desc(ictx *c, uint32_t rank, const rs_desc *s, const rs_desc *d)
{
    uint64_t ns, nd;
    uint64_t *so = desc_offsets(c, rank, s, &ns), *dof = desc_offsets(c, rank, d, &nd);
    if (!so || !dof || ns != nd) {
        free(so);
        free(dof);
        return fail(c, "rank %u: bad descriptor", rank);
    }
    mem *ms = loc_mem(c, rank, s->loc), *md = loc_mem(c, rank, d->loc);
    uint64_t *tmp = rs_xmalloc((ns + 1) * sizeof *tmp);
    for (uint64_t i = 0; i < ns; i++) tmp[i] = ms->tag[so[i]];
    for (uint64_t i = 0; i < ns; i++) {
        md->tag[dof[i]] = tmp[i];
        if (md->writes && md->writes[dof[i]] < 255) md->writes[dof[i]]++;
    }
    free(tmp);
    free(so);
    free(dof);
    return 0;
}

/* element positions of piece p on a rank: calls f(buffer offset in bytes, global element index) */
static void piece_elems(const rs_layout *L, const rs_piece *p, const int64_t *lo, const int64_t *hi,
                        void (*f)(void *, uint64_t, uint64_t), void *arg)
{
    const rs_tensor *t = &L->tensors[p->tensor];
    const rs_buffer *b = &L->buffers[p->buffer];
    uint32_t es = (uint32_t)rs_dtype_size(t->dtype);
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->ndim; d++) n *= (uint64_t)(hi[d] - lo[d]);
    if (!n) return;
    for (uint64_t l = 0; l < n; l++) {
        /* block index of l, global index */
        uint64_t rem = l, g = 0, mul = 1;
        int64_t idx[RS_MAX_DIMS];
        for (int d = (int)t->ndim - 1; d >= 0; d--) {
            uint64_t e = (uint64_t)(hi[d] - lo[d]);
            idx[d] = lo[d] + (int64_t)(rem % e);
            rem /= e;
        }
        for (int d = (int)t->ndim - 1; d >= 0; d--) {
            g += (uint64_t)idx[d] * mul;
            mul *= (uint64_t)t->shape[d];
        }
        uint64_t off;
        if (b->ndim == 0) {
            off = l * es;
        } else {
            /* box-linear l -> buffer offset */
            off = 0;
            uint64_t r2 = l, str = es;
            for (int d = (int)b->ndim - 1; d >= 0; d--) {
                int64_t blo = p->box == RS_NONE ? 0 : L->i64[p->box + d];
                int64_t bhi = p->box == RS_NONE ? b->shape[d] : L->i64[p->box + b->ndim + d];
                uint64_t e = (uint64_t)(bhi - blo);
                off += ((r2 % e) + (uint64_t)blo) * str;
                r2 /= e;
                str *= (uint64_t)b->shape[d];
            }
        }
        f(arg, off, g);
    }
}

typedef struct {
    ictx *c;
    mem *m;
    uint32_t t, es, rank;
    int check;
    uint64_t bad;
} fill_arg;

static void fill_one(void *a, uint64_t off, uint64_t g)
{
    fill_arg *x = a;
    for (uint32_t b = 0; b < x->es; b++) {
        if (off + b >= x->m->n) {
            x->bad++;
            continue;
        }
        if (!x->check) {
            x->m->tag[off + b] = tag_of(x->t, g, b);
        } else {
            if (x->m->tag[off + b] != tag_of(x->t, g, b) || x->m->writes[off + b] != 1) {
                if (!x->bad)
                    fail(x->c, "rank %u tensor %u element %llu byte %u: tag %llx (want %llx), written %u times", x->rank,
                         x->t, (unsigned long long)g, b, (unsigned long long)x->m->tag[off + b],
                         (unsigned long long)tag_of(x->t, g, b), x->m->writes[off + b]);
                x->bad++;
            }
            x->m->writes[off + b] = 0; /* consumed: anything left over was written outside the pieces */
        }
    }
}

static int for_pieces(ictx *c, rs_side side, int check)
{
    const rs_layout *L = &c->P->layout;
    for (uint32_t pi = 0; pi < L->npieces; pi++) {
        const rs_piece *p = &L->pieces[pi];
        if (p->side != side) continue;
        const rs_mesh *m = &L->meshes[p->mesh];
        int64_t coord[RS_MAX_DIMS], lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
        for (uint32_t k = 0; k < m->nranks; k++) {
            rs_mesh_coord(m, k, coord);
            if (!rs_piece_holds(L, p, coord)) continue;
            rs_piece_block(L, p, coord, lo, hi);
            uint32_t rank = (uint32_t)m->ranks[k];
            uint32_t bi = rs_rank_binding(&c->P->ranks[rank], p->buffer);
            uint64_t n = 1;
            for (uint32_t d = 0; d < L->tensors[p->tensor].ndim; d++) n *= (uint64_t)(hi[d] - lo[d]);
            if (bi == RS_NONE) {
                if (n == 0) continue;
                return fail(c, "rank %u does not bind buffer '%s'", rank, L->buffers[p->buffer].name);
            }
            fill_arg a = {c, &c->bind[rank][bi], p->tensor, (uint32_t)rs_dtype_size(L->tensors[p->tensor].dtype),
                          rank, check, 0};
            piece_elems(L, p, lo, hi, fill_one, &a);
            if (a.bad) return fail(c, "piece %u on rank %u: %llu bad bytes", pi, rank, (unsigned long long)a.bad);
        }
    }
    return 0;
}

typedef struct {
    uint32_t rank, step, op;
} opref;

int rs_interp_run(const rs_plan *P, uint64_t seed, char *msg, size_t msglen)
{
    rs_desc sb_, db_; /* descriptors unpacked for copy_desc */
    ictx c;
    memset(&c, 0, sizeof c);
    c.P = P;
    c.msg = msg;
    c.msglen = msglen;
    c.world = P->layout.topo.world;
    c.rng = seed * 2654435761u + 88172645463325252ull;
    msg[0] = 0;
    const rs_layout *L = &P->layout;
    c.bind = rs_xcalloc(c.world, sizeof *c.bind);
    c.staging = rs_xcalloc(c.world, sizeof *c.staging);
    for (uint32_t r = 0; r < c.world; r++) {
        const rs_rank_prog *g = &P->ranks[r];
        c.bind[r] = rs_xcalloc(g->nbindings + 1, sizeof(mem));
        for (uint32_t i = 0; i < g->nbindings; i++) {
            mem *m = &c.bind[r][i];
            m->n = g->bindings[i].bytes;
            m->tag = rs_xcalloc(m->n + 1, sizeof *m->tag);
            m->dst = L->buffers[g->bindings[i].buffer].side == RS_DST;
            m->writes = rs_xcalloc(m->n + 1, 1);
        }
        c.staging[r].n = g->staging_bytes;
        c.staging[r].tag = rs_xcalloc(g->staging_bytes + 1, sizeof(uint64_t));
    }
    for_pieces(&c, RS_SRC, 0);

    /* matching: per lane and ordered pair, k-th send with k-th receive */
    uint32_t nsteps_total = 0;
    for (uint32_t r = 0; r < c.world; r++) nsteps_total += P->ranks[r].nsteps;
    uint32_t *step_base = rs_xcalloc(c.world + 1, sizeof *step_base);
    for (uint32_t r = 0; r < c.world; r++) step_base[r + 1] = step_base[r] + P->ranks[r].nsteps;
    /* partner[global op] = global op index of the match */
    uint32_t *op_base = rs_xcalloc(c.world + 1, sizeof *op_base);
    for (uint32_t r = 0; r < c.world; r++) op_base[r + 1] = op_base[r] + P->ranks[r].nops;
    uint32_t nops = op_base[c.world];
    uint32_t *partner = rs_xmalloc((nops + 1) * sizeof *partner);
    uint32_t *op_step = rs_xmalloc((nops + 1) * sizeof *op_step);
    for (uint32_t i = 0; i < nops; i++) partner[i] = UINT32_MAX;
    /* queues keyed by (lane, a, b): simple quadratic-free approach with per-pair counters in a hash */
    typedef struct {
        uint64_t key;
        rs_vec(uint32_t) s, r;
    } q_t;
    rs_vec(q_t) qs = {0};
    for (uint32_t r = 0; r < c.world; r++) {
        const rs_rank_prog *g = &P->ranks[r];
        for (uint32_t s = 0; s < g->nsteps; s++)
            for (uint32_t k = 0; k < g->steps[s].nops; k++) {
                uint32_t oi = g->steps[s].op_begin + k;
                const rs_op *o = &g->ops[oi];
                op_step[op_base[r] + oi] = step_base[r] + s;
                if (o->code != RS_OP_SEND && o->code != RS_OP_RECV) continue;
                uint32_t a = o->code == RS_OP_SEND ? r : o->peer, b = o->code == RS_OP_SEND ? o->peer : r;
                uint64_t key = (uint64_t)g->steps[s].lane << 62 | (uint64_t)a << 31 | b;
                size_t qi = 0;
                for (; qi < qs.n; qi++)
                    if (qs.v[qi].key == key) break;
                if (qi == qs.n) {
                    q_t q;
                    memset(&q, 0, sizeof q);
                    q.key = key;
                    rs_vec_push(&qs, q);
                }
                if (o->code == RS_OP_SEND) rs_vec_push(&qs.v[qi].s, op_base[r] + oi);
                else rs_vec_push(&qs.v[qi].r, op_base[r] + oi);
            }
    }
    for (size_t qi = 0; qi < qs.n && !c.failed; qi++) {
        if (qs.v[qi].s.n != qs.v[qi].r.n) fail(&c, "unmatched sends/receives");
        for (size_t k = 0; k < qs.v[qi].s.n && k < qs.v[qi].r.n; k++) {
            partner[qs.v[qi].s.v[k]] = qs.v[qi].r.v[k];
            partner[qs.v[qi].r.v[k]] = qs.v[qi].s.v[k];
        }
    }
    for (size_t qi = 0; qi < qs.n; qi++) {
        rs_vec_free(&qs.v[qi].s);
        rs_vec_free(&qs.v[qi].r);
    }
    rs_vec_free(&qs);

    /* simulation */
    uint8_t *state = rs_xcalloc(nsteps_total + 1, 1); /* 0 idle, 1 posted, 2 done */
    uint32_t *pending = rs_xcalloc(nsteps_total + 1, sizeof *pending);
    uint32_t *rank_of = rs_xmalloc((nsteps_total + 1) * sizeof *rank_of);
    for (uint32_t r = 0; r < c.world; r++)
        for (uint32_t s = step_base[r]; s < step_base[r + 1]; s++) rank_of[s] = r;
    uint32_t done = 0;
    while (!c.failed && done < nsteps_total) {
        /* postable steps */
        rs_vec(uint32_t) ready = {0};
        for (uint32_t r = 0; r < c.world; r++) {
            const rs_rank_prog *g = &P->ranks[r];
            int seen[2] = {0, 0};
            for (uint32_t s = 0; s < g->nsteps; s++) {
                uint32_t gs = step_base[r] + s;
                int lane = g->steps[s].lane;
                if (state[gs] == 2) continue;
                if (seen[lane]) continue;
                seen[lane] = 1;
                if (state[gs] != 0) continue;
                int ok = 1;
                for (uint32_t w = 0; w < g->steps[s].nwaits; w++) {
                    uint32_t t = g->waits[g->steps[s].wait_begin + w];
                    if (t >= g->nsteps || state[step_base[r] + t] != 2) ok = 0;
                }
                if (ok) rs_vec_push(&ready, gs);
            }
        }
        if (!ready.n) {
            rs_vec_free(&ready);
            fail(&c, "deadlock: %u of %u steps done", done, nsteps_total);
            break;
        }
        uint32_t gs = ready.v[rnd(&c) % ready.n];
        rs_vec_free(&ready);
        uint32_t r = rank_of[gs], s = gs - step_base[r];
        const rs_rank_prog *g = &P->ranks[r];
        const rs_step *st = &g->steps[s];
        state[gs] = 1;
        /* phase 1 */
        for (uint32_t k = 0; k < st->nops; k++) {
            const rs_op *o = &g->ops[st->op_begin + k];
            if (o->code == RS_OP_PACK || o->code == RS_OP_COPY) copy_desc(&c, r, rs_prog_desc(g, o->src, &sb_), rs_prog_desc(g, o->dst, &db_));
        }
        /* match with posted partners; transfer now */
        for (uint32_t k = 0; k < st->nops; k++) {
            uint32_t oi = st->op_begin + k;
            const rs_op *o = &g->ops[oi];
            if (o->code != RS_OP_SEND && o->code != RS_OP_RECV) continue;
            uint32_t pg = partner[op_base[r] + oi];
            if (pg == UINT32_MAX) {
                fail(&c, "rank %u: unmatched op", r);
                break;
            }
            uint32_t ps = op_step[pg];
            if (state[ps] == 0) {
                pending[gs]++;
                continue;
            }
            if (state[ps] == 2) {
                fail(&c, "matched op in a completed step");
                break;
            }
            /* both posted: move the bytes */
            uint32_t pr = rank_of[ps];
            const rs_op *po = &P->ranks[pr].ops[pg - op_base[pr]];
            const rs_op *snd = o->code == RS_OP_SEND ? o : po, *rcv = o->code == RS_OP_SEND ? po : o;
            uint32_t sr = o->code == RS_OP_SEND ? r : pr, rr = o->code == RS_OP_SEND ? pr : r;
            if (snd->bytes != rcv->bytes) {
                fail(&c, "size mismatch");
                break;
            }
            mem *ms = loc_mem(&c, sr, snd->loc), *md = loc_mem(&c, rr, rcv->loc);
            if (!ms || !md || snd->off + snd->bytes > ms->n || rcv->off + rcv->bytes > md->n) {
                fail(&c, "send/recv outside memory");
                break;
            }
            for (uint64_t i = 0; i < snd->bytes; i++) {
                md->tag[rcv->off + i] = ms->tag[snd->off + i];
                if (md->writes && md->writes[rcv->off + i] < 255) md->writes[rcv->off + i]++;
            }
            pending[ps]--;
            if (pending[ps] == 0 && state[ps] == 1) {
                /* partner's group complete: phase 3 */
                const rs_rank_prog *pgp = &P->ranks[pr];
                const rs_step *pst = &pgp->steps[ps - step_base[pr]];
                for (uint32_t q = 0; q < pst->nops; q++) {
                    const rs_op *x = &pgp->ops[pst->op_begin + q];
                    if (x->code == RS_OP_UNPACK) copy_desc(&c, pr, rs_prog_desc(pgp, x->src, &sb_), rs_prog_desc(pgp, x->dst, &db_));
                }
                state[ps] = 2;
                done++;
            }
        }
        if (pending[gs] == 0 && !c.failed) {
            for (uint32_t k = 0; k < st->nops; k++) {
                const rs_op *x = &g->ops[st->op_begin + k];
                if (x->code == RS_OP_UNPACK) copy_desc(&c, r, rs_prog_desc(g, x->src, &sb_), rs_prog_desc(g, x->dst, &db_));
            }
            state[gs] = 2;
            done++;
        }
    }
    /* destination check, then nothing else written */
    if (!c.failed) for_pieces(&c, RS_DST, 1);
    for (uint32_t r = 0; r < c.world && !c.failed; r++)
        for (uint32_t i = 0; i < P->ranks[r].nbindings && !c.failed; i++) {
            mem *m = &c.bind[r][i];
            for (uint64_t b = 0; b < m->n; b++)
                if (m->writes[b]) {
                    fail(&c, "rank %u binding %u byte %llu written outside the pieces (or a source written)", r, i,
                         (unsigned long long)b);
                    break;
                }
        }
    for (uint32_t r = 0; r < c.world; r++) {
        for (uint32_t i = 0; i < P->ranks[r].nbindings; i++) {
            free(c.bind[r][i].tag);
            free(c.bind[r][i].writes);
        }
        free(c.bind[r]);
        free(c.staging[r].tag);
    }
    free(c.bind);
    free(c.staging);
    free(step_base);
    free(op_base);
    free(partner);
    free(op_step);
    free(state);
    free(pending);
    free(rank_of);
    return c.failed ? -1 : 0;
}
