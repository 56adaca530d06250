/* pccl_device.c: CUDA device buffers in an all-reduce (pccl_device.h). */
#include "ccoip/peer/ccoip_device.h"

#include <pthread.h>
#include <string.h>

#include "log/log.h"

#define MOD "pccl"
#define PIECE_BYTES ((size_t) 4 << 20)      /* one cudaMemcpyAsync */
#define LOOKAHEAD_BYTES ((size_t) 16 << 20) /* device->host copies queued ahead of the ring */

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

static void chunk_of_order(const pccl_device_op_t *op, uint32_t k, size_t *start, size_t *len) {
    uint32_t c = (op->rank + 2 * op->world - 1 - k) % op->world;
    reduce_ring_chunk(op->count, op->esz, op->world, c, start, len);
}

/* The position in chunk order of byte `off`: (k, offset inside that chunk). */
static void order_of(const pccl_device_op_t *op, size_t off, uint32_t *k, size_t *in_chunk) {
    size_t e = off / op->esz, base = op->count / op->world, rem = op->count % op->world;
    size_t c = e < rem * (base + 1) ? e / (base + 1) : rem + (e - rem * (base + 1)) / base;
    size_t start, len;
    reduce_ring_chunk(op->count, op->esz, op->world, (uint32_t) c, &start, &len);
    *k = (op->rank + 2 * op->world - 1 - (uint32_t) c) % op->world;
    *in_chunk = off - start;
}

static bool covered(uint32_t k_front, size_t off_front, uint32_t k, size_t end) {
    return k < k_front || (k == k_front && end <= off_front);
}

static bool copy_failed(pccl_device_op_t *op, const char *what, cuda_status_t st) {
    LOG_ERROR(MOD, "all-reduce of device buffers: %s failed: %s", what, op->cu->status_string(st));
    op->failed = true;
    return false;
}

/* Queues the next device->host piece in chunk order; false at the end or on failure. */
static bool queue_piece(pccl_device_op_t *op) {
    size_t start, len;
    while (op->queued_k < op->world) {
        chunk_of_order(op, op->queued_k, &start, &len);
        if (op->queued_off < len) break;
        op->queued_k++;
        op->queued_off = 0;
    }
    if (op->queued_k >= op->world) return false;
    size_t n = len - op->queued_off < PIECE_BYTES ? len - op->queued_off : PIECE_BYTES;
    size_t at = start + op->queued_off;
    cuda_status_t st = op->cu->memcpy_d2h_async(op->host + at, op->dev_in + at, n, op->stream_in);
    if (st != CUDA_OK) return copy_failed(op, "device-to-host copy", st);
    op->queued_off += n;
    op->queued_bytes += n;
    return true;
}

static int stage_input(void *ctx, size_t off, size_t len) {
    pccl_device_op_t *op = ctx;
    uint32_t k;
    size_t in_chunk;
    order_of(op, off, &k, &in_chunk);
    size_t end = in_chunk + len;
    if (!covered(op->ready_k, op->ready_off, k, end)) {
        while (!covered(op->queued_k, op->queued_off, k, end))
            if (!queue_piece(op)) return -1;
        cuda_status_t st = op->cu->stream_synchronize(op->stream_in);
        if (st != CUDA_OK) {
            copy_failed(op, "device-to-host copy", st);
            return -1;
        }
        op->ready_k = op->queued_k;
        op->ready_off = op->queued_off;
        op->ready_bytes = op->queued_bytes;
    }
    while (op->queued_bytes - op->ready_bytes < LOOKAHEAD_BYTES && queue_piece(op)) {
    }
    return op->failed ? -1 : 0;
}

static bool flush_output(pccl_device_op_t *op) {
    if (op->out_len == 0) return true;
    cuda_status_t st =
        op->cu->memcpy_h2d_async(op->dev_out + op->out_off, op->host + op->out_off, op->out_len, op->stream_out);
    op->out_len = 0;
    return st == CUDA_OK || copy_failed(op, "host-to-device copy", st);
}

static int stage_output(void *ctx, size_t off, size_t len) {
    pccl_device_op_t *op = ctx;
    if (op->out_len > 0 && off != op->out_off + op->out_len && !flush_output(op)) return -1;
    if (op->out_len == 0) op->out_off = off;
    op->out_len += len;
    if (op->out_len >= PIECE_BYTES && !flush_output(op)) return -1;
    return 0;
}

pcclResult_t pccl_device_begin(pccl_device_op_t *op, reduce_cache_t *pinned, const void *sendbuf, void *recvbuf,
                               size_t count, size_t esz, uint32_t rank, uint32_t world) {
    memset(op, 0, sizeof *op);
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
    op->rank = rank;
    op->world = world;
    op->host = reduce_cache_alloc(pinned, count * esz);
    if (op->host == NULL) {
        LOG_ERROR(MOD, "all-reduce of device buffers: no pinned host block of %zu bytes", count * esz);
        return pcclInternalError;
    }
    /* Our streams are non-blocking: wait for the work the caller queued on the legacy default
     * stream (PyTorch's default stream, and through it every blocking stream) that may still be
     * writing sendbuf. */
    cuda_status_t st = op->cu->stream_synchronize(NULL);
    if (st != CUDA_OK) {
        LOG_ERROR(MOD, "all-reduce of device buffers: waiting for the caller's GPU work failed: %s",
                  op->cu->status_string(st));
        pccl_device_end(op, false);
        return pcclInternalError;
    }
    st = op->cu->stream_create(&op->stream_in);
    if (st == CUDA_OK) st = op->cu->stream_create(&op->stream_out);
    if (st != CUDA_OK) {
        LOG_ERROR(MOD, "all-reduce of device buffers: cannot create streams: %s", op->cu->status_string(st));
        pccl_device_end(op, false);
        return pcclInternalError;
    }
    op->hooks = (reduce_ring_stage_t){stage_input, stage_output, op};
    return pcclSuccess;
}

bool pccl_device_end(pccl_device_op_t *op, bool ring_ok) {
    if (ring_ok) flush_output(op);
    /* Copies in flight read or write the block: wait for them before it is reused. */
    void *streams[2] = {op->stream_in, op->stream_out};
    for (int i = 0; i < 2; i++) {
        if (streams[i] == NULL) continue;
        cuda_status_t st = op->cu->stream_synchronize(streams[i]);
        if (st != CUDA_OK) copy_failed(op, i ? "host-to-device copy" : "device-to-host copy", st);
        op->cu->stream_destroy(streams[i]);
    }
    reduce_cache_free(op->pinned, op->host);
    op->host = NULL;
    return !op->failed;
}
