/* ar_driver.h: a master and a ring of ar_peer processes for the end-to-end all-reduce tests.
 * Peers are admitted one at a time, so the master's ring order (connection order) is the order
 * of `peers[]`; each peer's input is a function of its seed (ar_ref.h). */
#ifndef AR_DRIVER_H
#define AR_DRIVER_H

#include <stdbool.h>
#include <stdint.h>

#include "tests/ccoip/harness.h"

#define ARD_MAX 8

typedef struct ard_result {
    int res, check;
    uint64_t hash, tx, rx, call_us, end_us;
    uint32_t world;
} ard_result_t;

typedef struct ard {
    const char *peer_bin;
    h_proc_t master;
    int port;
    h_proc_t peers[ARD_MAX];
    uint32_t seeds[ARD_MAX];
    int n;
    uint32_t next_seed;
    uint64_t next_tag;
} ard_t;

uint64_t ard_now_us(void);

/* Starts the master and n peers (admitted one by one). */
bool ard_start(ard_t *a, const char *master_bin, const char *peer_bin, int n);
/* Spawns one more peer and admits it (the others vote with pcclUpdateTopology). */
bool ard_add_peer(ard_t *a);
/* Forgets peer i (already dead or killed), keeping the ring order of the others. */
void ard_drop(ard_t *a, int i);
/* pcclUpdateTopology on every peer at once; true when all returned pcclSuccess. */
bool ard_update(ard_t *a);
/* Sends the same all-reduce to every peer (not waiting). */
bool ard_post(ard_t *a, int dtype, int op, size_t count, int kind, int inplace);
/* The same, then waits until every peer is about to call pcclAllReduce. */
bool ard_post_go(ard_t *a, int dtype, int op, size_t count, int kind, int inplace);
/* Reads every peer's answer to ard_post. */
bool ard_collect(ard_t *a, ard_result_t *out, int timeout_ms);
/* Open descriptors and threads of peer i. */
bool ard_res(ard_t *a, int i, int *fds, int *threads);
/* Quits every peer and the master. */
void ard_stop(ard_t *a);

#endif /* AR_DRIVER_H */
