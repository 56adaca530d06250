/* ccoip_master_reach.c: who can be dialled, and who dials each ring edge (ccoip_master_reach.h). */
#include "ccoip/master/ccoip_master_reach.h"

#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_socket.h"

void ccoip_mreach_take_join(ccoip_mclient_t *c, const ccoip_join_t *j) {
    c->dial_addr = j->advertised ? j->adv_addr : c->addr;
    c->dial_p2p = j->advertised && j->adv_port != 0 ? j->adv_port : j->p2p_port;
    /* The other listeners sit at the same offsets from the p2p one (a forwarded range). */
    uint16_t shift = (uint16_t) (c->dial_p2p - j->p2p_port);
    c->dial_ss = j->ss_port != 0 ? (uint16_t) (j->ss_port + shift) : 0;
    c->dial_bench = j->bench_port != 0 ? (uint16_t) (j->bench_port + shift) : 0;
}

static bool reversed(const ccoip_mclient_t *from, const ccoip_mclient_t *to) {
    return from->reachable && !to->reachable;
}

static bool relayed(const ccoip_mclient_t *from, const ccoip_mclient_t *to, bool relay) {
    return relay && !from->reachable && !to->reachable;
}

uint8_t ccoip_mreach_tx_flags(const ccoip_mclient_t *from, const ccoip_mclient_t *to, bool relay) {
    return reversed(from, to) ? CCOIP_PEER_TX_REVERSED : relayed(from, to, relay) ? CCOIP_PEER_TX_RELAYED : 0;
}

uint8_t ccoip_mreach_rx_flags(const ccoip_mclient_t *from, const ccoip_mclient_t *to, bool relay) {
    return reversed(from, to) ? CCOIP_PEER_RX_REVERSED : relayed(from, to, relay) ? CCOIP_PEER_RX_RELAYED : 0;
}

/* Whether two unreachable members of the group at places[0..k) are neighbours (the ring closes). */
static bool has_blind_edge(ccoip_mclient_t **ring, const size_t *places, size_t k) {
    for (size_t i = 0; i < k && k > 1; i++)
        if (!ring[places[i]]->reachable && !ring[places[(i + 1) % k]]->reachable) return true;
    return false;
}

/* One group (its members at places[0..k)): reachable ones in their order, each followed by the
 * next unreachable one while any is left; the rest at the end. */
static void place_group(ccoip_mclient_t **ring, const size_t *places, size_t k, ccoip_mclient_t **order) {
    size_t out = 0, u = 0;
    for (size_t i = 0; i < k; i++) {
        if (!ring[places[i]]->reachable) continue;
        order[out++] = ring[places[i]];
        while (u < k && ring[places[u]]->reachable) u++;
        if (u < k) order[out++] = ring[places[u++]];
    }
    for (; u < k; u++)
        if (!ring[places[u]]->reachable) order[out++] = ring[places[u]];
    for (size_t i = 0; i < k; i++) ring[places[i]] = order[i];
}

bool ccoip_mreach_place(ccoip_mclient_t **ring, size_t n) {
    size_t *places = malloc((n + 1) * sizeof *places);
    ccoip_mclient_t **order = malloc((n + 1) * sizeof *order);
    bool moved = false;
    if (places == NULL || order == NULL) n = 0; /* the order as it is still links what it can */
    for (size_t i = 0; i < n; i++) {
        bool first = true; /* i is the first member of its group */
        for (size_t j = 0; j < i && first; j++) first = ring[j]->peer_group != ring[i]->peer_group;
        if (!first) continue;
        size_t k = 0;
        for (size_t j = i; j < n; j++)
            if (ring[j]->peer_group == ring[i]->peer_group) places[k++] = j;
        if (!has_blind_edge(ring, places, k)) continue;
        place_group(ring, places, k, order);
        moved = true;
    }
    free(places);
    free(order);
    return moved;
}

void ccoip_mreach_format(const ccoip_mclient_t *c, char *out, size_t n) {
    ccoip_socket_address_t a = {c->dial_addr, c->dial_p2p};
    ccoip_format_address(&a, out, n);
}
