/* win_mixed_test: Linux and Windows processes in one job, on 127.0.0.1. The Windows ones are the
 * cross-built programs of `make windows` (build/win) run under wine; win_test.sh prepares wine
 * and passes the paths. Every result is checked byte for byte (in the peers, against ar_ref.c
 * compiled for each platform) and must be bit-identical on every peer.
 *   win_mixed_test MODE LINUX_MASTER LINUX_AR_PEER LINUX_SS_PEER WIN_DIR, MODE one of
 *   allreduce  a Linux master; ring Linux, Windows, Linux, Windows (every link crosses platforms):
 *              every dtype x op at odd sizes, random floats in the ring's order, 16 MiB.
 *   kill       the same ring: SIGKILL of a Windows peer in the middle of a 16 MiB all-reduce; the
 *              others fail together within a bound, retry with 3 (exact), a new Windows peer
 *              restores 4. Three trials.
 *   shared     a Linux master, two Linux peers with a shared state, a Windows newcomer with zeros
 *              receives it bit for bit; then a Windows peer serves a Linux newcomer.
 *   master     pccl-master.exe under wine, three Linux peers: admission, all-reduce, a peer
 *              killed and the retry with 2, then Ctrl-C (SIGINT, which wine turns into the console
 *              event): a clean exit with status 0.
 *   secure     the run secret and encryption across platforms: a Linux master with --secret-file
 *              and --encrypt, every peer with PCCL_SECRET_FILE and PCCL_ENCRYPT=1 (Linux peers seal
 *              with OpenSSL, Windows ones with libsodium: the same cipher and records); the mixed
 *              ring's all-reduces bit-identical, then the shared-state exchange of `shared`
 *              (sealed transfers both ways); a Windows peer with another secret is refused. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/allreduce/ar_driver.h"
#include "tests/allreduce/ar_ref.h"
#include "tests/common/check.h"
#include "tests/shared_state/ss_util.h"

static const char *linux_master, *linux_ar, *linux_ss;
static char win_master[512], win_ar[512], win_ss[512]; /* wrapper scripts: exec wine X.exe "$@" */
static char tmpdir[] = "/tmp/win_mixed_test.XXXXXX";
static bool finished; /* the mode ran to its end (else the master's log is shown) */

static void remove_tmp(void) {
    char cmd[600];
    if (!finished || check_failures > 0) { /* the Windows master's log, which its wrapper kept */
        snprintf(cmd, sizeof cmd, "tail -n 30 '%s'/*.log 2>/dev/null", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "win_mixed_test: no logs of the Windows programs\n");
    }
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "win_mixed_test: could not remove %s\n", tmpdir);
}

/* A script that runs exe under wine in its own process (exec: the pid is the Windows process's,
 * so SIGKILL and SIGINT reach it). */
/* Its stderr goes to TMPDIR/LOG.PID.log, shown when the test fails. */
static void wrapper(char *out, size_t n, const char *name, const char *exe, const char *log) {
    snprintf(out, n, "%s/%s", tmpdir, name);
    FILE *f = fopen(out, "w");
    REQUIRE(f != NULL);
    fprintf(f, "#!/bin/sh\nexec wine '%s' \"$@\" 2>>'%s/%s'.$$.log\n", exe, tmpdir, log);
    fclose(f);
    REQUIRE(chmod(out, 0755) == 0);
}

static bool run_one(ard_t *a, int dtype, int op, size_t count, int kind, int inplace, int timeout_ms) {
    ard_result_t r[ARD_MAX];
    REQUIRE(ard_post(a, dtype, op, count, kind, inplace));
    bool ok = ard_collect(a, r, timeout_ms);
    for (int i = 0; i < a->n && ok; i++) {
        uint64_t tx, rx;
        ar_ring_bytes(count, ar_dtype_size(dtype), (uint32_t) a->n, (uint32_t) i, &tx, &rx);
        bool good = r[i].res == 0 && r[i].check == 0 && r[i].hash == r[0].hash && r[i].world == (uint32_t) a->n &&
                    r[i].tx == tx && r[i].rx == rx;
        if (!good) {
            fprintf(stderr,
                    "FAIL n=%d dtype=%d op=%d count=%zu kind=%d peer %d: result %d check %d hash %016" PRIx64
                    " (peer 0: %016" PRIx64 ") world %u tx %" PRIu64 " (want %" PRIu64 ") rx %" PRIu64 " (want %" PRIu64
                    ")\n",
                    a->n, dtype, op, count, kind, i, r[i].res, r[i].check, r[i].hash, r[0].hash, r[i].world, r[i].tx,
                    tx, r[i].rx, rx);
            ok = false;
        }
    }
    CHECK(ok);
    return ok;
}

