/* threadpark_linux.c -- threadpark on the Linux futex (private to the process). */
#include "threadpark/threadpark.h"

#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log/log.h"

static long futex(const uint32_t *word, int op, uint32_t val, const struct timespec *timeout) {
    /* The kernel only reads the word for FUTEX_WAIT and uses the address as a key for FUTEX_WAKE. */
    return syscall(SYS_futex, (uint32_t *) word, op, val, timeout, NULL, 0);
}

int tpark_wait(const uint32_t *word, uint32_t expected, int64_t timeout_ns) {
    struct timespec ts, *tsp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = (time_t) (timeout_ns / 1000000000);
        ts.tv_nsec = (long) (timeout_ns % 1000000000);
        tsp = &ts; /* FUTEX_WAIT takes a relative timeout (CLOCK_MONOTONIC). */
    }
    if (futex(word, FUTEX_WAIT_PRIVATE, expected, tsp) == 0) return TPARK_OK;
    switch (errno) {
    case EAGAIN: /* the word no longer held `expected` */
    case EINTR:
        return TPARK_OK;
    case ETIMEDOUT:
        return TPARK_TIMEOUT;
    default:
        LOG_ERROR("threadpark", "futex wait on %p failed: errno %d", (const void *) word, errno);
        abort();
    }
}

static void wake(const uint32_t *word, uint32_t count) {
    if (futex(word, FUTEX_WAKE_PRIVATE, count, NULL) >= 0) return;
    LOG_ERROR("threadpark", "futex wake on %p failed: errno %d", (const void *) word, errno);
    abort();
}

void tpark_wake_one(const uint32_t *word) { wake(word, 1); }

void tpark_wake_all(const uint32_t *word) { wake(word, (uint32_t) INT32_MAX); }
