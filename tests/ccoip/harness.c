/* harness.c: see harness.h. */
#include "tests/ccoip/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CHILDREN 512
static pid_t children[MAX_CHILDREN];
static int nchildren;

static void kill_children(void) {
    for (int i = 0; i < nchildren; i++)
        if (children[i] > 0) kill(children[i], SIGKILL);
}

static void on_alarm(int sig) {
    (void) sig;
    static const char msg[] = "harness: watchdog fired, killing everything\n";
    ssize_t k = write(2, msg, sizeof msg - 1);
    (void) k;
    kill(0, SIGKILL);
}

void h_init(int seconds) {
    setpgid(0, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGALRM, on_alarm);
    alarm((unsigned) seconds);
    atexit(kill_children);
}

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

const char *h_stderr_path;

bool h_spawn(h_proc_t *p, char *const argv[]) {
    int in[2], out[2];
    const char *err_path = h_stderr_path;
    h_stderr_path = NULL;
    memset(p, 0, sizeof *p);
    if (pipe(in) != 0 || pipe(out) != 0) return false;
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        /* Children start as a user's shell would start them: SIGPIPE at its default action and
         * unblocked (an ignored disposition survives exec, and ours is ignored, see h_init), so
         * that a master or peer killed by SIGPIPE shows up in the tests. */
        sigset_t pipe_set;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        sigprocmask(SIG_UNBLOCK, &pipe_set, NULL);
        signal(SIGPIPE, SIG_DFL);
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (err_path != NULL) {
            int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0) dup2(fd, 2);
        }
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execvp(argv[0], argv); /* a bare name (ar_bench's "ip" on a host without /usr/sbin/ip) is looked up in PATH */
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    fcntl(in[1], F_SETFD, FD_CLOEXEC);
    fcntl(out[0], F_SETFD, FD_CLOEXEC);
    p->pid = pid;
    p->in_fd = in[1];
    p->out_fd = out[0];
    if (nchildren < MAX_CHILDREN) children[nchildren++] = pid;
    return true;
}

int h_start_master(h_proc_t *m, const char *bin, const char *const *extra) {
    char *argv[32];
    int n = 0;
    argv[n++] = (char *) bin;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 30; i++) argv[n++] = (char *) extra[i];
    argv[n] = NULL;
    if (!h_spawn(m, argv)) return 0;
    char line[256];
    if (!h_read_line(m, line, sizeof line, 20000)) return 0;
    const char *colon = strrchr(line, ':');
    return colon == NULL ? 0 : atoi(colon + 1);
}

bool h_start_peer(h_proc_t *p, const char *bin, int master_port, int group) {
    char addr[64], grp[16];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", master_port);
    snprintf(grp, sizeof grp, "%d", group);
    char *argv[] = {(char *) bin, addr, grp, NULL};
    return h_spawn(p, argv);
}

bool h_send(h_proc_t *p, const char *line) {
    size_t n = strlen(line);
    char buf[256];
    if (n + 2 > sizeof buf) return false;
    memcpy(buf, line, n);
    buf[n++] = '\n';
    return write(p->in_fd, buf, n) == (ssize_t) n;
}

bool h_update_all(h_proc_t *peers, int n) {
    bool ok = true;
    for (int i = 0; i < n; i++) ok = h_send(&peers[i], "update") && ok;
    char line[256];
    for (int i = 0; i < n; i++) {
        bool got = h_read_line(&peers[i], line, sizeof line, 30000);
        if (!got || strcmp(line, "update 0") != 0)
            fprintf(stderr, "harness: pid %d answered '%s' to update\n", (int) peers[i].pid, got ? line : "(nothing)");
        ok = got && strcmp(line, "update 0") == 0 && ok;
    }
    return ok;
}

bool h_admit_reply(h_proc_t *peers, int n, h_proc_t *newcomer, char *reply, size_t reply_n) {
    char buf[256];
    bool in = n == 0 && h_read_line(newcomer, buf, sizeof buf, 30000);
    for (int attempt = 0; !in && attempt < 100; attempt++) {
        if (!h_update_all(peers, n)) continue;
        in = h_read_line(newcomer, buf, sizeof buf, attempt < 10 ? 500 : 1000);
    }
    bool ok = in && strncmp(buf, "connect 0", 9) == 0 && (buf[9] == '\0' || buf[9] == ' ');
    if (!ok) fprintf(stderr, "harness: newcomer pid %d: '%s'\n", (int) newcomer->pid, in ? buf : "(no answer)");
    if (ok && reply != NULL) snprintf(reply, reply_n, "%s", buf);
    return ok;
}

bool h_admit(h_proc_t *peers, int n, h_proc_t *newcomer) { return h_admit_reply(peers, n, newcomer, NULL, 0); }

