/* ccoip_socket_posix.c: ccoip_socket.h on POSIX sockets (Linux, macOS). */
#include "ccoip/net/ccoip_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#ifdef __linux__
#include <linux/sockios.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log/log.h"

#define MOD "ccoip"

int64_t ccoip_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ccoip_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long) (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* poll() that an interruption does not restart from the full timeout (a signal storm must not
 * stretch a bounded wait); timeout_ms < 0: forever. */
static int poll_within(struct pollfd *p, nfds_t n, int timeout_ms) {
    int64_t end = ccoip_now_ms() + timeout_ms;
    for (;;) {
        int wait = -1;
        if (timeout_ms >= 0) {
            int64_t left = end - ccoip_now_ms();
            wait = left > 0 ? (int) left : 0;
        }
        int r = poll(p, n, wait);
        if (r >= 0 || errno != EINTR) return r;
    }
}

static int new_socket(int family) {
    int fd = socket(family, SOCK_STREAM, 0); /* SOCK_CLOEXEC is Linux's; macOS lacks it */
    if (fd < 0) return -1;
    fcntl(fd, F_SETFD, FD_CLOEXEC);
#ifdef SO_NOSIGPIPE
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
    return fd;
}

int ccoip_sock_listen_bump(const ccoip_inet_address_t *bind_addr, uint16_t first_port, unsigned tries,
                           uint16_t *port_out) {
    for (unsigned i = 0; i < tries && first_port + i <= 65535u; i++) {
        ccoip_socket_address_t a = {*bind_addr, (uint16_t) (first_port + i)};
        struct sockaddr_storage ss;
        socklen_t len = ccoip_to_sockaddr(&a, &ss);
        int fd = new_socket(ss.ss_family);
        if (fd < 0) {
            LOG_ERROR(MOD, "socket() failed: %s", strerror(errno));
            return -1;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *) &ss, len) == 0 && listen(fd, 128) == 0) {
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
            *port_out = a.port;
            return fd;
        }
        int err = errno;
        close(fd);
        if (err != EADDRINUSE && err != EACCES) {
            LOG_ERROR(MOD, "cannot listen on port %u: %s", a.port, strerror(err));
            return -1;
        }
    }
    LOG_ERROR(MOD, "no free port in %u..%u", first_port, first_port + tries - 1);
    return -1;
}

/* Connects fd (a fresh socket of ss's family) within timeout_ms: fd, or -1 (closed) with *st. */
static int connect_within(int fd, const struct sockaddr_storage *ss, socklen_t len, int timeout_ms, ccoip_status_t *st) {
    *st = CCOIP_ERR_IO;
    if (fd < 0) return -1;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int rc = connect(fd, (const struct sockaddr *) ss, len);
    if (rc != 0 && errno == EINPROGRESS) {
        struct pollfd p = {fd, POLLOUT, 0};
        int n = poll_within(&p, 1, timeout_ms);
        if (n == 0) {
            close(fd);
            *st = CCOIP_ERR_TIMEOUT;
            return -1;
        }
        int err = 0;
        socklen_t elen = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
        rc = err == 0 ? 0 : -1;
        errno = err;
    }
    if (rc != 0) {
        *st = errno == ECONNREFUSED ? CCOIP_ERR_REFUSED : CCOIP_ERR_IO;
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *st = CCOIP_OK;
    return fd;
}

int ccoip_sock_connect(const ccoip_socket_address_t *a, int timeout_ms, ccoip_status_t *st) {
    struct sockaddr_storage ss;
    socklen_t len = ccoip_to_sockaddr(a, &ss);
    return connect_within(new_socket(ss.ss_family), &ss, len, timeout_ms, st);
}

/* A socket of `family` bound to `port` (0: any) beside every other socket bound there, or -1. */
static int shared_port_socket(int family, uint16_t port) {
    int fd = new_socket(family);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
        close(fd);
        return -1;
    }
    ccoip_socket_address_t any;
    memset(&any, 0, sizeof any);
    any.inet.protocol = family == AF_INET6 ? inetIPv6 : inetIPv4;
    any.port = port;
    struct sockaddr_storage ss;
    socklen_t len = ccoip_to_sockaddr(&any, &ss);
    if (bind(fd, (struct sockaddr *) &ss, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int ccoip_sock_hold_port(ccoip_inet_protocol_t family, uint16_t *port) {
    int fd = shared_port_socket(family == inetIPv6 ? AF_INET6 : AF_INET, 0);
    ccoip_socket_address_t a;
    if (fd >= 0 && ccoip_sock_local_address(fd, &a)) {
        *port = a.port;
        return fd;
    }
    if (fd >= 0) close(fd);
    return -1;
}

int ccoip_sock_connect_from(const ccoip_socket_address_t *a, uint16_t port, int timeout_ms, ccoip_status_t *st) {
    struct sockaddr_storage ss;
    socklen_t len = ccoip_to_sockaddr(a, &ss);
    int fd = shared_port_socket(ss.ss_family, port);
    if (fd < 0) {
        *st = CCOIP_ERR_IO;
        return -1;
    }
    return connect_within(fd, &ss, len, timeout_ms, st);
}

bool ccoip_sock_local_address(int fd, ccoip_socket_address_t *out) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    if (getsockname(fd, (struct sockaddr *) &ss, &len) != 0) return false;
    ccoip_from_sockaddr(&ss, out);
    return ss.ss_family == AF_INET || ss.ss_family == AF_INET6;
}

int ccoip_sock_accept(int listen_fd, ccoip_socket_address_t *peer) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int fd = accept(listen_fd, (struct sockaddr *) &ss, &len);
    if (fd < 0) return -1;
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
#ifdef SO_NOSIGPIPE
    int nsp = 1;
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &nsp, sizeof nsp);
#endif
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (peer != NULL) ccoip_from_sockaddr(&ss, peer);
    return fd;
}

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* macOS before 11: SO_NOSIGPIPE covers it */
#endif
#ifndef MSG_MORE
#define MSG_MORE 0 /* Linux's; elsewhere the header may leave alone */
#endif

