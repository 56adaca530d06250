/* ccoip_peer_shared.c: the shared-state listener, serving and fetching (ccoip_peer_shared.h).
 *
 * The listener thread accepts and handshakes; a connection is kept only while a sync is being
 * served and only from a UUID the master announced for it (others: HELLO_ACK "unknown peer",
 * which the fetching side retries for a while, since it may be ahead of our RESULT). Each kept
 * connection gets a serving thread that answers its SS_REQUESTs one after another (byte ranges of
 * tensors): a header, then the bytes straight from the user's tensors (writev over host memory;
 * CUDA memory through a host staging buffer), until an empty request. The API thread ends serving
 * after the master's DONE, when every receiver is through. Fetching is ccoip_ss_fetch.c. */
#include "ccoip/peer/ccoip_peer_shared.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_os.h"
#include "ccoip/net/ccoip_conn.h"
#include "ccoip/net/ccoip_sealed.h"
#include "ccoip/peer/ccoip_env.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/net/ccoip_socket.h"
#include "cuda/cuda_table.h"
#include "ccoip/peer/ccoip_prof.h"
#include "ccoip/peer/ccoip_ss_mailbox.h"
#include "hash/hash.h"
#include "ccoip/peer/ccoip_ss_resume.h"
#include "log/log.h"
#include "threadpark/threadpark.h"

#define MOD "ccoip-ss"
#define HANDSHAKE_MS 2000
#define PORT_TRIES 2048
#define MAX_WORKERS 64
#define CHUNK ((size_t) 8 << 20)       /* bytes per send/receive call, and the staging size */
#define PROGRESS_BYTES ((uint64_t) 64 << 20) /* transfers above this log progress lines */
#define PROGRESS_MS 1000

typedef struct worker_t {
    pthread_t thread;
    int fd;
    ccoip_uuid_t uuid; /* the receiver's */
    char who[80];
    pcclComm_t *comm;
    ccoip_session_t sess; /* encrypted: the tensors go sealed */
    hash_xxh3_stream_t *hs; /* device ranges' hashes, as they are staged */
    bool corrupt;           /* the test hook PCCL_TEST_SS_CORRUPT, until it fired */
} worker_t;

struct ccoip_peer_ss_t {
    ccoip_listener_t listener;
    int64_t rate;     /* PCCL_SS_MAX_SEND_MBPS in bytes/s, 0: unlimited */
    int64_t stall_ms; /* PCCL_SS_TIMEOUT_MS: no progress for this long fails a transfer */
    pthread_mutex_t lock; /* guards everything below */
    bool serving;
    bool corrupt; /* PCCL_TEST_SS_CORRUPT, read at each sync: a test hook */
    const ccoip_ss_slot_t *slots;
    size_t nslots;
    ccoip_uuid_t allowed[CCOIP_MAX_PEER_ENTRIES];
    bool served[CCOIP_MAX_PEER_ENTRIES]; /* allowed[i] got all it asked for */
    uint32_t nallowed;
    worker_t *workers[MAX_WORKERS];
    int nworkers;
    _Atomic uint64_t tx;
    ccoip_ss_resume_t *resume; /* the API thread's only */
    ccoip_ss_mailbox_t *mailbox; /* distributors that dial us (ccoip_ss_mailbox.h) */
};

uint16_t ccoip_ss_port(const pcclComm_t *comm) { return comm->ss == NULL ? 0 : comm->ss->listener.port; }

int64_t ccoip_ss_stall_ms(const pcclComm_t *comm) { return comm->ss->stall_ms; }

ccoip_ss_resume_t **ccoip_ss_resume_of(pcclComm_t *comm) { return &comm->ss->resume; }

ccoip_ss_mailbox_t *ccoip_ss_mailbox_of(pcclComm_t *comm) { return comm->ss->mailbox; }

void ccoip_ss_serve_close(pcclComm_t *comm) {
    pthread_mutex_lock(&comm->ss->lock);
    comm->ss->serving = false;
    pthread_mutex_unlock(&comm->ss->lock);
}

