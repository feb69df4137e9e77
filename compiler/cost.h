/* cost.h - the cost model behind `reshardc stats`: the physical lower bound of a layout, the modeled
 * time of a plan (an event-driven simulation of its steps on per-GPU links), and two baselines built
 * from the same layout and priced by the same simulation. See docs/cost-model.md. */
#ifndef RS_COST_H
#define RS_COST_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "plan.h"

/* Model parameters. Bandwidths are per GPU per direction in Gb/s (bits), like the topology's. */
typedef struct {
    double nic_gbps;      /* network: the topology's nic_gbps, 400 when it has none */
    double nvlink_gbps;   /* NVLink: the topology's nvlink_gbps, 3600 (450 GB/s) when it has none */
    double hbm_gbps;      /* device memory, 24000 (3 TB/s); a copy of B bytes moves 2B (read + write) */
    double latency_us;    /* per message, 5 us: counted on each link the message uses */
    uint64_t bucket_bytes; /* baselines: tensors are sent in buckets of this many bytes, 1 GiB */
    uint64_t chunk_bytes;  /* gather-broadcast: pipeline chunk of the broadcast ring, 512 KiB */
    uint32_t gb_roots;     /* gather-broadcast: broadcast roots, 1 (NeMo RL); more is a what-if */
    int merge_net_steps;   /* diagnostic: price the plan as if each rank's NET steps were one group */
} rs_cost_params;

/* Defaults, taking bandwidths from the topology (which may be NULL). */
void rs_cost_params_default(rs_cost_params *p, const rs_topology *topo);

/* ---- lower bound (from the layout alone) ----
 * U_a: distinct bytes needed by destination ranks of NVLink domain a that no source rank of a holds.
 * dst_s = max_a U_a / (nic x receiving GPUs of a).
 * src_s = (sum over tensors of the distinct bytes some domain needs from outside) / (nic x source GPUs):
 *         every such byte leaves a holder's NIC at least once (relays through destinations allowed).
 * src_norelay_s = (sum_a U_a) / (nic x source GPUs): the same when only source ranks send over the
 *         network (each byte leaves once per domain that needs it).
 * holder_norelay_s = max over source ranks h of (bytes only h holds, counted once per other domain
 *         needing them) / nic: what h's NIC must carry when only holders send.
 * bound_s = max(dst_s, src_s); bound_norelay_s = max(dst_s, src_norelay_s, holder_norelay_s).
 * group_norelay_s = max over sets H of several source ranks of (bytes held by exactly the ranks of H, by a
 *         smaller such set inside H, or by one rank of H alone, each counted once per domain without a holder
 *         that needs them) / (nic x |H|): a pipeline stage's ranks, whose norms they alone hold, must send
 *         that stage's weights. Reported by `reshardc stats`; not in bound_norelay_s, which the planner's
 *         relay choice reads. */
typedef struct {
    double bound_s, dst_s, src_s, src_norelay_s, holder_norelay_s, bound_norelay_s, group_norelay_s;
    uint32_t holder_rank;      /* the source rank of holder_norelay_s (RS_NONE when none) */
    uint64_t holder_bytes;     /* its bytes */
    uint32_t group_first;      /* the lowest rank of group_norelay_s's set (RS_NONE when none) */
    uint32_t group_nranks;     /* its ranks */
    uint64_t group_bytes;      /* its bytes (all its NICs together) */
    uint32_t dst_domain;       /* the binding destination domain (RS_NONE when nothing is needed) */
    uint64_t dst_domain_bytes; /* its U_a */
    uint32_t dst_domain_gpus;  /* its receiving GPUs */
    uint64_t need_bytes;       /* sum_a U_a */
    uint64_t distinct_bytes;   /* sum over tensors of the distinct bytes needed from outside some domain */
    uint64_t model_bytes;      /* sum over tensors of the distinct bytes any destination needs */
    uint32_t nsrc_gpus, ndst_gpus; /* ranks holding a non-empty source / destination block */
    uint32_t ndomains;         /* domains with receiving GPUs */
} rs_cost_bound;

/* Compute the bound. Returns 0, or -1 with err set (an inconsistent layout). */
int rs_cost_lower_bound(const rs_layout *L, const rs_cost_params *p, rs_cost_bound *out, char *err,
                        size_t errlen);

