/* threadpark: park a thread on a 32-bit word until another thread changes it and wakes it.
 *
 * Contract (the same on every platform):
 * - The word is shared memory that every party reads and writes atomically. The waker changes it
 *   with an atomic store (release), then calls tpark_wake_one() or tpark_wake_all().
 * - tpark_wait() atomically checks that *word still equals `expected` and, only if so, sleeps. A
 *   store + wake that happens before the wait is therefore never lost: the wait sees the new value
 *   and returns at once.
 * - tpark_wait() may return early and without a wake (signals, OS quirks): callers always re-read
 *   the word in a loop, e.g. with tpark_wait_until_ne().
 * - Only the address identifies the word: wakes for one word never release waiters of another
 *   (beyond spurious returns). Everything is private to the process.
 * - None of the calls allocates or fails on valid input; a failure of the OS primitive that can
 *   only mean a bug (bad address, missing system call) is logged and aborts, as libuv does for
 *   its mutexes.
 *
 * Implementations: threadpark_linux.c (futex), threadpark_darwin.c (__ulock), threadpark_win32.c
 * (WaitOnAddress), threadpark_posix.c (mutex + condvar buckets); the BUILD file picks one. */
#ifndef PCCL_THREADPARK_H
#define PCCL_THREADPARK_H

#include <stdint.h>

/* Return values of tpark_wait(). */
#define TPARK_OK 0      /* woken, the word did not hold `expected`, or a spurious return */
#define TPARK_TIMEOUT 1 /* the timeout elapsed (the word may have changed meanwhile: re-read it) */

/* Sleeps while *word == expected, until a wake, the timeout or a spurious return.
 * timeout_ns < 0 waits forever; 0 only checks the word. Timeouts are relative and rounded up to
 * the platform's granularity (1 us on macOS, 1 ms on Windows). A spurious return restarts nothing:
 * a caller that loops with a deadline recomputes the remaining time itself.
 * Returns TPARK_OK or TPARK_TIMEOUT. */
int tpark_wait(const uint32_t *word, uint32_t expected, int64_t timeout_ns);

/* Wakes one thread parked on word, if any. Cheap when nobody waits, but still a system call on
 * the native platforms: hot paths use the _counted helpers below, which skip it. */
void tpark_wake_one(const uint32_t *word);

/* Wakes every thread parked on word. */
void tpark_wake_all(const uint32_t *word);

/* Atomic helpers for the word, so that callers need not spell the builtins (gcc and clang). */
static inline uint32_t tpark_load(const uint32_t *word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }
static inline void tpark_store(uint32_t *word, uint32_t value) { __atomic_store_n(word, value, __ATOMIC_RELEASE); }

/* One iteration of a polite spin: tells the core that we are waiting (SMT sibling, power). */
static inline void tpark_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

/* Iterations of the bounded spin in tpark_wait_until_ne(): a few microseconds at most, enough to
 * catch a reply that is already on its way from another core without a sleep and a wake-up. */
#define TPARK_SPIN_ITERS 256

/* Waits until *word != value and returns the new value: a short bounded spin, then parks.
 * Forever: pair it with a waker that stores a new value and calls tpark_wake_*(). */
static inline uint32_t tpark_wait_until_ne(const uint32_t *word, uint32_t value) {
    uint32_t v;
    for (int i = 0; i < TPARK_SPIN_ITERS; i++) {
        v = tpark_load(word);
        if (v != value) return v;
        tpark_cpu_relax();
    }
    while ((v = tpark_load(word)) == value) tpark_wait(word, value, -1);
    return v;
}

/* Optional: skip the wake system call while nobody sleeps. `sleepers` is a counter the caller keeps
 * beside the word (zero-initialised) and passes to both sides. The waiter announces itself before
 * its last look at the word and the waker looks at the counter after its store, both seq_cst, so at
 * least one of them sees the other: either the waiter sees the new value or the waker wakes it. */
static inline uint32_t tpark_wait_until_ne_counted(const uint32_t *word, uint32_t value, uint32_t *sleepers) {
    uint32_t v;
    for (int i = 0; i < TPARK_SPIN_ITERS; i++) {
        v = tpark_load(word);
        if (v != value) return v;
        tpark_cpu_relax();
    }
    __atomic_fetch_add(sleepers, 1, __ATOMIC_SEQ_CST);
    while ((v = __atomic_load_n(word, __ATOMIC_SEQ_CST)) == value) tpark_wait(word, value, -1);
    __atomic_fetch_sub(sleepers, 1, __ATOMIC_RELAXED);
    return v;
}

/* Stores value into word and wakes one (or every) thread parked in tpark_wait_until_ne_counted(),
 * with a system call only when the counter says that someone sleeps. */
static inline void tpark_store_wake_one_counted(uint32_t *word, uint32_t value, const uint32_t *sleepers) {
    __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) != 0) tpark_wake_one(word);
}

static inline void tpark_store_wake_all_counted(uint32_t *word, uint32_t value, const uint32_t *sleepers) {
    __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) != 0) tpark_wake_all(word);
}

#endif /* PCCL_THREADPARK_H */
