/*
 * op_layernorm.c — two internal ops of inference executables that fuse.c makes from the
 * graphs torch.onnx.export writes at opsets below 17, each one kernel in place of a chain
 * of elementwise passes over memory (convnext_tiny spent half its time in these chains):
 *
 * - "LayerNorm" replaces LayerNorm over the last axis as exported (nine nodes):
 *     m = ReduceMean(x, last axis), d = x - m, v = ReduceMean(d ^ 2), s = Sqrt(v + eps),
 *     y = d / s * scale + bias
 *   One row of x at a time (a row is at most a few KB, so it stays in L1): the sum of x, the
 *   sum of (x - m)^2 (two passes over the cached row, as good as the exported two-pass
 *   formula because it is that formula), then y in one pass. When x is a Transpose of a
 *   channels-first tensor to channels last (ConvNeXt), the node reads that tensor instead,
 *   gathering a tile of pixels into rows on the stack: the Transpose is gone too.
 * - "Gelu" replaces exact-erf GELU as exported (five nodes), and the bias Add before it
 *   when the producer is a MatMul plus bias (convnext's pointwise Linear):
 *     x = a + bias (optional), y = x * (erf(x / c) + 1) * 0.5
 *   elementwise; in training the same without the bias, with the Erf op's erf.
 *
 * LayerNorm does the float operations of the nodes it replaces, in the same order, with
 * the same sums (ReduceMean's contiguous-row sum: double, four partial sums, then times
 * 1 / n, op_reduce.c), so its results are the unfused graph's bit for bit, at every
 * instruction-set level (hot.h); test_sim_fuse checks that. Gelu in inference uses a
 * faster formula (within 5e-7, below); in training (params->chain, the only Gelu fuse.c
 * makes there) it does the chain's own operations, so its bits, and has a backward rule
 * reading only its input. No op table names these ops, so no model can.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "act.h"
#include "hot.h"
#include "ops.h"
#include "pool.h"
#include "vmath.h"

/* ---- LayerNorm ------------------------------------------------------------------------ */

/* One row: y = (x - m) / s * g + b, with m and s as the exported graph computes them.
 * x, y: (n); g, b: (n) or one value (g1, b1). */
SIM_HOT_WIDE_FN(ln_row,
                (const float *x, float *y, const float *g, const float *b, int64_t n,
                 double inv_n, float eps, bool g1, bool b1),
                (x, y, g, b, n, inv_n, eps, g1, b1))
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    float m, v, s;
    int64_t i = 0;

    for (; i + 4 <= n; i += 4) {
        s0 += x[i];
        s1 += x[i + 1];
        s2 += x[i + 2];
        s3 += x[i + 3];
    }
    for (; i < n; i++)
        s0 += x[i];
    m = (float)(((s0 + s1) + (s2 + s3)) * inv_n);
    s0 = s1 = s2 = s3 = 0.0;
    for (i = 0; i + 4 <= n; i += 4) {
        float d0 = x[i] - m, d1 = x[i + 1] - m, d2 = x[i + 2] - m, d3 = x[i + 3] - m;
        s0 += d0 * d0;
        s1 += d1 * d1;
        s2 += d2 * d2;
        s3 += d3 * d3;
    }
    for (; i < n; i++) {
        float d = x[i] - m;
        s0 += d * d;
    }
    v = (float)(((s0 + s1) + (s2 + s3)) * inv_n);
    s = sqrtf(v + eps);
    if (!g1 && !b1) {
        for (i = 0; i < n; i++)
            y[i] = (x[i] - m) / s * g[i] + b[i];
        return;
    }
    for (i = 0; i < n; i++)
        y[i] = (x[i] - m) / s * g[g1 ? 0 : i] + b[b1 ? 0 : i];
}

/* Floats of a per-thread tile on the stack (16 KB): pixels times channels. */
#define TILE_FLOATS 4096

struct ln_run {
    const struct sim_ln_params *p;
    const float *x, *g, *b;
    float *y;
    int64_t tile, tiles_per_image;  /* channels first: pixels per tile, tiles per image */
};

