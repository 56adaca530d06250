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

/* The AEADs this process offers (PCCL_AEAD narrows them to one; an unknown name is logged once
 * and the defaults are offered). */
static uint8_t aead_offer(void) {
    bool unknown;
    const char *want = getenv("PCCL_AEAD");
    uint8_t f = ccoip_aead_offer(want, &unknown);
    static int warned;
    if (unknown && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        LOG_WARN(MOD, "PCCL_AEAD=%s: not an AEAD of this build (AES-256-OCB, AES-256-GCM, ChaCha20-Poly1305); "
                      "offering the defaults", want);
    return f;
}

static void log_secret_refusal(const char *what, const ccoip_hello_ack_t *ack, bool ours) {
    if (ours && !(ack->flags & CCOIP_HELLO_F_SECRET))
        LOG_ERROR(MOD, "%s refused us: it runs without a secret and we have one (PCCL_SECRET_FILE)", what);
    else if (!ours)
        LOG_ERROR(MOD, "%s refused us: it requires the run secret and we have none (PCCL_SECRET_FILE)", what);
    else LOG_ERROR(MOD, "%s refused our run secret: the secrets differ", what);
}

/* With a secret: check the acceptor's proof in ack, send ours, read the verdict. */
static ccoip_status_t prove(int fd, const ccoip_auth_key_t *key, const ccoip_hello_t *h, ccoip_hello_ack_t *ack,
                            int64_t deadline_ms, const char *what) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_AUTH;
    bool theirs_ok = (ack->flags & CCOIP_HELLO_F_SECRET) && ccoip_auth_verify(key, CCOIP_AUTH_ACCEPTOR, h, ack, ack->mac);
    p.u.auth.ok = theirs_ok;
    if (theirs_ok) ccoip_auth_mac(key, CCOIP_AUTH_CONNECTOR, h, ack, p.u.auth.mac);
    ccoip_status_t st = ccoip_conn_send(fd, &p);
    if (!theirs_ok) {
        LOG_ERROR(MOD, "%s failed to prove our run secret: the secrets differ (or it is not who it claims)", what);
        ack->status = CCOIP_HELLO_SECRET;
        return CCOIP_ERR_REFUSED;
    }
    if (st != CCOIP_OK) return st;
    ccoip_packet_t r;
    st = ccoip_conn_recv(fd, &r, CCOIP_MAX_HANDSHAKE_PAYLOAD, deadline_ms);
    if (st != CCOIP_OK) return st;
    bool is_result = r.type == CCOIP_PKT_AUTH_RESULT;
    uint8_t status = r.u.auth_result.status;
    ccoip_packet_free(&r);
    if (!is_result) {
        LOG_ERROR(MOD, "%s answered our proof with something else", what);
        return CCOIP_ERR_INVALID;
    }
    if (status != CCOIP_HELLO_OK) {
        ack->status = status;
        log_secret_refusal(what, ack, true);
        return CCOIP_ERR_REFUSED;
    }
    return CCOIP_OK;
}

