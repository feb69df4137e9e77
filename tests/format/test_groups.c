/* test_groups.c - buffer groups (format 1.1) below the compiler: the helpers of common/plan.c
 * (rs_member_name, rs_member_of, rs_desc_member_chunk, rs_desc_cut, rs_op_group_chunk), the rank
 * verifier's member rules on the fixture plan with some buffers made groups, and the codec (minor
 * version 1 only with a group, the group flag round-trips, bad side fields are refused).
 *   test_groups helpers | verify | codec | all */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "plan.h"
#include "plan_dump.h"
#include "plan_io.h"

static char err[512];
static int failed;

#define EXPECT(c)                                                                                  \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #c);                       \
            failed = 1;                                                                            \
        }                                                                                          \
    } while (0)

static rs_desc D(uint64_t off, uint32_t ndim, const uint64_t *count, const uint64_t *stride)
{
    rs_desc d;
    memset(&d, 0, sizeof d);
    d.offset = off;
    d.ndim = ndim;
    for (uint32_t i = 0; i < ndim; i++) d.count[i] = count[i], d.stride[i] = stride[i];
    return d;
}
#define DESC(off, ...) desc_of(off, (const uint64_t[]){__VA_ARGS__}, sizeof((const uint64_t[]){__VA_ARGS__}) / 16)
/* DESC(off, c0, c1, ..., s0, s1, ...): counts then strides, ndim = half the arguments; location 0 */
static rs_desc desc_of(uint64_t off, const uint64_t *cs, size_t ndim)
{
    return D(off, (uint32_t)ndim, cs, cs + ndim);
}

/* ---------------------------------------------------------------- helpers */

/* The byte offsets d visits, in stream order (at most cap). */
static size_t stream(const rs_desc *d, uint64_t *out, size_t cap)
{
    uint64_t idx[RS_DESC_MAX_DIMS] = {0}, n = rs_desc_bytes(d);
    if (n > cap) return (size_t)-1;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t a = d->offset;
        for (uint32_t i = 0; i < d->ndim; i++) a += idx[i] * d->stride[i];
        out[k] = a;
        for (int i = (int)d->ndim - 1; i >= 0; i--) {
            if (++idx[i] < d->count[i]) break;
            idx[i] = 0;
        }
    }
    return (size_t)n;
}

/* rs_desc_cut(d, chunk) succeeds, keeps d's byte stream, and its inner dims [nouter, ndim) span
 * exactly `chunk` bytes; returns the cut descriptor's outer dim count (or -1 after reporting). */
static int cut_ok(const rs_desc *d, uint64_t chunk, rs_desc *out, int line)
{
    uint32_t k = 99;
    if (rs_desc_cut(d, chunk, out, &k)) {
        fprintf(stderr, "%s:%d: rs_desc_cut refused chunk %llu\n", __FILE__, line, (unsigned long long)chunk);
        failed = 1;
        return -1;
    }
    static uint64_t a[4096], b[4096];
    size_t na = stream(d, a, 4096), nb = stream(out, b, 4096);
    uint64_t inner = 1;
    for (uint32_t i = k; i < out->ndim; i++) inner *= out->count[i];
    if (na != nb || memcmp(a, b, na * sizeof a[0]) || k < 1 || k >= out->ndim || inner != chunk ||
        out->offset != d->offset || out->stride[out->ndim - 1] != 1) {
        fprintf(stderr, "%s:%d: rs_desc_cut at %llu changed the stream or cut elsewhere (nouter %u, inner %llu)\n",
                __FILE__, line, (unsigned long long)chunk, k, (unsigned long long)inner);
        failed = 1;
        return -1;
    }
    return (int)k;
}

