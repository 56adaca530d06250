/* The ring's lanes (reduce.h, reduce_ring_params_t.lanes; README.md "Lanes"): with S streams
 * between neighbours each stream runs its own in-order lane (sub-chunks j with j mod S = lane),
 * whatever the shape. Checked against the one-lane ring over the same streams: bit-identical
 * results for every dtype x op, world sizes 2..8, sub-chunk counts per chunk that are multiples
 * of S, not multiples, below S (lanes left empty) and unequal across chunks, a shorter last
 * sub-chunk, quantized, staged (every byte in and out once); a peer on one lane and its
 * neighbours on lanes agree (frame j on stream j mod S either way); a stream held back stalls
 * only its own lane; a peer that dies ends every ring. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/common/check.h"
#include "tests/reduce/harness.h"
#include "tests/reduce/lanes_net.h"

static reduce_cache_t *cache;

static void fill_random(unsigned char *buf, size_t bytes, uint32_t seed) {
    for (size_t i = 0; i < bytes; i++) {
        seed = seed * 1664525u + 1013904223u;
        buf[i] = (unsigned char) (seed >> 24);
    }
}

typedef struct lane_case {
    uint32_t n, s;
    size_t count, sub;
    uint32_t window;
    pcclDataType_t dt;
    pcclRedOp_t op;
    pcclQuantizationAlgorithm_t quant;
    int one_lane_peer; /* this peer runs without lanes (-1: none) */
} lane_case_t;

/* Runs the case over S streams, first all peers on one lane, then with lanes; compares. */
static void run_case(const lane_case_t *c) {
    int before = check_failures;
    size_t esz = reduce_dtype_size(c->dt), bytes = c->count * esz;
    uint32_t n = c->n;
    unsigned char *in[LN_MAX_PEERS], *out[2][LN_MAX_PEERS];
    for (uint32_t r = 0; r < n; r++) {
        in[r] = malloc(bytes);
        out[0][r] = malloc(bytes);
        out[1][r] = malloc(bytes);
        REQUIRE(in[r] && out[0][r] && out[1][r]);
        fill_random(in[r], bytes, 77u + r * 1000003u + (uint32_t) c->count);
    }
    for (int lanes = 0; lanes < 2; lanes++) {
        lanes_net_t ln;
        REQUIRE(lanes_net_create(&ln, n, c->s, NULL) == 0);
        peer_run_t runs[LN_MAX_PEERS];
        memset(runs, 0, sizeof runs);
        for (uint32_t r = 0; r < n; r++) {
            lanes_net_fill(&ln, r, lanes && (int) r != c->one_lane_peer, &runs[r].params);
            runs[r].params.cache = cache;
            runs[r].params.tag = 5;
            runs[r].params.subchunk_bytes = c->sub;
            runs[r].params.window = c->window;
            runs[r].params.quantization = (pcclQuantizationOptions_t){pcclUint8, c->quant};
            runs[r].sendbuf = in[r];
            runs[r].recvbuf = out[lanes][r];
            runs[r].count = c->count;
            runs[r].dtype = c->dt;
            runs[r].op = c->op;
        }
        REQUIRE(run_peers(runs, n) == 0);
        for (uint32_t r = 0; r < n; r++) {
            CHECK_EQ_U64(runs[r].rc, REDUCE_OK);
            /* Dealt frames: none when the ring posted to its lanes itself. */
            int on_lanes = lanes && (int) r != c->one_lane_peer;
            CHECK(on_lanes == (ln.tx[r].nsend == 0 && ln.rx[r].nrecv == 0));
        }
        lanes_net_destroy(&ln);
    }
    for (uint32_t r = 0; r < n; r++) {
        CHECK(memcmp(out[1][r], out[0][r], bytes) == 0);
        CHECK(memcmp(out[1][r], out[1][0], bytes) == 0);
    }
    if (check_failures != before)
        fprintf(stderr, "  case: n=%u s=%u count=%zu sub=%zu window=%u dt=%d op=%d quant=%d one_lane=%d\n", n,
                c->s, c->count, c->sub, c->window, c->dt, c->op, c->quant, c->one_lane_peer);
    for (uint32_t r = 0; r < n; r++) {
        free(in[r]);
        free(out[0][r]);
        free(out[1][r]);
    }
}

