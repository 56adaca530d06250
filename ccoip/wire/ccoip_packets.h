/* ccoip_packets.h: every control packet of the ccoip protocol, as C structs, and the one codec
 * that turns them into frames and back (ccoip_packets.c, driven by a layout table).
 *
 * Type numbers are grouped by direction; the gaps are kept for later work:
 *   0x00xx handshake (any connection)
 *   0x01xx peer -> master      0x0110.. collectives, 0x0120.. shared state, 0x0130.. bandwidth
 *   0x02xx master -> peer      0x0210.. collectives, 0x0220.. shared state, 0x0230.. bandwidth
 *   0x03xx peer <-> peer control on p2p / shared-state / benchmark connections
 * See ccoip/README.md for the protocol as a whole. */
#ifndef CCOIP_PACKETS_H
#define CCOIP_PACKETS_H

#include <stdint.h>

#include "ccoip/wire/ccoip_wire.h"
#include "ccoip_inet.h"

#define CCOIP_MAGIC 0x43434F50u /* "CCOP" */
/* 2: every connection proves the run's secret (HELLO's nonce, HELLO_ACK's MAC, AUTH)
 * 3: data links may switch to shared memory by control frames (length 0xFFFFFFFF), which a
 *    version-2 peer would take for an oversized frame
 * 4: P2P_INFO names the other peers at the peer's address (CCOIP_PEER_SAME_HOST), and a
 *    shared-memory reader may sleep on the link's socket, rung by doorbell bytes there, which a
 *    version-3 writer would never send; and a striped all-reduce puts the frame of sub-chunk j of
 *    its chunk on stream j mod width (ccoip_stripe.h), where earlier builds put the k-th frame on
 *    stream k mod width: the two differ unless every chunk has a multiple of width sub-chunks;
 *    and a striped op may take a group of the streams (ccoip_stripe_width, lane groups: session 9,
 *    still version 4, which no release carried before)
 * 5: COMMENCE says how many of the group's collectives run (`running`), and a striped op takes
 *    at most CCOIP_STRIPE_MAX_LANES streams, CCOIP_STRIPE_SHARED_LANES when others run beside it
 *    (ccoip_stripe.h), where version 4 took every stream of the pool
 * 6: an op takes the streams (a group, or one) handed the least work since the topology round
 *    (ccoip_coll.c, assign_streams), where version 5 gave the k-th op group k mod groups; and
 *    an op alone takes every stream the lane minimum allows (no cap of 4, CCOIP_STRIPE_MAX_LANES)
 * 7: C2M_VOTE_RELINK (a topology round that admits nobody: a failed all-reduce's await, PCCL's
 *    rule), a pcclArePeersPending vote beside other votes and collectives of the same peer, and
 *    CCOIP_SS_MIXED (ENFORCE_POPULAR beside another strategy in one sync)
 * 8: encrypted connections negotiate their AEAD: HELLO offers (CCOIP_HELLO_F_AEADS bits), HELLO_ACK
 *    names the acceptor's choice, AES-256-OCB added beside AES-256-GCM and ChaCha20-Poly1305;
 *    version 7 picked by each side's own CPU (two sides of different CPUs could disagree), and a
 *    version-7 decoder refuses the new flag bits
 * 9: C2M_COLLECTIVE_QUERY and CCOIP_RESULT_UNKNOWN: a collective whose master link broke before
 *    its DONE asks the master it reconnects to for the verdict; C2M_SHARED_STATE_QUERY and
 *    REJOIN's result_rev: the same for a sync, which a restarted master decides from what the
 *    members report (docs/group-state-machine.md)
 * 10: P2P_ESTABLISHED names the neighbour a failed round could not link with and how
 *    (ccoip_link_why_t); TOPOLOGY_RESULT says RETRY (the round runs again at once without a
 *    newcomer that could not be linked) and UNREACHABLE (that newcomer, refused after
 *    --admit-tries rounds), with the address the others dialled (docs/nat.md)
 * 11: the master connects back to a joining peer's p2p listener and answers JOIN with what it
 *    saw (address, port, reachable); a ring edge with one unreachable end is dialled by that end
 *    (CCOIP_PEER_TX_REVERSED / RX_REVERSED, P2P_BIND's `reversed`); JOIN may carry an advertised
 *    address (PCCL_ADVERTISE_ADDRESS) and names the peer's own address (peers behind one NAT dial
 *    each other there); an edge between two unreachable ends may run through a relay
 *    (CCOIP_PEER_TX_RELAYED / RX_RELAYED, P2P_INFO's relay and the entries' tokens) (docs/nat.md);
 *    and shared state in byte ranges from several distributors at once: RESULT lists the receiver's
 *    distributors once (`sources`) and every fetch names up to CCOIP_SS_MAX_SOURCES of them;
 *    SS_REQUEST asks for byte ranges (name, offset, length), and one shared-state connection
 *    carries requests one after another until an empty one (docs/shared-state.md)
 * 12: an edge between two unreachable peers is punched (TCP simultaneous open) where both ends
 *    told the master their punch ports: before JOIN, one C2M_PUNCH_MAP connection from each punch
 *    port, whose source port the master sees through the peer's NAT; P2P_INFO's entries
 *    carry those ports (punch_tx_port, punch_rx_port) and CCOIP_PEER_TX_PUNCHED / RX_PUNCHED,
 *    so the entries' flags take two bytes;
 *    on a shared-state connection every range's bytes are followed by the XXH3-64 of those bytes
 *    as the distributor read them (8 bytes, big-endian; no packet changes): the receiver drops a
 *    distributor whose bytes do not match and fetches the range from another in the same call
 *    (docs/shared-state.md); a receiver that cannot dial a distributor is dialled by it
 *    (CCOIP_SS_REVERSED, HELLO role CCOIP_ROLE_SS_REVERSED) or meets it at the relay
 *    (CCOIP_SS_RELAYED): RESULT's sources and serve entries say how, with the address to dial or
 *    the pair's token, and RESULT names the relay; a benchmark stream of pcclOptimizeTopology
 *    into a peer that cannot be dialled is dialled by that peer (CCOIP_BENCH_REVERSED, HELLO role
 *    CCOIP_ROLE_BENCH_REVERSED) or runs through the relay (CCOIP_BENCH_RELAYED): the request's
 *    targets and senders say how, with the address or the pair's token, and name the relay; and
 *    on an encrypted run every control packet after the handshake is a sealed record
 *    (ccoip_chan.h) (docs/nat.md, docs/shared-state.md, docs/security.md) */
