/* combine_ring_test: the ring over real data links whose receive directions run through
 * shared-memory pipes and combine reduce-scatter frames straight out of them
 * (post_recv_combine), against the same rings over TCP (PCCL_SHM=0, staged and combined by the
 * ring): N peers on threads, neighbours joined by real loopback TCP connections that the links
 * switch to shared memory by themselves after a first op. Checked:
 *   - every dtype x op, odd and tiny counts (empty chunks), 1 KiB frames (odd frame lengths put
 *     later frames at odd places in the pipe), windows 1 to 64, in place and not, worlds 2-4:
 *     every peer's bytes identical to the TCP ring's (inputs are random bits: NaN payloads,
 *     ties and +-0 show any change of operand order);
 *   - rings where only some links combine (PCCL_SHM_COMBINE=0 on the others), single-stream and
 *     striped over 2 streams per neighbour with a lane per stream: the same bytes;
 *   - the combining rings take no staging block from the cache;
 *   - an abort mid-op and a link broken mid-op: every ring returns an error promptly, and once
 *     it has, nothing writes its buffers any more. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ccoip/net/ccoip_shm.h"
#include "ccoip/peer/ccoip_datalink.h"
#include "ccoip/peer/ccoip_stripe.h"
#include "reduce/reduce.h"
#include "tests/common/check.h"
#include "tests/common/clock.h"
#include "tests/datalink/tcp_pair.h"

#define MAXN 4
#define MAXS 2
#define NCOMBOS 60 /* 12 dtypes x 5 ops */

typedef struct peer {
    ccoip_datalink_t *tx[MAXS], *rx[MAXS];
    int tx_fd[MAXS], rx_fd[MAXS];
    ccoip_stripe_t txs, rxs;
    reduce_ring_params_t params;
    _Atomic uint32_t abort_flag, doorbell;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    pcclDataType_t dtype;
    pcclRedOp_t op;
    int rc, poison; /* poison: after a failed ring, fill recvbuf and check that nothing writes it */
    int late_writes;
    double t_end;
    pthread_t th;
} peer_t;

typedef struct ring {
    uint32_t n, s; /* peers, streams per neighbour */
    int shm;
    uint32_t combine_mask; /* bit i * s + j: peer i's receive stream j may combine */
    peer_t peers[MAXN];
    reduce_cache_t *cache;
} ring_t;

static void *peer_main(void *arg) {
    peer_t *p = arg;
    p->rc = reduce_ring_allreduce(&p->params, p->sendbuf, p->recvbuf, p->count, p->dtype, p->op, NULL);
    p->t_end = now_s();
    if (p->poison && p->rc != REDUCE_OK) {
        /* The ring has returned: no link may touch recvbuf (or read sendbuf) any more. */
        size_t len = p->count * reduce_dtype_size(p->dtype);
        memset(p->recvbuf, 0x5A, len);
        usleep(50 * 1000);
        const uint8_t *b = p->recvbuf;
        for (size_t i = 0; i < len; i++) p->late_writes += b[i] != 0x5A;
    }
    return NULL;
}

static void ring_run(ring_t *g) {
    for (uint32_t i = 0; i < g->n; i++) REQUIRE(pthread_create(&g->peers[i].th, NULL, peer_main, &g->peers[i]) == 0);
    for (uint32_t i = 0; i < g->n; i++) pthread_join(g->peers[i].th, NULL);
}

/* The links of one op, fetched as the communicator does (per op: a link that has switched its
 * receive direction to the pipe offers post_recv_combine from then on). */
