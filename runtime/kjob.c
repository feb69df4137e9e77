/* kjob.c - host side of the batched copy kernel, needing no CUDA: building a job from two canonical strided
 * shapes (segments contiguous on both sides, the widest vector all addresses allow, tiles), and an exact host
 * emulation of a launch with the kernel's index math, so the CPU tests cover the GPU descriptors too. */
#include <string.h>

#include "kernels.h"
#include "util.h"

uint64_t rs_kjob_tile_bytes(uint64_t bytes, int nsm)
{
    uint64_t want = bytes / (4 * (uint64_t)(nsm > 0 ? nsm : 1)), t = 4096;
    while (t < want && t < 65536) t <<= 1;
    return t;
}

/* Segment dims of one side: the outer dims, then the innermost run split into (run / seg) segments. */
static uint32_t seg_dims(uint32_t nd, const uint64_t *count, const uint64_t *stride, uint64_t seg, uint64_t *cnt,
                         uint64_t *str)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i + 1 < nd; i++) cnt[n] = count[i], str[n] = stride[i], n++;
    uint64_t inner = count[nd - 1] / seg;
    if (inner > 1 || n == 0) cnt[n] = inner, str[n] = seg, n++;
    return n;
}

uint64_t rs_kjob_build(rs_kjob *q, const char *sp, uint32_t sndim, const uint64_t *scount, const uint64_t *sstride,
                       char *dp, uint32_t dndim, const uint64_t *dcount, const uint64_t *dstride, uint64_t bytes,
                       uint64_t tile_bytes, uint64_t first_tile)
{
    memset(q, 0, sizeof *q);
    uint64_t seg = rs_gcd_u64(scount[sndim - 1], dcount[dndim - 1]);
    q->src = sp;
    q->dst = dp;
    q->snd = seg_dims(sndim, scount, sstride, seg, q->scount, q->sstride);
    q->dnd = seg_dims(dndim, dcount, dstride, seg, q->dcount, q->dstride);
    uint32_t vlog = 4;
    for (; vlog > 0; vlog--) {
        uint64_t m = (1ull << vlog) - 1;
        int ok = !(seg & m) && !((uintptr_t)sp & m) && !((uintptr_t)dp & m);
        for (uint32_t d = 0; d < q->snd; d++) ok &= !(q->sstride[d] & m);
        for (uint32_t d = 0; d < q->dnd; d++) ok &= !(q->dstride[d] & m);
        if (ok) break;
    }
    q->vlog = vlog;
    q->nvec = bytes >> vlog;
    q->vps = seg >> vlog;
    q->tile_vecs = (tile_bytes >> vlog) ? (tile_bytes >> vlog) : 1;
    q->tile_begin = first_tile;
    return (q->nvec + q->tile_vecs - 1) / q->tile_vecs;
}

/* One thread's share of a tile, as in tile_copy<T> of kernels.cu (V = vector bytes). */
static void emu_thread(const rs_kjob *j, uint64_t v0, uint64_t v1, uint32_t tid, uint32_t bd)
{
    const uint64_t V = 1ull << j->vlog, vps = j->vps;
    if (vps >= RS_KJOB_LONG_SEGMENT) {
        uint64_t k = v0 / vps, w = v0 - k * vps, v = v0;
        while (v < v1) {
            uint64_t n = vps - w;
            if (n > v1 - v) n = v1 - v;
            const char *s = j->src + rs_kjob_seg_off(j->scount, j->sstride, j->snd, k) + w * V;
            char *d = j->dst + rs_kjob_seg_off(j->dcount, j->dstride, j->dnd, k) + w * V;
            for (uint64_t i = tid; i < n; i += bd) memcpy(d + i * V, s + i * V, V);
            v += n;
            k++;
            w = 0;
        }
    } else {
        for (uint64_t v = v0 + tid; v < v1; v += bd) {
            uint64_t k = v / vps, w = v - k * vps;
            memcpy(j->dst + rs_kjob_seg_off(j->dcount, j->dstride, j->dnd, k) + w * V,
                   j->src + rs_kjob_seg_off(j->scount, j->sstride, j->snd, k) + w * V, V);
        }
    }
}

void rs_kjob_emulate(const rs_kjob *jobs, uint32_t njobs, uint64_t ntiles, uint32_t threads)
{
    if (!njobs) return;
    for (uint64_t t = 0; t < ntiles; t++) {
        uint32_t lo = 0, hi = njobs - 1; /* the kernel's binary search */
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo + 1) / 2;
            if (jobs[mid].tile_begin <= t) lo = mid;
            else hi = mid - 1;
        }
        const rs_kjob *j = &jobs[lo];
        uint64_t v0 = (t - j->tile_begin) * j->tile_vecs, v1 = v0 + j->tile_vecs;
        if (v1 > j->nvec) v1 = j->nvec;
        for (uint32_t tid = 0; tid < threads; tid++) emu_thread(j, v0, v1, tid, threads);
    }
}
