/* stripe_width_test: how many streams a striped op takes (ccoip_stripe_width), alone and beside
 * other running collectives, with the shipped rule and, in child processes, under the A/B knobs (read once per process, so each setting
 * needs a process of its own). Both ends of every link must compute the same, so the exact
 * figures are the wire's contract (protocol version 5); so are the streams it takes
 * (ccoip_stripe_take, version 6).
 * Usage: stripe_width_test [defaults | nolimits | max2] (no argument: all three, each in a child) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ccoip/peer/ccoip_stripe.h"
#include "tests/common/check.h"

#define MIB (1024ull * 1024ull)

static void check_defaults(void) {
    CHECK_EQ_U64(ccoip_stripe_width(256 * MIB, 2, 1, 1), 1);       /* one stream */
    CHECK_EQ_U64(ccoip_stripe_width(256 * MIB, 0, 4, 1), 1);       /* no world */
    CHECK_EQ_U64(ccoip_stripe_width(1 * MIB, 2, 4, 1), 1);         /* 512 KiB chunks: under 4 x 512 KiB */
    CHECK_EQ_U64(ccoip_stripe_width(8 * MIB, 4, 4, 1), 2);         /* 2 MiB chunks: 4 x 512 KiB, 2 lanes of 1 MiB */
    CHECK_EQ_U64(ccoip_stripe_width(9 * MIB, 4, 4, 1), 2);         /* 2.25 MiB chunks */
    CHECK_EQ_U64(ccoip_stripe_width(16 * MIB, 4, 4, 1), 4);        /* the default pool, all 4 */
    CHECK_EQ_U64(ccoip_stripe_width(16 * MIB, 4, 8, 1), 4);        /* lane minimum: groups of 4 */
    CHECK_EQ_U64(ccoip_stripe_width(32 * MIB, 4, 8, 1), 8);        /* alone: 8 lanes of 1 MiB (no cap since v6) */
    CHECK_EQ_U64(ccoip_stripe_width(256 * MIB, 2, 16, 1), 16);     /* alone: the whole pool */
    CHECK_EQ_U64(ccoip_stripe_width(256 * MIB, 2, 6, 1), 6);
    CHECK_EQ_U64(ccoip_stripe_width(256 * MIB, 2, 5, 1), 5);       /* odd: cannot be halved into groups */
    CHECK_EQ_U64(ccoip_stripe_width(4 * MIB - 1, 4, 8, 1), 1);     /* just under 8 x 512 KiB per chunk */
    CHECK_EQ_U64(ccoip_stripe_width(16 * MIB, 4, 4, 0), 4);        /* 0 (never sent with OK): alone */
    /* Others running beside it: at most CCOIP_STRIPE_SHARED_LANES and half the pool. */
    CHECK_EQ_U64(ccoip_stripe_width(16 * MIB, 4, 4, 2), 2);
    CHECK_EQ_U64(ccoip_stripe_width(16 * MIB, 4, 4, 16), 2);
    CHECK_EQ_U64(ccoip_stripe_width(16 * MIB, 4, 2, 2), 1);        /* pool 2: one stream each */
    CHECK_EQ_U64(ccoip_stripe_width(16 * MIB, 4, 8, 3), 2);
    CHECK_EQ_U64(ccoip_stripe_width(256 * MIB, 2, 16, 2), 2);
    CHECK_EQ_U64(ccoip_stripe_width(256 * MIB, 2, 6, 2), 3);       /* 6 -> 3, odd */
    CHECK_EQ_U64(ccoip_stripe_width(1 * MIB, 2, 4, 2), 1);         /* too small either way */
}

static void check_nolimits(void) { /* the three knobs 0: session 8's rule, every op over the pool */
    CHECK_EQ_U64(ccoip_stripe_width(1 * MIB, 2, 4, 1), 1);         /* the per-stream minimum stays */
    CHECK_EQ_U64(ccoip_stripe_width(9 * MIB, 4, 4, 1), 4);
    CHECK_EQ_U64(ccoip_stripe_width(16 * MIB, 4, 8, 1), 8);
    CHECK_EQ_U64(ccoip_stripe_width(32 * MIB, 4, 8, 1), 8);
    CHECK_EQ_U64(ccoip_stripe_width(256 * MIB, 2, 16, 1), 16);
    CHECK_EQ_U64(ccoip_stripe_width(256 * MIB, 2, 16, 4), 16);
    CHECK_EQ_U64(ccoip_stripe_width(16 * MIB, 4, 2, 2), 2);
}

static void check_max2(void) { /* PCCL_STRIPE_MAX_LANES=2, PCCL_STRIPE_SHARED_LANES=1 */
    CHECK_EQ_U64(ccoip_stripe_width(16 * MIB, 4, 4, 1), 2);
    CHECK_EQ_U64(ccoip_stripe_width(32 * MIB, 4, 8, 1), 2);
    CHECK_EQ_U64(ccoip_stripe_width(8 * MIB, 4, 4, 1), 2);
    CHECK_EQ_U64(ccoip_stripe_width(256 * MIB, 2, 6, 1), 3); /* 6 halves to 3, odd: stays over the cap */
    CHECK_EQ_U64(ccoip_stripe_width(16 * MIB, 4, 4, 2), 1);
    CHECK_EQ_U64(ccoip_stripe_width(256 * MIB, 2, 16, 2), 1);
}

