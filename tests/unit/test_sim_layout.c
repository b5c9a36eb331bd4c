/*
 * test_sim_layout.c — the layout plan (sim/compile/layout.c): which activations stay in oneDNN's
 * blocked layout between convolutions of an inference executable, and that keeping them
 * there changes no number.
 *
 * The graph (N = 5 images, so two pool threads get pieces of 3 and 2; 16 channels, a
 * multiple of both blocks, 8 at AVX2 and 16 at AVX-512):
 *     a = Relu(Conv3x3(x))           read by two Convs only            -> blocked
 *     b = Conv3x3(a); c = Conv1x1(a) (c: a 1x1 the rule gives OpenBLAS, moved to oneDNN)
 *     s = Relu(b + c)                an Add between Convs: b, c, s     -> blocked
 *     t = Conv3x3(s)                 read by GlobalAveragePool         -> plain
 *     g = GlobalAveragePool(t)       graph output
 *     u = Conv3x3(a)                 a graph output, also read by a Conv -> plain
 *     w = Conv3x3(u)                 graph output                      -> plain
 * Each output must equal, bit for bit, the same graph with every Conv on oneDNN and the
 * plan off (IPUOF_SIM_CONV=dnnl IPUOF_SIM_LAYOUT=0: the per-layer reorders, the same
 * kernels), and stay within 1e-5 (relative to the largest magnitude) of the rule's own
 * choice with the plan off (the 1x1 on OpenBLAS there, which sums in another order).
 * Constant weights are reordered once at compile time; updatable ones every run (a weight
 * written after a run changes the next). A training compile keeps every tensor plain.
 * tests/run.sh runs this at every level the machine has; the blocked marks are checked at
 * avx2 and avx512, where oneDNN's direct kernels read nChw8c / nChw16c; at baseline (SSE4.1
 * kernels, nChw8c on this machine) they are printed, and the plain marks and the numbers
 * checked.
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
#define N 5
#define C 16
#define H 12

static uint64_t rng_state;

/* In [-1, 1) (test_urand01, obload.h). */
static float
urand(void)
{
    return test_urand01(&rng_state) * 2.0f - 1.0f;
}

/* An initializer of urand() values x 0.3 (test_ob_init_rand, obload.h). */
static void
init_rand(struct sim_ob *b, const char *name, int rank, const int64_t *d)
{
    test_ob_init_rand(b, name, rank, d, &rng_state, 0.3f);
}

/* Conv node `name` reading `in` with weights name_w and bias name_b, k x k, pad k / 2. */
static void
conv(struct sim_ob *b, const char *name, const char *in, int64_t k, const char *out)
{
    char wn[32], bn[32], ins[96];
    int64_t ks[2] = { k, k }, p[4] = { k / 2, k / 2, k / 2, k / 2 };

    snprintf(wn, sizeof(wn), "%s_w", name);
    snprintf(bn, sizeof(bn), "%s_b", name);
    snprintf(ins, sizeof(ins), "%s,%s,%s", in, wn, bn);
    init_rand(b, wn, 4, (const int64_t[]){ C, C, k, k });
    init_rand(b, bn, 1, (const int64_t[]){ C });
    assert_int_equal(sim_ob_node(b, "Conv", name, ins, out), 0);
    sim_ob_attr_ints(b, "kernel_shape", ks, 2);
    sim_ob_attr_ints(b, "pads", p, 4);
}

/* The graph above (caller frees). */
static struct sim_model *
graph(void)
{
    struct sim_ob *b = sim_ob_new(13);
    struct sim_model *m = NULL;
    struct sim_err err;
    void *bytes;
    size_t len;

    rng_state = 0x2545f4914f6cdd1dull;
    assert_non_null(b);
    sim_ob_input(b, "x", F32, 4, (const int64_t[]){ N, C, H, H });
    conv(b, "c1", "x", 3, "a0");
    sim_ob_node(b, "Relu", "r1", "a0", "a");
    conv(b, "c2", "a", 3, "b");
    conv(b, "c3", "a", 1, "c");
    sim_ob_node(b, "Add", "add", "b,c", "s0");
    sim_ob_node(b, "Relu", "r2", "s0", "s");
    conv(b, "c4", "s", 3, "t");
    sim_ob_node(b, "GlobalAveragePool", "gap", "t", "g");
    conv(b, "c5", "a", 3, "u");
    conv(b, "c6", "u", 3, "w");
    sim_ob_output(b, "g", F32);
    sim_ob_output(b, "u", F32);
    sim_ob_output(b, "w", F32);
    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    if (sim_model_load(bytes, len, &m, &err) != 0)
        fail_msg("%s", err.msg);
    free(bytes);
    sim_ob_free(b);
    return m;
}

