/* ccoip_peer_bench.c: the benchmark listener and the measuring side (ccoip_peer_bench.h).
 *
 * Connections are accepted and handshaken by a ccoip_listener (concurrently, capped per source
 * address, so an idle stranger delays nobody); each stream that passed is handed to one thread
 * that polls up to MAX_CONNS of them, so that several senders can measure into this peer at once
 * (the master schedules at most one per step; more only from a misbehaving peer). Streams are
 * read into one scratch buffer and discarded.
 *
 * Behind NAT (docs/nat.md): a receiver that cannot be dialled dials its sender's listener
 * (REVERSED, HELLO role BENCH_REVERSED), which parks the connection for the sender's measurement;
 * where neither can be dialled both dial the relay (RELAYED). Either way the receiver's end is
 * drained by the streams' thread like an accepted stream, the dial made on a thread of its own
 * (one per step: a peer receives from one sender per step). */
#include "ccoip/peer/ccoip_peer_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ccoip/net/ccoip_os.h"
#include "ccoip/net/ccoip_conn.h"
#include "ccoip/peer/ccoip_env.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/net/ccoip_socket.h"
#include "log/log.h"

#define MOD "ccoip-bench"
#define HANDSHAKE_MS 2000
#define CONNECT_MS 3000      /* retrying while the target has not processed its request yet */
#define ANSWER_SLACK_MS 10000 /* after the stream: the receiver drains, then answers */
#define IDLE_MS 30000        /* a silent stream is closed */
#define FIRST_PORT 48149
#define PORT_TRIES 2048
#define MAX_CONNS 64
#define SINK (256u << 10)
#define CHUNK (256u << 10)
#define PARK_MAX 4 /* dialled-back streams waiting for their measurement (one per step) */

typedef struct bconn_t {
    int fd;
    uint64_t bytes;    /* after the first read: the first read's bytes arrived before t0 */
    int64_t first_us;  /* 0 until the first read */
    int64_t last_ms;
    char who[80];
} bconn_t;

struct ccoip_peer_bench_t {
    ccoip_listener_t acc; /* accepts and handshakes */
    uint16_t port;
    pthread_t thread;
    bool started;
    int wake[2];    /* stop */
    int handoff[2]; /* a stream is waiting in `pending` */
    pthread_mutex_t lock; /* guards allowed/nallowed and pending */
    bconn_t pending[MAX_CONNS];
    int npending;
    ccoip_uuid_t allowed[CCOIP_MAX_PEER_ENTRIES];
    uint32_t nallowed;
    ccoip_uuid_t rev[PARK_MAX]; /* targets of this step that dial us back (REVERSED) */
    uint32_t nrev;
    int parked_fd[PARK_MAX]; /* their connections, waiting for ccoip_bench_measure */
    ccoip_uuid_t parked[PARK_MAX];
    int nparked;
    /* The dial of this step's REVERSED or RELAYED stream into us, on its own thread. */
    pthread_t dialer;
    bool dialing;
    ccoip_bench_sender_t dial;
    ccoip_socket_address_t dial_relay;
    pcclComm_t *comm;
    _Atomic uint64_t measured;
    bconn_t conns[MAX_CONNS]; /* listener thread only */
    int nconns;
    uint8_t *sink;
    const ccoip_auth_key_t *key; /* the communicator's run secret, NULL for none */
    bool encrypt;                /* the communicator's PCCL_ENCRYPT */
};

static const uint8_t zeros[CHUNK]; /* what a sender streams */

static int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

uint16_t ccoip_bench_port(const pcclComm_t *comm) { return comm->bench == NULL ? 0 : comm->bench->port; }

uint64_t ccoip_bench_count(const pcclComm_t *comm) {
    return comm->bench == NULL ? 0 : atomic_load(&comm->bench->measured);
}

static void start_dial_in(ccoip_peer_bench_t *b, const ccoip_bench_request_t *q);

static bool uuid_in(const ccoip_uuid_t *set, uint32_t n, const ccoip_uuid_t *u) {
    for (uint32_t i = 0; i < n; i++)
        if (memcmp(set[i].b, u->b, 16) == 0) return true;
    return false;
}

