/* transport_nccl.c - the NCCL + CUDA transport: one rank per GPU on an ncclComm_t spanning the plan's world
 * (the caller's, or one made from an ncclUniqueId), an NVLink-domain communicator from ncclCommSplit, NET and
 * NVL lanes on two streams with events for cross-lane waits, one ncclGroupStart/End per step, the batched copy
 * kernels from gpu.c. A run only enqueues work (CUDA-graph capturable); plan agreement by an allgather. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nccl.h>

#include "gpu.h"

typedef struct {
    rs_gpu g;
    ncclComm_t comm[RS_NLANES]; /* NET: the world; NVL: the rank's NVLink domain (NULL without NVL steps) */
    int own[RS_NLANES];
    int32_t *nvl_rank; /* global rank -> rank in the NVL communicator (-1 outside the domain) */
    atomic_int aborted;
    pthread_mutex_t mu; /* comm use from query/sync vs. abort from another thread */
    /* The last run was issued into a CUDA graph capture of the config stream: nothing ran, and ev_done was
     * recorded into the graph rather than the stream, so it cannot be queried; that run is complete at once. */
    int captured;
    /* An uncaptured run recorded ev_done and was not seen complete yet: a captured run after it does not make
     * it complete (its ev_done record went into the graph, so the event still marks the uncaptured run). */
    int plain_pending;
    /* rsExecRun is issuing NCCL calls on the communicators (under mu): an rsExecAbort from another thread
     * then leaves the abort to the issuing thread, which sees the abort flag after its current call (between
     * steps, in a non-blocking wait, or when the walk ends); ncclCommAbort under its feet would free the
     * communicator it is calling. */
    int issuing;
} nc_state;

static rsResult_t nccl_check(ncclResult_t e, ncclComm_t comm, int rank, const char *what)
{
    if (e == ncclSuccess || e == ncclInProgress) return rsSuccess;
    const char *last = comm ? ncclGetLastError(comm) : NULL;
    return rs_rt_err(rsTransportError, "rank %d: %s: %s%s%s", rank, what, ncclGetErrorString(e),
                     last && last[0] ? ": " : "", last ? last : "");
}
#define RS_NCCL(x, comm, call) RS_TRY(nccl_check((call), (comm), (int)(x)->rank, #call))

/* Wait for a stream, bounded; on timeout or an asynchronous NCCL error the communicator is aborted by the
 * caller. Returns rsSuccess, rsTimeout or rsTransportError. */
static rsResult_t stream_wait(cudaStream_t s, ncclComm_t comm, int rank, int timeout_ms, const char *what)
{
    double t0 = rs_now();
    long ns = 1000;
    for (;;) {
        cudaError_t e = cudaStreamQuery(s);
        if (e == cudaSuccess) return rsSuccess;
        if (e != cudaErrorNotReady) return rs_cuda_check(e, NULL, what);
        ncclResult_t ae = ncclSuccess;
        if (comm && ncclCommGetAsyncError(comm, &ae) == ncclSuccess && ae != ncclSuccess && ae != ncclInProgress)
            return nccl_check(ae, comm, rank, what);
        if (timeout_ms > 0 && rs_now() - t0 > timeout_ms / 1000.0)
            return rs_rt_err(rsTimeout, "rank %d: %s did not complete within %d ms", rank, what, timeout_ms);
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 1000000) ns *= 2;
    }
}

/* A non-blocking communicator (the caller's, made with config.blocking = 0) returns ncclInProgress from
 * its calls: NCCL wants its state polled to ncclSuccess before the next call on it, and before the stream
 * the call enqueues on can be asked whether the work is done (the work may not be enqueued yet). Bounded by
 * timeout_ms (<= 0: unbounded) and, when given, the executor's abort flag. */
