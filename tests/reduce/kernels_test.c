/* The element-wise kernels against the reference in ref.h: every dtype x op on random bit
 * patterns (NaN, Inf, subnormals and wrap-around included) and on ordinary values, with the
 * three allowed aliasings and shifted starts; then the documented corner cases one by one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"
#include "tests/common/check.h"
#include "tests/reduce/ref.h"

static int is_float(pcclDataType_t dt) {
    return dt >= pcclFloat16;
}

static int bits_nan(pcclDataType_t dt, uint64_t v) {
    switch (dt) {
    case pcclFloat16: return (v & 0x7fff) > 0x7c00;
    case pcclBFloat16: return (v & 0x7fff) > 0x7f80;
    case pcclFloat: return isnan(ref_f(v));
    case pcclDouble: return isnan(ref_d(v));
    default: return 0;
    }
}

/* Bit-exact, except that an arithmetic NaN result may carry any payload (the hardware picks
 * it); Max/Min must pick the exact operand. */
static int same(pcclDataType_t dt, pcclRedOp_t op, uint64_t got, uint64_t want) {
    if (got == want) return 1;
    return is_float(dt) && op != pcclMax && op != pcclMin && bits_nan(dt, want) && bits_nan(dt, got);
}

static uint64_t sample(pcclDataType_t dt, pcclRedOp_t op, uint32_t who, size_t i) {
    uint64_t h = ref_hash(who + 77, i);
    size_t esz = ref_esz(dt);
    if (h % 4 == 0) return esz == 8 ? ref_hash(h, 1) : ref_hash(h, 1) & ((1ull << (8 * esz)) - 1);
    return ref_input(dt, op, who, i);
}

static void test_random(void) {
    static const size_t counts[] = { 0, 1, 3, 17, 64, 1000 };
    enum { DISTINCT, DST_IS_ACC, DST_IS_X };
    int bad = 0;
    for (int dt = 0; dt < 12; dt++) {
        size_t esz = ref_esz((pcclDataType_t) dt);
        for (int op = 0; op < 5; op++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                for (int alias = 0; alias < 3; alias++)
                    for (size_t shift = 0; shift < 4; shift += 3) {
                        size_t n = counts[c];
                        char *a = malloc((n + 4) * esz), *x = malloc((n + 4) * esz);
                        char *d = malloc((n + 4) * esz), *want = malloc((n + 4) * esz);
                        REQUIRE(a && x && d && want);
                        char *pa = a + shift * esz, *px = x + shift * esz, *pd = d + shift * esz;
                        for (size_t i = 0; i < n; i++) {
                            ref_put(pa, i, esz, sample((pcclDataType_t) dt, (pcclRedOp_t) op, 1, i));
                            ref_put(px, i, esz, sample((pcclDataType_t) dt, (pcclRedOp_t) op, 2, i));
                            ref_put(want, i, esz, ref_op((pcclDataType_t) dt, (pcclRedOp_t) op,
                                                         ref_get(pa, i, esz), ref_get(px, i, esz)));
                        }
                        void *dst = alias == DISTINCT ? (void *) pd : alias == DST_IS_ACC ? (void *) pa : (void *) px;
                        int rc = alias == DST_IS_ACC && shift == 0
                                     ? reduce_accumulate((pcclDataType_t) dt, (pcclRedOp_t) op, dst, px, n)
                                     : reduce_combine((pcclDataType_t) dt, (pcclRedOp_t) op, dst, pa, px, n);
                        CHECK_EQ_U64(rc, REDUCE_OK);
                        for (size_t i = 0; i < n; i++) {
                            uint64_t g = ref_get(dst, i, esz), w = ref_get(want, i, esz);
                            if (!same((pcclDataType_t) dt, (pcclRedOp_t) op, g, w)) {
                                if (bad++ < 10)
                                    fprintf(stderr, "dtype %d op %d n %zu alias %d [%zu]: got %llx want %llx\n",
                                            dt, op, n, alias, i, (unsigned long long) g, (unsigned long long) w);
                            }
                        }
                        free(a);
                        free(x);
                        free(d);
                        free(want);
                    }
    }
    CHECK(bad == 0);
}

static void test_finish(void) {
    static const uint32_t ns[] = { 1, 2, 3, 7, 300, 1u << 20 };
    int bad = 0;
    for (int dt = 0; dt < 12; dt++) {
        size_t esz = ref_esz((pcclDataType_t) dt);
        for (int op = 0; op < 5; op++)
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                size_t n = 333;
                char *b = malloc(n * esz), *want = malloc(n * esz);
                REQUIRE(b && want);
                for (size_t i = 0; i < n; i++) {
                    uint64_t v = sample((pcclDataType_t) dt, pcclSum, 3, i);
                    ref_put(b, i, esz, v);
                    ref_put(want, i, esz, ref_finish((pcclDataType_t) dt, (pcclRedOp_t) op, v, ns[k]));
                }
                CHECK_EQ_U64(reduce_finish((pcclDataType_t) dt, (pcclRedOp_t) op, b, n, ns[k]), REDUCE_OK);
                for (size_t i = 0; i < n; i++) {
                    uint64_t g = ref_get(b, i, esz), w = ref_get(want, i, esz);
                    if (!same((pcclDataType_t) dt, pcclAvg, g, w) && bad++ < 10)
                        fprintf(stderr, "finish dtype %d op %d n %u [%zu]: got %llx want %llx\n", dt, op,
                                ns[k], i, (unsigned long long) g, (unsigned long long) w);
                }
                free(b);
                free(want);
            }
    }
    CHECK(bad == 0);
}

