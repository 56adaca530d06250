/* Two peer groups (3 peers in group 7, 2 in group 9) under one master: admission spans both
 * groups, the four attributes are exact on every peer, each group has its own ring. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define N 5
#define T 30000

static const int groups[N] = {7, 9, 7, 9, 7};

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(120);
    h_proc_t m, p[N];
    char log_path[512];
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(log_path, sizeof log_path, "%s/master.log", tmp != NULL ? tmp : "/tmp");
    h_stderr_path = log_path;
    int port = h_start_master(&m, argv[1], NULL);
    REQUIRE(port > 0);
    char line[256];
    REQUIRE(h_start_peer(&p[0], argv[2], port, groups[0]));
    REQUIRE(h_call(&p[0], "connect", line, sizeof line, T) == 0);
    for (int k = 1; k < N; k++) {
        REQUIRE(h_start_peer(&p[k], argv[2], port, groups[k]));
        REQUIRE(h_send(&p[k], "connect"));
    }
    REQUIRE(h_await_log(log_path, H_LOG_PENDING, N, T)); /* all registered: one vote admits them together */
    REQUIRE(h_call(&p[0], "update", line, sizeof line, T) == 0);
    for (int k = 1; k < N; k++) {
        REQUIRE(h_read_line(&p[k], line, sizeof line, T));
        CHECK(strncmp(line, "connect 0 ", 10) == 0);
    }
    for (int i = 0; i < N; i++) {
        int g = -1, gs = -1, ng = -1, lg = -1, tx = -1, rx = -1;
        REQUIRE(h_call(&p[i], "attrs", line, sizeof line, T) == 0);
        sscanf(line, "attrs %*d %d %d %d %d", &g, &gs, &ng, &lg);
        CHECK_EQ_U64(g, 5);
        CHECK_EQ_U64(gs, groups[i] == 7 ? 3 : 2);
        CHECK_EQ_U64(ng, 2);
        CHECK_EQ_U64(lg, 3);
        REQUIRE(h_send(&p[i], "links") && h_read_line(&p[i], line, sizeof line, T));
        sscanf(line, "links %d %d", &tx, &rx);
        CHECK(tx >= 0 && rx >= 0);
    }
    /* A group member leaves: both groups' sizes update without any vote. */
    h_send(&p[4], "quit");
    CHECK_EQ_U64(h_wait(&p[4], T), 0);
    usleep(300000);
    for (int i = 0; i < N - 1; i++) {
        int g = -1, gs = -1, ng = -1, lg = -1;
        REQUIRE(h_call(&p[i], "attrs", line, sizeof line, T) == 0);
        sscanf(line, "attrs %*d %d %d %d %d", &g, &gs, &ng, &lg);
        CHECK(g == 4 && gs == 2 && ng == 2 && lg == 2);
    }
    for (int i = 0; i < N - 1; i++) REQUIRE(h_send(&p[i], "update"));
    for (int i = 0; i < N - 1; i++) {
        REQUIRE(h_read_line(&p[i], line, sizeof line, T));
        CHECK(strcmp(line, "update 0") == 0);
    }
    for (int i = 0; i < N - 1; i++) {
        h_send(&p[i], "quit");
        CHECK_EQ_U64(h_wait(&p[i], T), 0);
    }
    h_kill(&m, 2);
    CHECK_EQ_U64(h_wait(&m, T), 0);
    return check_exit();
}
