/* interp.h - a reference executor for the planner tests, independent of the verifier and the runtime:
 * runs a plan on per-byte provenance tags (tensor, element, byte) in a random order allowed by the
 * execution semantics (lanes, waits, group matching), then checks that every destination byte of every
 * piece holds the right tag and was written exactly once, and that nothing else was written. */
#ifndef RS_TEST_INTERP_H
#define RS_TEST_INTERP_H

#include <stdint.h>

#include "plan.h"

/* Returns 0 when the plan ran and every check passed; otherwise -1 with a reason in msg. */
int rs_interp_run(const rs_plan *P, uint64_t seed, char *msg, size_t msglen);

#endif
