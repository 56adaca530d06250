/* ccoip_master_topo.h: the ring-order solver of pcclOptimizeTopology. Pure: no I/O, no state.
 *
 * Input: n peers and a directed bandwidth matrix bw[a * n + b] (a sends to b, any unit; 0 means
 * unknown or unusable; the diagonal is ignored). A ring order o[0..n) uses the edges
 * o[i] -> o[i + 1 mod n] (the all-reduce sends to the next rank). The objective, lexicographic:
 * first the ring's bottleneck (its slowest edge, which paces every step of a ring all-reduce),
 * then the sum of its edges (the tie-break: more headroom elsewhere). */
#ifndef CCOIP_MASTER_TOPO_H
#define CCOIP_MASTER_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Up to this many peers the solver is exact (bitmask DP, 2^(n-1) * n^2 steps: ~0.3 M at 12). */
#define CCOIP_TOPO_EXACT_MAX 12u

typedef struct ccoip_topo_score_t {
    double bottleneck; /* the slowest edge of the ring */
    double total;      /* the sum of its edges */
} ccoip_topo_score_t;

/* The score of ring `order` (a permutation of 0..n-1). n < 2: {0, 0}. */
ccoip_topo_score_t ccoip_topo_score(size_t n, const double *bw, const uint32_t *order);

/* True when a is strictly better than b (bottleneck first, then total). */
bool ccoip_topo_better(ccoip_topo_score_t a, ccoip_topo_score_t b);

/* Writes the best ring found into order (a permutation with order[0] = 0). Exact up to
 * CCOIP_TOPO_EXACT_MAX peers; above, greedy widest-next starts from every peer, then local search
 * (relocate one peer, reverse a segment) within a fixed work budget. Returns true when exact;
 * false also when memory ran out (order is then the best heuristic ring, or the identity). */
bool ccoip_topo_solve(size_t n, const double *bw, uint32_t *order);

#endif /* CCOIP_MASTER_TOPO_H */
