/* ccoip_master.h: the master instance: what api/pccl_master.c wraps as the public five, and what
 * the pccl-master binary and tests may call beyond them. */
#ifndef CCOIP_MASTER_H
#define CCOIP_MASTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip/master/ccoip_master_state.h"
#include "pccl.h"

/* The public five without the pcclInit check (api/pccl_master.c adds it). create binds and
 * listens; run starts the loop thread; interrupt asks it to close every connection and stop;
 * await joins it; destroy frees an instance that is not running. */
pcclResult_t ccoip_master_create(ccoip_socket_address_t listen_address, pcclMasterInstance_t **out);
pcclResult_t ccoip_master_run(pcclMasterInstance_t *m);
pcclResult_t ccoip_master_interrupt(pcclMasterInstance_t *m);
pcclResult_t ccoip_master_await(pcclMasterInstance_t *m);
pcclResult_t ccoip_master_destroy(pcclMasterInstance_t *m);

/* Before pcclRunMaster: timeouts (see ccoip_master_options_t). */
void ccoip_master_set_options(pcclMasterInstance_t *m, const ccoip_master_options_t *opt);

/* Before pcclRunMaster: every connection must prove this secret (CCOIP_SECRET_MIN..MAX bytes;
 * ccoip_auth.h). Without one the run is open to anyone who reaches the port. */
pcclResult_t ccoip_master_set_secret(pcclMasterInstance_t *m, const void *secret, size_t len);

/* The same from a derived key (pccl-master --secret-file). */
void ccoip_master_set_key(pcclMasterInstance_t *m, const ccoip_auth_key_t *key);

/* Before pcclRunMaster: every member must encrypt its p2p links (PCCL_ENCRYPT=1; with a secret). */
void ccoip_master_set_encrypt(pcclMasterInstance_t *m, bool on);
/* The same for the public call: pcclInvalidUsage when running, or asked without a secret. */
pcclResult_t ccoip_master_require_encryption(pcclMasterInstance_t *m, bool on);

/* The port the master listens on (useful after asking for port 0). */
uint16_t ccoip_master_port(const pcclMasterInstance_t *m);

/* Before pcclRunMaster: serve the status page (Prometheus text, ccoip_master_status.c) over
 * HTTP on addr (ccoip_master_http.h). False (and a log line) when it cannot listen there. */
bool ccoip_master_serve_status(pcclMasterInstance_t *m, ccoip_socket_address_t addr);

/* The status endpoint's port, 0 when there is none. */
uint16_t ccoip_master_status_port(const pcclMasterInstance_t *m);

#endif /* CCOIP_MASTER_H */
