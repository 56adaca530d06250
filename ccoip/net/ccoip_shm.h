/* ccoip_shm.h: named shared-memory segments for the same-host data links (ccoip_shmpipe.h).
 *
 * A segment is created under a fresh random name (mode 0600, exclusive), opened by name by one
 * other process of this user, and its name is removed as soon as that process has it open: from
 * then on only the two mappings keep it alive, and the kernel frees it when both are gone (also
 * when a process dies). One body per platform: ccoip_shm_linux.c (POSIX shm_open over /dev/shm);
 * ccoip_shm_none.c, on macOS and Windows, says "unsupported" (no wait/wake across processes there,
 * threadpark_shared.h), so every link stays on TCP. */
#ifndef CCOIP_SHM_H
#define CCOIP_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CCOIP_SHM_NAME_MAX 48 /* "/pccl-", a pid of up to 9 digits, "-", 32 hex digits, NUL */

typedef struct ccoip_shm {
    void *base;                     /* NULL: not mapped */
    size_t size;
    char name[CCOIP_SHM_NAME_MAX]; /* "" once removed */
    int lock_fd;                    /* the creator's open file while the name exists (locked) */
    bool locked;                    /* lock_fd is ours to close */
} ccoip_shm_t;

/* True where segments and the shared wait/wake behind the pipes exist (Linux). */
bool ccoip_shm_supported(void);

/* Creates and maps a zeroed segment of size bytes under a fresh name (our pid and 128 random
 * bits), after removing the leftovers of creators that no longer exist. The creator holds a lock
 * on the segment until its name is removed: that, not the pid (which may belong to another pid
 * namespace), tells a later sweep that the creator lives. False (logged at info: the link stays
 * on TCP) when the system refuses. */
bool ccoip_shm_create(ccoip_shm_t *s, size_t size);

/* Opens and maps the segment `name` (checked: our prefix, a pid, 32 hex digits) if it is ours
 * and exactly size bytes; false (logged at info) otherwise. */
bool ccoip_shm_open(ccoip_shm_t *s, const char *name, size_t size);

/* Removes the name (the mappings stay); no-op once removed. */
void ccoip_shm_unlink(ccoip_shm_t *s);

/* Unmaps (and removes the name if still there). */
void ccoip_shm_close(ccoip_shm_t *s);

/* True when the socket beside a segment saw its other end close or fail (POLLRDHUP, POLLHUP,
 * POLLERR): data waiting to be read does not count. The liveness check of a pipe's waits. */
bool ccoip_shm_peer_hung_up(int fd);

/* The doorbell on the socket beside a pipe (ccoip_shmpipe.h). A pipe's reader that found its ring
 * empty for a whole tick sleeps on the socket instead of the futex: the writer rings it there with
 * one byte, and the kernel wakes it there too when the other process dies (its socket closes). */
#define CCOIP_SHM_DOORBELL 0x64u
enum { CCOIP_SHM_RUNG = 0, CCOIP_SHM_HUNG_UP = 1, CCOIP_SHM_NOISE = 2 };

/* Sleeps until fd has bytes or hangs up, then reads every byte waiting. CCOIP_SHM_RUNG: only
 * doorbells (or none: a spurious wake); CCOIP_SHM_HUNG_UP: the other end closed or failed, or our
 * reading side was shut down (ccoip_shm_doorbell_stop); CCOIP_SHM_NOISE: a byte that is not a
 * doorbell. */
int ccoip_shm_doorbell_wait(int fd);

/* One doorbell byte: never blocks (a full socket holds doorbells enough), never raises SIGPIPE. */
void ccoip_shm_doorbell_ring(int fd);

/* Wakes a thread of ours in ccoip_shm_doorbell_wait on fd: shuts down fd's reading side. */
void ccoip_shm_doorbell_stop(int fd);

/* n random bytes from the system (for tokens); false if it has none. */
bool ccoip_shm_random(uint8_t *out, size_t n);

#endif /* CCOIP_SHM_H */
