/* The master's rules for a group whose members are in different calls (docs/group-state-machine.md)
 * without sockets: accepted clients are set up, packets fed in, the answers captured. A group that
 * lost a member refuses collectives at once; a vote refuses the group's syncs; a pending vote that
 * meets an update vote hears "pending"; so every member ends in pcclUpdateTopology, and the round
 * makes the group whole. */
#include <stdlib.h>
#include <string.h>

#include "ccoip/master/ccoip_master_state.h"
#include "tests/common/check.h"

#define MAXC 8
#define MAXP 64

static ccoip_master_state_t st;
static ccoip_mclient_t clients[MAXC];
static ccoip_packet_t sent[MAXC][MAXP];
static int nsent[MAXC];

static int index_of(const ccoip_mclient_t *c) { return (int) (c - clients); }

static void fake_send(void *ctx, ccoip_mclient_t *c, const ccoip_packet_t *p) {
    (void) ctx;
    ccoip_writer_t w;
    ccoip_writer_init(&w, CCOIP_MAX_PAYLOAD + CCOIP_HEADER_SIZE);
    REQUIRE(ccoip_packet_encode(p, &w) == CCOIP_OK);
    int i = index_of(c);
    REQUIRE(nsent[i] < MAXP);
    REQUIRE(ccoip_packet_decode(p->type, w.buf + CCOIP_HEADER_SIZE, w.len - CCOIP_HEADER_SIZE, &sent[i][nsent[i]++]) ==
            CCOIP_OK);
    ccoip_writer_free(&w);
}

static void fake_close(void *ctx, ccoip_mclient_t *c) { (void) ctx, (void) c; }

static void reset(int n) {
    for (int i = 0; i < MAXC; i++)
        for (int k = 0; k < nsent[i]; k++) ccoip_packet_free(&sent[i][k]);
    if (st.clients != NULL) {
        st.shutting_down = true;
        while (st.nclients > 0) ccoip_mstate_drop(&st, st.clients[st.nclients - 1], "test over");
        ccoip_mstate_free(&st);
    }
    memset(clients, 0, sizeof clients);
    memset(nsent, 0, sizeof nsent);
    ccoip_mstate_init(&st, NULL);
    st.send = fake_send;
    st.close = fake_close;
    for (int i = 0; i < n; i++) {
        REQUIRE(ccoip_mstate_add(&st, &clients[i], 0));
        clients[i].phase = CCOIP_MPHASE_ACCEPTED;
        clients[i].p2p_port = clients[i].dial_p2p = (uint16_t) (40000 + i);
        clients[i].reachable = true;
        memset(clients[i].uuid.b, i + 1, 16);
        snprintf(clients[i].name, sizeof clients[i].name, "peer%d", i);
    }
}

/* How many packets of `type` client i got. */
static int got(int i, uint16_t type) {
    int n = 0;
    for (int k = 0; k < nsent[i]; k++) n += sent[i][k].type == type;
    return n;
}

static const ccoip_packet_t *last_of(int i, uint16_t type) {
    for (int k = nsent[i] - 1; k >= 0; k--)
        if (sent[i][k].type == type) return &sent[i][k];
    return NULL;
}

static void feed(int i, ccoip_packet_t *p) { ccoip_mstate_on_packet(&st, &clients[i], p, 1); }

static void init(int i, uint64_t tag) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_COLLECTIVE_INIT;
    p.u.collective_init = (ccoip_collective_init_t){tag, 1000, 10, 0, 10, 0};
    feed(i, &p);
}

static void vote(int i, uint16_t type) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = type;
    feed(i, &p);
}

static void sync(int i) {
    static char name[] = "w";
    ccoip_ss_tensor_t t = {name, 7, CCOIP_HASH_XXH3, 10, 1000, 0};
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_SHARED_STATE_SYNC;
    p.u.ss_sync = (ccoip_ss_sync_t){1, 0, 1, &t};
    feed(i, &p);
}

static uint8_t commence_status(int i) {
    const ccoip_packet_t *p = last_of(i, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE);
    REQUIRE(p != NULL);
    return p->u.collective_commence.status;
}

