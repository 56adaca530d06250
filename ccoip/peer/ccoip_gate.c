/* ccoip_gate.c: gates between a user's CUDA stream and the proxy thread (ccoip_gate.h). */
#include "ccoip/peer/ccoip_gate.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/peer/ccoip_peer_int.h"
#include "log/log.h"

#define MOD "pccl"
#define MIN_PART ((size_t) 1 << 20) /* smaller pieces cost more API calls than they hide */
#define DEFAULT_PARTS 8

struct ccoip_gates_t {
    pthread_mutex_t lock;  /* guards `busy` only: no CUDA call is made under it */
    pthread_mutex_t queue; /* callers queue one op's sequence at a time; the proxy never takes it */
    const cuda_table_t *cu;
    uint32_t *words; /* 2 * CCOIP_MAX_OPS mapped words: gate words, then status words */
    _Atomic uint32_t last_rank, last_world; /* of the last op that ran: the next plans use them */
    uint64_t next_ticket;                   /* call order, under `queue` */
    ccoip_gate_t g[CCOIP_MAX_OPS];
};

static pthread_once_t parts_once = PTHREAD_ONCE_INIT;
static size_t max_parts = DEFAULT_PARTS;
static size_t min_part = MIN_PART;

/* PCCL_STREAM_COPIES: "whole" (one copy each way, no overlap) or the most parts, 1 to 32. */
static void parts_init(void) {
    /* PCCL_STREAM_MIN_KIB: the smallest part, in KiB (A/B runs). */
    const char *m = getenv("PCCL_STREAM_MIN_KIB");
    if (m != NULL && atol(m) > 0) min_part = (size_t) atol(m) << 10;
    const char *v = getenv("PCCL_STREAM_COPIES");
    if (v == NULL) return;
    char *end = NULL;
    long n = strcmp(v, "whole") == 0 ? 1 : strtol(v, &end, 10);
    if (n >= 1 && n <= CCOIP_GATE_PARTS && (end == NULL || *end == 0)) max_parts = (size_t) n;
    else LOG_WARN(MOD, "PCCL_STREAM_COPIES=%s: want \"whole\" or 1 to %d; using %zu", v, CCOIP_GATE_PARTS, max_parts);
}

static ccoip_gates_t *gates_get(ccoip_gates_t **slot, pthread_mutex_t *lock) {
    const cuda_table_t *cu = cuda_table();
    if (cu == NULL) return NULL;
    pthread_mutex_lock(lock);
    ccoip_gates_t *s = *slot;
    pthread_mutex_unlock(lock);
    if (s != NULL) return s;
    /* Made outside the lock (a CUDA allocation); a racing maker's set is dropped. */
    s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->cu = cu;
    if (cu->flags_alloc(&s->words, 2 * CCOIP_MAX_OPS) != CUDA_OK) {
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->queue, NULL);
    for (int i = 0; i < CCOIP_MAX_OPS; i++) {
        s->g[i].set = s;
        s->g[i].word = &s->words[i];
        s->g[i].status = &s->words[CCOIP_MAX_OPS + i];
    }
    pthread_mutex_lock(lock);
    ccoip_gates_t *won = *slot;
    if (won == NULL) *slot = s;
    pthread_mutex_unlock(lock);
    if (won != NULL) {
        cu->host_free(s->words);
        pthread_mutex_destroy(&s->queue);
        pthread_mutex_destroy(&s->lock);
        free(s);
        s = won;
    }
    return s;
}

static void drop_events(const cuda_table_t *cu, ccoip_gate_t *g) {
    cu->event_destroy(g->event_start);
    cu->event_destroy(g->event_out);
    for (int i = 0; i < CCOIP_GATE_PARTS; i++) cu->event_destroy(g->event_piece[i]);
    g->event_start = g->event_out = NULL;
    memset(g->event_piece, 0, sizeof g->event_piece);
}

static bool make(const cuda_table_t *cu, ccoip_gate_t *g) {
    if (g->made) return true;
    bool ok = cu->event_create(&g->event_start) == CUDA_OK && cu->event_create(&g->event_out) == CUDA_OK;
    for (int i = 0; ok && i < CCOIP_GATE_PARTS; i++) ok = cu->event_create(&g->event_piece[i]) == CUDA_OK;
    if (!ok) drop_events(cu, g);
    g->made = ok;
    return ok;
}

