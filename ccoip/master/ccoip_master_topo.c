/* ccoip_master_topo.c: the ring-order solver (ccoip_master_topo.h).
 *
 * Exact (n <= CCOIP_TOPO_EXACT_MAX) in two passes, because (bottleneck, total) has no optimal
 * substructure as a pair: a path with a worse bottleneck so far may still end in the best ring.
 *   1. the best bottleneck B: a binary search over the matrix's distinct values, each step a
 *      reachability DP over subsets ("is there a Hamiltonian cycle using only edges >= t?");
 *   2. the best total among rings whose edges are all >= B: Held-Karp over subsets.
 * Above that, a heuristic: greedy "widest next edge" from every start, then first-improvement
 * local search with direction-preserving relocations and segment reversals (the matrix is
 * directed, so a reversal is scored in full), bounded by a work budget so that the master's
 * loop thread is never held for long. */
#include "ccoip/master/ccoip_master_topo.h"

#include <stdlib.h>
#include <string.h>

#define HEURISTIC_BUDGET 40000000.0 /* edge evaluations in local search (~tens of ms) */

static double edge(size_t n, const double *bw, uint32_t a, uint32_t b) {
    double v = bw[(size_t) a * n + b];
    return v > 0 ? v : 0; /* negative or NaN input counts as unusable */
}

ccoip_topo_score_t ccoip_topo_score(size_t n, const double *bw, const uint32_t *order) {
    ccoip_topo_score_t s = {0, 0};
    if (n < 2) return s;
    for (size_t i = 0; i < n; i++) {
        double v = edge(n, bw, order[i], order[(i + 1) % n]);
        if (i == 0 || v < s.bottleneck) s.bottleneck = v;
        s.total += v;
    }
    return s;
}

bool ccoip_topo_better(ccoip_topo_score_t a, ccoip_topo_score_t b) {
    if (a.bottleneck != b.bottleneck) return a.bottleneck > b.bottleneck;
    return a.total > b.total;
}

/* ---- exact ---------------------------------------------------------------------------------- */

/* Is there a Hamiltonian cycle through node 0 with every edge >= t? Nodes 1..n-1 are bits
 * 0..n-2; reach[mask] holds the end nodes of paths from 0 that visit exactly mask. */
