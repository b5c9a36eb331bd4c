/*
 * act.c — the activation routines of act.h: one loop per kind, eight floats at a time with
 * vmath.h's vectors and a scalar tail doing the same float operations in the same order,
 * and the pool split of a whole tensor.
 *
 * Sigmoid and SiLU are bound by arithmetic, not memory: they run sixteen floats at a time,
 * with an AVX-512 copy besides the AVX2 and baseline ones (hot.h).
 *
 * The formulas are those the ops always used (op_activation.c, Clip in op_unary.c), so
 * Clip, LeakyRelu, HardSigmoid and HardSwish give the same bits as before; Relu is x < 0 ?
 * 0 : x, PyTorch's (NaN stays NaN, -0 stays -0; it was x > 0 ? x : 0, which made NaN 0); Sigmoid is
 * vmath.h's exp as before; SiLU rounds the sigmoid to float and multiplies, exactly what
 * Sigmoid followed by Mul computes. Elu and Softplus call libm per element (scalar).
 */
#include <math.h>
#include <string.h>

#include "act.h"
#include "hot.h"
#include "pool.h"
#include "vmath.h"

#define LD(p) (*(const sim_v8f_u *)(p))
#define ST(p, v) (*(sim_v8f_u *)(p) = (v))

SIM_HOT_FN(relu_range, (const float *x, float *y, int64_t lo, int64_t hi), (x, y, lo, hi))
{
    int64_t i = lo;

    for (; i + 8 <= hi; i += 8) {
        sim_v8f v = LD(x + i);
        ST(y + i, sim_v8sel(v < 0.0f, SIM_V8(0.0f), v));
    }
    for (; i < hi; i++)
        y[i] = x[i] < 0.0f ? 0.0f : x[i];
}

SIM_HOT_FN(clip_range,
           (const float *x, float *y, int64_t lo, int64_t hi, float a, float b),
           (x, y, lo, hi, a, b))
{
    int64_t i = lo;

    for (; i + 8 <= hi; i += 8) {
        sim_v8f v = LD(x + i);
        v = sim_v8sel(v < a, SIM_V8(a), v);
        ST(y + i, sim_v8sel(v > b, SIM_V8(b), v));
    }
    for (; i < hi; i++) {
        float v = x[i] < a ? a : x[i];
        y[i] = v > b ? b : v;
    }
}

SIM_HOT_FN(leaky_range,
           (const float *x, float *y, int64_t lo, int64_t hi, float a),
           (x, y, lo, hi, a))
{
    int64_t i = lo;

    for (; i + 8 <= hi; i += 8) {
        sim_v8f v = LD(x + i);
        ST(y + i, sim_v8sel(v >= 0.0f, v, a * v));
    }
    for (; i < hi; i++)
        y[i] = x[i] >= 0.0f ? x[i] : a * x[i];
}

/* HardSigmoid (swish false) or HardSwish (swish true). */
SIM_HOT_FN(hard_range,
           (const float *x, float *y, int64_t lo, int64_t hi, float a, float b, bool swish),
           (x, y, lo, hi, a, b, swish))
{
    int64_t i = lo;

    for (; i + 8 <= hi; i += 8) {
        sim_v8f v = LD(x + i), h = a * v + b;
        h = sim_v8sel(h < 0.0f, SIM_V8(0.0f), sim_v8sel(h > 1.0f, SIM_V8(1.0f), h));
        ST(y + i, swish ? v * h : h);
    }
    for (; i < hi; i++) {
        float v = x[i], h = a * v + b;
        h = h < 0.0f ? 0.0f : h > 1.0f ? 1.0f : h;
        y[i] = swish ? v * h : h;
    }
}

/* Sixteen floats at a time for Sigmoid and SiLU, which are bound by arithmetic (the other
 * kinds by memory): an AVX-512 copy (SIM_HOT_WIDE_FN) runs them in one register (twice the
 * AVX2 copy's rate), the AVX2 copy in two; the operations, and so the bits, are the same in
 * every copy. */
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
typedef float v16f_u __attribute__((vector_size(64), aligned(4), may_alias));

#define V16(c) ((v16f){ (c), (c), (c), (c), (c), (c), (c), (c), (c), (c), (c), (c), (c), \
                        (c), (c), (c) })
#define SEL16(m, a, b) ((v16f)(((m) & (v16i)(a)) | (~(m) & (v16i)(b))))

/*
 * *v = e^*v for *v <= 0 (or NaN): vmath.h's sim_v8expf without the operations that cannot
 * change such an input (the upper clamp, the rounding's sign test: fx <= 0 rounds as
 * fx - 0.5 truncated, and the exponent's lower clamp: x >= -87.34 gives n >= -126), so
 * the results are sim_v8expf's, bit for bit, in fewer instructions. A NaN lane gets n = 0
 * (converting NaN to an integer is undefined behaviour, and n + 127 then shifted a
 * negative value) and comes back NaN through r: Sigmoid and SiLU of NaN are NaN, as in
 * PyTorch.
 */
static inline __attribute__((always_inline)) void
v16exp_nonpos(v16f *v)
{
    v16f x = *v, fx, r, y, nf;
    v16i n;

    x = SEL16(x < -87.3365447505531f, V16(-87.3365447505531f), x);
    fx = x * 1.44269504088896341f;
    n = __builtin_convertvector(SEL16(fx == fx, fx - 0.5f, V16(0.0f)), v16i);
    nf = __builtin_convertvector(n, v16f);
    r = x - nf * 0.693359375f + nf * 2.12194440e-4f;
    y = SIM_EXPF_POLY(r);
    *v = y * (v16f)((n + 127) << 23);
}

