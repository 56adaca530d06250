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
    /* Through routers that reset, an admission round may lose the race (and runs again): room for
     * a few such rounds before a newcomer would be refused. */
    char *extra[] = {"--admit-tries", "10", NULL};
    REQUIRE(nat_start_master(&master, argv[1], extra));
    nat_admit(peers, NPEERS, A, "member A", "h0", peer_bin);
    nat_admit(peers, NPEERS, N0, "NATed peer 0", "n0", peer_bin);
    nat_admit(peers, NPEERS, N1, "NATed peer 1", "n1", peer_bin);
    int errors_before = peers[N0].errors + peers[N1].errors + peers[A].errors;

    /* A dies: the two NATed peers relink as a ring of two, both edges punched. */
    h_kill(&peers[A].p, SIGKILL);
    peers[A].running = false;
    unsigned target = peers[N0].steps + 8;
    long until = nat_now_ms() + 90000;
    while ((peers[N0].steps < target || peers[N1].steps < target) && nat_now_ms() < until)
        nat_pump(peers, NPEERS, 100, NULL);
    CHECK(peers[N0].steps >= target && peers[N1].steps >= target);
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