static void test_helpers(void)
{
    char buf[64];
    uint64_t j = 77;

    /* member names: j in place of "{*}", returns the length needed like snprintf */
    EXPECT(rs_member_name("experts.{*}.w", 12, 0, buf, sizeof buf) == 12 && !strcmp(buf, "experts.12.w"));
    EXPECT(rs_member_name("{*}", 0, 0, buf, sizeof buf) == 1 && !strcmp(buf, "0"));
    EXPECT(rs_member_name("w{*}", 18446744073709551615ull, 0, buf, sizeof buf) == 21 &&
           !strcmp(buf, "w18446744073709551615"));
    EXPECT(rs_member_name("plain", 3, 0, buf, sizeof buf) == 5 && !strcmp(buf, "plain"));
    EXPECT(rs_member_name("experts.{*}.w", 12, 0, buf, 5) == 12 && !strcmp(buf, "expe")); /* truncated */

    /* member_of: digits without leading zeros between the prefix and the suffix */
    EXPECT(rs_member_of("x.{*}", "x.3", &j) && j == 3);
    EXPECT(rs_member_of("x.{*}", "x.0", &j) && j == 0);
    EXPECT(rs_member_of("x.{*}", "x.120", &j) && j == 120);
    EXPECT(!rs_member_of("x.{*}", "x.03", &j));  /* leading zero */
    EXPECT(!rs_member_of("x.{*}", "x.00", &j));
    EXPECT(!rs_member_of("x.{*}", "x.", &j));    /* no digits */
    EXPECT(!rs_member_of("x.{*}", "x.a", &j));
    EXPECT(!rs_member_of("x.{*}", "x.3a", &j));
    EXPECT(!rs_member_of("x.{*}", "x.-3", &j));
    EXPECT(!rs_member_of("x.{*}", "y.3", &j));   /* prefix */
    EXPECT(!rs_member_of("x.{*}", "x.{*}", &j)); /* the pattern itself */
    EXPECT(rs_member_of("{*}.w", "12.w", &j) && j == 12);
    EXPECT(!rs_member_of("{*}.w", "12.v", &j)); /* suffix */
    EXPECT(!rs_member_of("{*}.w", "12", &j));
    EXPECT(rs_member_of("a{*}b", "a5b", &j) && j == 5);
    EXPECT(!rs_member_of("a{*}b", "ab", &j));
    EXPECT(!rs_member_of("ab{*}ba", "aba", &j)); /* prefix and suffix overlap in the name: too short */
    EXPECT(!rs_member_of("ab{*}ba", "abba", &j));
    EXPECT(rs_member_of("ab{*}ba", "ab7ba", &j) && j == 7);
    EXPECT(!rs_member_of("plain", "plain", &j)); /* not a group */
    EXPECT(rs_member_of("w{*}", "w1844674407370955160", &j) && j == 1844674407370955160ull);
    EXPECT(!rs_member_of("w{*}", "w99999999999999999999", &j)); /* does not fit in 64 bits */
    j = 77;
    EXPECT(!rs_member_of("x.{*}", "x.3x", &j) && j == 77); /* *j untouched on failure */

    /* two member dims and offsets (1.3): member j = (j / inner, j % inner), each plus its marker's offset */
    uint64_t ij[2] = {77, 77};
    EXPECT(rs_member_name("l.{*}.e{*}", 13, 4, buf, sizeof buf) == 6 && !strcmp(buf, "l.3.e1"));
    EXPECT(rs_member_name("l.{*+3}.e{*}", 13, 4, buf, sizeof buf) == 6 && !strcmp(buf, "l.6.e1"));
    EXPECT(rs_member_name("l.{*}.e{*+10}", 13, 4, buf, sizeof buf) == 7 && !strcmp(buf, "l.3.e11"));
    EXPECT(rs_member_name("m.{*+58}.w", 2, 0, buf, sizeof buf) == 6 && !strcmp(buf, "m.60.w"));
    EXPECT(rs_member_name("l.{*+3}.e{*}", 13, 4, buf, 4) == 6 && !strcmp(buf, "l.6")); /* truncated */
    EXPECT(rs_member_name("x{*+0}y", 5, 0, buf, sizeof buf) == 7 && !strcmp(buf, "x{*+0}y")); /* not a marker */
    EXPECT(rs_member_of("l.{*}.e{*}", "l.3.e1", ij) == 2 && ij[0] == 3 && ij[1] == 1);
    EXPECT(rs_member_of("l.{*+3}.e{*}", "l.6.e10", ij) == 2 && ij[0] == 3 && ij[1] == 10);
    EXPECT(!rs_member_of("l.{*+3}.e{*}", "l.2.e1", ij)); /* below the offset */
    EXPECT(!rs_member_of("l.{*}.e{*}", "l.03.e1", ij));
    EXPECT(!rs_member_of("l.{*}.e{*}", "l.3.e", ij));
    EXPECT(!rs_member_of("l.{*}.e{*}", "l..e1", ij));
    EXPECT(!rs_member_of("l.{*}.e{*}", "l.3.f1", ij));
    EXPECT(rs_member_of("m.{*+58}.w", "m.60.w", ij) == 1 && ij[0] == 2);
    EXPECT(rs_member_of("{*}1{*}", "21213", ij) == 2 && ij[0] == 2 && ij[1] == 213); /* the first split that fits */
    rs_marker mk[2];
    EXPECT(rs_group_markers("a{*}b{*+7}c{*d{*+07}", mk) == 2 && mk[0].at == 1 && mk[0].len == 3 && !mk[0].off &&
           mk[1].at == 5 && mk[1].len == 5 && mk[1].off == 7);
    EXPECT(rs_group_markers("{*+4611686018427387904}", mk) == 0); /* offset 2^62: too large, so text */
    EXPECT(rs_group_markers("{*+4611686018427387903}", mk) == 1 && mk[0].off == 4611686018427387903ull);

    /* member chunk: member-stepping dims (strides multiple of m) outside member-local dims that end
     * inside the member; returns the member-local run's bytes */
    rs_desc d = DESC(0, 4, 2, 16, 128, 64, 1); /* 4 members x 2 rows of 16 bytes */
    EXPECT(rs_desc_member_chunk(&d, 128) == 32);
    d = DESC(0, 2, 128, 128, 1); /* two whole members, the member dim kept */
    EXPECT(rs_desc_member_chunk(&d, 128) == 128);
    d = DESC(0, 256, 1); /* the same bytes folded into one run across the member boundary */
    EXPECT(rs_desc_member_chunk(&d, 128) == 0);
    d = DESC(64, 128, 1); /* one member's worth of bytes, but from the middle of member 0 */
    EXPECT(rs_desc_member_chunk(&d, 128) == 0);
    d = DESC(128, 128, 1); /* exactly member 1 */
    EXPECT(rs_desc_member_chunk(&d, 128) == 128);
    d = DESC(120, 2, 8, 128, 1); /* runs ending exactly at the end of each member */
    EXPECT(rs_desc_member_chunk(&d, 128) == 8);
    d = DESC(121, 2, 8, 128, 1); /* one byte further: each run crosses into the next member */
    EXPECT(rs_desc_member_chunk(&d, 128) == 0);
    d = DESC(64, 4, 16, 16, 1); /* local dims: extent 64 from offset 64 ends at 128 */
    EXPECT(rs_desc_member_chunk(&d, 128) == 64);
    d = DESC(80, 4, 16, 16, 1); /* ... from 80 it ends past the member */
    EXPECT(rs_desc_member_chunk(&d, 128) == 0);
    d = DESC(0, 3, 2, 2, 2, 12, 1); /* interleaved: a member-stepping dim inside a member-local one */
    EXPECT(rs_desc_member_chunk(&d, 12) == 0);
    d = DESC(0, 2, 16, 192, 1); /* a stride of 1.5 members: not member-stepping, and too big to be local */
    EXPECT(rs_desc_member_chunk(&d, 128) == 0);
    d = DESC(0, 2, 3, 16, 256, 32, 1); /* two stepping dims (every other member), then local */
    EXPECT(rs_desc_member_chunk(&d, 128) == 48);
    d = DESC(0, 1, 3, 1, 8, 999, 128, 5, 1); /* unit dims say nothing, whatever their strides */
    EXPECT(rs_desc_member_chunk(&d, 128) == 8);
    d = DESC(0, 4, 0, 16, 128, 64, 1); /* empty */
    EXPECT(rs_desc_member_chunk(&d, 128) == 1);
    d = DESC(0, 4, 2, 16, 128, 64, 1);
    EXPECT(rs_desc_member_chunk(&d, 0) == 0); /* no member size */
    d.ndim = 0;
    EXPECT(rs_desc_member_chunk(&d, 128) == 0);
    d.ndim = 9;
    EXPECT(rs_desc_member_chunk(&d, 128) == 0);

    /* cut: same stream, inner dims of exactly `chunk` bytes */
    rs_desc o;
    d = DESC(0, 4, 2, 16, 128, 64, 1);
    EXPECT(cut_ok(&d, 32, &o, __LINE__) == 1 && o.ndim == 3 && o.count[0] == 4); /* on a dim boundary */
    EXPECT(cut_ok(&d, 16, &o, __LINE__) == 2);
    EXPECT(cut_ok(&d, 128, &o, __LINE__) == 1 && o.count[0] == 1); /* the whole stream: one outer step */
    d = DESC(8, 256, 1);
    EXPECT(cut_ok(&d, 64, &o, __LINE__) == 1 && o.ndim == 2 && o.count[0] == 4 && o.count[1] == 64 &&
           o.stride[0] == 64); /* split inside a dim */
    d = DESC(0, 8, 16, 32, 1);
    EXPECT(cut_ok(&d, 64, &o, __LINE__) == 1 && o.ndim == 3 && o.count[0] == 2 && o.count[1] == 4 &&
           o.stride[0] == 128 && o.stride[1] == 32); /* split the outer dim in two */
    d = DESC(0, 2, 1, 6, 4, 100, 7, 10, 1); /* a unit dim between the ones that matter */
    EXPECT(cut_ok(&d, 12, &o, __LINE__) >= 1);
    EXPECT(cut_ok(&d, 24, &o, __LINE__) >= 1);
    uint32_t k = 0;
    d = DESC(0, 3, 16, 32, 1);
    EXPECT(rs_desc_cut(&d, 32, &o, &k) == -1); /* 3 rows: no cut every 2 rows */
    EXPECT(rs_desc_cut(&d, 24, &o, &k) == -1); /* 24 is not a multiple of the 16-byte rows */
    EXPECT(rs_desc_cut(&d, 48, &o, &k) == 0);  /* but the whole */
    EXPECT(rs_desc_cut(&d, 0, &o, &k) == -1);
    d = DESC(0, 2, 2, 2, 2, 2, 2, 2, 6, 128, 64, 32, 16, 8, 4, 2, 1); /* 8 dims: no room to split one */
    EXPECT(rs_desc_cut(&d, 3, &o, &k) == -1);
    EXPECT(cut_ok(&d, 12, &o, __LINE__) == 6); /* on a dim boundary it still fits */

    /* op chunk: the gcd of both sides' member-local runs, when both can be cut there */
    rs_desc a = DESC(0, 4, 2, 16, 128, 64, 1), s = DESC(0, 128, 1);
    EXPECT(rs_op_group_chunk(&a, 0, &s, 0) == 128); /* no group: the op's bytes */
    EXPECT(rs_op_group_chunk(&a, 128, &s, 0) == 32);
    EXPECT(rs_op_group_chunk(&s, 0, &a, 128) == 32); /* either side */
    a = DESC(0, 3, 32, 64, 1);                       /* 96 bytes, runs of 32 in members of 64 */
    rs_desc b = DESC(0, 2, 48, 48, 1);               /* 96 bytes, whole members of 48 */
    EXPECT(rs_op_group_chunk(&a, 64, &b, 48) == 16); /* gcd(32, 48) */
    rs_desc c = DESC(0, 4, 24, 100, 1);              /* 96 bytes in rows of 24: no cut every 32 */
    EXPECT(rs_op_group_chunk(&a, 64, &c, 0) == 0);
    EXPECT(rs_op_group_chunk(&a, 64, &c, 100) == 8); /* a group on that side too: gcd(32, 24) cuts both */
    s = DESC(32, 96, 1);                             /* crosses members of 64 */
    EXPECT(rs_op_group_chunk(&a, 0, &s, 64) == 0);
    EXPECT(rs_op_group_chunk(&s, 64, &a, 0) == 0);
    a = DESC(0, 0, 16, 64, 1); /* empty: nothing moves */
    EXPECT(rs_op_group_chunk(&a, 64, &s, 64) == 1);

    /* rs_op_group_chunk's shortcut (one side on a group, the other one run) against the general rule on
     * random member-stepping and member-local dims */
    uint64_t x = 88172645463325252ull, agree = 0, cut = 0;
    for (int it = 0; it < 200000; it++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint64_t y = x;
        uint32_t nd = 1 + (uint32_t)(y % 8), nl = 1 + (uint32_t)((y >> 3) % nd);
        y >>= 6;
        uint64_t m = (y & 3) ? 1 + (y >> 2) % 97 : 1 + (y >> 2) % 100000, cnt[8], str[8], extent = 1;
        y >>= 20;
        /* member-local dims (innermost first: a run, then dims stepping past the extent so far, which may
         * leave the member), then dims stepping by whole members (now and then by a byte more) */
        for (uint32_t i = nd; i-- > nd - nl;) {
            y = y * 6364136223846793005ull + 1442695040888963407ull; /* (an LCG: its high bits) */
            cnt[i] = 1 + (y >> 40) % 4;
            str[i] = i == nd - 1 ? 1 : extent + (y >> 50) % 3;
            extent = (cnt[i] - 1) * str[i] + (i == nd - 1 ? 1 : extent);
        }
        for (uint32_t i = nd - nl; i-- > 0;) {
            y = y * 6364136223846793005ull + 1442695040888963407ull;
            cnt[i] = 1 + (y >> 40) % 3;
            str[i] = m * (1 + (y >> 45) % 5) + ((y >> 50) % 11 == 0);
        }
        rs_desc g = D(y % (2 * m), nd, cnt, str);
        /* the other side: one run of the same bytes, or now and then of a few more */
        uint64_t oc[1] = {rs_desc_bytes(&g) + ((y >> 20) % 4 == 0 ? (y >> 22) % 5 : 0)}, os[1] = {1};
        rs_desc o = D(y >> 40, 1, oc, os);
        for (int side = 0; side < 2; side++) {
            const rs_desc *A = side ? &o : &g, *B = side ? &g : &o;
            uint64_t ma = side ? 0 : m, mb = side ? m : 0;
            const uint32_t n2[2] = {A->ndim, B->ndim};
            const uint64_t *const c2[2] = {A->count, B->count}, *const s2[2] = {A->stride, B->stride};
            const uint64_t off2[2] = {A->offset, B->offset}, m2[2] = {ma, mb};
            uint64_t want = rs_dims_group_chunk(n2, c2, s2, off2, m2), got = rs_op_group_chunk(A, ma, B, mb);
            if (got == want) agree++;
            else if (failed++ < 5)
                fprintf(stderr, "FAIL: group chunk shortcut %llu, general rule %llu (case %d)\n",
                        (unsigned long long)got, (unsigned long long)want, it);
            cut += want != 0;
        }
    }
    EXPECT(agree == 400000);
    EXPECT(cut > 40000); /* both answers occur */
    EXPECT(cut < 360000);

    if (!failed) printf("group helpers: ok\n");
}

