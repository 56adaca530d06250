/* threadpark_test.c: the threadpark contract, run against every implementation (futex, posix
 * fallback, and WaitOnAddress as a cross-compiled .exe under wine). Spurious returns are allowed,
 * so every check is on what the contract guarantees: a waiter that loops on the word always gets
 * out, nothing is lost, counts are exact, timeouts are neither early nor wildly late. */
#include "threadpark/threadpark.h"

#include <stdio.h>

#include "tests/common/check.h"
#include "tests/threadpark/tt_thread.h"

#define MS 1000000LL
#define SEC 1000000000LL

/* ---- ping-pong: two threads hand a turn back and forth; both sides park every time ---- */

#define ROUNDS 100000

enum { PARK, SPIN, COUNTED }; /* tpark_wait; tpark_wait_until_ne; the _counted helpers */
static const char *const mode_names[] = {"park", "spin, then park", "spin, then park, counted"};

typedef struct pingpong {
    uint32_t turn;     /* 0: ping may go, 1: pong may go */
    uint32_t sleepers; /* for the _counted helpers */
    uint64_t counter;  /* plain memory: handed over by the turn, never touched concurrently */
    uint64_t pongs;
    int mode;
} pingpong;

static void await_turn(pingpong *pp, uint32_t mine) {
    while (tpark_load(&pp->turn) != mine) {
        if (pp->mode == PARK) tpark_wait(&pp->turn, mine ^ 1u, -1);
        else if (pp->mode == SPIN) tpark_wait_until_ne(&pp->turn, mine ^ 1u);
        else tpark_wait_until_ne_counted(&pp->turn, mine ^ 1u, &pp->sleepers);
    }
}

static void pass_turn(pingpong *pp, uint32_t to) {
    if (pp->mode == COUNTED) {
        tpark_store_wake_one_counted(&pp->turn, to, &pp->sleepers);
        return;
    }
    tpark_store(&pp->turn, to);
    tpark_wake_one(&pp->turn);
}

static void pong_main(void *arg) {
    pingpong *pp = arg;
    for (int i = 0; i < ROUNDS; i++) {
        await_turn(pp, 1);
        pp->counter++;
        pp->pongs++;
        pass_turn(pp, 0);
    }
}

static void test_pingpong(int mode) {
    pingpong pp = {.turn = 0, .sleepers = 0, .counter = 0, .pongs = 0, .mode = mode};
    tt_thread t;
    REQUIRE(tt_start(&t, pong_main, &pp) == 0);
    uint64_t t0 = tt_now_ns();
    uint64_t pings = 0;
    for (int i = 0; i < ROUNDS; i++) {
        await_turn(&pp, 0);
        pp.counter++;
        pings++;
        pass_turn(&pp, 1);
    }
    await_turn(&pp, 0);
    tt_join(&t);
    double us = (double) (tt_now_ns() - t0) / 1e3 / ROUNDS;
    CHECK_EQ_U64(pings, ROUNDS);
    CHECK_EQ_U64(pp.pongs, ROUNDS);
    CHECK_EQ_U64(pp.counter, 2 * (uint64_t) ROUNDS);
    CHECK_EQ_U64(pp.sleepers, 0);
    fprintf(stderr, "pingpong (%s): %d round trips, %.2f us each\n", mode_names[mode], ROUNDS, us);
}

/* ---- a wake before the wait is never lost ---- */

static void test_wake_before_wait(void) {
    uint32_t word = 0;
    tpark_store(&word, 1);
    tpark_wake_one(&word); /* nobody is parked yet */
    tpark_wake_all(&word);
    uint64_t t0 = tt_now_ns();
    int rc = tpark_wait(&word, 0, 5 * SEC); /* the word is no longer 0: must return at once */
    uint64_t dt = tt_now_ns() - t0;
    CHECK_EQ_U64(rc, TPARK_OK);
    CHECK(dt < (uint64_t) (1 * SEC));
    /* A zero timeout only checks the word. */
    CHECK_EQ_U64(tpark_wait(&word, 0, 0), TPARK_OK);
    CHECK_EQ_U64(tpark_wait(&word, 1, 0), TPARK_TIMEOUT);
}

/* Racing version: the waker stores and wakes while the waiter is between reading the word and
 * parking. A lost wake would leave the waiter parked until its (long) timeout. */
