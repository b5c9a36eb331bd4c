/*
 * test_sim_ctrlflow.c — ONNX Loop and If (sim/onnx/onnx_ctrl.c): Loop unrolled with loop-carried
 * values, the iteration number, scan outputs (opset 11's Unsqueeze attribute and 13's
 * input), a constant condition passed through, nested loops, zero trips; If on a condition
 * known at load (the branch) and on data (both branches and Where, which must have one
 * shape); an If on a condition from shapes only, known at compile time, whose branches
 * differ in shape (only the branch taken is compiled, also trained); SplitToSequence +
 * SequenceAt as Slices (a computed split, negative positions, keepdims 0) and what of
 * sequences stays refused;
 * training through a loop giving the same weights, bit for bit, as the same graph
 * unrolled by hand; and the
 * refusals (trip count or condition from data, no trip count, a negative one, too many
 * iterations, nesting too deep), each naming the node and what would work.
 *
 * Every case builds a small ONNX model with sim/onnx/onnx_build.h, compiles and runs it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define I64 SIM_DTYPE_INT64
#define BOOL SIM_DTYPE_BOOL
#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }

static void
feed(struct test_ob_run *r, const char *name, const void *data, size_t bytes)
{
    long k = sim_exe_input_index(r->e, name);

    assert_true(k >= 0);
    memcpy(sim_exe_input_buffer(r->e, (size_t)k), data, bytes);
}

/* The body y = y_in + x + float(i); scan = y: inputs (i, cond, y_in), outputs (cond, y,
 * scan). cond_out is cond_in passed through an Identity. */
static struct sim_ob *
add_body(void)
{
    struct sim_ob *g = sim_ob_new(13);

    sim_ob_input(g, "i", I64, 0, NULL);
    sim_ob_input(g, "c", BOOL, 0, NULL);
    sim_ob_input(g, "y_in", F32, 1, DIMS(2));
    sim_ob_node(g, "Cast", "cast", "i", "fi");
    sim_ob_attr_int(g, "to", F32);
    sim_ob_node(g, "Add", "add1", "y_in,x", "t");
    sim_ob_node(g, "Add", "add2", "t,fi", "y");
    sim_ob_node(g, "Identity", "keep", "c", "c_out");
    sim_ob_node(g, "Identity", "scan", "y", "s");
    sim_ob_output(g, "c_out", BOOL);
    sim_ob_output(g, "y", F32);
    sim_ob_output(g, "s", F32);
    return g;
}

/* y0 (2) and x (2) inputs; M = trips (initializer or Constant node), cond true. */
static struct sim_ob *
loop_model(int64_t opset, int64_t trips, bool const_node)
{
    struct sim_ob *b = sim_ob_new(opset);
    const uint8_t yes = 1;

    sim_ob_input(b, "y0", F32, 1, DIMS(2));
    sim_ob_input(b, "x", F32, 1, DIMS(2));
    if (const_node) {
        sim_ob_node(b, "Constant", "m", "", "M");
        sim_ob_attr_tensor(b, "value", I64, 0, NULL, &trips);
    } else {
        sim_ob_initializer(b, "M", I64, 0, NULL, &trips);
    }
    sim_ob_initializer(b, "cond", BOOL, 0, NULL, &yes);
    sim_ob_node(b, "Loop", "loop", "M,cond,y0", "y_final,scan");
    sim_ob_attr_graph(b, "body", add_body());
    sim_ob_output(b, "y_final", F32);
    sim_ob_output(b, "scan", F32);
    return b;
}

