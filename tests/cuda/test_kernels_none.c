/* The host-only flavour of test_kernels.h: no CUDA, so every launch fails (never reached: the
 * tests skip first). */
#include "tests/cuda/test_kernels.h"

int tk_spin(long long ns, void *stream) { return (void) ns, (void) stream, -1; }
int tk_fill(void *buf, int bf16, size_t count, int p, int s, void *stream) {
    return (void) buf, (void) bf16, (void) count, (void) p, (void) s, (void) stream, -1;
}
int tk_copy(void *dst, const void *src, size_t bytes, void *stream) {
    return (void) dst, (void) src, (void) bytes, (void) stream, -1;
}
int tk_compute(float *y, const float *x, size_t count, int iters, void *stream) {
    return (void) y, (void) x, (void) count, (void) iters, (void) stream, -1;
}
int tk_stream_busy(void *stream) { return (void) stream, -1; }
const char *tk_gate_kind(void) { return "none"; }
