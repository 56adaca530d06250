/* ccoip_gate.h: stream-ordered all-reduces (pcclAllReduceOnStream, docs/cuda-streams.md).
 *
 * A gate ties one op to the caller's CUDA stream. Opening it (the caller's thread) queues on that
 * stream, after the caller's own work:
 *     copy sendbuf -> the gate's pinned block | event_in | wait until word >= target |
 *     copy the block -> recvbuf | event_out
 * and the op then runs on a worker, the proxy thread, like an async all-reduce: it waits (on the
 * host) for event_in, runs the ring in place on the pinned block, and releases the gate: on
 * failure it first fills the block with 0xFF bytes; then it stores `target` into the word, the
 * stream copies the block into recvbuf and goes on; once event_out has passed, the block goes back
 * to the cache and the gate is free.
 *
 * The proxy queues nothing on any stream and calls CUDA only to wait for the two events. That is
 * the point: a proxy that queues its own copies can deadlock with the gated stream (hardware
 * queues are shared between streams, and calls like cudaHostAlloc or cudaFree wait for the whole
 * GPU); the first version of this did, on the H100. The pinned block is taken by the caller
 * before anything is queued.
 *
 * Gates are the communicator's, CCOIP_MAX_OPS of them, each with two events and one word of a
 * mapped page, made on first use and kept. Words only grow (the stream waits with a wrap-around
 * >= comparison), so a stream that reaches its wait late still passes. */
#ifndef CCOIP_GATE_H
#define CCOIP_GATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_table.h"
#include "pccl.h"
#include "reduce/reduce.h"

typedef struct ccoip_gates_t ccoip_gates_t;

typedef struct ccoip_gate_t {
    ccoip_gates_t *set;
    bool busy, made;
    void *event_in, *event_out;
    uint32_t *word; /* mapped host word the user's stream waits on */
    uint32_t target;
    size_t bytes;
    reduce_cache_t *pinned;
    void *host; /* the ring's buffer: filled from sendbuf, emptied into recvbuf, on the stream */
} ccoip_gate_t;

/* Opens a gate for an op of `bytes` from sendbuf to recvbuf on `stream`. pcclInvalidUsage when
 * all gates are taken; pcclInternalError (logged) when memory or CUDA fail, the stream then
 * left free to go on. */
pcclResult_t ccoip_gate_open(ccoip_gates_t **slot, pthread_mutex_t *lock, reduce_cache_t *pinned, void *stream,
                             const void *sendbuf, void *recvbuf, size_t bytes, ccoip_gate_t **out);

/* Proxy side, before the op asks the master to start: waits (this thread only) until sendbuf is
 * in the block. The op must not take its place in the ring's order earlier: an op queued later
 * on the same stream would otherwise hold a turn that an earlier op needs (a deadlock). */
void ccoip_gate_wait_input(ccoip_gate_t *g);

/* Proxy side, after the op: marks the block on failure, lets the stream go on, waits until the
 * stream has copied the block out, frees block and gate. */
void ccoip_gate_release(ccoip_gate_t *g, bool ok);

/* At communicator destroy, after every op has finished: releases any gate still held (its stream
 * must never hang) and frees events and words. */
void ccoip_gates_destroy(ccoip_gates_t *gates);

#endif /* CCOIP_GATE_H */
