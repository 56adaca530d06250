/* hash_xxh3.c -- XXH3-64 of a host buffer, xxHash used header-only (XXH_INLINE_ALL). */
#include "hash/hash.h"

#include <xxhash.h>

uint64_t hash_xxh3(const void *data, size_t len) {
    return (uint64_t) XXH3_64bits(data, len);
}

/* The stream is XXH3's own state (aligned as it requires: XXH3_createState). */
struct hash_xxh3_stream_t {
    XXH3_state_t st;
};

hash_xxh3_stream_t *hash_xxh3_stream_new(void) {
    XXH3_state_t *st = XXH3_createState();
    if (st != NULL) XXH3_64bits_reset(st);
    return (hash_xxh3_stream_t *) st;
}

void hash_xxh3_stream_reset(hash_xxh3_stream_t *s) { XXH3_64bits_reset(&s->st); }

void hash_xxh3_stream_update(hash_xxh3_stream_t *s, const void *data, size_t len) {
    if (len > 0) XXH3_64bits_update(&s->st, data, len);
}

uint64_t hash_xxh3_stream_digest(const hash_xxh3_stream_t *s) { return (uint64_t) XXH3_64bits_digest(&s->st); }

void hash_xxh3_stream_free(hash_xxh3_stream_t *s) { XXH3_freeState((XXH3_state_t *) s); }
