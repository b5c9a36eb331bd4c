/*
 * train.c — the state of a training executable: PopTorch's trainingModel semantics.
 *
 * One run is D device iterations. Each iteration runs A micro-batches on every replica
 * (forward, the loss's gradient seeded with 1, the backward steps in reverse order, each
 * zeroing the activation gradients it is the first to write and adding into the others and
 * into the replica's accumulators), then reduces the accumulators of all replicas once into
 * replica 0's (sim_train_reduce: mean over A x R by default, or sum) and takes one
 * optimizer step on the single copy of the weights every replica reads. The IPU threads
 * (ipus.c) run it as each IPU's program says (program.h: the REDUCE and UPDATE steps of the
 * collective, taken by thread 0 between barriers).
 * Nothing is allocated per step: the accumulators, the optimizer state and every backward
 * kernel's gradient views are bound here at compile time (sim_train_bind).
 * Does not: decide what is trainable (weights.c, autodiff.c) or implement an optimizer
 * (optim.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "exe.h"
#include "hot.h"
#include "pool.h"

void
sim_train_free(struct sim_train *tr)
{
    if (tr == NULL)
        return;
    free(tr->bsteps);
    free(tr->zero);
    free(tr->stage_b);
    free(tr->bkern);
    free(tr->gviews);
    free(tr->grads);
    sim_optim_free(tr);
    free(tr->loss_grad);
    free(tr);
}

/* The gradient of value v in lane L of replica r as IPU ipu sees it: an arena block for
 * activations (the exchange copy's when v is produced on another IPU), the replica's
 * accumulator slot for trainable weights, NULL for anything else. */
static void *
grad_ptr(const struct sim_exe *e, int v, unsigned r, unsigned L, int ipu)
{
    const struct sim_val *val = &e->vals[v];

    if (!val->grad)
        return NULL;
    if (val->kind == SIM_V_ACT && val->ipu != ipu) {    /* its exchange copy on ipu */
        const struct sim_xfer *x = &e->xfer[sim_xfer_find(e, v, ipu)];
        return x->goff >= 0 ? (char *)e->arenas[L * e->ipr + (unsigned)ipu] + x->goff : NULL;
    }
    if (val->kind == SIM_V_ACT && val->goff >= 0)
        return (char *)e->arenas[L * e->ipr + (unsigned)val->ipu] + val->goff;
    if (val->kind == SIM_V_WEIGHT && e->w[val->weight].kind == SIM_WEIGHT_TRAINABLE)
        return (char *)(e->tr->grads + (size_t)r * e->n_train) + e->w[val->weight].off;
    return NULL;
}

static float *
alloc_floats(size_t n)
{
    float *p = sim_aligned_alloc(n * sizeof(float));

    if (p != NULL)
        memset(p, 0, n * sizeof(float));
    return p;
}

static void
grad_view(struct sim_tensor *t, const struct sim_exe *e, int v, unsigned r, unsigned L,
          int ipu, bool wanted)
{
    const struct sim_val *val = &e->vals[v];

    t->dtype = val->ti.dtype;
    t->shape = val->ti.shape;
    t->numel = val->ti.numel;
    t->data = wanted ? grad_ptr(e, v, r, L, ipu) : NULL;
}

int
sim_train_bind(struct sim_exe *e, struct sim_err *err)
{
    struct sim_train *tr = e->tr;
    size_t n_views = 0, R = e->R, nb = (size_t)tr->n_bsteps;

    if (e->n_train > SIZE_MAX / sizeof(float) / R)
        return sim_err_set(err, IPUOF_E_TOO_LARGE, "the gradient accumulators are too large");
    tr->grads = alloc_floats(R * e->n_train);
    for (size_t b = 0; b < nb; b++) {
        const struct sim_enode *n = &e->nodes[tr->bsteps[b].node];
        if (!tr->bsteps[b].recompute)
            n_views += (size_t)n->n_in + (size_t)n->n_out;
    }
    tr->bkern = calloc(R * e->S * nb + 1, sizeof(*tr->bkern));
    tr->gviews = calloc(R * e->S * n_views + 1, sizeof(*tr->gviews));
    tr->loss_grad = calloc(R * e->S, sizeof(*tr->loss_grad));
    if (tr->grads == NULL || tr->bkern == NULL || tr->gviews == NULL || tr->loss_grad == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory allocating the gradient "
                           "accumulators");
    if (sim_optim_bind(e, err) != 0)
        return err->code;
    for (unsigned L = 0; L < e->R * e->S; L++) {
        struct sim_tensor *views = tr->gviews + (size_t)L * n_views;
        unsigned r = L / e->S;
        int lipu = e->vals[tr->loss].ipu;
        if (e->arenas[L * e->ipr + (unsigned)lipu] != NULL)
            tr->loss_grad[L] = grad_ptr(e, tr->loss, r, L, lipu);
        for (size_t b = 0; b < nb; b++) {
            int s = tr->bsteps[b].node;
            const struct sim_enode *n = &e->nodes[s];
            struct sim_bkern *bk = &tr->bkern[L * nb + b];
            char *arena = e->arenas[L * e->ipr + (unsigned)n->ipu];
            if (tr->bsteps[b].recompute)
                continue;       /* runs the forward kernel e->kern (ipus.c) */
            bk->dout = views;
            bk->din = views + n->n_out;
            views += n->n_in + n->n_out;
            if (arena == NULL)
                continue;       /* a slot this node's IPU does not use */
            bk->k = e->kern[(size_t)L * e->n_nodes + (size_t)s];
            bk->k.scratch = n->bwd_scratch_off >= 0 ? arena + n->bwd_scratch_off : NULL;
            for (int j = 0; j < n->n_out; j++)
                if (n->out[j] >= 0)
                    grad_view(&bk->dout[j], e, n->out[j], r, L, n->ipu, true);
            for (int j = 0; j < n->n_in; j++)
                if (n->in[j] >= 0)
                    grad_view(&bk->din[j], e, n->in[j], r, L, n->ipu,
                              sim_op_grad_input(n->op, j));
        }
    }
    /* A loss no trainable weight reaches carries no gradient (autodiff.c): no seed. */
    if (e->vals[tr->loss].grad && tr->loss_grad[0] == NULL)
        return sim_err_set(err, IPUOF_E_INTERNAL, "the loss has no gradient buffer");
    return 0;
}

