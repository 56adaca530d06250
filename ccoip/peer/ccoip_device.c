/* pccl_device.c: CUDA device buffers in an all-reduce (pccl_device.h). */
#include "ccoip/peer/ccoip_device.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log/log.h"

#define MOD "pccl"
/* Device->host pieces grow from FIRST_PIECE, doubling, to PIECE_BYTES (larger inputs: bytes /
 * 224): the ring waits only for the first small piece before it starts. Copies are queued
 * LOOKAHEAD_BYTES ahead of the furthest piece the ring asked for, not the whole input at once.
 * Peer processes that share a GPU share its copy engines, which serve their queues a copy at a
 * time: with 4 MiB pieces 8 MiB ahead, one peer's first 256 KiB piece waited 0.4 to 0.9 ms
 * behind the others' queues (16 MiB, 2 peers, H200). 1 MiB pieces 2 MiB ahead: 16 MiB device
 * bus bandwidth 6.8 against 5.4 to 6.1 GB/s (2 peers), 64 and 256 MiB unchanged within noise
 * (issue 35, docs/cuda.md). */
#define FIRST_PIECE ((size_t) 256 << 10)
#define PIECE_BYTES ((size_t) 1 << 20)
#define MAX_PIECES ((size_t) 448) /* larger inputs get larger pieces */
#define LOOKAHEAD_BYTES ((size_t) 2 << 20)
/* Host->device ranges: bytes / OUT_PARTS, within these bounds (the last one is the tail that
 * the op waits for after its ring). */
#define OUT_PARTS 32
#define OUT_MIN ((size_t) 512 << 10)
#define OUT_MAX ((size_t) 4 << 20)

/* PCCL_DEVICE_COPIES (A/B runs): "late" (the ring asks for a receive's input when it processes
 * the frame, so links do not combine as frames land), "whole" (every copy in before the ring,
 * one copy out after it: no overlap). Default: overlapped, input asked for early. */
enum { COPIES_EARLY, COPIES_LATE, COPIES_WHOLE };
static pthread_once_t copies_once = PTHREAD_ONCE_INIT;
static int copies_mode = COPIES_EARLY;

/* The sizes above, in bytes; PCCL_DEVICE_FIRST_KIB, _PIECE_KIB, _AHEAD_KIB and _OUT_KIB (the
 * host->device range, bounds and all) change them for A/B runs. */
static size_t first_piece = FIRST_PIECE, piece_bytes = PIECE_BYTES, lookahead = LOOKAHEAD_BYTES;
static size_t out_min = OUT_MIN, out_max = OUT_MAX;

static void kib_env(const char *name, size_t *bytes, size_t *also) {
    const char *v = getenv(name);
    if (v == NULL) return;
    char *end = NULL;
    unsigned long long k = strtoull(v, &end, 10);
    if (end == v || *end != '\0' || k == 0 || k > ((size_t) 1 << 30)) {
        LOG_WARN(MOD, "%s=%s: want KiB, 1 or more; keeping %zu KiB", name, v, *bytes >> 10);
        return;
    }
    *bytes = (size_t) k << 10;
    if (also != NULL) *also = *bytes;
}

static void copies_init(void) {
    kib_env("PCCL_DEVICE_FIRST_KIB", &first_piece, NULL);
    kib_env("PCCL_DEVICE_PIECE_KIB", &piece_bytes, NULL);
    kib_env("PCCL_DEVICE_AHEAD_KIB", &lookahead, NULL);
    kib_env("PCCL_DEVICE_OUT_KIB", &out_min, &out_max);
    const char *v = getenv("PCCL_DEVICE_COPIES");
    if (v == NULL) return;
    if (strcmp(v, "late") == 0) copies_mode = COPIES_LATE;
    else if (strcmp(v, "whole") == 0) copies_mode = COPIES_WHOLE;
    else LOG_WARN(MOD, "PCCL_DEVICE_COPIES=%s: want \"late\" or \"whole\"; copies overlap the ring", v);
}

