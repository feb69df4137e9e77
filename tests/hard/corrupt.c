/* corrupt.c - damage to a real plan file (a scaled example, compiled at test time): every truncation
 * length, every header byte flipped, a deterministic sample of flips in every section, and a sample of
 * damage behind valid checksums (resealed). The `reshardc verify` path and the runtime loader (all ranks,
 * one rank) must each refuse with a clear reason, never crash, never accept a different plan. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "fixture.h"
#include "hard.h"
#include "plan.h"
#include "plan_io.h"
#include "replay.h"
#include "reshard.h"

/* Under AddressSanitizer the bytes past a truncation are poisoned (hard.h), so a read beyond `len` is
 * reported exactly, without a copy of the image per length. */
static const char *plan_path;
static uint8_t *orig;         /* the plan as compiled */
static size_t olen;
static uint32_t world, hl, nsec;
static uint64_t table_end;
static struct { uint32_t id; uint64_t off, len; } sec[RS_SEC_MAX];
static uint64_t prog_off;     /* start of the programs section */
static uint64_t *rank_off, *rank_len; /* each rank's program, absolute file offsets */
static char scratch[64];      /* a damaged copy on disk, for the file loaders */

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", plan_path);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    unlink(scratch);
    exit(1);
}

/* A refusal is clear when it is one of the loader's fixed reasons. */
static int clear_reason(const char *m)
{
    static const char *const starts[] = {"not a plan file (", "bad plan (", "bad checksum in ",
                                         "unsupported plan format "};
    for (size_t i = 0; i < sizeof starts / sizeof *starts; i++)
        if (!strncmp(m, starts[i], strlen(starts[i]))) return 1;
    return 0;
}

/* The runtime loader on a memory image: 1 when it loaded (the handle in *out); 0 when it refused with
 * rsPlanInvalid and the loader's reason (containing `want` when not NULL); -1 otherwise (why in rt_why). */
static char rt_why[768];
static int rt_load(const uint8_t *img, size_t len, int rank, const char *want, rsPlan_t *out)
{
    rsPlan_t p = NULL;
    rsResult_t r = rsPlanLoadMemory(img, len, rank, &p);
    if (r == rsSuccess) {
        *out = p;
        return 1;
    }
    const char *m = rsGetLastError();
    if (r == rsPlanInvalid && m && clear_reason(m) && (!want || strstr(m, want))) return 0;
    snprintf(rt_why, sizeof rt_why, "runtime load (rank %d): %s: '%s', expected '%s'", rank, rsGetErrorString(r),
             m ? m : "", want ? want : "a loader reason");
    return -1;
}

/* Refused as expected by the runtime loader, or die naming `what` (NULL: the truncation to `len`). */
static void rt_refuses(const uint8_t *img, size_t len, int rank, const char *want, const char *what)
{
    rsPlan_t p;
    int r = rt_load(img, len, rank, want, &p);
    if (r == 0) return;
    if (r == 1) rsPlanDestroy(p);
    if (what) die("%s: %s", what, r == 1 ? "accepted by the runtime loader" : rt_why);
    die("truncation to %zu bytes: %s", len, r == 1 ? "accepted by the runtime loader" : rt_why);
}

static void write_scratch(const uint8_t *img, size_t len)
{
    int fd = open(scratch, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, img, len) != (ssize_t)len || close(fd)) die("cannot write %s", scratch);
}

