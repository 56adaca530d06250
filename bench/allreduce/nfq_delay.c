/* nfq_delay QUEUE_NUM DELAY_MS [LOSS]: holds every packet of an iptables NFQUEUE for DELAY_MS,
 * then accepts it, in arrival order; drops each packet on arrival with probability LOSS (e.g.
 * 0.001), independently. This kernel has no netem (/work/shared/NETWORK.md); the WAN profile of
 * the benchmarks puts one of these behind `-j NFQUEUE --queue-num N` on each host's ingress.
 *
 * The loss is per wire packet: the queue is not in NFQA_CFG_F_GSO mode, so the kernel splits a
 * GSO batch (a sender's skb of up to ~45 segments) into its segments before queueing them, and
 * each gets its own verdict. (iptables' statistic match drops whole skbs instead: one loss event
 * of up to 64 KiB, and a slow flow's skbs are smaller, so several flows lost more per byte than
 * one.) On SIGTERM it prints how many packets it saw and dropped, then exits.
 *
 * Only packet ids are kept (copy mode META: no payload crosses to user space). */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <endian.h>

#ifndef NF_ACCEPT
#define NF_DROP 0 /* linux/netfilter.h clashes with netinet/in.h */
#define NF_ACCEPT 1
#endif

#define SLACK_NS 200000u /* 0.2 ms */
#define RING (1u << 17) /* packets held at once: 25 ms at 500 Mbit/s is ~1,100 full frames */

static uint32_t ids[RING];
static uint64_t due[RING];
static uint32_t head, count;
static uint64_t delay_ns;
static uint64_t loss_below; /* a packet is dropped when its random draw is below this */
static uint64_t rng_state;
static uint64_t seen, dropped;
static volatile sig_atomic_t stop;

static void on_term(int sig) {
    (void) sig;
    stop = 1;
}

/* splitmix64: a fast, well-mixed draw per packet. */
static uint64_t draw(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *data) {
    (void) msg;
    (void) data;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (ph == NULL) return 0;
    uint32_t id = be32toh(ph->packet_id);
    seen++;
    /* A drop verdict now takes the packet out of the queue: the batch verdicts below accept
     * only the ids still held. */
    if (loss_below != 0 && draw() < loss_below) {
        dropped++;
        return nfq_set_verdict(qh, id, NF_DROP, 0, NULL);
    }
    if (count == RING) return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL); /* full: pass undelayed */
    uint32_t k = (head + count++) % RING;
    ids[k] = id;
    due[k] = now_ns() + delay_ns;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: nfq_delay QUEUE_NUM DELAY_MS [LOSS]\n");
        return 2;
    }
    delay_ns = (uint64_t) (atof(argv[2]) * 1e6);
    double loss = argc > 3 ? atof(argv[3]) : 0;
    if (!(loss >= 0 && loss < 1)) {
        fprintf(stderr, "nfq_delay: LOSS must be in [0, 1): %s\n", argv[3]);
        return 2;
    }
    loss_below = (uint64_t) (loss * 18446744073709551616.0);
    rng_state = (uint64_t) now_ns() ^ ((uint64_t) atoi(argv[1]) << 48);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    struct nfq_handle *h = nfq_open();
    if (h == NULL) {
        perror("nfq_delay: nfq_open");
        return 1;
    }
    struct nfq_q_handle *qh = nfq_create_queue(h, (uint16_t) atoi(argv[1]), on_packet, NULL);
    if (qh == NULL || nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0) {
        perror("nfq_delay: queue");
        return 1;
    }
    nfq_set_queue_maxlen(qh, RING);
    nfnl_rcvbufsiz(nfq_nfnlh(h), 64u << 20);
    int fd = nfq_fd(h);
    static char buf[1 << 16];
    while (!stop) {
        uint64_t t = now_ns();
        /* Packet ids grow and every packet waits the same time, so the due ones are the oldest:
         * one batch verdict (every id up to the last due one) instead of one message each. With
         * many flows the packets get small (TSO autosizing at each flow's lower rate) and the
         * per-packet messages were what cost the CPU. */
        uint32_t last = 0;
        bool any = false;
        while (count > 0 && due[head] <= t) {
            last = ids[head];
            any = true;
            head = (head + 1) % RING;
            count--;
        }
        if (any) nfq_set_verdict_batch(qh, last, NF_ACCEPT);
        /* Wake at most every SLACK_NS: a batch per wake-up, the delay exact to within it. */
        uint64_t wait_ns = count > 0 ? due[head] - t + SLACK_NS : 1000000000u;
        struct timespec ts = {(time_t) (wait_ns / 1000000000u), (long) (wait_ns % 1000000000u)};
        struct pollfd pf = {fd, POLLIN, 0};
        /* ppoll sleeps to the nanosecond (hrtimer, ~50 us slack): no spinning through poll(0),
         * which kept each delay line at 100% CPU while packets flowed and starved the peers
         * on a 2-core box. */
        int r = ppoll(&pf, 1, &ts, NULL);
        if (r < 0 && errno != EINTR) return 1;
        if (r > 0) {
            ssize_t n;
            while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) nfq_handle_packet(h, buf, (int) n);
            if (n < 0 && errno == ENOBUFS) fprintf(stderr, "nfq_delay: queue %s overran\n", argv[1]);
        }
    }
    fprintf(stderr, "nfq_delay: queue %s: %llu packets, %llu dropped\n", argv[1], (unsigned long long) seen,
            (unsigned long long) dropped);
    nfq_destroy_queue(qh);
    nfq_close(h);
    return 0;
}
