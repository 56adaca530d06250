/* ccoip_peer_int.h: the communicator, private to the peer-side files of ccoip
 * (ccoip_peer_link.c, ccoip_peer_p2p.c, ccoip_peer.c, pccl_comm.c). */
#ifndef CCOIP_PEER_INT_H
#define CCOIP_PEER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ccoip/peer/ccoip_abort.h"
#include "ccoip/peer/ccoip_datalink.h"
#include "ccoip/net/ccoip_chan.h"
#include "ccoip/net/ccoip_listener.h"
#include "ccoip/peer/ccoip_p2p.h"
#include "ccoip/peer/ccoip_punch.h"
#include "ccoip/wire/ccoip_auth.h"
#include "ccoip/wire/ccoip_packets.h"
#include "pccl.h"
#include "profiler/pprof.h"

#define CCOIP_MAILBOX_SIZE 16
#define CCOIP_LINK_KEEP_BYTES (1u << 20)
#define CCOIP_MAX_ARRIVALS (2 * CCOIP_P2P_MAX_STREAMS + 8) /* a pool of the current round and strays */

/* A p2p connection our listener accepted and handshook, waiting for the API thread. */
typedef struct ccoip_arrival_t {
    int fd;
    ccoip_uuid_t uuid;
    uint64_t round;
    uint8_t stream, streams; /* from P2P_BIND */
    bool reversed;           /* P2P_BIND's: the dialler receives on it (we send) */
    ccoip_session_t sess;    /* the link's keys when encrypted */
} ccoip_arrival_t;

typedef struct ccoip_peer_p2p_t {
    ccoip_listener_t listener;
    pthread_mutex_t lock; /* guards allowed/arrivals */
    ccoip_uuid_t allowed[2]; /* UUIDs the master told us to accept from */
    int nallowed;
    ccoip_arrival_t arrivals[CCOIP_MAX_ARRIVALS];
    int narrivals;
    ccoip_p2p_links_t links; /* API thread only */
    /* An RX link we dial (CCOIP_PEER_RX_RELAYED, RX_PUNCHED): a thread dials the relay or punches,
     * and takes the connection as if the listener had accepted it; relay_fd (under lock) lets
     * the API thread cut it short. */
    pthread_t relay_thread;
    bool relay_started;
    int relay_fd;
} ccoip_peer_p2p_t;

#define CCOIP_MAX_OPS 16     /* collectives in flight per communicator (the master's colls[] per peer) */
#define CCOIP_MAX_STREAMS CCOIP_P2P_MAX_STREAMS

typedef enum ccoip_op_state_t { CCOIP_OP_FREE = 0, CCOIP_OP_QUEUED, CCOIP_OP_RUNNING, CCOIP_OP_FINISHED } ccoip_op_state_t;

/* One all-reduce in flight. Fields above `word` are guarded by colls.lock. */
typedef struct ccoip_op_t {
    uint32_t state;     /* ccoip_op_state_t */
    bool async;         /* run by a worker, freed by pcclAwaitAsyncReduce */
    uint64_t tag, seq;  /* seq: submission order (workers take the oldest) */
    const void *sendbuf;
    void *recvbuf;
    pcclReduceDescriptor_t desc;
    struct ccoip_gate_t *gate;     /* pcclAllReduceOnStream: the caller's stream waits on it */
    ccoip_packet_t commence, done; /* routed replies; type 0 until they arrive */
    /* Pool streams, fixed at COMMENCE (the same on every peer): [first, first + width) each
     * way; a striped op (ccoip_stripe.h) has all of them, another op one. turn[s]: the op's
     * place in stream s's queue. */
    uint32_t tx_first, tx_width, rx_first, rx_width;
    uint64_t tx_turn[CCOIP_P2P_MAX_STREAMS], rx_turn[CCOIP_P2P_MAX_STREAMS];
    pcclResult_t result;
    pcclReduceInfo_t info;
    _Atomic uint32_t word;          /* bumped on every routed reply and on finishing */
    _Atomic uint32_t abort, doorbell; /* the ring's abort flag and completion doorbell */
    /* The watchdog (ccoip_watchdog.c, master-link thread; under colls.lock): word + doorbell as
     * last seen and since when; queued while it waits for its stream turn (another op's time). */
    uint32_t wd_seen;
    int64_t wd_since_ms;
    bool wd_queued, wd_fired;
    void *prof_parent, *prof; /* profiler handles: its API call (sync ops), the collective */
    uint64_t epoch; /* comm->round_epoch when it started: a failure relinks unless a round came since */
    uint64_t links_gen; /* colls.links_gen of its INIT, then of its ring: it retires only those links */
    bool awaited;   /* pcclAwaitAsyncReduce has it (relinking, then freeing the slot) */
} ccoip_op_t;

