/* exec.c - the executor core shared by every transport: compiles a rank's program into per-step op lists
 * (copies of phase 1 and 3, sends/receives of phase 2), resolves them against the bindings, and walks the
 * steps of a lane (or of both lanes in program order) calling the transport's primitives. */
#define _GNU_SOURCE /* qsort_r, open_memstream */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_dump.h"
#include "rt.h"
#include "util.h"

/* ---------------------------------------------------------------- descriptors */

/* Canonical shape of a descriptor: unit dims dropped, dims contiguous with their inner neighbour merged,
 * innermost stride 1. A zero count anywhere gives ndim 0 (no bytes). */
static void canon(const rs_desc *d, rs_shape *s)
{
    memset(s, 0, sizeof *s);
    uint32_t n = 0;
    for (uint32_t i = 0; i < d->ndim; i++) {
        if (d->count[i] == 0) {
            s->ndim = 0;
            return;
        }
        if (d->count[i] == 1) continue;
        s->count[n] = d->count[i];
        s->stride[n] = d->stride[i];
        n++;
        while (n >= 2 && s->stride[n - 2] == s->count[n - 1] * s->stride[n - 1]) {
            s->count[n - 2] *= s->count[n - 1];
            s->stride[n - 2] = s->stride[n - 1];
            n--;
        }
    }
    if (n == 0 || s->stride[n - 1] != 1) { /* innermost run of one byte */
        if (n == RS_DESC_MAX_DIMS) {        /* cannot happen for verified descriptors (innermost stride 1) */
            s->ndim = 0;
            return;
        }
        s->count[n] = 1;
        s->stride[n] = 1;
        n++;
    }
    s->ndim = n;
}

/* A cursor over the runs of a shape: `run` is the offset of the current run, `left` bytes remain in it. */
typedef struct {
    const rs_shape *s;
    uint64_t idx[RS_DESC_MAX_DIMS];
    uint64_t run, left;
} cursor;

static void cur_init(cursor *c, const rs_shape *s)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    c->left = s->count[s->ndim - 1];
}

static void cur_next_run(cursor *c)
{
    const rs_shape *s = c->s;
    for (int i = (int)s->ndim - 2; i >= 0; i--) {
        if (++c->idx[i] < s->count[i]) {
            c->run += s->stride[i];
            break;
        }
        c->run -= (s->count[i] - 1) * s->stride[i];
        c->idx[i] = 0;
    }
    c->left = s->count[s->ndim - 1];
}

void rs_host_copy(char *dp, const rs_shape *d, const char *sp, const rs_shape *s)
{
    if (!d->ndim || !s->ndim) return;
    uint64_t total = 1;
    for (uint32_t i = 0; i < s->ndim; i++) total *= s->count[i];
    uint64_t sl = s->count[s->ndim - 1], dl = d->count[d->ndim - 1];
    if (s->ndim == 1 && d->ndim == 1) {
        memcpy(dp, sp, total);
        return;
    }
    cursor cs, cd;
    cur_init(&cs, s);
    cur_init(&cd, d);
    if (sl == dl) { /* same run length on both sides: one memcpy per run */
        for (uint64_t done = 0; done < total; done += sl) {
            memcpy(dp + cd.run, sp + cs.run, sl);
            if (done + sl < total) {
                cur_next_run(&cs);
                cur_next_run(&cd);
            }
        }
        return;
    }
    while (total) {
        uint64_t k = cs.left < cd.left ? cs.left : cd.left;
        memcpy(dp + cd.run + (dl - cd.left), sp + cs.run + (sl - cs.left), k);
        cs.left -= k;
        cd.left -= k;
        total -= k;
        if (!total) break;
        if (!cs.left) cur_next_run(&cs);
        if (!cd.left) cur_next_run(&cd);
    }
}

/* ---------------------------------------------------------------- compile */

const char *rs_exec_slot_name(const rs_exec *x, uint32_t k) { return x->slot_name[k]; }

static int cmp_by_name(const void *a, const void *b, void *arg)
{
    const rs_exec *x = arg;
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    int c = strcmp(rs_exec_slot_name(x, i), rs_exec_slot_name(x, j));
    if (c) return c;
    const rs_buffer *p = &x->P->layout.buffers[x->prog->bindings[x->slot_bind[i]].buffer];
    const rs_buffer *q = &x->P->layout.buffers[x->prog->bindings[x->slot_bind[j]].buffer];
    return (int)p->side - (int)q->side;
}

