/* ss_fetch_drv: drives ss_fetch_bench.sh's rounds (issue 32): a newcomer catching up from the
 * distributors of a shared state, peers in network namespaces with asymmetric links.
 *   ss_fetch_drv MASTER SS_PEER NS0,NS1,...,NS5 IP_PREFIX LOGDIR TENSORS MIB_EACH UP_MBIT DOWN_MBIT
 * Hosts 0..3 hold the state (TENSORS tensors of MIB_EACH MiB), host 4 is newcomer A, host 5 joins
 * as newcomer B for the last round; the master runs in host 0's namespace. Rounds:
 *   one     A fetches from one distributor (PCCL_SS_MAX_SOURCES=1: protocol 10's way)
 *   all     A fetches from all four at once
 *   kill    as `all`, and distributor 3 is SIGKILLed at A's first progress line (after 1 s)
 *   two     A and B (zeros again) fetch at once from the three distributors left
 * Each time is the newcomer's own fetch ("shared state: fetched ... in X ms" in its log), every
 * byte is checked after each round. Prints CSV rows (name,value,unit,baseline,ratio). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void start_peer(int i) {
    char addr[64], path[512];
    snprintf(addr, sizeof addr, "%s1:%d", prefix, port);
    snprintf(path, sizeof path, "%s/peer%d.log", logdir, i);
    h_stderr_path = path;
    char *argv[] = {(char *) peer_bin, addr, "0", NULL};
    REQUIRE(h_spawn_in_netns(&peer[i], ns[i], argv));
    h_stderr_path = NULL;
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

int main(int argc, char **argv) {
    REQUIRE(argc == 10);
    h_init(600);
    peer_bin = argv[2];
    prefix = argv[4];
    logdir = argv[5];
    int tensors = atoi(argv[6]);
    unsigned long long mib = strtoull(argv[7], NULL, 10), bytes = mib << 20;
    double up = atof(argv[8]) / 8.0, down = atof(argv[9]) / 8.0; /* MB/s */
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
    double state_mb = (double) tensors * (double) bytes / 1e6;
    REQUIRE(state_mb > 64 * 1.048576 * 1.5); /* progress lines and the summary: fetches over 64 MiB */
    double limit4 = 4 * up < down ? 4 * up : down, limit3 = 3 * up / 2 < down ? 3 * up / 2 : down;

    REQUIRE(ss_cmd(p[4], line, sizeof line, "env PCCL_SS_MAX_SOURCES 1") == 0);
    round_of(p, 5, 4);
    double one = state_mb / (fetch_ms(4) / 1000.0);
    REQUIRE(ss_cmd(p[4], line, sizeof line, "env PCCL_SS_MAX_SOURCES -") == 0);
    REQUIRE(ss_cmd(p[4], line, sizeof line, "tensors %d %llu 0", tensors, bytes) == 0);
    round_of(p, 5, 4);
    long long all_ms = fetch_ms(4);
    double all = state_mb / (all_ms / 1000.0);
    fprintf(stderr, "ss_fetch_drv: one distributor %.1f MB/s, four %.1f MB/s, limit %.1f MB/s\n", one, all, limit4);
    row("asym_4dist_vs_limit", all, "MB/s", limit4);
    row("asym_1dist_vs_limit", one, "MB/s", limit4);
    row("asym_4dist_vs_1dist", all, "MB/s", one);

    /* The kill: at A's first progress line of this round. */
    REQUIRE(ss_cmd(p[4], line, sizeof line, "tensors %d %llu 0", tensors, bytes) == 0);
    char path[512];
    snprintf(path, sizeof path, "%s/peer4.log", logdir);
    char *text = h_read_file(path);
    int seen = 0;
    for (const char *at = text; at != NULL && (at = strstr(at, "shared state: received")) != NULL; at++) seen++;
    free(text);
    for (int i = 0; i < 4; i++) ss_cmd(p[i], line, sizeof line, "bump");
    for (int i = 0; i < 5; i++) REQUIRE(h_send(p[i], "sync 0"));
    REQUIRE(h_await_log(path, "shared state: received", seen + 1, 120000));
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
    row("asym_kill_time_vs_no_kill", (double) kill_ms, "ms", (double) all_ms);

    /* Two newcomers at once from the three distributors left. */
    start_peer(5);
    h_proc_t *acc[4] = {p[0], p[1], p[2], p[4]};
    admit(acc, 4, p[5]);
    REQUIRE(ss_cmd(p[5], line, sizeof line, "tensors %d %llu 0", tensors, bytes) == 0);
    REQUIRE(ss_cmd(p[4], line, sizeof line, "tensors %d %llu 0", tensors, bytes) == 0);
    h_proc_t *q[5] = {p[0], p[1], p[2], p[4], p[5]};
    round_of(q, 5, 3);
    double a = state_mb / (fetch_ms(4) / 1000.0), b = state_mb / (fetch_ms(5) / 1000.0);
    fprintf(stderr, "ss_fetch_drv: two newcomers at once: %.1f and %.1f MB/s, fair limit %.1f MB/s each\n", a, b, limit3);
    row("asym_2newcomers_A_vs_fair_limit", a, "MB/s", limit3);
    row("asym_2newcomers_B_vs_fair_limit", b, "MB/s", limit3);
    for (int i = 0; i < HOSTS; i++)
        if (i != 3) ss_quit(p[i]);
    h_kill(&master, 15);
    h_wait(&master, 10000);
    return 0;
}
