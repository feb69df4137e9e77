/* ast.h - the layout language's syntax tree, its arena and identifier table; shared by the grammar
 * (grammar/lexer.l, grammar/parser.y), the elaborator (sema.c) and the driver (front.c). */
#ifndef RS_AST_H
#define RS_AST_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "ir.h"

/* ---- arena: every node of a parse lives here and is freed at once ---- */
typedef struct ast_chunk {
    struct ast_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} ast_chunk;

typedef struct {
    ast_chunk *head;
    size_t total; /* bytes allocated, for the memory cap */
} ast_arena;

void *rs_ast_alloc(ast_arena *a, size_t n); /* zeroed, 16-byte aligned */
char *rs_ast_strndup(ast_arena *a, const char *s, size_t n);
void rs_ast_arena_reset(ast_arena *a); /* drop everything, keep one chunk for reuse */
void rs_ast_arena_free(ast_arena *a);

/* A fast hash for the front end's in-memory tables (8 bytes at a time; never stored anywhere). */
static inline uint64_t rs_ast_hash(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        __builtin_memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)p[i] << (8 * i);
    h = (h ^ w) * 0x94d049bb133111ebull;
    return h ^ (h >> 29);
}

/* ---- identifiers: interned once, so names compare by pointer. The elaborator keeps a name's
 * current binding in its symbol (names never shadow each other, so one binding is enough). ---- */
enum { SYM_FREE = 0, SYM_CONST = 1, SYM_LOOPVAR = 2 };

typedef struct ast_sym {
    const char *name;
    uint32_t len;
    uint64_t hash;
    struct ast_sym *chain;
    /* elaboration state */
    uint8_t bound;    /* SYM_* */
    uint8_t poisoned; /* its value failed to evaluate: uses are silently skipped */
    uint8_t toplevel; /* bound at file scope */
    uint8_t is_text;  /* a text const: its value is text, usable only as {name} in a string */
    uint32_t textlen;
    const char *text; /* is_text: the value (malloc'd; freed when the const goes out of scope) */
    int64_t value;
    rs_diag_loc def;
    int32_t mesh;   /* mesh index, -1 when none */
    int32_t define; /* index of the -D overriding it, -1 when none */
} ast_sym;

typedef struct {
    ast_sym **tab;
    uint32_t cap, n;
} ast_symtab;

ast_sym *rs_ast_intern(ast_symtab *t, ast_arena *a, const char *s, size_t len);
void rs_ast_symtab_free(ast_symtab *t);

/* ---- expressions ---- */
enum { EX_INT, EX_NAME, EX_NEG, EX_NOT, EX_BIN, EX_COND, EX_CALL, EX_STR };
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD, OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_AND, OP_OR };

typedef struct ast_expr {
    uint8_t kind, op;
    uint16_t depth;
    uint32_t nargs;
    rs_diag_loc loc; /* the literal, name or operator */
    int64_t ival;
    ast_sym *sym; /* EX_NAME; EX_CALL: the function */
    struct ast_expr *a, *b, *c;
    struct ast_expr *args; /* EX_CALL: linked through next */
    const struct ast_str *str; /* EX_STR: a string literal, a text value (docs/language.md, text consts) */
    struct ast_expr *next; /* lists: dims, shapes, arguments */
} ast_expr;

/* ---- strings: text parts and {expr} interpolations ---- */
typedef struct ast_strpart {
    struct ast_strpart *next;
    const char *text; /* NULL for an interpolation */
    uint32_t len;
    ast_expr *expr;   /* NULL (with text NULL) for `{*}` or `{* + off}`, a member of a buffer group */
    ast_expr *off;    /* `{* + off}`: the offset added to the member index in the name (NULL: none) */
} ast_strpart;

typedef struct ast_str {
    rs_diag_loc loc;
    const char *lit; /* the whole string when it has no interpolation (else NULL) */
    uint32_t litlen;
    ast_strpart *parts;
} ast_str;

