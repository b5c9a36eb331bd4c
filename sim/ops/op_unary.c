/*
 * op_unary.c — one-input elementwise ops, forward and backward: Neg, Abs, Sqrt, Exp, Log,
 * Erf, Floor, Ceil, Clip (bounds as attributes before opset 11, as optional inputs after),
 * Identity, Cast, and ai.graphcore Detach (PopART's: the value passes, no gradient flows
 * back; the package writes nn.Embedding's padding_idx with it) and ai.graphcore
 * BufferUpdate(buffer, value) -> value: writes value into the buffer, an initializer the
 * executable keeps per replica (a module buffer forward() changes in place), so the next
 * micro-batch reads it; the loader runs it after every other node (onnx_load.c) and the
 * compiler checks nothing needs the old value later (compile.c).
 *
 * Integer Neg and Abs wrap (computed unsigned); every backward is float only (an integer
 * tensor carries no gradient). Gradients follow PyTorch's formulas, including its choices
 * at kinks: d|x| = sign(x) (0 at 0), Clip passes the gradient where min <= x <= max;
 * Floor and Ceil have a zero gradient everywhere (as PyTorch's floor/ceil), so a path
 * through them (float `%` exports as Div, Floor, Mul, Sub) trains without refusal.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "act.h"
#include "ops.h"
#include "half.h"
#include "hot.h"
#include "pool.h"
#include "vmath.h"

enum { U_NEG, U_ABS, U_SQRT, U_EXP, U_LOG, U_ERF, U_FLOOR, U_CEIL };

struct unary_params {
    int op;
};

static int
infer_unary(struct sim_infer *c, int op)
{
    struct unary_params *p;
    int rc;
    static const int neg_types[] = { SIM_DTYPE_FLOAT, SIM_DTYPE_INT8, SIM_DTYPE_INT32,
                                     SIM_DTYPE_INT64, 0 };

    rc = sim_in_dtype(c, 0, op == U_NEG ? neg_types : op == U_ABS ? sim_dt_numeric
                                                                  : sim_dt_float);
    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->op = op;
    return sim_set_out(c, 0, c->in[0]->dtype, &c->in[0]->shape);
}

/* What the pieces of a float map share. */
struct map_run {
    int op;
    const float *in;
    float *out;
};

/* out[i] = op(in[i]) for i in [lo, hi). */
SIM_HOT_FN(unary_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct map_run *r = ctx;
    const float *in = r->in;
    float *out = r->out;

    switch (r->op) {
    case U_NEG: for (int64_t i = lo; i < hi; i++) out[i] = -in[i]; break;
    case U_ABS: for (int64_t i = lo; i < hi; i++) out[i] = fabsf(in[i]); break;
    case U_SQRT: for (int64_t i = lo; i < hi; i++) out[i] = sqrtf(in[i]); break;
    case U_EXP: for (int64_t i = lo; i < hi; i++) out[i] = expf(in[i]); break;
    case U_LOG: for (int64_t i = lo; i < hi; i++) out[i] = logf(in[i]); break;
    case U_FLOOR: for (int64_t i = lo; i < hi; i++) out[i] = floorf(in[i]); break;
    case U_CEIL: for (int64_t i = lo; i < hi; i++) out[i] = ceilf(in[i]); break;
    case U_ERF: {
        int64_t i = lo;
        for (; i + 8 <= hi; i += 8) {
            sim_v8f v = *(const sim_v8f_u *)(in + i);
            sim_v8erff(&v);
            *(sim_v8f_u *)(out + i) = v;
        }
        for (; i < hi; i++)
            out[i] = sim_verff(in[i]);
        break;
    }
    default: break;
    }
}

