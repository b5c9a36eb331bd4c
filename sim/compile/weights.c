/*
 * weights.c — which initializers an executable owns as weights, and where they live.
 *
 * Before inference (sim_weights_mark): in a training compile, the float initializers from
 * which the loss can be reached through differentiable operands (each op's grad_inputs)
 * become trainable weights, BatchNormalization's running statistics become per-replica
 * buffers, and the names in frozen_weights become frozen weights; with updatable_weights
 * every float initializer becomes a frozen weight; the buffer (input 0) of each
 * ai.graphcore::BufferUpdate becomes a per-replica buffer in any compile, which the node
 * overwrites each micro-batch (a module buffer forward() changes in place, carried from step
 * to step as BatchNormalization's running statistics are). A weight is a SIM_V_WEIGHT value with no
 * compile-time data, so nothing reading it is folded.
 * After autodiff (sim_weights_layout): trainable weights are packed first into one flat
 * float buffer (llm.c's "parameters in one buffer"), each slot 64-byte aligned so the
 * optimizer is one loop over n_train floats (the alignment gaps hold zeros and stay zero),
 * then frozen weights; buffers get one block per replica. Initial values come from the
 * model's initializers.
 * Does not: read, write or save weights at run time (weights_io.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exe.h"
#include "half.h"

static size_t
align_up(size_t n)
{
    return (n + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;
}

/* reach[v] = 1 when the loss can be reached from value v through differentiable operands
 * (from the model graph, before inference: dtypes of intermediates are not known yet). */
static unsigned char *
reach_loss(const struct sim_model *m, int loss)
{
    unsigned char *reach = calloc((size_t)m->n_vals + 1, 1);

    if (reach == NULL)
        return NULL;
    reach[loss] = 1;
    for (int k = m->n_nodes - 1; k >= 0; k--) {
        const struct sim_mnode *nd = &m->nodes[k];
        const struct sim_op *op = sim_op_find_in(nd->domain, nd->op_type);
        bool hit = false;
        if (op == NULL)
            continue;
        for (int j = 0; j < nd->n_out; j++)
            if (nd->out[j] >= 0 && reach[nd->out[j]])
                hit = true;
        if (!hit)
            continue;
        for (int j = 0; j < nd->n_in; j++)
            if (nd->in[j] >= 0 && sim_op_grad_input(op, j))
                reach[nd->in[j]] = 1;
    }
    return reach;
}

/* A float or float16 initializer (a float16 one becomes a float weight holding float16
 * values: sim_weights_mark). */
static bool
float_init(const struct sim_model *m, int v)
{
    return v >= 0 && m->vals[v].kind == SIM_MV_INIT &&
           (m->vals[v].init->dtype == SIM_DTYPE_FLOAT ||
            m->vals[v].init->dtype == SIM_DTYPE_FLOAT16);
}

/* Classifies the training weights into cls[v] (enum sim_weight_kind, 0: not a weight). */
static int
classify_training(struct sim_exe *e, const struct sim_compile_opts *o, unsigned char *cls,
                  struct sim_err *err)
{
    const struct sim_model *m = e->m;
    unsigned char *reach = reach_loss(m, e->tr->loss);

