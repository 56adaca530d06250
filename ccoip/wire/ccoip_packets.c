/* ccoip_packets.c: the table-driven codec for every control packet.
 *
 * Each packet type has a layout: a list of fields (kind, offset in the struct, allowed range).
 * One decoder and one encoder walk the layouts, so validation is written once: ranges of enums,
 * flag masks, address families, list counts (bounded by a cap and by the bytes actually left,
 * so a claimed count never sizes an allocation by itself). */
#include "ccoip/wire/ccoip_packets.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef enum field_kind_t {
    F_U8,     /* lo..hi when hi > 0 */
    F_FLAGS8, /* nonzero, only bits in `hi` */
    F_FLAGS16, /* the same, two bytes */
    F_U16,
    F_U32,    /* lo..hi when hi > 0 */
    F_U64,
    F_UUID,
    F_ADDR,   /* u8 family (4|6) then 4 or 16 bytes */
    F_STRUCT, /* nested layout */
    F_LIST,   /* u32 count then elements; struct holds uint32_t count at count_offset, pointer at offset */
    F_NAME,   /* u16 length (lo..hi) then bytes without NUL; struct holds a malloc'd C string */
    F_BYTES,  /* hi raw bytes (nonces, MACs) */
    F_GATE    /* no bytes: the fields after it exist only when the u16 at `offset` is >= lo (a
                 protocol version), so an older HELLO still decodes and is refused by version */
} field_kind_t;

typedef struct layout_t layout_t;

typedef struct field_t {
    field_kind_t kind;
    size_t offset;
    uint32_t lo, hi;
    const layout_t *sub;
    size_t count_offset;
} field_t;

struct layout_t {
    uint16_t type;
    const char *name;
    size_t size; /* of the C struct (list elements) */
    const field_t *fields;
    size_t nfields;
    int allow_trailing;
};

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define U8R(st, f, l, h) {F_U8, offsetof(st, f), l, h, NULL, 0}
#define FLAGS(st, f, mask) {F_FLAGS8, offsetof(st, f), 0, mask, NULL, 0}
#define FLAGS16(st, f, mask) {F_FLAGS16, offsetof(st, f), 0, mask, NULL, 0}
#define U16(st, f) {F_U16, offsetof(st, f), 0, 0, NULL, 0}
#define U32(st, f) {F_U32, offsetof(st, f), 0, 0, NULL, 0}
#define U32R(st, f, l, h) {F_U32, offsetof(st, f), l, h, NULL, 0}
#define U64(st, f) {F_U64, offsetof(st, f), 0, 0, NULL, 0}
#define UUID(st, f) {F_UUID, offsetof(st, f), 0, 0, NULL, 0}
#define ADDR(st, f) {F_ADDR, offsetof(st, f), 0, 0, NULL, 0}
#define STRUCT(st, f, lay) {F_STRUCT, offsetof(st, f), 0, 0, &lay, 0}
#define LIST(st, ptr, cnt, max, lay) {F_LIST, offsetof(st, ptr), 0, max, &lay, offsetof(st, cnt)}
#define NAME(st, f, l, h) {F_NAME, offsetof(st, f), l, h, NULL, 0}
#define BYTES(st, f) {F_BYTES, offsetof(st, f), 0, sizeof(((st *) 0)->f), NULL, 0}
#define GATE(st, f, min) {F_GATE, offsetof(st, f), min, 0, NULL, 0}

static const field_t world_fields[] = {
    U32(ccoip_world_t, global_world_size), U32(ccoip_world_t, group_world_size),
    U32(ccoip_world_t, num_groups), U32(ccoip_world_t, largest_group_world_size)};
static const layout_t world_layout = {0, "world", sizeof(ccoip_world_t), world_fields, N(world_fields), 0};

static const field_t entry_fields[] = {
    UUID(ccoip_peer_entry_t, uuid),
    FLAGS16(ccoip_peer_entry_t, flags,
            CCOIP_PEER_CONNECT_TO | CCOIP_PEER_ACCEPT_FROM | CCOIP_PEER_SAME_HOST | CCOIP_PEER_TX_REVERSED |
                CCOIP_PEER_RX_REVERSED | CCOIP_PEER_TX_RELAYED | CCOIP_PEER_RX_RELAYED | CCOIP_PEER_TX_PUNCHED |
                CCOIP_PEER_RX_PUNCHED),
    ADDR(ccoip_peer_entry_t, addr),
    U16(ccoip_peer_entry_t, p2p_port),
    U16(ccoip_peer_entry_t, ss_port),
    U16(ccoip_peer_entry_t, bench_port),
    UUID(ccoip_peer_entry_t, tx_token),
    UUID(ccoip_peer_entry_t, rx_token),
    U16(ccoip_peer_entry_t, punch_tx_port),
    U16(ccoip_peer_entry_t, punch_rx_port)};
static const layout_t entry_layout = {0, "peer entry", sizeof(ccoip_peer_entry_t), entry_fields,
                                      N(entry_fields), 0};

/* Version 2 added the secret's challenge (flags, nonce; the ack's MAC) behind a gate: a version 1
 * HELLO decodes without it and is refused for its version, with a clear error on both sides. */
