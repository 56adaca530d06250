/* ccoip_host_win32.c: what Windows offers beyond plain sockets. Sockets are not counted against
 * an open-file limit, and there is no per-socket congestion control (the system's choice stays;
 * its send buffers autotune). */
#include "ccoip/net/ccoip_sys.h"

#include "ccoip/net/ccoip_os.h"

#include <pthread.h>
#include <stdio.h>

#include "log/log.h"

void ccoip_raise_fd_limit(void) {}

void ccoip_sock_tune_data_link(int fd, bool same_host) {
    (void) fd;
    if (same_host) LOG_DEBUG("ccoip", "no TCP_CONGESTION on Windows: the link keeps the system's congestion control");
}

void ccoip_os_name_thread(const char *name) {
    char cut[16];
    snprintf(cut, sizeof cut, "%s", name); /* the same 15 bytes as on Linux */
    pthread_setname_np(pthread_self(), cut); /* winpthreads': debuggers show it */
}
