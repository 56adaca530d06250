/* cuda_api: the C-callable functions of the nvcc-built part of the cuda module.
 * The library reaches them through cuda_table() (cuda_table.h); GPU tests and benchmarks,
 * which exist only in the CUDA flavour, call them directly. Semantics as in cuda_table.h. */
#ifndef PCCL_CUDA_API_H
#define PCCL_CUDA_API_H

#include "cuda/cuda_table.h"

#ifdef __cplusplus
extern "C" {
#endif

cuda_status_t cuda_device_count(int *count);
bool cuda_is_device_pointer(const void *p);

cuda_status_t cuda_memcpy_d2h(void *dst, const void *src, size_t n, void *stream);
cuda_status_t cuda_memcpy_h2d(void *dst, const void *src, size_t n, void *stream);
cuda_status_t cuda_memcpy_d2h_async(void *dst, const void *src, size_t n, void *stream);
cuda_status_t cuda_memcpy_h2d_async(void *dst, const void *src, size_t n, void *stream);

cuda_status_t cuda_stream_create(void **stream);
cuda_status_t cuda_stream_synchronize(void *stream);
cuda_status_t cuda_stream_destroy(void *stream);

cuda_status_t cuda_host_alloc(void **p, size_t n);
cuda_status_t cuda_host_free(void *p);
cuda_status_t cuda_device_alloc(void **p, size_t n);
cuda_status_t cuda_device_free(void *p);

const char *cuda_status_string(cuda_status_t status);

cuda_status_t cuda_event_create(void **event);
cuda_status_t cuda_event_destroy(void *event);
cuda_status_t cuda_event_record(void *event, void *stream);
cuda_status_t cuda_stream_wait_event(void *stream, void *event);
cuda_status_t cuda_event_synchronize(void *event);
cuda_status_t cuda_flags_alloc(uint32_t **flags, size_t n);
cuda_status_t cuda_stream_wait_flag(void *stream, const uint32_t *flag, uint32_t target);
cuda_status_t cuda_memset_async(void *dst, int byte, size_t n, void *stream);
cuda_status_t cuda_stream_mark_if(void *stream, const uint32_t *status, void *dst, size_t n);
/* For tests: CUDA_OK when all work on `stream` is done, CUDA_INVALID while some is pending. */
cuda_status_t cuda_stream_query(void *stream);
/* For tests: "wait-value" or "kernel", the gate stream_wait_flag uses in this process. */
const char *cuda_gate_kind(void);

/* SimpleHash, synchronous: the table's simplehash. Checks that data is device memory (unless
 * len is 0), switches to the pointer's device, uses a cached workspace. */
cuda_status_t cuda_simplehash(const void *data, size_t len, void *stream, uint64_t *out);

/* SimpleHash, asynchronous, for callers that keep their own workspace (benchmarks, pipelines):
 * one kernel queued on `stream`, which writes the hash to *result (device memory, or mapped
 * page-locked host memory) when it is done. The workspace is device memory of at least
 * cuda_simplehash_workspace_bytes(len) bytes, 8-byte aligned, whose first 8 bytes are zero
 * before its first use (every completed hash leaves them zero again); it serves one hash at a
 * time. data is not checked: it must be device memory of the current device. */
size_t cuda_simplehash_workspace_bytes(size_t len);
cuda_status_t cuda_simplehash_async(const void *data, size_t len, void *workspace, uint64_t *result,
                                    void *stream);

/* SimpleHash of n inputs, synchronous: the table's simplehash_many. */
cuda_status_t cuda_simplehash_many(const cuda_hash_item_t *items, size_t n, void *stream, uint64_t *out);

/* The same, asynchronous, with the caller's memory: one launch per alignment class of the input
 * addresses (per 768 inputs) queued on `stream`; the table of inputs travels in the launch's
 * parameters, so `items` may be reused as soon as the call returns. results[i] (device memory,
 * or mapped page-locked host memory) gets the hash of input i. counters: n device words, zero
 * before the first use (every completed batch leaves them zero). workspace: device memory of
 * cuda_simplehash_many_workspace_bytes(items, n) bytes, 8-byte aligned (SIZE_MAX: 2^31 segments
 * or more, too many). Serves one batch at a time. Inputs are not checked: device memory of the
 * current device. */
size_t cuda_simplehash_many_workspace_bytes(const cuda_hash_item_t *items, size_t n);
cuda_status_t cuda_simplehash_many_async(const cuda_hash_item_t *items, size_t n, unsigned *counters,
                                         void *workspace, uint64_t *results, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* PCCL_CUDA_API_H */
