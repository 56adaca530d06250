/* tt_thread.h: the few thread and clock calls the threadpark tests need, on POSIX and Windows, so
 * that one test source runs natively and as a cross-compiled .exe under wine. */
#ifndef PCCL_TESTS_TT_THREAD_H
#define PCCL_TESTS_TT_THREAD_H

#include <stdint.h>

#if defined(_WIN32)
#include <windows.h>

typedef struct tt_thread {
    HANDLE handle;
    void (*fn)(void *);
    void *arg;
} tt_thread;

static DWORD WINAPI tt_trampoline(LPVOID p) {
    tt_thread *t = (tt_thread *) p;
    t->fn(t->arg);
    return 0;
}

static inline int tt_start(tt_thread *t, void (*fn)(void *), void *arg) {
    t->fn = fn;
    t->arg = arg;
    t->handle = CreateThread(NULL, 0, tt_trampoline, t, 0, NULL);
    return t->handle != NULL ? 0 : -1;
}

static inline void tt_join(tt_thread *t) {
    WaitForSingleObject(t->handle, INFINITE);
    CloseHandle(t->handle);
}

static inline uint64_t tt_now_ns(void) {
    LARGE_INTEGER f, c;
    QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    uint64_t ticks = (uint64_t) c.QuadPart, hz = (uint64_t) f.QuadPart;
    return ticks / hz * 1000000000u + ticks % hz * 1000000000u / hz;
}

static inline void tt_sleep_ms(unsigned ms) { Sleep(ms); }

#else
#include <pthread.h>
#include <time.h>

typedef struct tt_thread {
    pthread_t handle;
    void (*fn)(void *);
    void *arg;
} tt_thread;

static void *tt_trampoline(void *p) {
    tt_thread *t = (tt_thread *) p;
    t->fn(t->arg);
    return NULL;
}

static inline int tt_start(tt_thread *t, void (*fn)(void *), void *arg) {
    t->fn = fn;
    t->arg = arg;
    return pthread_create(&t->handle, NULL, tt_trampoline, t) == 0 ? 0 : -1;
}

static inline void tt_join(tt_thread *t) { pthread_join(t->handle, NULL); }

static inline uint64_t tt_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static inline void tt_sleep_ms(unsigned ms) {
    struct timespec ts = {(time_t) (ms / 1000), (long) (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}
#endif

#endif /* PCCL_TESTS_TT_THREAD_H */
