/* The grid all-reduce (reduce_grid.c) on in-memory links: n = 4..17 (primes and extras
 * included) as the grid rule shapes them, and forced to two dimensions, every dtype x op,
 * awkward counts (shards and chunks empty), small and default frames, in place. Every peer's
 * bytes must equal a sequential reference in the documented order (README.md "The grid
 * schedule"): an extra's input joins its grid peer's as x_grid OP x_extra; along dimension d the
 * partials of the shard's owner c_d are combined from coordinate c_d+1 round to c_d; the last
 * dimension's owner divides by n for Avg. Also: the shape rule, sendbuf untouched, no staging
 * block left, and a grid peer's bytes equal the flat ring's. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tests/common/check.h"
#include "tests/reduce/mesh_net.h"
#include "tests/reduce/ref.h"

static reduce_cache_t *cache;

typedef struct grid_run {
    reduce_ring_params_t p;
    reduce_grid_shape_t s;
    reduce_grid_links_t l;
    const void *send;
    void *recv;
    size_t count;
    pcclDataType_t dt;
    pcclRedOp_t op;
    int rc;
    reduce_ring_stats_t st;
    pthread_t th;
} grid_run_t;

static void *grid_main(void *arg) {
    grid_run_t *r = arg;
    r->rc = reduce_grid_allreduce(&r->p, &r->s, &r->l, r->send, r->recv, r->count, r->dt, r->op, &r->st);
    return NULL;
}

static void chunk_range(size_t count, uint32_t n, uint32_t c, size_t *first, size_t *len) {
    size_t base = count / n, rem = count % n;
    *first = c * base + (c < rem ? c : rem);
    *len = base + (c < rem ? 1 : 0);
}

static uint64_t y_of(const reduce_grid_shape_t *s, pcclDataType_t dt, pcclRedOp_t op, uint32_t pos, size_t i) {
    uint64_t x = ref_input(dt, op, pos, i);
    uint32_t g = s->grid;
    if (g - 1 - pos < s->extras) x = ref_op(dt, op, x, ref_input(dt, op, g + (g - 1 - pos), i));
    return x;
}

/* P_d at the peers whose coordinates above d are coord[d+1..]: dimension d's partials combined
 * from coordinate own[d]+1 round to own[d] (own: the chunk owners along the element's path). */
static uint64_t partial(const reduce_grid_shape_t *s, pcclDataType_t dt, pcclRedOp_t op, uint32_t d,
                        uint32_t *coord, const uint32_t *own, size_t i) {
    uint64_t acc = 0;
    for (uint32_t k = 1; k <= s->size[d]; k++) {
        coord[d] = (own[d] + k) % s->size[d];
        uint64_t x;
        if (d == 0) {
            uint32_t pos = 0, stride = 1;
            for (uint32_t e = 0; e < s->ndims; e++) {
                pos += coord[e] * stride;
                stride *= s->size[e];
            }
            x = y_of(s, dt, op, pos, i);
        } else {
            x = partial(s, dt, op, d - 1, coord, own, i);
        }
        acc = k == 1 ? x : ref_op(dt, op, acc, x);
    }
    return acc;
}

/* The documented order, element by element: the chunk owners along i's path, then P_{D-1}. */
static uint64_t expected_at(const reduce_grid_shape_t *s, uint32_t n, pcclDataType_t dt, pcclRedOp_t op,
                            size_t count, size_t i) {
    uint32_t own[REDUCE_GRID_MAX_DIMS], coord[REDUCE_GRID_MAX_DIMS];
    size_t o = 0, len = count;
    for (uint32_t d = 0; d < s->ndims; d++)
        for (uint32_t c = 0; c < s->size[d]; c++) {
            size_t f, l;
            chunk_range(len, s->size[d], c, &f, &l);
            if (i - o >= f && i - o < f + l) {
                own[d] = c;
                o += f;
                len = l;
                break;
            }
        }
    return ref_finish(dt, op, partial(s, dt, op, s->ndims - 1, coord, own, i), n);
}

