/* grid_sim.c -- the grid all-reduce (reduce_grid.c) against the flat ring on simulated hosts
 * (simlink.h): every host's egress at 100 Mbit/s, 25 ms one way, as scale_bench.sh's namespaces,
 * but in one process: the schedules' own times with no kernel, TCP or master in them. Three
 * schedules: the ring, the grid rule's shape ("grid") and at most two dimensions without extras
 * ("grid2d"). Each figure is the median op time over SIM_ROUNDS ops (default 3) of each schedule
 * in the same run, the ring's the baseline. Default: 16 and 32 hosts, 4 KiB and 1 MiB; SIM_BIG=1
 * adds 64 MiB (4 GiB of buffers at 32 hosts, about 30 s per op). SIM_HOSTS="9 10 16" picks the
 * sizes. CSV rows (bench/run.sh): time ratios for 4 KiB / 1 MiB, bus bandwidth ratios for 64 MiB. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/allreduce/simlink.h"

#define DELAY_S 0.025
#define RATE_BPS (100e6 / 8)
#define MAX_HOSTS 64

typedef struct host_run {
    reduce_ring_params_t p;
    reduce_grid_shape_t shape;
    reduce_grid_links_t l;
    int grid; /* 0: the ring; else the grid's max_dims + 1 */
    float *send, *recv;
    size_t count;
    int rc;
    pthread_t th;
} host_run_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *host_main(void *arg) {
    host_run_t *h = arg;
    h->rc = h->grid ? reduce_grid_allreduce(&h->p, &h->shape, &h->l, h->send, h->recv, h->count, pcclFloat, pcclSum, NULL)
                    : reduce_ring_allreduce(&h->p, h->send, h->recv, h->count, pcclFloat, pcclSum, NULL);
    return NULL;
}

/* One op of `bytes` over n hosts; seconds from the start to the last host's return (-1: failed). */
static double one_op(host_run_t *hs, uint32_t n, size_t bytes, int grid, reduce_cache_t *cache, uint64_t tag) {
    simnet_t *net = simnet_create(n, DELAY_S, RATE_BPS);
    if (net == NULL) return -1;
    reduce_grid_shape_t shape;
    reduce_grid_shape(n, grid ? (uint32_t) grid - 1 : 0, grid == 3 ? 0 : UINT32_MAX, &shape);
    for (uint32_t r = 0; r < n; r++) {
        host_run_t *h = &hs[r];
        h->p = (reduce_ring_params_t){.rank = r, .world_size = n, .tag = tag, .cache = cache,
                                      .doorbell = simnet_doorbell(net, r)};
        h->p.next = simnet_link(net, r, (r + 1) % n);
        h->p.prev = simnet_link(net, r, (r + n - 1) % n);
        h->shape = shape;
        h->grid = grid;
        h->count = bytes / sizeof(float);
        reduce_grid_role_t ro;
        reduce_grid_role(&shape, r, &ro);
        memset(&h->l, 0, sizeof h->l);
        for (uint32_t d = 0; grid && !ro.extra && d < shape.ndims; d++) {
            h->l.next[d] = simnet_link(net, r, ro.next[d]);
            h->l.prev[d] = simnet_link(net, r, ro.prev[d]);
        }
        if (grid && ro.fold != REDUCE_GRID_NONE) h->l.fold_tx = h->l.fold_rx = simnet_link(net, r, ro.fold);
    }
    double t0 = now_s();
    for (uint32_t r = 0; r < n; r++) pthread_create(&hs[r].th, NULL, host_main, &hs[r]);
    int bad = 0;
    for (uint32_t r = 0; r < n; r++) {
        pthread_join(hs[r].th, NULL);
        bad |= hs[r].rc != REDUCE_OK;
    }
    double t = now_s() - t0;
    for (uint32_t r = 1; r < n && !bad; r++) bad |= memcmp(hs[r].recv, hs[0].recv, bytes) != 0;
    simnet_destroy(net);
    return bad ? -1 : t;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static int measure(uint32_t n, size_t bytes, const char *label, int rounds, reduce_cache_t *cache) {
    host_run_t *hs = calloc(n, sizeof *hs);
    if (hs == NULL) return -1;
    int rc = 0;
    for (uint32_t r = 0; r < n && rc == 0; r++) {
        hs[r].send = malloc(bytes);
        hs[r].recv = malloc(bytes);
        if (hs[r].send == NULL || hs[r].recv == NULL) rc = -1;
        for (size_t i = 0; rc == 0 && i < bytes / sizeof(float); i++) hs[r].send[i] = (float) ((r + i) % 7);
    }
    static const char *names[3] = {"ring", "grid", "grid2d"};
    static const int kinds[3] = {0, 1, 3}; /* ring; max_dims 0 (the rule); max_dims 2 */
    double t[3][16];
    for (int k = 0; k < rounds && rc == 0; k++)
        for (int a = 0; a < 3 && rc == 0; a++) { /* alternate, so drift hits all */
            t[a][k] = one_op(hs, n, bytes, kinds[a], cache, (uint64_t) k + 1);
            if (t[a][k] < 0) rc = -1;
        }
    for (int a = 0; a < 3 && rc == 0; a++) qsort(t[a], rounds, sizeof(double), cmp_d);
    for (int a = 1; a < 3 && rc == 0; a++) {
        double ring = t[0][rounds / 2], grid = t[a][rounds / 2];
        fprintf(stderr, "grid_sim: %u hosts, %s: ring %.3f s, %s %.3f s (%.3f x)\n", n, label, ring, names[a], grid,
                grid / ring);
        if (bytes >= (64u << 20)) { /* bus bandwidth, 2(n-1)/n S / t, as the other all-reduce rows */
            double f = 2.0 * (n - 1) / n * (double) bytes / 1e9;
            printf("grid_sim_%uhosts_%s_%s_busbw,%.4f,GB/s,%.4f,%.3f\n", n, label, names[a], f / grid, f / ring,
                   ring / grid);
        } else {
            printf("grid_sim_%uhosts_%s_%s_time,%.4f,s,%.4f,%.3f\n", n, label, names[a], grid, ring, grid / ring);
        }
    }
    for (uint32_t r = 0; r < n; r++) {
        free(hs[r].send);
        free(hs[r].recv);
    }
    free(hs);
    return rc;
}

int main(void) {
    const char *env = getenv("SIM_HOSTS");
    int rounds = getenv("SIM_ROUNDS") ? atoi(getenv("SIM_ROUNDS")) : 3;
    if (rounds < 1 || rounds > 16) rounds = 3;
    int big = getenv("SIM_BIG") && strcmp(getenv("SIM_BIG"), "1") == 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", env ? env : "16 32");
    reduce_cache_t *cache = reduce_cache_create();
    int rc = cache == NULL;
    for (char *tok = strtok(buf, " ,"); tok != NULL && rc == 0; tok = strtok(NULL, " ,")) {
        uint32_t n = (uint32_t) atoi(tok);
        if (n < 4 || n > MAX_HOSTS) continue;
        rc |= measure(n, 4096, "4KiB", rounds, cache);
        rc |= measure(n, 1u << 20, "1MiB", rounds, cache);
        if (big) rc |= measure(n, 64u << 20, "64MiB", rounds < 2 ? rounds : 2, cache);
    }
    reduce_cache_destroy(cache);
    return rc ? 1 : 0;
}
