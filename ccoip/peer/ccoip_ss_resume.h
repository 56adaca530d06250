/* ccoip_ss_resume.h: what a failed shared-state fetch had received, for the retry
 * (ccoip_ss_resume.c). When a fetch fails, every range that arrived whole of a host tensor cut
 * into ranges is remembered with the XXH3 of its bytes that its distributor sent with
 * them (and they matched), keyed by the tensor's name, its elected content (hash and kind), its
 * size and the range size. The next fetch of the same content re-hashes those ranges in the
 * user's memory and skips those that still match: a range missing, or changed since, is fetched
 * again. The elected hash over the whole tensor is checked as always, so a distributor whose
 * memory differed from the elected content is caught there (and the record is gone by then: the
 * retry after that fetches everything). */
#ifndef CCOIP_SS_RESUME_H
#define CCOIP_SS_RESUME_H

#include <stdbool.h>
#include <stdint.h>

#include "ccoip/wire/ccoip_packets.h"

typedef struct ccoip_ss_resume_t ccoip_ss_resume_t;

/* Bytes [off, off + len) of a host tensor of `bytes` bytes at `data`, cut in `range`-byte ranges. */
typedef struct ccoip_ss_span_t {
    const void *data;
    uint64_t bytes, range, off, len;
} ccoip_ss_span_t;

/* Remembers span sp of the tensor f names with xxh, the hash of its bytes that its distributor
 * sent and the received bytes matched; false when memory ran out (the range is then simply
 * fetched again). */
bool ccoip_ss_resume_add(ccoip_ss_resume_t **r, const ccoip_ss_fetch_t *f, const ccoip_ss_span_t *sp, uint64_t xxh);
/* Sorts what was added, for ccoip_ss_resume_has. */
void ccoip_ss_resume_seal(ccoip_ss_resume_t *r);
/* Whether span sp was remembered for this content and its bytes still hash the same. */
bool ccoip_ss_resume_has(const ccoip_ss_resume_t *r, const ccoip_ss_fetch_t *f, const ccoip_ss_span_t *sp);
void ccoip_ss_resume_free(ccoip_ss_resume_t *r);

#endif /* CCOIP_SS_RESUME_H */
