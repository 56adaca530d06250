/* The quantized ring on the in-memory link. 1,000 random all-reduces over 4 peers (and more
 * over 2, 3, 5 and 8) with every source dtype x code width x algorithm x op, counts that N and
 * the sub-chunk size do not divide, windows from 1 to 64, in place or not, and inputs with
 * NaN, Inf, constant buffers, tiny, subnormal, huge and extreme ranges. Every case checks:
 *   - every peer returns OK and all recvbufs are bit-identical;
 *   - they equal a sequential replay of README.md's scheme built from the codec, the kernels
 *     and the ring's chunk order (so the scheme, not only agreement, is what runs);
 *   - tx/rx bytes are exactly the quantized frames (headers included) the ring arithmetic says;
 *   - finite results stay within README.md's error bound of the exact reduction, non-finite
 *     ones have the exact reduction's class (NaN, +Inf, -Inf); constant inputs reduce exactly.
 * Plus invalid combinations (REDUCE_EINVAL), a ring of one, the ~1/4 volume of float32 ->
 * uint8, and two quantized all-reduces in flight on the same links. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/common/check.h"
#include "tests/reduce/harness.h"
#include "tests/reduce/quant_common.h"

#define MAXP 8

static reduce_cache_t *cache;

typedef struct qcase {
    uint32_t n;
    size_t count;
    pcclDataType_t dt;
    pcclQuantizationOptions_t q;
    pcclRedOp_t op;
    size_t sub;      /* subchunk_bytes, 0: default */
    uint32_t window; /* 0: default */
    int inplace;
    int kind;        /* input distribution, see fill_inputs */
} qcase_t;

static void chunk_range(size_t count, uint32_t n, uint32_t c, size_t *first, size_t *len) {
    size_t base = count / n, rem = count % n;
    *first = c * base + (c < rem ? c : rem);
    *len = base + (c < rem ? 1 : 0);
}

static size_t sub_elems_of(const qcase_t *c) {
    size_t esz = reduce_dtype_size(c->dt), sub = c->sub ? c->sub : REDUCE_RING_DEFAULT_SUBCHUNK;
    return sub / esz ? sub / esz : 1;
}

/* One value of the given kind. */
static double gen(pcclDataType_t dt, int kind, double scale, double base) {
    double big = qt_max(dt) / 16; /* sums of up to 8 stay finite */
    switch (kind) {
    case 0: return (qt_unit() * 2 - 1) * scale;
    case 1: return base + (qt_unit() - 0.5) * scale * 1e-4;                 /* tiny range */
    case 2: return (qt_unit() * 2 - 1) * (dt == pcclDouble ? 1e-305 : dt == pcclFloat16 ? 1e-6 : 1e-39);
    case 3: return (qt_rand() & 1 ? 1 : -1) * pow(10.0, (qt_unit() - 0.5) * (dt == pcclFloat16 ? 7 : 60));
    case 4: return (qt_unit() * 2 - 1) * big;                               /* huge */
    case 5: return (qt_unit() * 2 - 1) * qt_max(dt);                        /* extreme */
    default: return (double) qt_below(9) - 4;                               /* small integers */
    }
}

/* kind 0..6: one distribution for the whole buffer; 7: constant per peer; 8: a different
 * distribution per 50-element block, with NaN / Inf sprinkled; 9: like 0 with NaN / Inf. */