static int by_slot_name(const void *key, const void *elem) {
    return strcmp((const char *) key, ((const ccoip_ss_slot_t *) elem)->name);
}

const ccoip_ss_slot_t *ccoip_ss_find(const ccoip_ss_slot_t *slots, size_t n, const char *name) {
    return n == 0 ? NULL : bsearch(name, slots, n, sizeof *slots, by_slot_name);
}

/* ---- progress lines and the send-rate cap ---- */

typedef struct xfer_t {
    const char *verb; /* "sent" / "received" */
    const char *peer;
    uint64_t total, done;
    int64_t t0, last_log, rate;
} xfer_t;

static void xfer_init(xfer_t *x, const char *verb, const char *peer, uint64_t total, int64_t rate) {
    x->verb = verb;
    x->peer = peer;
    x->total = total;
    x->done = 0;
    x->t0 = x->last_log = ccoip_now_ms();
    x->rate = rate;
}

static void xfer_log(const xfer_t *x, int64_t now) {
    double s = (double) (now - x->t0) / 1000.0;
    LOG_INFO(MOD, "shared state: %s %.1f of %.1f MiB %s %s (%.0f MB/s)", x->verb, (double) x->done / 1048576.0,
             (double) x->total / 1048576.0, x->verb[0] == 's' ? "to" : "from", x->peer,
             s > 0 ? (double) x->done / 1e6 / s : 0.0);
}

static void xfer_step(xfer_t *x, uint64_t n) {
    x->done += n;
    int64_t now = ccoip_now_ms();
    if (x->rate > 0) { /* sleep until the bytes so far fit the rate */
        int64_t due = x->t0 + (int64_t) ((double) x->done * 1000.0 / (double) x->rate);
        if (due > now) ccoip_sleep_ms((int) (due - now));
        now = ccoip_now_ms();
    }
    if (x->total > PROGRESS_BYTES && (now - x->last_log >= PROGRESS_MS || x->done == x->total)) {
        x->last_log = now;
        xfer_log(x, now);
    }
}

/* ---- serving ---- */

/* The test hook PCCL_TEST_SS_CORRUPT (docs/environment.md): flips the lowest bit of the first byte
 * of the first range this connection sends, after its hash was taken, as a fault on the way
 * would. */
static void corrupt_once(worker_t *w, const ccoip_ss_piece_t *pc, uint8_t *byte) {
    *byte ^= 1;
    w->corrupt = false;
    LOG_WARN(MOD, "shared state: test hook PCCL_TEST_SS_CORRUPT: flipping a bit of byte %llu of tensor \"%s\" sent to %s",
             (unsigned long long) pc->off, pc->slot->name, w->who);
}

static ccoip_status_t send_device(worker_t *w, ccoip_sealed_t *out, const ccoip_ss_piece_t *pc, uint8_t **stage,
                                  xfer_t *x) {
    const cuda_table_t *cu = cuda_table();
    if (cu == NULL) return CCOIP_ERR_INVALID;
    if (*stage == NULL && (*stage = malloc(CHUNK)) == NULL) return CCOIP_ERR_NOMEM;
    size_t step = x->rate > 0 ? CHUNK / 8 : CHUNK;
    hash_xxh3_stream_reset(w->hs);
    for (uint64_t off = 0; off < pc->len;) {
        size_t n = pc->len - off < step ? (size_t) (pc->len - off) : step;
        cuda_status_t cs = cu->memcpy_d2h(*stage, (const uint8_t *) pc->slot->data + pc->off + off, n, NULL);
        if (cs != CUDA_OK) {
            LOG_ERROR(MOD, "shared state: copying tensor \"%s\" from the GPU failed: %s", pc->slot->name,
                      cu->status_string(cs));
            return CCOIP_ERR_IO;
        }
        hash_xxh3_stream_update(w->hs, *stage, n);
        if (w->corrupt && off == 0) corrupt_once(w, pc, *stage);
        ccoip_status_t st = ccoip_sealed_write(out, *stage, n);
        if (st != CCOIP_OK) return st;
        off += n;
        xfer_step(x, n);
    }
    uint8_t tr[CCOIP_SS_TRAILER];
    ccoip_ss_put_hash(tr, hash_xxh3_stream_digest(w->hs));
    return ccoip_sealed_write(out, tr, sizeof tr);
}

