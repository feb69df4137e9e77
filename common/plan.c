/* plan.c - small plan helpers: opcode names from the X-macro, binding lookup, descriptor sizes,
 * freeing a plan. */
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

void rs_plan_free(rs_plan *P)
{
    if (!P) return;
    if (P->ranks) {
        for (uint32_t r = 0; r < P->layout.topo.world; r++) {
            rs_rank_prog *g = &P->ranks[r];
            free(g->bindings);
            free(g->steps);
            free(g->ops);
            free(g->descs);
            free(g->waits);
        }
        free(P->ranks);
    }
    rs_layout_free(&P->layout);
    memset(P, 0, sizeof *P);
}

/* ---- buffer groups ---- */

uint64_t rs_binding_members(const rs_layout *L, const rs_binding *b)
{
    if (b->buffer >= L->nbuffers || !L->buffers[b->buffer].group || b->ndim == 0) return 1;
    return (uint64_t)b->shape[0];
}

uint64_t rs_binding_member_bytes(const rs_layout *L, const rs_binding *b)
{
    uint64_t n = rs_binding_members(L, b);
    return n ? b->bytes / n : 0;
}

int rs_member_name(const char *pattern, uint64_t j, char *out, size_t n)
{
    const char *at = strstr(pattern, "{*}");
    if (!at) return snprintf(out, n, "%s", pattern);
    return snprintf(out, n, "%.*s%llu%s", (int)(at - pattern), pattern, (unsigned long long)j, at + 3);
}

int rs_member_of(const char *pattern, const char *name, uint64_t *j)
{
    const char *at = strstr(pattern, "{*}");
    if (!at) return 0;
    size_t pre = (size_t)(at - pattern), post = strlen(at + 3), n = strlen(name);
    if (n < pre + post + 1 || memcmp(name, pattern, pre) || memcmp(name + n - post, at + 3, post)) return 0;
    const char *d = name + pre, *e = name + n - post;
    if (*d == '0' && e - d > 1) return 0; /* members are named without leading zeros */
    uint64_t v = 0;
    for (; d < e; d++) {
        if (*d < '0' || *d > '9' || v > (UINT64_MAX - 9) / 10) return 0;
        v = v * 10 + (uint64_t)(*d - '0');
    }
    *j = v;
    return 1;
}

uint64_t rs_desc_member_chunk(const rs_desc *d, uint64_t m)
{
    if (!m || d->ndim == 0 || d->ndim > RS_DESC_MAX_DIMS) return 0;
    for (uint32_t i = 0; i < d->ndim; i++)
        if (d->count[i] == 0) return 1;
    uint32_t i = 0;
    for (; i < d->ndim; i++) /* the member-stepping dims */
        if (d->count[i] > 1 && (d->stride[i] < m || d->stride[i] % m)) break;
    uint64_t chunk = 1, extent = 1;
    for (; i < d->ndim; i++) {
        if (d->count[i] == 1) continue;
        if (d->stride[i] >= m) return 0; /* a member-stepping dim inside a member-local one */
        uint64_t t;
        if (rs_umul_ovf(d->count[i] - 1, d->stride[i], &t) || rs_uadd_ovf(extent, t, &extent) ||
            rs_umul_ovf(chunk, d->count[i], &chunk))
            return 0;
    }
    if (extent > m || d->offset % m > m - extent) return 0;
    return chunk;
}

int rs_desc_cut(const rs_desc *d, uint64_t chunk, rs_desc *out, uint32_t *nouter)
{
    if (!chunk || d->ndim == 0 || d->ndim > RS_DESC_MAX_DIMS) return -1;
    uint64_t cnt[RS_DESC_MAX_DIMS + 1], str[RS_DESC_MAX_DIMS + 1];
    uint32_t n = 0;
    for (uint32_t i = 0; i < d->ndim; i++) /* unit dims say nothing about where the stream can be cut */
        if (d->count[i] != 1 || (i + 1 == d->ndim && n == 0)) cnt[n] = d->count[i], str[n] = d->stride[i], n++;
    uint64_t acc = 1;
    int k = (int)n; /* dims [k, n) are inside the chunk */
    while (acc != chunk) {
        if (k == 0 || chunk % acc) return -1;
        uint64_t q = chunk / acc, c = cnt[k - 1];
        if (c == 0) return -1;
        if (q >= c) {
            if (q % c) return -1;
            acc *= c;
            k--;
            continue;
        }
        if (c % q || n == RS_DESC_MAX_DIMS) return -1;
        /* split dim k-1 into [c / q, q] */
        memmove(cnt + k, cnt + k - 1, (n - (uint32_t)k + 1) * sizeof cnt[0]);
        memmove(str + k, str + k - 1, (n - (uint32_t)k + 1) * sizeof str[0]);
        cnt[k - 1] = c / q;
        str[k - 1] = str[k] * q;
        cnt[k] = q;
        n++;
        acc = chunk;
    }
    if (k == 0) { /* the whole stream is one chunk: one outer step */
        memmove(cnt + 1, cnt, n * sizeof cnt[0]);
        memmove(str + 1, str, n * sizeof str[0]);
        if (n == RS_DESC_MAX_DIMS) return -1;
        cnt[0] = 1;
        str[0] = chunk;
        n++;
        k = 1;
    }
    memset(out, 0, sizeof *out);
    out->loc = d->loc;
    out->offset = d->offset;
    out->ndim = n;
    memcpy(out->count, cnt, n * sizeof cnt[0]);
    memcpy(out->stride, str, n * sizeof str[0]);
    *nouter = (uint32_t)k;
    return 0;
}

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

uint64_t rs_op_group_chunk(const rs_desc *a, uint64_t ma, const rs_desc *b, uint64_t mb)
{
    uint64_t g = 0;
    if (rs_desc_bytes(a) == 0) return 1; /* nothing moves */
    if (ma) {
        uint64_t c = rs_desc_member_chunk(a, ma);
        if (!c) return 0;
        g = c;
    }
    if (mb) {
        uint64_t c = rs_desc_member_chunk(b, mb);
        if (!c) return 0;
        g = g ? gcd_u64(g, c) : c;
    }
    if (!g) return rs_desc_bytes(a);
    rs_desc t;
    uint32_t k;
    if (rs_desc_cut(a, g, &t, &k) || rs_desc_cut(b, g, &t, &k)) return 0;
    return g;
}
