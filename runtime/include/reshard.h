/* reshard.h - the reshard runtime's public C API: load a rank's transfer plan, bind its weight buffers by
 * name, and replay the plan (every refit) on NCCL + CUDA, on CUDA in one process, or on CPU threads. */
#ifndef RESHARD_H
#define RESHARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RESHARD_MAJOR 0
#define RESHARD_MINOR 1
#define RESHARD_PATCH 0
#define RESHARD_VERSION_CODE (RESHARD_MAJOR * 10000 + RESHARD_MINOR * 100 + RESHARD_PATCH)

/* Every call returns a result. On failure, rsGetLastError() on the same thread says what and where. */
typedef enum {
    rsSuccess = 0,
    rsInvalidArgument = 1, /* NULL handle or pointer, value out of range */
    rsInvalidUsage = 2,    /* call out of order: run before every buffer is bound, bind during a run, ... */
    rsPlanInvalid = 3,     /* plan file unreadable, corrupt, of another format version, or failing verification */
    rsBindingError = 4,    /* unknown or ambiguous name, wrong size, already bound, destination overlapping */
    rsMismatch = 5,        /* ranks disagree: plan fingerprints, world size, rank numbering */
    rsTimeout = 6,         /* a peer did not arrive within config.timeoutMs */
    rsAborted = 7,         /* rsExecAbort was called on this executor or on a peer of the same group */
    rsRemoteError = 8,     /* another rank failed, so this rank's run was cancelled */
    rsTransportError = 9,  /* NCCL, CUDA or the CPU transport failed (including injected test faults) */
    rsSystemError = 10,    /* out of memory, I/O error, thread creation */
    rsNotSupported = 11,   /* transport not built into this library or no device present */
    rsInProgress = 12,     /* rsExecQuery: the run has not finished yet (not an error) */
    rsInternalError = 13,
    rsNumResults = 14
} rsResult_t;

/* Static description of a result code ("invalid argument", ...). */
const char *rsGetErrorString(rsResult_t result);
/* Detail of the last failing call made by this thread (empty string when none). Valid until the next
 * reshard call on this thread. */
const char *rsGetLastError(void);
/* RESHARD_VERSION_CODE of the library actually linked. */
rsResult_t rsGetVersion(int *version);

/* ---------------------------------------------------------------------------------------------------
 * Configuration. Always start from RS_CONFIG_INITIALIZER and set the fields you need; the library reads
 * only the first `size` bytes, so programs built against an older header keep working. */
typedef struct {
    size_t size;          /* sizeof(rsConfig_t) */
    unsigned int version; /* RS_CONFIG_VERSION */
    /* Bound, in milliseconds, on every wait for a peer: plan agreement at creation, a message during a run,
     * rsExecSynchronize. On expiry the waiting rank fails with rsTimeout naming the missing ranks, and the
     * executor's group is failed. 0 waits forever. */
    int timeoutMs;
    /* CUDA transports: the cudaStream_t (passed as void *) a run is ordered on: it starts after the work
     * already queued on this stream, and later work queued on it starts after the run (NCCL transport).
     * NULL: the executor creates its own stream (rsExecGetStream). */
    void *stream;
    /* CUDA device of this rank. -1: the current device (NCCL), rank % device count (CUDA in one process). */
    int device;
    /* Optional staging memory supplied by the caller (host memory for the CPU transport, device memory for
     * the CUDA transports), at least rsPlanStagingBytes() long. NULL: the executor allocates it. */
    void *staging;
    size_t stagingBytes;
} rsConfig_t;

#define RS_CONFIG_VERSION 1u
#define RS_DEFAULT_TIMEOUT_MS 300000
#define RS_CONFIG_INITIALIZER                                                                           \
    { sizeof(rsConfig_t), RS_CONFIG_VERSION, RS_DEFAULT_TIMEOUT_MS, NULL, -1, NULL, 0 }

