/* ccoip_peer_int.h: the communicator, private to the peer-side files of ccoip
 * (ccoip_peer_link.c, ccoip_peer_p2p.c, ccoip_peer.c, pccl_comm.c). */
#ifndef CCOIP_PEER_INT_H
#define CCOIP_PEER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ccoip/ccoip_abort.h"
#include "ccoip/ccoip_datalink.h"
#include "ccoip/ccoip_p2p.h"
#include "ccoip/ccoip_packets.h"
#include "pccl.h"

#define CCOIP_MAILBOX_SIZE 16
#define CCOIP_MAX_ARRIVALS 8

/* A p2p connection our listener accepted and handshook, waiting for the API thread. */
typedef struct ccoip_arrival_t {
    int fd;
    ccoip_uuid_t uuid;
    uint64_t round;
} ccoip_arrival_t;

typedef struct ccoip_peer_p2p_t {
    int listen_fd;
    uint16_t port;
    pthread_t thread;
    bool started;
    int wake[2];
    pthread_mutex_t lock; /* guards allowed/arrivals */
    ccoip_uuid_t allowed[2]; /* UUIDs the master told us to accept from */
    int nallowed;
    ccoip_arrival_t arrivals[CCOIP_MAX_ARRIVALS];
    int narrivals;
    ccoip_p2p_links_t links; /* API thread only */
} ccoip_peer_p2p_t;

struct pcclComm_t {
    pcclCommCreateParams_t params;
    bool connect_called;
    atomic_bool accepted;
    ccoip_uuid_t uuid;

    /* The master link: the API thread writes votes, the link thread heartbeats (send_lock);
     * only the link thread reads. */
    int master_fd;
    pthread_mutex_t send_lock;
    pthread_t link_thread;
    bool link_started;
    int link_wake[2];
    atomic_bool stopping;
    atomic_bool master_lost;

    /* Replies for the API thread. `events` is bumped (and woken) on every mailbox push, p2p
     * arrival and link loss: the one word the API thread parks on. */
    pthread_mutex_t mail_lock;
    ccoip_packet_t mail[CCOIP_MAILBOX_SIZE];
    int mail_head, mail_count;
    _Atomic uint32_t events;

    /* The world as the master last reported it (pcclGetAttribute). */
    _Atomic uint32_t world[4];

    ccoip_abort_queue_t aborts;
    ccoip_peer_p2p_t p2p;

    /* The data plane (pccl_allreduce.c): transports over the current ring links, made on first
     * use after each topology round, and the staging-block cache. */
    ccoip_datalink_t *data_tx, *data_rx;
    uint64_t data_epoch;
    reduce_cache_t *cache;
    /* The collective running now: the master-link thread raises `coll_abort` and rings
     * `coll_doorbell` when the master aborts `coll_tag` or the master link is lost; the ring
     * polls the flag with a plain atomic load. */
    pthread_mutex_t coll_lock; /* guards coll_active/coll_tag against the link thread */
    bool coll_active;
    uint64_t coll_tag;
    _Atomic uint32_t coll_abort, coll_doorbell;
};

/* pccl_allreduce.c */
void ccoip_data_close(pcclComm_t *comm);          /* stop the data links (before the sockets close) */
void ccoip_coll_abort(pcclComm_t *comm, bool all, uint64_t tag); /* from the master-link thread */

/* Bumps comm->events and wakes the API thread. */
void ccoip_peer_notify(pcclComm_t *comm);

/* ccoip_peer_link.c */
pcclResult_t ccoip_link_open(pcclComm_t *comm);  /* connect, handshake, JOIN, start the thread */
void ccoip_link_close(pcclComm_t *comm);         /* stop and join the thread, close the socket */
ccoip_status_t ccoip_link_send(pcclComm_t *comm, const ccoip_packet_t *p);
/* Takes the oldest mailbox packet, waiting until deadline (<0: forever). CCOIP_ERR_CLOSED when
 * the master link is gone or the communicator is stopping. */
ccoip_status_t ccoip_link_wait_mail(pcclComm_t *comm, ccoip_packet_t *out, int64_t deadline_ms);
void ccoip_world_store(pcclComm_t *comm, const ccoip_world_t *w);

/* ccoip_peer_p2p.c */
pcclResult_t ccoip_p2p_start(pcclComm_t *comm); /* bump-allocate the listener, start its thread */
void ccoip_p2p_stop(pcclComm_t *comm);          /* join the thread, close every p2p socket */
/* Drops the current links and connects the new ones of `info`; returns true when both links
 * stand. Gives up early (false) when a TOPOLOGY_RESULT for this round arrives meanwhile; that
 * packet is then returned in *early (type 0 otherwise). */
bool ccoip_p2p_establish(pcclComm_t *comm, const ccoip_p2p_info_t *info, ccoip_packet_t *early);

#endif /* CCOIP_PEER_INT_H */
