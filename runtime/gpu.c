/* gpu.c - device-side pieces shared by the CUDA transports: lane streams and events, the kernel
 * descriptors (built from the executor's resolved jobs and uploaded once when the bindings complete, so
 * that a run only launches), staging in device memory, bounded waits on events, NVTX ranges per step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nvtx3/nvToolsExt.h>

#include "gpu.h"

int rs_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" error */
        return 0;
    }
    return n;
}

rsResult_t rs_cuda_check(cudaError_t e, const rs_exec *x, const char *what)
{
    if (e == cudaSuccess) return rsSuccess;
    return rs_rt_err(rsTransportError, "rank %d: %s: %s (%s)", x ? (int)x->rank : -1, what, cudaGetErrorString(e),
                     cudaGetErrorName(e));
}

rsResult_t rs_gpu_init(rs_gpu *g, rs_exec *x, int device)
{
    memset(g, 0, sizeof *g);
    g->device = device;
    RS_CUDA(x, cudaSetDevice(device));
    RS_CUDA(x, cudaDeviceGetAttribute(&g->nsm, cudaDevAttrMultiProcessorCount, device));
    if (x->cfg.stream) {
        g->user = (cudaStream_t)x->cfg.stream;
    } else {
        RS_CUDA(x, cudaStreamCreateWithFlags(&g->user, cudaStreamNonBlocking));
        g->own_user = 1;
        x->cfg.stream = g->user;
    }
    for (int l = 0; l < RS_NLANES; l++) RS_CUDA(x, cudaStreamCreateWithFlags(&g->lane[l], cudaStreamNonBlocking));
    RS_CUDA(x, cudaEventCreateWithFlags(&g->ev_start, cudaEventDisableTiming));
    RS_CUDA(x, cudaEventCreateWithFlags(&g->ev_done, cudaEventDisableTiming));
    for (int l = 0; l < RS_NLANES; l++) RS_CUDA(x, cudaEventCreateWithFlags(&g->ev_end[l], cudaEventDisableTiming));
    uint32_t ns = x->prog->nsteps;
    g->ev_step = calloc(ns ? ns : 1, sizeof *g->ev_step);
    g->ntiles = calloc(x->njobs ? x->njobs : 1, sizeof *g->ntiles);
    g->nvtx_names = calloc(ns ? ns : 1, sizeof *g->nvtx_names);
    if (!g->ev_step || !g->ntiles || !g->nvtx_names) return rs_rt_err(rsSystemError, "out of memory");
    for (uint32_t s = 0; s < ns; s++)
        if (x->xs[s].waited) RS_CUDA(x, cudaEventCreateWithFlags(&g->ev_step[s], cudaEventDisableTiming));
    /* staging */
    uint64_t need = x->prog->staging_bytes;
    if (x->cfg.staging) {
        if (x->cfg.stagingBytes < need)
            return rs_rt_err(rsInvalidArgument, "rank %u: config.stagingBytes %zu is smaller than the plan's %llu",
                             x->rank, x->cfg.stagingBytes, (unsigned long long)need);
        x->staging = x->cfg.staging;
    } else if (need) {
        void *p = NULL;
        cudaError_t e = cudaMalloc(&p, need);
        if (e != cudaSuccess)
            return rs_rt_err(rsSystemError, "rank %u: cannot allocate %llu bytes of device staging: %s", x->rank,
                             (unsigned long long)need, cudaGetErrorString(e));
        x->staging = p;
        g->own_staging = 1;
    }
    /* NVTX: one registered name per step, so a run only pushes and pops. */
    nvtxDomainHandle_t dom = nvtxDomainCreateA("reshard");
    g->nvtx_domain = dom;
    for (uint32_t s = 0; s < ns; s++) {
        char name[96];
        const rs_xstep *xs = &x->xs[s];
        snprintf(name, sizeof name, "reshard r%u step %u %s (%u send, %u recv)", x->rank, s,
                 xs->lane == RS_LANE_NVL ? "NVL" : "NET", xs->nsend, xs->nrecv);
        g->nvtx_names[s] = nvtxDomainRegisterStringA(dom, name);
    }
    return rsSuccess;
}

