/* lb.h - building rs_layout programmatically in the planner tests: topology, meshes, tensors,
 * buffers and pieces (placements, slices, boxes), then grouping the pieces by tensor. */
#ifndef RS_TEST_LB_H
#define RS_TEST_LB_H

#include <stdint.h>

#include "layout.h"

/* world ranks; domain_of[r] (NULL: r / domain_size). */
void lb_init(rs_layout *L, uint32_t world, uint32_t domain_size, const uint32_t *domain_of);
/* A mesh over `ranks` (NULL: first .. first + product). Axis names a0, a1, ... */
uint32_t lb_mesh(rs_layout *L, uint32_t naxes, const int64_t *sizes, const int32_t *ranks, int32_t first);
uint32_t lb_tensor(rs_layout *L, const char *name, rs_dtype dt, uint32_t ndim, const int64_t *shape);
/* Find or create the buffer (name, side); ndim 0 = implicit. */
uint32_t lb_buffer(rs_layout *L, const char *name, rs_side side, rs_dtype dt, uint32_t ndim, const int64_t *shape);
/* A piece; place: nplace entries; slice: lo[ndim] then hi[ndim] or NULL; box: lo[bnd] then hi[bnd] or NULL. */
uint32_t lb_piece(rs_layout *L, uint32_t tensor, rs_side side, uint32_t mesh, uint32_t buffer, uint32_t nplace,
                  const rs_place *place, const int64_t *slice, const int64_t *box);
static inline rs_place lb_shard(uint8_t axis, uint8_t dim, int64_t block)
{
    rs_place p = {axis, RS_PLACE_SHARD, dim, 0, block};
    return p;
}
static inline rs_place lb_pin(uint8_t axis, int64_t v)
{
    rs_place p = {axis, RS_PLACE_PIN, 0, 0, v};
    return p;
}
static inline rs_place lb_repl(uint8_t axis)
{
    rs_place p = {axis, RS_PLACE_REPLICATE, 0, 0, 0};
    return p;
}
/* Group pieces by tensor (sources first) and fill piece_begin / nsrc / ndst. */
void lb_finish(rs_layout *L);

#endif