static void give_back(ccoip_gate_t *g) {
    pthread_mutex_lock(&g->set->lock);
    g->busy = false;
    pthread_mutex_unlock(&g->set->lock);
}

static void store_word(uint32_t *w, uint32_t v) {
    atomic_store_explicit((_Atomic uint32_t *) w, v, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
}

/* ---- the ring's chunk order ---------------------------------------------------------------- */
/* The ring reads its input chunk by chunk from (rank-1) down, and its result becomes final from
 * chunk rank down (reduce/reduce.h, "Staging"). In an order that starts at chunk `first`, the
 * position of byte `off` counts the bytes of every chunk before its own. */

static size_t order_pos(const ccoip_gate_t *g, uint32_t first, size_t off) {
    size_t e = off / g->esz, base = g->count / g->world, rem = g->count % g->world;
    uint32_t c = (uint32_t) (e < rem * (base + 1) ? e / (base + 1) : rem + (e - rem * (base + 1)) / base);
    size_t start, len, fstart, flen;
    reduce_ring_chunk(g->count, g->esz, g->world, c, &start, &len);
    reduce_ring_chunk(g->count, g->esz, g->world, first, &fstart, &flen);
    /* Chunks first, first-1, ..., c+1 lie just above c; past 0 the order wraps to world-1. */
    size_t before = c <= first ? fstart + flen - (start + len) : fstart + flen + g->bytes - (start + len);
    return before + (off - start);
}

static uint32_t in_first(const ccoip_gate_t *g) { return (g->rank + g->world - 1) % g->world; }

/* The input order. The ring reads its first two chunks (rank-1: its first sends; rank-2: its
 * first reduce-scatter receives, combined with our input) at the same pace, then one chunk per
 * step: so slices of the first two alternate, and the other chunks follow whole, from rank-3
 * down. A copy of chunk rank-2 queued behind all of rank-1 would hold the ring's receives back. */
static uint32_t in_lead(const ccoip_gate_t *g) { return g->world >= 2 ? 2 : 1; }

static size_t in_slice(const ccoip_gate_t *g) {
    size_t s = (g->part / 2) & ~(size_t) 15;
    return s > 0 ? s : 16;
}

static size_t in_pos(const ccoip_gate_t *g, size_t off) {
    uint32_t n = g->world, first = in_first(g), lead = in_lead(g);
    size_t e = off / g->esz, base = g->count / n, rem = g->count % n;
    uint32_t c = (uint32_t) (e < rem * (base + 1) ? e / (base + 1) : rem + (e - rem * (base + 1)) / base);
    uint32_t k = (first + n - c) % n;
    if (k >= lead) return order_pos(g, first, off);
    size_t s0, l0, s1 = 0, l1 = 0, S = in_slice(g);
    reduce_ring_chunk(g->count, g->esz, n, first, &s0, &l0);
    if (lead == 2) reduce_ring_chunk(g->count, g->esz, n, (first + n - 1) % n, &s1, &l1);
    size_t x = off - (k == 0 ? s0 : s1), i = x / S, iS = i * S, i1S = iS + S;
    size_t before = k == 0 ? (iS < l0 ? iS : l0) + (iS < l1 ? iS : l1) : (i1S < l0 ? i1S : l0) + (iS < l1 ? iS : l1);
    return before + (x - iS);
}

/* The input order's segments one by one (offset, length); false at the end. */
typedef struct in_iter {
    uint32_t k, j;
    size_t i;
} in_iter_t;

static bool in_next(const ccoip_gate_t *g, in_iter_t *it, size_t *off, size_t *len) {
    uint32_t n = g->world, first = in_first(g), lead = in_lead(g);
    size_t S = in_slice(g);
    while (it->k < lead) {
        size_t cs[2], cl[2] = {0, 0};
        for (uint32_t j = 0; j < lead; j++) reduce_ring_chunk(g->count, g->esz, n, (first + n - j) % n, &cs[j], &cl[j]);
        if (it->i * S >= (cl[0] > cl[1] ? cl[0] : cl[1])) {
            it->k = lead;
            break;
        }
        uint32_t j = it->j;
        size_t i = it->i;
        if (++it->j == lead) {
            it->j = 0;
            it->i++;
        }
        if (i * S < cl[j]) {
            *off = cs[j] + i * S;
            *len = cl[j] - i * S < S ? cl[j] - i * S : S;
            return true;
        }
    }
    if (it->k >= n) return false;
    reduce_ring_chunk(g->count, g->esz, n, (first + n - it->k) % n, off, len);
    it->k++;
    return true;
}

/* One copy of bytes [off, off+len) between the device buffer and the block, on the stream. */
static cuda_status_t copy_segment(ccoip_gate_t *g, void *stream, bool input, const char *dev_in, char *dev_out,
                                  size_t off, size_t len) {
    const cuda_table_t *cu = g->set->cu;
    char *host = g->host;
    return input ? cu->memcpy_d2h_async(host + off, dev_in + off, len, stream)
                 : cu->memcpy_h2d_async(dev_out + off, host + off, len, stream);
}

/* Queues one direction of the plan: device->host pieces each followed by its event (input), or
 * host->device ranges each behind its wait (output). Adjacent segments of a part go as one copy. */
static cuda_status_t queue_side(ccoip_gate_t *g, void *stream, bool input, const char *dev_in, char *dev_out) {
    const cuda_table_t *cu = g->set->cu;
    uint32_t n = g->world, first = g->rank;
    size_t pos = 0, pend_off = 0, pend_len = 0;
    cuda_status_t st = CUDA_OK;
    in_iter_t it = {0, 0, 0};
    for (uint32_t k = 0; st == CUDA_OK; k++) {
        size_t start, len, at = 0;
        if (input) {
            if (!in_next(g, &it, &start, &len)) break;
        } else {
            if (k >= n) break;
            reduce_ring_chunk(g->count, g->esz, n, (first + n - k) % n, &start, &len);
        }
        while (at < len && st == CUDA_OK) {
            uint32_t i = (uint32_t) (pos / g->part);
            if (!input && pos % g->part == 0) st = cu->stream_wait_flag(stream, g->word, g->base + 1 + i);
            size_t take = len - at < (i + 1) * g->part - pos ? len - at : (i + 1) * g->part - pos;
            size_t o = start + at;
            if (pend_len > 0 && o + take == pend_off) {
                pend_off = o;
                pend_len += take;
            } else if (pend_len > 0 && pend_off + pend_len == o) {
                pend_len += take;
            } else {
                if (pend_len > 0 && st == CUDA_OK)
                    st = copy_segment(g, stream, input, dev_in, dev_out, pend_off, pend_len);
                pend_off = o;
                pend_len = take;
            }
            at += take;
            pos += take;
            if (st == CUDA_OK && (pos % g->part == 0 || pos == g->bytes)) {
                st = copy_segment(g, stream, input, dev_in, dev_out, pend_off, pend_len);
                pend_len = 0;
                if (st == CUDA_OK && input) st = cu->event_record(g->event_piece[i], stream);
            }
        }
    }
    return st;
}

/* A free gate of the set, marked busy; NULL when CCOIP_MAX_OPS are in flight. */
static ccoip_gate_t *claim(ccoip_gates_t *s) {
    ccoip_gate_t *g = NULL;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < CCOIP_MAX_OPS && g == NULL; i++)
        if (!s->g[i].busy) g = &s->g[i];
    if (g != NULL) g->busy = true;
    pthread_mutex_unlock(&s->lock);
    return g;
}

