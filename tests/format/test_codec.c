/* test_codec.c - plan.bin encode/decode tests on the fixture plan: round trip, single-rank decode,
 * determinism, atomic writes, every truncation, header/table byte flips, sampled section flips,
 * text-mode damage, and structural corruption behind valid checksums (resealed). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "plan.h"
#include "plan_dump.h"
#include "plan_io.h"

static char err[512];

static void encode_fixture(uint8_t **img, size_t *len)
{
    rs_plan P;
    fx_build(&P);
    if (rs_plan_encode(&P, img, len, err, sizeof err)) {
        fprintf(stderr, "encode: %s\n", err);
        exit(1);
    }
    rs_plan_free(&P);
}

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

static void test_roundtrip(void)
{
    rs_plan P, Q;
    uint8_t *a, *b, *c;
    size_t na, nb, nc;
    fx_build(&P);
    CHECK(rs_plan_encode(&P, &a, &na, err, sizeof err) == 0);
    CHECK(P.plan_fp != 0);
    CHECK(rs_plan_encode(&P, &c, &nc, err, sizeof err) == 0); /* deterministic */
    CHECK(nc == na && !memcmp(a, c, na));
    free(c);
    if (rs_plan_decode(a, na, -1, &Q, err, sizeof err)) {
        fprintf(stderr, "decode: %s\n", err);
        exit(1);
    }
    CHECK(fx_same_plan(&P, &Q, -1));
    CHECK(Q.plan_fp == P.plan_fp && Q.source_fp == P.source_fp && Q.staging_budget == P.staging_budget);
    for (uint32_t r = 0; r < Q.layout.topo.world; r++) CHECK(Q.ranks[r].loaded);
    CHECK(rs_plan_encode(&Q, &b, &nb, err, sizeof err) == 0);
    CHECK(nb == na && !memcmp(a, b, na)); /* encode -> decode -> encode is byte-identical */
    free(b);
    rs_plan_free(&Q);

    for (int r = 0; r < 4; r++) {
        CHECK(rs_plan_decode(a, na, r, &Q, err, sizeof err) == 0);
        CHECK(fx_same_plan(&P, &Q, r));
        for (int k = 0; k < 4; k++) {
            CHECK(Q.ranks[k].loaded == (k == r));
            CHECK(Q.ranks[k].staging_bytes == P.ranks[k].staging_bytes);
            if (k != r) CHECK(Q.ranks[k].nops == 0 && Q.ranks[k].ops == NULL);
        }
        /* a plan loaded for one rank cannot be written back */
        CHECK(rs_plan_encode(&Q, &b, &nb, err, sizeof err) == -1 && strstr(err, "some ranks only"));
        rs_plan_free(&Q);
    }
    CHECK(rs_plan_decode(a, na, 4, &Q, err, sizeof err) == -1 && strstr(err, "outside the plan's world"));

    /* A single-rank load reads only the shared tables and its own program: damage to another rank's
     * program is not seen by it, but is by that rank and by a full load. */
    {
        uint32_t hl = rs_rd32(a + RS_HDR_LEN);
        const uint8_t *dir = NULL;
        uint64_t prog = 0;
        for (uint32_t i = 0; i < rs_rd32(a + RS_HDR_NSECTIONS); i++) {
            const uint8_t *e = a + hl + i * RS_SEC_ENTRY_SIZE;
            if (rs_rd32(e) == RS_SEC_RANKS) dir = a + rs_rd64(e + 8);
            if (rs_rd32(e) == RS_SEC_PROGRAMS) prog = rs_rd64(e + 8);
        }
        CHECK(dir && prog);
        uint8_t *d = malloc(na);
        memcpy(d, a, na);
        d[prog + rs_rd64(dir + 3 * RS_DIR_ENTRY_SIZE) + 1] ^= 0x40; /* inside rank 3's program */
        CHECK(rs_plan_decode(d, na, 0, &Q, err, sizeof err) == 0);
        rs_plan_free(&Q);
        CHECK(rs_plan_decode(d, na, 3, &Q, err, sizeof err) == -1);
        CHECK(!strcmp(err, "bad checksum in the program of rank 3"));
        CHECK(rs_plan_decode(d, na, -1, &Q, err, sizeof err) == -1);
        CHECK(!strcmp(err, "bad checksum in section 'programs'"));
        free(d);
    }

    /* files: atomic write, load, no temporary left behind, failure leaves the old file */
    char dir[] = "/tmp/rs_fmt_XXXXXX";
    CHECK(mkdtemp(dir));
    char path[256], bad[300];
    snprintf(path, sizeof path, "%s/plan.bin", dir);
    CHECK(rs_plan_write_file(&P, path, err, sizeof err) == 0);
    CHECK(rs_plan_load_file(path, 2, &Q, err, sizeof err) == 0);
    CHECK(fx_same_plan(&P, &Q, 2));
    rs_plan_free(&Q);
    CHECK(rs_plan_load_file(path, -1, &Q, err, sizeof err) == 0);
    CHECK(fx_same_plan(&P, &Q, -1));
    rs_plan_free(&Q);
    FILE *f = fopen(path, "rb");
    CHECK(f);
    uint8_t *fb = malloc(na + 1);
    CHECK(fread(fb, 1, na + 1, f) == na && !memcmp(fb, a, na));
    fclose(f);
    free(fb);
    snprintf(bad, sizeof bad, "%s/missing/plan.bin", dir);
    CHECK(rs_plan_write_file(&P, bad, err, sizeof err) == -1 && strstr(err, "cannot create"));
    CHECK(strncmp(err, bad, strlen(bad)) == 0 && !strstr(err + strlen(bad), bad));
    CHECK(rs_plan_load_file(bad, -1, &Q, err, sizeof err) == -1 && strstr(err, "cannot open"));
    CHECK(rs_plan_load_file(dir, -1, &Q, err, sizeof err) == -1 && strstr(err, "is a directory"));
    /* special paths: a pipe is written in place (renaming over it would replace it; as root the same
     * rename once replaced /dev/null), a symbolic link keeps pointing at the file it names, a dangling
     * link and a directory are refused, each error naming the path */
    {
        char fifo[300], lnk[300], dang[300];
        snprintf(fifo, sizeof fifo, "%s/pipe", dir);
        CHECK(mkfifo(fifo, 0600) == 0);
        int rfd = open(fifo, O_RDONLY | O_NONBLOCK); /* a reader, so that the writer's open succeeds */
        CHECK(rfd >= 0);
        CHECK(na < 65536); /* fits the pipe's buffer: nothing has to read while it is written */
        CHECK(rs_plan_write_file(&P, fifo, err, sizeof err) == 0);
        struct stat st;
        CHECK(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
        uint8_t *pb = malloc(na + 1);
        CHECK(read(rfd, pb, na + 1) == (ssize_t)na && !memcmp(pb, a, na));
        free(pb);
        close(rfd);
        /* writing into a pipe that nobody reads: refused at once (the open used to wait for a reader) */
        CHECK(rs_plan_write_file(&P, fifo, err, sizeof err) == -1 && strstr(err, "no process is reading the pipe"));
        /* loading from a pipe that nobody writes: refused at once (the open used to wait for a writer) */
        CHECK(rs_plan_load_file(fifo, -1, &Q, err, sizeof err) == -1 && strstr(err, "not a regular file"));
        unlink(fifo);
        /* a file that is replaced keeps its permissions */
        CHECK(chmod(path, 0640) == 0);
        CHECK(rs_plan_write_file(&P, path, err, sizeof err) == 0);
        CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0640);
        snprintf(lnk, sizeof lnk, "%s/link.bin", dir);
        CHECK(symlink("plan.bin", lnk) == 0);
        CHECK(rs_plan_write_file(&P, lnk, err, sizeof err) == 0);
        CHECK(lstat(lnk, &st) == 0 && S_ISLNK(st.st_mode));
        CHECK(rs_plan_load_file(lnk, -1, &Q, err, sizeof err) == 0);
        rs_plan_free(&Q);
        unlink(lnk);
        snprintf(dang, sizeof dang, "%s/dangling.bin", dir);
        CHECK(symlink("nowhere/plan.bin", dang) == 0);
        CHECK(rs_plan_write_file(&P, dang, err, sizeof err) == -1 && strstr(err, "symbolic link"));
        CHECK(strncmp(err, dang, strlen(dang)) == 0);
        unlink(dang);
        CHECK(rs_plan_write_file(&P, dir, err, sizeof err) == -1 && strstr(err, "Is a directory"));
        CHECK(strncmp(err, dir, strlen(dir)) == 0);
    }
    /* a rank claiming more staging than the plan's budget: refused by the writer's (and the loader's) checks */
    {
        uint64_t keep = P.ranks[1].staging_bytes;
        P.ranks[1].staging_bytes = P.staging_budget + 1;
        uint8_t *img2 = NULL;
        size_t len2 = 0;
        CHECK(rs_plan_encode(&P, &img2, &len2, err, sizeof err) == -1 && strstr(err, "over the plan's budget"));
        P.ranks[1].staging_bytes = keep;
    }
    /* an invalid plan is refused before anything is written: the old file stays */
    P.ranks[0].ops[2].peer = 0;
    CHECK(rs_plan_write_file(&P, path, err, sizeof err) == -1 && strstr(err, "peer is the rank itself"));
    CHECK(strncmp(err, path, strlen(path)) == 0 && err[strlen(path)] == ':'); /* named by the file, once */
    CHECK(!strstr(err + strlen(path), path));
    CHECK(rs_plan_load_file(path, -1, &Q, err, sizeof err) == 0);
    rs_plan_free(&Q);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "test $(ls -A %s | wc -l) = 1", dir);
    CHECK(system(cmd) == 0); /* only plan.bin: no temporary file left */
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    rs_plan_free(&P);
    free(a);
    printf("roundtrip: ok (%zu bytes)\n", na);
}

