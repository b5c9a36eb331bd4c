/*
 * test_sim_ops.c — every op family's forward against hand-computed values (and, for Conv,
 * against a naive direct convolution). Each check prints the max difference it saw.
 *
 * Every case builds a one-node ONNX model with sim/onnx/onnx_build.h, loads and compiles it
 * with default options and runs one step. Not here: multi-step runs (test_sim_exec.c) and
 * the ONNX node tests (test_sim_conformance.c).
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

/* One operand of a test node. */
struct t {
    const char *name;           /* "" for an omitted optional input */
    int dtype;
    int rank;
    int64_t d[5];
    const void *data;
    int init;                   /* 1: an initializer instead of a graph input */
};

struct run {
    struct sim_model *m;
    struct sim_exe *e;
};

static const struct t *cur_in;
static int cur_n_in;

/* Starts a model with one node op(inputs) -> y0 .. y{n_out-1}. Add attributes to the
 * returned builder, then call op_run(). */
static struct sim_ob *
op_begin(const char *op, int opset, const struct t *in, int n_in, int n_out)
{
    struct sim_ob *b = sim_ob_new(opset);
    char ins[256] = "", outs[128] = "";

    assert_non_null(b);
    for (int i = 0; i < n_in; i++) {
        strcat(ins, i ? "," : "");
        strcat(ins, in[i].name);
        if (in[i].name[0] == '\0')
            continue;
        if (in[i].init)
            assert_int_equal(sim_ob_initializer(b, in[i].name, in[i].dtype, in[i].rank, in[i].d,
                                                in[i].data), 0);
        else
            assert_int_equal(sim_ob_input(b, in[i].name, in[i].dtype, in[i].rank, in[i].d), 0);
    }
    for (int i = 0; i < n_out; i++) {
        char nm[8];
        snprintf(nm, sizeof(nm), "y%d", i);
        strcat(outs, i ? "," : "");
        strcat(outs, nm);
        assert_int_equal(sim_ob_output(b, nm, 0), 0);
    }
    assert_int_equal(sim_ob_node(b, op, "n0", ins, outs), 0);
    cur_in = in;
    cur_n_in = n_in;
    return b;
}

/* Serializes, loads, compiles, feeds the inputs given to op_begin and runs once. */
static struct run
op_run(struct sim_ob *b)
{
    struct run r = { 0 };
    struct sim_compile_opts o;
    struct sim_err err = { 0 };
    void *bytes;
    size_t len;

    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    sim_ob_free(b);
    if (sim_model_load(bytes, len, &r.m, &err) != 0)
        fail_msg("load: %s", err.msg);
    free(bytes);
    sim_compile_opts_init(&o);
    if (sim_compile(r.m, &o, &r.e, &err) != 0)
        fail_msg("compile: %s", err.msg);
    for (int i = 0; i < cur_n_in; i++) {
        struct sim_io_info info;
        long k;
        if (cur_in[i].init || cur_in[i].name[0] == '\0')
            continue;
        k = sim_exe_input_index(r.e, cur_in[i].name);
        assert_true(k >= 0);
        sim_exe_input_info(r.e, (size_t)k, &info);
        memcpy(sim_exe_input_buffer(r.e, (size_t)k), cur_in[i].data, info.run_bytes);
    }
    if (sim_exe_run(r.e, &err) != 0)
        fail_msg("run: %s", err.msg);
    return r;
}

static void
run_free(struct run *r)
{
    sim_exe_free(r->e);
    sim_model_free(r->m);
}

static const float *
outf(const struct run *r, size_t i)
{
    return sim_exe_output_buffer(r->e, i);
}

static void
expect_shape(const struct run *r, size_t i, int rank, const int64_t *dims)
{
    struct sim_io_info info;

    assert_int_equal(sim_exe_output_info(r->e, i, &info), 0);
    assert_int_equal(info.rank, rank);
    for (int k = 0; k < rank; k++)
        assert_int_equal(info.dims[k], dims[k]);
}

static void
expect_f32(const char *what, const float *got, const float *want, size_t n, double tol)
{
    double md = 0.0;

    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (isnan(d) || d > md)
            md = isnan(d) ? INFINITY : d;
    }
    printf("  %-36s max |diff| = %.3g\n", what, md);
    if (!(md <= tol)) {
        for (size_t i = 0; i < n; i++)
            printf("    [%zu] got %.7g want %.7g\n", i, got[i], want[i]);
        fail_msg("%s: max difference %.3g over tolerance %.3g", what, md, tol);
    }
}

#define F32 SIM_DTYPE_FLOAT
#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- elementwise ------------------------------------------------------------------- */

static void
binary_f32(const char *op, const float *a, int ra, const int64_t *da, const float *b, int rb,
           const int64_t *db, const float *want, size_t n)
{
    struct t in[2] = { { "a", F32, ra, { 0 }, a, 0 }, { "b", F32, rb, { 0 }, b, 1 } };
    struct run r;
    char what[64];

    memcpy(in[0].d, da, sizeof(int64_t) * (size_t)ra);
    memcpy(in[1].d, db, sizeof(int64_t) * (size_t)rb);
    r = op_run(op_begin(op, 14, in, 2, 1));
    snprintf(what, sizeof(what), "%s (broadcast)", op);
    expect_f32(what, outf(&r, 0), want, n, 1e-6);
    run_free(&r);
}

