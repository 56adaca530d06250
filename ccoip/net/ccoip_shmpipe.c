/* ccoip_shmpipe.c: the SPSC byte pipe in shared memory (ccoip_shmpipe.h). */
#include "ccoip/net/ccoip_shmpipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "threadpark/threadpark_shared.h"

#define MAGIC UINT64_C(0x70636366686d7031) /* "pccfhmp1" */
#define VERSION 1u
#define CHUNK_MAX (256u << 10) /* the writer publishes at least this often: the reader overlaps */
#define SPIN_DEFAULT 0u        /* polls before parking (PCCL_SHM_SPIN); see docs/performance.md */

/* The header page. Each side writes its own line only (the closed flag aside). */
struct ccoip_shmpipe_hdr {
    uint64_t magic;
    uint32_t version, ring_kib;
    uint8_t token[CCOIP_SHMPIPE_TOKEN];
    uint8_t pad0[32];
    /* The writer's line. */
    uint64_t head;           /* bytes written, ever */
    uint32_t data_seq;       /* the reader parks here; the writer bumps it when reader_waiting */
    uint32_t writer_waiting; /* the writer is (about to be) parked on space_seq */
    uint8_t pad1[48];
    /* The reader's line. */
    uint64_t tail;           /* bytes consumed, ever */
    uint32_t space_seq;      /* the writer parks here */
    uint32_t reader_waiting;
    uint8_t pad2[48];
    uint32_t closed; /* either side: the pipe is done */
};
_Static_assert(sizeof(struct ccoip_shmpipe_hdr) <= CCOIP_SHMPIPE_HEADER, "header page");
_Static_assert(offsetof(struct ccoip_shmpipe_hdr, head) == 64 && offsetof(struct ccoip_shmpipe_hdr, tail) == 128,
               "one cache line per side");

size_t ccoip_shmpipe_ring_size(size_t want) {
    size_t r = CCOIP_SHMPIPE_RING_MIN;
    while (r < CCOIP_SHMPIPE_RING_MAX && r * 2 <= want) r *= 2;
    return r;
}

static bool ring_size_ok(size_t r) { return r >= CCOIP_SHMPIPE_RING_MIN && r <= CCOIP_SHMPIPE_RING_MAX && (r & (r - 1)) == 0; }

static void setup(ccoip_shmpipe_t *p, const char *name) {
    p->h = p->shm.base;
    p->ring = (uint8_t *) p->shm.base + CCOIP_SHMPIPE_HEADER;
    p->pos = 0;
    p->shut = 0;
    p->sock = -1;
    const char *s = getenv("PCCL_SHM_SPIN");
    p->spin = s && *s ? (uint32_t) strtoul(s, NULL, 10) : SPIN_DEFAULT;
    snprintf(p->name, sizeof p->name, "%s", name ? name : "?");
}

bool ccoip_shmpipe_create(ccoip_shmpipe_t *p, size_t ring_size, const char *name) {
    memset(p, 0, sizeof *p);
    if (!ring_size_ok(ring_size)) return false;
    uint8_t token[CCOIP_SHMPIPE_TOKEN];
    if (!ccoip_shm_random(token, sizeof token)) return false;
    if (!ccoip_shm_create(&p->shm, CCOIP_SHMPIPE_HEADER + ring_size)) return false;
    p->ring_size = ring_size;
    setup(p, name);
    p->writer = true;
    memcpy(p->token, token, sizeof token);
    memcpy(p->h->token, token, sizeof token);
    p->h->version = VERSION;
    p->h->ring_kib = (uint32_t) (ring_size >> 10);
    __atomic_store_n(&p->h->magic, MAGIC, __ATOMIC_RELEASE);
    return true;
}

