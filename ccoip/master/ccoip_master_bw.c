/* ccoip_master_bw.c: the master's side of pcclOptimizeTopology. No I/O: packets go out through
 * st->send.
 *
 * The bandwidth matrix lives as long as the master: one slot per peer (by UUID), bw[a][b] the
 * rate a measured sending to b (directed: uplinks and downlinks differ), 0 while unknown. A peer
 * that leaves takes its row and column with it; a peer that comes back gets a new UUID anyway.
 *
 * A session (one pcclOptimizeTopology) starts when every accepted peer voted. Only pairs inside
 * a peer group matter (rings are per group) and only pairs missing from the matrix are measured,
 * in steps: in step k the member at ring position i of a group of m sends to the one at
 * (i + k) mod m. Each step is a permutation: every peer sends to at most one peer and receives
 * from at most one, the load a ring all-reduce puts on a host (send to next, receive from
 * previous), so no measurement shares a host's uplink or downlink with another measurement,
 * while all groups and all senders of a step run in parallel. When 2k = m the step would pair
 * peers in both directions at once (a's data and b's ACKs for a's stream on one uplink), which
 * a ring never does: that step runs in two halves (positions < k, then the rest). Steps end when
 * every member reported (a barrier), so at most about max(m) steps of the measurement time
 * each; steps with nothing to measure are skipped. Links that several pairs share beyond the
 * hosts (a switch, a WAN path) can still be contended within a step; the matrix does not model
 * that. On the wire a step is numbered 2k + half.
 *
 * Then each group's ring is solved (ccoip_master_topo.c) and adopted only when it beats the
 * current order: members of the group are permuted in the client table and their ids (the ring
 * order everywhere else: topology rounds sort by id, collectives rank in table order) swapped
 * accordingly, and a topology round of the accepted peers (no admission) connects the new
 * neighbours. When nothing changed and no ring is stale, everyone gets TOPOLOGY_RESULT(ok) at once.
 * A member leaving, a failed measurement or a step over its time fails the session for everyone
 * with TOPOLOGY_RESULT(failed); the old ring stands (unless the member that left was in it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/master/ccoip_master_bw.h"
#include "ccoip/master/ccoip_master_reach.h"
#include "ccoip/master/ccoip_master_topo.h"
#include "log/log.h"

#define MOD "ccoip-master"
#define DEFAULT_BENCH_MS 300
#define STEP_SLACK_MS 15000 /* a step may take its measurement time plus this */

typedef struct slot_t {
    ccoip_uuid_t uuid;
    bool used;
} slot_t;

struct ccoip_mbw_t {
    slot_t *slots; /* cap of them; bw is cap x cap */
    size_t cap;
    double *bw;
    /* The session in progress. Members are the accepted peers in ring order (table order). */
    bool active;
    uint64_t session;
    uint32_t step, maxk, duration_ms; /* step: 2 * offset + half (0: none yet) */
    uint64_t step_started_ms;
    size_t n;
    ccoip_mclient_t **members;
    ccoip_mclient_t **asked; /* the target of each member in this step, or NULL */
    ccoip_uuid_t *tokens;    /* each member's pair at the relay in this step (RELAYED streams) */
    bool relay;              /* the run has a relay (--relay) */
    bool *reported;
    size_t *gl;                   /* member indices grouped by peer group, ring order inside */
    size_t *gstart, *gpos, *gsize; /* per member: its group's offset in gl, its place, its size */
    size_t to_measure, measured;
};

static void send_to(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_packet_t *p) {
    if (!st->shutting_down) st->send(st->ctx, c, p);
}

bool ccoip_mbw_active(const ccoip_master_state_t *st) { return st->bw != NULL && st->bw->active; }

/* ---- the matrix ---------------------------------------------------------------------------- */

static long find_slot(const struct ccoip_mbw_t *m, const ccoip_uuid_t *u) {
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].used && memcmp(m->slots[i].uuid.b, u->b, 16) == 0) return (long) i;
    return -1;
}

/* The slot of u, made when missing (the matrix doubles when full); -1 when out of memory. */
static long slot_for(struct ccoip_mbw_t *m, const ccoip_uuid_t *u) {
    long s = find_slot(m, u);
    if (s >= 0) return s;
    for (size_t i = 0; i < m->cap; i++)
        if (!m->slots[i].used) {
            m->slots[i] = (slot_t){*u, true};
            return (long) i;
        }
    size_t cap = m->cap == 0 ? 8 : m->cap * 2;
    slot_t *slots = calloc(cap, sizeof *slots);
    double *bw = calloc(cap * cap, sizeof *bw);
    if (slots == NULL || bw == NULL) {
        free(slots);
        free(bw);
        return -1;
    }
    for (size_t a = 0; a < m->cap; a++) {
        slots[a] = m->slots[a];
        memcpy(&bw[a * cap], &m->bw[a * m->cap], m->cap * sizeof *bw);
    }
    free(m->slots);
    free(m->bw);
    m->slots = slots;
    m->bw = bw;
    s = (long) m->cap;
    m->cap = cap;
    m->slots[s] = (slot_t){*u, true};
    return s;
}