/* A full send buffer on a blocking socket: EAGAIN (a send timeout) or, on macOS, ENOBUFS
 * (treated as fatal before). Waits for room, backing off 1, 2, 4 .. 64 ms. */
static bool send_buffer_full(int fd, int *backoff_ms) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS) return false;
    struct pollfd p = {fd, POLLOUT, 0};
    poll(&p, 1, *backoff_ms);
    if (*backoff_ms < 64) *backoff_ms *= 2;
    return true;
}

static ccoip_status_t send_error(void) {
    return errno == EPIPE || errno == ECONNRESET ? CCOIP_ERR_CLOSED : CCOIP_ERR_IO;
}

ccoip_status_t ccoip_sock_send_all(int fd, const void *p, size_t n) {
    const uint8_t *b = p;
    int backoff = 1;
    while (n > 0) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && (errno == EINTR || send_buffer_full(fd, &backoff))) continue;
        if (k <= 0) return send_error();
        b += k;
        n -= (size_t) k;
        backoff = 1;
    }
    return CCOIP_OK;
}

ccoip_status_t ccoip_sock_sendv_all(int fd, ccoip_iov_t *iov, int n, bool more) {
    struct iovec v[64];
    int backoff = 1;
    while (n > 0) {
        int m = n < 64 ? n : 64;
        for (int i = 0; i < m; i++) v[i] = (struct iovec){iov[i].base, iov[i].len};
        struct msghdr msg;
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = v;
        msg.msg_iovlen = m;
        ssize_t k = sendmsg(fd, &msg, MSG_NOSIGNAL | (more || m < n ? MSG_MORE : 0));
        if (k < 0 && (errno == EINTR || send_buffer_full(fd, &backoff))) continue;
        if (k <= 0) return send_error();
        backoff = 1;
        ccoip_iov_consume(&iov, &n, (size_t) k);
    }
    return CCOIP_OK;
}

ccoip_status_t ccoip_sock_recv_all(int fd, void *p, size_t n, int64_t deadline_ms) {
    uint8_t *b = p;
    while (n > 0) {
        if (deadline_ms >= 0) {
            int64_t left = deadline_ms - ccoip_now_ms();
            if (left <= 0) return CCOIP_ERR_TIMEOUT;
            ccoip_status_t st = ccoip_sock_wait(fd, -1, (int) (left > 1000000 ? 1000000 : left));
            if (st != CCOIP_OK) return st;
        }
        /* Without a deadline the whole read is one call; with one, what is there. */
        ssize_t k = recv(fd, b, n, deadline_ms < 0 ? MSG_WAITALL : 0);
        if (k < 0 && errno == EINTR) continue;
        if (k == 0) return CCOIP_ERR_CLOSED;
        if (k < 0) return errno == ECONNRESET ? CCOIP_ERR_CLOSED : CCOIP_ERR_IO;
        b += k;
        n -= (size_t) k;
    }
    return CCOIP_OK;
}

