/* punch_test: peers behind two NAT routers linked by hole punching (issue 30, step 3).
 *   punch_test PCCL_MASTER RESTART_PEER drop|reset
 * The routers (nat_net.h) drop, or answer with a reset, a connection from outside that none of
 * their mappings matches: a punch's first SYN may meet either before the other end's SYN has
 * left its own router. The master (no relay) and member A on h0 (public); NATed peers on n0
 * (behind rt) and n1 (behind rt2). A steps alone; n0 joins (its edges with A are reversed), then
 * n1: the ring A -> n0 -> n1 -> A has an edge between the two NATed peers, which nobody can dial:
 * both ends dial each other from their punch ports at once. Then A is SIGKILLed: n0 and n1 go on
 * as a ring of two, both of its edges punched (two port pairs). Checked: every pcclConnect
 * succeeds, nobody sees a failed call before the kill, n0 and n1 go on after it, every step's
 * weights are the same bits on every peer that ran it, the logs name the punched edges, and
 * (routers that drop) no punch failed: through routers that reset, a punch is a race that a
 * round may lose (the next round punches again; the log counts them). Needs root, iproute2 and
 * iptables: otherwise SKIPPED. */
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
    REQUIRE(argc == 4 && (strcmp(argv[3], "drop") == 0 || strcmp(argv[3], "reset") == 0));
    peer_bin = argv[2];
    h_init(240);
    nat_set_routers(strcmp(argv[3], "drop") == 0 ? NAT_ROUTER_DROP : NAT_ROUTER_RESET);
    if (!nat_setup("np")) {
        printf("punch_test: SKIPPED: cannot create network namespaces (needs root, iproute2, iptables)\n");
        return 0;
    }
    setenv("PCCL_LOG_LEVEL", "info", 1);
    h_proc_t master;
    REQUIRE(nat_start_master(&master, argv[1], NULL));
    REQUIRE(nat_start_peer(&peers[A], A, "member A", "h0", peer_bin));
    target_step = 3;
    REQUIRE(nat_pump(peers, NPEERS, 60000, all_at_target));
    admitted(N0, "NATed peer 0", "n0");
    admitted(N1, "NATed peer 1", "n1");
    int errors_before = peers[N0].errors + peers[N1].errors + peers[A].errors;

    /* A dies: the two NATed peers relink as a ring of two, both edges punched. */
    h_kill(&peers[A].p, SIGKILL);
    peers[A].running = false;
    target_step = peers[N0].steps + 8;
    CHECK(nat_pump(peers, NPEERS, 90000, all_at_target));
    fprintf(stderr, "after the kill: n0 at step %u, n1 at step %u\n", peers[N0].steps, peers[N1].steps);

    unsigned compared = nat_check_steps(peers, NPEERS);
    fprintf(stderr, "%u step hashes compared; failed calls before the kill: %d\n", compared, errors_before);
    CHECK(compared > 0);
    CHECK_EQ_U64(errors_before, 0);
    CHECK(nat_log_has(peers[N0].log, "punched edge: the link to ring neighbour 10.79.0.11:"));
    CHECK(nat_log_has(peers[N1].log, "punched edge: the link from ring neighbour 10.79.0.10:"));
    CHECK(nat_log_has(peers[N1].log, "punched edge: the link to ring neighbour 10.79.0.10:"));
    CHECK(nat_log_has(peers[N0].log, "punched edge: the link from ring neighbour 10.79.0.11:"));
    char *mlog = h_read_file(nat_master_log());
    int failed = 0;
    for (const char *at = mlog; at != NULL && (at = strstr(at, "hole punching between")) != NULL; at++) failed++;
    fprintf(stderr, "punches failed (rounds run again): %d\n", failed);
    CHECK(mlog != NULL);
    if (strcmp(argv[3], "drop") == 0) CHECK_EQ_U64(failed, 0);
    free(mlog);
    h_kill(&master, SIGTERM);
    h_wait(&master, 10000);
    if (check_failures == 0) nat_remove_logs(peers, NPEERS);
    return check_exit();
}
