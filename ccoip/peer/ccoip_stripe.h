/* ccoip_stripe.h: one all-reduce spread over several pool streams of the same neighbour.
 *
 * A striped link is a reduce link (reduce/reduce.h) over `n` data links to one neighbour: a frame
 * goes out, and its receive is posted, on link j mod n, where j = reduce_req_t.stream is the
 * frame's sub-chunk index within its chunk (the same at both ends). The ring posts its sends to
 * rank + 1 in exactly the order rank + 1 posts the matching receives (the contract that lets one
 * data link match frames in posting order), so both ends of every stream see the same
 * subsequence of frames, and each data link keeps matching them in order. Dealing by j rather
 * than by posting count makes every stream's frames depend only on earlier frames of the same
 * stream, for any shape, which is what lets the ring run one lane per stream
 * (ccoip_stripe_lanes). A large op that runs alone takes every stream it may, so a
 * per-flow limit on the path caps each stream, not the op; ops that run beside others take
 * fewer each and run at once on different groups (ccoip_stripe_width).
 *
 * Whether an op is striped, and over how many streams, is a function of its shape, the stream
 * count of the link and its COMMENCE only (ccoip_stripe_width), and which streams of the
 * COMMENCEs so far (ccoip_stripe_take), so the two ends of each link always agree. */
#ifndef CCOIP_STRIPE_H
#define CCOIP_STRIPE_H

#include <stddef.h>
#include <stdint.h>

#include "ccoip/peer/ccoip_p2p.h"
#include "reduce/reduce.h"

/* An op is striped when each stream gets at least this many bytes of every chunk (bytes /
 * world): below it the per-op latency dominates, and the op is better left on one stream so
 * that other ops run beside it on the others. */
#define CCOIP_STRIPE_MIN_PER_STREAM (512u * 1024u)

/* A striped op takes streams / 2^i of them, the most that give each lane at least this much of
 * every chunk (4 sub-chunks of 256 KiB); consecutive ops take consecutive groups and run at
 * once. On a lossy long path an op ends with its slowest lane, and BBR flows hold unequal
 * shares for seconds, so 8 lanes of 2 sub-chunks waited on their slowest flow (pool 8, 16 MiB
 * ops: 0.84 x pool 1); two ops of 4 lanes at once overlap each other's fill and tail (1.19 x).
 * docs/performance.md, "Lane groups (session 9)". */
#define CCOIP_STRIPE_MIN_PER_LANE (1024u * 1024u)

/* ... and at most this many lanes when it runs alone (0: no cap, the default since session 11).
 * Session 10 capped it at 4: with 32 MiB ops in flight together on 4 peers, 8 lanes per op read
 * 0.85 x pool 1 and two ops of 4 lanes 1.04; ops beside others now take CCOIP_STRIPE_SHARED_LANES
 * instead. Alone, 8 lanes cost nothing on the lossy path (quiet 16-core host, 4 hosts, 500
 * Mbit/s, 25 ms, 0.1 % loss, one 64 MiB op at a time: 48.0 MB/s against 47.0 over 4) and carry
 * 0.94-0.96 x min(8 x cap, link) where each flow is capped (4 lanes: 0.80). docs/performance.md,
 * "Many tensors: streams by load (session 11)". */
#define CCOIP_STRIPE_MAX_LANES 0u

/* ... and when other collectives of the group run beside it (COMMENCE's `running` > 1), at most
 * this many and half the pool: several ops at once on few streams each carried more than one op
 * over all of them (quiet 16-core host, 4 hosts, 500 Mbit/s, 25 ms, 0.1 % loss, BBR, 16 MiB ops,
 * 4 rounds, / pool 1: pool 2 one stream per op 1.23 against 1.00 over both; pool 4 two streams
 * per op 1.18-1.23 against 1.03-1.05 over four, one stream 1.19; pool 8 two streams 1.19 against
 * 1.07 over four). An op that runs alone still takes every stream it may (CCOIP_STRIPE_MAX_LANES),
 * so that a path that caps each flow still gives it every flow's share. */
#define CCOIP_STRIPE_SHARED_LANES 2u

