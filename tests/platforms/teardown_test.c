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
 * 3. Peer 0 serves 64 MiB of shared state to peer 1 (sending at 16 MB/s), peer 1 is SIGSTOPped
 *    mid-transfer, so that peer 0's serving thread blocks in a send, and the master is SIGKILLed:
 *    peer 0's pcclSynchronizeSharedState must fail within BOUND_MS (the serving thread is shut
 *    down and joined, not waited for), then destroy within BOUND_MS.
 * The bound is far below every deadline the waits have (2 s, 10 s, 30 s, none): only the teardown
 * (shutdown of the sockets, the wake-up pipes) can meet it. */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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

/* Two admitted peers of a fresh master; ports[i] = {p2p, ss, bench} of peer i. p0_send_mbps:
 * peer 0's PCCL_SS_MAX_SEND_MBPS, or NULL. */
static void two_peers(h_proc_t *m, int *mport, h_proc_t peers[2], unsigned ports[2][3], const char *p0_send_mbps) {
    *mport = h_start_master(m, master_bin, NULL);
    REQUIRE(*mport > 0);
    for (int i = 0; i < 2; i++) {
        if (i == 0 && p0_send_mbps != NULL) setenv("PCCL_SS_MAX_SEND_MBPS", p0_send_mbps, 1);
        REQUIRE(start_peer(&peers[i], *mport));
        unsetenv("PCCL_SS_MAX_SEND_MBPS");
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

/* shm: the links between the two peers run over shared memory (the default on Linux), so the
 * ring's receive threads park on a futex in the segment instead of recvfrom; destroy must release
 * them as promptly. PCCL_SHM=0: every receive thread sits in recvfrom. */
static void scenario_destroy(int shm) {
    if (shm) unsetenv("PCCL_SHM");
    else setenv("PCCL_SHM", "0", 1); /* the peers inherit it */
    h_proc_t m, peers[2];
    int mport;
    unsigned ports[2][3];
    two_peers(&m, &mport, peers, ports, NULL);
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
    /* The tx and the rx link each have one; over shared memory the ring's ones wait on the pipe. */
    CHECK(dl >= 2 && (shm ? in_recv < dl : in_recv == dl));
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
    two_peers(&m, &mport, peers, ports, NULL);
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

/* Threads of process pid named `name`, and how many of them sit in a send system call. */
static int threads_sending(pid_t pid, const char *name, int *sending) {
    int n = 0;
    *sending = 0;
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int) pid);
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[384], buf[128];
        snprintf(path, sizeof path, "%s/%s/comm", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL) continue;
        bool named = fgets(buf, sizeof buf, f) != NULL && strncmp(buf, name, strlen(name)) == 0;
        fclose(f);
        if (!named) continue;
        n++;
        snprintf(path, sizeof path, "%s/%s/syscall", dir, e->d_name);
        if ((f = fopen(path, "r")) == NULL) continue;
        long sc = fgets(buf, sizeof buf, f) != NULL ? atol(buf) : -1;
        fclose(f);
        if (sc == SYS_sendto || sc == SYS_sendmsg) (*sending)++;
    }
    if (d != NULL) closedir(d);
    return n;
}

/* The master dies for good (reconnection off) while peer 0 serves a stopped peer: its sync fails
 * at once (the run has no master to decide it) and it is destroyed within the bound. With
 * reconnection on, the sync would wait for a master to ask (docs/group-state-machine.md). */
static void scenario_serving_master_dies(void) {
    h_proc_t m, peers[2];
    int mport;
    unsigned ports[2][3];
    setenv("PCCL_MASTER_RECONNECT_S", "0", 1);
    /* One range of the whole 64 MiB: the distributor is still sending it when the reader stops
     * (with 8 MiB ranges it may have sent its range and wait in a receive for the next request). */
    setenv("PCCL_SS_RANGE_BYTES", "67108864", 1);
    two_peers(&m, &mport, peers, ports, "16");
    unsetenv("PCCL_MASTER_RECONNECT_S");
    unsetenv("PCCL_SS_RANGE_BYTES");
    REQUIRE(h_send(&peers[0], "sync 2 1")); /* SEND_ONLY: the distributor */
    REQUIRE(h_send(&peers[1], "sync 1 0")); /* RECEIVE_ONLY */
    /* Once peer 0 serves (hashing 64 MiB first takes seconds under a sanitizer), stop the reader. */
    int serving = 0, sending = 0;
    for (int i = 0; i < 600 && serving == 0; i++) {
        sleep_ms(50);
        serving = threads_sending(peers[0].pid, "pccl-ss-serve", &sending);
    }
    sleep_ms(300);
    h_kill(&peers[1], SIGSTOP);
    /* The send buffers fill; the serving thread then waits in send for a reader that is stopped. */
    for (int i = 0; i < 50 && (serving == 0 || sending == 0); i++) {
        sleep_ms(100);
        serving = threads_sending(peers[0].pid, "pccl-ss-serve", &sending);
    }
    printf("teardown: peer 0 serves with %d thread(s), %d blocked in a send to the stopped peer 1\n", serving, sending);
    CHECK(serving >= 1 && sending >= 1);
    int64_t t0 = now_ms();
    h_kill(&m, SIGKILL);
    char line[256];
    bool got = h_read_line(&peers[0], line, sizeof line, 60000);
    int64_t took = now_ms() - t0;
    int res = 0;
    CHECK(got && sscanf(line, "sync %d", &res) == 1);
    CHECK(res != 0); /* the master is gone */
    CHECK(took < BOUND_MS);
    printf("teardown: peer 0's sync failed (%d) %lld ms after the master was killed (bound %d ms)\n", res,
           (long long) took, BOUND_MS);
    destroy_within(&peers[0], "peer 0 (after the failed sync)");
    h_kill(&peers[1], SIGKILL);
    h_wait(&peers[1], 10000);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    master_bin = argv[1];
    peer_bin = argv[2];
    h_init(240);
    scenario_destroy(0);
#ifdef __linux__
    scenario_destroy(1);
#endif
    unsetenv("PCCL_SHM");
    scenario_silent_master();
    scenario_serving_master_dies();
    return check_exit();
}