static void
test_binary(void **state)
{
    const float a[6] = { 1, 2, 3, 4, 5, 6 }, row[3] = { 10, 20, 30 }, col[2] = { 2, 4 };
    const int64_t d23[2] = { 2, 3 }, d3[1] = { 3 }, d21[2] = { 2, 1 }, d0[1] = { 0 };
    const float add[6] = { 11, 22, 33, 14, 25, 36 }, sub[6] = { -9, -18, -27, -6, -15, -24 };
    const float mul[6] = { 2, 4, 6, 16, 20, 24 }, div[6] = { 0.5f, 1, 1.5f, 1, 1.25f, 1.5f };
    const float two = 2, pw[6] = { 1, 4, 9, 16, 25, 36 };

    (void)state;
    binary_f32("Add", a, 2, d23, row, 1, d3, add, 6);
    binary_f32("Sub", a, 2, d23, row, 1, d3, sub, 6);
    binary_f32("Mul", a, 2, d23, col, 2, d21, mul, 6);
    binary_f32("Div", a, 2, d23, col, 2, d21, div, 6);
    binary_f32("Pow", a, 2, d23, &two, 0, d0, pw, 6);
}

/* Opset 6 Add: broadcast=1 with axis lines B up with A's dims from axis. */
static void
test_legacy_broadcast(void **state)
{
    const float a[6] = { 1, 2, 3, 4, 5, 6 }, b[2] = { 10, 20 };
    const float want[6] = { 11, 12, 13, 24, 25, 26 };
    struct t in[2] = { { "a", F32, 2, { 2, 3 }, a, 0 }, { "b", F32, 1, { 2 }, b, 1 } };
    struct sim_ob *ob = op_begin("Add", 6, in, 2, 1);
    struct run r;

    (void)state;
    sim_ob_attr_int(ob, "broadcast", 1);
    sim_ob_attr_int(ob, "axis", 0);
    r = op_run(ob);
    expect_f32("Add opset 6 broadcast=1 axis=0", outf(&r, 0), want, 6, 0);
    run_free(&r);
}

static void
test_integer_arith(void **state)
{
    const int32_t a[4] = { 7, -7, INT32_MIN, 5 }, b[4] = { 2, 2, -1, 0 };
    const int32_t want_div[4] = { 3, -3, INT32_MIN, 0 };
    const uint8_t u[3] = { 250, 3, 0 }, v[3] = { 10, 5, 1 };
    const uint8_t want_add[3] = { 4, 8, 1 }, want_sub[3] = { 240, 254, 255 };
    struct t in[2] = { { "a", SIM_DTYPE_INT32, 1, { 4 }, a, 0 },
                       { "b", SIM_DTYPE_INT32, 1, { 4 }, b, 0 } };
    struct t inu[2] = { { "a", SIM_DTYPE_UINT8, 1, { 3 }, u, 0 },
                        { "b", SIM_DTYPE_UINT8, 1, { 3 }, v, 0 } };
    struct run r;

    (void)state;
    r = op_run(op_begin("Div", 14, in, 2, 1));
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want_div, sizeof(want_div));
    printf("  %-36s exact (x/0 = 0, MIN/-1 wraps)\n", "Div int32");
    run_free(&r);
    r = op_run(op_begin("Add", 14, inu, 2, 1));
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want_add, sizeof(want_add));
    run_free(&r);
    r = op_run(op_begin("Sub", 14, inu, 2, 1));
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want_sub, sizeof(want_sub));
    printf("  %-36s exact (wrapping)\n", "Add/Sub uint8");
    run_free(&r);
}

static void
unary(const char *op, const float *x, const float *want, size_t n, double tol)
{
    struct t in[1] = { { "x", F32, 1, { (int64_t)n }, x, 0 } };
    struct run r = op_run(op_begin(op, 13, in, 1, 1));

    expect_f32(op, outf(&r, 0), want, n, tol);
    run_free(&r);
}

static void
test_unary(void **state)
{
    const float x[4] = { -1, 0, 0.5f, 2 }, p[4] = { 0.25f, 1, 4, 9 };
    const float neg[4] = { 1, 0, -0.5f, -2 }, abs_[4] = { 1, 0, 0.5f, 2 };
    const float sq[4] = { 0.5f, 1, 2, 3 };
    const float ex[4] = { 0.36787944f, 1, 1.6487213f, 7.3890561f };
    const float lg[4] = { -1.3862944f, 0, 1.3862944f, 2.1972246f };
    const float erf_[4] = { -0.84270079f, 0, 0.52049988f, 0.99532227f };

    (void)state;
    unary("Neg", x, neg, 4, 0);
    unary("Abs", x, abs_, 4, 0);
    unary("Sqrt", p, sq, 4, 1e-6);
    unary("Exp", x, ex, 4, 1e-6);
    unary("Log", p, lg, 4, 1e-6);
    unary("Erf", x, erf_, 4, 1e-6);
}

