/* teardown_test MASTER PEER: a teardown releases every thread blocked in a socket call within a
 * bound, and never waits for a receive's deadline (docs/platforms.md, "Blocking socket calls").
 * Real pccl-master and teardown_peer processes on 127.0.0.1.
 *
 * 1. Two peers all-reduce once, so that each has data links whose receive threads now sit in
 *    recvfrom with no deadline. Silent strangers connect to peer 0's p2p, shared-state and
 *    benchmark listeners (two each), so that six handshake threads wait in a receive (2 s
 *    deadline). pcclDestroyCommunicator on peer 0 must return within BOUND_MS, every stranger
 *    must see its connection closed, and peer 1's destroy too.
 * 2. Two peers, then the master is SIGKILLed and a silent "master" takes its port: it accepts the
 *    peers' reconnections and never answers, so each peer's master-link thread waits in the
 *    REJOIN handshake (10 s deadline). Destroy must still return within BOUND_MS on both.
 * The bound is far below every deadline the waits have (2 s, 10 s, none): only the teardown
 * (shutdown of the sockets, the wake-up pipes) can meet it. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define BOUND_MS 1000
#define STRANGERS 2 /* per listener */

static const char *master_bin, *peer_bin;

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long) (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static bool start_peer(h_proc_t *p, int master_port) {
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", master_port);
    char *argv[] = {(char *) peer_bin, addr, NULL};
    return h_spawn(p, argv);
}

/* Two admitted peers of a fresh master; ports[i] = {p2p, ss, bench} of peer i. */
static void two_peers(h_proc_t *m, int *mport, h_proc_t peers[2], unsigned ports[2][3]) {
    *mport = h_start_master(m, master_bin, NULL);
    REQUIRE(*mport > 0);
    for (int i = 0; i < 2; i++) {
        REQUIRE(start_peer(&peers[i], *mport));
        REQUIRE(h_send(&peers[i], "connect"));
        char reply[256];
        REQUIRE(h_admit_reply(peers, i, &peers[i], reply, sizeof reply));
        REQUIRE(sscanf(reply, "connect 0 %u %u %u", &ports[i][0], &ports[i][1], &ports[i][2]) == 3);
    }
    char line[256];
    for (int i = 0; i < 2; i++) REQUIRE(h_send(&peers[i], "allreduce"));
    for (int i = 0; i < 2; i++) {
        REQUIRE(h_read_line(&peers[i], line, sizeof line, 60000));
        if (strcmp(line, "allreduce 0") != 0) fprintf(stderr, "teardown: peer %d: '%s'\n", i, line);
        REQUIRE(strcmp(line, "allreduce 0") == 0);
    }
}

/* Sends "destroy", checks the answer and the time the peer measured, waits for its exit. */
static void destroy_within(h_proc_t *p, const char *who) {
    char line[256];
    int64_t t0 = now_ms();
    REQUIRE(h_send(p, "destroy"));
    bool got = h_read_line(p, line, sizeof line, 60000);
    int64_t took = now_ms() - t0;
    int res = -1;
    long long ms = -1;
    CHECK(got && sscanf(line, "destroy %d %lld", &res, &ms) == 2);
    CHECK_EQ_U64(res, 0);
    CHECK(ms >= 0 && ms < BOUND_MS);
    printf("teardown: %s: pcclDestroyCommunicator took %lld ms (answer after %lld ms; bound %d ms)\n", who, ms,
           (long long) took, BOUND_MS);
    CHECK_EQ_U64(h_wait(p, 10000), 0);
}

static void scenario_destroy(void) {
    h_proc_t m, peers[2];
    int mport;
    unsigned ports[2][3];
    two_peers(&m, &mport, peers, ports);
    /* Silent strangers on every listener of peer 0: their handshakes wait in a receive. */
    int fds[3 * STRANGERS];
    for (int l = 0; l < 3; l++)
        for (int k = 0; k < STRANGERS; k++) REQUIRE((fds[l * STRANGERS + k] = h_tcp_connect((int) ports[0][l])) >= 0);
    int64_t connected = now_ms();
    sleep_ms(300);
    char line[256];
    int in_recv = 0, dl = 0, accept = 0;
    REQUIRE(h_send(&peers[0], "threads") && h_read_line(&peers[0], line, sizeof line, 10000));
    CHECK(sscanf(line, "threads %d %d %d", &in_recv, &dl, &accept) == 3);
    printf("teardown: peer 0 before destroy: %d data-link receive threads (%d in recvfrom), %d listener threads\n", dl,
           in_recv, accept);
    CHECK(dl >= 2 && in_recv == dl);            /* the tx and the rx link each have one */
    CHECK(accept >= 3 + 3 * STRANGERS);          /* three accept loops and the strangers' handshakes */
    destroy_within(&peers[0], "peer 0 (data links, 6 handshakes blocked)");
    /* Every stranger was cut off by the teardown, before its handshake's 2 s deadline. */
    for (int i = 0; i < 3 * STRANGERS; i++) {
        CHECK(h_await_close(fds[i], 5000, NULL, NULL) == 1);
        close(fds[i]);
    }
    int64_t cut = now_ms() - connected;
    printf("teardown: strangers cut off %lld ms after they connected (handshake deadline 2000 ms)\n", (long long) cut);
    CHECK(cut < 2000);
    destroy_within(&peers[1], "peer 1 (its neighbour gone)");
    h_kill(&m, SIGTERM);
    h_wait(&m, 10000);
}

/* A listener on 127.0.0.1:port (the dead master's), or -1. */
static int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t) port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *) &a, sizeof a) != 0 || listen(fd, 16) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void scenario_silent_master(void) {
    h_proc_t m, peers[2];
    int mport;
    unsigned ports[2][3];
    two_peers(&m, &mport, peers, ports);
    h_kill(&m, SIGKILL);
    h_wait(&m, 10000);
    int lfd = -1;
    for (int i = 0; i < 50 && lfd < 0; i++) {
        lfd = listen_on(mport);
        if (lfd < 0) sleep_ms(100);
    }
    REQUIRE(lfd >= 0);
    /* Both peers reconnect (backoff up to 2 s) and wait for a HELLO_ACK that never comes. */
    int conns[2] = {-1, -1}, n = 0;
    int64_t end = now_ms() + 15000;
    while (n < 2 && now_ms() < end) {
        struct pollfd p = {lfd, POLLIN, 0};
        if (poll(&p, 1, 200) > 0) conns[n++] = accept(lfd, NULL, NULL);
    }
    CHECK_EQ_U64(n, 2);
    printf("teardown: the silent master holds %d reconnections\n", n);
    sleep_ms(300);
    destroy_within(&peers[0], "peer 0 (master link in the REJOIN handshake)");
    destroy_within(&peers[1], "peer 1 (master link in the REJOIN handshake)");
    for (int i = 0; i < n; i++) close(conns[i]);
    close(lfd);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    master_bin = argv[1];
    peer_bin = argv[2];
    h_init(240);
    scenario_destroy();
    scenario_silent_master();
    return check_exit();
}
