/* reduce_half.c -- fp16 / bf16 kernels: widen both operands to float32 (exact), apply the op
 * in float32, round back to nearest even. For Sum and Prod this equals the correctly rounded
 * half-precision result (float32 carries more than 2p+2 bits for both formats), so one step of
 * the ring rounds exactly once. Max/Min compare in float32 and copy the winner's original bits:
 * no rounding at all, NaN payloads kept. */
#include "reduce/reduce_half.h"
#include "reduce/reduce_kernels_int.h"

/* NaN wins; among two NaNs, or on ties (+0/-0), the accumulator wins. */
#define HALF_SELECT(NAME, WIDEN, CMP)                                                  \
    void NAME(void *dv, const void *av, const void *bv, size_t n) {                    \
        uint16_t *d = dv;                                                              \
        const uint16_t *a = av, *b = bv;                                               \
        for (size_t i = 0; i < n; i++) {                                               \
            uint32_t ha = a[i], hb = b[i];                                             \
            float fa = WIDEN(a[i]), fb = WIDEN(b[i]);                                  \
            int take_b = (fa == fa) & ((fb != fb) | (fb CMP fa));                      \
            d[i] = (uint16_t) reduce_select_u32(take_b, hb, ha);                       \
        }                                                                              \
    }

#define HALF_ARITH(NAME, WIDEN, NARROW, EXPR)                                          \
    void NAME(void *dv, const void *av, const void *bv, size_t n) {                    \
        uint16_t *d = dv;                                                              \
        const uint16_t *a = av, *b = bv;                                               \
        for (size_t i = 0; i < n; i++) {                                               \
            float fa = WIDEN(a[i]), fb = WIDEN(b[i]);                                  \
            d[i] = NARROW(EXPR);                                                       \
        }                                                                              \
    }

#define HALF_DIV(NAME, WIDEN, NARROW)                                                  \
    void NAME(void *bufv, size_t n, uint32_t divisor) {                                \
        uint16_t *buf = bufv;                                                          \
        float q = (float) divisor;                                                     \
        for (size_t i = 0; i < n; i++) buf[i] = NARROW(WIDEN(buf[i]) / q);             \
    }

HALF_ARITH(reduce_f16_sum, reduce_f16_to_f32, reduce_f32_to_f16, fa + fb)
HALF_ARITH(reduce_f16_prod, reduce_f16_to_f32, reduce_f32_to_f16, fa * fb)
HALF_SELECT(reduce_f16_max, reduce_f16_to_f32, >)
HALF_SELECT(reduce_f16_min, reduce_f16_to_f32, <)
HALF_DIV(reduce_f16_div, reduce_f16_to_f32, reduce_f32_to_f16)

HALF_ARITH(reduce_bf16_sum, reduce_bf16_to_f32, reduce_f32_to_bf16, fa + fb)
HALF_ARITH(reduce_bf16_prod, reduce_bf16_to_f32, reduce_f32_to_bf16, fa * fb)
HALF_SELECT(reduce_bf16_max, reduce_bf16_to_f32, >)
HALF_SELECT(reduce_bf16_min, reduce_bf16_to_f32, <)
HALF_DIV(reduce_bf16_div, reduce_bf16_to_f32, reduce_f32_to_bf16)
