/* reduce_mem_win32.c: reduce_mem.h with the CRT's _aligned_malloc (Windows has no
 * posix_memalign, and C11's aligned_alloc is missing from msvcrt). */
#include "reduce/reduce_mem.h"

#include <malloc.h>

void *reduce_aligned_alloc(size_t align, size_t size) { return _aligned_malloc(size, align); }

void reduce_aligned_free(void *p) { _aligned_free(p); }
