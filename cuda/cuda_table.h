/* cuda_table: the one door from the library to CUDA.
 *
 * CUDA is optional. The rest of the library never includes a CUDA header and never links
 * cudart itself: it asks cuda_table() for a table of function pointers. Built with
 * --config=cuda the table is filled at compile time with the functions of cuda_api.h (nvcc-built,
 * cudart linked statically); built without, cuda_table() returns NULL and every caller takes
 * its host-only path. A table does not promise a GPU: with no driver or no device,
 * device_count() says CUDA_NO_DEVICE and is_device_pointer() is false for every pointer.
 *
 * Streams are opaque `void *` (a cudaStream_t); NULL is the legacy default stream, which is
 * ordered after work queued on any blocking stream (PyTorch's default stream included). */
#ifndef PCCL_CUDA_TABLE_H
#define PCCL_CUDA_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_types.h"

typedef struct cuda_table_t {
    /* Devices visible to this process; CUDA_NO_DEVICE (count 0) when there are none. */
    cuda_status_t (*device_count)(int *count);
    /* True for device and managed memory; false for host memory (pinned too), NULL, and
     * everything when no GPU is usable. The first call in a process sets up the runtime. */
    bool (*is_device_pointer)(const void *p);

    /* SimpleHash v1 (hash/SIMPLEHASH.md) of len bytes of device memory at any alignment, equal to
     * hash_simple() of the same bytes. Runs on the GPU that owns the pointer, on `stream`, and
     * returns when the hash is known. Calls from several threads are safe (they take turns). */
    cuda_status_t (*simplehash)(const void *data, size_t len, void *stream, uint64_t *out);
    /* The same for n inputs at once, out[i] = the hash of items[i]: one launch per device that
     * owns inputs (and per alignment class of their addresses, per 768 inputs), then one wait,
     * so a model's many small tensors cost one launch, not one each. Every input is checked to
     * be device memory (CUDA_INVALID and one log line when one is not; the checks overlap the
     * hashing of the inputs checked before, whose results are then dropped). On failure out's
     * contents are unspecified. `stream` must be NULL (the legacy default stream) when the
     * inputs live on more than one device. */
    cuda_status_t (*simplehash_many)(const cuda_hash_item_t *items, size_t n, void *stream, uint64_t *out);

    /* Copies between device memory and host memory (pinned or pageable); the synchronous ones
     * return when the copy is done, the async ones when it is queued on `stream` (pinned host
     * memory makes them truly asynchronous). */
    cuda_status_t (*memcpy_d2h)(void *dst, const void *src, size_t n, void *stream);
    cuda_status_t (*memcpy_h2d)(void *dst, const void *src, size_t n, void *stream);
    cuda_status_t (*memcpy_d2h_async)(void *dst, const void *src, size_t n, void *stream);
    cuda_status_t (*memcpy_h2d_async)(void *dst, const void *src, size_t n, void *stream);

    /* Non-blocking streams (not ordered with the legacy default stream). */
    cuda_status_t (*stream_create)(void **stream);
    cuda_status_t (*stream_synchronize)(void *stream);
    cuda_status_t (*stream_destroy)(void *stream);

    /* Page-locked host memory (staging blocks) and device memory of the current device. */
    cuda_status_t (*host_alloc)(void **p, size_t n);
    cuda_status_t (*host_free)(void *p);
    cuda_status_t (*device_alloc)(void **p, size_t n);
    cuda_status_t (*device_free)(void *p);

    /* Stream-ordered collectives (ccoip/peer/ccoip_gate.h). Events are timing-free; a wait on
     * an event holds the stream until the work recorded before it is done. */
    cuda_status_t (*event_create)(void **event);
    cuda_status_t (*event_destroy)(void *event);
    cuda_status_t (*event_record)(void *event, void *stream);
    cuda_status_t (*stream_wait_event)(void *stream, void *event);
    /* Returns when the work recorded before the event is done (the calling thread waits). */
    cuda_status_t (*event_synchronize)(void *event);
    /* n page-locked host words, zeroed, that every GPU can read directly (mapped, portable);
     * freed with host_free. */
    cuda_status_t (*flags_alloc)(uint32_t **flags, size_t n);
    /* Queues on `stream` a wait until (int32_t)(*flag - target) >= 0, flag being a word of
     * flags_alloc: a stream memory op (cuStreamWaitValue32) where the driver has it, else a
     * one-thread kernel that polls the word (PCCL_STREAM_GATE=kernel forces the kernel). The
     * host releases it with a plain store; the call itself never blocks. */
    cuda_status_t (*stream_wait_flag)(void *stream, const uint32_t *flag, uint32_t target);
    cuda_status_t (*memset_async)(void *dst, int byte, size_t n, void *stream);
    /* Queues on `stream` a kernel that reads *status (a word of flags_alloc) when it runs and,
     * if it is not 0, fills n bytes of device memory at dst with 0xFF; with 0 it ends at once. */
    cuda_status_t (*stream_mark_if)(void *stream, const uint32_t *status, void *dst, size_t n);

    /* The determinism fingerprint of device 0 (cuda/cuda_fingerprint.h; fp is a
     * pcclDeterminismFingerprint_t). */
    cuda_status_t (*fingerprint)(void *fp, int quick);

    /* "CUDA_OK", "CUDA_NO_DEVICE", ...; never NULL. */
    const char *(*status_string)(cuda_status_t status);
} cuda_table_t;

/* The table when CUDA is built in, NULL when it is not. Constant for the life of the process. */
const cuda_table_t *cuda_table(void);

#endif /* PCCL_CUDA_TABLE_H */
