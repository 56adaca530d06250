/* ccoip_ss_mailbox.c: the distributors a receiver waits for (ccoip_ss_mailbox.h): a small table
 * that the fetch fills before it starts and the listener's threads fill with connections. */
#include "ccoip/peer/ccoip_ss_mailbox.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ccoip/net/ccoip_conn.h"
#include "ccoip/net/ccoip_os.h"
#include "ccoip/net/ccoip_socket.h"
#include "ccoip/peer/ccoip_peer_int.h"
#include "log/log.h"
#include "threadpark/monocond.h"

#define MOD "ccoip-ss"
#define WAKE_MS 50 /* a waiting fetch thread looks whether it is still needed this often */

/* A distributor that will dial us: fd -1 until it has, -2 once taken. */
typedef struct expect_t {
    ccoip_uuid_t uuid;
    int fd;
    ccoip_session_t sess;
} expect_t;

struct ccoip_ss_mailbox_t {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    expect_t expect[CCOIP_SS_MAX_DISTRIBUTORS];
    uint32_t nexpect;
};

ccoip_ss_mailbox_t *ccoip_ss_mailbox_new(void) {
    ccoip_ss_mailbox_t *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    pthread_mutex_init(&d->lock, NULL);
    monocond_init(&d->cv);
    return d;
}

void ccoip_ss_mailbox_free(ccoip_ss_mailbox_t *d) {
    if (d == NULL) return;
    ccoip_ss_mailbox_forget(d);
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->cv);
    free(d);
}

static expect_t *find(ccoip_ss_mailbox_t *d, const ccoip_uuid_t *uuid) {
    for (uint32_t i = 0; i < d->nexpect; i++)
        if (memcmp(d->expect[i].uuid.b, uuid->b, 16) == 0) return &d->expect[i];
    return NULL;
}

void ccoip_ss_mailbox_expect(ccoip_ss_mailbox_t *d, const ccoip_uuid_t *uuid) {
    pthread_mutex_lock(&d->lock);
    if (find(d, uuid) == NULL && d->nexpect < CCOIP_SS_MAX_DISTRIBUTORS)
        d->expect[d->nexpect++] = (expect_t){*uuid, -1, {0}};
    pthread_mutex_unlock(&d->lock);
}

int ccoip_ss_mailbox_await(ccoip_ss_mailbox_t *d, pcclComm_t *comm, const ccoip_uuid_t *uuid, int64_t deadline_ms,
                           ccoip_session_t *sess) {
    pthread_mutex_lock(&d->lock);
    expect_t *e = find(d, uuid);
    while (e != NULL && e->fd == -1 && ccoip_now_ms() < deadline_ms && !atomic_load(&comm->stopping)) {
        struct timespec at;
        int64_t left = deadline_ms - ccoip_now_ms();
        monocond_deadline(&at, (left < WAKE_MS ? (left > 0 ? left : 0) : WAKE_MS) * 1000000);
        monocond_timedwait(&d->cv, &d->lock, &at);
    }
    int fd = e != NULL && e->fd >= 0 ? e->fd : -1;
    if (fd >= 0) {
        *sess = e->sess;
        e->fd = -2;
    }
    pthread_mutex_unlock(&d->lock);
    return fd;
}

void ccoip_ss_mailbox_forget(ccoip_ss_mailbox_t *d) {
    pthread_mutex_lock(&d->lock);
    for (uint32_t i = 0; i < d->nexpect; i++)
        if (d->expect[i].fd >= 0) ccoip_sock_close(d->expect[i].fd);
    d->nexpect = 0;
    pthread_mutex_unlock(&d->lock);
}

void ccoip_ss_mailbox_arrived(ccoip_ss_mailbox_t *d, pcclComm_t *comm, int fd, const ccoip_hello_t *hello,
                              const char *who, int64_t deadline_ms) {
    pthread_mutex_lock(&d->lock);
    expect_t *e = find(d, &hello->uuid);
    bool wanted = e != NULL && e->fd == -1;
    pthread_mutex_unlock(&d->lock);
    char why[96];
    ccoip_session_t sess;
    memset(&sess, 0, sizeof sess);
    if (!wanted) { /* not (yet) in a fetch that waits for it: it retries */
        ccoip_conn_answer_hello(fd, CCOIP_HELLO_UNKNOWN_PEER, NULL);
        LOG_DEBUG(MOD, "refused a reversed shared-state connection from %s: no fetch waits for it", who);
        ccoip_sock_close(fd);
        return;
    }
    if (!ccoip_conn_accept_hello(fd, hello, ccoip_comm_key(comm), &sess, deadline_ms, why, sizeof why)) {
        LOG_WARN(MOD, "refused a reversed shared-state connection from %s: %s", who, why);
        ccoip_sock_close(fd);
        return;
    }
    pthread_mutex_lock(&d->lock);
    e = find(d, &hello->uuid); /* the fetch may have ended meanwhile */
    if (e != NULL && e->fd == -1) {
        e->fd = fd;
        e->sess = sess;
        fd = -1;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->lock);
    if (fd >= 0) ccoip_sock_close(fd);
    else LOG_INFO(MOD, "shared state: reversed fetch connection: distributor %s dialled us (we cannot dial it)", who);
}
