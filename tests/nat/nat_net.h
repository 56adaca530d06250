/* nat_net: the namespaces and peers of the NAT tests (docs/nat.md).
 *
 * A "public" bridge 10.79.0.0/24 with hosts h0 (.1: the master and member A), h1 (.2), a host
 * behind a firewall that drops inbound connections (fw, .3), h2 (.4), and two NAT routers doing
 * MASQUERADE: rt (.10) for a private LAN 192.168.79.0/24 with n0 (.2), rt2 (.11) for
 * 192.168.80.0/24 with n1 (.2). Every peer runs restart_peer
 * (a sync and a 4 MiB all-reduce per step, pcclArePeersPending and pcclUpdateTopology between
 * steps); the test reads its lines. Needs root, iproute2 and iptables. */
#ifndef TESTS_NAT_NET_H
#define TESTS_NAT_NET_H

#include <stdbool.h>

#include "tests/ccoip/harness.h"

#define NAT_MAX_STEPS 4096

/* What one peer printed: its steps' hashes, when each step ended, failed calls, its connect. */
typedef struct nat_peer_t {
    h_proc_t p;
    const char *name;
    bool running;
    int connect; /* pcclConnect's result; -1 until printed */
    int errors;
    unsigned steps; /* the last step it finished */
    unsigned long long hash[NAT_MAX_STEPS + 1];
    long at[NAT_MAX_STEPS + 1];
    char log[128]; /* its stderr */
} nat_peer_t;

/* What the NAT routers do with a connection from outside that no mapping of theirs matches:
 * answer with a reset (a plain Linux router: nothing listens there; the default), drop it (a
 * firewall rule), or reset and also map every connection to a random port (MASQUERADE
 * --random-fully: no punch gets through). Before nat_setup. */
enum { NAT_ROUTER_RESET, NAT_ROUTER_DROP, NAT_ROUTER_RANDOM };
void nat_set_routers(int kind);

/* Makes the namespaces (names prefixed by "<tag><pid>"); false when it cannot (no root, no
 * tools): the test then says SKIPPED. Removed at exit. */
bool nat_setup(const char *tag);
/* Spawns argv in the namespace of `host`. */
bool nat_spawn_in(h_proc_t *proc, const char *host, char *const *args);
/* Starts pccl-master on h0 with `extra` arguments (NULL-terminated) and remembers its address. */
bool nat_start_master(h_proc_t *master, const char *bin, char *const *extra);
/* Starts restart_peer as `shard` on `host`; its stderr goes to x->log. */
bool nat_start_peer(nat_peer_t *x, int shard, const char *name, const char *host, const char *peer_bin);
/* Reads the lines of peers[0..n) for `ms`, or until cond() holds. */
bool nat_pump(nat_peer_t *peers, int n, int ms, bool (*cond)(void));
/* The longest time between two steps of peers[0..members) that ended after `from`; the median
 * step of peers[0]. */
long nat_slowest_step(const nat_peer_t *peers, int members, long from);
long nat_median_step(const nat_peer_t *peers);
/* Kills every running peer, then checks that each step's weights are the same bits on every
 * peer that connected and ran it (against the first of them); returns how many hashes it
 * compared. */
unsigned nat_check_steps(nat_peer_t *peers, int n);
long nat_now_ms(void);
/* The master's address ("10.79.0.1:PORT") once nat_start_master returned. */
const char *nat_master_addr(void);
/* The master's log path. */
const char *nat_master_log(void);
/* Whether the file at path contains needle; one line on stderr when it does not. */
bool nat_log_has(const char *path, const char *needle);
/* Removes the logs (when every check passed). */
void nat_remove_logs(nat_peer_t *peers, int n);

#endif /* TESTS_NAT_NET_H */
