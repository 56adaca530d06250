/* reduce_mem.h: aligned heap blocks, one body per platform (reduce_mem_posix.c: posix_memalign;
 * reduce_mem_win32.c: _aligned_malloc, whose blocks free() must not see). */
#ifndef REDUCE_MEM_H
#define REDUCE_MEM_H

#include <stddef.h>

/* size bytes aligned to align (a power of two, a multiple of sizeof(void *)); NULL when out of
 * memory. Freed with reduce_aligned_free only. */
void *reduce_aligned_alloc(size_t align, size_t size);
void reduce_aligned_free(void *p);

#endif /* REDUCE_MEM_H */