static bool is_win[ARD_MAX]; /* of ard_t's peers[], kept in step by add() and drop() */

static void add(ard_t *a, bool win) {
    a->peer_bin = win ? win_ar : linux_ar;
    is_win[a->n] = win;
    REQUIRE(ard_add_peer(a));
}

static void drop(ard_t *a, int i) {
    for (int k = i; k + 1 < a->n; k++) is_win[k] = is_win[k + 1];
    ard_drop(a, i);
}

/* A killed wine process's sockets may outlive it by up to the master's heartbeat timeout (wine's
 * server holds them until it has cleaned up after the process; Windows' kernel closes them at
 * once): the mixed rings run with a 3 s heartbeat timeout, so that such a kill is noticed soon. */
#define HEARTBEAT_MS 3000

/* The Linux master's options: the heartbeat timeout (mixed rings), and in `secure` the secret. */
static const char *mixed_extra[8] = {"--heartbeat-timeout-ms", "3000", NULL};
static const char *const *shared_extra = NULL;

/* A Linux master and the ring Linux, Windows, Linux, Windows. */
static void start_mixed(ard_t *a) {
    const char *const *extra = mixed_extra;
    memset(a, 0, sizeof *a);
    a->next_seed = a->next_tag = 1;
    h_stderr_path = "/dev/null"; /* the master's info log */
    a->port = h_start_master(&a->master, linux_master, extra);
    REQUIRE(a->port > 0);
    for (int i = 0; i < 4; i++) add(a, i % 2 == 1);
}

static int allreduce(void) {
    ard_t a;
    uint64_t t0 = ard_now_us();
    start_mixed(&a);
    fprintf(stderr, "allreduce: ring of 2 Linux + 2 Windows peers up in %.1f s\n", (double) (ard_now_us() - t0) / 1e6);
    const size_t sizes[] = {1, 7, 1000, 65537};
    int ops = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int d = 0; d < 12; d++)
            for (int op = 0; op < 5; op++) {
                REQUIRE(run_one(&a, d, op, sizes[s], AR_EXACT, (int) ((s + (size_t) d + (size_t) op) & 1), 60000));
                ops++;
                /* Floats again with random values: the result follows the ring's order, and every
                 * platform must round each step the same way. */
                if (d >= pcclFloat16 && op != pcclMax && op != pcclMin && s >= 2) {
                    REQUIRE(run_one(&a, d, op, sizes[s], AR_RANDOM, (int) (s & 1), 60000));
                    ops++;
                }
            }
    REQUIRE(run_one(&a, pcclFloat, pcclSum, (16u << 20) / 4, AR_RANDOM, 0, 120000));
    REQUIRE(run_one(&a, pcclDouble, pcclAvg, (16u << 20) / 8 + 1, AR_RANDOM, 1, 120000));
    ops += 2;
    ard_stop(&a);
    fprintf(stderr, "allreduce: %d all-reduces, bit-identical on all 4, in %.1f s\n", ops,
            (double) (ard_now_us() - t0) / 1e6);
    return check_exit();
}

