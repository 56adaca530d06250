/* The codec: round trips of every packet type and every malformed-input case we can name. */
#include <string.h>

#include "ccoip/wire/ccoip_packets.h"
#include "tests/common/check.h"

static ccoip_uuid_t uuid_of(uint8_t seed) {
    ccoip_uuid_t u;
    for (int i = 0; i < 16; i++) u.b[i] = (uint8_t) (seed + i);
    return u;
}

/* Encodes p, decodes the frame again, re-encodes and checks the bytes are identical. */
static void round_trip(const ccoip_packet_t *p, ccoip_packet_t *back) {
    ccoip_writer_t w, w2;
    ccoip_writer_init(&w, 1u << 24);
    ccoip_writer_init(&w2, 1u << 24);
    REQUIRE(ccoip_packet_encode(p, &w) == CCOIP_OK);
    uint16_t type;
    uint32_t len;
    REQUIRE(ccoip_frame_peek(w.buf, w.len, CCOIP_MAX_PAYLOAD, &type, &len) == CCOIP_OK);
    CHECK_EQ_U64(type, p->type);
    CHECK_EQ_U64(len + CCOIP_HEADER_SIZE, w.len);
    REQUIRE(ccoip_packet_decode(type, w.buf + CCOIP_HEADER_SIZE, len, back) == CCOIP_OK);
    REQUIRE(ccoip_packet_encode(back, &w2) == CCOIP_OK);
    CHECK(w.len == w2.len && memcmp(w.buf, w2.buf, w.len) == 0);
    /* Every strict prefix of the payload is a clean truncation error. */
    for (uint32_t cut = 0; cut < len; cut++) {
        ccoip_packet_t tmp;
        ccoip_status_t st = ccoip_packet_decode(type, w.buf + CCOIP_HEADER_SIZE, cut, &tmp);
        CHECK(st == CCOIP_ERR_TRUNCATED);
    }
    ccoip_writer_free(&w);
    ccoip_writer_free(&w2);
}

static ccoip_status_t decode_bytes(uint16_t type, const uint8_t *b, size_t n) {
    ccoip_packet_t p;
    ccoip_status_t st = ccoip_packet_decode(type, b, n, &p);
    if (st == CCOIP_OK) ccoip_packet_free(&p);
    return st;
}

static void test_reader_writer(void) {
    uint8_t buf[3] = {1, 2, 3};
    ccoip_reader_t r;
    ccoip_reader_init(&r, buf, 3);
    uint16_t v16;
    uint32_t v32;
    CHECK(ccoip_read_u16(&r, &v16) && v16 == 0x0102);
    CHECK(!ccoip_read_u32(&r, &v32));
    uint8_t v8;
    CHECK(!ccoip_read_u8(&r, &v8)); /* failure latches */
    CHECK_EQ_U64(ccoip_reader_left(&r), 0);

    ccoip_writer_t w;
    ccoip_writer_init(&w, 10);
    CHECK(ccoip_write_u64(&w, 0x0102030405060708ull));
    CHECK(!ccoip_write_u32(&w, 1)); /* over the cap */
    CHECK(w.failed);
    CHECK(w.buf[0] == 1 && w.buf[7] == 8);
    ccoip_writer_free(&w);
}

static void test_frame_peek(void) {
    uint8_t h[6] = {0, 0, 0, 5, 0x01, 0x02};
    uint16_t t;
    uint32_t n;
    CHECK(ccoip_frame_peek(h, 5, CCOIP_MAX_PAYLOAD, &t, &n) == CCOIP_ERR_TRUNCATED);
    CHECK(ccoip_frame_peek(h, 6, CCOIP_MAX_PAYLOAD, &t, &n) == CCOIP_OK && t == 0x0102 && n == 5);
    uint8_t big[6] = {0xff, 0xff, 0xff, 0xff, 0, 1}; /* 4 GiB */
    CHECK(ccoip_frame_peek(big, 6, CCOIP_MAX_PAYLOAD, &t, &n) == CCOIP_ERR_TOO_LARGE);
    uint8_t over[6] = {0, 0, 1, 1, 0, 1};
    CHECK(ccoip_frame_peek(over, 6, CCOIP_MAX_HANDSHAKE_PAYLOAD, &t, &n) == CCOIP_ERR_TOO_LARGE);
}

