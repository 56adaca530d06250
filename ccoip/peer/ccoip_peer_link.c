/* ccoip_peer_link.c: the peer's connection to the master. ccoip_link_open connects, handshakes
 * and joins on the caller's thread; then the master-link thread owns all reads: it heartbeats,
 * keeps the world sizes, pushes abort notices to the abort ring and to the op of their tag, hands
 * COMMENCE / DONE to the op of their tag (ccoip_coll.c), everything else to the mailbox, and
 * wakes the waiting thread through threadpark. Between reads it runs the collective watchdog
 * (ccoip_watchdog.c).
 *
 * When the link breaks after admission, the thread reconnects with backoff for
 * PCCL_MASTER_RECONNECT_S (default 60 s) and sends REJOIN, so that a restarted master rebuilds
 * its state from the peers (docs/master-restart.md). Meanwhile calls in flight fail (their
 * replies died with the old connection: the epoch tells) and new calls wait for the link. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_os.h"
#include "ccoip/net/ccoip_conn.h"
#include "ccoip/peer/ccoip_env.h"
#include "ccoip/peer/ccoip_peer_bench.h"
#include "ccoip/peer/ccoip_peer_fp.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/peer/ccoip_peer_shared.h"
#include "ccoip/net/ccoip_socket.h"
#include "log/log.h"
#include "threadpark/threadpark.h"

#define MOD "ccoip-peer"
#define HEARTBEAT_MS 1000
#define RECONNECT_DEFAULT_S 60
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 2000

/* The link epoch of this thread's last send (ccoip_link_broke_since_send); whether this thread
 * is the master-link thread (which reconnects itself, so it never waits for the link). */
static _Thread_local uint32_t tl_epoch;
static _Thread_local bool tl_link_thread;

void ccoip_peer_notify(pcclComm_t *comm) {
    atomic_fetch_add_explicit(&comm->events, 1, memory_order_release);
    tpark_wake_all((const uint32_t *) &comm->events);
}

void ccoip_world_store(pcclComm_t *comm, const ccoip_world_t *w) {
    atomic_store(&comm->world[0], w->global_world_size);
    atomic_store(&comm->world[1], w->group_world_size);
    atomic_store(&comm->world[2], w->num_groups);
    atomic_store(&comm->world[3], w->largest_group_world_size);
}

/* PCCL_MASTER_RECONNECT_S: how long a broken master link is retried (0: not at all). */
static int64_t reconnect_window_ms(void) {
    const char *v = getenv("PCCL_MASTER_RECONNECT_S");
    if (v == NULL || *v == '\0') return RECONNECT_DEFAULT_S * 1000;
    char *end;
    long long s = strtoll(v, &end, 10);
    if (*end != '\0' || s < 0 || s > 86400) {
        LOG_WARN(MOD, "PCCL_MASTER_RECONNECT_S=%s is not a number of seconds (0..86400); using %d", v,
                 RECONNECT_DEFAULT_S);
        return RECONNECT_DEFAULT_S * 1000;
    }
    return s * 1000;
}

/* Parks while the link thread reconnects; false when the link is gone for good or we stop. */
static bool await_link_up(pcclComm_t *comm) {
    if (tl_link_thread) return true;
    for (;;) {
        uint32_t seen = atomic_load_explicit(&comm->events, memory_order_acquire);
        if (atomic_load(&comm->master_lost) || atomic_load(&comm->stopping)) return false;
        if (!atomic_load(&comm->master_down)) return true;
        tpark_wait((const uint32_t *) &comm->events, seen, -1);
    }
}

ccoip_status_t ccoip_link_send(pcclComm_t *comm, const ccoip_packet_t *p) {
    if (!await_link_up(comm)) return CCOIP_ERR_CLOSED;
    pthread_mutex_lock(&comm->send_lock);
    tl_epoch = atomic_load(&comm->link_epoch);
    ccoip_status_t st = ccoip_chan_send(&comm->master_chan, comm->master_fd, p, &comm->send_buf);
    if (comm->send_buf.cap > CCOIP_LINK_KEEP_BYTES) ccoip_writer_free(&comm->send_buf);
    pthread_mutex_unlock(&comm->send_lock);
    return st;
}

