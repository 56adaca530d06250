/* shmpipe_test: the shared-memory pipe between two real processes over a real mapping (the
 * child opens the segment by name, as a peer does): exact bytes for odd sizes and wrap-around, a
 * writer parked on a full ring and a reader parked on an empty one (woken by the other process,
 * using no CPU while parked), the other process SIGKILLed mid-transfer (both directions: the
 * survivor returns GONE through its socket check within a second), shut from another process,
 * an idle reader asleep on the socket (woken by a write, the writer's SIGKILL, a shut from either
 * process, CORRUPT on noise; two sleeps in 1.5 s of idle time, not a tick's 15),
 * garbage head/tail values (CORRUPT, no copy outside the ring), and the leftovers of a creator
 * that died before the other side opened its segment (removed by the next creation). Linux only (elsewhere the
 * segment calls say "unsupported" and the test checks just that). */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ccoip/net/ccoip_shm.h"
#include "ccoip/net/ccoip_shmpipe.h"
#include "tests/common/check.h"
#include "tests/common/clock.h"

#define RING (64u << 10)

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static uint8_t pattern(uint64_t i) { return (uint8_t) (i * 131 + (i >> 11) + 7); }

/* What the creator tells the other process: the segment's name and token. */
typedef struct offer {
    char name[CCOIP_SHM_NAME_MAX];
    uint8_t token[CCOIP_SHMPIPE_TOKEN];
} offer_t;

static offer_t offer_of(const ccoip_shmpipe_t *p) {
    offer_t o;
    memset(&o, 0, sizeof o);
    snprintf(o.name, sizeof o.name, "%s", ccoip_shmpipe_segment(p));
    memcpy(o.token, p->token, sizeof o.token);
    return o;
}

static int sp[2]; /* socketpair: sp[0] the parent's, sp[1] the child's */

static void send_offer(int fd, const offer_t *o) { REQUIRE(write(fd, o, sizeof *o) == (ssize_t) sizeof *o); }
static void recv_offer(int fd, offer_t *o) { REQUIRE(read(fd, o, sizeof *o) == (ssize_t) sizeof *o); }

/* Child: opens by name and reads `total` bytes in pieces of the sizes given, checking every one;
 * sleeps first when asked (the parent's writer parks meanwhile). Exit 0 when all were right. */
static int child_reader(const offer_t *o, uint64_t total, const size_t *pieces, size_t npieces, int delay_ms) {
    ccoip_shmpipe_t p;
    if (!ccoip_shmpipe_open(&p, o->name, RING, o->token, "child reader")) return 10;
    ccoip_shmpipe_unlink(&p);
    if (write(sp[1], "o", 1) != 1) return 11; /* opened */
    if (delay_ms) usleep((useconds_t) delay_ms * 1000);
    static uint8_t buf[300000];
    uint64_t at = 0;
    for (size_t k = 0; at < total; k++) {
        size_t n = pieces[k % npieces];
        if (n > total - at) n = (size_t) (total - at);
        if (ccoip_shmpipe_read(&p, buf, n) != CCOIP_SHMPIPE_OK) return 12;
        for (size_t i = 0; i < n; i++)
            if (buf[i] != pattern(at + i)) return 13;
        at += n;
    }
    ccoip_shmpipe_close(&p);
    return 0;
}

