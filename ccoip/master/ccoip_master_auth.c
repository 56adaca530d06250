/* ccoip_master_auth.c: the master's half of the run secret's handshake (ccoip_auth.h), free of
 * I/O like the rest of the state: HELLO -> HELLO_ACK with our proof -> the client's AUTH. Every
 * refusal names the address; the client gets a refusal it can report, never a silent close. */
#include <stdlib.h>
#include <string.h>

#include "ccoip/master/ccoip_master_auth.h"
#include "log/log.h"

#define MOD "ccoip-master"

bool ccoip_mauth_on_hello(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_hello_t *h, ccoip_hello_ack_t *ack) {
    bool theirs = (h->flags & CCOIP_HELLO_F_SECRET) != 0;
    ack->flags = st->has_secret ? CCOIP_HELLO_F_SECRET : 0;
    if (theirs != st->has_secret) {
        ack->status = CCOIP_HELLO_SECRET;
        memset(&ack->uuid, 0, sizeof ack->uuid);
        LOG_WARN(MOD, "refused %s: %s", c->name,
                 st->has_secret ? "it has no run secret and this run requires one"
                                : "it has a run secret and this run has none");
        return false;
    }
    bool their_enc = (h->flags & CCOIP_HELLO_F_ENCRYPT) != 0;
    if (st->encrypt) ack->flags |= CCOIP_HELLO_F_ENCRYPT;
    if (their_enc != st->encrypt) {
        ack->status = CCOIP_HELLO_ENCRYPTION;
        memset(&ack->uuid, 0, sizeof ack->uuid);
        LOG_WARN(MOD, "refused %s: %s", c->name,
                 st->encrypt ? "it does not encrypt and this run does (PCCL_ENCRYPT=1)"
                             : "it encrypts (PCCL_ENCRYPT) and this run does not");
        return false;
    }
    if (!st->has_secret) return true;
    if (st->encrypt) { /* control packets are sealed after AUTH: pick the AEAD as a p2p acceptor does */
        bool unknown;
        ccoip_aead_cipher_t pick = ccoip_aead_choose(h->flags, ccoip_aead_offer(getenv("PCCL_AEAD"), &unknown));
        if (pick == CCOIP_AEAD_NONE) {
            ack->status = CCOIP_HELLO_ENCRYPTION;
            memset(&ack->uuid, 0, sizeof ack->uuid);
            LOG_WARN(MOD, "refused %s: it offers no AEAD this master runs (its flags 0x%x; PCCL_AEAD)", c->name,
                     h->flags);
            return false;
        }
        ack->flags |= ccoip_aead_flag(pick);
    }
    ccoip_auth_nonce(ack->nonce);
    ccoip_auth_mac(&st->key, CCOIP_AUTH_ACCEPTOR, h, ack, ack->mac);
    ccoip_auth_mac(&st->key, CCOIP_AUTH_CONNECTOR, h, ack, c->auth_expect);
    if (st->encrypt) ccoip_auth_session(&st->key, CCOIP_AUTH_ACCEPTOR, h, ack, &c->sess);
    c->phase = CCOIP_MPHASE_PROVING;
    return true;
}

bool ccoip_mauth_on_auth(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_auth_t *a) {
    bool ok = a->ok && ccoip_auth_mac_eq(c->auth_expect, a->mac);
    memset(c->auth_expect, 0, sizeof c->auth_expect);
    ccoip_packet_t r;
    memset(&r, 0, sizeof r);
    r.type = CCOIP_PKT_AUTH_RESULT;
    r.u.auth_result.status = ok ? CCOIP_HELLO_OK : CCOIP_HELLO_SECRET;
    if (!st->shutting_down) st->send(st->ctx, c, &r);
    c->seal_now = ok && st->encrypt; /* every packet after this AUTH_RESULT, both ways */
    if (!ok)
        LOG_WARN(MOD, "refused %s: %s", c->name,
                 a->ok ? "wrong run secret" : "it says our proof failed: its run secret differs from ours");
    return ok;
}

static bool same_ip(const ccoip_inet_address_t *a, const ccoip_inet_address_t *b) {
    if (a->protocol != b->protocol) return false;
    return a->protocol == inetIPv4 ? memcmp(a->ipv4.data, b->ipv4.data, 4) == 0 : memcmp(a->ipv6.data, b->ipv6.data, 16) == 0;
}

/* Of addr's connections, the oldest that has sent nothing for CCOIP_EVICT_SILENT_MS (a peer sends
 * its HELLO as soon as it connects), or NULL. */
static ccoip_mclient_t *oldest_silent(ccoip_master_state_t *st, const ccoip_inet_address_t *addr) {
    ccoip_mclient_t *oldest = NULL;
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (c->phase != CCOIP_MPHASE_CONNECTED || c->heard || !same_ip(&c->addr, addr) ||
            st->now_ms - c->connected_ms < CCOIP_EVICT_SILENT_MS)
            continue;
        if (oldest == NULL || c->connected_ms < oldest->connected_ms) oldest = c;
    }
    return oldest;
}

bool ccoip_mauth_may_connect(ccoip_master_state_t *st, const ccoip_inet_address_t *addr, const char *name) {
    size_t unjoined = 0;
    for (size_t i = 0; i < st->nclients; i++)
        unjoined += st->clients[i]->phase < CCOIP_MPHASE_REGISTERED && same_ip(&st->clients[i]->addr, addr);
    /* Many peers share one address behind a NAT: a stranger there holding idle connections must
     * not lock them out until its connections' handshake timeout, so its oldest goes instead. */
    ccoip_mclient_t *squatter = unjoined >= CCOIP_MAX_UNJOINED_PER_ADDR ? oldest_silent(st, addr) : NULL;
    if (squatter != NULL && st->nclients < CCOIP_MAX_CONNECTIONS) {
        st->machine.drop(st, squatter, "evicted for a new connection: the oldest silent one of its address");
        return true;
    }
    const char *why = st->nclients >= CCOIP_MAX_CONNECTIONS ? "too many connections"
                      : unjoined >= CCOIP_MAX_UNJOINED_PER_ADDR ? "too many unjoined connections from its address"
                                                                : NULL;
    if (why == NULL) return true;
    st->refused_conns++;
    LOG_DEBUG(MOD, "closed %s: %s", name, why);
    if (st->refused_warned_ms == 0 || st->now_ms - st->refused_warned_ms >= 5000) {
        LOG_WARN(MOD, "closed %llu connections over the caps (%d in all, %d unjoined per address); the last: %s, %s",
                 (unsigned long long) st->refused_conns, CCOIP_MAX_CONNECTIONS, CCOIP_MAX_UNJOINED_PER_ADDR, name, why);
        st->refused_conns = 0;
        st->refused_warned_ms = st->now_ms == 0 ? 1 : st->now_ms;
    }
    return false;
}
