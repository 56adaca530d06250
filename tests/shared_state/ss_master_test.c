/* The master's shared-state decisions (ccoip_master_shared.c) without sockets: clients are set
 * up as accepted peers, SYNC/DONE packets are fed in, and the answers are captured. */
#include <stdlib.h>
#include <string.h>

#include "ccoip/master/ccoip_master_state.h"
#include "tests/common/check.h"

#define MAXC 8
#define MAXP 64

static ccoip_master_state_t st;
static ccoip_mclient_t clients[MAXC];
static ccoip_packet_t sent[MAXC][MAXP]; /* decoded copies of what each client was sent */
static int nsent[MAXC];
static bool closed[MAXC];

static int index_of(const ccoip_mclient_t *c) { return (int) (c - clients); }

static void fake_send(void *ctx, ccoip_mclient_t *c, const ccoip_packet_t *p) {
    (void) ctx;
    ccoip_writer_t w;
    ccoip_writer_init(&w, CCOIP_MAX_PAYLOAD + CCOIP_HEADER_SIZE);
    REQUIRE(ccoip_packet_encode(p, &w) == CCOIP_OK);
    int i = index_of(c);
    REQUIRE(nsent[i] < MAXP);
    REQUIRE(ccoip_packet_decode(p->type, w.buf + CCOIP_HEADER_SIZE, w.len - CCOIP_HEADER_SIZE, &sent[i][nsent[i]++]) == CCOIP_OK);
    ccoip_writer_free(&w);
}

static void fake_close(void *ctx, ccoip_mclient_t *c) {
    (void) ctx;
    closed[index_of(c)] = true;
}

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
    memset(closed, 0, sizeof closed);
    ccoip_mstate_init(&st, NULL);
    st.send = fake_send;
    st.close = fake_close;
    for (int i = 0; i < n; i++) {
        REQUIRE(ccoip_mstate_add(&st, &clients[i], 0));
        clients[i].phase = CCOIP_MPHASE_ACCEPTED;
        memset(clients[i].uuid.b, i + 1, 16);
        clients[i].ss_port = clients[i].dial_ss = (uint16_t) (50000 + i);
        clients[i].reachable = true;
        snprintf(clients[i].name, sizeof clients[i].name, "peer%d", i);
    }
}

/* The last packet client i got (world updates after a drop and the BYE of a kick aside), if of
 * `type`. */
static const ccoip_packet_t *last(int i, uint16_t type) {
    int k = nsent[i] - 1;
    while (k >= 0 && (sent[i][k].type == CCOIP_PKT_M2C_WORLD_UPDATE || sent[i][k].type == CCOIP_PKT_M2C_BYE)) k--;
    return k < 0 || sent[i][k].type != type ? NULL : &sent[i][k];
}

static const ccoip_ss_result_t *result(int i) {
    const ccoip_packet_t *p = last(i, CCOIP_PKT_M2C_SHARED_STATE_RESULT);
    REQUIRE(p != NULL);
    return &p->u.ss_result;
}

/* Client i syncs n tensors "t0".. of 1000 floats with the given hashes. */
static void sync(int i, uint64_t rev, int strategy, int n, const uint64_t *hashes) {
    static char names[16][16];
    ccoip_ss_tensor_t t[16];
    for (int k = 0; k < n; k++) {
        snprintf(names[k], sizeof names[k], "t%d", k);
        t[k] = (ccoip_ss_tensor_t){names[k], hashes[k], CCOIP_HASH_XXH3, 10, 1000, 0};
    }
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_SHARED_STATE_SYNC;
    p.u.ss_sync = (ccoip_ss_sync_t){rev, (uint8_t) strategy, (uint32_t) n, t};
    ccoip_mstate_on_packet(&st, &clients[i], &p, 1);
}

static void done(int i, bool ok) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_SHARED_STATE_DONE;
    p.u.ss_done.ok = ok;
    ccoip_mstate_on_packet(&st, &clients[i], &p, 1);
}

static void all_done(int n) {
    for (int i = 0; i < n; i++) done(i, true);
    for (int i = 0; i < n; i++) CHECK(last(i, CCOIP_PKT_M2C_SHARED_STATE_DONE) != NULL);
}

