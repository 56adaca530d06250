/* ccoip_ss_dial.c: a distributor's side of shared-state fetch connections made the other way
 * round (ccoip_ss_dial.h): one thread per receiver that cannot dial it. */
#include "ccoip/peer/ccoip_ss_dial.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_conn.h"
#include "ccoip/net/ccoip_os.h"
#include "ccoip/peer/ccoip_env.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "log/log.h"

#define MOD "ccoip-ss"
#define HANDSHAKE_MS 2000
#define MAX_DIALERS 64

typedef struct dialer_t {
    pthread_t thread;
    pcclComm_t *comm;
    ccoip_ss_client_t to;
    ccoip_socket_address_t relay;
} dialer_t;

struct ccoip_ss_dialers_t {
    dialer_t *d[MAX_DIALERS];
    int n;
};

/* ---- the distributor's side ---- */

/* Dials receiver d->to at its shared-state listener as SS_REVERSED until it takes us: the fd, or
 * -1. "Unknown peer" (it has not read its RESULT yet) and "busy" are retried. */
static int dial_back(dialer_t *d, ccoip_session_t *sess, const char *name) {
    pcclComm_t *comm = d->comm;
    ccoip_socket_address_t a = {d->to.addr, d->to.ss_port};
    int64_t deadline = ccoip_now_ms() + ccoip_env_num("PCCL_SS_CONNECT_TIMEOUT_MS", 10000);
    ccoip_status_t st = CCOIP_ERR_TIMEOUT;
    for (int tries = 0; ccoip_now_ms() < deadline && ccoip_ss_serving(comm) && !atomic_load(&comm->stopping); tries++) {
        int64_t left = deadline - ccoip_now_ms();
        int fd = ccoip_sock_connect(&a, (int) (left < 1000 ? left : 1000), &st);
        if (fd < 0) {
            if (st == CCOIP_ERR_REFUSED) break; /* nothing listens there */
            continue;
        }
        ccoip_hello_ack_t ack;
        memset(&ack, 0, sizeof ack);
        *sess = ccoip_comm_session(comm);
        st = ccoip_conn_hello(fd, CCOIP_ROLE_SS_REVERSED, &comm->uuid, ccoip_comm_key(comm), sess,
                              ccoip_now_ms() + HANDSHAKE_MS, name, &ack);
        if (st == CCOIP_OK) return fd;
        ccoip_sock_close(fd);
        if (st != CCOIP_ERR_REFUSED || (ack.status != CCOIP_HELLO_UNKNOWN_PEER && ack.status != CCOIP_HELLO_BUSY)) break;
        ccoip_sleep_ms(tries < 20 ? 10 : 100); /* a receiver through with its fetch refuses until serving ends */
    }
    LOG_WARN(MOD, "shared state: cannot dial receiver %s back: %s", name, ccoip_status_str(st));
    return -1;
}

static void *dial_main(void *arg) {
    dialer_t *d = arg;
    ccoip_os_name_thread("pccl-ss-dial");
    char name[80], relay[80];
    ccoip_socket_address_t a = {d->to.addr, d->to.ss_port};
    ccoip_format_address(&a, name, sizeof name);
    ccoip_format_address(&d->relay, relay, sizeof relay);
    ccoip_session_t sess;
    memset(&sess, 0, sizeof sess);
    if (d->to.how == CCOIP_SS_REVERSED) {
        int fd = dial_back(d, &sess, name);
        if (fd >= 0) {
            LOG_INFO(MOD, "shared state: reversed fetch connection: we dialled receiver %s (it cannot dial us)", name);
            ccoip_ss_serve_fd(d->comm, fd, &d->to.uuid, &sess, name);
        }
        return NULL;
    }
    ccoip_status_t st = CCOIP_OK;
    int fd = d->relay.port == 0 ? -1 : ccoip_conn_relay_dial(&d->relay, &d->to.token, 5000, &st);
    if (fd < 0) {
        LOG_WARN(MOD, "shared state: cannot reach the relay at %s to serve a receiver: %s", relay,
                 d->relay.port == 0 ? "the master named none" : ccoip_status_str(st));
        return NULL;
    }
    LOG_INFO(MOD, "shared state: relayed fetch connection: serving a receiver through the relay at %s (neither "
                  "can dial the other)", relay);
    ccoip_ss_take_incoming(d->comm, fd, relay); /* the receiver's HELLO comes through it */
    return NULL;
}

ccoip_ss_dialers_t *ccoip_ss_dial_clients(pcclComm_t *comm, const ccoip_ss_result_t *r) {
    ccoip_ss_dialers_t *dl = NULL;
    for (uint32_t i = 0; i < r->nserve; i++) {
        if (r->serve[i].how == CCOIP_SS_DIRECT) continue;
        if (dl == NULL && (dl = calloc(1, sizeof *dl)) == NULL) break;
        dialer_t *d = dl->n < MAX_DIALERS ? calloc(1, sizeof *d) : NULL;
        if (d == NULL) {
            LOG_ERROR(MOD, "shared state: cannot start a thread to dial a receiver (%d already)", dl->n);
            continue;
        }
        *d = (dialer_t){0, comm, r->serve[i], {r->relay_addr, r->relay_port}};
        if (pthread_create(&d->thread, NULL, dial_main, d) != 0) {
            LOG_ERROR(MOD, "shared state: cannot start a thread to dial a receiver");
            free(d);
            continue;
        }
        dl->d[dl->n++] = d;
    }
    return dl;
}

void ccoip_ss_dial_join(ccoip_ss_dialers_t *dl) {
    for (int i = 0; dl != NULL && i < dl->n; i++) {
        pthread_join(dl->d[i]->thread, NULL);
        free(dl->d[i]);
    }
    free(dl);
}

