/* page_faults.c - what first touching memory costs on this machine, which the planner's memory choices
 * depend on (docs/benchmarks.md, "Page faults"): ms per MiB to fault in an anonymous mapping page by page
 * in 4 KiB pages and in transparent huge pages (MADV_HUGEPAGE), each right after the last round freed
 * its memory ("warm") and after an idle pause ("cold": on a VM whose balloon reports free memory to the
 * host, freed 2 MiB blocks go back to it within seconds), against writing the same memory once resident.
 *   page_faults [MiB] [PAUSE_S]     (defaults 256 MiB, 3 s; 4 rounds of each) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One round: map, fault in, write again, unmap; ms per MiB of the first touch and of the second write. */
static int round_ms(size_t mib, int huge, double *touch, double *write)
{
    size_t n = mib << 20;
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    if (madvise(p, n, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE)) {
        munmap(p, n);
        return -1;
    }
    double t = now();
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    *touch = (now() - t) * 1e3 / (double)mib;
    t = now();
    memset(p, 2, n);
    *write = (now() - t) * 1e3 / (double)mib;
    munmap(p, n);
    return 0;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
    unsigned pause_s = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 3;
    if (!mib || argc > 3) {
        fprintf(stderr, "usage: page_faults [MiB] [PAUSE_S]\n");
        return 2;
    }
    printf("%-9s %-5s %5s  %-28s  %s\n", "pages", "after", "MiB", "first touch, ms/MiB (4 rounds)", "write resident");
    for (int huge = 0; huge < 2; huge++)
        for (int cold = 0; cold < 2; cold++) {
            double touch[4], write = 0;
            for (int r = 0; r < 4; r++) {
                if (cold) sleep(pause_s);
                if (round_ms(mib, huge, &touch[r], &write)) {
                    perror("page_faults: mmap/madvise");
                    return 1;
                }
            }
            printf("%-9s %-5s %5zu  %6.2f %6.2f %6.2f %6.2f    %.3f ms/MiB\n", huge ? "huge 2M" : "4 KiB",
                   cold ? "pause" : "free", mib, touch[0], touch[1], touch[2], touch[3], write);
        }
    return 0;
}
