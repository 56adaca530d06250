/* pccl_shared_state.c: pcclSynchronizeSharedState. Argument checks, hashing, the exchange with
 * the master (C2M_SHARED_STATE_SYNC -> M2C_SHARED_STATE_RESULT, C2M_SHARED_STATE_DONE ->
 * M2C_SHARED_STATE_DONE), and, between the two, serving what others fetch from us and fetching
 * what differs (ccoip_peer_shared.c), then re-hashing what arrived. Hashing takes every tensor at
 * once (ccoip_ss_hash.c: one GPU launch for the device tensors, threads for large host ones).
 * The rules the master applies are in ccoip_master_shared.c and docs/shared-state.md. */
#include <stdlib.h>
#include <string.h>

#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/peer/ccoip_peer_shared.h"
#include "ccoip/peer/ccoip_prof.h"
#include "ccoip/peer/ccoip_ss_dial.h"
#include "ccoip/peer/ccoip_ss_fetch.h"
#include "ccoip/peer/ccoip_ss_hash.h"
#include "ccoip/net/ccoip_socket.h"
#include "ccoip/api/pccl_internal.h"
#include "cuda/cuda_table.h"
#include "log/log.h"

#define MOD "pccl"
#define FN "pcclSynchronizeSharedState"

static const uint8_t dtype_bytes[12] = {1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8};

/* Heapsort by name: in place, without the merge buffer that glibc's qsort mallocs for arrays
 * over 1 KiB. */
static void sift(ccoip_ss_slot_t *a, size_t root, size_t n) {
    for (;;) {
        size_t c = 2 * root + 1;
        if (c >= n) return;
        if (c + 1 < n && strcmp(a[c].name, a[c + 1].name) < 0) c++;
        if (strcmp(a[root].name, a[c].name) >= 0) return;
        ccoip_ss_slot_t t = a[root];
        a[root] = a[c];
        a[c] = t;
        root = c;
    }
}

static void sort_by_name(ccoip_ss_slot_t *a, size_t n) {
    for (size_t i = n / 2; i-- > 0;) sift(a, i, n);
    for (size_t end = n; end-- > 1;) {
        ccoip_ss_slot_t t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift(a, 0, end);
    }
}

/* The communicator's per-tensor arrays for n tensors, grown when a sync has more tensors than
 * any before it; false when memory ran out. */
static bool scratch_reserve(pcclComm_t *comm, size_t n) {
    if (n + 1 <= comm->ss_cap) return true;
    ccoip_ss_slot_t *slots = realloc(comm->ss_slots, (n + 1) * sizeof *slots);
    if (slots != NULL) comm->ss_slots = slots;
    ccoip_ss_tensor_t *wire = realloc(comm->ss_wire, (n + 1) * sizeof *wire);
    if (wire != NULL) comm->ss_wire = wire;
    if (slots == NULL || wire == NULL || !ccoip_ss_hasher_reserve(&comm->ss_hasher, n + 1)) return false;
    comm->ss_cap = n + 1;
    return true;
}

static pcclResult_t check_tensor(const pcclTensorInfo_t *t, size_t i) {
    if (t->name == NULL || t->name[0] == '\0' || strnlen(t->name, CCOIP_MAX_SS_NAME + 1) > CCOIP_MAX_SS_NAME) {
        LOG_ERROR(MOD, FN ": tensor %zu needs a name of 1 to %u bytes", i, CCOIP_MAX_SS_NAME);
        return pcclInvalidArgument;
    }
    if ((unsigned) t->datatype > (unsigned) pcclDouble) {
        LOG_ERROR(MOD, FN ": tensor \"%s\" has unknown datatype %d", t->name, (int) t->datatype);
        return pcclInvalidArgument;
    }
    if (t->device_type != pcclDeviceCpu && t->device_type != pcclDeviceCuda) {
        LOG_ERROR(MOD, FN ": tensor \"%s\" has unknown device type %d", t->name, (int) t->device_type);
        return pcclInvalidArgument;
    }
    if (t->device_type == pcclDeviceCuda && cuda_table() == NULL) {
        LOG_ERROR(MOD, FN ": tensor \"%s\" is CUDA memory, but this libpccl is built without CUDA support", t->name);
        return pcclInvalidArgument;
    }
    if (t->count > 0 && t->data == NULL) {
        LOG_ERROR(MOD, FN ": tensor \"%s\" has %zu elements and no data", t->name, t->count);
        return pcclInvalidArgument;
    }
    if (t->count > SIZE_MAX / dtype_bytes[t->datatype]) {
        LOG_ERROR(MOD, FN ": tensor \"%s\": %zu elements overflow the byte size", t->name, t->count);
        return pcclInvalidArgument;
    }
    return pcclSuccess;
}

