/*
 * vmath.h — branch-free float exp and erf that the compiler vectorizes (glibc's expf and
 * erff are calls, one element at a time). For the activation kernels only (Sigmoid, the
 * erf of GELU): the Exp and Erf ops themselves keep libm.
 *
 * sim_vexpf: Cephes' expf scheme (x = n ln2 + r, a degree-6 polynomial in r, 2^n built in
 * the exponent bits), relative error below 2e-7 on [-87, 88]; inputs are clamped there, so
 * e^x below 2^-126 comes back as about 1.2e-38 instead of a subnormal or 0; NaN gives NaN.
 * sim_verff: odd Taylor series to x^13 for |x| < 0.5 (error below 1e-8), Abramowitz and
 * Stegun 7.1.26 above (absolute error below 1.5e-7).
 */
#ifndef SIM_VMATH_H
#define SIM_VMATH_H

#include <stdint.h>
#include <string.h>

/* Eight floats at a time with GCC/clang vector extensions (the loop vectorizer does not
 * if-convert these bodies); the scalar versions below do the same operations in the same
 * order, so a tail element rounds exactly as it would inside a block. The types and
 * sim_v8sel also serve the backward maps' selects and vsum.h's lanes. */
typedef float sim_v8f __attribute__((vector_size(32)));
typedef int32_t sim_v8i __attribute__((vector_size(32)));
typedef float sim_v8f_u __attribute__((vector_size(32), aligned(4), may_alias));

#define SIM_V8(c) ((sim_v8f){ (c), (c), (c), (c), (c), (c), (c), (c) })

/* e^r for |r| <= ln 2 / 2 (r: a float or a float vector): Cephes' expf polynomial, the
 * same operations in the same order for every type, so every width rounds alike. */
#define SIM_EXPF_POLY(r)                                                                   \
    ((((((1.9875691500E-4f * (r) + 1.3981999507E-3f) * (r) + 8.3334519073E-3f) * (r) +    \
        4.1665795894E-2f) * (r) + 1.6666665459E-1f) * (r) + 5.0000001201E-1f) * (r) * (r) + \
     (r) + 1.0f)

/* Lanes of a where the mask m (a vector comparison) is set, else of b. */
#define sim_v8sel(m, a, b) ((sim_v8f)(((m) & (sim_v8i)(a)) | (~(m) & (sim_v8i)(b))))

/* *v = e^*v, lane by lane (passed by address: no 32-byte vector crosses a call). */
static inline __attribute__((always_inline)) void
sim_v8expf(sim_v8f *v)
{
    sim_v8f x = *v, fx, r, y, nf;
    sim_v8i n;

    x = sim_v8sel(x > 88.3762626647949f, SIM_V8(88.3762626647949f), x);
    x = sim_v8sel(x < -87.3365447505531f, SIM_V8(-87.3365447505531f), x);
    fx = x * 1.44269504088896341f;
    /* a NaN lane converts 0 (NaN's conversion is undefined behaviour): NaN through r */
    n = __builtin_convertvector(sim_v8sel(fx == fx, fx + sim_v8sel(fx >= 0.0f, SIM_V8(0.5f),
                                                                   SIM_V8(-0.5f)),
                                          SIM_V8(0.0f)),
                                sim_v8i);
    nf = __builtin_convertvector(n, sim_v8f);
    r = x - nf * 0.693359375f + nf * 2.12194440e-4f;
    y = SIM_EXPF_POLY(r);
    n = ((n < -126) & -126) | (~(n < -126) & n);
    *v = y * (sim_v8f)((n + 127) << 23);
}

/* *v = erf(*v), lane by lane. */
static inline __attribute__((always_inline)) void
sim_v8erff(sim_v8f *v)
{
    sim_v8f x = *v, ax = sim_v8sel(x < 0.0f, -x, x), x2 = x * x, t, p, big, small, e = -x2;

    t = 1.0f / (1.0f + 0.3275911f * ax);
    p = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t +
         0.254829592f) * t;
    sim_v8expf(&e);
    big = 1.0f - p * e;
    big = sim_v8sel(x < 0.0f, -big, big);
    p = SIM_V8(1.0f / 9360.0f);
    p = p * x2 - 1.0f / 1320.0f;
    p = p * x2 + 1.0f / 216.0f;
    p = p * x2 - 1.0f / 42.0f;
    p = p * x2 + 1.0f / 10.0f;
    p = p * x2 - 1.0f / 3.0f;
    p = p * x2 + 1.0f;
    small = 1.12837916709551257f * x * p;
    *v = sim_v8sel(ax < 0.5f, small, big);
}

