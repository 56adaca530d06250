/* monocond_posix.c: monocond.h where POSIX Clock Selection exists (Linux, the BSDs): the condvar
 * itself counts on CLOCK_MONOTONIC, so the deadline goes to pthread_cond_timedwait as it is. */
#include "threadpark/monocond.h"

int monocond_init(pthread_cond_t *cond) {
    pthread_condattr_t attr;
    int rc = pthread_condattr_init(&attr);
    if (rc != 0) return rc;
    rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0) rc = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return rc;
}

int monocond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *deadline) {
    return pthread_cond_timedwait(cond, mutex, deadline);
}
