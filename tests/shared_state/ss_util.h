/* ss_util.h: helpers of the shared-state end-to-end tests (header-only: each test is one file).
 * Peers are ss_peer processes (ss_peer.c) driven through tests/ccoip/harness. */
#ifndef SS_UTIL_H
#define SS_UTIL_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "pccl.h"
#include "tests/common/check.h"

#ifndef SS_T
#define SS_T 60000 /* ms: the longest any single answer may take (a benchmark moving GiBs sets more) */
#endif

typedef struct ss_sync_t {
    int result;
    unsigned long long revision, tx, rx, ms;
} ss_sync_t;

/* Sends one command and requires an answer; returns the answer's first number. */
static inline int ss_cmd(h_proc_t *p, char *line, size_t n, const char *fmt, ...) {
    char cmd[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    REQUIRE(h_send(p, cmd));
    if (!h_read_line(p, line, n, SS_T)) {
        fprintf(stderr, "no answer to '%s'\n", cmd);
        exit(1);
    }
    const char *sp = strchr(line, ' ');
    return sp == NULL ? -999 : atoi(sp + 1);
}

/* The accepted peers' pending vote, repeated until the master has registered a newcomer (it does
 * so a moment after the newcomer's connect); then a little more for the others started with it. */
static inline void ss_await_pending(h_proc_t *acc, int na) {
    char line[256];
    for (int waited = 0;; waited += 20) {
        REQUIRE(waited < SS_T);
        for (int i = 0; i < na; i++) REQUIRE(h_send(&acc[i], "pending"));
        int seen = 0;
        for (int i = 0; i < na; i++) {
            REQUIRE(h_read_line(&acc[i], line, sizeof line, SS_T));
            seen += strcmp(line, "pending 0 1") == 0;
        }
        if (seen == na) break;
        usleep(20000);
    }
    usleep(200000);
}

/* Starts n peers and admits them all: the first alone, the rest in one topology round. */
static inline void ss_start_peers(h_proc_t *p, int n, const char *bin, int port) {
    char line[256];
    for (int i = 0; i < n; i++) REQUIRE(h_start_peer(&p[i], bin, port, 0));
    REQUIRE(ss_cmd(&p[0], line, sizeof line, "connect") == 0);
    if (n == 1) return;
    for (int i = 1; i < n; i++) REQUIRE(h_send(&p[i], "connect"));
    ss_await_pending(p, 1); /* let them register before the vote */
    REQUIRE(ss_cmd(&p[0], line, sizeof line, "update") == 0);
    for (int i = 1; i < n; i++) {
        REQUIRE(h_read_line(&p[i], line, sizeof line, SS_T));
        REQUIRE(strcmp(line, "connect 0") == 0);
    }
}

/* Admits newcomers (already started) with a vote of the accepted peers. */
static inline void ss_admit(h_proc_t *acc, int na, h_proc_t *newp, int nn) {
    char line[256];
    for (int i = 0; i < nn; i++) REQUIRE(h_send(&newp[i], "connect"));
    ss_await_pending(acc, na);
    for (int i = 0; i < na; i++) REQUIRE(h_send(&acc[i], "update"));
    for (int i = 0; i < na; i++) {
        REQUIRE(h_read_line(&acc[i], line, sizeof line, SS_T));
        REQUIRE(strcmp(line, "update 0") == 0);
    }
    for (int i = 0; i < nn; i++) {
        REQUIRE(h_read_line(&newp[i], line, sizeof line, SS_T));
        REQUIRE(strcmp(line, "connect 0") == 0);
    }
}

/* Every peer of p[0..n) calls sync with its strategy at once; answers land in out[]. */
static inline void ss_sync_all(h_proc_t **p, int n, const int *strategy, ss_sync_t *out) {
    char line[256];
    for (int i = 0; i < n; i++) {
        snprintf(line, sizeof line, "sync %d", strategy == NULL ? 0 : strategy[i]);
        REQUIRE(h_send(p[i], line));
    }
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].result = -999;
        if (!h_read_line(p[i], line, sizeof line, SS_T)) {
            fprintf(stderr, "peer %d: no sync answer\n", i);
            exit(1);
        }
        sscanf(line, "sync %d %llu %llu %llu %llu", &out[i].result, &out[i].revision, &out[i].tx, &out[i].rx, &out[i].ms);
    }
}

/* Every peer's "hash" answer, compared with the first one's. */
static inline bool ss_same_hash(h_proc_t **p, int n) {
    char first[256], line[256];
    ss_cmd(p[0], first, sizeof first, "hash");
    bool same = true;
    for (int i = 1; i < n; i++) {
        ss_cmd(p[i], line, sizeof line, "hash");
        same = same && strcmp(line, first) == 0;
    }
    return same;
}

static inline void ss_quit(h_proc_t *p) {
    h_send(p, "quit");
    CHECK_EQ_U64(h_wait(p, SS_T), 0);
}

#endif /* SS_UTIL_H */
