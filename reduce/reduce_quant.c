/* reduce_quant.c -- min-max and zero-point/scale quantization of one sub-chunk into a frame
 * and back (README.md "Quantization").
 *
 * A frame is a fixed header (algorithm, code width, flags, source dtype, element count, two
 * parameters in the working type) followed by one uint8 or uint16 code per element. Encoding
 * runs only on the sender, so its rounding is not part of the contract (only the accuracy
 * bound is). Decoding runs on every peer: it is a fixed sequence of IEEE operations in the
 * working type (float for float32 / float16 / bfloat16 sources, double for float64) followed
 * by selects on bit patterns, so one frame decodes to the same bits everywhere; BUILD.bazel
 * passes -ffp-contract=off so that no compiler fuses the multiply-add.
 *
 * The loops are plain so that gcc -O3 vectorizes them: non-finite tests and special codes are
 * integer selects on bit patterns, and the min/max scan keeps LANES independent minima. */
#include <float.h>
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/reduce_half.h"

#define QF_NONFINITE 1u
#define CODE_NONE 0x10000u /* no code has this value: disables an endpoint select */
#define LANES 16

/* ---- bit helpers for the two working types ------------------------------------------------ */

#define F_EXP 0x7f800000u
#define F_ABS 0x7fffffffu
#define F_PINF 0x7f800000u
#define F_NINF 0xff800000u
#define F_QNAN 0x7fc00000u
#define F_MAGIC 12582912.0f /* 1.5 * 2^23: (t + M) - M rounds 0 <= t < 2^22 to nearest even */

#define D_EXP 0x7ff0000000000000ull
#define D_ABS 0x7fffffffffffffffull
#define D_PINF 0x7ff0000000000000ull
#define D_NINF 0xfff0000000000000ull
#define D_QNAN 0x7ff8000000000000ull
#define D_MAGIC 6755399441055744.0 /* 1.5 * 2^52 */

static inline uint64_t d_bits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static inline double d_from_bits(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static inline uint64_t sel64(int cond, uint64_t a, uint64_t b) {
    uint64_t m = 0u - (uint64_t) (cond != 0);
    return (a & m) | (b & ~m);
}

static inline float ld_f32(float x) {
    return x;
}
static inline double ld_f64(double x) {
    return x;
}
static inline float st_f32(float x) {
    return x;
}
static inline double st_f64(double x) {
    return x;
}

/* ---- per-sub-chunk parameters -------------------------------------------------------------- */

/* Encode: t = (x * h - a) * inv + b, clamped to [0, lim], rounded to nearest even.
 * Decode: v = ((c - b) * s + a) * g, clamped to [cmin, cmax]; code e0 gives elo's bits, code
 * e1 ehi's; codes above lim (only in frames flagged non-finite) are -Inf, +Inf, NaN. */
#define PARAM_TYPES(W, SUF)                                                            \
    typedef struct enc_##SUF {                                                         \
        W h, a, inv, b, limf;                                                          \
        uint32_t L;                                                                    \
    } enc_##SUF##_t;                                                                   \
    typedef struct dec_##SUF {                                                         \
        W b, s, a, g, cmin, cmax, elo, ehi;                                            \
        uint32_t e0, e1, lim, L;                                                       \
    } dec_##SUF##_t;

PARAM_TYPES(float, f)
PARAM_TYPES(double, d)

/* MinMax geometry from (lo, hi), shared by encoder and decoder. The grid is lo + c * step
 * with step = (hi - lo) / lim, computed on values scaled by a power of two h and scaled back by
 * g = 1/h: h = 1/2 when hi - lo overflows, h = BIG when the step would be subnormal (the
 * range is then so small that the scaled values stay tiny: scaling is exact both ways but for
 * the final rounding to a subnormal). lo == hi gives step 0: every finite element is code 0. */