static int wait_child(pid_t pid) {
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Writes total bytes of the pattern in pieces of odd sizes. */
static int write_pattern(ccoip_shmpipe_t *p, uint64_t total, const size_t *pieces, size_t npieces) {
    static uint8_t buf[300000];
    uint64_t at = 0;
    for (size_t k = 0; at < total; k++) {
        size_t n = pieces[k % npieces];
        if (n > total - at) n = (size_t) (total - at);
        for (size_t i = 0; i < n; i++) buf[i] = pattern(at + i);
        int rc = ccoip_shmpipe_write(p, buf, n);
        if (rc != CCOIP_SHMPIPE_OK) return rc;
        at += n;
    }
    return CCOIP_SHMPIPE_OK;
}

/* Odd sizes, across the ring's end many times; then a writer parked on a full ring. */
static void exact_bytes(int reader_delay_ms) {
    static const size_t wpieces[] = {1, 3, 20, 4097, 65535, 65536, 65537, 200001, 7};
    static const size_t rpieces[] = {20, 1, 65536, 131071, 5, 9999};
    const uint64_t total = reader_delay_ms ? 3 * RING : (uint64_t) 40 << 20;
    ccoip_shmpipe_t p;
    REQUIRE(ccoip_shmpipe_create(&p, RING, "parent writer"));
    ccoip_shmpipe_watch(&p, sp[0]);
    offer_t o = offer_of(&p);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(child_reader(&o, total, rpieces, sizeof rpieces / sizeof rpieces[0], reader_delay_ms));
    char c;
    REQUIRE(read(sp[0], &c, 1) == 1);
    double t0 = now_s(), c0 = cpu_s();
    CHECK(write_pattern(&p, total, wpieces, sizeof wpieces / sizeof wpieces[0]) == CCOIP_SHMPIPE_OK);
    double took = now_s() - t0, cpu = cpu_s() - c0;
    CHECK(wait_child(pid) == 0);
    if (reader_delay_ms) {
        /* The writer filled the ring, parked until the reader came, and burnt no CPU meanwhile. */
        CHECK(took > reader_delay_ms * 0.8e-3);
        CHECK(cpu < 0.05);
        fprintf(stderr, "full ring: the writer waited %.0f ms using %.1f ms of CPU\n", took * 1e3, cpu * 1e3);
    }
    ccoip_shmpipe_close(&p);
}

/* The child creates and writes after a pause; the parent reads, parked on an empty ring. */
static void reader_parks(void) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ccoip_shmpipe_t p;
        if (!ccoip_shmpipe_create(&p, RING, "child writer")) _exit(10);
        offer_t o = offer_of(&p);
        send_offer(sp[1], &o);
        usleep(300 * 1000);
        static const size_t pieces[] = {1000, 77777};
        _exit(write_pattern(&p, 500000, pieces, 2) == CCOIP_SHMPIPE_OK ? 0 : 11);
    }
    offer_t o;
    recv_offer(sp[0], &o);
    ccoip_shmpipe_t p;
    REQUIRE(ccoip_shmpipe_open(&p, o.name, RING, o.token, "parent reader"));
    ccoip_shmpipe_unlink(&p);
    static uint8_t buf[500000];
    double t0 = now_s(), c0 = cpu_s();
    CHECK(ccoip_shmpipe_read(&p, buf, 1) == CCOIP_SHMPIPE_OK);
    double took = now_s() - t0, cpu = cpu_s() - c0;
    CHECK(took > 0.2 && cpu < 0.05);
    fprintf(stderr, "empty ring: the reader waited %.0f ms using %.1f ms of CPU\n", took * 1e3, cpu * 1e3);
    CHECK(ccoip_shmpipe_read(&p, buf + 1, sizeof buf - 1) == CCOIP_SHMPIPE_OK);
    int bad = 0;
    for (size_t i = 0; i < sizeof buf; i++) bad += buf[i] != pattern(i);
    CHECK(bad == 0);
    CHECK(wait_child(pid) == 0);
    ccoip_shmpipe_close(&p);
}

/* The other process dies (SIGKILL) mid-transfer: the survivor's call returns GONE within a
 * second (its socket saw the end close), whether it writes or reads. */
