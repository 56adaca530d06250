/* issue 15, part 2: a distributor that dies while it serves a newcomer must not stall the group.
 * The newcomer's sync fails (pcclRankConnectionLost); the other members' syncs succeed and they go
 * on to an all-reduce, which the master must refuse at once (the group lost a member since its
 * last topology round), so that everyone meets in pcclUpdateTopology within seconds, with the
 * default 10-minute collective timeout. Two ways the newcomer carries on:
 *   A. as README says: pcclUpdateTopology at once;
 *   B. it retries the sync at once: the master must refuse that sync as soon as another member
 *      is in pcclUpdateTopology, so that it votes too.
 * After each, the group syncs (the newcomer receives every byte) and all-reduces exactly.
 * Serving is capped (PCCL_SS_MAX_SEND_MBPS) so that each kill lands mid-transfer.
 * Usage: ss_lost_test PCCL_MASTER SS_PEER */
#include <stdlib.h>
#include <time.h>

#include "tests/shared_state/ss_util.h"

#define BYTES (96ull << 20)
#define PROMPT_MS 5000 /* "at once": far below the collective timeout, with room for sanitizers */
#define AR_COUNT 300000

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static bool file_has(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return false;
    char buf[4096];
    bool found = false;
    while (!found && fgets(buf, sizeof buf, f) != NULL) found = strstr(buf, needle) != NULL;
    fclose(f);
    return found;
}

static int answer(h_proc_t *p, const char *word, long since, long *took) {
    char line[256];
    REQUIRE(h_read_line(p, line, sizeof line, SS_T));
    *took = now_ms() - since;
    size_t n = strlen(word);
    if (strncmp(line, word, n) != 0 || line[n] != ' ') {
        fprintf(stderr, "expected '%s ...', got '%s'\n", word, line);
        exit(1);
    }
    return atoi(line + n + 1);
}

/* Everyone syncs (revision bumped on the holders), then all-reduces: both must succeed exactly. */
static void sync_and_reduce(h_proc_t **p, int n, const bool *holder) {
    char line[256];
    for (int i = 0; i < n; i++)
        if (holder[i]) ss_cmd(p[i], line, sizeof line, "bump");
    ss_sync_t r[8];
    ss_sync_all(p, n, NULL, r);
    for (int i = 0; i < n; i++) CHECK_EQ_U64(r[i].result, 0);
    for (int i = 1; i < n; i++) CHECK_EQ_U64(r[i].revision, r[0].revision);
    for (int i = 0; i < n; i++) CHECK_EQ_U64(ss_cmd(p[i], line, sizeof line, "check 5"), 0);
    CHECK(ss_same_hash(p, n));
    for (int i = 0; i < n; i++) REQUIRE(h_send(p[i], "allreduce 300000"));
    for (int i = 0; i < n; i++) {
        REQUIRE(h_read_line(p[i], line, sizeof line, SS_T));
        int res = -1, bad = -1;
        sscanf(line, "allreduce %d %d", &res, &bad);
        CHECK_EQ_U64(res, 0);
        CHECK_EQ_U64(bad, 0);
    }
}

/* peers[0..n): members, all holding pattern 5, peers[n] the newcomer (zeros), already admitted;
 * peers[0] is the distributor and gets killed mid-transfer. Returns with peers[1..n] a group
 * that synced and all-reduced. */
