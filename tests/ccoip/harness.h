/* harness.h: child processes for the end-to-end tests: the real pccl-master and peer_prog,
 * line-based I/O with timeouts, and cleanup that also runs when a test fails or hangs (every
 * child is SIGKILLed at exit; a watchdog alarm kills the whole process group). */
#ifndef CCOIP_TEST_HARNESS_H
#define CCOIP_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct h_proc_t {
    pid_t pid;
    int in_fd;  /* its stdin */
    int out_fd; /* its stdout */
    char buf[8192];
    size_t len;
} h_proc_t;

/* Puts the test in its own process group and arms a watchdog of `seconds`. The test process
 * itself ignores SIGPIPE (it writes to children that may be dead); its children do not. */
void h_init(int seconds);

/* When set, the next h_spawn sends the child's stderr to this file (then it is cleared). */
extern const char *h_stderr_path;

/* Starts `argv` with piped stdin/stdout (stderr inherited), SIGPIPE at its default action. */
bool h_spawn(h_proc_t *p, char *const argv[]);

/* Starts pccl-master on 127.0.0.1:0 with extra args (NULL-terminated); returns its port or 0. */
int h_start_master(h_proc_t *m, const char *bin, const char *const *extra);

bool h_start_peer(h_proc_t *p, const char *bin, int master_port, int group);

/* For tests in network namespaces they make: a printf-formatted shell command (its exit status,
 * as system() returns it), and h_spawn inside namespace `ns` (`ip netns exec`, ip(8) looked up
 * in the sbin directories, which a test's PATH may lack). */
int h_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool h_spawn_in_netns(h_proc_t *p, const char *ns, char *const argv[]);

bool h_send(h_proc_t *p, const char *line);

/* Reads one line into out (without newline). False on timeout or EOF. */
bool h_read_line(h_proc_t *p, char *out, size_t n, int timeout_ms);

/* Sends cmd, reads the answer, returns the first number after the command word (or -999). */
int h_call(h_proc_t *p, const char *cmd, char *line, size_t n, int timeout_ms);

void h_kill(h_proc_t *p, int sig);
/* For peer programs that answer "update" with "update RESULT" and "connect" with "connect RESULT
 * ...": pcclUpdateTopology on n peers at once; true when every one answered "update 0". */
bool h_update_all(h_proc_t *peers, int n);
/* Admits `newcomer` (spawned, "connect" sent) into the ring of the n accepted `peers`: the first
 * peer (n == 0) gets in alone, later ones by the others' votes, repeated while a round ran before
 * the newcomer reached the master. True when it answered "connect 0". */
bool h_admit(h_proc_t *peers, int n, h_proc_t *newcomer);
/* h_admit that also copies the newcomer's "connect 0 ..." line into reply. */
bool h_admit_reply(h_proc_t *peers, int n, h_proc_t *newcomer, char *reply, size_t reply_n);
/* Waits until the file at path (a master's log, see h_stderr_path) has at least `count` lines
 * containing needle; false after timeout_ms. */
bool h_await_log(const char *path, const char *needle, int count, int timeout_ms);
/* The whole file at path, NUL-terminated, in a malloc'd buffer the caller frees; NULL when it
 * cannot be read. */
char *h_read_file(const char *path);
/* The master's log line for each peer that registered and waits for admission. */
#define H_LOG_PENDING "pending admission"
/* Waits for exit (SIGKILL after timeout_ms); returns the exit status or -1. */
int h_wait(h_proc_t *p, int timeout_ms);
/* Without waiting: true when it has exited (reaped; *code as h_wait returns it). */
bool h_exited(h_proc_t *p, int *code);

/* A TCP connection to 127.0.0.1:port (blocking), or -1. */
int h_tcp_connect(int port);
/* Reads until EOF or timeout: 1 when the other side closed, 0 on timeout. Data is discarded
 * (the first bytes are copied to first/first_n when not NULL). */
int h_await_close(int fd, int timeout_ms, unsigned char *first, size_t *first_n);

/* Raises this process's open-file limit to the hard maximum. */
void h_raise_fd_limit(void);

/* Resident set size of a process in KiB (Linux /proc), or -1. */
long h_rss_kb(pid_t pid);

#endif /* CCOIP_TEST_HARNESS_H */
