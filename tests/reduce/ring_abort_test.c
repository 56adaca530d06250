/* Failures mid-ring: a peer dies at a chosen send (with and without the master's abort notice),
 * a peer stalls while its links stay up (only the polled abort flag can end the wait), and an
 * abort raised before the call. Every peer must return promptly, with an error unless its
 * result was already complete (and then correct), sendbuf untouched, no staging block left.
 * The same again with quantization on: a peer that completes holds the bits of a healthy
 * quantized run. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/common/check.h"
#include "tests/reduce/harness.h"
#include "tests/reduce/ref.h"

#define COUNT 20000
#define SUB 1024
/* Generous for sanitizers on two shared cores; a healthy return takes about a millisecond. */
#define PROMPT_S 2.0

static reduce_cache_t *cache;

/* Items one peer sends: both phases, every chunk but one each, SUB-byte pieces. */
static uint64_t sends_of(uint32_t n, uint32_t peer, uint64_t *rs_sends) {
    uint64_t total = 0, rs = 0;
    for (uint32_t t = 0; t < 2 * n - 2; t++) {
        uint32_t c = (peer + 2 * n - 1 - t) % n;
        size_t len = (COUNT / n + (c < COUNT % n ? 1 : 0)) * sizeof(float);
        uint64_t k = (len + SUB - 1) / SUB;
        total += k;
        if (t < n - 1) rs += k;
    }
    *rs_sends = rs;
    return total;
}

static void expected(float *out, float *const *in, uint32_t n) {
    for (uint32_t c = 0; c < n; c++) {
        size_t first = c * (COUNT / n) + (c < COUNT % n ? c : COUNT % n);
        size_t len = COUNT / n + (c < COUNT % n ? 1 : 0);
        for (size_t i = first; i < first + len; i++) {
            float acc = in[(c + 1) % n][i];
            for (uint32_t k = 2; k <= n; k++) acc += in[(c + k) % n][i];
            out[i] = acc;
        }
    }
}

typedef struct scenario {
    uint32_t n;
    int32_t die_peer;     /* -1: nobody dies */
    uint64_t die_at_send;
    int abort_on_death;
    int32_t stall_peer;   /* -1: nobody stalls; else raise the flags (no wake) after 100 ms */
    int abort_first;      /* flags raised before anyone starts */
    int quant;            /* 0: plain; 1: uint8 min-max; 2: uint16 zero-point/scale */
} scenario_t;

typedef struct delayed_abort {
    reduce_memnet_t *net;
    double at;
} delayed_abort_t;

static void *abort_later(void *arg) {
    delayed_abort_t *d = arg;
    usleep(100 * 1000);
    d->at = now_s();
    reduce_memnet_abort_all(d->net, 0);
    return NULL;
}

static pcclQuantizationOptions_t quant_of(int quant) {
    pcclQuantizationOptions_t q = { pcclUint8, pcclQuantNone };
    if (quant == 1) q = (pcclQuantizationOptions_t){ pcclUint8, pcclQuantMinMax };
    if (quant == 2) q = (pcclQuantizationOptions_t){ pcclUint16, pcclQuantZeroPointScale };
    return q;
}

/* What a healthy quantized ring gives for these inputs (lossy, but the same on every peer). */
static void expected_quantized(float *out, float *const *in, uint32_t n, int quant) {
    reduce_memnet_t *net = reduce_memnet_create(n, NULL);
    REQUIRE(net != NULL);
    peer_run_t runs[8];
    float *recv[8] = { 0 };
    memset(runs, 0, sizeof runs);
    for (uint32_t p = 0; p < n; p++) {
        recv[p] = malloc(COUNT * sizeof(float));
        REQUIRE(recv[p] != NULL);
        reduce_memnet_fill_params(net, p, &runs[p].params);
        runs[p].params.tag = 41;
        runs[p].params.cache = cache;
        runs[p].params.subchunk_bytes = SUB;
        runs[p].params.quantization = quant_of(quant);
        runs[p].sendbuf = in[p];
        runs[p].recvbuf = recv[p];
        runs[p].count = COUNT;
        runs[p].dtype = pcclFloat;
        runs[p].op = pcclSum;
    }
    REQUIRE(run_peers(runs, n) == 0);
    for (uint32_t p = 0; p < n; p++) {
        REQUIRE(runs[p].rc == REDUCE_OK);
        CHECK(memcmp(recv[p], recv[0], COUNT * sizeof(float)) == 0);
    }
    memcpy(out, recv[0], COUNT * sizeof(float));
    for (uint32_t p = 0; p < n; p++) free(recv[p]);
    reduce_memnet_destroy(net);
}

