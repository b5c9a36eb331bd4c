/*
 * half.c — float16 <-> float conversions (contract in half.h): a portable bit-level path
 * and an F16C one (VCVTPH2PS / VCVTPS2PH with round-to-nearest-even), chosen per call from
 * the simulator's ISA level so that IPUOF_SIM_ISA=baseline exercises the portable path.
 */
#include <stdatomic.h>
#include <string.h>

#include "half.h"
#include "hot.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HALF_F16C 1
#else
#define HALF_F16C 0
#endif

static uint32_t
f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float
u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

float
sim_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;

    if (exp == 0x1fu)                               /* inf / NaN: payload moved up, */
        return u2f(sign | 0x7f800000u | (man << 13) | (man != 0 ? 0x400000u : 0u)); /* quiet */
    if (exp == 0) {
        if (man == 0)
            return u2f(sign);
        /* subnormal: man * 2^-24, exact in float */
        float v = (float)man * u2f(0x33800000u);    /* 2^-24 */
        return u2f(sign | f2u(v));
    }
    return u2f(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t
sim_half_from_float(float f)
{
    uint32_t u = f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;

    if (a >= 0x7f800000u) {                          /* inf / NaN */
        if (a == 0x7f800000u)
            return sign | 0x7c00u;
        return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x3ffu);   /* quiet, top payload */
    }
    if (a >= 0x477ff000u)                            /* >= 65520: rounds to inf */
        return sign | 0x7c00u;
    if (a >= 0x38800000u) {                          /* normal half (>= 2^-14) */
        uint32_t mant_odd = (a >> 13) & 1u;
        a += 0xfffu + mant_odd;                      /* round to nearest even at bit 13 */
        return sign | (uint16_t)((a - 0x38000000u) >> 13);
    }
    if (a < 0x33000000u)                             /* < 2^-25: rounds to zero */
        return sign;
    {
        /* subnormal half: value = a_float / 2^-24 rounded to an integer, ties to even */
        uint32_t e = a >> 23;                        /* 102 .. 112 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u;    /* 24-bit significand */
        uint32_t shift = 126u - e;                   /* bits dropped: 14 .. 24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (q & 1u)))
            q++;
        return sign | (uint16_t)q;                   /* q may carry into the exponent: fine */
    }
}

void
sim_half_to_float_n_portable(const uint16_t *src, float *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = sim_half_to_float(src[i]);
}

void
sim_half_from_float_n_portable(const float *src, uint16_t *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = sim_half_from_float(src[i]);
}

#if HALF_F16C
__attribute__((target("avx,f16c"))) static void
to_float_f16c(const uint16_t *src, float *dst, int64_t n)
{
    int64_t i = 0;

    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++)
        dst[i] = sim_half_to_float(src[i]);
}

__attribute__((target("avx,f16c"))) static void
from_float_f16c(const float *src, uint16_t *dst, int64_t n)
{
    int64_t i = 0;

    for (; i + 8 <= n; i += 8) {
        __m256 f = _mm256_loadu_ps(src + i);
        _mm_storeu_si128((__m128i *)(void *)(dst + i),
                         _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++)
        dst[i] = sim_half_from_float(src[i]);
}
#endif

bool
sim_half_uses_f16c(void)
{
#if HALF_F16C
    /* CPUID leaf 1, ECX bit 29 (clang 14 knows no "f16c" for __builtin_cpu_supports),
     * asked once: CPUID is slow (a VM exit under a hypervisor), and this is asked on
     * every conversion (before, 86 % of a float16 training step's time in perf) */
    static _Atomic int cpu = -1;
    unsigned a, b, c, d;
    int has = atomic_load_explicit(&cpu, memory_order_relaxed);

    if (has < 0) {
        has = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
        atomic_store_explicit(&cpu, has, memory_order_relaxed);
    }
    return sim_isa_level() >= SIM_ISA_AVX2 && has;
#else
    return false;
#endif
}

void
sim_half_to_float_n(const uint16_t *src, float *dst, int64_t n)
{
#if HALF_F16C
    if (sim_half_uses_f16c()) {
        to_float_f16c(src, dst, n);
        return;
    }
#endif
    sim_half_to_float_n_portable(src, dst, n);
}

void
sim_half_from_float_n(const float *src, uint16_t *dst, int64_t n)
{
#if HALF_F16C
    if (sim_half_uses_f16c()) {
        from_float_f16c(src, dst, n);
        return;
    }
#endif
    sim_half_from_float_n_portable(src, dst, n);
}

void
sim_half_round_n(float *x, int64_t n)
{
    uint16_t buf[256];

    for (int64_t i = 0; i < n; i += 256) {
        int64_t m = n - i < 256 ? n - i : 256;
        sim_half_from_float_n(x + i, buf, m);
        sim_half_to_float_n(buf, x + i, m);
    }
}
