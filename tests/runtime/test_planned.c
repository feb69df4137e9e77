/* test_planned.c - property test of the runtime on real planner output: random layouts (tests/planner/gen.c:
 * random worlds, domains, meshes, ragged/nested/fixed-block shards, pins, slices, explicit boxes, shared
 * buffers) planned by the planner with small staging budgets (several rounds, forwarding over NVLink),
 * encoded, loaded through the runtime's loader, replayed on the CPU transport and checked element by element.
 * With MUTATIONS, each seed's plan is also damaged that many times (tests/planner/mutate.c: offsets, sizes,
 * peers, waits, ops of a step reordered, ...); every damaged plan the whole-plan verifier accepts is replayed
 * the same way and must deliver every element: the verifier's acceptance is what the runtime relies on.
 *     test_planned [FIRST_SEED [COUNT [MUTATIONS]]]   (environment: RESHARD_CPU_FUSE, RESHARD_CPU_EMULATE_KERNELS) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "mutate.h"
#include "planner.h"
#include "replay.h"
#include "reshard.h"

/* Replays every rank of the encoded plan on the CPU transport and checks every destination element;
 * 0 when all is right, else prints why (prefixed with `what`). */
static int replay_img(uint8_t *img, size_t len, uint64_t seed, const char *what, uint64_t *checked, uint64_t *steps)
{
    rsPlan_t plan;
    if (rsPlanLoadMemory(img, len, RS_ALL_RANKS, &plan) != rsSuccess) {
        fprintf(stderr, "seed %llu%s: %s\n", (unsigned long long)seed, what, rsGetLastError());
        return 1;
    }
    rs_replay_opts o;
    memset(&o, 0, sizeof o);
    o.transport = rsTransportCpu;
    o.timeout_ms = what[0] ? 5000 : 30000; /* an accepted damaged plan that hangs fails in 5 s */
    o.iters = 1;
    o.last = UINT32_MAX;
    o.inject_rank = -1;
    rs_replay_result res;
    int bad = rs_replay_run(plan, &o, &res);
    if (bad) {
        fprintf(stderr, "seed %llu%s: replay failed: %s: %s; %llu wrong, %llu outside pieces, %llu sources changed\n",
                (unsigned long long)seed, what, rsGetErrorString(res.result), res.error,
                (unsigned long long)res.rep.wrong, (unsigned long long)res.rep.untouched,
                (unsigned long long)res.rep.src_changed);
        for (int i = 0; i < res.rep.nreport; i++) fprintf(stderr, "  %s\n", res.rep.report[i]);
    }
    *checked += res.rep.checked;
    *steps += res.nsteps;
    rsPlanDestroy(plan);
    return bad;
}

