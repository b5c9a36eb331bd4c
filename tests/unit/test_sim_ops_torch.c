/*
 * test_sim_ops_torch.c — the ops of issue 19 (InstanceNormalization, Max, Min, PRelu, Selu,
 * Celu, Sign, Round, IsNaN, Tile, DepthToSpace, SpaceToDepth, Trilu, CumSum, TopK) beyond
 * what their ONNX node tests show: hand-computed edge cases (NaN through Max and TopK, ties
 * in TopK, Round's halves to even, integer dtypes, a Tile count of 0, a Trilu diagonal past
 * the matrix, CumSum's exclusive and reverse on floats and int32 wrap-around), and the
 * errors bad models get at compile time, each of which must say what was wrong.
 * (CumSum's node tests are all double, which the simulator lacks: the cases here stand in.)
 *
 * Every case builds a small ONNX model with sim/onnx/onnx_build.h, compiles and runs it once.
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

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define I64 SIM_DTYPE_INT64
#define I32 SIM_DTYPE_INT32
#define I8 SIM_DTYPE_INT8
#define U8 SIM_DTYPE_UINT8
#define BOOL SIM_DTYPE_BOOL
#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }

/* Output k equals want (n floats; NaN equals NaN, and the sign of zero counts). */
static void
expect_floats(struct test_ob_run *r, int k, const float *want, size_t n)
{
    const float *got = sim_exe_output_buffer(r->e, k);

    for (size_t i = 0; i < n; i++)
        if (!(isnan(want[i]) ? isnan(got[i]) : got[i] == want[i] &&
              signbit(got[i]) == signbit(want[i])))
            fail_msg("element %zu: got %g, want %g", i, (double)got[i], (double)want[i]);
}

static void
test_max_min_nan_and_ints(void **state)
{
    const float a[4] = { 1.0f, NAN, -2.0f, 3.0f }, b[2] = { 0.5f, NAN };
    const float want_max[4] = { 1.0f, NAN, 0.5f, NAN }, want_min[4] = { 0.5f, NAN, -2.0f, NAN };
    const int64_t ia[3] = { INT64_MIN, 5, -7 }, ib[1] = { -6 }, ic[3] = { 2, 9, -8 };
    const int64_t want_imax[3] = { 2, 9, -6 }, want_imin[3] = { INT64_MIN, -6, -8 };
    const int8_t ua[3] = { -128, 127, 0 }, ub[3] = { 5, -5, 0 }, want_u[3] = { 5, 127, 0 };
    struct sim_ob *b_;
    struct test_ob_run r;

    (void)state;
    for (int mx = 0; mx < 2; mx++) {
        b_ = sim_ob_new(13);
        sim_ob_initializer(b_, "a", F32, 2, DIMS(2, 2), a);
        sim_ob_initializer(b_, "b", F32, 1, DIMS(2), b);
        sim_ob_node(b_, mx ? "Max" : "Min", "n", "a,b", "y");
        sim_ob_output(b_, "y", F32);
        r = test_ob_run_ok(b_);
        expect_floats(&r, 0, mx ? want_max : want_min, 4);
        test_ob_run_free(&r);

        b_ = sim_ob_new(13);
        sim_ob_initializer(b_, "a", I64, 1, DIMS(3), ia);
        sim_ob_initializer(b_, "b", I64, 1, DIMS(1), ib);
        sim_ob_initializer(b_, "c", I64, 1, DIMS(3), ic);
        sim_ob_node(b_, mx ? "Max" : "Min", "n", "a,b,c", "y");
        sim_ob_output(b_, "y", I64);
        r = test_ob_run_ok(b_);
        assert_memory_equal(sim_exe_output_buffer(r.e, 0), mx ? want_imax : want_imin,
                            sizeof(want_imax));
        test_ob_run_free(&r);
    }
    b_ = sim_ob_new(13);
    sim_ob_initializer(b_, "a", I8, 1, DIMS(3), ua);
    sim_ob_initializer(b_, "b", I8, 1, DIMS(3), ub);
    sim_ob_node(b_, "Max", "n", "a,b", "y");
    sim_ob_output(b_, "y", I8);
    r = test_ob_run_ok(b_);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want_u, sizeof(want_u));
    test_ob_run_free(&r);
    printf("  Max/Min: NaN wins (as torch.maximum), int64 extremes, int8: exact\n");

    b_ = sim_ob_new(13);
    sim_ob_initializer(b_, "a", F32, 1, DIMS(2), b);
    sim_ob_initializer(b_, "b", I64, 1, DIMS(1), ib);
    sim_ob_node(b_, "Max", "n", "a,b", "y");
    sim_ob_output(b_, "y", F32);
    test_ob_expect_refused(b_, IPUOF_E_DTYPE, "different dtypes (float and int64)");

    b_ = sim_ob_new(13);
    sim_ob_initializer(b_, "a", F32, 1, DIMS(2), b);
    sim_ob_initializer(b_, "b", F32, 1, DIMS(4), a);
    sim_ob_node(b_, "Min", "n", "a,b", "y");
    sim_ob_output(b_, "y", F32);
    test_ob_expect_refused(b_, IPUOF_E_SHAPE, "does not broadcast");
}

