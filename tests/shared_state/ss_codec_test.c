/* The shared-state packets: round trips (every truncation is a clean error), names at their
 * limits, and malformed input (lengths, counts, NUL bytes, enum ranges) refused. */
#include <string.h>

#include "ccoip/wire/ccoip_packets.h"
#include "tests/common/check.h"

static void round_trip(const ccoip_packet_t *p) {
    ccoip_writer_t w, w2;
    ccoip_writer_init(&w, 1u << 24);
    ccoip_writer_init(&w2, 1u << 24);
    REQUIRE(ccoip_packet_encode(p, &w) == CCOIP_OK);
    uint16_t type;
    uint32_t len;
    REQUIRE(ccoip_frame_peek(w.buf, w.len, CCOIP_MAX_PAYLOAD, &type, &len) == CCOIP_OK);
    ccoip_packet_t back;
    REQUIRE(ccoip_packet_decode(type, w.buf + CCOIP_HEADER_SIZE, len, &back) == CCOIP_OK);
    REQUIRE(ccoip_packet_encode(&back, &w2) == CCOIP_OK);
    CHECK(w.len == w2.len && memcmp(w.buf, w2.buf, w.len) == 0);
    ccoip_packet_free(&back);
    for (uint32_t cut = 0; cut < len; cut++) {
        ccoip_packet_t tmp;
        CHECK(ccoip_packet_decode(type, w.buf + CCOIP_HEADER_SIZE, cut, &tmp) == CCOIP_ERR_TRUNCATED);
    }
    ccoip_writer_free(&w);
    ccoip_writer_free(&w2);
}

static ccoip_status_t decode(uint16_t type, const uint8_t *b, size_t n) {
    ccoip_packet_t p;
    ccoip_status_t st = ccoip_packet_decode(type, b, n, &p);
    if (st == CCOIP_OK) ccoip_packet_free(&p);
    return st;
}

static void test_round_trips(void) {
    static char longest[CCOIP_MAX_SS_NAME + 1];
    memset(longest, 'x', CCOIP_MAX_SS_NAME);
    ccoip_ss_tensor_t t[3] = {{"weights", 0x1122334455667788ull, CCOIP_HASH_XXH3, 10, 1000, 0},
                              {longest, 1, CCOIP_HASH_SIMPLE, 9, 0, 1},
                              {"b", ~0ull, 0, 0, ~0ull, 0}};
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_SHARED_STATE_SYNC;
    p.u.ss_sync = (ccoip_ss_sync_t){42, 2, 3, t};
    round_trip(&p);
    p.u.ss_sync.count = 0;
    p.u.ss_sync.tensors = NULL;
    round_trip(&p);

    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_SHARED_STATE_DONE;
    p.u.ss_done.ok = 1;
    round_trip(&p);

    ccoip_ss_source_t so[2];
    memset(so, 0, sizeof so);
    so[0].addr.protocol = inetIPv4;
    so[0].addr.ipv4.data[0] = 127;
    so[0].ss_port = 48150;
    so[1].addr.protocol = inetIPv6;
    so[1].addr.ipv6.data[15] = 1;
    so[1].uuid.b[3] = 9;
    ccoip_ss_src_t both[2] = {{0}, {1}}, second[1] = {{1}};
    ccoip_ss_fetch_t f[2];
    memset(f, 0, sizeof f);
    f[0].name = "weights";
    f[0].hash = 7;
    f[0].nsrc = 2;
    f[0].src = both;
    f[1].name = "b";
    f[1].hash_kind = 1;
    f[1].nsrc = 1;
    f[1].src = second;
    /* Version 12: how each fetch connection is made, with the address to dial back or the token
     * at the relay, and the relay. */
    so[1].how = CCOIP_SS_RELAYED;
    memset(so[1].token.b, 0x5a, 16);
    ccoip_ss_client_t cl[2];
    memset(cl, 0, sizeof cl);
    memset(cl[0].uuid.b, 7, 16);
    cl[0].how = CCOIP_SS_REVERSED;
    cl[0].addr.protocol = inetIPv4;
    cl[0].addr.ipv4.data[0] = 10;
    cl[0].ss_port = 48151;
    memset(cl[1].uuid.b, 8, 16);
    cl[1].how = CCOIP_SS_RELAYED;
    memset(cl[1].token.b, 0xa5, 16);
    ccoip_inet_address_t relay;
    memset(&relay, 0, sizeof relay);
    relay.protocol = inetIPv4;
    relay.ipv4.data[3] = 2;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_M2C_SHARED_STATE_RESULT;
    p.u.ss_result = (ccoip_ss_result_t){0, 5, 0, "", 2, f, 2, cl, 2, so, relay, 48146};
    round_trip(&p);
    p.u.ss_result = (ccoip_ss_result_t){3, 5, 6, "t4", 0, NULL, 0, NULL, 0, NULL, relay, 0};
    round_trip(&p);

    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_M2C_SHARED_STATE_DONE;
    round_trip(&p);

    ccoip_ss_range_t ranges[2] = {{"a", 0, 4}, {"bb", 1ull << 33, 8u << 20}};
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_SS_REQUEST;
    p.u.ss_request = (ccoip_ss_request_t){2, ranges};
    round_trip(&p);
    p.u.ss_request = (ccoip_ss_request_t){0, NULL}; /* the receiver is through */
    round_trip(&p);

    ccoip_ss_item_t items[2] = {{"a", 4}, {"bb", 1ull << 40}};
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_SS_HEADER;
    p.u.ss_header = (ccoip_ss_header_t){0, 2, items};
    round_trip(&p);
}

