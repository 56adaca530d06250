/* threadpark_shared.h: park/unpark on a 32-bit word that lives in memory shared between
 * processes (a MAP_SHARED mapping), for wait/wake across a process boundary.
 *
 * The contract of threadpark.h holds (atomic check-and-sleep, spurious returns, re-read the word
 * in a loop), with two differences: the word may be mapped at different addresses in the two
 * processes (the kernel keys the wait on the memory, not the address), and the primitive exists
 * on Linux only (FUTEX_WAIT/FUTEX_WAKE without FUTEX_PRIVATE_FLAG). Elsewhere
 * tpark_shared_available() is false, tpark_wait_shared() sleeps for the timeout (at most 1 s)
 * without seeing wakes, and tpark_wake_shared() does nothing: nothing uses them there.
 *
 * Implementations: threadpark_shared_linux.c (futex), threadpark_shared_posix.c (macOS, others:
 * unavailable), threadpark_shared_win32.c (unavailable: WaitOnAddress is per process). */
#ifndef PCCL_THREADPARK_SHARED_H
#define PCCL_THREADPARK_SHARED_H

#include <stdbool.h>
#include <stdint.h>

#include "threadpark/threadpark.h"

/* True where a wait on a shared word is woken by a wake from another process. */
bool tpark_shared_available(void);

/* Sleeps while *word == expected, until a wake (from any process that maps the word), the
 * timeout (timeout_ns < 0: forever) or a spurious return. Returns TPARK_OK or TPARK_TIMEOUT. */
int tpark_wait_shared(const uint32_t *word, uint32_t expected, int64_t timeout_ns);

/* Wakes every thread, in any process, parked on word. */
void tpark_wake_shared(const uint32_t *word);

#endif /* PCCL_THREADPARK_SHARED_H */
