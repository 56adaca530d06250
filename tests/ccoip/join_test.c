/* 1 -> 8 real peer processes join one real master one by one. Each newcomer stays blocked in
 * pcclConnect until the accepted peers call pcclUpdateTopology; world sizes are exact after every
 * step; every peer then has both ring links. Usage: join_test PCCL_MASTER PEER_PROG */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define N 8
#define T 30000

/* The pending vote of the n accepted peers, repeated until it sees the newcomer (the master
 * registers it a moment after its connect; on a loaded machine that moment has no bound worth
 * guessing). False after T ms. */
static bool await_pending(h_proc_t *p, int n) {
    char line[256];
    for (int waited = 0; waited < T; waited += 20) {
        for (int i = 0; i < n; i++)
            if (!h_send(&p[i], "pending")) return false;
        int seen = 0;
        for (int i = 0; i < n; i++) {
            if (!h_read_line(&p[i], line, sizeof line, T)) return false;
            seen += strcmp(line, "pending 0 1") == 0;
        }
        if (seen == n) return true;
        usleep(20000);
    }
    return false;
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(240);
    h_proc_t m, p[N];
    int port = h_start_master(&m, argv[1], NULL);
    REQUIRE(port > 0);
    char line[256];
    REQUIRE(h_start_peer(&p[0], argv[2], port, 0));
    CHECK_EQ_U64(h_call(&p[0], "connect", line, sizeof line, T), 0);
    int g = -1, gs = -1, ng = -1, lg = -1;
    REQUIRE(h_call(&p[0], "attrs", line, sizeof line, T) == 0);
    sscanf(line, "attrs %*d %d %d %d %d", &g, &gs, &ng, &lg);
    CHECK(g == 1 && gs == 1 && ng == 1 && lg == 1);

    for (int k = 1; k < N; k++) {
        REQUIRE(h_start_peer(&p[k], argv[2], port, 0));
        REQUIRE(h_send(&p[k], "connect"));
        /* Nobody voted yet: the newcomer must still be waiting. */
        CHECK(!h_read_line(&p[k], line, sizeof line, 300));
        REQUIRE(await_pending(p, k));
        for (int i = 0; i < k; i++) REQUIRE(h_send(&p[i], "update"));
        for (int i = 0; i < k; i++) {
            bool got = h_read_line(&p[i], line, sizeof line, T);
            CHECK(got && strcmp(line, "update 0") == 0);
            if (!got || strcmp(line, "update 0") != 0) fprintf(stderr, "peer %d: '%s'\n", i, got ? line : "(timeout)");
        }
        REQUIRE(h_read_line(&p[k], line, sizeof line, T));
        CHECK(strncmp(line, "connect 0 ", 10) == 0);
        for (int i = 0; i <= k; i++) {
            REQUIRE(h_call(&p[i], "attrs", line, sizeof line, T) == 0);
            sscanf(line, "attrs %*d %d %d %d %d", &g, &gs, &ng, &lg);
            CHECK_EQ_U64(g, k + 1);
            CHECK_EQ_U64(gs, k + 1);
            CHECK_EQ_U64(ng, 1);
            CHECK_EQ_U64(lg, k + 1);
            int tx = -1, rx = -1;
            REQUIRE(h_send(&p[i], "links") && h_read_line(&p[i], line, sizeof line, T));
            sscanf(line, "links %d %d", &tx, &rx);
            CHECK(tx >= 0 && rx >= 0);
        }
        fprintf(stderr, "join_test: %d peers\n", k + 1);
    }
    /* Nobody waits now: the pending vote says so on every peer. */
    for (int i = 0; i < N; i++) REQUIRE(h_send(&p[i], "pending"));
    for (int i = 0; i < N; i++) {
        REQUIRE(h_read_line(&p[i], line, sizeof line, T));
        CHECK(strcmp(line, "pending 0 0") == 0);
    }
    /* One more newcomer: the vote now says someone is pending. */
    h_proc_t extra;
    REQUIRE(h_start_peer(&extra, argv[2], port, 0));
    REQUIRE(h_send(&extra, "connect"));
    CHECK(await_pending(p, N));
    h_kill(&extra, 9);
    h_wait(&extra, 5000);
    for (int i = 0; i < N; i++) {
        h_send(&p[i], "quit");
        CHECK_EQ_U64(h_wait(&p[i], T), 0);
    }
    h_kill(&m, 15);
    CHECK_EQ_U64(h_wait(&m, T), 0);
    return check_exit();
}
