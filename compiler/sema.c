/* sema.c - elaboration and checks: runs the layout program (consts, loops, ifs, includes), builds
 * the rs_layout (topology, meshes, tensors, buffers, pieces) and checks it: names, bounds, buffer
 * consistency, box sizes per rank, source coverage of every destination, overlaps in buffers. */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "plan.h"
#include "util.h"

/* ---------------------------------------------------------------- string -> index hash map */
typedef struct {
    uint64_t h;
    const char *k; /* must outlive the map */
    uint32_t len, val;
} smap_ent;

typedef struct {
    smap_ent *e;
    uint32_t cap, n;
} smap;

static uint32_t smap_get(const smap *m, const char *k, uint32_t len, uint64_t h)
{
    if (!m->cap) return RS_NONE;
    for (uint32_t i = (uint32_t)h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        const smap_ent *e = &m->e[i];
        if (!e->k) return RS_NONE;
        if (e->h == h && e->len == len && memcmp(e->k, k, len) == 0) return e->val;
    }
}

static void smap_put(smap *m, const char *k, uint32_t len, uint64_t h, uint32_t val)
{
    if ((m->n + 1) * 2 > m->cap) {
        uint32_t nc = m->cap ? m->cap * 2 : 1024;
        smap_ent *ne = rs_xcalloc(nc, sizeof *ne);
        for (uint32_t i = 0; i < m->cap; i++) {
            if (!m->e[i].k) continue;
            uint32_t j = (uint32_t)m->e[i].h & (nc - 1);
            while (ne[j].k) j = (j + 1) & (nc - 1);
            ne[j] = m->e[i];
        }
        free(m->e);
        m->e = ne;
        m->cap = nc;
    }
    uint32_t j = (uint32_t)h & (m->cap - 1);
    while (m->e[j].k) j = (j + 1) & (m->cap - 1);
    m->e[j] = (smap_ent){h, k, len, val};
    m->n++;
}

/* ---------------------------------------------------------------- elaboration state */
typedef struct {
    rs_diag_loc loc;      /* mesh name */
    rs_diag_loc ranksloc; /* rank list */
    uint8_t poisoned;
    ast_sym *axis[RS_MAX_DIMS];
} mesh_info;

typedef struct {
    rs_diag_loc loc; /* tensor name */
    uint8_t poisoned;  /* its definition failed: its pieces are skipped silently */
    uint8_t bad_piece; /* one of its pieces failed: no coverage check */
} tensor_info;

typedef struct {
    rs_diag_loc loc; /* the buffer name of its first piece */
} buffer_info;

#define MAX_EXT 64
typedef struct {
    int64_t ext;
    int64_t coord[RS_MAX_DIMS]; /* per mesh axis; -1: not set by this dim */
} ext_opt;

typedef struct {
    uint32_t dom;
    int64_t lo, hi;
    rs_diag_loc loc;
} dom_range;

/* A piece's positions that checks after elaboration point at (the AST is gone by then). */
typedef struct {
    rs_diag_loc tensor; /* the tensor name, with the slice when there is one */
    rs_diag_loc buffer; /* the buffer name */
} piece_locs;

typedef struct {
    rs_front *F;
    rs_diag *dg;
    const rs_front_opts *o;
    rs_layout *L;
    rs_vec(rs_mesh) meshes;
    rs_vec(mesh_info) minfo;
    rs_vec(rs_tensor) tensors;
    rs_vec(tensor_info) tinfo;
    rs_vec(rs_buffer) buffers;
    rs_vec(buffer_info) binfo;
    rs_vec(rs_piece) pieces; /* source order until grouped */
    rs_vec(rs_diag_loc) ploc;  /* the src/dst keyword */
    rs_vec(piece_locs) plocs; /* where later checks point */
    rs_vec(rs_place) places;
    rs_vec(int64_t) i64;
    smap tmap, bmap[2];
    rs_vec(ast_sym *) bound;
    uint64_t iterations;
    uint32_t nest;
    int fatal;
    uint64_t name_bytes;
    char *nb[4];
    size_t nbcap[4];
    uint8_t *define_used;
    /* topology as written */
    int has_topo;
    rs_diag_loc topo_loc;
    int has_world, has_ds, has_domains;
    int64_t world, domain_size, nic, nvlink;
    rs_diag_loc world_loc, domains_loc;
    uint32_t ndomains;
    rs_vec(dom_range) doms;
    uint64_t work;    /* budget for the coverage and overlap checks */
    uint64_t steps;   /* expression nodes evaluated and statements run (cap RS_FRONT_MAX_STEPS) */
    uint64_t suggest; /* names compared for did-you-mean hints (cap RS_FRONT_MAX_SUGGEST) */
    uint32_t *src_of; /* grouped piece index -> source order */
    struct pool_ent {
        uint64_t h;
        uint32_t off, len;
    } * pool; /* slices and boxes already in the i64 pool (most repeat across layers and experts) */
    uint32_t pool_cap, pool_n;
    ext_opt opt[RS_MAX_DIMS][MAX_EXT]; /* check_block_count scratch */
    rs_ir *ir;
} sema;

#define ERR(loc, ...) rs_diag_error(S->dg, (loc), __VA_ARGS__)
#define NOTE(loc, ...) rs_diag_note(S->dg, (loc), __VA_ARGS__)
#define LL(x) ((long long)(x))

#define MAX_NAME_BYTES (512ull << 20) /* all tensor, buffer, mesh and axis names together */
#define WORK_BUDGET (1ull << 31)      /* elementary steps of the coverage and overlap checks */

static const rs_front_opts *O(const sema *S) { return S->o; }

static void fatal(sema *S) { S->fatal = 1; }
static int stopped(const sema *S) { return S->fatal || S->dg->stop; }

static const char *intern_name(sema *S, const char *s, size_t len)
{
    S->name_bytes += len + 1;
    if (S->name_bytes > MAX_NAME_BYTES) return NULL;
    return rs_layout_name(S->L, s, len);
}

/* ---------------------------------------------------------------- names and suggestions */
static void suggest_bound(sema *S, rs_diag_loc loc, const ast_sym *y)
{
    if (!S->dg->last_shown) return; /* the error was a repeat: no hint to compute */
    rs_suggest sg;
    rs_suggest_init(&sg, y->name, y->len);
    for (size_t i = 0; i < S->bound.n; i++) rs_suggest_add(&sg, S->bound.v[i]->name, S->bound.v[i]->len);
    rs_diag_did_you_mean(S->dg, loc, sg.best);
}

static void suggest_tensor(sema *S, rs_diag_loc loc, const char *name, size_t len)
{
    if (!S->dg->last_shown) return; /* the error was a repeat: no hint to compute */
    rs_suggest sg;
    rs_suggest_init(&sg, name, len);
    for (size_t i = 0; i < S->tensors.n && S->suggest < RS_FRONT_MAX_SUGGEST; i++, S->suggest++)
        rs_suggest_add(&sg, S->tensors.v[i].name, strlen(S->tensors.v[i].name));
    rs_diag_did_you_mean(S->dg, loc, sg.best);
}

static void suggest_mesh(sema *S, rs_diag_loc loc, const ast_sym *y)
{
    if (!S->dg->last_shown) return; /* the error was a repeat: no hint to compute */
    rs_suggest sg;
    rs_suggest_init(&sg, y->name, y->len);
    for (size_t i = 0; i < S->meshes.n; i++) rs_suggest_add(&sg, S->meshes.v[i].name, strlen(S->meshes.v[i].name));
    rs_diag_did_you_mean(S->dg, loc, sg.best);
}

static void suggest_list(sema *S, rs_diag_loc loc, const char *want, size_t len, const char *const *cands, int n)
{
    if (!S->dg->last_shown) return; /* the error was a repeat: no hint to compute */
    rs_suggest sg;
    rs_suggest_init(&sg, want, len);
    for (int i = 0; i < n; i++) rs_suggest_add(&sg, cands[i], strlen(cands[i]));
    rs_diag_did_you_mean(S->dg, loc, sg.best);
}

/* ---------------------------------------------------------------- expressions */
static int eval(sema *S, const ast_expr *e, int64_t *v);

/* Text values (docs/language.md, text consts): a string literal, a text const, or a ?: with a text branch is
 * text, decided from the expression's form. Text is a const's value or goes inside a string as {NAME}; it is
 * never a number. */
static int is_text(const ast_expr *e)
{
    switch (e->kind) {
    case EX_STR: return 1;
    case EX_NAME: return e->sym->bound && e->sym->is_text;
    case EX_COND: return is_text(e->b) || is_text(e->c);
    default: return 0;
    }
}

static int ovf(sema *S, const ast_expr *e, const char *op, int64_t a, int64_t b)
{
    ERR(e->loc, "integer overflow: %lld %s %lld does not fit in 64 bits", LL(a), op, LL(b));
    return -1;
}

static int eval(sema *S, const ast_expr *e, int64_t *v)
{
    int64_t a, b;
    S->steps++;
    switch (e->kind) {
    case EX_INT: *v = e->ival; return 0;
    case EX_STR:
        ERR(e->loc, "a string where a number is wanted (text is a const's value, or goes inside a string as "
                    "{NAME})");
        return -1;
    case EX_NAME: {
        ast_sym *y = e->sym;
        if (y->bound) {
            if (y->poisoned) return -1;
            if (y->is_text) {
                ERR(e->loc, "'%s' is text, not a number: it can only go inside a string, as {%s}", y->name,
                    y->name);
                return -1;
            }
            *v = y->value;
            return 0;
        }
        if (y->mesh >= 0) ERR(e->loc, "'%s' is a mesh, not a value", y->name);
        else {
            ERR(e->loc, "unknown name '%s'", y->name);
            suggest_bound(S, e->loc, y);
        }
        return -1;
    }
    case EX_NEG:
        if (eval(S, e->a, &a)) return -1;
        if (a == INT64_MIN) {
            ERR(e->loc, "integer overflow: -(%lld) does not fit in 64 bits", LL(a));
            return -1;
        }
        *v = -a;
        return 0;
    case EX_NOT:
        if (eval(S, e->a, &a)) return -1;
        *v = !a;
        return 0;
    case EX_COND:
        if (eval(S, e->a, &a)) return -1;
        return eval(S, a ? e->b : e->c, v);
    case EX_CALL: {
        int is_min = e->sym == S->F->sym_min;
        if (!is_min && e->sym != S->F->sym_max) {
            static const char *const fns[] = {"min", "max"};
            ERR(e->loc, "unknown function '%s'; the functions are min and max", e->sym->name);
            suggest_list(S, e->loc, e->sym->name, e->sym->len, fns, 2);
            return -1;
        }
        if (!e->nargs) {
            ERR(e->loc, "%s() needs at least one argument", e->sym->name);
            return -1;
        }
        int64_t r = 0;
        int first = 1;
        for (const ast_expr *x = e->args; x; x = x->next) {
            if (eval(S, x, &a)) return -1;
            if (first || (is_min ? a < r : a > r)) r = a;
            first = 0;
        }
        *v = r;
        return 0;
    }
    case EX_BIN:
        break;
    default: rs_die("bad expression kind %d", e->kind);
    }
    if (eval(S, e->a, &a)) return -1;
    if (e->op == OP_AND && !a) return *v = 0, 0;
    if (e->op == OP_OR && a) return *v = 1, 0;
    if (eval(S, e->b, &b)) return -1;
    switch (e->op) {
    case OP_ADD: return rs_add_ovf(a, b, v) ? ovf(S, e, "+", a, b) : 0;
    case OP_SUB: return rs_sub_ovf(a, b, v) ? ovf(S, e, "-", a, b) : 0;
    case OP_MUL: return rs_mul_ovf(a, b, v) ? ovf(S, e, "*", a, b) : 0;
    case OP_DIV:
    case OP_MOD:
        if (b == 0) {
            ERR(e->loc, "division by zero (%lld %s 0)", LL(a), e->op == OP_DIV ? "/" : "%");
            return -1;
        }
        if (a == INT64_MIN && b == -1) {
            if (e->op == OP_MOD) return *v = 0, 0;
            return ovf(S, e, "/", a, b);
        }
        *v = e->op == OP_DIV ? a / b : a % b;
        return 0;
    case OP_EQ: *v = a == b; return 0;
    case OP_NE: *v = a != b; return 0;
    case OP_LT: *v = a < b; return 0;
    case OP_LE: *v = a <= b; return 0;
    case OP_GT: *v = a > b; return 0;
    case OP_GE: *v = a >= b; return 0;
    case OP_AND:
    case OP_OR: *v = b != 0; return 0;
    }
    rs_die("bad operator %d", e->op);
}

/* Evaluate a string (name) into scratch buffer `slot`; returns its length or -1. The result stays
 * valid until the next evaluation into the same slot. */
enum { SLOT_NAME = 0, SLOT_BUFFER = 1, SLOT_PATH = 2, SLOT_TEXT = 3 };

static int64_t eval_str(sema *S, const ast_str *s, int slot, const char **out);

static const char text_branch_msg[] =
    "a number where text is wanted: the branches of a ?: must both be text or both numbers";

/* The value of a text expression (is_text(e)); a string literal's lands in SLOT_TEXT. */
static int eval_text(sema *S, const ast_expr *e, const char **t, uint32_t *n)
{
    S->steps++;
    switch (e->kind) {
    case EX_STR: {
        int64_t k = eval_str(S, e->str, SLOT_TEXT, t);
        if (k < 0) return -1;
        *n = (uint32_t)k;
        return 0;
    }
    case EX_COND: {
        /* a branch that is a number by its form is an error even when not taken (a name that is not
         * defined yet is left to evaluation, as in number expressions) */
        for (const ast_expr *x = e->b; x; x = x == e->b ? e->c : NULL)
            if (!is_text(x) && x->kind != EX_COND && (x->kind != EX_NAME || x->sym->bound)) {
                ERR(x->loc, "%s", text_branch_msg);
                return -1;
            }
        int64_t c;
        if (eval(S, e->a, &c)) return -1;
        return eval_text(S, c ? e->b : e->c, t, n);
    }
    case EX_NAME:
        if (e->sym->bound && e->sym->is_text) {
            if (e->sym->poisoned) return -1;
            *t = e->sym->text;
            *n = e->sym->textlen;
            return 0;
        }
        if (!e->sym->bound) { /* an unknown name: eval says so */
            int64_t v;
            eval(S, e, &v);
            return -1;
        }
        break;
    default: break;
    }
    ERR(e->loc, "%s", text_branch_msg);
    return -1;
}

