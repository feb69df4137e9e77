/* coverage.c - rs-example-coverage: the distinct tensor bytes each side of a layout covers (every element
 * counted once however many ranks hold it), so the example tests can compare them with parameter counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "util.h"

typedef struct {
    int64_t lo, hi;
} ival;

typedef rs_vec(ival) ivals;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_ival(const void *a, const void *b)
{
    const ival *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Sort and merge touching intervals; drop empty ones. */
static void normalize(ivals *s)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].hi > s->v[i].lo) s->v[k++] = s->v[i];
    s->n = k;
    qsort(s->v, s->n, sizeof *s->v, cmp_ival);
    k = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (k && s->v[i].lo <= s->v[k - 1].hi) {
            if (s->v[i].hi > s->v[k - 1].hi) s->v[k - 1].hi = s->v[i].hi;
        } else {
            s->v[k++] = s->v[i];
        }
    }
    s->n = k;
}

/* The elements of dim d that some rank holds, over all coordinates: the slice, split by each shard of d in
 * nesting order (a block shard whose blocks do not reach the end leaves the tail unheld). */
static void held_dim(const rs_layout *L, const rs_piece *p, uint32_t d, ivals *out)
{
    int64_t lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
    rs_piece_slice(L, p, lo, hi);
    out->n = 0;
    rs_vec_push(out, ((ival){lo[d], hi[d]}));
    const rs_mesh *m = &L->meshes[p->mesh];
    for (uint32_t i = 0; i < p->nplace; i++) {
        const rs_place *pl = &L->places[p->place + i];
        if (pl->kind != RS_PLACE_SHARD || pl->dim != d) continue;
        ivals next = {0};
        for (size_t k = 0; k < out->n; k++)
            for (int64_t j = 0; j < m->size[pl->axis]; j++) {
                ival v;
                rs_shard_interval(out->v[k].lo, out->v[k].hi, m->size[pl->axis], pl->arg, j, &v.lo, &v.hi);
                rs_vec_push(&next, v);
            }
        normalize(&next);
        rs_vec_free(out);
        *out = next;
    }
    normalize(out);
}

/* Distinct elements covered by pieces [first, first + n) of tensor t. */
static unsigned __int128 covered(const rs_layout *L, const rs_tensor *t, uint32_t first, uint32_t n)
{
    if (!n) return 0;
    uint32_t nd = t->ndim;
    ivals *held = rs_xcalloc((size_t)n * nd, sizeof *held);
    rs_vec(int64_t) pts[RS_MAX_DIMS] = {{0}};
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t d = 0; d < nd; d++) {
            ivals *h = &held[(size_t)i * nd + d];
            held_dim(L, &L->pieces[first + i], d, h);
            for (size_t k = 0; k < h->n; k++) {
                rs_vec_push(&pts[d], h->v[k].lo);
                rs_vec_push(&pts[d], h->v[k].hi);
            }
        }
    uint64_t ncell = 1, stride[RS_MAX_DIMS];
    for (int d = (int)nd - 1; d >= 0; d--) {
        qsort(pts[d].v, pts[d].n, sizeof(int64_t), cmp_i64);
        size_t k = 0;
        for (size_t i = 0; i < pts[d].n; i++)
            if (!k || pts[d].v[i] != pts[d].v[k - 1]) pts[d].v[k++] = pts[d].v[i];
        pts[d].n = k;
        stride[d] = ncell;
        ncell *= k > 1 ? k - 1 : 1;
        if (ncell > (1u << 26)) rs_die("tensor %s: too many coverage cells", t->name);
    }
    uint8_t *cell = rs_xcalloc(ncell, 1);
    for (uint32_t i = 0; i < n; i++) {
        /* every combination of the piece's per-dim intervals, mapped to compressed index ranges */
        size_t pick[RS_MAX_DIMS] = {0};
        int empty = 0;
        for (uint32_t d = 0; d < nd; d++) empty |= held[(size_t)i * nd + d].n == 0;
        while (!empty) {
            size_t a[RS_MAX_DIMS], b[RS_MAX_DIMS], c[RS_MAX_DIMS];
            for (uint32_t d = 0; d < nd; d++) {
                ival v = held[(size_t)i * nd + d].v[pick[d]];
                int64_t *s = pts[d].v;
                a[d] = (size_t)((int64_t *)bsearch(&v.lo, s, pts[d].n, sizeof *s, cmp_i64) - s);
                b[d] = (size_t)((int64_t *)bsearch(&v.hi, s, pts[d].n, sizeof *s, cmp_i64) - s);
                c[d] = a[d];
            }
            for (;;) {
                uint64_t off = 0;
                for (uint32_t d = 0; d < nd; d++) off += c[d] * stride[d];
                cell[off] = 1;
                int d = (int)nd - 1;
                for (; d >= 0; d--) {
                    if (++c[d] < b[d]) break;
                    c[d] = a[d];
                }
                if (d < 0) break;
            }
            int d = (int)nd - 1;
            for (; d >= 0; d--) {
                if (++pick[d] < held[(size_t)i * nd + d].n) break;
                pick[d] = 0;
            }
            if (d < 0) break;
        }
    }
    unsigned __int128 total = 0;
    for (uint64_t off = 0; off < ncell; off++) {
        if (!cell[off]) continue;
        unsigned __int128 v = 1;
        uint64_t rem = off;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t ci = (rem / stride[d]) % (pts[d].n > 1 ? pts[d].n - 1 : 1);
            v *= (uint64_t)(pts[d].v[ci + 1] - pts[d].v[ci]);
        }
        total += v;
    }
    free(cell);
    for (size_t i = 0; i < (size_t)n * nd; i++) rs_vec_free(&held[i]);
    free(held);
    for (uint32_t d = 0; d < nd; d++) rs_vec_free(&pts[d]);
    return total;
}

