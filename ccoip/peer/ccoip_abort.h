/* ccoip_abort.h: abort notices for collectives, from the master-link thread to whatever runs the
 * collective (the ring loop of the all-reduce work), without locks or system calls.
 *
 * The writer (one thread: the master link) stores the tag in a ring of recent tags, then bumps
 * `generation` (release). A poller keeps the generation it last saw: one relaxed/acquire load per
 * poll says whether anything new arrived; only then does it scan the recent tags. A notice older
 * than CCOIP_ABORT_HISTORY newer notices is forgotten (collectives in flight are far fewer). */
#ifndef CCOIP_ABORT_H
#define CCOIP_ABORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define CCOIP_ABORT_HISTORY 64u

typedef struct ccoip_abort_queue_t {
    _Atomic uint64_t generation;               /* number of notices ever pushed */
    _Atomic uint64_t tags[CCOIP_ABORT_HISTORY]; /* tags[g % HISTORY] = tag of notice g */
    atomic_bool all;                           /* everything aborted: master lost or comm closing */
} ccoip_abort_queue_t;

void ccoip_abort_init(ccoip_abort_queue_t *q);

/* Writer side (single thread). */
void ccoip_abort_push(ccoip_abort_queue_t *q, uint64_t tag);
void ccoip_abort_all(ccoip_abort_queue_t *q);

/* The cheap poll: true when something arrived since *seen (which it does not update). */
static inline bool ccoip_abort_changed(const ccoip_abort_queue_t *q, uint64_t seen) {
    return atomic_load_explicit(&q->generation, memory_order_acquire) != seen ||
           atomic_load_explicit(&q->all, memory_order_relaxed);
}

/* True when `tag` was aborted by a notice numbered >= *seen (or everything was); sets *seen to
 * the current generation. Start with *seen = the generation when the collective began. */
bool ccoip_abort_check(const ccoip_abort_queue_t *q, uint64_t tag, uint64_t *seen);

static inline uint64_t ccoip_abort_generation(const ccoip_abort_queue_t *q) {
    return atomic_load_explicit(&q->generation, memory_order_acquire);
}

#endif /* CCOIP_ABORT_H */