static rsResult_t comm_settle(ncclComm_t comm, int rank, int timeout_ms, atomic_int *abort_flag, const char *what)
{
    double t0 = rs_now();
    long ns = 1000;
    for (;;) {
        ncclResult_t st = ncclSuccess;
        ncclResult_t e = ncclCommGetAsyncError(comm, &st);
        if (e != ncclSuccess) return nccl_check(e, comm, rank, "ncclCommGetAsyncError");
        if (st == ncclSuccess) return rsSuccess;
        if (st != ncclInProgress) return nccl_check(st, comm, rank, what);
        if (abort_flag && atomic_load(abort_flag)) return rs_rt_err(rsAborted, "rank %d: aborted", rank);
        if (timeout_ms > 0 && rs_now() - t0 > timeout_ms / 1000.0)
            return rs_rt_err(rsTimeout, "rank %d: %s (non-blocking) did not complete within %d ms", rank, what,
                             timeout_ms);
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 100000) ns *= 2;
    }
}

/* Plan agreement: allgather every rank's record. When the collective was issued and did not complete (a
 * timeout, an asynchronous NCCL error), the communicator is aborted (*aborted = 1) before the memory it
 * uses is freed: cudaFree waits for the device, where the collective would still be waiting. */
static rsResult_t agree(ncclComm_t comm, int dev, int rank, int n, const rs_agree_rec *mine, int timeout_ms,
                        rs_agree_rec *all, int *aborted)
{
    void *d = NULL;
    cudaStream_t s = NULL;
    rsResult_t r = rs_cuda_check(cudaSetDevice(dev), NULL, "cudaSetDevice");
    if (r == rsSuccess) r = rs_cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), NULL, "cudaStreamCreate");
    if (r == rsSuccess) r = rs_cuda_check(cudaMalloc(&d, (size_t)n * sizeof *mine), NULL, "cudaMalloc");
    /* on the collective's stream: a synchronous copy from pageable memory may return before its DMA lands,
     * and a non-blocking stream is not ordered after it */
    if (r == rsSuccess)
        r = rs_cuda_check(cudaMemcpyAsync((char *)d + (size_t)rank * sizeof *mine, mine, sizeof *mine,
                                          cudaMemcpyHostToDevice, s),
                          NULL, "cudaMemcpyAsync");
    int issued = 0;
    if (r == rsSuccess) {
        ncclResult_t e = ncclAllGather((char *)d + (size_t)rank * sizeof *mine, d, sizeof *mine, ncclUint8, comm, s);
        r = nccl_check(e, comm, rank, "ncclAllGather (plan agreement)");
        issued = r == rsSuccess;
        if (r == rsSuccess && e == ncclInProgress)
            r = comm_settle(comm, rank, timeout_ms, NULL, "ncclAllGather (plan agreement)");
    }
    if (r == rsSuccess) r = stream_wait(s, comm, rank, timeout_ms, "plan agreement");
    if (r != rsSuccess && issued) {
        if (r == rsTimeout)
            rs_rt_err(rsTimeout, "rank %d: plan agreement timed out after %d ms: some rank of the communicator never "
                                 "created its executor", rank, timeout_ms);
        ncclCommAbort(comm);
        *aborted = 1;
    }
    if (r == rsSuccess) r = rs_cuda_check(cudaMemcpy(all, d, (size_t)n * sizeof *mine, cudaMemcpyDeviceToHost), NULL, "cudaMemcpy");
    if (d) cudaFree(d);
    if (s) cudaStreamDestroy(s);
    return r;
}

/* ---------------------------------------------------------------- primitives */

static nc_state *st(rs_exec *x) { return x->tp; }

static rsResult_t nc_wait(rs_exec *x, int lane, uint32_t step)
{
    RS_CUDA(x, cudaStreamWaitEvent(st(x)->g.lane[lane], st(x)->g.ev_step[step], 0));
    return rsSuccess;
}

static rsResult_t nc_copies(rs_exec *x, int lane, uint32_t step, int phase)
{
    return rs_gpu_copies(&st(x)->g, x, lane, step, phase);
}

