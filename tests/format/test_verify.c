/* test_verify.c - each structural rule of rs_plan_verify_rank and of the layout checks, broken one at a
 * time on the fixture plan: the check must fail with its reason, and the encoder must refuse the plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "plan.h"
#include "plan_io.h"

typedef void (*mutator)(rs_plan *P);

#define M(name, body)                                                                              \
    static void name(rs_plan *P) { body; }
/* a mutation of descriptor i of rank r (d: a copy, written back) */
#define MD(name, r, i, body)                                                                       \
    static void name(rs_plan *P)                                                                   \
    {                                                                                              \
        rs_desc d;                                                                                 \
        rs_prog_desc(&P->ranks[r], i, &d);                                                         \
        body;                                                                                      \
        rs_prog_desc_set(&P->ranks[r], i, &d);                                                     \
    }

M(peer_outside, P->ranks[0].ops[2].peer = 9)
M(peer_self, P->ranks[0].ops[2].peer = 0)
M(nvl_other_domain, P->ranks[2].ops[5].peer = 0)
M(wait_forward, P->ranks[2].waits[0] = 1)
M(wait_same_lane, P->ranks[2].steps[1].lane = RS_LANE_NET)
M(bad_lane, P->ranks[0].steps[0].lane = 2)
MD(desc_outside, 0, 0, d.offset = 8)
/* rank 2's first UNPACK writes 12 bytes as 2 rows of 6 only 3 apart: it would write bytes twice */
MD(desc_overlap, 2, 1, (d.ndim = 2, d.count[0] = 2, d.count[1] = 6, d.stride[0] = 3, d.stride[1] = 1))
/* rank 0's first PACK reads its 2 rows of 6 bytes only 4 apart: reading a byte twice is allowed */
MD(src_overlap, 0, 0, d.stride[0] = 4)
MD(desc_inner_stride, 0, 0, d.stride[1] = 2)
MD(desc_ndim, 0, 0, d.ndim = 0) /* (a plan in memory holds at most RS_DESC_MAX_DIMS; a file's are checked as read) */
MD(desc_loc, 0, 0, d.loc = 5)
M(staging_small, P->ranks[0].staging_bytes = 20)
M(send_outside, P->ranks[0].ops[3].off = 20)
M(send_overflow, (P->ranks[0].ops[3].off = UINT64_MAX - 4))
M(recv_into_source, (P->ranks[3].ops[4].loc = 2, P->ranks[3].ops[4].bytes = 4))
MD(copy_into_source, 3, 3, d.loc = 2)
M(pack_from_staging, (P->ranks[0].ops[0].src = 1, P->ranks[0].ops[0].dst = 0))
M(op_bytes, P->ranks[0].ops[0].bytes = 11)
MD(copy_sizes, 3, 3, d.count[0] = 3)
M(unknown_opcode, P->ranks[1].ops[1].code = 77)
M(tensor_index, P->ranks[1].ops[1].tensor = 99)
M(desc_index, P->ranks[1].ops[1].src = 99)
M(loc_index, P->ranks[1].ops[2].loc = 7)
M(binding_twice, P->ranks[2].bindings[1].buffer = P->ranks[2].bindings[0].buffer)
M(binding_bytes, P->ranks[2].bindings[0].bytes = 23)
M(binding_shape, (P->ranks[2].bindings[0].shape[0] = 3, P->ranks[2].bindings[0].shape[1] = 4))
M(binding_buffer, P->ranks[2].bindings[0].buffer = 60)
M(op_order, P->ranks[2].steps[1].op_begin = 4)
M(wait_order, P->ranks[2].steps[1].wait_begin = 1)
M(rank_field, P->ranks[1].rank = 2)

