/*
 * op_onehot.c — ONNX OneHot (opset 9 and 11; what torch.nn.functional.one_hot exports):
 * inputs indices (any numeric dtype; a float index is truncated toward zero), depth (one
 * numeric value, known at compile time since it decides the output's shape) and values
 * ([off, on], any dtype); attribute axis (default -1: a new last dimension). The output
 * has the indices' shape with a dimension of size depth inserted at axis; an element is on
 * where its position along axis equals the index (a negative index counts from depth),
 * off elsewhere, and an index outside [-depth, depth) gives a row of off values (ONNX's
 * rule; PyTorch raises for such an index before it exports anything).
 *
 * Backward: indices and depth carry no gradient; values' gradient is the sum of dy over
 * the off positions and the sum over the on positions. A float16 OneHot runs this float
 * kernel on widened copies (half_exec.c).
 * Does not: a depth computed at run time (refused at compile time, naming the input), nor
 * PyTorch's depth -1 (one_hot without num_classes: the exporter writes -1 as it is given;
 * refused, asking for num_classes).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

struct onehot_params {
    int64_t outer;                  /* product of the indices' dims before axis */
    int64_t inner;                  /* product of the indices' dims from axis on */
    int64_t depth;
    size_t es;                      /* bytes of one values element */
};

/* Reads depth (input 1) as a positive integer into *depth. */
static int
onehot_depth(struct sim_infer *c, int64_t *depth)
{
    const struct sim_tinfo *d = c->in[1];
    double v;
    int rc = sim_in_dtype(c, 1, sim_dt_numeric);

    if (rc != 0)
        return rc;
    if (d->numel != 1)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "depth must hold one value, not %lld",
                              (long long)d->numel);
    if (d->cdata == NULL)
        return sim_infer_fail(c, IPUOF_E_UNSUPPORTED, "input 1 (depth) decides the output's "
                              "shape, so it must be known at compile time (an initializer, a "
                              "Constant, computed from shapes, or a frozen graph input); "
                              "here it is computed at run time");
    v = sim_get_f64(d->dtype, d->cdata, 0);
    if (v == -1.0)  /* PyTorch's exporter writes num_classes as it is given */
        return sim_infer_fail(c, IPUOF_E_INVAL, "depth is -1: torch.nn.functional.one_hot "
                              "without num_classes exports that, which ONNX cannot run (the "
                              "class count would come from the data); give num_classes");
    if (!(v >= 1.0 && v <= (double)SIM_MAX_ELEMS))
        return sim_infer_fail(c, IPUOF_E_INVAL, "depth is %g; it must be at least 1 and at "
                              "most %lld", v, (long long)SIM_MAX_ELEMS);
    *depth = (int64_t)v;  /* ONNX: a float depth is truncated */
    return 0;
}

/* Validates indices, depth, values and axis; y: indices' shape with depth inserted at axis. */
static int
infer_onehot(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0], *v = c->in[2];
    struct onehot_params *p;
    struct sim_shape o = { 0 };
    int64_t axis = -1, depth = 0, outer = 1, inner = 1;
    int r = x->shape.rank, rc = sim_in_dtype(c, 0, sim_dt_numeric);

    if (rc == 0)
        rc = sim_in_dtype(c, 2, sim_dt_any);
    if (rc == 0)
        rc = onehot_depth(c, &depth);
    if (rc == 0)
        rc = sim_ia_int(c, "axis", -1, &axis);
    if (rc != 0)
        return rc;
    if (v->shape.rank != 1 || v->numel != 2)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "values must be a rank-1 tensor of 2 "
                              "elements [off, on], not rank %d with %lld",
                              v->shape.rank, (long long)v->numel);
    if (r + 1 > SIM_MAX_RANK)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "indices of rank %d give an output of rank "
                              "%d, more than %d", r, r + 1, SIM_MAX_RANK);
    if (axis < -(r + 1) || axis > r)
        return sim_infer_fail(c, IPUOF_E_INVAL, "axis %lld is out of range for an output of "
                              "rank %d (use -%d .. %d)", (long long)axis, r + 1, r + 1, r);
    if (axis < 0)
        axis += r + 1;
    o.rank = r + 1;
    for (int i = 0, j = 0; i < r + 1; i++) {
        if (i == axis) {
            o.d[i] = depth;
            continue;
        }
        o.d[i] = x->shape.d[j];
        if (i < axis)
            outer *= x->shape.d[j];
        else
            inner *= x->shape.d[j];
        j++;
    }
    rc = sim_set_out(c, 0, v->dtype, &o);
    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->outer = outer;
    p->inner = inner;
    p->depth = depth;
    p->es = sim_dtype_size(v->dtype);
    return 0;
}

/* The position along axis that index element i turns on, or -1 for none. */
static int64_t
onehot_pos(const struct sim_tensor *x, int64_t i, int64_t depth)
{
    int64_t ix = sim_get_i64(x->dtype, x->data, i);

    if (ix < 0)
        ix += depth;
    return ix >= 0 && ix < depth ? ix : -1;
}

/* indices, depth, values [off, on]: y = off everywhere, on at each index's position */
static int
fwd_onehot(const struct sim_kern *k, struct sim_err *err)
{
    const struct onehot_params *p = k->params;
    const char *val = k->in[2].data;
    char *y = k->out[0].data;
    int64_t n = k->out[0].numel, es = (int64_t)p->es;

    (void)err;
    if (es == 4) {
        uint32_t off;
        memcpy(&off, val, 4);
        for (int64_t i = 0; i < n; i++)
            memcpy(y + i * 4, &off, 4);
    } else {
        for (int64_t i = 0; i < n; i++)
            memcpy(y + i * es, val, (size_t)es);
    }
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t i = 0; i < p->inner; i++) {
            int64_t pos = onehot_pos(&k->in[0], o * p->inner + i, p->depth);
            if (pos >= 0)
                memcpy(y + ((o * p->depth + pos) * p->inner + i) * es, val + es, (size_t)es);
        }
    return 0;
}

/* dvalues[0] += sum of dy where off, dvalues[1] += sum of dy where on (float values) */
static int
bwd_onehot(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
           struct sim_err *err)
{
    const struct onehot_params *p = k->params;
    const float *g = dout[0].data;
    float *dv = din[2].data;
    double all = 0.0, on = 0.0;

    (void)err;
    if (g == NULL || dv == NULL)
        return 0;
    for (int64_t i = 0; i < dout[0].numel; i++)
        all += g[i];
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t i = 0; i < p->inner; i++) {
            int64_t pos = onehot_pos(&k->in[0], o * p->inner + i, p->depth);
            if (pos >= 0)
                on += g[(o * p->depth + pos) * p->inner + i];
        }
    dv[0] += (float)(all - on);
    dv[1] += (float)on;
    return 0;
}

const struct sim_op sim_ops_onehot[] = {
    { "OneHot", 9, 3, 3, 1, 1, 1u << 1, 0, 2048u, infer_onehot, fwd_onehot, bwd_onehot,
      1u << 2, NULL, SIM_BWD_ALL },
};

const int sim_ops_onehot_count = (int)(sizeof(sim_ops_onehot) / sizeof(sim_ops_onehot[0]));
