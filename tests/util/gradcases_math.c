/*
 * gradcases_math.c — gradient-check cases of tests/unit/test_sim_train_grad.c: elementwise
 * arithmetic and activations, MatMul and Gemm, the losses, the reductions, and the ops that
 * compare or round (Max, Min, Sign, Round, Floor, Ceil, Mod, Where).
 * Each builder adds nodes computing "y" from weights declared with gc_param (gradcases.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "gradcases.h"
#include "onnx_build.h"

static void
b_binary(struct sim_ob *b, const char *op, enum dist db)
{
    gc_param(b, "a", 3, DIMS(2, 3, 4), D_ANY);
    gc_param(b, "b", 2, DIMS(3, 1), db);
    sim_ob_node(b, op, "n", "a,b", "y");
}

static void g_add(struct sim_ob *b) { b_binary(b, "Add", D_ANY); }

static void g_sub(struct sim_ob *b) { b_binary(b, "Sub", D_ANY); }

static void g_mul(struct sim_ob *b) { b_binary(b, "Mul", D_ANY); }

static void g_div(struct sim_ob *b) { b_binary(b, "Div", D_POS); }

static void
g_pow(struct sim_ob *b)
{
    gc_param(b, "a", 2, DIMS(3, 4), D_POS);
    gc_param(b, "b", 1, DIMS(4), D_ANY);
    sim_ob_node(b, "Pow", "n", "a,b", "y");
}

static void
b_unary(struct sim_ob *b, const char *op, enum dist dist)
{
    gc_param(b, "x", 2, DIMS(3, 5), dist);
    sim_ob_node(b, op, "n", "x", "y");
}

static void g_neg(struct sim_ob *b) { b_unary(b, "Neg", D_ANY); }

static void g_abs(struct sim_ob *b) { b_unary(b, "Abs", D_AWAY); }

static void g_sqrt(struct sim_ob *b) { b_unary(b, "Sqrt", D_POS); }

static void g_exp(struct sim_ob *b) { b_unary(b, "Exp", D_ANY); }

static void g_log(struct sim_ob *b) { b_unary(b, "Log", D_POS); }

static void g_erf(struct sim_ob *b) { b_unary(b, "Erf", D_ANY); }

/* A float scalar Constant node, as torch.onnx.export writes one. */
static void
b_scalar(struct sim_ob *b, const char *name, float v)
{
    sim_ob_node(b, "Constant", name, "", name);
    sim_ob_attr_tensor(b, "value", SIM_DTYPE_FLOAT, 0, NULL, &v);
}

/* Exact-erf GELU as exported (Div sqrt 2, Erf, Add 1, Mul x, Mul 0.5), which fuse.c makes
 * one Gelu node of in training (its own backward, reading x alone), over x in [-4, 4]. */
static void
g_gelu(struct sim_ob *b)
{
    float v[15];

    for (int i = 0; i < 15; i++)    /* a ramp in [-4, 4], shuffled by a stride of 7 */
        v[(i * 7) % 15] = -4.0f + 8.0f * (float)i / 14.0f + 0.01f;
    gc_param_vals(b, "x", 2, DIMS(3, 5), v);
    b_scalar(b, "sqrt2", 1.41421353816986083984375f);
    b_scalar(b, "one", 1.0f);
    b_scalar(b, "half", 0.5f);
    sim_ob_node(b, "Div", "gdiv", "x,sqrt2", "t");
    sim_ob_node(b, "Erf", "gerf", "t", "e");
    sim_ob_node(b, "Add", "gadd", "e,one", "a");
    sim_ob_node(b, "Mul", "gmul", "x,a", "h");
    sim_ob_node(b, "Mul", "ghalf", "h,half", "y");
}

/* x with the 15 given values (for ops defined on part of the line only). */
static void
b_unary_vals(struct sim_ob *b, const char *op, float lo, float hi)
{
    float v[15];

    for (int i = 0; i < 15; i++)    /* a ramp in [lo, hi], shuffled by a stride of 7 */
        v[(i * 7) % 15] = lo + (hi - lo) * (float)i / 14.0f;
    gc_param_vals(b, "x", 2, DIMS(3, 5), v);
    sim_ob_node(b, op, "n", "x", "y");
}