/* An executor's call on a non-blocking communicator (comm_settle), bounded by its timeout and abort flag. */
static rsResult_t nonblocking_wait(rs_exec *x, ncclComm_t comm)
{
    return comm_settle(comm, (int)x->rank, x->cfg.timeoutMs, &x->abort_flag, "ncclGroupEnd");
}

static rsResult_t nc_group(rs_exec *x, int lane, uint32_t step)
{
    nc_state *c = st(x);
    ncclComm_t comm = c->comm[lane];
    cudaStream_t s = c->g.lane[lane];
    const rs_xstep *xs = &x->xs[step];
    RS_NCCL(x, comm, ncclGroupStart());
    rsResult_t r = rsSuccess;
    for (uint32_t i = 0; i < xs->np2p && r == rsSuccess; i++) {
        const rs_xp2p *p = &x->p2p[xs->p2p + i];
        int peer = lane == RS_LANE_NVL ? c->nvl_rank[p->peer] : (int)p->peer;
        if (p->send) r = nccl_check(ncclSend(p->ptr, p->bytes, ncclUint8, peer, comm, s), comm, (int)x->rank, "ncclSend");
        else r = nccl_check(ncclRecv(p->ptr, p->bytes, ncclUint8, peer, comm, s), comm, (int)x->rank, "ncclRecv");
    }
    ncclResult_t e = ncclGroupEnd();
    rsResult_t r2 = nccl_check(e, comm, (int)x->rank, "ncclGroupEnd");
    if (r == rsSuccess && r2 == rsSuccess && e == ncclInProgress) r2 = nonblocking_wait(x, comm);
    return r != rsSuccess ? r : r2;
}

static rsResult_t nc_done(rs_exec *x, int lane, uint32_t step)
{
    if (x->xs[step].waited) RS_CUDA(x, cudaEventRecord(st(x)->g.ev_step[step], st(x)->g.lane[lane]));
    return rsSuccess;
}

static void nc_mark(rs_exec *x, uint32_t step, int begin) { rs_gpu_mark(&st(x)->g, x, step, begin); }

static rsResult_t nc_prepare(rs_exec *x) { return rs_gpu_prepare(&st(x)->g, x); }

static void nc_abort_now(rs_exec *x)
{
    nc_state *c = st(x);
    pthread_mutex_lock(&c->mu);
    if (!atomic_exchange(&c->aborted, 1)) {
        for (int l = RS_NLANES - 1; l >= 0; l--)
            if (c->comm[l] && (l == RS_LANE_NET || c->comm[l] != c->comm[RS_LANE_NET])) ncclCommAbort(c->comm[l]);
        RS_LOG(RS_LOG_INFO, (int)x->rank, "NCCL communicators aborted");
    }
    pthread_mutex_unlock(&c->mu);
}

/* rsExecAbort, from any thread (x->abort_flag is already set): now, unless a run is being issued. */
static void nc_abort(rs_exec *x)
{
    nc_state *c = st(x);
    pthread_mutex_lock(&c->mu);
    int deferred = c->issuing;
    pthread_mutex_unlock(&c->mu);
    if (!deferred) nc_abort_now(x);
}

