/* ccoip_master_coll.h: the master's side of collectives (docs/group-state-machine.md). */
#ifndef CCOIP_MASTER_COLL_H
#define CCOIP_MASTER_COLL_H

#include "ccoip/master/ccoip_master_members.h"

/* Collectives (ccoip_master_coll.c): INIT and COMPLETE packets, and a member leaving. */
void ccoip_mcoll_on_init(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_collective_init_t *init);
void ccoip_mcoll_on_complete(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_collective_complete_t *done);
void ccoip_mcoll_on_leave(ccoip_master_state_t *st, const ccoip_mclient_t *gone);
/* The group's ring is going away (a member left, or voted to relink): every member is stale,
 * waiting collectives are refused, running ones aborted (their outcome: failed for all). */
void ccoip_mcoll_break_group(ccoip_master_state_t *st, uint32_t group);
/* The group's ring went stale: every member waiting for the others to start a collective gets
 * COMMENCE(failed) now (an INIT while stale gets it at once, too). */
void ccoip_mcoll_refuse_waiting(ccoip_master_state_t *st, uint32_t group);
/* C2M_COLLECTIVE_ABORT: c's watchdog gave up on a collective; it ends with TIMEOUT for the group. */
void ccoip_mcoll_on_abort(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_collective_abort_t *a);
/* A member that reconnected asks for the verdict on `tag`: what this master told, or would have
 * told, the UUID it had before (a DONE; status UNKNOWN when it never decided it). */
void ccoip_mcoll_on_query(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_collective_abort_t *q);
/* On dropping accepted member c: its verdicts for the gone table, CCOIP_MASTER_GONE_VERDICTS into
 * out (its collectives in flight end FAILED for the group, or TIMEOUT where a watchdog already
 * ended them). */
void ccoip_mcoll_keep_verdicts(const ccoip_mclient_t *c, ccoip_mverdict_t *out);

#endif /* CCOIP_MASTER_COLL_H */
