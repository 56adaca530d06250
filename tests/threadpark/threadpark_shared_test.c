/* threadpark_shared_test: park/unpark on a word shared between two real processes
 * (threadpark/threadpark_shared.h), the word mapped at a different address in each.
 *
 * Where tpark_shared_available() (Linux's futex without FUTEX_PRIVATE_FLAG): a ping-pong of
 * ROUNDS rounds in which each side parks until the other bumps the word and wakes it (exact
 * counts on both sides, every value seen in order), a timed wait that times out (no sooner than
 * asked, and not much later) while the other process lives but does not wake, a timed wait that
 * the other process wakes long before its timeout, a wake with nobody parked (remembered by no
 * one: a later wait still times out), and a wait whose word no longer holds `expected` (returns
 * at once, also with no timeout).
 *
 * Where it is not (the posix fallback built on Linux as threadpark_shared_fallback; the win32
 * variant under wine, win32_wine_test.sh): what the header promises instead. A
 * mismatch returns at once, a timed wait sleeps its timeout, an endless one at most a second, and
 * a wake does nothing: the ping-pong is not run, since a wake from another process is not seen
 * there (tpark_shared_available() is false and nothing uses the calls). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tests/common/check.h"
#include "threadpark/threadpark_shared.h"

#ifdef _WIN32
#include <windows.h>
#else
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#define ROUNDS 2000
#define MS 1000000LL

static double now_ms(void) {
#ifdef _WIN32
    LARGE_INTEGER f, c;
    QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    return (double) c.QuadPart * 1000.0 / (double) f.QuadPart;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec * 1e-6;
#endif
}

/* Waits on a word that holds something else: returns at once, whatever the timeout. */
static void check_mismatch(uint32_t *word) {
    tpark_store(word, 7);
    double t0 = now_ms();
    CHECK(tpark_wait_shared(word, 8, -1) == TPARK_OK);
    CHECK(tpark_wait_shared(word, 8, 5000 * MS) == TPARK_OK);
    double took = now_ms() - t0;
    CHECK(took < 50);
    if (took >= 50) fprintf(stderr, "mismatched waits took %.1f ms\n", took);
}

/* A timed wait that nobody wakes: TPARK_TIMEOUT, after the timeout and well before 10 x it. A wake
 * before it, with nobody parked, changes nothing. */
static void check_timeout(uint32_t *word) {
    tpark_store(word, 3);
    tpark_wake_shared(word);
    double t0 = now_ms();
    int rc = tpark_wait_shared(word, 3, 100 * MS);
    double took = now_ms() - t0;
    /* A futex may return early (spuriously) only with TPARK_OK; a timeout means the time passed.
     * 1 ms of slack for the clocks' granularity (Sleep() under wine). */
    CHECK(rc == TPARK_TIMEOUT);
    CHECK(took >= 99);
    CHECK(took < 1000);
    if (rc != TPARK_TIMEOUT || took < 99 || took >= 1000) fprintf(stderr, "100 ms wait: rc %d after %.1f ms\n", rc, took);
    CHECK_EQ_U64(tpark_load(word), 3);
}

/* Unavailable: an endless wait is a poll of at most a second, not a hang. */
static void check_unavailable(uint32_t *word) {
    CHECK(!tpark_shared_available());
    tpark_store(word, 5);
    double t0 = now_ms();
    CHECK(tpark_wait_shared(word, 5, -1) == TPARK_TIMEOUT);
    double took = now_ms() - t0;
    CHECK(took >= 999 && took < 3000);
    if (took < 999 || took >= 3000) fprintf(stderr, "endless wait (unavailable) took %.1f ms\n", took);
}

#ifndef _WIN32

/* The page both processes map: each maps it on its own, so the word's addresses differ. */
typedef struct shared {
    uint32_t ball;         /* the ping-pong: odd after the parent's turn, even after the child's */
    uint32_t child_rounds; /* rounds the child played */
    uint32_t child_bad;    /* values the child saw out of order */
    uint32_t gate;         /* the timed-wait checks: the child parks here */
    uint32_t child_rc;     /* the child's result of its timed wait (TPARK_OK + 1: woken) */
    uint32_t child_ready;
} shared_t;

