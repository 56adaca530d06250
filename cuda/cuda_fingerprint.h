/* cuda_fingerprint: the determinism fingerprint computed on the current CUDA device
 * (fingerprint/fingerprint.h says which functions, inputs and hashes; docs/fingerprint.md why). */
#ifndef PCCL_CUDA_FINGERPRINT_H
#define PCCL_CUDA_FINGERPRINT_H

#include "cuda/cuda_types.h"
#include "pccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every function of fp_funcs, on the GPU; quick: 2^24 instead of 2^32 inputs a float function. */
cuda_status_t cuda_fingerprint(pcclDeterminismFingerprint_t *fp, int quick);
/* The table's entry (fp is a pcclDeterminismFingerprint_t *). */
cuda_status_t cuda_fingerprint_table(void *fp, int quick);
/* The same kernels built with -use_fast_math (//cuda:fingerprint_fastmath, tests only): a
 * deliberately different build whose fingerprint must differ, naming the functions. */
cuda_status_t cuda_fingerprint_fastmath(pcclDeterminismFingerprint_t *fp, int quick);

#ifdef __cplusplus
}
#endif

#endif /* PCCL_CUDA_FINGERPRINT_H */
