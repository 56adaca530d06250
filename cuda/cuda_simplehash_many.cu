// cuda_simplehash_many.cu: SimpleHash of many inputs in one launch, each result bit for bit the
// one-input hash (cuda_simplehash.cuh has the device code both share).
//
// A model's state is a few large tensors and many small ones; hashed one launch and one wait at
// a time, the small ones cost ~14 us each in launch and round trip and leave most SMs idle. Here
// the grid is the concatenation of the inputs' segments: block b finds its input (a 32-way
// search by one warp over the first-block table), hashes its segment exactly as the one-input
// kernel does, and the last block of each input folds that input's segment tree. Each input has
// its own arrival counter, segment values and fold scratch in the workspace.
//
// One launch per alignment class (input address % 16 = 0, or 1-3, 4-7, 8-11, 12-15): the
// misaligned code needs 88 registers a thread against 36 for the aligned, and one kernel holding
// both would run aligned inputs at the misaligned occupancy. Framework tensors are aligned, so a
// model is one launch. The table of inputs travels in the kernel's parameters (__grid_constant__,
// up to 32 KiB since CUDA 12.1): no staging buffer, no copy before the launch, and the call is as
// asynchronous as a launch. More than CHUNK inputs of one class take one launch per CHUNK.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda/cuda_simplehash.cuh"

extern "C" {
#include "log/log.h"
}