#define MM_DERIVE(W, SUF, WMAX, WMIN, BIG)                                             \
    static void mm_derive_##SUF(W lo, W hi, uint32_t lim, W *h, W *a, W *step, W *g) { \
        W hh = 1, r = hi - lo;                                                         \
        if (!(r <= WMAX)) {                                                            \
            hh = (W) 0.5;                                                              \
            r = hi * hh - lo * hh;                                                     \
        } else if (r > 0 && r / (W) lim < WMIN) {                                      \
            hh = BIG;                                                                  \
            r = hi * hh - lo * hh;                                                     \
        }                                                                              \
        *h = hh;                                                                       \
        *a = lo * hh;                                                                  \
        *step = r / (W) lim;                                                           \
        *g = 1 / hh;                                                                   \
    }

MM_DERIVE(float, f, FLT_MAX, FLT_MIN, 0x1p64f)
MM_DERIVE(double, d, DBL_MAX, DBL_MIN, 0x1p128)

/* Encoder parameters and the two header values for one sub-chunk whose finite elements lie
 * in [lo, hi] (lo = hi = 0 when there are none). */
#define ENC_PARAMS(W, SUF, WMAX, WMIN, WTRUEMIN, BIG, MAGIC)                        \
    static void enc_params_##SUF(pcclQuantizationAlgorithm_t algo, W lo, W hi,         \
                                 uint32_t lim, uint32_t L, enc_##SUF##_t *e, W *p0,    \
                                 W *p1) {                                              \
        e->limf = (W) lim;                                                             \
        e->L = L;                                                                      \
        if (algo == pcclQuantMinMax) {                                                 \
            W step, g;                                                                 \
            mm_derive_##SUF(lo, hi, lim, &e->h, &e->a, &step, &g);                     \
            e->inv = step > 0 ? 1 / step : (W) 0;                                      \
            e->b = 0;                                                                  \
            *p0 = lo;                                                                  \
            *p1 = hi;                                                                  \
            return;                                                                    \
        }                                                                              \
        e->h = 1;                                                                      \
        e->a = 0;                                                                      \
        if (lo == hi) { /* constant: scale = the constant, zero point 0, code 1 */     \
            e->inv = 0;                                                                \
            e->b = 1;                                                                  \
            *p0 = lo;                                                                  \
            *p1 = 0;                                                                   \
            return;                                                                    \
        }                                                                              \
        W l = lo < 0 ? lo : (W) 0, u = hi > 0 ? hi : (W) 0, r = u - l, s;             \
        if (r <= WMAX) s = r / (W) lim;                                                \
        else s = ((u * (W) 0.5 - l * (W) 0.5) / (W) lim) * 2;                          \
        if (!(s >= WTRUEMIN)) s = WTRUEMIN;                                            \
        /* A subnormal scale: encode on values scaled by BIG (exact, they are tiny). */ \
        if (s < WMIN) e->h = BIG;                                                      \
        W inv = 1 / (s * e->h), z = -(l * e->h) * inv;                                 \
        z = z > 0 ? z : (W) 0;                                                         \
        z = z < (W) lim ? z : (W) lim;                                                 \
        z = (z + MAGIC) - MAGIC;                                                       \
        e->inv = inv;                                                                  \
        e->b = z;                                                                      \
        *p0 = s;                                                                       \
        *p1 = z;                                                                       \
    }

ENC_PARAMS(float, f, FLT_MAX, FLT_MIN, FLT_TRUE_MIN, 0x1p64f, F_MAGIC)
ENC_PARAMS(double, d, DBL_MAX, DBL_MIN, DBL_TRUE_MIN, 0x1p128, D_MAGIC)

/* Decoder parameters from the header alone. maxt: the source type's largest finite value. */
#define DEC_PARAMS(W, SUF)                                                             \
    static void dec_params_##SUF(pcclQuantizationAlgorithm_t algo, W p0, W p1,         \
                                 uint32_t lim, uint32_t L, W maxt, dec_##SUF##_t *d) { \
        d->lim = lim;                                                                  \
        d->L = L;                                                                      \
        if (algo == pcclQuantMinMax) {                                                 \
            W h, a, step, g;                                                           \
            mm_derive_##SUF(p0, p1, lim, &h, &a, &step, &g);                           \
            d->b = 0;                                                                  \
            d->s = step;                                                               \
            d->a = a;                                                                  \
            d->g = g;                                                                  \
            d->cmin = d->elo = p0;                                                     \
            d->cmax = d->ehi = p1;                                                     \
            d->e0 = 0;                                                                 \
            d->e1 = lim;                                                               \
            return;                                                                    \
        }                                                                              \
        d->b = p1;                                                                     \
        d->s = p0;                                                                     \
        d->a = (W) -0.0; /* x + -0 == x for every x, -0 included */                    \
        d->g = 1;                                                                      \
        d->cmin = -maxt;                                                               \
        d->cmax = maxt;                                                                \
        d->elo = d->ehi = 0;                                                           \
        d->e0 = d->e1 = CODE_NONE;                                                     \
    }