static void
test_loop_unrolled(void **state)
{
    const float y0[2] = { 1, 2 }, x[2] = { 10, 20 };
    const float want_y[2] = { 34, 65 }, want_s[6] = { 11, 22, 22, 43, 34, 65 };
    const int64_t opsets[2] = { 11, 13 };

    (void)state;
    for (int k = 0; k < 4; k++) {
        struct sim_err err = { 0 };
        struct test_ob_run r = test_ob_compile(loop_model(opsets[k & 1], 3, k >= 2), &err);
        struct sim_io_info info;
        assert_non_null(r.e);
        feed(&r, "y0", y0, sizeof(y0));
        feed(&r, "x", x, sizeof(x));
        assert_int_equal(sim_exe_run(r.e, &err), 0);
        assert_memory_equal(sim_exe_output_buffer(r.e, 0), want_y, sizeof(want_y));
        assert_int_equal(sim_exe_output_info(r.e, 1, &info), 0);
        assert_int_equal(info.rank, 2);
        assert_int_equal(info.dims[0], 3);
        assert_int_equal(info.dims[1], 2);
        assert_memory_equal(sim_exe_output_buffer(r.e, 1), want_s, sizeof(want_s));
        printf("  Loop M=3 (%s, opset %lld): carried and scan outputs exact\n",
               k >= 2 ? "Constant" : "initializer", (long long)opsets[k & 1]);
        test_ob_run_free(&r);
    }
}

/* Zero trips: the carried value comes out as it went in (no scan outputs). */
static void
test_loop_zero_trips(void **state)
{
    const float y0[2] = { 1, 2 };
    const int64_t zero = 0;
    const uint8_t yes = 1;
    struct sim_ob *b = sim_ob_new(13), *g = sim_ob_new(13);
    struct sim_err err = { 0 };
    struct test_ob_run r;

    (void)state;
    sim_ob_input(g, "i", I64, 0, NULL);
    sim_ob_input(g, "c", BOOL, 0, NULL);
    sim_ob_input(g, "y_in", F32, 1, DIMS(2));
    sim_ob_node(g, "Neg", "neg", "y_in", "y");
    sim_ob_output(g, "c", BOOL);
    sim_ob_output(g, "y", F32);
    sim_ob_input(b, "y0", F32, 1, DIMS(2));
    sim_ob_initializer(b, "M", I64, 0, NULL, &zero);
    sim_ob_initializer(b, "cond", BOOL, 0, NULL, &yes);
    sim_ob_node(b, "Loop", "loop", "M,cond,y0", "y_final");
    sim_ob_attr_graph(b, "body", g);
    sim_ob_output(b, "y_final", F32);
    r = test_ob_compile(b, &err);
    assert_non_null(r.e);
    feed(&r, "y0", y0, sizeof(y0));
    assert_int_equal(sim_exe_run(r.e, &err), 0);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), y0, sizeof(y0));
    printf("  Loop M=0: the initial value passes through\n");
    test_ob_run_free(&r);
}

/* An outer loop of 2 whose body runs an inner loop of 3 (trip count from the outer
 * graph) adding x: y = y0 + 6x. */
static void
test_loop_nested(void **state)
{
    const float y0[2] = { 1, 2 }, x[2] = { 10, 20 }, want[2] = { 61, 122 };
    const int64_t two = 2, three = 3;
    const uint8_t yes = 1;
    struct sim_ob *b = sim_ob_new(13), *outer = sim_ob_new(13), *inner = sim_ob_new(13);
    struct sim_err err = { 0 };
    struct test_ob_run r;

    (void)state;
    sim_ob_input(inner, "j", I64, 0, NULL);
    sim_ob_input(inner, "c", BOOL, 0, NULL);
    sim_ob_input(inner, "z_in", F32, 1, DIMS(2));
    sim_ob_node(inner, "Add", "add", "z_in,x", "z");
    sim_ob_output(inner, "c", BOOL);
    sim_ob_output(inner, "z", F32);
    sim_ob_input(outer, "i", I64, 0, NULL);
    sim_ob_input(outer, "c", BOOL, 0, NULL);
    sim_ob_input(outer, "y_in", F32, 1, DIMS(2));
    sim_ob_node(outer, "Loop", "inner", "M3,,y_in", "y");
    sim_ob_attr_graph(outer, "body", inner);
    sim_ob_output(outer, "c", BOOL);
    sim_ob_output(outer, "y", F32);
    sim_ob_input(b, "y0", F32, 1, DIMS(2));
    sim_ob_input(b, "x", F32, 1, DIMS(2));
    sim_ob_initializer(b, "M2", I64, 0, NULL, &two);
    sim_ob_initializer(b, "M3", I64, 0, NULL, &three);
    sim_ob_initializer(b, "cond", BOOL, 0, NULL, &yes);
    sim_ob_node(b, "Loop", "outer", "M2,cond,y0", "y_final");
    sim_ob_attr_graph(b, "body", outer);
    sim_ob_output(b, "y_final", F32);
    r = test_ob_compile(b, &err);
    assert_non_null(r.e);
    feed(&r, "y0", y0, sizeof(y0));
    feed(&r, "x", x, sizeof(x));
    assert_int_equal(sim_exe_run(r.e, &err), 0);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want, sizeof(want));
    printf("  Loop 2 x Loop 3 (no condition on the inner one): exact\n");
    test_ob_run_free(&r);
}

