/* pprof_trace.c: the built-in trace plugin: Chrome trace-event JSON (Perfetto, chrome://tracing).
 *
 * PCCL_TRACE_FILE=run-%p.json (%p: the pid; a second communicator of the process adds ".2"...).
 * stop_event copies the finished event into a preallocated ring (pprof_pool.h) and returns: no
 * lock, no allocation, no I/O on the data path. A background thread drains the ring into the
 * file every 50 ms (5 ms after a drain found it over a quarter full, then doubling back);
 * finalize drains the rest and closes the JSON. A full ring drops events and says how many in
 * the file's metadata and one warning. Sizes: PCCL_TRACE_BUFFER_EVENTS (ring, default 16384
 * (~4 MiB), rounded up to a power of two), PCCL_TRACE_MASK (default: every event type).
 *
 * What it writes: one track per thread ("X" slices: API calls, collectives, transfers, syncs,
 * rounds, measurements), ring phases as async slices of their collective (they overlap by a
 * window), and a flow arrow from each collective to each of its transfers. */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profiler/pprof_builtin.h"
#include "profiler/pprof_pool.h"

#define MAX_THREADS 256

typedef struct trace_t {
    pprof_pool_t pool;
    pprof_ring_t ring;
    uint32_t pid;
    uint64_t comm_id;
    FILE *f;
    char path[512];
    char *iobuf;
    bool first; /* no event written yet: no comma */
    uint64_t written;
    pthread_t flusher;
    _Atomic uint32_t stop;
    /* Threads seen (tid, role from their first event), for the track names. */
    _Atomic uint32_t tids[MAX_THREADS];
    uint32_t roles[MAX_THREADS];
    pcclProfilerLogFn log;
} trace_t;

static const char *api_names[] = {"pcclAllReduce", "pcclAllReduceAsync", "pcclAwaitAsyncReduce",
                                  "pcclAllReduceMultipleWithRetry", "pcclSynchronizeSharedState",
                                  "pcclUpdateTopology", "pcclOptimizeTopology", "pcclArePeersPending"};
static const char *phase_names[] = {"wait for INIT", "reduce-scatter", "all-gather", "wait for DONE"};
static const char *reason_names[] = {"", "peer lost", "timeout", "master lost", "mismatch", "local failure"};

static const char *ev_name(const pprof_ev_t *e) {
    switch (e->type) {
    case pcclProfilerEventApi: return e->kind < 8 ? api_names[e->kind] : "api";
    case pcclProfilerEventColl: return "all-reduce";
    case pcclProfilerEventPhase: return e->kind < 4 ? phase_names[e->kind] : "phase";
    case pcclProfilerEventTransfer: return e->kind == pcclProfilerSend ? "send" : "recv";
    case pcclProfilerEventSync: return "shared-state sync";
    case pcclProfilerEventTensor: return "fetch tensor";
    case pcclProfilerEventHash: return "hash";
    case pcclProfilerEventTopology: return "topology round";
    case pcclProfilerEventBandwidth: return "bandwidth";
    default: return "event";
    }
}

/* The thread's role from the first event it raised: names its track. */
static void note_thread(trace_t *t, uint32_t tid, uint32_t role) {
    for (uint32_t i = 0; i < MAX_THREADS; i++) {
        uint32_t cur = atomic_load_explicit(&t->tids[i], memory_order_acquire);
        if (cur == tid) return;
        if (cur == 0) {
            uint32_t zero = 0;
            if (atomic_compare_exchange_strong(&t->tids[i], &zero, tid)) {
                t->roles[i] = role; /* read at finalize, after every thread was joined */
                return;
            }
            if (zero == tid) return;
        }
    }
}

