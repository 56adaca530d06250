/* ccoip_peer.h: the peer-side operations behind the public calls (arguments already checked). */
#ifndef CCOIP_PEER_H
#define CCOIP_PEER_H

#include <stdbool.h>

#include "pccl.h"

pcclResult_t ccoip_peer_connect(pcclComm_t *comm);
pcclResult_t ccoip_peer_update_topology(pcclComm_t *comm);
pcclResult_t ccoip_peer_are_peers_pending(pcclComm_t *comm, bool *pending);
/* A topology round that admits nobody, unless one succeeded since `epoch` (comm->round_epoch). */
void ccoip_peer_relink_ring(pcclComm_t *comm, uint64_t epoch);

#endif /* CCOIP_PEER_H */