/* Every decode of a damaged image must fail with a message, in full and in single-rank mode. */
static int rejected(const uint8_t *img, size_t len, const char **msg)
{
    static char m[512];
    rs_plan Q;
    int full = rs_plan_decode(img, len, -1, &Q, m, sizeof m);
    if (full == 0) rs_plan_free(&Q);
    *msg = m;
    return full == -1 && m[0];
}

static void test_truncation(void)
{
    uint8_t *a;
    size_t na;
    encode_fixture(&a, &na);
    int n = 0;
    for (size_t len = 0; len < na; len++) {
        uint8_t *t = malloc(len ? len : 1); /* exact size: ASan catches any read past it */
        memcpy(t, a, len);
        const char *m;
        if (!rejected(t, len, &m)) {
            fprintf(stderr, "truncation to %zu bytes accepted\n", len);
            exit(1);
        }
        int ok = len == 0 ? !strcmp(m, "not a plan file (empty)")
                          : starts(m, "bad plan (truncated header)") || starts(m, "bad plan (truncated section");
        if (!ok) {
            fprintf(stderr, "truncation to %zu bytes: unclear message: %s\n", len, m);
            exit(1);
        }
        for (int r = 0; r < 4; r++) {
            rs_plan Q;
            CHECK(rs_plan_decode(t, len, r, &Q, err, sizeof err) == -1);
        }
        free(t);
        n++;
    }
    /* trailing garbage too */
    uint8_t *t = malloc(na + 1);
    memcpy(t, a, na);
    t[na] = 0;
    const char *m;
    CHECK(rejected(t, na + 1, &m) && strstr(m, "after the end"));
    free(t);
    free(a);
    printf("truncation: %d lengths rejected\n", n);
}

