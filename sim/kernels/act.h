/*
 * act.h — elementwise activations as data: what a node computes (kind and constants), and
 * the routines that apply one to a range of floats. The activation ops (op_activation.c,
 * Clip in op_unary.c) run them over their whole tensor, split over the pool; an op that
 * produces an activation's input (Conv) applies the same routine to each piece of its
 * output right after computing it, when the compiler has fused the two (fuse.c), so the
 * numbers are the same either way.
 *
 * Every kind but Elu and Softplus runs eight floats at a time (vmath.h's sim_v8f; Sigmoid
 * and SiLU, bound by arithmetic, in each level's register width: 4, 8 or 16 floats, hot.h)
 * with the same float operations as its scalar tail, so a value rounds alike wherever it
 * falls.
 */
#ifndef SIM_ACT_H
#define SIM_ACT_H

#include <stdbool.h>
#include <stdint.h>

enum sim_act_kind {
    SIM_ACT_NONE = 0,
    SIM_ACT_RELU,       /* x > 0 ? x : 0 */
    SIM_ACT_CLIP,       /* x < a ? a : x, then > b ? b (Clip: a = min, b = max) */
    SIM_ACT_LEAKY,      /* x >= 0 ? x : a x */
    SIM_ACT_HSIGMOID,   /* clamp(a x + b, 0, 1) */
    SIM_ACT_HSWISH,     /* x clamp(a x + b, 0, 1) (a = 1/6, b = 1/2) */
    SIM_ACT_SIGMOID,    /* 1 / (1 + e^-x), vmath.h's exp */
    SIM_ACT_SILU,       /* x sigmoid(x): the sigmoid rounded to float, then the product */
    SIM_ACT_ELU,        /* x > 0 ? x : a (e^x - 1) */
    SIM_ACT_SOFTPLUS,   /* ln(1 + e^x) without overflow */
    SIM_ACT_KINDS
};

/* One activation: its kind and the constants the kind uses (a, b above). */
struct sim_act {
    int kind;           /* enum sim_act_kind */
    float a, b;
};

/*
 * y[i] = act(x[i]) for i in [lo, hi), on the calling thread; y == x is allowed (in place),
 * other overlaps are not. SIM_ACT_NONE copies (or, in place, does nothing).
 */
void sim_act_range(const struct sim_act *act, const float *x, float *y, int64_t lo,
                   int64_t hi);

/* y = act(x) over n floats, split over the pool (sim_pool_for); y == x is allowed. Must not
 * be called from inside a pool piece for speed (it would run serially, correctly). */
void sim_act_map(const struct sim_act *act, const float *x, float *y, int64_t n);

/* The kind's name as ONNX calls it ("Relu", ..., "SiLU" for x sigmoid(x)). */
const char *sim_act_name(int kind);

struct sim_op;

/* What the fusion helpers below see of a scheduled node (fuse.c fills it from the
 * executable): its op and parameters, whether input 0 is present and float and there is
 * exactly one output, and for inputs 1 and 2 (Clip's bounds) whether each is present and
 * its compile-time data (NULL when it is not a compile-time value). */
struct sim_act_node {
    const struct sim_op *op;
    const void *params;
    int n_in;
    bool float_in;
    bool one_out;
    bool has_in[3];
    const void *cdata[3];
};

/*
 * For fuse.c: the activation node n computes, into *act, when it is one a producer can
 * apply (Relu, LeakyRelu, Sigmoid, HardSigmoid, HardSwish, Elu, Softplus on floats:
 * op_activation.c; Clip on floats with bounds known at compile time: op_unary.c).
 * Returns false for any other node.
 */
bool sim_activation_act(const struct sim_act_node *n, struct sim_act *act);
bool sim_clip_act(const struct sim_act_node *n, struct sim_act *act);

/* The internal op a fused Sigmoid -> Mul(x, sigmoid(x)) becomes: one pass of x sigmoid(x)
 * (op_activation.c; not in any op table, so no model can name it). */
extern const struct sim_op sim_op_silu;

/* The internal op of a fused Add -> activation (same-shape float operands): y = act(a + b)
 * in one pass, the activation bound as sim_kern.act (op_activation.c; named "Add", so the
 * cost model charges it as the Add it replaces). */
extern const struct sim_op sim_op_add_act;

/* The internal ops of a fused LayerNorm over the last axis and of a fused exact-erf GELU
 * (op_layernorm.c; in no op table; Gelu alone in training too). fuse.c allocates their
 * parameters (owned by the node, freed with it) and points the node's `in` at their `in`
 * array. */
struct sim_ln_params {
    int in[3];                  /* x, scale, bias */
    int64_t rows, cols;         /* x viewed as (rows, cols), cols its last dim */
    int64_t hw;                 /* > 0: x is channels first, (rows / hw, cols, hw), and the
                                 * output channels last (a Transpose fused in); else 0 */
    float eps;
    bool scalar_scale, scalar_bias; /* one value each, else cols values */
};

struct sim_gelu_params {
    int in[2];                  /* a, and the bias added to it first (or -1: none) */
    int64_t cols;               /* the last dim: the bias's length */
    bool chain;                 /* training: the exported chain's own operations (Div by c,
                                 * the Erf op's erf, Add 1, Mul x, Mul 0.5), so its bits;
                                 * no bias then. false: the faster formula (inference) */
    float c;                    /* chain: the divisor the graph gives (sqrt 2 as a float) */
};

/* The end of a ConvNeXt block fused (op_layernorm.c): z (n, hw, c) -> Add(z, bias) ->
 * Transpose to (n, c, hw) -> Mul(scale (c, 1, 1)) -> Add(res). */
struct sim_tail_params {
    int in[4];                  /* z, bias (or -1), scale, res */
    int64_t n, hw, c;
};

/* y = (x - mean) / sqrt(var + eps) * scale + bias per row, as the exported nine nodes. */
extern const struct sim_op sim_op_layernorm;

/* y = x (erf(x / sqrt 2) + 1) 0.5 with x = a (+ bias): the exported five nodes (and Add),
 * within 5e-7 of them (op_layernorm.c). */
extern const struct sim_op sim_op_gelu;

/* y[n, c, p] = (z[n, p, c] + bias[c]) * scale[c] + res[n, c, p], the four nodes' bits. */
extern const struct sim_op sim_op_tail;

#endif
