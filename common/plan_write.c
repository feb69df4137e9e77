/* plan_write.c - encodes an rs_plan into plan.bin (docs/format.md), field by field, little-endian,
 * deterministically; writes it with rs_write_file (atomically: temporary file, fsync, rename). */
#define _GNU_SOURCE
#include "plan.h"
#include "plan_io.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef rs_vec(uint8_t) bytes_t;

static void put(bytes_t *b, const void *p, size_t n)
{
    rs_vec_reserve(b, n);
    memcpy(b->v + b->n, p, n);
    b->n += n;
}
static inline void put_u8(bytes_t *b, uint8_t v)
{
    rs_vec_reserve(b, 1);
    b->v[b->n++] = v;
}
static inline void put_uv(bytes_t *b, uint64_t v)
{
    rs_vec_reserve(b, 10);
    /* through a local pointer and count: a byte stored through b->v may alias b->n, which the compiler
     * then reloads and stores again for every byte */
    uint8_t *p = b->v + b->n;
    size_t k = 0;
    while (v >= 0x80) {
        p[k++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[k++] = (uint8_t)v;
    b->n += k;
}
static inline void put_sv(bytes_t *b, int64_t v) { put_uv(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63)); }
static void put_u64(bytes_t *b, uint64_t v)
{
    uint8_t t[8];
    rs_le64(t, v);
    put(b, t, 8);
}
/* Index that may be RS_NONE (or RS_LOC_STAGING): stored as 0, others as index + 1. */
static inline void put_opt(bytes_t *b, uint32_t v) { put_uv(b, v == UINT32_MAX ? 0 : (uint64_t)v + 1); }

/* ---- string table: each distinct name once, in order of first use ---- */
typedef struct {
    bytes_t blob;
    uint32_t *slot; /* open addressing: offset + 1, 0 = empty */
    size_t cap, n;
} strtab;

static uint32_t str_add(strtab *t, const char *s)
{
    size_t len = strlen(s);
    if (2 * (t->n + 1) > t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 1024;
        uint32_t *ns = rs_xcalloc(nc, sizeof *ns);
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slot[i]) continue;
            const char *k = (const char *)t->blob.v + t->slot[i] - 1;
            size_t j = rs_hash64(k, strlen(k), 0) & (nc - 1);
            while (ns[j]) j = (j + 1) & (nc - 1);
            ns[j] = t->slot[i];
        }
        free(t->slot);
        t->slot = ns;
        t->cap = nc;
    }
    size_t j = rs_hash64(s, len, 0) & (t->cap - 1);
    while (t->slot[j]) {
        const char *k = (const char *)t->blob.v + t->slot[j] - 1;
        if (!strcmp(k, s)) return t->slot[j] - 1;
        j = (j + 1) & (t->cap - 1);
    }
    if (t->blob.n + len + 1 >= UINT32_MAX) rs_die("plan string table over 4 GiB");
    uint32_t off = (uint32_t)t->blob.n;
    put(&t->blob, s, len + 1);
    t->slot[j] = off + 1;
    t->n++;
    return off;
}

