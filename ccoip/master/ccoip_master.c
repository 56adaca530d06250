/* ccoip_master.c: the master's I/O on one libuv loop thread, behind the public master API (api/pccl_master.c).
 *
 * Each connection has a byte buffer that grows only as bytes arrive (never by what a header
 * claims) and is capped at one frame: the handshake cap before HELLO, CCOIP_MAX_PAYLOAD after.
 * Decoded packets go to ccoip_master_state.c; malformed ones close that connection only. */
#include "ccoip/master/ccoip_master.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "ccoip/master/ccoip_master_http.h"
#include "ccoip/master/ccoip_master_probe.h"
#include "ccoip/net/ccoip_chan.h"
#include "ccoip/net/ccoip_os.h"
#include "ccoip/wire/ccoip_packets.h"
#include "log/log.h"

#define MOD "ccoip-master"
#define READ_CHUNK 65536
#define TICK_MS 200

typedef struct mconn_t {
    uv_tcp_t tcp; /* first: handle pointers cast back to mconn_t */
    struct pcclMasterInstanceState_t *m;
    ccoip_mclient_t c;
    uint8_t *buf;
    size_t len, cap;
    bool closing;
    bool want_drop; /* a write failed: drop after the current callback */
    ccoip_mprobe_t *probe; /* the connection back to its p2p listener, while under way */
    /* An encrypted run: after the handshake every frame is a sealed record (ccoip_chan.h); rec
     * holds the bytes of records not complete yet. */
    bool sealed;
    ccoip_chan_t keys;
    uint8_t *rec;
    size_t rlen, rcap;
} mconn_t;

typedef struct mwrite_t {
    uv_write_t req;
    uv_buf_t buf;
} mwrite_t;

struct pcclMasterInstanceState_t {
    uv_loop_t loop;
    uv_tcp_t server;
    uv_async_t wakeup;
    uv_timer_t timer;
    uv_thread_t thread;
    bool loop_ready, running, joined;
    atomic_bool interrupt;
    uint16_t port;
    ccoip_mhttp_t *status; /* the status endpoint, when asked for */
    uint16_t status_port;
    ccoip_master_state_t st;
    uint8_t chunk[READ_CHUNK]; /* every read lands here first: idle connections cost no buffer */
};

static void on_closed(uv_handle_t *h) {
    mconn_t *mc = (mconn_t *) h;
    ccoip_mprobe_forget(mc->probe);
    ccoip_mfp_on_leave(&mc->c); /* a connection closed before the state dropped it */
    ccoip_chan_free(&mc->keys);
    free(mc->rec);
    free(mc->buf);
    free(mc);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
    (void) status;
    uv_close((uv_handle_t *) req->handle, on_closed);
    free(req);
}

/* State callback: stop reading, let queued writes (a refusal) drain, then close. */
static void io_close(void *ctx, ccoip_mclient_t *c) {
    (void) ctx;
    mconn_t *mc = c->io;
    if (mc->closing) return;
    mc->closing = true;
    ccoip_mprobe_forget(mc->probe);
    mc->probe = NULL;
    uv_read_stop((uv_stream_t *) &mc->tcp);
    uv_shutdown_t *req = malloc(sizeof *req);
    if (req == NULL || uv_shutdown(req, (uv_stream_t *) &mc->tcp, on_shutdown) != 0) {
        free(req);
        uv_close((uv_handle_t *) &mc->tcp, on_closed);
    }
}

static void on_written(uv_write_t *req, int status) {
    mwrite_t *w = (mwrite_t *) req;
    if (status != 0 && status != UV_ECANCELED) LOG_DEBUG(MOD, "write failed: %s", uv_strerror(status));
    free(w->buf.base);
    free(w);
}

/* Test hook (docs/testing.md): PCCL_MASTER_TEST_DIE=<packet name>:<n> ends the process, as a
 * SIGKILL would, right after the n-th packet of that type went out: a master dead between two
 * members' COMMENCE, DONE or RESULT, the worst moments for a restart (tests/restart). */
