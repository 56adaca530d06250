/* The data link under the ring all-reduce: N peers on threads, each pair of neighbours joined
 * by a real loopback TCP connection, every byte checked; broken peers, aborts, malformed frames
 * and late frames of cancelled collectives. The rings run twice: over TCP (PCCL_SHM=0) and over
 * the shared-memory pipes the links agree on by themselves (checked: every link switched). */
#include <arpa/inet.h>
#include <dirent.h>
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
#include "reduce/reduce.h"
#include "tests/common/check.h"
#include "tests/common/clock.h"
#include "tests/datalink/tcp_pair.h"

#define MAXN 8

typedef struct peer {
    reduce_ring_params_t params;
    ccoip_datalink_t *tx, *rx;
    int tx_fd, rx_fd;
    _Atomic uint32_t abort_flag, doorbell;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    pcclDataType_t dtype;
    pcclRedOp_t op;
    int rc;
    double t_end;
    reduce_ring_stats_t stats;
    pthread_t th;
} peer_t;

/* Rings send by reference (vmsplice) in main's second pass, by copy in its first. */
static int rings_by_reference;
/* The links of this pass switch to shared memory (PCCL_SHM unset on Linux). */
static int rings_shm;
/* Off for rings whose peers are killed: a link may die before its handshake ends. */
static int ring_check_transport = 1;

/* Which directions of dl run over shared memory, once its handshake has ended (5 s at most). */
static void link_shm(ccoip_datalink_t *dl, bool *tx, bool *rx) {
    for (int i = 0; i < 500 && !ccoip_datalink_shm(dl, tx, rx); i++) usleep(10 * 1000);
    CHECK(ccoip_datalink_shm(dl, tx, rx));
}

typedef struct ring {
    uint32_t n;
    peer_t peers[MAXN];
    reduce_cache_t *cache;
} ring_t;

static void ring_open(ring_t *g, uint32_t n) {
    memset(g, 0, sizeof *g);
    g->n = n;
    g->cache = reduce_cache_create();
    for (uint32_t i = 0; i < n; i++) tcp_pair(&g->peers[i].tx_fd, &g->peers[(i + 1) % n].rx_fd);
    for (uint32_t i = 0; i < n; i++) {
        peer_t *p = &g->peers[i];
        p->tx = ccoip_datalink_start(p->tx_fd, "tx", NULL);
        p->rx = ccoip_datalink_start(p->rx_fd, "rx", NULL);
        REQUIRE(p->tx && p->rx);
        p->params = (reduce_ring_params_t){.rank = i, .world_size = n, .next = ccoip_datalink_link(p->tx),
                                           .prev = ccoip_datalink_link(p->rx), .tag = 1, .cache = g->cache,
                                           .abort_flag = &p->abort_flag, .doorbell = &p->doorbell,
                                           .send_by_reference = rings_by_reference};
    }
}

static void ring_close(ring_t *g) {
    for (uint32_t i = 0; i < g->n && ring_check_transport; i++) {
        /* The ring's direction of every link: shared memory in the shm pass, TCP otherwise; the
         * reverse direction carried nothing, so it never offered. */
        bool tx, rx, ptx, prx;
        link_shm(g->peers[i].tx, &tx, &rx);
        link_shm(g->peers[(i + 1) % g->n].rx, &ptx, &prx);
        CHECK(tx == (rings_shm != 0) && prx == (rings_shm != 0) && !rx && !ptx);
    }
    for (uint32_t i = 0; i < g->n; i++) {
        ccoip_datalink_stop(g->peers[i].tx);
        ccoip_datalink_stop(g->peers[i].rx);
        close(g->peers[i].tx_fd);
        close(g->peers[i].rx_fd);
    }
    reduce_cache_destroy(g->cache);
}

static void *peer_main(void *arg) {
    peer_t *p = arg;
    p->rc = reduce_ring_allreduce(&p->params, p->sendbuf, p->recvbuf, p->count, p->dtype, p->op, &p->stats);
    p->t_end = now_s();
    return NULL;
}