/* Sends what is batched in iov and counts its tensor bytes (trailers are not counted). */
static ccoip_status_t send_batch(ccoip_sealed_t *out, ccoip_iov_t *iov, int *niov, size_t *batch, xfer_t *x,
                                 _Atomic uint64_t *tx) {
    ccoip_status_t st = *niov > 0 ? ccoip_sealed_writev(out, iov, *niov) : CCOIP_OK;
    if (st == CCOIP_OK && *niov > 0) {
        atomic_fetch_add(tx, *batch);
        xfer_step(x, *batch);
    }
    *niov = 0;
    *batch = 0;
    return st;
}

/* The gathered sends of one request's host ranges. */
#define GATHER_MAX 64

typedef struct gather_t {
    ccoip_iov_t iov[GATHER_MAX];
    int n;
    size_t batch, cap;
    uint8_t flipped; /* the test hook's byte */
} gather_t;

static ccoip_status_t gather(gather_t *g, void *base, size_t len, bool counts, ccoip_sealed_t *out, xfer_t *x,
                             _Atomic uint64_t *tx) {
    g->iov[g->n].base = base;
    g->iov[g->n++].len = len;
    if (counts) g->batch += len;
    return g->batch >= g->cap || g->n == GATHER_MAX ? send_batch(out, g->iov, &g->n, &g->batch, x, tx) : CCOIP_OK;
}

/* One host range: its bytes straight from the tensor in pieces of up to the batch size, then
 * its hash (trailer: the caller's, alive until the request is flushed). */
static ccoip_status_t send_host(worker_t *w, gather_t *g, const ccoip_ss_piece_t *pc, uint8_t *trailer,
                                ccoip_sealed_t *out, xfer_t *x) {
    uint8_t *mem = (uint8_t *) pc->slot->data + pc->off;
    ccoip_ss_put_hash(trailer, hash_xxh3(mem, (size_t) pc->len));
    ccoip_status_t st = CCOIP_OK;
    uint64_t off = 0;
    if (w->corrupt && pc->len > 0) {
        g->flipped = mem[0];
        corrupt_once(w, pc, &g->flipped);
        st = gather(g, &g->flipped, 1, true, out, x, &w->comm->ss->tx);
        off = 1;
    }
    while (off < pc->len && st == CCOIP_OK) {
        size_t take = pc->len - off < g->cap - g->batch ? (size_t) (pc->len - off) : g->cap - g->batch;
        st = gather(g, mem + off, take, true, out, x, &w->comm->ss->tx);
        off += take;
    }
    return st == CCOIP_OK ? gather(g, trailer, CCOIP_SS_TRAILER, false, out, x, &w->comm->ss->tx) : st;
}

/* Sends the ranges in order, each followed by its hash: host memory in writev batches of up to
 * CHUNK bytes (small ranges share a call), device memory staged. */
static ccoip_status_t send_ranges(worker_t *w, ccoip_sealed_t *out, const ccoip_ss_piece_t *pc, uint32_t n,
                                  xfer_t *x, uint8_t **stage) {
    _Atomic uint64_t *tx = &w->comm->ss->tx;
    uint8_t trailers[CCOIP_SS_MAX_RANGES][CCOIP_SS_TRAILER];
    gather_t g;
    g.n = 0;
    g.batch = 0;
    g.cap = x->rate > 0 ? CHUNK / 8 : CHUNK;
    ccoip_status_t st = CCOIP_OK;
    for (uint32_t i = 0; i < n && st == CCOIP_OK; i++) {
        if (!pc[i].slot->device) {
            st = send_host(w, &g, &pc[i], trailers[i], out, x);
            continue;
        }
        st = send_batch(out, g.iov, &g.n, &g.batch, x, tx);
        uint64_t before = x->done;
        if (st == CCOIP_OK) st = send_device(w, out, &pc[i], stage, x);
        atomic_fetch_add(tx, x->done - before);
    }
    if (st == CCOIP_OK) st = send_batch(out, g.iov, &g.n, &g.batch, x, tx);
    if (st == CCOIP_OK) st = ccoip_sealed_flush(out);
    return st;
}