static void g_sin(struct sim_ob *b) { b_unary(b, "Sin", D_ANY); }
static void g_cos(struct sim_ob *b) { b_unary(b, "Cos", D_ANY); }
static void g_tan(struct sim_ob *b) { b_unary(b, "Tan", D_ANY); }
static void g_asin(struct sim_ob *b) { b_unary_vals(b, "Asin", -0.8f, 0.8f); }
static void g_acos(struct sim_ob *b) { b_unary_vals(b, "Acos", -0.8f, 0.8f); }
static void g_atan(struct sim_ob *b) { b_unary(b, "Atan", D_ANY); }
static void g_sinh(struct sim_ob *b) { b_unary(b, "Sinh", D_ANY); }
static void g_cosh(struct sim_ob *b) { b_unary(b, "Cosh", D_ANY); }
static void g_asinh(struct sim_ob *b) { b_unary(b, "Asinh", D_ANY); }
static void g_acosh(struct sim_ob *b) { b_unary_vals(b, "Acosh", 1.2f, 3.0f); }
static void g_atanh(struct sim_ob *b) { b_unary_vals(b, "Atanh", -0.8f, 0.8f); }
static void g_recip(struct sim_ob *b) { b_unary(b, "Reciprocal", D_POS); }

static void g_relu(struct sim_ob *b) { b_unary(b, "Relu", D_AWAY); }

static void g_sigmoid(struct sim_ob *b) { b_unary(b, "Sigmoid", D_ANY); }

static void g_tanh(struct sim_ob *b) { b_unary(b, "Tanh", D_ANY); }

static void g_identity(struct sim_ob *b) { b_unary(b, "Identity", D_ANY); }

static void
g_leaky(struct sim_ob *b)
{
    b_unary(b, "LeakyRelu", D_AWAY);
    sim_ob_attr_float(b, "alpha", 0.2f);
}

static void
g_cast(struct sim_ob *b)
{
    b_unary(b, "Cast", D_ANY);
    sim_ob_attr_int(b, "to", F32);
}

static void
g_clip(struct sim_ob *b)
{
    const float lo = -0.5f, hi = 0.6f;

    gc_param(b, "x", 2, DIMS(4, 5), D_AWAY);
    sim_ob_initializer(b, "lo", F32, 0, NULL, &lo);
    sim_ob_initializer(b, "hi", F32, 0, NULL, &hi);
    sim_ob_node(b, "Clip", "n", "x,lo,hi", "y");
}

static void
g_softmax(struct sim_ob *b)
{
    b_unary(b, "Softmax", D_ANY);
    sim_ob_attr_int(b, "axis", 0);
}

static void
g_logsoftmax(struct sim_ob *b)
{
    b_unary(b, "LogSoftmax", D_ANY);
}

static void
g_matmul(struct sim_ob *b)
{
    gc_param(b, "a", 3, DIMS(2, 3, 4), D_ANY);
    gc_param(b, "b", 2, DIMS(4, 5), D_ANY);
    sim_ob_node(b, "MatMul", "n", "a,b", "y");
}

static void
g_matmul_bcast(struct sim_ob *b)
{
    gc_param(b, "a", 3, DIMS(1, 3, 4), D_ANY);
    gc_param(b, "b", 3, DIMS(2, 4, 2), D_ANY);
    sim_ob_node(b, "MatMul", "n", "a,b", "y");
}

static void
g_matmul_vec(struct sim_ob *b)
{
    gc_param(b, "a", 1, DIMS(4), D_ANY);
    gc_param(b, "b", 2, DIMS(4, 3), D_ANY);
    sim_ob_node(b, "MatMul", "n", "a,b", "y");
}

static void
g_gemm(struct sim_ob *b)
{
    gc_param(b, "a", 2, DIMS(4, 3), D_ANY);
    gc_param(b, "b", 2, DIMS(5, 4), D_ANY);
    gc_param(b, "c", 1, DIMS(5), D_ANY);
    sim_ob_node(b, "Gemm", "n", "a,b,c", "y");
    sim_ob_attr_int(b, "transA", 1);
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_attr_float(b, "alpha", 0.7f);
    sim_ob_attr_float(b, "beta", 1.3f);
}