static void
test_clip_cast_identity(void **state)
{
    const float x[5] = { -3, -0.5f, 0, 2.7f, 9 }, lo = -1, hi = 2;
    const float want_both[5] = { -1, -0.5f, 0, 2, 2 }, want_min[5] = { -1, -0.5f, 0, 2.7f, 9 };
    const int32_t want_i32[5] = { -3, 0, 0, 2, 9 };
    const uint8_t want_bool[5] = { 1, 1, 0, 1, 1 };
    struct t both[3] = { { "x", F32, 1, { 5 }, x, 0 }, { "lo", F32, 0, { 0 }, &lo, 0 },
                         { "hi", F32, 0, { 0 }, &hi, 1 } };
    struct t only_min[2] = { { "x", F32, 1, { 5 }, x, 0 }, { "lo", F32, 0, { 0 }, &lo, 1 } };
    struct sim_ob *b;
    struct run r;

    (void)state;
    r = op_run(op_begin("Clip", 13, both, 3, 1));
    expect_f32("Clip min, max", outf(&r, 0), want_both, 5, 0);
    run_free(&r);
    r = op_run(op_begin("Clip", 13, only_min, 2, 1));
    expect_f32("Clip min only", outf(&r, 0), want_min, 5, 0);
    run_free(&r);
    b = op_begin("Clip", 6, both, 1, 1);
    sim_ob_attr_float(b, "min", -1);
    sim_ob_attr_float(b, "max", 2);
    r = op_run(b);
    expect_f32("Clip (opset 6 attributes)", outf(&r, 0), want_both, 5, 0);
    run_free(&r);
    b = op_begin("Cast", 13, both, 1, 1);
    sim_ob_attr_int(b, "to", SIM_DTYPE_INT32);
    r = op_run(b);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want_i32, sizeof(want_i32));
    run_free(&r);
    b = op_begin("Cast", 13, both, 1, 1);
    sim_ob_attr_int(b, "to", SIM_DTYPE_BOOL);
    r = op_run(b);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want_bool, sizeof(want_bool));
    printf("  %-36s exact (truncation, != 0)\n", "Cast float -> int32, bool");
    run_free(&r);
    r = op_run(op_begin("Identity", 13, both, 1, 1));
    expect_f32("Identity", outf(&r, 0), x, 5, 0);
    run_free(&r);
}

/* ---- activations ------------------------------------------------------------------- */

static void
test_activation(void **state)
{
    const float x[6] = { 1, 2, 3, -1, 0, 1 }, y3[3] = { -2, 0, 3 };
    const float sm[6] = { 0.09003057f, 0.24472847f, 0.66524096f,
                          0.09003057f, 0.24472847f, 0.66524096f };
    const float lsm[6] = { -2.4076061f, -1.4076060f, -0.4076060f,
                           -2.4076061f, -1.4076060f, -0.4076060f };
    const float relu[3] = { 0, 0, 3 }, leaky[3] = { -0.2f, 0, 3 };
    const float sig[3] = { 0.11920292f, 0.5f, 0.95257413f };
    const float th[3] = { -0.96402758f, 0, 0.99505475f };
    struct t in23[1] = { { "x", F32, 2, { 2, 3 }, x, 0 } };
    struct t in3[1] = { { "x", F32, 1, { 3 }, y3, 0 } };
    struct t in123[1] = { { "x", F32, 3, { 1, 2, 3 }, x, 0 } };
    const float sm_flat[6] = { 0.07929866f, 0.21555610f, 0.58594227f,
                               0.01073191f, 0.02917235f, 0.07929866f };
    struct sim_ob *b;
    struct run r;

    (void)state;
    r = op_run(op_begin("Relu", 14, in3, 1, 1));
    expect_f32("Relu", outf(&r, 0), relu, 3, 0);
    run_free(&r);
    b = op_begin("LeakyRelu", 16, in3, 1, 1);
    sim_ob_attr_float(b, "alpha", 0.1f);
    r = op_run(b);
    expect_f32("LeakyRelu alpha=0.1", outf(&r, 0), leaky, 3, 1e-7);
    run_free(&r);
    r = op_run(op_begin("Sigmoid", 13, in3, 1, 1));
    expect_f32("Sigmoid", outf(&r, 0), sig, 3, 1e-6);
    run_free(&r);
    r = op_run(op_begin("Tanh", 13, in3, 1, 1));
    expect_f32("Tanh", outf(&r, 0), th, 3, 1e-6);
    run_free(&r);
    r = op_run(op_begin("Softmax", 13, in23, 1, 1));
    expect_f32("Softmax axis=-1", outf(&r, 0), sm, 6, 1e-6);
    run_free(&r);
    r = op_run(op_begin("LogSoftmax", 13, in23, 1, 1));
    expect_f32("LogSoftmax axis=-1", outf(&r, 0), lsm, 6, 1e-6);
    run_free(&r);
    /* opset 11: axis 1 of (1, 2, 3) flattens (2, 3) into one softmax of 6 */
    r = op_run(op_begin("Softmax", 11, in123, 1, 1));
    expect_f32("Softmax opset 11 (coerced 2-D)", outf(&r, 0), sm_flat, 6, 1e-6);
    run_free(&r);
}

static void
test_dropout(void **state)
{
    float x[1000];
    const float ratio = 0.5f;
    const uint8_t on = 1, off = 0;
    struct t in_inf[3] = { { "x", F32, 1, { 1000 }, x, 0 }, { "r", F32, 0, { 0 }, &ratio, 1 },
                           { "t", SIM_DTYPE_BOOL, 0, { 0 }, &off, 1 } };
    struct t in_tr[3] = { { "x", F32, 1, { 1000 }, x, 0 }, { "r", F32, 0, { 0 }, &ratio, 1 },
                          { "t", SIM_DTYPE_BOOL, 0, { 0 }, &on, 1 } };
    const uint8_t *mask;
    const float *y;
    struct run r;
    int kept = 0;

    (void)state;
    for (int i = 0; i < 1000; i++)
        x[i] = (float)(i % 7) + 1.0f;
    r = op_run(op_begin("Dropout", 13, in_inf, 3, 2));
    expect_f32("Dropout inference = identity", outf(&r, 0), x, 1000, 0);
    mask = sim_exe_output_buffer(r.e, 1);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(mask[i], 1);
    run_free(&r);
    r = op_run(op_begin("Dropout", 13, in_tr, 3, 2));
    y = outf(&r, 0);
    mask = sim_exe_output_buffer(r.e, 1);
    for (int i = 0; i < 1000; i++) {
        assert_true(mask[i] ? y[i] == 2.0f * x[i] : y[i] == 0.0f);
        kept += mask[i];
    }
    printf("  %-36s kept %d of 1000 at ratio 0.5\n", "Dropout training", kept);
    assert_in_range(kept, 400, 600);
    run_free(&r);
}