/* The plan: the op's pieces, and the rank of the last op that ran in a world of this size (a
 * guess at first). */
static void plan(ccoip_gates_t *s, ccoip_gate_t *g, uint32_t world, size_t count, size_t esz) {
    pthread_once(&parts_once, parts_init);
    if (world == 0) world = 1;
    size_t bytes = count * esz;
    g->world = world;
    g->rank = atomic_load(&s->last_world) == world ? atomic_load(&s->last_rank) % world : 0;
    g->count = count;
    g->esz = esz;
    g->bytes = bytes;
    size_t part = (bytes + max_parts - 1) / max_parts;
    g->part = max_parts == 1 && bytes > 0 ? bytes : part > min_part ? part : min_part;
    g->pieces = g->ranges = (uint32_t) ((bytes + g->part - 1) / g->part);
    g->base = atomic_load_explicit((_Atomic uint32_t *) g->word, memory_order_relaxed);
    g->released = 0;
    g->waited = 0;
    g->in_plan = false;
    memset(g->final_bytes, 0, sizeof g->final_bytes);
    store_word(g->status, 0); /* the last user's mark kernel has passed: event_out did */
}

pcclResult_t ccoip_gate_open(ccoip_gates_t **slot, pthread_mutex_t *lock, reduce_cache_t *pinned, void *stream,
                             const void *sendbuf, void *recvbuf, size_t count, size_t esz, uint32_t world,
                             ccoip_gate_t **out) {
    *out = NULL;
    size_t bytes = count * esz;
    /* Before anything is queued: a first cudaHostAlloc may wait for the whole GPU. */
    void *host = pinned != NULL ? reduce_cache_alloc(pinned, bytes) : NULL;
    if (host == NULL) {
        LOG_ERROR(MOD, "pcclAllReduceOnStream: no pinned host block of %zu bytes", bytes);
        return pcclInternalError;
    }
    ccoip_gates_t *s = gates_get(slot, lock);
    if (s == NULL) {
        LOG_ERROR(MOD, "pcclAllReduceOnStream: no CUDA support or no mapped host memory for stream gates");
        reduce_cache_free(pinned, host);
        return pcclInternalError;
    }
    ccoip_gate_t *g = claim(s);
    if (g == NULL) {
        LOG_ERROR(MOD, "pcclAllReduceOnStream: %d stream-ordered all-reduces are in flight, the most there may be",
                  CCOIP_MAX_OPS);
        reduce_cache_free(pinned, host);
        return pcclInvalidUsage;
    }
    const cuda_table_t *cu = s->cu;
    if (!make(cu, g)) {
        reduce_cache_free(pinned, host);
        give_back(g);
        LOG_ERROR(MOD, "pcclAllReduceOnStream: cannot create CUDA events");
        return pcclInternalError;
    }
    plan(s, g, world, count, esz);
    g->pinned = pinned;
    g->host = host;
    pthread_mutex_lock(&s->queue);
    pthread_mutex_lock(&s->lock);
    g->ticket = s->next_ticket++;
    g->verdict = false;
    pthread_mutex_unlock(&s->lock);
    cuda_status_t st = cu->event_record(g->event_start, stream);
    bool queued = st == CUDA_OK; /* a copy may be on the stream */
    if (st == CUDA_OK) st = queue_side(g, stream, true, sendbuf, recvbuf);
    if (st == CUDA_OK) st = queue_side(g, stream, false, sendbuf, recvbuf);
    if (st == CUDA_OK) st = cu->stream_wait_flag(stream, g->word, g->base + 1 + g->ranges);
    if (st == CUDA_OK) st = cu->stream_mark_if(stream, g->status, recvbuf, bytes);
    if (st == CUDA_OK) st = cu->event_record(g->event_out, stream);
    pthread_mutex_unlock(&s->queue);
    if (st != CUDA_OK) {
        /* Let the stream go on, marked as failed; a copy may still use the block, so it stays out
         * of the cache (freed with the cache at destroy). */
        store_word(g->status, 1);
        store_word(g->word, g->base + 1 + g->ranges);
        if (!queued) reduce_cache_free(pinned, host);
        g->host = NULL;
        give_back(g);
        LOG_ERROR(MOD, "pcclAllReduceOnStream: cannot order the op on the stream: %s", cu->status_string(st));
        return pcclInternalError;
    }
    *out = g;
    return pcclSuccess;
}