static void peer_killed(bool survivor_writes) {
    int pair[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(pair[0]);
        ccoip_shmpipe_t p;
        static uint8_t buf[1 << 20];
        if (survivor_writes) { /* the child reads slowly until it is killed */
            offer_t o;
            recv_offer(pair[1], &o);
            if (!ccoip_shmpipe_open(&p, o.name, RING, o.token, "child reader")) _exit(10);
            if (write(pair[1], "o", 1) != 1) _exit(11);
            for (;;) {
                if (ccoip_shmpipe_read(&p, buf, 1000) != CCOIP_SHMPIPE_OK) _exit(12);
                usleep(1000);
            }
        }
        if (!ccoip_shmpipe_create(&p, RING, "child writer")) _exit(10);
        offer_t o = offer_of(&p);
        send_offer(pair[1], &o);
        char c;
        if (read(pair[1], &c, 1) != 1) _exit(11); /* opened: an offered ring is empty until then */
        ccoip_shmpipe_watch(&p, pair[1]); /* rings the reader should it sleep on the socket (slow runs) */
        for (;;) /* the writer streams until it is killed */
            if (ccoip_shmpipe_write(&p, buf, sizeof buf) != CCOIP_SHMPIPE_OK) _exit(12);
    }
    close(pair[1]);
    ccoip_shmpipe_t p;
    static uint8_t buf[1 << 20];
    if (survivor_writes) {
        REQUIRE(ccoip_shmpipe_create(&p, RING, "parent writer"));
        offer_t o = offer_of(&p);
        send_offer(pair[0], &o);
        char c;
        REQUIRE(read(pair[0], &c, 1) == 1);
        ccoip_shmpipe_unlink(&p);
    } else {
        offer_t o;
        recv_offer(pair[0], &o);
        REQUIRE(ccoip_shmpipe_open(&p, o.name, RING, o.token, "parent reader"));
        ccoip_shmpipe_unlink(&p);
        REQUIRE(write(pair[0], "o", 1) == 1);
    }
    ccoip_shmpipe_watch(&p, pair[0]);
    /* Move data for a while, then kill the child mid-transfer. */
    int rc = CCOIP_SHMPIPE_OK;
    double t_kill = 0, t_start = now_s();
    while (rc == CCOIP_SHMPIPE_OK && now_s() - t_start < 10) {
        if (t_kill == 0 && now_s() - t_start > 0.2) {
            kill(pid, SIGKILL);
            t_kill = now_s();
        }
        rc = survivor_writes ? ccoip_shmpipe_write(&p, buf, sizeof buf) : ccoip_shmpipe_read(&p, buf, sizeof buf);
    }
    double latency = now_s() - t_kill;
    CHECK(t_kill > 0 && rc == CCOIP_SHMPIPE_GONE && latency < 1.0);
    fprintf(stderr, "%s killed mid-transfer: the %s returned %d after %.0f ms\n", survivor_writes ? "reader" : "writer",
            survivor_writes ? "writer" : "reader", rc, latency * 1e3);
    CHECK(wait_child(pid) == 100 + SIGKILL);
    ccoip_shmpipe_close(&p);
    close(pair[0]);
}

/* The reader's process shuts the pipe while the writer is parked on a full ring: it returns
 * CLOSED at once (no tick needed). */
static void shut_from_other_process(void) {
    ccoip_shmpipe_t p;
    REQUIRE(ccoip_shmpipe_create(&p, RING, "parent writer"));
    offer_t o = offer_of(&p);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ccoip_shmpipe_t q;
        if (!ccoip_shmpipe_open(&q, o.name, RING, o.token, "child")) _exit(10);
        if (write(sp[1], "o", 1) != 1) _exit(11);
        usleep(200 * 1000);
        ccoip_shmpipe_shut(&q);
        _exit(0);
    }
    ccoip_shmpipe_watch(&p, sp[0]);
    char c;
    REQUIRE(read(sp[0], &c, 1) == 1);
    static uint8_t buf[2 * RING];
    double t0 = now_s();
    CHECK(ccoip_shmpipe_write(&p, buf, sizeof buf) == CCOIP_SHMPIPE_CLOSED);
    double took = now_s() - t0;
    CHECK(took > 0.15 && took < 0.5);
    CHECK(wait_child(pid) == 0);
    ccoip_shmpipe_close(&p);
}

/* This thread's voluntary context switches so far: one per sleep. */
static long thread_sleeps(void) {
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_nvcsw;
}

/* How the other process ends the idle reader's wait in idle_reader(). */
enum { IDLE_WRITES, IDLE_KILLED, IDLE_SHUTS, IDLE_NOISE, IDLE_LOCAL_SHUT };

/* A thread of ours that, after delay_ms, shuts the pipe p or kills the process pid. */
typedef struct later {
    ccoip_shmpipe_t *p;
    pid_t pid;
    int delay_ms;
} later_t;

static void *act_later(void *arg) {
    later_t *l = arg;
    usleep((useconds_t) l->delay_ms * 1000);
    if (l->p != NULL) ccoip_shmpipe_shut(l->p);
    if (l->pid > 0) kill(l->pid, SIGKILL);
    return NULL;
}

