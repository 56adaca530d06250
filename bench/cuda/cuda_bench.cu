// cuda_bench: SimpleHash on the GPU against read-only reductions and a device-to-device copy of
// the same bytes, measured in the same run. Prints "name,value,unit,baseline,ratio" rows (no
// header) on stdout; details go to stderr.
//
// GB/s is 1e9 bytes of input per second. Baselines, all over the same bytes:
//   cub_sum     cub::DeviceReduce::Sum of float32 (what torch.sum does): a read-only reduction.
//   read_fold   this file's read-only kernel with the hash's exact geometry and loads (one
//               256-thread block per 256 KiB, 16-byte streaming loads 8 rows deep), adding the
//               words up: the hash's memory traffic with none of its arithmetic.
//   read_fold_overlapped  read_fold launched with programmatic dependent launch, letting the
//               next launch start at once: consecutive launches' loads overlap wholly.
//   d2d_copy    cudaMemcpyAsync device to device, counting bytes read plus bytes written (the
//               usual "memory bandwidth" figure; a copy moves twice the bytes a hash reads).
//   torch_sum   torch.sum of float32, measured by torch_sum.py in the same run and passed in
//               with --torch FILE (lines "bytes GB/s").
// Inputs of 32 MiB fit in the 50 MB L2, so each size rotates over enough buffers to make at least
// 256 MiB: every run reads from memory, not cache. Each figure is the median over ROUNDS rounds;
// a round times ITERS back-to-back runs with CUDA events; the variants are interleaved round by
// round so that clock and thermal drift hits them alike. Data: random bits, never zeros.
#include <cub/device/device_reduce.cuh>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

#include "bench/cuda/cuda_bench.h"
#include "cuda/cuda_api.h"
#include "tests/cuda/gpt2_shapes.h"

extern "C" {
#include "hash/hash.h"
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "cuda_bench: %s failed at line %d: %s\n", #call, __LINE__,             \
                    cudaGetErrorString(e_));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CKS(call)                                                                                  \
    do {                                                                                           \
        cuda_status_t s_ = (call);                                                                 \
        if (s_ != CUDA_OK) {                                                                       \
            fprintf(stderr, "cuda_bench: %s failed at line %d: %s\n", #call, __LINE__,             \
                    cuda_status_string(s_));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

namespace {

constexpr int ROUNDS = 11;
constexpr size_t MiB = (size_t) 1 << 20;
constexpr size_t ROTATE_BYTES = 256 * MiB;

__global__ void fill_kernel(uint64_t *p, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x) {
        uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ULL;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        // Two floats in [1, 2): finite, so float sums stay ordinary numbers.
        const uint64_t mant = z & 0x007FFFFF007FFFFFULL;
        p[i] = mant | 0x3F8000003F800000ULL;
        if (i % 3 == 0) p[i] ^= z & 0x0000100000001000ULL;
    }
}

// The hash's loads without its arithmetic: same blocks, same addresses, same load flavour.
__device__ __forceinline__ void read_fold_body(const uint4 *__restrict__ p, unsigned long long *out) {
    const uint4 *w = p + (size_t) blockIdx.x * 16384 + threadIdx.x;
    uint32_t acc = 0;
#pragma unroll
    for (int r0 = 0; r0 < 64; r0 += 8) {
        uint4 b[8];
#pragma unroll
        for (int q = 0; q < 8; q++) b[q] = __ldcs(w + (r0 + q) * 256);
#pragma unroll
        for (int q = 0; q < 8; q++) acc += b[q].x + b[q].y + b[q].z + b[q].w;
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (threadIdx.x % 32 == 0) atomicAdd(out, (unsigned long long) acc);
}

__global__ __launch_bounds__(256) void read_fold_kernel(const uint4 *__restrict__ p, unsigned long long *out) {
    read_fold_body(p, out);
}

// read_fold launched as the hash is (programmatic dependent launch), letting the next launch
// start at once: consecutive launches' loads overlap wholly, the stricter baseline for a hash
// whose next launch starts during its tail (cuda_simplehash.cu).
__global__ __launch_bounds__(256) void read_fold_overlapped_kernel(const uint4 *__restrict__ p,
                                                                   unsigned long long *out) {
    cudaTriggerProgrammaticLaunchCompletion();
    read_fold_body(p, out);
}

void read_fold_overlapped(unsigned blocks, const uint4 *p, unsigned long long *out, cudaStream_t stream) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(256);
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, read_fold_overlapped_kernel, p, out));
}

