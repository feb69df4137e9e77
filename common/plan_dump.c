/* plan_dump.c - the human listing of a plan (reshardc dump, runtime trace): one printer per op,
 * fixed columns, names resolved, regions shown as boxes of their buffer in slice notation. */
#include "plan_dump.h"
#include "plan_io.h"
#include "util.h"

#include <pthread.h>
#include <string.h>

/* ---- string builder: bounded, keeping the length it wanted like snprintf, or growing (grow) ---- */
typedef struct {
    char *buf;
    size_t cap;
    size_t len;
    int grow; /* buf is malloc'd (or NULL) and grows to hold everything */
} sbuf;

/* Appended piece by piece, not with vsnprintf (until the twenty-fourth session: 70 % of a whole-plan
 * listing's time went to printf's machinery, docs/benchmarks.md "The listing and the diff"); the bytes are
 * the same. */
static void sb_put_slow(sbuf *s, const char *p, size_t n)
{
    if (s->grow && s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 4096;
        while (cap < s->len + n + 1) cap *= 2;
        s->buf = rs_xrealloc(s->buf, cap);
        s->cap = cap;
    }
    if (s->len < s->cap) {
        size_t k = s->cap - s->len - 1; /* (room for the NUL, as vsnprintf keeps it) */
        if (k > n) k = n;
        memcpy(s->buf + s->len, p, k);
        s->buf[s->len + k] = 0;
    }
    s->len += n;
}

static inline void sb_put(sbuf *s, const char *p, size_t n)
{
    if (s->len + n < s->cap) {
        memcpy(s->buf + s->len, p, n);
        s->len += n;
        s->buf[s->len] = 0;
        return;
    }
    sb_put_slow(s, p, n);
}

static inline void sb_str(sbuf *s, const char *p) { sb_put(s, p, strlen(p)); }

/* v in decimal at the end of out[24]; returns where it starts. */
static char *dec_u64(char out[24], uint64_t v)
{
    char *p = out + 24;
    do *--p = (char)('0' + v % 10);
    while (v /= 10);
    return p;
}

static void sb_u64(sbuf *s, uint64_t v)
{
    char t[24], *p = dec_u64(t, v);
    sb_put(s, p, (size_t)(t + 24 - p));
}

static void sb_i64(sbuf *s, int64_t v)
{
    if (v < 0) sb_put(s, "-", 1);
    sb_u64(s, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

static void sb_spaces(sbuf *s, size_t n)
{
    static const char sp[] = "                ";
    for (; n >= sizeof sp - 1; n -= sizeof sp - 1) sb_put(s, sp, sizeof sp - 1);
    sb_put(s, sp, n);
}

/* p (n bytes) in a field of `width`: right-aligned (printf's %Ns) or left-aligned (%-Ns). */
static void sb_field(sbuf *s, const char *p, size_t n, size_t width, int left)
{
    if (!left && n < width) sb_spaces(s, width - n);
    sb_put(s, p, n);
    if (left && n < width) sb_spaces(s, width - n);
}

static void sb_u64_field(sbuf *s, uint64_t v, size_t width)
{
    char t[24], *p = dec_u64(t, v);
    sb_field(s, p, (size_t)(t + 24 - p), width, 0);
}

static void sb_escaped(sbuf *s, const char *name)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)(name ? name : "?"), *run = p;
    for (; *p; p++) {
        if (*p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x7f) continue;
        sb_put(s, (const char *)run, (size_t)(p - run));
        run = p + 1;
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            sb_put(s, e, 2);
        } else {
            char e[4] = {'\\', 'x', hex[*p >> 4], hex[*p & 15]};
            sb_put(s, e, 4);
        }
    }
    sb_put(s, (const char *)run, (size_t)(p - run));
}

static void sb_name(sbuf *s, const char *name)
{
    sb_put(s, "\"", 1);
    sb_escaped(s, name);
    sb_put(s, "\"", 1);
}

/* Identifiers (mesh and axis names) unquoted, escaped all the same. */
static void print_ident(FILE *f, const char *name)
{
    char tmp[256];
    sbuf s = {tmp, sizeof tmp, 0, 0};
    sb_escaped(&s, name);
    fputs(tmp, f);
    if (s.len >= sizeof tmp) fputs("...", f);
}

