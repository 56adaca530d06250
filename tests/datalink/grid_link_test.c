/* grid_link_test: the grid all-reduce (reduce/reduce_grid.c) over real data links: N peers on
 * threads, every directed grid edge a loopback TCP connection with a data link at each end (they
 * switch to shared-memory pipes after a first op unless PCCL_SHM=0). Shapes 9 = 3 x 3,
 * 10 = 2 x 2 x 2 and two extras, 10 = 5 x 2, 12 = 3 x 2 x 2. Checked:
 *   - int32 Sum, 100,003 elements: every peer exact, three ops in a row (over TCP, then pipes);
 *     the second and third take no new block from the cache (steady state: no allocation);
 *   - float32 Sum, bfloat16 Avg and float32 quantized to uint8: every peer bit-identical;
 *   - a peer that never starts, its links broken after 50 ms and every abort flag raised (as
 *     the master would): every other peer returns an error within 2 s. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ccoip/peer/ccoip_datalink.h"
#include "reduce/reduce.h"
#include "tests/common/check.h"
#include "tests/common/clock.h"
#include "tests/datalink/tcp_pair.h"

#define MAXN 12

typedef struct peer {
    reduce_ring_params_t params;
    reduce_grid_links_t links;
    _Atomic uint32_t abort_flag, doorbell;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    pcclDataType_t dtype;
    pcclRedOp_t op;
    int rc;
    double t_end;
    pthread_t th;
} peer_t;

typedef struct net {
    uint32_t n;
    reduce_grid_shape_t shape;
    ccoip_datalink_t *tx[MAXN][MAXN], *rx[MAXN][MAXN]; /* tx[a][b]: a's link to b; rx[b][a]: b's from a */
    int tx_fd[MAXN][MAXN], rx_fd[MAXN][MAXN];
    peer_t peers[MAXN];
    reduce_cache_t *cache[MAXN]; /* one per peer, as each process has its own */
} net_t;

static void edge(net_t *g, uint32_t a, uint32_t b) {
    if (g->tx[a][b] != NULL) return;
    tcp_pair(&g->tx_fd[a][b], &g->rx_fd[b][a]);
    REQUIRE((g->tx[a][b] = ccoip_datalink_start(g->tx_fd[a][b], "grid tx", NULL)) != NULL);
    REQUIRE((g->rx[b][a] = ccoip_datalink_start(g->rx_fd[b][a], "grid rx", NULL)) != NULL);
}

static void net_open(net_t *g, uint32_t n, uint32_t max_dims, uint32_t max_extras, int shm) {
    memset(g, 0, sizeof *g);
    g->n = n;
    REQUIRE(reduce_grid_shape(n, max_dims, max_extras, &g->shape) == 1);
    for (uint32_t p = 0; p < n; p++) REQUIRE((g->cache[p] = reduce_cache_create()) != NULL);
    if (!shm) setenv("PCCL_SHM", "0", 1);
    for (uint32_t p = 0; p < n; p++) {
        reduce_grid_role_t ro;
        reduce_grid_role(&g->shape, p, &ro);
        for (uint32_t d = 0; d < g->shape.ndims && !ro.extra; d++) edge(g, p, ro.next[d]);
        if (ro.fold != REDUCE_GRID_NONE) edge(g, p, ro.fold);
    }
    unsetenv("PCCL_SHM");
}

/* Each op fetches its links anew, as the communicator does (a switched link may combine). */
static void net_links(net_t *g, uint64_t tag) {
    for (uint32_t p = 0; p < g->n; p++) {
        peer_t *q = &g->peers[p];
        reduce_grid_role_t ro;
        reduce_grid_role(&g->shape, p, &ro);
        memset(&q->links, 0, sizeof q->links);
        for (uint32_t d = 0; d < g->shape.ndims && !ro.extra; d++) {
            q->links.next[d] = ccoip_datalink_link(g->tx[p][ro.next[d]]);
            q->links.prev[d] = ccoip_datalink_link(g->rx[p][ro.prev[d]]);
        }
        if (ro.fold != REDUCE_GRID_NONE) {
            q->links.fold_tx = ccoip_datalink_link(g->tx[p][ro.fold]);
            q->links.fold_rx = ccoip_datalink_link(g->rx[p][ro.fold]);
        }
        q->params = (reduce_ring_params_t){.rank = p, .world_size = g->n, .tag = tag, .cache = g->cache[p],
                                           .abort_flag = &q->abort_flag, .doorbell = &q->doorbell};
    }
}

