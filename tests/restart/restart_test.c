/* restart_test MASTER PEER: the master is not a single point of failure (docs/master-restart.md).
 *
 * 1. Four restart_peer processes train 40 steps. The master is SIGKILLed right as peer 0 enters an
 *    all-reduce, restarted 2 s later on the same port, then SIGKILLed right as peer 0 enters a
 *    shared-state sync and restarted again. Every peer must finish, and every step's weights must
 *    be bit-identical on every peer that printed that step (the revision rule is checked by the
 *    peers themselves: a sync that went backwards exits 4).
 * 2. With PCCL_MASTER_RECONNECT_S=3, a master that never comes back: both peers give up cleanly
 *    (exit 3, "gave up 6" = pcclMasterConnectionFailed) within the window and a margin.
 * restart_test MASTER PEER encrypt: part 1 in an encrypted run (a run secret, --encrypt and
 * PCCL_ENCRYPT=1): every REJOIN and what follows it travels sealed (ccoip_chan.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"

#define PEERS 4
#define STEPS 40
#define MAX_STEPS 64

static const char *master_bin, *peer_bin;
static char secret_arg[128]; /* the secret file's path in an encrypted run, else empty */
static unsigned long long hashes[MAX_STEPS + 1];
static bool seen[MAX_STEPS + 1];
static int failures, step_lines;
/* The last lines of each peer, printed when the run stalls. */
#define KEEP 8
static char recent[PEERS][KEEP][128];
static int nrecent[PEERS];

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t) t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int start_master(h_proc_t *m, int port) {
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    char *argv[] = {(char *) master_bin, "--listen", listen, "--log-level", "info", NULL, NULL, NULL, NULL};
    if (secret_arg[0] != '\0') {
        argv[5] = "--secret-file";
        argv[6] = secret_arg;
        argv[7] = "--encrypt";
    }
    if (!h_spawn(m, argv)) return 0;
    char line[256];
    if (!h_read_line(m, line, sizeof line, 20000)) return 0;
    const char *colon = strrchr(line, ':');
    return colon == NULL ? 0 : atoi(colon + 1);
}

static bool start_peer(h_proc_t *p, int port, int shard, int steps) {
    char addr[64], sh[16], st[16];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    snprintf(sh, sizeof sh, "%d", shard);
    snprintf(st, sizeof st, "%d", steps);
    char *argv[] = {(char *) peer_bin, addr, sh, st, NULL};
    return h_spawn(p, argv);
}

/* Checks one line of a peer: steps agree across peers. Returns false on a divergence. */
static bool check_line(int who, const char *line) {
    unsigned step;
    unsigned long long rev, hash;
    if (sscanf(line, "step %u rev %llu hash %llx", &step, &rev, &hash) == 3 && step <= MAX_STEPS) {
        step_lines++;
        if (seen[step] && hashes[step] != hash) {
            fprintf(stderr, "restart: step %u: peer %d has weights %016llx, another peer %016llx\n", step, who, hash,
                    hashes[step]);
            return false;
        }
        seen[step] = true;
        hashes[step] = hash;
    }
    if (strncmp(line, "error ", 6) == 0) failures++;
    return true;
}

/* Reads every peer's lines for up to ms; returns the index of the peer whose line starts with
 * `want` (and, when step >= 0, names at least that step), or -1. `done` counts "done" lines. */
static int pump(h_proc_t *peers, int n, int ms, const char *want, int who, int min_step, int *done, char *last,
                size_t lastn) {
    int64_t end = now_ms() + ms;
    while (now_ms() < end) {
        for (int i = 0; i < n; i++) {
            char line[256];
            while (h_read_line(&peers[i], line, sizeof line, 1)) {
                snprintf(recent[i][nrecent[i]++ % KEEP], sizeof recent[i][0], "%.127s", line);
                if (!check_line(i, line)) exit(1);
                if (strncmp(line, "done ", 5) == 0 || strncmp(line, "gave up", 7) == 0) {
                    (*done)++;
                    if (last != NULL) snprintf(last, lastn, "%s", line);
                }
                if (want != NULL && (who < 0 || who == i) && strncmp(line, want, strlen(want)) == 0 &&
                    atoi(line + strlen(want)) >= min_step)
                    return i;
            }
        }
    }
    return -1;
}

/* A stalled run: each peer's last lines and every thread's stack (gdb, when installed). */
static void dump_stall(h_proc_t *peers, int n, h_proc_t *m) {
    for (int i = 0; i < n; i++) {
        for (int k = nrecent[i] > KEEP ? nrecent[i] - KEEP : 0; k < nrecent[i]; k++)
            fprintf(stderr, "restart: peer %d said: %s\n", i, recent[i][k % KEEP]);
    }
    fflush(stderr);
    char cmd[128];
    for (int i = 0; i <= n; i++) {
        pid_t pid = i < n ? peers[i].pid : m->pid;
        fprintf(stderr, "restart: stacks of %s (pid %d)\n", i < n ? "a peer" : "the master", (int) pid);
        fflush(stderr);
        snprintf(cmd, sizeof cmd, "timeout 30 gdb -p %d -batch -ex 'thread apply all bt' 1>&2 2>/dev/null", (int) pid);
        if (system(cmd) != 0) fprintf(stderr, "restart: gdb failed\n");
    }
}

