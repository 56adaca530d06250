/* reduce_memlink.c -- the in-memory link (see reduce_memlink.h).
 *
 * Each edge has a mutex and two FIFOs of unmatched requests: sends posted by the upstream peer
 * and receives posted by the downstream one. A post first looks for the oldest request of the
 * same tag on the other side; if there is one, it copies the payload and completes both, all
 * under the edge's mutex, so cancel (which takes the mutex) leaves nothing in progress. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log/log.h"
#include "reduce/reduce_memlink.h"
#include "threadpark/monocond.h"

typedef struct item {
    uint64_t tag, offset;
    void *buf;
    size_t len;
    reduce_req_t *req;
    uint32_t owner;
} item_t;

typedef struct fifo {
    item_t *items;
    uint32_t len;
} fifo_t;

typedef struct edge {
    pthread_mutex_t mu;
    fifo_t sends, recvs;
    int failed;
    uint64_t bytes;
} edge_t;

typedef struct peer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic uint32_t doorbell;
    _Atomic uint32_t abort;
    _Atomic uint64_t sends_posted;
} peer_t;

typedef struct endpoint {
    reduce_memnet_t *net;
    uint32_t owner;
    uint32_t edge;
    int is_send;
} endpoint_t;

struct reduce_memnet {
    uint32_t n, cap;
    reduce_memnet_opts_t opts;
    edge_t *edges;     /* edge i: peer i -> peer (i+1) % n */
    peer_t *peers;
    endpoint_t *eps;   /* 2 per peer: [2p] sends on edge p, [2p+1] receives on edge p-1 */
};

static void wake_peer(reduce_memnet_t *net, uint32_t owner) {
    peer_t *pe = &net->peers[owner];
    pthread_mutex_lock(&pe->mu);
    pthread_cond_broadcast(&pe->cv);
    pthread_mutex_unlock(&pe->mu);
}

/* Called with the edge's mutex held: the state store is the last touch of the request. */
static void complete(reduce_memnet_t *net, const item_t *it, uint32_t state) {
    _Atomic uint32_t *doorbell = it->req->doorbell;
    atomic_store(&it->req->state, state);
    if (doorbell != NULL) atomic_fetch_add(doorbell, 1);
    wake_peer(net, it->owner);
}

static void fifo_remove(fifo_t *f, uint32_t i) {
    memmove(&f->items[i], &f->items[i + 1], (f->len - i - 1) * sizeof(item_t));
    f->len--;
}

static int fifo_find(const fifo_t *f, uint64_t tag) {
    for (uint32_t i = 0; i < f->len; i++)
        if (f->items[i].tag == tag) return (int) i;
    return -1;
}

static void fail_edge(reduce_memnet_t *net, edge_t *e) {
    pthread_mutex_lock(&e->mu);
    e->failed = 1;
    for (uint32_t i = 0; i < e->sends.len; i++) complete(net, &e->sends.items[i], REDUCE_REQ_FAILED);
    for (uint32_t i = 0; i < e->recvs.len; i++) complete(net, &e->recvs.items[i], REDUCE_REQ_FAILED);
    e->sends.len = e->recvs.len = 0;
    pthread_mutex_unlock(&e->mu);
}

void reduce_memnet_abort_all(reduce_memnet_t *net, int wake) {
    for (uint32_t i = 0; i < net->n; i++) {
        atomic_store(&net->peers[i].abort, 1);
        if (wake) {
            atomic_fetch_add(&net->peers[i].doorbell, 1);
            wake_peer(net, i);
        }
    }
}

void reduce_memnet_kill(reduce_memnet_t *net, uint32_t peer) {
    fail_edge(net, &net->edges[peer]);
    fail_edge(net, &net->edges[(peer + net->n - 1) % net->n]);
    if (net->opts.abort_on_death) reduce_memnet_abort_all(net, 1);
}

/* Posts one side; `mine` is the poster's FIFO, `theirs` the other side's. */
static int post(endpoint_t *ep, item_t it) {
    reduce_memnet_t *net = ep->net;
    edge_t *e = &net->edges[ep->edge];
    pthread_mutex_lock(&e->mu);
    if (e->failed) {
        pthread_mutex_unlock(&e->mu);
        return -1;
    }
    fifo_t *mine = ep->is_send ? &e->sends : &e->recvs;
    fifo_t *theirs = ep->is_send ? &e->recvs : &e->sends;
    int k = fifo_find(theirs, it.tag);
    if (k >= 0) {
        item_t other = theirs->items[k];
        fifo_remove(theirs, (uint32_t) k);
        if (other.offset != it.offset || other.len != it.len) {
            LOG_ERROR("reduce", "memlink edge %u tag %llu: frame (%llu, %zu) for receive (%llu, %zu)",
                      ep->edge, (unsigned long long) it.tag,
                      (unsigned long long) (ep->is_send ? it.offset : other.offset),
                      ep->is_send ? it.len : other.len,
                      (unsigned long long) (ep->is_send ? other.offset : it.offset),
                      ep->is_send ? other.len : it.len);
            complete(net, &other, REDUCE_REQ_FAILED);
            complete(net, &it, REDUCE_REQ_FAILED);
        } else {
            const item_t *s = ep->is_send ? &it : &other, *r = ep->is_send ? &other : &it;
            if (it.len > 0) memcpy(r->buf, s->buf, it.len);
            e->bytes += it.len;
            complete(net, &other, REDUCE_REQ_DONE);
            complete(net, &it, REDUCE_REQ_DONE);
        }
    } else if (mine->len == net->cap) {
        pthread_mutex_unlock(&e->mu);
        LOG_ERROR("reduce", "memlink edge %u: queue full (%u)", ep->edge, net->cap);
        return -1;
    } else {
        mine->items[mine->len++] = it;
    }
    pthread_mutex_unlock(&e->mu);
    return 0;
}

