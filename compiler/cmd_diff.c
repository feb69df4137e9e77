/* cmd_diff.c - `reshardc diff A B`: what changed between two plans, in words: header facts, layout
 * (tensors, buffers, meshes by name), and per rank its staging, steps, bindings and, per tensor, the
 * bytes it sends, receives and copies on each lane and with which peers. Exit 0 identical, 1 different. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "plan.h"
#include "plan_dump.h"
#include "util.h"

enum { D_SEND, D_RECV, D_COPY, D_N };
static const char *const dir_name[D_N] = {"send", "recv", "copy"};

typedef struct {
    const char *tensor; /* NULL: ops that carry several tensors */
    uint8_t dir, lane;
    uint32_t peer;
    uint64_t bytes;
} xfer;

typedef struct {
    const char *tensor;
    uint64_t bytes[D_N][RS_NLANES];
    uint32_t peer_begin[2], npeers[2]; /* send / recv peers, sorted, in the peer pool */
} tsum;

typedef struct {
    tsum *v;
    size_t n;
    uint32_t *peers;
    size_t npeers;
} rank_sum;

static int name_cmp(const char *a, const char *b)
{
    if (!a || !b) return (a != NULL) - (b != NULL); /* "several tensors" first */
    return strcmp(a, b);
}

static int xfer_cmp(const void *pa, const void *pb)
{
    const xfer *a = pa, *b = pb;
    int c = name_cmp(a->tensor, b->tensor);
    if (c) return c;
    if (a->dir != b->dir) return a->dir - b->dir;
    if (a->peer != b->peer) return a->peer < b->peer ? -1 : 1;
    return a->lane - b->lane;
}

/* Staging messages carry several tensors (op tensor "none"); their bytes are put back on tensors
 * through the PACKs that fill a SEND's staging range and the UNPACKs that empty a RECV's, in the same
 * step, and for a forwarding SEND (an NVL step sending staging received earlier) through the UNPACKs of
 * the latest earlier RECV that holds its range. Bytes that cannot be placed stay "several tensors". */
typedef struct {
    uint64_t lo, hi;
    uint32_t op;
} srange;
typedef struct {
    uint32_t recv; /* op index of the RECV the bytes came in with */
    uint64_t lo, hi;
    uint32_t tensor;
} tag;

