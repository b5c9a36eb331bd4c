/*
 * optim_internal.h — what optim.c (the update) and optim_state.c (state, groups, the
 * executable's optimizer calls) share.
 */
#ifndef IPUOF_SIM_OPTIM_INTERNAL_H
#define IPUOF_SIM_OPTIM_INTERNAL_H

#include <stdbool.h>

#include "sim.h"

/* One parameter group's hyper-parameters, as the update reads them. */
struct sim_opt_hyper {
    float lr, wd, mu, damp, b1, b2, eps, alpha;
    bool nesterov;
};

/* "SGD", "Adam", ... or "unknown". */
const char *sim_optim_kind_name(int kind);

/* Group g's hyper-parameters (0, or any g out of 1..o->n_groups: the top-level ones). */
void sim_optim_hyper(const struct sim_optimizer *o, int g, struct sim_opt_hyper *h);

#endif
