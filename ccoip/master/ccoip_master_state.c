/* ccoip_master_state.c: admission, votes, ring order, liveness. No I/O here: packets go out
 * through st->send, closes through st->close (see ccoip_master_state.h). */
#include "ccoip/master/ccoip_master_state.h"

#include <stdlib.h>
#include <string.h>

#include "ccoip/master/ccoip_master_reach.h"
#include "log/log.h"

#define MOD "ccoip-master"

void ccoip_master_default_options(ccoip_master_options_t *o) {
    o->handshake_timeout_ms = 5000;
    o->heartbeat_timeout_ms = 10000;
    o->round_timeout_ms = 30000;
    o->rejoin_window_ms = 60000;
    o->rejoin_grace_ms = 3000;
    o->admit_tries = 3;
    o->probe_timeout_ms = 2000;
    o->fingerprint_mode = CCOIP_FP_CHECK;
    o->strict_revisions = ccoip_strict(getenv("PCCL_STRICT"), "revision");
}

static void relink(ccoip_master_state_t *st);
static void refuse_votes(ccoip_master_state_t *st, uint32_t group);

void ccoip_mstate_init(ccoip_master_state_t *st, const ccoip_master_options_t *opt) {
    memset(st, 0, sizeof *st);
    if (opt != NULL) st->opt = *opt;
    else ccoip_master_default_options(&st->opt);
    st->machine = (ccoip_machine_t){ccoip_mstate_drop, ccoip_mstate_reject, relink, refuse_votes};
}

void ccoip_mstate_free(ccoip_master_state_t *st) {
    ccoip_mbw_free(st);
    ccoip_mfp_free(st);
    free(st->clients);
    st->clients = NULL;
    st->nclients = st->cap = 0;
}

bool ccoip_mstate_add(ccoip_master_state_t *st, ccoip_mclient_t *c, uint64_t now_ms) {
    if (st->nclients == st->cap) {
        size_t cap = st->cap == 0 ? 64 : st->cap * 2;
        ccoip_mclient_t **n = realloc(st->clients, cap * sizeof *n);
        if (n == NULL) return false;
        st->clients = n;
        st->cap = cap;
    }
    st->now_ms = now_ms;
    c->id = ++st->next_id;
    c->phase = CCOIP_MPHASE_CONNECTED;
    c->state = CCOIP_MSTATE_IDLE;
    c->round_ok = -1;
    c->connected_ms = c->last_seen_ms = now_ms;
    st->clients[st->nclients++] = c;
    return true;
}

static void send_packet(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_packet_t *p) {
    if (!st->shutting_down) st->send(st->ctx, c, p);
}

static size_t count_phase(const ccoip_master_state_t *st, ccoip_mphase_t phase) {
    size_t n = 0;
    for (size_t i = 0; i < st->nclients; i++) n += st->clients[i]->phase == phase;
    return n;
}

static void send_topology_result(ccoip_master_state_t *st, ccoip_mclient_t *c, uint8_t status) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_M2C_TOPOLOGY_RESULT;
    p.u.topology_result.round = st->round;
    p.u.topology_result.status = status;
    p.u.topology_result.world = ccoip_members_world(st, c);
    p.u.topology_result.seen_addr = c->dial_addr;
    p.u.topology_result.seen_port = c->dial_p2p;
    if (c->admit.sits_out) p.u.topology_result.why = c->admit.why; /* the round failed on this newcomer */
    send_packet(st, c, &p);
}

/* ---- Admission of newcomers whose links fail (ccoip_master_admit.h, docs/nat.md) ---------- */

static bool newcomer(const ccoip_mclient_t *c) { return c->phase == CCOIP_MPHASE_REGISTERED && !c->probing; }

/* Whether c may be in the next admission round. */
static bool eligible(const ccoip_mclient_t *c) { return newcomer(c) && !c->admit.sits_out && !c->admit.unreachable; }

/* An accepted member whose reachability is being probed (after a REJOIN): rounds wait for it,
 * at most the probe's timeout. */
static bool member_probing(const ccoip_master_state_t *st) {
    for (size_t i = 0; i < st->nclients; i++)
        if (st->clients[i]->phase == CCOIP_MPHASE_ACCEPTED && st->clients[i]->probing) return true;
    return false;
}

/* Newcomers waiting for admission (pcclArePeersPending): refused ones do not. */
static size_t waiting(const ccoip_master_state_t *st) {
    size_t n = 0;
    for (size_t i = 0; i < st->nclients; i++) n += newcomer(st->clients[i]) && !st->clients[i]->admit.unreachable;
    return n;
}

/* The newcomer that c's failed report is blamed on, or NULL (a link between members). */
static ccoip_mclient_t *suspect(ccoip_master_state_t *st, ccoip_mclient_t *c) {
    ccoip_mclient_t *other = NULL;
    for (size_t i = 0; i < st->nclients && other == NULL; i++)
        if (st->clients[i] != c && st->clients[i]->in_round &&
            memcmp(&st->clients[i]->uuid, &c->round_failed, sizeof c->round_failed) == 0)
            other = st->clients[i];
    switch (ccoip_madmit_blame(newcomer(c), other != NULL, other != NULL && newcomer(other), c->round_why)) {
    case CCOIP_BLAME_REPORTER: return c;
    case CCOIP_BLAME_OTHER: return other;
    default: return NULL;
    }
}

static void blame(ccoip_master_state_t *st, ccoip_mclient_t *n, uint8_t why) {
    uint32_t tries = st->opt.admit_tries == 0 ? 1 : st->opt.admit_tries;
    bool last = ccoip_madmit_fail(&n->admit, why, tries);
    LOG_WARN(MOD, "%s (p2p port %u) could not be linked into the ring (%s): admission try %u of %u%s", n->name,
             n->p2p_port, ccoip_link_why_str(why), n->admit.link_fails, tries,
             last ? "; refused" : "; the round runs again without it");
}

/* An admission ended: the newcomers left out of it may take part in the next. */
static void end_admission(ccoip_master_state_t *st) {
    for (size_t i = 0; i < st->nclients; i++) st->clients[i]->admit.sits_out = false;
}

/* Tells a participant how the round ended and takes it out of the round. */
static void conclude(ccoip_master_state_t *st, ccoip_mclient_t *c, uint8_t status) {
    send_topology_result(st, c, status);
    c->in_round = false;
    c->round_ok = -1;
    c->state = CCOIP_MSTATE_IDLE;
}

