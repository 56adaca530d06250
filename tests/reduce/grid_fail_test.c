/* The grid all-reduce under quantization and under failure, on in-memory links, with the grid
 * rule's shapes and with two dimensions at most.
 * Quantized: n in {4, 5, 9, 10, 16, 17}, the four float dtypes x both algorithms x both code
 * widths x Sum/Avg/Max: every peer bit-identical, within the error the encodes allow.
 * Failure: a peer dies mid-op (its link refuses a send; then every link of it fails and every
 * peer's abort flag rises, as the master would do) or stalls before the op (killed after 50 ms):
 * every other peer returns an error promptly, no staging block is left, sendbuf is untouched.
 * Both for grid peers and extras. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/common/check.h"
#include "tests/common/clock.h"
#include "tests/reduce/mesh_net.h"
#include "tests/reduce/quant_common.h"
#include "tests/reduce/ref.h"

#define PROMPT_S 2.0

static reduce_cache_t *cache;

typedef struct grid_run {
    reduce_ring_params_t p;
    reduce_grid_shape_t s;
    reduce_grid_links_t l;
    void *send, *recv, *orig;
    size_t count;
    pcclDataType_t dt;
    pcclRedOp_t op;
    int rc, stall;
    double t_end;
    pthread_t th;
} grid_run_t;

static void *grid_main(void *arg) {
    grid_run_t *r = arg;
    r->rc = reduce_grid_allreduce(&r->p, &r->s, &r->l, r->send, r->recv, r->count, r->dt, r->op, NULL);
    r->t_end = now_s();
    return NULL;
}

static void setup(mesh_t *m, grid_run_t *runs, uint32_t n, uint32_t md, size_t count, pcclDataType_t dt,
                  pcclRedOp_t op, const pcclQuantizationOptions_t *q, uint64_t tag) {
    reduce_grid_shape_t s;
    REQUIRE(reduce_grid_shape(n, md, md ? 1 : UINT32_MAX, &s) == 1);
    size_t esz = reduce_dtype_size(dt);
    for (uint32_t p = 0; p < n; p++) {
        grid_run_t *r = &runs[p];
        memset(r, 0, sizeof *r);
        r->s = s;
        REQUIRE(mesh_grid_links(m, &s, p, &r->l, NULL) == 0);
        r->p = (reduce_ring_params_t){.rank = p, .world_size = n, .tag = tag, .cache = cache,
                                      .abort_flag = &m->abort[p], .doorbell = &m->doorbell[p],
                                      .subchunk_bytes = 1024, .poll_us = 100};
        if (q != NULL) r->p.quantization = *q;
        r->send = malloc(count * esz);
        r->recv = malloc(count * esz);
        r->orig = malloc(count * esz);
        REQUIRE(r->send != NULL && r->recv != NULL && r->orig != NULL);
        for (size_t i = 0; i < count; i++) qt_put(dt, r->send, i, (qt_unit() - 0.5) * 16.0);
        memcpy(r->orig, r->send, count * esz);
        r->count = count;
        r->dt = dt;
        r->op = op;
    }
}

static void teardown(grid_run_t *runs, uint32_t n) {
    for (uint32_t p = 0; p < n; p++) {
        free(runs[p].send);
        free(runs[p].recv);
        free(runs[p].orig);
    }
}

static double eps_of(pcclDataType_t dt) {
    return dt == pcclBFloat16 ? 0x1p-8 : dt == pcclFloat16 ? 0x1p-11 : dt == pcclFloat ? 0x1p-24 : 0x1p-53;
}

static void quant_case(uint32_t n, uint32_t md, pcclDataType_t dt, const pcclQuantizationOptions_t *q,
                       pcclRedOp_t op, uint64_t tag) {
    const size_t count = 5003;
    mesh_t *m = mesh_create(n);
    REQUIRE(m != NULL);
    grid_run_t runs[MESH_MAX];
    setup(m, runs, n, md, count, dt, op, q, tag);
    for (uint32_t p = 0; p < n; p++) REQUIRE(pthread_create(&runs[p].th, NULL, grid_main, &runs[p]) == 0);
    for (uint32_t p = 0; p < n; p++) pthread_join(runs[p].th, NULL);
    size_t bytes = count * reduce_dtype_size(dt), far = 0;
    for (uint32_t p = 0; p < n; p++) {
        CHECK_EQ_U64(runs[p].rc, REDUCE_OK);
        CHECK(memcmp(runs[p].recv, runs[0].recv, bytes) == 0);
        CHECK(memcmp(runs[p].send, runs[p].orig, bytes) == 0);
    }
    const reduce_grid_shape_t *s = &runs[0].s;
    double levels = q->quantized_datatype == pcclUint8 ? 255.0 : 65535.0;
    /* Each of at most sum(size) + ndims encodes (and as many roundings to dt) errs by at most
     * half a step of its sub-chunk's range, at most 16n wide (ZeroPointScale: up to twice that). */
    double encodes = s->ndims + 2;
    for (uint32_t d = 0; d < s->ndims; d++) encodes += s->size[d];
    double tol = encodes * (32.0 * n / levels + 8.0 * n * eps_of(dt));
    if (op == pcclAvg) tol /= n;
    for (size_t i = 0; i < count; i++) {
        double exact = op == pcclMax ? -INFINITY : 0.0;
        for (uint32_t p = 0; p < n; p++) {
            double x = (double) qt_get(dt, runs[p].send, i);
            exact = op == pcclMax ? fmax(exact, x) : exact + x;
        }
        if (op == pcclAvg) exact /= n;
        double got = (double) qt_get(dt, runs[0].recv, i);
        if (!(fabs(got - exact) <= tol)) far++;
    }
    if (far) fprintf(stderr, "quant n=%u dt=%d op=%d: %zu elements off by more than %g\n", n, dt, op, far, tol);
    CHECK_EQ_U64(far, 0);
    teardown(runs, n);
    mesh_destroy(m);
}

