/* kernels.h - the batched copy kernel's job descriptor, shared by the host code that builds it at bind
 * time (gpu.c) and the CUDA kernel (kernels.cu). One launch copies every PACK, UNPACK or COPY of a step. */
#ifndef RS_KERNELS_H
#define RS_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RS_KDIMS 9 /* descriptor dims + the innermost dim split into segments */

/* A copy between two strided byte streams, cut into segments contiguous on both sides (seg bytes each,
 * a multiple of the vector width). Segment k starts at src + sum(k_i * sstride_i) where (k_i) is k in the
 * mixed radix scount (innermost last), and likewise on the destination side. The job is processed in
 * tiles of tile_vecs vectors; tile_begin is its first tile within the launch. */
typedef struct {
    const char *src;
    char *dst;
    uint64_t nvec;       /* bytes >> vlog */
    uint64_t vps;        /* vectors per segment */
    uint64_t tile_begin; /* first tile of this job in the launch */
    uint64_t tile_vecs;  /* vectors per tile */
    uint32_t vlog;       /* log2 of the vector width in bytes, 0..4 */
    uint32_t snd, dnd;   /* segment index dims per side, 1..RS_KDIMS */
    uint64_t scount[RS_KDIMS], sstride[RS_KDIMS];
    uint64_t dcount[RS_KDIMS], dstride[RS_KDIMS];
} rs_kjob;

#ifdef __CUDACC__
#define RS_HD __host__ __device__ __forceinline__
#else
#define RS_HD static inline
#endif

/* Byte offset of segment k: k in the mixed radix cnt[0..nd) (innermost last). Shared by the kernel and its
 * host emulation. */
RS_HD uint64_t rs_kjob_seg_off(const uint64_t *cnt, const uint64_t *str, uint32_t nd, uint64_t k)
{
    uint64_t off = 0;
    for (int i = (int)nd - 1; i > 0; i--) {
        uint64_t c = cnt[i];
        uint64_t q = k / c;
        off += (k - q * c) * str[i];
        k = q;
    }
    return off + k * str[0];
}

/* Segments of at least this many vectors are walked by a whole block, each thread with 4 loads in flight;
 * shorter ones are spread over the threads vector by vector, RS_KJOB_INFLIGHT loads in flight per thread. A
 * shorter segment would leave threads of the block idle (a 64-vector segment: 3 of 4), and the block's
 * 4-load loop runs only from 4 * RS_KJOB_THREADS vectors. */
#define RS_KJOB_THREADS 256
#define RS_KJOB_LONG_SEGMENT (4 * RS_KJOB_THREADS)
#define RS_KJOB_INFLIGHT 4

/* Launch the batch jobs[0..njobs) (device memory) covering ntiles tiles on `stream` (a cudaStream_t).
 * Returns a cudaError_t value (0 on success). */
int rs_cuda_copy_launch(const rs_kjob *jobs, uint32_t njobs, uint64_t ntiles, void *stream);
/* The same with other INFLIGHT / LONG_SEGMENT values, for the benchmark's comparison: (1, 64), the kernel before
 * 2026-11-30 but for its index math, and (1 | 2 | 4, 1024). Others: cudaErrorInvalidValue. */
int rs_cuda_copy_launch_variant(const rs_kjob *jobs, uint32_t njobs, uint64_t ntiles, void *stream, int inflight,
                                int long_segment);

/* ---- host side, no CUDA needed (kjob.c): building jobs, and an exact emulation of a launch ---- */
/* Tile size in bytes for a batch of `bytes` on a device with nsm multiprocessors (4 KiB .. 64 KiB). */
uint64_t rs_kjob_tile_bytes(uint64_t bytes, int nsm);
/* Build the job for a copy of `bytes` between canonical shapes s (at sp) and d (at dp); its tiles start at
 * first_tile. Returns the number of tiles. Shapes: ndim, count[], stride[] as in rt.h's rs_shape. */
uint64_t rs_kjob_build(rs_kjob *q, const char *sp, uint32_t sndim, const uint64_t *scount, const uint64_t *sstride,
                       char *dp, uint32_t dndim, const uint64_t *dcount, const uint64_t *dstride, uint64_t bytes,
                       uint64_t tile_bytes, uint64_t first_tile);
/* Run a launch on the host: every tile (block) and thread in order, with the kernel's index math. */
void rs_kjob_emulate(const rs_kjob *jobs, uint32_t njobs, uint64_t ntiles, uint32_t threads);

#ifdef __cplusplus
}
#endif
#endif
