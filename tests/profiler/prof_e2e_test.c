/* prof_e2e_test: the profiler plugin end to end: the real pccl-master and prof_peer processes.
 * Usage: prof_e2e_test CASE MASTER PEER TESTPROF EMPTY V2 NOSYM DOC STATIC_PEER
 *   e2e:   3 peers with libtestprof.so: sync, async, quantized all-reduces, a shared-state sync
 *          with a transfer, then a SIGKILLed peer mid-loop; the plugin finds no error, every
 *          event is stopped, transfer bytes equal pcclReduceInfo_t, aborts say "peer lost".
 *   pool:  3 peers with a pool of 4 streams, 8 async all-reduces at once, same checks.
 *   load:  a missing file, a library without the symbol, one of version 2, an init that fails:
 *          one warning each, and the all-reduce still works.
 *   trace: PCCL_TRACE_FILE alone: 1,000 all-reduces with bounded memory; the JSON parses
 *          (python3 -m json.tool) and holds the expected events (trace_check.py).
 *   stats: PCCL_PROFILER_PLUGIN=stats prints its table at destroy.
 *   doc:   the example plugin of docs/profiler.md (DOC) counts 20 all-reduces and their bytes.
 *   static: PCCL_PROFILER_PLUGIN=STATIC_PLUGIN finds the test plugin inside STATIC_PEER. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

/* The loop's head start before a peer is killed: under a sanitizer on a loaded machine one
 * all-reduce of 1 MiB may take longer than the plain build's 400 ms (seen in CI under TSan). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define HEAD_START_MS 3000
#else
#define HEAD_START_MS 400
#endif

static const char *master_bin, *peer_bin;
static h_proc_t master, peers[4];
static int port, npeers;
static char tmpdir[256];

static bool add_peer(int i, int pool, const char *stderr_path) {
    char sport[16], sidx[16], spool[16];
    snprintf(sport, sizeof sport, "%d", port);
    snprintf(sidx, sizeof sidx, "%d", i);
    snprintf(spool, sizeof spool, "%d", pool);
    char *argv[] = {(char *) peer_bin, sport, sidx, spool, NULL};
    h_stderr_path = stderr_path;
    if (!h_spawn(&peers[i], argv) || !h_send(&peers[i], "connect") || !h_admit(peers, npeers, &peers[i])) return false;
    npeers++;
    return true;
}

static bool start(int n, int pool, const char *stderr_path) {
    npeers = 0;
    h_stderr_path = "/dev/null";
    port = h_start_master(&master, master_bin, NULL);
    if (port <= 0) return false;
    for (int i = 0; i < n; i++)
        if (!add_peer(i, pool, stderr_path)) return false;
    return true;
}

static void stop(void) {
    for (int i = 0; i < npeers; i++) {
        char line[512];
        h_send(&peers[i], "quit");
        CHECK(h_read_line(&peers[i], line, sizeof line, 20000));
        /* bye E O I F ...: no error, nothing open, one init, one finalize */
        unsigned long long e = 9, o = 9, in = 0, f = 0;
        if (strcmp(line, "bye none") != 0) {
            CHECK(sscanf(line, "bye %llu %llu %llu %llu", &e, &o, &in, &f) == 4);
            if (e != 0 || o != 0 || in != 1 || f != 1) fprintf(stderr, "peer %d: %s\n", i, line);
            CHECK(e == 0 && o == 0 && in == 1 && f == 1);
        }
        h_wait(&peers[i], 10000);
    }
    npeers = 0;
    h_kill(&master, SIGTERM);
    h_wait(&master, 5000);
}

/* Sends cmd to peers [0, n) and reads each one's answer into lines[i]. */
static void all(int n, const char *cmd, char lines[][512], int timeout_ms) {
    for (int i = 0; i < n; i++) CHECK(h_send(&peers[i], cmd));
    for (int i = 0; i < n; i++) CHECK(h_read_line(&peers[i], lines[i], 512, timeout_ms));
}

/* Without the test plugin: the result only. */
static void check_ar_plain(int n) {
    char lines[4][512];
    all(n, "ar 7 10007 3", lines, 30000);
    for (int i = 0; i < n; i++) {
        if (strncmp(lines[i], "ar 0 0 ", 7) != 0) fprintf(stderr, "peer %d: %s\n", i, lines[i]);
        CHECK(strncmp(lines[i], "ar 0 0 ", 7) == 0);
    }
}

