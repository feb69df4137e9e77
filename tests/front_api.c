/* front_api.c - tests of the front-end API: the IR it builds (piece grouping, placements, pools,
 * rank tables, locations, fingerprints), -D parsing, limits, determinism, random layouts judged
 * against an element-by-element brute-force checker, and mutated inputs (never a crash or hang). */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ast.h" /* RS_FRONT_MAX_NAME */
#include "ir.h"
#include "util.h"

static int failures;
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                  \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static const char *srcdir;

static void write_file(const char *path, const char *text, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(text, 1, n, f) != n || fclose(f)) rs_die("cannot write %s", path);
}

static char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *t = rs_xmalloc((size_t)len + 1);
    *n = fread(t, 1, (size_t)len, f);
    t[*n] = 0;
    fclose(f);
    return t;
}

/* Load `text` from a scratch file; diagnostics are captured into *diag (caller frees). */
static int load(const char *text, const rs_front_opts *o, rs_ir *ir, char **diag)
{
    write_file("front_api_t.layout", text, strlen(text));
    size_t dn = 0;
    char *buf = NULL;
    FILE *d = open_memstream(&buf, &dn);
    int n = rs_front_load("front_api_t.layout", o, ir, d);
    fclose(d);
    if (diag) *diag = buf;
    else free(buf);
    return n;
}

/* Load `text` that must be valid: 0 with *ir loaded and no diagnostics, 1 loaded with diagnostics (printed),
 * -1 not loaded (diagnostics printed; nothing to free). */
static int load_clean(const char *text, rs_ir *ir)
{
    char *diag;
    int n = load(text, NULL, ir, &diag);
    if (n || diag[0]) fputs(diag, stderr);
    int rc = n ? -1 : diag[0] != 0;
    free(diag);
    return rc;
}

/* ---------------------------------------------------------------- -D parsing */
static void test_defines(void)
{
    rs_define d;
    char err[200];
    CHECK(rs_parse_define("L=3", &d, err, sizeof err) == 0 && !strcmp(d.name, "L") && d.value == 3 && !d.text_only &&
          !strcmp(d.text, "3"));
    free((void *)d.name);
    CHECK(rs_parse_define("big_N2=-9223372036854775808", &d, err, sizeof err) == 0 && d.value == INT64_MIN);
    free((void *)d.name);
    CHECK(rs_parse_define("X=1_000", &d, err, sizeof err) == 0 && d.value == 1000);
    free((void *)d.name);
    CHECK(rs_parse_define("X=9223372036854775808", &d, err, sizeof err) != 0);
    CHECK(rs_parse_define("X=-9223372036854775809", &d, err, sizeof err) != 0);
    CHECK(rs_parse_define("3X=1", &d, err, sizeof err) != 0);
    CHECK(rs_parse_define("X", &d, err, sizeof err) != 0 && strstr(err, "missing"));
    CHECK(rs_parse_define("=4", &d, err, sizeof err) != 0);
    CHECK(rs_parse_define("X-Y=4", &d, err, sizeof err) != 0);
    /* values that are not numbers are text, for a text const: the front end refuses them for a number */
    CHECK(rs_parse_define("X=4k", &d, err, sizeof err) == 0 && d.text_only && !strcmp(d.text, "4k"));
    free((void *)d.name);
    CHECK(rs_parse_define("X=", &d, err, sizeof err) == 0 && d.text_only && !strcmp(d.text, ""));
    free((void *)d.name);
    CHECK(rs_parse_define("P=vp1.decoder.", &d, err, sizeof err) == 0 && d.text_only && !strcmp(d.name, "P") &&
          !strcmp(d.text, "vp1.decoder."));
    free((void *)d.name);
    CHECK(rs_parse_define("X=a\"b", &d, err, sizeof err) != 0 && strstr(err, "neither"));
    CHECK(rs_parse_define("X=a{b", &d, err, sizeof err) != 0);
    CHECK(rs_parse_define("X=a}", &d, err, sizeof err) != 0);
    CHECK(rs_parse_define("X=a\tb", &d, err, sizeof err) != 0);
    char big[RS_FRONT_MAX_NAME + 8];
    memset(big, 'a', sizeof big - 1);
    big[0] = 'X', big[1] = '=', big[sizeof big - 1] = 0;
    CHECK(rs_parse_define(big, &d, err, sizeof err) != 0); /* 4101 bytes of text */
    big[RS_FRONT_MAX_NAME + 2] = 0;
    CHECK(rs_parse_define(big, &d, err, sizeof err) == 0 && strlen(d.text) == RS_FRONT_MAX_NAME);
    free((void *)d.name);
}

