/* cmd_diff.c - `reshardc diff A B`: what changed between two plans, in words: header facts, layout
 * (tensors, buffers, meshes by name), and per rank its staging, steps, bindings and, per tensor, the
 * bytes it sends, receives and copies on each lane and with which peers. Exit 0 identical, 1 different. */
#define _GNU_SOURCE /* qsort_r */
#include <pthread.h>
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
    uint32_t key;       /* the tensor's place in name order + 1 (0: several tensors) */
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

static int tensor_name_cmp(const void *pa, const void *pb, void *ctx)
{
    const rs_layout *L = ctx;
    return strcmp(L->tensors[*(const uint32_t *)pa].name, L->tensors[*(const uint32_t *)pb].name);
}

static int xfer_cmp(const void *pa, const void *pb)
{
    const xfer *a = pa, *b = pb;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    if (a->dir != b->dir) return a->dir - b->dir;
    if (a->peer != b->peer) return a->peer < b->peer ? -1 : 1;
    return a->lane - b->lane;
}

/* Staging messages carry several tensors (op tensor "none"); their bytes are put back on tensors through
 * what the staging bytes hold when they are sent or received. The rank's ops are walked in program order
 * (every step that writes bytes another reads comes before it: the waits point back, and the program has
 * no staging race) with a map of the staging bytes to their latest writer: a PACK (its tensor) or a RECV
 * (its own tensor, or when it carries several, the op itself). A SEND of several tensors takes the tensors
 * of the bytes it sends; one that forwards a RECV's bytes takes the tensors of the UNPACKs that emptied
 * that RECV's bytes on this rank. A RECV of several tensors takes the tensors of the UNPACKs that read its
 * bytes before they are written again. Bytes that cannot be placed stay "several tensors". (Until the
 * twenty-third session a PACK counted only for a SEND of its own step, an UNPACK for a RECV of its own:
 * the planner packs in the NVL step before the round's NET step and unpacks in the NVL step after it,
 * so most bytes of the examples' plans stayed "several tensors".) */
#define RUNS_MAX 65536
enum { C_KNOWN, C_RECV }; /* what a staging range holds: a tensor's bytes (or unknown), a RECV's bytes */
typedef struct {
    uint64_t lo, hi;
    uint32_t id; /* C_KNOWN: the tensor (RS_NONE: several); C_RECV: the RECV's op index */
    uint8_t kind;
} chunk;
typedef rs_vec(chunk) chunk_vec;

/* The first chunk of the map (disjoint, sorted) that ends after lo. */
static size_t chunk_at(const chunk_vec *m, uint64_t lo)
{
    size_t a = 0, b = m->n;
    while (a < b) {
        size_t h = (a + b) / 2;
        if (m->v[h].hi <= lo) a = h + 1;
        else b = h;
    }
    return a;
}

/* [lo, hi) of the staging now holds what c says (c.lo and c.hi are set here). */
static void chunk_put(chunk_vec *m, uint64_t lo, uint64_t hi, chunk c)
{
    if (lo >= hi) return;
    size_t a = chunk_at(m, lo), b = a;
    while (b < m->n && m->v[b].lo < hi) b++;
    /* chunks a..b-1 overlap [lo, hi): their parts outside it stay */
    chunk head = a < b ? m->v[a] : c, tail = a < b ? m->v[b - 1] : c;
    int keep_head = a < b && head.lo < lo, keep_tail = a < b && tail.hi > hi;
    size_t n_new = 1 + (size_t)keep_head + (size_t)keep_tail, n_old = b - a;
    if (n_new > n_old) rs_vec_reserve(m, m->n + n_new - n_old);
    memmove(m->v + a + n_new, m->v + b, (m->n - b) * sizeof *m->v);
    m->n = m->n + n_new - n_old;
    size_t k = a;
    if (keep_head) head.hi = lo, m->v[k++] = head;
    c.lo = lo, c.hi = hi;
    m->v[k++] = c;
    if (keep_tail) tail.lo = hi, m->v[k] = tail;
}

typedef struct {
    uint32_t recv; /* op index of the RECV whose bytes an UNPACK read */
    uint64_t lo, hi;
    uint32_t tensor;
} tag;
typedef struct {
    uint32_t send, recv; /* a SEND forwarding [lo, hi) of what that RECV brought in */
    uint64_t lo, hi;
} fwd;