void rs_plan_print_name(FILE *f, const char *name)
{
    char tmp[512];
    sbuf s = {tmp, sizeof tmp, 0, 0};
    sb_name(&s, name);
    if (s.len < sizeof tmp) {
        fputs(tmp, f);
        return;
    }
    char *big = rs_xmalloc(s.len + 1);
    sbuf t = {big, s.len + 1, 0, 0};
    sb_name(&t, name);
    fputs(big, f);
    free(big);
}

/* ---- regions ---- */

typedef struct {
    uint64_t c, s;
} cs;

/* Drop count-1 dims, merge dims that are contiguous in each other. -1 for an empty region. */
static int normalize(const rs_desc *d, cs *v)
{
    int m = 0;
    for (uint32_t i = 0; i < d->ndim; i++) {
        if (d->count[i] == 0) return -1;
        if (d->count[i] == 1 && i + 1 != d->ndim) continue;
        v[m++] = (cs){d->count[i], d->stride[i]};
        while (m >= 2 && v[m - 2].s == v[m - 1].c * v[m - 1].s && v[m - 1].c && v[m - 2].c <= UINT64_MAX / v[m - 1].c) {
            v[m - 2] = (cs){v[m - 2].c * v[m - 1].c, v[m - 1].s};
            m--;
        }
    }
    return m;
}

static int same_regions(const rs_desc *a, const rs_desc *b)
{
    cs x[RS_DESC_MAX_DIMS], y[RS_DESC_MAX_DIMS];
    int m = normalize(a, x), n = normalize(b, y);
    if (m < 0 || m != n || a->offset != b->offset) return 0;
    for (int i = 0; i < m; i++)
        if (x[i].c != y[i].c || x[i].s != y[i].s) return 0;
    return 1;
}

/* Is d exactly the box [lo, hi) of a row-major buffer of `shape` with elements of es bytes? */
static int desc_box(const rs_desc *d, const int64_t *shape, uint32_t nd, uint64_t es, int64_t *lo, int64_t *hi)
{
    cs v[RS_DESC_MAX_DIMS];
    int m = normalize(d, v);
    if (m <= 0 || es == 0 || nd > RS_MAX_DIMS || d->offset % es) return 0;
    if (v[m - 1].s != 1 || v[m - 1].c % es) return 0;
    v[m - 1].c /= es;
    for (int k = 0; k + 1 < m; k++) {
        if (v[k].s % es) return 0;
        v[k].s /= es;
    }
    uint64_t R[RS_MAX_DIMS], ext[RS_MAX_DIMS], total = 1;
    for (int k = (int)nd - 1; k >= 0; k--) {
        if (shape[k] <= 0) return 0;
        R[k] = total;
        if (rs_umul_ovf(total, (uint64_t)shape[k], &total)) return 0;
    }
    uint64_t off = d->offset / es;
    if (off >= total) return 0;
    for (uint32_t k = 0; k < nd; k++) {
        lo[k] = (int64_t)((off / R[k]) % (uint64_t)shape[k]);
        ext[k] = 1;
    }
    int cur = (int)nd - 1;
    for (int k = m - 1; k >= 0; k--) {
        uint64_t c = v[k].c;
        int dd = cur;
        while (dd >= 0 && R[dd] < v[k].s) dd--;
        if (dd < 0 || R[dd] != v[k].s) return 0;
        for (;;) {
            if (dd < 0) return 0;
            uint64_t avail = (uint64_t)(shape[dd] - lo[dd]);
            if (c <= avail) {
                ext[dd] = c;
                break;
            }
            if (lo[dd] != 0 || c % (uint64_t)shape[dd]) return 0;
            ext[dd] = (uint64_t)shape[dd];
            c /= (uint64_t)shape[dd];
            dd--;
        }
        cur = dd - 1;
    }
    /* Check: the canonical descriptor of the box found must be the same region. */
    rs_desc b;
    memset(&b, 0, sizeof b);
    b.ndim = nd;
    for (uint32_t k = 0; k < nd; k++) {
        hi[k] = lo[k] + (int64_t)ext[k];
        b.count[k] = ext[k] * (k + 1 == nd ? es : 1);
        b.stride[k] = k + 1 == nd ? 1 : R[k] * es;
        b.offset += (uint64_t)lo[k] * R[k] * es;
    }
    return same_regions(d, &b);
}

