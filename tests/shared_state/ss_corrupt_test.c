/* issue 32: a distributor whose bytes arrive corrupted is caught per range and the range comes
 * from another distributor in the same call. 3 distributors, 2 newcomers; distributor 1 runs with
 * the test hook PCCL_TEST_SS_CORRUPT (it flips a bit of the first byte of the first range each
 * connection sends, after hashing it). Both newcomers end bit-identical within the call, each logs
 * the bad distributor by its address, and rx_bytes shows that exactly one range was fetched twice:
 * rx == total + one range on each newcomer, and the bad distributor sent one range to each.
 * Ranges are 1 MiB, the tensors whole multiples of it, the endgame off (no second copies), and
 * each serving connection capped at 16 MB/s so that every distributor takes a range before the
 * others are through. Usage: ss_corrupt_test PCCL_MASTER SS_PEER */
#include <stdlib.h>

#include "tests/shared_state/ss_util.h"

#define RANGE (1ull << 20)
#define NT 4
#define BYTES (4 * RANGE)

/* The port of the bad distributor's shared-state listener, from its debug log. */
static int ss_port_of(const char *path) {
    char *text = h_read_file(path);
    REQUIRE(text != NULL);
    const char *at = strstr(text, "shared-state listener on port ");
    int port = at != NULL ? atoi(at + strlen("shared-state listener on port ")) : -1;
    free(text);
    return port;
}

/* Starts the distributors (each with its own log; the bad one at debug level) and admits them. */
static void start_distributors(h_proc_t *d, const char *bin, int port, char logs[3][512]) {
    char line[256];
    for (int i = 0; i < 3; i++) {
        h_stderr_path = logs[i];
        setenv("PCCL_LOG_LEVEL", i == 1 ? "debug" : "info", 1);
        REQUIRE(h_start_peer(&d[i], bin, port, 0));
    }
    setenv("PCCL_LOG_LEVEL", "info", 1);
    h_stderr_path = NULL;
    REQUIRE(ss_cmd(&d[0], line, sizeof line, "connect") == 0);
    ss_admit(d, 1, &d[1], 2);
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(120);
    setenv("PCCL_SS_MAX_SEND_MBPS", "16", 1);
    setenv("PCCL_SS_RANGE_BYTES", "1048576", 1);
    setenv("PCCL_SS_ENDGAME", "0", 1);
    const char *tmp = getenv("TEST_TMPDIR");
    char logs[5][512];
    for (int i = 0; i < 5; i++) snprintf(logs[i], sizeof logs[i], "%s/peer%d.log", tmp != NULL ? tmp : "/tmp", i);
    h_proc_t m, peer[5];
    int port = h_start_master(&m, argv[1], NULL);
    REQUIRE(port > 0);
    start_distributors(peer, argv[2], port, logs);
    for (int i = 3; i < 5; i++) {
        h_stderr_path = logs[i];
        REQUIRE(h_start_peer(&peer[i], argv[2], port, 0));
    }
    h_stderr_path = NULL;
    ss_admit(peer, 3, &peer[3], 2);
    h_proc_t *p[5] = {&peer[0], &peer[1], &peer[2], &peer[3], &peer[4]};
    char line[256];
    for (int i = 0; i < 5; i++) REQUIRE(ss_cmd(p[i], line, sizeof line, "tensors %d %llu %d", NT, BYTES, i < 3 ? 5 : 0) == 0);
    REQUIRE(ss_cmd(p[1], line, sizeof line, "env PCCL_TEST_SS_CORRUPT 1") == 0);
    int bad_port = ss_port_of(logs[1]);
    REQUIRE(bad_port > 0);

    for (int i = 0; i < 3; i++) ss_cmd(p[i], line, sizeof line, "bump");
    ss_sync_t r[5];
    ss_sync_all(p, 5, NULL, r);
    unsigned long long total = NT * BYTES, tx = 0;
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_U64(r[i].result, 0);
        CHECK_EQ_U64(r[i].revision, 1);
        tx += r[i].tx;
    }
    for (int i = 3; i < 5; i++) {
        CHECK_EQ_U64(r[i].rx, total + RANGE); /* the bad range, and it again from another */
        CHECK_EQ_U64(ss_cmd(p[i], line, sizeof line, "check 5"), 0);
        char needle[128];
        snprintf(needle, sizeof needle, "from distributor 127.0.0.1:%d do not match the hash it sent", bad_port);
        CHECK(h_await_log(logs[i], needle, 1, 1000));
        fprintf(stderr, "ss_corrupt_test: newcomer %c received %llu bytes for %llu (one range of %llu again) in %llu ms\n",
                'A' + i - 3, r[i].rx, total, RANGE, r[i].ms);
    }
    CHECK_EQ_U64(r[1].tx, 2 * RANGE); /* one range to each newcomer, then dropped by both */
    CHECK_EQ_U64(tx, 2 * total + 2 * RANGE);
    CHECK(ss_same_hash(p, 5));
    CHECK(h_await_log(logs[1], "test hook PCCL_TEST_SS_CORRUPT", 2, 1000));

    /* The hook off, a second sync moves nothing and every hash still agrees. */
    REQUIRE(ss_cmd(p[1], line, sizeof line, "env PCCL_TEST_SS_CORRUPT -") == 0);
    for (int i = 0; i < 5; i++) ss_cmd(p[i], line, sizeof line, "bump");
    ss_sync_all(p, 5, NULL, r);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_U64(r[i].result, 0);
        CHECK_EQ_U64(r[i].rx, 0);
    }
    for (int i = 0; i < 5; i++) ss_quit(p[i]);
    h_kill(&m, 15);
    CHECK_EQ_U64(h_wait(&m, SS_T), 0);
    return check_exit();
}
