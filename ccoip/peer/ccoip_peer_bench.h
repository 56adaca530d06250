/* ccoip_peer_bench.h: the peer's bandwidth measurements for pcclOptimizeTopology
 * (ccoip_peer_bench.c): a benchmark listener that sinks byte streams from the peers the master
 * announced, and the sending side that measures one directed pair.
 *
 * Stream on a benchmark connection: HELLO (role BENCHMARK, the sender's UUID) -> HELLO_ACK, then
 * raw bytes for the requested time, then the sender shuts down its write side; the receiver
 * answers BENCH_DONE (bytes it counted, microseconds from its first read to EOF) and closes.
 * The rate is measured on the receiver's clock: what arrived, not what the sender's socket
 * buffer swallowed. */
#ifndef CCOIP_PEER_BENCH_H
#define CCOIP_PEER_BENCH_H

#include <stdint.h>

#include "ccoip/wire/ccoip_packets.h"
#include "pccl.h"

typedef struct ccoip_peer_bench_t ccoip_peer_bench_t;

/* The listener: started by pcclConnect (its port goes to the master in C2M_JOIN), stopped by
 * pcclDestroyCommunicator (safe when never started). */
pcclResult_t ccoip_bench_start(pcclComm_t *comm);
void ccoip_bench_stop(pcclComm_t *comm);
uint16_t ccoip_bench_port(const pcclComm_t *comm);

/* One step of a session (q NULL: the session is over): replaces the set of UUIDs that may
 * connect with q's senders (connections in progress finish), takes q's REVERSED targets' dials
 * back, and dials the step's sender that cannot dial us (REVERSED: its listener; RELAYED: the
 * relay), on a thread joined at the next call. */
void ccoip_bench_allow(pcclComm_t *comm, const ccoip_bench_request_t *q);

/* Streams to `t` for duration_ms and returns the rate in bits/s, or 0 when it failed (logged):
 * dialling it, taking its dial back (REVERSED) or through `relay` (RELAYED). Bounded: connecting
 * retries for at most 3 s while the target has not heard of us yet, and the answer must come
 * within duration_ms + 10 s. */
uint64_t ccoip_bench_measure(pcclComm_t *comm, const ccoip_bench_target_t *t, uint32_t duration_ms,
                             const ccoip_socket_address_t *relay);

/* Measurements this communicator has made (attempted), for tests and logs. */
uint64_t ccoip_bench_count(const pcclComm_t *comm);

#endif /* CCOIP_PEER_BENCH_H */
