/* stripe_group_test: ops striped over a group of the pool's streams (ccoip_stripe_width):
 * consecutive ops take consecutive groups and run at once, beside single-stream ops. The real
 * pccl-master and async_peer processes; every op exact and the same bytes on every peer.
 * Cases 1-4 pin the lane minimum rule (PCCL_STRIPE_LANE_MIN_KIB = 1024, PCCL_STRIPE_SHARED_LANES
 * = 0 on every peer: ops take the same width whether others run or not):
 *   1. 4 peers, pools of 8, 16 MiB float32 ops (chunks of 4 MiB: groups of 4 streams, 16
 *      sub-chunks per chunk, 4 per lane), 4 kinds, then mixed with 777-element ops in flight.
 *   2. 4 peers, pools of 4, 2,500,003 elements (chunks of about 2.4 MiB: groups of 2 streams,
 *      10 sub-chunks per chunk), 4 kinds and mixed.
 *   3. 3 peers with pools 8, 4 and 2, 16 MiB ops: each link its own width (4, 4 and 2 over 3
 *      peers' chunks of 5.3 MiB), so one peer's two links differ (one lane there).
 *   4. 4 peers, pools of 8, 32 MiB ops (chunks of 8 MiB): groups of 4 by the lane cap
 *      (PCCL_STRIPE_MAX_LANES=4), then all 8 streams per op (the default: no cap alone).
 * Case 5 is the shipped rule: an op alone takes every stream it may, ops beside others 2 (pool 2: 1),
 *   so one batch mixes widths on the same streams: pools of 4 and of 2, 16 MiB ops, 4 kinds and
 *   mixed with small ops; 3 peers with pools 8, 4 and 2.
 * Usage: stripe_group_test PCCL_MASTER ASYNC_PEER */
#include "tests/allreduce/async_driver.h"
#include "tests/common/check.h"

#define OP16 4194301 /* float32: 16 MiB less 12 bytes */
#define OP32 8388605 /* float32: 32 MiB less 12 bytes */
#define BIG 2500003

static void run_batch(ad_t *a, int count, const char *cmd_tail, int k, const char *what) {
    char cmd[160], line[256], first[64] = "";
    snprintf(cmd, sizeof cmd, "async %d %d %x %s", k, count, ad_mask(a), cmd_tail);
    long t = ad_now_ms();
    ad_all(a, cmd);
    for (int i = 0; i < a->n; i++) CHECK(ad_read(&a->peers[i], "started", line, sizeof line, 120000));
    for (int i = 0; i < a->n; i++) {
        CHECK(ad_read(&a->peers[i], "async", line, sizeof line, 120000));
        int nfail = -1, err = -1, world = 0;
        size_t nbad = 1;
        char hash[64] = "";
        CHECK(sscanf(line, "async %d %d %zu %63s %d", &nfail, &err, &nbad, hash, &world) == 5);
        CHECK(nfail == 0 && nbad == 0 && world == a->n);
        if (nfail != 0 || nbad != 0) fprintf(stderr, "stripe_group_test: %s: peer %d: %s\n", what, i, line);
        if (i == 0) strcpy(first, hash);
        CHECK(strcmp(first, hash) == 0);
    }
    printf("stripe_group_test: %s: %d ops on %d peers: %ld ms\n", what, k, a->n, ad_now_ms() - t);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    h_init(600); /* TSan on a loaded 2-core box */
    long t0 = ad_now_ms();
    ad_t a;
    setenv("PCCL_STRIPE_LANE_MIN_KIB", "1024", 1); /* the peers inherit them */
    setenv("PCCL_STRIPE_SHARED_LANES", "0", 1);

    /* 1 */
    if (!ad_start(&a, argv[1], argv[2], 4, NULL, 8)) return 1;
    run_batch(&a, OP16, "0", 4, "pool 8, groups of 4, 4 kinds");
    run_batch(&a, OP16, "0 777", 8, "pool 8, groups of 4 and single-stream mixed");
    run_batch(&a, OP16, "1", 6, "pool 8, groups of 4, 6 float32 ops");
    CHECK(ad_stop(&a) == 0);

    /* 2 */
    if (!ad_start(&a, argv[1], argv[2], 4, NULL, 4)) return 1;
    run_batch(&a, BIG, "0", 4, "pool 4, groups of 2, 4 kinds");
    run_batch(&a, BIG, "0 777", 8, "pool 4, groups of 2 and single-stream mixed");
    CHECK(ad_stop(&a) == 0);

    /* 3 */
    const int pools[3] = {8, 4, 2};
    if (!ad_start(&a, argv[1], argv[2], 3, pools, 0)) return 1;
    run_batch(&a, OP16, "0", 4, "pools 8/4/2, 4 kinds");
    run_batch(&a, OP16, "0 777", 8, "pools 8/4/2, mixed");
    CHECK(ad_stop(&a) == 0);

    /* 4 */
    setenv("PCCL_STRIPE_MAX_LANES", "4", 1);
    if (!ad_start(&a, argv[1], argv[2], 4, NULL, 8)) return 1;
    run_batch(&a, OP32, "1", 4, "pool 8, 32 MiB ops, groups of 4 (lane cap 4)");
    CHECK(ad_stop(&a) == 0);
    unsetenv("PCCL_STRIPE_MAX_LANES");
    if (!ad_start(&a, argv[1], argv[2], 4, NULL, 8)) return 1;
    run_batch(&a, OP32, "1", 2, "pool 8, 32 MiB ops, all 8 streams (no cap)");
    CHECK(ad_stop(&a) == 0);

    /* 5 */
    unsetenv("PCCL_STRIPE_LANE_MIN_KIB");
    unsetenv("PCCL_STRIPE_SHARED_LANES");
    if (!ad_start(&a, argv[1], argv[2], 4, NULL, 4)) return 1;
    run_batch(&a, OP16, "0", 4, "pool 4, shipped rule (4 streams alone, 2 beside others), 4 kinds");
    run_batch(&a, OP16, "0 777", 8, "pool 4, shipped rule, mixed");
    CHECK(ad_stop(&a) == 0);
    if (!ad_start(&a, argv[1], argv[2], 4, NULL, 2)) return 1;
    run_batch(&a, OP16, "1", 6, "pool 2, shipped rule (one stream per op beside others)");
    CHECK(ad_stop(&a) == 0);
    if (!ad_start(&a, argv[1], argv[2], 3, pools, 0)) return 1;
    run_batch(&a, OP16, "0 777", 8, "pools 8/4/2, shipped rule, mixed");
    CHECK(ad_stop(&a) == 0);
    printf("stripe_group_test: %d checks, %d failed, %ld ms\n", check_count, check_failures, ad_now_ms() - t0);
    return check_failures ? 1 : 0;
}