void ccoip_bench_allow(pcclComm_t *comm, const ccoip_bench_request_t *q) {
    ccoip_peer_bench_t *b = comm->bench;
    if (b == NULL) return;
    if (b->dialing) { /* the last step's dial into us is over (bounded by its deadlines) */
        pthread_join(b->dialer, NULL);
        b->dialing = false;
    }
    uint32_t n = q == NULL ? 0 : q->nsenders;
    if (n > CCOIP_MAX_PEER_ENTRIES) n = CCOIP_MAX_PEER_ENTRIES; /* the decoder caps it already */
    pthread_mutex_lock(&b->lock);
    for (uint32_t i = 0; i < n; i++) b->allowed[i] = q->senders[i].uuid;
    b->nallowed = n;
    b->nrev = 0;
    for (uint32_t i = 0; q != NULL && i < q->ntargets && b->nrev < PARK_MAX; i++)
        if (q->targets[i].how == CCOIP_BENCH_REVERSED) b->rev[b->nrev++] = q->targets[i].uuid;
    for (int i = 0; i < b->nparked; i++) ccoip_sock_close(b->parked_fd[i]); /* an earlier step's, unused */
    b->nparked = 0;
    pthread_mutex_unlock(&b->lock);
    if (q != NULL) start_dial_in(b, q);
}

/* A stream whose handshake is done -> the streams' thread, which drains it (over MAX_CONNS:
 * closed). */
static void take_stream(ccoip_peer_bench_t *b, int fd, const char *who) {
    pthread_mutex_lock(&b->lock);
    bconn_t *c = b->npending < MAX_CONNS ? &b->pending[b->npending++] : NULL;
    if (c != NULL) {
        memset(c, 0, sizeof *c);
        c->fd = fd;
        ccoip_sock_set_nonblocking(fd, true); /* drained as bytes come: ccoip_sock_recv_some */
        c->last_ms = ccoip_now_ms();
        snprintf(c->who, sizeof c->who, "%s", who);
    }
    pthread_mutex_unlock(&b->lock);
    if (c == NULL) ccoip_sock_close(fd);
    else ccoip_wakeup_signal(b->handoff[1]);
}

/* HELLO from an announced sender -> handed to the streams' thread; from a target that dials us
 * back -> parked for our measurement of it; anything else is refused and closed. On a thread of
 * the listener's. */
static void handle_incoming(void *ctx, int fd, const char *who) {
    ccoip_peer_bench_t *b = ctx;
    ccoip_hello_t hello;
    char why[96];
    int64_t deadline = ccoip_now_ms() + HANDSHAKE_MS;
    if (!ccoip_conn_read_hello(fd, CCOIP_ROLE_BENCHMARK, b->key, b->encrypt, deadline, &hello, why, sizeof why)) {
        LOG_WARN(MOD, "refused benchmark connection from %s: %s", who, why);
        ccoip_sock_close(fd);
        return;
    }
    ccoip_uuid_t uuid = hello.uuid;
    bool back = hello.role == CCOIP_ROLE_BENCH_REVERSED;
    pthread_mutex_lock(&b->lock);
    bool known = back ? uuid_in(b->rev, b->nrev, &uuid) : uuid_in(b->allowed, b->nallowed, &uuid);
    bool full = back ? b->nparked == PARK_MAX : b->npending == MAX_CONNS;
    pthread_mutex_unlock(&b->lock);
    uint8_t status = full ? CCOIP_HELLO_BUSY : known ? CCOIP_HELLO_OK : CCOIP_HELLO_UNKNOWN_PEER;
    if (status == CCOIP_HELLO_OK && !ccoip_conn_accept_hello(fd, &hello, b->key, NULL, deadline, why, sizeof why)) {
        LOG_WARN(MOD, "refused benchmark connection from %s: %s", who, why);
        ccoip_sock_close(fd);
        return;
    }
    if (status != CCOIP_HELLO_OK) {
        ccoip_conn_answer_hello(fd, status, NULL);
        if (status == CCOIP_HELLO_UNKNOWN_PEER)
            LOG_DEBUG(MOD, "refused benchmark connection from %s: peer not announced by the master", who);
        else if (status == CCOIP_HELLO_BUSY)
            LOG_WARN(MOD, "refused benchmark connection from %s: too many streams", who);
        ccoip_sock_close(fd);
        return;
    }
    if (!back) {
        take_stream(b, fd, who);
        return;
    }
    pthread_mutex_lock(&b->lock);
    bool room = b->nparked < PARK_MAX;
    if (room) {
        b->parked_fd[b->nparked] = fd;
        b->parked[b->nparked++] = uuid;
    }
    pthread_mutex_unlock(&b->lock);
    if (!room) ccoip_sock_close(fd);
}

