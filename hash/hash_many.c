/* hash_many.c: host hashes of many buffers, the large ones in parallel (hash_many.h). Workers
 * and the caller claim jobs from one atomic counter in list order, so a worker that drew a small
 * job comes back for the next; the call ends when every job is done. */
#include "hash/hash_many.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "hash/hash.h"

#define MAX_THREADS 8

typedef struct shared_t {
    hash_job_t *jobs;
    size_t n;
    atomic_size_t next;
} shared_t;

static void hash_one(hash_job_t *j) {
    j->out = j->kind == HASH_KIND_SIMPLE ? hash_simple(j->data, j->len) : hash_xxh3(j->data, j->len);
}

static void *claim_and_hash(void *arg) {
    shared_t *s = arg;
    for (size_t i; (i = atomic_fetch_add_explicit(&s->next, 1, memory_order_relaxed)) < s->n;) hash_one(&s->jobs[i]);
    return NULL;
}

void hash_many(hash_job_t *jobs, size_t n, unsigned max_threads) {
    size_t large = 0;
    for (size_t i = 0; i < n; i++) large += jobs[i].len >= HASH_MANY_PARALLEL_BYTES;
    unsigned threads = max_threads != 0 ? max_threads : hash_online_cpus();
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    if (threads > large) threads = (unsigned) large;
    if (threads < 2) {
        for (size_t i = 0; i < n; i++) hash_one(&jobs[i]);
        return;
    }
    shared_t s = {jobs, n, 0};
    pthread_t tids[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (unsigned t = 1; t < threads; t++) started[t] = pthread_create(&tids[t], NULL, claim_and_hash, &s) == 0;
    claim_and_hash(&s);
    for (unsigned t = 1; t < threads; t++)
        if (started[t]) pthread_join(tids[t], NULL);
}
