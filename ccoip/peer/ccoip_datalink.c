/* ccoip_datalink.c: send thread + receive thread over one p2p socket, as a reduce link.
 *
 * Both tables are guarded by one mutex, held only for a few field moves. The threads sleep on
 * threadpark words (`send_posted`, `recv_posted`) that posters bump; cancel() and stop() wait on
 * a condvar until a thread has let go of a request it was working on.
 *
 * Same host: each direction may move from the socket to a shared-memory pipe after a handshake
 * of control frames over the socket (docs/allreduce.md, "Shared memory between peers of one
 * host"); the frames, tables and threads stay the same, only where the bytes go changes. Once
 * the receive direction runs through the pipe, the link offers post_recv_combine: the receive
 * thread combines a reduce-scatter frame straight out of the pipe's ring into the receive's
 * buffer, one pass instead of a copy here and a combine in the ring. */
#include "ccoip/peer/ccoip_datalink.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_os.h"
#include "ccoip/net/ccoip_shmpipe.h"
#include "ccoip/net/ccoip_socket.h"
#include "ccoip/net/ccoip_splice.h"
#include "log/log.h"
#include "profiler/pprof.h"
#include "threadpark/threadpark.h"

#define CANCELLED_TAGS 16u
/* Sealed records per write, and per read: 4 x 64 KiB stay in a core's L2 cache between the AEAD
 * and the kernel's copy (16 measured slower on loopback, docs/security.md); one system call per
 * batch where reading the tag apart cost two per record. */
#ifndef SEAL_BATCH
#define SEAL_BATCH 4
#endif
#define SEALED_BYTES (SEAL_BATCH * (CCOIP_DATALINK_RECORD + CCOIP_AEAD_TAG))

/* Control frames: a header whose length field no data frame can carry (data stops at
 * CCOIP_DATALINK_MAX_FRAME); the tag field holds the kind, the offset field the payload length. */
#define CTL_LEN 0xFFFFFFFFu
#define CTL_MAX 128u
enum { CTL_OFFER = 1, CTL_ACCEPT = 2, CTL_REFUSE = 3, CTL_SWITCH = 4 };
#define OFFER_VERSION 1u
#define OFFER_LEN (8u + CCOIP_SHMPIPE_TOKEN + CCOIP_SHM_NAME_MAX) /* version, ring, token, name */
#define OFFER_WAIT_MS 10000 /* no answer by then: the direction stays on TCP */
#define SHM_RING_DEFAULT (1u << 20) /* 512 KiB-1 MiB measured best on 2 cores (docs/performance.md) */

/* The send thread's side of the handshake for its own direction. */
enum { SHM_NONE, SHM_WANT, SHM_WAITING, SHM_DONE };

typedef struct slot {
    reduce_req_t *req; /* NULL: withdrawn by cancel */
    uint64_t tag, offset;
    void *buf;         /* src for sends, dst for receives */
    size_t len;
    bool by_reference; /* sends: REDUCE_SEND_BY_REFERENCE */
    void *trace;       /* reduce_req_t.trace: the transfer event's parent */
    /* Receives posted by post_recv_combine: buf = ring bytes OP x (reduce_combine's order). */
    bool combine;
    const void *x;
    pcclDataType_t dtype;
    pcclRedOp_t op;
} slot_t;

/* A FIFO of slots in a fixed array. */
typedef struct queue {
    slot_t slots[CCOIP_DATALINK_QUEUE];
    uint32_t head, count;
} queue_t;

struct ccoip_datalink {
    int fd;
    char name[64];
    pthread_mutex_t lock;
    pthread_cond_t released; /* a thread let go of its current request */
    bool broken, stopping;

    queue_t sends, recvs;
    slot_t send_current, recv_current; /* req != NULL while a thread works on it */
    bool send_current_cancelled, recv_current_cancelled;
    uint64_t cancelled[CANCELLED_TAGS]; /* tags whose late frames are read and dropped */
    uint32_t ncancelled;

    ccoip_splice_t splice; /* the send thread's: sends by reference */
    bool sealed;           /* encrypted: tx (send thread's), rx (receive thread's) and their buffers */
    ccoip_aead_t tx, rx;
    uint8_t *seal_buf, *open_buf; /* a batch of records' ciphertext, sent / received */
    bool same_host;        /* the peer's address is a loopback one or ours */
    /* Shared memory. txp is ours (we write, we created it), rxp the peer's (we read). The flags
     * below are under the lock; tx_shm and rx_shm also atomic, for the liveness callbacks. */
    bool shm_allowed;        /* PCCL_SHM != 0, not sealed, the platform has it */
    bool shm_combine;        /* PCCL_SHM_COMBINE != 0: offer post_recv_combine once rx is on the pipe */
    int shm_state;           /* SHM_*: our offer (send thread) */
    size_t shm_ring;
    int64_t shm_deadline_ms; /* SHM_WAITING until then */
    uint32_t shm_answer;     /* CTL_ACCEPT or CTL_REFUSE to our offer (recv thread -> send thread) */
    uint32_t shm_reply;      /* our answer to the peer's offer, for the send thread to send */
    bool shm_offered_to_us, shm_accepted;
    bool tx_mapped, rx_mapped;
    uint32_t tx_shm, rx_shm; /* the direction's frames go through the pipe */
    ccoip_shmpipe_t txp, rxp;
    uint32_t send_posted, recv_posted; /* threadpark words */
    pthread_t send_thread, recv_thread;
    /* Transfer events (ccoip_datalink_profile); read by the threads under the lock. */
    const pprof_t *prof;
    uint32_t prof_stream, prof_peer;
};

