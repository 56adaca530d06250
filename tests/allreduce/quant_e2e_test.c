/* quant_e2e_test: quantized all-reduces end to end (pcclQuantMinMax / pcclQuantZeroPointScale to
 * uint8 / uint16, float32 / float64 / float16 / bfloat16 sources, Sum / Avg / Max / Min and a
 * few Prod): 4 peers run 1,000 random all-reduces (NaN, Inf, all-equal, tiny and huge ranges,
 * 8 in flight at a time). Every peer checks every element against the exact reduction (class,
 * and reduce/README.md's error bound), every result byte is compared across the 4 peers (files),
 * invalid combinations give pcclInvalidArgument, and a float32 -> uint8 all-reduce sends about a
 * quarter of the bytes of the plain one (tx_bytes).
 * Usage: quant_e2e_test PCCL_MASTER ASYNC_PEER */
#include <unistd.h>

#include "tests/allreduce/async_driver.h"
#include "tests/common/check.h"

static bool same_file(const char *a, const char *b, long *size) {
    FILE *f = fopen(a, "rb"), *g = fopen(b, "rb");
    bool same = f != NULL && g != NULL;
    long n = 0;
    while (same) {
        int x = fgetc(f), y = fgetc(g);
        if (x != y) same = false;
        if (x == EOF || y == EOF) break;
        n++;
    }
    if (f) fclose(f);
    if (g) fclose(g);
    *size = n;
    return same;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    h_init(150);
    long t0 = ad_now_ms();
    const char *tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
    ad_t a;
    if (!ad_start(&a, argv[1], argv[2], 4, NULL, 2)) return 1;
    char path[AD_MAX][200], cmd[1024], line[256];
    for (int i = 0; i < a.n; i++) {
        snprintf(path[i], sizeof path[i], "%.150s/quant_e2e_%d_%d.bin", tmp, (int) getpid(), i);
        snprintf(cmd, sizeof cmd, "quant 7 1000 4 %.190s", path[i]);
        h_send(&a.peers[i], cmd);
    }
    unsigned long long txq = 0, txp = 0;
    for (int i = 0; i < a.n; i++) {
        int nfail = -1, nbad = -1, nclass = -1, nwrong = -1;
        CHECK(ad_read(&a.peers[i], "quant", line, sizeof line, 120000));
        CHECK(sscanf(line, "quant %d %d %d %d %llu %llu", &nfail, &nbad, &nclass, &nwrong, &txq, &txp) == 6);
        CHECK(nfail == 0 && nbad == 0 && nclass == 0 && nwrong == 0);
        if (nfail || nbad || nclass || nwrong) fprintf(stderr, "quant_e2e_test: peer %d: %s\n", i, line);
        /* uint8 codes for float32: 1/4 of the bytes plus 16 per frame. */
        CHECK(txp > 0 && txq * 100 < txp * 26 && txq * 100 > txp * 24);
    }
    long size = 0;
    for (int i = 1; i < a.n; i++) {
        CHECK(same_file(path[0], path[i], &size));
        remove(path[i]);
    }
    CHECK(size > 1000);
    remove(path[0]);
    printf("quant_e2e_test: 1000 quantized all-reduces on 4 peers, %ld result bytes identical; tx float32->uint8 %llu "
           "vs plain %llu bytes (%.3f)\n", size, txq, txp, txp ? (double) txq / (double) txp : 0.0);
    CHECK(ad_stop(&a) == 0);
    printf("quant_e2e_test: %d checks, %d failed, %ld ms\n", check_count, check_failures, ad_now_ms() - t0);
    return check_failures ? 1 : 0;
}
