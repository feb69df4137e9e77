/* plan.c - small plan helpers: opcode names from the X-macro, binding lookup, descriptor sizes,
 * freeing a plan, the blocks that hold the planner's programs. */
#define _GNU_SOURCE
#include "plan.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Opcodes are stored as one byte; 0 is never an opcode. */
#define X(n, v, o, s) _Static_assert((v) > 0 && (v) < 256, "opcode " #n " fits in a byte");
RS_OPCODES(X)
#undef X

static const char *const op_names[] = {
#define X(n, v, o, s) [v] = #n,
    RS_OPCODES(X)
#undef X
};

const char *rs_op_name(int code)
{
    if (code < 0 || (size_t)code >= sizeof op_names / sizeof op_names[0]) return NULL;
    return op_names[code];
}

uint32_t rs_rank_binding(const rs_rank_prog *r, uint32_t buffer)
{
    for (uint32_t i = 0; i < r->nbindings; i++)
        if (r->bindings[i].buffer == buffer) return i;
    return RS_NONE;
}

uint64_t rs_desc_bytes(const rs_desc *d)
{
    if (d->ndim == 0 || d->ndim > RS_DESC_MAX_DIMS) return 0;
    uint64_t n = 1;
    for (uint32_t i = 0; i < d->ndim; i++)
        if (rs_umul_ovf(n, d->count[i], &n)) return UINT64_MAX; /* saturate; the verifier rejects it */
    return n;
}

int rs_desc_extent(const rs_desc *d, uint64_t *end)
{
    if (d->ndim == 0 || d->ndim > RS_DESC_MAX_DIMS) return 1;
    for (uint32_t i = 0; i < d->ndim; i++)
        if (d->count[i] == 0) {
            *end = d->offset;
            return 0;
        }
    uint64_t e = d->offset, t;
    for (uint32_t i = 0; i < d->ndim; i++) {
        if (rs_umul_ovf(d->count[i] - 1, d->stride[i], &t) || rs_uadd_ovf(e, t, &e)) return 1;
    }
    if (rs_uadd_ovf(e, 1, &e)) return 1;
    *end = e;
    return 0;
}

/* A block's header, at its start (the rest of the first 64 bytes is unused). */
struct rs_prog_block {
    rs_prog_block *next;
    size_t len; /* bytes mapped, header included */
};

void rs_plan_free(rs_plan *P)
{
    if (!P) return;
    rs_plan_verify_pre_free(P->verify_pre); /* (its thread reads the bindings) */
    if (P->ranks) {
        for (uint32_t r = 0; r < P->layout.topo.world; r++) {
            rs_rank_prog *g = &P->ranks[r];
            free(g->bindings);
            if (g->in_blocks) continue; /* the rest goes with the blocks */
            free(g->steps);
            free(g->ops);
            free(g->dpool);
            free(g->doff);
            free(g->waits);
        }
        free(P->ranks);
    }
    for (rs_prog_block *b = P->blocks, *next; b; b = next) {
        next = b->next;
        rs_unmap_aligned(b, b->len);
    }
    rs_layout_free(&P->layout);
    memset(P, 0, sizeof *P);
}

/* ---- program blocks ---- */

#define BLOCK_MIN ((size_t)32 << 20)
#define BLOCK_ALIGN ((size_t)2 << 20) /* x86-64's and arm64's (4 KiB base pages) huge page */

void *rs_prog_block_alloc(rs_plan *P, rs_prog_cursor *cur, size_t bytes)
{
    /* GCC's AddressSanitizer build (CTest sanitize) keeps an allocation per array, for its bounds checks;
     * the fuzz build (clang, which does not define this) takes the blocks like a release build, under UBSan
     * (it found tests/fuzz/regress/front/planner_empty_programs.layout) */
#if defined(__SANITIZE_ADDRESS__)
    (void)P, (void)cur, (void)bytes;
    return NULL;
#else
    if (bytes > SIZE_MAX / 4) return NULL;
    bytes = rs_prog_block_room(bytes);
    if (!cur->at || (size_t)(cur->end - cur->at) < bytes) {
        size_t len = bytes + 64 > BLOCK_MIN ? bytes + 64 : BLOCK_MIN;
        len = (len + BLOCK_ALIGN - 1) & ~(BLOCK_ALIGN - 1);
        uint8_t *a = rs_map_aligned(len);
        if (!a) return NULL;
        rs_prog_block *b = (rs_prog_block *)a;
        b->len = len;
        b->next = __atomic_load_n(&P->blocks, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&P->blocks, &b->next, b, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
        }
        cur->at = a + 64;
        cur->end = a + len;
    }
    void *p = cur->at;
    cur->at += bytes;
    return p;
#endif
}

