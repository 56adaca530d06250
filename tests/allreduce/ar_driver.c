/* ar_driver.c: see ar_driver.h. */
#include "tests/allreduce/ar_driver.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t ard_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

bool ard_update(ard_t *a) { return h_update_all(a->peers, a->n); }

bool ard_add_peer(ard_t *a) {
    if (a->n >= ARD_MAX) return false;
    h_proc_t *p = &a->peers[a->n];
    char port[16];
    snprintf(port, sizeof port, "%d", a->port);
    char *argv[] = {(char *) a->peer_bin, port, NULL};
    if (!h_spawn(p, argv) || !h_send(p, "connect") || !h_admit(a->peers, a->n, p)) return false;
    a->seeds[a->n++] = a->next_seed++;
    return true;
}

bool ard_start(ard_t *a, const char *master_bin, const char *peer_bin, int n) {
    memset(a, 0, sizeof *a);
    a->peer_bin = peer_bin;
    a->next_seed = 1;
    a->next_tag = 1;
    h_stderr_path = "/dev/null"; /* the master's info log */
    a->port = h_start_master(&a->master, master_bin, NULL);
    if (a->port <= 0) return false;
    for (int i = 0; i < n; i++)
        if (!ard_add_peer(a)) return false;
    return true;
}

void ard_drop(ard_t *a, int i) {
    h_wait(&a->peers[i], 5000);
    for (int k = i; k + 1 < a->n; k++) {
        a->peers[k] = a->peers[k + 1];
        a->seeds[k] = a->seeds[k + 1];
    }
    a->n--;
}

static bool post(ard_t *a, int dtype, int op, size_t count, int kind, int inplace, const char *cmdword) {
    char list[200] = "", cmd[256];
    for (int i = 0; i < a->n; i++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%u", i ? "," : "", a->seeds[i]);
    }
    uint64_t tag = a->next_tag++;
    for (int i = 0; i < a->n; i++) {
        snprintf(cmd, sizeof cmd, "%s %" PRIu64 " %d %d %zu %d %d %u %s", cmdword, tag, dtype, op, count, kind, inplace,
                 a->seeds[i], list);
        if (!h_send(&a->peers[i], cmd)) return false;
    }
    return true;
}

bool ard_post(ard_t *a, int dtype, int op, size_t count, int kind, int inplace) {
    return post(a, dtype, op, count, kind, inplace, "ar");
}

bool ard_post_go(ard_t *a, int dtype, int op, size_t count, int kind, int inplace) {
    if (!post(a, dtype, op, count, kind, inplace, "arg")) return false;
    bool ok = true;
    for (int i = 0; i < a->n; i++) {
        char line[64];
        ok = h_read_line(&a->peers[i], line, sizeof line, 30000) && strcmp(line, "go") == 0 && ok;
    }
    return ok;
}

bool ard_collect(ard_t *a, ard_result_t *out, int timeout_ms) {
    bool ok = true;
    for (int i = 0; i < a->n; i++) {
        char line[512];
        memset(&out[i], 0, sizeof out[i]);
        out[i].res = out[i].check = -999;
        if (!h_read_line(&a->peers[i], line, sizeof line, timeout_ms)) {
            fprintf(stderr, "ard: peer %d (pid %d) gave no all-reduce answer\n", i, (int) a->peers[i].pid);
            ok = false;
            continue;
        }
        ard_result_t *r = &out[i];
        if (sscanf(line, "ar %d %d %" SCNx64 " %" SCNu64 " %" SCNu64 " %u %" SCNu64 " %" SCNu64, &r->res, &r->check,
                   &r->hash, &r->tx, &r->rx, &r->world, &r->call_us, &r->end_us) != 8) {
            fprintf(stderr, "ard: peer %d answered '%s'\n", i, line);
            ok = false;
        }
    }
    return ok;
}

bool ard_res(ard_t *a, int i, int *fds, int *threads) {
    char line[128];
    if (!h_send(&a->peers[i], "res") || !h_read_line(&a->peers[i], line, sizeof line, 60000)) return false;
    return sscanf(line, "res %d %d", fds, threads) == 2;
}

void ard_stop(ard_t *a) {
    for (int i = 0; i < a->n; i++) h_send(&a->peers[i], "quit");
    for (int i = 0; i < a->n; i++) h_wait(&a->peers[i], 10000);
    a->n = 0;
    h_kill(&a->master, SIGTERM);
    h_wait(&a->master, 5000);
}