struct pccl_device_kit {
    pccl_device_kit_t *next;
    void *stream_in, *stream_out;
    void *caller_done; /* recorded on the legacy default stream; stream_in waits for it */
    void **events;     /* one per device->host piece, in queue order */
    size_t *offs;      /* piece i starts at byte offs[i] of the buffer */
    uint32_t *chunk;   /* and lies in chunk chunk[i] */
    size_t *by_off;    /* queue indices of the pieces in offset order */
    size_t *lens;      /* piece i's bytes */
    size_t *cum;       /* bytes of pieces 0 .. i */
    size_t cap;
};

/* Ops take a kit of streams and events from this list and give it back, instead of making
 * streams per op as before. Kits live as long as the process; their streams belong to the device
 * that was current when the kit was made. */
static pthread_mutex_t kits_lock = PTHREAD_MUTEX_INITIALIZER;
static pccl_device_kit_t *kits_free;

static void kit_put(pccl_device_kit_t *k) {
    if (k == NULL) return;
    pthread_mutex_lock(&kits_lock);
    k->next = kits_free;
    kits_free = k;
    pthread_mutex_unlock(&kits_lock);
}

/* A kit with at least `pieces` events; NULL (logged) when CUDA or memory refuse. */
static pccl_device_kit_t *kit_get(const cuda_table_t *cu, size_t pieces) {
    pthread_mutex_lock(&kits_lock);
    pccl_device_kit_t *k = kits_free;
    if (k != NULL) kits_free = k->next;
    pthread_mutex_unlock(&kits_lock);
    cuda_status_t st = CUDA_OK;
    if (k == NULL) {
        k = calloc(1, sizeof *k);
        if (k == NULL) return NULL;
        st = cu->stream_create(&k->stream_in);
        if (st == CUDA_OK) st = cu->stream_create(&k->stream_out);
        if (st == CUDA_OK) st = cu->event_create(&k->caller_done);
        if (st != CUDA_OK) {
            LOG_ERROR(MOD, "all-reduce of device buffers: cannot create streams: %s", cu->status_string(st));
            cu->stream_destroy(k->stream_in);
            cu->stream_destroy(k->stream_out);
            cu->event_destroy(k->caller_done);
            free(k);
            return NULL;
        }
    }
    if (k->cap < pieces) {
        void **ev = realloc(k->events, pieces * sizeof *ev);
        if (ev != NULL) k->events = ev;
        size_t *offs = ev != NULL ? realloc(k->offs, pieces * sizeof *offs) : NULL;
        if (offs != NULL) k->offs = offs;
        uint32_t *chunk = offs != NULL ? realloc(k->chunk, pieces * sizeof *chunk) : NULL;
        if (chunk != NULL) k->chunk = chunk;
        size_t *by_off = chunk != NULL ? realloc(k->by_off, pieces * sizeof *by_off) : NULL;
        if (by_off != NULL) k->by_off = by_off;
        size_t *lens = by_off != NULL ? realloc(k->lens, pieces * sizeof *lens) : NULL;
        if (lens != NULL) k->lens = lens;
        size_t *cum = lens != NULL ? realloc(k->cum, pieces * sizeof *cum) : NULL;
        if (cum != NULL) k->cum = cum;
        for (size_t i = k->cap; cum != NULL && i < pieces; i++) {
            if ((st = cu->event_create(&k->events[i])) != CUDA_OK) break;
            k->cap = i + 1;
        }
        if (k->cap < pieces) {
            LOG_ERROR(MOD, "all-reduce of device buffers: cannot create %zu events", pieces);
            kit_put(k);
            return NULL;
        }
    }
    return k;
}

pccl_buffer_kind_t pccl_buffers_kind(const void *sendbuf, const void *recvbuf) {
    const cuda_table_t *cu = cuda_table();
    if (cu == NULL) return PCCL_BUFFERS_HOST;
    bool s = cu->is_device_pointer(sendbuf), r = cu->is_device_pointer(recvbuf);
    if (s && r) return PCCL_BUFFERS_DEVICE;
    return s || r ? PCCL_BUFFERS_MIXED : PCCL_BUFFERS_HOST;
}

static void *pinned_alloc(void *ctx, size_t n) {
    void *p = NULL;
    return ((const cuda_table_t *) ctx)->host_alloc(&p, n) == CUDA_OK ? p : NULL;
}

