/*
 * test_sim_half_ops.c — float16 ops as the IPU computes them (sim/exec/half_exec.c): an op given
 * float16 tensors runs its float kernel on the widened values and rounds each float16
 * result to float16 as it writes it, so a chain of float16 ops equals a reference that
 * rounds after every op (not float32 rounded once); the memory plan counts 2 bytes per
 * float16 activation; gradients through float16 ops are float16; stochastic rounding is
 * unbiased over many roundings and reproducible for a generator state.
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

#include "half.h"
#include "model.h"
#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define F16 SIM_DTYPE_FLOAT16
#define DIMS(...) ((const int64_t[]){ __VA_ARGS__ })

static float
r16(float f)
{
    return sim_half_to_float(sim_half_from_float(f));
}

/* y = (x + a) - a with a = 1024 in float16: x + a rounds to float16's step of 1 at 1024,
 * so y is x rounded to an integer (0.3 -> 0, 0.7 -> 1, 2.5 -> 2 by ties to even), where
 * float32 rounded once would give x back. Then z = Sigmoid(MatMul(y, w) + b), each result
 * float16, against a reference that rounds after every op. */
static void
test_chain_rounds_per_op(void **state)
{
    const float xf[2][3] = { { 0.3f, 0.7f, 2.5f }, { -1.25f, 3.5f, 100.2f } };
    const float wf[3][2] = { { 0.5f, -1.0f }, { 0.25f, 2.0f }, { 1.5f, 0.125f } };
    const float bf[2] = { 0.1f, -0.3f };
    uint16_t x16[6], w16[6], b16[2], a16 = sim_half_from_float(1024.0f);
    float y[2][3], ref[2][2];
    struct sim_err err = { 0 };
    struct test_ob_run r;
    struct sim_ob *b = sim_ob_new(13);
    const uint16_t *z;
    double maxd = 0;

    (void)state;
    for (int i = 0; i < 6; i++) {
        x16[i] = sim_half_from_float(xf[i / 3][i % 3]);
        w16[i] = sim_half_from_float(wf[i / 2][i % 2]);
    }
    for (int i = 0; i < 2; i++)
        b16[i] = sim_half_from_float(bf[i]);
    sim_ob_input(b, "x", F16, 2, DIMS(2, 3));
    sim_ob_initializer(b, "a", F16, 0, DIMS(0), &a16);
    sim_ob_initializer(b, "w", F16, 2, DIMS(3, 2), w16);
    sim_ob_initializer(b, "b", F16, 1, DIMS(2), b16);
    sim_ob_node(b, "Add", "add", "x,a", "xa");
    sim_ob_node(b, "Sub", "sub", "xa,a", "y");
    sim_ob_node(b, "MatMul", "mm", "y,w", "p");
    sim_ob_node(b, "Add", "bias", "p,b", "q");
    sim_ob_node(b, "Sigmoid", "sig", "q", "z");
    sim_ob_output(b, "z", F16);
    r = test_ob_compile(b, &err);
    if (r.e == NULL)
        fail_msg("compile: %s", err.msg);
    memcpy(sim_exe_input_buffer(r.e, 0), x16, sizeof(x16));
    if (sim_exe_run(r.e, &err) != 0)
        fail_msg("run: %s", err.msg);
    z = sim_exe_output_buffer(r.e, 0);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            y[i][j] = r16(r16(sim_half_to_float(x16[i * 3 + j]) + 1024.0f) - 1024.0f);
    assert_true(y[0][0] == 0.0f && y[0][1] == 1.0f && y[0][2] == 2.0f);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            float p = 0, q;
            for (int k = 0; k < 3; k++)
                p += y[i][k] * sim_half_to_float(w16[k * 2 + j]);
            q = r16(r16(p) + sim_half_to_float(b16[j]));
            ref[i][j] = r16(1.0f / (1.0f + expf(-q)));
        }
    for (int i = 0; i < 4; i++) {
        double d = fabs((double)sim_half_to_float(z[i]) - ref[i / 2][i % 2]);
        maxd = d > maxd ? d : maxd;
        /* Sigmoid's exp is the vectorized one (relative error < 2e-7): at most one float16
         * step from the reference's libm, which here it never is */
        assert_int_equal(z[i], sim_half_from_float(ref[i / 2][i % 2]));
    }
    printf("  (x + 1024) - 1024 per op in float16: %g %g %g; Sigmoid(MatMul + b) max "
           "difference from the per-op reference %g\n", y[0][0], y[0][1], y[0][2], maxd);
    test_ob_run_free(&r);
}

/* Every op of the float path takes float16 now: a few unary and layer ops give the
 * float16 of their float result on float16 values. */
