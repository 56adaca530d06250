/* reduce.h -- what other modules may call in reduce/: the element-wise kernels, the caching
 * allocator for staging blocks, the abstract link and the ring all-reduce written against it.
 * Accumulation rules, chunking and the link contract are written down in reduce/README.md. */
#ifndef PCCL_REDUCE_H
#define PCCL_REDUCE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pccl.h"

/* Status codes of this module (0 or negative). */
enum {
    REDUCE_OK = 0,
    REDUCE_EINVAL = -1,   /* bad dtype, op, rank, buffer or parameter */
    REDUCE_ENOMEM = -2,   /* the allocator could not get memory */
    REDUCE_ELINK = -3,    /* a link refused a post or failed a request (peer gone, protocol error) */
    REDUCE_EABORTED = -4, /* the abort flag was raised */
    REDUCE_ESTAGE = -5    /* a staging hook failed (e.g. a CUDA copy) */
};

const char *reduce_strerror(int rc);

/* ---- Kernels ------------------------------------------------------------------------------ */

/* Bytes per element; 0 for a value outside pcclDataType_t. */
size_t reduce_dtype_size(pcclDataType_t dtype);
int reduce_dtype_valid(pcclDataType_t dtype);
int reduce_op_valid(pcclRedOp_t op);

/* dst[i] = acc[i] OP x[i] for i < count. Avg combines like Sum (the division is
 * reduce_finish's job). dst may be the very same pointer as acc or as x; no other overlap.
 * The order of the operands matters only for NaN payloads and Max/Min ties, see README.md.
 * Returns REDUCE_OK or REDUCE_EINVAL. */
int reduce_combine(pcclDataType_t dtype, pcclRedOp_t op, void *dst, const void *acc,
                   const void *x, size_t count);

/* reduce_combine where acc may sit at any address (e.g. in a byte stream): the same kernel and
 * bits; a misaligned acc goes through a small aligned bounce on the stack, a few KiB at a time.
 * dst and x as for reduce_combine; acc overlaps neither. */
int reduce_combine_unaligned(pcclDataType_t dtype, pcclRedOp_t op, void *dst, const void *acc,
                             const void *x, size_t count);

/* dst[i] = dst[i] OP src[i]: reduce_combine(dtype, op, dst, dst, src, count). */
int reduce_accumulate(pcclDataType_t dtype, pcclRedOp_t op, void *dst, const void *src,
                      size_t count);

/* The last step of an element's reduction, done once by the chunk's owner: Avg divides by
 * world_size (integers truncate toward zero; floats divide in their own precision, fp16/bf16
 * in float32 then round to nearest even). A no-op for the other ops. */
int reduce_finish(pcclDataType_t dtype, pcclRedOp_t op, void *buf, size_t count,
                  uint32_t world_size);

/* ---- Caching allocator -------------------------------------------------------------------- */

/* Blocks come in power-of-two size classes from 4 KiB up, 64-byte aligned. A freed block goes
 * to its class's free list and is handed out again, so a steady workload calls malloc zero
 * times. Thread-safe (one mutex, held for a few pointer moves). */
typedef struct reduce_cache reduce_cache_t;

typedef struct reduce_cache_stats {
    uint64_t system_allocs;  /* blocks obtained from the system since create */
    uint64_t bytes_held;     /* capacity of every block the cache owns (in use or free) */
    uint64_t blocks_in_use;  /* allocated and not yet freed */
    uint64_t blocks_free;    /* waiting in the free lists */
} reduce_cache_stats_t;

reduce_cache_t *reduce_cache_create(void);
/* Where a cache gets its memory from: e.g. page-locked host memory for CUDA staging. alloc
 * returns memory aligned to at least 64 bytes, or NULL. */
typedef struct reduce_cache_source {
    void *(*alloc)(void *ctx, size_t size);
    void (*free)(void *ctx, void *mem);
    void *ctx;
} reduce_cache_source_t;
/* A cache over `source` instead of the C heap (NULL: the C heap, as reduce_cache_create). */
reduce_cache_t *reduce_cache_create_from(const reduce_cache_source_t *source);
/* Frees every block, also those still in use (logged: that is a caller bug). */
void reduce_cache_destroy(reduce_cache_t *cache);
/* A block of at least size bytes (its class's capacity); NULL when size is over 2^40 or the
 * system is out of memory. */
