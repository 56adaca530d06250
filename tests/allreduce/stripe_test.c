/* stripe_test: large all-reduces striped over the connection pool (ccoip_stripe.h) end to end,
 * the real pccl-master and async_peer processes.
 *   1. 4 peers, pools of 4: 4 striped ops of 2,500,003 elements (float32 Sum, int32 Sum, float64
 *      Max, float32 Avg; the count divides by neither the pool nor the world), exact and the
 *      same bytes on every peer; then striped and single-stream ops in flight together (odd ops
 *      of 777 elements); then the caching allocator obtains nothing more once warm.
 *   2. pcclAllReduceMultipleWithRetry over mixed sizes and kinds (small tensors bucketed, large
 *      ones striped): exact everywhere. Then the same with a peer SIGKILLed mid-run: the
 *      survivors' call retries and returns success, every op equals the reduction over all 4
 *      inputs or over the 3 survivors', the same bytes on every survivor.
 *   3. 3 peers with pools 1, 3 and 2: each link striped over its own stream count.
 *   4. 4 peers, pools of 4, one of them on one lane (PCCL_STRIPE_LANES=0), the others on lanes:
 *      4 kinds at 9 and 10 sub-chunks per chunk, exact and the same bytes everywhere.
 * Every striped op with equal widths runs on lanes (reduce/README.md "Lanes"), whether its
 * chunks cut into a multiple of the stream count (LANES) or not (BIG, NONMULT).
 * Usage: stripe_test PCCL_MASTER ASYNC_PEER */
#include <unistd.h>

#include "tests/allreduce/async_driver.h"
#include "tests/common/check.h"

/* Over 4 peers, 10 sub-chunks of 256 KiB per chunk for 4-byte kinds (20 for float64). */
#define BIG 2500003
/* Over 4 peers, chunks of 1048576 and 1048575 elements, 16 sub-chunks each for 4-byte kinds
 * (32 for float64), the last one shorter: a multiple of the 4 streams. */
#define LANES 4194301
/* Over 4 peers, 9 sub-chunks per chunk for 4-byte kinds (18 for float64), the last one shorter. */
#define NONMULT 2359291

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
        if (nfail != 0 || nbad != 0) fprintf(stderr, "stripe_test: %s: peer %d: %s\n", what, i, line);
        if (i == 0) strcpy(first, hash);
        CHECK(strcmp(first, hash) == 0);
    }
    printf("stripe_test: %s: %d ops on %d peers: %ld ms\n", what, k, a->n, ad_now_ms() - t);
}

typedef struct mres {
    int r, world, nfull, nsurv;
    size_t nbad;
    char hash[64];
} mres_t;

