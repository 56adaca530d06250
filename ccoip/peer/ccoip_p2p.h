/* ccoip_p2p.h: the ring links of a communicator, for the data transport (all-reduce work).
 *
 * After a successful pcclConnect / pcclUpdateTopology each peer has, per peer group ring,
 * one TX socket to its next neighbour (we connected to its p2p listener) and one RX socket from
 * its previous neighbour (it connected to ours). Both are blocking, TCP_NODELAY, handshaken
 * (HELLO role P2P + P2P_BIND round) and carry nothing else yet: the transport owns them from
 * here (data frames `u64 tag | u64 offset | u32 length | bytes`, a send thread and a receive
 * thread per link). With a ring of two, TX and RX go to the same peer but are two sockets.
 * Links are replaced on every pcclUpdateTopology: take them again after each one (compare
 * `epoch`). A world of one peer has no links (fd -1). */
#ifndef CCOIP_P2P_H
#define CCOIP_P2P_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip/peer/ccoip_abort.h"
#include "ccoip/wire/ccoip_auth.h"
#include "ccoip/wire/ccoip_packets.h"
#include "pccl.h"

typedef struct ccoip_p2p_link_t {
    int fd;            /* -1: no link */
    ccoip_uuid_t peer; /* the neighbour's UUID */
} ccoip_p2p_link_t;

#define CCOIP_P2P_MAX_STREAMS 64u /* p2p_connection_pool_size is capped here (PCCL takes 32) */

typedef struct ccoip_p2p_links_t {
    uint64_t epoch; /* the topology round that made these links */
    ccoip_p2p_link_t tx, rx; /* stream 0 of each pool */
    /* The connection pool: ntx sockets to the next neighbour (our p2p_connection_pool_size), nrx
     * from the previous one (its pool size, told in P2P_BIND); [0] is tx.fd / rx.fd. 0: no link. */
    uint32_t ntx, nrx;
    int tx_fds[CCOIP_P2P_MAX_STREAMS], rx_fds[CCOIP_P2P_MAX_STREAMS];
    /* Each socket's keys from its handshake; `encrypt` false: plain (PCCL_ENCRYPT off). */
    ccoip_session_t tx_sess[CCOIP_P2P_MAX_STREAMS], rx_sess[CCOIP_P2P_MAX_STREAMS];
    /* The peers of this round at our address, us included, as the master counts them (its
     * P2P_INFO entries flagged CCOIP_PEER_SAME_HOST): who shares our cores (ccoip_splice_pays). */
    uint32_t host_peers;
} ccoip_p2p_links_t;

/* The current links (the sockets stay owned by the communicator; do not close them).
 * Call from the thread that calls the API (links change only inside pcclUpdateTopology). */
void ccoip_comm_links(const pcclComm_t *comm, ccoip_p2p_links_t *out);

/* This peer's UUID as the master assigned it (zero before pcclConnect). */
ccoip_uuid_t ccoip_comm_uuid(const pcclComm_t *comm);

/* Abort notices from the master (M2C_COLLECTIVE_ABORT); `all` is set when the master link is
 * lost or the communicator is being destroyed. */
ccoip_abort_queue_t *ccoip_comm_aborts(const pcclComm_t *comm);

#endif /* CCOIP_P2P_H */
