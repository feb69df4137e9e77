/* build.h - tiny builders for hand-made layouts and plans in the cost-model tests: a topology, meshes,
 * tensors with one implicit buffer per piece, and per-rank programs of steps and ops. */
#ifndef RS_TEST_STATS_BUILD_H
#define RS_TEST_STATS_BUILD_H

#include <stdint.h>

#include "plan.h"

/* Start a plan over `world` ranks; domain_of[r] gives each rank's NVLink domain. */
void tb_init(rs_plan *P, uint32_t world, const uint32_t *domain_of, double nic_gbps, double nvlink_gbps);
/* A mesh with one axis per name; ranks row-major. Returns its index. */
uint32_t tb_mesh(rs_plan *P, const char *name, uint32_t naxes, const char *const *axes, const int64_t *sizes,
                 const int32_t *ranks);
/* A tensor. Its pieces follow at once with tb_piece (sources first, then destinations). */
uint32_t tb_tensor(rs_plan *P, const char *name, rs_dtype dt, uint32_t ndim, const int64_t *shape);
/* A piece of the last tensor on `mesh`, with an implicit buffer named `buffer`. Placements are given
 * as triples (axis, kind, dim-or-pin) with block 0. Returns the buffer index. */
uint32_t tb_piece(rs_plan *P, rs_side side, uint32_t mesh, const char *buffer, uint32_t nplace,
                  const int64_t (*place)[3]);
/* Give every rank its bindings (from the layout: every buffer it holds a non-empty block of). */
void tb_bind(rs_plan *P);
/* Programs: append a step on a lane (waits: earlier steps of the other lane) and ops to it. */
uint32_t tb_step(rs_plan *P, uint32_t rank, int lane, uint32_t nwaits, const uint32_t *waits);
void tb_send(rs_plan *P, uint32_t rank, uint32_t peer, uint32_t loc, uint64_t off, uint64_t bytes);
void tb_recv(rs_plan *P, uint32_t rank, uint32_t peer, uint32_t loc, uint64_t off, uint64_t bytes);
/* PACK / UNPACK / COPY between two 2-D byte regions (rows x rowbytes, strides in bytes). */
void tb_copy(rs_plan *P, uint32_t rank, int code, uint32_t sloc, uint64_t soff, uint64_t sstride, uint32_t dloc,
             uint64_t doff, uint64_t dstride, uint64_t rows, uint64_t rowbytes);
/* Binding index of the buffer named `name` on rank (aborts when absent). */
uint32_t tb_loc(const rs_plan *P, uint32_t rank, const char *name);
/* Encode, decode (every rank) and verify the whole plan: the cost model sees a plan the loader and the
 * verifier accept. */
void tb_roundtrip(rs_plan *P);

#endif