/* Every member reports its links; the round ends. */
static void finish_round(int n) {
    for (int i = 0; i < n; i++) {
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_C2M_P2P_ESTABLISHED;
        p.u.p2p_established = (ccoip_p2p_established_t){.round = st.round, .ok = 1};
        feed(i, &p);
    }
}

/* A whole group: an all-reduce and a sync wait for every member; a vote refuses the sync (a member
 * in a vote will not sync), not the all-reduce (that misuse is the watchdog's). */
static void test_whole_group(void) {
    reset(3);
    init(0, 1);
    sync(1);
    for (int i = 0; i < 3; i++) CHECK_EQ_U64(nsent[i], 0);
    vote(2, CCOIP_PKT_C2M_VOTE_PENDING);
    const ccoip_packet_t *r = last_of(1, CCOIP_PKT_M2C_SHARED_STATE_RESULT);
    REQUIRE(r != NULL);
    CHECK_EQ_U64(r->u.ss_result.status, CCOIP_SS_STALE);
    CHECK_EQ_U64(nsent[0], 0);
}

/* The stall: the group lost a member; one member syncs (a sync needs no ring: it may run),
 * one asks for an all-reduce (refused at once: no ring), one votes (the waiting sync is refused);
 * all vote; the round runs and the group is whole again. */
static void test_broken_group_converges(void) {
    reset(4);
    ccoip_mstate_drop(&st, &clients[3], "killed");
    sync(2);
    CHECK_EQ_U64(got(2, CCOIP_PKT_M2C_SHARED_STATE_RESULT), 0);
    init(0, 1);
    CHECK_EQ_U64(commence_status(0), CCOIP_RESULT_FAILED); /* at once, though the others never asked */
    vote(1, CCOIP_PKT_C2M_VOTE_ACCEPT);
    const ccoip_packet_t *r = last_of(2, CCOIP_PKT_M2C_SHARED_STATE_RESULT);
    REQUIRE(r != NULL);
    CHECK_EQ_U64(r->u.ss_result.status, CCOIP_SS_STALE);
    CHECK_EQ_U64(got(1, CCOIP_PKT_M2C_TOPOLOGY_RESULT), 0); /* the vote waits for the others */
    sync(2); /* a sync while a member votes: refused on arrival */
    CHECK_EQ_U64(got(2, CCOIP_PKT_M2C_SHARED_STATE_RESULT), 2);
    vote(0, CCOIP_PKT_C2M_VOTE_ACCEPT);
    vote(2, CCOIP_PKT_C2M_VOTE_ACCEPT);
    for (int i = 0; i < 3; i++) CHECK_EQ_U64(got(i, CCOIP_PKT_M2C_P2P_INFO), 1);
    finish_round(3);
    for (int i = 0; i < 3; i++) {
        const ccoip_packet_t *t = last_of(i, CCOIP_PKT_M2C_TOPOLOGY_RESULT);
        REQUIRE(t != NULL);
        CHECK_EQ_U64(t->u.topology_result.status, CCOIP_RESULT_OK);
    }
    int before = got(0, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE);
    init(0, 2); /* whole again: waits for the others, then commences */
    CHECK_EQ_U64(got(0, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE), before);
    init(1, 2);
    init(2, 2);
    CHECK_EQ_U64(commence_status(0), CCOIP_RESULT_OK);
}

/* After a failure one member votes for the topology while another asks whether peers are pending:
 * the pending voters hear "pending" and vote again; then the round runs. */
static void test_pending_meets_update(void) {
    reset(4);
    ccoip_mstate_drop(&st, &clients[3], "killed");
    vote(0, CCOIP_PKT_C2M_VOTE_PENDING);
    vote(1, CCOIP_PKT_C2M_VOTE_ACCEPT);
    CHECK_EQ_U64(got(0, CCOIP_PKT_M2C_PENDING_RESULT), 0); /* not every member voted yet */
    vote(2, CCOIP_PKT_C2M_VOTE_PENDING);
    for (int i = 0; i < 3; i += 2) {
        const ccoip_packet_t *p = last_of(i, CCOIP_PKT_M2C_PENDING_RESULT);
        REQUIRE(p != NULL);
        CHECK_EQ_U64(p->u.pending_result.status, CCOIP_RESULT_OK);
        CHECK_EQ_U64(p->u.pending_result.pending, 1);
    }
    CHECK_EQ_U64(got(1, CCOIP_PKT_M2C_TOPOLOGY_RESULT), 0);
    vote(0, CCOIP_PKT_C2M_VOTE_ACCEPT);
    vote(2, CCOIP_PKT_C2M_VOTE_ACCEPT);
    for (int i = 0; i < 3; i++) CHECK_EQ_U64(got(i, CCOIP_PKT_M2C_P2P_INFO), 1);
}

