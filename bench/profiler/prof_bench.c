/* prof_bench: the profiler's cost (make bench). CSV rows name,value,unit,baseline,ratio.
 *   1. Per-op time of float32 Sum all-reduces of 1 MiB and 64 MiB, 2 peers on loopback, in four
 *      configurations at once (each its own pccl-master and 2 ar_bench_peer processes, set up by
 *      the environment): no plugin (the baseline), an empty plugin with mask 0, the empty plugin
 *      with every event on, the trace plugin. Batches run interleaved (none, mask 0, all, trace,
 *      then rotated), one configuration at a time, over ROUNDS fresh sets of groups; a
 *      configuration's value is the median of its batches' medians (peer 0's clock), the ratio
 *      is against no plugin in the same run; the
 *      _best rows take each configuration's fastest batch instead (robust on a loaded machine).
 *   2. The event sites themselves, in this process: one API start + stop with mask 0, with an
 *      empty plugin that wants every event and with the trace plugin, against the same loop
 *      without a site.
 * Usage: prof_bench MASTER_BIN PEER_BIN EMPTY_PLUGIN */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ccoip/peer/ccoip_prof.h"
#include "profiler/pprof_builtin.h"
#include "tests/ccoip/harness.h"

#define NCONF 4
#define ROUNDS 3

static const char *conf_names[NCONF] = {"none", "empty_mask0", "empty_all", "trace"};
static h_proc_t masters[NCONF], peers[NCONF][2];
static unsigned long long tags[NCONF];

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t) n, sizeof *v, cmp_d);
    return n ? v[(n - 1) / 2] : 0;
}

static void set_env(int c, const char *empty, const char *tmp) {
    unsetenv("PCCL_PROFILER_PLUGIN");
    unsetenv("PCCL_TRACE_FILE");
    unsetenv("EMPTYPROF_MASK");
    if (c == 1 || c == 2) {
        setenv("PCCL_PROFILER_PLUGIN", empty, 1);
        setenv("EMPTYPROF_MASK", c == 1 ? "0" : "0x1ff", 1);
    } else if (c == 3) {
        char pattern[600];
        snprintf(pattern, sizeof pattern, "%s/trace-%%p.json", tmp);
        setenv("PCCL_TRACE_FILE", pattern, 1);
    }
}

static bool start_group(int c, const char *master_bin, const char *peer_bin) {
    h_stderr_path = "/dev/null";
    int port = h_start_master(&masters[c], master_bin, NULL);
    if (port <= 0) return false;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    for (int i = 0; i < 2; i++) {
        char *argv[] = {(char *) peer_bin, addr, "1", NULL};
        h_stderr_path = "/dev/null";
        if (!h_spawn(&peers[c][i], argv) || !h_send(&peers[c][i], "connect") || !h_admit(peers[c], i, &peers[c][i]))
            return false;
    }
    tags[c] = 1;
    return true;
}

/* One batch of k all-reduces of count floats in configuration c: peer 0's median us. */
static double batch(int c, size_t count, int k) {
    char cmd[128], line[256];
    snprintf(cmd, sizeof cmd, "bench %llu %zu 1 %d 0", tags[c], count, k);
    tags[c] += (unsigned long long) k + 1;
    double med = -1;
    for (int i = 0; i < 2; i++) h_send(&peers[c][i], cmd);
    for (int i = 0; i < 2; i++) {
        int r = -1;
        double m = 0, mn = 0;
        if (!h_read_line(&peers[c][i], line, sizeof line, 300000) || sscanf(line, "bench %d %lf %lf", &r, &m, &mn) != 3 ||
            r != 0) {
            fprintf(stderr, "prof_bench: %s peer %d: '%s'\n", conf_names[c], i, line);
            return -1;
        }
        if (i == 0) med = m;
    }
    return med;
}

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e9 + (double) ts.tv_nsec;
}

static int e_init(void **c, uint64_t id, uint32_t *m, const pcclProfilerCommInfo_t *i, pcclProfilerLogFn l) {
    (void) c, (void) id, (void) i, (void) l;
    *m = PCCL_PROFILER_MASK_ALL;
    return 0;
}
static int e_start(void *c, void **h, const pcclProfilerEventDescr_t *d) {
    (void) c, (void) d;
    *h = NULL;
    return 0;
}
static int e_stop(void *h) { return h != NULL; }
static int e_state(void *h, pcclProfilerState_t s, const pcclProfilerStateArgs_t *a) {
    (void) h, (void) s, (void) a;
    return 0;
}
static int e_fin(void *c) { return c != NULL; }
static const pcclProfiler_v1_t empty_plugin = {"empty", e_init, e_start, e_stop, e_state, e_fin};
static void nolog(pcclProfilerLogLevel_t level, const char *fmt, ...) { (void) level, (void) fmt; }

