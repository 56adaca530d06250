/* ccoip_conn.c: packets over blocking sockets. */
#include "ccoip/net/ccoip_conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_socket.h"
#include "log/log.h"

#define MOD "ccoip"

ccoip_status_t ccoip_conn_send_with(int fd, const ccoip_packet_t *p, ccoip_writer_t *scratch) {
    if (ccoip_packet_frame_bound(p->type) != 0) {
        uint8_t frame[CCOIP_FIXED_FRAME_MAX];
        size_t len;
        ccoip_status_t st = ccoip_packet_encode_into(p, frame, sizeof frame, &len);
        return st == CCOIP_OK ? ccoip_sock_send_all(fd, frame, len) : st;
    }
    ccoip_writer_t own;
    ccoip_writer_t *w = scratch;
    if (w == NULL) {
        w = &own;
        ccoip_writer_init(w, CCOIP_MAX_PAYLOAD + CCOIP_HEADER_SIZE);
    }
    ccoip_writer_reset(w);
    ccoip_status_t st = ccoip_packet_encode(p, w);
    if (st == CCOIP_OK) st = ccoip_sock_send_all(fd, w->buf, w->len);
    if (w == &own) ccoip_writer_free(w);
    return st;
}

ccoip_status_t ccoip_conn_send(int fd, const ccoip_packet_t *p) { return ccoip_conn_send_with(fd, p, NULL); }

ccoip_status_t ccoip_conn_recv(int fd, ccoip_packet_t *out, uint32_t max_payload, int64_t deadline_ms) {
    uint8_t header[CCOIP_HEADER_SIZE];
    ccoip_status_t st = ccoip_sock_recv_all(fd, header, sizeof header, deadline_ms);
    if (st != CCOIP_OK) return st;
    uint16_t type;
    uint32_t len;
    st = ccoip_frame_peek(header, sizeof header, max_payload, &type, &len);
    if (st != CCOIP_OK) return st;
    uint8_t small[CCOIP_CONN_STACK_PAYLOAD];
    uint8_t *payload = len <= sizeof small ? small : malloc(len);
    if (payload == NULL) return CCOIP_ERR_NOMEM;
    st = ccoip_sock_recv_all(fd, payload, len, deadline_ms);
    if (st == CCOIP_OK) st = ccoip_packet_decode(type, payload, len, out);
    if (payload != small) free(payload);
    return st;
}

ccoip_status_t ccoip_conn_hello(int fd, uint8_t role, const ccoip_uuid_t *uuid, int64_t deadline_ms,
                                const char *what, ccoip_hello_ack_t *ack) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_HELLO;
    p.u.hello.magic = CCOIP_MAGIC;
    p.u.hello.version = CCOIP_PROTOCOL_VERSION;
    p.u.hello.role = role;
    if (uuid != NULL) p.u.hello.uuid = *uuid;
    ccoip_status_t st = ccoip_conn_send(fd, &p);
    if (st != CCOIP_OK) return st;
    ccoip_packet_t r;
    st = ccoip_conn_recv(fd, &r, CCOIP_MAX_HANDSHAKE_PAYLOAD, deadline_ms);
    if (st != CCOIP_OK) return st;
    if (r.type != CCOIP_PKT_HELLO_ACK || r.u.hello_ack.magic != CCOIP_MAGIC) {
        ccoip_packet_free(&r);
        LOG_ERROR(MOD, "%s answered the handshake with something else: not a ccoip endpoint?", what);
        return CCOIP_ERR_INVALID;
    }
    *ack = r.u.hello_ack;
    switch (ack->status) {
    case CCOIP_HELLO_OK: return CCOIP_OK;
    case CCOIP_HELLO_BAD_VERSION:
        LOG_ERROR(MOD, "%s speaks protocol version %u, we speak %u: refused", what, ack->version,
                  CCOIP_PROTOCOL_VERSION);
        return CCOIP_ERR_REFUSED;
    case CCOIP_HELLO_UNKNOWN_PEER:
        LOG_DEBUG(MOD, "%s does not know us (yet)", what);
        return CCOIP_ERR_REFUSED;
    default:
        LOG_ERROR(MOD, "%s refused the handshake (status %u)", what, ack->status);
        return CCOIP_ERR_REFUSED;
    }
}

ccoip_status_t ccoip_conn_answer_hello(int fd, uint8_t status, const ccoip_uuid_t *uuid) {
    ccoip_packet_t ack;
    memset(&ack, 0, sizeof ack);
    ack.type = CCOIP_PKT_HELLO_ACK;
    ack.u.hello_ack.magic = CCOIP_MAGIC;
    ack.u.hello_ack.version = CCOIP_PROTOCOL_VERSION;
    ack.u.hello_ack.status = status;
    if (status == CCOIP_HELLO_OK && uuid != NULL) ack.u.hello_ack.uuid = *uuid;
    return ccoip_conn_send(fd, &ack);
}

bool ccoip_conn_read_hello(int fd, uint8_t role, int64_t deadline_ms, ccoip_uuid_t *uuid, char *why, size_t why_len) {
    ccoip_packet_t p;
    ccoip_status_t st = ccoip_conn_recv(fd, &p, CCOIP_MAX_HANDSHAKE_PAYLOAD, deadline_ms);
    if (st != CCOIP_OK) {
        snprintf(why, why_len, "bad handshake (%s)", ccoip_status_str(st));
        return false;
    }
    const ccoip_hello_t h = p.u.hello;
    bool is_hello = p.type == CCOIP_PKT_HELLO;
    ccoip_packet_free(&p);
    uint8_t status;
    if (!is_hello) {
        snprintf(why, why_len, "first packet is not HELLO");
        return false; /* not our protocol: nothing to answer */
    } else if (h.magic != CCOIP_MAGIC) {
        status = CCOIP_HELLO_BAD_MAGIC;
        snprintf(why, why_len, "bad magic");
    } else if (h.version != CCOIP_PROTOCOL_VERSION) {
        status = CCOIP_HELLO_BAD_VERSION;
        snprintf(why, why_len, "protocol version %u, we speak %u", h.version, CCOIP_PROTOCOL_VERSION);
    } else if (h.role != role) {
        status = CCOIP_HELLO_BAD_ROLE;
        snprintf(why, why_len, "role %u where %u belongs", h.role, role);
    } else {
        *uuid = h.uuid;
        return true;
    }
    ccoip_conn_answer_hello(fd, status, NULL);
    return false;
}
