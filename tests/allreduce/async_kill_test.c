/* async_kill_test: 4 peers with pools of 4 run 4 async all-reduces of 2M floats each; once all
 * are queued one peer is frozen (SIGSTOP, so nothing can complete) and then SIGKILLed. Every
 * handle on every survivor must complete with an error within a bounded time; the survivors
 * then update the topology and run 4 more async all-reduces among themselves, exactly; and after
 * pcclDestroyCommunicator no thread or descriptor is left. Repeated 3 times.
 * Usage: async_kill_test PCCL_MASTER ASYNC_PEER */
#include <unistd.h>

#include "tests/allreduce/async_driver.h"
#include "tests/common/check.h"

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    h_init(150);
    long t0 = ad_now_ms();
    long worst = 0;
    for (int rep = 0; rep < 3; rep++) {
        ad_t a;
        char cmd[128], line[256];
        if (!ad_start(&a, argv[1], argv[2], 4, NULL, 4)) return 1;
        int victim = 1 + rep % 3;
        unsigned surv = ad_mask(&a) & ~(1u << a.idx[victim]);
        snprintf(cmd, sizeof cmd, "async 4 2000000 %x", ad_mask(&a));
        /* The victim queues last: nothing can commence before its INITs, and it is frozen right
         * after it queued, long before a ring of 8 MB could finish. */
        for (int i = 0; i < a.n; i++)
            if (i != victim) h_send(&a.peers[i], cmd);
        for (int i = 0; i < a.n; i++)
            if (i != victim) CHECK(ad_read(&a.peers[i], "started", line, sizeof line, 60000));
        h_send(&a.peers[victim], cmd);
        CHECK(ad_read(&a.peers[victim], "started", line, sizeof line, 60000));
        h_kill(&a.peers[victim], SIGSTOP);
        usleep(100 * 1000);
        long tkill = ad_now_ms();
        h_kill(&a.peers[victim], SIGKILL);
        ad_drop(&a, victim);
        for (int i = 0; i < a.n; i++) {
            CHECK(ad_read(&a.peers[i], "async", line, sizeof line, 60000));
            int nfail = -1, err = -1;
            CHECK(sscanf(line, "async %d %d", &nfail, &err) == 2);
            CHECK(nfail == 4 && err != 0);
            if (nfail != 4) fprintf(stderr, "async_kill_test: survivor %d: %s\n", i, line);
        }
        long took = ad_now_ms() - tkill;
        worst = took > worst ? took : worst;
        CHECK(took < 10000);
        /* The survivors go on. */
        CHECK(ad_update(&a));
        snprintf(cmd, sizeof cmd, "async 4 100000 %x", surv);
        ad_all(&a, cmd);
        for (int i = 0; i < a.n; i++) CHECK(ad_read(&a.peers[i], "started", line, sizeof line, 60000));
        for (int i = 0; i < a.n; i++) {
            CHECK(ad_read(&a.peers[i], "async", line, sizeof line, 30000));
            int nfail = -1, err = -1, world = 0;
            size_t nbad = 1;
            char hash[64];
            CHECK(sscanf(line, "async %d %d %zu %63s %d", &nfail, &err, &nbad, hash, &world) == 5);
            CHECK(nfail == 0 && nbad == 0 && world == 3);
        }
        CHECK(ad_stop(&a) == 0);
    }
    printf("async_kill_test: every survivor handle failed within %ld ms of the SIGKILL (worst of 3)\n", worst);
    printf("async_kill_test: %d checks, %d failed, %ld ms\n", check_count, check_failures, ad_now_ms() - t0);
    return check_failures ? 1 : 0;
}
