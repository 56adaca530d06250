/* nm_test: zero allocation calls in a whole peer process in steady state, end to end.
 * Usage: nm_test N PCCL_MASTER NM_PEER LIBNOMALLOC_SO. The real pccl-master and N nm_peer processes
 * (public API only, LD_PRELOAD=libnomalloc.so: every malloc, calloc, realloc, reallocarray,
 * posix_memalign, aligned_alloc, memalign, valloc and pvalloc of every thread is counted) on
 * 127.0.0.1, pool of 4 streams per neighbour. First a self-test proves that the interposer counts
 * (exactly 2 calls, from two threads). Then, for each scenario, after a warm-up, 100 all-reduces of
 * 4 MiB float32 (plain sync; 8 async in flight; pcclAllReduceMultipleWithRetry, 10 x 10; quantized
 * to uint8) and 100 pcclSynchronizeSharedState with nothing to transfer (64 tensors): every peer
 * must report EXPECTED calls (0 for each; docs/memory.md), results equal to the exact sums in
 * every element (quantized: bit-identical to its first run, which is within the quantization
 * bound) and the same result hash as every other peer. Then one sync at a time per communicator:
 * a second concurrent pcclSynchronizeSharedState is refused, the first completes. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pccl.h"
#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define MAXN 4
#define POOL "4"

static const struct {
    const char *name;
    long expected; /* allocation calls per peer over the scenario's measured window */
} scenarios[] = {{"sync", 0}, {"async", 0}, {"multi", 0}, {"quant", 0}, {"ss", 0}};

int main(int argc, char **argv) {
    REQUIRE(argc == 5);
    int n = atoi(argv[1]);
    REQUIRE(n >= 2 && n <= MAXN);
    h_init(280);
    char preload[PATH_MAX];
    REQUIRE(realpath(argv[4], preload) != NULL);

    h_proc_t master, peers[MAXN];
    h_stderr_path = "/dev/null"; /* the master's info log */
    int port = h_start_master(&master, argv[2], NULL);
    REQUIRE(port > 0);
    REQUIRE(setenv("LD_PRELOAD", preload, 1) == 0); /* the peers only */
    char sport[16];
    snprintf(sport, sizeof sport, "%d", port);
    for (int i = 0; i < n; i++) {
        char sidx[16];
        snprintf(sidx, sizeof sidx, "%d", i);
        char *pargv[] = {argv[3], sport, sidx, POOL, NULL};
        REQUIRE(h_spawn(&peers[i], pargv));
        REQUIRE(h_send(&peers[i], "connect"));
        REQUIRE(h_admit(peers, i, &peers[i]));
    }

    char line[256];
    for (int i = 0; i < n; i++) CHECK_EQ_U64(h_call(&peers[i], "selftest", line, sizeof line, 10000), 2);

    for (size_t s = 0; s < sizeof scenarios / sizeof scenarios[0]; s++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "run %s %d", scenarios[s].name, n);
        for (int i = 0; i < n; i++) CHECK(h_send(&peers[i], cmd));
        char hash0[32] = "";
        for (int i = 0; i < n; i++) {
            char name[32] = "", hash[32] = "";
            long calls = -2;
            unsigned long nbad = 1;
            bool got = h_read_line(&peers[i], line, sizeof line, 120000);
            if (!got || sscanf(line, "run %31s %ld %lu %31s", name, &calls, &nbad, hash) != 4) {
                fprintf(stderr, "nm_test: peer %d, %s: '%s'\n", i, scenarios[s].name, got ? line : "(no answer)");
                CHECK(false);
                continue;
            }
            fprintf(stderr, "nm_test: %d peers, %s, peer %d: %ld allocation calls, %lu bad\n", n, name, i, calls,
                    nbad);
            CHECK(strcmp(name, scenarios[s].name) == 0);
            CHECK_EQ_U64(calls, scenarios[s].expected);
            CHECK_EQ_U64(nbad, 0);
            if (i == 0) memcpy(hash0, hash, sizeof hash);
            CHECK(strcmp(hash, hash0) == 0);
        }
    }

    /* One sync at a time per communicator: a second call while the first waits is refused
     * with pcclInvalidUsage, and the first still completes. */
    char want[32];
    snprintf(want, sizeof want, "ssbusy %d", (int) pcclInvalidUsage);
    CHECK(h_send(&peers[0], "ssbusy"));
    CHECK(h_read_line(&peers[0], line, sizeof line, 20000) && strcmp(line, want) == 0);
    for (int i = 1; i < n; i++) CHECK(h_send(&peers[i], "ss"));
    CHECK(h_read_line(&peers[0], line, sizeof line, 20000) && strcmp(line, "ssdone 0") == 0);
    for (int i = 1; i < n; i++) CHECK(h_read_line(&peers[i], line, sizeof line, 20000) && strcmp(line, "ss 0") == 0);

    for (int i = 0; i < n; i++) CHECK_EQ_U64(h_call(&peers[i], "quit", line, sizeof line, 20000), 0);
    for (int i = 0; i < n; i++) CHECK_EQ_U64(h_wait(&peers[i], 10000), 0);
    h_kill(&master, 15);
    CHECK_EQ_U64(h_wait(&master, 10000), 0);
    return check_exit();
}