static double bw_of(const struct ccoip_mbw_t *m, const ccoip_mclient_t *a, const ccoip_mclient_t *b) {
    long x = find_slot(m, &a->uuid), y = find_slot(m, &b->uuid);
    return x < 0 || y < 0 ? 0 : m->bw[(size_t) x * m->cap + (size_t) y];
}

/* ---- the session ----------------------------------------------------------------------------- */

static void send_result(ccoip_master_state_t *st, ccoip_mclient_t *c, uint8_t status) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_M2C_TOPOLOGY_RESULT;
    p.u.topology_result.round = st->round;
    p.u.topology_result.status = status;
    p.u.topology_result.world = ccoip_members_world(st, c);
    send_to(st, c, &p);
}

static void end_session(struct ccoip_mbw_t *m) {
    free(m->members);
    free(m->asked);
    free(m->tokens);
    free(m->reported);
    free(m->gl);
    free(m->gstart);
    free(m->gpos);
    free(m->gsize);
    m->members = m->asked = NULL;
    m->tokens = NULL;
    m->reported = NULL;
    m->gl = m->gstart = m->gpos = m->gsize = NULL;
    m->n = 0;
    m->active = false;
}

/* Everyone still there gets FAILED; the matrix keeps what was measured. */
static void fail(ccoip_master_state_t *st, const char *why) {
    struct ccoip_mbw_t *m = st->bw;
    LOG_WARN(MOD, "topology optimisation %llu failed: %s", (unsigned long long) m->session, why);
    for (size_t i = 0; i < m->n; i++) {
        ccoip_mclient_t *c = m->members[i];
        if (c->dropped) continue;
        c->state = CCOIP_MSTATE_IDLE;
        send_result(st, c, CCOIP_RESULT_FAILED);
    }
    end_session(m);
}

/* The member that member i sends to at offset k, or NULL (group too small). */
static ccoip_mclient_t *partner(const struct ccoip_mbw_t *m, size_t i, uint32_t k) {
    if (k >= m->gsize[i]) return NULL;
    return m->members[m->gl[m->gstart[i] + (m->gpos[i] + k) % m->gsize[i]]];
}

/* Whether member i sends in half `half` of offset k: both directions of a pair never together. */
static bool in_half(const struct ccoip_mbw_t *m, size_t i, uint32_t k, uint32_t half) {
    if (2 * (size_t) k != m->gsize[i]) return half == 0;
    return (m->gpos[i] < k) == (half == 0);
}

/* How a stream from a to b is made (CCOIP_BENCH_*), as their ring edge would be: a dials b where
 * it can, b dials a where only a can be dialled, both the relay where neither can and the edge
 * would be relayed; -1: not measured (an edge that would be punched: a probe cannot punch). */
static int bench_how(const struct ccoip_mbw_t *m, const ccoip_mclient_t *a, const ccoip_mclient_t *b) {
    if (b->dial_bench == 0) return -1;
    if (b->reachable || ccoip_mreach_same_site(a, b)) return CCOIP_BENCH_DIRECT;
    if (a->reachable) return a->dial_bench != 0 ? CCOIP_BENCH_REVERSED : -1;
    return m->relay && !ccoip_mreach_punched(a, b) ? CCOIP_BENCH_RELAYED : -1;
}

/* Needs measuring: unknown, and a stream from a to b can be made. */
static bool missing(const struct ccoip_mbw_t *m, const ccoip_mclient_t *a, const ccoip_mclient_t *b) {
    return bench_how(m, a, b) >= 0 && bw_of(m, a, b) <= 0;
}

/* c's entry for o, which may stream to it: how, and for a stream that c dials in this step (o
 * measures into c, REVERSED or RELAYED) where and with which token. */
