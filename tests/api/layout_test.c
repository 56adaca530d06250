/* The public ABI on x86-64: every enum value and every struct's size and field offsets, written
 * out by hand from API.md's field lists (PCCL 1.0's layout), so that a change to pccl.h that would
 * break binary compatibility fails here. */
#include <stddef.h>

#include "pccl.h"
#include "tests/common/check.h"

/* Every extension announces itself (API.md "Extensions beyond PCCL's API"). */
#if !defined(PCCL_HAS_RESULT_STRING) || !defined(PCCL_HAS_COLLECTIVE_TIMEOUT)
#error "pccl.h lacks an extension's PCCL_HAS_ macro"
#endif

#define SIZE(t, n) CHECK_EQ_U64(sizeof(t), n)
#define OFF(t, f, n) CHECK_EQ_U64(offsetof(t, f), n)

static void enums(void) {
    CHECK(inetIPv4 == 0 && inetIPv6 == 1);
    CHECK(pcclSuccess == 0 && pcclNotInitialized == 1 && pcclInternalError == 2 && pcclInvalidArgument == 3);
    CHECK(pcclInvalidUsage == 4 && pcclTooFewPeers == 5 && pcclMasterConnectionFailed == 6);
    CHECK(pcclRankConnectionFailed == 7 && pcclRankConnectionLost == 8 && pcclNoSharedStateAvailable == 9);
    CHECK(pcclPendingAsyncOps == 10 && pcclUpdateTopologyFailed == 11 && pcclTopologyOptimizationFailed == 12);
    CHECK(pcclCollectiveTimeout == 100); /* extension (PCCL_HAS_COLLECTIVE_TIMEOUT) */
    CHECK(pcclUint8 == 0 && pcclInt8 == 1 && pcclInt16 == 2 && pcclUint16 == 3 && pcclUint32 == 4);
    CHECK(pcclInt32 == 5 && pcclUint64 == 6 && pcclInt64 == 7 && pcclFloat16 == 8 && pcclBFloat16 == 9);
    CHECK(pcclFloat == 10 && pcclDouble == 11);
    CHECK(pcclDeviceCpu == 0 && pcclDeviceCuda == 1);
    CHECK(pcclSum == 0 && pcclAvg == 1 && pcclProd == 2 && pcclMax == 3 && pcclMin == 4);
    CHECK(PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE == 1 && PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE == 2);
    CHECK(PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS == 3 && PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE == 4);
    CHECK(PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR == 0 && PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY == 1);
    CHECK(PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY == 2);
    CHECK(pcclDistributionNone == 0 && pcclDistributionNormal == 1 && pcclDistributionUniform == 2);
    CHECK(pcclQuantNone == 0 && pcclQuantMinMax == 1 && pcclQuantZeroPointScale == 2);
    /* Enums are int-sized in PCCL's ABI. */
    SIZE(pcclResult_t, 4);
    SIZE(pcclDataType_t, 4);
    SIZE(ccoip_inet_protocol_t, 4);
}

static void structs(void) {
    SIZE(ccoip_ipv4_address_t, 4);
    SIZE(ccoip_ipv6_address_t, 16);
    SIZE(ccoip_inet_address_t, 24);
    OFF(ccoip_inet_address_t, protocol, 0);
    OFF(ccoip_inet_address_t, ipv4, 4);
    OFF(ccoip_inet_address_t, ipv6, 8);
    SIZE(ccoip_socket_address_t, 28);
    OFF(ccoip_socket_address_t, inet, 0);
    OFF(ccoip_socket_address_t, port, 24);

    SIZE(pcclCommCreateParams_t, 36);
    OFF(pcclCommCreateParams_t, master_address, 0);
    OFF(pcclCommCreateParams_t, peer_group, 28);
    OFF(pcclCommCreateParams_t, p2p_connection_pool_size, 32);

    SIZE(pcclReduceInfo_t, 24);
    OFF(pcclReduceInfo_t, local_world_size, 0);
    OFF(pcclReduceInfo_t, tx_bytes, 8);
    OFF(pcclReduceInfo_t, rx_bytes, 16);

    SIZE(pcclReduceOperandDescriptor_t, 8);
    OFF(pcclReduceOperandDescriptor_t, datatype, 0);
    OFF(pcclReduceOperandDescriptor_t, distribution_hint, 4);
    SIZE(pcclQuantizationOptions_t, 8);
    OFF(pcclQuantizationOptions_t, quantized_datatype, 0);
    OFF(pcclQuantizationOptions_t, algorithm, 4);

    SIZE(pcclReduceDescriptor_t, 40);
    OFF(pcclReduceDescriptor_t, count, 0);
    OFF(pcclReduceDescriptor_t, op, 8);
    OFF(pcclReduceDescriptor_t, tag, 16);
    OFF(pcclReduceDescriptor_t, src_descriptor, 24);
    OFF(pcclReduceDescriptor_t, quantization_options, 32);

    SIZE(pcclReduceOpDescriptor_t, 56);
    OFF(pcclReduceOpDescriptor_t, sendbuf, 0);
    OFF(pcclReduceOpDescriptor_t, recvbuf, 8);
    OFF(pcclReduceOpDescriptor_t, descriptor, 16);
    SIZE(struct pcclReduceSingleDescriptor_t, 56);

    SIZE(pcclAsyncReduceOp_t, 16);
    OFF(pcclAsyncReduceOp_t, comm, 0);
    OFF(pcclAsyncReduceOp_t, tag, 8);

    SIZE(pcclRankUuid_t, 16);

    SIZE(pcclTensorInfo_t, 40);
    OFF(pcclTensorInfo_t, name, 0);
    OFF(pcclTensorInfo_t, data, 8);
    OFF(pcclTensorInfo_t, count, 16);
    OFF(pcclTensorInfo_t, datatype, 24);
    OFF(pcclTensorInfo_t, device_type, 28);
    OFF(pcclTensorInfo_t, allow_content_inequality, 32);

    SIZE(pcclSharedState_t, 24);
    OFF(pcclSharedState_t, revision, 0);
    OFF(pcclSharedState_t, count, 8);
    OFF(pcclSharedState_t, infos, 16);

    SIZE(pcclSharedStateSyncInfo_t, 16);
    OFF(pcclSharedStateSyncInfo_t, tx_bytes, 0);
    OFF(pcclSharedStateSyncInfo_t, rx_bytes, 8);

    SIZE(pcclBuildInfo_t, 1);
}

int main(void) {
    enums();
    structs();
    return check_exit();
}
