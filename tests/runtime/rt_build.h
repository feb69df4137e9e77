/* rt_build.h - builds plans in memory for the runtime tests and benchmarks (no front end, no planner
 * needed): a layout from code, then either a naive plan (every fragment sent straight from a source holder,
 * zero-copy where contiguous on both sides, packed otherwise) or programs written op by op. */
#ifndef RT_BUILD_H
#define RT_BUILD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "plan.h"

typedef struct rtb rtb;

/* world ranks in NVLink domains of domain_size consecutive ranks. */
rtb *rtb_new(uint32_t world, uint32_t domain_size);
/* A mesh over ranks first_rank .. first_rank + prod(sizes), row-major. Returns its index. */
uint32_t rtb_mesh(rtb *b, const char *name, uint32_t naxes, const char *const *axes, const int64_t *sizes,
                  uint32_t first_rank);
uint32_t rtb_tensor(rtb *b, const char *name, rs_dtype dt, uint32_t ndim, const int64_t *shape);
/* A piece with an implicit buffer (the local block is the whole buffer). Placement helpers below. */
void rtb_piece(rtb *b, rs_side side, uint32_t tensor, uint32_t mesh, uint32_t nplace, const rs_place *pl,
               const char *buffer);
static inline rs_place rtb_shard(uint32_t axis, uint32_t dim)
{
    rs_place p = {(uint8_t)axis, RS_PLACE_SHARD, (uint8_t)dim, 0, 0};
    return p;
}
static inline rs_place rtb_pin(uint32_t axis, int64_t v)
{
    rs_place p = {(uint8_t)axis, RS_PLACE_PIN, 0, 0, v};
    return p;
}
/* Finish the layout: sorts pieces by tensor, computes every rank's bindings. */
void rtb_layout_done(rtb *b);

typedef struct {
    int zero_copy; /* send/receive contiguous fragments straight from/into the bound buffers */
    int nvl;       /* fragments within an NVLink domain go on the NVL lane */
    int steps;     /* split each rank's messages over this many steps per lane (>= 1) */
} rtb_opts;
/* The naive plan: every destination block intersected with every distinct source block. */
void rtb_autoplan(rtb *b, const rtb_opts *o);

/* Programs op by op (after rtb_layout_done). Steps and ops append to the rank's program. */
uint32_t rtb_binding(rtb *b, uint32_t rank, const char *buffer, rs_side side);
uint32_t rtb_step(rtb *b, uint32_t rank, int lane, uint32_t nwaits, const uint32_t *waits);
void rtb_p2p(rtb *b, uint32_t rank, int send, uint32_t peer, uint32_t loc, uint64_t off, uint64_t bytes);
/* PACK / UNPACK / COPY between two 1-D contiguous ranges or general descriptors. */
void rtb_copy(rtb *b, uint32_t rank, int code, rs_desc src, rs_desc dst);
rs_desc rtb_range(uint32_t loc, uint64_t off, uint64_t bytes);
void rtb_staging(rtb *b, uint32_t rank, uint64_t bytes);

/* Finish: moves everything into *P (plan_fp set by encoding it) and frees the builder. */
void rtb_finish(rtb *b, rs_plan *P);
/* Encode *P into a plan.bin image (malloc'd). */
uint8_t *rtb_encode(rs_plan *P, size_t *len);

#define RT_CHECK(c)                                                                                      \
    do {                                                                                                 \
        if (!(c)) {                                                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                        \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

#endif
