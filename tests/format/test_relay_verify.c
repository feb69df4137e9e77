/* test_relay_verify.c - relays (a destination rank forwarding bytes it received, from its destination
 * buffer) through the whole-plan verifier and the CPU-transport replay: a pipelined chain across four
 * domains, relays combined with NVLink fan-out, and broken variants that must be refused with their reason.
 * The planner tests' reference executor (tests/planner/interp.c) is a second opinion on every plan.
 * `test_relay_verify NAME` runs one case. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"
#include "plan.h"
#include "replay.h"
#include "reshard.h"
#include "rt_build.h"

static const char *AX1[] = {"x"};

/* tensor t : fp32[8, 16] = 512 bytes, replicated on every destination rank (implicit buffer "t") */
#define TB 512u
#define H (TB / 2)
#define Q (TB / 4)

enum {
    V_OK,
    V_SAME_STEP,    /* rank 1 relays chunk B in the step that receives it */
    V_NEVER,        /* rank 1 relays chunk B that nobody sends it */
    V_TWICE,        /* rank 1 receives chunk B over chunk A */
    V_WRONG_PACK,   /* rank 2 packs rows 0..2 twice instead of rows 0..2 and 2..4 (wrong data at rank 3) */
    V_WRONG_SEND,   /* rank 1 relays chunk A twice (wrong data at rank 2) */
    V_OTHER_LANE,   /* fan-out: rank 2 forwards over NVLink without waiting for the receive */
    V_STALE_LANE,   /* fan-out: rank 4's NVL relay waits for nothing at all (not even through its lane) */
};

static uint32_t layout(rtb *b, uint32_t first_dst, uint32_t ndst)
{
    int64_t one[] = {1}, nd[] = {ndst}, shape[] = {8, 16};
    uint32_t ms = rtb_mesh(b, "src", 1, AX1, one, 0), md = rtb_mesh(b, "dst", 1, AX1, nd, first_dst);
    uint32_t t = rtb_tensor(b, "t", RS_DT_FP32, 2, shape);
    rtb_piece(b, RS_SRC, t, ms, 0, NULL, "t");
    rtb_piece(b, RS_DST, t, md, 0, NULL, "t"); /* replicated */
    rtb_layout_done(b);
    return t;
}

/* Ranks 0..3, one per domain. Rank 0 holds t and sends it in two chunks A = [0, H), B = [H, 2H) to rank 1,
 * straight into its destination buffer. Rank 1 relays A from its buffer while receiving B, then relays B.
 * Rank 2 receives the same way and relays each chunk to rank 3 through staging (PACK from its destination
 * buffer, the two quarters of a chunk swapped in staging); rank 3 unpacks them into place. */
static void chain(int v, rs_plan *P)
{
    rtb *b = rtb_new(4, 1);
    layout(b, 1, 3);
    uint32_t s0 = rtb_binding(b, 0, "t", RS_SRC), d1 = rtb_binding(b, 1, "t", RS_DST);
    uint32_t d2 = rtb_binding(b, 2, "t", RS_DST), d3 = rtb_binding(b, 3, "t", RS_DST);
    const uint32_t S = RS_LOC_STAGING;
    /* rank 0 */
    rtb_step(b, 0, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 0, 1, 1, s0, 0, H);
    if (v != V_NEVER) {
        rtb_step(b, 0, RS_LANE_NET, 0, NULL);
        rtb_p2p(b, 0, 1, 1, s0, H, H);
    }
    /* rank 1 */
    rtb_step(b, 1, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 1, 0, 0, d1, 0, H);
    rtb_step(b, 1, RS_LANE_NET, 0, NULL);
    if (v != V_NEVER) rtb_p2p(b, 1, 0, 0, d1, v == V_TWICE ? 0 : H, H);
    rtb_p2p(b, 1, 1, 2, d1, 0, H);
    if (v != V_SAME_STEP) rtb_step(b, 1, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 1, 1, 2, d1, v == V_WRONG_SEND ? 0 : H, H);
    /* rank 2 */
    rtb_staging(b, 2, TB);
    rtb_step(b, 2, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 2, 0, 1, d2, 0, H);
    for (uint32_t k = 0; k < 2; k++) { /* step 1: receive B, relay A; step 2: relay B */
        rtb_step(b, 2, RS_LANE_NET, 0, NULL);
        if (k == 0) rtb_p2p(b, 2, 0, 1, d2, H, H);
        uint64_t c = k * H;
        rtb_copy(b, 2, RS_OP_PACK, rtb_range(d2, c, Q), rtb_range(S, c + Q, Q));
        rtb_copy(b, 2, RS_OP_PACK, rtb_range(d2, v == V_WRONG_PACK ? c : c + Q, Q), rtb_range(S, c, Q));
        rtb_p2p(b, 2, 1, 3, S, c, H);
    }
    /* rank 3 */
    rtb_staging(b, 3, TB);
    for (uint32_t k = 0; k < 2; k++) {
        uint64_t c = k * H;
        rtb_step(b, 3, RS_LANE_NET, 0, NULL);
        rtb_p2p(b, 3, 0, 2, S, c, H);
        rtb_copy(b, 3, RS_OP_UNPACK, rtb_range(S, c + Q, Q), rtb_range(d3, c, Q));
        rtb_copy(b, 3, RS_OP_UNPACK, rtb_range(S, c, Q), rtb_range(d3, c + Q, Q));
    }
    rtb_finish(b, P);
}

