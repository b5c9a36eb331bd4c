/*
 * test_sim_ops_more.c — the ops of the everyday PyTorch layers beyond what their ONNX node
 * tests show: hand-computed edge cases (integer Mod by 0 and by -1, Where broadcasting three
 * shapes, ScatterND's negative indices, Pad's reflection past the edge, ArgMax's ties),
 * compile-time folding of comparisons, Where, Range, ConstantOfShape and Expand into a
 * shape, and the errors bad input gets (at compile time, and at run time for ScatterND
 * indices), each of which must say what was wrong.
 *
 * Every case builds a small ONNX model with sim/onnx/onnx_build.h, compiles and runs it once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define I64 SIM_DTYPE_INT64
#define I32 SIM_DTYPE_INT32
#define BOOL SIM_DTYPE_BOOL
#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }

static void
test_mod_integers(void **state)
{
    const int64_t x[6] = { 7, -7, 7, -7, INT64_MIN, 5 }, y[6] = { 3, 3, -3, 0, -1, 0 };
    const int64_t want0[6] = { 1, 2, -2, 0, 0, 0 }, want1[6] = { 1, -1, 1, 0, 0, 0 };
    struct sim_ob *b;
    struct test_ob_run r;

    (void)state;
    for (int fm = 0; fm < 2; fm++) {
        b = sim_ob_new(13);
        sim_ob_initializer(b, "x", I64, 1, DIMS(6), x);
        sim_ob_initializer(b, "y", I64, 1, DIMS(6), y);
        sim_ob_node(b, "Mod", "m", "x,y", "z");
        sim_ob_attr_int(b, "fmod", fm);
        sim_ob_output(b, "z", I64);
        r = test_ob_run_ok(b);
        assert_memory_equal(sim_exe_output_buffer(r.e, 0), fm ? want1 : want0, sizeof(want0));
        printf("  Mod fmod=%d on int64 (by 0 and MIN %% -1 give 0): exact\n", fm);
        test_ob_run_free(&r);
    }
}

/* Copies data into the run buffer of input name. */
static void
feed(struct test_ob_run *r, const char *name, const void *data, size_t bytes)
{
    long k = sim_exe_input_index(r->e, name);

    assert_true(k >= 0);
    memcpy(sim_exe_input_buffer(r->e, (size_t)k), data, bytes);
}

static void
test_where_broadcast(void **state)
{
    const uint8_t c[3] = { 1, 0, 1 };
    const float x[2] = { 10, 20 }, y[3] = { -1, -2, -3 };
    const float want[6] = { 10, -2, 10, 20, -2, 20 };
    struct sim_ob *b = sim_ob_new(16);
    struct sim_err err = { 0 };
    struct test_ob_run r;

    (void)state;
    sim_ob_input(b, "c", BOOL, 1, DIMS(3));
    sim_ob_input(b, "x", F32, 2, DIMS(2, 1));
    sim_ob_input(b, "y", F32, 2, DIMS(1, 3));
    sim_ob_node(b, "Where", "w", "c,x,y", "z");
    sim_ob_output(b, "z", F32);
    r = test_ob_compile(b, &err);
    assert_non_null(r.e);
    feed(&r, "c", c, sizeof(c));
    feed(&r, "x", x, sizeof(x));
    feed(&r, "y", y, sizeof(y));
    assert_int_equal(sim_exe_run(r.e, &err), 0);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want, sizeof(want));
    printf("  Where (3) x (2, 1) x (1, 3) -> (2, 3): exact\n");
    test_ob_run_free(&r);
}

/* Shape -> Gather -> Greater -> Where pick Reshape's shape; Range, ConstantOfShape and Concat
 * make Expand's: everything but Reshape and Expand folds at compile time. */
