/* ccoip_peer_shared.c: the shared-state listener, serving and fetching (ccoip_peer_shared.h).
 *
 * The listener thread accepts and handshakes; a connection is kept only while a sync is being
 * served and only from a UUID the master announced for it (others: HELLO_ACK "unknown peer",
 * which the fetching side retries for a while, since it may be ahead of our RESULT). Each kept
 * connection gets a serving thread that answers one SS_REQUEST: a header, then the bytes straight
 * from the user's tensors (writev over host memory; CUDA memory through a host staging buffer).
 * The API thread ends serving after the master's DONE, when every receiver is through. */
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
} worker_t;

struct ccoip_peer_ss_t {
    ccoip_listener_t listener;
    int64_t rate;     /* PCCL_SS_MAX_SEND_MBPS in bytes/s, 0: unlimited */
    int64_t stall_ms; /* PCCL_SS_TIMEOUT_MS: no progress for this long fails a transfer */
    pthread_mutex_t lock; /* guards everything below */
    bool serving;
    const ccoip_ss_slot_t *slots;
    size_t nslots;
    ccoip_uuid_t allowed[CCOIP_MAX_PEER_ENTRIES];
    bool served[CCOIP_MAX_PEER_ENTRIES]; /* allowed[i] got all it asked for */
    uint32_t nallowed;
    worker_t *workers[MAX_WORKERS];
    int nworkers;
    _Atomic uint64_t tx;
};

uint16_t ccoip_ss_port(const pcclComm_t *comm) { return comm->ss == NULL ? 0 : comm->ss->listener.port; }

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

static ccoip_status_t send_device(ccoip_sealed_t *out, const ccoip_ss_slot_t *s, uint8_t **stage, xfer_t *x) {
    const cuda_table_t *cu = cuda_table();
    if (cu == NULL) return CCOIP_ERR_INVALID;
    if (*stage == NULL && (*stage = malloc(CHUNK)) == NULL) return CCOIP_ERR_NOMEM;
    size_t step = x->rate > 0 ? CHUNK / 8 : CHUNK;
    for (uint64_t off = 0; off < s->bytes;) {
        size_t n = s->bytes - off < step ? (size_t) (s->bytes - off) : step;
        cuda_status_t cs = cu->memcpy_d2h(*stage, (const uint8_t *) s->data + off, n, NULL);
        if (cs != CUDA_OK) {
            LOG_ERROR(MOD, "shared state: copying tensor \"%s\" from the GPU failed: %s", s->name, cu->status_string(cs));
            return CCOIP_ERR_IO;
        }
        ccoip_status_t st = ccoip_sealed_write(out, *stage, n);
        if (st != CCOIP_OK) return st;
        off += n;
        xfer_step(x, n);
    }
    return CCOIP_OK;
}

/* Sends the tensors in order: host memory in writev batches of up to CHUNK bytes (small tensors
 * share a call), device memory staged. */
static ccoip_status_t send_tensors(ccoip_sealed_t *out, const ccoip_ss_slot_t **sl, uint32_t n, xfer_t *x,
                                   _Atomic uint64_t *tx) {
    enum { MAX_IOV = 64 };
    ccoip_iov_t iov[MAX_IOV];
    int niov = 0;
    size_t batch = 0, cap = x->rate > 0 ? CHUNK / 8 : CHUNK;
    uint8_t *stage = NULL;
    ccoip_status_t st = CCOIP_OK;
    for (uint32_t i = 0; i < n && st == CCOIP_OK; i++) {
        const ccoip_ss_slot_t *s = sl[i];
        if (s->device) {
            if (niov > 0) st = ccoip_sealed_writev(out, iov, niov);
            if (st == CCOIP_OK && niov > 0) {
                atomic_fetch_add(tx, batch);
                xfer_step(x, batch);
            }
            niov = 0;
            batch = 0;
            uint64_t before = x->done;
            if (st == CCOIP_OK) st = send_device(out, s, &stage, x);
            atomic_fetch_add(tx, x->done - before);
            continue;
        }
        for (uint64_t off = 0; off < s->bytes && st == CCOIP_OK;) {
            size_t take = s->bytes - off < cap - batch ? (size_t) (s->bytes - off) : cap - batch;
            iov[niov].base = (uint8_t *) s->data + off;
            iov[niov++].len = take;
            batch += take;
            off += take;
            if (batch == cap || niov == MAX_IOV) {
                st = ccoip_sealed_writev(out, iov, niov);
                if (st == CCOIP_OK) {
                    atomic_fetch_add(tx, batch);
                    xfer_step(x, batch);
                }
                niov = 0;
                batch = 0;
            }
        }
    }
    if (st == CCOIP_OK && niov > 0) {
        st = ccoip_sealed_writev(out, iov, niov);
        if (st == CCOIP_OK) {
            atomic_fetch_add(tx, batch);
            xfer_step(x, batch);
        }
    }
    if (st == CCOIP_OK) st = ccoip_sealed_flush(out);
    free(stage);
    return st;
}

