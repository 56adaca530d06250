/* shm_e2e_test: all-reduce between peers of one host over the shared-memory data links, end to
 * end: the real pccl-master and real ar_peer processes on 127.0.0.1, once with the default (the
 * links switch to shared memory: checked in every peer's /proc/PID/maps) and once with
 * PCCL_SHM=0 (no segment mapped anywhere). Each pass: exact 16 MiB float Sum and odd-sized int32
 * all-reduces among 4 (every byte checked in the peers against ar_ref.c, results identical), then
 * trials that SIGKILL a random peer mid-op: the survivors share one outcome, fail within 1.5 s
 * of the kill, retry exactly among 3 (still over shared memory), and a newcomer restores 4; then
 * a peer killed while every link idles (the next all-reduce fails at once, the rest recover),
 * and a prompt teardown of idle links.
 *   shm_e2e_test MASTER_BIN PEER_BIN */
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

/* Segments of our data links that peer i has mapped (their names are gone: "(deleted)"). */
static int shm_mappings(const ard_t *a, int i) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int) a->peers[i].pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    int n = 0;
    while (fgets(line, sizeof line, f)) n += strstr(line, "/dev/shm/pccl-") != NULL;
    fclose(f);
    return n;
}

/* One all-reduce on every peer; every peer's check and hash, and the ring's byte counts. */
static bool run_one(ard_t *a, int dtype, size_t count) {
    ard_result_t r[ARD_MAX];
    REQUIRE(ard_post(a, dtype, pcclSum, count, AR_EXACT, 0));
    bool ok = ard_collect(a, r, 120000);
    for (int i = 0; i < a->n && ok; i++) {
        uint64_t tx, rx;
        ar_ring_bytes(count, ar_dtype_size(dtype), (uint32_t) a->n, (uint32_t) i, &tx, &rx);
        if (r[i].res != 0 || r[i].check != 0 || r[i].hash != r[0].hash || r[i].tx != tx || r[i].rx != rx) {
            fprintf(stderr, "FAIL n=%d dtype=%d count=%zu peer %d: result %d check %d hash %016" PRIx64 "/%016" PRIx64
                    " tx %" PRIu64 "/%" PRIu64 "\n", a->n, dtype, count, i, r[i].res, r[i].check, r[i].hash,
                    r[0].hash, r[i].tx, tx);
            ok = false;
        }
    }
    CHECK(ok);
    return ok;
}

static void expect_transport(const ard_t *a, bool shm, const char *when) {
    for (int i = 0; i < a->n; i++) {
        int m = shm_mappings(a, i);
        if (shm ? m <= 0 : m != 0) {
            fprintf(stderr, "FAIL %s: peer %d has %d shared memory segments mapped (want %s)\n", when, i, m,
                    shm ? "some" : "none");
            CHECK(false);
        }
    }
}

/* A peer SIGKILLed while every link is idle (past one tick: the shared-memory readers sleep on
 * their sockets): the survivors' next all-reduce fails at once, not after a tick or a timeout,
 * and after an update they run exactly among themselves, still over shared memory. */
static void idle_kill(ard_t *a, bool shm, size_t count) {
    usleep(500 * 1000);
    int victim = a->n - 1;
    h_kill(&a->peers[victim], SIGKILL);
    ard_drop(a, victim);
    usleep(200 * 1000);
    uint64_t t0 = ard_now_us();
    ard_result_t r[ARD_MAX];
    REQUIRE(ard_post(a, pcclFloat, pcclSum, count, AR_EXACT, 0) && ard_collect(a, r, 10000));
    uint64_t took = ard_now_us() - t0;
    for (int i = 0; i < a->n; i++) CHECK(r[i].res != 0);
    CHECK(took < 1500000);
    fprintf(stderr, "%s: a peer killed while idle: the next all-reduce failed in %.1f ms\n", shm ? "shm" : "tcp",
            (double) took / 1e3);
    bool up = false;
    for (int i = 0; i < 10 && !up; i++) up = ard_update(a);
    REQUIRE(up);
    REQUIRE(run_one(a, pcclFloat, count));
    expect_transport(a, shm, "after an idle kill");
    REQUIRE(ard_add_peer(a));
}