static const field_t hello_fields[] = {
    U32(ccoip_hello_t, magic), U16(ccoip_hello_t, version), U8R(ccoip_hello_t, role, 1, 6),
    UUID(ccoip_hello_t, uuid), GATE(ccoip_hello_t, version, 2),
    U8R(ccoip_hello_t, flags, 0, CCOIP_HELLO_F_ALL), BYTES(ccoip_hello_t, nonce)};
static const field_t hello_ack_fields[] = {
    U32(ccoip_hello_ack_t, magic), U16(ccoip_hello_ack_t, version), U8R(ccoip_hello_ack_t, status, 0, CCOIP_HELLO_NOT_SERVING),
    UUID(ccoip_hello_ack_t, uuid), GATE(ccoip_hello_ack_t, version, 2),
    U8R(ccoip_hello_ack_t, flags, 0, CCOIP_HELLO_F_ALL), BYTES(ccoip_hello_ack_t, nonce), BYTES(ccoip_hello_ack_t, mac)};
static const field_t auth_fields[] = {U8R(ccoip_auth_t, ok, 0, 1), BYTES(ccoip_auth_t, mac)};
static const field_t auth_result_fields[] = {U8R(ccoip_auth_result_t, status, 0, 7)};
static const field_t join_fields[] = {U32(ccoip_join_t, peer_group), U16(ccoip_join_t, p2p_port),
                                      U16(ccoip_join_t, ss_port), U16(ccoip_join_t, bench_port),
                                      U8R(ccoip_join_t, advertised, 0, 1), ADDR(ccoip_join_t, adv_addr),
                                      U16(ccoip_join_t, adv_port), ADDR(ccoip_join_t, local_addr)};
static const layout_t join_layout = {0, "join", sizeof(ccoip_join_t), join_fields, N(join_fields), 0};
static const field_t rejoin_fields[] = {STRUCT(ccoip_rejoin_t, join, join_layout), UUID(ccoip_rejoin_t, next),
                                        U64(ccoip_rejoin_t, round), U8R(ccoip_rejoin_t, has_rev, 0, 1),
                                        U64(ccoip_rejoin_t, last_rev), U8R(ccoip_rejoin_t, has_result, 0, 1),
                                        U64(ccoip_rejoin_t, result_rev)};
static const field_t punch_map_fields[] = {UUID(ccoip_punch_map_t, owner),
                                           U8R(ccoip_punch_map_t, which, CCOIP_PUNCH_TX, CCOIP_PUNCH_RX)};
static const field_t join_response_fields[] = {
    U8R(ccoip_join_response_t, status, 0, 4), ADDR(ccoip_join_response_t, seen_addr),
    U16(ccoip_join_response_t, seen_port), U8R(ccoip_join_response_t, reachable, 0, 1)};
static const field_t fp_entry_fields[] = {NAME(ccoip_fp_entry_t, name, 1, 23), U64(ccoip_fp_entry_t, hash)};
static const layout_t fp_entry_layout = {0, "fingerprint entry", sizeof(ccoip_fp_entry_t), fp_entry_fields,
                                         N(fp_entry_fields), 0};
static const field_t fingerprint_fields[] = {
    U32(ccoip_fingerprint_t, compute_capability), U32(ccoip_fingerprint_t, driver_version),
    U32(ccoip_fingerprint_t, runtime_version), U32R(ccoip_fingerprint_t, flags, 0, 3),
    NAME(ccoip_fingerprint_t, device, 0, 63),
    LIST(ccoip_fingerprint_t, entries, count, CCOIP_MAX_FP_ENTRIES, fp_entry_layout)};
static const field_t p2p_info_fields[] = {
    U64(ccoip_p2p_info_t, round),
    LIST(ccoip_p2p_info_t, peers, count, CCOIP_MAX_PEER_ENTRIES, entry_layout),
    ADDR(ccoip_p2p_info_t, relay_addr), U16(ccoip_p2p_info_t, relay_port)};
static const field_t p2p_established_fields[] = {
    U64(ccoip_p2p_established_t, round), U8R(ccoip_p2p_established_t, ok, 0, 1),
    UUID(ccoip_p2p_established_t, failed), U8R(ccoip_p2p_established_t, why, 0, CCOIP_LINK_WHY_MAX)};
static const field_t topology_result_fields[] = {
    U64(ccoip_topology_result_t, round), U8R(ccoip_topology_result_t, status, 0, CCOIP_RESULT_UNREACHABLE),
    STRUCT(ccoip_topology_result_t, world, world_layout), ADDR(ccoip_topology_result_t, seen_addr),
    U16(ccoip_topology_result_t, seen_port), U8R(ccoip_topology_result_t, why, 0, CCOIP_LINK_WHY_MAX)};
static const field_t pending_result_fields[] = {U8R(ccoip_pending_result_t, status, 0, 2),
                                                U8R(ccoip_pending_result_t, pending, 0, 1)};
static const field_t world_update_fields[] = {STRUCT(ccoip_world_update_t, world, world_layout)};
static const field_t collective_abort_fields[] = {U64(ccoip_collective_abort_t, tag)};
static const field_t p2p_bind_fields[] = {U64(ccoip_p2p_bind_t, round), U8R(ccoip_p2p_bind_t, stream, 0, 63),
                                           U8R(ccoip_p2p_bind_t, streams, 1, 64),
                                           U8R(ccoip_p2p_bind_t, reversed, 0, 1)};