/* The ops of a stream run one at a time, in COMMENCE order (the same on every peer): `serving`
 * is the turn now allowed, `done` marks later turns that finished early (aborted). */
typedef struct ccoip_stream_t {
    ccoip_datalink_t *dl;
    uint64_t next_turn, serving, done;
} ccoip_stream_t;

typedef struct ccoip_colls_t {
    pthread_mutex_t lock;
    ccoip_op_t ops[CCOIP_MAX_OPS];
    uint64_t next_seq;
    _Atomic uint32_t work; /* workers park here; bumped on every submission and on stop */
    pthread_t workers[CCOIP_MAX_OPS];
    uint32_t nworkers, nasync; /* nasync: async ops queued or running */
    bool stop;
    /* Streams of the current topology round: made on first use, retired after a failure. */
    bool made, retired;
    uint64_t links_gen; /* bumped whenever the links are closed for a topology round */
    ccoip_stream_t tx[CCOIP_MAX_STREAMS], rx[CCOIP_MAX_STREAMS];
    uint64_t tx_load[CCOIP_MAX_STREAMS], rx_load[CCOIP_MAX_STREAMS]; /* ccoip_stripe_take's charges */
    _Atomic uint32_t turns; /* bumped whenever a stream's serving turn moves */
    /* Ops past a COMMENCE(ok) whose ring has not ended (counted on the link thread as the
     * COMMENCE is routed, so before any later P2P_INFO): a topology round that ops of other
     * threads may overlap (a relink) waits for 0 before it replaces the links. */
    _Atomic uint32_t in_ring;
    _Atomic uint32_t timeout_ms; /* the collective timeout (PCCL_COLLECTIVE_TIMEOUT_MS) */
} ccoip_colls_t;

/* What the master-link thread delivers, and to whom: the collectives register these at creation
 * (ccoip_colls_init), so that the link calls nothing above it. All run on the link thread. */
typedef struct ccoip_link_router_t {
    bool (*route)(pcclComm_t *comm, ccoip_packet_t *p);     /* COMMENCE / DONE; true when taken */
    void (*abort)(pcclComm_t *comm, bool all, uint64_t tag); /* stop the ring of `tag` (all: every op) */
    void (*master_gone)(pcclComm_t *comm);                    /* the link broke: no reply will come */
    int64_t (*tick)(pcclComm_t *comm, int64_t now_ms);       /* ms until it wants to run again */
} ccoip_link_router_t;

struct pcclComm_t {
    pcclCommCreateParams_t params;
    bool connect_called;
    atomic_bool accepted;
    ccoip_uuid_t uuid;
    /* The run secret's key (pcclSetSecret or PCCL_SECRET_FILE): every connection proves it. */
    bool has_secret;
    ccoip_auth_key_t key;
    bool encrypt; /* PCCL_ENCRYPT=1: the p2p data links are encrypted (ccoip_datalink.c) */
    bool encrypt_set; /* pcclSetEncryption decided it: PCCL_ENCRYPT is not read */

