/* topo_netns_test: pcclOptimizeTopology where one ring order is clearly best. Four hosts in
 * network namespaces on one bridge (10.77.0.1-4); each host's egress is an htb with a 400 Mbit/s
 * class towards exactly one other host (u32 filter on the destination IP) and 50 Mbit/s towards
 * the rest, so that only the directed ring h0 -> h2 -> h1 -> h3 -> h0 is fast. The peers join
 * in host order (the master's first ring is 0 -> 1 -> 2 -> 3: three slow edges). After the
 * optimisation every peer's next neighbour must be its fast successor; the all-reduce time
 * before and after is reported (and must improve). Needs root and iproute2: otherwise it prints
 * a SKIPPED line and passes.
 *   topo_netns_test PCCL_MASTER TOPO_PEER [--bench]
 * With --bench (bench/topology) it also times pcclUpdateTopology and a cached second
 * optimisation, runs more all-reduces and prints CSV rows (name,value,unit,baseline,ratio) on
 * stdout; its other lines go to stderr. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pccl.h"
#include "tests/topology/topo_util.h"

enum { N = 4 };
static const int succ[N] = {2, 3, 1, 0}; /* the fast edge out of each host: 0->2->1->3->0 */
static char prefix[32];
static bool made;

static void cleanup(void) {
    if (!made) return;
    for (int i = 0; i < N; i++) h_sh("ip netns del %sh%d 2>/dev/null", prefix, i);
    h_sh("ip netns del %ssw 2>/dev/null", prefix);
}

static bool setup(void) {
    snprintf(prefix, sizeof prefix, "tp%d", (int) getpid());
    if (h_sh("ip netns add %ssw 2>/dev/null", prefix) != 0) return false;
    made = true;
    if (h_sh("ip -n %ssw link add br0 type bridge && ip -n %ssw link set br0 up", prefix, prefix) != 0) return false;
    for (int i = 0; i < N; i++) {
        const char *p = prefix;
        if (h_sh("ip netns add %sh%d", p, i) != 0) return false;
        if (h_sh("ip link add eth0 netns %sh%d type veth peer name p%d netns %ssw", p, i, i, p) != 0) return false;
        if (h_sh("ip -n %ssw link set p%d master br0 && ip -n %ssw link set p%d up", p, i, p, i) != 0) return false;
        if (h_sh("ip -n %sh%d addr add 10.77.0.%d/24 dev eth0 && ip -n %sh%d link set eth0 gso_max_size 32000 && "
                 "ip -n %sh%d link set eth0 up && ip -n %sh%d link set lo up",
                 p, i, i + 1, p, i, p, i, p, i) != 0)
            return false;
        /* 1:10 fast towards succ[i], 1:20 (default) slow towards everyone else; 1:30 small
         * packets (pure ACKs), so that a slow class full of data does not starve the ACKs of a
         * fast stream coming in (access links with fq do the same). */
        if (h_sh("tc -n %sh%d qdisc add dev eth0 root handle 1: htb default 20 r2q 1000 && "
                 "tc -n %sh%d class add dev eth0 parent 1: classid 1:10 htb rate 400mbit burst 64k cburst 64k && "
                 "tc -n %sh%d class add dev eth0 parent 1: classid 1:20 htb rate 50mbit burst 32k cburst 32k && "
                 "tc -n %sh%d class add dev eth0 parent 1: classid 1:30 htb rate 100mbit burst 32k cburst 32k prio 0 && "
                 "tc -n %sh%d filter add dev eth0 parent 1: protocol ip prio 1 u32 match u16 0 0xff80 at 2 flowid 1:30 && "
                 "tc -n %sh%d filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dst 10.77.0.%d/32 flowid 1:10",
                 p, i, p, i, p, i, p, i, p, i, p, i, succ[i] + 1) != 0)
            return false;
    }
    return true;
}

