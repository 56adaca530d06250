/* check.h: the few macros every C test uses. Tests print one line per failed check and exit
 * non-zero through check_exit(). Never assert(): opt builds define NDEBUG. */
#ifndef PCCL_TESTS_CHECK_H
#define PCCL_TESTS_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures;
static int check_count;

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        check_count++;                                                                      \
        if (!(cond)) {                                                                      \
            check_failures++;                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);        \
        }                                                                                   \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                  \
    do {                                                                                    \
        uint64_t check_a_ = (uint64_t) (a), check_b_ = (uint64_t) (b);                      \
        check_count++;                                                                      \
        if (check_a_ != check_b_) {                                                         \
            check_failures++;                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%" PRIu64 " vs %" PRIu64 ")\n", \
                    __FILE__, __LINE__, #a, #b, check_a_, check_b_);                        \
        }                                                                                   \
    } while (0)

/* Stops the test at once: for failures after which nothing else can be checked. */
#define REQUIRE(cond)                                                                       \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond);      \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

static inline int check_exit(void) {
    fprintf(stderr, "%d checks, %d failed\n", check_count, check_failures);
    return check_failures == 0 ? 0 : 1;
}

#endif /* PCCL_TESTS_CHECK_H */
