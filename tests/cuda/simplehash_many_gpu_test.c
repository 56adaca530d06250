/* The batch SimpleHash on the GPU (cuda_table()->simplehash_many, cuda_simplehash_many_async):
 * every result equal to the one-input GPU hash (t->simplehash) and to the CPU reference
 * hash_simple(), for
 *   - every length 0..80 at every start offset 0..15, as one batch;
 *   - lengths around words, rows and segments (0, 1, 15..17, 4 KiB +- 1, 256 KiB +- 1, odd sizes),
 *     each in an allocation of exactly its size at offsets 0..15 (compute-sanitizer sees an
 *     over-read), mixed in one batch;
 *   - the GPT-2 124M model (148 float32 tensors, 498 MB): one allocation per tensor, and all in
 *     one arena at odd offsets; repeated batches give the same hashes;
 *   - 2500 inputs (more than one launch's 768, in every alignment class), len 0 with NULL data among them;
 *   - the asynchronous form with the caller's workspace, counters and stream;
 *   - a host pointer in the batch refused (CUDA_INVALID, nothing hashed), the next batch fine;
 *   - one changed byte in one tensor changes exactly that tensor's hash.
 * Without CUDA built in, or without a GPU, it prints one "skipped" line and passes. `--quick`
 * (for compute-sanitizer) leaves out the model and the 2500 inputs, and compares with
 * hash_simple only. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_table.h"
#include "hash/hash.h"
#include "tests/common/check.h"
#include "tests/cuda/gpt2_shapes.h"

#ifdef PCCL_HAVE_CUDA_API
#include "cuda/cuda_api.h"
#endif

#define SEG ((size_t) HASH_SIMPLE_SEGMENT_BYTES)

static const cuda_table_t *t;
static int quick; /* compare with hash_simple only, not with one launch per input as well */

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

/* Hashes the batch, then checks every result against the one-input GPU hash and hash_simple of
 * the host copy; returns the mismatches. */
static int check_batch(const cuda_hash_item_t *items, const unsigned char *const *host, size_t n, const char *what) {
    uint64_t *got = calloc(n ? n : 1, sizeof *got);
    REQUIRE(got != NULL);
    cuda_status_t st = t->simplehash_many(items, n, NULL, got);
    if (st != CUDA_OK) fprintf(stderr, "%s: simplehash_many: %s\n", what, t->status_string(st));
    CHECK(st == CUDA_OK);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t cpu = hash_simple(host[i], items[i].len), one = cpu;
        if (!quick) CHECK(t->simplehash(items[i].data, items[i].len, NULL, &one) == CUDA_OK);
        check_count++;
        if (got[i] != cpu || one != cpu) {
            if (bad++ < 10)
                fprintf(stderr, "MISMATCH %s: input %zu len %zu (address %% 16 = %u): batch %016" PRIx64
                                " one %016" PRIx64 " cpu %016" PRIx64 "\n",
                        what, i, items[i].len, (unsigned) ((uintptr_t) items[i].data % 16), got[i], one, cpu);
            check_failures++;
        }
    }
    free(got);
    fprintf(stderr, "%s: %zu inputs, %d mismatches\n", what, n, bad);
    return bad;
}

/* Every length 0..max at every offset 0..15 of one buffer, as one batch. */
static void small_lengths(const unsigned char *h, const unsigned char *d, size_t max) {
    size_t n = 16 * (max + 1), k = 0;
    cuda_hash_item_t *items = malloc(n * sizeof *items);
    const unsigned char **host = malloc(n * sizeof *host);
    REQUIRE(items && host);
    for (size_t off = 0; off < 16; off++)
        for (size_t len = 0; len <= max; len++, k++) {
            items[k] = (cuda_hash_item_t){d + off, len};
            host[k] = h + off;
        }
    check_batch(items, host, n, "small lengths x offsets");
    free(items);
    free(host);
}

/* Each input alone in an allocation that ends where it ends. */
static void exact_allocations(const unsigned char *h) {
    static const size_t lens[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 255, 3072, 4095, 4096, 4097, 4111, 9216,
                                  SEG - 1, SEG, SEG + 1, SEG + 17, 2 * SEG + 3, 3 * SEG - 1, 5 * SEG + 4096 * 7 + 9};
    const size_t nl = sizeof lens / sizeof lens[0], n = nl * 16;
    cuda_hash_item_t *items = malloc(n * sizeof *items);
    const unsigned char **host = malloc(n * sizeof *host);
    void **mem = calloc(n, sizeof *mem);
    REQUIRE(items && host && mem);
    for (size_t k = 0; k < n; k++) {
        size_t len = lens[k % nl], off = k / nl; /* interleaved: neighbours differ in size and offset */
        REQUIRE(t->device_alloc(&mem[k], off + len + (off + len == 0)) == CUDA_OK);
        REQUIRE(t->memcpy_h2d(mem[k], h, off + len, NULL) == CUDA_OK);
        items[k] = (cuda_hash_item_t){len == 0 && k % 3 == 0 ? NULL : (unsigned char *) mem[k] + off, len};
        host[k] = h + off;
    }
    check_batch(items, host, n, "exact allocations (mixed lengths and offsets)");
    for (size_t k = 0; k < n; k++) REQUIRE(t->device_free(mem[k]) == CUDA_OK);
    free(items);
    free(host);
    free(mem);
}

