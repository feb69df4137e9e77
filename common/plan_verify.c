/* plan_verify.c - structural checks that make a plan safe to execute: the layout's tables and
 * indices (rs_plan_check_layout) and one rank's program (rs_plan_verify_rank). Whole-plan checks
 * (matching, deadlock freedom, exactly-once coverage) live in plan_verify_all.c. */
#include "plan.h"
#include "plan_io.h"
#include "util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t errlen, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (err && errlen) snprintf(err, errlen, "bad plan (%s)", msg);
    return -1;
}

/* prod(shape[0..n)) * elem fits in int64 (and every extent is >= 0). */
static int shape_ok(const int64_t *shape, uint32_t n, int64_t elem, int64_t *total)
{
    int64_t t = elem;
    for (uint32_t d = 0; d < n; d++)
        if (shape[d] < 0 || rs_mul_ovf(t, shape[d], &t)) return 0;
    if (total) *total = t;
    return 1;
}

/* lo[n] then hi[n] at L->i64[at]: 0 <= lo <= hi <= shape. */
static int box_ok(const rs_layout *L, uint32_t at, uint32_t n, const int64_t *shape)
{
    if ((uint64_t)at + 2ull * n > L->ni64) return 0;
    for (uint32_t d = 0; d < n; d++) {
        int64_t lo = L->i64[at + d], hi = L->i64[at + n + d];
        if (lo < 0 || lo > hi || hi > shape[d]) return 0;
    }
    return 1;
}