static void run_scenario(const scenario_t *s) {
    int before = check_failures;
    uint32_t n = s->n;
    reduce_memnet_opts_t opts = { 0, s->die_peer, s->die_at_send, s->abort_on_death };
    reduce_memnet_t *net = reduce_memnet_create(n, &opts);
    REQUIRE(net != NULL);
    float *send[8], *orig[8], *recv[8], *want = malloc(COUNT * sizeof(float));
    peer_run_t runs[8];
    memset(runs, 0, sizeof runs);
    REQUIRE(want != NULL);
    for (uint32_t p = 0; p < n; p++) {
        send[p] = malloc(COUNT * sizeof(float));
        orig[p] = malloc(COUNT * sizeof(float));
        recv[p] = malloc(COUNT * sizeof(float));
        REQUIRE(send[p] && orig[p] && recv[p]);
        for (size_t i = 0; i < COUNT; i++) send[p][i] = (float) ((ref_hash(p, i) % 2001)) / 64.0f - 15.0f;
        memcpy(orig[p], send[p], COUNT * sizeof(float));
        reduce_memnet_fill_params(net, p, &runs[p].params);
        runs[p].params.tag = 42;
        runs[p].params.cache = cache;
        runs[p].params.subchunk_bytes = SUB;
        runs[p].params.window = 4;
        runs[p].params.quantization = quant_of(s->quant);
        runs[p].sendbuf = send[p];
        runs[p].recvbuf = recv[p];
        runs[p].count = COUNT;
        runs[p].dtype = pcclFloat;
        runs[p].op = pcclSum;
        runs[p].stall = (int32_t) p == s->stall_peer;
    }
    if (s->quant) expected_quantized(want, orig, n, s->quant);
    else expected(want, orig, n);
    if (s->abort_first) reduce_memnet_abort_all(net, 0);

    delayed_abort_t d = { net, 0 };
    pthread_t th;
    if (s->stall_peer >= 0) REQUIRE(pthread_create(&th, NULL, abort_later, &d) == 0);
    REQUIRE(run_peers(runs, n) == 0);
    if (s->stall_peer >= 0) pthread_join(th, NULL);

    /* When the failure happened: the dead peer returns at once; the delayed abort knows. */
    double t_fail = s->stall_peer >= 0 ? d.at : s->die_peer >= 0 ? runs[s->die_peer].t_end : 0;
    uint64_t rs_sends = 0;
    if (s->die_peer >= 0) sends_of(n, (uint32_t) s->die_peer, &rs_sends);
    int all_must_fail = s->stall_peer >= 0 || s->abort_first ||
                        (s->die_peer >= 0 && s->die_at_send < rs_sends);
    for (uint32_t p = 0; p < n; p++) {
        if (runs[p].stall) continue;
        int must_fail = all_must_fail || (int32_t) p == s->die_peer ||
                        (s->die_peer >= 0 && p == ((uint32_t) s->die_peer + 1) % n);
        if (must_fail) CHECK(runs[p].rc != REDUCE_OK);
        if (runs[p].rc == REDUCE_OK) {
            CHECK(memcmp(recv[p], want, COUNT * sizeof(float)) == 0);
        } else {
            CHECK(runs[p].rc == REDUCE_ELINK || runs[p].rc == REDUCE_EABORTED);
            if (s->stall_peer >= 0 || s->abort_first) CHECK_EQ_U64(runs[p].rc, REDUCE_EABORTED);
            double late = runs[p].t_end - (s->abort_first ? runs[p].t_start : t_fail);
            CHECK(late < PROMPT_S);
            if (late >= PROMPT_S) fprintf(stderr, "  peer %u returned %.3f s after the failure\n", p, late);
        }
        CHECK(memcmp(send[p], orig[p], COUNT * sizeof(float)) == 0);
        CHECK(runs[p].stats.tx_bytes <= 2 * COUNT * sizeof(float));
        if (s->abort_first) CHECK_EQ_U64(runs[p].stats.tx_bytes + runs[p].stats.rx_bytes, 0);
    }
    reduce_cache_stats_t st;
    reduce_cache_get_stats(cache, &st);
    CHECK_EQ_U64(st.blocks_in_use, 0);
    if (check_failures != before)
        fprintf(stderr, "  scenario: n=%u die_peer=%d die_at_send=%llu abort_on_death=%d stall=%d first=%d quant=%d\n",
                n, s->die_peer, (unsigned long long) s->die_at_send, s->abort_on_death,
                s->stall_peer, s->abort_first, s->quant);
    for (uint32_t p = 0; p < n; p++) {
        free(send[p]);
        free(orig[p]);
        free(recv[p]);
    }
    free(want);
    reduce_memnet_destroy(net);
}

