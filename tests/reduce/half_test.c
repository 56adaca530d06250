/* fp16 / bf16 conversions against an independent reference: every half value decoded with
 * ldexp, and float -> half rounding checked against a binary search over all finite values of
 * the format (ties to even), on a sweep of float bit patterns and on every midpoint between
 * neighbouring halves and the floats right next to it. */
#include <math.h>

#include "reduce/reduce_half.h"
#include "tests/common/check.h"
#include "tests/reduce/ref.h"

static uint16_t to_half(int fmt, float f) {
    return fmt == REF_F16 ? reduce_f32_to_f16(f) : reduce_f32_to_bf16(f);
}

static float from_half(int fmt, uint16_t h) {
    return fmt == REF_F16 ? reduce_f16_to_f32(h) : reduce_bf16_to_f32(h);
}

static int is_nan_half(int fmt, uint16_t h) {
    return fmt == REF_F16 ? (h & 0x7fff) > 0x7c00 : (h & 0x7fff) > 0x7f80;
}

/* What the converter must give for f: RNE for numbers, a quiet NaN keeping the top payload. */
static uint16_t want(int fmt, float f) {
    if (!isnan(f)) return ref_half_round(fmt, (double) f);
    uint32_t u = reduce_f32_bits(f);
    if (fmt == REF_F16) return (uint16_t) (((u >> 16) & 0x8000) | 0x7e00 | ((u >> 13) & 0x3ff));
    return (uint16_t) ((u >> 16) | 0x40);
}

static void check_widen_exhaustive(int fmt) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = from_half(fmt, (uint16_t) h);
        double r = ref_half_value(fmt, (uint16_t) h);
        int ok;
        if (is_nan_half(fmt, (uint16_t) h)) {
            /* NaN: stays NaN, sign and payload carried into the top bits. */
            uint32_t u = reduce_f32_bits(f);
            uint32_t shift = fmt == REF_F16 ? 13 : 16;
            uint32_t mmask = fmt == REF_F16 ? 0x3ffu : 0x7fu;
            ok = isnan(f) && (u >> 31) == (h >> 15) && ((u >> shift) & mmask) == (h & mmask);
        } else {
            ok = (double) f == r && !signbit(f) == !signbit(r);
        }
        if (!ok && bad++ < 5) fprintf(stderr, "fmt %d widen %04x -> %a (want %a)\n", fmt, h, f, r);
        /* Round trip: exact for numbers; NaNs come back quiet. */
        uint16_t back = to_half(fmt, f);
        uint16_t expect = (uint16_t) h;
        if (is_nan_half(fmt, (uint16_t) h)) expect |= fmt == REF_F16 ? 0x0200 : 0x0040;
        if (back != expect && bad++ < 5) fprintf(stderr, "fmt %d round trip %04x -> %04x\n", fmt, h, back);
    }
    CHECK(bad == 0);
}

static int check_one(int fmt, float f) {
    uint16_t got = to_half(fmt, f), w = want(fmt, f);
    if (got != w) {
        fprintf(stderr, "fmt %d narrow %a (%08x) -> %04x, want %04x\n", fmt, f, reduce_f32_bits(f), got, w);
        return 1;
    }
    return 0;
}

static void check_narrow(int fmt) {
    int bad = 0;
    /* A sweep over the float bit patterns, both signs, every exponent. */
    for (uint64_t u = 0; u < (1ull << 32) && bad < 5; u += 4093)
        bad += check_one(fmt, reduce_f32_from_bits((uint32_t) u));
    /* Midpoints between neighbours (exact in float), and one float-ulp either side; the last
     * finite value's midpoint with the overflow threshold must round to Inf. */
    uint32_t inf = fmt == REF_F16 ? 0x7c00 : 0x7f80;
    for (uint32_t h = 0; h < inf && bad < 5; h++) {
        double lo = ref_half_value(fmt, (uint16_t) h);
        double hi = h + 1 == inf ? (fmt == REF_F16 ? 65536.0 : ldexp(1.0, 128))
                                 : ref_half_value(fmt, (uint16_t) (h + 1));
        float mid = (float) ((lo + hi) / 2);
        float vals[] = { (float) lo, mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY) };
        for (int k = 0; k < 4; k++) {
            bad += check_one(fmt, vals[k]);
            bad += check_one(fmt, -vals[k]);
        }
    }
    /* Specials. */
    float specials[] = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f, 1e-40f, 3.4e38f,
                         65504.0f, 65519.99f, 65520.0f, 5.96e-8f, 2.98e-8f, 2.99e-8f };
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) bad += check_one(fmt, specials[k]);
    /* A signalling float NaN with a payload only in the low bits becomes a quiet NaN. */
    uint16_t q = to_half(fmt, reduce_f32_from_bits(0x7f800001u));
    CHECK(is_nan_half(fmt, q));
    CHECK(bad == 0);
}

int main(void) {
    ref_init();
    CHECK_EQ_U64(reduce_f32_to_f16(1.0f), 0x3c00);
    CHECK_EQ_U64(reduce_f32_to_f16(65504.0f), 0x7bff);
    CHECK_EQ_U64(reduce_f32_to_f16(65520.0f), 0x7c00);     /* tie at the top rounds to Inf */
    CHECK_EQ_U64(reduce_f32_to_f16(0x1p-25f), 0x0000);     /* tie to even: 0 */
    CHECK_EQ_U64(reduce_f32_to_f16(0x1.8p-24f), 0x0002);   /* 1.5 ulp: tie to even: 2 */
    CHECK_EQ_U64(reduce_f32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ_U64(reduce_f32_to_bf16(0x1.01p0f), 0x3f80);   /* 1 + 2^-8: tie to even */
    CHECK_EQ_U64(reduce_f32_to_bf16(0x1.03p0f), 0x3f82);   /* 1 + 3*2^-8: tie to even, up */
    CHECK_EQ_U64(reduce_f32_to_bf16(0x1.fffffep127f), 0x7f80); /* rounds past the max: Inf */
    for (int fmt = 0; fmt < 2; fmt++) {
        check_widen_exhaustive(fmt);
        check_narrow(fmt);
    }
    ref_free();
    return check_exit();
}