static void
g_gemm_plain(struct sim_ob *b)
{
    gc_param(b, "a", 2, DIMS(3, 4), D_ANY);
    gc_param(b, "b", 2, DIMS(4, 2), D_ANY);
    gc_param(b, "c", 2, DIMS(3, 1), D_ANY);
    sim_ob_node(b, "Gemm", "n", "a,b,c", "y");
}

static void
g_reducemean(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    sim_ob_node(b, "ReduceMean", "n", "x", "y");
    sim_ob_attr_ints(b, "axes", DIMS(0, 2), 2);
    sim_ob_attr_int(b, "keepdims", 0);
}

static void
g_reducesum(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    gc_ints(b, "axes", 1, DIMS(1), DIMS(1));
    sim_ob_node(b, "ReduceSum", "n", "x,axes", "y");
}

static void
g_sce(struct sim_ob *b)
{
    gc_param(b, "s", 2, DIMS(4, 5), D_ANY);
    gc_ints(b, "lab", 1, DIMS(4), DIMS(1, 0, 4, 1));
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "n", "s,lab", "y");
}

static void
g_sce_weighted(struct sim_ob *b)
{
    gc_param(b, "s", 3, DIMS(3, 4, 2), D_ANY);
    gc_ints(b, "lab", 2, DIMS(3, 2), DIMS(1, 3, 2, 2, 0, 1));
    gc_fconst(b, "w", 1, DIMS(4), D_POS);
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "n", "s,lab,w", "y,logp");
    sim_ob_attr_int(b, "ignore_index", 2);
}

static void
g_sce_none(struct sim_ob *b)
{
    gc_param(b, "s", 2, DIMS(3, 4), D_ANY);
    gc_ints(b, "lab", 1, DIMS(3), DIMS(3, 0, 2));
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "n", "s,lab", "y");
    sim_ob_attr_str(b, "reduction", "none");
}

static void
g_nll(struct sim_ob *b)
{
    gc_param(b, "s", 3, DIMS(3, 4, 2), D_ANY);
    gc_ints(b, "lab", 2, DIMS(3, 2), DIMS(1, 3, 2, 2, 0, 1));
    gc_fconst(b, "w", 1, DIMS(4), D_POS);
    sim_ob_node(b, "NegativeLogLikelihoodLoss", "n", "s,lab,w", "y");
    sim_ob_attr_str(b, "reduction", "sum");
}

static void
g_ctc(struct sim_ob *b)
{
    gc_param(b, "lp", 3, DIMS(6, 2, 4), D_ANY);
    gc_ints(b, "tg", 2, DIMS(2, 3), DIMS(1, 2, 2, 3, 0, 0));
    gc_ints(b, "il", 1, DIMS(2), DIMS(6, 5));
    gc_ints(b, "tl", 1, DIMS(2), DIMS(3, 1));
    sim_ob_node(b, "CtcLoss", "n", "lp,tg,il,tl", "y");
    sim_ob_node_domain(b, "ai.graphcore");
}

static void
g_ctc_sum(struct sim_ob *b)
{
    gc_param(b, "lp", 3, DIMS(5, 3, 4), D_ANY);
    gc_ints(b, "tg", 2, DIMS(3, 2), DIMS(0, 1, 2, 2, 1, 0));
    gc_ints(b, "il", 1, DIMS(3), DIMS(5, 5, 2));
    gc_ints(b, "tl", 1, DIMS(3), DIMS(2, 2, 0));
    sim_ob_node(b, "CtcLoss", "n", "lp,tg,il,tl", "y");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_attr_str(b, "reduction", "sum");
    sim_ob_attr_int(b, "blank", 3);
}

/* Targets holding the blank (torch computes them): "2 0 0 1" and "0". */
static void
g_ctc_blank(struct sim_ob *b)
{
    gc_param(b, "lp", 3, DIMS(7, 2, 3), D_ANY);
    gc_ints(b, "tg", 2, DIMS(2, 4), DIMS(2, 0, 0, 1, 0, 1, 1, 1));
    gc_ints(b, "il", 1, DIMS(2), DIMS(7, 4));
    gc_ints(b, "tl", 1, DIMS(2), DIMS(4, 1));
    sim_ob_node(b, "CtcLoss", "n", "lp,tg,il,tl", "y");
    sim_ob_node_domain(b, "ai.graphcore");
}