/* x, y: same shape and dtype */
static int
fwd_unary(const struct sim_kern *k, struct sim_err *err)
{
    const struct unary_params *p = k->params;
    const struct sim_tensor *x = &k->in[0];
    int64_t n = x->numel;

    (void)err;
    if (x->dtype == SIM_DTYPE_FLOAT) {
        struct map_run r = { p->op, x->data, k->out[0].data };
        sim_pool_for(n, SIM_POOL_MAP_GRAIN, unary_piece, &r);
        return 0;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t v = sim_get_i64(x->dtype, x->data, i);
        if (p->op == U_NEG || (p->op == U_ABS && v < 0))
            v = (int64_t)(0 - (uint64_t)v);
        sim_put_i64(x->dtype, k->out[0].data, i, v);
    }
    return 0;
}

static int infer_neg(struct sim_infer *c) { return infer_unary(c, U_NEG); }
static int infer_abs(struct sim_infer *c) { return infer_unary(c, U_ABS); }
static int infer_sqrt(struct sim_infer *c) { return infer_unary(c, U_SQRT); }
static int infer_exp(struct sim_infer *c) { return infer_unary(c, U_EXP); }
static int infer_log(struct sim_infer *c) { return infer_unary(c, U_LOG); }
static int infer_erf(struct sim_infer *c) { return infer_unary(c, U_ERF); }
static int infer_floor(struct sim_infer *c) { return infer_unary(c, U_FLOOR); }
static int infer_ceil(struct sim_infer *c) { return infer_unary(c, U_CEIL); }

/* ---- Clip ----------------------------------------------------------------------------- */

struct clip_params {
    bool attr_bounds;               /* opset < 11: bounds are attributes */
    double lo, hi;                  /* attribute bounds / dtype limits */
};

static void
dtype_limits(int dtype, double *lo, double *hi)
{
    switch (dtype) {
    case SIM_DTYPE_UINT8: *lo = 0; *hi = 255; break;
    case SIM_DTYPE_INT8: *lo = -128; *hi = 127; break;
    case SIM_DTYPE_INT32: *lo = -2147483648.0; *hi = 2147483647.0; break;
    case SIM_DTYPE_INT64: *lo = -9223372036854775808.0; *hi = 9223372036854775807.0; break;
    default: *lo = -INFINITY; *hi = INFINITY; break;
    }
}

static int
infer_clip(struct sim_infer *c)
{
    struct clip_params *p;
    int rc = sim_in_dtype(c, 0, sim_dt_numeric);

    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    dtype_limits(c->in[0]->dtype, &p->lo, &p->hi);
    if (c->version < 11) {
        float lo, hi;
        p->attr_bounds = true;
        rc = sim_ia_float(c, "min", -INFINITY, &lo);
        if (rc == 0)
            rc = sim_ia_float(c, "max", INFINITY, &hi);
        if (rc != 0)
            return rc;
        p->lo = lo;
        p->hi = hi;
    } else {
        for (int i = 1; i < 3; i++) {
            if (!sim_has_in(c, i))
                continue;
            if (c->in[i]->dtype != c->in[0]->dtype || c->in[i]->numel != 1)
                return sim_infer_fail(c, IPUOF_E_SHAPE, "input %d (%s) must be a single %s "
                                      "value", i, i == 1 ? "min" : "max",
                                      sim_dtype_name(c->in[0]->dtype));
        }
    }
    return sim_set_out(c, 0, c->in[0]->dtype, &c->in[0]->shape);
}

/* x, y: same shape; min, max: one element each or absent */
static int
fwd_clip(const struct sim_kern *k, struct sim_err *err)
{
    const struct clip_params *p = k->params;
    const struct sim_tensor *x = &k->in[0];
    double lo = p->lo, hi = p->hi;

    (void)err;
    if (!p->attr_bounds) {
        if (k->n_in > 1 && k->in[1].data != NULL)
            lo = sim_get_f64(x->dtype, k->in[1].data, 0);
        if (k->n_in > 2 && k->in[2].data != NULL)
            hi = sim_get_f64(x->dtype, k->in[2].data, 0);
    }
    if (x->dtype == SIM_DTYPE_FLOAT) {
        struct sim_act act = { SIM_ACT_CLIP, (float)lo, (float)hi };
        sim_act_map(&act, x->data, k->out[0].data, x->numel);
        return 0;
    }
    for (int64_t i = 0; i < x->numel; i++) {
        double v = sim_get_f64(x->dtype, x->data, i);
        v = v < lo ? lo : v;
        sim_put_f64(x->dtype, k->out[0].data, i, v > hi ? hi : v);
    }
    return 0;
}