/* ---- simulation results ---- */
enum { RS_LINK_NIC_OUT, RS_LINK_NIC_IN, RS_LINK_NVL_OUT, RS_LINK_NVL_IN, RS_LINK_HBM, RS_NLINK_KINDS };
const char *rs_cost_link_name(int kind); /* "NIC out", ... */

/* Timeline of one step: ready (dependencies met), posted (packed; its sends and receives posted),
 * moving (its first message started: the peers posted too), transferred (every message of its group
 * done), done (unpacked). Seconds from the start; t_move = t_xfer when it has no message. */
typedef struct {
    uint32_t rank;
    uint8_t lane;
    double t_ready, t_post, t_move, t_xfer, t_done;
} rs_cost_step_time;

typedef struct {
    double time_s;            /* modeled completion of the last step */
    uint32_t world;
    double *link_s;           /* [world * RS_NLINK_KINDS]: busy time of each link (bytes / bandwidth
                                 plus latency), summed over its messages */
    uint32_t busiest_rank;    /* the link with the largest busy time */
    int busiest_kind;
    double busiest_s;
    uint64_t nmsgs, nsteps;
    rs_cost_step_time *steps; /* [nsteps] (plans only; NULL for baselines) */
} rs_cost_sim;

void rs_cost_sim_free(rs_cost_sim *s);

/* Modeled time of a plan (every rank loaded). Returns 0, or -1 with err set (unmatched messages, a
 * plan that cannot complete). */
int rs_cost_model_plan(const rs_plan *P, const rs_cost_params *p, rs_cost_sim *out, char *err, size_t errlen);

/* Baselines built from the layout, priced by the same simulation (docs/cost-model.md says exactly how):
 * gather-then-broadcast (NeMo RL's conventional refit) and direct (every destination rank fetches
 * its own bytes from a holder chosen round-robin by replica count, no NVLink fan-out), both in
 * buckets of p->bucket_bytes taken in layout order (bucket_bytes = UINT64_MAX: direct in one step). */
int rs_cost_gather_broadcast(const rs_layout *L, const rs_cost_params *p, rs_cost_sim *out, char *err,
                             size_t errlen);
int rs_cost_direct(const rs_layout *L, const rs_cost_params *p, rs_cost_sim *out, char *err, size_t errlen);

/* ---- traffic of a plan (bytes, no time) ---- */
typedef struct {
    uint32_t world, ndomains;
    uint64_t net_bytes;   /* sent between ranks of different NVLink domains (over NICs) */
    uint64_t nvl_bytes;   /* sent between ranks of one domain (over NVLink), whatever the lane */
    uint64_t relay_bytes; /* sent to another domain by destination ranks forwarding what they received */
    uint64_t copy_bytes, pack_bytes, unpack_bytes;
    uint64_t nmsgs, nsteps, nsteps_lane[RS_NLANES];
    uint64_t *nic_out, *nic_in, *nvl_out, *nvl_in; /* [world] */
    uint64_t *dom_matrix;  /* [ndomains * ndomains]: bytes from domain i (row) to domain j */
    uint64_t *rank_matrix; /* [world * world] when world <= RS_COST_RANK_MATRIX_MAX, else NULL */
} rs_cost_traffic;

#define RS_COST_RANK_MATRIX_MAX 256

int rs_cost_plan_traffic(const rs_plan *P, rs_cost_traffic *out, char *err, size_t errlen);
void rs_cost_traffic_free(rs_cost_traffic *t);

/* ---- the whole report, as `reshardc stats` prints it ---- */
typedef struct {
    rs_cost_params params;
    rs_cost_bound bound;
    rs_cost_traffic traffic;
    rs_cost_sim plan, gather_broadcast, direct; /* direct: every message of a rank in one step */
} rs_cost_report;

int rs_cost_report_build(const rs_plan *P, const rs_cost_params *p, rs_cost_report *out, char *err,
                         size_t errlen);
void rs_cost_report_free(rs_cost_report *r);

/* SVG picture of a report (stats_svg.c): traffic matrix, per-NIC load against the bound, step timeline. */
int rs_stats_svg(const rs_plan *P, const rs_cost_report *r, const char *path, char *err, size_t errlen);

#endif
