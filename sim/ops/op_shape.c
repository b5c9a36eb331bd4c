/*
 * op_shape.c — ops that reshape or permute data without arithmetic, for any dtype: Reshape,
 * Flatten, Squeeze, Unsqueeze, Transpose, Shape, Constant (op_select.c has Concat, Slice
 * and Gather).
 *
 * Shape operands (Reshape's shape, Slice's bounds, axes inputs) must be known at compile
 * time; the compiler folds Shape and everything computed from shapes, so PyTorch-style
 * Shape -> Gather -> Concat -> Reshape chains become constants. Backward (float data): the
 * gradient follows the same index pattern back (dx += dy in x's order).
 * Does not: Expand, Tile, Pad, ConstantOfShape, string tensors.
 */
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static size_t
bytes_of(const struct sim_tensor *t)
{
    return (size_t)t->numel * sim_dtype_size(t->dtype);
}

/* Output 0 has input 0's data in the same order (Reshape, Flatten, Squeeze, Unsqueeze). */
static int
fwd_copy_data(const struct sim_kern *k, struct sim_err *err)
{
    (void)err;
    if (bytes_of(&k->in[0]) > 0 && k->out[0].data != k->in[0].data)
        memcpy(k->out[0].data, k->in[0].data, bytes_of(&k->in[0]));
    return 0;
}

/* ---- Reshape, Flatten, Squeeze, Unsqueeze --------------------------------------------- */

static int
infer_reshape(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    int64_t spec[SIM_MAX_RANK], allowzero = 0, known = 1;
    int n, infer_at = -1, rc;
    struct sim_shape o;
    char s1[128], s2[128];

    if (c->version < 5) {
        const int64_t *v;
        rc = sim_ia_ints(c, "shape", &v, &n);
        if (rc == 0 && (n < 0 || n > SIM_MAX_RANK))
            return sim_infer_fail(c, IPUOF_E_INVAL, "attribute 'shape' is required (at most "
                                  "%d dims)", SIM_MAX_RANK);
        for (int i = 0; rc == 0 && i < n; i++)
            spec[i] = v[i];
    } else if (c->n_in < 2 || c->in[1] == NULL) {
        return sim_infer_fail(c, IPUOF_E_INVAL, "input 1 (shape) is required");
    } else {
        rc = sim_in_const_ints(c, 1, "shape", spec, SIM_MAX_RANK, &n);
    }
    if (rc == 0)
        rc = sim_ia_int(c, "allowzero", 0, &allowzero);
    if (rc != 0)
        return rc;
    o.rank = n;
    for (int i = 0; i < n; i++) {
        int64_t d = spec[i];
        if (d == 0 && !allowzero) {
            if (i >= x->shape.rank)
                return sim_infer_fail(c, IPUOF_E_SHAPE, "shape[%d] = 0 copies a dim the input "
                                      "%s does not have", i,
                                      sim_shape_fmt(&x->shape, s1, sizeof(s1)));
            d = x->shape.d[i];
        }
        if (d == -1) {
            if (infer_at >= 0)
                return sim_infer_fail(c, IPUOF_E_SHAPE, "shape has more than one -1");
            infer_at = i;
            d = 1;
        } else if (d < 0) {
            return sim_infer_fail(c, IPUOF_E_SHAPE, "shape[%d] = %lld is invalid", i,
                                  (long long)d);
        }
        o.d[i] = d;
        if (!sim_mul_ok((uint64_t)known, (uint64_t)d, (uint64_t *)&known) ||
            known > SIM_MAX_ELEMS)
            return sim_infer_fail(c, IPUOF_E_TOO_LARGE, "shape is too large");
    }
    if (infer_at >= 0) {
        if (known == 0 || x->numel % known != 0)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "cannot reshape %s (%lld elements) with "
                                  "a -1 in %s", sim_shape_fmt(&x->shape, s1, sizeof(s1)),
                                  (long long)x->numel, sim_shape_fmt(&o, s2, sizeof(s2)));
        o.d[infer_at] = x->numel / known;
        known = x->numel;
    }
    if (known != x->numel)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "cannot reshape %s (%lld elements) to %s "
                              "(%lld elements)", sim_shape_fmt(&x->shape, s1, sizeof(s1)),
                              (long long)x->numel, sim_shape_fmt(&o, s2, sizeof(s2)),
                              (long long)known);
    return sim_set_out(c, 0, x->dtype, &o);
}