bool
sim_clip_act(const struct sim_act_node *n, struct sim_act *act)
{
    const struct clip_params *p = n->params;
    double lo, hi;

    if (n->op->forward != fwd_clip || !n->one_out || p == NULL || !n->float_in)
        return false;
    lo = p->lo;
    hi = p->hi;
    /* the bounds fwd_clip would read: each present input must be a compile-time value */
    for (int i = 1; !p->attr_bounds && i < 3 && i < n->n_in; i++) {
        if (!n->has_in[i])
            continue;
        if (n->cdata[i] == NULL)
            return false;
        if (i == 1)
            lo = sim_get_f64(SIM_DTYPE_FLOAT, n->cdata[i], 0);
        else
            hi = sim_get_f64(SIM_DTYPE_FLOAT, n->cdata[i], 0);
    }
    act->kind = SIM_ACT_CLIP;
    act->a = (float)lo;
    act->b = (float)hi;
    return true;
}

/* ---- Identity and Cast ---------------------------------------------------------------- */

static int
infer_identity(struct sim_infer *c)
{
    if (!sim_has_in(c, 0))
        return sim_infer_fail(c, IPUOF_E_INVAL, "needs an input");
    return sim_set_out(c, 0, c->in[0]->dtype, &c->in[0]->shape);
}

/* x, y: same shape and dtype */
static int
fwd_copy(const struct sim_kern *k, struct sim_err *err)
{
    size_t n = (size_t)k->in[0].numel * sim_dtype_size(k->in[0].dtype);

    (void)err;
    if (n > 0 && k->out[0].data != k->in[0].data)
        memcpy(k->out[0].data, k->in[0].data, n);
    return 0;
}

static int
infer_cast(struct sim_infer *c)
{
    int64_t to;
    int rc = sim_ia_int(c, "to", 0, &to);

    if (rc != 0)
        return rc;
    if (sim_attr_find(c->mn, "to") == NULL)
        return sim_infer_fail(c, IPUOF_E_INVAL, "attribute 'to' is required");
    if (!sim_dtype_ok((int)to) || to != (int)to)
        return sim_infer_unsupported(c, "Cast to %s (supported: float, float16, uint8, int8, "
                                     "int32, int64, bool)", sim_onnx_dtype_name((int)to));
    return sim_set_out(c, 0, (int)to, &c->in[0]->shape);
}

/* x, y: same shape, y of the target dtype */
static int
fwd_cast(const struct sim_kern *k, struct sim_err *err)
{
    const struct sim_tensor *x = &k->in[0];
    struct sim_tensor *y = &k->out[0];

    if (x->dtype == y->dtype)
        return fwd_copy(k, err);
    if (x->dtype == SIM_DTYPE_FLOAT && y->dtype == SIM_DTYPE_FLOAT16) {
        sim_half_from_float_n(x->data, y->data, x->numel);     /* round to nearest even */
    } else if (x->dtype == SIM_DTYPE_FLOAT16 && y->dtype == SIM_DTYPE_FLOAT) {
        sim_half_to_float_n(x->data, y->data, x->numel);       /* exact */
    } else if (x->dtype == SIM_DTYPE_FLOAT16) {
        for (int64_t i = 0; i < x->numel; i++)                  /* truncates, as from float */
            sim_put_i64(y->dtype, y->data, i, sim_get_i64(x->dtype, x->data, i));
    } else if (x->dtype == SIM_DTYPE_FLOAT) {
        for (int64_t i = 0; i < x->numel; i++)
            sim_put_f64(y->dtype, y->data, i, ((const float *)x->data)[i]);
    } else if (y->dtype == SIM_DTYPE_FLOAT) {
        for (int64_t i = 0; i < x->numel; i++)
            ((float *)y->data)[i] = (float)sim_get_i64(x->dtype, x->data, i);
    } else {
        for (int64_t i = 0; i < x->numel; i++)
            sim_put_i64(y->dtype, y->data, i, sim_get_i64(x->dtype, x->data, i));
    }
    return 0;
}