/* Does the literal text hold a member marker ("{*}", "{*+N}")? */
static int lit_has_marker(const char *lit, size_t n)
{
    char *z = rs_xmalloc(n + 1);
    memcpy(z, lit, n);
    z[n] = 0;
    rs_marker mk[RS_GROUP_MAX_DIMS];
    int k = rs_group_markers(z, mk);
    free(z);
    return k != 0;
}

static int64_t eval_str(sema *S, const ast_str *s, int slot, const char **out)
{
    if (s->lit) {
        if (memmem(s->lit, s->litlen, "{*", 2) && lit_has_marker(s->lit, s->litlen)) {
            ERR(s->loc, "'{*}' written as '{{*}}' in a name: it is reserved for the members of a buffer group");
            return -1;
        }
        *out = s->lit;
        return s->litlen;
    }
    size_t n = 0;
    int members = 0;
    for (const ast_strpart *p = s->parts; p; p = p->next) {
        char num[24];
        const char *t = num;
        size_t k;
        if (p->text) {
            t = p->text;
            k = p->len;
        } else if (!p->expr) {
            if (slot != SLOT_BUFFER) {
                ERR(s->loc, "'{*}' stands for the members of a buffer group: it is allowed only in the buffer "
                            "name after `as`");
                return -1;
            }
            if (members++ == RS_GROUP_MAX_DIMS) {
                ERR(s->loc, "a buffer group's name holds one or two '{*}' (its member dims), not more");
                return -1;
            }
            int64_t off = 0;
            if (p->off && eval(S, p->off, &off)) return -1;
            if (off < 0 || (uint64_t)off >= RS_GROUP_MAX_OFFSET) {
                ERR(p->off->loc, "a member offset in '{* + offset}' must be in 0 .. 2^62 - 1 (it is %lld)", LL(off));
                return -1;
            }
            k = (size_t)snprintf(num, sizeof num, off ? "{*+%lld}" : "{*}", LL(off));
        } else if (is_text(p->expr)) {
            uint32_t tn;
            if (eval_text(S, p->expr, &t, &tn)) return -1;
            k = tn;
        } else {
            int64_t v;
            if (eval(S, p->expr, &v)) return -1;
            char tmp[24];
            uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
            size_t m = 0;
            do tmp[m++] = (char)('0' + u % 10); while (u /= 10);
            k = 0;
            if (v < 0) num[k++] = '-';
            while (m) num[k++] = tmp[--m];
        }
        if (n + k + 1 > S->nbcap[slot]) {
            if (n + k > RS_FRONT_MAX_NAME) {
                ERR(s->loc, "name longer than %d bytes", RS_FRONT_MAX_NAME);
                return -1;
            }
            S->nbcap[slot] = (n + k + 1) * 2;
            S->nb[slot] = rs_xrealloc(S->nb[slot], S->nbcap[slot]);
        }
        memcpy(S->nb[slot] + n, t, k);
        n += k;
    }
    if (n > RS_FRONT_MAX_NAME) {
        ERR(s->loc, "name longer than %d bytes", RS_FRONT_MAX_NAME);
        return -1;
    }
    if (!S->nb[slot]) {
        S->nbcap[slot] = 64;
        S->nb[slot] = rs_xmalloc(64);
    }
    S->nb[slot][n] = 0;
    *out = S->nb[slot];
    rs_marker mk[RS_GROUP_MAX_DIMS];
    if (rs_group_markers(S->nb[slot], mk) != members) {
        ERR(s->loc, "'{*}' written as '{{*}}' in a name: it is reserved for the members of a buffer group");
        return -1;
    }
    if (members == 2) { /* distinct members, distinct names: the first member number ends where text starts */
        const char *mid = S->nb[slot] + mk[0].at + mk[0].len;
        if (mk[1].at == mk[0].at + mk[0].len || (*mid >= '0' && *mid <= '9')) {
            ERR(s->loc, "the two '{*}' of a buffer group's name must be separated by text that starts with a "
                        "non-digit ('%s')", S->nb[slot]);
            return -1;
        }
    }
    return (int64_t)n;
}

/* ---------------------------------------------------------------- scopes */
/* Bind y; 0 when bound, -1 (after an error) when it already was. */
static int bind(sema *S, ast_sym *y, int64_t v, rs_diag_loc loc, int kind, int poisoned)
{
    if (y->bound) {
        ERR(loc, "redefinition of '%s'", y->name);
        NOTE(y->def, "'%s' was defined here (names cannot be redefined or shadowed)", y->name);
        return -1;
    }
    y->bound = (uint8_t)kind;
    y->poisoned = (uint8_t)poisoned;
    y->is_text = 0;
    y->value = v;
    y->def = loc;
    y->toplevel = S->nest == 0;
    rs_vec_push(&S->bound, y);
    return 0;
}

static void unbind_to(sema *S, size_t mark)
{
    while (S->bound.n > mark) {
        ast_sym *y = S->bound.v[--S->bound.n];
        y->bound = SYM_FREE;
        y->poisoned = 0;
        y->is_text = 0;
        free((char *)y->text); /* a text const's value: names made from it were copied */
        y->text = NULL;
    }
}

/* ---------------------------------------------------------------- statements */
static void elab_list(sema *S, const ast_stmt *s);

static void elab_block(sema *S, const ast_stmt *body, rs_diag_loc at)
{
    if (S->nest >= RS_FRONT_MAX_NEST) {
        ERR(at, "blocks nested too deeply (more than %d levels)", RS_FRONT_MAX_NEST);
        fatal(S);
        return;
    }
    S->nest++;
    size_t mark = S->bound.n;
    elab_list(S, body);
    unbind_to(S, mark);
    S->nest--;
}

static int top_only(sema *S, const ast_stmt *s, const char *what)
{
    if (S->nest == 0) return 1;
    ERR(s->loc, "%s is only allowed at the top level, not inside for or if", what);
    return 0;
}

static void elab_const(sema *S, const ast_stmt *s)
{
    for (const ast_def *d = s->cons.defs; d; d = d->next) {
        ast_sym *y = d->sym;
        int64_t v = 0;
        int bad = 0, text = is_text(d->value);
        const char *t = NULL;
        uint32_t tn = 0;
        char num[24]; /* a -D made in code (no text): its number as text */
        if (S->nest == 0 && y->define >= 0 && !y->bound) {
            const rs_define *D = &O(S)->defines[y->define];
            S->define_used[y->define] = 1;
            if (text) { /* the value as written, digits too */
                if (D->text) t = D->text;
                else snprintf(num, sizeof num, "%lld", LL(D->value)), t = num;
                tn = (uint32_t)strlen(t);
            } else if (D->text_only) {
                ERR(d->loc, "-D %s=%s: '%s' is a number, and the value is not a decimal integer", y->name, D->text,
                    y->name);
                S->F->define_errors++; /* a command-line error (exit status 2), found here */
                bad = 1;
            } else v = D->value;
        } else if (text) {
            if (eval_text(S, d->value, &t, &tn)) bad = 1;
        } else if (eval(S, d->value, &v)) bad = 1;
        if (!bind(S, y, v, d->loc, SYM_CONST, bad) && text) {
            /* at most RS_FRONT_MAX_NAME bytes (eval_str's limit); freed when the const goes out of scope */
            char *c = rs_xmalloc((size_t)tn + 1);
            if (tn) memcpy(c, t, tn);
            c[tn] = 0;
            y->is_text = 1;
            y->text = c;
            y->textlen = tn;
        }
    }
}

/* Evaluate a rank item (`r` or `a..b`) into [lo, hi); -1 after an error. */
static int eval_rank_item(sema *S, const ast_ritem *r, int64_t *lo, int64_t *hi)
{
    if (eval(S, r->lo, lo)) return -1;
    if (!r->hi) *hi = *lo + (*lo < INT64_MAX);
    else if (eval(S, r->hi, hi)) return -1;
    if (*lo < 0) {
        ERR(r->loc, "negative rank %lld", LL(*lo));
        return -1;
    }
    if (*hi < *lo) {
        ERR(r->loc, "rank range %lld..%lld is reversed", LL(*lo), LL(*hi));
        return -1;
    }
    if ((uint64_t)*hi > O(S)->max_ranks) {
        ERR(r->loc, "rank %lld is past the rank limit (%llu ranks)", LL(*hi - 1), (unsigned long long)O(S)->max_ranks);
        return -1;
    }
    return 0;
}

static void elab_topology(sema *S, const ast_stmt *s)
{
    if (!top_only(S, s, "topology")) return;
    if (S->has_topo) {
        ERR(s->loc, "second topology: a layout has exactly one");
        NOTE(S->topo_loc, "the first topology is here");
        return;
    }
    S->has_topo = 1;
    S->topo_loc = s->loc;
    static const char *const keys[] = {"domain_size", "domains", "world", "nic_gbps", "nvlink_gbps"};
    const ast_def *seen[5] = {0};
    for (const ast_def *d = s->topo.items; d; d = d->next) {
        int k = 0;
        while (k < 5 && strcmp(keys[k], d->sym->name)) k++;
        if (k == 5) {
            ERR(d->loc, "unknown topology setting '%s' (settings: domain_size, domains, world, nic_gbps, nvlink_gbps)",
                d->sym->name);
            suggest_list(S, d->loc, d->sym->name, d->sym->len, keys, 5);
            continue;
        }
        if (seen[k]) {
            ERR(d->loc, "topology setting '%s' given twice", keys[k]);
            NOTE(seen[k]->loc, "first given here");
            continue;
        }
        seen[k] = d;
        if ((k == 1) != (d->is_list != 0)) {
            ERR(d->loc, k == 1 ? "'domains' takes a list: [0..8, 8..16, [16, 18, 17]]"
                               : "topology setting '%s' takes an integer, not a list",
                keys[k]);
            continue;
        }
        if (k == 1) {
            S->has_domains = 1;
            S->domains_loc = d->loc;
            uint64_t total = 0;
            for (const ast_ritem *r = d->list; r; r = r->next) {
                uint32_t dom = S->ndomains++;
                size_t before = S->doms.n;
                int derr = 0;
                const ast_ritem *one = r, *list = r->list;
                for (const ast_ritem *x = list ? list : one; x; x = list ? x->next : NULL) {
                    int64_t lo, hi;
                    if (eval_rank_item(S, x, &lo, &hi)) {
                        derr = 1;
                        continue;
                    }
                    total += (uint64_t)(hi - lo);
                    if (total > O(S)->max_ranks) {
                        ERR(x->loc, "domains list more than %llu ranks", (unsigned long long)O(S)->max_ranks);
                        fatal(S);
                        return;
                    }
                    rs_vec_push(&S->doms, ((dom_range){dom, lo, hi, x->loc}));
                }
                int64_t cnt = 0;
                for (size_t i = before; i < S->doms.n; i++) cnt += S->doms.v[i].hi - S->doms.v[i].lo;
                if (cnt == 0 && !derr) ERR(r->loc, "domain %u is empty", dom);
            }
            continue;
        }
        int64_t v;
        if (eval(S, d->value, &v)) continue;
        if (v <= 0) {
            ERR(d->value->loc, "topology setting '%s' must be positive (is %lld)", keys[k], LL(v));
            continue;
        }
        if (k == 0) S->has_ds = 1, S->domain_size = v;
        else if (k == 2) {
            if ((uint64_t)v > O(S)->max_ranks) {
                ERR(d->value->loc, "world of %lld ranks is past the rank limit (%llu)", LL(v),
                    (unsigned long long)O(S)->max_ranks);
                continue;
            }
            S->has_world = 1, S->world = v, S->world_loc = d->value->loc;
        } else if (k == 3) S->nic = v;
        else S->nvlink = v;
    }
    if (seen[0] && seen[1]) ERR(seen[1]->loc, "give either domain_size or domains, not both");
    else if (!seen[0] && !seen[1]) ERR(s->loc, "the topology needs domain_size or domains");
}

/* Collect the base-mesh axes of a view axis's value: a name, or names joined by `*` (outermost first). */
static int view_factors(sema *S, const ast_expr *e, const ast_expr **out, int *n)
{
    if (e->kind == EX_BIN && e->op == OP_MUL) return view_factors(S, e->a, out, n) || view_factors(S, e->b, out, n);
    if (e->kind != EX_NAME) {
        ERR(e->loc, "an axis of a mesh view is an axis of its mesh or a product of them (like 'dp * tp')");
        return 1;
    }
    if (*n == RS_MAX_DIMS) {
        ERR(e->loc, "more than %d axes in one axis of a mesh view", RS_MAX_DIMS);
        return 1;
    }
    out[(*n)++] = e;
    return 0;
}

/* A view `mesh v = base [a, b = x * y];`: the base's ranks, its axes regrouped. Each view axis is one axis of
 * the base (written alone: the same name) or a product of several, outermost first; every axis of the base
 * is used exactly once. The view's coordinates are the base's, read in the view's order. */