static void pass(bool shm) {
    if (shm) unsetenv("PCCL_SHM");
    else setenv("PCCL_SHM", "0", 1); /* the peers inherit it */
    const char *name = shm ? "shm" : "tcp";
    const size_t count = (SANITIZED ? (2u << 20) : (16u << 20)) / 4;
    ard_t a;
    REQUIRE(ard_start(&a, master_bin, peer_bin, 4));
    REQUIRE(run_one(&a, pcclFloat, count));
    run_one(&a, pcclInt32, 1000003);
    expect_transport(&a, shm, name);
    uint64_t dur = ~(uint64_t) 0;
    for (int i = 0; i < 3; i++) {
        ard_result_t r[ARD_MAX];
        REQUIRE(ard_post(&a, pcclFloat, pcclSum, count, AR_EXACT, 0) && ard_collect(&a, r, 60000));
        REQUIRE(r[0].res == 0 && r[0].check == 0);
        if (r[0].call_us < dur) dur = r[0].call_us;
    }
    fprintf(stderr, "%s: one %zu MiB all-reduce among 4 takes %.1f ms\n", name, count * 4 >> 20, (double) dur / 1e3);
    srand(shm ? 777 : 778);
    const int trials = SANITIZED ? 4 : 12;
    int failed = 0;
    uint64_t worst = 0;
    for (int t = 0; t < trials; t++) {
        REQUIRE(ard_post_go(&a, pcclFloat, pcclSum, count, AR_EXACT, 0));
        usleep((useconds_t) ((uint64_t) rand() % (dur / 2 + 1)));
        int victim = rand() % a.n;
        h_kill(&a.peers[victim], SIGKILL);
        uint64_t t_kill = ard_now_us();
        ard_drop(&a, victim);
        ard_result_t r[ARD_MAX];
        REQUIRE(ard_collect(&a, r, 10000));
        uint64_t latency = 0;
        for (int i = 0; i < a.n; i++) {
            CHECK(r[i].res == r[0].res);
            if (r[i].end_us > t_kill && r[i].end_us - t_kill > latency) latency = r[i].end_us - t_kill;
        }
        if (r[0].res == 0) {
            for (int i = 0; i < a.n; i++) CHECK(r[i].check == 0); /* decided before the kill: exact */
        } else {
            failed++;
            if (latency > worst) worst = latency;
            CHECK(latency < 1500000);
        }
        bool up = false;
        for (int i = 0; i < 10 && !up; i++) up = ard_update(&a);
        REQUIRE(up);
        REQUIRE(run_one(&a, pcclFloat, count)); /* the survivors recover: exact among 3 */
        expect_transport(&a, shm, "after a kill");
        REQUIRE(ard_add_peer(&a));
        REQUIRE(check_failures < 5);
    }
    REQUIRE(run_one(&a, pcclFloat, count));
    expect_transport(&a, shm, "with the newcomers");
    idle_kill(&a, shm, count);
    int n_quit = a.n;
    uint64_t t_stop = ard_now_us();
    usleep(300 * 1000); /* idle links: the readers sleep on their sockets while the peers quit */
    ard_stop(&a);
    uint64_t stop_us = ard_now_us() - t_stop - 300000;
    CHECK(stop_us < 5000000);
    fprintf(stderr, "%s: %d idle peers quit in %.1f ms\n", name, n_quit, (double) stop_us / 1e3);
    fprintf(stderr, "%s: %d kill trials, %d failed mid-op (worst latency %.1f ms after the SIGKILL)\n", name, trials,
            failed, (double) worst / 1e3);
    CHECK(failed >= 1);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: shm_e2e_test MASTER_BIN PEER_BIN\n");
        return 2;
    }
    master_bin = argv[1];
    peer_bin = argv[2];
    h_init(600);
#ifdef __linux__
    pass(true);
#endif
    pass(false);
    return check_exit();
}
