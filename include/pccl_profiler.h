/* pccl_profiler.h: the profiler plugin interface of libpccl, version 1 (docs/profiler.md).
 *
 * A plugin is a shared library that exports one symbol, `pcclProfiler_v1`, of type
 * pcclProfiler_v1_t. libpccl reads PCCL_PROFILER_PLUGIN at pcclCreateCommunicator: a path or a
 * file name is dlopen'ed (RTLD_NOW | RTLD_LOCAL), else `libpccl-profiler-<name>.so`; the value
 * STATIC_PLUGIN looks the symbol up in the program itself; "trace" and "stats" name the plugins
 * built into libpccl. PCCL_TRACE_FILE alone turns the built-in trace plugin on. A plugin that
 * fails to load, lacks the symbol, speaks another version or whose init fails costs one warning
 * line; the communicator then works without one.
 *
 * Once released, the layout of every type here is frozen (tests/api/layout_test.c); a change
 * that breaks it makes pcclProfiler_v2. C99; also valid C++. */
#ifndef PCCL_PROFILER_H
#define PCCL_PROFILER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PCCL_PROFILER_VERSION 1

/* Event types; bit (1 << type) of the activation mask selects each one. */
typedef enum pcclProfilerEventType_t {
    pcclProfilerEventApi = 0,       /* a public call; the root of a tree (parent NULL) */
    pcclProfilerEventColl = 1,      /* one all-reduce, INIT to DONE; parent: its API call */
    pcclProfilerEventPhase = 2,     /* a phase of a collective; parent: the collective */
    pcclProfilerEventTransfer = 3,  /* one sub-chunk over one link; parent: its ring phase */
    pcclProfilerEventSync = 4,      /* one shared-state sync; parent: its API call */
    pcclProfilerEventTensor = 5,    /* one tensor fetched from a peer; parent: the sync */
    pcclProfilerEventHash = 6,      /* hashing the shared state; parent: the sync */
    pcclProfilerEventTopology = 7,  /* one topology round (re-linking the ring); parent: API call */
    pcclProfilerEventBandwidth = 8, /* one bandwidth measurement to one peer; parent: API call */
    pcclProfilerEventTypeCount = 9
} pcclProfilerEventType_t;

#define PCCL_PROFILER_MASK(type) (1u << (uint32_t) (type))
#define PCCL_PROFILER_MASK_ALL ((1u << (uint32_t) pcclProfilerEventTypeCount) - 1u)

/* pcclProfilerEventApi: which call. */
typedef enum pcclProfilerApi_t {
    pcclProfilerApiAllReduce = 0,
    pcclProfilerApiAllReduceAsync = 1,  /* the submission only; the collective runs on a worker */
    pcclProfilerApiAwaitAsyncReduce = 2,
    pcclProfilerApiAllReduceMultiple = 3, /* pcclAllReduceMultipleWithRetry */
    pcclProfilerApiSynchronizeSharedState = 4,
    pcclProfilerApiUpdateTopology = 5,
    pcclProfilerApiOptimizeTopology = 6,
    pcclProfilerApiArePeersPending = 7
} pcclProfilerApi_t;

/* pcclProfilerEventPhase: which phase. Ring phases overlap by up to a window of sub-chunks: the
 * all-gather starts with its first frame, the reduce-scatter ends with its last one. */
typedef enum pcclProfilerPhase_t {
    pcclProfilerPhaseWaitInit = 0,      /* INIT sent, waiting until every member asked (COMMENCE) */
    pcclProfilerPhaseReduceScatter = 1, /* ring steps 0 .. world-2 */
    pcclProfilerPhaseAllGather = 2,     /* ring steps world-1 .. 2*world-3 */
    pcclProfilerPhaseWaitDone = 3       /* COMPLETE sent, waiting for the shared outcome (DONE) */
} pcclProfilerPhase_t;

typedef enum pcclProfilerDirection_t { pcclProfilerSend = 0, pcclProfilerRecv = 1 } pcclProfilerDirection_t;

