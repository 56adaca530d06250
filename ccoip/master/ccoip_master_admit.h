/* ccoip_master_admit.h: who a failed topology round is blamed on, and a newcomer's record of
 * failed admissions (docs/nat.md). Pure: the master's state machine (ccoip_master_state.c) asks
 * and acts.
 *
 * A round fails when a peer reports a link it could not make. When one end of that link is a
 * newcomer, the round failed because of it: the members' links are fine as far as anyone knows,
 * so the master runs the round again at once without the newcomer, and the members lose no step
 * to a peer they cannot reach. Of a failed link, the end to blame is
 *   - the newcomer, when only one end is a newcomer;
 *   - the end that was dialled, when both are (it is the one nobody could reach);
 *   - nobody, when both ends are members: the round fails for everyone, as any member failure.
 * A newcomer blamed in `tries` admissions is refused for good. */
#ifndef CCOIP_MASTER_ADMIT_H
#define CCOIP_MASTER_ADMIT_H

#include <stdbool.h>
#include <stdint.h>

/* A newcomer's admission so far. */
typedef struct ccoip_madmit_t {
    uint8_t link_fails; /* admissions that failed on its links */
    uint8_t why;        /* the last such failure (ccoip_link_why_t), for its TOPOLOGY_RESULT */
    bool sits_out;      /* blamed in this admission: its rounds run again without it */
    bool unreachable;   /* refused after `tries` failures; waits for its connection to close */
} ccoip_madmit_t;

typedef enum ccoip_blame_t {
    CCOIP_BLAME_NOBODY = 0,  /* a link between members: the round fails for everyone */
    CCOIP_BLAME_REPORTER = 1,
    CCOIP_BLAME_OTHER = 2
} ccoip_blame_t;

/* A peer reported a failed link (`why`, a ccoip_link_why_t) with another participant; `other_known`
 * is false when the report names none (or one no longer in the round). */
ccoip_blame_t ccoip_madmit_blame(bool reporter_is_newcomer, bool other_known, bool other_is_newcomer, uint8_t why);

/* Records an admission that failed on the newcomer's links; true when that was its last try. */
bool ccoip_madmit_fail(ccoip_madmit_t *a, uint8_t why, uint32_t tries);

#endif /* CCOIP_MASTER_ADMIT_H */
