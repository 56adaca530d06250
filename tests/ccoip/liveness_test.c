/* Liveness and address checks with real processes:
 * - a peer that stops answering (SIGSTOP: its heartbeats stop) is dropped after the heartbeat
 *   timeout; the others' vote completes without it and the world shrinks; once resumed it
 *   finds its master connection gone (pcclMasterConnectionFailed);
 * - a peer that reaches the master via a public address is refused while loopback peers run
 *   (skipped when the host has no non-loopback IPv4 address). */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define T 30000

static char line[256];

static bool public_ipv4(char *out, size_t n) {
    struct ifaddrs *ifs, *i;
    bool found = false;
    if (getifaddrs(&ifs) != 0) return false;
    for (i = ifs; i != NULL && !found; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET) continue;
        const struct sockaddr_in *a = (const struct sockaddr_in *) i->ifa_addr;
        if ((ntohl(a->sin_addr.s_addr) >> 24) == 127) continue;
        found = inet_ntop(AF_INET, &a->sin_addr, out, (socklen_t) n) != NULL;
    }
    freeifaddrs(ifs);
    return found;
}

static void admit3(h_proc_t *p, const char *bin, int port) {
    for (int i = 0; i < 3; i++) {
        REQUIRE(h_start_peer(&p[i], bin, port, 0));
        REQUIRE(h_send(&p[i], "connect"));
        REQUIRE(h_admit(p, i, &p[i]));
    }
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(120);
    h_proc_t m, p[3];
    const char *opts[] = {"--heartbeat-timeout-ms", "1500", NULL};
    int port = h_start_master(&m, argv[1], opts);
    REQUIRE(port > 0);
    admit3(p, argv[2], port);

    h_kill(&p[2], SIGSTOP);
    for (int i = 0; i < 2; i++) REQUIRE(h_send(&p[i], "update"));
    for (int i = 0; i < 2; i++) {
        REQUIRE(h_read_line(&p[i], line, sizeof line, T));
        CHECK(strcmp(line, "update 0") == 0);
    }
    int g = -1;
    if (h_call(&p[0], "attrs", line, sizeof line, T) == 0) sscanf(line, "attrs %*d %d", &g);
    CHECK_EQ_U64(g, 2);
    h_kill(&p[2], SIGCONT);
    CHECK_EQ_U64(h_call(&p[2], "update", line, sizeof line, T), 6);
    for (int i = 0; i < 3; i++) {
        h_send(&p[i], "quit");
        CHECK_EQ_U64(h_wait(&p[i], T), 0);
    }
    h_kill(&m, SIGTERM);
    CHECK_EQ_U64(h_wait(&m, T), 0);

    char ip[64];
    if (!public_ipv4(ip, sizeof ip)) {
        fprintf(stderr, "liveness_test: no non-loopback IPv4 address: loopback-mix check skipped\n");
        return check_exit();
    }
    const char *any[] = {"--listen", "0.0.0.0:0", NULL};
    port = h_start_master(&m, argv[1], any);
    REQUIRE(port > 0);
    REQUIRE(h_start_peer(&p[0], argv[2], port, 0));
    CHECK_EQ_U64(h_call(&p[0], "connect", line, sizeof line, T), 0);
    char addr[96];
    snprintf(addr, sizeof addr, "%s:%d", ip, port);
    char *av[] = {(char *) argv[2], addr, "0", NULL};
    REQUIRE(h_spawn(&p[1], av));
    CHECK_EQ_U64(h_call(&p[1], "connect", line, sizeof line, T), 6); /* pcclMasterConnectionFailed */
    CHECK_EQ_U64(h_call(&p[0], "update", line, sizeof line, T), 0);
    for (int i = 0; i < 2; i++) {
        h_send(&p[i], "quit");
        CHECK_EQ_U64(h_wait(&p[i], T), 0);
    }
    h_kill(&m, SIGTERM);
    CHECK_EQ_U64(h_wait(&m, T), 0);
    return check_exit();
}
