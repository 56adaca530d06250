// cuda_simplehash.cu: SimpleHash of one input, one launch (the device code and its design are in
// cuda_simplehash.cuh).
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include <atomic>

#include "cuda/cuda_simplehash.cuh"

extern "C" {
#include "log/log.h"
}

namespace {

// Row groups per block (cuda_simplehash.cuh, segment_value): G = 2 (512 threads) while the grid
// is small, so that each multiprocessor keeps more loads in flight; G = 1 for one segment (a
// small block starts and ends sooner) and for large grids, whose many blocks already fill the
// GPU (measured on an H200: 2 beat 1 and 4 from 4 to 32 MiB, 1 beat both at 256 MiB;
// bench/cuda/NOTES.md).
constexpr uint64_t GROUPED_MAX_SEGMENTS = 512;

// done != NULL (the synchronous hash): the block that folds the tree then stores seq into *done
// (mapped host memory), after the result and the cleared counter are visible to the host.
//
// Programmatic dependent launch (Hopper; elsewhere the attribute is ignored): a block reads its
// segment and folds its lane tree, then waits for the grid before it in the stream
// (cudaGridDependencySynchronize: at once when that grid has ended, as any grid that is not
// this kernel has, since only this kernel lets its successor start early), then lets the next
// launch of this kernel start, then publishes its value and counts itself in. So the next
// hash's loads overlap this one's tail (the arrival counter, the last block's fold of the
// segment tree: about 2 us, bench/cuda/NOTES.md), and touch the workspace only after this grid
// has ended. Its inputs are safe to read early: every grid before this one in the stream that
// is not this kernel had ended, and this grid had waited for it, before any block of this grid
// let the next one start.
template <int Q, int G>
__global__ __launch_bounds__(LANES * G) void segment_kernel(const uint8_t *__restrict__ p, uint64_t len,
                                                            unsigned *counter, uint64_t *seg_values, uint64_t *scratch,
                                                            uint64_t *result, volatile unsigned *done, unsigned seq) {
    const uint64_t v = segment_value<Q, G>(p, len, blockIdx.x);
    cudaGridDependencySynchronize();
    cudaTriggerProgrammaticLaunchCompletion();
    const bool folded = publish_and_fold(v, blockIdx.x, gridDim.x, len, counter, seg_values, scratch, result);
    if (folded && done != NULL && threadIdx.x == 0) {
        __threadfence_system();
        *done = seq;
    }
}

template <int Q, int G>
cudaError_t launch_segments(unsigned blocks, const uint8_t *p, uint64_t len, unsigned *counter, uint64_t *values,
                            uint64_t *scratch, uint64_t *result, volatile unsigned *done, unsigned seq,
                            cudaStream_t stream) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(LANES * G);
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, segment_kernel<Q, G>, p, len, counter, values, scratch, result, done, seq);
}

cuda_status_t launch(const void *data, size_t len, void *workspace, uint64_t *result, volatile unsigned *done,
                     unsigned seq, cudaStream_t stream) {
    const uint8_t *p = (const uint8_t *) data;
    const uint64_t s = segment_count(len);
    if ((len > 0 && p == NULL) || workspace == NULL || result == NULL || s > 0x7fffffffu) return CUDA_INVALID;
    unsigned *counter = (unsigned *) workspace;
    uint64_t *values = (uint64_t *) workspace + 1, *scratch = values + s;

    const int misalign = (int) ((uintptr_t) p % 16);
    const unsigned blocks = (unsigned) s;
    cudaError_t e = cudaSuccess;
#define SEGMENT_LAUNCH(Q)                                                                                   \
    e = s > 1 && s <= GROUPED_MAX_SEGMENTS                                                                  \
            ? launch_segments<Q, 2>(blocks, p, len, counter, values, scratch, result, done, seq, stream) \
            : launch_segments<Q, 1>(blocks, p, len, counter, values, scratch, result, done, seq, stream)
    switch (misalign == 0 ? -1 : misalign / 4) {
    case -1: SEGMENT_LAUNCH(-1); break;
    case 0: SEGMENT_LAUNCH(0); break;
    case 1: SEGMENT_LAUNCH(1); break;
    case 2: SEGMENT_LAUNCH(2); break;
    default: SEGMENT_LAUNCH(3); break;
    }
#undef SEGMENT_LAUNCH
    if (e != cudaSuccess) return cuda_check(e, "segment_kernel launch");
    return cuda_check(cudaGetLastError(), "segment_kernel launch");
}

}  // namespace

