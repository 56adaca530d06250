/* reduce_2d_model.c -- which all-reduce an op runs: the ring or the grid (reduce.h, README.md
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

double reduce_model_2d_s(const reduce_2d_shape_t *s, double bytes, const reduce_model_t *m) {
    double c = s->cols, r = s->rows;
    double t = 2.0 * (c - 1) * step_cost(bytes / c, m) + 2.0 * (r - 1) * step_cost(bytes / (c * r), m);
    if (s->extras) t += 2.0 * step_cost(bytes, m);
    return t;
}

reduce_algo_t reduce_2d_pick(uint32_t n, double bytes, const reduce_model_t *m, reduce_algo_t forced,
                             reduce_2d_shape_t *shape) {
    if (!reduce_2d_shape(n, shape) || forced == REDUCE_ALGO_RING) goto ring;
    if (forced == REDUCE_ALGO_2D) return REDUCE_ALGO_2D;
    if (reduce_model_2d_s(shape, bytes, m) <= REDUCE_2D_MARGIN * reduce_model_ring_s(n, bytes, m))
        return REDUCE_ALGO_2D;
ring:
    *shape = (reduce_2d_shape_t){0, 0, 0};
    return REDUCE_ALGO_RING;
}

int reduce_algo_parse(const char *s, reduce_algo_t *out) {
    static const struct {
        const char *name;
        reduce_algo_t algo;
    } names[] = {{"auto", REDUCE_ALGO_AUTO}, {"ring", REDUCE_ALGO_RING}, {"2d", REDUCE_ALGO_2D}};
    for (size_t i = 0; s != NULL && i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].algo;
            return 0;
        }
    return -1;
}
