/* pprof_stats.c: the built-in stats plugin (PCCL_PROFILER_PLUGIN=stats): per kind of operation,
 * counts, bytes, retries, aborts and a latency histogram (p50 / p90 / p99), printed on stderr at
 * pcclDestroyCommunicator and every PCCL_PROFILER_STATS_INTERVAL_S seconds when that is set.
 *
 * Kinds: every API call, the collective, its four phases, sends and receives, the shared-state
 * sync, tensor fetches, hashing, topology rounds and bandwidth measurements. Counters are atomic
 * adds into fixed arrays; the histogram has 4 buckets per power of two of nanoseconds (a
 * percentile is its bucket's middle: within ~10% of the true value). */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profiler/pprof_builtin.h"
#include "profiler/pprof_pool.h"

#define NKINDS 20
#define NBUCKETS 256 /* 64 powers of two x 4 */

typedef struct kind_stats_t {
    _Atomic uint64_t count, ns, bytes, retries, aborts;
    _Atomic uint64_t hist[NBUCKETS];
} kind_stats_t;

typedef struct stats_t {
    pprof_pool_t pool;
    kind_stats_t kinds[NKINDS];
    uint64_t comm_id;
    uint32_t interval_s;
    pthread_t printer;
    pthread_mutex_t lock; /* the printer's sleep, not the data path */
    pthread_cond_t wake;
    bool stop, printing;
} stats_t;

static const char *kind_names[NKINDS] = {
    "pcclAllReduce", "pcclAllReduceAsync", "pcclAwaitAsyncReduce", "pcclAllReduceMultipleWithRetry",
    "pcclSynchronizeSharedState", "pcclUpdateTopology", "pcclOptimizeTopology", "pcclArePeersPending",
    "all-reduce", "  wait for INIT", "  reduce-scatter", "  all-gather", "  wait for DONE", "  send",
    "  recv", "shared-state sync", "  fetch tensor", "  hash", "topology round", "bandwidth"};

static uint32_t kind_of(const pprof_ev_t *e) {
    switch (e->type) {
    case pcclProfilerEventApi: return e->kind < 8 ? e->kind : 0;
    case pcclProfilerEventColl: return 8;
    case pcclProfilerEventPhase: return 9 + (e->kind & 3);
    case pcclProfilerEventTransfer: return 13 + (e->kind & 1);
    case pcclProfilerEventSync: return 15;
    case pcclProfilerEventTensor: return 16;
    case pcclProfilerEventHash: return 17;
    case pcclProfilerEventTopology: return 18;
    default: return 19;
    }
}

static uint32_t bucket(uint64_t ns) {
    if (ns < 4) return (uint32_t) ns;
    uint32_t lg = 63u - (uint32_t) __builtin_clzll(ns);
    return lg * 4 + (uint32_t) ((ns >> (lg - 2)) & 3);
}

/* The lower bound of a bucket, in ns. */
static double bucket_ns(uint32_t b) {
    if (b < 4) return b;
    uint32_t lg = b / 4, sub = b % 4;
    return (double) (1ull << lg) * (1.0 + sub / 4.0);
}

static double percentile(const uint64_t *h, uint64_t n, double q) {
    uint64_t want = (uint64_t) (q * (double) n + 0.999999), seen = 0;
    if (want == 0) want = 1;
    for (uint32_t b = 0; b < NBUCKETS; b++) {
        seen += h[b];
        if (seen >= want) return b + 1 < NBUCKETS ? (bucket_ns(b) + bucket_ns(b + 1)) / 2 : bucket_ns(b);
    }
    return 0;
}