int rs_plan_check_layout(const rs_layout *L, char *err, size_t errlen)
{
    const rs_topology *T = &L->topo;
    if (T->world == 0 || T->world > RS_PLAN_MAX_WORLD)
        return bad(err, errlen, "layout: world of %u ranks outside 1..%u", T->world, RS_PLAN_MAX_WORLD);
    if (!T->domain_of) return bad(err, errlen, "layout: no domain table");
    if (T->ndomains == 0 || T->ndomains > T->world)
        return bad(err, errlen, "layout: %u NVLink domains for %u ranks", T->ndomains, T->world);
    if (T->domain_size < 0) return bad(err, errlen, "layout: negative domain size");
    if (!isfinite(T->nic_gbps) || T->nic_gbps < 0 || !isfinite(T->nvlink_gbps) || T->nvlink_gbps < 0)
        return bad(err, errlen, "layout: bandwidth not a finite non-negative number");
    {
        uint8_t *used = rs_xcalloc(T->ndomains, 1);
        int rc = 0;
        for (uint32_t r = 0; r < T->world && !rc; r++) {
            uint32_t d = T->domain_of[r];
            if (d >= T->ndomains) rc = bad(err, errlen, "layout: rank %u in domain %u of %u", r, d, T->ndomains);
            else if (T->domain_size > 0 && (int64_t)d != (int64_t)r / T->domain_size)
                rc = bad(err, errlen, "layout: rank %u in domain %u, not rank / domain size", r, d);
            else used[d] = 1;
        }
        for (uint32_t d = 0; d < T->ndomains && !rc; d++)
            if (!used[d]) rc = bad(err, errlen, "layout: NVLink domain %u has no ranks", d);
        free(used);
        if (rc) return rc;
    }

    if ((uint64_t)L->nmeshes * T->world > RS_PLAN_MAX_MESH_INDEX)
        return bad(err, errlen, "layout: %u meshes x %u ranks over the limit", L->nmeshes, T->world);
    if ((L->nmeshes && !L->meshes) || (L->ntensors && !L->tensors) || (L->nbuffers && !L->buffers) ||
        (L->npieces && !L->pieces) || (L->nplaces && !L->places) || (L->ni64 && !L->i64))
        return bad(err, errlen, "layout: missing table");
    for (uint32_t i = 0; i < L->nmeshes; i++) {
        const rs_mesh *m = &L->meshes[i];
        if (!m->name) return bad(err, errlen, "layout: mesh %u has no name", i);
        if (m->naxes > RS_MAX_DIMS) return bad(err, errlen, "layout: mesh '%s' has %u axes", m->name, m->naxes);
        int64_t n = 1;
        for (uint32_t a = 0; a < m->naxes; a++) {
            if (!m->axis[a]) return bad(err, errlen, "layout: mesh '%s' axis %u has no name", m->name, a);
            if (m->size[a] < 1 || rs_mul_ovf(n, m->size[a], &n) || n > (int64_t)T->world)
                return bad(err, errlen, "layout: mesh '%s' axis sizes do not fit the world", m->name);
        }
        if ((uint64_t)n != m->nranks || !m->ranks || !m->index_of)
            return bad(err, errlen, "layout: mesh '%s' has %u ranks, its axes need %lld", m->name, m->nranks,
                       (long long)n);
        for (uint32_t r = 0; r < T->world; r++)
            if (m->index_of[r] != -1 && ((uint32_t)m->index_of[r] >= m->nranks ||
                                         m->ranks[m->index_of[r]] != (int32_t)r))
                return bad(err, errlen, "layout: mesh '%s' rank index table inconsistent", m->name);
        for (uint32_t k = 0; k < m->nranks; k++) {
            int32_t r = m->ranks[k];
            if (r < 0 || (uint32_t)r >= T->world)
                return bad(err, errlen, "layout: mesh '%s' rank %d outside the world", m->name, r);
            if (m->index_of[r] != (int32_t)k)
                return bad(err, errlen, "layout: mesh '%s' lists rank %d twice", m->name, r);
        }
    }

    uint64_t covered = 0;
    for (uint32_t i = 0; i < L->ntensors; i++) {
        const rs_tensor *t = &L->tensors[i];
        if (!t->name) return bad(err, errlen, "layout: tensor %u has no name", i);
        if ((unsigned)t->dtype >= RS_DT_COUNT) return bad(err, errlen, "layout: tensor '%s' bad dtype", t->name);
        if (t->ndim > RS_MAX_DIMS) return bad(err, errlen, "layout: tensor '%s' has %u dims", t->name, t->ndim);
        if (!shape_ok(t->shape, t->ndim, rs_dtype_size(t->dtype), NULL))
            return bad(err, errlen, "layout: tensor '%s' shape negative or too large", t->name);
        uint64_t np = (uint64_t)t->nsrc + t->ndst;
        if ((uint64_t)t->piece_begin + np > L->npieces)
            return bad(err, errlen, "layout: tensor '%s' pieces outside the piece table", t->name);
        for (uint64_t k = 0; k < np; k++) {
            const rs_piece *p = &L->pieces[t->piece_begin + k];
            if (p->tensor != i || p->side != (k < t->nsrc ? RS_SRC : RS_DST))
                return bad(err, errlen, "layout: tensor '%s' piece %llu not grouped with it", t->name,
                           (unsigned long long)k);
        }
        covered += np;
    }
    if (covered != L->npieces) return bad(err, errlen, "layout: pieces not grouped by tensor");

    for (uint32_t i = 0; i < L->nbuffers; i++) {
        const rs_buffer *b = &L->buffers[i];
        if (!b->name) return bad(err, errlen, "layout: buffer %u has no name", i);
        if (b->side != RS_SRC && b->side != RS_DST) return bad(err, errlen, "layout: buffer '%s' bad side", b->name);
        if ((unsigned)b->dtype >= RS_DT_COUNT) return bad(err, errlen, "layout: buffer '%s' bad dtype", b->name);
        if (b->ndim > RS_MAX_DIMS) return bad(err, errlen, "layout: buffer '%s' has %u dims", b->name, b->ndim);
        if (!shape_ok(b->shape, b->ndim, rs_dtype_size(b->dtype), NULL))
            return bad(err, errlen, "layout: buffer '%s' shape negative or too large", b->name);
        rs_marker mk[RS_GROUP_MAX_DIMS];
        if (b->group > RS_GROUP_MAX_DIMS || rs_group_markers(b->name, mk) != b->group)
            return bad(err, errlen, "layout: buffer '%s': a group's name holds one member marker per member dim, "
                       "another buffer's none", b->name);
        if (b->group && b->ndim && b->ndim < b->group)
            return bad(err, errlen, "layout: buffer group '%s' has fewer dims than member dims", b->name);
    }

    for (uint32_t i = 0; i < L->npieces; i++) {
        const rs_piece *p = &L->pieces[i];
        /* p->tensor and p->side were checked through the tensor table above. */
        const rs_tensor *t = &L->tensors[p->tensor];
        if (p->mesh >= L->nmeshes || p->buffer >= L->nbuffers)
            return bad(err, errlen, "layout: piece %u of '%s': mesh or buffer index out of range", i, t->name);
        const rs_mesh *m = &L->meshes[p->mesh];
        const rs_buffer *b = &L->buffers[p->buffer];
        if (b->side != p->side || b->dtype != t->dtype)
            return bad(err, errlen, "layout: piece %u of '%s': buffer '%s' side or dtype differs", i, t->name,
                       b->name);
        if ((uint64_t)p->place + p->nplace > L->nplaces)
            return bad(err, errlen, "layout: piece %u of '%s': placements out of range", i, t->name);
        unsigned seen = 0;
        for (uint32_t k = 0; k < p->nplace; k++) {
            const rs_place *q = &L->places[p->place + k];
            if (q->axis >= m->naxes || (seen >> q->axis & 1u))
                return bad(err, errlen, "layout: piece %u of '%s': bad placement axis", i, t->name);
            seen |= 1u << q->axis;
            if (q->kind == RS_PLACE_SHARD) {
                if (q->dim >= t->ndim || q->arg < RS_SHARD_BALANCED)
                    return bad(err, errlen, "layout: piece %u of '%s': bad shard", i, t->name);
            } else if (q->kind == RS_PLACE_PIN) {
                if (q->arg < 0 || q->arg >= m->size[q->axis])
                    return bad(err, errlen, "layout: piece %u of '%s': pin outside its axis", i, t->name);
            } else if (q->kind != RS_PLACE_REPLICATE) {
                return bad(err, errlen, "layout: piece %u of '%s': bad placement kind", i, t->name);
            }
        }
        if (p->slice != RS_NONE && !box_ok(L, p->slice, t->ndim, t->shape))
            return bad(err, errlen, "layout: piece %u of '%s': slice outside the tensor", i, t->name);
        if (p->box != RS_NONE && (b->ndim == 0 || !box_ok(L, p->box, b->ndim, b->shape)))
            return bad(err, errlen, "layout: piece %u of '%s': box outside buffer '%s'", i, t->name, b->name);
    }
    return 0;
}

