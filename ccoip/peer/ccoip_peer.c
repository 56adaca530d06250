/* ccoip_peer.c: the peer's side of admission and votes, on the API caller's thread. Requests go
 * out on the master link; replies come back through the mailbox (ccoip_peer_link.c). */
#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_secret.h"
#include "ccoip/net/ccoip_socket.h"
#include "ccoip/peer/ccoip_peer.h"
#include "ccoip/peer/ccoip_env.h"
#include "ccoip/peer/ccoip_peer_bench.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/peer/ccoip_peer_shared.h"
#include "ccoip/peer/ccoip_prof.h"
#include "log/log.h"

#define MOD "ccoip-peer"

/* A relink whose round fails (a neighbour could not be reached) is voted again this often. */
#define RELINK_TRIES 10

/* A newcomer's round failed on its links: says where the others dialled it, unless its own dial
 * failed (connect_stream said so). */
static void explain_unlinked(const ccoip_topology_result_t *r, const ccoip_p2p_established_t *mine, bool last) {
    bool own_dial = !mine->ok && mine->why != CCOIP_LINK_NOT_DIALLED && mine->why != CCOIP_LINK_OK;
    char at[80];
    ccoip_socket_address_t a = {r->seen_addr, r->seen_port};
    ccoip_format_address(&a, at, sizeof at);
    if (last)
        LOG_ERROR(MOD, "pcclConnect: not admitted: %s %s (%s); behind NAT or a firewall? Let inbound TCP reach "
                       "that port (docs/nat.md)",
                  own_dial ? "this peer could not connect to its ring neighbour; the others dial it at"
                           : "the run's peers could not link with this peer at",
                  at, ccoip_link_why_str(r->why));
    else
        LOG_WARN(MOD, "admission round failed on this peer's links (the others dial it at %s: %s); trying again "
                      "in the next round", at, ccoip_link_why_str(r->why));
}

static ccoip_round_outcome_t result_outcome(pcclComm_t *comm, const ccoip_topology_result_t *r,
                                            const ccoip_p2p_established_t *mine) {
    switch (r->status) {
    case CCOIP_RESULT_OK:
        ccoip_world_store(comm, &r->world);
        atomic_fetch_add(&comm->round_epoch, 1);
        return CCOIP_ROUND_OK;
    case CCOIP_RESULT_MISMATCH: return CCOIP_ROUND_MISMATCH;
    case CCOIP_RESULT_RETRY: return CCOIP_ROUND_RETRY;
    case CCOIP_RESULT_UNREACHABLE: explain_unlinked(r, mine, true); return CCOIP_ROUND_UNREACHABLE;
    default:
        if (r->why != CCOIP_LINK_OK && !atomic_load(&comm->accepted)) explain_unlinked(r, mine, false);
        return CCOIP_ROUND_FAILED;
    }
}

/* Takes part in one topology round: links to the neighbours, reports, awaits the outcome. */
static ccoip_round_outcome_t round_body(pcclComm_t *comm, const ccoip_p2p_info_t *info) {
    ccoip_packet_t early;
    ccoip_p2p_established_t mine;
    ccoip_rings_drain(comm); /* a relink: ops of other threads may still end their rings */
    ccoip_data_close(comm); /* the data links' threads use the sockets that establish replaces */
    ccoip_p2p_establish(comm, info, &early, &mine);
    if (early.type == CCOIP_PKT_M2C_TOPOLOGY_RESULT && early.u.topology_result.round == info->round)
        return result_outcome(comm, &early.u.topology_result, &mine);
    if (early.type != 0) {
        LOG_WARN(MOD, "unexpected %s from the master during a topology round", ccoip_packet_name(early.type));
        ccoip_packet_free(&early);
    }
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_P2P_ESTABLISHED;
    p.u.p2p_established = mine;
    if (ccoip_link_send_more(comm, &p) != CCOIP_OK) return CCOIP_ROUND_LOST;
    for (;;) {
        ccoip_packet_t r;
        if (ccoip_link_wait_mail(comm, &r, -1) != CCOIP_OK) return CCOIP_ROUND_LOST;
        if (r.type == CCOIP_PKT_M2C_TOPOLOGY_RESULT && r.u.topology_result.round == info->round)
            return result_outcome(comm, &r.u.topology_result, &mine);
        LOG_WARN(MOD, "ignoring %s from the master while awaiting round %llu", ccoip_packet_name(r.type),
                 (unsigned long long) info->round);
        ccoip_packet_free(&r);
    }
}

