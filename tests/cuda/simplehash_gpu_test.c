/* SimpleHash on the GPU (cuda_table()->simplehash) against the CPU reference hash_simple():
 * every length 0..4099 at every start offset 0..15, segment and row boundaries, ranges that end
 * exactly at the end of their allocation (so that compute-sanitizer sees any over-read), random
 * lengths up to 1 GiB at random offsets, repeated runs, a caller's stream, single-byte changes,
 * and a host pointer refused. The synchronous call hashes inputs of up to 16 KiB on the host
 * after one copy; so every input is also hashed by the kernel itself (cuda_simplehash_async,
 * one workspace for all), which must give the same 64 bits.
 *
 * Without CUDA built in, or without a GPU, it prints one "skipped" line and passes.
 * `--quick` runs only lengths 0..80 and the end-of-allocation cases up to 3 segments (for
 * compute-sanitizer, under which every launch is slow). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda_table.h"
#include "hash/hash.h"
#include "tests/common/check.h"
#ifdef PCCL_HAVE_CUDA_API
#include "cuda/cuda_api.h"
#endif

#define SEG ((size_t) HASH_SIMPLE_SEGMENT_BYTES)
#define GiB ((size_t) 1 << 30)
/* Odd on purpose: ranges ending at BIG end at an unaligned allocation end. */
#define BIG (GiB + 71)

static const cuda_table_t *t;

static uint64_t splitmix_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static void fill(unsigned char *p, size_t n, uint64_t seed) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = splitmix_next(&seed);
        memcpy(p + i, &v, 8);
    }
    for (; i < n; i++) p[i] = (unsigned char) splitmix_next(&seed);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static uint64_t gpu_hash(const void *dev, size_t len, void *stream) {
    uint64_t h = 0;
    cuda_status_t st = t->simplehash(dev, len, stream, &h);
    if (st != CUDA_OK) fprintf(stderr, "simplehash(%p, %zu): %s\n", dev, len, t->status_string(st));
    CHECK(st == CUDA_OK);
    return h;
}

#ifdef PCCL_HAVE_CUDA_API
static void *kernel_ws;        /* workspace for the largest input; its counter is left at zero */
static uint64_t *kernel_result; /* device memory */

static uint64_t kernel_hash(const void *dev, size_t len) {
    uint64_t h = 0;
    CHECK(cuda_simplehash_async(dev, len, kernel_ws, kernel_result, NULL) == CUDA_OK);
    CHECK(t->memcpy_d2h(&h, kernel_result, sizeof h, NULL) == CUDA_OK);
    return h;
}
#endif

/* One check per (length, offset): a failure names both. */
static int compare(const unsigned char *host, const unsigned char *dev, size_t len, size_t off, const char *what) {
    uint64_t cpu = hash_simple(host, len), gpu = gpu_hash(dev, len, NULL);
#ifdef PCCL_HAVE_CUDA_API
    uint64_t kern = kernel_hash(dev, len);
    if (kern != gpu) {
        check_count++;
        if (check_failures++ < 20)
            fprintf(stderr, "MISMATCH %s: len %zu offset %zu: kernel %016" PRIx64 " call %016" PRIx64 "\n", what, len,
                    off, kern, gpu);
        return 1;
    }
#endif
    check_count++;
    if (cpu != gpu) {
        if (check_failures++ >= 20) return 1;
        fprintf(stderr, "MISMATCH %s: len %zu offset %zu: cpu %016" PRIx64 " gpu %016" PRIx64 "\n", what, len, off,
                cpu, gpu);
        return 1;
    }
    return 0;
}

/* Every length 0..max at every offset 0..15 of the big buffer. */
static void small_lengths(const unsigned char *h, const unsigned char *d, size_t max) {
    int bad = 0;
    for (size_t off = 0; off < 16; off++)
        for (size_t len = 0; len <= max; len++) bad += compare(h + off, d + off, len, off, "small");
    fprintf(stderr, "small lengths 0..%zu x offsets 0..15: %d mismatches\n", max, bad);
}

