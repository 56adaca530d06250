/* unreachable_test: newcomers the members cannot dial never stop a run (issue 30, step 1).
 *
 * Network namespaces made here: a "public" bridge 10.79.0.0/24 with the master and member A (h0,
 * .1), member B (h1, .2), a newcomer behind a firewall that drops inbound connections (fw, .3),
 * a public newcomer (h2, .4), and a NAT router (rt, .10) doing MASQUERADE for a private LAN
 * 192.168.79.0/24 with the NATed newcomer (n0, .2). Every peer runs restart_peer (a sync and a
 * 4 MiB all-reduce per step, pcclArePeersPending and pcclUpdateTopology between steps).
 *
 * A and B step on their own. The NATed newcomer registers: the members' dials reach the router,
 * which refuses them; after --admit-tries rounds its pcclConnect fails with
 * pcclRankConnectionFailed, naming the router's address. Then the firewalled newcomer: dials
 * get no answer; the same. Then the public newcomer: admitted, synced, and stepping with them.
 * Checked: the members never saw a failed call (no step lost), every step's weights are
 * bit-identical on every peer that ran it, and each refused newcomer's log names the address
 * the members dialled. Printed: the members' slowest step during each failed admission, against
 * their median step. Needs root, iproute2 and iptables: otherwise SKIPPED (passes).
 *   unreachable_test PCCL_MASTER RESTART_PEER */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define STEPS 100000 /* the members step until the test ends them */
#define MAX_STEPS 4096
#define P2P_TIMEOUT_MS "2000" /* a dropped dial fails after this (default 10 s) */

static char prefix[32];
static bool made;

static const char *const hosts[] = {"h0", "h1", "h2", "fw", "rt", "n0"};

static void cleanup(void) {
    if (!made) return;
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) h_sh("ip netns del %s%s 2>/dev/null", prefix, hosts[i]);
    h_sh("ip netns del %ssw 2>/dev/null", prefix);
}

/* A host on the public bridge at 10.79.0.<last>. */
static bool public_host(const char *name, int last) {
    const char *p = prefix;
    return h_sh("ip netns add %s%s", p, name) == 0 &&
           h_sh("ip link add eth0 netns %s%s type veth peer name v%s netns %ssw", p, name, name, p) == 0 &&
           h_sh("ip -n %ssw link set v%s master br0 && ip -n %ssw link set v%s up", p, name, p, name) == 0 &&
           h_sh("ip -n %s%s addr add 10.79.0.%d/24 dev eth0 && ip -n %s%s link set eth0 up && "
                "ip -n %s%s link set lo up",
                p, name, last, p, name, p, name) == 0;
}

static bool setup(void) {
    const char *p = prefix;
    snprintf(prefix, sizeof prefix, "nu%d", (int) getpid());
    if (h_sh("ip netns add %ssw 2>/dev/null", p) != 0) return false;
    made = true;
    if (h_sh("ip -n %ssw link add br0 type bridge && ip -n %ssw link set br0 up", p, p) != 0) return false;
    if (!public_host("h0", 1) || !public_host("h1", 2) || !public_host("fw", 3) || !public_host("h2", 4) ||
        !public_host("rt", 10))
        return false;
    /* The firewall: no inbound connection may open (the master link is outbound: it works). */
    if (h_sh("ip netns exec %sfw iptables -A INPUT -p tcp --syn -j DROP", p) != 0) return false;
    /* The NAT router and its private LAN. */
    return h_sh("ip netns add %sn0", p) == 0 &&
           h_sh("ip link add eth1 netns %srt type veth peer name eth0 netns %sn0", p, p) == 0 &&
           h_sh("ip -n %srt addr add 192.168.79.1/24 dev eth1 && ip -n %srt link set eth1 up", p, p) == 0 &&
           h_sh("ip -n %sn0 addr add 192.168.79.2/24 dev eth0 && ip -n %sn0 link set eth0 up && "
                "ip -n %sn0 link set lo up && ip -n %sn0 route add default via 192.168.79.1",
                p, p, p, p) == 0 &&
           h_sh("ip netns exec %srt sysctl -qw net.ipv4.ip_forward=1", p) == 0 &&
           h_sh("ip netns exec %srt iptables -t nat -A POSTROUTING -o eth0 -j MASQUERADE", p) == 0;
}

