/* ar_bench: drives pccl-master and ar_bench_peer processes for the all-reduce benchmarks; prints
 * plain result lines that allreduce_bench.sh turns into CSV rows.
 *   ar_bench MASTER_BIN PEER_BIN busbw   [options]  -> "busbw SIZE_MIB MEDIAN_US MIN_US CPU_US SLEEPS" per size
 *     (MEDIAN_US, MIN_US: the slowest peer's; CPU_US: the sum over the peers of each one's median
 *     user + system time per op, every thread; SLEEPS: the same sum of voluntary context switches);
 *     with --admit-all also first "admit SECONDS MASTER_CPU_MS" (all peers in, and the master's CPU
 *     for it) and last "master CPU_MS_PER_OP HWM_KB" (the master's CPU over the timed and untimed
 *     ops, per op, and its peak RSS); without it only busbw lines, as callers that take every
 *     line's third field expect
 *   ar_bench MASTER_BIN PEER_BIN failure [options]  -> "failure MEDIAN_MS MAX_MS OP_MEDIAN_MS TRIALS"
 *   ar_bench MASTER_BIN PEER_BIN rounds [options]   -> "rounds MEDIAN_MS MAX_MS FAILED" over --iters
 *     topology rounds: pcclUpdateTopology on every peer (the pools reconnected) and the first 4 KiB
 *     all-reduce after it, from the command to the last peer's answer
 * options: --peers N  --sizes MIB,MIB,..  --warmup W  --iters K  --pool P (0, the default: the
 *          library's default pool, what a user gets)  --quant
 *          --parts P --inflight K  (pcclAllReduceMultipleWithRetry: each size cut into P ops; P
 *          "gpt2": a GPT-2-124M-shaped model's 148 tensors, --sizes 474.7001953125, ar_bench_peer.c)
 *          --netns NS0,NS1,..  (peer i runs in namespace i, the master in NS0)  --ip A.B.C.  (peer
 *          i's address is A.B.C.(i+1); default: everything on 127.0.0.1)  --trials T --mib M
 *          --admit-all  (the first peer alone, then every other one connects at once and one
 *          topology round admits them all; default: one by one, a round each)
 * Failure latency: SIGKILL of a random peer at a random moment inside a float32 all-reduce of M
 * MiB; the time from the kill to the last survivor's error return (CLOCK_MONOTONIC, same clock
 * in every process). */
#include <dirent.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"

#define MAXP 128

static struct {
    const char *master_bin, *peer_bin, *ip;
    char *netns[MAXP];
    int nnetns, peers, warmup, iters, pool, quant, trials, parts, inflight, admit_all;
    const char *cut; /* --parts as given: a number, or a model's name */
    double sizes[16], mib;
    int nsizes;
} o = {.peers = 2, .warmup = 1, .iters = 5, .pool = 0, .trials = 20, .mib = 16};

