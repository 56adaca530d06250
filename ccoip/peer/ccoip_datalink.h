/* ccoip_datalink.h: the data transport of one p2p connection, as a reduce link (reduce/reduce.h).
 *
 * A data link owns a send thread and a receive thread over one connected stream socket (the
 * socket itself stays owned by whoever made it). Frames are `u64 tag | u64 offset | u32 length |
 * bytes`, big-endian header. Sends go straight from the poster's buffer (zero-copy, one sendmsg
 * per frame); a received frame is matched to the oldest receive posted for its tag, its offset
 * and length are checked against that receive before a byte of payload is read, and the payload
 * lands straight in the receive's buffer. Idle threads park on threadpark words.
 *
 * Posted requests live in fixed tables (CCOIP_DATALINK_QUEUE per direction): no allocation after
 * ccoip_datalink_start. Any socket error, a malformed frame or ccoip_datalink_stop breaks the
 * link: every pending request fails and later posts are refused.
 *
 * Same host (Linux): unless PCCL_SHM=0, each side offers the other a shared-memory pipe for its
 * send direction with its first frame to send (control frames over the socket,
 * docs/allreduce.md); an accepted
 * direction carries its frames through the pipe (two memcpys per byte, no system call in steady
 * state) and the socket stays open as the liveness channel. Sealed links stay on TCP. A link
 * whose receive direction runs through the pipe offers post_recv_combine (reduce.h): the
 * receive thread combines a reduce-scatter frame straight out of the ring (PCCL_SHM_COMBINE=0:
 * not offered, the ring stages and combines as over TCP). */
#ifndef CCOIP_DATALINK_H
#define CCOIP_DATALINK_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip/wire/ccoip_auth.h"
#include "profiler/pprof.h"
#include "reduce/reduce.h"

#define CCOIP_DATALINK_QUEUE 1024u               /* pending sends, and pending receives */
#define CCOIP_DATALINK_MAX_FRAME (64u << 20)     /* largest payload accepted from the wire */
#define CCOIP_DATALINK_HEADER 20u                /* u64 tag | u64 offset | u32 length */

typedef struct ccoip_datalink ccoip_datalink_t;

/* Starts both threads over fd (a connected, blocking stream socket). `name` appears in log
 * lines (e.g. "tx to 3f2a..."). With sess (not NULL, encrypt set) every frame is sealed: the
 * header travels in clear and authenticated, the payload as records of CCOIP_DATALINK_RECORD
 * bytes, each AEAD-sealed with its own 16-byte tag under the direction's key and a counter nonce;
 * a record that fails to open breaks the link like an I/O error, and sends by reference are off
 * (the ciphertext is a copy). A sealed link offers post_recv_combine (unless PCCL_SHM_COMBINE=0):
 * each record is opened in a cached buffer and combined from there, never stored. sess->cipher
 * names the AEAD (ccoip_auth.h); none this build runs: NULL, logged. Returns NULL when memory
 * or threads are short. */
#define CCOIP_DATALINK_RECORD (64u << 10)
ccoip_datalink_t *ccoip_datalink_start(int fd, const char *name, const ccoip_session_t *sess);

/* Breaks the link (shutdown of the socket), fails what is pending, joins both threads, frees.
 * The caller closes the socket afterwards. */
void ccoip_datalink_stop(ccoip_datalink_t *dl);

/* Breaks the link now (shutdown of the socket, pending requests fail) without joining or
 * freeing: safe while other threads still post to it. ccoip_datalink_stop still follows. */
void ccoip_datalink_break(ccoip_datalink_t *dl, const char *why);

/* True when both ends are on this host (the peer's address is a loopback one or ours). Such
 * links use cubic congestion control (or reno): a paced default like BBR burns CPU on timers
 * where the "link" is memory. */
bool ccoip_datalink_same_host(const ccoip_datalink_t *dl);

/* Transfer events: every frame sent or received becomes a pcclProfilerEventTransfer of `prof`
 * (when its mask asks for them) with reduce_req_t.trace as parent, on the link's own thread. The
 * communicator outlives its links; call before the first post. */
void ccoip_datalink_profile(ccoip_datalink_t *dl, const pprof_t *prof, uint32_t stream, uint32_t peer_rank);

/* True once the link is broken (peer gone, bad frame, stopped). */
bool ccoip_datalink_broken(const ccoip_datalink_t *dl);

/* Bytes we sent that have not reached the peer yet: unacknowledged on the socket, or unread in
 * our shared-memory pipe. 0 means everything sent so far is the peer's to read. */
uint64_t ccoip_datalink_unacked(ccoip_datalink_t *dl);

/* Which directions run over shared memory (*tx: our sends, *rx: our receives). Returns false
 * while our offer is due or unanswered (the answer may still move *tx). */
bool ccoip_datalink_shm(const ccoip_datalink_t *dl, bool *tx, bool *rx);

/* The link for reduce_ring_params_t.next / .prev, for an op that starts now: with
 * post_recv_combine once the receive direction runs through the pipe (fetch it per op). */
reduce_link_t ccoip_datalink_link(ccoip_datalink_t *dl);

#endif /* CCOIP_DATALINK_H */