/* A member waiting for its COMMENCE when another leaves is refused then, not when all asked. */
static void test_loss_while_waiting(void) {
    reset(3);
    init(0, 5);
    vote(1, CCOIP_PKT_C2M_VOTE_ACCEPT); /* misuse in a whole group: nothing refused yet */
    CHECK_EQ_U64(nsent[0], 0);
    ccoip_mstate_drop(&st, &clients[2], "killed");
    CHECK_EQ_U64(commence_status(0), CCOIP_RESULT_FAILED);
}

/* A member that rejoins (after a master restart) while the others' collective runs has no part in
 * it: the collective is done when those that commenced it have reported (restart_test stalled for
 * 60 s: the master waited for the newcomer's COMPLETE while it waited in a vote for them). */
static void test_member_arrives_mid_collective(void) {
    reset(3);
    clients[2].phase = CCOIP_MPHASE_REGISTERED; /* not a member yet */
    init(0, 7);
    init(1, 7);
    CHECK_EQ_U64(commence_status(0), CCOIP_RESULT_OK);
    clients[2].phase = CCOIP_MPHASE_ACCEPTED; /* comes in now */
    for (int i = 0; i < 2; i++) {
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_C2M_COLLECTIVE_COMPLETE;
        p.u.collective_complete = (ccoip_collective_complete_t){7, 1};
        CHECK_EQ_U64(got(0, CCOIP_PKT_M2C_COLLECTIVE_DONE), 0);
        feed(i, &p);
    }
    for (int i = 0; i < 2; i++) {
        const ccoip_packet_t *d = last_of(i, CCOIP_PKT_M2C_COLLECTIVE_DONE);
        REQUIRE(d != NULL);
        CHECK_EQ_U64(d->u.collective_done.status, CCOIP_RESULT_OK);
    }
    CHECK_EQ_U64(got(2, CCOIP_PKT_M2C_COLLECTIVE_DONE), 0);
}

static void complete(int i, uint64_t tag) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_COLLECTIVE_COMPLETE;
    p.u.collective_complete = (ccoip_collective_complete_t){tag, 1};
    feed(i, &p);
}

static uint32_t commence_running(int i) {
    const ccoip_packet_t *p = last_of(i, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE);
    REQUIRE(p != NULL);
    return p->u.collective_commence.running;
}

/* COMMENCE counts the group's collectives that run (commenced, not done), itself included: the
 * same figure for every member, which decides the streams an op takes (ccoip_stripe.h). */
static void test_running_count(void) {
    reset(2);
    init(0, 1);
    init(1, 1);
    for (int i = 0; i < 2; i++) CHECK_EQ_U64(commence_running(i), 1); /* alone */
    init(0, 2);
    init(1, 2);
    for (int i = 0; i < 2; i++) CHECK_EQ_U64(commence_running(i), 2);
    complete(0, 1); /* one member done with 1: it still runs for the group */
    init(0, 3);
    init(1, 3);
    for (int i = 0; i < 2; i++) CHECK_EQ_U64(commence_running(i), 3);
    complete(1, 1);
    CHECK_EQ_U64(got(0, CCOIP_PKT_M2C_COLLECTIVE_DONE), 1);
    complete(0, 2), complete(1, 2), complete(0, 3), complete(1, 3);
    init(1, 4);
    init(0, 4);
    for (int i = 0; i < 2; i++) CHECK_EQ_U64(commence_running(i), 1); /* all done: alone again */
    ccoip_mstate_drop(&st, &clients[1], "killed"); /* refused: no count */
    init(0, 5);
    CHECK_EQ_U64(commence_status(0), CCOIP_RESULT_FAILED);
    CHECK_EQ_U64(commence_running(0), 0);
}

/* PCCL's rule (issue 28): a failed all-reduce votes RELINK. The vote breaks its group (what runs is
 * aborted, what waits refused); the round of that group alone starts when every member voted
 * relink or update, admits nobody, and the update voters' calls end with it. */
