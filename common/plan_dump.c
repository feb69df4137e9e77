/* plan_dump.c - the human listing of a plan (reshardc dump, runtime trace): one printer per op,
 * fixed columns, names resolved, regions shown as boxes of their buffer in slice notation. */
#include "plan_dump.h"
#include "plan_io.h"
#include "util.h"

#include <stdarg.h>
#include <string.h>

/* ---- bounded string builder: keeps the length it wanted, like snprintf ---- */
typedef struct {
    char *buf;
    size_t cap;
    size_t len;
} sbuf;

static void sb_printf(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = s->len < s->cap ? s->cap - s->len : 0;
    int k = vsnprintf(room ? s->buf + s->len : NULL, room, fmt, ap);
    va_end(ap);
    if (k > 0) s->len += (size_t)k;
}

static void sb_escaped(sbuf *s, const char *name)
{
    for (const unsigned char *p = (const unsigned char *)(name ? name : "?"); *p; p++) {
        if (*p == '"' || *p == '\\') sb_printf(s, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f) sb_printf(s, "\\x%02x", *p);
        else sb_printf(s, "%c", *p);
    }
}

static void sb_name(sbuf *s, const char *name)
{
    sb_printf(s, "\"");
    sb_escaped(s, name);
    sb_printf(s, "\"");
}

/* Identifiers (mesh and axis names) unquoted, escaped all the same. */
static void print_ident(FILE *f, const char *name)
{
    char tmp[256];
    sbuf s = {tmp, sizeof tmp, 0};
    sb_escaped(&s, name);
    fputs(tmp, f);
    if (s.len >= sizeof tmp) fputs("...", f);
}

void rs_plan_print_name(FILE *f, const char *name)
{
    char tmp[512];
    sbuf s = {tmp, sizeof tmp, 0};
    sb_name(&s, name);
    if (s.len < sizeof tmp) {
        fputs(tmp, f);
        return;
    }
    char *big = rs_xmalloc(s.len + 1);
    sbuf t = {big, s.len + 1, 0};
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
    sb_printf(s, "{off %llu, count [", (unsigned long long)d->offset);
    for (uint32_t i = 0; i < d->ndim; i++) sb_printf(s, "%s%llu", i ? ", " : "", (unsigned long long)d->count[i]);
    sb_printf(s, "], stride [");
    for (uint32_t i = 0; i < d->ndim; i++) sb_printf(s, "%s%llu", i ? ", " : "", (unsigned long long)d->stride[i]);
    sb_printf(s, "]}");
}

static void sb_desc(sbuf *s, const rs_plan *P, uint32_t rank, const rs_desc *d)
{
    const rs_rank_prog *g = &P->ranks[rank];
    if (d->ndim < 1 || d->ndim > RS_DESC_MAX_DIMS) {
        sb_printf(s, "<bad descriptor>");
        return;
    }
    if (d->loc == RS_LOC_STAGING) {
        cs v[RS_DESC_MAX_DIMS];
        int m = normalize(d, v);
        sb_printf(s, "staging");
        if (m == 1 && v[0].s == 1)
            sb_printf(s, "[%llu:%llu]", (unsigned long long)d->offset, (unsigned long long)(d->offset + v[0].c));
        else
            sb_explicit(s, d);
        return;
    }
    if (d->loc >= g->nbindings || g->bindings[d->loc].buffer >= P->layout.nbuffers) {
        sb_printf(s, "<bad location>");
        return;
    }
    const rs_binding *x = &g->bindings[d->loc];
    const rs_buffer *b = &P->layout.buffers[x->buffer];
    sb_name(s, b->name);
    int64_t lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
    if (x->ndim == 0) { /* a scalar buffer: the whole of it or explicit */
        if (d->offset == 0 && rs_desc_bytes(d) == x->bytes && x->bytes) {
            sb_printf(s, "[]");
            return;
        }
    } else if (desc_box(d, x->shape, x->ndim, (uint64_t)rs_dtype_size(b->dtype), lo, hi)) {
        sb_printf(s, "[");
        for (uint32_t k = 0; k < x->ndim; k++)
            sb_printf(s, "%s%lld:%lld", k ? ", " : "", (long long)lo[k], (long long)hi[k]);
        sb_printf(s, "]");
        return;
    }
    sb_explicit(s, d);
}

int rs_plan_format_desc(char *buf, size_t n, const rs_plan *P, uint32_t rank, const rs_desc *d)
{
    sbuf s = {buf, n, 0};
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
        sbuf s_ = {tmp_, sizeof tmp_, 0};                                                          \
        build(&s_);                                                                                \
        if (s_.len < sizeof tmp_) {                                                                \
            fputs(tmp_, f);                                                                        \
        } else {                                                                                   \
            char *big_ = rs_xmalloc(s_.len + 1);                                                   \
            sbuf t_ = {big_, s_.len + 1, 0};                                                       \
            build(&t_);                                                                            \
            fputs(big_, f);                                                                        \
            free(big_);                                                                            \
        }                                                                                          \
    } while (0)

void rs_plan_dump_op_columns(FILE *f) { fprintf(f, "%10s  %-6s  %5s  %14s  %s\n", "op", "code", "peer", "bytes", "operands"); }

