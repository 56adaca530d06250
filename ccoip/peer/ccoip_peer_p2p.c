/* ccoip_peer_p2p.c: the peer's p2p listener and its ring links.
 *
 * The listener thread accepts, reads HELLO (role P2P) and P2P_BIND with a short deadline, and
 * keeps the connection only when the master announced that UUID to us; everything else is
 * answered with a refusal (where it was a valid HELLO), logged and closed. ccoip_p2p_establish
 * (API thread) replaces the links on every topology round: it connects the TX pool to the next
 * neighbour, its streams concurrently (each a TCP handshake, HELLO and P2P_BIND: 3-4 round trips,
 * a lost SYN a second), retrying while that neighbour has not yet heard of us, and waits for the
 * RX arrivals of the previous neighbour for this round. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_conn.h"
#include "ccoip/net/ccoip_listener.h"
#include "ccoip/peer/ccoip_env.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/net/ccoip_socket.h"
#include "log/log.h"
#include "threadpark/threadpark.h"

#define MOD "ccoip-p2p"
#define HANDSHAKE_MS 2000
#define REFUSED_GIVE_UP_MS 300 /* connection refused this long: nobody listens there */
#define FIRST_PORT 48149
#define PORT_TRIES 2048
#define CONNECTS_AT_ONCE (CCOIP_LISTENER_PER_ADDR / 2)

static bool uuid_eq(const ccoip_uuid_t *a, const ccoip_uuid_t *b) { return memcmp(a->b, b->b, 16) == 0; }

/* One incoming connection, start to end: kept as an arrival or closed with one log line. The
 * acceptor's half of the handshake, also on a relayed or punched link we dialled (take_dialled_rx). */
static void take_incoming(pcclComm_t *comm, int fd, const char *who, int64_t deadline) {
    ccoip_peer_p2p_t *p2p = &comm->p2p;
    ccoip_hello_t hello;
    char why[96];
    if (!ccoip_conn_read_hello(fd, CCOIP_ROLE_P2P, ccoip_comm_key(comm), comm->encrypt, deadline, &hello, why,
                               sizeof why)) {
        if (strcmp(why, CCOIP_CONN_CLOSED_EARLY) == 0) LOG_DEBUG(MOD, "p2p connection from %s: %s", who, why);
        else LOG_WARN(MOD, "refused p2p connection from %s: %s", who, why);
        ccoip_sock_close(fd);
        return;
    }
    ccoip_uuid_t uuid = hello.uuid;
    pthread_mutex_lock(&p2p->lock);
    bool known = false;
    for (int i = 0; i < p2p->nallowed; i++) known |= uuid_eq(&p2p->allowed[i], &uuid);
    pthread_mutex_unlock(&p2p->lock);
    if (!known) {
        ccoip_conn_answer_hello(fd, CCOIP_HELLO_UNKNOWN_PEER, NULL);
        LOG_DEBUG(MOD, "refused p2p connection from %s: peer not announced by the master", who);
        ccoip_sock_close(fd);
        return;
    }
    ccoip_session_t sess;
    memset(&sess, 0, sizeof sess);
    if (!ccoip_conn_accept_hello(fd, &hello, ccoip_comm_key(comm), &sess, deadline, why, sizeof why)) {
        LOG_WARN(MOD, "refused p2p connection from %s: %s", who, why);
        ccoip_sock_close(fd);
        return;
    }
    ccoip_packet_t p;
    ccoip_status_t st = ccoip_conn_recv(fd, &p, CCOIP_MAX_HANDSHAKE_PAYLOAD, deadline);
    if (st != CCOIP_OK || p.type != CCOIP_PKT_P2P_BIND) {
        if (st == CCOIP_OK) ccoip_packet_free(&p);
        LOG_WARN(MOD, "refused p2p connection from %s: no P2P_BIND after the handshake", who);
        ccoip_sock_close(fd);
        return;
    }
    if (p.u.p2p_bind.stream >= p.u.p2p_bind.streams) {
        LOG_WARN(MOD, "refused p2p connection from %s: P2P_BIND stream %u of %u", who, p.u.p2p_bind.stream,
                 p.u.p2p_bind.streams);
        ccoip_sock_close(fd);
        return;
    }
    ccoip_arrival_t a = {fd,   uuid, p.u.p2p_bind.round, p.u.p2p_bind.stream, p.u.p2p_bind.streams,
                         p.u.p2p_bind.reversed != 0, sess};
    pthread_mutex_lock(&p2p->lock);
    if (p2p->narrivals == CCOIP_MAX_ARRIVALS) { /* keep the newest: drop the oldest */
        ccoip_sock_close(p2p->arrivals[0].fd);
        memmove(&p2p->arrivals[0], &p2p->arrivals[1], (CCOIP_MAX_ARRIVALS - 1) * sizeof a);
        p2p->narrivals--;
    }
    p2p->arrivals[p2p->narrivals++] = a;
    pthread_mutex_unlock(&p2p->lock);
    ccoip_peer_notify(comm);
}

