/* gen.h - random layouts for the planner property tests: random worlds and NVLink domains (regular or
 * listed), meshes over random rank lists (source and destination sides overlapping or not), tensors of
 * 0..4 dims, source and destination pieces with nested, ragged and fixed-block shards, pins, replicated
 * axes, slices, and implicit or explicit buffers (boxes, blocks refilling boxes of another shape,
 * several pieces sharing one buffer), buffers of 2+ dims (implicit, or explicit with their boxes) made
 * buffer groups ("NAME.{*}") one time in three. Every destination element is covered by some source. */
#ifndef RS_TEST_GEN_H
#define RS_TEST_GEN_H

#include <stdint.h>

#include "layout.h"

typedef struct {
    uint32_t max_world;  /* default 24 */
    uint32_t max_tensors; /* default 4 */
    int64_t max_extent;  /* per dim, default 12 */
} gen_opts;

void gen_layout(rs_layout *L, uint64_t seed, const gen_opts *o);

#endif
