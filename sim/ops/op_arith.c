/*
 * op_arith.c — the element-wise ops PyTorch exports beyond the arithmetic of
 * op_elementwise.c, forward and backward side by side:
 *   Max, Min     (opset 8+: 1 to 64 inputs with numpy broadcasting; float and the integer
 *                 dtypes; torch.maximum / minimum / clamp with tensor bounds). A NaN input
 *                 gives NaN, as torch.maximum does. Backward: the output's gradient goes
 *                 to the inputs equal to the result, split evenly among tied ones (PyTorch
 *                 gives each of two tied inputs half);
 *   PRelu        (opset 7+: the slope broadcasts to X; float, and int32 / int64 from
 *                 opset 16) y = x < 0 ? slope x : x. Backward as PyTorch's:
 *                 dx += x > 0 ? dy : slope dy, dslope += x > 0 ? 0 : x dy, summed over the
 *                 dims the slope is broadcast along;
 *   Selu         y = gamma (x > 0 ? x : alpha (e^x - 1)), dx += gamma dy (x > 0 ? 1 : alpha e^x);
 *   Celu         y = max(0, x) + min(0, alpha (e^(x/alpha) - 1)),
 *                dx += dy (x > 0 ? 1 : e^(x/alpha));
 *   Sign         -1, 0 or 1 (NaN stays NaN), any numeric dtype; zero gradient, as PyTorch;
 *   Round        to the nearest integer, halves to even (rint under the default rounding
 *                mode, as torch.round and numpy's round); zero gradient, as PyTorch;
 *   IsNaN        float -> bool (no gradient: the result is not float).
 * Does not: float16, double or the unsigned dtypes wider than 8 bits (the simulator has no
 * such tensors).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bcast.h"
#include "ops.h"

#define MAXMIN_INPUTS 64

enum { K_MAX, K_MIN };

struct mm_params {
    int kind, dtype, n_in;
    int64_t numel;                      /* of the output */
    struct sim_bcast bc[];              /* n_in: input i walked against the output */
};

static int
infer_maxmin(struct sim_infer *c, int kind)
{
    const struct sim_shape *sh[2];
    struct sim_shape o;
    struct mm_params *p;
    char s1[128], s2[128];
    int rc;

    if (c->n_in > MAXMIN_INPUTS)
        return sim_infer_unsupported(c, "%d inputs (at most %d)", c->n_in, MAXMIN_INPUTS);
    for (int i = 0; i < c->n_in; i++) {
        if (!sim_has_in(c, i))
            return sim_infer_fail(c, IPUOF_E_INVAL, "input %d is omitted; every input of "
                                  "Max and Min must be given", i);
        rc = sim_in_dtype(c, i, sim_dt_numeric);
        if (rc != 0)
            return rc;
        if (c->in[i]->dtype != c->in[0]->dtype)
            return sim_infer_fail(c, IPUOF_E_DTYPE, "inputs have different dtypes (%s and "
                                  "%s)", sim_dtype_name(c->in[0]->dtype),
                                  sim_dtype_name(c->in[i]->dtype));
    }
    o = c->in[0]->shape;
    for (int i = 1; i < c->n_in; i++) {
        struct sim_shape t;
        sh[0] = &o;
        sh[1] = &c->in[i]->shape;
        if (!sim_bcast_shapes(2, sh, &t))
            return sim_infer_fail(c, IPUOF_E_SHAPE, "input %d %s does not broadcast with %s",
                                  i, sim_shape_fmt(sh[1], s1, sizeof(s1)),
                                  sim_shape_fmt(&o, s2, sizeof(s2)));
        o = t;
    }
    p = sim_params(c, sizeof(*p) + (size_t)c->n_in * sizeof(p->bc[0]));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->kind = kind;
    p->dtype = c->in[0]->dtype;
    p->n_in = c->n_in;
    rc = sim_set_out(c, 0, p->dtype, &o);
    if (rc != 0)
        return rc;
    p->numel = c->out[0].numel;
    for (int i = 0; i < c->n_in; i++) {
        sh[0] = &c->in[i]->shape;
        sim_bcast_plan(&p->bc[i], 1, sh, &o);
    }
    if (c->training && p->dtype == SIM_DTYPE_FLOAT)
        c->bwd_scratch_bytes = (size_t)p->numel * sizeof(float);
    return 0;
}

static int infer_max(struct sim_infer *c) { return infer_maxmin(c, K_MAX); }
static int infer_min(struct sim_infer *c) { return infer_maxmin(c, K_MIN); }