static void
test_folding(void **state)
{
    const int64_t one = 1, four = 4, c1[2] = { 3, 4 }, c2[2] = { 12, 1 }, n1[1] = { 1 };
    const int64_t r2 = 2, r3 = 3, three = 3;
    const float v[3] = { 5, 6, 7 }, want_e[6] = { 5, 6, 7, 5, 6, 7 };
    float x[12];
    struct sim_ob *b = sim_ob_new(13);
    struct sim_err err = { 0 };
    struct sim_io_info info;
    struct test_ob_run r;

    (void)state;
    for (int i = 0; i < 12; i++)
        x[i] = (float)i;
    sim_ob_input(b, "x", F32, 2, DIMS(2, 6));
    sim_ob_input(b, "v", F32, 1, DIMS(3));
    sim_ob_initializer(b, "one", I64, 0, NULL, &one);
    sim_ob_initializer(b, "four", I64, 0, NULL, &four);
    sim_ob_initializer(b, "c1", I64, 1, DIMS(2), c1);
    sim_ob_initializer(b, "c2", I64, 1, DIMS(2), c2);
    sim_ob_initializer(b, "n1", I64, 1, DIMS(1), n1);
    sim_ob_initializer(b, "r2", I64, 0, NULL, &r2);
    sim_ob_initializer(b, "r3", I64, 0, NULL, &r3);
    sim_ob_node(b, "Shape", "s", "x", "shp");
    sim_ob_node(b, "Gather", "g", "shp,one", "d");
    sim_ob_node(b, "Greater", "gt", "d,four", "big");
    sim_ob_node(b, "Where", "w", "big,c1,c2", "target");
    sim_ob_node(b, "Reshape", "rs", "x,target", "xr");
    sim_ob_node(b, "Range", "rg", "r2,r3,one", "lead");         /* [2] */
    sim_ob_node(b, "ConstantOfShape", "cs", "n1", "tail");      /* [3] */
    sim_ob_attr_tensor(b, "value", I64, 1, DIMS(1), &three);
    sim_ob_node(b, "Concat", "cc", "lead,tail", "eshape");      /* [2, 3] */
    sim_ob_attr_int(b, "axis", 0);
    sim_ob_node(b, "Expand", "ex", "v,eshape", "ve");
    sim_ob_output(b, "xr", F32);
    sim_ob_output(b, "ve", F32);
    r = test_ob_compile(b, &err);
    if (r.e == NULL)
        fail_msg("compile: %s", err.msg);
    feed(&r, "x", x, sizeof(x));
    feed(&r, "v", v, sizeof(v));
    assert_int_equal(sim_exe_run(r.e, &err), 0);
    assert_int_equal(sim_exe_output_info(r.e, 0, &info), 0);
    assert_int_equal(info.rank, 2);
    assert_int_equal(info.dims[0], 3);
    assert_int_equal(info.dims[1], 4);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), x, sizeof(x));
    assert_memory_equal(sim_exe_output_buffer(r.e, 1), want_e, sizeof(want_e));
    printf("  shapes chosen at compile time: Reshape to (3, 4), Expand to (2, 3); %zu "
           "node(s) run\n", sim_exe_node_count(r.e));
    assert_true(sim_exe_node_count(r.e) <= 2);
    test_ob_run_free(&r);
}

