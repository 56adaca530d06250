/* The distributor dies mid-transfer: the receiver gets an error within a bounded time, the other
 * holder's sync succeeds, and a retry fetches the state from that holder, bit for bit, and only
 * the ranges (8 MiB here) that did not arrive whole before the kill or changed since: two
 * tensors, t0 (8 MiB) whole before the kill and t1 (88 MiB) in part; one byte of each is
 * changed in a range that had arrived, so the retry's rx_bytes is those two ranges and t1 less its
 * whole ranges of the failed call (whose bytes still match the hashes their distributor sent).
 * The receiver fetches from one distributor only (PCCL_SS_MAX_SOURCES=1): with both it would
 * finish from the other in the same call (ss_multi_test).
 * Serving is capped at 64 MB/s (PCCL_SS_MAX_SEND_MBPS) so that the 96 MiB transfer is surely in
 * flight when the kill comes: the test waits for the receiver's first progress line (transfers
 * over 64 MiB log one per second at info level). Usage: ss_kill_test PCCL_MASTER SS_PEER */
#include <stdlib.h>
#include <time.h>

#include "tests/shared_state/ss_util.h"

#define T0 (8ull << 20)  /* arrives whole before the kill (one range) */
#define T1 (88ull << 20) /* arrives in part */
#define BYTES (T0 + T1)
#define RANGE (8ull << 20)

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static bool file_has(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return false;
    char buf[4096];
    bool found = false;
    while (!found && fgets(buf, sizeof buf, f) != NULL) found = strstr(buf, needle) != NULL;
    fclose(f);
    return found;
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(100);
    setenv("PCCL_SS_MAX_SEND_MBPS", "64", 1);
    setenv("PCCL_SS_MAX_SOURCES", "1", 1); /* one distributor per receiver: its death fails the sync */
    setenv("PCCL_SS_RANGE_BYTES", "8388608", 1);
    setenv("PCCL_LOG_LEVEL", "info", 1);
    char line[256], log_path[512];
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(log_path, sizeof log_path, "%s/receiver.log", tmp != NULL ? tmp : "/tmp");
    h_proc_t m, peer[3];
    int port = h_start_master(&m, argv[1], NULL);
    REQUIRE(port > 0);
    ss_start_peers(peer, 2, argv[2], port);
    h_stderr_path = log_path;
    REQUIRE(h_start_peer(&peer[2], argv[2], port, 0));
    ss_admit(peer, 2, &peer[2], 1);
    h_proc_t *p[3] = {&peer[0], &peer[1], &peer[2]};
    for (int i = 0; i < 3; i++) REQUIRE(ss_cmd(p[i], line, sizeof line, "odd %d %llu %llu", i < 2 ? 5 : 0, T0, T1) == 0);

    /* Peer 0 is the distributor (the master names the holders in the order after the receiver). */
    for (int i = 0; i < 3; i++) REQUIRE(h_send(p[i], "sync 0"));
    long t0 = now_ms();
    while (!file_has(log_path, "shared state: received") && now_ms() - t0 < 20000) usleep(20000);
    REQUIRE(file_has(log_path, "shared state: received"));
    h_kill(&peer[0], 9);
    long killed = now_ms();
    h_wait(&peer[0], 5000);
    ss_sync_t r[3];
    REQUIRE(h_read_line(p[2], line, sizeof line, SS_T));
    long took = now_ms() - killed;
    sscanf(line, "sync %d %llu %llu %llu", &r[2].result, &r[2].revision, &r[2].tx, &r[2].rx);
    CHECK_EQ_U64(r[2].result, pcclRankConnectionLost);
    CHECK(r[2].rx >= T0 + RANGE && r[2].rx < BYTES); /* mid-transfer, in t1 (t0's range comes first) */
    CHECK(took < 5000);
    fprintf(stderr, "ss_kill_test: receiver failed %ld ms after the kill, %llu of %llu bytes in\n", took, r[2].rx,
            BYTES);
    REQUIRE(h_read_line(p[1], line, sizeof line, SS_T));
    sscanf(line, "sync %d %llu", &r[1].result, &r[1].revision);
    CHECK_EQ_U64(r[1].result, 0);

    /* Retry: the survivor moves on to revision 1; the receiver, still behind, fetches from it.
     * One byte of a range of t1 that arrived whole and one of t0 (which arrived whole) are
     * changed before: those ranges no longer match the hashes their distributor sent with them
     * and are fetched again, the other whole ranges are kept. */
    unsigned long long r2_before = r[2].rx;
    REQUIRE(ss_cmd(p[2], line, sizeof line, "poke 0 100") == 0);
    REQUIRE(ss_cmd(p[2], line, sizeof line, "poke 1 100") == 0);
    ss_cmd(p[1], line, sizeof line, "bump");
    h_proc_t *q[2] = {p[1], p[2]};
    ss_sync_all(q, 2, NULL, r);
    CHECK_EQ_U64(r[0].result, 0);
    CHECK_EQ_U64(r[1].result, 0);
    CHECK_EQ_U64(r[1].revision, 1);
    unsigned long long kept = (r2_before - T0) / RANGE * RANGE; /* t1's whole ranges of the failed call */
    CHECK(kept > 0);
    CHECK_EQ_U64(r[1].rx, RANGE + T1 - kept + RANGE);
    CHECK_EQ_U64(r[0].tx, RANGE + T1 - kept + RANGE);
    fprintf(stderr, "ss_kill_test: the retry received %llu bytes: of the %llu the failed call received, all but the two "
                    "ranges changed since and the part of a range were kept\n", r[1].rx, r2_before);
    CHECK_EQ_U64(ss_cmd(p[2], line, sizeof line, "check 5"), 0);
    CHECK(ss_same_hash(q, 2));
    CHECK(file_has(log_path, "MB/s)"));

    ss_quit(p[1]);
    ss_quit(p[2]);
    h_kill(&m, 15);
    CHECK_EQ_U64(h_wait(&m, SS_T), 0);
    return check_exit();
}