ccoip_status_t ccoip_link_send_more(pcclComm_t *comm, const ccoip_packet_t *p) {
    pthread_mutex_lock(&comm->send_lock);
    ccoip_status_t st = ccoip_link_broke_since_send(comm) || atomic_load(&comm->master_down)
                            ? CCOIP_ERR_CLOSED
                            : ccoip_chan_send(&comm->master_chan, comm->master_fd, p, &comm->send_buf);
    pthread_mutex_unlock(&comm->send_lock);
    return st;
}

bool ccoip_link_broke_since_send(pcclComm_t *comm) {
    return atomic_load(&comm->master_lost) || atomic_load(&comm->link_epoch) != tl_epoch;
}

void ccoip_link_note_ring(pcclComm_t *comm, const ccoip_uuid_t *next, uint64_t round) {
    pthread_mutex_lock(&comm->mail_lock);
    comm->round = round;
    if (next != NULL) comm->ring_next = *next;
    else memset(&comm->ring_next, 0, sizeof comm->ring_next);
    pthread_mutex_unlock(&comm->mail_lock);
}

void ccoip_link_note_revision(pcclComm_t *comm, uint64_t revision) {
    pthread_mutex_lock(&comm->mail_lock);
    comm->has_rev = true;
    comm->last_rev = revision;
    pthread_mutex_unlock(&comm->mail_lock);
}

static bool mail_push(pcclComm_t *comm, ccoip_packet_t *p) {
    pthread_mutex_lock(&comm->mail_lock);
    bool ok = comm->mail_count < CCOIP_MAILBOX_SIZE;
    if (ok) {
        comm->mail[(comm->mail_head + comm->mail_count) % CCOIP_MAILBOX_SIZE] = *p;
        comm->mail_count++;
    }
    pthread_mutex_unlock(&comm->mail_lock);
    if (ok) ccoip_peer_notify(comm);
    return ok;
}

static bool mail_pop(pcclComm_t *comm, ccoip_packet_t *out) {
    pthread_mutex_lock(&comm->mail_lock);
    bool ok = comm->mail_count > 0;
    if (ok) {
        *out = comm->mail[comm->mail_head];
        comm->mail_head = (comm->mail_head + 1) % CCOIP_MAILBOX_SIZE;
        comm->mail_count--;
    }
    pthread_mutex_unlock(&comm->mail_lock);
    return ok;
}

/* The pending vote's reply, if it came (its own slot: see pcclComm_t.pending_in). */
static bool pending_pop(pcclComm_t *comm, ccoip_pending_result_t *out) {
    pthread_mutex_lock(&comm->mail_lock);
    bool ok = comm->pending_in;
    if (ok) *out = comm->pending_reply;
    comm->pending_in = false;
    pthread_mutex_unlock(&comm->mail_lock);
    return ok;
}

static bool pending_push(pcclComm_t *comm, const ccoip_pending_result_t *r) {
    pthread_mutex_lock(&comm->mail_lock);
    bool ok = !comm->pending_in;
    comm->pending_in = true;
    comm->pending_reply = *r;
    pthread_mutex_unlock(&comm->mail_lock);
    if (ok) ccoip_peer_notify(comm);
    return ok;
}

/* Waits until `take` finds what it wants (the mailbox's oldest packet, or the pending reply). */
static ccoip_status_t wait_for(pcclComm_t *comm, bool (*take)(pcclComm_t *, void *), void *out, int64_t deadline_ms) {
    for (;;) {
        /* Read the word before looking: a push after the look changes it and ends the wait. */
        uint32_t seen = atomic_load_explicit(&comm->events, memory_order_acquire);
        /* A reply that came before the link broke still counts (a kick's RESULT comes right before
         * its BYE; a master may die right after its RESULT); one not here by then never comes. */
        if (atomic_load(&comm->stopping)) return CCOIP_ERR_CLOSED;
        if (take(comm, out)) return CCOIP_OK;
        if (atomic_load(&comm->link_epoch) != tl_epoch || atomic_load(&comm->master_lost)) return CCOIP_ERR_CLOSED;
        int64_t timeout_ns = -1;
        if (deadline_ms >= 0) {
            int64_t left = deadline_ms - ccoip_now_ms();
            if (left <= 0) return CCOIP_ERR_TIMEOUT;
            timeout_ns = left * 1000000;
        }
        tpark_wait((const uint32_t *) &comm->events, seen, timeout_ns);
    }
}

