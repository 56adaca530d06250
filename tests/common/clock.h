/* clock.h: monotonic seconds, for tests that bound or report their own durations. */
#ifndef PCCL_TESTS_CLOCK_H
#define PCCL_TESTS_CLOCK_H

#include <time.h>

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

#endif /* PCCL_TESTS_CLOCK_H */
