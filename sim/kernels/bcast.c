/*
 * bcast.c — numpy broadcasting of up to three shapes and the row walk over the result (see
 * bcast.h).
 */
#include "bcast.h"

bool
sim_bcast_shapes(int n_in, const struct sim_shape *const *in, struct sim_shape *out)
{
    struct sim_shape o = *in[0];

    for (int i = 1; i < n_in; i++) {
        struct sim_shape t;
        if (!sim_shape_broadcast(&o, in[i], &t))
            return false;
        o = t;
    }
    *out = o;
    return true;
}

void
sim_bcast_plan(struct sim_bcast *p, int n_in, const struct sim_shape *const *in,
               const struct sim_shape *out)
{
    int r = out->rank > 0 ? out->rank : 1;
    int64_t total = 1;

    p->rank = r;
    p->n_in = n_in;
    for (int k = 0; k < r; k++)
        p->dims[k] = out->rank > 0 ? out->d[k] : 1;
    for (int i = 0; i < n_in; i++) {
        int64_t acc = 1;
        for (int k = r - 1; k >= 0; k--) {
            int ik = k - (r - in[i]->rank);
            int64_t d = ik >= 0 ? in[i]->d[ik] : 1;
            p->st[i][k] = d == 1 ? 0 : acc;
            acc *= d;
        }
        p->inner[i] = p->st[i][r - 1];
    }
    for (int k = 0; k < r; k++)
        total *= p->dims[k];
    p->n = p->dims[r - 1];
    p->rows = p->n > 0 ? total / p->n : 0;
}