    /* The master link: the API thread writes votes, the link thread heartbeats (send_lock);
     * only the link thread reads. */
    int master_fd;
    /* Its packets, sealed on an encrypted run (ccoip_chan.h): the sending half under send_lock,
     * the receiving half the link thread's; replaced with master_fd under both locks. */
    ccoip_chan_t master_chan;
    ccoip_punch_t punch; /* hole punching's two ports (link thread at REJOIN, API thread otherwise) */
    /* The connection a reconnection is handshaking (relink), -1 when none: link_close shuts it
     * down so that a silent master cannot hold the teardown for the handshake's deadline. Both
     * fds change and close under mail_lock too, so link_close never shuts down a reused number. */
    int dialing_fd;
    pthread_mutex_t send_lock;
    /* Encodes the variable-size packets to the master (shared-state hash lists, bandwidth
     * reports) under send_lock; keeps its capacity up to CCOIP_LINK_KEEP_BYTES, so a repeated
     * sync allocates nothing (docs/memory.md). Fixed-size packets are encoded on the stack. */
    ccoip_writer_t send_buf;
    pthread_t link_thread;
    ccoip_link_router_t router;
    bool link_started;
    int link_wake[2];
    atomic_bool stopping;
    atomic_bool master_lost; /* for good: every call fails with pcclMasterConnectionFailed */
    /* Reconnecting after the master link broke (docs/master-restart.md): calls in flight fail,
     * new ones wait. `link_epoch` counts the breaks: a reply awaited across one never comes. */
    atomic_bool master_down;
    _Atomic uint32_t link_epoch;
    int64_t reconnect_ms; /* PCCL_MASTER_RECONNECT_S; 0: a break is for good */
    /* What a REJOIN reports (guarded by mail_lock): the JOIN, the ring successor of the last
     * round, the last revision synced, the last sync RESULT received (noted by the link thread
     * as it arrives: a restarted master decides a sync from every member's, docs/group-state-machine.md). */
    ccoip_join_t join;
    ccoip_uuid_t ring_next;
    uint64_t round;
    bool has_rev;
    uint64_t last_rev;
    bool has_result;
    uint64_t result_rev;

    /* Replies for the API thread. `events` is bumped (and woken) on every mailbox push, p2p
     * arrival and link loss: the one word the API thread parks on. */
    pthread_mutex_t mail_lock;
    ccoip_packet_t mail[CCOIP_MAILBOX_SIZE];
    int mail_head, mail_count;
    _Atomic uint32_t events;
    /* M2C_PENDING_RESULT apart from the mailbox: pcclArePeersPending may wait on one thread while
     * a failed all-reduce relinks the ring on another (PCCL's rule; docs/failures.md). */
    bool pending_in;
    ccoip_pending_result_t pending_reply;

    /* Topology rounds: `round_epoch` counts the ones that succeeded; `round_lock` lets one
     * relink (ccoip_peer_relink_ring) run at a time. `strict_topology` (PCCL_STRICT=topology):
     * a failed all-reduce does not relink, the caller must call pcclUpdateTopology. */
    _Atomic uint64_t round_epoch;
    pthread_mutex_t round_lock;
    bool strict_topology;

    /* The world as the master last reported it (pcclGetAttribute). */
    _Atomic uint32_t world[4];

    ccoip_abort_queue_t aborts;
    ccoip_peer_p2p_t p2p;
    struct ccoip_peer_ss_t *ss; /* the shared-state listener and serving (ccoip_peer_shared.c) */
    struct ccoip_peer_bench_t *bench; /* the benchmark listener (ccoip_peer_bench.c) */

    /* The data plane (ccoip_coll.c): `ops` are the collectives in flight (by tag), the master-link
     * thread routes COMMENCE/DONE/ABORT to them; the data links of every pool stream are made on
     * first use after each topology round; `cache` holds the staging blocks. */
    ccoip_colls_t colls;
    reduce_cache_t *cache;
    /* pcclSynchronizeSharedState's per-tensor arrays, kept between calls (grown, never shrunk)
     * so that a repeated sync allocates nothing; `ss_busy` admits one sync at a time. */
    pthread_mutex_t ss_busy;
    struct ccoip_ss_slot_t *ss_slots;
    ccoip_ss_tensor_t *ss_wire;
    size_t ss_cap;
    struct ccoip_ss_hasher_t *ss_hasher; /* the sync's batch hashing (ccoip_ss_hash.h) */
    /* pcclAllReduceMultipleWithRetry packs small tensors into buckets here (grown, never
     * shrunk, freed at destroy); `multi_busy` admits one call at a time to it. */
    void *multi_arena;
    size_t multi_arena_cap;
    atomic_bool multi_busy;
    /* Pinned host blocks for device buffers (pccl_device.h), made on first use. */
    reduce_cache_t *pinned;
    pthread_mutex_t pinned_lock;
    /* Stream gates of pcclAllReduceOnStream (ccoip_gate.h), made on first use under pinned_lock. */
    struct ccoip_gates_t *gates;

