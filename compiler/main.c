/* main.c - reshardc: the command line. Picks a subcommand and runs its pass pipeline
 * (see cmd_compile.c for layout -> IR -> regions -> sources -> fan-out -> steps -> verify -> plan.bin). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "plan.h"
#include "util.h"

static const char usage[] =
    "usage: reshardc LAYOUT -o PLAN [-D NAME=VALUE]... [--staging BYTES] [--no-verify] [--quiet]\n"
    "       reshardc check LAYOUT [-D NAME=VALUE]...\n"
    "       reshardc verify PLAN\n"
    "       reshardc dump PLAN [--rank N]\n"
    "       reshardc diff PLAN_A PLAN_B\n"
    "       reshardc stats PLAN [--json] [--svg FILE]\n"
    "       reshardc --help | --version\n"
    "\n"
    "Compiles a layout (how a model's weights are sharded on the training and the inference ranks)\n"
    "into a verified per-rank transfer plan, and reads plans back for review.\n"
    "Exit status: 0 success, 1 invalid layout or plan (or output that could not be written), 2 bad command\n"
    "line.\n";

static const struct {
    const char *name;
    int (*run)(int, char **);
} cmds[] = {
    {"check", rs_cmd_check}, {"verify", rs_cmd_verify}, {"dump", rs_cmd_dump},
    {"diff", rs_cmd_diff},   {"stats", rs_cmd_stats},
};

/* Output that did not reach standard output (a full disk under `> stats.txt`, a closed pipe) is an error,
 * not a silently short report: said on stderr, and exit 1 unless the command had already failed. */
static int finish(int rc)
{
    if (fflush(stdout) || ferror(stdout)) {
        fputs("reshardc: cannot write to standard output\n", stderr);
        return rc ? rc : 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    rs_reexec_huge_heap(argv);
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(usage, stdout);
        return finish(0);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("reshardc %s (plan format %d.%d; reads %d.x)\n", RS_VERSION_STRING, RS_PLAN_MAJOR, RS_PLAN_MINOR_BALANCED,
               RS_PLAN_MAJOR);
        return finish(0);
    }
    if (!rs_threads_env_ok()) {
        fprintf(stderr, "reshardc: RESHARD_THREADS is '%s': it takes a number of threads (1, or 2 and more for two)\n",
                getenv("RESHARD_THREADS"));
        return 2;
    }
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(argv[1], cmds[i].name)) return finish(cmds[i].run(argc - 1, argv + 1));
    return finish(rs_cmd_compile(argc, argv));
}
