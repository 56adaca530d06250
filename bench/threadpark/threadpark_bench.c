/* threadpark_bench: round-trip latency of a two-thread ping-pong, threadpark vs a pthread mutex +
 * condvar, in the same run. Each side waits for its turn, takes it, and hands it back; one round
 * trip is two hand-overs. Reported value: the median over REPS repetitions of the mean round trip.
 *
 * Rows (CSV on stdout, name,value,unit,baseline,ratio):
 *   threadpark/futex_roundtrip       tpark_wait/tpark_wake_one, both sides park every time
 *                                    baseline: mutex + condvar, both sides park every time
 *   threadpark/fallback_roundtrip    the same through the posix fallback (threadpark_posix.c)
 *                                    baseline: the same mutex + condvar measurement
 *   threadpark/futex_spin_roundtrip  tpark_wait_until_ne (bounded spin, then park); the waker
 *                                    always calls tpark_wake_one (a system call)
 *                                    baseline: mutex + condvar behind the same bounded spin
 *   threadpark/futex_spin_counted_roundtrip  the _counted helpers: the same spin, and the waker
 *                                    calls into the kernel only when the other side sleeps
 *                                    baseline: the same mutex + condvar behind the spin
 * The condvar already skips the kernel when nobody waits (glibc counts waiters), so the counted
 * row is the like-for-like one among the spinning variants.
 * A human-readable table with min/median/max goes to stderr. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "threadpark/threadpark.h"

/* The posix fallback, linked into this binary under other names (see BUILD.bazel). */
int tpark_fallback_wait(const uint32_t *word, uint32_t expected, int64_t timeout_ns);
void tpark_fallback_wake_one(const uint32_t *word);

#define REPS 7
#define WARMUP 1000
#define ROUNDS 10000

typedef struct pingpong pingpong;

typedef struct variant {
    const char *name;
    void (*await_turn)(pingpong *pp, uint32_t mine);
    void (*pass_turn)(pingpong *pp, uint32_t to);
} variant;

struct pingpong {
    uint32_t turn; /* 0: main thread's turn, 1: the partner's; always accessed atomically */
    uint32_t sleepers;
    const variant *v;
    pthread_mutex_t mutex;
    pthread_cond_t cond[2]; /* one per side, so that a signal always reaches the right thread */
};

/* threadpark, parking every time */
static void tp_await(pingpong *pp, uint32_t mine) {
    while (tpark_load(&pp->turn) != mine) tpark_wait(&pp->turn, mine ^ 1u, -1);
}
static void tp_pass(pingpong *pp, uint32_t to) {
    tpark_store(&pp->turn, to);
    tpark_wake_one(&pp->turn);
}

/* threadpark, bounded spin then park */
static void tp_spin_await(pingpong *pp, uint32_t mine) {
    while (tpark_load(&pp->turn) != mine) tpark_wait_until_ne(&pp->turn, mine ^ 1u);
}

/* threadpark, bounded spin then park, wake only when someone sleeps */
static void tp_counted_await(pingpong *pp, uint32_t mine) {
    while (tpark_load(&pp->turn) != mine) tpark_wait_until_ne_counted(&pp->turn, mine ^ 1u, &pp->sleepers);
}
static void tp_counted_pass(pingpong *pp, uint32_t to) { tpark_store_wake_one_counted(&pp->turn, to, &pp->sleepers); }

/* the posix fallback, parking every time */
static void fb_await(pingpong *pp, uint32_t mine) {
    while (tpark_load(&pp->turn) != mine) tpark_fallback_wait(&pp->turn, mine ^ 1u, -1);
}
static void fb_pass(pingpong *pp, uint32_t to) {
    tpark_store(&pp->turn, to);
    tpark_fallback_wake_one(&pp->turn);
}

/* mutex + condvar, the textbook way */
static void cv_await(pingpong *pp, uint32_t mine) {
    pthread_mutex_lock(&pp->mutex);
    while (tpark_load(&pp->turn) != mine) pthread_cond_wait(&pp->cond[mine], &pp->mutex);
    pthread_mutex_unlock(&pp->mutex);
}
static void cv_pass(pingpong *pp, uint32_t to) {
    pthread_mutex_lock(&pp->mutex);
    tpark_store(&pp->turn, to);
    pthread_cond_signal(&pp->cond[to]);
    pthread_mutex_unlock(&pp->mutex);
}