static void
test_sign_round_isnan(void **state)
{
    const float x[8] = { 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, -0.0f, NAN, -3.7f };
    const float want_round[8] = { 0.0f, 2.0f, 2.0f, -0.0f, -2.0f, -0.0f, NAN, -4.0f };
    const float want_sign[8] = { 1, 1, 1, -1, -1, -0.0f, NAN, -1 };
    const uint8_t want_nan[8] = { 0, 0, 0, 0, 0, 0, 1, 0 };
    const int8_t ix[4] = { -128, 0, 3, -1 }, want_is[4] = { -1, 0, 1, -1 };
    const uint8_t ux[3] = { 0, 255, 1 }, want_us[3] = { 0, 1, 1 };
    struct sim_ob *b;
    struct test_ob_run r;

    (void)state;
    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 1, DIMS(8), x);
    sim_ob_node(b, "Round", "r", "x", "yr");
    sim_ob_node(b, "Sign", "s", "x", "ys");
    sim_ob_node(b, "IsNaN", "i", "x", "yn");
    sim_ob_output(b, "yr", F32);
    sim_ob_output(b, "ys", F32);
    sim_ob_output(b, "yn", BOOL);
    r = test_ob_run_ok(b);
    expect_floats(&r, 0, want_round, 8);
    expect_floats(&r, 1, want_sign, 8);
    assert_memory_equal(sim_exe_output_buffer(r.e, 2), want_nan, sizeof(want_nan));
    test_ob_run_free(&r);

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", I8, 1, DIMS(4), ix);
    sim_ob_initializer(b, "u", U8, 1, DIMS(3), ux);
    sim_ob_node(b, "Sign", "s", "x", "ys");
    sim_ob_node(b, "Sign", "t", "u", "yu");
    sim_ob_output(b, "ys", I8);
    sim_ob_output(b, "yu", U8);
    r = test_ob_run_ok(b);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want_is, sizeof(want_is));
    assert_memory_equal(sim_exe_output_buffer(r.e, 1), want_us, sizeof(want_us));
    test_ob_run_free(&r);
    printf("  Round (halves to even, -0 kept), Sign (NaN, -0, int8, uint8), IsNaN: exact\n");

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", I8, 1, DIMS(4), ix);
    sim_ob_node(b, "Round", "r", "x", "y");
    sim_ob_output(b, "y", I8);
    test_ob_expect_refused(b, IPUOF_E_DTYPE, "input 0 has dtype int8; supported: float");
}

