/* nat_net: the namespaces and peers of the NAT tests (nat_net.h). */
#include "tests/nat/nat_net.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/common/check.h"

static char prefix[32];
static bool made;
static int router_kind = NAT_ROUTER_RESET;
static char master_addr[64];
static char master_log[128];

static const char *const hosts[] = {"h0", "h1", "h2", "fw", "rt", "n0", "rt2", "n1"};

static void cleanup(void) {
    if (!made) return;
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) h_sh("ip netns del %s%s 2>/dev/null", prefix, hosts[i]);
    h_sh("ip netns del %ssw 2>/dev/null", prefix);
    made = false;
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

void nat_set_routers(int kind) { router_kind = kind; }

/* A NAT router (public host `rt`) doing MASQUERADE for a private LAN 192.168.<net>.0/24 with one
 * host, `lan` (.2), of the kind nat_set_routers chose. */
static bool nat_lan(const char *rt, const char *lan, int net) {
    const char *p = prefix;
    const char *masq = router_kind == NAT_ROUTER_RANDOM ? "MASQUERADE --random-fully" : "MASQUERADE";
    if (router_kind == NAT_ROUTER_DROP && h_sh("ip netns exec %s%s iptables -A INPUT -i eth0 -p tcp --syn -j DROP", p, rt) != 0)
        return false;
    return h_sh("ip netns add %s%s", p, lan) == 0 &&
           h_sh("ip link add eth1 netns %s%s type veth peer name eth0 netns %s%s", p, rt, p, lan) == 0 &&
           h_sh("ip -n %s%s addr add 192.168.%d.1/24 dev eth1 && ip -n %s%s link set eth1 up", p, rt, net, p, rt) == 0 &&
           h_sh("ip -n %s%s addr add 192.168.%d.2/24 dev eth0 && ip -n %s%s link set eth0 up && "
                "ip -n %s%s link set lo up && ip -n %s%s route add default via 192.168.%d.1",
                p, lan, net, p, lan, p, lan, p, lan, net) == 0 &&
           h_sh("ip netns exec %s%s sysctl -qw net.ipv4.ip_forward=1", p, rt) == 0 &&
           h_sh("ip netns exec %s%s iptables -t nat -A POSTROUTING -o eth0 -j %s", p, rt, masq) == 0;
}

static bool make_all(void) {
    const char *p = prefix;
    if (h_sh("ip netns add %ssw 2>/dev/null", p) != 0) return false;
    made = true;
    if (h_sh("ip -n %ssw link add br0 type bridge && ip -n %ssw link set br0 up", p, p) != 0) return false;
    if (!public_host("h0", 1) || !public_host("h1", 2) || !public_host("fw", 3) || !public_host("h2", 4) ||
        !public_host("rt", 10))
        return false;
    /* The firewall: no inbound connection may open (the master link is outbound: it works). */
    if (h_sh("ip netns exec %sfw iptables -A INPUT -p tcp --syn -j DROP", p) != 0) return false;
    return public_host("rt2", 11) && nat_lan("rt", "n0", 79) && nat_lan("rt2", "n1", 80);
}

bool nat_setup(const char *tag) {
    snprintf(prefix, sizeof prefix, "%s%d", tag, (int) getpid());
    atexit(cleanup);
    if (getuid() != 0 || !make_all()) {
        cleanup();
        return false;
    }
    return true;
}

bool nat_spawn_in(h_proc_t *proc, const char *host, char *const *args) {
    char ns[48];
    snprintf(ns, sizeof ns, "%s%s", prefix, host);
    return h_spawn_in_netns(proc, ns, args);
}

bool nat_start_master(h_proc_t *master, const char *bin, char *const *extra) {
    char *args[16] = {(char *) bin, "--listen", "10.79.0.1:0"};
    int n = 3;
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 15; i++) args[n++] = extra[i];
    args[n] = NULL;
    snprintf(master_log, sizeof master_log, "/tmp/%s.master.log", prefix);
    h_stderr_path = master_log;
    if (!nat_spawn_in(master, "h0", args)) return false;
    char line[256];
    if (!h_read_line(master, line, sizeof line, 20000)) return false;
    const char *colon = strrchr(line, ':');
    if (colon == NULL) return false;
    snprintf(master_addr, sizeof master_addr, "10.79.0.1:%d", atoi(colon + 1));
    return true;
}

