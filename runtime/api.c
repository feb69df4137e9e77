/* api.c - the public entry points of reshard.h: result strings and the last-error message, logging,
 * plan loading and queries, and the executor calls (argument and state checks, then the transport). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt.h"
#include "util.h"

/* ---------------------------------------------------------------- errors */

static _Thread_local char last_err[RS_ERRLEN];

rsResult_t rs_rt_err(rsResult_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_err, sizeof last_err, fmt, ap);
    va_end(ap);
    RS_LOG(RS_LOG_INFO, -1, "error (%s): %s", rsGetErrorString(code), last_err);
    return code;
}

void rs_rt_err_clear(void) { last_err[0] = 0; }
const char *rs_rt_err_msg(void) { return last_err; }
const char *rsGetLastError(void) { return last_err; }

const char *rsGetErrorString(rsResult_t r)
{
    switch (r) {
    case rsSuccess: return "no error";
    case rsInvalidArgument: return "invalid argument";
    case rsInvalidUsage: return "invalid usage";
    case rsPlanInvalid: return "invalid plan";
    case rsBindingError: return "binding error";
    case rsMismatch: return "ranks disagree";
    case rsTimeout: return "timeout";
    case rsAborted: return "aborted";
    case rsRemoteError: return "remote rank failed";
    case rsTransportError: return "transport error";
    case rsSystemError: return "system error";
    case rsNotSupported: return "not supported";
    case rsInProgress: return "in progress";
    case rsInternalError: return "internal error";
    default: return "unknown result code";
    }
}

rsResult_t rsGetVersion(int *version)
{
    if (!version) return rs_rt_err(rsInvalidArgument, "rsGetVersion: version is NULL");
    *version = RESHARD_VERSION_CODE;
    return rsSuccess;
}

/* ---------------------------------------------------------------- logging */

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_level = RS_LOG_WARN;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;

static void log_init(void)
{
    const char *e = getenv("RESHARD_DEBUG");
    if (!e) return;
    if (!strcasecmp(e, "INFO")) log_level = RS_LOG_INFO;
    else if (!strcasecmp(e, "TRACE")) log_level = RS_LOG_TRACE;
    else if (!strcasecmp(e, "WARN") || !strcasecmp(e, "")) log_level = RS_LOG_WARN;
    else fprintf(stderr, "reshard: ignoring RESHARD_DEBUG=%s (use INFO or TRACE)\n", e);
}

int rs_rt_log_level(void)
{
    pthread_once(&log_once, log_init);
    return log_level;
}

void rs_rt_log(int level, int rank, const char *fmt, ...)
{
    char buf[2048];
    int n = rank >= 0 ? snprintf(buf, sizeof buf, "reshard[%d] %s: ", rank, level == RS_LOG_TRACE ? "TRACE" : "INFO")
                      : snprintf(buf, sizeof buf, "reshard %s: ", level == RS_LOG_TRACE ? "TRACE" : "INFO");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&log_mu); /* whole lines from concurrent ranks */
    fprintf(stderr, "%s\n", buf);
    pthread_mutex_unlock(&log_mu);
}

double rs_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---------------------------------------------------------------- plans */

void rs_rt_plan_ref(struct rsPlan *p) { atomic_fetch_add(&p->refs, 1); }

static void free_member_names(struct rsPlan *p)
{
    if (p->mnames)
        for (uint32_t b = 0; b < p->P.layout.nbuffers; b++) {
            for (uint64_t j = 0; p->mnames[b] && j < p->nmnames[b]; j++) free(p->mnames[b][j]);
            free(p->mnames[b]);
        }
    free(p->mnames);
    free(p->nmnames);
    p->mnames = NULL;
    p->nmnames = NULL;
}

void rs_rt_plan_unref(struct rsPlan *p)
{
    if (p && atomic_fetch_sub(&p->refs, 1) == 1) {
        free_member_names(p);
        pthread_mutex_destroy(&p->mnames_mu);
        rs_plan_free(&p->P);
        free(p);
    }
}