    /* The profiler plugin (docs/profiler.md); read-only between create and destroy. prof_api:
     * the parent for the events of the running call (the caller's thread only): the sync of
     * pcclSynchronizeSharedState, the API event of a topology call. */
    pprof_t prof;
    void *prof_api;
};

/* The key every connection of comm proves, NULL when the run has no secret. */
static inline const ccoip_auth_key_t *ccoip_comm_key(const pcclComm_t *comm) {
    return comm->has_secret ? &comm->key : NULL;
}

/* A session request for a handshake: encryption as this communicator asks for it. */
static inline ccoip_session_t ccoip_comm_session(const pcclComm_t *comm) {
    ccoip_session_t s;
    memset(&s, 0, sizeof s);
    s.encrypt = comm->encrypt;
    return s;
}

/* ccoip_coll.c */
void ccoip_colls_init(pcclComm_t *comm); /* also registers comm->router */
void ccoip_colls_shutdown(pcclComm_t *comm);    /* abort what runs, join the workers (destroy) */
void ccoip_colls_free(pcclComm_t *comm);
void ccoip_data_close(pcclComm_t *comm); /* stop the data links: before the p2p sockets close */
void ccoip_coll_abort(pcclComm_t *comm, bool all, uint64_t tag); /* from the master-link thread */
void ccoip_coll_master_gone(pcclComm_t *comm);                    /* from the master-link thread */
/* From the master-link thread: hands COMMENCE / DONE to the op of its tag; true when taken. */
bool ccoip_coll_route(pcclComm_t *comm, ccoip_packet_t *p);
/* True while any all-reduce (sync or async) is in flight or an async one is not yet awaited:
 * pcclUpdateTopology, pcclArePeersPending, pcclOptimizeTopology and pcclSynchronizeSharedState
 * answer pcclPendingAsyncOps then. */
bool ccoip_ops_in_flight(const pcclComm_t *comm);
/* Takes a slot for tag d->tag (pcclInvalidUsage when the tag is in flight or CCOIP_MAX_OPS are);
 * an async one is queued for a worker at once. */
pcclResult_t ccoip_op_claim(pcclComm_t *comm, const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *d,
                            bool async, ccoip_op_t **out);
/* The same for pcclAllReduceOnStream: an async op whose worker releases `gate` when it ends. */
pcclResult_t ccoip_op_claim_gated(pcclComm_t *comm, const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *d,
                                  struct ccoip_gate_t *gate, ccoip_op_t **out);
void ccoip_op_run(pcclComm_t *comm, ccoip_op_t *op);     /* INIT .. DONE; sets op->result, op->info */
void ccoip_op_release(pcclComm_t *comm, ccoip_op_t *op); /* frees an op's slot (sync, or awaited) */
/* Parks until the async op of `tag` finished; *out is it (its slot stays taken: release it), or
 * NULL with pcclInvalidArgument when no async op of that tag is in flight. */
pcclResult_t ccoip_op_await(pcclComm_t *comm, uint64_t tag, ccoip_op_t **out);
/* Parks until no op is between its COMMENCE and the end of its ring (colls.in_ring). */
void ccoip_rings_drain(pcclComm_t *comm);
/* ccoip_watchdog.c: the collective timeout. init reads PCCL_COLLECTIVE_TIMEOUT_MS (at creation);
 * tick, on the master-link thread, asks the master to abort every op that made no progress for
 * the timeout, and returns the ms until it wants to look again. */
