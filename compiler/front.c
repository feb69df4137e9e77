/* front.c - the front end's driver: reads and parses files (includes too), runs the elaborator
 * (sema.c) into rs_ir; also the AST arena, the identifier table, -D parsing and rs_ir_free. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ast.h"
#include "plan.h" /* RS_VERSION_STRING */
#include "util.h"

/* ---- arena ---- */
#define CHUNK (256u << 10)

void *rs_ast_alloc(ast_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    ast_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > CHUNK ? n : CHUNK;
        c = rs_xmalloc(sizeof *c + cap);
        c->cap = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
        a->total += cap;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *rs_ast_strndup(ast_arena *a, const char *s, size_t n)
{
    char *d = rs_ast_alloc(a, n + 1);
    memcpy(d, s, n);
    return d;
}

void rs_ast_arena_reset(ast_arena *a)
{
    ast_chunk *keep = a->head;
    if (!keep) return;
    for (ast_chunk *c = keep->next, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    keep->next = NULL;
    keep->used = 0;
    a->total = keep->cap;
}

void rs_ast_arena_free(ast_arena *a)
{
    for (ast_chunk *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    a->head = NULL;
    a->total = 0;
}

/* ---- identifiers ---- */
ast_sym *rs_ast_intern(ast_symtab *t, ast_arena *a, const char *s, size_t len)
{
    uint64_t h = rs_ast_hash(s, len);
    if (t->cap) {
        for (uint32_t i = (uint32_t)h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
            ast_sym *y = t->tab[i];
            if (!y) break;
            if (y->hash == h && y->len == len && memcmp(y->name, s, len) == 0) return y;
        }
    }
    if ((t->n + 1) * 2 > t->cap) {
        uint32_t nc = t->cap ? t->cap * 2 : 256;
        ast_sym **nt = rs_xcalloc(nc, sizeof *nt);
        for (uint32_t i = 0; i < t->cap; i++) {
            ast_sym *y = t->tab[i];
            if (!y) continue;
            uint32_t j = (uint32_t)y->hash & (nc - 1);
            while (nt[j]) j = (j + 1) & (nc - 1);
            nt[j] = y;
        }
        free(t->tab);
        t->tab = nt;
        t->cap = nc;
    }
    ast_sym *y = rs_ast_alloc(a, sizeof *y);
    y->name = rs_ast_strndup(a, s, len);
    y->len = (uint32_t)len;
    y->hash = h;
    y->mesh = -1;
    y->define = -1;
    uint32_t j = (uint32_t)h & (t->cap - 1);
    while (t->tab[j]) j = (j + 1) & (t->cap - 1);
    t->tab[j] = y;
    t->n++;
    return y;
}

void rs_ast_symtab_free(ast_symtab *t)
{
    free(t->tab);
    memset(t, 0, sizeof *t);
}

/* ---- options and -D ---- */
void rs_front_opts_default(rs_front_opts *o)
{
    memset(o, 0, sizeof *o);
    o->max_errors = 20;
    o->max_tensors = 4000000;
    o->max_pieces = 4000000;
    o->max_ranks = 1048576;
    o->max_iterations = 100000000;
    o->max_include_depth = 32;
    o->max_expr_depth = 256;
}

int rs_parse_define(const char *arg, rs_define *out, char *err, size_t errlen)
{
    const char *eq = strchr(arg, '=');
    size_t n = eq ? (size_t)(eq - arg) : strlen(arg);
    int ok = n > 0 && !(arg[0] >= '0' && arg[0] <= '9');
    for (size_t i = 0; i < n && ok; i++) {
        char c = arg[i];
        ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    }
    if (!ok) {
        snprintf(err, errlen, "-D %s: expected NAME=VALUE with NAME an identifier", arg);
        return -1;
    }
    if (!eq) {
        snprintf(err, errlen, "-D %s: missing =VALUE", arg);
        return -1;
    }
    const char *v = eq + 1, *text = v;
    size_t tn = strlen(text);
    int neg = 0;
    if (*v == '-' || *v == '+') neg = *v++ == '-';
    uint64_t x = 0, lim = neg ? UINT64_C(0x8000000000000000) : UINT64_C(0x7fffffffffffffff);
    int digits = 0, number = *v != 0, overflow = 0;
    for (; *v && number; v++) {
        if (*v == '_' && digits) continue;
        if (*v < '0' || *v > '9') {
            number = 0;
            break;
        }
        uint64_t d = (uint64_t)(*v - '0');
        if (x > (lim - d) / 10) overflow = 1;
        else x = x * 10 + d;
        digits++;
    }
    number = number && digits;
    if (number && overflow) {
        snprintf(err, errlen, "-D %s: the value does not fit in 64 bits", arg);
        return -1;
    }
    if (!number) {
        if (tn > RS_FRONT_MAX_NAME) {
            snprintf(err, errlen, "-D %.*s: the value is neither a decimal integer nor text of at most %d bytes",
                     (int)n, arg, RS_FRONT_MAX_NAME);
            return -1;
        }
        for (size_t i = 0; i < tn; i++) {
            unsigned char c = (unsigned char)text[i];
            if (c < 0x20 || c == 0x7f || c == '"' || c == '{' || c == '}') {
                snprintf(err, errlen, "-D %s: the value is neither a decimal integer nor text (text may not hold '\"', "
                         "braces or control characters)", arg);
                return -1;
            }
        }
    }
    char *name = rs_xmalloc(n + 1 + tn + 1);
    memcpy(name, arg, n);
    name[n] = 0;
    memcpy(name + n + 1, text, tn + 1);
    out->name = name;
    out->text = name + n + 1;
    out->text_only = (uint8_t)!number;
    out->value = !number ? 0 : neg ? (int64_t)(0 - x) : (int64_t)x;
    return 0;
}

/* ---- files ---- */
static char *resolve(rs_front *F, const char *path, const rs_diag_loc *at)
{
    if (!at || path[0] == '/') return rs_xstrdup(path);
    const char *from = F->dg.files[at->file].path;
    const char *slash = strrchr(from, '/');
    if (!slash) return rs_xstrdup(path);
    size_t dn = (size_t)(slash - from) + 1, pn = strlen(path);
    char *r = rs_xmalloc(dn + pn + 1);
    memcpy(r, from, dn);
    memcpy(r + dn, path, pn + 1);
    return r;
}

static void open_error(rs_front *F, const rs_diag_loc *at, const char *path, const char *why)
{
    if (at) rs_diag_error(&F->dg, *at, "cannot read '%s': %s", path, why);
    else rs_diag_error_at(&F->dg, path, "cannot read: %s", why);
}

int rs_front_run(rs_front *F, const char *given, const rs_diag_loc *at, void (*on_stmt)(void *, ast_stmt *),
                 void *cookie)
{
    if (at && F->depth > F->opts->max_include_depth) {
        rs_diag_error(&F->dg, *at, "includes nested too deeply (more than %u levels)", F->opts->max_include_depth);
        return -1;
    }
    if (F->nloads >= RS_FRONT_MAX_LOADS) {
        if (at) rs_diag_error(&F->dg, *at, "too many files read (more than %u includes)", RS_FRONT_MAX_LOADS);
        return -1;
    }
    char *path = resolve(F, given, at);
    /* The layout named on the command line may be a pipe (/dev/stdin); an include must be a regular file,
     * so that a layout cannot make the compiler wait on a pipe nobody writes (O_NONBLOCK: the open does
     * not wait for a writer, and the file is refused before it is read). */
    int fd = open(path, O_RDONLY | O_CLOEXEC | (at ? O_NONBLOCK : 0));
    FILE *fp = fd >= 0 ? fdopen(fd, "rb") : NULL;
    struct stat sb;
    if (!fp || fstat(fileno(fp), &sb) != 0) {
        open_error(F, at, path, strerror(errno));
        if (fp) fclose(fp);
        else if (fd >= 0) close(fd);
        free(path);
        return -1;
    }
    if (S_ISDIR(sb.st_mode) || (at && !S_ISREG(sb.st_mode))) {
        open_error(F, at, path, S_ISDIR(sb.st_mode) ? "is a directory" : "not a regular file");
        fclose(fp);
        free(path);
        return -1;
    }
    for (uint32_t i = 0; i < F->depth; i++) {
        if (F->stack[i].dev != (uint64_t)sb.st_dev || F->stack[i].ino != (uint64_t)sb.st_ino) continue;
        char chain[1024];
        size_t k = 0;
        for (uint32_t j = i; j < F->depth && k < sizeof chain; j++)
            k += (size_t)snprintf(chain + k, sizeof chain - k, "%s -> ", F->dg.files[F->stack[j].file].path);
        if (k < sizeof chain) snprintf(chain + k, sizeof chain - k, "%s", path);
        rs_diag_error(&F->dg, *at, "include cycle: %s", chain);
        fclose(fp);
        free(path);
        return -1;
    }
    /* read it all, within the cap on total input */
    uint64_t room = RS_FRONT_MAX_SOURCE - F->source_bytes;
    size_t cap = sb.st_size > 0 && (uint64_t)sb.st_size < room ? (size_t)sb.st_size + 2 : 65536, len = 0;
    char *text = rs_xmalloc(cap);
    for (;;) {
        len += fread(text + len, 1, cap - len - 1, fp);
        if (len > room || feof(fp) || ferror(fp)) break;
        if (cap - len - 1 == 0) {
            cap *= 2;
            text = rs_xrealloc(text, cap);
        }
    }
    int rerr = ferror(fp);
    fclose(fp);
    if (rerr) {
        open_error(F, at, path, "read error");
        free(text);
        free(path);
        return -1;
    }
    if (len > room) {
        if (at) rs_diag_error(&F->dg, *at, "too much layout text: more than %llu MiB in all files",
                              (unsigned long long)(RS_FRONT_MAX_SOURCE >> 20));
        else rs_diag_error_at(&F->dg, path, "too much layout text: more than %llu MiB",
                              (unsigned long long)(RS_FRONT_MAX_SOURCE >> 20));
        free(text);
        free(path);
        return -1;
    }
    text[len] = 0;
    F->source_bytes += len;
    F->nloads++;
    uint32_t fi = rs_diag_add_file(&F->dg, path, text, len);
    free(path);

    if (F->depth == F->cap_stack) {
        F->cap_stack = F->cap_stack ? F->cap_stack * 2 : 8;
        F->stack = rs_xrealloc(F->stack, F->cap_stack * sizeof *F->stack);
    }
    F->stack[F->depth].dev = (uint64_t)sb.st_dev;
    F->stack[F->depth].ino = (uint64_t)sb.st_ino;
    F->stack[F->depth].file = fi;
    F->depth++;
    ast_arena arena = {0};
    rs_parse_ctx P = {.dg = &F->dg, .arena = &arena, .sym_arena = &F->sym_arena, .syms = &F->syms, .file = fi,
                      .max_expr_depth = F->opts->max_expr_depth, .on_stmt = on_stmt, .cookie = cookie};
    uint32_t nerr = rs_ast_parse(&P, text, len);
    rs_ast_arena_free(&arena);
    F->depth--;
    if (nerr) {
        if (at) rs_diag_note(&F->dg, *at, "included from here");
        return -1;
    }
    return 0;
}

/* ---- the front end ---- */
static uint64_t source_fingerprint(const rs_front *F, const rs_front_opts *o)
{
    uint64_t h = rs_hash64(RS_VERSION_STRING, strlen(RS_VERSION_STRING), 0);
    for (uint32_t i = 0; i < F->dg.nfiles; i++) {
        uint64_t n = F->dg.files[i].len;
        h = rs_hash64(&n, sizeof n, h);
        h = rs_hash64(F->dg.files[i].text, F->dg.files[i].len, h);
    }
    for (uint32_t i = 0; i < o->ndefines; i++) {
        const char *nm = o->defines[i].name;
        h = rs_hash64(nm, strlen(nm) + 1, h);
        int64_t v = o->defines[i].value;
        unsigned char b[8];
        for (int k = 0; k < 8; k++) b[k] = (unsigned char)((uint64_t)v >> (8 * k));
        h = rs_hash64(b, sizeof b, h);
        /* the text as written too: a text const takes "007" and "7" apart */
        const char *t = o->defines[i].text ? o->defines[i].text : "";
        h = rs_hash64(t, strlen(t) + 1, h);
    }
    return h;
}

int rs_front_load(const char *path, const rs_front_opts *o, rs_ir *ir, FILE *diag)
{
    rs_front_opts def;
    if (!o) {
        rs_front_opts_default(&def);
        o = &def;
    }
    memset(ir, 0, sizeof *ir);
    rs_front *F = rs_xcalloc(1, sizeof *F);
    rs_diag_init(&F->dg, diag, o->max_errors);
    F->opts = o;
    F->sym_min = rs_ast_intern(&F->syms, &F->sym_arena, "min", 3);
    F->sym_max = rs_ast_intern(&F->syms, &F->sym_arena, "max", 3);
    F->sym_shard = rs_ast_intern(&F->syms, &F->sym_arena, "shard", 5);
    F->sym_replicate = rs_ast_intern(&F->syms, &F->sym_arena, "replicate", 9);
    F->sym_block = rs_ast_intern(&F->syms, &F->sym_arena, "block", 5);
    F->sym_balanced = rs_ast_intern(&F->syms, &F->sym_arena, "balanced", 8);

    for (uint32_t i = 0; i < o->ndefines; i++) {
        const char *nm = o->defines[i].name;
        ast_sym *y = rs_ast_intern(&F->syms, &F->sym_arena, nm, strlen(nm));
        if (y->define >= 0) {
            rs_diag_error_at(&F->dg, "command line", "-D %s given twice", nm);
            F->define_errors++;
        }
        y->define = (int32_t)i;
    }

    uint32_t nerr;
    if (F->define_errors) nerr = F->dg.nerrors;
    else {
        struct rs_sema *S = rs_sema_begin(F, ir);
        int ran = rs_front_run(F, path, NULL, rs_sema_stmt, S) == 0;
        nerr = rs_sema_finish(S, 0, ran);
        if (!ran && !nerr) nerr = 1;
    }
    if (F->dg.hidden_warnings)
        fprintf(diag, "note: %u more warnings not shown\n", F->dg.hidden_warnings);
    ir->define_errors = F->define_errors;
    if (nerr == 0) {
        ir->source_fp = source_fingerprint(F, o);
        ir->nfiles = F->dg.nfiles;
        ir->files = rs_xcalloc(F->dg.nfiles, sizeof *ir->files);
        for (uint32_t i = 0; i < F->dg.nfiles; i++) ir->files[i] = rs_xstrdup(F->dg.files[i].path);
    } else {
        uint32_t de = ir->define_errors;
        rs_ir_free(ir);
        ir->define_errors = de;
    }
    rs_diag_free(&F->dg);
    rs_ast_arena_free(&F->sym_arena);
    rs_ast_symtab_free(&F->syms);
    free(F->stack);
    free(F);
    return (int)nerr;
}

void rs_ir_free(rs_ir *ir)
{
    if (!ir) return;
    rs_layout_free(&ir->L);
    free(ir->tensor_loc);
    free(ir->piece_loc);
    free(ir->mesh_loc);
    free(ir->buffer_loc);
    for (uint32_t i = 0; i < ir->nfiles; i++) free(ir->files[i]);
    free(ir->files);
    memset(ir, 0, sizeof *ir);
}
