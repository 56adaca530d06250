/* ccoip_coll_prof.h: the profiler's event sites of a collective (ccoip_coll.c), one line each;
 * every helper tests the mask inline and costs one branch when profiling is off. */
#ifndef CCOIP_COLL_PROF_H
#define CCOIP_COLL_PROF_H

#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/peer/ccoip_prof.h"

#define CCOIP_PROF_PHASE_TYPES (PCCL_PROFILER_MASK(pcclProfilerEventPhase) | PCCL_PROFILER_MASK(pcclProfilerEventTransfer))

/* The ring's probe context: lives on the stack of the op's run. */
typedef struct ccoip_ring_prof_t {
    const pprof_t *prof;
    void *coll, *phase[2];
    uint64_t tag;
    reduce_ring_probe_t probe;
} ccoip_ring_prof_t;

void *ccoip_prof_coll_begin_slow(pcclComm_t *comm, const ccoip_op_t *op);
void ccoip_prof_coll_end_slow(pcclComm_t *comm, const ccoip_op_t *op);
void ccoip_prof_commenced_slow(pcclComm_t *comm, const ccoip_op_t *op, uint32_t rank, uint32_t world);
const reduce_ring_probe_t *ccoip_prof_ring_slow(pcclComm_t *comm, const ccoip_op_t *op, ccoip_ring_prof_t *r);

static inline void *ccoip_prof_coll_begin(pcclComm_t *comm, const ccoip_op_t *op) {
    return PPROF_ON(&comm->prof, pcclProfilerEventColl) ? ccoip_prof_coll_begin_slow(comm, op) : NULL;
}
static inline void ccoip_prof_coll_end(pcclComm_t *comm, const ccoip_op_t *op) {
    if (PPROF_ON(&comm->prof, pcclProfilerEventColl)) ccoip_prof_coll_end_slow(comm, op);
}
static inline void ccoip_prof_commenced(pcclComm_t *comm, const ccoip_op_t *op, uint32_t rank, uint32_t world) {
    if (PPROF_ON(&comm->prof, pcclProfilerEventColl)) ccoip_prof_commenced_slow(comm, op, rank, world);
}
/* The ring's probe when phases or transfers are wanted, else NULL. */
static inline const reduce_ring_probe_t *ccoip_prof_ring(pcclComm_t *comm, const ccoip_op_t *op, ccoip_ring_prof_t *r) {
    return __builtin_expect((comm->prof.mask & CCOIP_PROF_PHASE_TYPES) != 0, 0) ? ccoip_prof_ring_slow(comm, op, r)
                                                                                 : NULL;
}
/* The rank `dir` (+1 next, -1 previous) away from ours in the op's ring (after COMMENCE). */
static inline uint32_t ccoip_prof_peer(const ccoip_op_t *op, int dir) {
    uint32_t r = op->commence.u.collective_commence.rank, w = op->commence.u.collective_commence.world;
    return w == 0 ? 0 : (r + (uint32_t) (dir > 0 ? 1 : (int) w - 1)) % w;
}
/* A wait phase (INIT or DONE) of the op begins / ends. */
#define ccoip_prof_wait(comm, op, phase) ccoip_prof_phase(&(comm)->prof, (op)->prof, (phase), (op)->tag)
#define ccoip_prof_wait_end(comm, h) pprof_stop(&(comm)->prof, pcclProfilerEventPhase, (h))

#endif /* CCOIP_COLL_PROF_H */
