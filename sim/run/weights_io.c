/*
 * weights_io.c — an executable's weights seen from outside: list them, read and write them
 * by name (the client's readWeights / writeWeights, PopTorch's copyWeightsToHost /
 * copyWeightsToDevice), read the last applied gradient, copy the weights of one executable
 * into another (a training executable into an inference one, without serialising), and
 * save the model as ONNX bytes whose initializers hold the current weights.
 *
 * Every call that touches weight data takes the executable's busy flag, so it refuses
 * (IPUOF_E_BUSY) rather than race with a run.
 * Does not: decide which initializers are weights (weights.c) or run anything.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exe.h"
#include "onnx_build.h"

static int
lock(struct sim_exe *e, struct sim_err *err)
{
    int expected = 0;

    if (!atomic_compare_exchange_strong(&e->busy, &expected, 1))
        return sim_err_set(err, IPUOF_E_BUSY, "the executable is running");
    return 0;
}

static void
unlock(struct sim_exe *e)
{
    atomic_store(&e->busy, 0);
}

size_t
sim_exe_weight_count(const struct sim_exe *e)
{
    return (size_t)e->n_w;
}

int
sim_exe_weight_info(const struct sim_exe *e, size_t i, struct sim_weight_info *info)
{
    const struct sim_val *v;

    if (i >= (size_t)e->n_w)
        return i <= (size_t)LONG_MAX ? sim_optim_state_info(e, (long)i, info) : IPUOF_E_INVAL;
    v = &e->vals[e->w[i].val];
    memset(info, 0, sizeof(*info));
    info->name = e->m->vals[e->w[i].val].name;
    info->kind = e->w[i].kind;
    info->dtype = v->ti.dtype;
    info->rank = v->ti.shape.rank;
    memcpy(info->dims, v->ti.shape.d, sizeof(info->dims));
    info->bytes = e->w[i].bytes;
    return 0;
}

long
sim_exe_weight_index(const struct sim_exe *e, const char *name)
{
    for (int i = 0; name != NULL && i < e->n_w; i++)
        if (strcmp(e->m->vals[e->w[i].val].name, name) == 0)
            return i;
    return sim_optim_state_index(e, name);   /* optimizer state, or -1 */
}

/* Replica r's copy of weight i. */
static void *
weight_data(const struct sim_exe *e, int i, unsigned r)
{
    return sim_val_ptr(e, e->w[i].val, r, r * e->S);
}

/* What the host sees of weight i: a buffer's shown copy (sim_exe_show_buffer) when it has
 * one, else replica 0's copy. */
static const void *
host_data(const struct sim_exe *e, int i)
{
    if (e->w[i].shown)
        return e->shown + e->w[i].off;
    return weight_data(e, i, 0);
}

/* The index of weight `name` into *i, checking that it holds `bytes` bytes. */
static int
find(const struct sim_exe *e, const char *name, size_t bytes, int *i, struct sim_err *err)
{
    long idx = sim_exe_weight_index(e, name);

    if (idx < 0 && e->tr != NULL && name != NULL && strncmp(name, "optimizer:", 10) == 0)
        return sim_optim_state_missing(e, name, err);
    if (idx < 0 || idx >= e->n_w)
        return sim_err_set(err, IPUOF_E_NOTFOUND, "the executable has no weight called "
                           "'%s'%s", name != NULL ? name : "(null)",
                           e->n_w == 0 ? " (it owns no weights: compile with a loss or with "
                                         "updatable_weights)" : "");
    if (e->w[idx].bytes != bytes)
        return sim_err_set(err, IPUOF_E_SHAPE, "weight '%s' is %zu bytes, not %zu", name,
                           e->w[idx].bytes, bytes);
    *i = (int)idx;
    return 0;
}

int
sim_exe_read_weight(struct sim_exe *e, const char *name, void *dst, size_t bytes,
                    struct sim_err *err)
{
    long idx = sim_exe_weight_index(e, name);
    int i, rc;

    if (idx >= e->n_w)     /* an optimizer state tensor (a weight's name comes first) */
        return sim_optim_state_io(e, idx, dst, bytes, false, err);
    rc = find(e, name, bytes, &i, err);

    if (rc == 0)
        rc = lock(e, err);
    if (rc != 0)
        return rc;
    if (rc != 0)
        return rc;
    if (bytes > 0)
        memcpy(dst, host_data(e, i), bytes);
    unlock(e);
    return 0;
}

/* Writes weight i from src, into every replica's copy of a buffer (which the host then
 * sees again: no shown copy). Caller holds e->busy. */
static void
store(struct sim_exe *e, int i, const void *src)
{
    unsigned copies = e->w[i].kind == SIM_WEIGHT_BUFFER ? e->R : 1;

    for (unsigned r = 0; r < copies && e->w[i].bytes > 0; r++)
        memcpy(weight_data(e, i, r), src, e->w[i].bytes);
    e->w[i].shown = false;
    e->w[i].written = ++e->writes;
}

