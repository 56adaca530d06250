/* threadpark_shared_posix.c -- no wait/wake across processes (macOS's __ulock has a shared flavour,
 * but it is private API never run here, and nothing uses shared memory off Linux): waits are
 * plain sleeps, wakes do nothing (threadpark_shared.h). */
#include "threadpark/threadpark_shared.h"

#include <time.h>

bool tpark_shared_available(void) { return false; }

int tpark_wait_shared(const uint32_t *word, uint32_t expected, int64_t timeout_ns) {
    if (tpark_load(word) != expected) return TPARK_OK;
    if (timeout_ns < 0 || timeout_ns > 1000000000) timeout_ns = 1000000000; /* a poll, not a hang */
    struct timespec ts = {(time_t) (timeout_ns / 1000000000), (long) (timeout_ns % 1000000000)};
    nanosleep(&ts, NULL);
    return TPARK_TIMEOUT;
}

void tpark_wake_shared(const uint32_t *word) { (void) word; }
