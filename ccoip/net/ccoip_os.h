/* ccoip_os.h: process-level bits the pccl-master program needs, SIGPIPE (ccoip_os_posix.c,
 * ccoip_os_win32.c), and thread names (ccoip_host_{linux,darwin,win32}.c: one call per kernel). */
#ifndef CCOIP_OS_H
#define CCOIP_OS_H

/* Blocks SIGINT and SIGTERM in this thread and every thread it starts later (Windows: nothing;
 * Ctrl-C arrives as a console event, not a signal). */
void ccoip_os_block_termination_signals(void);

/* Ignores SIGPIPE in the whole process. For the program only: the library never sets process-wide
 * dispositions (its writes raise no SIGPIPE), but the program's own stdout / stderr may be a pipe
 * whose reader went away, and a master must never die of that. Windows: nothing (no SIGPIPE). */
void ccoip_os_ignore_sigpipe(void);

/* Waits for SIGINT or SIGTERM (blocked first) and returns its number. Windows: for Ctrl-C,
 * Ctrl-Break or the console closing, returned as SIGINT (2) or SIGTERM (15). */
int ccoip_os_wait_termination_signal(void);

/* Names the calling thread (at most 15 bytes show), for top -H, gdb and allocation reports
 * (docs/memory.md). */
void ccoip_os_name_thread(const char *name);

/* Blocks SIGPIPE in the calling thread, for threads whose writes have no MSG_NOSIGNAL (splice,
 * libuv's writes): a peer gone mid-write must not kill the process. Windows has no SIGPIPE. */
void ccoip_os_thread_block_sigpipe(void);

/* Runs fn(arg) on the calling thread with SIGPIPE blocked; a SIGPIPE it raised is taken back
 * (unless one was pending already) before the caller's mask returns. Windows: just fn(arg). */
void ccoip_os_run_without_sigpipe(void (*fn)(void *), void *arg);

#endif /* CCOIP_OS_H */