static void check_ar(int n, uint64_t tag, size_t count, unsigned mask) {
    char cmd[64], lines[4][512];
    snprintf(cmd, sizeof cmd, "ar %llu %zu %x", (unsigned long long) tag, count, mask);
    all(n, cmd, lines, 30000);
    for (int i = 0; i < n; i++) {
        int r = -1;
        unsigned long long bad = 1, tx = 0, rx = 0, ptx = 1, prx = 1, stx = 1, srx = 1, ph = 0;
        CHECK(sscanf(lines[i], "ar %d %llu %llu %llu %llu %llu %llu %llu %llu", &r, &bad, &tx, &rx, &ptx, &prx, &stx,
                     &srx, &ph) == 9);
        if (r != 0 || bad || tx != ptx || rx != prx || tx != stx || rx != srx || ph != 31 || tx == 0)
            fprintf(stderr, "peer %d: %s\n", i, lines[i]);
        CHECK(r == 0 && bad == 0 && tx > 0 && tx == ptx && rx == prx && tx == stx && rx == srx && ph == 31);
    }
}

/* query: E O I F started[0..8] tensorbytes aborted[1..5] */
static void query(int i, unsigned long long v[19]) {
    char line[512];
    CHECK(h_send(&peers[i], "query"));
    CHECK(h_read_line(&peers[i], line, sizeof line, 10000));
    int n = sscanf(line, "query %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
                   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12],
                   &v[13], &v[14], &v[15], &v[16], &v[17], &v[18]);
    if (n != 19 || v[0] != 0) fprintf(stderr, "peer %d: %s\n", i, line);
    CHECK(n == 19 && v[0] == 0);
}

static void case_e2e(void) {
    setenv("PCCL_BENCH_MS", "50", 1); /* the master's bandwidth measurements (pcclOptimizeTopology) */
    REQUIRE(start(3, 1, NULL));
    check_ar(3, 1, 100003, 7);
    char lines[4][512];
    all(3, "async 4 10 50000 7", lines, 30000);
    for (int i = 0; i < 3; i++) {
        if (strcmp(lines[i], "async 0 0 0") != 0) fprintf(stderr, "peer %d: %s\n", i, lines[i]);
        CHECK(strcmp(lines[i], "async 0 0 0") == 0);
    }
    all(3, "quant 40 200000", lines, 30000);
    char hash0[32] = "";
    for (int i = 0; i < 3; i++) {
        int r = -1;
        char hash[32];
        unsigned long long tx = 0, ptx = 1, rx = 0, prx = 1, q = 0;
        CHECK(sscanf(lines[i], "quant %d %31s %llu %llu %llu %llu %llu", &r, hash, &tx, &ptx, &rx, &prx, &q) == 7);
        CHECK(r == 0 && tx > 0 && tx == ptx && rx == prx && q == 1);
        CHECK(tx < 200000ull * 4 * 2 * 2 / 3 / 3); /* quantized: about a quarter of the float bytes */
        if (i == 0) strcpy(hash0, hash);
        CHECK(strcmp(hash, hash0) == 0);
    }
    /* Shared state: peer 2 differs and fetches the popular content from another peer. */
    const size_t bytes = 3 << 20;
    for (int i = 0; i < 3; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "sync %d %zu", i == 2 ? 9 : 5, bytes);
        CHECK(h_send(&peers[i], cmd));
    }
    for (int i = 0; i < 3; i++) {
        int r = -1;
        unsigned long long tx, rx, bad = 1;
        unsigned v = 0;
        CHECK(h_read_line(&peers[i], lines[i], 512, 30000));
        CHECK(sscanf(lines[i], "sync %d %llu %llu %llu %u", &r, &tx, &rx, &bad, &v) == 5);
        CHECK(r == 0 && bad == 0 && v == 5);
        CHECK(rx == (i == 2 ? bytes : 0));
    }
    for (int i = 0; i < 3; i++) {
        unsigned long long v[19];
        query(i, v);
        CHECK(v[1] == 0);                 /* nothing open */
        CHECK(v[4] >= 6 && v[5] >= 6);    /* API calls, collectives */
        CHECK(v[6] >= 6 * 4 && v[7] > 0); /* phases, transfers */
        CHECK(v[8] == 1 && v[10] == 1);   /* one sync, hashed once */
        CHECK(v[9] == (i == 2 ? 1u : 0u) && v[13] == (i == 2 ? bytes : 0)); /* the fetched tensor */
        CHECK(v[11] >= 1);                /* topology rounds (admission) */
        CHECK(v[12] == 0);
    }
    /* pcclOptimizeTopology: bandwidth measurements (and a round when the ring changes). */
    all(3, "optimize", lines, 60000);
    for (int i = 0; i < 3; i++) {
        if (strcmp(lines[i], "optimize 0") != 0) fprintf(stderr, "peer %d: %s\n", i, lines[i]);
        CHECK(strcmp(lines[i], "optimize 0") == 0);
        unsigned long long v[19];
        query(i, v);
        CHECK(v[1] == 0 && v[12] >= 1); /* nothing open; measured at least one peer */
    }
    check_ar(3, 50, 30011, 7);
    /* A peer SIGKILLed mid-loop: the survivors' collectives end aborted, reason peer lost. */
    all(3, "rss", lines, 5000);
    for (int i = 0; i < 3; i++) CHECK(h_send(&peers[i], "loop 100000 1000 262144"));
    usleep(HEAD_START_MS * 1000); /* some all-reduces complete before the kill */
    h_kill(&peers[2], SIGKILL);
    h_wait(&peers[2], 5000);
    npeers = 2;
    for (int i = 0; i < 2; i++) {
        unsigned long long ok = 0;
        int err = 0;
        CHECK(h_read_line(&peers[i], lines[i], 512, 60000));
        CHECK(sscanf(lines[i], "loop %llu %d", &ok, &err) == 2);
        if (err != 8 || ok == 0) fprintf(stderr, "peer %d: %s\n", i, lines[i]);
        CHECK(err == 8 /* pcclRankConnectionLost */ && ok > 0);
        unsigned long long v[19];
        query(i, v);
        CHECK(v[1] == 0);
        if (v[14] < 1) fprintf(stderr, "peer %d: no event aborted with 'peer lost'\n", i);
        CHECK(v[14] >= 1 && v[15] == 0 && v[16] == 0);
    }
    stop();
}