/* ---- slices and boxes: `a:b`, `:`, `a:`, `:b`, `i` ---- */
typedef struct ast_item {
    struct ast_item *next;
    rs_diag_loc loc;
    uint8_t index;     /* a single index i (means i:i+1) */
    ast_expr *lo, *hi; /* NULL: open end */
} ast_item;

typedef struct {
    rs_diag_loc loc; /* the brackets */
    ast_item *head;
    uint32_t n;
} ast_items;

/* ---- placements ---- */
typedef struct ast_parg {
    struct ast_parg *next;
    ast_sym *key; /* `key = value`, NULL for a positional argument */
    rs_diag_loc loc;
    ast_expr *value;
} ast_parg;

typedef struct ast_place {
    struct ast_place *next;
    ast_sym *axis;
    rs_diag_loc loc; /* the axis name */
    uint8_t pin;     /* axis = value */
    ast_expr *value;
    ast_sym *fn; /* axis: fn or axis: fn(args) */
    rs_diag_loc fnloc;
    uint8_t call;
    ast_parg *args;
    uint32_t nargs;
} ast_place;

/* ---- rank lists: `a..b`, a single rank, or (domains) a bracketed list ---- */
typedef struct ast_ritem {
    struct ast_ritem *next;
    rs_diag_loc loc;
    ast_expr *lo, *hi;      /* hi NULL: the single rank lo */
    struct ast_ritem *list; /* bracketed list (domains only) */
} ast_ritem;

/* NAME = value (const definitions, mesh axes, topology settings) */
typedef struct ast_def {
    struct ast_def *next;
    ast_sym *sym;
    rs_diag_loc loc;
    ast_expr *value;
    ast_ritem *list; /* topology `domains = [...]` */
    uint8_t is_list;
} ast_def;

typedef struct {
    uint8_t side; /* rs_side */
    ast_str *tensor;
    ast_items *slice; /* NULL: whole tensor */
    ast_sym *mesh;
    rs_diag_loc meshloc;
    ast_place *places;
    uint32_t nplaces;
    rs_diag_loc placesloc;
    ast_str *buffer;
    ast_expr *shape; /* NULL: implicit buffer */
    uint32_t nshape;
    rs_diag_loc shapeloc;
    ast_items *box; /* NULL: the whole buffer */
} ast_piece;

enum { ST_INCLUDE, ST_TOPOLOGY, ST_CONST, ST_MESH, ST_TENSOR, ST_PIECE, ST_FOR, ST_IF, ST_ASSERT };

typedef struct ast_stmt {
    struct ast_stmt *next;
    uint8_t kind;
    rs_diag_loc loc; /* the keyword */
    union {
        struct {
            ast_str *path;
        } inc;
        struct {
            ast_def *items;
        } topo;
        struct {
            ast_def *defs;
        } cons;
        struct {
            ast_sym *name;
            rs_diag_loc nameloc;
            ast_def *axes;
            uint32_t naxes;
            rs_diag_loc axesloc;
            ast_ritem *ranks; /* is_range: one item lo..hi; else the list */
            ast_sym *base;    /* a view `mesh v = base [axes];` (ranksloc: the base's name); NULL otherwise */
            uint8_t is_range;
            rs_diag_loc ranksloc;
        } mesh;
        struct {
            ast_str *name;
            ast_sym *dtype;
            rs_diag_loc dtloc;
            ast_expr *dims;
            uint32_t ndims;
            rs_diag_loc dimsloc;
        } tensor;
        ast_piece *piece;
        struct {
            ast_sym *var;
            rs_diag_loc varloc;
            ast_expr *lo, *hi;
            struct ast_stmt *body;
        } loop;
        struct {
            ast_expr *cond;
            struct ast_stmt *then, *els;
            uint8_t else_if; /* els is a single `if` statement */
        } cond;
        struct {
            ast_expr *cond;
            ast_str *msg; /* NULL: none was written (an error) */
        } check; /* assert cond, "message"; */
    };
} ast_stmt;

