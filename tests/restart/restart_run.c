/* restart_run.c: see restart_run.h. */
#include "tests/restart/restart_run.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t rr_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

bool rr_start_master(rr_run_t *r, const char *die) {
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", r->port);
    snprintf(r->log, sizeof r->log, "%s/master%d.log", r->dir, r->starts++);
    if (die != NULL) setenv("PCCL_MASTER_TEST_DIE", die, 1);
    char *argv[] = {(char *) r->master_bin, "--listen", listen, "--log-level", "info", NULL};
    h_stderr_path = r->log;
    bool ok = h_spawn(&r->master, argv);
    unsetenv("PCCL_MASTER_TEST_DIE");
    char line[256];
    if (!ok || !h_read_line(&r->master, line, sizeof line, 20000)) return false;
    const char *colon = strrchr(line, ':');
    int port = colon == NULL ? 0 : atoi(colon + 1);
    if (port <= 0 || (r->port != 0 && port != r->port)) return false;
    r->port = port;
    return true;
}

bool rr_start_peers(rr_run_t *r, int n, int steps) {
    char addr[64], shard[16], st[16], world[16];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", r->port);
    snprintf(st, sizeof st, "%d", steps);
    snprintf(world, sizeof world, "%d", n);
    r->npeers = n;
    for (int i = 0; i < n; i++) {
        rr_peer_t *p = &r->peers[i];
        memset(p, 0, sizeof *p);
        p->calls = calloc(RR_MAX_CALLS, sizeof *p->calls);
        snprintf(shard, sizeof shard, "%d", i);
        char *argv[] = {(char *) r->peer_bin, addr, shard, st, world, NULL};
        if (p->calls == NULL || !h_spawn(&p->proc, argv)) return false;
    }
    return true;
}

static void take_line(rr_peer_t *p, const char *line) {
    snprintf(p->recent[p->nrecent++ % RR_KEEP], sizeof p->recent[0], "%.127s", line);
    unsigned step;
    char call[16];
    int res, world;
    unsigned long long hash;
    if (sscanf(line, "call %u %15s %d %d %llx", &step, call, &res, &world, &hash) == 5 && p->ncalls < RR_MAX_CALLS) {
        if (res == 0) snprintf(p->calls[p->ncalls++], sizeof p->calls[0], "%u %s ok %d %016llx", step, call, world, hash);
        else snprintf(p->calls[p->ncalls++], sizeof p->calls[0], "%u %s failed %d #%d", step, call, world, res);
    } else if (sscanf(line, "step %u", &step) == 1) {
        p->step = (int) step;
    } else if (strncmp(line, "done ", 5) == 0 || strncmp(line, "gave up", 7) == 0) {
        p->done = true;
        snprintf(p->end, sizeof p->end, "%.127s", line);
    }
}

int rr_pump(rr_run_t *r, int ms, const char *want, int who, int min) {
    int64_t end = rr_now_ms() + ms;
    do {
        for (int i = 0; i < r->npeers; i++) {
            char line[256];
            while (h_read_line(&r->peers[i].proc, line, sizeof line, 1)) {
                take_line(&r->peers[i], line);
                if (want != NULL && (who < 0 || who == i) && strncmp(line, want, strlen(want)) == 0 &&
                    atoi(line + strlen(want)) >= min)
                    return i;
            }
        }
    } while (rr_now_ms() < end);
    return -1;
}

static bool all_done(const rr_run_t *r) {
    for (int i = 0; i < r->npeers; i++)
        if (!r->peers[i].done) return false;
    return true;
}

bool rr_finish(rr_run_t *r, int timeout_ms) {
    int64_t end = rr_now_ms() + timeout_ms;
    while (!all_done(r) && rr_now_ms() < end) rr_pump(r, 100, NULL, -1, 0);
    if (all_done(r)) return true;
    fprintf(stderr, "restart: the peers did not finish within %d ms\n", timeout_ms);
    rr_dump(r);
    return false;
}