void ccoip_watchdog_init(pcclComm_t *comm);
void ccoip_watchdog_set(pcclComm_t *comm, uint32_t timeout_ms); /* 0: the default (10 min) */
int64_t ccoip_watchdog_tick(pcclComm_t *comm, int64_t now_ms);

/* Bumps comm->events and wakes the API thread. */
void ccoip_peer_notify(pcclComm_t *comm);

/* ccoip_peer_link.c */
/* Connects, handshakes, JOINs with our listeners' ports, starts the thread. */
pcclResult_t ccoip_link_open(pcclComm_t *comm, uint16_t p2p_port, uint16_t ss_port, uint16_t bench_port);
void ccoip_link_close(pcclComm_t *comm);         /* stop and join the thread, close the socket */
/* Sends on the master link; while it reconnects, waits for it first (false when it is gone for
 * good). Records the link's epoch for this thread: see ccoip_link_broke_since_send. */
ccoip_status_t ccoip_link_send(pcclComm_t *comm, const ccoip_packet_t *p);
/* The next packet of an exchange this thread started with ccoip_link_send (a report, COMPLETE,
 * DONE): CCOIP_ERR_CLOSED, without sending, when the link broke since, because the master it
 * would reach now knows nothing of that exchange. */
ccoip_status_t ccoip_link_send_more(pcclComm_t *comm, const ccoip_packet_t *p);
/* True when the link is gone for good, or broke after this thread's last ccoip_link_send: the
 * reply it awaits will not come. */
bool ccoip_link_broke_since_send(pcclComm_t *comm);
/* The REJOIN report: the ring successor of the round just made, the revision just synced. */
void ccoip_link_note_ring(pcclComm_t *comm, const ccoip_uuid_t *next, uint64_t round);
void ccoip_link_note_revision(pcclComm_t *comm, uint64_t revision);
/* Takes the oldest mailbox packet, waiting until deadline (<0: forever). CCOIP_ERR_CLOSED when
 * the master link broke since this thread's last send, or the communicator is stopping. */
ccoip_status_t ccoip_link_wait_mail(pcclComm_t *comm, ccoip_packet_t *out, int64_t deadline_ms);
/* The same for the pending vote's reply, which bypasses the mailbox (pending_in). */
ccoip_status_t ccoip_link_wait_pending(pcclComm_t *comm, ccoip_pending_result_t *out);
void ccoip_world_store(pcclComm_t *comm, const ccoip_world_t *w);

/* ccoip_peer_p2p.c */
/* The data links run over the p2p sockets: call ccoip_data_close before stop and establish. */
pcclResult_t ccoip_p2p_start(pcclComm_t *comm); /* bump-allocate the listener, start its thread */
void ccoip_p2p_stop(pcclComm_t *comm);          /* join the thread, close every p2p socket */
/* Drops the current links and connects the new ones of `info`; returns true when both links
 * stand. Gives up early (false) when a TOPOLOGY_RESULT for this round arrives meanwhile; that
 * packet is then returned in *early (type 0 otherwise). *report is the P2P_ESTABLISHED to send:
 * on failure, the neighbour it failed with and why. */
bool ccoip_p2p_establish(pcclComm_t *comm, const ccoip_p2p_info_t *info, ccoip_packet_t *early,
                         ccoip_p2p_established_t *report);

/* ccoip_peer.c: one topology round as pcclUpdateTopology runs it (link to the neighbours of
 * `info`, report, await the outcome); pcclOptimizeTopology adopts its new ring through it. */
typedef enum ccoip_round_outcome_t {
    CCOIP_ROUND_OK = 0,
    CCOIP_ROUND_FAILED,
    CCOIP_ROUND_MISMATCH,
    CCOIP_ROUND_LOST,
    CCOIP_ROUND_RETRY,      /* failed on a newcomer: the master runs the next round at once */
    CCOIP_ROUND_UNREACHABLE /* this newcomer could not be linked, for the last time: not admitted */
} ccoip_round_outcome_t;
ccoip_round_outcome_t ccoip_peer_run_round(pcclComm_t *comm, const ccoip_p2p_info_t *info);

#endif /* CCOIP_PEER_INT_H */
