/* ar_ref.c: see ar_ref.h. Written apart from reduce/: its own generator, its own fp16/bf16
 * rounding (double arithmetic with rint, not bit tricks), its own folds. */
#include "tests/allreduce/ar_ref.h"

#include <math.h>
#include <string.h>

static const size_t sizes[12] = {1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8};

size_t ar_dtype_size(int dtype) { return dtype >= 0 && dtype < 12 ? sizes[dtype] : 0; }

static int is_signed_int(int d) { return d == pcclInt8 || d == pcclInt16 || d == pcclInt32 || d == pcclInt64; }
static int is_half(int d) { return d == pcclFloat16 || d == pcclBFloat16; }
static int is_float(int d) { return d == pcclFloat16 || d == pcclBFloat16 || d == pcclFloat || d == pcclDouble; }

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* ---- 16-bit floats: p mantissa bits, exponent bias, e bits of exponent ---------------------- */
typedef struct hfmt {
    int p, bias, ebits;
} hfmt_t;
static const hfmt_t F16 = {10, 15, 5}, BF16 = {7, 127, 8};
static hfmt_t fmt(int d) { return d == pcclFloat16 ? F16 : BF16; }

static float h_decode(uint16_t b, hfmt_t f) {
    int emask = (1 << f.ebits) - 1;
    int e = (b >> f.p) & emask, m = b & ((1 << f.p) - 1);
    double v;
    if (e == 0) v = ldexp(m, 1 - f.bias - f.p);
    else if (e == emask) v = m ? NAN : INFINITY;
    else v = ldexp((double) ((1 << f.p) + m), e - f.bias - f.p);
    return (float) ((b >> 15) ? -v : v);
}

/* Round to nearest, ties to even. */
static uint16_t h_encode(float x, hfmt_t f) {
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    uint16_t inf = (uint16_t) (((1 << f.ebits) - 1) << f.p);
    if (isnan(x)) return (uint16_t) (sign | inf | (1 << (f.p - 1)));
    double a = fabs((double) x);
    int emin = 1 - f.bias, emax = f.bias;
    if (a >= ldexp(2.0 - ldexp(1, -(f.p + 1)), emax)) return sign | inf;
    if (a < ldexp(1, emin)) /* subnormal (a code of 2^p becomes the smallest normal by itself) */
        return (uint16_t) (sign | (uint16_t) rint(a / ldexp(1, emin - f.p)));
    int e;
    frexp(a, &e);
    double q = ldexp(1, e - 1 - f.p);
    double r = rint(a / q) * q;
    frexp(r, &e);
    int E = e - 1;
    uint32_t m = (uint32_t) (r / ldexp(1, E - f.p)) - (1u << f.p);
    return (uint16_t) (sign | (uint16_t) ((E + f.bias) << f.p) | (uint16_t) m);
}

/* ---- inputs -------------------------------------------------------------------------------- */
static double gen_float(uint64_t h, int op, int kind) {
    double u = (double) (h >> 11) * 0x1p-53; /* [0, 1) */
    if (kind == AR_RANDOM) return op == pcclProd ? 0.5 + 1.5 * u : 2.0 * u - 1.0;
    switch (op) {
    case pcclProd: {
        static const double pw[6] = {-2, -1, -0.5, 0.5, 1, 2};
        return pw[h % 6];
    }
    case pcclMax:
    case pcclMin: {
        double v = (2.0 * u - 1.0) * 1000.0;
        return v == 0 ? 1.0 : v;
    }
    default:
        return (double) ((int) (h % 17) - 8);
    }
}

static void put(void *buf, size_t i, int d, uint64_t bits) {
    switch (sizes[d]) {
    case 1: ((uint8_t *) buf)[i] = (uint8_t) bits; break;
    case 2: ((uint16_t *) buf)[i] = (uint16_t) bits; break;
    case 4: ((uint32_t *) buf)[i] = (uint32_t) bits; break;
    default: ((uint64_t *) buf)[i] = bits; break;
    }
}

static uint64_t input_bits(size_t i, int d, int op, int kind, uint32_t seed) {
    uint64_t h = mix(((uint64_t) seed << 40) ^ (uint64_t) i ^ ((uint64_t) d << 32) ^ ((uint64_t) op << 36));
    if (!is_float(d)) return h;
    if (is_half(d) && kind == AR_EXACT && (op == pcclMax || op == pcclMin)) {
        hfmt_t f = fmt(d);
        uint16_t b = (uint16_t) h;
        uint16_t inf = (uint16_t) (((1 << f.ebits) - 1) << f.p);
        if ((b & inf) == inf) b &= (uint16_t) ~(1u << f.p); /* no Inf or NaN */
        if ((b & 0x7fff) == 0) b |= 1;                        /* no zeros: +0 / -0 ties depend on order */
        return b;
    }
    double v = gen_float(h, op, kind);
    if (d == pcclDouble) {
        uint64_t b;
        memcpy(&b, &v, 8);
        return b;
    }
    float f = (float) v;
    if (d == pcclFloat) {
        uint32_t b;
        memcpy(&b, &f, 4);
        return b;
    }
    return h_encode(f, fmt(d));
}

void ar_fill_input(void *buf, size_t count, int dtype, int op, int kind, uint32_t seed) {
    for (size_t i = 0; i < count; i++) put(buf, i, dtype, input_bits(i, dtype, op, kind, seed));
}

