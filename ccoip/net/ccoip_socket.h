/* ccoip_socket.h: the platform layer's contract: blocking TCP helpers for the peer side and the
 * tools. One body per platform: ccoip_socket_posix.c (Linux, macOS) and ccoip_socket_win32.c
 * (Winsock); what only a kernel's options differ in lives in ccoip_host_{linux,darwin,win32}.c;
 * the addresses are portable (ccoip_addr.c). The build picks the files (docs/platforms.md).
 *
 * A socket is an int everywhere: on Windows a SOCKET handle, which the system keeps within 32
 * bits, converted in ccoip_socket_win32.c only; -1 is "none". Every call returns a status and
 * never raises SIGPIPE. Deadlines are absolute ccoip_now_ms() values; a negative one means never. */
#ifndef CCOIP_SOCKET_H
#define CCOIP_SOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip/wire/ccoip_wire.h"
#include "ccoip_inet.h"

int64_t ccoip_now_ms(void);
void ccoip_sleep_ms(int ms);

/* "1.2.3.4:5", "[::1]:5", "host" (port = default_port) -> address. Numeric hosts only. */
bool ccoip_parse_address(const char *s, uint16_t default_port, ccoip_socket_address_t *out);
void ccoip_format_address(const ccoip_socket_address_t *a, char *out, size_t n);
bool ccoip_address_is_loopback(const ccoip_inet_address_t *a);

/* Listens on the first free port in [first_port, first_port + tries). Bind and listen are both
 * checked (two sockets may bind one port with SO_REUSEADDR; only one can listen), and a taken
 * port moves on to the next one at once: no retry loop on one port. Returns the fd or -1. */
int ccoip_sock_listen_bump(const ccoip_inet_address_t *bind_addr, uint16_t first_port, unsigned tries,
                           uint16_t *port_out);

/* Connects within timeout_ms. Returns the fd, or -1 with *st set (CCOIP_ERR_REFUSED when nobody
 * listens, CCOIP_ERR_TIMEOUT, CCOIP_ERR_IO). */
int ccoip_sock_connect(const ccoip_socket_address_t *a, int timeout_ms, ccoip_status_t *st);

/* Hole punching (docs/nat.md): sockets that share a local port (SO_REUSEADDR and SO_REUSEPORT on
 * each). ccoip_sock_hold_port binds one to a free port of `family` and keeps it (it never
 * connects): -1 where ports cannot be shared (Windows: no SO_REUSEPORT). ccoip_sock_connect_from
 * is ccoip_sock_connect from that port; a dial that meets the other end's dial to it completes
 * as one connection (TCP simultaneous open). */
int ccoip_sock_hold_port(ccoip_inet_protocol_t family, uint16_t *port);
int ccoip_sock_connect_from(const ccoip_socket_address_t *a, uint16_t port, int timeout_ms, ccoip_status_t *st);

/* This end's address of a connected socket (getsockname); false when it has none. */
bool ccoip_sock_local_address(int fd, ccoip_socket_address_t *out);

/* Accepts one connection (the listening fd is non-blocking; -1 when none is waiting). */
int ccoip_sock_accept(int listen_fd, ccoip_socket_address_t *peer);

/* Sends every byte. A full send buffer (EAGAIN, WSAEWOULDBLOCK, macOS's ENOBUFS) waits for room
 * and retries, backing off; only a broken connection ends it (CCOIP_ERR_CLOSED, CCOIP_ERR_IO). */
ccoip_status_t ccoip_sock_send_all(int fd, const void *p, size_t n);

/* Gathered send of every byte of iov[0..n) (the entries are advanced in place). `more`: more
 * bytes follow at once (MSG_MORE where the kernel has it: the header is not sent alone). */
typedef struct ccoip_iov {
    void *base;
    size_t len;
} ccoip_iov_t;
ccoip_status_t ccoip_sock_sendv_all(int fd, ccoip_iov_t *iov, int n, bool more);
/* After a partial send of k bytes: drops the entries sent whole, advances the first one left
 * (shared by every platform's sendv_all, ccoip_addr.c). */
void ccoip_iov_consume(ccoip_iov_t **iov, int *n, size_t k);