/* The round as a profiler event (parent: the API call that runs it, if any). */
static ccoip_round_outcome_t run_round(pcclComm_t *comm, const ccoip_p2p_info_t *info) {
    void *ev = ccoip_prof_topology(&comm->prof, comm->prof_api, info->round, info->count);
    ccoip_round_outcome_t o = round_body(comm, info);
    ccoip_prof_topology_end(&comm->prof, ev, o == CCOIP_ROUND_OK         ? 0
                                             : o == CCOIP_ROUND_LOST     ? pcclProfilerAbortMasterLost
                                             : o == CCOIP_ROUND_MISMATCH ? pcclProfilerAbortMismatch
                                                                         : pcclProfilerAbortPeerLost);
    return o;
}

/* Waits for the master's next P2P_INFO (or a TOPOLOGY_RESULT that answers a vote) and runs it;
 * a round that failed on a newcomer is followed by the next one at once: that one counts. */
static ccoip_round_outcome_t await_round(pcclComm_t *comm) {
    static const ccoip_p2p_established_t no_round;
    for (;;) {
        ccoip_packet_t r;
        if (ccoip_link_wait_mail(comm, &r, -1) != CCOIP_OK) return CCOIP_ROUND_LOST;
        if (r.type == CCOIP_PKT_M2C_P2P_INFO) {
            ccoip_round_outcome_t o = run_round(comm, &r.u.p2p_info);
            ccoip_packet_free(&r);
            if (o == CCOIP_ROUND_RETRY) {
                LOG_INFO(MOD, "topology round failed on a newcomer's links; the next one follows without it");
                continue;
            }
            return o;
        }
        if (r.type == CCOIP_PKT_M2C_TOPOLOGY_RESULT) {
            ccoip_round_outcome_t o = result_outcome(comm, &r.u.topology_result, &no_round);
            if (o == CCOIP_ROUND_RETRY) continue;
            return o;
        }
        LOG_WARN(MOD, "ignoring %s from the master while awaiting a topology round", ccoip_packet_name(r.type));
        ccoip_packet_free(&r);
    }
}

/* The run secret: pcclSetSecret's, else PCCL_SECRET_FILE's, else none (an open run). */
static pcclResult_t load_secret(pcclComm_t *comm) {
    if (!ccoip_auth_init()) {
        LOG_ERROR(MOD, "libsodium cannot initialise (no randomness source?)");
        return pcclInternalError;
    }
    const char *path = getenv("PCCL_SECRET_FILE");
    if (!comm->has_secret && path != NULL && path[0] != '\0') {
        if (!ccoip_secret_load_key(path, &comm->key)) return pcclInvalidArgument;
        comm->has_secret = true;
    }
    if (!comm->has_secret)
        LOG_INFO(MOD, "no run secret (PCCL_SECRET_FILE): this peer joins an open run (see docs/security.md)");
    if (!comm->encrypt_set) comm->encrypt = ccoip_env_num("PCCL_ENCRYPT", 0) != 0;
    if (comm->encrypt && !comm->has_secret) {
        LOG_ERROR(MOD, "PCCL_ENCRYPT needs a run secret (PCCL_SECRET_FILE or pcclSetSecret): its keys come from it");
        return pcclInvalidArgument;
    }
    if (comm->encrypt) { /* each link's handshake picks the AEAD: the best that both of its ends offer */
        bool unknown;
        uint8_t f = ccoip_aead_offer(getenv("PCCL_AEAD"), &unknown);
        LOG_INFO(MOD, "p2p data links encrypted with %s where the other end offers it", ccoip_aead_name(ccoip_aead_choose(f, f)));
    }
    return pcclSuccess;
}

pcclResult_t ccoip_peer_connect(pcclComm_t *comm) {
    pcclResult_t res = load_secret(comm);
    if (res != pcclSuccess) return res;
    res = ccoip_p2p_start(comm);
    if (res == pcclSuccess) res = ccoip_ss_start(comm);
    if (res == pcclSuccess) res = ccoip_bench_start(comm);
    if (res == pcclSuccess) res = ccoip_link_open(comm, comm->p2p.listener.port, ccoip_ss_port(comm), ccoip_bench_port(comm));
    if (res != pcclSuccess) return res;
    LOG_INFO(MOD, "registered with the master (p2p port %u); waiting for admission", comm->p2p.listener.port);
    /* Blocks until the accepted peers vote us in; a failed round just means waiting for the next. */
    for (;;) {
        ccoip_round_outcome_t o = await_round(comm);
        if (o == CCOIP_ROUND_OK) break;
        if (o == CCOIP_ROUND_LOST) return pcclMasterConnectionFailed;
        if (o == CCOIP_ROUND_UNREACHABLE) return pcclRankConnectionFailed;
        LOG_INFO(MOD, "admission round failed; waiting for the next one");
    }
    atomic_store(&comm->accepted, true);
    LOG_INFO(MOD, "admitted: %u peers", atomic_load(&comm->world[0]));
    return pcclSuccess;
}

