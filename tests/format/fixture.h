/* fixture.h - a small hand-built plan for the plan-format tests (4 ranks in 2 NVLink domains, three
 * tensors, every opcode), helpers to compare plans, and resealing (recompute every checksum and the
 * fingerprint of a modified image) so tests can reach the structural checks behind the CRCs. */
#ifndef RS_TEST_FIXTURE_H
#define RS_TEST_FIXTURE_H

#include <stdint.h>
#include <stdio.h>

#include "plan.h"

/* Build the fixture plan (owned by the caller, free with rs_plan_free). */
void fx_build(rs_plan *P);

/* 1 when a and b hold the same plan (layout, bindings, programs). Prints the first difference to stderr. */
int fx_same_plan(const rs_plan *a, const rs_plan *b, int rank);

/* Recompute per-rank and per-section CRCs, the fingerprint and the header CRC of img in place.
 * Tolerates garbage: returns -1 (and changes nothing further) when the tables cannot be followed. */
int fx_reseal(uint8_t *img, size_t len);

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif
