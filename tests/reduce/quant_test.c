/* The quantization codec on its own: which combinations are valid, frame sizes, the round-trip
 * accuracy bound of README.md for every dtype x code width x algorithm on many kinds of
 * sub-chunks, exact endpoints (MinMax), exact zero (ZeroPointScale), constant sub-chunks,
 * NaN / Inf codes, overflowing and subnormal ranges, and malformed headers. */
#include <stdio.h>
#include <stdlib.h>

#include "tests/common/check.h"
#include "tests/reduce/quant_common.h"

#define MAXN 3000

static unsigned char frame[REDUCE_QUANT_MAX_HEADER + 2 * MAXN + 64] __attribute__((aligned(64)));
static unsigned char src[8 * MAXN] __attribute__((aligned(64)));
static unsigned char dst[8 * MAXN] __attribute__((aligned(64)));
static unsigned char dst2[8 * MAXN] __attribute__((aligned(64)));

static void test_validity(void) {
    for (int dt = -1; dt <= 12; dt++)
        for (int qt = -1; qt <= 12; qt++)
            for (int al = -1; al <= 3; al++) {
                pcclQuantizationOptions_t q = { (pcclDataType_t) qt, (pcclQuantizationAlgorithm_t) al };
                int src_ok = dt == pcclFloat || dt == pcclDouble || dt == pcclFloat16 || dt == pcclBFloat16;
                int want = al == pcclQuantNone ||
                           ((al == pcclQuantMinMax || al == pcclQuantZeroPointScale) &&
                            (qt == pcclUint8 || qt == pcclUint16) && src_ok);
                CHECK_EQ_U64(reduce_quant_check((pcclDataType_t) dt, &q) == REDUCE_OK, want);
                size_t fb = reduce_quant_frame_bytes((pcclDataType_t) dt, &q, 10);
                if (want && al != pcclQuantNone)
                    CHECK_EQ_U64(fb, (dt == pcclDouble ? 24 : 16) + 10 * (qt == pcclUint16 ? 2 : 1));
                else
                    CHECK_EQ_U64(fb, 0);
                if (!want || al == pcclQuantNone) {
                    CHECK(reduce_quant_encode((pcclDataType_t) dt, &q, frame, src, 4) == REDUCE_EINVAL);
                    CHECK(reduce_quant_decode((pcclDataType_t) dt, &q, dst, frame, 4) == REDUCE_EINVAL);
                }
            }
    CHECK(reduce_quant_check(pcclFloat, NULL) == REDUCE_OK);
    CHECK_EQ_U64(reduce_quant_header_bytes(pcclFloat), 16);
    CHECK_EQ_U64(reduce_quant_header_bytes(pcclFloat16), 16);
    CHECK_EQ_U64(reduce_quant_header_bytes(pcclBFloat16), 16);
    CHECK_EQ_U64(reduce_quant_header_bytes(pcclDouble), 24);
    CHECK_EQ_U64(reduce_quant_header_bytes(pcclInt32), 0);
}

/* Fills n elements of one kind of sub-chunk. */
static void fill(pcclDataType_t dt, int kind, size_t n) {
    double big = qt_max(dt);
    double scale = pow(10.0, -3 + 6 * qt_unit());
    double base = (qt_unit() - 0.5) * 2000;
    for (size_t i = 0; i < n; i++) {
        double v;
        switch (kind) {
        case 0: v = (qt_unit() * 2 - 1) * scale; break;                    /* symmetric */
        case 1: v = 1 + qt_unit() * scale; break;                          /* one-sided */
        case 2: v = base + (qt_unit() - 0.5) * 1e-3; break;                /* tiny relative range */
        case 3: v = (qt_unit() * 2 - 1) * 1e-300 * (dt == pcclDouble); break; /* subnormal (double) */
        case 4: v = (qt_unit() * 2 - 1) * big; break;                      /* overflowing range */
        case 5: v = (qt_rand() & 1 ? 1 : -1) * pow(10.0, (qt_unit() - 0.5) * (dt == pcclFloat16 ? 8 : 60)); break;
        case 6: v = -(qt_unit() * scale); break;                           /* negative only */
        default: v = (double) (qt_below(7)) - 3; break;                    /* few distinct */
        }
        if (kind == 3 && dt != pcclDouble)
            v = (qt_unit() * 2 - 1) * (dt == pcclFloat16 ? 1e-6 : 1e-39);
        qt_put(dt, src, i, v);
    }
    if (kind == 4 && n >= 2) { /* the very extremes */
        qt_put(dt, src, 0, big);
        qt_put(dt, src, 1, -big);
    }
}

