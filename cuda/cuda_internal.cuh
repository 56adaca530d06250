// cuda_internal.cuh: what the .cu files of the cuda module share.
#ifndef PCCL_CUDA_INTERNAL_CUH
#define PCCL_CUDA_INTERNAL_CUH

#include <cuda_runtime.h>

#include "cuda/cuda_api.h"

// Maps a cudart error to a status and, unless it is cudaSuccess, logs one line naming the call
// ("cuda: cudaMemcpyAsync: out of memory"). "No device" is logged at info level only: it is
// the normal state of a machine without a GPU.
cuda_status_t cuda_check(cudaError_t err, const char *what);

#endif  // PCCL_CUDA_INTERNAL_CUH