static void ring_run(ring_t *g) {
    for (uint32_t i = 0; i < g->n; i++) REQUIRE(pthread_create(&g->peers[i].th, NULL, peer_main, &g->peers[i]) == 0);
    for (uint32_t i = 0; i < g->n; i++) pthread_join(g->peers[i].th, NULL);
}

/* int32 Sum and uint64 Max, sendbuf != recvbuf and sendbuf == recvbuf: exact values. */
static void exact_results(uint32_t n, size_t count, int in_place) {
    ring_t g;
    ring_open(&g, n);
    int32_t *in[MAXN], *out[MAXN];
    for (uint32_t r = 0; r < n; r++) {
        in[r] = malloc(count * sizeof(int32_t));
        out[r] = in_place ? in[r] : malloc(count * sizeof(int32_t));
        for (size_t i = 0; i < count; i++) in[r][i] = (int32_t) (i * 7 + r * 1000003u) ^ (int32_t) (r << 20);
        g.peers[r].sendbuf = in[r];
        g.peers[r].recvbuf = out[r];
        g.peers[r].count = count;
        g.peers[r].dtype = pcclInt32;
        g.peers[r].op = pcclSum;
    }
    int32_t *expect = malloc(count * sizeof(int32_t));
    for (size_t i = 0; i < count; i++) {
        uint32_t s = 0;
        for (uint32_t r = 0; r < n; r++) s += (uint32_t) ((int32_t) (i * 7 + r * 1000003u) ^ (int32_t) (r << 20));
        expect[i] = (int32_t) s;
    }
    ring_run(&g);
    for (uint32_t r = 0; r < n; r++) {
        CHECK(g.peers[r].rc == REDUCE_OK);
        CHECK(memcmp(out[r], expect, count * sizeof(int32_t)) == 0);
        /* Every byte leaves once per step of both phases: 2 (n-1)/n of the buffer, by chunk. */
        uint64_t tx = 0;
        for (uint32_t t = 0; t < 2 * n - 2; t++) {
            size_t start, len;
            reduce_ring_chunk(count, 4, n, (r + 2 * n - 1 - t) % n, &start, &len);
            tx += len;
        }
        CHECK_EQ_U64(g.peers[r].stats.tx_bytes, tx);
    }
    for (uint32_t r = 0; r < n; r++) {
        if (!in_place) free(out[r]);
        free(in[r]);
    }
    free(expect);
    ring_close(&g);
}

/* float Sum over 16 MiB: every peer ends with the same bits. */
static void float_identical(uint32_t n) {
    ring_t g;
    ring_open(&g, n);
    size_t count = 4u << 20;
    float *in[MAXN], *out[MAXN];
    for (uint32_t r = 0; r < n; r++) {
        in[r] = malloc(count * sizeof(float));
        out[r] = malloc(count * sizeof(float));
        for (size_t i = 0; i < count; i++) in[r][i] = (float) ((i * 2654435761u + r * 40503u) % 100003) / 7.0f;
        g.peers[r] = (peer_t){.params = g.peers[r].params, .tx = g.peers[r].tx, .rx = g.peers[r].rx,
                              .tx_fd = g.peers[r].tx_fd, .rx_fd = g.peers[r].rx_fd};
        g.peers[r].params.abort_flag = &g.peers[r].abort_flag;
        g.peers[r].params.doorbell = &g.peers[r].doorbell;
        g.peers[r].sendbuf = in[r];
        g.peers[r].recvbuf = out[r];
        g.peers[r].count = count;
        g.peers[r].dtype = pcclFloat;
        g.peers[r].op = pcclAvg;
    }
    ring_run(&g);
    for (uint32_t r = 0; r < n; r++) {
        CHECK(g.peers[r].rc == REDUCE_OK);
        CHECK(memcmp(out[r], out[0], count * sizeof(float)) == 0);
    }
    /* Spot-check values against a direct average (the ring's order differs: tolerance). */
    int close_enough = 1;
    for (size_t i = 0; i < count; i += 4099) {
        double s = 0;
        for (uint32_t r = 0; r < n; r++) s += in[r][i];
        double d = s / n - out[0][i];
        if (d > 1e-3 || d < -1e-3) close_enough = 0;
    }
    CHECK(close_enough);
    for (uint32_t r = 0; r < n; r++) {
        free(in[r]);
        free(out[r]);
    }
    ring_close(&g);
}