static bool spawn_in(h_proc_t *proc, const char *host, char *const *args) {
    char ns[48];
    snprintf(ns, sizeof ns, "%s%s", prefix, host);
    return h_spawn_in_netns(proc, ns, args);
}

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* What one peer printed: its steps' hashes, when each step ended, failed calls, its connect. */
typedef struct peer_t {
    h_proc_t p;
    const char *name;
    bool running;
    int connect; /* pcclConnect's result; -1 until printed */
    int errors;
    unsigned steps; /* the last step it finished */
    unsigned long long hash[MAX_STEPS + 1];
    long at[MAX_STEPS + 1];
} peer_t;

enum { A, B, NAT, FW, PUB, NPEERS };
static peer_t peers[NPEERS];

static void take_line(peer_t *x, const char *line) {
    unsigned step;
    unsigned long long rev, hash;
    int r;
    if (sscanf(line, "step %u rev %llu hash %llx", &step, &rev, &hash) == 3 && step <= MAX_STEPS) {
        x->hash[step] = hash;
        x->at[step] = now_ms();
        x->steps = step;
    } else if (sscanf(line, "connect %d", &r) == 1) {
        x->connect = r;
    } else if (strncmp(line, "error ", 6) == 0) {
        fprintf(stderr, "%s: %s\n", x->name, line);
        x->errors++;
    }
}

/* Reads every running peer's lines for `ms`, or until cond() holds. */
static bool pump(int ms, bool (*cond)(void)) {
    long end = now_ms() + ms;
    char line[256];
    while (now_ms() < end) {
        if (cond != NULL && cond()) return true;
        for (int i = 0; i < NPEERS; i++) {
            peer_t *x = &peers[i];
            if (!x->running) continue;
            while (h_read_line(&x->p, line, sizeof line, 2)) take_line(x, line);
        }
    }
    return cond != NULL && cond();
}

static peer_t *watched;
static bool connected(void) { return watched->connect >= 0; }
static unsigned target_step;
static bool members_at_target(void) { return peers[A].steps >= target_step && peers[B].steps >= target_step; }
static bool watched_at_target(void) { return watched->steps >= target_step; }

static const char *peer_bin;
static char master_addr[64];
static char logs[NPEERS][128];

/* Starts restart_peer as `shard` on `host`, its stderr in logs[i]. */
static bool start_peer(int i, const char *name, const char *host) {
    peer_t *x = &peers[i];
    x->name = name;
    x->connect = -1;
    x->running = true;
    char shard[8], steps[16];
    snprintf(shard, sizeof shard, "%d", i);
    snprintf(steps, sizeof steps, "%d", STEPS);
    snprintf(logs[i], sizeof logs[i], "/tmp/%s.%s.log", prefix, name);
    h_stderr_path = logs[i];
    char *args[] = {(char *) peer_bin, master_addr, shard, steps, NULL};
    return spawn_in(&x->p, host, args);
}

/* The members' longest time between two steps that ended after `from` (the first of them may
 * have ended before it). */
static long slowest_step(long from) {
    long worst = 0;
    for (int m = A; m <= B; m++)
        for (unsigned s = 2; s <= peers[m].steps; s++)
            if (peers[m].at[s] >= from && peers[m].at[s] - peers[m].at[s - 1] > worst)
                worst = peers[m].at[s] - peers[m].at[s - 1];
    return worst;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *) a, y = *(const long *) b;
    return x < y ? -1 : x > y;
}

static long median_step(void) {
    static long d[MAX_STEPS];
    size_t n = 0;
    for (unsigned s = 2; s <= peers[A].steps; s++) d[n++] = peers[A].at[s] - peers[A].at[s - 1];
    qsort(d, n, sizeof *d, cmp_long);
    return n == 0 ? 0 : d[n / 2];
}

static bool log_has(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f) != NULL) found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* A newcomer that cannot be dialled: pcclConnect fails with pcclRankConnectionFailed, its log
 * names where it was dialled and why, and the members step on meanwhile. */