static void handle_incoming(void *ctx, int fd, const char *who) {
    take_incoming(ctx, fd, who, ccoip_now_ms() + HANDSHAKE_MS);
}

/* ---- Relayed and punched edges (CCOIP_PEER_*_RELAYED, pccl-relay; *_PUNCHED, ccoip_punch.h) --- */

/* Connects to the relay and sends the edge's token: the fd, or -1 with *st set. */
static int relay_dial(const ccoip_socket_address_t *relay, const ccoip_uuid_t *token, int timeout_ms,
                      ccoip_status_t *st) {
    int fd = ccoip_sock_connect(relay, timeout_ms, st);
    if (fd < 0) return -1;
    uint8_t hello[CCOIP_RELAY_HELLO_LEN] = {(uint8_t) (CCOIP_RELAY_MAGIC >> 24), (uint8_t) (CCOIP_RELAY_MAGIC >> 16),
                                            (uint8_t) (CCOIP_RELAY_MAGIC >> 8), (uint8_t) CCOIP_RELAY_MAGIC};
    memcpy(hello + 4, token->b, 16);
    if ((*st = ccoip_sock_send_all(fd, hello, sizeof hello)) != CCOIP_OK) {
        ccoip_sock_close(fd);
        return -1;
    }
    return fd;
}

/* A punch refused by the other end's router is dialled again at once: the two ends' SYNs must
 * cross between the routers, and a router that resets closes our mapping with its reset, so the
 * dials of both ends must follow each other closely (a wait of 20 ms kept them apart for good on
 * a link of 0.1 ms). */
#define PUNCH_RETRY_MS 1

/* How long both ends of a punched edge dial each other before the round fails on it. */
static int64_t punch_ms(void) { return ccoip_env_num("PCCL_PUNCH_MS", 5000); }

typedef struct rx_dial_t {
    pcclComm_t *comm;
    ccoip_socket_address_t to; /* the relay, or the sender's TX punch port */
    bool punched;
    ccoip_uuid_t token;
    int64_t deadline;
} rx_dial_t;

/* The punch of our RX end: dials the sender's TX punch port from our RX punch port until the
 * sender's dial meets ours (its router drops or refuses ours until then), the punch window
 * ends, or the API thread gave up on the round (relay_fd -2). */
static int punch_rx(const rx_dial_t *r, ccoip_status_t *st) {
    ccoip_peer_p2p_t *p2p = &r->comm->p2p;
    int64_t end = ccoip_now_ms() + punch_ms();
    if (end > r->deadline) end = r->deadline;
    *st = CCOIP_ERR_TIMEOUT;
    for (;;) {
        pthread_mutex_lock(&p2p->lock);
        bool cancelled = p2p->relay_fd == -2;
        pthread_mutex_unlock(&p2p->lock);
        int64_t left = end - ccoip_now_ms();
        if (cancelled || left <= 0) return -1;
        int fd = ccoip_punch_dial(&r->comm->punch, CCOIP_PUNCH_RX, &r->to, (int) (left < 1000 ? left : 1000), st);
        if (fd >= 0 || *st == CCOIP_ERR_INVALID) return fd;
        if (*st != CCOIP_ERR_TIMEOUT) ccoip_sleep_ms(PUNCH_RETRY_MS);
    }
}

