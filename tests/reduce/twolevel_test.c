/* The 2-D all-reduce (reduce_2d.c) on in-memory links: n = 2..17 (primes and extras included),
 * every dtype x op, awkward counts (shards and chunks empty), small and default frames, in place.
 * Every peer's bytes must equal a sequential reference in the documented order (README.md
 * "The 2-D schedule"): an extra's input joins its grid peer's as x_grid OP x_extra; shard c is
 * combined along each row from column c+1 round to c; chunk k of the shard from row k+1's
 * partial round to row k, who divides by n for Avg. Also: the shape rule, sendbuf untouched,
 * no staging block left, and the byte counts of a grid peer equal the flat ring's. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/check.h"
#include "tests/reduce/mesh_net.h"
#include "tests/reduce/ref.h"

static reduce_cache_t *cache;

typedef struct run2d {
    reduce_ring_params_t p;
    reduce_2d_shape_t s;
    reduce_2d_links_t l;
    const void *send;
    void *recv;
    size_t count;
    pcclDataType_t dt;
    pcclRedOp_t op;
    int rc;
    reduce_ring_stats_t st;
    pthread_t th;
} run2d_t;

static void *run2d_main(void *arg) {
    run2d_t *r = arg;
    r->rc = reduce_2d_allreduce(&r->p, &r->s, &r->l, r->send, r->recv, r->count, r->dt, r->op, &r->st);
    return NULL;
}

static void chunk_range(size_t count, uint32_t n, uint32_t c, size_t *first, size_t *len) {
    size_t base = count / n, rem = count % n;
    *first = c * base + (c < rem ? c : rem);
    *len = base + (c < rem ? 1 : 0);
}

/* The documented order, element by element. */
static uint64_t expected_at(const reduce_2d_shape_t *s, uint32_t n, pcclDataType_t dt, pcclRedOp_t op,
                            size_t count, size_t i) {
    uint32_t R = s->rows, C = s->cols, g = R * C;
    uint32_t col = 0, row = 0;
    for (uint32_t c = 0; c < C; c++) {
        size_t f, len;
        chunk_range(count, C, c, &f, &len);
        if (i >= f && i < f + len) {
            col = c;
            for (uint32_t k = 0; k < R; k++) {
                size_t f2, len2;
                chunk_range(len, R, k, &f2, &len2);
                if (i - f >= f2 && i - f < f2 + len2) row = k;
            }
        }
    }
    uint64_t part[MESH_MAX];
    for (uint32_t r = 0; r < R; r++) {
        uint64_t acc = 0;
        for (uint32_t k = 1; k <= C; k++) {
            uint32_t pos = r * C + (col + k) % C;
            uint64_t x = ref_input(dt, op, pos, i);
            if (g - 1 - pos < s->extras) x = ref_op(dt, op, x, ref_input(dt, op, g + (g - 1 - pos), i));
            acc = k == 1 ? x : ref_op(dt, op, acc, x);
        }
        part[r] = acc;
    }
    uint64_t acc = part[(row + 1) % R];
    for (uint32_t k = 2; k <= R; k++) acc = ref_op(dt, op, acc, part[(row + k) % R]);
    return ref_finish(dt, op, acc, n);
}

typedef struct case2d {
    uint32_t n;
    size_t count, sub;
    uint32_t window;
    pcclDataType_t dt;
    pcclRedOp_t op;
    int inplace;
} case2d_t;