bool ccoip_shmpipe_open(ccoip_shmpipe_t *p, const char *seg_name, size_t ring_size,
                        const uint8_t token[CCOIP_SHMPIPE_TOKEN], const char *name) {
    memset(p, 0, sizeof *p);
    if (!ring_size_ok(ring_size)) {
        LOG_INFO("ccoip", "shared memory for %s: a ring of %zu bytes is not one we take", name, ring_size);
        return false;
    }
    if (!ccoip_shm_open(&p->shm, seg_name, CCOIP_SHMPIPE_HEADER + ring_size)) return false;
    p->ring_size = ring_size;
    setup(p, name);
    const struct ccoip_shmpipe_hdr *h = p->h;
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != MAGIC || h->version != VERSION ||
        h->ring_kib != (uint32_t) (ring_size >> 10) || memcmp(h->token, token, CCOIP_SHMPIPE_TOKEN) != 0 ||
        __atomic_load_n(&h->head, __ATOMIC_ACQUIRE) != 0) {
        LOG_INFO("ccoip", "shared memory for %s: the segment is not the one offered (token or header differ)", p->name);
        ccoip_shm_close(&p->shm);
        p->h = NULL;
        return false;
    }
    memcpy(p->token, token, CCOIP_SHMPIPE_TOKEN);
    return true;
}

const char *ccoip_shmpipe_segment(const ccoip_shmpipe_t *p) { return p->shm.name; }

void ccoip_shmpipe_unlink(ccoip_shmpipe_t *p) { ccoip_shm_unlink(&p->shm); }

void ccoip_shmpipe_watch(ccoip_shmpipe_t *p, int sock) { p->sock = sock; }

static bool is_closed(const ccoip_shmpipe_t *p) {
    return __atomic_load_n(&p->shut, __ATOMIC_ACQUIRE) || __atomic_load_n(&p->h->closed, __ATOMIC_ACQUIRE);
}

/* *waiting: how a parked side sleeps, for the other side's wake. */
enum { AWAKE = 0, ON_FUTEX = 1, ON_SOCKET = 2 };

static bool gone(const ccoip_shmpipe_t *p) { return p->sock >= 0 && ccoip_shm_peer_hung_up(p->sock); }

/* The reader, after a quiet tick: sleeps on the socket until the writer rings, the other process
 * dies or we shut the pipe (no timer: an idle link stays asleep). */
static int sleep_on_socket(ccoip_shmpipe_t *p, uint32_t *waiting, const uint64_t *counter, uint64_t value) {
    __atomic_store_n(waiting, ON_SOCKET, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(counter, __ATOMIC_SEQ_CST) != value || is_closed(p)) return CCOIP_SHMPIPE_OK;
    int w = ccoip_shm_doorbell_wait(p->sock);
    if (w == CCOIP_SHM_NOISE) {
        LOG_ERROR("ccoip", "shared memory for %s: a byte on the socket that is no doorbell: the other side is "
                  "broken or hostile", p->name);
        return CCOIP_SHMPIPE_CORRUPT;
    }
    /* Hung up with nothing new: gone (bytes it published before it went are read first). */
    if (w == CCOIP_SHM_HUNG_UP && __atomic_load_n(counter, __ATOMIC_SEQ_CST) == value && !is_closed(p))
        return CCOIP_SHMPIPE_GONE;
    return CCOIP_SHMPIPE_OK;
}

/* Waits until *counter moves off `value`: a bounded spin, then parks on seq (announced in
 * *waiting, so that the other side wakes us) for one tick, after which the socket is asked
 * whether the other side lives; a reader (on_socket) then sleeps on the socket. Returns OK (look
 * again: moved, woken or a tick passed), GONE or CORRUPT. */
static int park(ccoip_shmpipe_t *p, uint32_t *seq, uint32_t *waiting, const uint64_t *counter, uint64_t value,
                bool on_socket) {
    for (uint32_t i = 0; i < p->spin; i++) {
        if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) != value || is_closed(p)) return CCOIP_SHMPIPE_OK;
        tpark_cpu_relax();
    }
    uint32_t s = __atomic_load_n(seq, __ATOMIC_SEQ_CST);
    __atomic_store_n(waiting, ON_FUTEX, __ATOMIC_SEQ_CST);
    int rc = CCOIP_SHMPIPE_OK;
    /* After announcing: either we see the other side's store, or it sees our flag and wakes us. */
    if (__atomic_load_n(counter, __ATOMIC_SEQ_CST) == value && !is_closed(p) &&
        tpark_wait_shared(seq, s, (int64_t) CCOIP_SHMPIPE_TICK_MS * 1000000) == TPARK_TIMEOUT &&
        __atomic_load_n(counter, __ATOMIC_SEQ_CST) == value && !is_closed(p)) {
        if (gone(p))
            rc = CCOIP_SHMPIPE_GONE;
        else if (on_socket && p->sock >= 0)
            rc = sleep_on_socket(p, waiting, counter, value);
    }
    __atomic_store_n(waiting, AWAKE, __ATOMIC_RELAXED);
    return rc;
}

