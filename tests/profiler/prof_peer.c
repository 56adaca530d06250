/* prof_peer: a PCCL peer for the profiler tests, driven line by line on stdin.
 * Usage: prof_peer MASTER_PORT IDX POOL. The plugin comes from the environment
 * (PCCL_PROFILER_PLUGIN / PCCL_TRACE_FILE); with libtestprof.so its verdicts are read through
 * testprof_query / testprof_coll.
 *
 * Inputs are exact small floats in(idx, tag, i); MASK is the set of peer indices taking part.
 *   connect | update | optimize -> "connect R" | "update R" | "optimize R"
 *   ar TAG COUNT MASK           -> "ar R BAD TX RX PTX PRX STX SRX PHASES" (P: the plugin's sums of
 *                                  transfer bytes; S: its Bytes state; PHASES: bit mask seen)
 *   async K TAG0 COUNT MASK     -> "async NFAIL NBAD NMISMATCH"  (K async ops at once, then await)
 *   quant TAG COUNT             -> "quant R HASH TX PTX RX PRX Q" (uint8 min-max; HASH of the result)
 *   loop N TAG0 COUNT           -> "loop NOK FIRSTERR" (N sync ops, stops at the first failure)
 *   sync VALUE BYTES            -> "sync R TX RX" (one tensor "w" of BYTES bytes, all VALUE)
 *   query                       -> "query <testprof_query>"
 *   rss                         -> "rss KB" (resident set size)
 *   quit                        -> "bye <testprof_query after destroy>" */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pccl.h"

static int idx;
static pcclComm_t *comm;
static void (*q_query)(char *, size_t);
static int (*q_coll)(uint64_t, uint64_t *);

static float in_val(int peer, uint64_t tag, size_t i) { return (float) ((peer * 7 + (int) (tag % 97) * 3 + (int) (i % 1021)) % 64) - 32; }

static size_t check(const float *out, uint64_t tag, size_t count, unsigned mask) {
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int p = 0; p < 16; p++)
            if (mask >> p & 1) want += in_val(p, tag, i);
        bad += out[i] != want;
    }
    return bad;
}

static pcclReduceDescriptor_t desc(uint64_t tag, size_t count) {
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = count;
    d.op = pcclSum;
    d.tag = tag;
    d.src_descriptor.datatype = pcclFloat;
    return d;
}

static void bind_plugin(void) {
    const char *path = getenv("PCCL_PROFILER_PLUGIN");
    if (path != NULL && strcmp(path, "STATIC_PLUGIN") == 0) { /* prof_peer_static: linked in */
        q_query = (void (*)(char *, size_t)) dlsym(RTLD_DEFAULT, "testprof_query");
        q_coll = (int (*)(uint64_t, uint64_t *)) dlsym(RTLD_DEFAULT, "testprof_coll");
        return;
    }
    if (path == NULL || strchr(path, '/') == NULL) return;
    void *dl = dlopen(path, RTLD_NOW | RTLD_NOLOAD); /* our own reference: survives its dlclose */
    if (dl == NULL) return;
    q_query = (void (*)(char *, size_t)) dlsym(dl, "testprof_query");
    q_coll = (int (*)(uint64_t, uint64_t *)) dlsym(dl, "testprof_coll");
}

static void query(char *out, size_t n) {
    if (q_query) q_query(out, n);
    else snprintf(out, n, "none");
}

