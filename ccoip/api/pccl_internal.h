/* Private to libpccl: state shared by the public API glue files. */
#ifndef PCCL_INTERNAL_H
#define PCCL_INTERNAL_H

#include <stdbool.h>

#include "pccl.h"

/* True once pcclInit has run in this process. */
bool pccl_is_initialized(void);

/* pccl_allreduce.c: the checks every all-reduce call makes before it takes a slot. */
pcclResult_t pccl_allreduce_precheck(const char *fn, const void *sendbuf, const void *recvbuf,
                                     const pcclReduceDescriptor_t *d, const pcclComm_t *comm);

#endif /* PCCL_INTERNAL_H */
