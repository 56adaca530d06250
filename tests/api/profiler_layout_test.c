/* The profiler plugin ABI on x86-64 (include/pccl_profiler.h, version 1): every enum value and
 * every struct's size and field offsets, written out by hand, so that a change that would break
 * plugins built against version 1 fails here (such a change makes pcclProfiler_v2). */
#include <stddef.h>

#include "pccl_profiler.h"
#include "tests/common/check.h"

#define SIZE(t, n) CHECK_EQ_U64(sizeof(t), n)
#define OFF(t, f, n) CHECK_EQ_U64(offsetof(t, f), n)

static void enums(void) {
    CHECK(PCCL_PROFILER_VERSION == 1);
    CHECK(pcclProfilerEventApi == 0 && pcclProfilerEventColl == 1 && pcclProfilerEventPhase == 2);
    CHECK(pcclProfilerEventTransfer == 3 && pcclProfilerEventSync == 4 && pcclProfilerEventTensor == 5);
    CHECK(pcclProfilerEventHash == 6 && pcclProfilerEventTopology == 7 && pcclProfilerEventBandwidth == 8);
    CHECK(pcclProfilerEventTypeCount == 9 && PCCL_PROFILER_MASK_ALL == 0x1ff);
    CHECK(PCCL_PROFILER_MASK(pcclProfilerEventTransfer) == 8);
    CHECK(pcclProfilerApiAllReduce == 0 && pcclProfilerApiAllReduceAsync == 1 && pcclProfilerApiAwaitAsyncReduce == 2);
    CHECK(pcclProfilerApiAllReduceMultiple == 3 && pcclProfilerApiSynchronizeSharedState == 4);
    CHECK(pcclProfilerApiUpdateTopology == 5 && pcclProfilerApiOptimizeTopology == 6 && pcclProfilerApiArePeersPending == 7);
    CHECK(pcclProfilerPhaseWaitInit == 0 && pcclProfilerPhaseReduceScatter == 1 && pcclProfilerPhaseAllGather == 2);
    CHECK(pcclProfilerPhaseWaitDone == 3 && pcclProfilerSend == 0 && pcclProfilerRecv == 1);
    CHECK(pcclProfilerStateRetried == 0 && pcclProfilerStateAborted == 1 && pcclProfilerStateQuantizedBytes == 2);
    CHECK(pcclProfilerStateCommenced == 3 && pcclProfilerStateBytes == 4);
    CHECK(pcclProfilerAbortPeerLost == 1 && pcclProfilerAbortTimeout == 2 && pcclProfilerAbortMasterLost == 3);
    CHECK(pcclProfilerAbortMismatch == 4 && pcclProfilerAbortLocal == 5);
    CHECK(pcclProfilerLogError == 0 && pcclProfilerLogWarn == 1 && pcclProfilerLogInfo == 2 && pcclProfilerLogDebug == 3);
    SIZE(pcclProfilerState_t, 4);
    SIZE(pcclProfilerLogLevel_t, 4);
}

static void structs(void) {
    typedef pcclProfilerEventDescr_t D;
    SIZE(D, 112);
    OFF(D, type, 0);
    OFF(D, parent, 8);
    OFF(D, u, 16);
    OFF(D, u.api.api, 16);
    OFF(D, u.api.tag, 24);
    OFF(D, u.api.count, 32);
    OFF(D, u.coll.tag, 16);
    OFF(D, u.coll.seq, 24);
    OFF(D, u.coll.count, 32);
    OFF(D, u.coll.bytes, 40);
    OFF(D, u.coll.datatype, 48);
    OFF(D, u.coll.op, 52);
    OFF(D, u.coll.quantized_datatype, 56);
    OFF(D, u.coll.quantization_algorithm, 60);
    OFF(D, u.coll.world_size, 64);
    OFF(D, u.coll.rank, 68);
    OFF(D, u.coll.tx_stream, 72);
    OFF(D, u.coll.rx_stream, 76);
    OFF(D, u.phase.phase, 16);
    OFF(D, u.phase.tag, 24);
    OFF(D, u.transfer.direction, 16);
    OFF(D, u.transfer.peer_rank, 20);
    OFF(D, u.transfer.tag, 24);
    OFF(D, u.transfer.offset, 32);
    OFF(D, u.transfer.bytes, 40);
    OFF(D, u.transfer.stream, 48);
    OFF(D, u.sync.revision, 16);
    OFF(D, u.sync.tensors, 24);
    OFF(D, u.sync.strategy, 32);
    OFF(D, u.tensor.name, 16);
    OFF(D, u.tensor.bytes, 24);
    OFF(D, u.tensor.peer_uuid, 32);
    OFF(D, u.hash.tensors, 16);
    OFF(D, u.hash.bytes, 24);
    OFF(D, u.topology.round, 16);
    OFF(D, u.topology.neighbours, 24);
    OFF(D, u.bandwidth.peer_uuid, 16);
    OFF(D, u.bandwidth.duration_ms, 32);

    SIZE(pcclProfilerStateArgs_t, 40);
    OFF(pcclProfilerStateArgs_t, reason, 0);
    OFF(pcclProfilerStateArgs_t, attempt, 4);
    OFF(pcclProfilerStateArgs_t, bytes, 8);
    OFF(pcclProfilerStateArgs_t, bytes2, 16);
    OFF(pcclProfilerStateArgs_t, world_size, 24);
    OFF(pcclProfilerStateArgs_t, rank, 28);
    OFF(pcclProfilerStateArgs_t, result, 32);

    SIZE(pcclProfilerCommInfo_t, 24);
    OFF(pcclProfilerCommInfo_t, version, 0);
    OFF(pcclProfilerCommInfo_t, peer_group, 4);
    OFF(pcclProfilerCommInfo_t, p2p_connection_pool_size, 8);
    OFF(pcclProfilerCommInfo_t, pid, 12);
    OFF(pcclProfilerCommInfo_t, library_version, 16);

    SIZE(pcclProfiler_v1_t, 48);
    OFF(pcclProfiler_v1_t, name, 0);
    OFF(pcclProfiler_v1_t, init, 8);
    OFF(pcclProfiler_v1_t, start_event, 16);
    OFF(pcclProfiler_v1_t, stop_event, 24);
    OFF(pcclProfiler_v1_t, record_event_state, 32);
    OFF(pcclProfiler_v1_t, finalize, 40);
}

int main(void) {
    enums();
    structs();
    return check_exit();
}
