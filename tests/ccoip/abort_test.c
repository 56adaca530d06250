/* The abort ring: one writer, pollers that see each tag once, history overflow, "all". */
#include <pthread.h>

#include "ccoip/ccoip_abort.h"
#include "tests/common/check.h"

static ccoip_abort_queue_t q;

static void *writer(void *arg) {
    (void) arg;
    for (uint64_t t = 1; t <= 20000; t++) ccoip_abort_push(&q, t % 50 == 0 ? 7 : 1000 + t);
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
    const uint64_t g0 = seen;
    pthread_create(&w, NULL, writer, NULL);
    int hits = 0;
    while (ccoip_abort_generation(&q) - g0 < 20000)
        if (ccoip_abort_changed(&q, seen)) hits += ccoip_abort_check(&q, 7, &seen);
    pthread_join(w, NULL);
    CHECK(hits > 0);
    ccoip_abort_all(&q);
    CHECK(ccoip_abort_check(&q, 12345, &seen));
    return check_exit();
}