static void ring_links(ring_t *g, uint32_t window, size_t subchunk, bool switched) {
    for (uint32_t i = 0; i < g->n; i++) {
        peer_t *p = &g->peers[i];
        reduce_link_t tx[MAXS], rx[MAXS];
        for (uint32_t j = 0; j < g->s; j++) {
            tx[j] = ccoip_datalink_link(p->tx[j]);
            rx[j] = ccoip_datalink_link(p->rx[j]);
            bool expect = switched && g->shm && (g->combine_mask >> (i * g->s + j) & 1);
            CHECK((rx[j].ops->post_recv_combine != NULL) == expect);
            CHECK(tx[j].ops->post_recv_combine == NULL); /* nothing comes back that way */
        }
        p->params = (reduce_ring_params_t){.rank = i, .world_size = g->n, .tag = 1, .cache = g->cache,
                                           .abort_flag = &p->abort_flag, .doorbell = &p->doorbell,
                                           .window = window, .subchunk_bytes = subchunk};
        if (g->s == 1) {
            p->params.next = tx[0];
            p->params.prev = rx[0];
        } else {
            p->params.next = ccoip_stripe_link(&p->txs, tx, g->s);
            p->params.prev = ccoip_stripe_link(&p->rxs, rx, g->s);
            bool all = true;
            for (uint32_t j = 0; j < g->s; j++) all = all && rx[j].ops->post_recv_combine != NULL;
            CHECK((p->params.prev.ops->post_recv_combine != NULL) == all); /* mixed streams: none */
            ccoip_stripe_lanes(&p->params, &p->txs, g->s, &p->rxs, g->s);
            CHECK(p->params.lanes == g->s);
        }
    }
}

/* int32 Sum over every stream, exact: the links' handshakes happen with it. */
static void ring_warm(ring_t *g) {
    size_t count = 256u << 10; /* 1 MiB: several 64 KiB frames per chunk on every stream */
    int32_t *buf[MAXN];
    for (uint32_t r = 0; r < g->n; r++) {
        buf[r] = malloc(count * sizeof(int32_t));
        REQUIRE(buf[r]);
        for (size_t i = 0; i < count; i++) buf[r][i] = (int32_t) (i * 3 + r);
        peer_t *p = &g->peers[r];
        p->sendbuf = p->recvbuf = buf[r];
        p->count = count;
        p->dtype = pcclInt32;
        p->op = pcclSum;
    }
    ring_links(g, 8, 64u << 10, false);
    /* The first op's links were fetched before any switch: none combines yet. */
    for (uint32_t r = 0; r < g->n; r++) CHECK(g->peers[r].params.prev.ops->post_recv_combine == NULL);
    ring_run(g);
    int bad = 0;
    for (uint32_t r = 0; r < g->n; r++) {
        CHECK(g->peers[r].rc == REDUCE_OK);
        for (size_t i = 0; i < count; i++) bad += buf[r][i] != (int32_t) (i * 3 * g->n + g->n * (g->n - 1) / 2);
        free(buf[r]);
    }
    CHECK(bad == 0);
    /* Every stream of the ring's direction switched (shm) or stayed on TCP; none the other way. */
    for (uint32_t r = 0; r < g->n; r++)
        for (uint32_t j = 0; j < g->s; j++) {
            bool tx, rx, done = false;
            for (int k = 0; k < 500 && !(done = ccoip_datalink_shm(g->peers[r].rx[j], &tx, &rx)); k++)
                usleep(10 * 1000);
            CHECK(done && rx == (g->shm != 0) && !tx);
        }
}

static void ring_open(ring_t *g, uint32_t n, uint32_t s, int shm, uint32_t combine_mask) {
    memset(g, 0, sizeof *g);
    g->n = n;
    g->s = s;
    g->shm = shm;
    g->combine_mask = combine_mask;
    g->cache = reduce_cache_create();
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < s; j++) tcp_pair(&g->peers[i].tx_fd[j], &g->peers[(i + 1) % n].rx_fd[j]);
    if (shm) unsetenv("PCCL_SHM");
    else setenv("PCCL_SHM", "0", 1);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < s; j++) {
            peer_t *p = &g->peers[i];
            unsetenv("PCCL_SHM_COMBINE");
            REQUIRE((p->tx[j] = ccoip_datalink_start(p->tx_fd[j], "tx", NULL)) != NULL);
            /* The knob is read at start: per receiving link. */
            if (!(combine_mask >> (i * s + j) & 1)) setenv("PCCL_SHM_COMBINE", "0", 1);
            REQUIRE((p->rx[j] = ccoip_datalink_start(p->rx_fd[j], "rx", NULL)) != NULL);
        }
    unsetenv("PCCL_SHM_COMBINE");
    unsetenv("PCCL_SHM");
    ring_warm(g);
}

static void ring_close(ring_t *g) {
    for (uint32_t i = 0; i < g->n; i++)
        for (uint32_t j = 0; j < g->s; j++) {
            ccoip_datalink_stop(g->peers[i].tx[j]);
            ccoip_datalink_stop(g->peers[i].rx[j]);
            close(g->peers[i].tx_fd[j]);
            close(g->peers[i].rx_fd[j]);
        }
    reduce_cache_destroy(g->cache);
}