/* Ranks 0..5 in domains {0,1} {2,3} {4,5}; rank 0 holds t, ranks 2..5 need all of it (rank 1 idle).
 * Rank 0 sends t once into rank 2's buffer. Domain {2,3}: rank 2 fans it out to rank 3 over NVLink
 * straight from its buffer (NVL step waiting for the NET receive), then relays A to rank 4 (NET, later on
 * its lane); rank 3 relays B to rank 5 through staging (NET step waiting for its NVL receive). Domain {4,5}:
 * rank 5 forwards its staging copy of B to rank 4 (the classic fan-out) and unpacks it; rank 4 receives B
 * over NVLink in a step waiting for its NET receive, then relays A to rank 5 from its buffer in a later NVL
 * step that waits for nothing itself: the NET receive is ordered before it through its lane. */
static void fanout(int v, rs_plan *P)
{
    rtb *b = rtb_new(6, 2);
    layout(b, 2, 4);
    const uint32_t S = RS_LOC_STAGING, w0 = 0;
    uint32_t s0 = rtb_binding(b, 0, "t", RS_SRC);
    uint32_t d[6];
    for (uint32_t r = 2; r < 6; r++) d[r] = rtb_binding(b, r, "t", RS_DST);
    rtb_step(b, 0, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 0, 1, 2, s0, 0, TB);
    /* rank 2: 0 NET receive, 1 NVL fan-out to 3, 2 NET relay of A to 4 */
    rtb_step(b, 2, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 2, 0, 0, d[2], 0, TB);
    rtb_step(b, 2, RS_LANE_NVL, v == V_OTHER_LANE ? 0 : 1, &w0);
    rtb_p2p(b, 2, 1, 3, d[2], 0, TB);
    rtb_step(b, 2, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 2, 1, 4, d[2], 0, H);
    /* rank 3: 0 NVL receive, 1 NET relay of B to 5 through staging */
    rtb_staging(b, 3, H);
    rtb_step(b, 3, RS_LANE_NVL, 0, NULL);
    rtb_p2p(b, 3, 0, 2, d[3], 0, TB);
    rtb_step(b, 3, RS_LANE_NET, 1, &w0);
    rtb_copy(b, 3, RS_OP_PACK, rtb_range(d[3], H, H), rtb_range(S, 0, H));
    rtb_p2p(b, 3, 1, 5, S, 0, H);
    /* rank 4: 0 NET receive A, 1 NVL receive B (waits 0), 2 NVL relay of A to 5 */
    rtb_step(b, 4, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 4, 0, 2, d[4], 0, H);
    rtb_step(b, 4, RS_LANE_NVL, v == V_STALE_LANE ? 0 : 1, &w0);
    rtb_p2p(b, 4, 0, 5, d[4], H, H);
    rtb_step(b, 4, RS_LANE_NVL, 0, NULL);
    rtb_p2p(b, 4, 1, 5, d[4], 0, H);
    /* rank 5: 0 NET receive B into staging, 1 NVL forward of staging to 4 + unpack, 2 NVL receive A */
    rtb_staging(b, 5, H);
    rtb_step(b, 5, RS_LANE_NET, 0, NULL);
    rtb_p2p(b, 5, 0, 3, S, 0, H);
    rtb_step(b, 5, RS_LANE_NVL, 1, &w0);
    rtb_p2p(b, 5, 1, 4, S, 0, H);
    rtb_copy(b, 5, RS_OP_UNPACK, rtb_range(S, 0, H), rtb_range(d[5], H, H));
    rtb_step(b, 5, RS_LANE_NVL, 0, NULL);
    rtb_p2p(b, 5, 0, 4, d[5], 0, H);
    rtb_finish(b, P);
}

static int verify(rs_plan *P, char *err, size_t n)
{
    int rc = rs_plan_verify_all(P, err, n);
    printf("verify: %s\n", rc ? err : "ok");
    return rc;
}

/* The plan replays on the CPU threads transport and every destination element checks out. */
static void replay_ok(rs_plan *P, uint64_t want_checked)
{
    size_t len;
    uint8_t *img = rtb_encode(P, &len);
    rsPlan_t plan;
    rsResult_t r = rsPlanLoadMemory(img, len, RS_ALL_RANKS, &plan);
    free(img);
    if (r != rsSuccess) {
        fprintf(stderr, "load: %s: %s\n", rsGetErrorString(r), rsGetLastError());
        exit(1);
    }
    rs_replay_opts o;
    memset(&o, 0, sizeof o);
    o.transport = rsTransportCpu;
    o.timeout_ms = 10000;
    o.iters = 2;
    o.first = 0;
    o.last = UINT32_MAX;
    o.inject_rank = -1;
    rs_replay_result res;
    int bad = rs_replay_run(plan, &o, &res);
    if (bad) {
        fprintf(stderr, "replay: %s: %s; %llu wrong\n", rsGetErrorString(res.result), res.error,
                (unsigned long long)res.rep.wrong);
        for (int i = 0; i < res.rep.nreport; i++) fprintf(stderr, "  %s\n", res.rep.report[i]);
    }
    RT_CHECK(!bad);
    printf("replay: checked %llu elements\n", (unsigned long long)res.rep.checked);
    RT_CHECK(res.rep.checked == want_checked && res.rep.wrong == 0);
    rsPlanDestroy(plan);
}

