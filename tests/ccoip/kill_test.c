/* SIGKILL at bad moments: a newcomer killed before anyone votes, a peer killed during an
 * admission round, the master killed under the peers. Nobody hangs; the calls in flight return
 * success or an error promptly; the next pcclUpdateTopology succeeds with exact world sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define T 30000

static h_proc_t m, p[8];
static const char *peer_bin;
static char line[256];

static int world_of(int i) {
    int g = -1;
    if (h_call(&p[i], "attrs", line, sizeof line, T) != 0) return -1;
    sscanf(line, "attrs %*d %d", &g);
    return g;
}

/* All of `ids` vote; returns how many got pcclSuccess; every one must answer in time. */
static int vote(const int *ids, int n, int *results) {
    int ok = 0;
    for (int i = 0; i < n; i++) REQUIRE(h_send(&p[ids[i]], "update"));
    for (int i = 0; i < n; i++) {
        REQUIRE(h_read_line(&p[ids[i]], line, sizeof line, T));
        results[i] = -1;
        sscanf(line, "update %d", &results[i]);
        ok += results[i] == 0;
    }
    return ok;
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(200);
    setenv("PCCL_MASTER_RECONNECT_S", "0", 1); /* step 5: the old contract, a lost master is lost for good */
    peer_bin = argv[2];
    char log_path[512];
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(log_path, sizeof log_path, "%s/master.log", tmp != NULL ? tmp : "/tmp");
    h_stderr_path = log_path;
    int port = h_start_master(&m, argv[1], NULL);
    REQUIRE(port > 0);
    int res[8];
    /* Three accepted peers. */
    REQUIRE(h_start_peer(&p[0], peer_bin, port, 0));
    REQUIRE(h_call(&p[0], "connect", line, sizeof line, T) == 0);
    REQUIRE(h_start_peer(&p[1], peer_bin, port, 0));
    REQUIRE(h_start_peer(&p[2], peer_bin, port, 0));
    REQUIRE(h_send(&p[1], "connect") && h_send(&p[2], "connect"));
    REQUIRE(h_await_log(log_path, H_LOG_PENDING, 3, T));
    int ids012[] = {0, 1, 2};
    CHECK_EQ_U64(vote(ids012, 1, res), 1);
    REQUIRE(h_read_line(&p[1], line, sizeof line, T) && h_read_line(&p[2], line, sizeof line, T));
    CHECK_EQ_U64(world_of(0), 3);

    /* 1. A newcomer killed before acceptance: the vote succeeds without it. */
    REQUIRE(h_start_peer(&p[3], peer_bin, port, 0));
    REQUIRE(h_send(&p[3], "connect"));
    usleep(300000);
    h_kill(&p[3], 9);
    h_wait(&p[3], 5000);
    CHECK_EQ_U64(vote(ids012, 3, res), 3);
    CHECK_EQ_U64(world_of(1), 3);

    /* 2. A newcomer killed while the admission round runs. */
    REQUIRE(h_start_peer(&p[3], peer_bin, port, 0));
    REQUIRE(h_send(&p[3], "connect"));
    usleep(300000);
    for (int i = 0; i < 3; i++) REQUIRE(h_send(&p[i], "update"));
    h_kill(&p[3], 9);
    h_wait(&p[3], 5000);
    for (int i = 0; i < 3; i++) {
        REQUIRE(h_read_line(&p[i], line, sizeof line, T));
        CHECK(strcmp(line, "update 0") == 0 || strcmp(line, "update 11") == 0);
    }
    CHECK_EQ_U64(vote(ids012, 3, res), 3);
    CHECK_EQ_U64(world_of(2), 3);

    /* 3. An accepted peer killed during an admission round (with a newcomer). */
    REQUIRE(h_start_peer(&p[3], peer_bin, port, 0));
    REQUIRE(h_send(&p[3], "connect"));
    usleep(300000);
    for (int i = 0; i < 3; i++) REQUIRE(h_send(&p[i], "update"));
    h_kill(&p[2], 9);
    h_wait(&p[2], 5000);
    for (int i = 0; i < 2; i++) {
        REQUIRE(h_read_line(&p[i], line, sizeof line, T));
        CHECK(strcmp(line, "update 0") == 0 || strcmp(line, "update 11") == 0);
    }
    /* Retry until the newcomer is in (it may have been admitted already). */
    int ids013[] = {0, 1, 3};
    bool newcomer_in = false;
    for (int attempt = 0; attempt < 5 && !newcomer_in; attempt++) {
        if (h_read_line(&p[3], line, sizeof line, 200)) {
            CHECK(strncmp(line, "connect 0 ", 10) == 0);
            newcomer_in = true;
            break;
        }
        vote(ids012, 2, res);
    }
    if (!newcomer_in) newcomer_in = h_read_line(&p[3], line, sizeof line, T);
    CHECK(newcomer_in);
    CHECK_EQ_U64(vote(ids013, 3, res), 3);
    for (int i = 0; i < 3; i++) CHECK_EQ_U64(world_of(ids013[i]), 3);

    /* 4. An accepted peer killed while the others wait in a vote: they are released. */
    for (int i = 0; i < 2; i++) REQUIRE(h_send(&p[ids013[i]], "update"));
    usleep(200000);
    h_kill(&p[3], 9);
    h_wait(&p[3], 5000);
    for (int i = 0; i < 2; i++) {
        REQUIRE(h_read_line(&p[ids013[i]], line, sizeof line, T));
        CHECK(strcmp(line, "update 0") == 0 || strcmp(line, "update 11") == 0);
    }
    CHECK_EQ_U64(vote(ids012, 2, res), 2);
    CHECK_EQ_U64(world_of(0), 2);

    /* 5. The master dies: calls fail promptly with pcclMasterConnectionFailed (6). */
    h_kill(&m, 9);
    h_wait(&m, 5000);
    CHECK_EQ_U64(h_call(&p[0], "update", line, sizeof line, T), 6);
    for (int i = 0; i < 2; i++) {
        h_send(&p[i], "quit");
        CHECK_EQ_U64(h_wait(&p[i], T), 0);
    }
    return check_exit();
}
