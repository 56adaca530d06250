/* hash_bench: XXH3-64 and SimpleHash (CPU reference: the dispatched build, AVX2 where the CPU
 * has it, and the baseline-ISA build) throughput against memcpy of the same buffer, measured in
 * the same run. Prints "name,value,unit,baseline,ratio" rows (no header) on
 * stdout; details go to stderr.
 *
 * GB/s is 1e9 bytes per second of input. For memcpy it is bytes copied per second: memcpy reads
 * and writes every byte, so it moves twice the bytes a hash reads, and a hash that runs at the
 * machine's read bandwidth beats it. Each figure is the median of ROUNDS timed runs; the runs
 * are interleaved round by round so that noise from other processes hits them alike. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hash/hash.h"

#define BUFFER_BYTES ((size_t) 256 << 20)
#define ROUNDS 15

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t) n, sizeof *v, cmp_double);
    return v[n / 2];
}

static void row(const char *name, double value, double baseline) {
    printf("%s,%.2f,GB/s,%.2f,%.2f\n", name, value, baseline, value / baseline);
}

int main(void) {
    unsigned char *src = aligned_alloc(4096, BUFFER_BYTES);
    unsigned char *dst = aligned_alloc(4096, BUFFER_BYTES);
    if (src == NULL || dst == NULL) {
        fprintf(stderr, "hash_bench: cannot allocate 2 x %zu bytes\n", BUFFER_BYTES);
        return 1;
    }
    /* Touch every page of both buffers so that no run pays for page faults. */
    for (size_t i = 0; i < BUFFER_BYTES; i++) src[i] = (unsigned char) (i * 31 + 7);
    memset(dst, 0, BUFFER_BYTES);

    double t_copy[ROUNDS], t_xxh3[ROUNDS], t_simple[ROUNDS], t_portable[ROUNDS];
    volatile uint64_t sink = 0;
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_s();
        memcpy(dst, src, BUFFER_BYTES);
        double t1 = now_s();
        sink ^= hash_xxh3(src, BUFFER_BYTES);
        double t2 = now_s();
        sink ^= hash_simple(src, BUFFER_BYTES);
        double t3 = now_s();
        sink ^= hash_simple_portable(src, BUFFER_BYTES);
        double t4 = now_s();
        sink ^= dst[r * 4099];
        t_copy[r] = t1 - t0;
        t_xxh3[r] = t2 - t1;
        t_simple[r] = t3 - t2;
        t_portable[r] = t4 - t3;
    }
    double gb = (double) BUFFER_BYTES / 1e9;
    double copy = gb / median(t_copy, ROUNDS);
    double xxh3 = gb / median(t_xxh3, ROUNDS);
    double simple = gb / median(t_simple, ROUNDS);
    double portable = gb / median(t_portable, ROUNDS);
    fprintf(stderr,
            "hash_bench: %zu MiB, median of %d runs: memcpy %.2f GB/s (bytes copied), xxh3 %.2f, "
            "simplehash %.2f, simplehash portable %.2f GB/s (sink %llx)\n",
            BUFFER_BYTES >> 20, ROUNDS, copy, xxh3, simple, portable, (unsigned long long) sink);
    row("hash/xxh3", xxh3, copy);
    row("hash/simplehash_cpu", simple, copy);
    row("hash/simplehash_cpu_portable", portable, copy);
    free(src);
    free(dst);
    return 0;
}