/* ---------------------------------------------------------------- text consts */
/* tests/front/text_consts.layout builds its names from text consts: every buffer name, exactly. */
static void test_text_consts(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/front/text_consts.layout", srcdir);
    rs_front_opts o;
    rs_front_opts_default(&o);
    rs_ir ir;
    FILE *null = fopen("/dev/null", "w");
    int n = rs_front_load(path, &o, &ir, null);
    fclose(null);
    CHECK(n == 0);
    if (n) return;
    static const char *const want[][2] = {
        {"src", "vp1.decoder.layers.0.weight{*}"}, {"src", "vp1.decoder.layers.1.weight{*}"},
        {"src", "mtp.layers.0.mtp_model_layer.weight{*}"}, {"src", "check.0"}, {"src", "check.1"},
        {"src", "check.2"}, {"src", "{x}.norm"}, {"dst", "model.layers.0.weight"},
        {"dst", "model.layers.1.weight"}, {"dst", "model.layers.2.mtp_block.weight"}, {"dst", "vp1.norm"},
    };
    size_t nw = sizeof want / sizeof *want;
    CHECK(ir.L.nbuffers == nw);
    for (size_t i = 0; i < nw; i++) {
        int found = 0;
        for (uint32_t b = 0; b < ir.L.nbuffers; b++)
            found |= !strcmp(ir.L.buffers[b].name, want[i][1]) &&
                     ir.L.buffers[b].side == (!strcmp(want[i][0], "src") ? RS_SRC : RS_DST);
        if (!found) fprintf(stderr, "text_consts: no %s buffer '%s'\n", want[i][0], want[i][1]);
        CHECK(found);
    }
    CHECK(ir.L.ntensors == 4 && !strcmp(ir.L.tensors[2].name, "mtp.layers.0.mtp_model_layer.w"));
    uint64_t fp = ir.source_fp;
    rs_ir_free(&ir);
    /* -D on a text const sets its text, digits included ("007" is not "7") */
    static const char *const defs[][2] = {
        {"NONE=x", "vp1.xnorm"}, {"NONE=007", "vp1.007norm"}, {"NONE=7", "vp1.7norm"}};
    uint64_t fps[3];
    for (int k = 0; k < 3; k++) {
        rs_define d;
        char err[200];
        CHECK(rs_parse_define(defs[k][0], &d, err, sizeof err) == 0);
        o.defines = &d;
        o.ndefines = 1;
        null = fopen("/dev/null", "w");
        n = rs_front_load(path, &o, &ir, null);
        fclose(null);
        CHECK(n == 0);
        int found = 0;
        for (uint32_t b = 0; n == 0 && b < ir.L.nbuffers; b++) found |= !strcmp(ir.L.buffers[b].name, defs[k][1]);
        if (!found) fprintf(stderr, "text_consts: -D %s gives no buffer '%s'\n", defs[k][0], defs[k][1]);
        CHECK(found);
        fps[k] = ir.source_fp;
        if (n == 0) rs_ir_free(&ir);
        free((void *)d.name);
    }
    CHECK(fps[0] != fp && fps[1] != fps[2] && fps[0] != fps[1]);
}