static void send_header(int fd, uint8_t status, ccoip_ss_item_t *items, uint32_t n) {
    ccoip_packet_t h;
    memset(&h, 0, sizeof h);
    h.type = CCOIP_PKT_SS_HEADER;
    h.u.ss_header.status = status;
    h.u.ss_header.count = n;
    h.u.ss_header.items = items;
    ccoip_conn_send(fd, &h);
}

static void mark_served(ccoip_peer_ss_t *ss, const ccoip_uuid_t *uuid) {
    pthread_mutex_lock(&ss->lock);
    for (uint32_t i = 0; i < ss->nallowed; i++)
        if (memcmp(ss->allowed[i].b, uuid->b, 16) == 0) ss->served[i] = true;
    pthread_mutex_unlock(&ss->lock);
}

/* One request on one connection, start to end. */
static void *worker_main(void *arg) {
    worker_t *w = arg;
    ccoip_os_name_thread("pccl-ss-serve");
    ccoip_peer_ss_t *ss = w->comm->ss;
    ccoip_packet_t p;
    ccoip_status_t st = ccoip_conn_recv(w->fd, &p, CCOIP_MAX_PAYLOAD, ccoip_now_ms() + ss->stall_ms);
    if (st != CCOIP_OK || p.type != CCOIP_PKT_SS_REQUEST) {
        if (st == CCOIP_OK) ccoip_packet_free(&p);
        LOG_WARN(MOD, "shared state: %s sent no valid request (%s)", w->who, st == CCOIP_OK ? "wrong packet" : ccoip_status_str(st));
        return NULL;
    }
    uint32_t n = p.u.ss_request.count;
    const ccoip_ss_slot_t **sl = calloc(n + 1, sizeof *sl);
    ccoip_ss_item_t *items = calloc(n + 1, sizeof *items);
    uint8_t status = CCOIP_SSH_OK;
    uint64_t total = 0;
    const char *missing = NULL;
    pthread_mutex_lock(&ss->lock);
    if (!ss->serving) status = CCOIP_SSH_NOT_SERVING;
    for (uint32_t i = 0; i < n && status == CCOIP_SSH_OK && sl != NULL && items != NULL; i++) {
        sl[i] = ccoip_ss_find(ss->slots, ss->nslots, p.u.ss_request.names[i].name);
        if (sl[i] == NULL) {
            status = CCOIP_SSH_UNKNOWN_TENSOR;
            missing = p.u.ss_request.names[i].name;
            break;
        }
        items[i].name = (char *) sl[i]->name;
        items[i].size = sl[i]->bytes;
        total += sl[i]->bytes;
    }
    /* Slots stay valid until serve_end, which joins this thread first. */
    pthread_mutex_unlock(&ss->lock);
    if (sl == NULL || items == NULL) {
        LOG_ERROR(MOD, "shared state: out of memory serving %s", w->who);
    } else if (status != CCOIP_SSH_OK) {
        if (missing != NULL) LOG_WARN(MOD, "shared state: %s asked for tensor \"%s\", which we do not hold", w->who, missing);
        else LOG_WARN(MOD, "shared state: %s asked after the sync ended", w->who);
        send_header(w->fd, status, NULL, 0);
    } else {
        send_header(w->fd, status, items, n);
        xfer_t x;
        xfer_init(&x, "sent", w->who, total, ss->rate);
        ccoip_sealed_t out;
        st = ccoip_sealed_init(&out, w->fd, w->sess.encrypt ? w->sess.send : NULL, w->sess.cipher) ? CCOIP_OK : CCOIP_ERR_NOMEM;
        if (st == CCOIP_OK) st = send_tensors(&out, sl, n, &x, &ss->tx);
        ccoip_sealed_free(&out);
        if (st != CCOIP_OK)
            LOG_WARN(MOD, "shared state: sending to %s failed after %llu of %llu bytes: %s", w->who,
                     (unsigned long long) x.done, (unsigned long long) total, ccoip_status_str(st));
        else LOG_DEBUG(MOD, "shared state: sent %u tensors (%llu bytes) to %s", n, (unsigned long long) total, w->who);
        if (st == CCOIP_OK) mark_served(ss, &w->uuid);
    }
    free(sl);
    free(items);
    ccoip_packet_free(&p);
    return NULL;
}