/* A member that came in while the round ran (a REJOIN after a restart) has no links of it: its
 * group stays stale for every member, so that every member's next collective is refused alike
 * (and relinks with it), never one member's alone (issue 29, 2). */
static void keep_stale_if_incomplete(ccoip_master_state_t *st) {
    for (size_t i = 0; i < st->nclients; i++) {
        const ccoip_mclient_t *out = st->clients[i];
        if (out->phase != CCOIP_MPHASE_ACCEPTED || out->in_round) continue;
        bool group_in_round = false;
        for (size_t k = 0; k < st->nclients && !group_in_round; k++)
            group_in_round = st->clients[k]->in_round && st->clients[k]->peer_group == out->peer_group;
        if (!group_in_round) continue; /* another group's relink: not its round */
        LOG_INFO(MOD, "%s came into group %u during the round: the group's ring stays stale", out->name,
                 out->peer_group);
        for (size_t k = 0; k < st->nclients; k++)
            if (st->clients[k]->phase == CCOIP_MPHASE_ACCEPTED && st->clients[k]->peer_group == out->peer_group)
                st->clients[k]->ring_stale = true;
    }
}

/* Ends the active round: on success the newcomers become accepted, then everyone learns the
 * outcome (with the world sizes after it). */
static void finish_round(ccoip_master_state_t *st, bool ok, const char *why) {
    if (ok) {
        for (size_t i = 0; i < st->nclients; i++)
            if (st->clients[i]->in_round) {
                if (st->clients[i]->phase != CCOIP_MPHASE_ACCEPTED) st->counters.peers_admitted++;
                st->clients[i]->phase = CCOIP_MPHASE_ACCEPTED;
                st->clients[i]->ring_stale = false; /* its ring is whole again */
            }
        keep_stale_if_incomplete(st);
    } else {
        /* The participants dropped their old links for this round's: no ring until the next one
         * succeeds, so collectives are refused at once rather than hang (issue 30, 1). */
        for (size_t i = 0; i < st->nclients; i++)
            if (st->clients[i]->in_round && st->clients[i]->phase == CCOIP_MPHASE_ACCEPTED)
                st->clients[i]->ring_stale = true;
    }
    for (size_t i = 0; i < st->nclients; i++)
        if (st->clients[i]->in_round) conclude(st, st->clients[i], ok ? CCOIP_RESULT_OK : CCOIP_RESULT_FAILED);
    st->round_active = false;
    end_admission(st); /* newcomers left out of this admission may try in the next */
    if (ok) LOG_INFO(MOD, "topology round %llu done: %zu accepted peers", (unsigned long long) st->round,
                     count_phase(st, CCOIP_MPHASE_ACCEPTED));
    else LOG_WARN(MOD, "topology round %llu failed: %s", (unsigned long long) st->round, why);
}

