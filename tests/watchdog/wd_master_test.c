/* The master's side of the collective timeout (ccoip_mcoll_on_abort) without sockets: clients are
 * set up as accepted peers of one group, packets are fed in, and the answers are captured. */
#include <stdio.h>
#include <string.h>

#include "ccoip/master/ccoip_master_state.h"
#include "tests/common/check.h"

#define MAXC 4
#define MAXP 64

static ccoip_master_state_t st;
static ccoip_mclient_t clients[MAXC];
static ccoip_packet_t sent[MAXC][MAXP];
static int nsent[MAXC];
static bool closed[MAXC];

static void fake_send(void *ctx, ccoip_mclient_t *c, const ccoip_packet_t *p) {
    (void) ctx;
    int i = (int) (c - clients);
    REQUIRE(nsent[i] < MAXP && p->type != CCOIP_PKT_M2C_P2P_INFO); /* no pointers to copy */
    sent[i][nsent[i]++] = *p;
}

static void fake_close(void *ctx, ccoip_mclient_t *c) {
    (void) ctx;
    closed[c - clients] = true;
}

static void reset(int n) {
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
        snprintf(clients[i].name, sizeof clients[i].name, "peer%d", i);
    }
}

static void feed(int i, uint16_t type, uint64_t tag, uint8_t ok) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = type;
    if (type == CCOIP_PKT_C2M_COLLECTIVE_INIT) p.u.collective_init = (ccoip_collective_init_t){tag, 1000, 10, 0, 0, 0};
    else if (type == CCOIP_PKT_C2M_COLLECTIVE_COMPLETE) p.u.collective_complete = (ccoip_collective_complete_t){tag, ok};
    else if (type == CCOIP_PKT_C2M_COLLECTIVE_ABORT) p.u.collective_abort.tag = tag;
    ccoip_mstate_on_packet(&st, &clients[i], &p, 1);
}

/* How many packets of `type` (and `status`, where it has one; 255: any) client i got. */
static int got(int i, uint16_t type, uint8_t status) {
    int n = 0;
    for (int k = 0; k < nsent[i]; k++) {
        const ccoip_packet_t *p = &sent[i][k];
        if (p->type != type) continue;
        uint8_t s = type == CCOIP_PKT_M2C_COLLECTIVE_COMMENCE ? p->u.collective_commence.status
                    : type == CCOIP_PKT_M2C_COLLECTIVE_DONE   ? p->u.collective_done.status
                    : type == CCOIP_PKT_M2C_PENDING_RESULT    ? p->u.pending_result.status
                    : type == CCOIP_PKT_M2C_TOPOLOGY_RESULT   ? p->u.topology_result.status
                                                              : 255;
        n += status == 255 || s == status;
    }
    return n;
}

/* Waiting for COMMENCE: the ones that asked get COMMENCE(timeout); the one in a vote has it
 * refused; the next collective with that tag runs normally; a repeated ABORT changes nothing. */
static void test_waiting(void) {
    reset(3);
    feed(0, CCOIP_PKT_C2M_COLLECTIVE_INIT, 5, 0);
    feed(1, CCOIP_PKT_C2M_COLLECTIVE_INIT, 5, 0);
    feed(2, CCOIP_PKT_C2M_VOTE_PENDING, 0, 0);
    CHECK(got(0, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, 255) == 0);
    feed(1, CCOIP_PKT_C2M_COLLECTIVE_ABORT, 5, 0);
    CHECK(got(0, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, CCOIP_RESULT_TIMEOUT) == 1);
    CHECK(got(1, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, CCOIP_RESULT_TIMEOUT) == 1);
    CHECK(got(2, CCOIP_PKT_M2C_PENDING_RESULT, CCOIP_RESULT_MISMATCH) == 1);
    CHECK(got(2, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, 255) == 0);
    CHECK(clients[2].state == CCOIP_MSTATE_IDLE && !clients[0].ring_stale);
    feed(0, CCOIP_PKT_C2M_COLLECTIVE_ABORT, 5, 0); /* late: its collective is over */
    CHECK(got(0, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, 255) == 1 && !closed[0]);
    for (int i = 0; i < 3; i++) feed(i, CCOIP_PKT_C2M_COLLECTIVE_INIT, 5, 0);
    for (int i = 0; i < 3; i++) CHECK(got(i, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, CCOIP_RESULT_OK) == 1);
    for (int i = 0; i < 3; i++) feed(i, CCOIP_PKT_C2M_COLLECTIVE_COMPLETE, 5, 1);
    for (int i = 0; i < 3; i++) CHECK(got(i, CCOIP_PKT_M2C_COLLECTIVE_DONE, CCOIP_RESULT_OK) == 1);
    /* A peer that is not in the collective at all cannot abort it. */
    feed(0, CCOIP_PKT_C2M_COLLECTIVE_INIT, 6, 0);
    feed(2, CCOIP_PKT_C2M_COLLECTIVE_ABORT, 6, 0);
    CHECK(got(0, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, CCOIP_RESULT_TIMEOUT) == 1 && !closed[2]);
    for (int i = 0; i < 3; i++) CHECK(!closed[i]);
}