static void test_die_after(uint16_t type) {
    static int armed = -1; /* -1: not read yet */
    static char name[48];
    static long left;
    if (armed < 0) {
        const char *v = getenv("PCCL_MASTER_TEST_DIE");
        const char *colon = v != NULL ? strrchr(v, ':') : NULL;
        armed = colon != NULL && (size_t) (colon - v) < sizeof name && (left = strtol(colon + 1, NULL, 10)) > 0;
        if (armed) snprintf(name, sizeof name, "%.*s", (int) (colon - v), v);
        if (armed) LOG_WARN(MOD, "test hook: dying after the %ld-th %s", left, name);
    }
    if (armed && strcmp(ccoip_packet_name(type), name) == 0 && --left == 0) {
        LOG_WARN(MOD, "test hook: dying now, after a %s", name);
        fflush(stderr);
        _Exit(137);
    }
}

static void io_send(void *ctx, ccoip_mclient_t *c, const ccoip_packet_t *p) {
    (void) ctx;
    mconn_t *mc = c->io;
    if (mc->closing) return;
    ccoip_writer_t wr;
    ccoip_writer_init(&wr, CCOIP_MAX_PAYLOAD + CCOIP_HEADER_SIZE);
    mwrite_t *w = malloc(sizeof *w);
    uint8_t *out = NULL;
    bool ok = w != NULL && ccoip_packet_encode(p, &wr) == CCOIP_OK;
    if (ok && mc->sealed) { /* one record per frame */
        out = malloc(wr.len + CCOIP_RECORD_OVERHEAD);
        if (out != NULL) ccoip_record_seal(&mc->keys.seal, out, wr.buf, wr.len);
        ok = out != NULL;
    }
    if (!ok) {
        LOG_ERROR(MOD, "cannot encode %s for %s", ccoip_packet_name(p->type), c->name);
        free(w);
        ccoip_writer_free(&wr);
        mc->want_drop = true;
        return;
    }
    if (out != NULL) {
        w->buf = uv_buf_init((char *) out, (unsigned) (wr.len + CCOIP_RECORD_OVERHEAD));
        ccoip_writer_free(&wr);
    } else {
        w->buf = uv_buf_init((char *) wr.buf, (unsigned) wr.len);
    }
    int rc = uv_write(&w->req, (uv_stream_t *) &mc->tcp, &w->buf, 1, on_written);
    if (rc != 0) {
        LOG_WARN(MOD, "write to %s failed: %s", c->name, uv_strerror(rc));
        free(w->buf.base);
        free(w);
        mc->want_drop = true;
    }
    test_die_after(p->type); /* libuv wrote at once: the kernel holds the packet */
}

static void io_make_uuid(void *ctx, ccoip_uuid_t *out) {
    (void) ctx;
    if (uv_random(NULL, NULL, out->b, sizeof out->b, 0, NULL) != 0) {
        /* Uniqueness is what matters (not secrecy): fall back to a counter mixed with the clock. */
        static uint64_t n;
        uint64_t v = uv_hrtime() ^ (++n * 0x9e3779b97f4a7c15ull);
        memcpy(out->b, &v, 8);
        memcpy(out->b + 8, &n, 8);
    }
}

/* Drops every client whose write failed during the last callback. */
static void sweep(struct pcclMasterInstanceState_t *m) {
    for (size_t i = 0; i < m->st.nclients;) {
        mconn_t *mc = m->st.clients[i]->io;
        if (mc->want_drop) {
            ccoip_mstate_drop(&m->st, &mc->c, "write failed");
            i = 0;
        } else {
            i++;
        }
    }
}

static bool to_sockaddr(const ccoip_socket_address_t *a, struct sockaddr_storage *ss);

static void on_probed(void *owner, bool ok, const char *why) {
    mconn_t *mc = owner;
    mc->probe = NULL;
    ccoip_mstate_on_probe(&mc->m->st, &mc->c, ok, why, uv_now(&mc->m->loop));
    sweep(mc->m);
}

/* State callback: the connection back to c's p2p listener (ccoip_master_probe.h). */
static void io_probe(void *ctx, ccoip_mclient_t *c, const ccoip_inet_address_t *a, uint16_t port) {
    struct pcclMasterInstanceState_t *m = ctx;
    mconn_t *mc = c->io;
    struct sockaddr_storage ss;
    ccoip_socket_address_t to = {*a, port};
    ccoip_mprobe_forget(mc->probe);
    mc->probe = to_sockaddr(&to, &ss) ? ccoip_mprobe_start(&m->loop, (const struct sockaddr *) &ss,
                                                           m->st.opt.probe_timeout_ms, on_probed, mc)
                                      : NULL;
    /* The state machine takes a synchronous outcome too (it has not answered the JOIN yet). */
    if (mc->probe == NULL) ccoip_mstate_on_probe(&m->st, c, false, "cannot start a connection", uv_now(&m->loop));
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void) suggested;
    mconn_t *mc = (mconn_t *) h;
    *buf = uv_buf_init((char *) mc->m->chunk, READ_CHUNK);
}