static void net_close(net_t *g) {
    for (uint32_t a = 0; a < MAXN; a++)
        for (uint32_t b = 0; b < MAXN; b++)
            if (g->tx[a][b] != NULL) {
                ccoip_datalink_stop(g->tx[a][b]);
                ccoip_datalink_stop(g->rx[b][a]);
                close(g->tx_fd[a][b]);
                close(g->rx_fd[b][a]);
            }
    for (uint32_t p = 0; p < g->n; p++) {
        reduce_cache_stats_t st;
        reduce_cache_get_stats(g->cache[p], &st);
        CHECK_EQ_U64(st.blocks_in_use, 0);
        reduce_cache_destroy(g->cache[p]);
    }
}

static const reduce_grid_shape_t *cur_shape;

static void *peer_main_shape(void *arg) {
    peer_t *p = arg;
    p->rc = reduce_grid_allreduce(&p->params, cur_shape, &p->links, p->sendbuf, p->recvbuf, p->count, p->dtype,
                                  p->op, NULL);
    p->t_end = now_s();
    return NULL;
}

/* Runs every peer but `skip` (-1: none) and joins them. */
static void net_run(net_t *g, int skip) {
    cur_shape = &g->shape;
    for (uint32_t p = 0; p < g->n; p++)
        if ((int) p != skip) REQUIRE(pthread_create(&g->peers[p].th, NULL, peer_main_shape, &g->peers[p]) == 0);
}

static void net_join(net_t *g, int skip) {
    for (uint32_t p = 0; p < g->n; p++)
        if ((int) p != skip) pthread_join(g->peers[p].th, NULL);
}

static void exact_int_sum(net_t *g, uint64_t tag) {
    const size_t count = 100003;
    int32_t *buf[MAXN];
    for (uint32_t p = 0; p < g->n; p++) {
        REQUIRE((buf[p] = malloc(count * sizeof(int32_t))) != NULL);
        for (size_t i = 0; i < count; i++) buf[p][i] = (int32_t) (i * 3 + p * 1000003u);
    }
    net_links(g, tag);
    for (uint32_t p = 0; p < g->n; p++) {
        peer_t *q = &g->peers[p];
        q->sendbuf = q->recvbuf = buf[p];
        q->count = count;
        q->dtype = pcclInt32;
        q->op = pcclSum;
    }
    net_run(g, -1);
    net_join(g, -1);
    size_t bad = 0;
    for (uint32_t p = 0; p < g->n; p++) {
        CHECK_EQ_U64(g->peers[p].rc, REDUCE_OK);
        for (size_t i = 0; i < count; i++) {
            uint32_t want = (uint32_t) (i * 3 * g->n) + 1000003u * (g->n * (g->n - 1) / 2);
            bad += (uint32_t) buf[p][i] != want;
        }
        free(buf[p]);
    }
    CHECK_EQ_U64(bad, 0);
}

