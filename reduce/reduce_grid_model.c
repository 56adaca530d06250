/* reduce_grid_model.c -- which all-reduce an op runs: the ring or the grid (reduce.h, README.md
 * "Choosing"). A step costs a fixed time plus its bytes at the link's rate; both schedules move
 * the same bytes per peer (without extras), so the grid wins by its fewer steps, by less as the
 * bytes grow. */
#include <strings.h>

#include "reduce/reduce.h"

static double step_cost(double bytes, const reduce_model_t *m) {
    return m->step_s + (m->rate_Bps > 0 ? bytes / m->rate_Bps : 0.0);
}

double reduce_model_ring_s(uint32_t n, double bytes, const reduce_model_t *m) {
    if (n < 2) return 0.0;
    return 2.0 * (n - 1) * step_cost(bytes / n, m);
}

double reduce_model_grid_s(const reduce_grid_shape_t *s, double bytes, const reduce_model_t *m) {
    double t = s->extras ? 2.0 * step_cost(bytes, m) : 0.0, shard = bytes;
    for (uint32_t d = 0; d < s->ndims; d++) {
        t += 2.0 * (s->size[d] - 1) * step_cost(shard / s->size[d], m);
        shard /= s->size[d];
    }
    return t;
}

reduce_algo_t reduce_grid_pick(uint32_t n, double bytes, const reduce_model_t *m, reduce_algo_t forced,
                               reduce_grid_shape_t *shape) {
    reduce_grid_shape_t exact;
    if (!reduce_grid_shape(n, 0, UINT32_MAX, shape) || forced == REDUCE_ALGO_RING) goto ring;
    /* Folds save steps but move the whole buffer twice: without them may be faster. */
    if (shape->extras && reduce_grid_shape(n, 0, 0, &exact) &&
        reduce_model_grid_s(&exact, bytes, m) <= reduce_model_grid_s(shape, bytes, m))
        *shape = exact;
    if (forced == REDUCE_ALGO_GRID) return REDUCE_ALGO_GRID;
    if (reduce_model_grid_s(shape, bytes, m) <= REDUCE_GRID_MARGIN * reduce_model_ring_s(n, bytes, m))
        return REDUCE_ALGO_GRID;
ring:
    reduce_grid_shape(0, 0, 0, shape); /* zeroed */
    return REDUCE_ALGO_RING;
}

int reduce_algo_parse(const char *s, reduce_algo_t *out) {
    static const struct {
        const char *name;
        reduce_algo_t algo;
    } names[] = {{"auto", REDUCE_ALGO_AUTO}, {"ring", REDUCE_ALGO_RING}, {"grid", REDUCE_ALGO_GRID},
                 {"2d", REDUCE_ALGO_GRID}};
    for (size_t i = 0; s != NULL && i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].algo;
            return 0;
        }
    return -1;
}
