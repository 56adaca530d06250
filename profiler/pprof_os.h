/* pprof_os.h: what the profiler needs from the platform: loading a library and finding a symbol,
 * a monotonic clock, thread and process ids. pprof_posix.c implements it (dlopen, Linux gettid
 * where there is one); a Windows port adds pprof_win32.c (LoadLibrary, GetProcAddress). */
#ifndef PCCL_PPROF_OS_H
#define PCCL_PPROF_OS_H

#include <stdint.h>

/* A library by path or file name (RTLD_NOW | RTLD_LOCAL), or NULL; pprof_os_error says why. */
void *pprof_os_open(const char *name);
void pprof_os_close(void *lib);
/* A symbol of lib; lib NULL: of the program itself and what it loaded globally. */
void *pprof_os_sym(void *lib, const char *sym);
const char *pprof_os_error(void);

int64_t pprof_now_ns(void); /* monotonic */
uint32_t pprof_tid(void);
uint32_t pprof_pid(void);

#endif /* PCCL_PPROF_OS_H */
