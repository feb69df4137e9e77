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

/* Launch the batch jobs[0..njobs) (device memory) covering ntiles tiles on `stream` (a cudaStream_t).
 * Returns a cudaError_t value (0 on success). */
int rs_cuda_copy_launch(const rs_kjob *jobs, uint32_t njobs, uint64_t ntiles, void *stream);

#ifdef __cplusplus
}
#endif
#endif
