/* ccoip_coll.c: the all-reduces in flight on one communicator.
 *
 * Each op (sync or async) takes a slot of `colls.ops` for its tag and runs, on the caller's thread
 * (pcclAllReduce) or on a worker (pcclAllReduceAsync):
 *   1. COLLECTIVE_INIT -> COMMENCE through the master: every member asked for this tag with the
 *      same description. The master-link thread routes COMMENCE / DONE / ABORT of tag T to the op
 *      of tag T and wakes it on its own threadpark word.
 *   2. The ring (reduce/) over the connection pool. The streams are fixed when COMMENCE
 *      arrives: a large op is striped over a group of each link's streams (ccoip_stripe.h),
 *      another takes one stream; each takes the streams handed the least work so far in the round.
 *      COMMENCEs reach every member in the master's order, so every peer picks the same streams
 *      for an op and queues the ops of a stream in the same order. The ops of one stream run
 *      one at a time in that order: a socket never carries frames of an op whose receive side is
 *      not yet running, beyond the one in front of it (the datalink holds an early frame until
 *      its receive is posted, blocking the socket; with one op at a time per socket that wait
 *      always ends, as with back-to-back sync calls).
 *   3. COLLECTIVE_COMPLETE -> DONE: the outcome is shared. A failed ring breaks and retires every
 *      stream until the next pcclUpdateTopology (frames of it may still be in the sockets).
 * When the master link breaks (docs/group-state-machine.md, "When the master dies"), a ring that
 * commenced runs on; an op still without its DONE asks the master it reconnects to
 * (C2M_COLLECTIVE_QUERY): a live master tells what it told the others, a restarted one knows
 * nothing, and then the ring's own outcome decides (once our sends have reached the next peer).
 * An op still without its COMMENCE fails, and breaks our links (after the rings that did
 * commence here) so that members that did get a COMMENCE fail too instead of waiting for us.
 * An op that makes no progress in any of these for the collective timeout is reported to the
 * master by the watchdog (ccoip_watchdog.c), which ends it on every member with TIMEOUT in
 * COMMENCE or DONE: pcclCollectiveTimeout.
 *
 * Workers: started lazily, one more whenever the async ops queued or running outnumber them, so
 * an op never waits for another op's worker (at most CCOIP_MAX_OPS); joined at destroy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_os.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/peer/ccoip_coll_prof.h"
#include "ccoip/net/ccoip_socket.h"
#include "ccoip/net/ccoip_splice.h"
#include "ccoip/peer/ccoip_device.h"
#include "ccoip/peer/ccoip_gate.h"
#include "ccoip/peer/ccoip_stripe.h"
#include "log/log.h"
#include "reduce/reduce.h"
#include "threadpark/threadpark.h"

#define MOD "pccl"

static void bump(_Atomic uint32_t *w) {
    atomic_fetch_add_explicit(w, 1, memory_order_acq_rel);
    tpark_wake_all((const uint32_t *) w);
}

void ccoip_colls_init(pcclComm_t *comm) {
    pthread_mutex_init(&comm->colls.lock, NULL);
    ccoip_watchdog_init(comm);
    comm->router = (ccoip_link_router_t){ccoip_coll_route, ccoip_coll_abort, ccoip_coll_master_gone, ccoip_watchdog_tick};
}

void ccoip_colls_free(pcclComm_t *comm) {
    pthread_mutex_destroy(&comm->colls.lock);
    free(comm->multi_arena);
    comm->multi_arena = NULL;
    comm->multi_arena_cap = 0;
}

/* ---- routing (master-link thread) ---------------------------------------------------------- */

static ccoip_op_t *find_op(ccoip_colls_t *c, uint64_t tag) {
    for (int i = 0; i < CCOIP_MAX_OPS; i++)
        if (c->ops[i].state != CCOIP_OP_FREE && c->ops[i].tag == tag) return &c->ops[i];
    return NULL;
}

static void raise_abort(ccoip_op_t *op) {
    atomic_store_explicit(&op->abort, 1, memory_order_release);
    bump(&op->doorbell);
    bump(&op->word);
}

void ccoip_coll_abort(pcclComm_t *comm, bool all, uint64_t tag) {
    ccoip_colls_t *c = &comm->colls;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < CCOIP_MAX_OPS; i++) {
        ccoip_op_t *op = &c->ops[i];
        if (op->state != CCOIP_OP_FREE && (all || op->tag == tag)) raise_abort(op);
    }
    pthread_mutex_unlock(&c->lock);
    bump(&c->turns); /* ops waiting for their stream turn look at their flag */
}

