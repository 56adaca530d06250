/* Bad input while a run of 3 real peers goes on: raw garbage, a 4 GiB length, unknown types,
 * truncated packets, a wrong protocol version, protocol violations after the handshake,
 * 1000 idle connections, connections closed mid-packet, garbage on a peer's p2p listener.
 * Each gets a closed connection and a log line; the master's RSS stays bounded; the peers'
 * votes keep working with exact world sizes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define T 30000
#define IDLE 1000

static h_proc_t m, p[3];
static char line[256];

static void send_all(int fd, const void *b, size_t n) {
    ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
    (void) k;
}

static size_t frame(uint8_t *out, uint32_t len, uint16_t type) {
    out[0] = (uint8_t) (len >> 24);
    out[1] = (uint8_t) (len >> 16);
    out[2] = (uint8_t) (len >> 8);
    out[3] = (uint8_t) len;
    out[4] = (uint8_t) (type >> 8);
    out[5] = (uint8_t) type;
    return 6;
}

#define PROTO 12 /* CCOIP_PROTOCOL_VERSION, written out: the test speaks raw bytes */
/* A JOIN's body: group, 3 ports, advertised (0), an IPv4 address (family byte 4, 4 bytes), port,
 * the peer's own IPv4 address. */
#define JOIN_LEN 23
#define JOIN_FAMILY 11
#define JOIN_OWN_FAMILY 18
/* A HELLO without a secret: magic, version, role, uuid, flags 0, nonce. */
#define HELLO_LEN 56
#define ACK_LEN (6 + 88)
static size_t hello(uint8_t *out, uint16_t version, uint8_t role) {
    size_t n = frame(out, HELLO_LEN, 0x0001);
    memcpy(out + n, "CCOP", 4);
    out[n + 4] = (uint8_t) (version >> 8);
    out[n + 5] = (uint8_t) version;
    out[n + 6] = role;
    memset(out + n + 7, 0xab, 16);
    out[n + 23] = 0;
    memset(out + n + 24, 0xcd, 32);
    return n + HELLO_LEN;
}

/* Sends bytes on a fresh connection and expects the other side to close it. */
static void expect_closed(int port, const void *bytes, size_t n, bool close_write, const char *what) {
    int fd = h_tcp_connect(port);
    REQUIRE(fd >= 0);
    send_all(fd, bytes, n);
    if (close_write) shutdown(fd, SHUT_WR);
    int closed = h_await_close(fd, 10000, NULL, NULL);
    if (!closed) fprintf(stderr, "garbage_test: %s: connection not closed\n", what);
    CHECK(closed);
    close(fd);
}

/* The run goes on: a vote among the three succeeds and the world is still 3. */
static void run_goes_on(const char *after) {
    for (int i = 0; i < 3; i++) REQUIRE(h_send(&p[i], "update"));
    for (int i = 0; i < 3; i++) {
        bool got = h_read_line(&p[i], line, sizeof line, T);
        CHECK(got && strcmp(line, "update 0") == 0);
        if (!got || strcmp(line, "update 0") != 0) fprintf(stderr, "after %s: peer %d: %s\n", after, i, got ? line : "timeout");
    }
    int g = -1;
    if (h_call(&p[1], "attrs", line, sizeof line, T) == 0) sscanf(line, "attrs %*d %d", &g);
    CHECK_EQ_U64(g, 3);
}

