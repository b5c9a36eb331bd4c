/*
 * op_gen.c — ops that generate or replicate data: ConstantOfShape (shape known at compile
 * time, the value attribute of any supported dtype), Expand (numpy broadcasting of the
 * input to a compile-time shape, forward and backward) and Range (start, limit and delta
 * known at compile time, float, int32 or int64).
 *
 * Expand's backward sums dy over the broadcast dims into dx. ConstantOfShape and Range have
 * no differentiable input; with compile-time operands they fold into constants (the class
 * token and attention masks of PyTorch's vision transformers).
 * Does not: Tile, Range over run-time values.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bcast.h"
#include "ops.h"

/* ---- ConstantOfShape ------------------------------------------------------------------ */

struct cos_params {
    size_t es;
    unsigned char value[8];         /* one element of the output dtype */
};

static int
infer_cos(struct sim_infer *c)
{
    const struct sim_attr *a = sim_attr_find(c->mn, "value");
    struct cos_params *p;
    int64_t dims[SIM_MAX_RANK];
    struct sim_shape o = { 0 };
    int n, dtype = SIM_DTYPE_FLOAT, rc;

    rc = sim_in_const_ints(c, 0, "shape", dims, SIM_MAX_RANK, &n);
    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    if (a != NULL) {
        if (a->type != SIM_ATTR_TENSOR || a->t->numel != 1)
            return sim_infer_fail(c, IPUOF_E_INVAL, "attribute 'value' must be a tensor of "
                                  "one element");
        dtype = a->t->dtype;
        if (!sim_dtype_ok(dtype))
            return sim_infer_fail(c, IPUOF_E_DTYPE, "value of dtype %s is not supported",
                                  sim_onnx_dtype_name(dtype));
        memcpy(p->value, a->t->data, sim_dtype_size(dtype));
    }
    p->es = sim_dtype_size(dtype);
    o.rank = n;
    for (int i = 0; i < n; i++) {
        if (dims[i] < 0)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "shape value %lld is negative",
                                  (long long)dims[i]);
        o.d[i] = dims[i];
    }
    return sim_set_out(c, 0, dtype, &o);
}

/* y: the shape input's dims, every element the value */
static int
fwd_cos(const struct sim_kern *k, struct sim_err *err)
{
    const struct cos_params *p = k->params;
    char *y = k->out[0].data;

    (void)err;
    for (int64_t i = 0; i < k->out[0].numel; i++)
        memcpy(y + i * (int64_t)p->es, p->value, p->es);
    return 0;
}

/* ---- Expand --------------------------------------------------------------------------- */

struct expand_params {
    struct sim_bcast bc;
    size_t es;
};

static int
infer_expand(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    const struct sim_shape *sh[2];
    struct expand_params *p;
    struct sim_shape want = { 0 }, o;
    int64_t dims[SIM_MAX_RANK];
    char s1[128], s2[128];
    int n, rc = sim_in_dtype(c, 0, sim_dt_any);

    if (rc == 0)
        rc = sim_in_const_ints(c, 1, "shape", dims, SIM_MAX_RANK, &n);
    if (rc != 0)
        return rc;
    want.rank = n;
    for (int i = 0; i < n; i++) {
        if (dims[i] < 0)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "shape value %lld is negative",
                                  (long long)dims[i]);
        want.d[i] = dims[i];
    }
    sh[0] = &x->shape;
    sh[1] = &want;
    if (!sim_bcast_shapes(2, sh, &o))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "input %s does not broadcast to shape %s",
                              sim_shape_fmt(&x->shape, s1, sizeof(s1)),
                              sim_shape_fmt(&want, s2, sizeof(s2)));
    rc = sim_set_out(c, 0, x->dtype, &o);
    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->es = sim_dtype_size(x->dtype);
    sim_bcast_plan(&p->bc, 1, sh, &o);
    return 0;
}

/* x: a shape that broadcasts to y's */
static int
fwd_expand(const struct sim_kern *k, struct sim_err *err)
{
    const struct expand_params *p = k->params;
    const struct sim_bcast *bc = &p->bc;
    int64_t idx[SIM_MAX_RANK] = { 0 }, off[SIM_BCAST_MAX] = { 0 }, n = bc->n;
    int64_t es = (int64_t)p->es, in = bc->inner[0];
    const char *x = k->in[0].data;
    char *y = k->out[0].data;

    (void)err;
    for (int64_t r = 0; r < bc->rows; r++, sim_bcast_next(bc, idx, off)) {
        char *yr = y + r * n * es;
        if (in == 1) {
            memcpy(yr, x + off[0] * es, (size_t)(n * es));
            continue;
        }
        for (int64_t i = 0; i < n; i++)
            memcpy(yr + i * es, x + (off[0] + i * in) * es, (size_t)es);
    }
    return 0;
}