/* ---- one rank ---- */

static uint64_t loc_size(const rs_rank_prog *g, uint32_t loc)
{
    return loc == RS_LOC_STAGING ? g->staging_bytes : g->bindings[loc].bytes;
}

static const char *loc_name(const rs_plan *P, const rs_rank_prog *g, uint32_t loc)
{
    return loc == RS_LOC_STAGING ? "staging" : P->layout.buffers[g->bindings[loc].buffer].name;
}

/* A descriptor must lie inside its location. One that is written (the destination of PACK, UNPACK and
 * COPY) must also never touch a byte twice: each outer stride at least the span of the dims inside it.
 * A source descriptor may read a byte twice (harmless), which lets one op read a column-sharded block for
 * several receivers. Returns a reason or NULL. */
static const char *desc_problem(const rs_rank_prog *g, const rs_desc *d, int may_overlap)
{
    if (d->loc != RS_LOC_STAGING && d->loc >= g->nbindings) return "location is not a binding";
    if (d->ndim < 1 || d->ndim > RS_DESC_MAX_DIMS) return "descriptor dims outside 1..8";
    if (d->stride[d->ndim - 1] != 1) return "innermost stride is not 1";
    uint64_t span = d->count[d->ndim - 1], t, u;
    int empty = span == 0;
    for (int i = (int)d->ndim - 2; i >= 0; i--) {
        if (d->count[i] == 0) empty = 1;
        if (d->count[i] > 1) {
            if (!may_overlap && d->stride[i] < span) return "descriptor dims overlap";
            if (rs_umul_ovf(d->count[i] - 1, d->stride[i], &t) || rs_uadd_ovf(t, span, &u))
                return "descriptor overflows";
            span = u;
        }
    }
    uint64_t end;
    if (empty) span = 0;
    if (rs_uadd_ovf(d->offset, span, &end) || end > loc_size(g, d->loc)) return "descriptor outside its location";
    return NULL;
}

