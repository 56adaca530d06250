/* reduce_kernels_int.h -- private to reduce/: the kernel signature and the fp16/bf16 kernels
 * that reduce_half.c defines for reduce_kernels.c's dispatch table. */
#ifndef PCCL_REDUCE_KERNELS_INT_H
#define PCCL_REDUCE_KERNELS_INT_H

#include <stddef.h>
#include <stdint.h>

/* dst[i] = acc[i] OP x[i]; dst may equal acc or x. */
typedef void (*reduce_kernel_fn)(void *dst, const void *acc, const void *x, size_t n);

void reduce_f16_sum(void *dst, const void *acc, const void *x, size_t n);
void reduce_f16_prod(void *dst, const void *acc, const void *x, size_t n);
void reduce_f16_max(void *dst, const void *acc, const void *x, size_t n);
void reduce_f16_min(void *dst, const void *acc, const void *x, size_t n);
void reduce_bf16_sum(void *dst, const void *acc, const void *x, size_t n);
void reduce_bf16_prod(void *dst, const void *acc, const void *x, size_t n);
void reduce_bf16_max(void *dst, const void *acc, const void *x, size_t n);
void reduce_bf16_min(void *dst, const void *acc, const void *x, size_t n);

/* buf[i] = round(float(buf[i]) / divisor) */
void reduce_f16_div(void *buf, size_t n, uint32_t divisor);
void reduce_bf16_div(void *buf, size_t n, uint32_t divisor);

#endif /* PCCL_REDUCE_KERNELS_INT_H */
