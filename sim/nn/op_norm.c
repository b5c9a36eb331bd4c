/*
 * op_norm.c — normalisations on float tensors, forward and backward: BatchNormalization
 * (inference with the running statistics; training mode with batch statistics and the
 * updated running mean and variance as outputs: opset 14+'s training_mode, opsets 7-13's
 * statistics outputs, which add the batch mean and biased batch variance as saved_mean and
 * saved_var) and LayerNormalization (opset 17: any axis, with the optional Mean and
 * InvStdDev outputs).
 *
 * A node in training mode (training_mode 1; opsets 7-13: statistics outputs) in a training
 * executable uses the statistics of the step's micro-batch, keeps the batch mean and
 * 1/sqrt(var + eps) for its backward, and updates its running statistics in place when
 * they are weights, as torch.nn.BatchNorm does:
 * running = momentum * running + (1 - momentum) * batch, with ONNX's momentum
 * (1 - PyTorch's) and the unbiased batch variance for running_var (ONNX's reference uses
 * the biased one, which an inference compile of a training-mode node keeps).
 * A node in inference mode (what torch.onnx.export writes for a BatchNorm in eval(), also
 * inside a model exported in training mode) uses and keeps the running statistics in a
 * training executable too, as a BatchNorm in eval() does in a torch training loop: an
 * affine map whose gradient reaches x, scale and bias (PopTorch's
 * test_batchNorm_eval_during_training).
 * An eval_mode executable (an inference model made from a training model) uses the running
 * statistics whatever the node says, as PyTorch's eval() does; its statistics outputs are
 * copies of the running ones.
 * Statistics are accumulated in double. Does not: spatial=0, training mode before opset 7.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

struct bn_params {
    int64_t n, c, plane;            /* x viewed as (n, c, plane) */
    float eps, momentum;
    bool training;                  /* batch statistics */
    bool torch_stats;               /* training executable: unbiased running_var, saved */
    bool in_place;                  /* update the running statistics inputs (weights) */
};

static int
infer_bn(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    struct bn_params *p;
    int64_t training = 0, spatial = 1, is_test = 0;
    char s1[128], s2[128];
    int rc;

    for (int i = 0; i < 5; i++) {
        rc = sim_in_dtype(c, i, sim_dt_float);
        if (rc != 0)
            return rc;
    }
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    rc = sim_ia_float(c, "epsilon", 1e-5f, &p->eps);
    if (rc == 0)
        rc = sim_ia_float(c, "momentum", 0.9f, &p->momentum);
    if (rc == 0)
        rc = sim_ia_int(c, "training_mode", 0, &training);
    if (rc == 0)
        rc = sim_ia_int(c, "spatial", 1, &spatial);
    if (rc == 0)
        rc = sim_ia_int(c, "is_test", 0, &is_test);
    if (rc != 0)
        return rc;
    if (c->version < 7 && is_test == 0 && c->n_out > 1)
        return sim_infer_unsupported(c, "training-mode BatchNormalization before opset 7 "
                                     "(is_test = 0 with statistics outputs); re-export with "
                                     "torch.onnx.export(..., opset_version=14) (or 7 to 13)");
    if (spatial != 1)
        return sim_infer_unsupported(c, "BatchNormalization with spatial=0 (statistics per "
                                     "element, not per channel); re-export at opset 9 or "
                                     "later, where spatial does not exist");
    if (c->version >= 14 && c->n_out > 3)
        return sim_infer_fail(c, IPUOF_E_INVAL, "has %d outputs; opset %d allows 3", c->n_out,
                              c->version);
    if (c->version >= 7 && c->version < 14 && c->n_out > 1)
        training = 1;   /* opsets 7-13: the statistics outputs make a training-mode node */
    if (c->eval)
        training = 0;
    if (x->shape.rank < 2)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "input %s must be (N, C, ...)",
                              sim_shape_fmt(&x->shape, s1, sizeof(s1)));
    for (int i = 1; i < 5; i++)
        if (c->in[i]->shape.rank != 1 || c->in[i]->shape.d[0] != x->shape.d[1])
            return sim_infer_fail(c, IPUOF_E_SHAPE, "input %d %s must be (C) = (%lld) for "
                                  "input %s", i, sim_shape_fmt(&c->in[i]->shape, s2, sizeof(s2)),
                                  (long long)x->shape.d[1],
                                  sim_shape_fmt(&x->shape, s1, sizeof(s1)));
    p->training = training != 0;
    p->torch_stats = c->training;
    p->in_place = c->training && p->training && (c->weight_inputs & (1u << 3)) &&
                  (c->weight_inputs & (1u << 4));
    if (c->training && p->training)
        c->saved_bytes = 2 * (size_t)x->shape.d[1] * sizeof(float);
    p->n = x->shape.d[0];
    p->c = x->shape.d[1];
    p->plane = sim_shape_span(&x->shape, 2, x->shape.rank);
    rc = sim_set_out(c, 0, SIM_DTYPE_FLOAT, &x->shape);
    for (int i = 1; rc == 0 && i < c->n_out; i++)
        rc = sim_set_out(c, i, SIM_DTYPE_FLOAT, &c->in[3]->shape);
    return rc;
}