/* ---- random generators -------------------------------------------------------------- */

/* A graph of one RandomUniform (or RandomNormal) node of shape (n); low/high or
 * mean/scale a, b; dtype 0: the attribute left out. */
static struct sim_ob *
random_graph(const char *op, int64_t n, float a, float b, int64_t dtype)
{
    struct sim_ob *g = sim_ob_new(13);
    int normal = strcmp(op, "RandomNormal") == 0;

    sim_ob_node(g, op, "r", "", "y");
    sim_ob_attr_ints(g, "shape", (int64_t[]){ 4, n / 4 }, 2);
    sim_ob_attr_float(g, normal ? "mean" : "low", a);
    sim_ob_attr_float(g, normal ? "scale" : "high", b);
    if (dtype != 0)
        sim_ob_attr_int(g, "dtype", dtype);
    sim_ob_output(g, "y", dtype == 10 ? SIM_DTYPE_FLOAT16 : F32);
    return g;
}

/* Statistics with stated bounds (n = 40 000: the mean within 6 standard errors, the
 * standard deviation within 5 %), the range of the uniform, the seed's effect. */
static void
test_random(void **state)
{
    const int64_t n = 40000;
    struct sim_err err;
    struct test_ob_run r, r2;
    const float *y;
    double s = 0, ss = 0, lo = 1e30, hi = -1e30, sd;
    float first[8];

    (void)state;
    r = test_ob_run_ok(random_graph("RandomUniform", n, -1.0f, 3.0f, 0));
    y = sim_exe_output_buffer(r.e, 0);
    for (int64_t i = 0; i < n; i++) {
        s += y[i];
        ss += (double)y[i] * y[i];
        lo = fmin(lo, y[i]);
        hi = fmax(hi, y[i]);
    }
    sd = sqrt(ss / n - (s / n) * (s / n));
    printf("  %-36s mean %.5f (1) std %.5f (%.5f) range [%.5f, %.5f]\n",
           "RandomUniform(-1, 3)", s / n, sd, 4 / sqrt(12.0), lo, hi);
    assert_true(fabs(s / n - 1.0) < 6 * (4 / sqrt(12.0)) / sqrt((double)n));
    assert_true(fabs(sd - 4 / sqrt(12.0)) < 0.05 * 4 / sqrt(12.0));
    assert_true(lo >= -1.0 && hi <= 3.0);
    memcpy(first, y, sizeof(first));
    /* the same seed in a fresh executable: the same draws; another seed: others */
    r2 = test_ob_run_ok(random_graph("RandomUniform", n, -1.0f, 3.0f, 0));
    assert_memory_equal(first, sim_exe_output_buffer(r2.e, 0), sizeof(first));
    assert_int_equal(sim_exe_set_seed(r2.e, 5, &err), 0);
    if (sim_exe_run(r2.e, &err) != 0)
        fail_msg("run: %s", err.msg);
    assert_memory_not_equal(first, sim_exe_output_buffer(r2.e, 0), sizeof(first));
    test_ob_run_free(&r2);
    /* the next run of the same executable draws anew */
    if (sim_exe_run(r.e, &err) != 0)
        fail_msg("run: %s", err.msg);
    assert_memory_not_equal(first, sim_exe_output_buffer(r.e, 0), sizeof(first));
    test_ob_run_free(&r);

    r = test_ob_run_ok(random_graph("RandomNormal", n, 2.0f, 0.5f, 1));
    y = sim_exe_output_buffer(r.e, 0);
    s = ss = 0;
    for (int64_t i = 0; i < n; i++) {
        s += y[i];
        ss += (double)y[i] * y[i];
    }
    sd = sqrt(ss / n - (s / n) * (s / n));
    printf("  %-36s mean %.5f (2) std %.5f (0.5)\n", "RandomNormal(2, 0.5)", s / n, sd);
    assert_true(fabs(s / n - 2.0) < 6 * 0.5 / sqrt((double)n));
    assert_true(fabs(sd - 0.5) < 0.05 * 0.5);
    test_ob_run_free(&r);

    /* float16: halves in [0, 1] */
    r = test_ob_run_ok(random_graph("RandomUniform", 400, 0.0f, 1.0f, 10));
    {
        const uint16_t *h = sim_exe_output_buffer(r.e, 0);
        for (int i = 0; i < 400; i++)
            assert_true(h[i] <= 0x3c00);    /* 0 .. 1.0 as positive halves */
    }
    test_ob_run_free(&r);

    /* refusals */
    test_ob_expect_refused(random_graph("RandomUniform", 8, 0.0f, 1.0f, 11),
                           IPUOF_E_UNSUPPORTED, "no float64");
    test_ob_expect_refused(random_graph("RandomUniform", 8, 0.0f, 1.0f, 6), IPUOF_E_INVAL,
                           "not a float type");
    test_ob_expect_refused(random_graph("RandomUniform", 8, 2.0f, 1.0f, 0), IPUOF_E_INVAL,
                           "low <= high");
    test_ob_expect_refused(random_graph("RandomNormal", 8, 0.0f, -1.0f, 0), IPUOF_E_INVAL,
                           "scale >= 0");
    {
        struct sim_ob *g = sim_ob_new(13);
        sim_ob_node(g, "RandomUniform", "r", "", "y");
        sim_ob_output(g, "y", F32);
        test_ob_expect_refused(g, IPUOF_E_INVAL, "'shape' is required");
        g = sim_ob_new(13);
        sim_ob_node(g, "RandomUniform", "r", "", "y");
        sim_ob_attr_ints(g, "shape", (int64_t[]){ 2, -3 }, 2);
        sim_ob_output(g, "y", F32);
        test_ob_expect_refused(g, IPUOF_E_SHAPE, "negative");
        g = sim_ob_new(13);
        sim_ob_input(g, "i", SIM_DTYPE_INT32, 1, (int64_t[]){ 3 });
        sim_ob_node(g, "RandomNormalLike", "r", "i", "y");
        sim_ob_output(g, "y", F32);
        test_ob_expect_refused(g, IPUOF_E_INVAL, "no dtype is given");
    }
}

