/* diag.h - front-end diagnostics: "file:line:col: error: message", the source line and a caret
 * under the offending token, notes and did-you-mean hints, deduplication and an error limit. */
#ifndef RS_DIAG_H
#define RS_DIAG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A position in a source file: 1-based line and column (columns count bytes), and the length of
 * the token on that line (0: just a caret). */
typedef struct {
    uint32_t file, line, col, len;
} rs_diag_loc;

typedef struct {
    char *path;      /* as given (main file) or as resolved against the including file */
    char *text;      /* whole file, NUL-terminated; owned */
    size_t len;
    uint32_t *lines; /* byte offset of each line start, built on the first diagnostic */
    uint32_t nlines;
} rs_diag_file;

typedef struct rs_diag {
    FILE *out;
    uint32_t max_errors; /* errors shown before "too many errors"; 0 = unlimited */
    uint32_t nerrors;    /* errors reported (shown or deduplicated) */
    uint32_t nwarnings;
    uint32_t hidden_warnings;
    int stop;            /* set once the error limit is passed: callers should wind down */
    int last_shown;      /* did the last error/warning print? notes follow it */
    rs_diag_file *files;
    uint32_t nfiles, cap_files;
    uint64_t *seen; /* open-addressing set of (location, message kind) already reported */
    uint32_t seen_cap, seen_n;
} rs_diag;

void rs_diag_init(rs_diag *d, FILE *out, uint32_t max_errors);
void rs_diag_free(rs_diag *d);
/* Register a source file; takes ownership of text (malloc'ed, NUL at text[len]). Returns its index. */
uint32_t rs_diag_add_file(rs_diag *d, const char *path, char *text, size_t len);

/* An error at loc. Errors of one kind (same format string) at one location are reported once: a
 * mistake inside a loop body is shown for its first iteration only. */
void rs_diag_error(rs_diag *d, rs_diag_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void rs_diag_warning(rs_diag *d, rs_diag_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A note with its source line, shown only when the error or warning it follows was shown. */
void rs_diag_note(rs_diag *d, rs_diag_loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "file:line:col: note: did you mean 'best'?" (no source line); nothing when best is NULL. */
void rs_diag_did_you_mean(rs_diag *d, rs_diag_loc loc, const char *best);
/* An error that belongs to no source position: "prefix: error: message" (prefix may be NULL). */
void rs_diag_error_at(rs_diag *d, const char *prefix, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Loc spanning from a to the end of b when both are on one line (else a). */
rs_diag_loc rs_diag_span(rs_diag_loc a, rs_diag_loc b);

/* Did-you-mean: feed candidates, keep the closest within a small edit distance (optimal string
 * alignment: insertions, deletions, substitutions, adjacent transpositions). Ties keep the first. */
typedef struct {
    const char *want;
    size_t wlen;
    const char *best;
    size_t bestd;
    size_t limit;
} rs_suggest;
void rs_suggest_init(rs_suggest *sg, const char *want, size_t len);
void rs_suggest_add(rs_suggest *sg, const char *cand, size_t len);

#endif
