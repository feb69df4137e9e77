/* worker.c - a minimal trainer / inference worker using libreshard: NCCL bootstrapped over MPI (as
 * nccl-tests does), load this rank's section of plan.bin, allocate and bind its weight buffers by name, run
 * the refit a few times, synchronize. One MPI process per GPU:
 *
 *     mpirun -np 16 build/runtime/reshard-worker plan.bin [iterations]
 *
 * A real framework binds the existing parameter tensors instead of allocating (for PyTorch:
 * tensor.data_ptr() and tensor.numel() * tensor.element_size()) and runs the plan on its own stream. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include "reshard.h"

#define RSCHECK(call)                                                                                    \
    do {                                                                                                 \
        rsResult_t r_ = (call);                                                                          \
        if (r_ != rsSuccess) {                                                                           \
            fprintf(stderr, "[rank %d] %s failed: %s: %s\n", rank, #call, rsGetErrorString(r_),          \
                    rsGetLastError());                                                                   \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                \
        }                                                                                                \
    } while (0)
#define CUDACHECK(call)                                                                                  \
    do {                                                                                                 \
        cudaError_t e_ = (call);                                                                         \
        if (e_ != cudaSuccess) {                                                                         \
            fprintf(stderr, "[rank %d] %s failed: %s\n", rank, #call, cudaGetErrorString(e_));           \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                \
        }                                                                                                \
    } while (0)
#define NCCLCHECK(call)                                                                                  \
    do {                                                                                                 \
        ncclResult_t e_ = (call);                                                                        \
        if (e_ != ncclSuccess) {                                                                         \
            fprintf(stderr, "[rank %d] %s failed: %s\n", rank, #call, ncclGetErrorString(e_));           \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                \
        }                                                                                                \
    } while (0)

int main(int argc, char **argv)
{
    int rank = 0, nranks = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc < 2) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -np N reshard-worker PLAN [ITERATIONS]\n");
        MPI_Finalize();
        return 2;
    }
    int iters = argc > 2 ? atoi(argv[2]) : 3;

    /* One GPU per process: the local rank among the processes of this node. */
    MPI_Comm node;
    int local = 0, ndev = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    CUDACHECK(cudaGetDeviceCount(&ndev));
    CUDACHECK(cudaSetDevice(local % ndev));

    /* NCCL bootstrap: rank 0 makes the unique id, MPI broadcasts it. */
    ncclUniqueId id;
    if (rank == 0) NCCLCHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NCCLCHECK(ncclCommInitRank(&comm, nranks, id, rank));

    /* Load this rank's program (the header, shared tables and this rank's section only). */
    rsPlan_t plan;
    RSCHECK(rsPlanLoad(argv[1], rank, &plan));

    /* The executor: plan agreement across all ranks happens here (a mismatch fails every rank). */
    cudaStream_t stream;
    CUDACHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    rsConfig_t cfg = RS_CONFIG_INITIALIZER;
    cfg.stream = stream;
    cfg.timeoutMs = 120000;
    rsExec_t exec;
    RSCHECK(rsExecCreateNccl(plan, comm, &cfg, &exec));

    /* Bind every buffer this rank owns. Here they are allocated; a framework passes its parameters. */
    int nbuf = 0;
    RSCHECK(rsPlanBufferCount(plan, rank, &nbuf));
    void **mem = calloc((size_t)nbuf + 1, sizeof *mem);
    size_t total = 0;
    for (int i = 0; i < nbuf; i++) {
        rsBufferInfo_t b;
        RSCHECK(rsPlanGetBuffer(plan, rank, i, &b));
        CUDACHECK(cudaMalloc(&mem[i], b.bytes ? b.bytes : 1));
        if (b.side == rsSideSource) CUDACHECK(cudaMemset(mem[i], 0x3c, b.bytes));
        RSCHECK(rsExecBind(exec, b.name, mem[i], b.bytes));
        total += b.bytes;
    }
    size_t staging = 0;
    RSCHECK(rsPlanStagingBytes(plan, rank, &staging));
    if (rank == 0)
        printf("reshard-worker: %d ranks; rank 0 binds %d buffers (%.1f MiB), staging %.1f MiB\n", nranks, nbuf,
               total / 1048576.0, staging / 1048576.0);

    /* Refits: each run is queued on `stream`; the next training / inference work queued on the same
     * stream sees the new weights. Synchronize only to measure or to report errors. */
    for (int it = 0; it < iters; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        RSCHECK(rsExecRun(exec));
        RSCHECK(rsExecSynchronize(exec));
        double dt = MPI_Wtime() - t0, worst = 0;
        MPI_Reduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        rsExecStats_t st;
        RSCHECK(rsExecGetStats(exec, &st));
        if (rank == 0) printf("refit %d: %.3f ms (slowest rank)\n", it, 1e3 * worst);
    }

    RSCHECK(rsExecDestroy(exec));
    RSCHECK(rsPlanDestroy(plan));
    for (int i = 0; i < nbuf; i++) cudaFree(mem[i]);
    free(mem);
    cudaStreamDestroy(stream);
    ncclCommDestroy(comm);
    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
