/* pccl_allreduce.c: pcclAllReduce. Three steps, the first and last agreed through the master:
 *   1. COLLECTIVE_INIT -> COMMENCE: every member of the peer group asked for this tag with the
 *      same description; the master gives each its rank in the ring.
 *   2. The ring (reduce/) over the data links of the current ring sockets.
 *   3. COLLECTIVE_COMPLETE -> DONE: the outcome is shared, so either every member returns success
 *      or none does. A failed collective retires the ring's data links: frames of it may still be
 *      in the sockets, so the next collective needs a new topology round (pcclUpdateTopology). */
#include <string.h>

#include "ccoip/ccoip_peer_int.h"
#include "ccoip/pccl_internal.h"
#include "log/log.h"
#include "reduce/reduce.h"
#include "threadpark/threadpark.h"

#define MOD "pccl"

void ccoip_data_close(pcclComm_t *comm) {
    ccoip_datalink_stop(comm->data_tx);
    ccoip_datalink_stop(comm->data_rx);
    comm->data_tx = comm->data_rx = NULL;
}

void ccoip_coll_abort(pcclComm_t *comm, bool all, uint64_t tag) {
    pthread_mutex_lock(&comm->coll_lock);
    if (comm->coll_active && (all || comm->coll_tag == tag)) {
        atomic_store_explicit(&comm->coll_abort, 1, memory_order_release);
        atomic_fetch_add_explicit(&comm->coll_doorbell, 1, memory_order_acq_rel);
        tpark_wake_all((const uint32_t *) &comm->coll_doorbell);
    }
    pthread_mutex_unlock(&comm->coll_lock);
}

/* Data links over the current ring sockets; false when they cannot carry a collective. */
static bool data_ready(pcclComm_t *comm) {
    const ccoip_p2p_links_t *l = &comm->p2p.links;
    if (comm->data_tx != NULL && comm->data_epoch == l->epoch)
        return !ccoip_datalink_broken(comm->data_tx) && !ccoip_datalink_broken(comm->data_rx);
    if (comm->data_epoch == l->epoch && comm->data_epoch != 0) return false; /* retired after a failure */
    ccoip_data_close(comm);
    if (l->tx.fd < 0 || l->rx.fd < 0) return false;
    comm->data_epoch = l->epoch;
    comm->data_tx = ccoip_datalink_start(l->tx.fd, "ring tx");
    comm->data_rx = ccoip_datalink_start(l->rx.fd, "ring rx");
    return comm->data_tx != NULL && comm->data_rx != NULL;
}

static void set_active(pcclComm_t *comm, bool active, uint64_t tag) {
    pthread_mutex_lock(&comm->coll_lock);
    comm->coll_active = active;
    comm->coll_tag = tag;
    atomic_store(&comm->coll_abort, 0);
    pthread_mutex_unlock(&comm->coll_lock);
}

/* Waits for the master's packet of `type` about `tag`; false when the master link is gone. */
static bool await_reply(pcclComm_t *comm, uint16_t type, uint64_t tag, ccoip_packet_t *out) {
    for (;;) {
        if (ccoip_link_wait_mail(comm, out, -1) != CCOIP_OK) return false;
        uint64_t got = out->type == CCOIP_PKT_M2C_COLLECTIVE_COMMENCE ? out->u.collective_commence.tag
                       : out->type == CCOIP_PKT_M2C_COLLECTIVE_DONE   ? out->u.collective_done.tag
                                                                       : ~tag;
        if (out->type == type && got == tag) return true;
        LOG_WARN(MOD, "ignoring %s from the master during collective %llu", ccoip_packet_name(out->type),
                 (unsigned long long) tag);
        ccoip_packet_free(out);
    }
}

