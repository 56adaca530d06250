/* The choice between the ring and the grid (reduce_grid_model.c): the model's formulas at known
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
    reduce_grid_shape_t s;
    /* 32 in two dimensions, 8 x 4: 20 steps against the ring's 62. */
    CHECK(near(reduce_model_ring_s(32, 0, &wan), 62 * 0.025));
    CHECK(reduce_grid_shape(32, 2, 0, &s) == 1);
    CHECK(near(reduce_model_grid_s(&s, 0, &wan), 20 * 0.025));
    /* Without extras both move 2S(1 - 1/n) per peer: at zero step cost the times are equal. */
    reduce_model_t bw_only = {.step_s = 0, .rate_Bps = 1e6};
    CHECK(near(reduce_model_grid_s(&s, 64e6, &bw_only), reduce_model_ring_s(32, 64e6, &bw_only)));
    CHECK(near(reduce_model_ring_s(32, 64e6, &bw_only), 2.0 * 31 / 32 * 64));
    /* An extra adds its fold: the whole buffer each way. */
    reduce_grid_shape(17, 2, 1, &s);
    CHECK(s.extras == 1);
    CHECK(near(reduce_model_grid_s(&s, 1e6, &bw_only), 2 * 3 * 0.25 + 2 * 3 * 0.0625 + 2.0));
    /* 32 as 2^5: 10 steps. */
    CHECK(reduce_grid_shape(32, 0, UINT32_MAX, &s) == 1 && s.ndims == 5);
    CHECK(near(reduce_model_grid_s(&s, 0, &wan), 10 * 0.025));
    CHECK(near(reduce_model_grid_s(&s, 64e6, &bw_only), reduce_model_ring_s(32, 64e6, &bw_only)));
    /* Picks at 32 hosts: 4 KiB and 64 MiB take the grid (0.03 and 0.89 x the ring's model); 1 GiB is
     * byte-bound, within the margin: the ring. */
    CHECK(reduce_grid_pick(32, 4096, &wan, REDUCE_ALGO_AUTO, &s) == REDUCE_ALGO_GRID);
    CHECK(s.ndims == 5 && s.grid == 32);
    CHECK(reduce_grid_pick(32, 64.0 * 1048576, &wan, REDUCE_ALGO_AUTO, &s) == REDUCE_ALGO_GRID);
    CHECK(reduce_grid_pick(32, 1024.0 * 1048576, &wan, REDUCE_ALGO_AUTO, &s) == REDUCE_ALGO_RING);
    CHECK(s.ndims == 0);
    CHECK(reduce_grid_pick(32, 1024.0 * 1048576, &wan, REDUCE_ALGO_GRID, &s) == REDUCE_ALGO_GRID);
    CHECK(reduce_grid_pick(32, 4096, &wan, REDUCE_ALGO_RING, &s) == REDUCE_ALGO_RING);
    /* 10 peers: 8 and 2 extras for 4 KiB (8 steps); 5 x 2 for 1 MiB, whose folds would cost more
     * than their steps save. 17 peers, 16 MiB: even 2^4 and a fold loses to the ring. */
    CHECK(reduce_grid_pick(10, 4096, &wan, REDUCE_ALGO_AUTO, &s) == REDUCE_ALGO_GRID);
    CHECK(s.grid == 8 && s.extras == 2);
    CHECK(reduce_grid_pick(10, 1048576, &wan, REDUCE_ALGO_AUTO, &s) == REDUCE_ALGO_GRID);
    CHECK(s.grid == 10 && s.extras == 0 && s.size[0] == 5);
    CHECK(reduce_grid_pick(17, 16.0 * 1048576, &wan, REDUCE_ALGO_AUTO, &s) == REDUCE_ALGO_RING);
    CHECK(reduce_grid_pick(17, 4096, &wan, REDUCE_ALGO_AUTO, &s) == REDUCE_ALGO_GRID);
    /* No grid below 4 peers, forced or not. */
    CHECK(reduce_grid_pick(3, 4096, &wan, REDUCE_ALGO_GRID, &s) == REDUCE_ALGO_RING);
    CHECK(reduce_grid_pick(2, 4096, &wan, REDUCE_ALGO_AUTO, &s) == REDUCE_ALGO_RING);
    /* Monotone in size: once the ring wins at some size, it wins at every larger one. */
    for (uint32_t n = 4; n <= 256; n++) {
        int ring_seen = 0;
        for (double b = 1024; b <= 1e10; b *= 2) {
            reduce_algo_t a = reduce_grid_pick(n, b, &wan, REDUCE_ALGO_AUTO, &s);
            if (a == REDUCE_ALGO_RING) ring_seen = 1;
            else CHECK(!ring_seen);
        }
    }
    reduce_algo_t a = REDUCE_ALGO_RING;
    CHECK(reduce_algo_parse("2D", &a) == 0 && a == REDUCE_ALGO_GRID);
    CHECK(reduce_algo_parse("ring", &a) == 0 && reduce_algo_parse("Grid", &a) == 0 && a == REDUCE_ALGO_GRID);
    CHECK(reduce_algo_parse("auto", &a) == 0 && a == REDUCE_ALGO_AUTO);
    CHECK(reduce_algo_parse("ring", &a) == 0 && a == REDUCE_ALGO_RING);
    CHECK(reduce_algo_parse("tree", &a) == -1 && a == REDUCE_ALGO_RING);
    CHECK(reduce_algo_parse(NULL, &a) == -1);
    return check_exit();
}
