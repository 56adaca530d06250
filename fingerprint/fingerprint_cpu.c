/* fingerprint_cpu.c: the CPU reference of the functions IEEE 754 fixes exactly (sqrtf, 1/x,
 * fp16/bf16 conversions, fmaf chains, sums in a fixed tree): the same inputs, the same batches,
 * the same hashes as cuda/cuda_fingerprint.cu, so a GPU that computes them as IEEE says gives
 * the same entries. Compiled without fast-math (the library's flags): nothing reassociates. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fingerprint/fingerprint.h"
#include "hash/hash.h"
#include "log/log.h"
#include "reduce/reduce_half.h"

#define MOD "fingerprint"

typedef struct job_t {
    const fp_func_t *f;
    int quick;
    uint64_t base, lo, hi; /* inputs base+lo .. base+hi of the batch */
    void *out;
} job_t;

static uint32_t bits(float f) { return reduce_f32_bits(f); }

static void *run_job(void *arg) {
    job_t *j = arg;
    const fp_func_t *f = j->f;
    for (uint64_t e = j->lo; e < j->hi; e++) {
        uint64_t idx = j->base + e;
        switch (f->kind) {
        case FP_UNARY: {
            float x = reduce_f32_from_bits(fp_input(idx, j->quick));
            float y = f->op == FP_OP_SQRTF ? sqrtf(x) : 1.0f / x;
            ((uint32_t *) j->out)[e] = fp_canon32(bits(y));
            break;
        }
        case FP_TO_F16:
            ((uint16_t *) j->out)[e] = fp_canon16h(reduce_f32_to_f16(reduce_f32_from_bits(fp_input(idx, j->quick))));
            break;
        case FP_TO_BF16:
            ((uint16_t *) j->out)[e] = fp_canon16b(reduce_f32_to_bf16(reduce_f32_from_bits(fp_input(idx, j->quick))));
            break;
        case FP_FROM_F16: ((uint32_t *) j->out)[e] = fp_canon32(bits(reduce_f16_to_f32((uint16_t) idx))); break;
        case FP_FROM_BF16: ((uint32_t *) j->out)[e] = fp_canon32(bits(reduce_bf16_to_f32((uint16_t) idx))); break;
        case FP_DOT: {
            float acc = 0.0f;
            for (uint32_t k = 0; k < FP_DOT_LEN; k++)
                acc = fmaf(fp_gen((uint32_t) idx, k), fp_gen((uint32_t) idx, k + FP_DOT_LEN), acc);
            ((uint32_t *) j->out)[e] = fp_canon32(bits(acc));
            break;
        }
        case FP_TREE: {
            float v[FP_TREE_BLOCK];
            for (uint32_t t = 0; t < FP_TREE_BLOCK; t++) v[t] = fp_gen((uint32_t) idx, t);
            for (uint32_t s = 1; s < FP_TREE_BLOCK; s *= 2)
                for (uint32_t t = 0; t < FP_TREE_BLOCK; t += 2 * s) v[t] = v[t] + v[t + s];
            ((uint32_t *) j->out)[e] = fp_canon32(bits(v[0]));
            break;
        }
        }
    }
    return NULL;
}

/* Inputs of a function (all batches together). */
static uint64_t total_inputs(const fp_func_t *f, int quick) {
    switch (f->kind) {
    case FP_FROM_F16:
    case FP_FROM_BF16: return 1u << 16;
    case FP_DOT: return FP_DOTS;
    case FP_TREE: return FP_TREE_BLOCKS;
    default: return fp_ninputs(quick);
    }
}

static pcclResult_t one_function(const fp_func_t *f, int quick, int threads, void *buf, uint64_t *out) {
    uint64_t total = total_inputs(f, quick), batch = (uint64_t) 1 << FP_BATCH_LOG2;
    uint64_t hashes[64];
    size_t nb = 0;
    for (uint64_t base = 0; base < total; base += batch) {
        uint64_t n = total - base < batch ? total - base : batch;
        job_t jobs[64];
        pthread_t tids[64];
        bool started[64] = {false};
        for (int t = 0; t < threads; t++)
            jobs[t] = (job_t){f, quick, base, n * (uint64_t) t / (uint64_t) threads,
                              n * (uint64_t) (t + 1) / (uint64_t) threads, buf};
        for (int t = 1; t < threads; t++) started[t] = pthread_create(&tids[t], NULL, run_job, &jobs[t]) == 0;
        run_job(&jobs[0]);
        for (int t = 1; t < threads; t++) {
            if (started[t]) pthread_join(tids[t], NULL);
            else run_job(&jobs[t]); /* no thread: do its share here */
        }
        hashes[nb++] = hash_simple(buf, (size_t) n * fp_out_size(f));
    }
    *out = fp_combine(hashes, nb);
    return pcclSuccess;
}

pcclResult_t fp_cpu_fingerprint(pcclDeterminismFingerprint_t *fp, uint32_t flags, int threads) {
    int quick = (flags & PCCL_FINGERPRINT_QUICK) != 0;
    fp_init(fp, flags | PCCL_FINGERPRINT_CPU);
    snprintf(fp->device, sizeof fp->device, "cpu");
    if (threads <= 0) {
        threads = fp_online_cpus();
    }
    if (threads > 64) threads = 64;
    uint64_t batch = (uint64_t) 1 << FP_BATCH_LOG2, most = fp_ninputs(quick) < batch ? fp_ninputs(quick) : batch;
    if (most < FP_DOTS) most = FP_DOTS;
    void *buf = malloc((size_t) most * 4);
    if (buf == NULL) {
        LOG_ERROR(MOD, "CPU fingerprint: no memory for a batch of %llu outputs", (unsigned long long) most);
        return pcclInternalError;
    }
    uint32_t e = 0;
    for (size_t i = 0; i < fp_nfuncs; i++) {
        if (!fp_funcs[i].exact) continue;
        one_function(&fp_funcs[i], quick, threads, buf, &fp->entries[e++].hash);
    }
    free(buf);
    return pcclSuccess;
}
