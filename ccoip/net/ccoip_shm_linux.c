/* ccoip_shm_linux.c: segments over POSIX shared memory (/dev/shm), named "/pccl-PID-HEX": the
 * creator's process id, then 32 random hex digits (getrandom). A creator SIGKILLed before the
 * other side opened (and removed) the name leaves the segment behind; every later creation
 * removes such leftovers of processes that no longer exist.
 *
 * "No longer exists" is asked of the kernel's file locks, not only of the pid: the creator takes
 * a shared flock on the segment right after creating it and before giving it a size, and keeps
 * it until the name goes. flock belongs to the open file, not to a pid namespace, and dies with
 * the process; so a sweep removes a sized segment only when its lock is free (and its pid looks
 * dead here, for creators of builds without the lock). A segment of size 0 is one being created
 * (or a creator killed in those microseconds: it holds no memory) and is left alone. */
#include "ccoip/net/ccoip_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log/log.h"

#define PREFIX "/pccl-"
#define SHM_DIR "/dev/shm"

bool ccoip_shm_supported(void) { return true; }

bool ccoip_shm_random(uint8_t *out, size_t n) {
    while (n > 0) {
        ssize_t k = getrandom(out, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        out += k;
        n -= (size_t) k;
    }
    return true;
}

bool ccoip_shm_peer_hung_up(int fd) {
    struct pollfd p = {fd, POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

int ccoip_shm_doorbell_wait(int fd) {
    struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
    while (poll(&p, 1, -1) < 0)
        if (errno != EINTR) return CCOIP_SHM_HUNG_UP;
    uint8_t buf[64];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return CCOIP_SHM_RUNG;
        if (n <= 0) return CCOIP_SHM_HUNG_UP;
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] != CCOIP_SHM_DOORBELL) return CCOIP_SHM_NOISE;
    }
}

void ccoip_shm_doorbell_ring(int fd) {
    uint8_t b = CCOIP_SHM_DOORBELL;
    while (send(fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == EINTR) {
    }
}

void ccoip_shm_doorbell_stop(int fd) { shutdown(fd, SHUT_RD); }

static bool map_fd(ccoip_shm_t *s, int fd, size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd); /* the mapping keeps the memory */
    if (p == MAP_FAILED) {
        LOG_INFO("ccoip", "shared memory %s: mmap of %zu bytes failed: %s", s->name, size, strerror(errno));
        return false;
    }
    s->base = p;
    s->size = size;
    return true;
}

