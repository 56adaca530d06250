/* pccl-relay: pairs the two ends of a ring edge that nobody can dial and splices their bytes.
 *
 * Both ends dial the relay and send CCOIP_RELAY_HELLO_LEN bytes: the magic and the edge's token,
 * 16 random bytes the master gave both for this topology round (P2P_INFO). Two connections with
 * the same token are paired; from then on the relay copies bytes and nothing else. The ends run
 * their usual handshake through it (HELLO, the run secret's MACs, PCCL_ENCRYPT's keys), end to
 * end: the relay learns nothing and can forge nothing. One thread here polls the connections
 * that are not paired yet (a hello not complete in HELLO_MS, or no partner in WAIT_MS: closed);
 * each pair gets two copying threads (relay_pair.c).
 *   pccl-relay [--listen HOST:PORT] [--log-level LEVEL] */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ccoip/net/ccoip_socket.h"
#include "ccoip/relay/relay_pair.h"
#include "ccoip/wire/ccoip_packets.h"
#include "log/log.h"

#define MOD "pccl-relay"
#define MAX_WAITING 4096
#define HELLO_MS 5000
#define WAIT_MS 30000
#ifndef POLLRDHUP
#define POLLRDHUP 0 /* macOS: a waiting end that left is seen at WAIT_MS */
#endif

typedef struct waiting_t {
    int fd;
    uint8_t hello[CCOIP_RELAY_HELLO_LEN];
    size_t have;
    int64_t since;
    char name[64];
} waiting_t;

static waiting_t waiting[MAX_WAITING];
static size_t nwaiting;
static atomic_bool stop;

/* SIGTERM and SIGINT are blocked in every thread and taken here (sigwait): a plain handler is not
 * run in time under ThreadSanitizer, which defers signals. The poll loop sees `stop` within 200 ms. */
static void *wait_signals(void *arg) {
    sigset_t *set = arg;
    int sig;
    while (sigwait(set, &sig) != 0) {
    }
    atomic_store(&stop, true);
    return NULL;
}

static bool take_signals(void) {
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_t t;
    return pthread_sigmask(SIG_BLOCK, &set, NULL) == 0 && pthread_create(&t, NULL, wait_signals, &set) == 0 &&
           pthread_detach(t) == 0;
}

static void drop(size_t i, const char *why) {
    if (why != NULL) LOG_INFO(MOD, "closed %s: %s", waiting[i].name, why);
    close(waiting[i].fd);
    waiting[i] = waiting[--nwaiting];
}

static bool magic_ok(const uint8_t *h) {
    return ((uint32_t) h[0] << 24 | (uint32_t) h[1] << 16 | (uint32_t) h[2] << 8 | h[3]) == CCOIP_RELAY_MAGIC;
}

/* waiting[i] completed its hello: pair it with the other end of its token, if that is here. */
static void try_pair(size_t i) {
    for (size_t k = 0; k < nwaiting; k++) {
        if (k == i || waiting[k].have < CCOIP_RELAY_HELLO_LEN) continue;
        if (memcmp(waiting[k].hello + 4, waiting[i].hello + 4, 16) != 0) continue;
        char name[48];
        snprintf(name, sizeof name, "%02x%02x%02x%02x", waiting[i].hello[4], waiting[i].hello[5], waiting[i].hello[6],
                 waiting[i].hello[7]);
        LOG_INFO(MOD, "paired %s and %s (token %s...)", waiting[k].name, waiting[i].name, name);
        relay_pair_start(waiting[k].fd, waiting[i].fd, name);
        size_t hi = i > k ? i : k, lo = i > k ? k : i; /* remove the later index first */
        waiting[hi] = waiting[--nwaiting];
        waiting[lo] = waiting[--nwaiting];
        return;
    }
}

/* Reads what waiting[i] sent of its hello; false when it was dropped. */
static bool read_hello(size_t i) {
    waiting_t *w = &waiting[i];
    ssize_t n = recv(w->fd, w->hello + w->have, CCOIP_RELAY_HELLO_LEN - w->have, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        drop(i, "closed before pairing");
        return false;
    }
    if (n > 0) w->have += (size_t) n;
    if (w->have >= 4 && !magic_ok(w->hello)) {
        drop(i, "not a relay hello");
        return false;
    }
    if (w->have == CCOIP_RELAY_HELLO_LEN) try_pair(i);
    return true;
}