/* A frozen float scalar initializer. */
static void
fscalar(struct sim_ob *b, const char *name, float v)
{
    sim_ob_initializer(b, name, F32, 0, NULL, &v);
}

static void
g_hardsigmoid(struct sim_ob *b)
{
    b_unary(b, "HardSigmoid", D_AWAY);
    sim_ob_attr_float(b, "alpha", 1.5f);
    sim_ob_attr_float(b, "beta", 0.6f);
}

/* x * 4 spreads the inputs over HardSwish's three pieces (kinks at -3 and 3). */
static void
g_hardswish(struct sim_ob *b)
{
    gc_param(b, "x", 2, DIMS(4, 5), D_AWAY);
    fscalar(b, "four", 4.0f);
    sim_ob_node(b, "Mul", "scale", "x,four", "x4");
    sim_ob_node(b, "HardSwish", "n", "x4", "y");
}

static void
g_elu(struct sim_ob *b)
{
    b_unary(b, "Elu", D_AWAY);
    sim_ob_attr_float(b, "alpha", 0.7f);
}

static void g_softplus(struct sim_ob *b) { b_unary(b, "Softplus", D_ANY); }

static void
b_reduce(struct sim_ob *b, const char *op, enum dist dist)
{
    gc_param(b, "x", 3, DIMS(2, 3, 4), dist);
    sim_ob_node(b, op, "n", "x", "y");
    sim_ob_attr_ints(b, "axes", DIMS(0, 2), 2);
}

static void g_rl1(struct sim_ob *b) { b_reduce(b, "ReduceL1", D_AWAY); }

static void g_rl2(struct sim_ob *b) { b_reduce(b, "ReduceL2", D_ANY); }

static void g_rssq(struct sim_ob *b) { b_reduce(b, "ReduceSumSquare", D_ANY); }

static void g_rlse(struct sim_ob *b) { b_reduce(b, "ReduceLogSumExp", D_ANY); }

static void g_rprod(struct sim_ob *b) { b_reduce(b, "ReduceProd", D_POS); }

static void g_rmax(struct sim_ob *b) { b_reduce(b, "ReduceMax", D_ANY); }

static void g_rmin(struct sim_ob *b) { b_reduce(b, "ReduceMin", D_ANY); }

static void
g_rlse_all(struct sim_ob *b)
{
    gc_param(b, "x", 2, DIMS(3, 4), D_ANY);
    sim_ob_node(b, "ReduceLogSumExp", "n", "x", "y");
    sim_ob_attr_int(b, "keepdims", 0);
}

static void
g_where(struct sim_ob *b)
{
    static const uint8_t cond[4] = { 1, 0, 0, 1 };

    sim_ob_initializer(b, "c", SIM_DTYPE_BOOL, 1, DIMS(4), cond);
    gc_param(b, "x", 2, DIMS(3, 4), D_ANY);
    gc_param(b, "z", 2, DIMS(3, 1), D_ANY);
    sim_ob_node(b, "Where", "n", "c,x,z", "y");
}

/* a * 3 / (b + 1.5): quotients up to 1.5 in magnitude, so trunc takes 0 and +-1 */
static void
g_mod(struct sim_ob *b)
{
    gc_param(b, "a", 2, DIMS(3, 4), D_ANY);
    gc_param(b, "b", 1, DIMS(4), D_POS);
    fscalar(b, "three", 3.0f);
    fscalar(b, "half3", 1.5f);
    sim_ob_node(b, "Mul", "sa", "a,three", "a3");
    sim_ob_node(b, "Add", "sb", "b,half3", "b3");
    sim_ob_node(b, "Mod", "n", "a3,b3", "y");
    sim_ob_attr_int(b, "fmod", 1);
}

/* a - b floor(a / b): torch.remainder's float export (Div, Floor, Mul, Sub); |a| in
 * [0.2, 1], b in [0.5, 1.5], so the quotients stay away from 0 */