DEC_PARAMS(float, f)
DEC_PARAMS(double, d)

/* ---- loops ---------------------------------------------------------------------------------- */

/* Smallest and largest finite element; non-finite ones are replaced by +Inf (for the minimum)
 * and -Inf (for the maximum) and only raise the flag. */
#define SCAN(NAME, TT, W, UW, LOAD, BITS, FROM, SEL, EXP, PINF, NINF)                  \
    static void NAME(const void *srcv, size_t n, W *lo_out, W *hi_out, int *nf_out) {  \
        const TT *src = srcv;                                                          \
        W lo[LANES], hi[LANES];                                                        \
        UW nf[LANES];                                                                  \
        for (int k = 0; k < LANES; k++) {                                              \
            lo[k] = FROM(PINF);                                                        \
            hi[k] = FROM(NINF);                                                        \
            nf[k] = 0;                                                                 \
        }                                                                              \
        size_t i = 0;                                                                  \
        for (; i + LANES <= n; i += LANES)                                             \
            for (int k = 0; k < LANES; k++) SCAN_STEP(k, src[i + k], W, UW, LOAD, BITS, FROM, SEL, EXP, PINF, NINF) \
        for (; i < n; i++) SCAN_STEP(0, src[i], W, UW, LOAD, BITS, FROM, SEL, EXP, PINF, NINF) \
        W l = lo[0], h = hi[0];                                                        \
        UW f = nf[0];                                                                  \
        for (int k = 1; k < LANES; k++) {                                              \
            l = lo[k] < l ? lo[k] : l;                                                 \
            h = hi[k] > h ? hi[k] : h;                                                 \
            f |= nf[k];                                                                \
        }                                                                              \
        *lo_out = l;                                                                   \
        *hi_out = h;                                                                   \
        *nf_out = f != 0;                                                              \
    }

#define SCAN_STEP(k, XIN, W, UW, LOAD, BITS, FROM, SEL, EXP, PINF, NINF)              \
    {                                                                                  \
        W x = LOAD(XIN);                                                               \
        UW u = BITS(x);                                                                \
        int fin = (u & EXP) != EXP;                                                    \
        W xl = FROM(SEL(fin, u, PINF)), xh = FROM(SEL(fin, u, NINF));                  \
        lo[k] = xl < lo[k] ? xl : lo[k];                                               \
        hi[k] = xh > hi[k] ? xh : hi[k];                                               \
        nf[k] |= (UW) !fin;                                                            \
    }

SCAN(scan_f32, float, float, uint32_t, ld_f32, reduce_f32_bits, reduce_f32_from_bits,
     reduce_select_u32, F_EXP, F_PINF, F_NINF)
SCAN(scan_f16, uint16_t, float, uint32_t, reduce_f16_to_f32, reduce_f32_bits,
     reduce_f32_from_bits, reduce_select_u32, F_EXP, F_PINF, F_NINF)
SCAN(scan_bf16, uint16_t, float, uint32_t, reduce_bf16_to_f32, reduce_f32_bits,
     reduce_f32_from_bits, reduce_select_u32, F_EXP, F_PINF, F_NINF)
SCAN(scan_f64, double, double, uint64_t, ld_f64, d_bits, d_from_bits, sel64, D_EXP, D_PINF,
     D_NINF)

/* Finite elements: the clamped, rounded grid position. Non-finite ones: L for NaN, L - 1 for
 * +Inf, L - 2 for -Inf (they occur only in frames flagged non-finite, where lim = L - 3). A
 * NaN t (0 * Inf cannot happen for finite x; garbage never reaches here) would clamp to 0. */