void *reduce_cache_alloc(reduce_cache_t *cache, size_t size);
/* Returns a block to its free list; NULL is ignored. */
void reduce_cache_free(reduce_cache_t *cache, void *block);
/* The usable capacity of a block from reduce_cache_alloc. */
size_t reduce_cache_block_capacity(const void *block);
/* Gives the free blocks back to the system (blocks in use stay). */
void reduce_cache_trim(reduce_cache_t *cache);
void reduce_cache_get_stats(reduce_cache_t *cache, reduce_cache_stats_t *out);

/* ---- Quantization ------------------------------------------------------------------------ */

/* One sub-chunk quantized is a frame: a fixed header (reduce_quant_header_bytes) followed by
 * one uint8 or uint16 code per element. The header holds the algorithm, code width, a
 * non-finite flag, the source dtype, the element count and two parameters (min and max, or
 * scale and zero point) in the working type (float; double for float64 sources). Algorithms,
 * rounding, NaN/Inf and constant sub-chunks: README.md "Quantization". */
#define REDUCE_QUANT_MAX_HEADER 24u

/* REDUCE_OK when dtype may travel quantized as q says (q NULL or algorithm pcclQuantNone:
 * always); REDUCE_EINVAL for any other algorithm or quantized dtype than MinMax /
 * ZeroPointScale to uint8 / uint16, or a source dtype other than float32, float64, float16
 * and bfloat16. */
int reduce_quant_check(pcclDataType_t dtype, const pcclQuantizationOptions_t *q);

/* 16 for float32, float16 and bfloat16 sources, 24 for float64; 0 for the other dtypes. */
size_t reduce_quant_header_bytes(pcclDataType_t dtype);

/* Header plus count codes; 0 when q does not quantize dtype (see reduce_quant_check). */
size_t reduce_quant_frame_bytes(pcclDataType_t dtype, const pcclQuantizationOptions_t *q,
                                size_t count);

/* Quantizes count (at most UINT32_MAX) elements of src into one frame of
 * reduce_quant_frame_bytes bytes at frame (2-byte aligned). REDUCE_EINVAL when q does not
 * quantize dtype. */
int reduce_quant_encode(pcclDataType_t dtype, const pcclQuantizationOptions_t *q, void *frame,
                        const void *src, size_t count);

/* Decodes one frame into count elements of dtype at dst. Deterministic: the same frame gives
 * the same bits on every peer. REDUCE_EINVAL (nothing written) when the header does not
 * describe count elements of dtype quantized as q says. frame and dst must not overlap. */
int reduce_quant_decode(pcclDataType_t dtype, const pcclQuantizationOptions_t *q, void *dst,
                        const void *frame, size_t count);

/* ---- Link --------------------------------------------------------------------------------- */

/* A request: caller-owned; the poster sets state = PENDING and doorbell before posting. */
enum { REDUCE_REQ_PENDING = 0, REDUCE_REQ_DONE = 1, REDUCE_REQ_FAILED = 2 };

/* reduce_req_t.flags of a send: src stays unchanged until the receiver has read the bytes, not
 * only until the request completes. A link may then hand the pages to the kernel by reference
 * (ccoip: vmsplice) and complete the request before the bytes have left. */
#define REDUCE_SEND_BY_REFERENCE 1u

typedef struct reduce_req {
    _Atomic uint32_t state;     /* PENDING until the link stores DONE or FAILED */
    _Atomic uint32_t *doorbell; /* set by the poster; outlives the link's use of it */
    uint32_t flags;             /* set by the poster: REDUCE_SEND_BY_REFERENCE or 0 */
    void *link_private[2];      /* scratch for the link while the request is pending */
    void *trace;                /* set by the poster: the profiler's parent for the link's event */
    /* Set by the poster: the frame's sub-chunk index within its chunk, the same at both ends of
     * a link. A striped link (ccoip_stripe.h) carries the frame on stream `stream mod width`;
     * other links ignore it. */
    uint32_t stream;
} reduce_req_t;

