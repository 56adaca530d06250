/* reduce_cache.c -- caching allocator for staging blocks.
 *
 * Every block carries a 64-byte header in front of it: its size class, the link of its free
 * list, and the link of the list of all blocks (so destroy frees blocks still in use too).
 * Classes are powers of two from 4 KiB to 1 TiB. A free puts the block at the head of its
 * class's list; an alloc takes the head, so the hottest block is reused first. Nothing is
 * given back to the system before trim or destroy: the cache is meant for the bounded set of
 * staging blocks that the ring cycles through. */
#include <pthread.h>
#include <stdlib.h>

#include "log/log.h"
#include "reduce/reduce.h"
#include "reduce/reduce_mem.h"

#define MIN_SHIFT 12
#define MAX_SHIFT 40
#define NUM_CLASSES (MAX_SHIFT - MIN_SHIFT + 1)
#define HEADER_SIZE 64
#define BLOCK_MAGIC 0x52454443u /* "REDC" */

typedef struct block_header {
    struct block_header *next_free;
    struct block_header *next_all;
    struct block_header *prev_all;
    uint32_t cls;
    uint32_t magic;
    uint32_t in_use;
} block_header_t;

_Static_assert(sizeof(block_header_t) <= HEADER_SIZE, "block header must fit its 64 bytes");

struct reduce_cache {
    pthread_mutex_t mu;
    block_header_t *free_lists[NUM_CLASSES];
    block_header_t *all;
    reduce_cache_stats_t stats;
    reduce_cache_source_t source;
};

static size_t class_capacity(uint32_t cls) {
    return (size_t) 1 << (cls + MIN_SHIFT);
}

/* The smallest class whose capacity is >= size, or -1 when size is too large. */
static int class_of(size_t size) {
    for (uint32_t cls = 0; cls < NUM_CLASSES; cls++)
        if (size <= class_capacity(cls)) return (int) cls;
    return -1;
}

static block_header_t *header_of(const void *block) {
    return (block_header_t *) ((char *) block - HEADER_SIZE);
}

static void *heap_alloc(void *ctx, size_t size) {
    (void) ctx;
    return reduce_aligned_alloc(HEADER_SIZE, size);
}

static void heap_free(void *ctx, void *mem) {
    (void) ctx;
    reduce_aligned_free(mem);
}

reduce_cache_t *reduce_cache_create_from(const reduce_cache_source_t *source) {
    reduce_cache_t *c = calloc(1, sizeof *c);
    if (c == NULL) return NULL;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    c->source = source != NULL ? *source : (reduce_cache_source_t){heap_alloc, heap_free, NULL};
    return c;
}

reduce_cache_t *reduce_cache_create(void) {
    return reduce_cache_create_from(NULL);
}

void reduce_cache_destroy(reduce_cache_t *c) {
    if (c == NULL) return;
    if (c->stats.blocks_in_use != 0)
        LOG_ERROR("reduce", "cache destroyed with %llu blocks still in use",
                  (unsigned long long) c->stats.blocks_in_use);
    block_header_t *h = c->all;
    while (h != NULL) {
        block_header_t *next = h->next_all;
        h->magic = 0;
        c->source.free(c->source.ctx, h);
        h = next;
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void *reduce_cache_alloc(reduce_cache_t *c, size_t size) {
    int cls = class_of(size);
    if (c == NULL || cls < 0) return NULL;

    pthread_mutex_lock(&c->mu);
    block_header_t *h = c->free_lists[cls];
    if (h != NULL) {
        c->free_lists[cls] = h->next_free;
        c->stats.blocks_free--;
        h->in_use = 1;
        c->stats.blocks_in_use++;
        pthread_mutex_unlock(&c->mu);
        return (char *) h + HEADER_SIZE;
    }
    pthread_mutex_unlock(&c->mu);

    /* Outside the lock: the system allocator may take its time. */
    void *mem = c->source.alloc(c->source.ctx, HEADER_SIZE + class_capacity((uint32_t) cls));
    if (mem == NULL) return NULL;
    h = mem;
    h->cls = (uint32_t) cls;
    h->magic = BLOCK_MAGIC;
    h->next_free = NULL;
    h->prev_all = NULL;
    h->in_use = 1;
    pthread_mutex_lock(&c->mu);
    h->next_all = c->all;
    if (c->all != NULL) c->all->prev_all = h;
    c->all = h;
    c->stats.system_allocs++;
    c->stats.bytes_held += class_capacity((uint32_t) cls);
    c->stats.blocks_in_use++;
    pthread_mutex_unlock(&c->mu);
    return (char *) h + HEADER_SIZE;
}

void reduce_cache_free(reduce_cache_t *c, void *block) {
    if (c == NULL || block == NULL) return;
    block_header_t *h = header_of(block);
    pthread_mutex_lock(&c->mu);
    if (h->magic != BLOCK_MAGIC || !h->in_use || h->cls >= NUM_CLASSES) {
        pthread_mutex_unlock(&c->mu);
        LOG_ERROR("reduce", "cache: free of a block that is not in use (%p)", block);
        return;
    }
    h->in_use = 0;
    h->next_free = c->free_lists[h->cls];
    c->free_lists[h->cls] = h;
    c->stats.blocks_in_use--;
    c->stats.blocks_free++;
    pthread_mutex_unlock(&c->mu);
}

size_t reduce_cache_block_capacity(const void *block) {
    return block == NULL ? 0 : class_capacity(header_of(block)->cls);
}

void reduce_cache_trim(reduce_cache_t *c) {
    if (c == NULL) return;
    block_header_t *doomed = NULL;
    pthread_mutex_lock(&c->mu);
    for (uint32_t cls = 0; cls < NUM_CLASSES; cls++) {
        block_header_t *h = c->free_lists[cls];
        c->free_lists[cls] = NULL;
        while (h != NULL) {
            block_header_t *next = h->next_free;
            if (h->prev_all != NULL) h->prev_all->next_all = h->next_all;
            else c->all = h->next_all;
            if (h->next_all != NULL) h->next_all->prev_all = h->prev_all;
            c->stats.bytes_held -= class_capacity(cls);
            c->stats.blocks_free--;
            h->next_free = doomed;
            doomed = h;
            h = next;
        }
    }
    pthread_mutex_unlock(&c->mu);
    while (doomed != NULL) {
        block_header_t *next = doomed->next_free;
        doomed->magic = 0;
        c->source.free(c->source.ctx, doomed);
        doomed = next;
    }
}

void reduce_cache_get_stats(reduce_cache_t *c, reduce_cache_stats_t *out) {
    pthread_mutex_lock(&c->mu);
    *out = c->stats;
    pthread_mutex_unlock(&c->mu);
}