/* A transfer event of slot s begins; called without the lock (docs/profiler.md). */
static void *xfer_begin(const pprof_t *p, const slot_t *s, uint32_t dir, uint32_t stream, uint32_t peer) {
    if (p == NULL || !PPROF_ON(p, pcclProfilerEventTransfer)) return NULL;
    pcclProfilerEventDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = pcclProfilerEventTransfer;
    d.parent = s->trace;
    d.u.transfer.direction = dir;
    d.u.transfer.peer_rank = peer;
    d.u.transfer.tag = s->tag;
    d.u.transfer.offset = s->offset;
    d.u.transfer.bytes = s->len;
    d.u.transfer.stream = stream;
    return pprof_start(p, &d);
}

static void xfer_end(const pprof_t *p, void *h, bool ok) {
    if (p == NULL || !PPROF_ON(p, pcclProfilerEventTransfer)) return;
    if (!ok) {
        pcclProfilerStateArgs_t a = {.reason = pcclProfilerAbortPeerLost};
        pprof_state(p, h, pcclProfilerStateAborted, &a);
    }
    pprof_stop(p, pcclProfilerEventTransfer, h);
}

static slot_t *queue_at(queue_t *q, uint32_t i) { return &q->slots[(q->head + i) % CCOIP_DATALINK_QUEUE]; }

static void queue_pop_front(queue_t *q) {
    q->head = (q->head + 1) % CCOIP_DATALINK_QUEUE;
    q->count--;
}

/* Removes entry i, keeping the order of the rest. */
static void queue_remove(queue_t *q, uint32_t i) {
    for (; i + 1 < q->count; i++) *queue_at(q, i) = *queue_at(q, i + 1);
    q->count--;
}

/* The link's last touch of a request: read the doorbell, publish the state, ring. */
static void complete(reduce_req_t *req, uint32_t state) {
    _Atomic uint32_t *doorbell = req->doorbell;
    atomic_store_explicit(&req->state, state, memory_order_release);
    atomic_fetch_add_explicit(doorbell, 1, memory_order_acq_rel);
    tpark_wake_all((const uint32_t *) doorbell);
}

static void bump(uint32_t *word) {
    __atomic_fetch_add(word, 1, __ATOMIC_ACQ_REL);
    tpark_wake_all(word);
}

/* Marks the link broken and fails everything queued. Call with the lock held. `why` NULL: the
 * caller has logged the error. `clean`: the peer closed at a frame boundary with nothing pending
 * here (an orderly teardown, logged at info). */
static void break_with(ccoip_datalink_t *dl, const char *why, bool clean) {
    if (!dl->broken) {
        dl->broken = true;
        if (why == NULL)
            ; /* the caller logged the error already */
        else if (dl->stopping || clean)
            LOG_INFO("ccoip", "data link %s closed: %s", dl->name, why);
        else
            LOG_WARN("ccoip", "data link %s broken: %s", dl->name, why);
        ccoip_sock_shutdown(dl->fd); /* unblocks the other thread's read or write */
        /* Wakes our threads parked on the pipes, and tells the other side through the segment. */
        if (dl->tx_mapped) ccoip_shmpipe_shut(&dl->txp);
        if (dl->rx_mapped) ccoip_shmpipe_shut(&dl->rxp);
    }
    for (uint32_t i = 0; i < dl->sends.count; i++)
        if (queue_at(&dl->sends, i)->req) complete(queue_at(&dl->sends, i)->req, REDUCE_REQ_FAILED);
    for (uint32_t i = 0; i < dl->recvs.count; i++)
        if (queue_at(&dl->recvs, i)->req) complete(queue_at(&dl->recvs, i)->req, REDUCE_REQ_FAILED);
    dl->sends.count = dl->recvs.count = 0;
    bump(&dl->send_posted);
    bump(&dl->recv_posted);
}

static void break_locked(ccoip_datalink_t *dl, const char *why) { break_with(dl, why, false); }

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8) p[i] = (uint8_t) v;
}
static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 3; i >= 0; i--, v >>= 8) p[i] = (uint8_t) v;
}
static uint64_t get_u64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return v;
}
static uint32_t get_u32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v = v << 8 | p[i];
    return v;
}

/* Reads exactly len bytes into buf (NULL: read and drop); false on error or end of stream. */
static bool read_all(int fd, void *buf, size_t len) {
    uint8_t sink[4096];
    if (buf != NULL) return ccoip_sock_recv_all(fd, buf, len, -1) == CCOIP_OK;
    while (len > 0) {
        size_t want = len < sizeof sink ? len : sizeof sink;
        if (ccoip_sock_recv_all(fd, sink, want, -1) != CCOIP_OK) return false;
        len -= want;
    }
    return true;
}

/* The bytes of the receive direction: from the peer's pipe once it switched, else the socket. */
static bool rx_read(ccoip_datalink_t *dl, void *buf, size_t len) {
    if (__atomic_load_n(&dl->rx_shm, __ATOMIC_RELAXED)) return ccoip_shmpipe_read(&dl->rxp, buf, len) == CCOIP_SHMPIPE_OK;
    return read_all(dl->fd, buf, len);
}

/* The bytes of the send direction: into our pipe once we switched, else the socket. */
static bool tx_write(ccoip_datalink_t *dl, ccoip_iov_t *iov, int n, bool more) {
    if (!__atomic_load_n(&dl->tx_shm, __ATOMIC_RELAXED)) return ccoip_sock_sendv_all(dl->fd, iov, n, more) == CCOIP_OK;
    for (int i = 0; i < n; i++)
        if (ccoip_shmpipe_write(&dl->txp, iov[i].base, iov[i].len) != CCOIP_SHMPIPE_OK) return false;
    return true;
}

/* Encrypted: the header, then every record sealed into seal_buf, SEAL_BATCH records per write
 * (the header is each record's associated data; a frame of 0 bytes still has one record, so its
 * header is authenticated). */