static int kill_trials(void) {
    const size_t count = (16u << 20) / 4;
    ard_t a;
    start_mixed(&a);
    uint64_t dur = 0;
    for (int i = 0; i < 3; i++) {
        ard_result_t r[ARD_MAX];
        REQUIRE(ard_post(&a, pcclFloat, pcclSum, count, AR_EXACT, 0) && ard_collect(&a, r, 60000));
        REQUIRE(r[0].res == 0 && r[0].check == 0);
        if (i == 0 || r[0].call_us < dur) dur = r[0].call_us;
    }
    fprintf(stderr, "kill: one 16 MiB all-reduce among 2 Linux + 2 Windows takes %.1f ms\n", (double) dur / 1e3);
    srand(4242);
    int failed = 0;
    for (int t = 0; t < 3; t++) {
        int victim = -1; /* the last Windows peer of the ring */
        for (int i = a.n - 1; i >= 0 && victim < 0; i--)
            if (is_win[i]) victim = i;
        REQUIRE(victim >= 0);
        REQUIRE(ard_post_go(&a, pcclFloat, pcclSum, count, AR_EXACT, 0));
        usleep((useconds_t) ((uint64_t) rand() % (dur / 2 + 1)));
        h_kill(&a.peers[victim], SIGKILL);
        uint64_t t_kill = ard_now_us();
        drop(&a, victim);
        ard_result_t r[ARD_MAX];
        REQUIRE(ard_collect(&a, r, 15000));
        uint64_t latency = 0;
        for (int i = 0; i < a.n; i++) {
            CHECK(r[i].res == r[0].res); /* a shared outcome */
            if (r[i].end_us > t_kill && r[i].end_us - t_kill > latency) latency = r[i].end_us - t_kill;
        }
        if (r[0].res == 0) {
            for (int i = 0; i < a.n; i++) CHECK(r[i].check == 0);
        } else {
            failed++;
            CHECK(latency < (HEARTBEAT_MS + 2000) * 1000ull); /* at once, or by the master's heartbeat timeout */
        }
        fprintf(stderr, "kill: trial %d: Windows peer %d killed, survivors %s after %.1f ms\n", t, victim,
                r[0].res == 0 ? "had finished" : "failed together", (double) latency / 1e3);
        bool up = false;
        for (int i = 0; i < 3 && !up; i++) up = ard_update(&a);
        REQUIRE(up);
        REQUIRE(run_one(&a, pcclFloat, pcclSum, count, AR_EXACT, 0, 60000)); /* the retry with 3 */
        add(&a, true); /* a new Windows peer restores 4 */
        REQUIRE(run_one(&a, pcclInt32, pcclSum, 100003, AR_EXACT, 1, 60000));
    }
    ard_stop(&a);
    CHECK(failed >= 1);
    return check_exit();
}

static int shared(void) {
    char line[256];
    h_proc_t m, peer[4];
    h_stderr_path = "/dev/null";
    int port = h_start_master(&m, linux_master, shared_extra);
    REQUIRE(port > 0);
    ss_start_peers(peer, 2, linux_ss, port);
    h_proc_t *p[4] = {&peer[0], &peer[1], &peer[2], &peer[3]};
    ss_sync_t r[4];
    for (int i = 0; i < 2; i++) REQUIRE(ss_cmd(p[i], line, sizeof line, "tensors 5 %llu 7", 1048576ull + 4) == 0);
    ss_sync_all(p, 2, NULL, r);
    /* A Windows newcomer with zeros receives every tensor. */
    REQUIRE(h_start_peer(&peer[2], win_ss, port, 0));
    ss_admit(&peer[0], 2, &peer[2], 1);
    REQUIRE(ss_cmd(p[2], line, sizeof line, "tensors 5 %llu 0", 1048576ull + 4) == 0);
    for (int i = 0; i < 2; i++) ss_cmd(p[i], line, sizeof line, "bump");
    ss_sync_all(p, 3, NULL, r);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_U64(r[i].result, 0);
        CHECK_EQ_U64(r[i].revision, 1);
    }
    CHECK_EQ_U64(r[2].rx, 5 * (1048576ull + 4));
    CHECK_EQ_U64(r[2].tx, 0);
    CHECK_EQ_U64(ss_cmd(p[2], line, sizeof line, "check 7"), 0);
    CHECK(ss_same_hash(p, 3));
    fprintf(stderr, "shared: the Windows newcomer received 5 MiB in %llu ms\n", r[2].ms);
    /* The Windows peer alone offers content (seed 9, SEND_ONLY; the others only receive, which
     * PCCL's rule allows beside SEND_ONLY, not beside ENFORCE_POPULAR): a Linux newcomer with
     * zeros and the two Linux peers get it from there. */
    REQUIRE(h_start_peer(&peer[3], linux_ss, port, 0));
    ss_admit(&peer[0], 3, &peer[3], 1);
    REQUIRE(ss_cmd(p[3], line, sizeof line, "tensors 5 %llu 0", 1048576ull + 4) == 0);
    for (int t = 0; t < 5; t++) REQUIRE(ss_cmd(p[2], line, sizeof line, "fill %d 9", t) == 0);
    for (int i = 0; i < 3; i++) ss_cmd(p[i], line, sizeof line, "bump");
    int strategy[4] = {PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY, PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY,
                       PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY, PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY};
    ss_sync_all(p, 4, strategy, r);
    for (int i = 0; i < 4; i++) CHECK_EQ_U64(r[i].result, 0);
    CHECK_EQ_U64(r[2].rx, 0);
    CHECK_EQ_U64(r[2].tx, 3 * 5 * (1048576ull + 4));
    for (int i = 0; i < 4; i++) CHECK_EQ_U64(ss_cmd(p[i], line, sizeof line, "check 9"), 0);
    CHECK(ss_same_hash(p, 4));
    for (int i = 0; i < 4; i++) ss_quit(p[i]);
    h_kill(&m, SIGTERM);
    h_wait(&m, 5000);
    return check_exit();
}

