/* cmd_check.c - `reshardc check LAYOUT [-D NAME=VALUE]... [--max-errors N]`: parse, elaborate and
 * check a layout, then print a short, stable summary of it (stdout). Exit 0 ok, 1 invalid, 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "ir.h"
#include "util.h"

static const char check_usage[] = "usage: reshardc check LAYOUT [-D NAME=VALUE]... [--max-errors N]\n";

static int bad_usage(const char *fmt, const char *arg)
{
    fputs("reshardc check: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    fputs(check_usage, stderr);
    return 2;
}

/* Distinct (mesh, pinned coordinates) pairs: every piece with the same pair is held by the same ranks. */
typedef struct {
    uint64_t *h;
    uint32_t *piece;
    uint32_t cap, n;
} pinset;

static int same_pins(const rs_layout *L, const rs_piece *a, const rs_piece *b)
{
    if (a->mesh != b->mesh) return 0;
    int64_t pa[RS_MAX_DIMS], pb[RS_MAX_DIMS];
    for (int k = 0; k < RS_MAX_DIMS; k++) pa[k] = pb[k] = -1;
    for (uint32_t i = 0; i < a->nplace; i++)
        if (L->places[a->place + i].kind == RS_PLACE_PIN) pa[L->places[a->place + i].axis] = L->places[a->place + i].arg;
    for (uint32_t i = 0; i < b->nplace; i++)
        if (L->places[b->place + i].kind == RS_PLACE_PIN) pb[L->places[b->place + i].axis] = L->places[b->place + i].arg;
    return !memcmp(pa, pb, sizeof pa);
}

static uint64_t pins_hash(const rs_layout *L, const rs_piece *p)
{
    int64_t key[RS_MAX_DIMS + 1];
    for (int k = 0; k < RS_MAX_DIMS; k++) key[k] = -1;
    key[RS_MAX_DIMS] = p->mesh;
    for (uint32_t i = 0; i < p->nplace; i++)
        if (L->places[p->place + i].kind == RS_PLACE_PIN) key[L->places[p->place + i].axis] = L->places[p->place + i].arg;
    return rs_hash64(key, sizeof key, 0) | 1;
}

/* Returns 1 when the piece's (mesh, pins) is new. */
static int pinset_add(pinset *s, const rs_layout *L, uint32_t pi)
{
    const rs_piece *p = &L->pieces[pi];
    uint64_t h = pins_hash(L, p);
    if ((s->n + 1) * 2 > s->cap) {
        uint32_t nc = s->cap ? s->cap * 2 : 1024;
        uint64_t *nh = rs_xcalloc(nc, sizeof *nh);
        uint32_t *np = rs_xcalloc(nc, sizeof *np);
        for (uint32_t i = 0; i < s->cap; i++) {
            if (!s->h[i]) continue;
            uint32_t j = (uint32_t)s->h[i] & (nc - 1);
            while (nh[j]) j = (j + 1) & (nc - 1);
            nh[j] = s->h[i];
            np[j] = s->piece[i];
        }
        free(s->h);
        free(s->piece);
        s->h = nh;
        s->piece = np;
        s->cap = nc;
    }
    uint32_t j = (uint32_t)h & (s->cap - 1);
    for (; s->h[j]; j = (j + 1) & (s->cap - 1))
        if (s->h[j] == h && same_pins(L, &L->pieces[s->piece[j]], p)) return 0;
    s->h[j] = h;
    s->piece[j] = pi;
    s->n++;
    return 1;
}

/* Mark the ranks holding piece p. */
static void mark_ranks(const rs_layout *L, const rs_piece *p, uint8_t *mark, uint8_t bit)
{
    const rs_mesh *m = &L->meshes[p->mesh];
    int64_t pin[RS_MAX_DIMS];
    for (int k = 0; k < RS_MAX_DIMS; k++) pin[k] = -1;
    for (uint32_t i = 0; i < p->nplace; i++)
        if (L->places[p->place + i].kind == RS_PLACE_PIN) pin[L->places[p->place + i].axis] = L->places[p->place + i].arg;
    int64_t c[RS_MAX_DIMS] = {0};
    for (uint32_t a = 0; a < m->naxes; a++)
        if (pin[a] >= 0) c[a] = pin[a];
    for (;;) {
        uint64_t lin = 0;
        for (uint32_t a = 0; a < m->naxes; a++) lin = lin * (uint64_t)m->size[a] + (uint64_t)c[a];
        mark[m->ranks[lin]] |= bit;
        int a = (int)m->naxes - 1;
        for (; a >= 0; a--) {
            if (pin[a] >= 0) continue;
            if (++c[a] < m->size[a]) break;
            c[a] = 0;
        }
        if (a < 0) break;
    }
}

