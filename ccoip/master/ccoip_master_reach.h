/* ccoip_master_reach.h: who can be dialled, and who dials each ring edge (docs/nat.md).
 *
 * When a peer joins, the master connects back to the address it saw the peer come from (or the
 * one the peer advertised) and the p2p port it announced. A peer that cannot be reached there
 * (behind a NAT router or a firewall that drops inbound connections) still dials out fine, so a
 * ring edge with one unreachable end is dialled by that end: the edge's sender waits for its
 * receiver's connections (CCOIP_PEER_TX_REVERSED) and the receiver dials (RX_REVERSED). Peers that
 * the master sees at one address (one NAT router) dial each other at their own addresses. The
 * ring order puts unreachable peers between reachable ones where there are enough of those,
 * those of one site side by side: an edge between two unreachable peers of different sites has
 * nobody to dial it: both ends dial each other at once (hole punching, where the master learnt
 * their punch ports) or it runs through the relay. Pure: the state machine asks. */
#ifndef CCOIP_MASTER_REACH_H
#define CCOIP_MASTER_REACH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip/master/ccoip_master_members.h"

/* Records where the others dial c: what its JOIN advertised, or the address the master saw and
 * the ports c announced. */
void ccoip_mreach_take_join(ccoip_mclient_t *c, const ccoip_join_t *j);

/* Whether a and b sit behind one public address (the master sees both at it) and neither
 * advertised another: they dial each other at their own addresses, whether or not anyone else
 * can (peers behind one NAT router, peers of one host). */
bool ccoip_mreach_same_site(const ccoip_mclient_t *a, const ccoip_mclient_t *b);

/* Whether a and b run on one host (they share its cores): the master sees them at one address
 * and their own addresses (JOIN's local_addr) are one too, where both named one; peers of one
 * site behind a NAT router are on different hosts. */
bool ccoip_mreach_same_host(const ccoip_mclient_t *a, const ccoip_mclient_t *b);

/* Where `viewer` dials c: c's own address and ports for a peer of its site, else c's dial_*. */
void ccoip_mreach_dial_for(const ccoip_mclient_t *viewer, const ccoip_mclient_t *c, ccoip_inet_address_t *addr,
                           uint16_t *p2p, uint16_t *ss, uint16_t *bench);

/* Whether the edge from -> to is punched: both ends unreachable (not one site, not on loopback),
 * from's TX and to's RX punch ports known, and no punch of either end failed yet. */
bool ccoip_mreach_punched(const ccoip_mclient_t *from, const ccoip_mclient_t *to);

/* The flag of the edge from -> to in the entry naming `to` in from's P2P_INFO
 * (CCOIP_PEER_TX_REVERSED, TX_PUNCHED, TX_RELAYED or 0), and in the entry naming `from` in to's
 * (RX_REVERSED, RX_PUNCHED, RX_RELAYED or 0). An edge between two unreachable ends is punched
 * where it can be, else relayed when the run has a relay (`relay`), else dialled as any (and
 * fails unless a path exists after all). */
uint16_t ccoip_mreach_tx_flags(const ccoip_mclient_t *from, const ccoip_mclient_t *to, bool relay);
uint16_t ccoip_mreach_rx_flags(const ccoip_mclient_t *from, const ccoip_mclient_t *to, bool relay);

/* How the edge from -> to is made, for the status page and logs: "direct", "reversed",
 * "punched" or "relayed" (as ccoip_mreach_tx_flags decides it). */
const char *ccoip_mreach_edge_kind(const ccoip_mclient_t *from, const ccoip_mclient_t *to, bool relay);

/* Reorders each peer group's members in ring (their places in it kept) so that no two
 * unreachable ones of different sites are neighbours, where the group has as many reachable ones
 * as such sites; a group without such neighbours keeps its order. True when anything moved. */
bool ccoip_mreach_place(ccoip_mclient_t **ring, size_t n);

/* "address:port" where the others dial c. */
void ccoip_mreach_format(const ccoip_mclient_t *c, char *out, size_t n);

#endif /* CCOIP_MASTER_REACH_H */