static void sb_explicit(sbuf *s, const rs_desc *d)
{
    sb_str(s, "{off ");
    sb_u64(s, d->offset);
    sb_str(s, ", count [");
    for (uint32_t i = 0; i < d->ndim; i++) {
        if (i) sb_str(s, ", ");
        sb_u64(s, d->count[i]);
    }
    sb_str(s, "], stride [");
    for (uint32_t i = 0; i < d->ndim; i++) {
        if (i) sb_str(s, ", ");
        sb_u64(s, d->stride[i]);
    }
    sb_str(s, "]}");
}

static void sb_desc(sbuf *s, const rs_plan *P, uint32_t rank, const rs_desc *d)
{
    const rs_rank_prog *g = &P->ranks[rank];
    if (d->ndim < 1 || d->ndim > RS_DESC_MAX_DIMS) {
        sb_str(s, "<bad descriptor>");
        return;
    }
    if (d->loc == RS_LOC_STAGING) {
        cs v[RS_DESC_MAX_DIMS];
        int m = normalize(d, v);
        sb_str(s, "staging");
        if (m == 1 && v[0].s == 1) {
            sb_str(s, "[");
            sb_u64(s, d->offset);
            sb_str(s, ":");
            sb_u64(s, d->offset + v[0].c);
            sb_str(s, "]");
        } else {
            sb_explicit(s, d);
        }
        return;
    }
    if (d->loc >= g->nbindings || g->bindings[d->loc].buffer >= P->layout.nbuffers) {
        sb_str(s, "<bad location>");
        return;
    }
    const rs_binding *x = &g->bindings[d->loc];
    const rs_buffer *b = &P->layout.buffers[x->buffer];
    sb_name(s, b->name);
    int64_t lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
    if (x->ndim == 0) { /* a scalar buffer: the whole of it or explicit */
        if (d->offset == 0 && rs_desc_bytes(d) == x->bytes && x->bytes) {
            sb_str(s, "[]");
            return;
        }
    } else if (desc_box(d, x->shape, x->ndim, (uint64_t)rs_dtype_size(b->dtype), lo, hi)) {
        sb_str(s, "[");
        for (uint32_t k = 0; k < x->ndim; k++) {
            if (k) sb_str(s, ", ");
            sb_i64(s, lo[k]);
            sb_str(s, ":");
            sb_i64(s, hi[k]);
        }
        sb_str(s, "]");
        return;
    }
    sb_explicit(s, d);
}

int rs_plan_format_desc(char *buf, size_t n, const rs_plan *P, uint32_t rank, const rs_desc *d)
{
    sbuf s = {buf, n, 0, 0};
    if (n) buf[0] = 0;
    sb_desc(&s, P, rank, d);
    return (int)s.len;
}

int rs_plan_format_range(char *buf, size_t n, const rs_plan *P, uint32_t rank, uint32_t loc, uint64_t off,
                         uint64_t bytes)
{
    rs_desc d = rs_desc_range(loc, off, bytes);
    return rs_plan_format_desc(buf, n, P, rank, &d);
}

/* ---- printers ---- */

static const char *lane_name(unsigned lane) { return lane == RS_LANE_NET ? "NET" : lane == RS_LANE_NVL ? "NVL" : "?"; }

/* Print an sbuf-built line, growing past the stack buffer when a name is very long. */
#define PRINT_BUILT(f, build)                                                                      \
    do {                                                                                           \
        char tmp_[1024];                                                                           \
        sbuf s_ = {tmp_, sizeof tmp_, 0, 0};                                                       \
        build(&s_);                                                                                \
        if (s_.len < sizeof tmp_) {                                                                \
            fputs(tmp_, f);                                                                        \
        } else {                                                                                   \
            sbuf t_ = {NULL, 0, 0, 1};                                                             \
            build(&t_);                                                                            \
            fputs(t_.buf, f);                                                                      \
            free(t_.buf);                                                                          \
        }                                                                                          \
    } while (0)

