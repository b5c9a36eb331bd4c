/*
 * op_activation.c — activations and normalised exponentials on float tensors, forward and
 * backward: Relu, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Elu, Softplus,
 * Softmax, LogSoftmax (both the opset < 13
 * "coerce to 2-D" semantics and the single-axis semantics of opset 13), and Dropout
 * (identity in inference, and in an eval_mode executable whatever training_mode says; in
 * training mode, and always in a training executable, a
 * Bernoulli mask from the replica's random state, kept for the backward).
 *
 * Does not: support other dtypes than float.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "act.h"
#include "ops.h"
#include "rng.h"
#include "hot.h"
#include "pool.h"
#include "vmath.h"

static int
infer_float_same(struct sim_infer *c)
{
    int rc = sim_in_dtype(c, 0, sim_dt_float);

    return rc != 0 ? rc : sim_set_out(c, 0, SIM_DTYPE_FLOAT, &c->in[0]->shape);
}

/* x: any shape, y: same shape */
static int
fwd_relu(const struct sim_kern *k, struct sim_err *err)
{
    static const struct sim_act relu = { SIM_ACT_RELU, 0.0f, 0.0f };

    (void)err;
    sim_act_map(&relu, k->in[0].data, k->out[0].data, k->in[0].numel);
    return 0;
}

struct leaky_params {
    float alpha;
};

static int
infer_leaky(struct sim_infer *c)
{
    struct leaky_params *p;
    int rc = infer_float_same(c);

    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    return sim_ia_float(c, "alpha", 0.01f, &p->alpha);
}

/* x, y: same shape */
static int
fwd_leaky(const struct sim_kern *k, struct sim_err *err)
{
    const struct leaky_params *p = k->params;
    struct sim_act act = { SIM_ACT_LEAKY, p->alpha, 0.0f };

    (void)err;
    sim_act_map(&act, k->in[0].data, k->out[0].data, k->in[0].numel);
    return 0;
}

/* x, y: same shape; y = 1 / (1 + e^-x) (act.c) */
static int
fwd_sigmoid(const struct sim_kern *k, struct sim_err *err)
{
    static const struct sim_act sig = { SIM_ACT_SIGMOID, 0.0f, 0.0f };

    (void)err;
    sim_act_map(&sig, k->in[0].data, k->out[0].data, k->in[0].numel);
    return 0;
}

/* x, y: same shape; y = x sigmoid(x), what Sigmoid then Mul(x, sigmoid(x)) compute, in one
 * pass (fuse.c turns that pair into this internal op in inference). */
static int
fwd_silu(const struct sim_kern *k, struct sim_err *err)
{
    static const struct sim_act silu = { SIM_ACT_SILU, 0.0f, 0.0f };

    (void)err;
    sim_act_map(&silu, k->in[0].data, k->out[0].data, k->in[0].numel);
    return 0;
}

/* x, y: same shape */
static int
fwd_tanh(const struct sim_kern *k, struct sim_err *err)
{
    const float *x = k->in[0].data;
    float *y = k->out[0].data;

    (void)err;
    for (int64_t i = 0; i < k->in[0].numel; i++)
        y[i] = tanhf(x[i]);
    return 0;
}

/* ---- HardSigmoid, HardSwish, Elu, Softplus ------------------------------------------- */

enum { A_HSIGMOID, A_HSWISH, A_ELU, A_SOFTPLUS };

struct act_params {
    int kind;
    float alpha, beta;
};

static int
infer_act(struct sim_infer *c, int kind, float alpha, float beta)
{
    struct act_params *p;
    int rc = infer_float_same(c);

    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->kind = kind;
    p->alpha = alpha;
    p->beta = beta;
    if (kind == A_HSIGMOID || kind == A_ELU)
        rc = sim_ia_float(c, "alpha", alpha, &p->alpha);
    if (rc == 0 && kind == A_HSIGMOID)
        rc = sim_ia_float(c, "beta", beta, &p->beta);
    return rc;
}

static int infer_hsigmoid(struct sim_infer *c) { return infer_act(c, A_HSIGMOID, 0.2f, 0.5f); }
static int infer_hswish(struct sim_infer *c) { return infer_act(c, A_HSWISH, 1.0f / 6.0f, 0.5f); }
static int infer_elu(struct sim_infer *c) { return infer_act(c, A_ELU, 1.0f, 0.0f); }
static int infer_softplus(struct sim_infer *c) { return infer_act(c, A_SOFTPLUS, 0.0f, 0.0f); }

