/* crowd_test: 64 peers behind one NAT router join a run together (issue 30, step 5).
 *
 * The namespaces of nat_net.h: the master and one public peer on h0, and 64 peers on n0, behind
 * the MASQUERADE router rt: the master sees all 64 at one address (the router's), and cannot
 * dial any of them. All 65 restart_peer processes start at once (a sync and a 4 MiB all-reduce
 * per step; each waits for all 65 before its first step). The master's per-address caps must let
 * the 64 in; the 64 are one site, so they dial each other at their own LAN addresses (the
 * router never sees those links), and only the public peer's two edges cross the router, one of
 * them reversed. Checked: every peer finishes its steps with the same weights, no call failed,
 * and the logs say the peers were unreachable and the edge reversed. Printed: how long until
 * all 65 were in. Needs root, iproute2 and iptables: otherwise SKIPPED (passes).
 *   crowd_test PCCL_MASTER RESTART_PEER */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"
#include "tests/nat/nat_net.h"

#define NATED 64
#define PEERS (NATED + 1)
#define STEPS "3"

static h_proc_t peers[PEERS];
static char logs[PEERS][96];

static bool start(int i, const char *bin) {
    char shard[8];
    snprintf(shard, sizeof shard, "%d", i);
    snprintf(logs[i], sizeof logs[i], "/tmp/crowd_test.%d.%d.log", (int) getpid(), i);
    h_stderr_path = logs[i];
    char *args[] = {(char *) bin, (char *) nat_master_addr(), shard, STEPS, "65", NULL};
    return nat_spawn_in(&peers[i], i == 0 ? "h0" : "n0", args);
}

/* The peer's "done" hash and how many "error" lines came before it; false when it never came. */
static bool finish(int i, unsigned long long *hash, int *errors) {
    char line[256];
    unsigned step;
    unsigned long long rev;
    *errors = 0;
    while (h_read_line(&peers[i], line, sizeof line, 200000)) {
        if (strncmp(line, "error ", 6) == 0) (*errors)++;
        if (sscanf(line, "done %u rev %llu hash %llx", &step, &rev, hash) == 3) return true;
    }
    return false;
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(280);
    h_raise_fd_limit();
    if (!nat_setup("nc")) {
        printf("crowd_test: SKIPPED: cannot create network namespaces (needs root, iproute2, iptables)\n");
        return 0;
    }
    setenv("PCCL_LOG_LEVEL", "info", 1);
    setenv("PCCL_P2P_TIMEOUT_MS", "30000", 1); /* 65 processes on a small machine */
    h_proc_t master;
    REQUIRE(nat_start_master(&master, argv[1], NULL));
    long t0 = nat_now_ms();
    for (int i = 0; i < PEERS; i++) REQUIRE(start(i, argv[2]));
    unsigned long long hash[PEERS];
    int failed = 0;
    for (int i = 0; i < PEERS; i++) {
        int errors = 0;
        bool done = finish(i, &hash[i], &errors);
        CHECK(done);
        if (!done) hash[i] = 0;
        CHECK_EQ_U64(errors, 0);
        failed += errors;
        CHECK_EQ_U64(h_wait(&peers[i], 30000), 0);
    }
    fprintf(stderr, "crowd_test: %d peers (%d behind one router) ran %s steps in %ld ms; failed calls: %d\n", PEERS,
            NATED, STEPS, nat_now_ms() - t0, failed);
    for (int i = 1; i < PEERS; i++) CHECK_EQ_U64(hash[i], hash[0]);
    CHECK(nat_log_has(logs[1], "behind NAT or a firewall: the master sees us at 10.79.0.10:"));
    CHECK(nat_log_has(logs[0], "reversed edge: ring neighbour 10.79.0.10:") ||
          nat_log_has(logs[0], "reversed edge: we dial"));
    h_kill(&master, SIGTERM);
    h_wait(&master, 10000);
    if (check_failures == 0) {
        for (int i = 0; i < PEERS; i++) unlink(logs[i]);
        unlink(nat_master_log());
    }
    return check_exit();
}