static const field_t collective_init_fields[] = {
    U64(ccoip_collective_init_t, tag), U64(ccoip_collective_init_t, count),
    U8R(ccoip_collective_init_t, dtype, 0, 11), U8R(ccoip_collective_init_t, op, 0, 4),
    U8R(ccoip_collective_init_t, quant_dtype, 0, 11), U8R(ccoip_collective_init_t, quant_algo, 0, 2)};
static const field_t collective_complete_fields[] = {U64(ccoip_collective_complete_t, tag),
                                                     U8R(ccoip_collective_complete_t, ok, 0, 1)};
static const field_t collective_commence_fields[] = {
    U64(ccoip_collective_commence_t, tag), U8R(ccoip_collective_commence_t, status, 0, 3),
    U32(ccoip_collective_commence_t, rank), U32(ccoip_collective_commence_t, world),
    U32(ccoip_collective_commence_t, running)};
static const field_t collective_done_fields[] = {U64(ccoip_collective_done_t, tag),
                                                 U8R(ccoip_collective_done_t, status, 0, CCOIP_RESULT_UNKNOWN)};

/* Shared state (pcclSynchronizeSharedState). */
static const field_t ss_tensor_fields[] = {
    NAME(ccoip_ss_tensor_t, name, 1, CCOIP_MAX_SS_NAME), U64(ccoip_ss_tensor_t, hash),
    U8R(ccoip_ss_tensor_t, hash_kind, 0, 1), U8R(ccoip_ss_tensor_t, dtype, 0, 11), U64(ccoip_ss_tensor_t, count),
    U8R(ccoip_ss_tensor_t, allow_inequality, 0, 1)};
static const layout_t ss_tensor_layout = {0, "tensor", sizeof(ccoip_ss_tensor_t), ss_tensor_fields,
                                          N(ss_tensor_fields), 0};
static const field_t ss_sync_fields[] = {
    U64(ccoip_ss_sync_t, revision), U8R(ccoip_ss_sync_t, strategy, 0, 2),
    LIST(ccoip_ss_sync_t, tensors, count, CCOIP_MAX_SS_TENSORS, ss_tensor_layout)};
static const field_t ss_query_fields[] = {U64(ccoip_ss_query_t, revision)};
static const field_t ss_done_fields[] = {U8R(ccoip_ss_done_t, ok, 0, 1)};
static const field_t ss_src_fields[] = {U16(ccoip_ss_src_t, index)};
static const layout_t ss_src_layout = {0, "source index", sizeof(ccoip_ss_src_t), ss_src_fields, N(ss_src_fields), 0};
static const field_t ss_fetch_fields[] = {
    NAME(ccoip_ss_fetch_t, name, 1, CCOIP_MAX_SS_NAME), U8R(ccoip_ss_fetch_t, hash_kind, 0, 1),
    U64(ccoip_ss_fetch_t, hash), LIST(ccoip_ss_fetch_t, src, nsrc, CCOIP_SS_MAX_SOURCES, ss_src_layout)};
static const field_t ss_source_fields[] = {UUID(ccoip_ss_source_t, uuid), ADDR(ccoip_ss_source_t, addr),
                                           U16(ccoip_ss_source_t, ss_port), U8R(ccoip_ss_source_t, how, 0, 2),
                                           UUID(ccoip_ss_source_t, token)};
static const layout_t ss_source_layout = {0, "source", sizeof(ccoip_ss_source_t), ss_source_fields,
                                          N(ss_source_fields), 0};
static const layout_t ss_fetch_layout = {0, "fetch", sizeof(ccoip_ss_fetch_t), ss_fetch_fields,
                                         N(ss_fetch_fields), 0};
static const field_t ss_client_fields[] = {UUID(ccoip_ss_client_t, uuid), U8R(ccoip_ss_client_t, how, 0, 2),
                                           ADDR(ccoip_ss_client_t, addr), U16(ccoip_ss_client_t, ss_port),
                                           UUID(ccoip_ss_client_t, token)};
static const layout_t ss_client_layout = {0, "client", sizeof(ccoip_ss_client_t), ss_client_fields,
                                          N(ss_client_fields), 0};
static const field_t ss_result_fields[] = {
    U8R(ccoip_ss_result_t, status, 0, CCOIP_SS_MIXED), U64(ccoip_ss_result_t, revision), U64(ccoip_ss_result_t, expected),
    NAME(ccoip_ss_result_t, detail, 0, CCOIP_MAX_SS_NAME),
    LIST(ccoip_ss_result_t, fetch, nfetch, CCOIP_MAX_SS_TENSORS, ss_fetch_layout),
    LIST(ccoip_ss_result_t, serve, nserve, CCOIP_MAX_PEER_ENTRIES, ss_client_layout),
    LIST(ccoip_ss_result_t, sources, nsources, CCOIP_SS_MAX_DISTRIBUTORS, ss_source_layout),
    ADDR(ccoip_ss_result_t, relay_addr), U16(ccoip_ss_result_t, relay_port)};
