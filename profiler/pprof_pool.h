/* pprof_pool.h: what the built-in plugins share: a fixed pool of event handles taken and given
 * back without a lock, a bounded multi-producer ring of finished events, the clock and the
 * thread id. Both are allocated once at init: the data path never allocates nor blocks. */
#ifndef PCCL_PPROF_POOL_H
#define PCCL_PPROF_POOL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pccl_profiler.h"
#include "profiler/pprof_os.h"

/* One event between start and stop (a handle), and, copied, one finished event in the ring. */
typedef struct pprof_ev_t {
    uint32_t type;   /* pcclProfilerEventType_t */
    uint32_t kind;   /* api / phase / direction, by type */
    uint64_t id;     /* unique per plugin instance, never 0 */
    uint64_t parent; /* the parent's id, 0 at the top */
    uint64_t coll;   /* transfers and phases: their collective's id; 0 otherwise */
    uint32_t coll_tid; /* transfers: the thread of their collective */
    uint32_t tid;
    int64_t start_ns, end_ns;
    uint64_t tag, bytes, a, b; /* a, b: count/offset/seq... by type (pprof_ev_fill) */
    uint64_t tx, rx;           /* State Bytes: sent / received (a measurement: tx = bits/s) */
    uint32_t peer, stream, reason, retries, world, rank;
    int32_t result;
    char name[48]; /* tensors: the name, cut */
} pprof_ev_t;

typedef struct pprof_handle_t {
    _Atomic uint32_t used;
    void *owner; /* the plugin's ctx */
    pprof_ev_t ev;
} pprof_handle_t;

typedef struct pprof_pool_t {
    pprof_handle_t *h;
    uint32_t n;
    _Atomic uint32_t next;
    _Atomic uint64_t ids;
    _Atomic uint64_t exhausted; /* starts that found no free handle (not tracked) */
} pprof_pool_t;

int pprof_pool_init(pprof_pool_t *p, uint32_t n);
void pprof_pool_free(pprof_pool_t *p);
/* A free handle with a fresh id and its fields zeroed, or NULL when every one is taken. */
pprof_handle_t *pprof_pool_get(pprof_pool_t *p, void *owner);
void pprof_pool_put(pprof_handle_t *h);
/* Fills the common fields of h->ev from d: type, kind, parent, tag, bytes... */
void pprof_ev_fill(pprof_handle_t *h, const pcclProfilerEventDescr_t *d);

/* A bounded ring of finished events: many writers, one reader (Vyukov's queue). A full ring
 * drops the event and counts it: writers never wait. */
typedef struct pprof_ring_slot_t {
    _Atomic uint64_t seq;
    pprof_ev_t ev;
} pprof_ring_slot_t;

typedef struct pprof_ring_t {
    pprof_ring_slot_t *slots;
    uint64_t mask;
    _Atomic uint64_t tail;
    uint64_t head; /* the reader's */
    _Atomic uint64_t dropped;
} pprof_ring_t;

int pprof_ring_init(pprof_ring_t *r, uint32_t n_pow2);
void pprof_ring_free(pprof_ring_t *r);
void pprof_ring_push(pprof_ring_t *r, const pprof_ev_t *ev);
/* The oldest event into *out; 0 when the ring is empty. The one reader only. */
int pprof_ring_pop(pprof_ring_t *r, pprof_ev_t *out);

/* Touches every page of buf: the data path then takes no page fault on it. */
void pprof_prefault(void *buf, size_t n);

#endif /* PCCL_PPROF_POOL_H */
