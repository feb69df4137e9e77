/* transport_cudalocal.c - the CUDA single-process transport: several ranks of a plan in one process (even on
 * one GPU), each with its NET and NVL lane streams and the same copy kernels and events as the NCCL transport;
 * a send/receive pair becomes a device-to-device copy on the receiver's lane, ordered after the sender's
 * phase 1 (event) and before the sender's step completes (event back). Matching comes from local.c. */
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

typedef struct {
    rs_gpu g;
    cudaEvent_t *ev_p2p; /* [np2p]: send: data ready; receive: copy done */
} cl_state;

static cl_state *st(rs_exec *x) { return rs_local_priv(x); }

static rsResult_t cl_wait(rs_exec *x, int lane, uint32_t step)
{
    RS_TRY(rs_local_wait_step(x, lane, step)); /* the other lane has issued the step (host) */
    RS_CUDA(x, cudaStreamWaitEvent(st(x)->g.lane[lane], st(x)->g.ev_step[step], 0));
    return rsSuccess;
}

static rsResult_t cl_copies(rs_exec *x, int lane, uint32_t step, int phase)
{
    return rs_gpu_copies(&st(x)->g, x, lane, step, phase);
}

static rsResult_t cl_done(rs_exec *x, int lane, uint32_t step)
{
    if (x->xs[step].waited) RS_CUDA(x, cudaEventRecord(st(x)->g.ev_step[step], st(x)->g.lane[lane]));
    return rs_local_step_done(x, lane, step);
}

static void cl_mark(rs_exec *x, uint32_t step, int begin) { rs_gpu_mark(&st(x)->g, x, step, begin); }

static rsResult_t cl_pre_send(rs_exec *x, int lane, uint32_t step, rs_msg *msgs, uint32_t n)
{
    const rs_xstep *xs = &x->xs[step];
    uint32_t k = 0;
    for (uint32_t i = 0; i < xs->np2p && k < n; i++) {
        if (!x->p2p[xs->p2p + i].send) continue;
        cudaEvent_t ev = st(x)->ev_p2p[xs->p2p + i];
        RS_CUDA(x, cudaEventRecord(ev, st(x)->g.lane[lane]));
        msgs[k++].ev_ready = ev;
    }
    return rsSuccess;
}

static rsResult_t cl_recv_copy(rs_exec *x, int lane, rs_msg *m, const rs_xp2p *p)
{
    cudaStream_t s = st(x)->g.lane[lane];
    cudaEvent_t done = st(x)->ev_p2p[p - x->p2p];
    RS_CUDA(x, cudaStreamWaitEvent(s, (cudaEvent_t)m->ev_ready, 0));
    RS_CUDA(x, cudaMemcpyAsync(p->ptr, m->ptr, m->bytes, cudaMemcpyDefault, s));
    RS_CUDA(x, cudaEventRecord(done, s));
    m->ev_done = done;
    return rsSuccess;
}

static rsResult_t cl_post_send(rs_exec *x, int lane, uint32_t step, rs_msg *msgs, uint32_t n)
{
    (void)step;
    for (uint32_t i = 0; i < n; i++) RS_CUDA(x, cudaStreamWaitEvent(st(x)->g.lane[lane], (cudaEvent_t)msgs[i].ev_done, 0));
    return rsSuccess;
}

static rsResult_t cl_run_begin(rs_exec *x)
{
    RS_CUDA(x, cudaSetDevice(st(x)->g.device));
    RS_CUDA(x, cudaEventRecord(st(x)->g.ev_start, st(x)->g.user));
    return rsSuccess;
}

static rsResult_t cl_lane_begin(rs_exec *x, int lane)
{
    RS_CUDA(x, cudaSetDevice(st(x)->g.device));
    RS_CUDA(x, cudaStreamWaitEvent(st(x)->g.lane[lane], st(x)->g.ev_start, 0));
    return rsSuccess;
}

static rsResult_t cl_lane_end(rs_exec *x, int lane)
{
    RS_CUDA(x, cudaEventRecord(st(x)->g.ev_end[lane], st(x)->g.lane[lane]));
    return rsSuccess;
}

static rsResult_t cl_finish(rs_exec *x, int wait)
{
    RS_CUDA(x, cudaSetDevice(st(x)->g.device));
    for (int l = 0; l < RS_NLANES; l++) {
        if (!x->nlane[l]) continue;
        rsResult_t r = rs_gpu_event_wait(x, st(x)->g.ev_end[l], wait, &x->abort_flag);
        if (r != rsSuccess) return r;
    }
    return rsSuccess;
}

static rsResult_t cl_prepare(rs_exec *x) { return rs_gpu_prepare(&st(x)->g, x); }

