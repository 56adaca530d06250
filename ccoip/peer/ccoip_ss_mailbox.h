/* ccoip_ss_mailbox.h: the distributors a receiver waits for, when they dial it (a reversed
 * fetch connection, ccoip_ss_dial.h; docs/nat.md). The fetch names them before it starts; the
 * shared-state listener hands each one's connection (HELLO role SS_REVERSED) to the mailbox,
 * which accepts it only while a fetch waits for that UUID (else "unknown peer": the distributor
 * retries); the fetch thread of that distributor takes it and asks for ranges over it as over a
 * connection it dialled. */
#ifndef CCOIP_SS_MAILBOX_H
#define CCOIP_SS_MAILBOX_H

#include <stdint.h>

#include "ccoip/wire/ccoip_auth.h"
#include "ccoip/wire/ccoip_packets.h"
#include "pccl.h"

typedef struct ccoip_ss_mailbox_t ccoip_ss_mailbox_t;

ccoip_ss_mailbox_t *ccoip_ss_mailbox_new(void);
void ccoip_ss_mailbox_free(ccoip_ss_mailbox_t *d);
/* Before the fetch: a distributor that will dial us. */
void ccoip_ss_mailbox_expect(ccoip_ss_mailbox_t *d, const ccoip_uuid_t *uuid);
/* Its connection (the fd, *sess its keys), or -1 at the deadline or when comm stops. */
int ccoip_ss_mailbox_await(ccoip_ss_mailbox_t *d, pcclComm_t *comm, const ccoip_uuid_t *uuid, int64_t deadline_ms,
                           ccoip_session_t *sess);
/* After the fetch: closes what nobody took and forgets them all. */
void ccoip_ss_mailbox_forget(ccoip_ss_mailbox_t *d);
/* The listener: a connection whose HELLO (read, not answered yet) says SS_REVERSED. */
void ccoip_ss_mailbox_arrived(ccoip_ss_mailbox_t *d, pcclComm_t *comm, int fd, const ccoip_hello_t *hello,
                              const char *who, int64_t deadline_ms);

#endif /* CCOIP_SS_MAILBOX_H */