/* ---------------------------------------------------------------- the rank verifier */

static void rename_buffer(rs_plan *P, uint32_t b, const char *name, int group)
{
    P->layout.buffers[b].name = rs_layout_name(&P->layout, name, strlen(name));
    P->layout.buffers[b].group = (uint8_t)group;
}

/* The fixture with two source buffers made groups: "layers.{*}.w" (ranks 0 and 1: [2, 6] bf16, two
 * members of 12 bytes; the packs read rows, inside a member) and "e.{*}.src" (rank 3: [2, 4] int8, two
 * members of 4; its COPY and SEND move one row each). Every op stays inside one member. */
static void build_grouped(rs_plan *P)
{
    fx_build(P);
    rename_buffer(P, 0, "layers.{*}.w", 1);
    rename_buffer(P, 4, "e.{*}.src", 1);
}

/* model.w (dst, [4, 3] bf16: 4 members of 6 bytes) made a group too: rank 2 receives 12 bytes at 12
 * straight into it (members 2 and 3) and rank 3 unpacks 24 bytes in one run. */
static void group_model_w(rs_plan *P) { rename_buffer(P, 1, "model.{*}.w", 1); }

/* Descriptor edits of a plan in memory (descriptors are packed: rs_prog_desc_set) */
static void put_desc(rs_plan *P, uint32_t r, uint32_t i, rs_desc d) { rs_prog_desc_set(&P->ranks[r], i, &d); }
static void desc_offset(rs_plan *P, uint32_t r, uint32_t i, uint64_t off)
{
    rs_desc d;
    rs_prog_desc(&P->ranks[r], i, &d);
    d.offset = off;
    rs_prog_desc_set(&P->ranks[r], i, &d);
}
static void desc_loc(rs_plan *P, uint32_t r, uint32_t i, uint32_t loc)
{
    rs_desc d;
    rs_prog_desc(&P->ranks[r], i, &d);
    d.loc = loc;
    rs_prog_desc_set(&P->ranks[r], i, &d);
}

