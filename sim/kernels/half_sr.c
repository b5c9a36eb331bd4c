/*
 * half_sr.c — stochastic rounding to float16 (contract in half.h) from a counter-based
 * generator: the draw of element i of a rounding keyed k is a hash of (k, i), so an array
 * rounds with no state carried from element to element, in vectors, and a rounding done
 * twice (a recomputed forward) gives the same bits.
 *
 * The draw: 32 bits from two rounds of a 32-bit integer mixer (xor-shift-multiply, the
 * "lowbias32" constants) over the element index, keyed by the two halves of k (a 64-bit
 * key; the index's high word, past 2^32 elements, is folded into the key). The rounding:
 * f lies between two float16 values lo < |f| < hi (by magnitude); it rounds up when the
 * draw's top 31 bits are below floor(frac x 2^31), frac = (|f| - lo) / (hi - lo), so
 * P(up) = frac to within 2^-31 (exactly, for f in the normal float16 range). Integer and
 * exact float operations only (a scaling by a power of two, truncations of values that
 * fit), so every ISA level gives the same bits; the body is a hot kernel (hot.h) that
 * the vectorizer turns into 8 or 16 lanes, branch-free.
 *
 * Exact values and zeros are kept (with their sign), NaN is quieted as nearest-even does,
 * and magnitudes past 65504 round as nearest-even does (to 65504 or to infinity).
 */
#include <string.h>

#include "half.h"
#include "hot.h"

#define SR_INLINE static inline __attribute__((always_inline))

/* One round of the mixer: a bijection of 32-bit words. */
SR_INLINE uint32_t
mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* The 32-bit draw of index i (low word) under key words klo, khi. */
SR_INLINE uint32_t
draw32(uint32_t klo, uint32_t khi, uint32_t i)
{
    return mix32(mix32(i ^ klo) + khi);
}

/* f's stochastic rounding with draw r: the float16 bits. Every value is computed and
 * the results selected (no branch: the loop vectorizes; the float conversions are of
 * values that fit, whichever result is kept). */
SR_INLINE uint16_t
sr_one(float f, uint32_t r)
{
    uint32_t u, a, as, sign, hn, tn, hs, ts, h, t, nan, big, sub, m;
    float fa, v, fr;
    int32_t q;

    memcpy(&u, &f, sizeof(u));
    sign = (u >> 16) & 0x8000u;
    a = u & 0x7fffffffu;
    sub = 0u - (uint32_t)(a < 0x38800000u);             /* all ones below 2^-14 */
    /* normal float16 range (|f| >= 2^-14): drop 13 bits; frac is the dropped bits */
    hn = (a - 0x38000000u) >> 13;
    tn = (a & 0x1fffu) << 18;
    /* below: |f| x 2^24 (exact) splits into the subnormal's units q and frac */
    as = a & sub;
    memcpy(&fa, &as, sizeof(fa));
    v = fa * 16777216.0f;                   /* < 1024 */
    q = (int32_t)v;
    fr = v - (float)q;                      /* exact: both are multiples of v's ulp */
    hs = (uint32_t)q;
    ts = (uint32_t)(int32_t)(fr * 2147483648.0f);      /* < 2^31, exact */
    h = (hs & sub) | (hn & ~sub);
    t = (ts & sub) | (tn & ~sub);
    h += (uint32_t)((r >> 1) < t);
    /* past 65504, infinities and NaN: as nearest-even (masks, not branches: the
     * vectorizer refuses a select of more than four ways) */
    nan = 0x7e00u | ((a >> 13) & 0x3ffu);
    big = 0x7bffu + (uint32_t)(a >= 0x477ff000u);      /* 65504, or infinity */
    m = 0u - (uint32_t)(a > 0x7f800000u);
    big = (nan & m) | (big & ~m);
    m = 0u - (uint32_t)(a > 0x477fe000u);
    h = (big & m) | (h & ~m);
    return (uint16_t)(sign | h);
}

/*
 * sr_one over W lanes at a time, in GCC vector types of each ISA level's width (hot.h:
 * the loop vectorizer made 13 instructions an element of sr_one at AVX2, narrowing to 16
 * bits half-way and computing the counter in 64 bits). The same integer and exact float
 * operations as sr_one, lane by lane, so the same bits for every float: the comparisons
 * are of values below 2^31, so signed ones (AVX2 has no unsigned vector compare), and a
 * >> 13 serves the normal and the NaN terms. Zeros, subnormals, values past 65504,
 * infinities and NaN take the same instructions as normal values: one loop, no check
 * (test_sim_half_ops compares every class at every lane with sim_half_from_float_sr, at
 * each level). The counter is i0 + the element's index, a 32-bit lane.
 */