static void test_relink(void) {
    reset(5);
    clients[3].peer_group = 1; /* another group: not waited for, not relinked */
    clients[4].phase = CCOIP_MPHASE_REGISTERED; /* a newcomer waiting for admission */
    init(0, 1);
    init(1, 1);
    init(2, 1);
    CHECK_EQ_U64(commence_status(0), CCOIP_RESULT_OK);
    vote(0, CCOIP_PKT_C2M_VOTE_RELINK);
    for (int i = 0; i < 3; i++) CHECK_EQ_U64(got(i, CCOIP_PKT_M2C_COLLECTIVE_ABORT), 1);
    CHECK(clients[1].ring_stale && clients[2].ring_stale && !clients[3].ring_stale);
    init(1, 2); /* refused at once: the ring goes away */
    CHECK_EQ_U64(commence_status(1), CCOIP_RESULT_FAILED);
    vote(1, CCOIP_PKT_C2M_VOTE_RELINK);
    CHECK_EQ_U64(got(0, CCOIP_PKT_M2C_P2P_INFO), 0);
    vote(2, CCOIP_PKT_C2M_VOTE_ACCEPT); /* between steps: the relink takes it */
    for (int i = 0; i < 3; i++) CHECK_EQ_U64(got(i, CCOIP_PKT_M2C_P2P_INFO), 1);
    CHECK_EQ_U64(got(3, CCOIP_PKT_M2C_P2P_INFO), 0);
    CHECK_EQ_U64(got(4, CCOIP_PKT_M2C_P2P_INFO), 0);
    finish_round(3);
    for (int i = 0; i < 3; i++) {
        const ccoip_packet_t *t = last_of(i, CCOIP_PKT_M2C_TOPOLOGY_RESULT);
        REQUIRE(t != NULL);
        CHECK_EQ_U64(t->u.topology_result.status, CCOIP_RESULT_OK);
        CHECK_EQ_U64(t->u.topology_result.world.group_world_size, 3);
        CHECK(!clients[i].ring_stale);
    }
    CHECK_EQ_U64(clients[4].phase, CCOIP_MPHASE_REGISTERED); /* still waiting */
}

/* pcclArePeersPending beside the peer's own relink (another thread) and collectives: a flag of its
 * own. A member that asks while its group waits for it in a relink hears "pending" at once. */
static void test_pending_beside_relink(void) {
    reset(3);
    vote(0, CCOIP_PKT_C2M_VOTE_PENDING);
    init(0, 1); /* an all-reduce of the same peer meanwhile: fine */
    vote(0, CCOIP_PKT_C2M_VOTE_RELINK);
    vote(1, CCOIP_PKT_C2M_VOTE_RELINK);
    CHECK_EQ_U64(got(0, CCOIP_PKT_M2C_PENDING_RESULT), 0);
    vote(2, CCOIP_PKT_C2M_VOTE_PENDING); /* its group waits for it: told to vote */
    const ccoip_packet_t *p = last_of(2, CCOIP_PKT_M2C_PENDING_RESULT);
    REQUIRE(p != NULL);
    CHECK_EQ_U64(p->u.pending_result.pending, 1);
    CHECK_EQ_U64(got(0, CCOIP_PKT_M2C_PENDING_RESULT), 0); /* peer 0's question is still open */
    vote(2, CCOIP_PKT_C2M_VOTE_ACCEPT);
    CHECK_EQ_U64(got(0, CCOIP_PKT_M2C_P2P_INFO), 1);
    finish_round(3);
    vote(1, CCOIP_PKT_C2M_VOTE_PENDING);
    vote(2, CCOIP_PKT_C2M_VOTE_PENDING);
    for (int i = 0; i < 3; i++) {
        p = last_of(i, CCOIP_PKT_M2C_PENDING_RESULT);
        REQUIRE(p != NULL);
        CHECK_EQ_U64(p->u.pending_result.status, CCOIP_RESULT_OK);
        CHECK_EQ_U64(p->u.pending_result.pending, 0);
    }
}

/* issue 29, 3: after a restart the first round waits (up to rejoin_grace_ms from the first REJOIN)
 * for the ring successors the rejoined members reported. */
