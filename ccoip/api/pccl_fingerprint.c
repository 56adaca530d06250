/* pccl_fingerprint.c: pcclGetDeterminismFingerprint (docs/fingerprint.md). */
#include <string.h>

#include "cuda/cuda_table.h"
#include "fingerprint/fingerprint.h"
#include "log/log.h"
#include "pccl.h"

#define MOD "pccl"

PCCL_EXPORT pcclResult_t pcclGetDeterminismFingerprint(uint32_t flags, pcclDeterminismFingerprint_t *out) {
    if (out == NULL || (flags & ~(PCCL_FINGERPRINT_QUICK | PCCL_FINGERPRINT_CPU)) != 0) {
        LOG_ERROR(MOD, "pcclGetDeterminismFingerprint: out is NULL or flags 0x%x are unknown", flags);
        return pcclInvalidArgument;
    }
    if (flags & PCCL_FINGERPRINT_CPU) return fp_cpu_fingerprint(out, flags, 0);
    const cuda_table_t *cu = cuda_table();
    int n = 0;
    if (cu == NULL || cu->device_count(&n) != CUDA_OK || n == 0) {
        LOG_ERROR(MOD, "pcclGetDeterminismFingerprint: no GPU%s (PCCL_FINGERPRINT_CPU gives the CPU reference)",
                  cu == NULL ? " (libpccl built without CUDA)" : "");
        memset(out, 0, sizeof *out);
        return pcclInvalidUsage;
    }
    cuda_status_t st = cu->fingerprint(out, (flags & PCCL_FINGERPRINT_QUICK) != 0);
    if (st != CUDA_OK) {
        LOG_ERROR(MOD, "pcclGetDeterminismFingerprint: the GPU kernels failed: %s", cu->status_string(st));
        return pcclInternalError;
    }
    return pcclSuccess;
}
