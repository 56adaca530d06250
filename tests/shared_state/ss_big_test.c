/* A 1 GiB shared state (8 tensors of 128 MiB) moves from one peer to a newcomer with zeros and
 * verifies: exact byte counts, every byte checked, equal hashes. Tagged nosan (make test only):
 * 2 GiB of state under ASan/TSan would take minutes. Usage: ss_big_test PCCL_MASTER SS_PEER */
#include "tests/shared_state/ss_util.h"

#define TENSOR (128ull << 20)

int main(int argc, char **argv) {
    REQUIRE(argc == 3);
    h_init(170);
    char line[256];
    h_proc_t m, peer[2];
    int port = h_start_master(&m, argv[1], NULL);
    REQUIRE(port > 0);
    ss_start_peers(peer, 2, argv[2], port);
    h_proc_t *p[2] = {&peer[0], &peer[1]};
    REQUIRE(ss_cmd(p[0], line, sizeof line, "tensors 8 %llu 9", TENSOR) == 0);
    REQUIRE(ss_cmd(p[1], line, sizeof line, "tensors 8 %llu 0", TENSOR) == 0);
    ss_sync_t r[2];
    /* Both at revision 0, both candidates: a tie, won by the earliest connected peer (peer 0). */
    ss_sync_all(p, 2, NULL, r);
    CHECK_EQ_U64(r[0].result, 0);
    CHECK_EQ_U64(r[1].result, 0);
    CHECK_EQ_U64(r[0].tx, 8 * TENSOR);
    CHECK_EQ_U64(r[1].rx, 8 * TENSOR);
    CHECK_EQ_U64(r[0].rx + r[1].tx, 0);
    CHECK_EQ_U64(ss_cmd(p[1], line, sizeof line, "check 9"), 0);
    CHECK(ss_same_hash(p, 2));
    fprintf(stderr, "ss_big_test: 1 GiB in %llu ms (%.2f GB/s, hashing and re-hashing included)\n", r[1].ms,
            r[1].ms > 0 ? (double) (8 * TENSOR) / 1e6 / (double) r[1].ms : 0.0);
    ss_quit(p[0]);
    ss_quit(p[1]);
    h_kill(&m, 15);
    CHECK_EQ_U64(h_wait(&m, SS_T), 0);
    return check_exit();
}
