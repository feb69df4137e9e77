/* plan_read.c - decodes plan.bin (docs/format.md) for all ranks or for one rank, trusting nothing:
 * every offset, length, count and index is checked before use, every section's CRC32C, then each
 * loaded rank's program goes through rs_plan_verify_rank. rs_plan_load_file mmaps the file. */
#define _GNU_SOURCE
#include "plan.h"
#include "plan_io.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Cursor reads with a range check; a value out of range marks the cursor bad (code 3). */
static inline uint64_t get(rs_cur *c, uint64_t max)
{
    uint64_t v = rs_cur_uv(c);
    if (v > max && !c->bad) c->bad = 3;
    return c->bad ? 0 : v;
}
static inline uint32_t get_opt(rs_cur *c) /* 0 = RS_NONE, else index + 1 */
{
    uint64_t v = get(c, UINT32_MAX);
    return v == 0 ? RS_NONE : (uint32_t)(v - 1);
}

static int cur_fail(const rs_cur *c, const char *where, char *err, size_t errlen)
{
    static const char *const why[] = {"", "ends inside a record", "has a malformed number", "has a value out of range"};
    return rs_errf(err, errlen, "bad plan (%s %s)", where, why[c->bad > 0 && c->bad < 4 ? c->bad : 3]);
}

/* ---- header ---- */

static int check_magic(const uint8_t *img, size_t len, char *err, size_t errlen)
{
    static const uint8_t magic[RS_PLAN_MAGIC_LEN] = RS_PLAN_MAGIC;
    size_t n = len < RS_PLAN_MAGIC_LEN ? len : RS_PLAN_MAGIC_LEN;
    if (len == 0) return rs_errf(err, errlen, "not a plan file (empty)");
    if (!memcmp(img, magic, n)) {
        if (n < RS_PLAN_MAGIC_LEN) return rs_errf(err, errlen, "bad plan (truncated header)");
        return 0;
    }
    if (len >= 7 && img[0] == (magic[0] & 0x7f) && !memcmp(img + 1, magic + 1, 6))
        return rs_errf(err, errlen, "not a plan file (text-mode damage: high bit stripped?)");
    if (len >= 7 && !memcmp(img, magic, 7)) {
        /* "\r\n\x1a\n" mangled: CR LF -> LF, LF -> CR LF, or cut at the ^Z. */
        return rs_errf(err, errlen, "not a plan file (text-mode damage: CRLF translation?)");
    }
    return rs_errf(err, errlen, "not a plan file (bad magic)");
}

typedef struct {
    uint32_t id;
    uint64_t off, len;
    uint32_t crc;
} secent;

typedef struct {
    uint32_t hdr_len, nsec, world;
    uint64_t file_len, plan_fp, source_fp, staging;
    secent sec[RS_SEC_MAX];
    int idx[RS_SEC_COUNT_1_0 + 1]; /* section id -> table index */
} header;