static void handle_incoming(void *ctx, int fd, const char *who) {
    pcclComm_t *comm = ctx;
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
    const ccoip_uuid_t uuid = hello.uuid;
    const char *refusal = NULL;
    uint8_t status = CCOIP_HELLO_OK;
    worker_t *w = NULL;
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
    pthread_mutex_lock(&ss->lock);
    if (!known) refusal = "peer not announced by the master", status = CCOIP_HELLO_UNKNOWN_PEER;
    else if (!ss->serving) refusal = "serving ended", status = CCOIP_HELLO_BUSY;
    else if (ss->nworkers == MAX_WORKERS || (w = calloc(1, sizeof *w)) == NULL) refusal = "too many requests", status = CCOIP_HELLO_BUSY;
    if (w != NULL) {
        w->fd = fd;
        w->uuid = uuid;
        w->comm = comm;
        w->sess = sess;
        snprintf(w->who, sizeof w->who, "%s", who);
        if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
            refusal = "cannot start a serving thread";
            free(w);
            w = NULL;
        } else {
            ss->workers[ss->nworkers++] = w;
        }
    }
    pthread_mutex_unlock(&ss->lock);
    if (w != NULL) return;
    if (status == CCOIP_HELLO_UNKNOWN_PEER) ccoip_conn_answer_hello(fd, status, NULL); /* after OK: just close */
    if (status == CCOIP_HELLO_UNKNOWN_PEER) LOG_DEBUG(MOD, "refused shared-state connection from %s: %s", who, refusal);
    else LOG_WARN(MOD, "refused shared-state connection from %s: %s", who, refusal);
    ccoip_sock_close(fd);
}

pcclResult_t ccoip_ss_start(pcclComm_t *comm) {
    ccoip_peer_ss_t *ss = calloc(1, sizeof *ss);
    if (ss == NULL) return pcclInternalError;
    ccoip_listener_init(&ss->listener);
    ss->rate = ccoip_env_num("PCCL_SS_MAX_SEND_MBPS", 0) * 1000000;
    ss->stall_ms = ccoip_env_num("PCCL_SS_TIMEOUT_MS", 30000);
    pthread_mutex_init(&ss->lock, NULL);
    comm->ss = ss;
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
    pthread_mutex_destroy(&ss->lock);
    free(ss);
    comm->ss = NULL;
}

void ccoip_ss_serve_begin(pcclComm_t *comm, const ccoip_ss_slot_t *slots, size_t n) {
    ccoip_peer_ss_t *ss = comm->ss;
    pthread_mutex_lock(&ss->lock);
    ss->serving = true;
    ss->slots = slots;
    ss->nslots = n;
    ss->nallowed = 0;
    atomic_store(&ss->tx, 0);
    pthread_mutex_unlock(&ss->lock);
}

