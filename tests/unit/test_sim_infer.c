/*
 * test_sim_infer.c — shape inference: the shape of every intermediate of a CNN for a
 * chosen micro-batch, folding of a PyTorch-style Shape -> Gather -> Unsqueeze -> Concat ->
 * Reshape chain and of constant-only subgraphs, dead-code removal, and the shape and dtype
 * errors the compiler reports (naming the node and the shapes involved).
 * Not here: numerics of the ops (test_sim_ops.c).
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

static struct sim_exe *
compile_b(struct sim_model *m, unsigned batch)
{
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;

    sim_compile_opts_init(&o);
    o.micro_batch = batch;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("%s", err.msg);
    return e;
}

static void
expect(const struct sim_exe *e, const char *name, int dtype, int rank, int64_t d0, int64_t d1,
       int64_t d2, int64_t d3)
{
    int64_t want[4] = { d0, d1, d2, d3 }, dims[SIM_MAX_RANK];
    int dt, r;

    if (sim_exe_tensor_info(e, name, &dt, &r, dims) != 0)
        fail_msg("no tensor '%s'", name);
    assert_int_equal(dt, dtype);
    assert_int_equal(r, rank);
    for (int i = 0; i < rank; i++)
        if (dims[i] != want[i])
            fail_msg("'%s' dim %d is %lld, expected %lld", name, i, (long long)dims[i],
                     (long long)want[i]);
}

/* The MNIST CNN of the benchmark, flattened the way torch.onnx exports x.view(N, -1). */
static struct sim_model *
mnist_cnn(void)
{
    struct sim_ob *b = sim_ob_new(13);
    const int64_t dx[4] = { -1, 1, 28, 28 }, w1[4] = { 10, 1, 5, 5 }, w2[4] = { 20, 10, 5, 5 };
    const int64_t b1[1] = { 10 }, b2[1] = { 20 }, f1[2] = { 256, 320 }, f2[2] = { 10, 256 };
    const int64_t fb1[1] = { 256 }, fb2[1] = { 10 }, one[1] = { 1 }, k2[2] = { 2, 2 };
    const int64_t zero = 0, minus1[1] = { -1 }, ax0[1] = { 0 };
    float *z = calloc(256 * 320, sizeof(float));

    sim_ob_input(b, "x", F32, 4, dx);
    sim_ob_initializer(b, "w1", F32, 4, w1, z);
    sim_ob_initializer(b, "b1", F32, 1, b1, z);
    sim_ob_initializer(b, "w2", F32, 4, w2, z);
    sim_ob_initializer(b, "b2", F32, 1, b2, z);
    sim_ob_initializer(b, "f1", F32, 2, f1, z);
    sim_ob_initializer(b, "fb1", F32, 1, fb1, z);
    sim_ob_initializer(b, "f2", F32, 2, f2, z);
    sim_ob_initializer(b, "fb2", F32, 1, fb2, z);
    sim_ob_initializer(b, "zero", I64, 0, NULL, &zero);
    sim_ob_initializer(b, "minus1", I64, 1, one, minus1);
    sim_ob_initializer(b, "ax0", I64, 1, one, ax0);
    sim_ob_node(b, "Conv", "conv1", "x,w1,b1", "c1");
    sim_ob_node(b, "MaxPool", "pool1", "c1", "p1");
    sim_ob_attr_ints(b, "kernel_shape", k2, 2);
    sim_ob_attr_ints(b, "strides", k2, 2);
    sim_ob_node(b, "Relu", "relu1", "p1", "r1");
    sim_ob_node(b, "Conv", "conv2", "r1,w2,b2", "c2");
    sim_ob_node(b, "MaxPool", "pool2", "c2", "p2");
    sim_ob_attr_ints(b, "kernel_shape", k2, 2);
    sim_ob_attr_ints(b, "strides", k2, 2);
    sim_ob_node(b, "Relu", "relu2", "p2", "r2");
    sim_ob_node(b, "Shape", "shape", "r2", "s");
    sim_ob_node(b, "Gather", "batch", "s,zero", "n");
    sim_ob_node(b, "Unsqueeze", "unsq", "n,ax0", "n1");
    sim_ob_node(b, "Concat", "cat", "n1,minus1", "shp");
    sim_ob_attr_int(b, "axis", 0);
    sim_ob_node(b, "Reshape", "view", "r2,shp", "flat");
    sim_ob_node(b, "Gemm", "fc1", "flat,f1,fb1", "h");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "Relu", "relu3", "h", "hr");
    sim_ob_node(b, "Gemm", "fc2", "hr,f2,fb2", "y");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "Identity", "unused", "hr", "dead");
    sim_ob_output(b, "y", F32);
    free(z);
    return test_ob_load(b);
}

