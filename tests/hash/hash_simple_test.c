/* SimpleHash CPU reference against the naive implementation written from SIMPLEHASH.md:
 * every length 0..4099, multi-segment sizes with every kind of tail, and misaligned starts.
 * Both builds of the row loop are checked: the dispatched one (AVX2 on most x86-64 CPUs) and
 * the baseline one. */
#include <stdlib.h>
#include <string.h>

#include "hash/hash.h"
#include "tests/common/check.h"
#include "tests/hash/simple_naive.h"
#include "tests/hash/test_data.h"

#define SEG HASH_SIMPLE_SEGMENT_BYTES

static void small_lengths(void) {
    enum { MAX = 4099 };
    unsigned char *buf = malloc(MAX);
    REQUIRE(buf != NULL);
    fill_random(buf, MAX, 1);
    for (size_t len = 0; len <= MAX; len++) {
        /* Hash the tail of the buffer, so the bytes past the end are never read. */
        const unsigned char *p = buf + MAX - len;
        uint64_t naive = naive_simplehash(p, len);
        CHECK_EQ_U64(hash_simple(p, len), naive);
        CHECK_EQ_U64(hash_simple_portable(p, len), naive);
    }
    CHECK_EQ_U64(hash_simple(NULL, 0), naive_simplehash(NULL, 0));
    CHECK_EQ_U64(hash_simple_portable(NULL, 0), naive_simplehash(NULL, 0));
    free(buf);
}

static void multi_segment(void) {
    /* Segment counts 1..9 (odd counts at several tree levels), partial last rows, partial last
     * words, a last segment of one byte, then 1 MiB, 17 MiB + 3 (69 segments) and 64 MiB. */
    static const size_t sizes[] = {
        SEG - 1, SEG, SEG + 1, SEG + 16, SEG + 4096, SEG + 4111,
        2 * SEG, 2 * SEG + 5, 3 * SEG, 3 * SEG + 300, 4 * SEG - 17, 5 * SEG + 1,
        6 * SEG + 4095, 7 * SEG + 77777, 8 * SEG, 9 * SEG + 12,
        (size_t) 1 << 20, ((size_t) 17 << 20) + 3, (size_t) 64 << 20,
    };
    size_t max = (size_t) 64 << 20;
    unsigned char *buf = malloc(max);
    REQUIRE(buf != NULL);
    fill_random(buf, max, 2);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const unsigned char *p = buf + max - sizes[k];
        uint64_t naive = naive_simplehash(p, sizes[k]);
        CHECK_EQ_U64(hash_simple(p, sizes[k]), naive);
        CHECK_EQ_U64(hash_simple_portable(p, sizes[k]), naive);
    }
    free(buf);
}

static void misaligned(void) {
    static const size_t sizes[] = {1, 7, 15, 16, 17, 31, 100, 4095, 4096, 4097, 65536 + 9,
                                   SEG + 33, 3 * SEG + 4100};
    size_t max = 3 * SEG + 4100;
    unsigned char *src = malloc(max);
    unsigned char *buf = aligned_alloc(64, (max + 64 + 63) / 64 * 64); /* C11: a multiple */
    REQUIRE(src != NULL && buf != NULL);
    fill_random(src, max, 3);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t len = sizes[k];
        memcpy(buf, src, len);
        uint64_t aligned = hash_simple(buf, len);
        for (size_t off = 1; off <= 15; off++) {
            memmove(buf + off, src, len);
            CHECK_EQ_U64(hash_simple(buf + off, len), aligned);
            CHECK_EQ_U64(hash_simple_portable(buf + off, len), aligned);
        }
        memcpy(buf + 33, src, len);
        CHECK_EQ_U64(hash_simple(buf + 33, len), aligned);
    }
    free(src);
    free(buf);
}

static void row_keys(void) {
    /* The values printed in SIMPLEHASH.md. */
    CHECK_EQ_U64(naive_row_key(0), 0xE220A8397B1DCDAFULL);
    CHECK_EQ_U64(naive_row_key(1), 0x6E789E6AA1B965F4ULL);
    CHECK_EQ_U64(naive_row_key(127), 0x12D05C4045A39C19ULL);
}

int main(void) {
    row_keys();
    small_lengths();
    multi_segment();
    misaligned();
    return check_exit();
}