static ccoip_status_t send_header(int fd, uint8_t status, ccoip_ss_item_t *items, uint32_t n) {
    ccoip_packet_t h;
    memset(&h, 0, sizeof h);
    h.type = CCOIP_PKT_SS_HEADER;
    h.u.ss_header.status = status;
    h.u.ss_header.count = n;
    h.u.ss_header.items = items;
    return ccoip_conn_send(fd, &h);
}

static void mark_served(ccoip_peer_ss_t *ss, const ccoip_uuid_t *uuid) {
    pthread_mutex_lock(&ss->lock);
    for (uint32_t i = 0; i < ss->nallowed; i++)
        if (memcmp(ss->allowed[i].b, uuid->b, 16) == 0) ss->served[i] = true;
    pthread_mutex_unlock(&ss->lock);
}

/* The slots and bounds of a request's ranges (the slots stay valid until serve_end, which joins
 * this thread first); a header status, with one log line when it is not OK. */
static uint8_t find_ranges(worker_t *w, const ccoip_ss_request_t *rq, ccoip_ss_piece_t *pc, ccoip_ss_item_t *items,
                           uint64_t *total) {
    ccoip_peer_ss_t *ss = w->comm->ss;
    uint8_t status = CCOIP_SSH_OK;
    pthread_mutex_lock(&ss->lock);
    if (!ss->serving) status = CCOIP_SSH_NOT_SERVING;
    for (uint32_t i = 0; i < rq->count && status == CCOIP_SSH_OK; i++) {
        const ccoip_ss_range_t *r = &rq->ranges[i];
        const ccoip_ss_slot_t *s = ccoip_ss_find(ss->slots, ss->nslots, r->name);
        if (s == NULL || r->offset > s->bytes || r->length > s->bytes - r->offset) {
            status = CCOIP_SSH_UNKNOWN_TENSOR;
            LOG_WARN(MOD, "shared state: %s asked for bytes %llu+%llu of tensor \"%s\", which we do not hold", w->who,
                     (unsigned long long) r->offset, (unsigned long long) r->length, r->name);
            break;
        }
        pc[i] = (ccoip_ss_piece_t){s, r->offset, r->length};
        items[i] = (ccoip_ss_item_t){(char *) s->name, s->bytes};
        *total += r->length;
    }
    pthread_mutex_unlock(&ss->lock);
    if (status == CCOIP_SSH_NOT_SERVING) LOG_WARN(MOD, "shared state: %s asked after the sync ended", w->who);
    return status;
}

/* One request: its header, then the bytes of its ranges. False when the connection is done for. */
static bool serve_request(worker_t *w, ccoip_sealed_t *out, const ccoip_ss_request_t *rq, xfer_t *x,
                          uint8_t **stage) {
    ccoip_ss_piece_t pc[CCOIP_SS_MAX_RANGES];
    ccoip_ss_item_t items[CCOIP_SS_MAX_RANGES];
    uint64_t total = 0;
    uint8_t status = find_ranges(w, rq, pc, items, &total);
    if (status != CCOIP_SSH_OK) {
        send_header(w->fd, status, NULL, 0);
        return false;
    }
    uint64_t before = x->done;
    x->total += total;
    ccoip_status_t st = send_header(w->fd, status, items, rq->count);
    if (st == CCOIP_OK) st = send_ranges(w, out, pc, rq->count, x, stage);
    if (st != CCOIP_OK)
        LOG_WARN(MOD, "shared state: sending to %s failed after %llu of %llu bytes: %s", w->who,
                 (unsigned long long) (x->done - before), (unsigned long long) total, ccoip_status_str(st));
    return st == CCOIP_OK;
}

/* One connection, start to end: requests one after another until the receiver's empty one (it
 * has all it wanted from us) or until serve_end cuts the connection. */
