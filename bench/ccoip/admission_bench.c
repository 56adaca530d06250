/* admission_bench: the control plane at scale, on loopback.
 *   ccoip/admit_256_peers      seconds until 256 peers (threads) are all admitted;
 *                              baseline: 256 threads each doing a raw TCP connect + round trip
 *   ccoip/master_rss_256_peers master RSS with 256 peers; baseline: the idle master's RSS
 *   ccoip/vote_rtt_64_peers    one pcclArePeersPending vote among 64 peers (mean);
 *                              baseline: a raw TCP ping-pong round trip on loopback
 *   ccoip/update_topology_64_peers  one pcclUpdateTopology among 64 peers (re-links the ring)
 * The master runs in a forked child (so its RSS is its own), peers in this process.
 * CSV rows "name,value,unit,baseline,ratio" on stdout; progress on stderr. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ccoip/master/ccoip_master.h"
#include "ccoip/net/ccoip_socket.h"
#include "pccl.h"

#define JOINERS 256
#define VOTERS 64
#define VOTES 200

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long rss_kb(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
    if (f != NULL) fclose(f);
    return kb;
}

/* A master in a child process; returns its port. Closing *ctl stops it. */
static int fork_master(pid_t *pid, int *ctl) {
    int port_pipe[2], ctl_pipe[2];
    if (pipe(port_pipe) != 0 || pipe(ctl_pipe) != 0) return -1;
    *pid = fork();
    if (*pid == 0) {
        close(port_pipe[0]);
        close(ctl_pipe[1]);
        ccoip_raise_fd_limit();
        pcclInit();
        ccoip_socket_address_t a;
        ccoip_parse_address("127.0.0.1", 0, &a);
        pcclMasterInstance_t *m;
        if (pcclCreateMaster(a, &m) != pcclSuccess || pcclRunMaster(m) != pcclSuccess) _exit(1);
        int port = ccoip_master_port(m);
        if (write(port_pipe[1], &port, sizeof port) != sizeof port) _exit(1);
        char c;
        while (read(ctl_pipe[0], &c, 1) > 0) {}
        pcclInterruptMaster(m);
        pcclMasterAwaitTermination(m);
        pcclDestroyMaster(m);
        _exit(0);
    }
    close(port_pipe[1]);
    close(ctl_pipe[0]);
    int port = -1;
    if (read(port_pipe[0], &port, sizeof port) != sizeof port) port = -1;
    close(port_pipe[0]);
    *ctl = ctl_pipe[1];
    return port;
}

static void stop_master(pid_t pid, int ctl) {
    close(ctl);
    waitpid(pid, NULL, 0);
}

typedef struct peer_t {
    pthread_t thread;
    pcclComm_t *comm;
    int target;  /* vote until the world has this many peers */
    pcclResult_t result;
} peer_t;

static void *join_and_vote(void *arg) {
    peer_t *p = arg;
    p->result = pcclConnect(p->comm);
    int world = 0;
    while (p->result == pcclSuccess) {
        pcclGetAttribute(p->comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &world);
        if (world >= p->target) break;
        pcclResult_t r = pcclUpdateTopology(p->comm);
        if (r != pcclSuccess && r != pcclUpdateTopologyFailed) p->result = r;
    }
    return NULL;
}

static pcclComm_t *new_comm(int port) {
    pcclCommCreateParams_t params;
    memset(&params, 0, sizeof params);
    ccoip_parse_address("127.0.0.1", (uint16_t) port, &params.master_address);
    pcclComm_t *c = NULL;
    if (pcclCreateCommunicator(&params, &c) != pcclSuccess) {
        fprintf(stderr, "bench: cannot create a communicator\n");
        exit(1);
    }
    return c;
}

/* Admits n peers: the first alone, the rest concurrently; returns the seconds it took. */
static double admit(peer_t *peers, int n, int port) {
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        peers[i].comm = new_comm(port);
        peers[i].target = n;
    }
    if (pcclConnect(peers[0].comm) != pcclSuccess) {
        fprintf(stderr, "bench: first peer could not connect\n");
        exit(1);
    }
    for (int i = 1; i < n; i++) pthread_create(&peers[i].thread, NULL, join_and_vote, &peers[i]);
    peers[0].result = pcclSuccess;
    int world = 0;
    while (world < n) { /* the first peer votes too */
        pcclUpdateTopology(peers[0].comm);
        pcclGetAttribute(peers[0].comm, PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE, &world);
    }
    for (int i = 1; i < n; i++) pthread_join(peers[i].thread, NULL);
    double t = now_s() - t0;
    for (int i = 1; i < n; i++)
        if (peers[i].result != pcclSuccess) fprintf(stderr, "bench: peer %d: %s\n", i, pcclResultString(peers[i].result));
    return t;
}

/* ---- baselines: raw TCP on loopback ---- */

static int listen_any(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000001);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *) &a, sizeof a) != 0 || listen(fd, 1024) != 0) return -1;
    getsockname(fd, (struct sockaddr *) &a, &len);
    *port = ntohs(a.sin_port);
    return fd;
}

static int echo_port;
static int echo_conns;

