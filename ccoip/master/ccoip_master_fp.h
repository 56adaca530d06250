/* ccoip_master_fp.h: determinism fingerprints at admission (docs/fingerprint.md). */
#ifndef CCOIP_MASTER_FP_H
#define CCOIP_MASTER_FP_H

#include "ccoip/master/ccoip_master_members.h"

/* Determinism fingerprints (ccoip_master_fp.c): keep c's; at JOIN, true when c may register
 * (else `why` says what differs); forget c's when it leaves; free the run's at the end. */
void ccoip_mfp_on_packet(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_fingerprint_t *f);
bool ccoip_mfp_admit(ccoip_master_state_t *st, ccoip_mclient_t *c, char *why, size_t n);
void ccoip_mfp_on_leave(ccoip_mclient_t *c);
void ccoip_mfp_free(ccoip_master_state_t *st);

#endif /* CCOIP_MASTER_FP_H */
