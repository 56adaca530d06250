/* pprof.h: the profiler inside libpccl: the plugin of a communicator and the inline guards of
 * the event sites (docs/profiler.md).
 *
 * Every event site is `if (PPROF_ON(p, type)) ...`: one load and one predictable branch when no
 * plugin is loaded (mask 0), no allocation and no lock either way. The mask is fixed once the
 * plugin's init returned, so a start and its stop always agree on whether the plugin is called. */
#ifndef PCCL_PPROF_H
#define PCCL_PPROF_H

#include <stdbool.h>
#include <stdint.h>

#include "pccl.h"
#include "pccl_profiler.h"

typedef struct pprof_t {
    uint32_t mask; /* event types the plugin wants; 0: no plugin */
    const pcclProfiler_v1_t *plugin;
    void *ctx;
    void *dl; /* dlopen handle, NULL for a built-in or STATIC_PLUGIN */
} pprof_t;

#define PPROF_ON(p, type) __builtin_expect((((p)->mask >> (uint32_t) (type)) & 1u) != 0, 0)

/* pcclCreateCommunicator: loads the plugin PCCL_PROFILER_PLUGIN / PCCL_TRACE_FILE name, runs its
 * init; on any failure one warning and *p stays zero (profiling off). */
void pprof_open(pprof_t *p, uint32_t peer_group, uint32_t pool_size);
/* pcclDestroyCommunicator, after every thread of the communicator stopped: finalize, dlclose. */
void pprof_close(pprof_t *p);

/* The slow paths: call only when PPROF_ON(p, d->type). */
void *pprof_start(const pprof_t *p, const pcclProfilerEventDescr_t *d);
void pprof_state(const pprof_t *p, void *h, pcclProfilerState_t s, const pcclProfilerStateArgs_t *a);

static inline void pprof_stop(const pprof_t *p, uint32_t type, void *h) {
    if (PPROF_ON(p, type)) p->plugin->stop_event(h);
}

/* The abort reason of a failed call's result (0 for success and misuse). */
uint32_t pprof_reason(pcclResult_t r);
void pprof_finish_slow(const pprof_t *p, void *h, uint32_t reason, pcclResult_t r);
/* The end of a call or collective: records Aborted(reason) when reason is not 0, then stops. */
static inline void pprof_finish(const pprof_t *p, uint32_t type, void *h, uint32_t reason, pcclResult_t r) {
    if (PPROF_ON(p, type)) pprof_finish_slow(p, h, reason, r);
}

#endif /* PCCL_PPROF_H */