static const field_t ss_master_done_fields[] = {U8R(ccoip_ss_master_done_t, status, 0, 2)};
static const field_t ss_range_fields[] = {NAME(ccoip_ss_range_t, name, 1, CCOIP_MAX_SS_NAME),
                                          U64(ccoip_ss_range_t, offset), U64(ccoip_ss_range_t, length)};
static const layout_t ss_range_layout = {0, "range", sizeof(ccoip_ss_range_t), ss_range_fields, N(ss_range_fields), 0};
static const field_t ss_request_fields[] = {
    LIST(ccoip_ss_request_t, ranges, count, CCOIP_SS_MAX_RANGES, ss_range_layout)};
static const field_t ss_item_fields[] = {NAME(ccoip_ss_item_t, name, 1, CCOIP_MAX_SS_NAME),
                                         U64(ccoip_ss_item_t, size)};
static const layout_t ss_item_layout = {0, "item", sizeof(ccoip_ss_item_t), ss_item_fields, N(ss_item_fields), 0};
static const field_t ss_header_fields[] = {
    U8R(ccoip_ss_header_t, status, 0, 2),
    LIST(ccoip_ss_header_t, items, count, CCOIP_SS_MAX_RANGES, ss_item_layout)};

/* Topology optimisation (pcclOptimizeTopology). */
static const field_t bench_target_fields[] = {UUID(ccoip_bench_target_t, uuid), ADDR(ccoip_bench_target_t, addr),
                                              U16(ccoip_bench_target_t, bench_port),
                                              U8R(ccoip_bench_target_t, how, CCOIP_BENCH_DIRECT, CCOIP_BENCH_RELAYED),
                                              UUID(ccoip_bench_target_t, token)};
static const layout_t bench_target_layout = {0, "target", sizeof(ccoip_bench_target_t), bench_target_fields,
                                             N(bench_target_fields), 0};
static const field_t bench_sender_fields[] = {UUID(ccoip_bench_sender_t, uuid),
                                              U8R(ccoip_bench_sender_t, how, CCOIP_BENCH_DIRECT, CCOIP_BENCH_RELAYED),
                                              ADDR(ccoip_bench_sender_t, addr), U16(ccoip_bench_sender_t, bench_port),
                                              UUID(ccoip_bench_sender_t, token)};
static const layout_t bench_sender_layout = {0, "sender", sizeof(ccoip_bench_sender_t), bench_sender_fields,
                                             N(bench_sender_fields), 0};
static const field_t bench_request_fields[] = {
    U64(ccoip_bench_request_t, session), U32(ccoip_bench_request_t, step),
    U32R(ccoip_bench_request_t, duration_ms, 1, CCOIP_MAX_BENCH_MS),
    LIST(ccoip_bench_request_t, targets, ntargets, CCOIP_MAX_PEER_ENTRIES, bench_target_layout),
    LIST(ccoip_bench_request_t, senders, nsenders, CCOIP_MAX_PEER_ENTRIES, bench_sender_layout),
    ADDR(ccoip_bench_request_t, relay_addr), U16(ccoip_bench_request_t, relay_port)};
static const field_t bench_result_fields[] = {UUID(ccoip_bench_result_t, uuid), U64(ccoip_bench_result_t, bits_per_s)};
static const layout_t bench_result_layout = {0, "result", sizeof(ccoip_bench_result_t), bench_result_fields,
                                             N(bench_result_fields), 0};
static const field_t bench_report_fields[] = {
    U64(ccoip_bench_report_t, session), U32(ccoip_bench_report_t, step),
    LIST(ccoip_bench_report_t, results, count, CCOIP_MAX_PEER_ENTRIES, bench_result_layout)};
static const field_t bench_done_fields[] = {U64(ccoip_bench_done_t, bytes), U64(ccoip_bench_done_t, elapsed_us)};

