/* cmd_verify.c - `reshardc verify PLAN`: decode every rank (all offsets, CRCs and per-rank structure
 * checked), then the whole-plan checks (matching, deadlock freedom, exactly-once coverage). */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "plan.h"

int rs_cmd_verify(int argc, char **argv)
{
    const char *path = NULL;
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quiet") || !strcmp(argv[i], "-q")) quiet = 1;
        else if (argv[i][0] == '-' || path) {
            fputs("usage: reshardc verify PLAN [--quiet]\n", stderr);
            return 2;
        } else path = argv[i];
    }
    if (!path) {
        fputs("usage: reshardc verify PLAN [--quiet]\n", stderr);
        return 2;
    }
    rs_plan P;
    char err[512];
    if (rs_plan_load_file(path, -1, &P, err, sizeof err)) {
        fprintf(stderr, "reshardc verify: %s\n", err);
        return 1;
    }
    if (rs_plan_verify_all(&P, err, sizeof err)) {
        fprintf(stderr, "reshardc verify: %s: %s\n", path, err);
        rs_plan_free(&P);
        return 1;
    }
    if (!quiet) {
        unsigned long long steps = 0, ops = 0;
        for (uint32_t r = 0; r < P.layout.topo.world; r++) steps += P.ranks[r].nsteps, ops += P.ranks[r].nops;
        printf("%s: ok (%u ranks, %llu steps, %llu ops, plan fp %016llx)\n", path, P.layout.topo.world, steps, ops,
               (unsigned long long)P.plan_fp);
    }
    rs_plan_free(&P);
    return 0;
}