static bool send_sealed(ccoip_datalink_t *dl, const uint8_t *header, const slot_t *s) {
    ccoip_iov_t h = {(void *) header, CCOIP_DATALINK_HEADER};
    if (ccoip_sock_sendv_all(dl->fd, &h, 1, true) != CCOIP_OK) return false;
    size_t off = 0;
    do {
        size_t used = 0;
        for (int k = 0; k < SEAL_BATCH && (off < s->len || (s->len == 0 && k == 0)); k++) {
            size_t n = s->len - off < CCOIP_DATALINK_RECORD ? s->len - off : CCOIP_DATALINK_RECORD;
            ccoip_aead_seal(&dl->tx, dl->seal_buf + used, dl->seal_buf + used + n, (const uint8_t *) s->buf + off, n,
                            header, CCOIP_DATALINK_HEADER);
            used += n + CCOIP_AEAD_TAG;
            off += n;
        }
        ccoip_iov_t r = {dl->seal_buf, used};
        if (ccoip_sock_sendv_all(dl->fd, &r, 1, off < s->len) != CCOIP_OK) return false;
    } while (off < s->len);
    return true;
}

/* Sends one frame: the header, then the payload by reference when its poster allows it and the
 * pages can be spliced, by copy otherwise. */
static bool send_frame(ccoip_datalink_t *dl, const slot_t *s) {
    uint8_t header[CCOIP_DATALINK_HEADER];
    put_u64(header, s->tag);
    put_u64(header + 8, s->offset);
    put_u32(header + 16, (uint32_t) s->len);
    if (dl->sealed) return send_sealed(dl, header, s);
    ccoip_iov_t iov[2] = {{header, sizeof header}, {s->buf, s->len}};
    if (__atomic_load_n(&dl->tx_shm, __ATOMIC_RELAXED)) return tx_write(dl, iov, 2, false);
    if (!s->by_reference || dl->splice.off || s->len == 0) return ccoip_sock_sendv_all(dl->fd, iov, 2, false) == CCOIP_OK;
    if (ccoip_sock_sendv_all(dl->fd, iov, 1, true) != CCOIP_OK) return false;
    size_t sent;
    int rc = ccoip_splice_send(&dl->splice, dl->fd, s->buf, s->len, &sent);
    if (rc == CCOIP_SPLICE_FAILED) return false;
    if (rc == CCOIP_SPLICE_OK) return true;
    iov[1].base = (uint8_t *) s->buf + sent;
    iov[1].len = s->len - sent;
    return ccoip_sock_sendv_all(dl->fd, iov + 1, 1, false) == CCOIP_OK;
}

/* ---- shared memory: the handshake (docs/allreduce.md) ------------------------------------- */

static void put_ctl_header(uint8_t *h, uint32_t kind, uint32_t plen) {
    put_u64(h, kind);
    put_u64(h + 8, plen);
    put_u32(h + 16, CTL_LEN);
}

/* Sends a control frame in the send direction's current transport (send thread). */
static bool send_ctl(ccoip_datalink_t *dl, uint32_t kind, const uint8_t *payload, uint32_t plen) {
    uint8_t header[CCOIP_DATALINK_HEADER];
    put_ctl_header(header, kind, plen);
    ccoip_iov_t iov[2] = {{header, sizeof header}, {(void *) payload, plen}};
    return tx_write(dl, iov, plen ? 2 : 1, false);
}

/* Send thread, with the first frame to send: creates our pipe and offers it (over the socket, still our transport). False
 * only when the socket failed; a pipe that cannot be made leaves the direction on TCP. */
static bool shm_offer(ccoip_datalink_t *dl) {
    bool made = ccoip_shmpipe_create(&dl->txp, dl->shm_ring, dl->name);
    pthread_mutex_lock(&dl->lock);
    if (!made) {
        dl->shm_state = SHM_DONE;
        pthread_mutex_unlock(&dl->lock);
        LOG_INFO("ccoip", "data link %s stays on TCP: no shared memory segment", dl->name);
        return true;
    }
    ccoip_shmpipe_watch(&dl->txp, dl->fd); /* liveness, and the peer's reader's doorbell */
    dl->tx_mapped = true;
    if (dl->broken) ccoip_shmpipe_shut(&dl->txp);
    dl->shm_state = SHM_WAITING;
    dl->shm_deadline_ms = ccoip_now_ms() + OFFER_WAIT_MS;
    pthread_mutex_unlock(&dl->lock);
    uint8_t offer[OFFER_LEN];
    memset(offer, 0, sizeof offer);
    put_u32(offer, OFFER_VERSION);
    put_u32(offer + 4, (uint32_t) dl->shm_ring);
    memcpy(offer + 8, dl->txp.token, CCOIP_SHMPIPE_TOKEN);
    snprintf((char *) offer + 8 + CCOIP_SHMPIPE_TOKEN, CCOIP_SHM_NAME_MAX, "%s", ccoip_shmpipe_segment(&dl->txp));
    return send_ctl(dl, CTL_OFFER, offer, sizeof offer);
}

/* Send thread, the answer in: accepted, the last frame over the socket is SWITCH and every later
 * one goes through the pipe. The name goes either way (the peer has it open, or never will). */
static bool shm_answered(ccoip_datalink_t *dl, uint32_t answer) {
    bool ok = true;
    if (answer == CTL_ACCEPT) {
        ok = send_ctl(dl, CTL_SWITCH, NULL, 0);
        if (ok) {
            __atomic_store_n(&dl->tx_shm, 1, __ATOMIC_RELEASE);
            LOG_INFO("ccoip", "data link %s sends through shared memory (%zu KiB ring)", dl->name, dl->shm_ring >> 10);
        }
    } else {
        LOG_INFO("ccoip", "data link %s stays on TCP: the peer refused shared memory", dl->name);
    }
    ccoip_shmpipe_unlink(&dl->txp);
    return ok;
}

