/* ccoip_master_coll.c: the master's side of collectives. A collective `tag` of a peer group
 * commences when every accepted member of the group has asked for it with the same description,
 * and is done when every member has reported its outcome; the outcome is shared, so that either
 * every member returns success or none does. A member leaving aborts what runs in its group; a
 * member's watchdog (C2M_COLLECTIVE_ABORT) ends the collective for its group with TIMEOUT. */
#include <string.h>

#include "ccoip/master/ccoip_master_coll.h"
#include "log/log.h"
#include "reduce/reduce.h"

#define MOD "ccoip-master"

static void send_to(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_packet_t *p) {
    if (!st->shutting_down) st->send(st->ctx, c, p);
}

/* Remembers the DONE sent to c (a ring of its last CCOIP_MASTER_VERDICTS). */
static void note_verdict(ccoip_mclient_t *c, uint64_t tag, uint8_t status) {
    c->verdicts[c->nverdicts++ % CCOIP_MASTER_VERDICTS] = (ccoip_mverdict_t){tag, status, true};
}

static ccoip_mcoll_t *find(ccoip_mclient_t *c, uint64_t tag) {
    for (int i = 0; i < CCOIP_MAX_COLLECTIVES; i++)
        if (c->colls[i].phase != CCOIP_MCOLL_FREE && c->colls[i].desc.tag == tag) return &c->colls[i];
    return NULL;
}

static bool is_member(const ccoip_mclient_t *c, uint32_t group) {
    return c->phase == CCOIP_MPHASE_ACCEPTED && !c->dropped && c->peer_group == group;
}

static bool same_desc(const ccoip_collective_init_t *a, const ccoip_collective_init_t *b) {
    return a->count == b->count && a->dtype == b->dtype && a->op == b->op && a->quant_dtype == b->quant_dtype &&
           a->quant_algo == b->quant_algo;
}

/* The collectives of c commenced and not yet done (every member holds the same ones). */
static uint32_t running_of(const ccoip_mclient_t *c) {
    uint32_t n = 0;
    for (int i = 0; i < CCOIP_MAX_COLLECTIVES; i++)
        n += c->colls[i].phase == CCOIP_MCOLL_RUNNING || c->colls[i].phase == CCOIP_MCOLL_COMPLETED;
    return n;
}

static void commence(ccoip_master_state_t *st, uint32_t group, uint64_t tag) {
    uint32_t world = 0, running = 1;
    bool stale = false, agree = true;
    const ccoip_collective_init_t *first = NULL;
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (!is_member(c, group)) continue;
        ccoip_mcoll_t *e = find(c, tag);
        if (first == NULL) {
            first = &e->desc;
            running += running_of(c); /* once: every member holds the same ones */
        }
        agree = agree && same_desc(first, &e->desc);
        stale = stale || c->ring_stale;
        world++;
    }
    uint8_t status = stale ? CCOIP_RESULT_FAILED : agree ? CCOIP_RESULT_OK : CCOIP_RESULT_MISMATCH;
    if (!agree) LOG_WARN(MOD, "collective %llu of group %u: members described it differently (count, type or op)",
                         (unsigned long long) tag, group);
    if (stale) LOG_INFO(MOD, "collective %llu of group %u refused: the ring lost a member, update the topology",
                        (unsigned long long) tag, group);
    uint32_t rank = 0;
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (!is_member(c, group)) continue;
        ccoip_mcoll_t *e = find(c, tag);
        e->phase = status == CCOIP_RESULT_OK ? CCOIP_MCOLL_RUNNING : CCOIP_MCOLL_FREE;
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_M2C_COLLECTIVE_COMMENCE;
        p.u.collective_commence =
            (ccoip_collective_commence_t){tag, status, rank++, world, status == CCOIP_RESULT_OK ? running : 0};
        send_to(st, c, &p);
    }
}

static void finish(ccoip_master_state_t *st, uint32_t group, uint64_t tag) {
    bool ok = true;
    const ccoip_mcoll_t *any = NULL;
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        ccoip_mcoll_t *e = is_member(c, group) ? find(c, tag) : NULL;
        if (e != NULL) ok = ok && e->ok && !e->aborted;
        if (e != NULL) any = e;
    }
    if (ok && any != NULL) {
        st->counters.collectives_ok++;
        st->counters.allreduce_bytes += any->desc.count * reduce_dtype_size((pcclDataType_t) any->desc.dtype);
    } else {
        st->counters.collectives_failed++;
    }
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        ccoip_mcoll_t *e = is_member(c, group) ? find(c, tag) : NULL;
        if (e == NULL) continue;
        e->phase = CCOIP_MCOLL_FREE;
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_M2C_COLLECTIVE_DONE;
        p.u.collective_done = (ccoip_collective_done_t){tag, ok ? CCOIP_RESULT_OK : CCOIP_RESULT_FAILED};
        note_verdict(c, tag, p.u.collective_done.status);
        send_to(st, c, &p);
    }
}

/* Moves collective `tag` of `group` on: it commences when every member waits for it, and is done
 * when every member that commenced it has reported. A member that came in after the COMMENCE (a
 * REJOIN after a master restart) has no part in it and is not waited for. */