static void fill_inputs(const qcase_t *c, void *const *bufs) {
    for (uint32_t p = 0; p < c->n; p++) {
        double scale = pow(10.0, (qt_unit() - 0.5) * (c->dt == pcclFloat16 ? 4 : 10));
        double base = (qt_unit() - 0.5) * 2000;
        double cst = gen(c->dt, (int) qt_below(4), scale, base);
        int kind = c->kind;
        for (size_t i = 0; i < c->count; i++) {
            int k = kind;
            if (kind == 8) k = (int) ((i / 50 * 7 + p) % 7);
            if (kind == 9) k = 0;
            if (kind == 7) {
                qt_put(c->dt, bufs[p], i, cst);
                continue;
            }
            qt_put(c->dt, bufs[p], i, gen(c->dt, k, scale, base));
            if ((kind == 8 || kind == 9) && qt_below(40) == 0) {
                int w = (int) qt_below(3);
                if (w == 0) qt_put_nan(c->dt, bufs[p], i);
                else qt_put(c->dt, bufs[p], i, w == 1 ? INFINITY : -INFINITY);
            }
        }
    }
}

/* README.md's scheme, sequentially: sub-chunk j of chunk c starts as peer c+1's input; each
 * following peer decodes what it received and combines it with its own input
 * (received OP own), then quantizes the result for the next; the owner c applies Avg's
 * division and quantizes once for the all-gather; everybody's result is that frame decoded. */
static void replay(const qcase_t *c, void *const *in, void *out) {
    size_t esz = reduce_dtype_size(c->dt), se = sub_elems_of(c);
    size_t fb = reduce_quant_frame_bytes(c->dt, &c->q, se);
    unsigned char *frame = aligned_alloc(64, (fb + 63) / 64 * 64);
    unsigned char *val = malloc(se * esz), *dec = malloc(se * esz);
    REQUIRE(frame && val && dec);
    for (uint32_t ch = 0; ch < c->n; ch++) {
        size_t first, len;
        chunk_range(c->count, c->n, ch, &first, &len);
        for (size_t j = 0; j < len; j += se) {
            size_t m = len - j < se ? len - j : se, at = (first + j) * esz;
            memcpy(val, (const char *) in[(ch + 1) % c->n] + at, m * esz);
            for (uint32_t k = 2; k <= c->n; k++) {
                REQUIRE(reduce_quant_encode(c->dt, &c->q, frame, val, m) == REDUCE_OK);
                REQUIRE(reduce_quant_decode(c->dt, &c->q, dec, frame, m) == REDUCE_OK);
                reduce_combine(c->dt, c->op, val, dec, (const char *) in[(ch + k) % c->n] + at, m);
            }
            reduce_finish(c->dt, c->op, val, m, c->n);
            REQUIRE(reduce_quant_encode(c->dt, &c->q, frame, val, m) == REDUCE_OK);
            REQUIRE(reduce_quant_decode(c->dt, &c->q, (char *) out + at, frame, m) == REDUCE_OK);
        }
    }
    free(frame);
    free(val);
    free(dec);
}

/* The plain (unquantized) ring result, for constant inputs, which must come out exact. */
static void plain(const qcase_t *c, void *const *in, void *out) {
    size_t esz = reduce_dtype_size(c->dt);
    for (uint32_t ch = 0; ch < c->n; ch++) {
        size_t first, len;
        chunk_range(c->count, c->n, ch, &first, &len);
        if (len == 0) continue;
        char *o = (char *) out + first * esz;
        memcpy(o, (const char *) in[(ch + 1) % c->n] + first * esz, len * esz);
        for (uint32_t k = 2; k <= c->n; k++)
            reduce_combine(c->dt, c->op, o, o, (const char *) in[(ch + k) % c->n] + first * esz, len);
        reduce_finish(c->dt, c->op, o, len, c->n);
    }
}

/* Exact reduction of element i in long double (x87 extended: no overflow of float64 sums of a
 * few terms), with IEEE NaN / Inf rules; Max/Min: any NaN gives NaN. */
static long double exact(const qcase_t *c, void *const *in, size_t i) {
    long double acc = qt_get(c->dt, in[0], i);
    int nan = isnan(acc);
    for (uint32_t p = 1; p < c->n; p++) {
        long double x = qt_get(c->dt, in[p], i);
        nan |= isnan(x);
        switch (c->op) {
        case pcclSum:
        case pcclAvg: acc += x; break;
        case pcclProd: acc *= x; break;
        case pcclMax: acc = x > acc ? x : acc; break;
        case pcclMin: acc = x < acc ? x : acc; break;
        }
    }
    if (nan) return NAN;
    return c->op == pcclAvg ? acc / c->n : acc;
}