typedef void (*mutator)(rs_plan *P);
#define M(name, body)                                                                              \
    static void name(rs_plan *P) { body; }
/* rank 0 op 2 sends 12 bytes of the group itself (zero-copy) instead of staging */
M(send_member0, (P->ranks[0].ops[2].loc = 0, P->ranks[0].ops[2].off = 0))
M(send_member1, (P->ranks[0].ops[2].loc = 0, P->ranks[0].ops[2].off = 12))
M(send_across, (P->ranks[0].ops[2].loc = 0, P->ranks[0].ops[2].off = 6))
M(send_e_across, P->ranks[3].ops[5].off = 2)
/* rank 0's first PACK as one run of 12 bytes: all of member 0, or the second half of 0 and first of 1 */
M(pack_run_member, (put_desc(P, 0, 0, DESC(0, 12, 1))))
M(pack_run_across, (put_desc(P, 0, 0, DESC(6, 12, 1))))
M(pack_rows_end, (put_desc(P, 0, 0, DESC(6, 2, 6, 12, 1)))) /* 6 bytes at the end of each member */
M(pack_interleaved, (put_desc(P, 0, 0, DESC(0, 3, 2, 2, 2, 12, 1))))
M(copy_across, desc_offset(P, 3, 2, 2))
M(copy_member0, desc_offset(P, 3, 2, 0))
M(recv_across, group_model_w(P))
M(recv_inside, (group_model_w(P), P->ranks[2].ops[1].bytes = 6, P->ranks[2].ops[1].off = 18,
                put_desc(P, 2, 1, DESC(0, 2, 6, 6, 1))))
