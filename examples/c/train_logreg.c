/* train_logreg.c: data-parallel logistic regression with libpccl.
 *
 *   train_logreg MASTER_HOST:PORT PEER_ID [STEPS]
 *
 * Each peer holds its own shard of a synthetic dataset (seeded by PEER_ID), computes the gradient
 * of the mean log-loss on it, and all-reduces gradients (Avg) with the other peers every step.
 * Peers may die and join at any time:
 *   - a failed all-reduce (a peer died) -> pcclUpdateTopology, then the step is retried;
 *   - pcclArePeersPending -> pcclUpdateTopology admits newcomers;
 *   - every step starts with pcclSynchronizeSharedState over the parameters and the step
 *     counter: peers that hold the popular content move nothing (and check that they do); a
 *     newcomer, whose revision is 0, receives them and carries on from there.
 * Prints one line per step and, at the end, a hash of the parameters: equal on every peer. */
#include <math.h>
#include <pccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIM 16
#define SAMPLES 2048
#define LR 0.5f

typedef struct model {
    float w[DIM + 1]; /* weights, then the bias */
    uint32_t step;
} model_t;

static uint64_t rng_state;
static double rng_uniform(void) { /* xorshift64*: deterministic across machines */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double) ((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static float X[SAMPLES][DIM], Y[SAMPLES];

static void make_shard(int peer_id) {
    float truth[DIM];
    rng_state = 0x9E3779B97F4A7C15ull;
    for (int j = 0; j < DIM; j++) truth[j] = (float) (rng_uniform() * 4 - 2);
    rng_state = 0x243F6A8885A308D3ull ^ (uint64_t) (peer_id + 1) * 0x100000001B3ull;
    for (int i = 0; i < SAMPLES; i++) {
        double z = 0.3;
        for (int j = 0; j < DIM; j++) {
            X[i][j] = (float) (rng_uniform() * 2 - 1);
            z += truth[j] * X[i][j];
        }
        Y[i] = rng_uniform() < 1.0 / (1.0 + exp(-z)) ? 1.0f : 0.0f;
    }
}

/* grad[0..DIM] = d loss / d w; grad[DIM + 1] = the loss itself (so one all-reduce carries both). */
static void gradient(const model_t *m, float grad[DIM + 2]) {
    memset(grad, 0, sizeof(float) * (DIM + 2));
    for (int i = 0; i < SAMPLES; i++) {
        float z = m->w[DIM];
        for (int j = 0; j < DIM; j++) z += m->w[j] * X[i][j];
        float p = 1.0f / (1.0f + expf(-z));
        float e = p - Y[i];
        for (int j = 0; j < DIM; j++) grad[j] += e * X[i][j] / SAMPLES;
        grad[DIM] += e / SAMPLES;
        grad[DIM + 1] -= (Y[i] > 0 ? logf(p + 1e-7f) : logf(1 - p + 1e-7f)) / SAMPLES;
    }
}

static uint64_t fnv1a(const void *data, size_t len) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ ((const uint8_t *) data)[i]) * 1099511628211ull;
    return h;
}