static void print_stats(stats_t *s, const char *when) {
    char out[8192];
    int k = snprintf(out, sizeof out, "pccl stats (communicator %" PRIx64 ", %s):\n%-32s %8s %11s %11s %11s %11s %14s %7s %6s\n",
                     s->comm_id, when, "kind", "count", "mean us", "p50 us", "p90 us", "p99 us", "bytes", "retries",
                     "aborts");
    for (uint32_t i = 0; i < NKINDS && k < (int) sizeof out - 200; i++) {
        kind_stats_t *ks = &s->kinds[i];
        uint64_t n = atomic_load(&ks->count);
        if (n == 0) continue;
        uint64_t h[NBUCKETS], hn = 0;
        for (uint32_t b = 0; b < NBUCKETS; b++) hn += h[b] = atomic_load(&ks->hist[b]);
        k += snprintf(out + k, sizeof out - (size_t) k, "%-32s %8" PRIu64 " %11.1f %11.1f %11.1f %11.1f %14" PRIu64 " %7" PRIu64
                      " %6" PRIu64 "\n", kind_names[i], n, (double) atomic_load(&ks->ns) / (double) n / 1000.0,
                      percentile(h, hn, 0.5) / 1000.0, percentile(h, hn, 0.9) / 1000.0, percentile(h, hn, 0.99) / 1000.0,
                      atomic_load(&ks->bytes), atomic_load(&ks->retries), atomic_load(&ks->aborts));
    }
    fputs(out, stderr);
}

static void *printer_main(void *arg) {
    stats_t *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += s->interval_s;
        while (!s->stop && pthread_cond_timedwait(&s->wake, &s->lock, &dl) == 0) {
        }
        if (s->stop) break;
        pthread_mutex_unlock(&s->lock);
        print_stats(s, "interval");
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static int stats_init(void **ctx, uint64_t comm_id, uint32_t *mask, const pcclProfilerCommInfo_t *info,
                      pcclProfilerLogFn log) {
    (void) info;
    stats_t *s = calloc(1, sizeof *s);
    if (s == NULL || pprof_pool_init(&s->pool, 4096) != 0) {
        free(s);
        return -1;
    }
    s->comm_id = comm_id;
    const char *iv = getenv("PCCL_PROFILER_STATS_INTERVAL_S");
    s->interval_s = iv != NULL ? (uint32_t) strtoul(iv, NULL, 10) : 0;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    if (s->interval_s > 0) {
        if (pthread_create(&s->printer, NULL, printer_main, s) != 0) s->interval_s = 0;
        else s->printing = true;
    }
    *mask = PCCL_PROFILER_MASK_ALL;
    *ctx = s;
    log(pcclProfilerLogInfo, "stats: on (interval %u s)", s->interval_s);
    return 0;
}

static int stats_start(void *ctx, void **handle, const pcclProfilerEventDescr_t *d) {
    stats_t *s = ctx;
    pprof_handle_t *h = pprof_pool_get(&s->pool, s);
    *handle = h;
    if (h == NULL) return 0;
    pprof_ev_fill(h, d);
    h->ev.start_ns = pprof_now_ns();
    return 0;
}

static int stats_state(void *handle, pcclProfilerState_t st, const pcclProfilerStateArgs_t *a) {
    pprof_handle_t *h = handle;
    if (h == NULL) return 0;
    if (st == pcclProfilerStateRetried) h->ev.retries++;
    else if (st == pcclProfilerStateAborted) h->ev.reason = a->reason;
    else if (st == pcclProfilerStateBytes) {
        h->ev.tx = a->bytes;
        h->ev.rx = a->bytes2;
    }
    return 0;
}

static int stats_stop(void *handle) {
    pprof_handle_t *h = handle;
    if (h == NULL) return 0;
    stats_t *s = h->owner;
    const pprof_ev_t *e = &h->ev;
    uint64_t ns = (uint64_t) (pprof_now_ns() - e->start_ns);
    kind_stats_t *ks = &s->kinds[kind_of(e)];
    uint64_t bytes = e->type == pcclProfilerEventTransfer || e->type == pcclProfilerEventTensor ? e->bytes
                     : e->type == pcclProfilerEventBandwidth ? 0 : e->tx + e->rx;
    atomic_fetch_add_explicit(&ks->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ks->ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&ks->bytes, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&ks->retries, e->retries, memory_order_relaxed);
    atomic_fetch_add_explicit(&ks->aborts, e->reason != 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&ks->hist[bucket(ns)], 1, memory_order_relaxed);
    pprof_pool_put(h);
    return 0;
}

static int stats_finalize(void *ctx) {
    stats_t *s = ctx;
    if (s->printing) {
        pthread_mutex_lock(&s->lock);
        s->stop = true;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->printer, NULL);
    }
    print_stats(s, "final");
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    pprof_pool_free(&s->pool);
    free(s);
    return 0;
}

const pcclProfiler_v1_t pprof_stats_plugin = {"stats", stats_init, stats_start, stats_stop, stats_state, stats_finalize};