/* Rows [lo, hi) of channels-last x. */
static void
ln_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct ln_run *r = ctx;
    const struct sim_ln_params *p = r->p;
    double inv_n = 1.0 / (double)p->cols;

    for (int64_t row = lo; row < hi; row++)
        ln_row(r->x + row * p->cols, r->y + row * p->cols, r->g, r->b, p->cols, inv_n,
               p->eps, p->scalar_scale, p->scalar_bias);
}

/* x[c][j] of a channels-first image (rows of hw) into t[j][c], for np pixels and c
 * channels: the Transpose the node replaces, one tile at a time. */
SIM_HOT_FN(gather_tile, (const float *x, float *t, int64_t np, int64_t c, int64_t hw),
           (x, t, np, c, hw))
{
    for (int64_t k = 0; k < c; k++)
        for (int64_t j = 0; j < np; j++)
            t[j * c + k] = x[k * hw + j];
}

/* Tiles [lo, hi) of channels-first x: each gathered into channels-last rows, then
 * normalised row by row into y (channels last). */
static void
ln_piece_cf(void *ctx, int64_t lo, int64_t hi)
{
    const struct ln_run *r = ctx;
    const struct sim_ln_params *p = r->p;
    double inv_n = 1.0 / (double)p->cols;
    float t[TILE_FLOATS];

    for (int64_t i = lo; i < hi; i++) {
        int64_t n = i / r->tiles_per_image, p0 = i % r->tiles_per_image * r->tile;
        int64_t np = p->hw - p0 < r->tile ? p->hw - p0 : r->tile;
        gather_tile(r->x + n * p->cols * p->hw + p0, t, np, p->cols, p->hw);
        for (int64_t j = 0; j < np; j++)
            ln_row(t + j * p->cols, r->y + (n * p->hw + p0 + j) * p->cols, r->g, r->b,
                   p->cols, inv_n, p->eps, p->scalar_scale, p->scalar_bias);
    }
}

/* x, y: (rows, cols), or with hw > 0 x channels first (rows / hw, cols, hw) and y channels
 * last; scale, bias (inputs 1, 2): (cols) or one value. */
static int
fwd_layernorm(const struct sim_kern *k, struct sim_err *err)
{
    const struct sim_ln_params *p = k->params;
    struct ln_run r = { p, k->in[0].data, k->in[1].data, k->in[2].data, k->out[0].data, 0,
                        0 };

    (void)err;
    if (p->cols < 1)
        return 0;
    if (p->hw <= 0) {
        sim_pool_for(p->rows, SIM_POOL_MAP_GRAIN / p->cols + 1, ln_piece, &r);
        return 0;
    }
    if (p->cols > TILE_FLOATS)
        return 0;               /* fuse.c makes no such node */
    r.tile = TILE_FLOATS / p->cols < 64 ? TILE_FLOATS / p->cols : 64;
    r.tiles_per_image = (p->hw + r.tile - 1) / r.tile;
    sim_pool_for(p->rows / p->hw * r.tiles_per_image,
                 SIM_POOL_MAP_GRAIN / (r.tile * p->cols) + 1, ln_piece_cf, &r);
    return 0;
}

/* ---- GELU ----------------------------------------------------------------------------- */

/*
 * GELU(x) = x Phi(x), Phi the normal distribution: with h = erfc(|x| / sqrt 2) / 2, Phi(x) is
 * h for x < 0 and 1 - h above. h comes from Abramowitz and Stegun 7.1.26 (the formula
 * PyTorch's own vectorised erf uses): t = 1 / (1 + p |x| / sqrt 2),
 * erfc = t (a1 + t (a2 + ...)) e^(-x^2 / 2), absolute error below 1.5e-7 (2.5e-7 with float
 * rounding and vmath.h's exp). Computing h itself rather than 1 + erf keeps the negative
 * tail's relative accuracy, which the exported formula loses to cancellation; one formula for
 * every x instead of the Erf op's two (vmath.h: a series below 0.5, this above) does a third
 * fewer operations. So the result is not the unfused graph's bit for bit: within 5e-7 of the
 * exact GELU and of it for |x| <= 10 (test_sim_fuse_norm). The vector blocks of every width
 * and the scalar tail do the same operations, so the bits do not depend on where an element
 * falls or on the level (hot.h).
 */
#define GELU_P 0.231641128f     /* 0.3275911 / sqrt(2) */
#define GELU_POLY(t)                                                                       \
    (((((1.061405429f * (t) - 1.453152027f) * (t) + 1.421413741f) * (t) - 0.284496736f) *  \
          (t) + 0.254829592f) * (t))

