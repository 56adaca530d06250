/* pprof_win32.c: pprof_os.h on Windows: LoadLibrary / GetProcAddress, QueryPerformanceCounter,
 * the system's thread and process ids. */
#include "profiler/pprof_os.h"

#include <stdio.h>
#include <windows.h>

static _Thread_local char last_error[64];

static void *remember(void *p) {
    if (p == NULL) snprintf(last_error, sizeof last_error, "Windows error %lu", (unsigned long) GetLastError());
    return p;
}

void *pprof_os_open(const char *name) { return remember((void *) LoadLibraryA(name)); }

void pprof_os_close(void *lib) { FreeLibrary((HMODULE) lib); }

/* lib NULL: the program itself (Windows has no global symbol namespace: a plugin that wants the
 * library's symbols is linked against pccl.dll). */
void *pprof_os_sym(void *lib, const char *sym) {
    HMODULE m = lib != NULL ? (HMODULE) lib : GetModuleHandleA(NULL);
    return remember((void *) (uintptr_t) GetProcAddress(m, sym));
}

const char *pprof_os_error(void) { return last_error[0] != '\0' ? last_error : "unknown error"; }

int64_t pprof_now_ns(void) {
    static LARGE_INTEGER freq;
    LARGE_INTEGER now;
    if (freq.QuadPart == 0) QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&now);
    return (int64_t) (now.QuadPart / freq.QuadPart * 1000000000 + now.QuadPart % freq.QuadPart * 1000000000 / freq.QuadPart);
}

uint32_t pprof_tid(void) { return (uint32_t) GetCurrentThreadId(); }

uint32_t pprof_pid(void) { return (uint32_t) GetCurrentProcessId(); }
