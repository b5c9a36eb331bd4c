/*
 * test_sim_half.c — float16 tensors (SIM_DTYPE_FLOAT16, sim/kernels/half.c): the conversions
 * (every half to float and back, float to half with round-to-nearest-even at the edges:
 * ties, overflow to inf, subnormals, NaN), the F16C path and the portable one giving the
 * same bits (tests/run.sh runs this file once per instruction-set level, so the baseline
 * pass checks the portable path alone and the avx2/avx512 passes compare F16C with it),
 * and float16 through a graph: float16 graph inputs, initializers, outputs and Cast to and
 * from float16, 2 bytes per element in the run buffers and the memory plan. Ops on
 * float16 values, float16 weights and loss scaling: test_sim_half_ops.c.
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
#include <unistd.h>

#include "half.h"
#include "onnx.pb-c.h"
#include "obload.h"
#include "onnx_build.h"
#include "sim.h"
#include "tensor_pb.h"
#include "tensorfile.h"

#define F32 SIM_DTYPE_FLOAT
#define F16 SIM_DTYPE_FLOAT16
#define DIMS(...) ((const int64_t[]){ __VA_ARGS__ })

static uint32_t
bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float
from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* Every half: the array path gives the portable path's bits, the value is what IEEE
 * binary16 defines, and float -> half gives the half back (NaN stays NaN). */
static void
test_every_half(void **state)
{
    static uint16_t h[65536], back[65536];
    static float f[65536];
    int nan = 0;

    (void)state;
    for (int i = 0; i < 65536; i++)
        h[i] = (uint16_t)i;
    sim_half_to_float_n(h, f, 65536);
    for (int i = 0; i < 65536; i++) {
        float p = sim_half_to_float(h[i]);
        int e = (i >> 10) & 31, m = i & 1023;
        double want = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY)
                                                        : ldexp(1024 + m, e - 25);
        if (i & 0x8000)
            want = -want;
        if (bits(p) != bits(f[i]))
            fail_msg("half 0x%04x: portable %08x, array %08x", i, bits(p), bits(f[i]));
        if (e == 31 && m != 0) {
            assert_true(isnan(p));
            nan++;
        } else if ((double)p != want || (signbit(p) != 0) != ((i & 0x8000) != 0)) {
            fail_msg("half 0x%04x reads %.9g, binary16 defines %.9g", i, p, want);
        }
    }
    sim_half_from_float_n(f, back, 65536);
    for (int i = 0; i < 65536; i++) {
        if (((i >> 10) & 31) == 31 && (i & 1023) != 0)
            assert_true((back[i] & 0x7c00) == 0x7c00 && (back[i] & 0x3ff) != 0);
        else if (back[i] != i)
            fail_msg("half 0x%04x -> %.9g -> 0x%04x", i, f[i], back[i]);
    }
    printf("  65 536 halves exact and round-trip (%d NaNs stay NaN); array path: %s\n", nan,
           sim_half_uses_f16c() ? "F16C" : "portable");
}