/* More inputs than one launch takes, len 0 with NULL data sprinkled in. */
static void many_inputs(const unsigned char *h, const unsigned char *d, size_t avail) {
    const size_t n = 2500;
    uint64_t rng = 77;
    cuda_hash_item_t *items = malloc(n * sizeof *items);
    const unsigned char **host = malloc(n * sizeof *host);
    REQUIRE(items && host);
    for (size_t k = 0; k < n; k++) {
        size_t len = k % 97 == 0 ? 0 : (size_t) (splitmix_next(&rng) % (k % 50 == 1 ? 3 * SEG : 9000));
        size_t off = (size_t) (splitmix_next(&rng) % (avail - len));
        items[k] = (cuda_hash_item_t){len == 0 ? NULL : d + off, len};
        host[k] = h + off;
    }
    check_batch(items, host, n, "2500 inputs (several launches)");
    free(items);
    free(host);
}

typedef struct model_t {
    size_t n;
    gpt2_tensor_t shape[GPT2_TENSORS];
    cuda_hash_item_t items[GPT2_TENSORS];
    const unsigned char *host[GPT2_TENSORS];
    void *mem[GPT2_TENSORS]; /* one allocation per tensor, or NULL (the arena) */
} model_t;

static void model_batches(const unsigned char *h) {
    static model_t m;
    m.n = gpt2_shapes(m.shape);
    size_t total = 0;
    for (size_t i = 0; i < m.n; i++) total += m.shape[i].count * 4;
    /* One allocation per tensor, each filled from a different place of h. */
    size_t at = 0;
    for (size_t i = 0; i < m.n; i++) {
        size_t len = m.shape[i].count * 4;
        REQUIRE(t->device_alloc(&m.mem[i], len) == CUDA_OK);
        REQUIRE(t->memcpy_h2d(m.mem[i], h + at, len, NULL) == CUDA_OK);
        m.items[i] = (cuda_hash_item_t){m.mem[i], len};
        m.host[i] = h + at;
        at += len;
    }
    check_batch(m.items, m.host, m.n, "GPT-2 124M, a tensor per allocation");
    uint64_t first[GPT2_TENSORS], again[GPT2_TENSORS];
    REQUIRE(t->simplehash_many(m.items, m.n, NULL, first) == CUDA_OK);
    for (int r = 0; r < 5; r++) {
        REQUIRE(t->simplehash_many(m.items, m.n, NULL, again) == CUDA_OK);
        CHECK(memcmp(first, again, sizeof first) == 0);
    }
    /* One byte of one mid-sized tensor changed: that hash alone changes. */
    const size_t victim = 40;
    unsigned char old = m.host[victim][12345 % (m.shape[victim].count * 4)], flipped = (unsigned char) (old ^ 1);
    unsigned char *dp = (unsigned char *) m.mem[victim] + 12345 % (m.shape[victim].count * 4);
    REQUIRE(t->memcpy_h2d(dp, &flipped, 1, NULL) == CUDA_OK);
    REQUIRE(t->simplehash_many(m.items, m.n, NULL, again) == CUDA_OK);
    for (size_t i = 0; i < m.n; i++) CHECK((again[i] != first[i]) == (i == victim));
    REQUIRE(t->memcpy_h2d(dp, &old, 1, NULL) == CUDA_OK);
    for (size_t i = 0; i < m.n; i++) REQUIRE(t->device_free(m.mem[i]) == CUDA_OK);

    /* The whole model in one arena, tensors packed at odd offsets (flat-parameter layouts). */
    unsigned char *arena = NULL;
    REQUIRE(t->device_alloc((void **) &arena, total + 16 * m.n) == CUDA_OK);
    REQUIRE(t->memcpy_h2d(arena, h, total + 16 * m.n, NULL) == CUDA_OK);
    at = 0;
    for (size_t i = 0; i < m.n; i++) {
        at += i % 16;
        m.items[i] = (cuda_hash_item_t){arena + at, m.shape[i].count * 4};
        m.host[i] = h + at;
        at += m.shape[i].count * 4;
    }
    check_batch(m.items, m.host, m.n, "GPT-2 124M in one arena at odd offsets");
    REQUIRE(t->device_free(arena) == CUDA_OK);
}

#ifdef PCCL_HAVE_CUDA_API
/* The asynchronous form on a stream of ours, with our own workspace, twice in a row without a
 * wait in between (the counters are left at zero by the first). */
