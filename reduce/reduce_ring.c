/* reduce_ring.c -- ring all-reduce over an abstract link (reduce.h, README.md).
 *
 * The buffer is cut into world_size chunks, chunk c owned by rank c. Steps t = 0 .. 2N-3 run
 * reduce-scatter (t < N-1) then all-gather; at step t rank r sends chunk (r-1-t) mod N to r+1
 * and receives chunk (r-2-t) mod N from r-1, so the chunk received at step t is the one sent
 * at step t+1, and after step N-2 rank r holds chunk r fully reduced. Each chunk travels in
 * sub-chunks: the sends and the receives form two ordered streams of items, and the loop below
 * keeps up to `window` items of each in flight:
 *   - send item k is ready when it is a step-0 item (straight from sendbuf) or when receive
 *     item k - n0 (same chunk, same sub-chunk, previous step) has been processed;
 *   - a reduce-scatter receive lands in a staging block and is combined into recvbuf as
 *     recvbuf = staging OP sendbuf; the owner applies the Avg division right after its last
 *     combine, so the all-gather spreads finished, identical bytes. Where the lane's receiving
 *     link offers post_recv_combine (a shared-memory pipe) and the buffers are plain host
 *     memory, unquantized, the link does that combine itself straight out of its buffer as the
 *     bytes arrive, with the same kernel and operand order, and the lane needs no staging
 *     block; the link writes recvbuf and reads sendbuf over that sub-chunk only until the
 *     request completes, and the ring touches the sub-chunk's recvbuf bytes only after it saw
 *     the completion (the Avg division, the send that forwards them);
 *   - an all-gather receive lands straight in recvbuf, but only once the reduce-scatter send
 *     that read the same bytes has completed (all-gather receive i covers exactly the bytes of
 *     send i), so the link never reads memory that is being overwritten.
 * One loop turn retires finished sends, posts what it may, then reduces at most one received
 * sub-chunk, so the send that this sub-chunk unblocks is posted before the next reduce.
 *
 * Lanes (params->lanes = S, README.md "Lanes"): the items with j mod S = l form lane l, and
 * every rule above relates items of the same chunk and sub-chunk j, so of one lane, for any
 * sub-chunk counts. Each lane keeps its own cursors, counters (its own stream lengths: lanes
 * hold unequal shares when S does not divide a chunk's sub-chunk count) and window / S slots,
 * and posts to stream l itself; a loop turn serves every lane in turn. Each request carries its
 * j (reduce_req_t.stream), by which a striped link deals it to stream j mod S, so a one-lane
 * ring over that link puts every frame on the same stream as the lanes do.
 *
 * Quantized (params->quantization): every frame is a quantized sub-chunk (reduce_quant.c).
 * Sends of steps 0 .. N-1 quantize at post time into a send staging slot: step 0 from sendbuf,
 * later reduce-scatter steps the partial in recvbuf, step N-1 the owner's finished chunk, which
 * the owner then decodes back over its own copy. Reduce-scatter receives land in receive slots
 * and are decoded into a scratch block, then combined as before. All-gather receives land in
 * one of two gather buffers (by step parity, one frame slot per sub-chunk), are decoded into
 * recvbuf, and the next step forwards those very bytes; so all-gather receive (t, j) waits
 * until the send that forwarded the same slot two steps earlier has completed. */
#include <string.h>

#include "log/log.h"
#include "reduce/reduce.h"

#define MAX_SUBCHUNK ((size_t) 1 << 30)

typedef struct ring {
    uint32_t n, r;
    size_t count, esz, sub_elems;
    uint32_t t0, t1; /* the steps this call runs: [0, 2N-2), or one phase (reduce_ring_params_t.phases) */
    uint32_t div;    /* Avg's divisor at the owner's last combine; 0: no finish */
} ring_t;

/* A position in one lane of one of the two item streams: step t, sub-chunk j of chunk `chunk`.
 * Lane `first` of `stride` lanes holds the sub-chunks j = first, first + stride, ... of every
 * step (one lane: all of them). */
typedef struct cursor {
    uint32_t t, chunk, lag; /* lag: 1 for the send stream, 2 for the receive stream */
    size_t j, nsub, first, stride;
    size_t off, len; /* bytes, of the current item */
} cursor_t;

void reduce_ring_chunk(size_t count, size_t esz, uint32_t n, uint32_t c, size_t *start,
                       size_t *len) {
    size_t base = count / n, rem = count % n;
    *start = ((size_t) c * base + (c < rem ? c : rem)) * esz;
    *len = (base + (c < rem ? 1 : 0)) * esz;
}