static void set_verdict(ccoip_gate_t *g) {
    pthread_mutex_lock(&g->set->lock);
    g->verdict = true;
    pthread_mutex_unlock(&g->set->lock);
}

/* True while an op called before g still holds back copies (on another stream: on g's own, g's
 * start event came after them). */
static bool earlier_held(ccoip_gate_t *g) {
    ccoip_gates_t *s = g->set;
    bool held = false;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < CCOIP_MAX_OPS && !held; i++)
        held = s->g[i].busy && !s->g[i].verdict && s->g[i].ticket < g->ticket;
    pthread_mutex_unlock(&s->lock);
    return held;
}

void ccoip_gate_wait_input(ccoip_gate_t *g) {
    const cuda_table_t *cu = g->set->cu;
    cuda_status_t st = cu->event_synchronize(g->event_start);
    /* Copies of all streams share a few copy-engine queues, and a gated host->device copy holds
     * the front of its queue until its range is released. Our pieces may queue behind such a
     * copy of an op called earlier that still waits for its ring: then the whole input must be
     * here before we ask the master, or that op could wait for our ring's turn while our ring
     * waits for it. Without such an op, nothing of ours can hold the pieces back (later ops'
     * copies were queued after them), and they overlap the ring. */
    if (st == CUDA_OK && g->pieces > 0 && earlier_held(g)) {
        st = cu->event_synchronize(g->event_piece[g->pieces - 1]);
        if (st == CUDA_OK) g->waited = g->pieces;
    }
    if (st != CUDA_OK)
        LOG_ERROR(MOD, "pcclAllReduceOnStream: waiting for the caller's stream to reach the op failed: %s",
                  cu->status_string(st));
}

