/* pprof_posix.c: pprof_os.h on POSIX systems. */
#include "profiler/pprof_os.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

void *pprof_os_open(const char *name) { return dlopen(name, RTLD_NOW | RTLD_LOCAL); }

void pprof_os_close(void *lib) { dlclose(lib); }

void *pprof_os_sym(void *lib, const char *sym) { return dlsym(lib != NULL ? lib : RTLD_DEFAULT, sym); }

const char *pprof_os_error(void) {
    const char *e = dlerror();
    return e != NULL ? e : "unknown error";
}

int64_t pprof_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The kernel's thread id where there is one (what Perfetto and top show), else a counter. */
uint32_t pprof_tid(void) {
    static __thread uint32_t tid;
    if (tid == 0) {
#if defined(__linux__)
        tid = (uint32_t) syscall(SYS_gettid);
#else
        static _Atomic uint32_t next = 1;
        tid = (uint32_t) getpid() * 1000u + atomic_fetch_add_explicit(&next, 1, memory_order_relaxed);
#endif
    }
    return tid;
}

uint32_t pprof_pid(void) { return (uint32_t) getpid(); }