size_t reduce_ring_default_subchunk(size_t count, size_t esz, uint32_t n, int quantized) {
    /* Quantized frames keep 256 KiB: the sub-chunk is also the range each code grid spans. */
    if (quantized || n == 0) return REDUCE_RING_DEFAULT_SUBCHUNK;
    /* Plain: about REDUCE_RING_SUBCHUNKS_PER_CHUNK frames per chunk, a power of two within
     * [256 KiB, REDUCE_RING_MAX_AUTO_SUBCHUNK]. Fewer, larger frames cost fewer syscalls and
     * thread wake-ups per byte; enough of them per chunk keep steps pipelined. Every peer
     * derives the same size from (count, dtype, n). */
    size_t chunk = (count / n + (count % n ? 1 : 0)) * esz;
    size_t sub = REDUCE_RING_DEFAULT_SUBCHUNK;
    while (sub < REDUCE_RING_MAX_AUTO_SUBCHUNK && sub * 2 * REDUCE_RING_SUBCHUNKS_PER_CHUNK <= chunk)
        sub *= 2;
    return sub;
}

static uint32_t steps(const ring_t *g) {
    return g->t1;
}

static uint32_t chunk_at(const ring_t *g, uint32_t lag, uint32_t t) {
    return (g->r + 2 * g->n - lag - t) % g->n;
}

static size_t nsub_of(const ring_t *g, uint32_t chunk) {
    size_t start, len;
    reduce_ring_chunk(g->count, g->esz, g->n, chunk, &start, &len);
    size_t elems = len / g->esz;
    return (elems + g->sub_elems - 1) / g->sub_elems;
}

/* Skips empty chunks and fills in the geometry of the current item (if any is left). */
static void cursor_settle(const ring_t *g, cursor_t *cur) {
    while (cur->t < steps(g)) {
        cur->chunk = chunk_at(g, cur->lag, cur->t);
        cur->nsub = nsub_of(g, cur->chunk);
        if (cur->j < cur->nsub) break;
        cur->t++;
        cur->j = cur->first;
    }
    if (cur->t >= steps(g)) return;
    size_t start, len;
    reduce_ring_chunk(g->count, g->esz, g->n, cur->chunk, &start, &len);
    size_t sub_bytes = g->sub_elems * g->esz;
    cur->off = start + cur->j * sub_bytes;
    cur->len = len - cur->j * sub_bytes < sub_bytes ? len - cur->j * sub_bytes : sub_bytes;
}

static void cursor_init(const ring_t *g, cursor_t *cur, uint32_t lag, size_t lane, size_t lanes) {
    memset(cur, 0, sizeof *cur);
    cur->t = g->t0;
    cur->lag = lag;
    cur->j = cur->first = lane;
    cur->stride = lanes;
    cursor_settle(g, cur);
}

static void cursor_next(const ring_t *g, cursor_t *cur) {
    cur->j += cur->stride;
    cursor_settle(g, cur);
}

static int ranges_overlap(const void *a, const void *b, size_t len) {
    uintptr_t x = (uintptr_t) a, y = (uintptr_t) b;
    return x < y + len && y < x + len;
}

static int check_params(const reduce_ring_params_t *p, const void *sendbuf, void *recvbuf,
                        size_t count, pcclDataType_t dtype, pcclRedOp_t op) {
    if (p == NULL || !reduce_dtype_valid(dtype) || !reduce_op_valid(op)) return REDUCE_EINVAL;
    if (reduce_quant_check(dtype, &p->quantization) != REDUCE_OK) return REDUCE_EINVAL;
    if (p->world_size == 0 || p->rank >= p->world_size) return REDUCE_EINVAL;
    size_t esz = reduce_dtype_size(dtype);
    if (count > SIZE_MAX / esz) return REDUCE_EINVAL;
    if (count > 0 && (sendbuf == NULL || recvbuf == NULL)) return REDUCE_EINVAL;
    if (count > 0 && sendbuf != recvbuf && ranges_overlap(sendbuf, recvbuf, count * esz))
        return REDUCE_EINVAL;
    if (p->subchunk_bytes > MAX_SUBCHUNK || p->window > REDUCE_RING_MAX_WINDOW ||
        p->lanes > REDUCE_RING_MAX_LANES || p->phases > REDUCE_RING_GATHER)
        return REDUCE_EINVAL;
    /* One phase alone serves reduce_grid.c, which stages nothing. */
    if (p->phases != REDUCE_RING_BOTH && (p->stage != NULL || p->world_size < 2)) return REDUCE_EINVAL;
    if (p->world_size > 1) {
        if (p->next.ops == NULL || p->prev.ops == NULL || p->cache == NULL ||
            p->doorbell == NULL)
            return REDUCE_EINVAL;
    }
    return REDUCE_OK;
}

/* The quantized path's staging: one cache block carved into receive slots, send slots, the
 * gather buffers (one frame slot per sub-chunk each) and the decode scratch. */
