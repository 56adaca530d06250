/* secret_test: a run with a secret, end to end with the real pccl-master and sec_peer processes.
 * Members join and all-reduce exactly; strangers (no secret, a wrong secret, a hand-made client
 * with a wrong MAC, a replay of a real peer's handshake, an impostor master replaying the real
 * master's answer, an old protocol version) are refused with clear errors on both sides and on
 * every listener (master, p2p, shared state, benchmark); the run goes on exact meanwhile. Also:
 * secret files others may read are refused, and the status page beyond loopback needs the token. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include "sec_util.h"
#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define NPEERS 3
#define COUNT 100000
static const char SECRET_A[] = "correct horse battery staple 0123456789";
static const char SECRET_B[] = "a different secret, also long enough";

static const char *master_bin, *peer_bin;
static char dir[200], file_a[256], file_b[256], file_open[256], file_short[256];

typedef struct peer_t {
    h_proc_t p;
    int p2p, ss, bench;
    ccoip_uuid_t uuid;
    char log[256];
} peer_t;

static peer_t peers[NPEERS];

/* Starts sec_peer with PCCL_SECRET_FILE = file (NULL: unset), stderr to a log file. */
static void spawn_peer(peer_t *q, int port, const char *file, const char *name) {
    if (file != NULL) setenv("PCCL_SECRET_FILE", file, 1);
    else unsetenv("PCCL_SECRET_FILE");
    snprintf(q->log, sizeof q->log, "%s/%s.log", dir, name);
    h_stderr_path = q->log;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    char *argv[] = {(char *) peer_bin, ps, NULL};
    REQUIRE(h_spawn(&q->p, argv));
    unsetenv("PCCL_SECRET_FILE");
}

static bool parse_connect(peer_t *q, const char *line) {
    char uuid[40];
    int r;
    if (sscanf(line, "connect %d %d %d %d %39s", &r, &q->p2p, &q->ss, &q->bench, uuid) != 5 || r != 0) return false;
    return su_parse_uuid(uuid, &q->uuid);
}

/* h_admit that keeps the connect line (ports and UUID). */
static bool admit(int n, peer_t *q) {
    h_proc_t ps[NPEERS];
    for (int i = 0; i < n; i++) ps[i] = peers[i].p;
    char line[256];
    bool in = n == 0 && h_read_line(&q->p, line, sizeof line, 30000);
    for (int attempt = 0; !in && attempt < 100; attempt++) {
        if (!h_update_all(ps, n)) continue;
        in = h_read_line(&q->p, line, sizeof line, attempt < 10 ? 100 : 1000);
    }
    for (int i = 0; i < n; i++) peers[i].p = ps[i]; /* line buffers moved with the copies */
    if (!in || !parse_connect(q, line)) {
        fprintf(stderr, "secret_test: newcomer answered '%s'\n", in ? line : "(nothing)");
        return false;
    }
    return true;
}

/* Every member all-reduces; each result must be exact. */
static void allreduce_exact(const char *when) {
    char cmd[64], line[256];
    for (int i = 0; i < NPEERS; i++) {
        snprintf(cmd, sizeof cmd, "ar %d %d %d", COUNT, i, NPEERS);
        REQUIRE(h_send(&peers[i].p, cmd));
    }
    for (int i = 0; i < NPEERS; i++) {
        bool got = h_read_line(&peers[i].p, line, sizeof line, 60000);
        if (!got || strcmp(line, "ar 0 0") != 0) fprintf(stderr, "secret_test: %s: peer %d: '%s'\n", when, i, got ? line : "-");
        CHECK(got && strcmp(line, "ar 0 0") == 0);
    }
}

/* A peer process that must fail pcclConnect with pcclMasterConnectionFailed (6), quickly, and
 * log `why`. */