#define CCOIP_PROTOCOL_VERSION 12u
/* Payload cap before the handshake: a stranger cannot make anyone allocate more than this. */
#define CCOIP_MAX_HANDSHAKE_PAYLOAD 256u
/* Most neighbours one peer can be told about in one P2P_INFO (ring: 2; later pools and
 * topologies may add more). */
#define CCOIP_MAX_PEER_ENTRIES 1024u

typedef enum ccoip_packet_type_t {
    CCOIP_PKT_HELLO = 0x0001,
    CCOIP_PKT_HELLO_ACK = 0x0002,
    CCOIP_PKT_AUTH = 0x0003,        /* connector -> acceptor: its MAC over the handshake (with a secret) */
    CCOIP_PKT_AUTH_RESULT = 0x0004, /* acceptor -> connector: the verdict on that MAC */

    CCOIP_PKT_C2M_JOIN = 0x0101,
    CCOIP_PKT_C2M_VOTE_ACCEPT = 0x0102,  /* pcclUpdateTopology */
    CCOIP_PKT_C2M_P2P_ESTABLISHED = 0x0103,
    CCOIP_PKT_C2M_VOTE_PENDING = 0x0104, /* pcclArePeersPending */
    CCOIP_PKT_C2M_HEARTBEAT = 0x0105,
    CCOIP_PKT_C2M_REJOIN = 0x0106, /* instead of JOIN: a member back after losing the master */
    CCOIP_PKT_C2M_FINGERPRINT = 0x0107,  /* determinism fingerprint, between HELLO and JOIN (opt-in) */
    CCOIP_PKT_C2M_VOTE_RELINK = 0x0108,  /* a failed all-reduce's await: relink, admit nobody */
    CCOIP_PKT_C2M_PUNCH_MAP = 0x0109,    /* alone on a connection from a punch port (instead of JOIN) */
    CCOIP_PKT_C2M_COLLECTIVE_INIT = 0x0110,     /* this peer wants to run collective `tag` */
    CCOIP_PKT_C2M_COLLECTIVE_COMPLETE = 0x0111, /* ... and finished it (ok or not) */
    CCOIP_PKT_C2M_COLLECTIVE_ABORT = 0x0112,    /* its watchdog: `tag` made no progress for the timeout */
    CCOIP_PKT_C2M_COLLECTIVE_QUERY = 0x0113,    /* after a reconnection: the verdict on `tag`? (a DONE) */
    CCOIP_PKT_C2M_SHARED_STATE_SYNC = 0x0120,   /* revision, strategy, name -> hash list */
    CCOIP_PKT_C2M_SHARED_STATE_DONE = 0x0121,   /* this peer's transfers are over (ok or not) */
    CCOIP_PKT_C2M_SHARED_STATE_ABORT = 0x0122,  /* its watchdog: no RESULT within the collective timeout */
    CCOIP_PKT_C2M_SHARED_STATE_QUERY = 0x0123,  /* after a reconnection: did every member get RESULT? (a DONE) */
    CCOIP_PKT_C2M_OPTIMIZE_TOPOLOGY = 0x0130,   /* pcclOptimizeTopology: the vote */
    CCOIP_PKT_C2M_BANDWIDTH_REPORT = 0x0131,    /* the rates measured in one step */

    CCOIP_PKT_M2C_JOIN_RESPONSE = 0x0201,
    CCOIP_PKT_M2C_P2P_INFO = 0x0202,
    CCOIP_PKT_M2C_TOPOLOGY_RESULT = 0x0203,
    CCOIP_PKT_M2C_PENDING_RESULT = 0x0204,
    CCOIP_PKT_M2C_WORLD_UPDATE = 0x0205,
    CCOIP_PKT_M2C_BYE = 0x0206, /* the master shuts down on purpose: do not reconnect */
    CCOIP_PKT_M2C_COLLECTIVE_ABORT = 0x0210,
    CCOIP_PKT_M2C_COLLECTIVE_COMMENCE = 0x0211, /* every member asked: go (or why not) */
    CCOIP_PKT_M2C_COLLECTIVE_DONE = 0x0212,     /* every member finished: the shared outcome */
    CCOIP_PKT_M2C_SHARED_STATE_RESULT = 0x0220, /* the election: what to fetch, whom to serve */
    CCOIP_PKT_M2C_SHARED_STATE_DONE = 0x0221,   /* every member finished its transfers */
    CCOIP_PKT_M2C_BANDWIDTH_REQUEST = 0x0230,   /* whom to measure in this step, who may connect */

    CCOIP_PKT_P2P_BIND = 0x0301, /* after HELLO on a p2p link: which topology round it serves */
    CCOIP_PKT_SS_REQUEST = 0x0302, /* after HELLO on a shared-state connection: tensors wanted */
    CCOIP_PKT_SS_HEADER = 0x0303,  /* the answer: names and sizes, then the raw bytes follow */
    CCOIP_PKT_BENCH_DONE = 0x0304  /* benchmark receiver -> sender after EOF: bytes and time seen */
} ccoip_packet_type_t;