#define SR_VEC(W, VU, VI, VF, VH)                                                          \
    do {                                                                                   \
        VU j_, klo_ = klo + (VU){ 0 }, khi_ = khi + (VU){ 0 }, m1_ = 0x7feb352du + (VU){ 0 }, \
           m2_ = 0x846ca68bu + (VU){ 0 };                                                  \
        VI lo_ = 0x38800000 + (VI){ 0 }, b0_ = 0x477fefff + (VI){ 0 },                     \
           b1_ = 0x7f800000 + (VI){ 0 }, b2_ = 0x477fe000 + (VI){ 0 },                     \
           e_ = 0x1c000 + (VI){ 0 }, nan_ = 0x7e00 + (VI){ 0 }, n7_ = 0x7fff + (VI){ 0 },  \
           mx_ = 0x7bff + (VI){ 0 };                                                       \
        VF s24_ = 16777216.0f + (VF){ 0 }, s31_ = 2147483648.0f + (VF){ 0 };               \
        for (int k_ = 0; k_ < (W); k_++)                                                   \
            j_[k_] = i0 + (uint32_t)k_;                                                    \
        SR_OPAQUE(klo_); SR_OPAQUE(khi_); SR_OPAQUE(m1_); SR_OPAQUE(m2_);                  \
        SR_OPAQUE(lo_); SR_OPAQUE(b0_); SR_OPAQUE(b1_); SR_OPAQUE(b2_); SR_OPAQUE(e_);     \
        SR_OPAQUE(nan_); SR_OPAQUE(n7_); SR_OPAQUE(mx_); SR_OPAQUE(s24_); SR_OPAQUE(s31_); \
        for (; i + (W) <= n; i += (W), j_ += (uint32_t)(W)) {                              \
            VU u_, x_ = j_ ^ klo_, r_;                                                     \
            VI a_, s13_, sub_, q_, t_, h_, big_, m_;                                       \
            VF v_;                                                                         \
            VH o_;                                                                         \
            SR_MIX(x_, m1_, m2_);                                                          \
            x_ += khi_;                                                                    \
            SR_MIX(x_, m1_, m2_);                                                          \
            memcpy(&u_, src + i, sizeof(u_));                                              \
            a_ = (VI)((u_ << 1) >> 1);                                                     \
            s13_ = a_ >> 13;                                                               \
            sub_ = lo_ > a_;                                                               \
            v_ = (VF)(a_ & sub_) * s24_;                                                   \
            q_ = __builtin_convertvector(v_, VI);                                          \
            t_ = __builtin_convertvector((v_ - __builtin_convertvector(q_, VF)) * s31_, VI); \
            h_ = (q_ & sub_) | ((s13_ - e_) & ~sub_);                                      \
            t_ = (t_ & sub_) | ((VI)(((VU)a_ << 19) >> 1) & ~sub_);                        \
            h_ -= (VI)(x_ >> 1) < t_;                                                      \
            big_ = mx_ - (a_ > b0_);                                                       \
            m_ = a_ > b1_;                                                                 \
            big_ = (((s13_ | nan_) & n7_) & m_) | (big_ & ~m_);                            \
            m_ = a_ > b2_;                                                                 \
            h_ = (big_ & m_) | (h_ & ~m_);                                                 \
            r_ = ((u_ >> 31) << 15) | (VU)h_;                                              \
            o_ = __builtin_convertvector(r_, VH);                                          \
            memcpy(dst + i, &o_, sizeof(o_));                                              \
        }                                                                                  \
    } while (0)

/* Hides a loop constant's value from the compiler, which otherwise rebuilds each from an
 * immediate inside the loop (three instructions) when it runs short of vector registers,
 * where a spilled one is read as an operand. Elsewhere (clang, sanitizer builds: one
 * copy, which has no AVX registers for an 8-lane vector) a no-op. */
#if SIM_ISA_DISPATCH   /* GCC on x86-64, each copy compiled for its level's registers */
#define SR_OPAQUE(v) __asm__("" : "+x"(v))
#else
#define SR_OPAQUE(v) ((void)0)
#endif

/* One round of mix32 on a vector. */
#define SR_MIX(x, m1, m2)                                                                  \
    do {                                                                                   \
        (x) ^= (x) >> 16;                                                                  \
        (x) *= (m1);                                                                       \
        (x) ^= (x) >> 15;                                                                  \
        (x) *= (m2);                                                                       \
        (x) ^= (x) >> 16;                                                                  \
    } while (0)

typedef uint32_t sr_v4u __attribute__((vector_size(16)));
typedef int32_t sr_v4i __attribute__((vector_size(16)));
typedef float sr_v4f __attribute__((vector_size(16)));
typedef uint16_t sr_v4h __attribute__((vector_size(8)));
typedef uint32_t sr_v8u __attribute__((vector_size(32)));
typedef int32_t sr_v8i __attribute__((vector_size(32)));
typedef float sr_v8f __attribute__((vector_size(32)));
typedef uint16_t sr_v8h __attribute__((vector_size(16)));
typedef uint32_t sr_v16u __attribute__((vector_size(64)));
typedef int32_t sr_v16i __attribute__((vector_size(64)));
typedef float sr_v16f __attribute__((vector_size(64)));
typedef uint16_t sr_v16h __attribute__((vector_size(32)));