static void
test_cnn_shapes(void **state)
{
    struct sim_model *m = mnist_cnn();
    struct sim_exe *e = compile_b(m, 7);

    (void)state;
    expect(e, "c1", F32, 4, 7, 10, 24, 24);
    expect(e, "p1", F32, 4, 7, 10, 12, 12);
    expect(e, "c2", F32, 4, 7, 20, 8, 8);
    expect(e, "r2", F32, 4, 7, 20, 4, 4);
    expect(e, "s", I64, 1, 4, 0, 0, 0);
    expect(e, "n", I64, 0, 0, 0, 0, 0);
    expect(e, "shp", I64, 1, 2, 0, 0, 0);
    expect(e, "flat", F32, 2, 7, 320, 0, 0);
    expect(e, "h", F32, 2, 7, 256, 0, 0);
    expect(e, "y", F32, 2, 7, 10, 0, 0);
    /* 16 nodes: Shape/Gather/Unsqueeze/Concat fold away, the unused Identity is dropped */
    printf("  MNIST CNN at micro-batch 7: 16 nodes in the model, %zu run per step\n",
           sim_exe_node_count(e));
    assert_int_equal(sim_exe_node_count(e), 10);
    assert_int_equal(sim_exe_tensor_info(e, "dead", &(int){ 0 }, &(int){ 0 },
                                         (int64_t[SIM_MAX_RANK]){ 0 }), IPUOF_E_NOTFOUND);
    assert_int_equal(sim_exe_tensor_info(e, "nope", &(int){ 0 }, &(int){ 0 },
                                         (int64_t[SIM_MAX_RANK]){ 0 }), IPUOF_E_NOTFOUND);
    sim_exe_free(e);
    e = compile_b(m, 1000);
    expect(e, "flat", F32, 2, 1000, 320, 0, 0);
    sim_exe_free(e);
    sim_model_free(m);
}

static void
test_constant_subgraph(void **state)
{
    struct sim_ob *b = sim_ob_new(13);
    const int64_t d[1] = { 3 };
    const float a[3] = { 1, 2, 3 }, c[3] = { 10, 20, 30 }, xv[3] = { 1, 1, 2 };
    struct sim_model *m;
    struct sim_exe *e;
    struct sim_err err;
    const float *y;

    (void)state;
    sim_ob_input(b, "x", F32, 1, d);
    sim_ob_initializer(b, "a", F32, 1, d, a);
    sim_ob_initializer(b, "c", F32, 1, d, c);
    sim_ob_node(b, "Add", "", "a,c", "ac");
    sim_ob_node(b, "Sqrt", "", "ac", "s");
    sim_ob_node(b, "Mul", "", "x,s", "y");
    sim_ob_output(b, "y", F32);
    m = test_ob_load(b);
    e = compile_b(m, 0);
    assert_int_equal(sim_exe_node_count(e), 1);
    memcpy(sim_exe_input_buffer(e, 0), xv, sizeof(xv));
    assert_int_equal(sim_exe_run(e, &err), 0);
    y = sim_exe_output_buffer(e, 0);
    assert_true(y[0] == sqrtf(11) && y[1] == sqrtf(22) && y[2] == 2 * sqrtf(33));
    printf("  Sqrt(a + c) folded at compile time: 1 node left\n");
    sim_exe_free(e);
    sim_model_free(m);
}

static void
shape_error(const char *op, int da_rank, const int64_t *da, int dtype_b, int db_rank,
            const int64_t *db, int want_code, const char *want_text)
{
    struct sim_ob *b = sim_ob_new(13);
    struct sim_model *m;
    struct sim_exe *e = NULL;
    struct sim_compile_opts o;
    struct sim_err err;

    sim_ob_input(b, "a", F32, da_rank, da);
    sim_ob_input(b, "b", dtype_b, db_rank, db);
    sim_ob_node(b, op, "bad", "a,b", "y");
    sim_ob_output(b, "y", 0);
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    assert_int_equal(sim_compile(m, &o, &e, &err), want_code);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "'bad'"));
    assert_non_null(strstr(err.msg, want_text));
    assert_null(e);
    sim_model_free(m);
}

static void
test_errors(void **state)
{
    const int64_t d23[2] = { 2, 3 }, d43[2] = { 4, 3 }, d3[1] = { 3 }, d4[1] = { 4 };

    (void)state;
    shape_error("MatMul", 2, d23, F32, 2, d43, IPUOF_E_SHAPE, "[2, 3] x [4, 3]");
    shape_error("Add", 1, d3, F32, 1, d4, IPUOF_E_SHAPE, "[3] and [4] do not broadcast");
    shape_error("Add", 1, d3, I64, 1, d3, IPUOF_E_DTYPE, "float and int64");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cnn_shapes),
        cmocka_unit_test(test_constant_subgraph),
        cmocka_unit_test(test_errors),
    };

    return cmocka_run_group_tests_name("sim_infer", tests, NULL, NULL);
}