static void roundtrip(pcclDataType_t dt, pcclDataType_t code, pcclQuantizationAlgorithm_t al,
                      size_t n, int nonfinite) {
    int before = check_failures;
    pcclQuantizationOptions_t q = { code, al };
    CHECK(reduce_quant_encode(dt, &q, frame, src, n) == REDUCE_OK);
    CHECK(reduce_quant_decode(dt, &q, dst, frame, n) == REDUCE_OK);
    CHECK_EQ_U64(frame[2], (unsigned) nonfinite);
    /* Decoding is a pure function of the frame. */
    CHECK(reduce_quant_decode(dt, &q, dst2, frame, n) == REDUCE_OK);
    CHECK(memcmp(dst, dst2, n * reduce_dtype_size(dt)) == 0);
    long double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        long double x = qt_get(dt, src, i);
        if (!qt_isfinite(x)) continue;
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
    }
    int any = lo <= hi;
    long double R = !any ? 0 : al == pcclQuantMinMax ? hi - lo : fmaxl(hi, 0) - fminl(lo, 0);
    long double M = !any ? 0 : fmaxl(fabsl(lo), fabsl(hi));
    long double bound = qt_event_bound(dt, qt_lim(code, nonfinite), R, M);
    size_t esz = reduce_dtype_size(dt);
    for (size_t i = 0; i < n; i++) {
        long double x = qt_get(dt, src, i), v = qt_get(dt, dst, i);
        if (isnan(x)) {
            CHECK(isnan(v));
            continue;
        }
        if (isinf(x)) {
            CHECK(v == x);
            continue;
        }
        CHECK(qt_isfinite(v));
        CHECK(fabsl(v - x) <= bound);
        if (fabsl(v - x) > bound && check_failures - before < 4)
            fprintf(stderr, "  x=%.20Lg v=%.20Lg err=%Lg bound=%Lg\n", x, v, fabsl(v - x), bound);
        if (al == pcclQuantMinMax) {
            CHECK(v >= lo && v <= hi);
            /* the extremes come back bit for bit */
            if (x == lo && lo == hi) CHECK(memcmp(dst + i * esz, src + i * esz, esz) == 0);
        }
        if (lo == hi) CHECK(v == x); /* constant: exact */
        if (al == pcclQuantZeroPointScale && x == 0) CHECK(v == 0);
    }
    if (al == pcclQuantMinMax && any) {
        /* The first minimum and maximum element decode to themselves exactly. */
        for (size_t i = 0; i < n; i++) {
            long double x = qt_get(dt, src, i);
            if (x == lo || x == hi) CHECK(qt_get(dt, dst, i) == x);
        }
    }
    if (check_failures != before)
        fprintf(stderr, "  roundtrip dtype=%d code=%d algo=%d n=%zu nonfinite=%d lo=%Lg hi=%Lg\n",
                dt, code, al, n, nonfinite, lo, hi);
}

static void test_roundtrips(void) {
    static const size_t ns[] = { 1, 2, 3, 15, 16, 17, 100, 1000, MAXN };
    for (int d = 0; d < 4; d++)
        for (int c = 0; c < 2; c++)
            for (int a = 0; a < 2; a++)
                for (int kind = 0; kind < 8; kind++)
                    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
                        for (int nf = 0; nf < 2; nf++) {
                            pcclDataType_t dt = QT_SRC[d];
                            size_t n = ns[k];
                            fill(dt, kind, n);
                            if (nf) {
                                for (size_t i = 0; i < n; i += 1 + qt_below(7)) {
                                    int which = (int) qt_below(3);
                                    if (which == 0) qt_put_nan(dt, src, i);
                                    else qt_put(dt, src, i, which == 1 ? INFINITY : -INFINITY);
                                }
                            }
                            roundtrip(dt, QT_CODE[c], QT_ALGO[a], n, nf);
                        }
}

