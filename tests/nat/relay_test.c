/* relay_test: two peers behind NAT routers that map every connection to a random port
 * (MASQUERADE --random-fully), neighbours in the ring: their punch fails, and they are linked
 * through pccl-relay (issue 30, step 4).
 *
 * The namespaces of nat_net.h: the master and member A on h0 (public), pccl-relay on h1
 * (public), NATed peers on n0 (behind rt) and n1 (behind rt2). The master runs with --relay. A
 * steps alone; n0 joins (A dials nobody: their edges are reversed), then n1: the ring A -> n0 ->
 * n1 -> A has an edge between the two NATed peers, which nobody can dial: the master has it
 * punched first (the punch ports it saw are not where the punches leave the routers, so that
 * round runs again without n1), then through the relay, paired by the token it gave both ends. Each newcomer's first sync fetches the
 * 4 MiB of weights from a reachable holder (A). Checked: both pcclConnect calls
 * succeed, nobody sees a failed call, every step's weights are the same bits on the three, the
 * logs say which edge was relayed, and the relay paired it and carried bytes both ways.
 * Needs root, iproute2 and iptables: otherwise SKIPPED (passes).
 *   relay_test PCCL_MASTER RESTART_PEER PCCL_RELAY */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"
#include "tests/nat/nat_net.h"

enum { A, N0, N1, NPEERS };
static nat_peer_t peers[NPEERS];
static const char *peer_bin;

static nat_peer_t *watched;
static bool connected(void) { return watched->connect >= 0; }
static unsigned target_step;
static bool all_at_target(void) {
    for (int i = 0; i < NPEERS; i++)
        if (peers[i].running && peers[i].connect == 0 && peers[i].steps < target_step) return false;
    return true;
}

static void admitted(int i, const char *name, const char *host) {
    watched = &peers[i];
    long t0 = nat_now_ms();
    REQUIRE(nat_start_peer(&peers[i], i, name, host, peer_bin));
    CHECK(nat_pump(peers, NPEERS, 60000, connected));
    CHECK_EQ_U64(peers[i].connect, 0);
    target_step = peers[A].steps + 5;
    CHECK(nat_pump(peers, NPEERS, 60000, all_at_target));
    fprintf(stderr, "%s: pcclConnect returned %d after %ld ms\n", name, peers[i].connect, nat_now_ms() - t0);
}

int main(int argc, char **argv) {
    REQUIRE(argc == 4);
    peer_bin = argv[2];
    h_init(240);
    nat_set_routers(NAT_ROUTER_RANDOM);
    if (!nat_setup("nl")) {
        printf("relay_test: SKIPPED: cannot create network namespaces (needs root, iproute2, iptables)\n");
        return 0;
    }
    setenv("PCCL_P2P_TIMEOUT_MS", "4000", 1);
    setenv("PCCL_LOG_LEVEL", "info", 1);
    h_proc_t relay, master;
    char relay_log[128], relay_at[64], line[256];
    snprintf(relay_log, sizeof relay_log, "%s.relay", nat_master_log());
    h_stderr_path = relay_log;
    char *rargs[] = {argv[3], "--listen", "10.79.0.2:0", NULL};
    REQUIRE(nat_spawn_in(&relay, "h1", rargs));
    REQUIRE(h_read_line(&relay, line, sizeof line, 20000));
    const char *colon = strrchr(line, ':');
    REQUIRE(colon != NULL);
    snprintf(relay_at, sizeof relay_at, "10.79.0.2:%d", atoi(colon + 1));
    char *extra[] = {"--relay", relay_at, NULL};
    REQUIRE(nat_start_master(&master, argv[1], extra));
    REQUIRE(nat_start_peer(&peers[A], A, "member A", "h0", peer_bin));
    target_step = 3;
    REQUIRE(nat_pump(peers, NPEERS, 60000, all_at_target));
    admitted(N0, "NATed peer 0", "n0");
    admitted(N1, "NATed peer 1", "n1");

    unsigned compared = nat_check_steps(peers, NPEERS);
    fprintf(stderr, "%u step hashes compared; failed calls: %d %d %d\n", compared, peers[A].errors, peers[N0].errors,
            peers[N1].errors);
    CHECK(compared > 0);
    for (int i = 0; i < NPEERS; i++) CHECK_EQ_U64(peers[i].errors, 0);
    CHECK(nat_log_has(peers[N0].log, "relayed edge: the link to ring neighbour 10.79.0.11:"));
    CHECK(nat_log_has(peers[N1].log, "relayed edge: the link from ring neighbour 10.79.0.10:"));
    h_kill(&master, SIGTERM);
    h_wait(&master, 10000);
    h_kill(&relay, SIGTERM);
    CHECK_EQ_U64(h_wait(&relay, 10000), 0);
    CHECK(nat_log_has(relay_log, "paired 10.79.0.1"));
    CHECK(nat_log_has(nat_master_log(), "their edges with unreachable peers run through the relay from now on"));
    CHECK(nat_log_has(relay_log, "bytes relayed"));
    if (check_failures == 0) {
        nat_remove_logs(peers, NPEERS);
        unlink(relay_log);
    }
    return check_exit();
}