/* A reader parked on an idle pipe (both sides watching their ends of a socketpair, as the data
 * link's do): after one quiet tick it sleeps on the socket and wakes no more, however long the
 * pipe stays idle, until the other process writes (rung: exact bytes), dies (SIGKILL: GONE as
 * soon as the socket closes, no tick to wait for), shuts the pipe (CLOSED), or puts a byte that is
 * no doorbell on the socket (CORRUPT); or until a thread of ours shuts the pipe (CLOSED: the
 * teardown never waits). */
static void idle_reader(int how) {
    static const char *names[] = {"writes", "is killed", "shuts", "sends noise", "(our thread shuts)"};
    const int idle_ms = 1500;
    int pair[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(pair[0]);
        ccoip_shmpipe_t p;
        if (!ccoip_shmpipe_create(&p, RING, "child writer")) _exit(10);
        ccoip_shmpipe_watch(&p, pair[1]);
        offer_t o = offer_of(&p);
        send_offer(pair[1], &o);
        char c;
        if (read(pair[1], &c, 1) != 1) _exit(11); /* opened */
        if (how == IDLE_KILLED || how == IDLE_LOCAL_SHUT) pause();
        usleep((useconds_t) idle_ms * 1000);
        if (how == IDLE_SHUTS) ccoip_shmpipe_shut(&p);
        if (how == IDLE_NOISE && write(pair[1], "x", 1) != 1) _exit(12);
        static const size_t pieces[] = {1000, 77777};
        if (how == IDLE_WRITES && write_pattern(&p, 300000, pieces, 2) != CCOIP_SHMPIPE_OK) _exit(13);
        pause(); /* killed by the parent once it checked */
    }
    close(pair[1]);
    offer_t o;
    recv_offer(pair[0], &o);
    ccoip_shmpipe_t p;
    REQUIRE(ccoip_shmpipe_open(&p, o.name, RING, o.token, "parent reader"));
    ccoip_shmpipe_unlink(&p);
    ccoip_shmpipe_watch(&p, pair[0]);
    REQUIRE(write(pair[0], "o", 1) == 1);
    pthread_t t;
    later_t l = {how == IDLE_LOCAL_SHUT ? &p : NULL, how == IDLE_KILLED ? pid : 0, idle_ms};
    bool acts = how == IDLE_LOCAL_SHUT || how == IDLE_KILLED;
    if (acts) REQUIRE(pthread_create(&t, NULL, act_later, &l) == 0);

    static uint8_t buf[300000];
    double t0 = now_s();
    long s0 = thread_sleeps();
    int rc = ccoip_shmpipe_read(&p, buf, 1);
    double t_end = now_s();
    long sleeps = thread_sleeps() - s0;
    double waited = t_end - t0, late = waited - idle_ms * 1e-3;
    static const int want[] = {CCOIP_SHMPIPE_OK, CCOIP_SHMPIPE_GONE, CCOIP_SHMPIPE_CLOSED, CCOIP_SHMPIPE_CORRUPT,
                               CCOIP_SHMPIPE_CLOSED};
    CHECK_EQ_U64(rc, want[how]);
    /* 15 ticks of idle time cost the futex's one tick and the socket's wake-up (a few more when a
     * busy machine wakes poll() spuriously), not 15. */
    CHECK(sleeps <= 4);
    /* Ended by the other side's act, not by a tick after it. */
    CHECK(late > -0.05 && late < 0.5);
    fprintf(stderr, "idle reader, the other side %s after %d ms: rc %d after %.1f ms more, %ld sleeps\n", names[how],
            idle_ms, rc, late * 1e3, sleeps);
    if (how == IDLE_WRITES) {
        CHECK(ccoip_shmpipe_read(&p, buf + 1, sizeof buf - 1) == CCOIP_SHMPIPE_OK);
        int bad = 0;
        for (size_t i = 0; i < sizeof buf; i++) bad += buf[i] != pattern(i);
        CHECK(bad == 0);
    }
    if (acts) pthread_join(t, NULL);
    if (how != IDLE_KILLED) kill(pid, SIGKILL);
    CHECK(wait_child(pid) == 100 + SIGKILL);
    ccoip_shmpipe_close(&p);
    close(pair[0]);
}