static int read_header(const uint8_t *img, size_t len, header *H, char *err, size_t errlen)
{
    if (check_magic(img, len, err, errlen)) return -1;
    if (len < RS_HDR_LEN + 4) return rs_errf(err, errlen, "bad plan (truncated header)");
    unsigned major = rs_rd16(img + RS_HDR_MAJOR), minor = rs_rd16(img + RS_HDR_MINOR);
    if (major != RS_PLAN_MAJOR)
        return rs_errf(err, errlen, "unsupported plan format %u.%u (this reshard reads %d.x)", major, minor,
                    RS_PLAN_MAJOR);
    H->hdr_len = rs_rd32(img + RS_HDR_LEN);
    if (H->hdr_len < RS_HDR_SIZE_1_0 || H->hdr_len > 4096 || H->hdr_len % 8)
        return rs_errf(err, errlen, "bad plan (header length %u)", H->hdr_len);
    if (len < H->hdr_len) return rs_errf(err, errlen, "bad plan (truncated header)");
    H->nsec = rs_rd32(img + RS_HDR_NSECTIONS);
    if (H->nsec < RS_SEC_COUNT_1_0 || H->nsec > RS_SEC_MAX)
        return rs_errf(err, errlen, "bad plan (%u sections)", H->nsec);
    uint64_t table_end = H->hdr_len + (uint64_t)H->nsec * RS_SEC_ENTRY_SIZE;
    if (len < table_end) return rs_errf(err, errlen, "bad plan (truncated section table)");
    if (rs_rd32(img + RS_HDR_CRC) != rs_plan_header_crc(img, (size_t)table_end))
        return rs_errf(err, errlen, "bad checksum in the header");
    if (rs_rd32(img + RS_HDR_FLAGS) != 0) return rs_errf(err, errlen, "bad plan (unknown header flags)");
    H->world = rs_rd32(img + RS_HDR_WORLD);
    H->file_len = rs_rd64(img + RS_HDR_FILE_LEN);
    H->plan_fp = rs_rd64(img + RS_HDR_PLAN_FP);
    H->source_fp = rs_rd64(img + RS_HDR_SOURCE_FP);
    H->staging = rs_rd64(img + RS_HDR_STAGING);
    if (H->world == 0 || H->world > RS_PLAN_MAX_WORLD)
        return rs_errf(err, errlen, "bad plan (world of %u ranks)", H->world);

    /* Sections tile the rest of the file in table order: no gaps, no overlaps, nothing after them. */
    memset(H->idx, -1, sizeof H->idx);
    uint64_t at = table_end;
    for (uint32_t i = 0; i < H->nsec; i++) {
        const uint8_t *e = img + H->hdr_len + (size_t)i * RS_SEC_ENTRY_SIZE;
        secent *s = &H->sec[i];
        s->id = rs_rd32(e);
        s->off = rs_rd64(e + 8);
        s->len = rs_rd64(e + 16);
        s->crc = rs_rd32(e + 24);
        if (s->off != at || rs_uadd_ovf(at, s->len, &at))
            return rs_errf(err, errlen, "bad plan (section %u is not where the table says)", i);
        if (s->id >= 1 && s->id <= RS_SEC_COUNT_1_0) {
            if (H->idx[s->id] >= 0)
                return rs_errf(err, errlen, "bad plan (section '%s' twice)", rs_plan_section_name(s->id));
            H->idx[s->id] = (int)i;
        }
    }
    for (uint32_t id = 1; id <= RS_SEC_COUNT_1_0; id++)
        if (H->idx[id] < 0) return rs_errf(err, errlen, "bad plan (no section '%s')", rs_plan_section_name(id));
    if (at != H->file_len) return rs_errf(err, errlen, "bad plan (sections do not add up to the file length)");
    if (len < H->file_len) {
        for (uint32_t i = 0; i < H->nsec; i++)
            if (H->sec[i].off + H->sec[i].len > len)
                return rs_errf(err, errlen, "bad plan (truncated section '%s')", rs_plan_section_name(H->sec[i].id));
    }
    if (len > H->file_len)
        return rs_errf(err, errlen, "bad plan (%llu bytes after the end)", (unsigned long long)(len - H->file_len));
    return 0;
}

static int check_crc(const uint8_t *img, const secent *s, char *err, size_t errlen)
{
    if (rs_crc32c(0, img + s->off, (size_t)s->len) != s->crc)
        return rs_errf(err, errlen, "bad checksum in section '%s'", rs_plan_section_name(s->id));
    return 0;
}

/* ---- layout ---- */

typedef struct {
    const char *base; /* copy of the strings section in the layout's name blocks */
    uint64_t len;
} strings;

static const char *name_at(rs_cur *c, const strings *S)
{
    uint64_t off = rs_cur_uv(c);
    if (c->bad) return NULL;
    if (off >= S->len) {
        c->bad = 3;
        return NULL;
    }
    return S->base + off;
}

/* Each record takes at least `min` bytes: refuse counts the remaining bytes cannot hold. */
static uint32_t get_count(rs_cur *c, uint64_t min)
{
    uint64_t n = rs_cur_uv(c);
    if (!c->bad && (n > UINT32_MAX || n * min > rs_cur_left(c))) c->bad = 1;
    return c->bad ? 0 : (uint32_t)n;
}

