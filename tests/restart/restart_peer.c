/* restart_peer MASTER_ADDR SHARD STEPS [WORLD]: one peer of a data-parallel run over pccl.h only, as the
 * README's loop writes it, for restart_test. It prints where it is, so that the test can kill the
 * master at the worst moments and check every step's weights on every peer:
 *   "sync STEP" / "allreduce STEP"  right before pcclSynchronizeSharedState / pcclAllReduce
 *   "step STEP rev REV hash HASH"    after each step (HASH: FNV-1a of the weights)
 *   "call STEP CALL RESULT WORLD HASH"  after every sync and all-reduce: its result, the group's
 *                                    world size, the hash of the weights (sync) or of the
 *                                    reduced gradient (all-reduce): tests compare them
 *   "error CALL RESULT"              a call failed (the loop then updates the topology)
 *   "connect RESULT"                 pcclConnect returned (exit 5 unless RESULT is 0)
 *   "done STEP rev REV hash HASH"    at the end (exit 0)
 *   "gave up RESULT"                 pcclUpdateTopology failed for good (exit 3)
 *   "paused STEP"                    RESTART_PEER_PAUSE=SHARD:STEP named this peer and step: it
 *                                    stops itself (SIGSTOP) between two steps, in no call
 * RESTART_PEER_DRIFT=SHARD: that peer starts with other weights and changes one of them before
 * every sync, so that every sync fetches 4 MiB back to it from the others. */
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pccl.h"

#define N (1u << 20) /* 4 MiB of float weights and of gradient */

static float w[N], g[N];
static uint32_t step;

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void print_call(const char *call, pcclResult_t r, int world, const float *data) {
    printf("call %u %s %d %d %016" PRIx64 "\n", step, call, (int) r, world, fnv(data, sizeof w));
    fflush(stdout);
}

/* RESTART_PEER_PAUSE=SHARD:STEP: the test holds this peer at a known point (verdict_test). */
static void maybe_pause(int shard) {
    const char *v = getenv("RESTART_PEER_PAUSE");
    int s, at;
    if (v == NULL || sscanf(v, "%d:%d", &s, &at) != 2 || s != shard || (uint32_t) at != step) return;
    printf("paused %u\n", step);
    fflush(stdout);
    raise(SIGSTOP);
}

static void update_topology(pcclComm_t *comm, const char *call, pcclResult_t why) {
    printf("error %s %d\n", call, (int) why);
    fflush(stdout);
    if (why != pcclRankConnectionLost && why != pcclCollectiveTimeout && why != pcclTooFewPeers &&
        why != pcclMasterConnectionFailed && why != pcclUpdateTopologyFailed && why != pcclInvalidUsage)
        exit(1);
    pcclResult_t r;
    while ((r = pcclUpdateTopology(comm)) == pcclUpdateTopologyFailed || r == pcclInvalidUsage) usleep(10000);
    if (r != pcclSuccess) {
        printf("gave up %d\n", (int) r);
        fflush(stdout);
        pcclDestroyCommunicator(comm); /* its threads end too (TSan reports leaked ones) */
        exit(3);
    }
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    ccoip_socket_address_t addr;
    unsigned a, b, c, d, port;
    if (sscanf(argv[1], "%u.%u.%u.%u:%u", &a, &b, &c, &d, &port) != 5) return 2;
    memset(&addr, 0, sizeof addr);
    addr.inet.protocol = inetIPv4;
    addr.inet.ipv4 = (ccoip_ipv4_address_t){{(uint8_t) a, (uint8_t) b, (uint8_t) c, (uint8_t) d}};
    addr.port = (uint16_t) port;
    int shard = atoi(argv[2]);
    uint32_t steps = (uint32_t) atoi(argv[3]);
    int first_world = argc > 4 ? atoi(argv[4]) : 2; /* the first step waits for this many peers */
    pcclCommCreateParams_t params = {.master_address = addr, .peer_group = 0, .p2p_connection_pool_size = 1};
    pcclComm_t *comm;
    if (pcclInit() || pcclCreateCommunicator(&params, &comm)) return 1;
    pcclResult_t admitted = pcclConnect(comm);
    printf("connect %d\n", (int) admitted);
    fflush(stdout);
    if (admitted != pcclSuccess) {
        pcclDestroyCommunicator(comm);
        return 5;
    }
    pcclTensorInfo_t infos[] = {{.name = "w", .data = w, .count = N, .datatype = pcclFloat},
                                {.name = "step", .data = &step, .count = 1, .datatype = pcclUint32}};
    pcclSharedState_t state = {.revision = 0, .count = 2, .infos = infos};
    pcclReduceDescriptor_t avg = {.count = N, .op = pcclAvg, .src_descriptor = {.datatype = pcclFloat},
                                  .quantization_options = {.quantized_datatype = pcclFloat}};
    const char *drift_env = getenv("RESTART_PEER_DRIFT");
    bool drift = drift_env != NULL && atoi(drift_env) == shard;
    if (drift)
        for (uint32_t i = 0; i < N; i++) w[i] = 1.0f;
    uint64_t last_rev = 0;
    while (step < steps) {
        bool pending;
        int world = 0;
        pcclResult_t r = pcclArePeersPending(comm, &pending);
        if (r != pcclSuccess || pending) {
            if (r == pcclSuccess) r = pcclUpdateTopology(comm);
            if (r != pcclSuccess) update_topology(comm, "vote", r);
            continue;
        }
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &world);
        if (world < (step == 0 ? first_world : 2)) {
            usleep(20000);
            continue;
        }
        if (drift) w[step % N] += 1.0f;
        printf("sync %u\n", step);
        fflush(stdout);
        r = pcclSynchronizeSharedState(comm, &state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, NULL);
        print_call("sync", r, world, w);
        if (r != pcclSuccess) {
            update_topology(comm, "sync", r);
            continue;
        }
        if (last_rev != 0 && state.revision != last_rev + 1 && state.revision <= last_rev) {
            printf("revision went from %" PRIu64 " to %" PRIu64 "\n", last_rev, state.revision);
            return 4;
        }
        last_rev = state.revision;
        state.revision++;
        for (uint32_t i = 0; i < N; i++) g[i] = w[i] - (float) (shard + (int) (i % 7)) * 0.01f;
        printf("allreduce %u\n", step);
        fflush(stdout);
        r = pcclAllReduce(g, g, &avg, comm, NULL);
        print_call("allreduce", r, world, g);
        if (r != pcclSuccess) {
            update_topology(comm, "allreduce", r);
            continue;
        }
        for (uint32_t i = 0; i < N; i++) w[i] -= 0.5f * g[i];
        step++;
        printf("step %u rev %" PRIu64 " hash %016" PRIx64 "\n", step, last_rev, fnv(w, sizeof w));
        fflush(stdout);
        maybe_pause(shard);
    }
    printf("done %u rev %" PRIu64 " hash %016" PRIx64 "\n", step, last_rev, fnv(w, sizeof w));
    fflush(stdout);
    return pcclDestroyCommunicator(comm) == pcclSuccess ? 0 : 1;
}
