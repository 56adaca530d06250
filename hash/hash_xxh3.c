/* hash_xxh3.c -- XXH3-64 of a host buffer, xxHash used header-only (XXH_INLINE_ALL). */
#include "hash/hash.h"

#include <xxhash.h>

uint64_t hash_xxh3(const void *data, size_t len) {
    return (uint64_t) XXH3_64bits(data, len);
}