typedef enum ccoip_role_t {
    CCOIP_ROLE_PEER_TO_MASTER = 1,
    CCOIP_ROLE_P2P = 2,
    CCOIP_ROLE_SHARED_STATE = 3,
    CCOIP_ROLE_BENCHMARK = 4,
    /* version 12: a distributor dialling a receiver's shared-state listener (CCOIP_SS_REVERSED):
     * the receiver then asks for ranges over it as over a connection it dialled itself */
    CCOIP_ROLE_SS_REVERSED = 5,
    /* version 12: a benchmark receiver dialling its sender (CCOIP_BENCH_REVERSED), which then
     * streams to it over that connection */
    CCOIP_ROLE_BENCH_REVERSED = 6
} ccoip_role_t;

typedef enum ccoip_hello_status_t {
    CCOIP_HELLO_OK = 0,
    CCOIP_HELLO_BAD_MAGIC = 1,
    CCOIP_HELLO_BAD_VERSION = 2,
    CCOIP_HELLO_BAD_ROLE = 3,
    CCOIP_HELLO_UNKNOWN_PEER = 4, /* p2p: the master has not announced this UUID to us */
    CCOIP_HELLO_BUSY = 5,         /* shutting down, or over a limit */
    CCOIP_HELLO_SECRET = 6,       /* the run's secret was refused: one side has none, or they differ */
    CCOIP_HELLO_ENCRYPTION = 7,   /* one side encrypts (PCCL_ENCRYPT), the other not */
    CCOIP_HELLO_NOT_SERVING = 8   /* shared state: in no sync, so no RESULT will announce the caller */
} ccoip_hello_status_t;

/* HELLO / HELLO_ACK flags (version 2). */
#define CCOIP_HELLO_F_SECRET 1u  /* this side holds a run secret and will prove it */
#define CCOIP_HELLO_F_ENCRYPT 2u /* this side encrypts (needs the secret): both sides must agree */
/* Version 8, with F_ENCRYPT: the AEADs (ccoip_auth.h). HELLO sets each one the connector offers,
 * HELLO_ACK the one the acceptor chose (the master's HELLO_ACK none: it seals nothing). */
#define CCOIP_HELLO_F_CHACHA20_POLY1305 4u
#define CCOIP_HELLO_F_AES256_GCM 8u
#define CCOIP_HELLO_F_AES256_OCB 16u
#define CCOIP_HELLO_F_AEADS 28u
#define CCOIP_HELLO_F_ALL 31u
#define CCOIP_NONCE_LEN 32
#define CCOIP_MAC_LEN 32

typedef enum ccoip_join_status_t {
    CCOIP_JOIN_OK = 0,
    CCOIP_JOIN_LOOPBACK_MIX = 1, /* loopback and non-loopback peers cannot share a run */
    CCOIP_JOIN_BAD_STATE = 2,
    CCOIP_JOIN_REJOIN_REFUSED = 3, /* REJOIN after the master's recovery window, or UUID in use */
    CCOIP_JOIN_FINGERPRINT = 4 /* its determinism fingerprint differs from the run's */
} ccoip_join_status_t;

typedef enum ccoip_result_status_t {
    CCOIP_RESULT_OK = 0,
    CCOIP_RESULT_FAILED = 1,   /* a p2p connection failed or a participant dropped: retry */
    CCOIP_RESULT_MISMATCH = 2, /* accepted peers voted for different things */
    CCOIP_RESULT_TIMEOUT = 3,  /* collectives only: a member's watchdog aborted it (pcclCollectiveTimeout) */
    CCOIP_RESULT_UNKNOWN = 4,  /* a QUERY's DONE: this master never decided that collective (it restarted) */
    CCOIP_RESULT_RETRY = 5,    /* topology rounds: failed on a newcomer's links; the next round, without
                                  it, follows at once (await its P2P_INFO) */
    CCOIP_RESULT_UNREACHABLE = 6 /* to that newcomer after its last try: not admitted (pcclConnect fails) */
} ccoip_result_status_t;

