/* ar_bench_peer: a PCCL peer for the all-reduce benchmarks, driven line by line on stdin
 * (public API only). Usage: ar_bench_peer MASTER_HOST:PORT [POOL_SIZE]
 *   connect                 -> "connect RESULT"
 *   update                  -> "update RESULT"
 *   bench TAG COUNT WARMUP ITERS QUANT
 *                           -> "bench RESULT MEDIAN_US MIN_US CPU_US SLEEPS"  float32 Sum all-reduces
 *                              elements with tags TAG, TAG+1, ... (every peer must use the same
 *                              ones; QUANT 1: min-max to uint8 on the wire); CPU_US: the
 *                              median over the timed ops of this process's user + system time
 *                              (every thread, getrusage) spent inside one op; SLEEPS: the
 *                              median of its voluntary context switches per op
 *   arg TAG COUNT           -> "go", then "ar RESULT CALL_US END_US"  one all-reduce; END_US is
 *                              CLOCK_MONOTONIC at its return (failure-latency runs)
 *   multi TAG COUNT PARTS INFLIGHT WARMUP ITERS
 *                           -> "bench RESULT MEDIAN_US MIN_US CPU_US SLEEPS"  the same buffers cut into PARTS
 *                              all-reduces, pcclAllReduceMultipleWithRetry with INFLIGHT at once;
 *                              PARTS "gpt2": the gradient of a GPT-2-124M-shaped model (148 float32
 *                              tensors: wte 50257x768, wpe 1024x768, 12 blocks of ln_1 w/b, c_attn
 *                              w/b, attn c_proj w/b, ln_2 w/b, c_fc w/b, mlp c_proj w/b, then ln_f
 *                              w/b; COUNT must be their 124,439,808 elements, 474.7001953125 MiB)
 *   quit                    -> "bye" */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "pccl.h"

static uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* Voluntary context switches (sleeps: one per wake-up) of every thread so far. */
static uint64_t sleeps(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t) ru.ru_nvcsw;
}

