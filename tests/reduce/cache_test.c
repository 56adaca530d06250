/* The caching allocator: size classes, alignment, reuse, stats, trim, a multi-threaded hammer
 * that checks no block is ever handed to two owners, and destroy with blocks still in use
 * (ASan's leak check is the judge of "frees everything"). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"
#include "tests/common/check.h"

static void test_classes(void) {
    reduce_cache_t *c = reduce_cache_create();
    REQUIRE(c != NULL);
    void *a = reduce_cache_alloc(c, 0), *b = reduce_cache_alloc(c, 1);
    void *d = reduce_cache_alloc(c, 4096), *e = reduce_cache_alloc(c, 4097);
    void *f = reduce_cache_alloc(c, 256 * 1024 + 1);
    REQUIRE(a && b && d && e && f);
    CHECK_EQ_U64(reduce_cache_block_capacity(a), 4096);
    CHECK_EQ_U64(reduce_cache_block_capacity(b), 4096);
    CHECK_EQ_U64(reduce_cache_block_capacity(d), 4096);
    CHECK_EQ_U64(reduce_cache_block_capacity(e), 8192);
    CHECK_EQ_U64(reduce_cache_block_capacity(f), 512 * 1024);
    void *blocks[] = { a, b, d, e, f };
    for (int i = 0; i < 5; i++) {
        CHECK(((uintptr_t) blocks[i] & 63) == 0);
        memset(blocks[i], i, reduce_cache_block_capacity(blocks[i])); /* whole capacity usable */
    }
    CHECK(reduce_cache_alloc(c, ((size_t) 1 << 40) + 1) == NULL);
    CHECK(reduce_cache_alloc(NULL, 16) == NULL);

    reduce_cache_stats_t st;
    reduce_cache_get_stats(c, &st);
    CHECK_EQ_U64(st.system_allocs, 5);
    CHECK_EQ_U64(st.blocks_in_use, 5);
    CHECK_EQ_U64(st.bytes_held, 3 * 4096 + 8192 + 512 * 1024);

    /* Freed blocks come back, most recently freed first, without a system allocation. */
    reduce_cache_free(c, e);
    reduce_cache_free(c, d);
    reduce_cache_free(c, NULL);
    CHECK(reduce_cache_alloc(c, 100) == d);
    CHECK(reduce_cache_alloc(c, 5000) == e);
    reduce_cache_free(c, f);
    CHECK(reduce_cache_alloc(c, 300 * 1024) == f);
    reduce_cache_get_stats(c, &st);
    CHECK_EQ_U64(st.system_allocs, 5);
    CHECK_EQ_U64(st.blocks_free, 0);

    /* Trim drops the free blocks only. */
    reduce_cache_free(c, a);
    reduce_cache_free(c, f);
    reduce_cache_trim(c);
    reduce_cache_get_stats(c, &st);
    CHECK_EQ_U64(st.blocks_free, 0);
    CHECK_EQ_U64(st.blocks_in_use, 3);
    CHECK_EQ_U64(st.bytes_held, 2 * 4096 + 8192);
    void *g = reduce_cache_alloc(c, 10);
    reduce_cache_get_stats(c, &st);
    CHECK_EQ_U64(st.system_allocs, 6);

    /* A double free is refused, not corrupting the list. */
    reduce_cache_free(c, g);
    reduce_cache_free(c, g);
    reduce_cache_get_stats(c, &st);
    CHECK_EQ_U64(st.blocks_free, 1);
    CHECK(reduce_cache_alloc(c, 10) == g);
    CHECK(reduce_cache_alloc(c, 10) != g);

    /* Destroy with blocks in use: frees them too (logged). */
    reduce_cache_destroy(c);
    reduce_cache_destroy(NULL);
}

#define THREADS 6
#define ROUNDS 20000
#define HELD 8

static reduce_cache_t *shared;

static void *hammer(void *arg) {
    uintptr_t id = (uintptr_t) arg;
    void *held[HELD] = { 0 };
    size_t sizes[HELD] = { 0 };
    uint64_t x = id * 0x9e3779b97f4a7c15ull + 1;
    int bad = 0;
    for (int r = 0; r < ROUNDS; r++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int slot = (int) (x % HELD);
        if (held[slot] != NULL) {
            /* The stamp we left must still be there: nobody else owned the block meanwhile. */
            const unsigned char *p = held[slot];
            if (p[0] != (unsigned char) id || p[sizes[slot] - 1] != (unsigned char) id) bad++;
            reduce_cache_free(shared, held[slot]);
            held[slot] = NULL;
        } else {
            sizes[slot] = 1 + (size_t) ((x >> 8) % (64 * 1024));
            held[slot] = reduce_cache_alloc(shared, sizes[slot]);
            if (held[slot] == NULL) return (void *) 1;
            memset(held[slot], (int) id, sizes[slot]);
        }
    }
    for (int i = 0; i < HELD; i++) reduce_cache_free(shared, held[i]);
    return (void *) (uintptr_t) (bad != 0);
}

static void test_threads(void) {
    shared = reduce_cache_create();
    REQUIRE(shared != NULL);
    pthread_t th[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) REQUIRE(pthread_create(&th[i], NULL, hammer, (void *) (i + 1)) == 0);
    for (int i = 0; i < THREADS; i++) {
        void *ret = NULL;
        pthread_join(th[i], &ret);
        CHECK(ret == NULL);
    }
    reduce_cache_stats_t st;
    reduce_cache_get_stats(shared, &st);
    CHECK_EQ_U64(st.blocks_in_use, 0);
    /* Never more blocks than were ever held at once: threads x slots, over the 5 classes
     * that sizes up to 64 KiB fall in. */
    CHECK(st.system_allocs <= THREADS * HELD * 5);
    CHECK_EQ_U64(st.blocks_free, st.system_allocs);
    reduce_cache_destroy(shared);
}

/* A cache over another memory source (pinned host memory for CUDA staging) takes every block
 * from it and gives every block back to it, on trim and on destroy. */
typedef struct counting_source {
    int allocs, frees;
    size_t bytes;
} counting_source_t;

static void *counting_alloc(void *ctx, size_t size) {
    counting_source_t *s = ctx;
    void *mem = NULL;
    if (posix_memalign(&mem, 64, size) != 0) return NULL;
    s->allocs++;
    s->bytes += size;
    return mem;
}

static void counting_free(void *ctx, void *mem) {
    counting_source_t *s = ctx;
    s->frees++;
    free(mem);
}

static void test_source(void) {
    counting_source_t cs = {0, 0, 0};
    reduce_cache_source_t src = {counting_alloc, counting_free, &cs};
    reduce_cache_t *c = reduce_cache_create_from(&src);
    REQUIRE(c != NULL);
    void *a = reduce_cache_alloc(c, 4096), *b = reduce_cache_alloc(c, 70000);
    REQUIRE(a && b);
    CHECK_EQ_U64(cs.allocs, 2);
    CHECK_EQ_U64(cs.bytes, 2 * 64 + 4096 + 131072); /* a 64-byte header before each block */
    reduce_cache_free(c, a);
    CHECK(reduce_cache_alloc(c, 100) == a); /* reused: no new allocation */
    CHECK_EQ_U64(cs.allocs, 2);
    reduce_cache_free(c, a);
    reduce_cache_trim(c);
    CHECK_EQ_U64(cs.frees, 1);
    reduce_cache_destroy(c); /* b is still in use: destroy frees it (and logs) */
    CHECK_EQ_U64(cs.frees, 2);
}

int main(void) {
    test_classes();
    test_source();
    test_threads();
    return check_exit();
}
