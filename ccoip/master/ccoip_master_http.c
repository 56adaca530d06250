/* ccoip_master_http.c: the status endpoint's HTTP server (ccoip_master_http.h).
 *
 * Untrusted input: a request is read into a fixed 4 KiB buffer and only its first line is
 * looked at; whatever does not fit, or does not end its header within 5 s, closes the
 * connection. The server and its connections are counted, so that close() can tell when the
 * last handle is gone and free the server. */
#include "ccoip/master/ccoip_master_http.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ccoip/wire/ccoip_auth.h"
#include "log/log.h"

#define MOD "ccoip-master"
#define REQUEST_MAX 4096
#define DEADLINE_MS 5000
#define MAX_CONNS 16

typedef struct hconn_t hconn_t;

struct ccoip_mhttp {
    uv_tcp_t server; /* first: the handle casts back to the server */
    uv_loop_t *loop;
    ccoip_mhttp_render_t render;
    void *ctx;
    hconn_t *conns; /* open connections, a list */
    size_t nconns;
    int handles;    /* handles not yet closed: the listener and two per connection */
    bool closing;
    char token[80]; /* "" for none: ccoip_mhttp_require_token */
};

struct hconn_t {
    uv_tcp_t tcp; /* first */
    uv_timer_t deadline;
    ccoip_mhttp_t *h;
    hconn_t *next;
    bool answered, one_closed; /* one_closed: one of its two handles is closed */
    size_t len;
    char req[REQUEST_MAX];
};

typedef struct hwrite_t {
    uv_write_t w; /* first */
    hconn_t *c;
    char *buf;
} hwrite_t;

static void on_handle_closed(uv_handle_t *handle) {
    ccoip_mhttp_t *h = handle->data;
    if (handle != (uv_handle_t *) &h->server) {
        hconn_t *c = (hconn_t *) ((uv_handle_type) handle->type == UV_TCP ? (void *) handle
                                                                          : (char *) handle - offsetof(hconn_t, deadline));
        if (c->one_closed) free(c); /* both of its handles are closed now */
        else c->one_closed = true;
    }
    if (--h->handles == 0 && h->closing) free(h);
}

static void conn_close(hconn_t *c) {
    if (uv_is_closing((uv_handle_t *) &c->tcp)) return;
    ccoip_mhttp_t *h = c->h;
    for (hconn_t **p = &h->conns; *p != NULL; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            h->nconns--;
            break;
        }
    uv_close((uv_handle_t *) &c->tcp, on_handle_closed);
    uv_close((uv_handle_t *) &c->deadline, on_handle_closed);
}

static void on_deadline(uv_timer_t *t) { conn_close((hconn_t *) ((char *) t - offsetof(hconn_t, deadline))); }

static void on_written(uv_write_t *w, int status) {
    (void) status;
    hwrite_t *hw = (hwrite_t *) w;
    conn_close(hw->c);
    free(hw->buf);
    free(hw);
}

/* Sends the status line, headers and body (malloc'd; taken) as one buffer, then closes. */
static void respond(hconn_t *c, const char *status, const char *type, char *body, size_t body_len) {
    c->answered = true;
    uv_read_stop((uv_stream_t *) &c->tcp);
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", status,
                     type, body_len);
    hwrite_t *hw = calloc(1, sizeof *hw);
    char *all = n > 0 ? malloc((size_t) n + body_len) : NULL;
    if (hw == NULL || all == NULL) {
        free(hw);
        free(all);
        free(body);
        conn_close(c);
        return;
    }
    memcpy(all, head, (size_t) n);
    if (body_len) memcpy(all + n, body, body_len);
    free(body);
    hw->c = c;
    hw->buf = all;
    uv_buf_t b = uv_buf_init(all, (unsigned) ((size_t) n + body_len));
    if (uv_write(&hw->w, (uv_stream_t *) &c->tcp, &b, 1, on_written) != 0) {
        free(all);
        free(hw);
        conn_close(c);
    }
}

static void respond_text(hconn_t *c, const char *status, const char *text) {
    size_t n = strlen(text);
    char *body = malloc(n + 1);
    if (body == NULL) {
        conn_close(c);
        return;
    }
    memcpy(body, text, n + 1);
    respond(c, status, "text/plain; charset=utf-8", body, n);
}

static void serve_metrics(hconn_t *c) {
    ccoip_mhttp_t *h = c->h;
    size_t cap = 16384;
    for (int attempt = 0; attempt < 4; attempt++) {
        char *body = malloc(cap);
        if (body == NULL) break;
        size_t n = h->render(h->ctx, body, cap);
        if (n < cap) {
            respond(c, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body, n);
            return;
        }
        free(body);
        cap = n + 1;
    }
    respond_text(c, "500 Internal Server Error", "out of memory\n");
}

