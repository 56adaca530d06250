/* reduce_mem_posix.c: reduce_mem.h with posix_memalign (Linux, macOS). */
#include "reduce/reduce_mem.h"

#include <stdlib.h>

void *reduce_aligned_alloc(size_t align, size_t size) {
    void *mem = NULL;
    return posix_memalign(&mem, align, size) == 0 ? mem : NULL;
}

void reduce_aligned_free(void *p) { free(p); }
