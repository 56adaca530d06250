/* ccoip_punch.c: the peer's two punch ports (ccoip_punch.h). */
#include "ccoip/peer/ccoip_punch.h"

#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_conn.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "log/log.h"

#define MOD "ccoip-punch"
#define MAP_MS 3000 /* one map connection, start to the master's close */

void ccoip_punch_init(ccoip_punch_t *p) {
    p->fd[0] = p->fd[1] = -1;
    p->port[0] = p->port[1] = 0;
}

void ccoip_punch_close(ccoip_punch_t *p) {
    for (int i = 0; i < 2; i++)
        if (p->fd[i] >= 0) ccoip_sock_close(p->fd[i]);
    ccoip_punch_init(p);
}

static bool hold_ports(ccoip_punch_t *p, ccoip_inet_protocol_t family) {
    if (p->fd[0] >= 0 && p->fd[1] >= 0) return true; /* a REJOIN maps the ports we hold */
    for (int i = 0; i < 2; i++) p->fd[i] = ccoip_sock_hold_port(family, &p->port[i]);
    if (p->fd[0] >= 0 && p->fd[1] >= 0) return true;
    ccoip_punch_close(p);
    return false;
}

/* One port's map connection: HELLO, PUNCH_MAP, then the master's close (it has taken the port). */
static bool map_one(pcclComm_t *comm, int which) {
    ccoip_status_t st;
    int fd = ccoip_punch_dial(&comm->punch, which, &comm->params.master_address, MAP_MS, &st);
    if (fd < 0) return false;
    int64_t deadline = ccoip_now_ms() + MAP_MS;
    ccoip_hello_ack_t ack;
    ccoip_session_t sess = ccoip_comm_session(comm);
    st = ccoip_conn_hello(fd, CCOIP_ROLE_PEER_TO_MASTER, NULL, ccoip_comm_key(comm), &sess, deadline, "the master", &ack);
    ccoip_chan_t chan; /* sealed on an encrypted run, as every connection to the master */
    if (st == CCOIP_OK && !ccoip_chan_init(&chan, &sess)) st = CCOIP_ERR_NOMEM;
    if (st == CCOIP_OK) {
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_C2M_PUNCH_MAP;
        p.u.punch_map.owner = comm->uuid;
        p.u.punch_map.which = (uint8_t) which;
        st = ccoip_chan_send(&chan, fd, &p, NULL);
        ccoip_packet_t r;
        if (st == CCOIP_OK) st = ccoip_chan_recv(&chan, fd, &r, CCOIP_MAX_HANDSHAKE_PAYLOAD, deadline);
        if (st == CCOIP_OK) ccoip_packet_free(&r); /* nothing is sent on it: a wrong master */
        ccoip_chan_free(&chan);
    }
    ccoip_sock_close(fd);
    return st == CCOIP_ERR_CLOSED;
}

void ccoip_punch_map(pcclComm_t *comm) {
    const char *off = getenv("PCCL_PUNCH");
    if (off != NULL && strcmp(off, "0") == 0) return;
    /* A master on loopback: no NAT between us, and the master never punches there. */
    if (ccoip_address_is_loopback(&comm->params.master_address.inet)) return;
    if (!hold_ports(&comm->punch, comm->params.master_address.inet.protocol)) {
        LOG_DEBUG(MOD, "no punch ports on this platform: edges with other unreachable peers need the relay");
        return;
    }
    bool tx = map_one(comm, CCOIP_PUNCH_TX), rx = tx && map_one(comm, CCOIP_PUNCH_RX);
    if (!rx) LOG_INFO(MOD, "could not show the master our punch ports: edges with other unreachable peers need the relay");
    else LOG_DEBUG(MOD, "punch ports %u (TX) and %u (RX) shown to the master", comm->punch.port[0], comm->punch.port[1]);
}

int ccoip_punch_dial(const ccoip_punch_t *p, int which, const ccoip_socket_address_t *to, int timeout_ms,
                     ccoip_status_t *st) {
    if (p->fd[which] < 0) {
        *st = CCOIP_ERR_INVALID;
        return -1;
    }
    return ccoip_sock_connect_from(to, p->port[which], timeout_ms, st);
}
