/* ccoip_master_state.h: the master's decisions, free of I/O. The libuv layer (ccoip_master.c)
 * feeds it decoded packets, closes and clock ticks; it answers through two callbacks (send a
 * packet to a client, close a client). Everything runs on the master's loop thread: no locks. */
#ifndef CCOIP_MASTER_STATE_H
#define CCOIP_MASTER_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip/master/ccoip_master_admit.h"
#include "ccoip/wire/ccoip_auth.h"
#include "ccoip/wire/ccoip_packets.h"

typedef enum ccoip_mphase_t {
    CCOIP_MPHASE_CONNECTED = 0,  /* no HELLO yet */
    CCOIP_MPHASE_PROVING = 1,    /* HELLO answered with our proof; its AUTH is owed (with a secret) */
    CCOIP_MPHASE_GREETED = 2,    /* HELLO (and AUTH) done, no JOIN yet */
    CCOIP_MPHASE_REGISTERED = 3, /* joined, waiting for the accepted peers to admit it */
    CCOIP_MPHASE_ACCEPTED = 4
} ccoip_mphase_t;

typedef enum ccoip_mstate_t {
    CCOIP_MSTATE_IDLE = 0,
    CCOIP_MSTATE_VOTE_ACCEPT = 1,    /* in pcclUpdateTopology, waiting for the others */
    CCOIP_MSTATE_CONNECTING_P2P = 2, /* told its neighbours, waiting for its P2P_ESTABLISHED */
    CCOIP_MSTATE_VOTE_RELINK = 3,    /* a failed all-reduce's await: a round that admits nobody */
    CCOIP_MSTATE_VOTE_OPTIMIZE = 4,  /* in pcclOptimizeTopology, waiting for the others */
    CCOIP_MSTATE_BENCHMARKING = 5    /* measuring bandwidths for pcclOptimizeTopology */
    /* later: in collective, syncing shared state, benchmarking */
} ccoip_mstate_t;

/* One collective (by tag) as one client takes part in it. */
typedef enum ccoip_mcoll_phase_t {
    CCOIP_MCOLL_FREE = 0,
    CCOIP_MCOLL_WAITING = 1,   /* asked to start; waits for the rest of its group */
    CCOIP_MCOLL_RUNNING = 2,   /* commenced */
    CCOIP_MCOLL_COMPLETED = 3, /* reported its outcome; waits for the rest */
    CCOIP_MCOLL_ABORTED = 4    /* a watchdog ended it while it ran: DONE(TIMEOUT) is sent, its
                                  COMPLETE is still owed and freed the entry when it comes */
} ccoip_mcoll_phase_t;

#define CCOIP_MAX_COLLECTIVES 16 /* collectives in flight per peer */

typedef struct ccoip_mcoll_t {
    uint8_t phase; /* ccoip_mcoll_phase_t */
    bool ok;       /* as reported in COMPLETE */
    bool aborted;  /* a member left while it ran */
    ccoip_collective_init_t desc;
} ccoip_mcoll_t;

/* A collective's outcome as one member was told it (DONE), or would have been had it stayed: kept
 * so that a member whose link broke before it read its DONE can ask after reconnecting
 * (C2M_COLLECTIVE_QUERY, docs/group-state-machine.md). */
typedef struct ccoip_mverdict_t {
    uint64_t tag;
    uint8_t status; /* ccoip_result_status_t */
    bool set;
} ccoip_mverdict_t;

#define CCOIP_MASTER_VERDICTS 8 /* the last DONEs sent to a member */
#define CCOIP_MASTER_GONE_VERDICTS (CCOIP_MASTER_VERDICTS + CCOIP_MAX_COLLECTIVES)

/* A client's part in shared-state syncs (ccoip_master_shared.c); NULL until its first sync. */
typedef struct ccoip_mss_t ccoip_mss_t;