static bool take_mail(pcclComm_t *comm, void *out) { return mail_pop(comm, out); }
static bool take_pending(pcclComm_t *comm, void *out) { return pending_pop(comm, out); }

ccoip_status_t ccoip_link_wait_mail(pcclComm_t *comm, ccoip_packet_t *out, int64_t deadline_ms) {
    return wait_for(comm, take_mail, out, deadline_ms);
}

ccoip_status_t ccoip_link_wait_pending(pcclComm_t *comm, ccoip_pending_result_t *out) {
    return wait_for(comm, take_pending, out, -1);
}

/* Every reply awaited is gone. broke: the connection broke (the master died, or the network), so
 * rings that commenced run on and decide their collectives themselves (ccoip_coll.c); otherwise
 * the master or we ended it on purpose (BYE, a kick, a protocol violation), and everything stops. */
static void wake_callers(pcclComm_t *comm, bool broke) {
    if (broke && comm->router.master_gone != NULL) comm->router.master_gone(comm);
    else if (comm->router.abort != NULL) comm->router.abort(comm, true, 0);
}

static void link_lost(pcclComm_t *comm, const char *why, bool broke) {
    if (!atomic_load(&comm->stopping)) LOG_ERROR(MOD, "lost the connection to the master: %s", why);
    atomic_store(&comm->master_lost, true);
    ccoip_abort_all(&comm->aborts);
    wake_callers(comm, broke);
    ccoip_peer_notify(comm);
}

/* REJOIN on a connection whose handshake is done, and the master's answer. */
static ccoip_status_t rejoin_send(pcclComm_t *comm, int fd, ccoip_chan_t *chan) {
    ccoip_punch_map(comm); /* a new master knows nothing of our ports */
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_REJOIN;
    pthread_mutex_lock(&comm->mail_lock);
    p.u.rejoin = (ccoip_rejoin_t){comm->join,     comm->ring_next,  comm->round,     comm->has_rev,
                                  comm->last_rev, comm->has_result, comm->result_rev};
    pthread_mutex_unlock(&comm->mail_lock);
    ccoip_socket_address_t local; /* this connection's: the network may have changed */
    if (ccoip_sock_local_address(fd, &local)) p.u.rejoin.join.local_addr = local.inet;
    ccoip_status_t st = ccoip_chan_send(chan, fd, &p, NULL);
    ccoip_packet_t r;
    if (st == CCOIP_OK) st = ccoip_chan_recv(chan, fd, &r, CCOIP_MAX_PAYLOAD, ccoip_now_ms() + 10000);
    if (st != CCOIP_OK) return st;
    bool ok = r.type == CCOIP_PKT_M2C_JOIN_RESPONSE && r.u.join_response.status == CCOIP_JOIN_OK;
    bool refused = r.type == CCOIP_PKT_M2C_JOIN_RESPONSE && r.u.join_response.status == CCOIP_JOIN_REJOIN_REFUSED;
    ccoip_packet_free(&r);
    return ok ? CCOIP_OK : refused ? CCOIP_ERR_REFUSED : CCOIP_ERR_IO;
}

/* HELLO with our UUID, then REJOIN: what we were before the master was lost. CCOIP_OK when taken
 * back (*chan: the connection's channel); CCOIP_ERR_REFUSED when the master refuses for good;
 * anything else: try again. */
static ccoip_status_t rejoin(pcclComm_t *comm, int fd, ccoip_chan_t *chan) {
    ccoip_hello_ack_t ack;
    ccoip_session_t sess = ccoip_comm_session(comm); /* the restarted master proves the secret too */
    ccoip_status_t st = ccoip_conn_hello(fd, CCOIP_ROLE_PEER_TO_MASTER, &comm->uuid, ccoip_comm_key(comm), &sess,
                                         ccoip_now_ms() + 10000, "the master", &ack);
    if (st != CCOIP_OK) return st;
    if (memcmp(&ack.uuid, &comm->uuid, sizeof ack.uuid) != 0) return CCOIP_ERR_TIMEOUT; /* held by our old connection */
    if (!ccoip_chan_init(chan, &sess)) return CCOIP_ERR_NOMEM;
    st = rejoin_send(comm, fd, chan);
    if (st != CCOIP_OK) ccoip_chan_free(chan);
    return st;
}