/* ---- parsing one file ----
 * Top-level statements are handed to on_stmt one at a time, as soon as each is parsed, and the
 * AST arena is reset after each: memory stays proportional to the largest statement, not to the
 * file (a flat million-line layout parses in constant AST space). Identifiers live in sym_arena,
 * which is never reset. After the first syntax error on_stmt is no longer called. */
typedef struct rs_parse_ctx {
    rs_diag *dg;
    ast_arena *arena;     /* AST nodes of the statement being parsed */
    ast_arena *sym_arena; /* identifiers */
    ast_symtab *syms;
    uint32_t file;
    uint32_t max_expr_depth;
    void (*on_stmt)(void *cookie, ast_stmt *s);
    void *cookie;
    uint32_t nerrors;     /* syntax and lexical errors in this file */
    int too_big;          /* the statement passed RS_FRONT_MAX_AST: parsing stopped */
    const char *last_tok; /* the last token (valid until the next one is read): error messages */
    uint32_t last_len;
} rs_parse_ctx;

/* Parse text (length len) as file P->file. Returns the number of errors. */
uint32_t rs_ast_parse(rs_parse_ctx *P, const char *text, size_t len);

/* ---- the front end's shared state (front.c drives, sema.c elaborates) ---- */
typedef struct rs_front {
    rs_diag dg;
    const rs_front_opts *opts;
    ast_arena sym_arena;
    ast_symtab syms;
    ast_sym *sym_min, *sym_max, *sym_shard, *sym_replicate, *sym_block, *sym_balanced;
    uint64_t source_bytes; /* all text read so far (cap RS_FRONT_MAX_SOURCE) */
    uint32_t nloads;       /* files parsed so far (cap RS_FRONT_MAX_LOADS) */
    /* include stack: device/inode of the files being elaborated, for cycle detection */
    struct rs_front_frame {
        uint64_t dev, ino;
        uint32_t file;
    } *stack;
    uint32_t depth, cap_stack;
    uint32_t define_errors;
} rs_front;

#define RS_FRONT_MAX_SOURCE (256ull << 20) /* bytes of layout text, all files together */
#define RS_FRONT_MAX_LOADS 10000           /* file loads (includes), all together */
#define RS_FRONT_MAX_NAME 4096             /* bytes in one tensor or buffer name */
#define RS_FRONT_MAX_NEST 256              /* nested for/if blocks */
#define RS_FRONT_MAX_MESHES 65536
#define RS_FRONT_MAX_MESH_INDEX (64u << 20) /* meshes x world entries in the rank index tables */
#define RS_FRONT_MAX_EXTENT (INT64_C(1) << 62) /* one tensor or buffer dimension: keeps block math in range */
#define RS_FRONT_MAX_AST (128u << 20)       /* bytes of syntax tree for one top-level statement */
#define RS_FRONT_MAX_STEPS 500000000ull     /* expression nodes evaluated plus statements run */
#define RS_FRONT_MAX_SUGGEST 20000000ull    /* names compared for did-you-mean hints, in all */

/* Read and parse a file, handing each top-level statement to on_stmt. path: the main file as given
 * (at == NULL), or an include's path as written (relative to the file of the include statement at
 * *at). Checks include depth, cycles and the input caps first; the file is on the include stack
 * while its statements run. Returns 0, or -1 after reporting an error (unreadable file, too much
 * input, syntax errors: statements after the first syntax error are not run). */
int rs_front_run(rs_front *F, const char *path, const rs_diag_loc *at, void (*on_stmt)(void *, ast_stmt *),
                 void *cookie);

/* The elaborator (sema.c): begin, run statements (as on_stmt), finish with the checks that need the
 * whole layout. finish returns the error count; complete == 0 (a syntax error stopped the run)
 * skips the whole-layout checks. */
struct rs_sema;
struct rs_sema *rs_sema_begin(rs_front *F, rs_ir *ir);
void rs_sema_stmt(void *sema, ast_stmt *s);
uint32_t rs_sema_finish(struct rs_sema *S, uint32_t main_file, int complete);

#endif
