/* ccoip_master_state.h: the master's decisions, free of I/O. The libuv layer (ccoip_master.c)
 * feeds it decoded packets, closes and clock ticks; it answers through two callbacks (send a
 * packet to a client, close a client). Everything runs on the master's loop thread: no locks.
 * The state machine decides votes, rounds, admission and who leaves; it calls its modules (the
 * headers below) on events, and they answer through ccoip_master_members.h. */
#ifndef CCOIP_MASTER_STATE_H
#define CCOIP_MASTER_STATE_H

#include "ccoip/master/ccoip_master_auth.h"
#include "ccoip/master/ccoip_master_bw.h"
#include "ccoip/master/ccoip_master_coll.h"
#include "ccoip/master/ccoip_master_fp.h"
#include "ccoip/master/ccoip_master_members.h"
#include "ccoip/master/ccoip_master_shared.h"
#include "ccoip/master/ccoip_master_status.h"

void ccoip_master_default_options(ccoip_master_options_t *o);

void ccoip_mstate_init(ccoip_master_state_t *st, const ccoip_master_options_t *opt);
void ccoip_mstate_free(ccoip_master_state_t *st);

/* A new connection; returns false (and the caller closes it) when out of memory. */
bool ccoip_mstate_add(ccoip_master_state_t *st, ccoip_mclient_t *c, uint64_t now_ms);

/* One decoded packet from c. */
void ccoip_mstate_on_packet(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_packet_t *p, uint64_t now_ms);

/* The connection back to c's p2p listener (st->probe) got through, or not (`why`). */
void ccoip_mstate_on_probe(ccoip_master_state_t *st, ccoip_mclient_t *c, bool reachable, const char *why,
                           uint64_t now_ms);

/* Removes c (its connection closed, or it broke the protocol: `why` is logged), tells the others
 * what changed, and asks the I/O layer to close it. Safe to call twice. */
void ccoip_mstate_drop(ccoip_master_state_t *st, ccoip_mclient_t *c, const char *why);

/* The same for bad input or a timeout: logged as a warning. */
void ccoip_mstate_reject(ccoip_master_state_t *st, ccoip_mclient_t *c, const char *why);

/* Before a shutdown on purpose: tells every joined peer not to reconnect (M2C_BYE). */
void ccoip_mstate_say_bye(ccoip_master_state_t *st);

/* Timeouts: handshakes, heartbeats, rounds. */
void ccoip_mstate_tick(ccoip_master_state_t *st, uint64_t now_ms);

#endif /* CCOIP_MASTER_STATE_H */
