/* ccoip_stripe.c: a reduce link that deals the frames of one ring over the pool's streams to one
 * neighbour by their sub-chunk index (ccoip_stripe.h). */
#include "ccoip/peer/ccoip_stripe.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

uint32_t ccoip_stripe_width(uint64_t bytes, uint32_t world, uint32_t streams) {
    if (streams <= 1 || world == 0) return 1;
    uint64_t chunk = bytes / world;
    if (chunk < (uint64_t) streams * CCOIP_STRIPE_MIN_PER_STREAM) return 1;
    /* Halve the width while a lane would get less than CCOIP_STRIPE_MIN_PER_LANE of each chunk:
     * the op takes a group of the streams and the next op the next group, at once.
     * PCCL_STRIPE_LANE_MIN_KIB overrides it for A/B runs (0: all streams, as before session 9);
     * every peer must set the same, since the two ends of a link decide alone. */
    const char *e = getenv("PCCL_STRIPE_LANE_MIN_KIB");
    uint64_t lane_min = e != NULL && *e != '\0' ? (uint64_t) (atoi(e) > 0 ? atoi(e) : 0) * 1024u : CCOIP_STRIPE_MIN_PER_LANE;
    uint32_t w = streams;
    while (w % 2 == 0 && chunk < (uint64_t) w * lane_min) w /= 2;
    return w;
}

uint32_t ccoip_stripe_window(uint32_t width) {
    /* PCCL_STRIPE_WINDOW: for experiments; local (the frames' order does not depend on it). */
    const char *e = getenv("PCCL_STRIPE_WINDOW");
    uint32_t w = e != NULL && atoi(e) > 0 ? (uint32_t) atoi(e) : 4 * width;
    if (w < REDUCE_RING_DEFAULT_WINDOW) w = REDUCE_RING_DEFAULT_WINDOW;
    return w > REDUCE_RING_MAX_WINDOW ? REDUCE_RING_MAX_WINDOW : w;
}

static int stripe_send(void *ctx, uint64_t tag, uint64_t offset, const void *src, size_t len, reduce_req_t *req) {
    ccoip_stripe_t *s = ctx;
    const reduce_link_t *l = &s->links[req->stream % s->n];
    return l->ops->post_send(l->ctx, tag, offset, src, len, req);
}

static int stripe_recv(void *ctx, uint64_t tag, uint64_t offset, void *dst, size_t len, reduce_req_t *req) {
    ccoip_stripe_t *s = ctx;
    const reduce_link_t *l = &s->links[req->stream % s->n];
    return l->ops->post_recv(l->ctx, tag, offset, dst, len, req);
}

/* Every stream rings the op's one doorbell: waiting on it through any of them is the same. */
static void stripe_wait(void *ctx, _Atomic uint32_t *doorbell, uint32_t seen, uint32_t timeout_us) {
    ccoip_stripe_t *s = ctx;
    s->links[0].ops->wait(s->links[0].ctx, doorbell, seen, timeout_us);
}

static void stripe_cancel(void *ctx, uint64_t tag) {
    ccoip_stripe_t *s = ctx;
    for (uint32_t i = 0; i < s->n; i++) s->links[i].ops->cancel(s->links[i].ctx, tag);
}

static int stripe_recv_combine(void *ctx, uint64_t tag, uint64_t offset, void *dst, const void *x, size_t len,
                               pcclDataType_t dtype, pcclRedOp_t op, reduce_req_t *req) {
    ccoip_stripe_t *s = ctx;
    const reduce_link_t *l = &s->links[req->stream % s->n];
    return l->ops->post_recv_combine(l->ctx, tag, offset, dst, x, len, dtype, op, req);
}

static const reduce_link_ops_t stripe_ops = {
    .post_send = stripe_send,
    .post_recv = stripe_recv,
    .wait = stripe_wait,
    .cancel = stripe_cancel,
};

/* Every stream combines as it receives (all on shared memory): so does the striped link. */
static const reduce_link_ops_t stripe_combine_ops = {
    .post_send = stripe_send,
    .post_recv = stripe_recv,
    .wait = stripe_wait,
    .cancel = stripe_cancel,
    .post_recv_combine = stripe_recv_combine,
};

reduce_link_t ccoip_stripe_link(ccoip_stripe_t *s, const reduce_link_t *links, uint32_t n) {
    memset(s, 0, sizeof *s);
    if (n > CCOIP_P2P_MAX_STREAMS) n = CCOIP_P2P_MAX_STREAMS;
    memcpy(s->links, links, n * sizeof *links);
    s->n = n;
    bool combine = n > 0;
    for (uint32_t i = 0; i < n; i++) combine = combine && links[i].ops->post_recv_combine != NULL;
    return (reduce_link_t){combine ? &stripe_combine_ops : &stripe_ops, s};
}

void ccoip_stripe_lanes(reduce_ring_params_t *rp, const ccoip_stripe_t *tx, uint32_t tx_width,
                        const ccoip_stripe_t *rx, uint32_t rx_width) {
    /* PCCL_STRIPE_LANES=0: one lane, for A/B runs; local (the frames' streams do not depend on it). */
    const char *e = getenv("PCCL_STRIPE_LANES");
    if (tx_width <= 1 || tx_width != rx_width || (e != NULL && strcmp(e, "0") == 0)) {
        rp->lanes = 1;
        return;
    }
    rp->lanes = tx_width;
    rp->next_lanes = tx->links;
    rp->prev_lanes = rx->links;
}