/* Streams' thread: takes the streams the listener handed over (over MAX_CONNS: closed). */
static void take_pending(ccoip_peer_bench_t *b) {
    ccoip_wakeup_drain(b->handoff[0]);
    pthread_mutex_lock(&b->lock);
    for (int i = 0; i < b->npending; i++) {
        if (b->nconns < MAX_CONNS) b->conns[b->nconns++] = b->pending[i];
        else ccoip_sock_close(b->pending[i].fd);
    }
    b->npending = 0;
    pthread_mutex_unlock(&b->lock);
}

static void drop_conn(ccoip_peer_bench_t *b, int i) {
    ccoip_sock_close(b->conns[i].fd);
    b->conns[i] = b->conns[--b->nconns];
}

/* Reads what is there; at EOF answers BENCH_DONE and closes. False when the stream is gone. */
static bool drain(ccoip_peer_bench_t *b, bconn_t *c) {
    size_t n;
    ccoip_status_t st = ccoip_sock_recv_some(c->fd, b->sink, SINK, &n);
    int64_t t = now_us();
    if (st == CCOIP_OK) {
        if (c->first_us == 0) c->first_us = t;
        else c->bytes += (uint64_t) n;
        c->last_ms = t / 1000;
        return true;
    }
    if (st == CCOIP_ERR_TIMEOUT) return true;
    if (st != CCOIP_ERR_CLOSED) {
        LOG_WARN(MOD, "benchmark stream from %s broke: %s", c->who, ccoip_status_str(st));
        return false;
    }
    ccoip_packet_t done;
    memset(&done, 0, sizeof done);
    done.type = CCOIP_PKT_BENCH_DONE;
    done.u.bench_done.bytes = c->bytes;
    done.u.bench_done.elapsed_us = c->first_us == 0 ? 0 : (uint64_t) (t - c->first_us);
    if (ccoip_conn_send(c->fd, &done) != CCOIP_OK) LOG_WARN(MOD, "cannot answer the benchmark stream from %s", c->who);
    return false;
}

static void *listener_main(void *arg) {
    ccoip_peer_bench_t *b = arg;
    ccoip_os_name_thread("pccl-bench");
    ccoip_pollfd_t fds[MAX_CONNS + 2];
    for (;;) {
        fds[0] = (ccoip_pollfd_t){.fd = b->wake[0], .events = CCOIP_POLL_IN};
        fds[1] = (ccoip_pollfd_t){.fd = b->handoff[0], .events = CCOIP_POLL_IN};
        int nc = b->nconns;
        for (int i = 0; i < nc; i++) fds[2 + i] = (ccoip_pollfd_t){.fd = b->conns[i].fd, .events = CCOIP_POLL_IN};
        int r = ccoip_sock_poll(fds, nc + 2, 1000);
        if (r < 0) {
            LOG_ERROR(MOD, "benchmark listener stopped: cannot poll");
            break;
        }
        if (r > 0 && fds[0].revents != 0) break; /* woken to stop */
        /* Streams first (from the end: dropping moves the last one into the hole). */
        int64_t now = ccoip_now_ms();
        for (int i = nc - 1; i >= 0; i--) {
            bool alive = true;
            if (r > 0 && fds[2 + i].revents != 0) alive = drain(b, &b->conns[i]);
            else if (now - b->conns[i].last_ms > IDLE_MS) {
                LOG_WARN(MOD, "benchmark stream from %s went silent; closed", b->conns[i].who);
                alive = false;
            }
            if (!alive) drop_conn(b, i);
        }
        if (r > 0 && fds[1].revents != 0) take_pending(b);
    }
    return NULL;
}

