/* optimize_loop_test: the bandwidth probes of pcclOptimizeTopology to and between peers that
 * cannot be dialled, on one host (so that it runs under the sanitizers too; optimize_nat_test has
 * the same with real NAT routers). A master with --relay, a pccl-relay and four topo_peer
 * processes on 127.0.0.1: two plain, two advertising ports where nothing listens
 * (PCCL_ADVERTISE_ADDRESS 127.0.0.1:1 and :2, as a wrong port forward would: the master's probe
 * is refused, both count as unreachable) and PCCL_PUNCH=0. Every directed pair is measured: into
 * an unreachable peer by its dial back, between the two unreachable ones through the relay.
 * Checked: all 12 pairs measured, every pcclOptimizeTopology 0, the ring valid and all-reduces
 * exact after it, the peers' logs name the dials back and the relay.
 *   optimize_loop_test PCCL_MASTER TOPO_PEER PCCL_RELAY */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/nat/nat_net.h"
#include "tests/topology/topo_util.h"

#define NP 4
static char logs[NP][96];

int main(int argc, char **argv) {
    REQUIRE(argc == 4);
    h_init(180);
    setenv("PCCL_LOG_LEVEL", "info", 1);
    setenv("PCCL_PUNCH", "0", 1);
    setenv("PCCL_BENCH_MS", "200", 1);
    h_proc_t master, relay;
    char relay_at[64], line[256];
    char *rargs[] = {argv[3], "--listen", "127.0.0.1:0", NULL};
    REQUIRE(h_spawn(&relay, rargs) && h_read_line(&relay, line, sizeof line, 20000));
    const char *colon = strrchr(line, ':');
    REQUIRE(colon != NULL);
    snprintf(relay_at, sizeof relay_at, "127.0.0.1:%d", atoi(colon + 1));
    const char *margs[] = {"--relay", relay_at, NULL};
    int port = h_start_master(&master, argv[1], margs);
    REQUIRE(port > 0);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    static const char *const advertise[NP] = {NULL, NULL, "127.0.0.1:1", "127.0.0.1:2"};
    topo_peer_t peers[NP];
    topo_peer_t *all[NP];
    for (int i = 0; i < NP; i++) {
        memset(&peers[i], 0, sizeof peers[i]);
        all[i] = &peers[i];
        snprintf(logs[i], sizeof logs[i], "/tmp/optimize_loop_test.%d.%d.log", (int) getpid(), i);
        if (advertise[i] != NULL) setenv("PCCL_ADVERTISE_ADDRESS", advertise[i], 1);
        else unsetenv("PCCL_ADVERTISE_ADDRESS");
        h_stderr_path = logs[i];
        char *args[] = {argv[2], addr, NULL};
        REQUIRE(h_spawn(&peers[i].p, args));
    }
    unsetenv("PCCL_ADVERTISE_ADDRESS");
    topo_admit(NULL, 0, all, 1);
    topo_admit(all, 1, all + 1, NP - 1);
    CHECK(topo_ring_valid(all, NP));

    CHECK_EQ_U64(topo_optimize_all(all, NP), NP * (NP - 1));
    CHECK(topo_ring_valid(all, NP));
    CHECK(topo_allreduce(all, NP, 1 << 18, 2, NULL));
    for (int i = 0; i < NP; i++) topo_quit(&peers[i]);
    h_kill(&master, SIGTERM);
    h_wait(&master, 10000);
    h_kill(&relay, SIGTERM);
    h_wait(&relay, 10000);
    CHECK(nat_log_has(logs[0], "(it dialled us)") && nat_log_has(logs[1], "(it dialled us)"));
    CHECK(nat_log_has(logs[2], " via the relay") && nat_log_has(logs[3], " via the relay"));
    if (check_failures == 0)
        for (int i = 0; i < NP; i++) unlink(logs[i]);
    return check_exit();
}
