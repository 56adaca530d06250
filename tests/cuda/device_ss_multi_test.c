/* issue 32 on the GPU: device tensors fetched in byte ranges from several distributors at once,
 * one of them corrupting what it serves. Peer processes on one GPU through the real pccl-master:
 *   device_ss_multi_test MASTER_BIN
 * Peers 0..2 hold three device tensors (float32, bfloat16, uint8; each a whole number of 1 MiB
 * ranges), peers 3 and 4 zeros. Peer 1 runs with the test hook PCCL_TEST_SS_CORRUPT (it flips a
 * bit of the first range each connection sends, after hashing the staged bytes). One sync: both
 * newcomers fetch from the three distributors at once, catch the bad range by its hash and fetch
 * it from another in the same call: rx_bytes = the state + one range each, every device byte
 * equals the content; peer 1 sent one range to each newcomer, peers 0 and 2 the rest. A second
 * sync moves nothing. Without CUDA built in, or without a GPU: "skipped: no GPU". */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda/cuda_table.h"
#include "pccl.h"
#include "tests/ccoip/harness.h"
#include "tests/cuda/gpu_peer.h"

#define NPEERS 5
#define NT 3
#define RANGE ((uint64_t) 1 << 20)

static const struct {
    const char *name;
    pcclDataType_t dt;
    size_t count, esz;
} tensors[NT] = {{"weights", pcclFloat, (size_t) 1 << 20, 4}, {"embed", pcclBFloat16, (size_t) 3 << 20, 2},
                 {"mask", pcclUint8, (size_t) 2 << 20, 1}};

static void content(unsigned char *p, size_t n, int t) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char) (i * 131 + (size_t) t * 17 + (i >> 9));
}

/* "check R OK" when every device byte equals the content, else "check R BAD name". */
static void check(const cuda_table_t *cu, void *const *dev, int round) {
    for (int t = 0; t < NT; t++) {
        size_t n = tensors[t].count * tensors[t].esz;
        unsigned char *want = malloc(n), *got = malloc(n);
        if (want != NULL) content(want, n, t);
        bool ok = want && got && cu->memcpy_d2h(got, dev[t], n, NULL) == CUDA_OK && memcmp(want, got, n) == 0;
        free(want);
        free(got);
        if (!ok) {
            printf("check %d BAD %s\n", round, tensors[t].name);
            return;
        }
    }
    printf("check %d OK\n", round);
}

static int peer_main(int port, int p) {
    const cuda_table_t *cu = cuda_table();
    pcclComm_t *comm = gpu_peer_connect(port, NPEERS);
    if (comm == NULL) {
        printf("FAIL connect\n");
        return 1;
    }
    void *dev[NT];
    pcclTensorInfo_t infos[NT];
    for (int t = 0; t < NT; t++) {
        size_t n = tensors[t].count * tensors[t].esz;
        unsigned char *h = calloc(n, 1);
        if (h == NULL || cu->device_alloc(&dev[t], n) != CUDA_OK) {
            printf("FAIL allocation\n");
            return 1;
        }
        if (p < 3) content(h, n, t);
        cu->memcpy_h2d(dev[t], h, n, NULL);
        free(h);
        infos[t] = (pcclTensorInfo_t){tensors[t].name, dev[t], tensors[t].count, tensors[t].dt, pcclDeviceCuda, false};
    }
    pcclSharedState_t state = {1, NT, infos};
    for (int round = 1; round <= 2; round++) {
        pcclSharedStateSyncInfo_t info = {0, 0};
        state.revision = (uint64_t) round;
        pcclResult_t r = pcclSynchronizeSharedState(comm, &state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &info);
        printf("sync %d %d %" PRIu64 " %" PRIu64 "\n", round, (int) r, info.tx_bytes, info.rx_bytes);
        check(cu, dev, round);
        fflush(stdout);
    }
    printf("done\n");
    fflush(stdout);
    for (int t = 0; t < NT; t++) cu->device_free(dev[t]);
    pcclDestroyCommunicator(comm);
    return 0;
}

