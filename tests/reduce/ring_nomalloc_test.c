/* In steady state an all-reduce allocates nothing: the test binary is linked with
 * -Wl,--wrap=malloc (and calloc, realloc, posix_memalign, aligned_alloc), so every call from the
 * ring, the allocator, the in-memory link and this file goes through the counters below. After
 * warm-up, 100 all-reduces over 4 persistent peer threads must make zero calls. They rotate
 * through float32 Sum, bfloat16 Max and a quantized float32 Sum (uint8 min-max), whose staging
 * (send / receive slots, gather buffers, scratch) also comes from the cache. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/check.h"
#include "tests/reduce/harness.h"

static _Atomic uint64_t alloc_calls;

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
int __real_posix_memalign(void **p, size_t align, size_t size);
void *__real_aligned_alloc(size_t align, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
int __wrap_posix_memalign(void **p, size_t align, size_t size);
void *__wrap_aligned_alloc(size_t align, size_t size);

void *__wrap_malloc(size_t size) {
    atomic_fetch_add(&alloc_calls, 1);
    return __real_malloc(size);
}
void *__wrap_calloc(size_t n, size_t size) {
    atomic_fetch_add(&alloc_calls, 1);
    return __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t size) {
    atomic_fetch_add(&alloc_calls, 1);
    return __real_realloc(p, size);
}
int __wrap_posix_memalign(void **p, size_t align, size_t size) {
    atomic_fetch_add(&alloc_calls, 1);
    return __real_posix_memalign(p, align, size);
}
void *__wrap_aligned_alloc(size_t align, size_t size) {
    atomic_fetch_add(&alloc_calls, 1);
    return __real_aligned_alloc(align, size);
}

#define N 4
#define WARMUP 5
#define MEASURED 100
#define COUNT_A 100003
#define COUNT_B 4099

static reduce_memnet_t *net;
static reduce_cache_t *cache;
static pthread_barrier_t start_bar, end_bar;
static float send_a[N][COUNT_A], recv_a[N][COUNT_A], want_a[COUNT_A];
static uint16_t send_b[N][COUNT_B], recv_b[N][COUNT_B], want_b[COUNT_B];
static float recv_q[N][COUNT_A], want_q[COUNT_A];
static int have_want_q;
static int errors[N];

/* Small integers: every order of summation gives the same float, so the expected value is
 * simply the sum; bf16 holds them exactly too. */
static void *worker(void *arg) {
    uint32_t p = (uint32_t) (uintptr_t) arg;
    reduce_ring_params_t params;
    memset(&params, 0, sizeof params);
    reduce_memnet_fill_params(net, p, &params);
    params.cache = cache;
    params.subchunk_bytes = 16 * 1024;
    for (int it = 0; it < WARMUP + MEASURED; it++) {
        pthread_barrier_wait(&start_bar);
        params.tag = (uint64_t) it;
        reduce_ring_stats_t st;
        int rc;
        if (it % 3 == 0) {
            rc = reduce_ring_allreduce(&params, send_a[p], recv_a[p], COUNT_A, pcclFloat, pcclSum, &st);
            if (rc != REDUCE_OK || memcmp(recv_a[p], want_a, sizeof want_a) != 0) errors[p]++;
        } else if (it % 3 == 2) {
            /* Lossy, but deterministic: every run gives the bits of the first one. */
            params.quantization = (pcclQuantizationOptions_t){ pcclUint8, pcclQuantMinMax };
            rc = reduce_ring_allreduce(&params, send_a[p], recv_q[p], COUNT_A, pcclFloat, pcclSum, &st);
            params.quantization.algorithm = pcclQuantNone;
            if (rc != REDUCE_OK || (have_want_q && memcmp(recv_q[p], want_q, sizeof want_q) != 0))
                errors[p]++;
            if (st.tx_bytes >= sizeof send_a[p] / 2) errors[p]++; /* about 2 * 3/4 * 1/4 */
        } else {
            rc = reduce_ring_allreduce(&params, send_b[p], recv_b[p], COUNT_B, pcclBFloat16, pcclMax, &st);
            if (rc != REDUCE_OK || memcmp(recv_b[p], want_b, sizeof want_b) != 0) errors[p]++;
        }
        pthread_barrier_wait(&end_bar);
    }
    return NULL;
}

int main(void) {
    net = reduce_memnet_create(N, NULL);
    cache = reduce_cache_create();
    REQUIRE(net != NULL && cache != NULL);
    for (size_t i = 0; i < COUNT_A; i++) {
        want_a[i] = 0;
        for (uint32_t p = 0; p < N; p++) {
            send_a[p][i] = (float) ((i * 7 + p * 13) % 1000) - 500.0f;
            want_a[i] += send_a[p][i];
        }
    }
    for (size_t i = 0; i < COUNT_B; i++) {
        float best = -1e30f;
        for (uint32_t p = 0; p < N; p++) {
            float v = (float) ((i * 5 + p * 11) % 200) - 100.0f;
            uint32_t u;
            memcpy(&u, &v, 4);
            send_b[p][i] = (uint16_t) (u >> 16); /* exact: small integers */
            if (v > best) best = v;
        }
        uint32_t u;
        memcpy(&u, &best, 4);
        want_b[i] = (uint16_t) (u >> 16);
    }
    REQUIRE(pthread_barrier_init(&start_bar, NULL, N + 1) == 0);
    REQUIRE(pthread_barrier_init(&end_bar, NULL, N + 1) == 0);
    pthread_t th[N];
    for (uintptr_t p = 0; p < N; p++) REQUIRE(pthread_create(&th[p], NULL, worker, (void *) p) == 0);

    uint64_t before = 0;
    reduce_cache_stats_t st0, st1;
    for (int it = 0; it < WARMUP + MEASURED; it++) {
        if (it == WARMUP) {
            before = atomic_load(&alloc_calls);
            reduce_cache_get_stats(cache, &st0);
        }
        pthread_barrier_wait(&start_bar);
        pthread_barrier_wait(&end_bar);
        if (it % 3 == 2) {
            for (int p = 1; p < N; p++) CHECK(memcmp(recv_q[p], recv_q[0], sizeof recv_q[0]) == 0);
            if (!have_want_q) memcpy(want_q, recv_q[0], sizeof want_q);
            have_want_q = 1;
        }
    }
    uint64_t after = atomic_load(&alloc_calls);
    reduce_cache_get_stats(cache, &st1);
    for (int p = 0; p < N; p++) pthread_join(th[p], NULL);

    fprintf(stderr, "allocation calls: %llu during warm-up and set-up, %llu in %d all-reduces\n",
            (unsigned long long) before, (unsigned long long) (after - before), MEASURED);
    CHECK(before > 0); /* the wrappers are live: set-up did allocate */
    CHECK_EQ_U64(after - before, 0);
    CHECK_EQ_U64(st1.system_allocs, st0.system_allocs);
    CHECK_EQ_U64(st1.blocks_in_use, 0);
    for (int p = 0; p < N; p++) CHECK_EQ_U64(errors[p], 0);

    pthread_barrier_destroy(&start_bar);
    pthread_barrier_destroy(&end_bar);
    reduce_cache_destroy(cache);
    reduce_memnet_destroy(net);
    return check_exit();
}