/* then: x * 2, else: x - 1. cond an initializer (taken branch) or a graph input (Where). */
static struct sim_ob *
if_model(int cond)
{
    struct sim_ob *b = sim_ob_new(13), *t = sim_ob_new(13), *e = sim_ob_new(13);
    const float two = 2, one = 1;
    const uint8_t c = cond > 0;

    sim_ob_initializer(t, "two", F32, 0, NULL, &two);
    sim_ob_node(t, "Mul", "mul", "x,two", "a");
    sim_ob_output(t, "a", F32);
    sim_ob_node(e, "Constant", "one", "", "one");
    sim_ob_attr_tensor(e, "value", F32, 0, NULL, &one);
    sim_ob_node(e, "Sub", "sub", "x,one", "a");
    sim_ob_output(e, "a", F32);
    sim_ob_input(b, "x", F32, 1, DIMS(3));
    if (cond < 0)
        sim_ob_input(b, "c", BOOL, 0, NULL);
    else
        sim_ob_initializer(b, "c", BOOL, 0, NULL, &c);
    sim_ob_node(b, "If", "if", "c", "y");
    sim_ob_attr_graph(b, "then_branch", t);
    sim_ob_attr_graph(b, "else_branch", e);
    sim_ob_output(b, "y", F32);
    return b;
}

static void
test_if(void **state)
{
    const float x[3] = { 1, -2, 5 }, want_t[3] = { 2, -4, 10 }, want_e[3] = { 0, -3, 4 };

    (void)state;
    for (int k = 0; k < 4; k++) {
        int cond = k < 2 ? k : -1;
        uint8_t c = k == 3;
        const float *want = (k < 2 ? cond : c) ? want_t : want_e;
        struct sim_err err = { 0 };
        struct test_ob_run r = test_ob_compile(if_model(cond), &err);
        assert_non_null(r.e);
        feed(&r, "x", x, sizeof(x));
        if (cond < 0)
            feed(&r, "c", &c, 1);
        assert_int_equal(sim_exe_run(r.e, &err), 0);
        assert_memory_equal(sim_exe_output_buffer(r.e, 0), want, sizeof(want_t));
        printf("  If on %s %s: the %s branch, exact\n", cond < 0 ? "a graph input" :
               "an initializer", (k < 2 ? cond : c) ? "true" : "false",
               (k < 2 ? cond : c) ? "then" : "else");
        test_ob_run_free(&r);
    }
}

/* If on data: a condition of shape (1) gives outputs of the branches' shape (3); branches
 * of shapes (3) and (1), which Where would broadcast, are refused naming both. */