/* Ranges that end at the end of an allocation of exactly off + len bytes. */
static void end_of_allocation(const unsigned char *h, int quick) {
    static const size_t lens[] = {1, 2, 3, 7, 15, 16, 17, 31, 33, 255, 4095, 4096, 4097, 4111,
                                  SEG - 1, SEG, SEG + 1, SEG + 15, SEG + 17, 2 * SEG - 16, 2 * SEG + 3,
                                  3 * SEG - 1, 5 * SEG + 4096 * 7 + 9};
    size_t n = sizeof lens / sizeof lens[0];
    int bad = 0;
    for (size_t k = 0; k < n; k++) {
        for (size_t off = 0; off < 16; off++) {
            size_t len = lens[k];
            if (quick && len > 3 * SEG) continue;
            unsigned char *d = NULL;
            REQUIRE(t->device_alloc((void **) &d, off + len) == CUDA_OK);
            REQUIRE(t->memcpy_h2d(d, h, off + len, NULL) == CUDA_OK);
            bad += compare(h + off, d + off, len, off, "end of allocation");
            REQUIRE(t->device_free(d) == CUDA_OK);
        }
    }
    fprintf(stderr, "end-of-allocation ranges: %d mismatches\n", bad);
}

/* Segment and row boundaries, every offset. */
static void boundaries(const unsigned char *h, const unsigned char *d) {
    static const size_t lens[] = {
        SEG - 4097, SEG - 4096, SEG - 17, SEG - 16, SEG - 15, SEG - 1, SEG, SEG + 1, SEG + 15, SEG + 16,
        SEG + 17, SEG + 4095, SEG + 4096, SEG + 4097, 2 * SEG - 1, 2 * SEG, 2 * SEG + 1, 3 * SEG, 3 * SEG + 300,
        7 * SEG + 77777, 9 * SEG + 12, ((size_t) 17 << 20) + 3};
    /* 4096 segments fill one tree block exactly; one more needs a second tree level. */
    static const size_t big[] = {4095 * SEG + 5, 4096 * SEG - 1, 4096 * SEG, 4096 * SEG + 1};
    int bad = 0;
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
        for (size_t off = 0; off < 16; off++) bad += compare(h + off, d + off, lens[k], off, "boundary");
    for (size_t k = 0; k < sizeof big / sizeof big[0]; k++)
        for (size_t off = 0; off < 16; off += 5) bad += compare(h + off, d + off, big[k], off, "boundary");
    fprintf(stderr, "segment/row/tree boundaries x offsets: %d mismatches\n", bad);
}

/* Random lengths up to 1 GiB (log-uniform, so every scale is hit) at random offsets; every
 * offset 1..15 at least once on a long input; the whole 1 GiB at offset 0. */
static void random_lengths(const unsigned char *h, const unsigned char *d) {
    uint64_t rng = 20240817;
    int bad = 0, n = 0;
    double t0 = now_s();
    for (size_t off = 1; off < 16; off++) {
        size_t len = GiB - 64 + (splitmix_next(&rng) % 49);
        bad += compare(h + off, d + off, len, off, "random (long)");
        n++;
    }
    for (int i = 0; i < 60; i++) {
        int bits = 1 + (int) (splitmix_next(&rng) % 30);
        size_t len = ((size_t) 1 << bits) + splitmix_next(&rng) % ((size_t) 1 << bits);
        if (len > GiB) len = GiB;
        size_t off = splitmix_next(&rng) % 16;
        bad += compare(h + off, d + off, len, off, "random");
        n++;
    }
    bad += compare(h, d, GiB, 0, "1 GiB");
    bad += compare(h + BIG - GiB, d + BIG - GiB, GiB, BIG - GiB, "1 GiB ending at the allocation's end");
    n += 2;
    fprintf(stderr, "random lengths up to 1 GiB: %d cases, %d mismatches (%.1f s)\n", n, bad, now_s() - t0);
}

/* The same input hashed again and again, on the default stream and on a stream of ours. */
static void repeated(const unsigned char *h, const unsigned char *d) {
    static const size_t cases[][2] = {{0, GiB}, {7, GiB - 7}, {3, 5 * SEG + 11}, {0, 4096}, {13, 1}};
    void *stream = NULL;
    REQUIRE(t->stream_create(&stream) == CUDA_OK);
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t off = cases[c][0], len = cases[c][1];
        uint64_t want = hash_simple(h + off, len);
        for (int r = 0; r < 10; r++) {
            uint64_t got = gpu_hash(d + off, len, r % 2 ? stream : NULL);
            CHECK_EQ_U64(got, want);
            bad += got != want;
        }
    }
    REQUIRE(t->stream_destroy(stream) == CUDA_OK);
    fprintf(stderr, "repeated runs (10 each, two streams): %d differ\n", bad);
}