/* Receive thread: opens the pipe the peer offers (checks its token: the same memory, not another
 * /dev/shm). True when we take it. */
static bool shm_accept(ccoip_datalink_t *dl, const uint8_t *offer) {
    if (!dl->shm_allowed) {
        LOG_INFO("ccoip", "data link %s: refusing the peer's shared memory (PCCL_SHM=0, sealed, or no support here)",
                 dl->name);
        return false;
    }
    char seg[CCOIP_SHM_NAME_MAX];
    memcpy(seg, offer + 8 + CCOIP_SHMPIPE_TOKEN, sizeof seg);
    seg[sizeof seg - 1] = 0;
    if (get_u32(offer) != OFFER_VERSION) {
        LOG_INFO("ccoip", "data link %s: refusing a shared memory offer of version %u", dl->name, get_u32(offer));
        return false;
    }
    if (!ccoip_shmpipe_open(&dl->rxp, seg, get_u32(offer + 4), offer + 8, dl->name)) return false;
    ccoip_shmpipe_unlink(&dl->rxp); /* we have it open: the name can go */
    ccoip_shmpipe_watch(&dl->rxp, dl->fd);
    pthread_mutex_lock(&dl->lock);
    dl->rx_mapped = true;
    if (dl->broken) ccoip_shmpipe_shut(&dl->rxp);
    pthread_mutex_unlock(&dl->lock);
    return true;
}

/* Receive thread: one control frame (header read). False when the link broke. */
static bool recv_ctl(ccoip_datalink_t *dl, uint64_t kind, uint64_t plen) {
    uint8_t payload[CTL_MAX];
    const char *bad = NULL;
    if (plen > CTL_MAX) {
        LOG_ERROR("ccoip", "data link %s: a control frame of %llu bytes (at most %u)", dl->name,
                  (unsigned long long) plen, CTL_MAX);
        pthread_mutex_lock(&dl->lock);
        break_locked(dl, NULL);
        pthread_mutex_unlock(&dl->lock);
        return false;
    }
    if (!rx_read(dl, payload, (size_t) plen)) {
        pthread_mutex_lock(&dl->lock);
        break_locked(dl, "connection closed mid-frame");
        pthread_mutex_unlock(&dl->lock);
        return false;
    }
    pthread_mutex_lock(&dl->lock);
    switch (kind) {
    case CTL_OFFER:
        if (plen != OFFER_LEN || dl->shm_offered_to_us) {
            bad = "a second or malformed shared memory offer";
            break;
        }
        dl->shm_offered_to_us = true;
        pthread_mutex_unlock(&dl->lock);
        bool taken = shm_accept(dl, payload);
        pthread_mutex_lock(&dl->lock);
        dl->shm_accepted = taken;
        dl->shm_reply = taken ? CTL_ACCEPT : CTL_REFUSE;
        bump(&dl->send_posted);
        break;
    case CTL_SWITCH:
        if (plen != 0 || !dl->shm_accepted || dl->rx_shm) {
            bad = "a switch to shared memory that was not agreed";
            break;
        }
        __atomic_store_n(&dl->rx_shm, 1, __ATOMIC_RELEASE); /* every later frame comes through the pipe */
        break;
    case CTL_ACCEPT:
    case CTL_REFUSE:
        if (plen != 0 || dl->shm_state == SHM_NONE || dl->shm_state == SHM_WANT) {
            bad = "an answer to a shared memory offer we did not make";
            break;
        }
        if (dl->shm_state == SHM_WAITING) { /* later than OFFER_WAIT_MS: we went on over TCP */
            dl->shm_answer = (uint32_t) kind;
            bump(&dl->send_posted);
        }
        break;
    default:
        bad = "a control frame of an unknown kind";
    }
    if (bad != NULL) {
        LOG_ERROR("ccoip", "data link %s: %s (kind %llu, %llu bytes)", dl->name, bad, (unsigned long long) kind,
                  (unsigned long long) plen);
        break_locked(dl, NULL);
    }
    bool ok = !dl->broken;
    pthread_mutex_unlock(&dl->lock);
    return ok;
}

/* Send thread, lock held: the handshake's work, if any is due. True when it did some (look at
 * the state again); false when there is none, or the link broke (dl->broken tells). */
static bool shm_step(ccoip_datalink_t *dl) {
    bool ok = true;
    if (dl->shm_reply != 0) {
        uint32_t kind = dl->shm_reply;
        dl->shm_reply = 0;
        pthread_mutex_unlock(&dl->lock);
        ok = send_ctl(dl, kind, NULL, 0);
        pthread_mutex_lock(&dl->lock);
    } else if (dl->shm_state == SHM_WANT && dl->sends.count > 0) {
        /* Offered with the first frame to send, not at start: a direction that never carries data
         * (the reverse one of a ring's link) costs no segment. */
        pthread_mutex_unlock(&dl->lock);
        ok = shm_offer(dl);
        pthread_mutex_lock(&dl->lock);
    } else if (dl->shm_state == SHM_WAITING && dl->shm_answer != 0) {
        uint32_t answer = dl->shm_answer;
        pthread_mutex_unlock(&dl->lock);
        ok = shm_answered(dl, answer);
        pthread_mutex_lock(&dl->lock);
        dl->shm_state = SHM_DONE;
    } else if (dl->shm_state == SHM_WAITING) {
        int64_t left = dl->shm_deadline_ms - ccoip_now_ms();
        if (left <= 0) {
            dl->shm_state = SHM_DONE;
            LOG_INFO("ccoip", "data link %s stays on TCP: no answer to the shared memory offer", dl->name);
            ccoip_shmpipe_unlink(&dl->txp);
            return true;
        }
        uint32_t seen = __atomic_load_n(&dl->send_posted, __ATOMIC_ACQUIRE);
        pthread_mutex_unlock(&dl->lock);
        tpark_wait(&dl->send_posted, seen, left * 1000000);
        pthread_mutex_lock(&dl->lock);
    } else {
        return false;
    }
    if (!ok) break_locked(dl, "send failed (peer gone?)");
    return !dl->broken;
}