static void
test_prelu_selu_celu(void **state)
{
    const float x[4] = { -2.0f, -0.5f, 0.0f, 3.0f }, s1[1] = { 0.25f };
    const float want[4] = { -0.5f, -0.125f, 0.0f, 3.0f };
    const int32_t ix[3] = { -3, 4, -1 }, is[3] = { 2, 5, -7 }, want_i[3] = { -6, 4, 7 };
    struct sim_ob *b;
    struct test_ob_run r;

    (void)state;
    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 2, DIMS(2, 2), x);
    sim_ob_initializer(b, "s", F32, 1, DIMS(1), s1);
    sim_ob_node(b, "PRelu", "n", "x,s", "y");
    sim_ob_output(b, "y", F32);
    r = test_ob_run_ok(b);
    expect_floats(&r, 0, want, 4);
    test_ob_run_free(&r);

    b = sim_ob_new(16);
    sim_ob_initializer(b, "x", I32, 1, DIMS(3), ix);
    sim_ob_initializer(b, "s", I32, 1, DIMS(3), is);
    sim_ob_node(b, "PRelu", "n", "x,s", "y");
    sim_ob_output(b, "y", I32);
    r = test_ob_run_ok(b);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want_i, sizeof(want_i));
    test_ob_run_free(&r);
    printf("  PRelu: float with one slope, int32 at opset 16: exact\n");

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", I32, 1, DIMS(3), ix);
    sim_ob_initializer(b, "s", I32, 1, DIMS(3), is);
    sim_ob_node(b, "PRelu", "n", "x,s", "y");
    sim_ob_output(b, "y", I32);
    test_ob_expect_refused(b, IPUOF_E_DTYPE, "int32 PRelu needs opset 16");

    /* the slope must broadcast to X, not X to the slope */
    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 1, DIMS(1), s1);
    sim_ob_initializer(b, "s", F32, 2, DIMS(2, 2), x);
    sim_ob_node(b, "PRelu", "n", "x,s", "y");
    sim_ob_output(b, "y", F32);
    test_ob_expect_refused(b, IPUOF_E_SHAPE, "does not broadcast to X");

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 1, DIMS(4), x);
    sim_ob_node(b, "Celu", "n", "x", "y");
    sim_ob_attr_float(b, "alpha", 0.0f);
    sim_ob_output(b, "y", F32);
    test_ob_expect_refused(b, IPUOF_E_INVAL, "alpha must not be 0");
}

static void
test_topk_ties_nan(void **state)
{
    /* ties keep the order of their indices; NaN ranks above every number */
    const float x[6] = { 1.0f, 3.0f, NAN, 3.0f, -1.0f, 1.0f };
    const float want_l[4] = { NAN, 3.0f, 3.0f, 1.0f }, want_s[3] = { -1.0f, 1.0f, 1.0f };
    const int64_t ind_l[4] = { 2, 1, 3, 0 }, ind_s[3] = { 4, 0, 5 };
    const int64_t k4[1] = { 4 }, k3[1] = { 3 }, k7[1] = { 7 };
    const int32_t xi[5] = { 5, -2, 9, 9, 0 }, want_i[2] = { 9, 9 };
    const int64_t ind_i[2] = { 2, 3 }, k2[1] = { 2 };
    struct sim_ob *b;
    struct test_ob_run r;

    (void)state;
    for (int largest = 1; largest >= 0; largest--) {
        b = sim_ob_new(13);
        sim_ob_initializer(b, "x", F32, 1, DIMS(6), x);
        sim_ob_initializer(b, "k", I64, 1, DIMS(1), largest ? k4 : k3);
        sim_ob_node(b, "TopK", "n", "x,k", "v,i");
        sim_ob_attr_int(b, "largest", largest);
        sim_ob_output(b, "v", F32);
        sim_ob_output(b, "i", I64);
        r = test_ob_run_ok(b);
        expect_floats(&r, 0, largest ? want_l : want_s, largest ? 4 : 3);
        assert_memory_equal(sim_exe_output_buffer(r.e, 1), largest ? ind_l : ind_s,
                            (largest ? 4 : 3) * sizeof(int64_t));
        test_ob_run_free(&r);
    }
    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", I32, 1, DIMS(5), xi);
    sim_ob_initializer(b, "k", I64, 1, DIMS(1), k2);
    sim_ob_node(b, "TopK", "n", "x,k", "v,i");
    sim_ob_output(b, "v", I32);
    sim_ob_output(b, "i", I64);
    r = test_ob_run_ok(b);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want_i, sizeof(want_i));
    assert_memory_equal(sim_exe_output_buffer(r.e, 1), ind_i, sizeof(ind_i));
    test_ob_run_free(&r);
    printf("  TopK: NaN first, ties by index, smallest, int32: exact\n");

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 1, DIMS(6), x);
    sim_ob_initializer(b, "k", I64, 1, DIMS(1), k7);
    sim_ob_node(b, "TopK", "n", "x,k", "v,i");
    sim_ob_output(b, "v", F32);
    test_ob_expect_refused(b, IPUOF_E_INVAL, "K is 7 but the axis has 6 elements");

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 1, DIMS(6), x);
    sim_ob_input(b, "k", I64, 1, DIMS(1));
    sim_ob_node(b, "TopK", "n", "x,k", "v,i");
    sim_ob_output(b, "v", F32);
    test_ob_expect_refused(b, IPUOF_E_UNSUPPORTED, "known at compile time");
}