static void *worker_main(void *arg) {
    worker_t *w = arg;
    ccoip_os_name_thread("pccl-ss-serve");
    ccoip_peer_ss_t *ss = w->comm->ss;
    ccoip_sealed_t out;
    if ((w->hs = hash_xxh3_stream_new()) == NULL ||
        !ccoip_sealed_init(&out, w->fd, w->sess.encrypt ? w->sess.send : NULL, w->sess.cipher)) {
        LOG_ERROR(MOD, "shared state: out of memory serving %s", w->who);
        hash_xxh3_stream_free(w->hs);
        return NULL;
    }
    xfer_t x;
    xfer_init(&x, "sent", w->who, 0, ss->rate);
    uint8_t *stage = NULL;
    for (int k = 0;; k++) {
        ccoip_packet_t p;
        /* The first request comes at once; later ones when the receiver has work for us, which may
         * be after another distributor failed: no deadline (serve_end cuts the connection). */
        ccoip_status_t st = ccoip_conn_recv(w->fd, &p, CCOIP_MAX_PAYLOAD, k == 0 ? ccoip_now_ms() + ss->stall_ms : -1);
        if (st != CCOIP_OK || p.type != CCOIP_PKT_SS_REQUEST) {
            if (st == CCOIP_OK) ccoip_packet_free(&p);
            if (k == 0 || st == CCOIP_OK)
                LOG_WARN(MOD, "shared state: %s sent no valid request (%s)", w->who, st == CCOIP_OK ? "wrong packet" : ccoip_status_str(st));
            break;
        }
        bool more = p.u.ss_request.count > 0 && serve_request(w, &out, &p.u.ss_request, &x, &stage);
        if (p.u.ss_request.count == 0) {
            LOG_DEBUG(MOD, "shared state: %s is through (%llu bytes sent to it)", w->who, (unsigned long long) x.done);
            mark_served(ss, &w->uuid);
        }
        ccoip_packet_free(&p);
        if (!more) break;
    }
    free(stage);
    ccoip_sealed_free(&out);
    hash_xxh3_stream_free(w->hs);
    return NULL;
}

/* A serving thread for connection fd of receiver uuid (handshake done), unless serving ended or
 * we are full; NULL: refused (refusal says why; *status the HELLO status a caller may answer). */
static worker_t *add_worker(pcclComm_t *comm, int fd, const ccoip_uuid_t *uuid, const ccoip_session_t *sess,
                            const char *who, bool known, const char **refusal, uint8_t *status) {
    ccoip_peer_ss_t *ss = comm->ss;
    worker_t *w = NULL;
    pthread_mutex_lock(&ss->lock);
    if (!known) *refusal = "peer not announced by the master", *status = CCOIP_HELLO_UNKNOWN_PEER;
    else if (!ss->serving) *refusal = "serving ended", *status = CCOIP_HELLO_BUSY;
    else if (ss->nworkers == MAX_WORKERS || (w = calloc(1, sizeof *w)) == NULL) *refusal = "too many requests", *status = CCOIP_HELLO_BUSY;
    if (w != NULL) {
        w->fd = fd;
        w->uuid = *uuid;
        w->comm = comm;
        w->sess = *sess;
        w->corrupt = ss->corrupt;
        snprintf(w->who, sizeof w->who, "%s", who);
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            *refusal = "cannot start a serving thread";
            free(w);
            w = NULL;
        } else {
            ss->workers[ss->nworkers++] = w;
        }
    }
    pthread_mutex_unlock(&ss->lock);
    return w;
}

bool ccoip_ss_serve_fd(pcclComm_t *comm, int fd, const ccoip_uuid_t *uuid, const ccoip_session_t *sess,
                       const char *who) {
    const char *refusal = NULL;
    uint8_t status = CCOIP_HELLO_OK;
    if (add_worker(comm, fd, uuid, sess, who, true, &refusal, &status) != NULL) return true;
    LOG_WARN(MOD, "shared state: not serving %s: %s", who, refusal);
    ccoip_sock_close(fd);
    return false;
}

bool ccoip_ss_serving(pcclComm_t *comm) {
    pthread_mutex_lock(&comm->ss->lock);
    bool on = comm->ss->serving;
    pthread_mutex_unlock(&comm->ss->lock);
    return on;
}

