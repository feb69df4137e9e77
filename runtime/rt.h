/* rt.h - runtime internals shared by the API layer, the executor core and the transports: the plan and
 * executor objects, the per-step op lists the core walks, the transport interface, errors and logging. */
#ifndef RS_RT_H
#define RS_RT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "plan.h"
#include "reshard.h"

/* ---- errors: a thread-local "last error" message; every failing call sets it ---- */
#define RS_ERRLEN 1024
rsResult_t rs_rt_err(rsResult_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rs_rt_err_clear(void);
const char *rs_rt_err_msg(void);
/* Propagate: if the call fails, return its result (its message is already set). */
#define RS_TRY(call)                                                                                     \
    do {                                                                                                 \
        rsResult_t r_ = (call);                                                                          \
        if (r_ != rsSuccess) return r_;                                                                  \
    } while (0)

/* ---- logging: RESHARD_DEBUG=INFO|TRACE, to stderr ---- */
enum { RS_LOG_WARN = 0, RS_LOG_INFO = 1, RS_LOG_TRACE = 2 };
int rs_rt_log_level(void);
void rs_rt_log(int level, int rank, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define RS_LOG(level, rank, ...)                                                                         \
    do {                                                                                                 \
        if (rs_rt_log_level() >= (level)) rs_rt_log(level, rank, __VA_ARGS__);                          \
    } while (0)

/* ---- plans ---- */
struct rsPlan {
    rs_plan P;
    int rank; /* loaded rank or RS_ALL_RANKS */
    atomic_int refs;
    /* Buffer groups: member names per layout buffer, made when first asked for (the API lists and binds
     * each member as a buffer of its own; a name lives as long as the plan). */
    pthread_mutex_t mnames_mu;
    char ***mnames;
    uint64_t *nmnames;
};
/* Bindable buffers of a rank (a group binding counts its members); binding and member of bindable k. */
uint32_t rs_rt_nslots(const struct rsPlan *p, const rs_rank_prog *g);
void rs_rt_slot(const struct rsPlan *p, const rs_rank_prog *g, uint32_t k, uint32_t *binding, uint64_t *member);
/* Name of member `member` of binding `binding` (the buffer's name for a plain one). */
const char *rs_rt_slot_name(const struct rsPlan *p, const rs_rank_prog *g, uint32_t binding, uint64_t member);
void rs_rt_plan_ref(struct rsPlan *p);
void rs_rt_plan_unref(struct rsPlan *p);
/* Wrap a plan built in memory (tests, benchmarks): takes ownership of *P (zeroed), verifies each rank. */
rsResult_t rs_rt_plan_wrap(rs_plan *P, rsPlan_t *out);

/* ---- what the core walks: per step, its copies (phase 1 and 3) and its sends/receives (phase 2) ---- */
typedef struct {
    uint32_t ndim;
    uint64_t count[RS_DESC_MAX_DIMS];
    uint64_t stride[RS_DESC_MAX_DIMS];
} rs_shape;

typedef struct {
    uint32_t op;       /* index into the rank's ops */
    uint32_t sloc, dloc;
    uint64_t soff, doff;
    rs_shape s, d;     /* canonical (unit dims dropped, contiguous dims merged) */
    uint64_t bytes;
    char *sp, *dp;     /* resolved at prepare: base + offset */
} rs_xjob;

typedef struct {
    uint32_t op;
    uint8_t send;
    uint32_t peer;
    uint32_t loc;
    uint64_t off, bytes;
    char *ptr; /* resolved at prepare */
} rs_xp2p;

typedef struct {
    uint8_t lane;
    uint32_t lane_pos;          /* index among the steps of its lane */
    uint32_t job1, njob1;       /* phase 1: PACK and COPY */
    uint32_t job3, njob3;       /* phase 3: UNPACK */
    uint32_t p2p, np2p;         /* phase 2: sends and receives, in program order */
    uint32_t nsend, nrecv;
    uint32_t wait_begin, nwaits; /* into prog->waits */
    uint8_t waited;             /* some step of the other lane waits for this one */
    uint64_t bytes1, bytes3;
} rs_xstep;

/* ---- transports ---- */
typedef struct rs_transport rs_transport;
struct rsExec;

/* The primitives the executor core calls while walking a lane (or both lanes in program order). */
struct rs_transport {
    const char *name;
    rsTransport_t kind;
    int threaded; /* 1: each lane is walked by its own host thread (in-process transports) */
    /* Make `lane` wait until step `step` (of the other lane) is complete. */
    rsResult_t (*wait)(struct rsExec *x, int lane, uint32_t step);
    /* Phase 1 (PACK + COPY) or phase 3 (UNPACK) of a step as one batch. */
    rsResult_t (*copies)(struct rsExec *x, int lane, uint32_t step, int phase);
    /* Phase 2: the step's sends and receives as one group. */
    rsResult_t (*group)(struct rsExec *x, int lane, uint32_t step);
    /* The step is complete on its lane (record an event, advance progress). */
    rsResult_t (*done)(struct rsExec *x, int lane, uint32_t step);
    /* Optional: a step begins (begin = 1) / ends (0): NVTX ranges. */
    void (*mark)(struct rsExec *x, uint32_t step, int begin);
    /* Bindings complete: resolve/upload whatever the transport keeps per binding. */
    rsResult_t (*prepare)(struct rsExec *x);
    rsResult_t (*run)(struct rsExec *x);
    /* wait = 0: poll; 1: block (bounded by the timeout). rsInProgress while running. */
    rsResult_t (*sync)(struct rsExec *x, int wait);
    void (*abort)(struct rsExec *x);
    void (*destroy)(struct rsExec *x);
};

enum { RS_X_IDLE = 0, RS_X_RUNNING = 1, RS_X_FAILED = 2 };

struct rsExec {
    struct rsPlan *plan;
    const rs_plan *P;
    const rs_rank_prog *prog;
    uint32_t rank, world;
    rsConfig_t cfg;
    const rs_transport *tr;
    void *tp; /* transport state */

    /* bindings: one slot per plain binding and per member of a group binding */
    uint32_t nslots;
    uint32_t *slot_base;  /* [nbindings + 1]: the first slot of each binding */
    uint32_t *slot_bind;  /* [nslots]: the binding of each slot */
    uint64_t *mbytes;     /* [nbindings]: bytes per slot of each binding */
    int has_groups;
    void **bind_ptr;      /* [nslots] */
    uint8_t *bound;       /* [nslots] */
    uint32_t nbound;
    uint32_t *by_name;    /* slots sorted by (name, side) */
    const char **slot_name; /* [nslots] */
    char *staging;     /* host or device */
    int staging_owned;
    int prepared;

    /* the compiled program */
    rs_xstep *xs;
    rs_xjob *jobs;
    uint32_t njobs;
    rs_xp2p *p2p;
    uint32_t np2p;
    uint32_t *lane_steps[RS_NLANES]; /* step indices of each lane, in order */
    uint32_t nlane[RS_NLANES];
    uint32_t max_send, max_recv; /* largest per-step counts */
    int has_nvl;

    /* run state (guarded by mu for the in-process transports) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int state;
    rsResult_t run_res;
    char run_err[RS_ERRLEN];
    atomic_int abort_flag;
    uint64_t runs_started, runs_completed;
    double last_run_seconds;
    rsExecStats_t stats;

    /* testing: fail phase 2 of this step with rsTransportError (UINT32_MAX: never) */
    uint32_t fault_step;
};
typedef struct rsExec rs_exec;

/* ---- the executor core (exec.c) ---- */
/* Common creation: checks the plan holds `rank`, allocates bindings and staging bookkeeping, compiles the
 * step lists. The transport sets tr/tp afterwards. */
rsResult_t rs_exec_new(struct rsPlan *plan, int rank, const rsConfig_t *cfg, rs_exec **out);
void rs_exec_free(rs_exec *x);
/* Resolve the jobs' and sends'/receives' pointers from the bindings and staging. */
void rs_exec_resolve(rs_exec *x);
/* Name of slot k (a member's own name for a group). */
const char *rs_exec_slot_name(const rs_exec *x, uint32_t k);
/* Walk the steps of `lane` (or, lane < 0, every step in program order) calling the transport's
 * primitives. `stop` is polled between steps (may be NULL). Returns the first error. */
rsResult_t rs_exec_walk(rs_exec *x, int lane, const atomic_int *stop);
/* Record the run's failure on the executor (first error wins); returns code. */
rsResult_t rs_exec_fail(rs_exec *x, rsResult_t code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Copy a strided byte stream into another on the host (both streams have the same total). */
void rs_host_copy(char *dp, const rs_shape *d, const char *sp, const rs_shape *s);
/* Trace one op (RESHARD_DEBUG=TRACE). */
void rs_exec_trace_op(const rs_exec *x, uint32_t step, uint32_t op);
/* Monotonic time in seconds. */
double rs_now(void);
/* Testing hook: make phase 2 of `step` fail with an injected transport error on this executor. */
void rs_exec_inject_fault(rsExec_t x, uint32_t step);

/* ---- plan agreement: one record per rank, exchanged over the group / communicator ---- */
typedef struct {
    uint64_t plan_fp;
    uint64_t source_fp;
    uint32_t world;   /* plan world size */
    uint32_t rank;    /* rank this executor runs */
    uint32_t status;  /* 0 ok, else an rsResult_t from local setup */
    uint32_t has_nvl; /* the rank's program has NVL steps */
} rs_agree_rec;
_Static_assert(sizeof(rs_agree_rec) == 32, "agreement record is exchanged as 32 bytes");
/* Compare the records of n ranks (index = communicator rank). Same answer on every rank. */
rsResult_t rs_agree_check(const rs_agree_rec *recs, uint32_t n, char *msg, size_t msglen);
/* "0-3,5,7-8" */
void rs_format_ranks(const uint32_t *ranks, uint32_t n, char *out, size_t outlen);

/* ---- in-process groups (local.c), shared by the CPU and CUDA single-process transports ---- */
typedef struct rs_msg rs_msg;
struct rs_msg {
    rs_msg *next;
    const char *ptr;
    uint64_t bytes;
    uint32_t from, to;
    uint32_t op; /* sender's op index */
    void *ev_ready; /* CUDA: recorded on the sender's lane after phase 1 */
    void *ev_done;  /* CUDA: recorded on the receiver's lane after its copy */
    int acked;      /* guarded by the sender's mutex */
};

struct rsGroup;
typedef struct rs_local_ops {
    /* Move one message's bytes into the receive p (CPU: memcpy; CUDA: wait + copy + record). */
    rsResult_t (*recv_copy)(rs_exec *x, int lane, rs_msg *m, const rs_xp2p *p);
    /* Before posting sends (CUDA: record ev_ready per message). */
    rsResult_t (*pre_send)(rs_exec *x, int lane, uint32_t step, rs_msg *msgs, uint32_t n);
    /* After the receivers acknowledged (CUDA: wait for ev_done). */
    rsResult_t (*post_send)(rs_exec *x, int lane, uint32_t step, rs_msg *msgs, uint32_t n);
    /* On the thread calling rsExecRun, before the lanes start (CUDA: order after the user's stream). */
    rsResult_t (*run_begin)(rs_exec *x);
    /* On a lane thread before its walk (CUDA: set the device, wait for the run's start event). */
    rsResult_t (*lane_begin)(rs_exec *x, int lane);
    /* After a lane walk: CUDA records the lane end event. */
    rsResult_t (*lane_end)(rs_exec *x, int lane);
    /* Every lane issued its work: CUDA checks (wait = 0) or waits for (bounded) the device. */
    rsResult_t (*finish)(rs_exec *x, int wait);
} rs_local_ops;

rsResult_t rs_local_group_new(rsTransport_t kind, uint32_t n, int timeout_ms, struct rsGroup **out);
/* Join the group and agree on the plan (collective, bounded by the timeout). On failure the transport
 * cleans up its own state; the caller frees x. */
rsResult_t rs_local_create(struct rsGroup *g, rs_exec *x, const rs_local_ops *ops);
/* A rank whose local setup failed still reports to the group so that the others fail now. */
void rs_local_arrive_failed(struct rsGroup *g, int rank, rsResult_t status);
struct rsGroup *rs_local_group(rs_exec *x);
/* Host-side pieces the in-process transports use as their primitives. */
rsResult_t rs_local_wait_step(rs_exec *x, int lane, uint32_t step);
rsResult_t rs_local_group_p2p(rs_exec *x, int lane, uint32_t step);
rsResult_t rs_local_step_done(rs_exec *x, int lane, uint32_t step);
rsResult_t rs_local_run(rs_exec *x);
rsResult_t rs_local_sync(rs_exec *x, int wait);
void rs_local_abort(rs_exec *x);
void rs_local_destroy(rs_exec *x);
/* Transport-private state of a local executor (after the local bookkeeping). */
void *rs_local_priv(rs_exec *x);
void rs_local_set_priv(rs_exec *x, void *p);
int rs_local_group_kind(const struct rsGroup *g);
int rs_local_group_timeout(const struct rsGroup *g);

/* ---- transports ---- */
rsResult_t rs_cpu_create(struct rsGroup *g, rs_exec *x);
#ifdef RESHARD_HAVE_CUDA
rsResult_t rs_cudalocal_create(struct rsGroup *g, rs_exec *x);
int rs_cuda_device_count(void);
#endif
#ifdef RESHARD_HAVE_NCCL
rsResult_t rs_nccl_exec_create(struct rsPlan *plan, void *comm, const void *unique_id, int nranks, int rank,
                               const rsConfig_t *cfg, rsExec_t *out);
#endif

#endif
