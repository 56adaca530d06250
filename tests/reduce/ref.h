/* ref.h -- independent reference arithmetic for the reduce tests: half-precision decoding with
 * ldexp, rounding by binary search over every finite value of the format (ties to the even bit
 * pattern), and element-wise ops on raw bit patterns for all twelve dtypes. Slow and simple. */
#ifndef PCCL_TESTS_REDUCE_REF_H
#define PCCL_TESTS_REDUCE_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pccl.h"

enum { REF_F16 = 0, REF_BF16 = 1 };

static inline double ref_half_value(int fmt, uint16_t h) {
    int mbits = fmt == REF_F16 ? 10 : 7, ebits = fmt == REF_F16 ? 5 : 8;
    int bias = (1 << (ebits - 1)) - 1;
    uint32_t m = h & ((1u << mbits) - 1), e = (h >> mbits) & ((1u << ebits) - 1);
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    if (e == (1u << ebits) - 1) return m ? NAN : sign * INFINITY;
    if (e == 0) return sign * ldexp((double) m, 1 - bias - mbits);
    return sign * ldexp(1.0 + (double) m / (double) (1u << mbits), (int) e - bias);
}

/* table[fmt][k]: value of the non-negative pattern k, k up to and including +Inf, which stands
 * for the first value past the largest finite one (2^16 resp. 2^128) so that rounding to it
 * means overflow, as IEEE rounding does. */
static double *ref_tables[2];
static uint32_t ref_table_len[2];

static inline void ref_init(void) {
    for (int fmt = 0; fmt < 2; fmt++) {
        if (ref_tables[fmt] != NULL) continue;
        uint32_t inf = fmt == REF_F16 ? 0x7c00u : 0x7f80u;
        ref_table_len[fmt] = inf + 1;
        ref_tables[fmt] = malloc(sizeof(double) * (inf + 1));
        for (uint32_t k = 0; k < inf; k++) ref_tables[fmt][k] = ref_half_value(fmt, (uint16_t) k);
        ref_tables[fmt][inf] = fmt == REF_F16 ? 65536.0 : ldexp(1.0, 128);
    }
}

static inline void ref_free(void) {
    for (int fmt = 0; fmt < 2; fmt++) {
        free(ref_tables[fmt]);
        ref_tables[fmt] = NULL;
    }
}

/* Rounds v to the nearest value of the format, ties to even. */
static inline uint16_t ref_half_round(int fmt, double v) {
    const double *tab = ref_tables[fmt];
    uint32_t last = ref_table_len[fmt] - 1;
    if (isnan(v)) return fmt == REF_F16 ? 0x7e00 : 0x7fc0;
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    double a = fabs(v);
    if (a >= tab[last]) return (uint16_t) (sign | last);
    uint32_t lo = 0, hi = last; /* tab[lo] <= a < tab[hi] */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (tab[mid] <= a) lo = mid;
        else hi = mid;
    }
    double dl = a - tab[lo], dh = tab[hi] - a;
    uint32_t k = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
    return (uint16_t) (sign | k);
}

static inline uint64_t ref_get(const void *buf, size_t i, size_t esz) {
    uint64_t v = 0;
    memcpy(&v, (const char *) buf + i * esz, esz);
    return v;
}

static inline void ref_put(void *buf, size_t i, size_t esz, uint64_t v) {
    memcpy((char *) buf + i * esz, &v, esz);
}

static inline int ref_is_signed(pcclDataType_t dt) {
    return dt == pcclInt8 || dt == pcclInt16 || dt == pcclInt32 || dt == pcclInt64;
}

static inline size_t ref_esz(pcclDataType_t dt) {
    static const size_t s[12] = { 1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8 };
    return s[dt];
}

static inline int64_t ref_sext(uint64_t v, size_t esz) {
    unsigned sh = (unsigned) (64 - 8 * esz);
    return (int64_t) (v << sh) >> sh;
}