/* Publishes fd as the connection being handshaken, so that link_close can cut it short; false
 * (fd closed) when the communicator is stopping. Destroy sets `stopping` before link_close takes
 * mail_lock: either link_close sees dialing_fd, or we see `stopping` here. */
static bool dial_begin(pcclComm_t *comm, int fd) {
    pthread_mutex_lock(&comm->mail_lock);
    bool stopping = atomic_load(&comm->stopping);
    if (stopping) ccoip_sock_close(fd);
    else comm->dialing_fd = fd;
    pthread_mutex_unlock(&comm->mail_lock);
    return !stopping;
}

/* The handshake on fd failed: forget and close it. */
static void dial_end(pcclComm_t *comm, int fd) {
    pthread_mutex_lock(&comm->mail_lock);
    comm->dialing_fd = -1;
    ccoip_sock_close(fd);
    pthread_mutex_unlock(&comm->mail_lock);
}

/* The link broke: reconnect within the window (true), or give up for good (false). */
static bool relink(pcclComm_t *comm, const char *why) {
    if (atomic_load(&comm->stopping)) return false;
    if (comm->reconnect_ms <= 0 || !atomic_load(&comm->accepted)) {
        link_lost(comm, why, true);
        return false;
    }
    LOG_WARN(MOD, "lost the connection to the master: %s; reconnecting for up to %lld s", why,
             (long long) (comm->reconnect_ms / 1000));
    atomic_store(&comm->master_down, true);
    atomic_fetch_add(&comm->link_epoch, 1); /* replies awaited now will never come */
    /* Replies that came before the break stay in the mailbox: they are the old master's word (a
     * sync's RESULT read late must still count, or one member fails a sync the others passed). */
    wake_callers(comm, true);
    ccoip_peer_notify(comm);
    pthread_mutex_lock(&comm->send_lock);
    pthread_mutex_lock(&comm->mail_lock);
    ccoip_sock_close(comm->master_fd);
    comm->master_fd = -1;
    ccoip_chan_free(&comm->master_chan);
    pthread_mutex_unlock(&comm->mail_lock);
    pthread_mutex_unlock(&comm->send_lock);

    char name[80];
    ccoip_format_address(&comm->params.master_address, name, sizeof name);
    int64_t deadline = ccoip_now_ms() + comm->reconnect_ms;
    int backoff = BACKOFF_FIRST_MS;
    const char *last = "nobody listens";
    while (!atomic_load(&comm->stopping)) {
        int64_t left = deadline - ccoip_now_ms();
        if (left <= 0) break;
        ccoip_status_t st;
        int fd = ccoip_sock_connect(&comm->params.master_address, (int) (left < 1000 ? left : 1000), &st);
        if (fd >= 0) {
            if (!dial_begin(comm, fd)) return false; /* stopping: dial_begin closed fd */
            ccoip_chan_t chan;
            st = rejoin(comm, fd, &chan);
            if (st == CCOIP_OK) {
                pthread_mutex_lock(&comm->send_lock);
                pthread_mutex_lock(&comm->mail_lock);
                comm->master_fd = fd;
                comm->master_chan = chan;
                comm->dialing_fd = -1;
                pthread_mutex_unlock(&comm->mail_lock);
                pthread_mutex_unlock(&comm->send_lock);
                atomic_store(&comm->master_down, false);
                ccoip_peer_notify(comm);
                LOG_WARN(MOD, "reconnected to the master at %s", name);
                return true;
            }
            dial_end(comm, fd);
            if (st == CCOIP_ERR_REFUSED) {
                last = "the master refused to take us back (a new master past its recovery window?)";
                break;
            }
        }
        last = ccoip_status_str(st);
        if (ccoip_sock_wait(-1, comm->link_wake[0], backoff) == CCOIP_ERR_CLOSED) return false; /* stopping */
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
    }
    char msg[200];
    snprintf(msg, sizeof msg, "%s; no way back to %s (last: %s)", why, name, last);
    link_lost(comm, msg, true);
    atomic_store(&comm->master_down, false);
    return false;
}