static void *send_main(void *arg) {
    ccoip_datalink_t *dl = arg;
    ccoip_os_name_thread("pccl-dl-send");
    /* splice() has no MSG_NOSIGNAL: a peer gone mid-send must not kill the process. */
    ccoip_os_thread_block_sigpipe();
    pthread_mutex_lock(&dl->lock);
    for (;;) {
        /* Data frames wait while our offer is out: the handshake comes first. */
        while (!dl->broken && shm_step(dl)) {
        }
        if (!dl->broken && (dl->sends.count == 0 || queue_at(&dl->sends, 0)->req == NULL)) {
            if (dl->sends.count) {
                queue_pop_front(&dl->sends); /* withdrawn by cancel */
                continue;
            }
            uint32_t seen = __atomic_load_n(&dl->send_posted, __ATOMIC_ACQUIRE);
            pthread_mutex_unlock(&dl->lock);
            tpark_wait(&dl->send_posted, seen, -1);
            pthread_mutex_lock(&dl->lock);
            continue;
        }
        if (dl->broken) break;
        dl->send_current = *queue_at(&dl->sends, 0);
        dl->send_current_cancelled = false;
        queue_pop_front(&dl->sends);
        const pprof_t *prof = dl->prof;
        pthread_mutex_unlock(&dl->lock);

        void *ev = xfer_begin(prof, &dl->send_current, pcclProfilerSend, dl->prof_stream, dl->prof_peer);
        bool ok = send_frame(dl, &dl->send_current);
        xfer_end(prof, ev, ok); /* before the request is released: cancel() waits for that */

        pthread_mutex_lock(&dl->lock);
        reduce_req_t *req = dl->send_current.req;
        bool cancelled = dl->send_current_cancelled;
        dl->send_current.req = NULL;
        pthread_cond_broadcast(&dl->released);
        if (!cancelled) complete(req, ok ? REDUCE_REQ_DONE : REDUCE_REQ_FAILED);
        if (!ok) break_locked(dl, "send failed (peer gone?)");
    }
    pthread_mutex_unlock(&dl->lock);
    return NULL;
}

static bool tag_cancelled(const ccoip_datalink_t *dl, uint64_t tag) {
    uint32_t n = dl->ncancelled < CANCELLED_TAGS ? dl->ncancelled : CANCELLED_TAGS;
    for (uint32_t i = 0; i < n; i++)
        if (dl->cancelled[i] == tag) return true;
    return false;
}

/* Index of the oldest receive posted for tag, or -1. */
static int find_recv(ccoip_datalink_t *dl, uint64_t tag) {
    for (uint32_t i = 0; i < dl->recvs.count; i++) {
        slot_t *s = queue_at(&dl->recvs, i);
        if (s->req && s->tag == tag) return (int) i;
    }
    return -1;
}

static void combine_piece(void *ctx, size_t at, const void *piece, size_t n);

/* Encrypted: reads the frame's records SEAL_BATCH at a time into open_buf (one read each) and
 * opens each from there into dst (NULL: a dropped frame, opened in place and forgotten); false on
 * a short read or a record that fails authentication (logged). Each byte is copied once by the
 * kernel and once by the AEAD, as when records were read into dst and opened in place, but
 * open_buf stays in cache. comb (a combining receive's slot, else NULL): each record is opened in
 * place and combined from there into comb's buffer, so the frame is never stored (one pass less
 * over memory than staging it for the ring to combine). */
static bool recv_sealed(ccoip_datalink_t *dl, const uint8_t *header, uint8_t *dst, size_t len, const slot_t *comb) {
    size_t off = 0;
    do {
        size_t want = 0, at = off;
        for (int k = 0; k < SEAL_BATCH && (at < len || (len == 0 && k == 0)); k++) {
            size_t n = len - at < CCOIP_DATALINK_RECORD ? len - at : CCOIP_DATALINK_RECORD;
            want += n + CCOIP_AEAD_TAG;
            at += n;
        }
        if (!read_all(dl->fd, dl->open_buf, want)) return false;
        for (uint8_t *c = dl->open_buf; c < dl->open_buf + want;) {
            size_t n = len - off < CCOIP_DATALINK_RECORD ? len - off : CCOIP_DATALINK_RECORD;
            if (!ccoip_aead_open(&dl->rx, dst != NULL && comb == NULL ? dst + off : c, c, n, c + n, header,
                                 CCOIP_DATALINK_HEADER)) {
                LOG_ERROR("ccoip", "data link %s: a frame failed authentication (tampered, or not from our neighbour)",
                          dl->name);
                return false;
            }
            if (comb != NULL && n > 0) combine_piece((void *) comb, off, c, n); /* authentic: now it counts */
            c += n + CCOIP_AEAD_TAG;
            off += n;
        }
    } while (off < len);
    return true;
}

/* Reads a frame's payload (dst NULL: drops it). */
static bool read_payload(ccoip_datalink_t *dl, const uint8_t *header, void *dst, size_t len) {
    return dl->sealed ? recv_sealed(dl, header, dst, len, NULL) : rx_read(dl, dst, len);
}

