/* issue 28, 1 and 2: PCCL's shared-state rules with the real pccl-master and ss_peer processes.
 *   1. Drag-along: a peer that never advances its revision is behind at every later sync; it
 *      receives what differs (everything once, nothing after), ends at the group's revision each
 *      time (written back into its pcclSharedState_t), and never fails. With PCCL_STRICT=revision
 *      on the master, ours instead: the same peer is refused (pcclInvalidUsage) once it is behind.
 *   2. Mixed strategies: beside ENFORCE_POPULAR, a SEND_ONLY and a RECEIVE_ONLY peer are kicked
 *      (pcclInvalidUsage, then pcclMasterConnectionFailed), even with the popular content; the
 *      popular peers succeed and go on.
 * Usage: ss_pccl_test PCCL_MASTER SS_PEER */
#include <stdlib.h>

#include "tests/shared_state/ss_util.h"

#define BYTES 4096ull
#define STEPS 5

static void drag_along(const char *master_bin, const char *peer_bin, bool strict) {
    char line[256];
    if (strict) setenv("PCCL_STRICT", "revision", 1); /* read by the master at start */
    h_proc_t m, peer[3];
    int port = h_start_master(&m, master_bin, NULL);
    unsetenv("PCCL_STRICT");
    REQUIRE(port > 0);
    ss_start_peers(peer, 3, peer_bin, port);
    h_proc_t *p[3] = {&peer[0], &peer[1], &peer[2]};
    for (int i = 0; i < 3; i++) REQUIRE(ss_cmd(p[i], line, sizeof line, "tensors 1 %llu %d", BYTES, i < 2 ? 7 : 0) == 0);
    for (int step = 0; step < STEPS; step++) {
        /* Peers 0 and 1 give the step as their revision; peer 2 only what the last sync left. */
        for (int i = 0; i < 2; i++) REQUIRE(ss_cmd(p[i], line, sizeof line, "rev %d", step) == step);
        ss_sync_t r[3];
        ss_sync_all(p, 3, NULL, r);
        CHECK_EQ_U64(r[0].result, 0);
        CHECK_EQ_U64(r[1].result, 0);
        if (strict && step > 0) { /* it gave step - 1 again after syncing at step - 1 */
            CHECK_EQ_U64(r[2].result, pcclInvalidUsage);
            CHECK_EQ_U64(r[2].revision, 0); /* unchanged on failure: still behind */
            continue;
        }
        CHECK_EQ_U64(r[2].result, 0);
        CHECK_EQ_U64(r[2].revision, (unsigned long long) step); /* dragged along */
        CHECK_EQ_U64(r[2].rx, step == 0 ? BYTES : 0);
        CHECK_EQ_U64(r[0].tx + r[1].tx, step == 0 ? BYTES : 0);
        CHECK_EQ_U64(ss_cmd(p[2], line, sizeof line, "check 7"), 0);
        CHECK(ss_same_hash(p, 3));
    }
    fprintf(stderr, "ss_pccl_test: drag-along over %d syncs (%s)\n", STEPS,
            strict ? "PCCL_STRICT=revision: refused once behind" : "PCCL's rule: never refused");
    for (int i = 0; i < 3; i++) ss_quit(p[i]);
    h_kill(&m, 15);
    h_wait(&m, 5000);
}

static void mixed_strategies(const char *master_bin, const char *peer_bin) {
    char line[256];
    h_proc_t m, peer[4];
    int port = h_start_master(&m, master_bin, NULL);
    REQUIRE(port > 0);
    ss_start_peers(peer, 4, peer_bin, port);
    h_proc_t *p[4] = {&peer[0], &peer[1], &peer[2], &peer[3]};
    for (int i = 0; i < 4; i++) REQUIRE(ss_cmd(p[i], line, sizeof line, "tensors 2 %llu 5", BYTES) == 0);
    const int SEND = PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY, RECV = PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY,
              POP = PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR;
    int strat[4] = {POP, POP, SEND, RECV};
    ss_sync_t r[4];
    ss_sync_all(p, 4, strat, r);
    CHECK_EQ_U64(r[0].result, 0);
    CHECK_EQ_U64(r[1].result, 0);
    CHECK_EQ_U64(r[2].result, pcclInvalidUsage);
    CHECK_EQ_U64(r[3].result, pcclInvalidUsage);
    CHECK_EQ_U64(ss_cmd(p[2], line, sizeof line, "sync 0"), pcclMasterConnectionFailed); /* kicked */
    CHECK_EQ_U64(ss_cmd(p[3], line, sizeof line, "sync 0"), pcclMasterConnectionFailed);
    /* The popular peers go on: a sync, then an all-reduce, which the master refuses once (two
     * members left: the ring is stale), relinking it; the plain retry is exact. */
    ss_cmd(p[1], line, sizeof line, "corrupt 1");
    for (int i = 0; i < 2; i++) ss_cmd(p[i], line, sizeof line, "bump");
    ss_sync_all(p, 2, NULL, r);
    CHECK_EQ_U64(r[0].result, 0);
    CHECK_EQ_U64(r[1].result, 0);
    CHECK_EQ_U64(r[1].rx, BYTES);
    CHECK(ss_same_hash(p, 2));
    for (int attempt = 0; attempt < 2; attempt++) {
        for (int i = 0; i < 2; i++) REQUIRE(h_send(p[i], "allreduce 4099"));
        for (int i = 0; i < 2; i++) {
            REQUIRE(h_read_line(p[i], line, sizeof line, SS_T));
            int res = -1, bad = -1;
            sscanf(line, "allreduce %d %d", &res, &bad);
            CHECK_EQ_U64(res, attempt == 0 ? pcclRankConnectionLost : pcclSuccess);
            CHECK_EQ_U64(bad, 0);
        }
    }
    fprintf(stderr, "ss_pccl_test: SEND_ONLY and RECEIVE_ONLY beside ENFORCE_POPULAR kicked, the others went on\n");
    for (int i = 0; i < 4; i++) ss_quit(p[i]);
    h_kill(&m, 15);
    h_wait(&m, 5000);
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(150);
    unsetenv("PCCL_STRICT");
    drag_along(argv[1], argv[2], false);
    drag_along(argv[1], argv[2], true);
    mixed_strategies(argv[1], argv[2]);
    return check_exit();
}