static void run_case(const case2d_t *c, uint64_t tag) {
    uint32_t n = c->n;
    size_t esz = ref_esz(c->dt), bytes = c->count * esz;
    mesh_t *m = mesh_create(n);
    REQUIRE(m != NULL);
    run2d_t runs[MESH_MAX];
    void *orig[MESH_MAX];
    reduce_2d_shape_t s;
    REQUIRE(reduce_2d_shape(n, &s) == 1);
    for (uint32_t p = 0; p < n; p++) {
        run2d_t *r = &runs[p];
        memset(r, 0, sizeof *r);
        r->s = s;
        REQUIRE(mesh_2d_links(m, &s, p, &r->l, NULL) == 0);
        r->p.rank = p;
        r->p.world_size = n;
        r->p.tag = tag;
        r->p.cache = cache;
        r->p.abort_flag = &m->abort[p];
        r->p.doorbell = &m->doorbell[p];
        r->p.subchunk_bytes = c->sub;
        r->p.window = c->window;
        r->p.poll_us = 100;
        orig[p] = malloc(bytes + 1);
        void *in = malloc(bytes + 1);
        REQUIRE(orig[p] != NULL && in != NULL);
        for (size_t i = 0; i < c->count; i++) ref_put(in, i, esz, ref_input(c->dt, c->op, p, i));
        memcpy(orig[p], in, bytes);
        r->send = in;
        r->recv = c->inplace ? in : malloc(bytes + 1);
        REQUIRE(r->recv != NULL);
        r->count = c->count;
        r->dt = c->dt;
        r->op = c->op;
    }
    for (uint32_t p = 0; p < n; p++) REQUIRE(pthread_create(&runs[p].th, NULL, run2d_main, &runs[p]) == 0);
    for (uint32_t p = 0; p < n; p++) pthread_join(runs[p].th, NULL);
    int bad = 0;
    for (uint32_t p = 0; p < n; p++) {
        CHECK_EQ_U64(runs[p].rc, REDUCE_OK);
        if (!c->inplace) CHECK(memcmp(runs[p].send, orig[p], bytes) == 0);
        if (p > 0 && memcmp(runs[p].recv, runs[0].recv, bytes) != 0) bad++;
    }
    CHECK_EQ_U64(bad, 0);
    size_t wrong = 0;
    for (size_t i = 0; i < c->count; i++)
        if (ref_get(runs[0].recv, i, esz) != expected_at(&s, n, c->dt, c->op, c->count, i)) wrong++;
    if (wrong) fprintf(stderr, "n=%u count=%zu dt=%d op=%d: %zu wrong\n", n, c->count, c->dt, c->op, wrong);
    CHECK_EQ_U64(wrong, 0);
    /* A grid peer without a fold moves the flat ring's volume when the grid is exact. */
    if (s.extras == 0 && c->count % n == 0)
        CHECK_EQ_U64(runs[0].st.tx_bytes, 2 * (uint64_t) bytes * (n - 1) / n);
    for (uint32_t p = 0; p < n; p++) {
        if (runs[p].recv != runs[p].send) free(runs[p].recv);
        free((void *) runs[p].send);
        free(orig[p]);
    }
    mesh_destroy(m);
}

static void shape_rule(void) {
    reduce_2d_shape_t s;
    CHECK(reduce_2d_shape(2, &s) == 0 && s.rows == 0);
    CHECK(reduce_2d_shape(3, &s) == 0);
    static const uint32_t want[][4] = {{4, 2, 2, 0},  {5, 2, 2, 1},  {9, 3, 3, 0},  {10, 2, 5, 0},
                                       {16, 4, 4, 0}, {17, 4, 4, 1}, {32, 4, 8, 0}, {13, 3, 4, 1}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        CHECK(reduce_2d_shape(want[k][0], &s) == 1);
        CHECK_EQ_U64(s.rows, want[k][1]);
        CHECK_EQ_U64(s.cols, want[k][2]);
        CHECK_EQ_U64(s.extras, want[k][3]);
    }
    for (uint32_t n = 4; n <= 1000; n++) {
        CHECK(reduce_2d_shape(n, &s) == 1);
        CHECK(s.rows * s.cols + s.extras == n && s.extras < s.cols && s.rows >= 2);
        CHECK(reduce_2d_steps(&s) < 2 * (n - 1));
    }
    reduce_2d_shape(32, &s);
    CHECK_EQ_U64(reduce_2d_steps(&s), 20);
}

int main(void) {
    ref_init();
    cache = reduce_cache_create();
    REQUIRE(cache != NULL);
    shape_rule();
    static const pcclDataType_t dts[] = {pcclInt8,  pcclUint8,  pcclInt16,   pcclUint16, pcclInt32,   pcclUint32,
                                         pcclInt64, pcclUint64, pcclFloat16, pcclBFloat16, pcclFloat, pcclDouble};
    uint64_t tag = 1;
    for (uint32_t n = 4; n <= 17; n++)
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
            for (int op = pcclSum; op <= pcclMin; op++) {
                case2d_t c = {n, 7, 0, 0, dts[d], (pcclRedOp_t) op, 0};
                run_case(&c, tag++);
                c.count = 1003;
                c.sub = 64;
                c.window = 3;
                c.inplace = (d + op) % 2;
                run_case(&c, tag++);
            }
    for (uint32_t n = 4; n <= 17; n++) {
        case2d_t big = {n, 300007, 0, 0, pcclFloat, pcclSum, 0};
        run_case(&big, tag++);
        case2d_t small = {n, 40000, 4096, 2, pcclInt32, pcclAvg, 1};
        run_case(&small, tag++);
    }
    reduce_cache_stats_t st;
    reduce_cache_get_stats(cache, &st);
    CHECK_EQ_U64(st.blocks_in_use, 0);
    reduce_cache_destroy(cache);
    ref_free();
    return check_exit();
}