/* Waits for the master's packet of `type`; false when the master link is gone. With `watchdog`
 * (the wait for the RESULT): a member that never calls pcclSynchronizeSharedState would keep the
 * others here for ever, so after the collective timeout (PCCL_COLLECTIVE_TIMEOUT_MS,
 * pcclSetCollectiveTimeout) this peer asks the master to end the sync for the group, and waits
 * for the RESULT that answers it: TIMEOUT, or the real one when the last member came meanwhile. */
static bool await_master(pcclComm_t *comm, uint16_t type, ccoip_packet_t *out, bool watchdog) {
    int64_t deadline = watchdog ? ccoip_now_ms() + (int64_t) atomic_load(&comm->colls.timeout_ms) : -1;
    for (;;) {
        ccoip_status_t st = ccoip_link_wait_mail(comm, out, deadline);
        if (st == CCOIP_ERR_TIMEOUT) {
            ccoip_packet_t p;
            memset(&p, 0, sizeof p);
            p.type = CCOIP_PKT_C2M_SHARED_STATE_ABORT;
            if (ccoip_link_send_more(comm, &p) != CCOIP_OK) return false;
            deadline = -1;
            continue;
        }
        if (st != CCOIP_OK) return false;
        if (out->type == type) return true;
        LOG_WARN(MOD, FN ": ignoring %s from the master during the sync", ccoip_packet_name(out->type));
        ccoip_packet_free(out);
    }
}

/* Fetches every tensor of the result from all its distributors at once, in byte ranges
 * (ccoip_ss_fetch.c), then re-hashes each. */
static pcclResult_t fetch_all(pcclComm_t *comm, const ccoip_ss_result_t *r, const ccoip_ss_slot_t *slots, size_t n,
                              uint64_t *rx) {
    if (r->nfetch == 0) return pcclSuccess;
    pcclResult_t res = ccoip_ss_fetch_all(comm, r, slots, n, rx);
    /* Re-hash what arrived, as many at a time as the hasher holds (a fetch names one of our n
     * tensors, so usually all at once). */
    ccoip_ss_hash_req_t *reqs = ccoip_ss_hasher_reqs(comm->ss_hasher);
    for (uint32_t at = 0; at < r->nfetch && res == pcclSuccess;) {
        uint32_t k = 0;
        for (; at + k < r->nfetch && k < n + 1; k++) {
            const ccoip_ss_fetch_t *f = &r->fetch[at + k];
            const ccoip_ss_slot_t *s = ccoip_ss_find(slots, n, f->name);
            if (s == NULL) {
                res = pcclInternalError;
                break;
            }
            reqs[k] = (ccoip_ss_hash_req_t){s, f->hash_kind, 0};
        }
        if (res == pcclSuccess && !ccoip_ss_hash_all(comm->ss_hasher, reqs, k, FN)) res = pcclInternalError;
        for (uint32_t j = 0; j < k && res == pcclSuccess; j++) {
            const ccoip_ss_fetch_t *f = &r->fetch[at + j];
            if (reqs[j].hash != f->hash) {
                LOG_ERROR(MOD, FN ": tensor \"%s\" arrived with hash %016llx, the elected content has %016llx "
                              "(the distributor changed it during the sync?)", f->name, (unsigned long long) reqs[j].hash,
                          (unsigned long long) f->hash);
                res = pcclInternalError;
            }
        }
        at += k;
    }
    return res;
}