/* ---- the dtype x op matrix ------------------------------------------------------------------ */

static pcclDataType_t combo_dtype(int c) { return (pcclDataType_t) (c / 5); }
static pcclRedOp_t combo_op(int c) { return (pcclRedOp_t) (c % 5); }
static uint32_t combo_window(int c) {
    static const uint32_t w[] = {1, 2, 5, 8, 64};
    return w[(c / 5 + c) % 5];
}
/* Odd counts of about 24 KiB, and every sixth a tiny one (n - 1 elements: an empty chunk). */
static size_t combo_count(int c, uint32_t n) {
    if (c % 6 == 5) return n - 1;
    return ((24000 / reduce_dtype_size(combo_dtype(c))) | 1) + 2 * (size_t) (c % 7);
}
static uint8_t input_byte(int c, uint32_t r, size_t i) {
    uint64_t x = (uint64_t) i * 0x9E3779B97F4A7C15ull + (uint64_t) r * 0xC2B2AE3D27D4EB4Full + (uint64_t) c * 977;
    x ^= x >> 29;
    return (uint8_t) (x * 0xBF58476D1CE4E5B9ull >> 56);
}

/* Runs every combo on g; ref NULL: stores peer 0's result in out[c]; else compares with ref[c]. */
static void run_matrix(ring_t *g, uint8_t **ref, uint8_t **out, const char *what) {
    int differ = 0, disagree = 0;
    for (int c = 0; c < NCOMBOS; c++) {
        size_t count = combo_count(c, g->n), len = count * reduce_dtype_size(combo_dtype(c));
        int in_place = c % 2;
        uint8_t *in[MAXN], *res[MAXN];
        for (uint32_t r = 0; r < g->n; r++) {
            in[r] = malloc(len);
            res[r] = in_place ? in[r] : malloc(len);
            REQUIRE(in[r] && res[r]);
            for (size_t i = 0; i < len; i++) in[r][i] = input_byte(c, r, i);
            if (!in_place) memset(res[r], 0xCC, len);
            peer_t *p = &g->peers[r];
            p->sendbuf = in[r];
            p->recvbuf = res[r];
            p->count = count;
            p->dtype = combo_dtype(c);
            p->op = combo_op(c);
        }
        ring_links(g, combo_window(c), 1024, true);
        ring_run(g);
        for (uint32_t r = 0; r < g->n; r++) {
            CHECK(g->peers[r].rc == REDUCE_OK);
            disagree += memcmp(res[r], res[0], len) != 0;
        }
        if (ref == NULL) {
            out[c] = malloc(len);
            REQUIRE(out[c]);
            memcpy(out[c], res[0], len);
        } else if (memcmp(res[0], ref[c], len) != 0) {
            fprintf(stderr, "%s, %u peers: dtype %d op %d count %zu window %u%s differs from the TCP ring\n", what,
                    g->n, (int) combo_dtype(c), (int) combo_op(c), count, combo_window(c), in_place ? " in place" : "");
            differ++;
        }
        for (uint32_t r = 0; r < g->n; r++) {
            if (!in_place) free(res[r]);
            free(in[r]);
        }
    }
    CHECK(disagree == 0);
    CHECK(differ == 0);
    fprintf(stderr, "%s, %u peers x %u streams: %d dtype x op rings%s\n", what, g->n, g->s, NCOMBOS,
            ref ? (differ ? ", SOME DIFFER from TCP" : ", every byte as over TCP") : " (the reference)");
}

