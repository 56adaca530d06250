/* ccoip_sealed.h: a byte stream over a blocking socket, sealed when the connection is encrypted
 * (PCCL_ENCRYPT) and plain otherwise; for bulk transfers that are not data-link frames (the
 * shared-state tensors). Sealed, the bytes go as records `u32 length | ciphertext | tag[16]` of at
 * most CCOIP_SEALED_RECORD bytes, the length as associated data, one AEAD key per direction and a
 * counter nonce (ccoip_auth.h); a record that fails to open is an error like a broken socket. */
#ifndef CCOIP_SEALED_H
#define CCOIP_SEALED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip/net/ccoip_socket.h"
#include "ccoip/wire/ccoip_auth.h"
#include "ccoip/wire/ccoip_wire.h"

#define CCOIP_SEALED_RECORD (64u << 10)

typedef struct ccoip_sealed_t {
    int fd;
    bool on;
    ccoip_aead_t aead;
    uint8_t *buf; /* writer: plaintext waiting; reader: an opened record */
    size_t have, pos;
} ccoip_sealed_t;

/* key NULL: plain; else sealed with cipher (ccoip_aead_cipher_t, the session's). False when memory
 * is short or the cipher is none this build runs. */
bool ccoip_sealed_init(ccoip_sealed_t *s, int fd, const uint8_t *key, int cipher);
void ccoip_sealed_free(ccoip_sealed_t *s);

ccoip_status_t ccoip_sealed_writev(ccoip_sealed_t *s, ccoip_iov_t *iov, int n);
ccoip_status_t ccoip_sealed_write(ccoip_sealed_t *s, const void *p, size_t n);
/* Seals and sends what is buffered (call once the transfer is complete). */
ccoip_status_t ccoip_sealed_flush(ccoip_sealed_t *s);
ccoip_status_t ccoip_sealed_read(ccoip_sealed_t *s, void *dst, size_t n, int64_t deadline_ms);

#endif /* CCOIP_SEALED_H */
