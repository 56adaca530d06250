/* ccoip_ss_fetch.c: the parallel, ranged fetch of a shared-state sync (ccoip_ss_fetch.h).
 *
 * The plan: every tensor to fetch becomes pieces (byte ranges of PCCL_SS_RANGE_BYTES; tensors
 * smaller than that share a unit of up to 64 pieces with others of the same distributors), and a
 * unit is what one request asks for. One thread per distributor connects, then takes the first
 * unit still to do that it may serve, asks for it, reads its bytes straight into the tensors
 * (device tensors through a host staging buffer), and takes the next. A thread with nothing left
 * to take while units it could serve are in flight elsewhere waits: if their distributor fails,
 * they come back. A failed distributor is dropped for the rest of the call; the call fails when a
 * unit not yet done has no distributor left. */
#include "ccoip/peer/ccoip_ss_fetch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_conn.h"
#include "ccoip/net/ccoip_os.h"
#include "ccoip/net/ccoip_sealed.h"
#include "ccoip/net/ccoip_socket.h"
#include "ccoip/peer/ccoip_env.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "ccoip/peer/ccoip_prof.h"
#include "ccoip/peer/ccoip_ss_dial.h"
#include "ccoip/peer/ccoip_ss_mailbox.h"
#include "ccoip/peer/ccoip_ss_resume.h"
#include "cuda/cuda_table.h"
#include "hash/hash.h"
#include "log/log.h"
#include "threadpark/monocond.h"

#define MOD "ccoip-ss"
#define HANDSHAKE_MS 2000
#define CHUNK ((size_t) 8 << 20)             /* the staging size */
/* Bytes per receive call: each gets PCCL_SS_TIMEOUT_MS, so that a slow distributor that keeps
 * sending is not taken for a stalled one. */
#define READ_STEP ((size_t) 256 << 10)
#define UNIT_PIECES 64u                      /* small tensors in one request */
#define MIN_RANGE ((uint64_t) 64 << 10)
#define STEAL_MS 500 /* a range in flight is fetched again no sooner than this (see victim_for) */
#define DEFAULT_RANGE ((uint64_t) 8 << 20)   /* PCCL_SS_RANGE_BYTES */
#define PROGRESS_BYTES ((uint64_t) 64 << 20) /* fetches above this log progress lines */
#define PROGRESS_MS 1000

/* A unit: open (no thread has it), busy (a thread fetches it), done (arrived whole). */
enum { U_OPEN = 0, U_BUSY = 1, U_DONE = 2 };

typedef struct unit_t {
    uint32_t first, n; /* pieces */
    uint64_t mask;     /* the distributors (bits: RESULT source indices) that may serve it */
    uint8_t state;
    bool split;        /* one range of a tensor cut into ranges */
    bool host;         /* every piece in host memory (a thief may fetch it again) */
    int8_t owner;      /* the source fetching it into the tensors, -1: none */
    int8_t thief;      /* the source fetching it again into a buffer of its own, -1: none */
    uint32_t fetch;    /* the RESULT's fetch of its first piece */
    int64_t since;     /* ms: when its owner took it */
    uint64_t xxh;      /* split and done: its bytes' hash, as its distributor sent and we checked it */
} unit_t;

struct plan_t;

typedef struct source_t {
    struct plan_t *plan;
    const ccoip_ss_source_t *at;
    uint32_t idx;
    pthread_t thread;
    bool started;
    char name[80];
    _Atomic uint64_t rx; /* bytes received from it */
    int64_t t0, last_log;
    hash_xxh3_stream_t *hs; /* the range being received */
    uint64_t last_hash;     /* the first range of its last unit, checked against its trailer */
    int fd;    /* under the plan's lock: -1 before the connection and after its close */
    bool busy; /* under the plan's lock: a unit in flight */
} source_t;

typedef struct plan_t {
    pcclComm_t *comm;
    pthread_mutex_t lock; /* guards units, ndone, alive, res */
    pthread_cond_t cv;
    ccoip_ss_piece_t *pieces;
    unit_t *units;
    uint32_t npieces, nunits, ndone;
    uint32_t first_open; /* every unit before it is done */
    uint64_t alive; /* bit per source still usable */
    source_t src[CCOIP_SS_MAX_DISTRIBUTORS];
    uint32_t nsrc;
    uint64_t total, range;
    _Atomic uint64_t rx;
    pcclResult_t res; /* the first failure */
    int64_t stall_ms;
    uint32_t max_sources; /* PCCL_SS_MAX_SOURCES */
    bool endgame;         /* PCCL_SS_ENDGAME */
    const ccoip_ss_result_t *r;
    uint64_t kept; /* bytes a failed fetch before had received and that still match */
} plan_t;

/* ---- the plan ---- */