/* ---------------------------------------------------------------- the IR */
static void test_ir(void)
{
    const char *text = "topology { domains = [0..2, [3, 2], 4..6]; nic_gbps = 100; nvlink_gbps = 900; }\n" /* 1 */
                       "mesh a [pp = 2, tp = 2] = ranks [0, 1, 2, 3];\n"                                  /* 2 */
                       "mesh b [tp = 2] = ranks [5, 4];\n"                                                /* 3 */
                       "tensor x : bf16[8, 4];\n"                                                         /* 4 */
                       "tensor y : fp32[6];\n"                                                            /* 5 */
                       "dst x[0:4, :] on b { tp: shard(0) } as \"xb\" : [4, 4] [0:2, :];\n"               /* 6 */
                       "src y on a { tp: shard(0), pp = 1 } as \"y\";\n"                                  /* 7 */
                       "src x on a { tp: shard(1), pp = 0, } as \"x\";\n"                                 /* 8 */
                       "dst x[4:8, :] on b { tp: shard(0) } as \"xb\" : [4, 4] [2:4, :];\n"               /* 9 */
                       "dst y on b as \"y\";\n";                                                          /* 10 */
    rs_ir ir;
    char *diag;
    /* line 8 has a trailing comma: a syntax error with position */
    CHECK(load(text, NULL, &ir, &diag) == 1);
    CHECK(strstr(diag, "front_api_t.layout:8:36: error: syntax error") != NULL);
    free(diag);

    char fixed[2048];
    snprintf(fixed, sizeof fixed, "%s", text);
    char *comma = strstr(fixed, "pp = 0, }");
    memmove(comma + 6, comma + 7, strlen(comma + 7) + 1);
    int n = load_clean(fixed, &ir);
    CHECK(n == 0);
    if (n < 0) return;
    const rs_layout *L = &ir.L;
    CHECK(L->topo.world == 6 && L->topo.ndomains == 3 && L->topo.domain_size == 0);
    uint32_t dom[6] = {0, 0, 1, 1, 2, 2};
    CHECK(!memcmp(L->topo.domain_of, dom, sizeof dom));
    CHECK(L->topo.nic_gbps == 100 && L->topo.nvlink_gbps == 900);
    CHECK(L->nmeshes == 2 && !strcmp(L->meshes[1].name, "b") && L->meshes[1].nranks == 2);
    CHECK(L->meshes[1].ranks[0] == 5 && L->meshes[1].ranks[1] == 4);
    CHECK(L->meshes[1].index_of[4] == 1 && L->meshes[1].index_of[5] == 0 && L->meshes[1].index_of[0] == -1);
    CHECK(L->meshes[0].index_of[3] == 3 && L->meshes[0].index_of[5] == -1);
    CHECK(!strcmp(L->meshes[0].axis[1], "tp") && L->meshes[0].size[0] == 2);
    CHECK(L->ntensors == 2 && !strcmp(L->tensors[0].name, "x") && L->tensors[1].dtype == RS_DT_FP32);
    /* grouped per tensor: src first, then dst, each in source order */
    CHECK(L->tensors[0].piece_begin == 0 && L->tensors[0].nsrc == 1 && L->tensors[0].ndst == 2);
    CHECK(L->tensors[1].piece_begin == 3 && L->tensors[1].nsrc == 1 && L->tensors[1].ndst == 1);
    uint32_t lines[5] = {8, 6, 9, 7, 10};
    for (int i = 0; i < 5; i++) CHECK(ir.piece_loc[i].line == lines[i] && ir.piece_loc[i].col == 1);
    CHECK(L->npieces == 5);
    const rs_piece *p = &L->pieces[0];
    CHECK(p->tensor == 0 && p->mesh == 0 && p->side == RS_SRC && p->nplace == 2 && p->slice == RS_NONE &&
          p->box == RS_NONE);
    /* places in written order */
    CHECK(L->places[p->place].kind == RS_PLACE_SHARD && L->places[p->place].axis == 1 && L->places[p->place].dim == 1);
    CHECK(L->places[p->place + 1].kind == RS_PLACE_PIN && L->places[p->place + 1].axis == 0 &&
          L->places[p->place + 1].arg == 0);
    p = &L->pieces[2];
    CHECK(p->slice != RS_NONE && L->i64[p->slice] == 4 && L->i64[p->slice + 1] == 0 && L->i64[p->slice + 2] == 8 &&
          L->i64[p->slice + 3] == 4);
    CHECK(p->box != RS_NONE && L->i64[p->box] == 2 && L->i64[p->box + 2] == 4 && L->i64[p->box + 3] == 4);
    const rs_buffer *b = &L->buffers[p->buffer];
    CHECK(!strcmp(b->name, "xb") && b->side == RS_DST && b->ndim == 2 && b->shape[0] == 4 && b->shape[1] == 4);
    CHECK(L->nbuffers == 4 && L->buffers[L->pieces[0].buffer].ndim == 0 && L->buffers[L->pieces[0].buffer].side == RS_SRC);
    CHECK(L->pieces[3].buffer != L->pieces[4].buffer); /* "y" on each side: separate buffers */
    CHECK(!strcmp(L->buffers[L->pieces[3].buffer].name, "y") && !strcmp(L->buffers[L->pieces[4].buffer].name, "y"));
    /* placement math through the shared functions */
    int64_t c[1] = {1}, lo[2], hi[2];
    CHECK(rs_piece_block(L, &L->pieces[2], c, lo, hi) == 8 && lo[0] == 6 && hi[0] == 8 && lo[1] == 0 && hi[1] == 4);
    CHECK(ir.tensor_loc[1].line == 5 && ir.tensor_loc[1].col == 8);
    CHECK(ir.mesh_loc[1].line == 3 && ir.mesh_loc[1].col == 6);
    CHECK(ir.buffer_loc[L->pieces[1].buffer].line == 6);
    CHECK(ir.nfiles == 1 && !strcmp(ir.files[0], "front_api_t.layout"));
    uint64_t fp = ir.source_fp;
    rs_ir_free(&ir);

    /* fingerprints: same text -> same; a -D or a changed byte -> different */
    CHECK(load(fixed, NULL, &ir, NULL) == 0 && ir.source_fp == fp);
    rs_ir_free(&ir);
    rs_front_opts o;
    rs_front_opts_default(&o);
    char with_const[2100];
    snprintf(with_const, sizeof with_const, "const K = 1;\n%s", fixed);
    CHECK(load(with_const, &o, &ir, NULL) == 0);
    uint64_t fp1 = ir.source_fp;
    rs_ir_free(&ir);
    rs_define d = {.name = "K", .value = 2};
    o.defines = &d;
    o.ndefines = 1;
    CHECK(load(with_const, &o, &ir, NULL) == 0 && ir.source_fp != fp1 && ir.source_fp != fp);
    rs_ir_free(&ir);
}

