/* unreachable_test: newcomers the members cannot dial never stop a run (issue 30, step 1).
 *
 * The namespaces of nat_net.h. The master runs with --probe-ms 0: it does not connect back to
 * joining peers and takes every one as reachable, as when a firewall lets the master's host in
 * but not the peers (and as every master did before protocol 11): so the members dial the
 * newcomers. A and B step on their own. The NATed newcomer registers: the members' dials reach
 * the router, which refuses them; after --admit-tries rounds its pcclConnect fails with
 * pcclRankConnectionFailed, naming the router's address. Then the firewalled newcomer: dials get
 * no answer; the same. Then the public newcomer: admitted, synced, and stepping with them.
 * Checked: the members never saw a failed call (no step lost), every step's weights are
 * bit-identical on every peer that ran it, and each refused newcomer's log names the address
 * the members dialled. Printed: the members' slowest step during each failed admission, against
 * their median step. reversed_test has the same newcomers with the probe: admitted.
 * Needs root, iproute2 and iptables: otherwise SKIPPED (passes).
 *   unreachable_test PCCL_MASTER RESTART_PEER */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"
#include "tests/nat/nat_net.h"

#define P2P_TIMEOUT_MS "2000" /* a dropped dial fails after this (default 10 s) */

enum { A, B, NAT, FW, PUB, NPEERS };
static nat_peer_t peers[NPEERS];
static const char *peer_bin;

static nat_peer_t *watched;
static bool connected(void) { return watched->connect >= 0; }
static unsigned target_step;
static bool members_at_target(void) { return peers[A].steps >= target_step && peers[B].steps >= target_step; }
static bool watched_at_target(void) { return watched->steps >= target_step; }

/* A newcomer that cannot be dialled: pcclConnect fails with pcclRankConnectionFailed, its log
 * names where it was dialled and why, and the members step on meanwhile. */
static void refused_newcomer(int i, const char *name, const char *host, const char *seen_at, const char *why,
                             const char *or_why) {
    watched = &peers[i];
    long t0 = nat_now_ms();
    unsigned before = peers[A].steps;
    REQUIRE(nat_start_peer(&peers[i], i, name, host, peer_bin));
    CHECK(nat_pump(peers, NPEERS, 60000, connected));
    long took = nat_now_ms() - t0;
    target_step = peers[A].steps + 2; /* the steps its tries held up have ended */
    CHECK(nat_pump(peers, NPEERS, 60000, members_at_target));
    fprintf(stderr, "%s: pcclConnect returned %d after %ld ms; meanwhile the members stepped %u -> %u, their "
                    "longest step %ld ms (median %ld ms), no call failed\n",
            name, peers[i].connect, took, before, peers[A].steps, nat_slowest_step(peers, 2, t0),
            nat_median_step(peers));
    CHECK_EQ_U64(peers[i].connect, 7); /* pcclRankConnectionFailed */
    CHECK_EQ_U64(h_wait(&peers[i].p, 10000), 5);
    peers[i].running = false;
    CHECK(nat_log_has(peers[i].log, "not admitted"));
    CHECK(nat_log_has(peers[i].log, seen_at));
    CHECK(nat_log_has(peers[i].log, why) || nat_log_has(peers[i].log, or_why));
    CHECK(peers[A].steps > before); /* they went on */
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    peer_bin = argv[2];
    h_init(240);
    if (!nat_setup("nu")) {
        printf("unreachable_test: SKIPPED: cannot create network namespaces (needs root, iproute2, iptables)\n");
        return 0;
    }
    setenv("PCCL_P2P_TIMEOUT_MS", P2P_TIMEOUT_MS, 1);
    setenv("PCCL_LOG_LEVEL", "info", 1);
    h_proc_t master;
    char *extra[] = {"--probe-ms", "0", NULL};
    REQUIRE(nat_start_master(&master, argv[1], extra));
    REQUIRE(nat_start_peer(&peers[A], A, "member A", "h0", peer_bin));
    REQUIRE(nat_start_peer(&peers[B], B, "member B", "h1", peer_bin));
    target_step = 5;
    REQUIRE(nat_pump(peers, NPEERS, 60000, members_at_target));

    /* The router refuses at once; the firewall drops, so whichever deadline ends first says why. */
    refused_newcomer(NAT, "NATed newcomer", "n0", "10.79.0.10:", "connection refused", "connection refused");
    refused_newcomer(FW, "firewalled newcomer", "fw", "10.79.0.3:", "no answer", "never dialled");

    /* A reachable newcomer still gets in, syncs, and steps with them. */
    watched = &peers[PUB];
    REQUIRE(nat_start_peer(&peers[PUB], PUB, "public newcomer", "h2", peer_bin));
    CHECK(nat_pump(peers, NPEERS, 60000, connected));
    CHECK_EQ_U64(peers[PUB].connect, 0);
    target_step = peers[A].steps + 5;
    REQUIRE(nat_pump(peers, NPEERS, 60000, members_at_target));
    target_step = peers[A].steps;
    CHECK(nat_pump(peers, NPEERS, 60000, watched_at_target));

    unsigned compared = nat_check_steps(peers, NPEERS);
    fprintf(stderr, "%u step hashes compared; members' failed calls: %d, %d\n", compared, peers[A].errors,
            peers[B].errors);
    CHECK(peers[PUB].steps > 0);
    CHECK_EQ_U64(peers[A].errors + peers[B].errors, 0); /* no step lost to the unreachable newcomers */
    h_kill(&master, SIGTERM);
    h_wait(&master, 10000);
    if (check_failures == 0) nat_remove_logs(peers, NPEERS);
    return check_exit();
}
