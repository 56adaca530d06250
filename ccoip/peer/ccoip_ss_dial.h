/* ccoip_ss_dial.h: shared-state fetch connections made the other way round (ccoip_ss_dial.c;
 * docs/nat.md). When a receiver cannot dial a distributor (the distributor is behind NAT or a
 * firewall and not of the receiver's site), the master's RESULT says so per pair:
 * - REVERSED: the distributor dials the receiver's shared-state listener, HELLO role
 *   SS_REVERSED with its own UUID; the receiver's listener hands the connection to the fetch
 *   thread waiting for that distributor (ccoip_ss_mailbox.h), which then asks for ranges over it
 *   as over one it dialled (each side seals with its own session keys).
 * - RELAYED (neither can dial the other, the master has a relay): both dial pccl-relay with the
 *   pair's token; the receiver handshakes through it as when it dials, the distributor answers
 *   as its listener would. */
#ifndef CCOIP_SS_DIAL_H
#define CCOIP_SS_DIAL_H

#include <stdint.h>

#include "ccoip/net/ccoip_socket.h"
#include "ccoip/peer/ccoip_peer_shared.h"
#include "ccoip/wire/ccoip_auth.h"
#include "ccoip/wire/ccoip_packets.h"
#include "pccl.h"

typedef struct ccoip_ss_dialers_t ccoip_ss_dialers_t;

/* Distributor: one thread per receiver of r that cannot dial us, dialling it (or the relay) until
 * it is connected and served, PCCL_SS_CONNECT_TIMEOUT_MS pass, or serving is closed
 * (ccoip_ss_serve_close); NULL when there is none. Join them (and free) after serve_close,
 * before serve_end. */
ccoip_ss_dialers_t *ccoip_ss_dial_clients(pcclComm_t *comm, const ccoip_ss_result_t *r);
void ccoip_ss_dial_join(ccoip_ss_dialers_t *dl);

#endif /* CCOIP_SS_DIAL_H */