static void
test_cumsum(void **state)
{
    const float x[6] = { 1, 2, 3, 4, 5, 6 };        /* (2, 3) */
    const float want[4][6] = {
        { 1, 3, 6, 4, 9, 15 },                      /* axis 1 */
        { 0, 1, 3, 0, 4, 9 },                       /* exclusive */
        { 6, 5, 3, 15, 11, 6 },                     /* reverse */
        { 5, 3, 0, 11, 6, 0 },                      /* exclusive reverse */
    };
    const float want0[6] = { 1, 2, 3, 5, 7, 9 };    /* axis -2 */
    const int32_t xi[3] = { INT32_MAX, 1, 1 }, want_i[3] = { INT32_MAX, INT32_MIN,
                                                           INT32_MIN + 1 };
    const int64_t ax1[1] = { 1 }, axm2[1] = { -2 }, ax0[1] = { 0 }, ax2[1] = { 2 };
    struct sim_ob *b;
    struct test_ob_run r;

    (void)state;
    for (int v = 0; v < 4; v++) {
        b = sim_ob_new(13);
        sim_ob_initializer(b, "x", F32, 2, DIMS(2, 3), x);
        sim_ob_initializer(b, "a", I64, 0, NULL, ax1);
        sim_ob_node(b, "CumSum", "n", "x,a", "y");
        sim_ob_attr_int(b, "exclusive", v & 1);
        sim_ob_attr_int(b, "reverse", v >> 1);
        sim_ob_output(b, "y", F32);
        r = test_ob_run_ok(b);
        expect_floats(&r, 0, want[v], 6);
        test_ob_run_free(&r);
    }
    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 2, DIMS(2, 3), x);
    sim_ob_initializer(b, "a", I64, 1, DIMS(1), axm2);
    sim_ob_node(b, "CumSum", "n", "x,a", "y");
    sim_ob_output(b, "y", F32);
    r = test_ob_run_ok(b);
    expect_floats(&r, 0, want0, 6);
    test_ob_run_free(&r);

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", I32, 1, DIMS(3), xi);
    sim_ob_initializer(b, "a", I64, 0, NULL, ax0);
    sim_ob_node(b, "CumSum", "n", "x,a", "y");
    sim_ob_output(b, "y", I32);
    r = test_ob_run_ok(b);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want_i, sizeof(want_i));
    test_ob_run_free(&r);
    printf("  CumSum: exclusive / reverse / negative axis on float, int32 wraps: exact\n");

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 2, DIMS(2, 3), x);
    sim_ob_initializer(b, "a", I64, 0, NULL, ax2);
    sim_ob_node(b, "CumSum", "n", "x,a", "y");
    sim_ob_output(b, "y", F32);
    test_ob_expect_refused(b, IPUOF_E_INVAL, "axis 2 is out of range for rank 2");

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 2, DIMS(2, 3), x);
    sim_ob_initializer(b, "a", I64, 0, NULL, ax1);
    sim_ob_node(b, "CumSum", "n", "x,a", "y");
    sim_ob_attr_int(b, "reverse", 2);
    sim_ob_output(b, "y", F32);
    test_ob_expect_refused(b, IPUOF_E_INVAL, "exclusive and reverse must be 0 or 1");
}

