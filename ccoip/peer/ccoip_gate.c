/* ccoip_gate.c: gates between a user's CUDA stream and the proxy thread (ccoip_gate.h). */
#include "ccoip/peer/ccoip_gate.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/peer/ccoip_peer_int.h"
#include "log/log.h"

#define MOD "pccl"

struct ccoip_gates_t {
    pthread_mutex_t lock; /* guards `busy` only: no CUDA call is made under it */
    const cuda_table_t *cu;
    uint32_t *words; /* CCOIP_MAX_OPS mapped words */
    ccoip_gate_t g[CCOIP_MAX_OPS];
};

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
    if (cu->flags_alloc(&s->words, CCOIP_MAX_OPS) != CUDA_OK) {
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    for (int i = 0; i < CCOIP_MAX_OPS; i++) {
        s->g[i].set = s;
        s->g[i].word = &s->words[i];
    }
    pthread_mutex_lock(lock);
    ccoip_gates_t *won = *slot;
    if (won == NULL) *slot = s;
    pthread_mutex_unlock(lock);
    if (won != NULL) {
        cu->host_free(s->words);
        pthread_mutex_destroy(&s->lock);
        free(s);
        s = won;
    }
    return s;
}

static bool make(const cuda_table_t *cu, ccoip_gate_t *g) {
    if (g->made) return true;
    if (cu->event_create(&g->event_in) != CUDA_OK || cu->event_create(&g->event_out) != CUDA_OK) {
        cu->event_destroy(g->event_in);
        g->event_in = NULL;
        return false;
    }
    g->made = true;
    return true;
}

static void give_back(ccoip_gate_t *g) {
    pthread_mutex_lock(&g->set->lock);
    g->busy = false;
    pthread_mutex_unlock(&g->set->lock);
}

static void store_word(ccoip_gate_t *g, uint32_t v) {
    atomic_store_explicit((_Atomic uint32_t *) g->word, v, memory_order_release);
    atomic_thread_fence(memory_order_seq_cst);
}

pcclResult_t ccoip_gate_open(ccoip_gates_t **slot, pthread_mutex_t *lock, reduce_cache_t *pinned, void *stream,
                             const void *sendbuf, void *recvbuf, size_t bytes, ccoip_gate_t **out) {
    *out = NULL;
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
    ccoip_gate_t *g = NULL;
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < CCOIP_MAX_OPS && g == NULL; i++)
        if (!s->g[i].busy) g = &s->g[i];
    if (g != NULL) g->busy = true;
    pthread_mutex_unlock(&s->lock);
    if (g == NULL) {
        LOG_ERROR(MOD, "pcclAllReduceOnStream: %d stream-ordered all-reduces are in flight, the most there may be",
                  CCOIP_MAX_OPS);
        reduce_cache_free(pinned, host);
        return pcclInvalidUsage;
    }
    const cuda_table_t *cu = s->cu;
    uint32_t target = atomic_load_explicit((_Atomic uint32_t *) g->word, memory_order_relaxed) + 1;
    if (!make(cu, g)) {
        reduce_cache_free(pinned, host);
        give_back(g);
        LOG_ERROR(MOD, "pcclAllReduceOnStream: cannot create CUDA events");
        return pcclInternalError;
    }
    int queued = 0; /* how much of the sequence is on the stream */
    cuda_status_t st = cu->memcpy_d2h_async(host, sendbuf, bytes, stream);
    if (st == CUDA_OK && ++queued && (st = cu->event_record(g->event_in, stream)) == CUDA_OK && ++queued &&
        (st = cu->stream_wait_flag(stream, g->word, target)) == CUDA_OK && ++queued &&
        (st = cu->memcpy_h2d_async(recvbuf, host, bytes, stream)) == CUDA_OK && ++queued)
        st = cu->event_record(g->event_out, stream);
    if (st != CUDA_OK) {
        /* Let the stream go on; a copy may still use the block, so it stays out of the cache
         * (freed with the cache at destroy). */
        store_word(g, target);
        if (queued == 0) reduce_cache_free(pinned, host);
        give_back(g);
        LOG_ERROR(MOD, "pcclAllReduceOnStream: cannot order the op on the stream: %s", cu->status_string(st));
        return pcclInternalError;
    }
    g->target = target;
    g->bytes = bytes;
    g->pinned = pinned;
    g->host = host;
    *out = g;
    return pcclSuccess;
}

void ccoip_gate_wait_input(ccoip_gate_t *g) {
    cuda_status_t st = g->set->cu->event_synchronize(g->event_in);
    if (st != CUDA_OK)
        LOG_ERROR(MOD, "pcclAllReduceOnStream: waiting for sendbuf on the caller's stream failed: %s; the block may "
                       "hold stale data", g->set->cu->status_string(st));
}

void ccoip_gate_release(ccoip_gate_t *g, bool ok) {
    const cuda_table_t *cu = g->set->cu;
    if (!ok) {
        /* After the copy in (it would overwrite the mark): what the stream copies into recvbuf. */
        cu->event_synchronize(g->event_in);
        memset(g->host, 0xff, g->bytes);
    }
    store_word(g, g->target);
    /* The stream now copies the block out; only then may the block serve another op. */
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
            s->cu->event_synchronize(g->event_in);
            memset(g->host, 0xff, g->bytes);
            store_word(g, g->target);
        }
        if (!g->made) continue;
        s->cu->event_destroy(g->event_in);
        s->cu->event_destroy(g->event_out);
    }
    s->cu->host_free(s->words);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
