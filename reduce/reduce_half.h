/* reduce_half.h -- float16 / bfloat16 <-> float32 conversions, branch-free so that loops over
 * them vectorize. Internal to reduce/ (and its tests, and later the quantizers).
 *
 * half -> float is exact for every input (NaN payloads kept, shifted up).
 * float -> half rounds to nearest, ties to even; overflow gives +-Inf; NaN stays NaN with the
 * quiet bit set and the top payload bits kept. No dependence on the FP environment beyond the
 * default rounding mode: the only float arithmetic used never sees float32 subnormals, so
 * FTZ/DAZ do not change the result. */
#ifndef PCCL_REDUCE_HALF_H
#define PCCL_REDUCE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t reduce_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float reduce_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* cond ? a : b without a branch: keeps gcc from sinking the float arithmetic of one side into
 * a branch, which it then may not if-convert back (-ftrapping-math) and the loop stays scalar. */
static inline uint32_t reduce_select_u32(int cond, uint32_t a, uint32_t b) {
    uint32_t m = 0u - (uint32_t) (cond != 0);
    return (a & m) | (b & ~m);
}

/* IEEE binary16 -> binary32. Subnormal halves are normalised by one float subtraction
 * (2^-14 * (1 + m/1024) - 2^-14 = m * 2^-24, exact). */
static inline float reduce_f16_to_f32(uint16_t h) {
    uint32_t em = (uint32_t) (h & 0x7fffu) << 13;
    uint32_t exp = em & (0x7c00u << 13);
    uint32_t nrm = em + ((uint32_t) (127 - 15) << 23);
    uint32_t infnan = nrm + ((uint32_t) (128 - 16) << 23);
    uint32_t sub = reduce_f32_bits(reduce_f32_from_bits(nrm + (1u << 23)) -
                                   reduce_f32_from_bits(113u << 23));
    uint32_t r = reduce_select_u32(exp == (0x7c00u << 13), infnan,
                                   reduce_select_u32(exp == 0, sub, nrm));
    return reduce_f32_from_bits(r | ((uint32_t) (h & 0x8000u) << 16));
}

/* binary32 -> binary16, round to nearest even. Results that are half subnormals come from one
 * float addition of 0.5 (which puts the 10 mantissa bits at the bottom and rounds them RNE);
 * normal results add the rounding bias 0xfff plus the lowest kept bit (ties to even). */
static inline uint16_t reduce_f32_to_f16(float f) {
    uint32_t u = reduce_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    u &= 0x7fffffffu;
    uint32_t nan = 0x7e00u | ((u >> 13) & 0x3ffu);
    uint32_t magic = 126u << 23; /* 0.5f */
    uint32_t sub = reduce_f32_bits(reduce_f32_from_bits(u) + reduce_f32_from_bits(magic)) - magic;
    uint32_t nrm = (u + ((uint32_t) (15 - 127) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
    uint32_t r = reduce_select_u32(u > 0x7f800000u, nan,
                 reduce_select_u32(u >= (143u << 23), 0x7c00u,
                   reduce_select_u32(u < (113u << 23), sub, nrm)));
    return (uint16_t) (r | sign);
}

/* bfloat16 is the top half of a binary32: widening is a shift. */
static inline float reduce_bf16_to_f32(uint16_t h) {
    return reduce_f32_from_bits((uint32_t) h << 16);
}

/* binary32 -> bfloat16, round to nearest even; overflow rounds to +-Inf by carrying into the
 * exponent; NaN keeps its top payload bits and gets the quiet bit. */
static inline uint16_t reduce_f32_to_bf16(float f) {
    uint32_t u = reduce_f32_bits(f);
    uint32_t rne = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = (u >> 16) | 0x40u;
    return (uint16_t) ((u & 0x7fffffffu) > 0x7f800000u ? nan : rne);
}

#endif /* PCCL_REDUCE_HALF_H */