static pcclResult_t fail(plan_t *pl, pcclResult_t r) {
    if (pl->res == pcclSuccess) pl->res = r;
    return r;
}

/* The distributors a fetch names (the first `most`), as a mask over the RESULT's sources. 0: none
 * valid. */
static uint64_t fetch_mask(const ccoip_ss_result_t *r, const ccoip_ss_fetch_t *f, uint32_t most) {
    uint64_t mask = 0;
    for (uint32_t j = 0; j < f->nsrc && j < most; j++) {
        if (f->src[j].index >= r->nsources) {
            LOG_ERROR(MOD, "shared state: the master names distributor %u of %u for tensor \"%s\"",
                      (unsigned) f->src[j].index, (unsigned) r->nsources, f->name);
            return 0;
        }
        mask |= 1ull << f->src[j].index;
    }
    if (mask == 0) LOG_ERROR(MOD, "shared state: the master names no distributor for tensor \"%s\"", f->name);
    return mask;
}

/* Appends a piece of fetch f; opens a unit for it unless `join` (the last unit takes it). */
static void add_piece(plan_t *pl, uint32_t f, const ccoip_ss_slot_t *s, uint64_t off, uint64_t len, uint64_t mask,
                      bool join) {
    pl->pieces[pl->npieces] = (ccoip_ss_piece_t){s, off, len};
    if (join) {
        pl->units[pl->nunits - 1].n++;
    } else {
        pl->units[pl->nunits++] = (unit_t){pl->npieces, 1, mask, U_OPEN, s->bytes >= pl->range, true, -1, -1, f, 0, 0};
    }
    pl->units[pl->nunits - 1].host &= !s->device;
    pl->npieces++;
    pl->total += len;
}

static bool plan_alloc(plan_t *pl, const ccoip_ss_result_t *r, const ccoip_ss_slot_t *slots, size_t nslots) {
    uint64_t most = 0;
    for (uint32_t i = 0; i < r->nfetch; i++) {
        const ccoip_ss_slot_t *s = ccoip_ss_find(slots, nslots, r->fetch[i].name);
        most += s == NULL ? 1 : s->bytes / pl->range + 1;
    }
    if (most >= UINT32_MAX) return false;
    pl->pieces = calloc(most + 1, sizeof *pl->pieces);
    pl->units = calloc(most + 1, sizeof *pl->units);
    return pl->pieces != NULL && pl->units != NULL;
}

/* The range size: PCCL_SS_RANGE_BYTES when set (at least MIN_RANGE); unset, DEFAULT_RANGE or less
 * for a small fetch, so that every distributor gets some (a quarter of its share), never below
 * MIN_RANGE. */
static void plan_limits(plan_t *pl, const ccoip_ss_result_t *r, const ccoip_ss_slot_t *slots, size_t nslots) {
    int64_t most = ccoip_env_num("PCCL_SS_MAX_SOURCES", CCOIP_SS_MAX_SOURCES);
    pl->max_sources = most < 1 ? 1 : (uint32_t) (most > CCOIP_SS_MAX_SOURCES ? CCOIP_SS_MAX_SOURCES : most);
    const char *endgame = getenv("PCCL_SS_ENDGAME"); /* "0": off (ccoip_env_num takes only positive numbers) */
    pl->endgame = endgame == NULL || strcmp(endgame, "0") != 0;
    int64_t want = ccoip_env_num("PCCL_SS_RANGE_BYTES", (int64_t) DEFAULT_RANGE);
    uint64_t total = 0;
    for (uint32_t i = 0; i < r->nfetch; i++) {
        const ccoip_ss_slot_t *s = ccoip_ss_find(slots, nslots, r->fetch[i].name);
        total += s == NULL ? 0 : s->bytes;
    }
    uint64_t share = total / (4 * (uint64_t) (r->nsources > 0 ? r->nsources : 1));
    pl->range = want < (int64_t) MIN_RANGE ? MIN_RANGE : (uint64_t) want;
    if (getenv("PCCL_SS_RANGE_BYTES") == NULL && share < pl->range) pl->range = share < MIN_RANGE ? MIN_RANGE : share;
}

