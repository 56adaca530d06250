/* libFuzzer target: the decoders of pcclOptimizeTopology's packets (C2M_OPTIMIZE_TOPOLOGY,
 * C2M_BANDWIDTH_REPORT, M2C_BANDWIDTH_REQUEST, BENCH_DONE). Input: one byte picks the type, the
 * rest is the payload. A payload that decodes must re-encode to the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "ccoip/wire/ccoip_packets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const uint16_t types[] = {CCOIP_PKT_C2M_OPTIMIZE_TOPOLOGY, CCOIP_PKT_C2M_BANDWIDTH_REPORT,
                                     CCOIP_PKT_M2C_BANDWIDTH_REQUEST, CCOIP_PKT_BENCH_DONE};
    if (size < 1) return 0;
    uint16_t type = types[data[0] % 4];
    ccoip_packet_t p;
    if (ccoip_packet_decode(type, data + 1, size - 1, &p) != CCOIP_OK) return 0;
    ccoip_writer_t w;
    ccoip_writer_init(&w, CCOIP_MAX_PAYLOAD + CCOIP_HEADER_SIZE);
    if (ccoip_packet_encode(&p, &w) != CCOIP_OK) abort();
    if (w.len - CCOIP_HEADER_SIZE != size - 1 || memcmp(w.buf + CCOIP_HEADER_SIZE, data + 1, size - 1) != 0) abort();
    ccoip_writer_free(&w);
    ccoip_packet_free(&p);
    return 0;
}
