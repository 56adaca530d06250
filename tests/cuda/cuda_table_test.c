/* The cuda table in either flavour: pcclGetBuildInfo reports CUDA exactly when the table exists;
 * a table is complete; without a GPU it answers "no device" and treats every pointer as host
 * memory; with one, allocations, copies and streams work and host memory is told apart from
 * device memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_table.h"
#include "pccl.h"
#include "tests/common/check.h"

static void complete(const cuda_table_t *t) {
    CHECK(t->device_count && t->is_device_pointer && t->simplehash && t->simplehash_many);
    CHECK(t->memcpy_d2h && t->memcpy_h2d && t->memcpy_d2h_async && t->memcpy_h2d_async);
    CHECK(t->stream_create && t->stream_synchronize && t->stream_destroy);
    CHECK(t->host_alloc && t->host_free && t->device_alloc && t->device_free && t->status_string);
    for (int s = CUDA_OK; s <= CUDA_RUNTIME_ERROR; s++) {
        const char *name = t->status_string((cuda_status_t) s);
        CHECK(name != NULL && strncmp(name, "CUDA_", 5) == 0);
    }
}

static void with_gpu(const cuda_table_t *t) {
    enum { N = 1 << 20 };
    unsigned char *host = malloc(N), *pinned = NULL, *dev = NULL, *back = NULL;
    REQUIRE(host != NULL);
    for (size_t i = 0; i < N; i++) host[i] = (unsigned char) (i * 131 + 7);
    REQUIRE(t->host_alloc((void **) &pinned, N) == CUDA_OK);
    REQUIRE(t->host_alloc((void **) &back, N) == CUDA_OK);
    REQUIRE(t->device_alloc((void **) &dev, N) == CUDA_OK);
    CHECK(t->is_device_pointer(dev));
    CHECK(t->is_device_pointer(dev + N - 1));
    CHECK(!t->is_device_pointer(host));
    CHECK(!t->is_device_pointer(pinned));
    CHECK(!t->is_device_pointer(NULL));

    /* Pageable round trip, then a pinned one through a stream of ours. */
    CHECK(t->memcpy_h2d(dev, host, N, NULL) == CUDA_OK);
    memset(back, 0, N);
    CHECK(t->memcpy_d2h(back, dev, N, NULL) == CUDA_OK);
    CHECK(memcmp(back, host, N) == 0);

    void *stream = NULL;
    REQUIRE(t->stream_create(&stream) == CUDA_OK && stream != NULL);
    for (size_t i = 0; i < N; i++) pinned[i] = (unsigned char) (host[i] ^ 0x5a);
    CHECK(t->memcpy_h2d_async(dev, pinned, N, stream) == CUDA_OK);
    memset(back, 0, N);
    CHECK(t->memcpy_d2h_async(back, dev, N, stream) == CUDA_OK);
    CHECK(t->stream_synchronize(stream) == CUDA_OK);
    CHECK(memcmp(back, pinned, N) == 0);
    CHECK(t->stream_destroy(stream) == CUDA_OK);

    /* Zero-length copies are no-ops; a host pointer is no input for the GPU hash. */
    CHECK(t->memcpy_h2d(dev, host, 0, NULL) == CUDA_OK);
    uint64_t h = 0;
    CHECK(t->simplehash(host, 16, NULL, &h) == CUDA_INVALID);

    CHECK(t->device_free(dev) == CUDA_OK);
    CHECK(t->host_free(pinned) == CUDA_OK);
    CHECK(t->host_free(back) == CUDA_OK);
    free(host);
}

int main(void) {
    pcclBuildInfo_t info;
    memset(&info, 0xff, sizeof info);
    REQUIRE(pcclGetBuildInfo(&info) == pcclSuccess);
    const cuda_table_t *t = cuda_table();
    CHECK(info.has_cuda_support == (t != NULL));
    if (t == NULL) {
        printf("cuda_table_test: CUDA not built in: no table, has_cuda_support false\n");
        return check_exit();
    }
    complete(t);
    int devices = -1;
    cuda_status_t st = t->device_count(&devices);
    CHECK(st == CUDA_OK || st == CUDA_NO_DEVICE);
    if (st == CUDA_NO_DEVICE) {
        CHECK(devices == 0);
        int x = 0;
        CHECK(!t->is_device_pointer(&x));
        uint64_t h = 0;
        CHECK(t->simplehash(&x, sizeof x, NULL, &h) == CUDA_NO_DEVICE);
        cuda_hash_item_t item = {&x, sizeof x};
        CHECK(t->simplehash_many(&item, 1, NULL, &h) == CUDA_NO_DEVICE);
        void *p = NULL;
        CHECK(t->device_alloc(&p, 16) == CUDA_NO_DEVICE && p == NULL);
        printf("cuda_table_test: skipped: no GPU (table complete, reports no device)\n");
    } else {
        CHECK(devices > 0);
        with_gpu(t);
        printf("cuda_table_test: %d GPU(s)\n", devices);
    }
    return check_exit();
}
