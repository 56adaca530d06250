/* monocond_win32.c: monocond.h on Windows (winpthreads). winpthreads refuses CLOCK_MONOTONIC for
 * a condvar (pthread_condattr_setclock: EINVAL) and reads every deadline on CLOCK_REALTIME, so a
 * CLOCK_MONOTONIC deadline passed as it is would be long past and every wait would return at
 * once. Each wait adds the time left to the wall clock instead; ETIMEDOUT is reported only once
 * CLOCK_MONOTONIC has passed the deadline (a wall-clock step makes a wait end early: 0). */
#include "threadpark/monocond.h"

#include <errno.h>

int monocond_init(pthread_cond_t *cond) { return pthread_cond_init(cond, NULL); }

int monocond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *deadline) {
    int64_t left = monocond_left_ns(deadline);
    if (left <= 0) return ETIMEDOUT;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    int64_t nsec = wall.tv_nsec + left % 1000000000;
    wall.tv_sec += (time_t) (left / 1000000000 + nsec / 1000000000);
    wall.tv_nsec = (long) (nsec % 1000000000);
    int rc = pthread_cond_timedwait(cond, mutex, &wall);
    if (rc == ETIMEDOUT && monocond_left_ns(deadline) > 0) return 0;
    return rc;
}