/* The reference executor, in 16 random orders the execution semantics allow: 1 when every run is right. */
static int interp_ok(const rs_plan *P)
{
    char msg[600];
    for (uint64_t seed = 1; seed <= 16; seed++)
        if (rs_interp_run(P, seed, msg, sizeof msg)) {
            printf("reference executor (seed %llu): %s\n", (unsigned long long)seed, msg);
            return 0;
        }
    return 1;
}

/* interp: 1 when the reference executor must find the plan wrong as well (wrong bytes in any order) */
static void expect_fail(void (*build)(int, rs_plan *), int v, const char *a, const char *b2, int interp)
{
    rs_plan P;
    build(v, &P);
    char err[700];
    if (interp) RT_CHECK(!interp_ok(&P));
    RT_CHECK(verify(&P, err, sizeof err) != 0);
    if (!strstr(err, a) || (b2 && !strstr(err, b2))) {
        fprintf(stderr, "message '%s' lacks '%s'%s%s\n", err, a, b2 ? " or " : "", b2 ? b2 : "");
        exit(1);
    }
    rs_plan_free(&P);
}

static int t_chain(void)
{
    rs_plan P;
    chain(V_OK, &P);
    char err[700];
    RT_CHECK(verify(&P, err, sizeof err) == 0);
    RT_CHECK(interp_ok(&P));
    replay_ok(&P, 3 * 128);
    rs_plan_free(&P);
    return 0;
}

static int t_fanout(void)
{
    rs_plan P;
    fanout(V_OK, &P);
    char err[700];
    RT_CHECK(verify(&P, err, sizeof err) == 0);
    RT_CHECK(interp_ok(&P));
    replay_ok(&P, 4 * 128);
    rs_plan_free(&P);
    return 0;
}

static int t_same_step(void)
{
    expect_fail(chain, V_SAME_STEP,
                "rank 1, step 1, op 3 SEND: relays bytes 256..512 of destination buffer 't' (tensor 't') before they "
                "are written (step 1, op 1 RECV writes them in the same step, not an earlier phase)",
                NULL, 0);
    return 0;
}

static int t_never_written(void)
{
    expect_fail(chain, V_NEVER,
                "rank 1, step 2, op 2 SEND: relays bytes 256..512 of destination buffer 't' (tensor 't') that no op "
                "of the plan writes on rank 1",
                NULL, 1);
    return 0;
}

static int t_twice(void)
{
    expect_fail(chain, V_TWICE, "rank 1: bytes 0..256 of destination buffer 't' (tensor 't') are written twice", NULL, 1);
    return 0;
}

static int t_wrong_pack(void)
{
    expect_fail(chain, V_WRONG_PACK, "wrong data: rank 3 expects tensor 't' element [", "from rank 2", 1);
    return 0;
}

static int t_wrong_send(void)
{
    expect_fail(chain, V_WRONG_SEND, "wrong data: rank 2 expects tensor 't' element [4, 0] but gets tensor 't' element [0, 0] from rank 1",
                NULL, 1);
    return 0;
}

static int t_other_lane(void)
{
    expect_fail(fanout, V_OTHER_LANE,
                "rank 2, step 1, op 1 SEND: relays bytes 0..512 of destination buffer 't' (tensor 't') before they are "
                "written (step 0, op 0 RECV writes them on the other lane, not waited for)",
                NULL, 0);
    return 0;
}

static int t_stale_lane(void)
{
    expect_fail(fanout, V_STALE_LANE, "rank 4, step 2, op 2 SEND: relays bytes 0..256 of destination buffer 't'",
                "not waited for", 0);
    return 0;
}

static const struct {
    const char *name;
    int (*f)(void);
} tests[] = {
    {"chain", t_chain},           {"fanout", t_fanout},         {"same_step", t_same_step},
    {"never_written", t_never_written}, {"twice", t_twice},     {"wrong_pack", t_wrong_pack},
    {"wrong_send", t_wrong_send}, {"other_lane", t_other_lane}, {"stale_lane", t_stale_lane},
};

int main(int argc, char **argv)
{
    int ran = 0;
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        if (argc > 1 && strcmp(argv[1], tests[i].name)) continue;
        printf("== %s\n", tests[i].name);
        if (tests[i].f()) return 1;
        ran++;
    }
    if (!ran) {
        fprintf(stderr, "unknown test '%s'\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    return 0;
}
