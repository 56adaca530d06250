/* ss_fetch_drv: drives ss_fetch_bench.sh's rounds (issue 32): a newcomer catching up from the
 * distributors of a shared state, peers in network namespaces with asymmetric links.
 *   ss_fetch_drv MASTER SS_PEER NS0,NS1,...,NS5 IP_PREFIX LOGDIR TENSORS MIB_EACH UP_MBIT DOWN_MBIT [sym]
 * Hosts 0..3 hold the state (TENSORS tensors of MIB_EACH MiB), host 4 is newcomer A, host 5 joins
 * as newcomer B for the last round; the master runs in host 0's namespace. Rounds (asymmetric
 * links, rows asym_*):
 *   one     A fetches from one distributor (PCCL_SS_MAX_SOURCES=1: protocol 10's way)
 *   all     A fetches from all four at once
 *   kill    as `all`, and distributor 3 is SIGKILLed at A's first progress line (after 1 s)
 *   two     A and B (zeros again) fetch at once from the three distributors left
 * With `sym` (every link UP = DOWN, rows sym_*): `all` against A's downlink; `serve`: two more
 * peers in their own group on hosts 0 and 1 (distributors' hosts) run an all-reduce of 64 MiB
 * alone, then again while A fetches (started at A's first progress line): the time against the
 * one alone; `kill` against `all`; `two` against each newcomer's downlink.
 * Each time is the newcomer's own fetch ("shared state: fetched ... in X ms" in its log), every
 * byte is checked after each round. Prints CSV rows (name,value,unit,baseline,ratio). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fetch of 1 GiB from one distributor's 100 Mbit/s uplink takes 90 s: answers may take long. */
#define SS_T 600000
#include "tests/shared_state/ss_util.h"

#define HOSTS 6

static char *ns[HOSTS];
static const char *peer_bin, *logdir, *prefix;
static h_proc_t master, peer[HOSTS];
static int port;

static long long fetch_ms(int i) {
    char path[512];
    snprintf(path, sizeof path, "%s/peer%d.log", logdir, i);
    char *text = h_read_file(path);
    long long ms = -1;
    for (const char *at = text; at != NULL && (at = strstr(at, "shared state: fetched ")) != NULL; at++) {
        const char *in = strstr(at, " in ");
        if (in != NULL) ms = atoll(in + 4);
    }
    free(text);
    REQUIRE(ms > 0); /* the summary line of a fetch over 64 MiB */
    return ms;
}

/* A peer of group `group` in host `host`'s namespace, logging to LOGDIR/NAME.log. */
static void spawn_peer(h_proc_t *p, int host, const char *group, const char *name) {
    char addr[64], path[512];
    snprintf(addr, sizeof addr, "%s1:%d", prefix, port);
    snprintf(path, sizeof path, "%s/%s.log", logdir, name);
    h_stderr_path = path;
    char *argv[] = {(char *) peer_bin, addr, (char *) group, NULL};
    REQUIRE(h_spawn_in_netns(p, ns[host], argv));
    h_stderr_path = NULL;
}

static void start_peer(int i) {
    char name[16];
    snprintf(name, sizeof name, "peer%d", i);
    spawn_peer(&peer[i], i, "0", name);
}

static void start_master(const char *bin) {
    char listen[64], line[256];
    snprintf(listen, sizeof listen, "%s1:0", prefix);
    char *argv[] = {(char *) bin, "--listen", listen, NULL};
    REQUIRE(h_spawn_in_netns(&master, ns[0], argv));
    REQUIRE(h_read_line(&master, line, sizeof line, 20000));
    const char *colon = strrchr(line, ':');
    REQUIRE(colon != NULL);
    port = atoi(colon + 1);
}

/* Admits newcomer nc by a vote of the accepted peers acc[0..na). */
static void admit(h_proc_t **acc, int na, h_proc_t *nc) {
    char line[256];
    REQUIRE(h_send(nc, "connect"));
    for (int waited = 0, seen = 0; seen < na; waited += 20) {
        REQUIRE(waited < SS_T);
        seen = 0;
        for (int i = 0; i < na; i++) REQUIRE(h_send(acc[i], "pending"));
        for (int i = 0; i < na; i++) {
            REQUIRE(h_read_line(acc[i], line, sizeof line, SS_T));
            seen += strcmp(line, "pending 0 1") == 0;
        }
        if (seen < na) usleep(20000);
    }
    for (int i = 0; i < na; i++) REQUIRE(h_send(acc[i], "update"));
    for (int i = 0; i < na; i++) REQUIRE(h_read_line(acc[i], line, sizeof line, SS_T) && strcmp(line, "update 0") == 0);
    REQUIRE(h_read_line(nc, line, sizeof line, SS_T) && strcmp(line, "connect 0") == 0);
}

