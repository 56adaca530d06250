// cuda_simplehash.cu: SimpleHash of one input, one launch (the device code and its design are in
// cuda_simplehash.cuh).
#include <pthread.h>
#include <stdint.h>

#include "cuda/cuda_simplehash.cuh"

extern "C" {
#include "log/log.h"
}

namespace {

template <int Q>
__global__ __launch_bounds__(LANES) void segment_kernel(const uint8_t *__restrict__ p, uint64_t len,
                                                        unsigned *counter, uint64_t *seg_values,
                                                        uint64_t *scratch, uint64_t *result) {
    const uint64_t v = segment_value<Q>(p, len, blockIdx.x);
    publish_and_fold(v, blockIdx.x, gridDim.x, len, counter, seg_values, scratch, result);
}

}  // namespace

// Workspace: [arrival counter, 8 bytes][segment values, S x 8][fold scratch, ceil(S / 256) x 8].
extern "C" size_t cuda_simplehash_workspace_bytes(size_t len) {
    const uint64_t s = segment_count(len);
    return (size_t) (8 * (1 + s + fold_scratch(s)));
}

extern "C" cuda_status_t cuda_simplehash_async(const void *data, size_t len, void *workspace,
                                               uint64_t *result, void *stream_ptr) {
    const uint8_t *p = (const uint8_t *) data;
    cudaStream_t stream = (cudaStream_t) stream_ptr;
    const uint64_t s = segment_count(len);
    if ((len > 0 && p == NULL) || workspace == NULL || result == NULL || s > 0x7fffffffu) return CUDA_INVALID;
    unsigned *counter = (unsigned *) workspace;
    uint64_t *values = (uint64_t *) workspace + 1, *scratch = values + s;

    const int misalign = (int) ((uintptr_t) p % 16);
    const dim3 grid((unsigned) s);
    switch (misalign == 0 ? -1 : misalign / 4) {
    case -1: segment_kernel<-1><<<grid, LANES, 0, stream>>>(p, len, counter, values, scratch, result); break;
    case 0: segment_kernel<0><<<grid, LANES, 0, stream>>>(p, len, counter, values, scratch, result); break;
    case 1: segment_kernel<1><<<grid, LANES, 0, stream>>>(p, len, counter, values, scratch, result); break;
    case 2: segment_kernel<2><<<grid, LANES, 0, stream>>>(p, len, counter, values, scratch, result); break;
    default: segment_kernel<3><<<grid, LANES, 0, stream>>>(p, len, counter, values, scratch, result); break;
    }
    return cuda_check(cudaGetLastError(), "segment_kernel launch");
}

// The synchronous hash keeps one workspace per device, grown as needed, behind one lock: hashes
// take turns, which costs little since each one alone saturates the GPU's memory bandwidth. The
// kernel writes the result straight into a mapped page-locked host slot: no copy to wait for.
namespace {

constexpr int MAX_CACHED_DEVICES = 64;

struct Workspace {
    void *mem;
    size_t bytes;
};

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
Workspace g_workspace[MAX_CACHED_DEVICES];
uint64_t *g_result;  // page-locked, mapped, portable: every device writes it directly

void drop(Workspace *ws) {
    if (ws->mem != NULL) cudaFree(ws->mem);
    ws->mem = NULL;
    ws->bytes = 0;
}

cuda_status_t hash_on_current_device(int device, const void *data, size_t len, cudaStream_t stream,
                                     uint64_t *out) {
    cuda_status_t st = CUDA_OK;
    if (g_result == NULL) {
        st = cuda_check(cudaHostAlloc((void **) &g_result, sizeof *g_result, cudaHostAllocMapped | cudaHostAllocPortable),
                        "cudaHostAlloc (simplehash result)");
        if (st != CUDA_OK) return st;
    }
    const size_t need = cuda_simplehash_workspace_bytes(len);
    Workspace own = {NULL, 0};
    Workspace *ws = device < MAX_CACHED_DEVICES ? &g_workspace[device] : &own;
    if (ws->bytes < need) {
        drop(ws);
        const size_t bytes = need < 65536 ? 65536 : need;
        st = cuda_check(cudaMalloc(&ws->mem, bytes), "cudaMalloc (simplehash workspace)");
        // The arrival counter starts at zero; every completed hash leaves it there.
        if (st == CUDA_OK) st = cuda_check(cudaMemsetAsync(ws->mem, 0, 8, stream), "cudaMemsetAsync");
        if (st != CUDA_OK) {
            drop(ws);
            return st;
        }
        ws->bytes = bytes;
    }
    st = cuda_simplehash_async(data, len, ws->mem, g_result, stream);
    if (st == CUDA_OK) st = cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (simplehash)");
    if (st == CUDA_OK) *out = *(volatile uint64_t *) g_result;
    // After a failure the counter may be anything: start the next hash with a fresh workspace.
    if (st != CUDA_OK || ws == &own) drop(ws);
    return st;
}

}  // namespace

extern "C" cuda_status_t cuda_simplehash(const void *data, size_t len, void *stream, uint64_t *out) {
    if (out == NULL || (len > 0 && data == NULL)) return CUDA_INVALID;
    int count = 0;
    cuda_status_t st = cuda_device_count(&count);
    if (st != CUDA_OK) return st;
    int current = 0, device = 0;
    st = cuda_check(cudaGetDevice(&current), "cudaGetDevice");
    if (st != CUDA_OK) return st;
    device = current;
    if (len > 0) {
        cudaPointerAttributes attr;
        if (cudaPointerGetAttributes(&attr, data) != cudaSuccess ||
            (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)) {
            cudaGetLastError();
            LOG_ERROR("cuda", "simplehash: %p is not device memory", data);
            return CUDA_INVALID;
        }
        if (attr.type == cudaMemoryTypeDevice) device = attr.device;
    }
    if (device != current && (st = cuda_check(cudaSetDevice(device), "cudaSetDevice")) != CUDA_OK) return st;

    pthread_mutex_lock(&g_lock);
    st = hash_on_current_device(device, data, len, (cudaStream_t) stream, out);
    pthread_mutex_unlock(&g_lock);

    if (device != current) cudaSetDevice(current);
    return st;
}
