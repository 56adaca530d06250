/* ccoip_socket_win32.c: ccoip_socket.h on Winsock 2.
 *
 * Where Winsock differs from BSD sockets, and what this file does about it:
 * - WSAStartup must run before the first socket call: once, from every entry that makes one.
 * - A SOCKET is a handle (UINT_PTR); the system keeps handles within 32 bits, so the contract's
 *   int holds it (FD below converts); INVALID_SOCKET is -1.
 * - Errors come from WSAGetLastError, mapped to the statuses in one place (status_of).
 * - No SIGPIPE exists, so no MSG_NOSIGNAL; no MSG_DONTWAIT: ioctlsocket(FIONBIO) instead.
 * - SO_REUSEADDR lets a socket bind a port another process is listening on; the port bump uses
 *   SO_EXCLUSIVEADDRUSE so that a taken port is seen as taken.
 * - shutdown(SD_BOTH) does not release a recv blocked in another thread (Linux's does); a
 *   CancelIoEx on the handle does, and the shutdown makes every later call fail at once.
 * - A failed non-blocking connect is reported by select's except set (WSAPoll misses it on older
 *   Windows 10): connects wait with select.
 * - WSAPoll and select take sockets only: the wake-up pipe is a loopback socket pair. */
#include "ccoip/net/ccoip_sys.h"

#include <mswsock.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <windows.h>

#include "log/log.h"

#define MOD "ccoip"
#define FD(fd) ((SOCKET) (intptr_t) (fd))

static pthread_once_t wsa_once = PTHREAD_ONCE_INIT;
static bool wsa_ok;

static void wsa_start(void) {
    WSADATA d;
    int rc = WSAStartup(MAKEWORD(2, 2), &d);
    wsa_ok = rc == 0;
    if (!wsa_ok) LOG_ERROR(MOD, "WSAStartup failed: error %d", rc);
}

static bool wsa_ready(void) {
    pthread_once(&wsa_once, wsa_start);
    return wsa_ok;
}

static ccoip_status_t status_of(int err) {
    switch (err) {
    case WSAECONNRESET:
    case WSAECONNABORTED:
    case WSAESHUTDOWN:
    case WSAENOTCONN:
    case WSAENETRESET:
    case WSAEINTR:
    case WSA_OPERATION_ABORTED: /* CancelIoEx from ccoip_sock_shutdown */
        return CCOIP_ERR_CLOSED;
    case WSAECONNREFUSED:
        return CCOIP_ERR_REFUSED;
    case WSAETIMEDOUT:
    case WSAEWOULDBLOCK:
        return CCOIP_ERR_TIMEOUT;
    default:
        return CCOIP_ERR_IO;
    }
}

int64_t ccoip_now_ms(void) {
    static LARGE_INTEGER freq;
    LARGE_INTEGER now;
    if (freq.QuadPart == 0) QueryPerformanceFrequency(&freq); /* the same value in every thread */
    QueryPerformanceCounter(&now);
    return (int64_t) (now.QuadPart / freq.QuadPart * 1000 + now.QuadPart % freq.QuadPart * 1000 / freq.QuadPart);
}

void ccoip_sleep_ms(int ms) { Sleep(ms < 0 ? 0 : (DWORD) ms); }

static void set_blocking_mode(SOCKET s, bool nonblocking) {
    u_long v = nonblocking ? 1 : 0;
    ioctlsocket(s, FIONBIO, &v);
}

static void set_nodelay(SOCKET s) {
    BOOL one = TRUE;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, (const char *) &one, sizeof one);
}