typedef struct killer {
    ring_t *g;
    uint32_t victim;
    int raise_abort; /* also raise every survivor's abort flag, as the master's notice would */
    double t_kill;
} killer_t;

static void *killer_main(void *arg) {
    killer_t *k = arg;
    usleep(20 * 1000);
    peer_t *v = &k->g->peers[k->victim];
    k->t_kill = now_s();
    /* The victim's process dies: its sockets go down and its ring call stops. */
    atomic_store(&v->abort_flag, 1);
    shutdown(v->tx_fd, SHUT_RDWR);
    shutdown(v->rx_fd, SHUT_RDWR);
    if (k->raise_abort) {
        for (uint32_t i = 0; i < k->g->n; i++) {
            atomic_store(&k->g->peers[i].abort_flag, 1);
            atomic_fetch_add(&k->g->peers[i].doorbell, 1);
        }
    }
    return NULL;
}

/* A peer dies mid-ring; everyone returns an error promptly. Without the master's notice only the
 * dead peer's neighbours notice (a broken socket); with it, everyone does (and the poll of the
 * abort flag finds it even without a doorbell ring). */
static void peer_dies(uint32_t n, int raise_abort) {
    ring_t g;
    ring_open(&g, n);
    size_t count = 64u << 20; /* 256 MiB of int32 per peer: far longer than 20 ms on loopback */
    count /= 4;
    void *bufs[MAXN];
    for (uint32_t r = 0; r < n; r++) {
        bufs[r] = calloc(count, sizeof(int32_t));
        REQUIRE(bufs[r]);
        g.peers[r].sendbuf = g.peers[r].recvbuf = bufs[r];
        g.peers[r].count = count;
        g.peers[r].dtype = pcclInt32;
        g.peers[r].op = pcclSum;
    }
    killer_t k = {.g = &g, .victim = 1, .raise_abort = raise_abort};
    pthread_t kt;
    for (uint32_t r = 0; r < n; r++) REQUIRE(pthread_create(&g.peers[r].th, NULL, peer_main, &g.peers[r]) == 0);
    REQUIRE(pthread_create(&kt, NULL, killer_main, &k) == 0);
    pthread_join(kt, NULL);
    /* The victim and its two neighbours (0 and 2) notice by themselves: a broken socket. */
    for (uint32_t r = 0; r < 3; r++) pthread_join(g.peers[r].th, NULL);
    if (!raise_abort) {
        /* Peer 3 only learns from the master's notice: send it now, late. */
        usleep(50 * 1000);
        atomic_store(&g.peers[3].abort_flag, 1);
    }
    pthread_join(g.peers[3].th, NULL);
    for (uint32_t r = 0; r < n; r++) {
        CHECK(g.peers[r].rc == REDUCE_ELINK || g.peers[r].rc == REDUCE_EABORTED);
        if (r < 3 || raise_abort) CHECK(g.peers[r].t_end - k.t_kill < 2.0);
    }
    for (uint32_t r = 0; r < n; r++) free(bufs[r]);
    ring_check_transport = 0;
    ring_close(&g);
    ring_check_transport = 1;
}

/* A raw socket feeds one data link. */
typedef struct raw {
    int raw_fd, link_fd;
    ccoip_datalink_t *dl;
    _Atomic uint32_t doorbell;
} raw_t;

static void raw_open(raw_t *t) {
    memset(t, 0, sizeof *t);
    setenv("PCCL_SHM", "0", 1); /* the raw end speaks frames only: no shared memory offer to it */
    tcp_pair(&t->raw_fd, &t->link_fd);
    t->dl = ccoip_datalink_start(t->link_fd, "raw", NULL);
    REQUIRE(t->dl);
    unsetenv("PCCL_SHM");
}

static void raw_close(raw_t *t) {
    ccoip_datalink_stop(t->dl);
    close(t->raw_fd);
    close(t->link_fd);
}

