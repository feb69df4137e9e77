/* format_load.c - plan.bin load benchmark: time to load and verify one rank's program (what a worker
 * does at start-up) and the whole plan (what `reshardc verify` does), on a given plan or on a synthetic
 * plan of DeepSeek-V3 scale (61 layers x 256 experts on 256 + 256 ranks, ~50k ops per rank).
 *   format_load PLAN [REPS]        time the loads of PLAN
 *   format_load --synth OUT        write the synthetic plan to OUT (then time it with the first form) */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "plan.h"
#include "util.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- synthetic DeepSeek-V3-sized plan ---- */
enum { NL = 61, NE = 256, PP = 16, EP = 16, TPI = 32, DPI = 8, H = 7168, F = 2048, NSRC = 256, NDST = 256 };

static const char *nm(rs_layout *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *nm(rs_layout *L, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return rs_layout_name(L, buf, (size_t)n);
}

static void synth(rs_plan *P)
{
    memset(P, 0, sizeof *P);
    rs_layout *L = &P->layout;
    uint32_t world = NSRC + NDST;
    L->topo = (rs_topology){world, world / 8, NULL, 8, 400, 3600};
    L->topo.domain_of = rs_xmalloc(world * sizeof(uint32_t));
    for (uint32_t r = 0; r < world; r++) L->topo.domain_of[r] = r / 8;
    L->meshes = rs_xcalloc(2, sizeof *L->meshes);
    L->nmeshes = 2;
    const char *mn[2] = {"train_moe", "infer"};
    const char *ax[2][2] = {{"pp", "ep"}, {"dp", "tp"}};
    int64_t sz[2][2] = {{PP, EP}, {DPI, TPI}};
    for (int i = 0; i < 2; i++) {
        rs_mesh *m = &L->meshes[i];
        m->name = nm(L, "%s", mn[i]);
        m->naxes = 2;
        for (int a = 0; a < 2; a++) m->axis[a] = nm(L, "%s", ax[i][a]), m->size[a] = sz[i][a];
        m->nranks = 256;
        m->ranks = rs_xmalloc(256 * sizeof(int32_t));
        m->index_of = rs_xmalloc(world * sizeof(int32_t));
        for (uint32_t r = 0; r < world; r++) m->index_of[r] = -1;
        for (int k = 0; k < 256; k++) m->ranks[k] = i * 256 + k, m->index_of[i * 256 + k] = k;
    }
    uint32_t nt = NL * NE * 2;
    L->tensors = rs_xcalloc(nt, sizeof *L->tensors);
    L->pieces = rs_xcalloc(2 * nt, sizeof *L->pieces);
    L->places = rs_xcalloc(3 * nt, sizeof *L->places);
    L->i64 = rs_xcalloc(6 * nt, sizeof *L->i64);
    L->buffers = rs_xcalloc(NL * 16 * 2 + NL * 2, sizeof *L->buffers);
    for (int l = 0; l < NL; l++) /* destination stacked expert buffers */
        for (int w = 0; w < 2; w++) {
            rs_buffer *b = &L->buffers[L->nbuffers++];
            b->name = nm(L, "model.layers.%d.mlp.experts.%s", l, w ? "w2_weight" : "w13_weight");
            b->side = RS_DST, b->dtype = RS_DT_BF16, b->ndim = 3;
            b->shape[0] = NE, b->shape[1] = w ? H : 2 * F / TPI, b->shape[2] = w ? F / TPI : H;
        }
    for (int l = 0; l < NL; l++)
        for (int k = 0; k < 16; k++)
            for (int w = 0; w < 2; w++) {
                rs_buffer *b = &L->buffers[L->nbuffers++];
                b->name = nm(L, "decoder.layers.%d.mlp.experts.%s.weight%d", l, w ? "linear_fc2" : "linear_fc1", k);
                b->side = RS_SRC, b->dtype = RS_DT_BF16;
            }
    for (int l = 0; l < NL; l++)
        for (int e = 0; e < NE; e++)
            for (int w = 0; w < 2; w++) {
                rs_tensor *t = &L->tensors[L->ntensors];
                t->name = nm(L, "%s.%d.%d", w ? "w2" : "w13", l, e);
                t->dtype = RS_DT_BF16;
                t->ndim = w ? 2 : 3;
                if (w) t->shape[0] = H, t->shape[1] = F;
                else t->shape[0] = 2, t->shape[1] = F, t->shape[2] = H;
                t->piece_begin = L->npieces, t->nsrc = 1, t->ndst = 1;
                rs_piece *p = &L->pieces[L->npieces++];
                p->tensor = L->ntensors, p->mesh = 0, p->side = RS_SRC, p->slice = RS_NONE, p->box = RS_NONE;
                p->buffer = (uint32_t)(NL * 2 + (l * 16 + e % 16) * 2 + w);
                p->place = L->nplaces, p->nplace = 2;
                L->places[L->nplaces++] = (rs_place){0, RS_PLACE_PIN, 0, 0, l * PP / NL};
                L->places[L->nplaces++] = (rs_place){1, RS_PLACE_PIN, 0, 0, e / (NE / EP)};
                p = &L->pieces[L->npieces++];
                p->tensor = L->ntensors, p->mesh = 1, p->side = RS_DST, p->slice = RS_NONE;
                p->buffer = (uint32_t)(l * 2 + w);
                p->place = L->nplaces, p->nplace = 1;
                L->places[L->nplaces++] = (rs_place){1, RS_PLACE_SHARD, (uint8_t)(w ? 1 : 1), 0, 0};
                p->box = L->ni64;
                int64_t *v = &L->i64[L->ni64];
                v[0] = e, v[1] = 0, v[2] = 0, v[3] = e + 1, v[4] = L->buffers[p->buffer].shape[1],
                v[5] = L->buffers[p->buffer].shape[2];
                L->ni64 += 6;
                L->ntensors++;
            }

    /* Programs: one shared by every destination rank, one by every source rank (the loader's cost
     * does not depend on which tensors they name). Steps of 256 ops alternate with NVL steps. */
    P->staging_budget = 256ull << 20;
    P->source_fp = 0x5eed;
    P->ranks = rs_xcalloc(world, sizeof *P->ranks);
    rs_rank_prog dst = {0}, src = {0};
    dst.nbindings = NL * 2;
    dst.bindings = rs_xcalloc(dst.nbindings, sizeof *dst.bindings);
    for (uint32_t i = 0; i < dst.nbindings; i++) {
        rs_binding *x = &dst.bindings[i];
        const rs_buffer *b = &L->buffers[i];
        x->buffer = i, x->ndim = 3;
        memcpy(x->shape, b->shape, sizeof x->shape);
        x->bytes = (uint64_t)(b->shape[0] * b->shape[1] * b->shape[2]) * 2;
    }
    dst.staging_bytes = P->staging_budget;
    uint32_t nops = nt + nt / 2, cap_steps = nops / 256 + 2;
    dst.ops = rs_xcalloc(nops, sizeof *dst.ops);
    dst.steps = rs_xcalloc(cap_steps, sizeof *dst.steps);
    uint64_t soff = 0;
    for (uint32_t t = 0; t < nt; t++) {
        if (dst.nops % 256 == 0 || dst.nsteps == 0) {
            dst.steps[dst.nsteps] = (rs_step){RS_LANE_NET, {0}, 0, 0, dst.nops, 0};
            dst.nsteps++;
            soff = 0;
        }
        rs_step *st = &dst.steps[dst.nsteps - 1];
        int l = (int)(t / (NE * 2)), e = (int)(t / 2 % NE), w = (int)(t % 2);
        uint32_t peer = (uint32_t)((l * PP / NL) * EP + e / (NE / EP));
        const rs_binding *x = &dst.bindings[l * 2 + w];
        uint64_t per = x->bytes / NE;
        rs_op *o = &dst.ops[dst.nops++];
        *o = (rs_op){.code = RS_OP_RECV, .tensor = t, .peer = peer, .loc = (uint32_t)(l * 2 + w),
                     .off = (uint64_t)e * per, .bytes = per};
        st->nops++;
        if (w) { /* w2 through staging: RECV + UNPACK of a [7168, 64] box */
            o->loc = RS_LOC_STAGING, o->off = soff;
            rs_desc a = {RS_LOC_STAGING, 1, soff, {per}, {1}};
            rs_desc b = {(uint32_t)(l * 2 + w), 2, (uint64_t)e * per, {H, (F / TPI) * 2}, {(F / TPI) * 2, 1}};
            uint32_t ia = rs_prog_desc_add(&dst, &a), ib = rs_prog_desc_add(&dst, &b);
            rs_op *u = &dst.ops[dst.nops++];
            *u = (rs_op){.code = RS_OP_UNPACK, .tensor = t, .src = ia, .dst = ib, .bytes = per};
            st->nops++;
            soff += per;
        }
    }
    /* Source: each holds 2 x 16 experts of ~4 layers; sends each tensor's TPI slices to the 32 ranks
     * of one engine (PACK the non-contiguous w13 halves, SEND). */
    uint32_t nsrc_t = 4 * 16 * 2;
    src.nbindings = 4 * 16 * 2;
    src.bindings = rs_xcalloc(src.nbindings, sizeof *src.bindings);
    for (uint32_t i = 0; i < src.nbindings; i++) {
        rs_binding *x = &src.bindings[i];
        x->buffer = NL * 2 + i;
        int w = (int)(i % 2);
        x->ndim = w ? 2 : 3;
        if (w) x->shape[0] = H, x->shape[1] = F;
        else x->shape[0] = 2, x->shape[1] = F, x->shape[2] = H;
        x->bytes = (uint64_t)2 * F * H * (w ? 1 : 2);
    }
    src.staging_bytes = P->staging_budget;
    uint32_t sops = nsrc_t * DPI * TPI * 2;
    src.ops = rs_xcalloc(sops, sizeof *src.ops);
    src.steps = rs_xcalloc(sops / 256 + 2, sizeof *src.steps);
    for (uint32_t i = 0; i < nsrc_t; i++)
        for (uint32_t d = 0; d < DPI * TPI; d++) {
            if (src.nops % 256 == 0) {
                src.steps[src.nsteps] = (rs_step){RS_LANE_NET, {0}, 0, 0, src.nops, 0};
                src.nsteps++;
                soff = 0;
            }
            rs_step *st = &src.steps[src.nsteps - 1];
            const rs_binding *x = &src.bindings[i];
            uint64_t per = x->bytes / TPI, tp = d % TPI;
            if (i % 2 == 0) {
                rs_desc a = {i, 3, tp * (F / TPI) * H * 2, {2, F / TPI, H * 2}, {(uint64_t)F * H * 2, H * 2, 1}};
                rs_desc b = {RS_LOC_STAGING, 1, soff, {per}, {1}};
                uint32_t ia = rs_prog_desc_add(&src, &a), ib = rs_prog_desc_add(&src, &b);
                src.ops[src.nops++] = (rs_op){.code = RS_OP_PACK, .tensor = i, .src = ia, .dst = ib, .bytes = per};
                src.ops[src.nops++] = (rs_op){.code = RS_OP_SEND, .tensor = i, .peer = NSRC + d, .loc = RS_LOC_STAGING,
                                              .off = soff, .bytes = per};
                soff += per;
                st->nops += 2;
            } else {
                src.ops[src.nops++] =
                    (rs_op){.code = RS_OP_SEND, .tensor = i, .peer = NSRC + d, .loc = i, .off = 0, .bytes = per};
                st->nops++;
            }
        }
    for (uint32_t r = 0; r < world; r++) {
        rs_rank_prog *g = &P->ranks[r];
        *g = r < NSRC ? src : dst;
        g->rank = r;
        g->loaded = 1;
    }
}

static long peak_rss_mib(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024;
}

int main(int argc, char **argv)
{
    char err[512];
    if (argc == 3 && !strcmp(argv[1], "--synth")) {
        rs_plan P;
        synth(&P);
        double t0 = now();
        if (rs_plan_write_file(&P, argv[2], err, sizeof err)) {
            fprintf(stderr, "format_load: %s\n", err);
            return 1;
        }
        uint64_t ops = 0;
        for (uint32_t r = 0; r < P.layout.topo.world; r++) ops += P.ranks[r].nops;
        printf("synthetic plan: %u ranks, %u tensors, %u pieces, %llu ops; encode+write %.2f s\n", P.layout.topo.world,
               P.layout.ntensors, P.layout.npieces, (unsigned long long)ops, now() - t0);
        /* the ranks share two programs: free them once */
        rs_rank_prog s = P.ranks[0], d = P.ranks[P.layout.topo.world - 1];
        free(s.bindings), free(s.ops), free(s.dpool), free(s.doff), free(s.steps);
        free(d.bindings), free(d.ops), free(d.dpool), free(d.doff), free(d.steps);
        free(P.ranks);
        rs_layout_free(&P.layout);
        return 0;
    }
    if (argc < 2) {
        fputs("usage: format_load PLAN [REPS] | format_load --synth OUT\n", stderr);
        return 2;
    }
    int reps = argc > 2 ? atoi(argv[2]) : 20;
    struct stat st;
    if (stat(argv[1], &st)) {
        perror(argv[1]);
        return 1;
    }
    rs_plan P;
    if (rs_plan_load_file(argv[1], 0, &P, err, sizeof err)) {
        fprintf(stderr, "format_load: %s\n", err);
        return 1;
    }
    uint32_t world = P.layout.topo.world;
    rs_plan_free(&P);
    printf("%-34s %12s\n", "plan.bin", argv[1]);
    printf("%-34s %12.1f MiB\n", "size", (double)st.st_size / 1048576.0);
    uint32_t probe[3] = {0, world / 2, world - 1};
    for (int k = 0; k < 3; k++) {
        double best = 1e9, sum = 0;
        uint32_t nops = 0;
        for (int i = 0; i < reps; i++) {
            double t0 = now();
            if (rs_plan_load_file(argv[1], (int)probe[k], &P, err, sizeof err)) {
                fprintf(stderr, "format_load: %s\n", err);
                return 1;
            }
            double dt = now() - t0;
            nops = P.ranks[probe[k]].nops;
            rs_plan_free(&P);
            sum += dt;
            if (dt < best) best = dt;
        }
        char label[64];
        snprintf(label, sizeof label, "load+verify rank %u (%u ops)", probe[k], nops);
        printf("%-34s %9.2f ms best, %.2f ms mean of %d\n", label, best * 1e3, sum / reps * 1e3, reps);
    }
    double t0 = now();
    if (rs_plan_load_file(argv[1], -1, &P, err, sizeof err)) {
        fprintf(stderr, "format_load: %s\n", err);
        return 1;
    }
    double full = now() - t0;
    uint64_t ops = 0;
    for (uint32_t r = 0; r < world; r++) ops += P.ranks[r].nops;
    t0 = now();
    uint8_t *img;
    size_t n;
    if (rs_plan_encode(&P, &img, &n, err, sizeof err)) {
        fprintf(stderr, "format_load: %s\n", err);
        return 1;
    }
    double enc = now() - t0;
    free(img);
    rs_plan_free(&P);
    printf("%-34s %9.2f s (%llu ops, %.1f bytes/op)\n", "load+verify all ranks", full, (unsigned long long)ops,
           (double)st.st_size / (double)(ops ? ops : 1));
    printf("%-34s %9.2f s\n", "encode all ranks", enc);
    printf("%-34s %9ld MiB\n", "peak RSS", peak_rss_mib());
    return 0;
}