uint32_t rs_rt_nslots(const struct rsPlan *p, const rs_rank_prog *g)
{
    uint64_t n = 0; /* at most nbindings + 2^20 (rs_plan_verify_rank) */
    for (uint32_t i = 0; i < g->nbindings; i++) n += rs_binding_members(&p->P.layout, &g->bindings[i]);
    return n > INT32_MAX ? INT32_MAX : (uint32_t)n;
}

void rs_rt_slot(const struct rsPlan *p, const rs_rank_prog *g, uint32_t k, uint32_t *binding, uint64_t *member)
{
    uint64_t at = k;
    uint32_t i = 0;
    for (; i + 1 < g->nbindings; i++) {
        uint64_t n = rs_binding_members(&p->P.layout, &g->bindings[i]);
        if (at < n) break;
        at -= n;
    }
    *binding = i;
    *member = at;
}

const char *rs_rt_slot_name(const struct rsPlan *cp, const rs_rank_prog *g, uint32_t binding, uint64_t member)
{
    struct rsPlan *p = (struct rsPlan *)cp; /* the name cache is the only thing that changes */
    uint32_t b = g->bindings[binding].buffer;
    const rs_buffer *buf = &p->P.layout.buffers[b];
    if (!buf->group) return buf->name;
    pthread_mutex_lock(&p->mnames_mu);
    if (!p->mnames) {
        p->mnames = rs_xcalloc(p->P.layout.nbuffers, sizeof *p->mnames);
        p->nmnames = rs_xcalloc(p->P.layout.nbuffers, sizeof *p->nmnames);
    }
    if (member >= p->nmnames[b]) {
        uint64_t n = member + 1 > 2 * p->nmnames[b] ? member + 1 : 2 * p->nmnames[b];
        p->mnames[b] = rs_xrealloc(p->mnames[b], n * sizeof *p->mnames[b]);
        memset(p->mnames[b] + p->nmnames[b], 0, (n - p->nmnames[b]) * sizeof *p->mnames[b]);
        p->nmnames[b] = n;
    }
    if (!p->mnames[b][member]) {
        uint64_t inner = rs_binding_inner_members(&p->P.layout, &g->bindings[binding]);
        int len = rs_member_name(buf->name, member, inner, NULL, 0);
        char *s = rs_xmalloc((size_t)len + 1);
        rs_member_name(buf->name, member, inner, s, (size_t)len + 1);
        p->mnames[b][member] = s;
    }
    const char *name = p->mnames[b][member];
    pthread_mutex_unlock(&p->mnames_mu);
    return name;
}

static rsResult_t plan_finish(rs_plan *P, int rank, rsPlan_t *out)
{
    struct rsPlan *p = calloc(1, sizeof *p);
    if (!p) {
        rs_plan_free(P);
        return rs_rt_err(rsSystemError, "out of memory loading a plan");
    }
    p->P = *P;
    memset(P, 0, sizeof *P);
    pthread_mutex_init(&p->mnames_mu, NULL);
    p->rank = rank;
    atomic_init(&p->refs, 1);
    *out = p;
    RS_LOG(RS_LOG_INFO, rank, "plan loaded: world %u, %u tensors, %u buffers, fingerprint %016llx",
           p->P.layout.topo.world, p->P.layout.ntensors, p->P.layout.nbuffers, (unsigned long long)p->P.plan_fp);
    return rsSuccess;
}

rsResult_t rsPlanLoad(const char *path, int rank, rsPlan_t *plan)
{
    if (!path || !plan) return rs_rt_err(rsInvalidArgument, "rsPlanLoad: path and plan must not be NULL");
    if (rank < RS_ALL_RANKS) return rs_rt_err(rsInvalidArgument, "rsPlanLoad: rank %d is negative", rank);
    *plan = NULL;
    rs_plan P;
    memset(&P, 0, sizeof P);
    char err[512];
    if (rs_plan_load_file(path, rank, &P, err, sizeof err) != 0) {
        rs_plan_free(&P);
        return rs_rt_err(rsPlanInvalid, "%s", err);
    }
    return plan_finish(&P, rank, plan);
}

