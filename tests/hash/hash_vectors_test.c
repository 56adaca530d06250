/* Known answers for XXH3 and SimpleHash, and the properties both must have: a flipped bit
 * changes the hash, zero runs of different lengths differ, moved words, lanes and segments
 * change SimpleHash. */
#include <stdlib.h>
#include <string.h>

#include "hash/hash.h"
#include "tests/common/check.h"
#include "tests/hash/simple_naive.h"
#include "tests/hash/test_data.h"

#define SEG HASH_SIMPLE_SEGMENT_BYTES

typedef uint64_t hash_fn(const void *data, size_t len);

static void xxh3_known_answers(void) {
    /* Upstream xxHash's published anchors (seed 0). */
    CHECK_EQ_U64(hash_xxh3(NULL, 0), 0x2D06800538D394C2ULL);
    CHECK_EQ_U64(hash_xxh3("", 0), 0x2D06800538D394C2ULL);
    CHECK_EQ_U64(hash_xxh3("a", 1), 0xE6C632B61E964E1FULL);

    /* LLVM's unittests/Support/xxhashTest.cpp: xorshift bytes, one length per XXH3 code path
     * (1-3, 4-8, 9-16, 17-128, 129-240, long with and without a partial stripe). */
    enum { N = 2243 };
    unsigned char a[N];
    uint64_t x = 1;
    for (size_t i = 0; i < N; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        a[i] = (unsigned char) x;
    }
    CHECK_EQ_U64(hash_xxh3(a, 1), 0xD0D496E05C553485ULL);
    CHECK_EQ_U64(hash_xxh3(a, 3), 0x6EA2D59ACA5C3778ULL);
    CHECK_EQ_U64(hash_xxh3(a, 8), 0xABC1413DA6CD0209ULL);
    CHECK_EQ_U64(hash_xxh3(a, 16), 0x7E46916754D7C9B8ULL);
    CHECK_EQ_U64(hash_xxh3(a, 17), 0xED4BE912BA5F836DULL);
    CHECK_EQ_U64(hash_xxh3(a, 128), 0x06A146EE9A2DA378ULL);
    CHECK_EQ_U64(hash_xxh3(a, 129), 0xBC7138129BF065DAULL);
    CHECK_EQ_U64(hash_xxh3(a, 403), 0xCEFEB3FFA532AD8CULL);
    CHECK_EQ_U64(hash_xxh3(a, 2048), 0x330CE110CBB79EAEULL);
    CHECK_EQ_U64(hash_xxh3(a, 2243), 0x0979F786A24EDDE7ULL);
}

/* Frozen SimpleHash v1 answers. They were computed by hash_simple(), by the naive C version
 * and by a separate Python transcription of SIMPLEHASH.md, which all agreed. If one changes,
 * the definition changed: that is a new hash, not a fix. */
static void simple_known_answers(void) {
    static const struct {
        size_t len;
        uint64_t hash;
    } pattern[] = {
        {0, 0xB021A3A3EFC32FD2ULL},      {1, 0x66A8A67325E051A2ULL},
        {3, 0xC6A5F59445FAEA24ULL},      {15, 0x966D15409B226389ULL},
        {16, 0xA85885F97A335AF1ULL},     {17, 0x0662A64B62A9062DULL},
        {255, 0x732C3FE90F9D165AULL},    {256, 0xFC85D8EA239F09E5ULL},
        {4095, 0xA2FC6219B3BE9BD4ULL},   {4096, 0x8A4A644E9E519AF1ULL},
        {4097, 0x7D02DCA2865E9D42ULL},   {262143, 0xB17A4A61E5E71C15ULL},
        {262144, 0xBE6592C732314C3CULL}, {262145, 0x5B8FA7C631D69989ULL},
        {1048579, 0x6E4CE7521F3EE1EFULL},
    };
    size_t max = 1048579;
    unsigned char *buf = malloc(max);
    REQUIRE(buf != NULL);
    fill_pattern(buf, max); /* byte i = (i * 31 + 7) mod 256 */
    for (size_t k = 0; k < sizeof pattern / sizeof pattern[0]; k++) {
        CHECK_EQ_U64(hash_simple(buf, pattern[k].len), pattern[k].hash);
        CHECK_EQ_U64(naive_simplehash(buf, pattern[k].len), pattern[k].hash);
    }
    CHECK_EQ_U64(hash_simple(NULL, 0), 0xB021A3A3EFC32FD2ULL);
    memset(buf, 0, 1000);
    CHECK_EQ_U64(hash_simple(buf, 1000), 0x3CD38F3CD2CA78C5ULL);
    free(buf);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return (x > y) - (x < y);
}

/* Number of values that equal their predecessor once sorted. */
static size_t duplicates(uint64_t *v, size_t n) {
    qsort(v, n, sizeof *v, cmp_u64);
    size_t d = 0;
    for (size_t i = 1; i < n; i++) d += v[i] == v[i - 1];
    return d;
}