void ccoip_ss_serve_allow(pcclComm_t *comm, const ccoip_ss_client_t *clients, uint32_t n) {
    ccoip_peer_ss_t *ss = comm->ss;
    pthread_mutex_lock(&ss->lock);
    for (uint32_t i = 0; i < n && ss->nallowed < CCOIP_MAX_PEER_ENTRIES; i++) {
        ss->served[ss->nallowed] = false;
        ss->allowed[ss->nallowed++] = clients[i].uuid;
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

/* ---- fetching ---- */

static int connect_distributor(pcclComm_t *comm, const ccoip_ss_fetch_t *f, const char *name, ccoip_session_t *sess) {
    ccoip_socket_address_t a = {f->addr, f->ss_port};
    int64_t deadline = ccoip_now_ms() + ccoip_env_num("PCCL_SS_CONNECT_TIMEOUT_MS", 10000);
    ccoip_status_t st = CCOIP_ERR_TIMEOUT;
    while (ccoip_now_ms() < deadline && !atomic_load(&comm->stopping)) {
        int64_t left = deadline - ccoip_now_ms();
        int fd = ccoip_sock_connect(&a, (int) (left < 1000 ? left : 1000), &st);
        if (fd < 0) {
            if (st == CCOIP_ERR_REFUSED) break; /* nobody listens: that peer is gone */
            continue;
        }
        ccoip_hello_ack_t ack;
        memset(&ack, 0, sizeof ack);
        *sess = ccoip_comm_session(comm); /* encrypted: the tensors come sealed (ccoip_sealed.h) */
        st = ccoip_conn_hello(fd, CCOIP_ROLE_SHARED_STATE, &comm->uuid, ccoip_comm_key(comm), sess,
                              ccoip_now_ms() + HANDSHAKE_MS, name, &ack);
        if (st == CCOIP_OK) return fd;
        ccoip_sock_close(fd);
        /* UNKNOWN_PEER: it has not read its RESULT yet; BUSY: retry too. Anything else is final
         * (NOT_SERVING: its sync ended, it will never serve this one). */
        if (st != CCOIP_ERR_REFUSED || (ack.status != CCOIP_HELLO_UNKNOWN_PEER && ack.status != CCOIP_HELLO_BUSY)) break;
        ccoip_sleep_ms(10);
    }
    LOG_ERROR(MOD, "shared state: cannot reach distributor %s: %s", name, ccoip_status_str(st));
    return -1;
}

static ccoip_status_t recv_device(ccoip_sealed_t *in, const ccoip_ss_slot_t *s, uint8_t **stage, int64_t stall_ms,
                                  xfer_t *x) {
    const cuda_table_t *cu = cuda_table();
    if (cu == NULL) return CCOIP_ERR_INVALID;
    if (*stage == NULL && (*stage = malloc(CHUNK)) == NULL) return CCOIP_ERR_NOMEM;
    for (uint64_t off = 0; off < s->bytes;) {
        size_t n = s->bytes - off < CHUNK ? (size_t) (s->bytes - off) : CHUNK;
        ccoip_status_t st = ccoip_sealed_read(in, *stage, n, ccoip_now_ms() + stall_ms);
        if (st != CCOIP_OK) return st;
        cuda_status_t cs = cu->memcpy_h2d((uint8_t *) s->data + off, *stage, n, NULL);
        if (cs != CUDA_OK) {
            LOG_ERROR(MOD, "shared state: copying tensor \"%s\" to the GPU failed: %s", s->name, cu->status_string(cs));
            return CCOIP_ERR_IO;
        }
        off += n;
        xfer_step(x, n);
    }
    return CCOIP_OK;
}

/* Reads the header's tensors straight into their slots (host) or through staging (device). */
static ccoip_status_t recv_tensors(ccoip_sealed_t *in, const ccoip_ss_slot_t **sl, uint32_t n, int64_t stall_ms,
                                   xfer_t *x, const pcclComm_t *comm, const ccoip_uuid_t *from) {
    uint8_t *stage = NULL;
    ccoip_status_t st = CCOIP_OK;
    for (uint32_t i = 0; i < n && st == CCOIP_OK; i++) {
        const ccoip_ss_slot_t *s = sl[i];
        void *ev = ccoip_prof_tensor(&comm->prof, comm->prof_api, s->name, s->bytes, from->b);
        if (s->device) {
            st = recv_device(in, s, &stage, stall_ms, x);
            ccoip_prof_tensor_end(&comm->prof, ev, st == CCOIP_OK);
            continue;
        }
        for (uint64_t off = 0; off < s->bytes && st == CCOIP_OK;) {
            size_t k = s->bytes - off < CHUNK ? (size_t) (s->bytes - off) : CHUNK;
            st = ccoip_sealed_read(in, (uint8_t *) s->data + off, k, ccoip_now_ms() + stall_ms);
            if (st != CCOIP_OK) break;
            off += k;
            xfer_step(x, k);
        }
        ccoip_prof_tensor_end(&comm->prof, ev, st == CCOIP_OK);
    }
    free(stage);
    return st;
}

/* The distributor's answer to our request: a header that lists our tensors, in order, with our
 * sizes. */
static pcclResult_t check_header(const ccoip_packet_t *p, const ccoip_ss_slot_t **sl, uint32_t n, const char *name) {
    const ccoip_ss_header_t *h = &p->u.ss_header;
    const char *bad = NULL;
    if (p->type != CCOIP_PKT_SS_HEADER) bad = "it did not answer with a header";
    else if (h->status == CCOIP_SSH_NOT_SERVING) bad = "it is not serving this sync any more";
    else if (h->status != CCOIP_SSH_OK) bad = "it does not hold a tensor we asked for";
    else if (h->count != n) bad = "its header lists other tensors";
    for (uint32_t i = 0; bad == NULL && i < n; i++) {
        if (strcmp(h->items[i].name, sl[i]->name) != 0) bad = "its header lists other tensors";
        else if (h->items[i].size != sl[i]->bytes) {
            LOG_ERROR(MOD, "shared state: distributor %s holds tensor \"%s\" with %llu bytes, we have %llu", name,
                      sl[i]->name, (unsigned long long) h->items[i].size, (unsigned long long) sl[i]->bytes);
            bad = "a tensor's size differs";
        }
    }
    if (bad == NULL) return pcclSuccess;
    LOG_ERROR(MOD, "shared state: distributor %s refused or answered wrongly: %s", name, bad);
    return p->type == CCOIP_PKT_SS_HEADER && h->status == CCOIP_SSH_NOT_SERVING ? pcclRankConnectionLost
                                                                              : pcclInternalError;
}

pcclResult_t ccoip_ss_fetch(pcclComm_t *comm, const ccoip_ss_fetch_t *const *fetch, uint32_t n,
                            const ccoip_ss_slot_t *slots, size_t nslots, uint64_t *rx) {
    ccoip_peer_ss_t *ss = comm->ss;
    if (n == 0) return pcclSuccess;
    ccoip_socket_address_t a = {fetch[0]->addr, fetch[0]->ss_port};
    char name[80];
    ccoip_format_address(&a, name, sizeof name);
    const ccoip_ss_slot_t **sl = calloc(n, sizeof *sl);
    ccoip_ss_name_t *names = calloc(n, sizeof *names);
    pcclResult_t res = pcclSuccess;
    uint64_t total = 0;
    for (uint32_t i = 0; i < n && sl != NULL && names != NULL && res == pcclSuccess; i++) {
        sl[i] = ccoip_ss_find(slots, nslots, fetch[i]->name);
        if (sl[i] == NULL) {
            LOG_ERROR(MOD, "shared state: the master asked us to fetch tensor \"%s\", which we do not have", fetch[i]->name);
            res = pcclInternalError;
            break;
        }
        names[i].name = (char *) sl[i]->name;
        total += sl[i]->bytes;
    }
    if (sl == NULL || names == NULL) res = pcclInternalError;
    ccoip_session_t sess;
    memset(&sess, 0, sizeof sess);
    int fd = res == pcclSuccess ? connect_distributor(comm, fetch[0], name, &sess) : -1;
    if (res == pcclSuccess && fd < 0) res = pcclRankConnectionLost;
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    if (res == pcclSuccess) {
        p.type = CCOIP_PKT_SS_REQUEST;
        p.u.ss_request.count = n;
        p.u.ss_request.names = names;
        ccoip_status_t st = ccoip_conn_send(fd, &p);
        memset(&p, 0, sizeof p);
        if (st == CCOIP_OK) st = ccoip_conn_recv(fd, &p, CCOIP_MAX_PAYLOAD, ccoip_now_ms() + ss->stall_ms);
        if (st != CCOIP_OK) {
            LOG_ERROR(MOD, "shared state: no answer from distributor %s: %s", name, ccoip_status_str(st));
            res = pcclRankConnectionLost;
        }
    }
    if (res == pcclSuccess) res = check_header(&p, sl, n, name);
    if (res == pcclSuccess) {
        xfer_t x;
        xfer_init(&x, "received", name, total, 0);
        ccoip_sealed_t in;
        ccoip_status_t st = ccoip_sealed_init(&in, fd, sess.encrypt ? sess.recv : NULL, sess.cipher) ? CCOIP_OK : CCOIP_ERR_NOMEM;
        if (st == CCOIP_OK) st = recv_tensors(&in, sl, n, ss->stall_ms, &x, comm, &fetch[0]->uuid);
        ccoip_sealed_free(&in);
        *rx += x.done;
        if (st != CCOIP_OK) {
            LOG_ERROR(MOD, "shared state: receiving from distributor %s failed after %llu of %llu bytes: %s", name,
                      (unsigned long long) x.done, (unsigned long long) total,
                      st == CCOIP_ERR_CLOSED ? "it closed the connection (died?)" : ccoip_status_str(st));
            res = pcclRankConnectionLost;
        }
    }
    if (p.type != 0) ccoip_packet_free(&p);
    ccoip_sock_close(fd);
    free(sl);
    free(names);
    return res;
}
