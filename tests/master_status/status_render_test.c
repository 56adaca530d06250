/* The status page (ccoip_mstatus_render) from a master state built without sockets: peers in
 * every phase, two groups, ring positions, collectives in flight, the totals; and the size
 * contract (a short buffer gets a truncated, terminated page and the size it needs). */
#include <stdio.h>
#include <string.h>

#include "ccoip/master/ccoip_master_state.h"
#include "tests/common/check.h"

static ccoip_master_state_t st;
static ccoip_mclient_t clients[6];

static void fake_send(void *ctx, ccoip_mclient_t *c, const ccoip_packet_t *p) { (void) ctx, (void) c, (void) p; }
static void fake_close(void *ctx, ccoip_mclient_t *c) { (void) ctx, (void) c; }

static bool has(const char *page, const char *line) {
    char want[512];
    snprintf(want, sizeof want, "\n%s\n", line);
    return strstr(page, want) != NULL;
}

int main(void) {
    ccoip_mstate_init(&st, NULL);
    st.send = fake_send;
    st.close = fake_close;
    /* ids 1..6; peers 0, 1, 3 in group 0 (3 connected last but has the smallest id after a
     * renumbering), 2 in group 7, 4 pending, 5 handshaking. */
    for (int i = 0; i < 6; i++) {
        REQUIRE(ccoip_mstate_add(&st, &clients[i], 0));
        memset(clients[i].uuid.b, 0x10 + i, 16);
        snprintf(clients[i].name, sizeof clients[i].name, "10.0.0.%d:5000", i);
        clients[i].phase = i < 4 ? CCOIP_MPHASE_ACCEPTED : i == 4 ? CCOIP_MPHASE_REGISTERED : CCOIP_MPHASE_CONNECTED;
        clients[i].addr.protocol = inetIPv4;
        clients[i].addr.ipv4.data[0] = 10;
        clients[i].addr.ipv4.data[3] = (uint8_t) i;
        clients[i].reachable = i != 1; /* 1: behind NAT: the edge to it is dialled by it */
    }
    clients[2].peer_group = 7;
    clients[3].id = 0; /* first in its group's ring */
    clients[1].pending_vote = true;
    clients[0].colls[0] = (ccoip_mcoll_t){.phase = CCOIP_MCOLL_RUNNING, .desc = {.tag = 5}};
    clients[1].colls[3] = (ccoip_mcoll_t){.phase = CCOIP_MCOLL_COMPLETED, .desc = {.tag = 5}};
    clients[1].colls[4] = (ccoip_mcoll_t){.phase = CCOIP_MCOLL_WAITING, .desc = {.tag = 9}};
    st.round = 4;
    st.counters = (ccoip_mcounters_t){.peers_admitted = 5, .peers_dropped = 1, .collectives_ok = 10,
                                      .collectives_failed = 2, .collectives_timed_out = 1,
                                      .allreduce_bytes = 123456789012ull, .shared_state_syncs = 3,
                                      .shared_state_bytes = 4096};
    static char page[16384];
    size_t n = ccoip_mstatus_render(&st, page, sizeof page);
    REQUIRE(n < sizeof page);
    CHECK_EQ_U64(strlen(page), n);
    const char *want[] = {
        "pccl_master_peers{phase=\"handshaking\"} 1",
        "pccl_master_peers{phase=\"pending\"} 1",
        "pccl_master_peers{phase=\"accepted\"} 4",
        "pccl_master_peer_groups 2",
        "pccl_master_group_peers{group=\"0\"} 3",
        "pccl_master_group_peers{group=\"7\"} 1",
        "pccl_master_collectives_in_flight{group=\"0\"} 2",
        "pccl_master_collectives_in_flight{group=\"7\"} 0",
        "pccl_master_peer_info{uuid=\"10101010101010101010101010101010\",address=\"10.0.0.0:5000\",group=\"0\","
        "ring_position=\"1\",state=\"idle\"} 1",
        "pccl_master_peer_info{uuid=\"11111111111111111111111111111111\",address=\"10.0.0.1:5000\",group=\"0\","
        "ring_position=\"2\",state=\"vote_pending\"} 1",
        "pccl_master_peer_info{uuid=\"12121212121212121212121212121212\",address=\"10.0.0.2:5000\",group=\"7\","
        "ring_position=\"0\",state=\"idle\"} 1",
        "pccl_master_peer_info{uuid=\"13131313131313131313131313131313\",address=\"10.0.0.3:5000\",group=\"0\","
        "ring_position=\"0\",state=\"idle\"} 1",
        "pccl_master_topology_rounds_total 4",
        "pccl_master_peers_admitted_total 5",
        "pccl_master_peers_dropped_total 1",
        "pccl_master_collectives_total{outcome=\"ok\"} 10",
        "pccl_master_collectives_total{outcome=\"failed\"} 2",
        "pccl_master_collectives_total{outcome=\"timeout\"} 1",
        "pccl_master_allreduce_bytes_total 123456789012",
        "pccl_master_shared_state_syncs_total 3",
        "pccl_master_shared_state_bytes_total 4096",
        /* Group 0's ring in id order: 10.0.0.3, 10.0.0.0, 10.0.0.1 (1 unreachable). */
        "pccl_master_ring_edge{from=\"10.0.0.3:5000\",to=\"10.0.0.0:5000\",via=\"direct\"} 1",
        "pccl_master_ring_edge{from=\"10.0.0.0:5000\",to=\"10.0.0.1:5000\",via=\"reversed\"} 1",
        "pccl_master_ring_edge{from=\"10.0.0.1:5000\",to=\"10.0.0.3:5000\",via=\"direct\"} 1",
        "# TYPE pccl_master_allreduce_bytes_total counter",
        "# TYPE pccl_master_peers gauge",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!has(page, want[i])) fprintf(stderr, "missing: %s\n", want[i]);
        CHECK(has(page, want[i]));
    }
    CHECK(strstr(page, "10.0.0.4") == NULL && strstr(page, "10.0.0.5") == NULL); /* not accepted */
    CHECK(page[n - 1] == '\n');

    /* A short buffer: truncated and terminated, and the size that is needed. */
    char small[64];
    CHECK_EQ_U64(ccoip_mstatus_render(&st, small, sizeof small), n);
    CHECK_EQ_U64(strlen(small), sizeof small - 1);
    CHECK(memcmp(small, page, sizeof small - 1) == 0);
    CHECK_EQ_U64(ccoip_mstatus_render(&st, NULL, 0), n);

    st.shutting_down = true;
    while (st.nclients > 0) ccoip_mstate_drop(&st, st.clients[st.nclients - 1], "test over");
    ccoip_mstate_free(&st);
    return check_exit();
}
