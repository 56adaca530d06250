/* encrypt_test: PCCL_ENCRYPT end to end. A master with --encrypt and 3 peers with PCCL_ENCRYPT=1
 * all-reduce exactly (the p2p data links sealed, ccoip_datalink.h), also after a topology round
 * and with a shared-state sync between; a peer that does not encrypt is refused by that master,
 * a peer that encrypts is refused by a master that does not, and PCCL_ENCRYPT without a secret is
 * a usage error; each refusal is logged on both sides. Peer 0 talks to the master through a
 * proxy that records the bytes: after the handshake (HELLO, AUTH up; HELLO_ACK, AUTH_RESULT
 * down) both directions are sealed records (ccoip_chan.h), no plain JOIN or JOIN_RESPONSE. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sec_util.h"
#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define NPEERS 3
#define COUNT 300000

static const char *peer_bin;
static char dir[200];
static h_proc_t peers[NPEERS];

static bool spawn(h_proc_t *p, int port, const char *secret_file, bool encrypt, const char *log) {
    if (secret_file) setenv("PCCL_SECRET_FILE", secret_file, 1);
    else unsetenv("PCCL_SECRET_FILE");
    if (encrypt) setenv("PCCL_ENCRYPT", "1", 1);
    else unsetenv("PCCL_ENCRYPT");
    h_stderr_path = log;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    char *argv[] = {(char *) peer_bin, ps, NULL};
    bool ok = h_spawn(p, argv);
    unsetenv("PCCL_SECRET_FILE");
    unsetenv("PCCL_ENCRYPT");
    return ok;
}

static void refused(int port, const char *file, bool encrypt, const char *name, int want, const char *why) {
    h_proc_t s;
    char log[256], line[256], w[32];
    snprintf(log, sizeof log, "%s/%s.log", dir, name);
    REQUIRE(spawn(&s, port, file, encrypt, log));
    snprintf(w, sizeof w, "connect %d ", want);
    bool got = h_send(&s, "connect") && h_read_line(&s, line, sizeof line, 15000);
    if (!got || strncmp(line, w, strlen(w)) != 0) fprintf(stderr, "encrypt_test: %s: '%s'\n", name, got ? line : "-");
    CHECK(got && strncmp(line, w, strlen(w)) == 0);
    h_send(&s, "quit");
    CHECK(h_wait(&s, 10000) == 0);
    if (!su_file_has(log, why)) fprintf(stderr, "encrypt_test: %s: its log lacks '%s'\n", name, why);
    CHECK(su_file_has(log, why));
}

static bool expect_all(const char *prefix, int timeout_ms) {
    char line[256];
    bool ok = true;
    for (int i = 0; i < NPEERS; i++) {
        bool got = h_read_line(&peers[i], line, sizeof line, timeout_ms);
        if (!got || strncmp(line, prefix, strlen(prefix)) != 0)
            fprintf(stderr, "encrypt_test: peer %d: '%s' (want '%s')\n", i, got ? line : "-", prefix);
        ok = got && strncmp(line, prefix, strlen(prefix)) == 0 && ok;
    }
    return ok;
}

static uint32_t be32(const uint8_t *b) { return (uint32_t) b[0] << 24 | (uint32_t) b[1] << 16 | (uint32_t) b[2] << 8 | b[3]; }

/* The recorded bytes of one direction: `frames` plain frames (the handshake), then only sealed
 * records, the first of them not the plain frame of `plain_type`. True when they are so. */
static bool sealed_after(const uint8_t *b, size_t n, int frames, uint16_t plain_type) {
    size_t off = 0;
    for (int i = 0; i < frames; i++) {
        if (n - off < 6) return false;
        off += 6 + be32(b + off);
    }
    if (n - off < 6 || (uint16_t) (b[off + 4] << 8 | b[off + 5]) == plain_type) return false;
    int records = 0;
    while (n - off >= 4) {
        uint32_t len = be32(b + off);
        if (len < 6 || len > (1u << 24)) return false;
        off += 4 + len + 16; /* the last may run past what was recorded */
        records++;
    }
    return records > 0;
}

static void check_sealed_wire(su_proxy_t *proxy) {
    static uint8_t up[4096], down[4096];
    size_t nup = su_proxy_copy(proxy, true, up, sizeof up), ndown = su_proxy_copy(proxy, false, down, sizeof down);
    bool ok_up = sealed_after(up, nup, 2, CCOIP_PKT_C2M_JOIN), ok_down = sealed_after(down, ndown, 2, CCOIP_PKT_M2C_JOIN_RESPONSE);
    if (!ok_up || !ok_down) fprintf(stderr, "encrypt_test: master link not sealed after the handshake (up %d, down %d; %zu / %zu bytes)\n", ok_up, ok_down, nup, ndown);
    CHECK(ok_up && ok_down);
}

