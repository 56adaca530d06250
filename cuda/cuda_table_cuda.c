/* The CUDA flavour (--config=cuda): the table points at the nvcc-built functions. */
#include "cuda/cuda_api.h"
#include "cuda/cuda_table.h"
#include "cuda/cuda_fingerprint.h"

static const cuda_table_t table = {
    .device_count = cuda_device_count,
    .is_device_pointer = cuda_is_device_pointer,
    .simplehash = cuda_simplehash,
    .simplehash_many = cuda_simplehash_many,
    .memcpy_d2h = cuda_memcpy_d2h,
    .memcpy_h2d = cuda_memcpy_h2d,
    .memcpy_d2h_async = cuda_memcpy_d2h_async,
    .memcpy_h2d_async = cuda_memcpy_h2d_async,
    .stream_create = cuda_stream_create,
    .stream_synchronize = cuda_stream_synchronize,
    .stream_destroy = cuda_stream_destroy,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .device_alloc = cuda_device_alloc,
    .device_free = cuda_device_free,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .stream_wait_event = cuda_stream_wait_event,
    .event_synchronize = cuda_event_synchronize,
    .flags_alloc = cuda_flags_alloc,
    .stream_wait_flag = cuda_stream_wait_flag,
    .memset_async = cuda_memset_async,
    .stream_mark_if = cuda_stream_mark_if,
    .fingerprint = cuda_fingerprint_table,
    .status_string = cuda_status_string,
};

const cuda_table_t *cuda_table(void) { return &table; }