static void case_pool(void) {
    REQUIRE(start(3, 4, NULL));
    char lines[4][512];
    all(3, "async 8 100 70001 7", lines, 30000);
    for (int i = 0; i < 3; i++) {
        if (strcmp(lines[i], "async 0 0 0") != 0) fprintf(stderr, "peer %d: %s\n", i, lines[i]);
        CHECK(strcmp(lines[i], "async 0 0 0") == 0);
    }
    check_ar(3, 200, 4099, 7);
    stop();
}

/* Lines of a file that contain `word`. */
static int count_lines(const char *path, const char *word) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    char line[2048];
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL) n += strstr(line, word) != NULL;
    fclose(f);
    return n;
}

static void case_load(const char *testprof, const char *v2, const char *nosym) {
    struct {
        const char *plugin, *init_fail, *expect;
    } cases[] = {
        {"/nonexistent/libnothing.so", NULL, "cannot load it"},
        {"nothing-here", NULL, "cannot load it"},
        {nosym, NULL, "exports no pcclProfiler_v1"},
        {v2, NULL, "speaks profiler version 2"},
        {testprof, "1", "init failed"},
        {"STATIC_PLUGIN", NULL, "exports no pcclProfiler_v1"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        setenv("PCCL_PROFILER_PLUGIN", cases[k].plugin, 1);
        if (cases[k].init_fail) setenv("TESTPROF_INIT_FAIL", "1", 1);
        else unsetenv("TESTPROF_INIT_FAIL");
        char log0[300], log1[300];
        snprintf(log0, sizeof log0, "%s/load%zu-0.log", tmpdir, k);
        snprintf(log1, sizeof log1, "%s/load%zu-1.log", tmpdir, k);
        npeers = 0;
        h_stderr_path = "/dev/null";
        port = h_start_master(&master, master_bin, NULL);
        CHECK(port > 0);
        CHECK(add_peer(0, 1, log0));
        CHECK(add_peer(1, 1, log1));
        check_ar_plain(2);
        stop();
        for (int i = 0; i < 2; i++) {
            const char *log = i ? log1 : log0;
            int warnings = count_lines(log, "profiler"), expected = count_lines(log, cases[k].expect);
            if (warnings != 1 || expected != 1) fprintf(stderr, "case %zu: %d profiler lines, %d '%s'\n", k, warnings, expected, cases[k].expect);
            CHECK(warnings == 1 && expected == 1);
        }
    }
    unsetenv("TESTPROF_INIT_FAIL");
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
static const bool sanitized = true;
#else
static const bool sanitized = false;
#endif

static void case_trace(const char *dir) {
    char pattern[400];
    snprintf(pattern, sizeof pattern, "%s/run-%%p.json", tmpdir);
    unsetenv("PCCL_PROFILER_PLUGIN");
    setenv("PCCL_TRACE_FILE", pattern, 1);
    /* The ring wraps within 1,000 ops (~22 events each). Plain builds use the default 16384: a
     * 4096-event ring lost events on a loaded CI box (a starved flusher). Sanitized builds run
     * ops several times slower and keep 4096, which wraps before the RSS check's first reading
     * (a larger ring showed sanitizer memory growing between the two readings). */
    setenv("PCCL_TRACE_BUFFER_EVENTS", sanitized ? "4096" : "16384", 1);
    REQUIRE(start(2, 1, NULL));
    char lines[4][512];
    /* 500 first: by then every handle of the pool was used once (and a sanitized run's ring wrapped). */
    all(2, "loop 500 1 4096", lines, 60000);
    for (int i = 0; i < 2; i++) CHECK(strcmp(lines[i], "loop 500 0") == 0);
    long rss0[2], rss1[2];
    all(2, "rss", lines, 5000);
    for (int i = 0; i < 2; i++) CHECK(sscanf(lines[i], "rss %ld", &rss0[i]) == 1);
    all(2, "loop 500 501 4096", lines, 120000);
    for (int i = 0; i < 2; i++) CHECK(strcmp(lines[i], "loop 500 0") == 0);
    all(2, "rss", lines, 5000);
    for (int i = 0; i < 2; i++) {
        CHECK(sscanf(lines[i], "rss %ld", &rss1[i]) == 1);
        fprintf(stderr, "trace: peer %d RSS %ld KiB after 500 all-reduces, %ld KiB after 1000\n", i, rss0[i], rss1[i]);
        /* Bounded: the ring and the handles are preallocated. Unbounded buffering would add ~2.6 MiB
         * (11,000 events of 240 bytes) per 500 all-reduces; sanitizers' shadow memory adds some. */
        CHECK(rss1[i] - rss0[i] < (sanitized ? 1536 : 256));
    }
    pid_t pids[2] = {peers[0].pid, peers[1].pid};
    stop();
    unsetenv("PCCL_TRACE_FILE");
    unsetenv("PCCL_TRACE_BUFFER_EVENTS");
    for (int i = 0; i < 2; i++) {
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "python3 -m json.tool %s/run-%d.json > /dev/null && python3 %s/trace_check.py %s/run-%d.json 1000",
                 tmpdir, (int) pids[i], dir, tmpdir, (int) pids[i]);
        int rc = system(cmd);
        if (rc != 0) fprintf(stderr, "trace: '%s' failed (%d)\n", cmd, rc);
        CHECK(rc == 0);
    }
}

static void case_stats(void) {
    setenv("PCCL_PROFILER_PLUGIN", "stats", 1);
    setenv("PCCL_PROFILER_STATS_INTERVAL_S", "1", 1);
    char log0[300];
    snprintf(log0, sizeof log0, "%s/stats-0.log", tmpdir);
    npeers = 0;
    h_stderr_path = "/dev/null";
    port = h_start_master(&master, master_bin, NULL);
    CHECK(port > 0);
    CHECK(add_peer(0, 1, log0));
    CHECK(add_peer(1, 1, NULL));
    char lines[4][512];
    all(2, "loop 50 1 65536", lines, 60000);
    for (int i = 0; i < 2; i++) CHECK(strcmp(lines[i], "loop 50 0") == 0);
    usleep(1300 * 1000);
    stop();
    unsetenv("PCCL_PROFILER_PLUGIN");
    unsetenv("PCCL_PROFILER_STATS_INTERVAL_S");
    CHECK(count_lines(log0, "pccl stats (communicator") >= 2); /* at least one interval, and the final one */
    CHECK(count_lines(log0, ", final):") == 1);
    /* The final table's all-reduce row: 50 collectives. */
    FILE *f = fopen(log0, "r");
    CHECK(f != NULL);
    char line[512];
    unsigned long long last = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long long n;
        if (sscanf(line, "all-reduce %llu", &n) == 1) last = n;
    }
    fclose(f);
    CHECK(last == 50);
}