/* The pieces and units of the RESULT's fetches, and the distributors they name. */
static pcclResult_t plan_build(plan_t *pl, const ccoip_ss_result_t *r, const ccoip_ss_slot_t *slots, size_t nslots) {
    if (r->nsources > CCOIP_SS_MAX_DISTRIBUTORS) return fail(pl, pcclInternalError);
    if (!plan_alloc(pl, r, slots, nslots)) {
        LOG_ERROR(MOD, "shared state: out of memory planning the fetch of %u tensors", (unsigned) r->nfetch);
        return fail(pl, pcclInternalError);
    }
    uint64_t open_bytes = 0, open_mask = 0;
    bool open = false;
    for (uint32_t i = 0; i < r->nfetch; i++) {
        const ccoip_ss_fetch_t *f = &r->fetch[i];
        const ccoip_ss_slot_t *s = ccoip_ss_find(slots, nslots, f->name);
        if (s == NULL) {
            LOG_ERROR(MOD, "shared state: the master asked us to fetch tensor \"%s\", which we do not have", f->name);
            return fail(pl, pcclInternalError);
        }
        uint64_t mask = fetch_mask(r, f, pl->max_sources);
        if (mask == 0) return fail(pl, pcclInternalError);
        if (s->bytes == 0) continue;
        if (s->bytes >= pl->range) { /* a large tensor: ranges of its own */
            for (uint64_t off = 0; off < s->bytes; off += pl->range)
                add_piece(pl, i, s, off, s->bytes - off < pl->range ? s->bytes - off : pl->range, mask, false);
            open = false;
            continue;
        }
        bool join = open && open_mask == mask && open_bytes + s->bytes <= pl->range &&
                    pl->units[pl->nunits - 1].n < UNIT_PIECES;
        add_piece(pl, i, s, 0, s->bytes, mask, join);
        open_bytes = join ? open_bytes + s->bytes : s->bytes;
        open_mask = mask;
        open = true;
    }
    pl->nsrc = r->nsources;
    pl->alive = r->nsources == 64 ? ~0ull : (1ull << r->nsources) - 1;
    for (uint32_t k = 0; k < pl->nsrc; k++) {
        source_t *s = &pl->src[k];
        s->plan = pl;
        s->at = &r->sources[k];
        s->idx = k;
        s->fd = -1;
        ccoip_socket_address_t a = {s->at->addr, s->at->ss_port};
        ccoip_format_address(&a, s->name, sizeof s->name);
    }
    return pcclSuccess;
}

/* ---- the units, under the plan's lock ---- */

/* After a distributor is dropped: a unit not done without any distributor left fails the call. */
static void check_orphans(plan_t *pl) {
    for (uint32_t u = 0; u < pl->nunits && pl->res == pcclSuccess; u++) {
        const unit_t *x = &pl->units[u];
        if (x->state == U_DONE || (x->mask & pl->alive) != 0) continue;
        const ccoip_ss_piece_t *p = &pl->pieces[x->first];
        LOG_ERROR(MOD, "shared state: no distributor of tensor \"%s\" (bytes %llu+%llu) is left", p->slot->name,
                  (unsigned long long) p->off, (unsigned long long) p->len);
        pl->res = pcclRankConnectionLost;
    }
}

static double rate_of(const source_t *s, int64_t now) {
    return (double) atomic_load(&s->rx) / (double) (now - s->t0 > 0 ? now - s->t0 : 1);
}

static uint64_t unit_bytes(const plan_t *pl, const unit_t *x) {
    uint64_t b = 0;
    for (uint32_t i = 0; i < x->n; i++) b += pl->pieces[x->first + i].len;
    return b;
}

/* Whether source k is the last one left for a unit not done other than x (then its connection
 * must not be cut for x). */
static bool needed_elsewhere(const plan_t *pl, int k, const unit_t *x) {
    for (uint32_t u = pl->first_open; u < pl->nunits; u++) {
        const unit_t *y = &pl->units[u];
        if (y != x && y->state != U_DONE && (y->mask & pl->alive) == 1ull << k) return true;
    }
    return false;
}

/* A unit in flight that source s should fetch again (endgame: nothing is left to take): its owner
 * has had it for over twice as long as s would take for it at s's rate so far, plus STEAL_MS;
 * -1: none. */
static int64_t victim_for(plan_t *pl, const source_t *s) {
    int64_t now = ccoip_now_ms();
    double mine = rate_of(s, now); /* bytes per ms */
    for (uint32_t u = pl->first_open; mine > 0 && u < pl->nunits; u++) {
        const unit_t *x = &pl->units[u];
        if ((x->mask & (1ull << s->idx)) == 0 || x->state != U_BUSY || !x->host || x->thief >= 0 || x->owner < 0) continue;
        if ((double) (now - x->since) > 2.0 * (double) unit_bytes(pl, x) / mine + STEAL_MS &&
            !needed_elsewhere(pl, x->owner, x))
            return u;
    }
    return -1;
}

/* The next unit source s may fetch, marked busy (*stolen: it is in flight elsewhere, fetch it
 * into a buffer); -1 when there is none, now or later. */
