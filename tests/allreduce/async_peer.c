/* async_peer: a PCCL peer for the async / pool / retry / quantization end-to-end tests, driven
 * line by line on stdin. Usage: async_peer MASTER_PORT IDX POOL (master on 127.0.0.1; IDX is this
 * peer's index in the test, which picks its inputs; POOL is p2p_connection_pool_size).
 *
 * Inputs are exact small values: in(idx, tag, i) (below); expected results are computed here from
 * the indices of the peers that take part (a bit mask), independently of the library.
 * Commands and the line each prints (RESULT: pcclResult_t numbers; HASH: FNV-1a of every result
 * byte of the command, so the driver compares all bytes across peers):
 *   connect | update                -> "connect R" | "update R"
 *   links                           -> "links NTX NRX" (pool streams each way)
 *   async K COUNT MASK [U [SMALL]]  -> "started" once the K ops are queued, then
 *                                      "async NFAIL FIRSTERR NBAD HASH MAXWORLD" (U=1: all float32 Sum;
 *                                      SMALL > 0: odd ops have SMALL elements, large and small mixed)
 *   misuse MASK                     -> "misuse R17 RREUSE RUPD RPEND RAWAIT NFAIL NBAD"
 *   multi K COUNT MAXIF FULL SURV [V] -> "multistart", then "multi R NBAD WORLD HASH TX NFULL NSURV"
 *                                      (each op must equal the reduction over FULL or over SURV;
 *                                      V=1: every third op has COUNT elements, the others a few
 *                                      thousand, so that small tensors of each kind are bucketed)
 *   quant SEED TRIALS NPEERS FILE   -> "quant NFAIL NBAD NCLASS NWRONG TXQ TXPLAIN" (results appended to FILE)
 *   cache                           -> "cache SYSTEM_ALLOCS" (staging blocks obtained from the system)
 *   res                             -> "res FDS THREADS"
 *   quit                            -> "bye FDS THREADS BASE_FDS BASE_THREADS" after
 *                                      pcclDestroyCommunicator (BASE: at start, before pcclInit) */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/peer/ccoip_p2p.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "pccl.h"
#include "tests/allreduce/async_quant.h"

static int idx;

static int count_dir(const char *path) {
    DIR *d = opendir(path);
    if (d == NULL) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Op j of a batch: its dtype and op (uniform: every op float32 Sum, one buffer shape). */
static bool uniform;
static pcclDataType_t kind_dtype(int j) {
    return uniform || j % 4 == 0 || j % 4 == 3 ? pcclFloat : j % 4 == 1 ? pcclInt32 : pcclDouble;
}
static pcclRedOp_t kind_op(int j) {
    return uniform ? pcclSum : j % 4 == 2 ? pcclMax : j % 4 == 3 ? pcclAvg : pcclSum;
}

static double in_val(int peer, uint64_t tag, size_t i) {
    return (double) ((peer * 31 + (int) (tag % 1000) * 17 + (int) (i % 4099)) % 64) - 32;
}

static void fill(void *buf, int j, uint64_t tag, size_t count) {
    for (size_t i = 0; i < count; i++) {
        double v = in_val(idx, tag, i);
        switch (kind_dtype(j)) {
        case pcclFloat: ((float *) buf)[i] = (float) v; break;
        case pcclInt32: ((int32_t *) buf)[i] = (int32_t) v * 1000 + idx; break;
        default: ((double *) buf)[i] = v + idx * 0.5; break;
        }
    }
}

/* Number of elements of op j that differ from the reduction over the peers in mask. */
static size_t verify(const void *buf, int j, uint64_t tag, size_t count, unsigned mask) {
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        double s = 0, mx = -1e300;
        int64_t is = 0;
        int n = 0;
        for (int p = 0; p < 32; p++) {
            if (!(mask >> p & 1)) continue;
            n++;
            double v = in_val(p, tag, i);
            s += v;
            is += (int64_t) v * 1000 + p;
            if (v + p * 0.5 > mx) mx = v + p * 0.5;
        }
        switch (kind_dtype(j)) {
        /* Avg: the float division of the exact sum, correctly rounded either way */
        case pcclFloat: bad += ((const float *) buf)[i] != (float) (kind_op(j) == pcclAvg ? s / n : s); break;
        case pcclInt32: bad += ((const int32_t *) buf)[i] != (int32_t) is; break;
        default: bad += ((const double *) buf)[i] != mx; break;
        }
    }
    return bad;
}

static pcclReduceDescriptor_t desc_of(int j, uint64_t tag, size_t count) {
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = count;
    d.op = kind_op(j);
    d.tag = tag;
    d.src_descriptor.datatype = kind_dtype(j);
    return d;
}

#define MAXK 64

