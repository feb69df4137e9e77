/* consumer.c - a program built against an INSTALLED reshard (find_package or pkg-config): loads the plan of
 * tiny.layout, lists each rank's buffers, replays it on the CPU threads transport and checks every element. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <reshard.h>

#define W 4 /* ranks: 0-1 hold rows of w[8, 4] (sources), 2-3 receive its columns (destinations) */

static rsPlan_t plan;
static rsGroup_t group;
static float buf[W][16];
static rsResult_t result[W];
static char error[W][1024];

static void *rank_main(void *arg)
{
    int r = (int)(long)arg;
    rsExec_t x = NULL;
    rsResult_t res = rsSuccess;
    RS_CHECK_GOTO(rsExecCreateLocal(plan, group, r, NULL, &x), res, out);
    RS_CHECK_GOTO(rsExecBind(x, "w", buf[r], sizeof buf[r]), res, out);
    RS_CHECK_GOTO(rsExecRun(x), res, out);
    RS_CHECK_GOTO(rsExecSynchronize(x), res, out);
out:
    if (res != rsSuccess) snprintf(error[r], sizeof error[r], "%s", rsGetLastError());
    if (x) rsExecDestroy(x);
    result[r] = res;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s tiny.plan\n", argv[0]);
        return 2;
    }
    int version = 0;
    rsGetVersion(&version);
    printf("reshard %d (header %d)\n", version, RESHARD_VERSION_CODE);
    /* the Python package's ctypes mirrors of the structs are compared with these (tests/consumer/run.sh) */
    printf("sizes: config %zu plan_info %zu buffer_info %zu stats %zu\n", sizeof(rsConfig_t), sizeof(rsPlanInfo_t),
           sizeof(rsBufferInfo_t), sizeof(rsExecStats_t));
    if (version != RESHARD_VERSION_CODE) return 1;
    if (rsPlanLoad(argv[1], RS_ALL_RANKS, &plan) != rsSuccess) {
        fprintf(stderr, "consumer: %s\n", rsGetLastError());
        return 1;
    }
    rsPlanInfo_t info;
    rsPlanGetInfo(plan, &info);
    printf("plan %016llx: %d ranks\n", (unsigned long long)info.fingerprint, info.worldSize);
    if (info.worldSize != W) return 1;
    for (int r = 0; r < W; r++) {
        int n = 0;
        rsPlanBufferCount(plan, r, &n);
        for (int i = 0; i < n; i++) {
            rsBufferInfo_t b;
            rsPlanGetBuffer(plan, r, i, &b);
            printf("rank %d buffer %d: \"%s\" %s %s [%lld, %lld] %zu bytes\n", r, i, b.name,
                   b.side == rsSideSource ? "source" : "destination", b.dtype, (long long)b.shape[0],
                   (long long)b.shape[1], b.bytes);
            if (n != 1 || b.bytes != sizeof buf[r] || b.side != (r < 2 ? rsSideSource : rsSideDestination)) return 1;
        }
    }
    /* Sources: rank s holds rows 4s..4s+4 of w, w[i][j] = 10 i + j. Destinations start at -1. */
    for (int r = 0; r < W; r++)
        for (int e = 0; e < 16; e++) buf[r][e] = r < 2 ? (float)(10 * (4 * r + e / 4) + e % 4) : -1.0f;
    if (rsGroupCreate(rsTransportCpu, W, NULL, &group) != rsSuccess) {
        fprintf(stderr, "consumer: %s\n", rsGetLastError());
        return 1;
    }
    pthread_t t[W];
    for (long r = 0; r < W; r++) pthread_create(&t[r], NULL, rank_main, (void *)r);
    int bad = 0;
    for (int r = 0; r < W; r++) {
        pthread_join(t[r], NULL);
        if (result[r] != rsSuccess) {
            fprintf(stderr, "consumer: rank %d: %s: %s\n", r, rsGetErrorString(result[r]), error[r]);
            bad = 1;
        }
    }
    rsGroupDestroy(group);
    rsPlanDestroy(plan);
    /* Rank 2 + c holds columns 2c..2c+2 of every row: local [8, 2]. */
    int wrong = 0;
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 2; j++)
                if (buf[2 + c][i * 2 + j] != (float)(10 * i + 2 * c + j)) wrong++;
    printf("replayed on the CPU transport: %d of 32 destination elements wrong\n", wrong);
    return bad || wrong ? 1 : 0;
}
