/* Encrypted data links (PCCL_ENCRYPT): rings of real loopback TCP links whose frames are sealed
 * (ccoip_datalink.h), every byte checked, plain and quantized, with large and empty frames; a
 * flipped ciphertext byte, a replayed record, a wrong key and another AEAD each break the link
 * (the receive fails, as on an I/O error) instead of delivering bytes; and the bytes on the wire
 * are not the plaintext. Sums run with the link combining each record as it opens
 * (post_recv_combine) and staged for the ring (PCCL_SHM_COMBINE=0). All of it for every AEAD this
 * build runs (AES-256-OCB, AES-256-GCM,
 * ChaCha20-Poly1305), and the negotiation's rules (ccoip_aead_offer / _choose). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ccoip/net/ccoip_sealed.h"
#include "ccoip/peer/ccoip_datalink.h"
#include "ccoip/wire/ccoip_auth.h"
#include "reduce/reduce.h"
#include "tests/common/check.h"
#include "tests/datalink/tcp_pair.h"

#define N 3

static ccoip_aead_cipher_t cipher; /* the AEAD of this pass */

/* The two ends of one connection: the connector sends with c2a, the acceptor with a2c. */
static void sessions(uint8_t seed, ccoip_session_t *conn, ccoip_session_t *acc) {
    memset(conn, 0, sizeof *conn);
    conn->encrypt = acc->encrypt = true;
    conn->cipher = acc->cipher = (uint8_t) cipher;
    for (int i = 0; i < 32; i++) conn->send[i] = (uint8_t) (seed + i), conn->recv[i] = (uint8_t) (seed * 3 + i + 100);
    memcpy(acc->send, conn->recv, 32);
    memcpy(acc->recv, conn->send, 32);
}

typedef struct peer {
    reduce_ring_params_t params;
    ccoip_datalink_t *tx, *rx;
    int tx_fd, rx_fd;
    _Atomic uint32_t abort_flag, doorbell;
    const float *in;
    float *out;
    size_t count;
    int rc;
    pthread_t th;
} peer_t;

static void *peer_main(void *arg) {
    peer_t *p = arg;
    p->rc = reduce_ring_allreduce(&p->params, p->in, p->out, p->count, pcclFloat, pcclSum, NULL);
    return NULL;
}

/* A ring of N over sealed links: every peer gets the exact sum (small integers in floats), also
 * quantized (uint8 min-max: every peer the same bytes). */
static void sealed_ring(size_t count, bool quantized) {
    peer_t p[N];
    memset(p, 0, sizeof p);
    reduce_cache_t *cache = reduce_cache_create();
    for (int i = 0; i < N; i++) tcp_pair(&p[i].tx_fd, &p[(i + 1) % N].rx_fd);
    for (int i = 0; i < N; i++) {
        ccoip_session_t c, a;
        sessions((uint8_t) (i + 1), &c, &a);
        /* i's tx is the connector of link i; (i+1)'s rx its acceptor. */
        p[i].tx = ccoip_datalink_start(p[i].tx_fd, "sealed tx", &c);
        p[(i + 1) % N].rx = ccoip_datalink_start(p[(i + 1) % N].rx_fd, "sealed rx", &a); /* keys are copied */
    }
    float *in[N], *out[N];
    for (int i = 0; i < N; i++) {
        REQUIRE(p[i].tx && p[i].rx);
        in[i] = malloc(count * sizeof(float) + 1);
        out[i] = malloc(count * sizeof(float) + 1);
        for (size_t k = 0; k < count; k++) in[i][k] = (float) ((k * 7 + (size_t) i * 13) % 1001);
        p[i].params = (reduce_ring_params_t){.rank = (uint32_t) i, .world_size = N, .next = ccoip_datalink_link(p[i].tx),
                                             .prev = ccoip_datalink_link(p[i].rx), .tag = 7, .cache = cache,
                                             .abort_flag = &p[i].abort_flag, .doorbell = &p[i].doorbell,
                                             .send_by_reference = 1};
        if (quantized) p[i].params.quantization = (pcclQuantizationOptions_t){pcclUint8, pcclQuantMinMax};
        p[i].in = in[i];
        p[i].out = out[i];
        p[i].count = count;
    }
    for (int i = 0; i < N; i++) REQUIRE(pthread_create(&p[i].th, NULL, peer_main, &p[i]) == 0);
    for (int i = 0; i < N; i++) pthread_join(p[i].th, NULL);
    size_t bad = 0;
    for (int i = 0; i < N; i++) {
        CHECK(p[i].rc == 0);
        for (size_t k = 0; k < count; k++) {
            float want = 0;
            for (int j = 0; j < N; j++) want += (float) ((k * 7 + (size_t) j * 13) % 1001);
            if (quantized) bad += memcmp(&out[i][k], &out[0][k], sizeof(float)) != 0;
            else bad += out[i][k] != want;
        }
    }
    CHECK_EQ_U64(bad, 0);
    for (int i = 0; i < N; i++) {
        ccoip_datalink_stop(p[i].tx);
        ccoip_datalink_stop(p[i].rx);
        close(p[i].tx_fd);
        close(p[i].rx_fd);
        free(in[i]);
        free(out[i]);
    }
    reduce_cache_destroy(cache);
}

