/* transport_cpu.c - the CPU threads transport: every rank of a plan is a set of threads of one process
 * (one per lane), buffers and staging in host memory, messages matched NCCL-style by local.c and copied by
 * the receiver straight from the sender's memory. How every test replays real plans without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "rt.h"
#include "util.h"

/* Per-executor state.
 * - Kernel emulation (RESHARD_CPU_EMULATE_KERNELS=1, tests): phase 1 and 3 go through the GPU kernel's
 *   descriptors and index math (kjob.c) instead of rs_host_copy, so CPU replays also check the GPU jobs.
 * - Receive fusion (default; RESHARD_CPU_FUSE=0 turns it off): when a message lands in staging bytes that no
 *   other step ever reads, the UNPACKs of that step reading them run at once from the sender's memory, and
 *   the staging copy is skipped: one copy per byte fewer, the same result (see docs/runtime.md). */
typedef struct {
    rs_kjob *k;
    uint64_t *ntiles; /* per batch, at its first job */
    uint32_t *fuse_begin, *fuse_n; /* per p2p: receives' fused UNPACK jobs in fuse_jobs */
    uint32_t *fuse_jobs;
    uint8_t *fused; /* per job: runs at receive time, skipped in phase 3 */
} cpu_state;

/* ---------------------------------------------------------------- staging byte intervals */

typedef struct {
    uint64_t a, b;
} iv;
typedef rs_vec(iv) ivs;

static int iv_cmp(const void *x, const void *y)
{
    const iv *p = x, *q = y;
    return p->a < q->a ? -1 : p->a > q->a;
}

static void ivs_norm(ivs *v)
{
    if (!v->n) return;
    qsort(v->v, v->n, sizeof *v->v, iv_cmp);
    size_t k = 0;
    for (size_t i = 0; i < v->n; i++) {
        if (v->v[i].a >= v->v[i].b) continue;
        if (k && v->v[i].a <= v->v[k - 1].b) {
            if (v->v[i].b > v->v[k - 1].b) v->v[k - 1].b = v->v[i].b;
        } else v->v[k++] = v->v[i];
    }
    v->n = k;
}

/* out += a - b (a, b normalized). */
static void ivs_sub_into(ivs *out, const ivs *a, const ivs *b)
{
    size_t j = 0;
    for (size_t i = 0; i < a->n; i++) {
        uint64_t lo = a->v[i].a, hi = a->v[i].b;
        while (j < b->n && b->v[j].b <= lo) j++;
        for (size_t k = j; k < b->n && b->v[k].a < hi && lo < hi; k++) {
            if (b->v[k].a > lo) rs_vec_push(out, ((iv){lo, b->v[k].a}));
            if (b->v[k].b > lo) lo = b->v[k].b;
        }
        if (lo < hi) rs_vec_push(out, ((iv){lo, hi}));
    }
}

static int ivs_hits(const ivs *v, uint64_t a, uint64_t b)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) { /* first interval ending after a */
        size_t mid = lo + (hi - lo) / 2;
        if (v->v[mid].b <= a) lo = mid + 1;
        else hi = mid;
    }
    return lo < v->n && v->v[lo].a < b;
}

static uint64_t desc_end(const rs_desc *d)
{
    uint64_t e = d->offset;
    rs_desc_extent(d, &e);
    return e;
}

/* Which receives into staging can be fused with their step's UNPACKs: the received bytes must be read by no
 * other step (every step's staging reads outside the bytes it writes itself, earlier in the step, are
 * collected in `foreign`), and every UNPACK of the step touching them must lie inside the one message. */