static void test_header_flips(void)
{
    uint8_t *a;
    size_t na;
    encode_fixture(&a, &na);
    size_t tend = RS_HDR_SIZE_1_0 + RS_SEC_COUNT_1_0 * RS_SEC_ENTRY_SIZE;
    static const uint8_t xors[] = {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xff};
    int n = 0;
    for (size_t i = 0; i < tend; i++)
        for (size_t k = 0; k < sizeof xors; k++) {
            a[i] ^= xors[k];
            const char *m;
            if (!rejected(a, na, &m)) {
                fprintf(stderr, "flip of byte %zu by %#x accepted\n", i, xors[k]);
                exit(1);
            }
            for (int r = 0; r < 4; r++) {
                rs_plan Q;
                if (rs_plan_decode(a, na, r, &Q, err, sizeof err) == 0) {
                    fprintf(stderr, "flip of byte %zu by %#x accepted by the rank %d load\n", i, xors[k], r);
                    exit(1);
                }
            }
            a[i] ^= xors[k];
            n++;
        }
    free(a);
    printf("header flips: %d rejected\n", n);
}

/* Deterministic sample of flips in every section (every byte here: the fixture is small). */
static void test_section_flips(void)
{
    uint8_t *a;
    size_t na;
    encode_fixture(&a, &na);
    size_t tend = RS_HDR_SIZE_1_0 + RS_SEC_COUNT_1_0 * RS_SEC_ENTRY_SIZE;
    int n = 0, per[RS_SEC_COUNT_1_0 + 1] = {0};
    for (size_t i = tend; i < na; i++) {
        uint8_t x = (uint8_t)(1u << (i % 8)) | (uint8_t)(i * 37);
        a[i] ^= x;
        const char *m;
        if (!rejected(a, na, &m) || !strstr(m, "bad checksum")) {
            fprintf(stderr, "flip of byte %zu by %#x: %s\n", i, x, m);
            exit(1);
        }
        for (uint32_t s = 0; s < RS_SEC_COUNT_1_0; s++) {
            const uint8_t *e = a + RS_HDR_SIZE_1_0 + s * RS_SEC_ENTRY_SIZE;
            if (i >= rs_rd64(e + 8) && i < rs_rd64(e + 8) + rs_rd64(e + 16)) {
                CHECK(strstr(m, rs_plan_section_name(rs_rd32(e))));
                per[rs_rd32(e)]++;
            }
        }
        a[i] ^= x;
        n++;
    }
    for (int s = 1; s <= RS_SEC_COUNT_1_0; s++) CHECK(per[s] > 0);
    free(a);
    printf("section flips: %d rejected (strings %d, layout %d, ranks %d, programs %d)\n", n, per[1], per[2], per[3],
           per[4]);
}

