/* The collective watchdog end to end: the real pccl-master and wd_peer processes.
 * Usage: wd_test MODE MASTER_BIN PEER_BIN, MODE one of
 *   misuse  2 peers, timeout 500 ms: an all-reduce against pcclArePeersPending, against an
 *           all-reduce of another tag, against a silent peer: nobody hangs, the all-reduce gets
 *           pcclCollectiveTimeout, the vote pcclInvalidUsage; then exact all-reduces. A shared-
 *           state sync against a silent peer and against an all-reduce: pcclCollectiveTimeout
 *           on both sides, nothing synced; then syncs at the same revision succeed.
 *   stall   3 peers, timeout 500 ms, master heartbeat timeout 60 s (so only the watchdog can
 *           notice): one peer SIGSTOPs itself mid-ring; both others return pcclCollectiveTimeout
 *           within timeout + slack; after SIGCONT it returns the same; after pcclUpdateTopology
 *           the three all-reduce exactly.
 *   slow    3 peers, timeout 400 ms (1000 under a sanitizer) set through
 *           pcclSetCollectiveTimeout: a 64 MiB all-reduce (16 MiB under a sanitizer) that one
 *           peer slows down (SIGSTOP 100 ms, 250 under a sanitizer / SIGCONT 20 ms, over and
 *           over) takes more than the timeout in all, yet progresses: it succeeds, exactly.
 *           (A run window in which a loaded machine moves nothing is no progress indeed: 400 ms
 *           leaves room for two such windows in a row.) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define MAXP 3
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
/* A sanitized ring drains the megabytes already in its sockets 5-10 times slower, and each of those
 * sub-chunks is progress: CI's TSan run, beside stripe_group_test, saw the survivors' watchdog fire
 * 2.5 s after the stop (timeout 500 ms). */
#define SLACK_MS 4000
#define SLOW_COUNT (4u << 20) /* 16 MiB of float32: a sanitizer slows the ring 5-10 times already */
/* ... and, with other sanitized tests beside it, the slowed peer's 20 ms run windows may get no
 * CPU for 400 ms (a TSan run next to ss_big_test timed out so): sanitized runs allow 1000 ms,
 * with stops of 250 ms (the same ratio), which also keep the ring longer than the timeout. */
#define SLOW_TIMEOUT_MS 1000
#define SLOW_STOP_MS 250
#else
#define SLACK_MS 1500 /* sampling period, the master's round trip */
#define SLOW_COUNT (16u << 20) /* 64 MiB of float32 */
#define SLOW_TIMEOUT_MS 400
#define SLOW_STOP_MS 100
#endif
#define STR_(x) #x
#define STR(x) STR_(x)

static const char *master_bin, *peer_bin;
static h_proc_t master, peers[MAXP];
static int port, npeers;

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Reads one line of peer i starting with `word`. */
static bool read_word(int i, const char *word, char *line, size_t n, int timeout_ms) {
    if (!h_read_line(&peers[i], line, n, timeout_ms)) {
        fprintf(stderr, "wd_test: no '%s' line from peer %d\n", word, i);
        return false;
    }
    if (strncmp(line, word, strlen(word)) != 0) {
        fprintf(stderr, "wd_test: peer %d said '%s' (wanted '%s ...')\n", i, line, word);
        return false;
    }
    return true;
}

/* Spawns peer npeers and has the accepted ones vote it in. */
static bool add_peer(void) {
    char sport[16], sidx[16];
    snprintf(sport, sizeof sport, "%d", port);
    snprintf(sidx, sizeof sidx, "%d", npeers);
    char *argv[] = {(char *) peer_bin, sport, sidx, NULL};
    h_proc_t *p = &peers[npeers];
    if (!h_spawn(p, argv) || !h_send(p, "connect") || !h_admit(peers, npeers, p)) return false;
    npeers++;
    return true;
}

static bool start(int n, const char *const *master_args) {
    h_stderr_path = "/dev/null"; /* the master's info log */
    port = h_start_master(&master, master_bin, master_args);
    if (port <= 0) return false;
    for (int i = 0; i < n; i++)
        if (!add_peer()) return false;
    return true;
}

static void stop(void) {
    char line[128];
    for (int i = 0; i < npeers; i++) h_send(&peers[i], "quit");
    for (int i = 0; i < npeers; i++) {
        int fds = -1, threads = -1, base_fds = 0, base_threads = 0;
        if (read_word(i, "bye", line, sizeof line, 20000))
            sscanf(line, "bye %d %d %d %d", &fds, &threads, &base_fds, &base_threads);
        CHECK(fds >= 0 && fds <= base_fds && threads <= base_threads);
        h_wait(&peers[i], 10000);
    }
    npeers = 0;
    h_kill(&master, SIGTERM);
    h_wait(&master, 5000);
}

typedef struct ar_line {
    int r;
    long ms;
    unsigned long long bad, hash;
    long at; /* when the driver read it */
} ar_line_t;

