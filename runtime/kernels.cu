// kernels.cu - the batched strided copy kernel behind PACK, UNPACK and COPY on the CUDA transports: one
// launch per step phase over a descriptor array uploaded at bind time; vectorized (up to 16 bytes) copies.
#include <cuda_runtime.h>

#include "kernels.h"

static_assert(sizeof(rs_kjob) % 8 == 0, "rs_kjob is copied to shared memory in 8-byte words");

#define RS_THREADS RS_KJOB_THREADS
#define seg_off rs_kjob_seg_off

// INFLIGHT and LONG are RS_KJOB_INFLIGHT and RS_KJOB_LONG_SEGMENT, except in the benchmark's variants.
template <typename T, int INFLIGHT, int LONG>
__device__ __forceinline__ void tile_copy(const rs_kjob &j, uint64_t v0, uint64_t v1)
{
    const uint64_t vps = j.vps;
    const uint32_t bd = blockDim.x, tid = threadIdx.x;
    if (vps >= LONG) {
        // Long segments: the block walks them one by one, threads striding inside, 4 loads in flight.
        uint64_t k = v0 / vps, w = v0 - k * vps, v = v0;
        while (v < v1) {
            uint64_t n = vps - w;
            if (n > v1 - v) n = v1 - v;
            const T *__restrict__ s = (const T *)(j.src + seg_off(j.scount, j.sstride, j.snd, k)) + w;
            T *__restrict__ d = (T *)(j.dst + seg_off(j.dcount, j.dstride, j.dnd, k)) + w;
            uint64_t i = tid;
            for (; i + 3 * (uint64_t)bd < n; i += 4 * (uint64_t)bd) {
                T a = s[i], b = s[i + bd], c = s[i + 2 * bd], e = s[i + 3 * bd];
                d[i] = a;
                d[i + bd] = b;
                d[i + 2 * bd] = c;
                d[i + 3 * bd] = e;
            }
            for (; i < n; i += bd) d[i] = s[i];
            v += n;
            k++;
            w = 0;
        }
    } else {
        // Short segments: each thread takes vectors tid, tid + bd, ... of the tile, INFLIGHT loads in flight.
        // Its segment k and offset w advance by (bd / vps, bd % vps) per vector: two divisions per thread,
        // not one per vector.
        const uint64_t qb = bd / vps, rb = bd - qb * vps;
        uint64_t v = v0 + tid, k = v / vps, w = v - k * vps;
        while (v < v1) {
            T *d[INFLIGHT];
            T x[INFLIGHT];
            int m = 0;
#pragma unroll
            for (int i = 0; i < INFLIGHT; i++) {
                if (v < v1) { // the load is issued here; its value is first used by the stores below
                    x[i] = *((const T *)(j.src + seg_off(j.scount, j.sstride, j.snd, k)) + w);
                    d[i] = (T *)(j.dst + seg_off(j.dcount, j.dstride, j.dnd, k)) + w;
                    m = i + 1;
                    v += bd, k += qb, w += rb;
                    if (w >= vps) w -= vps, k++;
                }
            }
#pragma unroll
            for (int i = 0; i < INFLIGHT; i++)
                if (i < m) *d[i] = x[i];
        }
    }
}

template <int INFLIGHT, int LONG>
__global__ void __launch_bounds__(RS_THREADS) rs_copy_kernel(const rs_kjob *__restrict__ jobs, uint32_t njobs)
{
    __shared__ rs_kjob sj;
    __shared__ uint32_t sidx;
    const uint64_t t = blockIdx.x;
    if (threadIdx.x == 0) { // the job whose tiles contain t
        uint32_t lo = 0, hi = njobs - 1;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo + 1) / 2;
            if (jobs[mid].tile_begin <= t) lo = mid;
            else hi = mid - 1;
        }
        sidx = lo;
    }
    __syncthreads();
    const unsigned long long *from = (const unsigned long long *)&jobs[sidx];
    unsigned long long *to = (unsigned long long *)&sj;
    for (uint32_t i = threadIdx.x; i < sizeof(rs_kjob) / 8; i += blockDim.x) to[i] = from[i];
    __syncthreads();
    uint64_t v0 = (t - sj.tile_begin) * sj.tile_vecs, v1 = v0 + sj.tile_vecs;
    if (v1 > sj.nvec) v1 = sj.nvec;
    switch (sj.vlog) {
    case 4: tile_copy<uint4, INFLIGHT, LONG>(sj, v0, v1); break;
    case 3: tile_copy<uint2, INFLIGHT, LONG>(sj, v0, v1); break;
    case 2: tile_copy<unsigned int, INFLIGHT, LONG>(sj, v0, v1); break;
    case 1: tile_copy<unsigned short, INFLIGHT, LONG>(sj, v0, v1); break;
    default: tile_copy<unsigned char, INFLIGHT, LONG>(sj, v0, v1); break;
    }
}

template <int INFLIGHT, int LONG> static int launch(const rs_kjob *jobs, uint32_t njobs, uint64_t ntiles, void *stream)
{
    if (!njobs || !ntiles) return 0;
    if (ntiles > 0x7fffffffull) return (int)cudaErrorInvalidConfiguration;
    rs_copy_kernel<INFLIGHT, LONG><<<(unsigned)ntiles, RS_THREADS, 0, (cudaStream_t)stream>>>(jobs, njobs);
    return (int)cudaGetLastError();
}

extern "C" int rs_cuda_copy_launch(const rs_kjob *jobs, uint32_t njobs, uint64_t ntiles, void *stream)
{
    return launch<RS_KJOB_INFLIGHT, RS_KJOB_LONG_SEGMENT>(jobs, njobs, ntiles, stream);
}

extern "C" int rs_cuda_copy_launch_variant(const rs_kjob *jobs, uint32_t njobs, uint64_t ntiles, void *stream,
                                           int inflight, int long_segment)
{
    if (inflight == 1 && long_segment == 64) return launch<1, 64>(jobs, njobs, ntiles, stream);
    if (inflight == 1 && long_segment == 1024) return launch<1, 1024>(jobs, njobs, ntiles, stream);
    if (inflight == 2 && long_segment == 1024) return launch<2, 1024>(jobs, njobs, ntiles, stream);
    if (inflight == 4 && long_segment == 1024) return launch<4, 1024>(jobs, njobs, ntiles, stream);
    return (int)cudaErrorInvalidValue;
}