/* What the master's answer means for the caller, with one log line for each refusal. */
static pcclResult_t status_result(const ccoip_ss_result_t *r, const pcclSharedState_t *state) {
    switch (r->status) {
    case CCOIP_SS_OK: return pcclSuccess;
    case CCOIP_SS_NO_CONTENT:
        LOG_ERROR(MOD, FN ": no peer of the group can offer the shared state (all receive-only, or behind)");
        return pcclNoSharedStateAvailable;
    case CCOIP_SS_REVISION:
        LOG_ERROR(MOD, FN ": revision %llu given, the master expected %llu (each sync advances it by exactly one)",
                  (unsigned long long) state->revision, (unsigned long long) r->expected);
        return pcclInvalidUsage;
    case CCOIP_SS_MISMATCH:
        LOG_ERROR(MOD, FN ": tensor \"%s\" does not match the other peers' shared state (missing, extra, or another "
                      "datatype, count or allow_content_inequality)", r->detail);
        return pcclInvalidUsage;
    case CCOIP_SS_KICKED:
        LOG_ERROR(MOD, FN ": kicked by the master: SEND_ONLY, but tensor \"%s\" differs from the popular content",
                  r->detail);
        return pcclInvalidUsage;
    case CCOIP_SS_MIXED:
        LOG_ERROR(MOD, FN ": kicked by the master: another peer enforces the popular content "
                      "(PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR), and then every peer must");
        return pcclInvalidUsage;
    case CCOIP_SS_STALE:
        LOG_ERROR(MOD, FN ": another peer of the group is in a topology vote (after a failure): call "
                      "pcclUpdateTopology, then sync again");
        return pcclRankConnectionLost;
    case CCOIP_SS_TIMEOUT:
        LOG_ERROR(MOD, FN ": not every peer of the group called it within the collective timeout (the master log "
                       "names who did not); nothing was synced");
        return pcclCollectiveTimeout;
    default:
        LOG_ERROR(MOD, FN ": the master refused the sync (%s%s)", r->detail[0] ? "tensor " : "",
                  r->detail[0] ? r->detail : "malformed request");
        return pcclInvalidArgument;
    }
}

static pcclResult_t sync_state(pcclComm_t *comm, pcclSharedState_t *state, pcclSharedStateSyncStrategy_t strategy,
                               pcclSharedStateSyncInfo_t *info_out);
static pcclResult_t sync_profiled(pcclComm_t *comm, pcclSharedState_t *state, pcclSharedStateSyncStrategy_t strategy,
                                  pcclSharedStateSyncInfo_t *info_out);

PCCL_EXPORT pcclResult_t pcclSynchronizeSharedState(const pcclComm_t *communicator, pcclSharedState_t *state,
                                                    pcclSharedStateSyncStrategy_t strategy,
                                                    pcclSharedStateSyncInfo_t *info_out) {
    if (!pccl_is_initialized()) {
        LOG_ERROR(MOD, FN ": pcclInit has not been called");
        return pcclNotInitialized;
    }
    if (communicator == NULL || state == NULL || (state->count > 0 && state->infos == NULL)) {
        LOG_ERROR(MOD, FN ": communicator and shared_state (with its infos) must not be NULL");
        return pcclInvalidArgument;
    }
    if ((unsigned) strategy > (unsigned) PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY) {
        LOG_ERROR(MOD, FN ": unknown strategy %d", (int) strategy);
        return pcclInvalidArgument;
    }
    if (state->count > CCOIP_MAX_SS_TENSORS) {
        LOG_ERROR(MOD, FN ": %zu tensors, at most %u", state->count, CCOIP_MAX_SS_TENSORS);
        return pcclInvalidArgument;
    }
    /* The API takes a const communicator; the call still moves its mailbox and listener. */
    pcclComm_t *comm = (pcclComm_t *) communicator;
    if (!atomic_load(&comm->accepted) || comm->ss == NULL) {
        LOG_ERROR(MOD, FN ": the communicator is not connected (pcclConnect first)");
        return pcclInvalidUsage;
    }
    if (atomic_load(&comm->master_lost)) return pcclMasterConnectionFailed;
    if (ccoip_ops_in_flight(comm)) {
        LOG_ERROR(MOD, FN ": all-reduces are in flight or not yet awaited; await them first");
        return pcclPendingAsyncOps;
    }
    for (size_t i = 0; i < state->count; i++) {
        pcclResult_t r = check_tensor(&state->infos[i], i);
        if (r != pcclSuccess) return r;
    }
    if (pthread_mutex_trylock(&comm->ss_busy) != 0) {
        LOG_ERROR(MOD, FN ": another pcclSynchronizeSharedState is running on this communicator");
        return pcclInvalidUsage;
    }
    pcclResult_t res = sync_profiled(comm, state, strategy, info_out);
    pthread_mutex_unlock(&comm->ss_busy);
    return res;
}

static uint64_t total_bytes(const ccoip_ss_slot_t *slots, size_t n) {
    uint64_t b = 0;
    for (size_t i = 0; i < n; i++) b += slots[i].bytes;
    return b;
}