static int by_id(const void *a, const void *b) {
    const ccoip_mclient_t *x = *(ccoip_mclient_t *const *) a, *y = *(ccoip_mclient_t *const *) b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* c as `viewer` is told about it: where viewer dials it (ccoip_mreach_dial_for). */
static ccoip_peer_entry_t entry_of(const ccoip_mclient_t *viewer, const ccoip_mclient_t *c, uint16_t flags) {
    ccoip_peer_entry_t e;
    memset(&e, 0, sizeof e);
    e.uuid = c->uuid;
    e.flags = flags;
    ccoip_mreach_dial_for(viewer, c, &e.addr, &e.p2p_port, &e.ss_port, &e.bench_port);
    if (flags & (CCOIP_PEER_TX_PUNCHED | CCOIP_PEER_RX_PUNCHED)) { /* its NAT's ports, at the address we saw */
        e.addr = c->addr;
        e.punch_tx_port = c->punch_tx_port;
        e.punch_rx_port = c->punch_rx_port;
    }
    return e;
}

static bool same_address(const ccoip_inet_address_t *a, const ccoip_inet_address_t *b) {
    if (a->protocol != b->protocol) return false;
    return a->protocol == inetIPv4 ? memcmp(a->ipv4.data, b->ipv4.data, 4) == 0 : memcmp(a->ipv6.data, b->ipv6.data, 16) == 0;
}

static ccoip_mclient_t *find_uuid(ccoip_master_state_t *st, const ccoip_uuid_t *u) {
    for (size_t i = 0; i < st->nclients; i++)
        if (memcmp(&st->clients[i]->uuid, u, sizeof *u) == 0 && st->clients[i]->phase >= CCOIP_MPHASE_GREETED)
            return st->clients[i];
    return NULL;
}

/* Ids (and table places, which follow ids) renumbered in ring's order, so that this round and
 * the next keep it. The table stays in id order: ranks in COMMENCE are table places
 * (ccoip_master_coll.c). */
static void renumber(ccoip_master_state_t *st, ccoip_mclient_t **ring, size_t n) {
    for (size_t i = 0; i < n; i++) ring[i]->id = ++st->next_id;
    qsort(st->clients, st->nclients, sizeof *st->clients, by_id);
}

/* After REJOINs, ring (sorted by id) is put back in the order the peers reported: from the first
 * peer, follow each one's successor while it is in the round and not placed yet; ids (and table
 * places, which follow ids) are then renumbered in that order, so this round and the next keep
 * it. The successors are used once. */
static void restore_ring_order(ccoip_master_state_t *st, ccoip_mclient_t **ring, size_t n) {
    bool any = false;
    for (size_t i = 0; i < n; i++) any = any || !ccoip_members_uuid_zero(&ring[i]->next);
    if (!any || n == 0) return;
    ccoip_mclient_t **order = malloc(n * sizeof *order);
    if (order == NULL) return; /* the connection order is a valid ring too */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) ring[i]->in_round = false; /* "not placed yet" below */
    for (size_t i = 0; i < n; i++) {
        ccoip_mclient_t *c = ring[i];
        while (c != NULL && !c->in_round) {
            c->in_round = true;
            order[k++] = c;
            ccoip_mclient_t *next = NULL;
            for (size_t j = 0; j < n && !ccoip_members_uuid_zero(&c->next); j++)
                if (memcmp(&ring[j]->uuid, &c->next, sizeof c->next) == 0) next = ring[j];
            c = next != NULL && next->peer_group == c->peer_group ? next : NULL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        ring[i] = order[i];
        memset(&ring[i]->next, 0, sizeof ring[i]->next);
    }
    free(order);
    renumber(st, ring, n);
}

#define ALL_GROUPS UINT64_MAX

static size_t index_of(ccoip_mclient_t *const *ring, size_t n, const ccoip_mclient_t *c) {
    size_t i = 0;
    while (i < n && ring[i] != c) i++;
    return i;
}

/* c's neighbours inside its group, in ring order (NULL: alone in it). */
static void neighbours(ccoip_mclient_t **ring, size_t n, size_t i, ccoip_mclient_t **next, ccoip_mclient_t **prev) {
    const ccoip_mclient_t *c = ring[i];
    size_t first = n, pos = 0, size = 0;
    for (size_t k = 0; k < n; k++) {
        if (ring[k]->peer_group != c->peer_group) continue;
        if (first == n) first = k;
        if (k == i) pos = size;
        size++;
    }
    *next = *prev = NULL;
    size_t want_next = (pos + 1) % size, want_prev = (pos + size - 1) % size, idx = 0;
    for (size_t k = first; k < n && size > 1; k++) {
        if (ring[k]->peer_group != c->peer_group) continue;
        if (idx == want_next) *next = ring[k];
        if (idx == want_prev) *prev = ring[k];
        idx++;
    }
}

/* ring[i]'s P2P_INFO: its neighbours, and every other participant at its address. tokens[k]
 * pairs the edge from ring[k] to its successor at the relay. False when out of memory. */
static bool send_p2p_info(ccoip_master_state_t *st, ccoip_mclient_t **ring, size_t n, size_t i,
                          const ccoip_uuid_t *tokens) {
    ccoip_mclient_t *c = ring[i], *next, *prev;
    neighbours(ring, n, i, &next, &prev);
    uint32_t count = 0, cap = n + 2 < CCOIP_MAX_PEER_ENTRIES ? (uint32_t) n + 2 : CCOIP_MAX_PEER_ENTRIES;
    ccoip_peer_entry_t *entries = malloc(cap * sizeof *entries);
    if (entries == NULL) return false;
    /* Each edge is dialled by its sending end, unless only that end is reachable; between two
     * unreachable ends it runs through the relay, paired by the edge's token. */
    bool relay = st->opt.relay.port != 0;
    uint16_t tx_flags = next != NULL ? CCOIP_PEER_CONNECT_TO | ccoip_mreach_tx_flags(c, next, relay) : 0;
    uint16_t rx_flags = prev != NULL ? CCOIP_PEER_ACCEPT_FROM | ccoip_mreach_rx_flags(prev, c, relay) : 0;
    if (next != NULL && next == prev) {
        entries[count++] = entry_of(c, next, tx_flags | rx_flags);
    } else if (next != NULL) {
        entries[count++] = entry_of(c, next, tx_flags);
        entries[count++] = entry_of(c, prev, rx_flags);
    }
    if (next != NULL) {
        entries[0].tx_token = tokens[i];
        entries[count - 1].rx_token = tokens[index_of(ring, n, prev)];
    }
    /* Then every other participant at c's address (any group), flagged SAME_HOST alone: the
     * peers that share c's host and its cores, for c's rule on sends by reference
     * (ccoip_splice.h). A neighbour there is listed twice: once to link, once to count. */
    for (size_t k = 0; k < n && count < cap; k++)
        if (ring[k] != c && same_address(&ring[k]->addr, &c->addr))
            entries[count++] = entry_of(c, ring[k], CCOIP_PEER_SAME_HOST);
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_M2C_P2P_INFO;
    p.u.p2p_info.round = st->round;
    p.u.p2p_info.count = count;
    p.u.p2p_info.peers = entries;
    if (relay) {
        p.u.p2p_info.relay_addr = st->opt.relay.inet;
        p.u.p2p_info.relay_port = st->opt.relay.port;
    }
    send_packet(st, c, &p);
    free(entries);
    return true;
}

/* Starts a round with every accepted peer (of `group` alone, unless ALL_GROUPS) and, to admit
 * them, every registered one: the ring of each peer group is its members in connection order
 * (unreachable peers moved between reachable ones); each member is told its next (connect to)
 * and previous (accept from) neighbour. */
static void start_round(ccoip_master_state_t *st, bool admit, uint64_t group) {
    size_t n = 0;
    ccoip_mclient_t **ring = malloc((st->nclients + 1) * sizeof *ring);
    /* tokens[i]: the edge from ring[i] to its successor, for the relay (fresh every round). */
    ccoip_uuid_t *tokens = calloc(st->nclients + 1, sizeof *tokens);
    if (ring == NULL || tokens == NULL) {
        LOG_ERROR(MOD, "out of memory starting a topology round");
        free(ring);
        free(tokens);
        return;
    }
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (c->phase != CCOIP_MPHASE_ACCEPTED && (!admit || !eligible(c))) continue;
        if (group != ALL_GROUPS && c->peer_group != group) continue;
        c->in_round = true;
        c->round_ok = -1;
        c->state = CCOIP_MSTATE_CONNECTING_P2P;
        ring[n++] = c;
    }
    qsort(ring, n, sizeof *ring, by_id);
    restore_ring_order(st, ring, n);
    if (ccoip_mreach_place(ring, n)) renumber(st, ring, n);
    if (st->round < st->round_floor) st->round = st->round_floor; /* above the rounds of a lost master */
    st->round++;
    st->round_active = true;
    if (group == ALL_GROUPS) LOG_INFO(MOD, "topology round %llu: %zu participants", (unsigned long long) st->round, n);
    else LOG_INFO(MOD, "topology round %llu: relinking group %u, %zu participants", (unsigned long long) st->round,
                  (unsigned) group, n);
    for (size_t i = 0; i < n && st->make_uuid != NULL; i++) st->make_uuid(st->ctx, &tokens[i]);
    for (size_t i = 0; i < n; i++)
        if (!send_p2p_info(st, ring, n, i, tokens)) {
            LOG_ERROR(MOD, "topology round %llu: out of memory", (unsigned long long) st->round);
            break; /* the round times out for everyone: they retry */
        }
    free(tokens);
    free(ring);
    st->round_started_ms = st->now_ms;
}

/* The active round failed on newcomers' links (those blamed: sits_out) or a newcomer left: they
 * hear FAILED (UNREACHABLE on their last try), the others RETRY, and the round runs again at
 * once without them, so that the members lose no step to a peer they cannot reach (issue 30). */
