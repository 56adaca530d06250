/* ccoip_abort.c: the abort-notice ring (see ccoip_abort.h). */
#include "ccoip/peer/ccoip_abort.h"

void ccoip_abort_init(ccoip_abort_queue_t *q) {
    atomic_init(&q->generation, 0);
    for (unsigned i = 0; i < CCOIP_ABORT_HISTORY; i++) atomic_init(&q->tags[i], 0);
    atomic_init(&q->all, false);
}

void ccoip_abort_push(ccoip_abort_queue_t *q, uint64_t tag) {
    uint64_t g = atomic_load_explicit(&q->generation, memory_order_relaxed);
    atomic_store_explicit(&q->tags[g % CCOIP_ABORT_HISTORY], tag, memory_order_relaxed);
    atomic_store_explicit(&q->generation, g + 1, memory_order_release);
}

void ccoip_abort_all(ccoip_abort_queue_t *q) { atomic_store_explicit(&q->all, true, memory_order_release); }

bool ccoip_abort_check(const ccoip_abort_queue_t *q, uint64_t tag, uint64_t *seen) {
    if (atomic_load_explicit(&q->all, memory_order_acquire)) return true;
    uint64_t g = atomic_load_explicit(&q->generation, memory_order_acquire);
    uint64_t from = *seen;
    if (g - from > CCOIP_ABORT_HISTORY) from = g - CCOIP_ABORT_HISTORY;
    bool hit = false;
    for (uint64_t i = from; i < g; i++)
        if (atomic_load_explicit(&q->tags[i % CCOIP_ABORT_HISTORY], memory_order_relaxed) == tag) hit = true;
    /* A slot read above may have been overwritten by a notice newer than g: harmless, that notice
     * is re-checked on the next poll because *seen stops at g. */
    *seen = g;
    return hit;
}
