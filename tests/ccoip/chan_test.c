/* chan_test: control packets sealed on a connection (ccoip_chan.h) over a socket pair: a packet
 * goes through and back, a record with one byte flipped, a record replayed, a record from the
 * wrong key and an oversized length are refused, and a plain channel sends plain frames. */
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ccoip/net/ccoip_chan.h"
#include "ccoip/net/ccoip_conn.h"
#include "ccoip/net/ccoip_socket.h"
#include "tests/common/check.h"

static ccoip_session_t session(uint8_t send, uint8_t recv, ccoip_aead_cipher_t cipher) {
    ccoip_session_t s;
    memset(&s, 0, sizeof s);
    s.encrypt = true;
    s.cipher = (uint8_t) cipher;
    memset(s.send, send, sizeof s.send);
    memset(s.recv, recv, sizeof s.recv);
    return s;
}

static ccoip_packet_t world(uint32_t n) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_M2C_WORLD_UPDATE;
    p.u.world_update.world = (ccoip_world_t){n, n, 1, n};
    return p;
}

/* A sealed WORLD_UPDATE of n as the next record of a (its bytes into rec; the length). */
static size_t record_of(ccoip_aead_t *a, uint32_t n, uint8_t *rec) {
    ccoip_writer_t w;
    ccoip_writer_init(&w, CCOIP_RECORD_MAX);
    ccoip_packet_t p = world(n);
    REQUIRE(ccoip_packet_encode(&p, &w) == CCOIP_OK);
    size_t len = w.len + CCOIP_RECORD_OVERHEAD;
    ccoip_record_seal(a, rec, w.buf, w.len);
    ccoip_writer_free(&w);
    return len;
}

static void run(ccoip_aead_cipher_t cipher) {
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    ccoip_session_t sa = session(1, 2, cipher), sb = session(2, 1, cipher), wrong = session(3, 3, cipher);
    ccoip_chan_t a, b, w;
    REQUIRE(ccoip_chan_init(&a, &sa) && ccoip_chan_init(&b, &sb) && ccoip_chan_init(&w, &wrong));
    CHECK(a.on && b.on);
    ccoip_packet_t p = world(7), r;
    int64_t dl = ccoip_now_ms() + 5000;
    CHECK(ccoip_chan_send(&a, sv[0], &p, NULL) == CCOIP_OK);
    CHECK(ccoip_chan_recv(&b, sv[1], &r, CCOIP_MAX_PAYLOAD, dl) == CCOIP_OK && r.type == CCOIP_PKT_M2C_WORLD_UPDATE &&
          r.u.world_update.world.global_world_size == 7);
    p = world(8); /* and back */
    CHECK(ccoip_chan_send(&b, sv[1], &p, NULL) == CCOIP_OK);
    CHECK(ccoip_chan_recv(&a, sv[0], &r, CCOIP_MAX_PAYLOAD, dl) == CCOIP_OK && r.u.world_update.world.global_world_size == 8);

    uint8_t rec[256], copy[256];
    size_t n = record_of(&a.seal, 9, rec); /* a's next record, sent twice: the replay fails */
    memcpy(copy, rec, n);
    CHECK(ccoip_sock_send_all(sv[0], rec, n) == CCOIP_OK && ccoip_sock_send_all(sv[0], copy, n) == CCOIP_OK);
    CHECK(ccoip_chan_recv(&b, sv[1], &r, CCOIP_MAX_PAYLOAD, dl) == CCOIP_OK && r.u.world_update.world.global_world_size == 9);
    CHECK(ccoip_chan_recv(&b, sv[1], &r, CCOIP_MAX_PAYLOAD, dl) == CCOIP_ERR_INVALID);
    ccoip_chan_free(&b); /* a fresh receiver in step with a's sender again */
    REQUIRE(ccoip_chan_init(&b, &sb));
    ccoip_chan_free(&a);
    REQUIRE(ccoip_chan_init(&a, &sa));
    n = record_of(&a.seal, 10, rec);
    rec[10] ^= 0x40; /* one bit of the ciphertext */
    CHECK(ccoip_sock_send_all(sv[0], rec, n) == CCOIP_OK);
    CHECK(ccoip_chan_recv(&b, sv[1], &r, CCOIP_MAX_PAYLOAD, dl) == CCOIP_ERR_INVALID);
    ccoip_chan_free(&b);
    REQUIRE(ccoip_chan_init(&b, &sb));
    n = record_of(&w.seal, 11, rec); /* another key */
    CHECK(ccoip_sock_send_all(sv[0], rec, n) == CCOIP_OK);
    CHECK(ccoip_chan_recv(&b, sv[1], &r, CCOIP_MAX_PAYLOAD, dl) == CCOIP_ERR_INVALID);
    uint8_t huge[4] = {0x7f, 0xff, 0xff, 0xff}; /* a length over any frame: refused before reading it */
    CHECK(ccoip_sock_send_all(sv[0], huge, sizeof huge) == CCOIP_OK);
    CHECK(ccoip_chan_recv(&b, sv[1], &r, CCOIP_MAX_PAYLOAD, dl) == CCOIP_ERR_TOO_LARGE);
    ccoip_chan_free(&a);
    ccoip_chan_free(&b);
    ccoip_chan_free(&w);
    close(sv[0]);
    close(sv[1]);
}

int main(void) {
    for (int c = CCOIP_AEAD_NONE + 1; c <= CCOIP_AEAD_AES256_OCB; c++)
        if (ccoip_aead_supported((ccoip_aead_cipher_t) c)) run((ccoip_aead_cipher_t) c);
    /* Without encryption: plain frames, as ccoip_conn_send writes them. */
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    ccoip_chan_t plain;
    REQUIRE(ccoip_chan_init(&plain, NULL));
    CHECK(!plain.on);
    ccoip_packet_t p = world(5), r;
    CHECK(ccoip_chan_send(&plain, sv[0], &p, NULL) == CCOIP_OK);
    CHECK(ccoip_conn_recv(sv[1], &r, CCOIP_MAX_PAYLOAD, ccoip_now_ms() + 5000) == CCOIP_OK &&
          r.u.world_update.world.global_world_size == 5);
    ccoip_chan_free(&plain);
    close(sv[0]);
    close(sv[1]);
    return check_exit();
}