static pcclResult_t send_vote(pcclComm_t *comm, uint16_t type) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = type;
    return ccoip_link_send(comm, &p) == CCOIP_OK ? pcclSuccess : pcclMasterConnectionFailed;
}

/* A vote whose master died is voted again with the master the link reconnects to: the call
 * fails with pcclMasterConnectionFailed only when the master is gone for good (the loop's rule,
 * docs/group-state-machine.md: this code from pcclUpdateTopology ends the communicator). */
pcclResult_t ccoip_peer_update_topology(pcclComm_t *comm) {
    while (!atomic_load(&comm->master_lost) && !atomic_load(&comm->stopping)) {
        if (send_vote(comm, CCOIP_PKT_C2M_VOTE_ACCEPT) != pcclSuccess) { /* the link went: its state says what next */
            ccoip_sleep_ms(10);
            continue;
        }
        switch (await_round(comm)) {
        case CCOIP_ROUND_OK: return pcclSuccess;
        case CCOIP_ROUND_FAILED:
        case CCOIP_ROUND_RETRY: /* await_round runs the next round itself */
        case CCOIP_ROUND_UNREACHABLE: return pcclUpdateTopologyFailed; /* a newcomer's outcome, not a member's */
        case CCOIP_ROUND_MISMATCH:
            LOG_ERROR(MOD, "pcclUpdateTopology: other peers called a different collective "
                           "(pcclArePeersPending, or an all-reduce that gave up waiting for this peer?)");
            return pcclInvalidUsage;
        case CCOIP_ROUND_LOST: LOG_WARN(MOD, "pcclUpdateTopology: the master link broke during the vote; voting again"); break;
        }
    }
    return pcclMasterConnectionFailed;
}

/* All-reduces may run meanwhile, and relink the ring on other threads (PCCL's rule): the
 * answer comes through its own slot, not the mailbox those use. */
pcclResult_t ccoip_peer_are_peers_pending(pcclComm_t *comm, bool *pending) {
    if (atomic_load(&comm->master_lost)) return pcclMasterConnectionFailed;
    pcclResult_t res = send_vote(comm, CCOIP_PKT_C2M_VOTE_PENDING);
    if (res != pcclSuccess) return res;
    ccoip_pending_result_t r;
    if (ccoip_link_wait_pending(comm, &r) != CCOIP_OK) return pcclMasterConnectionFailed;
    if (r.status != CCOIP_RESULT_OK) {
        LOG_ERROR(MOD, "pcclArePeersPending: other peers called a different collective "
                       "(pcclOptimizeTopology, or an all-reduce that gave up waiting for this peer?)");
        return pcclInvalidUsage;
    }
    *pending = r.pending != 0;
    return pcclSuccess;
}

/* PCCL's rule: an all-reduce that failed because the group changed relinks the ring among the
 * remaining members (admitting nobody) before it returns, so that a plain retry runs. Ops that
 * failed together relink once: a round that succeeded since `epoch` (the op's start) did it. */
void ccoip_peer_relink_ring(pcclComm_t *comm, uint64_t epoch) {
    pthread_mutex_lock(&comm->round_lock);
    for (int tries = 0; tries < RELINK_TRIES && atomic_load(&comm->round_epoch) == epoch; tries++) {
        if (atomic_load(&comm->master_lost) || atomic_load(&comm->stopping) || atomic_load(&comm->world[1]) < 2) break;
        if (send_vote(comm, CCOIP_PKT_C2M_VOTE_RELINK) != pcclSuccess) break;
        ccoip_round_outcome_t o = await_round(comm);
        if (o == CCOIP_ROUND_OK) LOG_INFO(MOD, "ring relinked among %u peers after a failed all-reduce",
                                    atomic_load(&comm->world[1]));
        if (o != CCOIP_ROUND_FAILED) break; /* lost or refused: the next call says what is wrong */
        ccoip_sleep_ms(10);
    }
    pthread_mutex_unlock(&comm->round_lock);
}

ccoip_round_outcome_t ccoip_peer_run_round(pcclComm_t *comm, const ccoip_p2p_info_t *info) {
    return run_round(comm, info);
}