static void
test_if_shapes(void **state)
{
    const float x[3] = { 1, -2, 5 }, five = 5, want[3] = { 5, 5, 5 };
    const uint8_t no = 0;
    struct sim_err err = { 0 };
    struct sim_io_info info;
    struct test_ob_run r;
    struct sim_ob *b, *t, *e;

    (void)state;
    for (int k = 0; k < 2; k++) {
        b = sim_ob_new(13);
        t = sim_ob_new(13);
        e = sim_ob_new(13);
        sim_ob_node(t, "Identity", "id", "x", "a");
        sim_ob_output(t, "a", F32);
        sim_ob_initializer(e, "five", F32, 1, DIMS(1), &five);
        sim_ob_node(e, k == 0 ? "Expand" : "Identity", "ex", k == 0 ? "five,shape" : "five",
                    "a");
        sim_ob_output(e, "a", F32);
        sim_ob_input(b, "x", F32, 1, DIMS(3));
        sim_ob_input(b, "c", BOOL, 1, DIMS(1));
        sim_ob_initializer(b, "shape", I64, 1, DIMS(1), (const int64_t[]){ 3 });
        sim_ob_node(b, "If", "if", "c", "y");
        sim_ob_attr_graph(b, "then_branch", t);
        sim_ob_attr_graph(b, "else_branch", e);
        sim_ob_output(b, "y", F32);
        if (k == 1) {
            test_ob_expect_refused(b, IPUOF_E_SHAPE, "the then branch gives [3] and the else "
                                   "branch [1]");
            continue;
        }
        r = test_ob_compile(b, &err);
        assert_non_null(r.e);
        feed(&r, "x", x, sizeof(x));
        feed(&r, "c", &no, 1);
        assert_int_equal(sim_exe_run(r.e, &err), 0);
        assert_int_equal(sim_exe_output_info(r.e, 0, &info), 0);
        assert_int_equal(info.rank, 1);
        assert_memory_equal(sim_exe_output_buffer(r.e, 0), want, sizeof(want));
        printf("  If on a condition of shape (1): output (3), the else branch\n");
        test_ob_run_free(&r);
    }
}

/*
 * An If whose condition comes from shapes only, as the exporter's "squeeze dimension 0 when
 * it is 1" (nn.LocalResponseNorm): h = x * W, c = Shape(h)[0] == 1; then Squeeze(h, 0)
 * (inside an inner If on Shape(h)[1] == 3 whose else branch squeezes dimension 1 of size
 * 3, which would fail), else Identity(h). The branches differ in shape, which a Where on
 * data cannot select; the condition is known at compile time, so only the branch taken
 * is compiled: x (1, 3) gives (3), x (2, 3) gives (2, 3). Trained, loss = sum(y^2)
 * through the branch taken moves W by -lr * 2 x^2 W.
 */
static struct sim_ob *
shape_if_model(int64_t rows)
{
    static const float w[3] = { 0.5f, -1.0f, 2.0f };
    const int64_t zero = 0, one = 1, three = 3;
    struct sim_ob *b = sim_ob_new(13), *t = sim_ob_new(13), *e = sim_ob_new(13);
    struct sim_ob *tt = sim_ob_new(13), *te = sim_ob_new(13);

    sim_ob_input(b, "x", F32, 2, DIMS(rows, 3));
    sim_ob_initializer(b, "W", F32, 1, DIMS(3), w);
    sim_ob_initializer(b, "zero", I64, 0, NULL, &zero);
    sim_ob_initializer(b, "one", I64, 0, NULL, &one);
    sim_ob_initializer(b, "three", I64, 0, NULL, &three);
    sim_ob_initializer(b, "ax0", I64, 1, DIMS(1), &zero);
    sim_ob_initializer(b, "ax1", I64, 1, DIMS(1), &one);
    sim_ob_node(b, "Mul", "mul", "x,W", "h");
    sim_ob_node(b, "Shape", "shape", "h", "s");
    sim_ob_node(b, "Gather", "g0", "s,zero", "d0");
    sim_ob_node(b, "Equal", "eq", "d0,one", "c");
    /* then: an inner If on Shape(h)[1] == 3 (true) */
    sim_ob_node(t, "Gather", "g1", "s,one", "d1");
    sim_ob_node(t, "Equal", "eq3", "d1,three", "c3");
    sim_ob_node(t, "If", "inner", "c3", "a");
    sim_ob_node(tt, "Squeeze", "sq0", "h,ax0", "a0");
    sim_ob_output(tt, "a0", F32);
    sim_ob_node(te, "Squeeze", "sq1", "h,ax1", "a1");
    sim_ob_output(te, "a1", F32);
    sim_ob_attr_graph(t, "then_branch", tt);
    sim_ob_attr_graph(t, "else_branch", te);
    sim_ob_output(t, "a", F32);
    sim_ob_node(e, "Identity", "id", "h", "b");
    sim_ob_output(e, "b", F32);
    sim_ob_node(b, "If", "if", "c", "y");
    sim_ob_attr_graph(b, "then_branch", t);
    sim_ob_attr_graph(b, "else_branch", e);
    sim_ob_node(b, "Mul", "sq", "y,y", "y2");
    sim_ob_node(b, "ReduceSum", "sum", "y2", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "y", F32);
    sim_ob_output(b, "loss", F32);
    return b;
}

