/* ccoip_master_members.h: the master's table of clients and what every part of it reads there,
 * below the state machine (ccoip_master_state.c) and its modules (collectives, shared state,
 * bandwidth, fingerprints, the run secret, the status page). The modules ask the state machine
 * for what only it decides (drop a client, relink, refuse votes) through the `machine` table it
 * fills at init: calls point one way, from the state machine down to the modules and from both
 * down to this file. Everything runs on the master's loop thread: no locks. */
#ifndef CCOIP_MASTER_MEMBERS_H
#define CCOIP_MASTER_MEMBERS_H

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
    uint16_t port;             /* ... and its source port */
    bool loopback;
    uint16_t p2p_port, ss_port, bench_port;
    /* Where the others dial it: addr and the ports above, or what it advertised (JOIN). */
    ccoip_inet_address_t dial_addr;
    uint16_t dial_p2p, dial_ss, dial_bench;
    bool advertised;           /* dial_* come from PCCL_ADVERTISE_ADDRESS */
    ccoip_inet_address_t lan_addr; /* its own address (JOIN): where peers behind the same NAT dial it */
    bool probing;   /* the master's connection back to its p2p listener is under way */
    bool reachable; /* that connection got through (or no probe was made): edges to it are dialled
                       by their other end; false: it dials them (docs/nat.md) */
    /* Its punch ports as its NAT maps them (C2M_PUNCH_MAP, before its JOIN; 0: unknown): an edge
     * between it and another unreachable peer is punched (ccoip_mreach_punched) until a punch of
     * it fails. */
    uint16_t punch_tx_port, punch_rx_port;
    bool punch_failed;
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
    /* An encrypted run (--encrypt): the connection's keys from its handshake, and whether its
     * packets are sealed from now on (set with the AUTH_RESULT; the I/O layer switches). */
    ccoip_session_t sess;
    bool seal_now;
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
    /* How long the connection back to a joining peer's p2p listener may take (0: none is made
     * and every peer counts as reachable). */
    uint64_t probe_timeout_ms;
    /* A pccl-relay (port 0: none): an edge between two unreachable peers runs through it. */
    ccoip_socket_address_t relay;
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

/* Totals since the master started, for the status endpoint (ccoip_master_status.c). */
typedef struct ccoip_mcounters_t {
    uint64_t peers_admitted, peers_dropped; /* dropped: accepted peers that left */
    uint64_t collectives_ok, collectives_failed, collectives_timed_out;
    uint64_t allreduce_bytes;   /* successful all-reduces: count x element size, once each */
    uint64_t shared_state_syncs, shared_state_bytes; /* elections; bytes they sent peers to fetch */
} ccoip_mcounters_t;

#define CCOIP_MASTER_GONE_SLOTS 256

typedef struct ccoip_master_state_t ccoip_master_state_t;

/* What the modules may ask of the state machine (set by ccoip_mstate_init). */
typedef struct ccoip_machine_t {
    /* Removes c: its connection closed (drop: it may come back with REJOIN) or it broke the
     * protocol (reject: logged as a warning, told BYE). Tells the others; safe to call twice. */
    void (*drop)(ccoip_master_state_t *st, ccoip_mclient_t *c, const char *why);
    void (*reject)(ccoip_master_state_t *st, ccoip_mclient_t *c, const char *why);
    /* A topology round of the accepted peers only (no admission), in the current ring order. */
    void (*relink)(ccoip_master_state_t *st);
    /* Refuses (as a mismatch) the votes of group's members in pcclUpdateTopology or
     * pcclArePeersPending: the others of their group gave up waiting for them in a collective. */
    void (*refuse_votes)(ccoip_master_state_t *st, uint32_t group);
} ccoip_machine_t;

struct ccoip_master_state_t {
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
    /* Connects to a:port within opt.probe_timeout_ms and calls ccoip_mstate_on_probe with the
     * outcome, unless c is dropped first (NULL: no probes, every peer reachable). */
    void (*probe)(void *ctx, ccoip_mclient_t *c, const ccoip_inet_address_t *a, uint16_t port);
    void *ctx;
    struct ccoip_mbw_t *bw; /* bandwidth matrix and optimisation (ccoip_master_bw.c); NULL until used */
    ccoip_mcounters_t counters;
    bool has_secret; /* every connection must prove the run secret (ccoip_master_auth.c) */
    bool encrypt;    /* every member must encrypt its p2p links (PCCL_ENCRYPT; needs the secret) */
    ccoip_auth_key_t key;
    uint64_t refused_conns, refused_warned_ms; /* over the connection caps, since the last warning */
    struct pcclDeterminismFingerprint_t *run_fp; /* the first admitted peer's fingerprint */
    ccoip_machine_t machine;
};

/* The four attributes as c would see them now. */
ccoip_world_t ccoip_members_world(const ccoip_master_state_t *st, const ccoip_mclient_t *c);
/* True when c is in a round vote (ACCEPT, RELINK, OPTIMIZE). */
bool ccoip_members_in_round_vote(const ccoip_mclient_t *c);
/* True when an accepted member of group is in a vote (update, pending, optimize). */
bool ccoip_members_group_votes(const ccoip_master_state_t *st, uint32_t group);
/* After a restart: a ring successor that a rejoined member named is not back yet, and the grace
 * (rejoin_grace_ms since the first REJOIN) is not over. Topology rounds and syncs wait. */
bool ccoip_members_awaiting_rejoins(const ccoip_master_state_t *st);
/* The verdict kept for a dropped member's UUID and `tag`, or NULL. */
const ccoip_mverdict_t *ccoip_members_gone_verdict(const ccoip_master_state_t *st, const ccoip_uuid_t *uuid,
                                                   uint64_t tag);
bool ccoip_members_uuid_zero(const ccoip_uuid_t *u);

#endif /* CCOIP_MASTER_MEMBERS_H */