static h_proc_t master, peer[MAXP];
static int npeers, port;
static unsigned long long next_tag = 1; /* every peer must use the same tags */
static char master_ip[32] = "127.0.0.1";

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static const char *ip_bin(void) {
    static const char *c[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"};
    for (int i = 0; i < 4; i++)
        if (access(c[i], X_OK) == 0) return c[i];
    return "ip";
}

/* argv for prog in namespace ns (or directly). */
static bool spawn_in(h_proc_t *p, int ns, char **args) {
    char *argv[16];
    int n = 0;
    if (o.nnetns > 0) {
        argv[n++] = (char *) ip_bin();
        argv[n++] = "netns";
        argv[n++] = "exec";
        argv[n++] = o.netns[ns % o.nnetns];
    }
    for (int i = 0; args[i] != NULL && n < 15; i++) argv[n++] = args[i];
    argv[n] = NULL;
    return h_spawn(p, argv);
}

static bool read_word(h_proc_t *p, const char *word, char *line, size_t n, int timeout_ms) {
    if (!h_read_line(p, line, n, timeout_ms)) {
        fprintf(stderr, "ar_bench: no '%s' from pid %d\n", word, (int) p->pid);
        return false;
    }
    if (strncmp(line, word, strlen(word)) != 0) {
        fprintf(stderr, "ar_bench: pid %d said '%s' (wanted %s)\n", (int) p->pid, line, word);
        return false;
    }
    return true;
}

static bool update_all(void) {
    char line[128];
    bool ok = true;
    for (int i = 0; i < npeers; i++) h_send(&peer[i], "update");
    for (int i = 0; i < npeers; i++) ok = read_word(&peer[i], "update", line, sizeof line, 60000) && atoi(line + 7) == 0 && ok;
    return ok;
}

static bool add_peer(int slot) {
    char addr[64], pool[16];
    snprintf(addr, sizeof addr, "%s:%d", master_ip, port);
    snprintf(pool, sizeof pool, "%d", o.pool);
    char *args[] = {(char *) o.peer_bin, addr, pool, NULL};
    h_proc_t *p = &peer[npeers];
    /* Peers' logs (warnings after kills) go nowhere, or to AR_BENCH_PEER_LOG.N when set. */
    static char logpath[256];
    static int nlogs;
    const char *logdir = getenv("AR_BENCH_PEER_LOG");
    if (logdir != NULL) snprintf(logpath, sizeof logpath, "%s.%d", logdir, nlogs++);
    h_stderr_path = logdir != NULL ? logpath : "/dev/null";
    if (!spawn_in(p, slot, args) || !h_send(p, "connect")) return false;
    char line[128];
    bool in = npeers == 0 && h_read_line(p, line, sizeof line, 30000);
    bool agreed = true;
    /* The newcomer's answer is read after every round, whatever the others said: on a lossy
     * path (50 ms, 1%) a round failed for the old peers yet admitted the newcomer, which then
     * waits for commands; a next round waits for its vote, and reading only after a round that
     * all agreed on hung here. */
    for (int k = 0; !in && k < 100; k++) {
        agreed = update_all();
        in = h_read_line(p, line, sizeof line, k < 10 ? 200 : 1000);
    }
    if (!in || strcmp(line, "connect 0") != 0) {
        fprintf(stderr, "ar_bench: a peer could not join: %s\n", in ? line : "(no answer)");
        return false;
    }
    npeers++;
    /* A failed round left the old peers without links: one more, newcomer included. */
    for (int k = 0; !agreed && k < 10; k++) agreed = update_all();
    if (!agreed) fprintf(stderr, "ar_bench: no topology round succeeded after a join\n");
    return agreed;
}

/* The master's CPU so far, in ms, every thread (Linux /proc/PID/task/TID/schedstat: nanoseconds on
 * a CPU; /proc/PID/stat's clock ticks are 10 ms, too coarse for one op), or -1. */
static double master_cpu_ms(void) {
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task", (int) master.pid);
    DIR *d = opendir(path);
    if (d == NULL) return -1;
    double ms = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char f[96 + 256 + 16];
        snprintf(f, sizeof f, "%s/%s/schedstat", path, e->d_name);
        FILE *fp = fopen(f, "r");
        unsigned long long ns = 0;
        if (fp != NULL && fscanf(fp, "%llu", &ns) == 1) ms += (double) ns / 1e6;
        if (fp != NULL) fclose(fp);
    }
    closedir(d);
    return ms;
}

/* The master's peak RSS in KiB (VmHWM), or -1. */
static long master_hwm_kb(void) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int) master.pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "VmHWM:", 6) == 0) kb = atol(line + 6);
    fclose(f);
    return kb;
}

/* --admit-all: the other peers are spawned first; then every one connects at once, and once the
 * master has them all pending (its log) the members' topology round admits them together. */
static char master_log[256];