    if (reach == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    for (int v = 0; v < m->n_vals; v++) {
        if (float_init(m, v) && reach[v])
            cls[v] = SIM_WEIGHT_TRAINABLE;
    }
    free(reach);
    for (int k = 0; k < m->n_nodes; k++) {
        const struct sim_mnode *nd = &m->nodes[k];
        if (nd->domain[0] != '\0' || strcmp(nd->op_type, "BatchNormalization") != 0)
            continue;
        for (int j = 3; j < 5 && j < nd->n_in; j++)
            if (float_init(m, nd->in[j]))
                cls[nd->in[j]] = SIM_WEIGHT_BUFFER;
    }
    for (size_t i = 0; i < o->n_frozen_weights; i++) {
        const char *name = o->frozen_weights[i];
        int v = -1;
        for (int k = 0; name != NULL && k < m->n_vals && v < 0; k++)
            if (strcmp(m->vals[k].name, name) == 0)
                v = k;
        if (v < 0)
            return sim_err_set(err, IPUOF_E_NOTFOUND, "frozen weight '%s' is not a tensor of "
                               "the graph", name != NULL ? name : "(null)");
        if (!float_init(m, v))
            return sim_err_set(err, IPUOF_E_INVAL, "frozen weight '%s' is not a float "
                               "initializer", name);
        if (cls[v] != SIM_WEIGHT_BUFFER)
            cls[v] = SIM_WEIGHT_FROZEN;
    }
    return 0;
}

static bool
buffer_update_node(const struct sim_mnode *nd)
{
    return strcmp(nd->domain, "ai.graphcore") == 0 && strcmp(nd->op_type, "BufferUpdate") == 0;
}

int
sim_buffer_update_count(const struct sim_model *m)
{
    int n = 0;

    for (int k = 0; k < m->n_nodes; k++)
        n += buffer_update_node(&m->nodes[k]);
    return n;
}

int
sim_random_op_count(const struct sim_model *m)
{
    int n = 0;

    for (int k = 0; k < m->n_nodes; k++) {
        const struct sim_op *op = sim_op_find_in(m->nodes[k].domain, m->nodes[k].op_type);
        n += op != NULL && (op->flags & SIM_OPF_RANDOM) != 0;
    }
    return n;
}

/* cls[v] = SIM_WEIGHT_BUFFER for the buffer of every BufferUpdate node. */
static int
mark_buffer_updates(const struct sim_model *m, unsigned char *cls, struct sim_err *err)
{
    for (int k = 0; k < m->n_nodes; k++) {
        const struct sim_mnode *nd = &m->nodes[k];
        int v = nd->n_in > 0 ? nd->in[0] : -1;
        char label[300];
        if (!buffer_update_node(nd))
            continue;
        if (v < 0 || m->vals[v].kind != SIM_MV_INIT)
            return sim_err_set(err, IPUOF_E_INVAL, "%s: input 0%s%s%s is not an initializer; "
                               "a buffer update writes a module buffer, given as an "
                               "initializer", sim_node_label(m, k, label, sizeof(label)),
                               v >= 0 ? " '" : "", v >= 0 ? m->vals[v].name : "",
                               v >= 0 ? "'" : "");
        cls[v] = SIM_WEIGHT_BUFFER;
    }
    return 0;
}

int
sim_buffer_updates_check(const struct sim_exe *e, struct sim_err *err)
{
    const struct sim_model *m = e->m;

    for (int s = 0; s < e->n_nodes; s++) {
        const struct sim_enode *u = &e->nodes[s];
        int buf;
        if (u->op == NULL || !buffer_update_node(&m->nodes[u->mnode]))
            continue;
        if (e->n_stages > 1)
            return sim_err_set(err, IPUOF_E_UNSUPPORTED, "%s: buffers changed in forward() "
                               "are carried from step to step in one pipeline stage only "
                               "(this model has %d stages)", u->label, e->n_stages);
        buf = u->in[0];
        for (int r = 0; r < e->n_nodes; r++) {
            const struct sim_enode *n = &e->nodes[r];
            if (r == s || n->op == NULL || n->bstep < 0)
                continue;
            for (int j = 0; j < n->n_in; j++)
                if (n->in[j] == buf)
                    return sim_err_set(err, IPUOF_E_UNSUPPORTED, "%s reads buffer '%s' and "
                                       "its gradient rule would run after %s changed it "
                                       "(and could need the old value): a buffer changed "
                                       "in place cannot be read by a node on the way to "
                                       "the loss yet; read a value computed from it "
                                       "before the change instead", n->label,
                                       m->vals[buf].name, u->label);
        }
    }
    return 0;
}

int
sim_weights_mark(struct sim_exe *e, const struct sim_compile_opts *o, struct sim_err *err)
{
    const struct sim_model *m = e->m;
    unsigned char *cls = calloc((size_t)m->n_vals + 1, 1);
    int rc = 0, n = 0;

    if (cls == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    if (e->tr != NULL) {
        rc = classify_training(e, o, cls, err);
    } else if (o->updatable_weights) {
        for (int v = 0; v < m->n_vals; v++)
            if (float_init(m, v))
                cls[v] = SIM_WEIGHT_FROZEN;
    }
    if (rc == 0)
        rc = mark_buffer_updates(m, cls, err);
    if (rc != 0)
        goto out;
    for (int v = 0; v < m->n_vals; v++)
        n += cls[v] != 0;
    e->w = calloc((size_t)n + 1, sizeof(*e->w));
    if (e->w == NULL) {
        rc = sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
        goto out;
    }
    for (int v = 0; v < m->n_vals; v++) {
        struct sim_weight *w;
        if (cls[v] == 0)
            continue;
        w = &e->w[e->n_w];
        w->val = v;
        w->kind = cls[v];
        if (e->vals[v].ti.dtype == SIM_DTYPE_FLOAT16) {
            /* a float16 weight: kept as floats that always hold float16 values (rounded
             * when written and after each update: half_train.c), counted at 2 bytes per
             * element by the plan; the ops reading it take it as float */
            w->half = true;
            e->vals[v].ti.dtype = SIM_DTYPE_FLOAT;
            e->vals[v].bytes = (size_t)e->vals[v].ti.numel * sizeof(float);
        }
        w->bytes = e->vals[v].bytes;
        e->vals[v].kind = SIM_V_WEIGHT;
        e->vals[v].ti.cdata = NULL;
        e->vals[v].weight = e->n_w++;
    }
out:
    free(cls);
    return rc;
}

/* Copies initializer c into weight w's slot dst (widening a float16 one). */
static void
put_init(void *dst, const struct sim_const *c, const struct sim_weight *w)
{
    if (w->half)
        sim_half_to_float_n(c->data, dst, c->numel);
    else
        memcpy(dst, c->data, w->bytes);
}

int
sim_weights_layout(struct sim_exe *e, struct sim_err *err)
{
    size_t off = 0;

    if (e->n_w == 0)
        return 0;
    /* trainable first (the optimizer's range), then frozen, then per-replica buffers */
    for (int pass = 0; pass < 2; pass++) {
        int kind = pass == 0 ? SIM_WEIGHT_TRAINABLE : SIM_WEIGHT_FROZEN;
        for (int i = 0; i < e->n_w; i++)
            if (e->w[i].kind == kind) {
                e->w[i].off = off;
                off += align_up(e->w[i].bytes);
            }
        if (pass == 0)
            e->n_train = off / sizeof(float);
    }
    e->params_bytes = off;
    off = 0;
    for (int i = 0; i < e->n_w; i++)
        if (e->w[i].kind == SIM_WEIGHT_BUFFER) {
            e->w[i].off = off;
            off += align_up(e->w[i].bytes);
        }
    e->bufs_bytes = off;
    e->params = sim_aligned_alloc(e->params_bytes);
    if (e->bufs_bytes > 0 && e->bufs_bytes > SIZE_MAX / e->R)
        return sim_err_set(err, IPUOF_E_TOO_LARGE, "the per-replica weights are too large");
    e->bufs = sim_aligned_alloc(e->bufs_bytes * e->R);
    if (e->params == NULL || e->bufs == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory allocating the weights");
    memset(e->params, 0, e->params_bytes);
    memset(e->bufs, 0, e->bufs_bytes * e->R);
    for (int i = 0; i < e->n_w; i++) {
        struct sim_weight *w = &e->w[i];
        const struct sim_const *c = e->m->vals[w->val].init;
        w->ipu = -1;
        for (int s = 0; s < e->n_nodes && w->ipu < 0; s++)
            for (int j = 0; j < e->nodes[s].n_in; j++)
                if (e->nodes[s].in[j] == w->val)
                    w->ipu = e->nodes[s].ipu;
        if (w->ipu < 0)
            w->ipu = 0;
        if (w->bytes == 0)
            continue;
        if (w->kind != SIM_WEIGHT_BUFFER) {
            put_init((char *)e->params + w->off, c, w);
            continue;
        }
        for (unsigned r = 0; r < e->R; r++)
            put_init(e->bufs + r * e->bufs_bytes + w->off, c, w);
    }
    return 0;
}
