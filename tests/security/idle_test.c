/* idle_test: 200 idle connections to every listener of a running 3-peer run (the master, and each
 * peer's p2p, shared-state and benchmark listeners), from another loopback address, must not
 * delay the next topology round, all-reduce and shared-state sync by more than a second over the
 * same steps measured just before (each listener used to handshake one connection at a time, up to
 * 2 s each: 200 idle connections stalled a round for minutes). Results stay exact.
 * Then a stranger at the peers' own address (as behind one NAT) holds 200 idle connections to the
 * master, over its cap of unjoined connections per address: a fourth peer from there must still
 * get in at once (its oldest silent ones are closed to make room), not after their handshake
 * timeout (5 s). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sec_util.h"
#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define NPEERS 3
#define IDLE 200
#define COUNT 200000

static h_proc_t peers[NPEERS + 1]; /* the last: the peer that joins past the squatter */
static int ports[NPEERS][3]; /* p2p, ss, bench */
static int round_no;

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* A connection from 127.0.0.2 that never says anything. */
static int idle_connect_from(int port, uint32_t from) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(from);
    if (bind(fd, (struct sockaddr *) &a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    a.sin_port = htons((uint16_t) port);
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (connect(fd, (struct sockaddr *) &a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int idle_connect(int port) { return idle_connect_from(port, 0x7f000002); }

static bool expect_all(const char *want, int timeout_ms) {
    char line[256];
    bool ok = true;
    for (int i = 0; i < NPEERS; i++) {
        bool got = h_read_line(&peers[i], line, sizeof line, timeout_ms);
        const char *w = want;
        char buf[64];
        if (strcmp(want, "ss") == 0) {
            snprintf(buf, sizeof buf, "ss 0 0 %d %d", round_no, i == 2 ? 262144 : 0);
            w = buf;
        }
        if (!got || strcmp(line, w) != 0) fprintf(stderr, "idle_test: peer %d: '%s' (want '%s')\n", i, got ? line : "-", w);
        ok = got && strcmp(line, w) == 0 && ok;
    }
    return ok;
}

/* One topology round, one all-reduce, one sync in which peer 2 fetches; the time in ms. */
static long steps(void) {
    long t0 = now_ms();
    CHECK(h_update_all(peers, NPEERS));
    char cmd[64];
    for (int i = 0; i < NPEERS; i++) {
        snprintf(cmd, sizeof cmd, "ar %d %d %d", COUNT, i, NPEERS);
        h_send(&peers[i], cmd);
    }
    CHECK(expect_all("ar 0 0", 60000));
    round_no++;
    for (int i = 0; i < NPEERS; i++) {
        snprintf(cmd, sizeof cmd, "ss %d %d", i == 2 ? 1000 + round_no : round_no, round_no);
        h_send(&peers[i], cmd);
    }
    CHECK(expect_all("ss", 60000));
    return now_ms() - t0;
}

int main(int argc, char **argv) {
    REQUIRE(argc >= 3);
    h_init(240);
    h_raise_fd_limit();
    char dir[200], file[256];
    snprintf(dir, sizeof dir, "%s/idle_test.XXXXXX", getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp");
    REQUIRE(mkdtemp(dir) != NULL);
    snprintf(file, sizeof file, "%s/run.secret", dir);
    REQUIRE(su_write_file(file, "idle test secret, long enough", 0600));
    h_proc_t m;
    const char *margs[] = {"--secret-file", file, NULL};
    int port = h_start_master(&m, argv[1], margs);
    REQUIRE(port > 0);
    setenv("PCCL_SECRET_FILE", file, 1);
    char line[256], ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    for (int i = 0; i < NPEERS; i++) {
        char *pargv[] = {argv[2], ps, NULL};
        REQUIRE(h_spawn(&peers[i], pargv));
        REQUIRE(h_send(&peers[i], "connect"));
        bool in = i == 0 && h_read_line(&peers[i], line, sizeof line, 30000);
        for (int attempt = 0; !in && attempt < 100; attempt++) {
            if (!h_update_all(peers, i)) continue;
            in = h_read_line(&peers[i], line, sizeof line, attempt < 10 ? 100 : 1000);
        }
        int r = -1;
        REQUIRE(in && sscanf(line, "connect %d %d %d %d", &r, &ports[i][0], &ports[i][1], &ports[i][2]) == 4 && r == 0);
    }
    steps(); /* warm up: links, staging blocks */
    long base = steps();
    long base2 = steps();
    if (base2 > base) base = base2;

    static int idle[(NPEERS * 3 + 1) * IDLE];
    int n = 0, opened = 0;
    for (int i = 0; i < IDLE; i++) {
        idle[n] = idle_connect(port);
        opened += idle[n++] >= 0;
        for (int p = 0; p < NPEERS; p++)
            for (int k = 0; k < 3; k++) {
                idle[n] = idle_connect(ports[p][k]);
                opened += idle[n++] >= 0;
            }
    }
    CHECK_EQ_U64(opened, n);
    long attacked = steps();
    long attacked2 = steps();
    fprintf(stderr, "idle_test: round + all-reduce + sync: %ld / %ld ms before, %ld / %ld ms with %d idle connections\n",
            base2, base, attacked, attacked2, n);
    CHECK(attacked <= base + 1000);
    CHECK(attacked2 <= base + 1000);
    for (int i = 0; i < n; i++)
        if (idle[i] >= 0) close(idle[i]);
    CHECK(steps() <= base + 1000);

    enum { SQUAT = 200 };
    int squat[SQUAT], held = 0;
    for (int i = 0; i < SQUAT; i++) {
        squat[i] = idle_connect_from(port, 0x7f000001);
        held += squat[i] >= 0;
    }
    CHECK_EQ_U64(held, SQUAT); /* TCP accepts them all; the master keeps 128 and closes the rest */
    usleep(1500 * 1000);       /* older than the master's eviction age */
    long t0 = now_ms();
    char *pargv[] = {argv[2], ps, NULL};
    REQUIRE(h_spawn(&peers[NPEERS], pargv));
    REQUIRE(h_send(&peers[NPEERS], "connect"));
    bool in = false;
    for (int attempt = 0; !in && attempt < 100; attempt++) {
        if (!h_update_all(peers, NPEERS)) continue;
        in = h_read_line(&peers[NPEERS], line, sizeof line, 100);
    }
    long join_ms = now_ms() - t0;
    fprintf(stderr, "idle_test: a peer joined in %ld ms past %d idle connections from its own address\n", join_ms,
            SQUAT);
    CHECK(in && strncmp(line, "connect 0", 9) == 0);
    CHECK(join_ms < 2500); /* the squatters' handshake timeout is 5 s */
    for (int i = 0; i < SQUAT; i++)
        if (squat[i] >= 0) close(squat[i]);
    h_send(&peers[NPEERS], "quit");
    CHECK(h_wait(&peers[NPEERS], 20000) == 0);
    for (int i = 0; i < NPEERS; i++) {
        h_send(&peers[i], "quit");
        CHECK(h_wait(&peers[i], 20000) == 0);
    }
    h_kill(&m, SIGTERM);
    CHECK(h_wait(&m, 10000) == 0);
    return check_exit();
}
