/* simlink.c -- the simulated links (simlink.h). One mutex guards every queue; the wire thread
 * sleeps until the earliest frame whose receive is posted is due, or until a post wakes it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/allreduce/simlink.h"

#define CAP 256 /* frames or receives queued per direction of a pair */

typedef struct item {
    uint64_t tag, offset;
    void *buf;
    size_t len;
    reduce_req_t *req;
    double due; /* sends: when the frame has arrived */
} item_t;

typedef struct queue {
    item_t it[CAP];
    uint32_t len;
} queue_t;

typedef struct edge { /* a -> b */
    queue_t sends, recvs;
} edge_t;

typedef struct ep {
    simnet_t *net;
    uint32_t a, b;
} ep_t;

typedef struct host {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic uint32_t doorbell;
    double egress_free;
} host_t;

struct simnet {
    uint32_t n;
    double delay, rate;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    edge_t **edges; /* [a * n + b], made on first use */
    ep_t *eps;
    host_t *hosts;
    pthread_t wire;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static edge_t *edge_of(simnet_t *net, uint32_t a, uint32_t b) {
    edge_t **e = &net->edges[(size_t) a * net->n + b];
    if (*e == NULL) *e = calloc(1, sizeof **e);
    return *e;
}

static void complete(simnet_t *net, uint32_t host, reduce_req_t *req, uint32_t state) {
    _Atomic uint32_t *bell = req->doorbell;
    atomic_store(&req->state, state);
    atomic_fetch_add(bell, 1);
    host_t *h = &net->hosts[host];
    pthread_mutex_lock(&h->mu);
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
}

static void pop(queue_t *q, uint32_t i) {
    memmove(&q->it[i], &q->it[i + 1], (q->len - i - 1) * sizeof(item_t));
    q->len--;
}

/* Delivers what is due on a -> b; returns the next due time of a matched frame (or a large one). */
static double deliver(simnet_t *net, edge_t *e, uint32_t a, uint32_t b, double now) {
    for (;;) {
        if (e->sends.len == 0) return 1e30;
        item_t *s = &e->sends.it[0];
        uint32_t k = 0;
        while (k < e->recvs.len && e->recvs.it[k].tag != s->tag) k++;
        if (k == e->recvs.len) return 1e30;
        if (s->due > now) return s->due;
        item_t *r = &e->recvs.it[k];
        uint32_t st = r->offset == s->offset && r->len == s->len ? REDUCE_REQ_DONE : REDUCE_REQ_FAILED;
        if (st == REDUCE_REQ_DONE && s->len) memcpy(r->buf, s->buf, s->len);
        complete(net, a, s->req, st);
        complete(net, b, r->req, st);
        pop(&e->recvs, k);
        pop(&e->sends, 0);
    }
}

static void *wire_main(void *arg) {
    simnet_t *net = arg;
    pthread_mutex_lock(&net->mu);
    while (!net->stop) {
        double now = now_s(), next = 1e30;
        for (uint32_t a = 0; a < net->n; a++)
            for (uint32_t b = 0; b < net->n; b++) {
                edge_t *e = net->edges[(size_t) a * net->n + b];
                if (e == NULL) continue;
                double d = deliver(net, e, a, b, now);
                if (d < next) next = d;
            }
        if (next >= 1e29) next = now + 0.01;
        struct timespec ts;
        ts.tv_sec = (time_t) next;
        ts.tv_nsec = (long) ((next - (double) ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&net->cv, &net->mu, &ts);
    }
    pthread_mutex_unlock(&net->mu);
    return NULL;
}

static int sl_post(ep_t *ep, int send, uint64_t tag, uint64_t off, void *buf, size_t len, reduce_req_t *req) {
    simnet_t *net = ep->net;
    pthread_mutex_lock(&net->mu);
    edge_t *e = send ? edge_of(net, ep->a, ep->b) : edge_of(net, ep->b, ep->a);
    queue_t *q = e == NULL ? NULL : send ? &e->sends : &e->recvs;
    if (q == NULL || q->len == CAP) {
        pthread_mutex_unlock(&net->mu);
        return -1;
    }
    item_t it = {tag, off, buf, len, req, 0};
    if (send) { /* the host's egress serializes its frames; then the path's delay */
        host_t *h = &net->hosts[ep->a];
        double start = now_s() > h->egress_free ? now_s() : h->egress_free;
        h->egress_free = start + (double) len / net->rate;
        it.due = h->egress_free + net->delay;
    }
    q->it[q->len++] = it;
    pthread_cond_signal(&net->cv);
    pthread_mutex_unlock(&net->mu);
    return 0;
}

static int sl_send(void *l, uint64_t tag, uint64_t off, const void *src, size_t len, reduce_req_t *req) {
    return sl_post(l, 1, tag, off, (void *) src, len, req);
}

static int sl_recv(void *l, uint64_t tag, uint64_t off, void *dst, size_t len, reduce_req_t *req) {
    return sl_post(l, 0, tag, off, dst, len, req);
}

static void sl_wait(void *l, _Atomic uint32_t *bell, uint32_t seen, uint32_t timeout_us) {
    ep_t *ep = l;
    host_t *h = &ep->net->hosts[ep->a];
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long) timeout_us * 1000;
    ts.tv_sec += ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    pthread_mutex_lock(&h->mu);
    while (atomic_load(bell) == seen)
        if (pthread_cond_timedwait(&h->cv, &h->mu, &ts) != 0) break;
    pthread_mutex_unlock(&h->mu);
}

static void sl_cancel(void *l, uint64_t tag) {
    ep_t *ep = l;
    simnet_t *net = ep->net;
    pthread_mutex_lock(&net->mu);
    queue_t *qs[2] = {&edge_of(net, ep->a, ep->b)->sends, &edge_of(net, ep->b, ep->a)->recvs};
    for (int k = 0; k < 2; k++)
        for (uint32_t i = 0; i < qs[k]->len;)
            if (qs[k]->it[i].tag == tag) pop(qs[k], i);
            else i++;
    pthread_mutex_unlock(&net->mu);
}

static const reduce_link_ops_t sim_ops = {.post_send = sl_send, .post_recv = sl_recv, .wait = sl_wait,
                                          .cancel = sl_cancel};

static void init_cv(pthread_cond_t *cv) {
    pthread_condattr_t at;
    pthread_condattr_init(&at);
    pthread_condattr_setclock(&at, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &at);
    pthread_condattr_destroy(&at);
}

simnet_t *simnet_create(uint32_t n, double delay_s, double rate_Bps) {
    simnet_t *net = calloc(1, sizeof *net);
    if (net == NULL) return NULL;
    net->n = n;
    net->delay = delay_s;
    net->rate = rate_Bps;
    net->edges = calloc((size_t) n * n, sizeof *net->edges);
    net->eps = calloc((size_t) n * n, sizeof *net->eps);
    net->hosts = calloc(n, sizeof *net->hosts);
    if (net->edges == NULL || net->eps == NULL || net->hosts == NULL) {
        free(net->edges);
        free(net->eps);
        free(net->hosts);
        free(net);
        return NULL;
    }
    pthread_mutex_init(&net->mu, NULL);
    init_cv(&net->cv);
    for (uint32_t a = 0; a < n; a++) {
        pthread_mutex_init(&net->hosts[a].mu, NULL);
        init_cv(&net->hosts[a].cv);
        for (uint32_t b = 0; b < n; b++) net->eps[(size_t) a * n + b] = (ep_t){net, a, b};
    }
    pthread_create(&net->wire, NULL, wire_main, net);
    return net;
}

void simnet_destroy(simnet_t *net) {
    pthread_mutex_lock(&net->mu);
    net->stop = 1;
    pthread_cond_signal(&net->cv);
    pthread_mutex_unlock(&net->mu);
    pthread_join(net->wire, NULL);
    for (size_t i = 0; i < (size_t) net->n * net->n; i++) free(net->edges[i]);
    free(net->edges);
    free(net->eps);
    free(net->hosts);
    free(net);
}

reduce_link_t simnet_link(simnet_t *net, uint32_t a, uint32_t b) {
    return (reduce_link_t){&sim_ops, &net->eps[(size_t) a * net->n + b]};
}

_Atomic uint32_t *simnet_doorbell(simnet_t *net, uint32_t a) {
    return &net->hosts[a].doorbell;
}