#define P_GROUP(x, loc) ((x)->P->layout.buffers[(x)->prog->bindings[loc].buffer].group)

/* Member bytes of a location on a buffer group, else 0 (plain bindings and staging). */
static uint64_t loc_mbytes(const rs_exec *x, uint32_t loc)
{
    return loc != RS_LOC_STAGING && P_GROUP(x, loc) ? x->mbytes[loc] : 0;
}

/* Jobs of a copy op: one, or on a buffer group one per piece inside a member (the verifier made sure
 * the op cuts into such pieces: rs_op_group_chunk). Returns 0 for a plan that does not. */
static uint64_t op_jobs(const rs_exec *x, const rs_desc *sd, const rs_desc *dd, uint64_t bytes, uint64_t *chunk)
{
    uint64_t ms = loc_mbytes(x, sd->loc), md = loc_mbytes(x, dd->loc);
    *chunk = bytes;
    if (!bytes || (!ms && !md)) return 1;
    uint64_t g = rs_op_group_chunk(sd, ms, dd, md);
    if (!g) return 0;
    *chunk = g;
    return bytes / g;
}

/* Piece t of descriptor d cut at `chunk` bytes (c: the cut form, k: its outer dims) as a job side. */
static uint64_t cut_piece(const rs_desc *c, uint32_t k, uint64_t t, rs_shape *s)
{
    uint64_t off = c->offset;
    for (int i = (int)k - 1; i >= 0; i--) {
        off += (t % c->count[i]) * c->stride[i];
        t /= c->count[i];
    }
    rs_desc in = *c;
    in.ndim = c->ndim - k;
    memmove(in.count, c->count + k, in.ndim * sizeof in.count[0]);
    memmove(in.stride, c->stride + k, in.ndim * sizeof in.stride[0]);
    canon(&in, s);
    return off;
}

