/* async_quant.c: see async_quant.h. Inputs and bounds follow tests/reduce/ring_quant_test.c:
 * the same value kinds (wide, tiny range, subnormal-ish, many magnitudes, huge, extreme, small
 * integers, constant, mixed blocks with NaN / Inf, wide with NaN / Inf) and README.md's bound,
 * here with A = the largest finite |input| of the whole buffer (the bound grows with A, so this
 * is looser than per sub-chunk, never tighter). Trials run 8 at a time through
 * pcclAllReduceAsync. */
#include "tests/allreduce/async_quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/reduce/quant_common.h"

#define BATCH 8
#define MAXP 8

typedef struct trial {
    pcclDataType_t dt;
    pcclRedOp_t op;
    pcclQuantizationOptions_t q;
    size_t count;
    int kind;
} trial_t;

static void seed_rng(unsigned seed, int trial, int peer) {
    qt_rng_state = 0x9e3779b97f4a7c15ull * (seed + 1) + (uint64_t) trial * 0x1000003ull + (uint64_t) (peer + 7) * 0x9e37ull;
    qt_rand();
}

static double gen(pcclDataType_t dt, int kind, double scale, double base) {
    double big = qt_max(dt) / 16; /* sums of up to 8 stay finite */
    switch (kind) {
    case 0: return (qt_unit() * 2 - 1) * scale;
    case 1: return base + (qt_unit() - 0.5) * scale * 1e-4; /* tiny range */
    case 2: return (qt_unit() * 2 - 1) * (dt == pcclDouble ? 1e-305 : dt == pcclFloat16 ? 1e-6 : 1e-39);
    case 3: return (qt_rand() & 1 ? 1 : -1) * pow(10.0, (qt_unit() - 0.5) * (dt == pcclFloat16 ? 7 : 60));
    case 4: return (qt_unit() * 2 - 1) * big; /* huge */
    case 5: return (qt_unit() * 2 - 1) * qt_max(dt); /* extreme */
    default: return (double) qt_below(9) - 4; /* small integers */
    }
}

static trial_t describe(unsigned seed, int t) {
    static const pcclRedOp_t ops[4] = {pcclSum, pcclAvg, pcclMax, pcclMin};
    seed_rng(seed, t, -1);
    trial_t tr;
    tr.dt = QT_SRC[qt_below(4)];
    tr.q.algorithm = QT_ALGO[qt_below(2)];
    tr.q.quantized_datatype = QT_CODE[qt_below(2)];
    tr.op = qt_below(20) == 0 ? pcclProd : ops[qt_below(4)];
    tr.count = 1 + qt_below(qt_below(4) == 0 ? 40000 : 3000);
    tr.kind = (int) qt_below(10);
    return tr;
}

static void fill_input(const trial_t *tr, unsigned seed, int t, int p, void *buf) {
    seed_rng(seed, t, p);
    double scale = pow(10.0, (qt_unit() - 0.5) * (tr->dt == pcclFloat16 ? 4 : 10));
    double base = (qt_unit() - 0.5) * 2000;
    seed_rng(seed, t, -2); /* the constant of kind 7 is the same on every peer: all-equal inputs */
    double cst = gen(tr->dt, (int) qt_below(4), scale, base);
    seed_rng(seed, t, p + 100);
    for (size_t i = 0; i < tr->count; i++) {
        int k = tr->kind == 8 ? (int) ((i / 50 * 7 + (size_t) p) % 7) : tr->kind == 9 ? 0 : tr->kind;
        if (tr->kind == 7) {
            qt_put(tr->dt, buf, i, cst);
            continue;
        }
        qt_put(tr->dt, buf, i, gen(tr->dt, k, scale, base));
        if ((tr->kind == 8 || tr->kind == 9) && qt_below(40) == 0) {
            int w = (int) qt_below(3);
            if (w == 0) qt_put_nan(tr->dt, buf, i);
            else qt_put(tr->dt, buf, i, w == 1 ? INFINITY : -INFINITY);
        }
    }
}

static long double exact(const trial_t *tr, void *const *in, int n, size_t i) {
    long double acc = qt_get(tr->dt, in[0], i);
    int nan = isnan(acc);
    for (int p = 1; p < n; p++) {
        long double x = qt_get(tr->dt, in[p], i);
        nan |= isnan(x);
        switch (tr->op) {
        case pcclSum:
        case pcclAvg: acc += x; break;
        case pcclProd: acc *= x; break;
        case pcclMax: acc = x > acc ? x : acc; break;
        case pcclMin: acc = x < acc ? x : acc; break;
        }
    }
    if (nan) return NAN;
    return tr->op == pcclAvg ? acc / n : acc;
}

/* README.md's bound; negative when none applies (Prod, sums near overflow). */
static long double chain_bound(const trial_t *tr, int n, long double A) {
    pcclDataType_t dt = tr->dt;
    long double f = 1 / qt_lim(tr->q.quantized_datatype, 1) + 16 * qt_u_work(dt) + 4 * qt_u_src(dt);
    long double eta = qt_eta(dt), E = 0;
    if (tr->op == pcclProd) return -1;
    if ((tr->op == pcclSum || tr->op == pcclAvg) && n * A * (1 + n * f) > qt_max(dt) / 4) return -1;
    for (int k = 1; k <= n; k++) {
        long double M = (tr->op == pcclMax || tr->op == pcclMin) ? A + E : k * A + E;
        E += M * f + eta;
    }
    if (tr->op == pcclAvg) E = E / n + eta + 2 * qt_u_src(dt) * (A + E / n);
    return E;
}