char *h_read_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (f == NULL) return NULL;
    size_t n = 0, cap = 1 << 16;
    char *b = malloc(cap + 1);
    for (size_t got; b != NULL && (got = fread(b + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            char *more = realloc(b, 2 * cap + 1);
            if (more == NULL) free(b);
            b = more;
            cap *= 2;
        }
    }
    fclose(f);
    if (b != NULL) b[n] = '\0';
    return b;
}

bool h_await_log(const char *path, const char *needle, int count, int timeout_ms) {
    long deadline = now_ms() + timeout_ms;
    for (;;) {
        int seen = 0;
        FILE *f = fopen(path, "r");
        if (f != NULL) {
            char buf[2048];
            while (fgets(buf, sizeof buf, f) != NULL) seen += strstr(buf, needle) != NULL;
            fclose(f);
        }
        if (seen >= count) return true;
        if (now_ms() >= deadline) {
            fprintf(stderr, "harness: %s: %d of %d lines with '%s'\n", path, seen, count, needle);
            return false;
        }
        usleep(20000);
    }
}

bool h_read_line(h_proc_t *p, char *out, size_t n, int timeout_ms) {
    long deadline = now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(p->buf, '\n', p->len);
        if (nl != NULL) {
            size_t k = (size_t) (nl - p->buf);
            size_t c = k < n - 1 ? k : n - 1;
            memcpy(out, p->buf, c);
            if (c > 0 && out[c - 1] == '\r') c--; /* Windows programs (under wine) end lines with CRLF */
            out[c] = '\0';
            memmove(p->buf, nl + 1, p->len - k - 1);
            p->len -= k + 1;
            return true;
        }
        long left = deadline - now_ms();
        if (left <= 0 || p->len == sizeof p->buf) return false;
        struct pollfd pf = {p->out_fd, POLLIN, 0};
        int r = poll(&pf, 1, (int) left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        ssize_t k = read(p->out_fd, p->buf + p->len, sizeof p->buf - p->len);
        if (k <= 0) return false;
        p->len += (size_t) k;
    }
}

int h_call(h_proc_t *p, const char *cmd, char *line, size_t n, int timeout_ms) {
    if (!h_send(p, cmd) || !h_read_line(p, line, n, timeout_ms)) return -999;
    const char *sp = strchr(line, ' ');
    return sp == NULL ? -999 : atoi(sp + 1);
}

void h_kill(h_proc_t *p, int sig) {
    if (p->pid > 0) kill(p->pid, sig);
}

static int reaped(h_proc_t *p, int status) {
    for (int i = 0; i < nchildren; i++)
        if (children[i] == p->pid) children[i] = 0;
    p->pid = 0;
    close(p->in_fd);
    close(p->out_fd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int h_wait(h_proc_t *p, int timeout_ms) {
    if (p->pid <= 0) return -1;
    long deadline = now_ms() + timeout_ms;
    int status = 0;
    for (;;) {
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == p->pid) break;
        if (now_ms() > deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            break;
        }
        usleep(10000);
    }
    return reaped(p, status);
}

bool h_exited(h_proc_t *p, int *code) {
    int status = 0;
    if (p->pid <= 0 || waitpid(p->pid, &status, WNOHANG) != p->pid) return false;
    *code = reaped(p, status);
    return true;
}

long h_rss_kb(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
    fclose(f);
    return kb;
}

int h_tcp_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t) port);
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (connect(fd, (struct sockaddr *) &a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int h_await_close(int fd, int timeout_ms, unsigned char *first, size_t *first_n) {
    long deadline = now_ms() + timeout_ms;
    size_t got = 0, cap = first_n != NULL ? *first_n : 0;
    for (;;) {
        long left = deadline - now_ms();
        if (left <= 0) return 0;
        struct pollfd pf = {fd, POLLIN, 0};
        int r = poll(&pf, 1, (int) left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0;
        unsigned char buf[4096];
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0) {
            if (first_n != NULL) *first_n = got;
            return 1;
        }
        size_t c = (size_t) k < cap - got ? (size_t) k : cap - got;
        if (first != NULL && c > 0) memcpy(first + got, buf, c);
        got += c;
    }
}

void h_raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int h_sh(const char *fmt, ...) {
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}

bool h_spawn_in_netns(h_proc_t *p, const char *ns, char *const argv[]) {
    static char *const where[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"};
    char *ip = "ip";
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++)
        if (access(where[i], X_OK) == 0) {
            ip = where[i];
            break;
        }
    char *all[16] = {ip, "netns", "exec", (char *) ns};
    int n = 4;
    for (int i = 0; argv[i] != NULL && n < 15; i++) all[n++] = argv[i];
    all[n] = NULL;
    return h_spawn(p, all);
}