namespace {

constexpr uint32_t CHUNK = 768;  // inputs per launch: 27 KiB of parameters

// How a launch waits for the grid before it in the stream (see launch).
constexpr uint32_t WAIT_FIRST = 1;  // before it starts: the grid may share its memory
constexpr uint32_t WAIT_LAST = 2;   // before it ends: a grid of the same batch, disjoint memory

struct Item {
    const uint8_t *p;
    uint64_t len;
    uint32_t values;   // offset of its segment values in the workspace's value area
    uint32_t scratch;  // offset of its fold scratch
    uint32_t index;    // its place in the caller's list: its counter and result
    uint32_t pad;
};

// K inputs at most; first[t] is input t's first block, first[n] the grid size.
template <uint32_t K>
struct Batch {
    uint32_t n;
    uint32_t wait;  // WAIT_FIRST or WAIT_LAST (see launch)
    uint32_t first[K + 1];
    Item item[K];
};

// The input whose blocks include b: first[t] <= b < first[t + 1]. Warp 0 narrows [lo, hi) 32-fold
// per step (lanes probe evenly spaced entries; `first` is strictly increasing, so the probes that
// are <= b form a prefix of the warp).
template <uint32_t K>
__device__ __forceinline__ uint32_t find_input(const Batch<K> &batch, uint32_t b) {
    const int lane = threadIdx.x % 32;
    uint32_t lo = 0, hi = batch.n;
    while (hi - lo > 1) {
        const uint32_t step = (hi - lo + 31) / 32;
        const uint32_t idx = lo + (uint32_t) lane * step;
        const bool le = idx < hi && batch.first[idx] <= b;
        const uint32_t c = (uint32_t) __popc(__ballot_sync(0xffffffffu, le));  // >= 1: first[lo] <= b
        lo += (c - 1) * step;
        hi = min(hi, lo + step);
    }
    return lo;
}

template <int Q, uint32_t K>
__global__ __launch_bounds__(LANES) void many_kernel(const __grid_constant__ Batch<K> batch, unsigned *counters,
                                                     uint64_t *values, uint64_t *scratch, uint64_t *results) {
    // Let the next launch of this batch start on SMs that this grid's tail leaves idle.
    cudaTriggerProgrammaticLaunchCompletion();
    if (batch.wait == WAIT_FIRST) cudaGridDependencySynchronize();
    __shared__ uint32_t found;
    const uint32_t b = blockIdx.x;
    if (threadIdx.x < 32) {
        const uint32_t t = find_input(batch, b);
        if (threadIdx.x == 0) found = t;
    }
    __syncthreads();
    const uint32_t t = found;
    const Item &it = batch.item[t];
    const uint64_t s = b - batch.first[t], nseg = batch.first[t + 1] - batch.first[t];
    const uint64_t v = segment_value<Q>(it.p, it.len, s);
    publish_and_fold(v, s, nseg, it.len, counters + it.index, values + it.values,
                     scratch + it.scratch, results + it.index);
    if (batch.wait == WAIT_LAST) cudaGridDependencySynchronize();
}

static_assert(sizeof(Batch<CHUNK>) + 4 * sizeof(void *) <= 32764, "kernel parameters are limited to 32764 bytes");

// The alignment class of an input: -1 for a 16-byte aligned start, else (address % 16) / 4.
int align_class(const void *p) {
    const unsigned m = (unsigned) ((uintptr_t) p % 16);
    return m == 0 ? -1 : (int) (m / 4);
}

// Segments and fold-scratch words of inputs [0, n), and whether they fit the 32-bit offsets.
bool totals(const cuda_hash_item_t *items, size_t n, uint64_t *segments, uint64_t *scratch) {
    uint64_t s = 0, f = 0;
    for (size_t i = 0; i < n; i++) {
        const uint64_t k = segment_count(items[i].len);
        s += k;
        f += fold_scratch(k);
        if (s > 0x7fffffffu || n > 0x7fffffffu) return false;
    }
    *segments = s;
    *scratch = f;
    return true;
}

// Queues the inputs of class Q from *at on, at most K of them, in one launch; *at moves past them.
// Offsets into the value and scratch areas follow the caller's order (input i's come after those
// of inputs 0 .. i-1, whatever their class), kept in *sv and *sf.
//
// Every launch allows programmatic dependent launch (Hopper): a grid's last wave leaves SMs idle
// for up to a block's run time (~20 us at 256 KiB per block), and the next launch of the same
// batch, whose inputs, counters and workspace are disjoint from this one's, fills them. The first
// launch of a batch waits for the grid before it in the stream before it starts (that may be the
// previous batch, on the same workspace); every later launch waits for its predecessor before
// its blocks end, so the batch's last grid ends after all of them, and the wait of the next
// batch's first launch covers the whole batch. *wait: the mode of this launch, WAIT_LAST after.
template <int Q, uint32_t K>
cuda_status_t launch(const cuda_hash_item_t *items, size_t n, size_t *at, uint64_t *sv, uint64_t *sf,
                     unsigned *counters, uint64_t *values, uint64_t *scratch, uint64_t *results, uint32_t *wait,
                     cudaStream_t stream) {
    Batch<K> batch;
    batch.wait = *wait;
    uint32_t k = 0, block = 0;
    for (; *at < n && k < K; ++*at) {
        const cuda_hash_item_t &in = items[*at];
        const uint64_t segs = segment_count(in.len);
        if (align_class(in.data) == Q) {
            batch.first[k] = block;
            batch.item[k++] = Item{(const uint8_t *) in.data, in.len, (uint32_t) *sv, (uint32_t) *sf, (uint32_t) *at, 0};
            block += (uint32_t) segs;
        }
        *sv += segs;
        *sf += fold_scratch(segs);
    }
    if (k == 0) return CUDA_OK;
    batch.n = k;
    batch.first[k] = block;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(block);
    cfg.blockDim = dim3(LANES);
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    *wait = WAIT_LAST;
    return cuda_check(cudaLaunchKernelEx(&cfg, many_kernel<Q, K>, batch, counters, values, scratch, results),
                      "many_kernel launch");
}

// Every input of class Q, in launches of up to CHUNK inputs (a smaller parameter block when
// fewer: a launch copies all of it, and a 27 KiB block adds microseconds to the launch).
template <int Q>
cuda_status_t launch_class(const cuda_hash_item_t *items, size_t n, size_t count, unsigned *counters, uint64_t *values,
                           uint64_t *scratch, uint64_t *results, uint32_t *wait, cudaStream_t stream) {
    size_t at = 0;
    uint64_t sv = 0, sf = 0;
    cuda_status_t st = CUDA_OK;
    while (at < n && st == CUDA_OK) {
        if (count <= 32)
            st = launch<Q, 32>(items, n, &at, &sv, &sf, counters, values, scratch, results, wait, stream);
        else if (count <= 256)
            st = launch<Q, 256>(items, n, &at, &sv, &sf, counters, values, scratch, results, wait, stream);
        else
            st = launch<Q, CHUNK>(items, n, &at, &sv, &sf, counters, values, scratch, results, wait, stream);
    }
    return st;
}

}  // namespace

// Workspace: [segment values, S x 8][fold scratch, sum over inputs of ceil(S_i / 256) x 8].
extern "C" size_t cuda_simplehash_many_workspace_bytes(const cuda_hash_item_t *items, size_t n) {
    uint64_t s = 0, f = 0;
    if (!totals(items, n, &s, &f)) return SIZE_MAX;
    return (size_t) (8 * (s + f) + 8);
}