rsResult_t rsPlanLoadMemory(const void *data, size_t bytes, int rank, rsPlan_t *plan)
{
    if (!data || !plan) return rs_rt_err(rsInvalidArgument, "rsPlanLoadMemory: data and plan must not be NULL");
    if (rank < RS_ALL_RANKS) return rs_rt_err(rsInvalidArgument, "rsPlanLoadMemory: rank %d is negative", rank);
    *plan = NULL;
    rs_plan P;
    memset(&P, 0, sizeof P);
    char err[512];
    if (rs_plan_decode(data, bytes, rank, &P, err, sizeof err) != 0) {
        rs_plan_free(&P);
        return rs_rt_err(rsPlanInvalid, "%s", err);
    }
    return plan_finish(&P, rank, plan);
}

rsResult_t rs_rt_plan_wrap(rs_plan *P, rsPlan_t *out)
{
    char err[512];
    for (uint32_t r = 0; r < P->layout.topo.world; r++) {
        if (!P->ranks[r].loaded) continue;
        if (rs_plan_verify_rank(P, r, err, sizeof err) != 0) {
            rs_plan_free(P);
            return rs_rt_err(rsPlanInvalid, "%s", err);
        }
    }
    return plan_finish(P, RS_ALL_RANKS, out);
}

rsResult_t rsPlanDestroy(rsPlan_t plan)
{
    if (!plan) return rs_rt_err(rsInvalidArgument, "rsPlanDestroy: plan is NULL");
    rs_rt_plan_unref(plan);
    return rsSuccess;
}

rsResult_t rsPlanGetInfo(rsPlan_t plan, rsPlanInfo_t *info)
{
    if (!plan || !info) return rs_rt_err(rsInvalidArgument, "rsPlanGetInfo: plan and info must not be NULL");
    memset(info, 0, sizeof *info);
    info->worldSize = (int)plan->P.layout.topo.world;
    info->rank = plan->rank;
    info->numDomains = (int)plan->P.layout.topo.ndomains;
    info->formatMajor = RS_PLAN_MAJOR;
    info->formatMinor = (int)rs_plan_layout_minor(&plan->P.layout); /* the version the plan is written in */
    info->fingerprint = plan->P.plan_fp;
    info->sourceFingerprint = plan->P.source_fp;
    return rsSuccess;
}

static rsResult_t plan_rank(rsPlan_t plan, int rank, const char *fn, const rs_rank_prog **out)
{
    if (!plan) return rs_rt_err(rsInvalidArgument, "%s: plan is NULL", fn);
    if (rank < 0 || (uint32_t)rank >= plan->P.layout.topo.world)
        return rs_rt_err(rsInvalidArgument, "%s: rank %d is outside the plan's world of %u ranks", fn, rank,
                         plan->P.layout.topo.world);
    if (!plan->P.ranks[rank].loaded)
        return rs_rt_err(rsInvalidArgument, "%s: rank %d was not loaded (the plan was loaded for rank %d)", fn, rank,
                         plan->rank);
    *out = &plan->P.ranks[rank];
    return rsSuccess;
}

rsResult_t rsPlanBufferCount(rsPlan_t plan, int rank, int *count)
{
    const rs_rank_prog *g = NULL;
    if (!count) return rs_rt_err(rsInvalidArgument, "rsPlanBufferCount: count is NULL");
    RS_TRY(plan_rank(plan, rank, "rsPlanBufferCount", &g));
    *count = (int)rs_rt_nslots(plan, g);
    return rsSuccess;
}