static int elab_mesh_view(sema *S, const ast_stmt *s, rs_mesh *m, mesh_info *mi)
{
    ast_sym *y = s->mesh.name, *bs = s->mesh.base;
    if (bs->mesh < 0) {
        ERR(s->mesh.ranksloc, "unknown mesh '%s'", bs->name);
        suggest_mesh(S, s->mesh.ranksloc, bs);
        return 1;
    }
    if (S->minfo.v[bs->mesh].poisoned) return 1;
    const rs_mesh *b = &S->meshes.v[bs->mesh];
    const mesh_info *bi = &S->minfo.v[bs->mesh];
    if (s->mesh.naxes > RS_MAX_DIMS) {
        ERR(s->mesh.axesloc, "mesh '%s' has %u axes; at most %d are allowed", y->name, s->mesh.naxes, RS_MAX_DIMS);
        return 1;
    }
    int fac[RS_MAX_DIMS][RS_MAX_DIMS], nfac[RS_MAX_DIMS] = {0};
    rs_diag_loc use[RS_MAX_DIMS]; /* per base axis: where the view uses it */
    uint8_t used[RS_MAX_DIMS] = {0};
    const ast_def *first[RS_MAX_DIMS];
    for (const ast_def *d = s->mesh.axes; d; d = d->next) {
        for (uint32_t a = 0; a < m->naxes; a++)
            if (mi->axis[a] == d->sym) {
                ERR(d->loc, "axis '%s' is defined twice in mesh '%s'", d->sym->name, y->name);
                NOTE(first[a]->loc, "first definition of axis '%s'", d->sym->name);
                return 1;
            }
        ast_expr self = {.kind = EX_NAME, .loc = d->loc, .sym = d->sym};
        const ast_expr *f[RS_MAX_DIMS];
        int nf = 0;
        if (view_factors(S, d->value ? d->value : &self, f, &nf)) return 1;
        int64_t size = 1;
        for (int i = 0; i < nf; i++) {
            int a = -1;
            for (uint32_t k = 0; k < b->naxes; k++)
                if (bi->axis[k] == f[i]->sym) a = (int)k;
            if (a < 0) {
                ERR(f[i]->loc, "mesh '%s' has no axis '%s'", b->name, f[i]->sym->name);
                suggest_list(S, f[i]->loc, f[i]->sym->name, f[i]->sym->len, b->axis, (int)b->naxes);
                return 1;
            }
            if (used[a]) {
                ERR(f[i]->loc, "axis '%s' of mesh '%s' is used twice in mesh '%s'", f[i]->sym->name, b->name, y->name);
                NOTE(use[a], "first use of axis '%s'", f[i]->sym->name);
                return 1;
            }
            used[a] = 1;
            use[a] = f[i]->loc;
            fac[m->naxes][nfac[m->naxes]++] = a;
            size *= b->size[a]; /* at most the base's positions */
        }
        first[m->naxes] = d;
        mi->axis[m->naxes] = d->sym;
        m->axis[m->naxes] = intern_name(S, d->sym->name, d->sym->len);
        m->size[m->naxes] = size;
        m->naxes++;
    }
    for (uint32_t a = 0; a < b->naxes; a++)
        if (!used[a]) {
            ERR(s->mesh.axesloc, "mesh '%s' leaves out axis '%s' of mesh '%s': a view uses every axis once", y->name,
                b->axis[a], b->name);
            return 1;
        }
    m->nranks = b->nranks;
    m->ranks = rs_xmalloc((b->nranks ? b->nranks : 1) * sizeof *m->ranks);
    for (uint32_t r = 0; r < b->nranks; r++) {
        int64_t bc[RS_MAX_DIMS], x = r;
        for (uint32_t k = m->naxes; k-- > 0;) {
            int64_t c = x % m->size[k];
            x /= m->size[k];
            for (int i = nfac[k]; i-- > 0;) {
                int64_t n = b->size[fac[k][i]];
                bc[fac[k][i]] = c % n;
                c /= n;
            }
        }
        int64_t lin = 0;
        for (uint32_t a = 0; a < b->naxes; a++) lin = lin * b->size[a] + bc[a];
        m->ranks[r] = b->ranks[lin];
    }
    return 0;
}

static void elab_mesh(sema *S, const ast_stmt *s)
{
    if (!top_only(S, s, "a mesh definition")) return;
    ast_sym *y = s->mesh.name;
    if (y->mesh >= 0) {
        ERR(s->mesh.nameloc, "redefinition of mesh '%s'", y->name);
        NOTE(S->minfo.v[y->mesh].loc, "mesh '%s' was defined here", y->name);
        return;
    }
    if (S->meshes.n >= RS_FRONT_MAX_MESHES) {
        ERR(s->mesh.nameloc, "more than %d meshes", RS_FRONT_MAX_MESHES);
        fatal(S);
        return;
    }
    rs_mesh m = {0};
    mesh_info mi = {.loc = s->mesh.nameloc, .ranksloc = s->mesh.ranksloc};
    int bad = 0;
    m.name = intern_name(S, y->name, y->len);
    if (!m.name) {
        ERR(s->mesh.nameloc, "names take more than %llu MiB", (unsigned long long)(MAX_NAME_BYTES >> 20));
        fatal(S);
        return;
    }
    if (s->mesh.base) {
        mi.poisoned = (uint8_t)elab_mesh_view(S, s, &m, &mi);
        y->mesh = (int32_t)S->meshes.n;
        rs_vec_push(&S->meshes, m);
        rs_vec_push(&S->minfo, mi);
        return;
    }
    if (s->mesh.naxes > RS_MAX_DIMS) {
        ERR(s->mesh.axesloc, "mesh '%s' has %u axes; at most %d are allowed", y->name, s->mesh.naxes, RS_MAX_DIMS);
        bad = 1;
    }
    uint64_t positions = 1;
    const ast_def *first[RS_MAX_DIMS];
    for (const ast_def *d = s->mesh.axes; d && !bad; d = d->next) {
        int dup = -1;
        for (uint32_t a = 0; a < m.naxes; a++)
            if (mi.axis[a] == d->sym) dup = (int)a;
        if (dup >= 0) {
            ERR(d->loc, "axis '%s' is defined twice in mesh '%s'", d->sym->name, y->name);
            NOTE(first[dup]->loc, "first definition of axis '%s'", d->sym->name);
            bad = 1;
            break;
        }
        int64_t v;
        if (eval(S, d->value, &v)) {
            bad = 1;
            break;
        }
        if (v <= 0) {
            ERR(d->value->loc, "axis '%s' of mesh '%s' must have a positive size (is %lld)", d->sym->name, y->name, LL(v));
            bad = 1;
            break;
        }
        if ((uint64_t)v > O(S)->max_ranks || positions * (uint64_t)v > O(S)->max_ranks) {
            ERR(d->value->loc, "mesh '%s' has more than %llu positions (the rank limit)", y->name,
                (unsigned long long)O(S)->max_ranks);
            bad = 1;
            break;
        }
        positions *= (uint64_t)v;
        first[m.naxes] = d;
        mi.axis[m.naxes] = d->sym;
        m.axis[m.naxes] = intern_name(S, d->sym->name, d->sym->len);
        m.size[m.naxes] = v;
        m.naxes++;
    }
    /* rank list: evaluate the items, check the count, then expand */
    rs_vec(int64_t) iv = {0};
    uint64_t count = 0;
    for (const ast_ritem *r = s->mesh.ranks; r && !bad; r = r->next) {
        int64_t lo, hi;
        if (eval_rank_item(S, r, &lo, &hi)) {
            bad = 1;
            break;
        }
        count += (uint64_t)(hi - lo);
        if (count > O(S)->max_ranks) {
            ERR(r->loc, "mesh '%s' lists more than %llu ranks (the rank limit)", y->name,
                (unsigned long long)O(S)->max_ranks);
            bad = 1;
            break;
        }
        rs_vec_push(&iv, lo);
        rs_vec_push(&iv, hi);
    }
    if (!bad && count != positions) {
        char shape[256];
        size_t k = 0;
        for (uint32_t a = 0; a < m.naxes && k < sizeof shape; a++)
            k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%s = %lld", a ? ", " : "", m.axis[a], LL(m.size[a]));
        ERR(s->mesh.ranksloc, "mesh '%s' has %llu positions ([%s]) but %llu ranks", y->name,
            (unsigned long long)positions, shape, (unsigned long long)count);
        bad = 1;
    }
    if (!bad) {
        m.nranks = (uint32_t)count;
        m.ranks = rs_xmalloc((count ? count : 1) * sizeof *m.ranks);
        int64_t maxr = 0;
        for (size_t i = 0; i < iv.n; i += 2)
            if (iv.v[i + 1] > maxr) maxr = iv.v[i + 1];
        uint8_t *seen = rs_xcalloc((size_t)maxr / 8 + 1, 1);
        uint32_t k = 0;
        const ast_ritem *r = s->mesh.ranks;
        for (size_t i = 0; i < iv.n && !bad; i += 2, r = r->next) {
            for (int64_t x = iv.v[i]; x < iv.v[i + 1]; x++) {
                if (seen[x >> 3] & (1u << (x & 7))) {
                    ERR(r->loc, "rank %lld appears twice in mesh '%s'", LL(x), y->name);
                    bad = 1;
                    break;
                }
                seen[x >> 3] |= (uint8_t)(1u << (x & 7));
                m.ranks[k++] = (int32_t)x;
            }
        }
        free(seen);
    }
    rs_vec_free(&iv);
    mi.poisoned = (uint8_t)bad;
    y->mesh = (int32_t)S->meshes.n;
    rs_vec_push(&S->meshes, m);
    rs_vec_push(&S->minfo, mi);
}

static void elab_tensor(sema *S, const ast_stmt *s)
{
    const char *name;
    int64_t len = eval_str(S, s->tensor.name, 0, &name);
    if (len < 0) return;
    uint64_t h = rs_ast_hash(name, (size_t)len);
    uint32_t prev = smap_get(&S->tmap, name, (uint32_t)len, h);
    if (prev != RS_NONE) {
        ERR(s->tensor.name->loc, "redefinition of tensor '%s'", name);
        NOTE(S->tinfo.v[prev].loc, "tensor '%s' was defined here", name);
        return;
    }
    if (S->tensors.n >= O(S)->max_tensors) {
        ERR(s->tensor.name->loc, "more than %llu tensors (the tensor limit)", (unsigned long long)O(S)->max_tensors);
        fatal(S);
        return;
    }
    rs_tensor t = {0};
    tensor_info ti = {.loc = s->tensor.name->loc};
    t.name = intern_name(S, name, (size_t)len);
    if (!t.name) {
        ERR(s->tensor.name->loc, "names take more than %llu MiB", (unsigned long long)(MAX_NAME_BYTES >> 20));
        fatal(S);
        return;
    }
    int dt = rs_dtype_parse(s->tensor.dtype->name);
    if (dt < 0) {
        const char *names[RS_DT_COUNT];
        for (int i = 0; i < RS_DT_COUNT; i++) names[i] = rs_dtype_name((rs_dtype)i);
        ERR(s->tensor.dtloc, "unknown dtype '%s'", s->tensor.dtype->name);
        suggest_list(S, s->tensor.dtloc, s->tensor.dtype->name, s->tensor.dtype->len, names, RS_DT_COUNT);
        ti.poisoned = 1;
    }
    t.dtype = dt < 0 ? RS_DT_BF16 : (rs_dtype)dt;
    if (s->tensor.ndims == 0) {
        ERR(s->tensor.dimsloc, "tensor '%s' needs at least one dimension", t.name);
        ti.poisoned = 1;
    } else if (s->tensor.ndims > RS_MAX_DIMS) {
        ERR(s->tensor.dimsloc, "tensor '%s' has %u dimensions; at most %d are allowed", t.name, s->tensor.ndims,
            RS_MAX_DIMS);
        ti.poisoned = 1;
    } else {
        int64_t bytes = rs_dtype_size(t.dtype);
        int big = 0;
        for (const ast_expr *e = s->tensor.dims; e; e = e->next) {
            int64_t v;
            if (eval(S, e, &v)) {
                ti.poisoned = 1;
                continue;
            }
            if (v <= 0) {
                ERR(e->loc, "dimension %u of tensor '%s' must be positive (is %lld)", t.ndim, t.name, LL(v));
                ti.poisoned = 1;
            } else if (v > RS_FRONT_MAX_EXTENT) {
                ERR(e->loc, "dimension %u of tensor '%s' is too large (%lld; at most 2^62)", t.ndim, t.name, LL(v));
                ti.poisoned = 1;
            }
            if (v > 0 && rs_mul_ovf(bytes, v, &bytes)) big = 1;
            t.shape[t.ndim++] = v;
        }
        if (big && !ti.poisoned) {
            ERR(s->tensor.dimsloc, "tensor '%s' is too large: its size in bytes does not fit in 64 bits", t.name);
            ti.poisoned = 1;
        }
    }
    smap_put(&S->tmap, t.name, (uint32_t)len, h, (uint32_t)S->tensors.n);
    rs_vec_push(&S->tensors, t);
    rs_vec_push(&S->tinfo, ti);
}

/* Slice or box items against a shape. Returns 0 and fills lo/hi, or -1 after reporting. */
static int eval_items(sema *S, const ast_items *its, const int64_t *shape, uint32_t nd, const char *what,
                      const char *owner_kind, const char *owner, int64_t *lo, int64_t *hi)
{
    if (its->n != nd) {
        ERR(its->loc, "%s has %u items but %s '%s' has %u dimensions", what, its->n, owner_kind, owner, nd);
        return -1;
    }
    int bad = 0;
    uint32_t d = 0;
    for (const ast_item *it = its->head; it; it = it->next, d++) {
        int64_t n = shape[d], a = 0, b = n;
        if (it->index) {
            if (eval(S, it->lo, &a)) {
                bad = 1;
                continue;
            }
            if (a < 0 || a >= n) {
                ERR(it->loc, "%s index %lld is out of range for dimension %u of %s '%s' (size %lld)", what, LL(a), d,
                    owner_kind, owner, LL(n));
                bad = 1;
                continue;
            }
            b = a + 1;
        } else {
            if (it->lo && eval(S, it->lo, &a)) {
                bad = 1;
                continue;
            }
            if (it->hi && eval(S, it->hi, &b)) {
                bad = 1;
                continue;
            }
            if (a < 0 || b > n) {
                ERR(it->loc, "%s %lld:%lld is out of bounds for dimension %u of %s '%s' (size %lld)", what, LL(a), LL(b),
                    d, owner_kind, owner, LL(n));
                bad = 1;
                continue;
            }
            if (a >= b) {
                ERR(it->loc, "%s %lld:%lld of dimension %u is empty", what, LL(a), LL(b), d);
                bad = 1;
                continue;
            }
        }
        lo[d] = a;
        hi[d] = b;
    }
    return bad ? -1 : 0;
}

