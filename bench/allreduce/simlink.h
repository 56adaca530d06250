/* simlink.h -- links between n simulated hosts in one process, with a path's delay and rate:
 * every host sends at `rate` bytes/s in total (its egress, as tbf shapes a netns host) and a
 * frame arrives `delay` seconds after its last byte left. One wire thread delivers frames in
 * arrival order into the receives posted for them (by tag, in posting order); a send completes
 * when its frame is delivered. For benchmarks of schedules, not of sockets. */
#ifndef PCCL_BENCH_SIMLINK_H
#define PCCL_BENCH_SIMLINK_H

#include "reduce/reduce.h"

typedef struct simnet simnet_t;

simnet_t *simnet_create(uint32_t n, double delay_s, double rate_Bps);
void simnet_destroy(simnet_t *net);

/* Host a's link with host b: post_send goes a -> b, post_recv takes b -> a frames. */
reduce_link_t simnet_link(simnet_t *net, uint32_t a, uint32_t b);
_Atomic uint32_t *simnet_doorbell(simnet_t *net, uint32_t a);

#endif /* PCCL_BENCH_SIMLINK_H */