/* Garbage in the counters the other side writes: CORRUPT, and nothing copied. */
static void garbage_counters(void) {
    static const uint64_t bad_heads[] = {RING + 1, UINT64_MAX, (uint64_t) 1 << 63};
    for (size_t k = 0; k < sizeof bad_heads / sizeof bad_heads[0]; k++) {
        ccoip_shmpipe_t w, r;
        REQUIRE(ccoip_shmpipe_create(&w, RING, "writer"));
        offer_t o = offer_of(&w);
        REQUIRE(ccoip_shmpipe_open(&r, o.name, RING, o.token, "reader"));
        uint8_t in[100], out[100];
        memset(in, 0x5A, sizeof in);
        memset(out, 0, sizeof out);
        REQUIRE(ccoip_shmpipe_write(&w, in, sizeof in) == CCOIP_SHMPIPE_OK);
        REQUIRE(ccoip_shmpipe_read(&r, out, 50) == CCOIP_SHMPIPE_OK);
        __atomic_store_n(ccoip_shmpipe_head_word(&w), 50 + bad_heads[k], __ATOMIC_RELEASE); /* head - tail > ring */
        memset(out, 0, sizeof out);
        CHECK(ccoip_shmpipe_read(&r, out, 50) == CCOIP_SHMPIPE_CORRUPT);
        CHECK(out[0] == 0);
        ccoip_shmpipe_close(&r);
        ccoip_shmpipe_close(&w);
    }
    /* A head behind our tail (the counter ran backwards) is as impossible. */
    ccoip_shmpipe_t w, r;
    REQUIRE(ccoip_shmpipe_create(&w, RING, "writer"));
    offer_t o = offer_of(&w);
    REQUIRE(ccoip_shmpipe_open(&r, o.name, RING, o.token, "reader"));
    uint8_t b[100] = {0};
    REQUIRE(ccoip_shmpipe_write(&w, b, sizeof b) == CCOIP_SHMPIPE_OK);
    REQUIRE(ccoip_shmpipe_read(&r, b, sizeof b) == CCOIP_SHMPIPE_OK);
    __atomic_store_n(ccoip_shmpipe_head_word(&w), 10, __ATOMIC_RELEASE);
    CHECK(ccoip_shmpipe_read(&r, b, 1) == CCOIP_SHMPIPE_CORRUPT);
    /* The writer side: a tail ahead of what was written, or far behind. */
    __atomic_store_n(ccoip_shmpipe_tail_word(&r), 101, __ATOMIC_RELEASE);
    CHECK(ccoip_shmpipe_write(&w, b, 1) == CCOIP_SHMPIPE_CORRUPT);
    __atomic_store_n(ccoip_shmpipe_tail_word(&r), UINT64_MAX - RING, __ATOMIC_RELEASE);
    CHECK(ccoip_shmpipe_write(&w, b, 1) == CCOIP_SHMPIPE_CORRUPT);
    ccoip_shmpipe_close(&r);
    ccoip_shmpipe_close(&w);
    /* A segment whose token differs (not the memory offered) is refused. */
    REQUIRE(ccoip_shmpipe_create(&w, RING, "writer"));
    o = offer_of(&w);
    o.token[3] ^= 1;
    CHECK(!ccoip_shmpipe_open(&r, o.name, RING, o.token, "reader"));
    o.token[3] ^= 1;
    CHECK(!ccoip_shmpipe_open(&r, o.name, RING * 2, o.token, "reader")); /* another size */
    CHECK(!ccoip_shmpipe_open(&r, "/etc/passwd", RING, o.token, "reader"));
    CHECK(!ccoip_shmpipe_open(&r, "/pccl-../../etc/passwd", RING, o.token, "reader"));
    ccoip_shmpipe_close(&w);
}

/* A leftover segment of 4 KiB named name. locked: a child process holds its lock until the
 * parent closes *hold; returns the child (0: none). */
