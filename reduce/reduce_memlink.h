/* reduce_memlink.h -- an in-memory implementation of the reduce link, for tests: N simulated
 * peers in one process, one bounded queue per directed ring edge (peer i -> peer i+1).
 * Posting copies at once when the other side has already posted the matching request, and
 * queues otherwise; so a send completes when the receiver has taken the bytes, and neither
 * side needs a progress thread. A peer can be made to die at a given send. */
#ifndef PCCL_REDUCE_MEMLINK_H
#define PCCL_REDUCE_MEMLINK_H

#include "reduce/reduce.h"

typedef struct reduce_memnet reduce_memnet_t;

typedef struct reduce_memnet_opts {
    uint32_t queue_capacity;   /* unmatched posted requests per side of an edge; 0: 256 */
    int32_t die_peer;          /* the peer that dies, or -1 */
    uint64_t die_at_send;      /* die_peer's post_send number die_at_send (from 0) kills it */
    int abort_on_death;        /* a death also raises and rings every peer's abort flag, as the
                                  master's abort notice would */
} reduce_memnet_opts_t;

/* opts may be NULL (nobody dies). */
reduce_memnet_t *reduce_memnet_create(uint32_t n, const reduce_memnet_opts_t *opts);
void reduce_memnet_destroy(reduce_memnet_t *net);

/* Fills rank, world_size, next, prev, abort_flag and doorbell of peer's ring parameters. */
void reduce_memnet_fill_params(reduce_memnet_t *net, uint32_t peer, reduce_ring_params_t *p);

/* Breaks both edges of the peer: their pending requests fail, later posts are refused. */
void reduce_memnet_kill(reduce_memnet_t *net, uint32_t peer);

/* Raises every peer's abort flag; with wake, also rings their doorbells (without it the
 * ring has to notice the flag by polling). */
void reduce_memnet_abort_all(reduce_memnet_t *net, int wake);

/* Payload bytes copied over the edge from -> from+1 so far. */
uint64_t reduce_memnet_edge_bytes(reduce_memnet_t *net, uint32_t from);

#endif /* PCCL_REDUCE_MEMLINK_H */
