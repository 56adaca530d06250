/* testprof.c: the test plugin (libtestprof.so). It records every call and checks, as they come:
 * parent handles (open, of the right type), nesting (children stop before their parent),
 * start/stop pairing, the thread of each call (API calls, sync collectives, shared state and
 * topology on the thread that created the communicator; async collectives on a worker;
 * transfers on a data-link thread, never the collective's), abort reasons, and adds up the
 * bytes of each collective's transfers. The peer program reads the verdicts through
 * testprof_query / testprof_coll (dlopen RTLD_NOLOAD + dlsym).
 *
 * TESTPROF_INIT_FAIL=1: init fails (the loading test). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pccl_profiler.h"

#define MAXREC 65536
#define MAXTAG 4096

typedef struct rec {
    struct rec *parent, *coll, *next_free;
    uint32_t type, kind, open, children;
    pthread_t thread;
    uint64_t tag, tx, rx, state_tx, state_rx;
    uint32_t reason, commenced, quantized;
} rec_t;

typedef struct coll_result {
    uint64_t tx, rx, state_tx, state_rx;
    uint32_t done, reason, quantized, phases;
} coll_result_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static rec_t recs[MAXREC];
static rec_t *free_list;
static uint32_t used;
static pthread_t main_thread;
static uint64_t errors, open_events, started[16], aborted[8], inits, finalized;
static char first_error[256];
static coll_result_t colls[MAXTAG];
static pcclProfilerLogFn logf_;

static void fail(const char *what, const rec_t *r) {
    if (errors++ == 0)
        snprintf(first_error, sizeof first_error, "%s (type %u kind %u tag %llu)", what, r ? r->type : 99,
                 r ? r->kind : 99, r ? (unsigned long long) r->tag : 0ull);
    if (logf_) logf_(pcclProfilerLogError, "testprof: %s", what);
}

static int t_init(void **ctx, uint64_t comm_id, uint32_t *mask, const pcclProfilerCommInfo_t *info,
                  pcclProfilerLogFn log) {
    (void) comm_id;
    const char *f = getenv("TESTPROF_INIT_FAIL");
    if (f != NULL && f[0] == '1') return 7;
    if (info->version != PCCL_PROFILER_VERSION) return 1;
    pthread_mutex_lock(&lock);
    logf_ = log;
    main_thread = pthread_self();
    inits++;
    pthread_mutex_unlock(&lock);
    const char *m = getenv("TESTPROF_MASK");
    *mask = m ? (uint32_t) strtoul(m, NULL, 0) : PCCL_PROFILER_MASK_ALL;
    *ctx = &recs[0];
    return 0;
}

/* The parent's type each child type may have (bit mask; NULL allowed where noted). */
static int parent_ok(uint32_t type, const rec_t *p) {
    switch (type) {
    case pcclProfilerEventApi: return p == NULL;
    case pcclProfilerEventColl: return p == NULL || (p->type == pcclProfilerEventApi && p->kind == pcclProfilerApiAllReduce);
    case pcclProfilerEventPhase: return p != NULL && p->type == pcclProfilerEventColl;
    case pcclProfilerEventTransfer:
        return p != NULL && p->type == pcclProfilerEventPhase &&
               (p->kind == pcclProfilerPhaseReduceScatter || p->kind == pcclProfilerPhaseAllGather);
    case pcclProfilerEventSync:
        return p != NULL && p->type == pcclProfilerEventApi && p->kind == pcclProfilerApiSynchronizeSharedState;
    case pcclProfilerEventTensor:
    case pcclProfilerEventHash: return p != NULL && p->type == pcclProfilerEventSync;
    case pcclProfilerEventTopology:
        return p == NULL || (p->type == pcclProfilerEventApi && (p->kind == pcclProfilerApiUpdateTopology ||
                                                                 p->kind == pcclProfilerApiOptimizeTopology));
    case pcclProfilerEventBandwidth:
        return p != NULL && p->type == pcclProfilerEventApi && p->kind == pcclProfilerApiOptimizeTopology;
    default: return 0;
    }
}

