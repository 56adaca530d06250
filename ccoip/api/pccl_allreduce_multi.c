/* pccl_allreduce_multi.c: pcclAllReduceMultipleWithRetry. Each pass runs the all-reduces still
 * pending through pcclAllReduceAsync, at most max_in_flight at once (a sliding window over the
 * descriptors in order, awaited oldest first). Small host tensors of the same dtype and op
 * (unquantized) go as one all-reduce per bucket: packed into a buffer the communicator keeps,
 * reduced in place, unpacked; one op per tensor would pay the per-op round trips and ring
 * start-up many times over (a model is mostly small tensors by count). A bucket carries the tag
 * of its first member and the summed count; every peer builds the same buckets from the same
 * descriptors (a peer that differs gets pcclInvalidUsage from the master's check of the
 * description). The outcome of every op is shared through the master, so every peer ends a pass
 * with the same set of failed ops (a failed bucket: all its members); the failed ops relinked
 * the ring among the peers that remain (PCCL's rule: newcomers wait for the caller's next
 * pcclUpdateTopology, between steps), and another pass runs over the failed ones. Every peer of
 * the group submits the same ops in the same order in every pass: none stops early, or the
 * others would wait for its INIT. sendbuf is never written, so a retry starts from the same
 * input (a bucket is packed again from it). */
#include <stdlib.h>
#include <string.h>

#include "ccoip/peer/ccoip_peer.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/peer/ccoip_device.h"
#include "ccoip/api/pccl_internal.h"
#include "ccoip/net/ccoip_socket.h"
#include "ccoip/peer/ccoip_prof.h"
#include "log/log.h"
#include "reduce/reduce.h"

#define MOD "pccl"
#define FN "pcclAllReduceMultipleWithRetry"
/* Up to this many descriptors the per-op state lives on the stack: a training step's call
 * allocates nothing (docs/memory.md); beyond it, one malloc per call. */
#define STACK_OPS 1024
/* Tensors up to this size are bucketed; a bucket holds up to BUCKET_BYTES. */
#define SMALL_BYTES ((size_t) 1 << 20)
#define BUCKET_BYTES ((size_t) 16 << 20)
#define NONE SIZE_MAX

/* Per descriptor: its bucket (next member, the head's summed count and arena offset). A
 * descriptor alone is a head with no next member and off NONE. */
typedef struct unit_t {
    size_t next, count, off;
    bool pending, head;
} unit_t;

/* Results after which a retry cannot help. */
static bool fatal(pcclResult_t r) { return r != pcclSuccess && r != pcclRankConnectionLost; }

static size_t bytes_of(const pcclReduceOpDescriptor_t *d) {
    return d->descriptor.count * reduce_dtype_size(d->descriptor.src_descriptor.datatype);
}

static bool small(const pcclReduceOpDescriptor_t *d) {
    return bytes_of(d) <= SMALL_BYTES && d->descriptor.quantization_options.algorithm == pcclQuantNone &&
           pccl_buffers_kind(d->sendbuf, d->recvbuf) == PCCL_BUFFERS_HOST;
}

static bool same_kind(const pcclReduceOpDescriptor_t *a, const pcclReduceOpDescriptor_t *b) {
    return a->descriptor.src_descriptor.datatype == b->descriptor.src_descriptor.datatype &&
           a->descriptor.op == b->descriptor.op;
}

/* Groups the pending descriptors into units; returns the arena bytes the buckets need. Depends
 * on the descriptors and the pending set only, both the same on every peer. */
static size_t plan(const pcclReduceOpDescriptor_t *d, size_t n, unit_t *u, bool bucket) {
    for (size_t i = 0; i < n; i++) {
        u[i].next = u[i].off = NONE;
        u[i].count = d[i].descriptor.count;
        u[i].head = u[i].pending;
    }
    size_t arena = 0;
    for (size_t i = 0; bucket && i < n; i++) {
        if (!u[i].head || u[i].next != NONE || !small(&d[i])) continue;
        size_t bytes = bytes_of(&d[i]), tail = i;
        for (size_t j = i + 1; j < n; j++) {
            if (!u[j].head || u[j].next != NONE || !small(&d[j]) || !same_kind(&d[i], &d[j])) continue;
            if (bytes + bytes_of(&d[j]) > BUCKET_BYTES) break;
            bytes += bytes_of(&d[j]);
            u[i].count += d[j].descriptor.count;
            u[j].head = false;
            u[tail].next = j;
            tail = j;
        }
        if (tail == i) continue; /* alone: runs on its own buffers */
        u[i].off = arena;
        arena += (bytes + 63) & ~(size_t) 63;
    }
    return arena;
}

/* Copies a bucket's inputs into the arena (in) or its result out to the members' recvbufs. */
static void pack(const pcclReduceOpDescriptor_t *d, const unit_t *u, size_t head, char *arena, bool in) {
    char *p = arena + u[head].off;
    for (size_t i = head; i != NONE; i = u[i].next) {
        size_t b = bytes_of(&d[i]);
        if (in) memcpy(p, d[i].sendbuf, b);
        else memcpy(d[i].recvbuf, p, b);
        p += b;
    }
}

