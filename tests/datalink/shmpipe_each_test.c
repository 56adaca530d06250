/* shmpipe_each_test: ccoip_shmpipe_read_each, the pipe's read that hands its bytes straight out
 * of the ring (what a combining receive runs on), between two real processes (the child creates
 * and writes, the parent opens by name and reads, as peers do):
 *   - exact bytes in order, for elements of 1, 2, 4, 8 and 16 bytes, at stream offsets that are
 *     not a multiple of the element, so that an element straddles the ring's end at every wrap
 *     (exactly one bounce per wrap, aligned, one element long); pieces published one byte at a
 *     time (the reader waits for whole elements); units and lengths it refuses (nothing read);
 *   - every dtype x op combined piece by piece with reduce_combine_unaligned (the data link's
 *     combine): bit-identical to reduce_combine over an aligned copy, in place and not;
 *   - a corrupt head mid-combine (CORRUPT after the pieces before it, nothing more), a shut
 *     mid-combine from another thread of the reader and from the writer's process (CLOSED at
 *     once, every byte that arrived before handed over exactly once). Linux only. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ccoip/net/ccoip_shm.h"
#include "ccoip/net/ccoip_shmpipe.h"
#include "reduce/reduce.h"
#include "tests/common/check.h"
#include "tests/common/clock.h"

#define RING (64u << 10)

static uint8_t pattern(uint64_t i) { return (uint8_t) (i * 131 + (i >> 11) + 7); }

typedef struct offer {
    char name[CCOIP_SHM_NAME_MAX];
    uint8_t token[CCOIP_SHMPIPE_TOKEN];
} offer_t;

/* The writer: a child process that creates the pipe, offers it over ctl[1] and runs script. */
typedef int (*script_fn)(ccoip_shmpipe_t *w, int ctl);

typedef struct writer {
    pid_t pid;
    int ctl; /* the parent's end */
} writer_t;

static void writer_start(writer_t *wr, script_fn script, ccoip_shmpipe_t *reader) {
    int ctl[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, ctl) == 0);
    wr->pid = fork();
    REQUIRE(wr->pid >= 0);
    if (wr->pid == 0) {
        close(ctl[0]);
        ccoip_shmpipe_t w;
        if (!ccoip_shmpipe_create(&w, RING, "child writer")) _exit(10);
        offer_t o;
        memset(&o, 0, sizeof o);
        snprintf(o.name, sizeof o.name, "%s", ccoip_shmpipe_segment(&w));
        memcpy(o.token, w.token, sizeof o.token);
        if (write(ctl[1], &o, sizeof o) != (ssize_t) sizeof o) _exit(11);
        char c;
        if (read(ctl[1], &c, 1) != 1) _exit(12); /* opened: the ring is ours to fill */
        _exit(script(&w, ctl[1]));
    }
    close(ctl[1]);
    wr->ctl = ctl[0];
    offer_t o;
    REQUIRE(read(wr->ctl, &o, sizeof o) == (ssize_t) sizeof o);
    REQUIRE(ccoip_shmpipe_open(reader, o.name, RING, o.token, "parent reader"));
    ccoip_shmpipe_unlink(reader);
    REQUIRE(write(wr->ctl, "o", 1) == 1);
}

