/* pool_connect_test: the pool's streams connect concurrently (ccoip_peer_p2p.c), also when a
 * round breaks off in the middle. 4 peers with pools of 8 (two waves of connect threads on 16
 * streams would be one; 8 is one full wave): 10 topology rounds in a row, each reconnecting every
 * stream, with no descriptor or thread more after them than after the first. Then, 6 times, a
 * neighbour is frozen at a different moment of a round (0-16 ms after the command: before,
 * during or after its pool's connects) and killed 300 ms later: every survivor's
 * pcclUpdateTopology returns within a bound, the next rounds succeed with full pools, an
 * all-reduce over the survivors is exact, and once a newcomer restored the world of 4 every peer
 * holds exactly the descriptors and threads it held before (no socket of an abandoned connect
 * left). Finally no thread or descriptor is left after pcclDestroyCommunicator.
 * Usage: pool_connect_test PCCL_MASTER ASYNC_PEER */
#include <unistd.h>

#include "tests/allreduce/async_driver.h"
#include "tests/common/check.h"

#define POOL 8

static void batch(ad_t *a, const char *what) {
    char cmd[128], line[256], first[64] = "";
    snprintf(cmd, sizeof cmd, "async 4 100000 %x 0", ad_mask(a));
    ad_all(a, cmd);
    for (int i = 0; i < a->n; i++) CHECK(ad_read(&a->peers[i], "started", line, sizeof line, 60000));
    for (int i = 0; i < a->n; i++) {
        int nfail = -1, err = -1, world = 0;
        size_t nbad = 1;
        char hash[64] = "";
        CHECK(ad_read(&a->peers[i], "async", line, sizeof line, 60000));
        CHECK(sscanf(line, "async %d %d %zu %63s %d", &nfail, &err, &nbad, hash, &world) == 5);
        CHECK(nfail == 0 && nbad == 0 && world == a->n);
        if (i == 0) strcpy(first, hash);
        CHECK(strcmp(first, hash) == 0);
    }
    printf("pool_connect_test: %s: exact on %d peers\n", what, a->n);
}

static void check_links(ad_t *a) {
    char line[64];
    ad_all(a, "links");
    for (int i = 0; i < a->n; i++)
        CHECK(ad_read(&a->peers[i], "links", line, sizeof line, 60000) && strcmp(line, "links 8 8") == 0);
}

/* Each peer's "res FDS THREADS" into fds/threads (by input index). */
static void resources(ad_t *a, int *fds, int *threads) {
    char line[64];
    ad_all(a, "res");
    for (int i = 0; i < a->n; i++) {
        int f = -1, t = -1;
        CHECK(ad_read(&a->peers[i], "res", line, sizeof line, 60000) && sscanf(line, "res %d %d", &f, &t) == 2);
        fds[a->idx[i]] = f;
        threads[a->idx[i]] = t;
    }
}

static void same_resources(ad_t *a, const int *fds0, const int *threads0, const char *when) {
    int fds[AD_MAX], threads[AD_MAX];
    resources(a, fds, threads);
    for (int i = 0; i < a->n; i++) {
        int k = a->idx[i];
        CHECK(fds[k] == fds0[k] && threads[k] == threads0[k]);
        if (fds[k] != fds0[k] || threads[k] != threads0[k])
            fprintf(stderr, "pool_connect_test: %s: peer %d holds %d descriptors, %d threads (had %d, %d)\n", when, k,
                    fds[k], threads[k], fds0[k], threads0[k]);
    }
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    h_init(170);
    long t0 = ad_now_ms();
    ad_t a;
    char line[128];
    if (!ad_start(&a, argv[1], argv[2], 4, NULL, POOL)) return 1;
    check_links(&a);
    batch(&a, "pool 8");
    int fds0[AD_MAX], threads0[AD_MAX];
    resources(&a, fds0, threads0);
    long t = ad_now_ms();
    for (int r = 0; r < 10; r++) CHECK(ad_update(&a));
    printf("pool_connect_test: 10 rounds of 4 x 8 streams: %ld ms\n", ad_now_ms() - t);
    check_links(&a);
    batch(&a, "after 10 rounds");
    same_resources(&a, fds0, threads0, "after 10 rounds");

    for (int trial = 0; trial < 6; trial++) {
        int victim = 1 + trial % 3, vidx = a.idx[victim];
        ad_all(&a, "update");
        usleep((useconds_t) (trial == 0 ? 0 : 1000 << (trial - 1)));
        h_kill(&a.peers[victim], SIGSTOP);
        usleep(300000);
        h_kill(&a.peers[victim], SIGKILL);
        long k = ad_now_ms();
        for (int i = 0; i < a.n; i++) {
            if (i == victim) continue;
            /* Any result: the round may have ended before the freeze. Bounded: the connect
             * threads stop within one attempt (1 s connect + 2 s handshake) of the master's word. */
            CHECK(h_read_line(&a.peers[i], line, sizeof line, 15000) && strncmp(line, "update ", 7) == 0);
        }
        long answered = ad_now_ms() - k;
        ad_drop(&a, victim);
        bool up = false;
        for (int r = 0; r < 10 && !up; r++) up = ad_update(&a);
        CHECK(up);
        check_links(&a);
        batch(&a, "survivors");
        CHECK(ad_add_peer(&a, vidx, POOL));
        /* The newcomer is last in the ring now; a full round for everyone, then compare. */
        CHECK(ad_update(&a));
        check_links(&a);
        batch(&a, "world of 4 again");
        int fds[AD_MAX], threads[AD_MAX];
        resources(&a, fds, threads);
        fds0[vidx] = fds[vidx]; /* the newcomer: its own first count */
        threads0[vidx] = threads[vidx];
        same_resources(&a, fds0, threads0, "after a killed round");
        printf("pool_connect_test: trial %d: survivors answered %ld ms after the kill\n", trial, answered);
    }
    CHECK(ad_stop(&a) == 0);
    printf("pool_connect_test: %d checks, %d failed, %ld ms\n", check_count, check_failures, ad_now_ms() - t0);
    return check_failures ? 1 : 0;
}
