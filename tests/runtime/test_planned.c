/* test_planned.c - property test of the runtime on real planner output: random layouts (tests/planner/gen.c:
 * random worlds, domains, meshes, ragged/nested/fixed-block shards, pins, slices, explicit boxes, shared
 * buffers) planned by the planner with small staging budgets (several rounds, forwarding over NVLink),
 * encoded, loaded through the runtime's loader, replayed on the CPU transport and checked element by element.
 *     test_planned [FIRST_SEED [COUNT]]   (environment: RESHARD_CPU_FUSE, RESHARD_CPU_EMULATE_KERNELS) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "planner.h"
#include "replay.h"
#include "reshard.h"

int main(int argc, char **argv)
{
    uint64_t first = argc > 1 ? strtoull(argv[1], NULL, 0) : 1, count = argc > 2 ? strtoull(argv[2], NULL, 0) : 150;
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
        rsPlan_t plan;
        if (rsPlanLoadMemory(img, len, RS_ALL_RANKS, &plan) != rsSuccess) {
            fprintf(stderr, "seed %llu: %s\n", (unsigned long long)seed, rsGetLastError());
            return 1;
        }
        free(img);
        rs_replay_opts o;
        memset(&o, 0, sizeof o);
        o.transport = rsTransportCpu;
        o.timeout_ms = 30000;
        o.iters = 1;
        o.last = UINT32_MAX;
        o.inject_rank = -1;
        rs_replay_result res;
        int bad = rs_replay_run(plan, &o, &res);
        if (bad) {
            fprintf(stderr, "seed %llu: replay failed: %s: %s; %llu wrong, %llu outside pieces, %llu sources changed\n",
                    (unsigned long long)seed, rsGetErrorString(res.result), res.error,
                    (unsigned long long)res.rep.wrong, (unsigned long long)res.rep.untouched,
                    (unsigned long long)res.rep.src_changed);
            for (int i = 0; i < res.rep.nreport; i++) fprintf(stderr, "  %s\n", res.rep.report[i]);
            return 1;
        }
        checked += res.rep.checked;
        steps += res.nsteps;
        rsPlanDestroy(plan);
    }
    printf("test_planned: %llu random layouts planned, %llu replayed (%llu steps, %llu destination elements checked), "
           "%llu skipped\n", (unsigned long long)planned, (unsigned long long)(planned - skipped),
           (unsigned long long)steps, (unsigned long long)checked, (unsigned long long)skipped);
    /* enough seeds must replay, or the test checks nothing */
    return planned - skipped >= planned / 5 ? 0 : 1;
}