/* The sync as profiler events: the API call > the sync (the parent of its hashing and fetches). */
static pcclResult_t sync_profiled(pcclComm_t *comm, pcclSharedState_t *state, pcclSharedStateSyncStrategy_t strategy,
                                  pcclSharedStateSyncInfo_t *info_out) {
    if (comm->prof.mask == 0) return sync_state(comm, state, strategy, info_out);
    void *api = ccoip_prof_api(&comm->prof, pcclProfilerApiSynchronizeSharedState, 0, 0);
    void *ev = comm->prof_api = ccoip_prof_sync(&comm->prof, api, state->revision, state->count, (uint32_t) strategy);
    pcclSharedStateSyncInfo_t info = {UINT64_MAX, 0}; /* UINT64_MAX: the call did not get to fill it */
    pcclResult_t r = sync_state(comm, state, strategy, &info);
    bool filled = info.tx_bytes != UINT64_MAX;
    comm->prof_api = NULL;
    ccoip_prof_sync_end(&comm->prof, ev, r, filled ? info.tx_bytes : 0, filled ? info.rx_bytes : 0);
    ccoip_prof_api_end(&comm->prof, api, r);
    if (filled && info_out != NULL) *info_out = info;
    return r;
}

/* Our part of the sync of revision `elected` went well, but the master link broke before its
 * DONE. Whether the sync stands is asked of the master we reconnect to: it stands only if every
 * member got the election's RESULT (a master killed between two members' RESULTs left some
 * without it, and they failed); a restarted master knows from what the members report in their
 * REJOINs; a master that dies before it answers is asked again by the next one. Then our
 * receivers are served to the end. With no master to ask (gone for good: the run is over) it
 * fails. docs/group-state-machine.md, "When the master dies". */
static pcclResult_t verdict_without_done(pcclComm_t *comm, uint64_t elected) {
    ccoip_packet_t q, r;
    memset(&q, 0, sizeof q);
    q.type = CCOIP_PKT_C2M_SHARED_STATE_QUERY;
    q.u.ss_query.revision = elected;
    for (;;) {
        if (atomic_load(&comm->master_lost) || atomic_load(&comm->stopping)) return pcclMasterConnectionFailed;
        if (ccoip_link_send(comm, &q) == CCOIP_OK && await_master(comm, CCOIP_PKT_M2C_SHARED_STATE_DONE, &r, false))
            break;
        ccoip_sleep_ms(10); /* the link went again: ask the master it reconnects to */
    }
    bool stands = r.u.ss_master_done.status == CCOIP_RESULT_OK;
    ccoip_packet_free(&r);
    if (!stands) {
        LOG_WARN(MOD, FN ": the master died before every member had the election of revision %llu: the sync "
                      "fails on every member", (unsigned long long) elected);
        return pcclMasterConnectionFailed;
    }
    if (!ccoip_ss_serve_drain(comm)) LOG_WARN(MOD, FN ": the master link broke and a receiver did not finish fetching from us");
    return pcclSuccess;
}

/* Our tensors, sorted by name into comm->ss_slots, and their hashes into comm->ss_wire (what the
 * SYNC request carries). */
static pcclResult_t hash_tensors(pcclComm_t *comm, const pcclSharedState_t *state) {
    size_t n = state->count;
    if (!scratch_reserve(comm, n)) {
        LOG_ERROR(MOD, FN ": out of memory for %zu tensors", n);
        return pcclInternalError;
    }
    ccoip_ss_slot_t *slots = comm->ss_slots;
    ccoip_ss_tensor_t *wire = comm->ss_wire;
    for (size_t i = 0; i < n; i++) {
        const pcclTensorInfo_t *t = &state->infos[i];
        slots[i] = (ccoip_ss_slot_t){t->name, t->data, (uint64_t) t->count * dtype_bytes[t->datatype],
                                     t->device_type == pcclDeviceCuda};
    }
    sort_by_name(slots, n);
    pcclResult_t res = pcclSuccess;
    for (size_t i = 1; i < n && res == pcclSuccess; i++)
        if (strcmp(slots[i - 1].name, slots[i].name) == 0) {
            LOG_ERROR(MOD, FN ": tensor name \"%s\" appears twice", slots[i].name);
            res = pcclInvalidArgument;
        }
    void *hashing = ccoip_prof_hash(&comm->prof, comm->prof_api, n, comm->prof.mask ? total_bytes(slots, n) : 0);
    ccoip_ss_hash_req_t *reqs = ccoip_ss_hasher_reqs(comm->ss_hasher);
    for (size_t i = 0; i < n && res == pcclSuccess; i++) {
        const pcclTensorInfo_t *t = &state->infos[i];
        const ccoip_ss_slot_t *s = ccoip_ss_find(slots, n, t->name);
        wire[i] = (ccoip_ss_tensor_t){(char *) t->name, 0, s->device ? CCOIP_HASH_SIMPLE : CCOIP_HASH_XXH3,
                                      (uint8_t) t->datatype, (uint64_t) t->count, t->allow_content_inequality};
        reqs[i] = (ccoip_ss_hash_req_t){s, wire[i].hash_kind, 0};
    }
    if (res == pcclSuccess && !ccoip_ss_hash_all(comm->ss_hasher, reqs, n, FN)) res = pcclInternalError;
    for (size_t i = 0; i < n && res == pcclSuccess; i++) wire[i].hash = reqs[i].hash;
    pprof_finish(&comm->prof, pcclProfilerEventHash, hashing, res == pcclSuccess ? 0 : pcclProfilerAbortLocal, res);
    return res;
}