static void print_u128(unsigned __int128 v)
{
    char buf[48];
    int n = 0;
    do buf[n++] = (char)('0' + (int)(v % 10)); while (v /= 10);
    while (n) putchar(buf[--n]);
}

static void print_bytes(unsigned __int128 v)
{
    print_u128(v);
    printf(" bytes (%.2f GiB)", (double)v / (1024.0 * 1024.0 * 1024.0));
}

static void summary(const rs_ir *ir, const char *path)
{
    const rs_layout *L = &ir->L;
    const rs_topology *T = &L->topo;
    uint32_t npieces[2] = {0, 0}, nbuffers[2] = {0, 0};
    unsigned __int128 held[2] = {0, 0}, logical = 0;
    uint32_t ngroups[2] = {0, 0};
    for (uint32_t b = 0; b < L->nbuffers; b++) {
        nbuffers[L->buffers[b].side]++;
        ngroups[L->buffers[b].side] += L->buffers[b].group != 0;
    }
    for (uint32_t t = 0; t < L->ntensors; t++) {
        const rs_tensor *tn = &L->tensors[t];
        unsigned __int128 e = (unsigned)rs_dtype_size(tn->dtype);
        for (uint32_t d = 0; d < tn->ndim; d++) e *= (uint64_t)tn->shape[d];
        logical += e;
    }
    uint8_t *mark = rs_xcalloc(T->world ? T->world : 1, 1);
    uint8_t *full = rs_xcalloc(2 * (size_t)L->nmeshes + 1, 1);
    pinset ps[2] = {{0}, {0}};
    for (uint32_t i = 0; i < L->npieces; i++) {
        const rs_piece *p = &L->pieces[i];
        const rs_tensor *tn = &L->tensors[p->tensor];
        const rs_mesh *m = &L->meshes[p->mesh];
        npieces[p->side]++;
        /* bytes held over all ranks: the slice once per replica (shards partition it) */
        int64_t lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
        rs_piece_slice(L, p, lo, hi);
        unsigned __int128 e = (unsigned)rs_dtype_size(tn->dtype);
        for (uint32_t d = 0; d < tn->ndim; d++) e *= (uint64_t)(hi[d] - lo[d]);
        uint8_t used[RS_MAX_DIMS] = {0};
        int pinned = 0;
        for (uint32_t k = 0; k < p->nplace; k++) {
            used[L->places[p->place + k].axis] |= L->places[p->place + k].kind != RS_PLACE_REPLICATE;
            pinned |= L->places[p->place + k].kind == RS_PLACE_PIN;
        }
        for (uint32_t a = 0; a < m->naxes; a++)
            if (!used[a]) e *= (uint64_t)m->size[a];
        held[p->side] += e;
        /* ranks: each (mesh, pins) once; an unpinned piece covers its whole mesh */
        uint8_t *f = &full[2 * p->mesh + p->side];
        if (*f) continue;
        if (!pinned) {
            for (uint32_t k = 0; k < m->nranks; k++) mark[m->ranks[k]] |= (uint8_t)(1u << p->side);
            *f = 1;
        } else if (pinset_add(&ps[p->side], L, i)) {
            mark_ranks(L, p, mark, (uint8_t)(1u << p->side));
        }
    }
    uint32_t nranks[3] = {0, 0, 0}, ndom[3] = {0, 0, 0};
    uint8_t *dmark = rs_xcalloc(T->ndomains ? T->ndomains : 1, 1);
    for (uint32_t r = 0; r < T->world; r++) {
        for (int s = 0; s < 2; s++) nranks[s] += (mark[r] >> s) & 1;
        nranks[2] += mark[r] == 3;
        dmark[T->domain_of[r]] |= mark[r];
    }
    for (uint32_t d = 0; d < T->ndomains; d++) {
        for (int s = 0; s < 2; s++) ndom[s] += (dmark[d] >> s) & 1;
        ndom[2] += dmark[d] == 3;
    }
    printf("layout    %s\n", path);
    printf("world     %u ranks, %u NVLink domains", T->world, T->ndomains);
    if (T->domain_size) printf(" (domain_size %lld)", (long long)T->domain_size);
    else printf(" (listed)");
    printf(", nic %g Gb/s, nvlink %g Gb/s\n", T->nic_gbps, T->nvlink_gbps);
    printf("meshes    %u\n", L->nmeshes);
    printf("tensors   %u, ", L->ntensors);
    print_bytes(logical);
    printf("\npieces    src %u, dst %u\n", npieces[0], npieces[1]);
    printf("buffers   ");
    for (int side = 0; side < 2; side++) { /* groups named only when there are some: older outputs stay */
        printf("%s %u", side ? ", dst" : "src", nbuffers[side]);
        if (ngroups[side]) printf(" (%u group%s)", ngroups[side], ngroups[side] == 1 ? "" : "s");
    }
    printf("\n");
    printf("ranks     src %u, dst %u, both %u\n", nranks[0], nranks[1], nranks[2]);
    printf("domains   src %u, dst %u, both %u\n", ndom[0], ndom[1], ndom[2]);
    printf("held src  ");
    print_bytes(held[0]);
    printf(", all replicas\nheld dst  ");
    print_bytes(held[1]);
    printf(", all replicas\n");
    for (int s = 0; s < 2; s++) {
        free(ps[s].h);
        free(ps[s].piece);
    }
    free(mark);
    free(full);
    free(dmark);
}