static bool admit_all(void) {
    char addr[64], pool[16], line[128];
    snprintf(addr, sizeof addr, "%s:%d", master_ip, port);
    snprintf(pool, sizeof pool, "%d", o.pool);
    char *args[] = {(char *) o.peer_bin, addr, pool, NULL};
    int want = o.peers;
    for (int i = npeers; i < want; i++) {
        h_stderr_path = "/dev/null";
        if (!spawn_in(&peer[i], i, args)) return false;
    }
    for (int i = npeers; i < want; i++) h_send(&peer[i], "connect");
    if (!h_await_log(master_log, H_LOG_PENDING, want, 120000))
        fprintf(stderr, "ar_bench: not every peer reached the master within 120 s\n");
    for (int round = 0; npeers < want && round < 20; round++) {
        if (!update_all()) continue;
        int w = npeers; /* the admitted move to the front: members first */
        for (int i = npeers; i < want; i++) {
            if (!h_read_line(&peer[i], line, sizeof line, i == w ? 30000 : 2000)) continue;
            if (strcmp(line, "connect 0") != 0) {
                fprintf(stderr, "ar_bench: a peer could not join: %s\n", line);
                return false;
            }
            h_proc_t t = peer[w];
            peer[w] = peer[i];
            peer[i] = t;
            w++;
        }
        npeers = w;
    }
    if (npeers < want) fprintf(stderr, "ar_bench: %d peers not admitted\n", want - npeers);
    return npeers == want;
}

static bool start(void) {
    char listen[48];
    if (o.ip != NULL) snprintf(master_ip, sizeof master_ip, "%s1", o.ip);
    snprintf(listen, sizeof listen, "%s:0", master_ip);
    /* AR_BENCH_MASTER_ARGS: extra words for the master (e.g. "--secret-file F --encrypt"); the
     * peers take theirs from the environment (PCCL_SECRET_FILE, PCCL_ENCRYPT). */
    char *args[16] = {(char *) o.master_bin, "--listen", listen, "--log-level", "error", NULL};
    static char extra[512];
    const char *env = getenv("AR_BENCH_MASTER_ARGS");
    snprintf(extra, sizeof extra, "%s", env != NULL ? env : "");
    int na = 5;
    for (char *w = strtok(extra, " "); w != NULL && na < 15; w = strtok(NULL, " ")) args[na++] = w;
    args[na] = NULL;
    if (o.admit_all) { /* its "pending admission" lines tell when every peer is waiting */
        args[4] = "info";
        snprintf(master_log, sizeof master_log, "/tmp/ar_bench_master.%d.log", (int) getpid());
        h_stderr_path = master_log;
    }
    if (!spawn_in(&master, 0, args)) return false;
    char line[256];
    if (!h_read_line(&master, line, sizeof line, 20000)) return false;
    const char *colon = strrchr(line, ':');
    port = colon ? atoi(colon + 1) : 0;
    if (port <= 0) return false;
    double c0 = master_cpu_ms();
    uint64_t t0 = now_us();
    if (o.admit_all) {
        if (!add_peer(0) || !admit_all()) return false;
    } else {
        for (int i = 0; i < o.peers; i++)
            if (!add_peer(i)) return false;
    }
    if (o.admit_all) printf("admit %.3f %.1f\n", (double) (now_us() - t0) / 1e6, master_cpu_ms() - c0);
    fflush(stdout);
    return true;
}

static void stop(void) {
    for (int i = 0; i < npeers; i++) h_send(&peer[i], "quit");
    for (int i = 0; i < npeers; i++) h_wait(&peer[i], 10000);
    h_kill(&master, SIGTERM);
    h_wait(&master, 5000);
    if (master_log[0]) unlink(master_log);
}

