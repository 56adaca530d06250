/* reduce_grid.c -- the grid all-reduce (reduce.h, README.md "The grid schedule").
 *
 * n peers in ring order; the first `grid` form a mixed-radix grid, dimension 0 varying fastest,
 * so its rings are runs of consecutive positions (mostly ring edges). Each extra position folds
 * its whole input into one grid peer first and gets the result back last. Then each phase is a
 * run of the ring (reduce_ring.c) over one dimension's links: reduce-scatter along dimensions
 * 0 .. D-2, each on the shard the one before left, an all-reduce of the last shard along D-1
 * (Avg dividing by n), and all-gathers back along D-2 .. 0. Bytes per grid peer:
 * 2S(1 - 1/grid), the ring's volume, in sum of 2(size[d]-1) steps instead of 2(n-1): about
 * 4 sqrt(n) for two dimensions, 2 log2(n) for a grid of twos. */
#include <string.h>

#include "log/log.h"
#include "reduce/reduce.h"

uint32_t reduce_grid_steps(const reduce_grid_shape_t *s) {
    uint32_t st = s->extras ? 2 : 0;
    for (uint32_t d = 0; d < s->ndims; d++) st += 2 * (s->size[d] - 1);
    return st;
}

/* g's prime factors, largest first; when there are more than max_dims, each (largest first)
 * goes to the dimension with the smallest product so far, which keeps them balanced (a fixed
 * product has the fewest steps when its factors are equal). */
static uint32_t factor(uint32_t g, uint32_t max_dims, uint32_t *f) {
    uint32_t k = 0, pr[32];
    for (uint32_t p = 2; (uint64_t) p * p <= g; p++)
        while (g % p == 0) {
            pr[k++] = p;
            g /= p;
        }
    if (g > 1) pr[k++] = g;
    uint32_t dims = k < max_dims ? k : max_dims;
    for (uint32_t d = 0; d < dims; d++) f[d] = 1;
    for (uint32_t i = k; i-- > 0;) { /* pr[] ascends: largest first */
        uint32_t m = 0;
        for (uint32_t d = 1; d < dims; d++)
            if (f[d] < f[m]) m = d;
        f[m] *= pr[i];
    }
    for (uint32_t i = 1; i < dims; i++) /* non-increasing */
        for (uint32_t j = i; j > 0 && f[j] > f[j - 1]; j--) {
            uint32_t t = f[j];
            f[j] = f[j - 1];
            f[j - 1] = t;
        }
    return dims;
}

int reduce_grid_shape(uint32_t n, uint32_t max_dims, uint32_t max_extras, reduce_grid_shape_t *out) {
    memset(out, 0, sizeof *out);
    if (max_dims == 0 || max_dims > REDUCE_GRID_MAX_DIMS) max_dims = REDUCE_GRID_MAX_DIMS;
    if (n < 4 || n > REDUCE_GRID_MAX_PEERS) return 0;
    uint32_t best = 2 * (n - 1);
    /* Larger grids first: on equal steps the one with fewer extras (folds) stays. */
    for (uint32_t g = n; g >= 4 && 2 * (uint64_t) g >= n && n - g <= max_extras; g--) {
        reduce_grid_shape_t c = {.grid = g, .extras = n - g};
        c.ndims = factor(g, max_dims, c.size);
        uint32_t st = reduce_grid_steps(&c);
        if (st < best) {
            best = st;
            *out = c;
        }
    }
    return out->ndims != 0;
}

