/* The choice between the ring and the grid (reduce_2d_model.c): the model's formulas at known
 * points, the pick for small and large ops at 32 hosts of 25 ms and 100 Mbit/s, forcing, small
 * n, and the option's parser. */
#include <math.h>

#include "reduce/reduce.h"
#include "tests/common/check.h"

static int near(double a, double b) {
    return fabs(a - b) <= 1e-9 * (fabs(b) + 1.0);
}

int main(void) {
    reduce_model_t wan = {.step_s = 0.025, .rate_Bps = 100e6 / 8};
    reduce_2d_shape_t s;
    /* 32 = 4 rows x 8 columns: 20 steps against the ring's 62. */
    CHECK(near(reduce_model_ring_s(32, 0, &wan), 62 * 0.025));
    CHECK(reduce_2d_shape(32, &s) == 1);
    CHECK(near(reduce_model_2d_s(&s, 0, &wan), 20 * 0.025));
    /* Without extras both move 2S(1 - 1/n) per peer: at zero step cost the times are equal. */
    reduce_model_t bw_only = {.step_s = 0, .rate_Bps = 1e6};
    CHECK(near(reduce_model_2d_s(&s, 64e6, &bw_only), reduce_model_ring_s(32, 64e6, &bw_only)));
    CHECK(near(reduce_model_ring_s(32, 64e6, &bw_only), 2.0 * 31 / 32 * 64));
    /* An extra adds its fold: the whole buffer each way. */
    reduce_2d_shape(17, &s);
    CHECK(s.extras == 1);
    CHECK(near(reduce_model_2d_s(&s, 1e6, &bw_only), 2 * 3 * 0.25 + 2 * 3 * 0.0625 + 2.0));
    /* Picks at 32 hosts: 4 KiB takes the grid; 64 MiB is byte-bound, within the margin: the ring. */
    CHECK(reduce_2d_pick(32, 4096, &wan, REDUCE_ALGO_AUTO, &s) == REDUCE_ALGO_2D);
    CHECK(s.rows == 4 && s.cols == 8);
    CHECK(reduce_2d_pick(32, 64.0 * 1048576, &wan, REDUCE_ALGO_AUTO, &s) == REDUCE_ALGO_RING);
    CHECK(s.rows == 0);
    CHECK(reduce_2d_pick(32, 64.0 * 1048576, &wan, REDUCE_ALGO_2D, &s) == REDUCE_ALGO_2D);
    CHECK(reduce_2d_pick(32, 4096, &wan, REDUCE_ALGO_RING, &s) == REDUCE_ALGO_RING);
    /* 17 peers, 16 MiB: the fold's 2S outweighs the saved steps. */
    CHECK(reduce_2d_pick(17, 16.0 * 1048576, &wan, REDUCE_ALGO_AUTO, &s) == REDUCE_ALGO_RING);
    CHECK(reduce_2d_pick(17, 4096, &wan, REDUCE_ALGO_AUTO, &s) == REDUCE_ALGO_2D);
    /* No grid below 4 peers, forced or not. */
    CHECK(reduce_2d_pick(3, 4096, &wan, REDUCE_ALGO_2D, &s) == REDUCE_ALGO_RING);
    CHECK(reduce_2d_pick(2, 4096, &wan, REDUCE_ALGO_AUTO, &s) == REDUCE_ALGO_RING);
    /* Monotone in size: once the ring wins at some size, it wins at every larger one. */
    for (uint32_t n = 4; n <= 256; n++) {
        int ring_seen = 0;
        for (double b = 1024; b <= 1e10; b *= 2) {
            reduce_algo_t a = reduce_2d_pick(n, b, &wan, REDUCE_ALGO_AUTO, &s);
            if (a == REDUCE_ALGO_RING) ring_seen = 1;
            else CHECK(!ring_seen);
        }
    }
    reduce_algo_t a = REDUCE_ALGO_RING;
    CHECK(reduce_algo_parse("2D", &a) == 0 && a == REDUCE_ALGO_2D);
    CHECK(reduce_algo_parse("auto", &a) == 0 && a == REDUCE_ALGO_AUTO);
    CHECK(reduce_algo_parse("ring", &a) == 0 && a == REDUCE_ALGO_RING);
    CHECK(reduce_algo_parse("tree", &a) == -1 && a == REDUCE_ALGO_RING);
    CHECK(reduce_algo_parse(NULL, &a) == -1);
    return check_exit();
}
