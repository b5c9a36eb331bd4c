/*
 * test_sim_train_grad.c — every op's gradient rule against central finite differences,
 * driven by one table with at least one case per differentiable op (ggml's gradient check).
 *
 * Each case builds a small graph whose differentiable operands are float initializers
 * (trainable weights), appends loss = ReduceSum(y * r) with r a fixed random frozen weight,
 * compiles it for training with SGD lr = 0 (so runs never change the weights) and compares
 * the gradient the executable applied (sim_exe_read_gradient) with
 * (loss(w + eps) - loss(w - eps)) / (2 eps) for every element of every weight. The error of
 * an element is |analytic - numeric| / (1 + |numeric|); the max per op is printed and must
 * stay under the case's tolerance. Inputs of ops with kinks (Relu, Abs, MaxPool, Clip) are
 * kept away from the kinks by more than eps. Dropout cases restart the generator before
 * every run so each run draws the same mask.
 * test_table_covers_every_op fails when an op with a backward rule has no case, or when an
 * op the training issue lists lacks a backward rule.
 * Not here: training runs, optimizers, losses' forward values (test_sim_train.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_build.h"
#include "ops.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define I64 SIM_DTYPE_INT64
#define MAX_PARAMS 8

/* Value distributions for weights. */
enum dist {
    D_ANY,          /* uniform in [-1, 1] */
    D_POS,          /* uniform in [0.5, 1.5] */
    D_AWAY,         /* |x| in [0.2, 1], random sign: away from kinks at 0 */
    D_DISTINCT      /* a shuffled ramp with steps of 0.05: a unique maximum per window */
};

/* The weights the current case declared (their names, for the harness). */
static const char *params[MAX_PARAMS];
static int n_params;
static uint64_t rng_state;

static float
urand(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * (1.0 / 9007199254740992.0));
}

static int64_t
numel_of(int rank, const int64_t *d)
{
    int64_t n = 1;

    for (int i = 0; i < rank; i++)
        n *= d[i];
    return n;
}

static void
fill(float *v, int64_t n, enum dist dist)
{
    for (int64_t i = 0; i < n; i++) {
        float u = urand();
        switch (dist) {
        case D_POS: v[i] = 0.5f + u; break;
        case D_AWAY: v[i] = (0.2f + 0.8f * u) * (urand() < 0.5f ? -1.0f : 1.0f); break;
        case D_DISTINCT: v[i] = (float)i * 0.05f - (float)n * 0.025f; break;
        default: v[i] = 2.0f * u - 1.0f; break;
        }
    }
    if (dist == D_DISTINCT)
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)(urand() * (float)(i + 1)) % (i + 1);
            float t = v[i];
            v[i] = v[j];
            v[j] = t;
        }
}

/* A trainable weight of the case: an initializer whose gradient is checked. */
static void
param(struct sim_ob *b, const char *name, int rank, const int64_t *d, enum dist dist)
{
    int64_t n = numel_of(rank, d);
    float *v = malloc((size_t)n * sizeof(float) + 4);

    assert_non_null(v);
    fill(v, n, dist);
    sim_ob_initializer(b, name, F32, rank, d, v);
    free(v);
    assert_true(n_params < MAX_PARAMS);
    params[n_params++] = name;
}

/* A float initializer that is not checked (running statistics, weights of a loss). */
static void
fconst(struct sim_ob *b, const char *name, int rank, const int64_t *d, enum dist dist)
{
    int64_t n = numel_of(rank, d);
    float *v = malloc((size_t)n * sizeof(float) + 4);

    assert_non_null(v);
    fill(v, n, dist);
    sim_ob_initializer(b, name, F32, rank, d, v);
    free(v);
}

static void
ints(struct sim_ob *b, const char *name, int rank, const int64_t *d, const int64_t *v)
{
    sim_ob_initializer(b, name, I64, rank, d, v);
}

#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }

/* ---- cases: each adds nodes computing "y" ---------------------------------------------- */

static void
b_binary(struct sim_ob *b, const char *op, enum dist db)
{
    param(b, "a", 3, DIMS(2, 3, 4), D_ANY);
    param(b, "b", 2, DIMS(3, 1), db);
    sim_ob_node(b, op, "n", "a,b", "y");
}

static void g_add(struct sim_ob *b) { b_binary(b, "Add", D_ANY); }
static void g_sub(struct sim_ob *b) { b_binary(b, "Sub", D_ANY); }
static void g_mul(struct sim_ob *b) { b_binary(b, "Mul", D_ANY); }
static void g_div(struct sim_ob *b) { b_binary(b, "Div", D_POS); }

static void
g_pow(struct sim_ob *b)
{
    param(b, "a", 2, DIMS(3, 4), D_POS);
    param(b, "b", 1, DIMS(4), D_ANY);
    sim_ob_node(b, "Pow", "n", "a,b", "y");
}

static void
b_unary(struct sim_ob *b, const char *op, enum dist dist)
{
    param(b, "x", 2, DIMS(3, 5), dist);
    sim_ob_node(b, op, "n", "x", "y");
}

static void g_neg(struct sim_ob *b) { b_unary(b, "Neg", D_ANY); }
static void g_abs(struct sim_ob *b) { b_unary(b, "Abs", D_AWAY); }
static void g_sqrt(struct sim_ob *b) { b_unary(b, "Sqrt", D_POS); }
static void g_exp(struct sim_ob *b) { b_unary(b, "Exp", D_ANY); }
static void g_log(struct sim_ob *b) { b_unary(b, "Log", D_POS); }
static void g_erf(struct sim_ob *b) { b_unary(b, "Erf", D_ANY); }
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

    param(b, "x", 2, DIMS(4, 5), D_AWAY);
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
    param(b, "a", 3, DIMS(2, 3, 4), D_ANY);
    param(b, "b", 2, DIMS(4, 5), D_ANY);
    sim_ob_node(b, "MatMul", "n", "a,b", "y");
}

static void
g_matmul_bcast(struct sim_ob *b)
{
    param(b, "a", 3, DIMS(1, 3, 4), D_ANY);
    param(b, "b", 3, DIMS(2, 4, 2), D_ANY);
    sim_ob_node(b, "MatMul", "n", "a,b", "y");
}

static void
g_matmul_vec(struct sim_ob *b)
{
    param(b, "a", 1, DIMS(4), D_ANY);
    param(b, "b", 2, DIMS(4, 3), D_ANY);
    sim_ob_node(b, "MatMul", "n", "a,b", "y");
}

static void
g_gemm(struct sim_ob *b)
{
    param(b, "a", 2, DIMS(4, 3), D_ANY);
    param(b, "b", 2, DIMS(5, 4), D_ANY);
    param(b, "c", 1, DIMS(5), D_ANY);
    sim_ob_node(b, "Gemm", "n", "a,b,c", "y");
    sim_ob_attr_int(b, "transA", 1);
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_attr_float(b, "alpha", 0.7f);
    sim_ob_attr_float(b, "beta", 1.3f);
}

static void
g_gemm_plain(struct sim_ob *b)
{
    param(b, "a", 2, DIMS(3, 4), D_ANY);
    param(b, "b", 2, DIMS(4, 2), D_ANY);
    param(b, "c", 2, DIMS(3, 1), D_ANY);
    sim_ob_node(b, "Gemm", "n", "a,b,c", "y");
}