static int dec_layout(rs_cur *c, const strings *S, uint32_t world, rs_layout *L, char *err, size_t errlen)
{
    const char *where = "section 'layout'";
    rs_topology *T = &L->topo;
    T->world = (uint32_t)get(c, RS_PLAN_MAX_WORLD);
    T->ndomains = (uint32_t)get(c, RS_PLAN_MAX_WORLD);
    T->domain_size = rs_cur_sv(c);
    uint64_t bits = rs_cur_u64(c);
    memcpy(&T->nic_gbps, &bits, 8);
    bits = rs_cur_u64(c);
    memcpy(&T->nvlink_gbps, &bits, 8);
    if (c->bad) return cur_fail(c, where, err, errlen);
    if (T->world != world) return rs_errf(err, errlen, "bad plan (layout world %u, header world %u)", T->world, world);
    if (T->world > rs_cur_left(c)) return rs_errf(err, errlen, "bad plan (%s ends inside a record)", where);
    T->domain_of = rs_xmalloc((size_t)T->world * sizeof *T->domain_of);
    for (uint32_t r = 0; r < T->world; r++) T->domain_of[r] = (uint32_t)get(c, UINT32_MAX);

    L->nmeshes = get_count(c, 3);
    if (c->bad) return cur_fail(c, where, err, errlen);
    if ((uint64_t)L->nmeshes * world > RS_PLAN_MAX_MESH_INDEX)
        return rs_errf(err, errlen, "bad plan (%u meshes x %u ranks over the limit)", L->nmeshes, world);
    L->meshes = rs_xcalloc(L->nmeshes, sizeof *L->meshes);
    for (uint32_t i = 0; i < L->nmeshes && !c->bad; i++) {
        rs_mesh *m = &L->meshes[i];
        m->name = name_at(c, S);
        m->naxes = (uint32_t)get(c, RS_MAX_DIMS);
        for (uint32_t a = 0; a < m->naxes && !c->bad; a++) {
            m->axis[a] = name_at(c, S);
            m->size[a] = rs_cur_sv(c);
        }
        m->nranks = get_count(c, 1);
        if (c->bad) break;
        m->ranks = rs_xmalloc(((size_t)m->nranks + 1) * sizeof *m->ranks);
        m->index_of = rs_xmalloc((size_t)world * sizeof *m->index_of);
        memset(m->index_of, 0xff, (size_t)world * sizeof *m->index_of);
        for (uint32_t k = 0; k < m->nranks && !c->bad; k++) {
            uint32_t r = (uint32_t)get(c, world - 1);
            if (c->bad) break;
            if (m->index_of[r] != -1)
                return rs_errf(err, errlen, "bad plan (mesh '%s' lists rank %u twice)", m->name ? m->name : "?", r);
            m->ranks[k] = (int32_t)r;
            m->index_of[r] = (int32_t)k;
        }
    }
    if (c->bad) return cur_fail(c, where, err, errlen);

    L->ntensors = get_count(c, 6);
    if (c->bad) return cur_fail(c, where, err, errlen);
    L->tensors = rs_xcalloc(L->ntensors, sizeof *L->tensors);
    for (uint32_t i = 0; i < L->ntensors && !c->bad; i++) {
        rs_tensor *t = &L->tensors[i];
        t->name = name_at(c, S);
        t->dtype = (rs_dtype)get(c, RS_DT_COUNT - 1);
        t->ndim = (uint32_t)get(c, RS_MAX_DIMS);
        for (uint32_t d = 0; d < t->ndim && !c->bad; d++) t->shape[d] = rs_cur_sv(c);
        t->piece_begin = (uint32_t)get(c, UINT32_MAX);
        t->nsrc = (uint32_t)get(c, UINT32_MAX);
        t->ndst = (uint32_t)get(c, UINT32_MAX);
    }
    L->nbuffers = get_count(c, 4);
    if (c->bad) return cur_fail(c, where, err, errlen);
    L->buffers = rs_xcalloc(L->nbuffers, sizeof *L->buffers);
    for (uint32_t i = 0; i < L->nbuffers && !c->bad; i++) {
        rs_buffer *b = &L->buffers[i];
        b->name = name_at(c, S);
        uint32_t sf = (uint32_t)get(c, RS_DST | RS_GROUP_MAX_DIMS << 1);
        b->side = (rs_side)(sf & 1);
        b->group = (uint8_t)(sf >> 1);
        b->dtype = (rs_dtype)get(c, RS_DT_COUNT - 1);
        b->ndim = (uint32_t)get(c, RS_MAX_DIMS);
        for (uint32_t d = 0; d < b->ndim && !c->bad; d++) b->shape[d] = rs_cur_sv(c);
    }
    L->npieces = get_count(c, 8);
    if (c->bad) return cur_fail(c, where, err, errlen);
    L->pieces = rs_xcalloc(L->npieces, sizeof *L->pieces);
    for (uint32_t i = 0; i < L->npieces && !c->bad; i++) {
        rs_piece *p = &L->pieces[i];
        p->tensor = (uint32_t)get(c, UINT32_MAX);
        p->mesh = (uint32_t)get(c, UINT32_MAX);
        p->buffer = (uint32_t)get(c, UINT32_MAX);
        p->side = (uint8_t)get(c, RS_DST);
        p->nplace = (uint8_t)get(c, UINT8_MAX);
        p->place = (uint32_t)get(c, UINT32_MAX);
        p->slice = get_opt(c);
        p->box = get_opt(c);
    }
    L->nplaces = get_count(c, 4);
    if (c->bad) return cur_fail(c, where, err, errlen);
    L->places = rs_xcalloc(L->nplaces, sizeof *L->places);
    for (uint32_t i = 0; i < L->nplaces && !c->bad; i++) {
        rs_place *q = &L->places[i];
        q->axis = (uint8_t)get(c, RS_MAX_DIMS - 1);
        q->kind = (uint8_t)get(c, RS_PLACE_PIN);
        q->dim = (uint8_t)get(c, RS_MAX_DIMS - 1);
        q->arg = rs_cur_sv(c);
    }
    L->ni64 = get_count(c, 1);
    if (c->bad) return cur_fail(c, where, err, errlen);
    L->i64 = rs_xcalloc(L->ni64, sizeof *L->i64);
    for (uint32_t i = 0; i < L->ni64 && !c->bad; i++) L->i64[i] = rs_cur_sv(c);
    if (c->bad) return cur_fail(c, where, err, errlen);
    if (c->p != c->end) return rs_errf(err, errlen, "bad plan (%s has bytes after its records)", where);
    return rs_plan_check_layout(L, err, errlen);
}