/* The RX end of a relayed or punched edge: dial, then take the link as an arrival. */
static void *take_dialled_rx(void *arg) {
    rx_dial_t r = *(rx_dial_t *) arg;
    free(arg);
    ccoip_peer_p2p_t *p2p = &r.comm->p2p;
    char name[80];
    ccoip_format_address(&r.to, name, sizeof name);
    ccoip_status_t st;
    int64_t left = r.deadline - ccoip_now_ms();
    int fd = r.punched ? punch_rx(&r, &st) : relay_dial(&r.to, &r.token, (int) (left > 0 ? left : 1), &st);
    if (fd < 0) {
        if (r.punched) LOG_WARN(MOD, "hole punching to ring neighbour %s failed: %s", name, ccoip_status_str(st));
        else LOG_WARN(MOD, "cannot reach the relay at %s: %s", name, ccoip_status_str(st));
        return NULL;
    }
    /* A second descriptor of the socket, ours alone, for rx_dial_end to shut it down with:
     * take_incoming may close fd (its number can then be reused elsewhere) at any time. */
    int watch = ccoip_sock_dup(fd);
    pthread_mutex_lock(&p2p->lock);
    bool cancelled = p2p->relay_fd == -2 || watch < 0;
    if (!cancelled) p2p->relay_fd = watch;
    pthread_mutex_unlock(&p2p->lock);
    if (!cancelled) take_incoming(r.comm, fd, name, r.deadline);
    else ccoip_sock_close(fd);
    pthread_mutex_lock(&p2p->lock);
    p2p->relay_fd = -1;
    pthread_mutex_unlock(&p2p->lock);
    if (watch >= 0) ccoip_sock_close(watch);
    return NULL;
}

static bool rx_dial_start(pcclComm_t *comm, const ccoip_p2p_info_t *info, const ccoip_peer_entry_t *rx,
                          int64_t deadline) {
    ccoip_peer_p2p_t *p2p = &comm->p2p;
    rx_dial_t *r = malloc(sizeof *r);
    if (r == NULL) return false;
    bool punched = (rx->flags & CCOIP_PEER_RX_PUNCHED) != 0;
    ccoip_socket_address_t to = {info->relay_addr, info->relay_port};
    if (punched) to = (ccoip_socket_address_t){rx->addr, rx->punch_tx_port};
    *r = (rx_dial_t){comm, to, punched, rx->rx_token, deadline};
    p2p->relay_fd = -1;
    p2p->relay_started = pthread_create(&p2p->relay_thread, NULL, take_dialled_rx, r) == 0;
    if (!p2p->relay_started) free(r);
    return p2p->relay_started;
}

/* Waits for the RX dial thread; `cut`: its link is not wanted (the round failed): end it now. */
static void rx_dial_end(pcclComm_t *comm, bool cut) {
    ccoip_peer_p2p_t *p2p = &comm->p2p;
    if (!p2p->relay_started) return;
    pthread_mutex_lock(&p2p->lock);
    if (cut && p2p->relay_fd >= 0) ccoip_sock_shutdown(p2p->relay_fd); /* its handshake fails at once */
    if (cut && p2p->relay_fd == -1) p2p->relay_fd = -2;                 /* not connected yet: never */
    pthread_mutex_unlock(&p2p->lock);
    pthread_join(p2p->relay_thread, NULL);
    p2p->relay_started = false;
}

pcclResult_t ccoip_p2p_start(pcclComm_t *comm) {
    /* The family the master sees us by. */
    int64_t first = ccoip_env_num("PCCL_P2P_FIRST_PORT", FIRST_PORT);
    return ccoip_listener_start(&comm->p2p.listener, comm->params.master_address.inet.protocol,
                                (uint16_t) (first > 65535 ? FIRST_PORT : first), PORT_TRIES, handle_incoming, comm, "p2p")
               ? pcclSuccess
               : pcclInternalError;
}

static void close_links(pcclComm_t *comm) {
    ccoip_peer_p2p_t *p2p = &comm->p2p;
    for (uint32_t i = 0; i < p2p->links.ntx; i++) ccoip_sock_close(p2p->links.tx_fds[i]);
    for (uint32_t i = 0; i < p2p->links.nrx; i++) ccoip_sock_close(p2p->links.rx_fds[i]);
    p2p->links.ntx = p2p->links.nrx = 0;
    p2p->links.tx.fd = p2p->links.rx.fd = -1;
}