static inline __attribute__((always_inline)) float
gelu1(float x)
{
    float ax = x < 0.0f ? -x : x, t = 1.0f / (1.0f + GELU_P * ax), h;

    h = 0.5f * GELU_POLY(t) * exp_nonpos(x * x * -0.5f);
    return x * (x < 0.0f ? h : 1.0f - h);
}

/* y[i] = GELU(x[i]) for i in [0, n), x[i] = a[i] + bias[i] when bias is not NULL (bias: n
 * values), else a[i]: W floats at a time in vectors of type VF (unaligned VFU, ints VI,
 * splat VC, select SEL), then the scalar tail. The exp's input -x^2 / 2 is never positive,
 * so vmath.h's EXP_NONPOS (sim_v8expf's bits) serves. Bound by arithmetic: each level runs
 * its own register width (4, 8, 16 floats), as act.c's Sigmoid does. */
#define GELU_LOOP(W, VF, VFU, VI, VC, SEL)                                                 \
    do {                                                                                   \
        int64_t i = 0;                                                                     \
        for (; i + (W) <= n; i += (W)) {                                                   \
            VF x = *(const VFU *)(a + i), ax, t, h, e;                                     \
            if (bias != NULL)                                                              \
                x = x + *(const VFU *)(bias + i);                                          \
            ax = SEL(x < 0.0f, -x, x);                                                     \
            t = 1.0f / (1.0f + GELU_P * ax);                                               \
            e = x * x * -0.5f;                                                             \
            EXP_NONPOS(&e, VF, VI, VC, SEL);                                               \
            h = 0.5f * GELU_POLY(t) * e;                                                   \
            *(VFU *)(y + i) = x * SEL(x < 0.0f, h, 1.0f - h);                              \
        }                                                                                  \
        for (; i < n; i++)                                                                 \
            y[i] = gelu1(bias != NULL ? a[i] + bias[i] : a[i]);                            \
    } while (0)

/* Eight floats at a time: the AVX2 copy (and the one function of builds without copies). */
#if SIM_ISA_DISPATCH
static __attribute__((noinline, SIM_HOT_OPT, target("avx2"))) void
#elif defined(__GNUC__) && !defined(__clang__)
static __attribute__((SIM_HOT_OPT)) void
#else
static void
#endif
gelu8_run(const float *a, const float *bias, float *y, int64_t n)
{
    GELU_LOOP(8, sim_v8f, sim_v8f_u, sim_v8i, SIM_V8, sim_v8sel);
}

#if SIM_ISA_DISPATCH
/* Four floats at a time: the baseline copy (SSE2's width). */
static __attribute__((noinline, SIM_HOT_OPT)) void
gelu4_run(const float *a, const float *bias, float *y, int64_t n)
{
    GELU_LOOP(4, v4f, v4f_u, v4i, V4, SEL4);
}

/* Sixteen floats at a time: the AVX-512 copy. */
static __attribute__((noinline, SIM_HOT_OPT, target("avx512f"))) void
gelu16_run(const float *a, const float *bias, float *y, int64_t n)
{
    GELU_LOOP(16, v16f, v16f_u, v16i, V16, SEL16);
}
#endif

/* The copy of the level in use (hot.h): the same bits from each. */
static void
gelu_run(const float *a, const float *bias, float *y, int64_t n)
{
#if SIM_ISA_DISPATCH
    enum sim_isa l = sim_isa_level();

    if (l >= SIM_ISA_AVX512)
        gelu16_run(a, bias, y, n);
    else if (l >= SIM_ISA_AVX2)
        gelu8_run(a, bias, y, n);
    else
        gelu4_run(a, bias, y, n);
#else
    gelu8_run(a, bias, y, n);
#endif
}

struct gelu_job {
    const struct sim_gelu_params *p;
    const float *a, *bias;
    float *y;
};

/* Without a bias: elements [lo, hi). With one: rows [lo, hi) of p->cols. */
static void
gelu_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct gelu_job *r = ctx;
    int64_t n = r->p->cols;

    if (r->bias == NULL) {
        gelu_run(r->a + lo, NULL, r->y + lo, hi - lo);
        return;
    }
    for (int64_t row = lo; row < hi; row++)
        gelu_run(r->a + row * n, r->bias, r->y + row * n, n);
}

