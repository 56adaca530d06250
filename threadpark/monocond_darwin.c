/* monocond_darwin.c: monocond.h on macOS, which has no pthread_condattr_setclock: every wait is
 * relative (pthread_cond_timedwait_relative_np, not tied to the wall clock), for the time left
 * until the CLOCK_MONOTONIC deadline. The relative wait may end on another clock's idea of the
 * time; ETIMEDOUT is reported only once CLOCK_MONOTONIC has passed the deadline, otherwise 0 (the
 * caller re-checks and waits again for what is left). */
#include "threadpark/monocond.h"

#include <errno.h>

int monocond_init(pthread_cond_t *cond) { return pthread_cond_init(cond, NULL); }

int monocond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *deadline) {
    int64_t left = monocond_left_ns(deadline);
    if (left <= 0) return ETIMEDOUT;
    struct timespec rel = {(time_t) (left / 1000000000), (long) (left % 1000000000)};
    int rc = pthread_cond_timedwait_relative_np(cond, mutex, &rel);
    if (rc == ETIMEDOUT && monocond_left_ns(deadline) > 0) return 0;
    return rc;
}