static bool spawn_in(h_proc_t *proc, int host, char *const *args) {
    char ns[48];
    snprintf(ns, sizeof ns, "%sh%d", prefix, host);
    return h_spawn_in_netns(proc, ns, args);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3 || argc == 4);
    bool bench = argc == 4 && strcmp(argv[3], "--bench") == 0;
    FILE *info = bench ? stderr : stdout;
    h_init(bench ? 300 : 90);
    atexit(cleanup);
    if (getuid() != 0 || !setup()) {
        cleanup();
        made = false;
        fprintf(info, "topo_netns_test: SKIPPED: cannot create network namespaces (needs root, iproute2, htb)\n");
        return 0;
    }
    setenv("PCCL_BENCH_MS", "300", 1);
    h_proc_t master;
    char *margs[] = {argv[1], "--listen", "10.77.0.1:0", NULL};
    REQUIRE(spawn_in(&master, 0, margs));
    char line[256];
    REQUIRE(h_read_line(&master, line, sizeof line, 20000));
    const char *colon = strrchr(line, ':');
    REQUIRE(colon != NULL);
    char addr[64];
    snprintf(addr, sizeof addr, "10.77.0.1:%d", atoi(colon + 1));

    topo_peer_t peers[N];
    topo_peer_t *all[N];
    for (int i = 0; i < N; i++) {
        all[i] = &peers[i];
        char *pargs[] = {argv[2], addr, "0", NULL};
        REQUIRE(spawn_in(&peers[i].p, i, pargs));
    }
    /* Host 0 alone, then 1, 2, 3 registering in that order (their ids make the first ring). */
    topo_admit(NULL, 0, all, 1);
    for (int i = 1; i < N; i++) {
        REQUIRE(h_send(&peers[i].p, "connect"));
        usleep(150000);
    }
    usleep(300000);
    REQUIRE(h_send(&peers[0].p, "update"));
    REQUIRE(h_read_line(&peers[0].p, line, sizeof line, TOPO_T) && strcmp(line, "update 0") == 0);
    for (int i = 1; i < N; i++) {
        REQUIRE(h_read_line(&peers[i].p, line, sizeof line, TOPO_T));
        REQUIRE(sscanf(line, "connect 0 %32s", peers[i].uuid) == 1);
    }
    CHECK(topo_ring_valid(all, N));
    int fast_before = 0;
    for (int i = 0; i < N; i++) fast_before += topo_index(all, N, peers[i].next) == succ[i];
    fprintf(info, "before: %d of %d ring edges fast\n", fast_before, N);

    const size_t count = 1u << 20; /* 4 MiB of float32 */
    double before = 0, after = 0;
    CHECK(topo_allreduce(all, N, count, bench ? 3 : 1, &before));

    char lines[N][256];
    int res[N];
    double update_ms = 0;
    if (bench) { /* the baseline of the optimisation's time: a plain re-link of the ring */
        double t0 = now_ms();
        topo_send_all(all, N, "update");
        topo_read_all(all, N, lines, res);
        update_ms = now_ms() - t0;
        for (int i = 0; i < N; i++) CHECK_EQ_U64(res[i], 0);
    }
    double t0 = now_ms();
    topo_send_all(all, N, "optimize");
    topo_read_all(all, N, lines, res);
    double optimize_ms = now_ms() - t0;
    for (int i = 0; i < N; i++) CHECK_EQ_U64(res[i], 0);
    fprintf(info, "%s\n", lines[0]);
    CHECK(topo_ring_valid(all, N));
    for (int i = 0; i < N; i++) {
        int nx = topo_index(all, N, peers[i].next);
        fprintf(info, "host %d -> host %d%s\n", i, nx, nx == succ[i] ? " (fast)" : " (SLOW)");
        CHECK(nx == succ[i]);
    }
    CHECK(topo_allreduce(all, N, count, bench ? 5 : 2, &after));
    fprintf(info, "all-reduce of 4 MiB float32 over 4 hosts: %.1f ms before, %.1f ms after optimising (%.1fx)\n",
            before, after, after > 0 ? before / after : 0);
    CHECK(after < before);
    if (bench) {
        t0 = now_ms();
        topo_send_all(all, N, "optimize");
        topo_read_all(all, N, lines, res);
        double cached_ms = now_ms() - t0;
        for (int i = 0; i < N; i++) CHECK_EQ_U64(res[i], 0);
        /* Bus bandwidth: 2 (n - 1) / n of the buffer crosses every ring edge. */
        double bytes = 2.0 * (N - 1) / N * (double) count * 4;
        double bw_before = bytes / (before * 1e-3) / 1e6, bw_after = bytes / (after * 1e-3) / 1e6;
        printf("topology_htb/n4_4MiB_busbw_optimized_vs_connection_order,%.2f,MB/s,%.2f,%.3f\n", bw_after, bw_before,
               bw_after / bw_before);
        /* The floor of a first optimisation: 4 steps (offsets 1, 2a, 2b, 3) of 300 ms each. */
        printf("topology_htb/n4_optimize_first_ms_vs_measurement_floor,%.1f,ms,%.1f,%.3f\n", optimize_ms, 4 * 300.0,
               optimize_ms / (4 * 300.0));
        printf("topology_htb/n4_optimize_cached_ms_vs_update_topology,%.1f,ms,%.1f,%.3f\n", cached_ms, update_ms,
               cached_ms / update_ms);
    }

    for (int i = 0; i < N; i++) topo_quit(&peers[i]);
    h_kill(&master, SIGTERM);
    h_wait(&master, 10000);
    return check_exit();
}