static void evaluate(ccoip_master_state_t *st, uint32_t group, uint64_t tag) {
    size_t members = 0, waiting = 0, completed = 0, other = 0;
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (!is_member(c, group)) continue;
        members++;
        ccoip_mcoll_t *e = find(c, tag);
        if (e == NULL) continue;
        waiting += e->phase == CCOIP_MCOLL_WAITING;
        completed += e->phase == CCOIP_MCOLL_COMPLETED;
        other += e->phase != CCOIP_MCOLL_WAITING && e->phase != CCOIP_MCOLL_COMPLETED;
    }
    if (members == 0) return;
    if (waiting == members) commence(st, group, tag);
    else if (completed > 0 && waiting == 0 && other == 0) finish(st, group, tag);
}

/* COMMENCE(failed) to c alone: the member learns at once that its group needs a topology round
 * (pcclRankConnectionLost), instead of waiting for members that may be in a vote or a sync. */
static void refuse(ccoip_master_state_t *st, ccoip_mclient_t *c, uint64_t tag) {
    LOG_INFO(MOD, "%s: collective %llu refused: its group changed since the last topology round", c->name,
             (unsigned long long) tag);
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_M2C_COLLECTIVE_COMMENCE;
    p.u.collective_commence = (ccoip_collective_commence_t){tag, CCOIP_RESULT_FAILED, 0, 0, 0};
    send_to(st, c, &p);
}

void ccoip_mcoll_refuse_waiting(ccoip_master_state_t *st, uint32_t group) {
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (!is_member(c, group)) continue;
        for (int k = 0; k < CCOIP_MAX_COLLECTIVES; k++) {
            if (c->colls[k].phase != CCOIP_MCOLL_WAITING) continue;
            c->colls[k].phase = CCOIP_MCOLL_FREE;
            refuse(st, c, c->colls[k].desc.tag);
        }
    }
}

void ccoip_mcoll_on_init(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_collective_init_t *init) {
    if (find(c, init->tag) != NULL) {
        LOG_WARN(MOD, "%s started collective %llu twice", c->name, (unsigned long long) init->tag);
        st->machine.reject(st, c, "protocol violation: collective tag already in flight");
        return;
    }
    if (c->ring_stale) { /* its group changed since the last round: no ring to run on, say so now */
        refuse(st, c, init->tag);
        return;
    }
    for (int i = 0; i < CCOIP_MAX_COLLECTIVES; i++) {
        if (c->colls[i].phase != CCOIP_MCOLL_FREE) continue;
        c->colls[i] = (ccoip_mcoll_t){.phase = CCOIP_MCOLL_WAITING, .desc = *init};
        evaluate(st, c->peer_group, init->tag);
        return;
    }
    st->machine.reject(st, c, "protocol violation: too many collectives in flight");
}

void ccoip_mcoll_on_complete(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_collective_complete_t *done) {
    ccoip_mcoll_t *e = find(c, done->tag);
    if (e != NULL && e->phase == CCOIP_MCOLL_ABORTED) { /* the COMPLETE a watchdog abort still owed */
        e->phase = CCOIP_MCOLL_FREE;
        return;
    }
    if (e == NULL || e->phase != CCOIP_MCOLL_RUNNING) {
        st->machine.reject(st, c, "protocol violation: completed a collective that is not running");
        return;
    }
    e->phase = CCOIP_MCOLL_COMPLETED;
    e->ok = done->ok;
    evaluate(st, c->peer_group, done->tag);
}

void ccoip_mcoll_on_leave(ccoip_master_state_t *st, const ccoip_mclient_t *gone) {
    ccoip_mcoll_break_group(st, gone->peer_group);
}

void ccoip_mcoll_break_group(ccoip_master_state_t *st, uint32_t group) {
    ccoip_mcoll_refuse_waiting(st, group); /* those waiting for the rest would wait for it too */
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (!is_member(c, group)) continue;
        c->ring_stale = true;
        for (int k = 0; k < CCOIP_MAX_COLLECTIVES; k++) {
            ccoip_mcoll_t *e = &c->colls[k];
            if (e->phase != CCOIP_MCOLL_RUNNING && e->phase != CCOIP_MCOLL_COMPLETED) continue;
            if (e->aborted) continue;
            e->aborted = true;
            if (e->phase == CCOIP_MCOLL_RUNNING) {
                ccoip_packet_t p;
                memset(&p, 0, sizeof p);
                p.type = CCOIP_PKT_M2C_COLLECTIVE_ABORT;
                p.u.collective_abort.tag = e->desc.tag;
                send_to(st, c, &p);
            }
        }
    }
    /* The members that remain may all be waiting or all be done now. */
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (!is_member(c, group)) continue;
        for (int k = 0; k < CCOIP_MAX_COLLECTIVES; k++)
            if (c->colls[k].phase != CCOIP_MCOLL_FREE) evaluate(st, group, c->colls[k].desc.tag);
    }
}

