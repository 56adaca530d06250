/* ccoip_wire.c: bounded big-endian reader/writer and frame header peeking. */
#include "ccoip/wire/ccoip_wire.h"

#include <stdlib.h>
#include <string.h>

const char *ccoip_status_str(ccoip_status_t status) {
    switch (status) {
    case CCOIP_OK: return "ok";
    case CCOIP_ERR_TRUNCATED: return "truncated input";
    case CCOIP_ERR_TOO_LARGE: return "length over limit";
    case CCOIP_ERR_INVALID: return "invalid value";
    case CCOIP_ERR_UNKNOWN_TYPE: return "unknown packet type";
    case CCOIP_ERR_NOMEM: return "out of memory";
    case CCOIP_ERR_IO: return "socket error";
    case CCOIP_ERR_CLOSED: return "connection closed";
    case CCOIP_ERR_TIMEOUT: return "timed out";
    case CCOIP_ERR_REFUSED: return "refused";
    }
    return "unknown status";
}

void ccoip_reader_init(ccoip_reader_t *r, const void *p, size_t len) {
    r->p = p;
    r->len = p == NULL ? 0 : len;
    r->pos = 0;
    r->failed = false;
}

size_t ccoip_reader_left(const ccoip_reader_t *r) { return r->failed ? 0 : r->len - r->pos; }

/* The single bounds check every read goes through. */
static const uint8_t *take(ccoip_reader_t *r, size_t n) {
    if (r->failed || r->len - r->pos < n) {
        r->failed = true;
        return NULL;
    }
    const uint8_t *at = r->p + r->pos;
    r->pos += n;
    return at;
}

bool ccoip_read_u8(ccoip_reader_t *r, uint8_t *out) {
    const uint8_t *b = take(r, 1);
    if (b == NULL) return false;
    *out = b[0];
    return true;
}

bool ccoip_read_u16(ccoip_reader_t *r, uint16_t *out) {
    const uint8_t *b = take(r, 2);
    if (b == NULL) return false;
    *out = (uint16_t) ((unsigned) b[0] << 8 | b[1]);
    return true;
}

bool ccoip_read_u32(ccoip_reader_t *r, uint32_t *out) {
    const uint8_t *b = take(r, 4);
    if (b == NULL) return false;
    *out = (uint32_t) b[0] << 24 | (uint32_t) b[1] << 16 | (uint32_t) b[2] << 8 | b[3];
    return true;
}

bool ccoip_read_u64(ccoip_reader_t *r, uint64_t *out) {
    uint32_t hi, lo;
    if (!ccoip_read_u32(r, &hi) || !ccoip_read_u32(r, &lo)) return false;
    *out = (uint64_t) hi << 32 | lo;
    return true;
}

bool ccoip_read_bytes(ccoip_reader_t *r, void *out, size_t n) {
    const uint8_t *b = take(r, n);
    if (b == NULL) return false;
    if (n > 0) memcpy(out, b, n);
    return true;
}

void ccoip_writer_init(ccoip_writer_t *w, size_t max) {
    w->buf = NULL;
    w->len = 0;
    w->cap = 0;
    w->max = max;
    w->failed = false;
    w->fixed = false;
}

void ccoip_writer_init_fixed(ccoip_writer_t *w, void *buf, size_t cap) {
    w->buf = buf;
    w->len = 0;
    w->cap = cap;
    w->max = cap;
    w->failed = false;
    w->fixed = true;
}

void ccoip_writer_free(ccoip_writer_t *w) {
    if (w->fixed) {
        ccoip_writer_reset(w);
        return;
    }
    free(w->buf);
    ccoip_writer_init(w, w->max);
}

void ccoip_writer_reset(ccoip_writer_t *w) {
    w->len = 0;
    w->failed = false;
}

static uint8_t *put(ccoip_writer_t *w, size_t n) {
    if (w->failed || n > w->max - w->len) {
        w->failed = true;
        return NULL;
    }
    if (w->len + n > w->cap) {
        size_t cap = w->cap == 0 ? 64 : w->cap;
        while (cap < w->len + n) cap *= 2;
        if (cap > w->max) cap = w->max;
        uint8_t *nb = realloc(w->buf, cap);
        if (nb == NULL) {
            w->failed = true;
            return NULL;
        }
        w->buf = nb;
        w->cap = cap;
    }
    uint8_t *at = w->buf + w->len;
    w->len += n;
    return at;
}

bool ccoip_write_u8(ccoip_writer_t *w, uint8_t v) {
    uint8_t *b = put(w, 1);
    if (b == NULL) return false;
    b[0] = v;
    return true;
}

bool ccoip_write_u16(ccoip_writer_t *w, uint16_t v) {
    uint8_t *b = put(w, 2);
    if (b == NULL) return false;
    b[0] = (uint8_t) (v >> 8);
    b[1] = (uint8_t) v;
    return true;
}

bool ccoip_write_u32(ccoip_writer_t *w, uint32_t v) {
    uint8_t *b = put(w, 4);
    if (b == NULL) return false;
    for (int i = 0; i < 4; i++) b[i] = (uint8_t) (v >> (24 - 8 * i));
    return true;
}

bool ccoip_write_u64(ccoip_writer_t *w, uint64_t v) {
    return ccoip_write_u32(w, (uint32_t) (v >> 32)) && ccoip_write_u32(w, (uint32_t) v);
}

bool ccoip_write_bytes(ccoip_writer_t *w, const void *p, size_t n) {
    uint8_t *b = put(w, n);
    if (b == NULL) return false;
    if (n > 0) memcpy(b, p, n);
    return true;
}

ccoip_status_t ccoip_frame_peek(const uint8_t *buf, size_t len, uint32_t max_payload, uint16_t *type,
                                uint32_t *payload_len) {
    ccoip_reader_t r;
    ccoip_reader_init(&r, buf, len);
    uint32_t n;
    uint16_t t;
    if (!ccoip_read_u32(&r, &n) || !ccoip_read_u16(&r, &t)) return CCOIP_ERR_TRUNCATED;
    if (n > max_payload) return CCOIP_ERR_TOO_LARGE;
    *type = t;
    *payload_len = n;
    return CCOIP_OK;
}

bool ccoip_strict(const char *value, const char *rule) {
    size_t n = strlen(rule);
    for (const char *p = value; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t) (end - p) : strlen(p);
        if ((len == n && strncmp(p, rule, n) == 0) || (len == 3 && strncmp(p, "all", 3) == 0) ||
            (len == 1 && *p == '1'))
            return true;
        p = end != NULL ? end + 1 : NULL;
    }
    return false;
}