/* Constants of every flavour decode to their own bits, with both algorithms. */
static void test_constants(void) {
    static const double consts[] = { 0.0, -0.0, 1.0, -3.25, 1e-40, -1e-310, 1e30, 65504, 1e300 };
    for (int d = 0; d < 4; d++)
        for (int c = 0; c < 2; c++)
            for (int a = 0; a < 2; a++)
                for (size_t k = 0; k < sizeof consts / sizeof consts[0]; k++) {
                    pcclDataType_t dt = QT_SRC[d];
                    size_t n = 37, esz = reduce_dtype_size(dt);
                    for (size_t i = 0; i < n; i++) qt_put(dt, src, i, consts[k]);
                    pcclQuantizationOptions_t q = { QT_CODE[c], QT_ALGO[a] };
                    CHECK(reduce_quant_encode(dt, &q, frame, src, n) == REDUCE_OK);
                    CHECK(reduce_quant_decode(dt, &q, dst, frame, n) == REDUCE_OK);
                    CHECK(memcmp(dst, src, n * esz) == 0);
                    /* With a NaN in the middle the rest is still exact. */
                    qt_put_nan(dt, src, 5);
                    qt_put(dt, src, 6, INFINITY);
                    CHECK(reduce_quant_encode(dt, &q, frame, src, n) == REDUCE_OK);
                    CHECK(reduce_quant_decode(dt, &q, dst, frame, n) == REDUCE_OK);
                    CHECK(isnan(qt_get(dt, dst, 5)));
                    CHECK(isinf(qt_get(dt, dst, 6)) && qt_get(dt, dst, 6) > 0);
                    CHECK(memcmp(dst, src, 5 * esz) == 0);
                    CHECK(memcmp(dst + 7 * esz, src + 7 * esz, (n - 7) * esz) == 0);
                }
    /* Only non-finite elements, and nothing at all. */
    for (int d = 0; d < 4; d++) {
        pcclDataType_t dt = QT_SRC[d];
        pcclQuantizationOptions_t q = { pcclUint8, pcclQuantMinMax };
        qt_put_nan(dt, src, 0);
        qt_put(dt, src, 1, INFINITY);
        qt_put(dt, src, 2, -INFINITY);
        CHECK(reduce_quant_encode(dt, &q, frame, src, 3) == REDUCE_OK);
        CHECK(reduce_quant_decode(dt, &q, dst, frame, 3) == REDUCE_OK);
        CHECK(isnan(qt_get(dt, dst, 0)));
        CHECK(qt_get(dt, dst, 1) == INFINITY);
        CHECK(qt_get(dt, dst, 2) == -INFINITY);
        CHECK(reduce_quant_encode(dt, &q, frame, src, 0) == REDUCE_OK);
        CHECK(reduce_quant_decode(dt, &q, dst, frame, 0) == REDUCE_OK);
    }
    /* Codes of the reserved values, and NaN canonical: positive quiet NaN. */
    {
        float s[4] = { NAN, INFINITY, -INFINITY, 2.0f }, d[4];
        uint32_t neg_nan = 0xffc01234u;
        memcpy(&s[0], &neg_nan, 4);
        pcclQuantizationOptions_t q = { pcclUint8, pcclQuantMinMax };
        CHECK(reduce_quant_encode(pcclFloat, &q, frame, s, 4) == REDUCE_OK);
        CHECK_EQ_U64(frame[16], 255);
        CHECK_EQ_U64(frame[17], 254);
        CHECK_EQ_U64(frame[18], 253);
        CHECK(reduce_quant_decode(pcclFloat, &q, d, frame, 4) == REDUCE_OK);
        uint32_t u;
        memcpy(&u, &d[0], 4);
        CHECK_EQ_U64(u, 0x7fc00000u);
        CHECK(d[3] == 2.0f);
    }
}

/* The header is checked against what the receiver expects; a frame with another algorithm,
 * width, flags, dtype or count is refused and nothing is written. */
static void test_malformed(void) {
    float s[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, d[8];
    pcclQuantizationOptions_t q = { pcclUint8, pcclQuantMinMax };
    CHECK(reduce_quant_encode(pcclFloat, &q, frame, s, 8) == REDUCE_OK);
    unsigned char good[REDUCE_QUANT_MAX_HEADER + 16];
    memcpy(good, frame, sizeof good);
    for (int byte = 0; byte < 8; byte++) {
        memcpy(frame, good, sizeof good);
        frame[byte] ^= (unsigned char) (byte == 2 ? 2 : 1);
        memset(d, 0x5a, sizeof d);
        CHECK(reduce_quant_decode(pcclFloat, &q, d, frame, 8) == REDUCE_EINVAL);
        for (int i = 0; i < 8; i++) {
            uint32_t u;
            memcpy(&u, &d[i], 4);
            CHECK_EQ_U64(u, 0x5a5a5a5au);
        }
    }
    memcpy(frame, good, sizeof good);
    CHECK(reduce_quant_decode(pcclFloat, &q, d, frame, 7) == REDUCE_EINVAL);
    pcclQuantizationOptions_t z = { pcclUint8, pcclQuantZeroPointScale };
    CHECK(reduce_quant_decode(pcclFloat, &z, d, frame, 8) == REDUCE_EINVAL);
    pcclQuantizationOptions_t w = { pcclUint16, pcclQuantMinMax };
    CHECK(reduce_quant_decode(pcclFloat, &w, d, frame, 8) == REDUCE_EINVAL);
    CHECK(reduce_quant_decode(pcclBFloat16, &q, d, frame, 8) == REDUCE_EINVAL);
    CHECK(reduce_quant_decode(pcclFloat, &q, d, frame, 8) == REDUCE_OK);
    CHECK(reduce_quant_encode(pcclFloat, &q, frame + 1, s, 8) == REDUCE_EINVAL); /* misaligned */
    /* Garbage parameters under a valid header: some values, no crash, no UB. */
    for (int it = 0; it < 2000; it++) {
        for (size_t i = 0; i < sizeof good; i++) frame[i] = (unsigned char) qt_rand();
        int d_i = (int) qt_below(4), c_i = (int) qt_below(2), a_i = (int) qt_below(2);
        pcclDataType_t dt = QT_SRC[d_i];
        frame[0] = (unsigned char) QT_ALGO[a_i];
        frame[1] = c_i ? 16 : 8;
        frame[2] &= 1;
        frame[3] = (unsigned char) dt;
        uint32_t n = 4;
        memcpy(frame + 4, &n, 4);
        pcclQuantizationOptions_t g = { QT_CODE[c_i], QT_ALGO[a_i] };
        CHECK(reduce_quant_decode(dt, &g, dst, frame, 4) == REDUCE_OK);
    }
}

int main(void) {
    test_validity();
    test_roundtrips();
    test_constants();
    test_malformed();
    return check_exit();
}
