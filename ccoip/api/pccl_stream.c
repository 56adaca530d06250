/* pccl_stream.c: pcclAllReduceOnStream (docs/cuda-streams.md): checks, a gate on the caller's
 * stream (ccoip_gate.h), then an async op that a worker, the proxy thread, runs and releases. */
#include "ccoip/api/pccl_internal.h"
#include "ccoip/peer/ccoip_device.h"
#include "ccoip/peer/ccoip_gate.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "log/log.h"
#include "reduce/reduce.h"

#define MOD "pccl"

PCCL_EXPORT pcclResult_t pcclAllReduceOnStream(const void *sendbuf, void *recvbuf,
                                               const pcclReduceDescriptor_t *descriptor,
                                               const pcclComm_t *communicator, void *stream,
                                               pcclAsyncReduceOp_t *reduce_handle_out) {
    const char *fn = "pcclAllReduceOnStream";
    if (reduce_handle_out == NULL && pccl_is_initialized()) {
        LOG_ERROR(MOD, "%s: reduce_handle_out must not be NULL", fn);
        return pcclInvalidArgument;
    }
    pcclResult_t res = pccl_allreduce_precheck(fn, sendbuf, recvbuf, descriptor, communicator);
    if (res != pcclSuccess) return res;
    if (cuda_table() == NULL) {
        LOG_ERROR(MOD, "%s: this libpccl is built without CUDA", fn);
        return pcclInvalidUsage;
    }
    if (pccl_buffers_kind(sendbuf, recvbuf) != PCCL_BUFFERS_DEVICE) {
        LOG_ERROR(MOD, "%s: sendbuf and recvbuf must be CUDA device memory (use pcclAllReduceAsync for host memory)",
                  fn);
        return pcclInvalidArgument;
    }
    pcclComm_t *comm = (pcclComm_t *) communicator;
    size_t esz = reduce_dtype_size(descriptor->src_descriptor.datatype);
    ccoip_gate_t *gate;
    reduce_cache_t *pinned = pccl_pinned_cache(&comm->pinned, &comm->pinned_lock);
    res = ccoip_gate_open(&comm->gates, &comm->pinned_lock, pinned, stream, sendbuf, recvbuf, descriptor->count, esz,
                          atomic_load(&comm->world[1]), &gate);
    if (res != pcclSuccess) return res;
    ccoip_op_t *op;
    res = ccoip_op_claim_gated(comm, sendbuf, recvbuf, descriptor, gate, &op);
    if (res != pcclSuccess) {
        /* The stream already waits on the gate: let it go, recvbuf marked as for a failed op. */
        ccoip_gate_release(gate, false);
        return res;
    }
    reduce_handle_out->comm = comm;
    reduce_handle_out->tag = descriptor->tag;
    return pcclSuccess;
}