/* Why a peer could not link with a ring neighbour in a topology round (P2P_ESTABLISHED). */
typedef enum ccoip_link_why_t {
    CCOIP_LINK_OK = 0,
    CCOIP_LINK_REFUSED = 1,     /* we dialled it: nothing listens there (a NAT router, a wrong port) */
    CCOIP_LINK_TIMEOUT = 2,     /* we dialled it: no answer (a firewall that drops) */
    CCOIP_LINK_HANDSHAKE = 3,   /* we dialled it: connected, but the handshake failed */
    CCOIP_LINK_NOT_DIALLED = 4, /* it was to dial us and did not in time */
    CCOIP_LINK_LOCAL = 5        /* this peer failed on its own (out of memory or threads) */
} ccoip_link_why_t;
#define CCOIP_LINK_WHY_MAX 5

/* Flags of a neighbour entry: what this peer does with it. */
#define CCOIP_PEER_CONNECT_TO 1u  /* open our TX link to its p2p listener */
#define CCOIP_PEER_ACCEPT_FROM 2u /* accept its TX link as our RX */
#define CCOIP_PEER_SAME_HOST 4u   /* it is at our address (shares our cores); alone: no link to it */
/* Version 11: an edge whose receiving end the master cannot reach is dialled by that end. */
#define CCOIP_PEER_TX_REVERSED 8u  /* CONNECT_TO: it dials us (P2P_BIND reversed); we send on that */
#define CCOIP_PEER_RX_REVERSED 16u /* ACCEPT_FROM: we dial it (P2P_BIND reversed); we receive on that */
/* Version 11: an edge between two unreachable ends runs through the relay of P2P_INFO (pccl-relay):
 * both ends dial it with the edge's token, one pool stream; the sender runs the handshake's
 * connector half. */
#define CCOIP_PEER_TX_RELAYED 32u /* CONNECT_TO: our TX link, via the relay with tx_token */
/* What each end sends the relay first: magic, then the edge's token (16 bytes). */
#define CCOIP_RELAY_MAGIC 0x5043524Cu /* "PCRL" */
#define CCOIP_RELAY_HELLO_LEN 20u
#define CCOIP_PEER_RX_RELAYED 64u /* ACCEPT_FROM: our RX link, via the relay with rx_token */
/* Version 12: an edge between two unreachable ends whose punch ports the master knows: both ends
 * dial each other at once (TCP simultaneous open through both NAT routers), the sender from its
 * TX punch port to the receiver's RX punch port, one pool stream; the sender runs the handshake's
 * connector half. */
#define CCOIP_PEER_TX_PUNCHED 128u /* CONNECT_TO: our TX link, dialled at its punch_rx_port */
#define CCOIP_PEER_RX_PUNCHED 256u /* ACCEPT_FROM: our RX link, dialled at its punch_tx_port */

typedef struct ccoip_uuid_t {
    uint8_t b[16];
} ccoip_uuid_t;

typedef struct ccoip_hello_t {
    uint32_t magic;
    uint16_t version;
    uint8_t role;       /* ccoip_role_t */
    ccoip_uuid_t uuid;  /* zero towards the master: the master assigns one */
    /* version >= 2 */
    uint8_t flags;                  /* CCOIP_HELLO_F_* */
    uint8_t nonce[CCOIP_NONCE_LEN]; /* fresh per connection */
} ccoip_hello_t;

typedef struct ccoip_hello_ack_t {
    uint32_t magic;
    uint16_t version;
    uint8_t status;    /* ccoip_hello_status_t */
    ccoip_uuid_t uuid; /* the UUID the master assigned; echo on p2p */
    /* version >= 2 */
    uint8_t flags;
    uint8_t nonce[CCOIP_NONCE_LEN]; /* fresh per connection */
    uint8_t mac[CCOIP_MAC_LEN];     /* with a secret: the acceptor's proof (ccoip_auth.h) */
} ccoip_hello_ack_t;

typedef struct ccoip_auth_t {
    uint8_t ok;                 /* 1: the acceptor's proof verified; 0: it did not (mac is zero) */
    uint8_t mac[CCOIP_MAC_LEN]; /* the connector's proof */
} ccoip_auth_t;

typedef struct ccoip_auth_result_t {
    uint8_t status; /* CCOIP_HELLO_OK or CCOIP_HELLO_SECRET */
} ccoip_auth_result_t;

typedef struct ccoip_join_t {
    uint32_t peer_group;
    uint16_t p2p_port;
    uint16_t ss_port;    /* 0: no shared-state listener yet */
    uint16_t bench_port; /* 0: no benchmark listener yet */
    /* version 11: PCCL_ADVERTISE_ADDRESS: dial this address (and this p2p port, the other
     * listeners at the same offsets) instead of the one the master sees */
    uint8_t advertised;
    ccoip_inet_address_t adv_addr;
    uint16_t adv_port; /* 0: the p2p port above */
    /* version 11: this end's address of its connection to the master: peers that the master sees
     * at one address (behind one NAT router) dial each other there */
    ccoip_inet_address_t local_addr;
} ccoip_join_t;

