/* relay_pair.c: two paired connections spliced until both sides closed (relay_pair.h). */
#include "ccoip/relay/relay_pair.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ccoip/net/ccoip_socket.h"
#include "log/log.h"

#define MOD "pccl-relay"
#define CHUNK (1u << 20)

typedef struct pair_t {
    int fd[2];
    _Atomic int left; /* directions still copying: the last one closes both fds */
    _Atomic unsigned long long bytes[2];
    char name[48];
} pair_t;

typedef struct dir_t {
    pair_t *p;
    int from; /* 0: fd[0] -> fd[1]; 1: the other way */
} dir_t;

static void *copy_dir(void *arg) {
    dir_t d = *(dir_t *) arg;
    free(arg);
    pair_t *p = d.p;
    int in = p->fd[d.from], out = p->fd[1 - d.from];
    char *buf = malloc(CHUNK);
    for (ssize_t n; buf != NULL && (n = read(in, buf, CHUNK)) > 0;) {
        if (ccoip_sock_send_all(out, buf, (size_t) n) != CCOIP_OK) break;
        atomic_fetch_add(&p->bytes[d.from], (unsigned long long) n);
    }
    free(buf);
    ccoip_sock_shutdown_write(out); /* the end of stream passes on */
    if (atomic_fetch_sub(&p->left, 1) == 1) {
        LOG_INFO(MOD, "pair %s ended: %llu and %llu bytes relayed", p->name, (unsigned long long) p->bytes[0],
                 (unsigned long long) p->bytes[1]);
        close(p->fd[0]);
        close(p->fd[1]);
        free(p);
    }
    return NULL;
}

bool relay_pair_start(int a, int b, const char *name) {
    pair_t *p = calloc(1, sizeof *p);
    if (p == NULL) {
        close(a);
        close(b);
        return false;
    }
    p->fd[0] = a;
    p->fd[1] = b;
    snprintf(p->name, sizeof p->name, "%s", name);
    atomic_store(&p->left, 2);
    for (int from = 0; from < 2; from++) {
        dir_t *d = malloc(sizeof *d);
        pthread_t t;
        if (d != NULL) *d = (dir_t){p, from};
        if (d == NULL || pthread_create(&t, NULL, copy_dir, d) != 0) {
            free(d);
            LOG_ERROR(MOD, "pair %s: cannot start a thread", name);
            shutdown(a, SHUT_RDWR); /* ends a direction already started: it closes what is left */
            shutdown(b, SHUT_RDWR);
            if (atomic_fetch_sub(&p->left, 2 - from) == 2 - from) {
                close(a);
                close(b);
                free(p);
            }
            return false;
        }
        pthread_detach(t);
    }
    return true;
}