/* README.md's bound for element results of one sub-chunk, A = the largest finite |input| of
 * the sub-chunk over all peers. Negative: no bound applies (Prod, or sums near overflow). */
static long double chain_bound(const qcase_t *c, long double A) {
    pcclDataType_t dt = c->dt;
    long double f = 1 / qt_lim(c->q.quantized_datatype, 1) + 16 * qt_u_work(dt) + 4 * qt_u_src(dt);
    long double eta = qt_eta(dt), E = 0;
    uint32_t n = c->n;
    if (c->op == pcclProd) return -1;
    if ((c->op == pcclSum || c->op == pcclAvg) && n * A * (1 + n * f) > qt_max(dt) / 4) return -1;
    for (uint32_t k = 1; k <= n; k++) {
        long double M = (c->op == pcclMax || c->op == pcclMin) ? A + E : k * A + E;
        E += M * f + eta;
    }
    if (c->op == pcclAvg) E = E / n + eta + 2 * qt_u_src(dt) * (A + E / n);
    return E;
}

static int classify(long double v) {
    return isnan(v) ? 0 : isinf(v) ? (v > 0 ? 1 : 2) : 3;
}

static uint64_t frames_bytes(const qcase_t *c, uint32_t chunk) {
    size_t first, len, se = sub_elems_of(c);
    chunk_range(c->count, c->n, chunk, &first, &len);
    uint64_t nsub = (len + se - 1) / se;
    return nsub * reduce_quant_header_bytes(c->dt) +
           (uint64_t) len * (c->q.quantized_datatype == pcclUint16 ? 2 : 1);
}

static int cases_failed;