#define PACKET(t, nm, fl, tr) {t, nm, 0, fl, N(fl), tr}
#define EMPTY(t, nm) {t, nm, 0, NULL, 0, 0}
static const layout_t packet_layouts[] = {
    PACKET(CCOIP_PKT_HELLO, "HELLO", hello_fields, 1),
    PACKET(CCOIP_PKT_HELLO_ACK, "HELLO_ACK", hello_ack_fields, 1),
    PACKET(CCOIP_PKT_AUTH, "AUTH", auth_fields, 0),
    PACKET(CCOIP_PKT_AUTH_RESULT, "AUTH_RESULT", auth_result_fields, 0),
    PACKET(CCOIP_PKT_C2M_JOIN, "C2M_JOIN", join_fields, 0),
    PACKET(CCOIP_PKT_C2M_REJOIN, "C2M_REJOIN", rejoin_fields, 0),
    PACKET(CCOIP_PKT_C2M_PUNCH_MAP, "C2M_PUNCH_MAP", punch_map_fields, 0),
    PACKET(CCOIP_PKT_C2M_FINGERPRINT, "C2M_FINGERPRINT", fingerprint_fields, 0),
    EMPTY(CCOIP_PKT_C2M_VOTE_ACCEPT, "C2M_VOTE_ACCEPT"),
    PACKET(CCOIP_PKT_C2M_P2P_ESTABLISHED, "C2M_P2P_ESTABLISHED", p2p_established_fields, 0),
    EMPTY(CCOIP_PKT_C2M_VOTE_PENDING, "C2M_VOTE_PENDING"),
    EMPTY(CCOIP_PKT_C2M_VOTE_RELINK, "C2M_VOTE_RELINK"),
    EMPTY(CCOIP_PKT_C2M_HEARTBEAT, "C2M_HEARTBEAT"),
    PACKET(CCOIP_PKT_M2C_JOIN_RESPONSE, "M2C_JOIN_RESPONSE", join_response_fields, 0),
    PACKET(CCOIP_PKT_M2C_P2P_INFO, "M2C_P2P_INFO", p2p_info_fields, 0),
    PACKET(CCOIP_PKT_M2C_TOPOLOGY_RESULT, "M2C_TOPOLOGY_RESULT", topology_result_fields, 0),
    PACKET(CCOIP_PKT_M2C_PENDING_RESULT, "M2C_PENDING_RESULT", pending_result_fields, 0),
    PACKET(CCOIP_PKT_M2C_WORLD_UPDATE, "M2C_WORLD_UPDATE", world_update_fields, 0),
    EMPTY(CCOIP_PKT_M2C_BYE, "M2C_BYE"),
    PACKET(CCOIP_PKT_M2C_COLLECTIVE_ABORT, "M2C_COLLECTIVE_ABORT", collective_abort_fields, 0),
    PACKET(CCOIP_PKT_P2P_BIND, "P2P_BIND", p2p_bind_fields, 0),
    PACKET(CCOIP_PKT_C2M_COLLECTIVE_INIT, "C2M_COLLECTIVE_INIT", collective_init_fields, 0),
    PACKET(CCOIP_PKT_C2M_COLLECTIVE_COMPLETE, "C2M_COLLECTIVE_COMPLETE", collective_complete_fields, 0),
    PACKET(CCOIP_PKT_C2M_COLLECTIVE_ABORT, "C2M_COLLECTIVE_ABORT", collective_abort_fields, 0),
    PACKET(CCOIP_PKT_C2M_COLLECTIVE_QUERY, "C2M_COLLECTIVE_QUERY", collective_abort_fields, 0),
    PACKET(CCOIP_PKT_M2C_COLLECTIVE_COMMENCE, "M2C_COLLECTIVE_COMMENCE", collective_commence_fields, 0),
    PACKET(CCOIP_PKT_M2C_COLLECTIVE_DONE, "M2C_COLLECTIVE_DONE", collective_done_fields, 0),
    PACKET(CCOIP_PKT_C2M_SHARED_STATE_SYNC, "C2M_SHARED_STATE_SYNC", ss_sync_fields, 0),
    PACKET(CCOIP_PKT_C2M_SHARED_STATE_DONE, "C2M_SHARED_STATE_DONE", ss_done_fields, 0),
    EMPTY(CCOIP_PKT_C2M_SHARED_STATE_ABORT, "C2M_SHARED_STATE_ABORT"),
    PACKET(CCOIP_PKT_C2M_SHARED_STATE_QUERY, "C2M_SHARED_STATE_QUERY", ss_query_fields, 0),
    PACKET(CCOIP_PKT_M2C_SHARED_STATE_RESULT, "M2C_SHARED_STATE_RESULT", ss_result_fields, 0),
    PACKET(CCOIP_PKT_M2C_SHARED_STATE_DONE, "M2C_SHARED_STATE_DONE", ss_master_done_fields, 0),
    PACKET(CCOIP_PKT_SS_REQUEST, "SS_REQUEST", ss_request_fields, 0),
    PACKET(CCOIP_PKT_SS_HEADER, "SS_HEADER", ss_header_fields, 0),
    EMPTY(CCOIP_PKT_C2M_OPTIMIZE_TOPOLOGY, "C2M_OPTIMIZE_TOPOLOGY"),
    PACKET(CCOIP_PKT_C2M_BANDWIDTH_REPORT, "C2M_BANDWIDTH_REPORT", bench_report_fields, 0),
    PACKET(CCOIP_PKT_M2C_BANDWIDTH_REQUEST, "M2C_BANDWIDTH_REQUEST", bench_request_fields, 0),
    PACKET(CCOIP_PKT_BENCH_DONE, "BENCH_DONE", bench_done_fields, 0),
};

static const layout_t *find_layout(uint16_t type) {
    for (size_t i = 0; i < N(packet_layouts); i++)
        if (packet_layouts[i].type == type) return &packet_layouts[i];
    return NULL;
}

const char *ccoip_packet_name(uint16_t type) {
    const layout_t *l = find_layout(type);
    return l == NULL ? NULL : l->name;
}

const char *ccoip_link_why_str(uint8_t why) {
    switch (why) {
    case CCOIP_LINK_OK: return "linked";
    case CCOIP_LINK_REFUSED: return "connection refused";
    case CCOIP_LINK_TIMEOUT: return "no answer to the dial";
    case CCOIP_LINK_HANDSHAKE: return "handshake failed";
    case CCOIP_LINK_NOT_DIALLED: return "its neighbour never dialled it";
    case CCOIP_LINK_LOCAL: return "failed on its own";
    default: return "unknown";
    }
}

