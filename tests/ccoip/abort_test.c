/* The abort ring: one writer, pollers that see each tag once, history overflow, "all". */
#include <pthread.h>

#include "ccoip/peer/ccoip_abort.h"
#include "tests/common/check.h"

#include <sched.h>
#include <stdatomic.h>

#define BURSTS 500
#define BURST 32 /* < CCOIP_ABORT_HISTORY: a poller that keeps up never misses a tag */

static ccoip_abort_queue_t q;
static _Atomic uint64_t reader_seen;

static void *writer(void *arg) {
    uint64_t g0 = *(uint64_t *) arg;
    for (uint64_t b = 0; b < BURSTS; b++) {
        for (uint64_t t = 0; t < BURST; t++) ccoip_abort_push(&q, t == b % BURST ? 7 : 1000 + t);
        while (atomic_load(&reader_seen) < g0 + (b + 1) * BURST) sched_yield();
    }
    return NULL;
}

int main(void) {
    ccoip_abort_init(&q);
    uint64_t seen = ccoip_abort_generation(&q);
    CHECK(!ccoip_abort_changed(&q, seen));
    ccoip_abort_push(&q, 5);
    CHECK(ccoip_abort_changed(&q, seen));
    uint64_t s2 = seen;
    CHECK(ccoip_abort_check(&q, 5, &seen));
    CHECK(!ccoip_abort_check(&q, 5, &seen)); /* consumed by *seen */
    CHECK(!ccoip_abort_check(&q, 6, &s2));
    for (uint64_t t = 0; t < 3 * CCOIP_ABORT_HISTORY; t++) ccoip_abort_push(&q, 100 + t);
    uint64_t old = 0;
    CHECK(!ccoip_abort_check(&q, 100, &old)); /* beyond the history */
    old = 0;
    CHECK(ccoip_abort_check(&q, 100 + 3 * CCOIP_ABORT_HISTORY - 1, &old));

    /* A concurrent writer and a poller (TSan checks the orderings). */
    pthread_t w;
    seen = ccoip_abort_generation(&q);
    uint64_t g0 = seen;
    pthread_create(&w, NULL, writer, &g0);
    int hits = 0;
    while (seen - g0 < (uint64_t) BURSTS * BURST) {
        if (ccoip_abort_changed(&q, seen)) hits += ccoip_abort_check(&q, 7, &seen);
        else sched_yield();
        atomic_store(&reader_seen, seen);
    }
    pthread_join(w, NULL);
    /* A check may span two bursts (one hit for two tags) but never misses all: at least half. */
    CHECK(hits >= BURSTS / 2 && hits <= BURSTS);
    ccoip_abort_all(&q);
    CHECK(ccoip_abort_check(&q, 12345, &seen));
    return check_exit();
}
