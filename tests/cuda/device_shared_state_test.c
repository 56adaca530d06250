/* pcclSynchronizeSharedState with CUDA device tensors, between peer processes on one GPU through
 * the real pccl-master:
 *   device_shared_state_test MASTER_BIN
 * Three peers hold the same four device tensors (float32 4 Mi elements, bfloat16, uint8 with an
 * odd length, float64); peers 0 and 1 hold the content, peer 2 zeros. Sync 1: peer 2 receives
 * every tensor (rx_bytes = the state's size), the others receive nothing, what peers 0 and 1
 * sent adds up to it, and every peer's device bytes equal the content. Sync 2: peer 1 corrupts
 * one tensor on the device; it receives exactly that tensor again (from peer 0 or 2).
 * Then the same with the state of a GPT-2 124M model (148 float32 device tensors, 498 MB, hashed
 * in one batch per sync): peer 2 receives all of it, then peer 1 only the small tensor it
 * corrupted. Without CUDA built in, or without a GPU: "skipped: no GPU". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/cuda_table.h"
#include "pccl.h"
#include "tests/ccoip/harness.h"
#include "tests/cuda/gpt2_shapes.h"
#include "tests/cuda/gpu_peer.h"

#define NPEERS 3
#define MAXT GPT2_TENSORS

typedef struct tensor_t {
    char name[40];
    pcclDataType_t dt;
    size_t count, esz;
} tensor_t;

/* The set a run syncs: "small" (four tensors of four datatypes) or "gpt2"; `victim` is the
 * tensor peer 1 corrupts before sync 2. */
static tensor_t tensors[MAXT];
static int NT, victim;

static void pick_set(const char *set) {
    if (strcmp(set, "gpt2") == 0) {
        static gpt2_tensor_t g[GPT2_TENSORS];
        NT = (int) gpt2_shapes(g);
        for (int t = 0; t < NT; t++) {
            tensors[t] = (tensor_t){"", pcclFloat, g[t].count, 4};
            memcpy(tensors[t].name, g[t].name, sizeof tensors[t].name);
        }
        victim = 5; /* h.0.attn.c_attn.bias, 2304 floats */
        return;
    }
    static const tensor_t small[4] = {
        {"weights", pcclFloat, (size_t) 4 << 20, 4},
        {"embed", pcclBFloat16, 100003, 2},
        {"mask", pcclUint8, 4097, 1},
        {"scale", pcclDouble, 3, 8},
    };
    NT = 4;
    memcpy(tensors, small, sizeof small);
    victim = 1;
}

static void content(unsigned char *p, size_t n, int t) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char) (i * 131 + (size_t) t * 17 + (i >> 9));
}

/* Copies every tensor back and compares it with the content: "check OK" or "check BAD t". */
static void check(const cuda_table_t *cu, void *const *dev, int round) {
    for (int t = 0; t < NT; t++) {
        size_t n = tensors[t].count * tensors[t].esz;
        unsigned char *want = malloc(n), *got = malloc(n);
        if (want != NULL) content(want, n, t);
        if (!want || !got || cu->memcpy_d2h(got, dev[t], n, NULL) != CUDA_OK || memcmp(want, got, n) != 0) {
            printf("check %d BAD %s\n", round, tensors[t].name);
            free(want);
            free(got);
            return;
        }
        free(want);
        free(got);
    }
    printf("check %d OK\n", round);
}