/* The fewest wire bytes one instance of a layout takes: bounds list counts by the input left. */
static size_t min_wire_size(const layout_t *l) {
    size_t n = 0;
    for (size_t i = 0; i < l->nfields; i++) {
        switch (l->fields[i].kind) {
        case F_U8:
        case F_FLAGS8: n += 1; break;
        case F_U16:
        case F_FLAGS16: n += 2; break;
        case F_U32:
        case F_LIST: n += 4; break;
        case F_U64: n += 8; break;
        case F_UUID: n += 16; break;
        case F_ADDR: n += 5; break;
        case F_NAME: n += 2 + l->fields[i].lo; break;
        case F_STRUCT: n += min_wire_size(l->fields[i].sub); break;
        case F_BYTES: n += l->fields[i].hi; break;
        case F_GATE: return n; /* what follows may be absent */
        }
    }
    return n;
}

/* The most wire bytes one instance of a layout takes, or 0 when it has a list or a name (no
 * small fixed bound). */
static size_t max_wire_size(const layout_t *l) {
    size_t n = 0;
    for (size_t i = 0; i < l->nfields; i++) {
        switch (l->fields[i].kind) {
        case F_U8:
        case F_FLAGS8: n += 1; break;
        case F_U16:
        case F_FLAGS16: n += 2; break;
        case F_U32: n += 4; break;
        case F_U64: n += 8; break;
        case F_UUID: n += 16; break;
        case F_ADDR: n += 17; break;
        case F_BYTES: n += l->fields[i].hi; break;
        case F_GATE: break; /* the most: the gated fields are there */
        case F_STRUCT: {
            size_t sub = max_wire_size(l->fields[i].sub);
            if (sub == 0 && l->fields[i].sub->nfields > 0) return 0;
            n += sub;
            break;
        }
        case F_LIST:
        case F_NAME: return 0;
        }
    }
    return n;
}

size_t ccoip_packet_frame_bound(uint16_t type) {
    const layout_t *l = find_layout(type);
    if (l == NULL) return 0;
    for (size_t i = 0; i < l->nfields; i++)
        if (l->fields[i].kind == F_LIST || l->fields[i].kind == F_NAME) return 0;
    return CCOIP_HEADER_SIZE + max_wire_size(l);
}

/* Decoded empty names point here instead of at a 1-byte allocation (a shared-state RESULT
 * carries an empty `detail` on every successful sync); free_fields knows it. */
static char empty_name[1];

static void free_fields(const layout_t *l, uint8_t *base);

static bool gate_closed(const field_t *f, const uint8_t *base) {
    uint16_t v;
    memcpy(&v, base + f->offset, sizeof v);
    return v < f->lo;
}

/* A fixed-size field: read it, check its range (F_U8 / F_U32 with hi > 0: lo..hi; F_FLAGS8/16:
 * nonzero, no bit outside hi), store it. Nothing is stored unless the whole field is valid. */
static ccoip_status_t decode_scalar(const field_t *f, ccoip_reader_t *r, uint8_t *at) {
    switch (f->kind) {
    case F_BYTES: return ccoip_read_bytes(r, at, f->hi) ? CCOIP_OK : CCOIP_ERR_TRUNCATED;
    case F_UUID: return ccoip_read_bytes(r, at, 16) ? CCOIP_OK : CCOIP_ERR_TRUNCATED;
    case F_U8:
    case F_FLAGS8: {
        uint8_t v;
        if (!ccoip_read_u8(r, &v)) return CCOIP_ERR_TRUNCATED;
        if (f->kind == F_U8 && f->hi > 0 && (v < f->lo || v > f->hi)) return CCOIP_ERR_INVALID;
        if (f->kind == F_FLAGS8 && (v == 0 || (v & ~f->hi) != 0)) return CCOIP_ERR_INVALID;
        *at = v;
        return CCOIP_OK;
    }
    case F_U16:
    case F_FLAGS16: {
        uint16_t v;
        if (!ccoip_read_u16(r, &v)) return CCOIP_ERR_TRUNCATED;
        if (f->kind == F_FLAGS16 && (v == 0 || (v & ~f->hi) != 0)) return CCOIP_ERR_INVALID;
        memcpy(at, &v, sizeof v);
        return CCOIP_OK;
    }
    case F_U32: {
        uint32_t v;
        if (!ccoip_read_u32(r, &v)) return CCOIP_ERR_TRUNCATED;
        if (f->hi > 0 && (v < f->lo || v > f->hi)) return CCOIP_ERR_INVALID;
        memcpy(at, &v, sizeof v);
        return CCOIP_OK;
    }
    case F_U64: {
        uint64_t v;
        if (!ccoip_read_u64(r, &v)) return CCOIP_ERR_TRUNCATED;
        memcpy(at, &v, sizeof v);
        return CCOIP_OK;
    }
    default: return CCOIP_ERR_INVALID; /* not a scalar: decode_fields dispatches the others */
    }
}

