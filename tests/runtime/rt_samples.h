/* rt_samples.h - the sample plans of the runtime tests, the GPU test, rt_mkplans and the benchmarks, built
 * in memory with rt_build and returned as plan.bin images (malloc'd), so every user goes through the real
 * loader and verifier. */
#ifndef RT_SAMPLES_H
#define RT_SAMPLES_H

#include "rt_build.h"

/* Tensor "w" [R, C] of dtype dt: source on ranks 0..ns sharded by rows, destination on ranks ns..ns+nd
 * sharded by rows (dst_dim 0: mostly zero-copy) or by columns (dst_dim 1: every byte packed). */
uint8_t *rts_2d(uint32_t ns, uint32_t nd, int64_t R, int64_t C, int dst_dim, rs_dtype dt, rtb_opts o,
                uint32_t domain_size, size_t *len);
/* Four tensors (bf16, fp64, int8, int32), 3-D, ragged and nested shards, pins, replicated and colocated
 * pieces; world 8 in domains of 4. */
uint8_t *rts_mixed(rtb_opts o, size_t *len);
/* NVLink forwarding: a NET receive into staging forwarded by an NVL step that waits for it; world 4. */
uint8_t *rts_forward(size_t *len);
/* A plan that verifies structurally but delivers half of a tensor to the wrong place. */
uint8_t *rts_wrong(size_t *len);
/* Three ranks in three domains whose only order is the one a group's receives must not impose: rank 1 lists
 * its receive from rank 2 first, but rank 2 sends only after rank 0's second step, which follows rank 0's
 * send to rank 1 in the same group. A verified plan; a transport taking a group's receives in program order
 * deadlocks on it. */
uint8_t *rts_recv_order(size_t *len);
/* One rank holding both sides: a transposition by local copies only (world 1), spread over `steps` steps. */
uint8_t *rts_local(int64_t R, int64_t C, int steps, size_t *len);

#endif
