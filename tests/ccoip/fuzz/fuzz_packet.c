/* libFuzzer target: the packet decoder for every type. Input: u16 type, then the payload.
 * A payload that decodes must re-encode to the same bytes (the codec is canonical). */
#include <stdlib.h>
#include <string.h>

#include "ccoip/wire/ccoip_packets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    /* Bias towards known types: the low 4 bits of the second byte pick among near numbers. */
    uint16_t type = (uint16_t) ((data[0] & 0x03) << 8 | data[1]);
    const uint8_t *payload = data + 2;
    size_t len = size - 2;
    ccoip_packet_t p;
    if (ccoip_packet_decode(type, payload, len, &p) != CCOIP_OK) return 0;
    ccoip_writer_t w;
    ccoip_writer_init(&w, CCOIP_MAX_PAYLOAD + CCOIP_HEADER_SIZE);
    if (ccoip_packet_encode(&p, &w) != CCOIP_OK) abort();
    size_t n = w.len - CCOIP_HEADER_SIZE;
    /* HELLO and HELLO_ACK may carry trailing bytes from later versions; the rest must match. */
    int trailing_ok = type == CCOIP_PKT_HELLO || type == CCOIP_PKT_HELLO_ACK;
    if (n > len || (!trailing_ok && n != len)) abort();
    if (memcmp(w.buf + CCOIP_HEADER_SIZE, payload, n) != 0) abort();
    /* The heap-free encoder gives the same frame, within the type's fixed bound when it has one. */
    uint8_t frame[CCOIP_FIXED_FRAME_MAX];
    size_t bound = ccoip_packet_frame_bound(type), flen = 0;
    ccoip_status_t st = ccoip_packet_encode_into(&p, frame, sizeof frame, &flen);
    if (bound != 0 && (st != CCOIP_OK || flen > bound)) abort();
    if (st == CCOIP_OK && (flen != w.len || memcmp(frame, w.buf, flen) != 0)) abort();
    if (st != CCOIP_OK && (st != CCOIP_ERR_TOO_LARGE || w.len <= sizeof frame)) abort();
    ccoip_writer_free(&w);
    ccoip_packet_free(&p);
    return 0;
}