static void test_text_mode(void)
{
    uint8_t *a;
    size_t na;
    encode_fixture(&a, &na);
    const char *m;
    uint8_t *t = malloc(na + 8);
    /* CR LF -> LF (text-mode read) */
    memcpy(t, a, 7);
    memcpy(t + 7, a + 8, na - 8);
    CHECK(rejected(t, na - 1, &m) && strstr(m, "CRLF"));
    /* LF -> CR LF (text-mode write): "\r\n" becomes "\r\r\n" */
    memcpy(t, a, 8);
    t[8] = '\r';
    memcpy(t + 9, a + 8, na - 8);
    CHECK(rejected(t, na + 1, &m) && strstr(m, "CRLF"));
    /* 7-bit channel */
    memcpy(t, a, na);
    t[0] &= 0x7f;
    CHECK(rejected(t, na, &m) && strstr(m, "high bit"));
    CHECK(rejected((const uint8_t *)"hello, world\n", 13, &m) && !strcmp(m, "not a plan file (bad magic)"));
    /* a newer major version is refused by name */
    memcpy(t, a, na);
    rs_le16(t + RS_HDR_MAJOR, 2);
    fx_reseal(t, na);
    CHECK(rejected(t, na, &m) && !strcmp(m, "unsupported plan format 2.0 (this reshard reads 1.x)"));
    /* a newer minor version with a longer header and an extra section is read */
    {
        size_t grow = 8, extra = 5;
        uint32_t hl = RS_HDR_SIZE_1_0 + (uint32_t)grow;
        size_t tab = RS_SEC_COUNT_1_0 * RS_SEC_ENTRY_SIZE;
        size_t nn = na + grow + RS_SEC_ENTRY_SIZE + extra;
        uint8_t *g = calloc(1, nn);
        memcpy(g, a, RS_HDR_SIZE_1_0);
        memcpy(g + hl, a + RS_HDR_SIZE_1_0, tab);
        size_t body = RS_HDR_SIZE_1_0 + tab;
        memcpy(g + hl + tab + RS_SEC_ENTRY_SIZE, a + body, na - body);
        memcpy(g + nn - extra, "hello", extra);
        rs_le16(g + RS_HDR_MINOR, 7);
        rs_le32(g + RS_HDR_LEN, hl);
        rs_le32(g + RS_HDR_NSECTIONS, RS_SEC_COUNT_1_0 + 1);
        rs_le64(g + RS_HDR_FILE_LEN, nn);
        for (int i = 0; i < RS_SEC_COUNT_1_0; i++) {
            uint8_t *e = g + hl + i * RS_SEC_ENTRY_SIZE;
            rs_le64(e + 8, rs_rd64(e + 8) + grow + RS_SEC_ENTRY_SIZE);
        }
        uint8_t *e = g + hl + tab;
        rs_le32(e, 99);
        rs_le64(e + 8, nn - extra);
        rs_le64(e + 16, extra);
        CHECK(fx_reseal(g, nn) == 0);
        rs_plan Q, P;
        if (rs_plan_decode(g, nn, -1, &Q, err, sizeof err)) {
            fprintf(stderr, "minor version: %s\n", err);
            exit(1);
        }
        fx_build(&P);
        CHECK(fx_same_plan(&P, &Q, -1));
        rs_plan_free(&P);
        rs_plan_free(&Q);
        free(g);
    }
    free(t);
    free(a);
    printf("text mode and versions: ok\n");
}