static void
test_if_shape_cond(void **state)
{
    const float x[6] = { 1, 2, -1, 0.5f, 3, -2 }, w[3] = { 0.5f, -1.0f, 2.0f }, lr = 0.05f;
    float got[3];

    (void)state;
    for (int rows = 1; rows <= 2; rows++) {
        struct sim_err err = { 0 };
        struct sim_io_info info;
        struct test_ob_run r = test_ob_compile(shape_if_model(rows), &err);
        const float *y;
        if (r.e == NULL)
            fail_msg("compile: %s", err.msg);
        feed(&r, "x", x, (size_t)rows * 3 * sizeof(float));
        assert_int_equal(sim_exe_run(r.e, &err), 0);
        assert_int_equal(sim_exe_output_info(r.e, 0, &info), 0);
        assert_int_equal(info.rank, rows == 1 ? 1 : 2);
        assert_int_equal(info.dims[info.rank - 1], 3);
        y = sim_exe_output_buffer(r.e, 0);
        for (int i = 0; i < rows * 3; i++)
            assert_true(y[i] == x[i] * w[i % 3]);
        printf("  If on Shape(h)[0] == 1 with x (%d, 3): output rank %d, the %s branch\n",
               rows, info.rank, rows == 1 ? "then (squeezed)" : "else");
        test_ob_run_free(&r);
    }
    {
        struct sim_model *m = test_ob_load(shape_if_model(1));
        struct sim_compile_opts o;
        struct sim_err err = { 0 };
        struct sim_exe *e = NULL;
        double maxd = 0;
        sim_compile_opts_init(&o);
        o.loss = "loss";
        o.optimizer.lr = lr;
        if (sim_compile(m, &o, &e, &err) != 0)
            fail_msg("compile: %s", err.msg);
        memcpy(sim_exe_input_buffer(e, 0), x, 3 * sizeof(float));
        assert_int_equal(sim_exe_run(e, &err), 0);
        assert_int_equal(sim_exe_read_weight(e, "W", got, sizeof(got), &err), 0);
        for (int i = 0; i < 3; i++) {
            double want = w[i] - lr * 2.0 * x[i] * x[i] * w[i];
            maxd = fmax(maxd, fabs(got[i] - want));
        }
        printf("  one SGD step through the branch taken: W max abs difference %.3g\n", maxd);
        assert_true(maxd < 1e-6);
        sim_exe_free(e);
        sim_model_free(m);
    }
}

/* loss = mean((W^3 x)^2) through a Loop of 3 MatMuls by W, or the same unrolled by hand;
 * both train 3 SGD steps and must give the same W and losses, bit for bit. */