/* A piece of a combining receive's frame, straight out of the pipe's ring (at any alignment). */
static void combine_piece(void *ctx, size_t at, const void *piece, size_t n) {
    const slot_t *s = ctx;
    size_t esz = reduce_dtype_size(s->dtype);
    reduce_combine_unaligned(s->dtype, s->op, (uint8_t *) s->buf + at, piece, (const uint8_t *) s->x + at, n / esz);
}

/* Receives the payload of the frame that matched slot s: stored, or combined out of the pipe or
 * out of the opened records. A combining receive is posted only on a sealed link or once rx_shm
 * is set (this thread sets it, and it never goes back), so its frame comes through the pipe or
 * sealed; anything else is a bug, refused. */
static bool recv_payload(ccoip_datalink_t *dl, const uint8_t *header, const slot_t *s, size_t len) {
    if (!s->combine) return read_payload(dl, header, s->buf, len);
    if (dl->sealed) return recv_sealed(dl, header, s->buf, len, s);
    if (!__atomic_load_n(&dl->rx_shm, __ATOMIC_RELAXED)) {
        LOG_ERROR("ccoip", "data link %s: a combining receive for a frame that did not come through shared memory",
                  dl->name);
        return false;
    }
    return ccoip_shmpipe_read_each(&dl->rxp, len, reduce_dtype_size(s->dtype), combine_piece, (void *) s) ==
           CCOIP_SHMPIPE_OK;
}

/* Receives one frame; false when the link is broken or stopping. */
static bool recv_frame(ccoip_datalink_t *dl) {
    uint8_t header[CCOIP_DATALINK_HEADER];
    if (!rx_read(dl, header, sizeof header)) {
        pthread_mutex_lock(&dl->lock);
        break_with(dl, "connection closed", dl->recvs.count == 0 && dl->sends.count == 0);
        pthread_mutex_unlock(&dl->lock);
        return false;
    }
    uint64_t tag = get_u64(header), offset = get_u64(header + 8);
    uint32_t len = get_u32(header + 16);
    if (len == CTL_LEN && !dl->sealed) return recv_ctl(dl, tag, offset);
    pthread_mutex_lock(&dl->lock);
    if (len > CCOIP_DATALINK_MAX_FRAME) {
        LOG_ERROR("ccoip", "data link %s: frame of %u bytes over the %u limit", dl->name, len,
                  CCOIP_DATALINK_MAX_FRAME);
        break_locked(dl, NULL);
        pthread_mutex_unlock(&dl->lock);
        return false;
    }
    int i;
    while ((i = find_recv(dl, tag)) < 0) {
        if (dl->broken) {
            pthread_mutex_unlock(&dl->lock);
            return false;
        }
        if (tag_cancelled(dl, tag)) { /* a late frame of an aborted collective */
            pthread_mutex_unlock(&dl->lock);
            if (read_payload(dl, header, NULL, len)) return true;
            pthread_mutex_lock(&dl->lock);
            break_locked(dl, "connection closed mid-frame");
            pthread_mutex_unlock(&dl->lock);
            return false;
        }
        /* The frame is early: its collective has not posted the receive yet. */
        uint32_t seen = __atomic_load_n(&dl->recv_posted, __ATOMIC_ACQUIRE);
        pthread_mutex_unlock(&dl->lock);
        tpark_wait(&dl->recv_posted, seen, 100 * 1000 * 1000);
        pthread_mutex_lock(&dl->lock);
    }
    slot_t *s = queue_at(&dl->recvs, (uint32_t) i);
    if (s->offset != offset || s->len != len) {
        LOG_ERROR("ccoip", "data link %s: frame tag %llu offset %llu length %u does not match the "
                  "receive posted at offset %llu length %zu", dl->name, (unsigned long long) tag,
                  (unsigned long long) offset, len, (unsigned long long) s->offset, s->len);
        break_locked(dl, NULL);
        pthread_mutex_unlock(&dl->lock);
        return false;
    }
    dl->recv_current = *s;
    dl->recv_current_cancelled = false;
    queue_remove(&dl->recvs, (uint32_t) i);
    const pprof_t *prof = dl->prof;
    pthread_mutex_unlock(&dl->lock);

    void *ev = xfer_begin(prof, &dl->recv_current, pcclProfilerRecv, dl->prof_stream, dl->prof_peer);
    bool ok = recv_payload(dl, header, &dl->recv_current, len);
    xfer_end(prof, ev, ok);

    pthread_mutex_lock(&dl->lock);
    reduce_req_t *req = dl->recv_current.req;
    bool cancelled = dl->recv_current_cancelled;
    dl->recv_current.req = NULL;
    pthread_cond_broadcast(&dl->released);
    if (!cancelled) complete(req, ok ? REDUCE_REQ_DONE : REDUCE_REQ_FAILED);
    if (!ok) break_locked(dl, dl->sealed ? "frame failed (closed mid-frame or not authentic)" : "connection closed mid-frame");
    pthread_mutex_unlock(&dl->lock);
    return ok;
}

static void *recv_main(void *arg) {
    ccoip_datalink_t *dl = arg;
    ccoip_os_name_thread("pccl-dl-recv");
    while (recv_frame(dl)) {
    }
    return NULL;
}

/* ---- reduce link ops ---------------------------------------------------------------------- */