typedef struct qstage {
    int on;
    size_t stride;      /* bytes per frame slot, a multiple of 64 */
    size_t gather_len;  /* bytes per gather buffer: stride * largest sub-chunk count */
    char *rx, *tx, *gather, *scratch;
} qstage_t;

static size_t round64(size_t x) {
    return (x + 63) & ~(size_t) 63;
}

static char *gather_slot(const ring_t *g, const qstage_t *q, uint32_t t, size_t j) {
    return q->gather + ((t - (g->n - 1)) & 1u) * q->gather_len + j * q->stride;
}

/* Of k sub-chunks j = 0 .. k-1, how many lane l of L holds (j mod L = l). */
static uint64_t lane_share(uint64_t k, uint32_t l, uint32_t L) {
    return k > l ? (k - l + L - 1) / L : 0;
}

/* Sends of lane l (counted from the start of its send stream) that must have completed before
 * its all-gather receive at cursor `cur` (step t >= N+1, lane receive number `idx`) may reuse
 * its gather slot: the slot was last filled at step t-2 (or earlier) and forwarded at step t-1,
 * and lane send k >= n0 forwards lane receive k - n0 (n0: the lane's step-0 items). Sends
 * complete in order. */
static uint64_t gather_need(const ring_t *g, const cursor_t *cur, uint64_t idx, uint64_t n0,
                            uint32_t l, uint32_t L) {
    uint64_t k1 = lane_share(nsub_of(g, chunk_at(g, 2, cur->t - 1)), l, L);
    uint64_t k2 = lane_share(nsub_of(g, chunk_at(g, 2, cur->t - 2)), l, L);
    uint64_t jl = (cur->j - l) / L;        /* the lane's items before this one in step t */
    uint64_t base2 = idx - jl - k1 - k2;   /* lane receive number of step t-2's first item */
    uint64_t upto = jl + 1 < k2 ? jl + 1 : k2;
    return n0 + base2 + upto;
}

/* The lane count the ring runs with: `lanes` when the per-stream links are given, else 1. Any
 * shape qualifies: lanes that get no sub-chunk of some chunk simply skip it. */
static uint32_t lanes_for(const reduce_ring_params_t *p) {
    if (p->lanes <= 1 || p->next_lanes == NULL || p->prev_lanes == NULL) return 1;
    return p->lanes;
}

/* One lane: its links, cursors, counters (items of this lane only, counted from 0) and stream
 * lengths (n0: step 0's items; rs_*: the reduce-scatter part). */
typedef struct lane {
    reduce_link_t next, prev;
    int comb; /* prev combines reduce-scatter frames itself (post_recv_combine) */
    cursor_t spost, rpost, rproc;
    uint64_t s_posted, s_retired, r_posted, r_done;
    uint64_t n0, rs_recvs, rs_sends, total_recvs, total_sends;
} lane_t;

/* One call of reduce_ring_allreduce: its plan, staging, requests and progress. It lives on the
 * caller's stack, so the ring allocates nothing but its staging blocks (from the cache). Lane l
 * owns request slots [l * wl, (l + 1) * wl) and staging slots [l * nst, (l + 1) * nst). */
typedef struct run {
    const reduce_ring_params_t *p;
    ring_t g;
    pcclDataType_t dtype;
    pcclRedOp_t op;
    const pcclQuantizationOptions_t *qo;
    const reduce_ring_stage_t *stage;
    const reduce_ring_probe_t *probe;
    const char *in; /* sendbuf: only read */
    char *out;      /* recvbuf */
    uint32_t L, wl; /* lanes; items in flight per direction in each lane, L * wl <= the window */
    uint32_t nst, nst_tx; /* per lane: reduce-scatter receive slots, quantized send slots */
    lane_t lanes[REDUCE_RING_MAX_LANES];
    uint64_t total_sends, total_recvs;
    size_t staging_bytes;
    uint32_t nstaging;
    void *staging[REDUCE_RING_MAX_WINDOW];
    qstage_t q;
    void *qblock;
    reduce_req_t sreq[REDUCE_RING_MAX_WINDOW], rreq[REDUCE_RING_MAX_WINDOW];
    size_t slen[REDUCE_RING_MAX_WINDOW];
    uint64_t tx, rx;
    void *ph[2];    /* the probe's phase handles: 0 reduce-scatter, 1 all-gather */
    int ph_open[2]; /* 0 before, 1 while, 2 after the phase */
    int progressed; /* this loop turn retired, posted or processed something */
} run_t;

/* ---- plan: the geometry, the lanes and their streams ---- */