/* mutex + condvar behind the same bounded spin as tpark_wait_until_ne */
static void cv_spin_await(pingpong *pp, uint32_t mine) {
    for (int i = 0; i < TPARK_SPIN_ITERS; i++) {
        if (tpark_load(&pp->turn) == mine) return;
        tpark_cpu_relax();
    }
    cv_await(pp, mine);
}

static const variant v_futex = {"futex", tp_await, tp_pass};
static const variant v_fallback = {"fallback", fb_await, fb_pass};
static const variant v_condvar = {"condvar", cv_await, cv_pass};
static const variant v_futex_spin = {"futex_spin", tp_spin_await, tp_pass};
static const variant v_condvar_spin = {"condvar_spin", cv_spin_await, cv_pass};
static const variant v_futex_counted = {"futex_counted", tp_counted_await, tp_counted_pass};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static void *partner_main(void *arg) {
    pingpong *pp = arg;
    for (int i = 0; i < WARMUP + ROUNDS; i++) {
        pp->v->await_turn(pp, 1);
        pp->v->pass_turn(pp, 0);
    }
    return NULL;
}

/* One repetition: the mean round trip in microseconds. */
static double run_once(const variant *v) {
    pingpong pp = {.turn = 0, .sleepers = 0, .v = v};
    pthread_mutex_init(&pp.mutex, NULL);
    pthread_cond_init(&pp.cond[0], NULL);
    pthread_cond_init(&pp.cond[1], NULL);
    pthread_t t;
    if (pthread_create(&t, NULL, partner_main, &pp) != 0) {
        fprintf(stderr, "threadpark_bench: pthread_create failed\n");
        exit(1);
    }
    double t0 = 0;
    for (int i = 0; i < WARMUP + ROUNDS; i++) {
        if (i == WARMUP) t0 = now_s();
        v->pass_turn(&pp, 1);
        v->await_turn(&pp, 0);
    }
    double us = (now_s() - t0) * 1e6 / ROUNDS;
    pthread_join(t, NULL);
    pthread_cond_destroy(&pp.cond[0]);
    pthread_cond_destroy(&pp.cond[1]);
    pthread_mutex_destroy(&pp.mutex);
    return us;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

typedef struct result {
    const variant *v;
    double us[REPS]; /* sorted after the run */
} result;

static double median(const result *r) { return r->us[REPS / 2]; }

static void emit(const char *name, const result *r, const result *base) {
    printf("threadpark/%s,%.3f,us,%.3f,%.3f\n", name, median(r), median(base), median(r) / median(base));
}

int main(void) {
    result res[] = {{&v_futex, {0}}, {&v_fallback, {0}}, {&v_condvar, {0}},
                    {&v_futex_spin, {0}}, {&v_condvar_spin, {0}}, {&v_futex_counted, {0}}};
    const size_t n = sizeof res / sizeof res[0];
    /* Interleave the variants in every repetition, so that a change in machine load hits all alike. */
    for (int rep = 0; rep < REPS; rep++)
        for (size_t k = 0; k < n; k++) res[k].us[rep] = run_once(res[k].v);
    fprintf(stderr, "%-14s %10s %10s %10s   (round trip, us; %d reps x %d round trips)\n", "variant", "min",
            "median", "max", REPS, ROUNDS);
    for (size_t k = 0; k < n; k++) {
        qsort(res[k].us, REPS, sizeof(double), cmp_double);
        fprintf(stderr, "%-14s %10.2f %10.2f %10.2f\n", res[k].v->name, res[k].us[0], median(&res[k]),
                res[k].us[REPS - 1]);
    }
    emit("futex_roundtrip", &res[0], &res[2]);
    emit("fallback_roundtrip", &res[1], &res[2]);
    emit("futex_spin_roundtrip", &res[3], &res[4]);
    emit("futex_spin_counted_roundtrip", &res[5], &res[4]);
    return 0;
}