/* ---------------------------------------------------------------- mesh views and balanced shards */
static void test_views_balanced(void)
{
    const char *text = "topology { domain_size = 4; nic_gbps = 400; nvlink_gbps = 3600; }\n"
                       "mesh infer [dp = 2, pp = 2, tp = 3] = ranks 2..14;\n"
                       "mesh ep [pp, ep = dp * tp] = infer;\n" /* wrong way round: a syntax error */
                       "tensor w : bf16[10, 4];\n"
                       "src w on infer as \"w\";\n"
                       "dst w on ep { pp = 1, ep: shard(0, balanced) } as \"wb\";\n"
                       "dst w[0:3, :] on ep { pp = 0, ep: shard(0, balanced), } as \"wc\";\n";
    rs_ir ir;
    char *diag;
    CHECK(load(text, NULL, &ir, &diag) >= 1);
    CHECK(strstr(diag, "front_api_t.layout:3:") && strstr(diag, "syntax error"));
    free(diag);
    char fixed[1024];
    snprintf(fixed, sizeof fixed, "%s", text);
    char *v = strstr(fixed, "mesh ep [pp, ep = dp * tp] = infer;");
    memcpy(v, "mesh ep = infer [pp, ep = dp * tp];", 35);
    char *comma = strstr(fixed, "), }");
    memmove(comma + 1, comma + 2, strlen(comma + 2) + 1);
    int n = load_clean(fixed, &ir);
    CHECK(n == 0);
    if (n < 0) return;
    const rs_layout *L = &ir.L;
    /* infer's rank = 2 + 6 dp + 3 pp + tp; the view's (pp, ep = 3 dp + tp) in row-major order */
    static const int32_t want_ranks[12] = {2, 3, 4, 8, 9, 10, 5, 6, 7, 11, 12, 13};
    CHECK(L->nmeshes == 2 && L->meshes[1].naxes == 2 && L->meshes[1].size[0] == 2 && L->meshes[1].size[1] == 6);
    CHECK(!strcmp(L->meshes[1].axis[0], "pp") && !strcmp(L->meshes[1].axis[1], "ep"));
    CHECK(L->meshes[1].nranks == 12 && !memcmp(L->meshes[1].ranks, want_ranks, sizeof want_ranks));
    /* 10 rows over 6: 2, 2, 2, 2, 1, 1 (torch.chunk would give 2, 2, 2, 2, 2, 0); 3 rows over 6: 1, 1, 1, 0.. */
    static const int64_t wb[6][2] = {{0, 2}, {2, 4}, {4, 6}, {6, 8}, {8, 9}, {9, 10}};
    static const int64_t wc[6][2] = {{0, 1}, {1, 2}, {2, 3}, {3, 3}, {3, 3}, {3, 3}};
    const rs_piece *pb = NULL, *pc = NULL;
    for (uint32_t i = 0; i < L->npieces; i++) {
        const char *bn = L->buffers[L->pieces[i].buffer].name;
        if (!strcmp(bn, "wb")) pb = &L->pieces[i];
        if (!strcmp(bn, "wc")) pc = &L->pieces[i];
    }
    CHECK(pb && pc && L->places[pb->place + 1].arg == RS_SHARD_BALANCED);
    for (int64_t e = 0; pb && pc && e < 6; e++) {
        int64_t c[2] = {1, e}, lo[2], hi[2];
        CHECK(rs_piece_block(L, pb, c, lo, hi) == (wb[e][1] - wb[e][0]) * 4 && lo[0] == wb[e][0] && hi[0] == wb[e][1]);
        c[0] = 0;
        CHECK(rs_piece_block(L, pc, c, lo, hi) == (wc[e][1] - wc[e][0]) * 4 && lo[0] == wc[e][0] && hi[0] == wc[e][1]);
    }
    rs_ir_free(&ir);
}

/* ---------------------------------------------------------------- limits */
static void expect_error(const char *text, const rs_front_opts *o, const char *needle)
{
    rs_ir ir;
    char *diag;
    int n = load(text, o, &ir, &diag);
    CHECK(n > 0);
    if (!strstr(diag, needle)) {
        fprintf(stderr, "expected '%s' in:\n%s", needle, diag);
        failures++;
    }
    CHECK(ir.L.npieces == 0 && ir.L.pieces == NULL); /* nothing to free on failure */
    rs_ir_free(&ir);
    free(diag);
}

static void test_limits(void)
{
    const char *head = "topology { domain_size = 4; }\nmesh m [x = 2] = ranks 0..2;\n";
    char t[4096];
    rs_front_opts o;

    rs_front_opts_default(&o);
    CHECK(o.max_errors == 20 && o.max_include_depth == 32 && o.max_expr_depth == 256);
    o.max_tensors = 5;
    snprintf(t, sizeof t, "%sfor i in 0..10 { tensor \"t{i}\" : bf16[2]; }\n", head);
    expect_error(t, &o, "tensor limit");

    rs_front_opts_default(&o);
    o.max_pieces = 3;
    snprintf(t, sizeof t, "%stensor w : bf16[2];\nfor i in 0..10 { dst w on m as \"w{i}\"; }\n", head);
    expect_error(t, &o, "piece limit");

    rs_front_opts_default(&o);
    o.max_ranks = 64;
    snprintf(t, sizeof t, "topology { domain_size = 4; }\nmesh m [x = 100] = ranks 0..100;\n");
    expect_error(t, &o, "rank limit");
    snprintf(t, sizeof t, "topology { domain_size = 4; world = 65; }\n");
    expect_error(t, &o, "rank limit");

    rs_front_opts_default(&o);
    o.max_iterations = 50;
    snprintf(t, sizeof t, "%sfor i in 0..10 { for j in 0..10 { } }\n", head);
    expect_error(t, &o, "limit of 50 loop iterations");

    rs_front_opts_default(&o);
    o.max_expr_depth = 4;
    snprintf(t, sizeof t, "%sconst A = 1 + 1 + 1 + 1 + 1;\n", head);
    expect_error(t, &o, "nested too deeply (more than 4 levels)");

    rs_front_opts_default(&o);
    o.max_include_depth = 1;
    write_file("front_api_i1.layout", "include \"front_api_i2.layout\";\n", 31);
    write_file("front_api_i2.layout", "const Q = 1;\n", 13);
    snprintf(t, sizeof t, "%sinclude \"front_api_i1.layout\";\n", head);
    expect_error(t, &o, "includes nested too deeply");
    o.max_include_depth = 2;
    rs_ir ir;
    CHECK(load(t, &o, &ir, NULL) == 0 && ir.nfiles == 3);
    rs_ir_free(&ir);

    /* an include that is a pipe nobody writes: refused at once, not waited on (a hang here is the bug) */
    rs_front_opts_default(&o);
    unlink("front_api_pipe");
    CHECK(mkfifo("front_api_pipe", 0600) == 0);
    snprintf(t, sizeof t, "%sinclude \"front_api_pipe\";\n", head);
    expect_error(t, &o, "cannot read 'front_api_pipe': not a regular file");
    unlink("front_api_pipe");

    rs_front_opts_default(&o);
    o.max_errors = 1;
    snprintf(t, sizeof t, "%sconst A = Q1;\nconst B = Q2;\nconst C = Q3;\n", head);
    expect_error(t, &o, "too many errors (stopped after 1)");

    /* -D of a name that is no top-level const: a command-line error, flagged apart */
    rs_front_opts_default(&o);
    rs_define d = {.name = "NOPE", .value = 1};
    o.defines = &d;
    o.ndefines = 1;
    snprintf(t, sizeof t, "%sconst NOPF = 2;\n", head);
    CHECK(load(t, &o, &ir, NULL) > 0 && ir.define_errors == 1);
    rs_ir_free(&ir);

    /* a missing main file */
    char *diag;
    size_t dn;
    FILE *f = open_memstream(&diag, &dn);
    CHECK(rs_front_load("front_api_does_not_exist.layout", NULL, &ir, f) == 1);
    fclose(f);
    CHECK(strstr(diag, "front_api_does_not_exist.layout: error: cannot read") != NULL);
    free(diag);
}

