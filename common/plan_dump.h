/* plan_dump.h - the plan listing: one printer per op, used by `reshardc dump` and by the runtime's
 * trace log. Fixed columns, names resolved, buffer regions in slice notation, no pointers. */
#ifndef RS_PLAN_DUMP_H
#define RS_PLAN_DUMP_H

#include <stdio.h>

#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whole listing: header facts, meshes, then every loaded rank (rank < 0) or one rank. */
void rs_plan_dump(FILE *f, const rs_plan *P, int rank);
/* Header facts only (world, domains, bandwidths, fingerprints, staging, table sizes). */
void rs_plan_dump_header(FILE *f, const rs_plan *P);
/* One rank: its bindings, then its steps and ops. */
void rs_plan_dump_rank(FILE *f, const rs_plan *P, uint32_t rank);
/* Column header printed above op lines. */
void rs_plan_dump_op_columns(FILE *f);
/* One step's heading line: "  step 3  NVL  waits 1, 2". */
void rs_plan_dump_step(FILE *f, const rs_plan *P, uint32_t rank, uint32_t step);
/* One op line (index into the rank's ops), e.g.
 *       12  UNPACK     -          4096  staging[0:4096] -> "model.w"[0:16, 0:128]  ; tensor "w" */
void rs_plan_dump_op(FILE *f, const rs_plan *P, uint32_t rank, uint32_t op);

/* A region in slice notation when it is a box of the binding's shape, e.g. "model.w"[0:16, 0:128],
 * staging[0:4096] for a staging range, an explicit {off, count, stride} form otherwise.
 * Writes at most n bytes (NUL included); returns the length it wanted, like snprintf. */
int rs_plan_format_desc(char *buf, size_t n, const rs_plan *P, uint32_t rank, const rs_desc *d);
/* The contiguous byte range [off, off + bytes) of a location (binding index or RS_LOC_STAGING). */
int rs_plan_format_range(char *buf, size_t n, const rs_plan *P, uint32_t rank, uint32_t loc, uint64_t off,
                         uint64_t bytes);
/* A name in double quotes with \" \\ and \xNN escapes. */
void rs_plan_print_name(FILE *f, const char *name);
/* A mesh as the listing shows it: `infer [dp = 2, tp = 4] = ranks 8..16` (no newline). */
void rs_plan_print_mesh(FILE *f, const rs_mesh *m);

/* Format version of a plan file from its first bytes (no validation beyond the magic). 0 on success. */
int rs_plan_file_version(const char *path, unsigned *major, unsigned *minor);

#ifdef __cplusplus
}
#endif
#endif
