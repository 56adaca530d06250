/* The ring all-reduce on the in-memory link: every dtype x op, world sizes 2..16, awkward
 * counts and sub-chunk sizes, in-place buffers, concurrent tags. Each case checks every byte of
 * every peer against a sequential reference in the ring's documented order (chunk c is
 * accumulated starting at peer c+1 around to its owner c, who applies Avg's division), checks
 * that sendbuf was not written, and that tx/rx bytes match the ring's arithmetic. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/common/check.h"
#include "tests/reduce/harness.h"
#include "tests/reduce/ref.h"

static reduce_cache_t *cache;

typedef struct ring_case {
    uint32_t n;
    size_t count;
    pcclDataType_t dt;
    pcclRedOp_t op;
    size_t sub;      /* sub-chunk bytes, 0: default */
    uint32_t window; /* 0: default */
    int inplace;
} ring_case_t;

/* The test's own chunking: the first count % n chunks get one element more. */
static void chunk_range(size_t count, uint32_t n, uint32_t c, size_t *first, size_t *len) {
    size_t base = count / n, rem = count % n;
    *first = c * base + (c < rem ? c : rem);
    *len = base + (c < rem ? 1 : 0);
}

static void fill_input(void *buf, pcclDataType_t dt, pcclRedOp_t op, uint32_t peer, size_t count) {
    size_t esz = ref_esz(dt);
    for (size_t i = 0; i < count; i++) ref_put(buf, i, esz, ref_input(dt, op, peer, i));
}

static void expected_result(void *out, void *const *in, const ring_case_t *c) {
    size_t esz = ref_esz(c->dt);
    for (uint32_t ch = 0; ch < c->n; ch++) {
        size_t first, len;
        chunk_range(c->count, c->n, ch, &first, &len);
        for (size_t i = first; i < first + len; i++) {
            uint64_t acc = ref_get(in[(ch + 1) % c->n], i, esz);
            for (uint32_t k = 2; k <= c->n; k++)
                acc = ref_op(c->dt, c->op, acc, ref_get(in[(ch + k) % c->n], i, esz));
            ref_put(out, i, esz, ref_finish(c->dt, c->op, acc, c->n));
        }
    }
}

static int run_case(const ring_case_t *c, uint64_t tag) {
    int failures_before = check_failures;
    size_t esz = ref_esz(c->dt), bytes = c->count * esz;
    uint32_t n = c->n;
    reduce_memnet_t *net = reduce_memnet_create(n, NULL);
    REQUIRE(net != NULL);
    void *send[16], *recv[16], *orig[16];
    peer_run_t runs[16];
    memset(runs, 0, sizeof runs);
    for (uint32_t p = 0; p < n; p++) {
        send[p] = malloc(bytes + 1);
        orig[p] = malloc(bytes + 1);
        recv[p] = c->inplace ? send[p] : malloc(bytes + 1);
        REQUIRE(send[p] && orig[p] && recv[p]);
        fill_input(send[p], c->dt, c->op, p, c->count);
        memcpy(orig[p], send[p], bytes);
        if (!c->inplace) memset(recv[p], 0xa5, bytes);
    }
    void *expect = malloc(bytes + 1);
    REQUIRE(expect != NULL);
    expected_result(expect, orig, c);

    for (uint32_t p = 0; p < n; p++) {
        reduce_memnet_fill_params(net, p, &runs[p].params);
        runs[p].params.tag = tag;
        runs[p].params.cache = cache;
        runs[p].params.subchunk_bytes = c->sub;
        runs[p].params.window = c->window;
        runs[p].sendbuf = send[p];
        runs[p].recvbuf = recv[p];
        runs[p].count = c->count;
        runs[p].dtype = c->dt;
        runs[p].op = c->op;
    }
    REQUIRE(run_peers(runs, n) == 0);

    size_t total = bytes;
    for (uint32_t p = 0; p < n; p++) {
        CHECK_EQ_U64(runs[p].rc, REDUCE_OK);
        CHECK(memcmp(recv[p], expect, bytes) == 0);
        CHECK(memcmp(recv[p], recv[0], bytes) == 0);
        if (!c->inplace) CHECK(memcmp(send[p], orig[p], bytes) == 0);
        size_t f_own, l_own, f_next, l_next, f_prev, l_prev;
        chunk_range(c->count, n, p, &f_own, &l_own);
        chunk_range(c->count, n, (p + 1) % n, &f_next, &l_next);
        chunk_range(c->count, n, (p + n - 1) % n, &f_prev, &l_prev);
        /* Reduce-scatter sends every chunk but the own one, all-gather every chunk but the
         * next peer's; receives: every chunk but the previous peer's, then all but the own. */
        uint64_t tx = (uint64_t) (total - l_own * esz) + (total - l_next * esz);
        uint64_t rx = (uint64_t) (total - l_prev * esz) + (total - l_own * esz);
        CHECK_EQ_U64(runs[p].stats.tx_bytes, tx);
        CHECK_EQ_U64(runs[p].stats.rx_bytes, rx);
        CHECK_EQ_U64(reduce_memnet_edge_bytes(net, p), tx);
    }
    if (n > 1) {
        uint64_t sum_tx = 0;
        for (uint32_t p = 0; p < n; p++) sum_tx += runs[p].stats.tx_bytes;
        CHECK_EQ_U64(sum_tx, 2ull * (n - 1) * total);
    }

    int failed = check_failures != failures_before;
    if (failed) {
        fprintf(stderr, "  case: n=%u count=%zu dtype=%d op=%d sub=%zu window=%u inplace=%d\n",
                n, c->count, c->dt, c->op, c->sub, c->window, c->inplace);
        for (size_t i = 0; i < c->count; i++) {
            if (ref_get(recv[0], i, esz) != ref_get(expect, i, esz)) {
                fprintf(stderr, "  first mismatch at %zu: got %llx want %llx\n", i,
                        (unsigned long long) ref_get(recv[0], i, esz),
                        (unsigned long long) ref_get(expect, i, esz));
                break;
            }
        }
    }
    for (uint32_t p = 0; p < n; p++) {
        if (!c->inplace) free(recv[p]);
        free(send[p]);
        free(orig[p]);
    }
    free(expect);
    reduce_memnet_destroy(net);
    return failed;
}

