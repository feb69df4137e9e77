/* fuzz_front.c - libFuzzer harness for the layout front end (and, behind it, the planner): each input is
 * a layout file loaded by rs_front_load with small limits, in a scratch directory holding copies of the
 * include files of examples/ and tests/; a layout that loads and is small is planned, verified, encoded,
 * decoded and dumped. Build: tests/fuzz.cmake (RESHARD_FUZZ, clang); run: tests/fuzz/run.sh front SECONDS.
 *
 * Sandbox: an include path is resolved against the including file, so it can leave the scratch directory
 * only by starting with '/' or by a ".." component; an interpolation yields digits and '-' only, so both
 * would be visible in the input's bytes. An input containing `"/`, `"..` or `/..` is loaded with includes
 * disabled (max_include_depth 0: every include is a clean error). */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hard.h"
#include "ir.h"
#include "plan.h"
#include "plan_dump.h"
#include "planner.h"
#include "util.h"

#ifndef RS_SOURCE_DIR
#error "RS_SOURCE_DIR must name the source tree (tests/fuzz.cmake defines it)"
#endif

static char scratch[PATH_MAX], mainfile[PATH_MAX + 16];
static FILE *sink;

static void copy_dir(const char *from, const char *to)
{
    DIR *d = opendir(from);
    if (!d) return;
    mkdir(to, 0755);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 8 || strcmp(e->d_name + n - 7, ".layout")) continue;
        char a[PATH_MAX], b[PATH_MAX];
        snprintf(a, sizeof a, "%s/%s", from, e->d_name);
        snprintf(b, sizeof b, "%s/%s", to, e->d_name);
        FILE *in = fopen(a, "rb"), *out = fopen(b, "wb");
        char buf[8192];
        size_t k;
        while (in && out && (k = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, k, out);
        if (in) fclose(in);
        if (out) fclose(out);
    }
    closedir(d);
}

static void setup(void)
{
    if (sink) return;
    if (rs_hard_scratch(scratch, sizeof scratch, "rs_fuzz_front")) rs_die("fuzz_front: no scratch directory");
    char to[PATH_MAX + 16];
    snprintf(to, sizeof to, "%s/include", scratch);
    copy_dir(RS_SOURCE_DIR "/examples/include", to);
    snprintf(to, sizeof to, "%s/inc", scratch);
    copy_dir(RS_SOURCE_DIR "/tests/front/inc", to);
    copy_dir(RS_SOURCE_DIR "/tests/errors/inc", to);
    snprintf(mainfile, sizeof mainfile, "%s/main.layout", scratch);
    sink = fopen("/dev/null", "w");
}

static int has(const uint8_t *d, size_t n, const char *s)
{
    return memmem(d, n, s, strlen(s)) != NULL;
}

/* Plan what loaded, when it is small: the plan must verify (the planner checks itself), encode, decode
 * to the same bytes, and dump. A failure other than a user error is a bug: abort. */
static void plan_it(rs_ir *ir)
{
    const rs_layout *L = &ir->L;
    if (L->topo.world > 64 || L->npieces > 64) return;
    uint64_t bytes = 0;
    for (uint32_t t = 0; t < L->ntensors; t++) {
        uint64_t e = rs_dtype_size(L->tensors[t].dtype);
        for (uint32_t d = 0; d < L->tensors[t].ndim; d++) {
            if (L->tensors[t].shape[d] > (1 << 20)) return;
            e *= (uint64_t)L->tensors[t].shape[d];
            if (e > (1u << 20)) return;
        }
        bytes += e;
        if (bytes > (1u << 20)) return;
    }
    rs_plan_opts po;
    rs_plan_opts_default(&po);
    po.staging_bytes = 4096; /* small staging: several rounds, chunked messages */
    rs_plan P;
    char *diag = NULL;
    size_t dn = 0;
    FILE *df = open_memstream(&diag, &dn);
    int rc = rs_planner_run(ir, &po, &P, NULL, df);
    fclose(df);
    if (rc) {
        if (!diag || !strstr(diag, "error: ") || strstr(diag, "internal error")) {
            fprintf(stderr, "fuzz_front: planner failure: %s\n", diag ? diag : "(no message)");
            abort();
        }
        free(diag);
        return;
    }
    free(diag);
    uint8_t *img, *img2;
    size_t n, n2;
    char err[512];
    if (rs_plan_encode(&P, &img, &n, err, sizeof err)) {
        fprintf(stderr, "fuzz_front: a verified plan does not encode: %s\n", err);
        abort();
    }
    rs_plan Q;
    if (rs_plan_decode(img, n, -1, &Q, err, sizeof err)) {
        fprintf(stderr, "fuzz_front: an encoded plan does not decode: %s\n", err);
        abort();
    }
    if (rs_plan_encode(&Q, &img2, &n2, err, sizeof err) || n2 != n || memcmp(img, img2, n)) {
        fprintf(stderr, "fuzz_front: encode -> decode -> encode differs\n");
        abort();
    }
    rs_plan_dump(sink, &Q, -1);
    free(img);
    free(img2);
    rs_plan_free(&Q);
    rs_plan_free(&P);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    int fd = open(mainfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size || close(fd)) rs_die("fuzz_front: cannot write %s", mainfile);
    rs_front_opts o;
    rs_front_opts_default(&o);
    o.max_errors = 8;
    o.max_tensors = 2000;
    o.max_pieces = 4000;
    o.max_ranks = 4096;
    o.max_iterations = 20000;
    o.max_expr_depth = 64;
    o.max_include_depth = has(data, size, "\"/") || has(data, size, "\"..") || has(data, size, "/..") ? 0 : 4;
    rs_ir ir;
    char *diag = NULL;
    size_t dn = 0;
    FILE *df = open_memstream(&diag, &dn);
    int nerr = rs_front_load(mainfile, &o, &ir, df);
    fclose(df);
    if (nerr > 0) {
        /* every refusal says what and where */
        if (!diag || !strstr(diag, "error: ")) {
            fprintf(stderr, "fuzz_front: %d errors but no diagnostic:\n%s\n", nerr, diag ? diag : "");
            abort();
        }
    } else if (nerr == 0) {
        plan_it(&ir);
    } else {
        abort();
    }
    free(diag);
    rs_ir_free(&ir);
    return 0;
}
