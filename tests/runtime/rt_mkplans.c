/* rt_mkplans.c - writes the sample plans (rt_samples.c) as plan.bin files for the reshard-replay CLI tests:
 * row (zero-copy row shards), transpose (packed), mixed (dtypes, ragged, nested, colocated, NVL lane),
 * forward (NVLink forwarding with a cross-lane wait), local (one rank) and wrong (delivers wrong bytes). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "rt_samples.h"

static void put(const char *dir, const char *name, uint8_t *img, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.plan", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(img, 1, len, f) != len || fclose(f)) {
        fprintf(stderr, "rt_mkplans: cannot write %s\n", path);
        exit(1);
    }
    free(img);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: rt_mkplans DIR\n");
        return 2;
    }
    mkdir(argv[1], 0777);
    const char *d = argv[1];
    size_t n;
    rtb_opts zc = {1, 0, 1}, packed = {1, 1, 2}, nvl = {0, 1, 3};
    uint8_t *img = rts_2d(4, 8, 512, 96, 0, RS_DT_BF16, zc, 8, &n);
    put(d, "row", img, n);
    img = rts_2d(4, 8, 512, 96, 1, RS_DT_BF16, packed, 4, &n);
    put(d, "transpose", img, n);
    img = rts_mixed(nvl, &n);
    put(d, "mixed", img, n);
    img = rts_forward(&n);
    put(d, "forward", img, n);
    img = rts_local(64, 48, 1, &n);
    put(d, "local", img, n);
    img = rts_wrong(&n);
    put(d, "wrong", img, n);
    return 0;
}
