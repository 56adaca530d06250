/* ccoip_sealed.c: a sealed byte stream (ccoip_sealed.h). */
#include "ccoip/net/ccoip_sealed.h"

#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_socket.h"
#include "log/log.h"

#define MOD "ccoip"

bool ccoip_sealed_init(ccoip_sealed_t *s, int fd, const uint8_t *key, int cipher) {
    memset(s, 0, sizeof *s);
    s->fd = fd;
    if (key == NULL) return true;
    s->on = true;
    s->buf = malloc(4 + CCOIP_SEALED_RECORD + CCOIP_AEAD_TAG);
    if (s->buf == NULL || !ccoip_aead_init(&s->aead, key, (ccoip_aead_cipher_t) cipher)) {
        if (s->buf != NULL) LOG_ERROR(MOD, "sealed stream: no AEAD agreed on (%s)", ccoip_aead_name((ccoip_aead_cipher_t) cipher));
        ccoip_sealed_free(s);
        return false;
    }
    return true;
}

void ccoip_sealed_free(ccoip_sealed_t *s) {
    if (s->on) ccoip_aead_free(&s->aead);
    free(s->buf);
    s->buf = NULL;
    s->on = false;
}

/* Plaintext waits at buf + 4; the record is sealed in place. */
ccoip_status_t ccoip_sealed_flush(ccoip_sealed_t *s) {
    if (!s->on || s->have == 0) return CCOIP_OK;
    uint8_t *b = s->buf;
    uint32_t n = (uint32_t) s->have;
    b[0] = (uint8_t) (n >> 24), b[1] = (uint8_t) (n >> 16), b[2] = (uint8_t) (n >> 8), b[3] = (uint8_t) n;
    ccoip_aead_seal(&s->aead, b + 4, b + 4 + n, b + 4, n, b, 4);
    s->have = 0;
    return ccoip_sock_send_all(s->fd, b, 4 + n + CCOIP_AEAD_TAG);
}

ccoip_status_t ccoip_sealed_write(ccoip_sealed_t *s, const void *p, size_t n) {
    if (!s->on) return ccoip_sock_send_all(s->fd, p, n);
    const uint8_t *src = p;
    while (n > 0) {
        size_t k = CCOIP_SEALED_RECORD - s->have < n ? CCOIP_SEALED_RECORD - s->have : n;
        memcpy(s->buf + 4 + s->have, src, k);
        s->have += k;
        src += k;
        n -= k;
        if (s->have == CCOIP_SEALED_RECORD) {
            ccoip_status_t st = ccoip_sealed_flush(s);
            if (st != CCOIP_OK) return st;
        }
    }
    return CCOIP_OK;
}

ccoip_status_t ccoip_sealed_writev(ccoip_sealed_t *s, ccoip_iov_t *iov, int n) {
    if (!s->on) return ccoip_sock_sendv_all(s->fd, iov, n, false);
    for (int i = 0; i < n; i++) {
        ccoip_status_t st = ccoip_sealed_write(s, iov[i].base, iov[i].len);
        if (st != CCOIP_OK) return st;
    }
    return CCOIP_OK;
}

ccoip_status_t ccoip_sealed_read(ccoip_sealed_t *s, void *dst, size_t n, int64_t deadline_ms) {
    if (!s->on) return ccoip_sock_recv_all(s->fd, dst, n, deadline_ms);
    uint8_t *out = dst;
    while (n > 0) {
        if (s->pos == s->have) { /* the next record */
            uint8_t *b = s->buf;
            ccoip_status_t st = ccoip_sock_recv_all(s->fd, b, 4, deadline_ms);
            if (st != CCOIP_OK) return st;
            uint32_t len = (uint32_t) b[0] << 24 | (uint32_t) b[1] << 16 | (uint32_t) b[2] << 8 | b[3];
            if (len == 0 || len > CCOIP_SEALED_RECORD) return CCOIP_ERR_INVALID;
            st = ccoip_sock_recv_all(s->fd, b + 4, len + CCOIP_AEAD_TAG, deadline_ms);
            if (st != CCOIP_OK) return st;
            if (!ccoip_aead_open(&s->aead, b + 4, b + 4, len, b + 4 + len, b, 4)) {
                LOG_ERROR(MOD, "a sealed record failed authentication (tampered, or not from our peer)");
                return CCOIP_ERR_INVALID;
            }
            s->pos = 0;
            s->have = len;
        }
        size_t k = s->have - s->pos < n ? s->have - s->pos : n;
        memcpy(out, s->buf + 4 + s->pos, k);
        s->pos += k;
        out += k;
        n -= k;
    }
    return CCOIP_OK;
}
