/*
 * test_sim_buffer_update.c — ai.graphcore::BufferUpdate(buffer, value) -> value: a module
 * buffer forward() changes in place, carried from micro-batch to micro-batch and from run
 * to run, per replica; the loader orders it after every other reader of the buffer; what
 * it refuses (a computed buffer, an output that feeds a node, two updates of one buffer, a
 * dtype or shape that differs, a reader whose gradient rule would run after the update).
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
#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }

/* c (2) a buffer; per micro-batch: y = 2 c (before the update), c = c + x. The update node
 * comes first in the file, so only the loader's ordering makes y read the old value. */
static struct sim_ob *
counter(void)
{
    struct sim_ob *b = sim_ob_new(14);
    const float c0[2] = { 1, -1 }, two = 2;

    sim_ob_initializer(b, "c", F32, 1, DIMS(2), c0);
    sim_ob_initializer(b, "two", F32, 0, NULL, &two);
    sim_ob_input(b, "x", F32, 1, DIMS(2));
    sim_ob_node(b, "BufferUpdate", "upd", "c,n", "c_out");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_node(b, "Add", "add", "c,x", "n");
    sim_ob_node(b, "Mul", "twice", "c,two", "y");
    sim_ob_output(b, "y", F32);
    sim_ob_output(b, "c_out", F32);
    return b;
}

/* D = 3 device iterations, R = 2 replicas, two runs: replica r adds x = (r + 1, 10 (r + 1))
 * at every micro-batch, so its c after k micro-batches is c0 + k x, and y at micro-batch k
 * is 2 (c0 + (k - 1) x). Replica 0's buffer is what read_weight gives. */
static void
test_carried_per_replica(void **state)
{
    struct sim_model *m = test_ob_load(counter());
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err = { 0 };
    const unsigned D = 3, R = 2;
    float c[2];

    (void)state;
    sim_compile_opts_init(&o);
    o.device_iterations = D;
    o.replicas = R;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("compile: %s", err.msg);
    for (int run = 0; run < 2; run++) {
        float *x = sim_exe_input_buffer(e, 0);
        const float *y = sim_exe_output_buffer(e, (size_t)sim_exe_output_index(e, "y"));
        for (unsigned d = 0; d < D; d++)
            for (unsigned r = 0; r < R; r++) {
                x[(d * R + r) * 2] = (float)(r + 1);
                x[(d * R + r) * 2 + 1] = 10.0f * (float)(r + 1);
            }
        if (sim_exe_run(e, &err) != 0)
            fail_msg("run: %s", err.msg);
        for (unsigned d = 0; d < D; d++)
            for (unsigned r = 0; r < R; r++) {
                float k = (float)(run * D + d);        /* micro-batches before this one */
                assert_float_equal(y[(d * R + r) * 2], 2.0f * (1.0f + k * (float)(r + 1)), 0);
                assert_float_equal(y[(d * R + r) * 2 + 1],
                                   2.0f * (-1.0f + k * 10.0f * (float)(r + 1)), 0);
            }
    }
    assert_int_equal(sim_exe_read_weight(e, "c", c, sizeof c, &err), 0);
    assert_float_equal(c[0], 1.0f + 6.0f, 0);
    assert_float_equal(c[1], -1.0f + 60.0f, 0);
    printf("  BufferUpdate: 2 runs x %u iterations x %u replicas, each replica's buffer "
           "carried exactly; replica 0's read back (%g, %g)\n", D, R, c[0], c[1]);
    sim_exe_free(e);
    sim_model_free(m);
}

/* A training executable: w trains (loss = sum(w x)), the buffer s counts w's first element
 * each micro-batch (s = s + w[0], no gradient), with gradient accumulation 2 and 2 device
 * iterations: the optimizer step sits between the accumulation groups. */
