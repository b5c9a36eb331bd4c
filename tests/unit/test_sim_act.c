/*
 * test_sim_act.c — the activation kernels (sim/kernels/act.c) on NaN and the infinities, through
 * both of their paths: a block of the level's width (Sigmoid and SiLU: 16 floats at
 * AVX-512, 8 at AVX2, 4 at baseline; the others 8) and the scalar tail, which must agree
 * bit for bit; and through sim_act_map (the pool split). make test runs it at every
 * instruction-set level (IPUOF_SIM_ISA), so each kernel copy is held. test_dense holds
 * Sigmoid and SiLU over 200 003 values of [-100, 100] to the tail's bits and, above -87,
 * to double precision within 1e-6 relative (vmath.h's exp: 2e-7), at every width.
 *
 * NaN in gives NaN out for every kind, as in PyTorch (Relu gave 0 until it became x < 0 ? 0 :
 * x; PyTorch's relu also keeps -0). Sigmoid and SiLU of NaN
 * were undefined behaviour (exp_nonpos converted NaN to an integer and shifted a negative
 * value left: the sanitizer build's daemon died on an ONNX node test input with NaN); on
 * main this test stops there under UBSan (make SAN=1, tests/run.sh build-san).
 *
 * The infinities give PyTorch's values, bits included (torch 1.13 on this machine:
 * sigmoid(-inf) = +0, silu(-inf) = NaN, silu(-100) = -0). Sigmoid gave vmath.h's clamped
 * e^-87.34, about 1.2e-38, for every x below -87.34, and SiLU(-inf) = -inf times that = -inf:
 * test_below_clamp fails on that kernel.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "act.h"
#include "sim.h"

#define N 43 /* blocks of 16, 8 or 4, then a tail at every width; specials at every position */

enum want { W_NAN, W_PINF, W_NINF, W_ONE, W_ZERO, W_PZERO, W_A, W_NEG_A };

struct expect {
    struct sim_act act;
    enum want nan, pinf, ninf; /* what NaN, +inf and -inf give */
};

static int
check(enum want w, float y, float a)
{
    switch (w) {
    case W_NAN: return isnan(y);
    case W_PINF: return isinf(y) && y > 0;
    case W_NINF: return isinf(y) && y < 0;
    case W_ONE: return y == 1.0f;
    case W_ZERO: return y == 0.0f;
    case W_PZERO: return y == 0.0f && !signbit(y);
    case W_A: return y == a;
    case W_NEG_A: return y == -a;
    }
    return 0;
}

static void
test_nan_inf(void **state)
{
    static const struct expect ex[] = {
        {{SIM_ACT_SIGMOID, 0, 0}, W_NAN, W_ONE, W_PZERO},
        {{SIM_ACT_SILU, 0, 0}, W_NAN, W_PINF, W_NAN},
        {{SIM_ACT_HSWISH, 1.0f / 6, 0.5f}, W_NAN, W_PINF, W_NAN},
        {{SIM_ACT_HSIGMOID, 0.2f, 0.5f}, W_NAN, W_ONE, W_ZERO},
        {{SIM_ACT_LEAKY, 0.01f, 0}, W_NAN, W_PINF, W_NINF},
        {{SIM_ACT_CLIP, -1.0f, 1.0f}, W_NAN, W_ONE, W_A},
        {{SIM_ACT_ELU, 1.0f, 0}, W_NAN, W_PINF, W_NEG_A},
        {{SIM_ACT_SOFTPLUS, 0, 0}, W_NAN, W_PINF, W_ZERO},
        {{SIM_ACT_RELU, 0, 0}, W_NAN, W_PINF, W_ZERO},
    };
    const float specials[3] = {NAN, INFINITY, -INFINITY};

    (void)state;
    for (size_t k = 0; k < sizeof ex / sizeof ex[0]; k++) {
        const struct expect *e = &ex[k];
        const enum want wants[3] = {e->nan, e->pinf, e->ninf};
        for (int s = 0; s < 3; s++) {
            float x[N], wide[N], tail[N], map[N];
            for (int i = 0; i < N; i++)
                x[i] = i % 3 == 0 ? specials[s] : (float)(i - 20) * 0.37f;
            sim_act_range(&e->act, x, wide, 0, N);
            for (int i = 0; i < N; i++) /* one at a time: the scalar tail only */
                sim_act_range(&e->act, x, tail, i, i + 1);
            sim_act_map(&e->act, x, map, N);
            for (int i = 0; i < N; i++) {
                if (memcmp(&wide[i], &tail[i], 4) != 0 || memcmp(&wide[i], &map[i], 4) != 0)
                    fail_msg("%s(%g) at %d: the block gives %a, the tail %a, the map %a",
                             sim_act_name(e->act.kind), (double)x[i], i, (double)wide[i],
                             (double)tail[i], (double)map[i]);
                if (i % 3 == 0 && !check(wants[s], wide[i], e->act.a))
                    fail_msg("%s(%g) at %d gave %a", sim_act_name(e->act.kind),
                             (double)x[i], i, (double)wide[i]);
                if (i % 3 != 0 && isnan(wide[i]))
                    fail_msg("%s(%g) at %d gave NaN next to a %g", sim_act_name(e->act.kind),
                             (double)x[i], i, (double)specials[s]);
            }
        }
        printf("%-11s NaN, +inf, -inf: %s, %s, %s in every lane and the tail\n",
               sim_act_name(e->act.kind), e->nan == W_NAN ? "NaN" : "0",
               e->pinf == W_ONE ? "1" : "+inf",
               e->ninf == W_PZERO ? "+0" : e->ninf == W_NINF ? "-inf"
               : e->ninf == W_NAN ? "NaN" : e->ninf == W_A ? "a" : e->ninf == W_NEG_A ? "-a" : "0");
    }
}

