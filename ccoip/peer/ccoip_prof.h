/* ccoip_prof.h: the profiler's event sites in ccoip, one call each (docs/profiler.md). Each
 * helper tests the communicator's mask first; the descriptor is built only when the event is on. */
#ifndef CCOIP_PROF_H
#define CCOIP_PROF_H

#include <string.h>

#include "profiler/pprof.h"

#define CCOIP_PROF_API pcclProfilerEventApi

/* A public call begins (the root of a tree). */
static inline void *ccoip_prof_api(const pprof_t *p, uint32_t api, uint64_t tag, uint64_t count) {
    if (!PPROF_ON(p, pcclProfilerEventApi)) return NULL;
    pcclProfilerEventDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = pcclProfilerEventApi;
    d.u.api.api = api;
    d.u.api.tag = tag;
    d.u.api.count = count;
    return pprof_start(p, &d);
}

/* The call returns r. */
static inline void ccoip_prof_api_end(const pprof_t *p, void *h, pcclResult_t r) {
    if (PPROF_ON(p, pcclProfilerEventApi)) pprof_finish_slow(p, h, pprof_reason(r), r);
}

/* A phase of a collective begins (parent: the collective). */
static inline void *ccoip_prof_phase(const pprof_t *p, void *coll, uint32_t phase, uint64_t tag) {
    if (!PPROF_ON(p, pcclProfilerEventPhase)) return NULL;
    pcclProfilerEventDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = pcclProfilerEventPhase;
    d.parent = coll;
    d.u.phase.phase = phase;
    d.u.phase.tag = tag;
    return pprof_start(p, &d);
}

/* A topology round begins / ends (reason 0: ok). */
static inline void *ccoip_prof_topology(const pprof_t *p, void *parent, uint64_t round, uint32_t neighbours) {
    if (!PPROF_ON(p, pcclProfilerEventTopology)) return NULL;
    pcclProfilerEventDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = pcclProfilerEventTopology;
    d.parent = parent;
    d.u.topology.round = round;
    d.u.topology.neighbours = neighbours;
    return pprof_start(p, &d);
}
static inline void ccoip_prof_topology_end(const pprof_t *p, void *h, uint32_t reason) {
    pprof_finish(p, pcclProfilerEventTopology, h, reason, pcclSuccess);
}

/* One bandwidth measurement to `uuid` begins / ends with its rate (0: failed). */
static inline void *ccoip_prof_bandwidth(const pprof_t *p, void *parent, const uint8_t uuid[16], uint32_t ms) {
    if (!PPROF_ON(p, pcclProfilerEventBandwidth)) return NULL;
    pcclProfilerEventDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = pcclProfilerEventBandwidth;
    d.parent = parent;
    memcpy(d.u.bandwidth.peer_uuid, uuid, 16);
    d.u.bandwidth.duration_ms = ms;
    return pprof_start(p, &d);
}
static inline void ccoip_prof_bandwidth_end(const pprof_t *p, void *h, uint64_t bits_per_s) {
    if (!PPROF_ON(p, pcclProfilerEventBandwidth)) return;
    pcclProfilerStateArgs_t a;
    memset(&a, 0, sizeof a);
    a.bytes = bits_per_s; /* Bytes on a measurement: the rate in bits/s */
    pprof_state(p, h, pcclProfilerStateBytes, &a);
    pprof_finish_slow(p, h, bits_per_s == 0 ? pcclProfilerAbortPeerLost : 0, pcclSuccess);
}

/* The shared-state sync, its hashing, one fetched tensor. */
static inline void *ccoip_prof_sync(const pprof_t *p, void *parent, uint64_t revision, uint64_t tensors,
                                    uint32_t strategy) {
    if (!PPROF_ON(p, pcclProfilerEventSync)) return NULL;
    pcclProfilerEventDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = pcclProfilerEventSync;
    d.parent = parent;
    d.u.sync.revision = revision;
    d.u.sync.tensors = tensors;
    d.u.sync.strategy = strategy;
    return pprof_start(p, &d);
}
static inline void ccoip_prof_sync_end(const pprof_t *p, void *h, pcclResult_t r, uint64_t tx, uint64_t rx) {
    if (!PPROF_ON(p, pcclProfilerEventSync)) return;
    pcclProfilerStateArgs_t a;
    memset(&a, 0, sizeof a);
    a.bytes = tx;
    a.bytes2 = rx;
    a.result = (int32_t) r;
    pprof_state(p, h, pcclProfilerStateBytes, &a);
    pprof_finish_slow(p, h, pprof_reason(r), r);
}
static inline void *ccoip_prof_hash(const pprof_t *p, void *parent, uint64_t tensors, uint64_t bytes) {
    if (!PPROF_ON(p, pcclProfilerEventHash)) return NULL;
    pcclProfilerEventDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = pcclProfilerEventHash;
    d.parent = parent;
    d.u.hash.tensors = tensors;
    d.u.hash.bytes = bytes;
    return pprof_start(p, &d);
}
static inline void *ccoip_prof_tensor(const pprof_t *p, void *parent, const char *name, uint64_t bytes,
                                      const uint8_t uuid[16]) {
    if (!PPROF_ON(p, pcclProfilerEventTensor)) return NULL;
    pcclProfilerEventDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = pcclProfilerEventTensor;
    d.parent = parent;
    d.u.tensor.name = name;
    d.u.tensor.bytes = bytes;
    memcpy(d.u.tensor.peer_uuid, uuid, 16);
    return pprof_start(p, &d);
}
static inline void ccoip_prof_tensor_end(const pprof_t *p, void *h, bool ok) {
    pprof_finish(p, pcclProfilerEventTensor, h, ok ? 0 : pcclProfilerAbortPeerLost, pcclSuccess);
}

/* Any event with a plain descriptor: type and the fields set by the caller's initialiser. */
static inline void *ccoip_prof_start(const pprof_t *p, const pcclProfilerEventDescr_t *d) {
    return PPROF_ON(p, d->type) ? pprof_start(p, d) : NULL;
}

static inline void ccoip_prof_stop(const pprof_t *p, uint32_t type, void *h) { pprof_stop(p, type, h); }

/* Retried / Bytes and the like on a running event. */
static inline void ccoip_prof_state(const pprof_t *p, uint32_t type, void *h, pcclProfilerState_t s,
                                    const pcclProfilerStateArgs_t *a) {
    if (PPROF_ON(p, type)) pprof_state(p, h, s, a);
}

#endif /* CCOIP_PROF_H */