static void
test_training_accumulation(void **state)
{
    struct sim_ob *b = sim_ob_new(14);
    const float w0[2] = { 1, 2 }, s0[1] = { 0 };
    const int64_t zero[1] = { 0 };
    struct sim_model *m;
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err = { 0 };
    float s, w[2], *x, want_s = 0, want_w0 = 1;

    (void)state;
    sim_ob_initializer(b, "w", F32, 1, DIMS(2), w0);
    sim_ob_initializer(b, "s", F32, 1, DIMS(1), s0);
    sim_ob_initializer(b, "i0", I64, 1, DIMS(1), zero);
    sim_ob_input(b, "x", F32, 1, DIMS(2));
    sim_ob_node(b, "Mul", "wx", "w,x", "p");
    sim_ob_node(b, "ReduceSum", "sum", "p", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_node(b, "Gather", "first", "w,i0", "w_0");
    sim_ob_node(b, "Add", "count", "s,w_0", "s_new");
    sim_ob_node(b, "BufferUpdate", "upd", "s,s_new", "s_out");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_output(b, "loss", F32);
    sim_ob_output(b, "s_out", F32);
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.device_iterations = 2;
    o.gradient_accumulation = 2;
    o.optimizer.lr = 0.5f;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("compile: %s", err.msg);
    x = sim_exe_input_buffer(e, 0);
    for (int i = 0; i < 4; i++) {
        x[i * 2] = 1.0f;
        x[i * 2 + 1] = 0.0f;
    }
    if (sim_exe_run(e, &err) != 0)
        fail_msg("run: %s", err.msg);
    /* mean reduction of d loss / d w0 = 1 over 2 steps: w0 -= 0.5 per device iteration */
    for (int d = 0; d < 2; d++) {
        for (int a = 0; a < 2; a++)
            want_s += want_w0;
        want_w0 -= 0.5f;
    }
    assert_int_equal(sim_exe_read_weight(e, "s", &s, sizeof s, &err), 0);
    assert_int_equal(sim_exe_read_weight(e, "w", w, sizeof w, &err), 0);
    assert_float_equal(w[0], want_w0, 1e-6);
    assert_float_equal(s, want_s, 1e-6);
    printf("  BufferUpdate in training (D=2, A=2): buffer %g (want %g), w[0] %g\n", s, want_s,
           w[0]);
    sim_exe_free(e);
    sim_model_free(m);
}

/* sim_model_load must refuse b with a message containing text. */
static void
expect_load_refused(struct sim_ob *b, const char *text)
{
    struct sim_model *m = NULL;
    struct sim_err err = { 0 };
    void *bytes;
    size_t len;

    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    sim_ob_free(b);
    assert_int_not_equal(sim_model_load(bytes, len, &m, &err), 0);
    free(bytes);
    printf("  refused at load: %s\n", err.msg);
    if (strstr(err.msg, text) == NULL)
        fail_msg("'%s' does not say '%s'", err.msg, text);
}

static void
test_refusals(void **state)
{
    const float c0[2] = { 0, 0 }, w0[2] = { 1, 1 };
    struct sim_ob *b;

    (void)state;
    /* the buffer is a computed value, not an initializer */
    b = sim_ob_new(14);
    sim_ob_input(b, "x", F32, 1, DIMS(2));
    sim_ob_node(b, "Neg", "neg", "x", "nx");
    sim_ob_node(b, "BufferUpdate", "upd", "nx,x", "y");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_output(b, "y", F32);
    test_ob_expect_refused(b, IPUOF_E_INVAL, "is not an initializer");
    /* shape differs */
    b = sim_ob_new(14);
    sim_ob_initializer(b, "c", F32, 1, DIMS(2), c0);
    sim_ob_input(b, "x", F32, 1, DIMS(1));
    sim_ob_node(b, "BufferUpdate", "upd", "c,x", "y");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_output(b, "y", F32);
    test_ob_expect_refused(b, IPUOF_E_SHAPE, "must have the buffer's dtype and shape");
    /* its output feeds a node */
    b = sim_ob_new(14);
    sim_ob_initializer(b, "c", F32, 1, DIMS(2), c0);
    sim_ob_input(b, "x", F32, 1, DIMS(2));
    sim_ob_node(b, "BufferUpdate", "upd", "c,x", "u");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_node(b, "Neg", "neg", "u", "y");
    sim_ob_output(b, "y", F32);
    expect_load_refused(b, "may only be a graph output");
    /* two updates of one buffer */
    b = sim_ob_new(14);
    sim_ob_initializer(b, "c", F32, 1, DIMS(2), c0);
    sim_ob_input(b, "x", F32, 1, DIMS(2));
    sim_ob_node(b, "BufferUpdate", "upd1", "c,x", "u1");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_node(b, "BufferUpdate", "upd2", "c,x", "u2");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_output(b, "u1", F32);
    sim_ob_output(b, "u2", F32);
    expect_load_refused(b, "has two updates");
    /* training: Mul(w, c) needs c in its gradient rule, which runs after the update */
    {
        struct sim_model *m;
        struct sim_compile_opts o;
        struct sim_exe *e = NULL;
        struct sim_err err = { 0 };
        b = sim_ob_new(14);
        sim_ob_initializer(b, "w", F32, 1, DIMS(2), w0);
        sim_ob_initializer(b, "c", F32, 1, DIMS(2), c0);
        sim_ob_input(b, "x", F32, 1, DIMS(2));
        sim_ob_node(b, "Mul", "wc", "w,c", "p");
        sim_ob_node(b, "ReduceSum", "sum", "p", "loss");
        sim_ob_attr_int(b, "keepdims", 0);
        sim_ob_node(b, "BufferUpdate", "upd", "c,x", "u");
        sim_ob_node_domain(b, "ai.graphcore");
        sim_ob_output(b, "loss", F32);
        sim_ob_output(b, "u", F32);
        m = test_ob_load(b);
        sim_compile_opts_init(&o);
        o.loss = "loss";
        assert_int_equal(sim_compile(m, &o, &e, &err), IPUOF_E_UNSUPPORTED);
        printf("  refused at compile: %s\n", err.msg);
        assert_non_null(strstr(err.msg, "its gradient rule would run after"));
        sim_model_free(m);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_carried_per_replica),
        cmocka_unit_test(test_training_accumulation),
        cmocka_unit_test(test_refusals),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
