/* pprof_builtin.h: the plugins built into libpccl (docs/profiler.md), which the loader (pprof.c)
 * picks by name. Apart from pprof.h so that a plugin depends on the plugin ABI only, never on
 * the loader that calls it. */
#ifndef PCCL_PPROF_BUILTIN_H
#define PCCL_PPROF_BUILTIN_H

#include "pccl_profiler.h"

extern const pcclProfiler_v1_t pprof_trace_plugin; /* pprof_trace.c: Chrome trace JSON */
extern const pcclProfiler_v1_t pprof_stats_plugin; /* pprof_stats.c: per-kind statistics */

#endif /* PCCL_PPROF_BUILTIN_H */