static void
g_conv(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(2, 2, 5, 5), D_ANY);
    param(b, "w", 4, DIMS(3, 2, 3, 3), D_ANY);
    param(b, "bias", 1, DIMS(3), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w,bias", "y");
    sim_ob_attr_ints(b, "pads", DIMS(1, 0, 0, 1), 4);
}

static void
g_conv_groups(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(2, 4, 7, 6), D_ANY);
    param(b, "w", 4, DIMS(4, 2, 2, 3), D_ANY);
    param(b, "bias", 1, DIMS(4), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w,bias", "y");
    sim_ob_attr_int(b, "group", 2);
    sim_ob_attr_ints(b, "strides", DIMS(2, 1), 2);
    sim_ob_attr_ints(b, "dilations", DIMS(2, 2), 2);
    sim_ob_attr_ints(b, "pads", DIMS(1, 1, 1, 1), 4);
}

static void
g_conv_1d(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 3, 8), D_ANY);
    param(b, "w", 3, DIMS(2, 3, 3), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w", "y");
    sim_ob_attr_ints(b, "strides", DIMS(2), 1);
    sim_ob_attr_ints(b, "pads", DIMS(1, 1), 2);
}

static void
g_conv_pointwise(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(2, 4, 3, 3), D_ANY);
    param(b, "w", 4, DIMS(4, 2, 1, 1), D_ANY);
    param(b, "bias", 1, DIMS(4), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w,bias", "y");
    sim_ob_attr_int(b, "group", 2);
}

/* One image: the GEMM works in the output's and dY's own layout (no scatter, no gather). */
static void
g_conv_one_image(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(1, 2, 5, 6), D_ANY);
    param(b, "w", 4, DIMS(3, 2, 3, 3), D_ANY);
    param(b, "bias", 1, DIMS(3), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w,bias", "y");
    sim_ob_attr_ints(b, "pads", DIMS(1, 1, 1, 1), 4);
}

/* Images larger than half the im2col budget: one image per chunk, the backward redoes
 * im2col (nothing saved). */
static void
g_conv_image_chunks(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(2, 8, 17, 17), D_ANY);
    param(b, "w", 4, DIMS(1, 8, 5, 5), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w", "y");
}

static void
g_conv_depthwise(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(2, 3, 4, 19), D_ANY);
    param(b, "w", 4, DIMS(3, 1, 3, 3), D_ANY);
    param(b, "bias", 1, DIMS(3), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w,bias", "y");
    sim_ob_attr_int(b, "group", 3);
    sim_ob_attr_ints(b, "pads", DIMS(1, 1, 1, 1), 4);
}

static void
g_conv_depthwise_s2(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(2, 2, 7, 9), D_ANY);
    param(b, "w", 4, DIMS(4, 1, 3, 2), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w", "y");
    sim_ob_attr_int(b, "group", 2);
    sim_ob_attr_ints(b, "strides", DIMS(2, 2), 2);
    sim_ob_attr_ints(b, "dilations", DIMS(1, 2), 2);
    sim_ob_attr_ints(b, "pads", DIMS(1, 2, 0, 1), 4);
}

static void
g_maxpool(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(2, 2, 4, 6), D_DISTINCT);
    sim_ob_node(b, "MaxPool", "n", "x", "y");
    sim_ob_attr_ints(b, "kernel_shape", DIMS(2, 2), 2);
    sim_ob_attr_ints(b, "strides", DIMS(2, 2), 2);
}

static void
g_maxpool_pad(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(1, 2, 5, 5), D_DISTINCT);
    sim_ob_node(b, "MaxPool", "n", "x", "y");
    sim_ob_attr_ints(b, "kernel_shape", DIMS(3, 3), 2);
    sim_ob_attr_ints(b, "strides", DIMS(2, 2), 2);
    sim_ob_attr_ints(b, "pads", DIMS(1, 1, 1, 1), 4);
}

static void
g_avgpool(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(2, 2, 5, 5), D_ANY);
    sim_ob_node(b, "AveragePool", "n", "x", "y");
    sim_ob_attr_ints(b, "kernel_shape", DIMS(3, 3), 2);
    sim_ob_attr_ints(b, "strides", DIMS(2, 2), 2);
    sim_ob_attr_ints(b, "pads", DIMS(1, 1, 1, 1), 4);
}

static void
g_avgpool_incl(struct sim_ob *b)
{
    g_avgpool(b);
    sim_ob_attr_int(b, "count_include_pad", 1);
}

static void
g_gavgpool(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(2, 3, 3, 4), D_ANY);
    sim_ob_node(b, "GlobalAveragePool", "n", "x", "y");
}

static void
g_bn(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(3, 2, 2, 3), D_ANY);
    param(b, "scale", 1, DIMS(2), D_POS);
    param(b, "bias", 1, DIMS(2), D_ANY);
    fconst(b, "mean", 1, DIMS(2), D_ANY);
    fconst(b, "var", 1, DIMS(2), D_POS);
    sim_ob_node(b, "BatchNormalization", "n", "x,scale,bias,mean,var", "y");
}

static void
g_ln(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    param(b, "scale", 1, DIMS(4), D_POS);
    param(b, "bias", 1, DIMS(4), D_ANY);
    sim_ob_node(b, "LayerNormalization", "n", "x,scale,bias", "y");
}

static void
g_ln_axis(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    param(b, "scale", 2, DIMS(3, 4), D_POS);
    sim_ob_node(b, "LayerNormalization", "n", "x,scale", "y");
    sim_ob_attr_int(b, "axis", 1);
}

static void
g_dropout(struct sim_ob *b)
{
    const float ratio = 0.4f;

    param(b, "x", 2, DIMS(6, 5), D_ANY);
    sim_ob_initializer(b, "ratio", F32, 0, NULL, &ratio);
    sim_ob_node(b, "Dropout", "n", "x,ratio", "y");
}

static void
g_reshape(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    ints(b, "shape", 1, DIMS(2), DIMS(4, -1));
    sim_ob_node(b, "Reshape", "n", "x,shape", "y");
}

static void
g_flatten(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    sim_ob_node(b, "Flatten", "n", "x", "y");
    sim_ob_attr_int(b, "axis", 2);
}

static void
g_transpose(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    sim_ob_node(b, "Transpose", "n", "x", "y");
    sim_ob_attr_ints(b, "perm", DIMS(2, 0, 1), 3);
}

static void
g_concat(struct sim_ob *b)
{
    param(b, "a", 3, DIMS(2, 1, 3), D_ANY);
    param(b, "b", 3, DIMS(2, 2, 3), D_ANY);
    sim_ob_node(b, "Concat", "n", "a,b,a", "y");
    sim_ob_attr_int(b, "axis", 1);
}

static void
g_squeeze(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(3, 1, 4), D_ANY);
    ints(b, "axes", 1, DIMS(1), DIMS(1));
    sim_ob_node(b, "Squeeze", "n", "x,axes", "y");
}

static void
g_unsqueeze(struct sim_ob *b)
{
    param(b, "x", 2, DIMS(3, 4), D_ANY);
    ints(b, "axes", 1, DIMS(2), DIMS(0, 2));
    sim_ob_node(b, "Unsqueeze", "n", "x,axes", "y");
}

static void
g_gather(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 5, 3), D_ANY);
    ints(b, "idx", 2, DIMS(2, 2), DIMS(4, -1, 0, 4));
    sim_ob_node(b, "Gather", "n", "x,idx", "y");
    sim_ob_attr_int(b, "axis", 1);
}