/* Structural damage behind valid checksums: flip every byte of every section (several values),
 * reseal, decode. Nothing may crash or read out of bounds (run under ASan); what decodes must
 * re-encode and decode to the same plan. */
static void test_resealed(void)
{
    uint8_t *a;
    size_t na;
    encode_fixture(&a, &na);
    size_t tend = RS_HDR_SIZE_1_0 + RS_SEC_COUNT_1_0 * RS_SEC_ENTRY_SIZE;
    static const uint8_t xors[] = {0x01, 0x02, 0x08, 0x40, 0x80, 0xff, 0x7f};
    int tried = 0, refused = 0;
    uint8_t *t = malloc(na);
    for (size_t i = tend; i < na; i++)
        for (size_t k = 0; k < sizeof xors; k++) {
            memcpy(t, a, na);
            t[i] ^= xors[k];
            CHECK(fx_reseal(t, na) == 0);
            tried++;
            for (int r = -1; r < 4; r++) {
                rs_plan Q;
                int rc = rs_plan_decode(t, na, r, &Q, err, sizeof err);
                if (r == -1) { /* a full load on two threads: the same plan, or the same first problem */
                    rs_plan Q2;
                    char err2[sizeof err];
                    setenv("RESHARD_THREADS", "2", 1);
                    int rc2 = rs_plan_decode(t, na, -1, &Q2, err2, sizeof err2);
                    unsetenv("RESHARD_THREADS");
                    CHECK(rc2 == rc);
                    if (rc) CHECK(!strcmp(err, err2));
                    else CHECK(fx_same_plan(&Q, &Q2, -1));
                    if (!rc2) rs_plan_free(&Q2);
                }
                if (rc) {
                    CHECK(err[0]);
                    if (r == -1) refused++;
                    continue;
                }
                if (r == -1) {
                    uint8_t *b;
                    size_t nb;
                    rs_plan Z;
                    CHECK(rs_plan_encode(&Q, &b, &nb, err, sizeof err) == 0);
                    CHECK(rs_plan_decode(b, nb, -1, &Z, err, sizeof err) == 0);
                    CHECK(fx_same_plan(&Q, &Z, -1));
                    rs_plan_free(&Z);
                    free(b);
                }
                rs_plan_free(&Q);
            }
        }
    /* Damage to the first rank's program and to the last's (each refused alone): a full load on one
     * thread or two reports the first rank's, as it would the last's alone. */
    {
        uint32_t hl = rs_rd32(a + RS_HDR_LEN);
        uint64_t dir = 0, prog = 0;
        for (uint32_t i = 0; i < rs_rd32(a + RS_HDR_NSECTIONS); i++) {
            const uint8_t *e = a + hl + i * RS_SEC_ENTRY_SIZE;
            if (rs_rd32(e) == RS_SEC_RANKS) dir = rs_rd64(e + 8);
            if (rs_rd32(e) == RS_SEC_PROGRAMS) prog = rs_rd64(e + 8);
        }
        CHECK(dir && prog);
        size_t at[2] = {0, 0};
        int rk[2] = {0, 3};
        char want[2][sizeof err];
        for (int j = 0; j < 2; j++) { /* the first byte of the rank's program whose damage is refused */
            uint64_t p0 = prog + rs_rd64(a + dir + (size_t)rk[j] * RS_DIR_ENTRY_SIZE);
            for (size_t i = p0; i < na && !at[j]; i++) {
                memcpy(t, a, na);
                t[i] ^= 0xff;
                CHECK(fx_reseal(t, na) == 0);
                rs_plan Q;
                if (rs_plan_decode(t, na, rk[j], &Q, want[j], sizeof want[j])) at[j] = i;
                else rs_plan_free(&Q);
            }
            CHECK(at[j]);
            char rank_s[32];
            snprintf(rank_s, sizeof rank_s, "rank %d", rk[j]);
            CHECK(strstr(want[j], rank_s));
        }
        for (int k = 0; k < 2; k++) /* damaged: the last rank, both ranks */
            for (int th = 1; th <= 2; th++) {
                memcpy(t, a, na);
                t[at[1]] ^= 0xff;
                if (k) t[at[0]] ^= 0xff;
                CHECK(fx_reseal(t, na) == 0);
                setenv("RESHARD_THREADS", th == 1 ? "1" : "2", 1);
                rs_plan Q;
                CHECK(rs_plan_decode(t, na, -1, &Q, err, sizeof err) == -1);
                CHECK(!strcmp(err, want[k ? 0 : 1]));
                unsetenv("RESHARD_THREADS");
            }
    }
    free(t);
    free(a);
    printf("resealed damage: %d tried, %d refused by the structural checks, none crashed\n", tried, refused);
}

