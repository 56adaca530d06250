/* verdict_test MASTER PEER: a master that dies at the worst moment never splits a step (issue 29;
 * docs/group-state-machine.md, "When the master dies"). Four restart_peer processes; the master
 * ends itself with the PCCL_MASTER_TEST_DIE hook between two members' packets and is restarted on
 * its port; every peer must then make the same calls, all succeeding or all failing, and
 * every success must leave the same bytes, and every peer must end within DONE_MS of the restart:
 *   1. DONE of the first all-reduce sent to two members: all four succeed (the other two learn
 *      from the restarted master that it knows nothing, and their completed rings decide);
 *   2. COMMENCE sent to two members: all four fail alike, nobody hangs (the two without it break their links, so the two rings that started fail);
 *   3. the shared-state DONE sent to two members: all four syncs succeed (the restarted master
 *      hears in the REJOINs that every member got the election);
 *   4. the shared-state RESULT (the election) sent to two members: all four syncs fail; then to
 *      1, 2 and 3 members while one member fetches (a receiver with its RESULT must not wait for
 *      distributors whose sync failed: they answer "not serving");
 *   5. a live member not left out: two members are stopped while the master restarts and come
 *      back 150 ms after the other two rejoined: no step runs without them;
 *   6. a member that rejoins while the restarted master's first topology round runs (issue 29, 2):
 *      one member stops itself between two steps, the master is killed and restarted, the other
 *      three rejoin and vote, one of them is stopped so that their round (after the rejoin grace)
 *      stays open, the first comes back during it: every peer finishes, nobody hangs in a
 *      collective that another member was refused;
 *   7. the master dies while a member fetches: one member has other weights, the master
 *      ends itself right after the first sync's last RESULT: the fetch runs on without it and all
 *      four syncs succeed with the same bytes. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/restart/restart_run.h"

#define PEERS 4
#define STEPS 5

static const char *master_bin, *peer_bin, *dir;

static bool begin(rr_run_t *r, const char *die) {
    memset(r, 0, sizeof *r);
    r->master_bin = master_bin, r->peer_bin = peer_bin, r->dir = dir;
    return rr_start_master(r, die) && rr_start_peers(r, PEERS, STEPS);
}

/* The hook ended the master: restart it on its port. */
static bool restart_after_hook(rr_run_t *r) {
    int rc = h_wait(&r->master, 30000);
    if (rc != 137) {
        fprintf(stderr, "verdict: the master's test hook did not end it (exit %d)\n", rc);
        rr_dump(r);
        return false;
    }
    rr_pump(r, 300, NULL, -1, 0);
    return rr_start_master(r, NULL);
}

/* Every peer's first call `call` succeeded (want) or failed. */
static bool first_result(const rr_run_t *r, const char *call, bool want) {
    for (int i = 0; i < PEERS; i++)
        if (rr_succeeded(r, i, 0, call, 0) != want) {
            fprintf(stderr, "verdict: peer %d's first %s %s\n", i, call, want ? "failed" : "succeeded");
            return false;
        }
    return true;
}

/* No peer may wait this long after the restart (issue 29: no hang over 5 s); a sanitizer's
 * steps take several times longer (TSan, 2 cores: 14-19 s per case seen, one case over 20 s). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define DONE_MS 30000
#else
#define DONE_MS 5000
#endif

static int hook_case(const char *name, const char *die, const char *call, bool want) {
    rr_run_t r;
    int64_t t0 = rr_now_ms();
    bool ok = begin(&r, die) && restart_after_hook(&r);
    int64_t restarted = rr_now_ms();
    ok = ok && rr_finish(&r, DONE_MS) && rr_same_calls(&r) && first_result(&r, call, want);
    printf("verdict: %s: %s (master restarted %lld ms after the start, the peers done %lld ms later)\n", name,
           ok ? "every peer alike" : "FAILED", (long long) (restarted - t0), (long long) (rr_now_ms() - restarted));
    if (!ok) rr_dump(&r);
    rr_stop(&r);
    return ok ? 0 : 1;
}

/* Every all-reduce of every peer ran with the whole group (a sync's world is read after it
 * returned, which may be before the last member rejoined: rr_same_calls compares its hash). */
static bool whole_group(const rr_run_t *r) {
    for (int i = 0; i < PEERS; i++)
        for (int k = 0; k < r->peers[i].ncalls; k++) {
            int world = 0;
            char call[16];
            if (sscanf(r->peers[i].calls[k], "%*u %15s %*s %d", call, &world) == 2 && strcmp(call, "allreduce") == 0 &&
                world != PEERS) {
                fprintf(stderr, "verdict: peer %d ran \"%s\" without the whole group\n", i, r->peers[i].calls[k]);
                return false;
            }
        }
    return true;
}

