/* ccoip_listener.c: a listening socket with its own accept thread (ccoip_listener.h). */
#include "ccoip/net/ccoip_listener.h"

#include <string.h>

#include "ccoip/net/ccoip_os.h"
#include "ccoip/net/ccoip_socket.h"
#include "log/log.h"

#define MOD "ccoip-peer"
#define WARN_EVERY_MS 5000

void ccoip_listener_init(ccoip_listener_t *l) {
    memset(l, 0, sizeof *l);
    l->fd = -1;
    for (int i = 0; i < CCOIP_LISTENER_INFLIGHT; i++) pthread_mutex_init(&l->slots[i].lock, NULL);
    l->wake[0] = l->wake[1] = -1;
}

static void *slot_main(void *arg) {
    ccoip_listener_slot_t *s = arg;
    ccoip_listener_t *l = s->l;
    l->on_accept(l->ctx, s->fd, s->who);
    pthread_mutex_lock(&s->lock);
    ccoip_sock_close(s->shadow);
    s->shadow = -1;
    pthread_mutex_unlock(&s->lock);
    atomic_store(&s->state, 2);
    return NULL;
}

/* Joins finished callbacks; with `cut`, first shuts down the sockets of running ones. */
static void reap(ccoip_listener_t *l, bool cut) {
    for (int i = 0; i < CCOIP_LISTENER_INFLIGHT; i++) {
        ccoip_listener_slot_t *s = &l->slots[i];
        int st = atomic_load(&s->state);
        if (st == 0 || (st == 1 && !cut)) continue;
        if (st == 1) {
            pthread_mutex_lock(&s->lock);
            if (s->shadow >= 0) ccoip_sock_shutdown(s->shadow);
            pthread_mutex_unlock(&s->lock);
        }
        pthread_join(s->thread, NULL);
        atomic_store(&s->state, 0);
    }
}

static bool same_addr(const ccoip_inet_address_t *a, const ccoip_inet_address_t *b) {
    if (a->protocol != b->protocol) return false;
    return a->protocol == inetIPv4 ? memcmp(a->ipv4.data, b->ipv4.data, 4) == 0 : memcmp(a->ipv6.data, b->ipv6.data, 16) == 0;
}

/* A free slot for a connection from `from`, or NULL when over a cap. */
static ccoip_listener_slot_t *take_slot(ccoip_listener_t *l, const ccoip_inet_address_t *from) {
    ccoip_listener_slot_t *free_slot = NULL;
    int same = 0;
    for (int i = 0; i < CCOIP_LISTENER_INFLIGHT; i++) {
        ccoip_listener_slot_t *s = &l->slots[i];
        if (atomic_load(&s->state) == 0) {
            if (free_slot == NULL) free_slot = s;
        } else if (same_addr(&s->from, from)) {
            same++;
        }
    }
    return same >= CCOIP_LISTENER_PER_ADDR ? NULL : free_slot;
}

static void refuse(ccoip_listener_t *l, int fd, const char *who) {
    ccoip_sock_close(fd);
    l->refused++;
    int64_t now = ccoip_now_ms();
    LOG_DEBUG(MOD, "%s listener: closed a connection from %s: too many handshakes in progress", l->what, who);
    if (now - l->warned_ms < WARN_EVERY_MS) return;
    LOG_WARN(MOD, "%s listener: closed %llu connections over the handshake caps (%d at once, %d per address); "
                  "the last from %s", l->what, (unsigned long long) l->refused, CCOIP_LISTENER_INFLIGHT,
             CCOIP_LISTENER_PER_ADDR, who);
    l->refused = 0;
    l->warned_ms = now;
}

static void *accept_main(void *arg) {
    ccoip_listener_t *l = arg;
    ccoip_os_name_thread("pccl-accept");
    for (;;) {
        ccoip_status_t st = ccoip_sock_wait(l->fd, l->wake[0], -1);
        if (st == CCOIP_ERR_CLOSED) break; /* woken by stop */
        if (st != CCOIP_OK) continue;
        ccoip_socket_address_t from;
        int fd = ccoip_sock_accept(l->fd, &from);
        if (fd < 0) continue;
        char who[80];
        ccoip_format_address(&from, who, sizeof who);
        reap(l, false);
        ccoip_listener_slot_t *s = take_slot(l, &from.inet);
        int shadow = s != NULL ? ccoip_sock_dup(fd) : -1;
        if (s == NULL || shadow < 0) {
            refuse(l, fd, who);
            continue;
        }
        s->fd = fd;
        s->shadow = shadow;
        s->from = from.inet;
        s->l = l;
        memcpy(s->who, who, sizeof who);
        atomic_store(&s->state, 1);
        if (pthread_create(&s->thread, NULL, slot_main, s) != 0) {
            atomic_store(&s->state, 0);
            ccoip_sock_close(shadow);
            s->shadow = -1;
            refuse(l, fd, who);
        }
    }
    reap(l, true);
    return NULL;
}

bool ccoip_listener_start(ccoip_listener_t *l, ccoip_inet_protocol_t protocol, uint16_t first_port, unsigned tries,
                          ccoip_accept_cb on_accept, void *ctx, const char *what) {
    ccoip_inet_address_t any;
    memset(&any, 0, sizeof any);
    any.protocol = protocol;
    l->on_accept = on_accept;
    l->ctx = ctx;
    l->what = what;
    l->fd = ccoip_sock_listen_bump(&any, first_port, tries, &l->port);
    if (l->fd < 0) {
        LOG_ERROR(MOD, "cannot open the %s listener (ports %u..%u)", what, first_port, first_port + tries - 1);
        return false;
    }
    if (!ccoip_wakeup_open(l->wake) || pthread_create(&l->thread, NULL, accept_main, l) != 0) {
        LOG_ERROR(MOD, "cannot start the %s listener thread", what);
        return false;
    }
    l->started = true;
    LOG_DEBUG(MOD, "%s listener on port %u", what, l->port);
    return true;
}

void ccoip_listener_stop(ccoip_listener_t *l) {
    if (l->started) {
        ccoip_wakeup_signal(l->wake[1]);
        pthread_join(l->thread, NULL); /* it joins the callbacks on its way out */
        l->started = false;
    }
    ccoip_wakeup_close(l->wake);
    ccoip_sock_close(l->fd);
    l->fd = -1;
}