/* "/pccl-PID-HEX32" -> PID; 0 when the name is not one of ours. */
static long name_pid(const char *name) {
    size_t n = strnlen(name, CCOIP_SHM_NAME_MAX), p = strlen(PREFIX), i = p;
    if (n >= CCOIP_SHM_NAME_MAX || strncmp(name, PREFIX, p) != 0) return 0;
    long pid = 0;
    for (; i < n && name[i] >= '0' && name[i] <= '9' && i - p < 9; i++) pid = pid * 10 + (name[i] - '0');
    if (i == p || i >= n || name[i] != '-' || n - i - 1 != 32) return 0;
    for (i++; i < n; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return 0;
    return pid;
}

/* True when nobody holds the segment's lock: its creator is gone. */
static bool lock_free(int dfd, const char *file) {
    int fd = openat(dfd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    bool free = flock(fd, LOCK_EX | LOCK_NB) == 0;
    close(fd); /* releases our probe's lock */
    return free;
}

/* Removes our user's segments whose creator no longer exists (killed before the other side
 * opened them): the pid is dead here and the creator's lock is free. */
static void sweep_leftovers(void) {
    /* getdents64 into a stack buffer, not opendir: a link may first send (and create) in steady
     * state, where the library allocates nothing (tests/nomalloc). */
    struct linux_dirent64 {
        uint64_t d_ino;
        int64_t d_off;
        unsigned short d_reclen;
        unsigned char d_type;
        char d_name[];
    };
    int dfd = open(SHM_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return;
    _Alignas(8) char buf[4096];
    char name[CCOIP_SHM_NAME_MAX + 1];
    long n;
    while ((n = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
        for (long at = 0; at < n;) {
            const struct linux_dirent64 *e = (const void *) (buf + at);
            if (e->d_reclen == 0 || at + e->d_reclen > n) break;
            at += e->d_reclen;
            if (snprintf(name, sizeof name, "/%s", e->d_name) >= (int) sizeof name) continue;
            long pid = name_pid(name);
            struct stat st;
            if (pid <= 0 || pid == (long) getpid() || fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
                st.st_uid != geteuid() || !S_ISREG(st.st_mode) || st.st_size == 0)
                continue;
            if (kill((pid_t) pid, 0) != 0 && errno == ESRCH && lock_free(dfd, e->d_name) && shm_unlink(name) == 0)
                LOG_INFO("ccoip", "shared memory %s: removed, its creator (process %ld) is gone", name, pid);
        }
    }
    close(dfd);
}

bool ccoip_shm_create(ccoip_shm_t *s, size_t size) {
    memset(s, 0, sizeof *s);
    sweep_leftovers();
    uint8_t r[16];
    if (!ccoip_shm_random(r, sizeof r)) {
        LOG_INFO("ccoip", "shared memory: no random bytes for a name");
        return false;
    }
    int at = snprintf(s->name, sizeof s->name, PREFIX "%ld-", (long) getpid());
    for (size_t i = 0; i < sizeof r; i++) at += snprintf(s->name + at, sizeof s->name - (size_t) at, "%02x", r[i]);
    int fd = shm_open(s->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        LOG_INFO("ccoip", "shared memory %s: cannot create: %s", s->name, strerror(errno));
        s->name[0] = 0;
        return false;
    }
    /* Before the size: a sweep that sees a size also sees the lock (see the top). */
    int lock_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (lock_fd < 0 || flock(lock_fd, LOCK_SH) != 0) {
        LOG_INFO("ccoip", "shared memory %s: cannot lock: %s", s->name, strerror(errno));
        if (lock_fd >= 0) close(lock_fd);
        close(fd);
        ccoip_shm_unlink(s);
        return false;
    }
    s->lock_fd = lock_fd;
    s->locked = true;
    /* Allocated now, not on first touch: a full /dev/shm (a container's 64 MiB default) must
     * refuse here, not raise SIGBUS mid-copy. */
    int rc = ftruncate(fd, (off_t) size) != 0 ? errno : posix_fallocate(fd, 0, (off_t) size);
    if (rc != 0) {
        LOG_INFO("ccoip", "shared memory %s: cannot allocate %zu bytes: %s", s->name, size, strerror(rc));
        close(fd);
        ccoip_shm_unlink(s);
        return false;
    }
    if (!map_fd(s, fd, size)) {
        ccoip_shm_unlink(s);
        return false;
    }
    return true;
}

bool ccoip_shm_open(ccoip_shm_t *s, const char *name, size_t size) {
    memset(s, 0, sizeof *s);
    if (name_pid(name) <= 0) {
        LOG_INFO("ccoip", "shared memory: refusing a segment name that is not ours");
        return false;
    }
    snprintf(s->name, sizeof s->name, "%s", name);
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        LOG_INFO("ccoip", "shared memory %s: cannot open: %s", name, strerror(errno));
        s->name[0] = 0;
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (size_t) st.st_size != size) {
        LOG_INFO("ccoip", "shared memory %s: not ours or not %zu bytes", name, size);
        close(fd);
        s->name[0] = 0;
        return false;
    }
    if (!map_fd(s, fd, size)) {
        s->name[0] = 0;
        return false;
    }
    return true;
}

void ccoip_shm_unlink(ccoip_shm_t *s) {
    if (s->locked) { /* after the unlink: a sweep in between must still see us alive */
        if (s->name[0] != 0) shm_unlink(s->name);
        close(s->lock_fd);
        s->locked = false;
    } else if (s->name[0] != 0) {
        shm_unlink(s->name); /* ENOENT: the other side removed it first */
    }
    s->name[0] = 0;
}

void ccoip_shm_close(ccoip_shm_t *s) {
    ccoip_shm_unlink(s);
    if (s->base != NULL) munmap(s->base, s->size);
    s->base = NULL;
}