pcclResult_t ccoip_bench_start(pcclComm_t *comm) {
    ccoip_peer_bench_t *b = calloc(1, sizeof *b);
    if (b == NULL) return pcclInternalError;
    ccoip_listener_init(&b->acc);
    b->wake[0] = b->wake[1] = -1;
    b->handoff[0] = b->handoff[1] = -1;
    pthread_mutex_init(&b->lock, NULL);
    comm->bench = b;
    b->key = ccoip_comm_key(comm);
    b->encrypt = comm->encrypt;
    b->comm = comm;
    b->sink = malloc(SINK);
    if (b->sink == NULL) return pcclInternalError;
    if (!ccoip_wakeup_open(b->wake) || !ccoip_wakeup_open(b->handoff)) return pcclInternalError;
    if (pthread_create(&b->thread, NULL, listener_main, b) != 0) {
        LOG_ERROR(MOD, "cannot start the benchmark streams' thread");
        return pcclInternalError;
    }
    b->started = true;
    int64_t first = ccoip_env_num("PCCL_P2P_FIRST_PORT", FIRST_PORT);
    if (!ccoip_listener_start(&b->acc, comm->params.master_address.inet.protocol,
                              (uint16_t) (first > 65535 ? FIRST_PORT : first), PORT_TRIES, handle_incoming, b, "benchmark"))
        return pcclInternalError;
    b->port = b->acc.port;
    return pcclSuccess;
}

void ccoip_bench_stop(pcclComm_t *comm) {
    ccoip_peer_bench_t *b = comm->bench;
    if (b == NULL) return;
    ccoip_listener_stop(&b->acc); /* no more handoffs after this */
    if (b->dialing) pthread_join(b->dialer, NULL); /* bounded by its deadlines */
    for (int i = 0; i < b->nparked; i++) ccoip_sock_close(b->parked_fd[i]);
    if (b->started) {
        ccoip_wakeup_signal(b->wake[1]);
        pthread_join(b->thread, NULL);
    }
    while (b->nconns > 0) drop_conn(b, b->nconns - 1);
    for (int i = 0; i < b->npending; i++) ccoip_sock_close(b->pending[i].fd);
    ccoip_wakeup_close(b->wake);
    ccoip_wakeup_close(b->handoff);
    pthread_mutex_destroy(&b->lock);
    free(b->sink);
    free(b);
    comm->bench = NULL;
}

/* Connects and handshakes as `role`, retrying while the target answers "unknown peer" (it has
 * not processed the master's request yet). -1 on failure (logged). */
static int bench_connect(pcclComm_t *comm, const ccoip_socket_address_t *a, const char *name, uint8_t role) {
    int64_t deadline = ccoip_now_ms() + CONNECT_MS;
    ccoip_status_t st = CCOIP_ERR_TIMEOUT;
    while (ccoip_now_ms() < deadline && !atomic_load(&comm->stopping)) {
        int64_t left = deadline - ccoip_now_ms();
        int fd = ccoip_sock_connect(a, (int) (left < 1000 ? left : 1000), &st);
        if (fd < 0) {
            ccoip_sleep_ms(20);
            continue;
        }
        ccoip_hello_ack_t ack;
        memset(&ack, 0, sizeof ack);
        ccoip_session_t sess = ccoip_comm_session(comm); /* agreed on; the probe's zeros go in clear */
        st = ccoip_conn_hello(fd, role, &comm->uuid, ccoip_comm_key(comm), &sess, ccoip_now_ms() + HANDSHAKE_MS, name,
                              &ack);
        if (st == CCOIP_OK) return fd;
        ccoip_sock_close(fd);
        if (st == CCOIP_ERR_INVALID || (st == CCOIP_ERR_REFUSED && ack.status != CCOIP_HELLO_UNKNOWN_PEER)) break;
        ccoip_sleep_ms(10);
    }
    LOG_WARN(MOD, "cannot open a benchmark stream to %s: %s", name, ccoip_status_str(st));
    return -1;
}

/* REVERSED: the target's connection to our listener, once it came (within CONNECT_MS); -1. */
static int await_parked(ccoip_peer_bench_t *b, const ccoip_uuid_t *uuid, const char *name) {
    int64_t deadline = ccoip_now_ms() + CONNECT_MS + HANDSHAKE_MS;
    for (;;) {
        int fd = -1;
        pthread_mutex_lock(&b->lock);
        for (int i = 0; i < b->nparked && fd < 0; i++) {
            if (memcmp(b->parked[i].b, uuid->b, 16) != 0) continue;
            fd = b->parked_fd[i];
            b->parked_fd[i] = b->parked_fd[--b->nparked];
            b->parked[i] = b->parked[b->nparked];
        }
        pthread_mutex_unlock(&b->lock);
        if (fd >= 0 || ccoip_now_ms() >= deadline || atomic_load(&b->comm->stopping)) {
            if (fd < 0) LOG_WARN(MOD, "benchmark target %s did not dial us back in time", name);
            return fd;
        }
        ccoip_sleep_ms(2);
    }
}