#define ENC(NAME, TT, QT, W, UW, SUF, LOAD, BITS, SEL, EXP, ABS, SHIFT, MAGIC)         \
    static void NAME(void *qv, const void *srcv, size_t n, const enc_##SUF##_t *e) {   \
        QT *q = qv;                                                                    \
        const TT *src = srcv;                                                          \
        const W h = e->h, a = e->a, inv = e->inv, b = e->b, limf = e->limf;            \
        const uint32_t L = e->L;                                                       \
        for (size_t i = 0; i < n; i++) {                                               \
            W x = LOAD(src[i]);                                                        \
            W t = (x * h - a) * inv + b;                                               \
            t = t > 0 ? t : (W) 0;                                                     \
            t = t < limf ? t : limf;                                                   \
            uint32_t c = (uint32_t) (int32_t) ((t + MAGIC) - MAGIC);                   \
            UW u = BITS(x);                                                            \
            int fin = (u & EXP) != EXP, nan = (u & ABS) > EXP;                         \
            uint32_t sp = reduce_select_u32(nan, L,                                    \
                                            reduce_select_u32((int) (u >> SHIFT), L - 2, L - 1)); \
            q[i] = (QT) reduce_select_u32(fin, c, sp);                                 \
        }                                                                              \
    }

#define ENC_F(NAME, TT, QT, LOAD)                                                      \
    ENC(NAME, TT, QT, float, uint32_t, f, LOAD, reduce_f32_bits, reduce_select_u32,    \
        F_EXP, F_ABS, 31, F_MAGIC)
#define ENC_D(NAME, QT)                                                                \
    ENC(NAME, double, QT, double, uint64_t, d, ld_f64, d_bits, sel64, D_EXP, D_ABS,    \
        63, D_MAGIC)

ENC_F(enc_f32_u8, float, uint8_t, ld_f32)
ENC_F(enc_f32_u16, float, uint16_t, ld_f32)
ENC_F(enc_f16_u8, uint16_t, uint8_t, reduce_f16_to_f32)
ENC_F(enc_f16_u16, uint16_t, uint16_t, reduce_f16_to_f32)
ENC_F(enc_bf16_u8, uint16_t, uint8_t, reduce_bf16_to_f32)
ENC_F(enc_bf16_u16, uint16_t, uint16_t, reduce_bf16_to_f32)
ENC_D(enc_f64_u8, uint8_t)
ENC_D(enc_f64_u16, uint16_t)

#define DEC(NAME, TT, QT, W, UW, SUF, STORE, BITS, FROM, SEL, QNAN, PINF, NINF)        \
    static void NAME(void *dstv, const void *qv, size_t n, const dec_##SUF##_t *d) {   \
        TT *dst = dstv;                                                                \
        const QT *q = qv;                                                              \
        const W b = d->b, s = d->s, a = d->a, g = d->g, cmin = d->cmin, cmax = d->cmax; \
        const UW blo = BITS(d->elo), bhi = BITS(d->ehi);                               \
        const uint32_t e0 = d->e0, e1 = d->e1, lim = d->lim, L = d->L;                 \
        for (size_t i = 0; i < n; i++) {                                               \
            uint32_t c = q[i];                                                         \
            W v = (((W) c - b) * s + a) * g;                                           \
            v = v > cmin ? v : cmin;                                                   \
            v = v < cmax ? v : cmax;                                                   \
            UW vb = BITS(v);                                                           \
            vb = SEL(c == e0, blo, vb);                                                \
            vb = SEL(c == e1, bhi, vb);                                                \
            UW sp = SEL(c == L, QNAN, SEL(c == L - 1, PINF, NINF));                    \
            vb = SEL(c > lim, sp, vb);                                                 \
            dst[i] = STORE(FROM(vb));                                                  \
        }                                                                              \
    }

#define DEC_F(NAME, TT, QT, STORE)                                                     \
    DEC(NAME, TT, QT, float, uint32_t, f, STORE, reduce_f32_bits, reduce_f32_from_bits, \
        reduce_select_u32, F_QNAN, F_PINF, F_NINF)