/* ---- one rank's program ---- */

typedef struct {
    uint64_t off, len, staging;
    uint32_t crc, nbindings, nsteps, nops, ndescs, nwaits;
} dirent_t;

static void read_dirent(const uint8_t *e, dirent_t *d)
{
    d->off = rs_rd64(e);
    d->len = rs_rd64(e + 8);
    d->staging = rs_rd64(e + 16);
    d->crc = rs_rd32(e + 24);
    d->nbindings = rs_rd32(e + 28);
    d->nsteps = rs_rd32(e + 32);
    d->nops = rs_rd32(e + 36);
    d->ndescs = rs_rd32(e + 40);
    d->nwaits = rs_rd32(e + 44);
}

/* The program's CRC was checked by the caller. */
static int dec_rank(const uint8_t *blob, const dirent_t *d, uint32_t rank, rs_rank_prog *g, char *err, size_t errlen)
{
    char where[64];
    snprintf(where, sizeof where, "program of rank %u", rank);
    /* Smallest encodings: binding 3 bytes, descriptor 4, step 3, op 3, wait 1. */
    uint64_t need = 3ull * d->nbindings + 4ull * d->ndescs + 3ull * d->nsteps + 3ull * d->nops + d->nwaits;
    if (need > d->len) return rs_errf(err, errlen, "bad plan (%s: counts larger than its bytes)", where);

    rs_cur cc = {blob, blob + d->len, 0}, *c = &cc;
    g->nbindings = d->nbindings;
    g->bindings = rs_xcalloc(g->nbindings, sizeof *g->bindings);
    for (uint32_t i = 0; i < g->nbindings && !c->bad; i++) {
        rs_binding *x = &g->bindings[i];
        x->buffer = (uint32_t)get(c, UINT32_MAX);
        x->ndim = (uint32_t)get(c, RS_MAX_DIMS);
        for (uint32_t k = 0; k < x->ndim && !c->bad; k++) x->shape[k] = rs_cur_sv(c);
        x->bytes = rs_cur_uv(c);
    }
    rs_prog_desc_reserve(g, d->ndescs, 6ull * d->ndescs); /* (2 dims each; more grows the pool) */
    for (uint32_t i = 0; i < d->ndescs && !c->bad; i++) {
        rs_desc x;
        memset(&x, 0, sizeof x);
        x.loc = get_opt(c);
        x.ndim = (uint32_t)get(c, RS_DESC_MAX_DIMS);
        x.offset = rs_cur_uv(c);
        for (uint32_t k = 0; k < x.ndim && !c->bad; k++) x.count[k] = rs_cur_uv(c);
        for (uint32_t k = 0; k + 1 < x.ndim && !c->bad; k++) x.stride[k] = rs_cur_uv(c);
        if (x.ndim) x.stride[x.ndim - 1] = 1;
        if (c->bad) break;
        if (g->dpool_n + 2 + 2 * x.ndim > UINT32_MAX)
            return rs_errf(err, errlen, "bad plan (%s: descriptors take more than 2^32 words)", where);
        rs_prog_desc_add(g, &x);
    }
    if (c->bad) return cur_fail(c, where, err, errlen);
    rs_prog_desc_trim(g);

    g->nsteps = d->nsteps;
    g->nops = d->nops;
    g->nwaits = d->nwaits;
    g->steps = rs_xcalloc(g->nsteps, sizeof *g->steps);
    g->ops = rs_xcalloc(g->nops, sizeof *g->ops);
    g->waits = rs_xcalloc(g->nwaits, sizeof *g->waits);
    uint32_t nop = 0, nwait = 0;
    uint64_t hint = 0;
    for (uint32_t s = 0; s < g->nsteps && !c->bad; s++) {
        rs_step *st = &g->steps[s];
        st->lane = rs_cur_u8(c);
        st->nwaits = (uint32_t)get(c, g->nwaits - nwait);
        st->wait_begin = nwait;
        for (uint32_t w = 0; w < st->nwaits && !c->bad; w++) {
            uint64_t back = get(c, s);
            if (back == 0 && !c->bad) c->bad = 3;
            g->waits[nwait++] = (uint32_t)(s - back);
        }
        st->nops = (uint32_t)get(c, g->nops - nop);
        st->op_begin = nop;
        for (uint32_t k = 0; k < st->nops && !c->bad; k++) {
            rs_op *o = &g->ops[nop++];
            o->code = rs_cur_u8(c);
            o->tensor = get_opt(c);
            if (o->code == RS_OP_SEND || o->code == RS_OP_RECV) {
                o->peer = (uint32_t)get(c, UINT32_MAX);
                o->loc = get_opt(c);
                o->off = rs_cur_uv(c);
                o->bytes = rs_cur_uv(c);
            } else if (rs_op_name(o->code)) {
                int64_t src = 0, dst = 0;
                if (rs_add_ovf((int64_t)hint, rs_cur_sv(c), &src) || src < 0 || src >= (int64_t)g->ndescs)
                    c->bad = c->bad ? c->bad : 3;
                if (c->bad || rs_add_ovf(src + 1, rs_cur_sv(c), &dst) || dst < 0 || dst >= (int64_t)g->ndescs)
                    c->bad = c->bad ? c->bad : 3;
                if (c->bad) break;
                o->src = (uint32_t)src;
                o->dst = (uint32_t)dst;
                rs_desc sd_;
                o->bytes = rs_desc_bytes(rs_prog_desc(g, (uint32_t)src, &sd_));
                hint = (uint64_t)(src > dst ? src : dst) + 1;
            } else {
                return rs_errf(err, errlen, "bad plan (%s, step %u: unknown opcode %u)", where, s, o->code);
            }
        }
    }
    if (c->bad) return cur_fail(c, where, err, errlen);
    if (nop != g->nops || nwait != g->nwaits)
        return rs_errf(err, errlen, "bad plan (%s: step counts differ from the directory)", where);
    if (c->p != c->end) return rs_errf(err, errlen, "bad plan (%s has bytes after its steps)", where);
    g->loaded = 1;
    return 0;
}

