/* mesh_net.h -- in-memory links between any two of n simulated peers, for the grid all-reduce:
 * one two-peer memnet per pair (reduce_memlink.h), made when first asked for. Each peer keeps its
 * own abort flag and doorbell; a link's wait sleeps on its pair's condition, so a completion on
 * another pair is seen at the next poll (tests use a short poll_us). */
#ifndef PCCL_TESTS_REDUCE_MESH_NET_H
#define PCCL_TESTS_REDUCE_MESH_NET_H

#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"
#include "reduce/reduce_memlink.h"

#define MESH_MAX 40

typedef struct mesh {
    uint32_t n;
    reduce_memnet_t *pair[MESH_MAX][MESH_MAX]; /* [a][b], a < b */
    reduce_ring_params_t ends[MESH_MAX][MESH_MAX]; /* [a][b]: a's links to b (next: send, prev: receive) */
    _Atomic uint32_t abort[MESH_MAX], doorbell[MESH_MAX];
} mesh_t;

static inline mesh_t *mesh_create(uint32_t n) {
    mesh_t *m = calloc(1, sizeof *m);
    if (m != NULL) m->n = n;
    return m;
}

/* a's send link to b (tx) and receive link from b (rx); the die options apply to the pair. */
static inline int mesh_links(mesh_t *m, uint32_t a, uint32_t b, reduce_link_t *tx, reduce_link_t *rx,
                             const reduce_memnet_opts_t *opts) {
    uint32_t lo = a < b ? a : b, hi = a < b ? b : a;
    if (m->pair[lo][hi] == NULL) {
        m->pair[lo][hi] = reduce_memnet_create(2, opts);
        if (m->pair[lo][hi] == NULL) return -1;
        reduce_memnet_fill_params(m->pair[lo][hi], 0, &m->ends[lo][hi]);
        reduce_memnet_fill_params(m->pair[lo][hi], 1, &m->ends[hi][lo]);
    }
    *tx = m->ends[a][b].next;
    *rx = m->ends[a][b].prev;
    return 0;
}

/* Fails every link of peer p, as a dead process would. */
static inline void mesh_kill(mesh_t *m, uint32_t p) {
    for (uint32_t q = 0; q < m->n; q++) {
        uint32_t lo = p < q ? p : q, hi = p < q ? q : p;
        if (q != p && m->pair[lo][hi] != NULL) reduce_memnet_kill(m->pair[lo][hi], p < q ? 0 : 1);
    }
}

/* Raises every peer's abort flag and rings its doorbell, as the master's abort notice would. */
static inline void mesh_abort_all(mesh_t *m) {
    for (uint32_t p = 0; p < m->n; p++) {
        atomic_store(&m->abort[p], 1);
        atomic_fetch_add(&m->doorbell[p], 1);
    }
}

static inline void mesh_destroy(mesh_t *m) {
    for (uint32_t a = 0; a < MESH_MAX; a++)
        for (uint32_t b = 0; b < MESH_MAX; b++) reduce_memnet_destroy(m->pair[a][b]);
    free(m);
}

/* Peer pos's grid links for shape s. */
static inline int mesh_grid_links(mesh_t *m, const reduce_grid_shape_t *s, uint32_t pos, reduce_grid_links_t *l,
                                  const reduce_memnet_opts_t *opts) {
    reduce_grid_role_t ro;
    reduce_grid_role(s, pos, &ro);
    reduce_link_t unused;
    memset(l, 0, sizeof *l);
    int rc = 0;
    for (uint32_t d = 0; d < s->ndims && !ro.extra; d++) {
        rc |= mesh_links(m, pos, ro.next[d], &l->next[d], &unused, opts);
        rc |= mesh_links(m, pos, ro.prev[d], &unused, &l->prev[d], opts);
    }
    if (ro.fold != REDUCE_GRID_NONE) rc |= mesh_links(m, pos, ro.fold, &l->fold_tx, &l->fold_rx, opts);
    return rc;
}

#endif /* PCCL_TESTS_REDUCE_MESH_NET_H */
