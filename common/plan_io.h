/* plan_io.h - private to the plan.bin writer and reader: the fixed header/section/directory layout,
 * little-endian and LEB128 primitives, a bounds-checked read cursor and the content hash. */
#ifndef RS_PLAN_IO_H
#define RS_PLAN_IO_H

#include <stdint.h>
#include <string.h>

#include "util.h"

/* "\x89RSPLAN\r\n\x1a\n" + NUL: the high byte catches 7-bit channels, CR LF catches CRLF translation,
 * ^Z stops a DOS `type`, the final LF catches LF -> CRLF. */
#define RS_PLAN_MAGIC "\x89RSPLAN\r\n\x1a\n"
#define RS_PLAN_MAGIC_LEN 12

/* Fixed header (format 1.0), then nsections section-table entries, then the sections back to back. */
enum {
    RS_HDR_MAGIC = 0,       /* u8[12] */
    RS_HDR_MAJOR = 12,      /* u16 */
    RS_HDR_MINOR = 14,      /* u16 */
    RS_HDR_LEN = 16,        /* u32 header length in bytes (>= RS_HDR_SIZE_1_0) */
    RS_HDR_NSECTIONS = 20,  /* u32 */
    RS_HDR_FLAGS = 24,      /* u32, 0 */
    RS_HDR_WORLD = 28,      /* u32 */
    RS_HDR_FILE_LEN = 32,   /* u64 */
    RS_HDR_PLAN_FP = 40,    /* u64 */
    RS_HDR_SOURCE_FP = 48,  /* u64 */
    RS_HDR_STAGING = 56,    /* u64 staging budget */
    RS_HDR_CRC = 64,        /* u32 CRC32C of header + section table, this field excluded */
    RS_HDR_RESERVED = 68,   /* u32, 0 */
    RS_HDR_SIZE_1_0 = 72
};
enum { RS_SEC_ENTRY_SIZE = 32 }; /* u32 id, u32 flags, u64 offset, u64 length, u32 crc, u32 reserved */
enum { RS_DIR_ENTRY_SIZE = 48 }; /* u64 off, u64 len, u64 staging, u32 crc, u32 nbindings, nsteps, nops, ndescs, nwaits */

enum { RS_SEC_STRINGS = 1, RS_SEC_LAYOUT = 2, RS_SEC_RANKS = 3, RS_SEC_PROGRAMS = 4, RS_SEC_COUNT_1_0 = 4 };
#define RS_SEC_MAX 64 /* section table entries a reader accepts */

_Static_assert(sizeof(RS_PLAN_MAGIC) == RS_PLAN_MAGIC_LEN, "magic is 12 bytes with its NUL");
_Static_assert(RS_HDR_SIZE_1_0 % 8 == 0 && RS_HDR_RESERVED + 4 == RS_HDR_SIZE_1_0, "header fields tile the header");
_Static_assert(RS_DIR_ENTRY_SIZE == 3 * 8 + 6 * 4, "directory entry fields tile the entry");

static inline const char *rs_plan_section_name(uint32_t id)
{
    static const char *const names[] = {"?", "strings", "layout", "ranks", "programs"};
    return id < sizeof names / sizeof names[0] ? names[id] : "unknown";
}

/* Plan limits the reader enforces before allocating (documented in docs/format.md). */
#define RS_PLAN_MAX_WORLD (1u << 20)
#define RS_PLAN_MAX_MESH_INDEX (1ull << 26) /* nmeshes * world: the per-mesh rank -> coordinate tables */

/* ---- little-endian fixed-width fields ---- */
static inline void rs_le16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static inline void rs_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void rs_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t rs_rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t rs_rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t rs_rd64(const uint8_t *p) { return (uint64_t)rs_rd32(p) | (uint64_t)rs_rd32(p + 4) << 32; }

/* ---- read cursor: every read is bounds-checked; the first failure sticks ---- */
typedef struct {
    const uint8_t *p, *end;
    int bad; /* 1: ran past the end; 2: malformed varint */
} rs_cur;

static inline uint64_t rs_cur_uv(rs_cur *c)
{
    if (c->p < c->end && *c->p < 0x80) return *c->p++; /* one-byte fast path */
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (c->p >= c->end) {
            c->bad = c->bad ? c->bad : 1;
            return 0;
        }
        uint8_t b = *c->p++;
        /* The 10th byte may only carry the top bit; no over-long (zero-padded) encodings. */
        if (shift == 63 && b > 1) break;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (b == 0 && shift) break;
            return v;
        }
    }
    c->bad = c->bad ? c->bad : 2;
    return 0;
}
static inline int64_t rs_cur_sv(rs_cur *c)
{
    uint64_t u = rs_cur_uv(c);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}
static inline uint8_t rs_cur_u8(rs_cur *c)
{
    if (c->p >= c->end) {
        c->bad = c->bad ? c->bad : 1;
        return 0;
    }
    return *c->p++;
}
static inline uint64_t rs_cur_u64(rs_cur *c)
{
    if (c->end - c->p < 8) {
        c->bad = c->bad ? c->bad : 1;
        c->p = c->end;
        return 0;
    }
    uint64_t v = rs_rd64(c->p);
    c->p += 8;
    return v;
}
static inline size_t rs_cur_left(const rs_cur *c) { return (size_t)(c->end - c->p); }

/* ---- content hash for the plan fingerprint (spec in docs/format.md) ----
 * Four lanes over 32-byte blocks of little-endian 64-bit words, each lane h = mix(h ^ w) with
 * mix(x) = (x * K) ^ ((x * K) >> 31); the tail is zero-padded into whole words fed to lane 0;
 * the result folds the lanes and the length. Not cryptographic: it tells plans apart. */
