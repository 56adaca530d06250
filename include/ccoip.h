/* ccoip.h: the protocol's default ports, under the name PCCL's programs include for them.
 * Public, C99 and C++; nothing else of the protocol is public (pccl.h is the API). */
#ifndef CCOIP_H
#define CCOIP_H

/* The port pccl-master listens on unless told otherwise (--listen). */
#define CCOIP_PROTOCOL_PORT_MASTER 48148

/* PCCL's numbers for a peer's three listeners. Ours take the first free ports from 48149 up in
 * another order (p2p, shared state, benchmark: 48149-48151 for the first peer of a host), so
 * use these three as the range to forward, not as one role's port each. */
#define CCOIP_PROTOCOL_PORT_SHARED_STATE 48149
#define CCOIP_PROTOCOL_PORT_P2P 48150
#define CCOIP_PROTOCOL_PORT_BANDWIDTH_BENCHMARK 48151

#endif /* CCOIP_H */