/* Flips bit `bit` of each chosen byte in turn: the hash must change, all the flipped hashes
 * must differ from each other, and flipping back must restore the original. */
static void bit_flips(hash_fn *hash, const char *name) {
    size_t len = SEG + 37917; /* two segments, the second one partial */
    unsigned char *buf = malloc(len);
    uint64_t *seen = malloc(2048 * sizeof *seen);
    REQUIRE(buf != NULL && seen != NULL);
    fill_random(buf, len, 7);
    uint64_t base = hash(buf, len);
    size_t n = 0;
    for (size_t pos = 0; pos < len; pos = pos < 64 ? pos + 1 : pos + 997) {
        for (int bit = 0; bit < 8; bit++) {
            if (pos >= 64 && bit != (int) (pos % 8)) continue;
            buf[pos] ^= (unsigned char) (1u << bit);
            seen[n] = hash(buf, len);
            buf[pos] ^= (unsigned char) (1u << bit);
            CHECK(seen[n] != base);
            n++;
        }
    }
    for (size_t pos = len - 32; pos < len; pos++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[pos] ^= (unsigned char) (1u << bit);
            seen[n] = hash(buf, len);
            buf[pos] ^= (unsigned char) (1u << bit);
            CHECK(seen[n] != base);
            n++;
        }
    }
    REQUIRE(n <= 2048);
    CHECK_EQ_U64(hash(buf, len), base);
    size_t dup = duplicates(seen, n);
    if (dup != 0) fprintf(stderr, "%s: %zu equal hashes among %zu bit flips\n", name, dup, n);
    CHECK_EQ_U64(dup, 0);

    /* Short inputs: every bit of every length 1..48. */
    for (size_t l = 1; l <= 48; l++) {
        uint64_t b = hash(buf, l);
        for (size_t i = 0; i < 8 * l; i++) {
            buf[i / 8] ^= (unsigned char) (1u << (i % 8));
            CHECK(hash(buf, l) != b);
            buf[i / 8] ^= (unsigned char) (1u << (i % 8));
        }
    }
    free(seen);
    free(buf);
}

static void zero_lengths(hash_fn *hash, const char *name) {
    static const size_t extra[] = {SEG - 16, SEG - 1, SEG, SEG + 1, SEG + 16, 2 * SEG - 1,
                                   2 * SEG, 2 * SEG + 1, 3 * SEG, 4 * SEG};
    size_t nextra = sizeof extra / sizeof extra[0];
    enum { SMALL = 4200 };
    unsigned char *zeros = calloc(4 * SEG, 1);
    uint64_t *v = malloc((SMALL + nextra) * sizeof *v);
    REQUIRE(zeros != NULL && v != NULL);
    for (size_t l = 0; l < SMALL; l++) v[l] = hash(zeros, l);
    for (size_t k = 0; k < nextra; k++) v[SMALL + k] = hash(zeros, extra[k]);
    size_t dup = duplicates(v, SMALL + nextra);
    if (dup != 0) fprintf(stderr, "%s: %zu equal hashes among zero runs\n", name, dup);
    CHECK_EQ_U64(dup, 0);
    free(v);
    free(zeros);
}

static void swap_bytes(unsigned char *a, unsigned char *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char t = a[i];
        a[i] = b[i];
        b[i] = t;
    }
}

/* The positional parts of the definition: row keys, lane tree, segment tree. */
static void simple_positions(void) {
    size_t len = 2 * SEG;
    unsigned char *buf = malloc(len);
    REQUIRE(buf != NULL);
    fill_random(buf, len, 11);
    uint64_t base = hash_simple(buf, len);

    swap_bytes(buf + 16 * 5, buf + 4096 + 16 * 5, 16); /* lane 5: its rows 0 and 1 */
    CHECK(hash_simple(buf, len) != base);
    swap_bytes(buf + 16 * 5, buf + 4096 + 16 * 5, 16);

    swap_bytes(buf + 16 * 3, buf + 16 * 4, 16); /* row 0: lanes 3 and 4 */
    CHECK(hash_simple(buf, len) != base);
    swap_bytes(buf + 16 * 3, buf + 16 * 4, 16);

    swap_bytes(buf, buf + 8, 8); /* the two halves of one word */
    CHECK(hash_simple(buf, len) != base);
    swap_bytes(buf, buf + 8, 8);

    swap_bytes(buf, buf + SEG, SEG); /* the two segments */
    CHECK(hash_simple(buf, len) != base);
    swap_bytes(buf, buf + SEG, SEG);

    CHECK_EQ_U64(hash_simple(buf, len), base);
    free(buf);
}

int main(void) {
    xxh3_known_answers();
    simple_known_answers();
    bit_flips(hash_xxh3, "xxh3");
    bit_flips(hash_simple, "simplehash");
    zero_lengths(hash_xxh3, "xxh3");
    zero_lengths(hash_simple, "simplehash");
    simple_positions();
    return check_exit();
}
