/* ccoip_ss_fetch.h: a receiver's side of a shared-state sync (ccoip_ss_fetch.c): the tensors the
 * master's RESULT lists, fetched from all their distributors at the same time, in byte ranges.
 *
 * Each tensor is cut into ranges of PCCL_SS_RANGE_BYTES (small tensors share one); one thread per
 * distributor takes the next range that one of its tensors' distributors may serve (work stealing:
 * a fast distributor takes more). A distributor that dies, stalls (PCCL_SS_TIMEOUT_MS) or answers
 * nonsense is dropped and its unfinished range goes back to the others; the fetch fails only when
 * a range has no distributor left. Hashes are the caller's to check. */
#ifndef CCOIP_SS_FETCH_H
#define CCOIP_SS_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "ccoip/peer/ccoip_peer_shared.h"
#include "ccoip/wire/ccoip_packets.h"
#include "pccl.h"

/* Fetches every tensor of r->fetch into its slot; *rx counts the tensor bytes received (a range
 * fetched again after its distributor failed counts again). pcclRankConnectionLost when a range
 * is left without a distributor; pcclInternalError for a RESULT that names what we do not have,
 * memory, or a GPU copy that failed. */
pcclResult_t ccoip_ss_fetch_all(pcclComm_t *comm, const ccoip_ss_result_t *r, const ccoip_ss_slot_t *slots,
                                size_t nslots, uint64_t *rx);

#endif /* CCOIP_SS_FETCH_H */
