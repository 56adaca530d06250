/* reach_test: who dials each ring edge, and where unreachable peers go in the ring
 * (ccoip_master_reach.h; docs/nat.md). No sockets. */
#include <stdio.h>
#include <string.h>

#include "ccoip/master/ccoip_master_reach.h"
#include "tests/common/check.h"

#define MAX 8

static ccoip_mclient_t clients[MAX];
static ccoip_mclient_t *ring[MAX];

/* ring from a pattern: 'R' reachable, 'U' unreachable, lower case: group 1. */
static size_t make(const char *pattern) {
    size_t n = strlen(pattern);
    for (size_t i = 0; i < n; i++) {
        memset(&clients[i], 0, sizeof clients[i]);
        clients[i].reachable = pattern[i] == 'R' || pattern[i] == 'r';
        clients[i].peer_group = pattern[i] >= 'a';
        clients[i].id = i;
        /* Each at its own address; 'S'/'s': unreachable, all of them behind one address (a site). */
        bool site = pattern[i] == 'S' || pattern[i] == 's';
        clients[i].reachable = clients[i].reachable && !site;
        clients[i].addr = (ccoip_inet_address_t){.protocol = inetIPv4, .ipv4 = {{10, 0, 0, site ? 99 : (uint8_t) (i + 1)}}};
        ring[i] = &clients[i];
    }
    return n;
}

/* The ring as a pattern again, with each client's original index. */
static void show(size_t n, char *out, char *ids) {
    for (size_t i = 0; i < n; i++) {
        char c = ring[i]->reachable ? 'R' : ring[i]->addr.ipv4.data[3] == 99 ? 'S' : 'U';
        out[i] = ring[i]->peer_group ? (char) (c - 'A' + 'a') : c;
        ids[i] = (char) ('0' + ring[i]->id);
    }
    out[n] = ids[n] = '\0';
}

static void check_place(const char *in, bool moved, const char *want, const char *want_ids) {
    size_t n = make(in);
    char out[MAX + 1], ids[MAX + 1];
    CHECK(ccoip_mreach_place(ring, n) == moved);
    show(n, out, ids);
    if (strcmp(out, want) != 0 || strcmp(ids, want_ids) != 0)
        fprintf(stderr, "reach_test: %s -> %s (%s), want %s (%s)\n", in, out, ids, want, want_ids);
    CHECK(strcmp(out, want) == 0 && strcmp(ids, want_ids) == 0);
}