static void fmt_box(char *buf, size_t n, const int64_t *lo, const int64_t *hi, uint32_t nd)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (uint32_t d = 0; d < nd && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld:%lld", d ? ", " : "", LL(lo[d]), LL(hi[d]));
    if (k < n) snprintf(buf + k, n - k, "]");
}

static void fmt_coord(char *buf, size_t n, const rs_mesh *m, const int64_t *c)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (uint32_t a = 0; a < m->naxes && k < n; a++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s = %lld", a ? ", " : "", m->axis[a], LL(c[a]));
    if (k < n) snprintf(buf + k, n - k, "]");
}

static uint32_t mesh_linear(const rs_mesh *m, const int64_t *c)
{
    uint64_t lin = 0;
    for (uint32_t a = 0; a < m->naxes; a++) lin = lin * (uint64_t)m->size[a] + (uint64_t)c[a];
    return (uint32_t)lin;
}

/* The local block of every rank that holds an explicit-buffer piece must have exactly `want`
 * elements (its box's). Dims are independent (each axis shards at most one dim), so per dim we
 * collect the distinct extents a rank can get, with one coordinate assignment for each, and look
 * for a combination whose product differs from `want`. */

static int check_block_count(sema *S, const rs_mesh *m, const rs_tensor *t, const int64_t *slo, const int64_t *shi,
                             const rs_place *pl, int npl, int64_t want, rs_diag_loc loc, const char *bname,
                             const int64_t *blo, const int64_t *bhi, uint32_t bnd)
{
    ext_opt (*opt)[MAX_EXT] = S->opt;
    int nopt[RS_MAX_DIMS];
    for (uint32_t d = 0; d < t->ndim; d++) {
        opt[d][0].ext = shi[d] - slo[d];
        for (int a = 0; a < RS_MAX_DIMS; a++) opt[d][0].coord[a] = -1;
        nopt[d] = 1;
    }
    for (int i = 0; i < npl; i++) {
        if (pl[i].kind != RS_PLACE_SHARD) continue;
        int d = pl[i].dim, a = pl[i].axis;
        int64_t n = m->size[a], b = pl[i].arg;
        ext_opt next[MAX_EXT];
        int nn = 0;
        for (int o = 0; o < nopt[d]; o++) {
            int64_t P = opt[d][o].ext;
            int64_t bs = b > 0 ? b : (P + n - 1) / n;
            int64_t js[3] = {0, bs > 0 ? P / bs : 0, n - 1};
            for (int q = 0; q < 3; q++) {
                int64_t j = js[q] < n ? js[q] : n - 1, lo, hi;
                rs_shard_interval(0, P, n, b, j, &lo, &hi);
                int64_t e = hi - lo;
                int dup = 0;
                for (int r = 0; r < nn; r++) dup |= next[r].ext == e;
                if (dup || nn == MAX_EXT) continue;
                next[nn] = opt[d][o];
                next[nn].ext = e;
                next[nn].coord[a] = j;
                nn++;
            }
        }
        memcpy(opt[d], next, (size_t)nn * sizeof *next);
        nopt[d] = nn;
    }
    int pick[RS_MAX_DIMS] = {0};
    int bad = 0;
    if (want == 0) {
        /* every rank needs an empty block: fails when each dim can be non-empty */
        bad = 1;
        for (uint32_t d = 0; d < t->ndim && bad; d++) {
            int found = -1;
            for (int o = 0; o < nopt[d] && found < 0; o++)
                if (opt[d][o].ext > 0) found = o;
            if (found < 0) bad = 0;
            else pick[d] = found;
        }
    } else {
        for (uint32_t d = 0; d < t->ndim && !bad; d++)
            for (int o = 0; o < nopt[d] && !bad; o++)
                if (opt[d][o].ext == 0) pick[d] = o, bad = 1;
        if (!bad) {
            int64_t prod = 1;
            for (uint32_t d = 0; d < t->ndim; d++) prod *= opt[d][0].ext; /* <= slice elements: fits */
            if (prod != want) bad = 1;
            for (uint32_t d = 0; d < t->ndim && !bad; d++)
                if (nopt[d] > 1) pick[d] = 1, bad = 1;
        }
    }
    if (!bad) return 0;
    int64_t coord[RS_MAX_DIMS] = {0}, have = 1;
    for (int i = 0; i < npl; i++)
        if (pl[i].kind == RS_PLACE_PIN) coord[pl[i].axis] = pl[i].arg;
    for (uint32_t d = 0; d < t->ndim; d++) {
        const ext_opt *o = &opt[d][pick[d]];
        have *= o->ext;
        for (uint32_t a = 0; a < m->naxes; a++)
            if (o->coord[a] >= 0) coord[a] = o->coord[a];
    }
    char cs[256], boxtxt[300];
    fmt_coord(cs, sizeof cs, m, coord);
    fmt_box(boxtxt, sizeof boxtxt, blo, bhi, bnd);
    ERR(loc, "box %s of buffer '%s' has %lld elements, but the local block of tensor '%s' on rank %d (mesh '%s' at %s) has %lld",
        boxtxt, bname, LL(want), t->name, m->ranks[mesh_linear(m, coord)], m->name, cs, LL(have));
    return -1;
}

static uint64_t mix64(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 33);
}

/* Offset of lo[0..n) then hi[0..n) in the i64 pool, shared with earlier identical vectors. */
static uint32_t pool_intern(sema *S, const int64_t *lo, const int64_t *hi, uint32_t n)
{
    uint64_t h = n;
    for (uint32_t d = 0; d < n; d++) h = mix64(mix64(h, (uint64_t)lo[d]), (uint64_t)hi[d]);
    h |= 1;
    if ((S->pool_n + 1) * 2 > S->pool_cap) {
        uint32_t nc = S->pool_cap ? S->pool_cap * 2 : 1024;
        struct pool_ent *ne = rs_xcalloc(nc, sizeof *ne);
        for (uint32_t i = 0; i < S->pool_cap; i++) {
            if (!S->pool[i].h) continue;
            uint32_t j = (uint32_t)S->pool[i].h & (nc - 1);
            while (ne[j].h) j = (j + 1) & (nc - 1);
            ne[j] = S->pool[i];
        }
        free(S->pool);
        S->pool = ne;
        S->pool_cap = nc;
    }
    uint32_t j = (uint32_t)h & (S->pool_cap - 1);
    for (; S->pool[j].h; j = (j + 1) & (S->pool_cap - 1)) {
        const struct pool_ent *e = &S->pool[j];
        if (e->h == h && e->len == 2 * n && !memcmp(&S->i64.v[e->off], lo, n * sizeof *lo) &&
            !memcmp(&S->i64.v[e->off + n], hi, n * sizeof *hi))
            return e->off;
    }
    uint32_t off = (uint32_t)S->i64.n;
    rs_vec_reserve(&S->i64, 2 * n);
    memcpy(S->i64.v + S->i64.n, lo, n * sizeof *lo);
    memcpy(S->i64.v + S->i64.n + n, hi, n * sizeof *hi);
    S->i64.n += 2 * n;
    S->pool[j] = (struct pool_ent){h, off, 2 * n};
    S->pool_n++;
    return off;
}

