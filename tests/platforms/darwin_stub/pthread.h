/* pthread.h stand-in for the macOS compile check (darwin_compile_test.sh): glibc's pthread.h
 * as macOS would have it. glibc declares pthread_condattr_setclock/getclock (POSIX Clock
 * Selection), which macOS lacks: poisoned, so that a call outside a Linux file fails the check as
 * it would fail the build on a Mac. Declared as Apple's <pthread.h> declares them: the relative
 * condvar wait and the one-argument pthread_setname_np (it names the calling thread only). */
#ifndef PCCL_DARWIN_STUB_PTHREAD_H
#define PCCL_DARWIN_STUB_PTHREAD_H
#include_next <pthread.h>
#pragma GCC poison pthread_condattr_setclock pthread_condattr_getclock
int pthread_cond_timedwait_relative_np(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *reltime);
int pthread_setname_np(const char *name);
#endif