void ccoip_coll_master_gone(pcclComm_t *comm) {
    ccoip_colls_t *c = &comm->colls;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < CCOIP_MAX_OPS; i++)
        if (c->ops[i].state != CCOIP_OP_FREE) bump(&c->ops[i].word); /* its reply will not come */
    pthread_mutex_unlock(&c->lock);
}

/* Takes `w` streams of stream[0 .. n-1] for an op of `bytes` (ccoip_stripe_take, charging
 * load[]): returns the first; turn[i] gets the op's place in stream i's queue. */
static uint32_t take_streams(ccoip_stream_t *stream, uint64_t *load, uint32_t n, uint32_t w, uint64_t bytes,
                             uint64_t *turn) {
    if (n == 0) return 0;
    uint32_t first = ccoip_stripe_take(load, n, w, bytes);
    for (uint32_t i = first; i < first + w; i++) turn[i] = stream[i].next_turn++;
    return first;
}

/* The streams and the places in their queues of an op that may start (COMMENCE ok, in the
 * master's order, the same on every peer). A large op takes a group of w streams of a link
 * (striped, ccoip_stripe_width: all of them or a fraction, fewer when others run beside it),
 * another one stream; each takes the group that has been handed the least work since the
 * topology round (not the k-th group for the k-th op: with ops of unequal sizes and widths that
 * left streams idle while others had a queue). Each link's two ends count the same streams,
 * read the same COMMENCEs in the same order and charge the same loads, so they decide alike. */
static void assign_streams(pcclComm_t *comm, ccoip_op_t *op, uint32_t world, uint32_t running) {
    ccoip_colls_t *c = &comm->colls;
    const ccoip_p2p_links_t *l = &comm->p2p.links;
    uint64_t bytes = (uint64_t) op->desc.count * reduce_dtype_size(op->desc.src_descriptor.datatype);
    op->tx_width = ccoip_stripe_width(bytes, world, l->ntx, running);
    op->rx_width = ccoip_stripe_width(bytes, world, l->nrx, running);
    op->tx_first = take_streams(c->tx, c->tx_load, l->ntx, op->tx_width, bytes, op->tx_turn);
    op->rx_first = take_streams(c->rx, c->rx_load, l->nrx, op->rx_width, bytes, op->rx_turn);
}

bool ccoip_coll_route(pcclComm_t *comm, ccoip_packet_t *p) {
    uint64_t tag;
    if (p->type == CCOIP_PKT_M2C_COLLECTIVE_COMMENCE) tag = p->u.collective_commence.tag;
    else if (p->type == CCOIP_PKT_M2C_COLLECTIVE_DONE) tag = p->u.collective_done.tag;
    else return false;
    ccoip_colls_t *c = &comm->colls;
    pthread_mutex_lock(&c->lock);
    ccoip_op_t *op = find_op(c, tag);
    bool fresh = op != NULL && (p->type == CCOIP_PKT_M2C_COLLECTIVE_COMMENCE ? op->commence.type == 0 : op->done.type == 0);
    if (fresh && p->type == CCOIP_PKT_M2C_COLLECTIVE_COMMENCE) {
        op->commence = *p;
        if (p->u.collective_commence.status == CCOIP_RESULT_OK) {
            assign_streams(comm, op, p->u.collective_commence.world, p->u.collective_commence.running);
            atomic_fetch_add(&c->in_ring, 1); /* op_run's ring_ended gives it back */
        }
    } else if (fresh) {
        op->done = *p;
    }
    if (fresh) bump(&op->word);
    pthread_mutex_unlock(&c->lock);
    if (!fresh) {
        LOG_WARN(MOD, "ignoring %s for collective %llu, which is not waiting for it", ccoip_packet_name(p->type),
                 (unsigned long long) tag);
        ccoip_packet_free(p);
    }
    return true;
}

bool ccoip_ops_in_flight(const pcclComm_t *comm) {
    ccoip_colls_t *c = (ccoip_colls_t *) &comm->colls;
    pthread_mutex_lock(&c->lock);
    bool any = false;
    for (int i = 0; i < CCOIP_MAX_OPS; i++) any |= c->ops[i].state != CCOIP_OP_FREE;
    pthread_mutex_unlock(&c->lock);
    return any;
}

/* ---- streams ------------------------------------------------------------------------------- */

void ccoip_data_close(pcclComm_t *comm) {
    ccoip_colls_t *c = &comm->colls;
    pthread_mutex_lock(&c->lock);
    for (uint32_t i = 0; i < CCOIP_MAX_STREAMS; i++) {
        ccoip_datalink_stop(c->tx[i].dl);
        ccoip_datalink_stop(c->rx[i].dl);
        memset(&c->tx[i], 0, sizeof c->tx[i]);
        memset(&c->rx[i], 0, sizeof c->rx[i]);
    }
    memset(c->tx_load, 0, sizeof c->tx_load);
    memset(c->rx_load, 0, sizeof c->rx_load);
    c->made = c->retired = false;
    c->links_gen++;
    pthread_mutex_unlock(&c->lock);
}

