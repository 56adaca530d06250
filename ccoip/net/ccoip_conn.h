/* ccoip_conn.h: whole packets over a blocking socket (peer side): send, receive with a deadline,
 * and both halves of the handshake. */
#ifndef CCOIP_CONN_H
#define CCOIP_CONN_H

#include <stdbool.h>
#include <stddef.h>

#include "ccoip/wire/ccoip_auth.h"
#include "ccoip/wire/ccoip_packets.h"

/* Sends one packet. A packet with a fixed bound (ccoip_packet_frame_bound: every control packet
 * of the steady state) is encoded on the stack and costs no allocation; any other is encoded
 * into `scratch` when given (the caller's growable writer, reset here, capacity kept for the
 * next one), else into a buffer of its own. */
ccoip_status_t ccoip_conn_send_with(int fd, const ccoip_packet_t *p, ccoip_writer_t *scratch);
ccoip_status_t ccoip_conn_send(int fd, const ccoip_packet_t *p);

/* Reads one frame (payload at most max_payload) and decodes it; the caller frees *out. Payloads
 * up to CCOIP_CONN_STACK_PAYLOAD bytes are read into a stack buffer, so a packet without lists
 * or names (COMMENCE, DONE, ABORT, ...) is received without touching the heap. */
#define CCOIP_CONN_STACK_PAYLOAD 256u
ccoip_status_t ccoip_conn_recv(int fd, ccoip_packet_t *out, uint32_t max_payload, int64_t deadline_ms);

/* Sends HELLO(role, uuid) and reads HELLO_ACK into *ack. With a key (the run secret, NULL for
 * none) it checks the acceptor's proof and proves ours (AUTH, AUTH_RESULT; ccoip_auth.h). A
 * refusal, a version or secret mismatch is logged (naming `what`) and gives CCOIP_ERR_REFUSED with
 * *ack filled in (a secret we refused on our side reads as status CCOIP_HELLO_SECRET). With sess
 * (NULL: no encryption) and sess->encrypt set (needs a key), the other side must encrypt too;
 * on success sess then holds the connection's keys. */
ccoip_status_t ccoip_conn_hello(int fd, uint8_t role, const ccoip_uuid_t *uuid, const ccoip_auth_key_t *key,
                                ccoip_session_t *sess, int64_t deadline_ms, const char *what, ccoip_hello_ack_t *ack);

/* read_hello's `why` for a connection closed before its HELLO: what the master's reachability
 * probe does (ccoip_master_probe.h), so listeners log it at debug level only. */
#define CCOIP_CONN_CLOSED_EARLY "closed before its HELLO"

/* The acceptor's half, in two steps. ccoip_conn_read_hello reads the HELLO before the deadline
 * and checks magic, version, role (the listeners' roles: p2p, shared state, benchmark) and that
 * both sides hold a secret or neither does, and encrypt (PCCL_ENCRYPT) or neither does. On
 * success *h is the caller's HELLO (h->uuid its
 * UUID) and nothing is answered yet; on failure it has already refused (when the first packet was
 * a HELLO) and `why` says what was wrong. The listener then decides on the UUID: it refuses with
 * ccoip_conn_answer_hello (any status but OK), or accepts with ccoip_conn_accept_hello, which with
 * a key proves ours and checks the caller's before the deadline (false: refused, `why` says why);
 * on an encrypted connection *sess (when not NULL) gets its keys. */
bool ccoip_conn_read_hello(int fd, uint8_t role, const ccoip_auth_key_t *key, bool encrypt, int64_t deadline_ms,
                           ccoip_hello_t *h, char *why, size_t why_len);
ccoip_status_t ccoip_conn_answer_hello(int fd, uint8_t status, const ccoip_uuid_t *uuid);
bool ccoip_conn_accept_hello(int fd, const ccoip_hello_t *h, const ccoip_auth_key_t *key, ccoip_session_t *sess,
                             int64_t deadline_ms, char *why, size_t why_len);

/* Connects to a pccl-relay and sends its hello with the pair's token (CCOIP_RELAY_MAGIC, the 16
 * bytes): from then on the connection is the pair's, for the usual handshake end to end. The fd,
 * or -1 with *st set. */
int ccoip_conn_relay_dial(const ccoip_socket_address_t *relay, const ccoip_uuid_t *token, int timeout_ms,
                          ccoip_status_t *st);

#endif /* CCOIP_CONN_H */