static void plan(run_t *r, const reduce_ring_params_t *p, const void *sendbuf, void *recvbuf, size_t count,
                 pcclDataType_t dtype, pcclRedOp_t op) {
    size_t esz = reduce_dtype_size(dtype);
    r->p = p;
    r->g = (ring_t){.n = p->world_size, .r = p->rank, .count = count, .esz = esz};
    r->g.t0 = p->phases == REDUCE_RING_GATHER ? r->g.n - 1 : 0;
    r->g.t1 = p->phases == REDUCE_RING_SCATTER ? r->g.n - 1 : 2 * r->g.n - 2;
    r->g.div = p->phases == REDUCE_RING_SCATTER ? 0 : p->avg_divisor ? p->avg_divisor : r->g.n;
    r->dtype = dtype;
    r->op = op;
    r->qo = &p->quantization;
    r->stage = p->stage;
    r->probe = p->probe;
    r->in = sendbuf;
    r->out = recvbuf;
    r->q = (qstage_t){.on = r->qo->algorithm != pcclQuantNone};
    r->qblock = NULL;
    r->nstaging = 0;
    size_t sub_bytes = p->subchunk_bytes ? p->subchunk_bytes
                                         : reduce_ring_default_subchunk(count, esz, r->g.n, r->q.on);
    r->g.sub_elems = sub_bytes / esz ? sub_bytes / esz : 1;
    uint32_t window = p->window ? p->window : REDUCE_RING_DEFAULT_WINDOW;
    r->L = lanes_for(p);
    r->wl = window / r->L ? window / r->L : 1;
}

/* Each lane's links and stream lengths. The send stream is step 0's items followed by the
 * receive stream minus its last step (send k >= n0 forwards receive k - n0); reduce-scatter
 * receives come first in the receive stream. */
static void plan_lanes(run_t *r) {
    const reduce_ring_params_t *p = r->p;
    const ring_t *g = &r->g;
    r->total_sends = r->total_recvs = 0;
    for (uint32_t l = 0; l < r->L; l++) {
        lane_t *ln = &r->lanes[l];
        memset(ln, 0, sizeof *ln);
        ln->next = r->L > 1 ? p->next_lanes[l] : p->next;
        ln->prev = r->L > 1 ? p->prev_lanes[l] : p->prev;
        /* Quantized frames, and staged buffers whose input comes late, keep the staging path. */
        ln->comb = !r->q.on && (r->stage == NULL || r->stage->early_input) &&
                   ln->prev.ops->post_recv_combine != NULL;
        ln->n0 = lane_share(nsub_of(g, chunk_at(g, 1, g->t0)), l, r->L);
        ln->rs_sends = g->t0 == 0 ? ln->n0 : 0;
        uint64_t k = 0;
        for (uint32_t t = g->t0; t < steps(g); t++) {
            k = lane_share(nsub_of(g, chunk_at(g, 2, t)), l, r->L);
            ln->total_recvs += k;
            if (t < g->n - 1) ln->rs_recvs += k;
            if (t + 2 < g->n) ln->rs_sends += k; /* forwarded at step t + 1, still reduce-scatter */
        }
        ln->total_sends = ln->n0 + ln->total_recvs - k;
        r->total_sends += ln->total_sends;
        r->total_recvs += ln->total_recvs;
    }
    /* Lane 0 holds the most items: its counts bound every lane's slots. */
    r->nst = r->lanes[0].rs_recvs < r->wl ? (uint32_t) r->lanes[0].rs_recvs : r->wl;
    r->nst_tx = r->lanes[0].n0 + r->lanes[0].rs_recvs < r->wl ? (uint32_t) (r->lanes[0].n0 + r->lanes[0].rs_recvs)
                                                              : r->wl;
}

/* The staging: one block per reduce-scatter receive slot of a lane whose link does not combine
 * (nst per lane); or, quantized, the one block of qstage_t. Nothing is held on failure. */