static void
test_tile_trilu(void **state)
{
    const int64_t x[4] = { 1, 2, 3, 4 };            /* (2, 2) */
    const int64_t rep[2] = { 2, 1 }, rep0[2] = { 0, 3 }, rep_bad[1] = { 2 };
    const int64_t rep_neg[2] = { 1, -1 };
    const int64_t want[8] = { 1, 2, 3, 4, 1, 2, 3, 4 };
    const uint8_t m[6] = { 1, 1, 1, 1, 1, 1 };      /* (2, 3) bool */
    const uint8_t want_up[6] = { 1, 1, 1, 0, 1, 1 }, want_lo[6] = { 1, 0, 0, 1, 1, 0 };
    const int64_t kbig[1] = { INT64_MAX }, kmin[1] = { INT64_MIN };
    const uint8_t none[6] = { 0 };
    struct sim_ob *b;
    struct test_ob_run r;

    (void)state;
    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", I64, 2, DIMS(2, 2), x);
    sim_ob_initializer(b, "r", I64, 1, DIMS(2), rep);
    sim_ob_initializer(b, "r0", I64, 1, DIMS(2), rep0);
    sim_ob_node(b, "Tile", "n", "x,r", "y");
    sim_ob_node(b, "Tile", "z", "x,r0", "y0");
    sim_ob_output(b, "y", I64);
    sim_ob_output(b, "y0", I64);
    r = test_ob_run_ok(b);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want, sizeof(want));
    {
        struct sim_io_info info;
        assert_int_equal(sim_exe_output_info(r.e, 1, &info), 0);
        assert_int_equal(info.rank, 2);
        assert_int_equal(info.dims[0], 0);
        assert_int_equal(info.dims[1], 6);
    }
    test_ob_run_free(&r);

    for (int up = 0; up < 2; up++) {
        b = sim_ob_new(14);
        sim_ob_initializer(b, "x", BOOL, 2, DIMS(2, 3), m);
        sim_ob_initializer(b, "big", I64, 0, NULL, up ? kbig : kmin);
        sim_ob_node(b, "Trilu", "n", "x", "y");
        sim_ob_attr_int(b, "upper", up);
        sim_ob_node(b, "Trilu", "f", "x,big", "yb");
        sim_ob_attr_int(b, "upper", up);
        sim_ob_output(b, "y", BOOL);
        sim_ob_output(b, "yb", BOOL);
        r = test_ob_run_ok(b);
        assert_memory_equal(sim_exe_output_buffer(r.e, 0), up ? want_up : want_lo, 6);
        assert_memory_equal(sim_exe_output_buffer(r.e, 1), none, 6);
        test_ob_run_free(&r);
    }
    printf("  Tile on int64 (a count of 0 gives an empty dim), Trilu on bool (k = "
           "+-2^63 keeps nothing): exact\n");

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", I64, 2, DIMS(2, 2), x);
    sim_ob_initializer(b, "r", I64, 1, DIMS(1), rep_bad);
    sim_ob_node(b, "Tile", "n", "x,r", "y");
    sim_ob_output(b, "y", I64);
    test_ob_expect_refused(b, IPUOF_E_SHAPE, "repeats has 1 values but the input has rank 2");

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", I64, 2, DIMS(2, 2), x);
    sim_ob_initializer(b, "r", I64, 1, DIMS(2), rep_neg);
    sim_ob_node(b, "Tile", "n", "x,r", "y");
    sim_ob_output(b, "y", I64);
    test_ob_expect_refused(b, IPUOF_E_INVAL, "repeats[1] is -1");

    b = sim_ob_new(14);
    sim_ob_initializer(b, "x", I64, 1, DIMS(4), x);
    sim_ob_node(b, "Trilu", "n", "x", "y");
    sim_ob_output(b, "y", I64);
    test_ob_expect_refused(b, IPUOF_E_SHAPE, "must have rank 2 or more");
}