/* Every dtype x op; 3 peers, 4 streams, 64-element sub-chunks: chunks of 12 (equal), of 12 with a
 * shorter last sub-chunk and unequal chunks, one chunk of 13 sub-chunks beside two of 12, and
 * chunks of 9 and of 2 (not a multiple of the stream count; below it). */
static void test_dtypes_ops(void) {
    for (int dt = 0; dt < 12; dt++)
        for (int op = 0; op < 5; op++) {
            size_t esz = reduce_dtype_size((pcclDataType_t) dt);
            const size_t counts[] = { 3 * 768, 3 * 760 + 2, 3 * 768 + 1, 3 * 9 * 64, 3 * 2 * 64 - 1 };
            for (int k = 0; k < 5; k++) {
                lane_case_t c = { 3, 4, counts[k], 64 * esz, 16, (pcclDataType_t) dt, (pcclRedOp_t) op,
                                  pcclQuantNone, -1 };
                run_case(&c);
            }
        }
}

/* World sizes 2..8, 2 to 4 streams, windows below, at and above the lane count. */
static void test_world_sizes(void) {
    const uint32_t windows[] = { 3, 8, 64 };
    for (uint32_t n = 2; n <= 8; n++)
        for (uint32_t s = 2; s <= 4; s++)
            for (int w = 0; w < 3; w++) {
                size_t per_chunk = 5 * s * 64 - 17; /* 5s sub-chunks, the last one shorter */
                lane_case_t c = { n, s, n * per_chunk + (n > 2 ? n - 1 : 0), 64 * 4, windows[w], pcclFloat,
                                  pcclSum, pcclQuantNone, -1 };
                run_case(&c);
                c.count = n * 5 * s * 64 + 1; /* one chunk one element over: 5s + 1 sub-chunks */
                run_case(&c);
                c.count = n * (2 * s + 1) * 64 - 3; /* 2s + 1 sub-chunks: lane 0 holds one more */
                run_case(&c);
                c.count = n * (s - 1) * 64 + n / 2; /* s - 1 and s sub-chunks */
                run_case(&c);
                c.count = n * 64; /* one sub-chunk per chunk: lanes 1 .. s-1 carry nothing */
                run_case(&c);
            }
}

/* Quantized: both algorithms, float32 and float16, 2..5 peers (gather slots by step parity);
 * 8 sub-chunks per chunk, 9 and 10 (unequal, not multiples of 4), and 2 (below 4). */
static void test_quantized(void) {
    const pcclDataType_t dts[] = { pcclFloat, pcclFloat16 };
    const pcclQuantizationAlgorithm_t algos[] = { pcclQuantMinMax, pcclQuantZeroPointScale };
    for (uint32_t n = 2; n <= 5; n++)
        for (int d = 0; d < 2; d++)
            for (int a = 0; a < 2; a++) {
                size_t esz = reduce_dtype_size(dts[d]);
                lane_case_t c = { n, 4, n * 8 * 100 - 3, 100 * esz, 16, dts[d], pcclSum, algos[a], -1 };
                run_case(&c);
                c.count = n * 9 * 100 + n / 2 + 1;
                run_case(&c);
                c.count = n * 2 * 100 - 1;
                run_case(&c);
            }
}

/* A peer on one lane among peers on lanes: the frames take the same streams either way; chunks
 * of 16 sub-chunks, of 9 and 10, and of 3. */
static void test_mixed_peers(void) {
    for (uint32_t n = 2; n <= 4; n++)
        for (int q = 0; q < 2; q++) {
            const size_t counts[] = { n * 16 * 64, n * 9 * 64 + 1, n * 3 * 64 - 1 };
            for (int k = 0; k < 3; k++) {
                lane_case_t c = { n, 4, counts[k], 64 * 4, 16, pcclFloat, pcclSum,
                                  q ? pcclQuantMinMax : pcclQuantNone, (int) n - 1 };
                run_case(&c);
            }
        }
}

/* ---- staging hooks out of offset order ---------------------------------------------------- */

