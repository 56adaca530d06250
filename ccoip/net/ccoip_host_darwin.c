/* ccoip_host_darwin.c: what macOS offers beyond plain sockets. No TCP_CONGESTION (the system's
 * choice stays) and no /proc; setrlimit(RLIMIT_NOFILE) refuses more than OPEN_MAX, also when the
 * hard limit is RLIM_INFINITY. */
#include "ccoip/net/ccoip_sys.h"

#include "ccoip/net/ccoip_os.h"

#include <pthread.h>

#include <limits.h>
#include <sys/resource.h>

#include "log/log.h"

#ifndef OPEN_MAX
#define OPEN_MAX 10240 /* macOS's <sys/syslimits.h> (through <limits.h>); absent from Linux headers */
#endif

void ccoip_raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    rlim_t want = rl.rlim_max < (rlim_t) OPEN_MAX ? rl.rlim_max : (rlim_t) OPEN_MAX;
    if (rl.rlim_cur < want) {
        rl.rlim_cur = want;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

void ccoip_sock_tune_data_link(int fd, bool same_host) {
    (void) fd;
    if (same_host) LOG_DEBUG("ccoip", "no TCP_CONGESTION on macOS: the link keeps the system's congestion control");
}

/* Apple's one-argument pthread_setname_np: it names the calling thread only. */
void ccoip_os_name_thread(const char *name) { pthread_setname_np(name); }
