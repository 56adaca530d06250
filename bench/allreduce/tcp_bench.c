/* tcp_bench: raw TCP goodput, the baselines of the all-reduce benchmarks.
 *   tcp_bench loop MIB               a server and a client over 127.0.0.1 -> "tcp MB_PER_S"
 *   tcp_bench ring N MIB             N processes on 127.0.0.1 in a ring, each sending MIB to the
 *                                    next while it receives MIB from the previous one, all at once
 *                                    (what a ring all-reduce of N peers asks of the host; N = 2 is
 *                                    two streams running both ways between the same two processes)
 *                                    -> "ring MB_PER_S CPU_US": the slowest process's goodput per
 *                                    stream, and the user + system time (getrusage, every thread)
 *                                    that all N spent while the bytes moved
 *                                    TCP_BENCH_SPAN_MIB=M: send from and receive into M MiB buffers
 *   tcp_bench allreduce N MIB [THREADS]
 *                                    N processes on 127.0.0.1 in the same ring, each running a
 *                                    real ring all-reduce (float32 Sum, in place) over its own cold
 *                                    MIB buffer in sub-chunk frames (TCP_BENCH_FRAME_KIB, default
 *                                    1024): the headroom of the simplest data path, no library.
 *                                    THREADS=1: one thread, nonblocking sockets and poll();
 *                                    THREADS=2: a send thread and a receive+reduce thread.
 *                                    Checks every result exactly (exits 1 if wrong) ->
 *                                    "allreduce MIB TIME_US BUSBW_GB_S CPU_US": medians over
 *                                    TCP_BENCH_ITERS ops (default 3, after one warm-up) of the
 *                                    slowest process's time and all N processes' CPU
 *   tcp_bench memcpy MIB             one thread copying a cold MIB buffer into another (the shared-
 *                                    memory links copy every byte twice: writer in, reader out)
 *                                    -> "memcpy GB_PER_S": the median of 5 copies
 *   tcp_bench server IP              listens on IP:0, prints "port N", receives one stream
 *   tcp_bench client IP PORT MIB     sends MIB to IP:PORT -> "tcp MB_PER_S"
 * The client sends MIB MiB in 1 MiB writes then half-closes; the server answers one byte once it
 * has read everything, so the time covers delivery, not just the client's socket buffer. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* User + system time of every thread of this process so far, in seconds. */
static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int listen_on(const char *ip, int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, ip, &a.sin_addr);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *) &a, sizeof a) != 0 || listen(fd, 1) != 0 ||
        getsockname(fd, (struct sockaddr *) &a, &len) != 0) {
        perror("tcp_bench: listen");
        exit(1);
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static void serve(int lfd) {
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0) exit(1);
    static char buf[1 << 20];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
    }
    char ack = 1;
    if (send(fd, &ack, 1, 0) != 1) exit(1);
    close(fd);
}

static double client(const char *ip, int port, double mib) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port)};
    inet_pton(AF_INET, ip, &a.sin_addr);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    for (int i = 0; i < 50 && connect(fd, (struct sockaddr *) &a, sizeof a) != 0; i++) {
        close(fd);
        usleep(100000);
        fd = socket(AF_INET, SOCK_STREAM, 0);
    }
    /* TCP_BENCH_SNDBUF=BYTES: a fixed send buffer (as libpccl's data links set), else autotuning. */
    const char *sb = getenv("TCP_BENCH_SNDBUF");
    int sbv = sb ? atoi(sb) : 0;
    if (sbv > 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sbv, sizeof sbv);
    static char buf[1 << 20];
    memset(buf, 0x5a, sizeof buf);
    size_t total = (size_t) (mib * 1048576.0), sent = 0;
    double t0 = now_s();
    while (sent < total) {
        size_t want = total - sent < sizeof buf ? total - sent : sizeof buf;
        ssize_t n = send(fd, buf, want, MSG_NOSIGNAL);
        if (n <= 0) {
            perror("tcp_bench: send");
            exit(1);
        }
        sent += (size_t) n;
    }
    shutdown(fd, SHUT_WR);
    char ack;
    if (recv(fd, &ack, 1, 0) != 1) exit(1);
    double dt = now_s() - t0;
    close(fd);
    return (double) total / dt / 1e6;
}

typedef struct ring_send {
    int fd;
    size_t total, span;
    char *buf;
} ring_send_t;

/* A buffer of span bytes, every page touched. */
static char *span_buffer(size_t span) {
    char *b = malloc(span);
    if (b == NULL) exit(1);
    memset(b, 0x5a, span);
    return b;
}