ccoip_status_t ccoip_conn_hello(int fd, uint8_t role, const ccoip_uuid_t *uuid, const ccoip_auth_key_t *key,
                                ccoip_session_t *sess, int64_t deadline_ms, const char *what, ccoip_hello_ack_t *ack) {
    bool encrypt = sess != NULL && sess->encrypt && key != NULL;
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_HELLO;
    p.u.hello.magic = CCOIP_MAGIC;
    p.u.hello.version = CCOIP_PROTOCOL_VERSION;
    p.u.hello.role = role;
    if (uuid != NULL) p.u.hello.uuid = *uuid;
    if (key != NULL) {
        p.u.hello.flags = CCOIP_HELLO_F_SECRET | (encrypt ? CCOIP_HELLO_F_ENCRYPT | aead_offer() : 0);
        ccoip_auth_nonce(p.u.hello.nonce);
    }
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
    case CCOIP_HELLO_OK:
        if (ack->version != CCOIP_PROTOCOL_VERSION) break;
        if (encrypt != ((ack->flags & CCOIP_HELLO_F_ENCRYPT) != 0)) {
            LOG_ERROR(MOD, "%s accepted us without agreeing on encryption: refused", what);
            ack->status = CCOIP_HELLO_ENCRYPTION;
            return CCOIP_ERR_REFUSED;
        }
        /* The acceptor's AEAD: one we offered, or none (the master seals nothing); bound by the MACs. */
        if (encrypt && (ack->flags & CCOIP_HELLO_F_AEADS) != 0 &&
            (ccoip_aead_of_flags(ack->flags) == CCOIP_AEAD_NONE || (ack->flags & ~p.u.hello.flags & CCOIP_HELLO_F_AEADS))) {
            LOG_ERROR(MOD, "%s chose an AEAD we did not offer (flags 0x%x, ours 0x%x): refused", what, ack->flags,
                      p.u.hello.flags);
            ack->status = CCOIP_HELLO_ENCRYPTION;
            return CCOIP_ERR_REFUSED;
        }
        if (key != NULL) {
            st = prove(fd, key, &p.u.hello, ack, deadline_ms, what);
            if (st == CCOIP_OK && encrypt) ccoip_auth_session(key, CCOIP_AUTH_CONNECTOR, &p.u.hello, ack, sess);
            return st;
        }
        if (ack->flags & CCOIP_HELLO_F_SECRET) { /* an acceptor that wants a proof and took none */
            log_secret_refusal(what, ack, false);
            ack->status = CCOIP_HELLO_SECRET;
            return CCOIP_ERR_REFUSED;
        }
        return CCOIP_OK;
    case CCOIP_HELLO_BAD_VERSION: break;
    case CCOIP_HELLO_SECRET:
        log_secret_refusal(what, ack, key != NULL);
        return CCOIP_ERR_REFUSED;
    case CCOIP_HELLO_ENCRYPTION:
        if (encrypt && (ack->flags & CCOIP_HELLO_F_ENCRYPT)) {
            LOG_ERROR(MOD, "%s refused us: we share no AEAD (we offer 0x%x; PCCL_AEAD)", what,
                      p.u.hello.flags & CCOIP_HELLO_F_AEADS);
            return CCOIP_ERR_REFUSED;
        }
        LOG_ERROR(MOD, "%s refused us: it %s and we %s (PCCL_ENCRYPT must match the master's --encrypt)", what,
                  ack->flags & CCOIP_HELLO_F_ENCRYPT ? "encrypts" : "does not encrypt", encrypt ? "do" : "do not");
        return CCOIP_ERR_REFUSED;
    case CCOIP_HELLO_UNKNOWN_PEER:
        LOG_DEBUG(MOD, "%s does not know us (yet)", what);
        return CCOIP_ERR_REFUSED;
    case CCOIP_HELLO_NOT_SERVING:
        LOG_WARN(MOD, "%s is in no shared-state sync: its sync ended (its master link broke?)", what);
        return CCOIP_ERR_REFUSED;
    default:
        LOG_ERROR(MOD, "%s refused the handshake (status %u)", what, ack->status);
        return CCOIP_ERR_REFUSED;
    }
    LOG_ERROR(MOD, "%s speaks protocol version %u, we speak %u: refused", what, ack->version, CCOIP_PROTOCOL_VERSION);
    ack->status = CCOIP_HELLO_BAD_VERSION;
    return CCOIP_ERR_REFUSED;
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

bool ccoip_conn_accept_hello(int fd, const ccoip_hello_t *h, const ccoip_auth_key_t *key, ccoip_session_t *sess,
                             int64_t deadline_ms, char *why, size_t why_len) {
    bool encrypt = key != NULL && (h->flags & CCOIP_HELLO_F_ENCRYPT);
    ccoip_packet_t ack;
    memset(&ack, 0, sizeof ack);
    ack.type = CCOIP_PKT_HELLO_ACK;
    ack.u.hello_ack.magic = CCOIP_MAGIC;
    ack.u.hello_ack.version = CCOIP_PROTOCOL_VERSION;
    ack.u.hello_ack.status = CCOIP_HELLO_OK;
    ack.u.hello_ack.uuid = h->uuid;
    if (key != NULL) {
        ack.u.hello_ack.flags = CCOIP_HELLO_F_SECRET | (encrypt ? CCOIP_HELLO_F_ENCRYPT : 0);
        if (encrypt) ack.u.hello_ack.flags |= ccoip_aead_flag(ccoip_aead_choose(h->flags, aead_offer()));
        ccoip_auth_nonce(ack.u.hello_ack.nonce);
        ccoip_auth_mac(key, CCOIP_AUTH_ACCEPTOR, h, &ack.u.hello_ack, ack.u.hello_ack.mac);
    }
    ccoip_status_t st = ccoip_conn_send(fd, &ack);
    if (st != CCOIP_OK || key == NULL) {
        if (st != CCOIP_OK) snprintf(why, why_len, "handshake failed (%s)", ccoip_status_str(st));
        return st == CCOIP_OK;
    }
    ccoip_packet_t p;
    st = ccoip_conn_recv(fd, &p, CCOIP_MAX_HANDSHAKE_PAYLOAD, deadline_ms);
    if (st != CCOIP_OK) {
        snprintf(why, why_len, "no proof of the run secret (%s)", ccoip_status_str(st));
        return false;
    }
    bool ok = p.type == CCOIP_PKT_AUTH && p.u.auth.ok &&
              ccoip_auth_verify(key, CCOIP_AUTH_CONNECTOR, h, &ack.u.hello_ack, p.u.auth.mac);
    if (p.type != CCOIP_PKT_AUTH) snprintf(why, why_len, "expected AUTH after HELLO");
    else if (!p.u.auth.ok) snprintf(why, why_len, "it says our proof failed: its run secret differs from ours");
    else if (!ok) snprintf(why, why_len, "wrong run secret");
    ccoip_packet_free(&p);
    ccoip_packet_t r;
    memset(&r, 0, sizeof r);
    r.type = CCOIP_PKT_AUTH_RESULT;
    r.u.auth_result.status = ok ? CCOIP_HELLO_OK : CCOIP_HELLO_SECRET;
    st = ccoip_conn_send(fd, &r);
    if (ok && st != CCOIP_OK) {
        snprintf(why, why_len, "handshake failed (%s)", ccoip_status_str(st));
        return false;
    }
    if (ok && encrypt && sess != NULL) ccoip_auth_session(key, CCOIP_AUTH_ACCEPTOR, h, &ack.u.hello_ack, sess);
    return ok;
}