/* Stops every stream of the op's topology round from carrying more: called after a failed ring.
 * Links of a later round (another thread relinked meanwhile) are not the op's to stop. */
static void retire(pcclComm_t *comm, const ccoip_op_t *op) {
    ccoip_colls_t *c = &comm->colls;
    pthread_mutex_lock(&c->lock);
    if (c->links_gen != op->links_gen) {
        pthread_mutex_unlock(&c->lock);
        return;
    }
    if (!c->retired) LOG_INFO(MOD, "data links retired until the next pcclUpdateTopology");
    c->retired = true;
    const ccoip_p2p_links_t *l = &comm->p2p.links;
    for (uint32_t i = 0; i < CCOIP_MAX_STREAMS; i++) {
        if (c->tx[i].dl) ccoip_datalink_break(c->tx[i].dl, "retired after a failed collective");
        else if (i < l->ntx) ccoip_sock_shutdown(l->tx_fds[i]); /* no ring ran on it yet: the peer must see it end too */
        if (c->rx[i].dl) ccoip_datalink_break(c->rx[i].dl, "retired after a failed collective");
        else if (i < l->nrx) ccoip_sock_shutdown(l->rx_fds[i]);
    }
    pthread_mutex_unlock(&c->lock);
}

/* The data links of the op's streams, made on first use after a topology round; false when they
 * cannot carry a collective (retired, broken, missing). next/prev: the op's stream, or a striped
 * link over its streams (in *txs / *rxs). *next_same_host: the next peer is on this host. Call
 * with the lock held. */
static bool streams_ready(pcclComm_t *comm, const ccoip_op_t *op, ccoip_stripe_t *txs, ccoip_stripe_t *rxs,
                          reduce_link_t *next, reduce_link_t *prev, bool *next_same_host) {
    ccoip_colls_t *c = &comm->colls;
    const ccoip_p2p_links_t *l = &comm->p2p.links;
    if (c->retired || l->ntx == 0 || l->nrx == 0) return false;
    if (!c->made) {
        c->made = true;
        char name[32];
        for (uint32_t i = 0; i < l->ntx; i++) {
            snprintf(name, sizeof name, "ring tx %u", i);
            if ((c->tx[i].dl = ccoip_datalink_start(l->tx_fds[i], name, &l->tx_sess[i])) == NULL) c->retired = true;
            else ccoip_datalink_profile(c->tx[i].dl, &comm->prof, i, ccoip_prof_peer(op, 1));
        }
        for (uint32_t i = 0; i < l->nrx; i++) {
            snprintf(name, sizeof name, "ring rx %u", i);
            if ((c->rx[i].dl = ccoip_datalink_start(l->rx_fds[i], name, &l->rx_sess[i])) == NULL) c->retired = true;
            else ccoip_datalink_profile(c->rx[i].dl, &comm->prof, i, ccoip_prof_peer(op, -1));
        }
        if (c->retired) return false;
    }
    reduce_link_t tx[CCOIP_MAX_STREAMS], rx[CCOIP_MAX_STREAMS];
    for (uint32_t i = 0; i < op->tx_width; i++) {
        ccoip_datalink_t *dl = c->tx[op->tx_first + i].dl;
        if (dl == NULL || ccoip_datalink_broken(dl)) return false;
        tx[i] = ccoip_datalink_link(dl);
    }
    for (uint32_t i = 0; i < op->rx_width; i++) {
        ccoip_datalink_t *dl = c->rx[op->rx_first + i].dl;
        if (dl == NULL || ccoip_datalink_broken(dl)) return false;
        rx[i] = ccoip_datalink_link(dl);
    }
    *next = op->tx_width > 1 ? ccoip_stripe_link(txs, tx, op->tx_width) : tx[0];
    *prev = op->rx_width > 1 ? ccoip_stripe_link(rxs, rx, op->rx_width) : rx[0];
    *next_same_host = ccoip_datalink_same_host(c->tx[op->tx_first].dl);
    return true;
}

/* True when the op is at the front of the queue of every stream it uses. Lock held. */
static bool turn_ready(const ccoip_colls_t *c, const ccoip_op_t *op) {
    for (uint32_t i = 0; i < op->tx_width; i++)
        if (c->tx[op->tx_first + i].serving != op->tx_turn[op->tx_first + i]) return false;
    for (uint32_t i = 0; i < op->rx_width; i++)
        if (c->rx[op->rx_first + i].serving != op->rx_turn[op->rx_first + i]) return false;
    return true;
}

