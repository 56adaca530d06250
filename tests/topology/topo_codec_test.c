/* topo_codec_test: the packets of pcclOptimizeTopology (0x0130/0x0131, 0x0230, 0x0304): round
 * trips (canonical, every truncation rejected), ranges, caps, and counts larger than the bytes. */
#include <string.h>

#include "ccoip/wire/ccoip_packets.h"
#include "tests/common/check.h"

static ccoip_uuid_t uuid_of(uint8_t seed) {
    ccoip_uuid_t u;
    for (int i = 0; i < 16; i++) u.b[i] = (uint8_t) (seed + i);
    return u;
}

static void round_trip(const ccoip_packet_t *p, ccoip_packet_t *back) {
    ccoip_writer_t w, w2;
    ccoip_writer_init(&w, 1u << 24);
    ccoip_writer_init(&w2, 1u << 24);
    REQUIRE(ccoip_packet_encode(p, &w) == CCOIP_OK);
    uint16_t type;
    uint32_t len;
    REQUIRE(ccoip_frame_peek(w.buf, w.len, CCOIP_MAX_PAYLOAD, &type, &len) == CCOIP_OK);
    CHECK_EQ_U64(type, p->type);
    REQUIRE(ccoip_packet_decode(type, w.buf + CCOIP_HEADER_SIZE, len, back) == CCOIP_OK);
    REQUIRE(ccoip_packet_encode(back, &w2) == CCOIP_OK);
    CHECK(w.len == w2.len && memcmp(w.buf, w2.buf, w.len) == 0);
    for (uint32_t cut = 0; cut < len; cut++) {
        ccoip_packet_t tmp;
        CHECK(ccoip_packet_decode(type, w.buf + CCOIP_HEADER_SIZE, cut, &tmp) == CCOIP_ERR_TRUNCATED);
    }
    /* One trailing byte is an error. */
    uint8_t *more = malloc(len + 1);
    REQUIRE(more != NULL);
    memcpy(more, w.buf + CCOIP_HEADER_SIZE, len);
    more[len] = 0;
    ccoip_packet_t tmp;
    CHECK(ccoip_packet_decode(type, more, len + 1, &tmp) == CCOIP_ERR_INVALID);
    free(more);
    ccoip_writer_free(&w);
    ccoip_writer_free(&w2);
}

static ccoip_status_t decode_bytes(uint16_t type, const uint8_t *b, size_t n) {
    ccoip_packet_t p;
    ccoip_status_t st = ccoip_packet_decode(type, b, n, &p);
    if (st == CCOIP_OK) ccoip_packet_free(&p);
    return st;
}

static void put_u32(uint8_t *b, uint32_t v) {
    for (int i = 0; i < 4; i++) b[i] = (uint8_t) (v >> (24 - 8 * i));
}