/* u8 family (4 or 6), then 4 or 16 address bytes. */
static ccoip_status_t decode_addr(ccoip_reader_t *r, uint8_t *at) {
    ccoip_inet_address_t a;
    uint8_t family;
    memset(&a, 0, sizeof a);
    if (!ccoip_read_u8(r, &family)) return CCOIP_ERR_TRUNCATED;
    if (family == 4) {
        a.protocol = inetIPv4;
        if (!ccoip_read_bytes(r, a.ipv4.data, 4)) return CCOIP_ERR_TRUNCATED;
    } else if (family == 6) {
        a.protocol = inetIPv6;
        if (!ccoip_read_bytes(r, a.ipv6.data, 16)) return CCOIP_ERR_TRUNCATED;
    } else {
        return CCOIP_ERR_INVALID;
    }
    memcpy(at, &a, sizeof a);
    return CCOIP_OK;
}

/* u16 length (lo..hi, and no more than the bytes left) then the bytes, no NUL among them; the
 * struct gets a malloc'd C string, or empty_name for length 0. The pointer is stored before the
 * NUL check, so that free_fields releases it when that check fails. */
static ccoip_status_t decode_name(const field_t *f, ccoip_reader_t *r, uint8_t *at) {
    uint16_t n;
    if (!ccoip_read_u16(r, &n)) return CCOIP_ERR_TRUNCATED;
    if (n > f->hi) return CCOIP_ERR_TOO_LARGE;
    if (n > ccoip_reader_left(r)) return CCOIP_ERR_TRUNCATED;
    if (n < f->lo) return CCOIP_ERR_INVALID;
    if (n == 0) {
        char *e = empty_name;
        memcpy(at, &e, sizeof e);
        return CCOIP_OK;
    }
    char *s = malloc((size_t) n + 1);
    if (s == NULL) return CCOIP_ERR_NOMEM;
    ccoip_read_bytes(r, s, n);
    s[n] = '\0';
    memcpy(at, &s, sizeof s);
    return memchr(s, '\0', n) != NULL ? CCOIP_ERR_INVALID : CCOIP_OK;
}

static ccoip_status_t decode_fields(const layout_t *l, ccoip_reader_t *r, uint8_t *base);

/* u32 count (at most hi, and no more elements than the bytes left could hold: a claimed count
 * never sizes an allocation by itself), then the elements. The array and the count of decoded
 * elements are stored as they grow, so free_fields releases exactly what was allocated. */
static ccoip_status_t decode_list(const field_t *f, ccoip_reader_t *r, uint8_t *base, uint8_t *at) {
    uint32_t count;
    if (!ccoip_read_u32(r, &count)) return CCOIP_ERR_TRUNCATED;
    if (count > f->hi) return CCOIP_ERR_TOO_LARGE;
    if ((uint64_t) count * min_wire_size(f->sub) > ccoip_reader_left(r)) return CCOIP_ERR_TRUNCATED;
    uint8_t *items = NULL;
    if (count > 0) {
        items = calloc(count, f->sub->size);
        if (items == NULL) return CCOIP_ERR_NOMEM;
    }
    memcpy(at, &items, sizeof items);
    uint32_t zero = 0;
    memcpy(base + f->count_offset, &zero, sizeof zero);
    for (uint32_t k = 0; k < count; k++) {
        ccoip_status_t st = decode_fields(f->sub, r, items + (size_t) k * f->sub->size);
        if (st != CCOIP_OK) {
            /* Element k is not counted yet: release what it allocated (names). */
            free_fields(f->sub, items + (size_t) k * f->sub->size);
            return st;
        }
        uint32_t done = k + 1;
        memcpy(base + f->count_offset, &done, sizeof done);
    }
    return CCOIP_OK;
}

/* Walks a layout's fields in wire order; the first invalid one ends the decode. A closed
 * version gate ends it early and successfully: the fields after it are absent. */
static ccoip_status_t decode_fields(const layout_t *l, ccoip_reader_t *r, uint8_t *base) {
    for (size_t i = 0; i < l->nfields; i++) {
        const field_t *f = &l->fields[i];
        uint8_t *at = base + f->offset;
        ccoip_status_t st;
        switch (f->kind) {
        case F_GATE:
            if (gate_closed(f, base)) return CCOIP_OK;
            st = CCOIP_OK;
            break;
        case F_ADDR: st = decode_addr(r, at); break;
        case F_NAME: st = decode_name(f, r, at); break;
        case F_STRUCT: st = decode_fields(f->sub, r, at); break;
        case F_LIST: st = decode_list(f, r, base, at); break;
        default: st = decode_scalar(f, r, at); break;
        }
        if (st != CCOIP_OK) return st;
    }
    return CCOIP_OK;
}

static void free_fields(const layout_t *l, uint8_t *base) {
    for (size_t i = 0; i < l->nfields; i++) {
        const field_t *f = &l->fields[i];
        if (f->kind == F_STRUCT) free_fields(f->sub, base + f->offset);
        if (f->kind == F_NAME) {
            char *s;
            memcpy(&s, base + f->offset, sizeof s);
            if (s != empty_name) free(s);
            s = NULL;
            memcpy(base + f->offset, &s, sizeof s);
            continue;
        }
        if (f->kind != F_LIST) continue;
        uint8_t *items;
        uint32_t count;
        memcpy(&items, base + f->offset, sizeof items);
        memcpy(&count, base + f->count_offset, sizeof count);
        for (uint32_t k = 0; items != NULL && k < count; k++) free_fields(f->sub, items + (size_t) k * f->sub->size);
        free(items);
        items = NULL;
        memcpy(base + f->offset, &items, sizeof items);
    }
}

