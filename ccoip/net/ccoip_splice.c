/* ccoip_splice.c: sends by reference through a pipe (ccoip_splice.h).
 *
 * vmsplice puts references to the caller's pages into the pipe (no copy), splice moves them
 * from the pipe into the socket's send queue (no copy). The pipe is widened to 1 MiB so that a
 * frame of the ring's largest automatic sub-chunk takes one round of each; a pipe that cannot
 * be widened to a quarter of that (the per-user pipe budget is spent) is not worth its syscalls. */
#include "ccoip/net/ccoip_splice.h"

#include <stdlib.h>
#include <string.h>

bool ccoip_splice_rule(bool same_host, unsigned host_peers, unsigned cores) {
    if (host_peers < 1) host_peers = 1; /* us */
    return !same_host || (unsigned long long) cores < 3ull * host_peers;
}

#ifdef __linux__
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "log/log.h"

#define PIPE_BYTES (1 << 20)
#define PIPE_MIN_BYTES (256 << 10)

/* The cores this process may run on (its affinity mask, which containers narrow). */
static unsigned usable_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return (unsigned) CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned) n : 1;
}

/* Asked before every all-reduce: the environment and the core count are read once. */
static pthread_once_t policy_once = PTHREAD_ONCE_INIT;
static int policy_forced = -1; /* PCCL_SEND_SPLICE: 0 or 1; -1 unset */
static unsigned policy_cores;

static void read_policy(void) {
    const char *v = getenv("PCCL_SEND_SPLICE");
    if (v != NULL && (strcmp(v, "0") == 0 || strcmp(v, "1") == 0)) policy_forced = v[0] - '0';
    policy_cores = usable_cores();
}

bool ccoip_splice_pays(bool same_host, unsigned host_peers) {
    pthread_once(&policy_once, read_policy);
    if (policy_forced >= 0) return policy_forced == 1;
    return ccoip_splice_rule(same_host, host_peers, policy_cores);
}

void ccoip_splice_init(ccoip_splice_t *s) {
    const char *v = getenv("PCCL_SEND_SPLICE");
    s->pipe_fd[0] = s->pipe_fd[1] = -1;
    s->off = v != NULL && strcmp(v, "0") == 0;
}

static bool open_pipe(ccoip_splice_t *s) {
    if (pipe2(s->pipe_fd, O_CLOEXEC) != 0) {
        s->pipe_fd[0] = s->pipe_fd[1] = -1;
        return false;
    }
    int got = fcntl(s->pipe_fd[1], F_SETPIPE_SZ, PIPE_BYTES);
    if (got < 0) got = fcntl(s->pipe_fd[1], F_GETPIPE_SZ);
    if (got < PIPE_MIN_BYTES) {
        LOG_DEBUG("ccoip", "splice: a pipe of %d bytes is too small, sends copy", got);
        ccoip_splice_close(s);
        return false;
    }
    return true;
}

/* splice() raised SIGPIPE at this (blocking) thread when the peer was gone: take it back. */
static void drop_sigpipe(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    struct timespec zero = {0, 0};
    while (sigtimedwait(&set, NULL, &zero) > 0) {
    }
}

int ccoip_splice_send(ccoip_splice_t *s, int fd, const void *buf, size_t len, size_t *sent) {
    *sent = 0;
    if (s->off) return CCOIP_SPLICE_COPY;
    if (s->pipe_fd[0] < 0 && !open_pipe(s)) {
        s->off = true;
        return CCOIP_SPLICE_COPY;
    }
    const char *p = buf;
    while (*sent < len) {
        struct iovec iov = {(void *) (p + *sent), len - *sent};
        ssize_t in = vmsplice(s->pipe_fd[1], &iov, 1, 0);
        if (in < 0 && errno == EINTR) continue;
        if (in <= 0) return CCOIP_SPLICE_COPY; /* pages it cannot take (e.g. device memory) */
        *sent += (size_t) in;
        while (in > 0) {
            unsigned flags = SPLICE_F_MOVE | (*sent < len ? SPLICE_F_MORE : 0);
            ssize_t out = splice(s->pipe_fd[0], NULL, fd, NULL, (size_t) in, flags);
            if (out < 0 && errno == EINTR) continue;
            if (out <= 0) {
                if (out < 0 && errno == EPIPE) drop_sigpipe();
                return CCOIP_SPLICE_FAILED;
            }
            in -= out;
        }
    }
    return CCOIP_SPLICE_OK;
}

void ccoip_splice_close(ccoip_splice_t *s) {
    for (int i = 0; i < 2; i++)
        if (s->pipe_fd[i] >= 0) close(s->pipe_fd[i]);
    s->pipe_fd[0] = s->pipe_fd[1] = -1;
}

#else /* no splice: every send copies */

bool ccoip_splice_pays(bool same_host, unsigned host_peers) {
    (void) same_host, (void) host_peers;
    return false;
}

void ccoip_splice_init(ccoip_splice_t *s) {
    s->pipe_fd[0] = s->pipe_fd[1] = -1;
    s->off = true;
}

int ccoip_splice_send(ccoip_splice_t *s, int fd, const void *buf, size_t len, size_t *sent) {
    (void) s, (void) fd, (void) buf, (void) len;
    *sent = 0;
    return CCOIP_SPLICE_COPY;
}

void ccoip_splice_close(ccoip_splice_t *s) { (void) s; }

#endif
