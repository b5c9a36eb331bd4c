/*
 * half_train.c — training with float16 (sim/README.md "Dtypes"): float16 weights are kept
 * as floats that always hold float16 values, the loss scaling PopTorch defines, and the
 * rounding of each update back to float16.
 *
 * An executable "computes in float16" when a node runs through half_exec.c or a weight is
 * float16. Then, as PopTorch defines loss_scaling: the loss's gradient is seeded with
 * loss_scaling instead of 1 (so small float16 gradients do not flush to zero), a float16
 * weight's reduced gradient is rounded to float16 as the IPU stores it, every gradient is
 * divided by loss_scaling before the optimizer's update (computed in float32), and the
 * updated float16 weights (and BatchNorm statistics) are rounded back to float16, to
 * nearest even or stochastically (half_sr.c) keyed by the executable's state (seeded from
 * the random seed, advanced each step: reproducible for a seed) and the weight's index. Without float16, loss scaling would
 * cancel and is not applied (no float32 number changes).
 * Does not: compute the update (optim.c) or hold optimizer state (optim_state.c).
 */
#include <string.h>

#include "exe.h"
#include "half.h"

/* Rounds n floats at x to float16 values in place (stochastically, keyed by key, when sr). */
static void
round_floats(float *x, int64_t n, bool sr, uint64_t key)
{
    if (sr)
        sim_half_round_sr_n(x, n, key);
    else
        sim_half_round_n(x, n);
}

uint64_t
sim_half_rng_seed(uint64_t seed)
{
    return sim_rng_seed(seed ^ 0x68616c66ull, 0);     /* "half": apart from Dropout's */
}

float
sim_half_loss_seed(const struct sim_exe *e)
{
    return e->computes_half ? e->tr->opt.loss_scaling : 1.0f;
}

void
sim_half_before_update(struct sim_exe *e)
{
    float inv;

    if (!e->computes_half)
        return;
    for (int i = 0; i < e->n_w; i++) {
        const struct sim_weight *w = &e->w[i];
        if (w->half && w->kind == SIM_WEIGHT_TRAINABLE)
            sim_half_round_n(e->tr->grads + w->off / sizeof(float),
                             (int64_t)(w->bytes / sizeof(float)));
    }
    inv = 1.0f / e->tr->opt.loss_scaling;
    if (inv != 1.0f)
        for (size_t j = 0; j < e->n_train; j++)
            e->tr->grads[j] *= inv;
}

void
sim_half_after_update(struct sim_exe *e)
{
    bool sr = e->stochastic;

    for (int i = 0; i < e->n_w; i++) {
        const struct sim_weight *w = &e->w[i];
        int64_t n = (int64_t)(w->bytes / sizeof(float));
        /* the step's key of weight i (replica r's copy of a buffer: its own stream) */
        uint64_t key = sim_half_sr_key(e->half_rng, (uint64_t)i << 16);
        if (!w->half || w->kind == SIM_WEIGHT_FROZEN)
            continue;
        if (w->kind == SIM_WEIGHT_TRAINABLE) {
            round_floats((float *)((char *)e->params + w->off), n, sr, key);
            continue;
        }
        for (unsigned r = 0; r < e->R; r++)
            round_floats((float *)(e->bufs + r * e->bufs_bytes + w->off), n, sr,
                         sim_half_sr_key(key, r));
    }
    if (sr)     /* the next step draws anew */
        e->half_rng = sim_half_sr_key(e->half_rng, UINT64_MAX);
}

void
sim_half_round_weight(struct sim_exe *e, int i)
{
    const struct sim_weight *w = &e->w[i];
    int64_t n = (int64_t)(w->bytes / sizeof(float));
    unsigned copies = w->kind == SIM_WEIGHT_BUFFER ? e->R : 1;

    if (!w->half)
        return;
    for (unsigned r = 0; r < copies; r++)
        round_floats(w->kind == SIM_WEIGHT_BUFFER
                     ? (float *)(e->bufs + r * e->bufs_bytes + w->off)
                     : (float *)((char *)e->params + w->off), n, false, 0);
}