static pid_t leftover(const char *name, bool locked, int *hold) {
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    REQUIRE(fd >= 0);
    /* Locked before it is sized: another process's sweep (a test running beside this one) keeps a
     * segment of size 0, then one whose lock is held, with no window between (the child below
     * shares this open file, and so the lock, after we close it). */
    if (locked) REQUIRE(flock(fd, LOCK_SH) == 0);
    REQUIRE(ftruncate(fd, 4096) == 0);
    if (!locked) {
        close(fd);
        return 0;
    }
    int ready[2], wait_end[2];
    REQUIRE(pipe(ready) == 0 && pipe(wait_end) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(ready[0]);
        close(wait_end[1]);
        char b = 1;
        if (flock(fd, LOCK_SH) != 0 || write(ready[1], &b, 1) != 1) _exit(1);
        _exit(read(wait_end[0], &b, 1) == 0 ? 0 : 1); /* until the parent closes its end */
    }
    close(fd);
    close(ready[1]);
    close(wait_end[0]);
    char b;
    REQUIRE(read(ready[0], &b, 1) == 1);
    close(ready[0]);
    *hold = wait_end[1];
    return pid;
}

/* True when someone holds the lock of segment name. */
static bool held(const char *name) {
    int fd = shm_open(name, O_RDONLY, 0);
    if (fd < 0) return false;
    bool busy = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return busy;
}

static bool exists(const char *name) {
    int fd = shm_open(name, O_RDWR, 0);
    if (fd >= 0) close(fd);
    return fd >= 0;
}

/* A segment left behind by a process that is gone is removed by the next creation; one of a
 * live process (ours) stays; one whose pid looks dead but whose lock a live process holds (its
 * creator in another pid namespace) stays; one of size 0 (being created) stays. */
static void leftovers_removed(void) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(0);
    REQUIRE(wait_child(pid) == 0);
    char dead[64], live[64], elsewhere[64], unsized[64];
    snprintf(dead, sizeof dead, "/pccl-%d-0123456789abcdef0123456789abcdef", (int) pid);
    snprintf(live, sizeof live, "/pccl-%d-0123456789abcdef0123456789abcdef", (int) getpid());
    snprintf(elsewhere, sizeof elsewhere, "/pccl-%d-00000000000000000000000000000001", (int) pid);
    snprintf(unsized, sizeof unsized, "/pccl-%d-00000000000000000000000000000002", (int) pid);
    int hold;
    leftover(dead, false, NULL);
    leftover(live, false, NULL);
    pid_t holder = leftover(elsewhere, true, &hold);
    int fd = shm_open(unsized, O_RDWR | O_CREAT | O_EXCL, 0600);
    REQUIRE(fd >= 0);
    close(fd);
    ccoip_shmpipe_t p;
    REQUIRE(ccoip_shmpipe_create(&p, RING, "sweeper"));
    CHECK(!exists(dead));
    CHECK(exists(live));
    CHECK(exists(elsewhere));
    CHECK(exists(unsized));
    /* Our own segment is locked while its name exists: a sweep in another pid namespace keeps it. */
    char own[64];
    snprintf(own, sizeof own, "%s", ccoip_shmpipe_segment(&p));
    CHECK(held(own));
    close(hold); /* the holder exits: its lock goes with it */
    CHECK(wait_child(holder) == 0);
    ccoip_shmpipe_t q;
    REQUIRE(ccoip_shmpipe_create(&q, RING, "sweeper 2"));
    CHECK(!exists(elsewhere));
    CHECK(exists(own) && held(own));
    ccoip_shmpipe_unlink(&p); /* the name goes, and the lock with it */
    CHECK(!exists(own));
    shm_unlink(live);
    shm_unlink(unsized);
    ccoip_shmpipe_close(&q);
    ccoip_shmpipe_close(&p);
}

int main(void) {
    if (!ccoip_shm_supported()) {
        ccoip_shmpipe_t p;
        CHECK(!ccoip_shmpipe_create(&p, RING, "x"));
        return check_exit();
    }
    signal(SIGPIPE, SIG_IGN);
    alarm(120); /* a hang fails the test (SIGALRM) instead of waiting for Bazel's timeout */
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
    exact_bytes(0);
    exact_bytes(300);
    reader_parks();
    peer_killed(true);
    peer_killed(false);
    shut_from_other_process();
    for (int how = IDLE_WRITES; how <= IDLE_LOCAL_SHUT; how++) idle_reader(how);
    garbage_counters();
    leftovers_removed();
    return check_exit();
}
