/* 64 MiB all-reduces: float Sum over 4 peers with separate buffers and the default sub-chunk,
 * then int32 Sum over 3 peers in place; every byte of every peer checked. Prints the rate. */
#include <stdlib.h>
#include <string.h>

#include "tests/common/check.h"
#include "tests/reduce/harness.h"
#include "tests/reduce/ref.h"

#define COUNT ((size_t) 16 * 1024 * 1024 + 3) /* 64 MiB of 4-byte elements, and an odd tail */

static float input_f(uint32_t p, size_t i) {
    return (float) (ref_hash(p, i) % 4001) / 128.0f - 15.5f;
}

static int32_t input_i(uint32_t p, size_t i) {
    return (int32_t) (uint32_t) ref_hash(p + 100, i);
}

static void run(uint32_t n, int inplace, reduce_cache_t *cache) {
    reduce_memnet_t *net = reduce_memnet_create(n, NULL);
    REQUIRE(net != NULL);
    void *send[4], *recv[4];
    peer_run_t runs[4];
    memset(runs, 0, sizeof runs);
    pcclDataType_t dt = inplace ? pcclInt32 : pcclFloat;
    for (uint32_t p = 0; p < n; p++) {
        send[p] = malloc(COUNT * 4);
        REQUIRE(send[p] != NULL);
        recv[p] = inplace ? send[p] : malloc(COUNT * 4);
        REQUIRE(recv[p] != NULL);
        for (size_t i = 0; i < COUNT; i++) {
            if (inplace) ((int32_t *) send[p])[i] = input_i(p, i);
            else ((float *) send[p])[i] = input_f(p, i);
        }
        reduce_memnet_fill_params(net, p, &runs[p].params);
        runs[p].params.tag = 1;
        runs[p].params.cache = cache;
        runs[p].sendbuf = send[p];
        runs[p].recvbuf = recv[p];
        runs[p].count = COUNT;
        runs[p].dtype = dt;
        runs[p].op = pcclSum;
    }
    double t0 = now_s();
    REQUIRE(run_peers(runs, n) == 0);
    double t1 = now_s();
    fprintf(stderr, "n=%u %s: %.3f s, %.2f GB/s per peer (payload)\n", n, inplace ? "in place int32" : "float",
            t1 - t0, (double) runs[0].stats.tx_bytes / (t1 - t0) / 1e9);

    size_t bad = 0;
    for (uint32_t c = 0; c < n; c++) {
        size_t first = c * (COUNT / n) + (c < COUNT % n ? c : COUNT % n);
        size_t len = COUNT / n + (c < COUNT % n ? 1 : 0);
        for (size_t i = first; i < first + len; i++) {
            if (inplace) {
                uint32_t acc = 0;
                for (uint32_t k = 1; k <= n; k++) acc += (uint32_t) input_i((c + k) % n, i);
                for (uint32_t p = 0; p < n; p++) bad += ((uint32_t *) recv[p])[i] != acc;
            } else {
                float acc = input_f((c + 1) % n, i);
                for (uint32_t k = 2; k <= n; k++) acc += input_f((c + k) % n, i);
                for (uint32_t p = 0; p < n; p++) {
                    bad += memcmp(&((float *) recv[p])[i], &acc, 4) != 0;
                    bad += ((float *) send[p])[i] != input_f(p, i); /* sendbuf untouched */
                }
            }
        }
    }
    CHECK_EQ_U64(bad, 0);
    uint64_t tx = 0;
    for (uint32_t p = 0; p < n; p++) {
        CHECK_EQ_U64(runs[p].rc, REDUCE_OK);
        tx += runs[p].stats.tx_bytes;
        CHECK_EQ_U64(runs[p].stats.tx_bytes, runs[(p + 1) % n].stats.rx_bytes);
    }
    CHECK_EQ_U64(tx, 2ull * (n - 1) * COUNT * 4);
    for (uint32_t p = 0; p < n; p++) {
        if (!inplace) free(recv[p]);
        free(send[p]);
    }
    reduce_memnet_destroy(net);
}

int main(void) {
    reduce_cache_t *cache = reduce_cache_create();
    REQUIRE(cache != NULL);
    run(4, 0, cache);
    run(3, 1, cache);
    reduce_cache_destroy(cache);
    return check_exit();
}