static rsResult_t nc_run(rs_exec *x)
{
    nc_state *c = st(x);
    if (atomic_load(&c->aborted)) return rs_rt_err(rsAborted, "rank %u: the executor was aborted", x->rank);
    rs_gpu *g = &c->g;
    RS_CUDA(x, cudaSetDevice(g->device));
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    RS_CUDA(x, cudaStreamIsCapturing(g->user, &cs));
    c->captured = cs == cudaStreamCaptureStatusActive;
    RS_CUDA(x, cudaEventRecord(g->ev_start, g->user));
    for (int l = 0; l < RS_NLANES; l++)
        if (x->nlane[l]) RS_CUDA(x, cudaStreamWaitEvent(g->lane[l], g->ev_start, 0));
    pthread_mutex_lock(&c->mu);
    int stop = atomic_load(&x->abort_flag) || atomic_load(&c->aborted);
    if (!stop) c->issuing = 1;
    pthread_mutex_unlock(&c->mu);
    rsResult_t r = stop ? rs_rt_err(rsAborted, "rank %u: the run was aborted (rsExecAbort)", x->rank)
                        : rs_exec_walk(x, -1, &x->abort_flag);
    pthread_mutex_lock(&c->mu);
    c->issuing = 0;
    pthread_mutex_unlock(&c->mu);
    if (r == rsSuccess && atomic_load(&x->abort_flag)) /* an abort deferred while the last step was issued */
        r = rs_rt_err(rsAborted, "rank %u: the run was aborted (rsExecAbort)", x->rank);
    if (r != rsSuccess) {
        /* Half a run is queued and peers wait for the rest: abort so that nobody hangs. */
        char msg[RS_ERRLEN];
        snprintf(msg, sizeof msg, "%s", rs_rt_err_msg());
        rs_exec_fail(x, r, "%s", msg);
        nc_abort_now(x);
        return rs_rt_err(r, "%s", msg);
    }
    for (int l = 0; l < RS_NLANES; l++) {
        if (!x->nlane[l]) continue;
        RS_CUDA(x, cudaEventRecord(g->ev_end[l], g->lane[l]));
        RS_CUDA(x, cudaStreamWaitEvent(g->user, g->ev_end[l], 0));
    }
    RS_CUDA(x, cudaEventRecord(g->ev_done, g->user));
    if (!c->captured) c->plain_pending = 1;
    x->run_res = rsSuccess;
    x->run_err[0] = 0;
    return rsSuccess;
}

static rsResult_t nc_sync(rs_exec *x, int wait)
{
    nc_state *c = st(x);
    double t0 = rs_now();
    long ns = 1000;
    for (;;) {
        if (atomic_load(&c->aborted) || atomic_load(&x->abort_flag))
            return rs_rt_err(rsAborted, "rank %u: the run was aborted (rsExecAbort)", x->rank);
        if (c->captured && !c->plain_pending) return rsSuccess;
        cudaSetDevice(c->g.device);
        cudaError_t e = cudaEventQuery(c->g.ev_done);
        if (e == cudaSuccess) {
            c->plain_pending = 0;
            return rsSuccess;
        }
        if (e != cudaErrorNotReady) return rs_cuda_check(e, x, "run");
        rsResult_t r = rsSuccess;
        pthread_mutex_lock(&c->mu);
        for (int l = 0; l < RS_NLANES && r == rsSuccess && !atomic_load(&c->aborted); l++) {
            ncclResult_t ae = ncclSuccess;
            if (c->comm[l] && ncclCommGetAsyncError(c->comm[l], &ae) == ncclSuccess && ae != ncclSuccess &&
                ae != ncclInProgress)
                r = nccl_check(ae, c->comm[l], (int)x->rank, l ? "NVL communicator" : "NET communicator");
        }
        pthread_mutex_unlock(&c->mu);
        if (r != rsSuccess) {
            nc_abort_now(x);
            return r;
        }
        if (!wait) return rsInProgress;
        if (x->cfg.timeoutMs > 0 && rs_now() - t0 > x->cfg.timeoutMs / 1000.0) {
            r = rs_rt_err(rsTimeout, "rank %u: the run did not complete within %d ms (a peer never ran?); the "
                                     "communicators were aborted", x->rank, x->cfg.timeoutMs);
            nc_abort_now(x);
            return r;
        }
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 1000000) ns *= 2;
    }
}