static void run_case(const qcase_t *c, uint64_t tag) {
    int before = check_failures;
    uint32_t n = c->n;
    size_t esz = reduce_dtype_size(c->dt), bytes = c->count * esz;
    reduce_memnet_t *net = reduce_memnet_create(n, NULL);
    REQUIRE(net != NULL);
    void *send[MAXP] = { 0 }, *recv[MAXP] = { 0 }, *orig[MAXP] = { 0 };
    peer_run_t runs[MAXP];
    memset(runs, 0, sizeof runs);
    for (uint32_t p = 0; p < n; p++) {
        send[p] = malloc(bytes + 8);
        orig[p] = malloc(bytes + 8);
        recv[p] = c->inplace ? send[p] : malloc(bytes + 8);
        REQUIRE(send[p] && orig[p] && recv[p]);
    }
    fill_inputs(c, send);
    for (uint32_t p = 0; p < n; p++) memcpy(orig[p], send[p], bytes);
    void *want = malloc(bytes + 8);
    REQUIRE(want != NULL);
    replay(c, orig, want);

    for (uint32_t p = 0; p < n; p++) {
        reduce_memnet_fill_params(net, p, &runs[p].params);
        runs[p].params.tag = tag;
        runs[p].params.cache = cache;
        runs[p].params.subchunk_bytes = c->sub;
        runs[p].params.window = c->window;
        runs[p].params.quantization = c->q;
        runs[p].sendbuf = send[p];
        runs[p].recvbuf = recv[p];
        runs[p].count = c->count;
        runs[p].dtype = c->dt;
        runs[p].op = c->op;
    }
    REQUIRE(run_peers(runs, n) == 0);

    for (uint32_t p = 0; p < n; p++) {
        CHECK_EQ_U64(runs[p].rc, REDUCE_OK);
        CHECK(memcmp(recv[p], recv[0], bytes) == 0);
        if (!c->inplace) CHECK(memcmp(send[p], orig[p], bytes) == 0);
        uint64_t tx = 0, rx = 0;
        for (uint32_t t = 0; t < 2 * n - 2; t++) {
            tx += frames_bytes(c, (p + 2 * n - 1 - t) % n);
            rx += frames_bytes(c, (p + 2 * n - 2 - t) % n);
        }
        CHECK_EQ_U64(runs[p].stats.tx_bytes, tx);
        CHECK_EQ_U64(runs[p].stats.rx_bytes, rx);
        CHECK_EQ_U64(reduce_memnet_edge_bytes(net, p), tx);
    }
    CHECK(memcmp(recv[0], want, bytes) == 0);

    /* Accuracy against the exact reduction, sub-chunk by sub-chunk. */
    size_t se = sub_elems_of(c);
    int reported = 0;
    for (uint32_t ch = 0; ch < n; ch++) {
        size_t first, len;
        chunk_range(c->count, n, ch, &first, &len);
        for (size_t j = 0; j < len; j += se) {
            size_t m = len - j < se ? len - j : se;
            long double A = 0;
            for (uint32_t p = 0; p < n; p++)
                for (size_t i = first + j; i < first + j + m; i++) {
                    long double x = fabsl(qt_get(c->dt, orig[p], i));
                    if (qt_isfinite(x) && x > A) A = x;
                }
            long double bound = chain_bound(c, A);
            for (size_t i = first + j; i < first + j + m; i++) {
                long double e = exact(c, orig, i), v = qt_get(c->dt, recv[0], i);
                if (c->op == pcclProd || bound < 0) continue;
                CHECK_EQ_U64(classify(v), classify(e));
                if (classify(e) == 3 && qt_isfinite(v)) {
                    CHECK(fabsl(v - e) <= bound);
                    if (fabsl(v - e) > bound && reported++ < 3)
                        fprintf(stderr, "  element %zu: got %.20Lg exact %.20Lg err %Lg bound %Lg (A=%Lg)\n",
                                i, v, e, fabsl(v - e), bound, A);
                }
            }
        }
    }
    /* Constant inputs: quantization is exact, so the plain ring's bits come out. */
    if (c->kind == 7) {
        plain(c, orig, want);
        CHECK(memcmp(recv[0], want, bytes) == 0);
    }

    if (check_failures != before) {
        cases_failed++;
        fprintf(stderr, "  case: n=%u count=%zu dtype=%d code=%d algo=%d op=%d sub=%zu window=%u inplace=%d kind=%d\n",
                n, c->count, c->dt, c->q.quantized_datatype, c->q.algorithm, c->op, c->sub,
                c->window, c->inplace, c->kind);
    }
    for (uint32_t p = 0; p < n; p++) {
        if (!c->inplace) free(recv[p]);
        free(send[p]);
        free(orig[p]);
    }
    free(want);
    reduce_memnet_destroy(net);
}

static qcase_t random_case(uint32_t n) {
    static const size_t subs[] = { 0, 1, 7, 64, 100, 1000, 4096 };
    static const uint32_t windows[] = { 0, 1, 2, 3, 8, 64 };
    qcase_t c;
    memset(&c, 0, sizeof c);
    c.n = n;
    c.dt = QT_SRC[qt_below(4)];
    c.q.quantized_datatype = QT_CODE[qt_below(2)];
    c.q.algorithm = QT_ALGO[qt_below(2)];
    c.op = (pcclRedOp_t) qt_below(5);
    switch (qt_below(4)) {
    case 0: c.count = 1 + qt_below(2 * n); break;
    case 1: c.count = 1 + qt_below(300); break;
    default: c.count = 300 + qt_below(3000); break;
    }
    c.sub = subs[qt_below(sizeof subs / sizeof subs[0])];
    /* Tiny sub-chunks make one frame per element or two: keep those counts small. */
    if (c.sub && c.sub < 64 && c.count > 400) c.count = 400 + c.count % 97;
    c.window = windows[qt_below(sizeof windows / sizeof windows[0])];
    c.inplace = (int) qt_below(2);
    c.kind = (int) qt_below(10);
    if (c.kind == 5 && (c.op == pcclSum || c.op == pcclAvg || c.op == pcclProd)) c.kind = 4;
    return c;
}