/* ---- matrix products ---------------------------------------------------------------- */

static void
test_matmul_gemm(void **state)
{
    const float a[6] = { 1, 2, 3, 4, 5, 6 }, b[6] = { 1, 0, 0, 1, 1, 1 };
    const float ab[4] = { 4, 5, 10, 11 };
    const float a3[12] = { 1, 2, 3, 4, 5, 6, -1, 0, 1, 2, 0, 2 };
    const float ab3[8] = { 4, 5, 10, 11, 0, 1, 4, 2 };
    const float v[3] = { 1, 1, 1 }, vb[2] = { 2, 2 };
    const float c[2] = { 100, 200 };
    /* Y = 0.5 * A^T(3x2)^T ... : A is (2, 3); transA: A^T (3, 2); B^T with transB */
    const float gemm_want[4] = { 0.5f * 4 + 100 * 2, 0.5f * 5 + 200 * 2,
                                 0.5f * 10 + 100 * 2, 0.5f * 11 + 200 * 2 };
    struct t mm[2] = { { "a", F32, 2, { 2, 3 }, a, 0 }, { "b", F32, 2, { 3, 2 }, b, 1 } };
    struct t mm3[2] = { { "a", F32, 3, { 2, 2, 3 }, a3, 0 }, { "b", F32, 2, { 3, 2 }, b, 1 } };
    struct t mv[2] = { { "a", F32, 1, { 3 }, v, 0 }, { "b", F32, 2, { 3, 2 }, b, 1 } };
    float at[6], bt[6];
    struct t gm[3] = { { "a", F32, 2, { 3, 2 }, at, 0 }, { "b", F32, 2, { 2, 3 }, bt, 1 },
                       { "c", F32, 1, { 2 }, c, 1 } };
    const int64_t d2[1] = { 2 }, d222[3] = { 2, 2, 2 };
    struct sim_ob *g;
    struct run r;

    (void)state;
    r = op_run(op_begin("MatMul", 13, mm, 2, 1));
    expect_f32("MatMul (2,3)x(3,2)", outf(&r, 0), ab, 4, 0);
    run_free(&r);
    r = op_run(op_begin("MatMul", 13, mm3, 2, 1));
    expect_shape(&r, 0, 3, d222);
    expect_f32("MatMul (2,2,3)x(3,2) folded", outf(&r, 0), ab3, 8, 0);
    run_free(&r);
    r = op_run(op_begin("MatMul", 13, mv, 2, 1));
    expect_shape(&r, 0, 1, d2);
    expect_f32("MatMul (3)x(3,2)", outf(&r, 0), vb, 2, 0);
    run_free(&r);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            at[j * 2 + i] = a[i * 3 + j];
            bt[i * 3 + j] = b[j * 2 + i];
        }
    g = op_begin("Gemm", 13, gm, 3, 1);
    sim_ob_attr_int(g, "transA", 1);
    sim_ob_attr_int(g, "transB", 1);
    sim_ob_attr_float(g, "alpha", 0.5f);
    sim_ob_attr_float(g, "beta", 2.0f);
    r = op_run(g);
    expect_f32("Gemm transA transB alpha beta", outf(&r, 0), gemm_want, 4, 1e-5);
    run_free(&r);
}

/* ---- convolution -------------------------------------------------------------------- */

/* Naive direct convolution: x (n, c, h, w), w (m, c/g, kh, kw), y (n, m, oh, ow). */
static void
conv_ref(const float *x, const float *w, const float *bias, float *y, int n, int c, int h,
         int wd, int m, int kh, int kw, int s, int p, int dil, int g, int oh, int ow)
{
    int cg = c / g, mg = m / g;

    for (int in = 0; in < n; in++)
        for (int om = 0; om < m; om++)
            for (int oy = 0; oy < oh; oy++)
                for (int ox = 0; ox < ow; ox++) {
                    double acc = bias ? bias[om] : 0.0;
                    int grp = om / mg;
                    for (int ci = 0; ci < cg; ci++)
                        for (int ky = 0; ky < kh; ky++)
                            for (int kx = 0; kx < kw; kx++) {
                                int iy = oy * s - p + ky * dil, ix = ox * s - p + kx * dil;
                                if (iy < 0 || iy >= h || ix < 0 || ix >= wd)
                                    continue;
                                acc += (double)x[((in * c + grp * cg + ci) * h + iy) * wd + ix] *
                                       w[((om * cg + ci) * kh + ky) * kw + kx];
                            }
                    y[((in * m + om) * oh + oy) * ow + ox] = (float)acc;
                }
}