static pcclResult_t check_descriptor(const pcclReduceDescriptor_t *d) {
    if (d->count == 0) {
        LOG_ERROR(MOD, "pcclAllReduce: count is 0");
        return pcclInvalidArgument;
    }
    if (!reduce_dtype_valid(d->src_descriptor.datatype) || !reduce_op_valid(d->op)) {
        LOG_ERROR(MOD, "pcclAllReduce: unknown datatype %d or operation %d", (int) d->src_descriptor.datatype,
                  (int) d->op);
        return pcclInvalidArgument;
    }
    if (d->count > SIZE_MAX / reduce_dtype_size(d->src_descriptor.datatype)) {
        LOG_ERROR(MOD, "pcclAllReduce: count %zu overflows the buffer size", d->count);
        return pcclInvalidArgument;
    }
    if (reduce_quant_check(d->src_descriptor.datatype, &d->quantization_options) != REDUCE_OK) {
        LOG_ERROR(MOD, "pcclAllReduce: quantization algorithm %d to type %d is not supported for type %d",
                  (int) d->quantization_options.algorithm, (int) d->quantization_options.quantized_datatype,
                  (int) d->src_descriptor.datatype);
        return pcclInvalidArgument;
    }
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclAllReduce(const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *descriptor,
                                       const pcclComm_t *communicator, pcclReduceInfo_t *reduce_info_out) {
    if (!pccl_is_initialized()) {
        LOG_ERROR(MOD, "pcclAllReduce: pcclInit has not been called");
        return pcclNotInitialized;
    }
    if (sendbuf == NULL || recvbuf == NULL || descriptor == NULL || communicator == NULL) {
        LOG_ERROR(MOD, "pcclAllReduce: sendbuf, recvbuf, descriptor and communicator must not be NULL");
        return pcclInvalidArgument;
    }
    pcclResult_t res = check_descriptor(descriptor);
    if (res != pcclSuccess) return res;
    /* The API takes a const communicator; the call still moves its mailbox and links. */
    pcclComm_t *comm = (pcclComm_t *) communicator;
    if (!atomic_load(&comm->accepted)) {
        LOG_ERROR(MOD, "pcclAllReduce: the communicator is not connected (pcclConnect first)");
        return pcclInvalidUsage;
    }
    if (atomic_load(&comm->master_lost)) return pcclMasterConnectionFailed;
    if (atomic_load(&comm->world[1]) < 2) {
        LOG_ERROR(MOD, "pcclAllReduce: this peer group has fewer than 2 peers");
        return pcclTooFewPeers;
    }
    pthread_mutex_lock(&comm->coll_lock);
    bool busy = comm->coll_active;
    uint64_t busy_tag = comm->coll_tag;
    pthread_mutex_unlock(&comm->coll_lock);
    if (busy) {
        LOG_ERROR(MOD, "pcclAllReduce: another collective (tag %llu) is running on this communicator",
                  (unsigned long long) busy_tag);
        return pcclInvalidUsage;
    }
    uint64_t tag = descriptor->tag;
    set_active(comm, true, tag);

    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_COLLECTIVE_INIT;
    p.u.collective_init = (ccoip_collective_init_t){tag, descriptor->count, (uint8_t) descriptor->src_descriptor.datatype,
                                                    (uint8_t) descriptor->op,
                                                    (uint8_t) descriptor->quantization_options.quantized_datatype,
                                                    (uint8_t) descriptor->quantization_options.algorithm};
    ccoip_packet_t r;
    if (ccoip_link_send(comm, &p) != CCOIP_OK || !await_reply(comm, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, tag, &r)) {
        set_active(comm, false, 0);
        return pcclMasterConnectionFailed;
    }
    ccoip_collective_commence_t go = r.u.collective_commence;
    if (go.status != CCOIP_RESULT_OK) {
        set_active(comm, false, 0);
        if (go.status == CCOIP_RESULT_MISMATCH) {
            LOG_ERROR(MOD, "pcclAllReduce: the peers of this group described collective %llu differently",
                      (unsigned long long) tag);
            return pcclInvalidUsage;
        }
        LOG_WARN(MOD, "pcclAllReduce: a peer left since the last topology update; call pcclUpdateTopology");
        return pcclRankConnectionLost;
    }

    reduce_ring_stats_t stats = {0, 0};
    int rc = REDUCE_ELINK;
    if (go.world >= 2 && go.rank < go.world && data_ready(comm)) {
        reduce_ring_params_t rp = {.rank = go.rank, .world_size = go.world,
                                   .next = ccoip_datalink_link(comm->data_tx), .prev = ccoip_datalink_link(comm->data_rx),
                                   .tag = tag, .cache = comm->cache, .abort_flag = &comm->coll_abort,
                                   .doorbell = &comm->coll_doorbell,
                                   .quantization = descriptor->quantization_options};
        rc = reduce_ring_allreduce(&rp, sendbuf, recvbuf, descriptor->count, descriptor->src_descriptor.datatype,
                                   descriptor->op, &stats);
    }
    if (rc != REDUCE_OK)
        LOG_WARN(MOD, "pcclAllReduce: collective %llu failed locally: %s", (unsigned long long) tag,
                 reduce_strerror(rc));

    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_COLLECTIVE_COMPLETE;
    p.u.collective_complete = (ccoip_collective_complete_t){tag, rc == REDUCE_OK};
    bool done = ccoip_link_send(comm, &p) == CCOIP_OK && await_reply(comm, CCOIP_PKT_M2C_COLLECTIVE_DONE, tag, &r);
    bool ok = done && rc == REDUCE_OK && r.u.collective_done.status == CCOIP_RESULT_OK;
    set_active(comm, false, 0);
    if (!ok) ccoip_data_close(comm); /* retire this ring's links: see the top of the file */
    if (reduce_info_out != NULL) {
        reduce_info_out->local_world_size = go.world;
        reduce_info_out->tx_bytes = stats.tx_bytes;
        reduce_info_out->rx_bytes = stats.rx_bytes;
    }
    if (!done) return pcclMasterConnectionFailed;
    return ok ? pcclSuccess : pcclRankConnectionLost;
}