static ccoip_bench_sender_t sender_entry(const struct ccoip_mbw_t *m, const ccoip_mclient_t *c, size_t j) {
    const ccoip_mclient_t *o = m->members[j];
    ccoip_bench_sender_t e;
    memset(&e, 0, sizeof e);
    e.uuid = o->uuid;
    int how = m->asked[j] == c ? bench_how(m, o, c) : CCOIP_BENCH_DIRECT;
    e.how = (uint8_t) (how < 0 ? CCOIP_BENCH_DIRECT : how);
    if (e.how == CCOIP_BENCH_REVERSED) {
        uint16_t p2p, ss;
        ccoip_mreach_dial_for(c, o, &e.addr, &p2p, &ss, &e.bench_port);
    }
    if (e.how == CCOIP_BENCH_RELAYED) e.token = m->tokens[j];
    return e;
}

static bool send_requests(ccoip_master_state_t *st) {
    struct ccoip_mbw_t *m = st->bw;
    for (size_t i = 0; i < m->n; i++) {
        ccoip_mclient_t *c = m->members[i];
        ccoip_bench_target_t target;
        memset(&target, 0, sizeof target);
        ccoip_bench_sender_t *senders = m->gsize[i] > 1 ? calloc(m->gsize[i] - 1, sizeof *senders) : NULL;
        if (m->gsize[i] > 1 && senders == NULL) return false;
        uint32_t ns = 0;
        for (size_t k = 0; k < m->gsize[i]; k++) {
            size_t j = m->gl[m->gstart[i] + k];
            if (m->members[j] != c) senders[ns++] = sender_entry(m, c, j);
        }
        if (m->asked[i] != NULL) {
            target.uuid = m->asked[i]->uuid;
            uint16_t p2p, ss;
            ccoip_mreach_dial_for(c, m->asked[i], &target.addr, &p2p, &ss, &target.bench_port);
            target.how = (uint8_t) bench_how(m, c, m->asked[i]);
            if (target.how == CCOIP_BENCH_RELAYED) target.token = m->tokens[i];
        }
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_M2C_BANDWIDTH_REQUEST;
        p.u.bench_request = (ccoip_bench_request_t){.session = m->session, .step = m->step, .duration_ms = m->duration_ms,
                                                    .ntargets = m->asked[i] != NULL ? 1u : 0u, .targets = &target,
                                                    .nsenders = ns, .senders = senders};
        if (m->relay) {
            p.u.bench_request.relay_addr = st->opt.relay.inet;
            p.u.bench_request.relay_port = st->opt.relay.port;
        }
        m->reported[i] = false;
        send_to(st, c, &p);
        free(senders);
    }
    m->step_started_ms = st->now_ms;
    return true;
}

/* Reorders the members of one group (g[0..s) in ring order) as `order` says: they take the
 * table places and ids of the old order, so everything that follows the ring follows. */
static void permute(ccoip_master_state_t *st, ccoip_mclient_t **g, size_t s, const uint32_t *order) {
    size_t *pos = malloc(s * sizeof *pos);
    uint64_t *ids = malloc(s * sizeof *ids);
    ccoip_mclient_t **old = malloc(s * sizeof *old);
    if (pos != NULL && ids != NULL && old != NULL) {
        for (size_t j = 0, k = 0; j < st->nclients && k < s; j++)
            if (st->clients[j] == g[k]) pos[k++] = j;
        for (size_t j = 0; j < s; j++) {
            ids[j] = g[j]->id;
            old[j] = g[j];
        }
        for (size_t j = 0; j < s; j++) {
            st->clients[pos[j]] = old[order[j]];
            old[order[j]]->id = ids[j];
            g[j] = old[order[j]];
        }
    }
    free(pos);
    free(ids);
    free(old);
}

/* Solves each group's ring and adopts the better ones. False when out of memory. */
static bool solve(ccoip_master_state_t *st, bool *changed) {
    struct ccoip_mbw_t *m = st->bw;
    for (size_t at = 0; at < m->n;) {
        size_t s = m->gsize[m->gl[at]];
        ccoip_mclient_t **g = malloc(s * sizeof *g);
        double *mat = calloc(s * s, sizeof *mat);
        uint32_t *order = malloc(s * sizeof *order), *cur = malloc(s * sizeof *cur);
        bool ok = g != NULL && mat != NULL && order != NULL && cur != NULL;
        for (size_t j = 0; ok && j < s; j++) {
            g[j] = m->members[m->gl[at + j]];
            cur[j] = (uint32_t) j;
            *changed = *changed || g[j]->ring_stale;
        }
        for (size_t a = 0; ok && a < s; a++)
            for (size_t b = 0; b < s; b++) mat[a * s + b] = a == b ? 0 : bw_of(m, g[a], g[b]) / 1e6; /* Mbit/s */
        if (ok && s >= 3) {
            bool exact = ccoip_topo_solve(s, mat, order);
            ccoip_topo_score_t was = ccoip_topo_score(s, mat, cur), now = ccoip_topo_score(s, mat, order);
            bool better = ccoip_topo_better(now, was);
            LOG_INFO(MOD, "topology optimisation %llu: group %u ring of %zu: bottleneck %.1f Mbit/s (total %.0f), "
                          "best found %.1f (total %.0f, %s): %s",
                     (unsigned long long) m->session, g[0]->peer_group, s, was.bottleneck, was.total, now.bottleneck,
                     now.total, exact ? "exact" : "heuristic", better ? "adopting it" : "keeping the ring");
            if (better) {
                permute(st, g, s, order);
                *changed = true;
            }
        }
        free(g);
        free(mat);
        free(order);
        free(cur);
        if (!ok) return false;
        at += s;
    }
    return true;
}