static void retry_round(ccoip_master_state_t *st, const char *why) {
    LOG_WARN(MOD, "topology round %llu failed: %s; running it again without it", (unsigned long long) st->round, why);
    size_t left = 0;
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (!c->in_round) continue;
        if (c->admit.sits_out) conclude(st, c, c->admit.unreachable ? CCOIP_RESULT_UNREACHABLE : CCOIP_RESULT_FAILED);
        else left++;
    }
    if (left == 0) { /* only newcomers, all blamed: nobody to run it again for */
        st->round_active = false;
        end_admission(st);
        return;
    }
    for (size_t i = 0; i < st->nclients; i++)
        if (st->clients[i]->in_round) conclude(st, st->clients[i], CCOIP_RESULT_RETRY);
    st->round_active = false;
    start_round(st, true, ALL_GROUPS);
}

static void send_pending_result(ccoip_master_state_t *st, ccoip_mclient_t *c, uint8_t status, bool pending) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_M2C_PENDING_RESULT;
    p.u.pending_result.status = status;
    p.u.pending_result.pending = pending;
    send_packet(st, c, &p);
}

static void refuse_votes(ccoip_master_state_t *st, uint32_t group) {
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (c->phase != CCOIP_MPHASE_ACCEPTED || c->dropped || c->peer_group != group) continue;
        bool refused = c->pending_vote || ccoip_members_in_round_vote(c);
        if (c->pending_vote) send_pending_result(st, c, CCOIP_RESULT_MISMATCH, false);
        if (ccoip_members_in_round_vote(c)) send_topology_result(st, c, CCOIP_RESULT_MISMATCH);
        if (!refused) continue;
        LOG_WARN(MOD, "%s: its vote is refused: the others of group %u were waiting for it in a collective",
                 c->name, group);
        c->pending_vote = false;
        c->state = CCOIP_MSTATE_IDLE;
    }
}

/* The accepted peers' votes. A round vote (ACCEPT, RELINK, OPTIMIZE) is a peer's `state`; a
 * pending query is a flag beside it. */
typedef struct votes_t {
    size_t accepted, accept, relink, optimize, pending;
    size_t voting; /* in a round vote or a pending query */
} votes_t;

static votes_t count_votes(const ccoip_master_state_t *st) {
    votes_t v;
    memset(&v, 0, sizeof v);
    for (size_t i = 0; i < st->nclients; i++) {
        const ccoip_mclient_t *c = st->clients[i];
        if (c->phase != CCOIP_MPHASE_ACCEPTED) continue;
        v.accepted++;
        v.accept += c->state == CCOIP_MSTATE_VOTE_ACCEPT;
        v.relink += c->state == CCOIP_MSTATE_VOTE_RELINK;
        v.optimize += c->state == CCOIP_MSTATE_VOTE_OPTIMIZE;
        v.pending += c->pending_vote;
        v.voting += c->pending_vote || ccoip_members_in_round_vote(c);
    }
    return v;
}

/* Answers the pending queries: all of them (`only` false) or those of peers in no round vote. */
static void answer_pending(ccoip_master_state_t *st, uint8_t status, bool pending, bool only) {
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (c->phase != CCOIP_MPHASE_ACCEPTED || !c->pending_vote || (only && ccoip_members_in_round_vote(c))) continue;
        send_pending_result(st, c, status, pending);
        c->pending_vote = false;
    }
}

static void refuse_round_votes(ccoip_master_state_t *st) {
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (c->phase != CCOIP_MPHASE_ACCEPTED || !ccoip_members_in_round_vote(c)) continue;
        send_topology_result(st, c, CCOIP_RESULT_MISMATCH);
        c->state = CCOIP_MSTATE_IDLE;
    }
}

/* A group in which some member voted RELINK and every member RELINK or ACCEPT: it relinks on its
 * own (a failed all-reduce waits for its group, not for the others'). */
static bool relink_ready(const ccoip_master_state_t *st, uint64_t *group) {
    for (size_t i = 0; i < st->nclients; i++) {
        const ccoip_mclient_t *c = st->clients[i];
        if (c->phase != CCOIP_MPHASE_ACCEPTED || c->state != CCOIP_MSTATE_VOTE_RELINK) continue;
        bool all = true;
        for (size_t k = 0; k < st->nclients && all; k++) {
            const ccoip_mclient_t *m = st->clients[k];
            if (m->phase != CCOIP_MPHASE_ACCEPTED || m->peer_group != c->peer_group) continue;
            all = m->state == CCOIP_MSTATE_VOTE_RELINK || m->state == CCOIP_MSTATE_VOTE_ACCEPT;
        }
        if (all) {
            *group = c->peer_group;
            return true;
        }
    }
    return false;
}

/* Members asking whether a round is due while their group waits for them in a relink: it is
 * (they vote next; the relink takes their ACCEPT). */
static void answer_relinking(ccoip_master_state_t *st) {
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (c->phase != CCOIP_MPHASE_ACCEPTED || !c->pending_vote || ccoip_members_in_round_vote(c)) continue;
        bool relinking = false;
        for (size_t k = 0; k < st->nclients && !relinking; k++)
            relinking = st->clients[k]->phase == CCOIP_MPHASE_ACCEPTED &&
                        st->clients[k]->peer_group == c->peer_group &&
                        st->clients[k]->state == CCOIP_MSTATE_VOTE_RELINK;
        if (!relinking) continue;
        send_pending_result(st, c, CCOIP_RESULT_OK, true);
        c->pending_vote = false;
    }
}

/* Looks at the votes and the round after anything changed, and moves on where it can
 * (docs/group-state-machine.md, "Votes"). */
