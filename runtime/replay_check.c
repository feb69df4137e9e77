/* replay_check.c - fills source buffers with a function of (tensor, global index), checks every
 * destination element after a replay (and that bytes outside the pieces and the sources are untouched),
 * using the placement math of common/layout.c on the layout stored in the plan; and a driver that
 * replays a whole plan on an in-process transport. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "rt.h"
#include "util.h"

uint64_t rs_replay_value(uint32_t t, uint64_t g)
{
    uint64_t z = g + 0x9e3779b97f4a7c15ull * ((uint64_t)t + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

const rs_plan *rs_replay_plan(rsPlan_t plan) { return &plan->P; }

static void report(rs_replay_report *rep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(rs_replay_report *rep, const char *fmt, ...)
{
    if (rep->nreport >= RS_REPLAY_MAX_REPORT) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep->report[rep->nreport++], sizeof rep->report[0], fmt, ap);
    va_end(ap);
}

static void fmt_index(char *out, size_t n, uint32_t nd, const int64_t *shape, uint64_t lin)
{
    int64_t c[RS_MAX_DIMS];
    for (int d = (int)nd - 1; d >= 0; d--) {
        c[d] = shape[d] ? (int64_t)(lin % (uint64_t)shape[d]) : 0;
        lin = shape[d] ? lin / (uint64_t)shape[d] : 0;
    }
    size_t k = (size_t)snprintf(out, n, "[");
    for (uint32_t d = 0; d < nd && k < n; d++) k += (size_t)snprintf(out + k, n - k, "%s%lld", d ? ", " : "", (long long)c[d]);
    if (k < n) snprintf(out + k, n - k, "]");
}

enum { MODE_FILL, MODE_CHECK_DST, MODE_CHECK_SRC };

typedef struct {
    const rs_plan *P;
    uint32_t rank;
    void *const *bufs;
    uint8_t **cover; /* per binding: element bitmap of destination coverage */
    rs_replay_report *rep;
} walk_ctx;

