/* reduce_kernels.c -- element-wise kernels for the integer and float dtypes, the dispatch table
 * over all twelve dtypes, and the Avg finish step.
 *
 * Integers wrap: arithmetic runs in an unsigned type at least as wide as int (no signed
 * overflow, no int promotion of uint16 products). Floats follow IEEE in their own precision.
 * Max/Min: a NaN wins; between two NaNs, or on ties such as +0/-0, the accumulator (left
 * operand) wins. The loops are plain so that gcc -O3 vectorizes them; dst may equal acc or x,
 * which gcc's runtime alias check lets through to the vector path. */
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/reduce_kernels_int.h"

#define INT_KERNELS(NAME, T, U)                                                        \
    static void NAME##_sum(void *dv, const void *av, const void *bv, size_t n) {       \
        T *d = dv;                                                                     \
        const T *a = av, *b = bv;                                                      \
        for (size_t i = 0; i < n; i++) d[i] = (T) ((U) a[i] + (U) b[i]);               \
    }                                                                                  \
    static void NAME##_prod(void *dv, const void *av, const void *bv, size_t n) {      \
        T *d = dv;                                                                     \
        const T *a = av, *b = bv;                                                      \
        for (size_t i = 0; i < n; i++) d[i] = (T) ((U) a[i] * (U) b[i]);               \
    }                                                                                  \
    static void NAME##_max(void *dv, const void *av, const void *bv, size_t n) {       \
        T *d = dv;                                                                     \
        const T *a = av, *b = bv;                                                      \
        for (size_t i = 0; i < n; i++) d[i] = b[i] > a[i] ? b[i] : a[i];               \
    }                                                                                  \
    static void NAME##_min(void *dv, const void *av, const void *bv, size_t n) {       \
        T *d = dv;                                                                     \
        const T *a = av, *b = bv;                                                      \
        for (size_t i = 0; i < n; i++) d[i] = b[i] < a[i] ? b[i] : a[i];               \
    }

#define FLOAT_KERNELS(NAME, T)                                                         \
    static void NAME##_sum(void *dv, const void *av, const void *bv, size_t n) {       \
        T *d = dv;                                                                     \
        const T *a = av, *b = bv;                                                      \
        for (size_t i = 0; i < n; i++) d[i] = a[i] + b[i];                             \
    }                                                                                  \
    static void NAME##_prod(void *dv, const void *av, const void *bv, size_t n) {      \
        T *d = dv;                                                                     \
        const T *a = av, *b = bv;                                                      \
        for (size_t i = 0; i < n; i++) d[i] = a[i] * b[i];                             \
    }                                                                                  \
    static void NAME##_max(void *dv, const void *av, const void *bv, size_t n) {       \
        T *d = dv;                                                                     \
        const T *a = av, *b = bv;                                                      \
        for (size_t i = 0; i < n; i++) {                                               \
            T x = a[i], y = b[i];                                                      \
            d[i] = (x != x) ? x : (y != y) ? y : (y > x ? y : x);                      \
        }                                                                              \
    }                                                                                  \
    static void NAME##_min(void *dv, const void *av, const void *bv, size_t n) {       \
        T *d = dv;                                                                     \
        const T *a = av, *b = bv;                                                      \
        for (size_t i = 0; i < n; i++) {                                               \
            T x = a[i], y = b[i];                                                      \
            d[i] = (x != x) ? x : (y != y) ? y : (y < x ? y : x);                      \
        }                                                                              \
    }

INT_KERNELS(u8, uint8_t, unsigned)
INT_KERNELS(i8, int8_t, unsigned)
INT_KERNELS(u16, uint16_t, unsigned)
INT_KERNELS(i16, int16_t, unsigned)
INT_KERNELS(u32, uint32_t, uint32_t)
INT_KERNELS(i32, int32_t, uint32_t)
INT_KERNELS(u64, uint64_t, uint64_t)
INT_KERNELS(i64, int64_t, uint64_t)
FLOAT_KERNELS(f32, float)
FLOAT_KERNELS(f64, double)

#define ROW(NAME) { NAME##_sum, NAME##_prod, NAME##_max, NAME##_min }

/* Indexed by pcclDataType_t, then sum/prod/max/min. */
static const reduce_kernel_fn kernels[12][4] = {
    [pcclUint8] = ROW(u8),
    [pcclInt8] = ROW(i8),
    [pcclInt16] = ROW(i16),
    [pcclUint16] = ROW(u16),
    [pcclUint32] = ROW(u32),
    [pcclInt32] = ROW(i32),
    [pcclUint64] = ROW(u64),
    [pcclInt64] = ROW(i64),
    [pcclFloat16] = { reduce_f16_sum, reduce_f16_prod, reduce_f16_max, reduce_f16_min },
    [pcclBFloat16] = { reduce_bf16_sum, reduce_bf16_prod, reduce_bf16_max, reduce_bf16_min },
    [pcclFloat] = ROW(f32),
    [pcclDouble] = ROW(f64),
};

static const size_t dtype_sizes[12] = {
    [pcclUint8] = 1, [pcclInt8] = 1, [pcclInt16] = 2, [pcclUint16] = 2,
    [pcclUint32] = 4, [pcclInt32] = 4, [pcclUint64] = 8, [pcclInt64] = 8,
    [pcclFloat16] = 2, [pcclBFloat16] = 2, [pcclFloat] = 4, [pcclDouble] = 8,
};