static _Atomic uint32_t bell;

/* Posts one receive of len bytes on a sealed link whose other end the test writes by hand; the
 * request's final state. */
static uint32_t raw_receive(const uint8_t *wire, size_t wire_len, size_t len, const ccoip_session_t *acc,
                            uint8_t *dst) {
    int w, r;
    tcp_pair(&w, &r);
    ccoip_datalink_t *dl = ccoip_datalink_start(r, "raw sealed", acc);
    REQUIRE(dl != NULL);
    reduce_link_t link = ccoip_datalink_link(dl);
    reduce_req_t req;
    memset(&req, 0, sizeof req);
    req.doorbell = &bell;
    REQUIRE(link.ops->post_recv(link.ctx, 9, 0, dst, len, &req) == 0);
    REQUIRE(write(w, wire, wire_len) == (ssize_t) wire_len);
    for (int i = 0; i < 5000 && atomic_load(&req.state) == REDUCE_REQ_PENDING; i++) usleep(1000);
    uint32_t st = atomic_load(&req.state);
    if (st == REDUCE_REQ_FAILED) CHECK(ccoip_datalink_broken(dl));
    close(w);
    ccoip_datalink_stop(dl);
    close(r);
    return st;
}

/* One frame (tag 9, offset 0) of len bytes, sealed as the link does it, into wire. */
static size_t seal_frame(const ccoip_session_t *conn, const uint8_t *m, size_t len, uint8_t *wire) {
    ccoip_aead_t a;
    REQUIRE(ccoip_aead_init(&a, conn->send, (ccoip_aead_cipher_t) conn->cipher));
    uint8_t *h = wire;
    memset(h, 0, CCOIP_DATALINK_HEADER);
    h[7] = 9;
    for (int i = 0; i < 4; i++) h[16 + i] = (uint8_t) (len >> (24 - 8 * i));
    size_t n = CCOIP_DATALINK_HEADER, off = 0;
    do {
        size_t k = len - off < CCOIP_DATALINK_RECORD ? len - off : CCOIP_DATALINK_RECORD;
        ccoip_aead_seal(&a, wire + n, wire + n + k, m + off, k, h, CCOIP_DATALINK_HEADER);
        n += k + CCOIP_AEAD_TAG;
        off += k;
    } while (off < len);
    ccoip_aead_free(&a);
    return n;
}

