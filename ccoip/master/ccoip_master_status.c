/* ccoip_master_status.c: the master's status page, in Prometheus text format (version 0.0.4).
 *
 * A read-only view of the state: peers by phase, groups and their ring order, collectives in
 * flight, and the totals of ccoip_mcounters_t. It runs on the loop thread like every other
 * reader of the state, so it needs no lock. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ccoip/master/ccoip_master_reach.h"
#include "ccoip/master/ccoip_master_status.h"

typedef struct page_t {
    char *buf;
    size_t cap, len;
} page_t;

/* Appends like snprintf; len keeps counting past cap, so the caller learns the size needed. */
static void put(page_t *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = p->len < p->cap ? p->cap - p->len : 0;
    int n = vsnprintf(room ? p->buf + p->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) p->len += (size_t) n;
}

static void help(page_t *p, const char *name, const char *type, const char *text) {
    put(p, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

static bool accepted(const ccoip_mclient_t *c) { return c->phase == CCOIP_MPHASE_ACCEPTED && !c->dropped; }

/* The distinct groups of accepted peers, ascending; returns how many (at most max). */
static size_t groups_of(const ccoip_master_state_t *st, uint32_t *out, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < st->nclients; i++) {
        if (!accepted(st->clients[i])) continue;
        uint32_t g = st->clients[i]->peer_group;
        size_t k = 0;
        while (k < n && out[k] < g) k++;
        if ((k < n && out[k] == g) || n == max) continue;
        memmove(out + k + 1, out + k, (n - k) * sizeof *out);
        out[k] = g;
        n++;
    }
    return n;
}

/* Distinct tags of group g that some member has not finished. */
static size_t in_flight(const ccoip_master_state_t *st, uint32_t g) {
    uint64_t tags[CCOIP_MAX_COLLECTIVES * 4];
    size_t n = 0;
    for (size_t i = 0; i < st->nclients; i++) {
        const ccoip_mclient_t *c = st->clients[i];
        if (!accepted(c) || c->peer_group != g) continue;
        for (int k = 0; k < CCOIP_MAX_COLLECTIVES; k++) {
            if (c->colls[k].phase == CCOIP_MCOLL_FREE) continue;
            size_t j = 0;
            while (j < n && tags[j] != c->colls[k].desc.tag) j++;
            if (j == n && n < sizeof tags / sizeof tags[0]) tags[n++] = c->colls[k].desc.tag;
        }
    }
    return n;
}

static const char *state_name(const ccoip_mclient_t *c) {
    static const char *const names[] = {"idle", "vote_accept", "connecting_p2p", "vote_relink", "vote_optimize",
                                        "benchmarking"};
    if (c->state == CCOIP_MSTATE_IDLE && c->pending_vote) return "vote_pending";
    return (unsigned) c->state < sizeof names / sizeof names[0] ? names[c->state] : "unknown";
}

/* c's successor in its group's ring (the accepted peers in id order, closing), NULL alone. */
static const ccoip_mclient_t *successor(const ccoip_master_state_t *st, const ccoip_mclient_t *c) {
    const ccoip_mclient_t *next = NULL, *first = NULL;
    for (size_t j = 0; j < st->nclients; j++) {
        const ccoip_mclient_t *o = st->clients[j];
        if (o == c || !accepted(o) || o->peer_group != c->peer_group) continue;
        if (o->id > c->id && (next == NULL || o->id < next->id)) next = o;
        if (first == NULL || o->id < first->id) first = o;
    }
    return next != NULL ? next : first;
}

/* One series per ring edge: how it is made (docs/nat.md). */
static void ring_edges(page_t *p, const ccoip_master_state_t *st) {
    help(p, "pccl_master_ring_edge", "gauge", "One series per ring edge of the accepted peers (from sends to to): "
                                             "direct, reversed (dialled by its receiver), punched or relayed.");
    for (size_t i = 0; i < st->nclients; i++) {
        const ccoip_mclient_t *c = st->clients[i], *n = accepted(c) ? successor(st, c) : NULL;
        if (n == NULL) continue;
        put(p, "pccl_master_ring_edge{from=\"%s\",to=\"%s\",via=\"%s\"} 1\n", c->name, n->name,
            ccoip_mreach_edge_kind(c, n, st->opt.relay.port != 0));
    }
}

size_t ccoip_mstatus_render(const ccoip_master_state_t *st, char *buf, size_t cap) {
    page_t p = {buf, cap, 0};
    if (cap > 0) buf[0] = '\0';
    size_t phase[5] = {0, 0, 0, 0, 0};
    for (size_t i = 0; i < st->nclients; i++)
        if (!st->clients[i]->dropped && (unsigned) st->clients[i]->phase < 5) phase[st->clients[i]->phase]++;
    help(&p, "pccl_master_peers", "gauge", "Connections by phase: handshaking (no JOIN yet), pending (waiting for "
                                           "admission), accepted.");
    put(&p, "pccl_master_peers{phase=\"handshaking\"} %zu\n", phase[CCOIP_MPHASE_CONNECTED] + phase[CCOIP_MPHASE_PROVING] +
                                                          phase[CCOIP_MPHASE_GREETED]);
    put(&p, "pccl_master_peers{phase=\"pending\"} %zu\n", phase[CCOIP_MPHASE_REGISTERED]);
    put(&p, "pccl_master_peers{phase=\"accepted\"} %zu\n", phase[CCOIP_MPHASE_ACCEPTED]);

    uint32_t groups[256];
    size_t ngroups = groups_of(st, groups, sizeof groups / sizeof groups[0]);
    help(&p, "pccl_master_peer_groups", "gauge", "Peer groups with at least one accepted peer.");
    put(&p, "pccl_master_peer_groups %zu\n", ngroups);
    help(&p, "pccl_master_group_peers", "gauge", "Accepted peers per group.");
    for (size_t k = 0; k < ngroups; k++) {
        size_t n = 0;
        for (size_t i = 0; i < st->nclients; i++) n += accepted(st->clients[i]) && st->clients[i]->peer_group == groups[k];
        put(&p, "pccl_master_group_peers{group=\"%u\"} %zu\n", groups[k], n);
    }
    help(&p, "pccl_master_collectives_in_flight", "gauge", "Collectives (tags) of a group that not every member "
                                                           "has finished.");
    for (size_t k = 0; k < ngroups; k++)
        put(&p, "pccl_master_collectives_in_flight{group=\"%u\"} %zu\n", groups[k], in_flight(st, groups[k]));

    /* Ring position: rank by id among the group's accepted peers; the ring runs in id order
     * (connection order, until pcclOptimizeTopology renumbers the ids). */
    help(&p, "pccl_master_peer_info", "gauge", "One series per accepted peer: its UUID, address as the master sees "
                                               "it, group, position in its group's ring and what it is doing.");
    for (size_t i = 0; i < st->nclients; i++) {
        const ccoip_mclient_t *c = st->clients[i];
        if (!accepted(c)) continue;
        size_t pos = 0;
        for (size_t j = 0; j < st->nclients; j++) {
            const ccoip_mclient_t *o = st->clients[j];
            pos += accepted(o) && o->peer_group == c->peer_group && o->id < c->id;
        }
        char uuid[33];
        for (int b = 0; b < 16; b++) snprintf(uuid + 2 * b, 3, "%02x", c->uuid.b[b]);
        put(&p, "pccl_master_peer_info{uuid=\"%s\",address=\"%s\",group=\"%u\",ring_position=\"%zu\",state=\"%s\"} 1\n",
            uuid, c->name, c->peer_group, pos, state_name(c));
    }

    ring_edges(&p, st);

    /* The totals: one counter each, but for the collectives' outcomes under one name. */
    const ccoip_mcounters_t *t = &st->counters;
    const struct {
        const char *name, *label, *help;
        uint64_t value;
    } totals[] = {
        {"pccl_master_topology_rounds_total", "", "Topology rounds started (pcclUpdateTopology, pcclOptimizeTopology).",
         st->round},
        {"pccl_master_peers_admitted_total", "", "Peers accepted into the run.", t->peers_admitted},
        {"pccl_master_peers_dropped_total", "", "Accepted peers that left or were dropped.", t->peers_dropped},
        {"pccl_master_collectives_total", "{outcome=\"ok\"}", "Finished collectives by shared outcome.",
         t->collectives_ok},
        {"pccl_master_collectives_total", "{outcome=\"failed\"}", NULL, t->collectives_failed},
        {"pccl_master_collectives_total", "{outcome=\"timeout\"}", NULL, t->collectives_timed_out},
        {"pccl_master_allreduce_bytes_total", "", "Payload of successful all-reduces (count x element size, once "
                                                  "per collective).", t->allreduce_bytes},
        {"pccl_master_shared_state_syncs_total", "", "Shared-state elections.", t->shared_state_syncs},
        {"pccl_master_shared_state_bytes_total", "", "Tensor bytes the elections told peers to fetch.",
         t->shared_state_bytes},
    };
    for (size_t i = 0; i < sizeof totals / sizeof totals[0]; i++) {
        if (totals[i].help != NULL) help(&p, totals[i].name, "counter", totals[i].help);
        put(&p, "%s%s %llu\n", totals[i].name, totals[i].label, (unsigned long long) totals[i].value);
    }
    return p.len;
}