static void test_round_trips(void) {
    ccoip_packet_t p, b;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_HELLO;
    p.u.hello = (ccoip_hello_t){CCOIP_MAGIC, CCOIP_PROTOCOL_VERSION, CCOIP_ROLE_P2P, uuid_of(7), 1, {9}};
    round_trip(&p, &b);
    CHECK(b.u.hello.magic == CCOIP_MAGIC && b.u.hello.role == CCOIP_ROLE_P2P && b.u.hello.uuid.b[15] == 22);
    CHECK(b.u.hello.flags == 1 && b.u.hello.nonce[0] == 9 && b.u.hello.nonce[31] == 0);

    p.type = CCOIP_PKT_HELLO_ACK;
    p.u.hello_ack = (ccoip_hello_ack_t){CCOIP_MAGIC, 9, CCOIP_HELLO_BAD_VERSION, uuid_of(1), 0, {0}, {0}};
    round_trip(&p, &b);
    CHECK(b.u.hello_ack.version == 9 && b.u.hello_ack.status == CCOIP_HELLO_BAD_VERSION);
    /* An old version's ack has no tail; a version 2 ack carries flags, nonce and MAC. */
    p.u.hello_ack.version = 1;
    p.u.hello_ack.flags = 1;
    round_trip(&p, &b);
    CHECK(b.u.hello_ack.version == 1 && b.u.hello_ack.flags == 0);
    p.u.hello_ack.version = CCOIP_PROTOCOL_VERSION;
    p.u.hello_ack.status = CCOIP_HELLO_SECRET;
    memset(p.u.hello_ack.nonce, 0x5a, sizeof p.u.hello_ack.nonce);
    memset(p.u.hello_ack.mac, 0xa5, sizeof p.u.hello_ack.mac);
    round_trip(&p, &b);
    CHECK(b.u.hello_ack.flags == 1 && b.u.hello_ack.status == CCOIP_HELLO_SECRET &&
          memcmp(b.u.hello_ack.nonce, p.u.hello_ack.nonce, 32) == 0 && memcmp(b.u.hello_ack.mac, p.u.hello_ack.mac, 32) == 0);

    p.type = CCOIP_PKT_AUTH;
    p.u.auth.ok = 1;
    memset(p.u.auth.mac, 0x3c, sizeof p.u.auth.mac);
    round_trip(&p, &b);
    CHECK(b.u.auth.ok == 1 && memcmp(b.u.auth.mac, p.u.auth.mac, 32) == 0);
    p.type = CCOIP_PKT_AUTH_RESULT;
    p.u.auth_result.status = CCOIP_HELLO_SECRET;
    round_trip(&p, &b);
    CHECK(b.u.auth_result.status == CCOIP_HELLO_SECRET);

    p.type = CCOIP_PKT_C2M_JOIN;
    p.u.join = (ccoip_join_t){0xdeadbeef, 48149, 48150, 0, 1, {.protocol = inetIPv4, .ipv4 = {{203, 0, 113, 5}}}, 40000,
                              {.protocol = inetIPv4, .ipv4 = {{192, 168, 1, 2}}}};
    round_trip(&p, &b);
    CHECK(b.u.join.peer_group == 0xdeadbeef && b.u.join.p2p_port == 48149 && b.u.join.ss_port == 48150);
    CHECK(b.u.join.advertised == 1 && b.u.join.adv_port == 40000 && b.u.join.adv_addr.ipv4.data[0] == 203);
    CHECK(b.u.join.local_addr.ipv4.data[0] == 192 && b.u.join.local_addr.ipv4.data[3] == 2);

    p.type = CCOIP_PKT_M2C_JOIN_RESPONSE;
    p.u.join_response.status = CCOIP_JOIN_LOOPBACK_MIX;
    p.u.join_response.seen_addr = (ccoip_inet_address_t){.protocol = inetIPv4, .ipv4 = {{198, 51, 100, 7}}};
    p.u.join_response.seen_port = 48149;
    p.u.join_response.reachable = 1;
    round_trip(&p, &b);
    CHECK(b.u.join_response.seen_port == 48149 && b.u.join_response.reachable == 1);
    CHECK(b.u.join_response.seen_addr.ipv4.data[3] == 7);
    CHECK(b.u.join_response.status == CCOIP_JOIN_LOOPBACK_MIX);

    ccoip_peer_entry_t e[2];
    memset(e, 0, sizeof e);
    e[0].uuid = uuid_of(3);
    e[0].flags = CCOIP_PEER_CONNECT_TO;
    e[0].addr.protocol = inetIPv4;
    memcpy(e[0].addr.ipv4.data, "\x7f\x00\x00\x01", 4);
    e[0].p2p_port = 48149;
    e[1].uuid = uuid_of(4);
    e[1].flags = CCOIP_PEER_ACCEPT_FROM | CCOIP_PEER_CONNECT_TO;
    e[1].addr.protocol = inetIPv6;
    e[1].addr.ipv6.data[15] = 1;
    e[1].p2p_port = 50000;
    e[1].bench_port = 7;
    e[1].flags |= CCOIP_PEER_TX_RELAYED;
    e[1].tx_token = uuid_of(77);
    p.type = CCOIP_PKT_M2C_P2P_INFO;
    p.u.p2p_info = (ccoip_p2p_info_t){42, 2, e, {.protocol = inetIPv4, .ipv4 = {{10, 0, 0, 9}}}, 48200};
    round_trip(&p, &b);
    CHECK(b.u.p2p_info.round == 42 && b.u.p2p_info.count == 2);
    CHECK(b.u.p2p_info.relay_port == 48200 && b.u.p2p_info.relay_addr.ipv4.data[3] == 9);
    CHECK(memcmp(&b.u.p2p_info.peers[0], &e[0], sizeof e[0]) == 0);
    CHECK(memcmp(&b.u.p2p_info.peers[1], &e[1], sizeof e[1]) == 0);
    ccoip_packet_free(&b);

    p.u.p2p_info = (ccoip_p2p_info_t){1, 0, NULL, {0}, 0};
    round_trip(&p, &b);
    CHECK(b.u.p2p_info.count == 0 && b.u.p2p_info.peers == NULL);
    ccoip_packet_free(&b);

    p.type = CCOIP_PKT_C2M_P2P_ESTABLISHED;
    p.u.p2p_established = (ccoip_p2p_established_t){77, 0, uuid_of(4), CCOIP_LINK_NOT_DIALLED};
    round_trip(&p, &b);
    CHECK(b.u.p2p_established.round == 77 && b.u.p2p_established.ok == 0);
    CHECK(memcmp(&b.u.p2p_established.failed, &p.u.p2p_established.failed, 16) == 0);
    CHECK(b.u.p2p_established.why == CCOIP_LINK_NOT_DIALLED);

    p.type = CCOIP_PKT_M2C_TOPOLOGY_RESULT;
    ccoip_inet_address_t seen = {.protocol = inetIPv4, .ipv4 = {{198, 18, 0, 7}}};
    p.u.topology_result = (ccoip_topology_result_t){5, CCOIP_RESULT_UNREACHABLE, {8, 3, 2, 5}, seen, 48149,
                                                    CCOIP_LINK_TIMEOUT};
    round_trip(&p, &b);
    CHECK(b.u.topology_result.world.global_world_size == 8 && b.u.topology_result.world.largest_group_world_size == 5);
    CHECK(b.u.topology_result.status == CCOIP_RESULT_UNREACHABLE && b.u.topology_result.why == CCOIP_LINK_TIMEOUT);
    CHECK(b.u.topology_result.seen_addr.ipv4.data[0] == 198 && b.u.topology_result.seen_port == 48149);

    p.type = CCOIP_PKT_M2C_PENDING_RESULT;
    p.u.pending_result = (ccoip_pending_result_t){CCOIP_RESULT_OK, 1};
    round_trip(&p, &b);
    CHECK(b.u.pending_result.pending == 1);

    p.type = CCOIP_PKT_M2C_WORLD_UPDATE;
    p.u.world_update.world = (ccoip_world_t){4, 4, 1, 4};
    round_trip(&p, &b);
    CHECK(b.u.world_update.world.num_groups == 1);

    p.type = CCOIP_PKT_C2M_REJOIN;
    p.u.rejoin = (ccoip_rejoin_t){{7, 48149, 48150, 48151, 0, {0}, 0, {0}}, uuid_of(9), 1234, 1, 0xfedcba9876543210ull, 1, 77};
    round_trip(&p, &b);
    CHECK(b.u.rejoin.join.peer_group == 7 && b.u.rejoin.join.bench_port == 48151 && b.u.rejoin.round == 1234);
    CHECK(memcmp(&b.u.rejoin.next, &p.u.rejoin.next, sizeof p.u.rejoin.next) == 0);
    CHECK(b.u.rejoin.has_rev == 1 && b.u.rejoin.last_rev == 0xfedcba9876543210ull);
    CHECK(b.u.rejoin.has_result == 1 && b.u.rejoin.result_rev == 77);
    p.type = CCOIP_PKT_C2M_PUNCH_MAP; /* version 12 */
    p.u.punch_map = (ccoip_punch_map_t){uuid_of(5), CCOIP_PUNCH_RX};
    round_trip(&p, &b);
    CHECK(memcmp(&b.u.punch_map.owner, &p.u.punch_map.owner, 16) == 0 && b.u.punch_map.which == CCOIP_PUNCH_RX);
    uint8_t map[17] = {0};
    map[16] = 2; /* neither TX nor RX */
    CHECK(decode_bytes(CCOIP_PKT_C2M_PUNCH_MAP, map, sizeof map) == CCOIP_ERR_INVALID);
    p.type = CCOIP_PKT_C2M_SHARED_STATE_QUERY;
    p.u.ss_query.revision = 41;
    round_trip(&p, &b);
    CHECK(b.u.ss_query.revision == 41);
    p.type = CCOIP_PKT_C2M_REJOIN;
    p.u.rejoin.has_rev = 2; /* a flag: 0 or 1 */
    ccoip_writer_t bad;
    ccoip_writer_init(&bad, CCOIP_MAX_PAYLOAD + CCOIP_HEADER_SIZE);
    CHECK(ccoip_packet_encode(&p, &bad) != CCOIP_OK || decode_bytes(CCOIP_PKT_C2M_REJOIN, bad.buf + CCOIP_HEADER_SIZE,
                                                                    bad.len - CCOIP_HEADER_SIZE) == CCOIP_ERR_INVALID);
    ccoip_writer_free(&bad);

    p.type = CCOIP_PKT_M2C_BYE;
    round_trip(&p, &b);
    CHECK(b.type == CCOIP_PKT_M2C_BYE);

    p.type = CCOIP_PKT_M2C_COLLECTIVE_ABORT;
    p.u.collective_abort.tag = 0x1122334455667788ull;
    round_trip(&p, &b);
    CHECK(b.u.collective_abort.tag == 0x1122334455667788ull);

    p.type = CCOIP_PKT_P2P_BIND;
    p.u.p2p_bind.round = 9;
    p.u.p2p_bind.stream = 3;
    p.u.p2p_bind.streams = 4;
    p.u.p2p_bind.reversed = 1;
    round_trip(&p, &b);
    CHECK(b.u.p2p_bind.round == 9 && b.u.p2p_bind.stream == 3 && b.u.p2p_bind.streams == 4 && b.u.p2p_bind.reversed == 1);

    const uint16_t empties[] = {CCOIP_PKT_C2M_VOTE_ACCEPT, CCOIP_PKT_C2M_VOTE_PENDING, CCOIP_PKT_C2M_HEARTBEAT};
    for (size_t i = 0; i < 3; i++) {
        memset(&p, 0, sizeof p);
        p.type = empties[i];
        round_trip(&p, &b);
        CHECK(ccoip_packet_name(empties[i]) != NULL);
    }
}