#define COMBINE1(DT, OP, T, A, B, EXPECT)                                    \
    do {                                                                     \
        T a_ = (A), b_ = (B), d_;                                            \
        CHECK(reduce_combine(DT, OP, &d_, &a_, &b_, 1) == REDUCE_OK);        \
        T e_ = (EXPECT);                                                     \
        CHECK(memcmp(&d_, &e_, sizeof(T)) == 0);                             \
    } while (0)

static void test_corners(void) {
    /* Integers wrap. */
    COMBINE1(pcclInt8, pcclSum, int8_t, 127, 1, -128);
    COMBINE1(pcclUint8, pcclSum, uint8_t, 255, 1, 0);
    COMBINE1(pcclInt16, pcclProd, int16_t, -32768, -1, -32768);
    COMBINE1(pcclUint16, pcclProd, uint16_t, 65535, 65535, 1);
    COMBINE1(pcclInt32, pcclSum, int32_t, INT32_MAX, 1, INT32_MIN);
    COMBINE1(pcclInt64, pcclProd, int64_t, INT64_MIN, -1, INT64_MIN);
    COMBINE1(pcclUint64, pcclSum, uint64_t, UINT64_MAX, 2, 1);
    COMBINE1(pcclInt8, pcclMax, int8_t, -5, 3, 3);
    COMBINE1(pcclUint32, pcclMin, uint32_t, 7, UINT32_MAX, 7);
    COMBINE1(pcclInt64, pcclMin, int64_t, -1, INT64_MAX, -1);
    /* Avg is Sum until the finish step. */
    COMBINE1(pcclInt32, pcclAvg, int32_t, 5, 6, 11);

    /* Integer Avg truncates toward zero; the divisor may exceed the type. */
    int32_t s32[4] = { -7, 7, -1, INT32_MIN };
    CHECK(reduce_finish(pcclInt32, pcclAvg, s32, 4, 2) == REDUCE_OK);
    CHECK(s32[0] == -3 && s32[1] == 3 && s32[2] == 0 && s32[3] == INT32_MIN / 2);
    int8_t s8[2] = { 100, -100 };
    CHECK(reduce_finish(pcclInt8, pcclAvg, s8, 2, 300) == REDUCE_OK);
    CHECK(s8[0] == 0 && s8[1] == 0);
    uint8_t u8[1] = { 250 };
    CHECK(reduce_finish(pcclUint8, pcclAvg, u8, 1, 3) == REDUCE_OK);
    CHECK(u8[0] == 83);
    int64_t s64[1] = { INT64_MIN };
    CHECK(reduce_finish(pcclInt64, pcclAvg, s64, 1, 3) == REDUCE_OK);
    CHECK(s64[0] == INT64_MIN / 3);
    /* Other ops: untouched. */
    CHECK(reduce_finish(pcclInt32, pcclSum, s32, 4, 2) == REDUCE_OK);
    CHECK(s32[0] == -3);

    /* NaN wins Max/Min; between two NaNs (and on +0/-0 ties) the accumulator wins. */
    float qa = ref_f(0x7fc00001u), qb = ref_f(0xffc00002u);
    COMBINE1(pcclFloat, pcclMax, float, qa, 1.0f, qa);
    COMBINE1(pcclFloat, pcclMax, float, 1.0f, qb, qb);
    COMBINE1(pcclFloat, pcclMin, float, qa, qb, qa);
    COMBINE1(pcclFloat, pcclMin, float, -INFINITY, qb, qb);
    COMBINE1(pcclFloat, pcclMax, float, 0.0f, -0.0f, 0.0f);
    COMBINE1(pcclFloat, pcclMax, float, -0.0f, 0.0f, -0.0f);
    COMBINE1(pcclDouble, pcclMin, double, 2.0, ref_d(0x7ff8000000000003ull), ref_d(0x7ff8000000000003ull));
    COMBINE1(pcclFloat16, pcclMax, uint16_t, 0x7e01, 0x3c00, 0x7e01);
    COMBINE1(pcclFloat16, pcclMax, uint16_t, 0x3c00, 0xfe02, 0xfe02);
    COMBINE1(pcclFloat16, pcclMin, uint16_t, 0x7d00, 0x7e02, 0x7d00); /* signalling NaN kept as is */
    COMBINE1(pcclBFloat16, pcclMin, uint16_t, 0x3f80, 0x7fc1, 0x7fc1);
    COMBINE1(pcclBFloat16, pcclMax, uint16_t, 0x8000, 0x0000, 0x8000);

    /* fp16/bf16 round to nearest even once per step. */
    COMBINE1(pcclFloat16, pcclSum, uint16_t, 0x6800, 0x3c00, 0x6800); /* 2048 + 1 = 2048 */
    COMBINE1(pcclFloat16, pcclSum, uint16_t, 0x6800, 0x4200, 0x6802); /* 2048 + 3 = 2052 */
    COMBINE1(pcclFloat16, pcclSum, uint16_t, 0x7bff, 0x4c00, 0x7c00); /* 65504 + 16: Inf */
    COMBINE1(pcclFloat16, pcclSum, uint16_t, 0x7bff, 0x4b80, 0x7bff); /* 65504 + 15 */
    COMBINE1(pcclFloat16, pcclProd, uint16_t, 0x0001, 0x3800, 0x0000); /* 2^-24 * 0.5: tie to 0 */
    COMBINE1(pcclBFloat16, pcclSum, uint16_t, 0x4380, 0x3f80, 0x4380); /* 256 + 1 = 256 */
    COMBINE1(pcclBFloat16, pcclSum, uint16_t, 0x4380, 0x4040, 0x4382); /* 256 + 3 = 260 */
    uint16_t h[2] = { 0x4200, 0x3c00 }; /* 3/2 = 1.5, 1/2 = 0.5 */
    CHECK(reduce_finish(pcclFloat16, pcclAvg, h, 2, 2) == REDUCE_OK);
    CHECK(h[0] == 0x3e00 && h[1] == 0x3800);
    float f[2] = { 3.0f, 1.0f };
    CHECK(reduce_finish(pcclFloat, pcclAvg, f, 2, 3) == REDUCE_OK);
    CHECK(f[0] == 1.0f && f[1] == 1.0f / 3.0f);

    /* Invalid arguments. */
    int32_t z = 0;
    CHECK(reduce_combine((pcclDataType_t) 12, pcclSum, &z, &z, &z, 1) == REDUCE_EINVAL);
    CHECK(reduce_combine(pcclInt32, (pcclRedOp_t) 5, &z, &z, &z, 1) == REDUCE_EINVAL);
    CHECK(reduce_finish(pcclInt32, pcclAvg, &z, 1, 0) == REDUCE_EINVAL);
    CHECK(reduce_dtype_size(pcclDouble) == 8 && reduce_dtype_size(pcclBFloat16) == 2);
    CHECK(reduce_dtype_size((pcclDataType_t) -1) == 0);
}

int main(void) {
    ref_init();
    test_random();
    test_finish();
    test_corners();
    ref_free();
    return check_exit();
}