static int plan_fusion(rs_exec *x, cpu_state *c)
{
    const rs_rank_prog *g = x->prog;
    ivs foreign = {0}, w1 = {0}, w12 = {0}, r2 = {0}, r3 = {0};
    for (uint32_t s = 0; s < g->nsteps; s++) {
        const rs_step *st = &g->steps[s];
        w1.n = w12.n = r2.n = r3.n = 0;
        for (uint32_t k = 0; k < st->nops; k++) {
            const rs_op *op = &g->ops[st->op_begin + k];
            if (op->code == RS_OP_PACK) {
                rs_desc db;
                const rs_desc *d = rs_prog_desc(g, op->dst, &db);
                /* exact only when contiguous: count the write only then (conservative) */
                uint64_t n = rs_desc_bytes(d);
                if (desc_end(d) - d->offset == n) rs_vec_push(&w1, ((iv){d->offset, d->offset + n}));
            } else if (op->code == RS_OP_RECV && op->loc == RS_LOC_STAGING) {
                rs_vec_push(&w12, ((iv){op->off, op->off + op->bytes}));
            } else if (op->code == RS_OP_SEND && op->loc == RS_LOC_STAGING) {
                rs_vec_push(&r2, ((iv){op->off, op->off + op->bytes}));
            } else if (op->code == RS_OP_UNPACK) {
                rs_desc db;
                const rs_desc *d = rs_prog_desc(g, op->src, &db);
                rs_vec_push(&r3, ((iv){d->offset, desc_end(d)}));
            }
        }
        for (size_t i = 0; i < w1.n; i++) rs_vec_push(&w12, w1.v[i]);
        ivs_norm(&w1);
        ivs_norm(&w12);
        ivs_norm(&r2);
        ivs_norm(&r3);
        ivs_sub_into(&foreign, &r2, &w1);
        ivs_sub_into(&foreign, &r3, &w12);
    }
    ivs_norm(&foreign);
    uint32_t nf = 0;
    for (uint32_t s = 0; s < g->nsteps; s++) {
        const rs_xstep *xs = &x->xs[s];
        for (uint32_t i = 0; i < xs->np2p; i++) {
            uint32_t pi = xs->p2p + i;
            const rs_xp2p *p = &x->p2p[pi];
            c->fuse_begin[pi] = nf;
            if (p->send || p->loc != RS_LOC_STAGING || ivs_hits(&foreign, p->off, p->off + p->bytes)) continue;
            /* every UNPACK of the step overlapping the message must lie inside it */
            int ok = 1;
            uint32_t first = nf;
            for (uint32_t jx = 0; jx < xs->njob3 && ok; jx++) {
                uint32_t ji = xs->job3 + jx;
                rs_desc db;
                const rs_desc *d = rs_prog_desc(g, g->ops[x->jobs[ji].op].src, &db);
                uint64_t a = d->offset, b = desc_end(d);
                if (b <= p->off || a >= p->off + p->bytes) continue;
                if (a < p->off || b > p->off + p->bytes) ok = 0;
                else c->fuse_jobs[nf++] = ji;
            }
            if (!ok) {
                nf = first;
                continue;
            }
            c->fuse_n[pi] = nf - first;
            for (uint32_t k = first; k < nf; k++) c->fused[c->fuse_jobs[k]] = 1;
        }
    }
    rs_vec_free(&foreign);
    rs_vec_free(&w1);
    rs_vec_free(&w12);
    rs_vec_free(&r2);
    rs_vec_free(&r3);
    return (int)nf;
}

/* ---------------------------------------------------------------- primitives */

static rsResult_t cpu_prepare(rs_exec *x)
{
    cpu_state *e = rs_local_priv(x);
    if (!e || !e->k) return rsSuccess;
    for (uint32_t s = 0; s < x->prog->nsteps; s++) {
        const rs_xstep *xs = &x->xs[s];
        for (int phase = 1; phase <= 3; phase += 2) {
            uint32_t first = phase == 1 ? xs->job1 : xs->job3, n = phase == 1 ? xs->njob1 : xs->njob3;
            uint64_t tile = rs_kjob_tile_bytes(phase == 1 ? xs->bytes1 : xs->bytes3, 132), tiles = 0;
            for (uint32_t i = 0; i < n; i++) {
                const rs_xjob *j = &x->jobs[first + i];
                tiles += rs_kjob_build(&e->k[first + i], j->sp, j->s.ndim, j->s.count, j->s.stride, j->dp, j->d.ndim,
                                       j->d.count, j->d.stride, j->bytes, tile, tiles);
            }
            if (n) e->ntiles[first] = tiles;
        }
    }
    return rsSuccess;
}

static rsResult_t cpu_copies(rs_exec *x, int lane, uint32_t step, int phase)
{
    (void)lane;
    const rs_xstep *xs = &x->xs[step];
    uint32_t first = phase == 1 ? xs->job1 : xs->job3, n = phase == 1 ? xs->njob1 : xs->njob3;
    cpu_state *e = rs_local_priv(x);
    if (e && e->k) {
        rs_kjob_emulate(e->k + first, n, e->ntiles[first], RS_KJOB_THREADS);
        return rsSuccess;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (e && e->fused && e->fused[first + i]) continue;
        const rs_xjob *j = &x->jobs[first + i];
        rs_host_copy(j->dp, &j->d, j->sp, &j->s);
    }
    return rsSuccess;
}