/* The sim_act of an act_params kind. */
static void
act_of_params(const struct act_params *p, struct sim_act *act)
{
    static const int kinds[] = { [A_HSIGMOID] = SIM_ACT_HSIGMOID, [A_HSWISH] = SIM_ACT_HSWISH,
                                 [A_ELU] = SIM_ACT_ELU, [A_SOFTPLUS] = SIM_ACT_SOFTPLUS };

    act->kind = kinds[p->kind];
    act->a = p->alpha;
    act->b = p->beta;
}

/*
 * x, y: same shape. HardSigmoid: max(0, min(1, alpha x + beta)); HardSwish: x times the
 * HardSigmoid with alpha 1/6, beta 1/2; Elu: x > 0 ? x : alpha (e^x - 1); Softplus:
 * ln(1 + e^x), computed without overflow (act.c).
 */
static int
fwd_act(const struct sim_kern *k, struct sim_err *err)
{
    struct sim_act act;

    (void)err;
    act_of_params(k->params, &act);
    sim_act_map(&act, k->in[0].data, k->out[0].data, k->in[0].numel);
    return 0;
}

/*
 * What the pieces of a backward map share: x, y the forward's input and output, g the
 * output's gradient, dx the input's gradient (added to); kind, a, b the op's parameters.
 * Every piece does per element the float operations its scalar rule states (eight lanes
 * at a time, selects instead of branches), so splitting over the pool or vectorizing leaves
 * every result bit for bit the same.
 */
struct grad_run {
    const float *x, *y, *g;
    float *dx;
    int kind;
    float a, b;
};

/*
 * HardSigmoid: dx += alpha dy inside the linear part (0 < alpha x + beta < 1, strictly, as
 * PyTorch); HardSwish: dy (2 alpha x + beta) there, dy above, 0 below; Elu: dy for x > 0,
 * dy (y + alpha) elsewhere; Softplus: dy sigmoid(x). Elements [lo, hi).
 */
SIM_HOT_FN(act_bwd_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct grad_run *r = ctx;
    const float *x = r->x, *y = r->y, *g = r->g;
    float *dx = r->dx, a = r->a, b = r->b;
    int64_t i = lo;

    switch (r->kind) {
    case A_HSIGMOID:
        for (; i + 8 <= hi; i += 8) {
            sim_v8f h = a * *(const sim_v8f_u *)(x + i) + b;
            sim_v8f t = sim_v8sel((h > 0.0f) & (h < 1.0f), *(const sim_v8f_u *)(g + i) * a,
                                  SIM_V8(0.0f));
            *(sim_v8f_u *)(dx + i) += t;
        }
        for (; i < hi; i++) {
            float h = a * x[i] + b;
            dx[i] += h > 0.0f && h < 1.0f ? g[i] * a : 0.0f;
        }
        break;
    case A_HSWISH:
        for (; i + 8 <= hi; i += 8) {
            sim_v8f v = *(const sim_v8f_u *)(x + i), gv = *(const sim_v8f_u *)(g + i);
            sim_v8f h = a * v + b;
            sim_v8f t = sim_v8sel(h <= 1.0f, gv * (2.0f * a * v + b), gv);
            *(sim_v8f_u *)(dx + i) += sim_v8sel(h < 0.0f, SIM_V8(0.0f), t);
        }
        for (; i < hi; i++) {
            float v = x[i], h = a * v + b;
            dx[i] += h < 0.0f ? 0.0f : h <= 1.0f ? g[i] * (2.0f * a * v + b) : g[i];
        }
        break;
    case A_ELU:
        for (; i + 8 <= hi; i += 8) {
            sim_v8f gv = *(const sim_v8f_u *)(g + i);
            sim_v8f t = gv * (*(const sim_v8f_u *)(y + i) + a);
            *(sim_v8f_u *)(dx + i) += sim_v8sel(*(const sim_v8f_u *)(x + i) > 0.0f, gv, t);
        }
        for (; i < hi; i++)
            dx[i] += x[i] > 0.0f ? g[i] : g[i] * (y[i] + a);
        break;
    default:        /* Softplus: libm's expf, one element at a time */
        for (; i < hi; i++) {
            float v = x[i];
            dx[i] += g[i] * (v >= 0.0f ? 1.0f / (1.0f + expf(-v)) : expf(v) / (1.0f + expf(v)));
        }
        break;
    }
}