static void test_random(void) {
    for (int i = 0; i < 1000 && cases_failed < 5; i++) {
        qcase_t c = random_case(4);
        run_case(&c, (uint64_t) i);
    }
    static const uint32_t ns[] = { 2, 3, 5, 8 };
    for (int i = 0; i < 160 && cases_failed < 5; i++) {
        qcase_t c = random_case(ns[i % 4]);
        run_case(&c, 5000 + (uint64_t) i);
    }
}

/* Many sub-chunks per chunk and small windows: the all-gather's reuse of its two gather
 * buffers must not deadlock (a chunk of 64 frames, window 1..3, up to 8 peers). */
static void test_deep_pipelines(void) {
    static const uint32_t ns[] = { 2, 3, 4, 5, 8 };
    static const uint32_t windows[] = { 1, 2, 3, 64 };
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
            qcase_t c;
            memset(&c, 0, sizeof c);
            c.n = ns[a];
            c.count = 64 * 16 * ns[a] + 5;
            c.dt = pcclFloat;
            c.q = (pcclQuantizationOptions_t){ pcclUint8, pcclQuantMinMax };
            c.op = pcclSum;
            c.sub = 64;
            c.window = windows[w];
            c.inplace = (int) (w % 2);
            run_case(&c, 7000 + a * 10 + w);
        }
}

static void test_invalid(void) {
    reduce_memnet_t *net = reduce_memnet_create(2, NULL);
    REQUIRE(net != NULL);
    reduce_ring_params_t p;
    memset(&p, 0, sizeof p);
    reduce_memnet_fill_params(net, 0, &p);
    p.cache = cache;
    double buf[16] = { 0 }, out[16];
    reduce_ring_stats_t st;
    for (int dt = 0; dt < 12; dt++)
        for (int qt = 0; qt < 12; qt++)
            for (int al = 1; al <= 3; al++) {
                reduce_ring_params_t q = p;
                q.quantization.quantized_datatype = (pcclDataType_t) qt;
                q.quantization.algorithm = (pcclQuantizationAlgorithm_t) al;
                int ok = al <= 2 && (qt == pcclUint8 || qt == pcclUint16) &&
                         (dt == pcclFloat || dt == pcclDouble || dt == pcclFloat16 || dt == pcclBFloat16);
                if (ok) continue;
                /* Refused before anything happens, whatever the count or ring size. */
                CHECK(reduce_ring_allreduce(&q, buf, out, 4, (pcclDataType_t) dt, pcclSum, &st) == REDUCE_EINVAL);
                CHECK(reduce_ring_allreduce(&q, buf, out, 0, (pcclDataType_t) dt, pcclSum, &st) == REDUCE_EINVAL);
                q.world_size = 1;
                q.rank = 0;
                CHECK(reduce_ring_allreduce(&q, buf, out, 4, (pcclDataType_t) dt, pcclSum, &st) == REDUCE_EINVAL);
                CHECK_EQ_U64(st.tx_bytes + st.rx_bytes, 0);
            }
    /* pcclQuantNone ignores the quantized dtype: a plain ring. */
    reduce_ring_params_t q = p;
    q.quantization.quantized_datatype = pcclFloat;
    q.world_size = 1;
    for (int i = 0; i < 16; i++) buf[i] = i * 0.1;
    CHECK(reduce_ring_allreduce(&q, buf, out, 16, pcclDouble, pcclSum, &st) == REDUCE_OK);
    CHECK(memcmp(buf, out, sizeof buf) == 0);
    /* A ring of one moves nothing and quantizes nothing: an exact copy. */
    q.quantization = (pcclQuantizationOptions_t){ pcclUint8, pcclQuantMinMax };
    CHECK(reduce_ring_allreduce(&q, buf, out, 16, pcclDouble, pcclAvg, &st) == REDUCE_OK);
    CHECK(memcmp(buf, out, sizeof buf) == 0);
    CHECK_EQ_U64(st.tx_bytes + st.rx_bytes, 0);
    reduce_memnet_destroy(net);
}