/* Random multi-byte damage behind valid checksums (deterministic LCG): nothing crashes, and every plan
 * that still loads also dumps. */
static void test_mutate(void)
{
    uint8_t *a;
    size_t na;
    encode_fixture(&a, &na);
    size_t tend = RS_HDR_SIZE_1_0 + RS_SEC_COUNT_1_0 * RS_SEC_ENTRY_SIZE;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
#define RND() (seed = seed * 6364136223846793005ull + 1442695040888963407ull, (uint32_t)(seed >> 33))
    FILE *null = fopen("/dev/null", "w");
    CHECK(null);
    uint8_t *t = malloc(na);
    int loaded = 0, iters = 5000;
    for (int it = 0; it < iters; it++) {
        memcpy(t, a, na);
        int k = 1 + (int)(RND() % 8);
        for (int j = 0; j < k; j++) {
            size_t at = tend + RND() % (na - tend);
            uint32_t how = RND() % 4;
            t[at] = how == 0 ? (uint8_t)RND() : how == 1 ? 0 : how == 2 ? 0xff : (uint8_t)(t[at] + 1);
        }
        CHECK(fx_reseal(t, na) == 0);
        for (int r = -1; r < 4; r++) {
            rs_plan Q;
            if (rs_plan_decode(t, na, r, &Q, err, sizeof err)) continue;
            loaded++;
            rs_plan_dump(null, &Q, r);
            rs_plan_free(&Q);
        }
    }
#undef RND
    fclose(null);
    free(t);
    free(a);
    printf("mutations: %d plans damaged, %d loads succeeded and dumped, none crashed\n", iters, loaded);
}