/* x, y, dy, dx: same shape */
static int
bwd_act(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
        struct sim_err *err)
{
    const struct act_params *p = k->params;
    struct grad_run r = { k->in[0].data, k->out[0].data, dout[0].data, din[0].data, p->kind,
                          p->alpha, p->beta };

    (void)err;
    if (r.g == NULL || r.dx == NULL)
        return 0;
    sim_pool_for(k->in[0].numel, SIM_POOL_MAP_GRAIN, act_bwd_piece, &r);
    return 0;
}

/* ---- Softmax / LogSoftmax ------------------------------------------------------------- */

struct softmax_params {
    int64_t outer, n, inner;        /* x viewed as (outer, n, inner), softmax over n */
    bool log;
};

static int
infer_softmax_common(struct sim_infer *c, bool log)
{
    const struct sim_tinfo *x = c->in[0];
    struct softmax_params *p;
    int64_t axis;
    int ax, rc = infer_float_same(c);

    if (rc != 0)
        return rc;
    rc = sim_ia_int(c, "axis", c->version < 13 ? 1 : -1, &axis);
    if (rc != 0)
        return rc;
    if (x->shape.rank == 0)
        return sim_infer_fail(c, IPUOF_E_SHAPE, "input must have rank >= 1");
    if (!sim_axis(axis, x->shape.rank, &ax))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "axis %lld is out of range for rank %d",
                              (long long)axis, x->shape.rank);
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->log = log;
    p->outer = sim_shape_span(&x->shape, 0, ax);
    if (c->version < 13) {
        p->n = sim_shape_span(&x->shape, ax, x->shape.rank);
        p->inner = 1;
    } else {
        p->n = x->shape.d[ax];
        p->inner = sim_shape_span(&x->shape, ax + 1, x->shape.rank);
    }
    return 0;
}

static int infer_softmax(struct sim_infer *c) { return infer_softmax_common(c, false); }
static int infer_logsoftmax(struct sim_infer *c) { return infer_softmax_common(c, true); }

/* x, y: (outer, n, inner) */
static int
fwd_softmax(const struct sim_kern *k, struct sim_err *err)
{
    const struct softmax_params *p = k->params;
    const float *x = k->in[0].data;
    float *y = k->out[0].data;
    int64_t n = p->n, inner = p->inner;

    (void)err;
    if (n == 0)
        return 0;
    for (int64_t o = 0; o < p->outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            const float *xr = x + o * n * inner + i;
            float *yr = y + o * n * inner + i;
            float mx = xr[0];
            double sum = 0.0;
            for (int64_t j = 1; j < n; j++)
                if (xr[j * inner] > mx)
                    mx = xr[j * inner];
            for (int64_t j = 0; j < n; j++) {
                float e = expf(xr[j * inner] - mx);
                sum += e;
                if (!p->log)
                    yr[j * inner] = e;
            }
            if (p->log) {
                float ls = (float)log(sum);
                for (int64_t j = 0; j < n; j++)
                    yr[j * inner] = xr[j * inner] - mx - ls;
            } else {
                float inv = (float)(1.0 / sum);
                for (int64_t j = 0; j < n; j++)
                    yr[j * inner] *= inv;
            }
        }
    }
    return 0;
}

/* ---- Dropout -------------------------------------------------------------------------- */

struct dropout_params {
    float ratio;                    /* attribute ratio (opset < 12) or default */
    bool attr_training;             /* opset < 7 with is_test = 0 */
    bool force_training;            /* a training executable: always drop */
    bool force_eval;                /* eval(): never drop, whatever training_mode says */
    int mask_dtype;
};