/* float32 -> uint8 moves a quarter of the bytes, plus one 16-byte header per 256 KiB frame. */
static void test_volume(void) {
    qcase_t c;
    memset(&c, 0, sizeof c);
    c.n = 4;
    c.count = (1u << 20) + 3;
    c.dt = pcclFloat;
    c.q = (pcclQuantizationOptions_t){ pcclUint8, pcclQuantMinMax };
    c.op = pcclAvg;
    c.kind = 0;
    run_case(&c, 9000);
    /* Per peer: 6 chunks of ~2^18 elements, each in 4 frames of 65536 elements. */
    uint64_t plain_tx = 0, quant_tx = 0;
    for (uint32_t t = 0; t < 6; t++) {
        size_t first, len;
        chunk_range(c.count, 4, (0 + 8 - 1 - t) % 4, &first, &len);
        plain_tx += len * 4;
        quant_tx += frames_bytes(&c, (0 + 8 - 1 - t) % 4);
    }
    fprintf(stderr, "float32 -> uint8, 2^20+3 elements, 4 peers: %llu bytes sent per peer vs %llu plain (%.4f)\n",
            (unsigned long long) quant_tx, (unsigned long long) plain_tx, (double) quant_tx / (double) plain_tx);
    CHECK((double) quant_tx / (double) plain_tx < 0.2501);
    CHECK((double) quant_tx / (double) plain_tx > 0.25);
}

/* Two quantized all-reduces with distinct tags in flight on the same links. */
static void test_concurrent(void) {
    const uint32_t n = 4;
    const size_t count = 20011;
    reduce_memnet_t *net = reduce_memnet_create(n, NULL);
    REQUIRE(net != NULL);
    qcase_t cs[2];
    void *in[2][4], *orig[2][4], *want[2];
    peer_run_t runs[8];
    memset(runs, 0, sizeof runs);
    for (int t = 0; t < 2; t++) {
        memset(&cs[t], 0, sizeof cs[t]);
        cs[t].n = n;
        cs[t].count = count;
        cs[t].dt = t ? pcclBFloat16 : pcclFloat;
        cs[t].q = (pcclQuantizationOptions_t){ t ? pcclUint16 : pcclUint8,
                                              t ? pcclQuantZeroPointScale : pcclQuantMinMax };
        cs[t].op = t ? pcclMax : pcclSum;
        cs[t].sub = 4096;
        cs[t].window = 3;
        size_t bytes = count * reduce_dtype_size(cs[t].dt);
        for (uint32_t p = 0; p < n; p++) {
            in[t][p] = malloc(bytes);
            orig[t][p] = malloc(bytes);
            REQUIRE(in[t][p] && orig[t][p]);
        }
        fill_inputs(&cs[t], in[t]);
        for (uint32_t p = 0; p < n; p++) memcpy(orig[t][p], in[t][p], bytes);
        want[t] = malloc(bytes);
        REQUIRE(want[t] != NULL);
        replay(&cs[t], orig[t], want[t]);
        for (uint32_t p = 0; p < n; p++) {
            peer_run_t *r = &runs[t * 4 + (int) p];
            reduce_memnet_fill_params(net, p, &r->params);
            r->params.tag = 300 + (uint64_t) t;
            r->params.cache = cache;
            r->params.subchunk_bytes = cs[t].sub;
            r->params.window = cs[t].window;
            r->params.quantization = cs[t].q;
            r->sendbuf = r->recvbuf = in[t][p];
            r->count = count;
            r->dtype = cs[t].dt;
            r->op = cs[t].op;
        }
    }
    REQUIRE(run_peers(runs, 8) == 0);
    for (int t = 0; t < 2; t++) {
        for (uint32_t p = 0; p < n; p++) {
            CHECK_EQ_U64(runs[t * 4 + (int) p].rc, REDUCE_OK);
            CHECK(memcmp(in[t][p], want[t], count * reduce_dtype_size(cs[t].dt)) == 0);
            free(in[t][p]);
            free(orig[t][p]);
        }
        free(want[t]);
    }
    reduce_memnet_destroy(net);
}

