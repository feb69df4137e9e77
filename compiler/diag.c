/* diag.c - front-end diagnostics: positioned errors with the source line and a caret, notes,
 * did-you-mean suggestions, deduplication of repeats (loop bodies) and the error limit. */
#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void rs_diag_init(rs_diag *d, FILE *out, uint32_t max_errors)
{
    memset(d, 0, sizeof *d);
    d->out = out;
    d->max_errors = max_errors;
}

void rs_diag_free(rs_diag *d)
{
    for (uint32_t i = 0; i < d->nfiles; i++) {
        free(d->files[i].path);
        free(d->files[i].text);
        free(d->files[i].lines);
    }
    free(d->files);
    free(d->seen);
    memset(d, 0, sizeof *d);
}

uint32_t rs_diag_add_file(rs_diag *d, const char *path, char *text, size_t len)
{
    if (d->nfiles == d->cap_files) {
        d->cap_files = d->cap_files ? d->cap_files * 2 : 8;
        d->files = rs_xrealloc(d->files, d->cap_files * sizeof *d->files);
    }
    rs_diag_file *f = &d->files[d->nfiles];
    memset(f, 0, sizeof *f);
    f->path = rs_xstrdup(path);
    f->text = text;
    f->len = len;
    return d->nfiles++;
}

rs_diag_loc rs_diag_span(rs_diag_loc a, rs_diag_loc b)
{
    if (a.file == b.file && a.line == b.line && b.col + b.len >= a.col) a.len = b.col + b.len - a.col;
    return a;
}

/* ---- dedup set: 64-bit keys, open addressing, 0 = empty ---- */
static int seen_insert(rs_diag *d, uint64_t key)
{
    if (!key) key = 1;
    if ((d->seen_n + 1) * 2 > d->seen_cap) {
        uint32_t nc = d->seen_cap ? d->seen_cap * 2 : 64;
        uint64_t *ns = rs_xcalloc(nc, sizeof *ns);
        for (uint32_t i = 0; i < d->seen_cap; i++) {
            uint64_t k = d->seen[i];
            if (!k) continue;
            uint32_t j = (uint32_t)k & (nc - 1);
            while (ns[j]) j = (j + 1) & (nc - 1);
            ns[j] = k;
        }
        free(d->seen);
        d->seen = ns;
        d->seen_cap = nc;
    }
    uint32_t j = (uint32_t)key & (d->seen_cap - 1);
    while (d->seen[j]) {
        if (d->seen[j] == key) return 0;
        j = (j + 1) & (d->seen_cap - 1);
    }
    d->seen[j] = key;
    d->seen_n++;
    return 1;
}

static uint64_t loc_key(rs_diag_loc loc, const char *kind, const char *fmt)
{
    uint32_t v[3] = {loc.file, loc.line, loc.col};
    uint64_t h = rs_hash64(v, sizeof v, 0);
    h = rs_hash64(kind, strlen(kind), h);
    return rs_hash64(fmt, strlen(fmt), h);
}

/* ---- printing ---- */
static const char *file_path(rs_diag *d, uint32_t f) { return f < d->nfiles ? d->files[f].path : "<input>"; }

static void build_lines(rs_diag_file *f)
{
    uint32_t n = 1;
    for (size_t i = 0; i < f->len; i++)
        if (f->text[i] == '\n') n++;
    f->lines = rs_xmalloc((size_t)n * sizeof *f->lines);
    f->nlines = 0;
    f->lines[f->nlines++] = 0;
    for (size_t i = 0; i < f->len; i++)
        if (f->text[i] == '\n') f->lines[f->nlines++] = (uint32_t)(i + 1);
}

#define SHOW_WIDTH 160 /* long lines are shown as a window around the caret */

static void print_source(rs_diag *d, rs_diag_loc loc)
{
    if (loc.file >= d->nfiles || loc.line == 0) return;
    rs_diag_file *f = &d->files[loc.file];
    if (!f->lines) build_lines(f);
    if (loc.line > f->nlines) return;
    const char *s = f->text + f->lines[loc.line - 1];
    const char *e = memchr(s, '\n', (size_t)(f->text + f->len - s));
    if (!e) e = f->text + f->len;
    size_t n = (size_t)(e - s);
    if (n && s[n - 1] == '\r') n--;
    size_t c = loc.col ? loc.col - 1 : 0;
    if (c > n) c = n;
    size_t from = 0, to = n;
    if (c > SHOW_WIDTH / 2) from = c - SHOW_WIDTH / 2;
    if (to - from > SHOW_WIDTH) to = from + SHOW_WIDTH;
    const char *pre = from ? "..." : "";
    fputs(pre, d->out);
    for (size_t i = from; i < to; i++) {
        unsigned char ch = (unsigned char)s[i];
        fputc(ch == '\t' || ch >= 0x20 ? ch : '?', d->out);
    }
    if (to < n) fputs("...", d->out);
    fputc('\n', d->out);
    fputs(from ? "   " : "", d->out);
    for (size_t i = from; i < c; i++) fputc(s[i] == '\t' ? '\t' : ' ', d->out);
    fputc('^', d->out);
    size_t len = loc.len;
    if (c + len > to) len = to > c ? to - c : 0;
    for (size_t i = 1; i < len; i++) fputc('~', d->out);
    fputc('\n', d->out);
}