/* Visit every element of piece p on `rank` (block read row-major fills the buffer box row-major). */
static void walk_piece(walk_ctx *c, uint32_t pi, const int64_t *coord, int mode)
{
    const rs_layout *L = &c->P->layout;
    const rs_piece *p = &L->pieces[pi];
    const rs_tensor *t = &L->tensors[p->tensor];
    const rs_rank_prog *g = &c->P->ranks[c->rank];
    int64_t lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
    int64_t cnt = rs_piece_block(L, p, coord, lo, hi);
    const rs_buffer *buf = &L->buffers[p->buffer];
    uint32_t bi = rs_rank_binding(g, p->buffer);
    if (bi == RS_NONE) {
        if (cnt > 0 || buf->ndim > 0) {
            c->rep->plan_errors++;
            report(c->rep, "rank %u: the plan has no binding for buffer '%s' (piece of tensor '%s')", c->rank,
                   buf->name, t->name);
        }
        return;
    }
    if (cnt <= 0) return;
    int64_t shape[RS_MAX_DIMS], blo[RS_MAX_DIMS], bhi[RS_MAX_DIMS];
    uint32_t bnd = rs_piece_buffer_box(L, p, lo, hi, shape, blo, bhi);
    const rs_binding *b = &g->bindings[bi];
    int64_t bcnt = 1;
    for (uint32_t d = 0; d < bnd; d++) bcnt *= bhi[d] - blo[d];
    uint64_t es = (uint64_t)rs_dtype_size(t->dtype);
    uint64_t belems = 1;
    for (uint32_t d = 0; d < bnd; d++) belems *= (uint64_t)shape[d];
    if (bcnt != cnt || belems * es != b->bytes) {
        c->rep->plan_errors++;
        report(c->rep, "rank %u buffer '%s': piece of tensor '%s' has %lld elements for a box of %lld, or the buffer "
                       "is %llu bytes instead of %llu", c->rank, buf->name, t->name, (long long)cnt, (long long)bcnt,
               (unsigned long long)b->bytes, (unsigned long long)(belems * es));
        return;
    }
    uint8_t *mem = c->bufs[bi];
    uint8_t *cover = c->cover ? c->cover[bi] : NULL;
    /* Scalars (0 dims) are one element: walk them as a dim of extent 1. */
    uint32_t tn = t->ndim;
    int64_t tshape[RS_MAX_DIMS];
    memcpy(tshape, t->shape, sizeof tshape);
    if (tn == 0) tn = 1, lo[0] = 0, hi[0] = 1, tshape[0] = 1;
    if (bnd == 0) bnd = 1, blo[0] = 0, bhi[0] = 1, shape[0] = 1;
    /* Row-major strides of the tensor and of the buffer, in elements. */
    uint64_t ts[RS_MAX_DIMS], bs[RS_MAX_DIMS];
    for (int d = (int)tn - 1; d >= 0; d--) ts[d] = d == (int)tn - 1 ? 1 : ts[d + 1] * (uint64_t)tshape[d + 1];
    for (int d = (int)bnd - 1; d >= 0; d--) bs[d] = d == (int)bnd - 1 ? 1 : bs[d + 1] * (uint64_t)shape[d + 1];
    int64_t ti[RS_MAX_DIMS] = {0}, bi2[RS_MAX_DIMS] = {0};
    uint64_t tleft = (uint64_t)(hi[tn - 1] - lo[tn - 1]), bleft = (uint64_t)(bhi[bnd - 1] - blo[bnd - 1]);
    uint64_t remaining = (uint64_t)cnt;
    while (remaining) {
        uint64_t gidx = 0, off = 0;
        for (uint32_t d = 0; d < tn; d++) gidx += (uint64_t)(lo[d] + ti[d]) * ts[d];
        for (uint32_t d = 0; d < bnd; d++) off += (uint64_t)(blo[d] + bi2[d]) * bs[d];
        uint64_t k = tleft < bleft ? tleft : bleft;
        for (uint64_t i = 0; i < k; i++) {
            uint64_t v = rs_replay_value(p->tensor, gidx + i);
            uint8_t *e = mem + (off + i) * es;
            if (mode == MODE_FILL) {
                for (uint64_t j = 0; j < es; j++) e[j] = (uint8_t)(v >> (8 * j));
                continue;
            }
            int ok = 1;
            for (uint64_t j = 0; j < es; j++) ok &= e[j] == (uint8_t)(v >> (8 * j));
            if (mode == MODE_CHECK_DST) {
                c->rep->checked++;
                if (cover) cover[(off + i) >> 3] |= (uint8_t)(1u << ((off + i) & 7));
            }
            if (ok) continue;
            uint64_t got = 0;
            for (uint64_t j = 0; j < es; j++) got |= (uint64_t)e[j] << (8 * j);
            uint64_t want = es >= 8 ? v : v & ((1ull << (8 * es)) - 1);
            char ti_s[128], bi_s[128];
            fmt_index(ti_s, sizeof ti_s, tn, tshape, gidx + i);
            fmt_index(bi_s, sizeof bi_s, bnd, shape, off + i);
            if (mode == MODE_CHECK_DST) c->rep->wrong++;
            else c->rep->src_changed++;
            report(c->rep, "rank %u %s '%s'%s (tensor '%s'%s): got 0x%0*llx, want 0x%0*llx", c->rank,
                   mode == MODE_CHECK_DST ? "destination" : "source (changed!)", buf->name, bi_s, t->name, ti_s,
                   (int)(2 * es), (unsigned long long)got, (int)(2 * es), (unsigned long long)want);
        }
        remaining -= k;
        if (!remaining) break;
        tleft -= k;
        bleft -= k;
        if (!tleft) { /* next row of the block */
            for (int d = (int)tn - 2; d >= 0; d--) {
                if (++ti[d] < hi[d] - lo[d]) break;
                ti[d] = 0;
            }
            ti[tn - 1] = 0;
            tleft = (uint64_t)(hi[tn - 1] - lo[tn - 1]);
        } else ti[tn - 1] += (int64_t)k;
        if (!bleft) {
            for (int d = (int)bnd - 2; d >= 0; d--) {
                if (++bi2[d] < bhi[d] - blo[d]) break;
                bi2[d] = 0;
            }
            bi2[bnd - 1] = 0;
            bleft = (uint64_t)(bhi[bnd - 1] - blo[bnd - 1]);
        } else bi2[bnd - 1] += (int64_t)k;
    }
}