/* Very long names go through the dumper's growth path intact. */
static void test_long_names(void)
{
    rs_plan P, Q;
    fx_build(&P);
    char *big = malloc(5001);
    for (int i = 0; i < 5000; i++) big[i] = (char)('a' + i % 26);
    big[5000] = 0;
    P.layout.tensors[0].name = rs_layout_name(&P.layout, big, 5000);
    P.layout.buffers[1].name = rs_layout_name(&P.layout, "quote\"back\\slash\x01", 17);
    uint8_t *img;
    size_t n;
    CHECK(rs_plan_encode(&P, &img, &n, err, sizeof err) == 0);
    CHECK(rs_plan_decode(img, n, -1, &Q, err, sizeof err) == 0);
    char *out = NULL;
    size_t outlen = 0;
    FILE *f = open_memstream(&out, &outlen);
    rs_plan_dump(f, &Q, -1);
    fclose(f);
    CHECK(strstr(out, big));
    CHECK(strstr(out, "\"quote\\\"back\\\\slash\\x01\"[0:2, 0:3]"));
    free(out);
    free(img);
    free(big);
    rs_plan_free(&P);
    rs_plan_free(&Q);
    printf("long names: ok\n");
}

/* A rank program's packed descriptors (common/plan.h): what rs_prog_desc_add stores, rs_prog_desc gives back
 * (dims past ndim zero), for every ndim; rs_prog_desc_set in place (fewer or as many dims) and moved to the
 * pool's end (more), leaving the others alone; and through an encode/decode round trip. */
static void desc_of_ndim(rs_desc *d, uint32_t nd, uint64_t seed)
{
    memset(d, 0, sizeof *d);
    d->loc = nd % 2 ? RS_LOC_STAGING : (uint32_t)seed % 7;
    d->ndim = nd;
    d->offset = seed * 1000003u;
    for (uint32_t k = 0; k < nd; k++) {
        d->count[k] = seed + k + 1;
        d->stride[k] = k + 1 == nd ? 1 : (seed + 3) << (2 * (nd - k));
    }
}