/* float -> half at the edges: ties to even, the overflow threshold, subnormals. */
static void
test_rounding_edges(void **state)
{
    static const struct { float f; uint16_t h; } cases[] = {
        { 1.0f, 0x3c00 }, { -2.0f, 0xc000 }, { 0.0f, 0x0000 }, { -0.0f, 0x8000 },
        { 1.0f + 0x1p-11f, 0x3c00 },            /* tie: to even (down) */
        { 1.0f + 0x3p-11f, 0x3c02 },            /* tie: to even (up) */
        { 1.0f + 0x1p-11f + 0x1p-20f, 0x3c01 }, /* just above the tie */
        { 65504.0f, 0x7bff }, { 65519.996f, 0x7bff }, { 65520.0f, 0x7c00 },
        { 1e10f, 0x7c00 }, { -1e10f, 0xfc00 }, { INFINITY, 0x7c00 },
        { 0x1p-14f, 0x0400 },                   /* smallest normal */
        { 0x1p-24f, 0x0001 },                   /* smallest subnormal */
        { 0x1p-25f, 0x0000 },                   /* tie between 0 and 2^-24: to even */
        { 0x3p-26f, 0x0001 },                   /* 0.75 of 2^-24: up */
        { 0x3p-25f, 0x0002 },                   /* 1.5 x 2^-24: tie to even (up) */
        { 0x5p-25f, 0x0002 },                   /* 2.5 x 2^-24: tie to even (down) */
        { 0x1.ffcp-15f, 0x0400 },               /* largest subnormal's rounding carries */
        { 0x1p-30f, 0x0000 },
    };
    float f[sizeof(cases) / sizeof(cases[0])];
    uint16_t a[sizeof(cases) / sizeof(cases[0])];
    size_t n = sizeof(cases) / sizeof(cases[0]);

    (void)state;
    for (size_t i = 0; i < n; i++)
        f[i] = cases[i].f;
    sim_half_from_float_n(f, a, (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        uint16_t p = sim_half_from_float(cases[i].f);
        if (p != cases[i].h || a[i] != cases[i].h)
            fail_msg("%a: portable 0x%04x, array 0x%04x, want 0x%04x", cases[i].f, p, a[i],
                     cases[i].h);
    }
    assert_true((sim_half_from_float(NAN) & 0x7fff) > 0x7c00);
    printf("  %zu rounding edges as IEEE 754 round-to-nearest-even\n", n);
}

/* A sweep of float bit patterns (every 997th of 2^32): the array path (F16C at avx2 and
 * above) gives the portable path's bits. */
static void
test_sweep_same_bits(void **state)
{
    enum { N = 4096 };
    static float f[N];
    static uint16_t a[N], p[N];
    uint64_t u = 0, checked = 0;

    (void)state;
    while (u < ((uint64_t)1 << 32)) {
        int n = 0;
        for (; n < N && u < ((uint64_t)1 << 32); n++, u += 997)
            f[n] = from_bits((uint32_t)u);
        sim_half_from_float_n(f, a, n);
        sim_half_from_float_n_portable(f, p, n);
        for (int i = 0; i < n; i++)
            if (a[i] != p[i])
                fail_msg("float %08x: array 0x%04x, portable 0x%04x", bits(f[i]), a[i], p[i]);
        checked += (uint64_t)n;
    }
    printf("  %llu floats: same halves on both paths (array path: %s)\n",
           (unsigned long long)checked, sim_half_uses_f16c() ? "F16C" : "portable");
}

/* float16 graph: y = Cast16(Cast32(x) * Cast32(w)), x an input, w an initializer, both
 * float16; 2 bytes per element in the run buffers and the memory plan. */
static void
test_graph_float16_io(void **state)
{
    const float xf[4] = { 1.0f, 0.1f, -3.0f, 1000.0f }, wf[4] = { 3.0f, 3.0f, 0.5f, 70.0f };
    uint16_t x16[4], w16[4];
    struct sim_io_info in, out;
    struct sim_err err = { 0 };
    struct test_ob_run r;
    struct sim_ob *b = sim_ob_new(13);
    const uint16_t *y;

    (void)state;
    for (int i = 0; i < 4; i++) {
        x16[i] = sim_half_from_float(xf[i]);
        w16[i] = sim_half_from_float(wf[i]);
    }
    sim_ob_input(b, "x", F16, 1, DIMS(4));
    sim_ob_initializer(b, "w", F16, 1, DIMS(4), w16);
    sim_ob_node(b, "Cast", "cx", "x", "xf");
    sim_ob_attr_int(b, "to", F32);
    sim_ob_node(b, "Cast", "cw", "w", "wf");
    sim_ob_attr_int(b, "to", F32);
    sim_ob_node(b, "Mul", "mul", "xf,wf", "p");
    sim_ob_node(b, "Cast", "cy", "p", "y");
    sim_ob_attr_int(b, "to", F16);
    sim_ob_output(b, "y", F16);
    r = test_ob_compile(b, &err);
    if (r.e == NULL)
        fail_msg("compile: %s", err.msg);
    assert_int_equal(sim_exe_input_info(r.e, 0, &in), 0);
    assert_int_equal(sim_exe_output_info(r.e, 0, &out), 0);
    assert_int_equal(in.dtype, F16);
    assert_int_equal(out.dtype, F16);
    assert_int_equal(in.step_bytes, 8);
    assert_int_equal(out.step_bytes, 8);
    memcpy(sim_exe_input_buffer(r.e, 0), x16, sizeof(x16));
    if (sim_exe_run(r.e, &err) != 0)
        fail_msg("run: %s", err.msg);
    y = sim_exe_output_buffer(r.e, 0);
    for (int i = 0; i < 4; i++) {
        float want = sim_half_to_float(x16[i]) * sim_half_to_float(w16[i]);
        assert_int_equal(y[i], sim_half_from_float(want));
    }
    /* 1000 * 70 = 70 000 is past float16's 65 504: inf, as the IPU stores it */
    assert_int_equal(y[3], 0x7c00);
    printf("  float16 in, float16 weight, float16 out: 8-byte steps, 1000*70 -> inf\n");
    test_ob_run_free(&r);
}

/* Compiles y = Relu(x) over n elements of dtype dt (Cast around Relu for float16) and
 * returns the activations the plan gives IPU 0. */
static uint64_t
plan_activations(int dt, int64_t n)
{
    struct sim_mem_report rep;
    struct sim_err err = { 0 };
    struct sim_ob *b = sim_ob_new(13);
    struct test_ob_run r;
    uint64_t a;

    sim_ob_input(b, "x", dt, 1, DIMS(n));
    sim_ob_node(b, "Identity", "id", "x", "y");
    sim_ob_output(b, "y", dt);
    r = test_ob_compile(b, &err);
    if (r.e == NULL)
        fail_msg("compile: %s", err.msg);
    assert_int_equal(sim_exe_memory(r.e, 0, &rep), 0);
    a = rep.activations;
    test_ob_run_free(&r);
    return a;
}

/* The memory plan counts 2 bytes per float16 element: the streams of a float16 graph are
 * half those of the float one. */
static void
test_plan_half_bytes(void **state)
{
    uint64_t a32 = plan_activations(F32, 1 << 16), a16 = plan_activations(F16, 1 << 16);

    (void)state;
    printf("  activations of 65 536 elements in and out: float %llu, float16 %llu bytes\n",
           (unsigned long long)a32, (unsigned long long)a16);
    assert_true(a16 * 2 == a32);
}

/* The gradient goes through float16 activations: loss = sum(Cast32(Id(Cast16(w)))^2) for a
 * float weight w. The activation h = round16(w) is float16, so its gradient is too:
 * dloss/dh = round16(2h), and Cast16's backward widens it into w's float gradient. Before
 * float16 activations carried gradients, w got none (frozen silently). */
static void
test_grad_through_half_activation(void **state)
{
    const float w[3] = { 1.0f / 3.0f, -0.1f, 1000.7f };
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
    sim_ob_node(b, "Identity", "id", "h", "h2");     /* float16 gradient through Identity */
    sim_ob_node(b, "Cast", "c32", "h2", "hf");
    sim_ob_attr_int(b, "to", F32);
    sim_ob_node(b, "Mul", "sq", "hf,hf", "s");
    sim_ob_node(b, "ReduceSum", "sum", "s", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.optimizer.lr = 0.0f;
    if (sim_compile(m, &o, &e, &err) != 0 || sim_exe_run(e, &err) != 0)
        fail_msg("float16 activation training: %s", err.msg);
    assert_int_equal(sim_exe_read_gradient(e, "w", g, sizeof(g), &err), 0);
    for (int i = 0; i < 3; i++) {
        float h = sim_half_to_float(sim_half_from_float(w[i]));
        float want = sim_half_to_float(sim_half_from_float(2.0f * h));
        if (bits(g[i]) != bits(want))
            fail_msg("w[%d] = %.9g: gradient %.9g, want round16(2 round16(w)) = %.9g", i,
                     w[i], g[i], want);
    }
    printf("  gradient through a float16 activation: %.9g %.9g %.9g (rounded to float16)\n",
           g[0], g[1], g[2]);
    sim_exe_free(e);
    sim_model_free(m);
}

/* A float16 output summed over device iterations is refused by name (the run's sum is
 * kept for float, int and bool only), not summed as bytes. */
static void
test_sum_output_refused(void **state)
{
    struct sim_output_opt mode = { "y", { SIM_OUTPUT_SUM, 0 } };
    struct sim_compile_opts o;
    struct sim_err err = { 0 };
    struct sim_exe *e = NULL;
    struct sim_model *m;
    struct sim_ob *b = sim_ob_new(13);

    (void)state;
    sim_ob_input(b, "x", F16, 2, DIMS(1, 4));
    sim_ob_node(b, "Identity", "id", "x", "y");
    sim_ob_output(b, "y", F16);
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    o.device_iterations = 2;
    o.output_modes = &mode;
    o.n_output_modes = 1;
    assert_int_equal(sim_compile(m, &o, &e, &err), IPUOF_E_UNSUPPORTED);
    assert_null(e);
    assert_non_null(strstr(err.msg, "output 'y' is float16 and its output mode is Sum"));
    printf("  refused: %s\n", err.msg);
    sim_model_free(m);
}

/* A float16 TensorProto whose data is in int32_data (each half's 16 bits, as ONNX stores
 * it) decodes to those halves in the simulator and in the tools' tensorfile reader. */
static void
test_pb_int32_data_halves(void **state)
{
    int32_t bits16[3] = { 0x3c00, 0xc000, 0x7c00 };
    int64_t dims[1] = { 3 };
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    struct sim_host_tensor h = { 0 };
    struct tensorfile t = { 0 };
    struct sim_err err = { 0 };
    char path[] = "/tmp/test_sim_half-XXXXXX", msg[256];
    uint8_t buf[64];
    size_t len;
    int fd;

    (void)state;
    tp.has_data_type = 1;
    tp.data_type = SIM_DTYPE_FLOAT16;
    tp.n_dims = 1;
    tp.dims = dims;
    tp.n_int32_data = 3;
    tp.int32_data = bits16;
    len = onnx__tensor_proto__pack(&tp, buf);
    assert_true(len < sizeof(buf));
    if (sim_tensor_pb_decode(buf, len, &h, &err) != 0)
        fail_msg("sim: %s", err.msg);
    assert_int_equal(h.dtype, F16);
    assert_int_equal(h.bytes, 6);
    for (int i = 0; i < 3; i++)
        assert_int_equal(((const uint16_t *)h.data)[i], bits16[i]);
    sim_host_tensor_fini(&h);
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    close(fd);
    if (tensorfile_read(path, &t, msg, sizeof(msg)) != 0)
        fail_msg("tensorfile: %s", msg);
    unlink(path);
    assert_int_equal(t.dtype, F16);
    assert_int_equal(t.bytes, 6);
    for (int i = 0; i < 3; i++)
        assert_int_equal(((const uint16_t *)t.data)[i], bits16[i]);
    tensorfile_free(&t);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_half),
        cmocka_unit_test(test_rounding_edges),
        cmocka_unit_test(test_sweep_same_bits),
        cmocka_unit_test(test_graph_float16_io),
        cmocka_unit_test(test_plan_half_bytes),
        cmocka_unit_test(test_grad_through_half_activation),
        cmocka_unit_test(test_sum_output_refused),
        cmocka_unit_test(test_pb_int32_data_halves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