static void
g_slice(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(3, 6, 5), D_ANY);
    ints(b, "starts", 1, DIMS(2), DIMS(5, 1));
    ints(b, "ends", 1, DIMS(2), DIMS(0, 5));
    ints(b, "axes", 1, DIMS(2), DIMS(1, 2));
    ints(b, "steps", 1, DIMS(2), DIMS(-2, 2));
    sim_ob_node(b, "Slice", "n", "x,starts,ends,axes,steps", "y");
}

static void
g_reducemean(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    sim_ob_node(b, "ReduceMean", "n", "x", "y");
    sim_ob_attr_ints(b, "axes", DIMS(0, 2), 2);
    sim_ob_attr_int(b, "keepdims", 0);
}

static void
g_reducesum(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    ints(b, "axes", 1, DIMS(1), DIMS(1));
    sim_ob_node(b, "ReduceSum", "n", "x,axes", "y");
}

static void
g_sce(struct sim_ob *b)
{
    param(b, "s", 2, DIMS(4, 5), D_ANY);
    ints(b, "lab", 1, DIMS(4), DIMS(1, 0, 4, 1));
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "n", "s,lab", "y");
}

static void
g_sce_weighted(struct sim_ob *b)
{
    param(b, "s", 3, DIMS(3, 4, 2), D_ANY);
    ints(b, "lab", 2, DIMS(3, 2), DIMS(1, 3, 2, 2, 0, 1));
    fconst(b, "w", 1, DIMS(4), D_POS);
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "n", "s,lab,w", "y,logp");
    sim_ob_attr_int(b, "ignore_index", 2);
}

static void
g_sce_none(struct sim_ob *b)
{
    param(b, "s", 2, DIMS(3, 4), D_ANY);
    ints(b, "lab", 1, DIMS(3), DIMS(3, 0, 2));
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "n", "s,lab", "y");
    sim_ob_attr_str(b, "reduction", "none");
}

static void
g_nll(struct sim_ob *b)
{
    param(b, "s", 3, DIMS(3, 4, 2), D_ANY);
    ints(b, "lab", 2, DIMS(3, 2), DIMS(1, 3, 2, 2, 0, 1));
    fconst(b, "w", 1, DIMS(4), D_POS);
    sim_ob_node(b, "NegativeLogLikelihoodLoss", "n", "s,lab,w", "y");
    sim_ob_attr_str(b, "reduction", "sum");
}

static void
g_ctc(struct sim_ob *b)
{
    param(b, "lp", 3, DIMS(6, 2, 4), D_ANY);
    ints(b, "tg", 2, DIMS(2, 3), DIMS(1, 2, 2, 3, 0, 0));
    ints(b, "il", 1, DIMS(2), DIMS(6, 5));
    ints(b, "tl", 1, DIMS(2), DIMS(3, 1));
    sim_ob_node(b, "CtcLoss", "n", "lp,tg,il,tl", "y");
    sim_ob_node_domain(b, "ai.graphcore");
}

static void
g_ctc_sum(struct sim_ob *b)
{
    param(b, "lp", 3, DIMS(5, 3, 4), D_ANY);
    ints(b, "tg", 2, DIMS(3, 2), DIMS(0, 1, 2, 2, 1, 0));
    ints(b, "il", 1, DIMS(3), DIMS(5, 5, 2));
    ints(b, "tl", 1, DIMS(3), DIMS(2, 2, 0));
    sim_ob_node(b, "CtcLoss", "n", "lp,tg,il,tl", "y");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_attr_str(b, "reduction", "sum");
    sim_ob_attr_int(b, "blank", 3);
}

/* ---- the everyday-layer ops ------------------------------------------------------------ */

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
    param(b, "x", 2, DIMS(4, 5), D_AWAY);
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
b_pad(struct sim_ob *b, const char *mode)
{
    param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    ints(b, "pads", 1, DIMS(6), DIMS(0, 2, 1, 1, 1, 3));
    sim_ob_node(b, "Pad", "n", "x,pads", "y");
    sim_ob_attr_str(b, "mode", mode);
}

static void g_pad_constant(struct sim_ob *b) { b_pad(b, "constant"); }
static void g_pad_reflect(struct sim_ob *b) { b_pad(b, "reflect"); }
static void g_pad_edge(struct sim_ob *b) { b_pad(b, "edge"); }

static void
g_pad_crop(struct sim_ob *b)
{
    const float v = 0.3f;

    param(b, "x", 2, DIMS(4, 5), D_ANY);
    ints(b, "pads", 1, DIMS(4), DIMS(-1, 2, 1, -2));
    sim_ob_initializer(b, "v", F32, 0, NULL, &v);
    sim_ob_node(b, "Pad", "n", "x,pads,v", "y");
}

static void
g_split(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 6, 3), D_ANY);
    ints(b, "sizes", 1, DIMS(3), DIMS(1, 3, 2));
    sim_ob_node(b, "Split", "n", "x,sizes", "p0,p1,p2");
    sim_ob_attr_int(b, "axis", 1);
    sim_ob_node(b, "Concat", "cat", "p2,p0,p1", "y");
    sim_ob_attr_int(b, "axis", 1);
}

static void
g_split_unused(struct sim_ob *b)
{
    param(b, "x", 2, DIMS(4, 6), D_ANY);
    sim_ob_node(b, "Split", "n", "x", "y,rest");
    sim_ob_attr_int(b, "axis", -1);
}

static void
b_scatternd(struct sim_ob *b, const char *reduction)
{
    param(b, "data", 3, DIMS(4, 3, 2), D_ANY);
    ints(b, "idx", 2, DIMS(2, 1), DIMS(2, -4));
    param(b, "upd", 3, DIMS(2, 3, 2), D_ANY);
    sim_ob_node(b, "ScatterND", "n", "data,idx,upd", "y");
    sim_ob_attr_str(b, "reduction", reduction);
}

static void g_scatternd(struct sim_ob *b) { b_scatternd(b, "none"); }
static void g_scatternd_add(struct sim_ob *b) { b_scatternd(b, "add"); }

