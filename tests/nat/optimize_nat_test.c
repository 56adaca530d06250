/* optimize_nat_test: pcclOptimizeTopology with peers that cannot be dialled (issue 30, step 2:
 * bandwidth probes reversed and relayed; docs/nat.md).
 *   optimize_nat_test PCCL_MASTER TOPO_PEER PCCL_RELAY
 * The namespaces of nat_net.h: the master and peer A on h0, pccl-relay on h1, peer B on h2
 * (public), NATed peers on n0 and n1 behind two MASQUERADE routers; PCCL_PUNCH=0, so the edges
 * between the NATed peers run through the relay. Every directed pair is measured: into a public
 * peer as before, into a NATed peer from a public one by the NATed peer dialling back (the
 * sender streams over that connection), between the NATed peers through the relay, as their
 * ring edges run. Checked: every pcclOptimizeTopology returns 0 with all 12 directed pairs
 * measured, the logs say how, the ring is valid and all-reduces are exact after it. Needs root,
 * iproute2 and iptables: otherwise SKIPPED. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/nat/nat_net.h"
#include "tests/topology/topo_util.h"

enum { A, B, N0, N1, NP };
static const char *const where[NP] = {"h0", "h2", "n0", "n1"};
static char logs[NP][128];

static void spawn(topo_peer_t *t, int i, const char *bin) {
    snprintf(logs[i], sizeof logs[i], "%s.peer%d", nat_master_log(), i);
    h_stderr_path = logs[i];
    char *args[] = {(char *) bin, (char *) nat_master_addr(), NULL};
    REQUIRE(nat_spawn_in(&t->p, where[i], args));
}

int main(int argc, char **argv) {
    REQUIRE(argc == 4);
    h_init(240);
    if (!nat_setup("no")) {
        printf("optimize_nat_test: SKIPPED: cannot create network namespaces (needs root, iproute2, iptables)\n");
        return 0;
    }
    setenv("PCCL_LOG_LEVEL", "info", 1);
    setenv("PCCL_PUNCH", "0", 1);
    setenv("PCCL_BENCH_MS", "300", 1);
    h_proc_t relay, master;
    char relay_log[160], relay_at[64];
    snprintf(relay_log, sizeof relay_log, "/tmp/optimize_nat_test.%d.relay", (int) getpid());
    REQUIRE(nat_start_relay(&relay, argv[3], relay_log, relay_at, sizeof relay_at));
    char *extra[] = {"--relay", relay_at, NULL};
    REQUIRE(nat_start_master(&master, argv[1], extra));

    topo_peer_t peers[NP];
    topo_peer_t *all[NP];
    for (int i = 0; i < NP; i++) {
        memset(&peers[i], 0, sizeof peers[i]);
        all[i] = &peers[i];
        spawn(&peers[i], i, argv[2]);
    }
    topo_admit(NULL, 0, all, 1);
    topo_admit(all, 1, all + 1, NP - 1);
    CHECK(topo_ring_valid(all, NP));
    CHECK(topo_allreduce(all, NP, 1 << 16, 2, NULL));

    CHECK_EQ_U64(topo_optimize_all(all, NP), NP * (NP - 1));
    CHECK(topo_ring_valid(all, NP));
    CHECK(topo_allreduce(all, NP, 1 << 20, 2, NULL));
    for (int i = 0; i < NP; i++) topo_quit(&peers[i]);
    h_kill(&master, SIGTERM);
    h_wait(&master, 10000);
    h_kill(&relay, SIGTERM);
    h_wait(&relay, 10000);
    /* How each kind of pair was measured: into a NATed peer by its dial back, between the NATed
     * ones through the relay; and nothing measured failed. */
    CHECK(nat_log_has(logs[A], "(it dialled us)") || nat_log_has(logs[B], "(it dialled us)"));
    CHECK(nat_log_has(logs[N0], " via the relay") && nat_log_has(logs[N1], " via the relay"));
    CHECK(nat_log_has(nat_master_log(), "12 directed pairs to measure"));
    char *text = h_read_file(nat_master_log());
    CHECK(text != NULL && strstr(text, "12 pairs measured") != NULL);
    free(text);
    if (check_failures == 0) {
        for (int i = 0; i < NP; i++) unlink(logs[i]);
        unlink(relay_log);
    }
    return check_exit();
}
