/* ccoip_gate.h: stream-ordered all-reduces (pcclAllReduceOnStream, docs/cuda-streams.md).
 *
 * A gate ties one op to the caller's CUDA stream. Opening it (the caller's thread) queues on that
 * stream, after the caller's own work, everything the op will ever need from the GPU:
 *     event_start |
 *     copy piece 0 of sendbuf -> block | event 0 | copy piece 1 | event 1 | ...     (ring input order)
 *     wait word >= base+1 | copy range 0 block -> recvbuf | wait >= base+2 | range 1 | ...
 *                                                          (ring output order: own chunk first)
 *     wait word >= base+1+ranges (the verdict) | mark kernel | event_out
 * Pieces and ranges are at most CCOIP_GATE_PARTS each, in the ring's chunk order. The op then runs
 * on a worker, the proxy thread, like an async all-reduce: it waits on the host for event_start
 * (the stream has reached the op; ccoip_gate_wait_input says when it waits for more) before it
 * asks the master to start; during the ring its hooks
 * wait for event k before the ring reads piece k, and store base+1+i into the word as soon as
 * ranges 0..i of the result are final, so both copy directions overlap the ring. At the end it
 * writes the status word (non-zero: the op failed) and stores the verdict; the mark kernel then
 * fills all of recvbuf with 0xFF bytes if the status says failed (on success it ends at once).
 * Once event_out has passed, the block goes back to the cache and the gate is free.
 *
 * The proxy queues nothing on any stream and calls CUDA only to wait for events, with no library
 * lock held. That is the point: a proxy that queues its own work can deadlock with a gated stream
 * (hardware queues are shared between streams, a stream memory wait holds the front of its
 * queue, and calls like cudaHostAlloc or cudaFree wait for the whole GPU); the first version of
 * this did, on the H100. Everything is queued at call time, so in every hardware queue the op's
 * copies come after the waits of ops called before it, and before its own waits.
 *
 * The order is planned with the ring rank and world the last op of this communicator ran with;
 * when an op runs with another, it waits for all of its input at once and releases its ranges
 * at the end: correct, without the overlap. PCCL_STREAM_COPIES=whole (read once) makes one piece
 * and one range: the copies then do not overlap the ring (the previous behaviour, for benches).
 *
 * Gates are the communicator's, CCOIP_MAX_OPS of them, each with its events and two words (gate
 * word, status) of a mapped page, made on first use and kept. Gate words only grow (the stream
 * waits with a wrap-around >= comparison), so a stream that reaches its wait late still passes. */
#ifndef CCOIP_GATE_H
#define CCOIP_GATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_table.h"
#include "pccl.h"
#include "reduce/reduce.h"

#define CCOIP_GATE_PARTS 32 /* most device->host pieces, and most host->device ranges, per op */

typedef struct ccoip_gates_t ccoip_gates_t;

typedef struct ccoip_gate_t {
    ccoip_gates_t *set;
    bool busy, made;
    void *event_start, *event_out, *event_piece[CCOIP_GATE_PARTS];
    uint32_t *word;   /* mapped host word the user's stream waits on */
    uint32_t *status; /* mapped host word the mark kernel reads: non-zero, the op failed */
    uint32_t base;    /* the word's value at open: range i is released at base+1+i */
    /* The plan: `part` bytes per piece and per range, in the chunk order of (rank, world). */
    uint32_t rank, world, pieces, ranges;
    size_t count, esz, bytes, part;
    uint64_t ticket; /* call order on this communicator */
    bool verdict;    /* every wait of the stream released (guarded by the set's lock) */
    /* Proxy side, while the ring runs. */
    bool in_plan;      /* the ring runs with the plan's rank and world */
    uint32_t waited;   /* pieces known to be in the block */
    uint32_t released; /* ranges released to the stream */
    size_t final_bytes[CCOIP_GATE_PARTS];
    reduce_ring_stage_t hooks;
    reduce_cache_t *pinned;
    void *host; /* the ring's buffer: filled from sendbuf, emptied into recvbuf, on the stream */
} ccoip_gate_t;

/* Opens a gate for an op of count elements of esz bytes from sendbuf to recvbuf on `stream`;
 * world: the group's size as the master last reported it. pcclInvalidUsage when all gates are
 * taken; pcclInternalError (logged) when memory or CUDA fail, the stream then left free to go on
 * (recvbuf marked when a copy may have been queued). */
pcclResult_t ccoip_gate_open(ccoip_gates_t **slot, pthread_mutex_t *lock, reduce_cache_t *pinned, void *stream,
                             const void *sendbuf, void *recvbuf, size_t count, size_t esz, uint32_t world,
                             ccoip_gate_t **out);

/* Proxy side, before the op asks the master to start: waits (this thread only) until the stream
 * has reached the op, i.e. every earlier op queued on it has passed its gate; and, while an op
 * called earlier (on another stream) still holds back copies, until the whole input is in the
 * block. The op must not take its place in the ring's order while its ring could still wait for
 * GPU work that waits for another op: that op could need the turn we hold (a deadlock). */
void ccoip_gate_wait_input(ccoip_gate_t *g);

/* Proxy side, when the ring starts with (rank, world): the staging hooks for it (the ring runs
 * in place on g->host). */
const reduce_ring_stage_t *ccoip_gate_stage(ccoip_gate_t *g, uint32_t rank, uint32_t world);

/* Proxy side, after the op: writes the status (failed unless ok), releases every remaining
 * wait, waits until the stream has passed event_out, frees block and gate. */
void ccoip_gate_release(ccoip_gate_t *g, bool ok);

/* At communicator destroy, after every op has finished: releases any gate still held (its stream
 * must never hang; recvbuf is marked) and frees events and words. */
void ccoip_gates_destroy(ccoip_gates_t *gates);

#endif /* CCOIP_GATE_H */