static void
b_reduce(struct sim_ob *b, const char *op, enum dist dist)
{
    param(b, "x", 3, DIMS(2, 3, 4), dist);
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
b_scatter_el(struct sim_ob *b, int v) /* axis 1 of (3, 4): none, add (duplicates), Scatter */
{
    static const int64_t idx[3][6] = {{1, -1, 0, 3, 0, 2}, {1, 1, 0, 3, 3, -1}, {2, 0, 1, 1, 3, 0}};
    param(b, "data", 2, DIMS(3, 4), D_ANY);
    ints(b, "idx", 2, DIMS(2, 3), idx[v]);
    param(b, "upd", 2, DIMS(2, 3), D_ANY);
    sim_ob_node(b, v == 2 ? "Scatter" : "ScatterElements", "n", "data,idx,upd", "y");
    sim_ob_attr_int(b, "axis", 1);
    if (v < 2)
        sim_ob_attr_str(b, "reduction", v == 1 ? "add" : "none");
}
static void g_scel(struct sim_ob *b) { b_scatter_el(b, 0); }
static void g_scel_add(struct sim_ob *b) { b_scatter_el(b, 1); }
static void g_scatter(struct sim_ob *b) { b_scatter_el(b, 2); }

static void
g_rlse_all(struct sim_ob *b)
{
    param(b, "x", 2, DIMS(3, 4), D_ANY);
    sim_ob_node(b, "ReduceLogSumExp", "n", "x", "y");
    sim_ob_attr_int(b, "keepdims", 0);
}

static void
g_where(struct sim_ob *b)
{
    static const uint8_t cond[4] = { 1, 0, 0, 1 };

    sim_ob_initializer(b, "c", SIM_DTYPE_BOOL, 1, DIMS(4), cond);
    param(b, "x", 2, DIMS(3, 4), D_ANY);
    param(b, "z", 2, DIMS(3, 1), D_ANY);
    sim_ob_node(b, "Where", "n", "c,x,z", "y");
}

/* a * 3 / (b + 1.5): quotients up to 1.5 in magnitude, so trunc takes 0 and +-1 */
static void
g_mod(struct sim_ob *b)
{
    param(b, "a", 2, DIMS(3, 4), D_ANY);
    param(b, "b", 1, DIMS(4), D_POS);
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
    param(b, "a", 2, DIMS(3, 4), D_AWAY);
    param(b, "b", 1, DIMS(4), D_POS);
    sim_ob_node(b, "Div", "q", "a,b", "ab");
    sim_ob_node(b, "Floor", "n", "ab", "fl");
    sim_ob_node(b, "Mul", "m", "b,fl", "bf");
    sim_ob_node(b, "Sub", "s", "a,bf", "y");
}

/* x ceil(x), |x| in [0.2, 1]: the gradient is ceil(x) alone (Ceil's own is zero) */
static void
g_ceil(struct sim_ob *b)
{
    param(b, "x", 2, DIMS(3, 5), D_AWAY);
    sim_ob_node(b, "Ceil", "n", "x", "c");
    sim_ob_node(b, "Mul", "m", "x,c", "y");
}

static void
g_expand(struct sim_ob *b)
{
    param(b, "x", 2, DIMS(3, 1), D_ANY);
    ints(b, "shape", 1, DIMS(3), DIMS(2, 1, 4));
    sim_ob_node(b, "Expand", "n", "x,shape", "y");
}

/* A chain, so gradients of intermediates (not only of weights) are checked. */
static void
g_chain(struct sim_ob *b)
{
    param(b, "x", 2, DIMS(3, 4), D_ANY);
    param(b, "w", 2, DIMS(4, 4), D_ANY);
    sim_ob_node(b, "MatMul", "mm", "x,w", "h");
    sim_ob_node(b, "Tanh", "t", "h", "h2");
    sim_ob_node(b, "Mul", "sq", "h2,x", "h3");
    sim_ob_node(b, "Softmax", "sm", "h3", "y");
}

struct gcase {
    const char *op;             /* the op whose gradient rule the case checks */
    const char *what;
    void (*build)(struct sim_ob *b);
    float eps, tol;
};

/* ---- ConvTranspose, Resize, LSTM, GRU ---- */

static void
g_convt(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(2, 4, 3, 4), D_ANY);
    param(b, "w", 4, DIMS(4, 2, 3, 2), D_ANY);
    param(b, "bias", 1, DIMS(4), D_ANY);
    sim_ob_node(b, "ConvTranspose", "n", "x,w,bias", "y");
    sim_ob_attr_int(b, "group", 2);
    sim_ob_attr_ints(b, "strides", DIMS(2, 3), 2);
    sim_ob_attr_ints(b, "dilations", DIMS(2, 1), 2);
    sim_ob_attr_ints(b, "pads", DIMS(1, 0, 0, 1), 4);
    sim_ob_attr_ints(b, "output_padding", DIMS(1, 1), 2);
}

static void
g_convt_1d(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 3, 5), D_ANY);
    param(b, "w", 3, DIMS(3, 2, 4), D_ANY);
    sim_ob_node(b, "ConvTranspose", "n", "x,w", "y");
    sim_ob_attr_ints(b, "strides", DIMS(2), 1);
    sim_ob_attr_ints(b, "pads", DIMS(1, 1), 2);
}

static void
g_convt_3d(struct sim_ob *b)
{
    param(b, "x", 5, DIMS(1, 2, 2, 3, 2), D_ANY);
    param(b, "w", 5, DIMS(2, 2, 2, 2, 3), D_ANY);
    param(b, "bias", 1, DIMS(2), D_ANY);
    sim_ob_node(b, "ConvTranspose", "n", "x,w,bias", "y");
    sim_ob_attr_ints(b, "strides", DIMS(1, 2, 1), 3);
}

static void
g_resize_linear(struct sim_ob *b)
{
    static const float scales[4] = { 1.0f, 1.0f, 2.0f, 1.5f };
    param(b, "x", 4, DIMS(2, 2, 3, 4), D_ANY);
    sim_ob_initializer(b, "scales", F32, 1, DIMS(4), scales);
    sim_ob_node(b, "Resize", "n", "x,,scales", "y");
    sim_ob_attr_str(b, "mode", "linear");
    sim_ob_attr_str(b, "coordinate_transformation_mode", "pytorch_half_pixel");
}

static void
g_resize_nearest(struct sim_ob *b)
{
    static const float scales[4] = { 1.0f, 1.0f, 2.0f, 3.0f };
    param(b, "x", 4, DIMS(1, 2, 3, 2), D_ANY);
    sim_ob_initializer(b, "scales", F32, 1, DIMS(4), scales);
    sim_ob_node(b, "Resize", "n", "x,,scales", "y");
    sim_ob_attr_str(b, "mode", "nearest");
    sim_ob_attr_str(b, "coordinate_transformation_mode", "asymmetric");
    sim_ob_attr_str(b, "nearest_mode", "floor");
}

static void
g_resize_cubic(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(1, 1, 5, 4), D_ANY);
    ints(b, "sizes", 1, DIMS(4), DIMS(1, 1, 3, 7));
    sim_ob_node(b, "Resize", "n", "x,,,sizes", "y");
    sim_ob_attr_str(b, "mode", "cubic");
    sim_ob_attr_str(b, "coordinate_transformation_mode", "align_corners");
    sim_ob_attr_int(b, "exclude_outside", 1);
}

static void
g_resize_crop(struct sim_ob *b)
{
    static const float roi[6] = { 0.0f, 0.2f, -0.1f, 1.0f, 0.9f, 1.2f };
    param(b, "x", 3, DIMS(2, 4, 5), D_ANY);
    sim_ob_initializer(b, "roi", F32, 1, DIMS(6), roi);
    ints(b, "sizes", 1, DIMS(3), DIMS(2, 3, 6));
    sim_ob_node(b, "Resize", "n", "x,roi,,sizes", "y");
    sim_ob_attr_str(b, "mode", "linear");
    sim_ob_attr_str(b, "coordinate_transformation_mode", "tf_crop_and_resize");
    sim_ob_attr_float(b, "extrapolation_value", 3.0f);
}

static void
g_upsample(struct sim_ob *b)
{
    static const float scales[4] = { 1.0f, 1.0f, 2.0f, 2.0f };
    param(b, "x", 4, DIMS(2, 1, 2, 3), D_ANY);
    sim_ob_initializer(b, "scales", F32, 1, DIMS(4), scales);
    sim_ob_node(b, "Upsample", "n", "x,scales", "y");
    sim_ob_attr_str(b, "mode", "linear");
}

