/* sec_util.h: what the security tests share: raw ccoip packets over a socket (the codec does the
 * bytes), files with a mode, a capturing TCP proxy, and reading a log file. */
#ifndef SEC_UTIL_H
#define SEC_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ccoip/wire/ccoip_auth.h"
#include "ccoip/wire/ccoip_packets.h"

bool su_send(int fd, const ccoip_packet_t *p);
bool su_send_bytes(int fd, const void *b, size_t n);
/* One packet within timeout_ms; false on close, timeout or a malformed frame. */
bool su_recv(int fd, ccoip_packet_t *out, int timeout_ms);

/* A version 2 HELLO (flags, a fixed nonce). */
ccoip_packet_t su_hello(uint8_t role, const ccoip_uuid_t *uuid, uint8_t flags);

/* HELLO then, when the ack is OK and says it wants a proof, AUTH (the right MAC with key, a wrong
 * one without), then the AUTH_RESULT. Returns the ack's status, or 100 + the AUTH_RESULT's
 * status; -1 when something else came back. *closed: the other side closed afterwards. */
int su_handshake(int port, uint8_t role, const ccoip_uuid_t *uuid, uint8_t flags, const ccoip_auth_key_t *key,
                 bool *closed);

bool su_write_file(const char *path, const char *text, int mode);
/* Whether the file holds `needle` (the whole file, at most 4 MiB). */
bool su_file_has(const char *path, const char *needle);

/* A proxy on 127.0.0.1 (port returned) to 127.0.0.1:to for one connection, recording the first
 * bytes of each direction; runs on its own thread until either side closes. */
typedef struct su_proxy_t {
    int listen_fd, to_port;
    uint8_t up[4096], down[4096]; /* client -> server, server -> client */
    size_t nup, ndown;
    pthread_mutex_t lock; /* guards the records */
    pthread_t thread;
} su_proxy_t;
int su_proxy_start(su_proxy_t *p, int to_port);
/* A copy of what was recorded so far in one direction (up: client -> server); its length. */
size_t su_proxy_copy(su_proxy_t *p, bool up, uint8_t *out, size_t cap);

bool su_parse_uuid(const char *hex, ccoip_uuid_t *out);

#endif /* SEC_UTIL_H */
