/* host_peers_test: the master's P2P_INFO lists, after a peer's ring neighbours, every other
 * participant at that peer's address, flagged CCOIP_PEER_SAME_HOST: the peers that share its host and cores,
 * which its rule on sends by reference counts (ccoip_splice.h). In memory (the master's state
 * machine, no sockets): 5 peers in two groups, 3 at one address and 2 at another; each peer gets
 * exactly the others at its address, whatever their group, and its neighbours as before. */
#include <stdlib.h>
#include <string.h>

#include "ccoip/master/ccoip_master_state.h"
#include "tests/common/check.h"

#define N 5
#define MAXP 16

static ccoip_master_state_t st;
static ccoip_mclient_t clients[N];
static ccoip_packet_t sent[N][MAXP];
static int nsent[N];

static void fake_send(void *ctx, ccoip_mclient_t *c, const ccoip_packet_t *p) {
    (void) ctx;
    ccoip_writer_t w;
    ccoip_writer_init(&w, CCOIP_MAX_PAYLOAD + CCOIP_HEADER_SIZE);
    REQUIRE(ccoip_packet_encode(p, &w) == CCOIP_OK);
    int i = (int) (c - clients);
    REQUIRE(nsent[i] < MAXP);
    REQUIRE(ccoip_packet_decode(p->type, w.buf + CCOIP_HEADER_SIZE, w.len - CCOIP_HEADER_SIZE, &sent[i][nsent[i]++]) ==
            CCOIP_OK);
    ccoip_writer_free(&w);
}

static void fake_close(void *ctx, ccoip_mclient_t *c) { (void) ctx, (void) c; }

static const ccoip_packet_t *p2p_info(int i) {
    for (int k = nsent[i] - 1; k >= 0; k--)
        if (sent[i][k].type == CCOIP_PKT_M2C_P2P_INFO) return &sent[i][k];
    return NULL;
}

int main(void) {
    static const uint8_t host_of[N] = {1, 2, 1, 1, 2}; /* 10.0.0.host */
    static const uint32_t group_of[N] = {0, 0, 0, 1, 1};
    ccoip_mstate_init(&st, NULL);
    st.send = fake_send;
    st.close = fake_close;
    for (int i = 0; i < N; i++) {
        REQUIRE(ccoip_mstate_add(&st, &clients[i], 0));
        clients[i].phase = CCOIP_MPHASE_ACCEPTED;
        clients[i].p2p_port = (uint16_t) (40000 + i);
        clients[i].peer_group = group_of[i];
        clients[i].addr.protocol = inetIPv4;
        clients[i].addr.ipv4 = (ccoip_ipv4_address_t){{10, 0, 0, host_of[i]}};
        clients[i].dial_addr = clients[i].addr;
        clients[i].dial_p2p = clients[i].p2p_port;
        clients[i].reachable = true;
        memset(clients[i].uuid.b, i + 1, 16);
        snprintf(clients[i].name, sizeof clients[i].name, "peer%d", i);
    }
    for (int i = 0; i < N; i++) {
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_C2M_VOTE_ACCEPT;
        ccoip_mstate_on_packet(&st, &clients[i], &p, 1);
    }
    for (int i = 0; i < N; i++) {
        const ccoip_packet_t *p = p2p_info(i);
        REQUIRE(p != NULL);
        uint32_t neighbours = 0, unflagged = 0, same = 0, wrong = 0;
        for (uint32_t k = 0; k < p->u.p2p_info.count; k++) {
            const ccoip_peer_entry_t *e = &p->u.p2p_info.peers[k];
            if (e->flags != CCOIP_PEER_SAME_HOST) {
                CHECK((e->flags & CCOIP_PEER_SAME_HOST) == 0);
                neighbours++;
                continue;
            }
            unflagged++;
            int j = e->uuid.b[0] - 1; /* the uuid's bytes are j + 1 */
            if (j >= 0 && j < N && j != i && host_of[j] == host_of[i] && e->addr.ipv4.data[3] == host_of[i] &&
                e->p2p_port == 40000 + j)
                same++;
            else
                wrong++;
        }
        uint32_t at_my_host = 0, in_my_group = 0;
        for (int j = 0; j < N; j++) {
            at_my_host += j != i && host_of[j] == host_of[i];
            in_my_group += group_of[j] == group_of[i];
        }
        CHECK_EQ_U64(unflagged, at_my_host); /* 2 for the three at .1, 1 for the two at .2 */
        CHECK_EQ_U64(same, at_my_host);
        CHECK_EQ_U64(wrong, 0);
        /* The neighbours are unchanged: two in a group of 3, one (both ways) in a group of 2. */
        CHECK_EQ_U64(neighbours, in_my_group == 2 ? 1 : 2);
    }
    for (int i = 0; i < N; i++)
        for (int k = 0; k < nsent[i]; k++) ccoip_packet_free(&sent[i][k]);
    st.shutting_down = true;
    while (st.nclients > 0) ccoip_mstate_drop(&st, st.clients[st.nclients - 1], "test over");
    ccoip_mstate_free(&st);
    return check_exit();
}
