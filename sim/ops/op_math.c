/*
 * op_math.c — the trigonometric and hyperbolic ops and Reciprocal, forward and backward
 * side by side, and the bitwise ops on integers.
 *
 *   Sin Cos Tan Asin Acos Atan (ai.onnx 7), Sinh Cosh Asinh Acosh Atanh (9), Reciprocal (6):
 *   float only, each element through the C library's float function (sinf, ..., 1 / x),
 *   so a result is within the library's error of the true value (glibc: 1-2 ulp), as
 *   PyTorch's kernels are; outside an op's domain (asin of 2, acosh of 0.5) the result is
 *   NaN, as in torch. Gradients are PyTorch's formulas (torch/csrc/autograd derivatives):
 *     sin: g cos x          cos: -g sin x          tan: g (1 + y^2)
 *     asin: g / sqrt(1 - x^2)    acos: -g / sqrt(1 - x^2)    atan: g / (1 + x^2)
 *     sinh: g cosh x        cosh: g sinh x
 *     asinh: g / sqrt(x^2 + 1)   acosh: g / sqrt((x - 1)(x + 1))   atanh: g / (1 - x^2)
 *     reciprocal: -g y^2
 *   ai.graphcore BitwiseAnd, BitwiseOr, BitwiseXor (two inputs, broadcast) and BitwiseNot
 *   on uint8, int8, int32, int64 and bool, as PopART has them (ai.onnx names them only from
 *   opset 18, past the 17 the loader takes; the package exports opset 14). Signed values
 *   are two's complement, as torch's. No gradient (integers carry none).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bcast.h"
#include "ops.h"
#include "pool.h"

enum { M_SIN, M_COS, M_TAN, M_ASIN, M_ACOS, M_ATAN, M_SINH, M_COSH, M_ASINH, M_ACOSH,
       M_ATANH, M_RECIP };

struct math_params {
    int op;
};

static int
infer_math(struct sim_infer *c, int op)
{
    struct math_params *p;
    int rc = sim_in_dtype(c, 0, sim_dt_float);

    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->op = op;
    return sim_set_out(c, 0, c->in[0]->dtype, &c->in[0]->shape);
}

static int infer_sin(struct sim_infer *c) { return infer_math(c, M_SIN); }
static int infer_cos(struct sim_infer *c) { return infer_math(c, M_COS); }
static int infer_tan(struct sim_infer *c) { return infer_math(c, M_TAN); }
static int infer_asin(struct sim_infer *c) { return infer_math(c, M_ASIN); }
static int infer_acos(struct sim_infer *c) { return infer_math(c, M_ACOS); }
static int infer_atan(struct sim_infer *c) { return infer_math(c, M_ATAN); }
static int infer_sinh(struct sim_infer *c) { return infer_math(c, M_SINH); }
static int infer_cosh(struct sim_infer *c) { return infer_math(c, M_COSH); }
static int infer_asinh(struct sim_infer *c) { return infer_math(c, M_ASINH); }
static int infer_acosh(struct sim_infer *c) { return infer_math(c, M_ACOSH); }
static int infer_atanh(struct sim_infer *c) { return infer_math(c, M_ATANH); }
static int infer_recip(struct sim_infer *c) { return infer_math(c, M_RECIP); }

/* One element of the forward. */
static inline float
math_one(int op, float x)
{
    switch (op) {
    case M_SIN: return sinf(x);
    case M_COS: return cosf(x);
    case M_TAN: return tanf(x);
    case M_ASIN: return asinf(x);
    case M_ACOS: return acosf(x);
    case M_ATAN: return atanf(x);
    case M_SINH: return sinhf(x);
    case M_COSH: return coshf(x);
    case M_ASINH: return asinhf(x);
    case M_ACOSH: return acoshf(x);
    case M_ATANH: return atanhf(x);
    default: return 1.0f / x;
    }
}

/* d op(x) / dx given x and y = op(x), PyTorch's formulas (see the header). */
static inline float
math_deriv(int op, float x, float y)
{
    switch (op) {
    case M_SIN: return cosf(x);
    case M_COS: return -sinf(x);
    case M_TAN: return 1.0f + y * y;
    case M_ASIN: return 1.0f / sqrtf(1.0f - x * x);
    case M_ACOS: return -1.0f / sqrtf(1.0f - x * x);
    case M_ATAN: return 1.0f / (1.0f + x * x);
    case M_SINH: return coshf(x);
    case M_COSH: return sinhf(x);
    case M_ASINH: return 1.0f / sqrtf(x * x + 1.0f);
    case M_ACOSH: return 1.0f / sqrtf((x - 1.0f) * (x + 1.0f));
    case M_ATANH: return 1.0f / (1.0f - x * x);
    default: return -(y * y);
    }
}