static struct sim_ob *
train_model(bool loop)
{
    static const float w[4] = { 0.5f, -0.25f, 0.75f, 0.125f };
    struct sim_ob *b = sim_ob_new(13);
    const int64_t three = 3;
    const uint8_t yes = 1;

    sim_ob_input(b, "x", F32, 2, DIMS(2, 2));
    sim_ob_initializer(b, "W", F32, 2, DIMS(2, 2), w);
    if (loop) {
        struct sim_ob *g = sim_ob_new(13);
        sim_ob_input(g, "i", I64, 0, NULL);
        sim_ob_input(g, "c", BOOL, 0, NULL);
        sim_ob_input(g, "h_in", F32, 2, DIMS(2, 2));
        sim_ob_node(g, "MatMul", "mm", "h_in,W", "h");
        sim_ob_output(g, "c", BOOL);
        sim_ob_output(g, "h", F32);
        sim_ob_initializer(b, "M", I64, 0, NULL, &three);
        sim_ob_initializer(b, "cond", BOOL, 0, NULL, &yes);
        sim_ob_node(b, "Loop", "loop", "M,cond,x", "h3");
        sim_ob_attr_graph(b, "body", g);
    } else {
        sim_ob_node(b, "MatMul", "mm1", "x,W", "h1");
        sim_ob_node(b, "MatMul", "mm2", "h1,W", "h2");
        sim_ob_node(b, "MatMul", "mm3", "h2,W", "h3");
    }
    sim_ob_node(b, "Mul", "sq", "h3,h3", "sq");
    sim_ob_node(b, "ReduceMean", "mean", "sq", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    return b;
}

static void
test_loop_training(void **state)
{
    const float x[4] = { 1, 2, -1, 0.5f };
    float w[2][4], loss[2][3];

    (void)state;
    for (int v = 0; v < 2; v++) {
        struct sim_model *m = test_ob_load(train_model(v == 1));
        struct sim_compile_opts o;
        struct sim_err err = { 0 };
        struct sim_exe *e = NULL;
        sim_compile_opts_init(&o);
        o.loss = "loss";
        o.optimizer.lr = 0.05f;
        if (sim_compile(m, &o, &e, &err) != 0)
            fail_msg("compile: %s", err.msg);
        for (int s = 0; s < 3; s++) {
            memcpy(sim_exe_input_buffer(e, 0), x, sizeof(x));
            assert_int_equal(sim_exe_run(e, &err), 0);
            memcpy(&loss[v][s], sim_exe_output_buffer(e, 0), sizeof(float));
        }
        assert_int_equal(sim_exe_read_weight(e, "W", w[v], sizeof(w[v]), &err), 0);
        sim_exe_free(e);
        sim_model_free(m);
    }
    assert_memory_equal(w[0], w[1], sizeof(w[0]));
    assert_memory_equal(loss[0], loss[1], sizeof(loss[0]));
    assert_true(loss[0][2] < loss[0][0]);
    printf("  3 SGD steps through Loop(3 x MatMul W) = by hand, bit for bit: loss %.6f -> "
           "%.6f, W[0] %.6f\n", loss[0][0], loss[0][2], w[0][0]);
}

/* Loads b and expects the loader to refuse it with code and text. */
static void
expect_load_refused(struct sim_ob *b, int code, const char *text)
{
    void *bytes = NULL;
    size_t len = 0;
    struct sim_model *m = NULL;
    struct sim_err err = { 0 };

    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    sim_ob_free(b);
    assert_int_equal(sim_model_load(bytes, len, &m, &err), code);
    assert_null(m);
    free(bytes);
    printf("  refused: %s\n", err.msg);
    if (strstr(err.msg, text) == NULL)
        fail_msg("message lacks '%s'", text);
}

/* A branch giving x: Identity at depth 0, else an If on c of two such branches. */
static struct sim_ob *
nest(int depth)
{
    struct sim_ob *g = sim_ob_new(13);

    if (depth == 0) {
        sim_ob_node(g, "Identity", "id", "x", "a");
    } else {
        sim_ob_node(g, "If", "if", "c", "a");
        sim_ob_attr_graph(g, "then_branch", nest(depth - 1));
        sim_ob_attr_graph(g, "else_branch", nest(0));
    }
    sim_ob_output(g, "a", F32);
    return g;
}

/*
 * SplitToSequence + SequenceAt, made Slices at load: x (2, 7) split on axis 1 by a split
 * [3, 3, 1] computed by an Identity (so not known at load), pieces 0, 2, -1 and -3; and,
 * without a split, keepdims 0 on axis 0: piece 1 is row 1 as a (7). `variant` 1..4 are
 * the refusals: a SequenceLength reading the sequence, a position from a graph input, a
 * scalar split, the sequence as a graph output.
 */
static struct sim_ob *
seq_model(int variant)
{
    const int64_t split[3] = { 3, 3, 1 }, pos[4] = { 0, 2, -1, -3 }, one = 1, four = 4;
    struct sim_ob *b = sim_ob_new(13);
    char name[16], out[16];

    sim_ob_input(b, "x", F32, 2, DIMS(2, 7));
    if (variant == 3)
        sim_ob_initializer(b, "split0", I64, 0, NULL, &four);
    else
        sim_ob_initializer(b, "split0", I64, 1, DIMS(3), split);
    sim_ob_node(b, "Identity", "sz", "split0", "split");
    sim_ob_node(b, "SplitToSequence", "sts", variant == 3 ? "x,split0" : "x,split", "seq");
    sim_ob_attr_int(b, "axis", 1);
    sim_ob_node(b, "SplitToSequence", "rows", "x", "seq_rows");
    sim_ob_attr_int(b, "keepdims", 0);
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof(name), "p%d", i);
        sim_ob_initializer(b, name, I64, 0, NULL, &pos[i]);
        snprintf(out, sizeof(out), "y%d", i);
        snprintf(name, sizeof(name), "seq,p%d", i);
        sim_ob_node(b, "SequenceAt", out, name, out);
        sim_ob_output(b, out, F32);
    }
    sim_ob_initializer(b, "one", I64, 0, NULL, &one);
    if (variant == 2)
        sim_ob_input(b, "where", I64, 0, NULL);
    sim_ob_node(b, "SequenceAt", "row", variant == 2 ? "seq_rows,where" : "seq_rows,one",
                "row1");
    sim_ob_output(b, "row1", F32);
    if (variant == 1) {
        sim_ob_node(b, "SequenceLength", "len", "seq", "n");
        sim_ob_output(b, "n", I64);
    }
    if (variant == 4)
        sim_ob_output(b, "seq", F32);
    return b;
}