void ccoip_ss_take_incoming(pcclComm_t *comm, int fd, const char *who) {
    ccoip_peer_ss_t *ss = comm->ss;
    ccoip_hello_t hello;
    char why[96];
    int64_t deadline = ccoip_now_ms() + HANDSHAKE_MS;
    if (!ccoip_conn_read_hello(fd, CCOIP_ROLE_SHARED_STATE, ccoip_comm_key(comm), comm->encrypt, deadline, &hello, why,
                               sizeof why)) {
        LOG_WARN(MOD, "refused shared-state connection from %s: %s", who, why);
        ccoip_sock_close(fd);
        return;
    }
    if (hello.role == CCOIP_ROLE_SS_REVERSED) { /* a distributor dialling us back (ccoip_ss_dial.h) */
        ccoip_ss_mailbox_arrived(ss->mailbox, comm, fd, &hello, who, deadline);
        return;
    }
    const ccoip_uuid_t uuid = hello.uuid;
    pthread_mutex_lock(&ss->lock);
    bool in_sync = ss->serving, known = false;
    for (uint32_t i = 0; ss->serving && i < ss->nallowed; i++) known |= memcmp(ss->allowed[i].b, uuid.b, 16) == 0;
    bool full = ss->nworkers == MAX_WORKERS;
    pthread_mutex_unlock(&ss->lock);
    if (!in_sync) {
        /* A receiver holds a RESULT that names us only while every distributor is in that sync
         * (each serves from before its SYNC until the master's DONE): ours ended (failed, e.g. the
         * master died before our RESULT came). Final, so that it fails now instead of retrying. */
        ccoip_conn_answer_hello(fd, CCOIP_HELLO_NOT_SERVING, NULL);
        LOG_DEBUG(MOD, "refused shared-state connection from %s: in no sync", who);
        ccoip_sock_close(fd);
        return;
    }
    /* The proof outside the lock: it waits for the caller's AUTH. */
    if (known && full) {
        ccoip_conn_answer_hello(fd, CCOIP_HELLO_BUSY, NULL);
        LOG_WARN(MOD, "refused shared-state connection from %s: too many requests", who);
        ccoip_sock_close(fd);
        return;
    }
    ccoip_session_t sess;
    memset(&sess, 0, sizeof sess);
    if (known && !ccoip_conn_accept_hello(fd, &hello, ccoip_comm_key(comm), &sess, deadline, why, sizeof why)) {
        LOG_WARN(MOD, "refused shared-state connection from %s: %s", who, why);
        ccoip_sock_close(fd);
        return;
    }
    const char *refusal = NULL;
    uint8_t status = CCOIP_HELLO_OK;
    if (add_worker(comm, fd, &uuid, &sess, who, known, &refusal, &status) != NULL) return;
    if (status == CCOIP_HELLO_UNKNOWN_PEER) ccoip_conn_answer_hello(fd, status, NULL); /* after OK: just close */
    if (status == CCOIP_HELLO_UNKNOWN_PEER) LOG_DEBUG(MOD, "refused shared-state connection from %s: %s", who, refusal);
    else LOG_WARN(MOD, "refused shared-state connection from %s: %s", who, refusal);
    ccoip_sock_close(fd);
}

static void handle_incoming(void *ctx, int fd, const char *who) { ccoip_ss_take_incoming(ctx, fd, who); }

pcclResult_t ccoip_ss_start(pcclComm_t *comm) {
    ccoip_peer_ss_t *ss = calloc(1, sizeof *ss);
    if (ss == NULL) return pcclInternalError;
    ccoip_listener_init(&ss->listener);
    ss->rate = ccoip_env_num("PCCL_SS_MAX_SEND_MBPS", 0) * 1000000;
    ss->stall_ms = ccoip_env_num("PCCL_SS_TIMEOUT_MS", 30000);
    pthread_mutex_init(&ss->lock, NULL);
    comm->ss = ss;
    if ((ss->mailbox = ccoip_ss_mailbox_new()) == NULL) return pcclInternalError;
    /* Right above the p2p listener: the same bump allocation (PCCL_P2P_FIRST_PORT and up). */
    uint16_t first = comm->p2p.listener.port < 65535 ? (uint16_t) (comm->p2p.listener.port + 1) : 48150;
    return ccoip_listener_start(&ss->listener, comm->params.master_address.inet.protocol, first, PORT_TRIES,
                                handle_incoming, comm, "shared-state")
               ? pcclSuccess
               : pcclInternalError;
}