/* victim dies at its link's third send (stall = 0) or never starts (stall = 1). */
static void fail_case(uint32_t n, uint32_t md, uint32_t victim, int stall, uint64_t tag) {
    const size_t count = 20000;
    mesh_t *m = mesh_create(n);
    REQUIRE(m != NULL);
    grid_run_t runs[MESH_MAX];
    reduce_grid_shape_t s;
    reduce_grid_shape(n, md, md ? 1 : UINT32_MAX, &s);
    reduce_grid_role_t ro;
    reduce_grid_role(&s, victim, &ro);
    uint32_t other = ro.extra ? ro.fold : ro.next[0];
    reduce_memnet_opts_t die = {.die_peer = victim < other ? 0 : 1, .die_at_send = 2};
    reduce_link_t tx, rx;
    if (!stall) REQUIRE(mesh_links(m, victim, other, &tx, &rx, &die) == 0);
    setup(m, runs, n, md, count, pcclFloat, pcclSum, NULL, tag);
    for (uint32_t p = 0; p < n; p++)
        if (!(stall && p == victim)) REQUIRE(pthread_create(&runs[p].th, NULL, grid_main, &runs[p]) == 0);
    if (stall) {
        usleep(50000);
    } else {
        pthread_join(runs[victim].th, NULL);
        CHECK(runs[victim].rc == REDUCE_ELINK);
    }
    double t0 = now_s();
    mesh_kill(m, victim);
    mesh_abort_all(m);
    for (uint32_t p = 0; p < n; p++) {
        if (p == victim) continue;
        pthread_join(runs[p].th, NULL);
        CHECK(runs[p].rc == REDUCE_ELINK || runs[p].rc == REDUCE_EABORTED);
        CHECK(runs[p].t_end - t0 < PROMPT_S);
        CHECK(memcmp(runs[p].send, runs[p].orig, count * sizeof(float)) == 0);
    }
    reduce_cache_stats_t st;
    reduce_cache_get_stats(cache, &st);
    CHECK_EQ_U64(st.blocks_in_use, 0);
    teardown(runs, n);
    mesh_destroy(m);
}

int main(void) {
    ref_init();
    cache = reduce_cache_create();
    REQUIRE(cache != NULL);
    static const uint32_t ns[] = {4, 5, 9, 10, 16, 17};
    static const pcclRedOp_t ops[] = {pcclSum, pcclAvg, pcclMax};
    uint64_t tag = 1;
    for (uint32_t md = 0; md <= 2; md += 2)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            for (int d = 0; d < 4; d++)
                for (int a = 0; a < 2; a++)
                    for (int w = 0; w < 2; w++) {
                        pcclQuantizationOptions_t q = {.quantized_datatype = QT_CODE[w], .algorithm = QT_ALGO[a]};
                        quant_case(ns[k], md, QT_SRC[d], &q, ops[(d + a + w) % 3], tag++);
                    }
    /* Grid rule: 9 = 3 x 3, 10 = 2 x 2 x 2 and extras 8, 9 (of 7, 6), 17 = 2^4 and extra 16 (of 15).
     * Two dimensions: 10 = 5 x 2, 17 = 4 x 4 and extra 16. */
    static const uint32_t fails[][2] = {{9, 0}, {9, 4}, {10, 7}, {10, 9}, {17, 16}, {17, 15}, {17, 3}};
    for (uint32_t md = 0; md <= 2; md += 2)
        for (size_t k = 0; k < sizeof fails / sizeof fails[0]; k++)
            for (int stall = 0; stall < 2; stall++) fail_case(fails[k][0], md, fails[k][1], stall, tag++);
    reduce_cache_destroy(cache);
    ref_free();
    return check_exit();
}
