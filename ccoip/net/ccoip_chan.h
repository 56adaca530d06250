/* ccoip_chan.h: control packets on a connection to the master, sealed after an encrypted
 * handshake (PCCL_ENCRYPT and the master's --encrypt; protocol version 12) and plain otherwise.
 *
 * Sealed, each frame travels as one record `u32 length | ciphertext | tag[16]` (the record of
 * ccoip_sealed.h, the length as associated data), with the handshake's key for each direction and
 * a counter nonce: an on-path attacker can neither read nor change, drop or replay a control
 * packet unnoticed (a record that fails to open ends the connection). The record helpers are
 * pure, for the master's event loop; ccoip_chan_t drives them over a blocking socket, its sending
 * and receiving halves each used by one thread at a time. */
#ifndef CCOIP_CHAN_H
#define CCOIP_CHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip/wire/ccoip_auth.h"
#include "ccoip/wire/ccoip_wire.h"

#define CCOIP_RECORD_OVERHEAD (4u + CCOIP_AEAD_TAG)
/* The longest record's plaintext: one frame at the payload cap. */
#define CCOIP_RECORD_MAX (CCOIP_HEADER_SIZE + CCOIP_MAX_PAYLOAD)

/* Seals the n bytes at frame into out (n + CCOIP_RECORD_OVERHEAD bytes; out may equal frame - 4). */
void ccoip_record_seal(ccoip_aead_t *a, uint8_t *out, const uint8_t *frame, size_t n);
/* The plaintext length a record's first 4 bytes announce, 0 when over CCOIP_RECORD_MAX or zero. */
uint32_t ccoip_record_len(const uint8_t head[4]);
/* Opens the whole record at rec (len plaintext bytes announced) in place: the frame is then at
 * rec + 4. False when it fails authentication. */
bool ccoip_record_open(ccoip_aead_t *a, uint8_t *rec, uint32_t len);

typedef struct ccoip_chan_t {
    bool on;
    ccoip_aead_t seal, open;
    uint8_t *sbuf, *rbuf; /* the halves' records, grown to the largest seen (kept: no malloc per packet) */
    size_t scap, rcap;
} ccoip_chan_t;

/* Plain unless sess (may be NULL) encrypts with a cipher; false when that cipher cannot be keyed. */
bool ccoip_chan_init(ccoip_chan_t *c, const ccoip_session_t *sess);
void ccoip_chan_free(ccoip_chan_t *c);

/* ccoip_conn_send_with / ccoip_conn_recv through the channel. */
ccoip_status_t ccoip_chan_send(ccoip_chan_t *c, int fd, const ccoip_packet_t *p, ccoip_writer_t *scratch);
ccoip_status_t ccoip_chan_recv(ccoip_chan_t *c, int fd, ccoip_packet_t *out, uint32_t max_payload,
                               int64_t deadline_ms);

#endif /* CCOIP_CHAN_H */
