/* The host-only flavour: no fast-math kernels (never reached: the test skips first). */
#include "cuda/cuda_fingerprint.h"

cuda_status_t cuda_fingerprint(pcclDeterminismFingerprint_t *fp, int quick) {
    return (void) fp, (void) quick, CUDA_NO_DEVICE;
}
cuda_status_t cuda_fingerprint_fastmath(pcclDeterminismFingerprint_t *fp, int quick) {
    return (void) fp, (void) quick, CUDA_NO_DEVICE;
}