static void test_popular_and_spread(void) {
    reset(3);
    uint64_t good[4] = {1, 2, 3, 4}, zero[4] = {9, 9, 9, 9}, one_off[4] = {1, 7, 3, 4};
    sync(0, 0, 0, 4, good);
    CHECK(nsent[0] == 0); /* waits for the whole group */
    sync(1, 0, 0, 4, good);
    sync(2, 0, 0, 4, zero);
    const ccoip_ss_result_t *r = result(2);
    CHECK_EQ_U64(r->status, CCOIP_SS_OK);
    CHECK_EQ_U64(r->nfetch, 4);
    /* Every tensor names both holders (protocol 11): the receiver spreads its ranges over them. */
    CHECK_EQ_U64(r->nsources, 2);
    CHECK(r->sources[0].uuid.b[0] != r->sources[1].uuid.b[0]);
    for (uint32_t k = 0; k < r->nsources; k++) {
        CHECK(r->sources[k].uuid.b[0] == 1 || r->sources[k].uuid.b[0] == 2);
        CHECK_EQ_U64(r->sources[k].ss_port, 50000u + r->sources[k].uuid.b[0] - 1);
    }
    for (uint32_t k = 0; k < r->nfetch; k++) {
        CHECK_EQ_U64(r->fetch[k].hash, good[k]);
        CHECK_EQ_U64(r->fetch[k].nsrc, 2);
        CHECK(r->fetch[k].src[0].index != r->fetch[k].src[1].index);
    }
    CHECK_EQ_U64(result(0)->nfetch + result(1)->nfetch, 0);
    CHECK_EQ_U64(result(0)->nserve, 1);
    CHECK_EQ_U64(result(1)->nserve, 1);
    CHECK(result(0)->serve[0].uuid.b[0] == 3);
    done(0, true);
    done(1, true);
    CHECK(last(0, CCOIP_PKT_M2C_SHARED_STATE_DONE) == NULL); /* holders serve until all are through */
    done(2, true);
    CHECK(last(0, CCOIP_PKT_M2C_SHARED_STATE_DONE) != NULL);
    /* Next revision: one tensor differs on one peer; only it moves. */
    sync(0, 1, 0, 4, good);
    sync(1, 1, 0, 4, one_off);
    sync(2, 1, 0, 4, good);
    CHECK_EQ_U64(result(1)->nfetch, 1);
    CHECK(strcmp(result(1)->fetch[0].name, "t1") == 0);
    CHECK_EQ_U64(result(1)->revision, 1);
    all_done(3);
}

/* PCCL's rule (the default): the sync's revision is the group's last + 1; a peer below it is
 * dragged along (receives what differs, ends at it); above it is refused. */
static void test_revisions(void) {
    reset(3);
    uint64_t h[1] = {5};
    for (int i = 0; i < 3; i++) sync(i, 10, 0, 1, h); /* any start */
    for (int i = 0; i < 3; i++) CHECK_EQ_U64(result(i)->revision, 10);
    all_done(3);
    sync(0, 11, 0, 1, h);
    sync(1, 10, 0, 1, h); /* not advanced: behind, same content: dragged along, nothing moves */
    sync(2, 13, 0, 1, h); /* too far */
    CHECK_EQ_U64(result(0)->status, CCOIP_SS_OK);
    CHECK_EQ_U64(result(1)->status, CCOIP_SS_OK);
    CHECK_EQ_U64(result(1)->revision, 11);
    CHECK_EQ_U64(result(1)->nfetch, 0);
    CHECK_EQ_U64(result(2)->status, CCOIP_SS_REVISION);
    CHECK_EQ_U64(result(2)->expected, 11);
    all_done(3);
    /* Peer 1 (at 11 now) and peer 2 (last good 10) give 0 and 11 with other content while peer 0
     * gives 12: both are behind and receive; two behind peers agree, but only current peers vote. */
    uint64_t other[1] = {6};
    sync(0, 12, 0, 1, h);
    sync(1, 0, 0, 1, other);
    sync(2, 11, 0, 1, other);
    CHECK_EQ_U64(result(1)->status, CCOIP_SS_OK);
    CHECK_EQ_U64(result(1)->revision, 12);
    CHECK_EQ_U64(result(1)->nfetch, 1);
    CHECK_EQ_U64(result(1)->fetch[0].hash, 5);
    CHECK_EQ_U64(result(2)->status, CCOIP_SS_OK);
    CHECK_EQ_U64(result(2)->nfetch, 1);
    all_done(3);
}