static void test_all_dtypes_ops(void) {
    static const uint32_t ns[] = { 2, 3, 5 };
    static const size_t counts[] = { 1, 2, 7, 1031 };
    static const uint32_t windows[] = { 1, 2, 0 };
    int k = 0, bad = 0;
    for (int dt = 0; dt < 12; dt++)
        for (int op = 0; op < 5; op++)
            for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
                for (size_t b = 0; b < sizeof counts / sizeof counts[0]; b++, k++) {
                    ring_case_t c = { ns[a], counts[b], (pcclDataType_t) dt, (pcclRedOp_t) op,
                                      24, windows[k % 3], k % 2 };
                    if (bad < 5) bad += run_case(&c, (uint64_t) k);
                }
}

static void test_world_sizes(void) {
    int bad = 0;
    for (uint32_t n = 2; n <= 16 && bad < 5; n++) {
        size_t counts[] = { 1, n - 1, n, n + 1, 4099, 70001 };
        for (size_t b = 0; b < sizeof counts / sizeof counts[0]; b++) {
            size_t sub = counts[b] == 70001 ? 0 : 1000;
            ring_case_t f = { n, counts[b], pcclFloat, pcclSum, sub, 0, (int) (b % 2) };
            ring_case_t i = { n, counts[b], pcclInt32, pcclAvg, sub, 3, (int) ((b + 1) % 2) };
            ring_case_t u = { n, counts[b], pcclUint8, pcclMax, 100, 0, 0 };
            ring_case_t h = { n, counts[b], pcclBFloat16, pcclAvg, 0, 0, 1 };
            bad += run_case(&f, 1);
            bad += run_case(&i, 2);
            bad += run_case(&u, 3);
            bad += run_case(&h, 4);
        }
    }
}

/* Sub-chunk sizes that do not divide the chunks, that are not multiples of the element size,
 * smaller than one element, and windows from 1 to the maximum. */
static void test_subchunk_shapes(void) {
    static const size_t subs[] = { 1, 7, 4096 + 6, 65535, 1 << 20 };
    static const uint32_t windows[] = { 1, 4, REDUCE_RING_MAX_WINDOW };
    for (size_t s = 0; s < sizeof subs / sizeof subs[0]; s++)
        for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
            size_t count = subs[s] < 8 ? 997 : 100003;
            ring_case_t a = { 4, count, pcclUint16, pcclSum, subs[s], windows[w], 0 };
            ring_case_t b = { 3, count, pcclDouble, pcclMin, subs[s], windows[w], 1 };
            run_case(&a, 7);
            run_case(&b, 8);
        }
}

