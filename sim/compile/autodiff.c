/*
 * autodiff.c — the backward graph of a training executable, built at compile time from the
 * forward schedule (reverse-mode differentiation, one gradient rule per op as ggml keeps
 * them: the op table's backward entries).
 *
 * Does: check the loss (a float graph output computed by a node, one value per replica and
 * micro-batch); mark the values that carry a gradient: float values reachable from a
 * trainable weight through differentiable operands (grad_inputs) from which the loss is
 * reachable the same way; demote weights that turn out not to reach the loss through float
 * values to frozen; refuse an op without a gradient rule on such a path; give every forward
 * node with a gradient-carrying output one backward step, in reverse schedule order; and
 * compute the lifetime of each activation's gradient on the training timeline (from its
 * first writer, i.e. its last reader's backward step, to its producer's backward step),
 * and of its exchange copies on the IPUs that read it (struct sim_xfer), listing where
 * each must be zeroed (recompute.c first inserts the steps that run forward nodes again).
 * plan.c places them in the arenas.
 * Does not: run anything (train.c) or know an op's gradient formula (the op files do).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exe.h"

/* Whether value v can carry a gradient: float, or float16 (its gradient is float16 too,
 * 2 bytes per element; only the ops that take float16, Cast and Identity, see one). */
static bool
is_float(const struct sim_exe *e, int v)
{
    return v >= 0 && e->vals[v].kind != SIM_V_NONE &&
           (e->vals[v].ti.dtype == SIM_DTYPE_FLOAT || e->vals[v].ti.dtype == SIM_DTYPE_FLOAT16);
}

static int
check_loss(struct sim_exe *e, struct sim_err *err)
{
    const struct sim_val *lv = &e->vals[e->tr->loss];
    const char *name = e->m->vals[e->tr->loss].name;
    char s[128];

    switch (lv->kind) {
    case SIM_V_CONST:
        return sim_err_set(err, IPUOF_E_INVAL, "the loss '%s' is a constant: it depends on "
                           "no weight, so there is nothing to train", name);
    case SIM_V_INPUT:
    case SIM_V_WEIGHT:
        return sim_err_set(err, IPUOF_E_INVAL, "the loss '%s' is a graph %s, not computed by "
                           "the graph", name, lv->kind == SIM_V_INPUT ? "input" : "weight");
    case SIM_V_ACT:
        break;
    default:
        return sim_err_set(err, IPUOF_E_INTERNAL, "the loss '%s' has no value", name);
    }
    if (lv->ti.dtype != SIM_DTYPE_FLOAT || lv->ti.numel != 1)
        return sim_err_set(err, IPUOF_E_INVAL, "the loss '%s' is %s %s, but a loss must be "
                           "one float per replica and micro-batch; reduce it (ReduceMean, or "
                           "a loss op with reduction 'mean' or 'sum')", name,
                           sim_dtype_name(lv->ti.dtype), sim_shape_fmt(&lv->ti.shape, s,
                                                                       sizeof(s)));
    return 0;
}

/* Marks e->vals[v].grad; returns the number of trainable weights that carry one. */
static int
mark_gradients(struct sim_exe *e, unsigned char *from, unsigned char *to)
{
    int trainable = 0;

    for (int i = 0; i < e->n_w; i++)
        if (e->w[i].kind == SIM_WEIGHT_TRAINABLE)
            from[e->w[i].val] = 1;
    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *n = &e->nodes[s];
        bool hit = false;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] >= 0 && sim_op_grad_input(n->op, j) && from[n->in[j]])
                hit = true;
        for (int j = 0; hit && j < n->n_out; j++)
            if (is_float(e, n->out[j]))
                from[n->out[j]] = 1;
    }
    to[e->tr->loss] = 1;
    for (int s = e->n_nodes - 1; s >= 0; s--) {
        const struct sim_enode *n = &e->nodes[s];
        bool hit = false;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0 && to[n->out[j]])
                hit = true;
        for (int j = 0; hit && j < n->n_in; j++)
            if (is_float(e, n->in[j]) && sim_op_grad_input(n->op, j))
                to[n->in[j]] = 1;
    }
    for (int v = 0; v < e->m->n_vals; v++)
        e->vals[v].grad = from[v] && to[v] && is_float(e, v);
    for (int i = 0; i < e->n_w; i++) {
        struct sim_weight *w = &e->w[i];
        if (w->kind != SIM_WEIGHT_TRAINABLE)
            continue;
        if (e->vals[w->val].grad)
            trainable++;
        else
            w->kind = SIM_WEIGHT_FROZEN;
    }
    return trainable;
}

/* One backward step per node with a gradient-carrying output, in reverse order. */
static int
build_steps(struct sim_exe *e, struct sim_err *err)
{
    struct sim_train *tr = e->tr;

    tr->bsteps = calloc((size_t)e->n_nodes + 1, sizeof(*tr->bsteps));
    if (tr->bsteps == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    for (int s = e->n_nodes - 1; s >= 0; s--) {
        struct sim_enode *n = &e->nodes[s];
        bool need = false;
        for (int j = 0; j < n->n_out; j++)
            if (n->out[j] >= 0 && e->vals[n->out[j]].grad)
                need = true;
        if (!need)
            continue;
        if (n->op->backward == NULL)
            return sim_err_set(err, IPUOF_E_UNSUPPORTED, "%s: %s has no gradient, but it lies "
                               "between trainable weights and the loss '%s'; mark the weights "
                               "before it as frozen or change the graph (ops with gradients: "
                               "%s)", n->label, n->op->name, e->m->vals[tr->loss].name,
                               sim_gradient_ops());
        n->bstep = tr->n_bsteps;
        tr->bsteps[tr->n_bsteps++].node = s;
    }
    return 0;
}

/* The first backward step (timeline) on IPU ipu that writes the gradient of v, or -1. */
static int
first_writer(const struct sim_exe *e, int v, int ipu)
{
    const struct sim_train *tr = e->tr;

    for (int b = 0; b < tr->n_bsteps; b++) {
        const struct sim_enode *n = &e->nodes[tr->bsteps[b].node];
        if (n->ipu != ipu || tr->bsteps[b].recompute)
            continue;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] == v && sim_op_grad_input(n->op, j))
                return e->n_nodes + b;
    }
    return -1;
}