static bool feasible(size_t n, const double *bw, double t, uint32_t *reach) {
    size_t m = n - 1;
    uint32_t full = (1u << m) - 1;
    memset(reach, 0, ((size_t) full + 1) * sizeof *reach);
    for (uint32_t v = 1; v < n; v++)
        if (edge(n, bw, 0, v) >= t) reach[1u << (v - 1)] |= 1u << (v - 1);
    for (uint32_t mask = 1; mask < full; mask++) {
        uint32_t ends = reach[mask];
        for (uint32_t e = 0; ends != 0 && e < m; e++) {
            if (!(ends & (1u << e))) continue;
            for (uint32_t w = 0; w < m; w++)
                if (!(mask & (1u << w)) && edge(n, bw, e + 1, w + 1) >= t) reach[mask | (1u << w)] |= 1u << w;
        }
    }
    for (uint32_t e = 0; e < m; e++)
        if ((reach[full] & (1u << e)) && edge(n, bw, e + 1, 0) >= t) return true;
    return false;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static bool solve_exact(size_t n, const double *bw, uint32_t *order) {
    size_t m = n - 1, states = (size_t) 1 << m;
    double *vals = malloc(n * n * sizeof *vals);
    uint32_t *reach = malloc(states * sizeof *reach);
    double *dp = malloc(states * m * sizeof *dp);
    uint8_t *parent = malloc(states * m);
    bool ok = vals != NULL && reach != NULL && dp != NULL && parent != NULL;
    if (ok) {
        /* 1. the best bottleneck: the largest value t for which a cycle of edges >= t exists.
         * The smallest value always qualifies (every ring's edges are >= the minimum). */
        size_t nv = 0;
        for (uint32_t a = 0; a < n; a++)
            for (uint32_t b = 0; b < n; b++)
                if (a != b) vals[nv++] = edge(n, bw, a, b);
        qsort(vals, nv, sizeof *vals, cmp_double);
        size_t lo = 0, hi = nv - 1; /* vals[lo] feasible; answer in [lo, hi] */
        while (lo < hi) {
            size_t mid = lo + (hi - lo + 1) / 2;
            if (feasible(n, bw, vals[mid], reach)) lo = mid;
            else hi = mid - 1;
        }
        double t = vals[lo];
        /* 2. the best total among rings with every edge >= t (Held-Karp; -1: no path). */
        for (size_t i = 0; i < states * m; i++) dp[i] = -1;
        memset(parent, 0, states * m);
        for (uint32_t v = 1; v < n; v++)
            if (edge(n, bw, 0, v) >= t) dp[((size_t) 1 << (v - 1)) * m + v - 1] = edge(n, bw, 0, v);
        for (size_t mask = 1; mask < states; mask++)
            for (uint32_t e = 0; e < m; e++) {
                double d = dp[mask * m + e];
                if (d < 0) continue;
                for (uint32_t w = 0; w < m; w++) {
                    if (mask & ((size_t) 1 << w)) continue;
                    double x = edge(n, bw, e + 1, w + 1);
                    if (x < t) continue;
                    size_t to = (mask | ((size_t) 1 << w)) * m + w;
                    if (d + x > dp[to]) {
                        dp[to] = d + x;
                        parent[to] = (uint8_t) e;
                    }
                }
            }
        size_t full = states - 1;
        double best = -1;
        uint32_t last = 0;
        for (uint32_t e = 0; e < m; e++) {
            double d = dp[full * m + e], x = edge(n, bw, e + 1, 0);
            if (d >= 0 && x >= t && d + x > best) {
                best = d + x;
                last = e;
            }
        }
        ok = best >= 0; /* feasible(t) held, so a ring exists */
        size_t mask = full;
        order[0] = 0;
        for (size_t pos = n - 1; ok && pos >= 1; pos--) {
            order[pos] = last + 1;
            uint32_t prev = parent[mask * m + last];
            mask &= ~((size_t) 1 << last);
            last = prev;
        }
    }
    free(vals);
    free(reach);
    free(dp);
    free(parent);
    return ok;
}

/* ---- heuristic ------------------------------------------------------------------------------ */

/* From `start`, always take the widest edge to a peer not yet in the ring; rotated so that
 * peer 0 comes first. */
static void greedy(size_t n, const double *bw, uint32_t start, uint32_t *seq, uint8_t *used, uint32_t *out) {
    memset(used, 0, n);
    seq[0] = start;
    used[start] = 1;
    for (size_t k = 1; k < n; k++) {
        uint32_t best = UINT32_MAX;
        for (uint32_t w = 0; w < n; w++)
            if (!used[w] && (best == UINT32_MAX || edge(n, bw, seq[k - 1], w) > edge(n, bw, seq[k - 1], best))) best = w;
        seq[k] = best;
        used[best] = 1;
    }
    size_t z = 0;
    while (seq[z] != 0) z++;
    for (size_t i = 0; i < n; i++) out[i] = seq[(z + i) % n];
}

static bool solve_heuristic(size_t n, const double *bw, uint32_t *order) {
    uint32_t *seq = malloc(n * sizeof *seq), *cand = malloc(n * sizeof *cand), *tmp = malloc(n * sizeof *tmp);
    uint8_t *used = malloc(n);
    bool ok = seq != NULL && cand != NULL && tmp != NULL && used != NULL;
    if (ok) {
        ccoip_topo_score_t best = ccoip_topo_score(n, bw, order);
        for (uint32_t s = 0; s < n; s++) {
            greedy(n, bw, s, seq, used, cand);
            ccoip_topo_score_t sc = ccoip_topo_score(n, bw, cand);
            if (ccoip_topo_better(sc, best)) {
                best = sc;
                memcpy(order, cand, n * sizeof *order);
            }
        }
        /* Local search; position 0 stays peer 0 (rings are rotation-free). */
        double budget = HEURISTIC_BUDGET;
        bool improved = true;
        while (improved && budget > 0) {
            improved = false;
            /* Relocate: the peer at position i goes right after the one now at position j. */
            for (size_t i = 1; i < n && budget > 0; i++)
                for (size_t j = 0; j < n && budget > 0; j++) {
                    if (j == i || j + 1 == i) continue;
                    size_t k = 0;
                    for (size_t p = 0; p < n; p++) {
                        if (p == i) continue;
                        cand[k++] = order[p];
                        if (p == j) cand[k++] = order[i];
                    }
                    budget -= (double) n;
                    ccoip_topo_score_t sc = ccoip_topo_score(n, bw, cand);
                    if (ccoip_topo_better(sc, best)) {
                        best = sc;
                        memcpy(order, cand, n * sizeof *order);
                        improved = true;
                    }
                }
            /* Reverse the segment [i, j]. */
            for (size_t i = 1; i + 1 < n && budget > 0; i++)
                for (size_t j = i + 1; j < n && budget > 0; j++) {
                    memcpy(tmp, order, n * sizeof *tmp);
                    for (size_t a = i, b = j; a < b; a++, b--) {
                        uint32_t x = tmp[a];
                        tmp[a] = tmp[b];
                        tmp[b] = x;
                    }
                    budget -= (double) n;
                    ccoip_topo_score_t sc = ccoip_topo_score(n, bw, tmp);
                    if (ccoip_topo_better(sc, best)) {
                        best = sc;
                        memcpy(order, tmp, n * sizeof *order);
                        improved = true;
                    }
                }
        }
    }
    free(seq);
    free(cand);
    free(tmp);
    free(used);
    return ok;
}

bool ccoip_topo_solve(size_t n, const double *bw, uint32_t *order) {
    for (size_t i = 0; i < n; i++) order[i] = (uint32_t) i;
    if (n <= 3) {
        /* One ring of two; two directed rings of three: compare them. */
        if (n == 3) {
            uint32_t other[3] = {0, 2, 1};
            if (ccoip_topo_better(ccoip_topo_score(3, bw, other), ccoip_topo_score(3, bw, order)))
                memcpy(order, other, sizeof other);
        }
        return true;
    }
    if (n <= CCOIP_TOPO_EXACT_MAX && solve_exact(n, bw, order)) return true;
    for (size_t i = 0; i < n; i++) order[i] = (uint32_t) i; /* solve_exact may have left a part */
    solve_heuristic(n, bw, order);
    return false;
}