/* Sets or (value NULL) unsets an environment variable. */
static void
env(const char *name, const char *value)
{
    if (value != NULL)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

/* Compiles m for inference with IPUOF_SIM_CONV=conv and IPUOF_SIM_LAYOUT=layout (NULL:
 * unset), the environment restored after. */
static struct sim_exe *
compile(const struct sim_model *m, const char *conv_env, const char *layout, const char *loss)
{
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;

    env("IPUOF_SIM_CONV", conv_env);
    env("IPUOF_SIM_LAYOUT", layout);
    sim_compile_opts_init(&o);
    if (loss != NULL) {
        o.loss = loss;
        sim_optimizer_init(&o.optimizer, SIM_OPT_SGD);
    }
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("compile (conv %s, layout %s): %s", conv_env ? conv_env : "rule",
                 layout ? layout : "on", err.msg);
    env("IPUOF_SIM_CONV", NULL);
    env("IPUOF_SIM_LAYOUT", NULL);
    return e;
}

#define N_OUT 3
static const char *const outs[N_OUT] = { "g", "u", "w" };

/* Runs e once on the fixed input; out[i] gets output i (malloc'd), n[i] its floats. */
static void
run(struct sim_exe *e, float *out[N_OUT], size_t n[N_OUT])
{
    struct sim_io_info info;
    struct sim_err err;
    float *in;

    assert_int_equal(sim_exe_input_info(e, 0, &info), 0);
    in = sim_exe_input_buffer(e, 0);
    rng_state = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < info.run_bytes / sizeof(float); i++)
        in[i] = urand();
    if (sim_exe_run(e, &err) != 0)
        fail_msg("run: %s", err.msg);
    for (int i = 0; i < N_OUT; i++) {
        long k = sim_exe_output_index(e, outs[i]);
        assert_true(k >= 0);
        assert_int_equal(sim_exe_output_info(e, (size_t)k, &info), 0);
        n[i] = info.run_bytes / sizeof(float);
        out[i] = malloc(info.run_bytes);
        assert_non_null(out[i]);
        memcpy(out[i], sim_exe_output_buffer(e, (size_t)k), info.run_bytes);
    }
}

static bool
blocked_isa(void)
{
    return sim_isa_current() != SIM_ISA_BASELINE;
}

static void
test_plan_marks(void **state)
{
    struct sim_model *m = graph();
    struct sim_exe *e = compile(m, NULL, NULL, NULL), *off = compile(m, NULL, "0", NULL);
    static const char *const plain[] = { "x", "t", "g", "u", "w" };
    static const char *const blocked[] = { "a", "b", "c", "s" };

    (void)state;
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
        if (sim_exe_tensor_blocked(e, plain[i]) != 0)
            fail_msg("'%s' must stay plain (got %d)", plain[i],
                     sim_exe_tensor_blocked(e, plain[i]));
    for (size_t i = 0; i < sizeof(blocked) / sizeof(blocked[0]); i++) {
        int got = sim_exe_tensor_blocked(e, blocked[i]);
        printf("  '%s': %s at %s\n", blocked[i], got == 1 ? "blocked" : "plain",
               sim_isa_name(sim_isa_current()));
        if (blocked_isa() && got != 1)
            fail_msg("'%s' must stay blocked at %s (got %d)", blocked[i],
                     sim_isa_name(sim_isa_current()), got);
        assert_int_equal(sim_exe_tensor_blocked(off, blocked[i]), 0);
    }
    assert_int_equal(sim_exe_tensor_blocked(e, "no such tensor"), -1);
    assert_int_equal(sim_exe_tensor_blocked(e, "a0"), -1);     /* fused into c1 */
    /* the Conv weights reordered once at compile are host bytes the cache must count */
    printf("  host copies: %llu bytes (pass off: %llu)\n",
           (unsigned long long)sim_exe_host_copy_bytes(e),
           (unsigned long long)sim_exe_host_copy_bytes(off));
    if (blocked_isa())
        assert_true(sim_exe_host_copy_bytes(e) > 0);
    assert_int_equal(sim_exe_host_copy_bytes(off), 0);
    sim_exe_free(e);
    sim_exe_free(off);
    sim_model_free(m);
}

