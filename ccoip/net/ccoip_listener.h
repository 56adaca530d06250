/* ccoip_listener.h: a listening socket with its own accept thread, for the peer's p2p and
 * shared-state listeners. The thread sleeps in ccoip_sock_wait until a connection arrives or
 * stop wakes it, and hands each accepted socket to a callback, which then owns it. */
#ifndef CCOIP_LISTENER_H
#define CCOIP_LISTENER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ccoip_inet.h"

/* Called on the listener's thread; `who` is "ip:port" for log lines. */
typedef void (*ccoip_accept_cb)(void *ctx, int fd, const char *who);

typedef struct ccoip_listener_t {
    int fd;
    uint16_t port;
    int wake[2];
    pthread_t thread;
    bool started;
    ccoip_accept_cb on_accept;
    void *ctx;
} ccoip_listener_t;

/* Nothing open yet: stop is safe. */
void ccoip_listener_init(ccoip_listener_t *l);

/* Listens on the first free port from first_port (ccoip_sock_listen_bump, `tries` ports) in the
 * family of `protocol`, and starts the thread. False (with a log line naming `what`) when it
 * cannot; stop still cleans up. */
bool ccoip_listener_start(ccoip_listener_t *l, ccoip_inet_protocol_t protocol, uint16_t first_port, unsigned tries,
                          ccoip_accept_cb on_accept, void *ctx, const char *what);

/* Wakes and joins the thread, closes the socket. */
void ccoip_listener_stop(ccoip_listener_t *l);

#endif /* CCOIP_LISTENER_H */