struct math_run {
    int op;
    const float *x, *y, *g;
    float *out;
};

/* out[i] = op(x[i]) for i in [lo, hi). */
static void
math_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct math_run *r = ctx;

    for (int64_t i = lo; i < hi; i++)
        r->out[i] = math_one(r->op, r->x[i]);
}

/* out[i] += op'(x[i]) g[i] for i in [lo, hi). */
static void
math_bwd_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct math_run *r = ctx;

    for (int64_t i = lo; i < hi; i++)
        r->out[i] += r->g[i] * math_deriv(r->op, r->x[i], r->y[i]);
}

/* x, y: same shape (float) */
static int
fwd_math(const struct sim_kern *k, struct sim_err *err)
{
    const struct math_params *p = k->params;
    struct math_run r = { p->op, k->in[0].data, NULL, NULL, k->out[0].data };

    (void)err;
    sim_pool_for(k->in[0].numel, SIM_POOL_MAP_GRAIN, math_piece, &r);
    return 0;
}

/* x, y, dy, dx: same shape (float) */
static int
bwd_math(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
         struct sim_err *err)
{
    const struct math_params *p = k->params;
    struct math_run r = { p->op, k->in[0].data, k->out[0].data, dout[0].data, din[0].data };

    (void)err;
    if (r.g == NULL || r.out == NULL)
        return 0;
    sim_pool_for(k->in[0].numel, SIM_POOL_MAP_GRAIN, math_bwd_piece, &r);
    return 0;
}

/* ---- bitwise ops ------------------------------------------------------------------------ */

enum { B_AND, B_OR, B_XOR, B_NOT };

static const int int_types[] = { SIM_DTYPE_UINT8, SIM_DTYPE_INT8, SIM_DTYPE_INT32,
                                 SIM_DTYPE_INT64, SIM_DTYPE_BOOL, 0 };

struct bitwise_params {
    int op;
    struct sim_bcast bc;        /* And, Or, Xor */
};

static int
infer_bitwise(struct sim_infer *c, int op)
{
    const struct sim_shape *sh[2];
    struct bitwise_params *p;
    struct sim_shape out;
    char s1[128], s2[128];
    int rc = sim_in_dtype(c, 0, int_types);

    if (rc != 0)
        return rc;
    p = sim_params(c, sizeof(*p));
    if (p == NULL)
        return IPUOF_E_NOMEM;
    p->op = op;
    if (op == B_NOT)
        return sim_set_out(c, 0, c->in[0]->dtype, &c->in[0]->shape);
    if (c->in[1]->dtype != c->in[0]->dtype)
        return sim_infer_fail(c, IPUOF_E_DTYPE, "inputs have dtypes %s and %s; both must "
                              "be the same integer dtype", sim_dtype_name(c->in[0]->dtype),
                              sim_dtype_name(c->in[1]->dtype));
    sh[0] = &c->in[0]->shape;
    sh[1] = &c->in[1]->shape;
    if (!sim_bcast_shapes(2, sh, &out))
        return sim_infer_fail(c, IPUOF_E_SHAPE, "input shapes %s and %s do not broadcast",
                              sim_shape_fmt(sh[0], s1, sizeof(s1)),
                              sim_shape_fmt(sh[1], s2, sizeof(s2)));
    sim_bcast_plan(&p->bc, 2, sh, &out);
    return sim_set_out(c, 0, c->in[0]->dtype, &out);
}

static int infer_band(struct sim_infer *c) { return infer_bitwise(c, B_AND); }
static int infer_bor(struct sim_infer *c) { return infer_bitwise(c, B_OR); }
static int infer_bxor(struct sim_infer *c) { return infer_bitwise(c, B_XOR); }
static int infer_bnot(struct sim_infer *c) { return infer_bitwise(c, B_NOT); }