static inline float ref_f(uint64_t b) {
    uint32_t u = (uint32_t) b;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint64_t ref_fb(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline double ref_d(uint64_t b) {
    double d;
    memcpy(&d, &b, 8);
    return d;
}

static inline uint64_t ref_db(double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

/* a OP b on bit patterns; Avg is Sum here. Max/Min: NaN wins, the left operand on ties. */
static inline uint64_t ref_op(pcclDataType_t dt, pcclRedOp_t op, uint64_t a, uint64_t b) {
    size_t esz = ref_esz(dt);
    uint64_t mask = esz == 8 ? ~0ull : (1ull << (8 * esz)) - 1;
    int take_b;
    if (dt == pcclFloat16 || dt == pcclBFloat16) {
        int fmt = dt == pcclFloat16 ? REF_F16 : REF_BF16;
        double x = ref_half_value(fmt, (uint16_t) a), y = ref_half_value(fmt, (uint16_t) b);
        switch (op) {
        case pcclSum: case pcclAvg: return ref_half_round(fmt, x + y);
        case pcclProd: return ref_half_round(fmt, x * y);
        case pcclMax: take_b = !isnan(x) && (isnan(y) || y > x); return take_b ? b : a;
        case pcclMin: take_b = !isnan(x) && (isnan(y) || y < x); return take_b ? b : a;
        }
    } else if (dt == pcclFloat) {
        float x = ref_f(a), y = ref_f(b);
        switch (op) {
        case pcclSum: case pcclAvg: return ref_fb(x + y);
        case pcclProd: return ref_fb(x * y);
        case pcclMax: take_b = !isnan(x) && (isnan(y) || y > x); return take_b ? b : a;
        case pcclMin: take_b = !isnan(x) && (isnan(y) || y < x); return take_b ? b : a;
        }
    } else if (dt == pcclDouble) {
        double x = ref_d(a), y = ref_d(b);
        switch (op) {
        case pcclSum: case pcclAvg: return ref_db(x + y);
        case pcclProd: return ref_db(x * y);
        case pcclMax: take_b = !isnan(x) && (isnan(y) || y > x); return take_b ? b : a;
        case pcclMin: take_b = !isnan(x) && (isnan(y) || y < x); return take_b ? b : a;
        }
    } else {
        int sgn = ref_is_signed(dt);
        switch (op) {
        case pcclSum: case pcclAvg: return (a + b) & mask;
        case pcclProd: return (a * b) & mask;
        case pcclMax:
            take_b = sgn ? ref_sext(b, esz) > ref_sext(a, esz) : b > a;
            return take_b ? b : a;
        case pcclMin:
            take_b = sgn ? ref_sext(b, esz) < ref_sext(a, esz) : b < a;
            return take_b ? b : a;
        }
    }
    return 0;
}

/* Avg's division by n, done once per element (other ops: identity). */
static inline uint64_t ref_finish(pcclDataType_t dt, pcclRedOp_t op, uint64_t v, uint32_t n) {
    if (op != pcclAvg) return v;
    size_t esz = ref_esz(dt);
    uint64_t mask = esz == 8 ? ~0ull : (1ull << (8 * esz)) - 1;
    switch (dt) {
    case pcclFloat16:
    case pcclBFloat16: {
        int fmt = dt == pcclFloat16 ? REF_F16 : REF_BF16;
        float q = (float) ref_half_value(fmt, (uint16_t) v) / (float) n;
        return ref_half_round(fmt, (double) q);
    }
    case pcclFloat: return ref_fb(ref_f(v) / (float) n);
    case pcclDouble: return ref_db(ref_d(v) / (double) n);
    default:
        if (ref_is_signed(dt)) return (uint64_t) (ref_sext(v, esz) / (int64_t) n) & mask;
        return v / n;
    }
}

/* A deterministic pseudo-random 64-bit value for (a, b). */
static inline uint64_t ref_hash(uint64_t a, uint64_t b) {
    uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull);
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 32;
    return x;
}

/* Test input for element i of peer p: full-range integers; floats in [-8, 8) (Prod: [0.5, 1.5)
 * so that long products stay finite), halves rounded from those. */
static inline uint64_t ref_input(pcclDataType_t dt, pcclRedOp_t op, uint32_t p, size_t i) {
    uint64_t h = ref_hash(p + 1, i);
    size_t esz = ref_esz(dt);
    double v = op == pcclProd ? 0.5 + (double) (h % 1024) / 1024.0
                              : ((double) (h % 4096) - 2048.0) / 256.0;
    switch (dt) {
    case pcclFloat16: return ref_half_round(REF_F16, v);
    case pcclBFloat16: return ref_half_round(REF_BF16, v);
    case pcclFloat: return ref_fb((float) v);
    case pcclDouble: return ref_db(v + (double) (h >> 40) * 0x1p-30);
    default: return esz == 8 ? h : h & ((1ull << (8 * esz)) - 1);
    }
}

#endif /* PCCL_TESTS_REDUCE_REF_H */
