// cuda_device.cu: thin C-callable wrappers over cudart (devices, pointers, copies, streams,
// allocations) that map every error to a cuda_status_t and one log line.
#include "cuda/cuda_internal.cuh"

extern "C" {
#include "log/log.h"
}

static bool is_no_device(cudaError_t err) {
    return err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
           err == cudaErrorInitializationError || err == cudaErrorCompatNotSupportedOnDevice ||
           err == cudaErrorSystemDriverMismatch;
}

cuda_status_t cuda_check(cudaError_t err, const char *what) {
    if (err == cudaSuccess) return CUDA_OK;
    cudaGetLastError();  // clear a non-sticky error so that the next call starts clean
    if (is_no_device(err)) {
        LOG_INFO("cuda", "%s: %s (no usable GPU)", what, cudaGetErrorString(err));
        return CUDA_NO_DEVICE;
    }
    LOG_ERROR("cuda", "%s: %s", what, cudaGetErrorString(err));
    if (err == cudaErrorMemoryAllocation) return CUDA_OUT_OF_MEMORY;
    if (err == cudaErrorInvalidValue || err == cudaErrorInvalidDevicePointer) return CUDA_INVALID;
    return CUDA_RUNTIME_ERROR;
}

extern "C" cuda_status_t cuda_device_count(int *count) {
    *count = 0;
    cuda_status_t st = cuda_check(cudaGetDeviceCount(count), "cudaGetDeviceCount");
    if (st != CUDA_OK) *count = 0;
    if (st == CUDA_OK && *count == 0) st = CUDA_NO_DEVICE;
    return st;
}

extern "C" bool cuda_is_device_pointer(const void *p) {
    if (p == NULL) return false;
    // cudaGetDeviceCount never creates a context; on a machine without a GPU we stop here.
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError();
        return false;
    }
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

static cudaStream_t as_stream(void *stream) { return (cudaStream_t) stream; }

static cuda_status_t copy(void *dst, const void *src, size_t n, void *stream, cudaMemcpyKind kind,
                          bool wait) {
    if (n == 0) return CUDA_OK;
    if (dst == NULL || src == NULL) return CUDA_INVALID;
    cuda_status_t st = cuda_check(cudaMemcpyAsync(dst, src, n, kind, as_stream(stream)), "cudaMemcpyAsync");
    if (st == CUDA_OK && wait) st = cuda_check(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");
    return st;
}

extern "C" cuda_status_t cuda_memcpy_d2h(void *dst, const void *src, size_t n, void *stream) {
    return copy(dst, src, n, stream, cudaMemcpyDeviceToHost, true);
}

extern "C" cuda_status_t cuda_memcpy_h2d(void *dst, const void *src, size_t n, void *stream) {
    return copy(dst, src, n, stream, cudaMemcpyHostToDevice, true);
}

extern "C" cuda_status_t cuda_memcpy_d2h_async(void *dst, const void *src, size_t n, void *stream) {
    return copy(dst, src, n, stream, cudaMemcpyDeviceToHost, false);
}

extern "C" cuda_status_t cuda_memcpy_h2d_async(void *dst, const void *src, size_t n, void *stream) {
    return copy(dst, src, n, stream, cudaMemcpyHostToDevice, false);
}

extern "C" cuda_status_t cuda_stream_create(void **stream) {
    cudaStream_t s = NULL;
    cuda_status_t st = cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    *stream = st == CUDA_OK ? (void *) s : NULL;
    return st;
}

extern "C" cuda_status_t cuda_stream_synchronize(void *stream) {
    return cuda_check(cudaStreamSynchronize(as_stream(stream)), "cudaStreamSynchronize");
}

extern "C" cuda_status_t cuda_stream_destroy(void *stream) {
    if (stream == NULL) return CUDA_OK;
    return cuda_check(cudaStreamDestroy(as_stream(stream)), "cudaStreamDestroy");
}

extern "C" cuda_status_t cuda_host_alloc(void **p, size_t n) {
    *p = NULL;
    return cuda_check(cudaHostAlloc(p, n == 0 ? 1 : n, cudaHostAllocPortable), "cudaHostAlloc");
}

extern "C" cuda_status_t cuda_host_free(void *p) {
    if (p == NULL) return CUDA_OK;
    return cuda_check(cudaFreeHost(p), "cudaFreeHost");
}

extern "C" cuda_status_t cuda_device_alloc(void **p, size_t n) {
    *p = NULL;
    return cuda_check(cudaMalloc(p, n == 0 ? 1 : n), "cudaMalloc");
}

extern "C" cuda_status_t cuda_device_free(void *p) {
    if (p == NULL) return CUDA_OK;
    return cuda_check(cudaFree(p), "cudaFree");
}

extern "C" const char *cuda_status_string(cuda_status_t status) {
    switch (status) {
    case CUDA_OK: return "CUDA_OK";
    case CUDA_NO_DEVICE: return "CUDA_NO_DEVICE";
    case CUDA_INVALID: return "CUDA_INVALID";
    case CUDA_OUT_OF_MEMORY: return "CUDA_OUT_OF_MEMORY";
    case CUDA_RUNTIME_ERROR: return "CUDA_RUNTIME_ERROR";
    }
    return "unknown cuda_status_t";
}
