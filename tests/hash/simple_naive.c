/* simple_naive.c -- see simple_naive.h. Mirrors the pseudo-code of SIMPLEHASH.md line by line. */
#include "tests/hash/simple_naive.h"

#include <stdlib.h>

#define SEGMENT_WORDS 16384u /* 256 lanes x 64 words */

uint64_t naive_row_key(uint64_t i) {
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t fmix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ULL;
    x ^= x >> 33;
    return x;
}

static uint64_t lane_value(uint64_t a0, uint64_t a1) {
    return fmix64(a0 ^ (a1 * 0x165667B19E3779F9ULL));
}

static uint64_t combine(uint64_t left, uint64_t right) {
    return fmix64(left * 0x85EBCA77C2B2AE63ULL + right);
}

/* Half h (0 = bytes 0..7, 1 = bytes 8..15) of word w, little-endian, zero past the end. */
static uint64_t half(const unsigned char *b, uint64_t len, uint64_t w, int h) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) {
        uint64_t pos = 16 * w + 8 * (uint64_t) h + (uint64_t) k;
        v = (v << 8) | (pos < len ? b[pos] : 0);
    }
    return v;
}

/* Level by level, adjacent pairs; an odd last value is carried up unchanged. */
static uint64_t tree(uint64_t *v, uint64_t n) {
    while (n > 1) {
        for (uint64_t i = 0; i < n / 2; i++) v[i] = combine(v[2 * i], v[2 * i + 1]);
        if (n % 2 == 1) v[n / 2] = v[n - 1];
        n = (n + 1) / 2;
    }
    return v[0];
}

static uint64_t segment_value(const unsigned char *b, uint64_t len, uint64_t s, uint64_t words) {
    uint64_t first = s * SEGMENT_WORDS;
    uint64_t n_s = words - first < SEGMENT_WORDS ? words - first : SEGMENT_WORDS;
    uint64_t v[256];
    for (uint64_t j = 0; j < 256; j++) {
        uint64_t a0 = 0x9E3779B185EBCA87ULL, a1 = 0xC2B2AE3D27D4EB4FULL;
        for (uint64_t r = 0; r < 64; r++) {
            uint64_t i = 256 * r + j;
            if (i >= n_s) break;
            uint64_t d0 = half(b, len, first + i, 0), d1 = half(b, len, first + i, 1);
            uint64_t x0 = d0 ^ naive_row_key(2 * r), x1 = d1 ^ naive_row_key(2 * r + 1);
            a0 = a0 + (x0 & 0xFFFFFFFFULL) * (x0 >> 32) + d1;
            a1 = a1 + (x1 & 0xFFFFFFFFULL) * (x1 >> 32) + d0;
        }
        v[j] = lane_value(a0, a1);
    }
    return tree(v, 256);
}

uint64_t naive_simplehash(const unsigned char *b, uint64_t len) {
    uint64_t words = (len + 15) / 16;
    uint64_t segments = (words + SEGMENT_WORDS - 1) / SEGMENT_WORDS;
    if (segments == 0) segments = 1;
    uint64_t *v = malloc(segments * sizeof *v);
    if (v == NULL) abort();
    for (uint64_t s = 0; s < segments; s++) v[s] = segment_value(b, len, s, words);
    uint64_t root = tree(v, segments);
    free(v);
    return fmix64(root ^ (len * 0x27D4EB2F165667C5ULL));
}