/* a, y: same shape, (rows, cols) with a bias; bias (input 1, optional): (cols). */
static int
fwd_gelu(const struct sim_kern *k, struct sim_err *err)
{
    const struct sim_gelu_params *p = k->params;
    struct gelu_job r = { p, k->in[0].data, k->n_in > 1 ? k->in[1].data : NULL,
                          k->out[0].data };
    int64_t n = k->out[0].numel;

    (void)err;
    if (r.bias == NULL)
        sim_pool_for(n, SIM_POOL_MAP_GRAIN, gelu_piece, &r);
    else if (p->cols > 0)
        sim_pool_for(n / p->cols, SIM_POOL_MAP_GRAIN / p->cols + 1, gelu_piece, &r);
    return 0;
}

/*
 * The chain (training, p->chain): y = ((x * (erf(x / c) + 1)) * 0.5), each operation on a
 * float as the exported Div, Erf, Add, Mul and Mul do it, erf being the Erf op's (vmath.h:
 * sim_v8erff over eight lanes, sim_verff for the tail, the same bits), so y is the unfused
 * graph's bit for bit (test_sim_fuse_norm's test_gelu_train). Its backward reads x alone:
 *   dx += dy * (0.5 (1 + erf(t)) + x exp(-t^2) / (c sqrt(pi))),  t = x / c,
 * which is PyTorch's GELU backward, dy (Phi(x) + x phi(x)), when c is sqrt 2.
 */
struct gelu_chain {
    const float *x, *g;
    float *y, *dx;
    float c, k;                 /* the divisor; k = 1 / (c sqrt(pi)) */
};

static void
gelu_chain_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct gelu_chain *r = ctx;
    const float *x = r->x;
    float *y = r->y, c = r->c;
    int64_t i = lo;

    for (; i + 8 <= hi; i += 8) {
        sim_v8f v = *(const sim_v8f_u *)(x + i), t = v / c;
        sim_v8erff(&t);
        *(sim_v8f_u *)(y + i) = (v * (t + 1.0f)) * 0.5f;
    }
    for (; i < hi; i++)
        y[i] = (x[i] * (sim_verff(x[i] / c) + 1.0f)) * 0.5f;
}

static void
gelu_chain_bwd_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct gelu_chain *r = ctx;
    const float *x = r->x, *g = r->g;
    float *dx = r->dx, c = r->c, k = r->k;
    int64_t i = lo;

    for (; i + 8 <= hi; i += 8) {
        sim_v8f v = *(const sim_v8f_u *)(x + i), t = v / c, e = -(t * t), d;
        d = *(const sim_v8f_u *)(dx + i);
        sim_v8erff(&t);
        sim_v8expf(&e);
        *(sim_v8f_u *)(dx + i) = d + *(const sim_v8f_u *)(g + i) *
                                         (0.5f * (1.0f + t) + v * e * k);
    }
    for (; i < hi; i++) {
        float t = x[i] / c;
        dx[i] += g[i] * (0.5f * (1.0f + sim_verff(t)) + x[i] * sim_vexpf(-(t * t)) * k);
    }
}

/* The Gelu's forward: the chain's (training) or the formula's. */
static int
fwd_gelu_any(const struct sim_kern *k, struct sim_err *err)
{
    const struct sim_gelu_params *p = k->params;
    struct gelu_chain r = { k->in[0].data, NULL, k->out[0].data, NULL, p->c, 0.0f };

    if (!p->chain)
        return fwd_gelu(k, err);
    sim_pool_for(k->out[0].numel, SIM_POOL_MAP_GRAIN, gelu_chain_piece, &r);
    return 0;
}

/* x, dy, dx: same shape. Only a Gelu without a bias has a backward (fuse.c makes no other
 * in training). */
static int
bwd_gelu(const struct sim_kern *k, const struct sim_tensor *dout, struct sim_tensor *din,
         struct sim_err *err)
{
    const struct sim_gelu_params *p = k->params;
    struct gelu_chain r = { k->in[0].data, dout[0].data, NULL, din[0].data, p->c,
                            (float)(1.0 / ((double)p->c * sqrt(M_PI))) };

