/* ccoip_master_members.c: see ccoip_master_members.h. Reads the table only. */
#include "ccoip/master/ccoip_master_members.h"

#include <string.h>

bool ccoip_members_uuid_zero(const ccoip_uuid_t *u) {
    static const ccoip_uuid_t zero;
    return memcmp(u, &zero, sizeof zero) == 0;
}

bool ccoip_members_in_round_vote(const ccoip_mclient_t *c) {
    return c->state == CCOIP_MSTATE_VOTE_ACCEPT || c->state == CCOIP_MSTATE_VOTE_RELINK ||
           c->state == CCOIP_MSTATE_VOTE_OPTIMIZE;
}

ccoip_world_t ccoip_members_world(const ccoip_master_state_t *st, const ccoip_mclient_t *c) {
    ccoip_world_t w = {0, 0, 0, 0};
    for (size_t i = 0; i < st->nclients; i++) {
        const ccoip_mclient_t *a = st->clients[i];
        if (a->phase != CCOIP_MPHASE_ACCEPTED) continue;
        w.global_world_size++;
        if (a->peer_group == c->peer_group) w.group_world_size++;
        /* Count a group when we meet its first accepted member, and measure it then. */
        bool first = true;
        uint32_t size = 0;
        for (size_t k = 0; k < st->nclients; k++) {
            const ccoip_mclient_t *b = st->clients[k];
            if (b->phase != CCOIP_MPHASE_ACCEPTED || b->peer_group != a->peer_group) continue;
            if (k < i) first = false;
            size++;
        }
        if (!first) continue;
        w.num_groups++;
        if (size > w.largest_group_world_size) w.largest_group_world_size = size;
    }
    return w;
}

/* After a restart, whether a round should wait: a member reported a ring successor that has not
 * rejoined yet, and the grace since the first REJOIN is not over (issue 29, 3: two members must
 * not run a step of two while the other two are a few ms from rejoining). */
bool ccoip_members_awaiting_rejoins(const ccoip_master_state_t *st) {
    if (st->first_rejoin_ms == 0 || st->now_ms - st->first_rejoin_ms >= st->opt.rejoin_grace_ms) return false;
    for (size_t i = 0; i < st->nclients; i++) {
        const ccoip_mclient_t *c = st->clients[i];
        if (c->phase != CCOIP_MPHASE_ACCEPTED || ccoip_members_uuid_zero(&c->next)) continue;
        bool back = false;
        for (size_t k = 0; k < st->nclients && !back; k++)
            back = st->clients[k]->phase == CCOIP_MPHASE_ACCEPTED &&
                   memcmp(&st->clients[k]->uuid, &c->next, sizeof c->next) == 0;
        if (!back) return true;
    }
    return false;
}

bool ccoip_members_group_votes(const ccoip_master_state_t *st, uint32_t group) {
    for (size_t i = 0; i < st->nclients; i++) {
        const ccoip_mclient_t *c = st->clients[i];
        if (c->phase == CCOIP_MPHASE_ACCEPTED && !c->dropped && c->peer_group == group &&
            (c->pending_vote || ccoip_members_in_round_vote(c)))
            return true;
    }
    return false;
}

const ccoip_mverdict_t *ccoip_members_gone_verdict(const ccoip_master_state_t *st, const ccoip_uuid_t *uuid,
                                                   uint64_t tag) {
    uint32_t n = st->ngone < CCOIP_MASTER_GONE_SLOTS ? st->ngone : CCOIP_MASTER_GONE_SLOTS;
    for (uint32_t k = 0; k < n; k++) { /* newest slot first: a UUID dropped twice */
        uint32_t i = (st->ngone - 1 - k) % CCOIP_MASTER_GONE_SLOTS;
        if (memcmp(&st->gone[i].uuid, uuid, sizeof *uuid) != 0) continue;
        const ccoip_mverdict_t *found = NULL;
        for (int v = 0; v < CCOIP_MASTER_GONE_VERDICTS; v++) /* later entries are newer */
            if (st->gone[i].verdicts[v].set && st->gone[i].verdicts[v].tag == tag) found = &st->gone[i].verdicts[v];
        return found;
    }
    return NULL;
}