/* The example plugin of docs/profiler.md with 2 peers: its line at destroy counts the ops. */
static void case_doc(const char *plugin) {
    char so[PATH_MAX];
    REQUIRE(realpath(plugin, so) != NULL);
    setenv("PCCL_PROFILER_PLUGIN", so, 1);
    char log0[300];
    snprintf(log0, sizeof log0, "%s/doc-0.log", tmpdir);
    npeers = 0;
    h_stderr_path = "/dev/null";
    port = h_start_master(&master, master_bin, NULL);
    REQUIRE(port > 0);
    REQUIRE(add_peer(0, 1, log0));
    REQUIRE(add_peer(1, 1, NULL));
    char lines[4][512];
    all(2, "loop 20 1 65536", lines, 60000);
    for (int i = 0; i < 2; i++) CHECK(strcmp(lines[i], "loop 20 0") == 0);
    stop();
    FILE *f = fopen(log0, "r");
    REQUIRE(f != NULL);
    char line[512];
    unsigned long long colls = 0, sent = 0;
    double ms = 0;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "example plugin: %llu collectives, %lf ms, %llu bytes sent", &colls, &ms, &sent) == 3) break;
    fclose(f);
    /* 20 all-reduces of 256 KiB between 2 peers: each sends half, twice (reduce-scatter, all-gather). */
    CHECK(colls == 20 && sent == 20ull * 65536 * 4 && ms > 0);
}