typedef struct grid_case {
    uint32_t n;
    size_t count, sub;
    uint32_t window;
    pcclDataType_t dt;
    pcclRedOp_t op;
    int inplace;
    uint32_t max_dims;
} grid_case_t;

static void run_case(const grid_case_t *c, uint64_t tag) {
    uint32_t n = c->n;
    size_t esz = ref_esz(c->dt), bytes = c->count * esz;
    mesh_t *m = mesh_create(n);
    REQUIRE(m != NULL);
    grid_run_t runs[MESH_MAX];
    void *orig[MESH_MAX];
    reduce_grid_shape_t s;
    REQUIRE(reduce_grid_shape(n, c->max_dims, c->max_dims ? 1 : UINT32_MAX, &s) == 1);
    for (uint32_t p = 0; p < n; p++) {
        grid_run_t *r = &runs[p];
        memset(r, 0, sizeof *r);
        r->s = s;
        REQUIRE(mesh_grid_links(m, &s, p, &r->l, NULL) == 0);
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
    for (uint32_t p = 0; p < n; p++) REQUIRE(pthread_create(&runs[p].th, NULL, grid_main, &runs[p]) == 0);
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
    reduce_grid_shape_t s;
    CHECK(reduce_grid_shape(2, 0, UINT32_MAX, &s) == 0 && s.ndims == 0);
    CHECK(reduce_grid_shape(3, 0, UINT32_MAX, &s) == 0);
    CHECK(reduce_grid_shape(13, 0, 0, &s) == 0); /* prime, no extras: only the ring */
    CHECK(reduce_grid_shape(REDUCE_GRID_MAX_PEERS, 0, UINT32_MAX, &s) == 1 && s.ndims == 16);
    CHECK(reduce_grid_shape(REDUCE_GRID_MAX_PEERS + 1, 0, UINT32_MAX, &s) == 0);
    /* n, max_dims, max_extras (99: any), grid, extras, steps, sizes */
    static const uint32_t want[][10] = {
        {4, 0, 99, 4, 0, 4, 2, 2, 0, 0},    {5, 0, 99, 4, 1, 6, 2, 2, 0, 0},    {9, 0, 99, 9, 0, 8, 3, 3, 0, 0},
        {10, 0, 99, 8, 2, 8, 2, 2, 2, 0},   {16, 0, 99, 16, 0, 8, 2, 2, 2, 2},  {17, 0, 99, 16, 1, 10, 2, 2, 2, 2},
        {32, 2, 0, 32, 0, 20, 8, 4, 0, 0},  {10, 2, 0, 10, 0, 10, 5, 2, 0, 0},  {17, 2, 1, 16, 1, 14, 4, 4, 0, 0},
        {36, 0, 99, 36, 0, 12, 3, 3, 2, 2}, {64, 2, 0, 64, 0, 28, 8, 8, 0, 0},  {6, 0, 99, 6, 0, 6, 3, 2, 0, 0},
        {32, 2, 99, 16, 16, 14, 4, 4, 0, 0}, {13, 0, 99, 8, 5, 8, 2, 2, 2, 0},  {10, 0, 0, 10, 0, 10, 5, 2, 0, 0}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        uint32_t mx = want[k][2] == 99 ? UINT32_MAX : want[k][2];
        CHECK(reduce_grid_shape(want[k][0], want[k][1], mx, &s) == 1);
        CHECK_EQ_U64(s.grid, want[k][3]);
        CHECK_EQ_U64(s.extras, want[k][4]);
        CHECK_EQ_U64(reduce_grid_steps(&s), want[k][5]);
        for (uint32_t d = 0; d < 4; d++) CHECK_EQ_U64(d < s.ndims ? s.size[d] : 0, want[k][6 + d]);
    }
    CHECK(reduce_grid_shape(32, 0, UINT32_MAX, &s) == 1 && s.ndims == 5 && reduce_grid_steps(&s) == 10);
    for (uint32_t n = 4; n <= 1000; n++)
        for (uint32_t md = 0; md <= 3; md++) {
            if (md == 1) continue;
            CHECK(reduce_grid_shape(n, md, UINT32_MAX, &s) == 1);
            uint64_t g = 1;
            for (uint32_t d = 0; d < s.ndims; d++) {
                CHECK(s.size[d] >= 2 && (d == 0 || s.size[d] <= s.size[d - 1]));
                g *= s.size[d];
            }
            CHECK(g == s.grid && s.grid + s.extras == n && s.extras <= s.grid);
            CHECK(md == 0 || s.ndims <= md);
            CHECK(reduce_grid_steps(&s) < 2 * (n - 1));
        }
    /* Roles: dimension d's ring is the positions differing in coordinate d only. */
    reduce_grid_shape(36, 0, UINT32_MAX, &s);
    reduce_grid_role_t ro;
    reduce_grid_role(&s, 17, &ro); /* 17 = 2 + 3*(2) + 9*(1) + 18*0: coords (2, 2, 1, 0) */
    CHECK(ro.coord[0] == 2 && ro.coord[1] == 2 && ro.coord[2] == 1 && ro.coord[3] == 0);
    CHECK(ro.next[0] == 15 && ro.prev[0] == 16 && ro.next[1] == 11 && ro.prev[1] == 14);
    CHECK(ro.next[2] == 8 && ro.next[3] == 35 && ro.prev[3] == 35 && ro.fold == REDUCE_GRID_NONE);
    reduce_grid_shape(17, 0, UINT32_MAX, &s);
    reduce_grid_role(&s, 16, &ro);
    CHECK(ro.extra && ro.fold == 15);
    reduce_grid_role(&s, 15, &ro);
    CHECK(!ro.extra && ro.fold == 16);
}

int main(void) {
    ref_init();
    cache = reduce_cache_create();
    REQUIRE(cache != NULL);
    shape_rule();
    static const pcclDataType_t dts[] = {pcclInt8,  pcclUint8,  pcclInt16,   pcclUint16, pcclInt32,   pcclUint32,
                                         pcclInt64, pcclUint64, pcclFloat16, pcclBFloat16, pcclFloat, pcclDouble};
    uint64_t tag = 1;
    for (uint32_t md = 0; md <= 2; md += 2)
        for (uint32_t n = 4; n <= 17; n++)
            for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
                for (int op = pcclSum; op <= pcclMin; op++) {
                    if (md == 2 && (d + n + (size_t) op) % 2) continue; /* half the matrix for 2-D */
                    grid_case_t c = {n, 7, 0, 0, dts[d], (pcclRedOp_t) op, 0, md};
                    run_case(&c, tag++);
                    c.count = 1003;
                    c.sub = 64;
                    c.window = 3;
                    c.inplace = (d + op) % 2;
                    run_case(&c, tag++);
                }
    for (uint32_t n = 4; n <= 17; n++) {
        grid_case_t big = {n, 300007, 0, 0, pcclFloat, pcclSum, 0, 0};
        run_case(&big, tag++);
        grid_case_t small = {n, 40000, 4096, 2, pcclInt32, pcclAvg, 1, 2};
        run_case(&small, tag++);
    }
    /* Three and four dimensions with an odd size: 12 = 3 x 2 x 2, 36 = 3 x 3 x 2 x 2. */
    grid_case_t c12 = {12, 5003, 256, 0, pcclBFloat16, pcclSum, 0, 0};
    run_case(&c12, tag++);
    grid_case_t c36 = {36, 7777, 512, 0, pcclInt64, pcclProd, 1, 0};
    run_case(&c36, tag++);
    reduce_cache_stats_t st;
    reduce_cache_get_stats(cache, &st);
    CHECK_EQ_U64(st.blocks_in_use, 0);
    reduce_cache_destroy(cache);
    ref_free();
    return check_exit();
}