static int busbw(void) {
    double c0 = master_cpu_ms();
    int ops = 0;
    for (int s = 0; s < o.nsizes; s++) {
        ops += o.warmup + o.iters;
        size_t count = (size_t) (o.sizes[s] * 1048576.0 / 4.0);
        char cmd[128], line[256];
        if (o.parts > 0)
            snprintf(cmd, sizeof cmd, "multi %llu %zu %s %d %d %d", next_tag, count, o.cut, o.inflight, o.warmup,
                     o.iters);
        else
            snprintf(cmd, sizeof cmd, "bench %llu %zu %d %d %d", next_tag, count, o.warmup, o.iters, o.quant);
        next_tag += (unsigned long long) (o.warmup + o.iters) * (unsigned long long) (o.parts > 0 ? o.parts : 1);
        for (int i = 0; i < npeers; i++) h_send(&peer[i], cmd);
        uint64_t med = 0, min = 0, cpu = 0, sleeps = 0;
        for (int i = 0; i < npeers; i++) {
            int r;
            unsigned long long m, n, c, w;
            if (!read_word(&peer[i], "bench", line, sizeof line, 600000) ||
                sscanf(line, "bench %d %llu %llu %llu %llu", &r, &m, &n, &c, &w) != 5 || r != 0) {
                fprintf(stderr, "ar_bench: bench failed: %s\n", line);
                return 1;
            }
            if (m > med) med = m; /* the slowest peer's median: the op is collective */
            if (n > min) min = n;
            cpu += c;
            sleeps += w;
        }
        printf("busbw %g %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", o.sizes[s], med, min, cpu, sleeps);
        fflush(stdout);
    }
    if (o.admit_all) printf("master %.3f %ld\n", ops > 0 ? (master_cpu_ms() - c0) / ops : 0.0, master_hwm_kb());
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

static int failure(void) {
    size_t count = (size_t) (o.mib * 1048576.0 / 4.0);
    char cmd[64], line[256];
    snprintf(cmd, sizeof cmd, "bench %llu %zu 1 5 0", next_tag, count);
    next_tag += 6;
    uint64_t op_med = 0;
    for (int i = 0; i < npeers; i++) h_send(&peer[i], cmd);
    for (int i = 0; i < npeers; i++) {
        unsigned long long m, n;
        int r;
        if (!read_word(&peer[i], "bench", line, sizeof line, 120000) || sscanf(line, "bench %d %llu %llu", &r, &m, &n) != 3)
            return 1;
        if (m > op_med) op_med = m;
    }
    uint64_t lat[256];
    int nlat = 0;
    srand(4242);
    for (int t = 0; t < o.trials * 3 && nlat < o.trials; t++) {
        snprintf(cmd, sizeof cmd, "arg %llu %zu", next_tag++, count);
        for (int i = 0; i < npeers; i++) h_send(&peer[i], cmd);
        for (int i = 0; i < npeers; i++)
            if (!read_word(&peer[i], "go", line, sizeof line, 60000)) return 1;
        usleep((useconds_t) ((uint64_t) rand() % (op_med * 8 / 10 + 1)));
        int victim = rand() % npeers;
        h_kill(&peer[victim], SIGKILL);
        uint64_t t_kill = now_us();
        h_wait(&peer[victim], 5000);
        for (int k = victim; k + 1 < npeers; k++) peer[k] = peer[k + 1];
        npeers--;
        uint64_t worst = 0;
        int failed = 0;
        for (int i = 0; i < npeers; i++) {
            int r;
            unsigned long long call, end;
            if (!read_word(&peer[i], "ar", line, sizeof line, 30000) || sscanf(line, "ar %d %llu %llu", &r, &call, &end) != 3)
                return 1;
            failed += r != 0;
            if (end > t_kill && end - t_kill > worst) worst = end - t_kill;
        }
        if (failed == npeers) lat[nlat++] = worst; /* else the kill came after the outcome: not counted */
        bool up = false;
        for (int k = 0; k < 10 && !up; k++) up = update_all();
        if (!up || !add_peer(victim)) return 1;
    }
    if (nlat == 0) return 1;
    qsort(lat, (size_t) nlat, sizeof lat[0], cmp_u64);
    printf("failure %.3f %.3f %.3f %d\n", (double) lat[nlat / 2] / 1e3, (double) lat[nlat - 1] / 1e3,
           (double) op_med / 1e3, nlat);
    return 0;
}

/* Topology rounds once everyone joined: what a round costs on the path (pool connects included). */
static int rounds(void) {
    uint64_t t[1000];
    int n = 0, failed = 0;
    for (int r = 0; r < o.iters && r < 1000; r++) {
        uint64_t t0 = now_us();
        bool ok = update_all();
        char cmd[96], line[256];
        snprintf(cmd, sizeof cmd, "bench %llu 1024 0 1 0", next_tag++);
        bool sent = ok; /* every answer is read, so that the next round reads its own */
        for (int i = 0; sent && i < npeers; i++) h_send(&peer[i], cmd);
        for (int i = 0; sent && i < npeers; i++)
            ok = read_word(&peer[i], "bench", line, sizeof line, 60000) && atoi(line + 6) == 0 && ok;
        if (ok) t[n++] = now_us() - t0;
        else failed++;
    }
    if (n == 0) return 1;
    qsort(t, (size_t) n, sizeof t[0], cmp_u64);
    printf("rounds %.1f %.1f %d\n", (double) t[n / 2] / 1e3, (double) t[n - 1] / 1e3, failed);
    return 0;
}

static void split(char *s, char **out, int *n, int max) {
    *n = 0;
    for (char *t = strtok(s, ","); t != NULL && *n < max; t = strtok(NULL, ",")) out[(*n)++] = t;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: ar_bench MASTER_BIN PEER_BIN busbw|failure|rounds [options]\n");
        return 2;
    }
    o.master_bin = argv[1];
    o.peer_bin = argv[2];
    for (int i = 4; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(a, "--quant") == 0) {
            o.quant = 1;
            continue;
        }
        if (strcmp(a, "--admit-all") == 0) {
            o.admit_all = 1;
            continue;
        }
        i++;
        if (strcmp(a, "--peers") == 0) o.peers = atoi(v);
        else if (strcmp(a, "--warmup") == 0) o.warmup = atoi(v);
        else if (strcmp(a, "--iters") == 0) o.iters = atoi(v);
        else if (strcmp(a, "--pool") == 0) o.pool = atoi(v);
        else if (strcmp(a, "--trials") == 0) o.trials = atoi(v);
        else if (strcmp(a, "--parts") == 0) {
            o.cut = v;
            o.parts = strcmp(v, "gpt2") == 0 ? 148 : atoi(v); /* tags used per call: the model's tensors */
        }
        else if (strcmp(a, "--inflight") == 0) o.inflight = atoi(v);
        else if (strcmp(a, "--mib") == 0) o.mib = atof(v);
        else if (strcmp(a, "--ip") == 0) o.ip = v;
        else if (strcmp(a, "--netns") == 0) split(argv[i], o.netns, &o.nnetns, MAXP);
        else if (strcmp(a, "--sizes") == 0) {
            char *t[16];
            split(argv[i], t, &o.nsizes, 16);
            for (int k = 0; k < o.nsizes; k++) o.sizes[k] = atof(t[k]);
        } else {
            fprintf(stderr, "ar_bench: unknown option %s\n", a);
            return 2;
        }
    }
    if (o.peers < 2 || o.peers > MAXP || o.trials > 256) return 2;
    const char *wd = getenv("AR_BENCH_WATCHDOG_S"); /* the harness kills everything after this */
    h_init(wd != NULL && atoi(wd) > 0 ? atoi(wd) : 900);
    if (!start()) {
        fprintf(stderr, "ar_bench: could not start the master and %d peers\n", o.peers);
        if (master_log[0]) unlink(master_log);
        return 1;
    }
    int rc = strcmp(argv[3], "failure") == 0 ? failure() : strcmp(argv[3], "rounds") == 0 ? rounds() : busbw();
    stop();
    return rc;
}
