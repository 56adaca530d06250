/* topo_util.h: helpers of the pcclOptimizeTopology end-to-end tests (header-only). Peers are
 * topo_peer processes (topo_peer.c) driven through tests/ccoip/harness. */
#ifndef TOPO_UTIL_H
#define TOPO_UTIL_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define TOPO_T 30000 /* ms: the longest any single answer may take */

typedef struct topo_peer_t {
    h_proc_t p;
    char uuid[33], next[33], prev[33];
} topo_peer_t;

/* Sends one command and requires an answer line; returns its first number. */
static inline int topo_cmd(topo_peer_t *t, char *line, size_t n, const char *fmt, ...) {
    char cmd[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    REQUIRE(h_send(&t->p, cmd));
    if (!h_read_line(&t->p, line, n, TOPO_T)) {
        fprintf(stderr, "no answer to '%s'\n", cmd);
        exit(1);
    }
    const char *sp = strchr(line, ' ');
    return sp == NULL ? -999 : atoi(sp + 1);
}

static inline void topo_send_all(topo_peer_t **t, int n, const char *cmd) {
    for (int i = 0; i < n; i++) REQUIRE(h_send(&t[i]->p, cmd));
}

/* Reads every peer's answer to a command sent with topo_send_all; out[i] = its first number. */
static inline void topo_read_all(topo_peer_t **t, int n, char lines[][256], int *out) {
    for (int i = 0; i < n; i++) {
        if (!h_read_line(&t[i]->p, lines[i], 256, TOPO_T)) {
            fprintf(stderr, "peer %d: no answer\n", i);
            exit(1);
        }
        const char *sp = strchr(lines[i], ' ');
        out[i] = sp == NULL ? -999 : atoi(sp + 1);
    }
}

/* Every peer of t[0..n) calls pcclOptimizeTopology at once; each must return 0. Returns the
 * measurements they made in all (topo_peer's "optimize RESULT MEASURED MS"). */
static inline unsigned long long topo_optimize_all(topo_peer_t **t, int n) {
    char lines[n][256];
    int res[n];
    topo_send_all(t, n, "optimize");
    topo_read_all(t, n, lines, res);
    unsigned long long sum = 0;
    for (int i = 0; i < n; i++) {
        unsigned long long m = 0;
        sscanf(lines[i], "optimize %*d %llu", &m);
        sum += m;
        CHECK_EQ_U64(res[i], 0);
    }
    fprintf(stderr, "optimize: %llu directed pairs measured; %s\n", sum, lines[0]);
    return sum;
}

/* The accepted peers' pending vote, repeated until the master has registered a newcomer (it does
 * so a moment after the newcomer's connect); then a little more for the others started with it. */
static inline void topo_await_pending(topo_peer_t **acc, int na) {
    char line[256];
    for (int waited = 0;; waited += 20) {
        REQUIRE(waited < TOPO_T);
        for (int i = 0; i < na; i++) REQUIRE(h_send(&acc[i]->p, "pending"));
        int seen = 0;
        for (int i = 0; i < na; i++) {
            REQUIRE(h_read_line(&acc[i]->p, line, sizeof line, TOPO_T));
            seen += strcmp(line, "pending 0 1") == 0;
        }
        if (seen == na) break;
        usleep(20000);
    }
    usleep(200000);
}

/* Connect: the first connects alone (when alone), the rest are admitted by a vote of `acc`. */
static inline void topo_admit(topo_peer_t **acc, int na, topo_peer_t **newp, int nn) {
    char line[256];
    for (int i = 0; i < nn; i++) REQUIRE(h_send(&newp[i]->p, "connect"));
    if (na > 0) {
        topo_await_pending(acc, na); /* let them register before the vote */
        for (int i = 0; i < na; i++) REQUIRE(h_send(&acc[i]->p, "update"));
        for (int i = 0; i < na; i++) {
            REQUIRE(h_read_line(&acc[i]->p, line, sizeof line, TOPO_T));
            REQUIRE(strcmp(line, "update 0") == 0);
        }
    }
    for (int i = 0; i < nn; i++) {
        REQUIRE(h_read_line(&newp[i]->p, line, sizeof line, TOPO_T));
        REQUIRE(sscanf(line, "connect 0 %32s", newp[i]->uuid) == 1);
    }
}

/* Reads every peer's ring neighbours and checks that they form one ring over exactly these
 * peers: next is a member, next's prev is us, and following next visits everyone once. */
static inline bool topo_ring_valid(topo_peer_t **t, int n) {
    char line[256];
    for (int i = 0; i < n; i++) {
        topo_cmd(t[i], line, sizeof line, "ring");
        char me[33];
        REQUIRE(sscanf(line, "ring %32s %32s %32s", me, t[i]->next, t[i]->prev) == 3);
        CHECK(strcmp(me, t[i]->uuid) == 0);
    }
    int at = 0, steps = 0;
    bool ok = true;
    do {
        int nx = -1;
        for (int k = 0; k < n; k++)
            if (strcmp(t[k]->uuid, t[at]->next) == 0) nx = k;
        if (nx < 0 || strcmp(t[nx]->prev, t[at]->uuid) != 0) {
            ok = false;
            break;
        }
        at = nx;
        steps++;
    } while (at != 0 && steps <= n);
    ok = ok && at == 0 && steps == n;
    if (!ok) fprintf(stderr, "ring of %d peers is not valid\n", n);
    return ok;
}

/* Index (into t) of the peer whose uuid is u, or -1. */
static inline int topo_index(topo_peer_t **t, int n, const char *u) {
    for (int i = 0; i < n; i++)
        if (strcmp(t[i]->uuid, u) == 0) return i;
    return -1;
}

/* An all-reduce on every peer at once (peer i of n contributes (i + 1) * (j % 7 + 1)): true when
 * all succeed with exact sums; *ms gets the slowest peer's time per op. */
static inline bool topo_allreduce(topo_peer_t **t, int n, size_t count, int iters, double *ms) {
    static unsigned long long tag = 1; /* every peer of one op must use the same tag */
    char cmd[100], lines[64][256];
    int res[64];
    for (int i = 0; i < n; i++) {
        snprintf(cmd, sizeof cmd, "allreduce %zu %d %d %d %llu", count, iters, i, n, tag);
        REQUIRE(h_send(&t[i]->p, cmd));
    }
    tag += (unsigned long long) iters;
    topo_read_all(t, n, lines, res);
    bool ok = true;
    double worst = 0;
    for (int i = 0; i < n; i++) {
        char verdict[8] = "";
        double m = 0;
        sscanf(lines[i], "allreduce %*d %7s %lf", verdict, &m);
        if (res[i] != 0 || strcmp(verdict, "OK") != 0) {
            fprintf(stderr, "peer %d: %s\n", i, lines[i]);
            ok = false;
        }
        if (m > worst) worst = m;
    }
    if (ms != NULL) *ms = worst;
    return ok;
}

static inline void topo_quit(topo_peer_t *t) {
    h_send(&t->p, "quit");
    CHECK_EQ_U64(h_wait(&t->p, TOPO_T), 0);
}

#endif /* TOPO_UTIL_H */