/* dx += dy summed over the broadcast dims */
static int
bwd_expand(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
           struct sim_err *err)
{
    const struct expand_params *p = k->params;
    const struct sim_bcast *bc = &p->bc;
    int64_t idx[SIM_MAX_RANK] = { 0 }, off[SIM_BCAST_MAX] = { 0 }, n = bc->n;
    const float *g = dout[0].data;
    float *dx = din[0].data;

    (void)err;
    if (g == NULL || dx == NULL)
        return 0;
    for (int64_t r = 0; r < bc->rows; r++, sim_bcast_next(bc, idx, off))
        for (int64_t i = 0; i < n; i++)
            dx[off[0] + i * bc->inner[0]] += g[r * n + i];
    return 0;
}

/* ---- Range ---------------------------------------------------------------------------- */

static const int dt_range[] = { SIM_DTYPE_FLOAT, SIM_DTYPE_INT32, SIM_DTYPE_INT64, 0 };

static int
infer_range(struct sim_infer *c)
{
    double v[3], count;
    struct sim_shape o = { 0 };
    static const char *const what[] = { "start", "limit", "delta" };

    for (int i = 0; i < 3; i++) {
        int rc = sim_in_dtype(c, i, dt_range);
        if (rc != 0)
            return rc;
        if (c->in[i]->dtype != c->in[0]->dtype || c->in[i]->numel != 1)
            return sim_infer_fail(c, IPUOF_E_SHAPE, "%s must be one %s value", what[i],
                                  sim_dtype_name(c->in[0]->dtype));
        if (c->in[i]->cdata == NULL)
            return sim_infer_fail(c, IPUOF_E_UNSUPPORTED, "input %d (%s) must be known at "
                                  "compile time (an initializer, a Constant, computed from "
                                  "shapes, or a frozen graph input)", i, what[i]);
        v[i] = sim_get_f64(c->in[i]->dtype, c->in[i]->cdata, 0);
    }
    if (v[2] == 0.0)
        return sim_infer_fail(c, IPUOF_E_INVAL, "delta is 0");
    count = ceil((v[1] - v[0]) / v[2]);
    if (!(count >= 0.0))
        count = 0.0;
    if (count > (double)SIM_MAX_ELEMS)
        return sim_infer_fail(c, IPUOF_E_TOO_LARGE, "the range has %.0f elements, more than "
                              "%lld", count, (long long)SIM_MAX_ELEMS);
    o.rank = 1;
    o.d[0] = (int64_t)count;
    return sim_set_out(c, 0, c->in[0]->dtype, &o);
}

/* start, limit, delta: scalars; y: (n) start + i delta */
static int
fwd_range(const struct sim_kern *k, struct sim_err *err)
{
    int dt = k->in[0].dtype;
    int64_t n = k->out[0].numel;

    (void)err;
    if (dt == SIM_DTYPE_FLOAT) {
        float s = ((const float *)k->in[0].data)[0], d = ((const float *)k->in[2].data)[0];
        float *y = k->out[0].data;
        for (int64_t i = 0; i < n; i++)
            y[i] = s + (float)i * d;
    } else {
        int64_t s = sim_get_i64(dt, k->in[0].data, 0), d = sim_get_i64(dt, k->in[2].data, 0);
        for (int64_t i = 0; i < n; i++)
            sim_put_i64(dt, k->out[0].data, i, (int64_t)((uint64_t)s + (uint64_t)i * (uint64_t)d));
    }
    return 0;
}

const struct sim_op sim_ops_gen[] = {
    { "ConstantOfShape", 9, 1, 1, 1, 1, 1u, 0, 2048u, infer_cos, fwd_cos, NULL, 0u, NULL },
    { "Expand", 8, 2, 2, 1, 1, 1u << 1, 0, 3072u, infer_expand, fwd_expand, bwd_expand, 1u,
      NULL, SIM_BWD_NONE },
    { "Range", 11, 3, 3, 1, 1, 7u, 0, 2048u, infer_range, fwd_range, NULL, 0u, NULL },
};

const int sim_ops_gen_count = (int)(sizeof(sim_ops_gen) / sizeof(sim_ops_gen[0]));