static int stage_alloc(run_t *r) {
    size_t count = r->g.count, n = r->g.n, esz = r->g.esz;
    size_t max_chunk_elems = count / n + (count % n ? 1 : 0);
    size_t max_sub_elems = r->g.sub_elems < max_chunk_elems ? r->g.sub_elems : max_chunk_elems;
    r->staging_bytes = max_sub_elems * esz;
    if (!r->q.on) {
        r->nstaging = r->L * r->nst;
        for (uint32_t i = 0; i < r->nstaging; i++) {
            int comb = r->lanes[i / r->nst].comb;
            r->staging[i] = comb ? NULL : reduce_cache_alloc(r->p->cache, r->staging_bytes);
            if (r->staging[i] == NULL && !comb) {
                for (uint32_t k = 0; k < i; k++) reduce_cache_free(r->p->cache, r->staging[k]);
                r->nstaging = 0;
                return REDUCE_ENOMEM;
            }
        }
        return REDUCE_OK;
    }
    qstage_t *q = &r->q;
    uint64_t nrx = (uint64_t) r->L * r->nst, ntx = (uint64_t) r->L * r->nst_tx;
    uint64_t nsub_max = (max_chunk_elems + r->g.sub_elems - 1) / r->g.sub_elems;
    q->stride = round64(reduce_quant_frame_bytes(r->dtype, r->qo, max_sub_elems));
    size_t ngather = n - 1 >= 2 ? 2 : 1;
    size_t total = (size_t) (nrx + ntx) * q->stride;
    if (nsub_max > (SIZE_MAX / 4 - total) / ngather / q->stride) return REDUCE_ENOMEM;
    q->gather_len = (size_t) nsub_max * q->stride;
    total += ngather * q->gather_len;
    size_t off_tx = (size_t) nrx * q->stride, off_gather = (size_t) (nrx + ntx) * q->stride;
    size_t off_scratch = total;
    total += round64(r->staging_bytes);
    r->qblock = reduce_cache_alloc(r->p->cache, total);
    if (r->qblock == NULL) return REDUCE_ENOMEM;
    q->rx = r->qblock;
    q->tx = (char *) r->qblock + off_tx;
    q->gather = (char *) r->qblock + off_gather;
    q->scratch = (char *) r->qblock + off_scratch;
    return REDUCE_OK;
}

static void start(run_t *r) {
    for (uint32_t l = 0; l < r->L; l++) {
        lane_t *ln = &r->lanes[l];
        cursor_init(&r->g, &ln->spost, 1, l, r->L);
        cursor_init(&r->g, &ln->rpost, 2, l, r->L);
        cursor_init(&r->g, &ln->rproc, 2, l, r->L);
    }
    r->tx = r->rx = 0;
    r->ph[0] = r->ph[1] = NULL;
    r->ph_open[0] = r->ph_open[1] = 0;
    if (r->probe != NULL) {
        r->ph[0] = r->probe->begin(r->probe->ctx, 0);
        r->ph_open[0] = 1;
    }
}

/* The trace parent of a request of the phase; the all-gather phase opens with its first one. */
static void *phase_trace(run_t *r, int gather) {
    if (r->probe != NULL && gather && r->ph_open[1] == 0) {
        r->ph[1] = r->probe->begin(r->probe->ctx, 1);
        r->ph_open[1] = 1;
    }
    return r->ph[gather];
}

/* ---- post: sends and receives, in stream order, within the lane's window ---- */

/* Completed sends leave the window in posting order (a link completes them in order). */
static int retire_sends(run_t *r, lane_t *ln, uint32_t lw) {
    while (ln->s_retired < ln->s_posted) {
        uint32_t st = atomic_load(&r->sreq[lw + ln->s_retired % r->wl].state);
        if (st == REDUCE_REQ_PENDING) break;
        if (st != REDUCE_REQ_DONE) return REDUCE_ELINK;
        r->tx += r->slen[lw + ln->s_retired % r->wl];
        ln->s_retired++;
        r->progressed = 1;
    }
    return REDUCE_OK;
}

/* Where receive `c` lands and how long its frame is, or NULL when it must wait. Plain: an
 * all-gather receive goes straight into recvbuf, but only once the send that read the same
 * bytes retired (all-gather receive i covers exactly the bytes of send i); a reduce-scatter one
 * into a staging slot, or into recvbuf when the link combines. Quantized: into a receive slot,
 * or a gather slot once the send that forwarded that slot two steps earlier retired. */
static void *recv_dst(run_t *r, const lane_t *ln, uint32_t l, const cursor_t *c, size_t *len) {
    int gather = c->t >= r->g.n - 1;
    if (!r->q.on) {
        /* All-gather alone: no send reads a chunk before it was received. */
        if (gather && r->g.t0 == 0 && ln->r_posted - ln->rs_recvs >= ln->s_retired) return NULL;
        *len = c->len;
        return gather || ln->comb ? (void *) (r->out + c->off) : r->staging[l * r->nst + ln->r_posted % r->wl];
    }
    if (c->t >= r->g.n + 1 && ln->s_retired < gather_need(&r->g, c, ln->r_posted, ln->n0, l, r->L)) return NULL;
    *len = reduce_quant_frame_bytes(r->dtype, r->qo, c->len / r->g.esz);
    return gather ? gather_slot(&r->g, &r->q, c->t, c->j) : r->q.rx + (l * r->nst + ln->r_posted % r->wl) * r->q.stride;
}

/* Receives are posted ahead of the frames, up to wl outstanding, in receive-stream order: the
 * link matches frames to receives in posting order, and the previous peer sends in that order. */
