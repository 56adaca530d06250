/* harness.h -- runs simulated ring peers on threads, one ring call per thread. */
#ifndef PCCL_TESTS_REDUCE_HARNESS_H
#define PCCL_TESTS_REDUCE_HARNESS_H

#include <pthread.h>

#include "reduce/reduce.h"
#include "reduce/reduce_memlink.h"
#include "tests/common/clock.h"

typedef struct peer_run {
    reduce_ring_params_t params;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    pcclDataType_t dtype;
    pcclRedOp_t op;
    int stall;                 /* never calls the ring (a peer that hangs) */
    int rc;
    reduce_ring_stats_t stats;
    double t_start, t_end;     /* monotonic seconds around the call */
    pthread_t th;
} peer_run_t;

static inline void *peer_main(void *arg) {
    peer_run_t *r = arg;
    r->t_start = now_s();
    r->rc = reduce_ring_allreduce(&r->params, r->sendbuf, r->recvbuf, r->count, r->dtype, r->op,
                                  &r->stats);
    r->t_end = now_s();
    return NULL;
}

/* Starts every non-stalled run on its own thread and joins them all. */
static inline int run_peers(peer_run_t *runs, size_t m) {
    for (size_t i = 0; i < m; i++) {
        if (runs[i].stall) continue;
        if (pthread_create(&runs[i].th, NULL, peer_main, &runs[i]) != 0) return -1;
    }
    for (size_t i = 0; i < m; i++)
        if (!runs[i].stall) pthread_join(runs[i].th, NULL);
    return 0;
}

#endif /* PCCL_TESTS_REDUCE_HARNESS_H */