/* Whether v replaces the running result r: v is NaN or beyond r. */
static inline bool
takes_f(int kind, float v, float r)
{
    return isnan(v) || (kind == K_MAX ? v > r : v < r);
}

/* inputs: shapes that broadcast to y's; y: the element-wise max or min */
static int
fwd_maxmin(const struct sim_kern *k, struct sim_err *err)
{
    const struct mm_params *p = k->params;
    void *y = k->out[0].data;

    (void)err;
    for (int j = 0; j < p->n_in; j++) {
        const struct sim_bcast *bc = &p->bc[j];
        const void *a = k->in[j].data;
        int64_t idx[SIM_MAX_RANK] = { 0 }, off[SIM_BCAST_MAX] = { 0 }, n = bc->n;
        for (int64_t r = 0; r < bc->rows; r++, sim_bcast_next(bc, idx, off))
            for (int64_t i = 0; i < n; i++) {
                int64_t o = r * n + i, ia = off[0] + i * bc->inner[0];
                if (p->dtype == SIM_DTYPE_FLOAT) {
                    float v = ((const float *)a)[ia], *yf = y;
                    if (j == 0 || (!isnan(yf[o]) && takes_f(p->kind, v, yf[o])))
                        yf[o] = v;
                } else {
                    int64_t v = sim_get_i64(p->dtype, a, ia), cur;
                    if (j == 0) {
                        sim_put_i64(p->dtype, y, o, v);
                        continue;
                    }
                    cur = sim_get_i64(p->dtype, y, o);
                    if (p->kind == K_MAX ? v > cur : v < cur)
                        sim_put_i64(p->dtype, y, o, v);
                }
            }
    }
    return 0;
}

/*
 * dinputs: shapes of the inputs; dy, y: the output's. Pass 1 counts in scratch (one float
 * per output element) the inputs equal to y; pass 2 gives each of them dy / count, summed
 * over the dims the input is broadcast along.
 */
static int
bwd_maxmin(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
           struct sim_err *err)
{
    const struct mm_params *p = k->params;
    const float *y = k->out[0].data, *g = dout[0].data;
    float *cnt = k->scratch;

    (void)err;
    if (g == NULL || p->numel == 0) /* an empty output has no scratch (cnt is NULL) */
        return 0;
    memset(cnt, 0, (size_t)p->numel * sizeof(float));
    for (int pass = 0; pass < 2; pass++)
        for (int j = 0; j < p->n_in; j++) {
            const struct sim_bcast *bc = &p->bc[j];
            const float *a = k->in[j].data;
            float *da = din[j].data;
            int64_t idx[SIM_MAX_RANK] = { 0 }, off[SIM_BCAST_MAX] = { 0 }, n = bc->n;
            if (pass == 1 && da == NULL)
                continue;
            for (int64_t r = 0; r < bc->rows; r++, sim_bcast_next(bc, idx, off))
                for (int64_t i = 0; i < n; i++) {
                    int64_t o = r * n + i, ia = off[0] + i * bc->inner[0];
                    if (a[ia] != y[o])
                        continue;
                    if (pass == 0)
                        cnt[o] += 1.0f;
                    else
                        da[ia] += g[o] / cnt[o];
                }
        }
    return 0;
}

/* ---- PRelu ------------------------------------------------------------------------------ */

struct prelu_params {
    int dtype;
    struct sim_bcast bc;            /* x and slope walked against y (x's shape) */
};

static const int dt_prelu[] = { SIM_DTYPE_FLOAT, SIM_DTYPE_INT32, SIM_DTYPE_INT64, 0 };

static int
infer_prelu(struct sim_infer *c)
{
    const struct sim_shape *sh[2] = { &c->in[0]->shape, &c->in[1]->shape };
    struct prelu_params *p;
    struct sim_shape o;
    char s1[128], s2[128];
    int rc = sim_in_dtype(c, 0, dt_prelu);

    if (rc == 0)
        rc = sim_in_dtype(c, 1, dt_prelu);
    if (rc != 0)
        return rc;
    if (c->in[0]->dtype != c->in[1]->dtype)
        return sim_infer_fail(c, IPUOF_E_DTYPE, "X is %s but slope is %s; they must match",
                              sim_dtype_name(c->in[0]->dtype), sim_dtype_name(c->in[1]->dtype));
    if (c->in[0]->dtype != SIM_DTYPE_FLOAT && c->version < 16)
        return sim_infer_fail(c, IPUOF_E_DTYPE, "%s PRelu needs opset 16 (opset %d allows "
                              "float only)", sim_dtype_name(c->in[0]->dtype), c->version);
    if (!sim_bcast_shapes(2, sh, &o) || !sim_shape_eq(&o, sh[0]))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "slope %s does not broadcast to X %s (the "
                              "slope must broadcast unidirectionally to X)",
                              sim_shape_fmt(sh[1], s1, sizeof(s1)),
                              sim_shape_fmt(sh[0], s2, sizeof(s2)));
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->dtype = c->in[0]->dtype;
    sim_bcast_plan(&p->bc, 2, sh, &o);
    return sim_set_out(c, 0, p->dtype, &o);
}