/* ---------------------------------------------------------------------------------------------------
 * Plans. A plan file (made by `reshardc LAYOUT -o plan.bin`) holds one program per rank. A worker loads its
 * own rank only: the header, the shared tables and that rank's section are read (mmap) and verified. Pass
 * RS_ALL_RANKS to load every rank (in-process transports, tools). A plan handle is read-only once loaded and
 * may be shared by several executors and threads; executors keep it alive after rsPlanDestroy. */
typedef struct rsPlan *rsPlan_t;
#define RS_ALL_RANKS (-1)

rsResult_t rsPlanLoad(const char *path, int rank, rsPlan_t *plan);
rsResult_t rsPlanLoadMemory(const void *data, size_t bytes, int rank, rsPlan_t *plan);
rsResult_t rsPlanDestroy(rsPlan_t plan);

typedef struct {
    int worldSize;              /* ranks the plan was made for */
    int rank;                   /* the loaded rank, or RS_ALL_RANKS */
    int numDomains;             /* NVLink domains */
    int formatMajor, formatMinor; /* the plan's format version (docs/format.md): 1.0; 1.1 with buffer groups;
                                   * 1.2 with a balanced shard */
    uint64_t fingerprint;       /* hash of the plan content: equal on every rank of one refit */
    uint64_t sourceFingerprint; /* hash of the layout text, -D values, options, compiler version */
} rsPlanInfo_t;
rsResult_t rsPlanGetInfo(rsPlan_t plan, rsPlanInfo_t *info);

typedef enum { rsSideSource = 0, rsSideDestination = 1 } rsSide_t;

/* A buffer a rank must bind. Strings live as long as the plan. */
typedef struct {
    const char *name;  /* the name in the layout's `as "..."` */
    rsSide_t side;     /* source (read, never written) or destination (written) */
    const char *dtype; /* "bf16", "fp32", ... */
    int ndim;
    int64_t shape[8];  /* shape on this rank, in elements */
    size_t bytes;      /* exact size to bind */
} rsBufferInfo_t;

/* The buffers rank `rank` binds, indexed 0..count-1 (the order of rsExecBindIndex). */
rsResult_t rsPlanBufferCount(rsPlan_t plan, int rank, int *count);
rsResult_t rsPlanGetBuffer(rsPlan_t plan, int rank, int index, rsBufferInfo_t *info);
/* Staging memory the rank's executor uses (0 when the rank only moves data zero-copy). */
rsResult_t rsPlanStagingBytes(rsPlan_t plan, int rank, size_t *bytes);

/* ---------------------------------------------------------------------------------------------------
 * Transports. NCCL: one process (or thread) per GPU, ranks joined by an ncclComm_t. In-process transports
 * (CPU threads, CUDA single process) join the ranks of one plan through a group object: each rank creates
 * its executor on the group from its own host thread. */
typedef enum { rsTransportCpu = 0, rsTransportCudaLocal = 1, rsTransportNccl = 2 } rsTransport_t;

/* Whether a transport is built into this library and usable here (CUDA: a device is present). */
rsResult_t rsTransportAvailable(rsTransport_t transport, int *available);

typedef struct rsGroup *rsGroup_t;
/* A group for nranks in-process ranks (transport rsTransportCpu or rsTransportCudaLocal). config may be
 * NULL (timeoutMs then RS_DEFAULT_TIMEOUT_MS). Destroy it after every executor on it is destroyed. */
rsResult_t rsGroupCreate(rsTransport_t transport, int nranks, const rsConfig_t *config, rsGroup_t *group);
rsResult_t rsGroupDestroy(rsGroup_t group);

/* ---------------------------------------------------------------------------------------------------
 * Executors: one per rank. Creation is collective over the group / communicator: every rank compares the
 * plan fingerprint and world size; any difference fails creation on every rank with rsMismatch naming the
 * ranks that differ (never a hang: bounded by config.timeoutMs). */
typedef struct rsExec *rsExec_t;

