/* ccoip_listener.h: a listening socket with its own accept thread, for the peer's p2p and
 * shared-state listeners. The thread sleeps in ccoip_sock_wait until a connection arrives or
 * stop wakes it, and hands each accepted socket to a callback, which then owns it.
 *
 * Each callback runs on a short-lived thread of its own, so that a stranger who connects and
 * says nothing delays nobody else's handshake: at most CCOIP_LISTENER_INFLIGHT callbacks run at
 * once, at most CCOIP_LISTENER_PER_ADDR of them for one source address; a connection over
 * either cap is closed at once. */
#ifndef CCOIP_LISTENER_H
#define CCOIP_LISTENER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ccoip_inet.h"

#define CCOIP_LISTENER_INFLIGHT 32
/* 16: a neighbour connects up to 8 pool streams at once (ccoip_peer_p2p.c), and the slots of
 * its last ones may still be reading their P2P_BIND when the next arrive. */
#define CCOIP_LISTENER_PER_ADDR 16

/* Called on a thread of the listener's; `who` is "ip:port" for log lines. Must return within
 * its handshake deadline. */
typedef void (*ccoip_accept_cb)(void *ctx, int fd, const char *who);

typedef struct ccoip_listener_slot_t {
    pthread_t thread;
    _Atomic int state; /* 0 free, 1 running, 2 done (to be joined) */
    int fd;            /* the callback's */
    int shadow;        /* a dup of fd: stop shuts the socket down through it, never a reused number;
                          closed (under lock) as the callback returns, so a refusal closes at once */
    pthread_mutex_t lock;
    ccoip_inet_address_t from;
    char who[80];
    void *l;
} ccoip_listener_slot_t;

typedef struct ccoip_listener_t {
    int fd;
    uint16_t port;
    int wake[2];
    pthread_t thread;
    bool started;
    ccoip_accept_cb on_accept;
    void *ctx;
    const char *what;
    ccoip_listener_slot_t slots[CCOIP_LISTENER_INFLIGHT]; /* accept thread only (state: atomic) */
    uint64_t refused;   /* over a cap, since the last warning */
    int64_t warned_ms;
} ccoip_listener_t;

/* Nothing open yet: stop is safe. */
void ccoip_listener_init(ccoip_listener_t *l);

/* Listens on the first free port from first_port (ccoip_sock_listen_bump, `tries` ports) in the
 * family of `protocol`, and starts the thread. False (with a log line naming `what`) when it
 * cannot; stop still cleans up. */
bool ccoip_listener_start(ccoip_listener_t *l, ccoip_inet_protocol_t protocol, uint16_t first_port, unsigned tries,
                          ccoip_accept_cb on_accept, void *ctx, const char *what);

/* Wakes and joins the thread, cuts handshakes in progress short and joins them, closes the socket. */
void ccoip_listener_stop(ccoip_listener_t *l);

#endif /* CCOIP_LISTENER_H */