static void tampering(void) {
    enum { LEN = 200000 };
    uint8_t *m = malloc(LEN), *dst = malloc(LEN), *wire = malloc(LEN + 4096);
    for (size_t i = 0; i < LEN; i++) m[i] = (uint8_t) (i * 31 + 7);
    ccoip_session_t conn, acc, other_c, other_a;
    sessions(5, &conn, &acc);
    sessions(6, &other_c, &other_a);
    size_t n = seal_frame(&conn, m, LEN, wire);
    CHECK_EQ_U64(n, CCOIP_DATALINK_HEADER + LEN + 4 * CCOIP_AEAD_TAG); /* 4 records of 64 KiB at most */
    /* The wire does not carry the plaintext. */
    CHECK(memcmp(wire + CCOIP_DATALINK_HEADER, m, 4096) != 0);
    /* Untouched: delivered exactly. */
    memset(dst, 0, LEN);
    CHECK(raw_receive(wire, n, LEN, &acc, dst) == REDUCE_REQ_DONE);
    CHECK(memcmp(dst, m, LEN) == 0);
    /* One flipped bit in the third record's ciphertext: the receive fails, the link breaks. */
    wire[CCOIP_DATALINK_HEADER + 2 * (CCOIP_DATALINK_RECORD + CCOIP_AEAD_TAG) + 100] ^= 1;
    CHECK(raw_receive(wire, n, LEN, &acc, dst) == REDUCE_REQ_FAILED);
    wire[CCOIP_DATALINK_HEADER + 2 * (CCOIP_DATALINK_RECORD + CCOIP_AEAD_TAG) + 100] ^= 1;
    /* Records swapped (a replay within the stream): the counter nonce refuses them. */
    uint8_t *r0 = wire + CCOIP_DATALINK_HEADER, *r1 = r0 + CCOIP_DATALINK_RECORD + CCOIP_AEAD_TAG;
    uint8_t *tmp = malloc(CCOIP_DATALINK_RECORD + CCOIP_AEAD_TAG);
    memcpy(tmp, r0, CCOIP_DATALINK_RECORD + CCOIP_AEAD_TAG);
    memcpy(r0, r1, CCOIP_DATALINK_RECORD + CCOIP_AEAD_TAG);
    memcpy(r1, tmp, CCOIP_DATALINK_RECORD + CCOIP_AEAD_TAG);
    CHECK(raw_receive(wire, n, LEN, &acc, dst) == REDUCE_REQ_FAILED);
    /* Sealed under another key: refused. */
    n = seal_frame(&other_c, m, LEN, wire);
    CHECK(raw_receive(wire, n, LEN, &acc, dst) == REDUCE_REQ_FAILED);
    /* The same keys under another AEAD: refused. */
    for (int c = CCOIP_AEAD_CHACHA20_POLY1305; c <= CCOIP_AEAD_AES256_OCB; c++) {
        if (c == (int) cipher || !ccoip_aead_supported((ccoip_aead_cipher_t) c)) continue;
        ccoip_session_t x = conn;
        x.cipher = (uint8_t) c;
        n = seal_frame(&x, m, LEN, wire);
        CHECK(raw_receive(wire, n, LEN, &acc, dst) == REDUCE_REQ_FAILED);
    }
    /* No AEAD agreed on (a HELLO_ACK without one): the link does not start. */
    ccoip_session_t none = acc;
    none.cipher = CCOIP_AEAD_NONE;
    int w, r;
    tcp_pair(&w, &r);
    CHECK(ccoip_datalink_start(r, "no aead", &none) == NULL);
    close(w);
    close(r);
    /* A plain (unsealed) frame on a sealed link, padded to the sealed frame's length (the
     * receiver reads records a batch at a time): refused. */
    memset(wire, 0, n);
    n = seal_frame(&conn, m, LEN, wire);
    memcpy(wire + CCOIP_DATALINK_HEADER, m, LEN);
    memset(wire + CCOIP_DATALINK_HEADER + LEN, 0, n - CCOIP_DATALINK_HEADER - LEN);
    CHECK(raw_receive(wire, n, LEN, &acc, dst) == REDUCE_REQ_FAILED);
    free(tmp);
    free(m);
    free(dst);
    free(wire);
}

/* The sealed byte stream of shared-state transfers: 1 MiB + 5 bytes written in odd pieces arrive
 * exactly; one flipped bit on the wire fails the read. */
