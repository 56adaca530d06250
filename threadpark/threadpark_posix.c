/* threadpark_posix.c -- portable threadpark: a fixed table of buckets keyed by address.
 *
 * Each bucket holds a mutex and a list of the threads parked on words that hash to it; each parked
 * thread waits on its own condition variable, so a wake releases exactly the waiters of that word
 * (no thundering herd, no cross-talk between words that share a bucket). The waiter checks the word
 * under the bucket mutex and the waker takes the same mutex after storing the new value, so a wake
 * that comes before the wait is never lost.
 *
 * Timed waits count on CLOCK_MONOTONIC on every platform (monocond.h: macOS has no
 * pthread_condattr_setclock, winpthreads no monotonic condvars). This file is the threadpark of
 * platforms without a native one, and is built everywhere as //threadpark:threadpark_fallback. */
#include "threadpark/threadpark.h"
#include "threadpark/monocond.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "log/log.h"

typedef struct tpark_waiter {
    const uint32_t *word;
    struct tpark_waiter *next, *prev;
    pthread_cond_t cond;
    int woken; /* set by the waker, under the bucket mutex, when it unlinks the waiter */
} tpark_waiter;

/* Padded to a cache line so that busy buckets do not share lines. */
typedef struct tpark_bucket {
    pthread_mutex_t mutex;
    tpark_waiter *head, *tail; /* FIFO: wake_one releases the longest waiter */
} __attribute__((aligned(64))) tpark_bucket;

#define TPARK_BUCKET_BITS 8

static tpark_bucket buckets[1u << TPARK_BUCKET_BITS];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void check(int rc, const char *what) {
    if (rc == 0) return;
    LOG_ERROR("threadpark", "%s failed: errno %d", what, rc);
    abort();
}

static void init_buckets(void) {
    for (size_t i = 0; i < sizeof buckets / sizeof buckets[0]; i++)
        check(pthread_mutex_init(&buckets[i].mutex, NULL), "pthread_mutex_init");
}

static tpark_bucket *bucket_of(const uint32_t *word) {
    pthread_once(&init_once, init_buckets);
    /* Fibonacci hashing: the high bits of the product mix every bit of the address. */
    uint64_t h = (uint64_t) (uintptr_t) word * UINT64_C(0x9E3779B97F4A7C15);
    return &buckets[h >> (64 - TPARK_BUCKET_BITS)];
}

static void unlink_waiter(tpark_bucket *b, tpark_waiter *w) {
    if (w->prev) w->prev->next = w->next; else b->head = w->next;
    if (w->next) w->next->prev = w->prev; else b->tail = w->prev;
    w->next = w->prev = NULL;
}

/* The absolute CLOCK_MONOTONIC deadline timeout_ns from now; 0 when it is too far to matter. */
static int deadline_of(int64_t timeout_ns, struct timespec *deadline) {
    if (timeout_ns > INT64_C(100) * 365 * 24 * 3600 * 1000000000) return 0; /* a century: forever */
    monocond_deadline(deadline, timeout_ns);
    return 1;
}

int tpark_wait(const uint32_t *word, uint32_t expected, int64_t timeout_ns) {
    struct timespec deadline;
    int timed = timeout_ns >= 0 && deadline_of(timeout_ns, &deadline);
    tpark_bucket *b = bucket_of(word);
    int result = TPARK_OK;

    pthread_mutex_lock(&b->mutex);
    if (tpark_load(word) != expected) {
        pthread_mutex_unlock(&b->mutex);
        return TPARK_OK;
    }
    if (timeout_ns == 0) {
        pthread_mutex_unlock(&b->mutex);
        return TPARK_TIMEOUT;
    }
    tpark_waiter w = {.word = word, .next = NULL, .prev = b->tail, .woken = 0};
    check(monocond_init(&w.cond), "pthread_cond_init (CLOCK_MONOTONIC)");
    if (b->tail) b->tail->next = &w; else b->head = &w;
    b->tail = &w;

    /* Condition variables wake spuriously; only the waker's flag (or the deadline) ends the wait. */
    while (!w.woken) {
        int rc = timed ? monocond_timedwait(&w.cond, &b->mutex, &deadline)
                       : pthread_cond_wait(&w.cond, &b->mutex);
        if (rc == ETIMEDOUT && !w.woken) {
            unlink_waiter(b, &w);
            result = TPARK_TIMEOUT;
            break;
        }
    }
    pthread_mutex_unlock(&b->mutex);
    /* Safe: the waker signals under the mutex, so it is done with the condvar by now. */
    pthread_cond_destroy(&w.cond);
    return result;
}

static void wake(const uint32_t *word, int all) {
    tpark_bucket *b = bucket_of(word);
    pthread_mutex_lock(&b->mutex);
    tpark_waiter *w = b->head;
    while (w) {
        tpark_waiter *next = w->next;
        if (w->word == word) {
            unlink_waiter(b, w);
            w->woken = 1;
            pthread_cond_signal(&w->cond);
            if (!all) break;
        }
        w = next;
    }
    pthread_mutex_unlock(&b->mutex);
}

void tpark_wake_one(const uint32_t *word) { wake(word, 0); }

void tpark_wake_all(const uint32_t *word) { wake(word, 1); }