static void test_round_waits_for_reported_successors(void) {
    reset(3);
    memset(clients[0].next.b, 2, 16); /* peer0 -> peer1 (back) */
    memset(clients[1].next.b, 9, 16); /* peer1 -> a member not back yet */
    st.first_rejoin_ms = 1;
    for (int i = 0; i < 3; i++) vote(i, CCOIP_PKT_C2M_VOTE_ACCEPT);
    CHECK_EQ_U64(got(0, CCOIP_PKT_M2C_P2P_INFO), 0);
    ccoip_mstate_tick(&st, 1 + st.opt.rejoin_grace_ms - 1);
    CHECK_EQ_U64(got(0, CCOIP_PKT_M2C_P2P_INFO), 0);
    ccoip_mstate_tick(&st, 1 + st.opt.rejoin_grace_ms); /* it never came: go on without it */
    for (int i = 0; i < 3; i++) CHECK_EQ_U64(got(i, CCOIP_PKT_M2C_P2P_INFO), 1);
    /* ... and when it does come in time, at once. */
    reset(3);
    memset(clients[1].next.b, 9, 16);
    st.first_rejoin_ms = 1;
    for (int i = 0; i < 3; i++) vote(i, CCOIP_PKT_C2M_VOTE_ACCEPT);
    CHECK_EQ_U64(got(0, CCOIP_PKT_M2C_P2P_INFO), 0);
    REQUIRE(ccoip_mstate_add(&st, &clients[3], 1));
    clients[3].phase = CCOIP_MPHASE_ACCEPTED; /* as on_rejoin makes it */
    memset(clients[3].uuid.b, 9, 16);
    snprintf(clients[3].name, sizeof clients[3].name, "peer3");
    vote(3, CCOIP_PKT_C2M_VOTE_ACCEPT);
    for (int i = 0; i < 4; i++) CHECK_EQ_U64(got(i, CCOIP_PKT_M2C_P2P_INFO), 1);
}

/* issue 30, 1: a round that failed leaves its participants without links: their collectives are
 * refused at once, not left to hang until the collective timeout. */
static void test_failed_round_is_stale(void) {
    reset(3);
    for (int i = 0; i < 3; i++) vote(i, CCOIP_PKT_C2M_VOTE_ACCEPT);
    for (int i = 0; i < 3; i++) {
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_C2M_P2P_ESTABLISHED;
        p.u.p2p_established = (ccoip_p2p_established_t){.round = st.round, .ok = i != 1};
        feed(i, &p);
    }
    const ccoip_packet_t *t = last_of(0, CCOIP_PKT_M2C_TOPOLOGY_RESULT);
    REQUIRE(t != NULL);
    CHECK_EQ_U64(t->u.topology_result.status, CCOIP_RESULT_FAILED);
    for (int i = 0; i < 3; i++) {
        init(i, 4);
        CHECK_EQ_U64(commence_status(i), CCOIP_RESULT_FAILED);
    }
}

/* issue 29, 2: a member that came in while the round ran keeps its group stale for everyone, so
 * that all members' next collectives are refused alike (never its alone). */
static void test_member_arrives_mid_round(void) {
    reset(3);
    for (int i = 0; i < 3; i++) vote(i, CCOIP_PKT_C2M_VOTE_ACCEPT);
    REQUIRE(ccoip_mstate_add(&st, &clients[3], 1));
    clients[3].phase = CCOIP_MPHASE_ACCEPTED;
    memset(clients[3].uuid.b, 4, 16);
    snprintf(clients[3].name, sizeof clients[3].name, "peer3");
    finish_round(3);
    for (int i = 0; i < 4; i++) CHECK(clients[i].ring_stale);
    for (int i = 0; i < 4; i++) {
        init(i, 9);
        CHECK_EQ_U64(commence_status(i), CCOIP_RESULT_FAILED);
    }
}

/* ---- Admission (issue 30, 1): a newcomer that cannot be linked never stops the members. ---- */

/* Client i joins as a newcomer (registered, waiting for admission). */
static void add_newcomer(int i) {
    REQUIRE(ccoip_mstate_add(&st, &clients[i], 1));
    clients[i].phase = CCOIP_MPHASE_REGISTERED;
    clients[i].p2p_port = clients[i].dial_p2p = (uint16_t) (40000 + i);
    clients[i].reachable = true;
    memset(clients[i].uuid.b, i + 1, 16);
    snprintf(clients[i].name, sizeof clients[i].name, "newcomer%d", i);
}