/* Waits until the op is at the front of all its streams' queues; false when it was aborted
 * first (it still gives its turns back through turn_release). Turns are handed out in the
 * master's COMMENCE order on every stream, so the oldest op waiting is at the front of all of
 * its streams: a striped op and single-stream ops never wait on each other in a cycle. */
static bool turn_acquire(pcclComm_t *comm, ccoip_op_t *op) {
    ccoip_colls_t *c = &comm->colls;
    for (;;) {
        uint32_t seen = atomic_load_explicit(&c->turns, memory_order_acquire);
        pthread_mutex_lock(&c->lock);
        bool ready = turn_ready(c, op);
        op->wd_queued = !ready; /* the watchdog does not time a wait for another op */
        pthread_mutex_unlock(&c->lock);
        if (ready) return true;
        if (atomic_load_explicit(&op->abort, memory_order_acquire)) {
            pthread_mutex_lock(&c->lock);
            op->wd_queued = false;
            pthread_mutex_unlock(&c->lock);
            return false;
        }
        tpark_wait((const uint32_t *) &c->turns, seen, 100 * 1000 * 1000);
    }
}

static void stream_done(ccoip_stream_t *s, uint64_t turn) {
    if (turn - s->serving < 64) s->done |= (uint64_t) 1 << (turn % 64);
    while (s->done & ((uint64_t) 1 << (s->serving % 64))) {
        s->done &= ~((uint64_t) 1 << (s->serving % 64));
        s->serving++;
    }
}

static void turn_release(pcclComm_t *comm, ccoip_op_t *op) {
    ccoip_colls_t *c = &comm->colls;
    pthread_mutex_lock(&c->lock);
    for (uint32_t i = 0; i < op->tx_width; i++) stream_done(&c->tx[op->tx_first + i], op->tx_turn[op->tx_first + i]);
    for (uint32_t i = 0; i < op->rx_width; i++) stream_done(&c->rx[op->rx_first + i], op->rx_turn[op->rx_first + i]);
    pthread_mutex_unlock(&c->lock);
    bump(&c->turns);
}

/* The ring of an op that commenced is over (ran, failed or never started): see in_ring. */
static void ring_ended(pcclComm_t *comm) {
    if (atomic_fetch_sub_explicit(&comm->colls.in_ring, 1, memory_order_acq_rel) == 1)
        tpark_wake_all((const uint32_t *) &comm->colls.in_ring);
}

void ccoip_rings_drain(pcclComm_t *comm) {
    _Atomic uint32_t *w = &comm->colls.in_ring;
    for (uint32_t n; (n = atomic_load_explicit(w, memory_order_acquire)) != 0;)
        tpark_wait((const uint32_t *) w, n, 100 * 1000 * 1000);
}

/* Progress of everything that moves: rings (their doorbells) and our unacknowledged sends. */
static uint64_t motion(pcclComm_t *comm, uint64_t *unacked) {
    ccoip_colls_t *c = &comm->colls;
    uint64_t sig = 0, left = 0;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < CCOIP_MAX_OPS; i++) sig += atomic_load_explicit(&c->ops[i].doorbell, memory_order_relaxed);
    for (uint32_t i = 0; i < CCOIP_MAX_STREAMS; i++)
        if (c->tx[i].dl != NULL) left += ccoip_datalink_unacked(c->tx[i].dl);
    pthread_mutex_unlock(&c->lock);
    *unacked = left;
    return sig + left * 31;
}

/* Waits until no ring runs here (unless `rings` is false) and every byte we sent has reached the
 * next peer's kernel or been read out of our pipe; false when nothing moved for DRAIN_STALL_MS
 * (a ring that waits for a peer that never started it, a peer that stopped reading). */
#define DRAIN_STALL_MS 3000
static bool drain(pcclComm_t *comm, bool rings) {
    uint64_t last = 0, left;
    int64_t since = ccoip_now_ms();
    for (;;) {
        uint64_t sig = motion(comm, &left);
        if (left == 0 && (!rings || atomic_load_explicit(&comm->colls.in_ring, memory_order_acquire) == 0)) return true;
        int64_t now = ccoip_now_ms();
        if (sig != last) last = sig, since = now;
        else if (now - since > DRAIN_STALL_MS) return false;
        uint32_t nap = 0;
        tpark_wait(&nap, 0, 1000 * 1000); /* 1 ms: a sleep on every platform */
    }
}

/* ---- one op, start to end ------------------------------------------------------------------ */