bool ccoip_sock_set_nonblocking(int fd, bool on) {
    int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) == 0;
}

static ccoip_status_t some_result(ssize_t k, size_t *done, bool recving) {
    *done = k > 0 ? (size_t) k : 0;
    if (k > 0) return CCOIP_OK;
    if (k == 0) return recving ? CCOIP_ERR_CLOSED : CCOIP_ERR_TIMEOUT;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ENOBUFS) return CCOIP_ERR_TIMEOUT;
    return errno == EPIPE || errno == ECONNRESET ? CCOIP_ERR_CLOSED : CCOIP_ERR_IO;
}

ccoip_status_t ccoip_sock_send_some(int fd, const void *p, size_t n, size_t *done) {
    return some_result(send(fd, p, n, MSG_NOSIGNAL), done, false);
}

ccoip_status_t ccoip_sock_recv_some(int fd, void *p, size_t n, size_t *done) {
    return some_result(recv(fd, p, n, 0), done, true);
}

int ccoip_sock_poll(ccoip_pollfd_t *fds, int n, int timeout_ms) {
    struct pollfd p[CCOIP_POLL_MAX];
    if (n > CCOIP_POLL_MAX) return -1;
    for (int i = 0; i < n; i++)
        p[i] = (struct pollfd){fds[i].fd, (short) ((fds[i].events & CCOIP_POLL_IN ? POLLIN : 0) |
                                                   (fds[i].events & CCOIP_POLL_OUT ? POLLOUT : 0)), 0};
    int r = poll(p, (nfds_t) n, timeout_ms);
    if (r < 0 && errno == EINTR) r = 0;
    if (r < 0) {
        LOG_ERROR(MOD, "poll failed: %s", strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++)
        fds[i].revents = (p[i].revents & POLLIN ? CCOIP_POLL_IN : 0) | (p[i].revents & POLLOUT ? CCOIP_POLL_OUT : 0) |
                         (p[i].revents & (POLLERR | POLLHUP | POLLNVAL) ? CCOIP_POLL_ERR : 0);
    return r;
}

ccoip_status_t ccoip_sock_wait(int fd, int wake_fd, int timeout_ms) {
    struct pollfd p[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    int n = poll_within(p, wake_fd >= 0 ? 2 : 1, timeout_ms);
    if (n < 0) return CCOIP_ERR_IO;
    if (n == 0) return CCOIP_ERR_TIMEOUT;
    if (wake_fd >= 0 && p[1].revents != 0) return CCOIP_ERR_CLOSED;
    return CCOIP_OK;
}

bool ccoip_sock_peer_gone(int fd) {
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 0) != 0;
}

void ccoip_sock_shutdown(int fd) {
    if (fd >= 0) shutdown(fd, SHUT_RDWR);
}

void ccoip_sock_shutdown_write(int fd) {
    if (fd >= 0) shutdown(fd, SHUT_WR);
}

uint64_t ccoip_sock_unacked(int fd) {
    int n = 0;
#if defined(__linux__)
    if (fd < 0 || ioctl(fd, SIOCOUTQ, &n) != 0 || n < 0) return 0;
#elif defined(SO_NWRITE)
    socklen_t len = sizeof n;
    if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_NWRITE, &n, &len) != 0 || n < 0) return 0;
#else
    (void) fd;
#endif
    return (uint64_t) n;
}

bool ccoip_sock_same_host(int fd) {
    struct sockaddr_storage a, b;
    socklen_t la = sizeof a, lb = sizeof b;
    if (getsockname(fd, (struct sockaddr *) &a, &la) != 0 || getpeername(fd, (struct sockaddr *) &b, &lb) != 0)
        return false;
    return ccoip_sockaddr_same_host(&a, &b);
}

void ccoip_sock_close(int fd) {
    if (fd >= 0) close(fd);
}

bool ccoip_wakeup_open(int fds[2]) {
    if (pipe(fds) != 0) return false;
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
    return true;
}

void ccoip_wakeup_signal(int write_fd) {
    char c = 1;
    ssize_t k = write(write_fd, &c, 1); /* a full pipe is already signalled */
    (void) k;
}

void ccoip_wakeup_drain(int read_fd) {
    char drain[64];
    ssize_t k = read(read_fd, drain, sizeof drain);
    (void) k;
}

void ccoip_wakeup_close(int fds[2]) {
    for (int i = 0; i < 2; i++) {
        if (fds[i] >= 0) close(fds[i]);
        fds[i] = -1;
    }
}

int ccoip_sock_dup(int fd) { return fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0); }
