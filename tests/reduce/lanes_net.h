/* lanes_net.h -- S in-memory streams between ring neighbours, as a striped pool has: one memnet
 * per stream, and per peer a dealing link (each frame on stream j mod S, j = reduce_req_t.stream its
 * sub-chunk index, as ccoip_stripe.c deals) plus the per-stream links the ring's lanes post to. The peers' doorbells
 * and abort flags are stream 0's; completions on another stream ring the same doorbell (the ring
 * sets it in every request) but wake nobody, so tests set a short poll_us. */
#ifndef PCCL_TESTS_REDUCE_LANES_NET_H
#define PCCL_TESTS_REDUCE_LANES_NET_H

#include <string.h>

#include "reduce/reduce.h"
#include "reduce/reduce_memlink.h"

#define LN_MAX_STREAMS 8
#define LN_MAX_PEERS 8

typedef struct ln_deal {
    reduce_link_t links[LN_MAX_STREAMS];
    uint32_t n;
    uint64_t nsend, nrecv; /* frames dealt: zero when the ring posted to its lanes directly */
} ln_deal_t;

static int ln_deal_send(void *ctx, uint64_t tag, uint64_t off, const void *src, size_t len, reduce_req_t *req) {
    ln_deal_t *d = ctx;
    const reduce_link_t *l = &d->links[req->stream % d->n];
    d->nsend++;
    return l->ops->post_send(l->ctx, tag, off, src, len, req);
}

static int ln_deal_recv(void *ctx, uint64_t tag, uint64_t off, void *dst, size_t len, reduce_req_t *req) {
    ln_deal_t *d = ctx;
    const reduce_link_t *l = &d->links[req->stream % d->n];
    d->nrecv++;
    return l->ops->post_recv(l->ctx, tag, off, dst, len, req);
}

static void ln_deal_wait(void *ctx, _Atomic uint32_t *doorbell, uint32_t seen, uint32_t timeout_us) {
    ln_deal_t *d = ctx;
    d->links[0].ops->wait(d->links[0].ctx, doorbell, seen, timeout_us);
}

static void ln_deal_cancel(void *ctx, uint64_t tag) {
    ln_deal_t *d = ctx;
    for (uint32_t i = 0; i < d->n; i++) d->links[i].ops->cancel(d->links[i].ctx, tag);
}

static const reduce_link_ops_t ln_deal_ops = { ln_deal_send, ln_deal_recv, ln_deal_wait, ln_deal_cancel, NULL };

typedef struct lanes_net {
    uint32_t n, s;
    reduce_memnet_t *nets[LN_MAX_STREAMS];
    ln_deal_t tx[LN_MAX_PEERS], rx[LN_MAX_PEERS];
    reduce_link_t next[LN_MAX_PEERS][LN_MAX_STREAMS], prev[LN_MAX_PEERS][LN_MAX_STREAMS];
} lanes_net_t;

/* n peers, s streams; opts (may be NULL) go to stream 0's memnet only. 0 on success. */
static inline int lanes_net_create(lanes_net_t *ln, uint32_t n, uint32_t s, const reduce_memnet_opts_t *opts) {
    memset(ln, 0, sizeof *ln);
    if (n > LN_MAX_PEERS || s == 0 || s > LN_MAX_STREAMS) return -1;
    ln->n = n;
    ln->s = s;
    for (uint32_t k = 0; k < s; k++)
        if ((ln->nets[k] = reduce_memnet_create(n, k == 0 ? opts : NULL)) == NULL) return -1;
    for (uint32_t p = 0; p < n; p++) {
        for (uint32_t k = 0; k < s; k++) {
            reduce_ring_params_t tmp;
            memset(&tmp, 0, sizeof tmp);
            reduce_memnet_fill_params(ln->nets[k], p, &tmp);
            ln->next[p][k] = ln->tx[p].links[k] = tmp.next;
            ln->prev[p][k] = ln->rx[p].links[k] = tmp.prev;
        }
        ln->tx[p].n = ln->rx[p].n = s;
    }
    return 0;
}

static inline void lanes_net_destroy(lanes_net_t *ln) {
    for (uint32_t k = 0; k < ln->s; k++) reduce_memnet_destroy(ln->nets[k]);
}

/* Peer p's ring parameters: the dealing links, and (with lanes) the per-stream links. */
static inline void lanes_net_fill(lanes_net_t *ln, uint32_t p, int lanes, reduce_ring_params_t *rp) {
    reduce_memnet_fill_params(ln->nets[0], p, rp);
    rp->next = (reduce_link_t){ &ln_deal_ops, &ln->tx[p] };
    rp->prev = (reduce_link_t){ &ln_deal_ops, &ln->rx[p] };
    rp->poll_us = 200;
    if (lanes) {
        rp->lanes = ln->s;
        rp->next_lanes = ln->next[p];
        rp->prev_lanes = ln->prev[p];
    }
}

#endif /* PCCL_TESTS_REDUCE_LANES_NET_H */
