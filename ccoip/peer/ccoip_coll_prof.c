/* ccoip_coll_prof.c: the profiler events of a collective (docs/profiler.md): the collective
 * itself, its INIT / DONE waits and the ring's phases (through reduce_ring_probe_t); the
 * transfers come from the data links (ccoip_datalink.c). Called only when the mask asks. */
#include <string.h>

#include "ccoip/peer/ccoip_coll_prof.h"
#include "ccoip/peer/ccoip_prof.h"
#include "reduce/reduce.h"

void *ccoip_prof_coll_begin_slow(pcclComm_t *comm, const ccoip_op_t *op) {
    const pcclReduceDescriptor_t *r = &op->desc;
    pcclProfilerEventDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = pcclProfilerEventColl;
    d.parent = op->prof_parent;
    d.u.coll.tag = op->tag;
    d.u.coll.seq = op->seq;
    d.u.coll.count = r->count;
    d.u.coll.bytes = (uint64_t) r->count * reduce_dtype_size(r->src_descriptor.datatype);
    d.u.coll.datatype = (uint32_t) r->src_descriptor.datatype;
    d.u.coll.op = (uint32_t) r->op;
    d.u.coll.quantized_datatype = (uint32_t) r->quantization_options.quantized_datatype;
    d.u.coll.quantization_algorithm = (uint32_t) r->quantization_options.algorithm;
    return pprof_start(&comm->prof, &d);
}

void ccoip_prof_coll_end_slow(pcclComm_t *comm, const ccoip_op_t *op) {
    const pprof_t *p = &comm->prof;
    pcclProfilerStateArgs_t a;
    memset(&a, 0, sizeof a);
    a.bytes = op->info.tx_bytes;
    a.bytes2 = op->info.rx_bytes;
    a.result = (int32_t) op->result;
    pprof_state(p, op->prof, pcclProfilerStateBytes, &a);
    if (op->desc.quantization_options.algorithm != pcclQuantNone)
        pprof_state(p, op->prof, pcclProfilerStateQuantizedBytes, &a);
    uint32_t reason = op->result == pcclInvalidUsage ? (uint32_t) pcclProfilerAbortMismatch : pprof_reason(op->result);
    pprof_finish_slow(p, op->prof, reason, op->result);
}

void ccoip_prof_commenced_slow(pcclComm_t *comm, const ccoip_op_t *op, uint32_t rank, uint32_t world) {
    pcclProfilerStateArgs_t a;
    memset(&a, 0, sizeof a);
    a.rank = rank;
    a.world_size = world;
    pprof_state(&comm->prof, op->prof, pcclProfilerStateCommenced, &a);
}

static void *probe_begin(void *ctx, int phase) {
    ccoip_ring_prof_t *r = ctx;
    if (!PPROF_ON(r->prof, pcclProfilerEventPhase)) return r->coll; /* transfers hang off the collective */
    r->phase[phase] = ccoip_prof_phase(r->prof, r->coll, phase == 0 ? pcclProfilerPhaseReduceScatter
                                                                    : pcclProfilerPhaseAllGather, r->tag);
    return r->phase[phase];
}

/* A ring phase that failed: a link broke, the master aborted the collective (a member left or a
 * watchdog fired: the collective's own Aborted says which), or this peer failed locally. */
static void probe_end(void *ctx, int phase, int rc) {
    ccoip_ring_prof_t *r = ctx;
    if (!PPROF_ON(r->prof, pcclProfilerEventPhase)) return;
    if (rc != REDUCE_OK) {
        pcclProfilerStateArgs_t a = {.reason = rc == REDUCE_ELINK || rc == REDUCE_EABORTED ? pcclProfilerAbortPeerLost
                                                                                           : pcclProfilerAbortLocal};
        pprof_state(r->prof, r->phase[phase], pcclProfilerStateAborted, &a);
    }
    pprof_stop(r->prof, pcclProfilerEventPhase, r->phase[phase]);
}

const reduce_ring_probe_t *ccoip_prof_ring_slow(pcclComm_t *comm, const ccoip_op_t *op, ccoip_ring_prof_t *r) {
    r->prof = &comm->prof;
    r->coll = op->prof;
    r->tag = op->tag;
    r->phase[0] = r->phase[1] = NULL;
    r->probe = (reduce_ring_probe_t){probe_begin, probe_end, r};
    return &r->probe;
}
