/* ccoip_shm_none.c: no shared-memory links off Linux (macOS and Windows: no wait/wake across
 * processes there, threadpark_shared.h): every call says no, and the links stay on TCP. */
#include "ccoip/net/ccoip_shm.h"

#include <string.h>

bool ccoip_shm_supported(void) { return false; }

bool ccoip_shm_create(ccoip_shm_t *s, size_t size) {
    (void) size;
    memset(s, 0, sizeof *s);
    return false;
}

bool ccoip_shm_open(ccoip_shm_t *s, const char *name, size_t size) {
    (void) name;
    (void) size;
    memset(s, 0, sizeof *s);
    return false;
}

void ccoip_shm_unlink(ccoip_shm_t *s) { s->name[0] = 0; }

void ccoip_shm_close(ccoip_shm_t *s) {
    s->name[0] = 0;
    s->base = NULL;
}

bool ccoip_shm_peer_hung_up(int fd) {
    (void) fd;
    return false;
}

int ccoip_shm_doorbell_wait(int fd) {
    (void) fd;
    return CCOIP_SHM_HUNG_UP;
}

void ccoip_shm_doorbell_ring(int fd) { (void) fd; }

void ccoip_shm_doorbell_stop(int fd) { (void) fd; }

bool ccoip_shm_random(uint8_t *out, size_t n) {
    (void) out;
    (void) n;
    return false;
}