static int
infer_flatten(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    int64_t axis;
    struct sim_shape o;
    int rc = sim_ia_int(c, "axis", 1, &axis);

    if (rc != 0)
        return rc;
    if (axis < 0)
        axis += x->shape.rank;
    if (axis < 0 || axis > x->shape.rank)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "axis is out of range for rank %d",
                              x->shape.rank);
    o.rank = 2;
    o.d[0] = sim_shape_span(&x->shape, 0, (int)axis);
    o.d[1] = sim_shape_span(&x->shape, (int)axis, x->shape.rank);
    return sim_set_out(c, 0, x->dtype, &o);
}

/* Reads axes from the attribute (opset < 13) or the optional input 1; *n = -1 if none. */
static int
axes_operand(struct sim_infer *c, int64_t *axes, int *n)
{
    if (c->version >= 13) {
        *n = -1;
        if (!sim_has_in(c, 1))
            return 0;
        return sim_in_const_ints(c, 1, "axes", axes, SIM_MAX_RANK, n);
    } else {
        const int64_t *v;
        int rc = sim_ia_ints(c, "axes", &v, n);
        if (rc != 0)
            return rc;
        if (*n > SIM_MAX_RANK)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "too many axes (%d)", *n);
        for (int i = 0; i < *n; i++)
            axes[i] = v[i];
        return 0;
    }
}

static int
infer_squeeze(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    int64_t axes[SIM_MAX_RANK];
    bool drop[SIM_MAX_RANK] = { false };
    struct sim_shape o;
    int n, rc = axes_operand(c, axes, &n);

    if (rc != 0)
        return rc;
    for (int i = 0; i < n; i++) {
        int ax;
        if (!sim_axis(axes[i], x->shape.rank, &ax))
            return sim_infer_fail(c, IPUOF_E_SHAPE, "axis %lld is out of range for rank %d",
                                  (long long)axes[i], x->shape.rank);
        if (x->shape.d[ax] != 1)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "cannot squeeze dim %d of size %lld", ax,
                                  (long long)x->shape.d[ax]);
        drop[ax] = true;
    }
    o.rank = 0;
    for (int i = 0; i < x->shape.rank; i++)
        if (!(n < 0 ? x->shape.d[i] == 1 : drop[i]))
            o.d[o.rank++] = x->shape.d[i];
    return sim_set_out(c, 0, x->dtype, &o);
}

static int
infer_unsqueeze(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    int64_t axes[SIM_MAX_RANK];
    bool ins[SIM_MAX_RANK] = { false };
    struct sim_shape o;
    int n, r, rc = axes_operand(c, axes, &n);

    if (rc != 0)
        return rc;
    if (n < 0)
        return sim_infer_fail(c, IPUOF_E_INVAL, "axes are required");
    r = x->shape.rank + n;
    if (r > SIM_MAX_RANK)
        return sim_infer_fail(c, IPUOF_E_TOO_LARGE, "the result would have rank %d, over the "
                              "limit of %d", r, SIM_MAX_RANK);
    for (int i = 0; i < n; i++) {
        int ax;
        if (!sim_axis(axes[i], r, &ax) || ins[ax])
            return sim_infer_fail(c, IPUOF_E_SHAPE, "axis %lld is out of range for rank %d or "
                                  "repeated", (long long)axes[i], r);
        ins[ax] = true;
    }
    o.rank = r;
    for (int i = 0, j = 0; i < r; i++)
        o.d[i] = ins[i] ? 1 : x->shape.d[j++];
    return sim_set_out(c, 0, x->dtype, &o);
}

/* ---- Transpose ------------------------------------------------------------------------ */