static bool log_has(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return false;
    char buf[2048];
    bool found = false;
    while (!found && fgets(buf, sizeof buf, f) != NULL) found = strstr(buf, needle) != NULL;
    fclose(f);
    return found;
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(240);
    h_raise_fd_limit();
    char log_path[512];
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(log_path, sizeof log_path, "%s/master.log", tmp != NULL ? tmp : "/tmp");
    h_stderr_path = log_path;
    const char *opts[] = {"--handshake-timeout-ms", "2000", "--log-level", "info", NULL};
    int port = h_start_master(&m, argv[1], opts);
    REQUIRE(port > 0);
    int p2p_port = 0;
    for (int i = 0; i < 3; i++) {
        REQUIRE(h_start_peer(&p[i], argv[2], port, 0));
        REQUIRE(h_send(&p[i], "connect"));
        REQUIRE(h_admit_reply(p, i, &p[i], line, sizeof line));
        REQUIRE(sscanf(line, "connect 0 %d", &p2p_port) == 1);
    }
    run_goes_on("start");
    long rss0 = h_rss_kb(m.pid);

    uint8_t b[256];
    const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    expect_closed(port, junk, sizeof junk - 1, false, "raw garbage");
    size_t n = frame(b, 0xffffffffu, 0x0001);
    expect_closed(port, b, n, false, "4 GiB length");
    n = frame(b, 16u << 20, 0x0101);
    expect_closed(port, b, n, false, "16 MiB before the handshake");
    n = frame(b, 0, 0x7e57);
    expect_closed(port, b, n, false, "unknown type");
    n = frame(b, 0, 0x0000);
    expect_closed(port, b, n, false, "type 0");
    n = hello(b, PROTO, 1);
    expect_closed(port, b, 12, true, "truncated HELLO, then close");
    expect_closed(port, b, 3, true, "truncated header, then close");
    expect_closed(port, b, 12, false, "truncated HELLO, then silence");
    n = frame(b, 5, 0x0001);
    memcpy(b + n, "hello", 5);
    expect_closed(port, b, n + 5, false, "short HELLO payload");
    n = hello(b, PROTO, 9);
    expect_closed(port, b, n, false, "bad role value");
    n = hello(b, PROTO, 2);
    expect_closed(port, b, n, false, "p2p role at the master");
    run_goes_on("framing garbage");

    /* Wrong version: a HELLO_ACK saying BAD_VERSION, then the close. */
    n = hello(b, 77, 1);
    int fd = h_tcp_connect(port);
    REQUIRE(fd >= 0);
    send_all(fd, b, n);
    unsigned char ack[128];
    size_t ackn = sizeof ack;
    CHECK(h_await_close(fd, 10000, ack, &ackn) == 1);
    CHECK(ackn == ACK_LEN && ack[5] == 0x02 && ack[12] == 2);
    close(fd);

    /* Valid handshake, then nonsense: a JOIN with port 0, a vote before being accepted, a
     * second HELLO, a master-to-peer packet. */
    const uint16_t after_hello[] = {0x0101, 0x0102, 0x0001, 0x0203};
    for (int i = 0; i < 4; i++) {
        n = hello(b, PROTO, 1);
        size_t k = frame(b + n, after_hello[i] == 0x0101 ? JOIN_LEN : after_hello[i] == 0x0001 ? HELLO_LEN : 0, after_hello[i]);
        size_t extra = after_hello[i] == 0x0101 ? JOIN_LEN : after_hello[i] == 0x0001 ? HELLO_LEN : 0;
        memset(b + n + k, 0, extra);
        if (after_hello[i] == 0x0101) b[n + k + JOIN_FAMILY] = b[n + k + JOIN_OWN_FAMILY] = 4;
        if (after_hello[i] == 0x0001) memcpy(b + n + k, b + 6, HELLO_LEN);
        if (after_hello[i] == 0x0203) { /* a TOPOLOGY_RESULT with a body */
            frame(b + n, 25, 0x0203);
            extra = 25;
            memset(b + n + k, 0, extra);
        }
        expect_closed(port, b, n + k + extra, false, "nonsense after the handshake");
    }
    /* A registered (not yet accepted) peer that votes. */
    n = hello(b, PROTO, 1);
    n += frame(b + n, JOIN_LEN, 0x0101);
    memset(b + n, 0, JOIN_LEN);
    b[n + 4] = 0xbc; /* p2p port 48128: never connected to, the peer is dropped first */
    b[n + 5] = 0x00;
    b[n + JOIN_FAMILY] = b[n + JOIN_OWN_FAMILY] = 4;
    n += JOIN_LEN;
    n += frame(b + n, 0, 0x0102);
    expect_closed(port, b, n, false, "vote before acceptance");
    run_goes_on("protocol violations");

    /* 1000 connections that say nothing: the master closes each after its handshake timeout. */
    static int idle[IDLE];
    int opened = 0;
    for (int i = 0; i < IDLE; i++) {
        idle[i] = h_tcp_connect(port);
        if (idle[i] >= 0) opened++;
    }
    CHECK_EQ_U64(opened, IDLE);
    run_goes_on("1000 idle connections opened");
    long rss_idle = h_rss_kb(m.pid);
    int closed = 0;
    for (int i = 0; i < IDLE; i++) {
        if (idle[i] < 0) continue;
        closed += h_await_close(idle[i], 15000, NULL, NULL);
        close(idle[i]);
    }
    CHECK_EQ_U64(closed, IDLE);
    run_goes_on("1000 idle connections");

    /* Garbage on a peer's p2p listener: refused; the peer carries on. */
    expect_closed(p2p_port, junk, sizeof junk - 1, false, "garbage on p2p");
    n = frame(b, 0xffffffffu, 0x0001);
    expect_closed(p2p_port, b, n, false, "4 GiB on p2p");
    n = hello(b, PROTO, 2); /* role p2p, a UUID the master never announced */
    fd = h_tcp_connect(p2p_port);
    REQUIRE(fd >= 0);
    send_all(fd, b, n);
    ackn = sizeof ack;
    CHECK(h_await_close(fd, 10000, ack, &ackn) == 1);
    CHECK(ackn == ACK_LEN && ack[12] == 4); /* UNKNOWN_PEER */
    close(fd);
    run_goes_on("p2p garbage");

    long rss1 = h_rss_kb(m.pid);
    fprintf(stderr, "garbage_test: master RSS %ld KiB at start, %ld with 1000 idle, %ld at end\n", rss0, rss_idle, rss1);
    CHECK(rss0 > 0 && rss_idle - rss0 < 32 * 1024 && rss1 - rss0 < 16 * 1024);

    for (int i = 0; i < 3; i++) {
        h_send(&p[i], "quit");
        CHECK_EQ_U64(h_wait(&p[i], T), 0);
    }
    h_kill(&m, 15);
    CHECK_EQ_U64(h_wait(&m, T), 0);
    static const char *const expected[] = {"over the limit", "unknown packet type", "middle of a packet",
                                           "protocol version", "no handshake in time", "malformed HELLO",
                                           "not peer-to-master", "protocol violation", "JOIN without a p2p port",
                                           "expected JOIN after HELLO"};
    for (size_t i = 0; i < sizeof expected / sizeof *expected; i++) {
        bool has = log_has(log_path, expected[i]);
        if (!has) fprintf(stderr, "garbage_test: master log lacks '%s'\n", expected[i]);
        CHECK(has);
    }
    FILE *f = fopen(log_path, "r");
    if (f != NULL) { /* the master's log into the test log */
        char buf[1024];
        while (fgets(buf, sizeof buf, f) != NULL) fputs(buf, stderr);
        fclose(f);
    }
    return check_exit();
}