static inline __attribute__((always_inline)) float
sim_vexpf(float x)
{
    float fx, r, y, s;
    int32_t n, bits;

    x = x > 88.3762626647949f ? 88.3762626647949f : x;
    x = x < -87.3365447505531f ? -87.3365447505531f : x;
    fx = x * 1.44269504088896341f;
    n = fx == fx ? (int32_t)(fx + (fx >= 0.0f ? 0.5f : -0.5f)) : 0; /* NaN: as above */
    r = x - (float)n * 0.693359375f + (float)n * 2.12194440e-4f;
    y = SIM_EXPF_POLY(r);
    n = n < -126 ? -126 : n;
    bits = (n + 127) << 23;
    memcpy(&s, &bits, sizeof(s));
    return y * s;
}

static inline __attribute__((always_inline)) float
sim_verff(float x)
{
    float ax = x < 0.0f ? -x : x, x2 = x * x, t, p, big, small;

    t = 1.0f / (1.0f + 0.3275911f * ax);
    p = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t +
         0.254829592f) * t;
    big = 1.0f - p * sim_vexpf(-x2);
    big = x < 0.0f ? -big : big;
    /* 2/sqrt(pi) (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320 + x^13/9360) */
    p = 1.0f / 9360.0f;
    p = p * x2 - 1.0f / 1320.0f;
    p = p * x2 + 1.0f / 216.0f;
    p = p * x2 - 1.0f / 42.0f;
    p = p * x2 + 1.0f / 10.0f;
    p = p * x2 - 1.0f / 3.0f;
    p = p * x2 + 1.0f;
    small = 1.12837916709551257f * x * p;
    return ax < 0.5f ? small : big;
}

/* Four and sixteen floats (the baseline's and AVX-512's register widths: act.c's Sigmoid,
 * op_layernorm.c's GELU), with their selects, beside sim_v8f. GCC lowers a 16-float vector
 * compiled for AVX2 into per-lane scalar code where it converts or compares: use each
 * level's own width (hot.h). */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef float v4f_u __attribute__((vector_size(16), aligned(4), may_alias));

#define V4(c) ((v4f){ (c), (c), (c), (c) })
#define SEL4(m, a, b) ((v4f)(((m) & (v4i)(a)) | (~(m) & (v4i)(b))))

typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
typedef float v16f_u __attribute__((vector_size(64), aligned(4), may_alias));

#define V16(c) ((v16f){ (c), (c), (c), (c), (c), (c), (c), (c), (c), (c), (c), (c), (c), \
                        (c), (c), (c) })
#define SEL16(m, a, b) ((v16f)(((m) & (v16i)(a)) | (~(m) & (v16i)(b))))

/*
 * *v = e^*v for *v <= 0 (or NaN), in vectors of type VF (ints VI, splat VC, select SEL):
 * vmath.h's sim_v8expf without the operations that cannot change such an input (the upper
 * clamp, the rounding's sign test: fx <= 0 rounds as fx - 0.5 truncated, and the
 * exponent's lower clamp: x >= -87.34 gives n >= -126), so the results are sim_v8expf's,
 * bit for bit, in fewer instructions. A NaN lane gets n = 0 (converting NaN to an integer
 * is undefined behaviour, and n + 127 then shifted a negative value) and comes back NaN
 * through r: Sigmoid and SiLU of NaN are NaN, as in PyTorch.
 */
#define EXP_NONPOS(v, VF, VI, VC, SEL)                                                     \
    do {                                                                                   \
        VF x_ = SEL(*(v) < -87.3365447505531f, VC(-87.3365447505531f), *(v)), fx_, r_, nf_; \
        VI n_;                                                                             \
        fx_ = x_ * 1.44269504088896341f;                                                   \
        n_ = __builtin_convertvector(SEL(fx_ == fx_, fx_ - 0.5f, VC(0.0f)), VI);           \
        nf_ = __builtin_convertvector(n_, VF);                                             \
        r_ = x_ - nf_ * 0.693359375f + nf_ * 2.12194440e-4f;                               \
        *(v) = SIM_EXPF_POLY(r_) * (VF)((n_ + 127) << 23);                                 \
    } while (0)

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

#endif