static void sb_op_columns(sbuf *s) { sb_str(s, "        op  code     peer           bytes  operands\n"); }

void rs_plan_dump_op_columns(FILE *f) { PRINT_BUILT(f, sb_op_columns); }

static void sb_op(sbuf *s, const rs_plan *P, uint32_t rank, uint32_t op)
{
    const rs_rank_prog *g = &P->ranks[rank];
    const rs_op *o = &g->ops[op];
    const char *name = rs_op_name(o->code);
    int xfer = o->code == RS_OP_SEND || o->code == RS_OP_RECV;
    if (!name) name = "?";
    sb_u64_field(s, op, 10);
    sb_str(s, "  ");
    sb_field(s, name, strlen(name), 6, 1);
    sb_str(s, "  ");
    if (xfer) sb_u64_field(s, o->peer, 5);
    else sb_field(s, "-", 1, 5, 0);
    sb_str(s, "  ");
    sb_u64_field(s, o->bytes, 14);
    sb_str(s, "  ");
    rs_desc d;
    if (xfer) {
        d = rs_desc_range(o->loc, o->off, o->bytes);
        sb_desc(s, P, rank, &d);
    } else if (o->src < g->ndescs && o->dst < g->ndescs) {
        sb_desc(s, P, rank, rs_prog_desc(g, o->src, &d));
        sb_str(s, " -> ");
        sb_desc(s, P, rank, rs_prog_desc(g, o->dst, &d));
    }
    if (o->tensor < P->layout.ntensors) {
        sb_str(s, "  ; tensor ");
        sb_name(s, P->layout.tensors[o->tensor].name);
    } else {
        sb_str(s, "  ; several tensors");
    }
    sb_str(s, "\n");
}

void rs_plan_dump_op(FILE *f, const rs_plan *P, uint32_t rank, uint32_t op)
{
    if (op >= P->ranks[rank].nops) return;
#define BUILD_OP(s) sb_op(s, P, rank, op)
    PRINT_BUILT(f, BUILD_OP);
#undef BUILD_OP
}

static void sb_step(sbuf *s, const rs_plan *P, uint32_t rank, uint32_t step)
{
    const rs_rank_prog *g = &P->ranks[rank];
    const rs_step *st = &g->steps[step];
    sb_str(s, "  step ");
    sb_u64(s, step);
    sb_str(s, "  ");
    sb_str(s, lane_name(st->lane));
    sb_str(s, "  waits ");
    if (!st->nwaits) sb_str(s, "-");
    for (uint32_t w = 0; w < st->nwaits; w++) {
        if (w) sb_str(s, ", ");
        sb_u64(s, g->waits[st->wait_begin + w]);
    }
    sb_str(s, "\n");
}

void rs_plan_dump_step(FILE *f, const rs_plan *P, uint32_t rank, uint32_t step)
{
    if (step >= P->ranks[rank].nsteps) return;
#define BUILD_STEP(s) sb_step(s, P, rank, step)
    PRINT_BUILT(f, BUILD_STEP);
#undef BUILD_STEP
}