void ccoip_p2p_stop(pcclComm_t *comm) {
    ccoip_peer_p2p_t *p2p = &comm->p2p;
    ccoip_listener_stop(&p2p->listener);
    close_links(comm);
    for (int i = 0; i < p2p->narrivals; i++) ccoip_sock_close(p2p->arrivals[i].fd);
    p2p->narrivals = 0;
}

/* A TOPOLOGY_RESULT (the round ended without us) or link loss while we connect. */
static bool interrupted(pcclComm_t *comm, ccoip_packet_t *early) {
    if (ccoip_link_wait_mail(comm, early, 0) == CCOIP_OK) return true;
    return ccoip_link_broke_since_send(comm) || atomic_load(&comm->stopping);
}

/* The TX side of one topology round: the pool's streams to the next neighbour, connected by up
 * to CONNECTS_AT_ONCE short-lived threads, each taking the next stream until all are in or one
 * fails. Half the listener's per-address cap: the neighbour's slots of our last streams may
 * still be reading their P2P_BIND when the next arrive, and a connection over the cap is closed.
 * Only the API thread reads master mail (interrupted()); it tells the threads to stop through
 * `cancel`. */
typedef struct tx_pool_t {
    pcclComm_t *comm;
    ccoip_socket_address_t addr;
    char name[80];
    uint64_t round;
    uint32_t streams;
    bool reversed; /* we receive on these (an edge we dial as its unreachable receiving end) */
    bool relayed;  /* addr is the relay's: each stream starts with the token */
    bool punched;  /* addr is the receiver's RX punch port, dialled from our TX punch port */
    ccoip_uuid_t token;
    int64_t deadline;
    _Atomic uint32_t next;   /* the next stream to connect */
    _Atomic uint32_t ended;  /* threads that returned */
    atomic_bool cancel;      /* the caller gave up, or a stream failed: stop */
    atomic_bool failed;
    _Atomic uint8_t why;     /* the first failed stream's ccoip_link_why_t */
    int fds[CCOIP_P2P_MAX_STREAMS]; /* -1 until its thread connected it */
    ccoip_session_t sess[CCOIP_P2P_MAX_STREAMS];
} tx_pool_t;

/* One stream: TCP connect, HELLO, P2P_BIND; retried while the neighbour has not yet heard of us.
 * The fd, or -1 with *why set (and one log line unless cancelled). A live peer listens from
 * before it registers, so refusals that last REFUSED_GIVE_UP_MS mean nobody ever will (a NAT
 * router's port, a wrong address): the round fails then, not at its deadline. A punch is
 * refused by the other end's router until that end's own dial left it: it retries to the end
 * of its window (t->deadline). */
