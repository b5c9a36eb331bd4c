/*
 * act.c — the activation routines of act.h: one loop per kind, eight floats at a time with
 * vmath.h's vectors and a scalar tail doing the same float operations in the same order,
 * and the pool split of a whole tensor.
 *
 * Sigmoid and SiLU are bound by arithmetic, not memory: they run in vectors of each level's
 * register width: sixteen floats in an AVX-512 copy, eight in the AVX2 one, four in the
 * baseline one.
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

/*
 * Sigmoid and SiLU are bound by arithmetic (the other kinds by memory), so each level runs
 * them in vectors of its own register width: sixteen floats in the AVX-512 copy, eight in
 * the AVX2 one, four in the baseline (SSE2) one. The width is chosen per copy, not shared:
 * GCC lowers a 16-float vector for AVX2 into per-lane scalar code (the NaN test and the
 * float-to-int conversion), which ran at the baseline's speed, 3.4 ns a float against
 * AVX-512's 0.52 (bench/ipuof-act.c). The operations are the same element by element at every width and
 * in the scalar tail, so the bits are the same in every copy. The vector types of each
 * width and the exp of a non-positive input are vmath.h's.
 */

/* Sigmoid (silu false) or x sigmoid(x) (silu true) of x[i..hi) into y, W floats at a time
 * in vectors of type VF (unaligned VFU), then the scalar tail; i is advanced to hi. */
#define SIGMOID_LOOP(W, VF, VFU, VI, VC, SEL)                                              \
    do {                                                                                   \
        for (; i + (W) <= hi; i += (W)) {                                                  \
            VF v = *(const VFU *)(x + i), s;                                               \
            VF e = SEL(v >= 0.0f, -v, v);                                                  \
            EXP_NONPOS(&e, VF, VI, VC, SEL);                                               \
            s = SEL(v >= 0.0f, VC(1.0f), e) / (1.0f + e);                                  \
            s = SEL(v < -87.3365447505531f, VC(0.0f), s);                                  \
            *(VFU *)(y + i) = silu ? v * s : s;                                            \
        }                                                                                  \
        for (; i < hi; i++) {                                                              \
            float v_ = x[i], e_ = exp_nonpos(v_ >= 0.0f ? -v_ : v_), s_;                   \
            s_ = (v_ >= 0.0f ? 1.0f : e_) / (1.0f + e_);                                   \
            s_ = v_ < -87.3365447505531f ? 0.0f : s_;                                      \
            y[i] = silu ? v_ * s_ : s_;                                                    \
        }                                                                                  \
    } while (0)

/* Sigmoid (silu false) or x sigmoid(x) (silu true); the sigmoid as e^x / (1 + e^x) for
 * x < 0 (no overflow), and +0 below -87.34, where the exp's input is clamped (it gave
 * e^-87.34, 1.2e-38, for every such x): PyTorch's float sigmoid is 1 / (1 + e^-x), +0 once
 * e^-x overflows (x < -88.72), so Sigmoid(-inf) is +0, SiLU(-inf) is -inf * 0 = NaN and
 * SiLU(-100) is -0, PyTorch's bits; between -88.72 and -87.34 PyTorch gives values under
 * 1.2e-38, here 0. Eight floats at a time: the AVX2 copy (and the one function of builds
 * without copies, hot.h). */
#if SIM_ISA_DISPATCH
static __attribute__((noinline, SIM_HOT_OPT, target("avx2"))) void
#elif defined(__GNUC__) && !defined(__clang__)
static __attribute__((SIM_HOT_OPT)) void
#else
static void
#endif
sigmoid8_range(const float *x, float *y, int64_t lo, int64_t hi, bool silu)
{
    int64_t i = lo;

    SIGMOID_LOOP(8, sim_v8f, sim_v8f_u, sim_v8i, SIM_V8, sim_v8sel);
}

#if SIM_ISA_DISPATCH
/* The same, four floats at a time: the baseline copy (SSE2's width). */
static __attribute__((noinline, SIM_HOT_OPT)) void
sigmoid4_range(const float *x, float *y, int64_t lo, int64_t hi, bool silu)
{
    int64_t i = lo;

    SIGMOID_LOOP(4, v4f, v4f_u, v4i, V4, SEL4);
}

/* The same, sixteen floats at a time: the AVX-512 copy. */
static __attribute__((noinline, SIM_HOT_OPT, target("avx512f"))) void
sigmoid16_range(const float *x, float *y, int64_t lo, int64_t hi, bool silu)
{
    int64_t i = lo;

    SIGMOID_LOOP(16, v16f, v16f_u, v16i, V16, SEL16);
}
#endif

/* The copy of the level in use (hot.h): the same bits from each. */
static void
sigmoid_range(const float *x, float *y, int64_t lo, int64_t hi, bool silu)
{
#if SIM_ISA_DISPATCH
    enum sim_isa l = sim_isa_level();

    if (l >= SIM_ISA_AVX512)
        sigmoid16_range(x, y, lo, hi, silu);
    else if (l >= SIM_ISA_AVX2)
        sigmoid8_range(x, y, lo, hi, silu);
    else
        sigmoid4_range(x, y, lo, hi, silu);
#else
    sigmoid8_range(x, y, lo, hi, silu);
#endif
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
