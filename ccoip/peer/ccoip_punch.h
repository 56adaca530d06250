/* ccoip_punch.h: the peer's two punch ports (hole punching, docs/nat.md).
 *
 * An edge between two peers that nobody can dial (each behind its own NAT router or firewall) is
 * punched: both ends dial each other at the same moment, the sender from its TX punch port to the
 * receiver's RX punch port, and the two dials become one connection (TCP simultaneous open): each
 * router lets the other's SYN in because its own went out to that address and port first. Two
 * ports, so that the two edges of a pair of peers (a ring of two) are two connections.
 *
 * The master learns where each port leaves the peer's NAT from a connection from that port
 * (C2M_PUNCH_MAP, before JOIN), as routers that keep a port's mapping for every destination use
 * it for the dials too (MASQUERADE keeps the port where it can; `--random-fully` does not, and
 * such a peer's punches fail: the master then relays its edges). Linux and macOS; Windows has no
 * SO_REUSEPORT, so a Windows peer is never punched. */
#ifndef CCOIP_PUNCH_H
#define CCOIP_PUNCH_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip/net/ccoip_socket.h"

typedef struct ccoip_punch_t {
    int fd[2];        /* sockets holding the ports, by CCOIP_PUNCH_TX / CCOIP_PUNCH_RX; -1: none */
    uint16_t port[2]; /* our local ports */
} ccoip_punch_t;

struct pcclComm_t;

/* No ports (before ccoip_punch_open). */
void ccoip_punch_init(ccoip_punch_t *p);

/* Holds two free ports (unless PCCL_PUNCH=0, the master is on loopback or the platform cannot
 * share ports) and tells the master where they leave our NAT: one short connection from each,
 * before JOIN or REJOIN.
 * Without ports or maps the master relays (or cannot link) our edges with other unreachable
 * peers; nothing else changes, so failures here are logged, never returned. */
void ccoip_punch_map(struct pcclComm_t *comm);

/* Dials `to` from our punch port `which` (CCOIP_PUNCH_TX / RX): ccoip_sock_connect_from. */
int ccoip_punch_dial(const ccoip_punch_t *p, int which, const ccoip_socket_address_t *to, int timeout_ms,
                     ccoip_status_t *st);

/* Releases the ports. */
void ccoip_punch_close(ccoip_punch_t *p);

#endif /* CCOIP_PUNCH_H */