static void put(trace_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(trace_t *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs(t->first ? "\n" : ",\n", t->f);
    t->first = false;
    vfprintf(t->f, fmt, ap);
    va_end(ap);
}

static void json_string(char *out, size_t n, const char *s) {
    size_t k = 0;
    for (; *s && k + 7 < n; s++) {
        unsigned char c = (unsigned char) *s;
        if (c == '"' || c == '\\') { out[k++] = '\\'; out[k++] = (char) c; }
        else if (c < 0x20) k += (size_t) snprintf(out + k, n - k, "\\u%04x", c);
        else out[k++] = (char) c;
    }
    out[k] = '\0';
}

/* One finished event as JSON: ts and dur in microseconds (fractions kept). */
static void write_event(trace_t *t, const pprof_ev_t *e) {
    double ts = (double) e->start_ns / 1000.0, dur = (double) (e->end_ns - e->start_ns) / 1000.0;
    char args[512];
    int k = snprintf(args, sizeof args, "\"id\":%" PRIu64 ",\"parent\":%" PRIu64, e->id, e->parent);
    switch (e->type) {
    case pcclProfilerEventApi:
        k += snprintf(args + k, sizeof args - (size_t) k, ",\"tag\":%" PRIu64 ",\"result\":%d", e->tag, e->result);
        if (e->a) k += snprintf(args + k, sizeof args - (size_t) k, ",\"count\":%" PRIu64, e->a);
        break;
    case pcclProfilerEventColl:
        k += snprintf(args + k, sizeof args - (size_t) k,
                      ",\"tag\":%" PRIu64 ",\"seq\":%" PRIu64 ",\"count\":%" PRIu64 ",\"bytes\":%" PRIu64
                      ",\"dtype\":%u,\"op\":%u,\"quantized_dtype\":%u,\"quantization\":%u,\"world\":%u,\"rank\":%u"
                      ",\"tx_bytes\":%" PRIu64 ",\"rx_bytes\":%" PRIu64 ",\"result\":%d",
                      e->tag, e->a, e->b, e->bytes, e->kind & 0xff, (e->kind >> 8) & 0xff, (e->kind >> 16) & 0xff,
                      e->kind >> 24, e->world, e->rank, e->tx, e->rx, e->result);
        break;
    case pcclProfilerEventTransfer:
        k += snprintf(args + k, sizeof args - (size_t) k,
                      ",\"tag\":%" PRIu64 ",\"offset\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"peer\":%u,\"stream\":%u",
                      e->tag, e->a, e->bytes, e->peer, e->stream);
        break;
    case pcclProfilerEventSync:
        k += snprintf(args + k, sizeof args - (size_t) k,
                      ",\"revision\":%" PRIu64 ",\"tensors\":%" PRIu64 ",\"tx_bytes\":%" PRIu64 ",\"rx_bytes\":%" PRIu64
                      ",\"result\":%d", e->a, e->b, e->tx, e->rx, e->result);
        break;
    case pcclProfilerEventTensor: {
        char name[128];
        json_string(name, sizeof name, e->name);
        k += snprintf(args + k, sizeof args - (size_t) k, ",\"tensor\":\"%s\",\"bytes\":%" PRIu64, name, e->bytes);
        break;
    }
    case pcclProfilerEventHash:
        k += snprintf(args + k, sizeof args - (size_t) k, ",\"tensors\":%" PRIu64 ",\"bytes\":%" PRIu64, e->a, e->bytes);
        break;
    case pcclProfilerEventTopology:
        k += snprintf(args + k, sizeof args - (size_t) k, ",\"round\":%" PRIu64 ",\"neighbours\":%" PRIu64, e->a, e->b);
        break;
    case pcclProfilerEventBandwidth:
        k += snprintf(args + k, sizeof args - (size_t) k, ",\"duration_ms\":%" PRIu64 ",\"bits_per_s\":%" PRIu64, e->b,
                      e->tx);
        break;
    default: break;
    }
    if (e->reason != 0 && e->reason < 6)
        k += snprintf(args + k, sizeof args - (size_t) k, ",\"aborted\":\"%s\"", reason_names[e->reason]);
    if (e->retries) snprintf(args + k, sizeof args - (size_t) k, ",\"retries\":%u", e->retries);

    if (e->type == pcclProfilerEventPhase) { /* async: phases of one collective may overlap */
        put(t, "{\"ph\":\"b\",\"cat\":\"phase\",\"name\":\"%s\",\"id\":\"0x%" PRIx64 "\",\"pid\":%u,\"tid\":%u,"
               "\"ts\":%.3f,\"args\":{%s}}", ev_name(e), e->coll, t->pid, e->tid, ts, args);
        put(t, "{\"ph\":\"e\",\"cat\":\"phase\",\"name\":\"%s\",\"id\":\"0x%" PRIx64 "\",\"pid\":%u,\"tid\":%u,"
               "\"ts\":%.3f}", ev_name(e), e->coll, t->pid, e->tid, ts + dur);
        return;
    }
    put(t, "{\"ph\":\"X\",\"cat\":\"pccl\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,"
           "\"args\":{%s}}", ev_name(e), t->pid, e->tid, ts, dur, args);
    if (e->type == pcclProfilerEventTransfer && e->coll != 0 && e->coll_tid != 0) {
        /* A flow from the collective's slice (its thread, at the transfer's start) to this one. */
        put(t, "{\"ph\":\"s\",\"cat\":\"flow\",\"name\":\"transfer\",\"id\":%" PRIu64 ",\"pid\":%u,\"tid\":%u,"
               "\"ts\":%.3f}", e->id, t->pid, e->coll_tid, ts);
        put(t, "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"flow\",\"name\":\"transfer\",\"id\":%" PRIu64 ",\"pid\":%u,"
               "\"tid\":%u,\"ts\":%.3f}", e->id, t->pid, e->tid, ts);
    }
}

/* Writes what the ring holds; returns how many events that was. */
static uint64_t drain(trace_t *t) {
    pprof_ev_t e;
    uint64_t n = 0;
    while (pprof_ring_pop(&t->ring, &e)) {
        write_event(t, &e);
        n++;
    }
    t->written += n;
    fflush(t->f);
    return n;
}

static void *flusher_main(void *arg) {
    trace_t *t = arg;
    long pause_ms = 50;
    while (!atomic_load_explicit(&t->stop, memory_order_acquire)) {
        struct timespec ts = {0, pause_ms * 1000 * 1000};
        nanosleep(&ts, NULL);
        /* A drain that found the ring over a quarter full comes back after 5 ms, and the pause
         * grows back to 50 ms only step by step: a busy or starved flusher would otherwise let
         * the ring fill and drop events. */
        if (drain(t) > (t->ring.mask + 1) / 4)
            pause_ms = 5;
        else if (pause_ms < 50)
            pause_ms = pause_ms * 2 < 50 ? pause_ms * 2 : 50;
    }
    return NULL;
}

static uint32_t env_u32(const char *name, uint32_t def) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') return def;
    char *end;
    unsigned long x = strtoul(v, &end, 0);
    return *end == '\0' && x > 0 && x <= 0xffffffffUL ? (uint32_t) x : def;
}