/* Waits for the writer; its exit status (0: its script succeeded). */
static int writer_end(writer_t *wr) {
    close(wr->ctl);
    int st = 0;
    REQUIRE(waitpid(wr->pid, &st, 0) == wr->pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Writes the pattern's bytes [from, from + len) in pieces of the sizes given, in turn. */
static int write_pattern(ccoip_shmpipe_t *w, uint64_t from, uint64_t len, const size_t *pieces, size_t npieces) {
    static uint8_t buf[70000];
    for (size_t k = 0; len > 0; k++) {
        size_t n = pieces[k % npieces];
        if (n > len) n = (size_t) len;
        for (size_t i = 0; i < n; i++) buf[i] = pattern(from + i);
        int rc = ccoip_shmpipe_write(w, buf, n);
        if (rc != CCOIP_SHMPIPE_OK) return rc;
        from += n;
        len -= n;
    }
    return CCOIP_SHMPIPE_OK;
}

/* What a sink saw: pieces in order, whole elements, the right bytes, bounces only where due. */
typedef struct seen {
    const ccoip_shmpipe_t *p;
    uint64_t base; /* stream offset of the read's first byte */
    size_t unit, next_at, pieces, bounces, bad;
    int ctl;       /* > 0: on the first piece, ask the writer to act and wait for it */
} seen_t;

static void sink_check(void *ctx, size_t at, const void *piece, size_t n) {
    seen_t *s = ctx;
    const uint8_t *b = piece;
    if (at != s->next_at || n == 0 || n % s->unit != 0 || n > CCOIP_SHMPIPE_PIECE_MAX) s->bad++;
    if (!(b >= s->p->ring && b + n <= s->p->ring + s->p->ring_size)) {
        s->bounces++;
        if (n != s->unit || (uintptr_t) b % s->unit != 0) s->bad++;
    }
    for (size_t i = 0; i < n; i++) s->bad += b[i] != pattern(s->base + at + i);
    s->next_at = at + n;
    s->pieces++;
    if (s->ctl > 0 && s->pieces == 1) {
        char c = 'x';
        REQUIRE(write(s->ctl, &c, 1) == 1);
        REQUIRE(read(s->ctl, &c, 1) == 1);
    }
}

/* Ring ends strictly inside the stream bytes (base, base + len): where an element that does not
 * start on a multiple of the unit must straddle. */
static size_t wraps_inside(uint64_t base, uint64_t len) {
    size_t k = 0;
    for (uint64_t m = base / RING + 1; m * RING < base + len; m++) k += m * RING > base;
    return k;
}

/* The exact-bytes stream: 3 bytes read plainly, then per unit 1..16 a read_each of READ_LEN. */
#define READ_LEN ((uint64_t) 3 * RING + 16 * 37)
#define PREFIX 3u

static const size_t unit_list[] = {1, 2, 4, 8, 16};
#define NUNITS (sizeof unit_list / sizeof unit_list[0])

static int script_exact(ccoip_shmpipe_t *w, int ctl) {
    (void) ctl;
    /* Pieces of 1 byte for the first two units (each published alone), odd sizes after. */
    static const size_t ones[] = {1};
    static const size_t odd[] = {1, 3, 20, 4097, 65535, 5, 65536, 7, 2};
    uint64_t ones_len = PREFIX + 2 * READ_LEN, total = PREFIX + NUNITS * READ_LEN;
    if (write_pattern(w, 0, ones_len, ones, 1) != CCOIP_SHMPIPE_OK) return 20;
    if (write_pattern(w, ones_len, total - ones_len, odd, sizeof odd / sizeof odd[0]) != CCOIP_SHMPIPE_OK) return 21;
    return 0;
}

static void exact_bytes(void) {
    ccoip_shmpipe_t p;
    writer_t wr;
    writer_start(&wr, script_exact, &p);
    uint8_t pre[PREFIX];
    REQUIRE(ccoip_shmpipe_read(&p, pre, PREFIX) == CCOIP_SHMPIPE_OK);
    CHECK(pre[0] == pattern(0) && pre[2] == pattern(2));
    /* Refused, nothing read: units 0, 3, 32, and a length that is no multiple of the unit. */
    seen_t none = {.p = &p, .unit = 1};
    CHECK(ccoip_shmpipe_read_each(&p, 16, 0, sink_check, &none) == CCOIP_SHMPIPE_BADARG);
    CHECK(ccoip_shmpipe_read_each(&p, 18, 3, sink_check, &none) == CCOIP_SHMPIPE_BADARG);
    CHECK(ccoip_shmpipe_read_each(&p, 64, 32, sink_check, &none) == CCOIP_SHMPIPE_BADARG);
    CHECK(ccoip_shmpipe_read_each(&p, 10, 4, sink_check, &none) == CCOIP_SHMPIPE_BADARG);
    CHECK(none.pieces == 0);
    uint64_t base = PREFIX;
    for (size_t u = 0; u < NUNITS; u++) {
        seen_t s = {.p = &p, .base = base, .unit = unit_list[u]};
        CHECK(ccoip_shmpipe_read_each(&p, READ_LEN, s.unit, sink_check, &s) == CCOIP_SHMPIPE_OK);
        CHECK(s.bad == 0);
        CHECK_EQ_U64(s.next_at, READ_LEN);
        CHECK_EQ_U64(s.bounces, s.unit == 1 ? 0 : wraps_inside(base, READ_LEN));
        fprintf(stderr, "unit %zu: %zu pieces, %zu bounces (%s)\n", s.unit, s.pieces, s.bounces,
                u < 2 ? "published a byte at a time" : "odd write sizes");
        base += READ_LEN;
    }
    CHECK(writer_end(&wr) == 0);
    ccoip_shmpipe_close(&p);
}

/* ---- every dtype x op, combined piece by piece ------------------------------------------- */

#define NDTYPES 12
#define NOPS 5

static size_t combo_count(int c) { return 5001 + 74 * (size_t) c; }
static size_t combo_prefix(int c) { return (size_t) (c % 7) + 1; }
static uint8_t value_byte(int c, size_t i) { return (uint8_t) ((i * 2654435761u + (size_t) c * 40503u) >> 13); }
static uint8_t other_byte(int c, size_t i) { return (uint8_t) ((i * 40503u + (size_t) c * 2654435761u) >> 11); }

static int script_combos(ccoip_shmpipe_t *w, int ctl) {
    (void) ctl;
    static const size_t pieces[] = {1, 3, 4093, 65537, 777, 2};
    static uint8_t buf[1 << 20];
    size_t k = 0;
    for (int c = 0; c < NDTYPES * NOPS; c++) {
        size_t len = combo_prefix(c) + combo_count(c) * reduce_dtype_size((pcclDataType_t) (c / NOPS));
        for (size_t i = 0; i < len; i++) buf[i] = i < combo_prefix(c) ? 0xEE : value_byte(c, i - combo_prefix(c));
        for (size_t at = 0; at < len; k++) {
            size_t n = pieces[k % (sizeof pieces / sizeof pieces[0])];
            if (n > len - at) n = len - at;
            if (ccoip_shmpipe_write(w, buf + at, n) != CCOIP_SHMPIPE_OK) return 20;
            at += n;
        }
    }
    return 0;
}

typedef struct combo {
    pcclDataType_t dtype;
    pcclRedOp_t op;
    uint8_t *dst;
    const uint8_t *x;
    size_t pieces, misaligned;
} combo_t;

static void sink_combine(void *ctx, size_t at, const void *piece, size_t n) {
    combo_t *c = ctx;
    size_t esz = reduce_dtype_size(c->dtype);
    c->pieces++;
    c->misaligned += (uintptr_t) piece % esz != 0;
    CHECK(reduce_combine_unaligned(c->dtype, c->op, c->dst + at, piece, c->x + at, n / esz) == REDUCE_OK);
}

static void every_dtype_op(void) {
    ccoip_shmpipe_t p;
    writer_t wr;
    writer_start(&wr, script_combos, &p);
    size_t max = (combo_count(NDTYPES * NOPS) * 8 + 63) & ~(size_t) 63; /* aligned_alloc: a multiple of 64 */
    uint8_t *acc = aligned_alloc(64, max), *x = aligned_alloc(64, max), *dst = aligned_alloc(64, max),
            *ref = aligned_alloc(64, max);
    REQUIRE(acc && x && dst && ref);
    size_t misaligned = 0;
    for (int c = 0; c < NDTYPES * NOPS; c++) {
        pcclDataType_t dtype = (pcclDataType_t) (c / NOPS);
        pcclRedOp_t op = (pcclRedOp_t) (c % NOPS);
        size_t count = combo_count(c), len = count * reduce_dtype_size(dtype);
        int in_place = c % 2;
        for (size_t i = 0; i < len; i++) {
            acc[i] = value_byte(c, i);
            x[i] = other_byte(c, i);
        }
        /* The reference: the plain kernel over aligned memory (random bits: NaN payloads, ties
         * and +-0 show any change of operand order). */
        CHECK(reduce_combine(dtype, op, ref, acc, x, count) == REDUCE_OK);
        memcpy(dst, x, len);
        combo_t k = {.dtype = dtype, .op = op, .dst = dst, .x = in_place ? dst : x};
        uint8_t pre[8];
        REQUIRE(ccoip_shmpipe_read(&p, pre, combo_prefix(c)) == CCOIP_SHMPIPE_OK);
        CHECK(ccoip_shmpipe_read_each(&p, len, reduce_dtype_size(dtype), sink_combine, &k) == CCOIP_SHMPIPE_OK);
        if (memcmp(dst, ref, len) != 0) {
            fprintf(stderr, "dtype %d op %d%s: combined out of the pipe differs from reduce_combine\n", (int) dtype,
                    (int) op, in_place ? " in place" : "");
            CHECK(0);
        }
        misaligned += k.misaligned;
    }
    CHECK(misaligned > 0); /* the unaligned path ran */
    fprintf(stderr, "60 dtype x op streams combined bit-identically; %zu pieces were misaligned\n", misaligned);
    CHECK(writer_end(&wr) == 0);
    ccoip_shmpipe_close(&p);
    free(acc);
    free(x);
    free(dst);
    free(ref);
}

/* ---- failures mid-combine ----------------------------------------------------------------- */

/* Half a ring, then on the reader's word a head that no honest writer publishes. */
static int script_corrupt(ccoip_shmpipe_t *w, int ctl) {
    static const size_t one[] = {RING / 2};
    if (write_pattern(w, 0, RING / 2, one, 1) != CCOIP_SHMPIPE_OK) return 20;
    char c;
    if (read(ctl, &c, 1) != 1) return 21;
    *ccoip_shmpipe_head_word(w) = w->pos + 3 * (uint64_t) RING;
    if (write(ctl, "k", 1) != 1) return 22;
    while (read(ctl, &c, 1) == 1) {
    }
    return 0;
}

static void corrupt_mid_combine(void) {
    ccoip_shmpipe_t p;
    writer_t wr;
    writer_start(&wr, script_corrupt, &p);
    seen_t s = {.p = &p, .unit = 8, .ctl = wr.ctl};
    CHECK(ccoip_shmpipe_read_each(&p, RING, 8, sink_check, &s) == CCOIP_SHMPIPE_CORRUPT);
    CHECK(s.bad == 0 && s.pieces == 1 && s.next_at > 0 && s.next_at <= RING / 2);
    CHECK(writer_end(&wr) == 0);
    ccoip_shmpipe_close(&p);
}

/* Half a ring, then (by_writer) the writer's process shuts the pipe 100 ms later, or nothing more
 * until the reader's side shuts it. */
static int script_half(ccoip_shmpipe_t *w, int ctl, int shut) {
    static const size_t one[] = {RING / 2};
    if (write_pattern(w, 0, RING / 2, one, 1) != CCOIP_SHMPIPE_OK) return 20;
    if (shut) {
        usleep(100 * 1000);
        ccoip_shmpipe_shut(w);
    }
    char c;
    while (read(ctl, &c, 1) == 1) {
    }
    return 0;
}
static int script_half_shut(ccoip_shmpipe_t *w, int ctl) { return script_half(w, ctl, 1); }
static int script_half_stay(ccoip_shmpipe_t *w, int ctl) { return script_half(w, ctl, 0); }

static void *shut_later(void *arg) {
    usleep(100 * 1000);
    ccoip_shmpipe_shut(arg);
    return NULL;
}

static void shut_mid_combine(int by_writer) {
    ccoip_shmpipe_t p;
    writer_t wr;
    writer_start(&wr, by_writer ? script_half_shut : script_half_stay, &p);
    pthread_t th;
    if (!by_writer) REQUIRE(pthread_create(&th, NULL, shut_later, &p) == 0);
    seen_t s = {.p = &p, .unit = 4};
    double t0 = now_s();
    CHECK(ccoip_shmpipe_read_each(&p, RING, 4, sink_check, &s) == CCOIP_SHMPIPE_CLOSED);
    double took = now_s() - t0;
    if (!by_writer) pthread_join(th, NULL);
    CHECK(s.bad == 0);
    CHECK_EQ_U64(s.next_at, RING / 2); /* every byte that came, once */
    CHECK(took > 0.08 && took < 1.0);
    fprintf(stderr, "shut mid-combine by the %s: CLOSED after %.0f ms, %zu bytes handed over\n",
            by_writer ? "writer's process" : "reader's other thread", took * 1e3, s.next_at);
    CHECK(writer_end(&wr) == 0);
    ccoip_shmpipe_close(&p);
}

int main(void) {
    if (!ccoip_shm_supported()) {
        fprintf(stderr, "no shared memory on this platform: nothing to test\n");
        return check_exit();
    }
    signal(SIGPIPE, SIG_IGN);
    alarm(120); /* a hang fails the test (SIGALRM) instead of waiting for Bazel's timeout */
    exact_bytes();
    every_dtype_op();
    corrupt_mid_combine();
    shut_mid_combine(0);
    shut_mid_combine(1);
    return check_exit();
}