static rsResult_t compile(rs_exec *x)
{
    const rs_rank_prog *g = x->prog;
    uint64_t njobs = 0;
    uint32_t np2p = 0;
    for (uint32_t i = 0; i < g->nops; i++) {
        const rs_op *op = &g->ops[i];
        int c = op->code;
        if (c == RS_OP_PACK || c == RS_OP_UNPACK || c == RS_OP_COPY) {
            uint64_t chunk, n = 1;
            if (x->has_groups && op->src < g->ndescs && op->dst < g->ndescs) {
                rs_desc sd, dd;
                n = op_jobs(x, rs_prog_desc(g, op->src, &sd), rs_prog_desc(g, op->dst, &dd), op->bytes, &chunk);
            }
            if (!n)
                return rs_rt_err(rsPlanInvalid, "rank %u op %u: does not cut at the members of its buffer group",
                                 x->rank, i);
            njobs += n;
        } else np2p++;
    }
    if (njobs > UINT32_MAX) return rs_rt_err(rsPlanInvalid, "rank %u: more than 2^32 copies", x->rank);
    x->xs = calloc(g->nsteps ? g->nsteps : 1, sizeof *x->xs);
    x->jobs = calloc(njobs ? njobs : 1, sizeof *x->jobs);
    x->p2p = calloc(np2p ? np2p : 1, sizeof *x->p2p);
    for (int l = 0; l < RS_NLANES; l++) x->lane_steps[l] = calloc(g->nsteps ? g->nsteps : 1, sizeof(uint32_t));
    if (!x->xs || !x->jobs || !x->p2p || !x->lane_steps[0] || !x->lane_steps[1])
        return rs_rt_err(rsSystemError, "out of memory compiling rank %u's program", x->rank);

    rsExecStats_t *st = &x->stats;
    for (uint32_t s = 0; s < g->nsteps; s++) {
        const rs_step *sp = &g->steps[s];
        rs_xstep *xs = &x->xs[s];
        if (sp->lane >= RS_NLANES || (uint64_t)sp->op_begin + sp->nops > g->nops ||
            (uint64_t)sp->wait_begin + sp->nwaits > g->nwaits)
            return rs_rt_err(rsPlanInvalid, "rank %u step %u: malformed step", x->rank, s);
        xs->lane = sp->lane;
        xs->lane_pos = x->nlane[sp->lane];
        x->lane_steps[sp->lane][x->nlane[sp->lane]++] = s;
        st->numSteps[sp->lane]++;
        if (sp->lane == RS_LANE_NVL) x->has_nvl = 1;
        xs->wait_begin = sp->wait_begin;
        xs->nwaits = sp->nwaits;
        for (uint32_t w = 0; w < sp->nwaits; w++) {
            uint32_t t = g->waits[sp->wait_begin + w];
            if (t >= s || g->steps[t].lane == sp->lane)
                return rs_rt_err(rsPlanInvalid, "rank %u step %u: wait for step %u is not an earlier step of the "
                                                "other lane", x->rank, s, t);
            x->xs[t].waited = 1;
        }
        /* Phase 1 jobs, then phase 3 jobs, then the sends/receives, each in program order. */
        for (int phase = 1; phase <= 3; phase += 2) {
            uint32_t first = x->njobs;
            for (uint32_t k = 0; k < sp->nops; k++) {
                uint32_t oi = sp->op_begin + k;
                const rs_op *op = &g->ops[oi];
                int c = op->code;
                if (!(phase == 1 ? (c == RS_OP_PACK || c == RS_OP_COPY) : c == RS_OP_UNPACK)) continue;
                if (op->src >= g->ndescs || op->dst >= g->ndescs)
                    return rs_rt_err(rsPlanInvalid, "rank %u op %u: descriptor index out of range", x->rank, oi);
                rs_desc sdb, ddb;
                const rs_desc *sd = rs_prog_desc(g, op->src, &sdb), *dd = rs_prog_desc(g, op->dst, &ddb);
                uint64_t bytes = rs_desc_bytes(sd);
                if (bytes != rs_desc_bytes(dd))
                    return rs_rt_err(rsPlanInvalid, "rank %u op %u: source and destination sizes differ", x->rank, oi);
                st->bytesCopied += bytes;
                if (dd->loc != RS_LOC_STAGING) st->destinationBytes += bytes;
                if (!bytes) continue;
                uint64_t chunk, n = x->has_groups ? op_jobs(x, sd, dd, bytes, &chunk) : 1;
                /* one job, or on a buffer group one per piece inside a member on both sides */
                rs_desc cs, cd;
                uint32_t ks = 0, kd = 0;
                if (n > 1 && (rs_desc_cut(sd, chunk, &cs, &ks) || rs_desc_cut(dd, chunk, &cd, &kd)))
                    return rs_rt_err(rsPlanInvalid, "rank %u op %u: does not cut at the members of its buffer group",
                                     x->rank, oi);
                for (uint64_t t = 0; t < n; t++) {
                    rs_xjob *j = &x->jobs[x->njobs++];
                    j->op = oi;
                    j->sloc = sd->loc;
                    j->dloc = dd->loc;
                    j->bytes = n > 1 ? chunk : bytes;
                    j->soff = n > 1 ? cut_piece(&cs, ks, t, &j->s) : (canon(sd, &j->s), sd->offset);
                    j->doff = n > 1 ? cut_piece(&cd, kd, t, &j->d) : (canon(dd, &j->d), dd->offset);
                }
                if (phase == 1) xs->bytes1 += bytes;
                else xs->bytes3 += bytes;
            }
            if (phase == 1) xs->job1 = first, xs->njob1 = x->njobs - first;
            else xs->job3 = first, xs->njob3 = x->njobs - first;
        }
        xs->p2p = x->np2p;
        for (uint32_t k = 0; k < sp->nops; k++) {
            uint32_t oi = sp->op_begin + k;
            const rs_op *op = &g->ops[oi];
            if (op->code != RS_OP_SEND && op->code != RS_OP_RECV) continue;
            if (op->peer >= x->world || op->peer == x->rank)
                return rs_rt_err(rsPlanInvalid, "rank %u op %u: bad peer %u", x->rank, oi, op->peer);
            int send = op->code == RS_OP_SEND;
            if (send) st->bytesSent[sp->lane] += op->bytes;
            else {
                st->bytesReceived[sp->lane] += op->bytes;
                if (op->loc != RS_LOC_STAGING) st->destinationBytes += op->bytes;
            }
            if (!op->bytes) continue; /* both sides skip an empty message */
            rs_xp2p *p = &x->p2p[x->np2p++];
            p->op = oi;
            p->send = (uint8_t)send;
            p->peer = op->peer;
            p->loc = op->loc;
            p->off = op->off;
            p->bytes = op->bytes;
            if (send) xs->nsend++;
            else xs->nrecv++;
        }
        xs->np2p = x->np2p - xs->p2p;
        if (xs->nsend > x->max_send) x->max_send = xs->nsend;
        if (xs->nrecv > x->max_recv) x->max_recv = xs->nrecv;
    }
    st->stagingBytes = g->staging_bytes;
    return rsSuccess;
}

