/* cmd_stats.c - placeholder until the cost model lands (issue 6); replaced there. */
#include <stdio.h>
#include "cmd.h"
int rs_cmd_stats(int argc, char **argv)
{
    (void)argc; (void)argv;
    fputs("reshardc stats: not built yet\n", stderr);
    return 2;
}