static int connect_stream(tx_pool_t *t, uint32_t stream, ccoip_session_t *sess, uint8_t *why) {
    pcclComm_t *comm = t->comm;
    ccoip_status_t st = CCOIP_ERR_TIMEOUT;
    int64_t refused_since = 0;
    *why = CCOIP_LINK_TIMEOUT;
    while (ccoip_now_ms() < t->deadline && !atomic_load(&t->cancel)) {
        int64_t left = t->deadline - ccoip_now_ms();
        int wait = (int) (left < 1000 ? left : 1000), fd;
        if (t->relayed) fd = relay_dial(&t->addr, &t->token, wait, &st);
        else if (t->punched) fd = ccoip_punch_dial(&comm->punch, CCOIP_PUNCH_TX, &t->addr, wait, &st);
        else fd = ccoip_sock_connect(&t->addr, wait, &st);
        if (fd < 0) {
            *why = st == CCOIP_ERR_TIMEOUT ? CCOIP_LINK_TIMEOUT : CCOIP_LINK_REFUSED;
            if (st == CCOIP_ERR_INVALID) break; /* no punch port */
            if (st != CCOIP_ERR_REFUSED || t->punched) refused_since = 0;
            else if (refused_since == 0) refused_since = ccoip_now_ms();
            else if (ccoip_now_ms() - refused_since >= REFUSED_GIVE_UP_MS) break;
            ccoip_sleep_ms(t->punched ? PUNCH_RETRY_MS : 20);
            continue;
        }
        refused_since = 0;
        *why = CCOIP_LINK_HANDSHAKE;
        ccoip_hello_ack_t ack;
        memset(&ack, 0, sizeof ack);
        *sess = ccoip_comm_session(comm);
        /* Through the relay the answer comes once the other end dialled it too. */
        int64_t hello_deadline = t->relayed ? t->deadline : ccoip_now_ms() + HANDSHAKE_MS;
        st = ccoip_conn_hello(fd, CCOIP_ROLE_P2P, &comm->uuid, ccoip_comm_key(comm), sess, hello_deadline, t->name, &ack);
        if (st == CCOIP_OK) {
            ccoip_packet_t bind;
            memset(&bind, 0, sizeof bind);
            bind.type = CCOIP_PKT_P2P_BIND;
            bind.u.p2p_bind.round = t->round;
            bind.u.p2p_bind.stream = (uint8_t) stream;
            bind.u.p2p_bind.streams = (uint8_t) t->streams;
            bind.u.p2p_bind.reversed = t->reversed;
            st = ccoip_conn_send(fd, &bind);
            if (st == CCOIP_OK) return fd;
        }
        ccoip_sock_close(fd);
        /* UNKNOWN_PEER: it has not processed its P2P_INFO yet; a timeout: its listener was busy
         * (a slow stranger, or over its per-address cap). Both pass; any other refusal is final. */
        if (st == CCOIP_ERR_REFUSED && ack.status != CCOIP_HELLO_UNKNOWN_PEER) break;
        if (st == CCOIP_ERR_INVALID) break;
        ccoip_sleep_ms(10);
    }
    if (!atomic_load(&t->cancel))
        LOG_WARN(MOD, "cannot connect stream %u of %u to ring neighbour %s: %s", stream, t->streams, t->name,
                 ccoip_status_str(st));
    return -1;
}

static void *tx_thread(void *arg) {
    tx_pool_t *t = arg;
    for (;;) {
        uint32_t i = atomic_fetch_add(&t->next, 1);
        if (i >= t->streams || atomic_load(&t->cancel)) break;
        uint8_t why;
        int fd = connect_stream(t, i, &t->sess[i], &why);
        if (fd < 0) {
            uint8_t none = CCOIP_LINK_OK;
            atomic_compare_exchange_strong(&t->why, &none, why);
            atomic_store(&t->failed, true);
            atomic_store(&t->cancel, true);
            break;
        }
        t->fds[i] = fd;
    }
    atomic_fetch_add(&t->ended, 1);
    ccoip_peer_notify(t->comm); /* wakes the caller in connect_pool */
    return NULL;
}

/* Connects `streams` streams to e into the links (tx_fds, tx_sess, ntx; rx_* when `reversed`), all
 * or none: on failure or interruption every socket made here is closed, and *why says what failed. */
