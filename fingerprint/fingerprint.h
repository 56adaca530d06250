/* fingerprint: the determinism fingerprint (docs/fingerprint.md): which functions, over which
 * inputs, hashed how; the CPU reference of the functions IEEE 754 fixes exactly; comparison and
 * the text form of a fingerprint. The GPU side is cuda/cuda_fingerprint.cu, which includes this
 * header too: the input generators below are the same code on both. */
#ifndef PCCL_FINGERPRINT_H
#define PCCL_FINGERPRINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pccl.h"

#ifdef __CUDACC__
#define FP_HD __host__ __device__
#else
#define FP_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum fp_kind_t {
    FP_UNARY = 0, /* float -> float over every input pattern */
    FP_TO_F16,    /* float -> binary16, round to nearest even */
    FP_TO_BF16,   /* float -> bfloat16, round to nearest even */
    FP_FROM_F16,  /* every binary16 -> float */
    FP_FROM_BF16, /* every bfloat16 -> float */
    FP_DOT,       /* FP_DOTS dot products of FP_DOT_LEN, one fmaf after the other */
    FP_TREE       /* pairwise sums of FP_TREE_BLOCK-element blocks, the tree fixed */
} fp_kind_t;

/* The functions, in fingerprint order; `op` numbers the unary ones for the kernels. */
typedef struct fp_func_t {
    const char *name;
    uint8_t kind, op;
    bool exact; /* IEEE 754 fixes the result: there is a CPU reference */
} fp_func_t;

enum { FP_OP_EXPF, FP_OP_LOGF, FP_OP_TANHF, FP_OP_RSQRTF, FP_OP_ERFF, FP_OP_SINF, FP_OP_SQRTF, FP_OP_RCP };

extern const fp_func_t fp_funcs[];
extern const size_t fp_nfuncs;

#define FP_BATCH_LOG2 28 /* inputs per hashed batch */
#define FP_DOTS (1u << 20)
#define FP_DOT_LEN 256u
#define FP_TREE_BLOCK 1024u
#define FP_TREE_BLOCKS (1u << 14)

/* Inputs of a float function: all 2^32 patterns, or (quick) 2^24 of them spread over every
 * exponent and sign. */
FP_HD static inline uint64_t fp_ninputs(int quick) { return quick ? (uint64_t) 1 << 24 : (uint64_t) 1 << 32; }
FP_HD static inline uint32_t fp_input(uint64_t j, int quick) {
    return quick ? (uint32_t) ((j << 8) | ((j >> 16) & 0xffu)) : (uint32_t) j;
}

/* Element k of generated vector i: a float with 24 significant bits in [-1, 1), made from an
 * integer hash so that CPU and GPU produce the same bits. */
FP_HD static inline float fp_gen(uint32_t i, uint32_t k) {
    uint32_t h = i * 0x9E3779B1u ^ (k + 0x7F4A7C15u) * 0x85EBCA77u;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    h *= 0x297A2D39u;
    h ^= h >> 15;
    return (float) ((int32_t) (h >> 8) - (1 << 23)) * (1.0f / 8388608.0f);
}

/* NaN results hash as one pattern (payloads are not part of what IEEE or CUDA fix). */
FP_HD static inline uint32_t fp_canon32(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u ? 0x7fffffffu : u; }
FP_HD static inline uint16_t fp_canon16h(uint16_t u) { return (u & 0x7fffu) > 0x7c00u ? 0x7fffu : u; }
FP_HD static inline uint16_t fp_canon16b(uint16_t u) { return (u & 0x7fffu) > 0x7f80u ? 0x7fffu : u; }

/* Bytes of output per input element of a function's kind. */
size_t fp_out_size(const fp_func_t *f);

/* Starts a fingerprint: zero, then the function names in order (hashes 0), flags set. */
void fp_init(pcclDeterminismFingerprint_t *fp, uint32_t flags);

/* The hash of a function from its batch hashes: SimpleHash of the little-endian u64 list. */
uint64_t fp_combine(const uint64_t *batch_hashes, size_t n);

/* The CPU reference: every `exact` function, on `threads` threads (0: one per core). */
pcclResult_t fp_cpu_fingerprint(pcclDeterminismFingerprint_t *fp, uint32_t flags, int threads);

/* Online CPUs (at least 1): the default thread count of fp_cpu_fingerprint (fingerprint_os_*.c). */
int fp_online_cpus(void);

/* Compares b (a newcomer) with a (the reference), writing into why (NUL-terminated, truncated
 * to n) the functions whose hashes differ or that one of them lacks ("expf, logf"). Returns the
 * number of such functions; -1 when they cannot be compared (other input sets). */
int fp_compare(const pcclDeterminismFingerprint_t *a, const pcclDeterminismFingerprint_t *b, char *why, size_t n);

/* Text form, one "key value" per line (what pccl-fingerprint prints and --out writes). */
int fp_format(const pcclDeterminismFingerprint_t *fp, char *out, size_t n);
/* Parses fp_format's output; false (logged) on anything malformed. */
bool fp_parse(const char *text, pcclDeterminismFingerprint_t *fp);

#ifdef __cplusplus
}
#endif

#endif /* PCCL_FINGERPRINT_H */
