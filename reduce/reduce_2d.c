/* reduce_2d.c -- the two-level all-reduce (reduce.h, README.md "The 2-D schedule").
 *
 * n peers in ring order; the first rows*cols form a grid, row i being positions i*cols ..
 * i*cols+cols-1, so most row links are ring edges. Each extra position folds its whole input
 * into one grid peer first and gets the result back last. Then three phases, each a run of the
 * ring (reduce_ring.c) over other links: the row ring's reduce-scatter (cols-1 steps) leaves
 * shard c (chunk c of cols) combined over the row at column c; the column ring all-reduces that
 * shard (2(rows-1) steps, Avg dividing by n); the row ring's all-gather spreads the shards.
 * Bytes per grid peer: 2S(1 - 1/(rows*cols)), the ring's volume, in about 4 sqrt(n) steps. */
#include <string.h>

#include "log/log.h"
#include "reduce/reduce.h"

static uint32_t shape_steps(uint32_t rows, uint32_t cols, uint32_t extras) {
    return 2 * (cols - 1) + 2 * (rows - 1) + (extras ? 2 : 0);
}

uint32_t reduce_2d_steps(const reduce_2d_shape_t *s) {
    return shape_steps(s->rows, s->cols, s->extras);
}

int reduce_2d_shape(uint32_t n, reduce_2d_shape_t *out) {
    memset(out, 0, sizeof *out);
    if (n < 4) return 0;
    uint32_t best = 2 * (n - 1);
    for (uint32_t c = 2; c <= n / 2; c++) {
        uint32_t r = n / c, e = n - r * c, st = shape_steps(r, c, e);
        /* Fewer steps; on a tie fewer extras (fold transfers), then the wider rows (more bytes
         * on the ring's measured edges). c rises, so a later equal candidate is wider. */
        int better = st < best || (st == best && out->rows != 0 && e <= out->extras);
        if (!better) continue;
        best = st;
        *out = (reduce_2d_shape_t){.rows = r, .cols = c, .extras = e};
    }
    return out->rows != 0;
}

void reduce_2d_role(const reduce_2d_shape_t *s, uint32_t pos, reduce_2d_role_t *o) {
    uint32_t g = s->rows * s->cols;
    if (pos >= g) {
        *o = (reduce_2d_role_t){REDUCE_2D_NONE, REDUCE_2D_NONE, REDUCE_2D_NONE, REDUCE_2D_NONE,
                                REDUCE_2D_NONE, REDUCE_2D_NONE, g - 1 - (pos - g)};
        return;
    }
    uint32_t row = pos / s->cols, col = pos % s->cols;
    o->row = row;
    o->col = col;
    o->row_next = row * s->cols + (col + 1) % s->cols;
    o->row_prev = row * s->cols + (col + s->cols - 1) % s->cols;
    o->col_next = ((row + 1) % s->rows) * s->cols + col;
    o->col_prev = ((row + s->rows - 1) % s->rows) * s->cols + col;
    /* Extra g+e folds into g-1-e: the first extra into its ring neighbour. */
    o->fold = g - 1 - pos < s->extras ? g + (g - 1 - pos) : REDUCE_2D_NONE;
}

/* ---- the fold: one whole buffer over one link, full precision ---- */

enum { FOLD_SEND, FOLD_RECV, FOLD_COMBINE };

typedef struct fold {
    const reduce_ring_params_t *p;
    reduce_link_t link;
    int dir;
    const char *in; /* FOLD_SEND: the bytes; FOLD_COMBINE: the accumulator */
    char *out;      /* FOLD_RECV: where frames land; FOLD_COMBINE: out = in OP frame */
    size_t bytes, sub;
    uint32_t w;
    pcclDataType_t dtype;
    pcclRedOp_t op;
    void *stage[REDUCE_RING_MAX_WINDOW];
    reduce_req_t req[REDUCE_RING_MAX_WINDOW];
    uint64_t posted, done, frames, moved;
} fold_t;

static size_t fold_len(const fold_t *f, uint64_t k) {
    size_t off = (size_t) k * f->sub;
    return f->bytes - off < f->sub ? f->bytes - off : f->sub;
}

static int fold_post(fold_t *f) {
    while (f->posted < f->frames && f->posted - f->done < f->w) {
        uint32_t slot = (uint32_t) (f->posted % f->w);
        size_t off = (size_t) f->posted * f->sub, len = fold_len(f, f->posted);
        reduce_req_t *rq = &f->req[slot];
        atomic_store(&rq->state, REDUCE_REQ_PENDING);
        rq->doorbell = f->p->doorbell;
        rq->flags = 0;
        rq->trace = NULL;
        rq->stream = (uint32_t) f->posted;
        void *dst = f->dir == FOLD_COMBINE ? f->stage[slot] : f->out + off;
        int rc = f->dir == FOLD_SEND
                     ? f->link.ops->post_send(f->link.ctx, f->p->tag, off, f->in + off, len, rq)
                     : f->link.ops->post_recv(f->link.ctx, f->p->tag, off, dst, len, rq);
        if (rc != 0) return REDUCE_ELINK;
        f->posted++;
    }
    return REDUCE_OK;
}