int main(void) {
    /* Nothing to move: no two unreachable neighbours (the ring closes: last -> first). */
    check_place("RURU", false, "RURU", "0123");
    check_place("RRU", false, "RRU", "012");
    check_place("U", false, "U", "0");
    check_place("", false, "", "");
    /* Two unreachable neighbours with enough reachable peers: each goes behind a reachable one,
     * in their order. */
    check_place("RRUU", true, "RURU", "0213");
    check_place("URRU", true, "RURU", "1023");
    check_place("UURRR", true, "RURUR", "20314");
    /* Not enough reachable peers: as few blind edges as there must be, the rest at the end. */
    check_place("UUUR", true, "RUUU", "3012");
    check_place("UU", true, "UU", "01");
    /* Groups are placed each on its own, in their places of the ring. */
    check_place("RuRrUu", true, "RrRuUu", "032145"); /* group 1: two u, one r */
    check_place("RUru", false, "RUru", "0123");
    /* Peers behind one NAT router dial each other at their own addresses: they stay side by
     * side, as one site after a reachable peer. */
    check_place("RSSSS", false, "RSSSS", "01234");
    check_place("SRSUS", true, "RSSSU", "10243");
    check_place("SSUUR", true, "RSSUU", "40123"); /* not enough reachable peers for both sites */

    /* Edge flags: reversed only when the receiving end alone is unreachable. */
    for (int relay = 0; relay <= 1; relay++) {
        make("RU");
        CHECK_EQ_U64(ccoip_mreach_tx_flags(ring[0], ring[1], relay), CCOIP_PEER_TX_REVERSED);
        CHECK_EQ_U64(ccoip_mreach_rx_flags(ring[0], ring[1], relay), CCOIP_PEER_RX_REVERSED);
        CHECK_EQ_U64(ccoip_mreach_tx_flags(ring[1], ring[0], relay), 0);
        CHECK_EQ_U64(ccoip_mreach_rx_flags(ring[1], ring[0], relay), 0);
        make("RR");
        CHECK_EQ_U64(ccoip_mreach_tx_flags(ring[0], ring[1], relay), 0);
    }
    make("SS"); /* one site: dialled directly at their own addresses */
    CHECK_EQ_U64(ccoip_mreach_tx_flags(ring[0], ring[1], true), 0);
    CHECK(ccoip_mreach_same_site(ring[0], ring[1]));
    ring[1]->lan_addr = (ccoip_inet_address_t){.protocol = inetIPv4, .ipv4 = {{192, 168, 1, 7}}};
    ring[1]->p2p_port = 48150;
    ring[1]->dial_p2p = 1; /* where others would dial it: not used by its site */
    ccoip_inet_address_t at;
    uint16_t p2p, ss, bench;
    ccoip_mreach_dial_for(ring[0], ring[1], &at, &p2p, &ss, &bench);
    CHECK(at.ipv4.data[0] == 192 && at.ipv4.data[3] == 7 && p2p == 48150);
    /* One site, two hosts: their own addresses differ (ring[1] named 192.168.1.7, ring[0] none:
     * unknown counts as one host, as before protocol 11). */
    CHECK(ccoip_mreach_same_host(ring[0], ring[1]));
    ring[0]->lan_addr = (ccoip_inet_address_t){.protocol = inetIPv4, .ipv4 = {{192, 168, 1, 8}}};
    CHECK(!ccoip_mreach_same_host(ring[0], ring[1]));
    ring[0]->lan_addr = ring[1]->lan_addr;
    CHECK(ccoip_mreach_same_host(ring[0], ring[1]));
    ring[0]->advertised = true; /* an advertised address wins */
    CHECK(!ccoip_mreach_same_site(ring[0], ring[1]));
    CHECK_EQ_U64(ccoip_mreach_tx_flags(ring[0], ring[1], true), CCOIP_PEER_TX_RELAYED);
    make("UU"); /* nobody can dial it: through the relay, or dialled as before without one */
    CHECK_EQ_U64(ccoip_mreach_tx_flags(ring[0], ring[1], false), 0);
    CHECK_EQ_U64(ccoip_mreach_tx_flags(ring[0], ring[1], true), CCOIP_PEER_TX_RELAYED);
    CHECK_EQ_U64(ccoip_mreach_rx_flags(ring[0], ring[1], true), CCOIP_PEER_RX_RELAYED);
    /* Punched where the master saw the sender's TX and the receiver's RX punch ports, relay or
     * not; after a failed punch, relayed (a run without a relay never marks a punch failed). */
    ring[0]->punch_tx_port = 40001;
    CHECK_EQ_U64(ccoip_mreach_tx_flags(ring[0], ring[1], true), CCOIP_PEER_TX_RELAYED); /* no RX port of 1 */
    ring[1]->punch_rx_port = 40002;
    CHECK(ccoip_mreach_punched(ring[0], ring[1]) && !ccoip_mreach_punched(ring[1], ring[0]));
    for (int relay = 0; relay <= 1; relay++) {
        CHECK_EQ_U64(ccoip_mreach_tx_flags(ring[0], ring[1], relay), CCOIP_PEER_TX_PUNCHED);
        CHECK_EQ_U64(ccoip_mreach_rx_flags(ring[0], ring[1], relay), CCOIP_PEER_RX_PUNCHED);
        CHECK(strcmp(ccoip_mreach_edge_kind(ring[0], ring[1], relay), "punched") == 0);
    }
    ring[0]->loopback = true; /* never on loopback: no NAT, and the two dials cannot meet */
    CHECK_EQ_U64(ccoip_mreach_tx_flags(ring[0], ring[1], true), CCOIP_PEER_TX_RELAYED);
    ring[0]->loopback = false;
    ring[1]->punch_failed = true;
    CHECK_EQ_U64(ccoip_mreach_tx_flags(ring[0], ring[1], true), CCOIP_PEER_TX_RELAYED);
    CHECK(strcmp(ccoip_mreach_edge_kind(ring[0], ring[1], true), "relayed") == 0);
    make("RU");
    CHECK(strcmp(ccoip_mreach_edge_kind(ring[0], ring[1], true), "reversed") == 0);
    CHECK(strcmp(ccoip_mreach_edge_kind(ring[1], ring[0], true), "direct") == 0);
    make("SS"); /* one site never punches: its peers dial each other */
    ring[0]->punch_tx_port = ring[1]->punch_rx_port = 40003;
    CHECK_EQ_U64(ccoip_mreach_tx_flags(ring[0], ring[1], true), 0);

    /* Where the others dial: the advertised address and port, the other listeners shifted alike. */
    ccoip_mclient_t c;
    memset(&c, 0, sizeof c);
    c.addr = (ccoip_inet_address_t){.protocol = inetIPv4, .ipv4 = {{198, 51, 100, 7}}};
    ccoip_join_t j = {0, 48149, 48150, 48151, 0, {0}, 0, {0}};
    ccoip_mreach_take_join(&c, &j);
    CHECK(c.dial_addr.ipv4.data[3] == 7 && c.dial_p2p == 48149 && c.dial_ss == 48150 && c.dial_bench == 48151);
    j.advertised = 1;
    j.adv_addr = (ccoip_inet_address_t){.protocol = inetIPv4, .ipv4 = {{203, 0, 113, 5}}};
    j.adv_port = 40000;
    ccoip_mreach_take_join(&c, &j);
    CHECK(c.dial_addr.ipv4.data[0] == 203 && c.dial_p2p == 40000 && c.dial_ss == 40001 && c.dial_bench == 40002);
    char where[80];
    ccoip_mreach_format(&c, where, sizeof where);
    CHECK(strcmp(where, "203.0.113.5:40000") == 0);
    j.adv_port = 0; /* an address alone keeps the ports */
    j.bench_port = 0;
    ccoip_mreach_take_join(&c, &j);
    CHECK(c.dial_p2p == 48149 && c.dial_ss == 48150 && c.dial_bench == 0);
    return check_exit();
}
