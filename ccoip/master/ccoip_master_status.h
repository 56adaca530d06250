/* ccoip_master_status.h: the status endpoint's page (docs/status-endpoint.md). */
#ifndef CCOIP_MASTER_STATUS_H
#define CCOIP_MASTER_STATUS_H

#include "ccoip/master/ccoip_master_members.h"

/* The status endpoint's page (Prometheus text format 0.0.4) into buf; returns its length, which
 * may exceed cap (then buf holds a truncated page: call again with more room). */
size_t ccoip_mstatus_render(const ccoip_master_state_t *st, char *buf, size_t cap);

#endif /* CCOIP_MASTER_STATUS_H */