typedef struct ccoip_mclient_t {
    uint64_t id; /* connection order: also the ring order */
    ccoip_mphase_t phase;
    ccoip_mstate_t state;
    bool pending_vote; /* in pcclArePeersPending: beside `state`, since collectives and a relink of
                          another thread of the peer may run meanwhile (PCCL's rule) */
    ccoip_uuid_t uuid;
    uint32_t peer_group;
    ccoip_inet_address_t addr; /* as the master saw the connection */
    bool loopback;
    uint16_t p2p_port, ss_port, bench_port;
    bool dropped;
    bool heard;   /* it sent a byte: not a silent connection to evict (ccoip_mauth_may_connect) */
    bool in_round;
    int round_ok; /* -1 not reported, 0 failed, 1 established */
    ccoip_uuid_t round_failed; /* round_ok 0: the neighbour it could not link with (P2P_ESTABLISHED) */
    uint8_t round_why;         /* ... and why (ccoip_link_why_t) */
    ccoip_madmit_t admit; /* a newcomer's failed admissions (ccoip_master_admit.h) */
    uint64_t connected_ms, last_seen_ms;
    ccoip_mcoll_t colls[CCOIP_MAX_COLLECTIVES];
    ccoip_mverdict_t verdicts[CCOIP_MASTER_VERDICTS]; /* a ring of the DONEs sent to it */
    uint32_t nverdicts;
    bool ring_stale; /* its group lost a member since the last topology round */
    ccoip_uuid_t next; /* REJOIN: its ring successor before the master was lost; zero once used */
    ccoip_mss_t *ss; /* shared-state sync: request, phase, last synced revision */
    bool has_result;    /* REJOIN: it got a sync RESULT from the master before, */
    uint64_t result_rev; /* electing this revision */
    bool querying;      /* a C2M_SHARED_STATE_QUERY waits for its answer, */
    uint64_t query_rev; /* about this revision */
    uint8_t auth_expect[CCOIP_MAC_LEN]; /* PROVING: the MAC its AUTH must carry */
    char name[64]; /* "ip:port" for log lines */
    void *io;      /* the I/O layer's connection */
    struct pcclDeterminismFingerprint_t *fp; /* C2M_FINGERPRINT, if it sent one (ccoip_master_fp.c) */
} ccoip_mclient_t;

typedef struct ccoip_master_options_t {
    uint64_t handshake_timeout_ms; /* HELLO and JOIN must arrive within this */
    uint64_t heartbeat_timeout_ms; /* silence after which a peer is dropped */
    uint64_t round_timeout_ms;     /* a topology round that takes longer fails */
    /* REJOIN (a member back after losing the master) is taken within this long after the master
     * started (a restarted master cannot know the run's members) or after it dropped that UUID;
     * 0 refuses every REJOIN. */
    uint64_t rejoin_window_ms;
    /* After REJOINs, the first topology round waits at most this long (from the first REJOIN)
     * for the ring successors the members reported that have not rejoined yet (issue 29). */
    uint64_t rejoin_grace_ms;
    /* A newcomer whose links failed this many admission rounds is refused (pcclConnect fails). */
    uint32_t admit_tries;
    uint8_t fingerprint_mode;      /* ccoip_fp_mode_t: what a fingerprint mismatch does */
    bool strict_revisions; /* PCCL_STRICT=revision: a peer that synced gives its last revision + 1 */
} ccoip_master_options_t;

/* The admission rule on determinism fingerprints (docs/fingerprint.md; pccl-master --fingerprint). */
typedef enum ccoip_fp_mode_t {
    CCOIP_FP_CHECK = 0,   /* refuse a peer whose fingerprint differs from the run's (the default) */
    CCOIP_FP_LOG = 1,     /* admit it, logging what differs */
    CCOIP_FP_REQUIRE = 2, /* CHECK, and refuse peers that show none */
    CCOIP_FP_OFF = 3      /* ignore fingerprints */
} ccoip_fp_mode_t;

void ccoip_master_default_options(ccoip_master_options_t *o);

/* Totals since the master started, for the status endpoint (ccoip_master_status.c). */
typedef struct ccoip_mcounters_t {
    uint64_t peers_admitted, peers_dropped; /* dropped: accepted peers that left */
    uint64_t collectives_ok, collectives_failed, collectives_timed_out;
    uint64_t allreduce_bytes;   /* successful all-reduces: count x element size, once each */
    uint64_t shared_state_syncs, shared_state_bytes; /* elections; bytes they sent peers to fetch */
} ccoip_mcounters_t;

#define CCOIP_MASTER_GONE_SLOTS 256

