/* quant_common.h -- helpers shared by the quantization tests: a seeded generator, element
 * access in long double for the four source dtypes, and the documented accuracy constants
 * (README.md "Quantization", "Accuracy"). */
#ifndef PCCL_TESTS_REDUCE_QUANT_COMMON_H
#define PCCL_TESTS_REDUCE_QUANT_COMMON_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/reduce_half.h"

static const pcclDataType_t QT_SRC[4] = { pcclFloat, pcclDouble, pcclFloat16, pcclBFloat16 };
static const pcclDataType_t QT_CODE[2] = { pcclUint8, pcclUint16 };
static const pcclQuantizationAlgorithm_t QT_ALGO[2] = { pcclQuantMinMax, pcclQuantZeroPointScale };

static uint64_t qt_rng_state = 0x9e3779b97f4a7c15ull;

static inline uint64_t qt_rand(void) { /* splitmix64 */
    uint64_t z = (qt_rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double qt_unit(void) {
    return (double) (qt_rand() >> 11) * 0x1p-53;
}

static inline uint64_t qt_below(uint64_t n) {
    return qt_rand() % n;
}

static inline long double qt_get(pcclDataType_t dt, const void *buf, size_t i) {
    switch (dt) {
    case pcclFloat: return ((const float *) buf)[i];
    case pcclDouble: return ((const double *) buf)[i];
    case pcclFloat16: return reduce_f16_to_f32(((const uint16_t *) buf)[i]);
    default: return reduce_bf16_to_f32(((const uint16_t *) buf)[i]);
    }
}

/* Stores v rounded to the dtype (through float for the half types: double rounding is fine,
 * the tests only need some value of the type). */
static inline void qt_put(pcclDataType_t dt, void *buf, size_t i, double v) {
    switch (dt) {
    case pcclFloat: ((float *) buf)[i] = (float) v; break;
    case pcclDouble: ((double *) buf)[i] = v; break;
    case pcclFloat16: ((uint16_t *) buf)[i] = reduce_f32_to_f16((float) v); break;
    default: ((uint16_t *) buf)[i] = reduce_f32_to_bf16((float) v); break;
    }
}

/* A NaN of the dtype with a random sign and payload. */
static inline void qt_put_nan(pcclDataType_t dt, void *buf, size_t i) {
    uint64_t r = qt_rand();
    switch (dt) {
    case pcclFloat: {
        uint32_t u = 0x7f800000u | (uint32_t) (r & 0x7fffffu) | 1u | (uint32_t) (r >> 63 << 31);
        memcpy((float *) buf + i, &u, 4);
        break;
    }
    case pcclDouble: {
        uint64_t u = 0x7ff0000000000000ull | (r & 0xfffffffffffffull) | 1u | (r >> 63 << 63);
        memcpy((double *) buf + i, &u, 8);
        break;
    }
    case pcclFloat16:
        ((uint16_t *) buf)[i] = (uint16_t) (0x7c00u | (r & 0x3ffu) | 1u | (uint16_t) ((r >> 63) << 15));
        break;
    default:
        ((uint16_t *) buf)[i] = (uint16_t) (0x7f80u | (r & 0x7fu) | 1u | (uint16_t) ((r >> 63) << 15));
        break;
    }
}

static inline int qt_isfinite(long double v) {
    return isfinite(v);
}

/* Largest finite value of the dtype. */
static inline double qt_max(pcclDataType_t dt) {
    switch (dt) {
    case pcclFloat: return FLT_MAX;
    case pcclDouble: return DBL_MAX;
    case pcclFloat16: return 65504.0;
    default: return (double) reduce_f32_from_bits(0x7f7f0000u);
    }
}

/* Unit roundoff of the working type (float, or double for float64) and of the dtype, and the
 * absolute floor eta of README.md's bound. */
static inline long double qt_u_work(pcclDataType_t dt) {
    return dt == pcclDouble ? 0x1p-53L : 0x1p-24L;
}
static inline long double qt_u_src(pcclDataType_t dt) {
    switch (dt) {
    case pcclFloat: return 0x1p-24L;
    case pcclDouble: return 0x1p-53L;
    case pcclFloat16: return 0x1p-11L;
    default: return 0x1p-8L;
    }
}
static inline long double qt_eta(pcclDataType_t dt) {
    switch (dt) {
    case pcclFloat: return 0x1p-126L;
    case pcclDouble: return 0x1p-1022L;
    case pcclFloat16: return 0x1p-24L;
    default: return 0x1p-126L;
    }
}

/* Finite steps of a frame: 2^bits - 1, less the three reserved codes when flagged. */
static inline long double qt_lim(pcclDataType_t code, int nonfinite) {
    return (code == pcclUint16 ? 65535.0L : 255.0L) - (nonfinite ? 3.0L : 0.0L);
}

/* README.md's bound for one quantization of a sub-chunk with finite range R (hi - lo for
 * MinMax, max(hi,0) - min(lo,0) for ZeroPointScale) and magnitude M = max(|lo|, |hi|). */
static inline long double qt_event_bound(pcclDataType_t dt, long double lim, long double R,
                                         long double M) {
    return R / (2 * lim) + 8 * qt_u_work(dt) * R + 2 * qt_u_src(dt) * M + qt_eta(dt);
}

#endif /* PCCL_TESTS_REDUCE_QUANT_COMMON_H */