/* Element count of op j: `count`, or with `small` > 0 for odd j: small (async); with `var` all
 * but every third op get a few thousand (multi). */
static size_t small_count, var_sizes;
static size_t count_of(int j, size_t count) {
    if (small_count > 0 && j % 2 == 1) return small_count;
    if (var_sizes && j % 3 != 0) return 1 + (size_t) (j * 7919) % 5000;
    return count;
}

static void do_async(pcclComm_t *comm, int k, size_t count, unsigned mask) {
    void *send[MAXK], *recv[MAXK];
    pcclAsyncReduceOp_t h[MAXK];
    pcclResult_t sub[MAXK];
    for (int j = 0; j < k; j++) {
        send[j] = malloc(count_of(j, count) * 8);
        recv[j] = malloc(count_of(j, count) * 8);
        fill(send[j], j, 100 + (uint64_t) j, count_of(j, count));
    }
    for (int j = 0; j < k; j++) { /* all at once, after the slow part */
        pcclReduceDescriptor_t d = desc_of(j, 100 + (uint64_t) j, count_of(j, count));
        sub[j] = pcclAllReduceAsync(send[j], recv[j], &d, comm, &h[j]);
    }
    printf("started\n");
    fflush(stdout);
    int nfail = 0, firsterr = 0;
    size_t nbad = 0;
    uint32_t maxworld = 0;
    uint64_t hash = 0xcbf29ce484222325ull;
    for (int j = 0; j < k; j++) {
        pcclReduceInfo_t info = {0, 0, 0};
        pcclResult_t r = sub[j] == pcclSuccess ? pcclAwaitAsyncReduce(&h[j], &info) : sub[j];
        if (r != pcclSuccess) {
            if (nfail++ == 0) firsterr = (int) r;
        } else {
            nbad += verify(recv[j], j, 100 + (uint64_t) j, count_of(j, count), mask);
            hash = fnv(hash, recv[j], count_of(j, count) * (kind_dtype(j) == pcclDouble ? 8 : 4));
            if (info.local_world_size > maxworld) maxworld = info.local_world_size;
        }
        free(send[j]);
        free(recv[j]);
    }
    printf("async %d %d %zu %016" PRIx64 " %u\n", nfail, firsterr, nbad, hash, maxworld);
}

/* Misuse while 16 ops are in flight (all peers run this, so the 16 complete in the end). */
static void do_misuse(pcclComm_t *comm, unsigned mask) {
    enum { K = 16, COUNT = 4096 };
    static float send[K][COUNT], recv[K][COUNT], extra[COUNT];
    pcclAsyncReduceOp_t h[K], hx;
    int nfail = 0;
    for (int j = 0; j < K; j++) {
        fill(send[j], 0, 200 + (uint64_t) j, COUNT);
        pcclReduceDescriptor_t d = desc_of(0, 200 + (uint64_t) j, COUNT);
        if (pcclAllReduceAsync(send[j], recv[j], &d, comm, &h[j]) != pcclSuccess) nfail++;
    }
    pcclReduceDescriptor_t d17 = desc_of(0, 300, COUNT), dreuse = desc_of(0, 200, COUNT);
    pcclResult_t r17 = pcclAllReduceAsync(extra, extra, &d17, comm, &hx);
    pcclResult_t rreuse = pcclAllReduce(extra, extra, &dreuse, comm, NULL);
    pcclResult_t rupd = pcclUpdateTopology(comm);
    bool pending;
    pcclResult_t rpend = pcclArePeersPending(comm, &pending);
    pcclAsyncReduceOp_t bogus = {comm, 999};
    pcclResult_t rawait = pcclAwaitAsyncReduce(&bogus, NULL);
    size_t nbad = 0;
    for (int j = 0; j < K; j++) {
        if (pcclAwaitAsyncReduce(&h[j], NULL) != pcclSuccess) nfail++;
        else nbad += verify(recv[j], 0, 200 + (uint64_t) j, COUNT, mask);
    }
    printf("misuse %d %d %d %d %d %d %zu\n", (int) r17, (int) rreuse, (int) rupd, (int) rpend, (int) rawait, nfail,
           nbad);
}

