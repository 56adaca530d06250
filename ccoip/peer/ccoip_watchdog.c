/* ccoip_watchdog.c: the collective timeout (pccl.h, PCCL_HAS_COLLECTIVE_TIMEOUT).
 *
 * An op makes progress when its threadpark `word` moves (COMMENCE or DONE routed to it) or its
 * `doorbell` moves (the data links ring it on every completed sub-chunk send or receive). The
 * master-link thread, which wakes at least every heartbeat anyway, samples both words of every
 * running op; an op whose words stood still for the timeout is reported to the master with
 * C2M_COLLECTIVE_ABORT, once. The master ends the collective for the whole group (COMMENCE or
 * DONE with TIMEOUT, ABORT to stop running rings), so every member returns pcclCollectiveTimeout.
 *
 * Why here and not in the ring: the ring's poll stays one atomic load, and one place covers every
 * phase (waiting for COMMENCE, the ring, waiting for DONE) without a clock read in any of them.
 * The sampling is conservative: an op is reported only after at least the timeout without a
 * change, and at most one sampling period (timeout / 4, at most a second) later. An op waiting
 * for its stream turn is waiting for another op, which has its own watchdog: it is not timed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/peer/ccoip_peer_int.h"
#include "log/log.h"

#define MOD "pccl"
#define DEFAULT_TIMEOUT_MS 600000u /* 10 minutes: see docs/failures.md */
#define MAX_PERIOD_MS 1000
#define MIN_PERIOD_MS 5

void ccoip_watchdog_init(pcclComm_t *comm) {
    uint32_t ms = DEFAULT_TIMEOUT_MS;
    const char *v = getenv("PCCL_COLLECTIVE_TIMEOUT_MS");
    if (v != NULL && *v != '\0') {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (*end != '\0' || errno != 0 || x > UINT32_MAX || v[0] == '-')
            LOG_WARN(MOD, "PCCL_COLLECTIVE_TIMEOUT_MS=%s is not a number of milliseconds (0..%u); using %u", v,
                     UINT32_MAX, DEFAULT_TIMEOUT_MS);
        else if (x > 0)
            ms = (uint32_t) x;
    }
    atomic_store(&comm->colls.timeout_ms, ms);
}

void ccoip_watchdog_set(pcclComm_t *comm, uint32_t timeout_ms) {
    atomic_store(&comm->colls.timeout_ms, timeout_ms == 0 ? DEFAULT_TIMEOUT_MS : timeout_ms);
}

int64_t ccoip_watchdog_tick(pcclComm_t *comm, int64_t now) {
    uint32_t timeout = atomic_load(&comm->colls.timeout_ms);
    uint64_t tags[CCOIP_MAX_OPS];
    bool started[CCOIP_MAX_OPS];
    int n = 0;
    ccoip_colls_t *c = &comm->colls;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < CCOIP_MAX_OPS; i++) {
        ccoip_op_t *op = &c->ops[i];
        if (op->state != CCOIP_OP_RUNNING || op->wd_fired) continue;
        uint32_t sig = atomic_load_explicit(&op->word, memory_order_relaxed) +
                       atomic_load_explicit(&op->doorbell, memory_order_relaxed);
        if (op->wd_since_ms == 0 || sig != op->wd_seen || op->wd_queued) {
            op->wd_seen = sig;
            op->wd_since_ms = now;
            continue;
        }
        if (now - op->wd_since_ms < (int64_t) timeout) continue;
        op->wd_fired = true;
        tags[n] = op->tag;
        started[n++] = op->commence.type != 0;
    }
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < n; i++) {
        LOG_WARN(MOD, "collective %llu made no progress for %u ms (%s); asking the master to abort it",
                 (unsigned long long) tags[i], timeout,
                 started[i] ? "a member stalled mid-collective" : "not every member of the group called it");
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_C2M_COLLECTIVE_ABORT;
        p.u.collective_abort.tag = tags[i];
        ccoip_link_send(comm, &p); /* a broken link is noticed by the next heartbeat */
    }
    int64_t period = timeout / 4;
    return period > MAX_PERIOD_MS ? MAX_PERIOD_MS : period < MIN_PERIOD_MS ? MIN_PERIOD_MS : period;
}