static void
g_lstm(struct sim_ob *b)
{
    /* bidirectional, layout 0, bias, initial states, peepholes; Y, Y_h and Y_c all used */
    param(b, "x", 3, DIMS(3, 2, 3), D_ANY);
    param(b, "w", 3, DIMS(2, 8, 3), D_ANY);
    param(b, "rw", 3, DIMS(2, 8, 2), D_ANY);
    param(b, "bias", 2, DIMS(2, 16), D_ANY);
    param(b, "h0", 3, DIMS(2, 2, 2), D_ANY);
    param(b, "c0", 3, DIMS(2, 2, 2), D_ANY);
    param(b, "p", 2, DIMS(2, 6), D_ANY);
    sim_ob_node(b, "LSTM", "n", "x,w,rw,bias,,h0,c0,p", "ya,yh,yc");
    sim_ob_attr_int(b, "hidden_size", 2);
    sim_ob_attr_str(b, "direction", "bidirectional");
    sim_ob_node(b, "Mul", "m", "yh,yc", "hc");
    sim_ob_node(b, "Add", "a", "ya,hc", "y");
}

static void
g_lstm_rev(struct sim_ob *b)
{
    /* reverse, layout 1 (batch first), no bias or states; Y_h only */
    param(b, "x", 3, DIMS(2, 4, 3), D_ANY);
    param(b, "w", 3, DIMS(1, 12, 3), D_ANY);
    param(b, "rw", 3, DIMS(1, 12, 3), D_ANY);
    sim_ob_node(b, "LSTM", "n", "x,w,rw", ",y");
    sim_ob_attr_int(b, "hidden_size", 3);
    sim_ob_attr_int(b, "layout", 1);
    sim_ob_attr_str(b, "direction", "reverse");
}

static void
g_gru(struct sim_ob *b)
{
    /* PyTorch's form: linear_before_reset, bidirectional, layout 1, bias, initial_h */
    param(b, "x", 3, DIMS(2, 3, 3), D_ANY);
    param(b, "w", 3, DIMS(2, 6, 3), D_ANY);
    param(b, "rw", 3, DIMS(2, 6, 2), D_ANY);
    param(b, "bias", 2, DIMS(2, 12), D_ANY);
    param(b, "h0", 3, DIMS(2, 2, 2), D_ANY);
    sim_ob_node(b, "GRU", "n", "x,w,rw,bias,,h0", "ya,yh");
    sim_ob_attr_int(b, "hidden_size", 2);
    sim_ob_attr_int(b, "layout", 1);
    sim_ob_attr_int(b, "linear_before_reset", 1);
    sim_ob_attr_str(b, "direction", "bidirectional");
    ints(b, "shp", 1, DIMS(4), DIMS(2, 1, 2, 2));   /* Y_h (N, dirs, H) against Y (N, T, ..) */
    sim_ob_node(b, "Reshape", "t", "yh,shp", "yht");
    sim_ob_node(b, "Mul", "m", "ya,yht", "y");
}

static void
g_gru_reset(struct sim_ob *b)
{
    /* ONNX's default: the reset gate before the recurrent product */
    param(b, "x", 3, DIMS(3, 2, 2), D_ANY);
    param(b, "w", 3, DIMS(1, 9, 2), D_ANY);
    param(b, "rw", 3, DIMS(1, 9, 3), D_ANY);
    param(b, "bias", 2, DIMS(1, 18), D_ANY);
    param(b, "h0", 3, DIMS(1, 2, 3), D_ANY);
    sim_ob_node(b, "GRU", "n", "x,w,rw,bias,,h0", "y");
    sim_ob_attr_int(b, "hidden_size", 3);
}

/* ---- the ops of issue 19: InstanceNormalization, Max, Min, PRelu, Selu, Celu, Sign,
 * Round, Tile, DepthToSpace, SpaceToDepth, Trilu, CumSum, TopK ---- */

/* A trainable weight with the given values (for inputs whose order must be controlled). */
static void
param_vals(struct sim_ob *b, const char *name, int rank, const int64_t *d, const float *v)
{
    sim_ob_initializer(b, name, F32, rank, d, v);
    assert_true(n_params < MAX_PARAMS);
    params[n_params++] = name;
}

static void
g_instnorm(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(2, 3, 2, 3), D_ANY);
    param(b, "scale", 1, DIMS(3), D_POS);
    param(b, "bias", 1, DIMS(3), D_ANY);
    sim_ob_node(b, "InstanceNormalization", "n", "x,scale,bias", "y");
    sim_ob_attr_float(b, "epsilon", 1e-3f);
}

/* torch.nn.GroupNorm(2, 4)'s export: Reshape (N, 2, -1), InstanceNormalization with
 * constant scale 1 and bias 0, Reshape back, Mul by the weight, Add the bias */
static void
g_groupnorm(struct sim_ob *b)
{
    static const float ones[2] = { 1.0f, 1.0f }, zeros[2] = { 0.0f, 0.0f };

    param(b, "x", 3, DIMS(2, 4, 3), D_ANY);
    param(b, "w", 2, DIMS(4, 1), D_POS);
    param(b, "bias", 2, DIMS(4, 1), D_ANY);
    ints(b, "grouped", 1, DIMS(3), DIMS(2, 2, -1));
    ints(b, "back", 1, DIMS(3), DIMS(2, 4, 3));
    sim_ob_node(b, "Constant", "c1", "", "ones");
    sim_ob_attr_tensor(b, "value", F32, 1, DIMS(2), ones);
    sim_ob_node(b, "Constant", "c0", "", "zeros");
    sim_ob_attr_tensor(b, "value", F32, 1, DIMS(2), zeros);
    sim_ob_node(b, "Reshape", "r1", "x,grouped", "xg");
    sim_ob_node(b, "InstanceNormalization", "n", "xg,ones,zeros", "ng");
    sim_ob_node(b, "Reshape", "r2", "ng,back", "nb");
    sim_ob_node(b, "Mul", "m", "nb,w", "nw");
    sim_ob_node(b, "Add", "a", "nw,bias", "y");
}

/* a: 24 ramp values, multiples of 0.05; b, c: odd multiples of 0.025, at least 0.025 from
 * every value of a and 0.05 from each other, so no perturbation by eps changes the winner */
static void
g_max3(struct sim_ob *b)
{
    static const float vb[3] = { 0.125f, -0.275f, 0.325f };
    static const float vc[4] = { -0.175f, 0.025f, 0.275f, -0.425f };

    param(b, "a", 3, DIMS(2, 3, 4), D_DISTINCT);
    param_vals(b, "b", 2, DIMS(3, 1), vb);
    param_vals(b, "c", 1, DIMS(4), vc);
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

    param_vals(b, "a", 2, DIMS(3, 4), va);
    param_vals(b, "b", 2, DIMS(3, 4), vb);
    sim_ob_node(b, "Max", "n", "a,b", "y");
}

static void
g_min(struct sim_ob *b)
{
    static const float vb[3] = { 0.125f, -0.275f, 0.325f };

    param(b, "a", 3, DIMS(2, 3, 4), D_DISTINCT);
    param_vals(b, "b", 2, DIMS(3, 1), vb);
    sim_ob_node(b, "Min", "n", "a,b", "y");
}

/* torch.nn.PReLU(3) on (N, C, L): the slope (C, 1) after the exporter's Unsqueeze */
static void
g_prelu(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 3, 4), D_AWAY);
    param(b, "slope", 2, DIMS(3, 1), D_ANY);
    sim_ob_node(b, "PRelu", "n", "x,slope", "y");
}

