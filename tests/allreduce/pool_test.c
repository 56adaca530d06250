/* pool_test: p2p_connection_pool_size end to end. 4 peers with pools of 4: 4 streams each way,
 * 8 all-reduces in flight spread over them, exact results and identical bytes everywhere, and the
 * caching allocator obtains nothing more from the system once warm, with several ops in flight
 * (zero malloc of staging blocks in steady state). Then 3 peers with pools 1, 3 and 2: each link
 * has the pool of the peer that connects it. No thread or descriptor left at the end.
 * Usage: pool_test PCCL_MASTER ASYNC_PEER */
#include "tests/allreduce/async_driver.h"
#include "tests/common/check.h"

static void run_batch(ad_t *a, int k, int count, int uniform, const char *what) {
    char cmd[128], line[256], first[64] = "";
    snprintf(cmd, sizeof cmd, "async %d %d %x %d", k, count, ad_mask(a), uniform);
    long t = ad_now_ms();
    ad_all(a, cmd);
    for (int i = 0; i < a->n; i++) CHECK(ad_read(&a->peers[i], "started", line, sizeof line, 60000));
    for (int i = 0; i < a->n; i++) {
        CHECK(ad_read(&a->peers[i], "async", line, sizeof line, 60000));
        int nfail = -1, err = -1, world = 0;
        size_t nbad = 1;
        char hash[64] = "";
        CHECK(sscanf(line, "async %d %d %zu %63s %d", &nfail, &err, &nbad, hash, &world) == 5);
        CHECK(nfail == 0 && nbad == 0 && world == a->n);
        if (i == 0) strcpy(first, hash);
        CHECK(strcmp(first, hash) == 0);
    }
    printf("pool_test: %s: %d all-reduces of %d elements on %d peers: %ld ms\n", what, k, count, a->n, ad_now_ms() - t);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    h_init(150);
    long t0 = ad_now_ms();
    ad_t a;
    char line[128];
    if (!ad_start(&a, argv[1], argv[2], 4, NULL, 4)) return 1;
    ad_all(&a, "links");
    for (int i = 0; i < a.n; i++) CHECK(ad_read(&a.peers[i], "links", line, sizeof line, 60000) && strcmp(line, "links 4 4") == 0);
    run_batch(&a, 8, 500000, 0, "pool 4, 3 dtypes");
    run_batch(&a, 16, 20000, 0, "pool 4, 16 in flight");
    /* Staging blocks: each ring takes up to `window` blocks of its shape's size class, and at most
     * `pool` rings run at once, so with one shape the cache stops growing once the pool was full. */
    for (int w = 0; w < 3; w++) run_batch(&a, 8, 400000, 1, "pool 4, float32 (warm-up)");
    long before[AD_MAX];
    for (int i = 0; i < a.n; i++) before[i] = ad_cache_blocks(&a, i);
    for (int w = 0; w < 3; w++) run_batch(&a, 8, 400000, 1, "pool 4, float32 (steady)");
    for (int i = 0; i < a.n; i++) { /* none after the warm-up (0 in all is an answer too) */
        long after = ad_cache_blocks(&a, i);
        CHECK(before[i] >= 0 && after == before[i]);
        printf("pool_test: peer %d: cache blocks from the system %ld after the warm-up, %ld after the steady ops\n", i,
               before[i], after);
    }
    CHECK(ad_stop(&a) == 0);

    const int pools[3] = {1, 3, 2};
    if (!ad_start(&a, argv[1], argv[2], 3, pools, 0)) return 1;
    ad_all(&a, "links");
    for (int i = 0; i < a.n; i++) {
        char want[64];
        snprintf(want, sizeof want, "links %d %d", pools[i], pools[(i + 2) % 3]);
        CHECK(ad_read(&a.peers[i], "links", line, sizeof line, 60000) && strcmp(line, want) == 0);
    }
    run_batch(&a, 9, 100000, 0, "pools 1/3/2");
    CHECK(ad_stop(&a) == 0);
    printf("pool_test: %d checks, %d failed, %ld ms\n", check_count, check_failures, ad_now_ms() - t0);
    return check_failures ? 1 : 0;
}