M(unpack_one_run, (group_model_w(P)))
M(unpack_per_member, (group_model_w(P), put_desc(P, 3, 1, DESC(0, 4, 6, 6, 1))))
M(unpack_staging_uncut, (group_model_w(P), put_desc(P, 3, 1, DESC(0, 4, 6, 6, 1)),
                         put_desc(P, 3, 0, DESC(0, 3, 8, 8, 1)), desc_loc(P, 3, 0, RS_LOC_STAGING)))
/* 2^20 + 1 one-element members: over the per-rank limit (the runtime names and binds each one) */
M(too_many_members, (P->ranks[0].bindings[0].shape[0] = 1048577, P->ranks[0].bindings[0].shape[1] = 1,
                     P->ranks[0].bindings[0].bytes = 2097154))
M(group_binding_scalar, (rename_buffer(P, 3, "model.{*}.b", 1), P->ranks[2].bindings[1].ndim = 0,
                         P->ranks[2].bindings[1].bytes = 4))

static const struct {
    const char *name;
    mutator f;
    uint32_t rank;
    const char *expect; /* NULL: the rank must verify */
} vcases[] = {
    {"send one member", send_member0, 0, NULL},
    {"send the other member", send_member1, 0, NULL},
    {"send across members", send_across, 0,
     "rank 0, step 0, op 2 SEND: bytes cross a member boundary of group 'layers.{*}.w'"},
    {"send across members of e", send_e_across, 3,
     "rank 3, step 1, op 5 SEND: bytes cross a member boundary of group 'e.{*}.src'"},
    {"pack one whole member as one run", pack_run_member, 0, NULL},
    {"pack one run over two members", pack_run_across, 0,
     "rank 0, step 0, op 0 PACK: does not split into pieces inside one member of group 'layers.{*}.w'"},
    {"pack rows ending at member ends", pack_rows_end, 0, NULL},
    {"pack interleaving members inside rows", pack_interleaved, 0,
     "op 0 PACK: does not split into pieces inside one member of group 'layers.{*}.w'"},
    {"copy across members", copy_across, 3,
     "rank 3, step 0, op 3 COPY: does not split into pieces inside one member of group 'e.{*}.src'"},
    {"copy the other member", copy_member0, 3, NULL},
    {"receive across members", recv_across, 2,
     "rank 2, step 0, op 1 RECV: bytes cross a member boundary of group 'model.{*}.w'"},
    {"receive inside a member", recv_inside, 2, NULL},
    {"unpack one run over four members", unpack_one_run, 3,
     "rank 3, step 0, op 2 UNPACK: does not split into pieces inside one member of group 'model.{*}.w'"},
    {"unpack per member", unpack_per_member, 3, NULL},
    {"unpack from staging that cannot be cut per member", unpack_staging_uncut, 3,
     "op 2 UNPACK: does not split into pieces inside one member of group 'model.{*}.w'"},
    {"more than 2^20 members on a rank", too_many_members, 0,
     "rank 0: binding of group 'layers.{*}.w' takes the rank over 2^20 members of groups"},
    {"group binding without a member dim", group_binding_scalar, 2,
     "rank 2: binding of group 'model.{*}.b' has no member dimension"},
};

