/* async_driver.h: a master and a ring of async_peer processes for the async / pool / retry /
 * quantization / kill tests (header-only; each test is one process). Peers are admitted one at
 * a time, so the ring order is the order of peers[]. */
#ifndef ASYNC_DRIVER_H
#define ASYNC_DRIVER_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/ccoip/harness.h"

#define AD_MAX 8

typedef struct ad {
    const char *peer_bin;
    h_proc_t master;
    int port, n;
    h_proc_t peers[AD_MAX];
    int idx[AD_MAX]; /* each peer's input index */
} ad_t;

static inline long ad_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Reads one line of p that starts with `word`; false (and a log line) otherwise. */
static inline bool ad_read(h_proc_t *p, const char *word, char *line, size_t n, int timeout_ms) {
    if (!h_read_line(p, line, n, timeout_ms)) {
        fprintf(stderr, "async_driver: no '%s' line from pid %d\n", word, (int) p->pid);
        return false;
    }
    if (strncmp(line, word, strlen(word)) != 0) {
        fprintf(stderr, "async_driver: pid %d said '%s' (wanted '%s ...')\n", (int) p->pid, line, word);
        return false;
    }
    return true;
}

/* Sends cmd to every peer. */
static inline bool ad_all(ad_t *a, const char *cmd) {
    bool ok = true;
    for (int i = 0; i < a->n; i++) ok = h_send(&a->peers[i], cmd) && ok;
    return ok;
}

static inline bool ad_update(ad_t *a) { return h_update_all(a->peers, a->n); }

static inline bool ad_add_peer(ad_t *a, int idx, int pool) {
    if (a->n >= AD_MAX) return false;
    h_proc_t *p = &a->peers[a->n];
    char port[16], sidx[16], spool[16];
    snprintf(port, sizeof port, "%d", a->port);
    snprintf(sidx, sizeof sidx, "%d", idx);
    snprintf(spool, sizeof spool, "%d", pool);
    char *argv[] = {(char *) a->peer_bin, port, sidx, spool, NULL};
    if (!h_spawn(p, argv) || !h_send(p, "connect") || !h_admit(a->peers, a->n, p)) return false;
    a->idx[a->n++] = idx;
    return true;
}

/* Master plus n peers with the given pool sizes (pools NULL: all `pool0`). */
static inline bool ad_start(ad_t *a, const char *master_bin, const char *peer_bin, int n, const int *pools, int pool0) {
    memset(a, 0, sizeof *a);
    a->peer_bin = peer_bin;
    h_stderr_path = "/dev/null"; /* the master's info log */
    a->port = h_start_master(&a->master, master_bin, NULL);
    if (a->port <= 0) return false;
    for (int i = 0; i < n; i++)
        if (!ad_add_peer(a, i, pools ? pools[i] : pool0)) return false;
    return true;
}

/* The mask of the peers' input indices. */
static inline unsigned ad_mask(const ad_t *a) {
    unsigned m = 0;
    for (int i = 0; i < a->n; i++) m |= 1u << a->idx[i];
    return m;
}

static inline void ad_drop(ad_t *a, int i) {
    h_wait(&a->peers[i], 5000);
    for (int k = i; k + 1 < a->n; k++) {
        a->peers[k] = a->peers[k + 1];
        a->idx[k] = a->idx[k + 1];
    }
    a->n--;
}

/* quit every peer; each must print "bye FDS THREADS BASE_FDS BASE_THREADS" with no more
 * descriptors and threads than it had before it created the communicator. */
static inline int ad_stop(ad_t *a) {
    int leaks = 0;
    ad_all(a, "quit");
    for (int i = 0; i < a->n; i++) {
        char line[128];
        int fds = -1, threads = -1, base_fds = 0, base_threads = 0;
        if (ad_read(&a->peers[i], "bye", line, sizeof line, 20000))
            sscanf(line, "bye %d %d %d %d", &fds, &threads, &base_fds, &base_threads);
        if (fds < 0 || fds > base_fds || threads > base_threads) {
            fprintf(stderr, "async_driver: peer %d left %d descriptors (had %d) and %d threads (had %d)\n", i, fds,
                    base_fds, threads, base_threads);
            leaks++;
        }
        h_wait(&a->peers[i], 10000);
    }
    a->n = 0;
    h_kill(&a->master, SIGTERM);
    h_wait(&a->master, 5000);
    return leaks;
}

/* The blocks peer i's caching allocator obtained from the system; -1 when the peer did not say.
 * 0 is a real answer: a peer whose rings all combined out of shared memory from their first op
 * on needed no staging block at all. */
static inline long ad_cache_blocks(ad_t *a, int i) {
    char line[128];
    long n = -1;
    if (!h_send(&a->peers[i], "cache") || !ad_read(&a->peers[i], "cache", line, sizeof line, 60000) ||
        sscanf(line, "cache %ld", &n) != 1)
        return -1;
    return n;
}

#endif /* ASYNC_DRIVER_H */
