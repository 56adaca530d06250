/* aead_handshake_test: the AEAD agreed on in the handshake (protocol 8), over a real socket pair,
 * each side a process of its own with its own PCCL_AEAD (the offer is read from the environment
 * at each handshake): different offers that overlap agree on the best common AEAD, and both
 * sides' sessions name it; offers that share none are refused on both sides with
 * CCOIP_HELLO_ENCRYPTION; the acceptor names the connector's offer, not its own preference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ccoip/net/ccoip_conn.h"
#include "ccoip/net/ccoip_socket.h"
#include "ccoip/wire/ccoip_auth.h"
#include "tests/common/check.h"

static ccoip_auth_key_t key;

/* The acceptor, in a child: its exit status is 100 + the session's cipher when it accepted, or 1
 * when it refused at read_hello (with status ENCRYPTION sent), 2 on anything else. */
static int acceptor(int fd, const char *aead) {
    if (aead) setenv("PCCL_AEAD", aead, 1);
    else unsetenv("PCCL_AEAD");
    ccoip_hello_t h;
    char why[256] = "";
    int64_t deadline = ccoip_now_ms() + 10000;
    if (!ccoip_conn_read_hello(fd, CCOIP_ROLE_P2P, &key, true, deadline, &h, why, sizeof why))
        return strstr(why, "offers no AEAD") ? 1 : 2;
    ccoip_session_t sess;
    memset(&sess, 0, sizeof sess);
    if (!ccoip_conn_accept_hello(fd, &h, &key, &sess, deadline, why, sizeof why) || !sess.encrypt) return 2;
    return 100 + sess.cipher;
}

/* One handshake: the connector offers `conn`, the acceptor `acc` (NULL: all). Returns the
 * connector's session cipher (-1 refused with ENCRYPTION, -2 otherwise) and the acceptor's code. */
static int handshake(const char *conn, const char *acc, int *acc_code) {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        _exit(acceptor(sv[1], acc));
    }
    close(sv[1]);
    if (conn) setenv("PCCL_AEAD", conn, 1);
    else unsetenv("PCCL_AEAD");
    ccoip_session_t sess;
    memset(&sess, 0, sizeof sess);
    sess.encrypt = true;
    ccoip_hello_ack_t ack;
    ccoip_uuid_t me = {{1, 2, 3}};
    ccoip_status_t st = ccoip_conn_hello(sv[0], CCOIP_ROLE_P2P, &me, &key, &sess, ccoip_now_ms() + 10000, "the test's acceptor", &ack);
    int mine = st == CCOIP_OK ? sess.cipher : (ack.status == CCOIP_HELLO_ENCRYPTION ? -1 : -2);
    close(sv[0]);
    int ws = 0;
    waitpid(pid, &ws, 0);
    *acc_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : -3;
    unsetenv("PCCL_AEAD");
    return mine;
}

int main(void) {
    REQUIRE(ccoip_auth_init());
    ccoip_auth_derive("aead handshake test secret", 26, &key);
    int acc;
    bool aes = ccoip_aead_aes_fast();
    /* Everything on both sides: the first of the order each offers (OCB with AES-NI). */
    int best = aes ? CCOIP_AEAD_AES256_OCB : CCOIP_AEAD_CHACHA20_POLY1305;
    CHECK(handshake(NULL, NULL, &acc) == best && acc == 100 + best);
    /* One side narrowed: both agree on what it offers, whichever side it is. */
    const char *names[] = {"chacha20-poly1305", "aes-256-gcm", "aes-256-ocb"};
    for (int c = 0; c < 3; c++) {
        int want = c + 1;
        CHECK(handshake(names[c], NULL, &acc) == want && acc == 100 + want);
        CHECK(handshake(NULL, names[c], &acc) == want && acc == 100 + want);
        CHECK(handshake(names[c], names[c], &acc) == want && acc == 100 + want);
    }
    /* Disjoint offers: refused on both sides, no keys. */
    int mine = handshake("aes-256-gcm", "aes-256-ocb", &acc);
    CHECK(mine == -1 && acc == 1);
    mine = handshake("chacha20-poly1305", "aes-256-gcm", &acc);
    CHECK(mine == -1 && acc == 1);
    (void) aes;
    return check_exit();
}
