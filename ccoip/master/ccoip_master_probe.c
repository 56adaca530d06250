/* ccoip_master_probe.c: the master's connection back to a joining peer (ccoip_master_probe.h). */
#include "ccoip/master/ccoip_master_probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


struct ccoip_mprobe_t {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_connect_t req;
    ccoip_mprobe_cb cb;
    void *owner;
    uint64_t timeout_ms;
    bool done;   /* the outcome is known (or forgotten): later events are ignored */
    int handles; /* open handles: freed when the last one closed */
};

static void on_closed(uv_handle_t *h) {
    ccoip_mprobe_t *p = h->data;
    if (--p->handles == 0) free(p);
}

/* Reports once, then closes both handles (a connect still under way ends as cancelled). */
static void finish(ccoip_mprobe_t *p, bool ok, const char *why) {
    if (p->done) return;
    p->done = true;
    if (p->cb != NULL && p->owner != NULL) p->cb(p->owner, ok, why);
    uv_timer_stop(&p->timer);
    uv_close((uv_handle_t *) &p->tcp, on_closed);
    uv_close((uv_handle_t *) &p->timer, on_closed);
}

static void on_connect(uv_connect_t *req, int status) {
    ccoip_mprobe_t *p = req->data;
    finish(p, status == 0, status == 0 ? "" : uv_strerror(status));
}

static void on_timeout(uv_timer_t *t) {
    ccoip_mprobe_t *p = t->data;
    char why[64];
    snprintf(why, sizeof why, "no answer within %llu ms", (unsigned long long) p->timeout_ms);
    finish(p, false, why);
}

ccoip_mprobe_t *ccoip_mprobe_start(uv_loop_t *loop, const struct sockaddr *to, uint64_t timeout_ms,
                                   ccoip_mprobe_cb cb, void *owner) {
    ccoip_mprobe_t *p = calloc(1, sizeof *p);
    if (p == NULL) return NULL;
    p->cb = cb;
    p->owner = owner;
    p->timeout_ms = timeout_ms;
    if (uv_tcp_init(loop, &p->tcp) != 0) {
        free(p);
        return NULL;
    }
    uv_timer_init(loop, &p->timer);
    p->tcp.data = p->timer.data = p->req.data = p;
    p->handles = 2;
    int rc = uv_tcp_connect(&p->req, &p->tcp, to, on_connect);
    if (rc != 0) { /* no callback: the caller takes it as unreachable */
        p->owner = NULL;
        finish(p, false, uv_strerror(rc));
        return NULL;
    }
    uv_timer_start(&p->timer, on_timeout, timeout_ms, 0);
    return p;
}

void ccoip_mprobe_forget(ccoip_mprobe_t *p) {
    if (p == NULL) return;
    p->owner = NULL;
    finish(p, false, "forgotten");
}