static bool buffer_append(mconn_t *mc, const uint8_t *p, size_t n, size_t limit) {
    if (mc->len + n > limit) return false;
    if (mc->len + n > mc->cap) {
        size_t cap = mc->cap == 0 ? 256 : mc->cap;
        while (cap < mc->len + n) cap *= 2;
        uint8_t *nb = realloc(mc->buf, cap);
        if (nb == NULL) return false;
        mc->buf = nb;
        mc->cap = cap;
    }
    memcpy(mc->buf + mc->len, p, n);
    mc->len += n;
    return true;
}

static bool rec_append(mconn_t *mc, const uint8_t *p, size_t n) {
    if (n == 0) return true; /* rec may still be NULL */
    if (mc->rlen + n > mc->rcap) {
        size_t cap = mc->rcap == 0 ? 4096 : mc->rcap;
        while (cap < mc->rlen + n) cap *= 2;
        uint8_t *nb = realloc(mc->rec, cap);
        if (nb == NULL) return false;
        mc->rec = nb;
        mc->rcap = cap;
    }
    memcpy(mc->rec + mc->rlen, p, n);
    mc->rlen += n;
    return true;
}

/* The handshake is over on an encrypted run: keys from it, and the bytes already read after it
 * are records. */
static bool start_sealing(mconn_t *mc, const uint8_t *rest, size_t n) {
    if (!ccoip_chan_init(&mc->keys, &mc->c.sess) || !mc->keys.on) return false;
    memset(&mc->c.sess, 0, sizeof mc->c.sess); /* the keys live in the AEADs now */
    mc->sealed = true;
    return rec_append(mc, rest, n);
}

static bool process_frames(struct pcclMasterInstanceState_t *m, mconn_t *mc);

/* Opens every complete record in mc->rec and decodes its frame. False once the connection was
 * dropped. */
static bool process_records(struct pcclMasterInstanceState_t *m, mconn_t *mc) {
    size_t pos = 0;
    while (!mc->closing && mc->rlen - pos >= 4) {
        uint8_t *r = mc->rec + pos;
        uint32_t len = ccoip_record_len(r);
        if (len < CCOIP_HEADER_SIZE) {
            ccoip_mstate_reject(&m->st, &mc->c, "sealed record of a bad length");
            return false;
        }
        if (mc->rlen - pos < len + CCOIP_RECORD_OVERHEAD) break;
        if (!ccoip_record_open(&mc->keys.open, r, len)) {
            ccoip_mstate_reject(&m->st, &mc->c, "a sealed record failed authentication (tampered, or not the peer)");
            return false;
        }
        pos += len + CCOIP_RECORD_OVERHEAD;
        if (!buffer_append(mc, r + 4, len, CCOIP_RECORD_MAX) || !process_frames(m, mc)) {
            if (!mc->closing) ccoip_mstate_reject(&m->st, &mc->c, "receive buffer limit");
            return false;
        }
        if (mc->len != 0) { /* one frame per record */
            ccoip_mstate_reject(&m->st, &mc->c, "sealed record without one whole frame");
            return false;
        }
    }
    if (mc->closing) return false;
    if (pos > 0) memmove(mc->rec, mc->rec + pos, mc->rlen - pos);
    mc->rlen -= pos;
    return true;
}

