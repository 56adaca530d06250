/* issue 28, 3-5: PCCL's semantics of the collective calls, with the real pccl-master and
 * compat_peer processes (what a PCCL program calls, nothing else). Each mode failed before.
 *   pending  2 peers, pool 32: pcclArePeersPending while all-reduces are in flight (PCCL allows
 *            it, and recommends it to overlap a step with the next step's vote): peer 0 asks
 *            while its op runs, peer 1 only after awaiting its own; both answers come, both ops
 *            are exact. (Before: pcclPendingAsyncOps at once on one peer, a vote on the other.)
 *   multi    3 peers and a newcomer waiting for admission: peer 2 is SIGKILLed while 0 and 1
 *            run pcclAllReduceMultipleWithRetry; their call succeeds exactly among the two,
 *            without admitting the newcomer mid-step (the master relinks the group only), who
 *            is admitted at the next pcclUpdateTopology. (Before: the call's own topology update
 *            admitted it, and everyone stalled.)
 *   retry    3 peers; peer 2 is SIGKILLed; the others retry pcclAllReduce as PCCL's retry
 *            helpers do, with no pcclUpdateTopology: the second try is exact (the failed one
 *            relinked the ring). (Before: "call pcclUpdateTopology", forever.)
 *   strict   the same with PCCL_STRICT=topology on the peers: ours, every retry is refused until
 *            pcclUpdateTopology, then exact.
 * Usage: compat_test MODE PCCL_MASTER COMPAT_PEER */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pccl.h"
#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define T 30000 /* ms: the longest any one answer may take */
#define COUNT 100003

static const char *master_bin, *peer_bin;
static char log_path[512];
static h_proc_t master;
static int port;

static void start_master(void) {
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(log_path, sizeof log_path, "%s/compat_master.log", tmp != NULL ? tmp : "/tmp");
    h_stderr_path = log_path;
    const char *args[] = {"--log-level", "info", NULL};
    port = h_start_master(&master, master_bin, args);
    REQUIRE(port > 0);
}

static void spawn(h_proc_t *p, int seed, int pool) {
    char addr[64], s[16], pl[16];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    snprintf(s, sizeof s, "%d", seed);
    snprintf(pl, sizeof pl, "%d", pool);
    char *argv[] = {(char *) peer_bin, addr, s, pl, NULL};
    REQUIRE(h_spawn(p, argv));
}

/* Starts n peers (seeds 1..n) and admits them one by one. */
static void start_peers(h_proc_t *p, int n, int pool) {
    for (int i = 0; i < n; i++) {
        spawn(&p[i], i + 1, pool);
        REQUIRE(h_send(&p[i], "connect"));
        REQUIRE(h_admit(p, i, &p[i]));
    }
}

/* Reads peer p's answer to `word`: "word RESULT A B [C]"; returns RESULT, fills the rest. */
static int answer(h_proc_t *p, const char *word, long *x, long *y, long *z) {
    char line[256], w[32];
    REQUIRE(h_read_line(p, line, sizeof line, T));
    long r = -999, a = -1, b = -1, c = -1;
    int n = sscanf(line, "%31s %ld %ld %ld %ld", w, &r, &a, &b, &c);
    if (n < 2 || strcmp(w, word) != 0) {
        fprintf(stderr, "expected '%s ...', got '%s'\n", word, line);
        exit(1);
    }
    if (x) *x = a;
    if (y) *y = b;
    if (z) *z = c;
    return (int) r;
}

static void all_exact(h_proc_t *p, int n, unsigned tag, int seedsum) {
    char cmd[96];
    snprintf(cmd, sizeof cmd, "ar %u %d %d", tag, COUNT, seedsum);
    for (int i = 0; i < n; i++) REQUIRE(h_send(&p[i], cmd));
    for (int i = 0; i < n; i++) {
        long world, bad;
        CHECK_EQ_U64(answer(&p[i], "ar", &world, &bad, NULL), pcclSuccess);
        CHECK_EQ_U64(world, (unsigned long long) n);
        CHECK_EQ_U64(bad, 0);
    }
}

static void stop_all(h_proc_t *p, int n) {
    for (int i = 0; i < n; i++) {
        h_send(&p[i], "quit");
        h_wait(&p[i], 10000);
    }
    h_kill(&master, SIGTERM);
    h_wait(&master, 10000);
}

