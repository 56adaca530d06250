/* ccoip_master_reach.c: who can be dialled, and who dials each ring edge (ccoip_master_reach.h). */
#include "ccoip/master/ccoip_master_reach.h"

#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_socket.h"

static bool same_ip(const ccoip_inet_address_t *a, const ccoip_inet_address_t *b) {
    if (a->protocol != b->protocol) return false;
    return a->protocol == inetIPv4 ? memcmp(a->ipv4.data, b->ipv4.data, 4) == 0 : memcmp(a->ipv6.data, b->ipv6.data, 16) == 0;
}

void ccoip_mreach_take_join(ccoip_mclient_t *c, const ccoip_join_t *j) {
    c->advertised = j->advertised != 0;
    c->lan_addr = j->local_addr;
    c->dial_addr = j->advertised ? j->adv_addr : c->addr;
    c->dial_p2p = j->advertised && j->adv_port != 0 ? j->adv_port : j->p2p_port;
    /* The other listeners sit at the same offsets from the p2p one (a forwarded range). */
    uint16_t shift = (uint16_t) (c->dial_p2p - j->p2p_port);
    c->dial_ss = j->ss_port != 0 ? (uint16_t) (j->ss_port + shift) : 0;
    c->dial_bench = j->bench_port != 0 ? (uint16_t) (j->bench_port + shift) : 0;
}

bool ccoip_mreach_same_site(const ccoip_mclient_t *a, const ccoip_mclient_t *b) {
    return !a->advertised && !b->advertised && same_ip(&a->addr, &b->addr);
}

static bool has_lan_addr(const ccoip_mclient_t *c) {
    static const uint8_t zero[16];
    return memcmp(c->lan_addr.protocol == inetIPv4 ? c->lan_addr.ipv4.data : c->lan_addr.ipv6.data, zero,
                  c->lan_addr.protocol == inetIPv4 ? 4 : 16) != 0;
}

bool ccoip_mreach_same_host(const ccoip_mclient_t *a, const ccoip_mclient_t *b) {
    if (!same_ip(&a->addr, &b->addr)) return false;
    return !has_lan_addr(a) || !has_lan_addr(b) || same_ip(&a->lan_addr, &b->lan_addr);
}

void ccoip_mreach_dial_for(const ccoip_mclient_t *viewer, const ccoip_mclient_t *c, ccoip_inet_address_t *addr,
                           uint16_t *p2p, uint16_t *ss, uint16_t *bench) {
    bool site = viewer != c && has_lan_addr(c) && ccoip_mreach_same_site(viewer, c);
    *addr = site ? c->lan_addr : c->dial_addr;
    *p2p = site ? c->p2p_port : c->dial_p2p;
    *ss = site ? c->ss_port : c->dial_ss;
    *bench = site ? c->bench_port : c->dial_bench;
}

static bool reversed(const ccoip_mclient_t *from, const ccoip_mclient_t *to) {
    return from->reachable && !to->reachable && !ccoip_mreach_same_site(from, to);
}

/* Nobody can dial either end from the other's side. */
static bool blind(const ccoip_mclient_t *a, const ccoip_mclient_t *b) {
    return !a->reachable && !b->reachable && !ccoip_mreach_same_site(a, b);
}

bool ccoip_mreach_punched(const ccoip_mclient_t *from, const ccoip_mclient_t *to) {
    /* Not on loopback: no NAT there, and a SYN is answered before the other end's can leave, so
     * two dials never meet (peers there are unreachable only through an advertised port that
     * nothing listens on, as tests do). */
    return blind(from, to) && !from->loopback && from->punch_tx_port != 0 && to->punch_rx_port != 0 &&
           !from->punch_failed && !to->punch_failed;
}

static bool relayed(const ccoip_mclient_t *from, const ccoip_mclient_t *to, bool relay) {
    return relay && blind(from, to) && !ccoip_mreach_punched(from, to);
}

uint16_t ccoip_mreach_tx_flags(const ccoip_mclient_t *from, const ccoip_mclient_t *to, bool relay) {
    if (reversed(from, to)) return CCOIP_PEER_TX_REVERSED;
    if (ccoip_mreach_punched(from, to)) return CCOIP_PEER_TX_PUNCHED;
    return relayed(from, to, relay) ? CCOIP_PEER_TX_RELAYED : 0;
}