/* After publishing: wake the other side if it said that it sleeps, where it sleeps. A reader on
 * the socket is rung over our direction of it (sock: the writer's, -1 for the reader). */
static void signal_other(uint32_t *seq, const uint32_t *waiting, int sock) {
    uint32_t w = __atomic_load_n(waiting, __ATOMIC_SEQ_CST);
    if (w == AWAKE) return;
    __atomic_fetch_add(seq, 1, __ATOMIC_SEQ_CST);
    if (w == ON_SOCKET && sock >= 0)
        ccoip_shm_doorbell_ring(sock);
    else
        tpark_wake_shared(seq);
}

static int corrupt(const ccoip_shmpipe_t *p, const char *what, uint64_t v) {
    LOG_ERROR("ccoip", "shared memory for %s: %s %llu is impossible at our %llu (ring %llu): the other side is "
              "broken or hostile", p->name, what, (unsigned long long) v, (unsigned long long) p->pos,
              (unsigned long long) p->ring_size);
    return CCOIP_SHMPIPE_CORRUPT;
}

int ccoip_shmpipe_write(ccoip_shmpipe_t *p, const void *buf, size_t len) {
    struct ccoip_shmpipe_hdr *h = p->h;
    const uint8_t *src = buf;
    const uint64_t mask = p->ring_size - 1;
    size_t chunk = p->ring_size / 4 < CHUNK_MAX ? p->ring_size / 4 : CHUNK_MAX;
    while (len > 0) {
        if (is_closed(p)) return CCOIP_SHMPIPE_CLOSED;
        uint64_t tail = __atomic_load_n(&h->tail, __ATOMIC_ACQUIRE);
        uint64_t used = p->pos - tail;
        if (used > p->ring_size) return corrupt(p, "tail", tail);
        if (used == p->ring_size) {
            int rc = park(p, &h->space_seq, &h->writer_waiting, &h->tail, tail, false);
            if (rc != CCOIP_SHMPIPE_OK) return rc;
            continue;
        }
        size_t n = (size_t) (p->ring_size - used);
        if (n > len) n = len;
        if (n > chunk) n = chunk;
        size_t at = (size_t) (p->pos & mask), first = p->ring_size - at < n ? (size_t) (p->ring_size - at) : n;
        memcpy(p->ring + at, src, first);
        memcpy(p->ring, src + first, n - first);
        p->pos += n;
        src += n;
        len -= n;
        __atomic_store_n(&h->head, p->pos, __ATOMIC_SEQ_CST);
        signal_other(&h->data_seq, &h->reader_waiting, p->sock);
    }
    return CCOIP_SHMPIPE_OK;
}

int ccoip_shmpipe_read(ccoip_shmpipe_t *p, void *buf, size_t len) {
    struct ccoip_shmpipe_hdr *h = p->h;
    uint8_t *dst = buf;
    const uint64_t mask = p->ring_size - 1;
    while (len > 0) {
        if (is_closed(p)) return CCOIP_SHMPIPE_CLOSED;
        uint64_t head = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE);
        uint64_t avail = head - p->pos;
        if (avail > p->ring_size) return corrupt(p, "head", head);
        if (avail == 0) {
            int rc = park(p, &h->data_seq, &h->reader_waiting, &h->head, head, true);
            if (rc != CCOIP_SHMPIPE_OK) return rc;
            continue;
        }
        size_t n = avail < len ? (size_t) avail : len;
        if (dst != NULL) {
            size_t at = (size_t) (p->pos & mask), first = p->ring_size - at < n ? (size_t) (p->ring_size - at) : n;
            memcpy(dst, p->ring + at, first);
            memcpy(dst + first, p->ring, n - first);
            dst += n;
        }
        p->pos += n;
        len -= n;
        __atomic_store_n(&h->tail, p->pos, __ATOMIC_SEQ_CST);
        signal_other(&h->space_seq, &h->writer_waiting, -1);
    }
    return CCOIP_SHMPIPE_OK;
}

/* Waits for the writer when fewer than `need` bytes are in the ring; returns the bytes there
 * (>= need) in *avail, or why not. */