static void *ring_sender(void *arg) {
    ring_send_t *rs = arg;
    for (size_t sent = 0; sent < rs->total;) {
        size_t at = sent % rs->span, want = rs->total - sent;
        if (want > (1u << 20)) want = 1u << 20;
        if (want > rs->span - at) want = rs->span - at;
        ssize_t n = send(rs->fd, rs->buf + at, want, MSG_NOSIGNAL);
        if (n <= 0) {
            perror("tcp_bench: ring send");
            exit(1);
        }
        sent += (size_t) n;
    }
    return NULL;
}

static int connect_to(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    for (int i = 0; i < 100; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *) &a, sizeof a) == 0) return fd;
        if (fd >= 0) close(fd);
        usleep(20000);
    }
    perror("tcp_bench: ring connect");
    exit(1);
}

/* One member of the ring: connect to next, accept from prev, wait for the go byte on `go`,
 * send and receive at once; writes its goodput (MB/s, both directions done) to `res`. */
static void ring_member(int lfd, int next_port, int go, int res, size_t total) {
    int tx = connect_to(next_port), rx = accept(lfd, NULL, NULL);
    if (rx < 0) exit(1);
    int one = 1;
    setsockopt(tx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char c;
    /* TCP_BENCH_SPAN_MIB: send from and receive into buffers of that size (an all-reduce's
     * working set, mostly out of cache) instead of 1 MiB ones that stay in cache. */
    const char *sp = getenv("TCP_BENCH_SPAN_MIB");
    size_t span = (sp != NULL && atoi(sp) > 0 ? (size_t) atoi(sp) : 1u) << 20;
    char *rbuf = span_buffer(span);
    ring_send_t rs = {tx, total, span, span_buffer(span)};
    if (write(res, "r", 1) != 1 || read(go, &c, 1) != 1) exit(1);
    pthread_t th;
    double t0 = now_s(), c0 = cpu_s();
    if (pthread_create(&th, NULL, ring_sender, &rs) != 0) exit(1);
    for (size_t got = 0; got < total;) {
        size_t at = got % span, want = span - at < (1u << 20) ? span - at : (1u << 20);
        ssize_t n = recv(rx, rbuf + at, want, 0);
        if (n <= 0) exit(1);
        got += (size_t) n;
    }
    pthread_join(th, NULL);
    double out[2] = {(double) total / (now_s() - t0) / 1e6, cpu_s() - c0};
    if (write(res, out, sizeof out) != (ssize_t) sizeof out) exit(1);
    close(tx);
    close(rx);
}

static int ring(int n, double mib) {
    if (n < 2 || n > 64) return 2;
    int lfd[64], port[64], go[2], res[2];
    for (int i = 0; i < n; i++) lfd[i] = listen_on("127.0.0.1", &port[i]);
    if (pipe(go) != 0 || pipe(res) != 0) return 1;
    size_t total = (size_t) (mib * 1048576.0);
    pid_t pid[64];
    for (int i = 0; i < n; i++) {
        pid[i] = fork();
        if (pid[i] == 0) {
            ring_member(lfd[i], port[(i + 1) % n], go[0], res[1], total);
            _exit(0);
        }
    }
    char c;
    for (int i = 0; i < n; i++)
        if (read(res[0], &c, 1) != 1) return 1;
    for (int i = 0; i < n; i++)
        if (write(go[1], "g", 1) != 1) return 1;
    double worst = 0, cpu = 0;
    for (int i = 0; i < n; i++) {
        double got[2];
        if (read(res[0], got, sizeof got) != (ssize_t) sizeof got) return 1;
        if (worst == 0 || got[0] < worst) worst = got[0];
        cpu += got[1];
    }
    for (int i = 0; i < n; i++) {
        int st;
        if (waitpid(pid[i], &st, 0) != pid[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 1;
    }
    printf("ring %.1f %.0f\n", worst, cpu * 1e6);
    return 0;
}

/* ---- allreduce: a minimal ring all-reduce, the headroom of the data path on this host ---- */

/* Rank r's input at index i: small integers, so every sum of N of them is exact in float32. */
static float ar_input(int r, size_t i) {
    return (float) ((i * 7u + (size_t) r * 131u) % 1024u);
}

typedef struct ar_plan {
    int n, rank, tx, rx;
    float *buf;       /* the op's buffer: input, then result (in place) */
    float *hot;       /* one frame: where reduce-scatter frames land before they are added */
    size_t chunk;     /* bytes per chunk: buffer / n */
    size_t frame;     /* bytes per frame (the last of a chunk may be shorter) */
    size_t fps;       /* frames per step */
    size_t frames;    /* frames in the op each way: 2(n-1) steps */
    _Atomic uint32_t recv_done; /* THREADS=2: frames received (and added) so far; a futex word */
    _Atomic int send_waiting;
} ar_plan_t;

typedef struct ar_rx {
    size_t j, got, added; /* the frame being received, its bytes in, its bytes added */
} ar_rx_t;

static void ar_die(const char *what) {
    perror(what);
    exit(1);
}

/* Where frame j of the send (send = 1) or receive stream lies in the buffer. Reduce-scatter step
 * s sends chunk rank-s and receives chunk rank-s-1; all-gather step s sends chunk rank+1-s and
 * receives chunk rank-s; so the frame sent as j is the one received as j - fps. */
static void ar_frame(const ar_plan_t *p, size_t j, int send, size_t *off, size_t *len) {
    long step = (long) (j / p->fps), n = p->n, c;
    size_t sub = j % p->fps;
    if (step < n - 1)
        c = send ? p->rank - step : p->rank - step - 1;
    else
        c = send ? p->rank + 1 - (step - (n - 1)) : p->rank - (step - (n - 1));
    c = ((c % n) + n) % n;
    *off = (size_t) c * p->chunk + sub * p->frame;
    *len = p->chunk - sub * p->frame < p->frame ? p->chunk - sub * p->frame : p->frame;
}

/* Receives what is there of the current frame: a reduce-scatter frame into the hot buffer,
 * adding every whole float that has landed at once; an all-gather frame straight into place.
 * Returns recv's result; *short_read when recv gave less than asked (the socket is drained). */
static ssize_t ar_recv(ar_plan_t *p, ar_rx_t *st, int flags, int *short_read) {
    size_t off, len;
    ar_frame(p, st->j, 0, &off, &len);
    int rs = st->j / p->fps < (size_t) (p->n - 1);
    char *dst = rs ? (char *) p->hot : (char *) p->buf + off;
    ssize_t k = recv(p->rx, dst + st->got, len - st->got, flags);
    if (k <= 0) return k;
    *short_read = (size_t) k < len - st->got;
    st->got += (size_t) k;
    if (rs) {
        float *d = (float *) ((char *) p->buf + off);
        size_t upto = st->got / 4;
        for (size_t i = st->added; i < upto; i++) d[i] += p->hot[i];
        st->added = upto;
    }
    if (st->got == len) {
        st->j++;
        st->got = st->added = 0;
    }
    return k;
}

/* THREADS=1: one thread, both sockets driven with MSG_DONTWAIT, poll() when neither can move. */
static void ar_run_poll(ar_plan_t *p) {
    ar_rx_t st = {0, 0, 0};
    size_t sj = 0, sgot = 0;
    int tx_ready = 1, rx_ready = 1;
    while (sj < p->frames || st.j < p->frames) {
        /* Frame sj may go once frame sj - fps has landed (and been added). */
        int can_send = sj < p->frames && (sj < p->fps || st.j > sj - p->fps);
        int recv_left = st.j < p->frames, tried = 0;
        if (can_send && tx_ready) {
            size_t off, len;
            ar_frame(p, sj, 1, &off, &len);
            ssize_t k = send(p->tx, (char *) p->buf + off + sgot, len - sgot, MSG_NOSIGNAL | MSG_DONTWAIT);
            tried = 1;
            if (k < 0 && errno != EAGAIN) ar_die("tcp_bench: allreduce send");
            if (k < 0 || (size_t) k < len - sgot) tx_ready = 0;
            if (k > 0 && (sgot += (size_t) k) == len) sj++, sgot = 0;
        }
        if (recv_left && rx_ready) {
            int short_read = 0;
            ssize_t k = ar_recv(p, &st, MSG_DONTWAIT, &short_read);
            tried = 1;
            if (k == 0 || (k < 0 && errno != EAGAIN)) ar_die("tcp_bench: allreduce recv");
            if (k < 0 || short_read) rx_ready = 0;
        }
        if (tried) continue;
        struct pollfd fds[2] = {{p->tx, (short) (can_send ? POLLOUT : 0), 0},
                                {p->rx, (short) (recv_left ? POLLIN : 0), 0}};
        if (poll(fds, 2, 10000) <= 0) ar_die("tcp_bench: allreduce stalled");
        if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) ar_die("tcp_bench: allreduce send link");
        tx_ready = (fds[0].revents & POLLOUT) != 0 || tx_ready;
        rx_ready = (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0 || rx_ready;
    }
}

/* THREADS=2: the send thread waits on the futex word recv_done for the frame it forwards. */
static void ar_wait_frames(ar_plan_t *p, uint32_t want) {
    for (;;) {
        uint32_t v = atomic_load(&p->recv_done);
        if (v >= want) return;
        atomic_store(&p->send_waiting, 1);
        v = atomic_load(&p->recv_done);
        if (v < want) syscall(SYS_futex, &p->recv_done, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
        atomic_store(&p->send_waiting, 0);
    }
}

static void *ar_sender(void *arg) {
    ar_plan_t *p = arg;
    for (size_t j = 0; j < p->frames; j++) {
        if (j >= p->fps) ar_wait_frames(p, (uint32_t) (j - p->fps + 1));
        size_t off, len;
        ar_frame(p, j, 1, &off, &len);
        for (size_t sent = 0; sent < len;) {
            ssize_t k = send(p->tx, (char *) p->buf + off + sent, len - sent, MSG_NOSIGNAL);
            if (k <= 0) ar_die("tcp_bench: allreduce send");
            sent += (size_t) k;
        }
    }
    return NULL;
}

static void ar_run_threads(ar_plan_t *p) {
    atomic_store(&p->recv_done, 0);
    pthread_t th;
    if (pthread_create(&th, NULL, ar_sender, p) != 0) exit(1);
    ar_rx_t st = {0, 0, 0};
    while (st.j < p->frames) {
        size_t j = st.j;
        int short_read;
        if (ar_recv(p, &st, 0, &short_read) <= 0) ar_die("tcp_bench: allreduce recv");
        if (st.j != j) {
            atomic_fetch_add(&p->recv_done, 1);
            if (atomic_load(&p->send_waiting)) syscall(SYS_futex, &p->recv_done, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        }
    }
    pthread_join(th, NULL);
}

/* One member: set up the ring like ring_member, then per op: fill the input (every page
 * touched), report ready, wait for go, run, check every element, report {seconds, CPU seconds}. */
static void ar_member(int rank, int n, int lfd, int next_port, int go, int res, size_t bytes, int threads, int ops) {
    int tx = connect_to(next_port), rx = accept(lfd, NULL, NULL);
    if (rx < 0) exit(1);
    int one = 1;
    setsockopt(tx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const char *fk = getenv("TCP_BENCH_FRAME_KIB");
    ar_plan_t p = {.n = n, .rank = rank, .tx = tx, .rx = rx, .chunk = bytes / (size_t) n};
    p.frame = (size_t) (fk != NULL && atoi(fk) > 0 ? atoi(fk) : 1024) << 10;
    p.fps = (p.chunk + p.frame - 1) / p.frame;
    p.frames = p.fps * 2 * (size_t) (n - 1);
    p.buf = malloc(bytes);
    p.hot = malloc(p.frame);
    if (p.buf == NULL || p.hot == NULL) exit(1);
    size_t count = bytes / 4;
    for (int op = 0; op < ops; op++) {
        for (size_t i = 0; i < count; i++) p.buf[i] = ar_input(rank, i);
        char c;
        if (write(res, "r", 1) != 1 || read(go, &c, 1) != 1) exit(1);
        double t0 = now_s(), c0 = cpu_s();
        if (threads == 2)
            ar_run_threads(&p);
        else
            ar_run_poll(&p);
        double out[2] = {now_s() - t0, cpu_s() - c0};
        for (size_t i = 0; i < count; i++) {
            float want = 0;
            for (int r = 0; r < n; r++) want += ar_input(r, i);
            if (p.buf[i] != want) {
                fprintf(stderr, "tcp_bench: allreduce WRONG at rank %d element %zu: %g, want %g\n", rank, i, (double) p.buf[i], (double) want);
                exit(1);
            }
        }
        if (write(res, out, sizeof out) != (ssize_t) sizeof out) exit(1);
    }
    free(p.buf);
    free(p.hot);
    close(tx);
    close(rx);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

static int allreduce(int n, double mib, int threads) {
    size_t bytes = (size_t) (mib * 1048576.0);
    const char *it = getenv("TCP_BENCH_ITERS");
    int iters = it != NULL && atoi(it) > 0 ? atoi(it) : 3;
    if (n < 2 || n > 64 || iters > 100 || (threads != 1 && threads != 2) || bytes == 0 || bytes % (4 * (size_t) n) != 0) {
        fprintf(stderr, "tcp_bench: allreduce N (2..64) MIB (a multiple of 4N bytes) [1|2]\n");
        return 2;
    }
    int lfd[64], port[64], go[64][2], res[64][2];
    pid_t pid[64];
    for (int i = 0; i < n; i++) {
        lfd[i] = listen_on("127.0.0.1", &port[i]);
        if (pipe(go[i]) != 0 || pipe(res[i]) != 0) return 1;
    }
    for (int i = 0; i < n; i++) {
        pid[i] = fork();
        if (pid[i] == 0) {
            /* Only its own ends stay open, so that a member that dies ends the others' reads. */
            for (int j = 0; j < n; j++) {
                if (j != i) close(lfd[j]), close(go[j][0]), close(res[j][1]);
                close(go[j][1]);
                close(res[j][0]);
            }
            ar_member(i, n, lfd[i], port[(i + 1) % n], go[i][0], res[i][1], bytes, threads, iters + 1);
            _exit(0);
        }
    }
    for (int i = 0; i < n; i++) close(lfd[i]), close(go[i][0]), close(res[i][1]);
    double worst[100], cpu[100];
    int rc = 0;
    for (int op = 0; op <= iters && rc == 0; op++) { /* op 0 warms up */
        char c;
        for (int i = 0; i < n && rc == 0; i++)
            if (read(res[i][0], &c, 1) != 1) rc = 1;
        for (int i = 0; i < n && rc == 0; i++)
            if (write(go[i][1], "g", 1) != 1) rc = 1;
        double w = 0, cs = 0;
        for (int i = 0; i < n && rc == 0; i++) {
            double got[2];
            if (read(res[i][0], got, sizeof got) != (ssize_t) sizeof got) rc = 1;
            else {
                w = got[0] > w ? got[0] : w;
                cs += got[1];
            }
        }
        if (op > 0) worst[op - 1] = w, cpu[op - 1] = cs;
    }
    for (int i = 0; i < n; i++) {
        if (rc != 0) kill(pid[i], SIGKILL);
        int st;
        if (waitpid(pid[i], &st, 0) != pid[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
    }
    if (rc != 0) {
        fprintf(stderr, "tcp_bench: allreduce failed\n");
        return 1;
    }
    qsort(worst, (size_t) iters, sizeof worst[0], cmp_double);
    qsort(cpu, (size_t) iters, sizeof cpu[0], cmp_double);
    double t = worst[iters / 2], busbw = 2.0 * (n - 1) / n * (double) bytes / t / 1e9;
    printf("allreduce %g %.0f %.3f %.0f\n", mib, t * 1e6, busbw, cpu[iters / 2] * 1e6);
    return 0;
}

/* The memcpy baseline of the shared-memory links: one thread, buffers larger than the caches. */
static int memcpy_bench(double mib) {
    size_t bytes = (size_t) (mib * 1048576.0);
    char *a = malloc(bytes), *b = malloc(bytes);
    if (a == NULL || b == NULL) return 1;
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    double t[5];
    for (int i = 0; i < 5; i++) {
        double t0 = now_s();
        memcpy(i % 2 ? a : b, i % 2 ? b : a, bytes);
        t[i] = now_s() - t0;
    }
    qsort(t, 5, sizeof t[0], cmp_double);
    printf("memcpy %.3f\n", (double) bytes / t[2] / 1e9);
    free(a);
    free(b);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "memcpy") == 0) return memcpy_bench(atof(argv[2]));
    if (argc >= 4 && strcmp(argv[1], "ring") == 0) return ring(atoi(argv[2]), atof(argv[3]));
    if (argc >= 4 && strcmp(argv[1], "allreduce") == 0)
        return allreduce(atoi(argv[2]), atof(argv[3]), argc >= 5 ? atoi(argv[4]) : 1);
    if (argc >= 3 && strcmp(argv[1], "loop") == 0) {
        int port, lfd = listen_on("127.0.0.1", &port);
        pid_t pid = fork();
        if (pid == 0) {
            serve(lfd);
            _exit(0);
        }
        close(lfd);
        printf("tcp %.1f\n", client("127.0.0.1", port, atof(argv[2])));
        waitpid(pid, NULL, 0);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "server") == 0) {
        int port, lfd = listen_on(argv[2], &port);
        printf("port %d\n", port);
        fflush(stdout);
        serve(lfd);
        return 0;
    }
    if (argc >= 5 && strcmp(argv[1], "client") == 0) {
        printf("tcp %.1f\n", client(argv[2], atoi(argv[3]), atof(argv[4])));
        return 0;
    }
    fprintf(stderr, "usage: tcp_bench memcpy MIB | loop MIB | ring N MIB | allreduce N MIB [1|2] | server IP | client IP PORT MIB\n");
    return 2;
}