/* Everyone in p[0..n) syncs; the newcomers' answers must be exact. */
static void round_of(h_proc_t **p, int n, int holders) {
    char line[256];
    for (int i = 0; i < holders; i++) ss_cmd(p[i], line, sizeof line, "bump");
    ss_sync_t r[HOSTS];
    ss_sync_all(p, n, NULL, r);
    for (int i = 0; i < n; i++) REQUIRE(r[i].result == 0);
    for (int i = holders; i < n; i++) REQUIRE(ss_cmd(p[i], line, sizeof line, "check 5") == 0);
}

static void row(const char *name, double value, const char *unit, double base) {
    printf("shared_state_fetch/%s,%.2f,%s,%.2f,%.3f\n", name, value, unit, base, base > 0 ? value / base : 0.0);
}

static double state_mb, up, down;
static int tensors;
static unsigned long long bytes;

/* A's fetch alone: one distributor (asymmetric only) and all four; A's time from all four. */
static long long fetch_alone(h_proc_t **p, bool sym) {
    char line[256];
    double limit4 = 4 * up < down ? 4 * up : down, one = 0;
    if (!sym) {
        REQUIRE(ss_cmd(p[4], line, sizeof line, "env PCCL_SS_MAX_SOURCES 1") == 0);
        round_of(p, 5, 4);
        one = state_mb / (fetch_ms(4) / 1000.0);
        REQUIRE(ss_cmd(p[4], line, sizeof line, "env PCCL_SS_MAX_SOURCES -") == 0);
        REQUIRE(ss_cmd(p[4], line, sizeof line, "tensors %d %llu 0", tensors, bytes) == 0);
    }
    round_of(p, 5, 4);
    long long all_ms = fetch_ms(4);
    double all = state_mb / (all_ms / 1000.0);
    fprintf(stderr, "ss_fetch_drv: four distributors %.1f MB/s, limit %.1f MB/s\n", all, limit4);
    row(sym ? "sym_4dist_vs_downlink" : "asym_4dist_vs_limit", all, "MB/s", limit4);
    if (!sym) {
        row("asym_1dist_vs_limit", one, "MB/s", limit4);
        row("asym_4dist_vs_1dist", all, "MB/s", one);
    }
    return all_ms;
}

/* How many lines of LOGDIR/peerI.log hold needle. */
static int log_count(int i, const char *needle) {
    char path[512];
    snprintf(path, sizeof path, "%s/peer%d.log", logdir, i);
    char *text = h_read_file(path);
    int seen = 0;
    for (const char *at = text; at != NULL && (at = strstr(at, needle)) != NULL; at++) seen++;
    free(text);
    return seen;
}

/* A zeroed, everyone in p[0..n) starts a sync; waits for A's next progress line (1 s in). */
static void start_sync_await(h_proc_t **p, int n, int holders) {
    char line[256], path[512];
    snprintf(path, sizeof path, "%s/peer4.log", logdir);
    REQUIRE(ss_cmd(p[4], line, sizeof line, "tensors %d %llu 0", tensors, bytes) == 0);
    int seen = log_count(4, "shared state: received");
    for (int i = 0; i < holders; i++) ss_cmd(p[i], line, sizeof line, "bump");
    for (int i = 0; i < n; i++) REQUIRE(h_send(p[i], "sync 0"));
    REQUIRE(h_await_log(path, "shared state: received", seen + 1, 120000));
}

/* The kill: distributor 3 at A's first progress line of this round. */
static void fetch_kill(h_proc_t **p, long long all_ms, bool sym) {
    char line[256];
    start_sync_await(p, 5, 4);
    h_kill(p[3], SIGKILL);
    h_wait(p[3], 5000);
    for (int i = 0; i < 5; i++) {
        if (i == 3) continue;
        REQUIRE(h_read_line(p[i], line, sizeof line, 300000));
        REQUIRE(strncmp(line, "sync 0 ", 7) == 0);
    }
    REQUIRE(ss_cmd(p[4], line, sizeof line, "check 5") == 0);
    long long kill_ms = fetch_ms(4);
    fprintf(stderr, "ss_fetch_drv: with a distributor killed after 1 s: %lld ms, without: %lld ms\n", kill_ms, all_ms);
    row(sym ? "sym_kill_time_vs_no_kill" : "asym_kill_time_vs_no_kill", (double) kill_ms, "ms", (double) all_ms);
}