static int master(void) {
    ard_t a;
    uint64_t t0 = ard_now_us();
    REQUIRE(ard_start(&a, win_master, linux_ar, 3));
    fprintf(stderr, "master: pccl-master.exe admitted 3 Linux peers in %.1f s\n", (double) (ard_now_us() - t0) / 1e6);
    for (int d = 0; d < 12; d += 3) REQUIRE(run_one(&a, d, pcclSum, 300007, AR_EXACT, 0, 60000));
    REQUIRE(run_one(&a, pcclFloat, pcclAvg, (16u << 20) / 4, AR_RANDOM, 1, 120000));
    /* A peer killed in the middle of an all-reduce: the master sees the connection drop, the
     * others fail (or had finished) together and retry with 2. */
    REQUIRE(ard_post_go(&a, pcclFloat, pcclSum, (16u << 20) / 4, AR_EXACT, 0));
    h_kill(&a.peers[1], SIGKILL);
    ard_drop(&a, 1);
    ard_result_t r[ARD_MAX];
    REQUIRE(ard_collect(&a, r, 15000));
    CHECK(r[0].res == r[1].res);
    bool up = false;
    for (int i = 0; i < 10 && !up; i++) up = ard_update(&a);
    REQUIRE(up);
    REQUIRE(run_one(&a, pcclFloat, pcclSum, (16u << 20) / 4, AR_EXACT, 0, 60000));
    REQUIRE(ard_add_peer(&a));
    REQUIRE(run_one(&a, pcclUint8, pcclMax, 1000003, AR_EXACT, 1, 60000));
    /* Ctrl-C: the peers leave first, then SIGINT to the wine process. */
    for (int i = 0; i < a.n; i++) h_send(&a.peers[i], "quit");
    for (int i = 0; i < a.n; i++) CHECK_EQ_U64(h_wait(&a.peers[i], 10000), 0);
    h_kill(&a.master, SIGINT);
    int st = h_wait(&a.master, 15000);
    fprintf(stderr, "master: pccl-master.exe exited with %d after Ctrl-C\n", st);
    CHECK_EQ_U64(st, 0);
    return check_exit();
}