/* One direction-agnostic connection to a neighbour (see README.md "Link contract"):
 *
 * post_send: queue the frame (tag, offset, len bytes at src). Zero-copy: the link reads src
 *   until the request completes; the poster keeps it unchanged until then. DONE means the
 *   link will never read src again (with REDUCE_SEND_BY_REFERENCE the kernel may still do so,
 *   until the receiver has read the bytes).
 * post_recv: register dst for the next frame of this tag. Frames of one tag are matched to
 *   receives in posting order; a frame whose (offset, len) differs from the receive's fails
 *   the request. DONE means len bytes are in dst.
 *   Both return 0, or -1 when the link is broken (nothing was queued then). Either may
 *   complete the request before returning.
 * Completion: the link stores DONE or FAILED into req->state, then increments *req->doorbell
 *   and wakes whoever sleeps in wait() on it. The state store is the link's last access to
 *   the request; the doorbell word must outlive the link (the caller owns it).
 * wait: sleep until *doorbell != seen or timeout_us passed; spurious returns are fine.
 * cancel: withdraw every pending request of the tag on this link. When it returns the link
 *   touches none of their buffers or request structs again (it may have to close the
 *   connection to guarantee that). Their state is left as it was.
 * post_recv_combine (optional; NULL: the link does not offer it, and the ring stages the frame
 *   and combines it itself): like post_recv, but the frame's bytes are combined into dst as they
 *   arrive instead of stored: DONE means reduce_combine(dtype, op, dst, frame, x, len / esz)
 *   over the whole frame (the frame is the accumulator operand, x the other: the operand order
 *   of the ring's own combine, so both give the same bits). len is a multiple of the dtype's
 *   size; x may equal dst, no other overlap; the link reads x and writes dst until the request
 *   completes (a FAILED or cancelled one may have combined part of dst). Returns as post_recv,
 *   and -1 (logged) for a bad dtype, op or length. */
typedef struct reduce_link_ops {
    int (*post_send)(void *link, uint64_t tag, uint64_t offset, const void *src, size_t len,
                     reduce_req_t *req);
    int (*post_recv)(void *link, uint64_t tag, uint64_t offset, void *dst, size_t len,
                     reduce_req_t *req);
    void (*wait)(void *link, _Atomic uint32_t *doorbell, uint32_t seen, uint32_t timeout_us);
    void (*cancel)(void *link, uint64_t tag);
    int (*post_recv_combine)(void *link, uint64_t tag, uint64_t offset, void *dst, const void *x,
                             size_t len, pcclDataType_t dtype, pcclRedOp_t op, reduce_req_t *req);
} reduce_link_ops_t;

typedef struct reduce_link {
    const reduce_link_ops_t *ops;
    void *ctx;
} reduce_link_t;

/* ---- Ring all-reduce ---------------------------------------------------------------------- */

#define REDUCE_RING_DEFAULT_SUBCHUNK (256u * 1024u)  /* smallest automatic size */
#define REDUCE_RING_MAX_AUTO_SUBCHUNK (1024u * 1024u) /* largest automatic size */
#define REDUCE_RING_SUBCHUNKS_PER_CHUNK 32u         /* automatic: aim for this many per chunk */
#define REDUCE_RING_DEFAULT_WINDOW 8u
#define REDUCE_RING_MAX_WINDOW 64u
#define REDUCE_RING_DEFAULT_POLL_US 1000u
#define REDUCE_RING_MAX_LANES 16u

/* Staging hooks, for buffers that live elsewhere (CUDA device memory staged through one host
 * block that serves as sendbuf and recvbuf both). The ring calls
 *   input(ctx, off, len)   before it first reads sendbuf[off, off + len); it writes recvbuf
 *                          over a range only after input() covered it;
 *   output(ctx, off, len)  once recvbuf[off, off + len) holds its final bytes.
 * Each covers every byte exactly once, a sub-chunk at a time, in the order the ring needs them:
 * for rank r of n, chunk (r-1) mod n first, then (r-2), ... down to r (README.md, "Staging").
 * With lanes (below) that order holds per lane, and the lanes' calls interleave: a stager must
 * accept ranges out of offset order.
 * A non-zero return fails the ring with REDUCE_ESTAGE.
 * early_input non-zero: the ring calls input() for a reduce-scatter receive's range before it
 * posts the receive (not when it processes it), so that a link that combines frames as they land
 * (post_recv_combine, which reads sendbuf then) may do so for staged buffers too. */
