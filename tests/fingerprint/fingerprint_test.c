/* The determinism fingerprint without a GPU: the CPU reference (quick input set) is stable
 * across runs and thread counts; comparison names exactly the functions that differ (and skips
 * what a CPU-only fingerprint cannot have); the text form round-trips and malformed text is
 * refused; the C2M_FINGERPRINT packet round-trips and out-of-range lists and names are refused;
 * pcclGetDeterminismFingerprint checks its arguments and, without a GPU, gives only the CPU
 * reference. */
#include <string.h>

#include "ccoip/wire/ccoip_packets.h"
#include "ccoip/wire/ccoip_wire.h"
#include "fingerprint/fingerprint.h"
#include "pccl.h"
#include "tests/common/check.h"

static pcclDeterminismFingerprint_t a, b, c;

static void test_cpu_reference(void) {
    REQUIRE(fp_cpu_fingerprint(&a, PCCL_FINGERPRINT_QUICK, 1) == pcclSuccess);
    REQUIRE(fp_cpu_fingerprint(&b, PCCL_FINGERPRINT_QUICK, 3) == pcclSuccess);
    CHECK_EQ_U64(a.count, 8); /* the IEEE-exact functions */
    CHECK(strcmp(a.device, "cpu") == 0);
    CHECK_EQ_U64(a.flags, PCCL_FINGERPRINT_QUICK | PCCL_FINGERPRINT_CPU);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    for (uint32_t i = 0; i < a.count; i++) CHECK(a.entries[i].hash != 0);
    char why[256];
    CHECK(fp_compare(&a, &b, why, sizeof why) == 0);
    CHECK(why[0] == 0);
}

static void test_compare(void) {
    char why[256];
    c = a;
    c.entries[2].hash ^= 1; /* f32_to_f16 */
    c.entries[7].hash ^= 1; /* tree_sum1024 */
    CHECK(fp_compare(&a, &c, why, sizeof why) == 2);
    CHECK(strcmp(why, "f32_to_f16, tree_sum1024") == 0);
    /* A GPU fingerprint (more functions) against the CPU reference: only shared ones count. */
    pcclDeterminismFingerprint_t g;
    fp_init(&g, PCCL_FINGERPRINT_QUICK);
    CHECK_EQ_U64(g.count, 14);
    for (uint32_t i = 0; i < g.count; i++) {
        g.entries[i].hash = 0x1234;
        for (uint32_t k = 0; k < a.count; k++)
            if (strcmp(g.entries[i].name, a.entries[k].name) == 0) g.entries[i].hash = a.entries[k].hash;
    }
    CHECK(fp_compare(&g, &a, why, sizeof why) == 0);
    CHECK(fp_compare(&a, &g, why, sizeof why) == 0);
    g.entries[0].hash = 99; /* expf: the CPU has none, so no comparison sees it */
    CHECK(fp_compare(&g, &a, why, sizeof why) == 0);
    pcclDeterminismFingerprint_t g2 = g;
    g2.entries[0].hash = 98;
    CHECK(fp_compare(&g, &g2, why, sizeof why) == 1);
    CHECK(strcmp(why, "expf") == 0);
    g2.count--; /* tree_sum1024 missing */
    g2.entries[0].hash = 99;
    CHECK(fp_compare(&g, &g2, why, sizeof why) == 1);
    CHECK(strcmp(why, "tree_sum1024 (missing)") == 0);
    pcclDeterminismFingerprint_t full = g;
    full.flags = 0;
    CHECK(fp_compare(&g, &full, why, sizeof why) == -1); /* quick against full: not comparable */
}

static void test_text(void) {
    char text[4096];
    int n = fp_format(&a, text, sizeof text);
    CHECK(n > 0 && (size_t) n < sizeof text);
    pcclDeterminismFingerprint_t back;
    CHECK(fp_parse(text, &back));
    CHECK(memcmp(&a, &back, sizeof a) == 0);
    CHECK(!fp_parse("", &back));
    CHECK(!fp_parse("device x\nflags 1\n", &back));             /* no hashes */
    CHECK(!fp_parse("hash expf zz\n", &back));                    /* not hex */
    CHECK(!fp_parse("hash expf 12\nbogus 1\n", &back));           /* unknown key */
    CHECK(!fp_parse("hash a_name_longer_than_twenty_three 12\n", &back));
    char big[400];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK(!fp_parse(big, &back)); /* an overlong line */
}