/* Waits until the routed reply (COMMENCE or DONE) is there; false when the master link is gone. */
static bool await_reply(pcclComm_t *comm, ccoip_op_t *op, bool done, ccoip_packet_t *out) {
    ccoip_colls_t *c = &comm->colls;
    for (;;) {
        uint32_t seen = atomic_load_explicit(&op->word, memory_order_acquire);
        pthread_mutex_lock(&c->lock);
        *out = done ? op->done : op->commence;
        pthread_mutex_unlock(&c->lock);
        if (out->type != 0) return true;
        if (ccoip_link_broke_since_send(comm) || atomic_load(&comm->stopping)) return false;
        tpark_wait((const uint32_t *) &op->word, seen, -1);
    }
}

static const char *op_name(const ccoip_op_t *op) {
    return op->gate ? "pcclAllReduceOnStream" : op->async ? "pcclAllReduceAsync" : "pcclAllReduce";
}

/* The ring over the op's buffers; device buffers go through a pinned host block (pccl_device.h). */
static int run_ring(pcclComm_t *comm, ccoip_op_t *op, reduce_ring_params_t *rp, reduce_ring_stats_t *stats) {
    const pcclReduceDescriptor_t *d = &op->desc;
    pcclDataType_t dt = d->src_descriptor.datatype;
    if (op->gate != NULL) { /* stream-ordered: the caller's stream fills and empties the gate's block */
        rp->stage = ccoip_gate_stage(op->gate, rp->rank, rp->world_size);
        return reduce_ring_allreduce(rp, op->gate->host, op->gate->host, d->count, dt, d->op, stats);
    }
    if (pccl_buffers_kind(op->sendbuf, op->recvbuf) != PCCL_BUFFERS_DEVICE)
        return reduce_ring_allreduce(rp, op->sendbuf, op->recvbuf, d->count, dt, d->op, stats);
    pccl_device_op_t dev;
    reduce_cache_t *pinned = pccl_pinned_cache(&comm->pinned, &comm->pinned_lock);
    if (pccl_device_begin(&dev, pinned, op->sendbuf, op->recvbuf, d->count, reduce_dtype_size(dt), rp->rank,
                          rp->world_size) != pcclSuccess)
        return REDUCE_ESTAGE;
    rp->stage = &dev.hooks;
    int rc = reduce_ring_allreduce(rp, dev.host, dev.host, d->count, dt, d->op, stats);
    if (!pccl_device_end(&dev, rc == REDUCE_OK) && rc == REDUCE_OK) rc = REDUCE_ESTAGE;
    return rc;
}

/* The master link broke before our COMMENCE came: the master may have sent it to the others
 * first, and their rings would wait for ours. Once the rings that did commence here are over and
 * our sends have arrived (nothing that can still succeed is cut), our links break, so theirs fail
 * as ours did; after a master restart every member relinks anyway. */
static void break_uncommenced(pcclComm_t *comm, const ccoip_op_t *op) {
    if (!drain(comm, true))
        LOG_WARN(MOD, "%s: collective %llu: rings and sends still stalled after %d ms", op_name(op),
                 (unsigned long long) op->tag, DRAIN_STALL_MS);
    LOG_WARN(MOD, "%s: collective %llu: the master link broke before it commenced; breaking our data links so "
                  "that peers which did start it fail too", op_name(op), (unsigned long long) op->tag);
    retire(comm, op);
}

/* The master link broke before our DONE came. Ask the master we reconnect to: a live master (our
 * link alone broke) tells what it told the others; a restarted one answers UNKNOWN, and so does a
 * master that is gone for good: then the ring decides. It completed here only if every member
 * commenced it and sent us all it had, so with the master the only failure, every member's ring
 * completes and every member returns success; we wait until our own last frames have reached
 * the next peer first (it needs them; and sends by reference must be done before the caller may
 * write the buffers again). Returns true when a master answered (in *r); false: the ring decides,
 * *r holds that outcome. */
static bool ask_verdict(pcclComm_t *comm, ccoip_op_t *op, int rc, ccoip_packet_t *r) {
    ccoip_packet_t q;
    memset(&q, 0, sizeof q);
    q.type = CCOIP_PKT_C2M_COLLECTIVE_QUERY;
    q.u.collective_abort.tag = op->tag;
    memset(r, 0, sizeof *r);
    if (ccoip_link_send(comm, &q) == CCOIP_OK && await_reply(comm, op, true, r) &&
        r->u.collective_done.status != CCOIP_RESULT_UNKNOWN)
        return true;
    bool ok = rc == REDUCE_OK && drain(comm, false);
    LOG_WARN(MOD, "%s: collective %llu: no master knows its outcome (restarted or gone); its ring %s here, so %s",
             op_name(op), (unsigned long long) op->tag, rc == REDUCE_OK ? "completed" : "failed",
             ok ? "it succeeded on every member" : "it failed");
    r->type = CCOIP_PKT_M2C_COLLECTIVE_DONE;
    r->u.collective_done = (ccoip_collective_done_t){op->tag, ok ? CCOIP_RESULT_OK : CCOIP_RESULT_FAILED};
    return false;
}