/* ---- backward ------------------------------------------------------------------------- */

/*
 * What the pieces of a backward map share: x, y the forward's input and output, g the
 * output's gradient, dx the input's gradient (added to); lo, hi Clip's bounds.
 * Every piece does per element the float operations the scalar rule states, so splitting
 * over the pool or running eight lanes at once leaves every result bit for bit the same.
 */
struct grad_run {
    int op;
    const float *x, *y, *g;
    float *dx;
    float lo, hi;
};

/* dx[i] += d op(x)/dx * g[i] for i in [lo, hi) (Floor and Ceil: nothing). */
SIM_HOT_FN(unary_bwd_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct grad_run *r = ctx;
    const float *x = r->x, *y = r->y, *g = r->g;
    float *dx = r->dx;

    switch (r->op) {
    case U_NEG: for (int64_t i = lo; i < hi; i++) dx[i] -= g[i]; break;
    case U_ABS:
        for (int64_t i = lo; i < hi; i++)
            dx[i] += x[i] > 0.0f ? g[i] : x[i] < 0.0f ? -g[i] : 0.0f;
        break;
    case U_SQRT: for (int64_t i = lo; i < hi; i++) dx[i] += g[i] * 0.5f / y[i]; break;
    case U_EXP: for (int64_t i = lo; i < hi; i++) dx[i] += g[i] * y[i]; break;
    case U_LOG: for (int64_t i = lo; i < hi; i++) dx[i] += g[i] / x[i]; break;
    case U_ERF:
        /* d erf(x) = 2 / sqrt(pi) * exp(-x^2) */
        for (int64_t i = lo; i < hi; i++)
            dx[i] += g[i] * 1.12837916709551257f * expf(-x[i] * x[i]);
        break;
    case U_FLOOR: /* zero gradient: dx gets nothing */
    case U_CEIL:
    default:
        break;
    }
}

/* x, y, dy, dx: same shape (float) */
static int
bwd_unary(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
          struct sim_err *err)
{
    const struct unary_params *p = k->params;
    struct grad_run r = { p->op, k->in[0].data, k->out[0].data, dout[0].data, din[0].data,
                          0.0f, 0.0f };

    (void)err;
    if (r.g == NULL || r.dx == NULL || p->op == U_FLOOR || p->op == U_CEIL)
        return 0;
    sim_pool_for(k->in[0].numel, SIM_POOL_MAP_GRAIN, unary_bwd_piece, &r);
    return 0;
}

/* dx[i] += g[i] where lo <= x[i] <= hi, for i in [lo, hi) of the range: a select, not a
 * branch (whether an element is clipped is unpredictable), and dx untouched elsewhere. */
SIM_HOT_FN(clip_bwd_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct grad_run *r = ctx;
    const float *x = r->x, *g = r->g;
    float *dx = r->dx, flo = r->lo, fhi = r->hi;
    int64_t i = lo;

    for (; i + 8 <= hi; i += 8) {
        sim_v8f v = *(const sim_v8f_u *)(x + i), d = *(sim_v8f_u *)(dx + i);
        sim_v8f s = d + *(const sim_v8f_u *)(g + i);
        *(sim_v8f_u *)(dx + i) = sim_v8sel((v >= flo) & (v <= fhi), s, d);
    }
    for (; i < hi; i++)
        if (x[i] >= flo && x[i] <= fhi)
            dx[i] += g[i];
}

/* x, y, dy, dx: same shape; min, max: one element each or absent */
static int
bwd_clip(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
         struct sim_err *err)
{
    const struct clip_params *p = k->params;
    struct grad_run r = { 0, k->in[0].data, NULL, dout[0].data, din[0].data, (float)p->lo,
                          (float)p->hi };