/* One rank's listing, appended to growing s. */
static void sb_rank(sbuf *s, const rs_plan *P, uint32_t rank)
{
    const rs_layout *L = &P->layout;
    const rs_rank_prog *g = &P->ranks[rank];
    sb_str(s, "rank ");
    sb_u64(s, rank);
    sb_str(s, "  domain ");
    sb_u64(s, L->topo.domain_of[rank]);
    sb_str(s, "  staging ");
    sb_u64(s, g->staging_bytes);
    sb_str(s, " bytes");
    if (!g->loaded) {
        sb_str(s, "  (program not loaded)\n");
        return;
    }
    sb_str(s, "  bindings ");
    sb_u64(s, g->nbindings);
    sb_str(s, "  steps ");
    sb_u64(s, g->nsteps);
    sb_str(s, "  ops ");
    sb_u64(s, g->nops);
    sb_str(s, "\n");
    if (g->nbindings) sb_str(s, "  bind    side  dtype              bytes  buffer : shape\n");
    for (uint32_t i = 0; i < g->nbindings; i++) {
        const rs_binding *x = &g->bindings[i];
        const rs_buffer *b = x->buffer < L->nbuffers ? &L->buffers[x->buffer] : NULL;
        char id[24], *p = dec_u64(id, i);
        *--p = 'b';
        const char *side = b ? (b->side == RS_SRC ? "src" : "dst") : "?", *dt = b ? rs_dtype_name(b->dtype) : "?";
        sb_str(s, "  ");
        sb_field(s, p, (size_t)(id + 24 - p), 6, 1);
        sb_str(s, "  ");
        sb_field(s, side, strlen(side), 4, 1);
        sb_str(s, "  ");
        sb_field(s, dt, strlen(dt), 8, 1);
        sb_str(s, "  ");
        sb_u64_field(s, x->bytes, 14);
        sb_str(s, "  ");
        sb_name(s, b ? b->name : "?");
        sb_str(s, " : [");
        for (uint32_t d = 0; d < x->ndim; d++) {
            if (d) sb_str(s, ", ");
            sb_i64(s, x->shape[d]);
        }
        sb_str(s, "]");
        if (b && b->group) {
            sb_str(s, "  group: ");
            sb_u64(s, rs_binding_members(L, x));
            sb_str(s, " members of ");
            sb_u64(s, rs_binding_member_bytes(L, x));
            sb_str(s, " bytes");
        }
        sb_str(s, "\n");
    }
    if (g->nsteps) sb_op_columns(s);
    for (uint32_t st = 0; st < g->nsteps; st++) {
        sb_step(s, P, rank, st);
        for (uint32_t k = 0; k < g->steps[st].nops; k++)
            if (g->steps[st].op_begin + k < g->nops) sb_op(s, P, rank, g->steps[st].op_begin + k);
    }
}

void rs_plan_dump_rank(FILE *f, const rs_plan *P, uint32_t rank)
{
    if (rank >= P->layout.topo.world) return;
    sbuf s = {NULL, 0, 0, 1};
    sb_rank(&s, P, rank);
    fwrite(s.buf, 1, s.len, f);
    free(s.buf);
}

/* "0..4" for a run of consecutive ranks, else a list; runs inside a list compress too. */
static void print_ranks(FILE *f, const int32_t *r, uint32_t n)
{
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i + 1;
        while (j < n && r[j] == r[j - 1] + 1) j++;
        if (i) fputs(", ", f);
        if (j - i >= 2) fprintf(f, "%d..%d", r[i], r[j - 1] + 1);
        else fprintf(f, "%d", r[i]);
        i = j;
    }
}