int reduce_dtype_valid(pcclDataType_t dtype) {
    return (unsigned) dtype < 12u;
}

int reduce_op_valid(pcclRedOp_t op) {
    return (unsigned) op <= (unsigned) pcclMin;
}

size_t reduce_dtype_size(pcclDataType_t dtype) {
    return reduce_dtype_valid(dtype) ? dtype_sizes[dtype] : 0;
}

static int op_column(pcclRedOp_t op) {
    switch (op) {
    case pcclSum:
    case pcclAvg: return 0;
    case pcclProd: return 1;
    case pcclMax: return 2;
    case pcclMin: return 3;
    }
    return -1;
}

int reduce_combine(pcclDataType_t dtype, pcclRedOp_t op, void *dst, const void *acc,
                   const void *x, size_t count) {
    int col = op_column(op);
    if (!reduce_dtype_valid(dtype) || col < 0) return REDUCE_EINVAL;
    if (count == 0) return REDUCE_OK;
    kernels[dtype][col](dst, acc, x, count);
    return REDUCE_OK;
}

int reduce_combine_unaligned(pcclDataType_t dtype, pcclRedOp_t op, void *dst, const void *acc,
                             const void *x, size_t count) {
    int col = op_column(op);
    if (!reduce_dtype_valid(dtype) || col < 0) return REDUCE_EINVAL;
    size_t esz = dtype_sizes[dtype];
    if (((uintptr_t) acc & (esz - 1)) == 0) {
        if (count > 0) kernels[dtype][col](dst, acc, x, count);
        return REDUCE_OK;
    }
    /* A T* that is not aligned to T is undefined behaviour: copy acc into aligned memory first
     * (4 KiB stays in L1, so this costs far less than the pass it stands in for). */
    _Alignas(64) unsigned char bounce[4096];
    const size_t per = sizeof bounce / esz;
    for (size_t i = 0; i < count; i += per) {
        size_t k = count - i < per ? count - i : per;
        memcpy(bounce, (const unsigned char *) acc + i * esz, k * esz);
        kernels[dtype][col]((unsigned char *) dst + i * esz, bounce, (const unsigned char *) x + i * esz, k);
    }
    return REDUCE_OK;
}

int reduce_accumulate(pcclDataType_t dtype, pcclRedOp_t op, void *dst, const void *src,
                      size_t count) {
    return reduce_combine(dtype, op, dst, dst, src, count);
}

/* Integer Avg: C division of the wrapped sum, so truncation toward zero; done in 64 bits so
 * that a divisor wider than the element type (e.g. 300 peers, int8) is still exact. Integer
 * division does not vectorize on x86; it runs once per element, on 1/N of the buffer. */
#define DIV_SIGNED(T)                                                                  \
    do {                                                                               \
        T *p = buf;                                                                    \
        for (size_t i = 0; i < count; i++) p[i] = (T) ((int64_t) p[i] / (int64_t) n); \
    } while (0)
#define DIV_UNSIGNED(T)                                                                \
    do {                                                                               \
        T *p = buf;                                                                    \
        for (size_t i = 0; i < count; i++) p[i] = (T) ((uint64_t) p[i] / n);           \
    } while (0)

int reduce_finish(pcclDataType_t dtype, pcclRedOp_t op, void *buf, size_t count,
                  uint32_t world_size) {
    if (!reduce_dtype_valid(dtype) || !reduce_op_valid(op) || world_size == 0)
        return REDUCE_EINVAL;
    if (op != pcclAvg || world_size == 1 || count == 0) return REDUCE_OK;
    uint64_t n = world_size;
    switch (dtype) {
    case pcclUint8: DIV_UNSIGNED(uint8_t); break;
    case pcclInt8: DIV_SIGNED(int8_t); break;
    case pcclInt16: DIV_SIGNED(int16_t); break;
    case pcclUint16: DIV_UNSIGNED(uint16_t); break;
    case pcclUint32: DIV_UNSIGNED(uint32_t); break;
    case pcclInt32: DIV_SIGNED(int32_t); break;
    case pcclUint64: DIV_UNSIGNED(uint64_t); break;
    case pcclInt64: DIV_SIGNED(int64_t); break;
    case pcclFloat16: reduce_f16_div(buf, count, world_size); break;
    case pcclBFloat16: reduce_bf16_div(buf, count, world_size); break;
    case pcclFloat: {
        float *p = buf, q = (float) world_size;
        for (size_t i = 0; i < count; i++) p[i] = p[i] / q;
        break;
    }
    case pcclDouble: {
        double *p = buf, q = (double) world_size;
        for (size_t i = 0; i < count; i++) p[i] = p[i] / q;
        break;
    }
    }
    return REDUCE_OK;
}

const char *reduce_strerror(int rc) {
    switch (rc) {
    case REDUCE_OK: return "ok";
    case REDUCE_EINVAL: return "invalid argument";
    case REDUCE_ENOMEM: return "out of memory";
    case REDUCE_ELINK: return "link failed";
    case REDUCE_EABORTED: return "aborted";
    case REDUCE_ESTAGE: return "staging copy failed";
    }
    return "unknown error";
}
