/* ccoip_splice.h: sends by reference (Linux vmsplice + splice), for the data link.
 *
 * A plain send copies every byte into the kernel, and on loopback the receiver copies it out
 * again. Spliced, the kernel queues references to the sender's pages and the receiver's copy is
 * the only one. The price is a promise: the sender must not change those bytes until the
 * receiver has read them, which sendmsg's completion does not tell (see reduce.h,
 * REDUCE_SEND_BY_REFERENCE). Elsewhere than Linux, or when PCCL_SEND_SPLICE=0, every send
 * copies. */
#ifndef CCOIP_SPLICE_H
#define CCOIP_SPLICE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ccoip_splice {
    int pipe_fd[2]; /* -1 until the first send by reference */
    bool off;       /* never (disabled, or no usable pipe): copy */
} ccoip_splice_t;

enum { CCOIP_SPLICE_OK, CCOIP_SPLICE_COPY, CCOIP_SPLICE_FAILED };

/* Whether a ring should send by reference over a link (same_host: both ends on this host), with
 * host_peers peers (us included) on this host. Across hosts always: it saves the sender's copy
 * and costs the receiver nothing. Within a host the receiver's copy, from the sender's memory,
 * becomes the only one: less CPU in all, but one copy on one core where two ran side by side on
 * two, so it pays only on a host whose cores are busy anyway: by reference when the cores that
 * may run us are fewer than 3 x host_peers (each peer runs about 3 busy threads: ring, send,
 * receive). PCCL_SEND_SPLICE=1 always, =0 never (both, and the core count, are read at the first
 * call). Same-host links on shared memory (ccoip_shmpipe.h) never splice; this is for TCP ones. */
bool ccoip_splice_pays(bool same_host, unsigned host_peers);

/* The rule above for a given core count, without the environment (for tests). */
bool ccoip_splice_rule(bool same_host, unsigned host_peers, unsigned cores);

/* No pipe yet; `off` when PCCL_SEND_SPLICE=0 or the platform cannot splice. */
void ccoip_splice_init(ccoip_splice_t *s);

/* Sends len bytes at buf on the connected stream socket fd by reference. CCOIP_SPLICE_OK: all
 * sent. CCOIP_SPLICE_COPY: these pages cannot be spliced (or no pipe could be made); *sent bytes
 * went out and the caller sends the rest by copy. CCOIP_SPLICE_FAILED: a socket error (the
 * connection is gone); the pipe may hold leftovers, so the caller stops using this socket. Call
 * from one thread at a time, with SIGPIPE blocked in it (splice has no MSG_NOSIGNAL). */
int ccoip_splice_send(ccoip_splice_t *s, int fd, const void *buf, size_t len, size_t *sent);

/* Closes the pipe. */
void ccoip_splice_close(ccoip_splice_t *s);

#endif /* CCOIP_SPLICE_H */