uint16_t ccoip_mreach_rx_flags(const ccoip_mclient_t *from, const ccoip_mclient_t *to, bool relay) {
    if (reversed(from, to)) return CCOIP_PEER_RX_REVERSED;
    if (ccoip_mreach_punched(from, to)) return CCOIP_PEER_RX_PUNCHED;
    return relayed(from, to, relay) ? CCOIP_PEER_RX_RELAYED : 0;
}

const char *ccoip_mreach_edge_kind(const ccoip_mclient_t *from, const ccoip_mclient_t *to, bool relay) {
    uint16_t f = ccoip_mreach_tx_flags(from, to, relay);
    return f == CCOIP_PEER_TX_REVERSED ? "reversed"
           : f == CCOIP_PEER_TX_PUNCHED ? "punched"
           : f == CCOIP_PEER_TX_RELAYED ? "relayed"
                                        : "direct";
}

/* Whether two unreachable members of the group at places[0..k) are neighbours (the ring closes). */
static bool has_blind_edge(ccoip_mclient_t **ring, const size_t *places, size_t k) {
    for (size_t i = 0; i < k && k > 1; i++)
        if (blind(ring[places[i]], ring[places[(i + 1) % k]])) return true;
    return false;
}

/* Appends to order, after *out, the next site of unreachable members not placed yet (all of
 * them, in their order); false when none is left. */
static bool take_site(ccoip_mclient_t **ring, const size_t *places, size_t k, bool *placed, ccoip_mclient_t **order,
                      size_t *out) {
    size_t first = 0;
    while (first < k && (placed[first] || ring[places[first]]->reachable)) first++;
    if (first == k) return false;
    for (size_t u = first; u < k; u++) {
        ccoip_mclient_t *c = ring[places[u]];
        if (placed[u] || c->reachable || (u != first && !ccoip_mreach_same_site(c, ring[places[first]]))) continue;
        placed[u] = true;
        order[(*out)++] = c;
    }
    return true;
}

/* One group (its members at places[0..k)): reachable ones in their order, each followed by the
 * next site of unreachable ones while any is left; the rest at the end. */
static void place_group(ccoip_mclient_t **ring, const size_t *places, size_t k, ccoip_mclient_t **order,
                        bool *placed) {
    size_t out = 0;
    memset(placed, 0, k * sizeof *placed);
    for (size_t i = 0; i < k; i++) {
        if (!ring[places[i]]->reachable) continue;
        order[out++] = ring[places[i]];
        take_site(ring, places, k, placed, order, &out);
    }
    while (take_site(ring, places, k, placed, order, &out)) {
    }
    for (size_t i = 0; i < k; i++) ring[places[i]] = order[i];
}

bool ccoip_mreach_place(ccoip_mclient_t **ring, size_t n) {
    size_t *places = malloc((n + 1) * sizeof *places);
    ccoip_mclient_t **order = malloc((n + 1) * sizeof *order);
    bool *placed = malloc(n + 1);
    bool moved = false;
    if (places == NULL || order == NULL || placed == NULL) n = 0; /* the order as it is still links what it can */
    for (size_t i = 0; i < n; i++) {
        bool first = true; /* i is the first member of its group */
        for (size_t j = 0; j < i && first; j++) first = ring[j]->peer_group != ring[i]->peer_group;
        if (!first) continue;
        size_t k = 0;
        for (size_t j = i; j < n; j++)
            if (ring[j]->peer_group == ring[i]->peer_group) places[k++] = j;
        if (!has_blind_edge(ring, places, k)) continue;
        place_group(ring, places, k, order, placed);
        moved = true;
    }
    free(places);
    free(order);
    free(placed);
    return moved;
}

void ccoip_mreach_format(const ccoip_mclient_t *c, char *out, size_t n) {
    ccoip_socket_address_t a = {c->dial_addr, c->dial_p2p};
    ccoip_format_address(&a, out, n);
}