/* Every piece of one side held on c->rank. */
static void walk_rank(walk_ctx *c, int side, int mode)
{
    const rs_layout *L = &c->P->layout;
    int64_t coord[RS_MAX_DIMS];
    for (uint32_t t = 0; t < L->ntensors; t++) {
        const rs_tensor *T = &L->tensors[t];
        uint32_t first = T->piece_begin + (side == RS_DST ? T->nsrc : 0);
        uint32_t n = side == RS_DST ? T->ndst : T->nsrc;
        for (uint32_t k = 0; k < n; k++) {
            const rs_piece *p = &L->pieces[first + k];
            const rs_mesh *m = &L->meshes[p->mesh];
            int32_t lin = m->index_of[c->rank];
            if (lin < 0) continue;
            rs_mesh_coord(m, (uint32_t)lin, coord);
            if (!rs_piece_holds(L, p, coord)) continue;
            walk_piece(c, first + k, coord, mode);
        }
    }
}

void rs_replay_fill(const rs_plan *P, uint32_t rank, void *const *bufs)
{
    const rs_rank_prog *g = &P->ranks[rank];
    for (uint32_t i = 0; i < g->nbindings; i++) {
        int dst = P->layout.buffers[g->bindings[i].buffer].side == RS_DST;
        memset(bufs[i], dst ? RS_REPLAY_DST_FILL : RS_REPLAY_SRC_FILL, g->bindings[i].bytes);
    }
    rs_replay_report rep;
    memset(&rep, 0, sizeof rep);
    walk_ctx c = {P, rank, bufs, NULL, &rep};
    walk_rank(&c, RS_SRC, MODE_FILL);
}

void rs_replay_check(const rs_plan *P, uint32_t rank, void *const *bufs, rs_replay_report *rep)
{
    const rs_rank_prog *g = &P->ranks[rank];
    uint8_t **cover = calloc(g->nbindings ? g->nbindings : 1, sizeof *cover);
    if (!cover) rs_die("out of memory");
    for (uint32_t i = 0; i < g->nbindings; i++) {
        const rs_buffer *b = &P->layout.buffers[g->bindings[i].buffer];
        if (b->side != RS_DST) continue;
        uint64_t es = (uint64_t)rs_dtype_size(b->dtype);
        cover[i] = rs_xcalloc(g->bindings[i].bytes / es / 8 + 1, 1);
    }
    walk_ctx c = {P, rank, bufs, cover, rep};
    walk_rank(&c, RS_DST, MODE_CHECK_DST);
    walk_rank(&c, RS_SRC, MODE_CHECK_SRC);
    /* Bytes outside every piece: destinations untouched, sources unchanged. */
    for (uint32_t i = 0; i < g->nbindings; i++) {
        const rs_buffer *b = &P->layout.buffers[g->bindings[i].buffer];
        const uint8_t *mem = bufs[i];
        if (b->side != RS_DST) continue;
        uint64_t es = (uint64_t)rs_dtype_size(b->dtype), n = g->bindings[i].bytes;
        for (uint64_t off = 0; off < n; off++) {
            uint64_t e = off / es;
            if (cover[i][e >> 3] & (1u << (e & 7))) {
                off = (e + 1) * es - 1;
                continue;
            }
            if (mem[off] != RS_REPLAY_DST_FILL) {
                rep->untouched++;
                report(rep, "rank %u destination '%s' byte %llu outside every piece was overwritten (0x%02x)", rank,
                       b->name, (unsigned long long)off, mem[off]);
            }
        }
    }
    for (uint32_t i = 0; i < g->nbindings; i++) free(cover[i]);
    free(cover);
}

/* ---------------------------------------------------------------- whole replays */

typedef struct {
    rsPlan_t plan;
    rsGroup_t group;
    uint32_t rank;
    const rs_replay_opts *o;
    rsExec_t exec;
    rsResult_t res;
    char err[1024];
    void *staging; /* caller staging (RESHARD_REPLAY_EXACT_STAGING), freed after the executor */
} create_arg;