void rs_plan_dump_op(FILE *f, const rs_plan *P, uint32_t rank, uint32_t op)
{
    const rs_rank_prog *g = &P->ranks[rank];
    if (op >= g->nops) return;
    const rs_op *o = &g->ops[op];
    const char *name = rs_op_name(o->code);
#define BUILD_OP(s)                                                                                \
    do {                                                                                           \
        char peer[16] = "-";                                                                       \
        int xfer = o->code == RS_OP_SEND || o->code == RS_OP_RECV;                                 \
        if (xfer) snprintf(peer, sizeof peer, "%u", o->peer);                                      \
        sb_printf(s, "%10u  %-6s  %5s  %14llu  ", op, name ? name : "?", peer, (unsigned long long)o->bytes); \
        if (xfer) {                                                                                \
            rs_desc d_;                                                                            \
            memset(&d_, 0, sizeof d_);                                                             \
            d_.loc = o->loc, d_.ndim = 1, d_.offset = o->off, d_.count[0] = o->bytes, d_.stride[0] = 1; \
            sb_desc(s, P, rank, &d_);                                                              \
        } else if (o->src < g->ndescs && o->dst < g->ndescs) {                                     \
            rs_desc d_;                                                                            \
            sb_desc(s, P, rank, rs_prog_desc(g, o->src, &d_));                                     \
            sb_printf(s, " -> ");                                                                  \
            sb_desc(s, P, rank, rs_prog_desc(g, o->dst, &d_));                                     \
        }                                                                                          \
        if (o->tensor < P->layout.ntensors) {                                                      \
            sb_printf(s, "  ; tensor ");                                                           \
            sb_name(s, P->layout.tensors[o->tensor].name);                                         \
        } else {                                                                                   \
            sb_printf(s, "  ; several tensors");                                                   \
        }                                                                                          \
        sb_printf(s, "\n");                                                                        \
    } while (0)
    PRINT_BUILT(f, BUILD_OP);
#undef BUILD_OP
}

void rs_plan_dump_step(FILE *f, const rs_plan *P, uint32_t rank, uint32_t step)
{
    const rs_rank_prog *g = &P->ranks[rank];
    if (step >= g->nsteps) return;
    const rs_step *st = &g->steps[step];
    fprintf(f, "  step %u  %s  waits ", step, lane_name(st->lane));
    if (!st->nwaits) fputs("-", f);
    for (uint32_t w = 0; w < st->nwaits; w++) fprintf(f, "%s%u", w ? ", " : "", g->waits[st->wait_begin + w]);
    fputc('\n', f);
}

static void print_shape(FILE *f, const int64_t *shape, uint32_t n)
{
    fputc('[', f);
    for (uint32_t d = 0; d < n; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)shape[d]);
    fputc(']', f);
}

void rs_plan_dump_rank(FILE *f, const rs_plan *P, uint32_t rank)
{
    const rs_layout *L = &P->layout;
    if (rank >= L->topo.world) return;
    const rs_rank_prog *g = &P->ranks[rank];
    fprintf(f, "rank %u  domain %u  staging %llu bytes", rank, L->topo.domain_of[rank],
            (unsigned long long)g->staging_bytes);
    if (!g->loaded) {
        fputs("  (program not loaded)\n", f);
        return;
    }
    fprintf(f, "  bindings %u  steps %u  ops %u\n", g->nbindings, g->nsteps, g->nops);
    if (g->nbindings) fprintf(f, "  %-6s  %-4s  %-8s  %14s  %s\n", "bind", "side", "dtype", "bytes", "buffer : shape");
    for (uint32_t i = 0; i < g->nbindings; i++) {
        const rs_binding *x = &g->bindings[i];
        const rs_buffer *b = x->buffer < L->nbuffers ? &L->buffers[x->buffer] : NULL;
        char id[16];
        snprintf(id, sizeof id, "b%u", i);
        fprintf(f, "  %-6s  %-4s  %-8s  %14llu  ", id, b ? (b->side == RS_SRC ? "src" : "dst") : "?",
                b ? rs_dtype_name(b->dtype) : "?", (unsigned long long)x->bytes);
        rs_plan_print_name(f, b ? b->name : "?");
        fputs(" : ", f);
        print_shape(f, x->shape, x->ndim);
        if (b && b->group)
            fprintf(f, "  group: %llu members of %llu bytes", (unsigned long long)rs_binding_members(L, x),
                    (unsigned long long)rs_binding_member_bytes(L, x));
        fputc('\n', f);
    }
    if (g->nsteps) rs_plan_dump_op_columns(f);
    for (uint32_t s = 0; s < g->nsteps; s++) {
        rs_plan_dump_step(f, P, rank, s);
        const rs_step *st = &g->steps[s];
        for (uint32_t k = 0; k < st->nops; k++) rs_plan_dump_op(f, P, rank, st->op_begin + k);
    }
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

void rs_plan_dump(FILE *f, const rs_plan *P, int rank)
{
    rs_plan_dump_header(f, P);
    for (uint32_t r = 0; r < P->layout.topo.world; r++) {
        if (rank >= 0 && (uint32_t)rank != r) continue;
        if (rank < 0 && !P->ranks[r].loaded) continue;
        fputc('\n', f);
        rs_plan_dump_rank(f, P, r);
    }
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
