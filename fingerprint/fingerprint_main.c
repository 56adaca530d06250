/* pccl-fingerprint: prints this machine's determinism fingerprint (docs/fingerprint.md).
 *   pccl-fingerprint [--quick] [--cpu] [--out FILE] [--compare FILE]
 * --quick: 2^24 instead of all 2^32 inputs of each float function; --cpu: the CPU reference of
 * the functions IEEE 754 fixes (no GPU needed); --out: also writes the text to FILE (what
 * PCCL_FINGERPRINT_FILE reads); --compare FILE: compares with a saved fingerprint, naming the
 * functions that differ (exit 1 when any does). Exit 2 on bad arguments or when it cannot
 * compute the fingerprint (no GPU without --cpu). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fingerprint/fingerprint.h"
#include "pccl.h"

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    char *buf = malloc(65536);
    size_t n = buf ? fread(buf, 1, 65535, f) : 0;
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

int main(int argc, char **argv) {
    uint32_t flags = 0;
    const char *out_path = NULL, *compare_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) flags |= PCCL_FINGERPRINT_QUICK;
        else if (strcmp(argv[i], "--cpu") == 0) flags |= PCCL_FINGERPRINT_CPU;
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) out_path = argv[++i];
        else if (strcmp(argv[i], "--compare") == 0 && i + 1 < argc) compare_path = argv[++i];
        else {
            fprintf(stderr, "usage: pccl-fingerprint [--quick] [--cpu] [--out FILE] [--compare FILE]\n");
            return 2;
        }
    }
    pcclDeterminismFingerprint_t fp;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pcclResult_t r = pcclGetDeterminismFingerprint(flags, &fp);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (r != pcclSuccess) {
        fprintf(stderr, "pccl-fingerprint: %s%s\n", pcclResultString(r),
                r == pcclInvalidUsage ? " (no GPU: --cpu gives the CPU reference)" : "");
        return 2;
    }
    char text[8192];
    fp_format(&fp, text, sizeof text);
    fputs(text, stdout);
    fprintf(stderr, "pccl-fingerprint: %u functions in %.2f s\n", fp.count,
            (double) (t1.tv_sec - t0.tv_sec) + 1e-9 * (double) (t1.tv_nsec - t0.tv_nsec));
    if (out_path != NULL) {
        FILE *f = fopen(out_path, "w");
        if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
            fprintf(stderr, "pccl-fingerprint: cannot write %s\n", out_path);
            return 2;
        }
    }
    if (compare_path != NULL) {
        char *saved = read_file(compare_path);
        pcclDeterminismFingerprint_t ref;
        if (saved == NULL || !fp_parse(saved, &ref)) {
            fprintf(stderr, "pccl-fingerprint: cannot read a fingerprint from %s\n", compare_path);
            free(saved);
            return 2;
        }
        free(saved);
        char why[1024];
        int d = fp_compare(&ref, &fp, why, sizeof why);
        if (d == 0) printf("same as %s\n", compare_path);
        else printf("differs from %s: %s\n", compare_path, why);
        return d == 0 ? 0 : 1;
    }
    return 0;
}
