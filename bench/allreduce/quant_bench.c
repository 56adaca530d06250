/* quant_bench: min-max uint8 quantization (reduce_quant_encode / _decode) of float32 sub-chunks
 * as the ring cuts them (256 KiB of source per frame), over 256 MiB, against memcpy of the same
 * source bytes in the same run. CSV rows on stdout; GB/s counts float32 source bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reduce/reduce.h"

#define TOTAL ((size_t) 256 << 20)
#define SUB ((size_t) REDUCE_RING_DEFAULT_SUBCHUNK / 4) /* float32 elements per frame */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

int main(void) {
    size_t n = TOTAL / 4, frames = n / SUB;
    pcclQuantizationOptions_t q = {pcclUint8, pcclQuantMinMax};
    size_t fb = reduce_quant_frame_bytes(pcclFloat, &q, SUB);
    float *src = malloc(TOTAL), *dst = malloc(TOTAL);
    char *enc = malloc(fb * frames);
    if (src == NULL || dst == NULL || enc == NULL) return 1;
    for (size_t i = 0; i < n; i++) src[i] = (float) ((i * 2654435761u) % 10007) * 1e-3f - 5.0f;
    memset(dst, 0, TOTAL);
    double best[3] = {1e9, 1e9, 1e9};
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_s();
        memcpy(dst, src, TOTAL);
        double t1 = now_s();
        for (size_t f = 0; f < frames; f++) reduce_quant_encode(pcclFloat, &q, enc + f * fb, src + f * SUB, SUB);
        double t2 = now_s();
        for (size_t f = 0; f < frames; f++) reduce_quant_decode(pcclFloat, &q, dst + f * SUB, enc + f * fb, SUB);
        double t3 = now_s();
        double d[3] = {t1 - t0, t2 - t1, t3 - t2};
        for (int k = 0; k < 3; k++)
            if (d[k] < best[k]) best[k] = d[k];
    }
    double mc = TOTAL / best[0] / 1e9, en = TOTAL / best[1] / 1e9, de = TOTAL / best[2] / 1e9;
    printf("quant/minmax_u8_encode_vs_memcpy,%.2f,GB/s,%.2f,%.3f\n", en, mc, en / mc);
    printf("quant/minmax_u8_decode_vs_memcpy,%.2f,GB/s,%.2f,%.3f\n", de, mc, de / mc);
    free(src);
    free(dst);
    free(enc);
    return 0;
}