/* The descriptor of an event: valid only during start_event (copy what you keep). */
typedef struct pcclProfilerEventDescr_t {
    uint32_t type;  /* pcclProfilerEventType_t; selects the member of u */
    uint32_t reserved0;
    void *parent;   /* the handle start_event stored for the enclosing event, or NULL */
    union {
        struct {
            uint32_t api;  /* pcclProfilerApi_t */
            uint32_t reserved;
            uint64_t tag;   /* all-reduce calls: the descriptor's tag; 0 otherwise */
            uint64_t count; /* pcclAllReduceMultipleWithRetry: descriptors; 0 otherwise */
        } api;
        struct {
            uint64_t tag, seq;  /* seq: submission order on this communicator */
            uint64_t count;     /* elements */
            uint64_t bytes;     /* count * element size (before quantization) */
            uint32_t datatype;  /* pcclDataType_t */
            uint32_t op;        /* pcclRedOp_t */
            uint32_t quantized_datatype, quantization_algorithm;
            /* 0 in version 1: not known before COMMENCE. The Commenced state carries world and
             * rank, each transfer its pool stream. */
            uint32_t world_size, rank;
            uint32_t tx_stream, rx_stream;
        } coll;
        struct {
            uint32_t phase; /* pcclProfilerPhase_t */
            uint32_t reserved;
            uint64_t tag;
        } phase;
        struct {
            uint32_t direction; /* pcclProfilerDirection_t */
            uint32_t peer_rank; /* send: the next rank, receive: the previous one */
            uint64_t tag;
            uint64_t offset;    /* the frame's offset in the buffer */
            uint64_t bytes;     /* payload bytes on the wire (quantized: the frame) */
            uint32_t stream;    /* pool stream */
            uint32_t reserved;
        } transfer;
        struct {
            uint64_t revision;
            uint64_t tensors;
            uint32_t strategy; /* pcclSharedStateSyncStrategy_t */
            uint32_t reserved;
        } sync;
        struct {
            const char *name; /* valid during start_event only */
            uint64_t bytes;
            uint8_t peer_uuid[16]; /* the peer it comes from */
        } tensor;
        struct {
            uint64_t tensors, bytes;
        } hash;
        struct {
            uint64_t round;
            uint32_t neighbours; /* ring links this round asks for (0: alone) */
            uint32_t reserved;
        } topology;
        struct {
            uint8_t peer_uuid[16]; /* the peer measured */
            uint32_t duration_ms;
            uint32_t reserved;
        } bandwidth;
        uint64_t reserved[12]; /* room for later members; fixes the size */
    } u;
} pcclProfilerEventDescr_t;

/* States recorded on a running event. */
typedef enum pcclProfilerState_t {
    pcclProfilerStateRetried = 0,        /* args.attempt: the pass about to start (1, 2, ...) */
    pcclProfilerStateAborted = 1,        /* args.reason; the event still gets its stop_event */
    pcclProfilerStateQuantizedBytes = 2, /* args.bytes (sent, quantized), args.bytes2 (received) */
    pcclProfilerStateCommenced = 3,      /* a collective: args.world_size, args.rank */
    pcclProfilerStateBytes = 4           /* a finished call or sync: args.bytes sent, bytes2 received */
} pcclProfilerState_t;

typedef enum pcclProfilerAbortReason_t {
    pcclProfilerAbortPeerLost = 1,   /* a member left, or a link broke */
    pcclProfilerAbortTimeout = 2,    /* the collective timeout (watchdog) */
    pcclProfilerAbortMasterLost = 3, /* the master link is gone, or the communicator is destroyed */
    pcclProfilerAbortMismatch = 4,   /* the members described it differently */
    pcclProfilerAbortLocal = 5       /* this peer failed it (out of memory, a staging copy) */
} pcclProfilerAbortReason_t;

typedef struct pcclProfilerStateArgs_t {
    uint32_t reason;  /* pcclProfilerAbortReason_t (Aborted) */
    uint32_t attempt; /* Retried */
    uint64_t bytes, bytes2;
    uint32_t world_size, rank; /* Commenced */
    int32_t result;   /* the pcclResult_t the call returns, when known; 0 otherwise */
    uint32_t reserved;
} pcclProfilerStateArgs_t;

/* What init learns about the communicator. */
typedef struct pcclProfilerCommInfo_t {
    uint32_t version;    /* PCCL_PROFILER_VERSION of the library */
    uint32_t peer_group;
    uint32_t p2p_connection_pool_size;
    uint32_t pid;
    const char *library_version; /* e.g. "0.1.0" */
} pcclProfilerCommInfo_t;

typedef enum pcclProfilerLogLevel_t {
    pcclProfilerLogError = 0,
    pcclProfilerLogWarn = 1,
    pcclProfilerLogInfo = 2,
    pcclProfilerLogDebug = 3
} pcclProfilerLogLevel_t;

/* Writes one line through libpccl's log (PCCL_LOG_LEVEL applies). Any thread. */
typedef void (*pcclProfilerLogFn)(pcclProfilerLogLevel_t level, const char *fmt, ...);

/* The plugin. Return 0 for success from init, anything else fails it. Thread safety: start_event,
 * stop_event and record_event_state come from several threads at once (the API thread, async
 * workers, data-link send and receive threads; docs/profiler.md names which); never while libpccl
 * holds a lock of its own, so a plugin may block, but it delays that thread's work. */
typedef struct pcclProfiler_v1_t {
    const char *name;
    /* pcclCreateCommunicator, the caller's thread. *ctx: the plugin's state for this
     * communicator; *activation_mask (0 on entry): the event types wanted, read once after init
     * returns 0. comm_id: unique in this process. */
    int (*init)(void **ctx, uint64_t comm_id, uint32_t *activation_mask, const pcclProfilerCommInfo_t *info,
                pcclProfilerLogFn log);
    /* An event of a wanted type begins: store a handle (may be NULL) in *handle. Every call is
     * matched by exactly one stop_event(*handle), also when the operation fails; children stop
     * before their parent. */
    int (*start_event)(void *ctx, void **handle, const pcclProfilerEventDescr_t *descr);
    int (*stop_event)(void *handle);
    /* Between an event's start and stop, on the thread that runs it. */
    int (*record_event_state)(void *handle, pcclProfilerState_t state, const pcclProfilerStateArgs_t *args);
    /* pcclDestroyCommunicator, the caller's thread, after every thread of the communicator has
     * stopped: no call for this ctx follows. */
    int (*finalize)(void *ctx);
} pcclProfiler_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* PCCL_PROFILER_H */