static void test_packet(void) {
    ccoip_fp_entry_t e[CCOIP_MAX_FP_ENTRIES + 1];
    char names[CCOIP_MAX_FP_ENTRIES + 1][24];
    for (int i = 0; i <= CCOIP_MAX_FP_ENTRIES; i++) {
        snprintf(names[i], sizeof names[i], "fn%d", i);
        e[i] = (ccoip_fp_entry_t){names[i], 0x0123456789abcdefULL + (uint64_t) i};
    }
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_FINGERPRINT;
    p.u.fingerprint = (ccoip_fingerprint_t){90, 13000, 13000, PCCL_FINGERPRINT_QUICK, "NVIDIA H100", 3, e};
    ccoip_writer_t w;
    ccoip_writer_init(&w, 1 << 20);
    REQUIRE(ccoip_packet_encode(&p, &w) == CCOIP_OK);
    ccoip_packet_t q;
    REQUIRE(ccoip_packet_decode(CCOIP_PKT_C2M_FINGERPRINT, w.buf + 6, w.len - 6, &q) == CCOIP_OK);
    CHECK_EQ_U64(q.u.fingerprint.compute_capability, 90);
    CHECK_EQ_U64(q.u.fingerprint.count, 3);
    CHECK(strcmp(q.u.fingerprint.device, "NVIDIA H100") == 0);
    CHECK(strcmp(q.u.fingerprint.entries[2].name, "fn2") == 0);
    CHECK_EQ_U64(q.u.fingerprint.entries[2].hash, 0x0123456789abcdefULL + 2);
    ccoip_packet_free(&q);
    /* Truncated at every length: refused, nothing leaked (ASan). */
    for (size_t n = 0; n + 6 < w.len; n++) CHECK(ccoip_packet_decode(CCOIP_PKT_C2M_FINGERPRINT, w.buf + 6, n, &q) != CCOIP_OK);
    /* Over the caps: 33 entries, a 24-byte name, flags out of range. */
    ccoip_writer_reset(&w);
    p.u.fingerprint.count = CCOIP_MAX_FP_ENTRIES + 1;
    if (ccoip_packet_encode(&p, &w) == CCOIP_OK)
        CHECK(ccoip_packet_decode(CCOIP_PKT_C2M_FINGERPRINT, w.buf + 6, w.len - 6, &q) != CCOIP_OK);
    char longname[] = "a_name_of_twentyfour_ch_";
    p.u.fingerprint.count = 1;
    e[0].name = longname;
    ccoip_writer_reset(&w);
    if (ccoip_packet_encode(&p, &w) == CCOIP_OK)
        CHECK(ccoip_packet_decode(CCOIP_PKT_C2M_FINGERPRINT, w.buf + 6, w.len - 6, &q) != CCOIP_OK);
    e[0].name = names[0];
    p.u.fingerprint.flags = 4;
    ccoip_writer_reset(&w);
    if (ccoip_packet_encode(&p, &w) == CCOIP_OK)
        CHECK(ccoip_packet_decode(CCOIP_PKT_C2M_FINGERPRINT, w.buf + 6, w.len - 6, &q) != CCOIP_OK);
    ccoip_writer_free(&w);
}

static void test_api(void) {
    pcclDeterminismFingerprint_t fp;
    CHECK(pcclGetDeterminismFingerprint(0, NULL) == pcclInvalidArgument);
    CHECK(pcclGetDeterminismFingerprint(8, &fp) == pcclInvalidArgument);
    CHECK(pcclGetDeterminismFingerprint(PCCL_FINGERPRINT_QUICK | PCCL_FINGERPRINT_CPU, &fp) == pcclSuccess);
    CHECK(memcmp(&fp, &a, sizeof fp) == 0);
    pcclBuildInfo_t info;
    pcclGetBuildInfo(&info);
    if (!info.has_cuda_support) CHECK(pcclGetDeterminismFingerprint(PCCL_FINGERPRINT_QUICK, &fp) == pcclInvalidUsage);
}

int main(void) {
    test_cpu_reference();
    test_compare();
    test_text();
    test_packet();
    test_api();
    return check_exit();
}