/* PCCL_PROFILER_PLUGIN=STATIC_PLUGIN with the test plugin linked into the peer program. */
static void case_static(const char *static_peer) {
    setenv("PCCL_PROFILER_PLUGIN", "STATIC_PLUGIN", 1);
    peer_bin = static_peer;
    REQUIRE(start(2, 1, NULL));
    check_ar(2, 3, 50021, 3);
    unsigned long long v[19];
    for (int i = 0; i < 2; i++) {
        query(i, v);
        CHECK(v[1] == 0 && v[2] == 1 && v[5] == 1); /* one init, one collective */
    }
    stop();
}

int main(int argc, char **argv) {
    if (argc < 10) {
        fprintf(stderr, "usage: prof_e2e_test CASE MASTER PEER TESTPROF EMPTY V2 NOSYM DOC STATIC_PEER\n");
        return 2;
    }
    h_init(240);
    master_bin = argv[2];
    peer_bin = argv[3];
    static char testprof[PATH_MAX], v2[PATH_MAX], nosym[PATH_MAX];
    CHECK(realpath(argv[4], testprof) != NULL && realpath(argv[6], v2) != NULL && realpath(argv[7], nosym) != NULL);
    const char *t = getenv("TEST_TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s", t ? t : "/tmp");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", argv[4]);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    unsetenv("PCCL_TRACE_FILE");
    setenv("PCCL_PROFILER_PLUGIN", testprof, 1);
    if (strcmp(argv[1], "e2e") == 0) case_e2e();
    else if (strcmp(argv[1], "pool") == 0) case_pool();
    else if (strcmp(argv[1], "load") == 0) case_load(testprof, v2, nosym);
    else if (strcmp(argv[1], "trace") == 0) case_trace(dir);
    else if (strcmp(argv[1], "stats") == 0) case_stats();
    else if (strcmp(argv[1], "doc") == 0) case_doc(argv[8]);
    else if (strcmp(argv[1], "static") == 0) case_static(argv[9]);
    else return 2;
    printf("%d checks, %d failed\n", check_count, check_failures);
    return check_failures ? 1 : 0;
}