static void elab_piece(sema *S, const ast_stmt *st)
{
    const ast_piece *P = st->piece;
    const char *tname;
    int64_t tlen = eval_str(S, P->tensor, 0, &tname);
    if (tlen < 0) return;
    uint32_t ti = smap_get(&S->tmap, tname, (uint32_t)tlen, rs_ast_hash(tname, (size_t)tlen));
    if (ti == RS_NONE) {
        ERR(P->tensor->loc, "unknown tensor '%s'", tname);
        suggest_tensor(S, P->tensor->loc, tname, (size_t)tlen);
        return;
    }
    if (S->tinfo.v[ti].poisoned) return;
    const rs_tensor *t = &S->tensors.v[ti];
    tensor_info *tinf = &S->tinfo.v[ti];
    const char *side = P->side == RS_SRC ? "src" : "dst";

    /* mesh */
    int32_t mi = P->mesh->mesh;
    if (mi < 0) {
        ERR(P->meshloc, "unknown mesh '%s'", P->mesh->name);
        suggest_mesh(S, P->meshloc, P->mesh);
        tinf->bad_piece = 1;
        return;
    }
    if (S->minfo.v[mi].poisoned) {
        tinf->bad_piece = 1;
        return;
    }
    const rs_mesh *m = &S->meshes.v[mi];
    const mesh_info *minf = &S->minfo.v[mi];
    int bad = 0;

    /* slice */
    int64_t slo[RS_MAX_DIMS], shi[RS_MAX_DIMS];
    int whole = 1;
    for (uint32_t d = 0; d < t->ndim; d++) slo[d] = 0, shi[d] = t->shape[d];
    if (P->slice) {
        if (eval_items(S, P->slice, t->shape, t->ndim, "slice", "tensor", t->name, slo, shi)) bad = 1;
        for (uint32_t d = 0; d < t->ndim && !bad; d++) whole &= slo[d] == 0 && shi[d] == t->shape[d];
    }

    /* placements */
    rs_place pl[RS_MAX_DIMS];
    const ast_place *pfirst[RS_MAX_DIMS] = {0};
    int npl = 0;
    for (const ast_place *ap = P->places; ap; ap = ap->next) {
        int a = -1;
        for (uint32_t k = 0; k < m->naxes; k++)
            if (minf->axis[k] == ap->axis) a = (int)k;
        if (a < 0) {
            ERR(ap->loc, "mesh '%s' has no axis '%s'", m->name, ap->axis->name);
            suggest_list(S, ap->loc, ap->axis->name, ap->axis->len, m->axis, (int)m->naxes);
            bad = 1;
            continue;
        }
        if (pfirst[a]) {
            ERR(ap->loc, "axis '%s' is placed twice", ap->axis->name);
            NOTE(pfirst[a]->loc, "first placement of axis '%s'", ap->axis->name);
            bad = 1;
            continue;
        }
        pfirst[a] = ap;
        rs_place p;
        memset(&p, 0, sizeof p);
        p.axis = (uint8_t)a;
        if (ap->pin) {
            int64_t v;
            if (eval(S, ap->value, &v)) {
                bad = 1;
                continue;
            }
            if (v < 0 || v >= m->size[a]) {
                ERR(ap->value->loc, "pinned coordinate %lld is out of range for axis '%s' of mesh '%s' (size %lld)",
                    LL(v), m->axis[a], m->name, LL(m->size[a]));
                bad = 1;
                continue;
            }
            p.kind = RS_PLACE_PIN;
            p.arg = v;
        } else if (ap->fn == S->F->sym_replicate) {
            if (ap->call) {
                ERR(ap->fnloc, "replicate takes no arguments");
                bad = 1;
                continue;
            }
            p.kind = RS_PLACE_REPLICATE;
        } else if (ap->fn == S->F->sym_shard) {
            if (!ap->call) {
                ERR(ap->fnloc, "shard needs a dimension: shard(d), shard(d, block = B) or shard(d, balanced)");
                bad = 1;
                continue;
            }
            const ast_parg *dim = NULL, *blk = NULL, *bal = NULL;
            int argbad = 0;
            for (const ast_parg *g = ap->args; g; g = g->next) {
                if (!g->key) {
                    int word = g->value->kind == EX_NAME && g->value->sym == S->F->sym_balanced;
                    if (dim && !word) {
                        ERR(g->loc, "shard takes one dimension, then optionally block = B or balanced");
                        if (g->value->kind == EX_NAME) {
                            static const char *const kw[] = {"balanced"};
                            suggest_list(S, g->loc, g->value->sym->name, g->value->sym->len, kw, 1);
                        }
                        argbad = 1;
                    } else if (word && (!dim || bal)) {
                        ERR(g->loc, bal ? "balanced given twice" : "shard needs its dimension before balanced");
                        argbad = 1;
                    } else if (word) bal = g;
                    else dim = g;
                } else if (g->key != S->F->sym_block) {
                    static const char *const kw[] = {"block"};
                    ERR(g->loc, "unknown shard argument '%s'; shard takes block = B or balanced", g->key->name);
                    suggest_list(S, g->loc, g->key->name, g->key->len, kw, 1);
                    argbad = 1;
                } else if (blk) {
                    ERR(g->loc, "block given twice");
                    argbad = 1;
                } else blk = g;
            }
            if (!argbad && blk && bal) {
                ERR(bal->loc, "a shard is either balanced or in blocks of B, not both");
                argbad = 1;
            }
            if (!argbad && !dim) {
                ERR(ap->fnloc, "shard needs a dimension: shard(d), shard(d, block = B) or shard(d, balanced)");
                argbad = 1;
            }
            int64_t d = 0, b = bal ? RS_SHARD_BALANCED : 0;
            if (!argbad && eval(S, dim->value, &d)) argbad = 1;
            if (!argbad && (d < 0 || d >= (int64_t)t->ndim)) {
                ERR(dim->value->loc, "shard dimension %lld is out of range: tensor '%s' has %u dimensions", LL(d),
                    t->name, t->ndim);
                argbad = 1;
            }
            if (!argbad && blk) {
                if (eval(S, blk->value, &b)) argbad = 1;
                else if (b <= 0) {
                    ERR(blk->value->loc, "shard block must be positive (is %lld)", LL(b));
                    argbad = 1;
                }
            }
            if (argbad) {
                bad = 1;
                continue;
            }
            p.kind = RS_PLACE_SHARD;
            p.dim = (uint8_t)d;
            p.arg = b;
        } else {
            static const char *const fns[] = {"shard", "replicate"};
            ERR(ap->fnloc,
                "unknown placement '%s'; expected shard(d), shard(d, block = B), shard(d, balanced) or replicate",
                ap->fn->name);
            suggest_list(S, ap->fnloc, ap->fn->name, ap->fn->len, fns, 2);
            bad = 1;
            continue;
        }
        pl[npl++] = p;
    }
    /* a fixed block must cover its parent interval: n * B >= the longest parent */
    if (!bad) {
        int64_t longest[RS_MAX_DIMS];
        for (uint32_t d = 0; d < t->ndim; d++) longest[d] = shi[d] - slo[d];
        const ast_place *ap = P->places;
        for (int i = 0; i < npl; i++, ap = ap->next) {
            if (pl[i].kind != RS_PLACE_SHARD) continue;
            int d = pl[i].dim;
            int64_t n = m->size[pl[i].axis], b = pl[i].arg, cover;
            if (b > 0) {
                if (!rs_mul_ovf(n, b, &cover) && cover < longest[d]) {
                    ERR(ap->loc, "shard(%d, block = %lld) over axis '%s' (size %lld) covers %lld elements, but the "
                        "interval it splits has %lld", d, LL(b), m->axis[pl[i].axis], LL(n), LL(cover), LL(longest[d]));
                    bad = 1;
                }
                if (b < longest[d]) longest[d] = b;
            } else longest[d] = (longest[d] + n - 1) / n;
        }
    }

    /* buffer */
    const char *bname;
    int64_t blen = eval_str(S, P->buffer, SLOT_BUFFER, &bname);
    if (blen < 0) bad = 1;
    int explicit_ = P->shape != NULL;
    int64_t bshape[RS_MAX_DIMS];
    uint32_t bnd = 0;
    if (explicit_) {
        if (P->nshape > RS_MAX_DIMS) {
            ERR(P->shapeloc, "buffer shape has %u dimensions; at most %d are allowed", P->nshape, RS_MAX_DIMS);
            bad = 1;
        } else {
            int64_t bytes = rs_dtype_size(t->dtype);
            int big = 0, sbad = 0;
            for (const ast_expr *e = P->shape; e; e = e->next) {
                int64_t v = 1;
                if (eval(S, e, &v)) sbad = 1;
                else if (v <= 0) {
                    ERR(e->loc, "dimension %u of the buffer shape must be positive (is %lld)", bnd, LL(v));
                    sbad = 1;
                } else if (v > RS_FRONT_MAX_EXTENT) {
                    ERR(e->loc, "dimension %u of the buffer shape is too large (%lld; at most 2^62)", bnd, LL(v));
                    sbad = 1;
                } else if (rs_mul_ovf(bytes, v, &bytes)) big = 1;
                bshape[bnd++] = v;
            }
            if (big && !sbad) {
                ERR(P->shapeloc, "buffer is too large: its size in bytes does not fit in 64 bits");
                sbad = 1;
            }
            bad |= sbad;
        }
    }
    if (bad) {
        tinf->bad_piece = 1;
        return;
    }
    uint64_t bh = rs_ast_hash(bname, (size_t)blen);
    uint32_t bi = smap_get(&S->bmap[P->side], bname, (uint32_t)blen, bh);
    if (bi == RS_NONE) {
        rs_buffer b = {.side = (rs_side)P->side, .dtype = t->dtype, .ndim = bnd};
        rs_marker mk[RS_GROUP_MAX_DIMS];
        b.group = (uint8_t)rs_group_markers(bname, mk);
        if (b.group && (explicit_ ? bnd : t->ndim) < b.group + 1u) {
            ERR(P->buffer->loc, "buffer group '%s' needs %s dimensions or more: the first %s its members, "
                                "the others are each member's (%s has %u)", bname, b.group == 1 ? "two" : "three",
                b.group == 1 ? "indexes" : "two index", explicit_ ? "its shape" : "the tensor",
                explicit_ ? bnd : t->ndim);
            tinf->bad_piece = 1;
            return;
        }
        memcpy(b.shape, bshape, bnd * sizeof *bshape);
        b.name = intern_name(S, bname, (size_t)blen);
        if (!b.name) {
            ERR(P->buffer->loc, "names take more than %llu MiB", (unsigned long long)(MAX_NAME_BYTES >> 20));
            fatal(S);
            return;
        }
        bi = (uint32_t)S->buffers.n;
        smap_put(&S->bmap[P->side], b.name, (uint32_t)blen, bh, bi);
        rs_vec_push(&S->buffers, b);
        rs_vec_push(&S->binfo, ((buffer_info){P->buffer->loc}));
    } else {
        const rs_buffer *b = &S->buffers.v[bi];
        rs_diag_loc first = S->binfo.v[bi].loc;
        if (b->dtype != t->dtype) {
            ERR(P->buffer->loc, "%s buffer '%s' holds %s pieces, but tensor '%s' is %s", side, bname,
                rs_dtype_name(b->dtype), t->name, rs_dtype_name(t->dtype));
            NOTE(first, "the first piece of buffer '%s' is here", bname);
            bad = 1;
        } else if (explicit_ != (b->ndim != 0)) {
            if (explicit_)
                ERR(P->shapeloc, "%s buffer '%s' was first used without a shape; give all its pieces a shape, or none",
                    side, bname);
            else
                ERR(P->buffer->loc, "%s buffer '%s' was first used with a shape; give all its pieces a shape, or none",
                    side, bname);
            NOTE(first, "the first piece of buffer '%s' is here", bname);
            bad = 1;
        } else if (explicit_) {
            int same = b->ndim == bnd;
            for (uint32_t d = 0; d < bnd && same; d++) same = b->shape[d] == bshape[d];
            if (!same) {
                char was[200], now[200];
                int64_t z[RS_MAX_DIMS] = {0};
                fmt_box(was, sizeof was, z, b->shape, b->ndim);
                fmt_box(now, sizeof now, z, bshape, bnd);
                ERR(P->shapeloc, "%s buffer '%s' has shape %s, but this piece gives %s", side, bname, was, now);
                NOTE(first, "the first piece of buffer '%s' is here", bname);
                bad = 1;
            }
        }
    }
    /* box */
    int64_t blo[RS_MAX_DIMS], bhi[RS_MAX_DIMS];
    if (!bad && explicit_) {
        for (uint32_t d = 0; d < bnd; d++) blo[d] = 0, bhi[d] = bshape[d];
        if (P->box && eval_items(S, P->box, bshape, bnd, "box", "buffer", bname, blo, bhi)) bad = 1;
        if (!bad) {
            int64_t want = 1;
            for (uint32_t d = 0; d < bnd; d++) want *= bhi[d] - blo[d]; /* <= buffer elements: fits */
            if (check_block_count(S, m, t, slo, shi, pl, npl, want, P->box ? P->box->loc : P->shapeloc, bname, blo,
                                  bhi, bnd))
                bad = 1;
        }
    }
    if (bad) {
        tinf->bad_piece = 1;
        return;
    }

    /* append */
    if (S->pieces.n >= O(S)->max_pieces) {
        ERR(st->loc, "more than %llu pieces (the piece limit)", (unsigned long long)O(S)->max_pieces);
        fatal(S);
        return;
    }
    if (S->places.n + RS_MAX_DIMS >= UINT32_MAX || S->i64.n + 4 * RS_MAX_DIMS >= UINT32_MAX) {
        ERR(st->loc, "the layout is too large (placement or slice tables past 2^32 entries)");
        fatal(S);
        return;
    }
    rs_piece p = {.tensor = ti, .mesh = (uint32_t)mi, .buffer = bi, .side = P->side, .nplace = (uint8_t)npl,
                  .place = (uint32_t)S->places.n, .slice = RS_NONE, .box = RS_NONE};
    rs_vec_reserve(&S->places, (size_t)npl);
    for (int i = 0; i < npl; i++) S->places.v[S->places.n++] = pl[i];
    if (!whole) p.slice = pool_intern(S, slo, shi, t->ndim);
    if (explicit_ && P->box) p.box = pool_intern(S, blo, bhi, bnd);
    rs_vec_push(&S->pieces, p);
    rs_vec_push(&S->ploc, st->loc);
    piece_locs pls = {P->tensor->loc, P->buffer->loc};
    if (P->slice) pls.tensor = rs_diag_span(pls.tensor, P->slice->loc);
    rs_vec_push(&S->plocs, pls);
}

static void elab_stmt(sema *S, const ast_stmt *s);

static void include_stmt(void *cookie, ast_stmt *s)
{
    sema *S = cookie;
    if (!stopped(S)) elab_stmt(S, s);
}

static void elab_include(sema *S, const ast_stmt *s)
{
    if (!top_only(S, s, "include")) return;
    const char *path;
    if (eval_str(S, s->inc.path, SLOT_PATH, &path) < 0) return;
    char *p = rs_xstrdup(path);
    if (rs_front_run(S->F, p, &s->inc.path->loc, include_stmt, S) != 0) fatal(S); /* the rest would cascade */
    free(p);
}

static void elab_for(sema *S, const ast_stmt *s)
{
    int64_t lo, hi;
    if (eval(S, s->loop.lo, &lo) || eval(S, s->loop.hi, &hi)) return;
    ast_sym *v = s->loop.var;
    if (v->bound) {
        ERR(s->loop.varloc, "loop variable '%s' redefines a name", v->name);
        NOTE(v->def, "'%s' was defined here (names cannot be redefined or shadowed)", v->name);
        return;
    }
    if (hi <= lo) return;
    uint64_t n = (uint64_t)hi - (uint64_t)lo;
    if (n > O(S)->max_iterations || S->iterations + n > O(S)->max_iterations) {
        ERR(s->loc, "this loop runs %llu iterations, which takes the layout past its limit of %llu loop iterations",
            (unsigned long long)n, (unsigned long long)O(S)->max_iterations);
        fatal(S);
        return;
    }
    S->iterations += n;
    for (int64_t i = lo; i < hi && !stopped(S); i++) {
        size_t mark = S->bound.n;
        bind(S, v, i, s->loop.varloc, SYM_LOOPVAR, 0);
        v->toplevel = 0;
        elab_block(S, s->loop.body, s->loc);
        unbind_to(S, mark);
    }
}

static void elab_if(sema *S, const ast_stmt *s)
{
    for (;;) {
        int64_t c;
        if (eval(S, s->cond.cond, &c)) return;
        if (c) {
            elab_block(S, s->cond.then, s->loc);
            return;
        }
        if (s->cond.else_if) {
            s = s->cond.els;
            continue;
        }
        if (s->cond.els) elab_block(S, s->cond.els, s->loc);
        return;
    }
}

/* assert cond, "message": the layout's own check, reported at the statement with its message. */
static void elab_assert(sema *S, const ast_stmt *s)
{
    if (!s->check.msg) {
        ERR(s->loc, "assert needs a message after its condition: assert COND, \"message\";");
        return;
    }
    int64_t c;
    if (eval(S, s->check.cond, &c) || c) return;
    const char *msg;
    int64_t n = eval_str(S, s->check.msg, SLOT_NAME, &msg);
    if (n >= 0) ERR(s->loc, "assertion failed: %.*s", (int)n, msg);
}

static void elab_stmt(sema *S, const ast_stmt *s)
{
    if (++S->steps > RS_FRONT_MAX_STEPS) {
        ERR(s->loc, "the layout takes too long to elaborate (more than %llu evaluation steps)",
            (unsigned long long)RS_FRONT_MAX_STEPS);
        fatal(S);
        return;
    }
    switch (s->kind) {
    case ST_INCLUDE: elab_include(S, s); break;
    case ST_TOPOLOGY: elab_topology(S, s); break;
    case ST_CONST: elab_const(S, s); break;
    case ST_MESH: elab_mesh(S, s); break;
    case ST_TENSOR: elab_tensor(S, s); break;
    case ST_PIECE: elab_piece(S, s); break;
    case ST_FOR: elab_for(S, s); break;
    case ST_IF: elab_if(S, s); break;
    case ST_ASSERT: elab_assert(S, s); break;
    default: rs_die("bad statement kind %d", s->kind);
    }
}

static void elab_list(sema *S, const ast_stmt *s)
{
    for (; s && !stopped(S); s = s->next) elab_stmt(S, s);
}