static void send_tagged(ccoip_master_state_t *st, ccoip_mclient_t *c, uint16_t type, uint64_t tag) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = type;
    if (type == CCOIP_PKT_M2C_COLLECTIVE_ABORT) {
        p.u.collective_abort.tag = tag;
    } else if (type == CCOIP_PKT_M2C_COLLECTIVE_DONE) {
        p.u.collective_done = (ccoip_collective_done_t){tag, CCOIP_RESULT_TIMEOUT};
        note_verdict(c, tag, CCOIP_RESULT_TIMEOUT);
    } else {
        p.u.collective_commence = (ccoip_collective_commence_t){tag, CCOIP_RESULT_TIMEOUT, 0, 0, 0};
    }
    send_to(st, c, &p);
}

/* The watchdog (ccoip/README.md "Collective timeout"): the collective ends at once for the whole
 * group, with TIMEOUT as the shared outcome. Members waiting for COMMENCE get COMMENCE(TIMEOUT);
 * running ones get ABORT (their ring stops) and DONE(TIMEOUT), and the COMPLETE they still owe
 * is swallowed (CCOIP_MCOLL_ABORTED); completed ones get DONE(TIMEOUT). DONE does not wait for a
 * stalled member: that is the point. A ring that ran is stale until the next topology round (its
 * links are retired on every member); one that never commenced moved nothing and stays usable.
 * Members of the group in a vote instead of the collective (the misuse that left the others
 * waiting) get their vote refused. An ABORT that comes late (the collective is done, or already
 * aborted by another member's watchdog) changes nothing. */
void ccoip_mcoll_on_abort(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_collective_abort_t *a) {
    ccoip_mcoll_t *mine = find(c, a->tag);
    if (mine == NULL || mine->phase == CCOIP_MCOLL_ABORTED) return;
    uint32_t group = c->peer_group;
    bool waiting = mine->phase == CCOIP_MCOLL_WAITING;
    st->counters.collectives_timed_out++;
    LOG_WARN(MOD, "collective %llu of group %u: %s saw no progress for its timeout (%s); aborting it for the group",
             (unsigned long long) a->tag, group, c->name,
             waiting ? "not every member called it" : "a member stalled mid-collective");
    for (size_t i = 0; i < st->nclients; i++) {
        ccoip_mclient_t *m = st->clients[i];
        if (!is_member(m, group)) continue;
        if (!waiting) m->ring_stale = true;
        ccoip_mcoll_t *e = find(m, a->tag);
        if (e == NULL) continue;
        switch (e->phase) {
        case CCOIP_MCOLL_WAITING:
            send_tagged(st, m, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, a->tag);
            e->phase = CCOIP_MCOLL_FREE;
            break;
        case CCOIP_MCOLL_RUNNING:
            send_tagged(st, m, CCOIP_PKT_M2C_COLLECTIVE_ABORT, a->tag);
            send_tagged(st, m, CCOIP_PKT_M2C_COLLECTIVE_DONE, a->tag);
            e->phase = CCOIP_MCOLL_ABORTED;
            break;
        case CCOIP_MCOLL_COMPLETED:
            send_tagged(st, m, CCOIP_PKT_M2C_COLLECTIVE_DONE, a->tag);
            e->phase = CCOIP_MCOLL_FREE;
            break;
        default: break;
        }
    }
    if (waiting) st->machine.refuse_votes(st, group);
}

void ccoip_mcoll_keep_verdicts(const ccoip_mclient_t *c, ccoip_mverdict_t *out) {
    memset(out, 0, CCOIP_MASTER_GONE_VERDICTS * sizeof *out);
    int n = 0;
    for (uint32_t k = c->nverdicts > CCOIP_MASTER_VERDICTS ? c->nverdicts - CCOIP_MASTER_VERDICTS : 0; k < c->nverdicts; k++)
        out[n++] = c->verdicts[k % CCOIP_MASTER_VERDICTS]; /* oldest first */
    /* Then its collectives in flight, newest of all: the group's members are refused or aborted
     * because it left (ccoip_mcoll_on_leave), unless its watchdog had already ended them. */
    for (int k = 0; k < CCOIP_MAX_COLLECTIVES; k++) {
        const ccoip_mcoll_t *e = &c->colls[k];
        if (e->phase == CCOIP_MCOLL_FREE) continue;
        uint8_t status = e->phase == CCOIP_MCOLL_ABORTED ? CCOIP_RESULT_TIMEOUT : CCOIP_RESULT_FAILED;
        out[n++] = (ccoip_mverdict_t){e->desc.tag, status, true};
    }
}

void ccoip_mcoll_on_query(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_collective_abort_t *q) {
    const ccoip_mverdict_t *v = ccoip_members_gone_verdict(st, &c->uuid, q->tag);
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_M2C_COLLECTIVE_DONE;
    p.u.collective_done = (ccoip_collective_done_t){q->tag, v != NULL ? v->status : CCOIP_RESULT_UNKNOWN};
    LOG_INFO(MOD, "%s asked for the verdict on collective %llu: %s", c->name, (unsigned long long) q->tag,
             v == NULL ? "unknown here (decided by its ring)" : v->status == CCOIP_RESULT_OK ? "ok" : "failed");
    send_to(st, c, &p);
}