/* Every peer's result the same bits (random inputs). */
static void identical(net_t *g, pcclDataType_t dt, pcclRedOp_t op, const pcclQuantizationOptions_t *q, uint64_t tag) {
    const size_t count = 77777, bytes = count * reduce_dtype_size(dt);
    uint8_t *in[MAXN], *out[MAXN];
    net_links(g, tag);
    for (uint32_t p = 0; p < g->n; p++) {
        REQUIRE((in[p] = malloc(bytes)) != NULL && (out[p] = malloc(bytes)) != NULL);
        for (size_t i = 0; i < count; i++) {
            float v = (float) ((i * 7919 + p * 104729) % 2001) / 125.0f - 8.0f;
            if (dt == pcclFloat) memcpy(in[p] + 4 * i, &v, 4);
            else {
                uint32_t b;
                memcpy(&b, &v, 4);
                uint16_t h = (uint16_t) (b >> 16);
                memcpy(in[p] + 2 * i, &h, 2);
            }
        }
        peer_t *pe = &g->peers[p];
        pe->sendbuf = in[p];
        pe->recvbuf = out[p];
        pe->count = count;
        pe->dtype = dt;
        pe->op = op;
        if (q != NULL) pe->params.quantization = *q;
    }
    net_run(g, -1);
    net_join(g, -1);
    int diff = 0;
    for (uint32_t p = 0; p < g->n; p++) {
        CHECK_EQ_U64(g->peers[p].rc, REDUCE_OK);
        diff += memcmp(out[p], out[0], bytes) != 0;
    }
    CHECK_EQ_U64(diff, 0);
    for (uint32_t p = 0; p < g->n; p++) {
        free(in[p]);
        free(out[p]);
    }
}

static void stalled_peer(net_t *g, uint32_t victim, uint64_t tag) {
    const size_t count = 1u << 20;
    float *buf[MAXN];
    net_links(g, tag);
    for (uint32_t p = 0; p < g->n; p++) {
        REQUIRE((buf[p] = calloc(count, sizeof(float))) != NULL);
        peer_t *q = &g->peers[p];
        q->sendbuf = q->recvbuf = buf[p];
        q->count = count;
        q->dtype = pcclFloat;
        q->op = pcclSum;
    }
    net_run(g, (int) victim);
    usleep(50 * 1000);
    double t0 = now_s();
    for (uint32_t b = 0; b < g->n; b++) {
        if (g->tx[victim][b] != NULL) ccoip_datalink_break(g->tx[victim][b], "test: peer killed");
        if (g->rx[victim][b] != NULL) ccoip_datalink_break(g->rx[victim][b], "test: peer killed");
    }
    for (uint32_t p = 0; p < g->n; p++) {
        atomic_store(&g->peers[p].abort_flag, 1);
        atomic_fetch_add(&g->peers[p].doorbell, 1);
    }
    net_join(g, (int) victim);
    for (uint32_t p = 0; p < g->n; p++) {
        if (p == victim) continue;
        CHECK(g->peers[p].rc == REDUCE_ELINK || g->peers[p].rc == REDUCE_EABORTED);
        CHECK(g->peers[p].t_end - t0 < 2.0);
    }
    for (uint32_t p = 0; p < g->n; p++) free(buf[p]);
}

static uint64_t cache_allocs(reduce_cache_t *c) {
    reduce_cache_stats_t st;
    reduce_cache_get_stats(c, &st);
    return st.system_allocs;
}

int main(void) {
    /* n, max_dims, max_extras, shm, victim */
    static const uint32_t cases[][5] = {{9, 0, 0, 1, 4}, {10, 0, 99, 1, 9}, {10, 2, 0, 0, 3}, {12, 0, 0, 1, 11}};
    uint64_t tag = 1;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        net_t *g = calloc(1, sizeof *g);
        REQUIRE(g != NULL);
        net_open(g, cases[k][0], cases[k][1], cases[k][2] == 99 ? UINT32_MAX : cases[k][2], (int) cases[k][3]);
        uint64_t allocs[MAXN];
        exact_int_sum(g, tag++);
        for (uint32_t p = 0; p < g->n; p++) allocs[p] = cache_allocs(g->cache[p]);
        for (int r = 0; r < 2; r++) exact_int_sum(g, tag++);
        for (uint32_t p = 0; p < g->n; p++) CHECK_EQ_U64(cache_allocs(g->cache[p]), allocs[p]);
        identical(g, pcclFloat, pcclSum, NULL, tag++);
        identical(g, pcclBFloat16, pcclAvg, NULL, tag++);
        pcclQuantizationOptions_t q8 = {.quantized_datatype = pcclUint8, .algorithm = pcclQuantMinMax};
        identical(g, pcclFloat, pcclSum, &q8, tag++);
        stalled_peer(g, cases[k][4], tag++);
        net_close(g);
        free(g);
    }
    return check_exit();
}
