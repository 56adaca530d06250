/* nomalloc_counter.c: libnomalloc.so, an LD_PRELOAD interposer that counts allocation calls
 * (nomalloc.h says what and how it is driven).
 *
 * It forwards to glibc's own entry points (__libc_malloc, ...), so it needs no dlsym at start-up
 * (dlsym itself allocates). The hook is reentrancy-safe: a thread-local flag stops the counting
 * of allocations made by the hook itself (backtrace() loads libgcc_s and allocates on its first
 * call: nomalloc_arm primes it first). free is not counted and not replaced. */
#include <errno.h>
#include <execinfo.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "tests/nomalloc/nomalloc.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_THREADS 64
#define MAX_FRAMES 24

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void *__libc_memalign(size_t align, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);

typedef struct thread_count_t {
    char name[17];
    unsigned long calls;
} thread_count_t;

typedef struct trace_t {
    const char *fn;
    size_t size;
    char thread[17];
    int nframes;
    void *frames[MAX_FRAMES];
} trace_t;

static atomic_int armed;
static atomic_ulong total;
static atomic_flag lock = ATOMIC_FLAG_INIT;
static thread_count_t threads[MAX_THREADS];
static int nthreads, ntraces;
static trace_t traces[NOMALLOC_MAX_TRACES];
static _Thread_local int in_hook __attribute__((tls_model("initial-exec")));

static void note(const char *fn, size_t size) {
    if (!atomic_load_explicit(&armed, memory_order_relaxed) || in_hook) return;
    in_hook = 1;
    atomic_fetch_add(&total, 1);
    char name[17] = "";
    prctl(PR_GET_NAME, name);
    while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire)) {
    }
    int i = 0;
    while (i < nthreads && strcmp(threads[i].name, name) != 0) i++;
    if (i == nthreads && nthreads < MAX_THREADS) memcpy(threads[nthreads++].name, name, sizeof name);
    if (i < nthreads) threads[i].calls++;
    if (ntraces < NOMALLOC_MAX_TRACES) {
        trace_t *t = &traces[ntraces++];
        t->fn = fn;
        t->size = size;
        memcpy(t->thread, name, sizeof name);
        t->nframes = backtrace(t->frames, MAX_FRAMES);
    }
    atomic_flag_clear_explicit(&lock, memory_order_release);
    in_hook = 0;
}

EXPORT void *malloc(size_t size) {
    note("malloc", size);
    return __libc_malloc(size);
}

EXPORT void *calloc(size_t n, size_t size) {
    note("calloc", n * size);
    return __libc_calloc(n, size);
}

EXPORT void *realloc(void *p, size_t size) {
    note("realloc", size);
    return __libc_realloc(p, size);
}

EXPORT void *reallocarray(void *p, size_t n, size_t size) {
    note("reallocarray", n * size);
    if (size != 0 && n > SIZE_MAX / size) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_realloc(p, n * size);
}

EXPORT void *memalign(size_t align, size_t size) {
    note("memalign", size);
    return __libc_memalign(align, size);
}

EXPORT int posix_memalign(void **out, size_t align, size_t size) {
    note("posix_memalign", size);
    if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
    void *p = __libc_memalign(align, size);
    if (p == NULL) return ENOMEM;
    *out = p;
    return 0;
}

EXPORT void *aligned_alloc(size_t align, size_t size) {
    note("aligned_alloc", size);
    if (align == 0 || (align & (align - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    return __libc_memalign(align, size);
}

EXPORT void *valloc(size_t size) {
    note("valloc", size);
    return __libc_valloc(size);
}

EXPORT void *pvalloc(size_t size) {
    note("pvalloc", size);
    return __libc_pvalloc(size);
}

EXPORT void nomalloc_arm(void) {
    void *prime[4];
    backtrace(prime, 4); /* loads the unwinder now: its first call allocates */
    while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire)) {
    }
    memset(threads, 0, sizeof threads);
    nthreads = ntraces = 0;
    atomic_store(&total, 0);
    atomic_flag_clear_explicit(&lock, memory_order_release);
    atomic_store(&armed, 1);
}

EXPORT unsigned long nomalloc_disarm(void) {
    atomic_store(&armed, 0);
    return atomic_load(&total);
}

/* Formats into a stack buffer and writes: stdio's buffers would allocate. */
static void say(int fd, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > (int) sizeof buf - 1) n = (int) sizeof buf - 1;
    if (n > 0 && write(fd, buf, (size_t) n) < 0) return;
}

EXPORT void nomalloc_report(int fd, const char *label) {
    while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire)) {
    }
    say(fd, "nomalloc[%s]: %lu allocation calls\n", label, atomic_load(&total));
    for (int i = 0; i < nthreads; i++)
        say(fd, "nomalloc[%s]:   thread \"%s\": %lu\n", label, threads[i].name, threads[i].calls);
    for (int i = 0; i < ntraces; i++) {
        say(fd, "nomalloc[%s]: call %d: %s(%zu) in thread \"%s\":\n", label, i + 1, traces[i].fn, traces[i].size,
            traces[i].thread);
        backtrace_symbols_fd(traces[i].frames, traces[i].nframes, fd);
    }
    atomic_flag_clear_explicit(&lock, memory_order_release);
}