static void *create_main(void *arg)
{
    create_arg *a = arg;
    rsConfig_t cfg = RS_CONFIG_INITIALIZER;
    cfg.timeoutMs = a->o->timeout_ms;
    /* RESHARD_REPLAY_EXACT_STAGING=1 (set by the sanitize build's test run, tests/hard/sanitize.sh): on the
     * CPU transport each rank's staging is a caller buffer of exactly rsPlanStagingBytes, so that
     * AddressSanitizer sees an access past it (the transport's own is rounded up to 64 bytes). */
    const char *exact = getenv("RESHARD_REPLAY_EXACT_STAGING");
    size_t n = 0;
    if (exact && exact[0] == '1' && a->o->transport == rsTransportCpu && !a->o->mem &&
        rsPlanStagingBytes(a->plan, (int)a->rank, &n) == rsSuccess && n) {
        a->staging = rs_xmalloc(n);
        cfg.staging = a->staging;
        cfg.stagingBytes = n;
    }
    a->res = rsExecCreateLocal(a->plan, a->group, (int)a->rank, &cfg, &a->exec);
    if (a->res != rsSuccess) snprintf(a->err, sizeof a->err, "%s", rsGetLastError());
    return NULL;
}

static void set_error(rs_replay_result *res, rsResult_t r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_error(rs_replay_result *res, rsResult_t r, const char *fmt, ...)
{
    /* Keep the first error, unless it only reports another rank's failure and this one is the cause. */
    if (res->result != rsSuccess && !(res->result == rsRemoteError && r != rsRemoteError)) return;
    res->result = r;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->error, sizeof res->error, fmt, ap);
    va_end(ap);
}

/* Bytes of bindable buffer k of a rank, with its binding and member. */
static uint64_t slot_bytes(rsPlan_t plan, const rs_rank_prog *g, uint32_t k, uint32_t *binding, uint64_t *member)
{
    rs_rt_slot(plan, g, k, binding, member);
    return rs_binding_member_bytes(&plan->P.layout, &g->bindings[*binding]);
}

uint32_t rs_replay_nslots(rsPlan_t plan, uint32_t rank) { return rs_rt_nslots(plan, &plan->P.ranks[rank]); }

uint64_t rs_replay_slot(rsPlan_t plan, uint32_t rank, uint32_t k, uint32_t *binding, uint64_t *offset)
{
    uint64_t j, n = slot_bytes(plan, &plan->P.ranks[rank], k, binding, &j);
    *offset = j * n;
    return n;
}

/* A rank's bindable buffers in bind order: bytes [off, off + bytes) of binding `bind`'s host block. */
typedef struct {
    uint32_t bind;
    uint64_t off, bytes;
} rslot;

static rslot *slot_table(const rs_plan *P, const rs_rank_prog *g, uint32_t *ns)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < g->nbindings; i++) n += rs_binding_members(&P->layout, &g->bindings[i]);
    rslot *t = rs_xcalloc(n + 1, sizeof *t);
    uint32_t k = 0;
    for (uint32_t i = 0; i < g->nbindings; i++) {
        uint64_t m = rs_binding_members(&P->layout, &g->bindings[i]);
        uint64_t b = rs_binding_member_bytes(&P->layout, &g->bindings[i]);
        for (uint64_t j = 0; j < m; j++) t[k++] = (rslot){i, j * b, b};
    }
    *ns = k;
    return t;
}

/* Copy every bindable buffer of rank r between its host block (binding order) and its device memory:
 * up = 1 before the run, 0 after it. Plain host bindings are their own device memory. */
static void move_slots(uint32_t r, const rslot *t, uint32_t ns, void **host, void **dev, const rs_replay_mem *mem,
                       int up)
{
    for (uint32_t k = 0; k < ns; k++) {
        char *h = (char *)host[t[k].bind] + t[k].off;
        uint64_t n = t[k].bytes;
        if (mem && (up ? mem->upload : mem->download)) {
            if (up) mem->upload(mem->ctx, r, dev[k], h, n);
            else mem->download(mem->ctx, r, h, dev[k], n);
        } else if (dev[k] != (void *)h && n) {
            if (up) memcpy(dev[k], h, n);
            else memcpy(h, dev[k], n);
        }
    }
}

