/* ss_bench: pcclSynchronizeSharedState throughput on loopback, with its baselines in the same run.
 *   shared_state/sync_256MiB, sync_1GiB   a peer with zeros fetches one tensor from a peer that
 *       holds it: bytes / wall time of the receiver's whole call (hash, election at the master,
 *       transfer straight into the tensor, re-hash); baseline: one raw TCP stream on loopback
 *       moving the same bytes between the same buffers
 *   shared_state/xxh3_ms_per_GiB          the hashing a sync adds per GiB (each side hashes its
 *       tensors; the receiver re-hashes what arrived); baseline: memcpy of one GiB
 * Master and both peers run in this process (threads). Each figure is the median of 3 runs.
 * CSV rows "name,value,unit,baseline,ratio" on stdout; progress on stderr. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ccoip/net/ccoip_socket.h"
#include "hash/hash.h"
#include "pccl.h"

#define RUNS 3

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static double median(double *v) {
    qsort(v, RUNS, sizeof *v, cmp);
    return v[RUNS / 2];
}

typedef struct peer_t {
    pcclComm_t *comm;
    pcclSharedState_t state;
    pcclTensorInfo_t info;
    pcclResult_t result;
    pcclSharedStateSyncInfo_t si;
} peer_t;

static void *connect_main(void *arg) {
    peer_t *p = arg;
    p->result = pcclConnect(p->comm);
    return NULL;
}

static void *sync_main(void *arg) {
    peer_t *p = arg;
    p->result = pcclSynchronizeSharedState(p->comm, &p->state, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &p->si);
    return NULL;
}

/* ---- raw TCP baseline: one stream, the same buffers ---- */

typedef struct tcp_job_t {
    int fd;
    unsigned char *buf;
    size_t n;
} tcp_job_t;

static void *tcp_recv_main(void *arg) {
    tcp_job_t *j = arg;
    size_t got = 0;
    while (got < j->n) {
        ssize_t k = recv(j->fd, j->buf + got, j->n - got, 0);
        if (k <= 0) break;
        got += (size_t) k;
    }
    return NULL;
}

static double tcp_once(unsigned char *src, unsigned char *dst, size_t n) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000001);
    socklen_t al = sizeof a;
    if (bind(ls, (struct sockaddr *) &a, sizeof a) != 0 || listen(ls, 1) != 0) return -1;
    getsockname(ls, (struct sockaddr *) &a, &al);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c, (struct sockaddr *) &a, sizeof a) != 0) return -1;
    int s = accept(ls, NULL, NULL);
    int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    tcp_job_t j = {s, dst, n};
    pthread_t t;
    double t0 = now_s();
    pthread_create(&t, NULL, tcp_recv_main, &j);
    size_t sent = 0;
    while (sent < n) {
        size_t chunk = n - sent < (8u << 20) ? n - sent : (8u << 20);
        ssize_t k = send(c, src + sent, chunk, MSG_NOSIGNAL);
        if (k <= 0) break;
        sent += (size_t) k;
    }
    pthread_join(t, NULL);
    double dt = now_s() - t0;
    close(c);
    close(s);
    close(ls);
    return dt;
}

static void row(const char *name, double value, const char *unit, double base) {
    printf("%s,%.3f,%s,%.3f,%.3f\n", name, value, unit, base, base > 0 ? value / base : 0.0);
    fflush(stdout);
}