    (void)err;
    if (r.g == NULL || r.dx == NULL)
        return 0;
    if (!p->attr_bounds) {
        if (k->n_in > 1 && k->in[1].data != NULL)
            r.lo = ((const float *)k->in[1].data)[0];
        if (k->n_in > 2 && k->in[2].data != NULL)
            r.hi = ((const float *)k->in[2].data)[0];
    }
    sim_pool_for(k->in[0].numel, SIM_POOL_MAP_GRAIN, clip_bwd_piece, &r);
    return 0;
}

/* dx[i] += g[i] for i in [lo, hi). */
SIM_HOT_FN(copy_bwd_piece, (void *ctx, int64_t lo, int64_t hi), (ctx, lo, hi))
{
    const struct grad_run *r = ctx;
    const float *g = r->g;
    float *dx = r->dx;

    for (int64_t i = lo; i < hi; i++)
        dx[i] += g[i];
}

/* Identity and Cast between floats (float16 too): x, y, dy, dx the same shape */
static int
bwd_copy(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
         struct sim_err *err)
{
    struct grad_run r = { 0, NULL, NULL, dout[0].data, din[0].data, 0.0f, 0.0f };

    (void)err;
    if (r.g != NULL && r.dx != NULL && din[0].dtype == SIM_DTYPE_FLOAT16 &&
        dout[0].dtype == SIM_DTYPE_FLOAT16) {
        uint16_t *d = din[0].data;          /* the sum in float, stored as half */
        const uint16_t *g = dout[0].data;
        for (int64_t i = 0; i < k->in[0].numel; i++)
            d[i] = sim_half_from_float(sim_half_to_float(d[i]) + sim_half_to_float(g[i]));
        return 0;
    }
    if (r.g == NULL || r.dx == NULL || din[0].dtype != SIM_DTYPE_FLOAT ||
        dout[0].dtype != SIM_DTYPE_FLOAT)
        return 0;
    sim_pool_for(k->in[0].numel, SIM_POOL_MAP_GRAIN, copy_bwd_piece, &r);
    return 0;
}

/*
 * Cast's gradient: between floats as Identity's; between float and float16 the gradient
 * changes type as the value did (float16 -> float: dx += round16(g); float -> float16:
 * dx = round16(dx + g), the sum computed in float and stored as half).
 * x, y, dy, dx the same shape.
 */
static int
bwd_cast(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
         struct sim_err *err)
{
    const void *g = dout[0].data;
    void *dx = din[0].data;
    int gt = dout[0].dtype, xt = din[0].dtype;

    if (g == NULL || dx == NULL)
        return 0;
    if (gt == SIM_DTYPE_FLOAT && xt == SIM_DTYPE_FLOAT)
        return bwd_copy(k, dout, din, err);
    if (gt == SIM_DTYPE_FLOAT16 && xt == SIM_DTYPE_FLOAT) {
        for (int64_t i = 0; i < din[0].numel; i++)
            ((float *)dx)[i] += sim_half_to_float(((const uint16_t *)g)[i]);
    } else if (gt == SIM_DTYPE_FLOAT && xt == SIM_DTYPE_FLOAT16) {
        uint16_t *d = dx;
        for (int64_t i = 0; i < din[0].numel; i++)
            d[i] = sim_half_from_float(sim_half_to_float(d[i]) + ((const float *)g)[i]);
    }
    return 0;
}

static int
infer_buffer_update(struct sim_infer *c)
{
    char s1[128], s2[128];

    if (!sim_has_in(c, 0) || !sim_has_in(c, 1))
        return sim_infer_fail(c, IPUOF_E_INVAL, "needs the buffer and its new value");
    if (!(c->weight_inputs & 1u))
        return sim_infer_fail(c, IPUOF_E_INVAL, "input 0 must be an initializer the "
                              "executable keeps (a module buffer), not a computed value");
    if (c->in[1]->dtype != c->in[0]->dtype || !sim_shape_eq(&c->in[1]->shape, &c->in[0]->shape))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "the new value (%s %s) must have the buffer's "
                              "dtype and shape (%s %s)", sim_dtype_name(c->in[1]->dtype),
                              sim_shape_fmt(&c->in[1]->shape, s1, sizeof(s1)),
                              sim_dtype_name(c->in[0]->dtype),
                              sim_shape_fmt(&c->in[0]->shape, s2, sizeof(s2)));
    return sim_set_out(c, 0, c->in[1]->dtype, &c->in[1]->shape);
}