static void allreduce_exact(void) {
    char cmd[64];
    for (int i = 0; i < NPEERS; i++) {
        snprintf(cmd, sizeof cmd, "ar %d %d %d", COUNT, i, NPEERS);
        h_send(&peers[i], cmd);
    }
    CHECK(expect_all("ar 0 0", 60000));
}

int main(int argc, char **argv) {
    REQUIRE(argc >= 3);
    peer_bin = argv[2];
    h_init(240);
    setenv("PCCL_LOG_LEVEL", "info", 1); /* the peers say which AEAD they use */
    snprintf(dir, sizeof dir, "%s/encrypt_test.XXXXXX", getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp");
    REQUIRE(mkdtemp(dir) != NULL);
    char file[256], mlog[256], plog[256], line[256];
    snprintf(file, sizeof file, "%s/run.secret", dir);
    snprintf(mlog, sizeof mlog, "%s/master.log", dir);
    REQUIRE(su_write_file(file, "encryption test secret, long enough", 0600));

    /* --encrypt without a secret: the master will not start. */
    h_proc_t bad;
    const char *bargs[] = {"--encrypt", NULL};
    CHECK(h_start_master(&bad, argv[1], bargs) == 0);
    CHECK(h_wait(&bad, 10000) == 2);

    h_proc_t m;
    h_stderr_path = mlog;
    const char *margs[] = {"--secret-file", file, "--encrypt", NULL};
    int port = h_start_master(&m, argv[1], margs);
    REQUIRE(port > 0);
    su_proxy_t proxy; /* peer 0's master link, recorded */
    int proxy_port = su_proxy_start(&proxy, port);
    REQUIRE(proxy_port > 0);
    for (int i = 0; i < NPEERS; i++) {
        snprintf(plog, sizeof plog, "%s/peer%d.log", dir, i);
        if (i == 0) setenv("PCCL_PUNCH", "0", 1); /* its one connection to the master is the proxy's */
        REQUIRE(spawn(&peers[i], i == 0 ? proxy_port : port, file, true, plog));
        unsetenv("PCCL_PUNCH");
        REQUIRE(h_send(&peers[i], "connect"));
        bool in = i == 0 && h_read_line(&peers[i], line, sizeof line, 30000);
        for (int attempt = 0; !in && attempt < 100; attempt++) {
            if (!h_update_all(peers, i)) continue;
            in = h_read_line(&peers[i], line, sizeof line, attempt < 10 ? 100 : 1000);
        }
        REQUIRE(in && strncmp(line, "connect 0 ", 10) == 0);
    }
    allreduce_exact();
    refused(port, file, false, "plain_peer", 6, "it encrypts and we do not");
    refused(port, NULL, true, "no_secret", 3, "PCCL_ENCRYPT needs a run secret");
    /* A sync (the fetch's handshake agrees on encryption), a new round of links, and again. */
    char cmd[64];
    for (int i = 0; i < NPEERS; i++) {
        snprintf(cmd, sizeof cmd, "ss %d", i == 2 ? 9 : 7);
        h_send(&peers[i], cmd);
    }
    CHECK(expect_all("ss 0 0 7", 60000));
    CHECK(h_update_all(peers, NPEERS));
    allreduce_exact();
    check_sealed_wire(&proxy);
    for (int i = 0; i < NPEERS; i++) {
        h_send(&peers[i], "quit");
        CHECK(h_wait(&peers[i], 20000) == 0);
    }
    snprintf(plog, sizeof plog, "%s/peer0.log", dir);
    CHECK(su_file_has(plog, "p2p data links encrypted with"));
    h_kill(&m, SIGTERM);
    CHECK(h_wait(&m, 10000) == 0);
    CHECK(su_file_has(mlog, "it does not encrypt and this run does"));

    /* A master that does not encrypt refuses a peer that does. */
    h_proc_t o;
    char olog[256];
    snprintf(olog, sizeof olog, "%s/plain_master.log", dir);
    h_stderr_path = olog;
    const char *oargs[] = {"--secret-file", file, NULL};
    int oport = h_start_master(&o, argv[1], oargs);
    REQUIRE(oport > 0);
    refused(oport, file, true, "enc_peer", 6, "it does not encrypt and we do");
    h_kill(&o, SIGTERM);
    CHECK(h_wait(&o, 10000) == 0);
    CHECK(su_file_has(olog, "it encrypts (PCCL_ENCRYPT) and this run does not"));
    return check_exit();
}
