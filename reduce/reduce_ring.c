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
    return 2 * g->n - 2;
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
        p->lanes > REDUCE_RING_MAX_LANES)
        return REDUCE_EINVAL;
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

int reduce_ring_allreduce(const reduce_ring_params_t *p, const void *sendbuf, void *recvbuf,
                          size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                          reduce_ring_stats_t *stats) {
    if (stats != NULL) memset(stats, 0, sizeof *stats);
    int rc = check_params(p, sendbuf, recvbuf, count, dtype, op);
    if (rc != REDUCE_OK) return rc;
    size_t esz = reduce_dtype_size(dtype);
    if (count == 0) return REDUCE_OK;
    const reduce_ring_stage_t *stage = p->stage;
    if (p->world_size == 1) {
        if (stage != NULL && stage->input(stage->ctx, 0, count * esz) != 0) return REDUCE_ESTAGE;
        if (sendbuf != recvbuf) memcpy(recvbuf, sendbuf, count * esz);
        if (stage != NULL && stage->output(stage->ctx, 0, count * esz) != 0) return REDUCE_ESTAGE;
        return REDUCE_OK;
    }

    ring_t g = { .n = p->world_size, .r = p->rank, .count = count, .esz = esz };
    const pcclQuantizationOptions_t *qo = &p->quantization;
    int q_on = qo->algorithm != pcclQuantNone;
    size_t sub_bytes = p->subchunk_bytes ? p->subchunk_bytes
                                         : reduce_ring_default_subchunk(count, esz, g.n, q_on);
    g.sub_elems = sub_bytes / esz ? sub_bytes / esz : 1;
    uint32_t window = p->window ? p->window : REDUCE_RING_DEFAULT_WINDOW;
    uint32_t poll_us = p->poll_us ? p->poll_us : REDUCE_RING_DEFAULT_POLL_US;
    const uint32_t n = g.n;
    char *const out = recvbuf;
    const char *const in = sendbuf;
    /* L lanes of wl items in flight per direction each; L * wl <= REDUCE_RING_MAX_WINDOW. */
    const uint32_t L = lanes_for(p);
    const uint32_t wl = window / L ? window / L : 1;

    /* Stream lengths, per lane: the send stream is step 0's items followed by the receive
     * stream minus its last step; reduce-scatter receives come first in the receive stream. */
    lane_t lanes[REDUCE_RING_MAX_LANES];
    uint64_t total_sends = 0, total_recvs = 0;
    for (uint32_t l = 0; l < L; l++) {
        lane_t *ln = &lanes[l];
        memset(ln, 0, sizeof *ln);
        ln->next = L > 1 ? p->next_lanes[l] : p->next;
        ln->prev = L > 1 ? p->prev_lanes[l] : p->prev;
        /* Quantized frames, and staged buffers whose input comes late, keep the staging path. */
        ln->comb = !q_on && (stage == NULL || stage->early_input) && ln->prev.ops->post_recv_combine != NULL;
        ln->n0 = ln->rs_sends = lane_share(nsub_of(&g, chunk_at(&g, 1, 0)), l, L);
        uint64_t k = 0;
        for (uint32_t t = 0; t < steps(&g); t++) {
            k = lane_share(nsub_of(&g, chunk_at(&g, 2, t)), l, L);
            ln->total_recvs += k;
            if (t < n - 1) ln->rs_recvs += k;
            if (t + 2 < n) ln->rs_sends += k; /* forwarded at step t + 1, still reduce-scatter */
        }
        ln->total_sends = ln->n0 + ln->total_recvs - k;
        total_sends += ln->total_sends;
        total_recvs += ln->total_recvs;
    }

    /* Staging blocks for reduce-scatter receives, one per window slot that can hold one (nst
     * per lane, lane l's at [l * nst, (l + 1) * nst); lane 0 holds the most items); or,
     * quantized, the one block of qstage_t. */
    size_t max_chunk_elems = count / n + (count % n ? 1 : 0);
    size_t max_sub_elems = g.sub_elems < max_chunk_elems ? g.sub_elems : max_chunk_elems;
    size_t staging_bytes = max_sub_elems * esz;
    uint32_t nstaging = 0;
    const uint32_t nst = lanes[0].rs_recvs < wl ? (uint32_t) lanes[0].rs_recvs : wl;
    const uint32_t nst_tx = lanes[0].n0 + lanes[0].rs_recvs < wl ? (uint32_t) (lanes[0].n0 + lanes[0].rs_recvs) : wl;
    void *staging[REDUCE_RING_MAX_WINDOW];
    reduce_req_t sreq[REDUCE_RING_MAX_WINDOW], rreq[REDUCE_RING_MAX_WINDOW];
    size_t slen[REDUCE_RING_MAX_WINDOW];
    qstage_t q = { .on = q_on };
    void *qblock = NULL;
    if (q.on) {
        uint64_t nrx = (uint64_t) L * nst, ntx = (uint64_t) L * nst_tx;
        uint64_t nsub_max = (max_chunk_elems + g.sub_elems - 1) / g.sub_elems;
        q.stride = round64(reduce_quant_frame_bytes(dtype, qo, max_sub_elems));
        size_t ngather = n - 1 >= 2 ? 2 : 1;
        size_t total = (size_t) (nrx + ntx) * q.stride;
        if (nsub_max > (SIZE_MAX / 4 - total) / ngather / q.stride) return REDUCE_ENOMEM;
        q.gather_len = (size_t) nsub_max * q.stride;
        total += ngather * q.gather_len;
        size_t off_tx = (size_t) nrx * q.stride, off_gather = (size_t) (nrx + ntx) * q.stride;
        size_t off_scratch = total;
        total += round64(staging_bytes);
        qblock = reduce_cache_alloc(p->cache, total);
        if (qblock == NULL) return REDUCE_ENOMEM;
        q.rx = qblock;
        q.tx = (char *) qblock + off_tx;
        q.gather = (char *) qblock + off_gather;
        q.scratch = (char *) qblock + off_scratch;
    } else {
        nstaging = L * nst;
        for (uint32_t i = 0; i < nstaging; i++) {
            staging[i] = lanes[i / nst].comb ? NULL : reduce_cache_alloc(p->cache, staging_bytes);
            if (staging[i] == NULL && !lanes[i / nst].comb) {
                for (uint32_t k = 0; k < i; k++) reduce_cache_free(p->cache, staging[k]);
                return REDUCE_ENOMEM;
            }
        }
    }

    for (uint32_t l = 0; l < L; l++) {
        lane_t *ln = &lanes[l];
        cursor_init(&g, &ln->spost, 1, l, L);
        cursor_init(&g, &ln->rpost, 2, l, L);
        cursor_init(&g, &ln->rproc, 2, l, L);
    }
    uint64_t tx = 0, rx = 0;
    /* Profiling: phase handles; ph_open[k]: 0 before, 1 while, 2 after the phase. */
    const reduce_ring_probe_t *probe = p->probe;
    void *ph[2] = {NULL, NULL};
    int ph_open[2] = {0, 0};
    if (probe != NULL) {
        ph[0] = probe->begin(probe->ctx, 0);
        ph_open[0] = 1;
    }

    for (;;) {
        if (p->abort_flag != NULL &&
            atomic_load_explicit(p->abort_flag, memory_order_acquire) != 0) {
            rc = REDUCE_EABORTED;
            break;
        }
        uint32_t seen = atomic_load(p->doorbell);
        int progressed = 0, rs_left = 0, left = 0;

        for (uint32_t l = 0; l < L; l++) {
            lane_t *ln = &lanes[l];
            const uint32_t lw = l * wl; /* this lane's request slots: [lw, lw + wl) */
            int reduced = 0;
        lane_turn:
            while (ln->s_retired < ln->s_posted) {
                uint32_t st = atomic_load(&sreq[lw + ln->s_retired % wl].state);
                if (st == REDUCE_REQ_PENDING) break;
                if (st != REDUCE_REQ_DONE) {
                    rc = REDUCE_ELINK;
                    goto out;
                }
                tx += slen[lw + ln->s_retired % wl];
                ln->s_retired++;
                progressed = 1;
            }

            while (ln->r_posted < ln->total_recvs && ln->r_posted - ln->r_done < wl) {
                const cursor_t *rpost = &ln->rpost;
                int gather = rpost->t >= n - 1;
                void *dst;
                size_t len;
                if (!q.on) {
                    /* All-gather receive i covers the bytes of send i (same chunk and j). */
                    if (gather && ln->r_posted - ln->rs_recvs >= ln->s_retired) break;
                    dst = gather || ln->comb ? (void *) (out + rpost->off) : staging[l * nst + ln->r_posted % wl];
                    len = rpost->len;
                } else {
                    if (rpost->t >= n + 1) {
                        if (ln->s_retired < gather_need(&g, rpost, ln->r_posted, ln->n0, l, L)) break;
                    }
                    dst = gather ? gather_slot(&g, &q, rpost->t, rpost->j)
                                 : q.rx + (l * nst + ln->r_posted % wl) * q.stride;
                    len = reduce_quant_frame_bytes(dtype, qo, rpost->len / esz);
                }
                /* The link combines against sendbuf as the frame lands: stage it first. */
                if (ln->comb && !gather && stage != NULL && stage->input(stage->ctx, rpost->off, len) != 0) {
                    rc = REDUCE_ESTAGE;
                    goto out;
                }
                reduce_req_t *rq = &rreq[lw + ln->r_posted % wl];
                atomic_store(&rq->state, REDUCE_REQ_PENDING);
                rq->doorbell = p->doorbell;
                rq->flags = 0;
                if (probe != NULL && gather && ph_open[1] == 0) {
                    ph[1] = probe->begin(probe->ctx, 1);
                    ph_open[1] = 1;
                }
                rq->trace = ph[gather];
                rq->stream = (uint32_t) rpost->j;
                int prc = ln->comb && !gather
                              ? ln->prev.ops->post_recv_combine(ln->prev.ctx, p->tag, rpost->off, out + rpost->off,
                                                                in + rpost->off, len, dtype, op, rq)
                              : ln->prev.ops->post_recv(ln->prev.ctx, p->tag, rpost->off, dst, len, rq);
                if (prc != 0) {
                    rc = REDUCE_ELINK;
                    goto out;
                }
                ln->r_posted++;
                cursor_next(&g, &ln->rpost);
                progressed = 1;
            }

            while (ln->s_posted < ln->total_sends && ln->s_posted - ln->s_retired < wl) {
                /* Send k >= n0 forwards receive k - n0 (same chunk and j, one step later). */
                if (ln->s_posted >= ln->n0 && ln->s_posted - ln->n0 >= ln->r_done) break;
                const cursor_t *spost = &ln->spost;
                if (stage != NULL && spost->t == 0 &&
                    stage->input(stage->ctx, spost->off, spost->len) != 0) {
                    rc = REDUCE_ESTAGE;
                    goto out;
                }
                const void *src;
                size_t len;
                if (!q.on) {
                    src = spost->t == 0 ? (const void *) (in + spost->off)
                                        : (const void *) (out + spost->off);
                    len = spost->len;
                } else {
                    size_t elems = spost->len / esz;
                    len = reduce_quant_frame_bytes(dtype, qo, elems);
                    if (spost->t >= n) {
                        src = gather_slot(&g, &q, spost->t - 1, spost->j); /* forward as received */
                    } else {
                        char *f = q.tx + (l * nst_tx + ln->s_posted % wl) * q.stride;
                        reduce_quant_encode(dtype, qo, f,
                                            spost->t == 0 ? in + spost->off : out + spost->off, elems);
                        /* The owner keeps exactly what every other peer will decode. */
                        if (spost->t == n - 1) {
                            reduce_quant_decode(dtype, qo, out + spost->off, f, elems);
                            if (stage != NULL &&
                                stage->output(stage->ctx, spost->off, spost->len) != 0) {
                                rc = REDUCE_ESTAGE;
                                goto out;
                            }
                        }
                        src = f;
                    }
                }
                reduce_req_t *sq = &sreq[lw + ln->s_posted % wl];
                atomic_store(&sq->state, REDUCE_REQ_PENDING);
                sq->doorbell = p->doorbell;
                /* Plain sends read the caller's buffers, and the ring overwrites sent bytes only
                 * with the all-gather of the same range, which reaches us after `next` has read
                 * them (the chunk went round the ring through `next` first): by reference is safe
                 * as long as the caller leaves the buffers alone until every peer has finished.
                 * Quantized frames live in slots the ring reuses, so they are copied. */
                sq->flags = p->send_by_reference && !q.on ? REDUCE_SEND_BY_REFERENCE : 0;
                slen[lw + ln->s_posted % wl] = len;
                int sgather = ln->s_posted >= ln->rs_sends;
                if (probe != NULL && sgather && ph_open[1] == 0) {
                    ph[1] = probe->begin(probe->ctx, 1);
                    ph_open[1] = 1;
                }
                sq->trace = ph[sgather];
                sq->stream = (uint32_t) spost->j;
                if (ln->next.ops->post_send(ln->next.ctx, p->tag, spost->off, src, len, sq) != 0) {
                    rc = REDUCE_ELINK;
                    goto out;
                }
                ln->s_posted++;
                cursor_next(&g, &ln->spost);
                progressed = 1;
            }

            if (!reduced && ln->r_done < ln->r_posted) {
                uint32_t st = atomic_load(&rreq[lw + ln->r_done % wl].state);
                if (st == REDUCE_REQ_FAILED) {
                    rc = REDUCE_ELINK;
                    goto out;
                }
                if (st == REDUCE_REQ_DONE) {
                    const cursor_t *rproc = &ln->rproc;
                    size_t elems = rproc->len / esz;
                    if (stage != NULL && rproc->t < n - 1 && !ln->comb &&
                        stage->input(stage->ctx, rproc->off, rproc->len) != 0) {
                        rc = REDUCE_ESTAGE;
                        goto out;
                    }
                    if (!q.on) {
                        if (rproc->t < n - 1 && !ln->comb) /* else the link combined it */
                            reduce_combine(dtype, op, out + rproc->off,
                                           staging[l * nst + ln->r_done % wl], in + rproc->off, elems);
                        rx += rproc->len;
                    } else {
                        int gather = rproc->t >= n - 1;
                        const void *f = gather ? gather_slot(&g, &q, rproc->t, rproc->j)
                                               : q.rx + (l * nst + ln->r_done % wl) * q.stride;
                        if (reduce_quant_decode(dtype, qo, gather ? out + rproc->off : q.scratch, f,
                                                elems) != REDUCE_OK) {
                            LOG_ERROR("reduce", "ring tag %llu rank %u/%u: malformed quantized frame "
                                      "at offset %zu (header does not match %zu elements of dtype %d)",
                                      (unsigned long long) p->tag, p->rank, n, rproc->off, elems,
                                      (int) dtype);
                            rc = REDUCE_ELINK;
                            goto out;
                        }
                        if (!gather)
                            reduce_combine(dtype, op, out + rproc->off, q.scratch, in + rproc->off,
                                           elems);
                        rx += reduce_quant_frame_bytes(dtype, qo, elems);
                    }
                    if (rproc->t == n - 2) reduce_finish(dtype, op, out + rproc->off, elems, n);
                    /* Final bytes: the owner's chunk after its finish (quantized: once it is
                     * decoded back at its send, above), every other chunk as the gather delivers
                     * it. Lanes report their own sub-chunks, so ranges come out of offset order. */
                    if (stage != NULL && (rproc->t >= n - 1 || (rproc->t == n - 2 && !q.on)) &&
                        stage->output(stage->ctx, rproc->off, rproc->len) != 0) {
                        rc = REDUCE_ESTAGE;
                        goto out;
                    }
                    ln->r_done++;
                    cursor_next(&g, &ln->rproc);
                    progressed = reduced = 1;
                    /* Post the send this reduce unblocked now, not after the other lanes'
                     * reduces of this turn: the next peer waits for it. */
                    goto lane_turn;
                }
            }

            rs_left |= ln->s_retired < ln->rs_sends || ln->r_done < ln->rs_recvs;
            left |= ln->s_retired < ln->total_sends || ln->r_done < ln->total_recvs;
        }

        if (probe != NULL && ph_open[0] == 1 && !rs_left) {
            probe->end(probe->ctx, 0, REDUCE_OK);
            ph_open[0] = 2;
        }
        if (!left) break;
        if (!progressed) p->prev.ops->wait(p->prev.ctx, p->doorbell, seen, poll_us);
    }

out:
    if (rc != REDUCE_OK) {
        /* Nothing may touch our buffers, staging blocks or request structs after we return.
         * next and prev cancel on every stream of their lanes. */
        p->next.ops->cancel(p->next.ctx, p->tag);
        p->prev.ops->cancel(p->prev.ctx, p->tag);
        uint64_t sr = 0, rd = 0;
        for (uint32_t l = 0; l < L; l++) {
            sr += lanes[l].s_retired;
            rd += lanes[l].r_done;
        }
        LOG_DEBUG("reduce", "ring tag %llu rank %u/%u: %s after %llu/%llu sends, %llu/%llu receives "
                  "(%u lanes)", (unsigned long long) p->tag, p->rank, n, reduce_strerror(rc),
                  (unsigned long long) sr, (unsigned long long) total_sends,
                  (unsigned long long) rd, (unsigned long long) total_recvs, L);
    }
    /* After the cancels: no request of the ring is in a link's hands any more. */
    for (int k = 0; k < 2; k++)
        if (ph_open[k] == 1) probe->end(probe->ctx, k, rc);
    for (uint32_t i = 0; i < nstaging; i++) reduce_cache_free(p->cache, staging[i]);
    reduce_cache_free(p->cache, qblock);
    if (stats != NULL) {
        stats->tx_bytes = tx;
        stats->rx_bytes = rx;
    }
    return rc;
}