void reduce_grid_role(const reduce_grid_shape_t *s, uint32_t pos, reduce_grid_role_t *o) {
    memset(o, 0, sizeof *o);
    uint32_t g = s->grid;
    for (uint32_t d = 0; d < REDUCE_GRID_MAX_DIMS; d++) o->next[d] = o->prev[d] = REDUCE_GRID_NONE;
    if (pos >= g) {
        o->extra = 1;
        o->fold = g - 1 - (pos - g);
        return;
    }
    uint32_t stride = 1;
    for (uint32_t d = 0; d < s->ndims; d++) {
        uint32_t c = (pos / stride) % s->size[d], base = pos - c * stride;
        o->coord[d] = c;
        o->next[d] = base + ((c + 1) % s->size[d]) * stride;
        o->prev[d] = base + ((c + s->size[d] - 1) % s->size[d]) * stride;
        stride *= s->size[d];
    }
    /* Extra g+e folds into g-1-e: the first extra into its ring neighbour. */
    o->fold = g - 1 - pos < s->extras ? g + (g - 1 - pos) : REDUCE_GRID_NONE;
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

static int check_grid(const reduce_ring_params_t *p, const reduce_grid_shape_t *s, const reduce_grid_links_t *l,
                      pcclDataType_t dtype, pcclRedOp_t op) {
    if (p == NULL || s == NULL || l == NULL || p->stage != NULL) return REDUCE_EINVAL;
    if (!reduce_dtype_valid(dtype) || !reduce_op_valid(op)) return REDUCE_EINVAL;
    if (reduce_quant_check(dtype, &p->quantization) != REDUCE_OK) return REDUCE_EINVAL;
    if (s->ndims == 0 || s->ndims > REDUCE_GRID_MAX_DIMS || s->extras > s->grid) return REDUCE_EINVAL;
    uint64_t g = 1;
    for (uint32_t d = 0; d < s->ndims; d++) {
        if (s->size[d] < 2) return REDUCE_EINVAL;
        g *= s->size[d];
        if (g > s->grid) return REDUCE_EINVAL;
    }
    if (g != s->grid || (uint64_t) s->grid + s->extras != p->world_size || p->rank >= p->world_size)
        return REDUCE_EINVAL;
    if (p->cache == NULL || p->doorbell == NULL) return REDUCE_EINVAL;
    return REDUCE_OK;
}

/* One phase over one ring of the grid; Avg divides by n (only the all-reduce phase divides). */
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

/* The grid peer's phases; `in` is its input (its sendbuf, or recvbuf after a fold). Level d
 * works on elements [off[d], off[d] + len[d]); every peer of a dimension-d ring shares that
 * range, so an empty one is skipped by all of them alike. */
static int grid_phases(const reduce_ring_params_t *p, const reduce_grid_shape_t *s, const reduce_grid_links_t *l,
                       const reduce_grid_role_t *ro, const void *in, void *out, size_t count, pcclDataType_t dtype,
                       pcclRedOp_t op, reduce_ring_stats_t *st) {
    size_t esz = reduce_dtype_size(dtype), off[REDUCE_GRID_MAX_DIMS], len[REDUCE_GRID_MAX_DIMS];
    size_t o = 0, n = count;
    const char *src = in;
    char *dst = out;
    uint32_t d = 0, last = s->ndims - 1;
    int rc = REDUCE_OK;
    for (; d < last && n > 0 && rc == REDUCE_OK; d++) {
        off[d] = o;
        len[d] = n;
        rc = sub_ring(p, ro->coord[d], s->size[d], l->next[d], l->prev[d], REDUCE_RING_SCATTER, src + o * esz,
                      dst + o * esz, n, dtype, op, st);
        src = dst;
        size_t start, bytes;
        reduce_ring_chunk(n, esz, s->size[d], ro->coord[d], &start, &bytes);
        o += start / esz;
        n = bytes / esz;
    }
    if (rc == REDUCE_OK && d == last && n > 0)
        rc = sub_ring(p, ro->coord[d], s->size[d], l->next[d], l->prev[d], REDUCE_RING_BOTH, src + o * esz,
                      dst + o * esz, n, dtype, op, st);
    while (rc == REDUCE_OK && d-- > 0)
        rc = sub_ring(p, ro->coord[d], s->size[d], l->next[d], l->prev[d], REDUCE_RING_GATHER, dst + off[d] * esz,
                      dst + off[d] * esz, len[d], dtype, op, st);
    return rc;
}

static void cancel_all(const reduce_grid_shape_t *s, const reduce_grid_links_t *l, const reduce_grid_role_t *ro,
                       uint64_t tag) {
    for (uint32_t d = 0; d < s->ndims && !ro->extra; d++) {
        if (l->next[d].ops != NULL) l->next[d].ops->cancel(l->next[d].ctx, tag);
        if (l->prev[d].ops != NULL) l->prev[d].ops->cancel(l->prev[d].ctx, tag);
    }
    if (ro->fold != REDUCE_GRID_NONE) {
        l->fold_tx.ops->cancel(l->fold_tx.ctx, tag);
        l->fold_rx.ops->cancel(l->fold_rx.ctx, tag);
    }
}

static int links_ok(const reduce_grid_shape_t *s, const reduce_grid_links_t *l, const reduce_grid_role_t *ro) {
    if (ro->fold != REDUCE_GRID_NONE && (l->fold_tx.ops == NULL || l->fold_rx.ops == NULL)) return 0;
    for (uint32_t d = 0; d < s->ndims && !ro->extra; d++)
        if (l->next[d].ops == NULL || l->prev[d].ops == NULL) return 0;
    return 1;
}

int reduce_grid_allreduce(const reduce_ring_params_t *p, const reduce_grid_shape_t *s, const reduce_grid_links_t *l,
                          const void *sendbuf, void *recvbuf, size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                          reduce_ring_stats_t *stats) {
    reduce_ring_stats_t st = {0, 0};
    if (stats != NULL) *stats = st;
    int rc = check_grid(p, s, l, dtype, op);
    if (rc != REDUCE_OK || count == 0) return rc;
    if (count > SIZE_MAX / reduce_dtype_size(dtype) || sendbuf == NULL || recvbuf == NULL) return REDUCE_EINVAL;
    reduce_grid_role_t ro;
    reduce_grid_role(s, p->rank, &ro);
    if (!links_ok(s, l, &ro)) return REDUCE_EINVAL;
    int fold = ro.fold != REDUCE_GRID_NONE;
    if (ro.extra) { /* hand the input over, take the result */
        rc = fold_run(p, l->fold_tx, FOLD_SEND, sendbuf, NULL, count, dtype, op, &st.tx_bytes);
        if (rc == REDUCE_OK) rc = fold_run(p, l->fold_rx, FOLD_RECV, NULL, recvbuf, count, dtype, op, &st.rx_bytes);
    } else {
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
        cancel_all(s, l, &ro, p->tag);
        LOG_DEBUG("reduce", "grid tag %llu position %u/%u: %s", (unsigned long long) p->tag, p->rank, p->world_size,
                  reduce_strerror(rc));
    }
    if (stats != NULL) *stats = st;
    return rc;
}