/* INIT to the master and its COMMENCE: true when the ring may start (*go says where we stand in
 * it); else op->result says why not. */
static bool commence(pcclComm_t *comm, ccoip_op_t *op, ccoip_collective_commence_t *go) {
    const pcclReduceDescriptor_t *d = &op->desc;
    ccoip_packet_t p, r;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_COLLECTIVE_INIT;
    p.u.collective_init = (ccoip_collective_init_t){op->tag, d->count, (uint8_t) d->src_descriptor.datatype,
                                                    (uint8_t) d->op, (uint8_t) d->quantization_options.quantized_datatype,
                                                    (uint8_t) d->quantization_options.algorithm};
    void *wait = ccoip_prof_wait(comm, op, pcclProfilerPhaseWaitInit);
    bool asked = ccoip_link_send(comm, &p) == CCOIP_OK;
    bool commenced = asked && await_reply(comm, op, false, &r);
    ccoip_prof_wait_end(comm, wait);
    if (!commenced) {
        if (asked && !atomic_load(&comm->stopping)) break_uncommenced(comm, op);
        op->result = pcclMasterConnectionFailed;
        return false;
    }
    *go = r.u.collective_commence;
    if (go->status == CCOIP_RESULT_OK) return true;
    if (go->status == CCOIP_RESULT_MISMATCH) {
        LOG_ERROR(MOD, "%s: the peers of this group described collective %llu differently", op_name(op),
                  (unsigned long long) op->tag);
        op->result = pcclInvalidUsage;
    } else if (go->status == CCOIP_RESULT_TIMEOUT) {
        LOG_ERROR(MOD, "%s: collective %llu timed out before it started: not every peer of the group called it "
                       "(a peer in another call, or stalled?)", op_name(op), (unsigned long long) op->tag);
        op->result = pcclCollectiveTimeout;
    } else {
        LOG_WARN(MOD, "%s: collective %llu refused: a peer left since the last topology round%s", op_name(op),
                 (unsigned long long) op->tag,
                 comm->strict_topology ? "; call pcclUpdateTopology" : " (the ring is relinked; retry it)");
        op->result = pcclRankConnectionLost;
    }
    return false;
}

/* The ring itself, on this op's turn of the pool's streams: a reduce status. */
static int ring_phase(pcclComm_t *comm, ccoip_op_t *op, const ccoip_collective_commence_t *go,
                      reduce_ring_stats_t *stats) {
    int rc = REDUCE_ELINK;
    ccoip_ring_prof_t ring_prof;
    if (go->world >= 2 && go->rank < go->world && turn_acquire(comm, op)) {
        reduce_ring_params_t rp = {.rank = go->rank, .world_size = go->world, .tag = op->tag, .cache = comm->cache,
                                   .abort_flag = &op->abort, .doorbell = &op->doorbell,
                                   .quantization = op->desc.quantization_options,
                                   .probe = ccoip_prof_ring(comm, op, &ring_prof)};
        bool same_host = false;
        ccoip_stripe_t txs, rxs; /* used while the ring runs */
        if (op->tx_width > 1 || op->rx_width > 1) rp.window = ccoip_stripe_window(op->tx_width > op->rx_width ? op->tx_width : op->rx_width);
        pthread_mutex_lock(&comm->colls.lock);
        op->links_gen = comm->colls.links_gen; /* the round whose links the ring runs on */
        bool ready = streams_ready(comm, op, &txs, &rxs, &rp.next, &rp.prev, &same_host);
        /* A same-host neighbour the master did not count (an address of ours other than the one
         * it sees): the world is the bound. */
        unsigned host_peers = comm->p2p.links.host_peers;
        if (same_host && host_peers < 2) host_peers = go->world;
        pthread_mutex_unlock(&comm->colls.lock);
        if (ready) ccoip_stripe_lanes(&rp, &txs, op->tx_width, &rxs, op->rx_width);
        /* Safe: pcclAllReduce returns, and pcclAwaitAsyncReduce too, only after the master's
         * DONE, i.e. once every peer's ring has read all it will read of our buffers. */
        rp.send_by_reference = ccoip_splice_pays(same_host, host_peers);
        if (ready) rc = run_ring(comm, op, &rp, stats);
    }
    turn_release(comm, op);
    ring_ended(comm);
    if (rc != REDUCE_OK) {
        LOG_WARN(MOD, "%s: collective %llu failed locally: %s", op_name(op), (unsigned long long) op->tag,
                 reduce_strerror(rc));
        retire(comm, op);
    }
    return rc;
}