static bool connect_pool(pcclComm_t *comm, const ccoip_p2p_info_t *info, const ccoip_peer_entry_t *e, uint32_t streams,
                         bool reversed, int64_t deadline, ccoip_packet_t *early, uint8_t *why) {
    *why = CCOIP_LINK_LOCAL;
    tx_pool_t *t = calloc(1, sizeof *t);
    if (t == NULL) {
        LOG_ERROR(MOD, "out of memory connecting to the ring neighbour");
        return false;
    }
    t->comm = comm;
    t->addr = (ccoip_socket_address_t){e->addr, e->p2p_port};
    t->relayed = !reversed && (e->flags & CCOIP_PEER_TX_RELAYED);
    t->punched = !reversed && (e->flags & CCOIP_PEER_TX_PUNCHED);
    if (t->punched) t->addr.port = e->punch_rx_port;
    ccoip_format_address(&t->addr, t->name, sizeof t->name);
    if (t->relayed) { /* the neighbour's name stays in the log lines */
        size_t len = strlen(t->name);
        t->addr = (ccoip_socket_address_t){info->relay_addr, info->relay_port};
        t->token = e->tx_token;
        snprintf(t->name + len, sizeof t->name - len, " via the relay");
    }
    if (t->punched && deadline > ccoip_now_ms() + punch_ms()) deadline = ccoip_now_ms() + punch_ms();
    t->round = info->round;
    t->streams = streams;
    t->reversed = reversed;
    t->deadline = deadline;
    for (uint32_t i = 0; i < streams; i++) t->fds[i] = -1;
    /* PCCL_P2P_CONNECTS: streams connected at once (1: one after another, as before; 0: the
     * default; for measuring the difference). */
    int64_t at_once = ccoip_env_num("PCCL_P2P_CONNECTS", CONNECTS_AT_ONCE);
    if (at_once < 1) at_once = CONNECTS_AT_ONCE;
    if (at_once > CONNECTS_AT_ONCE) at_once = CONNECTS_AT_ONCE;
    uint32_t nthreads = streams < (uint32_t) at_once ? streams : (uint32_t) at_once;
    pthread_t threads[CONNECTS_AT_ONCE];
    uint32_t started = 0;
    while (started < nthreads && pthread_create(&threads[started], NULL, tx_thread, t) == 0) started++;
    bool ok = started > 0;
    if (!ok) LOG_ERROR(MOD, "cannot start a thread to connect to the ring neighbour %s", t->name);
    for (;;) {
        uint32_t seen = atomic_load_explicit(&comm->events, memory_order_acquire);
        if (atomic_load(&t->ended) == started) break;
        if (interrupted(comm, early)) {
            atomic_store(&t->cancel, true);
            ok = false;
            break;
        }
        /* The threads keep the deadline; this wait only bounds how late we look at mail. */
        tpark_wait((const uint32_t *) &comm->events, seen, 100 * 1000000ll);
    }
    for (uint32_t i = 0; i < started; i++) pthread_join(threads[i], NULL); /* each within ~3 s of cancel */
    if (started > 0 && atomic_load(&t->failed)) *why = atomic_load(&t->why);
    ok = ok && !atomic_load(&t->failed);
    for (uint32_t i = 0; i < streams; i++) ok = ok && t->fds[i] >= 0;
    ccoip_p2p_links_t *l = &comm->p2p.links;
    int *fds = reversed ? l->rx_fds : l->tx_fds;
    ccoip_session_t *sess = reversed ? l->rx_sess : l->tx_sess;
    for (uint32_t i = 0; i < streams; i++) {
        if (!ok) {
            if (t->fds[i] >= 0) ccoip_sock_close(t->fds[i]);
            continue;
        }
        fds[i] = t->fds[i];
        sess[i] = t->sess[i];
    }
    *(reversed ? &l->nrx : &l->ntx) = ok ? streams : 0;
    free(t);
    return ok;
}

/* Takes the arrivals of e's pool for this round (its P2P_BIND says how many) that fit: into the
 * RX side, or the TX side when e dialled as the receiving end (`reversed`). *want is 0 until the
 * first one tells the pool size. Under p2p->lock. */
static void take_arrivals(ccoip_peer_p2p_t *p2p, const ccoip_peer_entry_t *e, uint64_t round, bool reversed,
                          uint32_t *want) {
    ccoip_p2p_links_t *l = &p2p->links;
    int *fds = reversed ? l->tx_fds : l->rx_fds;
    for (int i = 0; i < p2p->narrivals;) {
        ccoip_arrival_t *a = &p2p->arrivals[i];
        bool mine = a->round == round && a->reversed == reversed && uuid_eq(&a->uuid, &e->uuid);
        bool fits = mine && (*want == 0 || (a->streams == *want && fds[a->stream] < 0));
        if (!fits) {
            if (mine) { /* a duplicate or a pool size that changed mid-round: protocol error */
                LOG_WARN(MOD, "ring neighbour on port %u sent a conflicting stream %u of %u", e->p2p_port, a->stream,
                         a->streams);
                ccoip_sock_close(a->fd);
                memmove(a, a + 1, (size_t) (p2p->narrivals - i - 1) * sizeof *a);
                p2p->narrivals--;
                continue;
            }
            i++;
            continue;
        }
        if (*want == 0) {
            *want = a->streams;
            for (uint32_t k = 0; k < *want; k++) fds[k] = -1;
            *(reversed ? &l->ntx : &l->nrx) = *want;
        }
        fds[a->stream] = a->fd;
        (reversed ? l->tx_sess : l->rx_sess)[a->stream] = a->sess;
        memmove(a, a + 1, (size_t) (p2p->narrivals - i - 1) * sizeof *a);
        p2p->narrivals--;
    }
}