typedef struct stager {
    const unsigned char *dev_in;
    unsigned char *dev_out, *host, *in_seen, *out_seen;
} stager_t;

static int stage_in(void *ctx, size_t off, size_t len) {
    stager_t *s = ctx;
    memcpy(s->host + off, s->dev_in + off, len);
    for (size_t i = 0; i < len; i++) s->in_seen[off + i]++;
    return 0;
}

static int stage_out(void *ctx, size_t off, size_t len) {
    stager_t *s = ctx;
    memcpy(s->dev_out + off, s->host + off, len);
    for (size_t i = 0; i < len; i++) s->out_seen[off + i]++;
    return 0;
}

/* Staged, plain and quantized: chunks of 8 sub-chunks, and of 9 and 10. */
static void test_staged(void) {
    for (int q = 0; q < 4; q++) {
        uint32_t n = 4, s = 4;
        size_t count = q < 2 ? n * 8 * 64 - 5 : n * 9 * 64 + 2, bytes = count * 4;
        unsigned char *in[4], *plain[4], *host[4], *dev_out[4];
        stager_t st[4];
        reduce_ring_stage_t hooks[4];
        for (int staged = 0; staged < 2; staged++) {
            lanes_net_t ln;
            REQUIRE(lanes_net_create(&ln, n, s, NULL) == 0);
            peer_run_t runs[4];
            memset(runs, 0, sizeof runs);
            for (uint32_t r = 0; r < n; r++) {
                if (!staged) {
                    in[r] = malloc(bytes);
                    plain[r] = malloc(bytes);
                    host[r] = malloc(bytes);
                    dev_out[r] = malloc(bytes);
                    REQUIRE(in[r] && plain[r] && host[r] && dev_out[r]);
                    fill_random(in[r], bytes, 9u + r);
                    memset(host[r], 0xa5, bytes);
                }
                lanes_net_fill(&ln, r, staged, &runs[r].params);
                runs[r].params.cache = cache;
                runs[r].params.tag = 6;
                runs[r].params.subchunk_bytes = 64 * 4;
                runs[r].params.window = 16;
                runs[r].params.quantization = (pcclQuantizationOptions_t){pcclUint8, q % 2 ? pcclQuantMinMax : pcclQuantNone};
                runs[r].count = count;
                runs[r].dtype = pcclFloat;
                runs[r].op = pcclSum;
                if (!staged) {
                    runs[r].sendbuf = in[r];
                    runs[r].recvbuf = plain[r];
                    continue;
                }
                st[r] = (stager_t){in[r], dev_out[r], host[r], calloc(bytes, 1), calloc(bytes, 1)};
                REQUIRE(st[r].in_seen && st[r].out_seen);
                hooks[r] = (reduce_ring_stage_t){stage_in, stage_out, &st[r], 0};
                runs[r].params.stage = &hooks[r];
                runs[r].sendbuf = runs[r].recvbuf = host[r];
            }
            REQUIRE(run_peers(runs, n) == 0);
            for (uint32_t r = 0; r < n; r++) {
                CHECK_EQ_U64(runs[r].rc, REDUCE_OK);
                if (!staged) continue;
                CHECK(ln.tx[r].nsend == 0); /* on lanes */
                CHECK(memcmp(dev_out[r], plain[r], bytes) == 0);
                size_t once_in = 0, once_out = 0;
                for (size_t i = 0; i < bytes; i++) {
                    once_in += st[r].in_seen[i] == 1;
                    once_out += st[r].out_seen[i] == 1;
                }
                CHECK_EQ_U64(once_in, bytes);
                CHECK_EQ_U64(once_out, bytes);
                free(st[r].in_seen);
                free(st[r].out_seen);
            }
            lanes_net_destroy(&ln);
        }
        for (uint32_t r = 0; r < n; r++) {
            free(in[r]);
            free(plain[r]);
            free(host[r]);
            free(dev_out[r]);
        }
    }
}

/* ---- a held stream stalls only its own lane ----------------------------------------------- */

