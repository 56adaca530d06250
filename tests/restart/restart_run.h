/* restart_run.h: a run of restart_peer processes beside a real pccl-master that the tests kill
 * and restart (verdict_test, soak_test). It keeps every peer's "call" lines (restart_peer.c) and
 * checks the promise of docs/group-state-machine.md: every peer makes the same calls with the
 * same results, and every successful one leaves the same bytes. */
#ifndef RESTART_RUN_H
#define RESTART_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "tests/ccoip/harness.h"

#define RR_MAX_PEERS 8
#define RR_MAX_CALLS 4096
#define RR_KEEP 8

typedef struct rr_peer_t {
    h_proc_t proc;
    char (*calls)[80]; /* "STEP CALL ok WORLD HASH" or "STEP CALL failed WORLD #CODE" */
    int ncalls;
    int step;              /* the last "step N" it printed */
    bool done;             /* printed "done" or "gave up" */
    char end[128];         /* that line */
    char recent[RR_KEEP][128];
    int nrecent;
} rr_peer_t;

typedef struct rr_run_t {
    const char *master_bin, *peer_bin, *dir;
    h_proc_t master;
    int port, starts; /* starts: masters started, for their log names */
    int npeers;
    rr_peer_t peers[RR_MAX_PEERS];
    char log[512]; /* the current master's log */
} rr_run_t;

int64_t rr_now_ms(void);
/* Starts the master (on r->port, or any port when 0; it is kept) with its log in a file of its
 * own under r->dir. die: PCCL_MASTER_TEST_DIE for it, or NULL. False when it does not listen. */
bool rr_start_master(rr_run_t *r, const char *die);
/* Starts n peers of `steps` steps whose first step waits for all n. */
bool rr_start_peers(rr_run_t *r, int n, int steps);
/* Reads every peer's lines for up to ms. Returns the peer whose line starts with `want` (any peer
 * when who < 0) with a number >= min after it, as soon as one does; else -1. */
int rr_pump(rr_run_t *r, int ms, const char *want, int who, int min);
/* Pumps until every peer is done; false (after printing their last lines) on timeout. */
bool rr_finish(rr_run_t *r, int timeout_ms);
/* True when the successful calls of every peer are the same (step, call, world, bytes): no
 * collective succeeded on one member and failed on another. Prints the first difference. */
bool rr_same_calls(const rr_run_t *r);
/* Whether a peer's k-th call named `call` ("sync", "allreduce") at `step` succeeded. */
bool rr_succeeded(const rr_run_t *r, int peer, int step, const char *call, int k);
void rr_dump(const rr_run_t *r);
void rr_stop(rr_run_t *r);

#endif /* RESTART_RUN_H */
