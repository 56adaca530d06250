/* pccl_allreduce.c: pcclAllReduce, pcclAllReduceAsync, pcclAwaitAsyncReduce: argument checks, then
 * an op of ccoip_coll.c (INIT -> COMMENCE -> ring -> COMPLETE -> DONE). The sync call runs its op
 * on the caller's thread; an async one is queued and run by a worker, and the caller never blocks
 * on a socket. Several may be in flight, each with its own tag. */
#include <string.h>

#include "ccoip/peer/ccoip_peer.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/peer/ccoip_device.h"
#include "ccoip/api/pccl_internal.h"
#include "ccoip/peer/ccoip_prof.h"
#include "log/log.h"
#include "reduce/reduce.h"

#define MOD "pccl"

/* PCCL's rule (docs/failures.md): an all-reduce that failed because a peer left relinks the ring
 * among the members that remain (admitting nobody) before it returns, so that a plain retry
 * runs; with PCCL_STRICT=topology the caller calls pcclUpdateTopology instead. Not after a
 * timeout: the stalled member would have to vote, and the call must return within the timeout.
 * The op's slot is still taken meanwhile: calls that need no op in flight wait for the relink. */
static void relink_after_failure(pcclComm_t *comm, const ccoip_op_t *op) {
    if (comm->strict_topology || op->result != pcclRankConnectionLost) return;
    ccoip_peer_relink_ring(comm, op->epoch);
}

static pcclResult_t check_descriptor(const char *fn, const pcclReduceDescriptor_t *d) {
    if (d->count == 0) {
        LOG_ERROR(MOD, "%s: count is 0", fn);
        return pcclInvalidArgument;
    }
    if (!reduce_dtype_valid(d->src_descriptor.datatype) || !reduce_op_valid(d->op)) {
        LOG_ERROR(MOD, "%s: unknown datatype %d or operation %d", fn, (int) d->src_descriptor.datatype, (int) d->op);
        return pcclInvalidArgument;
    }
    if (d->count > SIZE_MAX / reduce_dtype_size(d->src_descriptor.datatype)) {
        LOG_ERROR(MOD, "%s: count %zu overflows the buffer size", fn, d->count);
        return pcclInvalidArgument;
    }
    if (reduce_quant_check(d->src_descriptor.datatype, &d->quantization_options) != REDUCE_OK) {
        LOG_ERROR(MOD, "%s: quantization algorithm %d to type %d is not supported for type %d", fn,
                  (int) d->quantization_options.algorithm, (int) d->quantization_options.quantized_datatype,
                  (int) d->src_descriptor.datatype);
        return pcclInvalidArgument;
    }
    return pcclSuccess;
}