/* MUTATIONS damaged copies of the plan: the verifier's rejections are counted, its acceptances replayed. */
static int replay_mutants(const uint8_t *img, size_t len, uint64_t seed, uint64_t n, uint64_t *accepted,
                          uint64_t *rejected, uint64_t *checked, uint64_t *steps)
{
    uint64_t state = seed * 0x9e3779b97f4a7c15ull + 3;
    for (uint64_t m = 0; m < n; m++) {
        rs_plan Q;
        char err[1024];
        if (rs_plan_decode(img, len, -1, &Q, err, sizeof err) != 0) {
            fprintf(stderr, "seed %llu: decode: %s\n", (unsigned long long)seed, err);
            return 1;
        }
        const char *what = rs_mutate(&Q, &state);
        uint8_t *mimg = NULL;
        size_t mlen = 0;
        int bad = 0;
        if (what && rs_plan_verify_all(&Q, err, sizeof err) != 0) {
            (*rejected)++;
            if (getenv("RS_MUTATE_VERBOSE"))
                fprintf(stderr, "seed %llu: '%s' rejected: %s\n", (unsigned long long)seed, what, err);
        } else if (what) {
            (*accepted)++;
            if (getenv("RS_MUTATE_VERBOSE"))
                fprintf(stderr, "seed %llu: '%s' accepted\n", (unsigned long long)seed, what);
            if (rs_plan_encode(&Q, &mimg, &mlen, err, sizeof err) != 0) {
                fprintf(stderr, "seed %llu: encode after '%s': %s\n", (unsigned long long)seed, what, err);
                bad = 1;
            } else {
                char tag[128];
                snprintf(tag, sizeof tag, " (mutation %llu, '%s', accepted by the verifier)", (unsigned long long)m,
                         what);
                bad = replay_img(mimg, mlen, seed, tag, checked, steps);
            }
            free(mimg);
        }
        rs_plan_free(&Q);
        if (bad) return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t first = argc > 1 ? strtoull(argv[1], NULL, 0) : 1, count = argc > 2 ? strtoull(argv[2], NULL, 0) : 150;
    uint64_t mutations = argc > 3 ? strtoull(argv[3], NULL, 0) : 0, accepted = 0, rejected = 0;
    uint64_t checked = 0, steps = 0, planned = 0, skipped = 0;
    for (uint64_t seed = first; seed < first + count; seed++) {
        rs_layout L;
        memset(&L, 0, sizeof L);
        gen_opts go = {24, 4, 12};
        gen_layout(&L, seed, &go);
        rs_plan_opts po;
        rs_plan_opts_default(&po);
        /* vary the staging budget (rounds), the zero-copy threshold and the fan-out split */
        static const uint64_t staging[] = {256, 1024, 4096, 1 << 20};
        po.staging_bytes = staging[seed % 4];
        po.zero_copy_min = seed % 3 == 0 ? 1 : seed % 3 == 1 ? 64 : 1 << 20;
        po.fanout_split_min = seed % 2 ? 16 : 64 << 10;
        po.verify = 1;
        /* a quarter of the seeds relay (destination ranks forward what they received, also out of buffer
         * groups into other domains), in chains or trees */
        if (seed % 8 >= 6) {
            po.relays = RS_RELAYS_ON;
            po.relay_fanout = 1 + (uint32_t)(seed / 8 % 3);
        }
        rs_plan P;
        char err[1024];
        uint32_t bad_piece;
        if (rs_planner_plan(&L, &po, &P, NULL, err, sizeof err, &bad_piece) != 0) {
            fprintf(stderr, "seed %llu: the planner failed: %s\n", (unsigned long long)seed, err);
            return 1;
        }
        planned++;
        uint8_t *img = NULL;
        size_t len = 0;
        if (rs_plan_encode(&P, &img, &len, err, sizeof err) != 0) {
            /* a disagreement between the generator and the plan format's layout checks, not the runtime's
             * business: counted and reported, the replay of this seed skipped */
            fprintf(stderr, "seed %llu: skipped: the encoder rejects the generated layout: %s\n",
                    (unsigned long long)seed, err);
            rs_plan_free(&P);
            skipped++;
            continue;
        }
        rs_plan_free(&P);
        int bad = replay_img(img, len, seed, "", &checked, &steps);
        if (!bad && mutations) bad = replay_mutants(img, len, seed, mutations, &accepted, &rejected, &checked, &steps);
        free(img);
        if (bad) return 1;
    }
    printf("test_planned: %llu random layouts planned, %llu replayed (%llu steps, %llu destination elements checked), "
           "%llu skipped\n", (unsigned long long)planned, (unsigned long long)(planned - skipped),
           (unsigned long long)steps, (unsigned long long)checked, (unsigned long long)skipped);
    if (mutations) {
        printf("test_planned: %llu damaged plans: %llu rejected by the verifier, %llu accepted and replayed "
               "correctly\n",
               (unsigned long long)(accepted + rejected), (unsigned long long)rejected, (unsigned long long)accepted);
        /* the accepted ones are what this checks: too few and it checks nothing */
        if (accepted < (accepted + rejected) / 20) return 1;
    }
    /* enough seeds must replay, or the test checks nothing */
    return planned - skipped >= planned / 5 ? 0 : 1;
}
