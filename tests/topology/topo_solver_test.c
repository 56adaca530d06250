/* topo_solver_test: the ring-order solver of pcclOptimizeTopology (ccoip/master/ccoip_master_topo.c).
 * Exact sizes against brute force over every ring; the heuristic on planted rings; validity. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ccoip/master/ccoip_master_topo.h"
#include "tests/common/check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t) (rng >> 16);
}

static bool is_ring(size_t n, const uint32_t *o) {
    uint8_t seen[64] = {0};
    if (n > 0 && o[0] != 0) return false;
    for (size_t i = 0; i < n; i++) {
        if (o[i] >= n || seen[o[i]]) return false;
        seen[o[i]] = 1;
    }
    return true;
}

/* Every ring with 0 first, by recursion; keeps the best score. */
static void brute(size_t n, const double *bw, uint32_t *o, size_t k, uint8_t *used, ccoip_topo_score_t *best) {
    if (k == n) {
        ccoip_topo_score_t s = ccoip_topo_score(n, bw, o);
        if (ccoip_topo_better(s, *best)) *best = s;
        return;
    }
    for (uint32_t v = 1; v < n; v++) {
        if (used[v]) continue;
        used[v] = 1;
        o[k] = v;
        brute(n, bw, o, k + 1, used, best);
        used[v] = 0;
    }
}

static void random_matrix(size_t n, double *bw, int levels) {
    for (size_t i = 0; i < n * n; i++) bw[i] = levels > 0 ? (double) (rnd() % (unsigned) levels) * 100 : rnd() % 100000;
}

int main(void) {
    /* Small sizes and degenerate input. */
    uint32_t o[64];
    static double bw[64 * 64];
    CHECK(ccoip_topo_solve(0, bw, o));
    CHECK(ccoip_topo_solve(1, bw, o) && o[0] == 0);
    memset(bw, 0, sizeof bw);
    CHECK(ccoip_topo_solve(2, bw, o) && is_ring(2, o));

    /* A directed case where the order matters: 0->1->2->3->0 fast, the reverse slow. */
    memset(bw, 0, sizeof bw);
    for (uint32_t a = 0; a < 4; a++)
        for (uint32_t b = 0; b < 4; b++) bw[a * 4 + b] = a == b ? 0 : 10;
    bw[0 * 4 + 2] = bw[2 * 4 + 1] = bw[1 * 4 + 3] = bw[3 * 4 + 0] = 1000;
    CHECK(ccoip_topo_solve(4, bw, o));
    CHECK(o[0] == 0 && o[1] == 2 && o[2] == 1 && o[3] == 3);
    CHECK(ccoip_topo_score(4, bw, o).bottleneck == 1000);

    /* Exact sizes: the same score as brute force, on random and on tie-heavy matrices
     * (few levels: many rings share the bottleneck, the total decides). */
    int trials = 0;
    for (size_t n = 3; n <= 9; n++)
        for (int t = 0; t < (n <= 7 ? 60 : 8); t++) {
            random_matrix(n, bw, t % 2 == 0 ? 0 : 4);
            uint32_t tmp[16];
            uint8_t used[16] = {0};
            ccoip_topo_score_t best = {-1, -1};
            tmp[0] = 0;
            brute(n, bw, tmp, 1, used, &best);
            CHECK(ccoip_topo_solve(n, bw, o));
            CHECK(is_ring(n, o));
            ccoip_topo_score_t s = ccoip_topo_score(n, bw, o);
            CHECK(s.bottleneck == best.bottleneck);
            CHECK(fabs(s.total - best.total) <= 1e-6 * (best.total + 1));
            trials++;
        }
    printf("exact: %d random matrices equal to brute force\n", trials);

    /* Exact at its limit, timed. */
    random_matrix(CCOIP_TOPO_EXACT_MAX, bw, 0);
    clock_t c0 = clock();
    CHECK(ccoip_topo_solve(CCOIP_TOPO_EXACT_MAX, bw, o));
    CHECK(is_ring(CCOIP_TOPO_EXACT_MAX, o));
    printf("exact n=%u: %.1f ms\n", CCOIP_TOPO_EXACT_MAX, (double) (clock() - c0) * 1000.0 / CLOCKS_PER_SEC);

    /* Heuristic sizes: a planted fast ring (random order) among slow noise must be found. */
    for (size_t n = CCOIP_TOPO_EXACT_MAX + 1; n <= 64; n += 17) {
        uint32_t perm[64];
        for (uint32_t i = 0; i < n; i++) perm[i] = i;
        for (size_t i = n - 1; i > 0; i--) {
            size_t j = rnd() % (i + 1);
            uint32_t x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
        }
        for (size_t i = 0; i < n * n; i++) bw[i] = 1 + rnd() % 50;
        for (size_t i = 0; i < n; i++) bw[perm[i] * n + perm[(i + 1) % n]] = 1000 + rnd() % 100;
        c0 = clock();
        CHECK(!ccoip_topo_solve(n, bw, o));
        double ms = (double) (clock() - c0) * 1000.0 / CLOCKS_PER_SEC;
        CHECK(is_ring(n, o));
        ccoip_topo_score_t s = ccoip_topo_score(n, bw, o);
        CHECK(s.bottleneck >= 1000);
        printf("heuristic n=%zu: bottleneck %.0f (planted >= 1000), %.1f ms\n", n, s.bottleneck, ms);
        CHECK(ms < 2000);
    }

    /* The heuristic never returns worse than the identity it starts from. */
    for (size_t n = 20; n <= 40; n += 10) {
        random_matrix(n, bw, 0);
        for (uint32_t i = 0; i < n; i++) o[i] = i;
        ccoip_topo_score_t id = ccoip_topo_score(n, bw, o);
        ccoip_topo_solve(n, bw, o);
        CHECK(is_ring(n, o));
        CHECK(!ccoip_topo_better(id, ccoip_topo_score(n, bw, o)));
    }

    return check_exit();
}
