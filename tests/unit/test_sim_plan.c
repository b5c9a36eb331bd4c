/*
 * test_sim_plan.c — the static memory plan: liveness-based reuse of the arena, results
 * unchanged by reuse (a graph with long-lived skip connections), the fit check and its
 * error, per-IPU figures when nodes carry __ipu_number, the code-size estimate, and views
 * (Reshape, Transpose) taking no memory of their own in the IPU figure.
 * Not here: the arena offsets themselves, which are internal; reuse is checked through
 * the reported sizes and through results that would break if live tensors overlapped.
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
#define MIB ((uint64_t)1 << 20)

/* x (256, 1024) -> n Relus in a chain -> y: every tensor is 1 MiB. */
static struct sim_model *
chain(int n)
{
    struct sim_ob *b = sim_ob_new(13);
    const int64_t dx[2] = { 256, 1024 };
    char in[16], out[16];

    sim_ob_input(b, "x", F32, 2, dx);
    for (int i = 0; i < n; i++) {
        snprintf(in, sizeof(in), i == 0 ? "x" : "t%d", i);
        snprintf(out, sizeof(out), i == n - 1 ? "y" : "t%d", i + 1);
        sim_ob_node(b, "Relu", "", in, out);
    }
    sim_ob_output(b, "y", F32);
    return test_ob_load(b);
}

static int
compile_cap(struct sim_model *m, uint64_t cap, struct sim_exe **e, struct sim_err *err)
{
    struct sim_compile_opts o;

    sim_compile_opts_init(&o);
    o.ipu_memory_bytes = cap;
    return sim_compile(m, &o, e, err);
}

static void
test_liveness_reuse(void **state)
{
    struct sim_model *m = chain(10);
    struct sim_exe *e = NULL;
    struct sim_mem_report r;
    struct sim_err err;
    uint64_t arena;

    (void)state;
    assert_int_equal(compile_cap(m, 0, &e, &err), 0);
    assert_int_equal(sim_exe_memory(e, 0, &r), 0);
    arena = r.activations - 2 * MIB;   /* minus one step of the x and y streams */
    printf("  10 Relus over 1 MiB tensors: arena %llu bytes for 9 intermediates "
           "(%.1f tensors; no reuse would need 9)\n", (unsigned long long)arena,
           (double)arena / (double)MIB);
    assert_true(arena >= 2 * MIB);
    assert_true(arena <= 2 * MIB + 1024);
    assert_int_equal(r.code, SIM_CODE_BASE_BYTES + 10 * 3072);
    assert_int_equal(r.weights, 0);
    sim_exe_free(e);
    sim_model_free(m);
}

/*
 * x -> a = Relu(x) -> b = Neg(a) -> c = Relu(b) -> d = Add(a, c) -> e = Neg(d)
 *   -> f = Add(e, b) -> y: a and b stay live across later steps while others come and go.
 */
static void
test_reuse_keeps_values(void **state)
{
    struct sim_ob *b = sim_ob_new(13);
    const int64_t dx[1] = { 4096 };
    struct sim_model *m;
    struct sim_exe *e = NULL;
    struct sim_err err;
    float *x;
    const float *y;
    double md = 0;

    (void)state;
    sim_ob_input(b, "x", F32, 1, dx);
    sim_ob_node(b, "Relu", "", "x", "a");
    sim_ob_node(b, "Neg", "", "a", "b");
    sim_ob_node(b, "Relu", "", "b", "c");
    sim_ob_node(b, "Add", "", "a,c", "d");
    sim_ob_node(b, "Neg", "", "d", "e");
    sim_ob_node(b, "Add", "", "e,b", "y");
    sim_ob_output(b, "y", F32);
    m = test_ob_load(b);
    assert_int_equal(compile_cap(m, 0, &e, &err), 0);
    x = sim_exe_input_buffer(e, 0);
    for (int i = 0; i < 4096; i++)
        x[i] = (float)(i % 13) - 6.0f;
    assert_int_equal(sim_exe_run(e, &err), 0);
    y = sim_exe_output_buffer(e, 0);
    for (int i = 0; i < 4096; i++) {
        float a = x[i] > 0 ? x[i] : 0, nb = -a, c = nb > 0 ? nb : 0;
        float want = -(a + c) + nb;
        if (fabs(y[i] - want) > md)
            md = fabs(y[i] - want);
    }
    printf("  skip connections through a reused arena: max |diff| = %.3g\n", md);
    assert_true(md == 0);
    sim_exe_free(e);
    sim_model_free(m);
}

static void
test_fit_check(void **state)
{
    struct sim_model *m = chain(10);
    struct sim_exe *e = NULL;
    struct sim_mem_report r;
    struct sim_err err;
    uint64_t need;

    (void)state;
    assert_int_equal(compile_cap(m, 0, &e, &err), 0);
    sim_exe_memory(e, 0, &r);
    need = r.total;
    sim_exe_free(e);
    e = NULL;
    assert_int_equal(compile_cap(m, need - 1, &e, &err), IPUOF_E_DEVICE_OOM);
    assert_null(e);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "IPU 0"));
    assert_non_null(strstr(err.msg, "available"));
    assert_non_null(strstr(err.msg, "micro-batch"));
    {
        char num[32];
        snprintf(num, sizeof(num), "needs %llu bytes", (unsigned long long)need);
        assert_non_null(strstr(err.msg, num));
        snprintf(num, sizeof(num), "has %llu bytes", (unsigned long long)(need - 1));
        assert_non_null(strstr(err.msg, num));
    }
    assert_int_equal(compile_cap(m, need, &e, &err), 0);
    sim_exe_free(e);
    sim_model_free(m);
}

