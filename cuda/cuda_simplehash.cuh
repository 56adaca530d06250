// cuda_simplehash.cuh: the device code of SimpleHash v1, bit for bit hash_simple()
// (hash/SIMPLEHASH.md), shared by the one-input kernel (cuda_simplehash.cu) and the batch kernel
// (cuda_simplehash_many.cu).
//
// segment_kernel: one 256-thread block per 256 KiB segment, thread j = lane j. Row r of the
// segment gives thread j the 16-byte word at byte 4096 r + 16 j, so a warp reads 512 contiguous
// bytes per load. Loads go 8 rows deep before they are folded, with streaming (evict-first)
// loads: every byte is read once. The lane tree is 5 shuffle levels in each warp and 3 more over
// the 8 warp values; the block writes its segment value.
//
// The segment tree is folded by whichever block finishes last (each block publishes its value,
// fences, and counts itself in on a counter in the workspace; the one that brings the count to
// the number of blocks sees every value). It folds level by level with the odd last node carried
// up; a level-k node depends only on its own 2^k leaves, so it folds chunks of 256 adjacent
// values independently (a warp per chunk: 8 values per lane in registers, then 5 shuffle
// levels) and repeats on the chunk results: 1 round up to 64 MiB, 2 up to 16 GiB. One launch
// per hash, and the synchronous call waits for one kernel only (H100: 4 KiB in 13 us, against
// 23 us with a second kernel for the tree and a copy of the result).
//
// Misaligned input (base not a multiple of 16): each thread loads the aligned 16-byte granule
// its word starts in; the rest of the word is in the next granule, which the next lane loaded
// (a shuffle; lane 31 loads it itself), and a funnel shift assembles the word. Rows whose loads
// would reach the granule holding the input's last byte take a careful path that loads only
// granules lying wholly inside the input and reads the rest byte by byte, so no load leaves
// [start rounded down to 16 bytes, end of input): the hash reads nothing past the buffer
// (compute-sanitizer memcheck agrees, tools/gpu_run_tests.sh).
#ifndef PCCL_CUDA_SIMPLEHASH_CUH
#define PCCL_CUDA_SIMPLEHASH_CUH

#include <stdint.h>

#include "cuda/cuda_internal.cuh"

extern "C" {
#include "hash/hash.h"
}

