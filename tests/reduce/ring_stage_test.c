/* The ring's staging hooks (reduce_ring_stage_t), as the CUDA path uses them: one host block
 * serves as sendbuf and recvbuf, starts as garbage, and is filled from a separate "device"
 * input by input() and drained into a "device" output by output(). If the ring read a byte
 * before input() delivered it, or output() fired before a byte was final, the drained result
 * would differ from the plain ring's. Checked: every byte staged in and out exactly once, the
 * first input is the start of chunk r-1, results bit-identical to the plain ring (quantized
 * too), and a failing hook ends the ring with REDUCE_ESTAGE. */
#include <stdlib.h>
#include <string.h>

#include "tests/common/check.h"
#include "tests/reduce/harness.h"

static reduce_cache_t *cache;

typedef struct stager {
    const unsigned char *dev_in; /* the "device" input */
    unsigned char *dev_out;      /* the "device" output */
    unsigned char *host;         /* sendbuf == recvbuf of the ring */
    unsigned char *in_seen, *out_seen; /* per byte: how many times staged */
    size_t first_in_off;
    int calls_in, calls_out;
    int fail_out_at; /* output call number that fails, -1: none */
    reduce_memnet_t *net;
    uint32_t peer;
} stager_t;

static int stage_in(void *ctx, size_t off, size_t len) {
    stager_t *s = ctx;
    if (s->calls_in++ == 0) s->first_in_off = off;
    memcpy(s->host + off, s->dev_in + off, len);
    for (size_t i = 0; i < len; i++) s->in_seen[off + i]++;
    return 0;
}

static int stage_out(void *ctx, size_t off, size_t len) {
    stager_t *s = ctx;
    if (s->calls_out++ == s->fail_out_at) {
        reduce_memnet_kill(s->net, s->peer); /* as the real path closes its links on failure */
        return -1;
    }
    memcpy(s->dev_out + off, s->host + off, len);
    for (size_t i = 0; i < len; i++) s->out_seen[off + i]++;
    return 0;
}

static float frand(uint32_t *state) {
    *state = *state * 1664525u + 1013904223u;
    return (float) ((int32_t) (*state >> 8) % 100000) / 997.0f;
}

typedef struct stage_case {
    uint32_t n;
    size_t count;
    pcclDataType_t dt;
    pcclRedOp_t op;
    size_t sub;
    pcclQuantizationAlgorithm_t quant;
} stage_case_t;

/* Runs the case twice, plain and staged, and compares. */
static void run_case(const stage_case_t *c) {
    size_t esz = reduce_dtype_size(c->dt), bytes = c->count * esz;
    uint32_t n = c->n;
    unsigned char *in[8], *plain_out[8], *host[8], *dev_out[8];
    stager_t st[8];
    reduce_ring_stage_t hooks[8];
    uint32_t seed = 12345u + n * 7u + (uint32_t) c->count;
    for (uint32_t r = 0; r < n; r++) {
        in[r] = malloc(bytes);
        plain_out[r] = malloc(bytes);
        host[r] = malloc(bytes);
        dev_out[r] = malloc(bytes);
        REQUIRE(in[r] && plain_out[r] && host[r] && dev_out[r]);
        if (c->dt == pcclFloat) {
            for (size_t i = 0; i < c->count; i++) ((float *) in[r])[i] = frand(&seed);
        } else {
            for (size_t i = 0; i < bytes; i++) in[r][i] = (unsigned char) (i * 31 + r * 7 + 1);
        }
        memset(host[r], 0xA5, bytes);
        memset(dev_out[r], 0x5A, bytes);
    }
    pcclQuantizationOptions_t qo = {c->quant == pcclQuantNone ? pcclUint8 : pcclUint8, c->quant};
    for (int staged = 0; staged < 2; staged++) {
        reduce_memnet_t *net = reduce_memnet_create(n, NULL);
        REQUIRE(net != NULL);
        peer_run_t runs[8];
        memset(runs, 0, sizeof runs);
        for (uint32_t r = 0; r < n; r++) {
            reduce_memnet_fill_params(net, r, &runs[r].params);
            runs[r].params.cache = cache;
            runs[r].params.tag = 7;
            runs[r].params.subchunk_bytes = c->sub;
            if (c->quant != pcclQuantNone) runs[r].params.quantization = qo;
            runs[r].count = c->count;
            runs[r].dtype = c->dt;
            runs[r].op = c->op;
            if (!staged) {
                runs[r].sendbuf = in[r];
                runs[r].recvbuf = plain_out[r];
                continue;
            }
            st[r] = (stager_t){in[r], dev_out[r], host[r], calloc(bytes, 1), calloc(bytes, 1), 0, 0, 0, -1,
                               net, r};
            REQUIRE(st[r].in_seen && st[r].out_seen);
            hooks[r] = (reduce_ring_stage_t){stage_in, stage_out, &st[r], 0};
            runs[r].params.stage = &hooks[r];
            runs[r].sendbuf = host[r];
            runs[r].recvbuf = host[r];
        }
        REQUIRE(run_peers(runs, n) == 0);
        for (uint32_t r = 0; r < n; r++) {
            CHECK(runs[r].rc == REDUCE_OK);
            if (!staged) continue;
            CHECK(memcmp(dev_out[r], plain_out[r], bytes) == 0);
            size_t once_in = 0, once_out = 0;
            for (size_t i = 0; i < bytes; i++) {
                once_in += st[r].in_seen[i] == 1;
                once_out += st[r].out_seen[i] == 1;
            }
            CHECK_EQ_U64(once_in, bytes);
            CHECK_EQ_U64(once_out, bytes);
            size_t start, len;
            reduce_ring_chunk(c->count, esz, n, (r + n - 1) % n, &start, &len);
            if (len > 0) CHECK_EQ_U64(st[r].first_in_off, start);
            free(st[r].in_seen);
            free(st[r].out_seen);
        }
        reduce_memnet_destroy(net);
    }
    for (uint32_t r = 0; r < n; r++) {
        free(in[r]);
        free(plain_out[r]);
        free(host[r]);
        free(dev_out[r]);
    }
}