static int tag_cmp(const void *pa, const void *pb)
{
    const tag *a = pa, *b = pb;
    if (a->recv != b->recv) return a->recv < b->recv ? -1 : 1;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* A rank's transfers, one per (tensor, direction, lane, peer), found by hash (a DeepSeek-V3 rank emits
 * about 4000 pieces; sorting them all took a fifth of a diff). */
typedef struct {
    xfer *v;
    size_t n, cap;
    uint32_t *slot; /* index + 1 into v, 0 empty; size mask + 1 */
    size_t mask;
} xfer_vec;

static size_t xfer_hash(const xfer *e)
{
    uint64_t h = ((uint64_t)e->key << 32 | e->peer) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)e->dir << 8 | e->lane);
    return (size_t)(h ^ h >> 29);
}

static void xfer_slot_put(xfer_vec *x, size_t i)
{
    size_t k = xfer_hash(&x->v[i]) & x->mask;
    while (x->slot[k]) k = (k + 1) & x->mask;
    x->slot[k] = (uint32_t)i + 1;
}

static void emit(xfer_vec *x, xfer e)
{
    if (2 * (x->n + 1) > x->mask + 1) { /* grow the table (and rehash) */
        size_t size = x->mask ? 2 * (x->mask + 1) : 64;
        free(x->slot);
        x->slot = rs_xcalloc(size, sizeof *x->slot);
        x->mask = size - 1;
        for (size_t i = 0; i < x->n; i++) xfer_slot_put(x, i);
    }
    for (size_t k = xfer_hash(&e) & x->mask; x->slot[k]; k = (k + 1) & x->mask) {
        xfer *o = &x->v[x->slot[k] - 1];
        if (o->key == e.key && o->dir == e.dir && o->lane == e.lane && o->peer == e.peer) {
            o->bytes += e.bytes;
            return;
        }
    }
    rs_vec_push(x, e);
    xfer_slot_put(x, x->n - 1);
}

/* Each tensor's place in the order of the plan's tensor names (what xfer_cmp sorts by: comparing the
 * names took a quarter of a diff of DeepSeek-V3's plans). */
static uint32_t *name_order(const rs_layout *L)
{
    uint32_t *ix = rs_xcalloc(L->ntensors + 1, sizeof *ix), *at = rs_xcalloc(L->ntensors + 1, sizeof *at);
    for (uint32_t t = 0; t < L->ntensors; t++) ix[t] = t;
    qsort_r(ix, L->ntensors, sizeof *ix, tensor_name_cmp, (void *)L);
    for (uint32_t i = 0; i < L->ntensors; i++) at[ix[i]] = i;
    free(ix);
    return at;
}

