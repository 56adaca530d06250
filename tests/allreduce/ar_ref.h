/* ar_ref.h: inputs and expected results for the end-to-end all-reduce tests, computed with the
 * test's own code (never the library's kernels or conversions).
 *
 * Peer `seed`'s input element i is a pure function of (seed, i, dtype, op, kind). Two kinds:
 *   AR_EXACT:  values whose reduction does not depend on the order (integers wrap; floats are
 *              small integers for Sum/Avg, powers of two for Prod, distinct finite values for
 *              Max/Min), so the expected result is the plain fold over the seeds.
 *   AR_RANDOM: random floats in [-1, 1) (Prod: [0.5, 2)); the expected result follows the ring's
 *              documented accumulation order (reduce/README.md): element of chunk c is
 *              finish(((x[c+1] OP x[c+2]) OP ...) OP x[c]), with `seeds` listed in ring order.
 *              Integer dtypes treat RANDOM as EXACT. */
#ifndef AR_REF_H
#define AR_REF_H

#include <stddef.h>
#include <stdint.h>

#include "pccl.h"

enum { AR_EXACT = 0, AR_RANDOM = 1 };

size_t ar_dtype_size(int dtype);

/* Fills buf with count elements of peer `seed`'s input. */
void ar_fill_input(void *buf, size_t count, int dtype, int op, int kind, uint32_t seed);

/* The expected all-reduce of the inputs of nseeds peers (seeds in ring order) into out. */
void ar_expected(void *out, size_t count, int dtype, int op, int kind, const uint32_t *seeds,
                 uint32_t nseeds);

/* A 64-bit hash of the bytes, for comparing peers' results. */
uint64_t ar_hash(const void *buf, size_t len);

/* The bytes rank r sends and receives in the ring (payload only), per reduce/README.md:
 * it sends every chunk but its own, then every chunk but r+1's; it receives every chunk but
 * r-1's, then every chunk but its own. */
void ar_ring_bytes(size_t count, size_t esz, uint32_t n, uint32_t r, uint64_t *tx, uint64_t *rx);

#endif /* AR_REF_H */
