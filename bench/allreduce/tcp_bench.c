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
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
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

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "ring") == 0) return ring(atoi(argv[2]), atof(argv[3]));
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
    fprintf(stderr, "usage: tcp_bench loop MIB | ring N MIB | server IP | client IP PORT MIB\n");
    return 2;
}