/* One pass over the pending units; clears `pending` of those that succeeded. Returns the first
 * fatal result, or pcclSuccess (some may still be pending). */
static pcclResult_t run_pass(const pcclReduceOpDescriptor_t *descs, size_t n, pcclComm_t *comm, unit_t *u,
                             char *arena, uint32_t window, pcclReduceInfo_t *total) {
    size_t ring[CCOIP_MAX_OPS]; /* head descriptor of each op in flight, oldest first */
    pcclAsyncReduceOp_t handles[CCOIP_MAX_OPS];
    uint32_t head = 0, inflight = 0;
    pcclResult_t first_fatal = pcclSuccess;
    size_t next = 0;
    for (;;) {
        while (next < n && !u[next].head) next++;
        if (next < n && inflight < window && first_fatal == pcclSuccess) {
            const pcclReduceOpDescriptor_t *d = &descs[next];
            uint32_t slot = (head + inflight) % CCOIP_MAX_OPS;
            pcclResult_t r;
            if (u[next].off == NONE) {
                r = pcclAllReduceAsync(d->sendbuf, d->recvbuf, &d->descriptor, comm, &handles[slot]);
            } else {
                pack(descs, u, next, arena, true);
                pcclReduceDescriptor_t b = d->descriptor;
                b.count = u[next].count;
                void *buf = arena + u[next].off;
                r = pcclAllReduceAsync(buf, buf, &b, comm, &handles[slot]);
            }
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
        size_t h = ring[head];
        if (r == pcclSuccess) {
            if (u[h].off != NONE) pack(descs, u, h, arena, false);
            for (size_t i = h; i != NONE; i = u[i].next) u[i].pending = false;
            total->local_world_size = info.local_world_size;
        } else if (fatal(r) && first_fatal == pcclSuccess) {
            first_fatal = r;
        }
        head = (head + 1) % CCOIP_MAX_OPS;
        inflight--;
    }
    return first_fatal;
}

/* The arena for this pass: the communicator's, grown when short (a steady training step reuses
 * it). NULL when memory is short: the pass then runs one op per tensor. */
static char *arena_grow(pcclComm_t *comm, size_t need) {
    if (need > comm->multi_arena_cap) {
        free(comm->multi_arena);
        comm->multi_arena = malloc(need);
        comm->multi_arena_cap = comm->multi_arena ? need : 0;
    }
    return comm->multi_arena;
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
    unit_t on_stack[STACK_OPS];
    unit_t *u = count <= STACK_OPS ? on_stack : malloc(count * sizeof *u);
    if (u == NULL) {
        ccoip_prof_api_end(&comm->prof, ev, pcclInternalError);
        return pcclInternalError;
    }
    for (size_t i = 0; i < count; i++) u[i].pending = true;
    /* PCCL_MULTI_BUCKET=0: one op per tensor (to compare); every peer must set it alike. The
     * arena serves one call at a time; a second call at once runs one op per tensor too. */
    const char *env = getenv("PCCL_MULTI_BUCKET");
    bool bucket = env == NULL || *env == '\0' || atoi(env) != 0;
    bool held = bucket && !atomic_exchange(&comm->multi_busy, true);
    if (bucket && !held)
        LOG_WARN(MOD, FN ": another call on this communicator holds the buckets: one op per tensor (the other peers "
                      "must do the same)");
    size_t left = count;
    uint64_t epoch = atomic_load(&comm->round_epoch);
    for (unsigned pass = 0; left > 0; pass++) {
        if (pass > 0) {
            ccoip_prof_state(&comm->prof, pcclProfilerEventApi, ev, pcclProfilerStateRetried,
                             &(pcclProfilerStateArgs_t){.attempt = pass});
            LOG_INFO(MOD, FN ": %zu of %zu all-reduces failed; retrying them on the relinked ring", left, count);
            /* The failed awaits relinked already (PCCL_STRICT=topology: they did not); admits nobody. */
            ccoip_peer_relink_ring(comm, epoch);
            if (atomic_load(&comm->master_lost)) {
                res = pcclMasterConnectionFailed;
                break;
            }
        }
        epoch = atomic_load(&comm->round_epoch);
        if (atomic_load(&comm->world[1]) < 2) {
            LOG_ERROR(MOD, FN ": fewer than 2 peers remain; %zu of %zu all-reduces did not complete", left, count);
            res = pcclTooFewPeers;
            break;
        }
        size_t need = plan(descriptors, count, u, held);
        char *arena = need > 0 ? arena_grow(comm, need) : NULL;
        if (need > 0 && arena == NULL) {
            LOG_WARN(MOD, FN ": no memory for the small-tensor buckets (%zu bytes): one op per tensor", need);
            plan(descriptors, count, u, false);
        }
        res = run_pass(descriptors, count, comm, u, arena, window, &total);
        left = 0;
        for (size_t i = 0; i < count; i++) left += u[i].pending;
        if (res != pcclSuccess) break;
    }
    if (held) atomic_store(&comm->multi_busy, false);
    if (u != on_stack) free(u);
    if (res == pcclTooFewPeers) total.local_world_size = atomic_load(&comm->world[1]);
    if (reduce_info_out != NULL) *reduce_info_out = total;
    ccoip_prof_api_end(&comm->prof, ev, res);
    return res;
}