void rs_plan_dump_header(FILE *f, const rs_plan *P)
{
    const rs_layout *L = &P->layout;
    const rs_topology *T = &L->topo;
    fprintf(f, "world       %u ranks in %u NVLink domains", T->world, T->ndomains);
    if (T->domain_size > 0) fprintf(f, " of %lld (rank / %lld)\n", (long long)T->domain_size, (long long)T->domain_size);
    else fputc('\n', f);
    if (T->domain_size <= 0) {
        int32_t *list = rs_xmalloc(((size_t)T->world + 1) * sizeof *list);
        for (uint32_t d = 0; d < T->ndomains; d++) {
            uint32_t n = 0;
            for (uint32_t r = 0; r < T->world; r++)
                if (T->domain_of[r] == d) list[n++] = (int32_t)r;
            fprintf(f, "domain      %u: ", d);
            print_ranks(f, list, n);
            fputc('\n', f);
        }
        free(list);
    }
    fprintf(f, "bandwidth   nic %g Gb/s, nvlink %g Gb/s (per GPU and direction)\n", T->nic_gbps, T->nvlink_gbps);
    fprintf(f, "plan fp     %016llx\n", (unsigned long long)P->plan_fp);
    fprintf(f, "source fp   %016llx\n", (unsigned long long)P->source_fp);
    uint64_t most = 0;
    uint32_t at = 0;
    for (uint32_t r = 0; r < T->world && P->ranks; r++)
        if (P->ranks[r].staging_bytes > most) most = P->ranks[r].staging_bytes, at = r;
    fprintf(f, "staging     budget %llu bytes, largest %llu bytes (rank %u)\n", (unsigned long long)P->staging_budget,
            (unsigned long long)most, at);
    fprintf(f, "layout      %u meshes, %u tensors, %u buffers, %u pieces\n", L->nmeshes, L->ntensors, L->nbuffers,
            L->npieces);
    uint64_t nsteps = 0, lanes[RS_NLANES] = {0}, nops = 0, ndescs = 0, byop[256] = {0};
    uint32_t loaded = 0;
    for (uint32_t r = 0; r < T->world && P->ranks; r++) {
        const rs_rank_prog *g = &P->ranks[r];
        if (!g->loaded) continue;
        loaded++;
        nsteps += g->nsteps;
        nops += g->nops;
        ndescs += g->ndescs;
        for (uint32_t s = 0; s < g->nsteps; s++)
            if (g->steps[s].lane < RS_NLANES) lanes[g->steps[s].lane]++;
        for (uint32_t k = 0; k < g->nops; k++) byop[g->ops[k].code]++;
    }
    fprintf(f, "programs    %u of %u ranks loaded: %llu steps (NET %llu, NVL %llu), %llu descriptors\n", loaded,
            T->world, (unsigned long long)nsteps, (unsigned long long)lanes[RS_LANE_NET],
            (unsigned long long)lanes[RS_LANE_NVL], (unsigned long long)ndescs);
    fprintf(f, "ops         %llu", (unsigned long long)nops);
    const char *sep = " (";
#define X(n, v, o, s)                                                                              \
    fprintf(f, "%s%s %llu", sep, #n, (unsigned long long)byop[v]);                                 \
    sep = ", ";
    RS_OPCODES(X)
#undef X
    fputs(")\n", f);
    for (uint32_t i = 0; i < L->nmeshes; i++) {
        fprintf(f, "mesh        ");
        rs_plan_print_mesh(f, &L->meshes[i]);
        fputc('\n', f);
    }
}

void rs_plan_print_mesh(FILE *f, const rs_mesh *m)
{
    print_ident(f, m->name);
    fputs(" [", f);
    for (uint32_t a = 0; a < m->naxes; a++) {
        fprintf(f, "%s", a ? ", " : "");
        print_ident(f, m->axis[a]);
        fprintf(f, " = %lld", (long long)m->size[a]);
    }
    fputs("] = ranks ", f);
    print_ranks(f, m->ranks, m->nranks);
}

/* ---- the whole listing on two threads ---- */

/* Both threads list ranks into memory, taking the next rank in turn, and the calling thread writes them out
 * in rank order: the listing is the same on one thread or two. At most DUMP_AHEAD ranks are listed and not
 * yet written, each in a slot whose buffer the rank DUMP_AHEAD later reuses (a rank of DeepSeek-V3/H100's
 * plan is about 1 MB of text). */
#define DUMP_AHEAD 16
#define DUMP_MIN_OPS ((uint64_t)1 << 16)

typedef struct {
    sbuf text;
    int ready;
} dump_slot;

typedef struct {
    const rs_plan *P;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dump_slot slot[DUMP_AHEAD];
    uint32_t next, written, world; /* the next rank to list, the next to write */
} dump_job;

static int dump_listed(const rs_plan *P, uint32_t r) { return P->ranks[r].loaded; }

/* Take the next rank to list (RS_NONE: none is left, or DUMP_AHEAD are listed and unwritten and the caller,
 * the writer, must not wait for room); called with the lock held. */
static uint32_t dump_take(dump_job *j, int wait)
{
    for (;;) {
        while (j->next < j->world && !dump_listed(j->P, j->next)) j->next++;
        if (j->next >= j->world) return RS_NONE;
        if (j->next < j->written + DUMP_AHEAD) return j->next++;
        if (!wait) return RS_NONE;
        pthread_cond_wait(&j->cv, &j->mu); /* (the other thread may take the last ranks meanwhile) */
    }
}

/* List rank r into its slot (the lock is not held while it lists: no other thread touches the slot until it
 * is ready). */
static void dump_into(dump_job *j, uint32_t r)
{
    dump_slot *sl = &j->slot[r % DUMP_AHEAD];
    sbuf t = sl->text; /* (built in a copy of its own: the slots share cache lines, and every append writes
                        * the length; in place, two threads took twice one's time) */
    t.len = 0;
    sb_put(&t, "\n", 1);
    sb_rank(&t, j->P, r);
    pthread_mutex_lock(&j->mu);
    sl->text = t;
    sl->ready = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static void *dump_helper(void *arg)
{
    dump_job *j = arg;
    pthread_mutex_lock(&j->mu);
    for (uint32_t r; (r = dump_take(j, 1)) != RS_NONE;) {
        pthread_mutex_unlock(&j->mu);
        dump_into(j, r);
        pthread_mutex_lock(&j->mu);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* Write out the ranks listed, in order; called with the lock held. */
static void dump_flush(dump_job *j, FILE *f)
{
    for (;;) {
        while (j->written < j->world && !dump_listed(j->P, j->written)) j->written++;
        if (j->written >= j->world) return;
        dump_slot *sl = &j->slot[j->written % DUMP_AHEAD];
        if (!sl->ready) return;
        pthread_mutex_unlock(&j->mu);
        fwrite(sl->text.buf, 1, sl->text.len, f);
        pthread_mutex_lock(&j->mu);
        sl->ready = 0;
        j->written++;
        pthread_cond_broadcast(&j->cv);
    }
}

/* 0 when listed, -1 when no second thread could be started (nothing written). */
static int dump_two(FILE *f, const rs_plan *P)
{
    dump_job j;
    memset(&j, 0, sizeof j);
    j.P = P;
    j.world = P->layout.topo.world;
    for (int i = 0; i < DUMP_AHEAD; i++) j.slot[i].text.grow = 1;
    pthread_mutex_init(&j.mu, NULL);
    pthread_cond_init(&j.cv, NULL);
    pthread_t th;
    int rc = rs_thread_start(&th, dump_helper, &j);
    if (!rc) {
        pthread_mutex_lock(&j.mu);
        for (;;) {
            dump_flush(&j, f);
            if (j.written >= j.world) break;
            uint32_t r = dump_take(&j, 0);
            if (r == RS_NONE) { /* the helper lists the rank to write next */
                pthread_cond_wait(&j.cv, &j.mu);
                continue;
            }
            pthread_mutex_unlock(&j.mu);
            dump_into(&j, r);
            pthread_mutex_lock(&j.mu);
        }
        pthread_mutex_unlock(&j.mu);
        pthread_join(th, NULL);
    }
    for (int i = 0; i < DUMP_AHEAD; i++) free(j.slot[i].text.buf);
    pthread_mutex_destroy(&j.mu);
    pthread_cond_destroy(&j.cv);
    return rc ? -1 : 0;
}

void rs_plan_dump(FILE *f, const rs_plan *P, int rank)
{
    rs_plan_dump_header(f, P);
    uint32_t world = P->layout.topo.world;
    if (rank >= 0) {
        if ((uint32_t)rank < world) {
            fputc('\n', f);
            rs_plan_dump_rank(f, P, (uint32_t)rank);
        }
        return;
    }
    uint64_t ops = 0;
    for (uint32_t r = 0; r < world; r++) ops += dump_listed(P, r) ? P->ranks[r].nops : 0;
    if (world >= 2 && rs_threads(ops, DUMP_MIN_OPS) >= 2 && !dump_two(f, P)) return;
    sbuf s = {NULL, 0, 0, 1}; /* (one buffer for every rank) */
    for (uint32_t r = 0; r < world; r++) {
        if (!dump_listed(P, r)) continue;
        s.len = 0;
        sb_put(&s, "\n", 1);
        sb_rank(&s, P, r);
        fwrite(s.buf, 1, s.len, f);
    }
    free(s.buf);
}

int rs_plan_file_version(const char *path, unsigned *major, unsigned *minor)
{
    uint8_t h[RS_HDR_MINOR + 2];
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(h, 1, sizeof h, f);
    fclose(f);
    if (n != sizeof h || memcmp(h, RS_PLAN_MAGIC, RS_PLAN_MAGIC_LEN)) return -1;
    *major = rs_rd16(h + RS_HDR_MAJOR);
    *minor = rs_rd16(h + RS_HDR_MINOR);
    return 0;
}