static void
g_prelu_scalar(struct sim_ob *b)
{
    param(b, "x", 2, DIMS(3, 5), D_AWAY);
    param(b, "slope", 1, DIMS(1), D_POS);
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
    param(b, "x", 2, DIMS(3, 5), D_AWAY);
    sim_ob_node(b, "Sign", "n", "x", "s");
    sim_ob_node(b, "Mul", "m", "x,s", "y");
}

/* x round(2x), x odd multiples of 0.025 (15 ramp values): round(2x) jumps at x = +-0.25,
 * 0.025 away from every x; the gradient is round(2x) alone (Round's own is zero) */
static void
g_round(struct sim_ob *b)
{
    static const float two = 2.0f;

    param(b, "x", 2, DIMS(3, 5), D_DISTINCT);
    sim_ob_initializer(b, "two", F32, 0, NULL, &two);
    sim_ob_node(b, "Mul", "d", "x,two", "x2");
    sim_ob_node(b, "Round", "n", "x2", "rx");
    sim_ob_node(b, "Mul", "m", "x,rx", "y");
}

static void
g_tile(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 1, 3), D_ANY);
    ints(b, "rep", 1, DIMS(3), DIMS(2, 3, 2));
    sim_ob_node(b, "Tile", "n", "x,rep", "y");
}

static void
g_d2s(struct sim_ob *b, const char *mode)
{
    param(b, "x", 4, DIMS(2, 8, 2, 3), D_ANY);
    sim_ob_node(b, "DepthToSpace", "n", "x", "y");
    sim_ob_attr_int(b, "blocksize", 2);
    sim_ob_attr_str(b, "mode", mode);
}

static void g_d2s_dcr(struct sim_ob *b) { g_d2s(b, "DCR"); }
static void g_d2s_crd(struct sim_ob *b) { g_d2s(b, "CRD"); }

static void
g_s2d(struct sim_ob *b)
{
    param(b, "x", 4, DIMS(1, 2, 4, 6), D_ANY);
    sim_ob_node(b, "SpaceToDepth", "n", "x", "y");
    sim_ob_attr_int(b, "blocksize", 2);
}

static void
g_triu(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 3, 4), D_ANY);
    ints(b, "k", 0, NULL, DIMS(1));
    sim_ob_node(b, "Trilu", "n", "x,k", "y");
}

static void
g_tril(struct sim_ob *b)
{
    param(b, "x", 2, DIMS(4, 3), D_ANY);
    ints(b, "k", 0, NULL, DIMS(-1));
    sim_ob_node(b, "Trilu", "n", "x,k", "y");
    sim_ob_attr_int(b, "upper", 0);
}

static void
g_cumsum(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(2, 4, 3), D_ANY);
    ints(b, "axis", 0, NULL, DIMS(1));
    sim_ob_node(b, "CumSum", "n", "x,axis", "y");
}

static void
g_cumsum_rev(struct sim_ob *b)
{
    param(b, "x", 2, DIMS(5, 3), D_ANY);
    ints(b, "axis", 1, DIMS(1), DIMS(-2));
    sim_ob_node(b, "CumSum", "n", "x,axis", "y");
    sim_ob_attr_int(b, "exclusive", 1);
    sim_ob_attr_int(b, "reverse", 1);
}

/* distinct values 0.05 apart, so eps never changes which are the top k */
static void
g_topk(struct sim_ob *b)
{
    param(b, "x", 2, DIMS(3, 5), D_DISTINCT);
    ints(b, "k", 1, DIMS(1), DIMS(3));
    sim_ob_node(b, "TopK", "n", "x,k", "y,idx");
}

static void
g_topk_smallest(struct sim_ob *b)
{
    param(b, "x", 3, DIMS(4, 2, 3), D_DISTINCT);
    ints(b, "k", 1, DIMS(1), DIMS(2));
    sim_ob_node(b, "TopK", "n", "x,k", "y,idx");
    sim_ob_attr_int(b, "axis", 0);
    sim_ob_attr_int(b, "largest", 0);
}

static void
g_conv3d(struct sim_ob *b)
{
    param(b, "x", 5, DIMS(2, 4, 3, 4, 3), D_ANY);
    param(b, "w", 5, DIMS(4, 2, 2, 3, 2), D_ANY);
    param(b, "bias", 1, DIMS(4), D_ANY);
    sim_ob_node(b, "Conv", "n", "x,w,bias", "y");
    sim_ob_attr_int(b, "group", 2);
    sim_ob_attr_ints(b, "strides", DIMS(1, 2, 1), 3);
    sim_ob_attr_ints(b, "dilations", DIMS(2, 1, 1), 3);
    sim_ob_attr_ints(b, "pads", DIMS(1, 1, 0, 0, 1, 1), 6);
}