static void raw_frame(raw_t *t, uint64_t tag, uint64_t offset, uint32_t len, const void *payload, size_t plen) {
    uint8_t h[20];
    for (int i = 0; i < 8; i++) h[i] = (uint8_t) (tag >> (56 - 8 * i));
    for (int i = 0; i < 8; i++) h[8 + i] = (uint8_t) (offset >> (56 - 8 * i));
    for (int i = 0; i < 4; i++) h[16 + i] = (uint8_t) (len >> (24 - 8 * i));
    REQUIRE(write(t->raw_fd, h, sizeof h) == (ssize_t) sizeof h);
    if (plen) REQUIRE(write(t->raw_fd, payload, plen) == (ssize_t) plen);
}

static uint32_t wait_state(raw_t *t, reduce_req_t *req) {
    double deadline = now_s() + 5.0;
    while (atomic_load(&req->state) == REDUCE_REQ_PENDING && now_s() < deadline) {
        uint32_t seen = atomic_load(&t->doorbell);
        if (atomic_load(&req->state) != REDUCE_REQ_PENDING) break;
        ccoip_datalink_link(t->dl).ops->wait(t->dl, &t->doorbell, seen, 10000);
    }
    return atomic_load(&req->state);
}

static void malformed_frames(void) {
    reduce_link_t link;
    uint8_t buf[64], payload[64];
    memset(payload, 0xAB, sizeof payload);

    /* A frame that does not match the receive posted for its tag: the receive fails, no byte lands. */
    raw_t t;
    raw_open(&t);
    link = ccoip_datalink_link(t.dl);
    reduce_req_t req = {.doorbell = &t.doorbell};
    memset(buf, 0, sizeof buf);
    REQUIRE(link.ops->post_recv(link.ctx, 7, 0, buf, 32, &req) == 0);
    raw_frame(&t, 7, 16, 32, payload, 32);
    CHECK(wait_state(&t, &req) == REDUCE_REQ_FAILED);
    CHECK(buf[0] == 0 && buf[31] == 0);
    CHECK(ccoip_datalink_broken(t.dl));
    reduce_req_t later = {.doorbell = &t.doorbell};
    CHECK(link.ops->post_recv(link.ctx, 8, 0, buf, 32, &later) == -1);
    raw_close(&t);

    /* A 4 GiB - 1 length: refused before reading, the pending receive fails. */
    raw_open(&t);
    link = ccoip_datalink_link(t.dl);
    req = (reduce_req_t){.doorbell = &t.doorbell};
    REQUIRE(link.ops->post_recv(link.ctx, 1, 0, buf, 32, &req) == 0);
    raw_frame(&t, 1, 0, 0xFFFFFFFFu, NULL, 0);
    CHECK(wait_state(&t, &req) == REDUCE_REQ_FAILED);
    raw_close(&t);

    /* Garbage bytes: whatever they decode to, the link fails cleanly. */
    raw_open(&t);
    link = ccoip_datalink_link(t.dl);
    req = (reduce_req_t){.doorbell = &t.doorbell};
    REQUIRE(link.ops->post_recv(link.ctx, 1, 0, buf, 32, &req) == 0);
    uint8_t junk[40];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t) (i * 37 + 11);
    REQUIRE(write(t.raw_fd, junk, sizeof junk) == (ssize_t) sizeof junk);
    shutdown(t.raw_fd, SHUT_WR);
    CHECK(wait_state(&t, &req) == REDUCE_REQ_FAILED);
    raw_close(&t);

    /* A late frame of a cancelled collective is dropped; the next collective's frame lands. */
    raw_open(&t);
    link = ccoip_datalink_link(t.dl);
    reduce_req_t dropped = {.doorbell = &t.doorbell};
    REQUIRE(link.ops->post_recv(link.ctx, 5, 0, buf, 32, &dropped) == 0);
    link.ops->cancel(link.ctx, 5);
    req = (reduce_req_t){.doorbell = &t.doorbell};
    memset(buf, 0, sizeof buf);
    REQUIRE(link.ops->post_recv(link.ctx, 6, 32, buf + 32, 16, &req) == 0);
    raw_frame(&t, 5, 0, 32, payload, 32);
    raw_frame(&t, 6, 32, 16, payload, 16);
    CHECK(wait_state(&t, &req) == REDUCE_REQ_DONE);
    CHECK(atomic_load(&dropped.state) == REDUCE_REQ_PENDING);
    CHECK(buf[0] == 0 && buf[32] == 0xAB && buf[47] == 0xAB && buf[48] == 0);
    CHECK(!ccoip_datalink_broken(t.dl));
    raw_close(&t);
}