static int64_t take_unit(plan_t *pl, source_t *s, bool *stolen) {
    uint64_t bit = 1ull << s->idx;
    int64_t got = -1;
    *stolen = false;
    pthread_mutex_lock(&pl->lock);
    while (got < 0 && pl->res == pcclSuccess && pl->ndone < pl->nunits && (pl->alive & bit) != 0) {
        bool later = false;
        for (uint32_t u = pl->first_open; u < pl->nunits; u++) {
            unit_t *x = &pl->units[u];
            if ((x->mask & bit) == 0 || x->state == U_DONE) continue;
            if (x->state == U_OPEN) {
                x->state = U_BUSY;
                x->owner = (int8_t) s->idx;
                x->since = ccoip_now_ms();
                got = u;
                break;
            }
            later = true; /* in flight elsewhere: back to the pool if that distributor fails */
        }
        if (got < 0 && pl->endgame && (got = victim_for(pl, s)) >= 0) {
            pl->units[got].thief = (int8_t) s->idx;
            *stolen = true;
        }
        if (got < 0 && !later) break;
        if (got < 0) { /* woken by any unit's end; the rates change meanwhile: look again */
            struct timespec deadline;
            monocond_deadline(&deadline, 200 * 1000000LL);
            monocond_timedwait(&pl->cv, &pl->lock, &deadline);
        }
    }
    s->busy = got >= 0;
    pthread_mutex_unlock(&pl->lock);
    return got;
}

/* Under the lock, once every unit is done: connections still receiving (a copy that lost) are
 * cut, so that the call does not wait for them. */
static void unit_done(plan_t *pl, unit_t *x) {
    x->state = U_DONE;
    pl->ndone++;
    while (pl->first_open < pl->nunits && pl->units[pl->first_open].state == U_DONE) pl->first_open++;
    for (uint32_t k = 0; pl->ndone == pl->nunits && k < pl->nsrc; k++)
        if (pl->src[k].busy && pl->src[k].fd >= 0) ccoip_sock_shutdown(pl->src[k].fd);
}

/* Source s's fetch of unit u ended: done (ok), or s is dropped and the unit goes back to the
 * pool (unless a thief fetches it; `stolen`: s was that thief). */
static void finish_unit(plan_t *pl, source_t *s, int64_t u, bool ok, bool stolen) {
    pthread_mutex_lock(&pl->lock);
    s->busy = false;
    unit_t *x = u >= 0 ? &pl->units[u] : NULL;
    if (x != NULL && stolen) x->thief = -1;
    if (x != NULL && !stolen) x->owner = -1;
    if (x != NULL && ok && x->state != U_DONE) x->xxh = s->last_hash, unit_done(pl, x);
    if (x != NULL && !ok && x->state == U_BUSY && x->owner < 0 && x->thief < 0) x->state = U_OPEN;
    bool counts = ok || pl->ndone < pl->nunits; /* a copy cut after the end is no failure */
    if (!ok && counts) {
        pl->alive &= ~(1ull << s->idx);
        check_orphans(pl);
    }
    pthread_cond_broadcast(&pl->cv);
    pthread_mutex_unlock(&pl->lock);
}

/* A thief's copy of unit x arrived in buf: unless the owner was first, its connection is cut, and
 * once it has let go of the unit the copy goes into the tensors. */
static void land_stolen(plan_t *pl, source_t *s, unit_t *x, const uint8_t *buf) {
    pthread_mutex_lock(&pl->lock);
    int held_by = x->owner;
    bool keep = x->owner >= 0 && needed_elsewhere(pl, x->owner, x); /* then the copy is dropped */
    if (!keep && x->state != U_DONE && x->owner >= 0 && pl->src[x->owner].fd >= 0) ccoip_sock_shutdown(pl->src[x->owner].fd);
    while (!keep && x->state != U_DONE && x->owner >= 0) pthread_cond_wait(&pl->cv, &pl->lock);
    if (!keep && x->state != U_DONE) {
        for (uint32_t i = 0; i < x->n; i++) {
            const ccoip_ss_piece_t *pc = &pl->pieces[x->first + i];
            memcpy((uint8_t *) pc->slot->data + pc->off, buf, (size_t) pc->len);
            buf += pc->len;
        }
        LOG_INFO(MOD, "shared state: a range held up by %s came from %s first", held_by >= 0 ? pl->src[held_by].name : "?",
                 s->name);
        x->xxh = s->last_hash;
        unit_done(pl, x);
    }
    x->thief = -1;
    s->busy = false;
    pthread_cond_broadcast(&pl->cv);
    pthread_mutex_unlock(&pl->lock);
}

/* ---- one distributor ---- */

/* Whether source s may still get a unit (the fetch is not over). */
static bool still_needed(source_t *s) {
    plan_t *pl = s->plan;
    pthread_mutex_lock(&pl->lock);
    bool yes = pl->res == pcclSuccess && pl->ndone < pl->nunits && (pl->alive >> s->idx & 1) != 0;
    pthread_mutex_unlock(&pl->lock);
    return yes;
}

/* A distributor we cannot dial dials us (ccoip_ss_dial.h): its connection, once our listener has
 * it, while the fetch still needs it. */