static void async_form(const unsigned char *h, const unsigned char *d) {
    enum { N = 40 };
    cuda_hash_item_t items[N];
    const unsigned char *host[N];
    for (size_t k = 0; k < N; k++) {
        size_t len = k * k * 337 + k, off = k % 16;
        items[k] = (cuda_hash_item_t){d + off, len};
        host[k] = h + off;
    }
    void *stream = NULL, *ws = NULL;
    unsigned *counters = NULL;
    uint64_t *results = NULL, got[2][N];
    REQUIRE(t->stream_create(&stream) == CUDA_OK);
    size_t bytes = cuda_simplehash_many_workspace_bytes(items, N);
    REQUIRE(bytes != SIZE_MAX && t->device_alloc(&ws, bytes) == CUDA_OK);
    REQUIRE(t->device_alloc((void **) &counters, N * sizeof *counters) == CUDA_OK);
    REQUIRE(t->device_alloc((void **) &results, 2 * N * sizeof *results) == CUDA_OK);
    REQUIRE(t->memset_async(counters, 0, N * sizeof *counters, stream) == CUDA_OK);
    REQUIRE(cuda_simplehash_many_async(items, N, counters, ws, results, stream) == CUDA_OK);
    REQUIRE(cuda_simplehash_many_async(items, N, counters, ws, results + N, stream) == CUDA_OK);
    REQUIRE(t->memcpy_d2h(got, results, sizeof got, stream) == CUDA_OK);
    for (size_t k = 0; k < N; k++) {
        uint64_t cpu = hash_simple(host[k], items[k].len);
        CHECK_EQ_U64(got[0][k], cpu);
        CHECK_EQ_U64(got[1][k], cpu);
    }
    CHECK(cuda_simplehash_many_async(items, N, NULL, ws, results, stream) == CUDA_INVALID);
    REQUIRE(t->device_free(ws) == CUDA_OK);
    REQUIRE(t->device_free(counters) == CUDA_OK);
    REQUIRE(t->device_free(results) == CUDA_OK);
    REQUIRE(t->stream_destroy(stream) == CUDA_OK);
    fprintf(stderr, "asynchronous form: %d inputs twice on a stream of ours\n", N);
}
#endif

/* A host pointer in the batch: refused, nothing written; the next batch is right. */
static void refusals(const unsigned char *h, const unsigned char *d) {
    unsigned char host_buf[64] = {1, 2, 3};
    cuda_hash_item_t items[3] = {{d, 100}, {host_buf, sizeof host_buf}, {d + 1, 5000}};
    uint64_t out[3] = {7, 7, 7};
    CHECK(t->simplehash_many(items, 3, NULL, out) == CUDA_INVALID);
    CHECK(out[0] == 7 && out[1] == 7 && out[2] == 7);
    items[1] = (cuda_hash_item_t){NULL, 8};
    CHECK(t->simplehash_many(items, 3, NULL, out) == CUDA_INVALID);
    /* A bad input after the first part went to the GPU (a large input first): still refused. */
    cuda_hash_item_t late[3] = {{d + 16, 3 * SEG}, {d + 1, 10}, {host_buf, sizeof host_buf}};
    CHECK(t->simplehash_many(late, 3, NULL, out) == CUDA_INVALID);
    CHECK(t->simplehash_many(items, 0, NULL, out) == CUDA_OK);
    items[1] = (cuda_hash_item_t){d + 7, 4096};
    const unsigned char *host[3] = {h, h + 7, h + 1};
    check_batch(items, host, 3, "after a refusal");
}

int main(int argc, char **argv) {
    quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    t = cuda_table();
    if (t == NULL) {
        printf("simplehash_many_gpu_test: skipped: CUDA not built in (build with --config=cuda)\n");
        return 0;
    }
    int devices = 0;
    cuda_status_t st = t->device_count(&devices);
    if (st == CUDA_NO_DEVICE) {
        printf("simplehash_many_gpu_test: skipped: no GPU\n");
        return 0;
    }
    REQUIRE(st == CUDA_OK);
    /* The model's bytes plus room for the arena's offsets. */
    size_t n = quick ? 8 * SEG : GPT2_ELEMENTS * 4 + 16 * GPT2_TENSORS + 4096;
    unsigned char *h = malloc(n), *d = NULL;
    REQUIRE(h != NULL);
    fill(h, n, 4242);
    REQUIRE(t->device_alloc((void **) &d, n) == CUDA_OK);
    REQUIRE(t->memcpy_h2d(d, h, n, NULL) == CUDA_OK);

    refusals(h, d);
    small_lengths(h, d, quick ? 40 : 80);
    exact_allocations(h);
#ifdef PCCL_HAVE_CUDA_API
    async_form(h, d);
#endif
    if (!quick) {
        many_inputs(h, d, n);
        model_batches(h);
    }
    REQUIRE(t->device_free(d) == CUDA_OK);
    free(h);
    int rc = check_exit();
    printf("simplehash_many_gpu_test%s: %s (%d checks, %d failed)\n", quick ? " --quick" : "", rc ? "FAILED" : "passed",
           check_count, check_failures);
    return rc;
}
