/* compat_peer: a peer that calls the public API as PCCL's own programs do, driven line by line
 * on stdin (tests/compat). Only pccl.h: what a PCCL program has.
 *   compat_peer MASTER_HOST:PORT SEED [POOL]
 * Element k of every all-reduce input is SEED * (k % 13) (float32, exact), so the sum over the
 * peers that took part is SEEDSUM * (k % 13). Commands and answers (RESULT: pcclResult_t):
 *   connect                        -> "connect RESULT"
 *   update                         -> "update RESULT"
 *   pending                        -> "pending RESULT 0|1"
 *   world                          -> "world GLOBAL GROUP"
 *   ar TAG COUNT SEEDSUM           -> "ar RESULT WORLD BAD"       pcclAllReduce
 *   arasync TAG COUNT              -> "arasync RESULT"            pcclAllReduceAsync (slot TAG % 8)
 *   await TAG SEEDSUM              -> "await RESULT WORLD BAD"    pcclAwaitAsyncReduce
 *   retry TAG COUNT SEEDSUM MAX    -> "retry RESULT TRIES WORLD BAD"  pcclAllReduce until it
 *                                     succeeds, at most MAX times, 20 ms apart (PCCL's retry helpers)
 *   multi N COUNT SEEDSUM          -> "multi RESULT WORLD BAD"    pcclAllReduceMultipleWithRetry
 *                                     over N tensors of COUNT (tags 100..), 4 in flight
 *   quit                           -> "bye"
 * BAD counts result elements other than SEEDSUM * (k % 13) (0 unless RESULT is success). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pccl.h"

#define SLOTS 8
#define MAX_MULTI 16

static float seed;
static float *in[SLOTS], *out[SLOTS];
static size_t counts[SLOTS];
static pcclAsyncReduceOp_t handles[SLOTS];

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Buffers of slot s for count elements, input filled, output poisoned. */
static void prepare(int s, size_t count) {
    if (counts[s] != count) {
        free(in[s]);
        free(out[s]);
        in[s] = malloc(count * sizeof(float));
        out[s] = malloc(count * sizeof(float));
        counts[s] = count;
    }
    for (size_t k = 0; k < count; k++) in[s][k] = seed * (float) (k % 13), out[s][k] = -1.0f;
}

static size_t bad_of(int s, float seedsum) {
    size_t bad = 0;
    for (size_t k = 0; k < counts[s]; k++) bad += out[s][k] != seedsum * (float) (k % 13);
    return bad;
}

static pcclReduceDescriptor_t sum_of(unsigned long long tag, size_t count) {
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = count;
    d.op = pcclSum;
    d.tag = tag;
    d.src_descriptor.datatype = pcclFloat;
    d.quantization_options.quantized_datatype = pcclFloat;
    return d;
}

static void world(const pcclComm_t *comm, int *global, int *group) {
    pcclGetAttribute(comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, global);
    pcclGetAttribute(comm, PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE, group);
}

static void multi(pcclComm_t *comm, unsigned n, size_t count, float seedsum) {
    static pcclReduceOpDescriptor_t d[MAX_MULTI];
    if (n > MAX_MULTI) n = MAX_MULTI;
    float *bufs[MAX_MULTI];
    for (unsigned i = 0; i < n; i++) {
        bufs[i] = malloc(count * sizeof(float));
        for (size_t k = 0; k < count; k++) bufs[i][k] = seed * (float) (k % 13);
        d[i].sendbuf = bufs[i];
        d[i].recvbuf = bufs[i];
        d[i].descriptor = sum_of(100 + i, count);
    }
    pcclReduceInfo_t info;
    memset(&info, 0, sizeof info);
    pcclResult_t r = pcclAllReduceMultipleWithRetry(d, n, comm, &info, 4);
    size_t bad = 0;
    for (unsigned i = 0; i < n; i++) {
        for (size_t k = 0; k < count && r == pcclSuccess; k++) bad += bufs[i][k] != seedsum * (float) (k % 13);
        free(bufs[i]);
    }
    printf("multi %d %u %zu\n", (int) r, info.local_world_size, bad);
}