static void test_malformed(void) {
    uint8_t b[64];
    memset(b, 0, sizeof b);
    CHECK(decode_bytes(0x7777, b, 0) == CCOIP_ERR_UNKNOWN_TYPE);
    CHECK(decode_bytes(0, b, 0) == CCOIP_ERR_UNKNOWN_TYPE);
    CHECK(ccoip_packet_name(0x7777) == NULL);
    CHECK(decode_bytes(CCOIP_PKT_C2M_HEARTBEAT, b, 1) == CCOIP_ERR_INVALID);     /* trailing byte */
    b[11] = b[18] = 4; /* JOIN: group, 3 ports, advertised, address (family 4), port, own address: 23 bytes */
    CHECK(decode_bytes(CCOIP_PKT_C2M_JOIN, b, 23) == CCOIP_OK);
    CHECK(decode_bytes(CCOIP_PKT_C2M_JOIN, b, 24) == CCOIP_ERR_INVALID);         /* trailing byte */
    b[10] = 2;                                                                   /* advertised: 0 or 1 */
    CHECK(decode_bytes(CCOIP_PKT_C2M_JOIN, b, 23) == CCOIP_ERR_INVALID);
    memset(b, 0, sizeof b);
    CHECK(decode_bytes(CCOIP_PKT_HELLO, NULL, 0) == CCOIP_ERR_TRUNCATED);
    /* HELLO: role 0 and 7 are out of range (5 SS_REVERSED and 6 BENCH_REVERSED: version 12);
     * trailing bytes are allowed (later versions). */
    uint8_t hello[24] = {0x43, 0x43, 0x4f, 0x50, 0, 1, 2};
    CHECK(decode_bytes(CCOIP_PKT_HELLO, hello, 23) == CCOIP_OK);
    CHECK(decode_bytes(CCOIP_PKT_HELLO, hello, 24) == CCOIP_OK);
    hello[6] = 0;
    CHECK(decode_bytes(CCOIP_PKT_HELLO, hello, 23) == CCOIP_ERR_INVALID);
    hello[6] = 5; /* SS_REVERSED (version 12) */
    CHECK(decode_bytes(CCOIP_PKT_HELLO, hello, 23) == CCOIP_OK);
    hello[6] = 6; /* BENCH_REVERSED (version 12) */
    CHECK(decode_bytes(CCOIP_PKT_HELLO, hello, 23) == CCOIP_OK);
    hello[6] = 7;
    CHECK(decode_bytes(CCOIP_PKT_HELLO, hello, 23) == CCOIP_ERR_INVALID);
    /* HELLO_ACK status over range (8, NOT_SERVING, is the last). */
    uint8_t ack[23] = {0x43, 0x43, 0x4f, 0x50, 0, 1, 9};
    CHECK(decode_bytes(CCOIP_PKT_HELLO_ACK, ack, 23) == CCOIP_ERR_INVALID);
    ack[6] = CCOIP_HELLO_NOT_SERVING;
    CHECK(decode_bytes(CCOIP_PKT_HELLO_ACK, ack, 23) == CCOIP_OK);
    /* Version 2 carries flags and a nonce after the gate (the ack adds a MAC): required from
     * version 2 on, absent before, so a version 1 HELLO still decodes (and is refused by version). */
    uint8_t h2[57] = {0x43, 0x43, 0x4f, 0x50, 0, 2, 2};
    CHECK(decode_bytes(CCOIP_PKT_HELLO, h2, 23) == CCOIP_ERR_TRUNCATED);
    CHECK(decode_bytes(CCOIP_PKT_HELLO, h2, 55) == CCOIP_ERR_TRUNCATED);
    CHECK(decode_bytes(CCOIP_PKT_HELLO, h2, 56) == CCOIP_OK);
    CHECK(decode_bytes(CCOIP_PKT_HELLO, h2, 57) == CCOIP_OK);
    h2[23] = 28; /* the AEADs' flags (version 8) */
    CHECK(decode_bytes(CCOIP_PKT_HELLO, h2, 56) == CCOIP_OK);
    h2[23] = 32; /* an unknown flag */
    CHECK(decode_bytes(CCOIP_PKT_HELLO, h2, 56) == CCOIP_ERR_INVALID);
    uint8_t a2[88] = {0x43, 0x43, 0x4f, 0x50, 0, 2, 6};
    CHECK(decode_bytes(CCOIP_PKT_HELLO_ACK, a2, 87) == CCOIP_ERR_TRUNCATED);
    CHECK(decode_bytes(CCOIP_PKT_HELLO_ACK, a2, 88) == CCOIP_OK);
    uint8_t au[34] = {1};
    CHECK(decode_bytes(CCOIP_PKT_AUTH, au, 33) == CCOIP_OK);
    CHECK(decode_bytes(CCOIP_PKT_AUTH, au, 32) == CCOIP_ERR_TRUNCATED);
    CHECK(decode_bytes(CCOIP_PKT_AUTH, au, 34) == CCOIP_ERR_INVALID);
    au[0] = 2;
    CHECK(decode_bytes(CCOIP_PKT_AUTH, au, 33) == CCOIP_ERR_INVALID);
    uint8_t ar[1] = {8};
    CHECK(decode_bytes(CCOIP_PKT_AUTH_RESULT, ar, 1) == CCOIP_ERR_INVALID);
    /* Bools and enums. */
    uint8_t est[9] = {0, 0, 0, 0, 0, 0, 0, 1, 2};
    CHECK(decode_bytes(CCOIP_PKT_C2M_P2P_ESTABLISHED, est, 9) == CCOIP_ERR_INVALID);
    uint8_t est10[26] = {0};
    est10[25] = CCOIP_LINK_WHY_MAX + 1; /* version 10's why, out of range */
    CHECK(decode_bytes(CCOIP_PKT_C2M_P2P_ESTABLISHED, est10, 26) == CCOIP_ERR_INVALID);
    est10[25] = CCOIP_LINK_WHY_MAX;
    CHECK(decode_bytes(CCOIP_PKT_C2M_P2P_ESTABLISHED, est10, 26) == CCOIP_OK);
    uint8_t pend[2] = {3, 0};
    CHECK(decode_bytes(CCOIP_PKT_M2C_PENDING_RESULT, pend, 2) == CCOIP_ERR_INVALID);
    pend[0] = 0;
    pend[1] = 2;
    CHECK(decode_bytes(CCOIP_PKT_M2C_PENDING_RESULT, pend, 2) == CCOIP_ERR_INVALID);
    uint8_t jr[9] = {5, 4}; /* status, address (family 4), port, reachable */
    CHECK(decode_bytes(CCOIP_PKT_M2C_JOIN_RESPONSE, jr, 9) == CCOIP_ERR_INVALID);
    jr[0] = CCOIP_JOIN_REJOIN_REFUSED;
    CHECK(decode_bytes(CCOIP_PKT_M2C_JOIN_RESPONSE, jr, 9) == CCOIP_OK);
    jr[0] = CCOIP_JOIN_FINGERPRINT;
    CHECK(decode_bytes(CCOIP_PKT_M2C_JOIN_RESPONSE, jr, 9) == CCOIP_OK);
    CHECK(decode_bytes(CCOIP_PKT_M2C_JOIN_RESPONSE, jr, 1) == CCOIP_ERR_TRUNCATED); /* a version-10 answer */
    jr[8] = 2;
    CHECK(decode_bytes(CCOIP_PKT_M2C_JOIN_RESPONSE, jr, 9) == CCOIP_ERR_INVALID);

    /* P2P_INFO: a huge count, a count larger than the bytes left, bad flags, bad family. One
     * entry: uuid, flags (2 bytes since version 12), family 4, ip, 3 ports, 2 tokens, 2 punch
     * ports = 16+2+1+4+6+32+4 = 65 bytes; after the list the relay: family 4, ip, port = 7 bytes. */
    enum { E = 65, TAIL = 7, F = 12 + 17, FAM = 12 + 18 }; /* F: the flags' low byte */
    uint8_t info[12 + E + TAIL + 1];
    memset(info, 0, sizeof info);
    info[8] = 0xff; info[9] = 0xff; info[10] = 0xff; info[11] = 0xff;
    CHECK(decode_bytes(CCOIP_PKT_M2C_P2P_INFO, info, 12) == CCOIP_ERR_TOO_LARGE);
    info[8] = 0; info[9] = 0; info[10] = 0x01; info[11] = 0x00; /* 256 entries, 0 bytes */
    CHECK(decode_bytes(CCOIP_PKT_M2C_P2P_INFO, info, 12) == CCOIP_ERR_TRUNCATED);
    info[10] = 0; info[11] = 1;
    info[F] = 1;
    info[FAM] = 4;
    info[12 + E] = 4;
    CHECK(decode_bytes(CCOIP_PKT_M2C_P2P_INFO, info, 12 + E + TAIL) == CCOIP_OK);
    CHECK(decode_bytes(CCOIP_PKT_M2C_P2P_INFO, info, 12 + E + TAIL - 1) == CCOIP_ERR_TRUNCATED);
    CHECK(decode_bytes(CCOIP_PKT_M2C_P2P_INFO, info, 12 + E + TAIL + 1) == CCOIP_ERR_INVALID);
    info[F] = 0;
    CHECK(decode_bytes(CCOIP_PKT_M2C_P2P_INFO, info, 12 + E + TAIL) == CCOIP_ERR_INVALID);
    info[F] = 4; /* CCOIP_PEER_SAME_HOST alone: a peer at our address (version 4) */
    CHECK(decode_bytes(CCOIP_PKT_M2C_P2P_INFO, info, 12 + E + TAIL) == CCOIP_OK);
    info[F] = 1 | 2 | 8 | 16 | 32 | 64; /* reversed and relayed edges (version 11) */
    CHECK(decode_bytes(CCOIP_PKT_M2C_P2P_INFO, info, 12 + E + TAIL) == CCOIP_OK);
    info[F] = 1 | 2 | 128;
    info[F - 1] = 1; /* punched edges (version 12): bits 128 and 256 */
    CHECK(decode_bytes(CCOIP_PKT_M2C_P2P_INFO, info, 12 + E + TAIL) == CCOIP_OK);
    info[F - 1] = 2; /* 512: no such flag */
    CHECK(decode_bytes(CCOIP_PKT_M2C_P2P_INFO, info, 12 + E + TAIL) == CCOIP_ERR_INVALID);
    info[F - 1] = 0;
    info[F] = 3;
    info[12 + E] = 5; /* the relay's family */
    CHECK(decode_bytes(CCOIP_PKT_M2C_P2P_INFO, info, 12 + E + TAIL) == CCOIP_ERR_INVALID);
    info[12 + E] = 4;
    info[FAM] = 5;
    CHECK(decode_bytes(CCOIP_PKT_M2C_P2P_INFO, info, 12 + E + TAIL) == CCOIP_ERR_INVALID);
    /* Two entries, the second one truncated: the first one's memory must be released (ASan). */
    info[11] = 2;
    info[FAM] = 4;
    uint8_t two[12 + E + 20];
    memset(two, 0, sizeof two);
    memcpy(two, info, 12 + E);
    CHECK(decode_bytes(CCOIP_PKT_M2C_P2P_INFO, two, sizeof two) == CCOIP_ERR_TRUNCATED);
    CHECK(decode_bytes(CCOIP_PKT_M2C_P2P_INFO, b, CCOIP_MAX_PAYLOAD + 1u) == CCOIP_ERR_TOO_LARGE);
}