/* COMPLETE with the ring's outcome, and the group's verdict (the master's DONE, or after a
 * master death the one it reconnects to, or the ring's own): op->result. */
static void conclude(pcclComm_t *comm, ccoip_op_t *op, int rc, uint32_t world, const reduce_ring_stats_t *stats) {
    ccoip_packet_t p, r;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_COLLECTIVE_COMPLETE;
    p.u.collective_complete = (ccoip_collective_complete_t){op->tag, rc == REDUCE_OK};
    void *wait = ccoip_prof_wait(comm, op, pcclProfilerPhaseWaitDone);
    bool done = ccoip_link_send_more(comm, &p) == CCOIP_OK && await_reply(comm, op, true, &r);
    bool by_ring = false; /* the verdict is the ring's own (no master knew it) */
    if (!done && !atomic_load(&comm->stopping)) {
        by_ring = !ask_verdict(comm, op, rc, &r);
        done = true;
    }
    ccoip_prof_wait_end(comm, wait);
    bool ok = done && rc == REDUCE_OK && r.u.collective_done.status == CCOIP_RESULT_OK;
    if (!ok && rc == REDUCE_OK) retire(comm, op); /* another member failed: our streams may hold its frames */
    op->info = (pcclReduceInfo_t){world, stats->tx_bytes, stats->rx_bytes};
    bool timed_out = done && r.u.collective_done.status == CCOIP_RESULT_TIMEOUT;
    if (timed_out)
        LOG_ERROR(MOD, "%s: collective %llu timed out: a peer stalled mid-collective; call pcclUpdateTopology",
                  op_name(op), (unsigned long long) op->tag);
    op->result = ok ? pcclSuccess
                 : !done || by_ring ? pcclMasterConnectionFailed
                 : timed_out ? pcclCollectiveTimeout
                             : pcclRankConnectionLost;
}

static void op_run(pcclComm_t *comm, ccoip_op_t *op) {
    memset(&op->info, 0, sizeof op->info);
    op->epoch = atomic_load(&comm->round_epoch);
    pthread_mutex_lock(&comm->colls.lock);
    op->links_gen = comm->colls.links_gen; /* the round its INIT was asked in (moved on at the ring) */
    pthread_mutex_unlock(&comm->colls.lock);
    ccoip_collective_commence_t go;
    if (!commence(comm, op, &go)) return;
    ccoip_prof_commenced(comm, op, go.rank, go.world);
    reduce_ring_stats_t stats = {0, 0};
    int rc = ring_phase(comm, op, &go, &stats);
    conclude(comm, op, rc, go.world, &stats);
}

void ccoip_op_run(pcclComm_t *comm, ccoip_op_t *op) {
    op->prof = ccoip_prof_coll_begin(comm, op);
    op_run(comm, op);
    ccoip_prof_coll_end(comm, op);
}

/* ---- slots and workers --------------------------------------------------------------------- */

