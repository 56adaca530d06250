/* sec_peer: a peer for the security tests, driven over stdin, one answer line per command.
 *   usage: sec_peer MASTER_PORT   (the run secret from PCCL_SECRET_FILE, or `secret`)
 *   secret TEXT      -> "secret R"                 pcclSetSecret with TEXT's bytes
 *   connect          -> "connect R P2P SS BENCH UUID" (ports and UUID in hex after success)
 *   update           -> "update R"
 *   ar COUNT K N     -> "ar R BAD": sum all-reduce of uint32; peer K contributes (i*7 + K*13) % 1001,
 *                       BAD counts elements that differ from the sum over K = 0..N-1
 *   arf COUNT K      -> "arf R HASH": sum all-reduce of float32 (peer K contributes values whose sum
 *                       depends on the order of additions); HASH: FNV-1a 64 of the result's bytes
 *   ss VALUE [REV]   -> "ss R BAD FIRST RX": shared state of one uint32 tensor filled with VALUE
 *                       (revision REV, default 1); BAD counts elements unequal to the first one
 *                       (FIRST) afterwards; RX the bytes received
 *   opt              -> "opt R"                    pcclOptimizeTopology
 *   quit             -> "bye" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/peer/ccoip_peer_bench.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/peer/ccoip_peer_shared.h"
#include "pccl.h"

static uint32_t contribution(size_t i, unsigned k) { return (uint32_t) ((i * 7 + k * 13) % 1001); }

static void do_allreduce(pcclComm_t *comm, size_t count, unsigned k, unsigned n, uint64_t tag) {
    uint32_t *buf = malloc(count * 4), *out = malloc(count * 4);
    for (size_t i = 0; i < count; i++) buf[i] = contribution(i, k);
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = count;
    d.op = pcclSum;
    d.tag = tag;
    d.src_descriptor.datatype = pcclUint32;
    d.quantization_options.quantized_datatype = pcclUint32;
    pcclReduceInfo_t info;
    pcclResult_t r = pcclAllReduce(buf, out, &d, comm, &info);
    size_t bad = 0;
    for (size_t i = 0; r == pcclSuccess && i < count; i++) {
        uint32_t want = 0;
        for (unsigned j = 0; j < n; j++) want += contribution(i, j);
        bad += out[i] != want;
    }
    printf("ar %d %zu\n", (int) r, bad);
    free(buf);
    free(out);
}

static void do_allreduce_float(pcclComm_t *comm, size_t count, unsigned k, uint64_t tag) {
    float *buf = malloc(count * 4), *out = malloc(count * 4);
    uint32_t x = 2463534242u + k * 977u;
    for (size_t i = 0; i < count; i++) { /* xorshift: fractions of every magnitude */
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        buf[i] = (float) (x % 2000001u) / 1000.0f * ((x & 1u) ? 1.0f : -1e-3f);
    }
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = count;
    d.op = pcclSum;
    d.tag = tag;
    d.src_descriptor.datatype = pcclFloat;
    d.quantization_options.quantized_datatype = pcclFloat;
    pcclResult_t r = pcclAllReduce(buf, out, &d, comm, NULL);
    uint64_t h = 1469598103934665603ull;
    const uint8_t *b = (const uint8_t *) out;
    for (size_t i = 0; r == pcclSuccess && i < count * 4; i++) h = (h ^ b[i]) * 1099511628211ull;
    printf("arf %d %016llx\n", (int) r, (unsigned long long) h);
    free(buf);
    free(out);
}

static void do_sync(pcclComm_t *comm, uint32_t value, uint64_t revision) {
    enum { N = 1 << 16 };
    uint32_t *t = malloc(N * 4);
    for (size_t i = 0; i < N; i++) t[i] = value;
    pcclTensorInfo_t info = {"weights", t, N, pcclUint32, pcclDeviceCpu, false};
    pcclSharedState_t st = {revision, 1, &info};
    pcclSharedStateSyncInfo_t si = {0, 0};
    pcclResult_t r = pcclSynchronizeSharedState(comm, &st, PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR, &si);
    size_t bad = 0;
    for (size_t i = 0; i < N; i++) bad += t[i] != t[0];
    printf("ss %d %zu %u %llu\n", (int) r, bad, t[0], (unsigned long long) si.rx_bytes);
    free(t);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: sec_peer MASTER_PORT\n");
        return 2;
    }
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    params.master_address.inet.protocol = inetIPv4;
    params.master_address.inet.ipv4 = (ccoip_ipv4_address_t){{127, 0, 0, 1}};
    params.master_address.port = (uint16_t) atoi(argv[1]);
    if (pcclInit() != pcclSuccess) return 1;
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess) return 1;
    char line[512];
    uint64_t tag = 1;
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        size_t count;
        unsigned k, n, v;
        if (strncmp(line, "secret ", 7) == 0) {
            printf("secret %d\n", (int) pcclSetSecret(comm, line + 7, strlen(line + 7)));
        } else if (strcmp(line, "connect") == 0) {
            pcclResult_t r = pcclConnect(comm);
            char uuid[33] = "-";
            if (r == pcclSuccess)
                for (int i = 0; i < 16; i++) snprintf(uuid + 2 * i, 3, "%02x", comm->uuid.b[i]);
            printf("connect %d %u %u %u %s\n", (int) r, comm->p2p.listener.port, ccoip_ss_port(comm),
                   ccoip_bench_port(comm), uuid);
        } else if (strcmp(line, "update") == 0) {
            printf("update %d\n", (int) pcclUpdateTopology(comm));
        } else if (sscanf(line, "ar %zu %u %u", &count, &k, &n) == 3) {
            do_allreduce(comm, count, k, n, tag++);
        } else if (sscanf(line, "arf %zu %u", &count, &k) == 2) {
            do_allreduce_float(comm, count, k, tag++);
        } else if (sscanf(line, "ss %u", &v) == 1) {
            unsigned long long rev = 1;
            sscanf(line, "ss %*u %llu", &rev);
            do_sync(comm, v, rev);
        } else if (strcmp(line, "opt") == 0) {
            printf("opt %d\n", (int) pcclOptimizeTopology(comm));
        } else if (strcmp(line, "quit") == 0) {
            break;
        } else {
            printf("unknown %s\n", line);
        }
        fflush(stdout);
    }
    pcclDestroyCommunicator(comm);
    printf("bye\n");
    fflush(stdout);
    return 0;
}
