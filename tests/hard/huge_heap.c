/* huge_heap.c - rs_reexec_huge_heap (common/util.c) in a process of its own: the program calls it first
 * thing, as reshardc does, then prints GLIBC_TUNABLES as it finds it after that ("(unset)" when there is
 * none) and how many times it was started (argv[1] counts: it passes itself a count one higher through
 * an environment variable, so a re-exec shows as 2). tests/hard/huge_heap.sh says what is expected. */
#include <stdio.h>
#include <stdlib.h>

#include "util.h"

int main(int argc, char **argv)
{
    (void)argc;
    const char *n = getenv("RS_HUGE_HEAP_STARTS");
    char buf[16];
    snprintf(buf, sizeof buf, "%d", n ? atoi(n) + 1 : 1);
    setenv("RS_HUGE_HEAP_STARTS", buf, 1);
    rs_reexec_huge_heap(argv);
    const char *t = getenv("GLIBC_TUNABLES");
    printf("starts %s\ntunables %s\n", getenv("RS_HUGE_HEAP_STARTS"), t ? t : "(unset)");
    return 0;
}