/* Collectives: start, finish, the watchdog's abort (C2M) and the TIMEOUT status. */
static void test_collectives(void) {
    ccoip_packet_t p, b;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_COLLECTIVE_INIT;
    p.u.collective_init = (ccoip_collective_init_t){7, 1u << 20, 10, 1, 0, 1};
    round_trip(&p, &b);
    CHECK(b.u.collective_init.count == 1u << 20 && b.u.collective_init.quant_algo == 1);
    p.type = CCOIP_PKT_C2M_COLLECTIVE_COMPLETE;
    p.u.collective_complete = (ccoip_collective_complete_t){7, 1};
    round_trip(&p, &b);
    CHECK(b.u.collective_complete.ok == 1);
    p.type = CCOIP_PKT_C2M_COLLECTIVE_ABORT;
    p.u.collective_abort.tag = 0x8877665544332211ull;
    round_trip(&p, &b);
    CHECK(b.u.collective_abort.tag == 0x8877665544332211ull);
    CHECK(ccoip_packet_name(CCOIP_PKT_C2M_COLLECTIVE_ABORT) != NULL);
    for (uint8_t st = CCOIP_RESULT_OK; st <= CCOIP_RESULT_TIMEOUT; st++) {
        p.type = CCOIP_PKT_M2C_COLLECTIVE_COMMENCE;
        p.u.collective_commence = (ccoip_collective_commence_t){9, st, 2, 3, 5};
        round_trip(&p, &b);
        CHECK(b.u.collective_commence.status == st && b.u.collective_commence.world == 3);
        CHECK(b.u.collective_commence.running == 5);
        p.type = CCOIP_PKT_M2C_COLLECTIVE_DONE;
        p.u.collective_done = (ccoip_collective_done_t){9, st};
        round_trip(&p, &b);
        CHECK(b.u.collective_done.status == st);
    }
    p.u.collective_done = (ccoip_collective_done_t){9, CCOIP_RESULT_UNKNOWN}; /* a QUERY's answer */
    round_trip(&p, &b);
    CHECK(b.u.collective_done.status == CCOIP_RESULT_UNKNOWN);
    /* A status past UNKNOWN (DONE) or TIMEOUT (COMMENCE), a bool past 1, a trailing byte after the abort's tag. */
    uint8_t done[9] = {0, 0, 0, 0, 0, 0, 0, 9, 5};
    CHECK(decode_bytes(CCOIP_PKT_M2C_COLLECTIVE_DONE, done, 9) == CCOIP_ERR_INVALID);
    uint8_t commence[21] = {0, 0, 0, 0, 0, 0, 0, 9, 4, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1};
    CHECK(decode_bytes(CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, commence, 21) == CCOIP_ERR_INVALID);
    commence[8] = CCOIP_RESULT_TIMEOUT;
    CHECK(decode_bytes(CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, commence, 21) == CCOIP_OK);
    CHECK(decode_bytes(CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, commence, 17) == CCOIP_ERR_TRUNCATED); /* version 4's */
    uint8_t complete[9] = {0, 0, 0, 0, 0, 0, 0, 9, 2};
    CHECK(decode_bytes(CCOIP_PKT_C2M_COLLECTIVE_COMPLETE, complete, 9) == CCOIP_ERR_INVALID);
    uint8_t abort_[9] = {0};
    CHECK(decode_bytes(CCOIP_PKT_C2M_COLLECTIVE_ABORT, abort_, 8) == CCOIP_OK);
    CHECK(decode_bytes(CCOIP_PKT_C2M_COLLECTIVE_ABORT, abort_, 9) == CCOIP_ERR_INVALID);
    CHECK(decode_bytes(CCOIP_PKT_C2M_COLLECTIVE_ABORT, abort_, 7) == CCOIP_ERR_TRUNCATED);
}

