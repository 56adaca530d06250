/* hash_many: every job's hash equals hash_xxh3 / hash_simple of its bytes, whatever the thread
 * count (1, 2, 3, 8, 64, and 0 = the online CPUs) and whatever the mix: empty jobs with NULL
 * data, tiny ones, ones just under and over HASH_MANY_PARALLEL_BYTES, several large ones at odd
 * addresses, both kinds in one call; no jobs at all; one large job (no thread pays); and many
 * large jobs with more threads than jobs. */
#include <stdlib.h>
#include <string.h>

#include "hash/hash.h"
#include "hash/hash_many.h"
#include "tests/common/check.h"

#define MiB ((size_t) 1 << 20)

static void fill(unsigned char *p, size_t n) {
    uint64_t x = 0x243F6A8885A308D3ULL;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (unsigned char) x;
    }
}

static uint64_t want(const hash_job_t *j) {
    return j->kind == HASH_KIND_SIMPLE ? hash_simple(j->data, j->len) : hash_xxh3(j->data, j->len);
}

/* Runs the jobs with each thread count and checks every result. */
static void run_all(hash_job_t *jobs, size_t n, const char *what) {
    static const unsigned threads[] = {1, 2, 3, 8, 64, 0};
    for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
        for (size_t i = 0; i < n; i++) jobs[i].out = 0x5555;
        hash_many(jobs, n, threads[k]);
        int bad = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t w = want(&jobs[i]);
            CHECK_EQ_U64(jobs[i].out, w);
            bad += jobs[i].out != w;
        }
        if (bad) fprintf(stderr, "%s, %u threads: %d wrong\n", what, threads[k], bad);
    }
}

int main(void) {
    size_t size = 40 * MiB;
    unsigned char *buf = malloc(size);
    REQUIRE(buf != NULL);
    fill(buf, size);

    hash_many(NULL, 0, 0); /* nothing to do */

    /* A model-like mix: empty, tiny, around the threshold, large at odd addresses, both kinds. */
    static const size_t lens[] = {0,      1,           17,          4096,           3072,
                                  MiB - 1, MiB,        MiB + 1,     3 * MiB + 5,    8 * MiB,
                                  0,      9216,        2 * MiB + 7, 5 * MiB + 4097, 768 * 4};
    enum { N = sizeof lens / sizeof lens[0] };
    hash_job_t jobs[2 * N];
    size_t at = 0;
    for (size_t i = 0; i < 2 * N; i++) {
        size_t len = lens[i % N];
        jobs[i] = (hash_job_t){len == 0 && i % 2 ? NULL : buf + at, len, i < N ? HASH_KIND_XXH3 : HASH_KIND_SIMPLE, 0};
        at = (at + len + 3) % (size - 9 * MiB);
    }
    run_all(jobs, 2 * N, "mixed");

    /* One large job: hashed by the caller (a thread would not pay). */
    hash_job_t one = {buf + 1, 16 * MiB, HASH_KIND_XXH3, 0};
    run_all(&one, 1, "one large");

    /* Many equal large jobs, more than the threads. */
    hash_job_t same[20];
    for (size_t i = 0; i < 20; i++) same[i] = (hash_job_t){buf + i * MiB + i, MiB + i, HASH_KIND_XXH3, 0};
    run_all(same, 20, "20 large");

    CHECK(hash_online_cpus() >= 1);
    free(buf);
    int rc = check_exit();
    printf("hash_many_test: %s (%d checks)\n", rc ? "FAILED" : "passed", check_count);
    return rc;
}