static void
conv_case(const char *what, int n, int c, int h, int m, int k, int s, int p, int dil, int g,
          int with_bias)
{
    int oh = (h + 2 * p - ((k - 1) * dil + 1)) / s + 1;
    size_t nx = (size_t)n * c * h * h, nw = (size_t)m * (c / g) * k * k;
    size_t ny = (size_t)n * m * oh * oh;
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *bias = malloc((size_t)m * 4);
    float *want = malloc(ny * 4);
    struct t in[3] = { { "x", F32, 4, { n, c, h, h }, x, 0 },
                       { "w", F32, 4, { m, c / g, k, k }, w, 1 },
                       { "b", F32, 1, { m }, bias, 1 } };
    int64_t pads[4] = { p, p, p, p }, st[2] = { s, s }, dl[2] = { dil, dil };
    struct sim_ob *b;
    struct run r;

    srand(7);
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    for (size_t i = 0; i < nw; i++)
        w[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    for (int i = 0; i < m; i++)
        bias[i] = (float)i * 0.25f;
    conv_ref(x, w, with_bias ? bias : NULL, want, n, c, h, h, m, k, k, s, p, dil, g, oh, oh);
    b = op_begin("Conv", 11, in, with_bias ? 3 : 2, 1);
    sim_ob_attr_ints(b, "pads", pads, 4);
    sim_ob_attr_ints(b, "strides", st, 2);
    sim_ob_attr_ints(b, "dilations", dl, 2);
    sim_ob_attr_int(b, "group", g);
    r = op_run(b);
    expect_f32(what, outf(&r, 0), want, ny, 1e-4);
    run_free(&r);
    free(x);
    free(w);
    free(bias);
    free(want);
}

static void
test_conv(void **state)
{
    float x[16], ones[9];
    const float want_valid[4] = { 45, 54, 81, 90 };
    const float want_pad[16] = { 10, 18, 24, 18, 27, 45, 54, 39, 51, 81, 90, 63, 42, 66, 72, 50 };
    struct t in[2] = { { "x", F32, 4, { 1, 1, 4, 4 }, x, 0 },
                       { "w", F32, 4, { 1, 1, 3, 3 }, ones, 1 } };
    const int64_t pads[4] = { 1, 1, 1, 1 };
    struct sim_ob *b;
    struct run r;

    (void)state;
    for (int i = 0; i < 16; i++)
        x[i] = (float)i;
    for (int i = 0; i < 9; i++)
        ones[i] = 1;
    r = op_run(op_begin("Conv", 11, in, 2, 1));
    expect_f32("Conv 3x3 valid", outf(&r, 0), want_valid, 4, 0);
    run_free(&r);
    b = op_begin("Conv", 11, in, 2, 1);
    sim_ob_attr_ints(b, "pads", pads, 4);
    r = op_run(b);
    expect_f32("Conv 3x3 pads 1", outf(&r, 0), want_pad, 16, 0);
    run_free(&r);
    b = op_begin("Conv", 11, in, 2, 1);
    sim_ob_attr_str(b, "auto_pad", "SAME_UPPER");
    r = op_run(b);
    expect_f32("Conv 3x3 auto_pad SAME_UPPER", outf(&r, 0), want_pad, 16, 0);
    run_free(&r);
    conv_case("Conv vs direct: stride 2, bias", 2, 3, 9, 4, 3, 2, 1, 1, 1, 1);
    conv_case("Conv vs direct: dilation 2", 2, 2, 10, 3, 3, 1, 2, 2, 1, 0);
    conv_case("Conv vs direct: groups 2", 3, 4, 8, 6, 3, 1, 1, 1, 2, 1);
    conv_case("Conv vs direct: depthwise", 2, 4, 7, 4, 3, 1, 1, 1, 4, 1);
    conv_case("Conv vs direct: depthwise, wide rows", 2, 32, 30, 32, 3, 1, 1, 1, 32, 1);
    conv_case("Conv vs direct: depthwise 7x7", 2, 8, 21, 8, 7, 1, 3, 1, 8, 1);
    conv_case("Conv vs direct: depthwise stride 2", 2, 6, 17, 6, 3, 2, 1, 1, 6, 0);
    conv_case("Conv vs direct: depthwise x2, dilation 2", 2, 3, 20, 6, 3, 1, 2, 2, 3, 1);
    conv_case("Conv vs direct: 1x1 pointwise", 3, 5, 6, 7, 1, 1, 0, 1, 1, 1);
    conv_case("Conv vs direct: batch in chunks", 3, 64, 40, 8, 3, 1, 1, 1, 1, 1);
}

/* ---- pooling ------------------------------------------------------------------------ */

static void
test_pool(void **state)
{
    float x[16], x9[9];
    const float want_max[4] = { 5, 7, 13, 15 };
    const float want_excl[9] = { 2, 2.5f, 3, 3.5f, 4, 4.5f, 5, 5.5f, 6 };
    const float want_incl[9] = { 0.8888889f, 1.6666666f, 1.3333334f, 2.3333333f, 4,
                                 3, 2.2222222f, 3.6666667f, 2.6666667f };
    const float want_gap[1] = { 7.5f };
    const float want_maxpad[9] = { 4, 5, 5, 7, 8, 8, 7, 8, 8 };
    const int64_t want_idx[9] = { 4, 5, 5, 7, 8, 8, 7, 8, 8 };
    struct t in[1] = { { "x", F32, 4, { 1, 1, 4, 4 }, x, 0 } };
    struct t in9[1] = { { "x", F32, 4, { 1, 1, 3, 3 }, x9, 0 } };
    const int64_t k2[2] = { 2, 2 }, k3[2] = { 3, 3 }, pads[4] = { 1, 1, 1, 1 };
    struct sim_ob *b;
    struct run r;

    (void)state;
    for (int i = 0; i < 16; i++)
        x[i] = (float)i;
    for (int i = 0; i < 9; i++)
        x9[i] = (float)i;
    b = op_begin("MaxPool", 12, in, 1, 1);
    sim_ob_attr_ints(b, "kernel_shape", k2, 2);
    sim_ob_attr_ints(b, "strides", k2, 2);
    r = op_run(b);
    expect_f32("MaxPool 2x2 stride 2", outf(&r, 0), want_max, 4, 0);
    run_free(&r);
    b = op_begin("MaxPool", 12, in9, 1, 2);
    sim_ob_attr_ints(b, "kernel_shape", k3, 2);
    sim_ob_attr_ints(b, "pads", pads, 4);
    r = op_run(b);
    expect_f32("MaxPool 3x3 pads 1", outf(&r, 0), want_maxpad, 9, 0);
    assert_memory_equal(sim_exe_output_buffer(r.e, 1), want_idx, sizeof(want_idx));
    run_free(&r);
    b = op_begin("AveragePool", 11, in9, 1, 1);
    sim_ob_attr_ints(b, "kernel_shape", k3, 2);
    sim_ob_attr_ints(b, "pads", pads, 4);
    r = op_run(b);
    expect_f32("AveragePool pads, exclude pad", outf(&r, 0), want_excl, 9, 1e-6);
    run_free(&r);
    b = op_begin("AveragePool", 11, in9, 1, 1);
    sim_ob_attr_ints(b, "kernel_shape", k3, 2);
    sim_ob_attr_ints(b, "pads", pads, 4);
    sim_ob_attr_int(b, "count_include_pad", 1);
    r = op_run(b);
    expect_f32("AveragePool pads, include pad", outf(&r, 0), want_incl, 9, 1e-6);
    run_free(&r);
    r = op_run(op_begin("GlobalAveragePool", 11, in, 1, 1));
    expect_f32("GlobalAveragePool", outf(&r, 0), want_gap, 1, 1e-6);
    run_free(&r);
}

/* ---- reductions and normalisations -------------------------------------------------- */

static void
test_reduce(void **state)
{
    const float x[6] = { 1, 2, 3, 4, 5, 6 };
    const int64_t ax1[1] = { 1 }, ax0[1] = { 0 };
    const float want_sum[2] = { 6, 15 }, want_mean[1] = { 3.5f };
    const float want_max[3] = { 4, 5, 6 }, want_min[2] = { 1, 4 };
    struct t in[2] = { { "x", F32, 2, { 2, 3 }, x, 0 },
                       { "axes", SIM_DTYPE_INT64, 1, { 1 }, ax1, 1 } };
    const int64_t d2[1] = { 2 }, d11[2] = { 1, 1 };
    struct sim_ob *b;
    struct run r;

    (void)state;
    b = op_begin("ReduceSum", 13, in, 2, 1);
    sim_ob_attr_int(b, "keepdims", 0);
    r = op_run(b);
    expect_shape(&r, 0, 1, d2);
    expect_f32("ReduceSum axes=[1] keepdims=0", outf(&r, 0), want_sum, 2, 0);
    run_free(&r);
    r = op_run(op_begin("ReduceMean", 13, in, 1, 1));
    expect_shape(&r, 0, 2, d11);
    expect_f32("ReduceMean all, keepdims", outf(&r, 0), want_mean, 1, 0);
    run_free(&r);
    b = op_begin("ReduceMax", 13, in, 1, 1);
    sim_ob_attr_ints(b, "axes", ax0, 1);
    sim_ob_attr_int(b, "keepdims", 0);
    r = op_run(b);
    expect_f32("ReduceMax axes=[0]", outf(&r, 0), want_max, 3, 0);
    run_free(&r);
    b = op_begin("ReduceMin", 13, in, 1, 1);
    sim_ob_attr_ints(b, "axes", ax1, 1);
    sim_ob_attr_int(b, "keepdims", 0);
    r = op_run(b);
    expect_f32("ReduceMin axes=[1]", outf(&r, 0), want_min, 2, 0);
    run_free(&r);
}

static void
test_norm(void **state)
{
    const float x[8] = { 1, 2, 3, 4, -1, -2, 0, 8 };
    const float sc[2] = { 1, 2 }, bi[2] = { 0, 1 }, mean[2] = { 2, 0 }, var[2] = { 4, 1 };
    float want_bn[8];
    const float lx[6] = { 1, 2, 3, 2, 4, 8 }, lsc[3] = { 1, 2, 0.5f }, lb[3] = { 0, 1, -1 };
    const float want_ln[6] = { -1.2247356f, 1.0f, -0.3876322f,
                               -1.0690440f, 0.4654781f, -0.3318474f };
    const float want_mean[2] = { 2.0f, 4.6666665f }, want_inv[2] = { 1.2247356f, 0.4008915f };
    struct t bn[5] = { { "x", F32, 4, { 2, 2, 1, 2 }, x, 0 }, { "s", F32, 1, { 2 }, sc, 1 },
                       { "b", F32, 1, { 2 }, bi, 1 }, { "m", F32, 1, { 2 }, mean, 1 },
                       { "v", F32, 1, { 2 }, var, 1 } };
    struct t ln[3] = { { "x", F32, 2, { 2, 3 }, lx, 0 }, { "s", F32, 1, { 3 }, lsc, 1 },
                       { "b", F32, 1, { 3 }, lb, 1 } };
    struct run r;

    (void)state;
    for (int n = 0; n < 2; n++)
        for (int c = 0; c < 2; c++)
            for (int i = 0; i < 2; i++) {
                int k = (n * 2 + c) * 2 + i;
                want_bn[k] = (float)((x[k] - mean[c]) / sqrt(var[c] + 1e-5) * sc[c] + bi[c]);
            }
    r = op_run(op_begin("BatchNormalization", 15, bn, 5, 1));
    expect_f32("BatchNormalization inference", outf(&r, 0), want_bn, 8, 1e-5);
    run_free(&r);
    r = op_run(op_begin("LayerNormalization", 17, ln, 3, 3));
    expect_f32("LayerNormalization axis=-1", outf(&r, 0), want_ln, 6, 1e-5);
    expect_f32("LayerNormalization Mean", outf(&r, 1), want_mean, 2, 1e-5);
    expect_f32("LayerNormalization InvStdDev", outf(&r, 2), want_inv, 2, 1e-5);
    run_free(&r);
}

/* ---- data movement ------------------------------------------------------------------ */

static void
test_shape_ops(void **state)
{
    float x[24];
    const int64_t shp[3] = { 0, -1, 2 }, perm[3] = { 2, 0, 1 }, ax[1] = { 1 };
    const int64_t st[1] = { -1 }, en[1] = { -4 }, sax[1] = { 2 }, stp[1] = { -2 };
    const int64_t idx[2] = { 2, -3 };
    const int64_t want_r[3] = { 2, 6, 2 }, want_t[3] = { 4, 2, 3 }, want_f[2] = { 2, 12 };
    const int64_t want_u[4] = { 2, 1, 3, 4 }, want_c[3] = { 2, 6, 4 }, want_g[3] = { 2, 2, 4 };
    const int64_t want_shape[2] = { 3, 4 };
    struct t in_r[2] = { { "x", F32, 3, { 2, 3, 4 }, x, 0 },
                         { "s", SIM_DTYPE_INT64, 1, { 3 }, shp, 1 } };
    struct t in_u[2] = { { "x", F32, 3, { 2, 3, 4 }, x, 0 },
                         { "a", SIM_DTYPE_INT64, 1, { 1 }, ax, 1 } };
    struct t in_c[2] = { { "x", F32, 3, { 2, 3, 4 }, x, 0 }, { "z", F32, 3, { 2, 3, 4 }, x, 1 } };
    struct t in_s[5] = { { "x", F32, 3, { 2, 3, 4 }, x, 0 },
                         { "st", SIM_DTYPE_INT64, 1, { 1 }, st, 1 },
                         { "en", SIM_DTYPE_INT64, 1, { 1 }, en, 1 },
                         { "ax", SIM_DTYPE_INT64, 1, { 1 }, sax, 1 },
                         { "sp", SIM_DTYPE_INT64, 1, { 1 }, stp, 1 } };
    struct t in_g[2] = { { "x", F32, 3, { 2, 3, 4 }, x, 0 },
                         { "i", SIM_DTYPE_INT64, 1, { 2 }, idx, 0 } };
    float want_tr[24], want_sl[12], want_ga[16];
    struct sim_ob *b;
    struct run r;

    (void)state;
    for (int i = 0; i < 24; i++)
        x[i] = (float)i;
    for (int a = 0; a < 2; a++)
        for (int bb = 0; bb < 3; bb++)
            for (int c = 0; c < 4; c++) {
                want_tr[(c * 2 + a) * 3 + bb] = x[(a * 3 + bb) * 4 + c];
                if (c == 3 || c == 1)
                    want_sl[(a * 3 + bb) * 2 + (c == 3 ? 0 : 1)] = x[(a * 3 + bb) * 4 + c];
            }
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 4; c++) {
            want_ga[(a * 2 + 0) * 4 + c] = x[(a * 3 + 2) * 4 + c];
            want_ga[(a * 2 + 1) * 4 + c] = x[(a * 3 + 0) * 4 + c];
        }
    r = op_run(op_begin("Reshape", 14, in_r, 2, 1));
    expect_shape(&r, 0, 3, want_r);
    expect_f32("Reshape [0, -1, 2]", outf(&r, 0), x, 24, 0);
    run_free(&r);
    b = op_begin("Transpose", 13, in_r, 1, 1);
    sim_ob_attr_ints(b, "perm", perm, 3);
    r = op_run(b);
    expect_shape(&r, 0, 3, want_t);
    expect_f32("Transpose perm [2, 0, 1]", outf(&r, 0), want_tr, 24, 0);
    run_free(&r);
    r = op_run(op_begin("Flatten", 13, in_r, 1, 1));
    expect_shape(&r, 0, 2, want_f);
    run_free(&r);
    r = op_run(op_begin("Unsqueeze", 13, in_u, 2, 1));
    expect_shape(&r, 0, 4, want_u);
    run_free(&r);
    b = op_begin("Concat", 13, in_c, 2, 1);
    sim_ob_attr_int(b, "axis", 1);
    r = op_run(b);
    expect_shape(&r, 0, 3, want_c);
    expect_f32("Concat axis 1 (first half)", outf(&r, 0), x, 12, 0);
    run_free(&r);
    r = op_run(op_begin("Slice", 13, in_s, 5, 1));
    expect_f32("Slice axis 2, -1:-4:-2", outf(&r, 0), want_sl, 12, 0);
    run_free(&r);
    b = op_begin("Gather", 13, in_g, 2, 1);
    sim_ob_attr_int(b, "axis", 1);
    r = op_run(b);
    expect_shape(&r, 0, 3, want_g);
    expect_f32("Gather axis 1, indices [2, -3]", outf(&r, 0), want_ga, 16, 0);
    run_free(&r);
    b = op_begin("Shape", 15, in_r, 1, 1);
    sim_ob_attr_int(b, "start", 1);
    r = op_run(b);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want_shape, sizeof(want_shape));
    printf("  %-36s exact\n", "Shape start=1");
    run_free(&r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_legacy_broadcast),
        cmocka_unit_test(test_integer_arith),
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_clip_cast_identity),
        cmocka_unit_test(test_activation),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_matmul_gemm),
        cmocka_unit_test(test_conv),
        cmocka_unit_test(test_pool),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_norm),
        cmocka_unit_test(test_shape_ops),
    };

    return cmocka_run_group_tests_name("sim_ops", tests, NULL, NULL);
}