/* ---------------------------------------------------------------- determinism */
static void test_determinism(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/front/qwen3_235b.layout", srcdir);
    rs_front_opts o;
    rs_front_opts_default(&o);
    rs_define d[2] = {{.name = "L", .value = 3}, {.name = "E", .value = 16}};
    o.defines = d;
    o.ndefines = 2;
    rs_ir a, b;
    FILE *null = fopen("/dev/null", "w");
    CHECK(rs_front_load(path, &o, &a, null) == 0);
    CHECK(rs_front_load(path, &o, &b, null) == 0);
    fclose(null);
    CHECK(a.source_fp == b.source_fp && a.L.npieces == b.L.npieces && a.L.ntensors == b.L.ntensors);
    CHECK(!memcmp(a.L.pieces, b.L.pieces, a.L.npieces * sizeof *a.L.pieces));
    CHECK(!memcmp(a.L.places, b.L.places, a.L.nplaces * sizeof *a.L.places));
    CHECK(a.L.ni64 == b.L.ni64 && !memcmp(a.L.i64, b.L.i64, a.L.ni64 * sizeof *a.L.i64));
    for (uint32_t t = 0; t < a.L.ntensors; t++) CHECK(!strcmp(a.L.tensors[t].name, b.L.tensors[t].name));
    /* every explicit-box piece: the local block of each holding rank has the box's element count */
    for (uint32_t i = 0; i < a.L.npieces; i++) {
        const rs_piece *p = &a.L.pieces[i];
        const rs_buffer *bf = &a.L.buffers[p->buffer];
        if (!bf->ndim) continue;
        const rs_mesh *m = &a.L.meshes[p->mesh];
        for (uint32_t k = 0; k < m->nranks; k++) {
            int64_t c[RS_MAX_DIMS], lo[RS_MAX_DIMS], hi[RS_MAX_DIMS], sh[RS_MAX_DIMS], blo[RS_MAX_DIMS],
                bhi[RS_MAX_DIMS];
            rs_mesh_coord(m, k, c);
            if (!rs_piece_holds(&a.L, p, c)) continue;
            int64_t n = rs_piece_block(&a.L, p, c, lo, hi), want = 1;
            uint32_t nd = rs_piece_buffer_box(&a.L, p, lo, hi, sh, blo, bhi);
            for (uint32_t x = 0; x < nd; x++) want *= bhi[x] - blo[x];
            CHECK(n == want);
        }
    }
    rs_ir_free(&a);
    rs_ir_free(&b);
}

/* ---------------------------------------------------------------- random layouts vs brute force */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return n ? (uint32_t)(rng % n) : 0;
}

typedef struct {
    int naxes;
    int64_t size[3];
    int start, nranks;
} gmesh;

typedef struct {
    int axis, kind, dim; /* kind: RS_PLACE_* */
    int64_t arg;
} gplace;

typedef struct {
    int tensor, side, mesh, nplace;
    int64_t lo[3], hi[3];
    gplace pl[3];
    int buf;           /* index into gbuf */
    int64_t off, len;  /* explicit: box [off, off + len) of a 1-D buffer */
} gpiece;

typedef struct {
    int side, explicit_;
    int64_t K;
} gbuf;

typedef struct {
    int nmeshes, ntensors, npieces, nbufs;
    gmesh m[3];
    int ndim[3];
    int64_t shape[3][3];
    gpiece p[18];
    gbuf b[24];
} glayout;

