/* ccoip_conn.h: whole packets over a blocking socket (peer side): send, receive with a deadline,
 * and the client half of the handshake. */
#ifndef CCOIP_CONN_H
#define CCOIP_CONN_H

#include "ccoip/ccoip_packets.h"

ccoip_status_t ccoip_conn_send(int fd, const ccoip_packet_t *p);

/* Reads one frame (payload at most max_payload) and decodes it; the caller frees *out. */
ccoip_status_t ccoip_conn_recv(int fd, ccoip_packet_t *out, uint32_t max_payload, int64_t deadline_ms);

/* Sends HELLO(role, uuid) and reads HELLO_ACK into *ack. A refusal or a version mismatch is
 * logged (naming `what`) and gives CCOIP_ERR_REFUSED, with *ack still filled in. */
ccoip_status_t ccoip_conn_hello(int fd, uint8_t role, const ccoip_uuid_t *uuid, int64_t deadline_ms,
                                const char *what, ccoip_hello_ack_t *ack);

#endif /* CCOIP_CONN_H */