/* Version 12: the only packet (after HELLO) of a connection from a peer's punch port, before its
 * JOIN or REJOIN: the master records the source port it sees as where that port's dials come from
 * (through the peer's NAT), then closes the connection (the peer's sign to go on). */
#define CCOIP_PUNCH_TX 0 /* the port its TX links of punched edges are dialled from */
#define CCOIP_PUNCH_RX 1 /* the port its RX links of punched edges are dialled from */
typedef struct ccoip_punch_map_t {
    ccoip_uuid_t owner; /* the UUID of the peer's master connection */
    uint8_t which;      /* CCOIP_PUNCH_TX or CCOIP_PUNCH_RX */
} ccoip_punch_map_t;

/* A member that lost the master tells a (restarted) master what it was: the master's soft state
 * is rebuilt from these reports (docs/master-restart.md). The HELLO before it carries its UUID. */
typedef struct ccoip_rejoin_t {
    ccoip_join_t join;
    ccoip_uuid_t next; /* its ring successor (CONNECT_TO) in the last round; zero when none */
    uint64_t round;    /* that round's number: a new master numbers its rounds above it */
    uint8_t has_rev;   /* it synced shared state successfully before, */
    uint64_t last_rev; /* at this revision */
    uint8_t has_result;     /* version 9: it got a sync RESULT from the master before, */
    uint64_t result_rev;    /* electing this revision */
} ccoip_rejoin_t;

/* C2M_SHARED_STATE_QUERY: the sync of `revision` (its RESULT came, its DONE did not). */
typedef struct ccoip_ss_query_t {
    uint64_t revision;
} ccoip_ss_query_t;

/* The determinism fingerprint (pcclDeterminismFingerprint_t, docs/fingerprint.md). */
#define CCOIP_MAX_FP_ENTRIES 32
typedef struct ccoip_fp_entry_t {
    char *name; /* 1..23 bytes */
    uint64_t hash;
} ccoip_fp_entry_t;

typedef struct ccoip_fingerprint_t {
    uint32_t compute_capability, driver_version, runtime_version, flags;
    char *device; /* 0..63 bytes */
    uint32_t count;
    ccoip_fp_entry_t *entries;
} ccoip_fingerprint_t;

typedef struct ccoip_join_response_t {
    uint8_t status; /* ccoip_join_status_t */
    /* version 11: where the others will dial this peer, and whether the master's connection
     * back to it there got through (0: its ring edges are dialled from its side) */
    ccoip_inet_address_t seen_addr;
    uint16_t seen_port;
    uint8_t reachable;
} ccoip_join_response_t;

typedef struct ccoip_world_t {
    uint32_t global_world_size;
    uint32_t group_world_size;
    uint32_t num_groups;
    uint32_t largest_group_world_size;
} ccoip_world_t;

typedef struct ccoip_peer_entry_t {
    ccoip_uuid_t uuid;
    uint16_t flags; /* CCOIP_PEER_* */
    ccoip_inet_address_t addr;
    uint16_t p2p_port;
    uint16_t ss_port;
    uint16_t bench_port;
    /* version 11: the relay pairs the two ends of a relayed edge by these (zero when not relayed) */
    ccoip_uuid_t tx_token, rx_token;
    /* version 12: its punch ports as its NAT maps them (zero unless an edge with it is punched) */
    uint16_t punch_tx_port, punch_rx_port;
} ccoip_peer_entry_t;

typedef struct ccoip_p2p_info_t {
    uint64_t round;
    uint32_t count;
    ccoip_peer_entry_t *peers; /* owned; ccoip_packet_free releases it */
    /* version 11: the relay for RELAYED edges (port 0: none) */
    ccoip_inet_address_t relay_addr;
    uint16_t relay_port;
} ccoip_p2p_info_t;

typedef struct ccoip_p2p_established_t {
    uint64_t round;
    uint8_t ok;
    /* version 10: when not ok, the neighbour it failed with (zero: none in particular) and why */
    ccoip_uuid_t failed;
    uint8_t why; /* ccoip_link_why_t */
} ccoip_p2p_established_t;

typedef struct ccoip_topology_result_t {
    uint64_t round;
    uint8_t status; /* ccoip_result_status_t */
    ccoip_world_t world;
    /* version 10: where the others dial this peer (the address the master saw, its p2p port), and
     * why its links failed when the round failed on it (ccoip_link_why_t; OK otherwise) */
    ccoip_inet_address_t seen_addr;
    uint16_t seen_port;
    uint8_t why;
} ccoip_topology_result_t;

typedef struct ccoip_pending_result_t {
    uint8_t status; /* ccoip_result_status_t */
    uint8_t pending;
} ccoip_pending_result_t;

typedef struct ccoip_world_update_t {
    ccoip_world_t world;
} ccoip_world_update_t;

