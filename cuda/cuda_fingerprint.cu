// cuda_fingerprint.cu: the determinism fingerprint's kernels. Each function is evaluated over
// its inputs in batches of 2^28 into device memory, each batch hashed with SimpleHash on the
// GPU, the batch hashes combined on the host (fp_combine) exactly as the CPU reference does.
// Built twice: as is (the library), and with -use_fast_math and FP_FASTMATH (a test's
// deliberately different build; its entry point is cuda_fingerprint_fastmath).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_fingerprint.h"
#include "cuda/cuda_internal.cuh"
#include "fingerprint/fingerprint.h"

extern "C" {
#include "log/log.h"
}

#ifdef FP_FASTMATH
#define FP_ENTRY cuda_fingerprint_fastmath
#else
#define FP_ENTRY cuda_fingerprint
#endif

namespace {

template <int OP>
__device__ float unary(float x) {
    switch (OP) {
    case FP_OP_EXPF: return expf(x);
    case FP_OP_LOGF: return logf(x);
    case FP_OP_TANHF: return tanhf(x);
    case FP_OP_RSQRTF: return rsqrtf(x);
    case FP_OP_ERFF: return erff(x);
    case FP_OP_SINF: return sinf(x);
    case FP_OP_SQRTF: return sqrtf(x);
    default: return 1.0f / x;
    }
}

#define GRID_STRIDE(e, n) \
    for (uint64_t e = blockIdx.x * (uint64_t) blockDim.x + threadIdx.x; e < (n); e += (uint64_t) gridDim.x * blockDim.x)

template <int OP>
__global__ void k_unary(uint64_t base, uint64_t n, int quick, uint32_t *out) {
    GRID_STRIDE(e, n) out[e] = fp_canon32(__float_as_uint(unary<OP>(__uint_as_float(fp_input(base + e, quick)))));
}

__global__ void k_to_f16(uint64_t base, uint64_t n, int quick, uint16_t *out) {
    GRID_STRIDE(e, n)
    out[e] = fp_canon16h(__half_as_ushort(__float2half_rn(__uint_as_float(fp_input(base + e, quick)))));
}

__global__ void k_to_bf16(uint64_t base, uint64_t n, int quick, uint16_t *out) {
    GRID_STRIDE(e, n)
    out[e] = fp_canon16b(__bfloat16_as_ushort(__float2bfloat16_rn(__uint_as_float(fp_input(base + e, quick)))));
}

__global__ void k_from_f16(uint64_t n, uint32_t *out) {
    GRID_STRIDE(e, n) out[e] = fp_canon32(__float_as_uint(__half2float(__ushort_as_half((unsigned short) e))));
}

__global__ void k_from_bf16(uint64_t n, uint32_t *out) {
    GRID_STRIDE(e, n)
    out[e] = fp_canon32(__float_as_uint(__bfloat162float(__ushort_as_bfloat16((unsigned short) e))));
}

__global__ void k_dot(uint64_t n, uint32_t *out) {
    GRID_STRIDE(e, n) {
        float acc = 0.0f;
        for (uint32_t k = 0; k < FP_DOT_LEN; k++)
            acc = fmaf(fp_gen((uint32_t) e, k), fp_gen((uint32_t) e, k + FP_DOT_LEN), acc);
        out[e] = fp_canon32(__float_as_uint(acc));
    }
}

// One block of FP_TREE_BLOCK threads a block sum: (v0+v1)+(v2+v3)... in shared memory.
__global__ void k_tree(uint32_t *out) {
    __shared__ float v[FP_TREE_BLOCK];
    uint32_t t = threadIdx.x, b = blockIdx.x;
    v[t] = fp_gen(b, t);
    for (uint32_t s = 1; s < FP_TREE_BLOCK; s *= 2) {
        __syncthreads();
        if (t % (2 * s) == 0) v[t] = v[t] + v[t + s];
    }
    if (t == 0) out[b] = fp_canon32(__float_as_uint(v[0]));
}

void launch_unary(uint8_t op, uint64_t base, uint64_t n, int quick, uint32_t *out, int grid, cudaStream_t s) {
    switch (op) {
    case FP_OP_EXPF: k_unary<FP_OP_EXPF><<<grid, 256, 0, s>>>(base, n, quick, out); break;
    case FP_OP_LOGF: k_unary<FP_OP_LOGF><<<grid, 256, 0, s>>>(base, n, quick, out); break;
    case FP_OP_TANHF: k_unary<FP_OP_TANHF><<<grid, 256, 0, s>>>(base, n, quick, out); break;
    case FP_OP_RSQRTF: k_unary<FP_OP_RSQRTF><<<grid, 256, 0, s>>>(base, n, quick, out); break;
    case FP_OP_ERFF: k_unary<FP_OP_ERFF><<<grid, 256, 0, s>>>(base, n, quick, out); break;
    case FP_OP_SINF: k_unary<FP_OP_SINF><<<grid, 256, 0, s>>>(base, n, quick, out); break;
    case FP_OP_SQRTF: k_unary<FP_OP_SQRTF><<<grid, 256, 0, s>>>(base, n, quick, out); break;
    default: k_unary<FP_OP_RCP><<<grid, 256, 0, s>>>(base, n, quick, out); break;
    }
}

uint64_t inputs_of(const fp_func_t *f, int quick) {
    switch (f->kind) {
    case FP_FROM_F16:
    case FP_FROM_BF16: return 1u << 16;
    case FP_DOT: return FP_DOTS;
    case FP_TREE: return FP_TREE_BLOCKS;
    default: return fp_ninputs(quick);
    }
}

struct gpu_ctx {
    cudaStream_t s;
    void *out, *work;
    uint64_t *results; // device: one hash a batch
    int grid;
};

cuda_status_t one_function(gpu_ctx *g, const fp_func_t *f, int quick, uint64_t *hash) {
    uint64_t total = inputs_of(f, quick), batch = (uint64_t) 1 << FP_BATCH_LOG2;
    size_t nb = 0;
    for (uint64_t base = 0; base < total; base += batch, nb++) {
        uint64_t n = total - base < batch ? total - base : batch;
        switch (f->kind) {
        case FP_UNARY: launch_unary(f->op, base, n, quick, (uint32_t *) g->out, g->grid, g->s); break;
        case FP_TO_F16: k_to_f16<<<g->grid, 256, 0, g->s>>>(base, n, quick, (uint16_t *) g->out); break;
        case FP_TO_BF16: k_to_bf16<<<g->grid, 256, 0, g->s>>>(base, n, quick, (uint16_t *) g->out); break;
        case FP_FROM_F16: k_from_f16<<<g->grid, 256, 0, g->s>>>(n, (uint32_t *) g->out); break;
        case FP_FROM_BF16: k_from_bf16<<<g->grid, 256, 0, g->s>>>(n, (uint32_t *) g->out); break;
        case FP_DOT: k_dot<<<(unsigned) ((n + 255) / 256), 256, 0, g->s>>>(n, (uint32_t *) g->out); break;
        default: k_tree<<<(unsigned) n, FP_TREE_BLOCK, 0, g->s>>>((uint32_t *) g->out); break;
        }
        cuda_status_t st = cuda_check(cudaGetLastError(), "fingerprint kernel launch");
        if (st == CUDA_OK)
            st = cuda_simplehash_async(g->out, (size_t) n * fp_out_size(f), g->work, g->results + nb, g->s);
        if (st != CUDA_OK) return st;
    }
    uint64_t h[64];
    cuda_status_t st = cuda_check(cudaMemcpyAsync(h, g->results, nb * sizeof(uint64_t), cudaMemcpyDeviceToHost, g->s),
                                  "cudaMemcpyAsync(fingerprint hashes)");
    if (st == CUDA_OK) st = cuda_check(cudaStreamSynchronize(g->s), "cudaStreamSynchronize(fingerprint)");
    if (st == CUDA_OK) *hash = fp_combine(h, nb);
    return st;
}

}  // namespace