struct Timer {
    cudaEvent_t start, stop;
    Timer() {
        CK(cudaEventCreate(&start));
        CK(cudaEventCreate(&stop));
    }
    ~Timer() {
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
    }
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

void row(const char *name, double value, const char *unit, double baseline) {
    printf("%s,%.2f,%s,%.2f,%.3f\n", name, value, unit, baseline, value / baseline);
}

const char *size_name(size_t bytes, char *buf, size_t n) {
    if (bytes % (1024 * MiB) == 0)
        snprintf(buf, n, "%zuGiB", bytes / (1024 * MiB));
    else
        snprintf(buf, n, "%zuMiB", bytes / MiB);
    return buf;
}

// torch.sum figures from torch_sum.py: "bytes GB/s" per line.
double torch_gbps(const char *file, size_t bytes) {
    if (file == NULL) return 0;
    FILE *f = fopen(file, "r");
    if (f == NULL) return 0;
    unsigned long long b;
    double g, found = 0;
    while (fscanf(f, "%llu %lf", &b, &g) == 2)
        if (b == bytes) found = g;
    fclose(f);
    return found;
}

struct Variant {
    const char *name;
    std::vector<double> ms;  // per run, one entry per round
};

void bench_size(size_t bytes, const char *torch_file, cudaStream_t stream) {
    char sz[32];
    size_name(bytes, sz, sizeof sz);
    const int nbuf = (int) std::max<size_t>(1, (ROTATE_BYTES + bytes - 1) / bytes);
    const int iters = (int) std::max<size_t>(8, (2048 * MiB) / bytes);
    std::vector<uint8_t *> in(nbuf);
    for (int b = 0; b < nbuf; b++) {
        CK(cudaMalloc(&in[b], bytes + 256));
        fill_kernel<<<1024, 256, 0, stream>>>((uint64_t *) in[b], (bytes + 256) / 8, 1000 + b);
        CK(cudaGetLastError());
    }
    uint8_t *dst = NULL;
    CK(cudaMalloc(&dst, bytes));

    // Workspaces, sized once: nothing is allocated while timing.
    void *ws = NULL;
    uint64_t *result = NULL;
    unsigned long long *fold_out = NULL;
    float *sum_out = NULL;
    CK(cudaMalloc(&ws, cuda_simplehash_workspace_bytes(bytes)));
    CK(cudaMemsetAsync(ws, 0, 8, stream));  // the arrival counter
    CK(cudaMalloc(&result, 8));
    CK(cudaMalloc(&fold_out, 8));
    CK(cudaMalloc(&sum_out, 4));
    size_t cub_bytes = 0;
    void *cub_tmp = NULL;
    CK(cub::DeviceReduce::Sum(NULL, cub_bytes, (const float *) in[0], sum_out, (int64_t) (bytes / 4), stream));
    CK(cudaMalloc(&cub_tmp, cub_bytes));

    // The GPU hash of the first buffer equals the CPU reference: timing a wrong hash is no use.
    {
        std::vector<uint8_t> host(bytes);
        CK(cudaMemcpyAsync(host.data(), in[0] + 3, bytes - 16, cudaMemcpyDeviceToHost, stream));
        CKS(cuda_simplehash_async(in[0] + 3, bytes - 16, ws, result, stream));
        uint64_t gpu = 0;
        CK(cudaMemcpyAsync(&gpu, result, 8, cudaMemcpyDeviceToHost, stream));
        CK(cudaStreamSynchronize(stream));
        if (gpu != hash_simple(host.data(), bytes - 16)) {
            fprintf(stderr, "cuda_bench: GPU hash differs from hash_simple at %zu bytes\n", bytes - 16);
            exit(1);
        }
    }

    enum { HASH, HASH_MISALIGNED, CUB_SUM, READ_FOLD, READ_FOLD_OVERLAPPED, COPY, NVARIANTS };
    Variant v[NVARIANTS] = {{"simplehash", {}}, {"simplehash_misaligned", {}}, {"cub_sum", {}},
                            {"read_fold", {}}, {"read_fold_overlapped", {}}, {"d2d_copy", {}}};
    const unsigned blocks = (unsigned) (bytes / HASH_SIMPLE_SEGMENT_BYTES);
    auto run = [&](int k, int i) {
        const uint8_t *p = in[i % nbuf];
        switch (k) {
        case HASH: CKS(cuda_simplehash_async(p, bytes, ws, result, stream)); break;
        case HASH_MISALIGNED: CKS(cuda_simplehash_async(p + 3, bytes, ws, result, stream)); break;
        case CUB_SUM:
            CK(cub::DeviceReduce::Sum(cub_tmp, cub_bytes, (const float *) p, sum_out, (int64_t) (bytes / 4), stream));
            break;
        case READ_FOLD: read_fold_kernel<<<blocks, 256, 0, stream>>>((const uint4 *) p, fold_out); break;
        case READ_FOLD_OVERLAPPED: read_fold_overlapped(blocks, (const uint4 *) p, fold_out, stream); break;
        case COPY: CK(cudaMemcpyAsync(dst, p, bytes, cudaMemcpyDeviceToDevice, stream)); break;
        }
    };
    Timer timer;
    for (int k = 0; k < NVARIANTS; k++)
        for (int i = 0; i < 3; i++) run(k, i);
    CK(cudaStreamSynchronize(stream));
    CK(cudaGetLastError());
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < NVARIANTS; k++) {
            CK(cudaEventRecord(timer.start, stream));
            for (int i = 0; i < iters; i++) run(k, i);
            CK(cudaEventRecord(timer.stop, stream));
            CK(cudaEventSynchronize(timer.stop));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, timer.start, timer.stop));
            v[k].ms.push_back(ms / iters);
        }
    }
    CK(cudaGetLastError());

    double gbps[NVARIANTS];
    for (int k = 0; k < NVARIANTS; k++) {
        gbps[k] = (double) bytes / (median(v[k].ms) * 1e-3) / 1e9;
        fprintf(stderr, "  %-22s %8s %9.1f us %8.0f GB/s%s\n", v[k].name, sz, median(v[k].ms) * 1e3,
                k == COPY ? 2 * gbps[k] : gbps[k], k == COPY ? " (read + written)" : "");
    }
    char name[128];
    const double hash = gbps[HASH];
    snprintf(name, sizeof name, "cuda/simplehash_%s_vs_cub_sum", sz);
    row(name, hash, "GB/s", gbps[CUB_SUM]);
    snprintf(name, sizeof name, "cuda/simplehash_%s_vs_read_fold", sz);
    row(name, hash, "GB/s", gbps[READ_FOLD]);
    snprintf(name, sizeof name, "cuda/simplehash_%s_vs_read_fold_overlapped", sz);
    row(name, hash, "GB/s", gbps[READ_FOLD_OVERLAPPED]);
    snprintf(name, sizeof name, "cuda/simplehash_%s_vs_d2d_copy", sz);
    row(name, hash, "GB/s", 2 * gbps[COPY]);
    const double torch = torch_gbps(torch_file, bytes);
    if (torch > 0) {
        snprintf(name, sizeof name, "cuda/simplehash_%s_vs_torch_sum", sz);
        row(name, hash, "GB/s", torch);
    } else if (torch_file != NULL) {
        fprintf(stderr, "  (no torch.sum figure for %zu bytes in %s)\n", bytes, torch_file);
    }
    snprintf(name, sizeof name, "cuda/simplehash_misaligned_%s_vs_aligned", sz);
    row(name, gbps[HASH_MISALIGNED], "GB/s", hash);

    for (int b = 0; b < nbuf; b++) CK(cudaFree(in[b]));
    CK(cudaFree(dst));
    CK(cudaFree(ws));
    CK(cudaFree(result));
    CK(cudaFree(fold_out));
    CK(cudaFree(sum_out));
    CK(cudaFree(cub_tmp));
}