/* The same for one float (vmath.h's sim_vexpf, bit for bit, for x <= 0 or NaN). */
static inline __attribute__((always_inline)) float
exp_nonpos(float x)
{
    float fx, r, y, s;
    int32_t n, bits;

    x = x < -87.3365447505531f ? -87.3365447505531f : x;
    fx = x * 1.44269504088896341f;
    n = fx == fx ? (int32_t)(fx - 0.5f) : 0; /* NaN: 0, the result NaN through r */
    r = x - (float)n * 0.693359375f + (float)n * 2.12194440e-4f;
    y = SIM_EXPF_POLY(r);
    bits = (n + 127) << 23;
    memcpy(&s, &bits, sizeof(s));
    return y * s;
}

/* Sigmoid (silu false) or x sigmoid(x) (silu true); the sigmoid as e^x / (1 + e^x) for
 * x < 0 (no overflow), and +0 below -87.34, where the exp's input is clamped (it gave
 * e^-87.34, 1.2e-38, for every such x): PyTorch's float sigmoid is 1 / (1 + e^-x), +0 once
 * e^-x overflows (x < -88.72), so Sigmoid(-inf) is +0, SiLU(-inf) is -inf * 0 = NaN and
 * SiLU(-100) is -0, PyTorch's bits; between -88.72 and -87.34 PyTorch gives values under
 * 1.2e-38, here 0. */
SIM_HOT_WIDE_FN(sigmoid_range,
                (const float *x, float *y, int64_t lo, int64_t hi, bool silu),
                (x, y, lo, hi, silu))
{
    int64_t i = lo;

    for (; i + 16 <= hi; i += 16) {
        v16f v = *(const v16f_u *)(x + i), s;
        v16f e = SEL16(v >= 0.0f, -v, v);
        v16exp_nonpos(&e);
        s = SEL16(v >= 0.0f, V16(1.0f), e) / (1.0f + e);
        s = SEL16(v < -87.3365447505531f, V16(0.0f), s);
        *(v16f_u *)(y + i) = silu ? v * s : s;
    }
    for (; i < hi; i++) {
        float v = x[i], e = exp_nonpos(v >= 0.0f ? -v : v), s;
        s = (v >= 0.0f ? 1.0f : e) / (1.0f + e);
        s = v < -87.3365447505531f ? 0.0f : s;
        y[i] = silu ? v * s : s;
    }
}

static void
elu_range(const float *x, float *y, int64_t lo, int64_t hi, float a)
{
    for (int64_t i = lo; i < hi; i++) {
        float v = x[i];
        y[i] = v > 0.0f ? v : a * expm1f(v);
    }
}

static void
softplus_range(const float *x, float *y, int64_t lo, int64_t hi)
{
    for (int64_t i = lo; i < hi; i++) {
        float v = x[i];
        y[i] = v > 0.0f ? v + log1pf(expf(-v)) : log1pf(expf(v));
    }
}

void
sim_act_range(const struct sim_act *act, const float *x, float *y, int64_t lo, int64_t hi)
{
    switch (act->kind) {
    case SIM_ACT_RELU: relu_range(x, y, lo, hi); break;
    case SIM_ACT_CLIP: clip_range(x, y, lo, hi, act->a, act->b); break;
    case SIM_ACT_LEAKY: leaky_range(x, y, lo, hi, act->a); break;
    case SIM_ACT_HSIGMOID: hard_range(x, y, lo, hi, act->a, act->b, false); break;
    case SIM_ACT_HSWISH: hard_range(x, y, lo, hi, act->a, act->b, true); break;
    case SIM_ACT_SIGMOID: sigmoid_range(x, y, lo, hi, false); break;
    case SIM_ACT_SILU: sigmoid_range(x, y, lo, hi, true); break;
    case SIM_ACT_ELU: elu_range(x, y, lo, hi, act->a); break;
    case SIM_ACT_SOFTPLUS: softplus_range(x, y, lo, hi); break;
    default:
        if (y != x && hi > lo)
            memcpy(y + lo, x + lo, (size_t)(hi - lo) * sizeof(float));
        break;
    }
}

/* What the pieces of one map share. */
struct act_run {
    const struct sim_act *act;
    const float *x;
    float *y;
};

static void
act_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct act_run *r = ctx;

    sim_act_range(r->act, r->x, r->y, lo, hi);
}

void
sim_act_map(const struct sim_act *act, const float *x, float *y, int64_t n)
{
    struct act_run r = { act, x, y };
    /* libm per element: smaller pieces are worth their hand-off */
    int64_t grain = act->kind == SIM_ACT_ELU || act->kind == SIM_ACT_SOFTPLUS
                        ? SIM_POOL_MAP_GRAIN / 8
                        : SIM_POOL_MAP_GRAIN;

    sim_pool_for(n, grain, act_piece, &r);
}

const char *
sim_act_name(int kind)
{
    static const char *const names[SIM_ACT_KINDS] = { "none", "Relu", "Clip", "LeakyRelu",
                                                      "HardSigmoid", "HardSwish", "Sigmoid",
                                                      "SiLU", "Elu", "Softplus" };

    return kind >= 0 && kind < SIM_ACT_KINDS ? names[kind] : "?";
}
