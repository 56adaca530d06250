/* ccoip_ss_hash: the hashes of a shared-state sync's tensors, all at once. Host tensors go
 * through hash_many (the large ones in parallel threads), device tensors through one batch
 * launch per GPU (the cuda table's simplehash_many): a model's hundreds of small tensors cost
 * one launch and one wait, not one each. The arrays live in a hasher kept by the communicator
 * and grown with the largest sync seen, so a repeated sync allocates nothing here. */
#ifndef PCCL_CCOIP_SS_HASH_H
#define PCCL_CCOIP_SS_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip/peer/ccoip_peer_shared.h"

typedef struct ccoip_ss_hash_req_t {
    const ccoip_ss_slot_t *slot;
    uint8_t kind;  /* CCOIP_HASH_XXH3 or CCOIP_HASH_SIMPLE */
    uint64_t hash; /* the result */
} ccoip_ss_hash_req_t;

typedef struct ccoip_ss_hasher_t ccoip_ss_hasher_t;

/* A hasher for up to n requests at a time (*h NULL at first, grown as needed); false when memory
 * ran out (*h stays usable for what it held before). */
bool ccoip_ss_hasher_reserve(ccoip_ss_hasher_t **h, size_t n);
void ccoip_ss_hasher_free(ccoip_ss_hasher_t *h);
/* The requests of the hasher, room for the n last reserved. */
ccoip_ss_hash_req_t *ccoip_ss_hasher_reqs(ccoip_ss_hasher_t *h);

/* Fills the hash of reqs[0 .. n) (n at most what was reserved); false, with one log line, when a
 * GPU hash failed. `fn` names the API call in that line. */
bool ccoip_ss_hash_all(ccoip_ss_hasher_t *h, ccoip_ss_hash_req_t *reqs, size_t n, const char *fn);

#endif /* PCCL_CCOIP_SS_HASH_H */