// Small tensors are bound by launch and round-trip latency: the synchronous hash (what the
// table offers; up to 16 KiB it copies to the host and hashes there, above it launches the
// kernel) against a synchronous copy of the same bytes to the host, pageable (a std::vector:
// the row's baseline) and page-locked (the fastest copy there is).
void latency_small(cudaStream_t stream) {
    const size_t sizes[] = {4096, 65536};
    for (size_t bytes : sizes) {
        uint8_t *d = NULL;
        CK(cudaMalloc(&d, bytes));
        fill_kernel<<<16, 256, 0, stream>>>((uint64_t *) d, bytes / 8, 7);
        std::vector<uint8_t> host(bytes);
        void *pinned = NULL;
        CK(cudaHostAlloc(&pinned, bytes, 0));
        uint64_t h = 0;
        std::vector<double> t_hash, t_copy, t_pinned;
        for (int i = 0; i < 20; i++) CKS(cuda_simplehash(d, bytes, stream, &h));
        for (int r = 0; r < ROUNDS; r++) {
            // Host clock: the synchronous call is what a caller waits for.
            timespec a, b, c, e;
            clock_gettime(CLOCK_MONOTONIC, &a);
            for (int i = 0; i < 200; i++) CKS(cuda_simplehash(d, bytes, stream, &h));
            clock_gettime(CLOCK_MONOTONIC, &b);
            for (int i = 0; i < 200; i++) CKS(cuda_memcpy_d2h(host.data(), d, bytes, stream));
            clock_gettime(CLOCK_MONOTONIC, &c);
            for (int i = 0; i < 200; i++) CKS(cuda_memcpy_d2h(pinned, d, bytes, stream));
            clock_gettime(CLOCK_MONOTONIC, &e);
            t_hash.push_back(((b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) * 1e-3) / 200);
            t_copy.push_back(((c.tv_sec - b.tv_sec) * 1e6 + (c.tv_nsec - b.tv_nsec) * 1e-3) / 200);
            t_pinned.push_back(((e.tv_sec - c.tv_sec) * 1e6 + (e.tv_nsec - c.tv_nsec) * 1e-3) / 200);
        }
        if (h != hash_simple(host.data(), bytes)) {
            fprintf(stderr, "cuda_bench: %zu-byte GPU hash differs from hash_simple\n", bytes);
            exit(1);
        }
        fprintf(stderr, "  synchronous simplehash %zu KiB %.1f us, synchronous copy to host %.1f us (page-locked %.1f us)\n",
                bytes / 1024, median(t_hash), median(t_copy), median(t_pinned));
        char name[128];
        snprintf(name, sizeof name, "cuda/simplehash_sync_%zuKiB_latency_vs_d2h_copy", bytes / 1024);
        row(name, median(t_hash), "us", median(t_copy));
        snprintf(name, sizeof name, "cuda/simplehash_sync_%zuKiB_latency_vs_d2h_copy_pinned", bytes / 1024);
        row(name, median(t_hash), "us", median(t_pinned));
        CK(cudaFreeHost(pinned));
        CK(cudaFree(d));
    }
}

