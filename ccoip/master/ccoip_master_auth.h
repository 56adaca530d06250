/* ccoip_master_auth.h: the run secret and the connection caps. */
#ifndef CCOIP_MASTER_AUTH_H
#define CCOIP_MASTER_AUTH_H

#include "ccoip/master/ccoip_master_members.h"

/* The run secret (ccoip_master_auth.c). on_hello fills a HELLO_ACK that accepted the HELLO's
 * magic, version and role: false (ack's status says why, the refusal is logged) when the secrets
 * cannot match; with a secret it adds our proof and c moves to PROVING. on_auth checks c's AUTH;
 * false when refused (logged, AUTH_RESULT sent). */
bool ccoip_mauth_on_hello(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_hello_t *h, ccoip_hello_ack_t *ack);
bool ccoip_mauth_on_auth(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_auth_t *a);
/* Whether a new connection from addr may be served: at most CCOIP_MAX_CONNECTIONS in all and
 * CCOIP_MAX_UNJOINED_PER_ADDR per address that have not joined yet (they also have only the
 * handshake timeout to do so); over the latter, the address's oldest connection that has sent
 * nothing for CCOIP_EVICT_SILENT_MS is closed to make room, else the new one is refused. A
 * refusal is logged at most every few seconds, with a count. */
#define CCOIP_MAX_CONNECTIONS 8192
/* 64 peers behind one NAT may connect at once, each with a punch map connection (ccoip_punch.h)
 * beside its own. */
#define CCOIP_MAX_UNJOINED_PER_ADDR 192
#define CCOIP_EVICT_SILENT_MS 1000
bool ccoip_mauth_may_connect(ccoip_master_state_t *st, const ccoip_inet_address_t *addr, const char *name);

#endif /* CCOIP_MASTER_AUTH_H */