static void
g_floor(struct sim_ob *b)
{
    gc_param(b, "a", 2, DIMS(3, 4), D_AWAY);
    gc_param(b, "b", 1, DIMS(4), D_POS);
    sim_ob_node(b, "Div", "q", "a,b", "ab");
    sim_ob_node(b, "Floor", "n", "ab", "fl");
    sim_ob_node(b, "Mul", "m", "b,fl", "bf");
    sim_ob_node(b, "Sub", "s", "a,bf", "y");
}

/* x ceil(x), |x| in [0.2, 1]: the gradient is ceil(x) alone (Ceil's own is zero) */
static void
g_ceil(struct sim_ob *b)
{
    gc_param(b, "x", 2, DIMS(3, 5), D_AWAY);
    sim_ob_node(b, "Ceil", "n", "x", "c");
    sim_ob_node(b, "Mul", "m", "x,c", "y");
}

/* A chain, so gradients of intermediates (not only of weights) are checked. */
static void
g_chain(struct sim_ob *b)
{
    gc_param(b, "x", 2, DIMS(3, 4), D_ANY);
    gc_param(b, "w", 2, DIMS(4, 4), D_ANY);
    sim_ob_node(b, "MatMul", "mm", "x,w", "h");
    sim_ob_node(b, "Tanh", "t", "h", "h2");
    sim_ob_node(b, "Mul", "sq", "h2,x", "h3");
    sim_ob_node(b, "Softmax", "sm", "h3", "y");
}

/* a: 24 ramp values, multiples of 0.05; b, c: odd multiples of 0.025, at least 0.025 from
 * every value of a and 0.05 from each other, so no perturbation by eps changes the winner */
static void
g_max3(struct sim_ob *b)
{
    static const float vb[3] = { 0.125f, -0.275f, 0.325f };
    static const float vc[4] = { -0.175f, 0.025f, 0.275f, -0.425f };

    gc_param(b, "a", 3, DIMS(2, 3, 4), D_DISTINCT);
    gc_param_vals(b, "b", 2, DIMS(3, 1), vb);
    gc_param_vals(b, "c", 1, DIMS(4), vc);
    sim_ob_node(b, "Max", "n", "a,b,c", "y");
}

/* Ties at four places, where each input gets half the gradient (PyTorch's rule for
 * torch.maximum), which is also what the central difference across a tie measures; every
 * other pair is 0.1 apart, so eps changes no winner. */
static void
g_max_ties(struct sim_ob *b)
{
    static const float va[12] = { 0.3f, -0.2f, 0.5f, 0.1f, -0.6f, 0.4f,
                                  0.0f, -0.3f, 0.7f, 0.2f, -0.1f, 0.6f };
    static const float vb[12] = { 0.3f, 0.1f, 0.4f, 0.1f, -0.5f, 0.6f,
                                  0.0f, -0.5f, 0.8f, 0.1f, -0.1f, 0.3f };

    gc_param_vals(b, "a", 2, DIMS(3, 4), va);
    gc_param_vals(b, "b", 2, DIMS(3, 4), vb);
    sim_ob_node(b, "Max", "n", "a,b", "y");
}

static void
g_min(struct sim_ob *b)
{
    static const float vb[3] = { 0.125f, -0.275f, 0.325f };

    gc_param(b, "a", 3, DIMS(2, 3, 4), D_DISTINCT);
    gc_param_vals(b, "b", 2, DIMS(3, 1), vb);
    sim_ob_node(b, "Min", "n", "a,b", "y");
}

/* torch.nn.PReLU(3) on (N, C, L): the slope (C, 1) after the exporter's Unsqueeze */
static void
g_prelu(struct sim_ob *b)
{
    gc_param(b, "x", 3, DIMS(2, 3, 4), D_AWAY);
    gc_param(b, "slope", 2, DIMS(3, 1), D_ANY);
    sim_ob_node(b, "PRelu", "n", "x,slope", "y");
}

static void
g_prelu_scalar(struct sim_ob *b)
{
    gc_param(b, "x", 2, DIMS(3, 5), D_AWAY);
    gc_param(b, "slope", 1, DIMS(1), D_POS);
    sim_ob_node(b, "PRelu", "n", "x,slope", "y");
}

static void g_selu(struct sim_ob *b) { b_unary(b, "Selu", D_AWAY); }