#define DEC_D(NAME, QT)                                                                \
    DEC(NAME, double, QT, double, uint64_t, d, st_f64, d_bits, d_from_bits, sel64,     \
        D_QNAN, D_PINF, D_NINF)

DEC_F(dec_f32_u8, float, uint8_t, st_f32)
DEC_F(dec_f32_u16, float, uint16_t, st_f32)
DEC_F(dec_f16_u8, uint16_t, uint8_t, reduce_f32_to_f16)
DEC_F(dec_f16_u16, uint16_t, uint16_t, reduce_f32_to_f16)
DEC_F(dec_bf16_u8, uint16_t, uint8_t, reduce_f32_to_bf16)
DEC_F(dec_bf16_u16, uint16_t, uint16_t, reduce_f32_to_bf16)
DEC_D(dec_f64_u8, uint8_t)
DEC_D(dec_f64_u16, uint16_t)

/* ---- frames --------------------------------------------------------------------------------- */

static int is_source_dtype(pcclDataType_t dtype) {
    return dtype == pcclFloat || dtype == pcclDouble || dtype == pcclFloat16 ||
           dtype == pcclBFloat16;
}

int reduce_quant_check(pcclDataType_t dtype, const pcclQuantizationOptions_t *q) {
    if (q == NULL || q->algorithm == pcclQuantNone) return REDUCE_OK;
    if (q->algorithm != pcclQuantMinMax && q->algorithm != pcclQuantZeroPointScale)
        return REDUCE_EINVAL;
    if (q->quantized_datatype != pcclUint8 && q->quantized_datatype != pcclUint16)
        return REDUCE_EINVAL;
    return is_source_dtype(dtype) ? REDUCE_OK : REDUCE_EINVAL;
}

static int quant_on(pcclDataType_t dtype, const pcclQuantizationOptions_t *q) {
    return q != NULL && q->algorithm != pcclQuantNone && reduce_quant_check(dtype, q) == REDUCE_OK;
}

size_t reduce_quant_header_bytes(pcclDataType_t dtype) {
    if (!is_source_dtype(dtype)) return 0;
    return dtype == pcclDouble ? 24 : 16;
}

size_t reduce_quant_frame_bytes(pcclDataType_t dtype, const pcclQuantizationOptions_t *q,
                                size_t count) {
    if (!quant_on(dtype, q)) return 0;
    size_t csz = q->quantized_datatype == pcclUint16 ? 2 : 1;
    if (count > (SIZE_MAX - 64) / csz) return 0;
    return reduce_quant_header_bytes(dtype) + count * csz;
}

static void put_header(uint8_t *f, const pcclQuantizationOptions_t *q, pcclDataType_t dtype,
                       int nonfinite, uint32_t count) {
    f[0] = (uint8_t) q->algorithm;
    f[1] = q->quantized_datatype == pcclUint16 ? 16 : 8;
    f[2] = nonfinite ? QF_NONFINITE : 0;
    f[3] = (uint8_t) dtype;
    memcpy(f + 4, &count, sizeof count);
}