/* RELAYED: through the relay with the pair's token, as the connector (the answer comes once the
 * target dialled the relay too); -1 on failure (logged). */
static int relay_connect(pcclComm_t *comm, const ccoip_socket_address_t *relay, const ccoip_uuid_t *token,
                         const char *name) {
    ccoip_status_t st = CCOIP_ERR_INVALID;
    int fd = relay->port == 0 ? -1 : ccoip_conn_relay_dial(relay, token, CONNECT_MS, &st);
    if (fd >= 0) {
        ccoip_hello_ack_t ack;
        memset(&ack, 0, sizeof ack);
        ccoip_session_t sess = ccoip_comm_session(comm);
        st = ccoip_conn_hello(fd, CCOIP_ROLE_BENCHMARK, &comm->uuid, ccoip_comm_key(comm), &sess,
                              ccoip_now_ms() + CONNECT_MS + HANDSHAKE_MS, name, &ack);
        if (st == CCOIP_OK) return fd;
        ccoip_sock_close(fd);
    }
    LOG_WARN(MOD, "cannot open a benchmark stream to %s through the relay: %s", name, ccoip_status_str(st));
    return -1;
}

/* The stream to t, made as the master said (CCOIP_BENCH_*); -1 on failure (logged). */
static int open_stream(pcclComm_t *comm, const ccoip_bench_target_t *t, const ccoip_socket_address_t *relay,
                       const char *name) {
    if (t->how == CCOIP_BENCH_REVERSED) return comm->bench == NULL ? -1 : await_parked(comm->bench, &t->uuid, name);
    if (t->how == CCOIP_BENCH_RELAYED) return relay_connect(comm, relay, &t->token, name);
    ccoip_socket_address_t a = {t->addr, t->bench_port};
    return bench_connect(comm, &a, name, CCOIP_ROLE_BENCHMARK);
}

uint64_t ccoip_bench_measure(pcclComm_t *comm, const ccoip_bench_target_t *t, uint32_t duration_ms,
                             const ccoip_socket_address_t *relay) {
    if (comm->bench != NULL) atomic_fetch_add(&comm->bench->measured, 1);
    ccoip_socket_address_t a = {t->addr, t->bench_port};
    char name[96];
    ccoip_format_address(&a, name, sizeof name);
    if (t->bench_port == 0) {
        LOG_WARN(MOD, "peer %s has no benchmark listener", name);
        return 0;
    }
    size_t len = strlen(name);
    if (t->how != CCOIP_BENCH_DIRECT)
        snprintf(name + len, sizeof name - len, t->how == CCOIP_BENCH_REVERSED ? " (it dialled us)" : " via the relay");
    int fd = open_stream(comm, t, relay, name);
    if (fd < 0) return 0;
    /* Stream for duration_ms; each send waits for room at most until the end (a slow or stalled
     * link never holds us past it). */
    int64_t end = ccoip_now_ms() + duration_ms;
    uint64_t sent = 0;
    const char *broke = NULL;
    ccoip_sock_set_nonblocking(fd, true);
    for (int64_t now = ccoip_now_ms(); broke == NULL && now < end; now = ccoip_now_ms()) {
        ccoip_pollfd_t pfd = {.fd = fd, .events = CCOIP_POLL_OUT};
        int r = ccoip_sock_poll(&pfd, 1, (int) (end - now));
        if (r <= 0) continue; /* timeout (the loop ends) or EINTR */
        if (pfd.revents & CCOIP_POLL_ERR) {
            broke = "the receiver closed the connection";
            break;
        }
        size_t n;
        ccoip_status_t st = ccoip_sock_send_some(fd, zeros, CHUNK, &n);
        if (st == CCOIP_OK) sent += (uint64_t) n;
        else if (st != CCOIP_ERR_TIMEOUT) broke = ccoip_status_str(st);
    }
    ccoip_sock_set_nonblocking(fd, false);
    bool ok = broke == NULL;
    uint64_t bps = 0;
    if (ok) {
        ccoip_sock_shutdown_write(fd);
        ccoip_packet_t r;
        ccoip_status_t st = ccoip_conn_recv(fd, &r, CCOIP_MAX_HANDSHAKE_PAYLOAD, ccoip_now_ms() + ANSWER_SLACK_MS);
        if (st == CCOIP_OK && r.type == CCOIP_PKT_BENCH_DONE && r.u.bench_done.elapsed_us > 0 &&
            r.u.bench_done.bytes <= sent) {
            double v = (double) r.u.bench_done.bytes * 8e6 / (double) r.u.bench_done.elapsed_us;
            bps = v < 1 ? 1 : (uint64_t) v; /* 0 is reserved for "failed" */
        } else {
            LOG_WARN(MOD, "benchmark stream to %s: no valid answer (%s)", name,
                     st == CCOIP_OK ? "unexpected packet" : ccoip_status_str(st));
        }
        if (st == CCOIP_OK) ccoip_packet_free(&r);
    } else {
        LOG_WARN(MOD, "benchmark stream to %s broke after %llu bytes: %s", name, (unsigned long long) sent, broke);
    }
    ccoip_sock_close(fd);
    if (bps > 0)
        LOG_INFO(MOD, "measured %s: %.1f Mbit/s (%llu bytes in %u ms)", name, (double) bps / 1e6,
                 (unsigned long long) sent, duration_ms);
    return bps;
}