int main(void) {
    ccoip_packet_t p, b;
    CHECK(ccoip_packet_name(CCOIP_PKT_C2M_OPTIMIZE_TOPOLOGY) != NULL);
    CHECK(ccoip_packet_name(CCOIP_PKT_C2M_BANDWIDTH_REPORT) != NULL);
    CHECK(ccoip_packet_name(CCOIP_PKT_M2C_BANDWIDTH_REQUEST) != NULL);
    CHECK(ccoip_packet_name(CCOIP_PKT_BENCH_DONE) != NULL);

    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_OPTIMIZE_TOPOLOGY;
    round_trip(&p, &b);
    ccoip_packet_free(&b);

    /* REQUEST: IPv4 and IPv6 targets, senders. */
    ccoip_bench_target_t t[2];
    memset(t, 0, sizeof t);
    t[0].uuid = uuid_of(1);
    t[0].addr.protocol = inetIPv4;
    t[0].addr.ipv4.data[0] = 10;
    t[0].addr.ipv4.data[3] = 7;
    t[0].bench_port = 48151;
    t[1].uuid = uuid_of(2);
    t[1].addr.protocol = inetIPv6;
    t[1].addr.ipv6.data[15] = 1;
    t[1].bench_port = 65535;
    t[1].how = CCOIP_BENCH_RELAYED; /* version 12: through the relay with the pair's token */
    t[1].token = uuid_of(11);
    ccoip_bench_sender_t s[3];
    memset(s, 0, sizeof s);
    s[0].uuid = uuid_of(3);
    s[1].uuid = uuid_of(4);
    s[2].uuid = uuid_of(5);
    s[1].how = CCOIP_BENCH_REVERSED; /* we dial it there */
    s[1].addr.protocol = inetIPv4;
    s[1].addr.ipv4.data[3] = 9;
    s[1].bench_port = 48152;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_M2C_BANDWIDTH_REQUEST;
    p.u.bench_request = (ccoip_bench_request_t){7, 3, 300, 2, t, 3, s, {.protocol = inetIPv4, .ipv4 = {{10, 0, 0, 5}}}, 48146};
    round_trip(&p, &b);
    CHECK(b.u.bench_request.targets[1].how == CCOIP_BENCH_RELAYED &&
          memcmp(b.u.bench_request.targets[1].token.b, t[1].token.b, 16) == 0);
    CHECK(b.u.bench_request.senders[1].how == CCOIP_BENCH_REVERSED && b.u.bench_request.senders[1].bench_port == 48152 &&
          b.u.bench_request.senders[1].addr.ipv4.data[3] == 9);
    CHECK(b.u.bench_request.relay_port == 48146 && b.u.bench_request.relay_addr.ipv4.data[3] == 5);
    CHECK(b.u.bench_request.session == 7 && b.u.bench_request.step == 3 && b.u.bench_request.duration_ms == 300);
    CHECK(b.u.bench_request.ntargets == 2 && b.u.bench_request.nsenders == 3);
    CHECK(memcmp(&b.u.bench_request.targets[0].uuid, &t[0].uuid, 16) == 0);
    CHECK(b.u.bench_request.targets[0].addr.ipv4.data[3] == 7 && b.u.bench_request.targets[0].bench_port == 48151);
    CHECK(b.u.bench_request.targets[1].addr.protocol == inetIPv6 && b.u.bench_request.targets[1].addr.ipv6.data[15] == 1);
    CHECK(memcmp(&b.u.bench_request.senders[2].uuid, &s[2].uuid, 16) == 0);
    ccoip_packet_free(&b);
    /* Empty lists. */
    p.u.bench_request = (ccoip_bench_request_t){1, 1, 1, 0, NULL, 0, NULL, {.protocol = inetIPv4}, 0};
    round_trip(&p, &b);
    ccoip_packet_free(&b);

    /* REPORT. */
    ccoip_bench_result_t r[2] = {{uuid_of(9), 1000000000ull}, {uuid_of(10), 0}};
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_BANDWIDTH_REPORT;
    p.u.bench_report = (ccoip_bench_report_t){7, 3, 2, r};
    round_trip(&p, &b);
    CHECK(b.u.bench_report.count == 2 && b.u.bench_report.results[0].bits_per_s == 1000000000ull &&
          b.u.bench_report.results[1].bits_per_s == 0);
    ccoip_packet_free(&b);

    /* BENCH_DONE. */
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_BENCH_DONE;
    p.u.bench_done = (ccoip_bench_done_t){123456789ull, 300000};
    round_trip(&p, &b);
    CHECK(b.u.bench_done.bytes == 123456789ull && b.u.bench_done.elapsed_us == 300000);
    ccoip_packet_free(&b);

    /* Malformed REQUEST: duration 0 and over the cap; a huge target count; a count larger than
     * the bytes; a bad address family; a bad `how`; the second list truncated after a good first
     * one. A target: uuid, family 4, ip, port, how, token = 40 bytes; a sender: uuid, how, family
     * 4, ip, port, token = 40 bytes; then the relay: family 4, ip, port = 7 bytes. */
    enum { T = 40, S = 40, RELAY = 7 };
    uint8_t q[8 + 4 + 4 + 4 + T + 4 + S + RELAY];
    memset(q, 0, sizeof q);
    put_u32(q + 12, 300);
    put_u32(q + 16, 1);
    q[20 + 16] = 4;
    put_u32(q + 20 + T, 1);
    q[24 + T + 17] = 4; /* the sender's family */
    q[24 + T + S] = 4;  /* the relay's */
    CHECK(decode_bytes(CCOIP_PKT_M2C_BANDWIDTH_REQUEST, q, sizeof q) == CCOIP_OK);
    q[20 + 23] = 3; /* the target's how: none such */
    CHECK(decode_bytes(CCOIP_PKT_M2C_BANDWIDTH_REQUEST, q, sizeof q) == CCOIP_ERR_INVALID);
    q[20 + 23] = CCOIP_BENCH_RELAYED;
    CHECK(decode_bytes(CCOIP_PKT_M2C_BANDWIDTH_REQUEST, q, sizeof q) == CCOIP_OK);
    put_u32(q + 12, 0);
    CHECK(decode_bytes(CCOIP_PKT_M2C_BANDWIDTH_REQUEST, q, sizeof q) == CCOIP_ERR_INVALID);
    put_u32(q + 12, CCOIP_MAX_BENCH_MS + 1);
    CHECK(decode_bytes(CCOIP_PKT_M2C_BANDWIDTH_REQUEST, q, sizeof q) == CCOIP_ERR_INVALID);
    put_u32(q + 12, CCOIP_MAX_BENCH_MS);
    CHECK(decode_bytes(CCOIP_PKT_M2C_BANDWIDTH_REQUEST, q, sizeof q) == CCOIP_OK);
    q[20 + 16] = 5;
    CHECK(decode_bytes(CCOIP_PKT_M2C_BANDWIDTH_REQUEST, q, sizeof q) == CCOIP_ERR_INVALID);
    q[20 + 16] = 4;
    put_u32(q + 16, 0xffffffffu);
    CHECK(decode_bytes(CCOIP_PKT_M2C_BANDWIDTH_REQUEST, q, sizeof q) == CCOIP_ERR_TOO_LARGE);
    put_u32(q + 16, CCOIP_MAX_PEER_ENTRIES);
    CHECK(decode_bytes(CCOIP_PKT_M2C_BANDWIDTH_REQUEST, q, sizeof q) == CCOIP_ERR_TRUNCATED);
    put_u32(q + 16, 1);
    put_u32(q + 20 + T, 2); /* two senders, one present: the first list must be freed (ASan) */
    CHECK(decode_bytes(CCOIP_PKT_M2C_BANDWIDTH_REQUEST, q, sizeof q) == CCOIP_ERR_TRUNCATED);

    /* Malformed REPORT: count over the cap, count over the bytes. */
    uint8_t rep[8 + 4 + 4 + 24];
    memset(rep, 0, sizeof rep);
    put_u32(rep + 12, 1);
    CHECK(decode_bytes(CCOIP_PKT_C2M_BANDWIDTH_REPORT, rep, sizeof rep) == CCOIP_OK);
    put_u32(rep + 12, CCOIP_MAX_PEER_ENTRIES + 1);
    CHECK(decode_bytes(CCOIP_PKT_C2M_BANDWIDTH_REPORT, rep, sizeof rep) == CCOIP_ERR_TOO_LARGE);
    put_u32(rep + 12, 2);
    CHECK(decode_bytes(CCOIP_PKT_C2M_BANDWIDTH_REPORT, rep, sizeof rep) == CCOIP_ERR_TRUNCATED);

    /* OPTIMIZE carries nothing; BENCH_DONE is exactly 16 bytes. */
    CHECK(decode_bytes(CCOIP_PKT_C2M_OPTIMIZE_TOPOLOGY, rep, 1) == CCOIP_ERR_INVALID);
    CHECK(decode_bytes(CCOIP_PKT_BENCH_DONE, rep, 15) == CCOIP_ERR_TRUNCATED);
    CHECK(decode_bytes(CCOIP_PKT_BENCH_DONE, rep, 17) == CCOIP_ERR_INVALID);

    /* Encoding refuses a list without its array or over the cap. */
    ccoip_writer_t w;
    ccoip_writer_init(&w, 1u << 20);
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_M2C_BANDWIDTH_REQUEST;
    p.u.bench_request.duration_ms = 1;
    p.u.bench_request.ntargets = 2;
    CHECK(ccoip_packet_encode(&p, &w) == CCOIP_ERR_TOO_LARGE);
    ccoip_writer_free(&w);
    return check_exit();
}