/* Waits for every connection of e's pool for this round: the previous neighbour's TX pool, or
 * (`reversed`) the next neighbour dialling us as the unreachable receiving end; fills rx_fds/nrx
 * (tx_fds/ntx). False on timeout or interruption (what arrived is kept in links). */
static bool await_pool(pcclComm_t *comm, const ccoip_peer_entry_t *e, uint64_t round, bool reversed,
                       int64_t deadline, ccoip_packet_t *early) {
    ccoip_peer_p2p_t *p2p = &comm->p2p;
    ccoip_p2p_links_t *l = &p2p->links;
    const int *fds = reversed ? l->tx_fds : l->rx_fds;
    uint32_t want = 0;
    for (;;) {
        uint32_t seen = atomic_load_explicit(&comm->events, memory_order_acquire);
        pthread_mutex_lock(&p2p->lock);
        take_arrivals(p2p, e, round, reversed, &want);
        pthread_mutex_unlock(&p2p->lock);
        uint32_t have = 0;
        for (uint32_t k = 0; k < want; k++) have += fds[k] >= 0;
        if (want > 0 && have == want) return true;
        if (interrupted(comm, early)) return false;
        int64_t left = deadline - ccoip_now_ms();
        if (left <= 0) {
            LOG_WARN(MOD, "ring neighbour on port %u did not connect to us in time (%u of %u streams%s)", e->p2p_port,
                     have, want, reversed ? ", dialling as the unreachable end of our edge to it" : "");
            return false;
        }
        tpark_wait((const uint32_t *) &comm->events, seen, left * 1000000);
    }
}

/* Closes one side's sockets after a failure: the links hold only complete pools. */
static void drop_side(ccoip_p2p_links_t *l, bool rx) {
    uint32_t *n = rx ? &l->nrx : &l->ntx;
    int *fds = rx ? l->rx_fds : l->tx_fds;
    for (uint32_t k = 0; k < *n; k++)
        if (fds[k] >= 0) ccoip_sock_close(fds[k]);
    *n = 0;
}

/* One side of this round's links: the TX pool to e (rx false) or the RX pool from it. We dial
 * unless the edge is reversed towards us; the other end dials when it is. A relayed edge: both
 * ends dial the relay, one stream; a punched edge: both ends dial each other, one stream. Our RX
 * end's dial runs on a thread (rx_dial_start) and arrives as the listener's connections do. */
static bool link_side(pcclComm_t *comm, const ccoip_p2p_info_t *info, const ccoip_peer_entry_t *e, bool rx,
                      uint32_t pool, int64_t deadline, ccoip_packet_t *early, ccoip_p2p_established_t *report) {
    bool reversed = (e->flags & (rx ? CCOIP_PEER_RX_REVERSED : CCOIP_PEER_TX_REVERSED)) != 0;
    bool relayed = (e->flags & (rx ? CCOIP_PEER_RX_RELAYED : CCOIP_PEER_TX_RELAYED)) != 0;
    bool punched = (e->flags & (rx ? CCOIP_PEER_RX_PUNCHED : CCOIP_PEER_TX_PUNCHED)) != 0;
    bool we_dial = rx == reversed && !(rx && (relayed || punched));
    char name[80];
    ccoip_socket_address_t a = {e->addr, e->p2p_port};
    if (punched) a.port = rx ? e->punch_tx_port : e->punch_rx_port; /* where we dial it */
    ccoip_format_address(&a, name, sizeof name);
    if (reversed && rx) LOG_INFO(MOD, "reversed edge: we dial ring neighbour %s for the link it sends us on (the "
                                      "master cannot reach this peer)", name);
    if (reversed && !rx) LOG_INFO(MOD, "reversed edge: ring neighbour %s dials us for the link we send it on (the "
                                       "master cannot reach it)", name);
    if (relayed) LOG_INFO(MOD, "relayed edge: the link %s ring neighbour %s runs through the relay (nobody can "
                               "dial either end)", rx ? "from" : "to", name);
    if (punched) LOG_INFO(MOD, "punched edge: the link %s ring neighbour %s is dialled from both ends at once "
                               "(hole punching: nobody can dial either end)", rx ? "from" : "to", name);
    bool ok = we_dial ? connect_pool(comm, info, e, relayed || punched ? 1 : pool, rx, deadline, early, &report->why)
                      : await_pool(comm, e, info->round, !rx && reversed, deadline, early);
    if (ok) return true;
    if (!we_dial) {
        drop_side(&comm->p2p.links, rx);
        report->why = CCOIP_LINK_NOT_DIALLED;
    }
    report->failed = e->uuid;
    return false;
}

