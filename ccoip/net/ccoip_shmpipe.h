/* ccoip_shmpipe.h: a single-producer/single-consumer byte pipe in shared memory, one direction of
 * a same-host data link (docs/allreduce.md, "Shared memory between peers of one host").
 *
 * The segment (ccoip_shm.h) holds a header page and a ring of ring_size bytes (a power of two).
 * The writer copies the poster's bytes into the ring and publishes `head` (bytes written, ever);
 * the reader copies from the ring straight into the receive's buffer (or hands the bytes to a
 * function straight out of the ring, ccoip_shmpipe_read_each: a combining receive) and publishes
 * `tail` (bytes consumed). Both counters sit on their own cache lines; a side that finds nothing to do spins a
 * little, then parks on a futex word in the segment (threadpark_shared.h) that the other side
 * bumps only when the parked side said that it sleeps: no system call in steady state.
 *
 * The other process is not trusted: a head or tail that no honest peer can write (more than a
 * ring apart from our own counter) fails the call with CCOIP_SHMPIPE_CORRUPT and one log line;
 * every copy is masked into the ring, so nothing read from the segment can move a copy outside
 * it.
 *
 * The other process may die (SIGKILL) while we park: the socket beside the pipe (the data link's
 * TCP connection, ccoip_shmpipe_watch) tells, since the kernel closes its end. A parked side asks
 * it every CCOIP_SHMPIPE_TICK_MS; a reader still parked after a whole tick (an idle link) stops
 * ticking and sleeps on the socket itself (ccoip_shm_doorbell_wait), where the writer's next
 * publish rings it with one byte and the other process's death wakes it at once: an idle link
 * costs no wake-ups. The writer never sleeps on the socket (the other direction of the socket
 * may still carry TCP frames), but it parks only while the ring is full, i.e. mid-transfer.
 *
 * Calls never allocate. One writer thread and one reader thread per pipe; ccoip_shmpipe_shut may
 * come from any thread. */
#ifndef CCOIP_SHMPIPE_H
#define CCOIP_SHMPIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip/net/ccoip_shm.h"

#define CCOIP_SHMPIPE_TOKEN 16
#define CCOIP_SHMPIPE_HEADER 4096u                  /* the header page before the ring */
#define CCOIP_SHMPIPE_RING_MIN (64u << 10)
#define CCOIP_SHMPIPE_RING_MAX (64u << 20)
#define CCOIP_SHMPIPE_TICK_MS 100                   /* a parked side asks the socket this often */

enum {
    CCOIP_SHMPIPE_OK = 0,
    CCOIP_SHMPIPE_CLOSED = 1,  /* shut here or by the other side */
    CCOIP_SHMPIPE_GONE = 2,    /* the socket says the other side is gone */
    CCOIP_SHMPIPE_CORRUPT = 3, /* a counter no honest peer writes, or noise on the socket (logged) */
    CCOIP_SHMPIPE_BADARG = 4,  /* ccoip_shmpipe_read_each: a unit it does not take (a caller bug) */
};

#define CCOIP_SHMPIPE_UNIT_MAX 16u     /* largest element ccoip_shmpipe_read_each keeps whole */
#define CCOIP_SHMPIPE_PIECE_MAX (64u << 10) /* read_each publishes its progress at least this often */

typedef struct ccoip_shmpipe {
    ccoip_shm_t shm;
    struct ccoip_shmpipe_hdr *h; /* NULL: not mapped */
    uint8_t *ring;
    uint64_t ring_size, pos;     /* pos: our own counter (the writer's head, the reader's tail) */
    uint32_t spin;               /* polls before parking */
    uint32_t shut;               /* set by ccoip_shmpipe_shut (atomic) */
    uint8_t token[CCOIP_SHMPIPE_TOKEN];
    bool writer;                 /* created here (the writer's side) */
    int sock;                    /* the socket beside the pipe; -1: none (no liveness check) */
    char name[64];               /* for log lines */
} ccoip_shmpipe_t;

/* A ring size from a request in bytes: rounded down to a power of two within [MIN, MAX]. */
size_t ccoip_shmpipe_ring_size(size_t want);

