/* fuzz_plan.c - libFuzzer harness for the plan loader, verifiers and dumper. Each input is decoded as
 * is (reaching the header, table and checksum checks) and again resealed (every CRC and the
 * fingerprint recomputed, so mutations reach the structural checks behind them); whatever loads is
 * dumped and re-encoded, and a full load also goes through the whole-plan verifier. Build and run:
 * tests/fuzz.cmake (option RESHARD_FUZZ, clang), tests/fuzz/run.sh plan SECONDS; seed corpus: the
 * fixture (fmt_tool write seed.bin) and small compiled layouts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "plan.h"
#include "plan_dump.h"

static FILE *sink;

static void one(const uint8_t *img, size_t len)
{
    char err[512];
    for (int rank = -1; rank < 2; rank++) {
        rs_plan P;
        if (rs_plan_decode(img, len, rank, &P, err, sizeof err)) {
            if (!err[0]) abort(); /* every refusal says why */
            continue;
        }
        rs_plan_dump(sink, &P, rank);
        if (rank < 0) {
            err[0] = 0;
            if (rs_plan_verify_all(&P, err, sizeof err) && !err[0]) abort(); /* a refusal says why */
            uint8_t *out;
            size_t n;
            if (rs_plan_encode(&P, &out, &n, err, sizeof err)) abort(); /* what loads must encode */
            free(out);
        }
        rs_plan_free(&P);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!sink) sink = fopen("/dev/null", "w");
    one(data, size);
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    if (fx_reseal(copy, size) == 0) one(copy, size);
    free(copy);
    return 0;
}