/* A listener of `role` also takes connections dialled back to it (docs/nat.md): the shared-state
 * listener a distributor's dial to its receiver, the benchmark listener a receiver's dial to its
 * sender. */
static bool also_takes(uint8_t role, uint8_t theirs) {
    return (role == CCOIP_ROLE_SHARED_STATE && theirs == CCOIP_ROLE_SS_REVERSED) ||
           (role == CCOIP_ROLE_BENCHMARK && theirs == CCOIP_ROLE_BENCH_REVERSED);
}

bool ccoip_conn_read_hello(int fd, uint8_t role, const ccoip_auth_key_t *key, bool encrypt, int64_t deadline_ms,
                           ccoip_hello_t *h, char *why, size_t why_len) {
    ccoip_packet_t p;
    ccoip_status_t st = ccoip_conn_recv(fd, &p, CCOIP_MAX_HANDSHAKE_PAYLOAD, deadline_ms);
    if (st != CCOIP_OK) {
        if (st == CCOIP_ERR_CLOSED) snprintf(why, why_len, CCOIP_CONN_CLOSED_EARLY);
        else snprintf(why, why_len, "bad handshake (%s)", ccoip_status_str(st));
        return false;
    }
    *h = p.u.hello;
    bool is_hello = p.type == CCOIP_PKT_HELLO;
    ccoip_packet_free(&p);
    uint8_t status;
    bool theirs = (h->flags & CCOIP_HELLO_F_SECRET) != 0;
    if (!is_hello) {
        snprintf(why, why_len, "first packet is not HELLO");
        return false; /* not our protocol: nothing to answer */
    } else if (h->magic != CCOIP_MAGIC) {
        status = CCOIP_HELLO_BAD_MAGIC;
        snprintf(why, why_len, "bad magic");
    } else if (h->version != CCOIP_PROTOCOL_VERSION) {
        status = CCOIP_HELLO_BAD_VERSION;
        snprintf(why, why_len, "protocol version %u, we speak %u", h->version, CCOIP_PROTOCOL_VERSION);
    } else if (h->role != role && !also_takes(role, h->role)) {
        status = CCOIP_HELLO_BAD_ROLE;
        snprintf(why, why_len, "role %u where %u belongs", h->role, role);
    } else if (theirs != (key != NULL)) {
        status = CCOIP_HELLO_SECRET;
        snprintf(why, why_len, "run secret refused (%s)", key != NULL ? "it has none" : "it has one and we have none");
    } else if (((h->flags & CCOIP_HELLO_F_ENCRYPT) != 0) != encrypt) {
        status = CCOIP_HELLO_ENCRYPTION;
        snprintf(why, why_len, "it %s and we %s", encrypt ? "does not encrypt" : "encrypts", encrypt ? "do" : "do not");
    } else if (encrypt && ccoip_aead_choose(h->flags, aead_offer()) == CCOIP_AEAD_NONE) {
        status = CCOIP_HELLO_ENCRYPTION;
        snprintf(why, why_len, "it offers no AEAD we run (its flags 0x%x, ours 0x%x; PCCL_AEAD)", h->flags, aead_offer());
    } else {
        return true;
    }
    ccoip_packet_t ack;
    memset(&ack, 0, sizeof ack);
    ack.type = CCOIP_PKT_HELLO_ACK;
    ack.u.hello_ack.magic = CCOIP_MAGIC;
    ack.u.hello_ack.version = CCOIP_PROTOCOL_VERSION;
    ack.u.hello_ack.status = status;
    ack.u.hello_ack.flags = (key != NULL ? CCOIP_HELLO_F_SECRET : 0) | (encrypt ? CCOIP_HELLO_F_ENCRYPT : 0);
    ccoip_conn_send(fd, &ack);
    return false;
}

int ccoip_conn_relay_dial(const ccoip_socket_address_t *relay, const ccoip_uuid_t *token, int timeout_ms,
                          ccoip_status_t *st) {
    int fd = ccoip_sock_connect(relay, timeout_ms, st);
    if (fd < 0) return -1;
    uint8_t hello[CCOIP_RELAY_HELLO_LEN] = {(uint8_t) (CCOIP_RELAY_MAGIC >> 24), (uint8_t) (CCOIP_RELAY_MAGIC >> 16),
                                            (uint8_t) (CCOIP_RELAY_MAGIC >> 8), (uint8_t) CCOIP_RELAY_MAGIC};
    memcpy(hello + 4, token->b, 16);
    if ((*st = ccoip_sock_send_all(fd, hello, sizeof hello)) != CCOIP_OK) {
        ccoip_sock_close(fd);
        return -1;
    }
    return fd;
}