/* Decodes every complete frame in mc's buffer. Returns false once the connection was dropped. */
static bool process_frames(struct pcclMasterInstanceState_t *m, mconn_t *mc) {
    size_t pos = 0;
    char why[160];
    while (!mc->closing) {
        uint32_t cap = mc->c.phase < CCOIP_MPHASE_GREETED ? CCOIP_MAX_HANDSHAKE_PAYLOAD : CCOIP_MAX_PAYLOAD;
        uint16_t type;
        uint32_t len;
        ccoip_status_t st = ccoip_frame_peek(mc->buf + pos, mc->len - pos, cap, &type, &len);
        if (st == CCOIP_ERR_TRUNCATED) break;
        if (st == CCOIP_ERR_TOO_LARGE) {
            const uint8_t *h = mc->buf + pos;
            snprintf(why, sizeof why, "frame length %lu over the limit of %u",
                     (unsigned long) ((uint32_t) h[0] << 24 | (uint32_t) h[1] << 16 | (uint32_t) h[2] << 8 | h[3]), cap);
            ccoip_mstate_reject(&m->st, &mc->c, why);
            return false;
        }
        if (mc->len - pos - CCOIP_HEADER_SIZE < len) break;
        ccoip_packet_t p;
        st = ccoip_packet_decode(type, mc->buf + pos + CCOIP_HEADER_SIZE, len, &p);
        if (st != CCOIP_OK) {
            const char *name = ccoip_packet_name(type);
            if (name != NULL) snprintf(why, sizeof why, "malformed %s packet (%s)", name, ccoip_status_str(st));
            else snprintf(why, sizeof why, "unknown packet type 0x%04x", type);
            ccoip_mstate_reject(&m->st, &mc->c, why);
            return false;
        }
        pos += CCOIP_HEADER_SIZE + len;
        ccoip_mstate_on_packet(&m->st, &mc->c, &p, uv_now(&m->loop));
        ccoip_packet_free(&p);
        if (mc->c.seal_now && !mc->sealed && !mc->closing) { /* what follows the handshake is sealed */
            if (!start_sealing(mc, mc->buf + pos, mc->len - pos)) {
                ccoip_mstate_reject(&m->st, &mc->c, "out of memory starting the sealed channel");
                return false;
            }
            pos = mc->len;
            break;
        }
    }
    if (mc->closing) return false;
    memmove(mc->buf, mc->buf + pos, mc->len - pos);
    mc->len -= pos;
    if (mc->len == 0 && mc->cap > 4096) { /* give back what a big packet needed */
        free(mc->buf);
        mc->buf = NULL;
        mc->cap = 0;
    }
    return true;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    mconn_t *mc = (mconn_t *) s;
    struct pcclMasterInstanceState_t *m = mc->m;
    if (mc->closing) return;
    if (nread < 0) {
        const char *why = nread == UV_EOF ? "connection closed" : uv_strerror((int) nread);
        if (mc->len > 0 && nread == UV_EOF) {
            ccoip_mstate_reject(&m->st, &mc->c, "connection closed in the middle of a packet");
        } else {
            ccoip_mstate_drop(&m->st, &mc->c, why);
        }
        sweep(m);
        return;
    }
    const uint8_t *p = (const uint8_t *) buf->base;
    size_t left = (size_t) nread;
    mc->c.heard |= nread > 0; /* not silent: never evicted for a newer connection (auth.c) */
    /* Feed in slices so that the buffer never holds more than one frame plus a slice. */
    while (left > 0 && !mc->closing) {
        size_t n = left < 4096 ? left : 4096;
        size_t limit = CCOIP_HEADER_SIZE + CCOIP_MAX_PAYLOAD + 4096;
        bool room = mc->sealed ? mc->rlen + n <= limit + CCOIP_RECORD_OVERHEAD && rec_append(mc, p, n)
                               : buffer_append(mc, p, n, limit);
        if (!room) {
            ccoip_mstate_reject(&m->st, &mc->c, "receive buffer limit");
            break;
        }
        p += n;
        left -= n;
        if (!mc->sealed && !process_frames(m, mc)) break;
        if (mc->sealed && !process_records(m, mc)) break; /* also what followed the switch */
    }
    sweep(m);
}

static void format_name(const struct sockaddr_storage *ss, char *out, size_t n, ccoip_inet_address_t *addr,
                        uint16_t *port_out, bool *loopback) {
    char ip[64] = "?";
    int port = 0;
    memset(addr, 0, sizeof *addr);
    *loopback = false;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *) ss;
        uv_ip4_name(a, ip, sizeof ip);
        port = ntohs(a->sin_port);
        addr->protocol = inetIPv4;
        memcpy(addr->ipv4.data, &a->sin_addr, 4);
        *loopback = addr->ipv4.data[0] == 127;
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *) ss;
        uv_ip6_name(a, ip, sizeof ip);
        port = ntohs(a->sin6_port);
        const uint8_t *b = a->sin6_addr.s6_addr;
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        static const uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        if (memcmp(b, mapped, 12) == 0) { /* IPv4 through a dual-stack socket */
            addr->protocol = inetIPv4;
            memcpy(addr->ipv4.data, b + 12, 4);
            *loopback = b[12] == 127;
        } else {
            addr->protocol = inetIPv6;
            memcpy(addr->ipv6.data, b, 16);
            *loopback = memcmp(b, one, 16) == 0;
        }
    }
    *port_out = (uint16_t) port;
    /* ip is at most 45 characters (INET6_ADDRSTRLEN): "ip:port" fits the 64-byte name. */
    ip[46] = '\0';
    snprintf(out, n, "%.46s:%u", ip, (unsigned) port & 0xffffu);
}