#define RACES 20000

typedef struct race {
    uint32_t word;
    uint32_t ack;
    uint64_t timeouts;
} race;

static void race_waker(void *arg) {
    race *r = arg;
    for (uint32_t i = 1; i <= RACES; i++) {
        tpark_store(&r->word, i);
        tpark_wake_one(&r->word);
        while (tpark_load(&r->ack) != i) tpark_wait(&r->ack, i - 1, -1);
    }
}

static void test_wake_race(void) {
    race r = {0, 0, 0};
    tt_thread t;
    REQUIRE(tt_start(&t, race_waker, &r) == 0);
    for (uint32_t i = 1; i <= RACES; i++) {
        while (tpark_load(&r.word) != i)
            if (tpark_wait(&r.word, i - 1, 10 * SEC) == TPARK_TIMEOUT) r.timeouts++;
        tpark_store(&r.ack, i);
        tpark_wake_one(&r.ack);
    }
    tt_join(&t);
    CHECK_EQ_U64(r.timeouts, 0);
}

/* ---- timeouts: never early, not wildly late ---- */

static void test_timeout(int64_t timeout_ns) {
    uint32_t word = 7;
    int got = 0;
    /* Spurious returns may come first; the timed-out call itself must have waited long enough. */
    for (int i = 0; i < 1000 && !got; i++) {
        uint64_t t0 = tt_now_ns();
        int rc = tpark_wait(&word, 7, timeout_ns);
        uint64_t dt = tt_now_ns() - t0;
        if (rc != TPARK_TIMEOUT) continue;
        got = 1;
        CHECK(dt >= (uint64_t) timeout_ns);
        CHECK(dt < (uint64_t) (2 * SEC));
        fprintf(stderr, "timeout %.1f ms: returned after %.2f ms\n", (double) timeout_ns / 1e6, (double) dt / 1e6);
    }
    CHECK(got);
}

/* A timed wait that is woken returns TPARK_OK long before its timeout. */
typedef struct timed {
    uint32_t word;
    uint32_t parked;
    int rc;
    uint64_t waited_ns;
} timed;

static void timed_waiter(void *arg) {
    timed *w = arg;
    tpark_store(&w->parked, 1);
    uint64_t t0 = tt_now_ns();
    int rc = TPARK_OK;
    while (tpark_load(&w->word) == 0 && rc == TPARK_OK) rc = tpark_wait(&w->word, 0, 30 * SEC);
    w->waited_ns = tt_now_ns() - t0;
    w->rc = rc;
}

static void test_timed_wait_woken(void) {
    timed w = {0, 0, -1, 0};
    tt_thread t;
    REQUIRE(tt_start(&t, timed_waiter, &w) == 0);
    while (tpark_load(&w.parked) == 0) tt_sleep_ms(1);
    tt_sleep_ms(50);
    tpark_store(&w.word, 1);
    tpark_wake_one(&w.word);
    tt_join(&t);
    CHECK_EQ_U64(w.rc, TPARK_OK);
    CHECK(w.waited_ns < (uint64_t) (10 * SEC));
}

/* ---- wake_all releases every waiter ---- */

#define WAITERS 16

typedef struct crowd {
    uint32_t word;
    uint32_t ready;
    uint32_t released;
    uint32_t timeouts;
    uint32_t sleepers;
} crowd;

static void crowd_waiter(void *arg) {
    crowd *c = arg;
    __atomic_fetch_add(&c->ready, 1, __ATOMIC_ACQ_REL);
    while (tpark_load(&c->word) == 0)
        if (tpark_wait(&c->word, 0, 20 * SEC) == TPARK_TIMEOUT) __atomic_fetch_add(&c->timeouts, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->released, 1, __ATOMIC_ACQ_REL);
}

/* The same through the _counted helpers (no timeout there: a missed wake hangs the test). */
static void crowd_waiter_counted(void *arg) {
    crowd *c = arg;
    __atomic_fetch_add(&c->ready, 1, __ATOMIC_ACQ_REL);
    tpark_wait_until_ne_counted(&c->word, 0, &c->sleepers);
    __atomic_fetch_add(&c->released, 1, __ATOMIC_ACQ_REL);
}