static int
infer_dropout(struct sim_infer *c)
{
    struct dropout_params *p;
    int64_t is_test;
    int rc = infer_float_same(c);

    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    rc = sim_ia_float(c, "ratio", 0.5f, &p->ratio);
    if (rc == 0)
        rc = sim_ia_int(c, "is_test", 0, &is_test);
    if (rc != 0)
        return rc;
    p->attr_training = c->version < 7 && is_test == 0 && !c->eval;
    p->force_training = c->training;
    p->force_eval = c->eval;
    if (c->training)
        c->saved_bytes = (size_t)c->in[0]->numel;   /* the mask, one byte per element */
    if (c->version < 12 && (c->n_in > 1))
        return sim_infer_fail(c, IPUOF_E_INVAL, "takes one input before opset 12");
    if (sim_has_in(c, 1) && (c->in[1]->dtype != SIM_DTYPE_FLOAT || c->in[1]->numel != 1))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "ratio must be a single float");
    if (sim_has_in(c, 2) && (c->in[2]->dtype != SIM_DTYPE_BOOL || c->in[2]->numel != 1))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "training_mode must be a single bool");
    p->mask_dtype = c->version >= 10 ? SIM_DTYPE_BOOL : SIM_DTYPE_FLOAT;
    if (c->n_out > 1) {
        rc = sim_set_out(c, 1, p->mask_dtype, &c->in[0]->shape);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The ratio and mode of one step. */
static float
dropout_ratio(const struct sim_kern *k, bool *training)
{
    const struct dropout_params *p = k->params;
    float ratio = p->ratio;

    *training = p->attr_training;
    if (k->n_in > 1 && k->in[1].data != NULL)
        ratio = ((const float *)k->in[1].data)[0];
    if (k->n_in > 2 && k->in[2].data != NULL)
        *training = ((const uint8_t *)k->in[2].data)[0] != 0;
    if (p->force_training)
        *training = true;
    if (p->force_eval)
        *training = false;
    return ratio;
}

/* x, y, mask: same shape; saved (training executables): one keep byte per element */
static int
fwd_dropout(const struct sim_kern *k, struct sim_err *err)
{
    const struct dropout_params *p = k->params;
    const float *x = k->in[0].data;
    float *y = k->out[0].data;
    void *mask = k->n_out > 1 ? k->out[1].data : NULL;
    uint8_t *keep_out = k->saved;
    bool training;
    float ratio = dropout_ratio(k, &training);
    int64_t n = k->in[0].numel;

    (void)err;
    if (!training || !(ratio > 0.0f)) {
        if (y != x)
            memcpy(y, x, (size_t)n * sizeof(float));
        for (int64_t i = 0; mask != NULL && i < n; i++)
            sim_put_i64(p->mask_dtype, mask, i, 1);
        if (keep_out != NULL)
            memset(keep_out, 1, (size_t)n);
        return 0;
    }
    for (int64_t i = 0; i < n; i++) {
        double u = sim_rand_unit(k->rng);
        bool keep = ratio < 1.0f && u >= ratio;
        y[i] = keep ? x[i] / (1.0f - ratio) : 0.0f;
        if (mask != NULL)
            sim_put_i64(p->mask_dtype, mask, i, keep);
        if (keep_out != NULL)
            keep_out[i] = keep;
    }
    return 0;
}

/* ---- backward ------------------------------------------------------------------------- */

enum { G_RELU, G_LEAKY, G_SIGMOID, G_TANH };

/* Relu: dx += dy where y > 0 (PyTorch's threshold_backward on the result), else 0;
 * LeakyRelu: dy where x > 0, alpha dy elsewhere; Sigmoid: dy y (1 - y); Tanh:
 * dy (1 - y^2). Elements [lo, hi). */
SIM_HOT_FN(simple_bwd_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct grad_run *r = ctx;
    const float *x = r->x, *y = r->y, *g = r->g;
    float *dx = r->dx, a = r->a;
    int64_t i = lo;

    switch (r->kind) {
    case G_RELU:
        for (; i + 8 <= hi; i += 8)
            *(sim_v8f_u *)(dx + i) += sim_v8sel(*(const sim_v8f_u *)(y + i) > 0.0f,
                                                *(const sim_v8f_u *)(g + i), SIM_V8(0.0f));
        for (; i < hi; i++)
            dx[i] += y[i] > 0.0f ? g[i] : 0.0f;
        break;
    case G_LEAKY:
        for (; i + 8 <= hi; i += 8) {
            sim_v8f gv = *(const sim_v8f_u *)(g + i);
            *(sim_v8f_u *)(dx + i) += sim_v8sel(*(const sim_v8f_u *)(x + i) > 0.0f, gv, a * gv);
        }
        for (; i < hi; i++)
            dx[i] += x[i] > 0.0f ? g[i] : a * g[i];
        break;
    case G_SIGMOID:
        for (; i < hi; i++)
            dx[i] += g[i] * y[i] * (1.0f - y[i]);
        break;
    default:
        for (; i < hi; i++)
            dx[i] += g[i] * (1.0f - y[i] * y[i]);
        break;
    }
}

/* The simple rule `kind` over every element; x, y, dy, dx: same shape. */
static int
bwd_simple(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
           int kind, float a)
{
    struct grad_run r = { k->in[0].data, k->out[0].data, dout[0].data, din[0].data, kind, a,
                          0.0f };

    if (r.g == NULL || r.dx == NULL)
        return 0;
    sim_pool_for(k->in[0].numel, SIM_POOL_MAP_GRAIN, simple_bwd_piece, &r);
    return 0;
}

/* y = relu(x): dx += dy where y > 0 */
static int
bwd_relu(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
         struct sim_err *err)
{
    (void)err;
    return bwd_simple(k, dout, din, G_RELU, 0.0f);
}

/* dx += dy where x > 0, alpha * dy elsewhere */
static int
bwd_leaky(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
          struct sim_err *err)
{
    const struct leaky_params *p = k->params;

    (void)err;
    return bwd_simple(k, dout, din, G_LEAKY, p->alpha);
}

/* dx += dy * y * (1 - y) */
static int
bwd_sigmoid(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
            struct sim_err *err)
{
    (void)err;
    return bwd_simple(k, dout, din, G_SIGMOID, 0.0f);
}

/* dx += dy * (1 - y^2) */
static int
bwd_tanh(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
         struct sim_err *err)
{
    (void)err;
    return bwd_simple(k, dout, din, G_TANH, 0.0f);
}

/* x, y, dy, dx: (outer, n, inner). Softmax: dx += y * (dy - sum_j dy_j y_j);
 * LogSoftmax: dx += dy - exp(y) * sum_j dy_j. */
static int
bwd_softmax(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
            struct sim_err *err)
{
    const struct softmax_params *p = k->params;
    const float *y = k->out[0].data, *g = dout[0].data;
    float *dx = din[0].data;
    int64_t n = p->n, inner = p->inner;

    (void)err;
    if (g == NULL || dx == NULL)
        return 0;
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            double dot = 0.0;
            for (int64_t j = 0; j < n; j++)
                dot += p->log ? (double)g[base + j * inner]
                              : (double)g[base + j * inner] * y[base + j * inner];
            for (int64_t j = 0; j < n; j++) {
                int64_t at = base + j * inner;
                if (p->log)
                    dx[at] += g[at] - expf(y[at]) * (float)dot;
                else
                    dx[at] += y[at] * (g[at] - (float)dot);
            }
        }
    return 0;
}

