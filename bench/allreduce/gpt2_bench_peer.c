/* gpt2_bench_peer: an ar_bench peer (same line protocol as ar_bench_peer) whose "multi" is the
 * gradient all-reduce of a GPT-2-124M-shaped model: 148 float32 tensors (wte 50257x768, wpe
 * 1024x768, 12 blocks of ln_1 w/b, c_attn w/b, attn c_proj w/b, ln_2 w/b, c_fc w/b, mlp c_proj
 * w/b, then ln_f w/b), 124,439,808 elements, through one pcclAllReduceMultipleWithRetry. "bench"
 * is one all-reduce of COUNT elements: with COUNT = 124439808 (474.703125 MiB) the same bytes.
 *   connect | update | quit
 *   bench TAG COUNT WARMUP ITERS QUANT            -> "bench RESULT MEDIAN_US MIN_US"
 *   multi TAG COUNT PARTS INFLIGHT WARMUP ITERS   -> "bench RESULT MEDIAN_US MIN_US" (COUNT and
 *                                                    PARTS ignored: the model's shapes)
 * Usage: gpt2_bench_peer MASTER_IP:PORT [POOL_SIZE] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pccl.h"

#define NT 148
#define MAXIT 1000

static size_t shapes[NT];

static size_t gpt2_shapes(void) {
    size_t n = 0, total = 0;
    shapes[n++] = 50257u * 768u;
    shapes[n++] = 1024u * 768u;
    for (int b = 0; b < 12; b++) {
        const size_t blk[12] = {768, 768, 768u * 2304u, 2304, 768u * 768u, 768, 768, 768, 768u * 3072u, 3072,
                                3072u * 768u, 768};
        for (int i = 0; i < 12; i++) shapes[n++] = blk[i];
    }
    shapes[n++] = 768;
    shapes[n++] = 768;
    for (size_t i = 0; i < n; i++) total += shapes[i];
    return total;
}

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

static int parse_addr(const char *s, ccoip_socket_address_t *out) {
    unsigned a, b, c, d, port;
    if (sscanf(s, "%u.%u.%u.%u:%u", &a, &b, &c, &d, &port) != 5 || a > 255 || b > 255 || c > 255 || d > 255 ||
        port > 65535)
        return 0;
    memset(out, 0, sizeof *out);
    out->inet.protocol = inetIPv4;
    out->inet.ipv4 = (ccoip_ipv4_address_t){{(uint8_t) a, (uint8_t) b, (uint8_t) c, (uint8_t) d}};
    out->port = (uint16_t) port;
    return 1;
}

static float *buffer(size_t count) {
    float *p = malloc(count * sizeof *p);
    if (p == NULL) {
        fprintf(stderr, "gpt2_bench_peer: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < count; i++) p[i] = (float) (i % 251) * 0.25f; /* touches every page */
    return p;
}

static void report(pcclResult_t r, uint64_t *t, int done) {
    qsort(t, (size_t) done, sizeof t[0], cmp_u64);
    printf("bench %d %llu %llu\n", (int) r, done ? (unsigned long long) t[done / 2] : 0ull,
           done ? (unsigned long long) t[0] : 0ull);
}

int main(int argc, char **argv) {
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    if (argc < 2 || !parse_addr(argv[1], &params.master_address)) {
        fprintf(stderr, "usage: gpt2_bench_peer MASTER_IP:PORT [POOL_SIZE]\n");
        return 2;
    }
    params.p2p_connection_pool_size = argc > 2 ? (uint32_t) atoi(argv[2]) : 1;
    size_t total = gpt2_shapes();
    if (pcclInit() != pcclSuccess) return 1;
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess) return 1;
    char line[256];
    static uint64_t t[MAXIT];
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        size_t count;
        int warmup, iters, quant, parts, inflight;
        unsigned long long tag;
        if (strcmp(line, "connect") == 0) {
            printf("connect %d\n", (int) pcclConnect(comm));
        } else if (strcmp(line, "update") == 0) {
            printf("update %d\n", (int) pcclUpdateTopology(comm));
        } else if (sscanf(line, "bench %llu %zu %d %d %d", &tag, &count, &warmup, &iters, &quant) == 5 &&
                   iters > 0 && iters <= MAXIT) {
            float *send = buffer(count), *recv = buffer(count);
            pcclResult_t r = pcclSuccess;
            int done = 0;
            for (int it = 0; it < warmup + iters && r == pcclSuccess; it++) {
                pcclReduceDescriptor_t d;
                memset(&d, 0, sizeof d);
                d.count = count;
                d.op = pcclSum;
                d.tag = tag++;
                d.src_descriptor.datatype = pcclFloat;
                uint64_t t0 = now_us();
                r = pcclAllReduce(send, recv, &d, comm, NULL);
                if (it >= warmup) t[done++] = now_us() - t0;
            }
            report(r, t, done);
            free(send);
            free(recv);
        } else if (sscanf(line, "multi %llu %zu %d %d %d %d", &tag, &count, &parts, &inflight, &warmup, &iters) == 6 &&
                   iters > 0 && iters <= MAXIT) {
            float *send = buffer(total), *recv = buffer(total);
            pcclReduceOpDescriptor_t descs[NT];
            pcclResult_t r = pcclSuccess;
            int done = 0;
            for (int it = 0; it < warmup + iters && r == pcclSuccess; it++) {
                size_t off = 0;
                for (int k = 0; k < NT; k++) {
                    memset(&descs[k], 0, sizeof descs[k]);
                    descs[k].sendbuf = send + off;
                    descs[k].recvbuf = recv + off;
                    descs[k].descriptor.count = shapes[k];
                    descs[k].descriptor.op = pcclSum;
                    descs[k].descriptor.tag = tag++;
                    descs[k].descriptor.src_descriptor.datatype = pcclFloat;
                    off += shapes[k];
                }
                uint64_t t0 = now_us();
                r = pcclAllReduceMultipleWithRetry(descs, NT, comm, NULL, inflight);
                if (it >= warmup) t[done++] = now_us() - t0;
            }
            report(r, t, done);
            free(send);
            free(recv);
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