/* One packet from the master, to where it goes: the world, an op's reply slot, the pending-vote
 * queue or the mailbox. False when the link must end (BYE, a protocol violation). */
static bool deliver(pcclComm_t *comm, ccoip_packet_t *p) {
    if (p->type == CCOIP_PKT_M2C_BYE) { /* shut down on purpose: the run is over, no reconnecting */
        link_lost(comm, "the master shut down", false);
        return false;
    }
    switch (p->type) {
    case CCOIP_PKT_M2C_WORLD_UPDATE:
        ccoip_world_store(comm, &p->u.world_update.world);
        LOG_INFO(MOD, "world changed: %u peers, %u in our group", p->u.world_update.world.global_world_size,
                 p->u.world_update.world.group_world_size);
        ccoip_packet_free(p);
        break;
    case CCOIP_PKT_M2C_COLLECTIVE_ABORT:
        ccoip_abort_push(&comm->aborts, p->u.collective_abort.tag);
        if (comm->router.abort != NULL) comm->router.abort(comm, false, p->u.collective_abort.tag);
        ccoip_packet_free(p);
        break;
    case CCOIP_PKT_M2C_COLLECTIVE_COMMENCE:
    case CCOIP_PKT_M2C_COLLECTIVE_DONE:
        /* to the op of its tag, not the mailbox */
        if (comm->router.route == NULL || !comm->router.route(comm, p)) ccoip_packet_free(p);
        break;
    case CCOIP_PKT_M2C_PENDING_RESULT:
        if (!pending_push(comm, &p->u.pending_result)) {
            link_lost(comm, "the master answered a pending vote that was not asked", false);
            return false;
        }
        break;
    case CCOIP_PKT_M2C_JOIN_RESPONSE:
    case CCOIP_PKT_M2C_P2P_INFO:
    case CCOIP_PKT_M2C_TOPOLOGY_RESULT:
    case CCOIP_PKT_M2C_SHARED_STATE_RESULT:
    case CCOIP_PKT_M2C_SHARED_STATE_DONE:
    case CCOIP_PKT_M2C_BANDWIDTH_REQUEST:
        if (p->type == CCOIP_PKT_M2C_SHARED_STATE_RESULT && p->u.ss_result.status == CCOIP_SS_OK) {
            pthread_mutex_lock(&comm->mail_lock);
            comm->has_result = true;
            comm->result_rev = p->u.ss_result.revision;
            pthread_mutex_unlock(&comm->mail_lock);
        }
        if (!mail_push(comm, p)) {
            ccoip_packet_free(p);
            link_lost(comm, "the master sent more replies than were asked for", false);
            return false;
        }
        break;
    default:
        LOG_ERROR(MOD, "the master sent %s, which a master never sends", ccoip_packet_name(p->type));
        ccoip_packet_free(p);
        link_lost(comm, "protocol violation", false);
        return false;
    }
    return true;
}