static void cl_free_state(rs_exec *x, cl_state *c)
{
    if (!c) return;
    cudaSetDevice(c->g.device);
    if (c->ev_p2p) {
        /* the device may still use them after a failure: let it drain first */
        cudaDeviceSynchronize();
        for (uint32_t i = 0; i < x->np2p; i++)
            if (c->ev_p2p[i]) cudaEventDestroy(c->ev_p2p[i]);
    }
    free(c->ev_p2p);
    rs_gpu_free(&c->g, x);
    free(c);
}

static void cl_destroy(rs_exec *x)
{
    cl_state *c = x->tp ? st(x) : NULL;
    rs_local_destroy(x);
    cl_free_state(x, c);
}

static const rs_local_ops cl_local_ops = {
    .recv_copy = cl_recv_copy,
    .pre_send = cl_pre_send,
    .post_send = cl_post_send,
    .run_begin = cl_run_begin,
    .lane_begin = cl_lane_begin,
    .lane_end = cl_lane_end,
    .finish = cl_finish,
};

/* The entries the caller's thread runs, with its current device put back (gpu.h); abort only sets flags. */
static rsResult_t cl_prepare_k(rs_exec *x) { RS_GPU_KEEP_DEVICE(rsResult_t, cl_prepare(x)); }
static rsResult_t cl_run_k(rs_exec *x) { RS_GPU_KEEP_DEVICE(rsResult_t, rs_local_run(x)); }
static rsResult_t cl_sync_k(rs_exec *x, int wait) { RS_GPU_KEEP_DEVICE(rsResult_t, rs_local_sync(x, wait)); }
static void cl_destroy_k(rs_exec *x) { RS_GPU_KEEP_DEVICE_VOID(cl_destroy(x)); }

static const rs_transport cl_transport = {
    .name = "cuda-local",
    .kind = rsTransportCudaLocal,
    .threaded = 1,
    .wait = cl_wait,
    .copies = cl_copies,
    .group = rs_local_group_p2p,
    .done = cl_done,
    .mark = cl_mark,
    .prepare = cl_prepare_k,
    .run = cl_run_k,
    .sync = cl_sync_k,
    .abort = rs_local_abort,
    .destroy = cl_destroy_k,
};

static rsResult_t cl_create(struct rsGroup *g, rs_exec *x)
{
    x->tr = &cl_transport;
    int ndev = rs_cuda_device_count();
    int dev = x->cfg.device >= 0 ? x->cfg.device : (ndev > 0 ? (int)(x->rank % (uint32_t)ndev) : 0);
    cl_state *c = calloc(1, sizeof *c);
    rsResult_t r = c ? rsSuccess : rs_rt_err(rsSystemError, "out of memory");
    if (r == rsSuccess && (dev < 0 || dev >= ndev))
        r = rs_rt_err(rsInvalidArgument, "rank %u: CUDA device %d does not exist (%d visible)", x->rank, dev, ndev);
    if (r == rsSuccess) r = rs_gpu_init(&c->g, x, dev);
    if (r == rsSuccess) {
        c->ev_p2p = calloc(x->np2p ? x->np2p : 1, sizeof *c->ev_p2p);
        if (!c->ev_p2p) r = rs_rt_err(rsSystemError, "out of memory");
        for (uint32_t i = 0; i < x->np2p && r == rsSuccess; i++)
            r = rs_cuda_check(cudaEventCreateWithFlags(&c->ev_p2p[i], cudaEventDisableTiming), x, "cudaEventCreate");
    }
    if (r == rsSuccess) {
        /* Peer access between the devices of a process, where the hardware allows it. */
        for (int d = 0; d < ndev; d++) {
            int can = 0;
            if (d != dev && cudaDeviceCanAccessPeer(&can, dev, d) == cudaSuccess && can) cudaDeviceEnablePeerAccess(d, 0);
        }
        cudaGetLastError();
        if (x->prepared) {
            rs_exec_resolve(x);
            r = rs_gpu_prepare(&c->g, x);
        }
    }
    if (r != rsSuccess) {
        rs_local_arrive_failed(g, (int)x->rank, r);
        if (c) {
            x->tp = NULL;
            cudaSetDevice(dev);
            for (uint32_t i = 0; c->ev_p2p && i < x->np2p; i++)
                if (c->ev_p2p[i]) cudaEventDestroy(c->ev_p2p[i]);
            free(c->ev_p2p);
            rs_gpu_free(&c->g, x);
            free(c);
        }
        return r;
    }
    r = rs_local_create(g, x, &cl_local_ops);
    if (r != rsSuccess) {
        cl_state *cc = c;
        cudaSetDevice(dev);
        for (uint32_t i = 0; i < x->np2p; i++)
            if (cc->ev_p2p[i]) cudaEventDestroy(cc->ev_p2p[i]);
        free(cc->ev_p2p);
        rs_gpu_free(&cc->g, x);
        free(cc);
        return r;
    }
    rs_local_set_priv(x, c);
    return rsSuccess;
}

rsResult_t rs_cudalocal_create(struct rsGroup *g, rs_exec *x) { RS_GPU_KEEP_DEVICE(rsResult_t, cl_create(g, x)); }
