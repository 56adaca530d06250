/* simple_naive: SimpleHash written a second time, straight from hash/SIMPLEHASH.md and
 * deliberately slow: bytes assembled one by one, one word at a time, lane by lane, the trees
 * built level by level. It shares no code with hash/hash_simple.c; tests compare the two. */
#ifndef PCCL_TESTS_HASH_SIMPLE_NAIVE_H
#define PCCL_TESTS_HASH_SIMPLE_NAIVE_H

#include <stddef.h>
#include <stdint.h>

uint64_t naive_simplehash(const unsigned char *bytes, uint64_t len);

/* Row key K[i] of the definition, for the test that checks the spec's printed values. */
uint64_t naive_row_key(uint64_t i);

#endif