/* Receives exactly n bytes. deadline_ms < 0: no deadline (a thread that waits like that is
 * released by ccoip_sock_shutdown). CCOIP_ERR_CLOSED when the peer closed or reset. */
ccoip_status_t ccoip_sock_recv_all(int fd, void *p, size_t n, int64_t deadline_ms);

/* Non-blocking single calls, for a socket made non-blocking (Windows has no MSG_DONTWAIT):
 * CCOIP_OK with *done > 0 bytes moved, CCOIP_ERR_TIMEOUT when nothing could move now,
 * CCOIP_ERR_CLOSED at the peer's end of stream (recv) or when it is gone, CCOIP_ERR_IO. */
bool ccoip_sock_set_nonblocking(int fd, bool on);
ccoip_status_t ccoip_sock_send_some(int fd, const void *p, size_t n, size_t *done);
ccoip_status_t ccoip_sock_recv_some(int fd, void *p, size_t n, size_t *done);

/* Waits on up to CCOIP_POLL_MAX sockets (poll / WSAPoll). Returns the number ready, 0 on timeout
 * or an interruption, -1 on an error (logged). */
enum { CCOIP_POLL_IN = 1, CCOIP_POLL_OUT = 2, CCOIP_POLL_ERR = 4, CCOIP_POLL_MAX = 128 };
typedef struct ccoip_pollfd {
    int fd;
    int events, revents; /* CCOIP_POLL_*; ERR (closed, reset) is always reported */
} ccoip_pollfd_t;
int ccoip_sock_poll(ccoip_pollfd_t *fds, int n, int timeout_ms);

/* Waits until fd is readable (CCOIP_OK), wake_fd is readable (CCOIP_ERR_CLOSED) or the timeout
 * passes (CCOIP_ERR_TIMEOUT). wake_fd may be -1. */
ccoip_status_t ccoip_sock_wait(int fd, int wake_fd, int timeout_ms);

/* True when the peer closed fd or sent something (for links we never read from). */
bool ccoip_sock_peer_gone(int fd);

/* The teardown contract: shutdown, join the threads that use fd, then close. ccoip_sock_shutdown
 * releases every thread blocked on fd in another thread (recv, send, wait) and makes later calls
 * fail; fd stays valid (never reused) until ccoip_sock_close. Linux: shutdown(SHUT_RDWR) does it
 * (close would not); Windows: shutdown does not release a blocked recv, CancelIoEx does. */
void ccoip_sock_shutdown(int fd);
/* A second descriptor of the same socket (close-on-exec), or -1. */
int ccoip_sock_dup(int fd);
/* Half-close: we send no more (the peer reads end of stream); we may still receive. */
void ccoip_sock_shutdown_write(int fd);
void ccoip_sock_close(int fd);

/* Bytes we sent on fd that the peer has not acknowledged yet (Linux SIOCOUTQ, macOS SO_NWRITE:
 * 0 once every byte reached the peer's kernel). Windows offers no such count: 0. */
uint64_t ccoip_sock_unacked(int fd);

/* Both ends of a connected socket on this host: the peer's address is a loopback one or ours. */
bool ccoip_sock_same_host(int fd);

/* Options for a p2p data link (ccoip_host_*.c): a wider send buffer where the kernel's autotuning
 * stops short, cubic congestion control within a host (TCP_CONGESTION: Linux only; elsewhere a
 * debug line says the system's choice stays). */
void ccoip_sock_tune_data_link(int fd, bool same_host);

/* A self-pipe that wakes threads blocked in ccoip_sock_wait (on Windows a loopback socket pair:
 * WSAPoll and select take sockets only). */
bool ccoip_wakeup_open(int fds[2]);
void ccoip_wakeup_signal(int write_fd);
/* Takes the pending signals off the read end (call when a poll saw it readable: never blocks then). */
void ccoip_wakeup_drain(int read_fd);
void ccoip_wakeup_close(int fds[2]);

/* Raises the open-file limit to its hard maximum (a master with many peers needs it); macOS caps
 * it at OPEN_MAX; Windows has no such limit for sockets. */
void ccoip_raise_fd_limit(void);

#endif /* CCOIP_SOCKET_H */
