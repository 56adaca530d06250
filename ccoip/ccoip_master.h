/* ccoip_master.h: what the pccl-master binary and tests may call beyond the public five. */
#ifndef CCOIP_MASTER_H
#define CCOIP_MASTER_H

#include <stdint.h>

#include "ccoip/ccoip_master_state.h"
#include "pccl.h"

/* Before pcclRunMaster: timeouts (see ccoip_master_options_t). */
void ccoip_master_set_options(pcclMasterInstance_t *m, const ccoip_master_options_t *opt);

/* The port the master listens on (useful after asking for port 0). */
uint16_t ccoip_master_port(const pcclMasterInstance_t *m);

#endif /* CCOIP_MASTER_H */