static int await_distributor(source_t *s, int64_t deadline, ccoip_session_t *sess) {
    pcclComm_t *comm = s->plan->comm;
    LOG_INFO(MOD, "shared state: distributor %s cannot be dialled: it dials us (reversed fetch connection)", s->name);
    while (ccoip_now_ms() < deadline && !atomic_load(&comm->stopping) && still_needed(s)) {
        int64_t until = ccoip_now_ms() + 100;
        int fd = ccoip_ss_mailbox_await(ccoip_ss_mailbox_of(comm), comm, &s->at->uuid, until < deadline ? until : deadline,
                                        sess);
        if (fd >= 0) return fd;
    }
    if (still_needed(s)) LOG_ERROR(MOD, "shared state: distributor %s never dialled us", s->name);
    return -1;
}

/* The TCP connection to source s: to its listener, or to the relay with the pair's token. */
static int dial_source(source_t *s, int64_t left, ccoip_status_t *st) {
    const ccoip_ss_source_t *at = s->at;
    int ms = (int) (left < 1000 ? left : 1000);
    if (at->how != CCOIP_SS_RELAYED) {
        ccoip_socket_address_t a = {at->addr, at->ss_port};
        return ccoip_sock_connect(&a, ms, st);
    }
    ccoip_socket_address_t relay = {s->plan->r->relay_addr, s->plan->r->relay_port};
    if (relay.port == 0) {
        *st = CCOIP_ERR_INVALID;
        return -1;
    }
    return ccoip_conn_relay_dial(&relay, &at->token, ms, st);
}

static int connect_distributor(source_t *s, ccoip_session_t *sess) {
    pcclComm_t *comm = s->plan->comm;
    const char *name = s->name;
    int64_t deadline = ccoip_now_ms() + ccoip_env_num("PCCL_SS_CONNECT_TIMEOUT_MS", 10000);
    if (s->at->how == CCOIP_SS_REVERSED) return await_distributor(s, deadline, sess);
    if (s->at->how == CCOIP_SS_RELAYED)
        LOG_INFO(MOD, "shared state: distributor %s and we cannot dial each other: through the relay (relayed fetch "
                      "connection)", name);
    ccoip_status_t st = CCOIP_ERR_TIMEOUT;
    while (ccoip_now_ms() < deadline && !atomic_load(&comm->stopping)) {
        int64_t left = deadline - ccoip_now_ms();
        int fd = dial_source(s, left, &st);
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
         * (NOT_SERVING: its sync ended, it will never serve this one), and so is a relayed try
         * (the distributor meets us at the relay once). */
        if (s->at->how == CCOIP_SS_RELAYED || st != CCOIP_ERR_REFUSED ||
            (ack.status != CCOIP_HELLO_UNKNOWN_PEER && ack.status != CCOIP_HELLO_BUSY))
            break;
        ccoip_sleep_ms(10);
    }
    LOG_ERROR(MOD, "shared state: cannot reach distributor %s: %s", name, ccoip_status_str(st));
    return -1;
}

static void count_rx(source_t *s, uint64_t n) {
    plan_t *pl = s->plan;
    s->rx += n;
    uint64_t all = atomic_fetch_add(&pl->rx, n) + n;
    int64_t now = ccoip_now_ms();
    if (pl->total <= PROGRESS_BYTES || now - s->last_log < PROGRESS_MS) return;
    s->last_log = now;
    double secs = (double) (now - s->t0) / 1000.0;
    LOG_INFO(MOD, "shared state: received %.1f MiB from %s (%.0f MB/s); %.1f of %.1f MiB in all", (double) s->rx / 1048576.0,
             s->name, secs > 0 ? (double) s->rx / 1e6 / secs : 0.0, (double) all / 1048576.0,
             (double) pl->total / 1048576.0);
}

/* The bytes of one piece, straight into host memory (or `into`, a thief's buffer) or through the
 * staging buffer, hashed as they arrive. */
static ccoip_status_t recv_bytes(source_t *s, ccoip_sealed_t *in, const ccoip_ss_piece_t *pc, uint8_t **stage,
                                 uint8_t *into) {
    const cuda_table_t *cu = pc->slot->device ? cuda_table() : NULL;
    if (pc->slot->device && cu == NULL) return CCOIP_ERR_INVALID;
    if (pc->slot->device && *stage == NULL && (*stage = malloc(CHUNK)) == NULL) return CCOIP_ERR_NOMEM;
    hash_xxh3_stream_reset(s->hs);
    for (uint64_t off = 0; off < pc->len;) {
        size_t k = pc->len - off < READ_STEP ? (size_t) (pc->len - off) : READ_STEP;
        uint8_t *dst = into != NULL ? into + off : (uint8_t *) pc->slot->data + pc->off + off;
        ccoip_status_t st = ccoip_sealed_read(in, cu != NULL ? *stage : dst, k, ccoip_now_ms() + s->plan->stall_ms);
        if (st != CCOIP_OK) return st;
        hash_xxh3_stream_update(s->hs, cu != NULL ? *stage : dst, k);
        cuda_status_t cs = cu != NULL ? cu->memcpy_h2d(dst, *stage, k, NULL) : CUDA_OK;
        if (cs != CUDA_OK) {
            LOG_ERROR(MOD, "shared state: copying tensor \"%s\" to the GPU failed: %s", pc->slot->name, cu->status_string(cs));
            return CCOIP_ERR_IO;
        }
        off += k;
        count_rx(s, k);
    }
    return CCOIP_OK;
}

