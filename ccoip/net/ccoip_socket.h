/* ccoip_socket.h: blocking TCP helpers for the peer side and the tools (one implementation per
 * platform: ccoip_socket_posix.c). Sockets are plain ints here; every call returns a status and
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

/* Accepts one connection (the listening fd is non-blocking; -1 when none is waiting). */
int ccoip_sock_accept(int listen_fd, ccoip_socket_address_t *peer);

ccoip_status_t ccoip_sock_send_all(int fd, const void *p, size_t n);
ccoip_status_t ccoip_sock_recv_all(int fd, void *p, size_t n, int64_t deadline_ms);

/* Waits until fd is readable (CCOIP_OK), wake_fd is readable (CCOIP_ERR_CLOSED) or the timeout
 * passes (CCOIP_ERR_TIMEOUT). wake_fd may be -1. */
ccoip_status_t ccoip_sock_wait(int fd, int wake_fd, int timeout_ms);

/* True when the peer closed fd or sent something (for links we never read from). */
bool ccoip_sock_peer_gone(int fd);

void ccoip_sock_shutdown(int fd);
/* A second descriptor of the same socket (close-on-exec), or -1. */
int ccoip_sock_dup(int fd);
void ccoip_sock_close(int fd);

/* A self-pipe that wakes threads blocked in ccoip_sock_wait. */
bool ccoip_wakeup_open(int fds[2]);
void ccoip_wakeup_signal(int write_fd);
void ccoip_wakeup_close(int fds[2]);

/* Raises the open-file limit to its hard maximum (a master with many peers needs it). */
void ccoip_raise_fd_limit(void);

#endif /* CCOIP_SOCKET_H */