static void *echo_conn(void *arg) {
    int fd = (int) (intptr_t) arg;
    char c;
    while (recv(fd, &c, 1, 0) == 1)
        if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) break;
    close(fd);
    return NULL;
}

static void *echo_server(void *arg) {
    int lfd = (int) (intptr_t) arg;
    for (int i = 0; i < echo_conns; i++) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) break;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_t t;
        pthread_create(&t, NULL, echo_conn, (void *) (intptr_t) fd);
        pthread_detach(t);
    }
    close(lfd);
    return NULL;
}

static int tcp_client(void) {
    ccoip_socket_address_t a;
    ccoip_parse_address("127.0.0.1", (uint16_t) echo_port, &a);
    ccoip_status_t st;
    return ccoip_sock_connect(&a, 5000, &st);
}

static void *one_round_trip(void *arg) {
    (void) arg;
    int fd = tcp_client();
    char c = 'x';
    if (fd >= 0 && send(fd, &c, 1, MSG_NOSIGNAL) == 1) {
        ssize_t k = recv(fd, &c, 1, 0);
        (void) k;
    }
    ccoip_sock_close(fd);
    return NULL;
}

static void start_echo(int conns) {
    int lfd = listen_any(&echo_port);
    echo_conns = conns;
    pthread_t t;
    pthread_create(&t, NULL, echo_server, (void *) (intptr_t) lfd);
    pthread_detach(t);
}

static double baseline_connects(int n) {
    start_echo(n);
    pthread_t *t = calloc((size_t) n, sizeof *t);
    double t0 = now_s();
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, one_round_trip, NULL);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    double dt = now_s() - t0;
    free(t);
    return dt;
}

static double baseline_rtt(int iters) {
    start_echo(1);
    int fd = tcp_client();
    char c = 'x';
    double t0 = now_s();
    for (int i = 0; i < iters; i++) {
        if (send(fd, &c, 1, MSG_NOSIGNAL) != 1 || recv(fd, &c, 1, 0) != 1) break;
    }
    double dt = (now_s() - t0) / iters;
    ccoip_sock_close(fd);
    return dt;
}

/* ---- the vote benchmark ---- */

typedef struct voter_t {
    pthread_t thread;
    pcclComm_t *comm;
    int op; /* 0 pending vote, 1 update topology */
    double seconds;
} voter_t;

static void *vote_loop(void *arg) {
    voter_t *v = arg;
    bool pending;
    int iters = v->op == 0 ? VOTES : VOTES / 10;
    double t0 = now_s();
    for (int i = 0; i < iters; i++) {
        if (v->op == 0) pcclArePeersPending(v->comm, &pending);
        else pcclUpdateTopology(v->comm);
    }
    v->seconds = (now_s() - t0) / iters;
    return NULL;
}

static double vote_latency(voter_t *voters, peer_t *peers, int n, int op) {
    for (int i = 0; i < n; i++) {
        voters[i].comm = peers[i].comm;
        voters[i].op = op;
        pthread_create(&voters[i].thread, NULL, vote_loop, &voters[i]);
    }
    double sum = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(voters[i].thread, NULL);
        sum += voters[i].seconds;
    }
    return sum / n;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    ccoip_raise_fd_limit();
    if (getenv("PCCL_LOG_LEVEL") == NULL) setenv("PCCL_LOG_LEVEL", "error", 1);
    pcclInit();
    static peer_t peers[JOINERS];
    static voter_t voters[VOTERS];

    pid_t mpid;
    int ctl;
    int port = fork_master(&mpid, &ctl);
    if (port <= 0) return 1;
    usleep(100000);
    long rss_idle = rss_kb(mpid);
    fprintf(stderr, "bench: admitting %d peers\n", JOINERS);
    double t_admit = admit(peers, JOINERS, port);
    long rss_full = rss_kb(mpid);
    for (int i = 0; i < JOINERS; i++) pcclDestroyCommunicator(peers[i].comm);
    stop_master(mpid, ctl);
    double t_base = baseline_connects(JOINERS);
    printf("ccoip/admit_256_peers,%.4f,s,%.4f,%.2f\n", t_admit, t_base, t_admit / t_base);
    printf("ccoip/master_rss_256_peers,%.1f,MiB,%.1f,%.2f\n", rss_full / 1024.0, rss_idle / 1024.0,
           (double) rss_full / (double) rss_idle);

    port = fork_master(&mpid, &ctl);
    if (port <= 0) return 1;
    fprintf(stderr, "bench: %d voters\n", VOTERS);
    admit(peers, VOTERS, port);
    double rtt = baseline_rtt(2000);
    double vote = vote_latency(voters, peers, VOTERS, 0);
    double update = vote_latency(voters, peers, VOTERS, 1);
    for (int i = 0; i < VOTERS; i++) pcclDestroyCommunicator(peers[i].comm);
    stop_master(mpid, ctl);
    printf("ccoip/vote_rtt_64_peers,%.1f,us,%.1f,%.2f\n", vote * 1e6, rtt * 1e6, vote / rtt);
    printf("ccoip/update_topology_64_peers,%.2f,ms,%.3f,%.2f\n", update * 1e3, rtt * 1e3, update / rtt);
    fflush(stdout);
    return 0;
}