// A model's whole state, the way a shared-state sync hashes it. The GPT-2 124M tensors (148,
// 498 MB, float32, one allocation each) against the read bandwidth of ONE tensor of the same
// total size (read_fold above, event-timed back to back: the memory's limit for these bytes;
// read_fold_sync: one launch and one wait each, host clock, the limit for a synchronous call).
//   batch        cuda_simplehash_many_async: one launch for the model (event-timed).
//   batch_sync   cuda_simplehash_many: what a sync calls (checks every pointer, launches, waits;
//                host clock, legacy default stream).
//   per_tensor   cuda_simplehash per tensor, the path a sync took before the batch: a launch and
//                a wait per tensor (host clock).
//   one_tensor   cuda_simplehash_async of the single big tensor (event-timed), for reference.
void bench_model(cudaStream_t stream) {
    static gpt2_tensor_t shape[GPT2_TENSORS];
    const size_t n = gpt2_shapes(shape);
    std::vector<cuda_hash_item_t> items(n);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        void *p = NULL;
        const size_t len = shape[i].count * 4;
        CK(cudaMalloc(&p, len));
        fill_kernel<<<1024, 256, 0, stream>>>((uint64_t *) p, len / 8, 5000 + i);
        CK(cudaGetLastError());
        items[i] = cuda_hash_item_t{p, len};
        total += len;
    }
    // One tensor of the same bytes, padded to whole segments for read_fold's fixed geometry.
    const size_t big_bytes = (total + HASH_SIMPLE_SEGMENT_BYTES - 1) / HASH_SIMPLE_SEGMENT_BYTES * HASH_SIMPLE_SEGMENT_BYTES;
    uint8_t *big = NULL;
    CK(cudaMalloc(&big, big_bytes));
    fill_kernel<<<1024, 256, 0, stream>>>((uint64_t *) big, big_bytes / 8, 99);
    void *ws = NULL, *ws_one = NULL;
    unsigned *counters = NULL;
    uint64_t *results = NULL;
    unsigned long long *fold_out = NULL;
    CK(cudaMalloc(&ws, cuda_simplehash_many_workspace_bytes(items.data(), n)));
    CK(cudaMalloc(&ws_one, cuda_simplehash_workspace_bytes(big_bytes)));
    CK(cudaMemsetAsync(ws_one, 0, 8, stream));
    CK(cudaMalloc(&counters, n * sizeof(unsigned)));
    CK(cudaMemsetAsync(counters, 0, n * sizeof(unsigned), stream));
    CK(cudaMalloc(&results, (n + 1) * 8));
    CK(cudaMalloc(&fold_out, 8));
    CK(cudaStreamSynchronize(stream));

    // Every way gives the CPU reference's hashes: timing a wrong hash is no use.
    std::vector<uint64_t> want(n), got(n);
    {
        std::vector<uint8_t> host(items[0].len);
        for (size_t i = 0; i < n; i++) {
            CK(cudaMemcpy(host.data(), items[i].data, items[i].len, cudaMemcpyDeviceToHost));
            want[i] = hash_simple(host.data(), items[i].len);
        }
    }
    CKS(cuda_simplehash_many_async(items.data(), n, counters, ws, results, stream));
    CK(cudaMemcpyAsync(got.data(), results, n * 8, cudaMemcpyDeviceToHost, stream));
    CK(cudaStreamSynchronize(stream));
    if (got != want) {
        fprintf(stderr, "cuda_bench: batch hash of the model differs from hash_simple\n");
        exit(1);
    }
    CKS(cuda_simplehash_many(items.data(), n, NULL, got.data()));
    if (got != want) {
        fprintf(stderr, "cuda_bench: synchronous batch hash of the model differs from hash_simple\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) CKS(cuda_simplehash(items[i].data, items[i].len, NULL, &got[i]));
    if (got != want) {
        fprintf(stderr, "cuda_bench: per-tensor hash of the model differs from hash_simple\n");
        exit(1);
    }

    enum { READ, READ_SYNC, ONE, BATCH, BATCH_SYNC, PER_TENSOR, NV };
    const char *names[NV] = {"read_fold_one_tensor", "read_fold_one_tensor_sync", "simplehash_one_tensor", "batch",
                             "batch_sync", "per_tensor"};
    const int iters[NV] = {20, 20, 20, 20, 10, 3};
    std::vector<double> ms[NV];
    const unsigned blocks = (unsigned) (big_bytes / HASH_SIMPLE_SEGMENT_BYTES);
    Timer timer;
    auto host_ms = [](const timespec &a, const timespec &b) {
        return (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) * 1e-6;
    };
    for (int r = 0; r < ROUNDS + 1; r++) {  // round 0 warms up
        for (int k = 0; k < NV; k++) {
            timespec a, b;
            CK(cudaDeviceSynchronize());
            clock_gettime(CLOCK_MONOTONIC, &a);
            CK(cudaEventRecord(timer.start, stream));
            for (int i = 0; i < iters[k]; i++) {
                switch (k) {
                case READ: read_fold_kernel<<<blocks, 256, 0, stream>>>((const uint4 *) big, fold_out); break;
                case READ_SYNC:
                    read_fold_kernel<<<blocks, 256, 0, stream>>>((const uint4 *) big, fold_out);
                    CK(cudaStreamSynchronize(stream));
                    break;
                case ONE: CKS(cuda_simplehash_async(big, total, ws_one, results + n, stream)); break;
                case BATCH: CKS(cuda_simplehash_many_async(items.data(), n, counters, ws, results, stream)); break;
                case BATCH_SYNC: CKS(cuda_simplehash_many(items.data(), n, NULL, got.data())); break;
                case PER_TENSOR:
                    for (size_t t = 0; t < n; t++) CKS(cuda_simplehash(items[t].data, items[t].len, NULL, &got[t]));
                    break;
                }
            }
            CK(cudaEventRecord(timer.stop, stream));
            CK(cudaEventSynchronize(timer.stop));
            clock_gettime(CLOCK_MONOTONIC, &b);
            float ev = 0;
            CK(cudaEventElapsedTime(&ev, timer.start, timer.stop));
            const double t = k == READ_SYNC || k == BATCH_SYNC || k == PER_TENSOR ? host_ms(a, b) : ev;
            if (r > 0) ms[k].push_back(t / iters[k]);
        }
    }
    CK(cudaGetLastError());
    // Where the synchronous call's time goes: the pointer checks alone (host clock).
    {
        std::vector<double> check_us;
        for (int r = 0; r < ROUNDS; r++) {
            timespec a, b;
            clock_gettime(CLOCK_MONOTONIC, &a);
            for (size_t t = 0; t < n; t++) {
                cudaPointerAttributes attr;
                CK(cudaPointerGetAttributes(&attr, items[t].data));
            }
            clock_gettime(CLOCK_MONOTONIC, &b);
            check_us.push_back(host_ms(a, b) * 1e3);
        }
        fprintf(stderr, "  model: %zu pointer checks take %.1f us (host clock)\n", n, median(check_us));
    }
    if (got != want) {
        fprintf(stderr, "cuda_bench: the model's hashes changed while timing\n");
        exit(1);
    }
    double gbps[NV];
    for (int k = 0; k < NV; k++) {
        const double bytes = k == READ || k == READ_SYNC ? (double) big_bytes : (double) total;
        gbps[k] = bytes / (median(ms[k]) * 1e-3) / 1e9;
        fprintf(stderr, "  model %-22s %9.1f us %8.0f GB/s\n", names[k], median(ms[k]) * 1e3, gbps[k]);
    }
    row("cuda/simplehash_gpt2_124M_batch_vs_read_one_tensor", gbps[BATCH], "GB/s", gbps[READ]);
    row("cuda/simplehash_gpt2_124M_batch_sync_vs_read_one_tensor", gbps[BATCH_SYNC], "GB/s", gbps[READ]);
    row("cuda/simplehash_gpt2_124M_per_tensor_sync_vs_read_one_tensor", gbps[PER_TENSOR], "GB/s", gbps[READ]);
    row("cuda/simplehash_gpt2_124M_batch_sync_vs_read_one_tensor_sync", gbps[BATCH_SYNC], "GB/s", gbps[READ_SYNC]);
    row("cuda/simplehash_gpt2_124M_batch_sync_vs_per_tensor_sync", gbps[BATCH_SYNC], "GB/s", gbps[PER_TENSOR]);
    row("cuda/simplehash_one_498MB_tensor_vs_read_one_tensor", gbps[ONE], "GB/s", gbps[READ]);

    for (size_t i = 0; i < n; i++) CK(cudaFree((void *) items[i].data));
    CK(cudaFree(big));
    CK(cudaFree(ws));
    CK(cudaFree(ws_one));
    CK(cudaFree(counters));
    CK(cudaFree(results));
    CK(cudaFree(fold_out));
}

}  // namespace

extern "C" int cuda_bench_main(int argc, char **argv) {
    const char *torch_file = NULL;
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--torch") == 0) torch_file = argv[i + 1];
    int devices = 0;
    if (cuda_device_count(&devices) != CUDA_OK) {
        fprintf(stderr, "cuda_bench: skipped: no GPU\n");
        return 0;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    fprintf(stderr, "cuda_bench: %s, %d SMs, %.0f MB L2\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1e6);
    cudaStream_t stream;
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const size_t sizes[] = {4 * MiB, 16 * MiB, 32 * MiB, 256 * MiB, 1024 * MiB};
    bool model_only = false;
    for (int i = 1; i < argc; i++) model_only |= strcmp(argv[i], "--model") == 0;
    if (!model_only)
        for (size_t s : sizes) bench_size(s, torch_file, stream);
    bench_model(stream);
    if (!model_only) latency_small(stream);
    CK(cudaStreamDestroy(stream));
    return 0;
}
