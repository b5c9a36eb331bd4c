/*
 * bcast.h — numpy broadcasting of up to three inputs against one output shape, for ops that
 * do not need op_elementwise.c's coalesced fast path (comparisons, logic, Where, Mod,
 * Expand). A plan is made once at compile time; a step walks the output in rows of its
 * innermost dim with each input's element stride (0 where broadcast).
 *
 * Usage:
 *   int64_t idx[SIM_MAX_RANK] = { 0 }, off[SIM_BCAST_MAX] = { 0 };
 *   for (int64_t r = 0; r < p->rows; r++, sim_bcast_next(p, idx, off))
 *       for (int64_t i = 0; i < p->n; i++)
 *           out[r * p->n + i] = f(a[off[0] + i * p->inner[0]], ...);
 */
#ifndef SIM_BCAST_H
#define SIM_BCAST_H

#include "sim_int.h"

#define SIM_BCAST_MAX 3

struct sim_bcast {
    int rank;                           /* output rank, >= 1 */
    int n_in;
    int64_t dims[SIM_MAX_RANK];         /* output dims */
    int64_t st[SIM_BCAST_MAX][SIM_MAX_RANK]; /* element strides of each input, 0 if broadcast */
    int64_t n, rows;                    /* innermost dim, rows = total / n (0 when empty) */
    int64_t inner[SIM_BCAST_MAX];       /* st[i][rank - 1] */
};

/* Broadcasts the n_in (1 to SIM_BCAST_MAX) shapes into *out by numpy's rules; false when
 * they do not broadcast. */
bool sim_bcast_shapes(int n_in, const struct sim_shape *const *in, struct sim_shape *out);

/* Plans the walk of out (a shape every input broadcasts to) for the n_in input shapes. */
void sim_bcast_plan(struct sim_bcast *p, int n_in, const struct sim_shape *const *in,
                    const struct sim_shape *out);

/* Advances the row index idx and the per-input offsets off to the next row. */
static inline void
sim_bcast_next(const struct sim_bcast *p, int64_t *idx, int64_t *off)
{
    for (int k = p->rank - 2; k >= 0; k--) {
        idx[k]++;
        for (int i = 0; i < p->n_in; i++)
            off[i] += p->st[i][k];
        if (idx[k] < p->dims[k])
            return;
        for (int i = 0; i < p->n_in; i++)
            off[i] -= p->st[i][k] * p->dims[k];
        idx[k] = 0;
    }
}

#endif /* SIM_BCAST_H */