static uint64_t sat_add(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

/* Every binding once (filled, then checked), each buffer-group member again (a block of its own) unless
 * the hooks allocate device memory, each rank's staging on the CPU transport (rounded up as the transport
 * does), and the check bitmaps of the rank with the most binding bytes (one rank is checked at a time). */
uint64_t rs_replay_host_bytes(rsPlan_t plan, const rs_replay_opts *o)
{
    const rs_plan *P = &plan->P;
    uint64_t need = 0, bitmap = 0;
    for (uint32_t r = 0; r < P->layout.topo.world; r++) {
        const rs_rank_prog *g = &P->ranks[r];
        if (!g->loaded) continue;
        uint64_t bits = 0;
        for (uint32_t i = 0; i < g->nbindings; i++) {
            uint64_t b = g->bindings[i].bytes;
            need = sat_add(need, b);
            if (!(o->mem && o->mem->alloc) && P->layout.buffers[g->bindings[i].buffer].group) need = sat_add(need, b);
            bits = sat_add(bits, b / 8 + 1);
        }
        if (bits > bitmap) bitmap = bits;
        if (o->transport == rsTransportCpu && !o->mem) need = sat_add(need, sat_add(g->staging_bytes, 64));
    }
    return sat_add(need, bitmap);
}

/* MemAvailable of /proc/meminfo in bytes; UINT64_MAX when it cannot be read. */
static uint64_t host_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return UINT64_MAX;
    char line[256];
    unsigned long long kib = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    fclose(f);
    return found && kib < UINT64_MAX / 1024 ? kib * 1024 : UINT64_MAX;
}