static void test_verify(void)
{
    rs_plan P;
    build_grouped(&P);
    for (uint32_t r = 0; r < 4; r++)
        if (rs_plan_verify_rank(&P, r, err, sizeof err)) {
            fprintf(stderr, "grouped fixture rank %u: %s\n", r, err);
            failed = 1;
        }
    EXPECT(rs_plan_check_layout(&P.layout, err, sizeof err) == 0);
    EXPECT(rs_plan_verify_all(&P, err, sizeof err) == 0);
    rs_plan_free(&P);
    /* the plain fixture accepts the ops that are refused on groups */
    fx_build(&P);
    send_across(&P);
    pack_run_across(&P);
    EXPECT(rs_plan_verify_rank(&P, 0, err, sizeof err) == 0);
    rs_plan_free(&P);

    for (size_t i = 0; i < sizeof vcases / sizeof vcases[0]; i++) {
        build_grouped(&P);
        vcases[i].f(&P);
        err[0] = 0;
        int rc = rs_plan_verify_rank(&P, vcases[i].rank, err, sizeof err);
        if (!vcases[i].expect ? rc != 0 : rc != -1 || !strstr(err, vcases[i].expect)) {
            fprintf(stderr, "%s: got rc %d '%s', want %s%s%s\n", vcases[i].name, rc, err,
                    vcases[i].expect ? "'" : "success", vcases[i].expect ? vcases[i].expect : "",
                    vcases[i].expect ? "'" : "");
            failed = 1;
        }
        uint8_t *img;
        size_t n;
        rc = rs_plan_encode(&P, &img, &n, err, sizeof err);
        if (vcases[i].expect ? rc != -1 : 0) {
            fprintf(stderr, "%s: encoder accepted it\n", vcases[i].name);
            failed = 1;
        }
        if (rc == 0) free(img);
        rs_plan_free(&P);
    }
    if (!failed) printf("group verifier: %zu cases ok\n", sizeof vcases / sizeof vcases[0]);
}