/* M2C_COLLECTIVE_ABORT (stop the ring of `tag`), C2M_COLLECTIVE_ABORT (the watchdog) and
 * C2M_COLLECTIVE_QUERY (the verdict, after a reconnection). */
typedef struct ccoip_collective_abort_t {
    uint64_t tag;
} ccoip_collective_abort_t;

/* An all-reduce as every member must describe it identically. */
typedef struct ccoip_collective_init_t {
    uint64_t tag;
    uint64_t count;
    uint8_t dtype;       /* pcclDataType_t */
    uint8_t op;          /* pcclRedOp_t */
    uint8_t quant_dtype; /* pcclDataType_t */
    uint8_t quant_algo;  /* pcclQuantizationAlgorithm_t */
} ccoip_collective_init_t;

typedef struct ccoip_collective_complete_t {
    uint64_t tag;
    uint8_t ok;
} ccoip_collective_complete_t;

typedef struct ccoip_collective_commence_t {
    uint64_t tag;
    uint8_t status; /* ccoip_result_status_t: FAILED when the ring lost a member since the last
                       topology round, MISMATCH when members described it differently,
                       TIMEOUT when a member's watchdog gave up waiting for the others */
    uint32_t rank;  /* position in the group's ring */
    uint32_t world; /* members of the ring */
    uint32_t running; /* the group's collectives commenced and not done, this one included (1: it
                         runs alone), which decides how many pool streams it takes (ccoip_stripe.h);
                         0 when not OK */
} ccoip_collective_commence_t;

typedef struct ccoip_collective_done_t {
    uint64_t tag;
    uint8_t status; /* ccoip_result_status_t: FAILED when any member failed or left, TIMEOUT
                       when a member's watchdog aborted it */
} ccoip_collective_done_t;

typedef struct ccoip_p2p_bind_t {
    uint64_t round;
    uint8_t stream;  /* this connection's index in the sender's pool, < streams */
    uint8_t streams; /* the dialler's pool size (p2p_connection_pool_size), 1..64 */
    /* version 11: 1 when the dialler receives on this connection (an edge dialled by its
     * unreachable receiving end: CCOIP_PEER_RX_REVERSED); 0 when it sends */
    uint8_t reversed;
} ccoip_p2p_bind_t;

/* ---- Shared state (pcclSynchronizeSharedState; ccoip/README.md "Shared state") ---- */

#define CCOIP_MAX_SS_TENSORS 65536u /* tensors in one shared state */
#define CCOIP_MAX_SS_NAME 1024u     /* bytes of a tensor name (no NUL bytes inside) */

typedef enum ccoip_hash_kind_t {
    CCOIP_HASH_XXH3 = 0,  /* host memory */
    CCOIP_HASH_SIMPLE = 1 /* device memory (hash/SIMPLEHASH.md) */
} ccoip_hash_kind_t;

typedef enum ccoip_ss_status_t {
    CCOIP_SS_OK = 0,
    CCOIP_SS_NO_CONTENT = 1, /* no peer can offer content (pcclNoSharedStateAvailable) */
    CCOIP_SS_REVISION = 2,   /* the revision broke the rule: `expected` says what was due */
    CCOIP_SS_MISMATCH = 3,   /* the tensor set differs from the others': `detail` names a tensor */
    CCOIP_SS_KICKED = 4,     /* SEND_ONLY without the popular content (`detail`); connection closed */
    CCOIP_SS_FAILED = 5,     /* the sync could not run (e.g. a duplicate tensor name) */
    CCOIP_SS_TIMEOUT = 6,    /* a member's watchdog ended the sync: not every member called it */
    CCOIP_SS_STALE = 7,      /* a member of the group is in a topology vote: vote too, then sync */
    CCOIP_SS_MIXED = 8       /* not ENFORCE_POPULAR while another member is; connection closed */
} ccoip_ss_status_t;

/* Every string on the wire is `u16 length | bytes`; decoded strings are malloc'd and
 * NUL-terminated (ccoip_packet_free releases them). */
typedef struct ccoip_ss_tensor_t {
    char *name;
    uint64_t hash;
    uint8_t hash_kind; /* ccoip_hash_kind_t */
    uint8_t dtype;     /* pcclDataType_t */
    uint64_t count;    /* elements */
    uint8_t allow_inequality;
} ccoip_ss_tensor_t;

typedef struct ccoip_ss_sync_t {
    uint64_t revision;
    uint8_t strategy; /* pcclSharedStateSyncStrategy_t */
    uint32_t count;
    ccoip_ss_tensor_t *tensors;
} ccoip_ss_sync_t;

typedef struct ccoip_ss_done_t {
    uint8_t ok;
} ccoip_ss_done_t;

#define CCOIP_SS_MAX_SOURCES 8u       /* distributors named for one tensor of one receiver */
#define CCOIP_SS_MAX_DISTRIBUTORS 64u /* distributors named in one RESULT */
#define CCOIP_SS_MAX_RANGES 256u      /* byte ranges in one SS_REQUEST */