/* The message, with control bytes shown as '?' (names come from the input). */
static void put_message(rs_diag *d, const char *fmt, va_list ap)
{
    char small[1024], *buf = small;
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n >= (int)sizeof small) {
        buf = rs_xmalloc((size_t)n + 1);
        vsnprintf(buf, (size_t)n + 1, fmt, aq);
    }
    va_end(aq);
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        fputc(c < 0x20 || c == 0x7f ? '?' : c, d->out);
    }
    if (buf != small) free(buf);
}

static void vreport(rs_diag *d, rs_diag_loc loc, const char *kind, const char *fmt, va_list ap, int source)
{
    fprintf(d->out, "%s:%u:%u: %s: ", file_path(d, loc.file), loc.line, loc.col, kind);
    put_message(d, fmt, ap);
    fputc('\n', d->out);
    if (source) print_source(d, loc);
}

void rs_diag_error(rs_diag *d, rs_diag_loc loc, const char *fmt, ...)
{
    d->last_shown = 0;
    if (d->stop) return;
    if (!seen_insert(d, loc_key(loc, "error", fmt))) return;
    if (d->max_errors && d->nerrors >= d->max_errors) {
        fprintf(d->out, "error: too many errors (stopped after %u)\n", d->max_errors);
        d->nerrors++;
        d->stop = 1;
        return;
    }
    d->nerrors++;
    va_list ap;
    va_start(ap, fmt);
    vreport(d, loc, "error", fmt, ap, 1);
    va_end(ap);
    d->last_shown = 1;
}

void rs_diag_warning(rs_diag *d, rs_diag_loc loc, const char *fmt, ...)
{
    d->last_shown = 0;
    if (d->stop) return;
    if (!seen_insert(d, loc_key(loc, "warning", fmt))) return;
    d->nwarnings++;
    if (d->max_errors && d->nwarnings > d->max_errors) {
        d->hidden_warnings++;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vreport(d, loc, "warning", fmt, ap, 1);
    va_end(ap);
    d->last_shown = 1;
}

void rs_diag_note(rs_diag *d, rs_diag_loc loc, const char *fmt, ...)
{
    if (!d->last_shown) return;
    va_list ap;
    va_start(ap, fmt);
    vreport(d, loc, "note", fmt, ap, 1);
    va_end(ap);
}

void rs_diag_did_you_mean(rs_diag *d, rs_diag_loc loc, const char *best)
{
    if (!d->last_shown || !best) return;
    fprintf(d->out, "%s:%u:%u: note: did you mean '", file_path(d, loc.file), loc.line, loc.col);
    for (const unsigned char *p = (const unsigned char *)best; *p; p++) fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, d->out);
    fputs("'?\n", d->out);
}

void rs_diag_error_at(rs_diag *d, const char *prefix, const char *fmt, ...)
{
    d->last_shown = 0;
    if (d->stop) return;
    if (d->max_errors && d->nerrors >= d->max_errors) {
        fprintf(d->out, "error: too many errors (stopped after %u)\n", d->max_errors);
        d->nerrors++;
        d->stop = 1;
        return;
    }
    d->nerrors++;
    if (prefix) fprintf(d->out, "%s: ", prefix);
    fputs("error: ", d->out);
    va_list ap;
    va_start(ap, fmt);
    put_message(d, fmt, ap);
    va_end(ap);
    fputc('\n', d->out);
    d->last_shown = 1;
}

/* ---- did you mean ---- */
void rs_suggest_init(rs_suggest *sg, const char *want, size_t len)
{
    sg->want = want;
    sg->wlen = len;
    sg->best = NULL;
    sg->limit = len <= 1 ? 0 : len <= 3 ? 1 : len <= 6 ? 2 : 3;
    sg->bestd = sg->limit + 1;
}

#define SUGGEST_MAX 64 /* longer names get no suggestion */

void rs_suggest_add(rs_suggest *sg, const char *c, size_t clen)
{
    size_t w = sg->wlen;
    if (!sg->limit || w > SUGGEST_MAX || clen > SUGGEST_MAX) return;
    size_t diff = w > clen ? w - clen : clen - w;
    if (diff >= sg->bestd) return;
    if (clen == w && memcmp(c, sg->want, w) == 0) return; /* the same name is no suggestion */
    /* optimal string alignment distance, three rolling rows */
    size_t rows[3][SUGGEST_MAX + 1];
    size_t *pp = rows[0], *p = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= clen; j++) p[j] = j;
    for (size_t i = 1; i <= w; i++) {
        cur[0] = i;
        size_t rowmin = cur[0];
        for (size_t j = 1; j <= clen; j++) {
            size_t cost = sg->want[i - 1] == c[j - 1] ? 0 : 1;
            size_t v = p[j] + 1;
            if (cur[j - 1] + 1 < v) v = cur[j - 1] + 1;
            if (p[j - 1] + cost < v) v = p[j - 1] + cost;
            if (i > 1 && j > 1 && sg->want[i - 1] == c[j - 2] && sg->want[i - 2] == c[j - 1] && pp[j - 2] + 1 < v)
                v = pp[j - 2] + 1;
            cur[j] = v;
            if (v < rowmin) rowmin = v;
        }
        if (rowmin >= sg->bestd) return; /* cannot get better than what we have */
        size_t *t = pp;
        pp = p;
        p = cur;
        cur = t;
    }
    if (p[clen] < sg->bestd) {
        sg->bestd = p[clen];
        sg->best = c;
    }
}