int reduce_quant_encode(pcclDataType_t dtype, const pcclQuantizationOptions_t *q, void *frame,
                        const void *src, size_t count) {
    if (!quant_on(dtype, q) || frame == NULL || (count > 0 && src == NULL) ||
        count > UINT32_MAX || ((uintptr_t) frame & 1u) != 0)
        return REDUCE_EINVAL;
    uint8_t *f = frame;
    void *codes = f + reduce_quant_header_bytes(dtype);
    int wide = q->quantized_datatype == pcclUint16;
    uint32_t L = wide ? 65535u : 255u;
    int nf = 0;
    if (dtype == pcclDouble) {
        double lo = 0, hi = 0, p0, p1;
        if (count > 0) scan_f64(src, count, &lo, &hi, &nf);
        if (!(lo <= hi)) lo = hi = 0; /* no finite element */
        uint32_t lim = L - (nf ? 3u : 0u);
        enc_d_t e;
        enc_params_d(q->algorithm, lo, hi, lim, L, &e, &p0, &p1);
        if (wide) enc_f64_u16(codes, src, count, &e);
        else enc_f64_u8(codes, src, count, &e);
        memcpy(f + 8, &p0, sizeof p0);
        memcpy(f + 16, &p1, sizeof p1);
    } else {
        float lo = 0, hi = 0, p0, p1;
        if (count > 0) {
            if (dtype == pcclFloat) scan_f32(src, count, &lo, &hi, &nf);
            else if (dtype == pcclFloat16) scan_f16(src, count, &lo, &hi, &nf);
            else scan_bf16(src, count, &lo, &hi, &nf);
        }
        if (!(lo <= hi)) lo = hi = 0;
        uint32_t lim = L - (nf ? 3u : 0u);
        enc_f_t e;
        enc_params_f(q->algorithm, lo, hi, lim, L, &e, &p0, &p1);
        switch (dtype) {
        case pcclFloat16:
            if (wide) enc_f16_u16(codes, src, count, &e);
            else enc_f16_u8(codes, src, count, &e);
            break;
        case pcclBFloat16:
            if (wide) enc_bf16_u16(codes, src, count, &e);
            else enc_bf16_u8(codes, src, count, &e);
            break;
        default:
            if (wide) enc_f32_u16(codes, src, count, &e);
            else enc_f32_u8(codes, src, count, &e);
            break;
        }
        memcpy(f + 8, &p0, sizeof p0);
        memcpy(f + 12, &p1, sizeof p1);
    }
    put_header(f, q, dtype, nf, (uint32_t) count);
    return REDUCE_OK;
}

int reduce_quant_decode(pcclDataType_t dtype, const pcclQuantizationOptions_t *q, void *dst,
                        const void *frame, size_t count) {
    if (!quant_on(dtype, q) || frame == NULL || (count > 0 && dst == NULL) ||
        count > UINT32_MAX || ((uintptr_t) frame & 1u) != 0)
        return REDUCE_EINVAL;
    const uint8_t *f = frame;
    int wide = q->quantized_datatype == pcclUint16;
    uint32_t n32;
    memcpy(&n32, f + 4, sizeof n32);
    if (f[0] != (uint8_t) q->algorithm || f[1] != (wide ? 16 : 8) || (f[2] & ~QF_NONFINITE) != 0 ||
        f[3] != (uint8_t) dtype || n32 != count)
        return REDUCE_EINVAL;
    const void *codes = f + reduce_quant_header_bytes(dtype);
    uint32_t L = wide ? 65535u : 255u, lim = L - ((f[2] & QF_NONFINITE) ? 3u : 0u);
    if (dtype == pcclDouble) {
        double p0, p1;
        memcpy(&p0, f + 8, sizeof p0);
        memcpy(&p1, f + 16, sizeof p1);
        dec_d_t d;
        dec_params_d(q->algorithm, p0, p1, lim, L, DBL_MAX, &d);
        if (wide) dec_f64_u16(dst, codes, count, &d);
        else dec_f64_u8(dst, codes, count, &d);
        return REDUCE_OK;
    }
    float p0, p1;
    memcpy(&p0, f + 8, sizeof p0);
    memcpy(&p1, f + 12, sizeof p1);
    dec_f_t d;
    switch (dtype) {
    case pcclFloat16:
        dec_params_f(q->algorithm, p0, p1, lim, L, 65504.0f, &d);
        if (wide) dec_f16_u16(dst, codes, count, &d);
        else dec_f16_u8(dst, codes, count, &d);
        break;
    case pcclBFloat16:
        dec_params_f(q->algorithm, p0, p1, lim, L, reduce_f32_from_bits(0x7f7f0000u), &d);
        if (wide) dec_bf16_u16(dst, codes, count, &d);
        else dec_bf16_u8(dst, codes, count, &d);
        break;
    default:
        dec_params_f(q->algorithm, p0, p1, lim, L, FLT_MAX, &d);
        if (wide) dec_f32_u16(dst, codes, count, &d);
        else dec_f32_u8(dst, codes, count, &d);
        break;
    }
    return REDUCE_OK;
}
