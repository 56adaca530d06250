/* pprof.c: finding, loading and starting the profiler plugin of a communicator. */
#include "profiler/pprof.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "profiler/pprof_builtin.h"
#include "profiler/pprof_os.h"

#define MOD "profiler"

static void plugin_log(pcclProfilerLogLevel_t level, const char *fmt, ...) {
    if (!log_enabled((log_level_t) level)) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log_write((log_level_t) level, MOD, "%s", line);
}

/* A library that exports a later version only: name it in the warning. */
static int other_version(void *dl) {
    char sym[32];
    for (int v = 2; v <= 9; v++) {
        snprintf(sym, sizeof sym, "pcclProfiler_v%d", v);
        if (pprof_os_sym(dl, sym) != NULL) return v;
    }
    return 0;
}

/* The plugin named by `name`, or NULL (one warning). */
static const pcclProfiler_v1_t *find(const char *name, void **dl_out) {
    *dl_out = NULL;
    if (strcmp(name, "trace") == 0) return &pprof_trace_plugin;
    if (strcmp(name, "stats") == 0) return &pprof_stats_plugin;
    if (strcmp(name, "STATIC_PLUGIN") == 0) {
        const pcclProfiler_v1_t *s = pprof_os_sym(NULL, "pcclProfiler_v1");
        if (s == NULL)
            LOG_WARN(MOD, "PCCL_PROFILER_PLUGIN=STATIC_PLUGIN: the program exports no pcclProfiler_v1 "
                          "(link it with -rdynamic); profiling off");
        return s;
    }
    void *dl = pprof_os_open(name);
    char alt[512];
    if (dl == NULL && strchr(name, '/') == NULL) {
        snprintf(alt, sizeof alt, "libpccl-profiler-%s.so", name);
        dl = pprof_os_open(alt);
    }
    if (dl == NULL) {
        LOG_WARN(MOD, "PCCL_PROFILER_PLUGIN=%s: cannot load it (%s); profiling off", name, pprof_os_error());
        return NULL;
    }
    const pcclProfiler_v1_t *s = pprof_os_sym(dl, "pcclProfiler_v1");
    if (s == NULL) {
        int v = other_version(dl);
        if (v != 0)
            LOG_WARN(MOD, "PCCL_PROFILER_PLUGIN=%s speaks profiler version %d, this libpccl speaks %d; profiling off",
                     name, v, PCCL_PROFILER_VERSION);
        else
            LOG_WARN(MOD, "PCCL_PROFILER_PLUGIN=%s exports no pcclProfiler_v1; profiling off", name);
        pprof_os_close(dl);
        return NULL;
    }
    *dl_out = dl;
    return s;
}

void pprof_open(pprof_t *p, uint32_t peer_group, uint32_t pool_size) {
    static _Atomic uint32_t comms;
    memset(p, 0, sizeof *p);
    const char *name = getenv("PCCL_PROFILER_PLUGIN");
    if (name == NULL || name[0] == '\0') {
        const char *trace = getenv("PCCL_TRACE_FILE");
        if (trace == NULL || trace[0] == '\0') return;
        name = "trace";
    }
    void *dl;
    const pcclProfiler_v1_t *plugin = find(name, &dl);
    if (plugin == NULL) return;
    if (plugin->init == NULL || plugin->start_event == NULL || plugin->stop_event == NULL ||
        plugin->record_event_state == NULL || plugin->finalize == NULL) {
        LOG_WARN(MOD, "profiler plugin %s: a function of pcclProfiler_v1 is NULL; profiling off", name);
        if (dl != NULL) pprof_os_close(dl);
        return;
    }
    uint64_t id = (uint64_t) pprof_pid() << 32 | (atomic_fetch_add(&comms, 1) + 1);
    pcclProfilerCommInfo_t info = {PCCL_PROFILER_VERSION, peer_group, pool_size, pprof_pid(), "0.1.0"};
    uint32_t mask = 0;
    void *ctx = NULL;
    int rc = plugin->init(&ctx, id, &mask, &info, plugin_log);
    if (rc != 0) {
        LOG_WARN(MOD, "profiler plugin %s: init failed (%d); profiling off", plugin->name ? plugin->name : name, rc);
        if (dl != NULL) pprof_os_close(dl);
        return;
    }
    LOG_INFO(MOD, "profiler plugin %s loaded, event mask 0x%x", plugin->name ? plugin->name : name, mask);
    *p = (pprof_t){mask & PCCL_PROFILER_MASK_ALL, plugin, ctx, dl};
}

void pprof_close(pprof_t *p) {
    if (p->plugin != NULL) p->plugin->finalize(p->ctx);
    if (p->dl != NULL) pprof_os_close(p->dl);
    memset(p, 0, sizeof *p);
}

void *pprof_start(const pprof_t *p, const pcclProfilerEventDescr_t *d) {
    void *h = NULL;
    p->plugin->start_event(p->ctx, &h, d);
    return h;
}

void pprof_state(const pprof_t *p, void *h, pcclProfilerState_t s, const pcclProfilerStateArgs_t *a) {
    p->plugin->record_event_state(h, s, a);
}

uint32_t pprof_reason(pcclResult_t r) {
    switch (r) {
    case pcclRankConnectionLost:
    case pcclRankConnectionFailed:
    case pcclUpdateTopologyFailed:
    case pcclTopologyOptimizationFailed: return pcclProfilerAbortPeerLost;
    case pcclCollectiveTimeout: return pcclProfilerAbortTimeout;
    case pcclMasterConnectionFailed: return pcclProfilerAbortMasterLost;
    case pcclInternalError: return pcclProfilerAbortLocal;
    default: return 0;
    }
}

void pprof_finish_slow(const pprof_t *p, void *h, uint32_t reason, pcclResult_t r) {
    if (reason != 0) {
        pcclProfilerStateArgs_t a = {.reason = reason, .result = (int32_t) r};
        p->plugin->record_event_state(h, pcclProfilerStateAborted, &a);
    }
    p->plugin->stop_event(h);
}