static int t_start(void *ctx, void **handle, const pcclProfilerEventDescr_t *d) {
    (void) ctx;
    pthread_mutex_lock(&lock);
    rec_t *r = free_list;
    if (r != NULL) free_list = r->next_free;
    else if (used < MAXREC) r = &recs[used++];
    *handle = r;
    if (r == NULL) {
        fail("out of records", NULL);
        pthread_mutex_unlock(&lock);
        return 0;
    }
    rec_t *p = d->parent;
    memset(r, 0, sizeof *r);
    r->type = d->type;
    r->parent = p;
    r->open = 1;
    r->thread = pthread_self();
    int on_main = pthread_equal(r->thread, main_thread);
    switch (d->type) {
    case pcclProfilerEventApi: r->kind = d->u.api.api; r->tag = d->u.api.tag; break;
    case pcclProfilerEventColl: r->tag = d->u.coll.tag; r->coll = r; break;
    case pcclProfilerEventPhase: r->kind = d->u.phase.phase; r->tag = d->u.phase.tag; break;
    case pcclProfilerEventTransfer: r->kind = d->u.transfer.direction; r->tag = d->u.transfer.tag; r->tx = d->u.transfer.bytes; break;
    case pcclProfilerEventTensor: r->tx = d->u.tensor.bytes; break;
    default: break;
    }
    if (d->type < 16) started[d->type]++;
    open_events++;
    if (p != NULL && !p->open) fail("parent handle is not open", r);
    if (!parent_ok(d->type, p)) fail("parent of the wrong type", r);
    if (p != NULL) {
        p->children++;
        if (r->coll == NULL) r->coll = p->coll;
    }
    /* Threads. */
    switch (d->type) {
    case pcclProfilerEventColl:
        if ((p != NULL) != on_main) fail("a collective on the wrong thread (sync: caller, async: worker)", r);
        break;
    case pcclProfilerEventPhase:
        if (p != NULL && !pthread_equal(r->thread, p->thread)) fail("a phase off its collective's thread", r);
        break;
    case pcclProfilerEventTransfer:
        if (on_main || (r->coll != NULL && pthread_equal(r->thread, r->coll->thread)))
            fail("a transfer on the caller's or the collective's thread", r);
        if (r->coll != NULL && d->u.transfer.tag != r->coll->tag) fail("a transfer's tag is not its collective's", r);
        break;
    default:
        if (!on_main) fail("an API, shared-state or topology event off the caller's thread", r);
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

static int t_state(void *handle, pcclProfilerState_t s, const pcclProfilerStateArgs_t *a) {
    rec_t *r = handle;
    pthread_mutex_lock(&lock);
    if (r == NULL || !r->open) fail("state on a handle that is not open", r);
    else if (s == pcclProfilerStateAborted) {
        if (a->reason < 1 || a->reason > 5) fail("abort without a reason", r);
        r->reason = a->reason;
    } else if (s == pcclProfilerStateBytes) {
        r->state_tx = a->bytes;
        r->state_rx = a->bytes2;
    } else if (s == pcclProfilerStateQuantizedBytes) {
        r->quantized = 1;
    } else if (s == pcclProfilerStateCommenced) {
        if (r->type != pcclProfilerEventColl || a->world_size < 2 || a->rank >= a->world_size) fail("bad Commenced", r);
        r->commenced |= 1;
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

static int t_stop(void *handle) {
    rec_t *r = handle;
    pthread_mutex_lock(&lock);
    if (r == NULL || !r->open) {
        fail("stop of a handle that is not open", r);
        pthread_mutex_unlock(&lock);
        return 0;
    }
    if (r->children != 0) fail("stopped before its children", r);
    if (r->type != pcclProfilerEventTransfer && r->type != pcclProfilerEventPhase && r->type != pcclProfilerEventColl &&
        !pthread_equal(pthread_self(), r->thread))
        fail("stopped on another thread than it started", r);
    r->open = 0;
    open_events--;
    if (r->reason) aborted[r->reason]++;
    if (r->parent != NULL) r->parent->children--;
    if (r->type == pcclProfilerEventTransfer && r->coll != NULL && !r->reason) {
        if (r->kind == pcclProfilerSend) r->coll->tx += r->tx;
        else r->coll->rx += r->tx;
    }
    if (r->type == pcclProfilerEventPhase && r->coll != NULL) r->coll->commenced |= 2u << r->kind;
    if (r->type == pcclProfilerEventColl) {
        coll_result_t *c = &colls[r->tag % MAXTAG];
        *c = (coll_result_t){r->tx, r->rx, r->state_tx, r->state_rx, c->done + 1, r->reason, r->quantized, r->commenced};
    }
    if (r->type == pcclProfilerEventTensor && !r->reason) started[15] += r->tx; /* tensor bytes */
    r->next_free = free_list;
    free_list = r;
    pthread_mutex_unlock(&lock);
    return 0;
}

static int t_finalize(void *ctx) {
    (void) ctx;
    pthread_mutex_lock(&lock);
    if (open_events != 0) fail("events left open at finalize", NULL);
    finalized++;
    pthread_mutex_unlock(&lock);
    return 0;
}

__attribute__((visibility("default"))) const pcclProfiler_v1_t pcclProfiler_v1 = {"testprof", t_init, t_start, t_stop,
                                                                                    t_state, t_finalize};

/* "E O I F started[0..8] tensorbytes aborted[1..5] first_error" */
__attribute__((visibility("default"))) void testprof_query(char *out, size_t n) {
    pthread_mutex_lock(&lock);
    snprintf(out, n, "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu [%s]",
             (unsigned long long) errors, (unsigned long long) open_events, (unsigned long long) inits,
             (unsigned long long) finalized, (unsigned long long) started[0], (unsigned long long) started[1],
             (unsigned long long) started[2], (unsigned long long) started[3], (unsigned long long) started[4],
             (unsigned long long) started[5], (unsigned long long) started[6], (unsigned long long) started[7],
             (unsigned long long) started[8], (unsigned long long) started[15], (unsigned long long) aborted[1],
             (unsigned long long) aborted[2], (unsigned long long) aborted[3], (unsigned long long) aborted[4],
             (unsigned long long) aborted[5], first_error);
    pthread_mutex_unlock(&lock);
}

/* The last finished collective of tag: transfer sums, the Bytes state, phases seen (bits). */
__attribute__((visibility("default"))) int testprof_coll(uint64_t tag, uint64_t out[6]) {
    pthread_mutex_lock(&lock);
    coll_result_t c = colls[tag % MAXTAG];
    pthread_mutex_unlock(&lock);
    out[0] = c.tx;
    out[1] = c.rx;
    out[2] = c.state_tx;
    out[3] = c.state_rx;
    out[4] = c.phases;
    out[5] = c.quantized | (uint64_t) c.reason << 8;
    return (int) c.done;
}
