/* hash_many: the hashes of many host buffers at once, the large ones in parallel threads.
 * One buffer's XXH3 is one sequential chain, so the parallelism is across buffers: a model's
 * state on the host is a few large tensors and many small ones, and one core alone reads far
 * below the machine's memory bandwidth. */
#ifndef PCCL_HASH_MANY_H
#define PCCL_HASH_MANY_H

#include <stddef.h>
#include <stdint.h>

typedef enum hash_kind_t { HASH_KIND_XXH3 = 0, HASH_KIND_SIMPLE = 1 } hash_kind_t;

typedef struct hash_job_t {
    const void *data; /* NULL allowed when len is 0 */
    size_t len;
    hash_kind_t kind;
    uint64_t out;     /* the result */
} hash_job_t;

/* A job of at least this many bytes pays for a thread of its own (creating and joining a thread
 * costs tens of microseconds; XXH3 reads 1 MiB in about 100). */
#define HASH_MANY_PARALLEL_BYTES ((size_t) 1 << 20)

/* Fills every job's `out`. With two or more jobs of HASH_MANY_PARALLEL_BYTES or more, up to
 * max_threads threads (the caller's included; 0: the online CPUs, at most 8) take jobs in turn;
 * otherwise the caller hashes them all, and no thread is made. Results do not depend on the
 * threads. Threads live for the call only (nothing is left running, nothing to shut down);
 * when one cannot be made the others do its share. Allocates nothing itself. */
void hash_many(hash_job_t *jobs, size_t n, unsigned max_threads);

/* Online CPUs, at least 1 (hash_cpus_*.c). */
unsigned hash_online_cpus(void);

#endif /* PCCL_HASH_MANY_H */