/* Wraps a receive link: while held, receives are kept back (in order) instead of posted. */
typedef struct holder {
    reduce_link_t inner;
    pthread_mutex_t mu;
    int held;
    uint32_t nq;
    struct { uint64_t tag, off; void *dst; size_t len; reduce_req_t *req; } q[64];
} holder_t;

static int hold_send(void *ctx, uint64_t tag, uint64_t off, const void *src, size_t len, reduce_req_t *req) {
    holder_t *h = ctx;
    return h->inner.ops->post_send(h->inner.ctx, tag, off, src, len, req);
}

static int hold_recv(void *ctx, uint64_t tag, uint64_t off, void *dst, size_t len, reduce_req_t *req) {
    holder_t *h = ctx;
    pthread_mutex_lock(&h->mu);
    int rc = 0;
    if (h->held && h->nq < 64) {
        h->q[h->nq].tag = tag;
        h->q[h->nq].off = off;
        h->q[h->nq].dst = dst;
        h->q[h->nq].len = len;
        h->q[h->nq].req = req;
        h->nq++;
    } else {
        rc = h->held ? -1 : h->inner.ops->post_recv(h->inner.ctx, tag, off, dst, len, req);
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

static void hold_wait(void *ctx, _Atomic uint32_t *doorbell, uint32_t seen, uint32_t timeout_us) {
    holder_t *h = ctx;
    h->inner.ops->wait(h->inner.ctx, doorbell, seen, timeout_us);
}

static void hold_cancel(void *ctx, uint64_t tag) {
    holder_t *h = ctx;
    pthread_mutex_lock(&h->mu);
    h->nq = 0;
    pthread_mutex_unlock(&h->mu);
    h->inner.ops->cancel(h->inner.ctx, tag);
}

static const reduce_link_ops_t hold_ops = { hold_send, hold_recv, hold_wait, hold_cancel, NULL };

static void hold_release(holder_t *h) {
    pthread_mutex_lock(&h->mu);
    h->held = 0;
    for (uint32_t i = 0; i < h->nq; i++)
        CHECK(h->inner.ops->post_recv(h->inner.ctx, h->q[i].tag, h->q[i].off, h->q[i].dst, h->q[i].len,
                                      h->q[i].req) == 0);
    h->nq = 0;
    pthread_mutex_unlock(&h->mu);
}

/* 2 peers, 4 streams; peer 1 holds back its receives on stream 1. With lanes the other three
 * streams from peer 0 to peer 1 carry their whole share meanwhile; on one lane they stop after
 * about a window. Then the stream is released and both rings finish with the right result. */
static void test_held_stream(void) {
    const uint32_t n = 2, s = 4;
    const size_t count = n * 64 * 256; /* 64 sub-chunks of 256 floats per chunk */
    for (int lanes = 0; lanes < 2; lanes++) {
        lanes_net_t ln;
        REQUIRE(lanes_net_create(&ln, n, s, NULL) == 0);
        holder_t h;
        memset(&h, 0, sizeof h);
        pthread_mutex_init(&h.mu, NULL);
        h.inner = ln.prev[1][1];
        h.held = 1;
        ln.prev[1][1] = ln.rx[1].links[1] = (reduce_link_t){ &hold_ops, &h };
        float *in[2], *out[2];
        peer_run_t runs[2];
        memset(runs, 0, sizeof runs);
        for (uint32_t r = 0; r < n; r++) {
            in[r] = malloc(count * 4);
            out[r] = malloc(count * 4);
            REQUIRE(in[r] && out[r]);
            for (size_t i = 0; i < count; i++) in[r][i] = (float) (i % 1000) + (float) r;
            lanes_net_fill(&ln, r, lanes, &runs[r].params);
            runs[r].params.cache = cache;
            runs[r].params.tag = 9;
            runs[r].params.subchunk_bytes = 256 * 4;
            runs[r].params.window = 16;
            runs[r].sendbuf = in[r];
            runs[r].recvbuf = out[r];
            runs[r].count = count;
            runs[r].dtype = pcclFloat;
            runs[r].op = pcclSum;
        }
        for (uint32_t r = 0; r < n; r++) REQUIRE(pthread_create(&runs[r].th, NULL, peer_main, &runs[r]) == 0);
        /* Peer 0 -> 1 moves its chunk 1 (reduce-scatter) and chunk 0 (all-gather): 32 frames per
         * stream of 1 KiB. */
        const uint64_t share = 2ull * 64 / s * 256 * 4;
        double t0 = now_s();
        uint64_t b = 0;
        while (now_s() - t0 < (lanes ? 20.0 : 0.5)) {
            b = reduce_memnet_edge_bytes(ln.nets[0], 0);
            if (b == share) break;
            usleep(1000);
        }
        if (lanes) CHECK_EQ_U64(b, share);
        else CHECK(b < share / 2);
        /* The other free streams finish their share too (each at its own pace: wait for it). */
        for (uint32_t k = 2; lanes && k < s; k++) {
            t0 = now_s();
            while (reduce_memnet_edge_bytes(ln.nets[k], 0) != share && now_s() - t0 < 20.0) usleep(1000);
            CHECK_EQ_U64(reduce_memnet_edge_bytes(ln.nets[k], 0), share);
        }
        hold_release(&h);
        for (uint32_t r = 0; r < n; r++) pthread_join(runs[r].th, NULL);
        for (uint32_t r = 0; r < n; r++) {
            CHECK_EQ_U64(runs[r].rc, REDUCE_OK);
            size_t bad = 0;
            for (size_t i = 0; i < count; i++) bad += out[r][i] != 2.0f * (float) (i % 1000) + 1.0f;
            CHECK_EQ_U64(bad, 0);
            free(in[r]);
            free(out[r]);
        }
        pthread_mutex_destroy(&h.mu);
        lanes_net_destroy(&ln);
    }
}

/* ---- a peer dies: every ring ends, with the link or abort error ---------------------------- */

static void test_death(void) {
    const uint64_t at[] = { 0, 3, 11, 20 }; /* of the 24 frames peer 2 sends on stream 0 */
    for (int k = 0; k < 4; k++) {
        uint32_t n = 4, s = 4;
        size_t count = n * 16 * 64;
        reduce_memnet_opts_t o = { 0, 2, at[k], 1 };
        lanes_net_t ln;
        REQUIRE(lanes_net_create(&ln, n, s, &o) == 0);
        peer_run_t runs[4];
        memset(runs, 0, sizeof runs);
        float *buf[4];
        for (uint32_t r = 0; r < n; r++) {
            buf[r] = calloc(count, 4);
            REQUIRE(buf[r] != NULL);
            lanes_net_fill(&ln, r, 1, &runs[r].params);
            runs[r].params.cache = cache;
            runs[r].params.tag = 11;
            runs[r].params.subchunk_bytes = 64 * 4;
            runs[r].params.window = 16;
            runs[r].sendbuf = runs[r].recvbuf = buf[r];
            runs[r].count = count;
            runs[r].dtype = pcclFloat;
            runs[r].op = pcclSum;
        }
        double t0 = now_s();
        REQUIRE(run_peers(runs, n) == 0);
        CHECK(now_s() - t0 < 10.0);
        /* Peer 2 and its successor cannot finish; before peer 2's first step-0 frames are out
         * nobody can. Later, peers 0 and 1 may have everything they need before it dies. */
        for (uint32_t r = 0; r < n; r++) {
            int rc = runs[r].rc;
            if (r == 2 || r == 3 || at[k] < 4) CHECK(rc == REDUCE_ELINK || rc == REDUCE_EABORTED);
            else CHECK(rc == REDUCE_OK || rc == REDUCE_ELINK || rc == REDUCE_EABORTED);
            free(buf[r]);
        }
        lanes_net_destroy(&ln);
    }
}

int main(void) {
    cache = reduce_cache_create();
    REQUIRE(cache != NULL);
    test_dtypes_ops();
    test_world_sizes();
    test_quantized();
    test_mixed_peers();
    test_staged();
    test_held_stream();
    test_death();
    reduce_cache_stats_t st;
    reduce_cache_get_stats(cache, &st);
    CHECK_EQ_U64(st.blocks_in_use, 0);
    reduce_cache_destroy(cache);
    return check_exit();
}