uint64_t
sim_exe_weight_written(const struct sim_exe *e, size_t i)
{
    if (i < (size_t)e->n_w)
        return e->w[i].written;
    return i <= (size_t)LONG_MAX ? sim_optim_state_written(e, (long)i) : 0;
}

int
sim_exe_show_buffer(struct sim_exe *e, const char *name, const void *src, size_t bytes,
                    struct sim_err *err)
{
    int i, rc = find(e, name, bytes, &i, err);

    if (rc != 0)
        return rc;
    if (e->w[i].kind != SIM_WEIGHT_BUFFER)
        return sim_err_set(err, IPUOF_E_INVAL, "weight '%s' is not a buffer kept per "
                           "replica; only a buffer's shown copy can differ from the "
                           "executable's own", name);
    rc = lock(e, err);
    if (rc != 0)
        return rc;
    if (e->shown == NULL)
        e->shown = calloc(1, e->bufs_bytes > 0 ? e->bufs_bytes : 1);
    if (e->shown == NULL) {
        unlock(e);
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory keeping buffer '%s'", name);
    }
    if (bytes > 0)
        memcpy(e->shown + e->w[i].off, src, bytes);
    e->w[i].shown = true;
    unlock(e);
    return 0;
}

void
sim_weights_unshow(struct sim_exe *e)
{
    for (int i = 0; e->shown != NULL && i < e->n_w; i++)
        e->w[i].shown = false;
}

int
sim_exe_write_weight(struct sim_exe *e, const char *name, const void *src, size_t bytes,
                     struct sim_err *err)
{
    long idx = sim_exe_weight_index(e, name);
    int i, rc;

    if (idx >= e->n_w)     /* an optimizer state tensor (a weight's name comes first) */
        return sim_optim_state_io(e, idx, (void *)src, bytes, true, err);
    rc = find(e, name, bytes, &i, err);

    if (rc == 0)
        rc = lock(e, err);
    if (rc != 0)
        return rc;
    store(e, i, src);
    sim_half_round_weight(e, i);
    unlock(e);
    return 0;
}

int
sim_exe_read_gradient(struct sim_exe *e, const char *name, void *dst, size_t bytes,
                      struct sim_err *err)
{
    int i, rc = find(e, name, bytes, &i, err);

    if (rc != 0)
        return rc;
    if (e->tr == NULL || e->w[i].kind != SIM_WEIGHT_TRAINABLE)
        return sim_err_set(err, IPUOF_E_INVAL, "weight '%s' is not trained, so it has no "
                           "gradient", name);
    rc = lock(e, err);
    if (rc != 0)
        return rc;
    if (bytes > 0)
        memcpy(dst, (char *)e->tr->grads + e->w[i].off, bytes);
    unlock(e);
    return 0;
}

int
sim_exe_copy_weights(struct sim_exe *dst, struct sim_exe *src, struct sim_err *err)
{
    int rc, copied = 0;

    if (dst == src)
        return sim_err_set(err, IPUOF_E_INVAL, "cannot copy an executable's weights onto "
                           "itself");
    if (dst->n_w == 0)
        return sim_err_set(err, IPUOF_E_INVAL, "the destination owns no weights: compile it "
                           "with updatable_weights (or use sim_compile_inference_from)");
    for (int i = 0; i < src->n_w; i++) {
        const struct sim_val *sv = &src->vals[src->w[i].val];
        long j = sim_exe_weight_index(dst, src->m->vals[src->w[i].val].name);
        const struct sim_val *dv;
        char a[128], b[128];
        if (j < 0 || j >= dst->n_w)     /* optimizer state is not copied */
            continue;
        dv = &dst->vals[dst->w[j].val];
        if (sv->ti.dtype != dv->ti.dtype)
            return sim_err_set(err, IPUOF_E_DTYPE, "weight '%s' is %s in the source and %s in "
                               "the destination", src->m->vals[src->w[i].val].name,
                               sim_dtype_name(sv->ti.dtype), sim_dtype_name(dv->ti.dtype));
        if (!sim_shape_eq(&sv->ti.shape, &dv->ti.shape))
            return sim_err_set(err, IPUOF_E_SHAPE, "weight '%s' is %s in the source and %s in "
                               "the destination", src->m->vals[src->w[i].val].name,
                               sim_shape_fmt(&sv->ti.shape, a, sizeof(a)),
                               sim_shape_fmt(&dv->ti.shape, b, sizeof(b)));
        copied++;
    }
    if (copied == 0)
        return sim_err_set(err, IPUOF_E_INVAL, "the two executables have no weight name in "
                           "common");
    rc = lock(dst, err);
    if (rc != 0)
        return rc;
    rc = lock(src, err);
    if (rc != 0) {
        unlock(dst);
        return rc;
    }
    for (int i = 0; i < src->n_w; i++) {
        long j = sim_exe_weight_index(dst, src->m->vals[src->w[i].val].name);
        if (j >= 0 && j < dst->n_w)
            store(dst, (int)j, host_data(src, i));
    }
    unlock(src);
    unlock(dst);
    return 0;
}