// The batch's launches; the first waits as `wait` says (WAIT_FIRST, or WAIT_LAST when the
// caller queued an earlier part of the same batch just before).
namespace {

cuda_status_t many_async(const cuda_hash_item_t *items, size_t n, unsigned *counters, void *workspace,
                         uint64_t *results, uint32_t wait, cudaStream_t stream) {
    if (n == 0) return CUDA_OK;
    if (items == NULL || counters == NULL || workspace == NULL || results == NULL) return CUDA_INVALID;
    size_t in_class[5] = {0, 0, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        if (items[i].len > 0 && items[i].data == NULL) return CUDA_INVALID;
        in_class[align_class(items[i].data) + 1]++;
    }
    uint64_t segments = 0, fold = 0;
    if (!totals(items, n, &segments, &fold)) return CUDA_INVALID;
    uint64_t *values = (uint64_t *) workspace, *scratch = values + segments;
    cuda_status_t st = CUDA_OK;
    if (in_class[0] > 0) st = launch_class<-1>(items, n, in_class[0], counters, values, scratch, results, &wait, stream);
    if (in_class[1] > 0 && st == CUDA_OK)
        st = launch_class<0>(items, n, in_class[1], counters, values, scratch, results, &wait, stream);
    if (in_class[2] > 0 && st == CUDA_OK)
        st = launch_class<1>(items, n, in_class[2], counters, values, scratch, results, &wait, stream);
    if (in_class[3] > 0 && st == CUDA_OK)
        st = launch_class<2>(items, n, in_class[3], counters, values, scratch, results, &wait, stream);
    if (in_class[4] > 0 && st == CUDA_OK)
        st = launch_class<3>(items, n, in_class[4], counters, values, scratch, results, &wait, stream);
    return st;
}

}  // namespace

extern "C" cuda_status_t cuda_simplehash_many_async(const cuda_hash_item_t *items, size_t n, unsigned *counters,
                                                    void *workspace, uint64_t *results, void *stream) {
    return many_async(items, n, counters, workspace, results, WAIT_FIRST, (cudaStream_t) stream);
}

