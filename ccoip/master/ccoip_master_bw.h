/* ccoip_master_bw.h: bandwidth measurement and the ring solver's input for pcclOptimizeTopology. */
#ifndef CCOIP_MASTER_BW_H
#define CCOIP_MASTER_BW_H

#include "ccoip/master/ccoip_master_members.h"

/* Topology optimisation (ccoip_master_bw.c): start when every accepted peer voted, reports,
 * a client leaving (drops its matrix row and column; fails a session it takes part in), the step
 * timeout, and freeing the matrix. */
void ccoip_mbw_start(ccoip_master_state_t *st);
bool ccoip_mbw_active(const ccoip_master_state_t *st);
void ccoip_mbw_on_report(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_bench_report_t *r);
void ccoip_mbw_on_leave(ccoip_master_state_t *st, const ccoip_mclient_t *gone);
void ccoip_mbw_tick(ccoip_master_state_t *st);
void ccoip_mbw_free(ccoip_master_state_t *st);

#endif /* CCOIP_MASTER_BW_H */
