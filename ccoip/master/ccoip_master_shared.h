/* ccoip_master_shared.h: the master's side of shared-state syncs (docs/shared-state.md). */
#ifndef CCOIP_MASTER_SHARED_H
#define CCOIP_MASTER_SHARED_H

#include "ccoip/master/ccoip_master_members.h"

/* Shared state (ccoip_master_shared.c): SYNC and DONE packets, and a client leaving (which also
 * frees its sync state; called for every dropped client, accepted or not). */
void ccoip_mss_on_sync(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_ss_sync_t *req);
/* Elects the syncs that wait for nothing more (after the rejoin grace held them), and answers the
 * queries of members whose sync lost its DONE (C2M_SHARED_STATE_QUERY). */
void ccoip_mss_evaluate_all(ccoip_master_state_t *st);
void ccoip_mss_on_query(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_ss_query_t *q);
void ccoip_mss_on_done(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_ss_done_t *done);
/* A member's watchdog gave up waiting for the RESULT: the sync ends for the group with TIMEOUT
 * (ignored once the RESULT went out: it crossed the abort). */
void ccoip_mss_on_abort(ccoip_master_state_t *st, ccoip_mclient_t *c);
void ccoip_mss_on_leave(ccoip_master_state_t *st, ccoip_mclient_t *gone, bool was_accepted);
/* REJOIN: c synced successfully before, at revision last_rev (the revision rule goes on from it).
 * False when out of memory. */
bool ccoip_mss_restore(ccoip_master_state_t *st, ccoip_mclient_t *c, uint64_t last_rev);
/* A member of group entered a vote: members waiting in a sync get RESULT(stale) now. */
void ccoip_mss_refuse_waiting(ccoip_master_state_t *st, uint32_t group);

#endif /* CCOIP_MASTER_SHARED_H */