rsResult_t rs_exec_new(struct rsPlan *plan, int rank, const rsConfig_t *cfg, rs_exec **out)
{
    *out = NULL;
    const rs_plan *P = &plan->P;
    if (rank < 0 || (uint32_t)rank >= P->layout.topo.world)
        return rs_rt_err(rsMismatch, "rank %d is outside the plan's world of %u ranks", rank, P->layout.topo.world);
    if (!P->ranks[rank].loaded)
        return rs_rt_err(rsMismatch, "the plan was loaded for rank %d, not for rank %d", plan->rank, rank);
    rs_exec *x = calloc(1, sizeof *x);
    if (!x) return rs_rt_err(rsSystemError, "out of memory creating an executor");
    x->plan = plan;
    rs_rt_plan_ref(plan);
    x->P = P;
    x->prog = &P->ranks[rank];
    x->rank = (uint32_t)rank;
    x->world = P->layout.topo.world;
    x->cfg = *cfg;
    x->fault_step = UINT32_MAX;
    pthread_mutex_init(&x->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&x->cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&x->abort_flag, 0);
    uint32_t nb = x->prog->nbindings;
    for (uint32_t i = 0; i < nb; i++)
        if (x->prog->bindings[i].buffer >= P->layout.nbuffers) {
            rs_exec_free(x);
            return rs_rt_err(rsPlanInvalid, "rank %d binding %u: bad buffer index", rank, i);
        }
    uint32_t ns = rs_rt_nslots(plan, x->prog);
    x->nslots = ns;
    x->slot_base = calloc(nb + 1, sizeof *x->slot_base);
    x->slot_bind = calloc(ns ? ns : 1, sizeof *x->slot_bind);
    x->mbytes = calloc(nb ? nb : 1, sizeof *x->mbytes);
    x->bind_ptr = calloc(ns ? ns : 1, sizeof *x->bind_ptr);
    x->bound = calloc(ns ? ns : 1, 1);
    x->by_name = calloc(ns ? ns : 1, sizeof *x->by_name);
    x->slot_name = calloc(ns ? ns : 1, sizeof *x->slot_name);
    if (!x->slot_base || !x->slot_bind || !x->mbytes || !x->bind_ptr || !x->bound || !x->by_name || !x->slot_name) {
        rs_exec_free(x);
        return rs_rt_err(rsSystemError, "out of memory creating an executor");
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < nb; i++) {
        const rs_binding *b = &x->prog->bindings[i];
        uint64_t n = rs_binding_members(&P->layout, b);
        x->has_groups |= P->layout.buffers[b->buffer].group != 0;
        x->slot_base[i] = k;
        x->mbytes[i] = rs_binding_member_bytes(&P->layout, b);
        for (uint64_t j = 0; j < n && k < ns; j++) {
            x->slot_name[k] = rs_rt_slot_name(plan, x->prog, i, j); /* names looked up once, not per comparison */
            x->slot_bind[k++] = i;
        }
    }
    x->slot_base[nb] = k;
    for (uint32_t i = 0; i < ns; i++) x->by_name[i] = i;
    qsort_r(x->by_name, ns, sizeof *x->by_name, cmp_by_name, x);
    rsResult_t r = compile(x);
    if (r != rsSuccess) {
        rs_exec_free(x);
        return r;
    }
    x->prepared = ns == 0;
    if (x->prepared) rs_exec_resolve(x);
    *out = x;
    return rsSuccess;
}

void rs_exec_free(rs_exec *x)
{
    if (!x) return;
    free(x->slot_base);
    free(x->slot_bind);
    free(x->mbytes);
    free(x->bind_ptr);
    free(x->bound);
    free(x->by_name);
    free(x->slot_name);
    free(x->xs);
    free(x->jobs);
    free(x->p2p);
    for (int l = 0; l < RS_NLANES; l++) free(x->lane_steps[l]);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    if (x->plan) rs_rt_plan_unref(x->plan);
    free(x);
}