static void evaluate(ccoip_master_state_t *st) {
    if (st->shutting_down) return;
    if (st->round_active) {
        bool all = true;
        ccoip_mclient_t *failed = NULL;
        for (size_t i = 0; i < st->nclients && failed == NULL; i++) {
            ccoip_mclient_t *c = st->clients[i];
            if (!c->in_round) continue;
            if (c->round_ok < 0) all = false;
            if (c->round_ok == 0) failed = c;
        }
        if (failed == NULL && !all) return;
        /* The first failure decides (the others' links are dropped at once, not awaited). */
        ccoip_mclient_t *newcomer = failed == NULL ? NULL : suspect(st, failed);
        if (newcomer != NULL) {
            blame(st, newcomer, failed->round_why);
            retry_round(st, "a newcomer could not be linked");
            return; /* a new round runs */
        }
        finish_round(st, failed == NULL, "a peer could not connect to its neighbours");
    }
    if (ccoip_mbw_active(st)) return; /* measuring for pcclOptimizeTopology: votes wait */
    if (ccoip_members_awaiting_rejoins(st)) return; /* ccoip_mstate_tick looks again when the grace ends */
    if (member_probing(st)) return; /* a rejoined member: its edges depend on it (on_probe looks again) */
    size_t registered = waiting(st);
    votes_t v = count_votes(st);
    if (v.accepted == 0) {
        /* Nobody to vote: whoever is waiting is admitted at once (the very first peer). */
        for (size_t i = 0; i < st->nclients; i++)
            if (eligible(st->clients[i])) {
                start_round(st, true, ALL_GROUPS);
                break;
            }
        return;
    }
    if (v.pending == v.accepted) { /* every peer asked: the answer, whatever else they vote */
        answer_pending(st, CCOIP_RESULT_OK, registered > 0, false);
        v = count_votes(st);
    }
    uint64_t group;
    if (v.relink > 0 && relink_ready(st, &group)) {
        start_round(st, false, group); /* mid-step: admit nobody; other groups go on */
        return;
    }
    if (v.relink > 0) answer_relinking(st);
    size_t round_votes = v.accept + v.relink + v.optimize;
    if (round_votes == v.accepted) {
        if (v.optimize == v.accepted) ccoip_mbw_start(st);
        else if (v.optimize == 0) start_round(st, true, ALL_GROUPS);
        else {
            LOG_WARN(MOD, "accepted peers voted for different things (%zu update topology, %zu relink, %zu optimize)",
                     v.accept, v.relink, v.optimize);
            refuse_round_votes(st);
        }
        return;
    }
    if (v.voting < v.accepted) return; /* someone has not voted yet */
    if (v.accept + v.relink > 0) {
        /* Some asked for a topology round, the others whether one is due: it is. The pending
         * voters hear "pending" and vote again with pcclUpdateTopology; the others keep waiting.
         * (After a failure one peer updates while another, between calls, asks: both must meet.) */
        answer_pending(st, CCOIP_RESULT_OK, true, true);
        return;
    }
    LOG_WARN(MOD, "accepted peers voted for different things (%zu optimize topology, %zu peers pending)", v.optimize,
             v.pending);
    answer_pending(st, CCOIP_RESULT_MISMATCH, false, true);
    refuse_round_votes(st);
}

static void relink(ccoip_master_state_t *st) { start_round(st, false, ALL_GROUPS); }

/* Members of one group in a vote and in a shared-state sync: the vote wins. Both wait for every
 * member, and a member in a vote will not sync, so those waiting in the sync are refused now
 * (pcclRankConnectionLost) and vote next, as a training loop does after a failure. */
static void vote_wins(ccoip_master_state_t *st, uint32_t group) { ccoip_mss_refuse_waiting(st, group); }

void ccoip_mstate_say_bye(ccoip_master_state_t *st) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_M2C_BYE;
    for (size_t i = 0; i < st->nclients; i++)
        if (st->clients[i]->phase >= CCOIP_MPHASE_REGISTERED) send_packet(st, st->clients[i], &p);
}

static void drop(ccoip_master_state_t *st, ccoip_mclient_t *c, const char *why, log_level_t level);

void ccoip_mstate_drop(ccoip_master_state_t *st, ccoip_mclient_t *c, const char *why) {
    drop(st, c, why, LOG_LEVEL_INFO);
}

void ccoip_mstate_reject(ccoip_master_state_t *st, ccoip_mclient_t *c, const char *why) {
    drop(st, c, why, LOG_LEVEL_WARN);
}

static void drop(ccoip_master_state_t *st, ccoip_mclient_t *c, const char *why, log_level_t level) {
    if (c->dropped) return;
    c->dropped = true;
    size_t i = 0;
    while (i < st->nclients && st->clients[i] != c) i++;
    if (i < st->nclients) {
        memmove(&st->clients[i], &st->clients[i + 1], (st->nclients - i - 1) * sizeof *st->clients);
        st->nclients--;
    }
    bool was_accepted = c->phase == CCOIP_MPHASE_ACCEPTED;
    if (was_accepted && !st->shutting_down) st->counters.peers_dropped++;
    if (was_accepted && level == LOG_LEVEL_INFO) { /* its connection broke: it may come back with REJOIN */
        st->gone[st->ngone % CCOIP_MASTER_GONE_SLOTS].uuid = c->uuid;
        st->gone[st->ngone % CCOIP_MASTER_GONE_SLOTS].ms = st->now_ms;
        ccoip_mcoll_keep_verdicts(c, st->gone[st->ngone % CCOIP_MASTER_GONE_SLOTS].verdicts);
        st->ngone++;
    }
    if (c->phase >= CCOIP_MPHASE_REGISTERED || !st->shutting_down)
        if (log_enabled(level)) log_write(level, MOD, "dropping %s (%s): %s", c->name,
                 was_accepted ? "accepted" : c->phase == CCOIP_MPHASE_REGISTERED ? "pending" : "not joined", why);
    bool on_purpose = level != LOG_LEVEL_INFO; /* rejected (bad input, kicked, silent): it may not rejoin */
    if (on_purpose && c->phase >= CCOIP_MPHASE_REGISTERED) {
        ccoip_packet_t bye;
        memset(&bye, 0, sizeof bye);
        bye.type = CCOIP_PKT_M2C_BYE;
        send_packet(st, c, &bye); /* before the close: the shutdown drains it */
    }
    st->close(st->ctx, c);
    ccoip_mss_on_leave(st, c, was_accepted); /* frees its sync state; re-evaluates its group's sync */
    ccoip_mbw_on_leave(st, c); /* its matrix row and column; fails an optimisation it is in */
    ccoip_mfp_on_leave(c);
    if (st->shutting_down) return;
    if (c->in_round && st->round_active) {
        if (c->phase == CCOIP_MPHASE_REGISTERED) retry_round(st, "a newcomer left during the round");
        else finish_round(st, false, "a participant left during the round");
    }
    if (was_accepted) {
        /* Everyone's world shrank; collectives in flight in c's group are aborted. */
        ccoip_mcoll_on_leave(st, c);
        for (size_t k = 0; k < st->nclients; k++) {
            ccoip_mclient_t *o = st->clients[k];
            if (o->phase != CCOIP_MPHASE_ACCEPTED) continue;
            ccoip_packet_t p;
            memset(&p, 0, sizeof p);
            p.type = CCOIP_PKT_M2C_WORLD_UPDATE;
            p.u.world_update.world = ccoip_members_world(st, o);
            send_packet(st, o, &p);
        }
    }
    evaluate(st);
}