int rs_replay_run(rsPlan_t plan, const rs_replay_opts *o, rs_replay_result *res)
{
    const rs_plan *P = &plan->P;
    uint32_t W = P->layout.topo.world;
    memset(res, 0, sizeof *res);
    const rs_replay_mem *mem = o->mem;
    void ***host = rs_xcalloc(W, sizeof *host), ***dev = rs_xcalloc(W, sizeof *dev);
    rslot **slots = rs_xcalloc(W, sizeof *slots);
    uint32_t *nslots = rs_xcalloc(W, sizeof *nslots);
    for (uint32_t r = 0; r < W; r++) res->nsteps += P->ranks[r].nsteps;
    uint64_t limit = o->host_limit ? o->host_limit : host_available();
    uint64_t need = limit == UINT64_MAX ? 0 : rs_replay_host_bytes(plan, o);
    if (need > limit) {
        set_error(res, rsSystemError,
                  "replaying all %u ranks takes %.2f GiB of host memory (buffers, staging, checks) and %.2f GiB "
                  "is available: replay a scaled-down copy of the layout (-D, e.g. its replay-args)",
                  W, (double)need / (1u << 30), (double)limit / (1u << 30));
        goto out;
    }
    for (uint32_t r = 0; r < W; r++) {
        const rs_rank_prog *g = &P->ranks[r];
        if (!g->loaded) {
            set_error(res, rsInvalidArgument, "rank %u of the plan is not loaded (load it with RS_ALL_RANKS)", r);
            goto out;
        }
        /* host: one block per binding (filled and checked in the layout's terms); dev: one per bindable
         * buffer, each member of a buffer group in an allocation of its own (so a run that treated a group
         * as one block would miss) */
        slots[r] = slot_table(P, g, &nslots[r]);
        const rslot *t = slots[r];
        host[r] = rs_xcalloc(g->nbindings + 1, sizeof(void *));
        dev[r] = rs_xcalloc(nslots[r] + 1, sizeof(void *));
        for (uint32_t i = 0; i < g->nbindings; i++)
            host[r][i] = rs_xmalloc(g->bindings[i].bytes ? g->bindings[i].bytes : 1);
        for (uint32_t k = 0; k < nslots[r]; k++) {
            uint64_t n = t[k].bytes ? t[k].bytes : 1;
            if (mem && mem->alloc) dev[r][k] = mem->alloc(mem->ctx, r, n);
            else if (P->layout.buffers[g->bindings[t[k].bind].buffer].group) dev[r][k] = rs_xmalloc(n);
            else dev[r][k] = host[r][t[k].bind];
        }
        rs_replay_fill(P, r, host[r]);
        move_slots(r, t, nslots[r], host[r], dev[r], mem, 1);
    }

    rsConfig_t gcfg = RS_CONFIG_INITIALIZER;
    gcfg.timeoutMs = o->timeout_ms;
    rsGroup_t group = NULL;
    rsResult_t rr = rsGroupCreate(o->transport, (int)W, &gcfg, &group);
    if (rr != rsSuccess) {
        set_error(res, rr, "%s", rsGetLastError());
        goto out;
    }
    create_arg *ca = rs_xcalloc(W, sizeof *ca);
    pthread_t *th = rs_xcalloc(W, sizeof *th);
    for (uint32_t r = 0; r < W; r++) {
        ca[r] = (create_arg){plan, group, r, o, NULL, rsSuccess, "", NULL};
        if (pthread_create(&th[r], NULL, create_main, &ca[r])) rs_die("cannot create a thread");
    }
    for (uint32_t r = 0; r < W; r++) pthread_join(th[r], NULL);
    for (uint32_t r = 0; r < W; r++)
        if (ca[r].res != rsSuccess) set_error(res, ca[r].res, "%s", ca[r].err);
    for (uint32_t r = 0; r < W && res->result == rsSuccess; r++) {
        for (uint32_t k = 0; k < nslots[r] && res->result == rsSuccess; k++) {
            rr = rsExecBindIndex(ca[r].exec, (int)k, dev[r][k], slots[r][k].bytes);
            if (rr != rsSuccess) set_error(res, rr, "%s", rsGetLastError());
        }
        if (o->inject_rank == (int)r) rs_exec_inject_fault(ca[r].exec, o->inject_step);
    }
    int iters = 1 + (o->iters > 0 ? o->iters : 0);
    double total = 0;
    for (int it = 0; it < iters && res->result == rsSuccess; it++) {
        double t0 = rs_now();
        for (uint32_t r = 0; r < W; r++) {
            rr = rsExecRun(ca[r].exec);
            if (rr != rsSuccess) set_error(res, rr, "%s", rsGetLastError());
        }
        for (uint32_t r = 0; r < W; r++) {
            rr = rsExecSynchronize(ca[r].exec);
            if (rr != rsSuccess) set_error(res, rr, "%s", rsGetLastError());
        }
        double dt = rs_now() - t0;
        if (res->result != rsSuccess) break;
        if (it == 0) {
            res->first_s = dt;
            /* The checked run is the first one: later runs rewrite the same values. */
            for (uint32_t r = o->first; r < o->last && r < W; r++) {
                move_slots(r, slots[r], nslots[r], host[r], dev[r], mem, 0);
                rs_replay_check(P, r, host[r], &res->rep);
            }
        } else {
            total += dt;
            if (it == 1 || dt < res->best_s) res->best_s = dt;
        }
    }
    if (iters > 1 && res->result == rsSuccess) res->mean_s = total / (iters - 1);
    else res->best_s = res->mean_s = res->first_s;
    for (uint32_t r = 0; r < W; r++) {
        if (!ca[r].exec) continue;
        rsExecStats_t st;
        rsExecGetStats(ca[r].exec, &st);
        if (r >= o->first && r < o->last) res->dst_bytes += st.destinationBytes;
        res->all_dst_bytes += st.destinationBytes;
        res->sent[0] += st.bytesSent[0];
        res->sent[1] += st.bytesSent[1];
        res->copied += st.bytesCopied;
    }
    /* Destroy every executor (joining their threads) before any buffer is freed. */
    for (uint32_t r = 0; r < W; r++)
        if (ca[r].exec) rsExecDestroy(ca[r].exec);
    rsGroupDestroy(group);
    for (uint32_t r = 0; r < W; r++) free(ca[r].staging);
    free(ca);
    free(th);
out:
    for (uint32_t r = 0; r < W; r++) {
        if (!host[r]) continue;
        const rs_rank_prog *g = &P->ranks[r];
        for (uint32_t k = 0; k < nslots[r]; k++) {
            if (mem && mem->release && dev[r][k]) mem->release(mem->ctx, r, dev[r][k]);
            else if (!(mem && mem->alloc) && dev[r][k] != host[r][slots[r][k].bind]) free(dev[r][k]);
        }
        for (uint32_t i = 0; i < g->nbindings; i++) free(host[r][i]);
        free(host[r]);
        free(dev[r]);
    }
    for (uint32_t r = 0; r < W; r++) free(slots[r]);
    free(slots);
    free(nslots);
    free(host);
    free(dev);
    if (res->result != rsSuccess) return 1;
    const rs_replay_report *rep = &res->rep;
    return rep->wrong || rep->untouched || rep->src_changed || rep->plan_errors ? 1 : 0;
}
