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
#include <stdbool.h>
#include <string.h>

#include "half.h"
#include "hot.h"

#define SR_INLINE static inline __attribute__((always_inline))
#define SR_RUN 64       /* elements of a run checked for the normal-range path */

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

/* sr_one for f in the normal float16 range below 65504 (a, |f|'s bits, in [2^-14,
 * 0x477fe000]): there the subnormal and overflow terms are not selected, so this is
 * sr_one's result with them left out. */
SR_INLINE uint16_t
sr_normal(float f, uint32_t r)
{
    uint32_t u, a, h;

    memcpy(&u, &f, sizeof(u));
    a = u & 0x7fffffffu;
    h = ((a - 0x38000000u) >> 13) + (uint32_t)((r >> 1) < ((a & 0x1fffu) << 18));
    return (uint16_t)(((u >> 16) & 0x8000u) | h);
}

/* Whether every float at src[0 .. n) is in sr_normal's range. */
SR_INLINE bool
all_normal(const float *src, int64_t n)
{
    uint32_t out = 0;

    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof(u));
        out |= (uint32_t)((u & 0x7fffffffu) - 0x38800000u > 0x477fe000u - 0x38800000u);
    }
    return out == 0;
}

uint16_t
sim_half_from_float_sr(float f, uint64_t key, uint64_t i)
{
    uint64_t k = key ^ ((i >> 32) * 0x9e3779b97f4a7c15ull);

    return sr_one(f, draw32((uint32_t)k, (uint32_t)(k >> 32), (uint32_t)i));
}

SIM_HOT_WIDE_FN(sr_block, (const float *src, uint16_t *dst, int64_t n, uint32_t klo,
                      uint32_t khi, uint32_t i0), (src, dst, n, klo, khi, i0))
{
    /* runs of SR_RUN: one whose values are all normal float16 magnitudes (most of any
     * activation or weight) takes sr_normal, half of sr_one's work; the same bits */
    for (int64_t b = 0; b < n; b += SR_RUN) {
        int64_t m = n - b < SR_RUN ? n - b : SR_RUN;
        const float *s = src + b;
        uint16_t *d = dst + b;
        uint32_t j0 = i0 + (uint32_t)b;
        if (all_normal(s, m))
            for (int64_t i = 0; i < m; i++)
                d[i] = sr_normal(s[i], draw32(klo, khi, j0 + (uint32_t)i));
        else
            for (int64_t i = 0; i < m; i++)
                d[i] = sr_one(s[i], draw32(klo, khi, j0 + (uint32_t)i));
    }
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