static void report(int i, bool ok, int failed_with, uint8_t why) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_P2P_ESTABLISHED;
    p.u.p2p_established.round = st.round;
    p.u.p2p_established.ok = ok;
    if (failed_with >= 0) p.u.p2p_established.failed = clients[failed_with].uuid;
    p.u.p2p_established.why = why;
    feed(i, &p);
}

/* Whether client i's last P2P_INFO names client k (as a neighbour or as a peer at its host). */
static bool told_of(int i, int k) {
    const ccoip_packet_t *p = last_of(i, CCOIP_PKT_M2C_P2P_INFO);
    REQUIRE(p != NULL);
    for (uint32_t e = 0; e < p->u.p2p_info.count; e++)
        if (memcmp(&p->u.p2p_info.peers[e].uuid, &clients[k].uuid, 16) == 0) return true;
    return false;
}

static uint8_t round_status(int i) {
    const ccoip_packet_t *t = last_of(i, CCOIP_PKT_M2C_TOPOLOGY_RESULT);
    REQUIRE(t != NULL);
    return t->u.topology_result.status;
}

/* Three members and an unreachable newcomer (ring 0 -> 1 -> 2 -> 3 -> 0): member 2's dial is
 * refused. The newcomer hears FAILED with why and where it was dialled, the members RETRY and a
 * round without it at once, which succeeds: their pcclUpdateTopology returns success. After
 * admit_tries such admissions the newcomer hears UNREACHABLE and is no longer pending. */
static void test_unreachable_newcomer(void) {
    reset(3);
    add_newcomer(3);
    for (uint32_t attempt = 1; attempt <= st.opt.admit_tries; attempt++) {
        for (int i = 0; i < 3; i++) vote(i, CCOIP_PKT_C2M_VOTE_ACCEPT);
        uint64_t round = st.round;
        CHECK(told_of(2, 3) && told_of(0, 3));
        CHECK_EQ_U64(got(3, CCOIP_PKT_M2C_P2P_INFO), attempt);
        report(0, true, -1, 0);
        report(2, false, 3, CCOIP_LINK_REFUSED);
        bool last = attempt == st.opt.admit_tries;
        CHECK_EQ_U64(round_status(3), last ? CCOIP_RESULT_UNREACHABLE : CCOIP_RESULT_FAILED);
        CHECK_EQ_U64(last_of(3, CCOIP_PKT_M2C_TOPOLOGY_RESULT)->u.topology_result.why, CCOIP_LINK_REFUSED);
        CHECK_EQ_U64(last_of(3, CCOIP_PKT_M2C_TOPOLOGY_RESULT)->u.topology_result.seen_port, 40003);
        for (int i = 0; i < 3; i++) CHECK_EQ_U64(round_status(i), CCOIP_RESULT_RETRY);
        CHECK_EQ_U64(st.round, round + 1); /* the next round runs at once, without the newcomer */
        for (int i = 0; i < 3; i++) CHECK(!told_of(i, 3));
        CHECK_EQ_U64(got(3, CCOIP_PKT_M2C_P2P_INFO), attempt);
        finish_round(3);
        for (int i = 0; i < 3; i++) {
            CHECK_EQ_U64(round_status(i), CCOIP_RESULT_OK);
            CHECK_EQ_U64(last_of(i, CCOIP_PKT_M2C_TOPOLOGY_RESULT)->u.topology_result.world.global_world_size, 3);
        }
        CHECK(!clients[3].admit.sits_out); /* the next admission tries it again, */
        for (int i = 0; i < 3; i++) vote(i, CCOIP_PKT_C2M_VOTE_PENDING);
        const ccoip_packet_t *pr = last_of(0, CCOIP_PKT_M2C_PENDING_RESULT);
        REQUIRE(pr != NULL);
        CHECK_EQ_U64(pr->u.pending_result.pending, !last); /* ... until it is refused */
    }
    CHECK_EQ_U64(clients[3].phase, CCOIP_MPHASE_REGISTERED);
    CHECK(clients[3].admit.unreachable);
}