typedef struct reduce_ring_stage {
    int (*input)(void *ctx, size_t off, size_t len);
    int (*output)(void *ctx, size_t off, size_t len);
    void *ctx;
    int early_input;
} reduce_ring_stage_t;

/* Profiling hooks (docs/profiler.md): begin(ctx, phase) when phase 0 (reduce-scatter) or 1
 * (all-gather) starts, returning what the ring stores in reduce_req_t.trace of the phase's
 * requests; end(ctx, phase, rc) once every request of the phase completed (rc REDUCE_OK), or
 * was cancelled (rc: the ring's error). */
typedef struct reduce_ring_probe {
    void *(*begin)(void *ctx, int phase);
    void (*end)(void *ctx, int phase, int rc);
    void *ctx;
} reduce_ring_probe_t;

typedef struct reduce_ring_params {
    uint32_t rank;                     /* position in the ring, < world_size */
    uint32_t world_size;               /* peers in the ring, >= 1 */
    reduce_link_t next;                /* sends go to rank + 1 */
    reduce_link_t prev;                /* receives come from rank - 1 */
    uint64_t tag;                      /* carried by every frame of this all-reduce */
    reduce_cache_t *cache;             /* staging blocks */
    const _Atomic uint32_t *abort_flag; /* non-zero: stop with REDUCE_EABORTED; may be NULL */
    _Atomic uint32_t *doorbell;        /* the links ring it on completions; must outlive them */
    size_t subchunk_bytes;             /* frame payload size; 0: reduce_ring_default_subchunk() */
    uint32_t window;                   /* sub-chunks in flight per direction; 0: default */
    uint32_t poll_us;                  /* longest sleep between abort-flag checks; 0: default */
    /* Wire quantization (README.md "Quantization"). All zero, i.e. algorithm pcclQuantNone:
     * none, frames carry the source elements. Otherwise pcclQuantMinMax or
     * pcclQuantZeroPointScale to pcclUint8 or pcclUint16, for float32, float64, float16 and
     * bfloat16 sources; any other combination is REDUCE_EINVAL. */
    pcclQuantizationOptions_t quantization;
    const reduce_ring_stage_t *stage;  /* NULL: sendbuf and recvbuf are plain host memory */
    /* Non-zero: plain (unquantized) sends carry REDUCE_SEND_BY_REFERENCE. The caller then keeps
     * sendbuf and recvbuf unchanged until every peer's ring has finished, not only this one. */
    int send_by_reference;
    const reduce_ring_probe_t *probe;  /* NULL: no profiling */
    /* Lanes (README.md "Lanes"): next and prev deal every frame to stream j mod lanes (j: its
     * sub-chunk index within its chunk, reduce_req_t.stream), and next_lanes[s] / prev_lanes[s]
     * are those streams (lanes links each). Every frame then depends only on earlier frames of
     * its own stream, whatever the shape: the ring runs one in-order lane per stream (window /
     * lanes sub-chunks in flight each), posting straight to the lane's link, so a stream that
     * stalls holds only its own share. With lanes 0 or 1 (or NULL arrays), one lane over next and
     * prev; the frames take the same streams either way. */
    uint32_t lanes;                    /* <= REDUCE_RING_MAX_LANES */
    const reduce_link_t *next_lanes, *prev_lanes;
    /* One phase only, for reduce_grid.c (needs world_size >= 2 and no stage):
     * REDUCE_RING_SCATTER runs steps 0 .. N-2 and leaves rank r's chunk r combined over the ring
     * in recvbuf, without Avg's division (other chunks: scratch); REDUCE_RING_GATHER runs steps
     * N-1 .. 2N-3 and spreads each rank's chunk r of recvbuf (quantized: encoded once by its
     * owner, who decodes it back) into everyone's recvbuf. REDUCE_RING_BOTH (0): the all-reduce. */
    uint32_t phases;
    uint32_t avg_divisor;              /* Avg divides by this; 0: world_size */
} reduce_ring_params_t;