static rsResult_t cpu_recv_copy(rs_exec *x, int lane, rs_msg *m, const rs_xp2p *p)
{
    (void)lane;
    cpu_state *e = rs_local_priv(x);
    uint32_t pi = (uint32_t)(p - x->p2p);
    if (e && e->fuse_n && e->fuse_n[pi]) {
        for (uint32_t k = 0; k < e->fuse_n[pi]; k++) {
            const rs_xjob *j = &x->jobs[e->fuse_jobs[e->fuse_begin[pi] + k]];
            rs_host_copy(j->dp, &j->d, m->ptr + (j->soff - p->off), &j->s);
        }
        return rsSuccess;
    }
    memcpy(p->ptr, m->ptr, m->bytes);
    return rsSuccess;
}

static void state_free(cpu_state *e)
{
    if (!e) return;
    free(e->k);
    free(e->ntiles);
    free(e->fuse_begin);
    free(e->fuse_n);
    free(e->fuse_jobs);
    free(e->fused);
    free(e);
}

static void cpu_destroy(rs_exec *x)
{
    cpu_state *e = x->tp ? rs_local_priv(x) : NULL;
    rs_local_destroy(x);
    state_free(e);
    if (x->staging_owned) free(x->staging);
    x->staging = NULL;
}

static const rs_local_ops cpu_local_ops = {
    .recv_copy = cpu_recv_copy,
};

static const rs_transport cpu_transport = {
    .name = "cpu",
    .kind = rsTransportCpu,
    .threaded = 1,
    .wait = rs_local_wait_step,
    .copies = cpu_copies,
    .group = rs_local_group_p2p,
    .done = rs_local_step_done,
    .prepare = cpu_prepare,
    .run = rs_local_run,
    .sync = rs_local_sync,
    .abort = rs_local_abort,
    .destroy = cpu_destroy,
};

static cpu_state *state_new(rs_exec *x)
{
    const char *emu = getenv("RESHARD_CPU_EMULATE_KERNELS"), *fuse = getenv("RESHARD_CPU_FUSE");
    int want_emu = emu && emu[0] == '1', want_fuse = !(fuse && fuse[0] == '0') && !want_emu;
    if (!want_emu && !want_fuse) return NULL;
    cpu_state *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    size_t nj = x->njobs + 1, np = x->np2p + 1;
    if (want_emu) {
        e->k = calloc(nj, sizeof *e->k);
        e->ntiles = calloc(nj, sizeof *e->ntiles);
        if (!e->k || !e->ntiles) goto oom;
    }
    if (want_fuse) {
        e->fuse_begin = calloc(np, sizeof *e->fuse_begin);
        e->fuse_n = calloc(np, sizeof *e->fuse_n);
        e->fuse_jobs = calloc(nj, sizeof *e->fuse_jobs);
        e->fused = calloc(nj, 1);
        if (!e->fuse_begin || !e->fuse_n || !e->fuse_jobs || !e->fused) goto oom;
        if (!plan_fusion(x, e)) { /* nothing to fuse on this rank */
            free(e->fuse_begin), free(e->fuse_n), free(e->fuse_jobs), free(e->fused);
            e->fuse_begin = e->fuse_n = e->fuse_jobs = NULL;
            e->fused = NULL;
        }
    }
    return e;
oom:
    state_free(e);
    return NULL;
}

rsResult_t rs_cpu_create(struct rsGroup *g, rs_exec *x)
{
    x->tr = &cpu_transport;
    x->cfg.stream = NULL;
    uint64_t need = x->prog->staging_bytes;
    if (x->cfg.staging) {
        if (x->cfg.stagingBytes < need) {
            rs_local_arrive_failed(g, (int)x->rank, rsInvalidArgument);
            return rs_rt_err(rsInvalidArgument, "rank %u: config.stagingBytes %zu is smaller than the plan's %llu",
                             x->rank, x->cfg.stagingBytes, (unsigned long long)need);
        }
        x->staging = x->cfg.staging;
    } else if (need) {
        /* 64-byte aligned, rounded up: aligned_alloc needs a multiple of the alignment. */
        x->staging = aligned_alloc(64, (need + 63) & ~(uint64_t)63);
        if (!x->staging) {
            rs_local_arrive_failed(g, (int)x->rank, rsSystemError);
            return rs_rt_err(rsSystemError, "rank %u: cannot allocate %llu bytes of staging", x->rank,
                             (unsigned long long)need);
        }
        x->staging_owned = 1;
    }
    cpu_state *e = state_new(x);
    rsResult_t r = rs_local_create(g, x, &cpu_local_ops);
    if (r != rsSuccess) {
        state_free(e);
        if (x->staging_owned) free(x->staging);
        x->staging = NULL;
        x->staging_owned = 0;
        return r;
    }
    rs_local_set_priv(x, e);
    if (x->prepared) {
        rs_exec_resolve(x);
        cpu_prepare(x);
    }
    return rsSuccess;
}