static const struct gcase cases[] = {
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
    { "Conv", "3x3, asymmetric pads", g_conv, 1e-2f, 1e-3f },
    { "Conv", "groups 2, strides, dilations, pads", g_conv_groups, 1e-2f, 1e-3f },
    { "Conv", "1-D, stride 2", g_conv_1d, 1e-2f, 1e-3f },
    { "Conv", "pointwise, groups 2", g_conv_pointwise, 1e-2f, 1e-3f },
    { "MaxPool", "2x2 stride 2", g_maxpool, 1e-3f, 1e-3f },
    { "MaxPool", "3x3 stride 2 pads 1", g_maxpool_pad, 1e-3f, 1e-3f },
    { "AveragePool", "3x3 stride 2 pads 1", g_avgpool, 1e-2f, 1e-3f },
    { "AveragePool", "count_include_pad", g_avgpool_incl, 1e-2f, 1e-3f },
    { "GlobalAveragePool", "", g_gavgpool, 1e-2f, 1e-3f },
    { "BatchNormalization", "training mode", g_bn, 1e-2f, 1e-3f },
    { "LayerNormalization", "axis -1, scale and bias", g_ln, 1e-2f, 1e-3f },
    { "LayerNormalization", "axis 1, no bias", g_ln_axis, 1e-2f, 1e-3f },
    { "Dropout", "training mode, ratio 0.4", g_dropout, 1e-2f, 1e-3f },
    { "Reshape", "", g_reshape, 1e-2f, 1e-3f },
    { "Flatten", "axis 2", g_flatten, 1e-2f, 1e-3f },
    { "Transpose", "perm (2, 0, 1)", g_transpose, 1e-2f, 1e-3f },
    { "Concat", "an input used twice", g_concat, 1e-2f, 1e-3f },
    { "Squeeze", "", g_squeeze, 1e-2f, 1e-3f },
    { "Unsqueeze", "", g_unsqueeze, 1e-2f, 1e-3f },
    { "Gather", "repeated and negative indices", g_gather, 1e-2f, 1e-3f },
    { "Slice", "negative step and step 2", g_slice, 1e-2f, 1e-3f },
    { "ReduceMean", "axes (0, 2)", g_reducemean, 1e-2f, 1e-3f },
    { "ReduceSum", "axes input", g_reducesum, 1e-2f, 1e-3f },
    { "SoftmaxCrossEntropyLoss", "mean", g_sce, 1e-2f, 1e-3f },
    { "SoftmaxCrossEntropyLoss", "weights, ignore_index, log_prob, (N,C,d)",
      g_sce_weighted, 1e-2f, 1e-3f },
    { "SoftmaxCrossEntropyLoss", "reduction none", g_sce_none, 1e-2f, 1e-3f },
    { "NegativeLogLikelihoodLoss", "sum, weights, (N,C,d)", g_nll, 1e-2f, 1e-3f },
    { "CtcLoss", "mean, blank 0, ragged lengths", g_ctc, 1e-2f, 1e-3f },
    { "CtcLoss", "sum, blank 3, repeated label, empty target", g_ctc_sum, 1e-2f, 1e-3f },
    { "MatMul", "chain MatMul-Tanh-Mul-Softmax", g_chain, 1e-2f, 1e-3f },
    { "HardSigmoid", "alpha 1.5 beta 0.6, both clamps", g_hardsigmoid, 1e-3f, 1e-3f },
    { "HardSwish", "4x: all three pieces", g_hardswish, 1e-3f, 1e-3f },
    { "Elu", "alpha 0.7", g_elu, 1e-2f, 1e-3f },
    { "Softplus", "", g_softplus, 1e-2f, 1e-3f },
    { "Pad", "constant", g_pad_constant, 1e-2f, 1e-3f },
    { "Pad", "reflect", g_pad_reflect, 1e-2f, 1e-3f },
    { "Pad", "edge", g_pad_edge, 1e-2f, 1e-3f },
    { "Pad", "negative pads crop, constant_value input", g_pad_crop, 1e-2f, 1e-3f },
    { "Split", "sizes input, outputs concatenated out of order", g_split, 1e-2f, 1e-3f },
    { "Split", "equal parts, one output unused", g_split_unused, 1e-2f, 1e-3f },
    { "ScatterND", "reduction none, negative index", g_scatternd, 1e-2f, 1e-3f },
    { "ScatterND", "reduction add", g_scatternd_add, 1e-2f, 1e-3f },
    { "ReduceL1", "axes (0, 2)", g_rl1, 1e-2f, 1e-3f },
    { "ReduceL2", "axes (0, 2)", g_rl2, 1e-2f, 1e-3f },
    { "ReduceSumSquare", "axes (0, 2)", g_rssq, 1e-2f, 1e-3f },
    { "ReduceLogSumExp", "axes (0, 2)", g_rlse, 1e-2f, 1e-3f },
    { "ReduceLogSumExp", "all axes, keepdims 0", g_rlse_all, 1e-2f, 1e-3f },
    { "ReduceProd", "axes (0, 2)", g_rprod, 1e-2f, 1e-3f },
    { "ReduceMax", "axes (0, 2)", g_rmax, 1e-2f, 1e-3f },
    { "ReduceMin", "axes (0, 2)", g_rmin, 1e-2f, 1e-3f },
    { "ScatterElements", "reduction none, negative index", g_scel, 1e-2f, 1e-3f },
    { "ScatterElements", "reduction add, duplicate indices", g_scel_add, 1e-2f, 1e-3f },
    { "Scatter", "opset 9's name, axis 1", g_scatter, 1e-2f, 1e-3f },
    { "Where", "bool condition broadcast over x and y", g_where, 1e-2f, 1e-3f },
    { "Mod", "fmod 1, quotients -1 to 1", g_mod, 1e-3f, 1e-3f },
    { "Expand", "(3, 1) to (2, 3, 4)", g_expand, 1e-2f, 1e-3f },
    /* later additions go last: a case's random data is seeded by its position */
    { "Conv", "one image, bias, pads", g_conv_one_image, 1e-2f, 1e-3f },
    { "Conv", "one image per im2col chunk", g_conv_image_chunks, 1e-2f, 1e-3f },
    { "Conv", "depthwise 3x3, pads", g_conv_depthwise, 1e-2f, 1e-3f },
    { "Conv", "depthwise x2, strides, dilations, pads", g_conv_depthwise_s2, 1e-2f, 1e-3f },
    /* ConvTranspose, Resize, LSTM, GRU */
    { "ConvTranspose", "groups 2, strides, dilations, pads, output_padding", g_convt, 1e-2f,
      1e-3f },
    { "ConvTranspose", "1-D, stride 2, pads", g_convt_1d, 1e-2f, 1e-3f },
    { "ConvTranspose", "3-D, bias", g_convt_3d, 1e-2f, 1e-3f },
    { "Resize", "linear, pytorch_half_pixel, scales 2 x 1.5", g_resize_linear, 1e-2f, 1e-3f },
    { "Resize", "nearest, asymmetric, floor", g_resize_nearest, 1e-2f, 1e-3f },
    { "Resize", "cubic, align_corners, exclude_outside, sizes", g_resize_cubic, 1e-2f,
      1e-3f },
    { "Resize", "linear, tf_crop_and_resize, extrapolation", g_resize_crop, 1e-2f, 1e-3f },
    { "Upsample", "linear, scales 2 x 2", g_upsample, 1e-2f, 1e-3f },
    { "LSTM", "bidirectional, bias, states, peepholes, Y Y_h Y_c", g_lstm, 1e-2f, 1e-3f },
    { "LSTM", "reverse, layout 1, Y_h only", g_lstm_rev, 1e-2f, 1e-3f },
    { "GRU", "linear_before_reset, bidirectional, layout 1", g_gru, 1e-2f, 1e-3f },
    { "GRU", "reset before the product, initial_h", g_gru_reset, 1e-2f, 1e-3f },
    /* Floor, Ceil */
    { "Floor", "a - b floor(a / b) (torch.remainder)", g_floor, 1e-3f, 1e-3f },
    { "Ceil", "x ceil(x)", g_ceil, 1e-2f, 1e-3f },
    /* issue 19's ops */
    { "InstanceNormalization", "(2,3,2,3), epsilon 1e-3", g_instnorm, 1e-2f, 1e-3f },
    { "InstanceNormalization", "torch.nn.GroupNorm(2, 4)'s export", g_groupnorm, 1e-2f,
      1e-3f },
    { "Max", "three inputs broadcast, no ties", g_max3, 1e-2f, 1e-3f },
    { "Max", "ties split the gradient evenly", g_max_ties, 1e-2f, 1e-3f },
    { "Min", "broadcast (2,3,4), (3,1)", g_min, 1e-2f, 1e-3f },
    { "PRelu", "slope (C, 1)", g_prelu, 1e-2f, 1e-3f },
    { "PRelu", "one slope", g_prelu_scalar, 1e-2f, 1e-3f },
    { "Selu", "", g_selu, 1e-2f, 1e-3f },
    { "Celu", "alpha 0.7", g_celu, 1e-2f, 1e-3f },
    { "Sign", "x sign(x)", g_sign, 1e-2f, 1e-3f },
    { "Round", "x round(2x)", g_round, 1e-2f, 1e-3f },
    { "Tile", "repeats (2, 3, 2)", g_tile, 1e-2f, 1e-3f },
    { "DepthToSpace", "DCR, blocksize 2", g_d2s_dcr, 1e-2f, 1e-3f },
    { "DepthToSpace", "CRD, blocksize 2", g_d2s_crd, 1e-2f, 1e-3f },
    { "SpaceToDepth", "blocksize 2", g_s2d, 1e-2f, 1e-3f },
    { "Trilu", "upper, k 1, batch of 2", g_triu, 1e-2f, 1e-3f },
    { "Trilu", "lower, k -1", g_tril, 1e-2f, 1e-3f },
    { "CumSum", "axis 1", g_cumsum, 1e-2f, 1e-3f },
    { "CumSum", "exclusive, reverse, axis -2", g_cumsum_rev, 1e-2f, 1e-3f },
    { "TopK", "k 3 of 5, largest", g_topk, 1e-2f, 1e-3f },
    { "TopK", "k 2 of 4, smallest, axis 0", g_topk_smallest, 1e-2f, 1e-3f },
    { "Conv", "3-D: groups 2, strides, dilations, pads, bias", g_conv3d, 1e-2f, 1e-3f },
};