rsResult_t rsPlanGetBuffer(rsPlan_t plan, int rank, int index, rsBufferInfo_t *info)
{
    const rs_rank_prog *g = NULL;
    if (!info) return rs_rt_err(rsInvalidArgument, "rsPlanGetBuffer: info is NULL");
    RS_TRY(plan_rank(plan, rank, "rsPlanGetBuffer", &g));
    uint32_t n = rs_rt_nslots(plan, g);
    if (index < 0 || (uint32_t)index >= n)
        return rs_rt_err(rsInvalidArgument, "rsPlanGetBuffer: index %d outside 0..%u", index, n);
    uint32_t bi;
    uint64_t j;
    rs_rt_slot(plan, g, (uint32_t)index, &bi, &j);
    const rs_binding *b = &g->bindings[bi];
    const rs_buffer *buf = &plan->P.layout.buffers[b->buffer];
    memset(info, 0, sizeof *info);
    info->name = rs_rt_slot_name(plan, g, bi, j);
    info->side = buf->side == RS_DST ? rsSideDestination : rsSideSource;
    info->dtype = rs_dtype_name(buf->dtype);
    /* a member of a group has the group's shape without its member dims */
    uint32_t d0 = buf->group;
    info->ndim = (int)(b->ndim - d0);
    for (uint32_t d = d0; d < b->ndim && d - d0 < 8; d++) info->shape[d - d0] = b->shape[d];
    info->bytes = (size_t)rs_binding_member_bytes(&plan->P.layout, b);
    return rsSuccess;
}

rsResult_t rsPlanStagingBytes(rsPlan_t plan, int rank, size_t *bytes)
{
    const rs_rank_prog *g = NULL;
    if (!bytes) return rs_rt_err(rsInvalidArgument, "rsPlanStagingBytes: bytes is NULL");
    RS_TRY(plan_rank(plan, rank, "rsPlanStagingBytes", &g));
    *bytes = (size_t)g->staging_bytes;
    return rsSuccess;
}

/* ---------------------------------------------------------------- configuration */

static rsResult_t config_read(const rsConfig_t *in, rsConfig_t *out, const char *fn)
{
    rsConfig_t def = RS_CONFIG_INITIALIZER;
    *out = def;
    if (!in) return rsSuccess;
    if (in->size < offsetof(rsConfig_t, timeoutMs) + sizeof(int) || in->size > 4096)
        return rs_rt_err(rsInvalidArgument, "%s: config.size %zu is not a valid sizeof(rsConfig_t); start from "
                                            "RS_CONFIG_INITIALIZER", fn, in->size);
    if (in->version == 0 || in->version > RS_CONFIG_VERSION)
        return rs_rt_err(rsInvalidArgument, "%s: config.version %u is not supported (this library: %u)", fn,
                         in->version, RS_CONFIG_VERSION);
    memcpy(out, in, in->size < sizeof *out ? in->size : sizeof *out);
    out->size = sizeof *out;
    out->version = RS_CONFIG_VERSION;
    if (out->timeoutMs < 0) return rs_rt_err(rsInvalidArgument, "%s: config.timeoutMs %d is negative", fn, out->timeoutMs);
    if (out->staging && out->stagingBytes == 0)
        return rs_rt_err(rsInvalidArgument, "%s: config.staging is set but config.stagingBytes is 0", fn);
    return rsSuccess;
}

/* ---------------------------------------------------------------- transports and groups */

rsResult_t rsTransportAvailable(rsTransport_t t, int *available)
{
    if (!available) return rs_rt_err(rsInvalidArgument, "rsTransportAvailable: available is NULL");
    *available = 0;
    switch (t) {
    case rsTransportCpu: *available = 1; break;
    case rsTransportCudaLocal:
#ifdef RESHARD_HAVE_CUDA
        *available = rs_cuda_device_count() > 0;
#endif
        break;
    case rsTransportNccl:
#ifdef RESHARD_HAVE_NCCL
        *available = rs_cuda_device_count() > 0;
#endif
        break;
    default: return rs_rt_err(rsInvalidArgument, "rsTransportAvailable: unknown transport %d", (int)t);
    }
    return rsSuccess;
}

