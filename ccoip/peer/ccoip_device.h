/* pccl_device.h: CUDA device buffers in an all-reduce, staged through one pinned host block.
 *
 * The ring (reduce/) only ever sees host memory. For device buffers the op takes one pinned
 * block from the communicator's pinned cache, and the ring's staging hooks move the data: at
 * the start the first device->host copies are queued, piece by piece in the order the ring reads
 * its input (its first two chunks alternating, since it reads them at the same pace; small
 * pieces first, so the ring starts early), and the rest a bounded distance ahead of the ring,
 * each piece followed by an event that the ring waits for only when it needs that piece; host->device copies follow on a second stream
 * as result ranges become final. Both directions overlap the network and each other. The
 * reduction runs on the host, with the same kernels as host buffers: the wire traffic is that of
 * a host all-reduce, and peers with device and host buffers end bit-identical. */
#ifndef PCCL_DEVICE_H
#define PCCL_DEVICE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "cuda/cuda_table.h"
#include "pccl.h"
#include "reduce/reduce.h"

typedef enum pccl_buffer_kind {
    PCCL_BUFFERS_HOST = 0,
    PCCL_BUFFERS_DEVICE = 1,
    PCCL_BUFFERS_MIXED = 2 /* one host, one device: refused (pcclInvalidArgument) */
} pccl_buffer_kind_t;

/* Where sendbuf and recvbuf live. Always PCCL_BUFFERS_HOST when CUDA is not built in. */
pccl_buffer_kind_t pccl_buffers_kind(const void *sendbuf, const void *recvbuf);

/* A cache of pinned host blocks (created on first use; NULL when CUDA is not built in or the
 * cache cannot be made). `*slot` is the communicator's field; `lock` guards its creation. */
reduce_cache_t *pccl_pinned_cache(reduce_cache_t **slot, pthread_mutex_t *lock);

/* Streams and events of one op, reused from op to op (ccoip_device.c keeps a free list). */
typedef struct pccl_device_kit pccl_device_kit_t;

/* One staged all-reduce; lives on the caller's stack. */
typedef struct pccl_device_op {
    const cuda_table_t *cu;
    reduce_cache_t *pinned;
    const char *dev_in;
    char *dev_out;
    char *host; /* sendbuf and recvbuf of the ring */
    size_t count, esz, bytes;
    uint32_t rank, world;
    pccl_device_kit_t *kit;
    /* Device->host pieces, in queue order (ccoip_device.c, plan_pieces): pieces 0 .. queued-1
     * are queued, 0 .. waited-1 known to be on the host; `need` is the furthest piece the ring
     * asked for. */
    size_t pieces, queued, waited, need;
    /* Host->device: the pending contiguous final range, flushed once it reaches out_piece. */
    size_t out_off, out_len, out_piece;
    bool failed;
    int mode; /* PCCL_DEVICE_COPIES (ccoip_device.c) */
    reduce_ring_stage_t hooks;
    /* With PCCL_LOG_LEVEL=debug, one line per op says where its time went. */
    bool trace;
    unsigned n_wait;
    double t_begin, t_queued, t_wait;
    char waits[160]; /* the first waits: "piece@start_us+waited_us" */
} pccl_device_op_t;

/* Takes the pinned block, a kit of streams and events, queues the first device->host copies (after
 * the work the caller queued on the legacy default stream, without waiting for it here) and
 * fills op->hooks; the ring then runs with sendbuf = recvbuf = op->host and
 * params.stage = &op->hooks. Returns pcclSuccess, or pcclInternalError (logged) when memory,
 * streams or a copy fail. */
pcclResult_t pccl_device_begin(pccl_device_op_t *op, reduce_cache_t *pinned, const void *sendbuf, void *recvbuf,
                               size_t count, size_t esz, uint32_t rank, uint32_t world);

/* Flushes and waits for the last host->device copies (when the ring succeeded), waits for every
 * copy in flight either way, gives the block and the kit back. Returns false when a copy failed. */
bool pccl_device_end(pccl_device_op_t *op, bool ring_ok);

#endif /* PCCL_DEVICE_H */
