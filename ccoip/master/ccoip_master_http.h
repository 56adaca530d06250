/* ccoip_master_http.h: the master's status endpoint, a minimal HTTP/1.0 server on the master's
 * libuv loop. GET /metrics (or /) answers 200 with the page a callback renders; any other path
 * 404, any other method 405, a request that is not HTTP 400. One request per connection, closed
 * after the answer. Each connection gets 4 KiB for its request and 5 s in all; at most 16 are
 * served at once (more are closed as they arrive). Everything runs on the loop thread. */
#ifndef CCOIP_MASTER_HTTP_H
#define CCOIP_MASTER_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* Renders the page into buf; returns its length, which may exceed cap (then it is called again
 * with more room). */
typedef size_t (*ccoip_mhttp_render_t)(void *ctx, char *buf, size_t cap);

typedef struct ccoip_mhttp ccoip_mhttp_t;

/* Listens on addr on loop (not running yet, or from its thread). NULL (and a log line) when it
 * cannot; *port gets the bound port. */
ccoip_mhttp_t *ccoip_mhttp_start(uv_loop_t *loop, const struct sockaddr *addr, ccoip_mhttp_render_t render,
                                 void *ctx, uint16_t *port);

/* Before the first request: every request must carry `Authorization: Bearer TOKEN` (else 401);
 * the token is compared in constant time. For a status page that listens beyond loopback. */
void ccoip_mhttp_require_token(ccoip_mhttp_t *h, const char *token);

/* Closes the listener and every connection; the memory goes once the loop has run their close
 * callbacks. On the loop's thread, or after it stopped (then run the loop once more). */
void ccoip_mhttp_close(ccoip_mhttp_t *h);

#endif /* CCOIP_MASTER_HTTP_H */