rsResult_t rsGroupCreate(rsTransport_t transport, int nranks, const rsConfig_t *config, rsGroup_t *group)
{
    if (!group) return rs_rt_err(rsInvalidArgument, "rsGroupCreate: group is NULL");
    *group = NULL;
    rsConfig_t cfg;
    RS_TRY(config_read(config, &cfg, "rsGroupCreate"));
    if (nranks <= 0 || nranks > (1 << 20)) return rs_rt_err(rsInvalidArgument, "rsGroupCreate: nranks %d", nranks);
    if (transport == rsTransportNccl)
        return rs_rt_err(rsInvalidArgument, "rsGroupCreate: NCCL ranks join through a communicator "
                                            "(rsExecCreateNccl), not a group");
    if (transport != rsTransportCpu && transport != rsTransportCudaLocal)
        return rs_rt_err(rsInvalidArgument, "rsGroupCreate: unknown transport %d", (int)transport);
#ifndef RESHARD_HAVE_CUDA
    if (transport == rsTransportCudaLocal)
        return rs_rt_err(rsNotSupported, "rsGroupCreate: this libreshard was built without CUDA");
#else
    if (transport == rsTransportCudaLocal && rs_cuda_device_count() <= 0)
        return rs_rt_err(rsNotSupported, "rsGroupCreate: no CUDA device is visible");
#endif
    return rs_local_group_new(transport, (uint32_t)nranks, cfg.timeoutMs, group);
}

/* ---------------------------------------------------------------- executors */

#define CHECK_EXEC(x, fn)                                                                                \
    do {                                                                                                 \
        if (!(x)) return rs_rt_err(rsInvalidArgument, fn ": exec is NULL");                              \
    } while (0)

rsResult_t rsExecCreateLocal(rsPlan_t plan, rsGroup_t group, int rank, const rsConfig_t *config, rsExec_t *exec)
{
    if (!exec) return rs_rt_err(rsInvalidArgument, "rsExecCreateLocal: exec is NULL");
    *exec = NULL;
    if (!plan || !group) return rs_rt_err(rsInvalidArgument, "rsExecCreateLocal: plan and group must not be NULL");
    rsConfig_t cfg;
    RS_TRY(config_read(config, &cfg, "rsExecCreateLocal"));
    if (!config) cfg.timeoutMs = rs_local_group_timeout(group);
    rs_exec *x = NULL;
    rsResult_t r = rs_exec_new(plan, rank, &cfg, &x);
    if (r != rsSuccess) {
        /* Report to the group anyway, so that the other ranks fail now instead of timing out. */
        rs_local_arrive_failed(group, rank, r);
        return r;
    }
    switch (rs_local_group_kind(group)) {
    case rsTransportCpu: r = rs_cpu_create(group, x); break;
#ifdef RESHARD_HAVE_CUDA
    case rsTransportCudaLocal: r = rs_cudalocal_create(group, x); break;
#endif
    default: r = rs_rt_err(rsNotSupported, "rsExecCreateLocal: transport not built in"); break;
    }
    if (r != rsSuccess) {
        rs_exec_free(x);
        return r;
    }
    *exec = x;
    RS_LOG(RS_LOG_INFO, (int)x->rank, "executor ready on the %s transport: %u NET + %u NVL steps, %llu staging bytes",
           x->tr->name, x->nlane[0], x->nlane[1], (unsigned long long)x->prog->staging_bytes);
    return rsSuccess;
}

rsResult_t rsExecCreateNccl(rsPlan_t plan, struct ncclComm *comm, const rsConfig_t *config, rsExec_t *exec)
{
    if (!exec) return rs_rt_err(rsInvalidArgument, "rsExecCreateNccl: exec is NULL");
    *exec = NULL;
    if (!plan || !comm) return rs_rt_err(rsInvalidArgument, "rsExecCreateNccl: plan and comm must not be NULL");
#ifdef RESHARD_HAVE_NCCL
    rsConfig_t cfg;
    RS_TRY(config_read(config, &cfg, "rsExecCreateNccl"));
    return rs_nccl_exec_create(plan, comm, NULL, 0, 0, &cfg, exec);
#else
    (void)config;
    return rs_rt_err(rsNotSupported, "rsExecCreateNccl: this libreshard was built without NCCL");
#endif
}