/* PCCL_TRACE_FILE with %p replaced by the pid; the n-th communicator of the process adds ".n". */
static void make_path(char *out, size_t n, const char *pattern, uint32_t pid, uint32_t nth) {
    size_t k = 0;
    for (const char *s = pattern; *s && k + 12 < n; s++) {
        if (s[0] == '%' && s[1] == 'p') {
            k += (size_t) snprintf(out + k, n - k, "%u", pid);
            s++;
        } else {
            out[k++] = *s;
        }
    }
    out[k] = '\0';
    if (nth > 1) snprintf(out + k, n - k, ".%u", nth);
}

static int trace_init(void **ctx, uint64_t comm_id, uint32_t *mask, const pcclProfilerCommInfo_t *info,
                      pcclProfilerLogFn log) {
    const char *pattern = getenv("PCCL_TRACE_FILE");
    if (pattern == NULL || *pattern == '\0') pattern = "pccl-trace-%p.json";
    trace_t *t = calloc(1, sizeof *t);
    if (t == NULL) return -1;
    t->pid = info->pid;
    t->comm_id = comm_id;
    t->log = log;
    uint32_t want = env_u32("PCCL_TRACE_BUFFER_EVENTS", 16384), n = 1024;
    while (n < want && n < (1u << 24)) n <<= 1;
    make_path(t->path, sizeof t->path, pattern, info->pid, (uint32_t) comm_id);
    t->f = fopen(t->path, "w");
    t->iobuf = malloc(1 << 20);
    if (t->f == NULL || t->iobuf == NULL || pprof_pool_init(&t->pool, 4096) != 0 || pprof_ring_init(&t->ring, n) != 0) {
        log(pcclProfilerLogWarn, "trace: cannot open %s or allocate its buffers", t->path);
        if (t->f) fclose(t->f);
        pprof_pool_free(&t->pool);
        pprof_ring_free(&t->ring);
        free(t->iobuf);
        free(t);
        return -1;
    }
    pprof_prefault(t->iobuf, 1 << 20);
    setvbuf(t->f, t->iobuf, _IOFBF, 1 << 20);
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", t->f);
    t->first = true;
    put(t, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"args\":{\"name\":\"pccl peer %u (communicator %" PRIx64
           ")\"}}", t->pid, t->pid, comm_id);
    if (pthread_create(&t->flusher, NULL, flusher_main, t) != 0) {
        fclose(t->f);
        pprof_pool_free(&t->pool);
        pprof_ring_free(&t->ring);
        free(t->iobuf);
        free(t);
        return -1;
    }
    *mask = env_u32("PCCL_TRACE_MASK", PCCL_PROFILER_MASK_ALL);
    *ctx = t;
    log(pcclProfilerLogInfo, "trace: writing %s (ring of %u events)", t->path, n);
    return 0;
}