static void coord_of(const gmesh *m, int lin, int64_t *c)
{
    for (int a = m->naxes - 1; a >= 0; a--) {
        c[a] = lin % m->size[a];
        lin /= (int)m->size[a];
    }
}

/* reference semantics: does the rank at c hold p, and which block */
static int gblock(const glayout *G, const gpiece *p, const int64_t *c, int64_t *lo, int64_t *hi)
{
    for (int i = 0; i < p->nplace; i++)
        if (p->pl[i].kind == RS_PLACE_PIN && c[p->pl[i].axis] != p->pl[i].arg) return 0;
    int nd = G->ndim[p->tensor];
    memcpy(lo, p->lo, sizeof p->lo);
    memcpy(hi, p->hi, sizeof p->hi);
    for (int i = 0; i < p->nplace; i++) {
        const gplace *q = &p->pl[i];
        if (q->kind != RS_PLACE_SHARD) continue;
        rs_shard_interval(lo[q->dim], hi[q->dim], G->m[p->mesh].size[q->axis], q->arg, c[q->axis], &lo[q->dim],
                          &hi[q->dim]);
    }
    (void)nd;
    return 1;
}

static int64_t gcount(int nd, const int64_t *lo, const int64_t *hi)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= hi[d] - lo[d];
    return n;
}

static void gen_layout(glayout *G, char *out, size_t cap)
{
    memset(G, 0, sizeof *G);
    size_t k = 0;
#define OUT(...) (k += (size_t)snprintf(out + k, cap - k, __VA_ARGS__))
    OUT("topology { domain_size = 2; }\n");
    G->nmeshes = 1 + (int)rnd(3);
    for (int i = 0; i < G->nmeshes; i++) {
        gmesh *m = &G->m[i];
        m->naxes = 1 + (int)rnd(3);
        m->nranks = 1;
        OUT("mesh m%d [", i);
        for (int a = 0; a < m->naxes; a++) {
            m->size[a] = 1 + rnd(3);
            m->nranks *= (int)m->size[a];
            OUT("%sa%d = %lld", a ? ", " : "", a, (long long)m->size[a]);
        }
        m->start = (int)rnd(5);
        OUT("] = ranks %d..%d;\n", m->start, m->start + m->nranks);
    }
    G->ntensors = 1 + (int)rnd(3);
    for (int t = 0; t < G->ntensors; t++) {
        G->ndim[t] = 1 + (int)rnd(3);
        OUT("tensor t%d : bf16[", t);
        for (int d = 0; d < G->ndim[t]; d++) {
            G->shape[t][d] = 1 + rnd(6);
            OUT("%s%lld", d ? ", " : "", (long long)G->shape[t][d]);
        }
        OUT("];\n");
    }
    int next_unique = 0;
    for (int t = 0; t < G->ntensors; t++) {
        for (int side = 0; side < 2; side++) {
            int np = 1 + (int)rnd(3);
            for (int q = 0; q < np; q++) {
                gpiece *p = &G->p[G->npieces++];
                p->tensor = t;
                p->side = side;
                p->mesh = (int)rnd((uint32_t)G->nmeshes);
                const gmesh *m = &G->m[p->mesh];
                int nd = G->ndim[t];
                int whole = rnd(2);
                for (int d = 0; d < nd; d++) {
                    int64_t n = G->shape[t][d];
                    p->lo[d] = whole ? 0 : rnd((uint32_t)n);
                    p->hi[d] = whole ? n : p->lo[d] + 1 + rnd((uint32_t)(n - p->lo[d]));
                }
                int64_t longest[3];
                for (int d = 0; d < nd; d++) longest[d] = p->hi[d] - p->lo[d];
                for (int a = 0; a < m->naxes; a++) {
                    int r = (int)rnd(7);
                    gplace *g = &p->pl[p->nplace];
                    g->axis = a;
                    if (r == 0) continue; /* unnamed: replicated */
                    if (r == 1) g->kind = RS_PLACE_REPLICATE;
                    else if (r == 2) {
                        g->kind = RS_PLACE_PIN;
                        g->arg = rnd((uint32_t)m->size[a]);
                    } else {
                        g->kind = RS_PLACE_SHARD;
                        g->dim = (int)rnd((uint32_t)nd);
                        int64_t n = m->size[a], L = longest[g->dim];
                        if (r == 5) { /* fixed block that covers its parent */
                            g->arg = (L + n - 1) / n + rnd(2);
                            if (g->arg < 1) g->arg = 1;
                            longest[g->dim] = g->arg < L ? g->arg : L;
                        } else {
                            if (r == 6) g->arg = RS_SHARD_BALANCED; /* longest block: also ceil(L / n) */
                            longest[g->dim] = (L + n - 1) / n;
                        }
                    }
                    p->nplace++;
                }
                /* buffer: implicit, or a box in a 1-D explicit buffer sized for the first holder */
                int64_t c[3], lo[3], hi[3], first = -1;
                for (int r = 0; r < m->nranks && first < 0; r++) {
                    coord_of(m, r, c);
                    if (gblock(G, p, c, lo, hi)) first = gcount(nd, lo, hi);
                }
                int name = (int)rnd(3);
                int want_explicit = rnd(2) && first > 0 && first <= 64 + name;
                /* pools: names e0..e2 are explicit (K = 64), i0..i2 implicit, u* unique implicit */
                if (want_explicit) {
                    p->buf = -1;
                    for (int b = 0; b < G->nbufs; b++)
                        if (G->b[b].side == side && G->b[b].explicit_ && G->b[b].K == 64 + name) p->buf = b;
                    if (p->buf < 0) {
                        p->buf = G->nbufs++;
                        G->b[p->buf] = (gbuf){side, 1, 64 + name};
                    }
                    p->len = first;
                    p->off = rnd((uint32_t)(G->b[p->buf].K - first + 1));
                } else if (rnd(2)) {
                    p->buf = -1;
                    for (int b = 0; b < G->nbufs; b++)
                        if (G->b[b].side == side && !G->b[b].explicit_ && G->b[b].K == name) p->buf = b;
                    if (p->buf < 0) {
                        p->buf = G->nbufs++;
                        G->b[p->buf] = (gbuf){side, 0, name};
                    }
                } else {
                    p->buf = G->nbufs++;
                    G->b[p->buf] = (gbuf){side, 0, 1000 + next_unique++};
                }
                OUT("%s t%d", side ? "dst" : "src", t);
                if (!whole) {
                    OUT("[");
                    for (int d = 0; d < nd; d++) OUT("%s%lld:%lld", d ? ", " : "", (long long)p->lo[d], (long long)p->hi[d]);
                    OUT("]");
                }
                OUT(" on m%d {", p->mesh);
                for (int i = 0; i < p->nplace; i++) {
                    const gplace *g = &p->pl[i];
                    OUT("%s a%d", i ? "," : "", g->axis);
                    if (g->kind == RS_PLACE_REPLICATE) OUT(": replicate");
                    else if (g->kind == RS_PLACE_PIN) OUT(" = %lld", (long long)g->arg);
                    else if (g->arg == RS_SHARD_BALANCED) OUT(": shard(%d, balanced)", g->dim);
                    else if (g->arg) OUT(": shard(%d, block = %lld)", g->dim, (long long)g->arg);
                    else OUT(": shard(%d)", g->dim);
                }
                const gbuf *B = &G->b[p->buf];
                if (B->explicit_)
                    OUT(" } as \"e%lld\" : [%lld] [%lld:%lld];\n", (long long)B->K, (long long)B->K, (long long)p->off,
                        (long long)(p->off + p->len));
                else OUT(" } as \"i%lld\";\n", (long long)B->K);
            }
        }
    }
#undef OUT
}

