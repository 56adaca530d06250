/* pprof_pool.c: handles, the ring of finished events, clock and thread id (pprof_pool.h). */
#include "profiler/pprof_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pprof_pool_init(pprof_pool_t *p, uint32_t n) {
    memset(p, 0, sizeof *p);
    p->h = calloc(n, sizeof *p->h);
    if (p->h == NULL) return -1;
    p->n = n;
    for (uint32_t i = 0; i < n; i++) atomic_init(&p->h[i].used, 0); /* fault the pages in now */
    return 0;
}

void pprof_pool_free(pprof_pool_t *p) {
    free(p->h);
    p->h = NULL;
}

pprof_handle_t *pprof_pool_get(pprof_pool_t *p, void *owner) {
    /* Handles are taken round-robin: one probe usually finds a free one. */
    for (uint32_t tries = 0; tries < p->n; tries++) {
        pprof_handle_t *h = &p->h[atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed) % p->n];
        uint32_t free_ = 0;
        if (atomic_load_explicit(&h->used, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong_explicit(&h->used, &free_, 1, memory_order_acquire, memory_order_relaxed)) {
            h->owner = owner;
            memset(&h->ev, 0, sizeof h->ev);
            h->ev.id = atomic_fetch_add_explicit(&p->ids, 1, memory_order_relaxed) + 1;
            return h;
        }
    }
    atomic_fetch_add_explicit(&p->exhausted, 1, memory_order_relaxed);
    return NULL;
}

void pprof_pool_put(pprof_handle_t *h) { atomic_store_explicit(&h->used, 0, memory_order_release); }

void pprof_ev_fill(pprof_handle_t *h, const pcclProfilerEventDescr_t *d) {
    pprof_ev_t *e = &h->ev;
    const pprof_handle_t *parent = d->parent;
    e->type = d->type;
    e->parent = parent != NULL ? parent->ev.id : 0;
    e->tid = pprof_tid();
    switch (d->type) {
    case pcclProfilerEventApi:
        e->kind = d->u.api.api;
        e->tag = d->u.api.tag;
        e->a = d->u.api.count;
        break;
    case pcclProfilerEventColl:
        e->coll = e->id;
        e->tag = d->u.coll.tag;
        e->a = d->u.coll.seq;
        e->b = d->u.coll.count;
        e->bytes = d->u.coll.bytes;
        e->kind = d->u.coll.datatype | d->u.coll.op << 8 | d->u.coll.quantized_datatype << 16 |
                  d->u.coll.quantization_algorithm << 24;
        break;
    case pcclProfilerEventPhase:
        e->kind = d->u.phase.phase;
        e->tag = d->u.phase.tag;
        e->coll = parent != NULL ? parent->ev.coll : 0;
        break;
    case pcclProfilerEventTransfer:
        e->kind = d->u.transfer.direction;
        e->peer = d->u.transfer.peer_rank;
        e->tag = d->u.transfer.tag;
        e->a = d->u.transfer.offset;
        e->bytes = d->u.transfer.bytes;
        e->stream = d->u.transfer.stream;
        if (parent != NULL) { /* a phase, or the collective itself when phases are off */
            e->coll = parent->ev.coll;
            e->coll_tid = parent->ev.tid;
        }
        break;
    case pcclProfilerEventSync:
        e->a = d->u.sync.revision;
        e->b = d->u.sync.tensors;
        e->kind = d->u.sync.strategy;
        break;
    case pcclProfilerEventTensor:
        e->bytes = d->u.tensor.bytes;
        snprintf(e->name, sizeof e->name, "%s", d->u.tensor.name ? d->u.tensor.name : "");
        break;
    case pcclProfilerEventHash:
        e->a = d->u.hash.tensors;
        e->bytes = d->u.hash.bytes;
        break;
    case pcclProfilerEventTopology:
        e->a = d->u.topology.round;
        e->b = d->u.topology.neighbours;
        break;
    case pcclProfilerEventBandwidth:
        e->b = d->u.bandwidth.duration_ms;
        memcpy(&e->a, d->u.bandwidth.peer_uuid, sizeof e->a); /* the UUID's first 8 bytes */
        break;
    default: break;
    }
}

int pprof_ring_init(pprof_ring_t *r, uint32_t n_pow2) {
    memset(r, 0, sizeof *r);
    r->slots = calloc(n_pow2, sizeof *r->slots);
    if (r->slots == NULL) return -1;
    r->mask = n_pow2 - 1;
    for (uint32_t i = 0; i < n_pow2; i++) atomic_init(&r->slots[i].seq, i); /* also faults the pages in */
    return 0;
}

void pprof_ring_free(pprof_ring_t *r) {
    free(r->slots);
    r->slots = NULL;
}

void pprof_ring_push(pprof_ring_t *r, const pprof_ev_t *ev) {
    uint64_t pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
    for (;;) {
        pprof_ring_slot_t *s = &r->slots[pos & r->mask];
        uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        int64_t diff = (int64_t) (seq - pos);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&r->tail, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                s->ev = *ev;
                atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
                return;
            }
        } else if (diff < 0) { /* full: the reader is a lap behind */
            atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
            return;
        } else {
            pos = atomic_load_explicit(&r->tail, memory_order_relaxed);
        }
    }
}

int pprof_ring_pop(pprof_ring_t *r, pprof_ev_t *out) {
    pprof_ring_slot_t *s = &r->slots[r->head & r->mask];
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    if (seq != r->head + 1) return 0;
    *out = s->ev;
    atomic_store_explicit(&s->seq, r->head + r->mask + 1, memory_order_release);
    r->head++;
    return 1;
}

void pprof_prefault(void *buf, size_t n) {
    for (size_t i = 0; i < n; i += 4096) ((volatile char *) buf)[i] = 0;
}