static int secure(void) {
    char secret[600], other[600];
    snprintf(secret, sizeof secret, "%s/run.secret", tmpdir);
    snprintf(other, sizeof other, "%s/other.secret", tmpdir);
    FILE *f = fopen(secret, "w");
    REQUIRE(f != NULL);
    fprintf(f, "win-mixed-test-secret-0123456789abcdef\n");
    fclose(f);
    f = fopen(other, "w");
    REQUIRE(f != NULL);
    fprintf(f, "not-the-run-secret-0123456789abcdef\n");
    fclose(f);
    REQUIRE(chmod(secret, 0600) == 0 && chmod(other, 0600) == 0);
    /* The peers (Linux and wine) inherit these; wine maps the absolute path to its Z: drive. */
    setenv("PCCL_SECRET_FILE", secret, 1);
    setenv("PCCL_ENCRYPT", "1", 1);
    mixed_extra[2] = "--secret-file";
    mixed_extra[3] = secret;
    mixed_extra[4] = "--encrypt";
    mixed_extra[5] = NULL;
    ard_t a;
    uint64_t t0 = ard_now_us();
    start_mixed(&a);
    fprintf(stderr, "secure: sealed ring of 2 Linux + 2 Windows peers up in %.1f s\n",
            (double) (ard_now_us() - t0) / 1e6);
    REQUIRE(run_one(&a, pcclFloat, pcclSum, 1, AR_EXACT, 0, 60000));
    REQUIRE(run_one(&a, pcclFloat, pcclSum, 65537, AR_RANDOM, 1, 60000));
    REQUIRE(run_one(&a, pcclInt32, pcclMax, 1000003, AR_EXACT, 0, 60000));
    REQUIRE(run_one(&a, pcclFloat, pcclSum, (16u << 20) / 4, AR_RANDOM, 0, 120000));
    REQUIRE(run_one(&a, pcclDouble, pcclAvg, (16u << 20) / 8 + 1, AR_RANDOM, 1, 120000));
    fprintf(stderr, "secure: 5 sealed all-reduces bit-identical on all 4 after %.1f s\n",
            (double) (ard_now_us() - t0) / 1e6);
    /* A Windows peer with another secret: the master refuses it, the ring stays at 4. */
    h_proc_t stranger;
    char port[16], line[256];
    snprintf(port, sizeof port, "%d", a.port);
    char *argv[] = {win_ar, port, NULL};
    setenv("PCCL_SECRET_FILE", other, 1);
    REQUIRE(h_spawn(&stranger, argv));
    setenv("PCCL_SECRET_FILE", secret, 1);
    int res = h_call(&stranger, "connect", line, sizeof line, 60000);
    fprintf(stderr, "secure: a Windows peer with another secret: pcclConnect -> %d (%s)\n", res, line);
    CHECK_EQ_U64(res, 6); /* pcclMasterConnectionFailed, as tests/security:secret_test expects on Linux */
    h_send(&stranger, "quit");
    h_wait(&stranger, 10000);
    REQUIRE(run_one(&a, pcclFloat, pcclSum, 4099, AR_EXACT, 1, 60000));
    ard_stop(&a);
    shared_extra = (const char *const *) mixed_extra;
    if (check_failures > 0) return check_exit();
    return shared();
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: win_mixed_test allreduce|kill|shared|master|secure LINUX_MASTER LINUX_AR_PEER LINUX_SS_PEER WIN_DIR\n");
        return 2;
    }
    linux_master = argv[2];
    linux_ar = argv[3];
    linux_ss = argv[4];
    h_init(300);
    REQUIRE(mkdtemp(tmpdir) != NULL);
    atexit(remove_tmp);
    char exe[512];
    snprintf(exe, sizeof exe, "%s/bin/pccl-master.exe", argv[5]);
    wrapper(win_master, sizeof win_master, "pccl-master-win", exe, "master");
    snprintf(exe, sizeof exe, "%s/tests/ar_peer.exe", argv[5]);
    wrapper(win_ar, sizeof win_ar, "ar_peer-win", exe, "ar_peer");
    snprintf(exe, sizeof exe, "%s/tests/ss_peer.exe", argv[5]);
    wrapper(win_ss, sizeof win_ss, "ss_peer-win", exe, "ss_peer");
    int (*mode)(void) = strcmp(argv[1], "allreduce") == 0 ? allreduce
                        : strcmp(argv[1], "kill") == 0    ? kill_trials
                        : strcmp(argv[1], "shared") == 0  ? shared
                        : strcmp(argv[1], "master") == 0  ? master
                        : strcmp(argv[1], "secure") == 0  ? secure
                                                          : NULL;
    if (mode == NULL) {
        fprintf(stderr, "win_mixed_test: unknown mode %s\n", argv[1]);
        return 2;
    }
    int rc = mode();
    finished = true;
    return rc;
}