/* How a fetch connection is made (version 12; docs/nat.md): the receiver dials the distributor's
 * shared-state listener; the distributor dials the receiver's (the receiver cannot dial it, but
 * it can dial the receiver); or both dial the relay of the RESULT with the pair's token (neither
 * can dial the other) and the receiver handshakes through it as when it dials. */
enum { CCOIP_SS_DIRECT = 0, CCOIP_SS_REVERSED = 1, CCOIP_SS_RELAYED = 2 };

/* A distributor of this sync: the peer and its shared-state listener. */
typedef struct ccoip_ss_source_t {
    ccoip_uuid_t uuid;
    ccoip_inet_address_t addr;
    uint16_t ss_port;
    uint8_t how;        /* CCOIP_SS_DIRECT / REVERSED / RELAYED */
    ccoip_uuid_t token; /* RELAYED: the pair's token at the relay, else zeros */
} ccoip_ss_source_t;

/* An index into the RESULT's sources (the receiver checks it is in range). */
typedef struct ccoip_ss_src_t {
    uint16_t index;
} ccoip_ss_src_t;

/* One tensor to fetch: its elected content and the distributors that hold it (any byte range
 * may come from any of them). */
typedef struct ccoip_ss_fetch_t {
    char *name;
    uint8_t hash_kind;
    uint64_t hash;
    uint32_t nsrc;
    ccoip_ss_src_t *src;
} ccoip_ss_fetch_t;

/* A peer allowed to connect to our shared-state listener for this sync; REVERSED: we dial it at
 * addr:ss_port, RELAYED: we dial the relay with token (version 12). */
typedef struct ccoip_ss_client_t {
    ccoip_uuid_t uuid;
    uint8_t how;
    ccoip_inet_address_t addr;
    uint16_t ss_port;
    ccoip_uuid_t token;
} ccoip_ss_client_t;

typedef struct ccoip_ss_result_t {
    uint8_t status;    /* ccoip_ss_status_t */
    uint64_t revision; /* the elected revision: the peer's revision after a successful sync */
    uint64_t expected; /* CCOIP_SS_REVISION: the revision that was due */
    char *detail;      /* a tensor name for MISMATCH / KICKED, else empty */
    uint32_t nfetch;
    ccoip_ss_fetch_t *fetch;
    uint32_t nserve;
    ccoip_ss_client_t *serve;
    uint32_t nsources;
    ccoip_ss_source_t *sources; /* the distributors the fetches name, by index */
    ccoip_inet_address_t relay_addr; /* version 12: the relay of RELAYED fetches (port 0: none) */
    uint16_t relay_port;
} ccoip_ss_result_t;

typedef struct ccoip_ss_master_done_t {
    uint8_t status; /* ccoip_result_status_t; informational: outcomes are per peer */
} ccoip_ss_master_done_t;

/* Bytes [offset, offset + length) of a tensor. */
typedef struct ccoip_ss_range_t {
    char *name;
    uint64_t offset;
    uint64_t length;
} ccoip_ss_range_t;

/* Ranges wanted, answered by a header and their bytes in order; count 0: the receiver is done
 * with this connection. */
typedef struct ccoip_ss_request_t {
    uint32_t count;
    ccoip_ss_range_t *ranges;
} ccoip_ss_request_t;

typedef enum ccoip_ss_header_status_t {
    CCOIP_SSH_OK = 0,
    CCOIP_SSH_UNKNOWN_TENSOR = 1, /* a requested name is not in the state being served, or a range
                                     lies outside the tensor */
    CCOIP_SSH_NOT_SERVING = 2     /* the sync this request belongs to is over */
} ccoip_ss_header_status_t;

typedef struct ccoip_ss_item_t {
    char *name;
    uint64_t size; /* bytes of the whole tensor (the range follows the request) */
} ccoip_ss_item_t;

typedef struct ccoip_ss_header_t {
    uint8_t status; /* ccoip_ss_header_status_t */
    uint32_t count;
    ccoip_ss_item_t *items;
} ccoip_ss_header_t;

/* ---- Topology optimisation (pcclOptimizeTopology; ccoip/README.md "Topology optimisation") ---- */

#define CCOIP_MAX_BENCH_MS 10000u /* the longest measurement the master may ask for */

/* A peer to measure: connect to its benchmark listener and stream to it. */
/* How a benchmark stream is made (version 12; docs/nat.md): the sender dials the receiver's
 * benchmark listener; the receiver dials the sender's (it cannot be dialled, the sender can: HELLO
 * role CCOIP_ROLE_BENCH_REVERSED), and the sender streams to it over that connection; or both dial
 * the request's relay with the pair's token (neither can be dialled), the sender handshaking as
 * the connector: a relayed edge is measured through the relay it will run through. */
enum { CCOIP_BENCH_DIRECT = 0, CCOIP_BENCH_REVERSED = 1, CCOIP_BENCH_RELAYED = 2 };

typedef struct ccoip_bench_target_t {
    ccoip_uuid_t uuid;
    ccoip_inet_address_t addr;
    uint16_t bench_port;
    uint8_t how;        /* version 12: CCOIP_BENCH_* */
    ccoip_uuid_t token; /* RELAYED: the pair's token at the relay, else zeros */
} ccoip_bench_target_t;

