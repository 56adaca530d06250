/* The master's admission rule on determinism fingerprints, end to end: the real pccl-master and
 * peer_prog processes on 127.0.0.1, each peer with PCCL_REQUIRE_FINGERPRINT=1 and its
 * fingerprint from PCCL_FINGERPRINT_FILE (the CPU reference, or a copy with one hash changed):
 *   fingerprint_admission_test MASTER_BIN PEER_BIN
 * 1. --fingerprint check (the default): the first peer sets the run's fingerprint; a peer with a
 *    different tree_sum1024 hash is refused (pcclConnect fails) and the master's log names
 *    tree_sum1024; a peer with the same fingerprint and one that shows none are admitted.
 * 2. --fingerprint log: the different peer is admitted, the master logs what differs.
 * 3. --fingerprint require: a peer that shows none is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fingerprint/fingerprint.h"
#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

static char dir[200];
static char same_path[256], other_path[256], log_path[256];

static bool write_fp(const char *path, const pcclDeterminismFingerprint_t *fp) {
    char text[4096];
    fp_format(fp, text, sizeof text);
    FILE *f = fopen(path, "w");
    return f != NULL && fputs(text, f) >= 0 && fclose(f) == 0;
}

static bool log_has(const char *needle) {
    char *log = h_read_file(log_path);
    bool has = log != NULL && strstr(log, needle) != NULL;
    free(log);
    return has;
}

static bool spawn_peer(h_proc_t *p, const char *bin, int port, const char *fp_file) {
    if (fp_file != NULL) {
        setenv("PCCL_REQUIRE_FINGERPRINT", "1", 1);
        setenv("PCCL_FINGERPRINT_FILE", fp_file, 1);
    }
    bool ok = h_start_peer(p, bin, port, 0);
    unsetenv("PCCL_REQUIRE_FINGERPRINT");
    unsetenv("PCCL_FINGERPRINT_FILE");
    return ok;
}

/* A peer with `fp_file` (NULL: it shows no fingerprint) connects; pcclConnect's result. Only for
 * the first peer of a run and for peers the master refuses at JOIN (no vote needed). */
static int connect_peer(h_proc_t *p, const char *bin, int port, const char *fp_file) {
    if (!spawn_peer(p, bin, port, fp_file)) return -1000;
    char line[256];
    return h_call(p, "connect", line, sizeof line, 30000);
}

/* A later peer, admitted by the votes of the n accepted `in` (which it then joins). */
static bool admit_peer(h_proc_t *in, int n, const char *bin, int port, const char *fp_file) {
    return spawn_peer(&in[n], bin, port, fp_file) && h_send(&in[n], "connect") && h_admit(in, n, &in[n]);
}

static int start_master(h_proc_t *m, const char *bin, const char *mode) {
    const char *extra[] = {"--fingerprint", mode, "--log-level", "info", NULL};
    h_stderr_path = log_path;
    return h_start_master(m, bin, extra);
}

static void stop(h_proc_t *procs, int n) {
    for (int i = 0; i < n; i++) {
        h_kill(&procs[i], 9);
        h_wait(&procs[i], 5000);
    }
}

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(120);
    const char *tmp = getenv("TEST_TMPDIR"); /* Bazel's per-test folder, removed for us */
    snprintf(dir, sizeof dir, "%s/pccl_fp_admit_XXXXXX", tmp != NULL ? tmp : "/tmp");
    REQUIRE(mkdtemp(dir) != NULL);
    snprintf(same_path, sizeof same_path, "%s/same.txt", dir);
    snprintf(other_path, sizeof other_path, "%s/other.txt", dir);
    snprintf(log_path, sizeof log_path, "%s/master.log", dir);
    pcclDeterminismFingerprint_t fp, other;
    REQUIRE(fp_cpu_fingerprint(&fp, PCCL_FINGERPRINT_QUICK, 0) == pcclSuccess);
    other = fp;
    other.entries[fp.count - 1].hash ^= 0x10; /* tree_sum1024 */
    REQUIRE(write_fp(same_path, &fp) && write_fp(other_path, &other));

    /* 1. check */
    h_proc_t m, p[4], refused;
    int port = start_master(&m, argv[1], "check");
    REQUIRE(port > 0);
    CHECK_EQ_U64(connect_peer(&p[0], argv[2], port, same_path), pcclSuccess);
    CHECK(connect_peer(&refused, argv[2], port, other_path) != pcclSuccess);
    CHECK(admit_peer(p, 1, argv[2], port, same_path));
    CHECK(admit_peer(p, 2, argv[2], port, NULL));
    h_kill(&m, 15);
    h_wait(&m, 5000);
    CHECK(log_has("the run's determinism fingerprint comes from"));
    CHECK(log_has("differs from the run's"));
    CHECK(log_has("in: tree_sum1024"));
    stop(p, 3);
    stop(&refused, 1);

    /* 2. log */
    port = start_master(&m, argv[1], "log");
    REQUIRE(port > 0);
    CHECK(connect_peer(&p[0], argv[2], port, same_path) == pcclSuccess);
    CHECK(admit_peer(p, 1, argv[2], port, other_path));
    h_kill(&m, 15);
    h_wait(&m, 5000);
    CHECK(log_has("admitting although the determinism fingerprint"));
    CHECK(log_has("tree_sum1024"));
    stop(p, 2);

    /* 3. require */
    port = start_master(&m, argv[1], "require");
    REQUIRE(port > 0);
    CHECK(connect_peer(&p[1], argv[2], port, NULL) != pcclSuccess);
    CHECK(connect_peer(&p[0], argv[2], port, same_path) == pcclSuccess);
    h_kill(&m, 15);
    h_wait(&m, 5000);
    CHECK(log_has("no determinism fingerprint"));
    stop(p, 2);

    unlink(same_path);
    unlink(other_path);
    unlink(log_path);
    rmdir(dir);
    return check_exit();
}