static void
test_split_to_sequence(void **state)
{
    static const int64_t lo[4] = { 0, 6, 6, 0 }, width[4] = { 3, 1, 1, 3 };
    static const char *const refused[5] = {
        NULL, "reads the sequence 'seq' of node 'sts' (SplitToSequence); only SequenceAt",
        "position 'where' is computed at run time",
        "a scalar split (equal pieces of that size) is not supported",
        "graph output 'seq' is a sequence" };
    float x[14];
    struct sim_err err = { 0 };
    struct sim_io_info info;
    struct test_ob_run r;

    (void)state;
    for (int i = 0; i < 14; i++)
        x[i] = (float)i * 0.5f - 3.0f;
    r = test_ob_compile(seq_model(0), &err);
    if (r.e == NULL)
        fail_msg("compile: %s", err.msg);
    feed(&r, "x", x, sizeof(x));
    assert_int_equal(sim_exe_run(r.e, &err), 0);
    for (int k = 0; k < 4; k++) {
        const float *y = sim_exe_output_buffer(r.e, (size_t)k);
        assert_int_equal(sim_exe_output_info(r.e, (size_t)k, &info), 0);
        assert_int_equal(info.rank, 2);
        assert_int_equal(info.dims[0], 2);
        assert_int_equal(info.dims[1], width[k]);
        for (int row = 0; row < 2; row++)
            for (int j = 0; j < width[k]; j++)
                assert_true(y[row * width[k] + j] == x[row * 7 + lo[k] + j]);
    }
    assert_int_equal(sim_exe_output_info(r.e, 4, &info), 0);
    assert_int_equal(info.rank, 1);
    assert_int_equal(info.dims[0], 7);
    assert_memory_equal(sim_exe_output_buffer(r.e, 4), x + 7, 7 * sizeof(float));
    printf("  SplitToSequence [3, 3, 1] on axis 1: pieces 0, 2, -1, -3 exact; without split, "
           "keepdims 0: row 1\n");
    test_ob_run_free(&r);
    for (int v = 1; v <= 4; v++)
        expect_load_refused(seq_model(v), IPUOF_E_UNSUPPORTED, refused[v]);
}

