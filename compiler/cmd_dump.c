/* cmd_dump.c - `reshardc dump PLAN [--rank N]`: the stable, diffable listing of a plan (header,
 * meshes, then per rank its bindings, steps and ops; see common/plan_dump.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "plan.h"
#include "plan_dump.h"

static int usage(void)
{
    fputs("usage: reshardc dump PLAN [--rank N]\n", stderr);
    return 2;
}

/* Parse a rank number: decimal digits only. */
static int parse_rank(const char *s, int *out)
{
    char *end;
    if (!*s || *s == '-' || *s == '+') return -1;
    long v = strtol(s, &end, 10);
    if (*end || v < 0 || v > 0x7fffffff) return -1;
    *out = (int)v;
    return 0;
}

int rs_cmd_dump(int argc, char **argv)
{
    const char *path = NULL;
    int rank = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rank") && i + 1 < argc) {
            if (parse_rank(argv[++i], &rank)) {
                fprintf(stderr, "reshardc dump: bad rank '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strncmp(argv[i], "--rank=", 7)) {
            if (parse_rank(argv[i] + 7, &rank)) {
                fprintf(stderr, "reshardc dump: bad rank '%s'\n", argv[i] + 7);
                return 2;
            }
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return usage();
        } else if (!path) {
            path = argv[i];
        } else {
            return usage();
        }
    }
    if (!path) return usage();
    rs_plan P;
    char err[512];
    if (rs_plan_load_file(path, rank, &P, err, sizeof err)) {
        fprintf(stderr, "reshardc dump: %s\n", err);
        return 1;
    }
    unsigned major = 0, minor = 0;
    rs_plan_file_version(path, &major, &minor);
    printf("reshard plan, format %u.%u\n", major, minor);
    rs_plan_dump(stdout, &P, rank);
    rs_plan_free(&P);
    return 0; /* a listing that could not be written is reported by main (finish) */
}