static int srange_cmp(const void *pa, const void *pb)
{
    const srange *a = pa, *b = pb;
    return a->lo < b->lo ? -1 : a->lo > b->lo ? 1 : (a->op > b->op) - (a->op < b->op);
}
static int tag_cmp(const void *pa, const void *pb)
{
    const tag *a = pa, *b = pb;
    if (a->recv != b->recv) return a->recv < b->recv ? -1 : 1;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* The ranges among v[0..n) (sorted by lo) that contain [lo, hi): up to max of them into hit (several
 * SENDs of one staging range fan it out to several peers). Returns how many. */
static int find_ranges(const srange *v, size_t n, uint64_t lo, uint64_t hi, const srange **hit, int max)
{
    size_t a = 0, b = n;
    while (a < b) { /* first with v.lo > lo */
        size_t m = (a + b) / 2;
        if (v[m].lo <= lo) a = m + 1;
        else b = m;
    }
    int k = 0, miss = 0;
    for (size_t i = a; i-- > 0 && k < max && miss < 16;) {
        if (v[i].lo <= lo && hi <= v[i].hi) hit[k++] = &v[i];
        else if (k) break;
        else miss++;
    }
    return k;
}

typedef rs_vec(xfer) xfer_vec;

static void summarize(const rs_plan *P, uint32_t r, rank_sum *out)
{
    const rs_rank_prog *g = &P->ranks[r];
    const rs_layout *L = &P->layout;
    memset(out, 0, sizeof *out);
    xfer_vec x = {0};
    rs_vec(srange) sends = {0}, recvs = {0};
    rs_vec(tag) tags = {0};
    uint64_t *cov = rs_xcalloc(g->nops + 1, sizeof *cov);          /* bytes of a staging op placed on tensors */
    uint32_t *rbeg = rs_xcalloc(g->nsteps + 1, sizeof *rbeg);      /* step -> its RECV ranges in recvs */
    uint32_t *tbeg = rs_xcalloc(g->nops + 1, sizeof *tbeg), *tcnt = rs_xcalloc(g->nops + 1, sizeof *tcnt);
#define TNAME(t) ((t) < L->ntensors ? L->tensors[t].name : NULL)
#define EMIT(tn, d, ln, pr, by) rs_vec_push(&x, ((xfer){(tn), (uint8_t)(d), (uint8_t)(ln), (pr), (by)}))
    for (uint32_t s = 0; s < g->nsteps; s++) {
        const rs_step *st = &g->steps[s];
        size_t s0 = sends.n;
        rbeg[s] = (uint32_t)recvs.n;
        for (uint32_t k = 0; k < st->nops; k++) {
            uint32_t oi = st->op_begin + k;
            const rs_op *o = &g->ops[oi];
            if ((o->code == RS_OP_SEND || o->code == RS_OP_RECV) && o->loc == RS_LOC_STAGING && !TNAME(o->tensor)) {
                srange q = {o->off, o->off + o->bytes, oi};
                if (o->code == RS_OP_SEND) rs_vec_push(&sends, q);
                else rs_vec_push(&recvs, q);
            } else if (o->code == RS_OP_SEND || o->code == RS_OP_RECV) {
                EMIT(TNAME(o->tensor), o->code == RS_OP_SEND ? D_SEND : D_RECV, st->lane, o->peer, o->bytes);
            } else if (o->code == RS_OP_COPY) {
                EMIT(TNAME(o->tensor), D_COPY, st->lane, 0, o->bytes);
            }
        }
        if (sends.n > s0) qsort(sends.v + s0, sends.n - s0, sizeof *sends.v, srange_cmp);
        if (recvs.n > rbeg[s]) qsort(recvs.v + rbeg[s], recvs.n - rbeg[s], sizeof *recvs.v, srange_cmp);
        size_t t0 = tags.n;
        for (uint32_t k = 0; k < st->nops; k++) {
            const rs_op *o = &g->ops[st->op_begin + k];
            if (o->code != RS_OP_PACK && o->code != RS_OP_UNPACK) continue;
            rs_desc db;
            const rs_desc *d = rs_prog_desc(g, o->code == RS_OP_PACK ? o->dst : o->src, &db);
            int pack = o->code == RS_OP_PACK;
            const srange *hit[64];
            int nh = pack ? find_ranges(sends.v + s0, sends.n - s0, d->offset, d->offset + o->bytes, hit, 64)
                          : find_ranges(recvs.v + rbeg[s], recvs.n - rbeg[s], d->offset, d->offset + o->bytes, hit, 1);
            for (int h = 0; h < nh; h++) {
                const srange *q = hit[h];
                EMIT(TNAME(o->tensor), pack ? D_SEND : D_RECV, st->lane, g->ops[q->op].peer, o->bytes);
                cov[q->op] += o->bytes;
                if (!pack) rs_vec_push(&tags, ((tag){q->op, d->offset, d->offset + o->bytes, o->tensor}));
            }
        }
        if (tags.n > t0) qsort(tags.v + t0, tags.n - t0, sizeof *tags.v, tag_cmp);
        for (size_t i = t0; i < tags.n; i++) {
            if (!tcnt[tags.v[i].recv]) tbeg[tags.v[i].recv] = (uint32_t)i;
            tcnt[tags.v[i].recv]++;
        }
        /* forwarding: staging sent without packing comes from an earlier RECV of the other lane */
        for (size_t i = s0; i < sends.n; i++) {
            const srange *q = &sends.v[i];
            const rs_op *o = &g->ops[q->op];
            if (cov[q->op] >= o->bytes) continue;
            for (uint32_t t = s; t-- > 0 && cov[q->op] < o->bytes;) {
                if (g->steps[t].lane == st->lane) continue;
                const srange *rv;
                if (!find_ranges(recvs.v + rbeg[t], rbeg[t + 1] - rbeg[t], q->lo, q->hi, &rv, 1)) continue;
                for (uint32_t j = 0; j < tcnt[rv->op]; j++) {
                    const tag *tg = &tags.v[tbeg[rv->op] + j];
                    uint64_t lo = tg->lo > q->lo ? tg->lo : q->lo, hi = tg->hi < q->hi ? tg->hi : q->hi;
                    if (lo >= hi) continue;
                    EMIT(TNAME(tg->tensor), D_SEND, st->lane, o->peer, hi - lo);
                    cov[q->op] += hi - lo;
                }
                break;
            }
        }
        rbeg[s + 1] = (uint32_t)recvs.n;
    }
    /* what could not be placed */
    for (uint32_t oi = 0; oi < g->nops; oi++) {
        const rs_op *o = &g->ops[oi];
        if ((o->code != RS_OP_SEND && o->code != RS_OP_RECV) || o->loc != RS_LOC_STAGING || TNAME(o->tensor)) continue;
        if (cov[oi] >= o->bytes) continue;
        uint32_t s = 0;
        while (s + 1 < g->nsteps && g->steps[s + 1].op_begin <= oi) s++;
        EMIT(NULL, o->code == RS_OP_SEND ? D_SEND : D_RECV, g->steps[s].lane, o->peer, o->bytes - cov[oi]);
    }
#undef EMIT
#undef TNAME
    free(cov);
    free(rbeg);
    free(tbeg);
    free(tcnt);
    rs_vec_free(&sends);
    rs_vec_free(&recvs);
    rs_vec_free(&tags);
    size_t n = x.n;
    xfer *xs = x.v;
    if (n) qsort(xs, n, sizeof *xs, xfer_cmp);
    out->v = rs_xcalloc(n + 1, sizeof *out->v);
    out->peers = rs_xcalloc(n + 1, sizeof *out->peers);
    for (size_t i = 0; i < n;) {
        tsum *t = &out->v[out->n++];
        t->tensor = xs[i].tensor;
        size_t j = i;
        for (; j < n && !name_cmp(xs[j].tensor, t->tensor); j++) {
            t->bytes[xs[j].dir][xs[j].lane] += xs[j].bytes;
            if (xs[j].dir == D_COPY) continue;
            int d = xs[j].dir;
            if (!t->npeers[d]) t->peer_begin[d] = (uint32_t)out->npeers;
            if (!t->npeers[d] || out->peers[out->npeers - 1] != xs[j].peer) {
                out->peers[out->npeers++] = xs[j].peer;
                t->npeers[d]++;
            }
        }
        i = j;
    }
    rs_vec_free(&x);
}

static void print_peers(FILE *f, const rank_sum *s, const tsum *t, int d)
{
    fputc('{', f);
    for (uint32_t i = 0; t && i < t->npeers[d]; i++) fprintf(f, "%s%u", i ? ", " : "", s->peers[t->peer_begin[d] + i]);
    fputc('}', f);
}

static int same_peers(const rank_sum *sa, const tsum *a, const rank_sum *sb, const tsum *b, int d)
{
    uint32_t na = a ? a->npeers[d] : 0, nb = b ? b->npeers[d] : 0;
    if (na != nb) return 0;
    for (uint32_t i = 0; i < na; i++)
        if (sa->peers[a->peer_begin[d] + i] != sb->peers[b->peer_begin[d] + i]) return 0;
    return 1;
}

static void tensor_label(FILE *f, const char *name)
{
    if (name) {
        fputs("tensor ", f);
        rs_plan_print_name(f, name);
    } else {
        fputs("several tensors", f);
    }
}

/* One (rank, tensor) pair: print what changed; returns 1 when something did. */
static int diff_tensor(uint32_t r, const rank_sum *sa, const tsum *a, const rank_sum *sb, const tsum *b)
{
    static const tsum zero;
    const tsum *x = a ? a : &zero, *y = b ? b : &zero;
    int changed = 0;
    for (int d = 0; d < D_N; d++)
        for (int l = 0; l < RS_NLANES; l++)
            if (x->bytes[d][l] != y->bytes[d][l]) changed = 1;
    for (int d = 0; d < 2; d++)
        if (!same_peers(sa, a, sb, b, d)) changed = 1;
    if (!changed) return 0;
    printf("rank %u  ", r);
    tensor_label(stdout, a ? a->tensor : b->tensor);
    fputs(a ? (b ? ":" : ": only in A:") : ": only in B:", stdout);
    const char *sep = " ";
    for (int d = 0; d < D_N; d++)
        for (int l = 0; l < RS_NLANES; l++) {
            if (x->bytes[d][l] == y->bytes[d][l]) continue;
            printf("%s%s %s %llu -> %llu bytes", sep, dir_name[d], l == RS_LANE_NET ? "NET" : "NVL",
                   (unsigned long long)x->bytes[d][l], (unsigned long long)y->bytes[d][l]);
            sep = ", ";
        }
    for (int d = 0; d < 2; d++) {
        if (same_peers(sa, a, sb, b, d)) continue;
        printf("%s%s %s ", sep, dir_name[d], d == D_SEND ? "to" : "from");
        print_peers(stdout, sa, a, d);
        fputs(" -> ", stdout);
        print_peers(stdout, sb, b, d);
        sep = ", ";
    }
    fputc('\n', stdout);
    return 1;
}

/* ---- layout ---- */

typedef struct {
    const char *name;
    uint32_t index;
    int side; /* buffers */
} named;

static int named_cmp(const void *pa, const void *pb)
{
    const named *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    return c ? c : a->side - b->side;
}

static named *sorted_names(const rs_layout *L, int buffers, size_t *n)
{
    *n = buffers ? L->nbuffers : L->ntensors;
    named *v = rs_xcalloc(*n + 1, sizeof *v);
    for (size_t i = 0; i < *n; i++)
        v[i] = buffers ? (named){L->buffers[i].name, (uint32_t)i, L->buffers[i].side}
                       : (named){L->tensors[i].name, (uint32_t)i, 0};
    qsort(v, *n, sizeof *v, named_cmp);
    return v;
}

static void print_dims(const char *dtype, const int64_t *shape, uint32_t n)
{
    printf("%s[", dtype);
    for (uint32_t d = 0; d < n; d++) printf("%s%lld", d ? ", " : "", (long long)shape[d]);
    putchar(']');
}

static int mesh_cmp(const void *pa, const void *pb)
{
    return strcmp((*(const rs_mesh *const *)pa)->name, (*(const rs_mesh *const *)pb)->name);
}

static int same_mesh(const rs_mesh *a, const rs_mesh *b)
{
    if (a->naxes != b->naxes || a->nranks != b->nranks) return 0;
    for (uint32_t i = 0; i < a->naxes; i++)
        if (strcmp(a->axis[i], b->axis[i]) || a->size[i] != b->size[i]) return 0;
    return !memcmp(a->ranks, b->ranks, a->nranks * sizeof *a->ranks);
}

/* Meshes by name: added, removed, or changed (axes, sizes or ranks), printed whole on both sides. */
static int diff_meshes(const rs_layout *A, const rs_layout *B)
{
    const rs_mesh **x = rs_xcalloc(A->nmeshes + 1, sizeof *x), **y = rs_xcalloc(B->nmeshes + 1, sizeof *y);
    for (uint32_t i = 0; i < A->nmeshes; i++) x[i] = &A->meshes[i];
    for (uint32_t i = 0; i < B->nmeshes; i++) y[i] = &B->meshes[i];
    qsort(x, A->nmeshes, sizeof *x, mesh_cmp);
    qsort(y, B->nmeshes, sizeof *y, mesh_cmp);
    int changed = 0;
    for (uint32_t i = 0, j = 0; i < A->nmeshes || j < B->nmeshes;) {
        int c = i >= A->nmeshes ? 1 : j >= B->nmeshes ? -1 : strcmp(x[i]->name, y[j]->name);
        if (c || !same_mesh(x[i], y[j])) {
            fputs("layout  mesh ", stdout);
            rs_plan_print_mesh(stdout, c > 0 ? y[j] : x[i]);
            if (c) printf(": only in %s", c < 0 ? "A" : "B");
            else {
                fputs(" -> ", stdout);
                rs_plan_print_mesh(stdout, y[j]);
            }
            putchar('\n');
            changed = 1;
        }
        if (c <= 0) i++;
        if (c >= 0) j++;
    }
    free(x);
    free(y);
    return changed;
}

static int diff_layout(const rs_layout *A, const rs_layout *B)
{
    int changed = diff_meshes(A, B);
    for (int buffers = 0; buffers < 2; buffers++) {
        size_t na, nb, i = 0, j = 0;
        named *x = sorted_names(A, buffers, &na), *y = sorted_names(B, buffers, &nb);
        while (i < na || j < nb) {
            int c = i >= na ? 1 : j >= nb ? -1 : named_cmp(&x[i], &y[j]);
            const char *kind = buffers ? "buffer" : "tensor";
            if (c) {
                const named *e = c < 0 ? &x[i] : &y[j];
                const rs_layout *L = c < 0 ? A : B;
                printf("layout  %s%s ", buffers ? (e->side == RS_SRC ? "src " : "dst ") : "", kind);
                rs_plan_print_name(stdout, e->name);
                printf(": only in %s\n", c < 0 ? "A" : "B");
                (void)L;
                changed = 1;
                if (c < 0) i++;
                else j++;
                continue;
            }
            rs_dtype ta, tb;
            const int64_t *sa, *sb;
            uint32_t da, db;
            if (buffers) {
                const rs_buffer *p = &A->buffers[x[i].index], *q = &B->buffers[y[j].index];
                ta = p->dtype, tb = q->dtype, sa = p->shape, sb = q->shape, da = p->ndim, db = q->ndim;
            } else {
                const rs_tensor *p = &A->tensors[x[i].index], *q = &B->tensors[y[j].index];
                ta = p->dtype, tb = q->dtype, sa = p->shape, sb = q->shape, da = p->ndim, db = q->ndim;
            }
            if (ta != tb || da != db || memcmp(sa, sb, da * sizeof *sa)) {
                printf("layout  %s%s ", buffers ? (x[i].side == RS_SRC ? "src " : "dst ") : "", kind);
                rs_plan_print_name(stdout, x[i].name);
                fputs(": ", stdout);
                print_dims(rs_dtype_name(ta), sa, da);
                fputs(" -> ", stdout);
                print_dims(rs_dtype_name(tb), sb, db);
                putchar('\n');
                changed = 1;
            }
            i++, j++;
        }
        free(x);
        free(y);
    }
    return changed;
}

/* ---- per rank ---- */

static void lane_steps(const rs_rank_prog *g, uint32_t *n)
{
    n[0] = n[1] = 0;
    for (uint32_t s = 0; s < g->nsteps; s++)
        if (g->steps[s].lane < RS_NLANES) n[g->steps[s].lane]++;
}

static int diff_bindings(uint32_t r, const rs_plan *A, const rs_plan *B)
{
    const rs_rank_prog *ga = &A->ranks[r], *gb = &B->ranks[r];
    named *x = rs_xcalloc(ga->nbindings + 1, sizeof *x), *y = rs_xcalloc(gb->nbindings + 1, sizeof *y);
    for (uint32_t i = 0; i < ga->nbindings; i++) {
        const rs_buffer *b = &A->layout.buffers[ga->bindings[i].buffer];
        x[i] = (named){b->name, i, b->side};
    }
    for (uint32_t i = 0; i < gb->nbindings; i++) {
        const rs_buffer *b = &B->layout.buffers[gb->bindings[i].buffer];
        y[i] = (named){b->name, i, b->side};
    }
    qsort(x, ga->nbindings, sizeof *x, named_cmp);
    qsort(y, gb->nbindings, sizeof *y, named_cmp);
    int changed = 0;
    size_t i = 0, j = 0;
    while (i < ga->nbindings || j < gb->nbindings) {
        int c = i >= ga->nbindings ? 1 : j >= gb->nbindings ? -1 : named_cmp(&x[i], &y[j]);
        const named *e = c <= 0 ? &x[i] : &y[j];
        uint64_t ba = c <= 0 ? ga->bindings[x[i].index].bytes : 0, bb = c >= 0 ? gb->bindings[y[j].index].bytes : 0;
        if (c || ba != bb) {
            printf("rank %u  binding %s ", r, e->side == RS_SRC ? "src" : "dst");
            rs_plan_print_name(stdout, e->name);
            if (c) printf(": only in %s (%llu bytes)\n", c < 0 ? "A" : "B", (unsigned long long)(c < 0 ? ba : bb));
            else printf(": %llu -> %llu bytes\n", (unsigned long long)ba, (unsigned long long)bb);
            changed = 1;
        }
        if (c <= 0) i++;
        if (c >= 0) j++;
    }
    free(x);
    free(y);
    return changed;
}

static int diff_rank(uint32_t r, const rs_plan *A, const rs_plan *B, uint64_t *npairs)
{
    const rs_rank_prog *ga = &A->ranks[r], *gb = &B->ranks[r];
    int changed = 0;
    uint32_t la[2], lb[2];
    lane_steps(ga, la);
    lane_steps(gb, lb);
    if (ga->staging_bytes != gb->staging_bytes || la[0] != lb[0] || la[1] != lb[1] || ga->nops != gb->nops) {
        const char *sep = " ";
        printf("rank %u ", r);
        if (ga->staging_bytes != gb->staging_bytes)
            printf("%sstaging %llu -> %llu bytes", sep, (unsigned long long)ga->staging_bytes,
                   (unsigned long long)gb->staging_bytes), sep = ", ";
        for (int l = 0; l < RS_NLANES; l++)
            if (la[l] != lb[l]) printf("%s%s steps %u -> %u", sep, l == RS_LANE_NET ? "NET" : "NVL", la[l], lb[l]), sep = ", ";
        if (ga->nops != gb->nops) printf("%sops %u -> %u", sep, ga->nops, gb->nops);
        putchar('\n');
        changed = 1;
    }
    changed |= diff_bindings(r, A, B);
    rank_sum sa, sb;
    summarize(A, r, &sa);
    summarize(B, r, &sb);
    size_t i = 0, j = 0;
    while (i < sa.n || j < sb.n) {
        int c = i >= sa.n ? 1 : j >= sb.n ? -1 : name_cmp(sa.v[i].tensor, sb.v[j].tensor);
        if (diff_tensor(r, &sa, c <= 0 ? &sa.v[i] : NULL, &sb, c >= 0 ? &sb.v[j] : NULL)) {
            changed = 1;
            ++*npairs;
        }
        if (c <= 0) i++;
        if (c >= 0) j++;
    }
    free(sa.v);
    free(sa.peers);
    free(sb.v);
    free(sb.peers);
    return changed;
}

static int usage(void)
{
    fputs("usage: reshardc diff PLAN_A PLAN_B\n", stderr);
    return 2;
}

int rs_cmd_diff(int argc, char **argv)
{
    if (argc != 3 || argv[1][0] == '-' || argv[2][0] == '-') return usage();
    rs_plan A, B;
    char err[512];
    if (rs_plan_load_file(argv[1], -1, &A, err, sizeof err)) {
        fprintf(stderr, "reshardc diff: %s\n", err);
        return 2;
    }
    if (rs_plan_load_file(argv[2], -1, &B, err, sizeof err)) {
        fprintf(stderr, "reshardc diff: %s\n", err);
        rs_plan_free(&A);
        return 2;
    }
    if (A.plan_fp == B.plan_fp) {
        printf("plans are identical (plan fp %016llx)\n", (unsigned long long)A.plan_fp);
        rs_plan_free(&A);
        rs_plan_free(&B);
        return 0;
    }
    unsigned ma = 0, na = 0, mb = 0, nb = 0;
    rs_plan_file_version(argv[1], &ma, &na);
    rs_plan_file_version(argv[2], &mb, &nb);
    if (ma != mb || na != nb) printf("format      %u.%u -> %u.%u\n", ma, na, mb, nb);
    printf("plan fp     %016llx -> %016llx\n", (unsigned long long)A.plan_fp, (unsigned long long)B.plan_fp);
    if (A.source_fp != B.source_fp)
        printf("source fp   %016llx -> %016llx\n", (unsigned long long)A.source_fp, (unsigned long long)B.source_fp);
    if (A.staging_budget != B.staging_budget)
        printf("staging     budget %llu -> %llu bytes\n", (unsigned long long)A.staging_budget,
               (unsigned long long)B.staging_budget);
    const rs_topology *ta = &A.layout.topo, *tb = &B.layout.topo;
    if (ta->world != tb->world || ta->ndomains != tb->ndomains)
        printf("world       %u ranks in %u domains -> %u ranks in %u domains\n", ta->world, ta->ndomains, tb->world,
               tb->ndomains);
    else if (memcmp(ta->domain_of, tb->domain_of, ta->world * sizeof *ta->domain_of))
        printf("world       ranks moved between NVLink domains\n");
    if (ta->nic_gbps != tb->nic_gbps || ta->nvlink_gbps != tb->nvlink_gbps)
        printf("bandwidth   nic %g -> %g Gb/s, nvlink %g -> %g Gb/s\n", ta->nic_gbps, tb->nic_gbps, ta->nvlink_gbps,
               tb->nvlink_gbps);
    diff_layout(&A.layout, &B.layout);
    uint32_t both = ta->world < tb->world ? ta->world : tb->world, nranks = 0;
    uint64_t npairs = 0;
    for (uint32_t r = 0; r < both; r++) nranks += diff_rank(r, &A, &B, &npairs);
    for (uint32_t r = both; r < ta->world || r < tb->world; r++) {
        printf("rank %u  only in %s\n", r, r < ta->world ? "A" : "B");
        nranks++;
    }
    printf("summary     %u of %u ranks differ, %llu (rank, tensor) pairs moved differently\n", nranks,
           ta->world > tb->world ? ta->world : tb->world, (unsigned long long)npairs);
    rs_plan_free(&A);
    rs_plan_free(&B);
    return 1;
}
