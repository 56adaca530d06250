/* ccoip_socket_posix.c: ccoip_socket.h on POSIX sockets (Linux, macOS). */
#include "ccoip/net/ccoip_socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
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

static socklen_t to_sockaddr(const ccoip_socket_address_t *a, struct sockaddr_storage *ss) {
    memset(ss, 0, sizeof *ss);
    if (a->inet.protocol == inetIPv6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *) ss;
        s->sin6_family = AF_INET6;
        s->sin6_port = htons(a->port);
        memcpy(&s->sin6_addr, a->inet.ipv6.data, 16);
        return sizeof *s;
    }
    struct sockaddr_in *s = (struct sockaddr_in *) ss;
    s->sin_family = AF_INET;
    s->sin_port = htons(a->port);
    memcpy(&s->sin_addr, a->inet.ipv4.data, 4);
    return sizeof *s;
}

static void from_sockaddr(const struct sockaddr_storage *ss, ccoip_socket_address_t *a) {
    memset(a, 0, sizeof *a);
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *) ss;
        a->inet.protocol = inetIPv6;
        memcpy(a->inet.ipv6.data, &s->sin6_addr, 16);
        a->port = ntohs(s->sin6_port);
    } else {
        const struct sockaddr_in *s = (const struct sockaddr_in *) ss;
        a->inet.protocol = inetIPv4;
        memcpy(a->inet.ipv4.data, &s->sin_addr, 4);
        a->port = ntohs(s->sin_port);
    }
}

bool ccoip_parse_address(const char *s, uint16_t default_port, ccoip_socket_address_t *out) {
    char host[64];
    const char *port = NULL;
    memset(out, 0, sizeof *out);
    if (s == NULL) return false;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (end == NULL || (size_t) (end - s - 1) >= sizeof host) return false;
        memcpy(host, s + 1, (size_t) (end - s - 1));
        host[end - s - 1] = '\0';
        if (end[1] == ':') port = end + 2;
        else if (end[1] != '\0') return false;
    } else {
        const char *colon = strrchr(s, ':');
        size_t n = colon != NULL && strchr(s, ':') == colon ? (size_t) (colon - s) : strlen(s);
        if (n >= sizeof host) return false;
        memcpy(host, s, n);
        host[n] = '\0';
        if (colon != NULL && strchr(s, ':') == colon) port = colon + 1;
    }
    out->port = default_port;
    if (port != NULL) {
        char *end;
        long v = strtol(port, &end, 10);
        if (*port == '\0' || *end != '\0' || v < 0 || v > 65535) return false;
        out->port = (uint16_t) v;
    }
    if (inet_pton(AF_INET, host, out->inet.ipv4.data) == 1) {
        out->inet.protocol = inetIPv4;
        return true;
    }
    if (inet_pton(AF_INET6, host, out->inet.ipv6.data) == 1) {
        out->inet.protocol = inetIPv6;
        return true;
    }
    return false;
}

void ccoip_format_address(const ccoip_socket_address_t *a, char *out, size_t n) {
    char ip[INET6_ADDRSTRLEN] = "?";
    if (a->inet.protocol == inetIPv6) {
        inet_ntop(AF_INET6, a->inet.ipv6.data, ip, sizeof ip);
        snprintf(out, n, "[%s]:%u", ip, a->port);
    } else {
        inet_ntop(AF_INET, a->inet.ipv4.data, ip, sizeof ip);
        snprintf(out, n, "%s:%u", ip, a->port);
    }
}

bool ccoip_address_is_loopback(const ccoip_inet_address_t *a) {
    static const uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (a->protocol == inetIPv6) return memcmp(a->ipv6.data, one, 16) == 0;
    return a->ipv4.data[0] == 127;
}

static int new_socket(int family) {
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
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
        socklen_t len = to_sockaddr(&a, &ss);
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

int ccoip_sock_connect(const ccoip_socket_address_t *a, int timeout_ms, ccoip_status_t *st) {
    struct sockaddr_storage ss;
    socklen_t len = to_sockaddr(a, &ss);
    int fd = new_socket(ss.ss_family);
    *st = CCOIP_ERR_IO;
    if (fd < 0) return -1;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int rc = connect(fd, (struct sockaddr *) &ss, len);
    if (rc != 0 && errno == EINPROGRESS) {
        struct pollfd p = {fd, POLLOUT, 0};
        int n;
        do n = poll(&p, 1, timeout_ms);
        while (n < 0 && errno == EINTR);
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
    if (peer != NULL) from_sockaddr(&ss, peer);
    return fd;
}

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* SO_NOSIGPIPE covers it */
#endif

ccoip_status_t ccoip_sock_send_all(int fd, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return errno == EPIPE || errno == ECONNRESET ? CCOIP_ERR_CLOSED : CCOIP_ERR_IO;
        b += k;
        n -= (size_t) k;
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
        ssize_t k = recv(fd, b, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k == 0) return CCOIP_ERR_CLOSED;
        if (k < 0) return errno == ECONNRESET ? CCOIP_ERR_CLOSED : CCOIP_ERR_IO;
        b += k;
        n -= (size_t) k;
    }
    return CCOIP_OK;
}

ccoip_status_t ccoip_sock_wait(int fd, int wake_fd, int timeout_ms) {
    struct pollfd p[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
    int n;
    do n = poll(p, wake_fd >= 0 ? 2 : 1, timeout_ms);
    while (n < 0 && errno == EINTR);
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

void ccoip_wakeup_close(int fds[2]) {
    for (int i = 0; i < 2; i++) {
        if (fds[i] >= 0) close(fds[i]);
        fds[i] = -1;
    }
}

void ccoip_raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int ccoip_sock_dup(int fd) { return fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0); }
