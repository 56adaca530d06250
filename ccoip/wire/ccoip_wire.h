/* ccoip_wire.h: bounded big-endian reader and writer, statuses, and the control-frame header.
 *
 * A frame is `u32 length | u16 type | payload` (big-endian); length counts the payload only.
 * The reader never moves past its end: the first failed read latches `failed` and every later
 * read fails too, so a decoder may read a whole struct and check once. */
#ifndef CCOIP_WIRE_H
#define CCOIP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ccoip_status_t {
    CCOIP_OK = 0,
    CCOIP_ERR_TRUNCATED,    /* input ended inside a field, or a frame is incomplete */
    CCOIP_ERR_TOO_LARGE,    /* a length or count over its cap */
    CCOIP_ERR_INVALID,      /* a value out of range, trailing bytes, a bad magic */
    CCOIP_ERR_UNKNOWN_TYPE, /* a packet type this build does not know */
    CCOIP_ERR_NOMEM,
    CCOIP_ERR_IO,      /* a socket error */
    CCOIP_ERR_CLOSED,  /* the other side closed the connection */
    CCOIP_ERR_TIMEOUT, /* a deadline passed */
    CCOIP_ERR_REFUSED  /* the other side said no (handshake, admission) */
} ccoip_status_t;

const char *ccoip_status_str(ccoip_status_t status);

#define CCOIP_HEADER_SIZE 6u
/* The largest payload anyone may send; later shared-state hash lists are the biggest packets. */
#define CCOIP_MAX_PAYLOAD (16u << 20)

typedef struct ccoip_reader_t {
    const uint8_t *p;
    size_t len;
    size_t pos;
    bool failed;
} ccoip_reader_t;

void ccoip_reader_init(ccoip_reader_t *r, const void *p, size_t len);
size_t ccoip_reader_left(const ccoip_reader_t *r);
bool ccoip_read_u8(ccoip_reader_t *r, uint8_t *out);
bool ccoip_read_u16(ccoip_reader_t *r, uint16_t *out);
bool ccoip_read_u32(ccoip_reader_t *r, uint32_t *out);
bool ccoip_read_u64(ccoip_reader_t *r, uint64_t *out);
bool ccoip_read_bytes(ccoip_reader_t *r, void *out, size_t n);

/* A buffer capped at `max` bytes; going over latches `failed`. A growable writer (init) owns a
 * heap buffer that grows on demand and keeps its capacity across resets; a fixed one
 * (init_fixed) writes into the caller's memory and never allocates. */
typedef struct ccoip_writer_t {
    uint8_t *buf;
    size_t len;
    size_t cap;
    size_t max;
    bool failed;
    bool fixed; /* buf is the caller's: never grown, never freed */
} ccoip_writer_t;

void ccoip_writer_init(ccoip_writer_t *w, size_t max);
void ccoip_writer_init_fixed(ccoip_writer_t *w, void *buf, size_t cap);
void ccoip_writer_free(ccoip_writer_t *w);
void ccoip_writer_reset(ccoip_writer_t *w);
bool ccoip_write_u8(ccoip_writer_t *w, uint8_t v);
bool ccoip_write_u16(ccoip_writer_t *w, uint16_t v);
bool ccoip_write_u32(ccoip_writer_t *w, uint32_t v);
bool ccoip_write_u64(ccoip_writer_t *w, uint64_t v);
bool ccoip_write_bytes(ccoip_writer_t *w, const void *p, size_t n);

/* Looks at the start of a byte stream. CCOIP_OK: a header is there, *type and *payload_len are
 * set (the payload itself may still be incomplete); CCOIP_ERR_TRUNCATED: fewer than 6 bytes;
 * CCOIP_ERR_TOO_LARGE: the claimed length exceeds max_payload (close the connection). */
ccoip_status_t ccoip_frame_peek(const uint8_t *buf, size_t len, uint32_t max_payload, uint16_t *type,
                                uint32_t *payload_len);

/* Whether PCCL_STRICT's value (a comma list; "all" or "1" for every rule; NULL: none) turns on
 * `rule` ("revision", "topology"): our stricter rules, off by default (docs/pccl-compat.md). */
bool ccoip_strict(const char *value, const char *rule);

#endif /* CCOIP_WIRE_H */
