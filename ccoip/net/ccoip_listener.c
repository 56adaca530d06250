/* ccoip_listener.c: a listening socket with its own accept thread (ccoip_listener.h). */
#include "ccoip/net/ccoip_listener.h"

#include <string.h>

#include "ccoip/net/ccoip_os.h"
#include "ccoip/net/ccoip_socket.h"
#include "log/log.h"

#define MOD "ccoip-peer"

void ccoip_listener_init(ccoip_listener_t *l) {
    memset(l, 0, sizeof *l);
    l->fd = -1;
    l->wake[0] = l->wake[1] = -1;
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
        l->on_accept(l->ctx, fd, who);
    }
    return NULL;
}

bool ccoip_listener_start(ccoip_listener_t *l, ccoip_inet_protocol_t protocol, uint16_t first_port, unsigned tries,
                          ccoip_accept_cb on_accept, void *ctx, const char *what) {
    ccoip_inet_address_t any;
    memset(&any, 0, sizeof any);
    any.protocol = protocol;
    l->on_accept = on_accept;
    l->ctx = ctx;
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
        pthread_join(l->thread, NULL);
        l->started = false;
    }
    ccoip_wakeup_close(l->wake);
    ccoip_sock_close(l->fd);
    l->fd = -1;
}