static void scenario(h_proc_t **p, int n, bool retry_sync, const char *log_path) {
    char line[256];
    h_proc_t *nc = p[n];
    for (int i = 0; i < n; i++) ss_cmd(p[i], line, sizeof line, "bump");
    for (int i = 0; i <= n; i++) REQUIRE(h_send(p[i], "sync 0"));
    long t0 = now_ms();
    while (!file_has(log_path, "shared state: received") && now_ms() - t0 < 20000) usleep(20000);
    REQUIRE(file_has(log_path, "shared state: received"));
    h_kill(p[0], 9);
    long killed = now_ms(), took;
    h_wait(p[0], 5000);
    ss_sync_t r;
    REQUIRE(h_read_line(nc, line, sizeof line, SS_T));
    sscanf(line, "sync %d %llu %llu %llu", &r.result, &r.revision, &r.tx, &r.rx);
    CHECK_EQ_U64(r.result, pcclRankConnectionLost);
    CHECK(r.rx > 0 && r.rx < BYTES);
    for (int i = 1; i < n; i++) CHECK_EQ_U64(answer(p[i], "sync", killed, &took), 0);

    /* The newcomer: a vote (A) or the same sync again (B); the others: their all-reduce, which
     * the master refuses, and which relinks the ring before it returns (PCCL's rule): that
     * relink takes the newcomer's vote (B: once its retried sync was refused, it votes). */
    REQUIRE(h_send(nc, retry_sync ? "sync 0" : "update"));
    long t1 = now_ms();
    for (int i = 1; i < n; i++) REQUIRE(h_send(p[i], "allreduce 300000"));
    if (retry_sync) {
        CHECK_EQ_U64(answer(nc, "sync", t1, &took), pcclRankConnectionLost);
        CHECK(took < PROMPT_MS);
        fprintf(stderr, "ss_lost_test: the newcomer's retried sync refused after %ld ms\n", took);
        REQUIRE(h_send(nc, "update"));
    }
    for (int i = 1; i < n; i++) {
        CHECK_EQ_U64(answer(p[i], "allreduce", t1, &took), pcclRankConnectionLost);
        CHECK(took < PROMPT_MS);
        fprintf(stderr, "ss_lost_test: member %d's all-reduce refused (and relinked) after %ld ms\n", i, took);
    }
    CHECK_EQ_U64(answer(nc, "update", t1, &took), 0); /* the relink round */
    /* Then as the README loop goes on: the members vote, the newcomer asks whether a round is
     * due (it is: the others vote) and votes too. */
    for (int i = 1; i < n; i++) REQUIRE(h_send(p[i], "update"));
    REQUIRE(h_send(nc, "pending"));
    REQUIRE(h_read_line(nc, line, sizeof line, SS_T));
    CHECK(strcmp(line, "pending 0 1") == 0);
    REQUIRE(h_send(nc, "update"));
    for (int i = 1; i <= n; i++) {
        CHECK_EQ_U64(answer(p[i], "update", t1, &took), 0);
        CHECK(took < PROMPT_MS);
    }
    fprintf(stderr, "ss_lost_test (%s): the group met in a topology round %ld ms after its all-reduce\n",
            retry_sync ? "sync retried" : "README rule", took);
    bool holder[8] = {false};
    for (int i = 1; i < n; i++) holder[i - 1] = true;
    sync_and_reduce(p + 1, n, holder);
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(170);
    setenv("PCCL_SS_MAX_SEND_MBPS", "32", 1); /* 3 s per transfer: the kill at ~1 s lands mid-way */
    setenv("PCCL_SS_MAX_SOURCES", "1", 1); /* one distributor per receiver: its death fails the sync */
    setenv("PCCL_LOG_LEVEL", "info", 1);
    unsetenv("PCCL_COLLECTIVE_TIMEOUT_MS"); /* the default 10 minutes: no watchdog may end this */
    char line[256], log_a[512], log_b[512];
    const char *tmp = getenv("TEST_TMPDIR");
    snprintf(log_a, sizeof log_a, "%s/newcomer_a.log", tmp != NULL ? tmp : "/tmp");
    snprintf(log_b, sizeof log_b, "%s/newcomer_b.log", tmp != NULL ? tmp : "/tmp");
    h_proc_t m, peer[5];
    int port = h_start_master(&m, argv[1], NULL);
    REQUIRE(port > 0);
    /* One at a time, so that the master's order is peer 0, 1, 2, 3 (it names a receiver's holders
     * in the order after it: the newcomer, last, fetches from the earliest connected). */
    for (int i = 0; i < 4; i++) {
        if (i == 3) h_stderr_path = log_a;
        REQUIRE(h_start_peer(&peer[i], argv[2], port, 0));
        REQUIRE(h_send(&peer[i], "connect"));
        REQUIRE(h_admit(peer, i, &peer[i]));
    }
    for (int i = 0; i < 4; i++)
        REQUIRE(ss_cmd(&peer[i], line, sizeof line, "tensors 1 %llu %d", BYTES, i < 3 ? 5 : 0) == 0);

    /* A: peer 0 serves the newcomer (peer 3) and dies; group 1, 2, 3 goes on. */
    h_proc_t *a[4] = {&peer[0], &peer[1], &peer[2], &peer[3]};
    scenario(a, 3, false, log_a);

    /* B: a second newcomer (peer 4); peer 1 serves it and dies; group 2, 3, 4 goes on. */
    h_stderr_path = log_b;
    REQUIRE(h_start_peer(&peer[4], argv[2], port, 0));
    REQUIRE(h_send(&peer[4], "connect"));
    h_proc_t *votes[3] = {&peer[1], &peer[2], &peer[3]};
    for (int waited = 0;; waited += 20) { /* the accepted peers' pending vote until it is registered */
        REQUIRE(waited < SS_T);
        int seen = 0;
        for (int i = 0; i < 3; i++) REQUIRE(h_send(votes[i], "pending"));
        for (int i = 0; i < 3; i++) {
            REQUIRE(h_read_line(votes[i], line, sizeof line, SS_T));
            seen += strcmp(line, "pending 0 1") == 0;
        }
        if (seen == 3) break;
        usleep(20000);
    }
    for (int i = 0; i < 3; i++) REQUIRE(h_send(votes[i], "update"));
    for (int i = 0; i < 3; i++) {
        REQUIRE(h_read_line(votes[i], line, sizeof line, SS_T));
        REQUIRE(strcmp(line, "update 0") == 0);
    }
    REQUIRE(h_read_line(&peer[4], line, sizeof line, SS_T));
    REQUIRE(strcmp(line, "connect 0") == 0);
    REQUIRE(ss_cmd(&peer[4], line, sizeof line, "tensors 1 %llu 0", BYTES) == 0);
    h_proc_t *b[4] = {&peer[1], &peer[2], &peer[3], &peer[4]};
    scenario(b, 3, true, log_b);

    for (int i = 2; i < 5; i++) ss_quit(&peer[i]);
    h_kill(&m, 15);
    CHECK_EQ_U64(h_wait(&m, SS_T), 0);
    return check_exit();
}