/* Frames complete in order on one link; a combine runs as its frame is retired. */
static int fold_loop(fold_t *f) {
    const uint32_t poll_us = f->p->poll_us ? f->p->poll_us : REDUCE_RING_DEFAULT_POLL_US;
    size_t esz = reduce_dtype_size(f->dtype);
    while (f->done < f->frames) {
        const _Atomic uint32_t *ab = f->p->abort_flag;
        if (ab != NULL && atomic_load_explicit(ab, memory_order_acquire) != 0) return REDUCE_EABORTED;
        uint32_t seen = atomic_load(f->p->doorbell);
        int rc = fold_post(f);
        if (rc != REDUCE_OK) return rc;
        uint32_t slot = (uint32_t) (f->done % f->w);
        uint32_t st = atomic_load(&f->req[slot].state);
        if (st == REDUCE_REQ_FAILED) return REDUCE_ELINK;
        if (st == REDUCE_REQ_PENDING) {
            f->link.ops->wait(f->link.ctx, f->p->doorbell, seen, poll_us);
            continue;
        }
        size_t off = (size_t) f->done * f->sub, len = fold_len(f, f->done);
        if (f->dir == FOLD_COMBINE)
            reduce_combine(f->dtype, f->op, f->out + off, f->in + off, f->stage[slot], len / esz);
        f->moved += len;
        f->done++;
    }
    return REDUCE_OK;
}

/* Moves `bytes` over link in frames of the ring's sub-chunk size (whole elements), the ring's
 * window in flight; FOLD_COMBINE lands frames in staging blocks and combines out = in OP frame. */
static int fold_run(const reduce_ring_params_t *p, reduce_link_t link, int dir, const void *in,
                    void *out, size_t count, pcclDataType_t dtype, pcclRedOp_t op, uint64_t *moved) {
    size_t esz = reduce_dtype_size(dtype);
    size_t sub = p->subchunk_bytes ? p->subchunk_bytes : reduce_ring_default_subchunk(count, esz, 1, 0);
    fold_t f = {.p = p, .link = link, .dir = dir, .in = in, .out = out, .bytes = count * esz,
                .sub = (sub / esz ? sub / esz : 1) * esz, .dtype = dtype, .op = op};
    f.w = p->window ? p->window : REDUCE_RING_DEFAULT_WINDOW;
    f.frames = (f.bytes + f.sub - 1) / f.sub;
    if (f.frames < f.w) f.w = (uint32_t) f.frames;
    int rc = REDUCE_OK;
    for (uint32_t i = 0; dir == FOLD_COMBINE && i < f.w && rc == REDUCE_OK; i++)
        if ((f.stage[i] = reduce_cache_alloc(p->cache, f.sub)) == NULL) rc = REDUCE_ENOMEM;
    if (rc == REDUCE_OK) rc = fold_loop(&f);
    /* The link touches no request or staging block after cancel returns. */
    if (rc != REDUCE_OK) link.ops->cancel(link.ctx, p->tag);
    for (uint32_t i = 0; dir == FOLD_COMBINE && i < f.w; i++) reduce_cache_free(p->cache, f.stage[i]);
    *moved += f.moved;
    return rc;
}

/* ---- the schedule ---- */

static int check_2d(const reduce_ring_params_t *p, const reduce_2d_shape_t *s,
                    const reduce_2d_links_t *l, pcclDataType_t dtype, pcclRedOp_t op) {
    if (p == NULL || s == NULL || l == NULL || p->stage != NULL) return REDUCE_EINVAL;
    if (!reduce_dtype_valid(dtype) || !reduce_op_valid(op)) return REDUCE_EINVAL;
    if (reduce_quant_check(dtype, &p->quantization) != REDUCE_OK) return REDUCE_EINVAL;
    if (s->rows < 2 || s->cols < 2 || s->extras >= s->cols) return REDUCE_EINVAL;
    if ((uint64_t) s->rows * s->cols + s->extras != p->world_size || p->rank >= p->world_size)
        return REDUCE_EINVAL;
    if (p->cache == NULL || p->doorbell == NULL) return REDUCE_EINVAL;
    return REDUCE_OK;
}

