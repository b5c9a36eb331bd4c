/*
 * train.c — running a training executable: PopTorch's trainingModel semantics.
 *
 * One run is D device iterations. Each iteration zeroes the per-replica gradient
 * accumulators, runs A micro-batches on every replica (forward, the loss's gradient seeded
 * with 1, the backward steps in reverse order, each zeroing the activation gradients it is
 * the first to write and adding into the others and into the accumulators), then reduces
 * the accumulators of all replicas once into replica 0's (mean over A x R by default, or
 * sum) and takes one optimizer step on the single copy of the weights every replica reads.
 * With more than one replica every replica runs on its own crew thread and the reduction
 * and the optimizer step are a collective step taken by thread 0 between two barriers.
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
    if (tr->loss_grad[0] == NULL)
        return sim_err_set(err, IPUOF_E_INTERNAL, "the loss has no gradient buffer");
    return 0;
}

/* The backward steps of one micro-batch on replica r. */
static int
backward(struct sim_exe *e, unsigned r, uint_fast64_t id, struct sim_err *err)
{
    struct sim_train *tr = e->tr;
    unsigned L = r * e->S;      /* one micro-batch at a time: slot 0 */
    const struct sim_bkern *bk = &tr->bkern[(size_t)L * (size_t)tr->n_bsteps];
    void *const *arenas = e->arenas + (size_t)L * e->ipr;

    *tr->loss_grad[L] = 1.0f;
    for (int b = 0; b < tr->n_bsteps; b++) {
        const struct sim_bstep *st = &tr->bsteps[b];
        int rc;
        if (sim_exe_cancelled(e, id))
            return sim_err_set(err, IPUOF_E_CANCELLED, "the run was cancelled");
        for (int z = st->zero_start; z < st->zero_end; z++) {
            const struct sim_gzero *g = &tr->zero[z];
            memset((char *)arenas[g->ipu] + *g->off, 0, g->bytes);
        }
        rc = sim_exec_node_backward(e, st->node, &bk[b].k, bk[b].dout, bk[b].din, err);
        if (rc != 0)
            return rc;
    }
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

/* Micro-batch a of device iteration d on replica r: forward, backward, outputs. */
static int
train_step(struct sim_exe *e, unsigned d, unsigned a, unsigned r, uint_fast64_t id,
           struct sim_err *err)
{
    int rc;

    sim_exec_patch(e, d, a, r);
    rc = sim_exec_forward(e, r, id, err);
    if (rc == 0)
        rc = backward(e, r, id, err);
    if (rc == IPUOF_E_CANCELLED)
        return sim_err_set(err, rc, "the run was cancelled at device iteration %u of %u "
                           "(accumulation step %u, replica %u); %u optimizer steps were "
                           "taken", d, e->D, a, r, d);
    if (rc != 0) {
        if (e->D > 1 || e->tr->A > 1 || e->R > 1)
            sim_err_prefix(err, "device iteration %u, accumulation step %u, replica %u (%u "
                           "optimizer steps taken): ", d, a, r, d);
        return rc;
    }
    sim_exec_post_step(e, d, a, r);
    return 0;
}

/* A crew thread of a training run: the micro-batches of its replicas, then, at the end of
 * each device iteration, the collective step (thread 0 reduces the accumulators of every
 * replica and updates the weights) between two barriers. Every thread passes the same
 * barriers; a failure stops all of them after the iteration's barriers. */
static void
train_job(struct sim_exe *e, unsigned idx, unsigned n, void *ud)
{
    uint_fast64_t id = *(const uint_fast64_t *)ud;
    struct sim_train *tr = e->tr;
    int rc = 0;

    for (unsigned d = 0; d < e->D; d++) {
        bool stop;
        for (unsigned r = idx; r < e->R && rc == 0; r += n)
            memset(tr->grads + (size_t)r * e->n_train, 0, e->n_train * sizeof(float));
        for (unsigned a = 0; a < tr->A && rc == 0; a++)
            for (unsigned r = idx; r < e->R && rc == 0; r += n) {
                if (atomic_load_explicit(&e->abort_run, memory_order_relaxed))
                    break;
                rc = train_step(e, d, a, r, id, &e->terr[idx]);
            }
        if (rc != 0) {
            e->trc[idx] = rc;
            atomic_store(&e->abort_run, 1);
        }
        sim_crew_barrier(e->crew);
        stop = atomic_load(&e->abort_run) != 0;    /* nobody writes it until the next */
        if (idx == 0 && !stop) {
            rc = sim_train_reduce(e, &e->terr[idx]);
            if (rc == 0)
                sim_optim_step(e);
            else
                e->trc[idx] = rc;
        }
        sim_crew_barrier(e->crew);
        if (stop || atomic_load(&tr->xfailed)) /* written before the barrier only */
            break;
    }
}

int
sim_train_run(struct sim_exe *e, uint_fast64_t id, struct sim_err *err)
{
    struct sim_train *tr = e->tr;

    atomic_store(&tr->xfailed, 0);
    if (e->crew != NULL) {
        unsigned n = e->R < SIM_MAX_IPUS ? e->R : SIM_MAX_IPUS;
        memset(e->trc, 0, n * sizeof(*e->trc));
        sim_crew_run(e->crew, e, train_job, &id);
        return sim_exe_crew_status(e, n, err);
    }
    for (unsigned d = 0; d < e->D; d++) {
        memset(tr->grads, 0, e->n_train * sizeof(float));
        for (unsigned a = 0; a < tr->A; a++) {
            int rc = train_step(e, d, a, 0, id, err);
            if (rc != 0)
                return rc;
        }
        int rc = sim_train_reduce(e, err);
        if (rc != 0)
            return rc;
        sim_optim_step(e);
    }
    return 0;
}