/* One piece and the hash its distributor took of it: bytes that do not match it (corrupted on
 * the way or in its memory after the election) drop the distributor, and the range goes to the
 * others. *h: the hash, when it matched. */
static ccoip_status_t recv_piece(source_t *s, ccoip_sealed_t *in, const ccoip_ss_piece_t *pc, uint8_t **stage,
                                 uint8_t *into, uint64_t *h) {
    ccoip_status_t st = recv_bytes(s, in, pc, stage, into);
    uint8_t tr[CCOIP_SS_TRAILER];
    if (st == CCOIP_OK) st = ccoip_sealed_read(in, tr, sizeof tr, ccoip_now_ms() + s->plan->stall_ms);
    if (st != CCOIP_OK) return st;
    uint64_t got = hash_xxh3_stream_digest(s->hs), sent = ccoip_ss_get_hash(tr);
    if (got == sent) {
        *h = got;
        return CCOIP_OK;
    }
    LOG_ERROR(MOD, "shared state: bytes %llu+%llu of tensor \"%s\" from distributor %s do not match the hash it sent "
                   "(%016llx, received %016llx): a bad source, dropped; the range comes from another",
              (unsigned long long) pc->off, (unsigned long long) pc->len, pc->slot->name, s->name,
              (unsigned long long) sent, (unsigned long long) got);
    return CCOIP_ERR_INVALID;
}

/* The distributor's answer to our request: a header listing our ranges' tensors, in order, with
 * our sizes. */
static ccoip_status_t check_header(const ccoip_packet_t *p, const ccoip_ss_piece_t *pc, uint32_t n, const char *name) {
    const ccoip_ss_header_t *h = &p->u.ss_header;
    const char *bad = NULL;
    if (p->type != CCOIP_PKT_SS_HEADER) bad = "it did not answer with a header";
    else if (h->status == CCOIP_SSH_NOT_SERVING) bad = "it is not serving this sync any more";
    else if (h->status != CCOIP_SSH_OK) bad = "it does not hold a range we asked for";
    else if (h->count != n) bad = "its header lists other tensors";
    for (uint32_t i = 0; bad == NULL && i < n; i++) {
        if (strcmp(h->items[i].name, pc[i].slot->name) != 0) bad = "its header lists other tensors";
        else if (h->items[i].size != pc[i].slot->bytes) bad = "a tensor's size differs from ours";
    }
    if (bad == NULL) return CCOIP_OK;
    LOG_ERROR(MOD, "shared state: distributor %s refused or answered wrongly: %s", name, bad);
    return CCOIP_ERR_INVALID;
}

/* One request: unit u's ranges, their header, their bytes (into the tensors, or one after another
 * into `into`). */
static ccoip_status_t fetch_unit(source_t *s, int fd, ccoip_sealed_t *in, const unit_t *u, uint8_t **stage,
                                 uint8_t *into) {
    plan_t *pl = s->plan;
    const ccoip_ss_piece_t *pc = &pl->pieces[u->first];
    ccoip_ss_range_t rg[UNIT_PIECES];
    for (uint32_t i = 0; i < u->n; i++) rg[i] = (ccoip_ss_range_t){(char *) pc[i].slot->name, pc[i].off, pc[i].len};
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_SS_REQUEST;
    p.u.ss_request = (ccoip_ss_request_t){u->n, rg};
    ccoip_status_t st = ccoip_conn_send(fd, &p);
    memset(&p, 0, sizeof p);
    if (st == CCOIP_OK) st = ccoip_conn_recv(fd, &p, CCOIP_MAX_PAYLOAD, ccoip_now_ms() + pl->stall_ms);
    if (st != CCOIP_OK) {
        LOG_ERROR(MOD, "shared state: no answer from distributor %s: %s", s->name, ccoip_status_str(st));
        return st;
    }
    st = check_header(&p, pc, u->n, s->name);
    ccoip_packet_free(&p);
    for (uint32_t i = 0; i < u->n && st == CCOIP_OK; i++) {
        uint64_t h = 0;
        st = recv_piece(s, in, &pc[i], stage, into, &h);
        if (i == 0) s->last_hash = h;
        if (into != NULL) into += pc[i].len;
    }
    return st;
}

