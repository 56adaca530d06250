/* pccl_allreduce_multi.c: pcclAllReduceMultipleWithRetry. Each pass runs the all-reduces still
 * pending through pcclAllReduceAsync, at most max_in_flight at once (a sliding window over the
 * descriptors in order, awaited oldest first). The outcome of every op is shared through the
 * master, so every peer ends a pass with the same set of failed ops; it then calls
 * pcclUpdateTopology (which drops the dead and relinks the ring) and runs another pass over the
 * failed ones. Every peer of the group submits the same ops in the same order in every pass: none
 * stops early, or the others would wait for its INIT. sendbuf is never written, so a retry starts
 * from the same input. */
#include <stdlib.h>
#include <string.h>

#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/api/pccl_internal.h"
#include "ccoip/net/ccoip_socket.h"
#include "ccoip/peer/ccoip_prof.h"
#include "log/log.h"

#define MOD "pccl"
#define FN "pcclAllReduceMultipleWithRetry"
/* Up to this many descriptors the per-op flags live on the stack: a training step's call
 * allocates nothing (docs/memory.md); beyond it, one malloc per call. */
#define STACK_OPS 1024

/* Results after which a retry cannot help. */
static bool fatal(pcclResult_t r) { return r != pcclSuccess && r != pcclRankConnectionLost; }

/* One pass over the pending ops; clears pending[i] for those that succeeded. Returns the first
 * fatal result, or pcclSuccess (some may still be pending). */
static pcclResult_t run_pass(const pcclReduceOpDescriptor_t *descs, size_t n, pcclComm_t *comm, bool *pending,
                             uint32_t window, pcclReduceInfo_t *total) {
    size_t ring[CCOIP_MAX_OPS]; /* descriptor index of each op in flight, oldest first */
    pcclAsyncReduceOp_t handles[CCOIP_MAX_OPS];
    uint32_t head = 0, inflight = 0;
    pcclResult_t first_fatal = pcclSuccess;
    size_t next = 0;
    for (;;) {
        while (next < n && !pending[next]) next++;
        if (next < n && inflight < window && first_fatal == pcclSuccess) {
            const pcclReduceOpDescriptor_t *d = &descs[next];
            uint32_t slot = (head + inflight) % CCOIP_MAX_OPS;
            pcclResult_t r = pcclAllReduceAsync(d->sendbuf, d->recvbuf, &d->descriptor, comm, &handles[slot]);
            if (r != pcclSuccess) { /* refused before it started (e.g. too few peers now) */
                first_fatal = r;
            } else {
                ring[slot] = next;
                inflight++;
            }
            next++;
            continue;
        }
        if (inflight == 0) break;
        pcclReduceInfo_t info;
        memset(&info, 0, sizeof info);
        pcclResult_t r = pcclAwaitAsyncReduce(&handles[head], &info);
        total->tx_bytes += info.tx_bytes;
        total->rx_bytes += info.rx_bytes;
        if (r == pcclSuccess) {
            pending[ring[head]] = false;
            total->local_world_size = info.local_world_size;
        } else if (fatal(r) && first_fatal == pcclSuccess) {
            first_fatal = r;
        }
        head = (head + 1) % CCOIP_MAX_OPS;
        inflight--;
    }
    return first_fatal;
}

static pcclResult_t check_args(const pcclReduceOpDescriptor_t *descs, size_t n, const pcclComm_t *comm,
                               int max_in_flight) {
    if (!pccl_is_initialized()) {
        LOG_ERROR(MOD, FN ": pcclInit has not been called");
        return pcclNotInitialized;
    }
    if (comm == NULL || (descs == NULL && n > 0) || max_in_flight < 1) {
        LOG_ERROR(MOD, FN ": communicator and descriptors must not be NULL and max_in_flight must be >= 1");
        return pcclInvalidArgument;
    }
    for (size_t i = 0; i < n; i++) {
        pcclResult_t r = pccl_allreduce_precheck(FN, descs[i].sendbuf, descs[i].recvbuf, &descs[i].descriptor, comm);
        if (r != pcclSuccess) return r;
        for (size_t k = 0; k < i; k++)
            if (descs[k].descriptor.tag == descs[i].descriptor.tag) {
                LOG_ERROR(MOD, FN ": descriptors %zu and %zu have the same tag %llu", k, i,
                          (unsigned long long) descs[i].descriptor.tag);
                return pcclInvalidUsage;
            }
    }
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclAllReduceMultipleWithRetry(const pcclReduceOpDescriptor_t *descriptors, size_t count,
                                                        const pcclComm_t *communicator,
                                                        pcclReduceInfo_t *reduce_info_out, int max_in_flight) {
    pcclResult_t res = check_args(descriptors, count, communicator, max_in_flight);
    if (res != pcclSuccess) return res;
    pcclComm_t *comm = (pcclComm_t *) communicator;
    void *ev = ccoip_prof_api(&comm->prof, pcclProfilerApiAllReduceMultiple, 0, count);
    uint32_t window = max_in_flight > CCOIP_MAX_OPS ? CCOIP_MAX_OPS : (uint32_t) max_in_flight;
    pcclReduceInfo_t total = {atomic_load(&comm->world[1]), 0, 0};
    bool on_stack[STACK_OPS];
    bool *pending = count <= STACK_OPS ? on_stack : malloc(count);
    if (pending == NULL) {
        ccoip_prof_api_end(&comm->prof, ev, pcclInternalError);
        return pcclInternalError;
    }
    memset(pending, 1, count);
    size_t left = count;
    for (unsigned pass = 0; left > 0; pass++) {
        if (pass > 0) {
            ccoip_prof_state(&comm->prof, pcclProfilerEventApi, ev, pcclProfilerStateRetried,
                             &(pcclProfilerStateArgs_t){.attempt = pass});
            LOG_INFO(MOD, FN ": %zu of %zu all-reduces failed; updating the topology, then retrying them", left, count);
            /* A failed round means a peer dropped meanwhile: vote again with the peers that remain. */
            while ((res = pcclUpdateTopology(comm)) == pcclUpdateTopologyFailed && atomic_load(&comm->world[1]) >= 2)
                ccoip_sleep_ms(10);
            if (res == pcclUpdateTopologyFailed) res = pcclTooFewPeers;
            if (res != pcclSuccess) break;
        }
        if (atomic_load(&comm->world[1]) < 2) {
            LOG_ERROR(MOD, FN ": fewer than 2 peers remain; %zu of %zu all-reduces did not complete", left, count);
            res = pcclTooFewPeers;
            break;
        }
        res = run_pass(descriptors, count, comm, pending, window, &total);
        left = 0;
        for (size_t i = 0; i < count; i++) left += pending[i];
        if (res != pcclSuccess) break;
    }
    if (pending != on_stack) free(pending);
    if (res == pcclTooFewPeers) total.local_world_size = atomic_load(&comm->world[1]);
    if (reduce_info_out != NULL) *reduce_info_out = total;
    ccoip_prof_api_end(&comm->prof, ev, res);
    return res;
}