static void print_u128(const char *what, unsigned __int128 v)
{
    char buf[48];
    int n = 0;
    do buf[n++] = (char)('0' + (int)(v % 10)); while (v /= 10);
    printf("%s", what);
    while (n) putchar(buf[--n]);
    printf(" bytes\n");
}

int main(int argc, char **argv)
{
    rs_front_opts o;
    rs_front_opts_default(&o);
    rs_define *defs = rs_xcalloc((size_t)argc + 1, sizeof *defs);
    uint32_t ndefs = 0;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "-D", 2)) {
            const char *d = argv[i][2] ? argv[i] + 2 : (i + 1 < argc ? argv[++i] : NULL);
            char err[256];
            if (!d || rs_parse_define(d, &defs[ndefs], err, sizeof err)) {
                fprintf(stderr, "rs-example-coverage: bad -D\n");
                return 2;
            }
            ndefs++;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fputs("usage: rs-example-coverage LAYOUT [-D NAME=VALUE]...\n"
              "prints the tensor bytes and the distinct bytes the src and dst pieces cover\n", stderr);
        return 2;
    }
    o.defines = defs;
    o.ndefines = ndefs;
    rs_ir ir;
    if (rs_front_load(path, &o, &ir, stderr)) return 1;
    const rs_layout *L = &ir.L;
    unsigned __int128 all = 0, side[2] = {0, 0};
    for (uint32_t t = 0; t < L->ntensors; t++) {
        const rs_tensor *tn = &L->tensors[t];
        unsigned __int128 e = 1;
        for (uint32_t d = 0; d < tn->ndim; d++) e *= (uint64_t)tn->shape[d];
        int sz = rs_dtype_size(tn->dtype);
        all += e * (unsigned)sz;
        side[0] += covered(L, tn, tn->piece_begin, tn->nsrc) * (unsigned)sz;
        side[1] += covered(L, tn, tn->piece_begin + tn->nsrc, tn->ndst) * (unsigned)sz;
    }
    print_u128("tensors ", all);
    print_u128("src     ", side[0]);
    print_u128("dst     ", side[1]);
    rs_ir_free(&ir);
    free(defs);
    return 0;
}
