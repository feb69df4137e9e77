/* mutate.h - one random change to a decoded plan, for the verifier's tests (mutate.c). */
#ifndef RS_TEST_MUTATE_H
#define RS_TEST_MUTATE_H

#include <stdint.h>

#include "plan.h"

/* Damages P in one place chosen with the xorshift state *state (advanced); returns a short name of what
 * changed, or NULL when no change applied in 50 tries. */
const char *rs_mutate(rs_plan *P, uint64_t *state);

#endif
