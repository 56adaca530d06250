/* advertise_test: PCCL_ADVERTISE_ADDRESS and reversed edges on one host (docs/nat.md).
 *
 * A master on 127.0.0.1 and three restart_peer processes (a sync and a 4 MiB all-reduce per
 * step, peer 0's weights drifting so that every sync fetches): peer 1 advertises 127.0.0.2 (a
 * multi-homed host: the others dial it there, not where the master saw it), peer 2 advertises
 * 127.0.0.1:1, where nothing listens, as a wrong port forward would: the master's connection back
 * is refused, so peer 2 counts as unreachable and its ring edges (same-host links, shared memory
 * included) are dialled from its side. A fourth peer advertises garbage: its pcclConnect fails.
 * Checked: every step's weights are the same bits on the three, no call failed, and the logs say
 * where each is dialled and which edges were reversed.
 *   advertise_test PCCL_MASTER RESTART_PEER */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define PEERS 3
#define STEPS 20

static char logs[PEERS + 1][96];

static bool log_has(const char *path, const char *needle) {
    char *text = h_read_file(path);
    bool found = text != NULL && strstr(text, needle) != NULL;
    if (!found) fprintf(stderr, "advertise_test: %s lacks '%s'\n", path, needle);
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

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(120);
    setenv("PCCL_LOG_LEVEL", "info", 1);
    setenv("RESTART_PEER_DRIFT", "0", 1);
    h_proc_t master, peers[PEERS + 1];
    int port = h_start_master(&master, argv[1], NULL);
    REQUIRE(port > 0);
    static const char *const advertise[PEERS + 1] = {NULL, "127.0.0.2", "127.0.0.1:1", "not-an-address"};
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
    CHECK(log_has(logs[0], "the master sees us at 127.0.0.1:"));
    CHECK(log_has(logs[1], "the master sees us at 127.0.0.2:"));
    CHECK(log_has(logs[2], "behind NAT or a firewall: the master sees us at 127.0.0.1:1 "));
    CHECK(log_has(logs[2], "reversed edge: we dial ring neighbour"));
    CHECK(log_has(logs[0], "reversed edge: ring neighbour 127.0.0.1:1 dials us") ||
          log_has(logs[1], "reversed edge: ring neighbour 127.0.0.1:1 dials us"));

    /* A value that is no address: pcclConnect fails, the log says why. */
    REQUIRE(start(&peers[PEERS], PEERS, argv[2], port, advertise[PEERS]));
    CHECK(h_wait(&peers[PEERS], 20000) != 0);
    CHECK(log_has(logs[PEERS], "PCCL_ADVERTISE_ADDRESS=not-an-address: not a numeric IP address"));
    h_kill(&master, SIGTERM);
    h_wait(&master, 10000);
    if (check_failures == 0)
        for (int i = 0; i <= PEERS; i++) unlink(logs[i]);
    return check_exit();
}
