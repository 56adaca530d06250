/* flood_test: while 3 peers all-reduce (exact every time), an attacker thread makes 10,000
 * connect/close cycles against the master and sends it 100,000 mutated packets, seeded with the
 * packets a real peer sent (recorded through a proxy) and a few the codec builds. Half of the
 * mutated streams come from outsiders (mutated HELLO/AUTH: they never get past the proof), half
 * from a client that holds the secret (a valid handshake, then mutated post-handshake packets:
 * the master's parser and state in every phase). The master must not crash, its RSS must stay
 * bounded, every all-reduce must stay exact, and the run must still admit a topology round. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
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
#define COUNT 50000
#define CYCLES 10000
#define PACKETS 100000
#define MAX_SEEDS 128
#define SECRET "flood test secret, long enough"
/* The master's RSS may grow this much during the flood. A plain build grows ~0.3 MiB; the
 * sanitizers' allocators keep freed blocks and shadow pages (TSan: 9-69 MiB over a few runs). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_GROWTH_KB (256 * 1024)
#else
#define RSS_GROWTH_KB (16 * 1024)
#endif

static h_proc_t peers[NPEERS];
static int master_port;
static ccoip_auth_key_t key;

typedef struct seed_t {
    uint8_t b[512];
    size_t n;
} seed_t;
static seed_t seeds[MAX_SEEDS]; /* post-handshake frames */
static int nseeds;
static seed_t hs_seeds[2];     /* HELLO, AUTH */

static atomic_bool flood_done;
static atomic_long sent_packets, cycles_done, conns_made;

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void add_seed(seed_t *s, const uint8_t *b, size_t n) {
    if (n > sizeof s->b) return;
    memcpy(s->b, b, n);
    s->n = n;
}

/* Cuts the recorded client -> master stream into frames. */
static void seeds_from_capture(const uint8_t *b, size_t n) {
    size_t pos = 0;
    int k = 0;
    while (pos + CCOIP_HEADER_SIZE <= n) {
        uint16_t type;
        uint32_t len;
        if (ccoip_frame_peek(b + pos, n - pos, CCOIP_MAX_PAYLOAD, &type, &len) != CCOIP_OK) break;
        if (pos + CCOIP_HEADER_SIZE + len > n) break;
        if (k < 2) add_seed(&hs_seeds[k], b + pos, CCOIP_HEADER_SIZE + len);
        else if (nseeds < MAX_SEEDS) add_seed(&seeds[nseeds++], b + pos, CCOIP_HEADER_SIZE + len);
        pos += CCOIP_HEADER_SIZE + len;
        k++;
    }
}

static void seed_from_packet(const ccoip_packet_t *p) {
    ccoip_writer_t w;
    ccoip_writer_init(&w, 1 << 16);
    if (ccoip_packet_encode(p, &w) == CCOIP_OK && nseeds < MAX_SEEDS) add_seed(&seeds[nseeds++], w.buf, w.len);
    ccoip_writer_free(&w);
}

static void codec_seeds(void) {
    ccoip_packet_t p;
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_JOIN;
    p.u.join = (ccoip_join_t){0, 48200, 48201, 48202, 0, {0}, 0, {0}};
    seed_from_packet(&p);
    ccoip_ss_tensor_t t = {"weights", 77, 0, 4, 1024, 0};
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_SHARED_STATE_SYNC;
    p.u.ss_sync.revision = 3;
    p.u.ss_sync.count = 1;
    p.u.ss_sync.tensors = &t;
    seed_from_packet(&p);
    ccoip_bench_result_t r = {{{1}}, 1000};
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_BANDWIDTH_REPORT;
    p.u.bench_report.count = 1;
    p.u.bench_report.results = &r;
    seed_from_packet(&p);
    memset(&p, 0, sizeof p);
    p.type = CCOIP_PKT_C2M_COLLECTIVE_INIT;
    p.u.collective_init = (ccoip_collective_init_t){5, 1000, 10, 0, 10, 0};
    seed_from_packet(&p);
}

