/* chaos_peer: one training peer of the chaos run (issue 15, part 3), over pccl.h only.
 *   chaos_peer MASTER_IP:PORT STEPS STATE_FLOATS REDUCE_FLOATS [pccl]
 * Each step, as README's training loop: a pending vote (pcclUpdateTopology when peers wait), a
 * shared-state sync of two float32 tensors of STATE_FLOATS plus a step counter, 4 async
 * all-reduces of REDUCE_FLOATS, a deterministic update of the weights. After any failure:
 * pcclUpdateTopology (again while it fails), then the step again (docs/group-state-machine.md).
 * "pccl": the all-reduces retry as PCCL's examples do: after pcclRankConnectionLost the same
 * all-reduces again at once (the failed ones relinked the ring), no pcclUpdateTopology; newcomers
 * come in at the next step's pending vote. Every peer of a run uses the same style.
 * Lines on stdout, for the orchestrator (chaos.py):
 *   "admitted"                       pcclConnect returned
 *   "phase vote|sync|reduce STEP"    entering a call (so faults can land inside it)
 *   "retry CALL RESULT STEP"         a call failed because of a peer; the step is redone
 *   "step STEP REVISION WORLD HASH"  a step is done: HASH covers every byte of the weights
 *   "bad STEP COUNT"                 an all-reduce result is wrong (then exit 3)
 *   "fatal CALL RESULT"              a result no training loop can handle (then exit 4)
 *   "done STEP"                      STEPS reached; pcclDestroyCommunicator returned
 * Every all-reduce input element is a small integer the same on every peer, so the exact sum is
 * world * x and every element of every result is checked. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pccl.h"

#define NREDUCE 4

static pcclComm_t *comm;
static bool pccl_style;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* Results that a peer's death or stall, or a master restart, explains; anything else ends the
 * peer (pcclMasterConnectionFailed from pcclUpdateTopology too: the master is gone for good). */
static bool peer_failure(pcclResult_t r) {
    return r == pcclRankConnectionLost || r == pcclCollectiveTimeout || r == pcclTooFewPeers ||
           r == pcclUpdateTopologyFailed || r == pcclMasterConnectionFailed;
}

static void fatal(const char *call, pcclResult_t r) {
    say("fatal %s %d", call, (int) r);
    exit(4);
}

/* The rule after a failed call: vote in a new topology, again while the round fails. */
static void recover(const char *call, pcclResult_t why, uint64_t step) {
    if (why != pcclSuccess) {
        if (!peer_failure(why)) fatal(call, why);
        say("retry %s %d %llu", call, (int) why, (unsigned long long) step);
    }
    say("phase vote %llu", (unsigned long long) step);
    pcclResult_t r;
    while ((r = pcclUpdateTopology(comm)) == pcclUpdateTopologyFailed) sleep_ms(10);
    if (r != pcclSuccess) fatal("pcclUpdateTopology", r);
}

/* The step's NREDUCE all-reduces at once (y = sum of x); the first failure, or success. */
static pcclResult_t reduce_all(const float *x, float *y, size_t nr, uint32_t *worlds) {
    pcclAsyncReduceOp_t ops[NREDUCE];
    pcclResult_t started[NREDUCE], res = pcclSuccess;
    for (int k = 0; k < NREDUCE; k++) {
        pcclReduceDescriptor_t desc = {.count = nr, .op = pcclSum, .tag = (uint64_t) k,
                                       .src_descriptor = {.datatype = pcclFloat},
                                       .quantization_options = {.quantized_datatype = pcclFloat}};
        started[k] = pcclAllReduceAsync(x + k * nr, y + k * nr, &desc, comm, &ops[k]);
        if (started[k] != pcclSuccess && res == pcclSuccess) res = started[k];
    }
    for (int k = 0; k < NREDUCE; k++) {
        if (started[k] != pcclSuccess) continue;
        pcclReduceInfo_t info = {0, 0, 0};
        pcclResult_t rk = pcclAwaitAsyncReduce(&ops[k], &info);
        worlds[k] = info.local_world_size;
        if (rk != pcclSuccess && res == pcclSuccess) res = rk;
    }
    return res;
}