static void test_encode_limits(void) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    ccoip_writer_t w;
    ccoip_writer_init(&w, 1u << 20);
    p.type = 0x7777;
    CHECK(ccoip_packet_encode(&p, &w) == CCOIP_ERR_UNKNOWN_TYPE);
    p.type = CCOIP_PKT_M2C_P2P_INFO;
    p.u.p2p_info.count = 3;
    p.u.p2p_info.peers = NULL;
    CHECK(ccoip_packet_encode(&p, &w) == CCOIP_ERR_TOO_LARGE);
    ccoip_writer_free(&w);
    ccoip_writer_init(&w, 8); /* too small for the header and a JOIN */
    p.type = CCOIP_PKT_C2M_JOIN;
    CHECK(ccoip_packet_encode(&p, &w) == CCOIP_ERR_TOO_LARGE);
    ccoip_writer_free(&w);
}

/* A writer over the caller's memory: bounded by it, never grown, never freed. */
static void test_fixed_writer(void) {
    uint8_t buf[8];
    memset(buf, 0xee, sizeof buf);
    ccoip_writer_t w;
    ccoip_writer_init_fixed(&w, buf, 5);
    CHECK(ccoip_write_u32(&w, 0x01020304u));
    CHECK(!ccoip_write_u16(&w, 7)); /* 6 > 5 */
    CHECK(w.failed && w.len == 4);
    CHECK(!ccoip_write_u8(&w, 9)); /* latched */
    CHECK(buf[0] == 1 && buf[3] == 4 && buf[4] == 0xee && buf[5] == 0xee);
    ccoip_writer_free(&w); /* a fixed buffer is not freed (ASan would see a bad free) */
    CHECK(w.buf == buf && w.len == 0 && !w.failed);
    CHECK(ccoip_write_u8(&w, 5) && buf[0] == 5);
}