/* 0 when valid; else a bitmask: 1 box count, 2 overlap, 4 not covered */
static int brute_force(const glayout *G)
{
    int bad = 0;
    enum { W = 32, K = 70 };
    /* explicit: per (buffer, rank) cell owners; implicit: per (buffer, rank) holder */
    static uint8_t cell[24][W][K];
    static uint8_t held[24][W];
    memset(cell, 0, sizeof cell);
    memset(held, 0, sizeof held);
    static uint8_t have[3][6 * 6 * 6];
    memset(have, 0, sizeof have);
    for (int side = 0; side < 2; side++) {
        for (int i = 0; i < G->npieces; i++) {
            const gpiece *p = &G->p[i];
            if (p->side != side) continue;
            const gmesh *m = &G->m[p->mesh];
            const gbuf *B = &G->b[p->buf];
            int nd = G->ndim[p->tensor];
            for (int r = 0; r < m->nranks; r++) {
                int64_t c[3], lo[3], hi[3];
                coord_of(m, r, c);
                if (!gblock(G, p, c, lo, hi)) continue;
                int rank = m->start + r;
                int64_t n = gcount(nd, lo, hi);
                if (B->explicit_) {
                    if (n != p->len) bad |= 1;
                    for (int64_t x = p->off; x < p->off + p->len; x++) {
                        if (cell[p->buf][rank][x]) bad |= 2;
                        cell[p->buf][rank][x] = 1;
                    }
                } else if (n > 0) {
                    if (held[p->buf][rank]) bad |= 2;
                    held[p->buf][rank] = 1;
                }
                /* elements */
                int64_t e[3];
                for (e[0] = lo[0]; e[0] < hi[0]; e[0]++)
                    for (e[1] = nd > 1 ? lo[1] : 0; e[1] < (nd > 1 ? hi[1] : 1); e[1]++)
                        for (e[2] = nd > 2 ? lo[2] : 0; e[2] < (nd > 2 ? hi[2] : 1); e[2]++) {
                            int idx = (int)(e[0] * 36 + e[1] * 6 + e[2]);
                            if (side == 0) have[p->tensor][idx] = 1;
                            else if (!have[p->tensor][idx]) bad |= 4;
                        }
            }
        }
    }
    return bad;
}