/* Two newcomers at once from the three distributors left. */
static void fetch_two(h_proc_t **p, bool sym) {
    char line[256];
    start_peer(5);
    h_proc_t *acc[4] = {p[0], p[1], p[2], p[4]};
    admit(acc, 4, p[5]);
    REQUIRE(ss_cmd(p[5], line, sizeof line, "tensors %d %llu 0", tensors, bytes) == 0);
    REQUIRE(ss_cmd(p[4], line, sizeof line, "tensors %d %llu 0", tensors, bytes) == 0);
    h_proc_t *q[5] = {p[0], p[1], p[2], p[4], p[5]};
    round_of(q, 5, 3);
    double a = state_mb / (fetch_ms(4) / 1000.0), b = state_mb / (fetch_ms(5) / 1000.0);
    /* Each newcomer's limit: its downlink, or a fair half of three uplinks. */
    double limit = 3 * up / 2 < down ? 3 * up / 2 : down;
    fprintf(stderr, "ss_fetch_drv: two newcomers at once: %.1f and %.1f MB/s, limit %.1f MB/s each\n", a, b, limit);
    row(sym ? "sym_2newcomers_A_vs_limit" : "asym_2newcomers_A_vs_fair_limit", a, "MB/s", limit);
    row(sym ? "sym_2newcomers_B_vs_limit" : "asym_2newcomers_B_vs_fair_limit", b, "MB/s", limit);
}

/* An all-reduce of group 1 (peers on hosts 0 and 1); its milliseconds. */
static long long allreduce_ms(h_proc_t *g, int n) {
    char line[256];
    long long ms[2] = {0, 0};
    for (int i = 0; i < n; i++) REQUIRE(h_send(&g[i], "allreduce 16777216"));
    for (int i = 0; i < n; i++) {
        int res = -1, bad = -1;
        REQUIRE(h_read_line(&g[i], line, sizeof line, 300000));
        REQUIRE(sscanf(line, "allreduce %d %d %lld", &res, &bad, &ms[i]) == 3 && res == 0 && bad == 0);
    }
    return ms[0] > ms[1] ? ms[0] : ms[1];
}

/* A serving host's all-reduce: alone (median of 3), then while A fetches from all four. Called
 * while hosts 0..4 are group 0's accepted peers. */
static void serve_cost(h_proc_t **p) {
    char line[256];
    h_proc_t g[2];
    spawn_peer(&g[0], 0, "1", "ar0");
    spawn_peer(&g[1], 1, "1", "ar1");
    ss_admit(&peer[0], 5, g, 2); /* group 0's peers vote them in */
    long long alone[3];
    for (int k = 0; k < 3; k++) alone[k] = allreduce_ms(g, 2);
    long long lo = alone[0] < alone[1] ? alone[0] : alone[1], hi = alone[0] < alone[1] ? alone[1] : alone[0];
    long long med = alone[2] < lo ? lo : alone[2] > hi ? hi : alone[2];
    start_sync_await(p, 5, 4);
    long long serving = allreduce_ms(g, 2);
    for (int i = 0; i < 5; i++) REQUIRE(h_read_line(p[i], line, sizeof line, 300000) && strncmp(line, "sync 0 ", 7) == 0);
    REQUIRE(ss_cmd(p[4], line, sizeof line, "check 5") == 0);
    fprintf(stderr, "ss_fetch_drv: a 64 MiB all-reduce between two distributors' hosts: %lld ms alone, %lld ms "
                    "while they serve\n", med, serving);
    row("sym_allreduce_while_serving_time", (double) serving, "ms", (double) med);
    ss_quit(&g[0]);
    ss_quit(&g[1]);
}

int main(int argc, char **argv) {
    REQUIRE(argc == 10 || (argc == 11 && strcmp(argv[10], "sym") == 0));
    bool sym = argc == 11;
    h_init(900);
    peer_bin = argv[2];
    prefix = argv[4];
    logdir = argv[5];
    tensors = atoi(argv[6]);
    bytes = strtoull(argv[7], NULL, 10) << 20;
    up = atof(argv[8]) / 8.0, down = atof(argv[9]) / 8.0; /* MB/s */
    char *save = NULL;
    for (int i = 0; i < HOSTS; i++) REQUIRE((ns[i] = strtok_r(i == 0 ? argv[3] : NULL, ",", &save)) != NULL);
    setenv("PCCL_LOG_LEVEL", "info", 1);
    start_master(argv[1]);
    char line[256];
    for (int i = 0; i < 5; i++) start_peer(i);
    REQUIRE(ss_cmd(&peer[0], line, sizeof line, "connect") == 0);
    h_proc_t *p[HOSTS] = {&peer[0], &peer[1], &peer[2], &peer[3], &peer[4], &peer[5]};
    ss_admit(&peer[0], 1, &peer[1], 4);
    for (int i = 0; i < 5; i++) REQUIRE(ss_cmd(p[i], line, sizeof line, "tensors %d %llu %d", tensors, bytes, i < 4 ? 5 : 0) == 0);
    state_mb = (double) tensors * (double) bytes / 1e6;
    REQUIRE(state_mb > 64 * 1.048576 * 1.5); /* progress lines and the summary: fetches over 64 MiB */
    long long all_ms = fetch_alone(p, sym);
    if (sym) serve_cost(p);
    fetch_kill(p, all_ms, sym);
    fetch_two(p, sym);
    for (int i = 0; i < HOSTS; i++)
        if (i != 3) ss_quit(p[i]);
    h_kill(&master, 15);
    h_wait(&master, 10000);
    return 0;
}