static void test_pending(void) {
    start_master();
    h_proc_t p[2];
    start_peers(p, 2, 32);
    const unsigned big = 4u << 20; /* 16 MiB: still in flight when the vote is asked */
    char cmd[96];
    snprintf(cmd, sizeof cmd, "arasync 1 %u", big);
    for (int i = 0; i < 2; i++) {
        REQUIRE(h_send(&p[i], cmd));
        CHECK_EQ_U64(answer(&p[i], "arasync", NULL, NULL, NULL), pcclSuccess);
    }
    REQUIRE(h_send(&p[0], "pending")); /* its op in flight */
    REQUIRE(h_send(&p[0], "await 1 3"));
    usleep(100000);
    REQUIRE(h_send(&p[1], "await 1 3"));
    REQUIRE(h_send(&p[1], "pending")); /* after its op */
    long pending, world, bad;
    CHECK_EQ_U64(answer(&p[0], "pending", &pending, NULL, NULL), pcclSuccess);
    CHECK_EQ_U64(pending, 0);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_U64(answer(&p[i], "await", &world, &bad, NULL), pcclSuccess);
        CHECK_EQ_U64(world, 2);
        CHECK_EQ_U64(bad, 0);
    }
    CHECK_EQ_U64(answer(&p[1], "pending", &pending, NULL, NULL), pcclSuccess);
    CHECK_EQ_U64(pending, 0);
    /* Several steps overlapped so: each peer's next vote beside its next op. */
    for (int step = 2; step < 6; step++) {
        snprintf(cmd, sizeof cmd, "arasync %d %u", step, big / 4);
        for (int i = 0; i < 2; i++) REQUIRE(h_send(&p[i], cmd));
        for (int i = 0; i < 2; i++) CHECK_EQ_U64(answer(&p[i], "arasync", NULL, NULL, NULL), pcclSuccess);
        snprintf(cmd, sizeof cmd, "await %d 3", step);
        for (int i = 0; i < 2; i++) REQUIRE(h_send(&p[i], "pending") && h_send(&p[i], cmd));
        for (int i = 0; i < 2; i++) {
            CHECK_EQ_U64(answer(&p[i], "pending", &pending, NULL, NULL), pcclSuccess);
            CHECK_EQ_U64(answer(&p[i], "await", &world, &bad, NULL), pcclSuccess);
            CHECK_EQ_U64(bad, 0);
        }
    }
    all_exact(p, 2, 9, 3);
    fprintf(stderr, "compat_test pending: votes beside all-reduces in flight (pool 32), 5 steps exact\n");
    stop_all(p, 2);
}

static void test_multi(void) {
    start_master();
    h_proc_t p[3], nc;
    start_peers(p, 3, 0);
    all_exact(p, 3, 1, 6);
    spawn(&nc, 4, 0);
    REQUIRE(h_send(&nc, "connect"));
    REQUIRE(h_await_log(log_path, H_LOG_PENDING, 1, T));
    for (int i = 0; i < 2; i++) REQUIRE(h_send(&p[i], "multi 12 20011 3")); /* sums of peers 0 and 1 */
    usleep(300000); /* their ops wait for peer 2's */
    h_kill(&p[2], SIGKILL);
    h_wait(&p[2], 5000);
    long world, bad;
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_U64(answer(&p[i], "multi", &world, &bad, NULL), pcclSuccess);
        CHECK_EQ_U64(world, 2);
        CHECK_EQ_U64(bad, 0);
    }
    CHECK(h_await_log(log_path, "relinking group 0, 2 participants", 1, 1000));
    char line[256];
    REQUIRE(h_send(&p[0], "world") && h_read_line(&p[0], line, sizeof line, T));
    CHECK(strcmp(line, "world 2 2") == 0); /* the newcomer still waits */
    for (int i = 0; i < 2; i++) REQUIRE(h_send(&p[i], "pending"));
    for (int i = 0; i < 2; i++) {
        long pending;
        CHECK_EQ_U64(answer(&p[i], "pending", &pending, NULL, NULL), pcclSuccess);
        CHECK_EQ_U64(pending, 1);
    }
    CHECK(h_update_all(p, 2));
    CHECK_EQ_U64(answer(&nc, "connect", NULL, NULL, NULL), pcclSuccess);
    h_proc_t three[3] = {p[0], p[1], nc};
    all_exact(three, 3, 2, 7);
    fprintf(stderr, "compat_test multi: the call ended among the 2 survivors, the newcomer came in afterwards\n");
    stop_all(three, 3);
}

static void test_retry(bool strict) {
    if (strict) setenv("PCCL_STRICT", "topology", 1);
    start_master();
    h_proc_t p[3];
    start_peers(p, 3, 0);
    unsetenv("PCCL_STRICT");
    all_exact(p, 3, 1, 6);
    h_kill(&p[2], SIGKILL);
    h_wait(&p[2], 5000);
    usleep(200000); /* the master has dropped it */
    char cmd[96];
    snprintf(cmd, sizeof cmd, "retry 2 %d 3 %d", COUNT, strict ? 5 : 20);
    for (int i = 0; i < 2; i++) REQUIRE(h_send(&p[i], cmd));
    long tries, world, bad;
    for (int i = 0; i < 2; i++) {
        int r = answer(&p[i], "retry", &tries, &world, &bad);
        if (strict) {
            CHECK_EQ_U64(r, pcclRankConnectionLost);
            CHECK_EQ_U64(tries, 5);
        } else {
            CHECK_EQ_U64(r, pcclSuccess);
            CHECK(tries >= 2 && tries <= 3); /* refused once (twice if the first started before the drop) */
            CHECK_EQ_U64(world, 2);
            CHECK_EQ_U64(bad, 0);
            fprintf(stderr, "compat_test retry: peer %d exact after %ld tries\n", i, tries);
        }
    }
    if (strict) CHECK(h_update_all(p, 2));
    all_exact(p, 2, 3, 3);
    if (strict) fprintf(stderr, "compat_test strict: refused until pcclUpdateTopology, then exact\n");
    stop_all(p, 2);
}

int main(int argc, char **argv) {
    REQUIRE(argc == 4);
    h_init(150);
    unsetenv("PCCL_STRICT");
    master_bin = argv[2];
    peer_bin = argv[3];
    if (strcmp(argv[1], "pending") == 0) test_pending();
    else if (strcmp(argv[1], "multi") == 0) test_multi();
    else if (strcmp(argv[1], "retry") == 0) test_retry(false);
    else if (strcmp(argv[1], "strict") == 0) test_retry(true);
    else REQUIRE(!"unknown mode");
    return check_exit();
}
