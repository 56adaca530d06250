/* ccoip_chan.c: control packets, sealed or plain (ccoip_chan.h). */
#include "ccoip/net/ccoip_chan.h"

#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_conn.h"
#include "ccoip/net/ccoip_socket.h"
#include "log/log.h"

#define MOD "ccoip"

void ccoip_record_seal(ccoip_aead_t *a, uint8_t *out, const uint8_t *frame, size_t n) {
    if (out + 4 != frame) memmove(out + 4, frame, n);
    out[0] = (uint8_t) (n >> 24);
    out[1] = (uint8_t) (n >> 16);
    out[2] = (uint8_t) (n >> 8);
    out[3] = (uint8_t) n;
    ccoip_aead_seal(a, out + 4, out + 4 + n, out + 4, n, out, 4);
}

uint32_t ccoip_record_len(const uint8_t head[4]) {
    uint32_t len = (uint32_t) head[0] << 24 | (uint32_t) head[1] << 16 | (uint32_t) head[2] << 8 | head[3];
    return len > CCOIP_RECORD_MAX ? 0 : len;
}

bool ccoip_record_open(ccoip_aead_t *a, uint8_t *rec, uint32_t len) {
    return ccoip_aead_open(a, rec + 4, rec + 4, len, rec + 4 + len, rec, 4);
}

bool ccoip_chan_init(ccoip_chan_t *c, const ccoip_session_t *sess) {
    memset(c, 0, sizeof *c);
    if (sess == NULL || !sess->encrypt || sess->cipher == CCOIP_AEAD_NONE) return true;
    if (!ccoip_aead_init(&c->seal, sess->send, (ccoip_aead_cipher_t) sess->cipher)) return false;
    if (!ccoip_aead_init(&c->open, sess->recv, (ccoip_aead_cipher_t) sess->cipher)) {
        ccoip_aead_free(&c->seal);
        return false;
    }
    c->on = true;
    return true;
}

void ccoip_chan_free(ccoip_chan_t *c) {
    if (c->on) {
        ccoip_aead_free(&c->seal);
        ccoip_aead_free(&c->open);
    }
    free(c->sbuf);
    free(c->rbuf);
    memset(c, 0, sizeof *c);
}

/* *buf holds at least n bytes (grown as needed); false when memory is short. */
static bool reserve(uint8_t **buf, size_t *cap, size_t n) {
    if (*cap >= n) return true;
    uint8_t *nb = realloc(*buf, n);
    if (nb == NULL) return false;
    *buf = nb;
    *cap = n;
    return true;
}

ccoip_status_t ccoip_chan_send(ccoip_chan_t *c, int fd, const ccoip_packet_t *p, ccoip_writer_t *scratch) {
    if (!c->on) return ccoip_conn_send_with(fd, p, scratch);
    ccoip_writer_t own, *w = scratch != NULL ? scratch : &own;
    if (w == &own) ccoip_writer_init(w, CCOIP_RECORD_MAX);
    ccoip_writer_reset(w);
    ccoip_status_t st = ccoip_packet_encode(p, w);
    if (st == CCOIP_OK && !reserve(&c->sbuf, &c->scap, w->len + CCOIP_RECORD_OVERHEAD)) st = CCOIP_ERR_NOMEM;
    if (st == CCOIP_OK) {
        ccoip_record_seal(&c->seal, c->sbuf, w->buf, w->len);
        st = ccoip_sock_send_all(fd, c->sbuf, w->len + CCOIP_RECORD_OVERHEAD);
    }
    if (w == &own) ccoip_writer_free(w);
    return st;
}

ccoip_status_t ccoip_chan_recv(ccoip_chan_t *c, int fd, ccoip_packet_t *out, uint32_t max_payload,
                               int64_t deadline_ms) {
    if (!c->on) return ccoip_conn_recv(fd, out, max_payload, deadline_ms);
    uint8_t head[4];
    ccoip_status_t st = ccoip_sock_recv_all(fd, head, sizeof head, deadline_ms);
    if (st != CCOIP_OK) return st;
    uint32_t len = ccoip_record_len(head);
    if (len < CCOIP_HEADER_SIZE || len > CCOIP_HEADER_SIZE + max_payload) return CCOIP_ERR_TOO_LARGE;
    if (!reserve(&c->rbuf, &c->rcap, len + CCOIP_RECORD_OVERHEAD)) return CCOIP_ERR_NOMEM;
    memcpy(c->rbuf, head, 4);
    st = ccoip_sock_recv_all(fd, c->rbuf + 4, len + CCOIP_AEAD_TAG, deadline_ms);
    if (st != CCOIP_OK) return st;
    if (!ccoip_record_open(&c->open, c->rbuf, len)) {
        LOG_ERROR(MOD, "a sealed control packet failed authentication (tampered, or not from the master)");
        return CCOIP_ERR_INVALID;
    }
    uint16_t type;
    uint32_t plen;
    st = ccoip_frame_peek(c->rbuf + 4, len, max_payload, &type, &plen);
    if (st == CCOIP_OK && plen != len - CCOIP_HEADER_SIZE) st = CCOIP_ERR_INVALID; /* one frame per record */
    return st == CCOIP_OK ? ccoip_packet_decode(type, c->rbuf + 4 + CCOIP_HEADER_SIZE, plen, out) : st;
}
