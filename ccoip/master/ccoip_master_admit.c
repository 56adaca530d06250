/* ccoip_master_admit.c: who a failed topology round is blamed on (ccoip_master_admit.h). */
#include "ccoip/master/ccoip_master_admit.h"

#include "ccoip/wire/ccoip_packets.h"

ccoip_blame_t ccoip_madmit_blame(bool reporter_is_newcomer, bool other_known, bool other_is_newcomer, uint8_t why) {
    if (!other_known || why == CCOIP_LINK_LOCAL)
        return reporter_is_newcomer ? CCOIP_BLAME_REPORTER : CCOIP_BLAME_NOBODY;
    /* "Not dialled": the other end was to dial the reporter. Otherwise the reporter dialled. */
    bool reporter_dialled = why != CCOIP_LINK_NOT_DIALLED;
    bool dialled_new = reporter_dialled ? other_is_newcomer : reporter_is_newcomer;
    bool dialler_new = reporter_dialled ? reporter_is_newcomer : other_is_newcomer;
    if (dialled_new) return reporter_dialled ? CCOIP_BLAME_OTHER : CCOIP_BLAME_REPORTER;
    if (dialler_new) return reporter_dialled ? CCOIP_BLAME_REPORTER : CCOIP_BLAME_OTHER;
    return CCOIP_BLAME_NOBODY;
}

bool ccoip_madmit_fail(ccoip_madmit_t *a, uint8_t why, uint32_t tries) {
    a->sits_out = true;
    a->why = why;
    if (a->link_fails < UINT8_MAX) a->link_fails++;
    a->unreachable = a->link_fails >= (tries == 0 ? 1 : tries);
    return a->unreachable;
}