static void pinned_free(void *ctx, void *p) {
    ((const cuda_table_t *) ctx)->host_free(p);
}

reduce_cache_t *pccl_pinned_cache(reduce_cache_t **slot, pthread_mutex_t *lock) {
    const cuda_table_t *cu = cuda_table();
    if (cu == NULL) return NULL;
    pthread_mutex_lock(lock);
    if (*slot == NULL) {
        reduce_cache_source_t src = {pinned_alloc, pinned_free, (void *) cu};
        *slot = reduce_cache_create_from(&src);
    }
    reduce_cache_t *c = *slot;
    pthread_mutex_unlock(lock);
    return c;
}

/* The k-th chunk of the ring's input order: chunk (rank - 1 - k) mod world. */
static uint32_t chunk_of_order(const pccl_device_op_t *op, uint32_t k, size_t *start, size_t *len) {
    uint32_t c = (op->rank + 2 * op->world - 1 - k) % op->world;
    reduce_ring_chunk(op->count, op->esz, op->world, c, start, len);
    return c;
}

static size_t max_piece(size_t bytes) {
    size_t p = (bytes + MAX_PIECES / 2 - 1) / (MAX_PIECES / 2);
    return p > piece_bytes ? p : piece_bytes;
}

/* The pieces in the order they are queued; fn (when not NULL) gets each one's queue index,
 * chunk, device offset and length, and may stop the walk by returning false. Returns how many
 * there are. The ring reads chunk rank-1 (its first sends) and chunk rank-2 (its first
 * reduce-scatter receives, combined with our input) at the same pace, then one chunk per step
 * (rank-3, ..., rank): so pieces of the first two chunks alternate, the others follow in turn. */
typedef bool piece_fn(pccl_device_op_t *op, size_t i, uint32_t chunk, size_t off, size_t len);

static size_t plan_pieces(pccl_device_op_t *op, piece_fn *fn) {
    size_t n = 0, big = max_piece(op->bytes);
    size_t start[2], len[2] = {0, 0}, at[2] = {0, 0};
    uint32_t c[2];
    uint32_t lead = op->world >= 2 ? 2 : 1;
    for (uint32_t k = 0; k < lead; k++) c[k] = chunk_of_order(op, k, &start[k], &len[k]);
    for (uint32_t k = 0; k < op->world;) {
        size_t want = n < 24 && (first_piece << (n / 2)) < big ? first_piece << (n / 2) : big;
        if (k < lead) {
            bool any = false;
            for (uint32_t j = 0; j < lead; j++) {
                if (at[j] >= len[j]) continue;
                size_t take = len[j] - at[j] < want ? len[j] - at[j] : want;
                if (fn != NULL && !fn(op, n, c[j], start[j] + at[j], take)) return n;
                at[j] += take;
                n++;
                any = true;
            }
            if (!any) k = lead;
            continue;
        }
        size_t s0, l0, a0 = 0;
        uint32_t ck = chunk_of_order(op, k, &s0, &l0);
        while (a0 < l0) {
            want = n < 24 && (first_piece << (n / 2)) < big ? first_piece << (n / 2) : big;
            size_t take = l0 - a0 < want ? l0 - a0 : want;
            if (fn != NULL && !fn(op, n, ck, s0 + a0, take)) return n;
            a0 += take;
            n++;
        }
        k++;
    }
    return n;
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec * 1e-3;
}

static bool copy_failed(pccl_device_op_t *op, const char *what, cuda_status_t st) {
    LOG_ERROR(MOD, "all-reduce of device buffers: %s failed: %s", what, op->cu->status_string(st));
    op->failed = true;
    return false;
}

static bool record_piece(pccl_device_op_t *op, size_t i, uint32_t chunk, size_t off, size_t len) {
    pccl_device_kit_t *k = op->kit;
    k->offs[i] = off;
    k->chunk[i] = chunk;
    k->lens[i] = len;
    k->cum[i] = (i > 0 ? k->cum[i - 1] : 0) + len;
    op->pieces = i + 1;
    return true;
}