/* ---- sections ---- */
static void enc_layout(const rs_layout *L, strtab *st, bytes_t *b)
{
    const rs_topology *T = &L->topo;
    uint64_t bits;
    put_uv(b, T->world);
    put_uv(b, T->ndomains);
    put_sv(b, T->domain_size);
    memcpy(&bits, &T->nic_gbps, 8);
    put_u64(b, bits);
    memcpy(&bits, &T->nvlink_gbps, 8);
    put_u64(b, bits);
    for (uint32_t r = 0; r < T->world; r++) put_uv(b, T->domain_of[r]);

    put_uv(b, L->nmeshes);
    for (uint32_t i = 0; i < L->nmeshes; i++) {
        const rs_mesh *m = &L->meshes[i];
        put_uv(b, str_add(st, m->name));
        put_uv(b, m->naxes);
        for (uint32_t a = 0; a < m->naxes; a++) {
            put_uv(b, str_add(st, m->axis[a]));
            put_sv(b, m->size[a]);
        }
        put_uv(b, m->nranks);
        for (uint32_t k = 0; k < m->nranks; k++) put_uv(b, (uint32_t)m->ranks[k]);
    }
    put_uv(b, L->ntensors);
    for (uint32_t i = 0; i < L->ntensors; i++) {
        const rs_tensor *t = &L->tensors[i];
        put_uv(b, str_add(st, t->name));
        put_uv(b, (uint32_t)t->dtype);
        put_uv(b, t->ndim);
        for (uint32_t d = 0; d < t->ndim; d++) put_sv(b, t->shape[d]);
        put_uv(b, t->piece_begin);
        put_uv(b, t->nsrc);
        put_uv(b, t->ndst);
    }
    put_uv(b, L->nbuffers);
    for (uint32_t i = 0; i < L->nbuffers; i++) {
        const rs_buffer *u = &L->buffers[i];
        put_uv(b, str_add(st, u->name));
        put_uv(b, (uint32_t)u->side | (uint32_t)u->group << 1); /* bits 1-2: member dims of a group (1.1, 2: 1.3) */
        put_uv(b, (uint32_t)u->dtype);
        put_uv(b, u->ndim);
        for (uint32_t d = 0; d < u->ndim; d++) put_sv(b, u->shape[d]);
    }
    put_uv(b, L->npieces);
    for (uint32_t i = 0; i < L->npieces; i++) {
        const rs_piece *p = &L->pieces[i];
        put_uv(b, p->tensor);
        put_uv(b, p->mesh);
        put_uv(b, p->buffer);
        put_uv(b, p->side);
        put_uv(b, p->nplace);
        put_uv(b, p->place);
        put_opt(b, p->slice);
        put_opt(b, p->box);
    }
    put_uv(b, L->nplaces);
    for (uint32_t i = 0; i < L->nplaces; i++) {
        const rs_place *q = &L->places[i];
        put_uv(b, q->axis);
        put_uv(b, q->kind);
        put_uv(b, q->dim);
        put_sv(b, q->arg);
    }
    put_uv(b, L->ni64);
    for (uint32_t i = 0; i < L->ni64; i++) put_sv(b, L->i64[i]);
}

/* The program record is written through a bare pointer into room reserved once per rank (the reserve
 * and count update of put_uv per field were a third of the writer's instructions). */
#define UV_MAX 10 /* bytes of the longest LEB128 u64 */
static inline uint8_t *uv_at(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}
static inline uint8_t *sv_at(uint8_t *p, int64_t v) { return uv_at(p, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63)); }
static inline uint8_t *opt_at(uint8_t *p, uint32_t v) { return uv_at(p, v == UINT32_MAX ? 0 : (uint64_t)v + 1); }

/* Descriptor i of g, from its packed words (common/plan.h: loc | ndim << 32, offset, then count and stride
 * per dim), without unpacking it into an rs_desc first (a clear and a copy of 144 bytes per descriptor). */
static uint8_t *enc_desc(uint8_t *p, const rs_rank_prog *g, uint32_t i)
{
    const uint64_t *w = g->dpool + g->doff[i];
    uint32_t nd = (uint32_t)(w[0] >> 32);
    p = opt_at(p, (uint32_t)w[0]);
    p = uv_at(p, nd);
    p = uv_at(p, w[1]);
    for (uint32_t k = 0; k < nd; k++) p = uv_at(p, w[2 + 2 * k]);
    for (uint32_t k = 0; k + 1 < nd; k++) p = uv_at(p, w[3 + 2 * k]); /* the last stride is 1 */
    return p;
}

/* One rank's program record (its bindings, descriptors and steps); counts go to the directory. */
static void enc_rank(const rs_rank_prog *g, bytes_t *b)
{
    /* at most: a binding 2 + ndim + 1 numbers, a descriptor 3 + 2 x 8, a step a byte and 2 + nwaits
     * numbers, an op a byte and 4 numbers */
    size_t room = (size_t)g->nbindings * (3 + RS_MAX_DIMS) * UV_MAX + (size_t)g->ndescs * (3 + 2 * RS_DESC_MAX_DIMS) * UV_MAX +
                  (size_t)g->nsteps * (1 + 2 * UV_MAX) + (size_t)g->nwaits * UV_MAX + (size_t)g->nops * (1 + 4 * UV_MAX);
    rs_vec_reserve(b, room);
    uint8_t *p = b->v + b->n, *p0 = p;
    for (uint32_t i = 0; i < g->nbindings; i++) {
        const rs_binding *x = &g->bindings[i];
        p = uv_at(p, x->buffer);
        p = uv_at(p, x->ndim);
        for (uint32_t d = 0; d < x->ndim; d++) p = sv_at(p, x->shape[d]);
        p = uv_at(p, x->bytes);
    }
    for (uint32_t i = 0; i < g->ndescs; i++) p = enc_desc(p, g, i);
    uint32_t hint = 0; /* descriptor indices are stored relative to the next unused one */
    for (uint32_t s = 0; s < g->nsteps; s++) {
        const rs_step *st = &g->steps[s];
        *p++ = st->lane;
        p = uv_at(p, st->nwaits);
        for (uint32_t w = 0; w < st->nwaits; w++) p = uv_at(p, s - g->waits[st->wait_begin + w]);
        p = uv_at(p, st->nops);
        for (uint32_t k = 0; k < st->nops; k++) {
            const rs_op *o = &g->ops[st->op_begin + k];
            *p++ = o->code;
            p = opt_at(p, o->tensor);
            if (o->code == RS_OP_SEND || o->code == RS_OP_RECV) {
                p = uv_at(p, o->peer);
                p = opt_at(p, o->loc);
                p = uv_at(p, o->off);
                p = uv_at(p, o->bytes);
            } else {
                p = sv_at(p, (int64_t)o->src - (int64_t)hint);
                p = sv_at(p, (int64_t)o->dst - ((int64_t)o->src + 1));
                hint = (o->src > o->dst ? o->src : o->dst) + 1;
            }
        }
    }
    rs_assert((size_t)(p - p0) <= room);
    b->n += (size_t)(p - p0);
}