static shared_t *map_shared(int fd) {
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REQUIRE(p != MAP_FAILED);
    return p;
}

/* The child maps the memory anew (another address) and plays its side of each check. */
static int child_main(int fd, const shared_t *parent_view) {
    shared_t *s = map_shared(fd);
    if ((const void *) s == (const void *) parent_view) return 20; /* the test would prove less */
    for (uint32_t r = 0; r < ROUNDS; r++) {
        uint32_t want = 2 * r + 1, v;
        while ((v = tpark_load(&s->ball)) == 2 * r) tpark_wait_shared(&s->ball, 2 * r, -1);
        if (v != want) __atomic_fetch_add(&s->child_bad, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&s->child_rounds, r + 1, __ATOMIC_RELAXED);
        tpark_store(&s->ball, want + 1);
        tpark_wake_shared(&s->ball);
    }
    /* Woken by the parent long before a 20 s timeout. */
    tpark_store(&s->child_ready, 1);
    tpark_wake_shared(&s->child_ready);
    int rc = TPARK_OK;
    while (tpark_load(&s->gate) == 0 && rc == TPARK_OK) rc = tpark_wait_shared(&s->gate, 0, 20000 * MS);
    tpark_store(&s->child_rc, (uint32_t) rc + 1);
    tpark_wake_shared(&s->child_rc);
    return 0;
}

/* Parks (endlessly: the alarm bounds the test) until *word != value. */
static uint32_t await_change(uint32_t *word, uint32_t value) {
    uint32_t v;
    while ((v = tpark_load(word)) == value) tpark_wait_shared(word, value, -1);
    return v;
}

static void check_between_processes(void) {
    FILE *f = tmpfile(); /* an unnamed file: nothing to clean up */
    REQUIRE(f != NULL);
    int fd = fileno(f);
    REQUIRE(ftruncate(fd, 4096) == 0);
    shared_t *s = map_shared(fd);
    memset(s, 0, sizeof *s);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(child_main(fd, s));

    /* The ping-pong: ROUNDS round trips, each a park on both sides (no spin). */
    double t0 = now_ms();
    uint32_t bad = 0;
    for (uint32_t r = 0; r < ROUNDS; r++) {
        tpark_store(&s->ball, 2 * r + 1);
        tpark_wake_shared(&s->ball);
        if (await_change(&s->ball, 2 * r + 1) != 2 * r + 2) bad++;
    }
    double took = now_ms() - t0;
    CHECK_EQ_U64(bad, 0);
    CHECK_EQ_U64(tpark_load(&s->ball), 2 * ROUNDS);
    CHECK_EQ_U64(__atomic_load_n(&s->child_rounds, __ATOMIC_RELAXED), ROUNDS);
    CHECK_EQ_U64(__atomic_load_n(&s->child_bad, __ATOMIC_RELAXED), 0);
    fprintf(stderr, "ping-pong: %d round trips in %.1f ms\n", ROUNDS, took);

    /* Our timed wait times out while the child lives (parked on another word). */
    await_change(&s->child_ready, 0);
    check_timeout(&s->ball);

    /* The child's 20 s wait, woken from here after 50 ms. */
    usleep(50000);
    t0 = now_ms();
    tpark_store(&s->gate, 1);
    tpark_wake_shared(&s->gate);
    CHECK_EQ_U64(await_change(&s->child_rc, 0), TPARK_OK + 1);
    took = now_ms() - t0;
    CHECK(took < 2000);
    fprintf(stderr, "a parked process woken in %.3f ms\n", took);

    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    munmap(s, 4096);
    fclose(f);
}

#endif /* !_WIN32 */

int main(void) {
#ifndef _WIN32
    alarm(60); /* an endless wait that is never woken fails the test, it does not hang it */
#endif
    static uint32_t local[16];
    check_mismatch(&local[0]);
    check_timeout(&local[1]);
    if (tpark_shared_available()) {
#ifndef _WIN32
        check_between_processes();
#else
        CHECK(!"win32 has no wait across processes");
#endif
    } else {
        check_unavailable(&local[2]);
    }
    return check_exit();
}