static int left_out_case(void) {
    rr_run_t r;
    bool ok = begin(&r, NULL) && rr_pump(&r, 60000, "step ", 0, 2) >= 0;
    if (ok) {
        h_kill(&r.peers[2].proc, SIGSTOP);
        h_kill(&r.peers[3].proc, SIGSTOP);
        h_kill(&r.master, SIGKILL);
        h_wait(&r.master, 5000);
        rr_pump(&r, 300, NULL, -1, 0);
        ok = rr_start_master(&r, NULL) && h_await_log(r.log, "rejoined", 2, 20000);
        rr_pump(&r, 150, NULL, -1, 0);
        h_kill(&r.peers[2].proc, SIGCONT);
        h_kill(&r.peers[3].proc, SIGCONT);
    }
    ok = ok && rr_finish(&r, 60000) && rr_same_calls(&r) && whole_group(&r);
    printf("verdict: left out: %s\n", ok ? "every step ran with all four" : "FAILED");
    if (!ok) rr_dump(&r);
    rr_stop(&r);
    return ok ? 0 : 1;
}

/* The k-th (from 0) occurrence of needle in text, or NULL. */
static const char *nth(const char *text, const char *needle, int k) {
    const char *at = text;
    for (; (at = strstr(at, needle)) != NULL; at++)
        if (k-- == 0) return at;
    return NULL;
}

/* The scenario of case 6 happened: the 4th REJOIN came after a round of 3 started and before it
 * ended (so the test holds without the fix too, where it hangs instead). */
static bool rejoined_in_round(const char *log_path) {
    char *log = h_read_file(log_path);
    const char *start = log ? strstr(log, ": 3 participants") : NULL;
    const char *fourth = log ? nth(log, "rejoined", 3) : NULL;
    const char *done = start ? strstr(start, " done: ") : NULL;
    bool in = start != NULL && fourth != NULL && fourth > start && (done == NULL || fourth < done);
    free(log);
    if (!in) fprintf(stderr, "verdict: the 4th member did not rejoin during the round of 3\n");
    return in;
}

static int rejoin_in_round_case(void) {
    rr_run_t r;
    setenv("RESTART_PEER_PAUSE", "3:2", 1);
    bool ok = begin(&r, NULL);
    unsetenv("RESTART_PEER_PAUSE");
    ok = ok && rr_pump(&r, 60000, "paused ", 3, 2) >= 0;
    if (ok) {
        rr_pump(&r, 500, NULL, -1, 0); /* the three wait in step 2's sync for the fourth */
        h_kill(&r.master, SIGKILL);
        h_wait(&r.master, 5000);
        rr_pump(&r, 300, NULL, -1, 0);
        ok = rr_start_master(&r, NULL) && h_await_log(r.log, "rejoined", 3, 20000);
    }
    if (ok) {
        rr_pump(&r, 1500, NULL, -1, 0); /* their votes are in (3 s grace from the first REJOIN) */
        h_kill(&r.peers[2].proc, SIGSTOP);
        ok = h_await_log(r.log, ": 3 participants", 1, 20000);
        h_kill(&r.peers[3].proc, SIGCONT);
        ok = ok && h_await_log(r.log, "rejoined", 4, 20000);
        h_kill(&r.peers[2].proc, SIGCONT);
        ok = ok && rejoined_in_round(r.log);
    }
    ok = ok && rr_finish(&r, 60000) && rr_same_calls(&r) && whole_group(&r);
    printf("verdict: rejoined during the first round: %s\n", ok ? "every peer finished alike" : "FAILED");
    if (!ok) rr_dump(&r);
    rr_stop(&r);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    master_bin = argv[1];
    peer_bin = argv[2];
    dir = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
    h_init(300);
    int bad = 0;
    bad += hook_case("DONE to two of four", "M2C_COLLECTIVE_DONE:2", "allreduce", true);
    bad += hook_case("COMMENCE to two of four", "M2C_COLLECTIVE_COMMENCE:2", "allreduce", false);
    bad += hook_case("sync DONE to two of four", "M2C_SHARED_STATE_DONE:2", "sync", true);
    bad += hook_case("sync RESULT to two of four", "M2C_SHARED_STATE_RESULT:2", "sync", false);
    /* The same with a fetch: a receiver that got its RESULT must not wait for distributors whose
     * sync failed without one (they answer NOT_SERVING; before, it retried for 10 s). */
    setenv("RESTART_PEER_DRIFT", "0", 1); /* peer 0 joins first: its RESULT goes out first */
    for (int n = 1; n <= 3; n++) {
        char die[64], name[64];
        snprintf(die, sizeof die, "M2C_SHARED_STATE_RESULT:%d", n);
        snprintf(name, sizeof name, "sync RESULT to %d of four, one fetching", n);
        bad += hook_case(name, die, "sync", false);
    }
    unsetenv("RESTART_PEER_DRIFT");
    bad += left_out_case();
    bad += rejoin_in_round_case();
    setenv("RESTART_PEER_DRIFT", "3", 1);
    bad += hook_case("during a fetch", "M2C_SHARED_STATE_RESULT:4", "sync", true);
    unsetenv("RESTART_PEER_DRIFT");
    return bad ? 1 : 0;
}