typedef struct {
    uint8_t head[RS_HDR_SIZE_1_0 + RS_SEC_COUNT_1_0 * RS_SEC_ENTRY_SIZE];
    bytes_t sec[RS_SEC_COUNT_1_0];
    uint64_t total;
} encoded;

static void enc_free(encoded *E)
{
    for (int i = 0; i < RS_SEC_COUNT_1_0; i++) rs_vec_free(&E->sec[i]);
}

/* checked: every rank's structure is (or is being) checked by the caller (else it is checked here) */
static int encode(rs_plan *P, encoded *E, int checked, char *err, size_t errlen)
{
    const rs_layout *L = &P->layout;
    memset(E, 0, sizeof *E);
    if (!P->ranks || L->topo.world == 0) return rs_errf(err, errlen, "cannot encode: plan has no ranks");
    if (rs_plan_check_layout(L, err, errlen)) return -1;
    /* A plan decoded for one rank cannot be re-encoded (the planner may leave `loaded` all zero). */
    uint32_t nloaded = 0;
    for (uint32_t r = 0; r < L->topo.world; r++) nloaded += P->ranks[r].loaded != 0;
    if (nloaded && nloaded < L->topo.world)
        return rs_errf(err, errlen, "cannot encode: plan was loaded for some ranks only");
    for (uint32_t r = 0; r < L->topo.world && !checked; r++)
        if (rs_plan_verify_rank(P, r, err, errlen)) return -1;

    strtab st = {0};
    bytes_t *strings = &E->sec[0], *lay = &E->sec[1], *dir = &E->sec[2], *prog = &E->sec[3];
    enc_layout(L, &st, lay);
    *strings = st.blob;
    free(st.slot);

    rs_vec_reserve(dir, (size_t)L->topo.world * RS_DIR_ENTRY_SIZE);
    size_t guess = 0; /* a rough size of the programs saves most regrowth of the buffer */
    for (uint32_t r = 0; r < L->topo.world; r++) {
        const rs_rank_prog *g = &P->ranks[r];
        guess += (size_t)g->nops * 8 + (size_t)g->ndescs * 10 + (size_t)g->nbindings * 12 + (size_t)g->nsteps * 4;
    }
    rs_vec_reserve(prog, guess);
    rs_crc_ops *ops = rs_xmalloc(sizeof *ops);
    rs_crc_ops_init(ops);
    uint32_t prog_crc = 0;
    for (uint32_t r = 0; r < L->topo.world; r++) {
        const rs_rank_prog *g = &P->ranks[r];
        size_t begin = prog->n;
        enc_rank(g, prog);
        uint8_t *e = dir->v + dir->n;
        rs_le64(e + 0, begin);
        rs_le64(e + 8, prog->n - begin);
        rs_le64(e + 16, g->staging_bytes);
        uint32_t crc = prog->n > begin ? rs_crc32c(0, prog->v + begin, prog->n - begin) : 0; /* v may be NULL */
        prog_crc = rs_crc32c_combine(ops, prog_crc, crc, prog->n - begin);
        rs_le32(e + 24, crc);
        rs_le32(e + 28, g->nbindings);
        rs_le32(e + 32, g->nsteps);
        rs_le32(e + 36, g->nops);
        rs_le32(e + 40, g->ndescs);
        rs_le32(e + 44, g->nwaits);
        dir->n += RS_DIR_ENTRY_SIZE;
    }

    uint8_t *h = E->head;
    memset(h, 0, sizeof E->head);
    memcpy(h + RS_HDR_MAGIC, RS_PLAN_MAGIC, RS_PLAN_MAGIC_LEN);
    rs_le16(h + RS_HDR_MAJOR, RS_PLAN_MAJOR);
    /* The minor version only says which additions the plan uses (1.1 buffer groups, 1.2 balanced shards): a
     * plan without them stays readable by older readers of the same major, byte for byte as before. */
    rs_le16(h + RS_HDR_MINOR, (uint16_t)rs_plan_layout_minor(L));
    rs_le32(h + RS_HDR_LEN, RS_HDR_SIZE_1_0);
    rs_le32(h + RS_HDR_NSECTIONS, RS_SEC_COUNT_1_0);
    rs_le32(h + RS_HDR_WORLD, L->topo.world);
    rs_le64(h + RS_HDR_SOURCE_FP, P->source_fp);
    rs_le64(h + RS_HDR_STAGING, P->staging_budget);
    uint64_t off = sizeof E->head;
    for (int i = 0; i < RS_SEC_COUNT_1_0; i++) {
        uint8_t *e = h + RS_HDR_SIZE_1_0 + i * RS_SEC_ENTRY_SIZE;
        rs_le32(e + 0, (uint32_t)(i + 1));
        rs_le64(e + 8, off);
        rs_le64(e + 16, E->sec[i].n);
        rs_le32(e + 24, i + 1 == RS_SEC_PROGRAMS ? prog_crc : rs_crc32c(0, E->sec[i].v, E->sec[i].n));
        off += E->sec[i].n;
    }
    E->total = off;
    free(ops);
    rs_le64(h + RS_HDR_FILE_LEN, off);
    const uint8_t *secs[RS_SEC_COUNT_1_0];
    for (int i = 0; i < RS_SEC_COUNT_1_0; i++) secs[i] = E->sec[i].v;
    P->plan_fp = rs_plan_content_fp(h, secs);
    rs_le64(h + RS_HDR_PLAN_FP, P->plan_fp);
    rs_le32(h + RS_HDR_CRC, rs_plan_header_crc(h, sizeof E->head));
    return 0;
}