struct transpose_params {
    int rank;
    int64_t odims[SIM_MAX_RANK];    /* output dims */
    int64_t istr[SIM_MAX_RANK];     /* input stride (elements) of each output dim */
};

static int
infer_transpose(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    struct transpose_params *p;
    const int64_t *perm;
    int np, r = x->shape.rank, rc = sim_ia_ints(c, "perm", &perm, &np);
    bool used[SIM_MAX_RANK] = { false };
    int64_t stride[SIM_MAX_RANK], acc = 1;
    struct sim_shape o;

    if (rc != 0)
        return rc;
    if (np >= 0 && np != r)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "perm has %d entries for rank %d", np, r);
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    for (int i = r - 1; i >= 0; i--) {
        stride[i] = acc;
        acc *= x->shape.d[i];
    }
    p->rank = r;
    o.rank = r;
    for (int i = 0; i < r; i++) {
        int64_t src = np >= 0 ? perm[i] : r - 1 - i;
        if (src < 0 || src >= r || used[src])
            return sim_infer_fail(c, IPUOF_E_SHAPE, "perm is not a permutation of 0..%d",
                                  r - 1);
        used[src] = true;
        o.d[i] = x->shape.d[src];
        p->odims[i] = o.d[i];
        p->istr[i] = stride[src];
    }
    return sim_set_out(c, 0, x->dtype, &o);
}

/* x: any shape; y: x with dims permuted */
static int
fwd_transpose(const struct sim_kern *k, struct sim_err *err)
{
    const struct transpose_params *p = k->params;

    (void)err;
    sim_strided_copy(k->out[0].data, k->in[0].data, sim_dtype_size(k->in[0].dtype), p->rank,
                     p->odims, p->istr, 0);
    return 0;
}

/* ---- Shape and Constant --------------------------------------------------------------- */

struct shape_params {
    int start, end;
};

static int
infer_shape(struct sim_infer *c)
{
    struct shape_params *p;
    int64_t start, end, r = c->in[0]->shape.rank;
    struct sim_shape o;
    int rc = sim_ia_int(c, "start", 0, &start);

    if (rc == 0)
        rc = sim_ia_int(c, "end", r, &end);
    if (rc != 0)
        return rc;
    if (start < 0)
        start += r;
    if (end < 0)
        end += r;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->start = (int)start;
    p->end = (int)(end > start ? end : start);
    o.rank = 1;
    o.d[0] = p->end - p->start;
    return sim_set_out(c, 0, SIM_DTYPE_INT64, &o);
}

/* x: any (only its shape is read); y: (end - start) int64 */
static int
fwd_shape(const struct sim_kern *k, struct sim_err *err)
{
    const struct shape_params *p = k->params;
    int64_t *y = k->out[0].data;

    (void)err;
    for (int i = p->start; i < p->end; i++)
        y[i - p->start] = k->in[0].shape.d[i];
    return 0;
}

struct constant_params {
    const void *data;               /* borrowed from the model's attribute, or NULL */
    size_t bytes;
    float f;                        /* value_float / value_int as the only element */
    int64_t i;
};

static int
infer_constant(struct sim_infer *c)
{
    struct constant_params *p = sim_params(c, sizeof(*p));
    const struct sim_attr *a;
    struct sim_shape o = { 0 };

    if (p == NULL)
        return IPUOF_E_NOMEM;
    if (c->mn->n_attr != 1)
        return sim_infer_fail(c, IPUOF_E_INVAL, "needs exactly one value attribute");
    a = &c->mn->attr[0];
    if (strcmp(a->name, "value") == 0 && a->type == SIM_ATTR_TENSOR) {
        p->data = a->t->data;
        p->bytes = a->t->bytes;
        return sim_set_out(c, 0, a->t->dtype, &a->t->shape);
    }
    if (strcmp(a->name, "value_float") == 0 && a->type == SIM_ATTR_FLOAT) {
        p->f = a->f;
        p->data = &p->f;
        p->bytes = sizeof(float);
        return sim_set_out(c, 0, SIM_DTYPE_FLOAT, &o);
    }
    if (strcmp(a->name, "value_int") == 0 && a->type == SIM_ATTR_INT) {
        p->i = a->i;
        p->data = &p->i;
        p->bytes = sizeof(int64_t);
        return sim_set_out(c, 0, SIM_DTYPE_INT64, &o);
    }
    if (strcmp(a->name, "value_floats") == 0 && a->type == SIM_ATTR_FLOATS) {
        p->data = a->floats;
        p->bytes = a->n * sizeof(float);
        o.rank = 1;
        o.d[0] = (int64_t)a->n;
        return sim_set_out(c, 0, SIM_DTYPE_FLOAT, &o);
    }
    if (strcmp(a->name, "value_ints") == 0 && a->type == SIM_ATTR_INTS) {
        p->data = a->ints;
        p->bytes = a->n * sizeof(int64_t);
        o.rank = 1;
        o.d[0] = (int64_t)a->n;
        return sim_set_out(c, 0, SIM_DTYPE_INT64, &o);
    }
    return sim_infer_unsupported(c, "Constant with attribute '%s' (value, value_float, "
                                 "value_floats, value_int and value_ints are supported)",
                                 a->name);
}