static int post_recvs(run_t *r, lane_t *ln, uint32_t l) {
    const reduce_ring_params_t *p = r->p;
    while (ln->r_posted < ln->total_recvs && ln->r_posted - ln->r_done < r->wl) {
        const cursor_t *c = &ln->rpost;
        int gather = c->t >= r->g.n - 1;
        size_t len;
        void *dst = recv_dst(r, ln, l, c, &len);
        if (dst == NULL) break;
        /* The link combines against sendbuf as the frame lands: stage it first. */
        if (ln->comb && !gather && r->stage != NULL && r->stage->input(r->stage->ctx, c->off, len) != 0)
            return REDUCE_ESTAGE;
        reduce_req_t *rq = &r->rreq[l * r->wl + ln->r_posted % r->wl];
        atomic_store(&rq->state, REDUCE_REQ_PENDING);
        rq->doorbell = p->doorbell;
        rq->flags = 0;
        rq->trace = phase_trace(r, gather);
        rq->stream = (uint32_t) c->j;
        int prc = ln->comb && !gather
                      ? ln->prev.ops->post_recv_combine(ln->prev.ctx, p->tag, c->off, r->out + c->off, r->in + c->off,
                                                        len, r->dtype, r->op, rq)
                      : ln->prev.ops->post_recv(ln->prev.ctx, p->tag, c->off, dst, len, rq);
        if (prc != 0) return REDUCE_ELINK;
        ln->r_posted++;
        cursor_next(&r->g, &ln->rpost);
        r->progressed = 1;
    }
    return REDUCE_OK;
}

/* A quantized send's frame: steps 0 .. N-1 encode at post time into a send slot (step 0 from
 * sendbuf, later reduce-scatter steps the partial in recvbuf, step N-1 the owner's finished
 * chunk, which the owner then decodes back over its own copy so that it keeps exactly what
 * every other peer decodes); later all-gather steps forward the gather slot as received. */
static int quant_frame(run_t *r, const lane_t *ln, uint32_t l, const cursor_t *c, const void **src) {
    const uint32_t n = r->g.n;
    size_t elems = c->len / r->g.esz;
    if (c->t >= n) {
        *src = gather_slot(&r->g, &r->q, c->t - 1, c->j);
        return REDUCE_OK;
    }
    char *f = r->q.tx + (l * r->nst_tx + ln->s_posted % r->wl) * r->q.stride;
    reduce_quant_encode(r->dtype, r->qo, f, c->t == 0 ? r->in + c->off : r->out + c->off, elems);
    if (c->t == n - 1) {
        reduce_quant_decode(r->dtype, r->qo, r->out + c->off, f, elems);
        if (r->stage != NULL && r->stage->output(r->stage->ctx, c->off, c->len) != 0) return REDUCE_ESTAGE;
    }
    *src = f;
    return REDUCE_OK;
}

/* Sends are posted in send-stream order, up to wl outstanding; send k >= n0 forwards receive
 * k - n0 (same chunk and sub-chunk, one step later), so it waits until that one is processed. */
static int post_sends(run_t *r, lane_t *ln, uint32_t l) {
    const reduce_ring_params_t *p = r->p;
    while (ln->s_posted < ln->total_sends && ln->s_posted - ln->s_retired < r->wl) {
        if (ln->s_posted >= ln->n0 && ln->s_posted - ln->n0 >= ln->r_done) break;
        const cursor_t *c = &ln->spost;
        if (r->stage != NULL && c->t == 0 && r->stage->input(r->stage->ctx, c->off, c->len) != 0)
            return REDUCE_ESTAGE;
        const void *src;
        size_t len;
        if (!r->q.on) {
            src = c->t == 0 ? (const void *) (r->in + c->off) : (const void *) (r->out + c->off);
            len = c->len;
        } else {
            len = reduce_quant_frame_bytes(r->dtype, r->qo, c->len / r->g.esz);
            int rc = quant_frame(r, ln, l, c, &src);
            if (rc != REDUCE_OK) return rc;
        }
        uint32_t slot = l * r->wl + ln->s_posted % r->wl;
        reduce_req_t *sq = &r->sreq[slot];
        atomic_store(&sq->state, REDUCE_REQ_PENDING);
        sq->doorbell = p->doorbell;
        /* Plain sends read the caller's buffers, and the ring overwrites sent bytes only with the
         * all-gather of the same range, which reaches us after `next` has read them (the chunk
         * went round the ring through `next` first): by reference is safe as long as the caller
         * leaves the buffers alone until every peer has finished. Quantized frames live in slots
         * the ring reuses, so they are copied. */
        sq->flags = p->send_by_reference && !r->q.on ? REDUCE_SEND_BY_REFERENCE : 0;
        r->slen[slot] = len;
        sq->trace = phase_trace(r, ln->s_posted >= ln->rs_sends);
        sq->stream = (uint32_t) c->j;
        if (ln->next.ops->post_send(ln->next.ctx, p->tag, c->off, src, len, sq) != 0) return REDUCE_ELINK;
        ln->s_posted++;
        cursor_next(&r->g, &ln->spost);
        r->progressed = 1;
    }
    return REDUCE_OK;
}

