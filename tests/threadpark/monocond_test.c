/* monocond_test: monocond.h's timed waits end at their CLOCK_MONOTONIC deadline, not before it and
 * not much after, and a signal ends them early. Runs on Linux (monocond_posix.c) and under wine
 * (monocond_win32.c: winpthreads reads deadlines on the wall clock; passing a monotonic deadline
 * as it is made every wait return at once). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "tests/common/check.h"
#include "threadpark/monocond.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static int flag;

static int64_t mono_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits for flag until deadline_ms from now; returns the ms it took, *timed_out set. */
static int64_t wait_flag(int64_t deadline_ms, int *timed_out) {
    struct timespec d;
    monocond_deadline(&d, deadline_ms * 1000000);
    int64_t t0 = mono_ms();
    *timed_out = 0;
    pthread_mutex_lock(&mu);
    while (!flag) {
        int rc = monocond_timedwait(&cv, &mu, &d);
        if (rc == ETIMEDOUT) {
            *timed_out = 1;
            break;
        }
        REQUIRE(rc == 0);
    }
    pthread_mutex_unlock(&mu);
    return mono_ms() - t0;
}

static void *raiser(void *arg) {
    struct timespec ts = {0, 50 * 1000000L};
    (void) arg;
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&mu);
    flag = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

int main(void) {
    REQUIRE(monocond_init(&cv) == 0);

    /* Nobody signals: a timeout at 200 ms (the clock's and the scheduler's slack: up to 5 s). */
    int timed_out;
    int64_t took = wait_flag(200, &timed_out);
    CHECK(timed_out);
    CHECK(took >= 199);
    CHECK(took < 5000);

    /* A deadline already past: ETIMEDOUT at once. */
    struct timespec past;
    monocond_deadline(&past, 0);
    pthread_mutex_lock(&mu);
    CHECK(monocond_timedwait(&cv, &mu, &past) == ETIMEDOUT);
    pthread_mutex_unlock(&mu);

    /* A signal after 50 ms ends a 30 s wait. */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, raiser, NULL) == 0);
    took = wait_flag(30000, &timed_out);
    pthread_join(t, NULL);
    CHECK(!timed_out);
    CHECK(took >= 40);
    CHECK(took < 5000);

    pthread_cond_destroy(&cv);
    return check_exit();
}
