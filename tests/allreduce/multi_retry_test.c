/* multi_retry_test: pcclAllReduceMultipleWithRetry end to end.
 *   1. 3 peers (pool 2): 12 all-reduces, at most 4 in flight: all succeed, exact, identical.
 *   2. 4 peers (pool 2): 24 all-reduces of 1M elements, 4 in flight; one peer is SIGKILLed
 *      mid-run. The survivors' call updates the topology and retries the failed ones: it returns
 *      pcclSuccess, every op equals the exact reduction over all 4 inputs (done before the kill)
 *      or over the 3 survivors' (retried), every survivor holds the same bytes, world 3.
 *   3. 2 peers: one is SIGKILLed mid-run: the other gets pcclTooFewPeers, world 1.
 * No thread or descriptor left on the survivors after pcclDestroyCommunicator.
 * Usage: multi_retry_test PCCL_MASTER ASYNC_PEER */
#include <unistd.h>

#include "tests/allreduce/async_driver.h"
#include "tests/common/check.h"

typedef struct mres {
    int r, world, nfull, nsurv;
    size_t nbad;
    char hash[64];
    unsigned long long tx;
} mres_t;

static bool read_multi(h_proc_t *p, mres_t *m) {
    char line[256];
    memset(m, 0, sizeof *m);
    m->r = -1;
    if (!ad_read(p, "multi ", line, sizeof line, 60000)) return false;
    return sscanf(line, "multi %d %zu %d %63s %llu %d %d", &m->r, &m->nbad, &m->world, m->hash, &m->tx, &m->nfull,
                  &m->nsurv) == 7;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    h_init(150);
    long t0 = ad_now_ms();
    ad_t a;
    char cmd[128], line[256];
    mres_t m[AD_MAX];

    /* 1 */
    if (!ad_start(&a, argv[1], argv[2], 3, NULL, 2)) return 1;
    snprintf(cmd, sizeof cmd, "multi 12 50000 4 %x %x", ad_mask(&a), ad_mask(&a));
    ad_all(&a, cmd);
    for (int i = 0; i < a.n; i++) CHECK(ad_read(&a.peers[i], "multistart", line, sizeof line, 60000));
    for (int i = 0; i < a.n; i++) {
        CHECK(read_multi(&a.peers[i], &m[i]));
        CHECK(m[i].r == 0 && m[i].nbad == 0 && m[i].world == 3 && m[i].nfull == 12);
        CHECK(strcmp(m[i].hash, m[0].hash) == 0);
    }
    CHECK(ad_stop(&a) == 0);

    /* 2 */
    if (!ad_start(&a, argv[1], argv[2], 4, NULL, 2)) return 1;
    unsigned full = ad_mask(&a), surv = full & ~(1u << a.idx[2]);
    snprintf(cmd, sizeof cmd, "multi 24 1000000 4 %x %x", full, surv);
    ad_all(&a, cmd);
    for (int i = 0; i < a.n; i++) CHECK(ad_read(&a.peers[i], "multistart", line, sizeof line, 60000));
    usleep(150 * 1000);
    long tkill = ad_now_ms();
    h_kill(&a.peers[2], SIGKILL);
    ad_drop(&a, 2);
    for (int i = 0; i < a.n; i++) {
        CHECK(read_multi(&a.peers[i], &m[i]));
        CHECK(m[i].r == 0 && m[i].nbad == 0 && m[i].world == 3 && m[i].nfull + m[i].nsurv == 24);
        CHECK(strcmp(m[i].hash, m[0].hash) == 0);
        if (m[i].r != 0 || m[i].nbad) fprintf(stderr, "multi_retry_test: survivor %d: r=%d nbad=%zu\n", i, m[i].r, m[i].nbad);
    }
    printf("multi_retry_test: kill at %ld ms: %d ops done by 4, %d retried by 3, survivors done %ld ms after the kill\n",
           tkill - t0, m[0].nfull, m[0].nsurv, ad_now_ms() - tkill);
    CHECK(ad_stop(&a) == 0);

    /* 3 */
    if (!ad_start(&a, argv[1], argv[2], 2, NULL, 1)) return 1;
    full = ad_mask(&a);
    snprintf(cmd, sizeof cmd, "multi 16 1000000 2 %x %x", full, full);
    ad_all(&a, cmd);
    for (int i = 0; i < a.n; i++) CHECK(ad_read(&a.peers[i], "multistart", line, sizeof line, 60000));
    usleep(50 * 1000);
    h_kill(&a.peers[1], SIGKILL);
    ad_drop(&a, 1);
    CHECK(read_multi(&a.peers[0], &m[0]));
    CHECK(m[0].r == 5 && m[0].world == 1); /* pcclTooFewPeers */
    if (m[0].r != 5) fprintf(stderr, "multi_retry_test: lone survivor: r=%d world=%d\n", m[0].r, m[0].world);
    CHECK(ad_stop(&a) == 0);

    printf("multi_retry_test: %d checks, %d failed, %ld ms\n", check_count, check_failures, ad_now_ms() - t0);
    return check_failures ? 1 : 0;
}