rsResult_t rsExecCreateNcclFromId(rsPlan_t plan, const void *id, int nranks, int rank, const rsConfig_t *config,
                                  rsExec_t *exec)
{
    if (!exec) return rs_rt_err(rsInvalidArgument, "rsExecCreateNcclFromId: exec is NULL");
    *exec = NULL;
    if (!plan || !id) return rs_rt_err(rsInvalidArgument, "rsExecCreateNcclFromId: plan and id must not be NULL");
    if (nranks <= 0 || rank < 0 || rank >= nranks)
        return rs_rt_err(rsInvalidArgument, "rsExecCreateNcclFromId: rank %d of %d ranks", rank, nranks);
#ifdef RESHARD_HAVE_NCCL
    rsConfig_t cfg;
    RS_TRY(config_read(config, &cfg, "rsExecCreateNcclFromId"));
    return rs_nccl_exec_create(plan, NULL, id, nranks, rank, &cfg, exec);
#else
    (void)config;
    return rs_rt_err(rsNotSupported, "rsExecCreateNcclFromId: this libreshard was built without NCCL");
#endif
}

/* Binding lookup: by_name holds slots (plain bindings and group members) sorted by name. */
static const char *bind_name(const rs_exec *x, uint32_t k) { return rs_exec_slot_name(x, k); }

static rsResult_t find_binding(rs_exec *x, const char *name, const char *fn, uint32_t *out)
{
    uint32_t lo = 0, hi = x->nslots;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (strcmp(bind_name(x, x->by_name[mid]), name) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo == x->nslots || strcmp(bind_name(x, x->by_name[lo]), name) != 0)
        return rs_rt_err(rsBindingError, "%s: rank %u has no buffer named '%s' in this plan", fn, x->rank, name);
    if (lo + 1 < x->nslots && strcmp(bind_name(x, x->by_name[lo + 1]), name) == 0)
        return rs_rt_err(rsBindingError, "%s: '%s' is both a source and a destination buffer on rank %u; "
                                         "bind it with rsExecBindIndex", fn, name, x->rank);
    *out = x->by_name[lo];
    return rsSuccess;
}

/* The run state, refreshed from the transport without blocking. */
static int exec_busy(rs_exec *x)
{
    if (x->state != RS_X_RUNNING) return 0;
    rsResult_t r = x->tr->sync(x, 0);
    if (r == rsInProgress) return 1;
    x->state = r == rsSuccess ? RS_X_IDLE : RS_X_FAILED;
    if (r == rsSuccess) x->runs_completed++;
    return 0;
}