/* PCCL_STRICT=revision: ours, a peer that synced before gives its last + 1. */
static void test_revisions_strict(void) {
    reset(3);
    st.opt.strict_revisions = true;
    uint64_t h[1] = {5};
    for (int i = 0; i < 3; i++) sync(i, 10, 0, 1, h);
    all_done(3);
    sync(0, 11, 0, 1, h);
    sync(1, 10, 0, 1, h); /* not advanced */
    sync(2, 13, 0, 1, h); /* too far */
    CHECK_EQ_U64(result(0)->status, CCOIP_SS_OK);
    CHECK_EQ_U64(result(1)->status, CCOIP_SS_REVISION);
    CHECK_EQ_U64(result(1)->expected, 11);
    CHECK_EQ_U64(result(2)->status, CCOIP_SS_REVISION);
    CHECK_EQ_U64(result(2)->expected, 11);
    all_done(3);
    /* Peers 1 and 2 (last good 10) give 11 while peer 0 gives 12: behind, they receive. */
    uint64_t other[1] = {6};
    sync(0, 12, 0, 1, h);
    sync(1, 11, 0, 1, other);
    sync(2, 11, 0, 1, other);
    CHECK_EQ_U64(result(1)->status, CCOIP_SS_OK);
    CHECK_EQ_U64(result(1)->revision, 12);
    CHECK_EQ_U64(result(1)->fetch[0].hash, 5);
    all_done(3);
}

static void test_strategies(void) {
    reset(3);
    uint64_t a[2] = {1, 2}, b[2] = {1, 3};
    sync(0, 0, 1, 2, a);
    sync(1, 0, 2, 2, b);
    sync(2, 0, 2, 2, b);
    CHECK_EQ_U64(result(0)->nfetch, 1);  /* receive-only: its own t1 counts for nothing */
    CHECK_EQ_U64(result(0)->nserve, 0);
    all_done(3);
    /* Everyone receive-only: no content. */
    for (int i = 0; i < 3; i++) sync(i, 1, 1, 2, b);
    for (int i = 0; i < 3; i++) CHECK_EQ_U64(result(i)->status, CCOIP_SS_NO_CONTENT);
    all_done(3);
    /* SEND_ONLY without the popular content: kicked (connection closed); with it: fine. */
    sync(0, 1, 2, 2, a);
    sync(1, 1, 2, 2, b);
    sync(2, 1, 2, 2, b);
    CHECK_EQ_U64(result(0)->status, CCOIP_SS_KICKED);
    CHECK(strcmp(result(0)->detail, "t1") == 0);
    CHECK(closed[0]);
    CHECK_EQ_U64(sent[0][nsent[0] - 1].type, CCOIP_PKT_M2C_BYE); /* kicked on purpose: do not come back */
    CHECK_EQ_U64(result(1)->status, CCOIP_SS_OK);
    CHECK_EQ_U64(result(1)->nfetch, 0);
    done(1, true);
    done(2, true);
    CHECK(last(1, CCOIP_PKT_M2C_SHARED_STATE_DONE) != NULL);
}

/* PCCL's rule: beside ENFORCE_POPULAR (0), SEND_ONLY (2) and RECEIVE_ONLY (1) peers are kicked,
 * whatever their content; the popular ones go on. */
static void test_mixed_strategies(void) {
    reset(4);
    uint64_t a[1] = {1};
    sync(0, 0, 0, 1, a);
    sync(1, 0, 0, 1, a);
    sync(2, 0, 2, 1, a); /* same content: still kicked */
    sync(3, 0, 1, 1, a);
    CHECK_EQ_U64(result(0)->status, CCOIP_SS_OK);
    CHECK_EQ_U64(result(1)->status, CCOIP_SS_OK);
    CHECK_EQ_U64(result(2)->status, CCOIP_SS_MIXED);
    CHECK_EQ_U64(result(3)->status, CCOIP_SS_MIXED);
    CHECK(closed[2] && closed[3] && !closed[0] && !closed[1]);
    done(0, true);
    done(1, true);
    CHECK(last(0, CCOIP_PKT_M2C_SHARED_STATE_DONE) != NULL);
    /* Without ENFORCE_POPULAR, SEND_ONLY and RECEIVE_ONLY mix. */
    reset(2);
    sync(0, 0, 2, 1, a);
    sync(1, 0, 1, 1, a);
    CHECK_EQ_U64(result(0)->status, CCOIP_SS_OK);
    CHECK_EQ_U64(result(1)->status, CCOIP_SS_OK);
    all_done(2);
}