int
sim_compile_inference_from(const struct sim_model *m, const struct sim_compile_opts *o,
                           struct sim_exe *src, struct sim_exe **out, struct sim_err *err)
{
    struct sim_compile_opts opts;
    int rc;

    *out = NULL;
    if (o != NULL)
        opts = *o;
    else
        sim_compile_opts_init(&opts);
    if (opts.loss != NULL)
        return sim_err_set(err, IPUOF_E_INVAL, "sim_compile_inference_from compiles for "
                           "inference: the options must not name a loss");
    opts.updatable_weights = 1;
    opts.eval_mode = 1; /* PopTorch's inferenceModel runs the module as eval() does */
    rc = sim_compile(m, &opts, out, err);
    if (rc == 0)
        rc = sim_exe_copy_weights(*out, src, err);
    if (rc != 0) {
        sim_exe_free(*out);
        *out = NULL;
    }
    return rc;
}

/* ---- saving as ONNX ------------------------------------------------------------------- */

static void
add_attr(struct sim_ob *b, const struct sim_attr *a)
{
    switch (a->type) {
    case SIM_ATTR_FLOAT: sim_ob_attr_float(b, a->name, a->f); break;
    case SIM_ATTR_INT: sim_ob_attr_int(b, a->name, a->i); break;
    case SIM_ATTR_STRING: sim_ob_attr_str(b, a->name, a->s); break;
    case SIM_ATTR_FLOATS: sim_ob_attr_floats(b, a->name, a->floats, a->n); break;
    case SIM_ATTR_INTS: sim_ob_attr_ints(b, a->name, a->ints, a->n); break;
    case SIM_ATTR_TENSOR:
        sim_ob_attr_tensor(b, a->name, a->t->dtype, a->t->shape.rank, a->t->shape.d,
                           a->t->data);
        break;
    default:
        break;      /* graphs and string lists are not kept by the loader */
    }
}

/* Operand names of node k: "" for an omitted one. names has room for n entries. */
static void
operand_names(const struct sim_model *m, const int *idx, int n, const char **names)
{
    for (int i = 0; i < n; i++)
        names[i] = idx[i] >= 0 ? m->vals[idx[i]].name : "";
}

static int
build_model(struct sim_exe *e, struct sim_ob *b)
{
    const struct sim_model *m = e->m;
    int rc = 0;

    sim_ob_ir_version(b, m->ir_version > 0 ? m->ir_version : 8);
    for (int i = 0; i < m->n_in; i++) {
        const struct sim_mval *v = &m->vals[m->inputs[i]];
        sim_ob_input(b, v->name, v->dtype, v->rank, v->dims);
    }
    for (int v = 0; v < m->n_vals; v++) {
        const struct sim_mval *mv = &m->vals[v];
        const void *data;
        if (mv->kind != SIM_MV_INIT)
            continue;
        data = e->vals[v].weight >= 0 ? host_data(e, e->vals[v].weight) : mv->init->data;
        sim_ob_initializer(b, mv->name, mv->init->dtype, mv->init->shape.rank,
                           mv->init->shape.d, data);
    }
    for (int k = 0; k < m->n_nodes && rc == 0; k++) {
        const struct sim_mnode *nd = &m->nodes[k];
        const char **names = calloc((size_t)nd->n_in + (size_t)nd->n_out + 1, sizeof(char *));
        if (names == NULL)
            return IPUOF_E_NOMEM;
        operand_names(m, nd->in, nd->n_in, names);
        operand_names(m, nd->out, nd->n_out, names + nd->n_in);
        rc = sim_ob_node_v(b, nd->op_type, nd->name, names, (size_t)nd->n_in,
                           names + nd->n_in, (size_t)nd->n_out);
        free(names);
        if (rc == 0 && nd->domain[0] != '\0')
            rc = sim_ob_node_domain(b, nd->domain);
        for (int j = 0; rc == 0 && j < nd->n_attr; j++)
            add_attr(b, &nd->attr[j]);
    }
    for (int i = 0; i < m->n_out; i++) {
        int v = m->outputs[i];
        int dtype = m->vals[v].dtype != 0 ? m->vals[v].dtype : e->vals[v].ti.dtype;
        sim_ob_output_rank(b, m->vals[v].name, dtype, e->vals[v].ti.shape.rank);
    }
    return rc;
}

int
sim_exe_save_onnx(struct sim_exe *e, void **bytes, size_t *len, struct sim_err *err)
{
    struct sim_ob *b = sim_ob_new(e->m->opset);
    int rc;

    *bytes = NULL;
    *len = 0;
    if (b == NULL)
        return sim_err_set(err, IPUOF_E_NOMEM, "out of memory");
    rc = lock(e, err);
    if (rc != 0) {
        sim_ob_free(b);
        return rc;
    }
    rc = build_model(e, b);
    unlock(e);
    if (rc == 0)
        rc = sim_ob_serialize(b, bytes, len);
    sim_ob_free(b);
    if (rc != 0)
        return sim_err_set(err, rc, "the model could not be serialised (%s)",
                           rc == IPUOF_E_NOMEM ? "out of memory" : "invalid model data");
    return 0;
}