int main(void) {
    cache = reduce_cache_create();
    REQUIRE(cache != NULL);
    static const uint32_t ns[] = { 2, 3, 5, 8 };
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++) {
        uint32_t n = ns[a];
        int32_t dying[] = { 0, (int32_t) (n / 2), (int32_t) n - 1 };
        for (int k = 0; k < 3; k++) {
            uint64_t rs;
            uint64_t total = sends_of(n, (uint32_t) dying[k], &rs);
            uint64_t at[] = { 0, 1, rs / 2, rs, rs + (total - rs) / 2, total - 1 };
            for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
                scenario_t s = { n, dying[k], at[i], 1, -1, 0, 0 };
                run_scenario(&s);
            }
        }
    }
    /* Two peers: the link failure alone must end both sides, no abort notice needed. */
    for (uint64_t at = 0; at < 40; at += 3) {
        scenario_t s = { 2, (int32_t) (at % 2), at, 0, -1, 0, 0 };
        run_scenario(&s);
    }
    /* A stalled peer with healthy links: only the polled flag gets the others out. */
    for (uint32_t n = 2; n <= 6; n += 2) {
        scenario_t s = { n, -1, 0, 0, (int32_t) (n - 1), 0, 0 };
        run_scenario(&s);
    }
    scenario_t first = { 4, -1, 0, 0, -1, 1, 0 };
    run_scenario(&first);
    /* Quantized: deaths across both phases, link failure alone, a stall, an early abort. */
    static const uint32_t qns[] = { 3, 5 };
    for (size_t a = 0; a < sizeof qns / sizeof qns[0]; a++) {
        uint32_t n = qns[a];
        int32_t dying[] = { 0, (int32_t) n - 1 };
        for (int k = 0; k < 2; k++) {
            uint64_t rs;
            uint64_t total = sends_of(n, (uint32_t) dying[k], &rs);
            uint64_t at[] = { 0, rs / 2, rs, rs + (total - rs) / 2, total - 1 };
            for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
                scenario_t s = { n, dying[k], at[i], 1, -1, 0, 1 + (int) (i % 2) };
                run_scenario(&s);
            }
        }
    }
    for (uint64_t at = 0; at < 40; at += 7) {
        scenario_t s = { 2, (int32_t) (at % 2), at, 0, -1, 0, 1 };
        run_scenario(&s);
    }
    scenario_t qstall = { 4, -1, 0, 0, 3, 0, 2 };
    run_scenario(&qstall);
    scenario_t qfirst = { 4, -1, 0, 0, -1, 1, 1 };
    run_scenario(&qfirst);
    reduce_cache_destroy(cache);
    return check_exit();
}