void rs_prog_block_shrink(rs_prog_cursor *cur, void *p, size_t bytes)
{
    uint8_t *end = (uint8_t *)p + rs_prog_block_room(bytes);
    rs_assert(end <= cur->at && (uint8_t *)p < cur->end);
    cur->at = end;
}

static void *copy_out(const void *p, size_t n)
{
    void *q = rs_xmalloc(n ? n : 1);
    if (n) memcpy(q, p, n);
    return q;
}

void rs_prog_unblock(rs_rank_prog *g)
{
    if (!g->in_blocks) return;
    g->steps = copy_out(g->steps, ((size_t)g->nsteps + 1) * sizeof *g->steps);
    g->ops = copy_out(g->ops, ((size_t)g->nops + 1) * sizeof *g->ops);
    g->waits = copy_out(g->waits, ((size_t)g->nwaits + 1) * sizeof *g->waits);
    g->doff = copy_out(g->doff, (size_t)g->dcap * sizeof *g->doff);
    g->dpool = copy_out(g->dpool, g->dpool_cap * sizeof *g->dpool);
    g->in_blocks = 0;
}

/* ---- packed descriptors ---- */

static void desc_put(uint64_t *w, const rs_desc *d)
{
    w[0] = (uint64_t)d->ndim << 32 | d->loc;
    w[1] = d->offset;
    for (uint32_t k = 0; k < d->ndim; k++) {
        w[2 + 2 * k] = d->count[k];
        w[3 + 2 * k] = d->stride[k];
    }
}

void rs_prog_desc_reserve(rs_rank_prog *g, uint32_t n, uint64_t words)
{
    rs_prog_unblock(g);
    uint64_t need = (uint64_t)g->ndescs + n;
    rs_assert(need <= UINT32_MAX);
    if (need > g->dcap) {
        uint64_t c = g->dcap ? (uint64_t)g->dcap * 2 : 16;
        if (c < need) c = need;
        if (c > UINT32_MAX) c = UINT32_MAX;
        g->doff = rs_xrealloc(g->doff, c * sizeof *g->doff);
        g->dcap = (uint32_t)c;
    }
    if (g->dpool_n + words > g->dpool_cap) {
        uint64_t c = g->dpool_cap ? g->dpool_cap * 2 : 64;
        if (c < g->dpool_n + words) c = g->dpool_n + words;
        g->dpool = rs_xrealloc(g->dpool, c * sizeof *g->dpool);
        g->dpool_cap = c;
    }
}

/* d written at the pool's end; returns where it starts (n: descriptor slots to reserve, 1 or 0) */
static uint32_t desc_append(rs_rank_prog *g, const rs_desc *d, uint32_t n)
{
    uint64_t words = 2 + 2 * (uint64_t)d->ndim;
    rs_assert(d->ndim <= RS_DESC_MAX_DIMS && g->dpool_n + words <= UINT32_MAX);
    rs_prog_desc_reserve(g, n, words);
    uint32_t at = (uint32_t)g->dpool_n;
    desc_put(g->dpool + at, d);
    g->dpool_n += words;
    return at;
}

uint32_t rs_prog_desc_add(rs_rank_prog *g, const rs_desc *d)
{
    uint32_t at = desc_append(g, d, 1);
    g->doff[g->ndescs] = at;
    return g->ndescs++;
}

void rs_prog_desc_set(rs_rank_prog *g, uint32_t i, const rs_desc *d)
{
    rs_assert(i < g->ndescs && d->ndim <= RS_DESC_MAX_DIMS);
    uint64_t *w = g->dpool + g->doff[i];
    if (d->ndim <= (uint32_t)(w[0] >> 32)) desc_put(w, d); /* in place: as many dims or fewer */
    else g->doff[i] = desc_append(g, d, 0);
}

