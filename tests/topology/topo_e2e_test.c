/* topo_e2e_test: pcclOptimizeTopology on loopback with the real pccl-master and topo_peer
 * processes. Misuse first (not connected, alone), then 4 peers of group 0 and 2 of group 1
 * optimise: every directed pair inside a group is measured once (12 + 2), the rings stay valid
 * and all-reduces stay exact; a second call measures nothing (the master's matrix is cached); a
 * newcomer is admitted and the next call measures only its pairs; an async all-reduce in flight
 * gives pcclPendingAsyncOps.
 *   topo_e2e_test PCCL_MASTER TOPO_PEER */
#include <signal.h>
#include <stdlib.h>

#include "pccl.h"
#include "tests/topology/topo_util.h"

static unsigned long long total_measured(char lines[][256], int n, int *res) {
    unsigned long long sum = 0;
    for (int i = 0; i < n; i++) {
        unsigned long long m = 0;
        sscanf(lines[i], "optimize %*d %llu", &m);
        sum += m;
        CHECK_EQ_U64(res[i], 0);
    }
    return sum;
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(120);
    setenv("PCCL_BENCH_MS", "100", 1); /* the master's measurement time per pair */
    h_proc_t master;
    int port = h_start_master(&master, argv[1], NULL);
    REQUIRE(port > 0);
    enum { N0 = 4, N1 = 2, NP = N0 + N1 + 1 };
    topo_peer_t peers[NP];
    topo_peer_t *all[NP], *g0[N0 + 1], *g1[N1];
    for (int i = 0; i < NP; i++) {
        all[i] = &peers[i];
        REQUIRE(h_start_peer(&peers[i].p, argv[2], port, i >= N0 && i < N0 + N1 ? 1 : 0));
    }
    for (int i = 0; i < N0; i++) g0[i] = &peers[i];
    g0[N0] = &peers[NP - 1];
    for (int i = 0; i < N1; i++) g1[i] = &peers[N0 + i];
    char line[256], lines[NP][256];
    int res[NP];

    /* Misuse: not connected; alone. */
    CHECK_EQ_U64(topo_cmd(&peers[NP - 1], line, sizeof line, "optimize"), pcclInvalidUsage);
    topo_admit(NULL, 0, all, 1);
    CHECK_EQ_U64(topo_cmd(&peers[0], line, sizeof line, "optimize"), pcclTooFewPeers);

    /* 4 + 2 peers in two groups. */
    topo_admit(all, 1, all + 1, N0 + N1 - 1);
    CHECK(topo_ring_valid(g0, N0));
    CHECK(topo_ring_valid(g1, N1));
    CHECK(topo_allreduce(g0, N0, 1 << 20, 2, NULL));

    topo_send_all(all, N0 + N1, "optimize");
    topo_read_all(all, N0 + N1, lines, res);
    unsigned long long first = total_measured(lines, N0 + N1, res);
    CHECK_EQ_U64(first, N0 * (N0 - 1) + N1 * (N1 - 1)); /* every directed pair inside a group, once */
    printf("first optimise: %llu measurements; %s\n", first, lines[0]);
    CHECK(topo_ring_valid(g0, N0));
    CHECK(topo_ring_valid(g1, N1));
    CHECK(topo_allreduce(g0, N0, 1 << 20, 2, NULL));
    CHECK(topo_allreduce(g1, N1, 1000, 1, NULL));

    /* Cached: nothing new to measure. */
    topo_send_all(all, N0 + N1, "optimize");
    topo_read_all(all, N0 + N1, lines, res);
    CHECK_EQ_U64(total_measured(lines, N0 + N1, res), first);
    printf("second optimise (cached): %s\n", lines[0]);
    CHECK(topo_ring_valid(g0, N0));
    CHECK(topo_allreduce(g0, N0, 1 << 16, 1, NULL));

    /* A newcomer in group 0: only its pairs (2 * 4) are measured next time. */
    topo_admit(all, N0 + N1, &all[NP - 1], 1);
    CHECK(topo_ring_valid(g0, N0 + 1));
    topo_send_all(all, NP, "optimize");
    topo_read_all(all, NP, lines, res);
    CHECK_EQ_U64(total_measured(lines, NP, res), first + 2 * N0);
    CHECK(topo_ring_valid(g0, N0 + 1));
    CHECK(topo_ring_valid(g1, N1));
    CHECK(topo_allreduce(g0, N0 + 1, 1 << 18, 1, NULL));

    /* An async all-reduce in flight: pcclPendingAsyncOps, and the op itself still completes. */
    topo_send_all(g0, N0 + 1, "async 100000");
    topo_read_all(g0, N0 + 1, lines, res);
    for (int i = 0; i <= N0; i++) CHECK(strcmp(lines[i], "async 10 0") == 0);

    for (int i = 0; i < NP; i++) topo_quit(&peers[i]);
    h_kill(&master, SIGTERM);
    CHECK_EQ_U64(h_wait(&master, 10000), 0);
    return check_exit();
}
