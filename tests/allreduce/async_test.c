/* async_test: pcclAllReduceAsync / pcclAwaitAsyncReduce end to end with the real pccl-master and
 * 4 async_peer processes (pool of 1): 8 all-reduces in flight at once (float32 Sum and Avg, int32 Sum, float64 Max,
 * exact results checked element by element on every peer, every result byte compared across
 * peers through a hash), misuse while 16 are in flight (a 17th, a tag still in flight,
 * pcclUpdateTopology -> pcclPendingAsyncOps, pcclArePeersPending a vote as PCCL allows, awaiting an unknown tag), then
 * no thread or descriptor left after pcclDestroyCommunicator.
 * Usage: async_test PCCL_MASTER ASYNC_PEER */
#include "tests/allreduce/async_driver.h"
#include "tests/common/check.h"

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    h_init(120);
    ad_t a;
    long t0 = ad_now_ms();
    if (!ad_start(&a, argv[1], argv[2], 4, NULL, 1)) {
        fprintf(stderr, "async_test: setup failed\n");
        return 1;
    }
    char line[256], first[256];
    unsigned mask = ad_mask(&a);
    char cmd[128];

    ad_all(&a, "links");
    for (int i = 0; i < a.n; i++) CHECK(ad_read(&a.peers[i], "links", line, sizeof line, 60000) && strcmp(line, "links 1 1") == 0);

    for (int round = 0; round < 2; round++) {
        snprintf(cmd, sizeof cmd, "async 8 %d %x", round ? 3 : 100003, mask);
        long t = ad_now_ms();
        ad_all(&a, cmd);
        for (int i = 0; i < a.n; i++) CHECK(ad_read(&a.peers[i], "started", line, sizeof line, 60000));
        for (int i = 0; i < a.n; i++) {
            CHECK(ad_read(&a.peers[i], "async", line, sizeof line, 60000));
            int nfail = -1, err = -1, world = 0;
            size_t nbad = 1;
            char hash[32] = "";
            CHECK(sscanf(line, "async %d %d %zu %31s %d", &nfail, &err, &nbad, hash, &world) == 5);
            CHECK(nfail == 0 && nbad == 0 && world == 4);
            if (i == 0) strcpy(first, hash);
            CHECK(strcmp(first, hash) == 0);
        }
        printf("async_test: 8 async all-reduces of %s elements on 4 peers: %ld ms\n", round ? "3" : "100003",
               ad_now_ms() - t);
    }

    snprintf(cmd, sizeof cmd, "misuse %x", mask);
    ad_all(&a, cmd);
    for (int i = 0; i < a.n; i++) {
        CHECK(ad_read(&a.peers[i], "misuse", line, sizeof line, 60000));
        /* 17th: InvalidUsage (4); tag in flight: 4; update: PendingAsyncOps (10); pending: a vote
         * beside the ops, as PCCL allows (0: every peer asks); unknown handle: InvalidArgument
         * (3); then the 16 succeed with exact results. */
        CHECK(strcmp(line, "misuse 4 4 10 0 3 0 0") == 0);
        if (strcmp(line, "misuse 4 4 10 0 3 0 0") != 0) fprintf(stderr, "async_test: peer %d: %s\n", i, line);
    }
    /* Nothing in flight any more: a topology vote goes through again. */
    CHECK(ad_update(&a));

    CHECK(ad_stop(&a) == 0);
    printf("async_test: %d checks, %d failed, %ld ms\n", check_count, check_failures, ad_now_ms() - t0);
    return check_failures ? 1 : 0;
}