static void
test_ops_take_half(void **state)
{
    static const char *const ops[] = { "Relu", "Neg", "Exp", "Sigmoid", "Softmax", "Tanh" };
    const float xf[6] = { -2.0f, -0.5f, 0.0f, 0.3f, 1.0f, 4.0f };
    uint16_t x16[6];

    (void)state;
    for (int i = 0; i < 6; i++)
        x16[i] = sim_half_from_float(xf[i]);
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        struct sim_err err = { 0 };
        struct sim_ob *b = sim_ob_new(13), *b32 = sim_ob_new(13);
        struct test_ob_run r, r32;
        const uint16_t *y;
        const float *y32;
        float x32[6];
        for (int j = 0; j < 6; j++)
            x32[j] = sim_half_to_float(x16[j]);
        sim_ob_input(b, "x", F16, 2, DIMS(2, 3));
        sim_ob_node(b, ops[i], "op", "x", "y");
        sim_ob_output(b, "y", F16);
        sim_ob_input(b32, "x", F32, 2, DIMS(2, 3));
        sim_ob_node(b32, ops[i], "op", "x", "y");
        sim_ob_output(b32, "y", F32);
        r = test_ob_compile(b, &err);
        r32 = test_ob_compile(b32, &err);
        if (r.e == NULL || r32.e == NULL)
            fail_msg("%s: %s", ops[i], err.msg);
        memcpy(sim_exe_input_buffer(r.e, 0), x16, sizeof(x16));
        memcpy(sim_exe_input_buffer(r32.e, 0), x32, sizeof(x32));
        if (sim_exe_run(r.e, &err) != 0 || sim_exe_run(r32.e, &err) != 0)
            fail_msg("%s: %s", ops[i], err.msg);
        y = sim_exe_output_buffer(r.e, 0);
        y32 = sim_exe_output_buffer(r32.e, 0);
        for (int j = 0; j < 6; j++)
            if (y[j] != sim_half_from_float(y32[j]))
                fail_msg("%s(%g): float16 0x%04x, want float16 of %.9g", ops[i], x32[j],
                         y[j], y32[j]);
        test_ob_run_free(&r);
        test_ob_run_free(&r32);
    }
}

/* activations IPU 0 holds for y = Tanh(Relu(x)) over n elements of dtype dt */
static uint64_t
chain_activations(int dt, int64_t n)
{
    struct sim_mem_report rep;
    struct sim_err err = { 0 };
    struct sim_ob *b = sim_ob_new(13);
    struct test_ob_run r;
    uint64_t a;

    sim_ob_input(b, "x", dt, 1, DIMS(n));
    sim_ob_node(b, "Relu", "relu", "x", "h");
    sim_ob_node(b, "Tanh", "tanh", "h", "y");
    sim_ob_output(b, "y", dt);
    r = test_ob_compile(b, &err);
    if (r.e == NULL)
        fail_msg("compile: %s", err.msg);
    assert_int_equal(sim_exe_memory(r.e, 0, &rep), 0);
    a = rep.activations;
    test_ob_run_free(&r);
    return a;
}

/* The memory plan counts the float16 intermediate at 2 bytes per element. */
static void
test_plan_half_ops(void **state)
{
    uint64_t a32 = chain_activations(F32, 1 << 16), a16 = chain_activations(F16, 1 << 16);

    (void)state;
    printf("  Tanh(Relu(x)) over 65 536 elements: activations float %llu, float16 %llu "
           "bytes\n", (unsigned long long)a32, (unsigned long long)a16);
    assert_true(a16 * 2 == a32);
}

/* loss = sum(Cast32(Mul(h, h))) with h = Cast16(w) for a float weight w: Mul runs in
 * float16, so its gradient into h is float16 (round16(2 h g) with g = 1 from the Cast). */