static void do_multi(pcclComm_t *comm, int k, size_t count, int maxif, unsigned full, unsigned surv) {
    pcclReduceOpDescriptor_t ds[MAXK];
    for (int j = 0; j < k; j++) {
        size_t c = count_of(j, count);
        ds[j].sendbuf = malloc(c * 8);
        ds[j].recvbuf = malloc(c * 8);
        fill(ds[j].sendbuf, j, 400 + (uint64_t) j, c);
        ds[j].descriptor = desc_of(j, 400 + (uint64_t) j, c);
    }
    printf("multistart\n");
    fflush(stdout);
    pcclReduceInfo_t info = {0, 0, 0};
    pcclResult_t r = pcclAllReduceMultipleWithRetry(ds, (size_t) k, comm, &info, maxif);
    size_t nbad = 0;
    int nfull = 0, nsurv = 0;
    uint64_t hash = 0xcbf29ce484222325ull;
    for (int j = 0; j < k; j++) {
        if (r == pcclSuccess) {
            size_t c = count_of(j, count);
            if (verify(ds[j].recvbuf, j, 400 + (uint64_t) j, c, full) == 0) nfull++;
            else if (verify(ds[j].recvbuf, j, 400 + (uint64_t) j, c, surv) == 0) nsurv++;
            else nbad++;
            hash = fnv(hash, ds[j].recvbuf, c * (kind_dtype(j) == pcclDouble ? 8 : 4));
        }
        free(ds[j].sendbuf);
        free(ds[j].recvbuf);
    }
    printf("multi %d %zu %u %016" PRIx64 " %" PRIu64 " %d %d\n", (int) r, nbad, info.local_world_size, hash,
           info.tx_bytes, nfull, nsurv);
}

static void *nothing(void *arg) { return arg; }

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: async_peer MASTER_PORT IDX POOL\n");
        return 2;
    }
    idx = atoi(argv[2]);
    /* Before the library starts anything. A sanitizer runtime starts a thread of its own with the
     * first pthread_create: one dummy thread first, so that it is counted in the base. */
    pthread_t dummy;
    if (pthread_create(&dummy, NULL, nothing, NULL) == 0) pthread_join(dummy, NULL);
    int base_fds = count_dir("/proc/self/fd") - 1, base_threads = count_dir("/proc/self/task");
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    params.master_address.inet.protocol = inetIPv4;
    params.master_address.inet.ipv4 = (ccoip_ipv4_address_t){{127, 0, 0, 1}};
    params.master_address.port = (uint16_t) atoi(argv[1]);
    params.p2p_connection_pool_size = (uint32_t) atoi(argv[3]);
    if (pcclInit() != pcclSuccess) return 1;
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess) return 1;
    char line[512];
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        int k, maxif, trials, npeers;
        size_t count;
        unsigned mask, full, surv, seed;
        char file[400];
        if (strcmp(line, "connect") == 0) {
            printf("connect %d\n", (int) pcclConnect(comm));
        } else if (strcmp(line, "update") == 0) {
            printf("update %d\n", (int) pcclUpdateTopology(comm));
        } else if (strcmp(line, "links") == 0) {
            ccoip_p2p_links_t l;
            ccoip_comm_links(comm, &l);
            printf("links %u %u\n", l.ntx, l.nrx);
        } else if (sscanf(line, "async %d %zu %x", &k, &count, &mask) == 3 && k > 0 && k <= MAXK) {
            int u = 0;
            sscanf(line, "async %*d %*u %*x %d %zu", &u, &small_count);
            uniform = u != 0;
            do_async(comm, k, count, mask);
            uniform = false;
            small_count = 0;
        } else if (sscanf(line, "misuse %x", &mask) == 1) {
            do_misuse(comm, mask);
        } else if (sscanf(line, "multi %d %zu %d %x %x", &k, &count, &maxif, &full, &surv) == 5 && k > 0 &&
                   k <= MAXK) {
            sscanf(line, "multi %*d %*u %*d %*x %*x %zu", &var_sizes);
            do_multi(comm, k, count, maxif, full, surv);
            var_sizes = 0;
        } else if (sscanf(line, "quant %u %d %d %399s", &seed, &trials, &npeers, file) == 4) {
            aq_result_t q = aq_run(comm, seed, trials, npeers, idx, file);
            printf("quant %d %d %d %d %" PRIu64 " %" PRIu64 "\n", q.nfail, q.nbad, q.nclass, q.nwrong, q.tx_quant,
                   q.tx_plain);
        } else if (strcmp(line, "cache") == 0) {
            reduce_cache_stats_t st;
            reduce_cache_get_stats(comm->cache, &st);
            printf("cache %" PRIu64 "\n", st.system_allocs);
        } else if (strcmp(line, "res") == 0) {
            printf("res %d %d\n", count_dir("/proc/self/fd") - 1, count_dir("/proc/self/task"));
        } else if (strcmp(line, "quit") == 0) {
            break;
        } else {
            printf("unknown %s\n", line);
        }
        fflush(stdout);
    }
    pcclDestroyCommunicator(comm);
    printf("bye %d %d %d %d\n", count_dir("/proc/self/fd") - 1, count_dir("/proc/self/task"), base_fds, base_threads);
    fflush(stdout);
    return 0;
}