int rs_cmd_check(int argc, char **argv)
{
    rs_front_opts o;
    rs_front_opts_default(&o);
    rs_define *defs = rs_xcalloc((size_t)argc + 1, sizeof *defs);
    uint32_t ndefs = 0;
    const char *path = NULL;
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(check_usage, stdout);
            fputs("Checks a layout and prints a summary: meshes, tensors, pieces, buffers, ranks, domains and\n"
                  "bytes per side. Exit status: 0 valid, 1 invalid layout, 2 bad command line.\n",
                  stdout);
            rc = 0;
            goto out;
        }
        if (!strncmp(a, "-D", 2)) {
            const char *d = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
            if (!d) {
                rc = bad_usage("-D needs NAME=VALUE%s", "");
                goto out;
            }
            char err[256];
            if (rs_parse_define(d, &defs[ndefs], err, sizeof err) != 0) {
                rc = bad_usage("%s", err);
                goto out;
            }
            ndefs++;
            continue;
        }
        if (!strncmp(a, "--max-errors", 12) && (a[12] == 0 || a[12] == '=')) {
            const char *v = a[12] == '=' ? a + 13 : (i + 1 < argc ? argv[++i] : NULL);
            char *end;
            long long n = v ? strtoll(v, &end, 10) : 0;
            if (!v || !*v || *end || n < 1 || n > 1000000) {
                rc = bad_usage("--max-errors needs a number from 1 to 1000000%s", "");
                goto out;
            }
            o.max_errors = (uint32_t)n;
            continue;
        }
        if (a[0] == '-' && a[1]) {
            rc = bad_usage("unknown option '%s'", a);
            goto out;
        }
        if (path) {
            rc = bad_usage("one layout at a time (got '%s' too)", a);
            goto out;
        }
        path = a;
    }
    if (!path) {
        rc = bad_usage("no layout given%s", "");
        goto out;
    }
    o.defines = defs;
    o.ndefines = ndefs;
    rs_ir ir;
    int nerr = rs_front_load(path, &o, &ir, stderr);
    if (ir.define_errors) rc = 2;
    else if (nerr) rc = 1;
    else {
        summary(&ir, path);
        rc = 0;
    }
    rs_ir_free(&ir);
out:
    for (uint32_t i = 0; i < ndefs; i++) free((void *)defs[i].name);
    free(defs);
    return rc;
}