/* Whether a known type carries a list or a name (no fixed bound). */
static int is_variable(uint16_t t) {
    return t == CCOIP_PKT_M2C_P2P_INFO || t == CCOIP_PKT_C2M_SHARED_STATE_SYNC ||
           t == CCOIP_PKT_M2C_SHARED_STATE_RESULT || t == CCOIP_PKT_SS_REQUEST || t == CCOIP_PKT_SS_HEADER ||
           t == CCOIP_PKT_C2M_BANDWIDTH_REPORT || t == CCOIP_PKT_M2C_BANDWIDTH_REQUEST;
}

/* Fixed-bound packets: every one fits CCOIP_FIXED_FRAME_MAX, encode_into writes exactly the bytes of
 * the growable encoder and nothing past `cap`, refuses a buffer one byte short; the variable ones
 * have no bound. The packets of the steady state all have one (the peer sends them off the stack). */
static void test_fixed_frames(void) {
    int known = 0;
    for (uint32_t t = 0; t < 0x400; t++) {
        uint16_t type = (uint16_t) t;
        size_t bound = ccoip_packet_frame_bound(type);
        if (ccoip_packet_name(type) == NULL) {
            CHECK_EQ_U64(bound, 0);
            continue;
        }
        known++;
        if (is_variable(type)) CHECK_EQ_U64(bound, 0);
        if (bound == 0) continue; /* a list or a name: no fixed bound */
        CHECK(bound >= CCOIP_HEADER_SIZE && bound <= CCOIP_FIXED_FRAME_MAX);
        ccoip_packet_t p;
        memset(&p, 0x5a, sizeof p);
        p.type = type;
        /* The fixed packets with an address: IPv6, its longest form, makes the bound exact. */
        if (type == CCOIP_PKT_M2C_TOPOLOGY_RESULT) p.u.topology_result.seen_addr.protocol = inetIPv6;
        if (type == CCOIP_PKT_M2C_JOIN_RESPONSE) p.u.join_response.seen_addr.protocol = inetIPv6;
        if (type == CCOIP_PKT_C2M_JOIN) p.u.join.adv_addr.protocol = p.u.join.local_addr.protocol = inetIPv6;
        if (type == CCOIP_PKT_C2M_REJOIN) p.u.rejoin.join.adv_addr.protocol = p.u.rejoin.join.local_addr.protocol = inetIPv6;
        ccoip_writer_t w;
        ccoip_writer_init(&w, CCOIP_MAX_PAYLOAD + CCOIP_HEADER_SIZE);
        REQUIRE(ccoip_packet_encode(&p, &w) == CCOIP_OK);
        uint8_t buf[CCOIP_FIXED_FRAME_MAX + 1];
        memset(buf, 0xee, sizeof buf);
        size_t len = 99;
        CHECK(ccoip_packet_encode_into(&p, buf, bound, &len) == CCOIP_OK);
        CHECK_EQ_U64(len, w.len);
        CHECK_EQ_U64(len, bound);
        CHECK(memcmp(buf, w.buf, w.len) == 0);
        CHECK(buf[bound] == 0xee);
        CHECK(ccoip_packet_encode_into(&p, buf, bound - 1, &len) == CCOIP_ERR_TOO_LARGE);
        CHECK_EQ_U64(len, 0);
        ccoip_writer_free(&w);
    }
    CHECK(known >= 30);
    static const uint16_t steady[] = {
        CCOIP_PKT_C2M_HEARTBEAT, CCOIP_PKT_C2M_COLLECTIVE_INIT, CCOIP_PKT_C2M_COLLECTIVE_COMPLETE,
        CCOIP_PKT_C2M_COLLECTIVE_ABORT, CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, CCOIP_PKT_M2C_COLLECTIVE_DONE,
        CCOIP_PKT_M2C_COLLECTIVE_ABORT, CCOIP_PKT_M2C_WORLD_UPDATE, CCOIP_PKT_C2M_SHARED_STATE_DONE,
        CCOIP_PKT_C2M_SHARED_STATE_ABORT, CCOIP_PKT_M2C_SHARED_STATE_DONE};
    for (size_t i = 0; i < sizeof steady / sizeof steady[0]; i++) CHECK(ccoip_packet_frame_bound(steady[i]) != 0);
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = 0x7777;
    uint8_t buf[CCOIP_FIXED_FRAME_MAX];
    size_t len;
    CHECK(ccoip_packet_encode_into(&p, buf, sizeof buf, &len) == CCOIP_ERR_UNKNOWN_TYPE);
    /* A variable packet goes through encode_into too, when the caller's buffer is big enough. */
    ccoip_ss_tensor_t t = {"w", 1, 0, 0, 2, 0};
    p.type = CCOIP_PKT_C2M_SHARED_STATE_SYNC;
    p.u.ss_sync = (ccoip_ss_sync_t){3, 0, 1, &t};
    CHECK(ccoip_packet_encode_into(&p, buf, sizeof buf, &len) == CCOIP_OK);
    CHECK_EQ_U64(len, CCOIP_HEADER_SIZE + 8 + 1 + 4 + (2 + 1 + 8 + 1 + 1 + 8 + 1));
    CHECK(ccoip_packet_encode_into(&p, buf, len - 1, &len) == CCOIP_ERR_TOO_LARGE);
}