static int wait_for(ccoip_shmpipe_t *p, uint64_t need, uint64_t *avail) {
    struct ccoip_shmpipe_hdr *h = p->h;
    for (;;) {
        if (is_closed(p)) return CCOIP_SHMPIPE_CLOSED;
        uint64_t head = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE);
        *avail = head - p->pos;
        if (*avail > p->ring_size) return corrupt(p, "head", head);
        if (*avail >= need) return CCOIP_SHMPIPE_OK;
        int rc = park(p, &h->data_seq, &h->reader_waiting, &h->head, head, true);
        if (rc != CCOIP_SHMPIPE_OK) return rc;
    }
}

int ccoip_shmpipe_read_each(ccoip_shmpipe_t *p, size_t len, size_t unit, ccoip_shmpipe_sink_fn fn, void *ctx) {
    if (unit == 0 || unit > CCOIP_SHMPIPE_UNIT_MAX || (unit & (unit - 1)) != 0 || len % unit != 0) {
        LOG_ERROR("ccoip", "shared memory for %s: a read of %zu bytes in elements of %zu", p->name, len, unit);
        return CCOIP_SHMPIPE_BADARG;
    }
    struct ccoip_shmpipe_hdr *h = p->h;
    const uint64_t mask = p->ring_size - 1;
    _Alignas(CCOIP_SHMPIPE_UNIT_MAX) uint8_t bounce[CCOIP_SHMPIPE_UNIT_MAX];
    size_t done = 0;
    while (done < len) {
        uint64_t avail;
        int rc = wait_for(p, unit, &avail); /* a whole element at least */
        if (rc != CCOIP_SHMPIPE_OK) return rc;
        size_t at = (size_t) (p->pos & mask), to_end = (size_t) p->ring_size - at, n;
        if (to_end < unit) { /* the element wraps: its two parts meet in the bounce */
            memcpy(bounce, p->ring + at, to_end);
            memcpy(bounce + to_end, p->ring, unit - to_end);
            fn(ctx, done, bounce, unit);
            n = unit;
        } else {
            n = len - done;
            if (n > avail) n = (size_t) avail;
            if (n > to_end) n = to_end;
            if (n > CCOIP_SHMPIPE_PIECE_MAX) n = CCOIP_SHMPIPE_PIECE_MAX;
            n -= n % unit; /* >= unit: avail and to_end are */
            fn(ctx, done, p->ring + at, n);
        }
        p->pos += n;
        done += n;
        __atomic_store_n(&h->tail, p->pos, __ATOMIC_SEQ_CST);
        signal_other(&h->space_seq, &h->writer_waiting, -1);
    }
    return CCOIP_SHMPIPE_OK;
}

void ccoip_shmpipe_shut(ccoip_shmpipe_t *p) {
    struct ccoip_shmpipe_hdr *h = p->h;
    if (h == NULL) return;
    __atomic_store_n(&p->shut, 1, __ATOMIC_SEQ_CST);
    __atomic_store_n(&h->closed, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&h->data_seq, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_add(&h->space_seq, 1, __ATOMIC_SEQ_CST);
    tpark_wake_shared(&h->data_seq);
    tpark_wake_shared(&h->space_seq);
    if (p->sock < 0) return;
    if (!p->writer)
        ccoip_shm_doorbell_stop(p->sock); /* our reader, if asleep on the socket */
    else if (__atomic_load_n(&h->reader_waiting, __ATOMIC_SEQ_CST) == ON_SOCKET)
        ccoip_shm_doorbell_ring(p->sock); /* theirs */
}

void ccoip_shmpipe_close(ccoip_shmpipe_t *p) {
    if (p->shm.base != NULL) ccoip_shm_close(&p->shm);
    p->h = NULL;
    p->ring = NULL;
}

uint64_t ccoip_shmpipe_unread(const ccoip_shmpipe_t *p) {
    if (p->h == NULL) return 0;
    return __atomic_load_n(&p->h->head, __ATOMIC_ACQUIRE) - __atomic_load_n(&p->h->tail, __ATOMIC_ACQUIRE);
}

uint64_t *ccoip_shmpipe_head_word(ccoip_shmpipe_t *p) { return &p->h->head; }
uint64_t *ccoip_shmpipe_tail_word(ccoip_shmpipe_t *p) { return &p->h->tail; }