static void finish(ccoip_master_state_t *st) {
    struct ccoip_mbw_t *m = st->bw;
    bool relink = false;
    if (!solve(st, &relink)) {
        fail(st, "out of memory solving the ring");
        return;
    }
    LOG_INFO(MOD, "topology optimisation %llu: %zu pairs measured, %s", (unsigned long long) m->session, m->measured,
             relink ? "connecting the new ring" : "the ring stays as it is");
    for (size_t i = 0; i < m->n; i++) m->members[i]->state = CCOIP_MSTATE_IDLE;
    ccoip_mclient_t **members = m->members;
    size_t n = m->n;
    m->members = NULL; /* kept for the answers below; end_session must not free it yet */
    end_session(m);
    if (relink) st->machine.relink(st); /* its TOPOLOGY_RESULT ends the members' calls */
    else
        for (size_t i = 0; i < n; i++) send_result(st, members[i], CCOIP_RESULT_OK);
    free(members);
}

/* Moves to the next step that has a pair to measure, or finishes. */
static void next_step(ccoip_master_state_t *st) {
    struct ccoip_mbw_t *m = st->bw;
    for (uint32_t s = m->step + 1; s <= 2 * m->maxk + 1; s++) {
        uint32_t k = s / 2, half = s % 2;
        bool any = false;
        for (size_t i = 0; i < m->n; i++) {
            ccoip_mclient_t *t = k >= 1 && in_half(m, i, k, half) ? partner(m, i, k) : NULL;
            m->asked[i] = t != NULL && missing(m, m->members[i], t) ? t : NULL;
            any = any || m->asked[i] != NULL;
            if (m->asked[i] != NULL && st->make_uuid != NULL) st->make_uuid(st->ctx, &m->tokens[i]);
        }
        if (!any) continue;
        m->step = s;
        if (!send_requests(st)) fail(st, "out of memory sending measurement requests");
        return;
    }
    finish(st);
}

static uint32_t bench_ms(void) {
    const char *v = getenv("PCCL_BENCH_MS");
    long x = v == NULL ? 0 : strtol(v, NULL, 10);
    return x >= 1 && x <= (long) CCOIP_MAX_BENCH_MS ? (uint32_t) x : DEFAULT_BENCH_MS;
}

void ccoip_mbw_start(ccoip_master_state_t *st) {
    if (st->bw == NULL) st->bw = calloc(1, sizeof *st->bw);
    struct ccoip_mbw_t *m = st->bw;
    size_t n = 0;
    for (size_t i = 0; i < st->nclients; i++) n += st->clients[i]->phase == CCOIP_MPHASE_ACCEPTED;
    bool ok = m != NULL && n > 0;
    if (ok) {
        m->members = calloc(n, sizeof *m->members);
        m->asked = calloc(n, sizeof *m->asked);
        m->tokens = calloc(n, sizeof *m->tokens);
        m->reported = calloc(n, sizeof *m->reported);
        m->gl = calloc(n, sizeof *m->gl);
        m->gstart = calloc(n, sizeof *m->gstart);
        m->gpos = calloc(n, sizeof *m->gpos);
        m->gsize = calloc(n, sizeof *m->gsize);
        ok = m->members && m->asked && m->tokens && m->reported && m->gl && m->gstart && m->gpos && m->gsize;
    }
    for (size_t i = 0; ok && i < st->nclients; i++) {
        ccoip_mclient_t *c = st->clients[i];
        if (c->phase != CCOIP_MPHASE_ACCEPTED) continue;
        m->members[m->n++] = c;
        ok = slot_for(m, &c->uuid) >= 0;
    }
    if (!ok) {
        LOG_ERROR(MOD, "out of memory starting a topology optimisation");
        for (size_t i = 0; i < st->nclients; i++) {
            ccoip_mclient_t *c = st->clients[i];
            if (c->phase != CCOIP_MPHASE_ACCEPTED) continue;
            c->state = CCOIP_MSTATE_IDLE;
            send_result(st, c, CCOIP_RESULT_FAILED);
        }
        if (m != NULL) end_session(m);
        return;
    }
    /* Group the members (first appearance order), ring order inside each group. */
    size_t at = 0;
    m->maxk = 0;
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = m->members[j]->peer_group == m->members[i]->peer_group;
        if (seen) continue;
        size_t start = at;
        for (size_t j = i; j < n; j++)
            if (m->members[j]->peer_group == m->members[i]->peer_group) {
                m->gpos[j] = at - start;
                m->gstart[j] = start;
                m->gl[at++] = j;
            }
        for (size_t k = start; k < at; k++) m->gsize[m->gl[k]] = at - start;
        if (at - start - 1 > m->maxk) m->maxk = (uint32_t) (at - start - 1);
    }
    m->active = true;
    m->relay = st->opt.relay.port != 0;
    m->session++;
    m->step = 0;
    m->duration_ms = bench_ms();
    m->measured = m->to_measure = 0;
    for (size_t i = 0; i < n; i++) {
        m->members[i]->state = CCOIP_MSTATE_BENCHMARKING;
        for (uint32_t k = 1; k < m->gsize[i]; k++) m->to_measure += missing(m, m->members[i], partner(m, i, k));
    }
    LOG_INFO(MOD, "topology optimisation %llu: %zu peers, %zu directed pairs to measure (%u ms each), the rest known",
             (unsigned long long) m->session, n, m->to_measure, m->duration_ms);
    next_step(st);
}