/* Every NaN pattern's class (quiet, signalling, either sign, a few payloads) through
 * Sigmoid and SiLU, in the block and the tail. */
static void
test_nan_payloads(void **state)
{
    static const uint32_t bits[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
                                    0x7fbfffffu, 0x7fffffffu, 0xffffffffu, 0x7fc12345u};
    const int kinds[2] = {SIM_ACT_SIGMOID, SIM_ACT_SILU};

    (void)state;
    for (int k = 0; k < 2; k++) {
        struct sim_act act = {kinds[k], 0, 0};
        for (size_t b = 0; b < sizeof bits / sizeof bits[0]; b++) {
            float x[17], y[17];
            for (int i = 0; i < 17; i++)
                memcpy(&x[i], &bits[b], 4);
            sim_act_range(&act, x, y, 0, 17); /* 16 in the block, the 17th in the tail */
            for (int i = 0; i < 17; i++)
                if (!isnan(y[i]))
                    fail_msg("%s of NaN 0x%08x at %d gave %a", sim_act_name(act.kind),
                             (unsigned)bits[b], i, (double)y[i]);
        }
    }
}

/* Below the exp's clamp (-87.34) Sigmoid is +0 and SiLU x * +0 (-0 for finite x, NaN for
 * -inf), PyTorch's bits, in the block and the tail. */
static void
test_below_clamp(void **state)
{
    const float xs[5] = {-INFINITY, -1e30f, -104.0f, -100.0f, -88.8f};
    const uint32_t want_sig = 0x00000000u, want_silu = 0x80000000u;

    (void)state;
    for (int k = 0; k < 2; k++) {
        struct sim_act act = {k == 0 ? SIM_ACT_SIGMOID : SIM_ACT_SILU, 0, 0};
        for (int j = 0; j < 5; j++) {
            float x[17], y[17];
            for (int i = 0; i < 17; i++)
                x[i] = xs[j];
            sim_act_range(&act, x, y, 0, 17);
            for (int i = 0; i < 17; i++) {
                uint32_t b;
                memcpy(&b, &y[i], 4);
                if (k == 1 && j == 0 ? !isnan(y[i]) : b != (k == 0 ? want_sig : want_silu))
                    fail_msg("%s(%g) at %d gave %a (bits %08x); PyTorch gives %s",
                             sim_act_name(act.kind), (double)xs[j], i, (double)y[i],
                             (unsigned)b, k == 0 ? "+0" : j == 0 ? "NaN" : "-0");
            }
        }
    }
    printf("Sigmoid(-inf, -1e30, -104, -100, -88.8) = +0, SiLU = NaN, -0, -0, -0, -0: "
           "PyTorch's bits\n");
}

/* Sigmoid and SiLU over [-100, 100]: the block equals the scalar tail bit for bit, and
 * above -87 (below it: test_below_clamp) both are within 1e-6 relative (plus 1e-37
 * absolute) of the double-precision values. */
static void
test_dense(void **state)
{
    enum { DN = 200003 };
    static float x[DN], wide[DN], tail[DN];
    const int kinds[2] = {SIM_ACT_SIGMOID, SIM_ACT_SILU};

    (void)state;
    for (int i = 0; i < DN; i++)
        x[i] = -100.0f + 200.0f * (float)i / (float)(DN - 1);
    for (int k = 0; k < 2; k++) {
        struct sim_act act = {kinds[k], 0, 0};
        double worst = 0;
        sim_act_range(&act, x, wide, 0, DN);
        for (int i = 0; i < DN; i++)
            sim_act_range(&act, x, tail, i, i + 1);
        for (int i = 0; i < DN; i++) {
            double s = 1.0 / (1.0 + exp(-(double)x[i]));
            double want = k == 0 ? s : (double)x[i] * s;
            double d = fabs((double)wide[i] - want);
            if (memcmp(&wide[i], &tail[i], 4) != 0)
                fail_msg("%s(%a) at %d: the block gives %a, the tail %a",
                         sim_act_name(act.kind), (double)x[i], i, (double)wide[i],
                         (double)tail[i]);
            if (x[i] > -87.0f && d > 1e-6 * fabs(want) + 1e-37) /* below: test_below_clamp */
                fail_msg("%s(%a) gave %a, double precision %a", sim_act_name(act.kind),
                         (double)x[i], (double)wide[i], want);
            if (fabs(want) > 1e-30 && d / fabs(want) > worst)
                worst = d / fabs(want);
        }
        printf("%-7s over [-100, 100], %d values: the block's bits are the tail's; max "
               "relative difference from double %.3g\n", sim_act_name(act.kind), DN, worst);
    }
}

int
main(void)
{
    char isa[160];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nan_inf),
        cmocka_unit_test(test_nan_payloads),
        cmocka_unit_test(test_below_clamp),
        cmocka_unit_test(test_dense),
    };
    printf("kernels: %s\n", sim_isa_describe(isa, sizeof isa)); /* IPUOF_SIM_ISA's passes */
    return cmocka_run_group_tests_name("sim_act", tests, NULL, NULL);
}