/* p2p_connection_pool_size 0 means this many streams per neighbour. Measured (docs/performance.md,
 * "WAN: concurrent streams"): with 100 Mbit/s per flow on a 500 Mbit/s link, pool 4 carried 3.8 x
 * pool 1 (0.92 of 4 flows' cap); with the link as the only limit 0.98-1.0 x pool 1; cubic under
 * random loss per packet (25 ms / 0.1 %, 50 ms / 1 %) 3.3-3.8 x pool 1; BBR under 0.1 % loss
 * 0.93-1.03 x pool 1. Pool 8 carried 5 x pool 1 under cubic loss but fell to 0.74-0.82 x pool 1
 * with BBR on 4 hosts of the 2-core machine (CPU), so 4. Session 7, BBR under 0.1 % loss per packet,
 * 8 rounds: 0.96-1.07 x pool 1 at load <= 2.5, lower only when the machine was loaded (pool 4 costs
 * 1.5 x the CPU per op); its topology round now costs what pool 1's does (concurrent connects).
 * Session 8, with one ring lane per stream (ccoip_stripe_lanes), on the quiet 16-core host: pool 4
 * 0.965-1.196 x pool 1 over 14 rounds (one lane: 0.87-0.99), pool 2 0.97-1.19, pool 8 0.74-1.15. */
#define CCOIP_DEFAULT_POOL 4u

typedef struct ccoip_stripe_t {
    reduce_link_t links[CCOIP_P2P_MAX_STREAMS];
    uint32_t n;
} ccoip_stripe_t;

/* How many streams an op of `bytes` (count x element size) on `world` peers uses on a link of
 * `streams` streams when `running` collectives of its group run (COMMENCE, this one included):
 * 1 when a stream would get less than CCOIP_STRIPE_MIN_PER_STREAM of each chunk, else a group of
 * streams / 2^i (CCOIP_STRIPE_MIN_PER_LANE, CCOIP_STRIPE_MAX_LANES, CCOIP_STRIPE_SHARED_LANES;
 * PCCL_STRIPE_LANE_MIN_KIB, PCCL_STRIPE_MAX_LANES and PCCL_STRIPE_SHARED_LANES, the same on every
 * peer, override them). The op takes the group of that width handed the least work so far
 * (ccoip_coll.c, assign_streams). The same on every peer for the same op and link. */
uint32_t ccoip_stripe_width(uint64_t bytes, uint32_t world, uint32_t streams, uint32_t running);

/* Work a stream is charged for one op beyond its share of the bytes: the op's start and end
 * (fill, drain, hand-off), so that a run of tiny ops spreads over the streams too. */
#define CCOIP_STRIPE_OP_LOAD (1024u * 1024u)

/* Which `width` streams of a link's `streams` an op of `bytes` takes: the aligned group (first
 * a multiple of width) whose busiest stream has been charged the least, the lowest on a tie;
 * charges each of them bytes / width + CCOIP_STRIPE_OP_LOAD in load[0 .. streams-1] (zero at
 * each topology round) and returns the first. A stream runs its ops one after another, so that
 * group is the one that comes free first when the streams move alike; equal ops take the groups
 * in turn. Both ends of a link charge the same ops in the same (COMMENCE) order, so they agree. */
uint32_t ccoip_stripe_take(uint64_t *load, uint32_t streams, uint32_t width, uint64_t bytes);

/* Initialises s over links[0 .. n-1] (1 <= n <= CCOIP_P2P_MAX_STREAMS) and returns the reduce
 * link that spreads over them; s must outlive the ring that uses it. */
reduce_link_t ccoip_stripe_link(ccoip_stripe_t *s, const reduce_link_t *links, uint32_t n);

/* The ring's window (sub-chunks in flight per direction) for an op over `width` streams: four
 * frames per stream (at least the ring's default 8), so that a stream in loss recovery holds the
 * others less soon; with lanes, each lane gets window / width of it. wan_bench (4 hosts, 500 Mbit/s, 25 ms, 0.1 % loss per skb, pool 4; 11 runs
 * each over 3 sessions of interleaved rounds): median 44.1 MB/s at 2 per stream, 45.7 at 4 (pool
 * 1: 50.7): a small gain, noisy. The per-flow-capped path read alike (45.0 / 44.9 MB/s). With
 * loss per packet, 8 per stream was worse (3 rounds: 26.1-36.2 MB/s against 38.0-39.0 at 4). */
uint32_t ccoip_stripe_window(uint32_t width);

/* Gives the ring its lanes (reduce.h, reduce_ring_params_t.lanes): one per stream when the op is
 * striped over the same number of streams both ways (tx->links, rx->links, as initialised by
 * ccoip_stripe_link), so a stream in loss recovery holds only its own frames; otherwise one lane.
 * Any op shape qualifies. The frames take the same streams either way (stream j mod width). */
void ccoip_stripe_lanes(reduce_ring_params_t *rp, const ccoip_stripe_t *tx, uint32_t tx_width,
                        const ccoip_stripe_t *rx, uint32_t rx_width);

#endif /* CCOIP_STRIPE_H */