/* Mid-ring: running members get ABORT and DONE(timeout) at once, a completed one DONE(timeout);
 * the COMPLETEs still owed are swallowed (not a protocol violation); the group is stale until a
 * topology round, so the next collective is refused; the other members' ABORTs are ignored. */
static void test_running(void) {
    reset(3);
    for (int i = 0; i < 3; i++) feed(i, CCOIP_PKT_C2M_COLLECTIVE_INIT, 9, 0);
    for (int i = 0; i < 3; i++) CHECK(got(i, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, CCOIP_RESULT_OK) == 1);
    feed(0, CCOIP_PKT_C2M_COLLECTIVE_COMPLETE, 9, 1);
    feed(1, CCOIP_PKT_C2M_COLLECTIVE_ABORT, 9, 0); /* peer 2 stalled */
    feed(0, CCOIP_PKT_C2M_COLLECTIVE_ABORT, 9, 0); /* ignored: already over for it */
    CHECK(got(0, CCOIP_PKT_M2C_COLLECTIVE_ABORT, 255) == 0);
    CHECK(got(0, CCOIP_PKT_M2C_COLLECTIVE_DONE, CCOIP_RESULT_TIMEOUT) == 1);
    for (int i = 1; i < 3; i++) {
        CHECK(got(i, CCOIP_PKT_M2C_COLLECTIVE_ABORT, 255) == 1);
        CHECK(got(i, CCOIP_PKT_M2C_COLLECTIVE_DONE, CCOIP_RESULT_TIMEOUT) == 1);
    }
    feed(1, CCOIP_PKT_C2M_COLLECTIVE_ABORT, 9, 0); /* ignored: already aborted */
    CHECK(got(1, CCOIP_PKT_M2C_COLLECTIVE_DONE, 255) == 1);
    feed(1, CCOIP_PKT_C2M_COLLECTIVE_COMPLETE, 9, 0);
    feed(2, CCOIP_PKT_C2M_COLLECTIVE_COMPLETE, 9, 1); /* the stalled one, resumed */
    for (int i = 0; i < 3; i++) CHECK(!closed[i] && got(i, CCOIP_PKT_M2C_COLLECTIVE_DONE, 255) == 1);
    for (int i = 0; i < 3; i++) CHECK(clients[i].ring_stale);
    for (int i = 0; i < 3; i++) feed(i, CCOIP_PKT_C2M_COLLECTIVE_INIT, 9, 0);
    for (int i = 0; i < 3; i++) CHECK(got(i, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, CCOIP_RESULT_FAILED) == 1);
    /* A COMPLETE after the swallowed one is a violation again. */
    feed(1, CCOIP_PKT_C2M_COLLECTIVE_COMPLETE, 9, 0);
    CHECK(closed[1]);
}

/* The stalled member is dropped (heartbeats) before it sends its COMPLETE: nothing is owed. */
static void test_stalled_dropped(void) {
    reset(3);
    for (int i = 0; i < 3; i++) feed(i, CCOIP_PKT_C2M_COLLECTIVE_INIT, 4, 0);
    feed(0, CCOIP_PKT_C2M_COLLECTIVE_ABORT, 4, 0);
    feed(0, CCOIP_PKT_C2M_COLLECTIVE_COMPLETE, 4, 0);
    feed(1, CCOIP_PKT_C2M_COLLECTIVE_COMPLETE, 4, 0);
    ccoip_mstate_drop(&st, &clients[2], "missed heartbeats");
    for (int i = 0; i < 2; i++) {
        CHECK(!closed[i]);
        CHECK(got(i, CCOIP_PKT_M2C_COLLECTIVE_DONE, CCOIP_RESULT_TIMEOUT) == 1);
        CHECK(got(i, CCOIP_PKT_M2C_COLLECTIVE_ABORT, 255) == 1); /* the drop sends no second one */
    }
}

int main(void) {
    test_waiting();
    test_running();
    test_stalled_dropped();
    reset(0);
    ccoip_mstate_free(&st);
    return check_exit();
}