int main(int argc, char **argv) {
    unsigned a, b, c, e, port;
    if (argc < 3 || sscanf(argv[1], "%u.%u.%u.%u:%u", &a, &b, &c, &e, &port) != 5) {
        fprintf(stderr, "usage: compat_peer MASTER_IP:PORT SEED [POOL]\n");
        return 2;
    }
    seed = (float) atof(argv[2]);
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    params.master_address.inet.protocol = inetIPv4;
    params.master_address.inet.ipv4.data[0] = (uint8_t) a;
    params.master_address.inet.ipv4.data[1] = (uint8_t) b;
    params.master_address.inet.ipv4.data[2] = (uint8_t) c;
    params.master_address.inet.ipv4.data[3] = (uint8_t) e;
    params.master_address.port = (uint16_t) port;
    params.p2p_connection_pool_size = argc > 3 ? (uint32_t) atoi(argv[3]) : 0;
    pcclComm_t *comm;
    if (pcclInit() != pcclSuccess || pcclCreateCommunicator(&params, &comm) != pcclSuccess) return 1;
    char line[256];
    while (fgets(line, sizeof line, stdin) != NULL) {
        unsigned long long tag = 0, count = 0, max = 0;
        float seedsum = 0;
        int global = 0, group = 0;
        pcclReduceInfo_t info;
        memset(&info, 0, sizeof info);
        if (strncmp(line, "connect", 7) == 0) {
            printf("connect %d\n", (int) pcclConnect(comm));
        } else if (strncmp(line, "update", 6) == 0) {
            printf("update %d\n", (int) pcclUpdateTopology(comm));
        } else if (strncmp(line, "pending", 7) == 0) {
            bool pending = false;
            pcclResult_t r = pcclArePeersPending(comm, &pending);
            printf("pending %d %d\n", (int) r, (int) pending);
        } else if (strncmp(line, "world", 5) == 0) {
            world(comm, &global, &group);
            printf("world %d %d\n", global, group);
        } else if (sscanf(line, "ar %llu %llu %f", &tag, &count, &seedsum) == 3) {
            int s = (int) (tag % SLOTS);
            prepare(s, count);
            pcclReduceDescriptor_t d = sum_of(tag, count);
            pcclResult_t r = pcclAllReduce(in[s], out[s], &d, comm, &info);
            printf("ar %d %u %zu\n", (int) r, info.local_world_size, r == pcclSuccess ? bad_of(s, seedsum) : 0);
        } else if (sscanf(line, "arasync %llu %llu", &tag, &count) == 2) {
            int s = (int) (tag % SLOTS);
            prepare(s, count);
            pcclReduceDescriptor_t d = sum_of(tag, count);
            printf("arasync %d\n", (int) pcclAllReduceAsync(in[s], out[s], &d, comm, &handles[s]));
        } else if (sscanf(line, "await %llu %f", &tag, &seedsum) == 2) {
            int s = (int) (tag % SLOTS);
            pcclResult_t r = pcclAwaitAsyncReduce(&handles[s], &info);
            printf("await %d %u %zu\n", (int) r, info.local_world_size, r == pcclSuccess ? bad_of(s, seedsum) : 0);
        } else if (sscanf(line, "retry %llu %llu %f %llu", &tag, &count, &seedsum, &max) == 4) {
            int s = (int) (tag % SLOTS);
            pcclReduceDescriptor_t d = sum_of(tag, count);
            pcclResult_t r = pcclInternalError;
            unsigned long long tries = 0;
            while (tries < max && r != pcclSuccess) {
                if (tries++ > 0) sleep_ms(20);
                prepare(s, count);
                r = pcclAllReduce(in[s], out[s], &d, comm, &info);
            }
            printf("retry %d %llu %u %zu\n", (int) r, tries, info.local_world_size,
                   r == pcclSuccess ? bad_of(s, seedsum) : 0);
        } else if (sscanf(line, "multi %llu %llu %f", &tag, &count, &seedsum) == 3) {
            multi(comm, (unsigned) tag, count, seedsum);
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        } else {
            printf("unknown %s", line);
        }
        fflush(stdout);
    }
    pcclDestroyCommunicator(comm);
    for (int s = 0; s < SLOTS; s++) free(in[s]), free(out[s]);
    printf("bye\n");
    fflush(stdout);
    return 0;
}