extern "C" cuda_status_t FP_ENTRY(pcclDeterminismFingerprint_t *fp, int quick) {
    fp_init(fp, quick ? PCCL_FINGERPRINT_QUICK : 0);
    int dev = 0, drv = 0, rt = 0;
    cuda_status_t st = cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
    cudaDeviceProp prop;
    if (st == CUDA_OK) st = cuda_check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
    if (st == CUDA_OK) st = cuda_check(cudaDriverGetVersion(&drv), "cudaDriverGetVersion");
    if (st == CUDA_OK) st = cuda_check(cudaRuntimeGetVersion(&rt), "cudaRuntimeGetVersion");
    if (st != CUDA_OK) return st;
    snprintf(fp->device, sizeof fp->device, "%.63s", prop.name);
    fp->compute_capability = (uint32_t) (prop.major * 10 + prop.minor);
    fp->driver_version = (uint32_t) drv;
    fp->runtime_version = (uint32_t) rt;

    gpu_ctx g = {NULL, NULL, NULL, NULL, prop.multiProcessorCount * 8};
    uint64_t most = fp_ninputs(quick) < ((uint64_t) 1 << FP_BATCH_LOG2) ? fp_ninputs(quick) : (uint64_t) 1 << FP_BATCH_LOG2;
    if (most < FP_DOTS) most = FP_DOTS;
    size_t out_bytes = (size_t) most * 4, work_bytes = cuda_simplehash_workspace_bytes(out_bytes);
    st = cuda_check(cudaStreamCreateWithFlags(&g.s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    if (st == CUDA_OK) st = cuda_check(cudaMalloc(&g.out, out_bytes), "cudaMalloc(fingerprint outputs)");
    if (st == CUDA_OK) st = cuda_check(cudaMalloc(&g.work, work_bytes), "cudaMalloc(fingerprint workspace)");
    if (st == CUDA_OK) st = cuda_check(cudaMalloc((void **) &g.results, 64 * sizeof(uint64_t)), "cudaMalloc");
    if (st == CUDA_OK) st = cuda_check(cudaMemsetAsync(g.work, 0, 8, g.s), "cudaMemsetAsync");
    for (size_t i = 0, e = 0; st == CUDA_OK && i < fp_nfuncs; i++, e++) st = one_function(&g, &fp_funcs[i], quick, &fp->entries[e].hash);
    if (g.s != NULL) cudaStreamSynchronize(g.s);
    cudaFree(g.results);
    cudaFree(g.work);
    cudaFree(g.out);
    if (g.s != NULL) cudaStreamDestroy(g.s);
    return st;
}

#ifndef FP_FASTMATH
extern "C" cuda_status_t cuda_fingerprint_table(void *fp, int quick) {
    return cuda_fingerprint((pcclDeterminismFingerprint_t *) fp, quick);
}
#endif