int main(void) {
    if (pcclInit() != pcclSuccess) return 1;
    ccoip_socket_address_t listen;
    ccoip_parse_address("127.0.0.1", 0, &listen);
    /* The master on an ephemeral port: find it by binding first (pcclCreateMaster takes a port). */
    int probe = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in pa;
    memset(&pa, 0, sizeof pa);
    pa.sin_family = AF_INET;
    pa.sin_addr.s_addr = htonl(0x7f000001);
    socklen_t pl = sizeof pa;
    bind(probe, (struct sockaddr *) &pa, sizeof pa);
    getsockname(probe, (struct sockaddr *) &pa, &pl);
    listen.port = ntohs(pa.sin_port);
    close(probe);
    pcclMasterInstance_t *m;
    if (pcclCreateMaster(listen, &m) != pcclSuccess || pcclRunMaster(m) != pcclSuccess) return 1;

    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    params.master_address = listen;
    peer_t a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if (pcclCreateCommunicator(&params, &a.comm) != pcclSuccess || pcclCreateCommunicator(&params, &b.comm) != pcclSuccess)
        return 1;
    if (pcclConnect(a.comm) != pcclSuccess) return 1;
    pthread_t t;
    pthread_create(&t, NULL, connect_main, &b);
    /* Vote until b is in (a vote before b registered admits nobody). */
    for (int world = 1; world < 2;) {
        usleep(50000);
        pcclUpdateTopology(a.comm);
        pcclGetAttribute(a.comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &world);
    }
    pthread_join(t, NULL);
    if (b.result != pcclSuccess) return 1;

    size_t sizes[2] = {(size_t) 256 << 20, (size_t) 1 << 30};
    const char *names[2] = {"shared_state/sync_256MiB", "shared_state/sync_1GiB"};
    unsigned char *src = aligned_alloc(4096, sizes[1]), *dst = aligned_alloc(4096, sizes[1]);
    if (src == NULL || dst == NULL) return 1;
    for (size_t i = 0; i < sizes[1]; i++) src[i] = (unsigned char) (i * 131 + 7);
    memset(dst, 0, sizes[1]);
    uint64_t revision = 0;
    for (int s = 0; s < 2; s++) {
        double ss[RUNS], tcp[RUNS];
        for (int r = 0; r < RUNS; r++) {
            memset(dst, 0, sizes[s]); /* the receiver differs again */
            a.info = (pcclTensorInfo_t){"w", src, sizes[s] / 4, pcclFloat, pcclDeviceCpu, false};
            b.info = (pcclTensorInfo_t){"w", dst, sizes[s] / 4, pcclFloat, pcclDeviceCpu, false};
            /* Both current: a tie, which the earlier connected peer (a) wins. */
            a.state = (pcclSharedState_t){revision, 1, &a.info};
            b.state = (pcclSharedState_t){revision, 1, &b.info};
            pthread_create(&t, NULL, sync_main, &a);
            double t0 = now_s();
            sync_main(&b);
            ss[r] = now_s() - t0;
            pthread_join(t, NULL);
            if (a.result != pcclSuccess || b.result != pcclSuccess || b.si.rx_bytes != sizes[s] ||
                memcmp(src, dst, sizes[s]) != 0) {
                fprintf(stderr, "ss_bench: sync failed (%d/%d, rx %llu)\n", a.result, b.result,
                        (unsigned long long) b.si.rx_bytes);
                return 1;
            }
            revision++;
            memset(dst, 0, sizes[s]);
            tcp[r] = tcp_once(src, dst, sizes[s]);
            fprintf(stderr, "ss_bench: %s run %d: sync %.3f s, raw TCP %.3f s\n", names[s], r, ss[r], tcp[r]);
        }
        row(names[s], (double) sizes[s] / 1e9 / median(ss), "GB/s", (double) sizes[s] / 1e9 / median(tcp));
    }
    /* Hashing vs memcpy, per GiB. */
    double h[RUNS], c[RUNS];
    volatile uint64_t sink = 0;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_s();
        sink ^= hash_xxh3(src, sizes[1]);
        h[r] = now_s() - t0;
        t0 = now_s();
        memcpy(dst, src, sizes[1]);
        c[r] = now_s() - t0;
    }
    (void) sink;
    row("shared_state/xxh3_ms_per_GiB", median(h) * 1e3, "ms", median(c) * 1e3);
    pcclDestroyCommunicator(a.comm);
    pcclDestroyCommunicator(b.comm);
    pcclInterruptMaster(m);
    pcclMasterAwaitTermination(m);
    pcclDestroyMaster(m);
    free(src);
    free(dst);
    return 0;
}