void ccoip_ss_stop(pcclComm_t *comm) {
    ccoip_peer_ss_t *ss = comm->ss;
    if (ss == NULL) return;
    ccoip_listener_stop(&ss->listener);
    ccoip_ss_serve_end(comm);
    ccoip_ss_resume_free(ss->resume);
    ccoip_ss_mailbox_free(ss->mailbox);
    pthread_mutex_destroy(&ss->lock);
    free(ss);
    comm->ss = NULL;
}

void ccoip_ss_serve_begin(pcclComm_t *comm, const ccoip_ss_slot_t *slots, size_t n) {
    ccoip_peer_ss_t *ss = comm->ss;
    int64_t rate = ccoip_env_num("PCCL_SS_MAX_SEND_MBPS", 0) * 1000000; /* read at each sync */
    bool corrupt = ccoip_env_num("PCCL_TEST_SS_CORRUPT", 0) > 0;
    pthread_mutex_lock(&ss->lock);
    ss->rate = rate;
    ss->corrupt = corrupt;
    ss->serving = true;
    ss->slots = slots;
    ss->nslots = n;
    ss->nallowed = 0;
    atomic_store(&ss->tx, 0);
    pthread_mutex_unlock(&ss->lock);
}

void ccoip_ss_serve_allow(pcclComm_t *comm, const ccoip_ss_result_t *r) {
    ccoip_peer_ss_t *ss = comm->ss;
    pthread_mutex_lock(&ss->lock);
    for (uint32_t i = 0; i < r->nserve && ss->nallowed < CCOIP_MAX_PEER_ENTRIES; i++) {
        ss->served[ss->nallowed] = false;
        ss->allowed[ss->nallowed++] = r->serve[i].uuid;
    }
    pthread_mutex_unlock(&ss->lock);
}

bool ccoip_ss_serve_drain(pcclComm_t *comm) {
    ccoip_peer_ss_t *ss = comm->ss;
    uint64_t last = atomic_load(&ss->tx);
    int64_t since = ccoip_now_ms();
    for (;;) {
        pthread_mutex_lock(&ss->lock);
        bool all = true;
        for (uint32_t i = 0; i < ss->nallowed; i++) all = all && ss->served[i];
        pthread_mutex_unlock(&ss->lock);
        if (all) return true;
        uint64_t tx = atomic_load(&ss->tx);
        int64_t now = ccoip_now_ms();
        if (tx != last) last = tx, since = now;
        else if (now - since > ss->stall_ms || atomic_load(&comm->stopping)) return false;
        uint32_t nap = 0;
        tpark_wait(&nap, 0, 5 * 1000 * 1000); /* 5 ms */
    }
}

uint64_t ccoip_ss_serve_end(pcclComm_t *comm) {
    ccoip_peer_ss_t *ss = comm->ss;
    worker_t *w[MAX_WORKERS];
    pthread_mutex_lock(&ss->lock);
    ss->serving = false;
    ss->slots = NULL;
    ss->nslots = 0;
    ss->nallowed = 0;
    int n = ss->nworkers;
    memcpy(w, ss->workers, (size_t) n * sizeof *w);
    ss->nworkers = 0;
    /* Normally every worker is done (the master's DONE waits for all receivers); a stalled one
     * is cut off here. The fds stay open until joined, so shutdown cannot hit a reused fd. */
    for (int i = 0; i < n; i++) ccoip_sock_shutdown(w[i]->fd);
    pthread_mutex_unlock(&ss->lock);
    for (int i = 0; i < n; i++) {
        pthread_join(w[i]->thread, NULL);
        ccoip_sock_close(w[i]->fd);
        free(w[i]);
    }
    return atomic_load(&ss->tx);
}
