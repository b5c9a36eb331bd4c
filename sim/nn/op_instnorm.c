/*
 * op_instnorm.c — InstanceNormalization on float tensors, forward and backward (opsets 6
 * and later; opset 1's consumed_inputs attribute is accepted and ignored, as opset 6 drops
 * it): y = scale[c] (x - mean) / sqrt(var + epsilon) + B[c], with the mean and the biased
 * variance of each (image, channel) plane, which is what torch.nn.InstanceNorm{1,2,3}d
 * without running statistics computes, and what torch.nn.GroupNorm exports as
 * (Reshape to (N, groups, -1), InstanceNormalization with scale 1 and B 0, Reshape back,
 * then Mul by the weight and Add the bias).
 *
 * The statistics always come from the input, in training and inference alike (the op has
 * no running statistics), so the backward is the full normalisation backward. They are
 * accumulated in double (sim_norm_stats, shared with LayerNormalization); the backward
 * recomputes them instead of keeping them in `saved`.
 * Does not: dtypes other than float (the simulator has no float16 or double tensors).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

struct in_params {
    int64_t n, c, plane;            /* x viewed as (n, c, plane) */
    float eps;
};

static int
infer_in(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    struct in_params *p;
    char s1[128], s2[128];
    int rc = 0;

    for (int i = 0; rc == 0 && i < 3; i++)
        rc = sim_in_dtype(c, i, sim_dt_float);
    if (rc != 0)
        return rc;
    if (x->shape.rank < 2)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "input %s must be (N, C, ...), rank 2 or more",
                              sim_shape_fmt(&x->shape, s1, sizeof(s1)));
    for (int i = 1; i < 3; i++)
        if (c->in[i]->shape.rank != 1 || c->in[i]->shape.d[0] != x->shape.d[1])
            return sim_infer_fail(c, IPUOF_E_SHAPE, "input %d (%s) %s must be (C) = (%lld) "
                                  "for input %s", i, i == 1 ? "scale" : "B",
                                  sim_shape_fmt(&c->in[i]->shape, s2, sizeof(s2)),
                                  (long long)x->shape.d[1],
                                  sim_shape_fmt(&x->shape, s1, sizeof(s1)));
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    rc = sim_ia_float(c, "epsilon", 1e-5f, &p->eps);
    if (rc != 0)
        return rc;
    if (!(p->eps >= 0.0f) || isinf(p->eps))
        return sim_infer_fail(c, IPUOF_E_INVAL, "epsilon must be a finite number >= 0, not %g",
                              (double)p->eps);
    p->n = x->shape.d[0];
    p->c = x->shape.d[1];
    p->plane = sim_shape_span(&x->shape, 2, x->shape.rank);
    return sim_set_out(c, 0, SIM_DTYPE_FLOAT, &x->shape);
}

/* x, y: (n, c, plane); scale, B: (c) */
static int
fwd_in(const struct sim_kern *k, struct sim_err *err)
{
    const struct in_params *p = k->params;
    const float *x = k->in[0].data, *scale = k->in[1].data, *bias = k->in[2].data;
    float *y = k->out[0].data;

    (void)err;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t ch = 0; ch < p->c; ch++) {
            const float *xr = x + (n * p->c + ch) * p->plane;
            float *yr = y + (n * p->c + ch) * p->plane;
            double inv, m = sim_norm_stats(xr, p->plane, p->eps, &inv);
            double a = scale[ch] * inv, b = bias[ch] - m * a;
            for (int64_t i = 0; i < p->plane; i++)
                yr[i] = (float)(xr[i] * a + b);
        }
    return 0;
}

/*
 * x, dx, dy: (n, c, plane); scale, dscale, dB: (c). Per plane of P values with
 * xhat = (x - mean) inv: dB[c] += sum dy, dscale[c] += sum dy xhat,
 * dx += scale inv / P (P dy - sum dy - xhat sum dy xhat).
 */
static int
bwd_in(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
       struct sim_err *err)
{
    const struct in_params *p = k->params;
    const float *x = k->in[0].data, *scale = k->in[1].data, *g = dout[0].data;
    float *dx = din[0].data, *dscale = din[1].data, *dbias = din[2].data;
    double cnt = (double)p->plane;

    (void)err;
    if (g == NULL)
        return 0;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t ch = 0; ch < p->c; ch++) {
            int64_t base = (n * p->c + ch) * p->plane;
            const float *xr = x + base, *gr = g + base;
            double inv, m = sim_norm_stats(xr, p->plane, p->eps, &inv), sg = 0.0, sgx = 0.0, a;
            for (int64_t i = 0; i < p->plane; i++) {
                sg += gr[i];
                sgx += gr[i] * (xr[i] - m) * inv;
            }
            if (dbias != NULL)
                dbias[ch] += (float)sg;
            if (dscale != NULL)
                dscale[ch] += (float)sgx;
            if (dx == NULL)
                continue;
            a = scale[ch] * inv / cnt;
            for (int64_t i = 0; i < p->plane; i++) {
                double xhat = (xr[i] - m) * inv;
                dx[base + i] += (float)(a * (cnt * gr[i] - sg - xhat * sgx));
            }
        }
    return 0;
}

const struct sim_op sim_ops_instnorm[] = {
    { "InstanceNormalization", 1, 3, 3, 1, 1, 0, 0, 8192u, infer_in, fwd_in, bwd_in, 7u,
      NULL, SIM_BWD_ALL },
};

const int sim_ops_instnorm_count =
    (int)(sizeof(sim_ops_instnorm) / sizeof(sim_ops_instnorm[0]));