/* One phase over one ring of the grid; `divisor`: Avg's (n) for the column all-reduce. */
static int sub_ring(const reduce_ring_params_t *p, uint32_t rank, uint32_t size, reduce_link_t next,
                    reduce_link_t prev, uint32_t phases, const void *in, void *out, size_t count,
                    pcclDataType_t dtype, pcclRedOp_t op, reduce_ring_stats_t *acc) {
    reduce_ring_params_t sub = *p;
    sub.rank = rank;
    sub.world_size = size;
    sub.next = next;
    sub.prev = prev;
    sub.phases = phases;
    sub.avg_divisor = p->world_size;
    sub.lanes = 0;
    sub.next_lanes = sub.prev_lanes = NULL;
    sub.probe = NULL;
    sub.send_by_reference = 0;
    reduce_ring_stats_t st;
    int rc = reduce_ring_allreduce(&sub, in, out, count, dtype, op, &st);
    acc->tx_bytes += st.tx_bytes;
    acc->rx_bytes += st.rx_bytes;
    return rc;
}

/* The grid peer's three phases; `in` is its input (its sendbuf, or recvbuf after a fold). */
static int grid_phases(const reduce_ring_params_t *p, const reduce_2d_shape_t *s,
                       const reduce_2d_links_t *l, const reduce_2d_role_t *ro, const void *in,
                       void *out, size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                       reduce_ring_stats_t *st) {
    size_t esz = reduce_dtype_size(dtype), start, len;
    int rc = sub_ring(p, ro->col, s->cols, l->row_next, l->row_prev, REDUCE_RING_SCATTER, in, out,
                      count, dtype, op, st);
    reduce_ring_chunk(count, esz, s->cols, ro->col, &start, &len);
    if (rc == REDUCE_OK && len > 0) {
        char *shard = (char *) out + start;
        rc = sub_ring(p, ro->row, s->rows, l->col_next, l->col_prev, REDUCE_RING_BOTH, shard, shard,
                      len / esz, dtype, op, st);
    }
    if (rc == REDUCE_OK)
        rc = sub_ring(p, ro->col, s->cols, l->row_next, l->row_prev, REDUCE_RING_GATHER, out, out,
                      count, dtype, op, st);
    return rc;
}

static void cancel_all(const reduce_2d_links_t *l, const reduce_2d_role_t *ro, uint64_t tag) {
    const reduce_link_t *ls[6] = {&l->row_next, &l->row_prev, &l->col_next, &l->col_prev,
                                  &l->fold_tx, &l->fold_rx};
    for (int i = 0; i < 6; i++) {
        int used = i < 4 ? ro->row_next != REDUCE_2D_NONE : ro->fold != REDUCE_2D_NONE;
        if (used && ls[i]->ops != NULL) ls[i]->ops->cancel(ls[i]->ctx, tag);
    }
}

int reduce_2d_allreduce(const reduce_ring_params_t *p, const reduce_2d_shape_t *s,
                        const reduce_2d_links_t *l, const void *sendbuf, void *recvbuf,
                        size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                        reduce_ring_stats_t *stats) {
    reduce_ring_stats_t st = {0, 0};
    if (stats != NULL) *stats = st;
    int rc = check_2d(p, s, l, dtype, op);
    if (rc != REDUCE_OK || count == 0) return rc;
    if (count > SIZE_MAX / reduce_dtype_size(dtype) || sendbuf == NULL || recvbuf == NULL) return REDUCE_EINVAL;
    reduce_2d_role_t ro;
    reduce_2d_role(s, p->rank, &ro);
    int fold = ro.fold != REDUCE_2D_NONE;
    if (fold && (l->fold_tx.ops == NULL || l->fold_rx.ops == NULL)) return REDUCE_EINVAL;
    if (ro.row_next == REDUCE_2D_NONE) { /* an extra: hand the input over, take the result */
        rc = fold_run(p, l->fold_tx, FOLD_SEND, sendbuf, NULL, count, dtype, op, &st.tx_bytes);
        if (rc == REDUCE_OK)
            rc = fold_run(p, l->fold_rx, FOLD_RECV, NULL, recvbuf, count, dtype, op, &st.rx_bytes);
    } else {
        if (l->row_next.ops == NULL || l->row_prev.ops == NULL || l->col_next.ops == NULL ||
            l->col_prev.ops == NULL)
            return REDUCE_EINVAL;
        const void *in = sendbuf;
        if (fold) { /* recvbuf = own input OP the extra's, then the grid runs in place */
            rc = fold_run(p, l->fold_rx, FOLD_COMBINE, sendbuf, recvbuf, count, dtype, op, &st.rx_bytes);
            in = recvbuf;
        }
        if (rc == REDUCE_OK) rc = grid_phases(p, s, l, &ro, in, recvbuf, count, dtype, op, &st);
        if (rc == REDUCE_OK && fold)
            rc = fold_run(p, l->fold_tx, FOLD_SEND, recvbuf, NULL, count, dtype, op, &st.tx_bytes);
    }
    if (rc != REDUCE_OK) {
        cancel_all(l, &ro, p->tag);
        LOG_DEBUG("reduce", "2-D tag %llu position %u/%u: %s", (unsigned long long) p->tag, p->rank,
                  p->world_size, reduce_strerror(rc));
    }
    if (stats != NULL) *stats = st;
    return rc;
}