/* The sync itself, one at a time per communicator (ss_busy held). */
static pcclResult_t sync_state(pcclComm_t *comm, pcclSharedState_t *state, pcclSharedStateSyncStrategy_t strategy,
                               pcclSharedStateSyncInfo_t *info_out) {
    size_t n = state->count;
    pcclResult_t res = hash_tensors(comm, state);
    if (res != pcclSuccess) return res;
    ccoip_ss_slot_t *slots = comm->ss_slots;
    ccoip_ss_tensor_t *wire = comm->ss_wire;
    /* Serve from now on: a receiver may reach us before we read our own RESULT (it retries
     * until the master's announcement of it reaches our listener). */
    ccoip_ss_serve_begin(comm, slots, n);
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_SHARED_STATE_SYNC;
    p.u.ss_sync = (ccoip_ss_sync_t){state->revision, (uint8_t) strategy, (uint32_t) n, wire};
    ccoip_packet_t r;
    memset(&r, 0, sizeof r);
    uint64_t rx = 0;
    ccoip_ss_dialers_t *dialers = NULL;
    bool link_ok = ccoip_link_send(comm, &p) == CCOIP_OK && await_master(comm, CCOIP_PKT_M2C_SHARED_STATE_RESULT, &r, true);
    uint64_t elected = 0;
    if (!link_ok) {
        LOG_WARN(MOD, FN ": the master link broke before the election's RESULT came: nothing synced");
        res = pcclMasterConnectionFailed;
    } else {
        const ccoip_ss_result_t *result = &r.u.ss_result;
        elected = result->revision;
        res = status_result(result, state);
        if (res == pcclSuccess) {
            ccoip_ss_serve_allow(comm, result);
            dialers = ccoip_ss_dial_clients(comm, result); /* receivers that cannot dial us */
            res = fetch_all(comm, result, slots, n, &rx);
        }
        /* Kicked or timed out: the master expects no report (it closed us, or ended the sync). */
        bool no_report = result->status == CCOIP_SS_KICKED || result->status == CCOIP_SS_MIXED ||
                         result->status == CCOIP_SS_TIMEOUT ||
                         result->status == CCOIP_SS_STALE;
        ccoip_packet_free(&r);
        /* Everyone reports; the master's DONE says that no receiver needs us any more. */
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_C2M_SHARED_STATE_DONE;
        p.u.ss_done.ok = res == pcclSuccess;
        if (!no_report && (ccoip_link_send_more(comm, &p) != CCOIP_OK || !await_master(comm, CCOIP_PKT_M2C_SHARED_STATE_DONE, &r, false))) {
            if (res == pcclSuccess) res = verdict_without_done(comm, elected);
        } else if (!no_report) {
            ccoip_packet_free(&r);
        }
    }
    ccoip_ss_serve_close(comm); /* the dialling threads end: no new connection is served */
    ccoip_ss_dial_join(dialers);
    uint64_t tx = ccoip_ss_serve_end(comm);
    if (res == pcclSuccess) {
        state->revision = elected;
        ccoip_link_note_revision(comm, elected); /* a REJOIN reports it to a restarted master */
    }
    if (info_out != NULL) {
        info_out->tx_bytes = tx;
        info_out->rx_bytes = rx;
    }
    if (res == pcclSuccess && (tx > 0 || rx > 0))
        LOG_INFO(MOD, FN ": revision %llu, sent %llu bytes, received %llu bytes", (unsigned long long) elected,
                 (unsigned long long) tx, (unsigned long long) rx);
    return res;
}