static void file_checks(int rank, const char *want, const char *want_rank, const char *what)
{
    /* reshardc verify, in process, its stderr captured */
    char errpath[80];
    snprintf(errpath, sizeof errpath, "%s.err", scratch);
    fflush(stderr);
    int saved = dup(2), ef = open(errpath, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (saved < 0 || ef < 0) die("cannot capture stderr");
    dup2(ef, 2);
    char *argv[] = {"verify", scratch, "--quiet", NULL};
    int st = rs_cmd_verify(3, argv);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char msg[1024] = "";
    ssize_t n = pread(ef, msg, sizeof msg - 1, 0);
    close(ef);
    unlink(errpath);
    msg[n > 0 ? n : 0] = 0;
    const char *reason = strstr(msg, scratch);
    reason = reason ? reason + strlen(scratch) + 2 : msg;
    if (st != 1 || !clear_reason(reason) || (want && !strstr(msg, want)))
        die("%s: reshardc verify exited %d: '%s', expected '%s'", what, st, msg, want ? want : "a loader reason");
    for (int k = 0; k < 2; k++) {
        rsPlan_t p = NULL;
        int rk = k ? rank : RS_ALL_RANKS;
        const char *w = k ? want_rank : want;
        rsResult_t r = rsPlanLoad(scratch, rk, &p);
        const char *m = rsGetLastError();
        if (r == rsSuccess) rsPlanDestroy(p);
        if (r != rsPlanInvalid || !strstr(m, scratch) || (w && !strstr(m, w)))
            die("%s: rsPlanLoad(rank %d): %s: '%s', expected '%s'", what, rk, rsGetErrorString(r),
                r == rsSuccess ? "loaded" : m, w ? w : "a loader reason");
    }
}

/* ---------------------------------------------------------------- truncation */

/* The reason a truncation to `len` must get; `cut` caches the section it names (lengths only decrease). */
static const char *expected_truncation(size_t len, int *cut)
{
    static char want[128];
    int c = len == 0 ? -3 : len < hl ? -2 : len < table_end ? -1 : 0;
    if (c == 0)
        while (c < (int)nsec && sec[c].off + sec[c].len <= len) c++;
    if (c == (int)nsec) die("truncation to %zu: no section cut", len);
    if (c != *cut) {
        *cut = c;
        if (c == -3) snprintf(want, sizeof want, "not a plan file (empty)");
        else if (c == -2) snprintf(want, sizeof want, "bad plan (truncated header)");
        else if (c == -1) snprintf(want, sizeof want, "bad plan (truncated section table)");
        else snprintf(want, sizeof want, "bad plan (truncated section '%s')", rs_plan_section_name(sec[c].id));
    }
    return want;
}

/* Plans larger than `exhaustive` bytes: every length near the start, near every section boundary, and
 * every 61st length elsewhere (the decoders refuse any length from the header alone, so the lengths between
 * behave alike; an exhaustive run of the largest example is in docs/reliability.md). */
static int sampled_out(size_t len, uint64_t exhaustive)
{
    if (olen <= exhaustive || len < table_end + 65536 || len % 61 == 0) return 0;
    for (uint32_t i = 0; i < nsec; i++)
        if (len + 4096 >= sec[i].off && len <= sec[i].off + 4096) return 0;
    return len + 65536 < olen;
}

static uint64_t test_truncation(uint64_t file_every, uint64_t exhaustive)
{
    /* one copy; under ASan each shorter length poisons one more byte at the end */
    uint8_t *t = malloc(olen);
    memcpy(t, orig, olen);
    char err[512];
    int cut = -4;
    uint64_t n = 0;
    write_scratch(orig, olen); /* truncated in place, shorter and shorter */
    for (size_t len = olen; len-- > 0;) {
        RS_POISON(t + len, 1);
        if (sampled_out(len, exhaustive)) continue;
        const char *want = expected_truncation(len, &cut);
        rs_plan Q;
        if (rs_plan_decode(t, len, -1, &Q, err, sizeof err) == 0) die("truncation to %zu bytes: accepted", len);
        if (strcmp(err, want)) die("truncation to %zu bytes: '%s', expected '%s'", len, err, want);
        rt_refuses(t, len, RS_ALL_RANKS, want, NULL);
        rt_refuses(t, len, (int)(len % world), want, NULL);
        /* through files: the whole header region, every section boundary, and a stride */
        int boundary = 0;
        for (uint32_t i = 0; i < nsec; i++) boundary |= len + 1 >= sec[i].off && len <= sec[i].off + 1;
        if (len <= table_end + 8 || boundary || len % file_every == 0) {
            char what[64];
            snprintf(what, sizeof what, "truncation to %zu bytes", len);
            if (truncate(scratch, (off_t)len)) die("cannot truncate %s", scratch);
            file_checks((int)(len % world), want, want, what);
        }
        n++;
    }
    RS_UNPOISON(t, olen);
    /* and one byte too many */
    uint8_t *g = malloc(olen + 1);
    memcpy(g, orig, olen);
    g[olen] = 0;
    rs_plan Q;
    if (rs_plan_decode(g, olen + 1, -1, &Q, err, sizeof err) == 0 || strcmp(err, "bad plan (1 bytes after the end)"))
        die("a trailing byte: '%s'", err);
    rt_refuses(g, olen + 1, RS_ALL_RANKS, "bad plan (1 bytes after the end)", "one byte too many");
    free(g);
    free(t);
    return n;
}

/* ---------------------------------------------------------------- flips */

/* Which rank's program holds byte `at` (or -1). */
static int owner(uint64_t at)
{
    for (uint32_t r = 0; r < world; r++)
        if (at >= rank_off[r] && at < rank_off[r] + rank_len[r]) return (int)r;
    return -1;
}

static uint32_t section_of(uint64_t at)
{
    for (uint32_t i = 0; i < nsec; i++)
        if (at >= sec[i].off && at < sec[i].off + sec[i].len) return i;
    return UINT32_MAX;
}

/* Whether a rank load of a damaged image sees exactly what it sees in the original. */
static int rank_unchanged(rsPlan_t p, int rank)
{
    rs_plan R;
    char err[512];
    if (rs_plan_decode(orig, olen, rank, &R, err, sizeof err)) die("the original does not load for rank %d", rank);
    fflush(stderr); /* fx_same_plan names the first difference on stderr: not wanted here */
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    dup2(null, 2);
    int same = fx_same_plan(&R, rs_replay_plan(p), rank);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(null);
    rs_plan_free(&R);
    return same;
}

/* A rank load that accepted a damaged image must have seen exactly the original rank. */
static void same_rank(rsPlan_t p, int rank, const char *what)
{
    if (!rank_unchanged(p, rank)) die("%s: rank %d loaded a different plan", what, rank);
    rsPlanDestroy(p);
}

/* Flip byte `at` by x: every loader refuses, with the checksum (or, in the header, any clear reason). */
static void one_flip(uint8_t *t, uint64_t at, uint8_t x, int use_files)
{
    char want[128], err[512], what[96];
    const char *w = NULL;
    uint32_t s = section_of(at);
    int own = -1;
    if (s != UINT32_MAX) {
        own = owner(at);
        if (own >= 0) snprintf(want, sizeof want, "bad checksum in section 'programs'");
        else snprintf(want, sizeof want, "bad checksum in section '%s'", rs_plan_section_name(sec[s].id));
        w = want;
    }
    snprintf(what, sizeof what, "byte %llu ^ %#x (%s)", (unsigned long long)at, x,
             s == UINT32_MAX ? "header" : rs_plan_section_name(sec[s].id));
    t[at] ^= x;
    rs_plan Q;
    if (rs_plan_decode(t, olen, -1, &Q, err, sizeof err) == 0) die("%s: accepted by the full load", what);
    if (!clear_reason(err) || (w && strcmp(err, w))) die("%s: '%s', expected '%s'", what, err, w ? w : "a reason");
    rsPlan_t p;
    rt_refuses(t, olen, RS_ALL_RANKS, w, what);
    /* one rank: the owner of a damaged program refuses it; a rank that does not read it sees the original */
    char wr[128];
    const char *wrank = w;
    int rank = own >= 0 ? own : (int)(at % world);
    if (own >= 0) {
        snprintf(wr, sizeof wr, "bad checksum in the program of rank %d", own);
        wrank = wr;
    }
    rt_refuses(t, olen, rank, wrank, what);
    if (own >= 0 && world > 1) {
        int other = (own + 1 + (int)(at % (world - 1))) % (int)world;
        if (rt_load(t, olen, other, NULL, &p) == 1) same_rank(p, other, what);
        else die("%s: refused by rank %d, which does not read rank %d's program", what, other, own);
    }
    if (use_files) {
        write_scratch(t, olen);
        file_checks(rank, w, wrank, what);
    }
    t[at] ^= x;
}

/* Deterministic positions: both ends and evenly spread points of [off, off+len), plus `k` hashed ones. */
static uint64_t pick(uint64_t off, uint64_t len, uint32_t i, uint32_t k)
{
    if (i == 0) return off;
    if (i == 1) return off + len - 1;
    if (i < k / 2) return off + (len - 1) * i / (k / 2);
    uint64_t h = rs_hash64(&i, sizeof i, off ^ len);
    return off + h % len;
}

static uint64_t test_flips(uint32_t per_section, uint64_t *nsections)
{
    uint8_t *t = malloc(olen);
    memcpy(t, orig, olen);
    uint64_t n = 0;
    static const uint8_t xs[] = {0x01, 0x80, 0xff};
    for (uint64_t at = 0; at < table_end; at++) /* every header and table byte */
        for (size_t k = 0; k < sizeof xs; k++, n++) one_flip(t, at, xs[k], at % 16 == 0 && k == 0);
    for (uint32_t i = 0; i < nsec; i++) {
        if (!sec[i].len) continue;
        uint32_t k = sec[i].len < per_section ? (uint32_t)sec[i].len : per_section;
        for (uint32_t j = 0; j < k; j++, n++) {
            uint64_t at = sec[i].len <= per_section ? sec[i].off + j : pick(sec[i].off, sec[i].len, j, k);
            uint8_t x = (uint8_t)((1u << (at % 8)) | (uint8_t)(at * 37));
            one_flip(t, at, x, j % 8 == 0);
        }
        nsections[sec[i].id < 5 ? sec[i].id : 0] += k;
    }
    /* the first and last byte of some ranks' programs (rank 0, the last, and a spread) */
    for (uint32_t j = 0; j < 8 && j < world; j++) {
        uint32_t r = j == 7 ? world - 1 : (uint32_t)((uint64_t)world * j / 8);
        if (!rank_len[r]) continue;
        one_flip(t, rank_off[r], 0x55, 0);
        one_flip(t, rank_off[r] + rank_len[r] - 1, 0xaa, 0);
        n += 2;
        nsections[RS_SEC_PROGRAMS] += 2;
    }
    if (memcmp(t, orig, olen)) die("flips not undone");
    free(t);
    return n;
}

/* ---------------------------------------------------------------- damage behind valid checksums */

typedef struct {
    uint64_t tried, loader_refused, verifier_refused, accepted;
    uint64_t rank_same, rank_changed_refused, rank_changed_accepted; /* rank loads that accepted */
} reseal_counts;

/* Change bytes and recompute every checksum and the fingerprint (an adversary, or a buggy writer): the
 * structural checks must refuse without crashing, with a clear reason; a plan the full load accepts goes
 * through the whole-plan verifier; a rank load may accept what only the whole-plan checks can refuse. */
static void test_resealed(uint32_t per_section, reseal_counts *c)
{
    uint8_t *t = malloc(olen);
    char err[512], what[96];
    for (uint32_t i = 0; i < nsec; i++) {
        if (!sec[i].len) continue;
        uint32_t k = sec[i].len < per_section ? (uint32_t)sec[i].len : per_section;
        for (uint32_t j = 0; j < k; j++) {
            memcpy(t, orig, olen);
            uint64_t at = pick(sec[i].off, sec[i].len, j + 7, k + 14);
            static const uint8_t xs[] = {0x01, 0x02, 0x40, 0x80, 0xff, 0x7f};
            uint8_t x = xs[j % sizeof xs];
            t[at] ^= x;
            if (j % 3 == 2 && at + 1 < sec[i].off + sec[i].len) t[at + 1] = 0xff; /* a long varint */
            if (fx_reseal(t, olen)) die("reseal failed");
            snprintf(what, sizeof what, "resealed byte %llu ^ %#x (%s)", (unsigned long long)at, x,
                     rs_plan_section_name(sec[i].id));
            c->tried++;
            if (getenv("HARD_CORRUPT_VERBOSE")) fprintf(stderr, "%s\n", what);
            rs_plan Q;
            int whole_ok = 0;
            if (rs_plan_decode(t, olen, -1, &Q, err, sizeof err)) {
                if (!clear_reason(err)) die("%s: unclear reason '%s'", what, err);
                c->loader_refused++;
            } else {
                if (rs_plan_verify_all(&Q, err, sizeof err)) {
                    if (!err[0]) die("%s: whole-plan refusal without a reason", what);
                    c->verifier_refused++;
                } else {
                    c->accepted++;
                    whole_ok = 1;
                }
                rs_plan_free(&Q);
            }
            rsPlan_t p = NULL;
            rsResult_t r = rsPlanLoadMemory(t, olen, RS_ALL_RANKS, &p);
            if (r == rsSuccess) rsPlanDestroy(p);
            else if (r != rsPlanInvalid || !rsGetLastError()[0]) die("%s: runtime load: %s", what, rsGetErrorString(r));
            int own = owner(at), rank = own >= 0 ? own : (int)(at % world);
            r = rsPlanLoadMemory(t, olen, rank, &p);
            if (r == rsSuccess) {
                if (rank_unchanged(p, rank)) c->rank_same++;
                else if (whole_ok) c->rank_changed_accepted++;
                else c->rank_changed_refused++;
                rsPlanDestroy(p);
            } else if (r != rsPlanInvalid || !rsGetLastError()[0]) {
                die("%s: rank %d load: %s", what, rank, rsGetErrorString(r));
            }
        }
    }
    free(t);
}

/* ---------------------------------------------------------------- main */

static void parse_table(void)
{
    if (olen < RS_HDR_SIZE_1_0) die("too short for a plan");
    hl = rs_rd32(orig + RS_HDR_LEN);
    nsec = rs_rd32(orig + RS_HDR_NSECTIONS);
    world = rs_rd32(orig + RS_HDR_WORLD);
    table_end = hl + (uint64_t)nsec * RS_SEC_ENTRY_SIZE;
    const uint8_t *dir = NULL;
    for (uint32_t i = 0; i < nsec; i++) {
        const uint8_t *e = orig + hl + (size_t)i * RS_SEC_ENTRY_SIZE;
        sec[i].id = rs_rd32(e);
        sec[i].off = rs_rd64(e + 8);
        sec[i].len = rs_rd64(e + 16);
        if (sec[i].id == RS_SEC_RANKS) dir = orig + sec[i].off;
        if (sec[i].id == RS_SEC_PROGRAMS) prog_off = sec[i].off;
    }
    rank_off = calloc(world, sizeof *rank_off);
    rank_len = calloc(world, sizeof *rank_len);
    for (uint32_t r = 0; r < world; r++) {
        rank_off[r] = prog_off + rs_rd64(dir + (size_t)r * RS_DIR_ENTRY_SIZE);
        rank_len[r] = rs_rd64(dir + (size_t)r * RS_DIR_ENTRY_SIZE + 8);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("usage: hard_corrupt PLAN [FLIPS_PER_SECTION [RESEALED_PER_SECTION [FILE_EVERY [EXHAUSTIVE_BYTES]]]]\n"
              "  every truncation length for plans up to EXHAUSTIVE_BYTES (default: all), sampled above\n",
              stderr);
        return 2;
    }
    plan_path = argv[1];
    uint32_t flips = argc > 2 ? (uint32_t)atoi(argv[2]) : 64, resealed = argc > 3 ? (uint32_t)atoi(argv[3]) : 48;
    uint64_t file_every = argc > 4 ? (uint64_t)atoll(argv[4]) : 65521;
    uint64_t exhaustive = argc > 5 ? (uint64_t)atoll(argv[5]) : UINT64_MAX;
    snprintf(scratch, sizeof scratch, "/tmp/hard_corrupt.%d.bin", (int)getpid());
    FILE *f = fopen(plan_path, "rb");
    if (!f) die("cannot open");
    fseek(f, 0, SEEK_END);
    olen = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    orig = malloc(olen);
    if (fread(orig, 1, olen, f) != olen) die("cannot read");
    fclose(f);
    char err[512];
    rs_plan P0;
    parse_table();
    if (rs_plan_decode(orig, olen, -1, &P0, err, sizeof err)) die("the undamaged plan does not load: %s", err);
    /* (the compiler verified it as a whole; again here, except for the largest plans: memory) */
    if (olen <= exhaustive && rs_plan_verify_all(&P0, err, sizeof err)) die("the undamaged plan does not verify: %s", err);
    rs_plan_free(&P0);
    /* big plans: fewer of the flips and reseals that each cost a full load (truncations stay exhaustive) */
    if (olen > (4u << 20)) flips = flips < 8 ? flips : (uint32_t)(flips * (4ull << 20) / olen) > 8 ? (uint32_t)(flips * (4ull << 20) / olen) : 8;
    if (olen > (1u << 20)) resealed = resealed < 2 ? resealed : (uint32_t)(resealed * (1ull << 20) / olen) > 2 ? (uint32_t)(resealed * (1ull << 20) / olen) : 2;
    if (olen > exhaustive) resealed = 0; /* each accepted one costs a whole-plan verification of the largest plan */

    uint64_t nt = test_truncation(file_every, exhaustive);
    uint64_t per[5] = {0};
    uint64_t nf = test_flips(flips, per);
    reseal_counts rc = {0};
    test_resealed(resealed, &rc);
    printf("%s: %zu bytes, %u ranks\n", plan_path, olen, world);
    printf("truncations: %llu lengths (%s), all refused by reshardc verify and rsPlanLoad (all ranks, one rank)\n",
           (unsigned long long)nt, nt == olen ? "every length" : "sampled: the plan is over the exhaustive size");
    printf("flips: %llu (header+table %llu, strings %llu, layout %llu, ranks %llu, programs %llu), all refused\n",
           (unsigned long long)nf, (unsigned long long)(nf - per[1] - per[2] - per[3] - per[4]),
           (unsigned long long)per[1], (unsigned long long)per[2], (unsigned long long)per[3],
           (unsigned long long)per[4]);
    printf("resealed: %llu tried: %llu refused by the loader, %llu by the whole-plan verifier, %llu accepted as "
           "valid; rank loads accepting: %llu unchanged for that rank, %llu changed (whole plan refused), %llu changed "
           "(whole plan valid)\n",
           (unsigned long long)rc.tried, (unsigned long long)rc.loader_refused, (unsigned long long)rc.verifier_refused,
           (unsigned long long)rc.accepted, (unsigned long long)rc.rank_same, (unsigned long long)rc.rank_changed_refused,
           (unsigned long long)rc.rank_changed_accepted);
    free(orig);
    free(rank_off);
    free(rank_len);
    unlink(scratch);
    return 0;
}