enum { REDUCE_RING_BOTH = 0, REDUCE_RING_SCATTER = 1, REDUCE_RING_GATHER = 2 };

typedef struct reduce_ring_stats {
    uint64_t tx_bytes; /* payload bytes of completed sends (quantized: headers and codes) */
    uint64_t rx_bytes; /* payload bytes of completed receives */
} reduce_ring_stats_t;

/* The sub-chunk size a ring uses when params->subchunk_bytes is 0: a function of the call's
 * shape only, so every peer cuts the same frames (256 KiB when quantized; plain, a power of two
 * from 256 KiB to REDUCE_RING_MAX_AUTO_SUBCHUNK giving about REDUCE_RING_SUBCHUNKS_PER_CHUNK
 * frames per chunk). */
size_t reduce_ring_default_subchunk(size_t count, size_t esz, uint32_t n, int quantized);

/* All-reduce count elements of sendbuf into recvbuf over the ring: reduce-scatter then
 * all-gather, world_size - 1 steps each. sendbuf is only read; it may equal recvbuf (no other
 * overlap). On success every peer's recvbuf holds the same bytes. On failure recvbuf is
 * undefined, every request was cancelled, and stats (if not NULL) count what moved.
 * Returns REDUCE_OK, REDUCE_EINVAL, REDUCE_ENOMEM, REDUCE_ELINK, REDUCE_EABORTED or
 * REDUCE_ESTAGE. */
int reduce_ring_allreduce(const reduce_ring_params_t *params, const void *sendbuf,
                          void *recvbuf, size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                          reduce_ring_stats_t *stats);

/* The byte range [start, start + len) of chunk c when count elements of elem_size bytes are
 * cut into world_size chunks: the first count % world_size chunks get one element more. */
void reduce_ring_chunk(size_t count, size_t elem_size, uint32_t world_size, uint32_t c,
                       size_t *start, size_t *len);

/* ---- The grid all-reduce (README.md "The grid schedule") --------------------------------- */

#define REDUCE_GRID_MAX_DIMS 16
#define REDUCE_GRID_MAX_PEERS 65536u

/* The grid over the ring order: positions 0 .. grid-1 form a mixed-radix grid, dimension 0 the
 * fastest-varying (its rings are runs of size[0] consecutive positions); the last `extras`
 * positions (at most `grid`) each fold into one grid peer. */
typedef struct reduce_grid_shape {
    uint32_t ndims;
    uint32_t size[REDUCE_GRID_MAX_DIMS]; /* each >= 2, non-increasing */
    uint32_t grid, extras;
} reduce_grid_shape_t;

/* The grid for n peers with the fewest steps, sum of 2(size[d]-1) (+2 with extras), using at
 * most max_dims dimensions (0: REDUCE_GRID_MAX_DIMS; g's prime factors, spread over fewer
 * dimensions when too many) and at most max_extras extras; ties: fewer extras. Returns 1, or 0
 * (shape zeroed) when no grid beats the ring's 2(n-1) steps, or n > REDUCE_GRID_MAX_PEERS (the
 * search factors every size from n down to n/2). A function of its arguments only:
 * every peer picks the same grid. */
int reduce_grid_shape(uint32_t n, uint32_t max_dims, uint32_t max_extras, reduce_grid_shape_t *shape);

/* Steps of one op over the shape: sum of 2(size[d]-1), +2 with extras. */
uint32_t reduce_grid_steps(const reduce_grid_shape_t *shape);

#define REDUCE_GRID_NONE UINT32_MAX

/* Position pos in the grid: its coordinates, each dimension's ring neighbours (positions), and
 * its fold partner (an extra's grid peer, a grid peer's extra, or REDUCE_GRID_NONE). An extra
 * has extra = 1 and no coordinates or ring neighbours. */
