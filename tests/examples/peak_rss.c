/* peak_rss.c - run a command and fail when its peak resident memory (ru_maxrss) is above a limit: issue 5's
 * memory target (2 GiB for a full-size compile of each example) as a test, not only a benchmark row.
 *
 *   rs-peak-rss MIB COMMAND [ARGS...]
 *
 * Prints the peak; exits 0 when COMMAND succeeded within MIB MiB, 1 when it failed or went above, 2 on a
 * usage or system error. (tests/examples/run.sh verify uses it; tests/examples.cmake sets the limit.) */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: rs-peak-rss MIB COMMAND [ARGS...]\n");
        return 2;
    }
    char *end;
    unsigned long long mib = strtoull(argv[1], &end, 10);
    if (*end || mib == 0 || mib > (1ull << 40)) {
        fprintf(stderr, "rs-peak-rss: limit '%s' is not a number of MiB\n", argv[1]);
        return 2;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("rs-peak-rss: fork");
        return 2;
    }
    if (pid == 0) {
        execvp(argv[2], argv + 2);
        perror(argv[2]);
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0) {
        perror("rs-peak-rss: wait4");
        return 2;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (WIFSIGNALED(st)) fprintf(stderr, "FAIL: %s killed by signal %d\n", argv[2], WTERMSIG(st));
        else fprintf(stderr, "FAIL: %s exited with status %d\n", argv[2], WEXITSTATUS(st));
        return 1;
    }
    unsigned long long kib = (unsigned long long)ru.ru_maxrss; /* Linux: KiB */
    printf("peak resident memory %.1f MiB (limit %llu MiB)\n", kib / 1024.0, mib);
    if (kib > mib * 1024) {
        fprintf(stderr, "FAIL: %s peaked at %.1f MiB, above the %llu MiB limit\n", argv[2], kib / 1024.0, mib);
        return 1;
    }
    return 0;
}
