/* ir.h - the compiler's IR: the elaborated layout (common/layout.h) plus where each object was
 * written in the source, so later passes can still point at a line. Built by the front end
 * (grammar/ + sema.c), consumed by the planner. */
#ifndef RS_IR_H
#define RS_IR_H

#include <stdio.h>

#include "layout.h"

typedef struct {
    uint32_t file; /* index into rs_ir.files */
    uint32_t line, col;
} rs_loc;

typedef struct rs_ir {
    rs_layout L;
    rs_loc *tensor_loc; /* [L.ntensors] */
    rs_loc *piece_loc;  /* [L.npieces] */
    rs_loc *mesh_loc;   /* [L.nmeshes] */
    rs_loc *buffer_loc; /* [L.nbuffers] */
    char **files;       /* paths as given (main file first, then includes) */
    uint32_t nfiles;
    uint64_t source_fp; /* hash of every source text read, the -D values and the compiler version */
    uint32_t define_errors; /* set by rs_front_load even when it fails: how many -D options named no
                               top-level const (a command-line error: exit status 2, not 1) */
} rs_ir;

typedef struct {
    const char *name;
    int64_t value;     /* the value, unless text_only */
    const char *text;  /* the value as written (in the same block as name), a text const's value; NULL: value */
    uint8_t text_only; /* the value is not a decimal integer: only a text const can take it */
} rs_define;

/* Front-end limits: each hit is a clean error at the position that caused it. */
typedef struct {
    const rs_define *defines; /* -D NAME=VALUE, override `const NAME` */
    uint32_t ndefines;
    uint32_t max_errors;      /* default 20 */
    uint64_t max_tensors;     /* default 4,000,000 */
    uint64_t max_pieces;      /* default 4,000,000 */
    uint64_t max_ranks;       /* default 1,048,576 */
    uint64_t max_iterations;  /* total loop iterations, default 100,000,000 */
    uint32_t max_include_depth; /* default 32 */
    uint32_t max_expr_depth;    /* default 256 */
} rs_front_opts;

void rs_front_opts_default(rs_front_opts *o);

/* Parse, elaborate and check `path`. Diagnostics go to `diag` (file:line:col: error: ..., the source
 * line and a caret). Returns the number of errors (0: *ir is valid and owned by the caller). */
int rs_front_load(const char *path, const rs_front_opts *o, rs_ir *ir, FILE *diag);
void rs_ir_free(rs_ir *ir);

/* Parse "NAME=VALUE". VALUE is a number when it is a decimal 64-bit integer (`_` separators allowed), and
 * is kept as text in any case (for a text const: at most RS_FRONT_MAX_NAME bytes, no '"', braces or control
 * characters). Returns 0 with out->name malloc'ed (the caller frees it; out->text lives in the same block),
 * or -1 with a message in err. Whether a value that is not a number is wrong depends on the const it sets:
 * the front end says so then. */
int rs_parse_define(const char *arg, rs_define *out, char *err, size_t errlen);

#endif