rsResult_t rsExecCreateLocal(rsPlan_t plan, rsGroup_t group, int rank, const rsConfig_t *config, rsExec_t *exec);
/* comm is an ncclComm_t spanning exactly the plan's world (rank i of the comm is rank i of the plan); it
 * stays the caller's, but rsExecAbort aborts it (ncclCommAbort) to unblock a stuck run. */
struct ncclComm;
rsResult_t rsExecCreateNccl(rsPlan_t plan, struct ncclComm *comm, const rsConfig_t *config, rsExec_t *exec);
/* The same with a communicator the executor makes (ncclCommInitRank) from an ncclUniqueId (passed by
 * address) that rank 0 obtained with ncclGetUniqueId and shared with every rank. */
rsResult_t rsExecCreateNcclFromId(rsPlan_t plan, const void *ncclUniqueId, int nranks, int rank,
                                  const rsConfig_t *config, rsExec_t *exec);

/* Bind a buffer by name (unambiguous among this rank's buffers) or by index (rsPlanGetBuffer order).
 * bytes must equal the planned size exactly; destination buffers must not overlap any other binding.
 * Host memory for the CPU transport, device memory of the rank's device for the CUDA transports. When the
 * last buffer is bound, the executor resolves and (CUDA) uploads its copy descriptors, once. */
rsResult_t rsExecBind(rsExec_t exec, const char *name, void *ptr, size_t bytes);
rsResult_t rsExecBindIndex(rsExec_t exec, int index, void *ptr, size_t bytes);
/* Forget a binding (to bind new memory); not while a run is in progress. */
rsResult_t rsExecUnbind(rsExec_t exec, const char *name);

/* Start one replay of the plan. Asynchronous: NCCL queues the work on the stream and returns; in-process
 * transports start the rank's lane threads and return. Repeatable (every refit), with no re-planning. */
rsResult_t rsExecRun(rsExec_t exec);
/* rsSuccess when the last run has completed, rsInProgress while it runs, or the run's error. */
rsResult_t rsExecQuery(rsExec_t exec);
/* Wait (bounded by timeoutMs) for the last run; returns its result. In-process groups: a run succeeds only
 * when every rank of the group has finished it, so this also waits for the other ranks. After an error, every
 * destination buffer of the rank must be treated as not updated, and the executor (and its group) only
 * accepts rsExecDestroy. */
rsResult_t rsExecSynchronize(rsExec_t exec);
/* From any thread: stop the run now. Every rank of the group (NCCL: of the communicator) then fails its run
 * with rsAborted. Safe to call at any time and more than once. */
rsResult_t rsExecAbort(rsExec_t exec);
/* Waits for a run in progress (bounded by timeoutMs, then aborts it) and frees everything. */
rsResult_t rsExecDestroy(rsExec_t exec);

typedef struct {
    uint64_t runsStarted;
    uint64_t runsCompleted;    /* successful runs only: destinations updated */
    uint64_t destinationBytes; /* bytes a run writes into this rank's destination buffers */
    uint64_t bytesSent[2];     /* per run, per lane: [0] network (NET), [1] NVLink (NVL) */
    uint64_t bytesReceived[2];
    uint64_t bytesCopied;      /* per run: PACK + UNPACK + COPY bytes */
    uint64_t stagingBytes;
    int numSteps[2];           /* steps per lane */
    double lastRunSeconds;     /* host wall time of the last completed run (in-process transports) */
} rsExecStats_t;
rsResult_t rsExecGetStats(rsExec_t exec, rsExecStats_t *stats);
/* The cudaStream_t a run is ordered on (NULL for the CPU transport). */
rsResult_t rsExecGetStream(rsExec_t exec, void **stream);

/* Check a call and jump to a cleanup label on failure, keeping its result:
 *   rsResult_t res = rsSuccess;  RS_CHECK_GOTO(rsExecRun(x), res, out);  ... out: return res; */
#define RS_CHECK_GOTO(call, res, label)                                                                 \
    do {                                                                                                 \
        (res) = (call);                                                                                  \
        if ((res) != rsSuccess) goto label;                                                              \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