/* ---- progress: one received sub-chunk at a time, in receive order ---- */

static int decode_frame(run_t *r, void *dst, const void *f, const cursor_t *c) {
    size_t elems = c->len / r->g.esz;
    if (reduce_quant_decode(r->dtype, r->qo, dst, f, elems) == REDUCE_OK) return REDUCE_OK;
    LOG_ERROR("reduce", "ring tag %llu rank %u/%u: malformed quantized frame at offset %zu (header does not match %zu "
              "elements of dtype %d)",
              (unsigned long long) r->p->tag, r->p->rank, r->g.n, c->off, elems, (int) r->dtype);
    return REDUCE_ELINK;
}

/* Reduce-scatter: recvbuf = received OP sendbuf over the sub-chunk (the received bytes are the
 * accumulator), unless the link already combined it as it landed. The partial stays in recvbuf
 * until the next step forwards it. */
static int reduce_scatter_recv(run_t *r, lane_t *ln, uint32_t l, const cursor_t *c) {
    size_t elems = c->len / r->g.esz;
    if (r->stage != NULL && !ln->comb && r->stage->input(r->stage->ctx, c->off, c->len) != 0) return REDUCE_ESTAGE;
    if (!r->q.on) {
        if (!ln->comb) {
            const void *landed = r->staging[l * r->nst + ln->r_done % r->wl];
            reduce_combine(r->dtype, r->op, r->out + c->off, landed, r->in + c->off, elems);
        }
        r->rx += c->len;
        return REDUCE_OK;
    }
    int rc = decode_frame(r, r->q.scratch, r->q.rx + (l * r->nst + ln->r_done % r->wl) * r->q.stride, c);
    if (rc != REDUCE_OK) return rc;
    reduce_combine(r->dtype, r->op, r->out + c->off, r->q.scratch, r->in + c->off, elems);
    r->rx += reduce_quant_frame_bytes(r->dtype, r->qo, elems);
    return REDUCE_OK;
}

/* All-gather: the finished bytes are in recvbuf already (plain), or decoded there from the
 * gather slot (quantized), which the next step forwards as it is. */
static int all_gather_recv(run_t *r, const cursor_t *c) {
    if (!r->q.on) {
        r->rx += c->len;
        return REDUCE_OK;
    }
    int rc = decode_frame(r, r->out + c->off, gather_slot(&r->g, &r->q, c->t, c->j), c);
    if (rc == REDUCE_OK) r->rx += reduce_quant_frame_bytes(r->dtype, r->qo, c->len / r->g.esz);
    return rc;
}

/* Processes the lane's oldest receive if it completed (*got = 1). At step N-2 the chunk is the
 * owner's and complete: the Avg division runs right after its last combine, so the all-gather
 * spreads finished, identical bytes. */
static int process_recv(run_t *r, lane_t *ln, uint32_t l, int *got) {
    *got = 0;
    if (ln->r_done >= ln->r_posted) return REDUCE_OK;
    uint32_t st = atomic_load(&r->rreq[l * r->wl + ln->r_done % r->wl].state);
    if (st == REDUCE_REQ_FAILED) return REDUCE_ELINK;
    if (st != REDUCE_REQ_DONE) return REDUCE_OK;
    const cursor_t *c = &ln->rproc;
    const uint32_t n = r->g.n;
    int rc = c->t < n - 1 ? reduce_scatter_recv(r, ln, l, c) : all_gather_recv(r, c);
    if (rc != REDUCE_OK) return rc;
    if (c->t == n - 2 && r->g.div != 0) reduce_finish(r->dtype, r->op, r->out + c->off, c->len / r->g.esz, r->g.div);
    /* Final bytes: the owner's chunk after its finish (quantized: once it is decoded back at its
     * send), every other chunk as the gather delivers it. Lanes report their own sub-chunks, so
     * ranges come out of offset order. */
    if (r->stage != NULL && (c->t >= n - 1 || (c->t == n - 2 && !r->q.on)) &&
        r->stage->output(r->stage->ctx, c->off, c->len) != 0)
        return REDUCE_ESTAGE;
    ln->r_done++;
    cursor_next(&r->g, &ln->rproc);
    r->progressed = *got = 1;
    return REDUCE_OK;
}

/* One lane's share of a loop turn: retire, post, process one receive; after a receive, retire
 * and post again at once, so that the send it unblocked goes out before the other lanes'
 * reduces of this turn (the next peer waits for it). */
