/* hash: 64-bit content hashes of host buffers.
 * XXH3-64 (seed 0) hashes host memory; SimpleHash (hash/SIMPLEHASH.md) is the hash the CUDA
 * kernel computes, and hash_simple() is its CPU reference, bit for bit. Both accept any
 * alignment, and data may be NULL when len is 0. Both are pure functions: safe from any thread. */
#ifndef PCCL_HASH_H
#define PCCL_HASH_H

#include <stddef.h>
#include <stdint.h>

/* SimpleHash geometry (SIMPLEHASH.md, "Geometry"); fixed by the definition, never tuned. */
#define HASH_SIMPLE_WORD_BYTES 16
#define HASH_SIMPLE_LANES 256
#define HASH_SIMPLE_WORDS_PER_LANE 64
#define HASH_SIMPLE_ROW_BYTES (HASH_SIMPLE_LANES * HASH_SIMPLE_WORD_BYTES)
#define HASH_SIMPLE_SEGMENT_BYTES (HASH_SIMPLE_ROW_BYTES * HASH_SIMPLE_WORDS_PER_LANE)

/* XXH3_64bits(data, len): seed 0, the default secret. */
uint64_t hash_xxh3(const void *data, size_t len);

/* XXH3-64 (seed 0) of bytes given in pieces: the same 64 bits as hash_xxh3 over their
 * concatenation (the shared-state ranges are hashed as they go out and come in). new: NULL when
 * memory is short; reset before each run of updates. */
typedef struct hash_xxh3_stream_t hash_xxh3_stream_t;
hash_xxh3_stream_t *hash_xxh3_stream_new(void);
void hash_xxh3_stream_reset(hash_xxh3_stream_t *s);
void hash_xxh3_stream_update(hash_xxh3_stream_t *s, const void *data, size_t len);
uint64_t hash_xxh3_stream_digest(const hash_xxh3_stream_t *s);
void hash_xxh3_stream_free(hash_xxh3_stream_t *s);

/* SimpleHash v1 of len bytes at data. On x86-64 the row loop runs as AVX2 code when the CPU
 * has it; the result is the same either way. */
uint64_t hash_simple(const void *data, size_t len);

/* The same hash through the baseline-ISA build of the same C only (tests and benchmarks use it to
 * cover the path that CPUs without AVX2 take). */
uint64_t hash_simple_portable(const void *data, size_t len);

#endif /* PCCL_HASH_H */
