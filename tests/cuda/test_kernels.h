/* test_kernels.h: small kernels the GPU tests and benchmarks queue on a stream (nvcc-built,
 * tests/cuda:test_kernels), so that a test can write sendbuf and read recvbuf with kernels
 * ordered on the same stream as a stream-ordered all-reduce. */
#ifndef PCCL_TESTS_CUDA_TEST_KERNELS_H
#define PCCL_TESTS_CUDA_TEST_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The value peer p writes at element i in step s: a small integer, exact in float and bfloat16. */
static inline float tk_value(int p, size_t i, int s) { return (float) ((i * 7 + (size_t) p * 13 + (size_t) s * 5) % 61); }

/* One thread spins for ns nanoseconds on the GPU (a kernel still running when the host goes on). */
int tk_spin(long long ns, void *stream);
/* buf[i] = tk_value(p, i, s) as float (bf16 = 0) or bfloat16 (bf16 = 1). */
int tk_fill(void *buf, int bf16, size_t count, int p, int s, void *stream);
/* dst[0..bytes) = src[0..bytes), by a kernel (it reads src on the stream, as a next layer would). */
int tk_copy(void *dst, const void *src, size_t bytes, void *stream);
/* 1 while work queued on `stream` has not finished, 0 when it has, -1 on error. */
int tk_stream_busy(void *stream);
/* The gate pcclAllReduceOnStream uses in this process ("wait-value" or "kernel"). */
const char *tk_gate_kind(void);
/* A kernel that reads x and writes y = x * a + b for `iters` rounds (a training step's compute). */
int tk_compute(float *y, const float *x, size_t count, int iters, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* PCCL_TESTS_CUDA_TEST_KERNELS_H */