static void nc_free(rs_exec *x, nc_state *c)
{
    if (!c) return;
    cudaSetDevice(c->g.device);
    if (!atomic_load(&c->aborted)) cudaStreamSynchronize(c->g.user);
    rs_gpu_free(&c->g, x);
    if (!atomic_load(&c->aborted)) {
        if (c->comm[RS_LANE_NVL] && c->own[RS_LANE_NVL]) ncclCommDestroy(c->comm[RS_LANE_NVL]);
        if (c->comm[RS_LANE_NET] && c->own[RS_LANE_NET]) ncclCommDestroy(c->comm[RS_LANE_NET]);
    }
    free(c->nvl_rank);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static void nc_destroy(rs_exec *x)
{
    nc_free(x, x->tp);
    x->tp = NULL;
}

/* The entries the caller's thread runs, with its current device put back (gpu.h). */
static rsResult_t nc_prepare_k(rs_exec *x) { RS_GPU_KEEP_DEVICE(rsResult_t, nc_prepare(x)); }
static rsResult_t nc_run_k(rs_exec *x) { RS_GPU_KEEP_DEVICE(rsResult_t, nc_run(x)); }
static rsResult_t nc_sync_k(rs_exec *x, int wait) { RS_GPU_KEEP_DEVICE(rsResult_t, nc_sync(x, wait)); }
static void nc_abort_k(rs_exec *x) { RS_GPU_KEEP_DEVICE_VOID(nc_abort(x)); }
static void nc_destroy_k(rs_exec *x) { RS_GPU_KEEP_DEVICE_VOID(nc_destroy(x)); }

static const rs_transport nc_transport = {
    .name = "nccl",
    .kind = rsTransportNccl,
    .threaded = 0,
    .wait = nc_wait,
    .copies = nc_copies,
    .group = nc_group,
    .done = nc_done,
    .mark = nc_mark,
    .prepare = nc_prepare_k,
    .run = nc_run_k,
    .sync = nc_sync_k,
    .abort = nc_abort_k,
    .destroy = nc_destroy_k,
};

/* Connect every peer of each lane now, in one group per communicator, so that no ncclGroupEnd of a run
 * blocks the host on a connection handshake (which could deadlock the two lanes issued from one thread). */
static rsResult_t warm_up(rs_exec *x, nc_state *c)
{
    size_t nbytes = 2 * (size_t)(x->np2p + 1);
    char *scratch = NULL;
    RS_CUDA(x, cudaMalloc((void **)&scratch, nbytes));
    rsResult_t r = rsSuccess;
    int pending = 0; /* connects were issued */
    for (int l = 0; l < RS_NLANES && r == rsSuccess; l++) {
        if (!c->comm[l] || !x->nlane[l]) continue;
        uint8_t *seen = calloc(2 * (size_t)x->world, 1);
        if (!seen) {
            r = rs_rt_err(rsSystemError, "out of memory");
            break;
        }
        r = nccl_check(ncclGroupStart(), c->comm[l], (int)x->rank, "ncclGroupStart");
        pending = 1;
        size_t k = 1;
        for (uint32_t s = 0; s < x->nlane[l] && r == rsSuccess; s++) {
            const rs_xstep *xs = &x->xs[x->lane_steps[l][s]];
            for (uint32_t i = 0; i < xs->np2p && r == rsSuccess; i++) {
                const rs_xp2p *p = &x->p2p[xs->p2p + i];
                uint8_t *f = &seen[2 * (size_t)p->peer + p->send];
                if (*f) continue;
                *f = 1;
                int peer = l == RS_LANE_NVL ? c->nvl_rank[p->peer] : (int)p->peer;
                if (p->send) r = nccl_check(ncclSend(scratch, 1, ncclUint8, peer, c->comm[l], c->g.lane[l]), c->comm[l], (int)x->rank, "ncclSend (connect)");
                else r = nccl_check(ncclRecv(scratch + k++, 1, ncclUint8, peer, c->comm[l], c->g.lane[l]), c->comm[l], (int)x->rank, "ncclRecv (connect)");
            }
        }
        ncclResult_t e = ncclGroupEnd();
        rsResult_t r2 = nccl_check(e, c->comm[l], (int)x->rank, "ncclGroupEnd (connect)");
        if (r == rsSuccess) r = r2;
        if (r == rsSuccess && e == ncclInProgress) r = nonblocking_wait(x, c->comm[l]);
        if (r == rsSuccess) r = stream_wait(c->g.lane[l], c->comm[l], (int)x->rank, x->cfg.timeoutMs, "connecting peers");
        free(seen);
    }
    /* connects that did not complete still wait on the GPU for scratch: abort them before cudaFree, which
     * would wait for them (a peer that failed after the agreement would hang this rank, not time it out) */
    if (r != rsSuccess && pending) nc_abort_now(x);
    cudaFree(scratch);
    return r;
}

/* The world communicator from an ncclUniqueId. Non-blocking when the executor has a timeout, so that a rank
 * that never calls init (or dies in it) fails the others with rsTimeout after timeout_ms instead of leaving
 * them in ncclCommInitRank forever: the handle exists at once and is polled, and aborted when it does not
 * settle. A non-blocking world makes the NVLink split and every later call non-blocking too (nc_group and
 * the agreement poll them). */
static rsResult_t world_init(ncclComm_t *world, int nranks, ncclUniqueId uid, int rank, int timeout_ms)
{
    *world = NULL;
    if (timeout_ms <= 0)
        return nccl_check(ncclCommInitRank(world, nranks, uid, rank), NULL, rank, "ncclCommInitRank");
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t e = ncclCommInitRankConfig(world, nranks, uid, rank, &config);
    rsResult_t r = nccl_check(e, *world, rank, "ncclCommInitRankConfig");
    if (r == rsSuccess && !*world)
        r = rs_rt_err(rsTransportError, "rank %d: ncclCommInitRankConfig gave no communicator", rank);
    if (r == rsSuccess) r = comm_settle(*world, rank, timeout_ms, NULL, "ncclCommInitRankConfig");
    if (r != rsSuccess) {
        if (r == rsTimeout)
            rs_rt_err(rsTimeout, "rank %d: creating the communicator of %d ranks timed out after %d ms: some rank "
                                 "never called rsExecCreateNcclFromId with this id", rank, nranks, timeout_ms);
        if (*world) ncclCommAbort(*world);
        *world = NULL;
    }
    return r;
}

static rsResult_t nc_create(struct rsPlan *plan, void *comm_in, const void *id, int nranks, int rank,
                            const rsConfig_t *cfg, rsExec_t *out)
{
    ncclComm_t world = comm_in;
    int own_world = 0, dev = -1, n = 0, crank = 0;
    if (!world) {
        dev = cfg->device;
        if (dev < 0 && cudaGetDevice(&dev) != cudaSuccess) dev = 0;
        RS_TRY(rs_cuda_check(cudaSetDevice(dev), NULL, "cudaSetDevice"));
        ncclUniqueId uid;
        memcpy(&uid, id, sizeof uid);
        RS_TRY(world_init(&world, nranks, uid, rank, cfg->timeoutMs));
        own_world = 1;
    }
    rsResult_t r = nccl_check(ncclCommCount(world, &n), world, -1, "ncclCommCount");
    if (r == rsSuccess) r = nccl_check(ncclCommUserRank(world, &crank), world, -1, "ncclCommUserRank");
    if (r == rsSuccess) r = nccl_check(ncclCommCuDevice(world, &dev), world, -1, "ncclCommCuDevice");
    if (r != rsSuccess) {
        if (own_world) ncclCommDestroy(world);
        return r;
    }
    /* Local setup first (executor, streams, events, staging); its outcome travels with the agreement record
     * so that every rank fails together instead of some entering the collective calls below alone. */
    rs_exec *x = NULL;
    nc_state *c = NULL;
    rsResult_t local = rs_exec_new(plan, crank, cfg, &x);
    if (local == rsSuccess) {
        c = calloc(1, sizeof *c);
        if (!c) local = rs_rt_err(rsSystemError, "out of memory");
    }
    if (local == rsSuccess) {
        pthread_mutex_init(&c->mu, NULL);
        atomic_init(&c->aborted, 0);
        c->comm[RS_LANE_NET] = world;
        c->own[RS_LANE_NET] = own_world;
        x->tr = &nc_transport;
        x->tp = c;
        local = rs_gpu_init(&c->g, x, dev);
    }
    char local_msg[RS_ERRLEN];
    snprintf(local_msg, sizeof local_msg, "%s", rs_rt_err_msg());
    rs_agree_rec mine = {plan->P.plan_fp, plan->P.source_fp, plan->P.layout.topo.world, (uint32_t)crank,
                         (uint32_t)local, x ? (uint32_t)x->has_nvl : 0};
    rs_agree_rec *all = calloc((size_t)n, sizeof *all);
    int aborted = 0;
    if (!all) r = rs_rt_err(rsSystemError, "out of memory");
    else r = agree(world, dev, crank, n, &mine, cfg->timeoutMs, all, &aborted);
    if (r == rsSuccess && local != rsSuccess) r = rs_rt_err(local, "%s", local_msg);
    if (r == rsSuccess) {
        char msg[RS_ERRLEN];
        r = rs_agree_check(all, (uint32_t)n, msg, sizeof msg);
        if (r != rsSuccess) rs_rt_err(r, "rank %d: %s", crank, msg);
    }
    int any_nvl = 0;
    for (int i = 0; all && i < n; i++) any_nvl |= all[i].has_nvl != 0;
    free(all);
    if (r != rsSuccess) {
        if (c) {
            c->own[RS_LANE_NET] = 0; /* destroyed below, unless aborted */
            nc_free(x, c);
            x->tp = NULL;
        }
        if (x) rs_exec_free(x);
        if (own_world && !aborted) ncclCommDestroy(world);
        return r;
    }

    /* The NVLink-domain communicator (collective over the world: every rank decides alike from `all`). */
    if (r == rsSuccess && any_nvl) {
        const rs_topology *T = &x->P->layout.topo;
        c->nvl_rank = malloc(x->world * sizeof *c->nvl_rank);
        if (!c->nvl_rank) r = rs_rt_err(rsSystemError, "out of memory");
        int32_t k = 0;
        for (uint32_t q = 0; q < x->world && r == rsSuccess; q++)
            c->nvl_rank[q] = T->domain_of[q] == T->domain_of[x->rank] ? k++ : -1;
        if (r == rsSuccess)
            r = nccl_check(ncclCommSplit(world, (int)T->domain_of[x->rank], crank, &c->comm[RS_LANE_NVL], NULL), world,
                           crank, "ncclCommSplit (NVLink domain)");
        if (r == rsSuccess) {
            c->own[RS_LANE_NVL] = 1;
            r = nonblocking_wait(x, c->comm[RS_LANE_NVL]); /* a non-blocking parent makes a non-blocking child */
        }
        if (r == rsSuccess) {
            int m = 0;
            r = nccl_check(ncclCommCount(c->comm[RS_LANE_NVL], &m), c->comm[RS_LANE_NVL], crank, "ncclCommCount");
            if (r == rsSuccess && m != k)
                r = rs_rt_err(rsInternalError, "rank %d: the NVLink-domain communicator has %d ranks, the plan's "
                                               "domain %d", crank, m, k);
        }
    }
    if (r == rsSuccess) r = warm_up(x, c);
    if (r == rsSuccess && x->prepared) {
        rs_exec_resolve(x);
        r = rs_gpu_prepare(&c->g, x);
    }
    if (r != rsSuccess) {
        if (r == rsTimeout) nc_abort_now(x);
        nc_free(x, c);
        x->tp = NULL;
        rs_exec_free(x);
        return r;
    }
    RS_LOG(RS_LOG_INFO, crank, "NCCL executor on device %d: %u NET + %u NVL steps, NVL communicator %s", dev,
           x->nlane[0], x->nlane[1], c->comm[RS_LANE_NVL] ? "split" : "not needed");
    *out = x;
    return rsSuccess;
}

rsResult_t rs_nccl_exec_create(struct rsPlan *plan, void *comm_in, const void *id, int nranks, int rank,
                               const rsConfig_t *cfg, rsExec_t *out)
{
    RS_GPU_KEEP_DEVICE(rsResult_t, nc_create(plan, comm_in, id, nranks, rank, cfg, out));
}