/* The writer's side: creates and maps a segment with a ring of ring_size bytes (a power of two
 * within [MIN, MAX]) and a fresh random token. False (logged at info) when the system refuses. */
bool ccoip_shmpipe_create(ccoip_shmpipe_t *p, size_t ring_size, const char *name);

/* The reader's side: opens the segment seg_name and checks that it is one (magic, version, ring
 * size, token): proof that it is the memory the writer created, not another /dev/shm. False
 * (logged at info) otherwise. */
bool ccoip_shmpipe_open(ccoip_shmpipe_t *p, const char *seg_name, size_t ring_size,
                        const uint8_t token[CCOIP_SHMPIPE_TOKEN], const char *name);

/* The segment's name ("" once removed) and its token, for the offer. */
const char *ccoip_shmpipe_segment(const ccoip_shmpipe_t *p);

/* Removes the segment's name; the mappings stay. */
void ccoip_shmpipe_unlink(ccoip_shmpipe_t *p);

/* The socket beside the pipe, connected to the other process (-1: none): its hang-up means that
 * the other side is gone, and once the writer's side switched the pipe on, the writer's direction
 * of it carries the reader's doorbells and nothing else. Set on both sides (a reader that
 * watches a socket its writer does not would sleep there unrung), before the first use. */
void ccoip_shmpipe_watch(ccoip_shmpipe_t *p, int sock);

/* Writes len bytes (blocking while the ring is full). CCOIP_SHMPIPE_OK or why not. */
int ccoip_shmpipe_write(ccoip_shmpipe_t *p, const void *buf, size_t len);

/* Reads exactly len bytes into buf (NULL: reads and drops them), blocking while the ring is
 * empty. CCOIP_SHMPIPE_OK or why not. */
int ccoip_shmpipe_read(ccoip_shmpipe_t *p, void *buf, size_t len);

/* Where ccoip_shmpipe_read_each hands the bytes: n bytes at piece, the bytes [at, at + n) of
 * the read. piece stays valid (and unchanged by an honest writer) until fn returns. */
typedef void (*ccoip_shmpipe_sink_fn)(void *ctx, size_t at, const void *piece, size_t n);

/* Reads exactly len bytes like ccoip_shmpipe_read, but hands them to fn straight out of the ring
 * instead of copying them out: one call per contiguous piece as the bytes arrive (at most
 * CCOIP_SHMPIPE_PIECE_MAX each; the ring space is given back after each call), in order, every
 * piece a whole number of `unit`-byte elements (unit: a power of two up to
 * CCOIP_SHMPIPE_UNIT_MAX that divides len). An element that wraps around the ring's end is
 * handed alone, from a bounce aligned to unit; an element that has only partly arrived waits
 * for its rest. Pieces out of the ring sit wherever the stream puts them: aligned to unit or not.
 * CCOIP_SHMPIPE_OK, or why not (BADARG: nothing read); on failure fn may have seen a prefix. */
int ccoip_shmpipe_read_each(ccoip_shmpipe_t *p, size_t len, size_t unit, ccoip_shmpipe_sink_fn fn, void *ctx);

/* Closes the pipe for both sides: marks it closed in the segment and here, and wakes every
 * thread parked on it, in both processes (on the reader's side, a reader asleep on the socket by
 * shutting down the socket's reading side). Any thread; no-op when not mapped. */
void ccoip_shmpipe_shut(ccoip_shmpipe_t *p);

/* Unmaps (after the threads that use it are done). */
void ccoip_shmpipe_close(ccoip_shmpipe_t *p);

/* Bytes written into the ring that the reader has not consumed yet (0 when not mapped). */
uint64_t ccoip_shmpipe_unread(const ccoip_shmpipe_t *p);

/* Test hooks: the segment's head and tail, to write garbage into them. */
uint64_t *ccoip_shmpipe_head_word(ccoip_shmpipe_t *p);
uint64_t *ccoip_shmpipe_tail_word(ccoip_shmpipe_t *p);

#endif /* CCOIP_SHMPIPE_H */