static bool is_loopback_mix(const ccoip_master_state_t *st, const ccoip_mclient_t *c) {
    for (size_t i = 0; i < st->nclients; i++) {
        const ccoip_mclient_t *o = st->clients[i];
        if (o != c && o->phase >= CCOIP_MPHASE_REGISTERED && o->loopback != c->loopback) return true;
    }
    return false;
}

static void on_hello(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_hello_t *h) {
    ccoip_packet_t ack;
    memset(&ack, 0, sizeof ack);
    ack.type = CCOIP_PKT_HELLO_ACK;
    ack.u.hello_ack.magic = CCOIP_MAGIC;
    ack.u.hello_ack.version = CCOIP_PROTOCOL_VERSION;
    const char *why = NULL;
    if (h->magic != CCOIP_MAGIC) {
        ack.u.hello_ack.status = CCOIP_HELLO_BAD_MAGIC;
        why = "bad magic in handshake";
    } else if (h->version != CCOIP_PROTOCOL_VERSION) {
        ack.u.hello_ack.status = CCOIP_HELLO_BAD_VERSION;
        LOG_WARN(MOD, "%s speaks protocol version %u, this master speaks %u", c->name, h->version,
                 CCOIP_PROTOCOL_VERSION);
        why = "protocol version mismatch";
    } else if (h->role != CCOIP_ROLE_PEER_TO_MASTER) {
        ack.u.hello_ack.status = CCOIP_HELLO_BAD_ROLE;
        why = "handshake role is not peer-to-master";
    }
    if (why != NULL) {
        send_packet(st, c, &ack);
        ccoip_mstate_reject(st, c, why);
        return;
    }
    /* A member back after losing the master (REJOIN follows) keeps its UUID when nobody here
     * holds it; anyone else gets a fresh one. */
    if (!ccoip_members_uuid_zero(&h->uuid) && find_uuid(st, &h->uuid) == NULL) c->uuid = h->uuid;
    else st->make_uuid(st->ctx, &c->uuid);
    ack.u.hello_ack.status = CCOIP_HELLO_OK;
    ack.u.hello_ack.uuid = c->uuid;
    if (!ccoip_mauth_on_hello(st, c, h, &ack.u.hello_ack)) {
        send_packet(st, c, &ack);
        ccoip_mstate_reject(st, c, "run secret refused");
        return;
    }
    if (c->phase == CCOIP_MPHASE_CONNECTED) c->phase = CCOIP_MPHASE_GREETED;
    send_packet(st, c, &ack);
}

static void on_auth(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_auth_t *a) {
    if (!ccoip_mauth_on_auth(st, c, a)) {
        ccoip_mstate_reject(st, c, "run secret refused");
        return;
    }
    c->phase = CCOIP_MPHASE_GREETED;
}

static void send_join_response(ccoip_master_state_t *st, ccoip_mclient_t *c, uint8_t status) {
    ccoip_packet_t r;
    memset(&r, 0, sizeof r);
    r.type = CCOIP_PKT_M2C_JOIN_RESPONSE;
    r.u.join_response.status = status;
    r.u.join_response.seen_addr = c->dial_addr;
    r.u.join_response.seen_port = c->dial_p2p;
    r.u.join_response.reachable = c->reachable;
    send_packet(st, c, &r);
}

/* What JOIN and REJOIN check and record alike; false when c was refused. */
static bool take_join(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_join_t *j) {
    if (j->p2p_port == 0) {
        ccoip_mstate_reject(st, c, "JOIN without a p2p port");
        return false;
    }
    if (is_loopback_mix(st, c)) {
        send_join_response(st, c, CCOIP_JOIN_LOOPBACK_MIX);
        ccoip_mstate_reject(st, c,
                          c->loopback ? "refused: connected via loopback while other peers connected via a public address"
                                      : "refused: connected via a public address while other peers use loopback");
        return false;
    }
    char why[512];
    if (!ccoip_mfp_admit(st, c, why, sizeof why)) {
        send_join_response(st, c, CCOIP_JOIN_FINGERPRINT);
        ccoip_mstate_reject(st, c, why);
        return false;
    }
    c->peer_group = j->peer_group;
    c->p2p_port = j->p2p_port;
    c->ss_port = j->ss_port;
    c->bench_port = j->bench_port;
    ccoip_mreach_take_join(c, j);
    c->reachable = true; /* until a probe says otherwise */
    if (st->probe != NULL && st->opt.probe_timeout_ms > 0) {
        c->probing = true;
        st->probe(st->ctx, c, &c->dial_addr, c->dial_p2p);
    }
    return true;
}

/* A newcomer is answered once the master knows whether it can be dialled. */
static void answer_join(ccoip_master_state_t *st, ccoip_mclient_t *c) {
    send_join_response(st, c, CCOIP_JOIN_OK);
    LOG_INFO(MOD, "%s joined peer group %u (p2p port %u%s), pending admission", c->name, c->peer_group, c->p2p_port,
             c->reachable ? "" : ", not reachable: it dials its ring edges");
    evaluate(st);
}

static void on_join(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_join_t *j) {
    if (!take_join(st, c, j)) return;
    c->phase = CCOIP_MPHASE_REGISTERED;
    if (!c->probing) answer_join(st, c);
}

void ccoip_mstate_on_probe(ccoip_master_state_t *st, ccoip_mclient_t *c, bool reachable, const char *why,
                           uint64_t now_ms) {
    st->now_ms = now_ms;
    if (!c->probing || c->dropped) return;
    c->probing = false;
    c->reachable = reachable;
    char where[80];
    ccoip_mreach_format(c, where, sizeof where);
    if (!reachable) LOG_INFO(MOD, "%s cannot be dialled at %s (%s): its ring edges will be dialled from its side", c->name, where, why);
    else LOG_DEBUG(MOD, "%s can be dialled at %s", c->name, where);
    if (c->phase == CCOIP_MPHASE_REGISTERED) answer_join(st, c);
    else if (c->phase == CCOIP_MPHASE_ACCEPTED) evaluate(st); /* rounds waited for it */
}

/* Whether a REJOIN of uuid is taken now: within the recovery window after the master started (a
 * restarted master cannot know the run's members), or after it dropped that accepted peer. */