/* Which streams an op takes (ccoip_stripe_take): the least-charged aligned group, the lowest on
 * a tie; both ends of a link run the same sequence, so these figures are the wire's contract too
 * (protocol version 6). */
static void check_take(void) {
    uint64_t load[8] = {0};
    /* Equal ops take the groups in turn, as version 5's k-th group for the k-th op did. */
    CHECK_EQ_U64(ccoip_stripe_take(load, 4, 2, 8 * MIB), 0);
    CHECK_EQ_U64(ccoip_stripe_take(load, 4, 2, 8 * MIB), 2);
    CHECK_EQ_U64(ccoip_stripe_take(load, 4, 2, 8 * MIB), 0);
    CHECK_EQ_U64(ccoip_stripe_take(load, 4, 2, 8 * MIB), 2);
    CHECK_EQ_U64(load[0], 2 * (4 * MIB + CCOIP_STRIPE_OP_LOAD));
    CHECK_EQ_U64(load[3], 2 * (4 * MIB + CCOIP_STRIPE_OP_LOAD));
    memset(load, 0, sizeof load);
    for (uint32_t k = 0; k < 9; k++) CHECK_EQ_U64(ccoip_stripe_take(load, 4, 1, 0), k % 4); /* tiny ops spread */
    /* Unequal ops (a model's tensors, beside each other): a group goes to the streams free
     * first; version 5 put the third op on group 0 behind the first and left stream 3 idle. */
    memset(load, 0, sizeof load);
    CHECK_EQ_U64(ccoip_stripe_take(load, 4, 2, 18 * MIB), 0); /* streams 0, 1: 10 MiB each */
    CHECK_EQ_U64(ccoip_stripe_take(load, 4, 1, 2 * MIB), 2);  /* stream 2: 3 MiB */
    CHECK_EQ_U64(ccoip_stripe_take(load, 4, 2, 18 * MIB), 2); /* busiest of 2, 3: 3 MiB < 10 */
    CHECK_EQ_U64(ccoip_stripe_take(load, 4, 1, 2 * MIB), 0);  /* 0, 1 and 3 tie at 10 MiB: the lowest */
    CHECK_EQ_U64(ccoip_stripe_take(load, 4, 1, 2 * MIB), 1);
    CHECK_EQ_U64(ccoip_stripe_take(load, 4, 2, 2 * MIB), 0);  /* 13 MiB against 13 MiB: the lowest */
    CHECK_EQ_U64(load[0], 15 * MIB);
    CHECK_EQ_U64(load[2], 13 * MIB);
    /* An op over the whole pool, then one over a group of a pool of 8. */
    memset(load, 0, sizeof load);
    CHECK_EQ_U64(ccoip_stripe_take(load, 8, 8, 64 * MIB), 0);
    CHECK_EQ_U64(ccoip_stripe_take(load, 8, 4, 4 * MIB), 0);
    CHECK_EQ_U64(ccoip_stripe_take(load, 8, 4, 4 * MIB), 4);
    CHECK_EQ_U64(ccoip_stripe_take(load, 8, 1, 1 * MIB), 0);
    /* Widths outside 1 .. streams are the whole link (never asked for: ccoip_stripe_width). */
    memset(load, 0, sizeof load);
    CHECK_EQ_U64(ccoip_stripe_take(load, 3, 0, 3 * MIB), 0);
    CHECK_EQ_U64(load[2], 2 * MIB);
    CHECK_EQ_U64(ccoip_stripe_take(load, 3, 5, 3 * MIB), 0);
    CHECK_EQ_U64(ccoip_stripe_take(load, 1, 1, 3 * MIB), 0);
}

/* Runs this program again with `mode` and the environment set by the caller; true when it passed. */
static bool run_child(const char *self, const char *mode) {
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, mode, (char *) NULL);
        _exit(127);
    }
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : NULL;
    if (mode == NULL) {
        check_take();
        unsetenv("PCCL_STRIPE_LANE_MIN_KIB");
        unsetenv("PCCL_STRIPE_MAX_LANES");
        unsetenv("PCCL_STRIPE_SHARED_LANES");
        CHECK(run_child(argv[0], "defaults"));
        setenv("PCCL_STRIPE_LANE_MIN_KIB", "0", 1);
        setenv("PCCL_STRIPE_MAX_LANES", "0", 1);
        setenv("PCCL_STRIPE_SHARED_LANES", "0", 1);
        CHECK(run_child(argv[0], "nolimits"));
        unsetenv("PCCL_STRIPE_LANE_MIN_KIB");
        setenv("PCCL_STRIPE_MAX_LANES", "2", 1);
        setenv("PCCL_STRIPE_SHARED_LANES", "1", 1);
        CHECK(run_child(argv[0], "max2"));
    } else if (strcmp(mode, "defaults") == 0) {
        check_defaults();
    } else if (strcmp(mode, "nolimits") == 0) {
        check_nolimits();
    } else if (strcmp(mode, "max2") == 0) {
        check_max2();
    } else {
        return 2;
    }
    printf("stripe_width_test %s: %d checks, %d failed\n", mode ? mode : "(all)", check_count, check_failures);
    return check_failures ? 1 : 0;
}