/* y: the attribute's value */
static int
fwd_constant(const struct sim_kern *k, struct sim_err *err)
{
    const struct constant_params *p = k->params;

    (void)err;
    if (p->data != NULL && p->bytes > 0)
        memcpy(k->out[0].data, p->data, p->bytes);
    return 0;
}

/* ---- backward ------------------------------------------------------------------------- */

/* Reshape, Flatten, Squeeze, Unsqueeze: the data keeps its order, dx += dy */
static int
bwd_copy_data(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
              struct sim_err *err)
{
    const float *g = dout[0].data;
    float *dx = din[0].data;

    (void)err;
    if (g == NULL || dx == NULL)
        return 0;
    for (int64_t i = 0; i < k->in[0].numel; i++)
        dx[i] += g[i];
    return 0;
}

/* dx[permuted index] += dy, walking dy in order as the forward walks y */
static int
bwd_transpose(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
              struct sim_err *err)
{
    const struct transpose_params *p = k->params;

    (void)err;
    if (dout[0].data == NULL || din[0].data == NULL)
        return 0;
    sim_strided_add_f32(din[0].data, dout[0].data, p->rank, p->odims, p->istr, 0);
    return 0;
}

#define CODE_COPY 2048u

const struct sim_op sim_ops_shape[] = {
    { "Reshape", 1, 1, 2, 1, 1, 1u << 1, SIM_OPF_VIEW, CODE_COPY, infer_reshape, fwd_copy_data,
      bwd_copy_data, 1u, NULL, SIM_BWD_NONE },
    { "Flatten", 1, 1, 1, 1, 1, 0, SIM_OPF_VIEW, CODE_COPY, infer_flatten, fwd_copy_data,
      bwd_copy_data, 1u, NULL, SIM_BWD_NONE },
    { "Squeeze", 1, 1, 2, 1, 1, 1u << 1, SIM_OPF_VIEW, CODE_COPY, infer_squeeze, fwd_copy_data,
      bwd_copy_data, 1u, NULL, SIM_BWD_NONE },
    { "Unsqueeze", 1, 1, 2, 1, 1, 1u << 1, SIM_OPF_VIEW, CODE_COPY, infer_unsqueeze, fwd_copy_data,
      bwd_copy_data, 1u, NULL, SIM_BWD_NONE },
    { "Transpose", 1, 1, 1, 1, 1, 0, SIM_OPF_VIEW, 4096u, infer_transpose, fwd_transpose,
      bwd_transpose, 1u, NULL, SIM_BWD_NONE },
    { "Shape", 1, 1, 1, 1, 1, 0, SIM_OPF_SHAPE_ONLY, 512u, infer_shape, fwd_shape, NULL, 0u,
      NULL },
    { "Constant", 1, 0, 0, 1, 1, 0, 0, 512u, infer_constant, fwd_constant, NULL, 0u, NULL },
};

const int sim_ops_shape_count = (int)(sizeof(sim_ops_shape) / sizeof(sim_ops_shape[0]));