/* buffer (in 0, the replica's stored copy), value (in 1), y: one shape and dtype.
 * The buffer is written in place: the executable owns its storage (SIM_WEIGHT_BUFFER). */
static int
fwd_buffer_update(const struct sim_kern *k, struct sim_err *err)
{
    size_t n = (size_t)k->in[1].numel * sim_dtype_size(k->in[1].dtype);

    (void)err;
    if (n == 0)
        return 0;
    if (k->out[0].data != k->in[1].data)
        memcpy(k->out[0].data, k->in[1].data, n);
    if (k->in[0].data != k->in[1].data)
        memcpy(k->in[0].data, k->in[1].data, n);
    return 0;
}

#define CODE_EW 3072u

const struct sim_op sim_ops_unary[] = {
    { "Neg", 1, 1, 1, 1, 1, 0, 0, CODE_EW, infer_neg, fwd_unary, bwd_unary, 1u, NULL,
      SIM_BWD_NONE },
    { "Abs", 1, 1, 1, 1, 1, 0, 0, CODE_EW, infer_abs, fwd_unary, bwd_unary, 1u, NULL,
      SIM_BWD_IN(0) },
    { "Sqrt", 1, 1, 1, 1, 1, 0, 0, CODE_EW, infer_sqrt, fwd_unary, bwd_unary, 1u, NULL,
      SIM_BWD_OUT(0) },
    { "Exp", 1, 1, 1, 1, 1, 0, 0, CODE_EW, infer_exp, fwd_unary, bwd_unary, 1u, NULL,
      SIM_BWD_OUT(0) },
    { "Log", 1, 1, 1, 1, 1, 0, 0, CODE_EW, infer_log, fwd_unary, bwd_unary, 1u, NULL,
      SIM_BWD_IN(0) },
    { "Erf", 9, 1, 1, 1, 1, 0, 0, CODE_EW, infer_erf, fwd_unary, bwd_unary, 1u, NULL,
      SIM_BWD_IN(0) },
    { "Floor", 1, 1, 1, 1, 1, 0, 0, CODE_EW, infer_floor, fwd_unary, bwd_unary, 1u, NULL,
      SIM_BWD_NONE },
    { "Ceil", 1, 1, 1, 1, 1, 0, 0, CODE_EW, infer_ceil, fwd_unary, bwd_unary, 1u, NULL,
      SIM_BWD_NONE },
    { "Clip", 1, 1, 3, 1, 1, 0, 0, CODE_EW, infer_clip, fwd_clip, bwd_clip, 1u, NULL, SIM_BWD_INS },
    { "Identity", 1, 1, 1, 1, 1, 0, SIM_OPF_VIEW, 1024u, infer_identity, fwd_copy, bwd_copy, 1u,
      NULL, SIM_BWD_NONE },
    { "Cast", 6, 1, 1, 1, 1, 0, 0, CODE_EW, infer_cast, fwd_cast, bwd_cast, 1u, NULL,
      SIM_BWD_NONE },
    /* Detach: no input is differentiable, so no gradient reaches x through it (as torch's
     * .detach()); a weight the loss reaches only through it is not trained */
    { "Detach", 1, 1, 1, 1, 1, 0, 0, 1024u, infer_identity, fwd_copy, NULL, 0u,
      "ai.graphcore" },
    /* BufferUpdate: a state change, not a function of its inputs: never folded, no
     * gradient (as torch's in-place change of a buffer under no_grad) */
    { "BufferUpdate", 1, 2, 2, 1, 1, 0, SIM_OPF_NOFOLD, 1024u, infer_buffer_update,
      fwd_buffer_update, NULL, 0u, "ai.graphcore" },
};

const int sim_ops_unary_count = (int)(sizeof(sim_ops_unary) / sizeof(sim_ops_unary[0]));