double
sim_norm_stats(const float *xr, int64_t len, float eps, double *inv)
{
    double s = 0.0, ss = 0.0, m;

    for (int64_t i = 0; i < len; i++)
        s += xr[i];
    m = len > 0 ? s / (double)len : 0.0;
    for (int64_t i = 0; i < len; i++)
        ss += (xr[i] - m) * (xr[i] - m);
    *inv = 1.0 / sqrt((len > 0 ? ss / (double)len : 0.0) + eps);
    return m;
}

/* The mean of channel ch of x (n, c, plane) and its sum of squared deviations *ss. */
static double
batch_stats(const struct bn_params *p, const float *x, int64_t ch, double *ss)
{
    double s = 0.0, cnt = (double)(p->n * p->plane), m;

    for (int64_t n = 0; n < p->n; n++) {
        const float *xr = x + (n * p->c + ch) * p->plane;
        for (int64_t i = 0; i < p->plane; i++)
            s += xr[i];
    }
    m = cnt > 0 ? s / cnt : 0.0;
    *ss = 0.0;
    for (int64_t n = 0; n < p->n; n++) {
        const float *xr = x + (n * p->c + ch) * p->plane;
        for (int64_t i = 0; i < p->plane; i++)
            *ss += (xr[i] - m) * (xr[i] - m);
    }
    return m;
}

/* x, y: (n, c, plane); scale, bias, mean, var, running outputs: (c);
 * saved (training executables): batch mean (c) then 1/sqrt(batch var + eps) (c) */
static int
fwd_bn(const struct sim_kern *k, struct sim_err *err)
{
    const struct bn_params *p = k->params;
    const float *x = k->in[0].data, *scale = k->in[1].data, *bias = k->in[2].data;
    float *mean = k->in[3].data, *var = k->in[4].data;
    float *y = k->out[0].data;
    float *rmean = k->n_out > 1 ? k->out[1].data : NULL;
    float *rvar = k->n_out > 2 ? k->out[2].data : NULL;
    float *smean = k->n_out > 3 ? k->out[3].data : NULL;
    float *svar = k->n_out > 4 ? k->out[4].data : NULL;
    float *saved = k->saved;

    (void)err;
    for (int64_t ch = 0; ch < p->c; ch++) {
        double m = mean[ch], v = var[ch], a, b;
        if (p->training && p->torch_stats) {
            double ss, cnt = (double)(p->n * p->plane), rm, rv;
            m = batch_stats(p, x, ch, &ss);
            v = cnt > 0 ? ss / cnt : 0.0;
            rm = mean[ch] * (double)p->momentum + m * (1.0 - p->momentum);
            rv = var[ch] * (double)p->momentum +
                 (cnt > 1 ? ss / (cnt - 1) : v) * (1.0 - p->momentum);
            if (rmean != NULL)
                rmean[ch] = (float)rm;
            if (rvar != NULL)
                rvar[ch] = (float)rv;
            if (p->in_place) {
                mean[ch] = (float)rm;
                var[ch] = (float)rv;
            }
            if (saved != NULL) {
                saved[ch] = (float)m;
                saved[p->c + ch] = (float)(1.0 / sqrt(v + p->eps));
            }
        } else if (p->training) {
            double ss, cnt = (double)(p->n * p->plane);
            m = batch_stats(p, x, ch, &ss);
            v = cnt > 0 ? ss / cnt : 0.0;
            if (rmean != NULL)
                rmean[ch] = (float)(mean[ch] * p->momentum + m * (1.0 - p->momentum));
            if (rvar != NULL)
                rvar[ch] = (float)(var[ch] * p->momentum + v * (1.0 - p->momentum));
        } else {
            if (rmean != NULL)
                rmean[ch] = mean[ch];
            if (rvar != NULL)
                rvar[ch] = var[ch];
        }
        if (smean != NULL)
            smean[ch] = (float)m;
        if (svar != NULL)
            svar[ch] = (float)v;
        a = scale[ch] / sqrt(v + p->eps);
        b = bias[ch] - m * a;
        for (int64_t n = 0; n < p->n; n++) {
            const float *xr = x + (n * p->c + ch) * p->plane;
            float *yr = y + (n * p->c + ch) * p->plane;
            float fa = (float)a, fb = (float)b;
            for (int64_t i = 0; i < p->plane; i++)
                yr[i] = xr[i] * fa + fb;
        }
    }
    return 0;
}

