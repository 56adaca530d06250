/* ccoip_peer_shared.h: the peer's shared-state transfers (ccoip_peer_shared.c): a listener that
 * serves the tensors of the sync in progress to the peers the master announced, and the fetch of
 * tensors from other peers' listeners. pccl_shared_state.c drives both from the API thread.
 *
 * Stream on a shared-state connection: HELLO (role SHARED_STATE, our UUID) -> HELLO_ACK, then
 * requests one after another: SS_REQUEST (byte ranges: name, offset, length) -> SS_HEADER (status,
 * names and whole sizes), then the raw bytes of every range in the request's order, straight from
 * the server's tensors into the receiver's, each range followed by the XXH3-64 of its bytes as the
 * server read them (8 bytes, big-endian; protocol 12): the receiver hashes what arrived and drops
 * a server whose bytes do not match; an empty SS_REQUEST ends it (the receiver is through). */
#ifndef CCOIP_PEER_SHARED_H
#define CCOIP_PEER_SHARED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip/wire/ccoip_auth.h"
#include "ccoip/wire/ccoip_packets.h"
#include "pccl.h"

/* The listener and serving state of one communicator (pcclComm_t.ss). */
typedef struct ccoip_peer_ss_t ccoip_peer_ss_t;

/* One tensor of the sync in progress. Slots are kept sorted by name (ccoip_ss_find). */
typedef struct ccoip_ss_slot_t {
    const char *name;
    void *data;     /* the user's memory (host or CUDA device) */
    uint64_t bytes;
    bool device;    /* CUDA memory: staged through a host buffer */
} ccoip_ss_slot_t;

/* The listener: started by pcclConnect (its port goes to the master in C2M_JOIN), stopped by
 * pcclDestroyCommunicator. */
pcclResult_t ccoip_ss_start(pcclComm_t *comm);
void ccoip_ss_stop(pcclComm_t *comm);
uint16_t ccoip_ss_port(const pcclComm_t *comm);

/* Serving, for one sync: begin (slots stay the caller's and must outlive serve_end), allow the
 * peers the master announced, end (refuses new requests, cuts what still runs, joins every
 * serving thread; returns the tensor bytes sent since begin). */
void ccoip_ss_serve_begin(pcclComm_t *comm, const ccoip_ss_slot_t *slots, size_t n);
void ccoip_ss_serve_allow(pcclComm_t *comm, const ccoip_ss_result_t *r);
uint64_t ccoip_ss_serve_end(pcclComm_t *comm);
/* Without the master's DONE (its link broke): waits until every peer allowed has received all it
 * asked us for; false when one did not and nothing was sent for PCCL_SS_TIMEOUT_MS. */
bool ccoip_ss_serve_drain(pcclComm_t *comm);

/* Bytes [off, off + len) of a slot. */
typedef struct ccoip_ss_piece_t {
    const ccoip_ss_slot_t *slot;
    uint64_t off, len;
} ccoip_ss_piece_t;

/* The range hash after a range's bytes. */
#define CCOIP_SS_TRAILER 8u

static inline void ccoip_ss_put_hash(uint8_t *b, uint64_t h) {
    for (int i = 0; i < 8; i++) b[i] = (uint8_t) (h >> (56 - 8 * i));
}

static inline uint64_t ccoip_ss_get_hash(const uint8_t *b) {
    uint64_t h = 0;
    for (int i = 0; i < 8; i++) h = h << 8 | b[i];
    return h;
}

const ccoip_ss_slot_t *ccoip_ss_find(const ccoip_ss_slot_t *slots, size_t n, const char *name);
/* PCCL_SS_TIMEOUT_MS: no byte for this long fails a transfer. */
int64_t ccoip_ss_stall_ms(const pcclComm_t *comm);
/* Connections of a sync made the other way round (ccoip_ss_dial.h): a distributor that dials
 * its receiver, or both the relay. The receiver's table of distributors that dial it
 * (ccoip_ss_mailbox.h), and the end of serving before serve_end (no new connection is served;
 * the dialling threads then end and are joined). */
struct ccoip_ss_mailbox_t *ccoip_ss_mailbox_of(pcclComm_t *comm);
void ccoip_ss_serve_close(pcclComm_t *comm);
/* A connection a distributor dialled (handshake done, we accepted): served like one the
 * listener accepted; false (fd closed) when serving ended or we are full. */
bool ccoip_ss_serve_fd(pcclComm_t *comm, int fd, const ccoip_uuid_t *uuid, const ccoip_session_t *sess,
                       const char *who);
/* The listener's handling of a new connection (HELLO not read yet), also for one that came
 * through the relay. */
void ccoip_ss_take_incoming(pcclComm_t *comm, int fd, const char *who);
bool ccoip_ss_serving(pcclComm_t *comm);

/* What the last failed fetch had received (ccoip_ss_resume.h), kept for the retry; freed by
 * ccoip_ss_stop. */
struct ccoip_ss_resume_t **ccoip_ss_resume_of(pcclComm_t *comm);

#endif /* CCOIP_PEER_SHARED_H */
