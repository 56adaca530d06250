/* issue 15, part 1: the master must survive peers whose connections close at about the same
 * moment. Six peers finish together (pcclDestroyCommunicator within a few ms), or three of them
 * are SIGKILLed back to back and the rest finish 10 ms later; the master then writes world
 * updates to sockets whose peers are gone. Both the pccl-master program and a process that embeds
 * the master (pcclCreateMaster) are started with SIGPIPE at its default action (the harness resets
 * it in every child), TRIALS times each way; after every trial the master must still be running
 * and admit a fresh peer, and at the end it must exit 0 when asked to stop.
 * Usage: sigpipe_test PCCL_MASTER EMBEDDED_MASTER_PROG PEER_PROG */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/ccoip/harness.h"
#include "tests/common/check.h"

#define TRIALS 12
#define PEERS 6

static const char *peer_bin;

/* Still running? Reports how it ended otherwise. */
static bool alive(h_proc_t *m, const char *what, int trial) {
    int status;
    pid_t r = waitpid(m->pid, &status, WNOHANG);
    if (r == 0) return true;
    if (r == m->pid && WIFSIGNALED(status))
        fprintf(stderr, "%s died of signal %d in trial %d\n", what, WTERMSIG(status), trial);
    else fprintf(stderr, "%s exited (status %d) in trial %d\n", what, r == m->pid ? WEXITSTATUS(status) : -1, trial);
    m->pid = 0;
    return false;
}

static void admit_all(h_proc_t *p, int port) {
    for (int i = 0; i < PEERS; i++) {
        REQUIRE(h_start_peer(&p[i], peer_bin, port, 0));
        REQUIRE(h_send(&p[i], "connect"));
        REQUIRE(h_admit(p, i, &p[i]));
    }
}

static void trial(h_proc_t *m, int port, int t, bool kill_some, const char *what) {
    h_proc_t p[PEERS];
    admit_all(p, port);
    if (kill_some) {
        for (int i = 0; i < PEERS / 2; i++) kill(p[i].pid, SIGKILL);
        usleep(10000);
    }
    for (int i = kill_some ? PEERS / 2 : 0; i < PEERS; i++) REQUIRE(h_send(&p[i], "quit"));
    for (int i = 0; i < PEERS; i++) h_wait(&p[i], 10000);
    usleep(50000); /* the master handles the closes */
    REQUIRE(alive(m, what, t));
    h_proc_t fresh;
    char line[256];
    REQUIRE(h_start_peer(&fresh, peer_bin, port, 0));
    REQUIRE(h_send(&fresh, "connect"));
    REQUIRE(h_read_line(&fresh, line, sizeof line, 20000));
    REQUIRE(strncmp(line, "connect 0 ", 10) == 0); /* admitted alone: the master forgot everyone */
    REQUIRE(h_send(&fresh, "quit"));
    REQUIRE(h_wait(&fresh, 10000) == 0);
    REQUIRE(alive(m, what, t));
}

static void run(const char *bin, const char *what, bool embedded) {
    h_proc_t m;
    int port = h_start_master(&m, bin, NULL);
    REQUIRE(port > 0);
    for (int t = 0; t < TRIALS; t++) {
        trial(&m, port, t, false, what);
        trial(&m, port, t, true, what);
    }
    if (embedded) close(m.in_fd); /* the embedded master stops when its stdin closes */
    else kill(m.pid, SIGTERM);
    REQUIRE(h_wait(&m, 10000) == 0);
    printf("%s: survived %d x %d peers finishing together and %d x %d of them killed back to back\n", what,
           TRIALS, PEERS, TRIALS, PEERS / 2);
}

int main(int argc, char **argv) {
    REQUIRE(argc == 4);
    h_init(280);
    peer_bin = argv[3];
    run(argv[1], "pccl-master", false);
    run(argv[2], "embedded master", true);
    printf("ok\n");
    return 0;
}