static void *link_main(void *arg) {
    pcclComm_t *comm = arg;
    ccoip_os_name_thread("pccl-link");
    tl_link_thread = true;
    int64_t next_beat = ccoip_now_ms() + HEARTBEAT_MS;
    ccoip_packet_t beat;
    memset(&beat, 0, sizeof beat);
    beat.type = CCOIP_PKT_C2M_HEARTBEAT;
    int64_t next_check = ccoip_now_ms();
    while (!atomic_load(&comm->stopping)) {
        int64_t now = ccoip_now_ms();
        if (now >= next_check) next_check = now + (comm->router.tick ? comm->router.tick(comm, now) : HEARTBEAT_MS);
        int64_t wait = (next_beat < next_check ? next_beat : next_check) - now;
        ccoip_status_t st = wait > 0 ? ccoip_sock_wait(comm->master_fd, comm->link_wake[0], (int) wait) : CCOIP_ERR_TIMEOUT;
        if (st == CCOIP_ERR_CLOSED) break; /* woken to stop */
        if (ccoip_now_ms() >= next_beat) {
            if (ccoip_link_send(comm, &beat) != CCOIP_OK) {
                /* What the master sent before it went is still to be read (a RESULT a sync waits
                 * for): read on, and reconnect when the reading fails. */
                if (st != CCOIP_OK) st = ccoip_sock_wait(comm->master_fd, -1, 0);
                if (st != CCOIP_OK) {
                    if (!relink(comm, "heartbeat could not be sent")) break;
                    next_beat = ccoip_now_ms();
                    continue;
                }
            }
            next_beat += HEARTBEAT_MS;
        }
        if (st != CCOIP_OK) continue;
        ccoip_packet_t p;
        st = ccoip_chan_recv(&comm->master_chan, comm->master_fd, &p, CCOIP_MAX_PAYLOAD, ccoip_now_ms() + 30000);
        if (st != CCOIP_OK) {
            if (!relink(comm, st == CCOIP_ERR_CLOSED ? "the master closed the connection" : ccoip_status_str(st))) break;
            next_beat = ccoip_now_ms() + HEARTBEAT_MS;
            continue;
        }
        if (!deliver(comm, &p)) break;
    }
    return NULL;
}

/* PCCL_ADVERTISE_ADDRESS ("IP" or "IP:PORT"): where the others are to dial us instead of the
 * address the master sees (a forwarded port, a multi-homed host). False when it does not parse. */
static bool take_advertised(ccoip_join_t *j) {
    const char *v = getenv("PCCL_ADVERTISE_ADDRESS");
    if (v == NULL || *v == '\0') return true;
    ccoip_socket_address_t a;
    if (!ccoip_parse_address(v, 0, &a)) {
        LOG_ERROR(MOD, "PCCL_ADVERTISE_ADDRESS=%s: not a numeric IP address with an optional :port", v);
        return false;
    }
    j->advertised = 1;
    j->adv_addr = a.inet;
    j->adv_port = a.port;
    return true;
}

/* What the master saw at JOIN: where the others will dial us, and whether its connection back
 * there got through (docs/nat.md). */
static void log_seen(const ccoip_join_response_t *r, uint16_t p2p_port) {
    char where[80];
    ccoip_socket_address_t a = {r->seen_addr, r->seen_port};
    ccoip_format_address(&a, where, sizeof where);
    if (r->reachable) LOG_INFO(MOD, "the master sees us at %s (our p2p port %u) and could connect back there", where, p2p_port);
    else LOG_WARN(MOD, "behind NAT or a firewall: the master sees us at %s (our p2p port %u) and could not connect "
                       "back there; this peer dials its ring neighbours itself", where, p2p_port);
}

