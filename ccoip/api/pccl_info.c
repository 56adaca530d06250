/* Process-wide public calls: pcclInit, pcclGetBuildInfo, pcclResultString. */
#include <stdatomic.h>

#include "ccoip/api/pccl_internal.h"
#include "pccl.h"

static atomic_bool initialized;

bool pccl_is_initialized(void) { return atomic_load_explicit(&initialized, memory_order_acquire); }

PCCL_EXPORT pcclResult_t pcclInit(void) {
    atomic_store_explicit(&initialized, true, memory_order_release);
    return pcclSuccess;
}

PCCL_EXPORT pcclResult_t pcclGetBuildInfo(pcclBuildInfo_t *info) {
    if (info == NULL) return pcclInvalidArgument;
#if defined(PCCL_WITH_CUDA)
    info->has_cuda_support = true;
#else
    info->has_cuda_support = false;
#endif
    return pcclSuccess;
}

PCCL_EXPORT const char *pcclResultString(pcclResult_t result) {
    switch (result) {
    case pcclSuccess: return "pcclSuccess";
    case pcclNotInitialized: return "pcclNotInitialized";
    case pcclInternalError: return "pcclInternalError";
    case pcclInvalidArgument: return "pcclInvalidArgument";
    case pcclInvalidUsage: return "pcclInvalidUsage";
    case pcclTooFewPeers: return "pcclTooFewPeers";
    case pcclMasterConnectionFailed: return "pcclMasterConnectionFailed";
    case pcclRankConnectionFailed: return "pcclRankConnectionFailed";
    case pcclRankConnectionLost: return "pcclRankConnectionLost";
    case pcclNoSharedStateAvailable: return "pcclNoSharedStateAvailable";
    case pcclPendingAsyncOps: return "pcclPendingAsyncOps";
    case pcclUpdateTopologyFailed: return "pcclUpdateTopologyFailed";
    case pcclTopologyOptimizationFailed: return "pcclTopologyOptimizationFailed";
    case pcclCollectiveTimeout: return "pcclCollectiveTimeout";
    }
    return "unknown pcclResult_t";
}
