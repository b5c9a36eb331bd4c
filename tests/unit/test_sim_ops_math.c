/*
 * test_sim_ops_math.c — sim/ops/op_math.c beyond the ONNX node tests (tests/conformance has
 * Sin to Atanh and Reciprocal; test_sim_train_grad their gradients): values outside an
 * op's domain give NaN as in torch, and the bitwise ops, which the installed node tests
 * (older than opset 18) lack: hand-computed And/Or/Xor/Not on int32 with broadcasting,
 * int64 extremes, uint8 and bool, as ai.graphcore ops in an opset-14 model (as the
 * package exports them), and the refusals (an ai.onnx BitwiseAnd, which needs opset 18,
 * float inputs, mixed dtypes, shapes that do not broadcast), each saying what was wrong.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define I64 SIM_DTYPE_INT64
#define I32 SIM_DTYPE_INT32
#define U8 SIM_DTYPE_UINT8
#define BOOL SIM_DTYPE_BOOL
#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }

static void
test_out_of_domain_is_nan(void **state)
{
    const float x[3] = { 2.0f, 0.5f, -1.0f };
    static const char *const ops[] = { "Asin", "Acos", "Acosh", "Atanh" };
    /* which of x each op is defined at: asin/acos on [-1, 1], acosh on [1, inf),
     * atanh on (-1, 1) (at -1 it is -inf, not NaN) */
    static const int nan_at[4][3] = { { 1, 0, 0 }, { 1, 0, 0 }, { 0, 1, 1 }, { 1, 0, 0 } };

    (void)state;
    for (int o = 0; o < 4; o++) {
        struct sim_ob *b = sim_ob_new(13);
        struct test_ob_run r;
        const float *y;

        sim_ob_initializer(b, "x", F32, 1, DIMS(3), x);
        sim_ob_node(b, ops[o], "n", "x", "y");
        sim_ob_output(b, "y", F32);
        r = test_ob_run_ok(b);
        y = sim_exe_output_buffer(r.e, 0);
        for (int i = 0; i < 3; i++)
            if ((isnan(y[i]) != 0) != nan_at[o][i])
                fail_msg("%s(%g) = %g", ops[o], (double)x[i], (double)y[i]);
        test_ob_run_free(&r);
    }
}

/* Builds ai.graphcore op on a (2x3) and b (3) in an opset-14 model. */
static struct sim_ob *
build_binary(const char *op, int dta, int dtb, const void *a, const void *b_, int64_t nb)
{
    struct sim_ob *b = sim_ob_new(14);

    sim_ob_initializer(b, "a", dta, 2, DIMS(2, 3), a);
    sim_ob_initializer(b, "b", dtb, 1, DIMS(nb), b_);
    sim_ob_node(b, op, "n", "a,b", "y");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_output(b, "y", dta);
    return b;
}

static struct test_ob_run
run_binary(const char *op, int dt, const void *a, const void *b_)
{
    return test_ob_run_ok(build_binary(op, dt, dt, a, b_, 3));
}

static void
test_bitwise_ints(void **state)
{
    const int32_t a[6] = { -4, 7, 5, 4, -7, 8 }, b[3] = { 2, -3, 8 };
    int32_t want[3][6];
    const int64_t la[6] = { INT64_MIN, -1, 0, INT64_MAX, 5, 6 }, lb[3] = { -1, INT64_MIN, 3 };
    const uint8_t ua[6] = { 0xf0, 0x0f, 0xff, 0, 0xaa, 0x55 }, ub[3] = { 0x3c, 0xff, 0x0f };
    static const char *const ops[3] = { "BitwiseAnd", "BitwiseOr", "BitwiseXor" };

    (void)state;
    for (int i = 0; i < 6; i++) {
        want[0][i] = a[i] & b[i % 3];
        want[1][i] = a[i] | b[i % 3];
        want[2][i] = a[i] ^ b[i % 3];
    }
    for (int o = 0; o < 3; o++) {
        struct test_ob_run r = run_binary(ops[o], I32, a, b);
        assert_memory_equal(sim_exe_output_buffer(r.e, 0), want[o], sizeof want[o]);
        test_ob_run_free(&r);
    }
    {
        struct test_ob_run r = run_binary("BitwiseXor", I64, la, lb);
        const int64_t *y = sim_exe_output_buffer(r.e, 0);
        for (int i = 0; i < 6; i++)
            assert_true(y[i] == (la[i] ^ lb[i % 3]));
        test_ob_run_free(&r);
    }
    {
        struct test_ob_run r = run_binary("BitwiseAnd", U8, ua, ub);
        const uint8_t *y = sim_exe_output_buffer(r.e, 0);
        for (int i = 0; i < 6; i++)
            assert_int_equal(y[i], ua[i] & ub[i % 3]);
        test_ob_run_free(&r);
    }
}