/* a, b: broadcast to y (one integer dtype); Not: x, y the same shape */
static int
fwd_bitwise(const struct sim_kern *k, struct sim_err *err)
{
    const struct bitwise_params *p = k->params;
    const struct sim_bcast *bc = &p->bc;
    int64_t idx[SIM_MAX_RANK] = { 0 }, off[SIM_BCAST_MAX] = { 0 };
    const void *a = k->in[0].data;
    void *y = k->out[0].data;
    int dt = k->in[0].dtype;

    (void)err;
    if (p->op == B_NOT) {
        for (int64_t i = 0; i < k->out[0].numel; i++) {
            int64_t v = sim_get_i64(dt, a, i);
            sim_put_i64(dt, y, i, dt == SIM_DTYPE_BOOL ? !v : (int64_t)~(uint64_t)v);
        }
        return 0;
    }
    for (int64_t r = 0; r < bc->rows; r++, sim_bcast_next(bc, idx, off)) {
        for (int64_t i = 0; i < bc->n; i++) {
            uint64_t u = (uint64_t)sim_get_i64(dt, a, off[0] + i * bc->inner[0]);
            uint64_t v = (uint64_t)sim_get_i64(dt, k->in[1].data, off[1] + i * bc->inner[1]);
            uint64_t w = p->op == B_AND ? (u & v) : p->op == B_OR ? (u | v) : (u ^ v);
            sim_put_i64(dt, y, r * bc->n + i, (int64_t)w);
        }
    }
    return 0;
}

#define CODE_MATH 3072u
#define GC "ai.graphcore"

const struct sim_op sim_ops_math[] = {
    { "Sin", 7, 1, 1, 1, 1, 0, 0, CODE_MATH, infer_sin, fwd_math, bwd_math, 1u, NULL, SIM_BWD_ALL },
    { "Cos", 7, 1, 1, 1, 1, 0, 0, CODE_MATH, infer_cos, fwd_math, bwd_math, 1u, NULL, SIM_BWD_ALL },
    { "Tan", 7, 1, 1, 1, 1, 0, 0, CODE_MATH, infer_tan, fwd_math, bwd_math, 1u, NULL, SIM_BWD_ALL },
    { "Asin", 7, 1, 1, 1, 1, 0, 0, CODE_MATH, infer_asin, fwd_math, bwd_math, 1u, NULL,
      SIM_BWD_ALL },
    { "Acos", 7, 1, 1, 1, 1, 0, 0, CODE_MATH, infer_acos, fwd_math, bwd_math, 1u, NULL,
      SIM_BWD_ALL },
    { "Atan", 7, 1, 1, 1, 1, 0, 0, CODE_MATH, infer_atan, fwd_math, bwd_math, 1u, NULL,
      SIM_BWD_ALL },
    { "Sinh", 9, 1, 1, 1, 1, 0, 0, CODE_MATH, infer_sinh, fwd_math, bwd_math, 1u, NULL,
      SIM_BWD_ALL },
    { "Cosh", 9, 1, 1, 1, 1, 0, 0, CODE_MATH, infer_cosh, fwd_math, bwd_math, 1u, NULL,
      SIM_BWD_ALL },
    { "Asinh", 9, 1, 1, 1, 1, 0, 0, CODE_MATH, infer_asinh, fwd_math, bwd_math, 1u, NULL,
      SIM_BWD_ALL },
    { "Acosh", 9, 1, 1, 1, 1, 0, 0, CODE_MATH, infer_acosh, fwd_math, bwd_math, 1u, NULL,
      SIM_BWD_ALL },
    { "Atanh", 9, 1, 1, 1, 1, 0, 0, CODE_MATH, infer_atanh, fwd_math, bwd_math, 1u, NULL,
      SIM_BWD_ALL },
    { "Reciprocal", 6, 1, 1, 1, 1, 0, 0, CODE_MATH, infer_recip, fwd_math, bwd_math, 1u, NULL,
      SIM_BWD_ALL },
    { "BitwiseAnd", 1, 2, 2, 1, 1, 0, 0, CODE_MATH, infer_band, fwd_bitwise, NULL, 0u, GC },
    { "BitwiseOr", 1, 2, 2, 1, 1, 0, 0, CODE_MATH, infer_bor, fwd_bitwise, NULL, 0u, GC },
    { "BitwiseXor", 1, 2, 2, 1, 1, 0, 0, CODE_MATH, infer_bxor, fwd_bitwise, NULL, 0u, GC },
    { "BitwiseNot", 1, 1, 1, 1, 1, 0, 0, CODE_MATH, infer_bnot, fwd_bitwise, NULL, 0u, GC },
};

const int sim_ops_math_count = (int)(sizeof(sim_ops_math) / sizeof(sim_ops_math[0]));