/* dx += dy * keep / (1 - ratio), with the mask the forward kept */
static int
bwd_dropout(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
            struct sim_err *err)
{
    const uint8_t *keep = k->saved;
    const float *g = dout[0].data;
    float *dx = din[0].data;
    bool training;
    float ratio = dropout_ratio(k, &training), scale;

    (void)err;
    if (g == NULL || dx == NULL)
        return 0;
    if (!training || !(ratio > 0.0f) || keep == NULL) {
        for (int64_t i = 0; i < k->in[0].numel; i++)
            dx[i] += g[i];
        return 0;
    }
    scale = ratio < 1.0f ? 1.0f / (1.0f - ratio) : 0.0f;
    for (int64_t i = 0; i < k->in[0].numel; i++)
        dx[i] += keep[i] ? g[i] * scale : 0.0f;
    return 0;
}

#define CODE_ACT 3072u

const struct sim_op sim_ops_activation[] = {
    { "Relu", 1, 1, 1, 1, 1, 0, 0, CODE_ACT, infer_float_same, fwd_relu, bwd_relu, 1u, NULL,
      SIM_BWD_OUT(0) },
    { "LeakyRelu", 1, 1, 1, 1, 1, 0, 0, CODE_ACT, infer_leaky, fwd_leaky, bwd_leaky, 1u,
      NULL, SIM_BWD_IN(0) },
    { "Sigmoid", 1, 1, 1, 1, 1, 0, 0, CODE_ACT, infer_float_same, fwd_sigmoid, bwd_sigmoid,
      1u, NULL, SIM_BWD_OUT(0) },
    { "Tanh", 1, 1, 1, 1, 1, 0, 0, CODE_ACT, infer_float_same, fwd_tanh, bwd_tanh, 1u, NULL,
      SIM_BWD_OUT(0) },
    { "HardSigmoid", 1, 1, 1, 1, 1, 0, 0, CODE_ACT, infer_hsigmoid, fwd_act, bwd_act, 1u,
      NULL, SIM_BWD_ALL },
    { "HardSwish", 14, 1, 1, 1, 1, 0, 0, CODE_ACT, infer_hswish, fwd_act, bwd_act, 1u, NULL,
      SIM_BWD_ALL },
    { "Elu", 1, 1, 1, 1, 1, 0, 0, CODE_ACT, infer_elu, fwd_act, bwd_act, 1u, NULL, SIM_BWD_ALL },
    { "Softplus", 1, 1, 1, 1, 1, 0, 0, CODE_ACT, infer_softplus, fwd_act, bwd_act, 1u, NULL,
      SIM_BWD_ALL },
    { "Softmax", 1, 1, 1, 1, 1, 0, 0, 6144u, infer_softmax, fwd_softmax, bwd_softmax, 1u,
      NULL, SIM_BWD_OUT(0) },
    { "LogSoftmax", 1, 1, 1, 1, 1, 0, 0, 6144u, infer_logsoftmax, fwd_softmax, bwd_softmax,
      1u, NULL, SIM_BWD_OUT(0) },
    { "Dropout", 1, 1, 3, 1, 2, 0, SIM_OPF_NOFOLD, CODE_ACT, infer_dropout, fwd_dropout,
      bwd_dropout, 1u, NULL, SIM_BWD_IN(1) | SIM_BWD_IN(2) },
};