static int ml_post_send(void *link, uint64_t tag, uint64_t offset, const void *src, size_t len,
                        reduce_req_t *req) {
    endpoint_t *ep = link;
    reduce_memnet_t *net = ep->net;
    uint64_t nth = atomic_fetch_add(&net->peers[ep->owner].sends_posted, 1);
    if (net->opts.die_peer == (int32_t) ep->owner && nth == net->opts.die_at_send) {
        reduce_memnet_kill(net, ep->owner);
        return -1;
    }
    item_t it = { tag, offset, (void *) src, len, req, ep->owner };
    return post(ep, it);
}

static int ml_post_recv(void *link, uint64_t tag, uint64_t offset, void *dst, size_t len,
                        reduce_req_t *req) {
    endpoint_t *ep = link;
    item_t it = { tag, offset, dst, len, req, ep->owner };
    return post(ep, it);
}

static void ml_wait(void *link, _Atomic uint32_t *doorbell, uint32_t seen, uint32_t timeout_us) {
    endpoint_t *ep = link;
    peer_t *pe = &ep->net->peers[ep->owner];
    struct timespec deadline;
    monocond_deadline(&deadline, (int64_t) timeout_us * 1000);
    pthread_mutex_lock(&pe->mu);
    while (atomic_load(doorbell) == seen)
        if (monocond_timedwait(&pe->cv, &pe->mu, &deadline) == ETIMEDOUT) break;
    pthread_mutex_unlock(&pe->mu);
}

static void ml_cancel(void *link, uint64_t tag) {
    endpoint_t *ep = link;
    edge_t *e = &ep->net->edges[ep->edge];
    pthread_mutex_lock(&e->mu);
    fifo_t *mine = ep->is_send ? &e->sends : &e->recvs;
    for (uint32_t i = 0; i < mine->len;) {
        if (mine->items[i].tag == tag) fifo_remove(mine, i);
        else i++;
    }
    pthread_mutex_unlock(&e->mu);
}

static const reduce_link_ops_t memlink_ops = {
    .post_send = ml_post_send,
    .post_recv = ml_post_recv,
    .wait = ml_wait,
    .cancel = ml_cancel,
};

reduce_memnet_t *reduce_memnet_create(uint32_t n, const reduce_memnet_opts_t *opts) {
    if (n == 0) return NULL;
    reduce_memnet_t *net = calloc(1, sizeof *net);
    if (net == NULL) return NULL;
    net->n = n;
    net->opts.die_peer = -1;
    if (opts != NULL) net->opts = *opts;
    net->cap = net->opts.queue_capacity ? net->opts.queue_capacity : 256;
    net->edges = calloc(n, sizeof *net->edges);
    net->peers = calloc(n, sizeof *net->peers);
    net->eps = calloc(2 * (size_t) n, sizeof *net->eps);
    if (net->edges == NULL || net->peers == NULL || net->eps == NULL) goto fail;
    for (uint32_t i = 0; i < n; i++) {
        edge_t *e = &net->edges[i];
        pthread_mutex_init(&e->mu, NULL);
        e->sends.items = calloc(net->cap, sizeof(item_t));
        e->recvs.items = calloc(net->cap, sizeof(item_t));
        if (e->sends.items == NULL || e->recvs.items == NULL) goto fail;
        peer_t *pe = &net->peers[i];
        if (monocond_init(&pe->cv) != 0) goto fail;
        pthread_mutex_init(&pe->mu, NULL);
        net->eps[2 * i] = (endpoint_t) { net, i, i, 1 };
        net->eps[2 * i + 1] = (endpoint_t) { net, i, (i + n - 1) % n, 0 };
    }
    return net;
fail:
    reduce_memnet_destroy(net);
    return NULL;
}

void reduce_memnet_destroy(reduce_memnet_t *net) {
    if (net == NULL) return;
    for (uint32_t i = 0; net->edges != NULL && net->peers != NULL && i < net->n; i++) {
        free(net->edges[i].sends.items);
        free(net->edges[i].recvs.items);
        pthread_mutex_destroy(&net->edges[i].mu);
        pthread_mutex_destroy(&net->peers[i].mu);
        pthread_cond_destroy(&net->peers[i].cv);
    }
    free(net->edges);
    free(net->peers);
    free(net->eps);
    free(net);
}

void reduce_memnet_fill_params(reduce_memnet_t *net, uint32_t peer, reduce_ring_params_t *p) {
    p->rank = peer;
    p->world_size = net->n;
    p->next = (reduce_link_t) { &memlink_ops, &net->eps[2 * peer] };
    p->prev = (reduce_link_t) { &memlink_ops, &net->eps[2 * peer + 1] };
    p->abort_flag = &net->peers[peer].abort;
    p->doorbell = &net->peers[peer].doorbell;
}

uint64_t reduce_memnet_edge_bytes(reduce_memnet_t *net, uint32_t from) {
    edge_t *e = &net->edges[from];
    pthread_mutex_lock(&e->mu);
    uint64_t b = e->bytes;
    pthread_mutex_unlock(&e->mu);
    return b;
}