/* Queues the pieces up to `need` and LOOKAHEAD_BYTES beyond it (all of them with `all`). */
static bool top_up(pccl_device_op_t *op, size_t need, bool all) {
    pccl_device_kit_t *k = op->kit;
    size_t before = need > 0 ? k->cum[need - 1] : 0;
    while (!op->failed && op->queued < op->pieces &&
           (all || op->queued <= need || k->cum[op->queued - 1] - before < lookahead)) {
        size_t i = op->queued, off = k->offs[i];
        cuda_status_t st = op->cu->memcpy_d2h_async(op->host + off, op->dev_in + off, k->lens[i], k->stream_in);
        if (st == CUDA_OK) st = op->cu->event_record(k->events[i], k->stream_in);
        if (st != CUDA_OK) return copy_failed(op, "device-to-host copy", st);
        op->queued++;
    }
    return !op->failed;
}

/* kit->by_off: the queue indices in offset order. Each chunk's pieces were queued in offset
 * order, so a counting sort by chunk does it. */
static void index_pieces(pccl_device_op_t *op) {
    pccl_device_kit_t *k = op->kit;
    size_t at = 0;
    for (uint32_t c = 0; c < op->world; c++)
        for (size_t i = 0; i < op->pieces; i++)
            if (k->chunk[i] == c) k->by_off[at++] = i;
}

static int stage_input(void *ctx, size_t off, size_t len) {
    pccl_device_op_t *op = ctx;
    pccl_device_kit_t *k = op->kit;
    if (op->failed) return -1;
    if (len == 0) return 0;
    if (op->pieces == 0) return -1;
    /* The piece holding the range's last byte: a ring range lies in one chunk, whose pieces
     * were queued in offset order, so it is the last one queued of those the range touches. */
    size_t last = off + len - 1, lo = 0, hi = op->pieces;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (k->offs[k->by_off[mid]] <= last) lo = mid;
        else hi = mid;
    }
    size_t q = k->by_off[lo];
    if (q > op->need) op->need = q;
    if (!top_up(op, op->need, false)) return -1;
    if (q < op->waited) return 0;
    /* Copies on one stream finish in order: piece q done means every piece before it is too. */
    double t0 = op->trace ? now_us() : 0;
    cuda_status_t st = op->cu->event_synchronize(k->events[q]);
    if (op->trace) {
        double t1 = now_us();
        size_t used = strlen(op->waits);
        if (used + 24 < sizeof op->waits)
            snprintf(op->waits + used, sizeof op->waits - used, " %zu@%.0f+%.0f", q, t0 - op->t_begin, t1 - t0);
        op->t_wait += t1 - t0;
        op->n_wait++;
    }
    if (st != CUDA_OK) {
        copy_failed(op, "device-to-host copy", st);
        return -1;
    }
    op->waited = q + 1;
    return 0;
}

static bool flush_output(pccl_device_op_t *op) {
    if (op->out_len == 0) return true;
    cuda_status_t st = op->cu->memcpy_h2d_async(op->dev_out + op->out_off, op->host + op->out_off, op->out_len,
                                                op->kit->stream_out);
    op->out_len = 0;
    return st == CUDA_OK || copy_failed(op, "host-to-device copy", st);
}

static int stage_output(void *ctx, size_t off, size_t len) {
    pccl_device_op_t *op = ctx;
    if (op->mode == COPIES_WHOLE) return 0; /* one copy at the end */
    if (op->out_len > 0 && off == op->out_off + op->out_len) {
        op->out_len += len;
    } else if (op->out_len > 0 && off + len == op->out_off) {
        op->out_off = off;
        op->out_len += len;
    } else {
        if (!flush_output(op)) return -1;
        op->out_off = off;
        op->out_len = len;
    }
    if (op->out_len >= op->out_piece && !flush_output(op)) return -1;
    return 0;
}

