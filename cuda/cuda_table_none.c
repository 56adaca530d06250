/* The host-only flavour (the default): no CUDA is built in, so there is no table. */
#include "cuda/cuda_table.h"

const cuda_table_t *cuda_table(void) { return NULL; }
