/* The determinism fingerprint on a GPU:
 *   fingerprint_gpu_test [--quick]
 * 1. The quick input set on the GPU equals the CPU reference (fp_cpu_fingerprint) for every
 *    function IEEE 754 fixes exactly (sqrtf, 1/x, fp16/bf16 conversions, fmaf chains, tree sums).
 * 2. The full fingerprint (all 2^32 inputs of each float function) is computed twice: equal.
 * 3. The same kernels built with -use_fast_math (//cuda:fingerprint_fastmath) give a different
 *    fingerprint, and the comparison names the functions that changed (expf among them).
 * --quick: the quick input set in 2 and 3 (for compute-sanitizer).
 * Without CUDA built in, or without a GPU, it prints "skipped: no GPU" and passes. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda_fingerprint.h"
#include "cuda/cuda_table.h"
#include "fingerprint/fingerprint.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static void show(const char *what, const pcclDeterminismFingerprint_t *fp, double secs) {
    char text[4096];
    fp_format(fp, text, sizeof text);
    printf("-- %s (%.2f s)\n%s", what, secs, text);
}

int main(int argc, char **argv) {
    const cuda_table_t *cu = cuda_table();
    int ndev = 0;
    if (cu == NULL || cu->device_count(&ndev) != CUDA_OK || ndev == 0) {
        printf("fingerprint_gpu_test: skipped: no GPU%s\n", cu == NULL ? " (CUDA not built in)" : "");
        return 0;
    }
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int failures = 0;
    char why[1024];
    static pcclDeterminismFingerprint_t gq, cq, a, b, fm;

    double t = now_s();
    if (cuda_fingerprint(&gq, 1) != CUDA_OK) return printf("FAIL GPU quick fingerprint\n"), 1;
    show("GPU, quick inputs", &gq, now_s() - t);
    t = now_s();
    if (fp_cpu_fingerprint(&cq, PCCL_FINGERPRINT_QUICK, 0) != pcclSuccess) return printf("FAIL CPU reference\n"), 1;
    show("CPU reference, quick inputs", &cq, now_s() - t);
    int d = fp_compare(&gq, &cq, why, sizeof why);
    printf("GPU against the CPU reference (IEEE-exact functions): %s\n", d == 0 ? "equal" : why);
    if (d != 0) failures++;

    t = now_s();
    if (cuda_fingerprint(&a, quick) != CUDA_OK) return printf("FAIL GPU fingerprint\n"), 1;
    show(quick ? "GPU, quick inputs, again" : "GPU, all 2^32 inputs", &a, now_s() - t);
    t = now_s();
    if (cuda_fingerprint(&b, quick) != CUDA_OK) return printf("FAIL GPU fingerprint (second run)\n"), 1;
    double second = now_s() - t;
    d = fp_compare(&a, &b, why, sizeof why);
    printf("second run (%.2f s): %s\n", second, d == 0 ? "equal" : why);
    if (d != 0 || memcmp(a.entries, b.entries, sizeof a.entries) != 0) failures++;

    t = now_s();
    if (cuda_fingerprint_fastmath(&fm, quick) != CUDA_OK) return printf("FAIL fast-math fingerprint\n"), 1;
    show("GPU, -use_fast_math build", &fm, now_s() - t);
    d = fp_compare(&a, &fm, why, sizeof why);
    printf("fast-math build against the library's: %d functions differ: %s\n", d, why);
    if (d <= 0 || strstr(why, "expf") == NULL) {
        printf("FAIL the fast-math build was not detected, or expf was not named\n");
        failures++;
    }
    printf("fingerprint_gpu_test: %d failures\n", failures);
    return failures ? 1 : 0;
}