static int trace_start(void *ctx, void **handle, const pcclProfilerEventDescr_t *d) {
    trace_t *t = ctx;
    pprof_handle_t *h = pprof_pool_get(&t->pool, t);
    *handle = h;
    if (h == NULL) return 0;
    pprof_ev_fill(h, d);
    uint32_t role = d->type == pcclProfilerEventTransfer ? 10 + d->u.transfer.direction : d->type;
    note_thread(t, h->ev.tid, role);
    h->ev.start_ns = pprof_now_ns();
    return 0;
}

static int trace_state(void *handle, pcclProfilerState_t s, const pcclProfilerStateArgs_t *a) {
    pprof_handle_t *h = handle;
    if (h == NULL) return 0;
    switch (s) {
    case pcclProfilerStateRetried: h->ev.retries = a->attempt; break;
    case pcclProfilerStateAborted: h->ev.reason = a->reason; h->ev.result = a->result; break;
    case pcclProfilerStateCommenced: h->ev.world = a->world_size; h->ev.rank = a->rank; break;
    case pcclProfilerStateBytes:
        h->ev.tx = a->bytes;
        h->ev.rx = a->bytes2;
        h->ev.result = a->result;
        break;
    default: break;
    }
    return 0;
}

static int trace_stop(void *handle) {
    pprof_handle_t *h = handle;
    if (h == NULL) return 0;
    trace_t *t = h->owner;
    h->ev.end_ns = pprof_now_ns();
    pprof_ring_push(&t->ring, &h->ev);
    pprof_pool_put(h);
    return 0;
}

static const char *role_name(uint32_t role) {
    switch (role) {
    case pcclProfilerEventColl: return "pccl worker";
    case 10: return "pccl data link tx";
    case 11: return "pccl data link rx";
    default: return "pccl api";
    }
}

static int trace_finalize(void *ctx) {
    trace_t *t = ctx;
    atomic_store_explicit(&t->stop, 1, memory_order_release);
    pthread_join(t->flusher, NULL);
    drain(t);
    for (uint32_t i = 0; i < MAX_THREADS; i++) {
        uint32_t tid = atomic_load(&t->tids[i]);
        if (tid == 0) break;
        put(t, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":\"%s %u\"}}", t->pid,
            tid, role_name(t->roles[i]), tid);
    }
    uint64_t dropped = atomic_load(&t->ring.dropped), untracked = atomic_load(&t->pool.exhausted);
    put(t, "{\"ph\":\"M\",\"name\":\"pccl_trace\",\"pid\":%u,\"args\":{\"events\":%" PRIu64 ",\"dropped\":%" PRIu64
           ",\"untracked\":%" PRIu64 "}}", t->pid, t->written, dropped, untracked);
    fputs("\n]}\n", t->f);
    if (fclose(t->f) != 0) t->log(pcclProfilerLogWarn, "trace: writing %s failed", t->path);
    if (dropped || untracked)
        t->log(pcclProfilerLogWarn, "trace: %s misses %" PRIu64 " events (ring full: raise PCCL_TRACE_BUFFER_EVENTS)",
               t->path, dropped + untracked);
    pprof_pool_free(&t->pool);
    pprof_ring_free(&t->ring);
    free(t->iobuf);
    free(t);
    return 0;
}

const pcclProfiler_v1_t pprof_trace_plugin = {"trace", trace_init, trace_start, trace_stop, trace_state, trace_finalize};