#define RS_FP_K 0x9e3779b97f4a7c15ull
typedef struct {
    uint64_t h[4];
    uint64_t len;
} rs_fp;
static inline uint64_t rs_fp_mix(uint64_t x)
{
    x *= RS_FP_K;
    return x ^ (x >> 31);
}
static inline void rs_fp_init(rs_fp *s)
{
    s->h[0] = 0x243f6a8885a308d3ull, s->h[1] = 0x13198a2e03707344ull;
    s->h[2] = 0xa4093822299f31d0ull, s->h[3] = 0x082efa98ec4e6c89ull;
    s->len = 0;
}
/* Feed one chunk; each chunk is padded to 8 bytes on its own (callers feed whole fields/sections). */
static inline void rs_fp_feed(rs_fp *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    s->len += n;
    while (n >= 32) {
        for (int i = 0; i < 4; i++) s->h[i] = rs_fp_mix(s->h[i] ^ rs_rd64(p + 8 * i));
        p += 32, n -= 32;
    }
    while (n > 0) {
        uint8_t w[8] = {0};
        size_t k = n < 8 ? n : 8;
        memcpy(w, p, k);
        s->h[0] = rs_fp_mix(s->h[0] ^ rs_rd64(w));
        p += k, n -= k;
    }
}
static inline uint64_t rs_fp_final(const rs_fp *s)
{
    uint64_t h = s->len;
    for (int i = 0; i < 4; i++) h = rs_fp_mix(h ^ s->h[i]) + (uint64_t)i;
    return rs_fp_mix(h);
}

/* Plan fingerprint: the hash of a 32-byte block of header facts (major, minor, world, nsections,
 * staging budget, source fingerprint), then per section its 16-byte (id, 0, length) and its bytes. */
static inline uint64_t rs_plan_content_fp(const uint8_t *head, const uint8_t *const *sec)
{
    uint32_t nsec = rs_rd32(head + RS_HDR_NSECTIONS);
    uint8_t facts[32] = {0};
    memcpy(facts + 0, head + RS_HDR_MAJOR, 4);
    memcpy(facts + 4, head + RS_HDR_WORLD, 4);
    memcpy(facts + 8, head + RS_HDR_NSECTIONS, 4);
    memcpy(facts + 16, head + RS_HDR_STAGING, 8);
    memcpy(facts + 24, head + RS_HDR_SOURCE_FP, 8);
    rs_fp s;
    rs_fp_init(&s);
    rs_fp_feed(&s, facts, sizeof facts);
    const uint8_t *tab = head + rs_rd32(head + RS_HDR_LEN);
    for (uint32_t i = 0; i < nsec; i++) {
        const uint8_t *e = tab + (size_t)i * RS_SEC_ENTRY_SIZE;
        uint8_t t[16] = {0};
        memcpy(t, e, 4);
        memcpy(t + 8, e + 16, 8);
        rs_fp_feed(&s, t, sizeof t);
        rs_fp_feed(&s, sec[i], (size_t)rs_rd64(e + 16));
    }
    return rs_fp_final(&s);
}

/* CRC32C of the header and the section table, the CRC field itself skipped. */
static inline uint32_t rs_plan_header_crc(const uint8_t *head, size_t len)
{
    uint32_t c = rs_crc32c(0, head, RS_HDR_CRC);
    return rs_crc32c(c, head + RS_HDR_CRC + 4, len - RS_HDR_CRC - 4);
}

/* CRC32C of A || B from crc(A), crc(B) and len(B): the per-rank CRCs of the programs give the section's
 * CRC without a second pass. `ops` caches the GF(2) operators for 2^k zero bytes (rs_crc_ops_init). */
typedef struct {
    uint32_t m[64][32];
} rs_crc_ops;
static inline uint32_t rs_gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (int i = 0; vec; vec >>= 1, i++)
        if (vec & 1) sum ^= mat[i];
    return sum;
}
static inline void rs_crc_ops_init(rs_crc_ops *o)
{
    uint32_t one[32], two[32], four[32];
    one[0] = 0x82f63b78u; /* reflected Castagnoli polynomial: the operator for one zero bit */
    for (int n = 1; n < 32; n++) one[n] = 1u << (n - 1);
    for (int n = 0; n < 32; n++) two[n] = rs_gf2_times(one, one[n]);
    for (int n = 0; n < 32; n++) four[n] = rs_gf2_times(two, two[n]);
    for (int n = 0; n < 32; n++) o->m[0][n] = rs_gf2_times(four, four[n]); /* one zero byte */
    for (int k = 1; k < 64; k++)
        for (int n = 0; n < 32; n++) o->m[k][n] = rs_gf2_times(o->m[k - 1], o->m[k - 1][n]);
}
static inline uint32_t rs_crc32c_combine(const rs_crc_ops *o, uint32_t crc1, uint32_t crc2, uint64_t len2)
{
    for (int k = 0; len2; k++, len2 >>= 1)
        if (len2 & 1) crc1 = rs_gf2_times(o->m[k], crc1);
    return crc1 ^ crc2;
}

struct rs_layout;
/* Structural checks of a layout (plan_verify.c): indices inside their tables, dims and shapes within
 * limits, products without overflow, so that the placement math in layout.c is safe on it. */
int rs_plan_check_layout(const struct rs_layout *L, char *err, size_t errlen);

#endif
