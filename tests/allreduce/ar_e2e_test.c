/* ar_e2e_test: pcclAllReduce end to end, with the real pccl-master and real ar_peer processes.
 *   ar_e2e_test MODE MASTER_BIN PEER_BIN, MODE one of
 *   matrix  2, 3, 4 and 8 peers; every dtype x op at small and odd sizes (1 element up), random
 *           floats in the ring's documented order, a few 64 MiB runs; every byte of every peer's
 *           result checked (in the peer, against ar_ref.c), results bit-identical across peers,
 *           pcclReduceInfo_t exact.
 *   info    pcclReduceInfo_t (local_world_size, tx_bytes, rx_bytes) against the ring's arithmetic
 *           for counts around the chunking edges (fewer elements than peers, remainders).
 *   kill    100 trials: SIGKILL of a random peer at a random moment of a 16 MiB all-reduce among
 *           4; survivors agree on the outcome within a bound, the retry with 3 is exact, no
 *           descriptor or thread leaks; then a newcomer restores 4.
 * Under ASan/TSan the sizes shrink (the checks stay). */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/allreduce/ar_driver.h"
#include "tests/allreduce/ar_ref.h"
#include "tests/common/check.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static const char *master_bin, *peer_bin;
static int ops_run;

/* One all-reduce on every peer of a; checks everything the peers report. */
static bool run_one(ard_t *a, int dtype, int op, size_t count, int kind, int inplace, int timeout_ms) {
    ard_result_t r[ARD_MAX];
    REQUIRE(ard_post(a, dtype, op, count, kind, inplace));
    bool ok = ard_collect(a, r, timeout_ms);
    ops_run++;
    for (int i = 0; i < a->n && ok; i++) {
        uint64_t tx, rx;
        ar_ring_bytes(count, ar_dtype_size(dtype), (uint32_t) a->n, (uint32_t) i, &tx, &rx);
        bool good = r[i].res == 0 && r[i].check == 0 && r[i].hash == r[0].hash && r[i].world == (uint32_t) a->n &&
                    r[i].tx == tx && r[i].rx == rx;
        if (!good) {
            fprintf(stderr,
                    "FAIL n=%d dtype=%d op=%d count=%zu kind=%d inplace=%d peer %d: result %d check %d hash %016" PRIx64
                    " (peer 0: %016" PRIx64 ") world %u tx %" PRIu64 " (want %" PRIu64 ") rx %" PRIu64
                    " (want %" PRIu64 ")\n",
                    a->n, dtype, op, count, kind, inplace, i, r[i].res, r[i].check, r[i].hash, r[0].hash, r[i].world,
                    r[i].tx, tx, r[i].rx, rx);
            ok = false;
        }
    }
    CHECK(ok);
    return ok;
}

static int matrix(void) {
    static const int ns[4] = {2, 3, 4, 8};
    const size_t small[] = {1, 2, 3, 7, 1000, 65537, 300007};
    const size_t nsmall = SANITIZED ? 5 : sizeof small / sizeof small[0];
    for (int k = 0; k < 4; k++) {
        ard_t a;
        uint64_t t0 = ard_now_us();
        REQUIRE(ard_start(&a, master_bin, peer_bin, ns[k]));
        int fails = 0;
        for (size_t s = 0; s < nsmall; s++)
            for (int d = 0; d < 12; d++)
                for (int op = 0; op < 5; op++) {
                    fails += !run_one(&a, d, op, small[s], AR_EXACT, (int) ((s + (size_t) d + (size_t) op) & 1), 60000);
                    /* Floats again with random values: the result follows the ring's order. */
                    if (d >= pcclFloat16 && op != pcclMax && op != pcclMin && s >= 2)
                        fails += !run_one(&a, d, op, small[s], AR_RANDOM, (int) (s & 1), 60000);
                    REQUIRE(fails < 5);
                }
        /* Large: 64 MiB (4 MiB under sanitizers) of a few combinations. */
        size_t big = SANITIZED ? (4u << 20) : (64u << 20);
        switch (ns[k]) {
        case 2: run_one(&a, pcclFloat, pcclSum, big / 4, AR_RANDOM, 0, 300000); break;
        case 3: run_one(&a, pcclDouble, pcclAvg, big / 8 + 1, AR_RANDOM, 1, 300000); break;
        case 4:
            run_one(&a, pcclFloat, pcclAvg, big / 4, AR_EXACT, 0, 300000);
            run_one(&a, pcclBFloat16, pcclSum, big / 8 - 3, AR_RANDOM, 1, 300000); /* 16 MiB: the reference is slow */
            break;
        default: run_one(&a, pcclInt32, pcclSum, big / 4 + 5, AR_EXACT, 0, 300000); break;
        }
        ard_stop(&a);
        fprintf(stderr, "matrix: %d peers done in %.1f s (%d all-reduces so far)\n", ns[k],
                (double) (ard_now_us() - t0) / 1e6, ops_run);
    }
    return check_exit();
}