/* ---------------------------------------------------------------- topology and rank tables */
static int finish_topology(sema *S, uint32_t main_file)
{
    rs_topology *T = &S->L->topo;
    if (!S->has_topo) {
        rs_diag_loc at = {main_file, 1, 1, 0};
        ERR(at, "the layout has no topology (e.g. topology { domain_size = 8; nic_gbps = 400; nvlink_gbps = 3600; })");
        return -1;
    }
    if (!S->has_ds && !S->has_domains) return -1;
    int64_t maxr = -1;
    for (size_t i = 0; i < S->meshes.n; i++) {
        if (S->minfo.v[i].poisoned) continue;
        const rs_mesh *m = &S->meshes.v[i];
        for (uint32_t k = 0; k < m->nranks; k++)
            if (m->ranks[k] > maxr) maxr = m->ranks[k];
    }
    int64_t world = S->world;
    if (!S->has_world) {
        world = maxr + 1;
        for (size_t i = 0; i < S->doms.n; i++)
            if (S->doms.v[i].hi > world) world = S->doms.v[i].hi;
        if (world < 1) world = 1;
    }
    int bad = 0;
    if (S->has_world) {
        for (size_t i = 0; i < S->meshes.n; i++) {
            if (S->minfo.v[i].poisoned) continue;
            const rs_mesh *m = &S->meshes.v[i];
            for (uint32_t k = 0; k < m->nranks; k++)
                if (m->ranks[k] >= world) {
                    ERR(S->minfo.v[i].ranksloc, "mesh '%s' uses rank %d, outside the topology (world = %lld)", m->name,
                        m->ranks[k], LL(world));
                    NOTE(S->world_loc, "the world size is set here");
                    S->minfo.v[i].poisoned = 1;
                    bad = 1;
                    break;
                }
        }
    }
    if ((uint64_t)S->meshes.n * (uint64_t)world > RS_FRONT_MAX_MESH_INDEX) {
        ERR(S->topo_loc, "%zu meshes over %lld ranks need rank tables of more than %u entries", S->meshes.n, LL(world),
            RS_FRONT_MAX_MESH_INDEX);
        return -1;
    }
    T->world = (uint32_t)world;
    T->nic_gbps = (double)(S->nic ? S->nic : 400);
    T->nvlink_gbps = (double)(S->nvlink ? S->nvlink : 3600);
    T->domain_of = rs_xmalloc((size_t)world * sizeof *T->domain_of);
    if (S->has_ds) {
        T->domain_size = S->domain_size;
        T->ndomains = (uint32_t)((world + S->domain_size - 1) / S->domain_size);
        for (int64_t r = 0; r < world; r++) T->domain_of[r] = (uint32_t)(r / S->domain_size);
    } else {
        T->domain_size = 0;
        T->ndomains = S->ndomains;
        for (int64_t r = 0; r < world; r++) T->domain_of[r] = UINT32_MAX;
        int dbad = 0;
        for (size_t i = 0; i < S->doms.n && !dbad; i++) {
            const dom_range *d = &S->doms.v[i];
            for (int64_t r = d->lo; r < d->hi; r++) {
                if (r >= world) {
                    ERR(d->loc, "rank %lld in domains is outside the topology (world = %lld)", LL(r), LL(world));
                    dbad = 1;
                    break;
                }
                if (T->domain_of[r] != UINT32_MAX) {
                    ERR(d->loc, "rank %lld is in two domains (%u and %u)", LL(r), T->domain_of[r], d->dom);
                    dbad = 1;
                    break;
                }
                T->domain_of[r] = d->dom;
            }
        }
        if (!dbad) {
            int64_t missing = -1, nmiss = 0;
            for (int64_t r = 0; r < world; r++)
                if (T->domain_of[r] == UINT32_MAX) {
                    if (missing < 0) missing = r;
                    nmiss++;
                }
            if (nmiss) {
                ERR(S->domains_loc, "rank %lld%s is in no domain (world = %lld)", LL(missing),
                    nmiss > 1 ? " (and others)" : "", LL(world));
                dbad = 1;
            }
        }
        bad |= dbad;
    }
    for (size_t i = 0; i < S->meshes.n; i++) {
        rs_mesh *m = &S->meshes.v[i];
        m->index_of = rs_xmalloc((size_t)world * sizeof *m->index_of);
        for (int64_t r = 0; r < world; r++) m->index_of[r] = -1;
        if (S->minfo.v[i].poisoned) continue;
        for (uint32_t k = 0; k < m->nranks; k++) m->index_of[m->ranks[k]] = (int32_t)k;
    }
    return bad ? -1 : 0;
}

/* ---------------------------------------------------------------- rank enumeration */
typedef struct {
    const rs_mesh *m;
    int64_t coord[RS_MAX_DIMS];
    uint8_t freeax[RS_MAX_DIMS];
    int nfree, done;
} rank_iter;

static void iter_init(rank_iter *it, const rs_layout *L, const rs_piece *p)
{
    const rs_mesh *m = &L->meshes[p->mesh];
    uint8_t pinned[RS_MAX_DIMS] = {0};
    memset(it, 0, sizeof *it);
    it->m = m;
    for (uint32_t i = 0; i < p->nplace; i++) {
        const rs_place *pl = &L->places[p->place + i];
        if (pl->kind == RS_PLACE_PIN) pinned[pl->axis] = 1, it->coord[pl->axis] = pl->arg;
    }
    for (uint32_t a = 0; a < m->naxes; a++)
        if (!pinned[a]) it->freeax[it->nfree++] = (uint8_t)a;
}

/* Next holding coordinate (in it->coord): returns its rank, or -1 when done. */
static int32_t iter_next(rank_iter *it)
{
    if (it->done) return -1;
    int32_t r = it->m->ranks[mesh_linear(it->m, it->coord)];
    int k = it->nfree - 1;
    for (; k >= 0; k--) {
        int a = it->freeax[k];
        if (++it->coord[a] < it->m->size[a]) break;
        it->coord[a] = 0;
    }
    if (k < 0) it->done = 1;
    return r;
}

static uint64_t holding_count(const rs_layout *L, const rs_piece *p)
{
    const rs_mesh *m = &L->meshes[p->mesh];
    uint64_t n = m->nranks;
    for (uint32_t i = 0; i < p->nplace; i++) {
        const rs_place *pl = &L->places[p->place + i];
        if (pl->kind == RS_PLACE_PIN) n /= (uint64_t)m->size[pl->axis];
    }
    return n;
}

static int spend(sema *S, uint64_t n, rs_diag_loc loc, const char *what)
{
    S->work += n;
    if (S->work <= WORK_BUDGET) return 0;
    ERR(loc, "the layout is too costly to check (%s); simplify it", what);
    fatal(S);
    return -1;
}

/* ---------------------------------------------------------------- coverage */
typedef struct {
    int64_t lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
} box_t;

#define MAX_FRAGS 65536

/* Is box d covered by the union of boxes src[0..n)? On failure *left is an uncovered part. */
static int covered(sema *S, const box_t *d, const box_t *src, size_t n, uint32_t nd, box_t *left, rs_diag_loc loc,
                   int *toobig)
{
    rs_vec(box_t) a = {0}, b = {0};
    rs_vec_push(&a, *d);
    for (size_t s = 0; s < n && a.n; s++) {
        if (spend(S, a.n, loc, "source coverage")) {
            *toobig = 1;
            break;
        }
        b.n = 0;
        for (size_t f = 0; f < a.n; f++) {
            box_t x = a.v[f];
            int meet = 1;
            for (uint32_t k = 0; k < nd && meet; k++) meet = x.lo[k] < src[s].hi[k] && src[s].lo[k] < x.hi[k];
            if (!meet) {
                rs_vec_push(&b, x);
                continue;
            }
            for (uint32_t k = 0; k < nd; k++) {
                if (x.lo[k] < src[s].lo[k]) {
                    box_t y = x;
                    y.hi[k] = src[s].lo[k];
                    rs_vec_push(&b, y);
                    x.lo[k] = src[s].lo[k];
                }
                if (x.hi[k] > src[s].hi[k]) {
                    box_t y = x;
                    y.lo[k] = src[s].hi[k];
                    rs_vec_push(&b, y);
                    x.hi[k] = src[s].hi[k];
                }
            }
        }
        if (b.n > MAX_FRAGS) {
            ERR(loc, "too many source pieces overlap this destination piece to check its coverage");
            *toobig = 1;
            break;
        }
        __typeof__(a) t = a;
        a = b;
        b = t;
    }
    int ok = a.n == 0;
    if (!ok && a.n) *left = a.v[0];
    rs_vec_free(&a);
    rs_vec_free(&b);
    return ok;
}

static void check_coverage(sema *S)
{
    rs_layout *L = S->L;
    rs_vec(box_t) src = {0};
    for (uint32_t ti = 0; ti < L->ntensors && !stopped(S); ti++) {
        const rs_tensor *t = &L->tensors[ti];
        const tensor_info *inf = &S->tinfo.v[ti];
        if (inf->poisoned || inf->bad_piece) continue;
        if (!t->ndst && S->dg->nerrors) continue; /* likely a cascade: stay quiet */
        if (!t->nsrc && !t->ndst) {
            rs_diag_warning(S->dg, inf->loc, "tensor '%s' has no pieces", t->name);
            continue;
        }
        if (!t->ndst) {
            rs_diag_warning(S->dg, inf->loc, "tensor '%s' has no destination pieces; it is not transferred", t->name);
            continue;
        }
        if (!t->nsrc) {
            ERR(S->plocs.v[t->piece_begin].tensor, "tensor '%s' has destination pieces but no source piece", t->name);
            continue;
        }
        int any_whole = 0;
        src.n = 0;
        for (uint32_t k = 0; k < t->nsrc; k++) {
            const rs_piece *p = &L->pieces[t->piece_begin + k];
            box_t b;
            rs_piece_slice(L, p, b.lo, b.hi);
            any_whole |= p->slice == RS_NONE;
            rs_vec_push(&src, b);
        }
        if (any_whole) continue;
        for (uint32_t k = 0; k < t->ndst; k++) {
            uint32_t pi = t->piece_begin + t->nsrc + k;
            const rs_piece *p = &L->pieces[pi];
            box_t d, left;
            rs_piece_slice(L, p, d.lo, d.hi);
            int inside = 0;
            for (size_t s = 0; s < src.n && !inside; s++) {
                inside = 1;
                for (uint32_t x = 0; x < t->ndim && inside; x++)
                    inside = src.v[s].lo[x] <= d.lo[x] && d.hi[x] <= src.v[s].hi[x];
            }
            if (inside) continue;
            int toobig = 0;
            rs_diag_loc loc = S->plocs.v[pi].tensor;
            if (covered(S, &d, src.v, src.n, t->ndim, &left, loc, &toobig) || toobig) continue;
            char bt[300];
            fmt_box(bt, sizeof bt, left.lo, left.hi, t->ndim);
            ERR(loc, "elements %s of tensor '%s' are needed here but no source piece holds them", bt, t->name);
            break;
        }
    }
    rs_vec_free(&src);
}

/* ---------------------------------------------------------------- overlaps in buffers */
typedef struct {
    uint32_t *stamp, *owner; /* [world] */
    uint32_t gen;
} stamps;

static void next_gen(stamps *st, uint32_t world)
{
    if (++st->gen == 0) {
        memset(st->stamp, 0, world * sizeof *st->stamp);
        st->gen = 1;
    }
}

static int block_nonempty(const rs_layout *L, const rs_piece *p, const int64_t *coord)
{
    int64_t lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
    return rs_piece_block(L, p, coord, lo, hi) > 0;
}

static void report_overlap(sema *S, uint32_t a, uint32_t b, int32_t rank, const char *how)
{
    const rs_layout *L = S->L;
    if (S->src_of[a] > S->src_of[b]) { /* report at the piece written later */
        uint32_t t = a;
        a = b;
        b = t;
    }
    const rs_piece *pa = &L->pieces[a], *pb = &L->pieces[b];
    const rs_buffer *buf = &L->buffers[pb->buffer];
    ERR(S->plocs.v[b].buffer, "pieces of tensors '%s' and '%s' overlap in %s buffer '%s' on rank %d%s",
        L->tensors[pa->tensor].name, L->tensors[pb->tensor].name, buf->side == RS_SRC ? "src" : "dst", buf->name, rank,
        how);
    NOTE(S->plocs.v[a].buffer, "the other piece is here");
}

/* Within one group of pieces (same buffer; same box for explicit buffers), is any rank held by two?
 * Implicit buffers count only ranks with a non-empty block. */
static int group_ranks_clash(sema *S, stamps *st, const uint32_t *g, size_t n, int implicit_, const char *how)
{
    const rs_layout *L = S->L;
    next_gen(st, L->topo.world);
    for (size_t i = 0; i < n; i++) {
        const rs_piece *p = &L->pieces[g[i]];
        if (spend(S, holding_count(L, p), S->plocs.v[g[i]].buffer, "buffer overlaps")) return 1;
        rank_iter it;
        iter_init(&it, L, p);
        for (;;) {
            int64_t coord[RS_MAX_DIMS];
            memcpy(coord, it.coord, sizeof coord);
            int32_t r = iter_next(&it);
            if (r < 0) break;
            if (implicit_ && !block_nonempty(L, p, coord)) continue;
            if (st->stamp[r] == st->gen) {
                report_overlap(S, st->owner[r], g[i], r, how);
                return 1;
            }
            st->stamp[r] = st->gen;
            st->owner[r] = g[i];
        }
    }
    return 0;
}

/* Do a piece of group a and a piece of group b share a rank? */
static int groups_share_rank(sema *S, stamps *st, const uint32_t *ga, size_t na, const uint32_t *gb, size_t nb,
                             const char *how)
{
    const rs_layout *L = S->L;
    next_gen(st, L->topo.world);
    for (size_t i = 0; i < na; i++) {
        const rs_piece *p = &L->pieces[ga[i]];
        if (spend(S, holding_count(L, p), S->plocs.v[ga[i]].buffer, "buffer overlaps")) return 1;
        rank_iter it;
        iter_init(&it, L, p);
        for (int32_t r; (r = iter_next(&it)) >= 0;) {
            st->stamp[r] = st->gen;
            st->owner[r] = ga[i];
        }
    }
    for (size_t i = 0; i < nb; i++) {
        const rs_piece *p = &L->pieces[gb[i]];
        if (spend(S, holding_count(L, p), S->plocs.v[gb[i]].buffer, "buffer overlaps")) return 1;
        rank_iter it;
        iter_init(&it, L, p);
        for (int32_t r; (r = iter_next(&it)) >= 0;)
            if (st->stamp[r] == st->gen) {
                report_overlap(S, st->owner[r], gb[i], r, how);
                return 1;
            }
    }
    return 0;
}

/* An explicit buffer's piece with its box (the whole buffer when it has none). */
typedef struct {
    uint32_t src; /* source order, the tie-break */
    uint32_t piece;
    int64_t lo[RS_MAX_DIMS], hi[RS_MAX_DIMS];
} gbox;

static uint32_t g_nd, g_dim; /* qsort context: the front end is single-threaded */

static int cmp_gbox(const void *x, const void *y)
{
    const gbox *a = x, *b = y;
    for (uint32_t k = 0; k < g_nd; k++)
        if (a->lo[k] != b->lo[k]) return a->lo[k] < b->lo[k] ? -1 : 1;
    for (uint32_t k = 0; k < g_nd; k++)
        if (a->hi[k] != b->hi[k]) return a->hi[k] < b->hi[k] ? -1 : 1;
    return a->src < b->src ? -1 : a->src > b->src;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? -1 : a > b;
}

typedef struct {
    uint32_t first, n; /* a run of equal boxes in the sorted list */
    int64_t key;       /* its lo along the sweep dim */
} run_t;

static int cmp_run(const void *x, const void *y)
{
    const run_t *a = x, *b = y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->first < b->first ? -1 : a->first > b->first;
}