// Workspace: [arrival counter, 8 bytes][segment values, S x 8][fold scratch, ceil(S / 256) x 8].
extern "C" size_t cuda_simplehash_workspace_bytes(size_t len) {
    const uint64_t s = segment_count(len);
    return (size_t) (8 * (1 + s + fold_scratch(s)));
}

extern "C" cuda_status_t cuda_simplehash_async(const void *data, size_t len, void *workspace,
                                               uint64_t *result, void *stream_ptr) {
    return launch(data, len, workspace, result, NULL, 0, (cudaStream_t) stream_ptr);
}

// The synchronous hash keeps one workspace per device, grown as needed, behind one lock: hashes
// take turns, which costs little since each one alone saturates the GPU's memory bandwidth. The
// kernel writes the result straight into a mapped page-locked host slot, then a sequence number
// beside it: the host watches that word for a short while (a small hash is done in a few
// microseconds, sooner than the stream's completion reaches the host), then falls back to
// synchronizing the stream, which also reports any error of the kernel.
//
// Inputs of at most HOST_HASH_MAX bytes are copied to page-locked memory and hashed by
// hash_simple() instead (the same 64 bits by definition): a copy's round trip is shorter than a
// kernel launch's plus its completion (H200: 4 KiB copy 7.6 us, then 1.9 us of CPU hashing,
// against 12.0 us for the smallest kernel and its wait; bench/cuda/NOTES.md).
namespace {

constexpr int MAX_CACHED_DEVICES = 64;

struct Workspace {
    void *mem;
    size_t bytes;
};

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
Workspace g_workspace[MAX_CACHED_DEVICES];
uint64_t *g_result;  // page-locked, mapped, portable: [0] the hash, [1] the done word
unsigned g_seq;      // the last sequence number used, under g_lock
constexpr size_t HOST_HASH_MAX = 16384;
void *g_stage;       // page-locked, HOST_HASH_MAX bytes: small inputs are copied here
constexpr double SPIN_US = 100;  // watch the done word this long before synchronizing

double since_us(const timespec &a) {
    timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) * 1e-3;
}

void drop(Workspace *ws) {
    if (ws->mem != NULL) cudaFree(ws->mem);
    ws->mem = NULL;
    ws->bytes = 0;
}

cuda_status_t hash_on_current_device(int device, const void *data, size_t len, cudaStream_t stream,
                                     uint64_t *out) {
    cuda_status_t st = CUDA_OK;
    if (g_result == NULL) {
        st = cuda_check(cudaHostAlloc((void **) &g_result, 2 * sizeof *g_result, cudaHostAllocMapped | cudaHostAllocPortable),
                        "cudaHostAlloc (simplehash result)");
        if (st != CUDA_OK) return st;
        g_result[1] = 0;
    }
    if (len == 0) {  // the pointer is never read
        *out = hash_simple(NULL, 0);
        return CUDA_OK;
    }
    if (len <= HOST_HASH_MAX) {
        if (g_stage == NULL) {
            st = cuda_check(cudaHostAlloc(&g_stage, HOST_HASH_MAX, cudaHostAllocPortable), "cudaHostAlloc (simplehash stage)");
            if (st != CUDA_OK) return st;
        }
        st = cuda_check(cudaMemcpyAsync(g_stage, data, len, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync (simplehash)");
        if (st == CUDA_OK) st = cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (simplehash)");
        if (st == CUDA_OK) *out = hash_simple(g_stage, len);
        return st;
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
    volatile unsigned *done = (volatile unsigned *) (g_result + 1);
    const unsigned seq = ++g_seq == 0 ? ++g_seq : g_seq;
    st = launch(data, len, ws->mem, g_result, done, seq, stream);
    if (st == CUDA_OK) {
        timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        bool seen = false;
        for (unsigned i = 1; !(seen = *done == seq); i++)
            if (i % 64 == 0 && since_us(t0) > SPIN_US) break;
        if (!seen) {
            st = cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (simplehash)");
            if (st == CUDA_OK && *done != seq) {
                LOG_ERROR("cuda", "simplehash: the kernel finished without storing its result");
                st = CUDA_RUNTIME_ERROR;
            }
        }
    }
    std::atomic_thread_fence(std::memory_order_acquire);
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