#define N_CASES (sizeof(cases) / sizeof(cases[0]))

/* ---- harness ----------------------------------------------------------------------------- */

static struct sim_model *
load(struct sim_ob *b)
{
    struct sim_model *m = NULL;
    struct sim_err err;
    void *bytes;
    size_t len;

    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    if (sim_model_load(bytes, len, &m, &err) != 0)
        fail_msg("%s", err.msg);
    free(bytes);
    return m;
}

/* Builds the case, once to learn y's shape, then with the loss appended. */
static struct sim_model *
case_model(const struct gcase *gc, int seed)
{
    struct sim_ob *b = sim_ob_new(17);
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_model *m;
    struct sim_err err;
    int64_t dims[SIM_MAX_RANK];
    int dtype, rank;

    rng_state = 0x9e3779b97f4a7c15ull + (uint64_t)seed;
    n_params = 0;
    gc->build(b);
    sim_ob_output(b, "y", F32);
    m = load(b);
    sim_ob_free(b);
    sim_compile_opts_init(&o);
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("%s (%s): %s", gc->op, gc->what, err.msg);
    assert_int_equal(sim_exe_tensor_info(e, "y", &dtype, &rank, dims), 0);
    sim_exe_free(e);
    sim_model_free(m);

    b = sim_ob_new(17);
    rng_state = 0x9e3779b97f4a7c15ull + (uint64_t)seed;
    n_params = 0;
    gc->build(b);
    fconst(b, "r", rank, dims, D_ANY);
    sim_ob_node(b, "Mul", "weigh", "y,r", "yr");
    sim_ob_node(b, "ReduceSum", "total", "yr", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    m = load(b);
    sim_ob_free(b);
    return m;
}

static float
run_loss(struct sim_exe *e, bool reseed)
{
    struct sim_err err;

    if (reseed)
        assert_int_equal(sim_exe_set_seed(e, 7, &err), 0);
    if (sim_exe_run(e, &err) != 0)
        fail_msg("%s", err.msg);
    return ((const float *)sim_exe_output_buffer(e, 0))[0];
}

/* Max error of one case over every element of every weight. */
static double
check_case(const struct gcase *gc, int seed)
{
    static const char *frozen[] = { "r" };
    struct sim_model *m = case_model(gc, seed);
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;
    double maxerr = 0.0;
    bool reseed = strcmp(gc->op, "Dropout") == 0;

    sim_compile_opts_init(&o);
    o.loss = "loss";
    sim_optimizer_init(&o.optimizer, SIM_OPT_SGD);
    o.optimizer.lr = 0.0f;
    o.frozen_weights = frozen;
    o.n_frozen_weights = 1;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("%s (%s): %s", gc->op, gc->what, err.msg);
    run_loss(e, reseed);
    for (int p = 0; p < n_params; p++) {
        long wi = sim_exe_weight_index(e, params[p]);
        struct sim_weight_info info;
        float *w, *grad;
        size_t n;
        assert_true(wi >= 0);
        sim_exe_weight_info(e, (size_t)wi, &info);
        if (info.kind != SIM_WEIGHT_TRAINABLE)
            fail_msg("%s (%s): weight '%s' is not trainable", gc->op, gc->what, params[p]);
        n = info.bytes / sizeof(float);
        w = malloc(info.bytes + 4);
        grad = malloc(info.bytes + 4);
        assert_non_null(w);
        assert_non_null(grad);
        run_loss(e, reseed);    /* the gradient at the unperturbed weights */
        assert_int_equal(sim_exe_read_gradient(e, params[p], grad, info.bytes, &err), 0);
        assert_int_equal(sim_exe_read_weight(e, params[p], w, info.bytes, &err), 0);
        for (size_t i = 0; i < n; i++) {
            float keep = w[i], lp, lm;
            double num, d;
            w[i] = keep + gc->eps;
            assert_int_equal(sim_exe_write_weight(e, params[p], w, info.bytes, &err), 0);
            lp = run_loss(e, reseed);
            w[i] = keep - gc->eps;
            assert_int_equal(sim_exe_write_weight(e, params[p], w, info.bytes, &err), 0);
            lm = run_loss(e, reseed);
            w[i] = keep;
            assert_int_equal(sim_exe_write_weight(e, params[p], w, info.bytes, &err), 0);
            num = ((double)lp - (double)lm) / (2.0 * gc->eps);
            d = fabs((double)grad[i] - num) / (1.0 + fabs(num));
            if (!(d <= gc->tol))
                printf("  %s (%s): d loss / d %s[%zu] = %.6g, central difference %.6g\n",
                       gc->op, gc->what, params[p], i, grad[i], num);
            if (!(d <= maxerr))
                maxerr = d;
        }
        free(w);
        free(grad);
    }
    sim_exe_free(e);
    sim_model_free(m);
    return maxerr;
}

static void
test_gradients(void **state)
{
    int failed = 0;

    (void)state;
    for (size_t c = 0; c < N_CASES; c++) {
        const struct gcase *gc = &cases[c];
        double err = check_case(gc, (int)c);
        bool ok = err <= gc->tol;
        printf("%-26s %-46s max error %.2e (tol %.0e) %s\n", gc->op, gc->what, err,
               (double)gc->tol, ok ? "OK" : "NOT OK");
        failed += !ok;
    }
    assert_int_equal(failed, 0);
}

/* The ops the training issue requires gradients for. */
static const char *const required[] = {
    "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Sqrt", "Exp", "Log", "Pow", "Erf", "Clip",
    "MatMul", "Gemm", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "Relu",
    "LeakyRelu", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "BatchNormalization",
    "LayerNormalization", "Dropout", "Reshape", "Flatten", "Transpose", "Concat", "Squeeze",
    "Unsqueeze", "Identity", "Gather", "Slice", "ReduceMean", "ReduceSum", "Cast",
    "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss", "CtcLoss", "HardSigmoid",
    "HardSwish", "Elu", "Softplus", "Pad", "Split", "ScatterND", "ReduceL1", "ReduceL2",
    "ReduceSumSquare", "ReduceLogSumExp", "ReduceProd", "Where", "Mod", "Expand", /* issue 19: */
    "InstanceNormalization", "Max", "Min", "PRelu", "Selu", "Celu", "Sign", "Round", "Tile",
    "DepthToSpace", "SpaceToDepth", "Trilu", "CumSum", "TopK", "ScatterElements", "ReduceMax",
    "ReduceMin",
};

static void
check_covered(const struct sim_op *op, void *ud)
{
    int *missing = ud;
    bool found = false;

    if (op->backward == NULL)
        return;
    for (size_t c = 0; c < N_CASES; c++)
        found = found || strcmp(cases[c].op, op->name) == 0;
    if (!found) {
        printf("op %s has a backward rule but no gradient-check case\n", op->name);
        (*missing)++;
    }
}

static void
test_table_covers_every_op(void **state)
{
    int missing = 0;

    (void)state;
    sim_op_foreach(check_covered, &missing);
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        const struct sim_op *op = sim_op_find(required[i]);
        if (op == NULL)
            op = sim_op_find_in("ai.graphcore", required[i]);
        if (op == NULL || op->backward == NULL) {
            printf("op %s has no backward rule\n", required[i]);
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_covers_every_op),
        cmocka_unit_test(test_gradients),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
