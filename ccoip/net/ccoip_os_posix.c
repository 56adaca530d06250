/* ccoip_os_posix.c: ccoip_os.h with sigwait: no signal handler, no async-signal-safety worries. */
#include "ccoip/net/ccoip_os.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

static void termination_set(sigset_t *s) {
    sigemptyset(s);
    sigaddset(s, SIGINT);
    sigaddset(s, SIGTERM);
}

void ccoip_os_block_termination_signals(void) {
    sigset_t s;
    termination_set(&s);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
}

void ccoip_os_ignore_sigpipe(void) { signal(SIGPIPE, SIG_IGN); }

int ccoip_os_wait_termination_signal(void) {
    sigset_t s;
    termination_set(&s);
    int sig = 0;
    while (sigwait(&s, &sig) != 0) {}
    return sig;
}

void ccoip_os_thread_block_sigpipe(void) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
}

void ccoip_os_run_without_sigpipe(void (*fn)(void *), void *arg) {
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
    fn(arg);
    struct timespec zero = {0, 0};
    while (!was_pending && sigtimedwait(&pipe_set, NULL, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}