/* ---- folds --------------------------------------------------------------------------------- */
static uint64_t fold_int(uint64_t a, uint64_t x, int d, int op) {
    int w = (int) sizes[d] * 8;
    uint64_t mask = w == 64 ? ~0ull : (1ull << w) - 1;
    a &= mask;
    x &= mask;
    int64_t sa = (int64_t) (a << (64 - w)) >> (64 - w), sx = (int64_t) (x << (64 - w)) >> (64 - w);
    switch (op) {
    case pcclSum:
    case pcclAvg: return (a + x) & mask;
    case pcclProd: return (a * x) & mask;
    case pcclMax: return (is_signed_int(d) ? sx > sa : x > a) ? x : a;
    default: return (is_signed_int(d) ? sx < sa : x < a) ? x : a;
    }
}

static uint64_t finish_int(uint64_t a, int d, uint32_t n) {
    int w = (int) sizes[d] * 8;
    uint64_t mask = w == 64 ? ~0ull : (1ull << w) - 1;
    if (!is_signed_int(d)) return (a & mask) / n;
    int64_t s = (int64_t) (a << (64 - w)) >> (64 - w);
    return (uint64_t) (s / (int64_t) n) & mask;
}

static double fold_f64(double a, double x, int op) {
    switch (op) {
    case pcclSum:
    case pcclAvg: return a + x;
    case pcclProd: return a * x;
    case pcclMax: return x > a ? x : a;
    default: return x < a ? x : a;
    }
}

static float fold_f32(float a, float x, int op) {
    switch (op) {
    case pcclSum:
    case pcclAvg: return a + x;
    case pcclProd: return a * x;
    case pcclMax: return x > a ? x : a;
    default: return x < a ? x : a;
    }
}

/* One element: the fold of x[order[0]], x[order[1]], ... as the ring does it. */
static uint64_t reduce_elem(size_t i, int d, int op, int kind, const uint32_t *seeds, const uint32_t *order,
                            uint32_t n) {
    uint64_t acc = input_bits(i, d, op, kind, seeds[order[0]]);
    for (uint32_t k = 1; k < n; k++) {
        uint64_t x = input_bits(i, d, op, kind, seeds[order[k]]);
        if (!is_float(d)) {
            acc = fold_int(acc, x, d, op);
        } else if (d == pcclDouble) {
            double a, b;
            memcpy(&a, &acc, 8);
            memcpy(&b, &x, 8);
            a = fold_f64(a, b, op);
            memcpy(&acc, &a, 8);
        } else if (d == pcclFloat) {
            uint32_t ab = (uint32_t) acc, xb = (uint32_t) x;
            float a, b;
            memcpy(&a, &ab, 4);
            memcpy(&b, &xb, 4);
            a = fold_f32(a, b, op);
            memcpy(&ab, &a, 4);
            acc = ab;
        } else {
            hfmt_t f = fmt(d);
            float a = h_decode((uint16_t) acc, f), b = h_decode((uint16_t) x, f);
            if (op == pcclMax || op == pcclMin) acc = fold_f32(a, b, op) == a ? acc : x; /* the winner's bits */
            else acc = h_encode(fold_f32(a, b, op), f);
        }
    }
    if (op != pcclAvg) return acc;
    if (!is_float(d)) return finish_int(acc, d, n);
    if (d == pcclDouble) {
        double a;
        memcpy(&a, &acc, 8);
        a = a / (double) n;
        memcpy(&acc, &a, 8);
        return acc;
    }
    if (d == pcclFloat) {
        uint32_t ab = (uint32_t) acc;
        float a;
        memcpy(&a, &ab, 4);
        a = a / (float) n;
        memcpy(&ab, &a, 4);
        return ab;
    }
    return h_encode(h_decode((uint16_t) acc, fmt(d)) / (float) n, fmt(d));
}

static size_t chunk_start(size_t count, uint32_t n, uint32_t c) {
    size_t base = count / n, rem = count % n;
    return (size_t) c * base + (c < rem ? c : rem);
}

void ar_expected(void *out, size_t count, int dtype, int op, int kind, const uint32_t *seeds, uint32_t n) {
    uint32_t order[64];
    for (uint32_t c = 0; c < n; c++) {
        /* Chunk c starts at rank c+1 and ends at its owner c. EXACT inputs do not care. */
        for (uint32_t k = 0; k < n; k++) order[k] = (c + 1 + k) % n;
        size_t lo = chunk_start(count, n, c), hi = chunk_start(count, n, c + 1);
        for (size_t i = lo; i < hi; i++) put(out, i, dtype, reduce_elem(i, dtype, op, kind, seeds, order, n));
    }
}

uint64_t ar_hash(const void *buf, size_t len) {
    const uint8_t *p = buf;
    uint64_t h = 0x243f6a8885a308d3ull ^ len;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < len; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return mix(h);
}

void ar_ring_bytes(size_t count, size_t esz, uint32_t n, uint32_t r, uint64_t *tx, uint64_t *rx) {
    uint64_t total = (uint64_t) count * esz;
#define LEN(c) ((uint64_t) (chunk_start(count, n, (c) + 1) - chunk_start(count, n, (c))) * esz)
    *tx = (total - LEN(r)) + (total - LEN((r + 1) % n));
    *rx = (total - LEN((r + n - 1) % n)) + (total - LEN(r));
#undef LEN
}