const int sim_ops_activation_count =
    (int)(sizeof(sim_ops_activation) / sizeof(sim_ops_activation[0]));

/* What the pieces of an Add + activation share. */
struct add_act_run {
    const float *a, *b;
    float *y;
    const struct sim_act *act;
};

/* y[i] = a[i] + b[i] for i in [lo, hi) (Add's same-shape arithmetic). */
SIM_HOT_FN(add_range,
           (const float *a, const float *b, float *y, int64_t lo, int64_t hi),
           (a, b, y, lo, hi))
{
    for (int64_t i = lo; i < hi; i++)
        y[i] = a[i] + b[i];
}

/* [lo, hi) in blocks of 2048 floats: the sum, then the activation while it is in L1. */
static void
add_act_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct add_act_run *r = ctx;

    for (int64_t i = lo; i < hi; i += 2048) {
        int64_t e = i + 2048 < hi ? i + 2048 : hi;
        add_range(r->a, r->b, r->y, i, e);
        sim_act_range(r->act, r->y, r->y, i, e);
    }
}

/* a, b, y: same shape; y = act(a + b), act the fused activation (k->act). What Add (no
 * broadcasting) followed by an activation computes, in one pass (fuse.c). */
static int
fwd_add_act(const struct sim_kern *k, struct sim_err *err)
{
    static const struct sim_act none = { SIM_ACT_NONE, 0.0f, 0.0f };
    struct add_act_run r = { k->in[0].data, k->in[1].data, k->out[0].data,
                             k->act != NULL ? k->act : &none };

    (void)err;
    sim_pool_for(k->out[0].numel, SIM_POOL_MAP_GRAIN, add_act_piece, &r);
    return 0;
}

/* The internal op of a fused Add -> activation (act.h). */
const struct sim_op sim_op_add_act = { "Add", 1, 2, 2, 1, 1, 0, 0, CODE_ACT, NULL,
                                       fwd_add_act, NULL, 3u, NULL };

/* The internal op of a fused Sigmoid -> Mul(x, sigmoid(x)) (act.h): inference only, so no
 * infer (the Sigmoid's stands) and no gradient rule. */
const struct sim_op sim_op_silu = { "SiLU", 1, 1, 1, 1, 1, 0, 0, CODE_ACT, NULL, fwd_silu,
                                    NULL, 1u, NULL };

bool
sim_activation_act(const struct sim_act_node *n, struct sim_act *act)
{
    if (!n->float_in || !n->one_out)
        return false;
    act->a = act->b = 0.0f;
    if (n->op->forward == fwd_relu) {
        act->kind = SIM_ACT_RELU;
    } else if (n->op->forward == fwd_sigmoid) {
        act->kind = SIM_ACT_SIGMOID;
    } else if (n->op->forward == fwd_leaky) {
        act->kind = SIM_ACT_LEAKY;
        act->a = ((const struct leaky_params *)n->params)->alpha;
    } else if (n->op->forward == fwd_act) {
        act_of_params(n->params, act);
    } else {
        return false;
    }
    return true;
}
