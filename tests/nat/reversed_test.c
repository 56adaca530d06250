/* reversed_test: peers behind a NAT router or a firewall join and train (issue 30, step 2).
 *
 * The namespaces of nat_net.h, the master probing every joining peer (its default). Members A and
 * B step; A's weights drift before every sync, so that every sync fetches 4 MiB back to it from
 * the others, the newcomers among them once they are in. The NATed newcomer joins: the master's
 * connection back to the router's port is refused, so the peer learns it cannot be dialled and
 * its ring edges are dialled from its side (reversed); it is admitted, synced and steps with
 * them. Then the firewalled newcomer (the master's connection gets no answer): the same, and the
 * ring puts the two between reachable peers. Then a public newcomer. Checked: every pcclConnect
 * returns pcclSuccess, the members never see a failed call, every step's weights are the same
 * bits on every peer that ran it, and the logs say who was unreachable and which edges were
 * reversed. Printed: the members' slowest step during each admission against their median.
 * Needs root, iproute2 and iptables: otherwise SKIPPED (passes).
 *   reversed_test PCCL_MASTER RESTART_PEER */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"
#include "tests/nat/nat_net.h"

enum { A, B, NAT, FW, PUB, NPEERS };
static nat_peer_t peers[NPEERS];
static const char *peer_bin;

static nat_peer_t *watched;
static bool connected(void) { return watched->connect >= 0; }
static unsigned target_step;
static bool members_at_target(void) { return peers[A].steps >= target_step && peers[B].steps >= target_step; }
static bool watched_at_target(void) { return watched->steps >= target_step; }

/* A newcomer joins, is admitted and steps with the members, who lose no step meanwhile. */
static void admitted(int i, const char *name, const char *host) {
    watched = &peers[i];
    long t0 = nat_now_ms();
    unsigned before = peers[A].steps;
    REQUIRE(nat_start_peer(&peers[i], i, name, host, peer_bin));
    CHECK(nat_pump(peers, NPEERS, 60000, connected));
    long took = nat_now_ms() - t0;
    CHECK_EQ_U64(peers[i].connect, 0);
    target_step = peers[A].steps + 3;
    CHECK(nat_pump(peers, NPEERS, 60000, members_at_target));
    target_step = peers[A].steps;
    CHECK(nat_pump(peers, NPEERS, 60000, watched_at_target));
    fprintf(stderr, "%s: pcclConnect returned %d after %ld ms; meanwhile the members stepped %u -> %u, their "
                    "longest step %ld ms (median %ld ms)\n",
            name, peers[i].connect, took, before, peers[A].steps, nat_slowest_step(peers, 2, t0),
            nat_median_step(peers));
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    peer_bin = argv[2];
    h_init(240);
    if (!nat_setup("nr")) {
        printf("reversed_test: SKIPPED: cannot create network namespaces (needs root, iproute2, iptables)\n");
        return 0;
    }
    setenv("PCCL_P2P_TIMEOUT_MS", "2000", 1);
    setenv("PCCL_LOG_LEVEL", "info", 1);
    setenv("RESTART_PEER_DRIFT", "0", 1); /* member A fetches at every sync */
    h_proc_t master;
    REQUIRE(nat_start_master(&master, argv[1], NULL));
    REQUIRE(nat_start_peer(&peers[A], A, "member A", "h0", peer_bin));
    REQUIRE(nat_start_peer(&peers[B], B, "member B", "h1", peer_bin));
    target_step = 5;
    REQUIRE(nat_pump(peers, NPEERS, 60000, members_at_target));

    admitted(NAT, "NATed newcomer", "n0");
    admitted(FW, "firewalled newcomer", "fw");
    admitted(PUB, "public newcomer", "h2");
    target_step = peers[A].steps + 5;
    CHECK(nat_pump(peers, NPEERS, 60000, members_at_target));

    unsigned compared = nat_check_steps(peers, NPEERS);
    fprintf(stderr, "%u step hashes compared; failed calls: %d %d %d %d %d\n", compared, peers[A].errors,
            peers[B].errors, peers[NAT].errors, peers[FW].errors, peers[PUB].errors);
    for (int i = 0; i < NPEERS; i++) CHECK_EQ_U64(peers[i].errors, 0);
    CHECK(nat_log_has(peers[NAT].log, "behind NAT or a firewall: the master sees us at 10.79.0.10:"));
    CHECK(nat_log_has(peers[FW].log, "behind NAT or a firewall: the master sees us at 10.79.0.3:"));
    CHECK(nat_log_has(peers[PUB].log, "the master sees us at 10.79.0.4:"));
    CHECK(nat_log_has(peers[NAT].log, "reversed edge: we dial ring neighbour"));
    CHECK(nat_log_has(peers[FW].log, "reversed edge: ring neighbour") || nat_log_has(peers[FW].log, "reversed edge: we dial"));
    CHECK(nat_log_has(nat_master_log(), "cannot be dialled at 10.79.0.10:"));
    CHECK(nat_log_has(nat_master_log(), "cannot be dialled at 10.79.0.3:"));
    h_kill(&master, SIGTERM);
    h_wait(&master, 10000);
    if (check_failures == 0) nat_remove_logs(peers, NPEERS);
    return check_exit();
}