/* Explicit buffer: equal boxes must sit on disjoint ranks; distinct boxes that intersect (found by
 * a sweep along the dimension with the most distinct starts) must too. */
static void check_buffer_explicit(sema *S, stamps *st, const uint32_t *g, size_t n)
{
    const rs_layout *L = S->L;
    const rs_buffer *buf = &L->buffers[L->pieces[g[0]].buffer];
    uint32_t nd = buf->ndim;
    gbox *bx = rs_xmalloc(n * sizeof *bx);
    uint32_t *ids = rs_xmalloc(n * sizeof *ids);
    for (size_t i = 0; i < n; i++) {
        const rs_piece *p = &L->pieces[g[i]];
        bx[i].src = S->src_of[g[i]];
        bx[i].piece = g[i];
        for (uint32_t d = 0; d < nd; d++) {
            bx[i].lo[d] = p->box == RS_NONE ? 0 : L->i64[p->box + d];
            bx[i].hi[d] = p->box == RS_NONE ? buf->shape[d] : L->i64[p->box + nd + d];
        }
    }
    g_nd = nd;
    qsort(bx, n, sizeof *bx, cmp_gbox);
    for (size_t i = 0; i < n; i++) ids[i] = bx[i].piece;
    rs_vec(run_t) runs = {0};
    int done = spend(S, n * 8, S->plocs.v[g[0]].buffer, "buffer overlaps");
    for (size_t i = 0; i < n && !done;) {
        size_t j = i + 1;
        while (j < n && !memcmp(bx[i].lo, bx[j].lo, nd * sizeof(int64_t)) &&
               !memcmp(bx[i].hi, bx[j].hi, nd * sizeof(int64_t)))
            j++;
        rs_vec_push(&runs, ((run_t){(uint32_t)i, (uint32_t)(j - i), 0}));
        if (j - i > 1) {
            char bt[300], how[340];
            fmt_box(bt, sizeof bt, bx[i].lo, bx[i].hi, nd);
            snprintf(how, sizeof how, " (both fill box %s)", bt);
            if (group_ranks_clash(S, st, &ids[i], j - i, 0, how)) done = 1;
        }
        i = j;
    }
    if (!done && runs.n > 1) {
        uint32_t best = 0;
        size_t bestc = 0;
        int64_t *tmp = rs_xmalloc(runs.n * sizeof *tmp);
        for (uint32_t d = 0; d < nd; d++) {
            for (size_t r = 0; r < runs.n; r++) tmp[r] = bx[runs.v[r].first].lo[d];
            qsort(tmp, runs.n, sizeof *tmp, cmp_i64);
            size_t distinct = 0;
            for (size_t r = 0; r < runs.n; r++) distinct += r == 0 || tmp[r] != tmp[r - 1];
            if (distinct > bestc) bestc = distinct, best = d;
        }
        free(tmp);
        g_dim = best;
        for (size_t r = 0; r < runs.n; r++) runs.v[r].key = bx[runs.v[r].first].lo[best];
        qsort(runs.v, runs.n, sizeof *runs.v, cmp_run);
        rs_vec(uint32_t) active = {0};
        for (size_t r = 0; r < runs.n && !done && !stopped(S); r++) {
            const gbox *b = &bx[runs.v[r].first];
            size_t k = 0;
            for (size_t i = 0; i < active.n; i++)
                if (bx[runs.v[active.v[i]].first].hi[best] > b->lo[best]) active.v[k++] = active.v[i];
            active.n = k;
            if (spend(S, active.n + 1, S->plocs.v[b->piece].buffer, "buffer overlaps")) break;
            for (size_t i = 0; i < active.n && !done; i++) {
                const run_t *ra = &runs.v[active.v[i]];
                const gbox *a = &bx[ra->first];
                int meet = 1;
                for (uint32_t d = 0; d < nd && meet; d++) meet = a->lo[d] < b->hi[d] && b->lo[d] < a->hi[d];
                if (!meet) continue;
                char ba[300], bb[300], how[700];
                fmt_box(ba, sizeof ba, a->lo, a->hi, nd);
                fmt_box(bb, sizeof bb, b->lo, b->hi, nd);
                snprintf(how, sizeof how, " (boxes %s and %s)", ba, bb);
                if (groups_share_rank(S, st, &ids[ra->first], ra->n, &ids[runs.v[r].first], runs.v[r].n, how))
                    done = 1;
            }
            rs_vec_push(&active, (uint32_t)r);
        }
        rs_vec_free(&active);
    }
    rs_vec_free(&runs);
    free(bx);
    free(ids);
}

static void check_overlaps(sema *S, const uint32_t *inv)
{
    rs_layout *L = S->L;
    /* pieces per buffer, in source order */
    uint32_t *cnt = rs_xcalloc((size_t)L->nbuffers + 1, sizeof *cnt);
    for (uint32_t i = 0; i < L->npieces; i++) cnt[L->pieces[i].buffer + 1]++;
    for (uint32_t b = 0; b < L->nbuffers; b++) cnt[b + 1] += cnt[b];
    uint32_t *list = rs_xmalloc(((size_t)L->npieces + 1) * sizeof *list);
    uint32_t *pos = rs_xmalloc(((size_t)L->nbuffers + 1) * sizeof *pos);
    memcpy(pos, cnt, ((size_t)L->nbuffers + 1) * sizeof *pos);
    for (uint32_t s = 0; s < L->npieces; s++) {
        uint32_t i = inv[s]; /* source index s -> grouped index */
        list[pos[L->pieces[i].buffer]++] = i;
    }
    free(pos);
    stamps st = {rs_xcalloc(L->topo.world ? L->topo.world : 1, sizeof(uint32_t)),
                 rs_xcalloc(L->topo.world ? L->topo.world : 1, sizeof(uint32_t)), 0};
    for (uint32_t b = 0; b < L->nbuffers && !stopped(S); b++) {
        uint32_t *g = list + cnt[b];
        size_t n = cnt[b + 1] - cnt[b];
        if (n < 2) continue;
        /* skip pieces on meshes that failed (ranks outside the world) */
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (!S->minfo.v[L->pieces[g[i]].mesh].poisoned) g[k++] = g[i];
        n = k;
        if (n < 2) continue;
        if (L->buffers[b].ndim == 0)
            group_ranks_clash(S, &st, g, n, 1, " (a buffer without a shape holds one piece per rank)");
        else check_buffer_explicit(S, &st, g, n);
    }
    free(st.stamp);
    free(st.owner);
    free(list);
    free(cnt);
}

/* Could a name be a member of both groups? Member numbers are digits, so the patterns' prefixes must
 * extend one another by digits only, and likewise their suffixes. */
static int digits_extend(const char *a, size_t na, const char *b, size_t nb, int prefix)
{
    if (na > nb) {
        const char *t = a;
        size_t tn = na;
        a = b, na = nb, b = t, nb = tn;
    }
    const char *rest = prefix ? b + na : b, *keep = prefix ? b : b + (nb - na);
    if (memcmp(a, keep, na)) return 0;
    for (size_t i = 0; i < nb - na; i++)
        if (rest[i] < '0' || rest[i] > '9') return 0;
    return 1;
}

static int groups_overlap(const char *p, const char *q)
{
    const char *sp = strstr(p, "{*}"), *sq = strstr(q, "{*}");
    return digits_extend(p, (size_t)(sp - p), q, (size_t)(sq - q), 1) &&
           digits_extend(sp + 3, strlen(sp + 3), sq + 3, strlen(sq + 3), 0);
}

/* Hashes of a name's prefixes (forward) and suffixes (backward), so that every split of a name into
 * prefix + member number + suffix is looked up in O(1). */
static uint64_t fnv_step(uint64_t h, unsigned char c) { return (h ^ c) * 0x100000001b3ull; }
static uint64_t split_key(uint64_t hp, uint64_t hs, uint32_t side)
{
    return (hp * 0x9e3779b97f4a7c15ull) ^ (hs * 0xc2b2ae3d27d4eb4full) ^ side;
}

/* Pattern p{*}s -> (p, s) at `star`. */
static void group_split(const char *name, size_t *plen, const char **suf, size_t *slen)
{
    const char *star = strstr(name, "{*}");
    *plen = (size_t)(star - name);
    *suf = star + 3;
    *slen = strlen(star + 3);
}

static uint64_t group_key(const rs_buffer *g)
{
    size_t plen, slen;
    const char *suf;
    group_split(g->name, &plen, &suf, &slen);
    uint64_t hp = 0xcbf29ce484222325ull, hs = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < plen; i++) hp = fnv_step(hp, (unsigned char)g->name[i]);
    for (size_t i = slen; i-- > 0;) hs = fnv_step(hs, (unsigned char)suf[i]);
    return split_key(hp, hs, g->side);
}

/* Strip digits next to '{*}': groups whose names differ elsewhere cannot name the same member. */
static uint64_t group_core_key(const rs_buffer *g)
{
    size_t plen, slen;
    const char *suf;
    group_split(g->name, &plen, &suf, &slen);
    while (plen && g->name[plen - 1] >= '0' && g->name[plen - 1] <= '9') plen--;
    size_t skip = 0;
    while (skip < slen && suf[skip] >= '0' && suf[skip] <= '9') skip++;
    uint64_t h = rs_ast_hash(g->name, plen) * 31 + rs_ast_hash(suf + skip, slen - skip);
    return h ^ g->side;
}

typedef struct {
    uint64_t key;
    uint32_t b;
} gkey;

static int gkey_cmp(const void *x, const void *y)
{
    const gkey *a = x, *b = y;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->b < b->b ? -1 : a->b > b->b;
}

#define GROUP_PAIR_BUDGET 20000000ull /* pairs of groups compared, for layouts with very many alike groups */

/* A member's name must not be another buffer's (of the same side): both would name the same memory.
 * Plain names are split at every run of up to 20 digits and the split looked up among the groups' (prefix,
 * suffix) pairs; groups are compared in pairs only when their names differ just in digits next to '{*}'. */
static int classic_group(const rs_buffer *b) { return b->group == 1 && strstr(b->name, "{*}"); }

static void check_groups_classic(sema *S)
{
    const rs_layout *L = S->L;
    rs_vec(gkey) gk = {0};
    for (uint32_t b = 0; b < L->nbuffers; b++)
        if (classic_group(&L->buffers[b])) rs_vec_push(&gk, ((gkey){group_key(&L->buffers[b]), b}));
    if (!gk.n) return;
    /* open addressing: (prefix, suffix, side) key -> group */
    uint32_t cap = 16;
    while (cap < 2 * gk.n) cap *= 2;
    gkey *tab = rs_xcalloc(cap, sizeof *tab);
    for (size_t i = 0; i < gk.n; i++) {
        uint32_t j = (uint32_t)gk.v[i].key & (cap - 1);
        while (tab[j].key || tab[j].b) j = (j + 1) & (cap - 1);
        tab[j] = gk.v[i];
        tab[j].b++; /* 0 marks an empty slot */
    }
    uint64_t *hp = NULL, *hs = NULL;
    size_t hcap = 0;
    for (uint32_t b = 0; b < L->nbuffers && !stopped(S); b++) {
        const rs_buffer *o = &L->buffers[b];
        if (o->group) continue;
        const char *nm = o->name;
        size_t n = strlen(nm);
        if (n + 1 > hcap) {
            hcap = 2 * (n + 1);
            hp = rs_xrealloc(hp, hcap * sizeof *hp);
            hs = rs_xrealloc(hs, hcap * sizeof *hs);
        }
        hp[0] = hs[n] = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < n; i++) hp[i + 1] = fnv_step(hp[i], (unsigned char)nm[i]);
        for (size_t i = n; i-- > 0;) hs[i] = fnv_step(hs[i + 1], (unsigned char)nm[i]);
        for (size_t st = 0; st < n; st++) {
            if (nm[st] < '0' || nm[st] > '9') continue;
            for (size_t en = st + 1; en <= n && en - st <= 20 && nm[en - 1] >= '0' && nm[en - 1] <= '9'; en++) {
                if (nm[st] == '0' && en - st > 1) break; /* members are named without leading zeros */
                uint64_t key = split_key(hp[st], hs[en], o->side);
                for (uint32_t j = (uint32_t)key & (cap - 1); tab[j].b; j = (j + 1) & (cap - 1)) {
                    if (tab[j].key != key) continue;
                    const rs_buffer *g = &L->buffers[tab[j].b - 1];
                    uint64_t m;
                    if (!rs_member_of(g->name, nm, &m)) continue;
                    ERR(S->binfo.v[b].loc, "buffer '%s' is also member %llu of buffer group '%s'", nm,
                        (unsigned long long)m, g->name);
                    NOTE(S->binfo.v[tab[j].b - 1].loc, "buffer group '%s' is here", g->name);
                    st = n; /* one error per name */
                    break;
                }
                if (st == n) break;
            }
        }
    }
    free(hp);
    free(hs);
    free(tab);
    /* groups against groups, within classes of names equal but for the digits next to '{*}' */
    for (size_t i = 0; i < gk.n; i++) gk.v[i].key = group_core_key(&L->buffers[gk.v[i].b]);
    qsort(gk.v, gk.n, sizeof *gk.v, gkey_cmp);
    uint64_t pairs = 0;
    for (size_t i = 0; i < gk.n && !stopped(S); i++)
        for (size_t j = i + 1; j < gk.n && gk.v[j].key == gk.v[i].key && !stopped(S); j++) {
            if (++pairs > GROUP_PAIR_BUDGET) {
                ERR(S->binfo.v[gk.v[i].b].loc, "more than %llu pairs of buffer groups whose names differ only in "
                    "the digits next to '{*}': give the groups names that differ elsewhere",
                    (unsigned long long)GROUP_PAIR_BUDGET);
                i = gk.n;
                break;
            }
            const rs_buffer *g = &L->buffers[gk.v[i].b], *o = &L->buffers[gk.v[j].b];
            if (g->side != o->side || !groups_overlap(g->name, o->name)) continue;
            ERR(S->binfo.v[gk.v[j].b].loc, "buffer groups '%s' and '%s' can name the same member", o->name, g->name);
            NOTE(S->binfo.v[gk.v[i].b].loc, "buffer group '%s' is here", g->name);
        }
    rs_vec_free(&gk);
}

