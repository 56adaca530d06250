/* soak_test MASTER PEER [KILLS [STEPS]]: the master restart soak of issue 29. Four restart_peer
 * processes train STEPS steps (default 150; a 4 MiB all-reduce and a shared-state sync each); the
 * master is killed KILLS times (default 40) and restarted on its port 100-300 ms later, at moments chosen in turn:
 *   - SIGKILL 0-2.5 ms after a random peer enters an all-reduce or a sync (before COMMENCE, in
 *     the ring, between its last frame and COMPLETE, during a fetch, as the timing falls);
 *   - SIGKILL at a random moment;
 *   - every third restart arms its PCCL_MASTER_TEST_DIE hook: it ends right after its n-th
 *     COMMENCE, DONE, sync RESULT or sync DONE packet (n of 1-6), so between two members' packets.
 * One peer changes its weights before every sync (RESTART_PEER_DRIFT), so every sync fetches
 * 4 MiB back to it.
 * Every peer must make the same calls, all succeeding or all failing, with the same bytes after
 * each success (restart_run.c); every peer ends at the last step with the same weights; from each
 * restart, every peer completes a step within HANG_MS (the recovery times are printed). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/restart/restart_run.h"

#define PEERS 4
/* No step for this long after a restart is a hang: 5 s as issue 29 asks; under a sanitizer,
 * where a step of this run takes 0.5-1.5 s on a loaded 2-core machine, 20 s. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define HANG_MS 20000
#else
#define HANG_MS 5000
#endif

static const char *hooks[] = {"M2C_COLLECTIVE_COMMENCE", "M2C_COLLECTIVE_DONE", "M2C_SHARED_STATE_RESULT",
                               "M2C_SHARED_STATE_DONE"};

static int min_step(const rr_run_t *r) {
    int m = r->peers[0].step;
    for (int i = 1; i < r->npeers; i++) m = r->peers[i].step < m ? r->peers[i].step : m;
    return m;
}

/* Kills the master the k-th way (k % 3: 0-2.5 ms after a peer enters an all-reduce or a sync, or
 * at a random moment); false when the peers finished first. */
static bool kill_master(rr_run_t *r, int k, char *how, size_t n) {
    int way = k % 3, base = min_step(r);
    if (way == 2) {
        rr_pump(r, rand() % 60, NULL, -1, 0);
        snprintf(how, n, "SIGKILL at a random moment");
    } else {
        const char *marker = way == 0 ? "allreduce " : "sync ";
        if (rr_pump(r, 20000, marker, rand() % PEERS, base + 1) < 0) return false;
        int us = rand() % 2500;
        usleep((useconds_t) us);
        snprintf(how, n, "SIGKILL %d us after a peer entered %s", us, way == 0 ? "an all-reduce" : "a sync");
    }
    h_kill(&r->master, SIGKILL);
    h_wait(&r->master, 5000);
    return true;
}

/* Waits until every peer made a step past `at` (true), or the master's hook ended it (*died). */
static bool recovered(rr_run_t *r, int at, bool *died) {
    int64_t t0 = rr_now_ms();
    int code;
    *died = false;
    while (rr_now_ms() - t0 < HANG_MS) {
        rr_pump(r, 5, NULL, -1, 0);
        bool all = true;
        for (int i = 0; i < PEERS; i++) all = all && (r->peers[i].step > at || r->peers[i].done);
        if (all) return true;
        if (h_exited(&r->master, &code)) return *died = true, false;
    }
    return false;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    int kills = argc > 3 ? atoi(argv[3]) : 40, steps = argc > 4 ? atoi(argv[4]) : 150;
    setvbuf(stdout, NULL, _IOLBF, 0); /* in order with the peers' log lines */
    srand((unsigned) getpid());
    rr_run_t r;
    memset(&r, 0, sizeof r);
    r.master_bin = argv[1], r.peer_bin = argv[2];
    r.dir = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
    h_init(60 + kills * (HANG_MS / 1000 + 4));
    setenv("RESTART_PEER_DRIFT", "3", 1); /* every sync fetches: kills fall during fetches too */
    if (!rr_start_master(&r, NULL) || !rr_start_peers(&r, PEERS, steps)) return 1;
    if (rr_pump(&r, 60000, "step ", -1, 1) < 0) return 1;
    int done = 0, bad = 0;
    int64_t worst = 0, total = 0;
    int timed = 0; /* restarts that were not ended by the next hook */
    bool hooked = false; /* the master died by its hook: that was the kill */
    char die[64] = "";   /* the hook armed last */
    for (int k = 0; k < kills && bad == 0; k++) {
        char how[160]; /* the hook's name and a sentence */
        snprintf(how, sizeof how, "its hook %s, between two members' packets", die);
        if (!hooked && !kill_master(&r, k, how, sizeof how)) break;
        int at = min_step(&r);
        rr_pump(&r, 100 + rand() % 200, NULL, -1, 0);
        /* every third restart: the next kill is the hook's */
        if (k % 3 == 1) snprintf(die, sizeof die, "%s:%d", hooks[(k / 3) % 4], 1 + rand() % 6); /* each hook in turn */
        if (!rr_start_master(&r, k % 3 == 1 ? die : NULL)) {
            fprintf(stderr, "soak: the master did not come back\n");
            return 1;
        }
        int64_t t0 = rr_now_ms();
        bool all = recovered(&r, at, &hooked);
        int64_t took = rr_now_ms() - t0;
        done = k + 1;
        if (hooked) {
            printf("soak: kill %d at step %d (%s); the restarted master's hook ended it %lld ms later\n", k + 1, at,
                   how, (long long) took);
            continue;
        }
        printf("soak: kill %d at step %d (%s): every peer stepped on %lld ms after the restart\n", k + 1, at, how,
               (long long) took);
        if (!all) {
            fprintf(stderr, "soak: a peer made no step for %d ms after the restart\n", HANG_MS);
            rr_dump(&r);
            bad++;
        }
        worst = took > worst ? took : worst;
        total += took, timed++;
    }
    if (hooked && !rr_start_master(&r, NULL)) return 1; /* the last kill was the hook's: one more restart */
    bool ok = bad == 0 && rr_finish(&r, 120000) && rr_same_calls(&r);
    if (!ok && bad == 0) rr_dump(&r);
    for (int i = 1; ok && i < PEERS; i++)
        if (strcmp(r.peers[i].end, r.peers[0].end) != 0) {
            fprintf(stderr, "soak: peer 0 ended \"%s\", peer %d \"%s\"\n", r.peers[0].end, i, r.peers[i].end);
            ok = false;
        }
    printf("soak: %d kills, recovery (restart to a step on every peer) mean %lld ms, worst %lld ms; %d calls "
           "compared per peer; %s\n",
           done, (long long) (timed ? total / timed : 0), (long long) worst, r.peers[0].ncalls, ok ? "all alike" : "FAILED");
    if (done < kills) fprintf(stderr, "soak: only %d of %d kills before the run ended\n", done, kills);

    rr_stop(&r);
    return ok && done == kills ? 0 : 1;
}