static bool may_rejoin(const ccoip_master_state_t *st, const ccoip_uuid_t *uuid) {
    uint64_t w = st->opt.rejoin_window_ms;
    if (w == 0) return false;
    if (st->now_ms - st->start_ms <= w) return true;
    uint32_t n = st->ngone < CCOIP_MASTER_GONE_SLOTS ? st->ngone : CCOIP_MASTER_GONE_SLOTS;
    for (uint32_t i = 0; i < n; i++)
        if (memcmp(&st->gone[i].uuid, uuid, sizeof *uuid) == 0 && st->now_ms - st->gone[i].ms <= w) return true;
    return false;
}

/* A member back after losing the master: accepted at once with the identity, ring successor and
 * shared-state revision it reports. Its group's ring is stale (collectives are refused until a
 * topology round), and everyone's world grew. */
static void on_rejoin(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_rejoin_t *rj) {
    if (!take_join(st, c, &rj->join)) return;
    if (ccoip_members_uuid_zero(&c->uuid) || !may_rejoin(st, &c->uuid)) {
        send_join_response(st, c, CCOIP_JOIN_REJOIN_REFUSED);
        ccoip_mstate_reject(st, c, "REJOIN refused: not within the recovery window (--rejoin-window-s)");
        return;
    }
    if (rj->has_rev && !ccoip_mss_restore(st, c, rj->last_rev)) {
        ccoip_mstate_reject(st, c, "out of memory for its shared-state revision");
        return;
    }
    c->phase = CCOIP_MPHASE_ACCEPTED;
    c->next = rj->next;
    c->has_result = rj->has_result != 0;
    c->result_rev = rj->result_rev;
    if (st->first_rejoin_ms == 0) st->first_rejoin_ms = st->now_ms > 0 ? st->now_ms : 1;
    if (rj->round > st->round_floor) st->round_floor = rj->round; /* p2p links tell rounds apart */
    send_join_response(st, c, CCOIP_JOIN_OK);
    LOG_INFO(MOD, "%s rejoined peer group %u as a member (shared-state revision %s%llu)", c->name, c->peer_group,
             rj->has_rev ? "" : "none, ", (unsigned long long) rj->last_rev);
    for (size_t k = 0; k < st->nclients; k++) {
        ccoip_mclient_t *o = st->clients[k];
        if (o->phase != CCOIP_MPHASE_ACCEPTED) continue;
        if (o->peer_group == c->peer_group) o->ring_stale = true;
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_M2C_WORLD_UPDATE;
        p.u.world_update.world = ccoip_members_world(st, o);
        send_packet(st, o, &p);
    }
    ccoip_mcoll_refuse_waiting(st, c->peer_group);
    evaluate(st);
    ccoip_mss_evaluate_all(st); /* syncs and queries held for it go on */
}

/* c could not link with n: when their edge was punched and the run has a relay, neither is
 * punched again (a NAT that maps each destination to its own port, a path that never lets the
 * two meet): their edges between unreachable ends run through the relay from the next round on.
 * Without a relay nothing else could link them: the next round punches again. */
static void punch_failed(ccoip_master_state_t *st, ccoip_mclient_t *c, ccoip_mclient_t *n) {
    if (n == NULL || (!ccoip_mreach_punched(c, n) && !ccoip_mreach_punched(n, c))) return;
    bool relay = st->opt.relay.port != 0;
    c->punch_failed = n->punch_failed = relay;
    LOG_WARN(MOD, "hole punching between %s and %s failed: %s", c->name, n->name,
             relay ? "their edges with unreachable peers run through the relay from now on"
                   : "no relay to fall back on (pccl-master --relay): the next round punches again");
}

/* A connection from a peer's punch port, before the peer's JOIN (C2M_PUNCH_MAP): the source port
 * seen here is where that port's dials come from through the peer's NAT. Taken only from the
 * owner's own address; the connection ends here, which tells the peer to go on. */
static void on_punch_map(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_punch_map_t *m) {
    ccoip_mclient_t *o = find_uuid(st, &m->owner);
    if (o != NULL && o != c && same_address(&o->addr, &c->addr)) {
        *(m->which == CCOIP_PUNCH_TX ? &o->punch_tx_port : &o->punch_rx_port) = c->port;
        LOG_DEBUG(MOD, "%s: its %s punch port leaves its NAT as port %u", o->name,
                  m->which == CCOIP_PUNCH_TX ? "TX" : "RX", c->port);
    }
    drop(st, c, o != NULL ? "punch port mapped" : "punch map of an unknown peer", LOG_LEVEL_DEBUG);
}

/* c's report on its links in the round; false when it reported twice (a protocol violation). */
static bool on_established(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_p2p_established_t *e) {
    /* Late reports of a round that already ended are harmless: ignore them. */
    if (!st->round_active || e->round != st->round || !c->in_round) return true;
    if (c->round_ok >= 0) return false;
    c->round_ok = e->ok;
    c->round_failed = e->failed;
    c->round_why = e->why;
    if (!c->round_ok) LOG_WARN(MOD, "%s could not link with a ring neighbour: %s", c->name, ccoip_link_why_str(e->why));
    if (!c->round_ok) punch_failed(st, c, find_uuid(st, &e->failed));
    evaluate(st);
    return true;
}

/* The active round ran over its time: silent newcomers are blamed and it runs again without them;
 * a silent member fails it for everyone. */
static void round_timed_out(ccoip_master_state_t *st) {
    bool member_silent = false;
    for (size_t i = 0; i < st->nclients; i++)
        member_silent = member_silent || (st->clients[i]->in_round && st->clients[i]->round_ok < 0 &&
                                          st->clients[i]->phase == CCOIP_MPHASE_ACCEPTED);
    for (size_t i = 0; i < st->nclients && !member_silent; i++)
        if (st->clients[i]->in_round && st->clients[i]->round_ok < 0) blame(st, st->clients[i], CCOIP_LINK_TIMEOUT);
    if (member_silent) finish_round(st, false, "round timed out");
    else retry_round(st, "a newcomer did not report in time");
}

