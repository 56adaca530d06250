/* splice_rule_test: when a ring sends by reference (ccoip_splice_pays, ccoip_splice.h). Across
 * hosts always; within a host only when the cores are fewer than 3 x the peers on this host (not
 * the world: peers elsewhere do not share our cores). PCCL_SEND_SPLICE=0/1 overrides, read once
 * per process (each case in a child process of its own), and the core count is the process's
 * affinity mask (a child pinned to one core). */
#include <sched.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ccoip/net/ccoip_splice.h"
#include "tests/common/check.h"

/* Runs fn in a child with PCCL_SEND_SPLICE=env (NULL: unset); its exit status. */
static int in_child(const char *env, int (*fn)(void)) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (env != NULL) setenv("PCCL_SEND_SPLICE", env, 1);
        else unsetenv("PCCL_SEND_SPLICE");
        _exit(fn());
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

/* Bit 0: same host, 2 peers here; bit 1: same host, 1 peer here; bit 2: across hosts. */
static int pays_bits(void) {
    return ccoip_splice_pays(true, 2) | ccoip_splice_pays(true, 1) << 1 | ccoip_splice_pays(false, 1) << 2;
}

/* Pinned to one core: by reference within the host (1 < 3 x 1). */
static int pinned_one_core(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) return 50;
    return pays_bits();
}

/* With every core of the machine: the rule's answer for the machine's own count. */
static int all_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 50;
    unsigned cores = (unsigned) CPU_COUNT(&set);
    int want = ccoip_splice_rule(true, 2, cores) | ccoip_splice_rule(true, 1, cores) << 1 | 1 << 2;
    return pays_bits() == want ? 0 : 60 + pays_bits();
}

int main(void) {
    /* The rule: peers on this host, not the world. */
    CHECK(ccoip_splice_rule(false, 1, 64));  /* across hosts: always */
    CHECK(ccoip_splice_rule(false, 100, 1));
    CHECK(ccoip_splice_rule(true, 1, 2));    /* 2 cores < 3 x 1 peer */
    CHECK(!ccoip_splice_rule(true, 1, 3));   /* 3 cores: the two copies run side by side */
    CHECK(ccoip_splice_rule(true, 4, 11));   /* 4 peers here, 11 cores */
    CHECK(!ccoip_splice_rule(true, 4, 12));
    CHECK(!ccoip_splice_rule(true, 2, 16));  /* a world of 8 over 4 hosts of 16 cores: copy */
    CHECK(ccoip_splice_rule(true, 8, 16));   /* all 8 on one host of 16 cores: by reference */
    CHECK(!ccoip_splice_rule(true, 0, 3));   /* 0 counts as us alone */
    CHECK(ccoip_splice_rule(true, 0xFFFFFFFFu, 1000)); /* no overflow */

    /* The environment wins, read once per process. */
    CHECK_EQ_U64(in_child("1", pays_bits), 7);
    CHECK_EQ_U64(in_child("0", pays_bits), 0);
    CHECK_EQ_U64(in_child(NULL, pinned_one_core), 7);
    CHECK_EQ_U64(in_child("0", pinned_one_core), 0);
    CHECK_EQ_U64(in_child(NULL, all_cores), 0);
    CHECK_EQ_U64(in_child("junk", all_cores), 0); /* neither 0 nor 1: the rule */
    return check_exit();
}