struct ln_params {
    int64_t outer, inner;
    float eps;
    bool scalar_scale, scalar_bias;
};

static int
infer_ln(struct sim_infer *c)
{
    const struct sim_tinfo *x = c->in[0];
    struct ln_params *p;
    struct sim_shape stat;
    int64_t axis;
    int ax, rc = sim_in_dtype(c, 0, sim_dt_float);
    char s1[128], s2[128];

    if (rc == 0)
        rc = sim_in_dtype(c, 1, sim_dt_float);
    if (rc == 0 && sim_has_in(c, 2))
        rc = sim_in_dtype(c, 2, sim_dt_float);
    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    rc = sim_ia_int(c, "axis", -1, &axis);
    if (rc == 0)
        rc = sim_ia_float(c, "epsilon", 1e-5f, &p->eps);
    if (rc != 0)
        return rc;
    if (!sim_axis(axis, x->shape.rank, &ax))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)axis, x->shape.rank);
    p->outer = sim_shape_span(&x->shape, 0, ax);
    p->inner = sim_shape_span(&x->shape, ax, x->shape.rank);
    for (int i = 1; i < 3; i++) {
        const struct sim_tinfo *t = sim_has_in(c, i) ? c->in[i] : NULL;
        if (t == NULL)
            continue;
        if (t->numel == 1) {
            if (i == 1)
                p->scalar_scale = true;
            else
                p->scalar_bias = true;
            continue;
        }
        if (t->numel != p->inner || t->shape.rank > x->shape.rank - ax)
            return sim_infer_unsupported(c, "%s %s for input %s with axis %d (it must have "
                                         "the shape of the normalised dims or one element)",
                                         i == 1 ? "Scale" : "B",
                                         sim_shape_fmt(&t->shape, s1, sizeof(s1)),
                                         sim_shape_fmt(&x->shape, s2, sizeof(s2)), ax);
    }
    stat = x->shape;
    for (int i = ax; i < stat.rank; i++)
        stat.d[i] = 1;
    rc = sim_set_out(c, 0, SIM_DTYPE_FLOAT, &x->shape);
    for (int i = 1; rc == 0 && i < c->n_out; i++)
        rc = sim_set_out(c, i, SIM_DTYPE_FLOAT, &stat);
    return rc;
}

/* x, y: (outer, inner); scale, bias: (inner) or one value; mean, invstd: (outer) */
static int
fwd_ln(const struct sim_kern *k, struct sim_err *err)
{
    const struct ln_params *p = k->params;
    const float *x = k->in[0].data, *scale = k->in[1].data;
    const float *bias = k->n_in > 2 ? k->in[2].data : NULL;
    float *y = k->out[0].data;
    float *mean_out = k->n_out > 1 ? k->out[1].data : NULL;
    float *inv_out = k->n_out > 2 ? k->out[2].data : NULL;

    (void)err;
    for (int64_t o = 0; o < p->outer; o++) {
        const float *xr = x + o * p->inner;
        float *yr = y + o * p->inner;
        double inv, m = sim_norm_stats(xr, p->inner, p->eps, &inv);
        for (int64_t i = 0; i < p->inner; i++) {
            double sc = scale[p->scalar_scale ? 0 : i];
            double b = bias != NULL ? bias[p->scalar_bias ? 0 : i] : 0.0;
            yr[i] = (float)((xr[i] - m) * inv * sc + b);
        }
        if (mean_out != NULL)
            mean_out[o] = (float)m;
        if (inv_out != NULL)
            inv_out[o] = (float)inv;
    }
    return 0;
}

/* ---- backward ------------------------------------------------------------------------- */

/*
 * x, dx, dy: (n, c, plane); scale, dscale, dbias: (c). With batch statistics (N values per
 * channel, xhat = (x - mean) * inv): dbias += sum dy, dscale += sum dy xhat,
 * dx += scale inv / N (N dy - sum dy - xhat sum dy xhat). With running statistics the op is
 * affine: dx += dy scale inv. The running-statistics outputs carry no gradient (buffers).
 */
static int
bwd_bn(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
       struct sim_err *err)
{
    const struct bn_params *p = k->params;
    const float *x = k->in[0].data, *scale = k->in[1].data, *g = dout[0].data;
    const float *saved = k->saved;
    float *dx = din[0].data, *dscale = din[1].data, *dbias = din[2].data;
    double cnt = (double)(p->n * p->plane);