/* Two all-reduces with distinct tags in flight at once on the same links. */
static void test_concurrent_tags(void) {
    const uint32_t n = 4;
    const size_t count = 30011;
    reduce_memnet_t *net = reduce_memnet_create(n, NULL);
    REQUIRE(net != NULL);
    float *bufs[2][4], *expect[2];
    peer_run_t runs[8];
    memset(runs, 0, sizeof runs);
    for (int t = 0; t < 2; t++) {
        void *orig[4];
        for (uint32_t p = 0; p < n; p++) {
            bufs[t][p] = malloc(count * sizeof(float));
            REQUIRE(bufs[t][p] != NULL);
            fill_input(bufs[t][p], pcclFloat, t ? pcclMax : pcclSum, p + 10 * (uint32_t) t, count);
            orig[p] = bufs[t][p];
        }
        /* The reference reads the inputs before the ring runs in place over them. */
        ring_case_t c = { n, count, pcclFloat, t ? pcclMax : pcclSum, 0, 0, 1 };
        expect[t] = malloc(count * sizeof(float));
        REQUIRE(expect[t] != NULL);
        expected_result(expect[t], orig, &c);
        for (uint32_t p = 0; p < n; p++) {
            peer_run_t *r = &runs[t * 4 + (int) p];
            reduce_memnet_fill_params(net, p, &r->params);
            r->params.tag = 100 + (uint64_t) t;
            r->params.cache = cache;
            r->params.subchunk_bytes = 4096;
            r->params.window = 3;
            r->sendbuf = r->recvbuf = bufs[t][p];
            r->count = count;
            r->dtype = pcclFloat;
            r->op = c.op;
        }
    }
    REQUIRE(run_peers(runs, 8) == 0);
    for (int t = 0; t < 2; t++)
        for (uint32_t p = 0; p < n; p++) {
            CHECK_EQ_U64(runs[t * 4 + (int) p].rc, REDUCE_OK);
            CHECK(memcmp(bufs[t][p], expect[t], count * sizeof(float)) == 0);
            free(bufs[t][p]);
        }
    free(expect[0]);
    free(expect[1]);
    reduce_memnet_destroy(net);
}

/* sendbuf mapped read-only: any write by the ring would fault. */
static void test_readonly_sendbuf(void) {
    const uint32_t n = 3;
    const size_t count = 50000;
    size_t bytes = count * sizeof(int64_t);
    size_t page = (size_t) sysconf(_SC_PAGESIZE), mapped = (bytes + page - 1) / page * page;
    reduce_memnet_t *net = reduce_memnet_create(n, NULL);
    REQUIRE(net != NULL);
    void *send[3], *recv[3];
    peer_run_t runs[3];
    memset(runs, 0, sizeof runs);
    ring_case_t c = { n, count, pcclInt64, pcclProd, 8192, 2, 0 };
    for (uint32_t p = 0; p < n; p++) {
        send[p] = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(send[p] != MAP_FAILED);
        fill_input(send[p], c.dt, c.op, p, count);
        REQUIRE(mprotect(send[p], mapped, PROT_READ) == 0);
        recv[p] = malloc(bytes);
        REQUIRE(recv[p] != NULL);
    }
    void *expect = malloc(bytes);
    REQUIRE(expect != NULL);
    expected_result(expect, send, &c);
    for (uint32_t p = 0; p < n; p++) {
        reduce_memnet_fill_params(net, p, &runs[p].params);
        runs[p].params.tag = 9;
        runs[p].params.cache = cache;
        runs[p].params.subchunk_bytes = c.sub;
        runs[p].params.window = c.window;
        runs[p].sendbuf = send[p];
        runs[p].recvbuf = recv[p];
        runs[p].count = count;
        runs[p].dtype = c.dt;
        runs[p].op = c.op;
    }
    REQUIRE(run_peers(runs, n) == 0);
    for (uint32_t p = 0; p < n; p++) {
        CHECK_EQ_U64(runs[p].rc, REDUCE_OK);
        CHECK(memcmp(recv[p], expect, bytes) == 0);
        munmap(send[p], mapped);
        free(recv[p]);
    }
    free(expect);
    reduce_memnet_destroy(net);
}

