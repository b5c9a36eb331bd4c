/*
 * test_sim_onehot.c — ONNX OneHot (sim/ops/op_onehot.c) against hand-computed outputs: the
 * default last axis with int64 indices and float values, a middle axis with negative and
 * out-of-range indices, float indices and a float depth (truncated), int64 and float16
 * values; and the compile errors: a depth computed at run time, values that are not
 * [off, on], an axis out of range, a depth below 1.
 * Gradients are checked in test_sim_train_grad.c (gradcases_shape.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define F16 SIM_DTYPE_FLOAT16
#define I64 SIM_DTYPE_INT64
#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }

/* indices (3) int64, depth 4, values [0.1, 0.9], axis default: (3, 4) */
static void
test_onehot_last_axis(void **state)
{
    const int64_t idx[3] = { 2, 0, 3 }, depth = 4;
    const float val[2] = { 0.1f, 0.9f };
    const float want[12] = { 0.1f, 0.1f, 0.9f, 0.1f, 0.9f, 0.1f, 0.1f, 0.1f,
                             0.1f, 0.1f, 0.1f, 0.9f };
    struct sim_ob *b = sim_ob_new(11);
    struct sim_io_info info;
    struct test_ob_run r;

    (void)state;
    sim_ob_initializer(b, "idx", I64, 1, DIMS(3), idx);
    sim_ob_initializer(b, "depth", I64, 0, NULL, &depth);
    sim_ob_input(b, "val", F32, 1, DIMS(2));
    sim_ob_node(b, "OneHot", "oh", "idx,depth,val", "y");
    sim_ob_output(b, "y", F32);
    {
        struct sim_err err = { 0 };
        r = test_ob_compile(b, &err);
        if (r.e == NULL)
            fail_msg("compile: %s", err.msg);
        memcpy(sim_exe_input_buffer(r.e, 0), val, sizeof(val));
        assert_int_equal(sim_exe_run(r.e, &err), 0);
    }
    assert_int_equal(sim_exe_output_info(r.e, 0, &info), 0);
    assert_int_equal(info.rank, 2);
    assert_int_equal(info.dims[0], 3);
    assert_int_equal(info.dims[1], 4);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want, sizeof(want));
    printf("  OneHot (3) depth 4 -> (3, 4): exact\n");
    test_ob_run_free(&r);
}

/* indices (2, 2) float {1.7, -1, 5, -4}, depth 3.9 (3), axis 1: (2, 3, 2); 5 and -4 are out
 * of [-3, 3): all off */
static void
test_onehot_middle_axis_float_indices(void **state)
{
    const float idx[4] = { 1.7f, -1.0f, 5.0f, -4.0f }, depth = 3.9f, val[2] = { -2, 3 };
    const float want[12] = { -2, -2, 3, -2, -2, 3,     /* row 0: index 1 then index 2 */
                             -2, -2, -2, -2, -2, -2 }; /* row 1: both out of range */
    struct sim_ob *b = sim_ob_new(11);
    struct test_ob_run r;

    (void)state;
    sim_ob_initializer(b, "idx", F32, 2, DIMS(2, 2), idx);
    sim_ob_initializer(b, "depth", F32, 0, NULL, &depth);
    sim_ob_initializer(b, "val", F32, 1, DIMS(2), val);
    sim_ob_node(b, "OneHot", "oh", "idx,depth,val", "y");
    sim_ob_attr_int(b, "axis", -2);
    sim_ob_output(b, "y", F32);
    r = test_ob_run_ok(b);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want, sizeof(want));
    printf("  OneHot float indices, depth 3.9, axis -2, out-of-range rows all off: exact\n");
    test_ob_run_free(&r);
}