static int cmp_range(const void *a, const void *b)
{
    const uintptr_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Destination buffers must not overlap anything else bound on the rank (sources may alias each other). */
static rsResult_t check_overlaps(rs_exec *x)
{
    uint32_t n = x->nslots, k = 0;
    uintptr_t(*r)[3] = calloc(n ? n : 1, sizeof *r);
    if (!r) return rs_rt_err(rsSystemError, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        uint64_t bytes = x->mbytes[x->slot_bind[i]];
        if (!bytes) continue;
        r[k][0] = (uintptr_t)x->bind_ptr[i];
        r[k][1] = r[k][0] + (uintptr_t)bytes;
        r[k][2] = i;
        k++;
    }
    qsort(r, k, sizeof *r, cmp_range);
    rsResult_t res = rsSuccess;
    for (uint32_t i = 0; i + 1 < k && res == rsSuccess; i++) {
        /* Compare with every later range starting before this one ends. */
        for (uint32_t j = i + 1; j < k && r[j][0] < r[i][1]; j++) {
            uint32_t a = (uint32_t)r[i][2], b = (uint32_t)r[j][2];
            int da = x->P->layout.buffers[x->prog->bindings[x->slot_bind[a]].buffer].side == RS_DST;
            int db = x->P->layout.buffers[x->prog->bindings[x->slot_bind[b]].buffer].side == RS_DST;
            if (da || db) {
                res = rs_rt_err(rsBindingError, "rank %u: %s buffer '%s' overlaps %s buffer '%s' in memory", x->rank,
                                da ? "destination" : "source", bind_name(x, a), db ? "destination" : "source",
                                bind_name(x, b));
                break;
            }
        }
    }
    free(r);
    return res;
}

static rsResult_t bind_index(rs_exec *x, uint32_t i, void *ptr, size_t bytes, const char *fn)
{
    if (x->state == RS_X_FAILED)
        return rs_rt_err(rsInvalidUsage, "%s: the executor failed in an earlier run (%s); destroy it", fn, x->run_err);
    if (exec_busy(x))
        return rs_rt_err(rsInvalidUsage, "%s: cannot bind '%s' while a run is in progress", fn, bind_name(x, i));
    uint64_t want = x->mbytes[x->slot_bind[i]];
    if (x->bound[i])
        return rs_rt_err(rsBindingError, "%s: '%s' is already bound on rank %u (rsExecUnbind it first)", fn,
                         bind_name(x, i), x->rank);
    if ((uint64_t)bytes != want)
        return rs_rt_err(rsBindingError, "%s: '%s' on rank %u is %llu bytes in the plan, not %zu", fn, bind_name(x, i),
                         x->rank, (unsigned long long)want, bytes);
    if (!ptr && bytes) return rs_rt_err(rsInvalidArgument, "%s: '%s': ptr is NULL", fn, bind_name(x, i));
    x->bind_ptr[i] = ptr;
    x->bound[i] = 1;
    x->nbound++;
    x->prepared = 0;
    if (x->nbound < x->nslots) return rsSuccess;
    /* Last binding: check, resolve every pointer once, let the transport upload its descriptors. */
    rsResult_t r = check_overlaps(x);
    if (r == rsSuccess) {
        rs_exec_resolve(x);
        r = x->tr->prepare ? x->tr->prepare(x) : rsSuccess;
    }
    if (r != rsSuccess) {
        x->bound[i] = 0;
        x->bind_ptr[i] = NULL;
        x->nbound--;
        return r;
    }
    x->prepared = 1;
    RS_LOG(RS_LOG_INFO, (int)x->rank, "all %u buffers bound", x->nslots);
    return rsSuccess;
}

rsResult_t rsExecBind(rsExec_t x, const char *name, void *ptr, size_t bytes)
{
    CHECK_EXEC(x, "rsExecBind");
    if (!name) return rs_rt_err(rsInvalidArgument, "rsExecBind: name is NULL");
    uint32_t i;
    RS_TRY(find_binding(x, name, "rsExecBind", &i));
    return bind_index(x, i, ptr, bytes, "rsExecBind");
}

rsResult_t rsExecBindIndex(rsExec_t x, int index, void *ptr, size_t bytes)
{
    CHECK_EXEC(x, "rsExecBindIndex");
    if (index < 0 || (uint32_t)index >= x->nslots)
        return rs_rt_err(rsBindingError, "rsExecBindIndex: index %d outside 0..%u on rank %u", index, x->nslots,
                         x->rank);
    return bind_index(x, (uint32_t)index, ptr, bytes, "rsExecBindIndex");
}

rsResult_t rsExecUnbind(rsExec_t x, const char *name)
{
    CHECK_EXEC(x, "rsExecUnbind");
    if (!name) return rs_rt_err(rsInvalidArgument, "rsExecUnbind: name is NULL");
    uint32_t i;
    RS_TRY(find_binding(x, name, "rsExecUnbind", &i));
    if (exec_busy(x)) return rs_rt_err(rsInvalidUsage, "rsExecUnbind: '%s': a run is in progress", name);
    if (!x->bound[i]) return rs_rt_err(rsBindingError, "rsExecUnbind: '%s' is not bound", name);
    x->bound[i] = 0;
    x->bind_ptr[i] = NULL;
    x->nbound--;
    x->prepared = 0;
    return rsSuccess;
}

rsResult_t rsExecRun(rsExec_t x)
{
    CHECK_EXEC(x, "rsExecRun");
    if (x->state == RS_X_FAILED)
        return rs_rt_err(rsInvalidUsage, "rsExecRun: the executor failed in an earlier run (%s); destroy it",
                         x->run_err);
    if (x->tr->threaded && exec_busy(x))
        return rs_rt_err(rsInvalidUsage, "rsExecRun: the previous run is still in progress (rsExecSynchronize)");
    if (x->nbound < x->nslots) {
        char names[512];
        size_t n = 0;
        uint32_t shown = 0;
        names[0] = 0;
        for (uint32_t i = 0; i < x->nslots && shown < 4; i++) {
            if (x->bound[i]) continue;
            n += (size_t)snprintf(names + n, n < sizeof names ? sizeof names - n : 0, "%s'%s'", shown ? ", " : "",
                                  bind_name(x, i));
            if (n >= sizeof names) n = sizeof names - 1;
            shown++;
        }
        uint32_t missing = x->nslots - x->nbound;
        return rs_rt_err(rsInvalidUsage, "rsExecRun: rank %u has %u unbound buffer%s: %s%s", x->rank, missing,
                         missing == 1 ? "" : "s", names, missing > shown ? ", ..." : "");
    }
    if (!x->prepared) return rs_rt_err(rsInternalError, "rsExecRun: bindings complete but not prepared");
    rsResult_t r = x->tr->run(x);
    if (r != rsSuccess) {
        if (r != rsInvalidUsage) {
            x->state = RS_X_FAILED;
            if (!x->run_res) x->run_res = r;
            if (!x->run_err[0]) snprintf(x->run_err, sizeof x->run_err, "%s", rs_rt_err_msg());
        }
        return r;
    }
    x->state = RS_X_RUNNING;
    x->runs_started++;
    return rsSuccess;
}

static rsResult_t exec_result(rs_exec *x, int wait)
{
    if (x->state == RS_X_IDLE) return rsSuccess;
    if (x->state == RS_X_FAILED) return rs_rt_err(x->run_res ? x->run_res : rsInternalError, "%s", x->run_err);
    rsResult_t r = x->tr->sync(x, wait);
    if (r == rsInProgress) return r;
    if (r == rsSuccess) {
        x->state = RS_X_IDLE;
        x->runs_completed++;
        return r;
    }
    x->state = RS_X_FAILED;
    if (!x->run_res) x->run_res = r;
    if (!x->run_err[0]) snprintf(x->run_err, sizeof x->run_err, "%s", rs_rt_err_msg());
    return rs_rt_err(x->run_res, "%s", x->run_err);
}

rsResult_t rsExecQuery(rsExec_t x)
{
    CHECK_EXEC(x, "rsExecQuery");
    return exec_result(x, 0);
}

rsResult_t rsExecSynchronize(rsExec_t x)
{
    CHECK_EXEC(x, "rsExecSynchronize");
    return exec_result(x, 1);
}

rsResult_t rsExecAbort(rsExec_t x)
{
    CHECK_EXEC(x, "rsExecAbort");
    atomic_store(&x->abort_flag, 1);
    if (x->tr->abort) x->tr->abort(x);
    return rsSuccess;
}

rsResult_t rsExecDestroy(rsExec_t x)
{
    CHECK_EXEC(x, "rsExecDestroy");
    if (x->state == RS_X_RUNNING) {
        rsResult_t r = x->tr->sync(x, 1);
        if (r == rsTimeout || r == rsInProgress) {
            rsExecAbort(x);
            x->tr->sync(x, 1);
        }
    }
    x->tr->destroy(x);
    rs_exec_free(x);
    return rsSuccess;
}

rsResult_t rsExecGetStats(rsExec_t x, rsExecStats_t *st)
{
    CHECK_EXEC(x, "rsExecGetStats");
    if (!st) return rs_rt_err(rsInvalidArgument, "rsExecGetStats: stats is NULL");
    if (x->state == RS_X_RUNNING) exec_busy(x);
    *st = x->stats;
    st->runsStarted = x->runs_started;
    st->runsCompleted = x->runs_completed;
    st->lastRunSeconds = x->last_run_seconds;
    return rsSuccess;
}

rsResult_t rsExecGetStream(rsExec_t x, void **stream)
{
    CHECK_EXEC(x, "rsExecGetStream");
    if (!stream) return rs_rt_err(rsInvalidArgument, "rsExecGetStream: stream is NULL");
    *stream = x->cfg.stream;
    return rsSuccess;
}