/* Address of byte `off` of a location; on a buffer group, of the member holding it (every job and every
 * send or receive lies inside one member). */
static char *loc_ptr(rs_exec *x, uint32_t loc, uint64_t off)
{
    if (loc == RS_LOC_STAGING) return x->staging + off;
    uint32_t k = x->slot_base[loc];
    if (P_GROUP(x, loc)) {
        uint64_t m = x->mbytes[loc];
        return (char *)x->bind_ptr[k + off / m] + off % m;
    }
    return (char *)x->bind_ptr[k] + off;
}

void rs_exec_resolve(rs_exec *x)
{
    for (uint32_t i = 0; i < x->njobs; i++) {
        rs_xjob *j = &x->jobs[i];
        j->sp = loc_ptr(x, j->sloc, j->soff);
        j->dp = loc_ptr(x, j->dloc, j->doff);
    }
    for (uint32_t i = 0; i < x->np2p; i++) x->p2p[i].ptr = loc_ptr(x, x->p2p[i].loc, x->p2p[i].off);
}

/* ---------------------------------------------------------------- walk */

rsResult_t rs_exec_fail(rs_exec *x, rsResult_t code, const char *fmt, ...)
{
    char msg[RS_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&x->mu);
    if (!x->run_res) {
        x->run_res = code;
        snprintf(x->run_err, sizeof x->run_err, "%s", msg);
    }
    pthread_mutex_unlock(&x->mu);
    return rs_rt_err(code, "%s", msg);
}

void rs_exec_inject_fault(rsExec_t x, uint32_t step) { x->fault_step = step; }

static const char *lane_name(int l) { return l == RS_LANE_NVL ? "NVL" : "NET"; }

/* Trace lines come from the shared plan printer (common/plan_dump.c), one log line each. */
static void trace_lines(const rs_exec *x, char *buf)
{
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        rs_rt_log(RS_LOG_TRACE, (int)x->rank, "%s", line);
}

void rs_exec_trace_op(const rs_exec *x, uint32_t step, uint32_t oi)
{
    (void)step;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return;
    rs_plan_dump_op(f, x->P, x->rank, oi);
    fclose(f);
    trace_lines(x, buf);
    free(buf);
}

static void trace_step(const rs_exec *x, uint32_t s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return;
    rs_plan_dump_step(f, x->P, x->rank, s);
    const rs_step *sp = &x->prog->steps[s];
    for (uint32_t i = 0; i < sp->nops; i++) rs_plan_dump_op(f, x->P, x->rank, sp->op_begin + i);
    fclose(f);
    trace_lines(x, buf);
    free(buf);
}

/* One step: cross-lane waits, phase 1 (PACK, COPY), phase 2 (one group of sends and receives), phase 3
 * (UNPACK), completion. */
static rsResult_t step(rs_exec *x, uint32_t s, int trace)
{
    const rs_transport *t = x->tr;
    const rs_xstep *xs = &x->xs[s];
    int l = xs->lane;
    for (uint32_t w = 0; w < xs->nwaits; w++) RS_TRY(t->wait(x, l, x->prog->waits[xs->wait_begin + w]));
    if (trace) trace_step(x, s);
    if (xs->njob1) RS_TRY(t->copies(x, l, s, 1));
    if (s == x->fault_step)
        return rs_rt_err(rsTransportError, "rank %u step %u (%s): injected transport error", x->rank, s, lane_name(l));
    if (xs->np2p) RS_TRY(t->group(x, l, s));
    if (xs->njob3) RS_TRY(t->copies(x, l, s, 3));
    return t->done(x, l, s);
}

rsResult_t rs_exec_walk(rs_exec *x, int lane, const atomic_int *stop)
{
    const rs_transport *t = x->tr;
    uint32_t n = lane < 0 ? x->prog->nsteps : x->nlane[lane];
    int trace = rs_rt_log_level() >= RS_LOG_TRACE;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = lane < 0 ? i : x->lane_steps[lane][i];
        if (stop && atomic_load(stop))
            return rs_rt_err(rsAborted, "rank %u: run aborted before step %u", x->rank, s);
        if (t->mark) t->mark(x, s, 1);
        rsResult_t r = step(x, s, trace);
        if (t->mark) t->mark(x, s, 0);
        if (r != rsSuccess) return r;
    }
    return rsSuccess;
}
