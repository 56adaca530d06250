/* plugins.c: small plugins for the loading test and the benchmark, one shared object each,
 * picked by a -D at build time:
 *   EMPTY: every call does nothing; the mask comes from EMPTYPROF_MASK (default 0);
 *   V2:    exports pcclProfiler_v2 only (a later interface version);
 *   NOSYM: exports no plugin symbol at all. */
#include <stdlib.h>

#include "pccl_profiler.h"

#define EXPORT __attribute__((visibility("default")))

#if defined(EMPTY) || defined(V2)
static int e_init(void **ctx, uint64_t comm_id, uint32_t *mask, const pcclProfilerCommInfo_t *info,
                  pcclProfilerLogFn log) {
    (void) comm_id, (void) info, (void) log;
    const char *m = getenv("EMPTYPROF_MASK");
    *mask = m ? (uint32_t) strtoul(m, NULL, 0) : 0;
    *ctx = NULL;
    return 0;
}
static int e_start(void *ctx, void **handle, const pcclProfilerEventDescr_t *d) {
    (void) ctx, (void) d;
    *handle = NULL;
    return 0;
}
static int e_stop(void *handle) { return handle != NULL; }
static int e_state(void *handle, pcclProfilerState_t s, const pcclProfilerStateArgs_t *a) {
    (void) handle, (void) s, (void) a;
    return 0;
}
static int e_finalize(void *ctx) { return ctx != NULL; }
#endif

#if defined(EMPTY)
EXPORT const pcclProfiler_v1_t pcclProfiler_v1 = {"empty", e_init, e_start, e_stop, e_state, e_finalize};
#elif defined(V2)
EXPORT const pcclProfiler_v1_t pcclProfiler_v2 = {"v2", e_init, e_start, e_stop, e_state, e_finalize};
#else
EXPORT int not_a_profiler = 1;
#endif