/* One unit taken by source s: fetched, then done, landed (a thief's copy) or given back. */
static bool run_unit(source_t *s, int fd, ccoip_sealed_t *in, int64_t u, bool stolen, uint8_t **stage, uint8_t **buf) {
    plan_t *pl = s->plan;
    unit_t *x = &pl->units[u];
    if (stolen && *buf == NULL && (*buf = malloc(pl->range)) == NULL) {
        finish_unit(pl, s, u, false, true);
        return false;
    }
    ccoip_status_t st = fetch_unit(s, fd, in, x, stage, stolen ? *buf : NULL);
    if (st != CCOIP_OK)
        LOG_WARN(MOD, "shared state: receiving from distributor %s failed (%s): its ranges go to the others", s->name,
                 st == CCOIP_ERR_CLOSED ? "it closed the connection, died?" : ccoip_status_str(st));
    if (st == CCOIP_OK && stolen) land_stolen(pl, s, x, *buf);
    else finish_unit(pl, s, u, st == CCOIP_OK, stolen);
    return st == CCOIP_OK;
}

static void *source_main(void *arg) {
    source_t *s = arg;
    plan_t *pl = s->plan;
    ccoip_os_name_thread("pccl-ss-fetch");
    s->t0 = s->last_log = ccoip_now_ms();
    ccoip_session_t sess;
    memset(&sess, 0, sizeof sess);
    int fd = connect_distributor(s, &sess);
    ccoip_sealed_t in;
    bool ok = fd >= 0 && (s->hs = hash_xxh3_stream_new()) != NULL &&
              ccoip_sealed_init(&in, fd, sess.encrypt ? sess.recv : NULL, sess.cipher);
    if (!ok) {
        finish_unit(pl, s, -1, false, false);
        if (fd >= 0) ccoip_sock_close(fd);
        hash_xxh3_stream_free(s->hs);
        return NULL;
    }
    pthread_mutex_lock(&pl->lock);
    s->fd = fd;
    pthread_mutex_unlock(&pl->lock);
    uint8_t *stage = NULL, *buf = NULL;
    bool stolen;
    for (int64_t u; ok && (u = take_unit(pl, s, &stolen)) >= 0;) ok = run_unit(s, fd, &in, u, stolen, &stage, &buf);
    if (ok) { /* an empty request: we are through with it (it may stop waiting for us) */
        ccoip_packet_t p;
        memset(&p, 0, sizeof p);
        p.type = CCOIP_PKT_SS_REQUEST;
        ccoip_conn_send(fd, &p);
    }
    pthread_mutex_lock(&pl->lock);
    s->fd = -1; /* nobody shuts it down once closed (the number may be reused) */
    pthread_mutex_unlock(&pl->lock);
    free(stage);
    free(buf);
    hash_xxh3_stream_free(s->hs);
    ccoip_sealed_free(&in);
    ccoip_sock_close(fd);
    return NULL;
}

/* ---- what a failed fetch before had received (ccoip_ss_resume.h) ---- */

static ccoip_ss_span_t span_of(const plan_t *pl, const ccoip_ss_piece_t *pc) {
    return (ccoip_ss_span_t){pc->slot->data, pc->slot->bytes, pl->range, pc->off, pc->len};
}

/* Marks done the ranges a failed fetch of the same content received and the user's memory still
 * holds; the record is used up either way. */
static void apply_resume(plan_t *pl) {
    ccoip_ss_resume_t **rec = ccoip_ss_resume_of(pl->comm);
    uint32_t kept = 0;
    for (uint32_t u = 0; *rec != NULL && u < pl->nunits; u++) {
        unit_t *x = &pl->units[u];
        if (!x->split || pl->pieces[x->first].slot->device) continue;
        ccoip_ss_span_t sp = span_of(pl, &pl->pieces[x->first]);
        if (!ccoip_ss_resume_has(*rec, &pl->r->fetch[x->fetch], &sp)) continue;
        x->state = U_DONE;
        pl->ndone++;
        pl->kept += pl->pieces[x->first].len;
        kept++;
    }
    while (pl->first_open < pl->nunits && pl->units[pl->first_open].state == U_DONE) pl->first_open++;
    ccoip_ss_resume_free(*rec);
    *rec = NULL;
    if (kept > 0)
        LOG_INFO(MOD, "shared state: %u ranges (%.1f MiB) that the failed fetch before received still match: not "
                      "fetched again", (unsigned) kept, (double) pl->kept / 1048576.0);
}

/* After a failure: remembers the ranges received whole of host tensors cut into ranges (also of
 * those that arrived whole: one changed since is then fetched again range by range). */
