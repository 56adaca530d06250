/* pccl_topology.c: pcclOptimizeTopology, the peer's side (ccoip/README.md "Topology
 * optimisation"). On the caller's thread: vote, then serve the master's requests as they come
 * through the mailbox (measure the targets of a step one after another, report), then take part
 * in the topology round that adopts the new ring, or take the master's verdict without one. */
#include <stdlib.h>
#include <string.h>

#include "ccoip/peer/ccoip_peer_bench.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/api/pccl_internal.h"
#include "ccoip/peer/ccoip_prof.h"
#include "log/log.h"

#define MOD "pccl"

/* One step: measure each target in turn (never two at once, so this peer's uplink is not split
 * between them), then report every rate (0 where a measurement failed). */
static pcclResult_t run_step(pcclComm_t *comm, const ccoip_bench_request_t *q) {
    ccoip_bench_allow(comm, q);
    ccoip_socket_address_t relay = {q->relay_addr, q->relay_port};
    ccoip_bench_result_t *res = q->ntargets == 0 ? NULL : calloc(q->ntargets, sizeof *res);
    if (q->ntargets > 0 && res == NULL) return pcclInternalError;
    for (uint32_t i = 0; i < q->ntargets; i++) {
        res[i].uuid = q->targets[i].uuid;
        void *ev = ccoip_prof_bandwidth(&comm->prof, comm->prof_api, q->targets[i].uuid.b, q->duration_ms);
        res[i].bits_per_s = ccoip_bench_measure(comm, &q->targets[i], q->duration_ms, &relay);
        ccoip_prof_bandwidth_end(&comm->prof, ev, res[i].bits_per_s);
    }
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_BANDWIDTH_REPORT;
    p.u.bench_report.session = q->session;
    p.u.bench_report.step = q->step;
    p.u.bench_report.count = q->ntargets;
    p.u.bench_report.results = res;
    ccoip_status_t st = ccoip_link_send_more(comm, &p);
    free(res);
    return st == CCOIP_OK ? pcclSuccess : pcclMasterConnectionFailed;
}

static pcclResult_t verdict(pcclComm_t *comm, const ccoip_topology_result_t *r) {
    if (r->status == CCOIP_RESULT_OK) {
        ccoip_world_store(comm, &r->world);
        return pcclSuccess;
    }
    if (r->status == CCOIP_RESULT_MISMATCH) {
        LOG_ERROR(MOD, "pcclOptimizeTopology: other peers called a different collective (pcclUpdateTopology?)");
        return pcclInvalidUsage;
    }
    LOG_ERROR(MOD, "pcclOptimizeTopology: failed (a peer left or a measurement failed); the ring is unchanged "
                   "unless a peer left: call pcclUpdateTopology, then retry if wanted");
    return pcclTopologyOptimizationFailed;
}

static pcclResult_t optimize(pcclComm_t *comm) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_OPTIMIZE_TOPOLOGY;
    if (ccoip_link_send(comm, &p) != CCOIP_OK) return pcclMasterConnectionFailed;
    for (;;) {
        ccoip_packet_t r;
        if (ccoip_link_wait_mail(comm, &r, -1) != CCOIP_OK) return pcclMasterConnectionFailed;
        pcclResult_t res;
        switch (r.type) {
        case CCOIP_PKT_M2C_BANDWIDTH_REQUEST:
            res = run_step(comm, &r.u.bench_request);
            ccoip_packet_free(&r);
            if (res != pcclSuccess) return res;
            continue;
        case CCOIP_PKT_M2C_P2P_INFO: {
            ccoip_round_outcome_t o = ccoip_peer_run_round(comm, &r.u.p2p_info);
            ccoip_packet_free(&r);
            switch (o) {
            case CCOIP_ROUND_OK: return pcclSuccess;
            case CCOIP_ROUND_MISMATCH: return pcclInvalidUsage;
            case CCOIP_ROUND_RETRY: continue; /* the master runs the next round at once */
            case CCOIP_ROUND_FAILED:
            case CCOIP_ROUND_UNREACHABLE:
                LOG_ERROR(MOD, "pcclOptimizeTopology: connecting the new ring failed; call pcclUpdateTopology");
                return pcclTopologyOptimizationFailed;
            case CCOIP_ROUND_LOST: break;
            }
            return pcclMasterConnectionFailed;
        }
        case CCOIP_PKT_M2C_TOPOLOGY_RESULT:
            res = verdict(comm, &r.u.topology_result);
            ccoip_packet_free(&r);
            return res;
        default:
            LOG_WARN(MOD, "ignoring %s from the master during pcclOptimizeTopology", ccoip_packet_name(r.type));
            ccoip_packet_free(&r);
        }
    }
}

PCCL_EXPORT pcclResult_t pcclOptimizeTopology(const pcclComm_t *communicator) {
    if (!pccl_is_initialized()) {
        LOG_ERROR(MOD, "pcclOptimizeTopology: pcclInit has not been called");
        return pcclNotInitialized;
    }
    if (communicator == NULL) {
        LOG_ERROR(MOD, "pcclOptimizeTopology: communicator is NULL");
        return pcclInvalidArgument;
    }
    /* The API takes a const communicator; the call still moves its mailbox and links. */
    pcclComm_t *comm = (pcclComm_t *) communicator;
    if (!atomic_load(&comm->accepted)) {
        LOG_ERROR(MOD, "pcclOptimizeTopology: the communicator is not connected (pcclConnect first)");
        return pcclInvalidUsage;
    }
    if (ccoip_ops_in_flight(comm)) {
        LOG_ERROR(MOD, "pcclOptimizeTopology: all-reduces are still in flight on this communicator (await them first)");
        return pcclPendingAsyncOps;
    }
    if (atomic_load(&comm->master_lost)) return pcclMasterConnectionFailed;
    if (atomic_load(&comm->world[0]) < 2) {
        LOG_ERROR(MOD, "pcclOptimizeTopology: fewer than 2 peers; nothing to optimise");
        return pcclTooFewPeers;
    }
    void *ev = comm->prof_api = ccoip_prof_api(&comm->prof, pcclProfilerApiOptimizeTopology, 0, 0);
    pcclResult_t res = optimize(comm);
    ccoip_prof_api_end(&comm->prof, ev, res);
    comm->prof_api = NULL;
    ccoip_bench_allow(comm, NULL); /* the session is over: nobody may stream to us now */
    return res;
}