static void test_random(int rounds)
{
    static char text[16384];
    glayout G;
    rs_front_opts o;
    rs_front_opts_default(&o);
    o.max_errors = 100;
    int valid = 0, invalid = 0;
    for (int it = 0; it < rounds; it++) {
        gen_layout(&G, text, sizeof text);
        int want = brute_force(&G);
        rs_ir ir;
        char *diag;
        int n = load(text, &o, &ir, &diag);
        int got = 0;
        if (strstr(diag, "elements, but the local block")) got |= 1;
        if (strstr(diag, "overlap in")) got |= 2;
        if (strstr(diag, "no source piece holds")) got |= 4;
        /* a piece with a wrong box is dropped, so what it would overlap or cover is not judged:
         * then only the box error must be there; otherwise the kinds must match exactly */
        int agree = (n == 0) == (want == 0);
        if (want & 1) agree &= (got & 1) != 0;
        else agree &= got == want;
        if (n && !got) agree = 0; /* an error of another kind: the generator makes none */
        if (!agree) {
            fprintf(stderr, "random layout %d: brute force %d, front end %d errors (kinds %d)\n%s---\n%s", it, want, n,
                    got, text, diag);
            failures++;
            free(diag);
            rs_ir_free(&ir);
            return;
        }
        if (n == 0) valid++;
        else invalid++;
        free(diag);
        rs_ir_free(&ir);
    }
    printf("random layouts: %d valid, %d invalid, all agree with the brute-force checker\n", valid, invalid);
    CHECK(valid > rounds / 10 && invalid > rounds / 10);
}

/* ---------------------------------------------------------------- mutated inputs */
static void test_mutations(int rounds)
{
    static const char *names[] = {"basic", "control", "expressions", "slices_boxes", "shards", "names",
                                  "placements", "meshes", "topology_domains", "text_consts"};
    static const char *tokens[] = {"{", "}", "[", "]", "..", "\"", "{x}", "for i in 0..99999999 { ", "if 1 {",
                                   "const T = \"{T}{T}\";", "? \"a\" : ", "{CHUNK}{CHUNK}",
                                   "9999999999999999999999", "-9223372036854775807 - 1", "include \"front_api_t.layout\";",
                                   ":", ";", "shard(", "block = 0", "/ 0", "% 0", "\n", "\xff", "#", "(((((((((("};
    rs_front_opts o;
    rs_front_opts_default(&o);
    o.max_iterations = 200000;
    o.max_tensors = 100000;
    FILE *null = fopen("/dev/null", "w");
    int ok = 0, err = 0;
    for (int it = 0; it < rounds; it++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/front/%s.layout", srcdir, names[it % (sizeof names / sizeof *names)]);
        size_t n;
        char *t = read_file(path, &n);
        if (!t) rs_die("cannot read %s", path);
        char *m = rs_xmalloc(n * 2 + 256);
        memcpy(m, t, n);
        size_t len = n;
        int ops = 1 + (int)rnd(4);
        for (int k = 0; k < ops; k++) {
            size_t at = len ? rnd((uint32_t)len) : 0;
            switch (rnd(4)) {
            case 0: m[at] = (char)rnd(256); break;                      /* flip a byte */
            case 1: len = at; break;                                      /* truncate */
            case 2: {                                                     /* delete a range */
                size_t e = at + rnd(20);
                if (e > len) e = len;
                memmove(m + at, m + e, len - e);
                len -= e - at;
                break;
            }
            default: {                                                    /* insert a token */
                const char *tok = tokens[rnd(sizeof tokens / sizeof *tokens)];
                size_t tl = strlen(tok);
                if (len + tl > n * 2 + 200) break;
                memmove(m + at + tl, m + at, len - at);
                memcpy(m + at, tok, tl);
                len += tl;
            }
            }
        }
        write_file("front_api_t.layout", m, len);
        rs_ir ir;
        int e = rs_front_load("front_api_t.layout", &o, &ir, null);
        if (e) err++;
        else ok++;
        rs_ir_free(&ir);
        free(m);
        free(t);
    }
    fclose(null);
    printf("mutated layouts: %d rejected, %d still valid, no crash\n", err, ok);
}

/* Scratch files live in a fresh directory, on tmpfs when there is one (rewriting a file on some
 * disks costs milliseconds, and this test writes thousands). */
static char scratch[PATH_MAX];
static void enter_scratch(void)
{
    const char *bases[] = {getenv("TMPDIR"), "/dev/shm", "/tmp", "."};
    for (size_t i = 0; i < sizeof bases / sizeof *bases; i++) {
        if (!bases[i]) continue;
        snprintf(scratch, sizeof scratch, "%s/front_api.XXXXXX", bases[i]);
        if (mkdtemp(scratch) && chdir(scratch) == 0) return;
    }
    rs_die("no scratch directory");
}

static void leave_scratch(void)
{
    const char *files[] = {"front_api_t.layout", "front_api_i1.layout", "front_api_i2.layout"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) unlink(files[i]);
    if (chdir("/") == 0) rmdir(scratch);
}

int main(int argc, char **argv)
{
    static char src[PATH_MAX];
    if (!realpath(argc > 1 ? argv[1] : "tests", src)) rs_die("no test directory %s", argc > 1 ? argv[1] : "tests");
    srcdir = src;
    enter_scratch();
    test_defines();
    test_ir();
    test_text_consts();
    test_views_balanced();
    test_limits();
    test_determinism();
    int rounds = argc > 2 ? atoi(argv[2]) : 3000; /* more for a longer campaign */
    test_random(rounds);
    test_mutations(rounds);
    leave_scratch();
    if (failures) {
        fprintf(stderr, "front_api: %d failures\n", failures);
        return 1;
    }
    printf("front_api: ok\n");
    return 0;
}
