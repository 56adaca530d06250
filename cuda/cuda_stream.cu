// cuda_stream.cu: what a stream-ordered collective needs from CUDA: events, a page-locked word
// the GPU reads directly, and a gate that holds a stream until the host writes that word.
//
// The gate is cuStreamWaitValue32 (a stream memory op: no SM is busy while it waits), reached
// through cudaGetDriverEntryPointByVersion so that nothing links libcuda; where the driver
// lacks it or refuses the word, a one-thread kernel polls it instead (it holds one SM slot
// while it waits). PCCL_STREAM_GATE=kernel forces the kernel (tests run both). The failure mark
// is a kernel too: it reads a status word the host wrote and fills a buffer with 0xFF if set.
#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.cuh"

extern "C" {
#include "log/log.h"
}

typedef CUresult (*wait_value32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

static pthread_once_t gate_once = PTHREAD_ONCE_INIT;
static wait_value32_fn wait_value32 = NULL;

__global__ void gate_kernel(const volatile uint32_t *flag, uint32_t target);
__global__ void mark_kernel(const volatile uint32_t *status, unsigned char *dst, size_t n);

static void gate_init(void) {
    // Load the fallback kernel now: under lazy module loading its first launch could otherwise
    // wait for the GPU, i.e. for a stream this process has gated.
    cudaFuncAttributes attr;
    if (cudaFuncGetAttributes(&attr, gate_kernel) != cudaSuccess) cudaGetLastError();
    if (cudaFuncGetAttributes(&attr, mark_kernel) != cudaSuccess) cudaGetLastError();
    const char *force = getenv("PCCL_STREAM_GATE");
    if (force != NULL && strcmp(force, "kernel") == 0) return;
    void *fn = NULL;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess && fn != NULL)
        wait_value32 = (wait_value32_fn) fn;
    else
        cudaGetLastError();
}

extern "C" const char *cuda_gate_kind(void) {
    pthread_once(&gate_once, gate_init);
    return __atomic_load_n(&wait_value32, __ATOMIC_ACQUIRE) != NULL ? "wait-value" : "kernel";
}

// Polls with a back-off: the word lives in host memory, each read crosses PCIe.
__global__ void gate_kernel(const volatile uint32_t *flag, uint32_t target) {
    while ((int32_t) (*flag - target) < 0) __nanosleep(2000);
}

extern "C" cuda_status_t cuda_stream_wait_flag(void *stream, const uint32_t *flag, uint32_t target) {
    if (flag == NULL) return CUDA_INVALID;
    pthread_once(&gate_once, gate_init);
    cudaStream_t s = (cudaStream_t) stream;
    wait_value32_fn wv = __atomic_load_n(&wait_value32, __ATOMIC_ACQUIRE);
    if (wv != NULL) {
        // Mapped portable memory: under unified addressing its host address is its device address.
        CUresult r = wv((CUstream) s, (CUdeviceptr) (uintptr_t) flag, target, CU_STREAM_WAIT_VALUE_GEQ);
        if (r == CUDA_SUCCESS) return CUDA_OK;
        LOG_WARN("cuda", "cuStreamWaitValue32: error %d; gating streams with a polling kernel instead", (int) r);
        __atomic_store_n(&wait_value32, (wait_value32_fn) NULL, __ATOMIC_RELEASE);
    }
    gate_kernel<<<1, 1, 0, s>>>(flag, target);
    return cuda_check(cudaGetLastError(), "gate kernel launch");
}

// One read of the status per block (it crosses PCIe); on success every block returns at once.
__global__ void mark_kernel(const volatile uint32_t *status, unsigned char *dst, size_t n) {
    __shared__ uint32_t failed;
    if (threadIdx.x == 0) failed = *status;
    __syncthreads();
    if (failed == 0) return;
    size_t head = (16 - ((uintptr_t) dst & 15)) & 15;
    if (head > n) head = n;
    size_t body = (n - head) / 16, tid = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
    size_t stride = (size_t) gridDim.x * blockDim.x;
    for (size_t i = tid; i < head; i += stride) dst[i] = 0xff;
    uint4 *b = (uint4 *) (dst + head);
    for (size_t i = tid; i < body; i += stride) b[i] = make_uint4(~0u, ~0u, ~0u, ~0u);
    for (size_t i = head + body * 16 + tid; i < n; i += stride) dst[i] = 0xff;
}

extern "C" cuda_status_t cuda_stream_mark_if(void *stream, const uint32_t *status, void *dst, size_t n) {
    if (status == NULL || (dst == NULL && n > 0)) return CUDA_INVALID;
    pthread_once(&gate_once, gate_init);
    size_t blocks = (n + 256 * 16 - 1) / (256 * 16);
    if (blocks < 1) blocks = 1;
    if (blocks > 256) blocks = 256;
    mark_kernel<<<(unsigned) blocks, 256, 0, (cudaStream_t) stream>>>(status, (unsigned char *) dst, n);
    return cuda_check(cudaGetLastError(), "mark kernel launch");
}

extern "C" cuda_status_t cuda_flags_alloc(uint32_t **flags, size_t n) {
    *flags = NULL;
    pthread_once(&gate_once, gate_init); // before any stream is gated
    void *p = NULL;
    cuda_status_t st = cuda_check(cudaHostAlloc(&p, n * sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable),
                                  "cudaHostAlloc(mapped)");
    if (st != CUDA_OK) return st;
    void *dev = NULL;
    st = cuda_check(cudaHostGetDevicePointer(&dev, p, 0), "cudaHostGetDevicePointer");
    if (st == CUDA_OK && dev != p) {
        LOG_ERROR("cuda", "mapped host memory has a device address unlike its host address (no unified addressing)");
        st = CUDA_RUNTIME_ERROR;
    }
    if (st != CUDA_OK) {
        cudaFreeHost(p);
        return st;
    }
    memset(p, 0, n * sizeof(uint32_t));
    *flags = (uint32_t *) p;
    return CUDA_OK;
}

extern "C" cuda_status_t cuda_event_create(void **event) {
    cudaEvent_t e = NULL;
    cuda_status_t st = cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    *event = st == CUDA_OK ? (void *) e : NULL;
    return st;
}

extern "C" cuda_status_t cuda_event_destroy(void *event) {
    if (event == NULL) return CUDA_OK;
    return cuda_check(cudaEventDestroy((cudaEvent_t) event), "cudaEventDestroy");
}

extern "C" cuda_status_t cuda_event_record(void *event, void *stream) {
    return cuda_check(cudaEventRecord((cudaEvent_t) event, (cudaStream_t) stream), "cudaEventRecord");
}

extern "C" cuda_status_t cuda_stream_wait_event(void *stream, void *event) {
    return cuda_check(cudaStreamWaitEvent((cudaStream_t) stream, (cudaEvent_t) event, 0), "cudaStreamWaitEvent");
}

extern "C" cuda_status_t cuda_event_synchronize(void *event) {
    return cuda_check(cudaEventSynchronize((cudaEvent_t) event), "cudaEventSynchronize");
}

extern "C" cuda_status_t cuda_memset_async(void *dst, int byte, size_t n, void *stream) {
    if (n == 0) return CUDA_OK;
    return cuda_check(cudaMemsetAsync(dst, byte, n, (cudaStream_t) stream), "cudaMemsetAsync");
}

extern "C" cuda_status_t cuda_stream_query(void *stream) {
    cudaError_t e = cudaStreamQuery((cudaStream_t) stream);
    if (e == cudaErrorNotReady) {
        cudaGetLastError();
        return CUDA_INVALID;
    }
    return cuda_check(e, "cudaStreamQuery");
}