int rs_plan_encode(rs_plan *P, uint8_t **out, size_t *outlen, char *err, size_t errlen)
{
    encoded E;
    *out = NULL;
    *outlen = 0;
    if (encode(P, &E, P->verified, err, errlen)) {
        enc_free(&E);
        return -1;
    }
    uint8_t *img = rs_xmalloc(E.total);
    size_t n = sizeof E.head;
    memcpy(img, E.head, n);
    for (int i = 0; i < RS_SEC_COUNT_1_0; i++) {
        if (E.sec[i].n) memcpy(img + n, E.sec[i].v, E.sec[i].n);
        n += E.sec[i].n;
        rs_vec_free(&E.sec[i]);
    }
    *out = img;
    *outlen = n;
    return 0;
}

static int write_file(rs_plan *P, const char *path, int checked, int (*gate)(void *), void *arg, char *err,
                      size_t errlen)
{
    encoded E;
    if (encode(P, &E, checked, err, errlen)) {
        enc_free(&E);
        if (err && errlen) {
            char *why = rs_xstrdup(err); /* every error names the file first, as the loader's do */
            rs_errf(err, errlen, "%s: %s", path, why);
            free(why);
        }
        return -1;
    }
    rs_wpart parts[1 + RS_SEC_COUNT_1_0];
    parts[0] = (rs_wpart){E.head, sizeof E.head};
    for (int i = 0; i < RS_SEC_COUNT_1_0; i++) parts[1 + i] = (rs_wpart){E.sec[i].v, E.sec[i].n};
    int rc = rs_write_file_gated(path, parts, 1 + RS_SEC_COUNT_1_0, gate, arg, err, errlen);
    enc_free(&E);
    return rc;
}

int rs_plan_write_file(rs_plan *P, const char *path, char *err, size_t errlen)
{
    return write_file(P, path, P->verified, NULL, NULL, err, errlen);
}

int rs_plan_write_file_gated(rs_plan *P, const char *path, int (*gate)(void *), void *arg, char *err, size_t errlen)
{
    return write_file(P, path, 1, gate, arg, err, errlen);
}