static uint64_t fnv(const void *p, size_t n) {
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    setvbuf(stdout, NULL, _IOLBF, 0);
    int port = atoi(argv[1]);
    idx = atoi(argv[2]);
    pcclInit();
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    params.master_address.inet.protocol = inetIPv4;
    params.master_address.inet.ipv4.data[0] = 127;
    params.master_address.inet.ipv4.data[3] = 1;
    params.master_address.port = (uint16_t) port;
    params.p2p_connection_pool_size = (uint32_t) atoi(argv[3]);
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess) return 3;
    bind_plugin();
    char line[512], q[512];
    while (fgets(line, sizeof line, stdin) != NULL) {
        unsigned long long a = 0, b = 0, c = 0, d4 = 0;
        if (strncmp(line, "connect", 7) == 0) {
            printf("connect %d\n", (int) pcclConnect(comm));
        } else if (strncmp(line, "optimize", 8) == 0) {
            printf("optimize %d\n", (int) pcclOptimizeTopology(comm));
        } else if (strncmp(line, "update", 6) == 0) {
            printf("update %d\n", (int) pcclUpdateTopology(comm));
        } else if (sscanf(line, "ar %llu %llu %llx", &a, &b, &c) == 3) {
            float *in = malloc(b * 4), *out = malloc(b * 4);
            for (size_t i = 0; i < b; i++) in[i] = in_val(idx, a, i);
            pcclReduceDescriptor_t d = desc(a, b);
            pcclReduceInfo_t info;
            memset(&info, 0, sizeof info);
            int r = (int) pcclAllReduce(in, out, &d, comm, &info);
            uint64_t pc[6] = {0};
            if (q_coll) q_coll(a, pc);
            printf("ar %d %zu %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", r,
                   r == 0 ? check(out, a, b, (unsigned) c) : 0, info.tx_bytes, info.rx_bytes, pc[0], pc[1], pc[2],
                   pc[3], pc[4]);
            free(in);
            free(out);
        } else if (sscanf(line, "async %llu %llu %llu %llx", &a, &b, &c, &d4) == 4) {
            size_t k = a, count = c;
            float *in = malloc(k * count * 4), *out = malloc(k * count * 4);
            pcclAsyncReduceOp_t h[16];
            int nfail = 0, nbad = 0, nmis = 0;
            for (size_t j = 0; j < k && j < 16; j++) {
                for (size_t i = 0; i < count; i++) in[j * count + i] = in_val(idx, b + j, i);
                pcclReduceDescriptor_t d = desc(b + j, count);
                if (pcclAllReduceAsync(in + j * count, out + j * count, &d, comm, &h[j]) != pcclSuccess) nfail++;
            }
            for (size_t j = 0; j < k && j < 16; j++) {
                pcclReduceInfo_t info;
                memset(&info, 0, sizeof info);
                if (pcclAwaitAsyncReduce(&h[j], &info) != pcclSuccess) {
                    nfail++;
                    continue;
                }
                nbad += check(out + j * count, b + j, count, (unsigned) d4) != 0;
                uint64_t pc[6] = {0};
                if (q_coll) q_coll(b + j, pc);
                nmis += pc[0] != info.tx_bytes || pc[1] != info.rx_bytes || pc[2] != info.tx_bytes ||
                        pc[3] != info.rx_bytes || pc[4] != 31;
            }
            printf("async %d %d %d\n", nfail, nbad, nmis);
            free(in);
            free(out);
        } else if (sscanf(line, "quant %llu %llu", &a, &b) == 2) {
            float *in = malloc(b * 4), *out = malloc(b * 4);
            for (size_t i = 0; i < b; i++) in[i] = in_val(idx, a, i) * 0.37f;
            pcclReduceDescriptor_t d = desc(a, b);
            d.quantization_options.quantized_datatype = pcclUint8;
            d.quantization_options.algorithm = pcclQuantMinMax;
            pcclReduceInfo_t info;
            memset(&info, 0, sizeof info);
            int r = (int) pcclAllReduce(in, out, &d, comm, &info);
            uint64_t pc[6] = {0};
            if (q_coll) q_coll(a, pc);
            printf("quant %d %016" PRIx64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", r,
                   fnv(out, b * 4), info.tx_bytes, pc[0], info.rx_bytes, pc[1], pc[5] & 0xff);
            free(in);
            free(out);
        } else if (sscanf(line, "loop %llu %llu %llu", &a, &b, &c) == 3) {
            float *in = malloc(c * 4), *out = malloc(c * 4);
            unsigned long long ok = 0;
            int first = 0;
            for (unsigned long long j = 0; j < a; j++) {
                for (size_t i = 0; i < c; i++) in[i] = in_val(idx, b + j, i);
                pcclReduceDescriptor_t d = desc(b + j, c);
                int r = (int) pcclAllReduce(in, out, &d, comm, NULL);
                if (r != 0) {
                    first = r;
                    break;
                }
                ok++;
            }
            printf("loop %llu %d\n", ok, first);
            free(in);
            free(out);
        } else if (sscanf(line, "sync %llu %llu", &a, &b) == 2) {
            unsigned char *w = malloc(b);
            memset(w, (int) a, b);
            pcclTensorInfo_t t = {"w", w, b, pcclUint8, pcclDeviceCpu, false};
            pcclSharedState_t st = {1, 1, &t};
            pcclSharedStateSyncInfo_t si = {0, 0};
            int r = (int) pcclSynchronizeSharedState(comm, &st, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &si);
            size_t bad = 0;
            for (size_t i = 0; i < b; i++) bad += w[i] != w[0];
            printf("sync %d %" PRIu64 " %" PRIu64 " %zu %u\n", r, si.tx_bytes, si.rx_bytes, bad, (unsigned) w[0]);
            free(w);
        } else if (strncmp(line, "query", 5) == 0) {
            query(q, sizeof q);
            printf("query %s\n", q);
        } else if (strncmp(line, "rss", 3) == 0) {
            FILE *f = fopen("/proc/self/statm", "r");
            long pages = 0, res = 0;
            if (f != NULL) {
                if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
                fclose(f);
            }
            printf("rss %ld\n", res * 4);
        } else if (strncmp(line, "quit", 4) == 0) {
            pcclDestroyCommunicator(comm);
            comm = NULL;
            query(q, sizeof q);
            printf("bye %s\n", q);
            return 0;
        } else {
            printf("unknown\n");
        }
    }
    if (comm) pcclDestroyCommunicator(comm);
    return 0;
}