static void matrix(uint32_t n) {
    uint8_t *ref[NCOMBOS];
    ring_t g;
    ring_open(&g, n, 1, 0, ~0u);
    run_matrix(&g, NULL, ref, "TCP, staged");
    ring_close(&g);

    /* Every link combines: and the cache hands out no staging block for it. */
    ring_open(&g, n, 1, 1, ~0u);
    reduce_cache_stats_t before, after;
    reduce_cache_get_stats(g.cache, &before);
    run_matrix(&g, ref, NULL, "shared memory, combining");
    reduce_cache_get_stats(g.cache, &after);
    CHECK_EQ_U64(after.system_allocs, before.system_allocs);
    CHECK_EQ_U64(after.blocks_in_use, 0);
    ring_close(&g);

    /* Some peers combine, others stage (PCCL_SHM_COMBINE=0 on their receiving link). */
    ring_open(&g, n, 1, 1, 0x5u);
    run_matrix(&g, ref, NULL, "shared memory, peers 0 and 2 combining");
    ring_close(&g);

    /* Striped over 2 streams, a lane per stream: all combining, then stream 1 staging only. */
    ring_open(&g, n, 2, 1, ~0u);
    run_matrix(&g, ref, NULL, "shared memory, striped, combining");
    ring_close(&g);
    ring_open(&g, n, 2, 1, 0x55u);
    run_matrix(&g, ref, NULL, "shared memory, striped, stream 0 combining");
    ring_close(&g);

    for (int c = 0; c < NCOMBOS; c++) free(ref[c]);
}

/* ---- failures mid-op ------------------------------------------------------------------------ */

static ring_t *fail_ring;
static int fail_how; /* 0: peer 1 aborts; 1: peer 2's receiving link breaks */
static double t_fail;

static void *failer_main(void *arg) {
    (void) arg;
    usleep(15 * 1000);
    t_fail = now_s();
    if (fail_how == 0) {
        atomic_store(&fail_ring->peers[1].abort_flag, 1);
        atomic_fetch_add(&fail_ring->peers[1].doorbell, 1);
    } else {
        ccoip_datalink_break(fail_ring->peers[2].rx[0], "test: broken mid-op");
    }
    /* The master's notice reaches everyone a little later. */
    usleep(20 * 1000);
    for (uint32_t i = 0; i < fail_ring->n; i++) {
        atomic_store(&fail_ring->peers[i].abort_flag, 1);
        atomic_fetch_add(&fail_ring->peers[i].doorbell, 1);
    }
    return NULL;
}

static void fails_mid_op(int how) {
    ring_t g;
    ring_open(&g, 3, 1, 1, ~0u);
    size_t count = 8u << 20; /* 32 MiB of float: far longer than 15 ms */
    float *buf[MAXN], *out[MAXN];
    for (uint32_t r = 0; r < g.n; r++) {
        buf[r] = malloc(count * sizeof(float));
        out[r] = malloc(count * sizeof(float));
        REQUIRE(buf[r] && out[r]);
        for (size_t i = 0; i < count; i++) buf[r][i] = (float) (i % 1000) + (float) r;
        peer_t *p = &g.peers[r];
        p->sendbuf = buf[r];
        p->recvbuf = out[r];
        p->count = count;
        p->dtype = pcclFloat;
        p->op = pcclSum;
        p->poison = 1;
    }
    ring_links(&g, 8, 0, true);
    fail_ring = &g;
    fail_how = how;
    pthread_t ft;
    for (uint32_t r = 0; r < g.n; r++) REQUIRE(pthread_create(&g.peers[r].th, NULL, peer_main, &g.peers[r]) == 0);
    REQUIRE(pthread_create(&ft, NULL, failer_main, NULL) == 0);
    pthread_join(ft, NULL);
    for (uint32_t r = 0; r < g.n; r++) pthread_join(g.peers[r].th, NULL);
    for (uint32_t r = 0; r < g.n; r++) {
        peer_t *p = &g.peers[r];
        CHECK(p->rc == REDUCE_ELINK || p->rc == REDUCE_EABORTED);
        CHECK(p->t_end - t_fail < 2.0);
        CHECK(p->late_writes == 0);
        fprintf(stderr, "%s mid-op: peer %u returned %s after %.0f ms; %d bytes written after it returned\n",
                how == 0 ? "abort" : "broken link", r, reduce_strerror(p->rc), (p->t_end - t_fail) * 1e3,
                p->late_writes);
        free(buf[r]);
        free(out[r]);
    }
    ring_close(&g);
}

int main(void) {
    if (!ccoip_shm_supported()) {
        fprintf(stderr, "no shared memory on this platform: nothing to test\n");
        return check_exit();
    }
    alarm(500); /* a hang fails the test (SIGALRM) instead of waiting for Bazel's timeout */
    for (uint32_t n = 2; n <= 4; n++) matrix(n);
    fails_mid_op(0);
    fails_mid_op(1);
    return check_exit();
}