static void refused_newcomer(int i, const char *name, const char *host, const char *seen_at, const char *why,
                             const char *or_why) {
    watched = &peers[i];
    long t0 = now_ms();
    unsigned before = peers[A].steps;
    REQUIRE(start_peer(i, name, host));
    CHECK(pump(60000, connected));
    long took = now_ms() - t0;
    target_step = peers[A].steps + 2; /* the steps its tries held up have ended */
    CHECK(pump(60000, members_at_target));
    fprintf(stderr, "%s: pcclConnect returned %d after %ld ms; meanwhile the members stepped %u -> %u, their "
                    "longest step %ld ms (median %ld ms), no call failed\n",
            name, peers[i].connect, took, before, peers[A].steps, slowest_step(t0), median_step());
    CHECK_EQ_U64(peers[i].connect, 7); /* pcclRankConnectionFailed */
    CHECK_EQ_U64(h_wait(&peers[i].p, 10000), 5);
    peers[i].running = false;
    CHECK(log_has(logs[i], "not admitted"));
    CHECK(log_has(logs[i], seen_at));
    CHECK(log_has(logs[i], why) || log_has(logs[i], or_why));
    CHECK(peers[A].steps > before); /* they went on */
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    peer_bin = argv[2];
    h_init(240);
    atexit(cleanup);
    if (getuid() != 0 || !setup()) {
        cleanup();
        made = false;
        printf("unreachable_test: SKIPPED: cannot create network namespaces (needs root, iproute2, iptables)\n");
        return 0;
    }
    setenv("PCCL_P2P_TIMEOUT_MS", P2P_TIMEOUT_MS, 1);
    setenv("PCCL_LOG_LEVEL", "info", 1);
    h_proc_t master;
    char *margs[] = {argv[1], "--listen", "10.79.0.1:0", NULL};
    char mlog[128];
    snprintf(mlog, sizeof mlog, "/tmp/%s.master.log", prefix);
    h_stderr_path = mlog;
    REQUIRE(spawn_in(&master, "h0", margs));
    char line[256];
    REQUIRE(h_read_line(&master, line, sizeof line, 20000));
    const char *colon = strrchr(line, ':');
    REQUIRE(colon != NULL);
    snprintf(master_addr, sizeof master_addr, "10.79.0.1:%d", atoi(colon + 1));

    REQUIRE(start_peer(A, "member A", "h0"));
    REQUIRE(start_peer(B, "member B", "h1"));
    target_step = 5;
    REQUIRE(pump(60000, members_at_target));

    /* The router refuses at once; the firewall drops, so whichever deadline ends first says why. */
    refused_newcomer(NAT, "NATed newcomer", "n0", "10.79.0.10:", "connection refused", "connection refused");
    refused_newcomer(FW, "firewalled newcomer", "fw", "10.79.0.3:", "no answer", "never dialled");

    /* A reachable newcomer still gets in, syncs, and steps with them. */
    watched = &peers[PUB];
    REQUIRE(start_peer(PUB, "public newcomer", "h2"));
    CHECK(pump(60000, connected));
    CHECK_EQ_U64(peers[PUB].connect, 0);
    target_step = peers[A].steps + 5;
    REQUIRE(pump(60000, members_at_target));
    target_step = peers[A].steps;
    CHECK(pump(60000, watched_at_target));

    for (int i = 0; i < NPEERS; i++)
        if (peers[i].running) h_kill(&peers[i].p, SIGKILL);
    pump(200, NULL);
    /* Every step's weights, on every peer that finished it, are the same bits. */
    unsigned compared = 0, first_pub = 0;
    for (unsigned s = 1; s <= peers[A].steps && s <= MAX_STEPS; s++) {
        for (int i = B; i < NPEERS; i++) {
            if (peers[i].connect != 0 || s > peers[i].steps || peers[i].hash[s] == 0) continue;
            if (i == PUB && first_pub == 0) first_pub = s;
            CHECK_EQ_U64(peers[i].hash[s], peers[A].hash[s]);
            compared++;
        }
    }
    fprintf(stderr, "%u step hashes compared; the public newcomer's first step: %u; members' failed calls: %d, %d\n",
            compared, first_pub, peers[A].errors, peers[B].errors);
    CHECK(first_pub > 0);
    CHECK_EQ_U64(peers[A].errors + peers[B].errors, 0); /* no step lost to the unreachable newcomers */
    h_kill(&master, SIGTERM);
    h_wait(&master, 10000);
    if (check_failures == 0)
        for (int i = 0; i < NPEERS; i++) unlink(logs[i]);
    unlink(mlog);
    return check_exit();
}