static void accept_one(int listen_fd) {
    ccoip_socket_address_t from;
    int fd = ccoip_sock_accept(listen_fd, &from);
    if (fd < 0) return;
    if (nwaiting == MAX_WAITING) {
        LOG_WARN(MOD, "%u connections wait for their partner: refusing one more", MAX_WAITING);
        close(fd);
        return;
    }
    waiting_t *w = &waiting[nwaiting++];
    memset(w, 0, sizeof *w);
    w->fd = fd;
    w->since = ccoip_now_ms();
    ccoip_format_address(&from, w->name, sizeof w->name);
}

/* One poll round over the listener and every connection not paired yet. */
static void serve_once(int listen_fd, struct pollfd *fds) {
    fds[0] = (struct pollfd){listen_fd, POLLIN, 0};
    for (size_t i = 0; i < nwaiting; i++) /* a complete hello: only its end matters (no busy loop on data) */
        fds[i + 1] = (struct pollfd){waiting[i].fd, waiting[i].have < CCOIP_RELAY_HELLO_LEN ? POLLIN : POLLRDHUP, 0};
    size_t polled = nwaiting;
    if (poll(fds, polled + 1, 200) < 0) return;
    /* From the end: drop and pair move later entries down, never ones not yet looked at. */
    for (size_t i = polled; i-- > 0;) {
        if (i >= nwaiting || waiting[i].fd != fds[i + 1].fd) continue;
        int64_t age = ccoip_now_ms() - waiting[i].since;
        if (fds[i + 1].revents & (POLLHUP | POLLERR | POLLRDHUP)) drop(i, "left before pairing");
        else if (fds[i + 1].revents & POLLIN) read_hello(i);
        else if (waiting[i].have < CCOIP_RELAY_HELLO_LEN && age > HELLO_MS) drop(i, "no hello in time");
        else if (age > WAIT_MS) drop(i, "no partner in time");
    }
    if (fds[0].revents & POLLIN) accept_one(listen_fd);
}

/* The port the kernel gave a listener bound to port 0. */
static uint16_t bound_port(int fd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *) &ss, &len) != 0) return 0;
    if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in *) &ss)->sin_port);
    return ntohs(((struct sockaddr_in6 *) &ss)->sin6_port);
}

static bool parse_args(int argc, char **argv, ccoip_socket_address_t *addr) {
    ccoip_parse_address("0.0.0.0", 48146, addr);
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v != NULL && strcmp(argv[i], "--listen") == 0 && ccoip_parse_address(v, 48146, addr)) {
            i++;
        } else if (v != NULL && strcmp(argv[i], "--log-level") == 0 && log_parse_level(v) != LOG_PARSE_FAILED) {
            log_set_level((log_level_t) log_parse_level(v));
            i++;
        } else {
            return false;
        }
    }
    return true;
}

int main(int argc, char **argv) {
    ccoip_socket_address_t addr;
    if (!parse_args(argc, argv, &addr)) {
        fprintf(stderr, "usage: pccl-relay [--listen HOST:PORT] [--log-level LEVEL]\n"
                        "  pairs the two ends of each relayed ring edge (pccl-master --relay HOST:PORT;\n"
                        "  docs/nat.md); listens on 0.0.0.0:48146 by default, port 0 picks one\n");
        return argc > 1 && strcmp(argv[1], "--help") == 0 ? 0 : 2;
    }
    signal(SIGPIPE, SIG_IGN);
    if (!take_signals()) {
        LOG_ERROR(MOD, "cannot start the signal thread");
        return 1;
    }
    uint16_t port = 0;
    int listen_fd = ccoip_sock_listen_bump(&addr.inet, addr.port, 1, &port);
    if (listen_fd < 0) {
        LOG_ERROR(MOD, "cannot listen on port %u", addr.port);
        return 1;
    }
    char name[80];
    ccoip_socket_address_t bound = {addr.inet, bound_port(listen_fd)};
    ccoip_format_address(&bound, name, sizeof name);
    printf("pccl-relay listening on %s\n", name);
    fflush(stdout);
    static struct pollfd fds[MAX_WAITING + 1];
    while (!atomic_load(&stop)) serve_once(listen_fd, fds);
    while (nwaiting > 0) drop(nwaiting - 1, NULL);
    close(listen_fd);
    return 0;
}
