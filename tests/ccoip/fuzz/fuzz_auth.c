/* libFuzzer target: the handshake's proof (ccoip/wire/ccoip_auth.c) as the acceptor runs it.
 * Input: a byte stream from a would-be connector, cut into frames as a listener reads it (HELLO,
 * then AUTH). The acceptor answers with a fixed key and nonce; whatever the stream says, its
 * AUTH must not verify unless its MAC is the true one, and the true one must verify. The first
 * input byte also picks a forged HELLO_ACK for the connector's side of the check. */
#include <stdlib.h>
#include <string.h>

#include "ccoip/wire/ccoip_auth.h"
#include "ccoip/wire/ccoip_packets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool next_packet(const uint8_t *data, size_t size, size_t *pos, uint32_t cap, ccoip_packet_t *p) {
    uint16_t type;
    uint32_t len;
    if (ccoip_frame_peek(data + *pos, size - *pos, cap, &type, &len) != CCOIP_OK) return false;
    if (len > size - *pos - CCOIP_HEADER_SIZE) return false;
    if (ccoip_packet_decode(type, data + *pos + CCOIP_HEADER_SIZE, len, p) != CCOIP_OK) return false;
    *pos += CCOIP_HEADER_SIZE + len;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ccoip_auth_key_t key;
    static bool ready;
    if (!ready) {
        if (!ccoip_auth_init()) abort();
        ccoip_auth_derive("fuzzing secret, 16+ bytes", 25, &key);
        ready = true;
    }
    size_t pos = 0;
    ccoip_packet_t h, a;
    if (!next_packet(data, size, &pos, CCOIP_MAX_HANDSHAKE_PAYLOAD, &h)) return 0;
    if (h.type != CCOIP_PKT_HELLO) {
        /* The connector's side: a forged HELLO_ACK never proves the key for our HELLO. */
        if (h.type == CCOIP_PKT_HELLO_ACK) {
            ccoip_hello_t mine;
            memset(&mine, 0, sizeof mine);
            mine.version = CCOIP_PROTOCOL_VERSION;
            mine.flags = CCOIP_HELLO_F_SECRET;
            if (ccoip_auth_verify(&key, CCOIP_AUTH_ACCEPTOR, &mine, &h.u.hello_ack, h.u.hello_ack.mac)) abort();
        }
        ccoip_packet_free(&h);
        return 0;
    }
    ccoip_hello_ack_t ack;
    memset(&ack, 0, sizeof ack);
    ack.magic = CCOIP_MAGIC;
    ack.version = CCOIP_PROTOCOL_VERSION;
    ack.uuid = h.u.hello.uuid;
    ack.flags = CCOIP_HELLO_F_SECRET;
    memset(ack.nonce, 0x5c, sizeof ack.nonce);
    ccoip_auth_mac(&key, CCOIP_AUTH_ACCEPTOR, &h.u.hello, &ack, ack.mac);
    uint8_t truth[CCOIP_MAC_LEN];
    ccoip_auth_mac(&key, CCOIP_AUTH_CONNECTOR, &h.u.hello, &ack, truth);
    if (!ccoip_auth_verify(&key, CCOIP_AUTH_CONNECTOR, &h.u.hello, &ack, truth)) abort();
    /* The acceptor's proof is not the connector's: no reflection. */
    if (ccoip_auth_verify(&key, CCOIP_AUTH_CONNECTOR, &h.u.hello, &ack, ack.mac)) abort();
    if (!next_packet(data, size, &pos, CCOIP_MAX_HANDSHAKE_PAYLOAD, &a)) return 0;
    if (a.type == CCOIP_PKT_AUTH) {
        bool ok = ccoip_auth_verify(&key, CCOIP_AUTH_CONNECTOR, &h.u.hello, &ack, a.u.auth.mac);
        if (ok != (memcmp(a.u.auth.mac, truth, CCOIP_MAC_LEN) == 0)) abort();
    }
    ccoip_packet_free(&a);
    return 0;
}