struct reduce_run {
    float *g0;
    size_t n;
    unsigned R;
    float scale;
};

/* Gradients [lo, hi): replica 0's += every other replica's, then scaled. */
SIM_HOT_FN(reduce_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct reduce_run *c = ctx;
    float *g0 = c->g0;

    for (unsigned r = 1; r < c->R; r++) {
        const float *gr = c->g0 + (size_t)r * c->n;
        for (int64_t i = lo; i < hi; i++)
            g0[i] += gr[i];
    }
    if (c->scale != 1.0f)
        for (int64_t i = lo; i < hi; i++)
            g0[i] *= c->scale;
}

int
sim_train_reduce(struct sim_exe *e, struct sim_err *err)
{
    struct sim_train *tr = e->tr;
    unsigned R = tr->xr.fn != NULL ? tr->xr.replicas : e->R;
    float scale = tr->reduction == SIM_REDUCE_MEAN ? 1.0f / ((float)tr->A * (float)R) : 1.0f;
    struct reduce_run c = { tr->grads, e->n_train, e->R, scale };
    int rc;

    if (tr->xr.fn == NULL) {
        if (c.R > 1 || c.scale != 1.0f)
            sim_pool_for((int64_t)c.n, SIM_POOL_MAP_GRAIN, reduce_piece, &c);
        return 0;
    }
    /* Across executables: fn sums every replica of all of them, then the mean. */
    rc = tr->xr.fn(tr->xr.ctx, tr->grads, e->R, e->n_train, err);
    if (rc != 0) {
        atomic_store(&tr->xfailed, 1);
        return rc;
    }
    c.R = 1;
    c.scale = scale;
    if (c.scale != 1.0f)
        sim_pool_for((int64_t)c.n, SIM_POOL_MAP_GRAIN, reduce_piece, &c);
    return 0;
}

int
sim_exe_set_xreduce(struct sim_exe *e, const struct sim_xreduce *x, struct sim_err *err)
{
    if (e->tr == NULL)
        return sim_err_set(err, IPUOF_E_INVAL, "a cross-executable reduce needs a training "
                           "executable");
    if (x != NULL && x->fn != NULL && x->replicas < e->R)
        return sim_err_set(err, IPUOF_E_INVAL, "the partition's %u replicas are fewer than "
                           "the executable's %u", x->replicas, e->R);
    if (x != NULL && x->fn != NULL && !(x->bytes_per_s >= 0 && isfinite(x->bytes_per_s)))
        return sim_err_set(err, IPUOF_E_INVAL, "the links' rate between executables must be "
                           "0 or positive");
    if (atomic_load(&e->busy))
        return sim_err_set(err, IPUOF_E_BUSY, "the executable is running");
    if (x != NULL && x->fn != NULL)
        e->tr->xr = *x;
    else
        memset(&e->tr->xr, 0, sizeof e->tr->xr);
    /* The simulated clock with (or without) the all-reduce between executables. */
    sim_clock_free(e->clock);
    e->clock = NULL;
    return sim_sched_build(e, err);
}

void
sim_train_update(struct sim_exe *e, bool last)
{
    sim_half_before_update(e);
    sim_optim_step(e);
    sim_half_after_update(e);
    if (!last)
        memset(e->tr->grads, 0, (size_t)e->R * e->n_train * sizeof(float));
}