/* order: name_order's */
static void summarize(const rs_plan *P, uint32_t r, const uint32_t *order, rank_sum *out)
{
    const rs_rank_prog *g = &P->ranks[r];
    const rs_layout *L = &P->layout;
    memset(out, 0, sizeof *out);
    xfer_vec x = {0};
    chunk_vec map = {0};
    rs_vec(tag) tags = {0};
    rs_vec(fwd) fwds = {0};
    uint64_t *cov = rs_xcalloc(g->nops + 1, sizeof *cov);   /* bytes of a staging op placed on tensors */
    uint8_t *lane = rs_xcalloc(g->nops + 1, sizeof *lane); /* each op's step's lane */
#define TNAME(t) ((t) < L->ntensors ? L->tensors[t].name : NULL)
#define EMIT(t, d, ln, pr, by)                                                                     \
    emit(&x, (xfer){TNAME(t), TNAME(t) ? order[t] + 1 : 0, (uint8_t)(d), (uint8_t)(ln), (pr), (by)})
#define SEVERAL(o) ((o)->loc == RS_LOC_STAGING && !TNAME((o)->tensor)) /* a SEND or RECV of several tensors */
    for (uint32_t s = 0; s < g->nsteps; s++) {
        const rs_step *st = &g->steps[s];
        for (uint32_t k = 0; k < st->nops; k++) {
            uint32_t oi = st->op_begin + k;
            const rs_op *o = &g->ops[oi];
            lane[oi] = (uint8_t)st->lane;
            int send = o->code == RS_OP_SEND;
            if (send || o->code == RS_OP_RECV) {
                if (!SEVERAL(o)) EMIT(o->tensor, send ? D_SEND : D_RECV, st->lane, o->peer, o->bytes);
                if (send && SEVERAL(o)) { /* the tensors of the bytes it sends */
                    uint64_t lo = o->off, hi = o->off + o->bytes;
                    for (size_t i = chunk_at(&map, lo); i < map.n && map.v[i].lo < hi; i++) {
                        const chunk *c = &map.v[i];
                        uint64_t a = c->lo > lo ? c->lo : lo, b = c->hi < hi ? c->hi : hi;
                        if (c->kind == C_RECV) {
                            rs_vec_push(&fwds, ((fwd){oi, c->id, a, b}));
                        } else if (TNAME(c->id)) {
                            EMIT(c->id, D_SEND, st->lane, o->peer, b - a);
                            cov[oi] += b - a;
                        }
                    }
                } else if (!send && o->loc == RS_LOC_STAGING) {
                    chunk c = {0, 0, SEVERAL(o) ? oi : o->tensor, SEVERAL(o) ? C_RECV : C_KNOWN};
                    chunk_put(&map, o->off, o->off + o->bytes, c);
                }
            } else if (o->code == RS_OP_COPY) {
                EMIT(o->tensor, D_COPY, st->lane, 0, o->bytes);
            } else if (o->code == RS_OP_PACK || o->code == RS_OP_UNPACK) {
                int pack = o->code == RS_OP_PACK;
                rs_desc db;
                const rs_desc *d = rs_prog_desc(g, pack ? o->dst : o->src, &db);
                /* the staging side's runs (a PACK's region may interleave the messages to several
                 * peers); a region of more runs than RUNS_MAX is left unplaced */
                uint64_t nrun = 1, idx[RS_DESC_MAX_DIMS] = {0};
                uint32_t nd = d->ndim;
                if (d->loc != RS_LOC_STAGING || !nd) continue;
                for (uint32_t k = 0; k + 1 < nd && nrun <= RUNS_MAX; k++)
                    nrun = d->count[k] > RUNS_MAX ? RUNS_MAX + 1 : nrun * d->count[k];
                if (nrun > RUNS_MAX) continue;
                for (uint64_t q = 0; q < nrun; q++) {
                    uint64_t lo = d->offset, hi;
                    for (uint32_t k = 0; k + 1 < nd; k++) lo += idx[k] * d->stride[k];
                    hi = lo + d->count[nd - 1];
                    for (uint32_t k = nd - 1; k-- > 0 && ++idx[k] == d->count[k];) idx[k] = 0;
                    if (pack) {
                        chunk_put(&map, lo, hi, (chunk){0, 0, o->tensor, C_KNOWN});
                        continue;
                    }
                    for (size_t i = chunk_at(&map, lo); i < map.n && map.v[i].lo < hi; i++) {
                        const chunk *c = &map.v[i];
                        if (c->kind != C_RECV) continue;
                        uint64_t a = c->lo > lo ? c->lo : lo, b = c->hi < hi ? c->hi : hi;
                        rs_vec_push(&tags, ((tag){c->id, a, b, o->tensor}));
                    }
                }
            }
        }
    }
    /* the RECVs of several tensors, by the UNPACKs that emptied them */
    if (tags.n) qsort(tags.v, tags.n, sizeof *tags.v, tag_cmp);
    uint32_t *tbeg = rs_xcalloc(g->nops + 2, sizeof *tbeg); /* RECV -> its tags: [tbeg[op], tbeg[op + 1]) */
    for (size_t i = 0; i < tags.n; i++) tbeg[tags.v[i].recv + 1]++;
    for (uint32_t i = 0; i < g->nops; i++) tbeg[i + 1] += tbeg[i];
    for (size_t i = 0; i < tags.n; i++) {
        const tag *t = &tags.v[i];
        const rs_op *q = &g->ops[t->recv];
        if (!TNAME(t->tensor)) continue;
        EMIT(t->tensor, D_RECV, lane[t->recv], q->peer, t->hi - t->lo);
        cov[t->recv] += t->hi - t->lo;
    }
    /* forwarding SENDs, by the tensors of the RECV bytes they send */
    for (size_t i = 0; i < fwds.n; i++) {
        const fwd *f = &fwds.v[i];
        const rs_op *o = &g->ops[f->send];
        for (uint32_t j = tbeg[f->recv]; j < tbeg[f->recv + 1]; j++) {
            const tag *t = &tags.v[j];
            uint64_t a = t->lo > f->lo ? t->lo : f->lo, b = t->hi < f->hi ? t->hi : f->hi;
            if (a >= b || !TNAME(t->tensor)) continue;
            EMIT(t->tensor, D_SEND, lane[f->send], o->peer, b - a);
            cov[f->send] += b - a;
        }
    }
    /* what could not be placed */
    for (uint32_t oi = 0; oi < g->nops; oi++) {
        const rs_op *o = &g->ops[oi];
        if ((o->code != RS_OP_SEND && o->code != RS_OP_RECV) || !SEVERAL(o) || cov[oi] >= o->bytes) continue;
        EMIT(RS_NONE, o->code == RS_OP_SEND ? D_SEND : D_RECV, lane[oi], o->peer, o->bytes - cov[oi]);
    }
#undef SEVERAL
#undef EMIT
#undef TNAME
    free(cov);
    free(lane);
    free(tbeg);
    rs_vec_free(&map);
    rs_vec_free(&tags);
    rs_vec_free(&fwds);
    size_t n = x.n;
    xfer *xs = x.v;
    if (n) qsort(xs, n, sizeof *xs, xfer_cmp);
    out->v = rs_xcalloc(n + 1, sizeof *out->v);
    out->peers = rs_xcalloc(n + 1, sizeof *out->peers);
    for (size_t i = 0; i < n;) {
        tsum *t = &out->v[out->n++];
        t->tensor = xs[i].tensor;
        size_t j = i;
        for (; j < n && xs[j].key == xs[i].key; j++) {
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
    free(x.slot);
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

/* B's per-rank summaries made ahead on a thread of their own while the calling thread summarizes A's and
 * prints: a summary walks the rank's whole program (B's plan against B at 128 MiB of staging: about 1 s of
 * summaries after 1.2 s of loads; docs/benchmarks.md "The listing and the diff"). At most DIFF_AHEAD wait
 * to be taken. */
#define DIFF_AHEAD 8
#define DIFF_MIN_OPS ((uint64_t)1 << 16)

typedef struct {
    const rs_plan *B;
    const uint32_t *ob;
    uint32_t both;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rank_sum slot[DIFF_AHEAD];
    uint32_t made, taken; /* ranks summarized, ranks taken (in rank order) */
} sum_ahead;

static void *sum_main(void *arg)
{
    sum_ahead *h = arg;
    for (uint32_t r = 0; r < h->both; r++) {
        pthread_mutex_lock(&h->mu);
        while (r >= h->taken + DIFF_AHEAD) pthread_cond_wait(&h->cv, &h->mu);
        pthread_mutex_unlock(&h->mu);
        rank_sum x;
        summarize(h->B, r, h->ob, &x);
        pthread_mutex_lock(&h->mu);
        h->slot[r % DIFF_AHEAD] = x;
        h->made = r + 1;
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
    }
    return NULL;
}

/* B's summary of rank r, the next in order: made ahead, or here (h NULL). */
static void sum_take(sum_ahead *h, const rs_plan *B, const uint32_t *ob, uint32_t r, rank_sum *out)
{
    if (!h) {
        summarize(B, r, ob, out);
        return;
    }
    pthread_mutex_lock(&h->mu);
    while (h->made <= r) pthread_cond_wait(&h->cv, &h->mu);
    *out = h->slot[r % DIFF_AHEAD];
    h->taken = r + 1;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

/* oa, ob: name_order of A's and B's layouts; h: B's summaries made ahead, or NULL */
static int diff_rank(uint32_t r, const rs_plan *A, const rs_plan *B, const uint32_t *oa, const uint32_t *ob,
                     sum_ahead *h, uint64_t *npairs)
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
    summarize(A, r, oa, &sa);
    sum_take(h, B, ob, r, &sb);
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
    uint32_t *oa = name_order(&A.layout), *ob = name_order(&B.layout);
    uint64_t ops = 0;
    for (uint32_t r = 0; r < both; r++) ops += A.ranks[r].nops + (uint64_t)B.ranks[r].nops;
    sum_ahead ah = {.B = &B, .ob = ob, .both = both}, *h = NULL;
    pthread_t th;
    if (both && rs_threads(ops, DIFF_MIN_OPS) >= 2) {
        pthread_mutex_init(&ah.mu, NULL);
        pthread_cond_init(&ah.cv, NULL);
        if (!rs_thread_start(&th, sum_main, &ah)) {
            h = &ah;
        } else {
            pthread_mutex_destroy(&ah.mu);
            pthread_cond_destroy(&ah.cv);
        }
    }
    for (uint32_t r = 0; r < both; r++) nranks += diff_rank(r, &A, &B, oa, ob, h, &npairs);
    if (h) {
        pthread_join(th, NULL);
        pthread_mutex_destroy(&ah.mu);
        pthread_cond_destroy(&ah.cv);
    }
    free(oa);
    free(ob);
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