static void test_params(void) {
    reduce_memnet_t *net = reduce_memnet_create(2, NULL);
    REQUIRE(net != NULL);
    reduce_ring_params_t p;
    memset(&p, 0, sizeof p);
    reduce_memnet_fill_params(net, 0, &p);
    p.cache = cache;
    float buf[64] = { 0 }, out[64];
    reduce_ring_stats_t st;
    CHECK(reduce_ring_allreduce(NULL, buf, out, 4, pcclFloat, pcclSum, &st) == REDUCE_EINVAL);
    CHECK(reduce_ring_allreduce(&p, buf, out, 4, (pcclDataType_t) 12, pcclSum, &st) == REDUCE_EINVAL);
    CHECK(reduce_ring_allreduce(&p, buf, out, 4, pcclFloat, (pcclRedOp_t) 5, &st) == REDUCE_EINVAL);
    CHECK(reduce_ring_allreduce(&p, buf, buf + 1, 4, pcclFloat, pcclSum, &st) == REDUCE_EINVAL);
    CHECK(reduce_ring_allreduce(&p, NULL, out, 4, pcclFloat, pcclSum, &st) == REDUCE_EINVAL);
    CHECK(reduce_ring_allreduce(&p, buf, out, SIZE_MAX / 2, pcclFloat, pcclSum, &st) == REDUCE_EINVAL);
    reduce_ring_params_t q = p;
    q.rank = 2;
    CHECK(reduce_ring_allreduce(&q, buf, out, 4, pcclFloat, pcclSum, &st) == REDUCE_EINVAL);
    q = p;
    q.window = REDUCE_RING_MAX_WINDOW + 1;
    CHECK(reduce_ring_allreduce(&q, buf, out, 4, pcclFloat, pcclSum, &st) == REDUCE_EINVAL);
    q = p;
    q.cache = NULL;
    CHECK(reduce_ring_allreduce(&q, buf, out, 4, pcclFloat, pcclSum, &st) == REDUCE_EINVAL);
    q = p;
    q.doorbell = NULL;
    CHECK(reduce_ring_allreduce(&q, buf, out, 4, pcclFloat, pcclSum, &st) == REDUCE_EINVAL);
    /* count 0: nothing to do, nothing sent. */
    CHECK(reduce_ring_allreduce(&p, buf, out, 0, pcclFloat, pcclSum, &st) == REDUCE_OK);
    CHECK_EQ_U64(st.tx_bytes + st.rx_bytes, 0);
    /* A ring of one copies (Avg divides by 1). */
    q = p;
    q.world_size = 1;
    for (int i = 0; i < 64; i++) buf[i] = (float) i * 0.5f;
    CHECK(reduce_ring_allreduce(&q, buf, out, 64, pcclFloat, pcclAvg, &st) == REDUCE_OK);
    CHECK(memcmp(buf, out, sizeof buf) == 0);
    CHECK_EQ_U64(st.tx_bytes + st.rx_bytes, 0);
    CHECK(reduce_ring_allreduce(&q, buf, buf, 64, pcclFloat, pcclAvg, &st) == REDUCE_OK);
    reduce_memnet_destroy(net);
}

/* The automatic sub-chunk size: a function of (count, esz, N, quantized) only, 256 KiB for
 * small chunks and quantized rings, a power of two growing to 1 MiB with the chunk. */
static void test_default_subchunk(void) {
    const size_t k = 1024;
    CHECK_EQ_U64(reduce_ring_default_subchunk(1, 4, 2, 0), 256 * k);
    CHECK_EQ_U64(reduce_ring_default_subchunk((16u << 20) / 4, 4, 4, 0), 256 * k); /* 4 MiB chunks */
    CHECK_EQ_U64(reduce_ring_default_subchunk((64u << 20) / 4, 4, 4, 0), 512 * k); /* 16 MiB chunks */
    CHECK_EQ_U64(reduce_ring_default_subchunk((256u << 20) / 4, 4, 4, 0), 1024 * k);
    CHECK_EQ_U64(reduce_ring_default_subchunk((size_t) 1 << 36, 8, 2, 0), REDUCE_RING_MAX_AUTO_SUBCHUNK);
    CHECK_EQ_U64(reduce_ring_default_subchunk((256u << 20) / 4, 4, 4, 1), REDUCE_RING_DEFAULT_SUBCHUNK);
    size_t prev = 0;
    for (size_t count = 1; count < ((size_t) 1 << 32); count = count * 3 + 1) {
        size_t s = reduce_ring_default_subchunk(count, 4, 3, 0);
        CHECK(s >= prev && (s & (s - 1)) == 0 && s >= REDUCE_RING_DEFAULT_SUBCHUNK &&
              s <= REDUCE_RING_MAX_AUTO_SUBCHUNK);
        prev = s;
    }
}

int main(void) {
    ref_init();
    test_default_subchunk();
    cache = reduce_cache_create();
    REQUIRE(cache != NULL);
    test_params();
    test_all_dtypes_ops();
    test_world_sizes();
    test_subchunk_shapes();
    test_concurrent_tags();
    test_readonly_sendbuf();
    reduce_cache_stats_t st;
    reduce_cache_get_stats(cache, &st);
    CHECK_EQ_U64(st.blocks_in_use, 0);
    reduce_cache_destroy(cache);
    ref_free();
    return check_exit();
}