void rs_prog_desc_trim(rs_rank_prog *g)
{
    rs_prog_unblock(g);
    g->doff = rs_xrealloc(g->doff, ((size_t)g->ndescs + 1) * sizeof *g->doff);
    g->dcap = g->ndescs + 1;
    g->dpool = rs_xrealloc(g->dpool, (g->dpool_n + 1) * sizeof *g->dpool);
    g->dpool_cap = g->dpool_n + 1;
}

unsigned rs_plan_layout_minor(const rs_layout *L)
{
    int groups = 0, groups2 = 0, balanced = 0;
    for (uint32_t i = 0; i < L->nbuffers; i++) {
        const rs_buffer *b = &L->buffers[i];
        rs_marker mk[RS_GROUP_MAX_DIMS];
        int n = b->group ? rs_group_markers(b->name, mk) : 0;
        groups2 |= b->group > 1 || (n == 1 && mk[0].off); /* two member dims, or an offset */
        groups |= b->group != 0;
    }
    for (uint32_t i = 0; i < L->nplaces; i++)
        balanced |= L->places[i].kind == RS_PLACE_SHARD && L->places[i].arg == RS_SHARD_BALANCED;
    return groups2    ? RS_PLAN_MINOR_GROUPS2
           : balanced ? RS_PLAN_MINOR_BALANCED
           : groups   ? RS_PLAN_MINOR_GROUPS
                      : RS_PLAN_MINOR;
}

/* ---- buffer groups ---- */

uint64_t rs_binding_members(const rs_layout *L, const rs_binding *b)
{
    if (b->buffer >= L->nbuffers || !L->buffers[b->buffer].group || b->ndim == 0) return 1;
    uint32_t k = L->buffers[b->buffer].group;
    if (k > b->ndim) return 0;
    uint64_t n = 1;
    for (uint32_t d = 0; d < k; d++)
        if (rs_umul_ovf(n, (uint64_t)b->shape[d], &n)) return 0;
    return n;
}

uint64_t rs_binding_member_bytes(const rs_layout *L, const rs_binding *b)
{
    uint64_t n = rs_binding_members(L, b);
    return n ? b->bytes / n : 0;
}

uint64_t rs_binding_inner_members(const rs_layout *L, const rs_binding *b)
{
    if (b->buffer >= L->nbuffers || L->buffers[b->buffer].group != 2 || b->ndim < 2) return 1;
    return (uint64_t)b->shape[1];
}

/* One marker at s ("{*}" or "{*+N}", N > 0 without a leading zero, below 2^62): its length and offset,
 * or 0 when s does not start a well-formed one. */
static size_t marker_at(const char *s, uint64_t *off)
{
    if (s[0] != '{' || s[1] != '*') return 0;
    *off = 0;
    if (s[2] == '}') return 3;
    if (s[2] != '+' || s[3] < '1' || s[3] > '9') return 0;
    size_t i = 3;
    uint64_t v = 0;
    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v >= RS_GROUP_MAX_OFFSET) return 0;
    }
    if (s[i] != '}') return 0;
    *off = v;
    return i + 1;
}

int rs_group_markers(const char *name, rs_marker *m)
{
    int n = 0;
    for (const char *s = strstr(name, "{*"); s; s = strstr(s, "{*")) {
        uint64_t off;
        size_t len = marker_at(s, &off);
        if (!len) { /* not a marker: text */
            s += 2;
            continue;
        }
        if (n < RS_GROUP_MAX_DIMS) m[n] = (rs_marker){(size_t)(s - name), len, off};
        n++;
        s += len;
    }
    return n;
}

int rs_member_name(const char *pattern, uint64_t j, uint64_t inner, char *out, size_t n)
{
    rs_marker m[RS_GROUP_MAX_DIMS];
    int k = rs_group_markers(pattern, m);
    if (k <= 0 || k > RS_GROUP_MAX_DIMS) return snprintf(out, n, "%s", pattern);
    uint64_t idx[RS_GROUP_MAX_DIMS] = {j, 0};
    if (k == 2) {
        if (!inner) inner = 1;
        idx[0] = j / inner;
        idx[1] = j % inner;
    }
    size_t len = 0, at = 0;
    char tmp[24];
    for (int i = 0; i <= k; i++) {
        size_t end = i < k ? m[i].at : strlen(pattern);
        for (size_t c = at; c < end; c++, len++)
            if (out && len + 1 < n) out[len] = pattern[c];
        if (i == k) break;
        int w = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)(idx[i] + m[i].off));
        for (int c = 0; c < w; c++, len++)
            if (out && len + 1 < n) out[len] = tmp[c];
        at = m[i].at + m[i].len;
    }
    if (out && n) out[len < n ? len : n - 1] = 0;
    return (int)len;
}