static int open_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    REQUIRE(d);
    int n = 0;
    while (readdir(d) != NULL) n++;
    closedir(d);
    return n;
}

/* Reads exactly len bytes from fd. */
static void read_exact(int fd, void *buf, size_t len) {
    for (size_t got = 0; got < len;) {
        ssize_t n = read(fd, (char *) buf + got, len - got);
        REQUIRE(n > 0);
        got += (size_t) n;
    }
}

/* One 8 MiB frame sent by reference arrives whole, behind its header; the pipe behind it is
 * the only descriptor the link adds (none with PCCL_SEND_SPLICE=0), and stop closes it. */
static void one_frame_by_reference(int splice_on) {
    if (!splice_on) setenv("PCCL_SEND_SPLICE", "0", 1);
    const size_t len = 8u << 20;
    uint8_t *src = malloc(len), *got = malloc(len + 20);
    REQUIRE(src && got);
    for (size_t i = 0; i < len; i++) src[i] = (uint8_t) (i * 131 + (i >> 13));
    raw_t t;
    raw_open(&t);
    int fds = open_fds();
    reduce_link_t link = ccoip_datalink_link(t.dl);
    reduce_req_t req = {.doorbell = &t.doorbell, .flags = REDUCE_SEND_BY_REFERENCE};
    REQUIRE(link.ops->post_send(link.ctx, 9, 4096, src, len, &req) == 0);
    read_exact(t.raw_fd, got, len + 20);
    CHECK(wait_state(&t, &req) == REDUCE_REQ_DONE);
    CHECK(got[7] == 9 && got[14] == 0x10 && got[15] == 0 && got[17] == 0x80);
    CHECK(memcmp(got + 20, src, len) == 0);
#ifdef __linux__
    CHECK(open_fds() == fds + (splice_on ? 2 : 0));
#endif
    raw_close(&t);
    CHECK(open_fds() == fds - 2);
    free(src);
    free(got);
    unsetenv("PCCL_SEND_SPLICE");
}

/* The receiver is gone: a send by reference fails, and the process lives (splice raises
 * SIGPIPE, which this thread does not block). */
static void send_by_reference_to_closed_peer(void) {
    const size_t len = 16u << 20;
    uint8_t *src = calloc(1, len);
    REQUIRE(src);
    raw_t t;
    raw_open(&t);
    close(t.raw_fd);
    t.raw_fd = -1;
    reduce_link_t link = ccoip_datalink_link(t.dl);
    reduce_req_t req = {.doorbell = &t.doorbell, .flags = REDUCE_SEND_BY_REFERENCE};
    if (link.ops->post_send(link.ctx, 1, 0, src, len, &req) == 0) CHECK(wait_state(&t, &req) == REDUCE_REQ_FAILED);
    CHECK(ccoip_datalink_broken(t.dl));
    raw_close(&t);
    free(src);
}

int main(void) {
    for (int pass = 0; pass < 4; pass++) {
        rings_by_reference = pass & 1;
        rings_shm = (pass >> 1) && ccoip_shm_supported();
        if (pass >> 1) unsetenv("PCCL_SHM");
        else setenv("PCCL_SHM", "0", 1);
        for (uint32_t n = 2; n <= 4; n++) {
            exact_results(n, 1, 0);
            exact_results(n, n - 1, 0);
            exact_results(n, 1000003, 0);
            exact_results(n, 65537, 1);
        }
        exact_results(8, 3u << 20, 0);
        exact_results(8, 3u << 20, 1);
        float_identical(3);
        peer_dies(4, 1);
        peer_dies(4, 0);
    }
    unsetenv("PCCL_SHM");
    malformed_frames();
    one_frame_by_reference(1);
    one_frame_by_reference(0);
    send_by_reference_to_closed_peer();
    return check_exit();
}