/* One mutation of a frame into out (at most cap bytes); returns its length. */
static size_t mutate(const seed_t *s, uint8_t *out, size_t cap, unsigned *rng) {
    static const uint8_t interesting[] = {0, 1, 2, 0x7f, 0x80, 0xfe, 0xff};
    size_t n = s->n;
    memcpy(out, s->b, n);
    int rounds = 1 + (int) (rand_r(rng) % 3);
    bool fix_len = rand_r(rng) % 4 != 0;
    for (int r = 0; r < rounds; r++) {
        switch (rand_r(rng) % 8) {
        case 0: out[rand_r(rng) % n] ^= (uint8_t) (1u << (rand_r(rng) % 8)); break;
        case 1: out[rand_r(rng) % n] = interesting[rand_r(rng) % sizeof interesting]; break;
        case 2: if (n > CCOIP_HEADER_SIZE) n = CCOIP_HEADER_SIZE + rand_r(rng) % (n - CCOIP_HEADER_SIZE); break;
        case 3: /* extend with random bytes */
            for (int k = (int) (rand_r(rng) % 16); k > 0 && n < cap; k--) out[n++] = (uint8_t) rand_r(rng);
            break;
        case 4: { /* another known type */
            static const uint16_t types[] = {0x0001, 0x0003, 0x0101, 0x0102, 0x0103, 0x0104, 0x0105, 0x0110, 0x0111,
                                             0x0112, 0x0120, 0x0121, 0x0122, 0x0130, 0x0131, 0x0201, 0x0301};
            uint16_t t = types[rand_r(rng) % (sizeof types / sizeof types[0])];
            out[4] = (uint8_t) (t >> 8);
            out[5] = (uint8_t) t;
            break;
        }
        case 5: { /* a count or length field: an interesting 32-bit value somewhere in the payload */
            if (n < CCOIP_HEADER_SIZE + 4) break;
            size_t at = CCOIP_HEADER_SIZE + rand_r(rng) % (n - CCOIP_HEADER_SIZE - 3);
            static const uint32_t big[] = {0xffffffffu, 0x7fffffffu, 65536, 65537, 1024, 1025, 0};
            uint32_t v = big[rand_r(rng) % (sizeof big / sizeof big[0])];
            for (int i = 0; i < 4; i++) out[at + (size_t) i] = (uint8_t) (v >> (24 - 8 * i));
            break;
        }
        case 6: fix_len = false; /* keep whatever the length says */
            out[rand_r(rng) % 4] = interesting[rand_r(rng) % sizeof interesting];
            break;
        default: { /* splice the tail of another seed */
            const seed_t *o = &seeds[rand_r(rng) % (unsigned) nseeds];
            size_t from = rand_r(rng) % o->n, take = o->n - from;
            if (n + take > cap) take = cap - n;
            memcpy(out + n, o->b + from, take);
            n += take;
            break;
        }
        }
    }
    if (fix_len && n >= CCOIP_HEADER_SIZE) {
        uint32_t len = (uint32_t) (n - CCOIP_HEADER_SIZE);
        for (int i = 0; i < 4; i++) out[i] = (uint8_t) (len >> (24 - 8 * i));
    }
    return n;
}

/* A valid authenticated handshake on fd (the test holds the secret). */
static bool handshake(int fd) {
    ccoip_packet_t h = su_hello(CCOIP_ROLE_PEER_TO_MASTER, NULL, CCOIP_HELLO_F_SECRET), r, v;
    if (!su_send(fd, &h) || !su_recv(fd, &r, 5000) || r.type != CCOIP_PKT_HELLO_ACK || r.u.hello_ack.status != 0)
        return false;
    ccoip_packet_t a;
    memset(&a, 0, sizeof a);
    a.type = CCOIP_PKT_AUTH;
    a.u.auth.ok = 1;
    ccoip_auth_mac(&key, CCOIP_AUTH_CONNECTOR, &h.u.hello, &r.u.hello_ack, a.u.auth.mac);
    return su_send(fd, &a) && su_recv(fd, &v, 5000) && v.type == CCOIP_PKT_AUTH_RESULT && v.u.auth_result.status == 0;
}

static void *flood_main(void *arg) {
    (void) arg;
    unsigned rng = 20261124;
    uint8_t buf[64 * 1024];
    for (int i = 0; i < CYCLES; i++) { /* connect / close, sometimes with half a HELLO */
        int fd = h_tcp_connect(master_port);
        if (fd < 0) continue;
        if (i % 3 == 0) su_send_bytes(fd, hs_seeds[0].b, hs_seeds[0].n / 2);
        close(fd);
        atomic_fetch_add(&cycles_done, 1);
    }
    for (long conn = 0; atomic_load(&sent_packets) < PACKETS; conn++) {
        int fd = h_tcp_connect(master_port);
        if (fd < 0) continue;
        atomic_fetch_add(&conns_made, 1);
        bool insider = conn % 2 == 1;
        if (insider && !handshake(fd)) {
            close(fd);
            continue;
        }
        size_t n = 0;
        int k = 0;
        for (; k < 32 && n + 1024 < sizeof buf; k++) {
            const seed_t *s = insider ? &seeds[rand_r(&rng) % (unsigned) nseeds] : &hs_seeds[rand_r(&rng) % 2];
            /* some frames unchanged, so that later mutations meet later phases */
            if (rand_r(&rng) % 4 == 0) {
                memcpy(buf + n, s->b, s->n);
                n += s->n;
            } else {
                n += mutate(s, buf + n, 1024, &rng);
            }
        }
        su_send_bytes(fd, buf, n); /* the master may close after the first bad frame: fine */
        atomic_fetch_add(&sent_packets, k);
        h_await_close(fd, 20, NULL, NULL);
        close(fd);
    }
    atomic_store(&flood_done, true);
    return NULL;
}