/* int64 values (torch.nn.functional.one_hot's output) at axis 0, and float16 values */
static void
test_onehot_value_dtypes(void **state)
{
    const int64_t idx[2] = { 1, -1 }, depth = 3, val[2] = { 0, 1 };
    const int64_t want[6] = { 0, 0, 1, 0, 0, 1 };   /* (3, 2): y[i][j] = idx[j] == i */
    const uint16_t hval[2] = { 0x0000, 0x3c00 };      /* 0, 1 in float16 */
    const uint16_t hwant[6] = { 0, 0x3c00, 0, 0, 0, 0x3c00 };
    struct sim_ob *b = sim_ob_new(11);
    struct test_ob_run r;

    (void)state;
    sim_ob_initializer(b, "idx", I64, 1, DIMS(2), idx);
    sim_ob_initializer(b, "depth", I64, 1, DIMS(1), &depth);
    sim_ob_initializer(b, "val", I64, 1, DIMS(2), val);
    sim_ob_node(b, "OneHot", "oh", "idx,depth,val", "y");
    sim_ob_attr_int(b, "axis", 0);
    sim_ob_output(b, "y", I64);
    r = test_ob_run_ok(b);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want, sizeof(want));
    test_ob_run_free(&r);

    b = sim_ob_new(11);
    sim_ob_initializer(b, "idx", I64, 1, DIMS(2), idx);
    sim_ob_initializer(b, "depth", I64, 1, DIMS(1), &depth);
    sim_ob_initializer(b, "val", F16, 1, DIMS(2), hval);
    sim_ob_node(b, "OneHot", "oh", "idx,depth,val", "y");
    sim_ob_output(b, "y", F16);
    r = test_ob_run_ok(b);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), hwant, sizeof(hwant));
    printf("  OneHot int64 values at axis 0, float16 values: exact\n");
    test_ob_run_free(&r);
}

/* One model with the given depth source, values shape and axis. */
static struct sim_ob *
bad_model(bool depth_input, int64_t depth, int64_t nval, int64_t axis)
{
    const int64_t idx[3] = { 0, 1, 2 };
    const float val[3] = { 0, 1, 2 };
    struct sim_ob *b = sim_ob_new(11);

    sim_ob_initializer(b, "idx", I64, 1, DIMS(3), idx);
    if (depth_input) {
        sim_ob_input(b, "x", F32, 1, DIMS(4));
        sim_ob_node(b, "Cast", "c", "x", "xi");  /* a run-time value, not a shape */
        sim_ob_attr_int(b, "to", I64);
        sim_ob_node(b, "ReduceMax", "m", "xi", "depth");
        sim_ob_attr_int(b, "keepdims", 0);
    } else {
        sim_ob_initializer(b, "depth", I64, 0, NULL, &depth);
    }
    sim_ob_initializer(b, "val", F32, 1, DIMS(nval), val);
    sim_ob_node(b, "OneHot", "oh", "idx,depth,val", "y");
    sim_ob_attr_int(b, "axis", axis);
    sim_ob_output(b, "y", F32);
    return b;
}

static void
test_onehot_errors(void **state)
{
    (void)state;
    test_ob_expect_refused(bad_model(true, 0, 2, -1), IPUOF_E_UNSUPPORTED,
                           "input 1 (depth) decides the output's shape, so it must be known "
                           "at compile time");
    test_ob_expect_refused(bad_model(false, 4, 3, -1), IPUOF_E_SHAPE,
                           "values must be a rank-1 tensor of 2 elements [off, on]");
    test_ob_expect_refused(bad_model(false, 4, 2, 2), IPUOF_E_INVAL,
                           "axis 2 is out of range for an output of rank 2 (use -2 .. 1)");
    test_ob_expect_refused(bad_model(false, 0, 2, -1), IPUOF_E_INVAL,
                           "depth is 0; it must be at least 1");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_onehot_last_axis),
        cmocka_unit_test(test_onehot_middle_axis_float_indices),
        cmocka_unit_test(test_onehot_value_dtypes),
        cmocka_unit_test(test_onehot_errors),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