/* ---- the ring's hooks (proxy thread, no lock held) ----------------------------------------- */

static int stage_input(void *ctx, size_t off, size_t len) {
    ccoip_gate_t *g = ctx;
    if (len == 0) return 0;
    uint32_t need = g->pieces;
    if (g->in_plan && len > 0) need = (uint32_t) (in_pos(g, off + len - 1) / g->part) + 1;
    if (need <= g->waited) return 0;
    /* Copies run in stream order: piece need-1 done means every piece before it is too. */
    cuda_status_t st = g->set->cu->event_synchronize(g->event_piece[need - 1]);
    if (st != CUDA_OK) {
        LOG_ERROR(MOD, "pcclAllReduceOnStream: copying sendbuf to the host failed: %s", g->set->cu->status_string(st));
        return -1;
    }
    g->waited = need;
    return 0;
}

static int stage_output(void *ctx, size_t off, size_t len) {
    ccoip_gate_t *g = ctx;
    if (!g->in_plan) return 0; /* ranges are released at the end */
    size_t pos = order_pos(g, g->rank, off);
    while (len > 0) {
        size_t i = pos / g->part, take = (i + 1) * g->part - pos < len ? (i + 1) * g->part - pos : len;
        g->final_bytes[i] += take;
        pos += take;
        len -= take;
    }
    uint32_t r = g->released;
    while (r < g->ranges && g->final_bytes[r] == (r + 1 < g->ranges ? g->part : g->bytes - (size_t) r * g->part))
        r++;
    if (r != g->released) {
        g->released = r;
        store_word(g->word, g->base + r); /* ranges 0 .. r-1 may go to recvbuf */
    }
    return 0;
}

const reduce_ring_stage_t *ccoip_gate_stage(ccoip_gate_t *g, uint32_t rank, uint32_t world) {
    atomic_store(&g->set->last_rank, rank);
    atomic_store(&g->set->last_world, world);
    g->in_plan = rank == g->rank && world == g->world;
    g->hooks = (reduce_ring_stage_t){stage_input, stage_output, g, 1};
    return &g->hooks;
}

void ccoip_gate_release(ccoip_gate_t *g, bool ok) {
    const cuda_table_t *cu = g->set->cu;
    /* Status first: the mark kernel reads it once the verdict lets the stream past. */
    if (!ok) {
        store_word(g->status, 1);
        LOG_WARN(MOD, "pcclAllReduceOnStream: the op failed after %u of %u ranges of the result were released to "
                      "recvbuf; the stream fills all of recvbuf with 0xFF bytes", g->released, g->ranges);
    }
    store_word(g->word, g->base + 1 + g->ranges);
    set_verdict(g);
    /* The stream now copies the rest out and marks; only then may the block serve another op. */
    cuda_status_t st = cu->event_synchronize(g->event_out);
    if (st == CUDA_OK) reduce_cache_free(g->pinned, g->host);
    else LOG_ERROR(MOD, "pcclAllReduceOnStream: waiting for the copy into recvbuf failed: %s",
                   cu->status_string(st));
    g->host = NULL;
    give_back(g);
}

void ccoip_gates_destroy(ccoip_gates_t *s) {
    if (s == NULL) return;
    for (int i = 0; i < CCOIP_MAX_OPS; i++) {
        ccoip_gate_t *g = &s->g[i];
        if (g->busy && g->host != NULL) { /* an op that never ran: its stream goes on, recvbuf marked */
            store_word(g->status, 1);
            store_word(g->word, g->base + 1 + g->ranges);
        }
        if (g->made) drop_events(s->cu, g);
    }
    s->cu->host_free(s->words);
    pthread_mutex_destroy(&s->queue);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
