/* ccoip_host_linux.c: what Linux offers beyond plain sockets: the open-file limit, /proc's
 * buffer ceilings and TCP_CONGESTION. */
#include "ccoip/net/ccoip_sys.h"

#include "ccoip/net/ccoip_os.h"

#include <pthread.h>
#include <stdio.h>

#include <limits.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

void ccoip_raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* First number in a /proc/sys file, the `field`-th (0-based); 0 when unreadable. */
static long sysctl_long(const char *path, int field) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    long v = 0;
    for (int i = 0; i <= field; i++)
        if (fscanf(f, "%ld", &v) != 1) v = 0;
    fclose(f);
    return v;
}

/* A long fat link (500 Mbit/s x 50 ms RTT = 3.1 MB in flight) needs more send buffer than
 * Linux autotuning grants by default (tcp_wmem max 4 MiB of truesize, ~half of it payload: one
 * stream measured 47 MB/s there). SO_SNDBUF = net.core.wmem_max gets twice that (the kernel
 * doubles the value for its overhead) at the price of autotuning; do it only when that is more
 * than autotuning may reach. Receive buffers stay autotuned (tcp_rmem max is large). */
static void widen_sndbuf(int fd) {
    long wmax = sysctl_long("/proc/sys/net/core/wmem_max", 0);
    long auto_max = sysctl_long("/proc/sys/net/ipv4/tcp_wmem", 2);
    if (wmax <= 0 || wmax > INT_MAX || 2 * wmax <= auto_max) return;
    int v = (int) wmax;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
}

/* A link within one host is memory, not a network: paced congestion control (BBR, a common
 * default) spends CPU on timers there for nothing (measured: a 4-peer loopback ring ran 1.2x
 * faster with cubic). Such links use cubic, or reno where cubic is not built in. Links between
 * hosts keep the system's choice. */
static void pick_congestion_control(int fd) {
    static const char *const names[] = {"cubic", "reno"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, names[i], (socklen_t) strlen(names[i])) == 0) return;
}

void ccoip_sock_tune_data_link(int fd, bool same_host) {
    widen_sndbuf(fd);
    if (same_host) pick_congestion_control(fd);
}

void ccoip_os_name_thread(const char *name) {
    char cut[16];
    snprintf(cut, sizeof cut, "%s", name); /* linux refuses names over 15 bytes */
    pthread_setname_np(pthread_self(), cut);
}