typedef struct ccoip_master_state_t {
    ccoip_mclient_t **clients;
    size_t nclients, cap;
    uint64_t round;
    uint64_t round_floor; /* the highest round a REJOIN reported: new rounds are numbered above */
    uint64_t first_rejoin_ms; /* when the first REJOIN came (0: none yet); rejoin_grace_ms counts from it */
    bool grace_over;          /* the tick after the grace re-evaluated the votes */
    bool round_active;
    uint64_t round_started_ms;
    uint64_t now_ms;  /* the clock as of the last entry point */
    uint64_t next_id;
    uint64_t start_ms; /* when the loop started: the recovery window counts from here */
    struct {
        ccoip_uuid_t uuid;
        uint64_t ms;
        ccoip_mverdict_t verdicts[CCOIP_MASTER_GONE_VERDICTS]; /* its last DONEs, then what it was in */
    } gone[CCOIP_MASTER_GONE_SLOTS]; /* accepted peers dropped lately, for REJOIN (a ring) */
    uint32_t ngone;
    bool shutting_down;
    ccoip_master_options_t opt;
    /* Set by the I/O layer. send may fail silently (the I/O layer then closes that client later);
     * close must not call back into the state. */
    void (*send)(void *ctx, ccoip_mclient_t *c, const ccoip_packet_t *p);
    void (*close)(void *ctx, ccoip_mclient_t *c);
    void (*make_uuid)(void *ctx, ccoip_uuid_t *out);
    void *ctx;
    struct ccoip_mbw_t *bw; /* bandwidth matrix and optimisation (ccoip_master_bw.c); NULL until used */
    ccoip_mcounters_t counters;
    bool has_secret; /* every connection must prove the run secret (ccoip_master_auth.c) */
    bool encrypt;    /* every member must encrypt its p2p links (PCCL_ENCRYPT; needs the secret) */
    ccoip_auth_key_t key;
    uint64_t refused_conns, refused_warned_ms; /* over the connection caps, since the last warning */
    struct pcclDeterminismFingerprint_t *run_fp; /* the first admitted peer's fingerprint */
} ccoip_master_state_t;

void ccoip_mstate_init(ccoip_master_state_t *st, const ccoip_master_options_t *opt);
void ccoip_mstate_free(ccoip_master_state_t *st);

/* A new connection; returns false (and the caller closes it) when out of memory. */
bool ccoip_mstate_add(ccoip_master_state_t *st, ccoip_mclient_t *c, uint64_t now_ms);

/* One decoded packet from c. */
void ccoip_mstate_on_packet(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_packet_t *p, uint64_t now_ms);

/* Removes c (its connection closed, or it broke the protocol: `why` is logged), tells the others
 * what changed, and asks the I/O layer to close it. Safe to call twice. */
void ccoip_mstate_drop(ccoip_master_state_t *st, ccoip_mclient_t *c, const char *why);

/* The same for bad input or a timeout: logged as a warning. */
void ccoip_mstate_reject(ccoip_master_state_t *st, ccoip_mclient_t *c, const char *why);

/* Before a shutdown on purpose: tells every joined peer not to reconnect (M2C_BYE). */
void ccoip_mstate_say_bye(ccoip_master_state_t *st);

/* Timeouts: handshakes, heartbeats, rounds. */
void ccoip_mstate_tick(ccoip_master_state_t *st, uint64_t now_ms);

/* Determinism fingerprints (ccoip_master_fp.c): keep c's; at JOIN, true when c may register
 * (else `why` says what differs); forget c's when it leaves; free the run's at the end. */
void ccoip_mfp_on_packet(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_fingerprint_t *f);
bool ccoip_mfp_admit(ccoip_master_state_t *st, ccoip_mclient_t *c, char *why, size_t n);
void ccoip_mfp_on_leave(ccoip_mclient_t *c);
void ccoip_mfp_free(ccoip_master_state_t *st);

/* Collectives (ccoip_master_coll.c): INIT and COMPLETE packets, and a member leaving. */
void ccoip_mcoll_on_init(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_collective_init_t *init);
void ccoip_mcoll_on_complete(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_collective_complete_t *done);
void ccoip_mcoll_on_leave(ccoip_master_state_t *st, const ccoip_mclient_t *gone);
/* The group's ring is going away (a member left, or voted to relink): every member is stale,
 * waiting collectives are refused, running ones aborted (their outcome: failed for all). */
void ccoip_mcoll_break_group(ccoip_master_state_t *st, uint32_t group);
/* The group's ring went stale: every member waiting for the others to start a collective gets
 * COMMENCE(failed) now (an INIT while stale gets it at once, too). */
void ccoip_mcoll_refuse_waiting(ccoip_master_state_t *st, uint32_t group);
/* C2M_COLLECTIVE_ABORT: c's watchdog gave up on a collective; it ends with TIMEOUT for the group. */
void ccoip_mcoll_on_abort(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_collective_abort_t *a);
/* A member that reconnected asks for the verdict on `tag`: what this master told, or would have
 * told, the UUID it had before (a DONE; status UNKNOWN when it never decided it). */