static const struct {
    const char *name;
    mutator f;
    uint32_t rank;
    const char *expect;
} cases[] = {
    {"peer outside the world", peer_outside, 0, "rank 0, step 0, op 2 SEND: peer 9 outside the world (4 ranks)"},
    {"peer is self", peer_self, 0, "peer is the rank itself"},
    {"NVLink peer in another domain", nvl_other_domain, 2, "NVLink peer 0 outside the rank's domain"},
    {"wait for a later step", wait_forward, 2, "waits for step 1, not an earlier one"},
    {"wait on the same lane", wait_same_lane, 2, "waits for step 0 on its own lane"},
    {"bad lane", bad_lane, 0, "bad lane 2"},
    {"descriptor outside its binding", desc_outside, 0, "descriptor 0: descriptor outside its location"},
    {"descriptor dims overlap", desc_overlap, 2, "descriptor dims overlap"},
    {"innermost stride", desc_inner_stride, 0, "innermost stride is not 1"},
    {"descriptor dims", desc_ndim, 0, "descriptor dims outside 1..8"},
    {"descriptor location", desc_loc, 0, "location is not a binding"},
    {"staging too small", staging_small, 0, "descriptor 3: descriptor outside its location"},
    {"send outside staging", send_outside, 0, "op 3 SEND: bytes outside staging"},
    {"send offset overflow", send_overflow, 0, "bytes outside staging"},
    {"receive into a source buffer", recv_into_source, 3, "RECV: writes into source buffer 'e.src'"},
    {"copy into a source buffer", copy_into_source, 3, "COPY: writes into source buffer 'e.src'"},
    {"pack from staging", pack_from_staging, 0, "source or destination in the wrong place"},
    {"op byte count", op_bytes, 0, "byte counts differ"},
    {"copy sizes", copy_sizes, 3, "byte counts differ"},
    {"unknown opcode", unknown_opcode, 1, "unknown opcode 77"},
    {"tensor index", tensor_index, 1, "tensor index out of range"},
    {"descriptor index", desc_index, 1, "descriptor index out of range"},
    {"location index", loc_index, 1, "SEND: location is not a binding"},
    {"buffer bound twice", binding_twice, 2, "buffer 'model.w' bound twice"},
    {"binding bytes", binding_bytes, 2, "byte size does not match its shape"},
    {"binding shape", binding_shape, 2, "shape differs from the buffer's"},
    {"binding buffer index", binding_buffer, 2, "buffer index out of range"},
    {"ops out of order", op_order, 2, "ops not in program order"},
    {"waits out of order", wait_order, 2, "waits not in program order"},
    {"rank field", rank_field, 1, "program says rank 2"},
};

/* Layout rules (rs_plan_check_layout), reached through the encoder. */
M(l_world, P->layout.topo.domain_of[3] = 7)
M(l_domain_size, P->layout.topo.domain_of[1] = 1)
M(l_mesh_dup, (P->layout.meshes[0].ranks[1] = 0))
M(l_mesh_rank, P->layout.meshes[0].ranks[1] = 44)
M(l_mesh_size, P->layout.meshes[2].size[0] = 3)
M(l_pin, P->layout.places[2].arg = 2)
M(l_shard_dim, P->layout.places[0].dim = 2)
M(l_shard_block, P->layout.places[0].arg = -2) /* -1 is balanced (1.2); below it nothing */
M(l_axis, P->layout.places[0].axis = 1)
M(l_kind, P->layout.places[0].kind = 7)
M(l_box, P->layout.i64[3] = 5)
M(l_tensor_shape, P->layout.tensors[0].shape[1] = -6)
M(l_tensor_huge, P->layout.tensors[0].shape[1] = INT64_MAX / 2)
M(l_dtype, P->layout.buffers[1].dtype = RS_DT_FP32)
M(l_side, P->layout.pieces[1].side = RS_SRC)
M(l_pieces, P->layout.tensors[2].nsrc = 2)
M(l_bw, P->layout.topo.nic_gbps = -1)
M(l_name, P->layout.tensors[1].name = NULL)

