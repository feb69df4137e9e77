/* fmt_tool.c - test driver for the plan-format tools without the rest of reshardc:
 *   fmt_tool write OUT [VARIANT]   write the fixture plan (VARIANT 1: b routed differently, 2: coalesced
 *                                  messages; for diff tests)
 *   fmt_tool dump|diff ARGS...     run compiler/cmd_dump.c / cmd_diff.c exactly as reshardc does */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "fixture.h"
#include "plan.h"

/* Variant 1: rank 3 gets b over the network from rank 0 instead of from rank 2 over NVLink, and the
 * staging budget is halved. */
/* Variant 2: the same transfer with rank 0's w and b for rank 2 coalesced into one staging message
 * (an op carrying several tensors) and received as one by rank 2: per tensor, nothing changes. */
static void coalesce(rs_plan *P)
{
    rs_rank_prog *g0 = &P->ranks[0], *g2 = &P->ranks[2];
    g0->staging_bytes = 56;
    rs_desc d3;
    rs_prog_desc(g0, 3, &d3);
    d3.offset = 44; /* second half of w moves after b */
    rs_prog_desc_set(g0, 3, &d3);
    rs_desc bsrc = {1, 1, 0, {32}, {1}}, bst = {RS_LOC_STAGING, 1, 12, {32}, {1}};
    g0->ndescs = 4; /* descriptors 4 and 5 anew */
    rs_prog_desc_add(g0, &bsrc);
    rs_prog_desc_add(g0, &bst);
    g0->ops[2] = (rs_op){.code = RS_OP_PACK, .tensor = 1, .src = 4, .dst = 5, .bytes = 32};
    g0->ops[3] = (rs_op){.code = RS_OP_SEND, .tensor = RS_NONE, .peer = 2, .loc = RS_LOC_STAGING, .bytes = 44};
    g0->ops[4] = (rs_op){.code = RS_OP_SEND, .tensor = 0, .peer = 3, .loc = RS_LOC_STAGING, .off = 44, .bytes = 12};
    /* rank 2: one RECV of 44 bytes from rank 0 instead of 12 + 32 */
    g2->ops[0] = (rs_op){.code = RS_OP_RECV, .tensor = RS_NONE, .peer = 0, .loc = RS_LOC_STAGING, .bytes = 44};
    g2->ops[2] = g2->ops[3];
    g2->ops[3] = g2->ops[4];
    g2->ops[4] = g2->ops[5];
    g2->ops[5] = g2->ops[6];
    g2->nops = 6;
    g2->steps[0].nops = 4;
    g2->steps[1].op_begin = 4;
}

/* Variant 3: the source buffers "layers.w" and "e.src" as buffer groups (format 1.1; every op already stays
 * inside one member, as tests/format/test_groups.c checks): a grouped seed for the plan fuzzer. */
static void group(rs_plan *P, uint32_t b, const char *name)
{
    P->layout.buffers[b].name = rs_layout_name(&P->layout, name, strlen(name));
    P->layout.buffers[b].group = 1;
}

static void variant(rs_plan *P, int v)
{
    if (v == 3) {
        group(P, 0, "layers.{*}.w");
        group(P, 4, "e.{*}.src");
        return;
    }
    if (v == 2) coalesce(P);
    if (v != 1) return;
    P->staging_budget /= 2;
    rs_rank_prog *g0 = &P->ranks[0], *g2 = &P->ranks[2], *g3 = &P->ranks[3];
    /* rank 0: one more zero-copy SEND of b, to rank 3 */
    g0->ops[g0->nops] = g0->ops[g0->nops - 1];
    g0->ops[g0->nops].peer = 3;
    g0->nops++;
    g0->steps[0].nops++;
    /* rank 2: its NVL step only receives e now */
    g2->ops[5] = g2->ops[6];
    g2->nops--;
    g2->steps[1].nops--;
    /* rank 3: b arrives on the NET lane from rank 0 */
    g3->ops[4].peer = 0;
    rs_op recv_b = g3->ops[4];
    memmove(&g3->ops[3], &g3->ops[2], 2 * sizeof g3->ops[0]); /* ops 2,3 (UNPACK, COPY) move up */
    g3->ops[2] = recv_b;
    g3->steps[0].nops = 5;
    g3->steps[1].op_begin = 5;
    g3->steps[1].nops = 1;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "write")) {
        rs_plan P;
        char err[512];
        fx_build(&P);
        variant(&P, argc > 3 ? atoi(argv[3]) : 0);
        if (rs_plan_write_file(&P, argv[2], err, sizeof err)) {
            fprintf(stderr, "fmt_tool: %s\n", err);
            return 1;
        }
        rs_plan_free(&P);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "dump")) return rs_cmd_dump(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "diff")) return rs_cmd_diff(argc - 1, argv + 1);
    fputs("usage: fmt_tool write OUT [VARIANT] | dump ARGS | diff ARGS\n", stderr);
    return 2;
}