static void *worker_main(void *arg) {
    pcclComm_t *comm = arg;
    ccoip_os_name_thread("pccl-worker");
    ccoip_colls_t *c = &comm->colls;
    pthread_mutex_lock(&c->lock);
    while (!c->stop) {
        ccoip_op_t *next = NULL;
        for (int i = 0; i < CCOIP_MAX_OPS; i++) {
            ccoip_op_t *op = &c->ops[i];
            if (op->state == CCOIP_OP_QUEUED && (next == NULL || op->seq < next->seq)) next = op;
        }
        if (next == NULL) {
            uint32_t seen = atomic_load_explicit(&c->work, memory_order_acquire);
            pthread_mutex_unlock(&c->lock);
            tpark_wait((const uint32_t *) &c->work, seen, -1);
            pthread_mutex_lock(&c->lock);
            continue;
        }
        next->state = CCOIP_OP_RUNNING;
        pthread_mutex_unlock(&c->lock);
        if (next->gate != NULL) ccoip_gate_wait_input(next->gate); /* before INIT: ccoip_gate.h */
        ccoip_op_run(comm, next);
        if (next->gate != NULL) ccoip_gate_release(next->gate, next->result == pcclSuccess); /* no lock held */
        pthread_mutex_lock(&c->lock);
        next->state = CCOIP_OP_FINISHED;
        c->nasync--;
        bump(&next->word);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

static pcclResult_t claim(pcclComm_t *comm, const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *d,
                          bool async, ccoip_gate_t *gate, ccoip_op_t **out) {
    const char *fn = gate ? "pcclAllReduceOnStream" : async ? "pcclAllReduceAsync" : "pcclAllReduce";
    ccoip_colls_t *c = &comm->colls;
    pthread_mutex_lock(&c->lock);
    ccoip_op_t *op = NULL;
    pcclResult_t res = pcclSuccess;
    if (find_op(c, d->tag) != NULL) {
        LOG_ERROR(MOD, "%s: tag %llu is still in flight on this communicator (await it first, or use another tag)", fn,
                  (unsigned long long) d->tag);
        res = pcclInvalidUsage;
    } else if (c->stop) {
        res = pcclInvalidUsage;
    } else {
        for (int i = 0; i < CCOIP_MAX_OPS && op == NULL; i++)
            if (c->ops[i].state == CCOIP_OP_FREE) op = &c->ops[i];
        if (op == NULL) {
            LOG_ERROR(MOD, "%s: %d collectives are already in flight on this communicator, the most there may be", fn,
                      CCOIP_MAX_OPS);
            res = pcclInvalidUsage;
        }
    }
    if (op != NULL && async && c->nworkers < c->nasync + 1) {
        if (pthread_create(&c->workers[c->nworkers], NULL, worker_main, comm) != 0) {
            LOG_ERROR(MOD, "%s: cannot start a worker thread", fn);
            op = NULL;
            res = pcclInternalError;
        } else {
            c->nworkers++;
        }
    }
    if (op != NULL) {
        memset(op, 0, sizeof *op);
        op->state = async ? CCOIP_OP_QUEUED : CCOIP_OP_RUNNING;
        op->async = async;
        op->tag = d->tag;
        op->seq = c->next_seq++;
        op->sendbuf = sendbuf;
        op->recvbuf = recvbuf;
        op->desc = *d;
        op->gate = gate;
        c->nasync += async;
    }
    pthread_mutex_unlock(&c->lock);
    if (op != NULL && async) bump(&c->work);
    *out = op;
    return res;
}

pcclResult_t ccoip_op_claim(pcclComm_t *comm, const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *d,
                            bool async, ccoip_op_t **out) {
    return claim(comm, sendbuf, recvbuf, d, async, NULL, out);
}

pcclResult_t ccoip_op_claim_gated(pcclComm_t *comm, const void *sendbuf, void *recvbuf, const pcclReduceDescriptor_t *d,
                                  ccoip_gate_t *gate, ccoip_op_t **out) {
    return claim(comm, sendbuf, recvbuf, d, true, gate, out);
}

/* Frees a sync op's slot after ccoip_op_run. */
void ccoip_op_release(pcclComm_t *comm, ccoip_op_t *op) {
    pthread_mutex_lock(&comm->colls.lock);
    op->state = CCOIP_OP_FREE;
    pthread_mutex_unlock(&comm->colls.lock);
}

pcclResult_t ccoip_op_await(pcclComm_t *comm, uint64_t tag, ccoip_op_t **out) {
    ccoip_colls_t *c = &comm->colls;
    pthread_mutex_lock(&c->lock);
    ccoip_op_t *op = find_op(c, tag);
    *out = NULL;
    if (op == NULL || !op->async || op->awaited) {
        pthread_mutex_unlock(&c->lock);
        LOG_ERROR(MOD, "pcclAwaitAsyncReduce: no async all-reduce with tag %llu is in flight",
                  (unsigned long long) tag);
        return pcclInvalidArgument;
    }
    while (op->state != CCOIP_OP_FINISHED) {
        uint32_t seen = atomic_load_explicit(&op->word, memory_order_acquire);
        pthread_mutex_unlock(&c->lock);
        tpark_wait((const uint32_t *) &op->word, seen, -1);
        pthread_mutex_lock(&c->lock);
    }
    op->awaited = true; /* a second await of the tag meanwhile finds nothing */
    pthread_mutex_unlock(&c->lock);
    *out = op;
    return op->result;
}

void ccoip_colls_shutdown(pcclComm_t *comm) {
    ccoip_colls_t *c = &comm->colls;
    pthread_mutex_lock(&c->lock);
    c->stop = true;
    uint32_t n = c->nworkers;
    pthread_mutex_unlock(&c->lock);
    ccoip_coll_abort(comm, true, 0);
    bump(&c->work);
    for (uint32_t i = 0; i < n; i++) pthread_join(c->workers[i], NULL);
    pthread_mutex_lock(&c->lock);
    c->nworkers = 0;
    pthread_mutex_unlock(&c->lock);
}