/* Everything a new all-reduce must pass before it takes a slot. */
pcclResult_t pccl_allreduce_precheck(const char *fn, const void *sendbuf, const void *recvbuf,
                                     const pcclReduceDescriptor_t *d, const pcclComm_t *comm) {
    if (!pccl_is_initialized()) {
        LOG_ERROR(MOD, "%s: pcclInit has not been called", fn);
        return pcclNotInitialized;
    }
    if (sendbuf == NULL || recvbuf == NULL || d == NULL || comm == NULL) {
        LOG_ERROR(MOD, "%s: sendbuf, recvbuf, descriptor and communicator must not be NULL", fn);
        return pcclInvalidArgument;
    }
    pcclResult_t res = check_descriptor(fn, d);
    if (res != pcclSuccess) return res;
    if (pccl_buffers_kind(sendbuf, recvbuf) == PCCL_BUFFERS_MIXED) {
        LOG_ERROR(MOD, "%s: sendbuf and recvbuf must both be host memory or both CUDA device memory", fn);
        return pcclInvalidArgument;
    }
    if (!atomic_load(&comm->accepted)) {
        LOG_ERROR(MOD, "%s: the communicator is not connected (pcclConnect first)", fn);
        return pcclInvalidUsage;
    }
    if (atomic_load(&comm->master_lost)) return pcclMasterConnectionFailed;
    if (atomic_load(&comm->world[1]) < 2) {
        LOG_ERROR(MOD, "%s: this peer group has fewer than 2 peers", fn);
        return pcclTooFewPeers;
    }
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclAllReduce(const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *descriptor,
                                       const pcclComm_t *communicator, pcclReduceInfo_t *reduce_info_out) {
    pcclResult_t res = pccl_allreduce_precheck("pcclAllReduce", sendbuf, recvbuf, descriptor, communicator);
    if (res != pcclSuccess) return res;
    /* The API takes a const communicator; the call still moves its ops and links. */
    pcclComm_t *comm = (pcclComm_t *) communicator;
    void *ev = ccoip_prof_api(&comm->prof, pcclProfilerApiAllReduce, descriptor->tag, 0);
    ccoip_op_t *op;
    res = ccoip_op_claim(comm, sendbuf, recvbuf, descriptor, false, &op);
    if (res == pcclSuccess) {
        op->prof_parent = ev;
        ccoip_op_run(comm, op);
        res = op->result;
        if (reduce_info_out != NULL) *reduce_info_out = op->info;
        relink_after_failure(comm, op);
        ccoip_op_release(comm, op);
    }
    ccoip_prof_api_end(&comm->prof, ev, res);
    return res;
}

PCCL_EXPORT pcclResult_t pcclAllReduceAsync(const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *descriptor,
                                            const pcclComm_t *communicator, pcclAsyncReduceOp_t *reduce_handle_out) {
    if (reduce_handle_out == NULL && pccl_is_initialized()) {
        LOG_ERROR(MOD, "pcclAllReduceAsync: reduce_handle_out must not be NULL");
        return pcclInvalidArgument;
    }
    pcclResult_t res = pccl_allreduce_precheck("pcclAllReduceAsync", sendbuf, recvbuf, descriptor, communicator);
    if (res != pcclSuccess) return res;
    pcclComm_t *comm = (pcclComm_t *) communicator;
    void *ev = ccoip_prof_api(&comm->prof, pcclProfilerApiAllReduceAsync, descriptor->tag, 0);
    ccoip_op_t *op;
    res = ccoip_op_claim(comm, sendbuf, recvbuf, descriptor, true, &op);
    if (res == pcclSuccess) {
        reduce_handle_out->comm = comm;
        reduce_handle_out->tag = descriptor->tag;
    }
    ccoip_prof_api_end(&comm->prof, ev, res);
    return res;
}

PCCL_EXPORT pcclResult_t pcclAwaitAsyncReduce(const pcclAsyncReduceOp_t *reduce_handle,
                                              pcclReduceInfo_t *reduce_info_out) {
    if (!pccl_is_initialized()) {
        LOG_ERROR(MOD, "pcclAwaitAsyncReduce: pcclInit has not been called");
        return pcclNotInitialized;
    }
    if (reduce_handle == NULL || reduce_handle->comm == NULL) {
        LOG_ERROR(MOD, "pcclAwaitAsyncReduce: the handle (and its communicator) must not be NULL");
        return pcclInvalidArgument;
    }
    const pprof_t *prof = &reduce_handle->comm->prof;
    void *ev = ccoip_prof_api(prof, pcclProfilerApiAwaitAsyncReduce, reduce_handle->tag, 0);
    ccoip_op_t *op;
    pcclResult_t res = ccoip_op_await(reduce_handle->comm, reduce_handle->tag, &op);
    if (op != NULL) {
        if (reduce_info_out != NULL) *reduce_info_out = op->info;
        relink_after_failure(reduce_handle->comm, op);
        ccoip_op_release(reduce_handle->comm, op);
    }
    ccoip_prof_api_end(prof, ev, res);
    return res;
}

PCCL_EXPORT pcclResult_t pcclSetCollectiveTimeout(pcclComm_t *communicator, uint32_t timeout_ms) {
    if (!pccl_is_initialized()) {
        LOG_ERROR(MOD, "pcclSetCollectiveTimeout: pcclInit has not been called");
        return pcclNotInitialized;
    }
    if (communicator == NULL) {
        LOG_ERROR(MOD, "pcclSetCollectiveTimeout: communicator is NULL");
        return pcclInvalidArgument;
    }
    ccoip_watchdog_set(communicator, timeout_ms);
    return pcclSuccess;
}