static int parse_address(const char *s, ccoip_socket_address_t *out) {
    unsigned a, b, c, d, port;
    if (sscanf(s, "%u.%u.%u.%u:%u", &a, &b, &c, &d, &port) != 5 || a > 255 || b > 255 || c > 255 || d > 255 ||
        port > 65535)
        return -1;
    memset(out, 0, sizeof *out);
    out->inet.protocol = inetIPv4;
    out->inet.ipv4.data[0] = (uint8_t) a, out->inet.ipv4.data[1] = (uint8_t) b;
    out->inet.ipv4.data[2] = (uint8_t) c, out->inet.ipv4.data[3] = (uint8_t) d;
    out->port = (uint16_t) port;
    return 0;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long) (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The shared state: the parameters and the step counter. Each sync advances the revision by
 * one; a newcomer starts at revision 0, below everyone, and so receives the popular content and
 * its revision. A failed sync is retried with the same revision. */
static pcclResult_t sync_model(pcclComm_t *comm, pcclSharedState_t *state, uint64_t *next_revision,
                               uint64_t *rx_bytes) {
    state->revision = *next_revision;
    pcclSharedStateSyncInfo_t info = {0, 0};
    pcclResult_t r = pcclSynchronizeSharedState(comm, state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &info);
    if (r == pcclSuccess) *next_revision = state->revision + 1;
    *rx_bytes = info.rx_bytes;
    return r;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MASTER_HOST:PORT PEER_ID [STEPS] [STEP_DELAY_MS]\n", argv[0]);
        return 2;
    }
    ccoip_socket_address_t master;
    if (parse_address(argv[1], &master) != 0) {
        fprintf(stderr, "bad master address %s (want a.b.c.d:port)\n", argv[1]);
        return 2;
    }
    int id = atoi(argv[2]);
    uint32_t steps = argc > 3 ? (uint32_t) atoi(argv[3]) : 60;
    int delay_ms = argc > 4 ? atoi(argv[4]) : 0;
    make_shard(id);
    setvbuf(stdout, NULL, _IOLBF, 0);

    pcclComm_t *comm;
    pcclCommCreateParams_t params = {.master_address = master, .peer_group = 0, .p2p_connection_pool_size = 1};
    if (pcclInit() != pcclSuccess || pcclCreateCommunicator(&params, &comm) != pcclSuccess) return 1;
    pcclResult_t r = pcclConnect(comm);
    if (r != pcclSuccess) {
        fprintf(stderr, "peer %d: pcclConnect: %s\n", id, pcclResultString(r));
        return 1;
    }
    printf("peer %d: admitted\n", id);

    model_t m;
    memset(&m, 0, sizeof m);
    pcclTensorInfo_t infos[2] = {
        {.name = "weights", .data = m.w, .count = DIM + 1, .datatype = pcclFloat, .device_type = pcclDeviceCpu},
        {.name = "step", .data = &m.step, .count = 1, .datatype = pcclUint32, .device_type = pcclDeviceCpu}};
    pcclSharedState_t state = {.revision = 0, .count = 2, .infos = infos};
    /* Everyone starts at revision 0: the founders' first sync elects their common (zero)
     * parameters at revision 0; a peer joining later is below the run's revision and receives. */
    uint64_t next_revision = 0;
    int synced = 0;
    /* Every peer makes the same sequence of collective calls: a newcomer's first call after
     * pcclConnect is the shared-state sync, which is also what the others do first in the step
     * after the pcclUpdateTopology that admitted it. */
    while (m.step < steps) {
        int world = 0;
        bool pending = false;
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &world);
        if (world < 2) { /* alone: wait for company */
            if (!(pcclArePeersPending(comm, &pending) == pcclSuccess && pending && pcclUpdateTopology(comm) == pcclSuccess))
                sleep_ms(20);
            continue;
        }
        uint64_t rx = 0;
        r = sync_model(comm, &state, &next_revision, &rx);
        if (r != pcclSuccess) {
            printf("peer %d: shared-state sync failed (%s); updating the topology\n", id, pcclResultString(r));
            while (pcclUpdateTopology(comm) == pcclUpdateTopologyFailed) sleep_ms(10);
            continue;
        }
        if (rx > 0 && synced) { /* a peer already in never has to fetch: it would mean divergence */
            fprintf(stderr, "peer %d: fetched %llu bytes of shared state at step %u: parameters diverged\n", id,
                    (unsigned long long) rx, m.step);
            return 1;
        }
        if (rx > 0) printf("peer %d: caught up at step %u (received %llu bytes of shared state)\n", id, m.step,
                           (unsigned long long) rx);
        synced = 1;
        float grad[DIM + 2];
        gradient(&m, grad);
        pcclReduceDescriptor_t d = {.count = DIM + 2, .op = pcclAvg, .tag = 0,
                                    .src_descriptor = {.datatype = pcclFloat, .distribution_hint = pcclDistributionNone},
                                    .quantization_options = {.quantized_datatype = pcclFloat, .algorithm = pcclQuantNone}};
        pcclReduceInfo_t info;
        r = pcclAllReduce(grad, grad, &d, comm, &info);
        if (r != pcclSuccess) {
            printf("peer %d: step %u: all-reduce failed (%s): a peer left; updating the topology\n", id, m.step + 1,
                   pcclResultString(r));
            while (pcclUpdateTopology(comm) == pcclUpdateTopologyFailed) sleep_ms(10);
            continue;
        }
        for (int j = 0; j <= DIM; j++) m.w[j] -= LR * grad[j];
        m.step++;
        printf("peer %d: step %3u  world %u  loss %.6f\n", id, m.step, info.local_world_size, grad[DIM + 1]);
        if (delay_ms > 0) sleep_ms(delay_ms);
        if (pcclArePeersPending(comm, &pending) == pcclSuccess && pending)
            while (pcclUpdateTopology(comm) == pcclUpdateTopologyFailed) sleep_ms(10);
    }
    printf("peer %d: done at step %u, parameter hash %016llx\n", id, m.step,
           (unsigned long long) fnv1a(m.w, sizeof m.w));
    pcclDestroyCommunicator(comm);
    return 0;
}