static void stranger_refused(int port, const char *file, const char *secret_text, const char *name, const char *why) {
    peer_t s;
    memset(&s, 0, sizeof s);
    spawn_peer(&s, port, file, name);
    char line[256], cmd[128];
    if (secret_text != NULL) {
        snprintf(cmd, sizeof cmd, "secret %s", secret_text);
        CHECK(h_call(&s.p, cmd, line, sizeof line, 10000) == 0);
    }
    CHECK(h_send(&s.p, "connect"));
    bool got = h_read_line(&s.p, line, sizeof line, 15000);
    if (!got || strncmp(line, "connect 6 ", 10) != 0) fprintf(stderr, "secret_test: %s: '%s'\n", name, got ? line : "-");
    CHECK(got && strncmp(line, "connect 6 ", 10) == 0);
    h_send(&s.p, "quit");
    CHECK(h_wait(&s.p, 10000) == 0);
    if (!su_file_has(s.log, why)) fprintf(stderr, "secret_test: %s: its log lacks '%s'\n", name, why);
    CHECK(su_file_has(s.log, why));
}

static int listen_local(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000001);
    socklen_t len = sizeof a;
    REQUIRE(bind(fd, (struct sockaddr *) &a, sizeof a) == 0 && listen(fd, 4) == 0);
    REQUIRE(getsockname(fd, (struct sockaddr *) &a, &len) == 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* GET /metrics on 127.0.0.1:port with an optional token; the status code, or -1. */
static int http_get(int port, const char *token) {
    int fd = h_tcp_connect(port);
    if (fd < 0) return -1;
    char req[256];
    if (token != NULL) snprintf(req, sizeof req, "GET /metrics HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n", token);
    else snprintf(req, sizeof req, "GET /metrics HTTP/1.0\r\n\r\n");
    su_send_bytes(fd, req, strlen(req));
    unsigned char buf[64];
    size_t n = sizeof buf - 1;
    int closed = h_await_close(fd, 10000, buf, &n);
    close(fd);
    buf[n] = '\0';
    int code = -1;
    if (closed) sscanf((char *) buf, "HTTP/1.0 %d", &code);
    return code;
}

static int start_master_expect_fail(const char *const *extra, const char *name, const char *why) {
    h_proc_t m;
    char log[256];
    snprintf(log, sizeof log, "%s/%s.log", dir, name);
    h_stderr_path = log;
    int port = h_start_master(&m, master_bin, extra);
    CHECK(port == 0);
    CHECK(h_wait(&m, 10000) == 1);
    if (!su_file_has(log, why)) fprintf(stderr, "secret_test: %s: its log lacks '%s'\n", name, why);
    CHECK(su_file_has(log, why));
    return port;
}

int main(int argc, char **argv) {
    REQUIRE(argc >= 3);
    master_bin = argv[1];
    peer_bin = argv[2];
    h_init(300);
    REQUIRE(ccoip_auth_init());
    snprintf(dir, sizeof dir, "%s/secret_test.XXXXXX", getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp");
    REQUIRE(mkdtemp(dir) != NULL);
    snprintf(file_a, sizeof file_a, "%s/a.secret", dir);
    snprintf(file_b, sizeof file_b, "%s/b.secret", dir);
    snprintf(file_open, sizeof file_open, "%s/open.secret", dir);
    snprintf(file_short, sizeof file_short, "%s/short.secret", dir);
    char text_a[128];
    snprintf(text_a, sizeof text_a, "%s\n", SECRET_A); /* the trailing newline is dropped */
    REQUIRE(su_write_file(file_a, text_a, 0600));
    REQUIRE(su_write_file(file_b, SECRET_B, 0400));
    REQUIRE(su_write_file(file_open, SECRET_A, 0644));
    REQUIRE(su_write_file(file_short, "tooshort", 0600));
    ccoip_auth_key_t key_a;
    ccoip_auth_derive(SECRET_A, strlen(SECRET_A), &key_a);

    /* Secret files: readable by others, or too short, and the master will not start. */
    const char *open_args[] = {"--secret-file", file_open, NULL};
    start_master_expect_fail(open_args, "master_open_file", "accessible by group or others (mode 644)");
    const char *short_args[] = {"--secret-file", file_short, NULL};
    start_master_expect_fail(short_args, "master_short_file", "at least 16 needed");
    /* The status page beyond loopback without a secret: refused. */
    const char *status_args[] = {"--status", "0.0.0.0:0", NULL};
    start_master_expect_fail(status_args, "master_status_open", "listens beyond loopback only with a run secret");

    /* The run: a master with secret A and its status page on every address. */
    h_proc_t m;
    char mlog[256];
    snprintf(mlog, sizeof mlog, "%s/master.log", dir);
    h_stderr_path = mlog;
    const char *margs[] = {"--secret-file", file_a, "--status", "0.0.0.0:0", NULL};
    int port = h_start_master(&m, master_bin, margs);
    REQUIRE(port > 0);
    char line[512];
    REQUIRE(h_read_line(&m, line, sizeof line, 10000));
    const char *colon = strrchr(line, ':');
    int status_port = colon ? atoi(colon + 1) : 0;
    REQUIRE(status_port > 0);

    /* Peer 0 through a proxy that records its handshake; peer 2 takes the secret by pcclSetSecret. */
    su_proxy_t proxy;
    int proxy_port = su_proxy_start(&proxy, port);
    REQUIRE(proxy_port > 0);
    spawn_peer(&peers[0], proxy_port, file_a, "peer0");
    spawn_peer(&peers[1], port, file_a, "peer1");
    spawn_peer(&peers[2], port, NULL, "peer2");
    REQUIRE(h_call(&peers[2].p, "secret " "correct horse battery staple 0123456789", line, sizeof line, 10000) == 0);
    for (int i = 0; i < NPEERS; i++) {
        REQUIRE(h_send(&peers[i].p, "connect"));
        REQUIRE(admit(i, &peers[i]));
    }
    allreduce_exact("members");

    /* Strangers with the real client: no secret, a wrong secret (file and pcclSetSecret). */
    stranger_refused(port, NULL, NULL, "stranger_none", "requires the run secret and we have none");
    stranger_refused(port, file_b, NULL, "stranger_wrong", "failed to prove our run secret");
    stranger_refused(port, NULL, "a wrong secret given to pcclSetSecret", "stranger_set", "failed to prove our run secret");

    /* Hand-made clients at the master. */
    bool closed;
    CHECK(su_handshake(port, CCOIP_ROLE_PEER_TO_MASTER, NULL, 0, NULL, &closed) == CCOIP_HELLO_SECRET && closed);
    CHECK(su_handshake(port, CCOIP_ROLE_PEER_TO_MASTER, NULL, CCOIP_HELLO_F_SECRET, NULL, &closed) ==
              100 + CCOIP_HELLO_SECRET && closed);
    /* The right key passes (the test's own client is sound), and proves nothing more. */
    CHECK(su_handshake(port, CCOIP_ROLE_PEER_TO_MASTER, NULL, CCOIP_HELLO_F_SECRET, &key_a, &closed) == 100);
    {   /* an old (version 1) peer: a clear version refusal */
        int fd = h_tcp_connect(port);
        REQUIRE(fd >= 0);
        uint8_t v1[6 + 23] = {0, 0, 0, 23, 0, 1, 'C', 'C', 'O', 'P', 0, 1, 1};
        CHECK(su_send_bytes(fd, v1, sizeof v1));
        ccoip_packet_t r;
        CHECK(su_recv(fd, &r, 10000) && r.type == CCOIP_PKT_HELLO_ACK && r.u.hello_ack.status == CCOIP_HELLO_BAD_VERSION &&
              r.u.hello_ack.version == CCOIP_PROTOCOL_VERSION);
        CHECK(h_await_close(fd, 10000, NULL, NULL) == 1);
        close(fd);
    }

    /* Replay: peer 0's recorded HELLO and AUTH on a new connection. The master answers with a
     * fresh nonce, so the recorded MAC is wrong: AUTH_RESULT says refused, then the close. */
    static uint8_t up[4096], down[4096];
    size_t nup = su_proxy_copy(&proxy, true, up, sizeof up), ndown = su_proxy_copy(&proxy, false, down, sizeof down);
    REQUIRE(nup >= 6 + 56 + 6 + 33 && ndown >= 6 + 88);
    {
        int fd = h_tcp_connect(port);
        REQUIRE(fd >= 0);
        CHECK(su_send_bytes(fd, up, 6 + 56 + 6 + 33));
        ccoip_packet_t a, v;
        CHECK(su_recv(fd, &a, 10000) && a.type == CCOIP_PKT_HELLO_ACK && a.u.hello_ack.status == CCOIP_HELLO_OK);
        CHECK(memcmp(a.u.hello_ack.nonce, down + 6 + 24, CCOIP_NONCE_LEN) != 0);
        CHECK(su_recv(fd, &v, 10000) && v.type == CCOIP_PKT_AUTH_RESULT && v.u.auth_result.status == CCOIP_HELLO_SECRET);
        CHECK(h_await_close(fd, 10000, NULL, NULL) == 1);
        close(fd);
    }
    /* An impostor master replaying the real master's HELLO_ACK to a peer with the secret: the
     * peer refuses it and sends no MAC of its own. */
    {
        int fport;
        int lfd = listen_local(&fport);
        peer_t v;
        memset(&v, 0, sizeof v);
        spawn_peer(&v, fport, file_a, "victim");
        REQUIRE(h_send(&v.p, "connect"));
        int fd = accept(lfd, NULL, NULL);
        REQUIRE(fd >= 0);
        ccoip_packet_t h, au;
        CHECK(su_recv(fd, &h, 10000) && h.type == CCOIP_PKT_HELLO && (h.u.hello.flags & CCOIP_HELLO_F_SECRET));
        CHECK(su_send_bytes(fd, down, 6 + 88));
        CHECK(su_recv(fd, &au, 10000) && au.type == CCOIP_PKT_AUTH && au.u.auth.ok == 0);
        static const uint8_t zero[CCOIP_MAC_LEN];
        CHECK(memcmp(au.u.auth.mac, zero, CCOIP_MAC_LEN) == 0);
        CHECK(h_read_line(&v.p, line, sizeof line, 15000) && strncmp(line, "connect 6 ", 10) == 0);
        close(fd);
        close(lfd);
        h_send(&v.p, "quit");
        CHECK(h_wait(&v.p, 10000) == 0);
        CHECK(su_file_has(v.log, "failed to prove our run secret"));
    }

    /* The peers' listeners: p2p, shared state, benchmark of peer 1. */
    const int roles[3] = {CCOIP_ROLE_P2P, CCOIP_ROLE_SHARED_STATE, CCOIP_ROLE_BENCHMARK};
    const int lports[3] = {peers[1].p2p, peers[1].ss, peers[1].bench};
    int claimed_ok = 0;
    for (int r = 0; r < 3; r++) {
        /* No secret: refused before anything else, whatever UUID it claims. */
        CHECK(su_handshake(lports[r], (uint8_t) roles[r], &peers[0].uuid, 0, NULL, &closed) == CCOIP_HELLO_SECRET && closed);
        /* A member's UUID (learned somehow) with a wrong MAC: an announced UUID gets as far as the
         * proof and is refused there; an unannounced one is refused as unknown, and on the
         * shared-state listener between syncs as "not serving", before any proof too. */
        for (int k = 0; k < NPEERS; k++) {
            if (k == 1) continue;
            int res = su_handshake(lports[r], (uint8_t) roles[r], &peers[k].uuid, CCOIP_HELLO_F_SECRET, NULL, &closed);
            bool refused = res == 100 + CCOIP_HELLO_SECRET || res == CCOIP_HELLO_UNKNOWN_PEER ||
                           (roles[r] == CCOIP_ROLE_SHARED_STATE && res == CCOIP_HELLO_NOT_SERVING);
            CHECK(refused && closed);
            claimed_ok += res == 100 + CCOIP_HELLO_SECRET;
        }
    }
    CHECK(claimed_ok >= 1); /* peer 1's ring neighbour on its p2p listener */
    CHECK(su_file_has(peers[1].log, "refused p2p connection from 127.0.0.1"));
    CHECK(su_file_has(peers[1].log, "wrong run secret"));

    /* The run goes on: exact all-reduces, a topology round (new authenticated links), a
     * shared-state sync where peer 2 fetches the popular content over an authenticated
     * connection, a topology optimisation (benchmark connections), and an all-reduce again. */
    allreduce_exact("after the strangers");
    h_proc_t ps[NPEERS];
    for (int i = 0; i < NPEERS; i++) ps[i] = peers[i].p;
    CHECK(h_update_all(ps, NPEERS));
    for (int i = 0; i < NPEERS; i++) peers[i].p = ps[i];
    for (int i = 0; i < NPEERS; i++) REQUIRE(h_send(&peers[i].p, i == 2 ? "ss 9" : "ss 7"));
    for (int i = 0; i < NPEERS; i++) {
        bool got = h_read_line(&peers[i].p, line, sizeof line, 60000);
        const char *want = i == 2 ? "ss 0 0 7 262144" : "ss 0 0 7 0";
        if (!got || strcmp(line, want) != 0) fprintf(stderr, "secret_test: sync: peer %d: '%s'\n", i, got ? line : "-");
        CHECK(got && strcmp(line, want) == 0);
    }
    for (int i = 0; i < NPEERS; i++) REQUIRE(h_send(&peers[i].p, "opt"));
    for (int i = 0; i < NPEERS; i++) {
        bool got = h_read_line(&peers[i].p, line, sizeof line, 120000);
        if (!got || strcmp(line, "opt 0") != 0) fprintf(stderr, "secret_test: opt: peer %d: '%s'\n", i, got ? line : "-");
        CHECK(got && strcmp(line, "opt 0") == 0);
    }
    allreduce_exact("at the end");

    /* The status page: the token, and nothing without it. */
    CHECK(http_get(status_port, NULL) == 401);
    CHECK(http_get(status_port, "0000000000000000000000000000000000000000000000000000000000000000") == 401);
    char token[65];
    ccoip_auth_status_token(&key_a, token);
    CHECK(http_get(status_port, token) == 200);
    {   /* pccl-master --print-status-token prints the same token */
        h_proc_t t;
        char *targv[] = {(char *) master_bin, "--secret-file", file_a, "--print-status-token", NULL};
        REQUIRE(h_spawn(&t, targv));
        CHECK(h_read_line(&t, line, sizeof line, 10000) && strcmp(line, token) == 0);
        CHECK(h_wait(&t, 10000) == 0);
    }

    for (int i = 0; i < NPEERS; i++) {
        h_send(&peers[i].p, "quit");
        CHECK(h_wait(&peers[i].p, 20000) == 0);
    }
    h_kill(&m, SIGTERM);
    CHECK(h_wait(&m, 10000) == 0);
    /* The master named every refused address and why. */
    CHECK(su_file_has(mlog, "refused 127.0.0.1:"));
    CHECK(su_file_has(mlog, "it has no run secret and this run requires one"));
    CHECK(su_file_has(mlog, "it says our proof failed"));
    CHECK(su_file_has(mlog, "wrong run secret"));
    CHECK(!su_file_has(mlog, "no run secret: anyone"));

    /* An open master and a peer with a secret: refused, and said so on both sides. */
    h_proc_t o;
    char olog[256];
    snprintf(olog, sizeof olog, "%s/open_master.log", dir);
    h_stderr_path = olog;
    int oport = h_start_master(&o, master_bin, NULL);
    REQUIRE(oport > 0);
    stranger_refused(oport, file_a, NULL, "secret_vs_open", "it runs without a secret and we have one");
    h_kill(&o, SIGTERM);
    CHECK(h_wait(&o, 10000) == 0);
    CHECK(su_file_has(olog, "it has a run secret and this run has none"));
    CHECK(su_file_has(olog, "no run secret: anyone who reaches port"));
    return check_exit();
}
