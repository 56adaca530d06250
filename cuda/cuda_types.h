/* cuda_types: the status and the hash input of the cuda module's functions, shared by the table
 * (cuda_table.h) and the kernels' headers below it, so that a kernel's header never needs the
 * table that calls it. */
#ifndef PCCL_CUDA_TYPES_H
#define PCCL_CUDA_TYPES_H

#include <stddef.h>

typedef enum cuda_status_t {
    CUDA_OK = 0,
    CUDA_NO_DEVICE = 1,    /* no driver, no GPU, or the driver is older than the runtime */
    CUDA_INVALID = 2,      /* a bad argument, e.g. a host pointer where device memory is needed */
    CUDA_OUT_OF_MEMORY = 3,
    CUDA_RUNTIME_ERROR = 4 /* anything else; the log line names the cudart call and its error */
} cuda_status_t;

/* One input of a batch hash: len bytes of device memory at data (NULL allowed when len is 0). */
typedef struct cuda_hash_item_t {
    const void *data;
    size_t len;
} cuda_hash_item_t;

#endif /* PCCL_CUDA_TYPES_H */