static int classify(long double v) { return isnan(v) ? 0 : isinf(v) ? (v > 0 ? 1 : 2) : 3; }

static void check_trial(const trial_t *tr, unsigned seed, int t, int n, const void *out, aq_result_t *res) {
    size_t esz = reduce_dtype_size(tr->dt);
    void *in[MAXP];
    for (int p = 0; p < n; p++) {
        in[p] = malloc(tr->count * esz);
        fill_input(tr, seed, t, p, in[p]);
    }
    long double A = 0;
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < tr->count; i++) {
            long double x = fabsl(qt_get(tr->dt, in[p], i));
            if (isfinite(x) && x > A) A = x;
        }
    long double bound = chain_bound(tr, n, A);
    int reported = 0;
    for (size_t i = 0; bound >= 0 && i < tr->count; i++) {
        long double e = exact(tr, in, n, i), v = qt_get(tr->dt, out, i);
        if (classify(v) != classify(e)) {
            res->nclass++;
            if (reported++ < 2)
                fprintf(stderr, "async_peer: trial %d element %zu: class of %Lg, exact %Lg\n", t, i, v, e);
        } else if (classify(e) == 3 && fabsl(v - e) > bound) {
            res->nbad++;
            if (reported++ < 2)
                fprintf(stderr, "async_peer: trial %d element %zu: got %.17Lg exact %.17Lg bound %Lg\n", t, i, v, e,
                        bound);
        }
    }
    for (int p = 0; p < n; p++) free(in[p]);
}

static pcclReduceDescriptor_t descriptor(const trial_t *tr, uint64_t tag) {
    pcclReduceDescriptor_t d;
    memset(&d, 0, sizeof d);
    d.count = tr->count;
    d.op = tr->op;
    d.tag = tag;
    d.src_descriptor.datatype = tr->dt;
    d.quantization_options = tr->q;
    return d;
}

/* One float32 all-reduce of 1M elements, quantized (uint8 MinMax) or not: its tx_bytes. */
static uint64_t volume(pcclComm_t *comm, int me, bool quant, uint64_t tag) {
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof *x);
    for (size_t i = 0; i < N; i++) x[i] = (float) ((i * 7 + (size_t) me) % 100) * 0.01f;
    trial_t tr = {pcclFloat, pcclSum, {pcclUint8, quant ? pcclQuantMinMax : pcclQuantNone}, N, 0};
    pcclReduceDescriptor_t d = descriptor(&tr, tag);
    pcclReduceInfo_t info = {0, 0, 0};
    pcclResult_t r = pcclAllReduce(x, x, &d, comm, &info);
    free(x);
    return r == pcclSuccess ? info.tx_bytes : 0;
}

aq_result_t aq_run(pcclComm_t *comm, unsigned seed, int trials, int n, int me, const char *file) {
    aq_result_t res;
    memset(&res, 0, sizeof res);
    FILE *f = fopen(file, "wb");
    if (f == NULL || n > MAXP) {
        res.nfail = -1;
        if (f) fclose(f);
        return res;
    }
    /* Combinations the library must refuse before anything reaches the wire. */
    static const trial_t invalid[3] = {{pcclInt32, pcclSum, {pcclUint8, pcclQuantMinMax}, 16, 0},
                                       {pcclFloat, pcclSum, {pcclInt8, pcclQuantMinMax}, 16, 0},
                                       {pcclFloat, pcclSum, {pcclUint8, (pcclQuantizationAlgorithm_t) 3}, 16, 0}};
    double scratch[16] = {0};
    for (int i = 0; i < 3; i++) {
        pcclReduceDescriptor_t d = descriptor(&invalid[i], 900 + (uint64_t) i);
        res.nwrong += pcclAllReduce(scratch, scratch, &d, comm, NULL) != pcclInvalidArgument;
    }
    for (int t0 = 0; t0 < trials; t0 += BATCH) {
        int nb = trials - t0 < BATCH ? trials - t0 : BATCH;
        trial_t tr[BATCH];
        void *buf[BATCH];
        pcclAsyncReduceOp_t h[BATCH];
        pcclResult_t r[BATCH];
        for (int b = 0; b < nb; b++) {
            tr[b] = describe(seed, t0 + b);
            buf[b] = malloc(tr[b].count * reduce_dtype_size(tr[b].dt));
            fill_input(&tr[b], seed, t0 + b, me, buf[b]);
            pcclReduceDescriptor_t d = descriptor(&tr[b], 1000 + (uint64_t) (t0 + b));
            r[b] = pcclAllReduceAsync(buf[b], buf[b], &d, comm, &h[b]); /* in place */
        }
        for (int b = 0; b < nb; b++) {
            if (r[b] == pcclSuccess) r[b] = pcclAwaitAsyncReduce(&h[b], NULL);
            if (r[b] != pcclSuccess) {
                res.nfail++;
                fprintf(stderr, "async_peer: quant trial %d failed: %d\n", t0 + b, (int) r[b]);
            } else {
                check_trial(&tr[b], seed, t0 + b, n, buf[b], &res);
                fwrite(buf[b], reduce_dtype_size(tr[b].dt), tr[b].count, f);
            }
            free(buf[b]);
        }
    }
    fclose(f);
    res.tx_quant = volume(comm, me, true, 5000);
    res.tx_plain = volume(comm, me, false, 5001);
    return res;
}