/* ---- the receiving end of a stream that cannot be dialled ---------------------------------- */

/* RELAYED, our end: through the relay as the acceptor, the sender's HELLO only; -1 (logged). */
static int relay_accept(ccoip_peer_bench_t *b, const ccoip_bench_sender_t *s, const char *name) {
    ccoip_status_t st = CCOIP_ERR_INVALID;
    int fd = b->dial_relay.port == 0 ? -1 : ccoip_conn_relay_dial(&b->dial_relay, &s->token, CONNECT_MS, &st);
    if (fd < 0) {
        LOG_WARN(MOD, "cannot reach the relay for the benchmark stream from %s: %s", name, ccoip_status_str(st));
        return -1;
    }
    ccoip_hello_t hello;
    char why[96];
    int64_t deadline = ccoip_now_ms() + CONNECT_MS + HANDSHAKE_MS;
    bool ok = ccoip_conn_read_hello(fd, CCOIP_ROLE_BENCHMARK, b->key, b->encrypt, deadline, &hello, why, sizeof why);
    if (ok && memcmp(hello.uuid.b, s->uuid.b, 16) != 0) {
        ccoip_conn_answer_hello(fd, CCOIP_HELLO_UNKNOWN_PEER, NULL);
        snprintf(why, sizeof why, "another peer answered at the relay");
        ok = false;
    }
    if (ok) ok = ccoip_conn_accept_hello(fd, &hello, b->key, NULL, deadline, why, sizeof why);
    if (ok) return fd;
    LOG_WARN(MOD, "benchmark stream from %s through the relay: %s", name, why);
    ccoip_sock_close(fd);
    return -1;
}

static void *dial_in(void *arg) {
    ccoip_peer_bench_t *b = arg;
    const ccoip_bench_sender_t *s = &b->dial;
    ccoip_socket_address_t a = {s->addr, s->bench_port};
    char name[96];
    ccoip_format_address(&a, name, sizeof name);
    int fd = s->how == CCOIP_BENCH_REVERSED ? bench_connect(b->comm, &a, name, CCOIP_ROLE_BENCH_REVERSED)
                                            : relay_accept(b, s, name);
    if (fd >= 0) {
        LOG_DEBUG(MOD, "benchmark stream from %s: %s", name, s->how == CCOIP_BENCH_REVERSED ? "we dialled it" : "via the relay");
        take_stream(b, fd, name);
    }
    return NULL;
}

/* The stream of this step that reaches us only if we dial (one sender per step). */
static void start_dial_in(ccoip_peer_bench_t *b, const ccoip_bench_request_t *q) {
    for (uint32_t i = 0; i < q->nsenders && i < CCOIP_MAX_PEER_ENTRIES; i++) {
        if (q->senders[i].how == CCOIP_BENCH_DIRECT) continue;
        b->dial = q->senders[i];
        b->dial_relay = (ccoip_socket_address_t){q->relay_addr, q->relay_port};
        b->dialing = pthread_create(&b->dialer, NULL, dial_in, b) == 0;
        if (!b->dialing) LOG_WARN(MOD, "cannot start a thread to dial a benchmark sender");
        return;
    }
}
