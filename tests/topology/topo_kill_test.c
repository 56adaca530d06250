/* topo_kill_test: a peer SIGKILLed while pcclOptimizeTopology measures. The survivors return
 * pcclTopologyOptimizationFailed within the measurement time plus a bound, then pcclUpdateTopology
 * works, the ring of the survivors is valid and an all-reduce over them is exact; a later
 * optimisation succeeds.
 *   topo_kill_test PCCL_MASTER TOPO_PEER */
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "pccl.h"
#include "tests/topology/topo_util.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(90);
    enum { N = 4, BENCH_MS = 1000 };
    setenv("PCCL_BENCH_MS", "1000", 1); /* long steps: the kill lands inside one */
    h_proc_t master;
    int port = h_start_master(&master, argv[1], NULL);
    REQUIRE(port > 0);
    topo_peer_t peers[N];
    topo_peer_t *all[N];
    for (int i = 0; i < N; i++) {
        all[i] = &peers[i];
        REQUIRE(h_start_peer(&peers[i].p, argv[2], port, 0));
    }
    topo_admit(NULL, 0, all, 1);
    topo_admit(all, 1, all + 1, N - 1);
    CHECK(topo_ring_valid(all, N));

    char lines[N][256];
    int res[N];
    topo_send_all(all, N, "optimize");
    usleep(1500 * 1000); /* inside the second step */
    double t0 = now_ms();
    h_kill(&peers[N - 1].p, SIGKILL);
    h_wait(&peers[N - 1].p, 5000);
    topo_read_all(all, N - 1, lines, res);
    double waited = now_ms() - t0;
    for (int i = 0; i < N - 1; i++) {
        printf("survivor %d: %s\n", i, lines[i]);
        CHECK_EQ_U64(res[i], pcclTopologyOptimizationFailed);
    }
    printf("survivors answered %.0f ms after the kill (measurement step %d ms)\n", waited, BENCH_MS);
    CHECK(waited < BENCH_MS + 4000);

    /* pcclUpdateTopology repairs the ring; the survivors all-reduce exactly. */
    topo_send_all(all, N - 1, "update");
    topo_read_all(all, N - 1, lines, res);
    for (int i = 0; i < N - 1; i++) CHECK_EQ_U64(res[i], 0);
    CHECK(topo_ring_valid(all, N - 1));
    CHECK(topo_allreduce(all, N - 1, 1 << 18, 1, NULL));

    /* And optimising works again (what the first session measured is kept). */
    topo_send_all(all, N - 1, "optimize");
    topo_read_all(all, N - 1, lines, res);
    for (int i = 0; i < N - 1; i++) CHECK_EQ_U64(res[i], 0);
    CHECK(topo_ring_valid(all, N - 1));
    CHECK(topo_allreduce(all, N - 1, 1 << 18, 1, NULL));

    for (int i = 0; i < N - 1; i++) topo_quit(&peers[i]);
    h_kill(&master, SIGTERM);
    CHECK_EQ_U64(h_wait(&master, 10000), 0);
    return check_exit();
}