/* A name as tokens: a byte, or MARK for a member marker (one or more digits). */
#define MARK 256
static size_t name_tokens(const char *name, uint16_t *tok)
{
    rs_marker mk[RS_GROUP_MAX_DIMS];
    int k = rs_group_markers(name, mk);
    size_t n = 0, i = 0;
    for (int m = 0; m <= k && m <= RS_GROUP_MAX_DIMS; m++) {
        size_t end = m < k ? mk[m].at : strlen(name);
        for (; i < end; i++) tok[n++] = (unsigned char)name[i];
        if (m < k) {
            tok[n++] = MARK;
            i = mk[m].at + mk[m].len;
        }
    }
    return n;
}

/* Is there a string both token lists match (a MARK matching any run of digits)? A search over pairs of
 * positions, each either at a token or inside a MARK's run; `budget` counts the pairs visited. */
static int tokens_meet(const uint16_t *p, size_t np, const uint16_t *q, size_t nq, uint64_t *budget)
{
    /* literal heads and tails must agree: what is left starts and ends with a marker on one side */
    while (np && nq && p[0] != MARK && q[0] != MARK) {
        if (p[0] != q[0]) return 0;
        p++, q++, np--, nq--;
    }
    while (np && nq && p[np - 1] != MARK && q[nq - 1] != MARK) {
        if (p[np - 1] != q[nq - 1]) return 0;
        np--, nq--;
    }
    size_t w = 2 * (nq + 1), nstate = 2 * (np + 1) * w;
    if (nstate > *budget || nstate > ((size_t)1 << 22)) { /* names too long between their markers */
        *budget = 0;
        return 0;
    }
    uint8_t *seen = rs_xcalloc(nstate, 1);
    uint32_t *stack = rs_xmalloc(nstate * sizeof *stack);
    size_t top = 0;
    int met = 0;
#define PUSH(i, a, j, b)                                                                                              \
    do {                                                                                                              \
        size_t st_ = ((size_t)(i) * 2 + (a)) * w + (size_t)(j) * 2 + (b);                                             \
        if (!seen[st_]) seen[st_] = 1, stack[top++] = (uint32_t)st_;                                                  \
    } while (0)
    PUSH(0, 0, 0, 0);
    while (top && !met && *budget) {
        (*budget)--;
        uint32_t st = stack[--top];
        size_t i = st / w / 2, a = st / w % 2, j = st % w / 2, b = st % 2;
        if (i == np && !a && j == nq && !b) {
            met = 1;
            break;
        }
        if (a) PUSH(i + 1, 0, j, b); /* a run may end */
        if (b) PUSH(i, a, j + 1, 0);
        /* one character both sides take: p's or q's literal, else a digit */
        int cp = a ? -1 : i < np ? p[i] : -2, cq = b ? -1 : j < nq ? q[j] : -2;
        if (cp == -2 || cq == -2) continue;
        int ch = cp >= 0 && cp != MARK ? cp : cq >= 0 && cq != MARK ? cq : '0';
        int pd = cp == -1 || cp == MARK, qd = cq == -1 || cq == MARK; /* a digit run goes on or starts */
        int pok = pd ? ch >= '0' && ch <= '9' : cp == ch, qok = qd ? ch >= '0' && ch <= '9' : cq == ch;
        if (pok && qok) PUSH(pd ? i : i + 1, pd, qd ? j : j + 1, qd);
    }
#undef PUSH
    free(seen);
    free(stack);
    return met;
}

#define MARKED_PAIR_BUDGET 100000000ull /* positions visited comparing names with groups of the newer forms */

/* A rank that binds both buffers a and b (a piece of each is placed on it), or -1. */
static int32_t buffers_share_rank(sema *S, uint32_t a, uint32_t b)
{
    const rs_layout *L = S->L;
    uint32_t w = L->topo.world ? L->topo.world : 1;
    uint8_t *on = rs_xcalloc(w, 1);
    int32_t shared = -1;
    for (uint32_t i = 0; i < L->npieces; i++)
        if (L->pieces[i].buffer == a) {
            rank_iter it;
            iter_init(&it, L, &L->pieces[i]);
            for (int32_t r; (r = iter_next(&it)) >= 0;)
                if ((uint32_t)r < w) on[r] = 1;
        }
    for (uint32_t i = 0; i < L->npieces && shared < 0; i++)
        if (L->pieces[i].buffer == b) {
            rank_iter it;
            iter_init(&it, L, &L->pieces[i]);
            for (int32_t r; (r = iter_next(&it)) >= 0 && shared < 0;)
                if ((uint32_t)r < w && on[r]) shared = r;
        }
    free(on);
    return shared;
}

/* Groups of two member dims or with a member offset (format 1.3) against every other buffer of their side, on
 * the ranks that bind both: a plain name must not be one of their members; another group must not be able to
 * name the same member (judged by the names, not the member counts). Unlike the groups above, such names may
 * meet on different ranks: a pipeline stage's "decoder.layers.{* + 1}..." beside the others' "...{*}...". */
static void check_groups_marked(sema *S)
{
    const rs_layout *L = S->L;
    uint64_t budget = MARKED_PAIR_BUDGET;
    uint16_t *tp = NULL, *tq = NULL;
    for (uint32_t g = 0; g < L->nbuffers && !stopped(S); g++) {
        const rs_buffer *G = &L->buffers[g];
        if (!G->group || classic_group(G)) continue;
        tp = rs_xrealloc(tp, (strlen(G->name) + 1) * sizeof *tp);
        size_t np = name_tokens(G->name, tp);
        for (uint32_t b = 0; b < L->nbuffers && !stopped(S); b++) {
            const rs_buffer *B = &L->buffers[b];
            if (b == g || B->side != G->side || (B->group && !classic_group(B) && b < g)) continue;
            uint64_t idx[RS_GROUP_MAX_DIMS];
            int hit;
            if (!B->group) hit = budget-- && rs_member_of(G->name, B->name, idx) > 0;
            else {
                tq = rs_xrealloc(tq, (strlen(B->name) + 1) * sizeof *tq);
                size_t nq = name_tokens(B->name, tq);
                hit = tokens_meet(tp, np, tq, nq, &budget);
            }
            if (!budget) {
                ERR(S->binfo.v[g].loc, "comparing the names of buffer group '%s' with the other buffers takes too "
                    "long: give the groups names that differ earlier", G->name);
                b = g = L->nbuffers;
                break;
            }
            int32_t r = hit ? buffers_share_rank(S, g, b) : -1;
            if (r < 0) continue;
            if (!B->group) {
                ERR(S->binfo.v[b].loc, "buffer '%s' is also a member of buffer group '%s' on rank %d", B->name,
                    G->name, r);
            } else {
                ERR(S->binfo.v[b].loc, "buffer groups '%s' and '%s' can name the same member on rank %d", B->name,
                    G->name, r);
            }
            NOTE(S->binfo.v[g].loc, "buffer group '%s' is here", G->name);
        }
    }
    free(tp);
    free(tq);
}

static void check_groups(sema *S)
{
    check_groups_classic(S);
    if (!stopped(S)) check_groups_marked(S);
}

/* ---------------------------------------------------------------- assembly */
static rs_loc to_loc(rs_diag_loc d) { return (rs_loc){d.file, d.line, d.col}; }

struct rs_sema *rs_sema_begin(rs_front *F, rs_ir *ir)
{
    sema *S = rs_xcalloc(1, sizeof *S);
    S->F = F;
    S->dg = &F->dg;
    S->o = F->opts;
    S->ir = ir;
    S->L = &ir->L;
    S->define_used = rs_xcalloc(F->opts->ndefines + 1, 1);
    return (struct rs_sema *)S;
}

void rs_sema_stmt(void *cookie, ast_stmt *s)
{
    sema *S = cookie;
    if (!stopped(S)) elab_stmt(S, s);
}

uint32_t rs_sema_finish(struct rs_sema *handle, uint32_t main_file, int parsed)
{
    sema *S = (sema *)handle;
    rs_ir *ir = S->ir;
    int complete = parsed && !S->fatal && !S->dg->stop;

    /* -D options that named no top-level const: a command-line error */
    if (complete) {
        for (uint32_t i = 0; i < S->o->ndefines; i++) {
            if (S->define_used[i]) continue;
            const char *nm = S->o->defines[i].name;
            rs_suggest sg;
            rs_suggest_init(&sg, nm, strlen(nm));
            for (size_t k = 0; k < S->bound.n; k++)
                if (S->bound.v[k]->toplevel && S->bound.v[k]->bound == SYM_CONST)
                    rs_suggest_add(&sg, S->bound.v[k]->name, S->bound.v[k]->len);
            if (sg.best)
                rs_diag_error_at(S->dg, "command line", "-D %s: the layout has no top-level const '%s'; did you mean '%s'?",
                                 nm, nm, sg.best);
            else rs_diag_error_at(S->dg, "command line", "-D %s: the layout has no top-level const '%s'", nm, nm);
            S->F->define_errors++;
        }
    }
    unbind_to(S, 0);

    /* move the tables into the layout */
    rs_layout *L = S->L;
    L->nmeshes = (uint32_t)S->meshes.n;
    L->meshes = S->meshes.v;
    L->ntensors = (uint32_t)S->tensors.n;
    L->tensors = S->tensors.v;
    L->nbuffers = (uint32_t)S->buffers.n;
    L->buffers = S->buffers.v;
    L->nplaces = (uint32_t)S->places.n;
    L->places = S->places.v;
    L->ni64 = (uint32_t)S->i64.n;
    L->i64 = S->i64.v;
    int topo_ok = complete && finish_topology(S, main_file) == 0;

    /* group pieces per tensor: src then dst, each in source order (stable counting sort) */
    uint32_t np = (uint32_t)S->pieces.n;
    uint32_t *start = rs_xcalloc(2 * (size_t)L->ntensors + 1, sizeof *start);
    for (uint32_t i = 0; i < np; i++) start[2 * S->pieces.v[i].tensor + S->pieces.v[i].side + 1]++;
    for (size_t k = 0; k < 2 * (size_t)L->ntensors; k++) start[k + 1] += start[k];
    for (uint32_t t = 0; t < L->ntensors; t++) {
        L->tensors[t].piece_begin = start[2 * t];
        L->tensors[t].nsrc = start[2 * t + 1] - start[2 * t];
        L->tensors[t].ndst = start[2 * t + 2] - start[2 * t + 1];
    }
    uint32_t *inv = rs_xmalloc(((size_t)np + 1) * sizeof *inv);
    S->src_of = rs_xmalloc(((size_t)np + 1) * sizeof *S->src_of);
    for (uint32_t i = 0; i < np; i++) {
        const rs_piece *p = &S->pieces.v[i];
        uint32_t j = start[2 * p->tensor + p->side]++;
        inv[i] = j;
        S->src_of[j] = i;
    }
    free(start);
    L->pieces = rs_xmalloc(((size_t)np + 1) * sizeof *L->pieces);
    for (uint32_t i = 0; i < np; i++) L->pieces[inv[i]] = S->pieces.v[i];
    L->npieces = np;
    rs_vec_free(&S->pieces);
    ir->piece_loc = rs_xmalloc(((size_t)np + 1) * sizeof *ir->piece_loc);
    for (uint32_t i = 0; i < np; i++) ir->piece_loc[inv[i]] = to_loc(S->ploc.v[i]);
    rs_vec_free(&S->ploc);
    piece_locs *pl = rs_xmalloc(((size_t)np + 1) * sizeof *pl);
    for (uint32_t i = 0; i < np; i++) pl[inv[i]] = S->plocs.v[i];
    free(S->plocs.v);
    S->plocs.v = pl;
    free(S->pool);
    S->pool = NULL;

    if (complete) check_coverage(S);
    if (complete && !stopped(S)) check_groups(S);
    if (topo_ok && !stopped(S)) check_overlaps(S, inv);
    free(inv);

    ir->tensor_loc = rs_xmalloc(((size_t)L->ntensors + 1) * sizeof *ir->tensor_loc);
    for (uint32_t t = 0; t < L->ntensors; t++) ir->tensor_loc[t] = to_loc(S->tinfo.v[t].loc);
    ir->mesh_loc = rs_xmalloc(((size_t)L->nmeshes + 1) * sizeof *ir->mesh_loc);
    for (uint32_t m = 0; m < L->nmeshes; m++) ir->mesh_loc[m] = to_loc(S->minfo.v[m].loc);
    ir->buffer_loc = rs_xmalloc(((size_t)L->nbuffers + 1) * sizeof *ir->buffer_loc);
    for (uint32_t b = 0; b < L->nbuffers; b++) ir->buffer_loc[b] = to_loc(S->binfo.v[b].loc);
    /* meshes that never got rank tables (elaboration stopped early): only on failure */
    for (uint32_t m = 0; m < L->nmeshes; m++)
        if (!L->meshes[m].index_of) L->meshes[m].index_of = rs_xcalloc(1, sizeof(int32_t));
    if (!L->topo.domain_of) L->topo.domain_of = rs_xcalloc(1, sizeof(uint32_t));

    uint32_t nerr = S->dg->nerrors;
    if (!complete && !nerr && parsed) nerr = 1; /* cannot happen: stopping always reports */
    rs_vec_free(&S->minfo);
    rs_vec_free(&S->tinfo);
    rs_vec_free(&S->binfo);
    rs_vec_free(&S->plocs);
    rs_vec_free(&S->bound);
    rs_vec_free(&S->doms);
    free(S->tmap.e);
    free(S->bmap[0].e);
    free(S->bmap[1].e);
    free(S->nb[0]);
    free(S->nb[1]);
    free(S->nb[2]);
    free(S->nb[3]);
    free(S->define_used);
    free(S->src_of);
    free(S->pool);
    free(S);
    return nerr;
}
