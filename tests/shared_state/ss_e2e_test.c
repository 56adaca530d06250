/* pcclSynchronizeSharedState end to end: the real pccl-master and four ss_peer processes.
 * In order: a newcomer with zeroed tensors receives the whole state, bit for bit; one corrupted
 * tensor among ten is all that moves; revision violations; RECEIVE_ONLY never sends; SEND_ONLY
 * never receives, and is kicked without the popular content; allow_content_inequality tensors
 * never move; a mismatched tensor set is refused by name; no content when everyone only
 * receives. Usage: ss_e2e_test PCCL_MASTER SS_PEER */
#include "tests/shared_state/ss_util.h"

#define MIB 1048576ull
#define SMALL 262144ull /* bytes of each of the ten tensors */

static char line[256];

/* A sync where every peer bumps its revision and uses the given strategies. */
static void round_of(h_proc_t **p, int n, const int *strategy, ss_sync_t *out) {
    for (int i = 0; i < n; i++) ss_cmd(p[i], line, sizeof line, "bump");
    ss_sync_all(p, n, strategy, out);
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(120);
    h_proc_t m, peer[4];
    int port = h_start_master(&m, argv[1], NULL);
    REQUIRE(port > 0);
    ss_start_peers(peer, 3, argv[2], port);
    h_proc_t *p[4] = {&peer[0], &peer[1], &peer[2], &peer[3]};
    ss_sync_t r[4];

    /* 1. Three peers with the same 4 MiB: the first sync (revision 0) moves nothing. */
    for (int i = 0; i < 3; i++) REQUIRE(ss_cmd(p[i], line, sizeof line, "tensors 4 %llu 7", MIB) == 0);
    ss_sync_all(p, 3, NULL, r);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_U64(r[i].result, 0);
        CHECK_EQ_U64(r[i].revision, 0);
        CHECK_EQ_U64(r[i].tx + r[i].rx, 0);
    }
    /* A newcomer with zeros at revision 0 joins peers about to sync revision 1: it receives
     * everything, ends at revision 1, bit-identical. */
    REQUIRE(h_start_peer(&peer[3], argv[2], port, 0));
    ss_admit(&peer[0], 3, &peer[3], 1);
    REQUIRE(ss_cmd(p[3], line, sizeof line, "tensors 4 %llu 0", MIB) == 0);
    for (int i = 0; i < 3; i++) ss_cmd(p[i], line, sizeof line, "bump");
    ss_sync_all(p, 4, NULL, r);
    unsigned long long tx = 0;
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_U64(r[i].result, 0);
        CHECK_EQ_U64(r[i].revision, 1);
        tx += r[i].tx;
    }
    CHECK_EQ_U64(r[3].rx, 4 * MIB);
    CHECK_EQ_U64(r[3].tx, 0);
    CHECK_EQ_U64(tx, 4 * MIB);
    CHECK_EQ_U64(r[0].rx + r[1].rx + r[2].rx, 0);
    /* Which holder served which range is work stealing's choice (on loopback one may serve it
     * all); ss_multi_test checks the spread under a send cap. */
    CHECK_EQ_U64(ss_cmd(p[3], line, sizeof line, "check 7"), 0);
    CHECK(ss_same_hash(p, 4));
    fprintf(stderr, "ss_e2e_test: newcomer received 4 MiB in %llu ms\n", r[3].ms);

    /* 2. Ten tensors; one corrupted on one peer: exactly that tensor moves. */
    for (int i = 0; i < 4; i++) REQUIRE(ss_cmd(p[i], line, sizeof line, "tensors 10 %llu 3", SMALL) == 0);
    ss_cmd(p[2], line, sizeof line, "corrupt 5");
    round_of(p, 4, NULL, r);
    tx = 0;
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_U64(r[i].result, 0);
        CHECK_EQ_U64(r[i].rx, i == 2 ? SMALL : 0);
        tx += r[i].tx;
    }
    CHECK_EQ_U64(tx, SMALL);
    CHECK_EQ_U64(r[2].tx, 0);
    CHECK_EQ_U64(ss_cmd(p[2], line, sizeof line, "check 3"), 0);

    /* 3. Revisions (all at 2 now). Too far ahead: refused, naming the expected revision. */
    for (int i = 0; i < 4; i++) ss_cmd(p[i], line, sizeof line, i == 3 ? "rev 5" : "bump");
    ss_sync_all(p, 4, NULL, r);
    for (int i = 0; i < 3; i++) CHECK_EQ_U64(r[i].result, 0);
    CHECK_EQ_U64(r[3].result, pcclInvalidUsage);
    CHECK_EQ_U64(r[3].revision, 5); /* unchanged on failure */
    /* Not advanced (peer 0 gives 3 again): behind, dragged along to 4 (PCCL's rule; refused
     * under PCCL_STRICT=revision: ss_master_test). Peer 3, whose last sync failed, gives 3 too:
     * behind, it receives what differs, ends at 4. */
    ss_cmd(p[0], line, sizeof line, "rev 3");
    ss_cmd(p[1], line, sizeof line, "bump");
    ss_cmd(p[2], line, sizeof line, "bump");
    ss_cmd(p[3], line, sizeof line, "rev 3");
    ss_cmd(p[3], line, sizeof line, "corrupt 1"); /* ... and receives what differs */
    ss_sync_all(p, 4, NULL, r);
    CHECK_EQ_U64(r[0].result, 0);
    CHECK_EQ_U64(r[0].revision, 4);
    CHECK_EQ_U64(r[0].rx, 0);
    CHECK_EQ_U64(r[1].result, 0);
    CHECK_EQ_U64(r[2].result, 0);
    CHECK_EQ_U64(r[3].result, 0);
    CHECK_EQ_U64(r[3].revision, 4);
    CHECK_EQ_U64(r[3].rx, SMALL);
    /* Everyone at 4 now; peer 0 gives 4 again (behind) and is dragged to 5 with the others. */
    ss_cmd(p[0], line, sizeof line, "rev 4");
    for (int i = 1; i < 4; i++) ss_cmd(p[i], line, sizeof line, "bump");
    ss_sync_all(p, 4, NULL, r);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_U64(r[i].result, 0);
        CHECK_EQ_U64(r[i].revision, 5);
    }

    /* 4. RECEIVE_ONLY never sends: peer 0 only receives (its corrupted t6), even though it holds
     * the t5 that the others lack... beside SEND_ONLY peers: beside ENFORCE_POPULAR ones it would
     * be kicked (PCCL's rule, below). */
    const int SEND = PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY, RECV = PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY;
    int strat[4] = {RECV, SEND, SEND, SEND};
    ss_cmd(p[0], line, sizeof line, "corrupt 6");
    round_of(p, 4, strat, r);
    for (int i = 0; i < 4; i++) CHECK_EQ_U64(r[i].result, 0);
    CHECK_EQ_U64(r[0].tx, 0);
    CHECK_EQ_U64(r[0].rx, SMALL);
    CHECK_EQ_U64(r[1].tx + r[2].tx + r[3].tx, SMALL);
    /* SEND_ONLY with the popular content: serves, never receives. */
    int strat2[4] = {SEND, SEND, SEND, RECV};
    ss_cmd(p[3], line, sizeof line, "corrupt 2");
    round_of(p, 4, strat2, r);
    for (int i = 0; i < 4; i++) CHECK_EQ_U64(r[i].result, 0);
    CHECK_EQ_U64(r[0].rx, 0);
    CHECK_EQ_U64(r[3].rx, SMALL);
    /* SEND_ONLY beside ENFORCE_POPULAR: kicked with a clear error (whatever its content), receives
     * nothing; the others go on. */
    strat[0] = 0;
    strat[1] = SEND;
    strat[2] = strat[3] = 0;
    ss_cmd(p[1], line, sizeof line, "corrupt 1");
    round_of(p, 4, strat, r);
    CHECK_EQ_U64(r[1].result, pcclInvalidUsage);
    CHECK_EQ_U64(r[1].rx, 0);
    for (int i = 0; i < 4; i++)
        if (i != 1) CHECK_EQ_U64(r[i].result, 0);
    CHECK_EQ_U64(ss_cmd(p[1], line, sizeof line, "sync 0"), pcclMasterConnectionFailed);
    ss_quit(&peer[1]);
    h_proc_t *q[3] = {&peer[0], &peer[2], &peer[3]};

    /* 5. allow_content_inequality: each peer's own t9 stays; nothing moves. */
    for (int i = 0; i < 3; i++) {
        ss_cmd(q[i], line, sizeof line, "ineq 9 1");
        ss_cmd(q[i], line, sizeof line, "fill 9 %d", 20 + i);
    }
    round_of(q, 3, NULL, r);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_U64(r[i].result, 0);
        CHECK_EQ_U64(r[i].tx + r[i].rx, 0);
        CHECK_EQ_U64(ss_cmd(q[i], line, sizeof line, "check 3"), 1); /* only t9 differs */
    }

    /* 6. A tensor set that differs (t4's count) is refused, naming the tensor; the others go on. */
    ss_cmd(q[1], line, sizeof line, "count 4 100");
    round_of(q, 3, NULL, r);
    CHECK_EQ_U64(r[0].result, 0);
    CHECK_EQ_U64(r[1].result, pcclInvalidUsage);
    CHECK_EQ_U64(r[2].result, 0);

    /* 7. Everyone receive-only: nobody can offer content. */
    int all_recv[3] = {1, 1, 1};
    ss_cmd(q[1], line, sizeof line, "count 4 %llu", SMALL / 4);
    ss_cmd(q[1], line, sizeof line, "fill 4 3");
    ss_cmd(q[1], line, sizeof line, "rev %llu", r[0].revision - 1); /* its last good one */
    round_of(q, 3, all_recv, r);
    for (int i = 0; i < 3; i++) CHECK_EQ_U64(r[i].result, pcclNoSharedStateAvailable);
    /* ... and the group goes on afterwards (revisions unchanged by the failure). */
    ss_sync_all(q, 3, NULL, r);
    for (int i = 0; i < 3; i++) CHECK_EQ_U64(r[i].result, 0);
    CHECK(ss_same_hash(q, 1));

    for (int i = 0; i < 3; i++) ss_quit(q[i]);
    h_kill(&m, 15);
    CHECK_EQ_U64(h_wait(&m, SS_T), 0);
    return check_exit();
}