static uint64_t hash_words(uint64_t h, const void *p, size_t bytes) {
    const uint64_t *w = p;
    for (size_t i = 0; i < bytes / 8; i++) {
        h ^= w[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h;
}

int main(int argc, char **argv) {
    unsigned a, b, c, d, port;
    if (argc < 5 || argc > 6 || sscanf(argv[1], "%u.%u.%u.%u:%u", &a, &b, &c, &d, &port) != 5) {
        fprintf(stderr, "usage: chaos_peer MASTER_IP:PORT STEPS STATE_FLOATS REDUCE_FLOATS [pccl]\n");
        return 2;
    }
    pccl_style = argc == 6 && strcmp(argv[5], "pccl") == 0;
    uint64_t steps = strtoull(argv[2], NULL, 10);
    size_t ns = strtoull(argv[3], NULL, 10), nr = strtoull(argv[4], NULL, 10);
    if (ns < 8 || ns % 2 || nr < 1) return 2;
    pcclCommCreateParams_t params = {
        .master_address = {.inet = {.protocol = inetIPv4, .ipv4 = {{a, b, c, d}}}, .port = (uint16_t) port}};
    pcclResult_t r;
    if ((r = pcclInit()) != pcclSuccess) fatal("pcclInit", r);
    /* A newcomer whose master died before it was admitted starts over with a new communicator,
     * as Python's connect(n_attempts) does (docs/master-restart.md). */
    for (int attempt = 0;; attempt++) {
        if ((r = pcclCreateCommunicator(&params, &comm)) != pcclSuccess) fatal("pcclCreateCommunicator", r);
        if ((r = pcclConnect(comm)) == pcclSuccess) break;
        if (r != pcclMasterConnectionFailed || attempt == 20) fatal("pcclConnect", r);
        pcclDestroyCommunicator(comm);
        sleep_ms(200);
    }
    say("admitted");

    /* A newcomer starts empty: zeros, step 0, revision 0; the sync gives it the group's. */
    float *w0 = calloc(ns, sizeof *w0), *w1 = calloc(ns, sizeof *w1);
    float *x = malloc(NREDUCE * nr * sizeof *x), *y = malloc(NREDUCE * nr * sizeof *y);
    if (w0 == NULL || w1 == NULL || x == NULL || y == NULL) fatal("malloc", pcclInternalError);
    uint64_t step = 0;
    /* Names in this order on purpose: a newcomer fetches w0 first, from the earliest connected
     * holder, so the orchestrator knows whom to kill mid-transfer (chaos.py, kill_transfer). */
    pcclTensorInfo_t infos[] = {{.name = "a.w0", .data = w0, .count = ns, .datatype = pcclFloat},
                                {.name = "b.w1", .data = w1, .count = ns, .datatype = pcclFloat},
                                {.name = "c.step", .data = &step, .count = 1, .datatype = pcclUint64}};
    pcclSharedState_t state = {.revision = 0, .count = 3, .infos = infos};
    long alone_ms = 0;
    while (step < steps) {
        bool pending = false;
        r = pcclArePeersPending(comm, &pending);
        if (r != pcclSuccess || pending) {
            recover("pcclArePeersPending", r, step);
            continue;
        }
        int world = 0;
        pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, &world);
        if (world < 2) { /* alone: wait for company (the orchestrator always brings some) */
            sleep_ms(20);
            if ((alone_ms += 20) > 120000) fatal("alone", pcclTooFewPeers);
            continue;
        }
        alone_ms = 0;
        say("phase sync %llu", (unsigned long long) step);
        r = pcclSynchronizeSharedState(comm, &state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, NULL);
        if (r != pcclSuccess) {
            recover("pcclSynchronizeSharedState", r, step);
            continue;
        }
        state.revision++;
        say("phase reduce %llu", (unsigned long long) step);
        for (int k = 0; k < NREDUCE; k++)
            for (size_t i = 0; i < nr; i++) x[k * nr + i] = (float) ((step * 7 + (uint64_t) k * 3 + i) % 17);
        uint32_t worlds[NREDUCE] = {0};
        pcclResult_t res;
        while ((res = reduce_all(x, y, nr, worlds)) == pcclRankConnectionLost && pccl_style)
            say("retry pcclAllReduceAsync %d %llu", (int) res, (unsigned long long) step);
        if (res != pcclSuccess) {
            recover("pcclAllReduceAsync", res, step);
            continue;
        }
        /* The ring's world, not the attribute: a peer may leave right after the all-reduce. */
        world = (int) worlds[0];
        size_t bad = 0;
        for (int k = 0; k < NREDUCE; k++) {
            bad += worlds[k] != worlds[0];
            for (size_t i = 0; i < nr; i++) bad += y[k * nr + i] != (float) worlds[k] * x[k * nr + i];
        }
        if (bad > 0) {
            say("bad %llu %zu", (unsigned long long) step, bad);
            return 3;
        }
        /* The update: deterministic in the reduced values, so every peer computes the same bits. */
        for (size_t i = 0; i < ns; i++) {
            float g = y[(i % NREDUCE) * nr + i % nr];
            w0[i] = w0[i] * 0.5f + g * 0.25f;
            w1[i] = w1[i] * 0.75f - g * 0.125f + (float) (step % 5);
        }
        step++;
        uint64_t h = hash_words(0xcbf29ce484222325ull, w0, ns * 4);
        h = hash_words(h, w1, ns * 4);
        say("step %llu %llu %d %016llx", (unsigned long long) step, (unsigned long long) state.revision, world,
            (unsigned long long) h);
    }
    r = pcclDestroyCommunicator(comm);
    say("done %llu", (unsigned long long) step);
    free(w0);
    free(w1);
    free(x);
    free(y);
    return r == pcclSuccess ? 0 : 5;
}
