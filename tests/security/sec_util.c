/* sec_util.c: see sec_util.h. */
#include "sec_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

bool su_send_bytes(int fd, const void *b, size_t n) {
    const uint8_t *p = b;
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t) k;
    }
    return true;
}

bool su_send(int fd, const ccoip_packet_t *p) {
    ccoip_writer_t w;
    ccoip_writer_init(&w, CCOIP_MAX_PAYLOAD + CCOIP_HEADER_SIZE);
    bool ok = ccoip_packet_encode(p, &w) == CCOIP_OK && su_send_bytes(fd, w.buf, w.len);
    ccoip_writer_free(&w);
    return ok;
}

static bool recv_exact(int fd, uint8_t *b, size_t n, long deadline) {
    size_t got = 0;
    while (got < n) {
        long left = deadline - now_ms();
        if (left <= 0) return false;
        struct pollfd pf = {fd, POLLIN, 0};
        int r = poll(&pf, 1, (int) left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        ssize_t k = recv(fd, b + got, n - got, 0);
        if (k <= 0) return false;
        got += (size_t) k;
    }
    return true;
}

bool su_recv(int fd, ccoip_packet_t *out, int timeout_ms) {
    long deadline = now_ms() + timeout_ms;
    uint8_t h[CCOIP_HEADER_SIZE];
    if (!recv_exact(fd, h, sizeof h, deadline)) return false;
    uint16_t type;
    uint32_t len;
    if (ccoip_frame_peek(h, sizeof h, 65536, &type, &len) != CCOIP_OK) return false;
    uint8_t *b = malloc(len + 1);
    bool ok = b != NULL && recv_exact(fd, b, len, deadline) && ccoip_packet_decode(type, b, len, out) == CCOIP_OK;
    free(b);
    return ok;
}

ccoip_packet_t su_hello(uint8_t role, const ccoip_uuid_t *uuid, uint8_t flags) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_HELLO;
    p.u.hello.magic = CCOIP_MAGIC;
    p.u.hello.version = CCOIP_PROTOCOL_VERSION;
    p.u.hello.role = role;
    if (uuid != NULL) p.u.hello.uuid = *uuid;
    p.u.hello.flags = flags;
    memset(p.u.hello.nonce, 0x42, sizeof p.u.hello.nonce);
    return p;
}

int su_handshake(int port, uint8_t role, const ccoip_uuid_t *uuid, uint8_t flags, const ccoip_auth_key_t *key,
                 bool *closed) {
    *closed = false;
    int fd = h_tcp_connect(port);
    if (fd < 0) return -1;
    ccoip_packet_t h = su_hello(role, uuid, flags), r;
    int res = -1;
    if (su_send(fd, &h) && su_recv(fd, &r, 10000) && r.type == CCOIP_PKT_HELLO_ACK) {
        res = r.u.hello_ack.status;
        if (res == CCOIP_HELLO_OK && (r.u.hello_ack.flags & CCOIP_HELLO_F_SECRET)) {
            ccoip_packet_t a;
            memset(&a, 0, sizeof a);
            a.type = CCOIP_PKT_AUTH;
            a.u.auth.ok = 1;
            if (key != NULL) ccoip_auth_mac(key, CCOIP_AUTH_CONNECTOR, &h.u.hello, &r.u.hello_ack, a.u.auth.mac);
            else memset(a.u.auth.mac, 0x17, sizeof a.u.auth.mac);
            ccoip_packet_t v;
            res = su_send(fd, &a) && su_recv(fd, &v, 10000) && v.type == CCOIP_PKT_AUTH_RESULT
                      ? 100 + v.u.auth_result.status
                      : -1;
        }
        ccoip_packet_free(&r);
    }
    if (res != 100 && res != CCOIP_HELLO_OK) *closed = h_await_close(fd, 10000, NULL, NULL) == 1;
    close(fd);
    return res;
}

bool su_write_file(const char *path, const char *text, int mode) {
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return false;
    bool ok = write(fd, text, strlen(text)) == (ssize_t) strlen(text);
    ok = fchmod(fd, (mode_t) mode) == 0 && ok;
    close(fd);
    return ok;
}

bool su_file_has(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return false;
    size_t cap = 4u << 20;
    char *b = malloc(cap + 1);
    size_t n = b ? fread(b, 1, cap, f) : 0;
    fclose(f);
    if (b == NULL) return false;
    b[n] = '\0';
    bool has = strstr(b, needle) != NULL;
    free(b);
    return has;
}

static void *proxy_main(void *arg) {
    su_proxy_t *p = arg;
    int c = accept(p->listen_fd, NULL, NULL);
    int s = c >= 0 ? h_tcp_connect(p->to_port) : -1;
    while (c >= 0 && s >= 0) {
        struct pollfd pf[2] = {{c, POLLIN, 0}, {s, POLLIN, 0}};
        if (poll(pf, 2, 1000) < 0 && errno != EINTR) break;
        uint8_t b[65536];
        bool done = false;
        for (int i = 0; i < 2 && !done; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t k = recv(pf[i].fd, b, sizeof b, 0);
            if (k <= 0) {
                done = true;
                break;
            }
            uint8_t *rec = i == 0 ? p->up : p->down;
            size_t *n = i == 0 ? &p->nup : &p->ndown;
            pthread_mutex_lock(&p->lock);
            size_t room = sizeof p->up - *n, c2 = (size_t) k < room ? (size_t) k : room;
            memcpy(rec + *n, b, c2);
            *n += c2;
            pthread_mutex_unlock(&p->lock);
            done = !su_send_bytes(i == 0 ? s : c, b, (size_t) k);
        }
        if (done) break;
    }
    if (c >= 0) close(c);
    if (s >= 0) close(s);
    return NULL;
}

int su_proxy_start(su_proxy_t *p, int to_port) {
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    p->to_port = to_port;
    p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000001);
    socklen_t len = sizeof a;
    if (bind(p->listen_fd, (struct sockaddr *) &a, sizeof a) != 0 || listen(p->listen_fd, 4) != 0 ||
        getsockname(p->listen_fd, (struct sockaddr *) &a, &len) != 0)
        return 0;
    if (pthread_create(&p->thread, NULL, proxy_main, p) != 0) return 0;
    pthread_detach(p->thread);
    return ntohs(a.sin_port);
}

size_t su_proxy_copy(su_proxy_t *p, bool up, uint8_t *out, size_t cap) {
    pthread_mutex_lock(&p->lock);
    size_t n = up ? p->nup : p->ndown;
    if (n > cap) n = cap;
    memcpy(out, up ? p->up : p->down, n);
    pthread_mutex_unlock(&p->lock);
    return n;
}

bool su_parse_uuid(const char *hex, ccoip_uuid_t *out) {
    if (strlen(hex) != 32) return false;
    for (int i = 0; i < 16; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) return false;
        out->b[i] = (uint8_t) v;
    }
    return true;
}
