/* threadpark_darwin.c -- threadpark on xnu's __ulock_wait/__ulock_wake (macOS 10.12+).
 *
 * These are the private system calls under os_unfair_lock and libdispatch; libc++ (std::atomic
 * wait) and Rust's std use them too. The prototypes come from xnu's bsd/sys/ulock.h, which is not
 * installed, so they are declared here. The timeout is in microseconds and 0 means forever. */
#include "threadpark/threadpark.h"

#include <errno.h>
#include <stdlib.h>

#include "log/log.h"

extern int __ulock_wait(uint32_t operation, void *addr, uint64_t value, uint32_t timeout_us);
extern int __ulock_wake(uint32_t operation, void *addr, uint64_t wake_value);

#define UL_COMPARE_AND_WAIT 1
#define ULF_WAKE_ALL 0x00000100
#define ULF_NO_ERRNO 0x01000000 /* return -errno instead of setting errno */

int tpark_wait(const uint32_t *word, uint32_t expected, int64_t timeout_ns) {
    uint32_t timeout_us = 0; /* forever */
    int clamped = 0;
    if (timeout_ns == 0) return tpark_load(word) == expected ? TPARK_TIMEOUT : TPARK_OK;
    if (timeout_ns > 0) {
        /* Round up so that a wait never ends before the timeout; the longest one the call takes is
         * about 71 minutes: past that, report a spurious return and let the caller's loop go on. */
        uint64_t us = ((uint64_t) timeout_ns + 999) / 1000;
        if (us > UINT32_MAX) {
            us = UINT32_MAX;
            clamped = 1;
        }
        timeout_us = (uint32_t) us;
    }
    int rc = __ulock_wait(UL_COMPARE_AND_WAIT | ULF_NO_ERRNO, (void *) word, expected, timeout_us);
    if (rc >= 0) return TPARK_OK; /* woken, or the word no longer held `expected` */
    switch (-rc) {
    case EINTR:
    case EFAULT: /* the kernel could not read the page at that moment: libplatform retries too */
        return TPARK_OK;
    case ETIMEDOUT:
        return clamped ? TPARK_OK : TPARK_TIMEOUT;
    default:
        LOG_ERROR("threadpark", "__ulock_wait on %p failed: errno %d", (const void *) word, -rc);
        abort();
    }
}

static void wake(const uint32_t *word, uint32_t flags) {
    for (;;) {
        int rc = __ulock_wake(UL_COMPARE_AND_WAIT | ULF_NO_ERRNO | flags, (void *) word, 0);
        if (rc >= 0 || rc == -ENOENT) return; /* ENOENT: nobody was waiting */
        if (rc == -EINTR) continue;
        LOG_ERROR("threadpark", "__ulock_wake on %p failed: errno %d", (const void *) word, -rc);
        abort();
    }
}

void tpark_wake_one(const uint32_t *word) { wake(word, 0); }

void tpark_wake_all(const uint32_t *word) { wake(word, ULF_WAKE_ALL); }