/* An index out of range is a run-time error naming it; a negative one counts from the end. */
static void
test_scatternd_indices(void **state)
{
    const float data[4] = { 1, 2, 3, 4 }, upd[1] = { 9 }, want[4] = { 9, 2, 3, 4 };
    const int64_t bad[1] = { 4 }, neg[1] = { -4 };
    struct sim_ob *b = sim_ob_new(16);
    struct sim_err err = { 0 };
    struct test_ob_run r;

    (void)state;
    sim_ob_initializer(b, "data", F32, 1, DIMS(4), data);
    sim_ob_input(b, "idx", I64, 2, DIMS(1, 1));
    sim_ob_initializer(b, "upd", F32, 1, DIMS(1), upd);
    sim_ob_node(b, "ScatterND", "sc", "data,idx,upd", "y");
    sim_ob_output(b, "y", F32);
    r = test_ob_compile(b, &err);
    assert_non_null(r.e);
    feed(&r, "idx", bad, sizeof(bad));
    assert_int_equal(sim_exe_run(r.e, &err), IPUOF_E_INVAL);
    printf("  run refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "index 4 of tuple 0 is out of range"));
    feed(&r, "idx", neg, sizeof(neg));
    assert_int_equal(sim_exe_run(r.e, &err), 0);
    assert_memory_equal(sim_exe_output_buffer(r.e, 0), want, sizeof(want));
    test_ob_run_free(&r);
}

/* Pad reflecting past the edge (numpy's 'reflect' repeats the mirror); ArgMax ties. */
static void
test_pad_argmax(void **state)
{
    const float x[3] = { 1, 2, 3 }, t[4] = { 1, 3, 3, 0 };
    const float want_r[9] = { 2, 3, 2, 1, 2, 3, 2, 1, 2 }, want_e[8] = { 1, 1, 1, 1, 1, 2, 3, 3 };
    const int64_t pr[2] = { 3, 3 }, pe[2] = { 4, 1 }, first[1] = { 1 }, last[1] = { 2 };
    struct sim_ob *b;
    struct test_ob_run r;

    (void)state;
    for (int m = 0; m < 2; m++) {
        b = sim_ob_new(13);
        sim_ob_initializer(b, "x", F32, 1, DIMS(3), x);
        sim_ob_initializer(b, "p", I64, 1, DIMS(2), m ? pe : pr);
        sim_ob_node(b, "Pad", "pad", "x,p", "y");
        sim_ob_attr_str(b, "mode", m ? "edge" : "reflect");
        sim_ob_output(b, "y", F32);
        r = test_ob_run_ok(b);
        assert_memory_equal(sim_exe_output_buffer(r.e, 0), m ? want_e : want_r,
                            m ? sizeof(want_e) : sizeof(want_r));
        printf("  Pad %s: exact\n", m ? "edge (4, 1)" : "reflect 3 each side of 3");
        test_ob_run_free(&r);
    }
    for (int l = 0; l < 2; l++) {
        b = sim_ob_new(13);
        sim_ob_initializer(b, "t", F32, 1, DIMS(4), t);
        sim_ob_node(b, "ArgMax", "am", "t", "y");
        sim_ob_attr_int(b, "select_last_index", l);
        sim_ob_output(b, "y", I64);
        r = test_ob_run_ok(b);
        assert_memory_equal(sim_exe_output_buffer(r.e, 0), l ? last : first, sizeof(first));
        test_ob_run_free(&r);
    }
    printf("  ArgMax of a tie: the first, or the last with select_last_index\n");
}

/* A one-node model of op at opset with float input x (rank 2, (2, 3)) and more inputs. */
static struct sim_ob *
one_node(const char *op, int opset, const char *ins, int n_out)
{
    struct sim_ob *b = sim_ob_new(opset);
    const char *outs = n_out == 1 ? "y" : "y,z";

    sim_ob_input(b, "x", F32, 2, DIMS(2, 3));
    sim_ob_node(b, op, "n", ins, outs);
    sim_ob_output(b, "y", 0);
    if (n_out > 1)
        sim_ob_output(b, "z", 0);
    return b;
}

static void
test_refusals(void **state)
{
    const int64_t p3[3] = { 1, 1, 1 }, p4[4] = { 0, 1, 0, 1 }, s2[2] = { 1, 1 }, sh[1] = { 2 };
    const int64_t idx[2] = { 0, 1 };
    const float f0 = 0.0f, f1 = 1.0f;
    const uint8_t c[1] = { 1 };
    const int32_t i1[1] = { 1 };
    struct sim_ob *b;

    (void)state;
    b = one_node("Pad", 13, "x,p", 1);
    sim_ob_initializer(b, "p", I64, 1, DIMS(3), p3);
    test_ob_expect_refused(b, IPUOF_E_SHAPE, "pads has 3 values; the input of rank 2 needs 4");
    b = one_node("Pad", 13, "x,p", 1);
    sim_ob_initializer(b, "p", I64, 1, DIMS(4), p4);
    sim_ob_attr_str(b, "mode", "wrap");
    test_ob_expect_refused(b, IPUOF_E_UNSUPPORTED,
                           "mode 'wrap' is not one of constant, reflect, edge");
    b = one_node("Split", 13, "x,s", 2);
    sim_ob_initializer(b, "s", I64, 1, DIMS(2), s2);
    sim_ob_attr_int(b, "axis", 1);
    test_ob_expect_refused(b, IPUOF_E_SHAPE, "split sizes add up to 2, not dim 1's 3");
    b = one_node("Split", 13, "x", 2);
    sim_ob_attr_int(b, "axis", 1);
    test_ob_expect_refused(b, IPUOF_E_SHAPE, "does not split into 2 equal parts");
    b = one_node("Expand", 13, "x,s", 1);
    sim_ob_initializer(b, "s", I64, 1, DIMS(1), sh);
    test_ob_expect_refused(b, IPUOF_E_SHAPE, "does not broadcast to shape [2]");
    b = one_node("Range", 13, "a,b,d", 1);
    sim_ob_initializer(b, "a", F32, 0, NULL, &f0);
    sim_ob_initializer(b, "b", F32, 0, NULL, &f1);
    sim_ob_initializer(b, "d", F32, 0, NULL, &f0);
    test_ob_expect_refused(b, IPUOF_E_INVAL, "delta is 0");
    b = one_node("Mod", 13, "x,x", 1);
    test_ob_expect_refused(b, IPUOF_E_INVAL, "float inputs need fmod = 1");
    b = one_node("Where", 16, "c,x,i", 1);
    sim_ob_initializer(b, "c", BOOL, 1, DIMS(1), c);
    sim_ob_initializer(b, "i", I32, 1, DIMS(1), i1);
    test_ob_expect_refused(b, IPUOF_E_DTYPE, "x and y have different dtypes (float and int32)");
    b = one_node("And", 13, "x,x", 1);
    test_ob_expect_refused(b, IPUOF_E_DTYPE, "input 0 has dtype float; supported: bool");
    b = one_node("ArgMax", 13, "x", 1);
    sim_ob_attr_int(b, "axis", 2);
    test_ob_expect_refused(b, IPUOF_E_SHAPE, "axis 2 is out of range for rank 2");
    b = one_node("ScatterND", 16, "x,i,x", 1);
    sim_ob_initializer(b, "i", I64, 2, DIMS(1, 2), idx);
    test_ob_expect_refused(b, IPUOF_E_SHAPE,
                           "updates have shape [2, 3]; indices and data ask for [1]");
    /* The scatters' reduction: a name they do not know, or a sum or product of bools. */
    b = one_node("ScatterElements", 16, "x,i,x", 1);
    sim_ob_initializer(b, "i", I64, 2, DIMS(2, 3), (const int64_t[]){0, 1, 0, 1, 0, 1});
    sim_ob_attr_str(b, "reduction", "max");
    test_ob_expect_refused(b, IPUOF_E_UNSUPPORTED,
                           "reduction 'max' (none, add and mul are supported)");
    b = sim_ob_new(16);
    sim_ob_input(b, "m", BOOL, 2, DIMS(2, 3));
    sim_ob_initializer(b, "i", I64, 2, DIMS(1, 1), (const int64_t[]){1});
    sim_ob_initializer(b, "u", BOOL, 2, DIMS(1, 3), (const uint8_t[]){1, 0, 1});
    sim_ob_node(b, "ScatterND", "n", "m,i,u", "y");
    sim_ob_attr_str(b, "reduction", "add");
    sim_ob_output(b, "y", 0);
    test_ob_expect_refused(b, IPUOF_E_DTYPE, "reduction 'add' on bool data");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mod_integers),
        cmocka_unit_test(test_where_broadcast),
        cmocka_unit_test(test_folding),
        cmocka_unit_test(test_scatternd_indices),
        cmocka_unit_test(test_pad_argmax),
        cmocka_unit_test(test_refusals),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
