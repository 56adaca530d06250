/* ccoip_peer_fp.h: the determinism fingerprint a peer shows the master before JOIN. */
#ifndef CCOIP_PEER_FP_H
#define CCOIP_PEER_FP_H

#include <stdbool.h>

#include "ccoip/wire/ccoip_packets.h"

/* PCCL_REQUIRE_FINGERPRINT=1 in the environment. */
bool ccoip_peer_fingerprint_wanted(void);

/* Fills a C2M_FINGERPRINT packet (pointing into `entries` and a process-wide cache: do not
 * ccoip_packet_free it). False (logged) when no fingerprint can be had. */
bool ccoip_peer_fingerprint_packet(ccoip_packet_t *p, ccoip_fp_entry_t entries[CCOIP_MAX_FP_ENTRIES]);

#endif /* CCOIP_PEER_FP_H */