typedef struct reduce_grid_role {
    int extra;
    uint32_t coord[REDUCE_GRID_MAX_DIMS];
    uint32_t next[REDUCE_GRID_MAX_DIMS], prev[REDUCE_GRID_MAX_DIMS];
    uint32_t fold;
} reduce_grid_role_t;
void reduce_grid_role(const reduce_grid_shape_t *shape, uint32_t pos, reduce_grid_role_t *out);

/* Sends go to next[d] and fold_tx, receives come from prev[d] and fold_rx; the links of roles a
 * position does not have are ignored (ops may be NULL). */
typedef struct reduce_grid_links {
    reduce_link_t next[REDUCE_GRID_MAX_DIMS], prev[REDUCE_GRID_MAX_DIMS];
    reduce_link_t fold_tx, fold_rx;
} reduce_grid_links_t;

/* All-reduce over the grid: an extra's input folds into its grid peer; reduce-scatter along
 * dimensions 0 .. D-2 (each on the shard the previous one left), all-reduce of the last shard
 * along dimension D-1, all-gather back along D-2 .. 0; the extra gets the result back.
 * p: rank = position in the ring order, world_size = n (= grid + extras); tag, cache,
 * abort_flag, doorbell, subchunk_bytes, window, poll_us, quantization as for the ring; next,
 * prev, lanes and probe are ignored; stage must be NULL. The contract of reduce_ring_allreduce
 * (every peer bit-identical, sendbuf never written, the same status codes), with the reduction
 * order README.md gives for the grid. */
int reduce_grid_allreduce(const reduce_ring_params_t *p, const reduce_grid_shape_t *shape,
                          const reduce_grid_links_t *links, const void *sendbuf, void *recvbuf,
                          size_t count, pcclDataType_t dtype, pcclRedOp_t op,
                          reduce_ring_stats_t *stats);

/* ---- Which all-reduce: the ring or the grid (README.md "Choosing") ----------------------- */

typedef enum reduce_algo {
    REDUCE_ALGO_AUTO = 0, /* the model decides */
    REDUCE_ALGO_RING = 1,
    REDUCE_ALGO_GRID = 2
} reduce_algo_t;

/* What the model knows of the links: the time one ring step costs beyond its bytes (a one-way
 * delay plus the per-step overhead) and a link's rate. Every peer must be given the same. */
typedef struct reduce_model {
    double step_s;
    double rate_Bps;
} reduce_model_t;

/* Predicted seconds for `bytes` (on the wire: quantized size when quantized) over n peers:
 * ring 2(n-1) (step + bytes/n / rate); grid, per dimension d with the shard s_d it works on
 * (bytes / (size[0] ... size[d-1])), 2(size[d]-1) (step + s_d/size[d] / rate), plus a fold of the
 * whole buffer each way (2 (step + bytes / rate)) when it has extras. */
double reduce_model_ring_s(uint32_t n, double bytes, const reduce_model_t *m);
double reduce_model_grid_s(const reduce_grid_shape_t *shape, double bytes, const reduce_model_t *m);

/* The grid's predicted time must be at most this share of the ring's before AUTO takes it: the
 * model leaves out the grid's phase boundaries, where its pipeline drains and refills. */
#define REDUCE_GRID_MARGIN 0.9

/* The algorithm for one op: `forced` unless AUTO. The grid is the faster by the model of two
 * shapes, the fewest steps (reduce_grid_shape(n, 0, UINT32_MAX)) and the fewest steps without
 * extras (reduce_grid_shape(n, 0, 0)); AUTO takes it when its reduce_model_grid_s <=
 * REDUCE_GRID_MARGIN x reduce_model_ring_s. A forced grid with no shape (n < 4) is the ring.
 * *shape: the grid (zeroed for the ring). A pure function: peers given the same arguments pick
 * the same. */
reduce_algo_t reduce_grid_pick(uint32_t n, double bytes, const reduce_model_t *m, reduce_algo_t forced,
                               reduce_grid_shape_t *shape);

/* "ring", "grid" (or "2d"), "auto", any case, to *out: 0; else -1 (nothing written). */
int reduce_algo_parse(const char *s, reduce_algo_t *out);

#endif /* PCCL_REDUCE_H */