/* Stage k's backward steps: [stage_b[k + 1], stage_b[k]) (steps run in reverse order). */
static int
stage_steps(struct sim_exe *e, struct sim_err *err)
{
    struct sim_train *tr = e->tr;

    tr->stage_b = calloc((size_t)e->n_stages + 1, sizeof(*tr->stage_b));
    if (tr->stage_b == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    for (int k = 0; k < e->n_stages; k++)
        for (int b = 0; b < tr->n_bsteps; b++)
            if (tr->bsteps[b].node >= e->stage_node[k])
                tr->stage_b[k] = b + 1;
    return 0;
}

static void
add_zero(struct sim_train *tr, int *n, int ipu, const int64_t *off, size_t bytes)
{
    tr->zero[(*n)++] = (struct sim_gzero){ ipu, off, bytes };
}

/* Gradient lifetimes of activations (and of their exchange copies on other IPUs: from
 * the first writer there to the send after the reading stage's backward; the producer
 * receives before its stage's backward) and the zero lists of the backward steps. */
static int
lifetimes(struct sim_exe *e, struct sim_err *err)
{
    struct sim_train *tr = e->tr;
    int F = e->n_nodes, n_zero = 0;
    unsigned char *assigned = calloc((size_t)e->m->n_vals + 1, 1);

    if (assigned == NULL || stage_steps(e, err) != 0) {
        free(assigned);
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    }
    for (int v = 0; v < e->m->n_vals; v++) {
        struct sim_val *val = &e->vals[v];
        val->gfirst = val->glast = -1;
        if (!val->grad || val->kind != SIM_V_ACT)
            continue;
        val->glast = F + e->nodes[val->producer].bstep;
        val->gfirst = v == tr->loss ? F : first_writer(e, v, val->ipu);
    }
    for (int i = 0; i < e->n_xfer; i++) {
        struct sim_xfer *x = &e->xfer[i];
        struct sim_val *val = &e->vals[x->val];
        int recv;
        if (!val->grad)
            continue;
        x->gfirst = first_writer(e, x->val, x->dst);
        if (x->gfirst < 0)
            continue;           /* no reader there wants the gradient: nothing goes back */
        x->glast = F + tr->stage_b[x->rstage] - 1;
        if (x->glast < x->gfirst)
            x->glast = x->gfirst;
        recv = F + tr->stage_b[x->sstage + 1];
        if (!assigned[x->val] && x->val != tr->loss && (val->gfirst < 0 || recv <= val->gfirst)) {
            x->gassign = true;
            assigned[x->val] = 1;
        }
        if (val->gfirst < 0 || recv < val->gfirst)
            val->gfirst = recv;
    }
    tr->zero = calloc((size_t)e->m->n_vals + (size_t)e->n_xfer + 1, sizeof(*tr->zero));
    if (tr->zero == NULL) {
        free(assigned);
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    }
    for (int b = 0; b < tr->n_bsteps; b++) {
        tr->bsteps[b].zero_start = n_zero;
        for (int v = 0; v < e->m->n_vals; v++) {
            const struct sim_val *val = &e->vals[v];
            if (val->grad && val->kind == SIM_V_ACT && v != tr->loss && !assigned[v] &&
                val->gfirst == F + b)
                add_zero(tr, &n_zero, val->ipu, &val->goff, val->bytes);
        }
        for (int i = 0; i < e->n_xfer; i++)
            if (e->xfer[i].gfirst == F + b)
                add_zero(tr, &n_zero, e->xfer[i].dst, &e->xfer[i].goff,
                         e->vals[e->xfer[i].val].bytes);
        tr->bsteps[b].zero_end = n_zero;
    }
    free(assigned);
    for (int v = 0; v < e->m->n_vals; v++) {
        const struct sim_val *val = &e->vals[v];
        if (val->grad && val->kind == SIM_V_ACT && (val->gfirst < 0 || val->gfirst > val->glast))
            return sim_err_set(err, IPUOF_E_INTERNAL, "gradient of '%s' has no writer before "
                               "its reader", e->m->vals[v].name);
    }
    return 0;
}

int
sim_autodiff(struct sim_exe *e, struct sim_err *err)
{
    unsigned char *from = NULL, *to = NULL;
    int rc = check_loss(e, err);

    if (rc != 0)
        return rc;
    from = calloc((size_t)e->m->n_vals + 1, 1);
    to = calloc((size_t)e->m->n_vals + 1, 1);
    if (from == NULL || to == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
        goto out;
    }
    /* No trainable weight reaching the loss (a model in eval() mode inside a training
     * model, a loss of the inputs alone) is no error: PopTorch builds PopART's
     * TrainingSession all the same, whose backward pass is then empty. No value carries a
     * gradient, so there are no backward steps; the forward pass runs, the weights stay. */
    (void)mark_gradients(e, from, to);
    rc = build_steps(e, err);
    if (rc == 0)
        rc = sim_recompute_steps(e, err);
    if (rc == 0)
        rc = lifetimes(e, err);
out:
    free(from);
    free(to);
    return rc;
}
