/* ccoip_master_probe.h: the master's connection back to a joining peer's p2p listener, on the
 * master's libuv loop: it tells whether others can dial the peer there (docs/nat.md). A TCP
 * connect that completes is enough: the probe sends nothing and closes at once (the peer's
 * listener logs a connection that closed before its HELLO at debug level only). */
#ifndef CCOIP_MASTER_PROBE_H
#define CCOIP_MASTER_PROBE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct ccoip_mprobe_t ccoip_mprobe_t;

/* The outcome, once: ok, or why not ("connection refused", "no answer within 2000 ms"). */
typedef void (*ccoip_mprobe_cb)(void *owner, bool ok, const char *why);

/* Connects to `to` within timeout_ms; NULL (and no callback) when it cannot even start. */
ccoip_mprobe_t *ccoip_mprobe_start(uv_loop_t *loop, const struct sockaddr *to, uint64_t timeout_ms,
                                   ccoip_mprobe_cb cb, void *owner);

/* The owner is gone: no callback; the probe ends now and frees itself. */
void ccoip_mprobe_forget(ccoip_mprobe_t *p);

#endif /* CCOIP_MASTER_PROBE_H */