static void sealed_stream(void) {
    enum { LEN = (1 << 20) + 5 };
    uint8_t *m = malloc(LEN), *back = malloc(LEN), key[32];
    for (size_t i = 0; i < LEN; i++) m[i] = (uint8_t) (i * 13 + 1);
    memset(key, 0x33, sizeof key);
    for (int flip = 0; flip < 2; flip++) {
        int sv[2];
        REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
        int sz = 4 << 20;
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
        setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        ccoip_sealed_t w, r;
        REQUIRE(ccoip_sealed_init(&w, sv[0], key, cipher) && ccoip_sealed_init(&r, sv[1], key, cipher));
        /* write in pieces of 1, 70000 and the rest, through a pipe we can tamper with */
        int pfd[2];
        REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, pfd) == 0);
        setsockopt(pfd[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
        setsockopt(pfd[1], SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        w.fd = pfd[0];
        CHECK(ccoip_sealed_write(&w, m, 1) == CCOIP_OK);
        CHECK(ccoip_sealed_write(&w, m + 1, 70000) == CCOIP_OK);
        ccoip_iov_t iov = {m + 70001, LEN - 70001};
        CHECK(ccoip_sealed_writev(&w, &iov, 1) == CCOIP_OK);
        CHECK(ccoip_sealed_flush(&w) == CCOIP_OK);
        /* move the wire bytes to the reader's socket, flipping one bit in the second record */
        size_t moved = 0;
        uint8_t buf[65536];
        shutdown(pfd[0], SHUT_WR);
        for (;;) {
            ssize_t k = read(pfd[1], buf, sizeof buf);
            if (k <= 0) break;
            for (ssize_t i = 0; i < k; i++)
                if (flip && moved + (size_t) i == 4 + CCOIP_SEALED_RECORD + 16 + 4 + 1000) buf[i] ^= 1;
            CHECK(write(sv[0], buf, (size_t) k) == k);
            moved += (size_t) k;
        }
        CHECK(memcmp(buf, m, 64) != 0 || moved < 64); /* not the plaintext (the last chunk, at least) */
        memset(back, 0, LEN);
        ccoip_status_t st = ccoip_sealed_read(&r, back, LEN, -1);
        if (flip) CHECK(st == CCOIP_ERR_INVALID);
        else CHECK(st == CCOIP_OK && memcmp(back, m, LEN) == 0);
        ccoip_sealed_free(&w);
        ccoip_sealed_free(&r);
        close(sv[0]), close(sv[1]), close(pfd[0]), close(pfd[1]);
    }
    free(m);
    free(back);
}

/* The negotiation: what each side offers, what the acceptor picks, names. */
static void negotiation(void) {
    bool unknown;
    uint8_t all = ccoip_aead_offer(NULL, &unknown);
    CHECK(!unknown && (all & CCOIP_HELLO_F_CHACHA20_POLY1305)); /* ChaCha20-Poly1305 always */
    CHECK(((all & CCOIP_HELLO_F_AES256_GCM) != 0) == ccoip_aead_aes_fast());
    CHECK(((all & CCOIP_HELLO_F_AES256_OCB) != 0) == ccoip_aead_aes_fast()); /* OpenSSL has OCB */
    CHECK(ccoip_aead_offer("", &unknown) == all && !unknown);
    CHECK(ccoip_aead_offer("aes-256-gcm", &unknown) == CCOIP_HELLO_F_AES256_GCM && !unknown);
    CHECK(ccoip_aead_offer("AES-256-OCB", &unknown) == CCOIP_HELLO_F_AES256_OCB && !unknown);
    CHECK(ccoip_aead_offer("chacha20-poly1305", &unknown) == CCOIP_HELLO_F_CHACHA20_POLY1305 && !unknown);
    CHECK(ccoip_aead_offer("rot13", &unknown) == all && unknown);
    /* The acceptor's order: OCB, GCM, ChaCha20-Poly1305, among the bits both offer. */
    uint8_t f_all = CCOIP_HELLO_F_AEADS;
    CHECK(ccoip_aead_choose(f_all, f_all) == CCOIP_AEAD_AES256_OCB);
    CHECK(ccoip_aead_choose(f_all, CCOIP_HELLO_F_AES256_GCM | CCOIP_HELLO_F_CHACHA20_POLY1305) == CCOIP_AEAD_AES256_GCM);
    CHECK(ccoip_aead_choose(CCOIP_HELLO_F_CHACHA20_POLY1305, f_all) == CCOIP_AEAD_CHACHA20_POLY1305);
    CHECK(ccoip_aead_choose(CCOIP_HELLO_F_AES256_OCB, CCOIP_HELLO_F_AES256_GCM) == CCOIP_AEAD_NONE);
    CHECK(ccoip_aead_choose(CCOIP_HELLO_F_SECRET | CCOIP_HELLO_F_ENCRYPT, f_all) == CCOIP_AEAD_NONE);
    /* A HELLO_ACK names one AEAD; none or several is no choice. */
    CHECK(ccoip_aead_of_flags(CCOIP_HELLO_F_SECRET | CCOIP_HELLO_F_AES256_GCM) == CCOIP_AEAD_AES256_GCM);
    CHECK(ccoip_aead_of_flags(CCOIP_HELLO_F_AES256_GCM | CCOIP_HELLO_F_AES256_OCB) == CCOIP_AEAD_NONE);
    CHECK(ccoip_aead_of_flags(CCOIP_HELLO_F_SECRET) == CCOIP_AEAD_NONE);
    for (int c = CCOIP_AEAD_CHACHA20_POLY1305; c <= CCOIP_AEAD_AES256_OCB; c++)
        CHECK(ccoip_aead_of_flags(ccoip_aead_flag((ccoip_aead_cipher_t) c)) == (ccoip_aead_cipher_t) c);
    CHECK(strcmp(ccoip_aead_name(CCOIP_AEAD_AES256_OCB), "AES-256-OCB") == 0);
    ccoip_aead_t a;
    uint8_t key[32] = {1};
    CHECK(!ccoip_aead_init(&a, key, CCOIP_AEAD_NONE));
}

/* Every AEAD seals records of every length that the others open differently: a record sealed
 * with one cipher never opens with another (same key and nonce), and the ciphertexts differ. */
static void ciphers_differ(void) {
    uint8_t key[32], m[1000], c[3][1000], t[3][16];
    for (int i = 0; i < 32; i++) key[i] = (uint8_t) (i * 5);
    for (int i = 0; i < 1000; i++) m[i] = (uint8_t) i;
    for (int k = 0; k < 3; k++) {
        ccoip_aead_t a;
        if (!ccoip_aead_init(&a, key, (ccoip_aead_cipher_t) (k + 1))) continue;
        ccoip_aead_seal(&a, c[k], t[k], m, sizeof m, m, 7);
        ccoip_aead_free(&a);
        for (int j = 0; j < k; j++) CHECK(memcmp(c[j], c[k], 64) != 0);
    }
}

int main(void) {
    REQUIRE(ccoip_auth_init());
    negotiation();
    ciphers_differ();
    int passes = 0;
    for (int c = CCOIP_AEAD_CHACHA20_POLY1305; c <= CCOIP_AEAD_AES256_OCB; c++) {
        cipher = (ccoip_aead_cipher_t) c;
        if (!ccoip_aead_supported(cipher)) continue;
        fprintf(stderr, "seal_test: %s\n", ccoip_aead_name(cipher));
        sealed_ring(1, false);
        sealed_ring(1000003, false); /* reduce-scatter frames combined as their records open */
        sealed_ring(300000, true);
        setenv("PCCL_SHM_COMBINE", "0", 1); /* staged, and combined by the ring */
        sealed_ring(1000003, false);
        unsetenv("PCCL_SHM_COMBINE");
        tampering();
        sealed_stream();
        passes++;
    }
    CHECK(passes == 3); /* this build (OpenSSL) runs all three */
    return check_exit();
}