static void on_connection(uv_stream_t *server, int status) {
    struct pcclMasterInstanceState_t *m = server->data;
    if (status < 0) {
        LOG_WARN(MOD, "accept failed: %s", uv_strerror(status));
        return;
    }
    mconn_t *mc = calloc(1, sizeof *mc);
    if (mc == NULL) {
        LOG_ERROR(MOD, "out of memory accepting a connection");
        return;
    }
    mc->m = m;
    mc->c.io = mc;
    uv_tcp_init(&m->loop, &mc->tcp);
    if (uv_accept(server, (uv_stream_t *) &mc->tcp) != 0) {
        uv_close((uv_handle_t *) &mc->tcp, on_closed);
        return;
    }
    uv_tcp_nodelay(&mc->tcp, 1);
    struct sockaddr_storage ss;
    int len = sizeof ss;
    memset(&ss, 0, sizeof ss);
    uv_tcp_getpeername(&mc->tcp, (struct sockaddr *) &ss, &len);
    format_name(&ss, mc->c.name, sizeof mc->c.name, &mc->c.addr, &mc->c.port, &mc->c.loopback);
    m->st.now_ms = uv_now(&m->loop);
    if (!ccoip_mauth_may_connect(&m->st, &mc->c.addr, mc->c.name)) {
        uv_close((uv_handle_t *) &mc->tcp, on_closed);
        return;
    }
    if (!ccoip_mstate_add(&m->st, &mc->c, uv_now(&m->loop))) {
        LOG_ERROR(MOD, "out of memory registering %s", mc->c.name);
        uv_close((uv_handle_t *) &mc->tcp, on_closed);
        return;
    }
    LOG_DEBUG(MOD, "connection from %s", mc->c.name);
    uv_read_start((uv_stream_t *) &mc->tcp, on_alloc, on_read);
}

static void on_tick(uv_timer_t *t) {
    struct pcclMasterInstanceState_t *m = t->data;
    ccoip_mstate_tick(&m->st, uv_now(&m->loop));
    sweep(m);
}

static void close_all(struct pcclMasterInstanceState_t *m) {
    if (!m->st.shutting_down) ccoip_mstate_say_bye(&m->st); /* queued before the shutdowns: they drain it */
    m->st.shutting_down = true;
    while (m->st.nclients > 0) ccoip_mstate_drop(&m->st, m->st.clients[m->st.nclients - 1], "master shutting down");
    if (!uv_is_closing((uv_handle_t *) &m->server)) uv_close((uv_handle_t *) &m->server, NULL);
    ccoip_mhttp_close(m->status);
    m->status = NULL;
    if (!uv_is_closing((uv_handle_t *) &m->timer)) uv_close((uv_handle_t *) &m->timer, NULL);
    if (!uv_is_closing((uv_handle_t *) &m->wakeup)) uv_close((uv_handle_t *) &m->wakeup, NULL);
}

static void on_wakeup(uv_async_t *a) {
    struct pcclMasterInstanceState_t *m = a->data;
    if (!atomic_load(&m->interrupt)) return;
    LOG_INFO(MOD, "interrupted: closing %zu connections", m->st.nclients);
    close_all(m);
}

static bool to_sockaddr(const ccoip_socket_address_t *a, struct sockaddr_storage *ss) {
    memset(ss, 0, sizeof *ss);
    if (a->inet.protocol == inetIPv4) {
        struct sockaddr_in *s = (struct sockaddr_in *) ss;
        s->sin_family = AF_INET;
        s->sin_port = htons(a->port);
        memcpy(&s->sin_addr, a->inet.ipv4.data, 4);
        return true;
    }
    if (a->inet.protocol == inetIPv6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *) ss;
        s->sin6_family = AF_INET6;
        s->sin6_port = htons(a->port);
        memcpy(&s->sin6_addr, a->inet.ipv6.data, 16);
        return true;
    }
    return false;
}