static void
g_celu(struct sim_ob *b)
{
    b_unary(b, "Celu", D_AWAY);
    sim_ob_attr_float(b, "alpha", 0.7f);
}

/* x sign(x) = |x|: the gradient is sign(x) alone (Sign's own is zero) */
static void
g_sign(struct sim_ob *b)
{
    gc_param(b, "x", 2, DIMS(3, 5), D_AWAY);
    sim_ob_node(b, "Sign", "n", "x", "s");
    sim_ob_node(b, "Mul", "m", "x,s", "y");
}

/* x round(2x), x odd multiples of 0.025 (15 ramp values): round(2x) jumps at x = +-0.25,
 * 0.025 away from every x; the gradient is round(2x) alone (Round's own is zero) */
static void
g_round(struct sim_ob *b)
{
    static const float two = 2.0f;

    gc_param(b, "x", 2, DIMS(3, 5), D_DISTINCT);
    sim_ob_initializer(b, "two", F32, 0, NULL, &two);
    sim_ob_node(b, "Mul", "d", "x,two", "x2");
    sim_ob_node(b, "Round", "n", "x2", "rx");
    sim_ob_node(b, "Mul", "m", "x,rx", "y");
}

const struct gcase gradcases_math[] = {
    { "Add", "broadcast (2,3,4) + (3,1)", g_add, 1e-2f, 1e-3f },
    { "Sub", "broadcast", g_sub, 1e-2f, 1e-3f },
    { "Mul", "broadcast", g_mul, 1e-2f, 1e-3f },
    { "Div", "broadcast", g_div, 1e-2f, 1e-3f },
    { "Pow", "base and exponent", g_pow, 5e-3f, 1e-3f },
    { "Neg", "", g_neg, 1e-2f, 1e-3f },
    { "Abs", "", g_abs, 1e-2f, 1e-3f },
    { "Sqrt", "", g_sqrt, 1e-2f, 1e-3f },
    { "Exp", "", g_exp, 1e-2f, 1e-3f },
    { "Log", "", g_log, 1e-2f, 1e-3f },
    { "Erf", "", g_erf, 1e-2f, 1e-3f },
    { "Gelu", "exported exact GELU, fused in training", g_gelu, 1e-2f, 1e-3f },
    { "Sin", "", g_sin, 1e-2f, 1e-3f },
    { "Cos", "", g_cos, 1e-2f, 1e-3f },
    { "Tan", "", g_tan, 1e-2f, 1e-3f },
    { "Asin", "x in [-0.8, 0.8]", g_asin, 1e-2f, 1e-3f },
    { "Acos", "x in [-0.8, 0.8]", g_acos, 1e-2f, 1e-3f },
    { "Atan", "", g_atan, 1e-2f, 1e-3f },
    { "Sinh", "", g_sinh, 1e-2f, 1e-3f },
    { "Cosh", "", g_cosh, 1e-2f, 1e-3f },
    { "Asinh", "", g_asinh, 1e-2f, 1e-3f },
    { "Acosh", "x in [1.2, 3]", g_acosh, 1e-2f, 1e-3f },
    { "Atanh", "x in [-0.8, 0.8]", g_atanh, 1e-2f, 1e-3f },
    { "Reciprocal", "", g_recip, 1e-2f, 1e-3f },
    { "Clip", "min and max inputs", g_clip, 1e-2f, 1e-3f },
    { "Relu", "", g_relu, 1e-2f, 1e-3f },
    { "LeakyRelu", "alpha 0.2", g_leaky, 1e-2f, 1e-3f },
    { "Sigmoid", "", g_sigmoid, 1e-2f, 1e-3f },
    { "Tanh", "", g_tanh, 1e-2f, 1e-3f },
    { "Softmax", "axis 0", g_softmax, 1e-2f, 1e-3f },
    { "LogSoftmax", "", g_logsoftmax, 1e-2f, 1e-3f },
    { "Identity", "", g_identity, 1e-2f, 1e-3f },
    { "Cast", "float to float", g_cast, 1e-2f, 1e-3f },
    { "MatMul", "batch folded", g_matmul, 1e-2f, 1e-3f },
    { "MatMul", "broadcast batch", g_matmul_bcast, 1e-2f, 1e-3f },
    { "MatMul", "vector x matrix", g_matmul_vec, 1e-2f, 1e-3f },
    { "Gemm", "transA transB alpha beta, C (N)", g_gemm, 1e-2f, 1e-3f },
    { "Gemm", "C (M, 1)", g_gemm_plain, 1e-2f, 1e-3f },
    { "ReduceMean", "axes (0, 2)", g_reducemean, 1e-2f, 1e-3f },
    { "ReduceSum", "axes input", g_reducesum, 1e-2f, 1e-3f },
    { "SoftmaxCrossEntropyLoss", "mean", g_sce, 1e-2f, 1e-3f },
    { "SoftmaxCrossEntropyLoss", "weights, ignore_index, log_prob, (N,C,d)",
      g_sce_weighted, 1e-2f, 1e-3f },
    { "SoftmaxCrossEntropyLoss", "reduction none", g_sce_none, 1e-2f, 1e-3f },
    { "NegativeLogLikelihoodLoss", "sum, weights, (N,C,d)", g_nll, 1e-2f, 1e-3f },
    { "CtcLoss", "mean, blank 0, ragged lengths", g_ctc, 1e-2f, 1e-3f },
    { "CtcLoss", "sum, blank 3, repeated label, empty target", g_ctc_sum, 1e-2f, 1e-3f },
    { "CtcLoss", "mean, targets holding the blank", g_ctc_blank, 1e-2f, 1e-3f },
    { "MatMul", "chain MatMul-Tanh-Mul-Softmax", g_chain, 1e-2f, 1e-3f },
    { "HardSigmoid", "alpha 1.5 beta 0.6, both clamps", g_hardsigmoid, 1e-3f, 1e-3f },
    { "HardSwish", "4x: all three pieces", g_hardswish, 1e-3f, 1e-3f },
    { "Elu", "alpha 0.7", g_elu, 1e-2f, 1e-3f },
    { "Softplus", "", g_softplus, 1e-2f, 1e-3f },
    { "ReduceL1", "axes (0, 2)", g_rl1, 1e-2f, 1e-3f },
    { "ReduceL2", "axes (0, 2)", g_rl2, 1e-2f, 1e-3f },
    { "ReduceSumSquare", "axes (0, 2)", g_rssq, 1e-2f, 1e-3f },
    { "ReduceLogSumExp", "axes (0, 2)", g_rlse, 1e-2f, 1e-3f },
    { "ReduceLogSumExp", "all axes, keepdims 0", g_rlse_all, 1e-2f, 1e-3f },
    { "ReduceProd", "axes (0, 2)", g_rprod, 1e-2f, 1e-3f },
    { "ReduceMax", "axes (0, 2)", g_rmax, 1e-2f, 1e-3f },
    { "ReduceMin", "axes (0, 2)", g_rmin, 1e-2f, 1e-3f },
    { "Where", "bool condition broadcast over x and y", g_where, 1e-2f, 1e-3f },
    { "Mod", "fmod 1, quotients -1 to 1", g_mod, 1e-3f, 1e-3f },
    { "Floor", "a - b floor(a / b) (torch.remainder)", g_floor, 1e-3f, 1e-3f },
    { "Ceil", "x ceil(x)", g_ceil, 1e-2f, 1e-3f },
    { "Max", "three inputs broadcast, no ties", g_max3, 1e-2f, 1e-3f },
    { "Max", "ties split the gradient evenly", g_max_ties, 1e-2f, 1e-3f },
    { "Min", "broadcast (2,3,4), (3,1)", g_min, 1e-2f, 1e-3f },
    { "PRelu", "slope (C, 1)", g_prelu, 1e-2f, 1e-3f },
    { "PRelu", "one slope", g_prelu_scalar, 1e-2f, 1e-3f },
    { "Selu", "", g_selu, 1e-2f, 1e-3f },
    { "Celu", "alpha 0.7", g_celu, 1e-2f, 1e-3f },
    { "Sign", "x sign(x)", g_sign, 1e-2f, 1e-3f },
    { "Round", "x round(2x)", g_round, 1e-2f, 1e-3f },
};

const size_t gradcases_math_n = sizeof gradcases_math / sizeof gradcases_math[0];