/* User + system time of every thread of this process so far. */
static uint64_t cpu_us(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u + (uint64_t) ru.ru_utime.tv_usec +
           (uint64_t) ru.ru_stime.tv_usec;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

static bool parse_addr(const char *s, ccoip_socket_address_t *out) {
    unsigned a, b, c, d, port;
    if (sscanf(s, "%u.%u.%u.%u:%u", &a, &b, &c, &d, &port) != 5 || a > 255 || b > 255 || c > 255 || d > 255 ||
        port > 65535)
        return false;
    memset(out, 0, sizeof *out);
    out->inet.protocol = inetIPv4;
    out->inet.ipv4 = (ccoip_ipv4_address_t){{(uint8_t) a, (uint8_t) b, (uint8_t) c, (uint8_t) d}};
    out->port = (uint16_t) port;
    return true;
}

static uint64_t next_tag = 1;

/* "bench RESULT MEDIAN_US MIN_US CPU_US SLEEPS" from done per-op times t[], CPU times c[] and
 * voluntary context switches w[] (medians). */
static void report(pcclResult_t r, uint64_t *t, uint64_t *c, uint64_t *w, int done) {
    qsort(t, (size_t) done, sizeof t[0], cmp_u64);
    qsort(c, (size_t) done, sizeof c[0], cmp_u64);
    qsort(w, (size_t) done, sizeof w[0], cmp_u64);
    printf("bench %d %llu %llu %llu %llu\n", (int) r, done ? (unsigned long long) t[done / 2] : 0ull,
           done ? (unsigned long long) t[0] : 0ull, done ? (unsigned long long) c[done / 2] : 0ull,
           done ? (unsigned long long) w[done / 2] : 0ull);
}

static pcclResult_t one(pcclComm_t *comm, float *send, float *recv, size_t count, int quant) {
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = count;
    d.op = pcclSum;
    d.tag = next_tag++;
    d.src_descriptor.datatype = pcclFloat;
    if (quant) {
        d.quantization_options.quantized_datatype = pcclUint8;
        d.quantization_options.algorithm = pcclQuantMinMax;
    }
    return pcclAllReduce(send, recv, &d, comm, NULL);
}

#define MAX_PARTS 1024

/* Cuts count elements into the parts that `how` names (a number, or "gpt2": the model's tensors,
 * whose sizes must add up to count); returns how many, 0 when they cannot. */
static int cut(const char *how, size_t count, size_t *part) {
    int n = 0;
    if (strcmp(how, "gpt2") == 0) {
        const size_t block[12] = {768, 768, 768u * 2304u, 2304, 768u * 768u, 768, 768, 768, 768u * 3072u, 3072,
                                  3072u * 768u, 768};
        part[n++] = 50257u * 768u;
        part[n++] = 1024u * 768u;
        for (int b = 0; b < 12; b++)
            for (int i = 0; i < 12; i++) part[n++] = block[i];
        part[n++] = 768;
        part[n++] = 768;
        size_t total = 0;
        for (int k = 0; k < n; k++) total += part[k];
        return total == count ? n : 0;
    }
    n = atoi(how);
    if (n <= 0 || n > MAX_PARTS) return 0;
    for (int k = 0; k < n; k++) part[k] = count * (size_t) (k + 1) / (size_t) n - count * (size_t) k / (size_t) n;
    return n;
}

static float *buffer(size_t count) {
    float *p = malloc(count * sizeof *p);
    if (p == NULL) {
        fprintf(stderr, "ar_bench_peer: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < count; i++) p[i] = (float) (i % 251) * 0.25f; /* also touches every page */
    return p;
}

int main(int argc, char **argv) {
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    if (argc < 2 || !parse_addr(argv[1], &params.master_address)) {
        fprintf(stderr, "usage: ar_bench_peer MASTER_IP:PORT [POOL_SIZE]\n");
        return 2;
    }
    params.p2p_connection_pool_size = argc > 2 ? (uint32_t) atoi(argv[2]) : 0; /* 0: the library's default */
    if (pcclInit() != pcclSuccess) return 1;
    pcclComm_t *comm;
    if (pcclCreateCommunicator(&params, &comm) != pcclSuccess) return 1;
    char line[256];
    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        size_t count;
        int warmup, iters, quant = 0, parts, inflight;
        unsigned long long tag;
        char how[16];
        static size_t part[MAX_PARTS];
        if (strcmp(line, "connect") == 0) {
            printf("connect %d\n", (int) pcclConnect(comm));
        } else if (strcmp(line, "update") == 0) {
            printf("update %d\n", (int) pcclUpdateTopology(comm));
        } else if (sscanf(line, "bench %llu %zu %d %d %d", &tag, &count, &warmup, &iters, &quant) == 5 && iters > 0 &&
                   iters <= 1000) {
            float *send = buffer(count), *recv = buffer(count);
            next_tag = tag;
            pcclResult_t r = pcclSuccess;
            for (int i = 0; i < warmup && r == pcclSuccess; i++) r = one(comm, send, recv, count, quant);
            uint64_t t[1000], c[1000], w[1000];
            int done = 0;
            for (; done < iters && r == pcclSuccess; done++) {
                uint64_t w0 = sleeps(), c0 = cpu_us(), t0 = now_us();
                r = one(comm, send, recv, count, quant);
                t[done] = now_us() - t0;
                c[done] = cpu_us() - c0;
                w[done] = sleeps() - w0;
            }
            report(r, t, c, w, done);
            free(send);
            free(recv);
        } else if (sscanf(line, "multi %llu %zu %15s %d %d %d", &tag, &count, how, &inflight, &warmup, &iters) == 6 &&
                   (parts = cut(how, count, part)) > 0 && iters > 0 && iters <= 1000) {
            float *send = buffer(count), *recv = buffer(count);
            pcclReduceOpDescriptor_t *descs = calloc((size_t) parts, sizeof *descs);
            uint64_t t[1000], c[1000], w[1000];
            int done = 0;
            pcclResult_t r = pcclSuccess;
            for (int it = 0; it < warmup + iters && r == pcclSuccess; it++) {
                size_t lo = 0;
                for (int k = 0; k < parts; k++) {
                    descs[k].sendbuf = send + lo;
                    descs[k].recvbuf = recv + lo;
                    descs[k].descriptor.count = part[k];
                    descs[k].descriptor.op = pcclSum;
                    descs[k].descriptor.tag = tag++;
                    descs[k].descriptor.src_descriptor.datatype = pcclFloat;
                    lo += part[k];
                }
                uint64_t w0 = sleeps(), c0 = cpu_us(), t0 = now_us();
                r = pcclAllReduceMultipleWithRetry(descs, (size_t) parts, comm, NULL, inflight);
                if (it >= warmup) {
                    t[done] = now_us() - t0;
                    c[done] = cpu_us() - c0;
                    w[done++] = sleeps() - w0;
                }
            }
            report(r, t, c, w, done);
            free(descs);
            free(send);
            free(recv);
        } else if (sscanf(line, "arg %llu %zu", &tag, &count) == 2) {
            float *send = buffer(count), *recv = buffer(count);
            next_tag = tag;
            printf("go\n");
            fflush(stdout);
            uint64_t t0 = now_us();
            pcclResult_t r = one(comm, send, recv, count, 0);
            uint64_t t1 = now_us();
            printf("ar %d %llu %llu\n", (int) r, (unsigned long long) (t1 - t0), (unsigned long long) t1);
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
