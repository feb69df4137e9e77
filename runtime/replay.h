/* replay.h - the replay checker shared by reshard-replay, the runtime tests, the GPU test and the
 * benchmarks: source elements are set to a function of (tensor, global index) computed from the layout
 * stored in the plan, and every destination element is checked against it after a replay. */
#ifndef RS_REPLAY_H
#define RS_REPLAY_H

#include <stdint.h>

#include "plan.h"
#include "reshard.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The value of element `gidx` (row-major global index) of tensor `t`; its low dtype-size bytes are stored. */
uint64_t rs_replay_value(uint32_t t, uint64_t gidx);

#define RS_REPLAY_SRC_FILL 0x5a /* source bytes outside every piece */
#define RS_REPLAY_DST_FILL 0xcb /* destination bytes before the replay (must stay outside every piece) */
#define RS_REPLAY_MAX_REPORT 8

typedef struct {
    uint64_t checked;    /* destination elements compared */
    uint64_t wrong;      /* destination elements with the wrong value */
    uint64_t untouched;  /* destination bytes outside every piece that changed */
    uint64_t src_changed; /* source bytes that changed */
    uint64_t plan_errors; /* pieces the plan does not bind, shape disagreements */
    int nreport;
    char report[RS_REPLAY_MAX_REPORT][320];
} rs_replay_report;

/* bufs[i]: host memory of binding i of `rank` (binding bytes long). Fill sets sources and the
 * destination sentinel; check compares every destination element and byte, and the sources. */
void rs_replay_fill(const rs_plan *P, uint32_t rank, void *const *bufs);
void rs_replay_check(const rs_plan *P, uint32_t rank, void *const *bufs, rs_replay_report *rep);
/* The buffers `rank` binds (rsPlanBufferCount: a buffer group's members one by one, in binding order):
 * bindable k is bytes [*offset, *offset + returned bytes) of binding *binding's host block above. */
uint32_t rs_replay_nslots(rsPlan_t plan, uint32_t rank);
uint64_t rs_replay_slot(rsPlan_t plan, uint32_t rank, uint32_t k, uint32_t *binding, uint64_t *offset);

/* ---- a whole replay on an in-process transport (CPU threads, or CUDA through the memory hooks) ---- */
typedef struct {
    /* device memory (NULL hooks: host memory is used directly) */
    void *(*alloc)(void *ctx, uint32_t rank, uint64_t bytes);
    void (*upload)(void *ctx, uint32_t rank, void *dev, const void *host, uint64_t bytes);
    void (*download)(void *ctx, uint32_t rank, void *host, const void *dev, uint64_t bytes);
    void (*release)(void *ctx, uint32_t rank, void *dev);
    void *ctx;
} rs_replay_mem;

typedef struct {
    rsTransport_t transport;
    int timeout_ms;
    int iters;           /* timed runs after the checked one */
    uint32_t first, last; /* ranks whose destinations are checked: [first, last) */
    int inject_rank;     /* testing: rank and step of an injected transport error (-1: none) */
    uint32_t inject_step;
    const rs_replay_mem *mem;
    /* A replay that would take more host memory than this is refused before anything is allocated (its
     * buffers are filled, so the kernel would kill the process instead). 0: MemAvailable of
     * /proc/meminfo (no check where it cannot be read); UINT64_MAX: no check. */
    uint64_t host_limit;
} rs_replay_opts;

/* The host memory rs_replay_run takes for every rank of plan under opts o (an upper bound). */
uint64_t rs_replay_host_bytes(rsPlan_t plan, const rs_replay_opts *o);

typedef struct {
    rsResult_t result;   /* first failure of creation, binding or a run */
    char error[1024];
    rs_replay_report rep;
    uint64_t dst_bytes;  /* destination bytes a run writes, over the checked ranks */
    uint64_t all_dst_bytes; /* over all ranks */
    uint64_t sent[2], copied;
    double first_s, best_s, mean_s; /* run times */
    uint32_t nsteps;
} rs_replay_result;

/* Replays every rank of `plan` (loaded with RS_ALL_RANKS) and checks ranks [first, last).
 * Returns 0 when the replay ran and every check passed. */
int rs_replay_run(rsPlan_t plan, const rs_replay_opts *o, rs_replay_result *res);
/* The plan inside a handle (the handle owns it). */
const rs_plan *rs_replay_plan(rsPlan_t plan);

#ifdef __cplusplus
}
#endif
#endif
