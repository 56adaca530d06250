/* tcp_bench: single-stream raw TCP goodput, the baseline of the all-reduce benchmarks.
 *   tcp_bench loop MIB               a server and a client over 127.0.0.1 -> "tcp MB_PER_S"
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
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

int main(int argc, char **argv) {
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
    fprintf(stderr, "usage: tcp_bench loop MIB | server IP | client IP PORT MIB\n");
    return 2;
}
