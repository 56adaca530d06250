/* monocond.h: condition variables whose timed waits count on CLOCK_MONOTONIC on every platform,
 * so that a step of the wall clock neither ends a wait early nor stretches it.
 *
 * One contract, one body per platform (the BUILD file picks it):
 * - monocond_posix.c (Linux and other POSIX): pthread_condattr_setclock(CLOCK_MONOTONIC) and the
 *   absolute deadline as it is.
 * - monocond_darwin.c: macOS has no pthread_condattr_setclock; its condvars wait for a relative
 *   time (pthread_cond_timedwait_relative_np), the time left until the deadline.
 * - monocond_win32.c: winpthreads refuses CLOCK_MONOTONIC (EINVAL) and reads every deadline on
 *   the wall clock; the time left is added to the wall clock for each wait.
 * Users: threadpark_posix.c (the portable threadpark) and reduce/reduce_memlink.c. */
#ifndef PCCL_MONOCOND_H
#define PCCL_MONOCOND_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Initialises cond for monocond_timedwait (plain waits and signals as usual). 0 or an errno. */
int monocond_init(pthread_cond_t *cond);

/* Waits on cond (mutex held) until a signal, a spurious return or the CLOCK_MONOTONIC deadline.
 * Returns 0 (re-check the condition) or ETIMEDOUT, the latter only once the deadline has passed. */
int monocond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *deadline);

/* The CLOCK_MONOTONIC time timeout_ns (>= 0) from now. */
static inline void monocond_deadline(struct timespec *deadline, int64_t timeout_ns) {
    clock_gettime(CLOCK_MONOTONIC, deadline);
    int64_t nsec = deadline->tv_nsec + timeout_ns % 1000000000;
    deadline->tv_sec += (time_t) (timeout_ns / 1000000000 + nsec / 1000000000);
    deadline->tv_nsec = (long) (nsec % 1000000000);
}

/* Nanoseconds from now (CLOCK_MONOTONIC) to deadline; <= 0 once it has passed. */
static inline int64_t monocond_left_ns(const struct timespec *deadline) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t) (deadline->tv_sec - now.tv_sec) * 1000000000 + (deadline->tv_nsec - now.tv_nsec);
}

#endif /* PCCL_MONOCOND_H */
