/* nomalloc.h: the counting allocator interposer (libnomalloc.so, LD_PRELOAD) as a program sees it.
 *
 * The interposer replaces malloc, calloc, realloc, reallocarray, posix_memalign, aligned_alloc,
 * memalign, valloc and pvalloc for the whole process (every thread; calls from inside glibc too)
 * and forwards them to glibc's allocator. While armed it counts every call, per thread name
 * (prctl PR_GET_NAME), and keeps the backtrace of the first NOMALLOC_MAX_TRACES of them. A
 * program finds the calls with dlsym(RTLD_DEFAULT, NOMALLOC_ARM) and so on: without the
 * interposer they are absent, and the program can tell that it is not being counted. */
#ifndef NOMALLOC_H
#define NOMALLOC_H

#define NOMALLOC_ARM "nomalloc_arm"
#define NOMALLOC_DISARM "nomalloc_disarm"
#define NOMALLOC_REPORT "nomalloc_report"
#define NOMALLOC_MAX_TRACES 6

/* Clears the counters, then counts from now on. */
typedef void (*nomalloc_arm_fn)(void);
/* Stops counting; returns the calls counted since nomalloc_arm. */
typedef unsigned long (*nomalloc_disarm_fn)(void);
/* Writes the per-thread counts and the backtraces of the first calls to fd (after disarm). */
typedef void (*nomalloc_report_fn)(int fd, const char *label);

#endif /* NOMALLOC_H */