/* The k-th successful call of p, or NULL. */
static const char *nth_ok(const rr_peer_t *p, int k) {
    for (int i = 0; i < p->ncalls; i++)
        if (strstr(p->calls[i], " ok ") != NULL && k-- == 0) return p->calls[i];
    return NULL;
}

/* A split is a collective that succeeded on one member and failed on another: the one that
 * failed redoes the step while the others go on, so the successful calls of the members stop
 * pairing up (a different step, a different hash). Failed attempts that nobody passed (a call
 * that reached a master killed before it decided anything, retried with the others' next one)
 * leave no trace in the state: they may differ in number. */
/* Two call lines ("STEP CALL RESULT WORLD HASH") agree. WORLD is left out: it is read after the
 * call, and a call that a restarted master confirmed (C2M_COLLECTIVE_QUERY, _SHARED_STATE_QUERY)
 * returns while another member may not have rejoined yet; HASH says whether the results agree
 * (an all-reduce over another group would differ). */
static bool same_call(const char *x, const char *y) {
    char cx[16], cy[16], rx[8], ry[8], hx[24], hy[24];
    unsigned sx, sy;
    int wx, wy;
    if (sscanf(x, "%u %15s %7s %d %23s", &sx, cx, rx, &wx, hx) != 5 ||
        sscanf(y, "%u %15s %7s %d %23s", &sy, cy, ry, &wy, hy) != 5)
        return strcmp(x, y) == 0;
    return sx == sy && strcmp(cx, cy) == 0 && strcmp(rx, ry) == 0 && strcmp(hx, hy) == 0;
}

bool rr_same_calls(const rr_run_t *r) {
    for (int i = 1; i < r->npeers; i++) {
        const rr_peer_t *a = &r->peers[0], *b = &r->peers[i];
        for (int k = 0;; k++) {
            const char *x = nth_ok(a, k), *y = nth_ok(b, k);
            if (x == NULL && y == NULL) break;
            if (x != NULL && y != NULL && same_call(x, y)) continue;
            fprintf(stderr, "restart: successful call %d differs: peer 0 \"%s\", peer %d \"%s\"\n", k, x ? x : "none", i,
                    y ? y : "none");
            for (int w = 0; w < 2; w++) { /* every call of both around it, failed ones too */
                const rr_peer_t *p = w == 0 ? a : b;
                const char *at = w == 0 ? x : y;
                int j = 0;
                while (j < p->ncalls && p->calls[j] != at) j++;
                for (int m = j > 6 ? j - 6 : 0; m < j + 3 && m < p->ncalls; m++)
                    fprintf(stderr, "restart:   peer %d call %d: %s\n", w == 0 ? 0 : i, m, p->calls[m]);
            }
            return false;
        }
    }
    return true;
}

bool rr_succeeded(const rr_run_t *r, int peer, int step, const char *call, int k) {
    const rr_peer_t *p = &r->peers[peer];
    for (int i = 0; i < p->ncalls; i++) {
        unsigned s;
        char c[16], res[8];
        if (sscanf(p->calls[i], "%u %15s %7s", &s, c, res) == 3 && (int) s == step && strcmp(c, call) == 0 && k-- == 0)
            return strcmp(res, "ok") == 0;
    }
    return false;
}

void rr_dump(const rr_run_t *r) {
    for (int i = 0; i < r->npeers; i++) {
        const rr_peer_t *p = &r->peers[i];
        for (int k = p->nrecent > RR_KEEP ? p->nrecent - RR_KEEP : 0; k < p->nrecent; k++)
            fprintf(stderr, "restart: peer %d said: %s\n", i, p->recent[k % RR_KEEP]);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "tail -n 30 %s 1>&2", r->log);
    if (system(cmd) != 0) fprintf(stderr, "restart: no master log\n");
}

void rr_stop(rr_run_t *r) {
    for (int i = 0; i < r->npeers; i++) {
        h_kill(&r->peers[i].proc, SIGKILL);
        h_wait(&r->peers[i].proc, 5000);
        free(r->peers[i].calls);
        r->peers[i].calls = NULL;
    }
    h_kill(&r->master, SIGKILL);
    h_wait(&r->master, 5000);
}