/* ---- whole file ---- */

/* The programs of ranks [r0, r1): each one's CRC against its directory entry, decoded, its structure
 * checked; stops at the first that fails (rc -1, err says why). */
typedef struct {
    const uint8_t *img;
    const secent *sr, *sp;
    const uint32_t *crc;
    rs_plan *P;
    uint32_t r0, r1;
    int rc;
    char err[512];
} dec_part;

static void dec_ranks(dec_part *q)
{
    q->rc = 0;
    for (uint32_t r = q->r0; r < q->r1; r++) {
        dirent_t d;
        read_dirent(q->img + q->sr->off + (size_t)r * RS_DIR_ENTRY_SIZE, &d);
        if (q->crc[r] != d.crc) {
            q->rc = rs_errf(q->err, sizeof q->err, "bad checksum in the program of rank %u", r);
            return;
        }
        if (dec_rank(q->img + q->sp->off + d.off, &d, r, &q->P->ranks[r], q->err, sizeof q->err) ||
            rs_plan_verify_rank(q->P, r, q->err, sizeof q->err)) {
            q->rc = -1;
            return;
        }
    }
}

static void *dec_ranks_thread(void *arg)
{
    dec_ranks(arg);
    return NULL;
}

/* Full loads of plans with at least this many program bytes decode on two threads. */
#define DEC_TWO_MIN ((uint64_t)4 << 20)