pcclResult_t ccoip_master_create(ccoip_socket_address_t listen_address, pcclMasterInstance_t **out) {
    if (out == NULL) return pcclInvalidArgument;
    struct sockaddr_storage ss;
    if (!to_sockaddr(&listen_address, &ss)) {
        LOG_ERROR(MOD, "pcclCreateMaster: unknown address protocol %d", (int) listen_address.inet.protocol);
        return pcclInvalidArgument;
    }
    if (!ccoip_auth_init()) {
        LOG_ERROR(MOD, "libsodium cannot initialise (no randomness source?)");
        return pcclInternalError;
    }
    struct pcclMasterInstanceState_t *m = calloc(1, sizeof *m);
    if (m == NULL) return pcclInternalError;
    if (uv_loop_init(&m->loop) != 0) {
        free(m);
        return pcclInternalError;
    }
    m->loop_ready = true;
    ccoip_mstate_init(&m->st, NULL);
    m->st.send = io_send;
    m->st.close = io_close;
    m->st.make_uuid = io_make_uuid;
    m->st.probe = io_probe;
    m->st.ctx = m;
    uv_tcp_init(&m->loop, &m->server);
    uv_timer_init(&m->loop, &m->timer);
    uv_async_init(&m->loop, &m->wakeup, on_wakeup);
    m->server.data = m->timer.data = m->wakeup.data = m;
    int rc = uv_tcp_bind(&m->server, (const struct sockaddr *) &ss, 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *) &m->server, 1024, on_connection);
    if (rc != 0) {
        char ip[64] = "?";
        if (ss.ss_family == AF_INET) uv_ip4_name((struct sockaddr_in *) &ss, ip, sizeof ip);
        else uv_ip6_name((struct sockaddr_in6 *) &ss, ip, sizeof ip);
        LOG_ERROR(MOD, "cannot listen on %s:%u: %s", ip, listen_address.port, uv_strerror(rc));
        ccoip_master_destroy(m);
        return pcclInvalidArgument;
    }
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&m->server, (struct sockaddr *) &bound, &blen);
    m->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &bound)->sin6_port
                                                : ((struct sockaddr_in *) &bound)->sin_port);
    *out = m;
    return pcclSuccess;
}

void ccoip_master_set_options(pcclMasterInstance_t *m, const ccoip_master_options_t *opt) { m->st.opt = *opt; }

void ccoip_master_set_encrypt(pcclMasterInstance_t *m, bool on) { m->st.encrypt = on; }

pcclResult_t ccoip_master_require_encryption(pcclMasterInstance_t *m, bool on) {
    if (m->running || m->joined) return pcclInvalidUsage;
    if (on && !m->st.has_secret) {
        LOG_ERROR(MOD, "pcclSetMasterEncryption: set the run secret first (the keys come from it)");
        return pcclInvalidUsage;
    }
    m->st.encrypt = on;
    return pcclSuccess;
}

void ccoip_master_set_key(pcclMasterInstance_t *m, const ccoip_auth_key_t *key) {
    m->st.key = *key;
    m->st.has_secret = true;
}

pcclResult_t ccoip_master_set_secret(pcclMasterInstance_t *m, const void *secret, size_t len) {
    if (m->running || m->joined) return pcclInvalidUsage;
    if (secret == NULL || len < CCOIP_SECRET_MIN || len > CCOIP_SECRET_MAX) {
        LOG_ERROR(MOD, "run secret: %zu bytes; it must have %d to %d", secret == NULL ? (size_t) 0 : len,
                  CCOIP_SECRET_MIN, CCOIP_SECRET_MAX);
        return pcclInvalidArgument;
    }
    ccoip_auth_derive(secret, len, &m->st.key);
    m->st.has_secret = true;
    return pcclSuccess;
}

static size_t render_status(void *ctx, char *buf, size_t cap) {
    struct pcclMasterInstanceState_t *m = ctx;
    return ccoip_mstatus_render(&m->st, buf, cap);
}

static bool is_loopback(const ccoip_socket_address_t *a) {
    static const uint8_t one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    return a->inet.protocol == inetIPv4 ? a->inet.ipv4.data[0] == 127 : memcmp(a->inet.ipv6.data, one, 16) == 0;
}