/* Whether the header holds `Authorization: Bearer <token>` (the name in any case). */
static bool authorized(const hconn_t *c) {
    static const char name[] = "authorization:";
    size_t tlen = strlen(c->h->token);
    for (size_t i = 0; i < c->len; i++) {
        if (i > 0 && c->req[i - 1] != '\n') continue;
        if (c->len - i < sizeof name - 1 || strncasecmp(c->req + i, name, sizeof name - 1) != 0) continue;
        size_t k = i + sizeof name - 1;
        while (k < c->len && c->req[k] == ' ') k++;
        if (c->len - k < 7 || strncasecmp(c->req + k, "Bearer ", 7) != 0) return false;
        k += 7;
        size_t e = k;
        while (e < c->len && c->req[e] != '\r' && c->req[e] != '\n' && c->req[e] != ' ') e++;
        char got[80];
        if (e - k >= sizeof got) return false;
        memcpy(got, c->req + k, e - k);
        got[e - k] = '\0';
        return ccoip_auth_token_eq(got, c->h->token, tlen);
    }
    return false;
}

/* The request line: METHOD SP PATH SP HTTP/x.y, and the Authorization header when a token is
 * required; nothing else is read. */
static void handle_request(hconn_t *c) {
    char *end = memchr(c->req, '\n', c->len);
    size_t line = end ? (size_t) (end - c->req) : 0;
    char method[16], path[256], version[16];
    char first[300];
    if (line == 0 || line >= sizeof first) {
        respond_text(c, "400 Bad Request", "bad request\n");
        return;
    }
    memcpy(first, c->req, line);
    first[line] = '\0';
    if (sscanf(first, "%15s %255s %15s", method, path, version) != 3 || strncmp(version, "HTTP/1.", 7) != 0) {
        respond_text(c, "400 Bad Request", "bad request\n");
        return;
    }
    if (c->h->token[0] != '\0' && !authorized(c)) respond_text(c, "401 Unauthorized", "bearer token required\n");
    else if (strcmp(method, "GET") != 0) respond_text(c, "405 Method Not Allowed", "only GET\n");
    else if (strcmp(path, "/metrics") == 0 || strcmp(path, "/") == 0) serve_metrics(c);
    else respond_text(c, "404 Not Found", "try /metrics\n");
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void) suggested;
    hconn_t *c = (hconn_t *) handle;
    *buf = uv_buf_init(c->req + c->len, (unsigned) (REQUEST_MAX - c->len));
}

static bool header_complete(const hconn_t *c) {
    for (size_t i = 1; i < c->len; i++) {
        if (c->req[i] != '\n') continue;
        if (c->req[i - 1] == '\n' || (i >= 3 && memcmp(c->req + i - 3, "\r\n\r\n", 4) == 0)) return true;
    }
    return false;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    (void) buf;
    hconn_t *c = (hconn_t *) s;
    if (c->answered || nread == 0) return;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    c->len += (size_t) nread;
    if (header_complete(c)) handle_request(c);
    else if (c->len == REQUEST_MAX) {
        LOG_WARN(MOD, "status endpoint: a request over %d bytes; closing it", REQUEST_MAX);
        conn_close(c);
    }
}

static void on_connection(uv_stream_t *server, int status) {
    ccoip_mhttp_t *h = (ccoip_mhttp_t *) server;
    if (status != 0 || h->closing) return;
    hconn_t *c = calloc(1, sizeof *c);
    if (c == NULL) return;
    c->h = h;
    uv_tcp_init(h->loop, &c->tcp);
    uv_timer_init(h->loop, &c->deadline);
    c->tcp.data = c->deadline.data = h;
    h->handles += 2;
    c->next = h->conns;
    h->conns = c;
    h->nconns++;
    if (uv_accept(server, (uv_stream_t *) &c->tcp) != 0 || h->nconns > MAX_CONNS) {
        conn_close(c);
        return;
    }
    uv_timer_start(&c->deadline, on_deadline, DEADLINE_MS, 0);
    uv_read_start((uv_stream_t *) &c->tcp, on_alloc, on_read);
}

ccoip_mhttp_t *ccoip_mhttp_start(uv_loop_t *loop, const struct sockaddr *addr, ccoip_mhttp_render_t render,
                                 void *ctx, uint16_t *port) {
    ccoip_mhttp_t *h = calloc(1, sizeof *h);
    if (h == NULL) return NULL;
    h->loop = loop;
    h->render = render;
    h->ctx = ctx;
    uv_tcp_init(loop, &h->server);
    h->server.data = h;
    h->handles = 1;
    int rc = uv_tcp_bind(&h->server, addr, 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *) &h->server, 64, on_connection);
    if (rc != 0) {
        LOG_ERROR(MOD, "status endpoint: cannot listen: %s", uv_strerror(rc));
        h->closing = true;
        uv_close((uv_handle_t *) &h->server, on_handle_closed);
        return NULL;
    }
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&h->server, (struct sockaddr *) &bound, &blen);
    *port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &bound)->sin6_port
                                              : ((struct sockaddr_in *) &bound)->sin_port);
    return h;
}

void ccoip_mhttp_require_token(ccoip_mhttp_t *h, const char *token) {
    snprintf(h->token, sizeof h->token, "%s", token);
}

void ccoip_mhttp_close(ccoip_mhttp_t *h) {
    if (h == NULL || h->closing) return;
    h->closing = true;
    while (h->conns != NULL) conn_close(h->conns);
    uv_close((uv_handle_t *) &h->server, on_handle_closed);
}