int rs_plan_decode(const uint8_t *img, size_t len, int rank, rs_plan *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    header H;
    if (!img) len = 0;
    if (read_header(img, len, &H, err, errlen)) return -1;
    if (rank >= 0 && (uint32_t)rank >= H.world)
        return rs_errf(err, errlen, "rank %d is outside the plan's world of %u ranks", rank, H.world);
    const secent *ss = &H.sec[H.idx[RS_SEC_STRINGS]], *sl = &H.sec[H.idx[RS_SEC_LAYOUT]];
    const secent *sr = &H.sec[H.idx[RS_SEC_RANKS]], *sp = &H.sec[H.idx[RS_SEC_PROGRAMS]];
    /* Shared tables are always checked; the programs section as a whole only in a full load (a
     * single-rank load checks its own program's CRC from the directory). */
    if (check_crc(img, ss, err, errlen) || check_crc(img, sl, err, errlen) || check_crc(img, sr, err, errlen))
        return -1;
    if (rank < 0) { /* the programs section's CRC is checked with the directory, below */
        for (uint32_t i = 0; i < H.nsec; i++)
            if (H.sec[i].id != RS_SEC_STRINGS && H.sec[i].id != RS_SEC_LAYOUT && H.sec[i].id != RS_SEC_RANKS &&
                H.sec[i].id != RS_SEC_PROGRAMS && check_crc(img, &H.sec[i], err, errlen))
                return -1;
    }

    rs_plan *P = out;
    P->plan_fp = H.plan_fp;
    P->source_fp = H.source_fp;
    P->staging_budget = H.staging;

    strings S = {NULL, ss->len};
    if (ss->len) {
        if (img[ss->off + ss->len - 1] != 0)
            return rs_errf(err, errlen, "bad plan (section 'strings' not NUL-terminated)");
        S.base = rs_layout_name(&P->layout, (const char *)img + ss->off, (size_t)ss->len - 1);
    }
    rs_cur lc = {img + sl->off, img + sl->off + sl->len, 0};
    if (dec_layout(&lc, &S, H.world, &P->layout, err, errlen)) goto bad;

    /* Directory: one fixed entry per rank; programs tile the programs section in rank order. */
    if (sr->len != (uint64_t)H.world * RS_DIR_ENTRY_SIZE) {
        rs_errf(err, errlen, "bad plan (section 'ranks' has %llu bytes for %u ranks)", (unsigned long long)sr->len,
             H.world);
        goto bad;
    }
    P->ranks = rs_xcalloc(H.world, sizeof *P->ranks);
    uint64_t at = 0;
    for (uint32_t r = 0; r < H.world; r++) {
        dirent_t d;
        read_dirent(img + sr->off + (size_t)r * RS_DIR_ENTRY_SIZE, &d);
        if (d.off != at || rs_uadd_ovf(at, d.len, &at) || at > sp->len) {
            rs_errf(err, errlen, "bad plan (program of rank %u outside section 'programs')", r);
            goto bad;
        }
        P->ranks[r].rank = r;
        P->ranks[r].staging_bytes = d.staging;
    }
    if (at != sp->len) {
        rs_errf(err, errlen, "bad plan (section 'programs' has bytes outside every program)");
        goto bad;
    }
    /* Checksums: a full load computes every program's CRC once and combines them into the section's;
     * a single-rank load checks its own program only. */
    uint32_t *crc = rs_xcalloc(H.world, sizeof *crc);
    if (rank < 0) {
        rs_crc_ops *ops = rs_xmalloc(sizeof *ops);
        rs_crc_ops_init(ops);
        uint32_t all = 0;
        for (uint32_t r = 0; r < H.world; r++) {
            dirent_t d;
            read_dirent(img + sr->off + (size_t)r * RS_DIR_ENTRY_SIZE, &d);
            crc[r] = rs_crc32c(0, img + sp->off + d.off, (size_t)d.len);
            all = rs_crc32c_combine(ops, all, crc[r], d.len);
        }
        free(ops);
        if (all != sp->crc) {
            free(crc);
            rs_errf(err, errlen, "bad checksum in section '%s'", rs_plan_section_name(RS_SEC_PROGRAMS));
            goto bad;
        }
    }
    {
        /* A full load decodes the ranks from the middle of the programs' bytes on a second thread; its
         * problem is reported only when the first half has none (the first in rank order, as on one). */
        dec_part a = {img, sr, sp, crc, P, 0, H.world, 0, {0}}, b;
        if (rank >= 0) {
            dirent_t d;
            read_dirent(img + sr->off + (size_t)rank * RS_DIR_ENTRY_SIZE, &d);
            crc[rank] = rs_crc32c(0, img + sp->off + d.off, (size_t)d.len);
            a.r0 = (uint32_t)rank;
            a.r1 = (uint32_t)rank + 1;
        }
        pthread_t th;
        int two = 0;
        if (rank < 0 && H.world > 1 && rs_threads(sp->len, DEC_TWO_MIN) > 1) {
            uint32_t h = 0;
            for (uint64_t half = 0; h < H.world && 2 * half < sp->len; h++) {
                dirent_t d;
                read_dirent(img + sr->off + (size_t)h * RS_DIR_ENTRY_SIZE, &d);
                half += d.len;
            }
            b = a;
            b.r0 = a.r1 = h;
            two = h < H.world && !rs_thread_start(&th, dec_ranks_thread, &b);
            if (!two) a.r1 = H.world;
        }
        dec_ranks(&a);
        if (two) pthread_join(th, NULL);
        free(crc);
        const dec_part *bad = a.rc ? &a : two && b.rc ? &b : NULL;
        if (bad) {
            snprintf(err, errlen, "%s", bad->err);
            goto bad;
        }
    }
    if (rank < 0) { /* every byte is checked by now; the fingerprint must be the content's */
        const uint8_t *secs[RS_SEC_MAX];
        for (uint32_t i = 0; i < H.nsec; i++) secs[i] = img + H.sec[i].off;
        if (rs_plan_content_fp(img, secs) != H.plan_fp) {
            rs_errf(err, errlen, "bad plan (fingerprint does not match the content)");
            goto bad;
        }
    }
    return 0;
bad:
    rs_plan_free(P);
    return -1;
}

int rs_plan_load_file(const char *path, int rank, rs_plan *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    /* O_NONBLOCK: a pipe with no writer would block the open; it is refused below like any other
     * file that is not a regular one (the flag changes nothing for a regular file, which is mapped) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return rs_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st)) {
        int e = errno;
        close(fd);
        return rs_errf(err, errlen, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return rs_errf(err, errlen, "%s: %s", path, S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
    }
    char why[512];
    int rc;
    if (st.st_size == 0) {
        rc = rs_plan_decode(NULL, 0, rank, out, why, sizeof why);
    } else {
        void *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (img == MAP_FAILED) {
            int e = errno;
            close(fd);
            return rs_errf(err, errlen, "%s: cannot map: %s", path, strerror(e));
        }
        rc = rs_plan_decode(img, (size_t)st.st_size, rank, out, why, sizeof why);
        munmap(img, (size_t)st.st_size);
    }
    close(fd);
    if (rc) return rs_errf(err, errlen, "%s: %s", path, why);
    return 0;
}