pcclResult_t pccl_device_begin(pccl_device_op_t *op, reduce_cache_t *pinned, const void *sendbuf, void *recvbuf,
                               size_t count, size_t esz, uint32_t rank, uint32_t world) {
    memset(op, 0, sizeof *op);
    pthread_once(&copies_once, copies_init);
    op->trace = log_enabled(LOG_LEVEL_DEBUG);
    if (op->trace) op->t_begin = now_us();
    op->cu = cuda_table();
    if (op->cu == NULL || pinned == NULL || world == 0) {
        LOG_ERROR(MOD, "all-reduce of device buffers: no CUDA support or no pinned memory");
        return pcclInternalError;
    }
    op->pinned = pinned;
    op->dev_in = sendbuf;
    op->dev_out = recvbuf;
    op->count = count;
    op->esz = esz;
    op->bytes = count * esz;
    op->rank = rank;
    op->world = world;
    size_t out = op->bytes / OUT_PARTS;
    op->out_piece = out < out_min ? out_min : out > out_max ? out_max : out;
    op->host = reduce_cache_alloc(pinned, op->bytes);
    if (op->host == NULL) {
        LOG_ERROR(MOD, "all-reduce of device buffers: no pinned host block of %zu bytes", op->bytes);
        return pcclInternalError;
    }
    op->kit = kit_get(op->cu, plan_pieces(op, NULL) + 1);
    if (op->kit == NULL) {
        pccl_device_end(op, false);
        return pcclInternalError;
    }
    /* Our streams are non-blocking: the copies wait (on the GPU, not here) for the work the
     * caller queued on the legacy default stream (PyTorch's default stream, and through it every
     * blocking stream), which may still be writing sendbuf. */
    cuda_status_t st = op->cu->event_record(op->kit->caller_done, NULL);
    if (st == CUDA_OK) st = op->cu->stream_wait_event(op->kit->stream_in, op->kit->caller_done);
    if (st != CUDA_OK) {
        LOG_ERROR(MOD, "all-reduce of device buffers: ordering after the caller's GPU work failed: %s",
                  op->cu->status_string(st));
        pccl_device_end(op, false);
        return pcclInternalError;
    }
    /* The plan, then the first pieces in the order the ring reads them; stage_input queues the
     * rest as the ring goes, LOOKAHEAD_BYTES ahead, and waits only for the piece it needs. */
    op->mode = copies_mode;
    plan_pieces(op, record_piece);
    index_pieces(op);
    if (!top_up(op, 0, op->mode == COPIES_WHOLE)) {
        pccl_device_end(op, false);
        return pcclInternalError;
    }
    if (op->mode == COPIES_WHOLE && op->pieces > 0) {
        cuda_status_t st2 = op->cu->event_synchronize(op->kit->events[op->pieces - 1]);
        if (st2 != CUDA_OK) {
            copy_failed(op, "device-to-host copy", st2);
            pccl_device_end(op, false);
            return pcclInternalError;
        }
        op->waited = op->pieces;
    }
    op->hooks = (reduce_ring_stage_t){stage_input, stage_output, op, op->mode == COPIES_EARLY};
    if (op->trace) op->t_queued = now_us();
    return pcclSuccess;
}

bool pccl_device_end(pccl_device_op_t *op, bool ring_ok) {
    double t_end = op->trace ? now_us() : 0;
    if (op->kit != NULL) {
        if (ring_ok && !op->failed && op->mode == COPIES_WHOLE) {
            op->out_off = 0;
            op->out_len = op->bytes;
        }
        if (ring_ok && !op->failed) flush_output(op);
        /* Copies in flight read or write the block: wait for them before it is reused. */
        void *streams[2] = {op->kit->stream_out, op->kit->stream_in};
        for (int i = 0; i < 2; i++) {
            cuda_status_t st = op->cu->stream_synchronize(streams[i]);
            if (st != CUDA_OK) copy_failed(op, i ? "device-to-host copy" : "host-to-device copy", st);
        }
        kit_put(op->kit);
        op->kit = NULL;
    }
    if (op->host != NULL) reduce_cache_free(op->pinned, op->host);
    op->host = NULL;
    if (op->trace && op->t_queued > 0)
        LOG_DEBUG(MOD, "all-reduce of device buffers, %zu bytes, rank %u of %u: %zu copies in queued in %.0f us; the ring "
                       "ran %.0f us, of which %.0f us in %u waits for input (piece@since-start+waited:%s); the last "
                       "copies out took %.0f us",
                  op->bytes, op->rank, op->world, op->pieces, op->t_queued - op->t_begin, t_end - op->t_queued,
                  op->t_wait, op->n_wait, op->waits, now_us() - t_end);
    return !op->failed;
}