void ccoip_mbw_on_report(ccoip_master_state_t *st, ccoip_mclient_t *c, const ccoip_bench_report_t *r) {
    struct ccoip_mbw_t *m = st->bw;
    if (m == NULL || r->session > m->session) {
        st->machine.reject(st, c, "protocol violation: bandwidth report for a session that never was");
        return;
    }
    if (!m->active || r->session != m->session) return; /* late: that session already ended */
    size_t i = 0;
    while (i < m->n && m->members[i] != c) i++;
    if (i == m->n) return; /* admitted after the session began: never asked */
    const ccoip_mclient_t *t = m->asked[i];
    if (r->step != m->step || m->reported[i] || r->count != (t != NULL ? 1u : 0u) ||
        (t != NULL && memcmp(r->results[0].uuid.b, t->uuid.b, 16) != 0)) {
        st->machine.reject(st, c, "protocol violation: bandwidth report does not answer the request");
        return;
    }
    m->reported[i] = true;
    if (t != NULL) {
        if (r->results[0].bits_per_s == 0) {
            char why[200];
            snprintf(why, sizeof why, "%s could not measure its bandwidth to %s", c->name, t->name);
            fail(st, why);
            return;
        }
        long a = find_slot(m, &c->uuid), b = find_slot(m, &t->uuid);
        if (a >= 0 && b >= 0) m->bw[(size_t) a * m->cap + (size_t) b] = (double) r->results[0].bits_per_s;
        m->measured++;
        LOG_DEBUG(MOD, "bandwidth %s -> %s: %.1f Mbit/s", c->name, t->name, (double) r->results[0].bits_per_s / 1e6);
    }
    for (size_t k = 0; k < m->n; k++)
        if (!m->reported[k]) return;
    next_step(st);
}

void ccoip_mbw_on_leave(ccoip_master_state_t *st, const ccoip_mclient_t *gone) {
    struct ccoip_mbw_t *m = st->bw;
    if (m == NULL) return;
    for (size_t i = 0; m->active && i < m->n; i++)
        if (m->members[i] == gone) {
            char why[160];
            snprintf(why, sizeof why, "%s left during the measurement", gone->name);
            fail(st, why);
        }
    long s = find_slot(m, &gone->uuid);
    if (s < 0) return;
    for (size_t k = 0; k < m->cap; k++) m->bw[(size_t) s * m->cap + k] = m->bw[k * m->cap + (size_t) s] = 0;
    m->slots[s].used = false;
}

void ccoip_mbw_tick(ccoip_master_state_t *st) {
    struct ccoip_mbw_t *m = st->bw;
    if (m != NULL && m->active && st->now_ms - m->step_started_ms > (uint64_t) m->duration_ms + STEP_SLACK_MS)
        fail(st, "a measurement step timed out");
}

void ccoip_mbw_free(ccoip_master_state_t *st) {
    struct ccoip_mbw_t *m = st->bw;
    if (m == NULL) return;
    end_session(m);
    free(m->slots);
    free(m->bw);
    free(m);
    st->bw = NULL;
}