static bool allreduce_exact(void) {
    char cmd[64], line[256];
    bool ok = true;
    for (int i = 0; i < NPEERS; i++) {
        snprintf(cmd, sizeof cmd, "ar %d %d %d", COUNT, i, NPEERS);
        h_send(&peers[i], cmd);
    }
    for (int i = 0; i < NPEERS; i++) {
        bool got = h_read_line(&peers[i], line, sizeof line, 60000);
        if (!got || strcmp(line, "ar 0 0") != 0) fprintf(stderr, "flood_test: peer %d: '%s'\n", i, got ? line : "-");
        ok = got && strcmp(line, "ar 0 0") == 0 && ok;
    }
    return ok;
}

int main(int argc, char **argv) {
    REQUIRE(argc >= 3);
    h_init(600);
    h_raise_fd_limit();
    REQUIRE(ccoip_auth_init());
    ccoip_auth_derive(SECRET, strlen(SECRET), &key);
    char dir[200], file[256], mlog[256];
    snprintf(dir, sizeof dir, "%s/flood_test.XXXXXX", getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp");
    REQUIRE(mkdtemp(dir) != NULL);
    snprintf(file, sizeof file, "%s/run.secret", dir);
    snprintf(mlog, sizeof mlog, "%s/master.log", dir);
    REQUIRE(su_write_file(file, SECRET, 0600));
    h_proc_t m;
    h_stderr_path = mlog; /* thousands of refusals: keep them out of the test log */
    const char *margs[] = {"--secret-file", file, NULL};
    master_port = h_start_master(&m, argv[1], margs);
    REQUIRE(master_port > 0);
    su_proxy_t proxy;
    int proxy_port = su_proxy_start(&proxy, master_port);
    REQUIRE(proxy_port > 0);
    setenv("PCCL_SECRET_FILE", file, 1);
    char line[256], ps[16];
    for (int i = 0; i < NPEERS; i++) {
        snprintf(ps, sizeof ps, "%d", i == 0 ? proxy_port : master_port);
        char *pargv[] = {argv[2], ps, NULL};
        REQUIRE(h_spawn(&peers[i], pargv));
        REQUIRE(h_send(&peers[i], "connect"));
        bool in = i == 0 && h_read_line(&peers[i], line, sizeof line, 30000);
        for (int attempt = 0; !in && attempt < 100; attempt++) {
            if (!h_update_all(peers, i)) continue;
            in = h_read_line(&peers[i], line, sizeof line, attempt < 10 ? 100 : 1000);
        }
        REQUIRE(in && strncmp(line, "connect 0 ", 10) == 0);
    }
    REQUIRE(allreduce_exact());
    REQUIRE(allreduce_exact());
    usleep(1200 * 1000); /* a heartbeat into the capture */
    static uint8_t rec[4096];
    size_t nrec = su_proxy_copy(&proxy, true, rec, sizeof rec);
    seeds_from_capture(rec, nrec);
    codec_seeds();
    fprintf(stderr, "flood_test: %d post-handshake seeds from %zu recorded bytes and the codec\n", nseeds, nrec);
    REQUIRE(hs_seeds[0].n > 0 && hs_seeds[1].n > 0 && nseeds >= 8);

    long rss0 = h_rss_kb(m.pid), rss_max = rss0;
    long t0 = now_ms();
    pthread_t flood;
    REQUIRE(pthread_create(&flood, NULL, flood_main, NULL) == 0);
    int rounds = 0, bad = 0;
    while (!atomic_load(&flood_done)) {
        bad += !allreduce_exact();
        rounds++;
        long rss = h_rss_kb(m.pid);
        if (rss > rss_max) rss_max = rss;
        CHECK(rss > 0); /* alive */
        if (rss <= 0) break;
    }
    pthread_join(flood, NULL);
    long ms = now_ms() - t0;
    fprintf(stderr, "flood_test: %ld cycles, %ld mutated packets on %ld connections in %ld ms; %d exact all-reduces "
                    "meanwhile (%d wrong); master RSS %ld KiB before, %ld KiB at most\n",
            atomic_load(&cycles_done), atomic_load(&sent_packets), atomic_load(&conns_made), ms, rounds, bad, rss0,
            rss_max);
    CHECK(bad == 0 && rounds > 0);
    CHECK_EQ_U64(atomic_load(&cycles_done), CYCLES);
    CHECK(atomic_load(&sent_packets) >= PACKETS);
    CHECK(rss_max < rss0 + RSS_GROWTH_KB);
    /* Still serving: exact, and a topology round among the members (the flood's connections,
     * joined ones included, closed before this). */
    CHECK(allreduce_exact());
    usleep(1000 * 1000);
    CHECK(h_update_all(peers, NPEERS));
    CHECK(allreduce_exact());
    for (int i = 0; i < NPEERS; i++) {
        h_send(&peers[i], "quit");
        CHECK(h_wait(&peers[i], 20000) == 0);
    }
    h_kill(&m, SIGTERM);
    CHECK(h_wait(&m, 20000) == 0);
    return check_exit();
}
