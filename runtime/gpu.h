/* gpu.h - device-side state shared by the CUDA transports (single process and NCCL): streams per lane,
 * events for cross-lane waits, the copy descriptors uploaded once at bind time, staging, NVTX ranges. */
#ifndef RS_GPU_H
#define RS_GPU_H

#include <cuda_runtime_api.h>

#include "kernels.h"
#include "rt.h"

typedef struct {
    int device;
    int nsm;
    cudaStream_t user;
    int own_user;
    cudaStream_t lane[RS_NLANES];
    cudaEvent_t ev_start, ev_end[RS_NLANES], ev_done;
    cudaEvent_t *ev_step; /* [nsteps]; NULL where no step waits */
    rs_kjob *djobs;       /* device copy of every job, in x->jobs order */
    uint64_t *ntiles;     /* [njobs]: tiles of the batch starting at that job (set at batch starts) */
    int own_staging;
    void *nvtx_domain;
    void **nvtx_names; /* [nsteps] registered strings */
} rs_gpu;

/* cudaError_t -> rsTransportError with a message; cudaSuccess -> rsSuccess. */
rsResult_t rs_cuda_check(cudaError_t e, const rs_exec *x, const char *what);
#define RS_CUDA(x, call) RS_TRY(rs_cuda_check((call), (x), #call))

/* Device, streams (the user's or an own one, plus one per lane), events, staging. */
rsResult_t rs_gpu_init(rs_gpu *g, rs_exec *x, int device);
/* Bindings complete: build the kernel jobs from the resolved pointers and upload them (synchronous). */
rsResult_t rs_gpu_prepare(rs_gpu *g, rs_exec *x);
/* Phase 1 or 3 of a step: one kernel launch on the lane's stream. */
rsResult_t rs_gpu_copies(rs_gpu *g, rs_exec *x, int lane, uint32_t step, int phase);
/* Wait (bounded by the timeout, polling) until ev completes; rsInProgress when !wait and not complete. */
rsResult_t rs_gpu_event_wait(rs_exec *x, cudaEvent_t ev, int wait, const atomic_int *abort_flag);
void rs_gpu_mark(rs_gpu *g, rs_exec *x, uint32_t step, int begin);
void rs_gpu_free(rs_gpu *g, rs_exec *x);

/* The calling thread's current device (-1 when the runtime cannot say), and putting it back: every entry of
 * the CUDA transports that the caller's thread runs (create, prepare, run, sync, abort, destroy) leaves the
 * current device as it found it, as NCCL's and cuBLAS's calls do, since they select the executor's device. */
int rs_gpu_device_get(void);
void rs_gpu_device_put(int device);
/* The transport entries with the caller's device kept (the vtables' run, sync, ... go through these). */
#define RS_GPU_KEEP_DEVICE(type, call)                                                                      \
    do {                                                                                                    \
        int keep_dev_ = rs_gpu_device_get();                                                               \
        type keep_r_ = (call);                                                                             \
        rs_gpu_device_put(keep_dev_);                                                                      \
        return keep_r_;                                                                                    \
    } while (0)
#define RS_GPU_KEEP_DEVICE_VOID(call)                                                                       \
    do {                                                                                                    \
        int keep_dev_ = rs_gpu_device_get();                                                               \
        call;                                                                                              \
        rs_gpu_device_put(keep_dev_);                                                                      \
    } while (0)

#endif