/* ns per iteration of: nothing (mode 0), one API event site start + end (mode 1). */
static double site_ns(pprof_t *const volatile *pp, int mode, long n) {
    volatile uint64_t sink = 0;
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            const pprof_t *p = *pp;
            if (mode) {
                void *h = ccoip_prof_api(p, pcclProfilerApiAllReduce, (uint64_t) i, 0);
                ccoip_prof_api_end(p, h, pcclSuccess);
            }
            sink += (uint64_t) i;
        }
        double t = (now_ns() - t0) / (double) n + (double) (sink & 0); /* sink keeps the loop */
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: prof_bench MASTER_BIN PEER_BIN EMPTY_PLUGIN\n");
        return 2;
    }
    h_init(900);
    char empty[4096], tmp[] = "/tmp/prof_bench.XXXXXX";
    if (realpath(argv[3], empty) == NULL || mkdtemp(tmp) == NULL) return 2;

    /* The event sites, in process. */
    pprof_t off = {0}, on = {PCCL_PROFILER_MASK_ALL, &empty_plugin, NULL, NULL};
    pprof_t *const volatile p_off = &off, *const volatile p_on = &on;
    const long n = 20 * 1000 * 1000;
    double base = site_ns(&p_off, 0, n), s_off = site_ns(&p_off, 1, n), s_on = site_ns(&p_on, 1, n);
    printf("profiler_site_mask0,%.3f,ns/event,%.3f,%.3f\n", s_off, base, s_off / base);
    printf("profiler_site_empty_plugin,%.3f,ns/event,%.3f,%.3f\n", s_on, base, s_on / base);
    /* The trace plugin itself: a ring big enough that nothing is dropped while we time it. */
    char pattern[600];
    snprintf(pattern, sizeof pattern, "%s/site-%%p.json", tmp);
    setenv("PCCL_TRACE_FILE", pattern, 1);
    setenv("PCCL_TRACE_BUFFER_EVENTS", "262144", 1);
    pprof_t tr = {0};
    uint32_t mask = 0;
    pcclProfilerCommInfo_t info = {PCCL_PROFILER_VERSION, 0, 1, (uint32_t) getpid(), "bench"};
    if (pprof_trace_plugin.init(&tr.ctx, 1, &mask, &info, nolog) == 0) {
        tr.mask = mask;
        tr.plugin = &pprof_trace_plugin;
        pprof_t *const volatile p_tr = &tr;
        double s_tr = site_ns(&p_tr, 1, 40000); /* 5 x 40,000 events: under the ring's size */
        pprof_trace_plugin.finalize(tr.ctx);
        printf("profiler_site_trace_plugin,%.3f,ns/event,%.3f,%.3f\n", s_tr, base, s_tr / base);
    }
    unsetenv("PCCL_TRACE_FILE");
    unsetenv("PCCL_TRACE_BUFFER_EVENTS");
    fflush(stdout);

    /* A group's TCP connections keep their state (windows, buffers) from batch to batch, so one
     * set of groups carries a per-group bias: ROUNDS fresh sets, batches of every round pooled. */
    struct {
        const char *name;
        size_t count;
        int per_batch, batches; /* per round */
    } sizes[] = {{"1MiB", 1 << 18, 40, 8}, {"64MiB", 1 << 24, 2, 4}};
    double v[2][NCONF][ROUNDS * 8];
    int nv[2] = {0, 0}, rc = 0;
    for (int round = 0; round < ROUNDS && rc == 0; round++) {
        for (int c = 0; c < NCONF; c++) {
            set_env(c, empty, tmp);
            if (!start_group(c, argv[1], argv[2])) {
                fprintf(stderr, "prof_bench: cannot start configuration %s\n", conf_names[c]);
                return 1;
            }
        }
        set_env(0, empty, tmp);
        for (int s = 0; s < 2; s++)
            for (int b = 0; b < sizes[s].batches; b++, nv[s]++)
                for (int k = 0; k < NCONF; k++) {
                    int c = (k + b + round) % NCONF;
                    v[s][c][nv[s]] = batch(c, sizes[s].count, sizes[s].per_batch);
                    if (v[s][c][nv[s]] < 0) rc = 1;
                }
        for (int c = 0; c < NCONF; c++) {
            for (int i = 0; i < 2; i++) {
                h_send(&peers[c][i], "quit");
                h_wait(&peers[c][i], 10000);
            }
            h_kill(&masters[c], SIGTERM);
            h_wait(&masters[c], 5000);
        }
    }
    for (int s = 0; s < 2 && rc == 0; s++) {
        double med[NCONF], lo[NCONF];
        for (int c = 0; c < NCONF; c++) {
            med[c] = median(v[s][c], nv[s]); /* sorts v[s][c] */
            lo[c] = v[s][c][0];
        }
        for (int c = 1; c < NCONF; c++) {
            printf("profiler_allreduce_%s_%s,%.1f,us/op,%.1f,%.4f\n", sizes[s].name, conf_names[c], med[c], med[0],
                   med[c] / med[0]);
            /* The fastest batch: what a configuration costs when the machine leaves it alone. */
            printf("profiler_allreduce_%s_%s_best,%.1f,us/op,%.1f,%.4f\n", sizes[s].name, conf_names[c], lo[c], lo[0],
                   lo[c] / lo[0]);
            fprintf(stderr, "prof_bench: %s %s: %+.1f us per op (%+.2f%%) against no plugin (best batches: %+.2f%%)\n",
                    sizes[s].name, conf_names[c], med[c] - med[0], 100.0 * (med[c] / med[0] - 1),
                    100.0 * (lo[c] / lo[0] - 1));
        }
    }
    fflush(stdout);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0) fprintf(stderr, "prof_bench: could not remove %s\n", tmp);
    return rc;
}