/* A failing output hook (a CUDA copy error) ends that peer's ring with REDUCE_ESTAGE; its
 * neighbours see the dead link. */
static void test_failing_hook(void) {
    const size_t count = 4096;
    float *in[2], *host[2], *out[2];
    reduce_memnet_t *net = reduce_memnet_create(2, NULL);
    REQUIRE(net != NULL);
    peer_run_t runs[2];
    memset(runs, 0, sizeof runs);
    stager_t st[2];
    reduce_ring_stage_t hooks[2];
    for (uint32_t r = 0; r < 2; r++) {
        in[r] = calloc(count, sizeof(float));
        host[r] = calloc(count, sizeof(float));
        out[r] = calloc(count, sizeof(float));
        REQUIRE(in[r] && host[r] && out[r]);
        reduce_memnet_fill_params(net, r, &runs[r].params);
        runs[r].params.cache = cache;
        runs[r].params.subchunk_bytes = 1024;
        st[r] = (stager_t){(unsigned char *) in[r], (unsigned char *) out[r], (unsigned char *) host[r],
                           calloc(count * 4, 1), calloc(count * 4, 1), 0, 0, 0, r == 0 ? 0 : -1, net, r};
        hooks[r] = (reduce_ring_stage_t){stage_in, stage_out, &st[r], 0};
        runs[r].params.stage = &hooks[r];
        runs[r].sendbuf = runs[r].recvbuf = host[r];
        runs[r].count = count;
        runs[r].dtype = pcclFloat;
        runs[r].op = pcclSum;
    }
    REQUIRE(run_peers(runs, 2) == 0);
    CHECK(runs[0].rc == REDUCE_ESTAGE);
    CHECK(runs[1].rc == REDUCE_ELINK);
    for (uint32_t r = 0; r < 2; r++) {
        free(in[r]);
        free(host[r]);
        free(out[r]);
        free(st[r].in_seen);
        free(st[r].out_seen);
    }
    reduce_memnet_destroy(net);
}

int main(void) {
    cache = reduce_cache_create();
    REQUIRE(cache != NULL);
    const stage_case_t cases[] = {
        {2, 1, pcclFloat, pcclSum, 0, pcclQuantNone},
        {2, 100003, pcclFloat, pcclSum, 4096, pcclQuantNone},
        {3, 7, pcclInt32, pcclMax, 0, pcclQuantNone},
        {3, 65537, pcclFloat, pcclAvg, 1000, pcclQuantNone},
        {4, 300000, pcclUint8, pcclSum, 8192, pcclQuantNone},
        {5, 12345, pcclDouble, pcclProd, 4096, pcclQuantNone},
        {8, 1 << 20, pcclFloat, pcclSum, 0, pcclQuantNone},
        {2, 50000, pcclFloat, pcclSum, 4096, pcclQuantMinMax},
        {4, 99999, pcclFloat, pcclAvg, 8192, pcclQuantMinMax},
        {3, 4097, pcclFloat, pcclSum, 1024, pcclQuantZeroPointScale},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    test_failing_hook();
    reduce_cache_destroy(cache);
    return check_exit();
}