static const struct {
    const char *name;
    mutator f;
    const char *expect;
} lcases[] = {
    {"domain index", l_world, "rank 3 in domain 7 of 2"},
    {"domain size", l_domain_size, "rank 1 in domain 1, not rank / domain size"},
    {"mesh rank twice", l_mesh_dup, "mesh 'train'"},
    {"mesh rank outside", l_mesh_rank, "mesh 'train'"},
    {"mesh size", l_mesh_size, "mesh 'all' has 4 ranks, its axes need 3"},
    {"pin outside its axis", l_pin, "pin outside its axis"},
    {"shard dim", l_shard_dim, "bad shard"},
    {"shard block", l_shard_block, "bad shard"},
    {"placement axis", l_axis, "bad placement axis"},
    {"placement kind", l_kind, "bad placement kind"},
    {"box outside buffer", l_box, "box outside buffer 'e.dst'"},
    {"negative shape", l_tensor_shape, "tensor 'w' shape negative or too large"},
    {"shape overflow", l_tensor_huge, "tensor 'w' shape negative or too large"},
    {"buffer dtype", l_dtype, "buffer 'model.w' side or dtype differs"},
    {"piece side", l_side, "not grouped with it"},
    {"pieces", l_pieces, "tensor 'e' pieces outside the piece table"},
    {"bandwidth", l_bw, "bandwidth not a finite non-negative number"},
    {"null name", l_name, "tensor 1 has no name"},
};

int main(void)
{
    char err[512];
    rs_plan P;
    fx_build(&P);
    for (uint32_t r = 0; r < 4; r++) {
        if (rs_plan_verify_rank(&P, r, err, sizeof err)) {
            fprintf(stderr, "fixture rank %u: %s\n", r, err);
            return 1;
        }
    }
    CHECK(rs_plan_check_layout(&P.layout, err, sizeof err) == 0);
    rs_plan_free(&P);
    int failed = 0;
    fx_build(&P); /* a source descriptor may read bytes twice (one op packs a column block for several peers) */
    src_overlap(&P);
    if (rs_plan_verify_rank(&P, 0, err, sizeof err)) {
        fprintf(stderr, "overlapping source descriptor refused: %s\n", err);
        failed = 1;
    }
    rs_plan_free(&P);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fx_build(&P);
        cases[i].f(&P);
        err[0] = 0;
        int rc = rs_plan_verify_rank(&P, cases[i].rank, err, sizeof err);
        if (rc != -1 || !strstr(err, cases[i].expect) || strncmp(err, "bad plan (", 10)) {
            fprintf(stderr, "%s: got rc %d '%s', want '%s'\n", cases[i].name, rc, err, cases[i].expect);
            failed = 1;
        }
        uint8_t *img;
        size_t n;
        if (rs_plan_encode(&P, &img, &n, err, sizeof err) != -1) {
            fprintf(stderr, "%s: encoder accepted it\n", cases[i].name);
            failed = 1;
            free(img);
        }
        rs_plan_free(&P);
    }
    for (size_t i = 0; i < sizeof lcases / sizeof lcases[0]; i++) {
        fx_build(&P);
        lcases[i].f(&P);
        uint8_t *img;
        size_t n;
        err[0] = 0;
        int rc = rs_plan_encode(&P, &img, &n, err, sizeof err);
        if (rc != -1 || !strstr(err, lcases[i].expect) || strncmp(err, "bad plan (layout: ", 18)) {
            fprintf(stderr, "layout %s: got rc %d '%s', want '%s'\n", lcases[i].name, rc, err, lcases[i].expect);
            failed = 1;
            if (rc == 0) free(img);
        }
        if (lcases[i].f == l_name) P.layout.tensors[1].name = "b"; /* rs_plan_free does not free names */
        rs_plan_free(&P);
    }
    if (!failed)
        printf("verify: %zu rank rules and %zu layout rules each caught\n", sizeof cases / sizeof cases[0],
               sizeof lcases / sizeof lcases[0]);
    return failed;
}