/* The same when the newcomer reports first (its predecessor never dialled it), when it leaves
 * mid-round, and when it says nothing until the round's timeout; two adjacent newcomers: the one
 * that was dialled is blamed, the other is admitted in the round run again. A link between two
 * members fails the round for everyone, as before. */
static void test_newcomer_failures(void) {
    reset(2);
    add_newcomer(2);
    for (int i = 0; i < 2; i++) vote(i, CCOIP_PKT_C2M_VOTE_ACCEPT);
    report(2, false, 1, CCOIP_LINK_NOT_DIALLED);
    CHECK_EQ_U64(round_status(2), CCOIP_RESULT_FAILED);
    CHECK_EQ_U64(round_status(0), CCOIP_RESULT_RETRY);
    finish_round(2);
    CHECK_EQ_U64(round_status(0), CCOIP_RESULT_OK);

    for (int i = 0; i < 2; i++) vote(i, CCOIP_PKT_C2M_VOTE_ACCEPT); /* it leaves mid-round */
    CHECK(clients[2].in_round);
    uint64_t round = st.round;
    ccoip_mstate_drop(&st, &clients[2], "connection closed");
    CHECK_EQ_U64(round_status(1), CCOIP_RESULT_RETRY);
    CHECK_EQ_U64(st.round, round + 1);
    finish_round(2);
    CHECK_EQ_U64(round_status(1), CCOIP_RESULT_OK);

    add_newcomer(3); /* silent until the round times out (before anyone's heartbeat does) */
    st.opt.round_timeout_ms = st.opt.heartbeat_timeout_ms / 2;
    for (int i = 0; i < 2; i++) vote(i, CCOIP_PKT_C2M_VOTE_ACCEPT);
    finish_round(2);
    CHECK(st.round_active);
    ccoip_mstate_tick(&st, st.round_started_ms + st.opt.round_timeout_ms + 1);
    CHECK_EQ_U64(round_status(3), CCOIP_RESULT_FAILED);
    CHECK_EQ_U64(last_of(3, CCOIP_PKT_M2C_TOPOLOGY_RESULT)->u.topology_result.why, CCOIP_LINK_TIMEOUT);
    CHECK_EQ_U64(round_status(0), CCOIP_RESULT_RETRY);
    finish_round(2);
    CHECK_EQ_U64(round_status(0), CCOIP_RESULT_OK);

    reset(2); /* ring 0 -> 1 -> 2 -> 3 -> 0; newcomer 2 cannot reach newcomer 3 */
    add_newcomer(2);
    add_newcomer(3);
    for (int i = 0; i < 2; i++) vote(i, CCOIP_PKT_C2M_VOTE_ACCEPT);
    report(2, false, 3, CCOIP_LINK_TIMEOUT);
    CHECK_EQ_U64(round_status(3), CCOIP_RESULT_FAILED);
    CHECK_EQ_U64(round_status(2), CCOIP_RESULT_RETRY);
    CHECK(told_of(1, 2) && !told_of(1, 3));
    finish_round(3);
    CHECK_EQ_U64(round_status(2), CCOIP_RESULT_OK);
    CHECK_EQ_U64(clients[2].phase, CCOIP_MPHASE_ACCEPTED);
    CHECK_EQ_U64(clients[3].phase, CCOIP_MPHASE_REGISTERED);

    reset(3); /* between members: everyone fails, nobody retries */
    add_newcomer(3);
    for (int i = 0; i < 3; i++) vote(i, CCOIP_PKT_C2M_VOTE_ACCEPT);
    report(1, false, 0, CCOIP_LINK_NOT_DIALLED);
    for (int i = 0; i < 4; i++) CHECK_EQ_U64(round_status(i), CCOIP_RESULT_FAILED);
    CHECK(!st.round_active);
}

int main(void) {
    test_whole_group();
    test_running_count();
    test_relink();
    test_pending_beside_relink();
    test_round_waits_for_reported_successors();
    test_member_arrives_mid_round();
    test_failed_round_is_stale();
    test_member_arrives_mid_collective();
    test_broken_group_converges();
    test_pending_meets_update();
    test_loss_while_waiting();
    test_unreachable_newcomer();
    test_newcomer_failures();
    reset(0);
    return check_exit();
}
