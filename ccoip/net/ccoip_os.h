/* ccoip_os.h: process-level bits the pccl-master program needs (ccoip_os_posix.c). */
#ifndef CCOIP_OS_H
#define CCOIP_OS_H

/* Blocks SIGINT and SIGTERM in this thread and every thread it starts later. */
void ccoip_os_block_termination_signals(void);

/* Waits for SIGINT or SIGTERM (blocked first) and returns its number. */
int ccoip_os_wait_termination_signal(void);

#endif /* CCOIP_OS_H */