typedef struct late_abort {
    reduce_memnet_t *net;
} late_abort_t;

static void *abort_later(void *arg) {
    late_abort_t *a = arg;
    usleep(500 * 1000);
    reduce_memnet_abort_all(a->net, 1);
    return NULL;
}

/* Peers that disagree on the settings: a frame whose header says another algorithm is refused
 * (REDUCE_ELINK where it is decoded), and one of another length fails on the link; nobody
 * returns OK, nothing is misdecoded into a result. The others end by the abort that the master
 * would send. */
static void test_mismatch(void) {
    for (int variant = 0; variant < 2; variant++) {
        const uint32_t n = 4;
        const size_t count = 5000;
        reduce_memnet_t *net = reduce_memnet_create(n, NULL);
        REQUIRE(net != NULL);
        float *bufs[4], *out[4];
        peer_run_t runs[4];
        memset(runs, 0, sizeof runs);
        for (uint32_t p = 0; p < n; p++) {
            bufs[p] = malloc(count * sizeof(float));
            out[p] = malloc(count * sizeof(float));
            REQUIRE(bufs[p] && out[p]);
            for (size_t i = 0; i < count; i++) bufs[p][i] = (float) (i % 100) * 0.25f;
            reduce_memnet_fill_params(net, p, &runs[p].params);
            runs[p].params.tag = 400;
            runs[p].params.cache = cache;
            runs[p].params.subchunk_bytes = 1024;
            runs[p].params.quantization = (pcclQuantizationOptions_t){ pcclUint8, pcclQuantZeroPointScale };
            runs[p].sendbuf = bufs[p];
            runs[p].recvbuf = out[p];
            runs[p].count = count;
            runs[p].dtype = pcclFloat;
            runs[p].op = pcclSum;
        }
        runs[0].params.quantization = variant == 0
            ? (pcclQuantizationOptions_t){ pcclUint8, pcclQuantMinMax }
            : (pcclQuantizationOptions_t){ pcclUint16, pcclQuantZeroPointScale };
        late_abort_t la = { net };
        pthread_t th;
        REQUIRE(pthread_create(&th, NULL, abort_later, &la) == 0);
        REQUIRE(run_peers(runs, n) == 0);
        pthread_join(th, NULL);
        int refused = 0;
        for (uint32_t p = 0; p < n; p++) {
            CHECK(runs[p].rc == REDUCE_ELINK || runs[p].rc == REDUCE_EABORTED);
            refused += runs[p].rc == REDUCE_ELINK;
            free(bufs[p]);
            free(out[p]);
        }
        /* Peer 0 or 1 (whichever meets a foreign frame first; the other may find its
         * neighbour's requests cancelled and wait for the abort). */
        CHECK(refused >= 1 && (runs[0].rc == REDUCE_ELINK || runs[1].rc == REDUCE_ELINK));
        reduce_memnet_destroy(net);
    }
}

int main(void) {
    cache = reduce_cache_create();
    REQUIRE(cache != NULL);
    test_invalid();
    test_random();
    test_deep_pipelines();
    test_volume();
    test_concurrent();
    test_mismatch();
    reduce_cache_stats_t st;
    reduce_cache_get_stats(cache, &st);
    CHECK_EQ_U64(st.blocks_in_use, 0);
    reduce_cache_destroy(cache);
    return check_exit();
}
