/* libFuzzer target: a byte stream cut into frames the way the master and the peers read it
 * (ccoip_frame_peek, then ccoip_packet_decode on each complete frame), with the handshake cap on
 * the first frame and the general cap afterwards. */
#include "ccoip/wire/ccoip_packets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t pos = 0;
    int first = 1;
    while (pos < size) {
        uint16_t type;
        uint32_t len;
        uint32_t cap = first ? CCOIP_MAX_HANDSHAKE_PAYLOAD : CCOIP_MAX_PAYLOAD;
        if (ccoip_frame_peek(data + pos, size - pos, cap, &type, &len) != CCOIP_OK) return 0;
        if (len > size - pos - CCOIP_HEADER_SIZE) return 0; /* incomplete: wait for more */
        ccoip_packet_t p;
        if (ccoip_packet_decode(type, data + pos + CCOIP_HEADER_SIZE, len, &p) == CCOIP_OK) ccoip_packet_free(&p);
        else return 0; /* a bad frame closes the connection */
        pos += CCOIP_HEADER_SIZE + len;
        first = 0;
    }
    return 0;
}