/* A peer that may connect to our benchmark listener in this session; REVERSED: we dial it at
 * addr:bench_port in this step, RELAYED: we dial the relay with token (version 12). */
typedef struct ccoip_bench_sender_t {
    ccoip_uuid_t uuid;
    uint8_t how;
    ccoip_inet_address_t addr;
    uint16_t bench_port;
    ccoip_uuid_t token;
} ccoip_bench_sender_t;

typedef struct ccoip_bench_request_t {
    uint64_t session;     /* one pcclOptimizeTopology */
    uint32_t step;        /* measurement step within it */
    uint32_t duration_ms; /* how long to stream to each target, 1..CCOIP_MAX_BENCH_MS */
    uint32_t ntargets;
    ccoip_bench_target_t *targets; /* measure these, one after another */
    uint32_t nsenders;
    ccoip_bench_sender_t *senders;
    ccoip_inet_address_t relay_addr; /* version 12: the relay of RELAYED streams (port 0: none) */
    uint16_t relay_port;
} ccoip_bench_request_t;

typedef struct ccoip_bench_result_t {
    ccoip_uuid_t uuid;   /* the target */
    uint64_t bits_per_s; /* 0: the measurement failed */
} ccoip_bench_result_t;

typedef struct ccoip_bench_report_t {
    uint64_t session;
    uint32_t step;
    uint32_t count;
    ccoip_bench_result_t *results;
} ccoip_bench_report_t;

typedef struct ccoip_bench_done_t {
    uint64_t bytes;      /* received from the first byte to EOF */
    uint64_t elapsed_us; /* from the first byte to EOF, on the receiver's clock */
} ccoip_bench_done_t;

typedef struct ccoip_packet_t {
    uint16_t type;
    union {
        ccoip_hello_t hello;
        ccoip_hello_ack_t hello_ack;
        ccoip_auth_t auth;
        ccoip_auth_result_t auth_result;
        ccoip_join_t join;
        ccoip_rejoin_t rejoin;
        ccoip_punch_map_t punch_map;
        ccoip_join_response_t join_response;
        ccoip_fingerprint_t fingerprint;
        ccoip_p2p_info_t p2p_info;
        ccoip_p2p_established_t p2p_established;
        ccoip_topology_result_t topology_result;
        ccoip_pending_result_t pending_result;
        ccoip_world_update_t world_update;
        ccoip_ss_query_t ss_query;
        ccoip_collective_abort_t collective_abort;
        ccoip_collective_init_t collective_init;
        ccoip_collective_complete_t collective_complete;
        ccoip_collective_commence_t collective_commence;
        ccoip_collective_done_t collective_done;
        ccoip_p2p_bind_t p2p_bind;
        ccoip_ss_sync_t ss_sync;
        ccoip_ss_done_t ss_done;
        ccoip_ss_result_t ss_result;
        ccoip_ss_master_done_t ss_master_done;
        ccoip_ss_request_t ss_request;
        ccoip_ss_header_t ss_header;
        ccoip_bench_request_t bench_request;
        ccoip_bench_report_t bench_report;
        ccoip_bench_done_t bench_done;
    } u;
} ccoip_packet_t;

/* The name of a packet type ("HELLO", "C2M_JOIN", ...), or NULL for an unknown type. */
const char *ccoip_packet_name(uint16_t type);

/* What a ccoip_link_why_t means, in a few words for log lines. */
const char *ccoip_link_why_str(uint8_t why);

/* Decodes one payload. On CCOIP_OK *out is filled (call ccoip_packet_free when done); on error
 * nothing is owned. Every value is range-checked; trailing bytes are an error (except after
 * HELLO/HELLO_ACK, which later versions may extend). */
ccoip_status_t ccoip_packet_decode(uint16_t type, const uint8_t *payload, size_t len, ccoip_packet_t *out);

/* Appends one whole frame (header and payload) for p to w. */
ccoip_status_t ccoip_packet_encode(const ccoip_packet_t *p, ccoip_writer_t *w);

/* Every packet without a list or a name has a small fixed bound on its frame (header included):
 * all of them fit in CCOIP_FIXED_FRAME_MAX bytes, so they can be encoded on the stack. */
#define CCOIP_FIXED_FRAME_MAX 128u /* the largest: a version 2 HELLO_ACK, 94 bytes */

/* The largest frame a packet of `type` can take when that is fixed (no list, no name), else 0
 * (also for an unknown type). */
size_t ccoip_packet_frame_bound(uint16_t type);

/* Encodes one whole frame for p into buf (cap bytes) without touching the heap; *len is the frame
 * size. CCOIP_ERR_TOO_LARGE when it does not fit (nothing useful is left in buf then). */
ccoip_status_t ccoip_packet_encode_into(const ccoip_packet_t *p, uint8_t *buf, size_t cap, size_t *len);

void ccoip_packet_free(ccoip_packet_t *p);

/* Shorthands for packets without a body. */
ccoip_status_t ccoip_packet_encode_empty(uint16_t type, ccoip_writer_t *w);

#endif /* CCOIP_PACKETS_H */