bool ccoip_master_serve_status(pcclMasterInstance_t *m, ccoip_socket_address_t addr) {
    struct sockaddr_storage ss;
    if (m->running || m->status != NULL || !to_sockaddr(&addr, &ss)) return false;
    /* The page names every peer's address and UUID: beyond loopback only behind the secret. */
    bool open = is_loopback(&addr);
    if (!open && !m->st.has_secret) {
        LOG_ERROR(MOD, "status endpoint: it lists peer addresses and UUIDs, so it listens beyond loopback only with "
                       "a run secret (--secret-file), which then guards it with a bearer token");
        return false;
    }
    m->status = ccoip_mhttp_start(&m->loop, (const struct sockaddr *) &ss, render_status, m, &m->status_port);
    if (m->status != NULL && !open) {
        char token[65];
        ccoip_auth_status_token(&m->st.key, token);
        ccoip_mhttp_require_token(m->status, token);
    }
    return m->status != NULL;
}

uint16_t ccoip_master_status_port(const pcclMasterInstance_t *m) { return m->status ? m->status_port : 0; }

uint16_t ccoip_master_port(const pcclMasterInstance_t *m) { return m->port; }

static void run_loop(void *arg) {
    struct pcclMasterInstanceState_t *m = arg;
    /* libuv writes with write(2), which raises SIGPIPE when a peer is gone; the default action
     * would kill the host process. Blocked in this thread only, the signal stays pending here
     * (and dies with the thread) while the write fails with EPIPE, which closes that client. */
    ccoip_os_thread_block_sigpipe();
    uv_run(&m->loop, UV_RUN_DEFAULT);
}

pcclResult_t ccoip_master_run(pcclMasterInstance_t *m) {
    if (m == NULL) return pcclInvalidArgument;
    if (m->running || m->joined) return pcclInvalidUsage;
    uv_update_time(&m->loop);
    m->st.start_ms = uv_now(&m->loop); /* the recovery window for REJOIN counts from here */
    uv_timer_start(&m->timer, on_tick, TICK_MS, TICK_MS);
    if (uv_thread_create(&m->thread, run_loop, m) != 0) {
        LOG_ERROR(MOD, "cannot start the master thread");
        return pcclInternalError;
    }
    m->running = true;
    LOG_INFO(MOD, "master running on port %u", m->port);
    if (!m->st.has_secret)
        LOG_INFO(MOD, "no run secret: anyone who reaches port %u can join this run (see docs/security.md)", m->port);
    else if (m->st.encrypt)
        LOG_INFO(MOD, "encrypted run: every control packet is sealed after its connection's handshake, every data "
                      "link by its peers");
    return pcclSuccess;
}

pcclResult_t ccoip_master_interrupt(pcclMasterInstance_t *m) {
    if (m == NULL) return pcclInvalidArgument;
    if (!m->running) return pcclInvalidUsage;
    atomic_store(&m->interrupt, true);
    uv_async_send(&m->wakeup);
    return pcclSuccess;
}

pcclResult_t ccoip_master_await(pcclMasterInstance_t *m) {
    if (m == NULL) return pcclInvalidArgument;
    if (!m->running) return m->joined ? pcclSuccess : pcclInvalidUsage;
    uv_thread_join(&m->thread);
    m->running = false;
    m->joined = true;
    return pcclSuccess;
}

/* The last loop run happens on the caller's thread, where a shutdown's flush could still write
 * to a gone peer: it runs with SIGPIPE blocked as in the loop thread, and one raised there is
 * taken back (ccoip_os_run_without_sigpipe; Windows has no SIGPIPE). */
static void run_loop_once(void *loop) { uv_run(loop, UV_RUN_DEFAULT); }

static void run_on_caller(uv_loop_t *loop) { ccoip_os_run_without_sigpipe(run_loop_once, loop); }

pcclResult_t ccoip_master_destroy(pcclMasterInstance_t *m) {
    if (m == NULL) return pcclInvalidArgument;
    if (m->running) {
        LOG_ERROR(MOD, "pcclDestroyMaster: the master is still running (interrupt and await it first)");
        return pcclInvalidUsage;
    }
    if (m->loop_ready) {
        /* Never ran, or ran and stopped: close whatever is left and let the closes complete. */
        close_all(m);
        run_on_caller(&m->loop);
        uv_loop_close(&m->loop);
    }
    ccoip_mstate_free(&m->st);
    free(m);
    return pcclSuccess;
}
