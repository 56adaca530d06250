/* threadpark_shared_linux.c -- threadpark across processes: the futex without FUTEX_PRIVATE_FLAG,
 * which keys a wait on the page behind the address (inode and offset for a shared mapping), so
 * two processes that map the same memory at different addresses meet on it. */
#include "threadpark/threadpark_shared.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log/log.h"

bool tpark_shared_available(void) { return true; }

int tpark_wait_shared(const uint32_t *word, uint32_t expected, int64_t timeout_ns) {
    struct timespec ts, *tsp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = (time_t) (timeout_ns / 1000000000);
        ts.tv_nsec = (long) (timeout_ns % 1000000000);
        tsp = &ts; /* relative, CLOCK_MONOTONIC */
    }
    if (syscall(SYS_futex, (uint32_t *) word, FUTEX_WAIT, expected, tsp, NULL, 0) == 0) return TPARK_OK;
    switch (errno) {
    case EAGAIN: /* the word no longer held `expected` */
    case EINTR:
        return TPARK_OK;
    case ETIMEDOUT:
        return TPARK_TIMEOUT;
    default:
        LOG_ERROR("threadpark", "shared futex wait on %p failed: errno %d", (const void *) word, errno);
        abort();
    }
}

void tpark_wake_shared(const uint32_t *word) {
    if (syscall(SYS_futex, (uint32_t *) word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0) >= 0) return;
    LOG_ERROR("threadpark", "shared futex wake on %p failed: errno %d", (const void *) word, errno);
    abort();
}