/* Queues slot s (its req, tag, offset, buf, len and combine fields set) and wakes the thread. */
static int post_slot(ccoip_datalink_t *dl, queue_t *q, uint32_t *posted, slot_t s) {
    reduce_req_t *req = s.req;
    size_t len = s.len;
    if (len > CCOIP_DATALINK_MAX_FRAME) {
        LOG_ERROR("ccoip", "data link %s: a frame of %zu bytes is over the %u limit", dl->name, len,
                  CCOIP_DATALINK_MAX_FRAME);
        return -1;
    }
    pthread_mutex_lock(&dl->lock);
    if (dl->broken || q->count == CCOIP_DATALINK_QUEUE) {
        if (!dl->broken) LOG_ERROR("ccoip", "data link %s: %u requests pending, refusing more", dl->name, q->count);
        pthread_mutex_unlock(&dl->lock);
        return -1;
    }
    s.by_reference = (req->flags & REDUCE_SEND_BY_REFERENCE) != 0;
    s.trace = req->trace;
    *queue_at(q, q->count++) = s;
    pthread_mutex_unlock(&dl->lock);
    bump(posted);
    return 0;
}

static int post(ccoip_datalink_t *dl, queue_t *q, uint32_t *posted, uint64_t tag, uint64_t offset,
                void *buf, size_t len, reduce_req_t *req) {
    return post_slot(dl, q, posted, (slot_t){.req = req, .tag = tag, .offset = offset, .buf = buf, .len = len});
}

static int link_post_send(void *ctx, uint64_t tag, uint64_t offset, const void *src, size_t len,
                          reduce_req_t *req) {
    ccoip_datalink_t *dl = ctx;
    return post(dl, &dl->sends, &dl->send_posted, tag, offset, (void *) src, len, req);
}

static int link_post_recv(void *ctx, uint64_t tag, uint64_t offset, void *dst, size_t len, reduce_req_t *req) {
    ccoip_datalink_t *dl = ctx;
    return post(dl, &dl->recvs, &dl->recv_posted, tag, offset, dst, len, req);
}

static int link_post_recv_combine(void *ctx, uint64_t tag, uint64_t offset, void *dst, const void *x, size_t len,
                                  pcclDataType_t dtype, pcclRedOp_t op, reduce_req_t *req) {
    ccoip_datalink_t *dl = ctx;
    size_t esz = reduce_dtype_size(dtype);
    bool on_pipe = dl->sealed || __atomic_load_n(&dl->rx_shm, __ATOMIC_ACQUIRE) != 0;
    if (esz == 0 || !reduce_op_valid(op) || len % esz != 0 || !on_pipe) {
        LOG_ERROR("ccoip", "data link %s: a combining receive of %zu bytes of dtype %d, op %d%s", dl->name, len,
                  (int) dtype, (int) op, on_pipe ? "" : " on a link neither sealed nor on shared memory");
        return -1;
    }
    return post_slot(dl, &dl->recvs, &dl->recv_posted,
                     (slot_t){.req = req, .tag = tag, .offset = offset, .buf = dst, .len = len, .combine = true,
                              .x = x, .dtype = dtype, .op = op});
}

static void link_wait(void *ctx, _Atomic uint32_t *doorbell, uint32_t seen, uint32_t timeout_us) {
    (void) ctx;
    tpark_wait((const uint32_t *) doorbell, seen, (int64_t) timeout_us * 1000);
}

/* Withdraws the queued requests of tag. A request a thread is working on right now cannot be
 * withdrawn from the middle of a frame: the link is broken instead (the collective failed
 * anyway), and we wait until the thread has let go of it. */
static void link_cancel(void *ctx, uint64_t tag) {
    ccoip_datalink_t *dl = ctx;
    pthread_mutex_lock(&dl->lock);
    queue_t *queues[2] = {&dl->sends, &dl->recvs};
    for (int k = 0; k < 2; k++)
        for (uint32_t i = 0; i < queues[k]->count; i++)
            if (queue_at(queues[k], i)->tag == tag) queue_at(queues[k], i)->req = NULL;
    dl->cancelled[dl->ncancelled++ % CANCELLED_TAGS] = tag;
    slot_t *current[2] = {&dl->send_current, &dl->recv_current};
    bool *flags[2] = {&dl->send_current_cancelled, &dl->recv_current_cancelled};
    for (int k = 0; k < 2; k++) {
        if (current[k]->req == NULL || current[k]->tag != tag) continue;
        *flags[k] = true;
        break_locked(dl, "collective cancelled mid-frame");
        while (current[k]->req != NULL && current[k]->tag == tag) pthread_cond_wait(&dl->released, &dl->lock);
    }
    pthread_mutex_unlock(&dl->lock);
}

static const reduce_link_ops_t datalink_ops = {
    .post_send = link_post_send,
    .post_recv = link_post_recv,
    .wait = link_wait,
    .cancel = link_cancel,
};

/* Receiving through the pipe: reduce-scatter frames are combined straight out of its ring. */
static const reduce_link_ops_t datalink_shm_ops = {
    .post_send = link_post_send,
    .post_recv = link_post_recv,
    .wait = link_wait,
    .cancel = link_cancel,
    .post_recv_combine = link_post_recv_combine,
};

reduce_link_t ccoip_datalink_link(ccoip_datalink_t *dl) {
    /* rx_shm never goes back to 0 (a failing pipe breaks the link): what we see now holds for
     * every frame of an op that starts now. */
    bool combine = dl->shm_combine && (dl->sealed || __atomic_load_n(&dl->rx_shm, __ATOMIC_ACQUIRE));
    return (reduce_link_t){.ops = combine ? &datalink_shm_ops : &datalink_ops, .ctx = dl};
}

void ccoip_datalink_break(ccoip_datalink_t *dl, const char *why) {
    pthread_mutex_lock(&dl->lock);
    dl->stopping = true; /* an intended teardown: logged at info */
    break_locked(dl, why);
    pthread_mutex_unlock(&dl->lock);
}

bool ccoip_datalink_same_host(const ccoip_datalink_t *dl) { return dl->same_host; }

