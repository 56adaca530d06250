/* Private to libpccl: state shared by the public API glue files. */
#ifndef PCCL_INTERNAL_H
#define PCCL_INTERNAL_H

#include <stdbool.h>

/* True once pcclInit has run in this process. */
bool pccl_is_initialized(void);

#endif /* PCCL_INTERNAL_H */