static void kill_master_at(h_proc_t *m, h_proc_t *peers, int *done, const char *marker, int min_step, int port) {
    if (pump(peers, PEERS, 60000, marker, 0, min_step, done, NULL, 0) < 0) {
        fprintf(stderr, "restart: peer 0 never reached '%s%d'\n", marker, min_step);
        dump_stall(peers, PEERS, m);
        exit(1);
    }
    h_kill(m, SIGKILL);
    h_wait(m, 5000);
    printf("restart: master SIGKILLed as peer 0 began '%s' (step >= %d)\n", marker, min_step);
    pump(peers, PEERS, 2000, NULL, -1, 0, done, NULL, 0); /* 2 s without a master */
    if (start_master(m, port) != port) {
        fprintf(stderr, "restart: the master did not come back on port %d\n", port);
        exit(1);
    }
    printf("restart: master restarted on port %d\n", port);
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    master_bin = argv[1];
    peer_bin = argv[2];
    h_init(240);
    bool encrypt = argc > 3 && strcmp(argv[3], "encrypt") == 0;
    if (encrypt) {
        snprintf(secret_arg, sizeof secret_arg, "/tmp/restart_test.%d.secret", (int) getpid());
        FILE *f = fopen(secret_arg, "w");
        if (f == NULL || fputs("restart test secret, long enough to pass", f) < 0 || fclose(f) != 0) return 1;
        chmod(secret_arg, 0600);
        setenv("PCCL_SECRET_FILE", secret_arg, 1);
        setenv("PCCL_ENCRYPT", "1", 1);
    }

    /* 1: two restarts, four peers. */
    h_proc_t m, peers[PEERS];
    int port = start_master(&m, 0);
    if (port <= 0) return 1;
    for (int i = 0; i < PEERS; i++)
        if (!start_peer(&peers[i], port, i, STEPS)) return 1;
    int done = 0;
    kill_master_at(&m, peers, &done, "allreduce ", 8, port);
    kill_master_at(&m, peers, &done, "sync ", 20, port);
    char last[256] = "";
    int64_t t0 = now_ms();
    while (done < PEERS && now_ms() - t0 < 120000) pump(peers, PEERS, 200, NULL, -1, 0, &done, last, sizeof last);
    int bad = 0;
    if (done < PEERS) dump_stall(peers, PEERS, &m);
    for (int i = 0; i < PEERS; i++) {
        int rc = h_wait(&peers[i], 10000);
        if (rc != 0) {
            fprintf(stderr, "restart: peer %d exited %d\n", i, rc);
            bad++;
        }
    }
    for (int s = 1; s <= STEPS; s++)
        if (!seen[s]) {
            fprintf(stderr, "restart: no peer printed step %d\n", s);
            bad++;
        }
    printf("restart: %d peers done (%s), %d step lines checked across peers, %d failed calls retried\n", done, last,
           step_lines, failures);
    h_kill(&m, SIGTERM);
    h_wait(&m, 5000);
    if (encrypt) unlink(secret_arg);
    if (bad || done != PEERS) return 1;
    if (encrypt) return 0;

    /* 2: the master never comes back. */
    setenv("PCCL_MASTER_RECONNECT_S", "3", 1);
    memset(seen, 0, sizeof seen);
    port = start_master(&m, 0);
    if (port <= 0) return 1;
    for (int i = 0; i < 2; i++)
        if (!start_peer(&peers[i], port, i, 100000)) return 1;
    done = 0;
    if (pump(peers, 2, 60000, "step ", 0, 5, &done, NULL, 0) < 0) return 1;
    h_kill(&m, SIGKILL);
    h_wait(&m, 5000);
    int64_t killed = now_ms();
    while (done < 2 && now_ms() - killed < 15000) pump(peers, 2, 100, NULL, -1, 0, &done, last, sizeof last);
    int64_t took = now_ms() - killed;
    for (int i = 0; i < 2; i++) {
        int rc = h_wait(&peers[i], 5000);
        if (rc != 3) {
            fprintf(stderr, "restart: without a master, peer %d exited %d (want 3: gave up)\n", i, rc);
            bad++;
        }
    }
    printf("restart: without a master both peers gave up after %lld ms (window 3 s): %s\n", (long long) took, last);
    if (strcmp(last, "gave up 6") != 0 || took < 2500 || took > 9000) bad++;
    return bad ? 1 : 0;
}