/* ---------------------------------------------------------------- codec */

static size_t layout_section(const uint8_t *img, size_t *len)
{
    uint32_t ns = rs_rd32(img + RS_HDR_NSECTIONS);
    for (uint32_t i = 0; i < ns; i++) {
        const uint8_t *e = img + RS_HDR_SIZE_1_0 + (size_t)i * RS_SEC_ENTRY_SIZE;
        if (rs_rd32(e) == RS_SEC_LAYOUT) {
            *len = (size_t)rs_rd64(e + 16);
            return (size_t)rs_rd64(e + 8);
        }
    }
    CHECK(!"no layout section");
    return 0;
}

static void test_codec(const char *dir)
{
    rs_plan P, Q;
    uint8_t *a, *b;
    size_t na, nb;
    unsigned major = 0, minor = 9;
    char path[4096];

    /* without groups: 1.0, and the file says so */
    fx_build(&P);
    CHECK(rs_plan_encode(&P, &a, &na, err, sizeof err) == 0);
    EXPECT(rs_rd16(a + RS_HDR_MAJOR) == 1 && rs_rd16(a + RS_HDR_MINOR) == 0);
    snprintf(path, sizeof path, "%s/groups-plain.bin", dir);
    CHECK(rs_plan_write_file(&P, path, err, sizeof err) == 0);
    EXPECT(rs_plan_file_version(path, &major, &minor) == 0 && major == 1 && minor == 0);
    CHECK(rs_plan_decode(a, na, -1, &Q, err, sizeof err) == 0);
    for (uint32_t i = 0; i < Q.layout.nbuffers; i++) EXPECT(!Q.layout.buffers[i].group);
    rs_plan_free(&Q);
    rs_plan_free(&P);

    /* with groups: 1.1, the flag round-trips, and re-encoding gives the same bytes */
    build_grouped(&P);
    CHECK(rs_plan_encode(&P, &b, &nb, err, sizeof err) == 0);
    EXPECT(rs_rd16(b + RS_HDR_MAJOR) == 1 && rs_rd16(b + RS_HDR_MINOR) == RS_PLAN_MINOR_GROUPS &&
           RS_PLAN_MINOR_GROUPS == 1);
    snprintf(path, sizeof path, "%s/groups-grouped.bin", dir);
    CHECK(rs_plan_write_file(&P, path, err, sizeof err) == 0);
    EXPECT(rs_plan_file_version(path, &major, &minor) == 0 && major == 1 && minor == 1);
    CHECK(rs_plan_decode(b, nb, -1, &Q, err, sizeof err) == 0);
    EXPECT(fx_same_plan(&P, &Q, -1));
    EXPECT(Q.layout.buffers[0].group == 1 && Q.layout.buffers[4].group == 1 && !Q.layout.buffers[1].group &&
           !Q.layout.buffers[2].group && !Q.layout.buffers[3].group && !Q.layout.buffers[5].group);
    EXPECT(Q.layout.buffers[0].side == RS_SRC);
    uint8_t *c;
    size_t nc;
    CHECK(rs_plan_encode(&Q, &c, &nc, err, sizeof err) == 0);
    EXPECT(nc == nb && !memcmp(b, c, nb));
    free(c);
    rs_plan_free(&Q);
    /* one rank only: the layout (with its flags) is still there */
    CHECK(rs_plan_decode(b, nb, 3, &Q, err, sizeof err) == 0);
    EXPECT(Q.layout.buffers[4].group == 1 && Q.ranks[3].loaded && !Q.ranks[0].loaded);
    rs_plan_free(&Q);

    /* The side field of buffer 0: the only layout byte that differs from the same plan with buffer 0 a
     * plain buffer of a same-length name. */
    rs_plan R;
    fx_build(&R);
    rename_buffer(&R, 0, "layers.[*].w", 0);
    rename_buffer(&R, 4, "e.{*}.src", 1);
    uint8_t *p0;
    size_t np0;
    CHECK(rs_plan_encode(&R, &p0, &np0, err, sizeof err) == 0);
    size_t lb, lp, ob = layout_section(b, &lb), op = layout_section(p0, &lp);
    CHECK(lb == lp);
    size_t at = SIZE_MAX;
    int ndiff = 0;
    for (size_t i = 0; i < lb; i++)
        if (b[ob + i] != p0[op + i]) at = ob + i, ndiff++;
    /* src (0) | group (2): 2 on buffer 0, 0 when plain */
    CHECK(ndiff == 1 && b[at] == 2 && p0[op + (at - ob)] == 0);
    rs_plan_free(&R);
    free(p0);
    /* '{*}' in the name without bit 1 (0), the destination side bit (1, 3) and values of 4 and more: all
     * refused on load. */
    static const uint8_t bad[] = {0, 1, 3, 4, 5, 6, 7, 0x7f};
    uint8_t *t = malloc(nb);
    for (size_t i = 0; i < sizeof bad; i++) {
        memcpy(t, b, nb);
        t[at] = bad[i];
        CHECK(fx_reseal(t, nb) == 0);
        err[0] = 0;
        if (rs_plan_decode(t, nb, -1, &Q, err, sizeof err) == 0) {
            fprintf(stderr, "side field %u accepted\n", bad[i]);
            failed = 1;
            rs_plan_free(&Q);
        }
    }
    memcpy(t, b, nb);
    CHECK(fx_reseal(t, nb) == 0);
    EXPECT(rs_plan_decode(t, nb, -1, &Q, err, sizeof err) == 0); /* the unmodified image */
    rs_plan_free(&Q);
    free(t);
    free(b);
    free(a);
    rs_plan_free(&P);

    /* in memory: the flag and the name must agree, one member marker per member dim, flag 0, 1 or 2 */
    static const struct {
        const char *name;
        int group;
    } lbad[] = {{"layers.{*}.w", 0}, {"layers.w", 1},           {"layers.{*}.{*}", 1}, {"layers.{*}.w", 2},
                {"l.{*+2}.w", 0},    {"l.{*}.{*+1}", 1}, {"l.{*}.{*}.{*}", 3}};
    for (size_t i = 0; i < sizeof lbad / sizeof lbad[0]; i++) {
        build_grouped(&P);
        rename_buffer(&P, 0, lbad[i].name, lbad[i].group);
        err[0] = 0;
        if (rs_plan_encode(&P, &a, &na, err, sizeof err) != -1 ||
            !strstr(err, "a group's name holds one member marker per member dim, another buffer's none")) {
            fprintf(stderr, "buffer '%s' group %d: got '%s'\n", lbad[i].name, lbad[i].group, err);
            failed = 1;
        }
        rs_plan_free(&P);
    }
    if (!failed) printf("group codec: ok\n");
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "all";
    int all = !strcmp(which, "all");
    if (all || !strcmp(which, "helpers")) test_helpers();
    if (all || !strcmp(which, "verify")) test_verify();
    if (all || !strcmp(which, "codec")) test_codec(argc > 2 ? argv[2] : ".");
    return failed;
}