static int peer_main(int port, int p, const char *set) {
    pick_set(set);
    const cuda_table_t *cu = cuda_table();
    pcclComm_t *comm = gpu_peer_connect(port, NPEERS);
    if (comm == NULL) {
        printf("FAIL connect\n");
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    static void *dev[MAXT];
    static pcclTensorInfo_t infos[MAXT];
    for (int t = 0; t < NT; t++) {
        size_t n = tensors[t].count * tensors[t].esz;
        unsigned char *h = calloc(n, 1);
        if (h == NULL || cu->device_alloc(&dev[t], n) != CUDA_OK) {
            printf("FAIL allocation\n");
            return 1;
        }
        if (p != 2) content(h, n, t);
        cu->memcpy_h2d(dev[t], h, n, NULL);
        free(h);
        infos[t] = (pcclTensorInfo_t){tensors[t].name, dev[t], tensors[t].count, tensors[t].dt, pcclDeviceCuda, false};
    }
    pcclSharedState_t state = {1, NT, infos};
    pcclSharedStateSyncInfo_t info = {0, 0};
    pcclResult_t r = pcclSynchronizeSharedState(comm, &state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &info);
    printf("sync 1 %d %" PRIu64 " %" PRIu64 "\n", (int) r, info.tx_bytes, info.rx_bytes);
    check(cu, dev, 1);
    if (p == 1) { /* corrupt one byte of the victim on the device */
        unsigned char b = 0xEE;
        cu->memcpy_h2d((char *) dev[victim] + 777, &b, 1, NULL);
    }
    state.revision = 2;
    r = pcclSynchronizeSharedState(comm, &state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &info);
    printf("sync 2 %d %" PRIu64 " %" PRIu64 "\n", (int) r, info.tx_bytes, info.rx_bytes);
    check(cu, dev, 2);
    printf("done\n");
    fflush(stdout);
    for (int t = 0; t < NT; t++) cu->device_free(dev[t]);
    pcclDestroyCommunicator(comm);
    return 0;
}

/* One run: NPEERS peer processes sync the set twice; returns the failures. */
static int run_set(const char *self, int port, const char *set) {
    pick_set(set);
    h_proc_t peers[NPEERS];
    char port_s[16], idx_s[NPEERS][16];
    snprintf(port_s, sizeof port_s, "%d", port);
    for (int i = 0; i < NPEERS; i++) {
        snprintf(idx_s[i], sizeof idx_s[i], "%d", i);
        char *args[] = {(char *) self, "peer", port_s, idx_s[i], (char *) set, NULL};
        if (!h_spawn(&peers[i], args)) return 1;
    }
    uint64_t total = 0;
    for (int t = 0; t < NT; t++) total += tensors[t].count * tensors[t].esz;
    const uint64_t victim_bytes = tensors[victim].count * tensors[victim].esz;
    int failures = 0;
    uint64_t sum_tx[2] = {0, 0};
    char line[512];
    for (int i = 0; i < NPEERS; i++) {
        for (;;) {
            if (!h_read_line(&peers[i], line, sizeof line, 120000)) {
                fprintf(stderr, "%s: peer %d: no answer\n", set, i);
                return failures + 1;
            }
            if (strcmp(line, "done") == 0) break;
            if (strcmp(line, "ready") == 0) continue;
            int round = 0, res = -1;
            uint64_t tx = 0, rx = 0;
            if (sscanf(line, "sync %d %d %" SCNu64 " %" SCNu64, &round, &res, &tx, &rx) == 4 && round >= 1 && round <= 2) {
                uint64_t want_rx = round == 1 ? (i == 2 ? total : 0) : (i == 1 ? victim_bytes : 0);
                if (res != pcclSuccess || rx != want_rx) {
                    fprintf(stderr, "%s: peer %d sync %d: result %d rx %" PRIu64 " (want 0, %" PRIu64 ")\n", set, i,
                            round, res, rx, want_rx);
                    failures++;
                }
                if (i == 2 && round == 1 && tx != 0) { /* in sync 2 it may serve peer 1 */
                    fprintf(stderr, "%s: peer 2 sync 1: it had nothing to send, yet tx %" PRIu64 "\n", set, tx);
                    failures++;
                }
                if (i == 1 && round == 2 && tx != 0) {
                    fprintf(stderr, "%s: peer 1 sync 2: it was outdated, yet tx %" PRIu64 "\n", set, tx);
                    failures++;
                }
                sum_tx[round - 1] += tx;
            } else if (strncmp(line, "check", 5) == 0) {
                if (strstr(line, " OK") == NULL) {
                    fprintf(stderr, "%s: peer %d: %s\n", set, i, line);
                    failures++;
                }
            } else {
                fprintf(stderr, "%s: peer %d: %s\n", set, i, line);
                failures++;
            }
        }
    }
    /* What the outdated peers received, the holders sent. */
    if (sum_tx[0] != total || sum_tx[1] != victim_bytes) {
        fprintf(stderr, "%s: bytes sent: %" PRIu64 " and %" PRIu64 ", want %" PRIu64 " and %" PRIu64 "\n", set,
                sum_tx[0], sum_tx[1], total, victim_bytes);
        failures++;
    }
    for (int i = 0; i < NPEERS; i++) h_wait(&peers[i], 10000);
    printf("device_shared_state_test %s: %d peers, %d tensors, 2 syncs, %d failures\n", set, NPEERS, NT, failures);
    return failures;
}

int main(int argc, char **argv) {
    if (argc >= 5 && strcmp(argv[1], "peer") == 0) return peer_main(atoi(argv[2]), atoi(argv[3]), argv[4]);
    const cuda_table_t *cu = cuda_table();
    int ndev = 0;
    if (cu == NULL || cu->device_count(&ndev) != CUDA_OK || ndev == 0) {
        printf("device_shared_state_test: skipped: no GPU%s\n", cu == NULL ? " (CUDA not built in)" : "");
        return 0;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: device_shared_state_test MASTER_BIN\n");
        return 2;
    }
    h_init(240);
    int failures = 0;
    static const char *sets[] = {"small", "gpt2"};
    for (int k = 0; k < 2; k++) {
        h_proc_t master;
        int port = h_start_master(&master, argv[1], NULL);
        if (port <= 0) return 1;
        failures += run_set(argv[0], port, sets[k]);
        h_kill(&master, 15);
        h_wait(&master, 5000);
    }
    printf("device_shared_state_test: %d failures\n", failures);
    return failures ? 1 : 0;
}