/* Changing one byte anywhere changes the hash, and the GPU still agrees with the CPU. */
static void single_byte_changes(unsigned char *h, unsigned char *d) {
    static const size_t pos[] = {0, 1, 15, 16, 4095, 4096, SEG - 1, SEG, 3 * SEG + 12345, 77 * SEG + 5};
    const size_t off = 5, len = 80 * SEG + 3;
    uint64_t base = gpu_hash(d + off, len, NULL);
    for (size_t k = 0; k < sizeof pos / sizeof pos[0]; k++) {
        unsigned char *hp = h + off + pos[k], *dp = d + off + pos[k];
        unsigned char old = *hp, flipped = (unsigned char) (old ^ 0x40);
        REQUIRE(t->memcpy_h2d(dp, &flipped, 1, NULL) == CUDA_OK);
        *hp = flipped;
        uint64_t changed = gpu_hash(d + off, len, NULL);
        CHECK(changed != base);
        CHECK_EQ_U64(changed, hash_simple(h + off, len));
        REQUIRE(t->memcpy_h2d(dp, &old, 1, NULL) == CUDA_OK);
        *hp = old;
    }
    CHECK_EQ_U64(gpu_hash(d + off, len, NULL), base);
}

static void refusals(void) {
    unsigned char host[64] = {0};
    uint64_t h = 1;
    CHECK(t->simplehash(host, sizeof host, NULL, &h) == CUDA_INVALID);
    CHECK(t->simplehash(NULL, 0, NULL, &h) == CUDA_OK);
    CHECK_EQ_U64(h, hash_simple(NULL, 0));
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    t = cuda_table();
    if (t == NULL) {
        printf("simplehash_gpu_test: skipped: CUDA not built in (build with --config=cuda)\n");
        return 0;
    }
    int devices = 0;
    cuda_status_t st = t->device_count(&devices);
    if (st == CUDA_NO_DEVICE) {
        printf("simplehash_gpu_test: skipped: no GPU\n");
        return 0;
    }
    REQUIRE(st == CUDA_OK);

    size_t n = quick ? 4 * SEG : BIG;
    unsigned char *h = malloc(n);
    unsigned char *d = NULL;
    REQUIRE(h != NULL);
    fill(h, n, 42);
    REQUIRE(t->device_alloc((void **) &d, n) == CUDA_OK);
    REQUIRE(t->memcpy_h2d(d, h, n, NULL) == CUDA_OK);
    CHECK(t->is_device_pointer(d) && t->is_device_pointer(d + 3) && !t->is_device_pointer(h));
#ifdef PCCL_HAVE_CUDA_API
    REQUIRE(t->device_alloc(&kernel_ws, cuda_simplehash_workspace_bytes(n)) == CUDA_OK);
    REQUIRE(t->device_alloc((void **) &kernel_result, sizeof *kernel_result) == CUDA_OK);
    REQUIRE(cuda_memset_async(kernel_ws, 0, 8, NULL) == CUDA_OK && t->stream_synchronize(NULL) == CUDA_OK);
#endif

    double t0 = now_s();
    refusals();
    small_lengths(h, d, quick ? 80 : 4099); /* memcheck makes every launch slow */
    end_of_allocation(h, quick);
    if (!quick) {
        boundaries(h, d);
        random_lengths(h, d);
        repeated(h, d);
        single_byte_changes(h, d);
    }
    fprintf(stderr, "simplehash_gpu_test%s: %.1f s\n", quick ? " --quick" : "", now_s() - t0);

    REQUIRE(t->device_free(d) == CUDA_OK);
#ifdef PCCL_HAVE_CUDA_API
    t->device_free(kernel_ws);
    t->device_free(kernel_result);
#endif
    free(h);
    int rc = check_exit();
    printf("simplehash_gpu_test%s: %s (%d checks, %d failed)\n", quick ? " --quick" : "", rc ? "FAILED" : "passed",
           check_count, check_failures);
    return rc;
}