/* Two MatMuls, one per IPU: each IPU holds its own weights. */
static void
test_placement(void **state)
{
    struct sim_ob *b = sim_ob_new(13);
    const int64_t dx[2] = { 8, 64 }, dw1[2] = { 64, 128 }, dw2[2] = { 128, 16 };
    float *w1 = calloc(64 * 128, 4), *w2 = calloc(128 * 16, 4);
    struct sim_compile_opts o;
    struct sim_model *m;
    struct sim_exe *e = NULL;
    struct sim_mem_report r[4];
    struct sim_err err;

    (void)state;
    sim_ob_input(b, "x", F32, 2, dx);
    sim_ob_initializer(b, "w1", F32, 2, dw1, w1);
    sim_ob_initializer(b, "w2", F32, 2, dw2, w2);
    sim_ob_node(b, "MatMul", "fc1", "x,w1", "h");
    sim_ob_attr_int(b, "__ipu_number", 0);
    sim_ob_node(b, "MatMul", "fc2", "h,w2", "y");
    sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_attr_int(b, "__pipeline_stage", 1);
    sim_ob_output(b, "y", F32);
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    o.replicas = 2;
    assert_int_equal(sim_compile(m, &o, &e, &err), 0);
    assert_int_equal(sim_exe_ipu_count(e), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(sim_exe_memory(e, (size_t)i, &r[i]), 0);
    printf("  IPU 0: weights %llu; IPU 1: weights %llu; replica 1 on IPUs 2-3\n",
           (unsigned long long)r[0].weights, (unsigned long long)r[1].weights);
    assert_int_equal(r[0].weights, 64 * 128 * 4);
    assert_int_equal(r[1].weights, 128 * 16 * 4);
    assert_int_equal(r[2].weights, r[0].weights);
    assert_int_equal(r[3].replica, 1);
    assert_int_equal(r[3].ipu, 3);
    sim_exe_free(e);
    sim_model_free(m);
    free(w1);
    free(w2);
}

/* x (256, 1024) -> t1 = Relu(x) -> t2 = Reshape(t1) (1024, 256) -> t3 = Transpose(t2)
 * (256, 1024) -> y = (view ? Relu : Neg)(t3): the IPU aliases a reshape and a transpose
 * (SIM_OPF_VIEW), so t2 and t3 take no memory of their own and t1 lives until y's step
 * instead; with Neg in place of the Reshape and the Transpose (copies) each step holds its
 * input and output. */
static struct sim_model *
views(bool view)
{
    struct sim_ob *b = sim_ob_new(13);
    const int64_t dx[2] = { 256, 1024 }, shape[2] = { 1024, 256 }, perm[2] = { 1, 0 };

    sim_ob_input(b, "x", F32, 2, dx);
    sim_ob_initializer(b, "shape", SIM_DTYPE_INT64, 1, (const int64_t[]){ 2 }, shape);
    sim_ob_node(b, "Relu", "", "x", "t1");
    if (view) {
        sim_ob_node(b, "Reshape", "", "t1,shape", "t2");
        sim_ob_node(b, "Transpose", "", "t2", "t3");
        sim_ob_attr_ints(b, "perm", perm, 2);
    } else {
        sim_ob_node(b, "Neg", "", "t1", "t2");
        sim_ob_node(b, "Neg", "", "t2", "t3");
    }
    sim_ob_node(b, "Relu", "", "t3", "y");
    sim_ob_output(b, "y", F32);
    return test_ob_load(b);
}

static void
test_views_alias(void **state)
{
    uint64_t arena[2];

    (void)state;
    for (int view = 0; view < 2; view++) {
        struct sim_model *m = views(view != 0);
        struct sim_exe *e = NULL;
        struct sim_mem_report r;
        struct sim_err err;
        float *x = malloc(256 * 1024 * sizeof(float));
        const float *y;
        assert_non_null(x);
        assert_int_equal(compile_cap(m, 0, &e, &err), 0);
        assert_int_equal(sim_exe_memory(e, 0, &r), 0);
        arena[view] = r.activations - 2 * MIB;      /* minus the x and y streams' steps */
        for (int i = 0; i < 256 * 1024; i++)
            x[i] = (float)(i % 7) - 3.0f;
        memcpy(sim_exe_input_buffer(e, 0), x, 256 * 1024 * sizeof(float));
        if (sim_exe_run(e, &err) != 0)
            fail_msg("%s", err.msg);
        y = sim_exe_output_buffer(e, 0);
        for (int i = 0; i < 256; i++)     /* the host still copies: the values are right */
            for (int j = 0; j < 1024; j++) {
                float t = view ? x[j * 256 + i] : x[i * 1024 + j], want = t > 0.0f ? t : 0.0f;
                assert_true(y[i * 1024 + j] == want);
            }
        free(x);
        sim_exe_free(e);
        sim_model_free(m);
    }
    printf("  Relu, two views, Relu over 1 MiB tensors: IPU arena %llu bytes (with two "
           "copies in their place: %llu)\n", (unsigned long long)arena[1],
           (unsigned long long)arena[0]);
    assert_int_equal(arena[1], MIB);
    assert_int_equal(arena[0], 2 * MIB);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_liveness_reuse),
        cmocka_unit_test(test_reuse_keeps_values),
        cmocka_unit_test(test_fit_check),
        cmocka_unit_test(test_placement),
        cmocka_unit_test(test_views_alias),
    };

    return cmocka_run_group_tests_name("sim_plan", tests, NULL, NULL);
}