static void
test_numbers(void **state)
{
    struct sim_model *m = graph();
    struct sim_exe *e[3] = { compile(m, NULL, NULL, NULL), compile(m, "dnnl", "0", NULL),
                             compile(m, NULL, "0", NULL) };
    float *o[3][N_OUT];
    size_t n[3][N_OUT];

    (void)state;
    for (int k = 0; k < 3; k++)
        run(e[k], o[k], n[k]);
    for (int i = 0; i < N_OUT; i++) {
        double diff = 0, big = 0;
        assert_int_equal(n[0][i], n[1][i]);
        assert_int_equal(n[0][i], n[2][i]);
        if (memcmp(o[0][i], o[1][i], n[0][i] * sizeof(float)) != 0)
            fail_msg("'%s' differs from the per-layer reorders' run", outs[i]);
        for (size_t j = 0; j < n[0][i]; j++) {
            double d = fabs((double)o[0][i][j] - o[2][i][j]);
            diff = d > diff ? d : diff;
            big = fabs(o[2][i][j]) > big ? fabs(o[2][i][j]) : big;
        }
        printf("  '%s': bit-identical to IPUOF_SIM_CONV=dnnl IPUOF_SIM_LAYOUT=0; max "
               "difference from the rule's kernels %.3g (max magnitude %.3g)\n", outs[i], diff,
               big);
        assert_true(diff <= 1e-5 * big);
    }
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < N_OUT; i++)
            free(o[k][i]);
        sim_exe_free(e[k]);
    }
    sim_model_free(m);
}

/* Weights that can change (updatable_weights) are reordered every run, never once at
 * compile time: zeroing c2's weights after the first run must change g from that run's. */
static void
test_updatable_weights(void **state)
{
    struct sim_model *m = graph();
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;
    float *o1[N_OUT], *o2[N_OUT], *zero = calloc((size_t)C * C * 9, sizeof(float));
    size_t n1[N_OUT], n2[N_OUT];

    (void)state;
    assert_non_null(zero);
    sim_compile_opts_init(&o);
    o.updatable_weights = 1;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("%s", err.msg);
    run(e, o1, n1);
    assert_int_equal(sim_exe_write_weight(e, "c2_w", zero, (size_t)C * C * 9 * sizeof(float),
                                          &err), 0);
    run(e, o2, n2);
    assert_true(memcmp(o1[0], o2[0], n1[0] * sizeof(float)) != 0);
    assert_memory_equal(o1[1], o2[1], n1[1] * sizeof(float));  /* u does not read c2 */
    for (int i = 0; i < N_OUT; i++) {
        free(o1[i]);
        free(o2[i]);
    }
    free(zero);
    sim_exe_free(e);
    sim_model_free(m);
}

/* Training keeps plain tensors (autodiff and the backward kernels read them). */
static void
test_training_plain(void **state)
{
    struct sim_ob *b = sim_ob_new(13);
    struct sim_model *m = NULL;
    struct sim_exe *e;
    struct sim_err err;
    void *bytes;
    size_t len;

    (void)state;
    rng_state = 0x2545f4914f6cdd1dull;
    sim_ob_input(b, "x", F32, 4, (const int64_t[]){ N, C, H, H });
    conv(b, "c1", "x", 3, "a");
    conv(b, "c2", "a", 3, "y");
    sim_ob_node(b, "ReduceSum", "total", "y", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    if (sim_model_load(bytes, len, &m, &err) != 0)
        fail_msg("%s", err.msg);
    free(bytes);
    sim_ob_free(b);
    e = compile(m, "dnnl", NULL, "loss");
    assert_int_equal(sim_exe_tensor_blocked(e, "a"), 0);
    sim_exe_free(e);
    e = compile(m, "dnnl", NULL, NULL);
    if (blocked_isa())
        assert_int_equal(sim_exe_tensor_blocked(e, "a"), 1);
    sim_exe_free(e);
    sim_model_free(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_marks),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_updatable_weights),
        cmocka_unit_test(test_training_plain),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
