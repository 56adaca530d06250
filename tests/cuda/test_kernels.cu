// test_kernels.cu: see test_kernels.h. Each returns 0, or -1 when the launch failed.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda/cuda_api.h"
#include "tests/cuda/test_kernels.h"

namespace {

__global__ void spin(long long ns) {
    long long t0 = clock64();
    // clock64 counts SM cycles; 2 GHz is the upper end of an H100's clock, so this spins >= ns.
    while (clock64() - t0 < ns * 2) {
    }
}

__global__ void fill(void *buf, int bf16, size_t count, int p, int s) {
    for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < count; i += (size_t) gridDim.x * blockDim.x) {
        float v = (float) ((i * 7 + (size_t) p * 13 + (size_t) s * 5) % 61);
        if (bf16) ((__nv_bfloat16 *) buf)[i] = __float2bfloat16_rn(v);
        else ((float *) buf)[i] = v;
    }
}

__global__ void copy(unsigned char *dst, const unsigned char *src, size_t bytes) {
    for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < bytes; i += (size_t) gridDim.x * blockDim.x)
        dst[i] = src[i];
}

__global__ void compute(float *y, const float *x, size_t count, int iters) {
    for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < count; i += (size_t) gridDim.x * blockDim.x) {
        float v = x[i];
        for (int k = 0; k < iters; k++) v = v * 0.999f + 0.001f;
        y[i] = v;
    }
}

int done() { return cudaGetLastError() == cudaSuccess ? 0 : -1; }

}  // namespace

extern "C" int tk_spin(long long ns, void *stream) {
    spin<<<1, 1, 0, (cudaStream_t) stream>>>(ns);
    return done();
}

extern "C" int tk_fill(void *buf, int bf16, size_t count, int p, int s, void *stream) {
    fill<<<264, 256, 0, (cudaStream_t) stream>>>(buf, bf16, count, p, s);
    return done();
}

extern "C" int tk_copy(void *dst, const void *src, size_t bytes, void *stream) {
    if (bytes == 0) return 0;
    copy<<<264, 256, 0, (cudaStream_t) stream>>>((unsigned char *) dst, (const unsigned char *) src, bytes);
    return done();
}

extern "C" int tk_compute(float *y, const float *x, size_t count, int iters, void *stream) {
    compute<<<264, 256, 0, (cudaStream_t) stream>>>(y, x, count, iters);
    return done();
}

extern "C" int tk_stream_busy(void *stream) {
    cudaError_t e = cudaStreamQuery((cudaStream_t) stream);
    if (e == cudaErrorNotReady) return 1;
    return e == cudaSuccess ? 0 : -1;
}

extern "C" const char *tk_gate_kind(void) { return cuda_gate_kind(); }