static void test_wake_all(int counted) {
    for (int round = 0; round < 3; round++) {
        crowd c = {0, 0, 0, 0, 0};
        tt_thread t[WAITERS];
        for (int i = 0; i < WAITERS; i++)
            REQUIRE(tt_start(&t[i], counted ? crowd_waiter_counted : crowd_waiter, &c) == 0);
        while (tpark_load(&c.ready) != WAITERS) tt_sleep_ms(1);
        tt_sleep_ms(50); /* let them park (not guaranteed; those still running see the new word) */
        CHECK_EQ_U64(tpark_load(&c.released), 0);
        uint64_t t0 = tt_now_ns();
        if (counted) {
            tpark_store_wake_all_counted(&c.word, 1, &c.sleepers);
        } else {
            tpark_store(&c.word, 1);
            tpark_wake_all(&c.word); /* one call, no retries */
        }
        for (int i = 0; i < WAITERS; i++) tt_join(&t[i]);
        uint64_t dt = tt_now_ns() - t0;
        CHECK_EQ_U64(tpark_load(&c.released), WAITERS);
        CHECK_EQ_U64(c.timeouts, 0); /* a waiter the wake missed would only leave by timing out */
        CHECK(dt < (uint64_t) (10 * SEC));
        CHECK_EQ_U64(c.sleepers, 0);
    }
}

/* ---- wake_one: each wake with one token lets exactly one waiter through ----
 * The word counts tokens; a waiter leaves only by taking one with a CAS, so "exactly one" is the
 * protocol's doing, and what wake_one must provide is that a parked waiter gets to take it. */

#define ONE_WAITERS 4

static void token_waiter(void *arg) {
    crowd *c = arg;
    __atomic_fetch_add(&c->ready, 1, __ATOMIC_ACQ_REL);
    for (;;) {
        uint32_t tokens = tpark_load(&c->word);
        if (tokens > 0) {
            if (__atomic_compare_exchange_n(&c->word, &tokens, tokens - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                break;
            continue;
        }
        if (tpark_wait(&c->word, 0, 20 * SEC) == TPARK_TIMEOUT) __atomic_fetch_add(&c->timeouts, 1, __ATOMIC_RELAXED);
    }
    __atomic_fetch_add(&c->released, 1, __ATOMIC_ACQ_REL);
}

static int wait_released(crowd *c, uint32_t n, uint64_t limit_ns) {
    uint64_t t0 = tt_now_ns();
    while (tpark_load(&c->released) < n) {
        if (tt_now_ns() - t0 > limit_ns) return 0;
        tt_sleep_ms(1);
    }
    return 1;
}

static void test_wake_one(void) {
    crowd c = {0, 0, 0, 0, 0};
    tt_thread t[ONE_WAITERS];
    for (int i = 0; i < ONE_WAITERS; i++) REQUIRE(tt_start(&t[i], token_waiter, &c) == 0);
    while (tpark_load(&c.ready) != ONE_WAITERS) tt_sleep_ms(1);
    tt_sleep_ms(50);
    CHECK_EQ_U64(tpark_load(&c.released), 0);
    int ok = 1;
    for (uint32_t n = 1; n <= ONE_WAITERS && ok; n++) {
        __atomic_fetch_add(&c.word, 1, __ATOMIC_ACQ_REL);
        tpark_wake_one(&c.word);
        ok = wait_released(&c, n, 10 * SEC);
        CHECK(ok); /* one waiter got through ... */
        tt_sleep_ms(20);
        CHECK_EQ_U64(tpark_load(&c.released), n); /* ... and only one */
        CHECK_EQ_U64(tpark_load(&c.word), 0);
    }
    if (!ok) { /* let the others out so that the test ends */
        __atomic_fetch_add(&c.word, ONE_WAITERS, __ATOMIC_ACQ_REL);
        tpark_wake_all(&c.word);
    }
    for (int i = 0; i < ONE_WAITERS; i++) tt_join(&t[i]);
    CHECK_EQ_U64(c.timeouts, 0);
}

int main(void) {
    test_wake_before_wait();
    test_timeout(1 * MS);
    test_timeout(20 * MS);
    test_timed_wait_woken();
    test_pingpong(PARK);
    test_pingpong(SPIN);
    test_pingpong(COUNTED);
    test_wake_race();
    test_wake_all(0);
    test_wake_all(1);
    test_wake_one();
    return check_exit();
}