/* A packet before JOIN: the handshake (HELLO, AUTH), then JOIN or REJOIN. */
static void on_handshake_packet(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_packet_t *p) {
    switch (c->phase) {
    case CCOIP_MPHASE_CONNECTED:
        if (p->type == CCOIP_PKT_HELLO) on_hello(st, c, &p->u.hello);
        else ccoip_mstate_reject(st, c, "first packet is not HELLO");
        return;
    case CCOIP_MPHASE_PROVING:
        if (p->type == CCOIP_PKT_AUTH) on_auth(st, c, &p->u.auth);
        else ccoip_mstate_reject(st, c, "expected AUTH after HELLO");
        return;
    default:
        if (p->type == CCOIP_PKT_C2M_JOIN) on_join(st, c, &p->u.join);
        else if (p->type == CCOIP_PKT_C2M_REJOIN) on_rejoin(st, c, &p->u.rejoin);
        else if (p->type == CCOIP_PKT_C2M_FINGERPRINT) ccoip_mfp_on_packet(st, c, &p->u.fingerprint);
        else if (p->type == CCOIP_PKT_C2M_PUNCH_MAP) on_punch_map(st, c, &p->u.punch_map);
        else if (p->type != CCOIP_PKT_C2M_HEARTBEAT) ccoip_mstate_reject(st, c, "expected JOIN after HELLO");
        return;
    }
}

/* A member's vote (update, relink, pending, optimize); false when it may not vote now. */
static bool on_vote(ccoip_master_state_t *st, ccoip_mclient_t *c, uint16_t type) {
    if (c->phase != CCOIP_MPHASE_ACCEPTED) return false;
    if (type == CCOIP_PKT_C2M_VOTE_PENDING) { /* beside collectives and a round vote of another thread */
        if (c->pending_vote) return false;
        c->pending_vote = true;
    } else {
        if (c->state != CCOIP_MSTATE_IDLE) return false;
        c->state = type == CCOIP_PKT_C2M_VOTE_ACCEPT   ? CCOIP_MSTATE_VOTE_ACCEPT
                   : type == CCOIP_PKT_C2M_VOTE_RELINK ? CCOIP_MSTATE_VOTE_RELINK
                                                       : CCOIP_MSTATE_VOTE_OPTIMIZE;
        /* Its ring goes: what runs or waits on it in the group fails for every member alike. */
        if (c->state == CCOIP_MSTATE_VOTE_RELINK) ccoip_mcoll_break_group(st, c->peer_group);
    }
    vote_wins(st, c->peer_group);
    evaluate(st);
    return true;
}

/* A member's packet for a module (collectives, shared state, bandwidth); false when it is not
 * one, or not valid now. */
static bool on_module_packet(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_packet_t *p) {
    if (c->phase != CCOIP_MPHASE_ACCEPTED) return false;
    switch (p->type) {
    case CCOIP_PKT_C2M_COLLECTIVE_INIT: ccoip_mcoll_on_init(st, c, &p->u.collective_init); return true;
    case CCOIP_PKT_C2M_COLLECTIVE_COMPLETE: ccoip_mcoll_on_complete(st, c, &p->u.collective_complete); return true;
    case CCOIP_PKT_C2M_COLLECTIVE_ABORT: ccoip_mcoll_on_abort(st, c, &p->u.collective_abort); return true;
    case CCOIP_PKT_C2M_COLLECTIVE_QUERY: ccoip_mcoll_on_query(st, c, &p->u.collective_abort); return true;
    case CCOIP_PKT_C2M_SHARED_STATE_SYNC: ccoip_mss_on_sync(st, c, &p->u.ss_sync); return true;
    case CCOIP_PKT_C2M_SHARED_STATE_DONE: ccoip_mss_on_done(st, c, &p->u.ss_done); return true;
    case CCOIP_PKT_C2M_SHARED_STATE_ABORT: ccoip_mss_on_abort(st, c); return true;
    case CCOIP_PKT_C2M_SHARED_STATE_QUERY:
        if (c->querying) return false;
        ccoip_mss_on_query(st, c, &p->u.ss_query);
        return true;
    case CCOIP_PKT_C2M_BANDWIDTH_REPORT: /* late reports of an ended session are ignored there */
        ccoip_mbw_on_report(st, c, &p->u.bench_report);
        return true;
    default: return false;
    }
}

void ccoip_mstate_on_packet(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_packet_t *p, uint64_t now_ms) {
    if (c->dropped) return;
    st->now_ms = now_ms;
    c->last_seen_ms = now_ms;
    if (c->phase != CCOIP_MPHASE_REGISTERED && c->phase != CCOIP_MPHASE_ACCEPTED) {
        on_handshake_packet(st, c, p);
        return;
    }
    bool vote = p->type == CCOIP_PKT_C2M_VOTE_ACCEPT || p->type == CCOIP_PKT_C2M_VOTE_RELINK ||
                p->type == CCOIP_PKT_C2M_VOTE_PENDING || p->type == CCOIP_PKT_C2M_OPTIMIZE_TOPOLOGY;
    if (p->type == CCOIP_PKT_C2M_HEARTBEAT) return;
    if (vote ? on_vote(st, c, p->type) : on_module_packet(st, c, p)) return;
    if (p->type == CCOIP_PKT_C2M_P2P_ESTABLISHED && on_established(st, c, &p->u.p2p_established)) return;
    const char *name = ccoip_packet_name(p->type);
    LOG_WARN(MOD, "%s sent %s, which is not valid now (phase %d, state %d)", c->name, name ? name : "?", c->phase,
             c->state);
    ccoip_mstate_reject(st, c, "protocol violation");
}

void ccoip_mstate_tick(ccoip_master_state_t *st, uint64_t now_ms) {
    st->now_ms = now_ms;
    for (size_t i = 0; i < st->nclients;) {
        ccoip_mclient_t *c = st->clients[i];
        const char *why = NULL;
        if (c->phase < CCOIP_MPHASE_REGISTERED && now_ms - c->connected_ms > st->opt.handshake_timeout_ms)
            why = "no handshake in time";
        else if (c->phase >= CCOIP_MPHASE_REGISTERED && now_ms - c->last_seen_ms > st->opt.heartbeat_timeout_ms)
            why = "missed heartbeats";
        if (why == NULL) {
            i++;
            continue;
        }
        ccoip_mstate_reject(st, c, why);
        i = 0; /* dropping removes c and may change the table: start over (rare) */
    }
    if (st->round_active && now_ms - st->round_started_ms > st->opt.round_timeout_ms) {
        round_timed_out(st);
        evaluate(st); /* votes that came during the round */
    }
    if (!st->round_active && st->first_rejoin_ms != 0 && !st->grace_over &&
        now_ms - st->first_rejoin_ms >= st->opt.rejoin_grace_ms) {
        st->grace_over = true; /* votes and syncs held for missing successors go on now */
        evaluate(st);
        ccoip_mss_evaluate_all(st);
    }
    ccoip_mbw_tick(st);
}