int rs_plan_verify_rank(const rs_plan *P, uint32_t rank, char *err, size_t errlen)
{
    return rs_plan_verify_rank_unpacked(P, rank, NULL, err, errlen);
}

int rs_plan_verify_rank_unpacked(const rs_plan *P, uint32_t rank, const rs_desc *dt, char *err, size_t errlen)
{
    const rs_layout *L = &P->layout;
    const rs_topology *T = &L->topo;
    if (!P->ranks || rank >= T->world) return bad(err, errlen, "rank %u outside the world", rank);
    const rs_rank_prog *g = &P->ranks[rank];
    if (g->rank != rank) return bad(err, errlen, "rank %u: program says rank %u", rank, g->rank);
    if ((g->nbindings && !g->bindings) || (g->nsteps && !g->steps) || (g->nops && !g->ops) ||
        (g->ndescs && (!g->dpool || !g->doff)) || (g->nwaits && !g->waits))
        return bad(err, errlen, "rank %u: missing table", rank);
    /* The planner keeps every rank's staging within the budget it was given (docs/planner.md): a larger
     * claim is damage, refused here rather than allocated by a worker or the whole-plan verifier. */
    if (P->staging_budget && g->staging_bytes > P->staging_budget)
        return bad(err, errlen, "rank %u: %llu staging bytes, over the plan's budget of %llu", rank,
                   (unsigned long long)g->staging_bytes, (unsigned long long)P->staging_budget);

    /* Bindings: one per buffer, size = shape x dtype; explicit buffers keep their declared shape. */
    uint8_t *seen = rs_xcalloc(L->nbuffers / 8 + 1, 1);
    int rc = 0;
    for (uint32_t i = 0; i < g->nbindings && !rc; i++) {
        const rs_binding *x = &g->bindings[i];
        if (x->buffer >= L->nbuffers) {
            rc = bad(err, errlen, "rank %u: binding %u: buffer index out of range", rank, i);
            break;
        }
        const rs_buffer *b = &L->buffers[x->buffer];
        int64_t total;
        if (seen[x->buffer / 8] >> (x->buffer % 8) & 1)
            rc = bad(err, errlen, "rank %u: buffer '%s' bound twice", rank, b->name);
        else if (x->ndim > RS_MAX_DIMS || !shape_ok(x->shape, x->ndim, rs_dtype_size(b->dtype), &total) ||
                 (uint64_t)total != x->bytes)
            rc = bad(err, errlen, "rank %u: binding of '%s': byte size does not match its shape", rank, b->name);
        else if (b->ndim && (x->ndim != b->ndim || memcmp(x->shape, b->shape, b->ndim * sizeof b->shape[0])))
            rc = bad(err, errlen, "rank %u: binding of '%s': shape differs from the buffer's", rank, b->name);
        else if (b->group && x->ndim == 0)
            rc = bad(err, errlen, "rank %u: binding of group '%s' has no member dimension", rank, b->name);
        else if (b->group && x->ndim < b->group)
            rc = bad(err, errlen, "rank %u: binding of group '%s' has fewer dims than member dims", rank, b->name);
        seen[x->buffer / 8] |= (uint8_t)(1u << (x->buffer % 8));
    }
    free(seen);
    if (rc) return rc;
    /* Member bytes of each binding on a group (0: a plain binding): its ops must cut at member bounds. */
    uint64_t *mbytes = NULL, members = 0;
    for (uint32_t i = 0; i < g->nbindings; i++)
        if (L->buffers[g->bindings[i].buffer].group) {
            if (!mbytes) mbytes = rs_xcalloc(g->nbindings, sizeof *mbytes);
            mbytes[i] = rs_binding_member_bytes(L, &g->bindings[i]);
            members += rs_binding_members(L, &g->bindings[i]);
            const char *why = !mbytes[i] && g->bindings[i].bytes ? "has no members"
                              : members > RS_PLAN_MAX_MEMBERS     ? "takes the rank over 2^20 members of groups"
                                                                  : NULL;
            if (why) {
                free(mbytes);
                return bad(err, errlen, "rank %u: binding of group '%s' %s", rank,
                           L->buffers[g->bindings[i].buffer].name, why);
            }
        }
#define MEMBER_BYTES(loc) (mbytes && (loc) != RS_LOC_STAGING ? mbytes[loc] : 0)

    /* Descriptors are checked where an op first uses them (one pass over memory instead of two), the
     * unused ones at the end. used[] has two bits per descriptor: checked as a source (may overlap),
     * checked as a destination (must not); a destination check also satisfies a source use. */
    uint64_t *used = rs_xcalloc(g->ndescs / 32 + 1, sizeof *used);
#define DESC_CHECK(i, d, written)                                                                  \
    do {                                                                                           \
        uint32_t i_ = (i);                                                                         \
        uint64_t bits_ = used[i_ / 32] >> (2 * (i_ % 32)) & 3;                                     \
        if (!(bits_ & 2) && !(!(written) && bits_)) {                                              \
            const char *why_ = desc_problem(g, (d), !(written));                                   \
            if (why_) {                                                                            \
                free(used);                                                                        \
                free(mbytes);                                                                      \
                return bad(err, errlen, "rank %u: descriptor %u: %s", rank, i_, why_);             \
            }                                                                                      \
            used[i_ / 32] |= (uint64_t)((written) ? 3 : 1) << (2 * (i_ % 32));                    \
        }                                                                                          \
    } while (0)

#define RET_BAD(...)                                                                               \
    do {                                                                                           \
        free(used);                                                                                \
        free(mbytes);                                                                              \
        return bad(err, errlen, __VA_ARGS__);                                                      \
    } while (0)
#define RET_OPBAD(...)                                                                             \
    do {                                                                                           \
        free(used);                                                                                \
        free(mbytes);                                                                              \
        return OPBAD(__VA_ARGS__);                                                                 \
    } while (0)
    uint64_t next_op = 0, next_wait = 0;
    for (uint32_t s = 0; s < g->nsteps; s++) {
        const rs_step *st = &g->steps[s];
        if (st->lane >= RS_NLANES) RET_BAD("rank %u, step %u: bad lane %u", rank, s, st->lane);
        if (st->op_begin != next_op || (uint64_t)st->op_begin + st->nops > g->nops)
            RET_BAD("rank %u, step %u: ops not in program order", rank, s);
        if (st->wait_begin != next_wait || (uint64_t)st->wait_begin + st->nwaits > g->nwaits)
            RET_BAD("rank %u, step %u: waits not in program order", rank, s);
        next_op += st->nops;
        next_wait += st->nwaits;
        for (uint32_t w = 0; w < st->nwaits; w++) {
            uint32_t t = g->waits[st->wait_begin + w];
            if (t >= s) RET_BAD("rank %u, step %u: waits for step %u, not an earlier one", rank, s, t);
            if (g->steps[t].lane == st->lane)
                RET_BAD("rank %u, step %u: waits for step %u on its own lane", rank, s, t);
        }
        for (uint32_t k = 0; k < st->nops; k++) {
            uint32_t oi = st->op_begin + k;
            const rs_op *o = &g->ops[oi];
            const char *name = rs_op_name(o->code);
#define OPBAD(...) bad(err, errlen, "rank %u, step %u, op %u %s: " __VA_ARGS__)
            if (!name) RET_BAD("rank %u, step %u, op %u: unknown opcode %u", rank, s, oi, o->code);
            if (o->tensor != RS_NONE && o->tensor >= L->ntensors)
                RET_OPBAD("tensor index out of range", rank, s, oi, name);
            switch (o->code) {
            case RS_OP_SEND:
            case RS_OP_RECV: {
                uint64_t end;
                if (o->peer >= T->world)
                    RET_OPBAD("peer %u outside the world (%u ranks)", rank, s, oi, name, o->peer, T->world);
                if (o->peer == rank) RET_OPBAD("peer is the rank itself", rank, s, oi, name);
                if (st->lane == RS_LANE_NVL && T->domain_of[o->peer] != T->domain_of[rank])
                    RET_OPBAD("NVLink peer %u outside the rank's domain", rank, s, oi, name, o->peer);
                if (o->loc != RS_LOC_STAGING && o->loc >= g->nbindings)
                    RET_OPBAD("location is not a binding", rank, s, oi, name);
                if (rs_uadd_ovf(o->off, o->bytes, &end) || end > loc_size(g, o->loc))
                    RET_OPBAD("bytes outside %s", rank, s, oi, name, loc_name(P, g, o->loc));
                uint64_t m = MEMBER_BYTES(o->loc);
                if (m && o->bytes && o->off / m != (end - 1) / m)
                    RET_OPBAD("bytes cross a member boundary of group '%s'", rank, s, oi, name, loc_name(P, g, o->loc));
                if (o->code == RS_OP_RECV && o->loc != RS_LOC_STAGING &&
                    L->buffers[g->bindings[o->loc].buffer].side != RS_DST)
                    RET_OPBAD("writes into source buffer '%s'", rank, s, oi, name, loc_name(P, g, o->loc));
                break;
            }
            case RS_OP_PACK:
            case RS_OP_UNPACK:
            case RS_OP_COPY: {
                if (o->src >= g->ndescs || o->dst >= g->ndescs)
                    RET_OPBAD("descriptor index out of range", rank, s, oi, name);
                rs_desc ab_[2];
                const rs_desc *a = rs_prog_desc_from(dt, g, o->src, &ab_[0]), *b = rs_prog_desc_from(dt, g, o->dst, &ab_[1]);
                DESC_CHECK(o->src, a, 0);
                DESC_CHECK(o->dst, b, 1);
                int want_a_staging = o->code == RS_OP_UNPACK, want_b_staging = o->code == RS_OP_PACK;
                if ((a->loc == RS_LOC_STAGING) != want_a_staging || (b->loc == RS_LOC_STAGING) != want_b_staging)
                    RET_OPBAD("source or destination in the wrong place", rank, s, oi, name);
                if (b->loc != RS_LOC_STAGING && L->buffers[g->bindings[b->loc].buffer].side != RS_DST)
                    RET_OPBAD("writes into source buffer '%s'", rank, s, oi, name, loc_name(P, g, b->loc));
                uint64_t na = rs_desc_bytes(a), nb = rs_desc_bytes(b);
                if (na != nb || na != o->bytes || na == UINT64_MAX)
                    RET_OPBAD("source, destination and op byte counts differ", rank, s, oi, name);
                uint64_t ma = MEMBER_BYTES(a->loc), mb = MEMBER_BYTES(b->loc);
                if ((ma || mb) && !rs_op_group_chunk(a, ma, b, mb))
                    RET_OPBAD("does not split into pieces inside one member of group '%s'", rank, s, oi, name,
                              loc_name(P, g, ma ? a->loc : b->loc));
                break;
            }
            default:
                RET_OPBAD("opcode not valid here", rank, s, oi, name);
            }
#undef OPBAD
        }
    }
    for (uint32_t i = 0; i < g->ndescs; i++) { /* the ones no op uses */
        rs_desc db_;
        if (!(used[i / 32] >> (2 * (i % 32)) & 3)) DESC_CHECK(i, rs_prog_desc_from(dt, g, i, &db_), 0);
    }
    free(used);
    free(mbytes);
#undef MEMBER_BYTES
#undef DESC_CHECK
#undef RET_BAD
#undef RET_OPBAD
    if (next_op != g->nops) return bad(err, errlen, "rank %u: ops outside any step", rank);
    if (next_wait != g->nwaits) return bad(err, errlen, "rank %u: waits outside any step", rank);
    return 0;
}
