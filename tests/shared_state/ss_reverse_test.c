/* ss_reverse_test: fetch connections made the other way round, on one host (docs/nat.md).
 * A master on 127.0.0.1 with --relay and a pccl-relay; holder H and newcomer U advertise
 * 127.0.0.1:1 and :2 (PCCL_ADVERTISE_ADDRESS), where nothing listens: the master's probes are
 * refused, so nobody can dial them; newcomer P is reachable. H alone holds the state (3 tensors
 * of 1 MiB + 3 bytes at revision 1; the newcomers are behind). One sync: H dials P's
 * shared-state listener (reversed), H and U meet at the relay (relayed). Checked: every call
 * succeeds, exact rx/tx, every byte on all three, the hashes agree, each log says how its fetch
 * connection was made, a second sync moves nothing. Runs under the sanitizers (the dialling,
 * mailbox and relay threads); with a fourth argument "encrypt" every connection is encrypted
 * (each end seals with its own keys whichever end dialled).
 *   ss_reverse_test PCCL_MASTER SS_PEER PCCL_RELAY [encrypt] */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>

#include "tests/shared_state/ss_util.h"

#define NT 3
#define BYTES ((1ull << 20) + 4)

enum { H, P, U, NPEERS };
static char logs[NPEERS][512];

static void start_relay(h_proc_t *relay, const char *bin, char *at, size_t n) {
    char line[256];
    char *args[] = {(char *) bin, "--listen", "127.0.0.1:0", NULL};
    REQUIRE(h_spawn(relay, args));
    REQUIRE(h_read_line(relay, line, sizeof line, 20000));
    const char *colon = strrchr(line, ':');
    REQUIRE(colon != NULL);
    snprintf(at, n, "127.0.0.1:%d", atoi(colon + 1));
}

static void start_peer(h_proc_t *p, int i, const char *bin, int port, const char *advertise) {
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(logs[i], sizeof logs[i], "%s/ss_reverse_peer%d.log", tmp != NULL ? tmp : "/tmp", i);
    h_stderr_path = logs[i];
    if (advertise != NULL) setenv("PCCL_ADVERTISE_ADDRESS", advertise, 1);
    REQUIRE(h_start_peer(p, bin, port, 0));
    unsetenv("PCCL_ADVERTISE_ADDRESS");
    h_stderr_path = NULL;
}

static bool log_has(int i, const char *needle) {
    char *text = h_read_file(logs[i]);
    bool has = text != NULL && strstr(text, needle) != NULL;
    free(text);
    if (!has) fprintf(stderr, "peer %d's log lacks \"%s\"\n", i, needle);
    return has;
}

static void encrypt_all(char *secret, size_t n, const char **margs) {
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(secret, n, "%s/run.secret", tmp != NULL ? tmp : "/tmp");
    const char *text = "ss_reverse_test secret, long enough";
    int fd = open(secret, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t) strlen(text));
    close(fd);
    setenv("PCCL_SECRET_FILE", secret, 1);
    setenv("PCCL_ENCRYPT", "1", 1);
    margs[2] = "--secret-file", margs[3] = secret, margs[4] = "--encrypt";
}

int main(int argc, char **argv) {
    REQUIRE(argc == 4 || (argc == 5 && strcmp(argv[4], "encrypt") == 0));
    h_init(150);
    setenv("PCCL_LOG_LEVEL", "info", 1);
    h_proc_t relay, master, peer[NPEERS];
    char relay_at[64], secret[512], line[256];
    start_relay(&relay, argv[3], relay_at, sizeof relay_at);
    const char *margs[6] = {"--relay", relay_at, NULL, NULL, NULL, NULL};
    if (argc == 5) encrypt_all(secret, sizeof secret, margs);
    int port = h_start_master(&master, argv[1], margs);
    REQUIRE(port > 0);
    start_peer(&peer[H], H, argv[2], port, "127.0.0.1:1");
    start_peer(&peer[P], P, argv[2], port, NULL);
    start_peer(&peer[U], U, argv[2], port, "127.0.0.1:2");
    REQUIRE(ss_cmd(&peer[H], line, sizeof line, "connect") == 0);
    ss_admit(&peer[H], 1, &peer[P], 2);
    for (int i = 0; i < NPEERS; i++) REQUIRE(ss_cmd(&peer[i], line, sizeof line, "tensors %d %llu %d", NT, BYTES, i == H ? 5 : 0) == 0);
    ss_cmd(&peer[H], line, sizeof line, "bump"); /* P and U are behind: H alone holds the content */

    h_proc_t *p[NPEERS] = {&peer[H], &peer[P], &peer[U]};
    ss_sync_t r[NPEERS];
    ss_sync_all(p, NPEERS, NULL, r);
    unsigned long long total = NT * BYTES;
    for (int i = 0; i < NPEERS; i++) {
        CHECK_EQ_U64(r[i].result, 0);
        CHECK_EQ_U64(r[i].revision, 1);
        CHECK_EQ_U64(r[i].rx, i == H ? 0 : total);
        CHECK_EQ_U64(ss_cmd(p[i], line, sizeof line, "check 5"), 0);
    }
    CHECK_EQ_U64(r[H].tx, 2 * total);
    CHECK(ss_same_hash(p, NPEERS));
    CHECK(log_has(P, "cannot be dialled: it dials us (reversed fetch connection)"));
    CHECK(log_has(P, "reversed fetch connection: distributor 127.0.0.1:"));
    CHECK(log_has(H, "reversed fetch connection: we dialled receiver 127.0.0.1:"));
    CHECK(log_has(H, "relayed fetch connection: serving a receiver through the relay at 127.0.0.1:"));
    CHECK(log_has(U, "through the relay (relayed fetch connection)"));

    for (int i = 0; i < NPEERS; i++) ss_cmd(p[i], line, sizeof line, "bump");
    ss_sync_all(p, NPEERS, NULL, r);
    for (int i = 0; i < NPEERS; i++) {
        CHECK_EQ_U64(r[i].result, 0);
        CHECK_EQ_U64(r[i].rx + r[i].tx, 0);
    }
    for (int i = 0; i < NPEERS; i++) ss_quit(p[i]);
    h_kill(&master, SIGTERM);
    CHECK_EQ_U64(h_wait(&master, SS_T), 0);
    h_kill(&relay, SIGTERM);
    CHECK_EQ_U64(h_wait(&relay, 10000), 0);
    return check_exit();
}