/* x, y: same shape; slope: broadcasts to it */
static int
fwd_prelu(const struct sim_kern *k, struct sim_err *err)
{
    const struct prelu_params *p = k->params;
    const struct sim_bcast *bc = &p->bc;
    int64_t idx[SIM_MAX_RANK] = { 0 }, off[SIM_BCAST_MAX] = { 0 }, n = bc->n;
    const void *x = k->in[0].data, *s = k->in[1].data;
    void *y = k->out[0].data;

    (void)err;
    for (int64_t r = 0; r < bc->rows; r++, sim_bcast_next(bc, idx, off))
        for (int64_t i = 0; i < n; i++) {
            int64_t o = r * n + i, ix = off[0] + i * bc->inner[0], is = off[1] + i * bc->inner[1];
            if (p->dtype == SIM_DTYPE_FLOAT) {
                float v = ((const float *)x)[ix];
                ((float *)y)[o] = v < 0.0f ? ((const float *)s)[is] * v : v;
            } else {
                int64_t v = sim_get_i64(p->dtype, x, ix);
                /* wrap-around multiply, as a C int would, without signed overflow */
                sim_put_i64(p->dtype, y, o, v < 0 ? (int64_t)((uint64_t)sim_get_i64(p->dtype,
                                                                s, is) * (uint64_t)v) : v);
            }
        }
    return 0;
}

/* dx += x > 0 ? dy : slope dy; dslope += x > 0 ? 0 : x dy (PyTorch's prelu backward) */
static int
bwd_prelu(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
          struct sim_err *err)
{
    const struct prelu_params *p = k->params;
    const struct sim_bcast *bc = &p->bc;
    int64_t idx[SIM_MAX_RANK] = { 0 }, off[SIM_BCAST_MAX] = { 0 }, n = bc->n;
    const float *x = k->in[0].data, *s = k->in[1].data, *g = dout[0].data;
    float *dx = din[0].data, *ds = din[1].data;

    (void)err;
    if (g == NULL)
        return 0;
    for (int64_t r = 0; r < bc->rows; r++, sim_bcast_next(bc, idx, off))
        for (int64_t i = 0; i < n; i++) {
            int64_t o = r * n + i, ix = off[0] + i * bc->inner[0], is = off[1] + i * bc->inner[1];
            bool pos = x[ix] > 0.0f;
            if (dx != NULL)
                dx[ix] += pos ? g[o] : s[is] * g[o];
            if (ds != NULL && !pos)
                ds[is] += x[ix] * g[o];
        }
    return 0;
}

/* ---- Selu, Celu, Sign, Round, IsNaN ------------------------------------------------------ */

enum { U_SELU, U_CELU, U_SIGN, U_ROUND, U_ISNAN };

struct un_params {
    int kind, dtype;
    float alpha, gamma;
};

static int
infer_un(struct sim_infer *c, int kind, const int *allowed, float alpha, float gamma)
{
    struct un_params *p;
    int rc = sim_in_dtype(c, 0, allowed);

    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->kind = kind;
    p->dtype = c->in[0]->dtype;
    p->alpha = alpha;
    p->gamma = gamma;
    if (kind == U_SELU || kind == U_CELU)
        rc = sim_ia_float(c, "alpha", alpha, &p->alpha);
    if (rc == 0 && kind == U_SELU)
        rc = sim_ia_float(c, "gamma", gamma, &p->gamma);
    if (rc != 0)
        return rc;
    if (kind == U_CELU && !(p->alpha != 0.0f))
        return sim_infer_fail(c, IPUOF_E_INVAL, "alpha must not be 0 (Celu divides by it)");
    return sim_set_out(c, 0, kind == U_ISNAN ? SIM_DTYPE_BOOL : p->dtype, &c->in[0]->shape);
}