rsResult_t rs_gpu_prepare(rs_gpu *g, rs_exec *x)
{
    if (!x->njobs) return rsSuccess;
    rs_kjob *k = calloc(x->njobs, sizeof *k);
    if (!k) return rs_rt_err(rsSystemError, "out of memory");
    memset(g->ntiles, 0, x->njobs * sizeof *g->ntiles);
    for (uint32_t s = 0; s < x->prog->nsteps; s++) {
        const rs_xstep *xs = &x->xs[s];
        for (int phase = 1; phase <= 3; phase += 2) {
            uint32_t first = phase == 1 ? xs->job1 : xs->job3, n = phase == 1 ? xs->njob1 : xs->njob3;
            uint64_t bytes = phase == 1 ? xs->bytes1 : xs->bytes3;
            if (!n) continue;
            /* Tile size: enough blocks to fill the device, 4 KiB .. 64 KiB per block. */
            uint64_t tile = rs_kjob_tile_bytes(bytes, g->nsm), tiles = 0;
            for (uint32_t i = 0; i < n; i++) {
                const rs_xjob *j = &x->jobs[first + i];
                tiles += rs_kjob_build(&k[first + i], j->sp, j->s.ndim, j->s.count, j->s.stride, j->dp, j->d.ndim,
                                       j->d.count, j->d.stride, j->bytes, tile, tiles);
            }
            g->ntiles[first] = tiles;
        }
    }
    rsResult_t r = rs_cuda_check(cudaSetDevice(g->device), x, "cudaSetDevice");
    if (r == rsSuccess && !g->djobs) r = rs_cuda_check(cudaMalloc((void **)&g->djobs, x->njobs * sizeof *k), x, "cudaMalloc(jobs)");
    /* On a lane stream, waited for: a synchronous copy from pageable memory may return before its DMA lands,
     * and the lane streams (non-blocking) are not ordered after it, so a first kernel could read old jobs. */
    if (r == rsSuccess)
        r = rs_cuda_check(cudaMemcpyAsync(g->djobs, k, x->njobs * sizeof *k, cudaMemcpyHostToDevice, g->lane[0]), x,
                          "cudaMemcpyAsync(jobs)");
    if (r == rsSuccess) r = rs_cuda_check(cudaStreamSynchronize(g->lane[0]), x, "cudaStreamSynchronize(jobs)");
    free(k);
    return r;
}

rsResult_t rs_gpu_copies(rs_gpu *g, rs_exec *x, int lane, uint32_t step, int phase)
{
    const rs_xstep *xs = &x->xs[step];
    uint32_t first = phase == 1 ? xs->job1 : xs->job3, n = phase == 1 ? xs->njob1 : xs->njob3;
    int e = rs_cuda_copy_launch(g->djobs + first, n, g->ntiles[first], g->lane[lane]);
    return rs_cuda_check((cudaError_t)e, x, "copy kernel launch");
}

rsResult_t rs_gpu_event_wait(rs_exec *x, cudaEvent_t ev, int wait, const atomic_int *abort_flag)
{
    double t0 = rs_now();
    long sleep_ns = 1000;
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess) return rsSuccess;
        if (e != cudaErrorNotReady) return rs_cuda_check(e, x, "waiting for the device");
        if (!wait) return rsInProgress;
        if (abort_flag && atomic_load(abort_flag)) return rs_rt_err(rsAborted, "rank %u: aborted", x->rank);
        if (x->cfg.timeoutMs > 0 && rs_now() - t0 > x->cfg.timeoutMs / 1000.0)
            return rs_rt_err(rsTimeout, "rank %u: the device did not finish the run within %d ms", x->rank,
                             x->cfg.timeoutMs);
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 1000000) sleep_ns *= 2;
    }
}

void rs_gpu_mark(rs_gpu *g, rs_exec *x, uint32_t step, int begin)
{
    nvtxDomainHandle_t dom = g->nvtx_domain;
    if (!begin) {
        nvtxDomainRangePop(dom);
        return;
    }
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = x->xs[step].lane == RS_LANE_NVL ? 0xff76b900u : 0xff1f77b4u;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = (nvtxStringHandle_t)g->nvtx_names[step];
    nvtxDomainRangePushEx(dom, &a);
}

int rs_gpu_device_get(void)
{
    int d = -1;
    if (cudaGetDevice(&d) != cudaSuccess) {
        cudaGetLastError(); /* not sticky: clear it */
        return -1;
    }
    return d;
}

void rs_gpu_device_put(int device)
{
    if (device >= 0 && cudaSetDevice(device) != cudaSuccess) cudaGetLastError();
}

void rs_gpu_free(rs_gpu *g, rs_exec *x)
{
    cudaSetDevice(g->device);
    if (g->ev_step)
        for (uint32_t s = 0; s < x->prog->nsteps; s++)
            if (g->ev_step[s]) cudaEventDestroy(g->ev_step[s]);
    free(g->ev_step);
    free(g->ntiles);
    free(g->nvtx_names);
    if (g->djobs) cudaFree(g->djobs);
    if (g->own_staging && x->staging) cudaFree(x->staging);
    if (g->own_staging) x->staging = NULL;
    for (int l = 0; l < RS_NLANES; l++) {
        if (g->ev_end[l]) cudaEventDestroy(g->ev_end[l]);
        if (g->lane[l]) cudaStreamDestroy(g->lane[l]);
    }
    if (g->ev_start) cudaEventDestroy(g->ev_start);
    if (g->ev_done) cudaEventDestroy(g->ev_done);
    if (g->own_user && g->user) cudaStreamDestroy(g->user);
    if (g->nvtx_domain) nvtxDomainDestroy(g->nvtx_domain);
    memset(g, 0, sizeof *g);
}
