/* ccoip_stripe.c: a reduce link that deals the frames of one ring over the pool's streams to one
 * neighbour by their sub-chunk index (ccoip_stripe.h). */
#include "ccoip/peer/ccoip_stripe.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The environment knobs of A/B runs, each read once per process (none changes while one runs). */
typedef struct knob {
    const char *name;
    long dflt; /* unset or empty */
    long value;
    int read;
} knob_t;

static knob_t lane_min_kib = {"PCCL_STRIPE_LANE_MIN_KIB", CCOIP_STRIPE_MIN_PER_LANE / 1024, 0, 0};
static knob_t max_lanes = {"PCCL_STRIPE_MAX_LANES", CCOIP_STRIPE_MAX_LANES, 0, 0};
static knob_t shared_lanes = {"PCCL_STRIPE_SHARED_LANES", CCOIP_STRIPE_SHARED_LANES, 0, 0};
static knob_t window = {"PCCL_STRIPE_WINDOW", 0, 0, 0};
static knob_t lanes_on = {"PCCL_STRIPE_LANES", 1, 0, 0};

static long knob(knob_t *k) {
    if (__atomic_load_n(&k->read, __ATOMIC_ACQUIRE)) return __atomic_load_n(&k->value, __ATOMIC_RELAXED);
    const char *e = getenv(k->name);
    long v = e != NULL && *e != '\0' ? atol(e) : k->dflt;
    __atomic_store_n(&k->value, v, __ATOMIC_RELAXED); /* racing first readers store the same */
    __atomic_store_n(&k->read, 1, __ATOMIC_RELEASE);
    return v;
}

uint32_t ccoip_stripe_width(uint64_t bytes, uint32_t world, uint32_t streams, uint32_t running) {
    if (streams <= 1 || world == 0) return 1;
    uint64_t chunk = bytes / world;
    if (chunk < (uint64_t) streams * CCOIP_STRIPE_MIN_PER_STREAM) return 1;
    /* Halve the width while a lane would get less than CCOIP_STRIPE_MIN_PER_LANE of each chunk,
     * or while the op would have more lanes than it may: CCOIP_STRIPE_MAX_LANES alone (0: any), and with
     * others running beside it CCOIP_STRIPE_SHARED_LANES and half the pool, so that they run at
     * once on other groups. PCCL_STRIPE_LANE_MIN_KIB, PCCL_STRIPE_MAX_LANES and
     * PCCL_STRIPE_SHARED_LANES override them for A/B runs (0: no limit); every peer must set the
     * same, since the two ends of a link decide alone. */
    long min_kib = knob(&lane_min_kib), most = knob(&max_lanes), shared = knob(&shared_lanes);
    if (running > 1 && shared > 0) {
        long half = (long) streams / 2;
        if (most <= 0 || shared < most) most = shared;
        if (half < most) most = half;
    }
    uint64_t lane_min = min_kib > 0 ? (uint64_t) min_kib * 1024u : 0;
    uint32_t w = streams;
    while (w % 2 == 0 && (chunk < (uint64_t) w * lane_min || (most > 0 && w > (uint64_t) most))) w /= 2;
    return w;
}

uint32_t ccoip_stripe_take(uint64_t *load, uint32_t streams, uint32_t width, uint64_t bytes) {
    if (width == 0 || width > streams) width = streams;
    uint32_t best = 0;
    uint64_t best_load = UINT64_MAX;
    for (uint32_t g = 0; g + width <= streams; g += width) {
        uint64_t most = 0;
        for (uint32_t i = g; i < g + width; i++)
            if (load[i] > most) most = load[i];
        if (most < best_load) best_load = most, best = g;
    }
    for (uint32_t i = best; i < best + width; i++) load[i] += bytes / width + CCOIP_STRIPE_OP_LOAD;
    return best;
}

uint32_t ccoip_stripe_window(uint32_t width) {
    /* PCCL_STRIPE_WINDOW: for experiments; local (the frames' order does not depend on it). */
    long e = knob(&window);
    uint32_t w = e > 0 ? (uint32_t) e : 4 * width;
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
    if (tx_width <= 1 || tx_width != rx_width || knob(&lanes_on) == 0) {
        rp->lanes = 1;
        return;
    }
    rp->lanes = tx_width;
    rp->next_lanes = tx->links;
    rp->prev_lanes = rx->links;
}