/* Peer i's answers; adds its sync results to rx/tx (per round) and returns its failures. */
static int read_peer(h_proc_t *peer, int i, uint64_t rx[2], uint64_t tx[2]) {
    char line[512];
    int failures = 0;
    for (;;) {
        if (!h_read_line(peer, line, sizeof line, 120000)) {
            fprintf(stderr, "peer %d: no answer\n", i);
            return failures + 1;
        }
        if (strcmp(line, "done") == 0) return failures;
        int round = 0, res = -1;
        uint64_t t = 0, r = 0;
        if (sscanf(line, "sync %d %d %" SCNu64 " %" SCNu64, &round, &res, &t, &r) == 4 && round >= 1 && round <= 2) {
            failures += res != pcclSuccess;
            rx[round - 1] = r;
            tx[round - 1] = t;
        } else if (strncmp(line, "check", 5) != 0 || strstr(line, " OK") == NULL) {
            fprintf(stderr, "peer %d: %s\n", i, line);
            failures++;
        }
    }
}

static int run(const char *self, int port) {
    h_proc_t peers[NPEERS];
    char port_s[16], idx_s[NPEERS][16];
    snprintf(port_s, sizeof port_s, "%d", port);
    for (int i = 0; i < NPEERS; i++) {
        snprintf(idx_s[i], sizeof idx_s[i], "%d", i);
        char *args[] = {(char *) self, "peer", port_s, idx_s[i], NULL};
        if (i == 1) setenv("PCCL_TEST_SS_CORRUPT", "1", 1);
        bool ok = h_spawn(&peers[i], args);
        unsetenv("PCCL_TEST_SS_CORRUPT");
        if (!ok) return 1;
    }
    uint64_t total = 0, rx[NPEERS][2], tx[NPEERS][2], sent = 0;
    for (int t = 0; t < NT; t++) total += tensors[t].count * tensors[t].esz;
    int failures = 0;
    for (int i = 0; i < NPEERS; i++) failures += read_peer(&peers[i], i, rx[i], tx[i]);
    for (int i = 0; i < NPEERS; i++) {
        uint64_t want = i >= 3 ? total + RANGE : 0; /* the bad range, and it again from another */
        if (rx[i][0] != want || rx[i][1] != 0) {
            fprintf(stderr, "peer %d: rx %" PRIu64 ", %" PRIu64 " (want %" PRIu64 ", 0)\n", i, rx[i][0], rx[i][1], want);
            failures++;
        }
        sent += tx[i][0];
    }
    if (tx[1][0] != 2 * RANGE || tx[0][0] == 0 || tx[2][0] == 0 || sent != 2 * total + 2 * RANGE) {
        fprintf(stderr, "sent: %" PRIu64 " %" PRIu64 " %" PRIu64 " (%" PRIu64 " in all; want the bad one %" PRIu64
                        ", all %" PRIu64 ")\n", tx[0][0], tx[1][0], tx[2][0], sent, 2 * RANGE, 2 * total + 2 * RANGE);
        failures++;
    }
    for (int i = 0; i < NPEERS; i++) h_wait(&peers[i], 10000);
    return failures;
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "peer") == 0) return peer_main(atoi(argv[2]), atoi(argv[3]));
    const cuda_table_t *cu = cuda_table();
    int ndev = 0;
    if (cu == NULL || cu->device_count(&ndev) != CUDA_OK || ndev == 0) {
        printf("device_ss_multi_test: skipped: no GPU%s\n", cu == NULL ? " (CUDA not built in)" : "");
        return 0;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: device_ss_multi_test MASTER_BIN\n");
        return 2;
    }
    h_init(180);
    setenv("PCCL_SS_RANGE_BYTES", "1048576", 1);
    setenv("PCCL_SS_ENDGAME", "0", 1);       /* no second copies: rx is exact */
    setenv("PCCL_SS_MAX_SEND_MBPS", "64", 1); /* every distributor takes a range */
    h_proc_t master;
    int port = h_start_master(&master, argv[1], NULL);
    if (port <= 0) return 1;
    int failures = run(argv[0], port);
    h_kill(&master, 15);
    h_wait(&master, 5000);
    printf("device_ss_multi_test: %d peers (3 distributors, one corrupting; 2 newcomers), %d failures\n", NPEERS,
           failures);
    return failures ? 1 : 0;
}