/* ONNX's defaults, the constants of the SELU paper as float32. */
static int infer_selu(struct sim_infer *c)
{
    return infer_un(c, U_SELU, sim_dt_float, 1.67326319217681884765625f,
                    1.05070102214813232421875f);
}
static int infer_celu(struct sim_infer *c) { return infer_un(c, U_CELU, sim_dt_float, 1.0f, 0); }
static int infer_sign(struct sim_infer *c) { return infer_un(c, U_SIGN, sim_dt_numeric, 0, 0); }
static int infer_round(struct sim_infer *c) { return infer_un(c, U_ROUND, sim_dt_float, 0, 0); }
static int infer_isnan(struct sim_infer *c) { return infer_un(c, U_ISNAN, sim_dt_float, 0, 0); }

/* x, y: same shape */
static int
fwd_un(const struct sim_kern *k, struct sim_err *err)
{
    const struct un_params *p = k->params;
    const float *x = k->in[0].data;
    float *y = k->out[0].data;
    int64_t n = k->in[0].numel;

    (void)err;
    switch (p->kind) {
    case U_SELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? p->gamma * x[i] : p->gamma * p->alpha * expm1f(x[i]);
        break;
    case U_CELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? x[i] : p->alpha * expm1f(x[i] / p->alpha);
        break;
    case U_ROUND:
        for (int64_t i = 0; i < n; i++)
            y[i] = rintf(x[i]);
        break;
    case U_ISNAN:
        for (int64_t i = 0; i < n; i++)
            ((uint8_t *)k->out[0].data)[i] = isnan(x[i]) != 0;
        break;
    default:    /* U_SIGN */
        if (p->dtype == SIM_DTYPE_FLOAT) {
            for (int64_t i = 0; i < n; i++)
                y[i] = x[i] > 0.0f ? 1.0f : x[i] < 0.0f ? -1.0f : x[i];  /* 0, -0, NaN */
            break;
        }
        for (int64_t i = 0; i < n; i++) {
            int64_t v = sim_get_i64(p->dtype, k->in[0].data, i);
            sim_put_i64(p->dtype, k->out[0].data, i, (v > 0) - (v < 0));
        }
        break;
    }
    return 0;
}

/* dx += dy dy/dx: Selu and Celu as in the header; Sign and Round add nothing (zero). */
static int
bwd_un(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
       struct sim_err *err)
{
    const struct un_params *p = k->params;
    const float *x = k->in[0].data, *g = dout[0].data;
    float *dx = din[0].data;
    int64_t n = k->in[0].numel;

    (void)err;
    if (g == NULL || dx == NULL)
        return 0;
    if (p->kind == U_SELU)
        for (int64_t i = 0; i < n; i++)
            dx[i] += x[i] > 0.0f ? p->gamma * g[i] : g[i] * p->gamma * p->alpha * expf(x[i]);
    else if (p->kind == U_CELU)
        for (int64_t i = 0; i < n; i++)
            dx[i] += x[i] > 0.0f ? g[i] : g[i] * expf(x[i] / p->alpha);
    return 0;
}

#define CODE_ARITH 3072u

const struct sim_op sim_ops_arith[] = {
    { "Max", 8, 1, -1, 1, 1, 0, 0, CODE_ARITH, infer_max, fwd_maxmin, bwd_maxmin, ~0u, NULL,
      SIM_BWD_ALL },
    { "Min", 8, 1, -1, 1, 1, 0, 0, CODE_ARITH, infer_min, fwd_maxmin, bwd_maxmin, ~0u, NULL,
      SIM_BWD_ALL },
    { "PRelu", 7, 2, 2, 1, 1, 0, 0, CODE_ARITH, infer_prelu, fwd_prelu, bwd_prelu, 3u, NULL,
      SIM_BWD_ALL },
    { "Selu", 6, 1, 1, 1, 1, 0, 0, CODE_ARITH, infer_selu, fwd_un, bwd_un, 1u, NULL, SIM_BWD_ALL },
    { "Celu", 12, 1, 1, 1, 1, 0, 0, CODE_ARITH, infer_celu, fwd_un, bwd_un, 1u, NULL, SIM_BWD_ALL },
    { "Sign", 9, 1, 1, 1, 1, 0, 0, CODE_ARITH, infer_sign, fwd_un, bwd_un, 1u, NULL, SIM_BWD_ALL },
    { "Round", 11, 1, 1, 1, 1, 0, 0, CODE_ARITH, infer_round, fwd_un, bwd_un, 1u, NULL,
      SIM_BWD_ALL },
    { "IsNaN", 9, 1, 1, 1, 1, 0, 0, CODE_ARITH, infer_isnan, fwd_un, NULL, 0u, NULL },
};

const int sim_ops_arith_count = (int)(sizeof(sim_ops_arith) / sizeof(sim_ops_arith[0]));