static void
test_bitwise_not_and_bools(void **state)
{
    const int32_t x[4] = { 0, -1, 5, INT32_MIN };
    const uint8_t p[6] = { 0, 1, 0, 1, 1, 0 }, q[3] = { 1, 1, 0 };
    struct sim_ob *b = sim_ob_new(14);
    struct test_ob_run r;

    (void)state;
    sim_ob_initializer(b, "x", I32, 1, DIMS(4), x);
    sim_ob_node(b, "BitwiseNot", "n", "x", "y");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_output(b, "y", I32);
    r = test_ob_run_ok(b);
    for (int i = 0; i < 4; i++)
        assert_int_equal(((const int32_t *)sim_exe_output_buffer(r.e, 0))[i], ~x[i]);
    test_ob_run_free(&r);

    b = sim_ob_new(14);
    sim_ob_initializer(b, "x", BOOL, 1, DIMS(3), q);
    sim_ob_node(b, "BitwiseNot", "n", "x", "y");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_output(b, "y", BOOL);
    r = test_ob_run_ok(b);
    for (int i = 0; i < 3; i++)   /* not ~1 = 0xfe: a bool stays 0 or 1 */
        assert_int_equal(((const uint8_t *)sim_exe_output_buffer(r.e, 0))[i], !q[i]);
    test_ob_run_free(&r);

    r = run_binary("BitwiseOr", BOOL, p, q);
    for (int i = 0; i < 6; i++)
        assert_int_equal(((const uint8_t *)sim_exe_output_buffer(r.e, 0))[i], p[i] | q[i % 3]);
    test_ob_run_free(&r);
}

static void
test_bitwise_refusals(void **state)
{
    const int32_t a[6] = { 0 }, b3[3] = { 0 };
    const float f[6] = { 0 };
    const int64_t l3[3] = { 0 };
    struct sim_ob *b;

    (void)state;
    b = sim_ob_new(14);           /* ai.onnx's BitwiseAnd: opset 18 */
    sim_ob_initializer(b, "a", I32, 2, DIMS(2, 3), a);
    sim_ob_initializer(b, "b", I32, 1, DIMS(3), b3);
    sim_ob_node(b, "BitwiseAnd", "n", "a,b", "y");
    sim_ob_output(b, "y", I32);
    test_ob_expect_refused(b, IPUOF_E_UNSUPPORTED, "BitwiseAnd");

    test_ob_expect_refused(build_binary("BitwiseOr", F32, F32, f, f, 3), IPUOF_E_DTYPE,
                           "float");
    test_ob_expect_refused(build_binary("BitwiseXor", I32, I64, a, l3, 3), IPUOF_E_DTYPE,
                           "int32 and int64");
    test_ob_expect_refused(build_binary("BitwiseXor", I32, I32, a, b3, 2), IPUOF_E_SHAPE,
                           "do not broadcast");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_out_of_domain_is_nan),
        cmocka_unit_test(test_bitwise_ints),
        cmocka_unit_test(test_bitwise_not_and_bools),
        cmocka_unit_test(test_bitwise_refusals),
    };

    return cmocka_run_group_tests_name("sim_ops_math", tests, NULL, NULL);
}