static void record_resume(plan_t *pl) {
    ccoip_ss_resume_t **rec = ccoip_ss_resume_of(pl->comm);
    for (uint32_t u = 0; u < pl->nunits; u++) {
        const unit_t *x = &pl->units[u];
        const ccoip_ss_piece_t *pc = &pl->pieces[x->first];
        if (!x->split || x->state != U_DONE || pc->slot->device) continue;
        ccoip_ss_span_t sp = span_of(pl, pc);
        if (!ccoip_ss_resume_add(rec, &pl->r->fetch[x->fetch], &sp, x->xxh)) break;
    }
    ccoip_ss_resume_seal(*rec);
}

/* ---- the call ---- */

static void run_sources(plan_t *pl) {
    int64_t t0 = ccoip_now_ms();
    for (uint32_t k = 0; k < pl->nsrc; k++) /* those that dial us: our listener keeps their connections */
        if (pl->src[k].at->how == CCOIP_SS_REVERSED) ccoip_ss_mailbox_expect(ccoip_ss_mailbox_of(pl->comm), &pl->src[k].at->uuid);
    for (uint32_t k = 0; k < pl->nsrc; k++) {
        pl->src[k].started = pthread_create(&pl->src[k].thread, NULL, source_main, &pl->src[k]) == 0;
        if (!pl->src[k].started) {
            LOG_ERROR(MOD, "shared state: cannot start a thread to fetch from %s", pl->src[k].name);
            finish_unit(pl, &pl->src[k], -1, false, false);
        }
    }
    for (uint32_t k = 0; k < pl->nsrc; k++)
        if (pl->src[k].started) pthread_join(pl->src[k].thread, NULL);
    ccoip_ss_mailbox_forget(ccoip_ss_mailbox_of(pl->comm));
    if (pl->total <= PROGRESS_BYTES) return;
    int64_t ms = ccoip_now_ms() - t0;
    LOG_INFO(MOD, "shared state: fetched %.1f MiB from %u distributors in %lld ms (%.0f MB/s)%s",
             (double) atomic_load(&pl->rx) / 1048576.0, (unsigned) pl->nsrc, (long long) ms,
             ms > 0 ? (double) atomic_load(&pl->rx) / 1e3 / (double) ms : 0.0, pl->res == pcclSuccess ? "" : ", failed");
    for (uint32_t k = 0; k < pl->nsrc; k++)
        LOG_INFO(MOD, "shared state: %.1f MiB came from %s%s", (double) pl->src[k].rx / 1048576.0, pl->src[k].name,
                 (pl->alive >> k & 1) != 0 ? "" : " (dropped)");
}

pcclResult_t ccoip_ss_fetch_all(pcclComm_t *comm, const ccoip_ss_result_t *r, const ccoip_ss_slot_t *slots,
                                size_t nslots, uint64_t *rx) {
    if (r->nfetch == 0) return pcclSuccess;
    plan_t *pl = calloc(1, sizeof *pl);
    if (pl == NULL) return pcclInternalError;
    pl->comm = comm;
    pl->res = pcclSuccess;
    pl->stall_ms = ccoip_ss_stall_ms(comm);
    plan_limits(pl, r, slots, nslots);
    pthread_mutex_init(&pl->lock, NULL);
    monocond_init(&pl->cv);
    void **ev = comm->prof.mask != 0 ? calloc(r->nfetch, sizeof *ev) : NULL;
    for (uint32_t i = 0; ev != NULL && i < r->nfetch; i++) {
        const ccoip_ss_slot_t *s = ccoip_ss_find(slots, nslots, r->fetch[i].name);
        const ccoip_ss_fetch_t *f = &r->fetch[i];
        if (s != NULL && f->nsrc > 0 && f->src[0].index < r->nsources)
            ev[i] = ccoip_prof_tensor(&comm->prof, comm->prof_api, s->name, s->bytes, r->sources[f->src[0].index].uuid.b);
    }
    pl->r = r;
    if (plan_build(pl, r, slots, nslots) == pcclSuccess) apply_resume(pl);
    if (pl->res == pcclSuccess && pl->ndone < pl->nunits) run_sources(pl);
    pcclResult_t res = pl->ndone == pl->nunits ? pl->res : fail(pl, pcclRankConnectionLost);
    if (res != pcclSuccess && pl->nunits > 0) record_resume(pl);
    for (uint32_t i = 0; ev != NULL && i < r->nfetch; i++)
        if (ev[i] != NULL) ccoip_prof_tensor_end(&comm->prof, ev[i], res == pcclSuccess);
    *rx += atomic_load(&pl->rx);
    free(ev);
    free(pl->pieces);
    free(pl->units);
    pthread_mutex_destroy(&pl->lock);
    pthread_cond_destroy(&pl->cv);
    free(pl);
    return res;
}
