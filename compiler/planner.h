/* planner.h - the planner: from a checked layout to a verified per-rank transfer plan in memory
 * (regions -> fan-out -> source choice -> schedule), its options and its statistics. */
#ifndef RS_PLANNER_H
#define RS_PLANNER_H

#include <stdint.h>
#include <stdio.h>

#include "ir.h"
#include "plan.h"

typedef struct {
    uint64_t staging_bytes;    /* per-rank staging budget (--staging), default 256 MiB, at least 256 bytes */
    uint64_t zero_copy_min;    /* a part at least this large that is contiguous in a buffer is sent from /
                                  received into that buffer directly (its own message); default 1 MiB */
    uint64_t fanout_split_min; /* a fragment needed by k > 1 ranks of one destination domain is split among
                                  them into min(k, bytes / this) boxes (smaller ones go whole): every box
                                  costs a message to each of the other k - 1 (with k = 64, boxes of 16 KiB
                                  made DeepSeek-V3 on GB200 NVLink-message bound); 1 MiB */
    uint64_t fanout_zero_copy; /* a chunk that FAN_ZC_PEERS (4) or more ranks of its destination domain take,
                                  contiguous in their buffers, goes zero-copy into them (and into its
                                  forwarder) from this size, at least zero_copy_min (--fanout-zero-copy);
                                  0 (default): a quarter of the largest chunk size */
    uint64_t fine_min;         /* the smallest fine chunk of a part that spans rounds (default 64 KiB; the
                                  property tests lower it so that small layouts span rounds too) */
    int verify;                /* run rs_plan_verify_all before returning (default 1) */
    int verify_ahead;          /* verify is 0, and rs_planner_verify will verify the plan: make the verifier's
                                  piece index meanwhile all the same (out->verify_pre; reshardc does) */
    int strided_reads;         /* let the source side of PACK, UNPACK and COPY step through memory in any
                                  order (a stride below the span inside it, or 0): one PACK then gathers a
                                  column block for many receivers instead of one PACK per receiver. 1 on,
                                  0 off, -1 (default): on when rs_plan_verify_rank accepts such a source
                                  descriptor (a probe at start) */
    int relays;                /* destination ranks forward what they received to other domains (issue 9):
                                  RS_RELAYS_OFF, RS_RELAYS_ON (every fragment needed by several domains over
                                  the network enters one of them from its holders and is relayed on), or
                                  RS_RELAYS_AUTO (default: on when the sources' NICs, not the destinations',
                                  bound the layout by more than 1.02x; as many domains fed by holders as the
                                  sources' NICs keep at the destinations' pace) */
    uint32_t relay_fanout;     /* domains each relaying domain feeds: 1 (default) chains, 2 binary trees... */
} rs_plan_opts;

enum { RS_RELAYS_OFF = 0, RS_RELAYS_ON = 1, RS_RELAYS_AUTO = 2 };

void rs_plan_opts_default(rs_plan_opts *o);

/* What the planner did, for benchmarks and tests (all arrays owned; free with rs_plan_stats_free). */
typedef struct {
    uint64_t cells;          /* intersections of a destination block with the source grids */
    uint64_t parts;          /* routed transfers after fan-out splitting (before chunking) */
    uint64_t chunks;         /* elementary transfers after chunking and buffer-shape alignment */
    uint64_t net_bytes;      /* bytes over the network (NET lane) */
    uint64_t nvl_bytes;      /* bytes sent over NVLink directly (same-domain source) */
    uint64_t fwd_bytes;      /* bytes forwarded over NVLink (fan-out) */
    uint64_t local_bytes;    /* bytes copied on the same rank */
    uint64_t relay_bytes;    /* network bytes sent by destination ranks forwarding what they received */
    double relay_heads;      /* relays: share of the network-fed domains of a fragment fed by its holders
                                (1: no relays) */
    uint32_t rounds;         /* rounds (NET/NVL step pairs) */
    uint64_t merged_messages; /* messages folded into the one before them (pl_merge_messages) */
    uint64_t zc_spill;    /* chunks sent zero-copy to their receivers because, staged, they would wait a round */
    uint64_t spill_halves; /* chunks cut in two because, whole and staged, they would wait a round */
    uint32_t ndomains;
    uint64_t *domain_need;   /* [ndomains] bytes needed in the domain that no rank of it holds */
    uint64_t *domain_net_in; /* [ndomains] NET bytes received by ranks of the domain */
    uint32_t world;
    uint64_t *rank_net_out;  /* [world] NET bytes each rank sends */
    uint32_t *built_at;      /* [world] 1 + the tensor after which pass 3 built the rank's program (its last
                                part's), 0: built after pass 3 (no part) */
    double seconds[6];       /* wall time: bindings, pass 1 (+LPT), pass 2, pass 3, programs, verification */
    uint64_t peak_kib[6];    /* the process's peak resident memory at the end of each of them (KiB) */
    double verify_seconds[RS_VERIFY_PARTS]; /* verification's parts (rs_plan_verify_all_timed), wall time */
} rs_plan_stats;

void rs_plan_stats_free(rs_plan_stats *s);

/* Plan layout L (moved into out->layout on success; left intact on failure). Errors (a destination
 * element no source holds, buffer shapes that disagree) are returned as -1 with a message in err; when
 * bad_piece is not NULL it receives the index of the piece the error is about (RS_NONE if none).
 * A verification failure is a planner bug: the message says so. stats may be NULL. */
int rs_planner_plan(rs_layout *L, const rs_plan_opts *o, rs_plan *out, rs_plan_stats *stats, char *err,
                    size_t errlen, uint32_t *bad_piece);

/* The whole-plan verification rs_planner_plan runs when o->verify is set, for a plan planned without it
 * (to write the plan while it runs: rs_plan_write_file_gated): its time and peak go to stats (may be NULL)
 * and P->verified is set. A failure is a planner bug: -1 with a message that says so (P is left as it is).*/
int rs_planner_verify(rs_plan *P, rs_plan_stats *stats, char *err, size_t errlen);

/* The same from the front end's IR: moves ir->L into out->layout; diagnostics go to diag with the
 * source position of the piece involved. Returns 0 or -1. */
int rs_planner_run(rs_ir *ir, const rs_plan_opts *o, rs_plan *out, rs_plan_stats *stats, FILE *diag);

#endif