    if (k->n_in > 1 || !p->chain)
        return sim_err_set(err, IPUOF_E_INTERNAL, "%s: a Gelu with a bias or made for "
                           "inference has no backward (fuse.c makes none in training)",
                           k->label);
    if (r.g == NULL || r.dx == NULL)
        return 0;
    sim_pool_for(k->in[0].numel, SIM_POOL_MAP_GRAIN, gelu_chain_bwd_piece, &r);
    return 0;
}

/* ---- bias, back to channels first, layer scale, residual ----------------------------- */

/*
 * One tile of np pixels of one image: y[k][j] = (z[j][k] + b[k]) * ls[k] + res[k][j]
 * (without b: z[j][k] * ls[k]). z: (np, c), rows of c channels; y, res: (c, hw) rows, the
 * tile's np columns of each; t: np * c floats of scratch. The channels-last product is
 * scaled in order (vectorised), then read across while y is written a channel at a time.
 */
SIM_HOT_WIDE_FN(tail_tile,
                (const float *z, const float *b, const float *ls, const float *res, float *y,
                 float *t, int64_t np, int64_t c, int64_t hw),
                (z, b, ls, res, y, t, np, c, hw))
{
    for (int64_t j = 0; j < np; j++) {
        const float *zr = z + j * c;
        float *tr = t + j * c;
        if (b != NULL)
            for (int64_t k = 0; k < c; k++)
                tr[k] = (zr[k] + b[k]) * ls[k];
        else
            for (int64_t k = 0; k < c; k++)
                tr[k] = zr[k] * ls[k];
    }
    for (int64_t k = 0; k < c; k++)
        for (int64_t j = 0; j < np; j++)
            y[k * hw + j] = t[j * c + k] + res[k * hw + j];
}

struct tail_job {
    const struct sim_tail_params *p;
    const float *z, *b, *ls, *res;
    float *y;
    int64_t tile, tiles_per_image;      /* pixels per tile, tiles per image */
};

static void
tail_piece(void *ctx, int64_t lo, int64_t hi)
{
    const struct tail_job *r = ctx;
    const struct sim_tail_params *p = r->p;
    float t[TILE_FLOATS];

    for (int64_t i = lo; i < hi; i++) {
        int64_t n = i / r->tiles_per_image, p0 = i % r->tiles_per_image * r->tile;
        int64_t np = p->hw - p0 < r->tile ? p->hw - p0 : r->tile;
        tail_tile(r->z + (n * p->hw + p0) * p->c, r->b, r->ls,
                  r->res + n * p->c * p->hw + p0, r->y + n * p->c * p->hw + p0, t, np, p->c,
                  p->hw);
    }
}

/* z: (n, hw, c); bias (input 1, optional), scale (input 2): (c); res, y: (n, c, hw). */
static int
fwd_tail(const struct sim_kern *k, struct sim_err *err)
{
    const struct sim_tail_params *p = k->params;
    struct tail_job r = { p, k->in[0].data, k->in[1].data, k->in[2].data, k->in[3].data,
                          k->out[0].data, 0, 0 };

    (void)err;
    if (p->c < 1 || p->c > TILE_FLOATS || p->hw < 1)
        return 0;               /* nothing to do (fuse.c makes no other) */
    r.tile = TILE_FLOATS / p->c < 64 ? TILE_FLOATS / p->c : 64;
    r.tiles_per_image = (p->hw + r.tile - 1) / r.tile;
    sim_pool_for(p->n * r.tiles_per_image, SIM_POOL_MAP_GRAIN / (r.tile * p->c) + 1,
                 tail_piece, &r);
    return 0;
}

#define CODE_FUSED 4096u

const struct sim_op sim_op_layernorm = { "LayerNorm", 1, 3, 3, 1, 1, 0, 0, CODE_FUSED, NULL,
                                         fwd_layernorm, NULL, 0u, NULL };
const struct sim_op sim_op_tail = { "TransposeScaleAdd", 1, 4, 4, 1, 1, 0, 0, CODE_FUSED,
                                    NULL, fwd_tail, NULL, 0u, NULL };
const struct sim_op sim_op_gelu = { "Gelu", 1, 1, 2, 1, 1, 0, 0, CODE_FUSED, NULL,
                                    fwd_gelu_any, bwd_gelu, 1u, NULL, SIM_BWD_IN(0) };