static void test_mismatch_duplicate_leave(void) {
    reset(3);
    uint64_t h[3] = {1, 2, 3};
    sync(0, 0, 0, 3, h);
    sync(1, 0, 0, 3, h);
    sync(2, 0, 0, 2, h); /* t2 missing */
    CHECK_EQ_U64(result(2)->status, CCOIP_SS_MISMATCH);
    CHECK(strcmp(result(2)->detail, "t2") == 0);
    all_done(3);
    /* A member that leaves while the others wait lets the sync go on without it. */
    sync(0, 1, 0, 3, h);
    sync(1, 1, 0, 3, h);
    ccoip_mstate_drop(&st, &clients[2], "test: gone");
    CHECK_EQ_U64(result(0)->status, CCOIP_SS_OK);
    /* ... and one that leaves mid-transfer releases the DONE of the rest. */
    done(0, true);
    CHECK(last(0, CCOIP_PKT_M2C_SHARED_STATE_DONE) == NULL);
    ccoip_mstate_drop(&st, &clients[1], "test: gone");
    CHECK(last(0, CCOIP_PKT_M2C_SHARED_STATE_DONE) != NULL);
    /* DONE without a sync is a protocol violation. */
    done(0, true);
    CHECK(closed[0]);
}

static void ss_abort(int i) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_SHARED_STATE_ABORT;
    ccoip_mstate_on_packet(&st, &clients[i], &p, 1);
}

/* A member's watchdog: every waiting member gets TIMEOUT, nobody is closed, revisions stay; an
 * abort that crossed the RESULT, or comes from a peer not in a sync, changes nothing. */
static void test_abort(void) {
    reset(3);
    uint64_t h[1] = {5};
    sync(0, 1, 0, 1, h);
    sync(1, 1, 0, 1, h);
    ss_abort(1);
    for (int i = 0; i < 2; i++) CHECK_EQ_U64(result(i)->status, CCOIP_SS_TIMEOUT);
    CHECK_EQ_U64(nsent[2], 0);
    CHECK(!closed[0] && !closed[1] && !closed[2]);
    ss_abort(0); /* a second abort, no sync running: ignored */
    CHECK_EQ_U64(nsent[0], 1);
    /* The next sync starts afresh; revision 1 is still the one due. */
    for (int i = 0; i < 3; i++) sync(i, 1, 0, 1, h);
    for (int i = 0; i < 3; i++) CHECK_EQ_U64(result(i)->status, CCOIP_SS_OK);
    ss_abort(2); /* crossed the RESULT: ignored */
    CHECK_EQ_U64(nsent[2], 1);
    all_done(3);
    for (int i = 0; i < 3; i++) sync(i, 2, 0, 1, h);
    for (int i = 0; i < 3; i++) CHECK_EQ_U64(result(i)->status, CCOIP_SS_OK);
    all_done(3);
    CHECK(!closed[0] && !closed[1] && !closed[2]);
}

/* A member that comes into the group between the election and the reports (a REJOIN after a
 * master restart) takes no part in that sync: the others finish without it, it hears nothing of
 * it, and the next sync waits for it too. (Waiting for it once stalled a run: restart_test.) */
static void test_member_arrives_mid_sync(void) {
    reset(3);
    clients[2].phase = CCOIP_MPHASE_REGISTERED; /* not a member yet */
    uint64_t h[1] = {5};
    sync(0, 1, 0, 1, h);
    sync(1, 1, 0, 1, h);
    CHECK_EQ_U64(result(0)->status, CCOIP_SS_OK);
    clients[2].phase = CCOIP_MPHASE_ACCEPTED; /* comes in now */
    REQUIRE(ccoip_mss_restore(&st, &clients[2], 0));
    int before = nsent[2];
    done(0, true);
    done(1, true);
    CHECK(last(0, CCOIP_PKT_M2C_SHARED_STATE_DONE) != NULL);
    CHECK(last(1, CCOIP_PKT_M2C_SHARED_STATE_DONE) != NULL);
    CHECK_EQ_U64(nsent[2], before);
    sync(0, 2, 0, 1, h);
    sync(1, 2, 0, 1, h);
    CHECK(last(0, CCOIP_PKT_M2C_SHARED_STATE_DONE) != NULL); /* no RESULT yet: it waits for member 2 */
    sync(2, 1, 0, 1, h); /* behind: revision 0 + 1 */
    CHECK_EQ_U64(result(0)->status, CCOIP_SS_OK);
    CHECK_EQ_U64(result(2)->status, CCOIP_SS_OK);
    all_done(3);
}

int main(void) {
    test_member_arrives_mid_sync();
    test_popular_and_spread();
    test_abort();
    test_revisions();
    test_revisions_strict();
    test_strategies();
    test_mixed_strategies();
    test_mismatch_duplicate_leave();
    reset(0);
    ccoip_mstate_free(&st);
    return check_exit();
}