static bool read_ar(int i, ar_line_t *a, int timeout_ms) {
    char line[256];
    memset(a, 0, sizeof *a);
    a->r = -999;
    if (!read_word(i, "ar", line, sizeof line, timeout_ms)) return false;
    a->at = now_ms();
    return sscanf(line, "ar %d %ld %llu %llx", &a->r, &a->ms, &a->bad, &a->hash) == 4;
}

/* Every peer all-reduces `tag` over all of them: success, exact, the same bytes everywhere. */
static void exact_all(unsigned tag, unsigned count) {
    char cmd[96];
    snprintf(cmd, sizeof cmd, "ar %u %u %u", tag, count, (1u << npeers) - 1);
    for (int i = 0; i < npeers; i++) CHECK(h_send(&peers[i], cmd));
    ar_line_t a[MAXP];
    for (int i = 0; i < npeers; i++) {
        CHECK(read_ar(i, &a[i], 30000));
        CHECK_EQ_U64(a[i].r, 0);
        CHECK_EQ_U64(a[i].bad, 0);
        CHECK(a[i].hash == a[0].hash);
    }
}

static void test_misuse(void) {
    setenv("PCCL_COLLECTIVE_TIMEOUT_MS", "500", 1);
    REQUIRE(start(2, NULL));
    char line[128];
    ar_line_t a;
    CHECK(h_call(&peers[0], "apicheck", line, sizeof line, 5000) == 0);

    /* A all-reduces while B asks whether peers are pending. */
    long t0 = now_ms();
    CHECK(h_send(&peers[0], "ar 1 4096 3") && h_send(&peers[1], "pending"));
    CHECK(read_ar(0, &a, 10000));
    CHECK_EQ_U64(a.r, 100); /* pcclCollectiveTimeout */
    CHECK(a.ms >= 500 && a.ms <= 500 + SLACK_MS);
    CHECK(read_word(1, "pending", line, sizeof line, 10000));
    int r = -1;
    long ms = -1;
    sscanf(line, "pending %d %ld", &r, &ms);
    CHECK_EQ_U64(r, 4); /* pcclInvalidUsage: the vote was refused */
    long both = now_ms() - t0;
    fprintf(stderr, "misuse: all-reduce vs pending: pcclCollectiveTimeout after %ld ms, vote refused after %ld ms (%ld ms for both)\n",
            a.ms, ms, both);
    CHECK(both <= 500 + SLACK_MS);
    CHECK(h_update_all(peers, npeers));
    exact_all(2, 100003);

    /* Two different tags: both time out; nothing ran, so the next all-reduce needs no update. */
    CHECK(h_send(&peers[0], "ar 3 4096 3") && h_send(&peers[1], "ar 4 4096 3"));
    ar_line_t b;
    CHECK(read_ar(0, &a, 10000) && read_ar(1, &b, 10000));
    CHECK(a.r == 100 && b.r == 100);
    CHECK(a.ms <= 500 + SLACK_MS && b.ms <= 500 + SLACK_MS);
    fprintf(stderr, "misuse: tags 3 vs 4: %ld and %ld ms\n", a.ms, b.ms);
    exact_all(5, 4096);

    /* A silent peer. */
    CHECK(h_send(&peers[0], "ar 6 4096 3"));
    CHECK(read_ar(0, &a, 10000));
    CHECK(a.r == 100 && a.ms >= 500 && a.ms <= 500 + SLACK_MS);
    exact_all(6, 4096);

    /* A shared-state sync against a silent peer: the master ends it with TIMEOUT. */
    CHECK(h_send(&peers[0], "ss 1"));
    CHECK(read_word(0, "ss", line, sizeof line, 10000));
    CHECK(sscanf(line, "ss %d %ld", &r, &ms) == 2);
    CHECK(r == 100 && ms >= 500 && ms <= 500 + SLACK_MS);
    fprintf(stderr, "misuse: shared-state sync vs a silent peer: %d after %ld ms\n", r, ms);
    /* ... and against an all-reduce: both sides time out. */
    CHECK(h_send(&peers[0], "ss 1") && h_send(&peers[1], "ar 7 4096 3"));
    CHECK(read_word(0, "ss", line, sizeof line, 10000) && read_ar(1, &a, 10000));
    CHECK(sscanf(line, "ss %d %ld", &r, &ms) == 2);
    CHECK(r == 100 && ms <= 500 + SLACK_MS && a.r == 100 && a.ms <= 500 + SLACK_MS);
    fprintf(stderr, "misuse: shared-state sync vs all-reduce: %d after %ld ms, %d after %ld ms\n", r, ms,
            (int) a.r, a.ms);
    /* Nothing was synced: revision 1 is still the one due, then 2. */
    for (int rev = 1; rev <= 2; rev++) {
        char cmd[32];
        snprintf(cmd, sizeof cmd, "ss %d", rev);
        CHECK(h_send(&peers[0], cmd) && h_send(&peers[1], cmd));
        for (int i = 0; i < 2; i++) {
            CHECK(read_word(i, "ss", line, sizeof line, 10000));
            CHECK(sscanf(line, "ss %d %ld", &r, &ms) == 2 && r == 0);
        }
    }
    exact_all(8, 4096);
    stop();
}