static SOCKET new_socket(int family) {
    if (!wsa_ready()) return INVALID_SOCKET;
    /* Not inherited by child processes (the POSIX side's CLOEXEC). */
    return WSASocketW(family, SOCK_STREAM, IPPROTO_TCP, NULL, 0, WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
}

int ccoip_sock_listen_bump(const ccoip_inet_address_t *bind_addr, uint16_t first_port, unsigned tries,
                           uint16_t *port_out) {
    for (unsigned i = 0; i < tries && first_port + i <= 65535u; i++) {
        ccoip_socket_address_t a = {*bind_addr, (uint16_t) (first_port + i)};
        struct sockaddr_storage ss;
        socklen_t len = ccoip_to_sockaddr(&a, &ss);
        SOCKET s = new_socket(ss.ss_family);
        if (s == INVALID_SOCKET) {
            LOG_ERROR(MOD, "socket() failed: error %d", WSAGetLastError());
            return -1;
        }
        BOOL one = TRUE;
        setsockopt(s, SOL_SOCKET, SO_EXCLUSIVEADDRUSE, (const char *) &one, sizeof one);
        if (bind(s, (struct sockaddr *) &ss, len) == 0 && listen(s, 128) == 0) {
            set_blocking_mode(s, true);
            *port_out = a.port;
            return (int) s;
        }
        int err = WSAGetLastError();
        closesocket(s);
        if (err != WSAEADDRINUSE && err != WSAEACCES) {
            LOG_ERROR(MOD, "cannot listen on port %u: error %d", a.port, err);
            return -1;
        }
    }
    LOG_ERROR(MOD, "no free port in %u..%u", first_port, first_port + tries - 1);
    return -1;
}

int ccoip_sock_connect(const ccoip_socket_address_t *a, int timeout_ms, ccoip_status_t *st) {
    struct sockaddr_storage ss;
    socklen_t len = ccoip_to_sockaddr(a, &ss);
    *st = CCOIP_ERR_IO;
    SOCKET s = new_socket(ss.ss_family);
    if (s == INVALID_SOCKET) return -1;
    set_blocking_mode(s, true);
    int err = 0;
    if (connect(s, (struct sockaddr *) &ss, len) != 0) {
        err = WSAGetLastError();
        if (err == WSAEWOULDBLOCK) {
            fd_set w, e;
            FD_ZERO(&w);
            FD_ZERO(&e);
            FD_SET(s, &w);
            FD_SET(s, &e);
            struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
            int n = select(0, NULL, &w, &e, timeout_ms < 0 ? NULL : &tv);
            if (n == 0) {
                closesocket(s);
                *st = CCOIP_ERR_TIMEOUT;
                return -1;
            }
            err = 0;
            int elen = sizeof err;
            if (n < 0) err = WSAGetLastError();
            else if (FD_ISSET(s, &e)) getsockopt(s, SOL_SOCKET, SO_ERROR, (char *) &err, &elen);
            if (n > 0 && FD_ISSET(s, &e) && err == 0) err = WSAECONNREFUSED;
        }
    }
    if (err != 0) {
        *st = err == WSAECONNREFUSED ? CCOIP_ERR_REFUSED : err == WSAETIMEDOUT ? CCOIP_ERR_TIMEOUT : CCOIP_ERR_IO;
        closesocket(s);
        return -1;
    }
    set_blocking_mode(s, false);
    set_nodelay(s);
    *st = CCOIP_OK;
    return (int) s;
}

/* Winsock has no SO_REUSEPORT (its SO_REUSEADDR lets anyone take a bound port): no hole punching;
 * a Windows peer's edges between unreachable ends run through the relay. */
int ccoip_sock_hold_port(ccoip_inet_protocol_t family, uint16_t *port) {
    (void) family;
    *port = 0;
    return -1;
}

int ccoip_sock_connect_from(const ccoip_socket_address_t *a, uint16_t port, int timeout_ms, ccoip_status_t *st) {
    (void) a;
    (void) port;
    (void) timeout_ms;
    *st = CCOIP_ERR_INVALID;
    return -1;
}

bool ccoip_sock_local_address(int fd, ccoip_socket_address_t *out) {
    struct sockaddr_storage ss;
    int len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    if (getsockname(FD(fd), (struct sockaddr *) &ss, &len) != 0) return false;
    ccoip_from_sockaddr(&ss, out);
    return ss.ss_family == AF_INET || ss.ss_family == AF_INET6;
}

int ccoip_sock_accept(int listen_fd, ccoip_socket_address_t *peer) {
    struct sockaddr_storage ss;
    int len = sizeof ss;
    SOCKET s = accept(FD(listen_fd), (struct sockaddr *) &ss, &len);
    if (s == INVALID_SOCKET) return -1;
    SetHandleInformation((HANDLE) s, HANDLE_FLAG_INHERIT, 0);
    set_blocking_mode(s, false); /* accepted sockets inherit the listener's non-blocking mode */
    set_nodelay(s);
    if (peer != NULL) ccoip_from_sockaddr(&ss, peer);
    return (int) s;
}

/* Waits until s is writable, backing off 1, 2, 4 .. 64 ms (a full send buffer: WSAEWOULDBLOCK on
 * a non-blocking socket, WSAENOBUFS under memory pressure). */
static bool send_buffer_full(SOCKET s, int err, int *backoff_ms) {
    if (err != WSAEWOULDBLOCK && err != WSAENOBUFS) return false;
    fd_set w;
    FD_ZERO(&w);
    FD_SET(s, &w);
    struct timeval tv = {0, *backoff_ms * 1000};
    select(0, NULL, &w, NULL, &tv);
    if (*backoff_ms < 64) *backoff_ms *= 2;
    return true;
}

ccoip_status_t ccoip_sock_send_all(int fd, const void *p, size_t n) {
    const char *b = p;
    int backoff = 1;
    while (n > 0) {
        int k = send(FD(fd), b, n > (1u << 30) ? (1 << 30) : (int) n, 0);
        if (k == SOCKET_ERROR) {
            int err = WSAGetLastError();
            if (send_buffer_full(FD(fd), err, &backoff)) continue;
            ccoip_status_t st = status_of(err);
            return st == CCOIP_ERR_TIMEOUT ? CCOIP_ERR_IO : st;
        }
        b += k;
        n -= (size_t) k;
        backoff = 1;
    }
    return CCOIP_OK;
}

ccoip_status_t ccoip_sock_sendv_all(int fd, ccoip_iov_t *iov, int n, bool more) {
    (void) more; /* no MSG_MORE: the header goes out with Nagle off, as it would anyway */
    WSABUF v[64];
    int backoff = 1;
    while (n > 0) {
        int m = n < 64 ? n : 64;
        for (int i = 0; i < m; i++) {
            v[i].buf = iov[i].base;
            v[i].len = iov[i].len > (1u << 30) ? (1u << 30) : (ULONG) iov[i].len; /* ULONG lengths */
        }
        DWORD k = 0;
        if (WSASend(FD(fd), v, (DWORD) m, &k, 0, NULL, NULL) != 0) {
            int err = WSAGetLastError();
            if (send_buffer_full(FD(fd), err, &backoff)) continue;
            ccoip_status_t st = status_of(err);
            return st == CCOIP_ERR_TIMEOUT ? CCOIP_ERR_IO : st;
        }
        backoff = 1;
        ccoip_iov_consume(&iov, &n, k);
    }
    return CCOIP_OK;
}

ccoip_status_t ccoip_sock_recv_all(int fd, void *p, size_t n, int64_t deadline_ms) {
    char *b = p;
    while (n > 0) {
        if (deadline_ms >= 0) {
            int64_t left = deadline_ms - ccoip_now_ms();
            if (left <= 0) return CCOIP_ERR_TIMEOUT;
            ccoip_status_t st = ccoip_sock_wait(fd, -1, (int) (left > 1000000 ? 1000000 : left));
            if (st != CCOIP_OK) return st;
        }
        int want = n > (1u << 30) ? (1 << 30) : (int) n;
        int k = recv(FD(fd), b, want, deadline_ms < 0 ? MSG_WAITALL : 0);
        if (k == 0) return CCOIP_ERR_CLOSED;
        if (k == SOCKET_ERROR) {
            ccoip_status_t st = status_of(WSAGetLastError());
            return st == CCOIP_ERR_TIMEOUT ? CCOIP_ERR_IO : st;
        }
        b += k;
        n -= (size_t) k;
    }
    return CCOIP_OK;
}

bool ccoip_sock_set_nonblocking(int fd, bool on) {
    u_long v = on ? 1 : 0;
    return ioctlsocket(FD(fd), FIONBIO, &v) == 0;
}

ccoip_status_t ccoip_sock_send_some(int fd, const void *p, size_t n, size_t *done) {
    int k = send(FD(fd), p, n > (1u << 30) ? (1 << 30) : (int) n, 0);
    *done = k > 0 ? (size_t) k : 0;
    if (k > 0) return CCOIP_OK;
    int err = WSAGetLastError();
    return k == 0 || err == WSAENOBUFS ? CCOIP_ERR_TIMEOUT : status_of(err);
}

ccoip_status_t ccoip_sock_recv_some(int fd, void *p, size_t n, size_t *done) {
    int k = recv(FD(fd), p, n > (1u << 30) ? (1 << 30) : (int) n, 0);
    *done = k > 0 ? (size_t) k : 0;
    if (k > 0) return CCOIP_OK;
    if (k == 0) return CCOIP_ERR_CLOSED;
    return status_of(WSAGetLastError());
}

int ccoip_sock_poll(ccoip_pollfd_t *fds, int n, int timeout_ms) {
    WSAPOLLFD p[CCOIP_POLL_MAX];
    if (n > CCOIP_POLL_MAX) return -1;
    for (int i = 0; i < n; i++) {
        p[i].fd = FD(fds[i].fd);
        p[i].events = (SHORT) ((fds[i].events & CCOIP_POLL_IN ? POLLRDNORM : 0) |
                               (fds[i].events & CCOIP_POLL_OUT ? POLLWRNORM : 0));
        p[i].revents = 0;
    }
    int r = WSAPoll(p, (ULONG) n, timeout_ms);
    if (r == SOCKET_ERROR) {
        LOG_ERROR(MOD, "WSAPoll failed: error %d", WSAGetLastError());
        return -1;
    }
    for (int i = 0; i < n; i++)
        fds[i].revents = (p[i].revents & POLLRDNORM ? CCOIP_POLL_IN : 0) |
                         (p[i].revents & POLLWRNORM ? CCOIP_POLL_OUT : 0) |
                         (p[i].revents & (POLLERR | POLLHUP | POLLNVAL) ? CCOIP_POLL_ERR : 0);
    return r;
}

ccoip_status_t ccoip_sock_wait(int fd, int wake_fd, int timeout_ms) {
    fd_set r, e;
    FD_ZERO(&r);
    FD_ZERO(&e);
    FD_SET(FD(fd), &r);
    FD_SET(FD(fd), &e);
    if (wake_fd >= 0) FD_SET(FD(wake_fd), &r);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    int n = select(0, &r, NULL, &e, timeout_ms < 0 ? NULL : &tv);
    if (n == SOCKET_ERROR) return status_of(WSAGetLastError()) == CCOIP_ERR_CLOSED ? CCOIP_ERR_CLOSED : CCOIP_ERR_IO;
    if (n == 0) return CCOIP_ERR_TIMEOUT;
    if (wake_fd >= 0 && FD_ISSET(FD(wake_fd), &r)) return CCOIP_ERR_CLOSED;
    return CCOIP_OK;
}

bool ccoip_sock_peer_gone(int fd) {
    fd_set r, e;
    FD_ZERO(&r);
    FD_ZERO(&e);
    FD_SET(FD(fd), &r);
    FD_SET(FD(fd), &e);
    struct timeval tv = {0, 0};
    return select(0, &r, NULL, &e, &tv) != 0;
}

void ccoip_sock_shutdown(int fd) {
    if (fd < 0) return;
    shutdown(FD(fd), SD_BOTH);                 /* later calls fail at once */
    CancelIoEx((HANDLE) FD(fd), NULL);         /* a call blocked now returns */
}

uint64_t ccoip_sock_unacked(int fd) {
    (void) fd; /* SIO_TCP_INFO would tell (Windows 10 1703 and later); mingw lacks its headers */
    return 0;
}

void ccoip_sock_shutdown_write(int fd) {
    if (fd >= 0) shutdown(FD(fd), SD_SEND);
}

/* A second handle of the same socket (WSADuplicateSocketW into this process). Its shutdown
 * shuts the one socket down, so later calls on either handle fail at once; a recv blocked on the
 * other handle is not released by it (CancelIoEx reaches only this handle's calls): a listener
 * that stops waits for such a handshake's deadline. */
int ccoip_sock_dup(int fd) {
    if (fd < 0) return -1;
    WSAPROTOCOL_INFOW info;
    if (WSADuplicateSocketW(FD(fd), GetCurrentProcessId(), &info) != 0) return -1;
    SOCKET d = WSASocketW(FROM_PROTOCOL_INFO, FROM_PROTOCOL_INFO, FROM_PROTOCOL_INFO, &info, 0,
                          WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
    return d == INVALID_SOCKET ? -1 : (int) d;
}

void ccoip_sock_close(int fd) {
    if (fd >= 0) closesocket(FD(fd));
}

bool ccoip_sock_same_host(int fd) {
    struct sockaddr_storage a, b;
    int la = sizeof a, lb = sizeof b;
    if (getsockname(FD(fd), (struct sockaddr *) &a, &la) != 0 || getpeername(FD(fd), (struct sockaddr *) &b, &lb) != 0)
        return false;
    return ccoip_sockaddr_same_host(&a, &b);
}

/* A connected loopback pair: [0] is waited on, [1] is written to (non-blocking: a full buffer is
 * already signalled). */
bool ccoip_wakeup_open(int fds[2]) {
    fds[0] = fds[1] = -1;
    if (!wsa_ready()) return false;
    SOCKET l = new_socket(AF_INET), c = INVALID_SOCKET, a = INVALID_SOCKET;
    struct sockaddr_in sa;
    int len = sizeof sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    BOOL one = TRUE;
    if (l == INVALID_SOCKET) goto fail;
    setsockopt(l, SOL_SOCKET, SO_EXCLUSIVEADDRUSE, (const char *) &one, sizeof one);
    if (bind(l, (struct sockaddr *) &sa, sizeof sa) != 0 || listen(l, 1) != 0 ||
        getsockname(l, (struct sockaddr *) &sa, &len) != 0)
        goto fail;
    c = new_socket(AF_INET);
    if (c == INVALID_SOCKET || connect(c, (struct sockaddr *) &sa, sizeof sa) != 0) goto fail;
    a = accept(l, NULL, NULL);
    if (a == INVALID_SOCKET) goto fail;
    closesocket(l);
    set_nodelay(c);
    set_blocking_mode(c, true);
    fds[0] = (int) a;
    fds[1] = (int) c;
    return true;
fail:
    LOG_ERROR(MOD, "cannot open a wake-up socket pair: error %d", WSAGetLastError());
    if (l != INVALID_SOCKET) closesocket(l);
    if (c != INVALID_SOCKET) closesocket(c);
    return false;
}

void ccoip_wakeup_signal(int write_fd) {
    char c = 1;
    send(FD(write_fd), &c, 1, 0);
}

void ccoip_wakeup_drain(int read_fd) {
    char drain[64];
    recv(FD(read_fd), drain, sizeof drain, 0);
}

void ccoip_wakeup_close(int fds[2]) {
    for (int i = 0; i < 2; i++) {
        if (fds[i] >= 0) closesocket(FD(fds[i]));
        fds[i] = -1;
    }
}