    if (g == NULL)
        return 0;
    if (p->training && saved == NULL)
        return sim_err_set(err, IPUOF_E_INTERNAL, "%s: no batch statistics were kept",
                           k->label);
    for (int64_t ch = 0; ch < p->c; ch++) {
        double m, inv, sg = 0.0, sgx = 0.0;
        if (p->training) {
            m = saved[ch];
            inv = saved[p->c + ch];
        } else {
            m = ((const float *)k->in[3].data)[ch];
            inv = 1.0 / sqrt((double)((const float *)k->in[4].data)[ch] + p->eps);
        }
        for (int64_t n = 0; n < p->n; n++) {
            const float *xr = x + (n * p->c + ch) * p->plane, *gr = g + (n * p->c + ch) * p->plane;
            for (int64_t i = 0; i < p->plane; i++) {
                sg += gr[i];
                sgx += gr[i] * (xr[i] - m) * inv;
            }
        }
        if (dbias != NULL)
            dbias[ch] += (float)sg;
        if (dscale != NULL)
            dscale[ch] += (float)sgx;
        if (dx == NULL)
            continue;
        for (int64_t n = 0; n < p->n; n++) {
            const float *xr = x + (n * p->c + ch) * p->plane, *gr = g + (n * p->c + ch) * p->plane;
            float *dr = dx + (n * p->c + ch) * p->plane;
            if (!p->training) {
                float a = (float)(scale[ch] * inv);
                for (int64_t i = 0; i < p->plane; i++)
                    dr[i] += gr[i] * a;
                continue;
            }
            for (int64_t i = 0; i < p->plane; i++) {
                double xhat = (xr[i] - m) * inv;
                dr[i] += (float)(scale[ch] * inv / cnt * (cnt * gr[i] - sg - xhat * sgx));
            }
        }
    }
    return 0;
}

/*
 * x, dx, dy: (outer, inner); scale, bias and their gradients: (inner) or one value;
 * dmean, dinvstd (optional outputs' gradients): (outer). With xhat = (x - m) inv and
 * h = dy scale: dx += inv (h - mean(h) - xhat mean(h xhat)), dscale += sum dy xhat,
 * dbias += sum dy; the Mean and InvStdDev outputs add dmean / inner and
 * -dinvstd inv^3 (x - m) / inner.
 */
static int
bwd_ln(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
       struct sim_err *err)
{
    const struct ln_params *p = k->params;
    const float *x = k->in[0].data, *scale = k->in[1].data, *g = dout[0].data;
    const float *gm = k->n_out > 1 ? dout[1].data : NULL, *gi = k->n_out > 2 ? dout[2].data : NULL;
    float *dx = din[0].data, *dscale = din[1].data, *dbias = k->n_in > 2 ? din[2].data : NULL;
    double inner = (double)p->inner;

    (void)err;
    if (p->inner == 0)
        return 0;
    for (int64_t o = 0; o < p->outer; o++) {
        const float *xr = x + o * p->inner, *gr = g != NULL ? g + o * p->inner : NULL;
        double inv, m = sim_norm_stats(xr, p->inner, p->eps, &inv), sh = 0.0, shx = 0.0;
        for (int64_t i = 0; gr != NULL && i < p->inner; i++) {
            double xhat = (xr[i] - m) * inv, h = gr[i] * (double)scale[p->scalar_scale ? 0 : i];
            sh += h;
            shx += h * xhat;
            if (dscale != NULL)
                dscale[p->scalar_scale ? 0 : i] += (float)(gr[i] * xhat);
            if (dbias != NULL)
                dbias[p->scalar_bias ? 0 : i] += gr[i];
        }
        if (dx == NULL)
            continue;
        for (int64_t i = 0; i < p->inner; i++) {
            double xhat = (xr[i] - m) * inv, v = 0.0;
            if (gr != NULL)
                v += inv * (gr[i] * (double)scale[p->scalar_scale ? 0 : i] - sh / inner -
                            xhat * shx / inner);
            if (gm != NULL)
                v += gm[o] / inner;
            if (gi != NULL)
                v -= gi[o] * inv * inv * inv * (xr[i] - m) / inner;
            dx[o * p->inner + i] += (float)v;
        }
    }
    return 0;
}

const struct sim_op sim_ops_norm[] = {
    { "BatchNormalization", 1, 5, 5, 1, 5, 0, 0, 8192u, infer_bn, fwd_bn, bwd_bn, 7u, NULL,
      SIM_BWD_IN(0) | SIM_BWD_IN(1) | SIM_BWD_IN(3) | SIM_BWD_IN(4) },
    { "LayerNormalization", 17, 2, 3, 1, 3, 0, 0, 8192u, infer_ln, fwd_ln, bwd_ln, 7u, NULL,
      SIM_BWD_IN(0) | SIM_BWD_IN(1) },
};

const int sim_ops_norm_count = (int)(sizeof(sim_ops_norm) / sizeof(sim_ops_norm[0]));