static void
test_depth_space_refusals(void **state)
{
    static float x[2 * 6 * 2 * 2];
    struct sim_ob *b;

    (void)state;
    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 4, DIMS(2, 6, 2, 2), x);
    sim_ob_node(b, "DepthToSpace", "n", "x", "y");
    sim_ob_attr_int(b, "blocksize", 2);
    sim_ob_output(b, "y", F32);
    test_ob_expect_refused(b, IPUOF_E_SHAPE, "must be a multiple of blocksize^2 = 4");

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 4, DIMS(2, 6, 2, 2), x);
    sim_ob_node(b, "DepthToSpace", "n", "x", "y");
    sim_ob_output(b, "y", F32);
    test_ob_expect_refused(b, IPUOF_E_INVAL, "attribute blocksize is required");

    b = sim_ob_new(10);
    sim_ob_initializer(b, "x", F32, 4, DIMS(2, 4, 2, 3), x);
    sim_ob_node(b, "DepthToSpace", "n", "x", "y");
    sim_ob_attr_int(b, "blocksize", 2);
    sim_ob_attr_str(b, "mode", "CRD");
    sim_ob_output(b, "y", F32);
    test_ob_expect_refused(b, IPUOF_E_INVAL, "mode CRD needs opset 11 or later");

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 4, DIMS(2, 6, 2, 2), x);
    sim_ob_node(b, "SpaceToDepth", "n", "x", "y");
    sim_ob_attr_int(b, "blocksize", 3);
    sim_ob_output(b, "y", F32);
    test_ob_expect_refused(b, IPUOF_E_SHAPE, "must be multiples of blocksize 3");

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 3, DIMS(2, 6, 4), x);
    sim_ob_node(b, "DepthToSpace", "n", "x", "y");
    sim_ob_attr_int(b, "blocksize", 2);
    sim_ob_output(b, "y", F32);
    test_ob_expect_refused(b, IPUOF_E_SHAPE, "must be 4-D (N, C, H, W)");
}

static void
test_instancenorm(void **state)
{
    /* two planes: (1, 2, 3, 4) and (5, 5, 5, 5); mean 2.5 var 1.25, and a constant plane */
    const float x[8] = { 1, 2, 3, 4, 5, 5, 5, 5 }, scale[2] = { 2.0f, 1.0f };
    const float bias[2] = { 0.5f, -1.0f }, bad[3] = { 1, 1, 1 };
    float want[8];
    const float *got;
    struct sim_ob *b;
    struct test_ob_run r;

    (void)state;
    for (int i = 0; i < 4; i++)
        want[i] = (float)(2.0 * (x[i] - 2.5) / sqrt(1.25 + 1e-5) + 0.5);
    for (int i = 4; i < 8; i++)
        want[i] = -1.0f;
    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 3, DIMS(1, 2, 4), x);
    sim_ob_initializer(b, "s", F32, 1, DIMS(2), scale);
    sim_ob_initializer(b, "b", F32, 1, DIMS(2), bias);
    sim_ob_node(b, "InstanceNormalization", "n", "x,s,b", "y");
    sim_ob_output(b, "y", F32);
    r = test_ob_run_ok(b);
    got = sim_exe_output_buffer(r.e, 0);
    for (int i = 0; i < 8; i++)
        assert_true(fabsf(got[i] - want[i]) <= 1e-6f * (1.0f + fabsf(want[i])));
    test_ob_run_free(&r);
    printf("  InstanceNormalization: by hand, a constant plane gives B: within 1e-6\n");

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 3, DIMS(1, 2, 4), x);
    sim_ob_initializer(b, "s", F32, 1, DIMS(3), bad);
    sim_ob_initializer(b, "b", F32, 1, DIMS(2), bias);
    sim_ob_node(b, "InstanceNormalization", "n", "x,s,b", "y");
    sim_ob_output(b, "y", F32);
    test_ob_expect_refused(b, IPUOF_E_SHAPE, "input 1 (scale) [3] must be (C) = (2)");

    b = sim_ob_new(13);
    sim_ob_initializer(b, "x", F32, 3, DIMS(1, 2, 4), x);
    sim_ob_initializer(b, "s", F32, 1, DIMS(2), scale);
    sim_ob_initializer(b, "b", F32, 1, DIMS(2), bias);
    sim_ob_node(b, "InstanceNormalization", "n", "x,s,b", "y");
    sim_ob_attr_float(b, "epsilon", -1.0f);
    sim_ob_output(b, "y", F32);
    test_ob_expect_refused(b, IPUOF_E_INVAL, "epsilon must be a finite number >= 0");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_min_nan_and_ints),
        cmocka_unit_test(test_sign_round_isnan),
        cmocka_unit_test(test_prelu_selu_celu),
        cmocka_unit_test(test_topk_ties_nan),
        cmocka_unit_test(test_cumsum),
        cmocka_unit_test(test_tile_trilu),
        cmocka_unit_test(test_depth_space_refusals),
        cmocka_unit_test(test_instancenorm),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