// The synchronous batch: like cuda_simplehash (one lock, cached workspaces per device, results
// written straight into mapped page-locked host memory). Every input's pointer is checked
// (cudaPointerGetAttributes, ~0.2 us each: 30 us for a model of 150 tensors, a fifth of hashing
// it), so the checks overlap the hashing: once the inputs checked so far hold a third of the
// bytes, they are launched, and the rest are checked while the GPU hashes them. Inputs on more
// than one device are hashed device by device. Host scratch grows with the largest batch seen
// and is then reused: a repeated batch allocates nothing.
namespace {

constexpr int MAX_DEVICES = 64;
constexpr int ANY_DEVICE = -2;  // an empty input: no memory to read
constexpr int DONE = -1;        // hashed with an earlier device's group

struct DeviceSpace {
    void *mem;
    size_t bytes;
    unsigned *counters;  // zero between batches
    size_t ncounters;
};

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
DeviceSpace g_space[MAX_DEVICES];
uint64_t *g_results;  // mapped, portable: every device writes it
size_t g_nresults;
int *g_device;              // the device of each input
cuda_hash_item_t *g_group;  // the inputs of one device
size_t *g_index;            // their places in the caller's list
size_t g_host_cap;

void drop(DeviceSpace *d) {
    if (d->mem != NULL) cudaFree(d->mem);
    if (d->counters != NULL) cudaFree(d->counters);
    *d = DeviceSpace{NULL, 0, NULL, 0};
}

cuda_status_t reserve_host(size_t n) {
    if (n > g_host_cap) {
        free(g_device);
        free(g_group);
        free(g_index);
        g_device = (int *) malloc(n * sizeof *g_device);
        g_group = (cuda_hash_item_t *) malloc(n * sizeof *g_group);
        g_index = (size_t *) malloc(n * sizeof *g_index);
        g_host_cap = g_device && g_group && g_index ? n : 0;
        if (g_host_cap == 0) return CUDA_OUT_OF_MEMORY;
    }
    if (n > g_nresults) {
        if (g_results != NULL) cudaFreeHost(g_results);
        g_results = NULL;
        g_nresults = 0;
        cuda_status_t st = cuda_check(cudaHostAlloc((void **) &g_results, n * sizeof *g_results,
                                                    cudaHostAllocMapped | cudaHostAllocPortable),
                                      "cudaHostAlloc (simplehash results)");
        if (st != CUDA_OK) return st;
        g_nresults = n;
    }
    return CUDA_OK;
}

// Workspace and counters for n inputs, on the current device. A batch launched in two parts
// needs the workspace of both: 8 bytes more than the whole (the workspace size rounds up).
cuda_status_t reserve_device(DeviceSpace *d, const cuda_hash_item_t *items, size_t n, cudaStream_t stream) {
    const size_t whole = cuda_simplehash_many_workspace_bytes(items, n);
    if (whole == SIZE_MAX) return CUDA_INVALID;
    const size_t need = whole + 8;
    cuda_status_t st = CUDA_OK;
    if (d->bytes < need) {
        if (d->mem != NULL) cudaFree(d->mem);
        d->mem = NULL;
        d->bytes = 0;
        const size_t bytes = need < 65536 ? 65536 : need + need / 4;
        st = cuda_check(cudaMalloc(&d->mem, bytes), "cudaMalloc (simplehash batch workspace)");
        if (st != CUDA_OK) return st;
        d->bytes = bytes;
    }
    if (d->ncounters < n) {
        if (d->counters != NULL) cudaFree(d->counters);
        d->counters = NULL;
        d->ncounters = 0;
        const size_t count = n < 256 ? 256 : n;
        st = cuda_check(cudaMalloc((void **) &d->counters, count * sizeof(unsigned)),
                        "cudaMalloc (simplehash batch counters)");
        if (st == CUDA_OK)
            st = cuda_check(cudaMemsetAsync(d->counters, 0, count * sizeof(unsigned), stream), "cudaMemsetAsync");
        if (st != CUDA_OK) return st;
        d->ncounters = count;
    }
    return CUDA_OK;
}

// Queues inputs [a, b) of the list on the current device, whose space holds all n: results to
// g_results[a .. b), counters a .. b, the workspace after that of inputs [0, a). A part after the
// first (a > 0) follows the first in the stream and may overlap its tail.
cuda_status_t launch_part(DeviceSpace *d, const cuda_hash_item_t *items, size_t a, size_t b, cudaStream_t stream) {
    const size_t off = a == 0 ? 0 : cuda_simplehash_many_workspace_bytes(items, a);
    return many_async(items + a, b - a, d->counters + a, (char *) d->mem + off, g_results + a,
                      a == 0 ? WAIT_FIRST : WAIT_LAST, stream);
}

// The inputs of one device (the current one), whole, into g_results[0 .. n).
cuda_status_t hash_group(int device, const cuda_hash_item_t *items, size_t n, cudaStream_t stream) {
    DeviceSpace own = {NULL, 0, NULL, 0};
    DeviceSpace *d = device < MAX_DEVICES ? &g_space[device] : &own;
    cuda_status_t st = reserve_device(d, items, n, stream);
    if (st == CUDA_OK) st = launch_part(d, items, 0, n, stream);
    if (st == CUDA_OK) st = cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (simplehash batch)");
    // After a failure the counters may be anything: the next batch starts with fresh ones.
    if (st != CUDA_OK || d == &own) drop(d);
    return st;
}

// The device that owns input i (ANY_DEVICE for an empty one); CUDA_INVALID and one log line when
// it is not device memory.
cuda_status_t device_of(const cuda_hash_item_t *items, size_t i, int *dev) {
    *dev = ANY_DEVICE;
    if (items[i].len == 0) return CUDA_OK;
    cudaPointerAttributes attr;
    if (items[i].data == NULL || cudaPointerGetAttributes(&attr, items[i].data) != cudaSuccess ||
        (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)) {
        cudaGetLastError();
        LOG_ERROR("cuda", "simplehash: input %zu (%p, %zu bytes) is not device memory", i, items[i].data, items[i].len);
        return CUDA_INVALID;
    }
    *dev = attr.type == cudaMemoryTypeDevice ? attr.device : ANY_DEVICE;
    return CUDA_OK;
}

// Inputs [from, n) device by device (after the inputs before `from` are done), into out.
cuda_status_t hash_by_device(const cuda_hash_item_t *items, size_t from, size_t n, cudaStream_t stream, uint64_t *out,
                             int current) {
    cuda_status_t st = CUDA_OK;
    for (size_t i = from; i < n; i++)
        if (g_device[i] == ANY_DEVICE) g_device[i] = current;
    for (size_t i = from; i < n && st == CUDA_OK; i++) {
        const int dev = g_device[i];
        if (dev == DONE) continue;
        size_t k = 0;
        for (size_t j = i; j < n; j++)
            if (g_device[j] == dev) {
                g_group[k] = items[j];
                g_index[k++] = j;
                g_device[j] = DONE;
            }
        if (dev != current) st = cuda_check(cudaSetDevice(dev), "cudaSetDevice");
        if (st == CUDA_OK) st = hash_group(dev, g_group, k, stream);
        if (dev != current) cudaSetDevice(current);
        for (size_t j = 0; j < k && st == CUDA_OK; j++) out[g_index[j]] = ((volatile uint64_t *) g_results)[j];
    }
    return st;
}

cuda_status_t hash_locked(const cuda_hash_item_t *items, size_t n, cudaStream_t stream, uint64_t *out, int current) {
    cuda_status_t st = reserve_host(n);
    if (st != CUDA_OK) return st;
    uint64_t total = 0, checked = 0;
    for (size_t i = 0; i < n; i++) total += items[i].len;
    // Check in order; the first part goes to the GPU once it holds a third of the bytes, while
    // every input so far is on one device (d0). `launched` inputs are queued.
    int d0 = ANY_DEVICE;
    bool one_device = true;
    size_t launched = 0;
    DeviceSpace *space = NULL;
    for (size_t i = 0; i < n && st == CUDA_OK; i++) {
        st = device_of(items, i, &g_device[i]);
        if (st != CUDA_OK) break;
        if (g_device[i] != ANY_DEVICE) {
            if (d0 == ANY_DEVICE) d0 = g_device[i];
            one_device &= g_device[i] == d0;
        }
        checked += items[i].len;
        if (launched == 0 && one_device && d0 != ANY_DEVICE && d0 < MAX_DEVICES && i + 1 < n && 3 * checked >= total) {
            if (d0 != current) st = cuda_check(cudaSetDevice(d0), "cudaSetDevice");
            space = &g_space[d0];
            if (st == CUDA_OK) st = reserve_device(space, items, n, stream);
            if (st == CUDA_OK) st = launch_part(space, items, 0, i + 1, stream);
            launched = i + 1;
        }
    }
    if (st == CUDA_OK && one_device && (d0 == ANY_DEVICE || d0 < MAX_DEVICES)) {
        // The common case: the rest, then one wait for both parts.
        if (space == NULL) {
            if (d0 != ANY_DEVICE && d0 != current) st = cuda_check(cudaSetDevice(d0), "cudaSetDevice");
            space = &g_space[d0 == ANY_DEVICE ? current : d0];
            if (st == CUDA_OK && current < MAX_DEVICES) st = reserve_device(space, items, n, stream);
            else if (st == CUDA_OK) st = CUDA_INVALID;
        }
        if (st == CUDA_OK) st = launch_part(space, items, launched, n, stream);
        if (st == CUDA_OK) st = cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (simplehash batch)");
        for (size_t i = 0; i < n && st == CUDA_OK; i++) out[i] = ((volatile uint64_t *) g_results)[i];
    } else {
        // A bad input, or inputs on several devices: finish the part in flight first.
        cuda_status_t wait = launched > 0 ? cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize") : CUDA_OK;
        if (st == CUDA_OK) st = wait;
        for (size_t i = 0; i < launched && st == CUDA_OK; i++) out[i] = ((volatile uint64_t *) g_results)[i];
        if (space != NULL && d0 != current) cudaSetDevice(current);
        if (st == CUDA_OK) st = hash_by_device(items, launched, n, stream, out, current);
    }
    // After a failure the counters may be anything: the next batch starts with fresh ones.
    if (st != CUDA_OK && space != NULL) drop(space);
    if (d0 != ANY_DEVICE && d0 != current) cudaSetDevice(current);
    return st;
}

}  // namespace

extern "C" cuda_status_t cuda_simplehash_many(const cuda_hash_item_t *items, size_t n, void *stream, uint64_t *out) {
    if (n == 0) return CUDA_OK;
    if (items == NULL || out == NULL) return CUDA_INVALID;
    int count = 0, current = 0;
    cuda_status_t st = cuda_device_count(&count);
    if (st != CUDA_OK) return st;
    st = cuda_check(cudaGetDevice(&current), "cudaGetDevice");
    if (st != CUDA_OK) return st;
    pthread_mutex_lock(&g_lock);
    st = hash_locked(items, n, (cudaStream_t) stream, out, current);
    pthread_mutex_unlock(&g_lock);
    return st;
}