bool ccoip_p2p_establish(pcclComm_t *comm, const ccoip_p2p_info_t *info, ccoip_packet_t *early,
                         ccoip_p2p_established_t *report) {
    ccoip_peer_p2p_t *p2p = &comm->p2p;
    memset(early, 0, sizeof *early);
    memset(report, 0, sizeof *report);
    report->round = info->round;
    const ccoip_peer_entry_t *tx = NULL, *rx = NULL;
    uint32_t host_peers = 1;
    for (uint32_t i = 0; i < info->count; i++) {
        if ((info->peers[i].flags & CCOIP_PEER_CONNECT_TO) && tx == NULL) tx = &info->peers[i];
        if ((info->peers[i].flags & CCOIP_PEER_ACCEPT_FROM) && rx == NULL) rx = &info->peers[i];
        host_peers += (info->peers[i].flags & CCOIP_PEER_SAME_HOST) != 0; /* another peer at our address */
    }
    /* Announce who may connect now (the previous neighbour, and the next one where it dials us),
     * and forget connections of earlier rounds. */
    pthread_mutex_lock(&p2p->lock);
    p2p->nallowed = 0;
    if (rx != NULL && !(rx->flags & CCOIP_PEER_RX_REVERSED)) p2p->allowed[p2p->nallowed++] = rx->uuid;
    if (tx != NULL && (tx->flags & CCOIP_PEER_TX_REVERSED)) p2p->allowed[p2p->nallowed++] = tx->uuid;
    for (int i = 0; i < p2p->narrivals;) {
        if (p2p->arrivals[i].round < info->round) {
            ccoip_sock_close(p2p->arrivals[i].fd);
            p2p->arrivals[i] = p2p->arrivals[--p2p->narrivals];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&p2p->lock);
    close_links(comm);
    p2p->links.epoch = info->round;
    p2p->links.host_peers = host_peers;
    ccoip_link_note_ring(comm, tx != NULL ? &tx->uuid : NULL, info->round);
    int64_t deadline = ccoip_now_ms() + ccoip_env_num("PCCL_P2P_TIMEOUT_MS", 10000);
    uint32_t pool = comm->params.p2p_connection_pool_size;
    if (pool > CCOIP_P2P_MAX_STREAMS) pool = CCOIP_P2P_MAX_STREAMS; /* pcclCreateCommunicator warned */
    if (tx != NULL) p2p->links.tx.peer = tx->uuid;
    if (rx != NULL) p2p->links.rx.peer = rx->uuid;
    bool ok = rx == NULL || !(rx->flags & (CCOIP_PEER_RX_RELAYED | CCOIP_PEER_RX_PUNCHED)) ||
              rx_dial_start(comm, info, rx, deadline);
    if (!ok) report->why = CCOIP_LINK_LOCAL;
    /* Our dials first, then what others dial: nobody waits for a peer that waits for it. */
    bool tx_dials = tx != NULL && !(tx->flags & CCOIP_PEER_TX_REVERSED);
    bool rx_dials = rx != NULL && (rx->flags & CCOIP_PEER_RX_REVERSED);
    if (ok && tx_dials) ok = link_side(comm, info, tx, false, pool, deadline, early, report);
    if (ok && rx_dials) ok = link_side(comm, info, rx, true, pool, deadline, early, report);
    if (ok && tx != NULL && !tx_dials) ok = link_side(comm, info, tx, false, pool, deadline, early, report);
    if (ok && rx != NULL && !rx_dials) ok = link_side(comm, info, rx, true, pool, deadline, early, report);
    rx_dial_end(comm, !ok);
    if (!ok) return false;
    if (tx != NULL) p2p->links.tx.fd = p2p->links.tx_fds[0];
    if (rx != NULL) p2p->links.rx.fd = p2p->links.rx_fds[0];
    report->ok = 1;
    return true;
}
