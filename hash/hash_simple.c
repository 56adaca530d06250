/* hash_simple.c -- SimpleHash v1, the CPU reference of the CUDA kernel (see SIMPLEHASH.md).
 *
 * A segment is walked row by row: each row is 4096 contiguous bytes that give one 16-byte word
 * to each of the 256 lanes, so the inner loop runs over adjacent lanes and their 512 accumulators
 * (4 KiB, resident in L1) and vectorises. The segment tree is streamed with a binary-counter
 * stack, so nothing is allocated. */
#include "hash/hash.h"

#include <string.h>

#define IV0 0x9E3779B185EBCA87ULL
#define IV1 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

#define LANES HASH_SIMPLE_LANES
#define ROWS HASH_SIMPLE_WORDS_PER_LANE
#define ROW_BYTES HASH_SIMPLE_ROW_BYTES
#define SEGMENT_BYTES HASH_SIMPLE_SEGMENT_BYTES

/* Little-endian loads at any alignment; memcpy compiles to one plain load. */
static inline uint64_t read64le(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline uint32_t read32le(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

static inline uint64_t fmix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t lane_value(uint64_t a0, uint64_t a1) {
    return fmix64(a0 ^ (a1 * P3));
}

static inline uint64_t combine(uint64_t left, uint64_t right) {
    return fmix64(left * P4 + right);
}

/* K[i]: output i of SplitMix64 started from state 0. */
static uint64_t row_key(uint64_t i) {
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Folds word j of one row into lane j's accumulators acc[2j], acc[2j+1], for j < lanes.
 * The halves are also read as 32-bit pieces: written as (u32 ^ u32) * (u32 ^ u32), gcc 12 emits
 * one pmuludq, where lo32(x) * hi32(x) on a 64-bit x becomes a full 64x64 multiply emulation.
 * Always inlined, so each caller's target (baseline or AVX2) vectorises its own copy. */
static inline __attribute__((always_inline)) void fold_row(uint64_t *restrict acc,
                                                           const unsigned char *restrict row,
                                                           uint64_t k0, uint64_t k1,
                                                           size_t lanes) {
    const uint32_t k0lo = (uint32_t) k0, k0hi = (uint32_t) (k0 >> 32);
    const uint32_t k1lo = (uint32_t) k1, k1hi = (uint32_t) (k1 >> 32);
    for (size_t j = 0; j < lanes; j++) {
        const unsigned char *w = row + (size_t) HASH_SIMPLE_WORD_BYTES * j;
        uint64_t d0 = read64le(w), d1 = read64le(w + 8);
        acc[2 * j] += (uint64_t) (read32le(w) ^ k0lo) * (read32le(w + 4) ^ k0hi) + d1;
        acc[2 * j + 1] += (uint64_t) (read32le(w + 8) ^ k1lo) * (read32le(w + 12) ^ k1hi) + d0;
    }
}

typedef void fold_rows_fn(uint64_t *restrict acc, const unsigned char *restrict seg, size_t rows,
                          const uint64_t *keys);

/* Folds `rows` complete rows starting at row 0 of a segment. */
static void fold_rows_generic(uint64_t *restrict acc, const unsigned char *restrict seg,
                              size_t rows, const uint64_t *keys) {
    for (size_t r = 0; r < rows; r++)
        fold_row(acc, seg + r * ROW_BYTES, keys[2 * r], keys[2 * r + 1], LANES);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The same C compiled for AVX2: twice the lanes per instruction, enough to reach memory
 * bandwidth on one core (the baseline SSE2 copy is compute bound at about 2/3 of it). */
__attribute__((target("avx2"))) static void fold_rows_avx2(uint64_t *restrict acc,
                                                           const unsigned char *restrict seg,
                                                           size_t rows, const uint64_t *keys) {
    for (size_t r = 0; r < rows; r++)
        fold_row(acc, seg + r * ROW_BYTES, keys[2 * r], keys[2 * r + 1], LANES);
}

static fold_rows_fn *pick_fold_rows(void) {
    return __builtin_cpu_supports("avx2") ? fold_rows_avx2 : fold_rows_generic;
}
#else
static fold_rows_fn *pick_fold_rows(void) {
    return fold_rows_generic;
}
#endif

/* The value of segment `seg` of `nbytes` bytes (0 <= nbytes <= SEGMENT_BYTES). */
static uint64_t segment_value(const unsigned char *seg, size_t nbytes, const uint64_t *keys,
                              fold_rows_fn *fold) {
    uint64_t acc[2 * LANES];
    uint64_t v[LANES];
    size_t words = nbytes / HASH_SIMPLE_WORD_BYTES + (nbytes % HASH_SIMPLE_WORD_BYTES != 0);
    size_t active = words < LANES ? words : LANES; /* lanes with at least one word */

    for (size_t j = 0; j < active; j++) {
        acc[2 * j] = IV0;
        acc[2 * j + 1] = IV1;
    }
    size_t full_rows = nbytes / ROW_BYTES;
    if (full_rows > 0) fold(acc, seg, full_rows, keys);
    size_t rest = nbytes - full_rows * ROW_BYTES;
    if (rest > 0) {
        /* The partial last row: its lanes stop early, its last word is zero-padded. */
        _Alignas(64) unsigned char buf[ROW_BYTES];
        size_t lanes = (rest + HASH_SIMPLE_WORD_BYTES - 1) / HASH_SIMPLE_WORD_BYTES;
        memcpy(buf, seg + full_rows * ROW_BYTES, rest);
        memset(buf + rest, 0, lanes * HASH_SIMPLE_WORD_BYTES - rest);
        fold_row(acc, buf, keys[2 * full_rows], keys[2 * full_rows + 1], lanes);
    }
    for (size_t j = 0; j < active; j++) v[j] = lane_value(acc[2 * j], acc[2 * j + 1]);

    /* Lane tree, 256 leaves. Lanes at or past `active` kept their initial state, so any subtree
     * lying wholly among them has the value `empty` of its level and need not be computed. */
    uint64_t empty = lane_value(IV0, IV1);
    size_t n = active;
    for (size_t width = LANES; width > 1; width /= 2) {
        for (size_t i = 0; i < n / 2; i++) v[i] = combine(v[2 * i], v[2 * i + 1]);
        if (n % 2 == 1) v[n / 2] = combine(v[n - 1], empty);
        n = (n + 1) / 2;
        empty = combine(empty, empty);
    }
    return n > 0 ? v[0] : empty;
}

static uint64_t simple(const void *data, size_t len, fold_rows_fn *fold) {
    const unsigned char *p = data;

    /* One segment with no words: nothing is read, not even a key. */
    if (len == 0) return fmix64(segment_value(NULL, 0, NULL, fold));

    uint64_t keys[2 * ROWS];

    size_t words = len / HASH_SIMPLE_WORD_BYTES + (len % HASH_SIMPLE_WORD_BYTES != 0);
    size_t rows = words / LANES + (words % LANES != 0);
    if (rows > ROWS) rows = ROWS;
    for (size_t i = 0; i < 2 * rows; i++) keys[i] = row_key(i);

    /* Segment tree as a binary counter: stack[] holds complete subtrees, largest first; after
     * the c-th push, one merge per trailing zero bit of c. Folding the rest from the right at the
     * end gives the level-by-level tree in which an odd last node is carried up unchanged. */
    uint64_t stack[65];
    size_t depth = 0;
    uint64_t count = 0;
    for (size_t off = 0; off < len;) {
        size_t n = len - off < SEGMENT_BYTES ? len - off : SEGMENT_BYTES;
        stack[depth++] = segment_value(p + off, n, keys, fold);
        off += n;
        for (uint64_t c = ++count; c % 2 == 0; c /= 2) {
            depth--;
            stack[depth - 1] = combine(stack[depth - 1], stack[depth]);
        }
    }
    uint64_t root = stack[depth - 1];
    for (size_t k = depth - 1; k-- > 0;) root = combine(stack[k], root);

    return fmix64(root ^ ((uint64_t) len * P5));
}

uint64_t hash_simple(const void *data, size_t len) {
    return simple(data, len, pick_fold_rows());
}

uint64_t hash_simple_portable(const void *data, size_t len) {
    return simple(data, len, fold_rows_generic);
}