void ccoip_datalink_profile(ccoip_datalink_t *dl, const pprof_t *prof, uint32_t stream, uint32_t peer_rank) {
    pthread_mutex_lock(&dl->lock);
    dl->prof = prof;
    dl->prof_stream = stream;
    dl->prof_peer = peer_rank;
    pthread_mutex_unlock(&dl->lock);
}

bool ccoip_datalink_broken(const ccoip_datalink_t *dl) {
    ccoip_datalink_t *m = (ccoip_datalink_t *) dl;
    pthread_mutex_lock(&m->lock);
    bool broken = m->broken;
    pthread_mutex_unlock(&m->lock);
    return broken;
}

static void unseal(ccoip_datalink_t *dl) {
    if (!dl->sealed) return;
    ccoip_aead_free(&dl->tx);
    ccoip_aead_free(&dl->rx);
    free(dl->seal_buf);
    free(dl->open_buf);
    dl->sealed = false;
}

ccoip_datalink_t *ccoip_datalink_start(int fd, const char *name, const ccoip_session_t *sess) {
    ccoip_datalink_t *dl = calloc(1, sizeof *dl);
    if (dl == NULL) return NULL;
    if (sess != NULL && sess->encrypt) {
        dl->sealed = true;
        dl->seal_buf = malloc(SEALED_BYTES);
        dl->open_buf = malloc(SEALED_BYTES);
        bool ok = ccoip_aead_init(&dl->tx, sess->send, (ccoip_aead_cipher_t) sess->cipher);
        ok = ccoip_aead_init(&dl->rx, sess->recv, (ccoip_aead_cipher_t) sess->cipher) && ok;
        if (!ok) LOG_ERROR("ccoip", "data link %s: cannot seal with %s", name ? name : "?",
                           ccoip_aead_name((ccoip_aead_cipher_t) sess->cipher));
        else LOG_DEBUG("ccoip", "data link %s sealed with %s", name ? name : "?",
                       ccoip_aead_name((ccoip_aead_cipher_t) sess->cipher));
        if (!ok || dl->seal_buf == NULL || dl->open_buf == NULL) {
            unseal(dl);
            free(dl);
            return NULL;
        }
    }
    dl->same_host = ccoip_sock_same_host(fd);
    ccoip_sock_tune_data_link(fd, dl->same_host);
    const char *env = getenv("PCCL_SHM"), *ring = getenv("PCCL_SHM_RING_KIB"), *comb = getenv("PCCL_SHM_COMBINE");
    dl->shm_allowed = !dl->sealed && ccoip_shm_supported() && !(env && strcmp(env, "0") == 0);
    dl->shm_combine = !(comb && strcmp(comb, "0") == 0); /* 0: stage and combine in the ring (A/B runs) */
    dl->shm_ring = ccoip_shmpipe_ring_size(ring && *ring ? (size_t) strtoul(ring, NULL, 10) << 10 : SHM_RING_DEFAULT);
    dl->shm_state = dl->shm_allowed && dl->same_host ? SHM_WANT : SHM_NONE;
    dl->fd = fd;
    ccoip_splice_init(&dl->splice);
    snprintf(dl->name, sizeof dl->name, "%s", name ? name : "?");
    pthread_mutex_init(&dl->lock, NULL);
    pthread_cond_init(&dl->released, NULL);
    if (pthread_create(&dl->send_thread, NULL, send_main, dl) != 0) goto fail_send;
    if (pthread_create(&dl->recv_thread, NULL, recv_main, dl) != 0) goto fail_recv;
    return dl;
fail_recv:
    pthread_mutex_lock(&dl->lock);
    dl->stopping = true;
    break_locked(dl, "start failed");
    pthread_mutex_unlock(&dl->lock);
    pthread_join(dl->send_thread, NULL);
fail_send:
    LOG_ERROR("ccoip", "data link %s: cannot start its threads", dl->name);
    unseal(dl);
    pthread_cond_destroy(&dl->released);
    pthread_mutex_destroy(&dl->lock);
    free(dl);
    return NULL;
}

void ccoip_datalink_stop(ccoip_datalink_t *dl) {
    if (dl == NULL) return;
    pthread_mutex_lock(&dl->lock);
    dl->stopping = true;
    break_locked(dl, "stopped");
    pthread_mutex_unlock(&dl->lock);
    pthread_join(dl->send_thread, NULL);
    pthread_join(dl->recv_thread, NULL);
    /* Requests the threads were working on when the socket went down were completed by them. */
    ccoip_splice_close(&dl->splice);
    if (dl->tx_mapped) ccoip_shmpipe_close(&dl->txp);
    if (dl->rx_mapped) ccoip_shmpipe_close(&dl->rxp);
    unseal(dl);
    pthread_cond_destroy(&dl->released);
    pthread_mutex_destroy(&dl->lock);
    free(dl);
}

uint64_t ccoip_datalink_unacked(ccoip_datalink_t *dl) {
    uint64_t n = ccoip_sock_unacked(dl->fd);
    if (__atomic_load_n(&dl->tx_shm, __ATOMIC_ACQUIRE)) n += ccoip_shmpipe_unread(&dl->txp);
    return n;
}

bool ccoip_datalink_shm(const ccoip_datalink_t *dl, bool *tx, bool *rx) {
    ccoip_datalink_t *m = (ccoip_datalink_t *) dl;
    pthread_mutex_lock(&m->lock);
    bool done = m->shm_state != SHM_WAITING && !(m->shm_state == SHM_WANT && m->sends.count > 0);
    *tx = __atomic_load_n(&m->tx_shm, __ATOMIC_ACQUIRE) != 0;
    *rx = __atomic_load_n(&m->rx_shm, __ATOMIC_ACQUIRE) != 0;
    pthread_mutex_unlock(&m->lock);
    return done;
}
