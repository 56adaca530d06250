/* ccoip_ss_hash.c: a sync's tensor hashes in one go (ccoip_ss_hash.h). Requests are split by
 * where the bytes are and which hash is asked for: host bytes (either hash) go to hash_many,
 * device bytes with SimpleHash to one batch on the GPU, device bytes with XXH3 (a peer holding
 * the tensor on the host was elected) are copied to the host one tensor at a time, as before. */
#include "ccoip/peer/ccoip_ss_hash.h"

#include <stdlib.h>

#include "ccoip/wire/ccoip_packets.h"
#include "cuda/cuda_table.h"
#include "hash/hash.h"
#include "hash/hash_many.h"
#include "log/log.h"

#define MOD "pccl"

struct ccoip_ss_hasher_t {
    size_t cap;
    ccoip_ss_hash_req_t *reqs;
    hash_job_t *jobs;         /* host tensors */
    size_t *job_req;          /* the request of each job */
    cuda_hash_item_t *items;  /* device tensors, SimpleHash */
    size_t *item_req;
    uint64_t *item_hash;
};

void ccoip_ss_hasher_free(ccoip_ss_hasher_t *h) {
    if (h == NULL) return;
    free(h->reqs);
    free(h->jobs);
    free(h->job_req);
    free(h->items);
    free(h->item_req);
    free(h->item_hash);
    free(h);
}

bool ccoip_ss_hasher_reserve(ccoip_ss_hasher_t **hp, size_t n) {
    if (*hp != NULL && (*hp)->cap >= n) return true;
    ccoip_ss_hasher_t *h = calloc(1, sizeof *h);
    size_t cap = n < 16 ? 16 : n;
    if (h != NULL) {
        h->reqs = malloc(cap * sizeof *h->reqs);
        h->jobs = malloc(cap * sizeof *h->jobs);
        h->job_req = malloc(cap * sizeof *h->job_req);
        h->items = malloc(cap * sizeof *h->items);
        h->item_req = malloc(cap * sizeof *h->item_req);
        h->item_hash = malloc(cap * sizeof *h->item_hash);
        h->cap = cap;
    }
    if (h == NULL || !h->reqs || !h->jobs || !h->job_req || !h->items || !h->item_req || !h->item_hash) {
        ccoip_ss_hasher_free(h);
        return false;
    }
    ccoip_ss_hasher_free(*hp);
    *hp = h;
    return true;
}

ccoip_ss_hash_req_t *ccoip_ss_hasher_reqs(ccoip_ss_hasher_t *h) { return h->reqs; }

/* XXH3 of device bytes: through a host copy. */
static cuda_status_t xxh3_of_device(const cuda_table_t *cu, const ccoip_ss_slot_t *s, uint64_t *out) {
    void *host = malloc(s->bytes > 0 ? s->bytes : 1);
    cuda_status_t cs = host == NULL ? CUDA_OUT_OF_MEMORY : cu->memcpy_d2h(host, s->data, s->bytes, NULL);
    if (cs == CUDA_OK) *out = hash_xxh3(host, s->bytes);
    free(host);
    return cs;
}

bool ccoip_ss_hash_all(ccoip_ss_hasher_t *h, ccoip_ss_hash_req_t *reqs, size_t n, const char *fn) {
    const cuda_table_t *cu = cuda_table();
    size_t njobs = 0, nitems = 0;
    for (size_t i = 0; i < n; i++) {
        const ccoip_ss_slot_t *s = reqs[i].slot;
        if (!s->device) {
            h->jobs[njobs] = (hash_job_t){s->data, s->bytes, reqs[i].kind == CCOIP_HASH_SIMPLE ? HASH_KIND_SIMPLE : HASH_KIND_XXH3, 0};
            h->job_req[njobs++] = i;
        } else if (reqs[i].kind == CCOIP_HASH_SIMPLE) {
            h->items[nitems] = (cuda_hash_item_t){s->data, s->bytes};
            h->item_req[nitems++] = i;
        } else {
            cuda_status_t cs = xxh3_of_device(cu, s, &reqs[i].hash);
            if (cs != CUDA_OK) {
                LOG_ERROR(MOD, "%s: hashing tensor \"%s\" (a host copy of device memory) failed: %s", fn, s->name,
                          cu->status_string(cs));
                return false;
            }
        }
    }
    if (nitems > 0) {
        cuda_status_t cs = cu->simplehash_many(h->items, nitems, NULL, h->item_hash);
        if (cs != CUDA_OK) {
            LOG_ERROR(MOD, "%s: hashing %zu device tensors on the GPU failed: %s (first: \"%s\")", fn, nitems,
                      cu->status_string(cs), reqs[h->item_req[0]].slot->name);
            return false;
        }
        for (size_t k = 0; k < nitems; k++) reqs[h->item_req[k]].hash = h->item_hash[k];
    }
    hash_many(h->jobs, njobs, 0);
    for (size_t k = 0; k < njobs; k++) reqs[h->job_req[k]].hash = h->jobs[k].out;
    return true;
}