/* The scalar tail of a block from element i. */
SR_INLINE void
sr_tail(const float *src, uint16_t *dst, int64_t i, int64_t n, uint32_t klo, uint32_t khi,
        uint32_t i0)
{
    for (; i < n; i++)
        dst[i] = sr_one(src[i], draw32(klo, khi, i0 + (uint32_t)i));
}

uint16_t
sim_half_from_float_sr(float f, uint64_t key, uint64_t i)
{
    uint64_t k = key ^ ((i >> 32) * 0x9e3779b97f4a7c15ull);

    return sr_one(f, draw32((uint32_t)k, (uint32_t)(k >> 32), (uint32_t)i));
}

/* sr_block(src, dst, n, klo, khi, i0): dst[i] = sr_one(src[i], draw32(klo, khi, i0 + i))
 * for i < n, in the vectors of the level in use (hot.h), the tail one by one. */
#if SIM_ISA_DISPATCH
static __attribute__((noinline, SIM_HOT_OPT)) void
sr_block4(const float *src, uint16_t *dst, int64_t n, uint32_t klo, uint32_t khi, uint32_t i0)
{
    int64_t i = 0;

    SR_VEC(4, sr_v4u, sr_v4i, sr_v4f, sr_v4h);
    sr_tail(src, dst, i, n, klo, khi, i0);
}

static __attribute__((noinline, SIM_HOT_OPT, target("avx512f"))) void
sr_block16(const float *src, uint16_t *dst, int64_t n, uint32_t klo, uint32_t khi,
           uint32_t i0)
{
    int64_t i = 0;

    SR_VEC(16, sr_v16u, sr_v16i, sr_v16f, sr_v16h);
    sr_tail(src, dst, i, n, klo, khi, i0);
}

static __attribute__((noinline, SIM_HOT_OPT, target("avx2"))) void
#elif defined(__GNUC__) && !defined(__clang__)
static __attribute__((SIM_HOT_OPT)) void
#else
static void
#endif
sr_block8(const float *src, uint16_t *dst, int64_t n, uint32_t klo, uint32_t khi, uint32_t i0)
{
    int64_t i = 0;

    SR_VEC(8, sr_v8u, sr_v8i, sr_v8f, sr_v8h);
    sr_tail(src, dst, i, n, klo, khi, i0);
}

static void
sr_block(const float *src, uint16_t *dst, int64_t n, uint32_t klo, uint32_t khi, uint32_t i0)
{
#if SIM_ISA_DISPATCH
    enum sim_isa l = sim_isa_level();

    if (l >= SIM_ISA_AVX512)
        sr_block16(src, dst, n, klo, khi, i0);
    else if (l >= SIM_ISA_AVX2)
        sr_block8(src, dst, n, klo, khi, i0);
    else
        sr_block4(src, dst, n, klo, khi, i0);
#else
    sr_block8(src, dst, n, klo, khi, i0);
#endif
}

/* Calls fn(src, dst, m, klo, khi, i0) over [0, n) in pieces that do not cross a 2^32
 * boundary of the index (where the key changes). */
void
sim_half_from_float_sr_n(const float *src, uint16_t *dst, int64_t n, uint64_t key)
{
    for (int64_t i = 0; i < n;) {
        uint64_t k = key ^ (((uint64_t)i >> 32) * 0x9e3779b97f4a7c15ull);
        int64_t m = n - i, room = (int64_t)(0x100000000ull - ((uint64_t)i & 0xffffffffu));
        m = m < room ? m : room;
        sr_block(src + i, dst + i, m, (uint32_t)k, (uint32_t)(k >> 32), (uint32_t)i);
        i += m;
    }
}

void
sim_half_round_sr_n(float *x, int64_t n, uint64_t key)
{
    uint16_t buf[512];

    for (int64_t i = 0; i < n; i += 512) {
        int64_t m = n - i < 512 ? n - i : 512;
        /* the counter is the element's index in x: one key, one stream */
        uint64_t k = key ^ (((uint64_t)i >> 32) * 0x9e3779b97f4a7c15ull);
        sr_block(x + i, buf, m, (uint32_t)k, (uint32_t)(k >> 32), (uint32_t)i);
        sim_half_to_float_n(buf, x + i, m);
    }
}

uint64_t
sim_half_sr_key(uint64_t state, uint64_t tag)
{
    uint64_t z = state + 0x9e3779b97f4a7c15ull * (tag + 1);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