/* An empty name decodes without an allocation (a shared static string), frees cleanly and
 * re-encodes to the same bytes; a non-empty one is still the decoder's own copy. */
static void test_empty_name(void) {
    ccoip_packet_t p, b;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_M2C_SHARED_STATE_RESULT;
    p.u.ss_result.detail = "";
    p.u.ss_result.revision = 4;
    round_trip(&p, &b);
    REQUIRE(b.u.ss_result.detail != NULL);
    CHECK(b.u.ss_result.detail[0] == '\0' && b.u.ss_result.revision == 4);
    ccoip_packet_t b2;
    round_trip(&b, &b2);
    CHECK(b2.u.ss_result.detail == b.u.ss_result.detail); /* the same static empty string */
    ccoip_packet_free(&b);
    ccoip_packet_free(&b2);
    CHECK(b.u.ss_result.detail == NULL);
    p.u.ss_result.detail = "layer.0";
    round_trip(&p, &b);
    CHECK(b.u.ss_result.detail != p.u.ss_result.detail && strcmp(b.u.ss_result.detail, "layer.0") == 0);
    ccoip_packet_free(&b);
}

int main(void) {
    test_fixed_writer();
    test_fixed_frames();
    test_empty_name();
    test_reader_writer();
    test_frame_peek();
    test_round_trips();
    test_malformed();
    test_collectives();
    test_encode_limits();
    return check_exit();
}