static char proc_state(pid_t pid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close = strrchr(buf, ')');
    return close != NULL && close[1] == ' ' ? close[2] : '?';
}

static void test_stall(void) {
    setenv("PCCL_COLLECTIVE_TIMEOUT_MS", "500", 1);
    const char *margs[] = {"--heartbeat-timeout-ms", "60000", NULL};
    REQUIRE(start(3, margs));
    const unsigned count = 4u << 20; /* 16 MiB of float32 */
    char cmd[96], line[128];
    snprintf(cmd, sizeof cmd, "ar 10 %u 7", count);
    CHECK(h_send(&peers[0], cmd) && h_send(&peers[1], cmd));
    snprintf(cmd, sizeof cmd, "arstop 10 %u 7 8", count);
    CHECK(h_send(&peers[2], cmd));
    REQUIRE(read_word(2, "stopping", line, sizeof line, 20000));
    long t_stop = now_ms();
    for (int i = 0; i < 200 && proc_state(peers[2].pid) != 'T'; i++) sleep_ms(5);
    CHECK(proc_state(peers[2].pid) == 'T');
    ar_line_t a[MAXP];
    long worst = 0;
    for (int i = 0; i < 2; i++) {
        CHECK(read_ar(i, &a[i], 10000));
        CHECK_EQ_U64(a[i].r, 100);
        long after = a[i].at - t_stop;
        if (after > worst) worst = after;
    }
    fprintf(stderr, "stall: both survivors returned pcclCollectiveTimeout %ld ms after the stop (timeout 500 ms)\n",
            worst);
    CHECK(worst <= 500 + SLACK_MS);
    h_kill(&peers[2], SIGCONT);
    CHECK(read_ar(2, &a[2], 10000));
    CHECK_EQ_U64(a[2].r, 100);
    fprintf(stderr, "stall: the stalled peer returned pcclCollectiveTimeout %ld ms after SIGCONT\n", a[2].ms);
    CHECK(h_update_all(peers, npeers));
    exact_all(11, count);
    stop();
}

static void test_slow(void) {
    unsetenv("PCCL_COLLECTIVE_TIMEOUT_MS");
    REQUIRE(start(3, NULL));
    char line[128];
    for (int i = 0; i < npeers; i++) CHECK(h_call(&peers[i], "timeout " STR(SLOW_TIMEOUT_MS), line, sizeof line, 5000) == 0);
    const unsigned count = SLOW_COUNT;
    char cmd[96];
    snprintf(cmd, sizeof cmd, "ar 20 %u 7", count);
    CHECK(h_send(&peers[0], cmd) && h_send(&peers[2], cmd));
    /* Slow it down only once the ring runs: waiting for a member to call it is no progress. */
    snprintf(cmd, sizeof cmd, "armove 20 %u 7 1", count);
    CHECK(h_send(&peers[1], cmd));
    REQUIRE(read_word(1, "moving", line, sizeof line, 30000));
    ar_line_t a[MAXP];
    bool got[MAXP] = {false, false, false};
    int left = 3, cycles = 0;
    long t0 = now_ms(), t_end = t0;
    while (left > 0 && now_ms() - t0 < 60000) {
        h_kill(&peers[1], SIGSTOP);
        sleep_ms(SLOW_STOP_MS);
        h_kill(&peers[1], SIGCONT);
        cycles++;
        long run_until = now_ms() + 20;
        for (int i = 0; i < npeers; i++) {
            if (got[i]) continue;
            if (h_read_line(&peers[i], line, sizeof line, 1)) {
                got[i] = true;
                left--;
                t_end = now_ms();
                a[i].r = -999;
                sscanf(line, "ar %d %ld %llu %llx", &a[i].r, &a[i].ms, &a[i].bad, &a[i].hash);
            }
        }
        long rest = run_until - now_ms();
        if (rest > 0) sleep_ms(rest);
    }
    h_kill(&peers[1], SIGCONT);
    CHECK_EQ_U64(left, 0);
    for (int i = 0; i < npeers && left == 0; i++) {
        CHECK_EQ_U64(a[i].r, 0);
        CHECK_EQ_U64(a[i].bad, 0);
        CHECK(a[i].hash == a[0].hash);
    }
    long ring_ms = t_end - t0;
    fprintf(stderr, "slow: the %u MiB ring ran %ld ms under %d stop/continue cycles, timeout %d ms: no false positive\n",
            count >> 18, ring_ms, cycles, SLOW_TIMEOUT_MS);
    CHECK(ring_ms > SLOW_TIMEOUT_MS); /* it outlasted the timeout: a total-duration timer would have fired */
    stop();
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: wd_test misuse|stall|slow MASTER_BIN PEER_BIN\n");
        return 2;
    }
    h_init(120);
    master_bin = argv[2];
    peer_bin = argv[3];
    if (strcmp(argv[1], "misuse") == 0) test_misuse();
    else if (strcmp(argv[1], "stall") == 0) test_stall();
    else if (strcmp(argv[1], "slow") == 0) test_slow();
    else return 2;
    return check_exit();
}
