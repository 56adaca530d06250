/* test_data.h: deterministic test bytes shared by the hash tests. */
#ifndef PCCL_TESTS_HASH_TEST_DATA_H
#define PCCL_TESTS_HASH_TEST_DATA_H

#include <stddef.h>
#include <stdint.h>

/* SplitMix64 bytes: every bit of every word varies. */
static inline void fill_random(unsigned char *p, size_t n, uint64_t seed) {
    uint64_t x = seed;
    for (size_t i = 0; i < n; i++) {
        if (i % 8 == 0) {
            x += 0x9E3779B97F4A7C15ULL;
        }
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        z ^= z >> 31;
        p[i] = (unsigned char) (z >> (8 * (i % 8)));
    }
}

/* The frozen known-answer pattern: byte i is (i * 31 + 7) mod 256. */
static inline void fill_pattern(unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char) (i * 31 + 7);
}

#endif