const char *nat_master_log(void) { return master_log; }

const char *nat_master_addr(void) { return master_addr; }

long nat_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

bool nat_start_peer(nat_peer_t *x, int shard, const char *name, const char *host, const char *peer_bin) {
    x->name = name;
    x->connect = -1;
    x->running = true;
    char sh[8];
    snprintf(sh, sizeof sh, "%d", shard);
    snprintf(x->log, sizeof x->log, "/tmp/%s.%d.log", prefix, shard);
    h_stderr_path = x->log;
    char *args[] = {(char *) peer_bin, master_addr, sh, "100000", NULL}; /* steps until the test ends it */
    return nat_spawn_in(&x->p, host, args);
}

static void take_line(nat_peer_t *x, const char *line) {
    unsigned step;
    unsigned long long rev, hash;
    int r;
    if (sscanf(line, "step %u rev %llu hash %llx", &step, &rev, &hash) == 3 && step <= NAT_MAX_STEPS) {
        x->hash[step] = hash;
        x->at[step] = nat_now_ms();
        x->steps = step;
    } else if (sscanf(line, "connect %d", &r) == 1) {
        x->connect = r;
    } else if (strncmp(line, "error ", 6) == 0) {
        fprintf(stderr, "%s: %s\n", x->name, line);
        x->errors++;
    }
}

bool nat_pump(nat_peer_t *peers, int n, int ms, bool (*cond)(void)) {
    long end = nat_now_ms() + ms;
    char line[256];
    while (nat_now_ms() < end) {
        if (cond != NULL && cond()) return true;
        for (int i = 0; i < n; i++) {
            nat_peer_t *x = &peers[i];
            if (!x->running) continue;
            while (h_read_line(&x->p, line, sizeof line, 2)) take_line(x, line);
        }
    }
    return cond != NULL && cond();
}

long nat_slowest_step(const nat_peer_t *peers, int members, long from) {
    long worst = 0;
    for (int m = 0; m < members; m++)
        for (unsigned s = 2; s <= peers[m].steps; s++)
            if (peers[m].at[s] >= from && peers[m].at[s] - peers[m].at[s - 1] > worst)
                worst = peers[m].at[s] - peers[m].at[s - 1];
    return worst;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *) a, y = *(const long *) b;
    return x < y ? -1 : x > y;
}

long nat_median_step(const nat_peer_t *peers) {
    static long d[NAT_MAX_STEPS];
    size_t n = 0;
    for (unsigned s = 2; s <= peers[0].steps; s++) d[n++] = peers[0].at[s] - peers[0].at[s - 1];
    qsort(d, n, sizeof *d, cmp_long);
    return n == 0 ? 0 : d[n / 2];
}

unsigned nat_check_steps(nat_peer_t *peers, int n) {
    for (int i = 0; i < n; i++)
        if (peers[i].running) h_kill(&peers[i].p, SIGKILL);
    nat_pump(peers, n, 200, NULL);
    unsigned compared = 0;
    for (unsigned s = 1; s <= NAT_MAX_STEPS; s++) {
        const nat_peer_t *ref = NULL; /* the first peer that ran step s */
        for (int i = 0; i < n; i++) {
            if (peers[i].connect != 0 || s > peers[i].steps || peers[i].hash[s] == 0) continue;
            if (ref == NULL) {
                ref = &peers[i];
                continue;
            }
            CHECK_EQ_U64(peers[i].hash[s], ref->hash[s]);
            compared++;
        }
    }
    return compared;
}

bool nat_log_has(const char *path, const char *needle) {
    char *text = h_read_file(path);
    bool found = text != NULL && strstr(text, needle) != NULL;
    if (!found) fprintf(stderr, "%s lacks '%s'\n", path, needle);
    free(text);
    return found;
}

void nat_remove_logs(nat_peer_t *peers, int n) {
    for (int i = 0; i < n; i++)
        if (peers[i].log[0] != '\0') unlink(peers[i].log);
    unlink(master_log);
}