static bool encode_fields(const layout_t *l, ccoip_writer_t *w, const uint8_t *base) {
    for (size_t i = 0; i < l->nfields; i++) {
        const field_t *f = &l->fields[i];
        const uint8_t *at = base + f->offset;
        switch (f->kind) {
        case F_GATE:
            if (gate_closed(f, base)) return !w->failed;
            break;
        case F_BYTES: ccoip_write_bytes(w, at, f->hi); break;
        case F_U8:
        case F_FLAGS8: ccoip_write_u8(w, *at); break;
        case F_U16:
        case F_FLAGS16: {
            uint16_t v;
            memcpy(&v, at, sizeof v);
            ccoip_write_u16(w, v);
            break;
        }
        case F_U32: {
            uint32_t v;
            memcpy(&v, at, sizeof v);
            ccoip_write_u32(w, v);
            break;
        }
        case F_U64: {
            uint64_t v;
            memcpy(&v, at, sizeof v);
            ccoip_write_u64(w, v);
            break;
        }
        case F_UUID: ccoip_write_bytes(w, at, 16); break;
        case F_ADDR: {
            ccoip_inet_address_t a;
            memcpy(&a, at, sizeof a);
            if (a.protocol == inetIPv6) {
                ccoip_write_u8(w, 6);
                ccoip_write_bytes(w, a.ipv6.data, 16);
            } else {
                ccoip_write_u8(w, 4);
                ccoip_write_bytes(w, a.ipv4.data, 4);
            }
            break;
        }
        case F_NAME: {
            const char *s;
            memcpy(&s, at, sizeof s);
            size_t n = s == NULL ? 0 : strlen(s);
            if (n < f->lo || n > f->hi) {
                w->failed = true;
                return false;
            }
            ccoip_write_u16(w, (uint16_t) n);
            ccoip_write_bytes(w, s, n);
            break;
        }
        case F_STRUCT: encode_fields(f->sub, w, at); break;
        case F_LIST: {
            const uint8_t *items;
            uint32_t count;
            memcpy(&items, at, sizeof items);
            memcpy(&count, base + f->count_offset, sizeof count);
            if (count > f->hi || (count > 0 && items == NULL)) {
                w->failed = true;
                return false;
            }
            ccoip_write_u32(w, count);
            for (uint32_t k = 0; k < count; k++) encode_fields(f->sub, w, items + (size_t) k * f->sub->size);
            break;
        }
        }
    }
    return !w->failed;
}

ccoip_status_t ccoip_packet_decode(uint16_t type, const uint8_t *payload, size_t len, ccoip_packet_t *out) {
    const layout_t *l = find_layout(type);
    if (l == NULL) return CCOIP_ERR_UNKNOWN_TYPE;
    if (len > CCOIP_MAX_PAYLOAD) return CCOIP_ERR_TOO_LARGE;
    memset(out, 0, sizeof *out);
    out->type = type;
    ccoip_reader_t r;
    ccoip_reader_init(&r, payload, len);
    ccoip_status_t st = decode_fields(l, &r, (uint8_t *) &out->u);
    if (st == CCOIP_OK && !l->allow_trailing && ccoip_reader_left(&r) != 0) st = CCOIP_ERR_INVALID;
    if (st != CCOIP_OK) free_fields(l, (uint8_t *) &out->u);
    return st;
}

ccoip_status_t ccoip_packet_encode(const ccoip_packet_t *p, ccoip_writer_t *w) {
    const layout_t *l = find_layout(p->type);
    if (l == NULL) return CCOIP_ERR_UNKNOWN_TYPE;
    size_t start = w->len;
    ccoip_write_u32(w, 0);
    ccoip_write_u16(w, p->type);
    if (!encode_fields(l, w, (const uint8_t *) &p->u)) {
        w->len = start;
        return CCOIP_ERR_TOO_LARGE;
    }
    size_t payload = w->len - start - CCOIP_HEADER_SIZE;
    if (payload > CCOIP_MAX_PAYLOAD) {
        w->len = start;
        return CCOIP_ERR_TOO_LARGE;
    }
    for (int i = 0; i < 4; i++) w->buf[start + (size_t) i] = (uint8_t) (payload >> (24 - 8 * i));
    return CCOIP_OK;
}

ccoip_status_t ccoip_packet_encode_into(const ccoip_packet_t *p, uint8_t *buf, size_t cap, size_t *len) {
    ccoip_writer_t w;
    ccoip_writer_init_fixed(&w, buf, cap);
    ccoip_status_t st = ccoip_packet_encode(p, &w);
    *len = st == CCOIP_OK ? w.len : 0;
    return st;
}

ccoip_status_t ccoip_packet_encode_empty(uint16_t type, ccoip_writer_t *w) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = type;
    return ccoip_packet_encode(&p, w);
}

void ccoip_packet_free(ccoip_packet_t *p) {
    const layout_t *l = find_layout(p->type);
    if (l != NULL) free_fields(l, (uint8_t *) &p->u);
}