/* Digits of name[a, b) as a member number (no leading zero, fits in 64 bits), minus off; 0 when not. */
static int member_num(const char *name, size_t a, size_t b, uint64_t off, uint64_t *v)
{
    if (a >= b || (name[a] == '0' && b - a > 1)) return 0;
    uint64_t x = 0;
    for (size_t i = a; i < b; i++) {
        if (name[i] < '0' || name[i] > '9' || x > (UINT64_MAX - 9) / 10) return 0;
        x = x * 10 + (uint64_t)(name[i] - '0');
    }
    if (x < off) return 0;
    *v = x - off;
    return 1;
}

int rs_member_of(const char *pattern, const char *name, uint64_t *idx)
{
    rs_marker m[RS_GROUP_MAX_DIMS];
    int k = rs_group_markers(pattern, m);
    if (k <= 0 || k > RS_GROUP_MAX_DIMS) return 0;
    size_t n = strlen(name), plen = strlen(pattern);
    size_t pre = m[0].at, post = plen - (m[k - 1].at + m[k - 1].len);
    if (n < pre + post + (size_t)k || memcmp(name, pattern, pre) || memcmp(name + n - post, pattern + plen - post, post))
        return 0;
    uint64_t v[RS_GROUP_MAX_DIMS];
    if (k == 1) {
        if (!member_num(name, pre, n - post, m[0].off, &v[0])) return 0;
    } else {
        /* name = pre D1 mid D2 post: the first run's length decides the rest */
        const char *mid = pattern + m[0].at + m[0].len;
        size_t mlen = m[1].at - (m[0].at + m[0].len), e = n - post;
        int found = 0;
        for (size_t a = pre + 1; a + mlen < e && !found; a++) {
            if (name[a - 1] < '0' || name[a - 1] > '9') break;
            found = !memcmp(name + a, mid, mlen) && member_num(name, pre, a, m[0].off, &v[0]) &&
                    member_num(name, a + mlen, e, m[1].off, &v[1]);
        }
        if (!found) return 0;
    }
    for (int i = 0; i < k; i++) idx[i] = v[i];
    return k;
}

uint64_t rs_dims_member_chunk(uint32_t n, const uint64_t *cnt, const uint64_t *str, uint64_t offset, uint64_t m)
{
    if (!m || n == 0 || n > RS_DESC_MAX_DIMS) return 0;
    for (uint32_t i = 0; i < n; i++)
        if (cnt[i] == 0) return 1;
    uint32_t i = 0;
    for (; i < n; i++) /* the member-stepping dims */
        if (cnt[i] > 1 && (str[i] < m || str[i] % m)) break;
    uint64_t chunk = 1, extent = 1;
    for (; i < n; i++) {
        if (cnt[i] == 1) continue;
        if (str[i] >= m) return 0; /* a member-stepping dim inside a member-local one */
        uint64_t t;
        if (rs_umul_ovf(cnt[i] - 1, str[i], &t) || rs_uadd_ovf(extent, t, &extent) ||
            rs_umul_ovf(chunk, cnt[i], &chunk))
            return 0;
    }
    if (extent > m || offset % m > m - extent) return 0;
    return chunk;
}

uint64_t rs_desc_member_chunk(const rs_desc *d, uint64_t m)
{
    return rs_dims_member_chunk(d->ndim, d->count, d->stride, d->offset, m);
}

/* How a stream of dims cnt[0..nd) cuts at every `chunk` bytes. Unit dims are dropped (the innermost kept if
 * all are): keep[0..*n) are the dims left. Dims keep[*k..*n) lie inside a chunk, except that with *q > 0
 * dim keep[*k - 1] is split into [c / q, q] and its q part lies inside too; *k == 0 (no dim outside) needs
 * a unit outer dim. Returns the dims of the cut form, or 0 when the stream does not cut so. */