static int info(void) {
    for (int n = 2; n <= 5; n += 3) {
        ard_t a;
        REQUIRE(ard_start(&a, master_bin, peer_bin, n));
        const size_t counts[] = {1, 2, (size_t) n - 1, (size_t) n, (size_t) n + 1, 4099, 65536 * 3 + 1};
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
            for (int d = 0; d < 12; d += 5) run_one(&a, d, pcclSum, counts[c], AR_EXACT, 0, 60000);
        ard_stop(&a);
    }
    return check_exit();
}

static int kill_trials(void) {
    const int trials = SANITIZED ? 10 : 100;
    const size_t count = (SANITIZED ? (2u << 20) : (16u << 20)) / 4;
    ard_t a;
    REQUIRE(ard_start(&a, master_bin, peer_bin, 4));
    /* How long one all-reduce takes here: the kill lands within [0, 3/4 of that] after the call
     * starts. */
    uint64_t dur = 0;
    for (int i = 0; i < 3; i++) {
        ard_result_t r[ARD_MAX];
        REQUIRE(ard_post(&a, pcclFloat, pcclSum, count, AR_EXACT, 0) && ard_collect(&a, r, 60000));
        REQUIRE(r[0].res == 0 && r[0].check == 0);
        if (i == 0 || r[0].call_us < dur) dur = r[0].call_us;
    }
    fprintf(stderr, "kill: one 16 MiB all-reduce among 4 takes %.1f ms\n", (double) dur / 1e3);
    srand(12345);
    int base_fds = -1, base_threads = -1, failed = 0, succeeded = 0;
    uint64_t worst_latency = 0, worst_trial = 0;
    for (int t = 0; t < trials; t++) {
        uint64_t t0 = ard_now_us();
        REQUIRE(ard_post_go(&a, pcclFloat, pcclSum, count, AR_EXACT, 0));
        /* Within the first three quarters of an op's time: under load the peers start late, and
         * a kill after the op ends tests nothing new. */
        usleep((useconds_t) ((uint64_t) rand() % (dur * 3 / 4 + 1)));
        int victim = rand() % a.n;
        h_kill(&a.peers[victim], SIGKILL);
        uint64_t t_kill = ard_now_us();
        ard_drop(&a, victim);
        ard_result_t r[ARD_MAX];
        REQUIRE(ard_collect(&a, r, 10000));
        uint64_t latency = 0;
        for (int i = 0; i < a.n; i++) {
            CHECK(r[i].res == r[0].res); /* a shared outcome */
            if (r[i].end_us > t_kill && r[i].end_us - t_kill > latency) latency = r[i].end_us - t_kill;
        }
        if (r[0].res == 0) {
            succeeded++; /* the kill came after the outcome was decided: the result must be exact */
            for (int i = 0; i < a.n; i++) CHECK(r[i].check == 0);
        } else {
            failed++;
            if (latency > worst_latency) worst_latency = latency;
            CHECK(latency < 3000000); /* bounded: well under the 10 s heartbeat timeout */
        }
        /* The survivors agree on a new ring and retry: exact result with 3. */
        bool up = false;
        for (int i = 0; i < 10 && !up; i++) up = ard_update(&a);
        REQUIRE(up);
        REQUIRE(run_one(&a, pcclFloat, pcclSum, count, AR_EXACT, 0, 60000));
        for (int i = 0; i < a.n; i++) {
            int fds, threads;
            REQUIRE(ard_res(&a, i, &fds, &threads));
            if (base_fds < 0) {
                base_fds = fds;
                base_threads = threads;
                fprintf(stderr, "kill: a survivor in a ring of 3 holds %d descriptors and %d threads\n", fds, threads);
            }
            if (fds != base_fds || threads != base_threads) {
                fprintf(stderr, "kill: trial %d peer %d holds %d descriptors and %d threads (first: %d and %d)\n", t,
                        i, fds, threads, base_fds, base_threads);
                CHECK(false);
            }
        }
        REQUIRE(ard_add_peer(&a));
        uint64_t took = ard_now_us() - t0;
        if (took > worst_trial) worst_trial = took;
        CHECK(took < 20000000);
        REQUIRE(check_failures < 5);
    }
    ard_stop(&a);
    fprintf(stderr, "kill: %d trials, %d failed as expected, %d finished before the kill; worst failure latency "
            "%.1f ms, worst trial %.2f s\n",
            trials, failed, succeeded, (double) worst_latency / 1e3, (double) worst_trial / 1e6);
    /* Enough kills landed inside an all-reduce to exercise the failure path (48-88 of 100 on a
     * quiet machine; a loaded one starts the peers later, so the bound leaves room). */
    CHECK(failed >= (SANITIZED ? 1 : trials / 5));
    return check_exit();
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: ar_e2e_test matrix|info|kill MASTER_BIN PEER_BIN\n");
        return 2;
    }
    master_bin = argv[2];
    peer_bin = argv[3];
    h_init(strcmp(argv[1], "info") == 0 ? 240 : 840);
    if (strcmp(argv[1], "matrix") == 0) return matrix();
    if (strcmp(argv[1], "info") == 0) return info();
    if (strcmp(argv[1], "kill") == 0) return kill_trials();
    fprintf(stderr, "ar_e2e_test: unknown mode %s\n", argv[1]);
    return 2;
}
