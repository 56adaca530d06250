/* advertise_test: PCCL_ADVERTISE_ADDRESS, reversed and relayed edges on one host (docs/nat.md).
 *
 * A master on 127.0.0.1 with --relay, a pccl-relay, and three restart_peer processes (a sync and
 * a 4 MiB all-reduce per step, peer 1's weights drifting so that every sync fetches): peer 0
 * advertises 127.0.0.2 (a multi-homed host: the others dial it there, not where the master saw
 * it); peers 1 and 2 advertise 127.0.0.1:1 and :2, where nothing listens, as a wrong port forward
 * would: the master's connections back are refused, so both count as unreachable. The ring
 * 0 -> 1 -> 2 -> 0 (or 0 -> 2 -> 1, as they joined) then has a reversed edge (1 dials 0), a
 * relayed one (1 -> 2, nobody can dial either, and PCCL_PUNCH=0: no punch) and a direct one (2 dials 0); same-host links, so shared memory is switched to over
 * each. A fourth peer advertises garbage: its pcclConnect fails. Checked: every step's weights
 * are the same bits on the three, no call failed, the logs say where each is dialled and which
 * edges were reversed and relayed. Runs under the sanitizers too.
 *   advertise_test PCCL_MASTER RESTART_PEER PCCL_RELAY */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"
#include "tests/nat/nat_net.h"

#define PEERS 3
#define STEPS 20

static char logs[PEERS + 1][96];

static bool quiet_has(const char *path, const char *needle) {
    char *text = h_read_file(path);
    bool found = text != NULL && strstr(text, needle) != NULL;
    free(text);
    return found;
}

static bool start(h_proc_t *p, int i, const char *bin, int port, const char *advertise) {
    char addr[64], shard[8], steps[8];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    snprintf(shard, sizeof shard, "%d", i);
    snprintf(steps, sizeof steps, "%d", STEPS);
    snprintf(logs[i], sizeof logs[i], "/tmp/advertise_test.%d.%d.log", (int) getpid(), i);
    if (advertise != NULL) setenv("PCCL_ADVERTISE_ADDRESS", advertise, 1);
    else unsetenv("PCCL_ADVERTISE_ADDRESS");
    h_stderr_path = logs[i];
    char *args[] = {(char *) bin, addr, shard, steps, "3", NULL};
    bool ok = h_spawn(p, args);
    unsetenv("PCCL_ADVERTISE_ADDRESS");
    return ok;
}

/* The peer's "done" line: its last step's weights hash; the number of error lines before it. */
static bool finish(h_proc_t *p, unsigned long long *hash, int *errors) {
    char line[256];
    unsigned step;
    unsigned long long rev;
    *errors = 0;
    while (h_read_line(p, line, sizeof line, 60000)) {
        if (strncmp(line, "error ", 6) == 0) (*errors)++;
        if (sscanf(line, "done %u rev %llu hash %llx", &step, &rev, hash) == 3) return step == STEPS;
    }
    return false;
}

/* pccl-relay on 127.0.0.1, its port picked by the kernel; "--relay" and its address into args. */
static bool start_relay(h_proc_t *relay, const char *bin, char *relay_at, size_t n) {
    char *args[] = {(char *) bin, "--listen", "127.0.0.1:0", "--log-level", "info", NULL};
    char line[256];
    if (!h_spawn(relay, args) || !h_read_line(relay, line, sizeof line, 20000)) return false;
    const char *colon = strrchr(line, ':');
    if (colon == NULL) return false;
    snprintf(relay_at, n, "127.0.0.1:%d", atoi(colon + 1));
    return true;
}

int main(int argc, char **argv) {
    REQUIRE(argc == 4);
    h_init(120);
    setenv("PCCL_LOG_LEVEL", "info", 1);
    setenv("RESTART_PEER_DRIFT", "1", 1);
    setenv("PCCL_PUNCH", "0", 1); /* the edge between 1 and 2 goes through the relay, not punched */
    h_proc_t master, relay, peers[PEERS + 1];
    char relay_at[64];
    REQUIRE(start_relay(&relay, argv[3], relay_at, sizeof relay_at));
    const char *margs[] = {"--relay", relay_at, NULL};
    int port = h_start_master(&master, argv[1], margs);
    REQUIRE(port > 0);
    static const char *const advertise[PEERS + 1] = {"127.0.0.2", "127.0.0.1:1", "127.0.0.1:2", "not-an-address"};
    for (int i = 0; i < PEERS; i++) REQUIRE(start(&peers[i], i, argv[2], port, advertise[i]));
    unsigned long long hash[PEERS];
    for (int i = 0; i < PEERS; i++) {
        int errors;
        CHECK(finish(&peers[i], &hash[i], &errors));
        CHECK_EQ_U64(errors, 0);
        CHECK_EQ_U64(h_wait(&peers[i], 20000), 0);
    }
    CHECK_EQ_U64(hash[1], hash[0]);
    CHECK_EQ_U64(hash[2], hash[0]);
    CHECK(nat_log_has(logs[0], "the master sees us at 127.0.0.2:"));
    CHECK(nat_log_has(logs[1], "behind NAT or a firewall: the master sees us at 127.0.0.1:1 "));
    CHECK(nat_log_has(logs[2], "behind NAT or a firewall: the master sees us at 127.0.0.1:2 "));
    /* The ring follows the order the three joined: 0 -> 1 -> 2 or 0 -> 2 -> 1. */
    bool first1 = quiet_has(logs[1], "reversed edge: we dial ring neighbour 127.0.0.2:");
    int a = first1 ? 1 : 2, b = first1 ? 2 : 1; /* 0 -> a -> b -> 0 */
    char line[128];
    CHECK(nat_log_has(logs[a], "reversed edge: we dial ring neighbour 127.0.0.2:"));
    snprintf(line, sizeof line, "reversed edge: ring neighbour 127.0.0.1:%d dials us", a);
    CHECK(nat_log_has(logs[0], line));
    snprintf(line, sizeof line, "relayed edge: the link to ring neighbour 127.0.0.1:%d ", b);
    CHECK(nat_log_has(logs[a], line));
    snprintf(line, sizeof line, "relayed edge: the link from ring neighbour 127.0.0.1:%d ", a);
    CHECK(nat_log_has(logs[b], line));

    /* A value that is no address: pcclConnect fails, the log says why. */
    REQUIRE(start(&peers[PEERS], PEERS, argv[2], port, advertise[PEERS]));
    CHECK(h_wait(&peers[PEERS], 20000) != 0);
    CHECK(nat_log_has(logs[PEERS], "PCCL_ADVERTISE_ADDRESS=not-an-address: not a numeric IP address"));
    h_kill(&master, SIGTERM);
    h_wait(&master, 10000);
    h_kill(&relay, SIGTERM);
    CHECK_EQ_U64(h_wait(&relay, 10000), 0);
    if (check_failures == 0)
        for (int i = 0; i <= PEERS; i++) unlink(logs[i]);
    return check_exit();
}
