/* ss_nat_test: a NATed peer serves the shared state (issue 30's shared-state point; docs/nat.md).
 *
 * The namespaces of nat_net.h: the master (with --relay) on h0, pccl-relay on h1, NATed peer N0
 * on n0 (behind rt), a public newcomer P on h2, a newcomer N1 on n1 behind another router (rt2).
 * N0 alone holds the state (4 tensors of 2 MiB at revision 1); P and N1 join at revision 0, so
 * the elected content is held only by N0, which nobody can dial. One sync: P's fetch connection
 * is dialled by N0 (reversed: P can be dialled), N1's runs through the relay (neither end can
 * be dialled). Checked: every call succeeds, P and N1 received the whole state and N0 sent it
 * twice, every byte is the content on all three and their hashes agree, and each log says how
 * its fetch connection was made; the relay paired them. Needs root, iproute2 and iptables:
 * otherwise SKIPPED (passes).
 *   ss_nat_test PCCL_MASTER SS_PEER PCCL_RELAY */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/nat/nat_net.h"
#include "tests/shared_state/ss_util.h"

#define NT 4
#define BYTES (2ull << 20)

enum { N0, P, N1, NPEERS };
static const char *const where[NPEERS] = {"n0", "h2", "n1"};
static char logs[NPEERS][256];

static void start_relay(h_proc_t *relay, const char *bin, char *at, size_t n, const char *log) {
    char line[256];
    h_stderr_path = log;
    char *rargs[] = {(char *) bin, "--listen", "10.79.0.2:0", NULL};
    REQUIRE(nat_spawn_in(relay, "h1", rargs));
    REQUIRE(h_read_line(relay, line, sizeof line, 20000));
    const char *colon = strrchr(line, ':');
    REQUIRE(colon != NULL);
    snprintf(at, n, "10.79.0.2:%d", atoi(colon + 1));
}

static void start_peers(h_proc_t *peer, const char *bin) {
    const char *tmp = getenv("TEST_TMPDIR");
    for (int i = 0; i < NPEERS; i++) {
        snprintf(logs[i], sizeof logs[i], "%s/ss_nat_peer%d.log", tmp != NULL ? tmp : "/tmp", i);
        h_stderr_path = logs[i];
        char *args[] = {(char *) bin, (char *) nat_master_addr(), NULL};
        REQUIRE(nat_spawn_in(&peer[i], where[i], args));
    }
    h_stderr_path = NULL;
    char line[256];
    REQUIRE(ss_cmd(&peer[N0], line, sizeof line, "connect") == 0);
    ss_admit(&peer[N0], 1, &peer[P], 2);
}

int main(int argc, char **argv) {
    REQUIRE(argc == 4);
    h_init(180);
    if (!nat_setup("ns")) {
        printf("ss_nat_test: SKIPPED: cannot create network namespaces (needs root, iproute2, iptables)\n");
        return 0;
    }
    setenv("PCCL_P2P_TIMEOUT_MS", "4000", 1);
    setenv("PCCL_LOG_LEVEL", "info", 1);
    h_proc_t relay, master, peer[NPEERS];
    char relay_log[128], relay_at[64], line[256];
    snprintf(relay_log, sizeof relay_log, "%s.relay", nat_master_log());
    start_relay(&relay, argv[3], relay_at, sizeof relay_at, relay_log);
    char *extra[] = {"--relay", relay_at, NULL};
    REQUIRE(nat_start_master(&master, argv[1], extra));
    start_peers(peer, argv[2]);
    for (int i = 0; i < NPEERS; i++) REQUIRE(ss_cmd(&peer[i], line, sizeof line, "tensors %d %llu %d", NT, BYTES, i == N0 ? 5 : 0) == 0);
    ss_cmd(&peer[N0], line, sizeof line, "bump"); /* the others are behind: N0 alone holds the content */

    h_proc_t *p[NPEERS] = {&peer[N0], &peer[P], &peer[N1]};
    ss_sync_t r[NPEERS];
    ss_sync_all(p, NPEERS, NULL, r);
    unsigned long long total = NT * BYTES;
    for (int i = 0; i < NPEERS; i++) {
        CHECK_EQ_U64(r[i].result, 0);
        CHECK_EQ_U64(r[i].revision, 1);
        CHECK_EQ_U64(r[i].rx, i == N0 ? 0 : total);
        CHECK_EQ_U64(ss_cmd(p[i], line, sizeof line, "check 5"), 0);
    }
    CHECK_EQ_U64(r[N0].tx, 2 * total);
    CHECK(ss_same_hash(p, NPEERS));
    fprintf(stderr, "ss_nat_test: the NATed distributor served %llu bytes; P fetched in %llu ms (reversed), N1 in %llu ms "
                    "(relayed)\n", r[N0].tx, r[P].ms, r[N1].ms);
    CHECK(nat_log_has(logs[P], "it dials us (reversed fetch connection)"));
    CHECK(nat_log_has(logs[P], "reversed fetch connection: distributor 10.79.0.10:"));
    CHECK(nat_log_has(logs[N0], "reversed fetch connection: we dialled receiver 10.79.0.4:"));
    CHECK(nat_log_has(logs[N0], "relayed fetch connection: serving a receiver through the relay at 10.79.0.2:"));
    CHECK(nat_log_has(logs[N1], "through the relay (relayed fetch connection)"));

    for (int i = 0; i < NPEERS; i++) ss_quit(p[i]);
    h_kill(&master, SIGTERM);
    h_wait(&master, 10000);
    h_kill(&relay, SIGTERM);
    CHECK_EQ_U64(h_wait(&relay, 10000), 0);
    CHECK(nat_log_has(relay_log, "paired 10.79.0.1")); /* .10 and .11, in either order */
    if (check_failures == 0) {
        for (int i = 0; i < NPEERS; i++) unlink(logs[i]);
        unlink(relay_log);
    }
    return check_exit();
}