namespace {

constexpr uint64_t IV0 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t IV1 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t P3 = 0x165667B19E3779F9ULL;
constexpr uint64_t P4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t P5 = 0x27D4EB2F165667C5ULL;

constexpr int LANES = HASH_SIMPLE_LANES;                   // 256 threads per block
constexpr int ROWS = HASH_SIMPLE_WORDS_PER_LANE;           // 64
constexpr uint64_t SEGMENT = HASH_SIMPLE_SEGMENT_BYTES;    // 262144
constexpr uint64_t SEGMENT_WORDS = SEGMENT / 16;           // 16384
constexpr uint64_t ROW_BYTES = HASH_SIMPLE_ROW_BYTES;      // 4096
constexpr int DEPTH = 8;                                   // rows loaded before folding
constexpr int FOLD_CHUNK = 256;                            // segment values per warp and round

static_assert(LANES == 256 && ROWS % DEPTH == 0, "geometry is fixed by SIMPLEHASH.md");

constexpr uint64_t splitmix(uint64_t i) {
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

struct RowKeys {
    uint64_t k[2 * ROWS];
};

constexpr RowKeys make_row_keys() {
    RowKeys keys{};
    for (int i = 0; i < 2 * ROWS; i++) keys.k[i] = splitmix((uint64_t) i);
    return keys;
}

// Every thread reads the same key at the same time: a constant-cache broadcast, and in the
// unrolled loop a constant-bank operand of the multiply.
__constant__ RowKeys kKeys = make_row_keys();
static_assert(make_row_keys().k[0] == 0xE220A8397B1DCDAFULL && make_row_keys().k[127] == 0x12D05C4045A39C19ULL,
              "row keys differ from SIMPLEHASH.md");

__device__ __forceinline__ uint64_t fmix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ULL;
    x ^= x >> 33;
    return x;
}

__device__ __forceinline__ uint64_t combine(uint64_t left, uint64_t right) { return fmix64(left * P4 + right); }

// accumulate() of SIMPLEHASH.md for the word (d0, d1) = (w.y:w.x, w.w:w.z) in row r.
__device__ __forceinline__ void accumulate(uint64_t &a0, uint64_t &a1, uint4 w, int r) {
    const uint64_t k0 = kKeys.k[2 * r], k1 = kKeys.k[2 * r + 1];
    const uint64_t d0 = ((uint64_t) w.y << 32) | w.x, d1 = ((uint64_t) w.w << 32) | w.z;
    a0 += (uint64_t) (w.x ^ (uint32_t) k0) * (w.y ^ (uint32_t) (k0 >> 32)) + d1;
    a1 += (uint64_t) (w.z ^ (uint32_t) k1) * (w.w ^ (uint32_t) (k1 >> 32)) + d0;
}

// The word that starts `a` bytes into granule `lo` (a = 4 Q + shift / 8) and ends in `hi`.
template <int Q>
__device__ __forceinline__ uint4 extract(uint4 lo, uint4 hi, unsigned shift) {
    const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    return make_uint4(__funnelshift_r(w[Q], w[Q + 1], shift), __funnelshift_r(w[Q + 1], w[Q + 2], shift),
                      __funnelshift_r(w[Q + 2], w[Q + 3], shift), __funnelshift_r(w[Q + 3], w[Q + 4], shift));
}

__device__ __forceinline__ uint4 shfl_down4(uint4 v) {
    return make_uint4(__shfl_down_sync(0xffffffffu, v.x, 1), __shfl_down_sync(0xffffffffu, v.y, 1),
                      __shfl_down_sync(0xffffffffu, v.z, 1), __shfl_down_sync(0xffffffffu, v.w, 1));
}

// Word `i` of the input, zero-padded past `len`, for the careful path. `g` is the input's
// start rounded down to 16 bytes and `safe_end` its end rounded down: granules below safe_end
// lie wholly inside the input (or, for the first, in the same allocation just before it).
template <int Q>
__device__ __forceinline__ uint4 load_word_careful(const uint8_t *p, uint64_t len, const uint4 *g,
                                                   uintptr_t safe_end, unsigned shift, uint64_t i) {
    const uint64_t off = 16 * i;
    if (off + 16 <= len) {
        if (Q < 0) return g[i];
        if ((uintptr_t) (g + i + 2) <= safe_end) return extract<(Q < 0 ? 0 : Q)>(g[i], g[i + 1], shift);
    }
    uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < 16; k++)
        if (off + k < len) w[k / 4] |= (uint32_t) p[off + k] << (8 * (k % 4));
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// Folds rows r0 .. r0 + N - 1 of this lane, every load known to lie inside the input. `w` is the
// lane's granule in row 0. Q < 0: 16-byte aligned input, the granule is the word. Q >= 0: the
// word straddles this granule and the next, which the next lane loaded (lane 31 loads it).
template <int Q, int N>
__device__ __forceinline__ void fold_rows(uint64_t &a0, uint64_t &a1, const uint4 *w, int r0, int lane,
                                          unsigned shift) {
    uint4 b[N];
#pragma unroll
    for (int q = 0; q < N; q++) b[q] = __ldcs(w + (r0 + q) * LANES);
    if (Q < 0) {
#pragma unroll
        for (int q = 0; q < N; q++) accumulate(a0, a1, b[q], r0 + q);
    } else {
        uint4 n[N];
#pragma unroll
        for (int q = 0; q < N; q++) n[q] = shfl_down4(b[q]);
        if (lane == 31) {
            // The next warp (or the next row) loads this granule too: keep it cached.
#pragma unroll
            for (int q = 0; q < N; q++) n[q] = __ldg(w + (r0 + q) * LANES + 1);
        }
#pragma unroll
        for (int q = 0; q < N; q++) accumulate(a0, a1, extract<(Q < 0 ? 0 : Q)>(b[q], n[q], shift), r0 + q);
    }
}

// The segment tree over values[0 .. n-1], folded by one whole block; scratch holds
// ceil(n / 256) values. Writes the hash to *result and clears the arrival counter.
__device__ __forceinline__ void fold_segments(uint64_t *values, uint64_t *scratch, uint64_t n, uint64_t len,
                                           uint64_t *result, unsigned *counter) {
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    uint64_t *in = values, *out = scratch;
    while (n > 1) {
        const uint64_t nchunks = (n + FOLD_CHUNK - 1) / FOLD_CHUNK;
        for (uint64_t c = warp; c < nchunks; c += blockDim.x / 32) {
            const uint64_t base = c * FOLD_CHUNK;
            const int m = n - base < (uint64_t) FOLD_CHUNK ? (int) (n - base) : FOLD_CHUNK;
            // Lane l holds leaves 8l .. 8l + 7 of the chunk (cnt of them exist) and folds them
            // into their level-3 node; a node takes its right sibling when that exists.
            const int cnt = m - 8 * lane < 0 ? 0 : (m - 8 * lane > 8 ? 8 : m - 8 * lane);
            uint64_t x[8];
#pragma unroll
            for (int k = 0; k < 8; k++) x[k] = k < cnt ? __ldcg(in + base + 8 * lane + k) : 0;
#pragma unroll
            for (int o = 1; o < 8; o *= 2)
#pragma unroll
                for (int i = 0; i + o < 8; i += 2 * o)
                    if (i + o < cnt) x[i] = combine(x[i], x[i + o]);
            uint64_t v = x[0];
#pragma unroll
            for (int o = 1; o < 32; o *= 2) {
                const uint64_t right = __shfl_down_sync(0xffffffffu, v, o);
                if (lane % (2 * o) == 0 && 8 * (lane + o) < m) v = combine(v, right);
            }
            if (lane == 0) out[c] = v;
        }
        __syncthreads();
        uint64_t *t = in;
        in = out;
        out = t;
        n = nchunks;
    }
    if (threadIdx.x == 0) {
        *result = fmix64(__ldcg(in) ^ (len * P5));
        *counter = 0;  // the workspace is ready for the next hash
    }
}

// Rows R0 .. R0 + NR - 1 of a full segment, unrolled: the row keys become constant operands.
template <int Q, int R0, int NR>
__device__ __forceinline__ void fold_full(uint64_t &a0, uint64_t &a1, const uint4 *w, int lane, unsigned shift) {
#pragma unroll
    for (int r0 = R0; r0 < R0 + NR; r0 += DEPTH) fold_rows<Q, DEPTH>(a0, a1, w, r0, lane, shift);
}

// The value of segment s of the input (p, len): every thread takes part, thread 0 gets the value
// (the others get a partial one). Q < 0: the input starts on a 16-byte boundary. Q = 0..3: it
// starts 4 Q + shift / 8 bytes past one (shift = 0, 8, 16 or 24).
// G row groups (the block has G x 256 threads): thread j of group g folds lane j's rows
// g ROWS/G .. (g+1) ROWS/G - 1, starting from zero (group 0 from the initial state); a lane's
// state is a sum mod 2^64 of its rows' terms, so the groups' partial sums add up to exactly the
// state of SIMPLEHASH.md. More warps per segment keep more loads in flight when there are few
// segments per multiprocessor.
template <int Q, int G = 1>
__device__ __forceinline__ uint64_t segment_value(const uint8_t *__restrict__ p, uint64_t len, uint64_t s) {
    static_assert(G == 1 || G == 2 || G == 4, "row groups divide the 64 rows into DEPTH-row runs");
    constexpr int GR = ROWS / G;  // rows per group
    const int t = threadIdx.x, j = t % LANES, gi = G == 1 ? 0 : t / LANES, lane = t % 32, warp = t / 32;
    const unsigned shift = 8u * (unsigned) ((uintptr_t) p % 4);
    const uint4 *g = (const uint4 *) ((uintptr_t) p & ~(uintptr_t) 15);
    const uintptr_t safe_end = ((uintptr_t) p + len) & ~(uintptr_t) 15;
    const uint4 *w = g + s * SEGMENT_WORDS + j;  // this lane's granule in row 0
    uint64_t a0 = gi == 0 ? IV0 : 0, a1 = gi == 0 ? IV1 : 0;

    // Rows of this segment whose loads all stay inside the input (when misaligned, a row also
    // loads the first granule of the next row). The same for every thread of the block.
    uint64_t fast_rows;
    if (Q < 0) {
        fast_rows = (len - s * SEGMENT) / ROW_BYTES;
    } else {
        const uint64_t granules = (safe_end - (uintptr_t) (g + s * SEGMENT_WORDS)) / 16;
        fast_rows = granules == 0 ? 0 : (granules - 1) / LANES;
    }

    if (fast_rows >= (uint64_t) ROWS) {
        // Every segment but the last: fully unrolled.
        if (G == 1 || gi == 0) fold_full<Q, 0, GR>(a0, a1, w, lane, shift);
        else if (gi == 1) fold_full<Q, (G > 1 ? GR : 0), GR>(a0, a1, w, lane, shift);
        else if (gi == 2) fold_full<Q, (G > 2 ? 2 * GR : 0), GR>(a0, a1, w, lane, shift);
        else fold_full<Q, (G > 3 ? 3 * GR : 0), GR>(a0, a1, w, lane, shift);
    } else {
        // The last segment or two: full rows as above, then the rest word by word, carefully.
        const int rend = (gi + 1) * GR, fast = fast_rows < (uint64_t) rend ? (int) fast_rows : rend;
        int r = gi * GR;
        for (; r + DEPTH <= fast; r += DEPTH) fold_rows<Q, DEPTH>(a0, a1, w, r, lane, shift);
        for (; r < fast; r++) fold_rows<Q, 1>(a0, a1, w, r, lane, shift);
        const uint64_t words = (len + 15) / 16;
        const uint64_t n_s = words - s * SEGMENT_WORDS < SEGMENT_WORDS ? words - s * SEGMENT_WORDS : SEGMENT_WORDS;
        for (; r < rend && (uint64_t) (r * LANES + j) < n_s; r++)
            accumulate(a0, a1, load_word_careful<Q>(p, len, g, safe_end, shift, s * SEGMENT_WORDS + r * LANES + j), r);
    }

    if (G > 1) {
        __shared__ uint64_t partial[2][G > 1 ? (G - 1) * LANES : 1];
        if (gi > 0) {
            partial[0][(gi - 1) * LANES + j] = a0;
            partial[1][(gi - 1) * LANES + j] = a1;
        }
        __syncthreads();
        if (gi == 0) {
#pragma unroll
            for (int k = 0; k < G - 1; k++) {
                a0 += partial[0][k * LANES + j];
                a1 += partial[1][k * LANES + j];
            }
        }
    }

    // Lane tree: at offset o, a lane whose index is a multiple of 2o is the left child. Warps of
    // groups other than 0 compute values nobody uses.
    uint64_t v = fmix64(a0 ^ (a1 * P3));
#pragma unroll
    for (int o = 1; o < 32; o *= 2) v = combine(v, __shfl_down_sync(0xffffffffu, v, o));
    __shared__ uint64_t warp_values[LANES / 32];
    if (lane == 0 && warp < LANES / 32) warp_values[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = warp_values[lane % (LANES / 32)];
#pragma unroll
        for (int o = 1; o < LANES / 32; o *= 2) v = combine(v, __shfl_down_sync(0xffffffffu, v, o));
    }
    return v;
}

// Thread 0 publishes segment s's value among the nseg values of its input, then counts the block
// in; the block that counts last folds the segment tree into *result and clears the counter.
__device__ __forceinline__ bool publish_and_fold(uint64_t v, uint64_t s, uint64_t nseg, uint64_t len,
                                                 unsigned *counter, uint64_t *seg_values, uint64_t *scratch,
                                                 uint64_t *result) {
    __shared__ bool last;
    if (threadIdx.x == 0) {
        seg_values[s] = v;
        __threadfence();
        last = atomicAdd(counter, 1u) == (unsigned) nseg - 1;
    }
    __syncthreads();
    if (last) {
        __threadfence();
        fold_segments(seg_values, scratch, nseg, len, result, counter);
    }
    return last;
}

inline uint64_t segment_count(size_t len) { return len == 0 ? 1 : ((uint64_t) len + SEGMENT - 1) / SEGMENT; }

inline uint64_t fold_scratch(uint64_t n) { return (n + FOLD_CHUNK - 1) / FOLD_CHUNK; }

}  // namespace

#endif  // PCCL_CUDA_SIMPLEHASH_CUH