static void
test_grad_through_half_op(void **state)
{
    const float w[3] = { 1.0f / 3.0f, -0.1f, 700.7f };
    float g[3];
    struct sim_compile_opts o;
    struct sim_err err = { 0 };
    struct sim_exe *e = NULL;
    struct sim_model *m;
    struct sim_ob *b = sim_ob_new(13);

    (void)state;
    sim_ob_initializer(b, "w", F32, 1, DIMS(3), w);
    sim_ob_node(b, "Cast", "c16", "w", "h");
    sim_ob_attr_int(b, "to", F16);
    sim_ob_node(b, "Mul", "sq", "h,h", "s");
    sim_ob_node(b, "Cast", "c32", "s", "sf");
    sim_ob_attr_int(b, "to", F32);
    sim_ob_node(b, "ReduceSum", "sum", "sf", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.optimizer.lr = 0.0f;
    if (sim_compile(m, &o, &e, &err) != 0 || sim_exe_run(e, &err) != 0)
        fail_msg("float16 Mul training: %s", err.msg);
    assert_int_equal(sim_exe_read_gradient(e, "w", g, sizeof(g), &err), 0);
    for (int i = 0; i < 3; i++) {
        float h = r16(w[i]);
        /* Mul's backward adds h*g into the gradient twice (once per input), rounding
         * the float16 sum each time: round16(round16(h) + h) */
        float want = r16(r16(h) + h);
        if (g[i] != want)
            fail_msg("w[%d] = %.9g: gradient %.9g, want %.9g", i, w[i], g[i], want);
    }
    printf("  gradient through a float16 Mul: %.9g %.9g %.9g\n", g[0], g[1], g[2]);
    sim_exe_free(e);
    sim_model_free(m);
}

/* Data-movement ops on float16 (Transpose, Reshape, Flatten, Unsqueeze, Squeeze) move the
 * halves and give the bits of the op-by-op path: forward z = Mul(r, c1) + Reshape(
 * Squeeze(Unsqueeze(Mul(f, c2)))) with r = Reshape(t), f = Flatten(t), t = Transpose(
 * Cast16(w)), each op rounded; the gradient into t adds its two float16 contributions and
 * rounds (c1 + c2 = 1000.5 + k + 0.3 (k + 1) is not a half), and Transpose's backward
 * permutes it back into w. */
static void
test_moves_half(void **state)
{
    const float w[6] = { 1.0f / 3.0f, -0.1f, 700.7f, 2.5f, -3.75f, 0.01f };
    uint16_t c1[6], c2[6];
    const int64_t six = 6, ax0 = 0;
    float g[6];
    struct sim_compile_opts o;
    struct sim_err err = { 0 };
    struct sim_exe *e = NULL;
    struct sim_model *m;
    struct sim_ob *b = sim_ob_new(13);
    const uint16_t *z;

    (void)state;
    for (int k = 0; k < 6; k++) {
        c1[k] = sim_half_from_float(1000.5f + (float)k);
        c2[k] = sim_half_from_float(0.3f * (float)(k + 1));
    }
    sim_ob_initializer(b, "w", F32, 2, DIMS(2, 3), w);
    sim_ob_initializer(b, "c1", F16, 1, DIMS(6), c1);
    sim_ob_initializer(b, "c2", F16, 2, DIMS(3, 2), c2);
    sim_ob_initializer(b, "six", SIM_DTYPE_INT64, 1, DIMS(1), &six);
    sim_ob_initializer(b, "ax0", SIM_DTYPE_INT64, 1, DIMS(1), &ax0);
    sim_ob_node(b, "Cast", "c16", "w", "h");
    sim_ob_attr_int(b, "to", F16);
    sim_ob_node(b, "Transpose", "tr", "h", "t");
    sim_ob_node(b, "Reshape", "rs", "t,six", "r");
    sim_ob_node(b, "Flatten", "fl", "t", "f");
    sim_ob_node(b, "Mul", "m1", "r,c1", "s1");
    sim_ob_node(b, "Mul", "m2", "f,c2", "s2");
    sim_ob_node(b, "Unsqueeze", "un", "s2,ax0", "u");
    sim_ob_node(b, "Squeeze", "sq", "u,ax0", "q");
    sim_ob_node(b, "Reshape", "rs2", "q,six", "qr");
    sim_ob_node(b, "Add", "add", "s1,qr", "z");
    sim_ob_node(b, "Cast", "c32", "z", "zf");
    sim_ob_attr_int(b, "to", F32);
    sim_ob_node(b, "ReduceSum", "sum", "zf", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    sim_ob_output(b, "z", F16);
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.optimizer.lr = 0.0f;
    if (sim_compile(m, &o, &e, &err) != 0 || sim_exe_run(e, &err) != 0)
        fail_msg("float16 data movement training: %s", err.msg);
    z = sim_exe_output_buffer(e, 1);
    assert_int_equal(sim_exe_read_gradient(e, "w", g, sizeof(g), &err), 0);
    for (int k = 0; k < 6; k++) {
        int at = (k % 2) * 3 + k / 2;   /* t[a][b] = h[b][a] = w[b * 3 + a], k = 2 a + b */
        float t = r16(w[at]);
        float zk = r16(r16(t * sim_half_to_float(c1[k])) + r16(t * sim_half_to_float(c2[k])));
        float gk = r16(sim_half_to_float(c1[k]) + sim_half_to_float(c2[k]));
        if (z[k] != sim_half_from_float(zk))
            fail_msg("z[%d] = %.9g, want %.9g", k, sim_half_to_float(z[k]), zk);
        if (g[at] != gk)
            fail_msg("dw[%d] = %.9g, want %.9g", at, g[at], gk);
    }
    printf("  float16 Transpose/Reshape/Flatten/Squeeze/Unsqueeze: z[0] %.9g, dw[0] %.9g\n",
           sim_half_to_float(z[0]), g[0]);
    sim_exe_free(e);
    sim_model_free(m);
}

/* The hash of the stochastic rounding sweep below (half_sr.c's generator, fixed: a change
 * of generator changes it, and every ISA level must give it). */
#define SR_SWEEP_HASH 0x9cb42826e68c5ca9ull

/* Stochastic rounding: a value 0.3 of the way between two halves rounds up 30 % of the
 * time (unbiased: the mean of many roundings is the value), the same draws for the same
 * state, other draws for another; exact values and NaN are left alone. */
static void
test_stochastic_rounding(void **state)
{
    const float lo = 1.0f, step = 1.0f / 1024.0f, f = lo + 0.3f * step;
    enum { N = 1000000 };
    uint16_t *a = malloc(N * sizeof(*a)), *c = malloc(N * sizeof(*c));
    float *src = malloc(N * sizeof(*src));
    uint64_t s1 = 42, s2 = 42, s3 = 43;
    uint64_t hash = 0xcbf29ce484222325ull;
    double sum = 0, mean, sigma;
    long up = 0, diff = 0;

    (void)state;
    assert_non_null(a);
    assert_non_null(c);
    assert_non_null(src);
    for (int i = 0; i < N; i++)
        src[i] = i % 2 ? f : -f;
    sim_half_from_float_sr_n(src, a, N, s1);
    sim_half_from_float_sr_n(src, c, N, s2);
    assert_memory_equal(a, c, N * sizeof(*a));
    sim_half_from_float_sr_n(src, c, N, s3);
    for (int i = 0; i < N; i++) {
        float v = sim_half_to_float(a[i]);
        float m = v < 0 ? -v : v;
        assert_true(m == lo || m == lo + step);
        assert_true((v < 0) == (src[i] < 0));
        up += m != lo;
        sum += m;
        diff += a[i] != c[i];
    }
    mean = sum / N;
    /* binomial: sd of the mean = step * sqrt(p (1 - p) / N) */
    sigma = step * sqrt(0.3 * 0.7 / N);
    printf("  stochastic rounding of 1 + 0.3 step: %.4f up, mean - value = %.3g (sigma %.3g); "
           "another seed differs in %ld of %d\n", (double)up / N, mean - f, sigma, diff, N);
    assert_true(fabs(mean - f) < 5 * sigma);
    assert_true(diff > N / 4);
    s1 = 7;
    assert_int_equal(sim_half_from_float_sr(0.5f, s1, 0), sim_half_from_float(0.5f));
    assert_int_equal(sim_half_from_float_sr(-0.0f, s1, 0), 0x8000);
    assert_int_equal(sim_half_from_float_sr(1e6f, s1, 0), 0x7c00);
    assert_int_equal(sim_half_from_float_sr(65510.0f, s1, 0), 0x7bff);
    assert_true(sim_half_to_float(sim_half_from_float_sr(NAN, s1, 0)) !=
                sim_half_to_float(sim_half_from_float_sr(NAN, s1, 0)));
    /* subnormals: between 0 and 2^-24 half-way, and 0.25 of the way from 2^-24 to 2^-23;
     * a float far below the smallest half (2^-40: up with probability 2^-16) */
    {
        long ups = 0, ups2 = 0, ups3 = 0;
        for (int i = 0; i < 100000; i++) {
            ups += sim_half_from_float_sr(0x1.0p-25f, s1, (uint64_t)i) == 1;
            ups2 += sim_half_from_float_sr(0x1.4p-24f, s1, (uint64_t)i) == 2;
            ups3 += sim_half_from_float_sr(0x1.0p-40f, s1, (uint64_t)i) == 1;
        }
        printf("  subnormals: 2^-25 up %ld, 1.25 x 2^-24 up %ld, 2^-40 up %ld of 100000\n",
               ups, ups2, ups3);
        assert_true(ups > 49000 && ups < 51000);
        assert_true(ups2 > 24000 && ups2 < 26000);
        assert_true(ups3 < 10);
    }
    /* the array form is the scalar form element by element, and its bits are fixed (the
     * same hash at every ISA level: tests/run.sh runs this at each): a sweep of floats
     * over every float16 binade, subnormals, the largest halves, infinities and NaN */
    for (int i = 0; i < N; i++) {
        uint32_t u = (uint32_t)i * 4294u + 0x2f000000u * (uint32_t)(i & 1);
        memcpy(&src[i], &u, sizeof(u));
    }
    sim_half_from_float_sr_n(src, a, N, 0x0123456789abcdefull);
    for (int i = 0; i < N; i++) {
        assert_int_equal(a[i], sim_half_from_float_sr(src[i], 0x0123456789abcdefull,
                                                      (uint64_t)i));
        hash = (hash ^ a[i]) * 0x100000001b3ull;
    }
    printf("  stochastic rounding of a sweep of %d floats at key 0x0123456789abcdef: hash "
           "%016llx\n", N, (unsigned long long)hash);
    assert_true(hash == SR_SWEEP_HASH);
    /* normal float16 magnitudes give the scalar form's bits too: every float16 binade,
     * both signs, the range's ends (2^-14 and 65504), and single values just outside the
     * range (a float16 subnormal, or past 65504) among them */
    for (int i = 0; i < N; i++) {
        uint32_t u = 0x38800000u + (uint32_t)(((uint64_t)i * 2654435761u) %
                                              (0x477fe000u - 0x38800000u + 1u));
        u |= (uint32_t)(i & 1) << 31;
        if (i % 4096 == 100)
            u = 0x38800000u;
        else if (i % 4096 == 300)
            u = 0x477fe000u;
        else if (i % 4096 == 500)
            u = 0x387fffffu;
        else if (i % 4096 == 700)
            u = 0x477fe001u;
        memcpy(&src[i], &u, sizeof(u));
    }
    sim_half_from_float_sr_n(src, a, N, 0x0123456789abcdefull);
    for (int i = 0; i < N; i++)
        assert_int_equal(a[i], sim_half_from_float_sr(src[i], 0x0123456789abcdefull,
                                                      (uint64_t)i));
    free(a);
    free(c);
    free(src);
}

/* The classes of float the vector rounding (half_sr.c's sr_block, one path for every
 * lane) must round as the scalar reference does: value k of the table. */
static float
sr_class(int k, uint32_t salt)
{
    static const uint32_t bits[] = {
        0x00000000u,                    /* +0 */
        0x80000000u,                    /* -0 */
        0x3f8ccccdu,                    /* 1.1, normal */
        0x38800000u,                    /* 2^-14, the smallest normal half */
        0x387fffffu,                    /* just below: rounds between subnormals */
        0x33800000u,                    /* 2^-24, the smallest subnormal half */
        0x33000000u,                    /* 2^-25, half-way to 0 */
        0x2b800000u,                    /* 2^-40, far below every half */
        0x00000001u,                    /* the smallest float denormal */
        0x477fe000u,                    /* 65504, the largest half */
        0x477fe001u,                    /* just past it: 65504 by nearest-even */
        0x477fefffu,                    /* below 65520: 65504 */
        0x477ff000u,                    /* 65520: infinity */
        0x7f7fffffu,                    /* the largest float: infinity */
        0x7f800000u,                    /* infinity */
        0x7fc00000u,                    /* quiet NaN */
        0x7f800001u,                    /* signalling NaN, low payload */
        0x7fa12345u,                    /* signalling NaN, a payload in the kept bits */
    };
    enum { NB = sizeof(bits) / sizeof(bits[0]) };
    uint32_t u;
    float f;

    if (k < NB) {
        u = bits[k];
        /* a random fraction on the subnormal and normal ones, so they round both ways */
        if (k >= 2 && k <= 7)
            u = (u & 0xff800000u) | ((u + (salt & 0x7fffu)) & 0x7fffffu);
        u |= (salt >> 31) << 31;
    } else {                            /* a subnormal half: |f| < 2^-14, any bits */
        u = 0x30000000u + salt % 0x8800000u;
        u |= (salt & 1u) << 31;
    }
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* The vector path of stochastic rounding (every class of float inside a run of normal
 * values, at every lane of a vector of 4, 8 or 16 and in the scalar tail) gives the
 * scalar reference's bits, at the ISA level in use (tests/run.sh runs this at each); and
 * the array forms stay unbiased for subnormal values mixed with zeros and normal ones. */
static void
test_sr_vector_lanes(void **state)
{
    enum { N = 64 * 1024 + 13, CLASSES = 19 };
    float *src = malloc(N * sizeof(*src)), *rt = malloc(N * sizeof(*rt));
    uint16_t *a = malloc(N * sizeof(*a));
    const uint64_t key = 0xfeedface12345678ull;
    long checked = 0, sub_up = 0, sub_n = 0;
    uint32_t x = 2463534242u;

    (void)state;
    assert_non_null(src);
    assert_non_null(rt);
    assert_non_null(a);
    /* element i: one special value at lane (i / 32) % 16 of each run of 16 normal values,
     * its class cycling, then whole runs of each class; a random salt for each */
    for (int i = 0; i < N; i++) {
        int k;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        if (i < N / 2)
            k = i % 16 == (i / 32) % 16 ? (i / 512) % CLASSES : 2;
        else
            k = (i / 16) % CLASSES;
        src[i] = sr_class(k, x);
    }
    sim_half_from_float_sr_n(src, a, N, key);
    memcpy(rt, src, N * sizeof(*rt));
    sim_half_round_sr_n(rt, N, key);
    for (int i = 0; i < N; i++) {
        uint16_t want = sim_half_from_float_sr(src[i], key, (uint64_t)i);
        float wf = sim_half_to_float(want);
        if (a[i] != want) {
            uint32_t u;
            memcpy(&u, &src[i], sizeof(u));
            fail_msg("element %d (%a, bits %08x): vector rounding %04x, scalar %04x", i,
                     (double)src[i], (unsigned)u, a[i], want);
        }
        if (memcmp(&rt[i], &wf, sizeof(wf)) != 0)
            fail_msg("element %d (%a): in-place rounding %a, scalar %a", i, (double)src[i],
                     (double)rt[i], (double)wf);
        checked++;
    }
    /* unbiased through the array form: 1.25 x 2^-24 (a subnormal half's fraction 0.25)
     * every third element, zeros and normal values between */
    for (int i = 0; i < N; i++)
        src[i] = i % 3 == 0 ? 0x1.4p-24f : i % 3 == 1 ? 0.0f : 1.0f + (float)i / N;
    sim_half_from_float_sr_n(src, a, N, key ^ 1);
    for (int i = 0; i < N; i += 3) {
        assert_true(a[i] == 1 || a[i] == 2);
        sub_up += a[i] == 2;
        sub_n++;
        if (i + 1 < N)
            assert_int_equal(a[i + 1], 0);     /* a zero stays +0 */
    }
    printf("  vector stochastic rounding: %ld elements of %d classes at every lane equal to "
           "the scalar rounding; 1.25 x 2^-24 among zeros and normals up %.4f of %ld "
           "(expected 0.25)\n", checked, CLASSES, (double)sub_up / sub_n, sub_n);
    /* binomial sd sqrt(0.25 0.75 / 21850) = 0.0029: within 5 sd */
    assert_true(fabs((double)sub_up / sub_n - 0.25) < 0.015);
    free(src);
    free(rt);
    free(a);
}

/* loss = sum(Cast32(Mul(w, x))) for a float16 weight w (dloss/dw = x): SGD's update is
 * computed in float32 from the float16 gradient and the weight stored as float16:
 * w' = round16(w - lr round16(x)); stochastic: the model asks for stochastic rounding
 * (metadata ipuof.stochastic_rounding), seeded from the compile's seed 5. */
static void
train_half_weight(const float *w0, const float *x, float lr, bool stochastic, int steps,
                  float *w)
{
    uint16_t w16[4], x16[4];
    struct sim_compile_opts o;
    struct sim_err err = { 0 };
    struct sim_exe *e = NULL;
    struct sim_model *m;
    struct sim_ob *b = sim_ob_new(13);

    for (int i = 0; i < 4; i++) {
        w16[i] = sim_half_from_float(w0[i]);
        x16[i] = sim_half_from_float(x[i]);
    }
    sim_ob_input(b, "x", F16, 1, DIMS(4));
    sim_ob_initializer(b, "w", F16, 1, DIMS(4), w16);
    sim_ob_node(b, "Mul", "mul", "w,x", "s");
    sim_ob_node(b, "Cast", "c32", "s", "sf");
    sim_ob_attr_int(b, "to", F32);
    sim_ob_node(b, "ReduceSum", "sum", "sf", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    m = test_ob_load(b);
    m->stochastic_rounding = stochastic;
    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.optimizer.lr = lr;
    o.seed = 5;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("compile: %s", err.msg);
    for (int k = 0; k < steps; k++) {
        memcpy(sim_exe_input_buffer(e, 0), x16, sizeof(x16));
        if (sim_exe_run(e, &err) != 0)
            fail_msg("run: %s", err.msg);
    }
    if (sim_exe_read_weight(e, "w", w, 4 * sizeof(float), &err) != 0)
        fail_msg("read_weight: %s", err.msg);
    sim_exe_free(e);
    sim_model_free(m);
}

/* A float16 weight trains (main refused it: "float16 weights are not trained yet"): the
 * update in float32, stored rounded to float16; stochastic rounding moves a weight whose
 * update is below half its float16 step on average by the update, reproducibly. */
/* test_half_weight_trains' stochastic weights after 100 steps at seed 5. */
static const float sr_weights[4] = { 0x1.f9p-1f, 0x1.fbp-1f, 0x1.fcp-1f, 0x1.fccp-1f };

static void
test_half_weight_trains(void **state)
{
    const float w0[4] = { 1.0f, 0.1f, -100.0f, 3.0f }, x[4] = { 0.3f, -2.0f, 0.7f, 1.0f };
    const float tiny[4] = { 0.01f, 0.01f, 0.01f, 0.01f }, ones[4] = { 1, 1, 1, 1 };
    float w[4], w2[4], w3[4];

    (void)state;
    train_half_weight(w0, x, 0.01f, false, 1, w);
    for (int i = 0; i < 4; i++) {
        float want = r16(r16(w0[i]) - 0.01f * r16(x[i]));
        if (w[i] != want)
            fail_msg("w[%d]: %.9g after one step, want round16(w - lr x) = %.9g", i, w[i],
                     want);
    }
    printf("  float16 weights after one SGD step: %.9g %.9g %.9g %.9g\n", w[0], w[1], w[2],
           w[3]);
    /* lr x = 1e-4 each step on w = 1 (float16's step just below 1 is 2^-11 = 4.9e-4):
     * nearest-even never moves it, stochastic rounding moves it by about 100 x 1e-4 */
    train_half_weight(ones, tiny, 0.01f, false, 100, w);
    train_half_weight(ones, tiny, 0.01f, true, 100, w2);
    train_half_weight(ones, tiny, 0.01f, true, 100, w3);
    printf("  w = 1, 100 updates of -1e-4: nearest-even %.6g, stochastic %.6g %.6g %.6g %.6g "
           "(float32 0.99)\n", w[0], w2[0], w2[1], w2[2], w2[3]);
    assert_true(w[0] == 1.0f);
    assert_memory_equal(w2, w3, sizeof(w2));
    for (int i = 0; i < 4; i++)
        assert_true(fabsf(w2[i] - 0.99f) < 0.006f);
    /* the same bits at every ISA level (tests/run.sh runs this at each): the rounding of
     * the node's results and of the updates, pinned (half_sr.c's generator, seed 5) */
    printf("  stochastic weights, bits: %a %a %a %a\n", w2[0], w2[1], w2[2], w2[3]);
    for (int i = 0; i < 4; i++)
        if (w2[i] != sr_weights[i])
            fail_msg("w[%d] = %a after 100 stochastic steps; seed 5 gives %a at every ISA "
                     "level", i, w2[i], sr_weights[i]);
}

/* Loss scaling as PopTorch defines it: the loss's gradient is seeded with loss_scaling, so
 * a float16 gradient that would flush to zero survives; gradients are divided by it before
 * the update. loss = sum(Cast32(Mul(Mul(w, x), x))): dloss/dw = x^2 = 2^-26 with x =
 * 2^-13, below float16's smallest subnormal (2^-24) unless scaled. */
static void
test_loss_scaling(void **state)
{
    float ls[2] = { 1.0f, 4096.0f }, g[2][2];
    uint16_t w16[2], x16[2];

    (void)state;
    for (int i = 0; i < 2; i++) {
        w16[i] = sim_half_from_float(1.0f);
        x16[i] = sim_half_from_float(0x1.0p-13f);
    }
    for (int c = 0; c < 2; c++) {
        struct sim_compile_opts o;
        struct sim_err err = { 0 };
        struct sim_exe *e = NULL;
        struct sim_model *m;
        struct sim_ob *b = sim_ob_new(13);
        sim_ob_input(b, "x", F16, 1, DIMS(2));
        sim_ob_initializer(b, "w", F16, 1, DIMS(2), w16);
        sim_ob_node(b, "Mul", "m1", "w,x", "s");
        sim_ob_node(b, "Mul", "m2", "s,x", "s2");
        sim_ob_node(b, "Cast", "c32", "s2", "sf");
        sim_ob_attr_int(b, "to", F32);
        sim_ob_node(b, "ReduceSum", "sum", "sf", "loss");
        sim_ob_attr_int(b, "keepdims", 0);
        sim_ob_output(b, "loss", F32);
        m = test_ob_load(b);
        sim_compile_opts_init(&o);
        o.loss = "loss";
        o.optimizer.lr = 0.0f;
        o.optimizer.loss_scaling = ls[c];
        if (sim_compile(m, &o, &e, &err) != 0)
            fail_msg("compile: %s", err.msg);
        memcpy(sim_exe_input_buffer(e, 0), x16, sizeof(x16));
        if (sim_exe_run(e, &err) != 0 ||
            sim_exe_read_gradient(e, "w", g[c], sizeof(g[c]), &err) != 0)
            fail_msg("run: %s", err.msg);
        sim_exe_free(e);
        sim_model_free(m);
    }
    printf("  gradient 2^-26 through float16: loss_scaling 1 gives %g, 4096 gives %g\n",
           g[0][0], g[1][0]);
    assert_true(g[0][0] == 0.0f);
    assert_true(g[1][0] == 0x1.0p-26f);
}

/* Runs y = MatMul(a, b) (or Gemm(a, b, c) with transB, or "GemmT": with transA and
 * transB) on float16 (M, K) x (K, N) with float16 partials when partials_half (a given as
 * (K, M) for GemmT, b as (N, K) for both Gemms); y read back as floats. */
static void
run_mm(const char *op, const uint16_t *a, const uint16_t *b, const uint16_t *c, int64_t M,
       int64_t K, int64_t N, bool partials_half, float *y)
{
    struct sim_compile_opts o;
    struct sim_err err = { 0 };
    struct sim_exe *e = NULL;
    struct sim_model *m;
    struct sim_ob *bld = sim_ob_new(13);
    const uint16_t *out;
    bool ta = strcmp(op, "GemmT") == 0, gemm = ta || strcmp(op, "Gemm") == 0;

    sim_ob_initializer(bld, "a", F16, 2, ta ? DIMS(K, M) : DIMS(M, K), a);
    sim_ob_initializer(bld, "b", F16, 2, gemm ? DIMS(N, K) : DIMS(K, N), b);
    if (gemm) {
        sim_ob_initializer(bld, "c", F16, 1, DIMS(N), c);
        sim_ob_node(bld, "Gemm", "g", "a,b,c", "y");
        sim_ob_attr_int(bld, "transB", 1);
        if (ta)
            sim_ob_attr_int(bld, "transA", 1);
    } else {
        sim_ob_node(bld, "MatMul", "mm", "a,b", "y");
    }
    sim_ob_output(bld, "y", F16);
    m = test_ob_load(bld);
    m->partials_half = partials_half;
    sim_compile_opts_init(&o);
    if (sim_compile(m, &o, &e, &err) != 0 || sim_exe_run(e, &err) != 0)
        fail_msg("%s: %s", op, err.msg);
    out = sim_exe_output_buffer(e, 0);
    for (int64_t i = 0; i < M * N; i++)
        y[i] = sim_half_to_float(out[i]);
    sim_exe_free(e);
    sim_model_free(m);
}

/* setPartialsType(torch.half): MatMul and Gemm add each chunk of 16 products (summed in
 * float) to a float16 accumulator. 2048 + 69 x 1/16: float partials give round16(2052.31)
 * = 2052; float16 partials add at most 1 per chunk to 2048, a tie that stays at 2048 each
 * time. Random cases equal a reference summing in the same chunks, bit for bit: MatMul
 * (row-major B, read in place), Gemm (transposed B, packed) and Gemm with transA too. M
 * is two blocks of half_partials.c's four rows and a part block; N two column tiles and
 * part of one, with a part vector at every width (4, 8, 16). */
static void
test_partials_half(void **state)
{
    enum { M = 11, K = 70, N = 300 };   /* K not whole chunks */
    static uint16_t a[M * K], at[K * M], b[K * N], bt[N * K], c[N];
    static float y[M * N], yh[M * N];
    double maxd = 0;

    (void)state;
    for (int i = 0; i < M * K; i++)
        a[i] = sim_half_from_float(i % K == 0 ? 2048.0f : 0.0625f);
    for (int i = 0; i < K * N; i++)
        b[i] = sim_half_from_float(1.0f);
    run_mm("MatMul", a, b, NULL, M, K, N, false, y);
    run_mm("MatMul", a, b, NULL, M, K, N, true, yh);
    printf("  2048 + 69/16: float partials %g, float16 partials %g\n", y[0], yh[0]);
    assert_true(y[0] == 2052.0f && yh[0] == 2048.0f);
    srand(3);
    for (int i = 0; i < M * K; i++)
        a[i] = sim_half_from_float((float)rand() / (float)RAND_MAX * 8.0f - 2.0f);
    for (int i = 0; i < K * N; i++)
        b[i] = sim_half_from_float((float)rand() / (float)RAND_MAX * 4.0f - 1.0f);
    for (int k = 0; k < K; k++)
        for (int n = 0; n < N; n++)
            bt[n * K + k] = b[k * N + n];
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++)
            at[k * M + m] = a[m * K + k];
    for (int n = 0; n < N; n++)
        c[n] = sim_half_from_float(0.5f * (float)n - 1.0f);
    for (int g = 0; g < 3; g++) {
        if (g == 0)
            run_mm("MatMul", a, b, NULL, M, K, N, true, yh);
        else if (g == 1)
            run_mm("Gemm", a, bt, c, M, K, N, true, yh);
        else
            run_mm("GemmT", at, bt, c, M, K, N, true, yh);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                float acc = 0.0f, want;
                for (int k0 = 0; k0 < K; k0 += 16) {
                    float p = 0.0f;
                    for (int k = k0; k < k0 + 16 && k < K; k++)
                        p += sim_half_to_float(a[m * K + k]) * sim_half_to_float(b[k * N + n]);
                    acc = r16(acc + p);
                }
                want = r16(g == 0 ? acc : acc + sim_half_to_float(c[n]));
                maxd = fmax(maxd, fabs((double)yh[m * N + n] - want));
                if (yh[m * N + n] != want)
                    fail_msg("%s [%d, %d]: %.9g, chunked reference %.9g",
                             g == 0 ? "MatMul" : g == 1 ? "Gemm" : "Gemm transA",
                             m, n, yh[m * N + n], want);
            }
    }
    printf("  random MatMul and Gemm (transB; transA and transB), M = 11, K = 70, N = 300, "
           "float16 partials: max difference from the "
           "chunked reference %g\n", maxd);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_rounds_per_op),
        cmocka_unit_test(test_ops_take_half),
        cmocka_unit_test(test_plan_half_ops),
        cmocka_unit_test(test_grad_through_half_op),
        cmocka_unit_test(test_moves_half),
        cmocka_unit_test(test_stochastic_rounding),
        cmocka_unit_test(test_sr_vector_lanes),
        cmocka_unit_test(test_half_weight_trains),
        cmocka_unit_test(test_loss_scaling),
        cmocka_unit_test(test_partials_half),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