static uint32_t cut_core(uint32_t nd, const uint64_t *cnt, uint64_t chunk, uint32_t *keep, uint32_t *n, int *k,
                         uint64_t *q)
{
    if (!chunk || nd == 0 || nd > RS_DESC_MAX_DIMS) return 0;
    uint32_t m = 0;
    for (uint32_t i = 0; i < nd; i++)
        if (cnt[i] != 1 || (i + 1 == nd && m == 0)) keep[m++] = i;
    uint64_t acc = 1;
    int j = (int)m;
    *q = 0;
    while (acc != chunk) {
        if (j == 0 || chunk % acc) return 0;
        uint64_t r = chunk / acc, c = cnt[keep[j - 1]];
        if (c == 0) return 0;
        if (r >= c) {
            if (r % c) return 0;
            acc *= c;
            j--;
            continue;
        }
        if (c % r) return 0;
        *q = r;
        acc = chunk;
    }
    *n = m;
    *k = j;
    uint32_t dims = m + (*q != 0) + (j == 0);
    return dims <= RS_DESC_MAX_DIMS ? dims : 0;
}

int rs_dims_cut_ok(uint32_t n, const uint64_t *cnt, uint64_t chunk)
{
    uint32_t keep[RS_DESC_MAX_DIMS], m;
    int k;
    uint64_t q;
    return cut_core(n, cnt, chunk, keep, &m, &k, &q) != 0;
}

int rs_desc_cut(const rs_desc *d, uint64_t chunk, rs_desc *out, uint32_t *nouter)
{
    uint32_t keep[RS_DESC_MAX_DIMS], m;
    int k;
    uint64_t q;
    if (!cut_core(d->ndim, d->count, chunk, keep, &m, &k, &q)) return -1;
    memset(out, 0, sizeof *out);
    out->loc = d->loc;
    out->offset = d->offset;
    uint32_t o = 0;
    if (k == 0) out->count[o] = 1, out->stride[o] = chunk, o++; /* the whole stream is one chunk */
    for (uint32_t i = 0; i < m; i++) {
        uint64_t c = d->count[keep[i]], st = d->stride[keep[i]];
        if (q && (int)i == k - 1) {
            out->count[o] = c / q, out->stride[o] = st * q, o++;
            out->count[o] = q, out->stride[o] = st, o++;
        } else {
            out->count[o] = c, out->stride[o] = st, o++;
        }
    }
    out->ndim = o;
    *nouter = k == 0 ? 1 : (uint32_t)k;
    return 0;
}

uint64_t rs_dims_group_chunk(const uint32_t n[2], const uint64_t *const cnt[2], const uint64_t *const str[2],
                             const uint64_t off[2], const uint64_t m[2])
{
    uint64_t g = 0;
    for (int s = 0; s < 2; s++) {
        if (!m[s]) continue;
        uint64_t c = rs_dims_member_chunk(n[s], cnt[s], str[s], off[s], m[s]);
        if (!c) return 0;
        g = g ? rs_gcd_u64(g, c) : c;
    }
    if (!g || !rs_dims_cut_ok(n[0], cnt[0], g) || !rs_dims_cut_ok(n[1], cnt[1], g)) return 0;
    return g;
}

uint64_t rs_op_group_chunk(const rs_desc *a, uint64_t ma, const rs_desc *b, uint64_t mb)
{
    if (rs_desc_bytes(a) == 0) return 1; /* nothing moves */
    if (!ma && !mb) return rs_desc_bytes(a);
    if (!ma != !mb) {
        /* One side on a group, the other one run (most PACKs and UNPACKs, a third of the per-rank checks'
         * instructions through the general rule): the group side's member-local runs are its innermost dims,
         * so its own stream cuts at their size (with room for the unit dim the cut form may add), and a single
         * run cuts wherever its length is a multiple. The same answer as rs_dims_group_chunk (test_groups). */
        const rs_desc *gd = ma ? a : b, *od = ma ? b : a;
        if (od->ndim == 1 && gd->ndim < RS_DESC_MAX_DIMS) {
            uint64_t g = rs_desc_member_chunk(gd, ma ? ma : mb);
            return g && od->count[0] % g == 0 ? g : 0;
        }
    }
    const uint32_t n[2] = {a->ndim, b->ndim};
    const uint64_t *const cnt[2] = {a->count, b->count}, *const str[2] = {a->stride, b->stride};
    const uint64_t off[2] = {a->offset, b->offset}, m[2] = {ma, mb};
    return rs_dims_group_chunk(n, cnt, str, off, m);
}
