/* pccl_comm.c: the public communicator calls: argument checks, then ccoip_peer.c. */
#include <stdlib.h>
#include <string.h>

#include "ccoip/peer/ccoip_gate.h"
#include "ccoip/peer/ccoip_p2p.h"
#include "ccoip/peer/ccoip_peer.h"
#include "ccoip/peer/ccoip_peer_bench.h"
#include "ccoip/peer/ccoip_stripe.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/peer/ccoip_peer_shared.h"
#include "ccoip/peer/ccoip_ss_hash.h"
#include "ccoip/api/pccl_internal.h"
#include "ccoip/peer/ccoip_prof.h"
#include "log/log.h"

#define MOD "pccl"

#define CHECK_INIT(fn)                                                    \
    do {                                                                  \
        if (!pccl_is_initialized()) {                                     \
            LOG_ERROR(MOD, "%s: pcclInit has not been called", fn);       \
            return pcclNotInitialized;                                    \
        }                                                                 \
    } while (0)

#define CHECK_ARG(cond, fn, what)                                         \
    do {                                                                  \
        if (!(cond)) {                                                    \
            LOG_ERROR(MOD, "%s: %s", fn, what);                           \
            return pcclInvalidArgument;                                   \
        }                                                                 \
    } while (0)

PCCL_EXPORT pcclResult_t pcclCreateCommunicator(const pcclCommCreateParams_t *params, pcclComm_t **comm_out) {
    CHECK_INIT("pcclCreateCommunicator");
    CHECK_ARG(params != NULL && comm_out != NULL, "pcclCreateCommunicator", "params and comm_out must not be NULL");
    CHECK_ARG(params->master_address.inet.protocol == inetIPv4 || params->master_address.inet.protocol == inetIPv6,
              "pcclCreateCommunicator", "unknown master address protocol");
    pcclComm_t *c = calloc(1, sizeof *c);
    if (c == NULL) return pcclInternalError;
    c->params = *params;
    if (c->params.p2p_connection_pool_size == 0) c->params.p2p_connection_pool_size = CCOIP_DEFAULT_POOL;
    if (c->params.p2p_connection_pool_size > CCOIP_P2P_MAX_STREAMS) {
        LOG_WARN(MOD, "pcclCreateCommunicator: p2p_connection_pool_size %u capped at %u",
                 c->params.p2p_connection_pool_size, CCOIP_P2P_MAX_STREAMS);
        c->params.p2p_connection_pool_size = CCOIP_P2P_MAX_STREAMS;
    }
    c->master_fd = -1;
    c->link_wake[0] = c->link_wake[1] = -1;
    ccoip_listener_init(&c->p2p.listener);
    c->p2p.links.tx.fd = c->p2p.links.rx.fd = -1;
    ccoip_punch_init(&c->punch);
    pthread_mutex_init(&c->send_lock, NULL);
    ccoip_writer_init(&c->send_buf, CCOIP_MAX_PAYLOAD + CCOIP_HEADER_SIZE);
    pthread_mutex_init(&c->ss_busy, NULL);
    pthread_mutex_init(&c->mail_lock, NULL);
    pthread_mutex_init(&c->p2p.lock, NULL);
    pthread_mutex_init(&c->round_lock, NULL);
    c->strict_topology = ccoip_strict(getenv("PCCL_STRICT"), "topology");
    ccoip_colls_init(c);
    pthread_mutex_init(&c->pinned_lock, NULL);
    ccoip_abort_init(&c->aborts);
    c->cache = reduce_cache_create();
    if (c->cache == NULL) {
        free(c);
        return pcclInternalError;
    }
    pprof_open(&c->prof, c->params.peer_group, c->params.p2p_connection_pool_size);
    *comm_out = c;
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclConnect(pcclComm_t *comm) {
    CHECK_INIT("pcclConnect");
    CHECK_ARG(comm != NULL, "pcclConnect", "communicator is NULL");
    if (comm->connect_called) {
        LOG_ERROR(MOD, "pcclConnect: this communicator already connected (or tried to); create a new one");
        return pcclInvalidUsage;
    }
    comm->connect_called = true;
    return ccoip_peer_connect(comm);
}

PCCL_EXPORT pcclResult_t pcclSetSecret(pcclComm_t *comm, const void *secret, size_t length) {
    CHECK_INIT("pcclSetSecret");
    CHECK_ARG(comm != NULL && secret != NULL, "pcclSetSecret", "communicator and secret must not be NULL");
    CHECK_ARG(length >= CCOIP_SECRET_MIN && length <= CCOIP_SECRET_MAX, "pcclSetSecret",
              "the secret must have 16 to 4096 bytes");
    if (comm->connect_called) {
        LOG_ERROR(MOD, "pcclSetSecret: call it before pcclConnect");
        return pcclInvalidUsage;
    }
    if (!ccoip_auth_init()) return pcclInternalError;
    ccoip_auth_derive(secret, length, &comm->key);
    comm->has_secret = true;
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclSetEncryption(pcclComm_t *comm, bool on) {
    CHECK_INIT("pcclSetEncryption");
    CHECK_ARG(comm != NULL, "pcclSetEncryption", "communicator is NULL");
    if (comm->connect_called) {
        LOG_ERROR(MOD, "pcclSetEncryption: call it before pcclConnect");
        return pcclInvalidUsage;
    }
    comm->encrypt = on;
    comm->encrypt_set = true;
    return pcclSuccess;
}

static pcclResult_t require_accepted(const pcclComm_t *comm, const char *fn) {
    if (atomic_load(&comm->accepted)) return pcclSuccess;
    LOG_ERROR(MOD, "%s: the communicator is not connected (pcclConnect first)", fn);
    return pcclInvalidUsage;
}

/* No topology round while all-reduces are in flight: it replaces the links they run on. */
static pcclResult_t require_no_ops(const pcclComm_t *comm, const char *fn) {
    if (!ccoip_ops_in_flight(comm)) return pcclSuccess;
    LOG_ERROR(MOD, "%s: all-reduces are still in flight on this communicator (await them first)", fn);
    return pcclPendingAsyncOps;
}

PCCL_EXPORT pcclResult_t pcclUpdateTopology(pcclComm_t *comm) {
    CHECK_INIT("pcclUpdateTopology");
    CHECK_ARG(comm != NULL, "pcclUpdateTopology", "communicator is NULL");
    pcclResult_t r = require_accepted(comm, "pcclUpdateTopology");
    if (r == pcclSuccess) r = require_no_ops(comm, "pcclUpdateTopology");
    if (r != pcclSuccess) return r;
    void *ev = comm->prof_api = ccoip_prof_api(&comm->prof, pcclProfilerApiUpdateTopology, 0, 0);
    r = ccoip_peer_update_topology(comm);
    ccoip_prof_api_end(&comm->prof, ev, r);
    comm->prof_api = NULL;
    return r;
}

PCCL_EXPORT pcclResult_t pcclArePeersPending(const pcclComm_t *comm, bool *pending_out) {
    CHECK_INIT("pcclArePeersPending");
    CHECK_ARG(comm != NULL && pending_out != NULL, "pcclArePeersPending", "communicator and pending_out must not be NULL");
    /* All-reduces may be in flight meanwhile (PCCL's rule: overlapping a step with the next
     * step's vote); the answer does not pass through the mailbox they use. */
    pcclResult_t r = require_accepted(comm, "pcclArePeersPending");
    if (r != pcclSuccess) return r;
    void *ev = ccoip_prof_api(&comm->prof, pcclProfilerApiArePeersPending, 0, 0);
    r = ccoip_peer_are_peers_pending((pcclComm_t *) comm, pending_out);
    ccoip_prof_api_end(&comm->prof, ev, r);
    return r;
}

PCCL_EXPORT pcclResult_t pcclGetAttribute(const pcclComm_t *comm, pcclAttribute_t attribute, int *out) {
    CHECK_INIT("pcclGetAttribute");
    CHECK_ARG(comm != NULL && out != NULL, "pcclGetAttribute", "communicator and output must not be NULL");
    CHECK_ARG(attribute >= PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE && attribute <= PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE,
              "pcclGetAttribute", "unknown attribute");
    pcclResult_t r = require_accepted(comm, "pcclGetAttribute");
    if (r != pcclSuccess) return r;
    *out = (int) atomic_load(&comm->world[attribute - PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE]);
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclDestroyCommunicator(pcclComm_t *comm) {
    CHECK_INIT("pcclDestroyCommunicator");
    CHECK_ARG(comm != NULL, "pcclDestroyCommunicator", "communicator is NULL");
    atomic_store(&comm->stopping, true);
    ccoip_abort_all(&comm->aborts);
    ccoip_peer_notify(comm);
    ccoip_colls_shutdown(comm); /* aborts what runs and joins the workers */
    ccoip_link_close(comm);
    ccoip_ss_stop(comm); /* after the link: no sync can be waiting any more */
    ccoip_bench_stop(comm);
    ccoip_data_close(comm); /* before the p2p sockets close: the data links use them */
    ccoip_p2p_stop(comm);
    ccoip_punch_close(&comm->punch);
    pprof_close(&comm->prof); /* every thread that raised events is joined */
    pthread_mutex_destroy(&comm->send_lock);
    ccoip_writer_free(&comm->send_buf);
    pthread_mutex_destroy(&comm->ss_busy);
    free(comm->ss_slots);
    free(comm->ss_wire);
    ccoip_ss_hasher_free(comm->ss_hasher);
    pthread_mutex_destroy(&comm->mail_lock);
    pthread_mutex_destroy(&comm->p2p.lock);
    pthread_mutex_destroy(&comm->round_lock);
    ccoip_colls_free(comm);
    reduce_cache_destroy(comm->cache);
    ccoip_gates_destroy(comm->gates); /* workers joined: releases any stream still gated */
    reduce_cache_destroy(comm->pinned);
    pthread_mutex_destroy(&comm->pinned_lock);
    free(comm);
    return pcclSuccess;
}

void ccoip_comm_links(const pcclComm_t *comm, ccoip_p2p_links_t *out) { *out = comm->p2p.links; }

ccoip_uuid_t ccoip_comm_uuid(const pcclComm_t *comm) { return comm->uuid; }

ccoip_abort_queue_t *ccoip_comm_aborts(const pcclComm_t *comm) { return (ccoip_abort_queue_t *) &comm->aborts; }
