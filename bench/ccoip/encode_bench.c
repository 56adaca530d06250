/* encode_bench: the cost of encoding the control packets of one all-reduce (INIT and COMPLETE)
 * the way the peer does now (ccoip_packet_encode_into, a stack buffer) against the way it did
 * before, measured in the same run: a fresh growable writer per packet (one realloc, one free).
 * Prints ccoip/encode_control_packets,NS,ns,BASELINE_NS,RATIO (per all-reduce: both packets). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ccoip/wire/ccoip_packets.h"

#define ROUNDS 2000000

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static volatile uint8_t sink;

static double run(int heap, const ccoip_packet_t *pk) {
    double t0 = now_s();
    for (int i = 0; i < ROUNDS; i++) {
        for (int k = 0; k < 2; k++) {
            if (heap) {
                ccoip_writer_t w;
                ccoip_writer_init(&w, CCOIP_MAX_PAYLOAD + CCOIP_HEADER_SIZE);
                if (ccoip_packet_encode(&pk[k], &w) != CCOIP_OK) return -1;
                sink = w.buf[w.len - 1];
                ccoip_writer_free(&w);
            } else {
                uint8_t frame[CCOIP_FIXED_FRAME_MAX];
                size_t len;
                if (ccoip_packet_encode_into(&pk[k], frame, sizeof frame, &len) != CCOIP_OK) return -1;
                sink = frame[len - 1];
            }
        }
    }
    return (now_s() - t0) / ROUNDS * 1e9;
}

int main(void) {
    ccoip_packet_t pk[2];
    memset(pk, 0, sizeof pk);
    pk[0].type = CCOIP_PKT_C2M_COLLECTIVE_INIT;
    pk[0].u.collective_init = (ccoip_collective_init_t){42, 1u << 20, 4, 0, 0, 0};
    pk[1].type = CCOIP_PKT_C2M_COLLECTIVE_COMPLETE;
    pk[1].u.collective_complete = (ccoip_collective_complete_t){42, 1};
    run(0, pk); /* warm caches and the allocator */
    run(1, pk);
    double heap = run(1, pk), stack = run(0, pk);
    if (heap < 0 || stack < 0) {
        fprintf(stderr, "encode_bench: encoding failed\n");
        return 1;
    }
    printf("ccoip/encode_control_packets,%.1f,ns,%.1f,%.2f\n", stack, heap, stack / heap);
    return 0;
}