static int lane_turn(run_t *r, uint32_t l) {
    lane_t *ln = &r->lanes[l];
    for (int reduced = 0;; reduced = 1) {
        int rc = retire_sends(r, ln, l * r->wl);
        if (rc == REDUCE_OK) rc = post_recvs(r, ln, l);
        if (rc == REDUCE_OK) rc = post_sends(r, ln, l);
        if (rc != REDUCE_OK || reduced) return rc;
        int got;
        rc = process_recv(r, ln, l, &got);
        if (rc != REDUCE_OK || !got) return rc;
    }
}

/* Loop turns until every lane's streams are through, the abort flag rises or a link fails;
 * sleeps on the doorbell when a turn moved nothing. */
static int progress(run_t *r) {
    const reduce_ring_params_t *p = r->p;
    const uint32_t poll_us = p->poll_us ? p->poll_us : REDUCE_RING_DEFAULT_POLL_US;
    for (;;) {
        if (p->abort_flag != NULL && atomic_load_explicit(p->abort_flag, memory_order_acquire) != 0)
            return REDUCE_EABORTED;
        uint32_t seen = atomic_load(p->doorbell);
        int rs_left = 0, left = 0;
        r->progressed = 0;
        for (uint32_t l = 0; l < r->L; l++) {
            int rc = lane_turn(r, l);
            if (rc != REDUCE_OK) return rc;
            const lane_t *ln = &r->lanes[l];
            rs_left |= ln->s_retired < ln->rs_sends || ln->r_done < ln->rs_recvs;
            left |= ln->s_retired < ln->total_sends || ln->r_done < ln->total_recvs;
        }
        if (r->probe != NULL && r->ph_open[0] == 1 && !rs_left) {
            r->probe->end(r->probe->ctx, 0, REDUCE_OK);
            r->ph_open[0] = 2;
        }
        if (!left) return REDUCE_OK;
        if (!r->progressed) p->prev.ops->wait(p->prev.ctx, p->doorbell, seen, poll_us);
    }
}

/* ---- finish ---- */

/* Cancels what a failed ring left with the links, closes the probe's phases, frees the staging.
 * Nothing may touch our buffers, staging blocks or request structs after we return. */
static void finish(run_t *r, int rc) {
    const reduce_ring_params_t *p = r->p;
    if (rc != REDUCE_OK) {
        /* next and prev cancel on every stream of their lanes. */
        p->next.ops->cancel(p->next.ctx, p->tag);
        p->prev.ops->cancel(p->prev.ctx, p->tag);
        uint64_t sr = 0, rd = 0;
        for (uint32_t l = 0; l < r->L; l++) {
            sr += r->lanes[l].s_retired;
            rd += r->lanes[l].r_done;
        }
        LOG_DEBUG("reduce", "ring tag %llu rank %u/%u: %s after %llu/%llu sends, %llu/%llu receives (%u lanes)",
                  (unsigned long long) p->tag, p->rank, r->g.n, reduce_strerror(rc), (unsigned long long) sr,
                  (unsigned long long) r->total_sends, (unsigned long long) rd, (unsigned long long) r->total_recvs,
                  r->L);
    }
    /* After the cancels: no request of the ring is in a link's hands any more. */
    for (int k = 0; k < 2; k++)
        if (r->ph_open[k] == 1) r->probe->end(r->probe->ctx, k, rc);
    for (uint32_t i = 0; i < r->nstaging; i++) reduce_cache_free(p->cache, r->staging[i]);
    reduce_cache_free(p->cache, r->qblock);
}

/* A ring of one: the result is the input, staged in and out like any other. */
static int ring_of_one(const reduce_ring_stage_t *stage, const void *sendbuf, void *recvbuf, size_t bytes) {
    if (stage != NULL && stage->input(stage->ctx, 0, bytes) != 0) return REDUCE_ESTAGE;
    if (sendbuf != recvbuf) memcpy(recvbuf, sendbuf, bytes);
    if (stage != NULL && stage->output(stage->ctx, 0, bytes) != 0) return REDUCE_ESTAGE;
    return REDUCE_OK;
}

int reduce_ring_allreduce(const reduce_ring_params_t *p, const void *sendbuf, void *recvbuf,
                          size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                          reduce_ring_stats_t *stats) {
    if (stats != NULL) memset(stats, 0, sizeof *stats);
    int rc = check_params(p, sendbuf, recvbuf, count, dtype, op);
    if (rc != REDUCE_OK || count == 0) return rc;
    if (p->world_size == 1) return ring_of_one(p->stage, sendbuf, recvbuf, count * reduce_dtype_size(dtype));
    run_t r;
    plan(&r, p, sendbuf, recvbuf, count, dtype, op);
    plan_lanes(&r);
    rc = stage_alloc(&r);
    if (rc != REDUCE_OK) return rc;
    start(&r);
    rc = progress(&r);
    finish(&r, rc);
    if (stats != NULL) {
        stats->tx_bytes = r.tx;
        stats->rx_bytes = r.rx;
    }
    return rc;
}
