/* topo_peer: a PCCL peer driven line by line on stdin, for the pcclOptimizeTopology tests.
 *   topo_peer MASTER_HOST:PORT [PEER_GROUP]
 * Commands and the line each prints on stdout (RESULT is the pcclResult_t number):
 *   connect                 -> "connect RESULT UUID"
 *   update                  -> "update RESULT"
 *   optimize                -> "optimize RESULT MEASURED MS" (MEASURED: this peer's measurements so far)
 *   ring                    -> "ring UUID NEXT PREV" (the ring neighbours' UUIDs, "-" when none)
 *   allreduce COUNT ITERS I N TAG -> "allreduce RESULT OK|BAD MS" (float32 Sum, tags TAG..; peer I of N
 *                              contributes (I + 1) * (j % 7 + 1) at element j, so every sum is exact; MS
 *                              per op)
 *   async COUNT             -> "async RESULT_OPTIMIZE RESULT_AWAIT" (pcclOptimizeTopology while an
 *                              async all-reduce is in flight, then the await)
 *   quit                    -> "bye"
 * Logs go to stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ccoip/peer/ccoip_p2p.h"
#include "ccoip/peer/ccoip_peer_bench.h"
#include "ccoip/net/ccoip_socket.h"
#include "pccl.h"

static void hex(const ccoip_uuid_t *u, char *out) {
    static const char d[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = d[u->b[i] >> 4];
        out[2 * i + 1] = d[u->b[i] & 15];
    }
    out[32] = '\0';
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static pcclReduceDescriptor_t sum_desc(size_t count, uint64_t tag) {
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = count;
    d.op = pcclSum;
    d.tag = tag;
    d.src_descriptor.datatype = pcclFloat;
    d.src_descriptor.distribution_hint = pcclDistributionNone;
    d.quantization_options.quantized_datatype = pcclFloat;
    d.quantization_options.algorithm = pcclQuantNone;
    return d;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: topo_peer MASTER_HOST:PORT [PEER_GROUP]\n");
        return 2;
    }
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    if (!ccoip_parse_address(argv[1], 48148, &params.master_address)) {
        fprintf(stderr, "topo_peer: bad address %s\n", argv[1]);
        return 2;
    }
    params.peer_group = argc > 2 ? (uint32_t) strtoul(argv[2], NULL, 10) : 0;
    if (pcclInit() != pcclSuccess) return 1;
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess) return 1;
    char line[256];
    uint64_t tag = 1u << 30; /* async ops: apart from the tags the driver gives */
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        size_t count = 0;
        int iters = 0, me = 0, world = 0;
        unsigned long long first_tag = 0;
        if (strcmp(line, "connect") == 0) {
            pcclResult_t r = pcclConnect(comm);
            ccoip_uuid_t u = ccoip_comm_uuid(comm);
            char h[33];
            hex(&u, h);
            printf("connect %d %s\n", (int) r, h);
        } else if (strcmp(line, "update") == 0) {
            printf("update %d\n", (int) pcclUpdateTopology(comm));
        } else if (strcmp(line, "pending") == 0) {
            bool pending = false;
            pcclResult_t r = pcclArePeersPending(comm, &pending);
            printf("pending %d %d\n", (int) r, (int) pending);
        } else if (strcmp(line, "optimize") == 0) {
            double t0 = now_ms();
            pcclResult_t r = pcclOptimizeTopology(comm);
            printf("optimize %d %llu %.0f\n", (int) r, (unsigned long long) ccoip_bench_count(comm), now_ms() - t0);
        } else if (strcmp(line, "ring") == 0) {
            ccoip_p2p_links_t l;
            ccoip_comm_links(comm, &l);
            ccoip_uuid_t u = ccoip_comm_uuid(comm);
            char a[33], b[33], c[33];
            hex(&u, a);
            hex(&l.tx.peer, b);
            hex(&l.rx.peer, c);
            printf("ring %s %s %s\n", a, l.tx.fd >= 0 ? b : "-", l.rx.fd >= 0 ? c : "-");
        } else if (sscanf(line, "allreduce %zu %d %d %d %llu", &count, &iters, &me, &world, &first_tag) == 5 && count > 0) {
            float *in = malloc(count * sizeof *in), *out = malloc(count * sizeof *out);
            if (in == NULL || out == NULL) return 1;
            for (size_t j = 0; j < count; j++) in[j] = (float) ((me + 1) * (int) (j % 7 + 1));
            pcclResult_t r = pcclSuccess;
            bool ok = true;
            double t0 = now_ms();
            for (int it = 0; it < iters && r == pcclSuccess; it++) {
                pcclReduceDescriptor_t d = sum_desc(count, first_tag + (uint64_t) it);
                r = pcclAllReduce(in, out, &d, comm, NULL);
            }
            double ms = (now_ms() - t0) / (iters > 0 ? iters : 1);
            float tri = (float) (world * (world + 1) / 2);
            for (size_t j = 0; j < count && r == pcclSuccess; j++) ok = ok && out[j] == tri * (float) (j % 7 + 1);
            printf("allreduce %d %s %.2f\n", (int) r, ok ? "OK" : "BAD", ms);
            free(in);
            free(out);
        } else if (sscanf(line, "async %zu", &count) == 1 && count > 0) {
            float *buf = calloc(count, sizeof *buf);
            if (buf == NULL) return 1;
            pcclReduceDescriptor_t d = sum_desc(count, tag++);
            pcclAsyncReduceOp_t h;
            pcclResult_t r = pcclAllReduceAsync(buf, buf, &d, comm, &h);
            pcclResult_t ro = pcclOptimizeTopology(comm);
            pcclResult_t ra = r == pcclSuccess ? pcclAwaitAsyncReduce(&h, NULL) : r;
            printf("async %d %d\n", (int) ro, (int) ra);
            free(buf);
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
