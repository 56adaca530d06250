/* ccoip_master_admit.c: who a failed topology round is blamed on (docs/nat.md).
 *
 * A round fails when a peer reports a link it could not make. When one end of that link is a
 * newcomer, the round failed because of it: the members' links are fine as far as anyone knows,
 * so the master runs the round again at once without the newcomer (ccoip_master_state.c), and the
 * members lose no step to a peer they cannot reach. Of a failed link, the end to blame is:
 *   - the newcomer, when only one end is a newcomer;
 *   - the end that was dialled, when both are (it is the one nobody could reach);
 *   - nobody, when both ends are members: the round fails for everyone, as any member failure.
 * A newcomer blamed in opt.admit_tries admission rounds is refused for good. */
#include <string.h>

#include "ccoip/master/ccoip_master_state.h"
#include "log/log.h"

#define MOD "ccoip-master"

static bool newcomer(const ccoip_mclient_t *c) { return c != NULL && c->phase == CCOIP_MPHASE_REGISTERED; }

static ccoip_mclient_t *participant(ccoip_master_state_t *st, const ccoip_uuid_t *uuid) {
    for (size_t i = 0; i < st->nclients; i++)
        if (st->clients[i]->in_round && memcmp(&st->clients[i]->uuid, uuid, sizeof *uuid) == 0) return st->clients[i];
    return NULL;
}

ccoip_mclient_t *ccoip_madmit_suspect(ccoip_master_state_t *st, ccoip_mclient_t *c) {
    ccoip_mclient_t *other = participant(st, &c->round_failed);
    if (other == NULL || other == c || c->round_why == CCOIP_LINK_LOCAL) return newcomer(c) ? c : NULL;
    bool c_dialled_it = c->round_why != CCOIP_LINK_NOT_DIALLED;
    ccoip_mclient_t *dialled = c_dialled_it ? other : c, *dialler = c_dialled_it ? c : other;
    if (newcomer(dialled)) return dialled;
    return newcomer(dialler) ? dialler : NULL;
}

bool ccoip_madmit_eligible(const ccoip_mclient_t *c) {
    return c->phase == CCOIP_MPHASE_REGISTERED && !c->sits_out && !c->unreachable;
}

size_t ccoip_madmit_waiting(const ccoip_master_state_t *st) {
    size_t n = 0;
    for (size_t i = 0; i < st->nclients; i++)
        n += st->clients[i]->phase == CCOIP_MPHASE_REGISTERED && !st->clients[i]->unreachable;
    return n;
}

bool ccoip_madmit_blame(ccoip_master_state_t *st, ccoip_mclient_t *n, uint8_t why) {
    n->sits_out = true;
    n->blame_why = why;
    if (n->link_fails < UINT8_MAX) n->link_fails++;
    uint32_t tries = st->opt.admit_tries == 0 ? 1 : st->opt.admit_tries;
    n->unreachable = n->link_fails >= tries;
    LOG_WARN(MOD, "%s (p2p port %u) could not be linked into the ring (%s): admission try %u of %u%s", n->name,
             n->p2p_port, ccoip_link_why_str(why), n->link_fails, tries,
             n->unreachable ? "; refused" : "; the round runs again without it");
    return n->unreachable;
}

void ccoip_madmit_end(ccoip_master_state_t *st) {
    for (size_t i = 0; i < st->nclients; i++) st->clients[i]->sits_out = false;
}