static void
test_refusals(void **state)
{
    const int64_t big = 1000000000, three = 3;
    struct sim_ob *b, *g;

    (void)state;
    /* the trip count a graph input */
    b = sim_ob_new(13);
    sim_ob_input(b, "y0", F32, 1, DIMS(2));
    sim_ob_input(b, "x", F32, 1, DIMS(2));
    sim_ob_input(b, "M", I64, 0, NULL);
    sim_ob_node(b, "Loop", "loop", "M,,y0", "y_final,scan");
    sim_ob_attr_graph(b, "body", add_body());
    sim_ob_output(b, "y_final", F32);
    expect_load_refused(b, IPUOF_E_UNSUPPORTED, "trip count 'M' is computed at run time");
    /* no trip count */
    b = sim_ob_new(13);
    sim_ob_input(b, "y0", F32, 1, DIMS(2));
    sim_ob_input(b, "x", F32, 1, DIMS(2));
    sim_ob_node(b, "Loop", "loop", ",,y0", "y_final,scan");
    sim_ob_attr_graph(b, "body", add_body());
    sim_ob_output(b, "y_final", F32);
    expect_load_refused(b, IPUOF_E_UNSUPPORTED, "node 'loop' (Loop) has no trip count");
    /* negative and huge trip counts */
    b = loop_model(13, -1, false);
    expect_load_refused(b, IPUOF_E_INVAL, "trip count -1 is negative");
    b = loop_model(13, big, false);
    expect_load_refused(b, IPUOF_E_TOO_LARGE, "use fewer iterations");
    /* a condition from data: y_in's first element > 5 */
    g = sim_ob_new(13);
    sim_ob_input(g, "i", I64, 0, NULL);
    sim_ob_input(g, "c", BOOL, 0, NULL);
    sim_ob_input(g, "y_in", F32, 0, NULL);
    sim_ob_node(g, "Neg", "neg", "y_in", "y");
    sim_ob_node(g, "Greater", "gt", "y,y_in", "c_out");
    sim_ob_output(g, "c_out", BOOL);
    sim_ob_output(g, "y", F32);
    b = sim_ob_new(13);
    sim_ob_input(b, "y0", F32, 0, NULL);
    sim_ob_initializer(b, "M", I64, 0, NULL, &three);
    sim_ob_node(b, "Loop", "loop", "M,,y0", "y_final");
    sim_ob_attr_graph(b, "body", g);
    sim_ob_output(b, "y_final", F32);
    expect_load_refused(b, IPUOF_E_UNSUPPORTED, "condition output 'c_out' is computed from "
                        "data");
    /* 3000 copies of a 60 000-character name: past the 128 MiB of names unrolling may make */
    {
        char *longname = malloc(60001);
        const int64_t trips = 3000;
        assert_non_null(longname);
        memset(longname, 'n', 60000);
        longname[60000] = '\0';
        g = sim_ob_new(13);
        sim_ob_input(g, "i", I64, 0, NULL);
        sim_ob_input(g, "c", BOOL, 0, NULL);
        sim_ob_input(g, "y_in", F32, 0, NULL);
        sim_ob_node_v(g, "Neg", "neg", (const char *const[]){ "y_in" }, 1,
                      (const char *const[]){ longname }, 1);
        sim_ob_output(g, "c", BOOL);
        sim_ob_output(g, longname, F32);
        b = sim_ob_new(13);
        sim_ob_input(b, "y0", F32, 0, NULL);
        sim_ob_initializer(b, "M", I64, 0, NULL, &trips);
        sim_ob_node(b, "Loop", "loop", "M,,y0", "y_final");
        sim_ob_attr_graph(b, "body", g);
        sim_ob_output(b, "y_final", F32);
        free(longname);
        expect_load_refused(b, IPUOF_E_TOO_LARGE, "unrolling node 'loop' (Loop) makes more "
                            "than 128 MiB of tensor and node names");
    }
    /* If inside If, 17 deep */
    b = sim_ob_new(13);
    sim_ob_input(b, "x", F32, 0, NULL);
    sim_ob_input(b, "c", BOOL, 0, NULL);
    sim_ob_node(b, "If", "top", "c", "a");
    sim_ob_attr_graph(b, "then_branch", nest(17));
    sim_ob_attr_graph(b, "else_branch", nest(0));
    sim_ob_output(b, "a", F32);
    expect_load_refused(b, IPUOF_E_TOO_LARGE, "nested more than 16 deep");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loop_unrolled),
        cmocka_unit_test(test_loop_zero_trips),
        cmocka_unit_test(test_loop_nested),
        cmocka_unit_test(test_if),
        cmocka_unit_test(test_if_shapes),
        cmocka_unit_test(test_if_shape_cond),
        cmocka_unit_test(test_loop_training),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_split_to_sequence),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