static bool read_multi(h_proc_t *p, mres_t *m) {
    char line[256];
    unsigned long long tx;
    memset(m, 0, sizeof *m);
    m->r = -1;
    if (!ad_read(p, "multi ", line, sizeof line, 120000)) return false;
    return sscanf(line, "multi %d %zu %d %63s %llu %d %d", &m->r, &m->nbad, &m->world, m->hash, &tx, &m->nfull,
                  &m->nsurv) == 7;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    h_init(600); /* TSan on a loaded 2-core box: ~100-250 s */
    /* Every op over all 4 streams (the shapes above are about 4 lanes); groups of streams are
     * stripe_group_test's. The peers inherit it. */
    setenv("PCCL_STRIPE_LANE_MIN_KIB", "0", 1);
    long t0 = ad_now_ms();
    ad_t a;
    char cmd[160], line[256];
    mres_t m[AD_MAX];

    /* 1 */
    if (!ad_start(&a, argv[1], argv[2], 4, NULL, 4)) return 1;
    run_batch(&a, BIG, "0", 4, "striped, 10 sub-chunks per chunk, 4 kinds");
    run_batch(&a, LANES, "0", 4, "striped, 16 sub-chunks per chunk, 4 kinds");
    run_batch(&a, NONMULT, "0", 4, "striped, 9 sub-chunks per chunk, 4 kinds");
    run_batch(&a, BIG, "0 777", 8, "striped and single-stream mixed");
    run_batch(&a, LANES, "0 777", 8, "lanes and single-stream mixed");
    for (int w = 0; w < 2; w++) {
        run_batch(&a, BIG, "1", 4, "striped float32 (warm-up)");
        run_batch(&a, LANES, "1", 4, "lanes float32 (warm-up)");
    }
    long before[AD_MAX];
    for (int i = 0; i < a.n; i++) before[i] = ad_cache_blocks(&a, i);
    for (int w = 0; w < 2; w++) {
        run_batch(&a, BIG, "1", 4, "striped float32 (steady)");
        run_batch(&a, LANES, "1", 4, "lanes float32 (steady)");
    }
    for (int i = 0; i < a.n; i++) { /* none after the warm-up (0 in all is an answer too) */
        long after = ad_cache_blocks(&a, i);
        CHECK(before[i] >= 0 && after == before[i]);
        printf("stripe_test: peer %d: cache blocks from the system %ld after the warm-up, %ld after the steady ops\n", i,
               before[i], after);
    }

    /* 2 */
    unsigned full = ad_mask(&a);
    snprintf(cmd, sizeof cmd, "multi 12 %d 4 %x %x 1", BIG, full, full);
    ad_all(&a, cmd);
    for (int i = 0; i < a.n; i++) CHECK(ad_read(&a.peers[i], "multistart", line, sizeof line, 120000));
    for (int i = 0; i < a.n; i++) {
        CHECK(read_multi(&a.peers[i], &m[i]));
        CHECK(m[i].r == 0 && m[i].nbad == 0 && m[i].nfull == 12 && m[i].world == 4);
        CHECK(strcmp(m[i].hash, m[0].hash) == 0);
    }
    int victim = 2;
    unsigned surv = full & ~(1u << a.idx[victim]);
    snprintf(cmd, sizeof cmd, "multi 12 %d 4 %x %x 1", BIG, full, surv);
    /* The victim starts last and is frozen at once (nothing that needs it can complete), then
     * SIGKILLed while the others' striped rings wait on it. */
    for (int i = 0; i < a.n; i++)
        if (i != victim) h_send(&a.peers[i], cmd);
    for (int i = 0; i < a.n; i++)
        if (i != victim) CHECK(ad_read(&a.peers[i], "multistart", line, sizeof line, 120000));
    h_send(&a.peers[victim], cmd);
    CHECK(ad_read(&a.peers[victim], "multistart", line, sizeof line, 120000));
    h_kill(&a.peers[victim], SIGSTOP);
    usleep(100 * 1000);
    h_kill(&a.peers[victim], SIGKILL);
    ad_drop(&a, victim);
    int retried = 0;
    for (int i = 0; i < a.n; i++) {
        CHECK(read_multi(&a.peers[i], &m[i]));
        CHECK(m[i].r == 0 && m[i].nbad == 0 && m[i].nfull + m[i].nsurv == 12 && m[i].world == 3);
        if (m[i].r != 0 || m[i].world != 3)
            fprintf(stderr, "stripe_test: survivor %d: r %d nbad %zu world %d full %d surv %d\n", i, m[i].r, m[i].nbad,
                    m[i].world, m[i].nfull, m[i].nsurv);
        CHECK(strcmp(m[i].hash, m[0].hash) == 0 && m[i].nsurv == m[0].nsurv);
        retried = m[i].nsurv;
    }
    CHECK(retried > 0);
    printf("stripe_test: SIGKILL mid multi: %d of 12 ops retried among the 3 survivors\n", retried);
    CHECK(ad_stop(&a) == 0);

    /* 3 */
    const int pools[3] = {1, 3, 2};
    if (!ad_start(&a, argv[1], argv[2], 3, pools, 0)) return 1;
    run_batch(&a, BIG, "0", 4, "pools 1/3/2, 4 kinds");
    run_batch(&a, LANES, "0", 4, "pools 1/3/2, a count cut for lanes, 4 kinds");
    CHECK(ad_stop(&a) == 0);

    /* 4 */
    if (!ad_start(&a, argv[1], argv[2], 3, NULL, 4)) return 1;
    setenv("PCCL_STRIPE_LANES", "0", 1);
    bool added = ad_add_peer(&a, 3, 4);
    unsetenv("PCCL_STRIPE_LANES");
    if (!added) return 1;
    run_batch(&a, NONMULT, "0", 4, "one peer on one lane, 9 sub-chunks per chunk, 4 kinds");
    run_batch(&a, BIG, "0", 4, "one peer on one lane, 10 sub-chunks per chunk, 4 kinds");
    CHECK(ad_stop(&a) == 0);
    printf("stripe_test: %d checks, %d failed, %ld ms\n", check_count, check_failures, ad_now_ms() - t0);
    return check_failures ? 1 : 0;
}