static void test_encode_limits(void) {
    static char too_long[CCOIP_MAX_SS_NAME + 2];
    memset(too_long, 'y', CCOIP_MAX_SS_NAME + 1);
    ccoip_ss_range_t names[1] = {{too_long, 0, 1}};
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_SS_REQUEST;
    p.u.ss_request = (ccoip_ss_request_t){1, names};
    ccoip_writer_t w;
    ccoip_writer_init(&w, 1u << 20);
    CHECK(ccoip_packet_encode(&p, &w) == CCOIP_ERR_TOO_LARGE);
    names[0].name = ""; /* tensor names are never empty */
    CHECK(ccoip_packet_encode(&p, &w) == CCOIP_ERR_TOO_LARGE);
    names[0].name = NULL;
    CHECK(ccoip_packet_encode(&p, &w) == CCOIP_ERR_TOO_LARGE);
    CHECK_EQ_U64(w.len, 0);
    ccoip_writer_free(&w);
}

static void test_malformed(void) {
    /* SS_REQUEST: count 1, name length 3 "a\0b" (then offset and length): a NUL inside a name. */
#define Z16 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 /* offset 0, length 0 */
    uint8_t req[] = {0, 0, 0, 1, 0, 3, 'a', 0, 'b', Z16};
    CHECK(decode(CCOIP_PKT_SS_REQUEST, req, sizeof req) == CCOIP_ERR_INVALID);
    req[7] = 'x';
    CHECK(decode(CCOIP_PKT_SS_REQUEST, req, sizeof req) == CCOIP_OK);
    CHECK(decode(CCOIP_PKT_SS_REQUEST, req, sizeof req - 1) == CCOIP_ERR_TRUNCATED); /* the length cut */
    /* Length 0 (names are 1..1024 bytes), and a length over the cap. */
    uint8_t empty[] = {0, 0, 0, 1, 0, 0, 'z', Z16};
    CHECK(decode(CCOIP_PKT_SS_REQUEST, empty, sizeof empty) == CCOIP_ERR_INVALID);
    uint8_t big[] = {0, 0, 0, 1, 0x04, 0x01, 'a', Z16};
    CHECK(decode(CCOIP_PKT_SS_REQUEST, big, sizeof big) == CCOIP_ERR_TOO_LARGE);
    /* A length longer than the bytes left; a count over the cap (256 ranges); a count over the
     * bytes left. */
    uint8_t trunc[] = {0, 0, 0, 1, 0, 30, 'a', Z16};
    CHECK(decode(CCOIP_PKT_SS_REQUEST, trunc, sizeof trunc) == CCOIP_ERR_TRUNCATED);
    uint8_t many[] = {0, 0, 1, 1};
    CHECK(decode(CCOIP_PKT_SS_REQUEST, many, sizeof many) == CCOIP_ERR_TOO_LARGE);
    uint8_t few[] = {0, 0, 1, 0, 0, 1, 'a', Z16};
    CHECK(decode(CCOIP_PKT_SS_REQUEST, few, sizeof few) == CCOIP_ERR_TRUNCATED);
    /* A second element that fails after the first decoded: nothing leaks (ASan). */
    uint8_t second[] = {0, 0, 0, 2, 0, 1, 'a', Z16, 0, 2, 'b', 0, Z16};
    CHECK(decode(CCOIP_PKT_SS_REQUEST, second, sizeof second) == CCOIP_ERR_INVALID);
    /* RESULT with one fetch that names 9 distributors (at most 8), and a sources list of 65 (at
     * most 64). */
    uint8_t nine[] = {0, Z16, 0, 0, /* status, revision, expected, detail */ 0, 0, 0, 1, /* fetches */
                      0, 1, 'w', 0, 0, 0, 0, 0, 0, 0, 0, 0, /* name, kind, hash */ 0, 0, 0, 9,
                      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 9 indexes */
                      0, 0, 0, 0, /* serve */ 0, 0, 0, 0, /* sources */ 4, 0, 0, 0, 0, 0, 0 /* relay */};
    CHECK(decode(CCOIP_PKT_M2C_SHARED_STATE_RESULT, nine, sizeof nine) == CCOIP_ERR_TOO_LARGE);
    nine[38] = 8; /* 8 indexes: 2 bytes are left over */
    CHECK(decode(CCOIP_PKT_M2C_SHARED_STATE_RESULT, nine, sizeof nine) == CCOIP_ERR_INVALID);
    memmove(nine + 39 + 16, nine + 39 + 18, sizeof nine - 39 - 18); /* without the 9th index */
    CHECK(decode(CCOIP_PKT_M2C_SHARED_STATE_RESULT, nine, sizeof nine - 2) == CCOIP_OK);
    uint8_t srcs[] = {0, Z16, 0, 0, 0, 0, 0, 0, /* no fetches */ 0, 0, 0, 0, 0, 0, 0, 65};
    CHECK(decode(CCOIP_PKT_M2C_SHARED_STATE_RESULT, srcs, sizeof srcs) == CCOIP_ERR_TOO_LARGE);
    /* SYNC: strategy 3, hash kind 2, dtype 12, allow_inequality 2 are out of range. */
    uint8_t sync[] = {0, 0, 0, 0, 0, 0, 0, 1, /* revision */ 0, /* strategy */ 0, 0, 0, 1, /* count */
                      0, 1, 'w', /* name */ 0, 0, 0, 0, 0, 0, 0, 9, /* hash */ 0, /* kind */ 10, /* dtype */
                      0, 0, 0, 0, 0, 0, 0, 4, /* count */ 0 /* allow */};
    CHECK(decode(CCOIP_PKT_C2M_SHARED_STATE_SYNC, sync, sizeof sync) == CCOIP_OK);
    size_t fields[4] = {8, 24, 25, 34};
    uint8_t bad[4] = {3, 2, 12, 2};
    for (int i = 0; i < 4; i++) {
        uint8_t keep = sync[fields[i]];
        sync[fields[i]] = bad[i];
        CHECK(decode(CCOIP_PKT_C2M_SHARED_STATE_SYNC, sync, sizeof sync) == CCOIP_ERR_INVALID);
        sync[fields[i]] = keep;
    }
    uint8_t trailing[sizeof sync + 1];
    memcpy(trailing, sync, sizeof sync);
    trailing[sizeof sync] = 0;
    CHECK(decode(CCOIP_PKT_C2M_SHARED_STATE_SYNC, trailing, sizeof trailing) == CCOIP_ERR_INVALID);
    /* RESULT: status 9; DONE: ok 2; HEADER: status 3. */
    uint8_t res[38] = {CCOIP_SS_MIXED + 1}; /* status, revision, expected, empty detail, no fetches, clients,
                                               sources, relay (IPv4, port) */
    res[31] = 4;
    CHECK(decode(CCOIP_PKT_M2C_SHARED_STATE_RESULT, res, sizeof res) == CCOIP_ERR_INVALID);
    res[0] = CCOIP_SS_MIXED;
    CHECK(decode(CCOIP_PKT_M2C_SHARED_STATE_RESULT, res, sizeof res) == CCOIP_OK);
    res[0] = 0;
    CHECK(decode(CCOIP_PKT_M2C_SHARED_STATE_RESULT, res, sizeof res) == CCOIP_OK);
    CHECK(decode(CCOIP_PKT_C2M_SHARED_STATE_ABORT, res, 0) == CCOIP_OK);
    CHECK(decode(CCOIP_PKT_C2M_SHARED_STATE_ABORT, res, 1) == CCOIP_ERR_INVALID);
    uint8_t done[] = {2};
    CHECK(decode(CCOIP_PKT_C2M_SHARED_STATE_DONE, done, 1) == CCOIP_ERR_INVALID);
    uint8_t hdr[] = {3, 0, 0, 0, 0};
    CHECK(decode(CCOIP_PKT_SS_HEADER, hdr, sizeof hdr) == CCOIP_ERR_INVALID);
}

int main(void) {
    test_round_trips();
    test_encode_limits();
    test_malformed();
    return check_exit();
}
