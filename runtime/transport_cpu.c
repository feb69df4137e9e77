/* transport_cpu.c - the CPU threads transport: every rank of a plan is a set of threads of one process
 * (one per lane), buffers and staging in host memory, messages matched NCCL-style by local.c and copied by
 * the receiver straight from the sender's memory. How every test replays real plans without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "rt.h"

/* RESHARD_CPU_EMULATE_KERNELS=1 (tests): phase 1 and 3 go through the GPU kernel's descriptors and index
 * math (kjob.c) instead of rs_host_copy, so every CPU replay also checks what the GPU transports would do. */
typedef struct {
    rs_kjob *k;
    uint64_t *ntiles; /* per batch, at its first job */
} cpu_emu;

static rsResult_t cpu_prepare(rs_exec *x)
{
    cpu_emu *e = rs_local_priv(x);
    if (!e) return rsSuccess;
    for (uint32_t s = 0; s < x->prog->nsteps; s++) {
        const rs_xstep *xs = &x->xs[s];
        for (int phase = 1; phase <= 3; phase += 2) {
            uint32_t first = phase == 1 ? xs->job1 : xs->job3, n = phase == 1 ? xs->njob1 : xs->njob3;
            uint64_t tile = rs_kjob_tile_bytes(phase == 1 ? xs->bytes1 : xs->bytes3, 132), tiles = 0;
            for (uint32_t i = 0; i < n; i++) {
                const rs_xjob *j = &x->jobs[first + i];
                tiles += rs_kjob_build(&e->k[first + i], j->sp, j->s.ndim, j->s.count, j->s.stride, j->dp, j->d.ndim,
                                       j->d.count, j->d.stride, j->bytes, tile, tiles);
            }
            if (n) e->ntiles[first] = tiles;
        }
    }
    return rsSuccess;
}

static rsResult_t cpu_copies(rs_exec *x, int lane, uint32_t step, int phase)
{
    (void)lane;
    const rs_xstep *xs = &x->xs[step];
    uint32_t first = phase == 1 ? xs->job1 : xs->job3, n = phase == 1 ? xs->njob1 : xs->njob3;
    cpu_emu *e = rs_local_priv(x);
    if (e) {
        rs_kjob_emulate(e->k + first, n, e->ntiles[first], RS_KJOB_THREADS);
        return rsSuccess;
    }
    for (uint32_t i = 0; i < n; i++) {
        const rs_xjob *j = &x->jobs[first + i];
        rs_host_copy(j->dp, &j->d, j->sp, &j->s);
    }
    return rsSuccess;
}

static rsResult_t cpu_recv_copy(rs_exec *x, int lane, rs_msg *m, const rs_xp2p *p)
{
    (void)x, (void)lane;
    memcpy(p->ptr, m->ptr, m->bytes);
    return rsSuccess;
}

static void emu_free(cpu_emu *e)
{
    if (!e) return;
    free(e->k);
    free(e->ntiles);
    free(e);
}

static void cpu_destroy(rs_exec *x)
{
    cpu_emu *e = x->tp ? rs_local_priv(x) : NULL;
    rs_local_destroy(x);
    emu_free(e);
    if (x->staging_owned) free(x->staging);
    x->staging = NULL;
}

static const rs_local_ops cpu_local_ops = {
    .recv_copy = cpu_recv_copy,
};

static const rs_transport cpu_transport = {
    .name = "cpu",
    .kind = rsTransportCpu,
    .threaded = 1,
    .wait = rs_local_wait_step,
    .copies = cpu_copies,
    .group = rs_local_group_p2p,
    .done = rs_local_step_done,
    .prepare = cpu_prepare,
    .run = rs_local_run,
    .sync = rs_local_sync,
    .abort = rs_local_abort,
    .destroy = cpu_destroy,
};

rsResult_t rs_cpu_create(struct rsGroup *g, rs_exec *x)
{
    x->tr = &cpu_transport;
    x->cfg.stream = NULL;
    uint64_t need = x->prog->staging_bytes;
    if (x->cfg.staging) {
        if (x->cfg.stagingBytes < need) {
            rs_local_arrive_failed(g, (int)x->rank, rsInvalidArgument);
            return rs_rt_err(rsInvalidArgument, "rank %u: config.stagingBytes %zu is smaller than the plan's %llu",
                             x->rank, x->cfg.stagingBytes, (unsigned long long)need);
        }
        x->staging = x->cfg.staging;
    } else if (need) {
        /* 64-byte aligned, rounded up: aligned_alloc needs a multiple of the alignment. */
        x->staging = aligned_alloc(64, (need + 63) & ~(uint64_t)63);
        if (!x->staging) {
            rs_local_arrive_failed(g, (int)x->rank, rsSystemError);
            return rs_rt_err(rsSystemError, "rank %u: cannot allocate %llu bytes of staging", x->rank,
                             (unsigned long long)need);
        }
        x->staging_owned = 1;
    }
    cpu_emu *e = NULL;
    const char *env = getenv("RESHARD_CPU_EMULATE_KERNELS");
    if (env && env[0] == '1') {
        e = calloc(1, sizeof *e);
        if (e) e->k = calloc(x->njobs + 1, sizeof *e->k), e->ntiles = calloc(x->njobs + 1, sizeof *e->ntiles);
        if (!e || !e->k || !e->ntiles) {
            emu_free(e);
            if (x->staging_owned) free(x->staging);
            x->staging = NULL;
            x->staging_owned = 0;
            rs_local_arrive_failed(g, (int)x->rank, rsSystemError);
            return rs_rt_err(rsSystemError, "out of memory");
        }
    }
    rsResult_t r = rs_local_create(g, x, &cpu_local_ops);
    if (r != rsSuccess) {
        emu_free(e);
        if (x->staging_owned) free(x->staging);
        x->staging = NULL;
        x->staging_owned = 0;
        return r;
    }
    rs_local_set_priv(x, e);
    if (x->prepared) {
        rs_exec_resolve(x);
        cpu_prepare(x);
    }
    return rsSuccess;
}
