/* ccoip_os.h: process-level bits the pccl-master program needs, and thread names
 * (ccoip_os_posix.c). */
#ifndef CCOIP_OS_H
#define CCOIP_OS_H

/* Blocks SIGINT and SIGTERM in this thread and every thread it starts later. */
void ccoip_os_block_termination_signals(void);

/* Ignores SIGPIPE in the whole process. For the program only: the library never sets process-wide
 * dispositions (its writes raise no SIGPIPE), but the program's own stdout / stderr may be a pipe
 * whose reader went away, and a master must never die of that. */
void ccoip_os_ignore_sigpipe(void);

/* Waits for SIGINT or SIGTERM (blocked first) and returns its number. */
int ccoip_os_wait_termination_signal(void);

/* Names the calling thread (at most 15 bytes show), for top -H, gdb and allocation reports
 * (docs/memory.md). */
void ccoip_os_name_thread(const char *name);

#endif /* CCOIP_OS_H */