void ccoip_mcoll_on_query(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_collective_abort_t *q);
/* On dropping accepted member c: its verdicts for the gone table, CCOIP_MASTER_GONE_VERDICTS into
 * out (its collectives in flight end FAILED for the group, or TIMEOUT where a watchdog already
 * ended them). */
void ccoip_mcoll_keep_verdicts(const ccoip_mclient_t *c, ccoip_mverdict_t *out);
/* The verdict kept for a dropped member's UUID and `tag`, or NULL. */
const ccoip_mverdict_t *ccoip_mstate_gone_verdict(const ccoip_master_state_t *st, const ccoip_uuid_t *uuid,
                                                  uint64_t tag);

/* The status endpoint's page (Prometheus text format 0.0.4) into buf; returns its length, which
 * may exceed cap (then buf holds a truncated page: call again with more room). */
size_t ccoip_mstatus_render(const ccoip_master_state_t *st, char *buf, size_t cap);

/* Refuses (as a mismatch) the votes of group's accepted members that are in pcclUpdateTopology or
 * pcclArePeersPending: the others of their group gave up waiting for them in a collective. */
void ccoip_mstate_refuse_votes(ccoip_master_state_t *st, uint32_t group);

/* Shared state (ccoip_master_shared.c): SYNC and DONE packets, and a client leaving (which also
 * frees its sync state; called for every dropped client, accepted or not). */
void ccoip_mss_on_sync(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_ss_sync_t *req);
/* Elects the syncs that wait for nothing more (after the rejoin grace held them), and answers the
 * queries of members whose sync lost its DONE (C2M_SHARED_STATE_QUERY). */
void ccoip_mss_evaluate_all(ccoip_master_state_t *st);
void ccoip_mss_on_query(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_ss_query_t *q);
/* After a restart: a ring successor that a rejoined member named is not back yet, and the grace
 * (rejoin_grace_ms since the first REJOIN) is not over. Topology rounds and syncs wait. */
bool ccoip_mstate_awaiting_rejoins(const ccoip_master_state_t *st);
void ccoip_mss_on_done(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_ss_done_t *done);
/* A member's watchdog gave up waiting for the RESULT: the sync ends for the group with TIMEOUT
 * (ignored once the RESULT went out: it crossed the abort). */
void ccoip_mss_on_abort(ccoip_master_state_t *st, ccoip_mclient_t *c);
void ccoip_mss_on_leave(ccoip_master_state_t *st, ccoip_mclient_t *gone, bool was_accepted);
/* REJOIN: c synced successfully before, at revision last_rev (the revision rule goes on from it).
 * False when out of memory. */
bool ccoip_mss_restore(ccoip_master_state_t *st, ccoip_mclient_t *c, uint64_t last_rev);
/* A member of group entered a vote: members waiting in a sync get RESULT(stale) now. */
void ccoip_mss_refuse_waiting(ccoip_master_state_t *st, uint32_t group);
/* True when an accepted member of group is in a vote (update, pending, optimize). */
bool ccoip_mstate_group_votes(const ccoip_master_state_t *st, uint32_t group);

/* Topology optimisation (ccoip_master_bw.c): start when every accepted peer voted, reports,
 * a client leaving (drops its matrix row and column; fails a session it takes part in), the step
 * timeout, and freeing the matrix. */
void ccoip_mbw_start(ccoip_master_state_t *st);
bool ccoip_mbw_active(const ccoip_master_state_t *st);
void ccoip_mbw_on_report(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_bench_report_t *r);
void ccoip_mbw_on_leave(ccoip_master_state_t *st, const ccoip_mclient_t *gone);
void ccoip_mbw_tick(ccoip_master_state_t *st);
void ccoip_mbw_free(ccoip_master_state_t *st);
/* Starts a topology round of the accepted peers only (no admission): each is told its ring
 * neighbours by the current ring order (ids), as pcclUpdateTopology's round does. */
void ccoip_mstate_relink(ccoip_master_state_t *st);

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
#define CCOIP_MAX_UNJOINED_PER_ADDR 128 /* 64 peers behind one NAT may connect at once */
#define CCOIP_EVICT_SILENT_MS 1000
bool ccoip_mauth_may_connect(ccoip_master_state_t *st, const ccoip_inet_address_t *addr, const char *name);

/* The four attributes as c would see them now. */
ccoip_world_t ccoip_mstate_world(const ccoip_master_state_t *st, const ccoip_mclient_t *c);

#endif /* CCOIP_MASTER_STATE_H */