static void test_packed_descs(void)
{
    rs_rank_prog g;
    memset(&g, 0, sizeof g);
    rs_desc want[2 * RS_DESC_MAX_DIMS + 1], got;
    uint32_t n = 0;
    for (uint32_t nd = 0; nd <= RS_DESC_MAX_DIMS; nd++)
        for (uint64_t seed = 1; seed <= 2 && n < sizeof want / sizeof want[0]; seed++) {
            desc_of_ndim(&want[n], nd, seed * 10 + nd);
            CHECK(rs_prog_desc_add(&g, &want[n]) == n);
            n++;
        }
    CHECK(g.ndescs == n);
    uint64_t words = 0;
    for (uint32_t i = 0; i < n; i++) {
        CHECK(!memcmp(rs_prog_desc(&g, i, &got), &want[i], sizeof got));
        CHECK(rs_prog_desc_loc(&g, i) == want[i].loc);
        words += 2 + 2 * (uint64_t)want[i].ndim;
    }
    CHECK(g.dpool_n == words); /* packed: 2 words, then a count and a stride per dim */
    /* in place: as many dims, and fewer */
    desc_of_ndim(&want[5], want[5].ndim, 99);
    rs_prog_desc_set(&g, 5, &want[5]);
    desc_of_ndim(&want[9], 1, 77);
    rs_prog_desc_set(&g, 9, &want[9]);
    CHECK(g.dpool_n == words);
    /* more dims: moved to the end */
    desc_of_ndim(&want[2], RS_DESC_MAX_DIMS, 55);
    rs_prog_desc_set(&g, 2, &want[2]);
    CHECK(g.dpool_n == words + 2 + 2 * RS_DESC_MAX_DIMS);
    rs_prog_desc_trim(&g);
    for (uint32_t i = 0; i < n; i++) CHECK(!memcmp(rs_prog_desc(&g, i, &got), &want[i], sizeof got));
    free(g.dpool);
    free(g.doff);

    /* the fixture's descriptors survive encode and decode, and one written back unchanged through
     * rs_prog_desc_set leaves the encoded bytes as they were */
    rs_plan P, Q;
    fx_build(&P);
    rs_desc d;
    rs_prog_desc(&P.ranks[0], 0, &d);
    uint8_t *a, *b;
    size_t na, nb;
    CHECK(rs_plan_encode(&P, &a, &na, err, sizeof err) == 0);
    rs_prog_desc_set(&P.ranks[0], 0, &d);
    CHECK(rs_plan_encode(&P, &b, &nb, err, sizeof err) == 0);
    CHECK(na == nb && !memcmp(a, b, na));
    CHECK(rs_plan_decode(a, na, -1, &Q, err, sizeof err) == 0);
    for (uint32_t r = 0; r < Q.layout.topo.world; r++) {
        CHECK(Q.ranks[r].ndescs == P.ranks[r].ndescs);
        for (uint32_t i = 0; i < Q.ranks[r].ndescs; i++) {
            rs_desc x, y;
            CHECK(!memcmp(rs_prog_desc(&Q.ranks[r], i, &x), rs_prog_desc(&P.ranks[r], i, &y), sizeof x));
        }
    }
    free(a);
    free(b);
    rs_plan_free(&Q);
    rs_plan_free(&P);
    printf("packed descriptors: %u of 0..%d dims, set in place and moved, encode/decode: ok\n", n,
           RS_DESC_MAX_DIMS);
}

/* CRC32C: the standard check value, the CPU's instruction against the tables at every length and
 * alignment up to 1 KiB, and chaining */
static void test_crc(void)
{
    CHECK(rs_crc32c(0, "123456789", 9) == 0xe3069283u);
    CHECK(rs_crc32c_portable(0, "123456789", 9) == 0xe3069283u);
    CHECK(rs_crc32c(0, NULL, 0) == 0);
    unsigned char buf[1040];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof buf; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    int bad = 0;
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= 1024; n++) {
            uint32_t a = rs_crc32c(0, buf + off, n), b = rs_crc32c_portable(0, buf + off, n);
            if (a != b) bad++;
            if (n > 5 && rs_crc32c(rs_crc32c(0, buf + off, 5), buf + off + 5, n - 5) != a) bad++;
        }
    CHECK(bad == 0);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "all";
    int all = !strcmp(which, "all");
    if (all || !strcmp(which, "roundtrip")) test_roundtrip();
    if (all || !strcmp(which, "truncation")) test_truncation();
    if (all || !strcmp(which, "header")) test_header_flips();
    if (all || !strcmp(which, "sections")) test_section_flips();
    if (all || !strcmp(which, "textmode")) test_text_mode();
    if (all || !strcmp(which, "resealed")) test_resealed();
    if (all || !strcmp(which, "mutate")) test_mutate();
    if (all || !strcmp(which, "longnames")) test_long_names();
    if (all || !strcmp(which, "descs")) test_packed_descs();
    if (all || !strcmp(which, "crc")) test_crc();
    return 0;
}