pcclResult_t ccoip_link_open(pcclComm_t *comm, uint16_t p2p_port, uint16_t ss_port, uint16_t bench_port) {
    const ccoip_socket_address_t *addr = &comm->params.master_address;
    char name[80];
    ccoip_format_address(addr, name, sizeof name);
    int64_t deadline = ccoip_now_ms() + ccoip_env_num("PCCL_CONNECT_TIMEOUT_MS", 3000);
    ccoip_status_t st = CCOIP_ERR_TIMEOUT;
    int fd = -1;
    /* Retry while nobody listens yet (a master starting up), within the deadline. */
    while (fd < 0 && ccoip_now_ms() < deadline && !atomic_load(&comm->stopping)) {
        int64_t left = deadline - ccoip_now_ms();
        fd = ccoip_sock_connect(addr, (int) (left < 1000 ? left : 1000), &st);
        if (fd < 0 && st != CCOIP_ERR_TIMEOUT) ccoip_sleep_ms(100);
    }
    if (fd < 0) {
        LOG_ERROR(MOD, "cannot connect to the master at %s: %s", name, ccoip_status_str(st));
        return pcclMasterConnectionFailed;
    }
    comm->master_fd = fd;
    ccoip_hello_ack_t ack;
    ccoip_session_t sess = ccoip_comm_session(comm); /* encrypted: the keys of our control packets */
    st = ccoip_conn_hello(fd, CCOIP_ROLE_PEER_TO_MASTER, NULL, ccoip_comm_key(comm), &sess, ccoip_now_ms() + 10000,
                          "the master", &ack);
    if (st != CCOIP_OK) {
        LOG_ERROR(MOD, "handshake with the master at %s failed: %s", name, ccoip_status_str(st));
        return pcclMasterConnectionFailed;
    }
    comm->uuid = ack.uuid;
    if (!ccoip_chan_init(&comm->master_chan, &sess)) return pcclInternalError;
    ccoip_punch_map(comm);
    ccoip_packet_t p;
    if (ccoip_peer_fingerprint_wanted()) {
        ccoip_fp_entry_t entries[CCOIP_MAX_FP_ENTRIES];
        if (!ccoip_peer_fingerprint_packet(&p, entries)) return pcclInternalError;
        if ((st = ccoip_chan_send(&comm->master_chan, fd, &p, NULL)) != CCOIP_OK) {
            LOG_ERROR(MOD, "sending our determinism fingerprint to the master at %s failed: %s", name,
                      ccoip_status_str(st));
            return pcclMasterConnectionFailed;
        }
    }
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_JOIN;
    p.u.join.peer_group = comm->params.peer_group;
    p.u.join.p2p_port = p2p_port;
    p.u.join.ss_port = ss_port;
    p.u.join.bench_port = bench_port;
    if (!take_advertised(&p.u.join)) return pcclInvalidArgument;
    ccoip_socket_address_t local;
    if (ccoip_sock_local_address(fd, &local)) p.u.join.local_addr = local.inet;
    comm->join = p.u.join;
    comm->reconnect_ms = reconnect_window_ms();
    st = ccoip_chan_send(&comm->master_chan, fd, &p, NULL);
    ccoip_packet_t r;
    if (st == CCOIP_OK) st = ccoip_chan_recv(&comm->master_chan, fd, &r, CCOIP_MAX_PAYLOAD, ccoip_now_ms() + 10000);
    if (st != CCOIP_OK) {
        LOG_ERROR(MOD, "joining the master at %s failed: %s", name, ccoip_status_str(st));
        return pcclMasterConnectionFailed;
    }
    uint8_t status = r.u.join_response.status;
    bool is_join = r.type == CCOIP_PKT_M2C_JOIN_RESPONSE;
    if (is_join && status == CCOIP_JOIN_OK) log_seen(&r.u.join_response, p2p_port);
    ccoip_packet_free(&r);
    if (!is_join || status != CCOIP_JOIN_OK) {
        if (is_join && status == CCOIP_JOIN_FINGERPRINT)
            LOG_ERROR(MOD, "the master at %s refused us: our determinism fingerprint differs from the run's (its log "
                           "names the functions; docs/fingerprint.md)", name);
        else if (is_join && status == CCOIP_JOIN_LOOPBACK_MIX)
            LOG_ERROR(MOD, "the master at %s refused us: loopback and non-loopback peers cannot share a run "
                           "(connect every peer via the same kind of address)", name);
        else LOG_ERROR(MOD, "the master at %s refused to register us", name);
        return pcclMasterConnectionFailed;
    }
    if (!ccoip_wakeup_open(comm->link_wake)) return pcclInternalError;
    comm->dialing_fd = -1;
    if (pthread_create(&comm->link_thread, NULL, link_main, comm) != 0) {
        LOG_ERROR(MOD, "cannot start the master-link thread");
        return pcclInternalError;
    }
    comm->link_started = true;
    return pcclSuccess;
}

void ccoip_link_close(pcclComm_t *comm) {
    if (comm->link_started) {
        ccoip_wakeup_signal(comm->link_wake[1]);
        /* Also ends a read or a heartbeat in progress, and a reconnection's handshake. */
        pthread_mutex_lock(&comm->mail_lock);
        ccoip_sock_shutdown(comm->master_fd);
        ccoip_sock_shutdown(comm->dialing_fd);
        pthread_mutex_unlock(&comm->mail_lock);
        pthread_join(comm->link_thread, NULL);
        comm->link_started = false;
    }
    ccoip_wakeup_close(comm->link_wake);
    ccoip_sock_close(comm->master_fd);
    comm->master_fd = -1;
    ccoip_chan_free(&comm->master_chan);
    ccoip_packet_t p;
    while (mail_pop(comm, &p)) ccoip_packet_free(&p);
}
