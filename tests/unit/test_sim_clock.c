/*
 * test_sim_clock.c — the simulated clock's prediction (issue 28; docs/cost-model.md):
 * the report's arithmetic (samples/s x step = samples per step, the parts within the step,
 * the JSON and the text saying the same figures), what the parts respond to (replicas add
 * collectives, synthetic data removes host I/O, IO tiles hide it, Bow's clock shortens
 * compute in the clocks' ratio, float16 with float16 partials runs the AMP 4x, a depthwise
 * convolution runs on the vector units, a dense one on the AMP), and the
 * determinism: the exact bits of a prediction, the same at every ISA level tests/run.sh
 * runs this program at (the cost files use only fixed-order +, -, *, /).
 * No timing: every check is on simulated figures.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define I64 SIM_DTYPE_INT64
#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }
#define IN 64
#define HID 96
#define STEP_BITS 0x1.4390d67de9754p-12   /* test_deterministic prints it */

/* x [B, IN] -> Gemm -> Relu -> Gemm -> loss: a small MLP with a training loss. */
static struct sim_model *
mlp(void)
{
    struct sim_ob *b = sim_ob_new(15);
    static float w1[HID * IN], b1[HID], w2[10 * HID], b2[10];

    for (int i = 0; i < HID * IN; i++)
        w1[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    for (int i = 0; i < 10 * HID; i++)
        w2[i] = (float)((i * 11) % 7) / 7.0f - 0.45f;
    sim_ob_input(b, "x", F32, 2, DIMS(-1, IN));
    sim_ob_input(b, "labels", I64, 1, DIMS(-1));
    sim_ob_initializer(b, "fc1.w", F32, 2, DIMS(HID, IN), w1);
    sim_ob_initializer(b, "fc1.b", F32, 1, DIMS(HID), b1);
    sim_ob_initializer(b, "fc2.w", F32, 2, DIMS(10, HID), w2);
    sim_ob_initializer(b, "fc2.b", F32, 1, DIMS(10), b2);
    sim_ob_node(b, "Gemm", "fc1", "x,fc1.w,fc1.b", "h");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "Relu", "relu", "h", "r");
    sim_ob_node(b, "Gemm", "fc2", "r,fc2.w,fc2.b", "logits");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "ce", "logits,labels", "loss");
    sim_ob_output(b, "loss", F32);
    return test_ob_load(b);
}

/* x [B, CH, 4, 4] -> Conv 3x3 (pads 1; depthwise: group CH, else dense) -> Flatten ->
 * loss: one convolution and no other AMP work. */
#define CH 16
static struct sim_model *
one_conv(int depthwise)
{
    struct sim_ob *b = sim_ob_new(15);
    static float w[CH * CH * 9];
    static const int64_t pads[] = { 1, 1, 1, 1 };

    for (int i = 0; i < CH * CH * 9; i++)
        w[i] = (float)((i * 13) % 11) / 11.0f - 0.5f;
    sim_ob_input(b, "x", F32, 4, DIMS(-1, CH, 4, 4));
    sim_ob_input(b, "labels", I64, 1, DIMS(-1));
    sim_ob_initializer(b, "conv.w", F32, 4, DIMS(CH, depthwise ? 1 : CH, 3, 3), w);
    sim_ob_node(b, "Conv", "conv", "x,conv.w", "y");
    sim_ob_attr_ints(b, "pads", pads, 4);
    if (depthwise)
        sim_ob_attr_int(b, "group", CH);
    sim_ob_node(b, "Flatten", "flat", "y", "logits");
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "ce", "logits,labels", "loss");
    sim_ob_output(b, "loss", F32);
    return test_ob_load(b);
}

/* Compiles m for training: micro-batch 32, accumulation 4, 3 device iterations, with the
 * cost options k (NULL: the defaults) and the prediction for `replicas`. */
static void
predict(const struct sim_model *m, const struct sim_cost_cfg *k, unsigned replicas,
        struct sim_prediction *p, char **text, char **json)
{
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;
    size_t len;

    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.micro_batch = 32;
    o.gradient_accumulation = 4;
    o.device_iterations = 3;
    if (k != NULL)
        o.cost = *k;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("compile: %s", err.msg);
    assert_int_equal(sim_exe_predict(e, replicas, p), 0);
    if (text != NULL) {
        assert_int_equal(sim_prediction_format(p, e, 0, text, &len), 0);
        assert_int_equal(strlen(*text), len);
    }
    if (json != NULL) {
        assert_int_equal(sim_prediction_format(p, e, 1, json, &len), 0);
        assert_int_equal(strlen(*json), len);
    }
    assert_int_equal(sim_exe_predict(e, 65537, p) == IPUOF_E_INVAL, 1);
    assert_int_equal(sim_exe_predict(e, replicas, p), 0);
    sim_exe_free(e);
}

/* The JSON number after "key": in js. */
static double
json_num(const char *js, const char *key)
{
    char pat[64];
    const char *at;

    snprintf(pat, sizeof pat, "\"%s\":", key);
    at = strstr(js, pat);
    if (at == NULL)
        fail_msg("no %s in %s", key, js);
    return strtod(at + strlen(pat), NULL);
}

static void
test_report_arithmetic(void **state)
{
    struct sim_model *m = mlp();
    struct sim_prediction p;
    char *text = NULL, *json = NULL, line[64];
    double sum = 0;

    (void)state;
    predict(m, NULL, 0, &p, &text, &json);
    printf("%s%s", text, json);
    assert_int_equal(p.replicas, 1);
    assert_true(p.samples_per_step == 32.0 * 4 * 3);
    assert_true(p.step_seconds > 0);
    assert_true(fabs(p.samples_per_s * p.step_seconds - p.samples_per_step) <=
                1e-12 * p.samples_per_step);
    for (int k = 0; k < SIM_PARTS; k++) {
        assert_true(p.part[k] >= 0);
        sum += p.part[k];
    }
    assert_true(sum <= p.step_seconds * (1 + 1e-12));
    assert_true(p.part[SIM_PART_COLLECTIVE] == 0);      /* one replica */
    assert_true(p.part[SIM_PART_COMPUTE] > 0 && p.part[SIM_PART_SYNC] > 0 &&
                p.part[SIM_PART_HOST] > 0);
    assert_true(p.pct_peak > 0 && p.pct_peak < 100);
    assert_string_equal(p.op_class, "Gemm");
    assert_non_null(strstr(p.layer, "fc1"));
    /* the JSON says the same figures, to the bit */
    assert_true(json_num(json, "samples_per_s") == p.samples_per_s);
    assert_true(json_num(json, "step_seconds") == p.step_seconds);
    assert_true(json_num(json, "compute") == p.part[SIM_PART_COMPUTE]);
    assert_true(json_num(json, "host_io") == p.part[SIM_PART_HOST]);
    assert_non_null(strstr(json, "\"ipu_type\":\"gc200\""));
    /* and the text, rounded */
    snprintf(line, sizeof line, "%.1f samples/s", p.samples_per_s);
    assert_non_null(strstr(text, line));
    snprintf(line, sizeof line, "%.6f s", p.part[SIM_PART_SYNC]);
    assert_non_null(strstr(text, line));
    free(text);
    free(json);
    sim_model_free(m);
}

static void
test_parts_respond(void **state)
{
    struct sim_model *m = mlp();
    struct sim_prediction p1, p16, syn, io, bow;
    struct sim_cost_cfg k;

    (void)state;
    predict(m, NULL, 1, &p1, NULL, NULL);
    predict(m, NULL, 16, &p16, NULL, NULL);
    assert_true(p16.part[SIM_PART_COLLECTIVE] > 0);
    assert_true(p16.samples_per_step == 16 * p1.samples_per_step);
    assert_true(p16.part[SIM_PART_HOST] > p1.part[SIM_PART_HOST]);  /* 4 IPUs share a link */
    assert_true(p16.part[SIM_PART_COMPUTE] == p1.part[SIM_PART_COMPUTE]);
    sim_cost_cfg_init(&k);
    k.synthetic = 1;
    predict(m, &k, 1, &syn, NULL, NULL);
    assert_true(syn.part[SIM_PART_HOST] < p1.part[SIM_PART_HOST]);
    assert_true(syn.part[SIM_PART_HOST] == k.step_s);       /* only the run's fixed cost */
    sim_cost_cfg_init(&k);
    k.io_tiles = 64;
    predict(m, &k, 1, &io, NULL, NULL);
    assert_true(io.step_seconds < p1.step_seconds);          /* the IO tiles hide transfers */
    sim_cost_cfg_init(&k);
    assert_int_equal(sim_cost_cfg_type(&k, SIM_IPU_BOW), 0);
    assert_int_equal(sim_cost_cfg_type(&k, 7), IPUOF_E_INVAL);
    predict(m, &k, 1, &bow, NULL, NULL);
    printf("compute per step: gc200 %.9g s, bow %.9g s (ratio %.6f; clocks 1.85 / 1.33 = "
           "%.6f)\n", p1.part[SIM_PART_COMPUTE], bow.part[SIM_PART_COMPUTE],
           p1.part[SIM_PART_COMPUTE] / bow.part[SIM_PART_COMPUTE], 1.85 / 1.33);
    assert_true(fabs(p1.part[SIM_PART_COMPUTE] / bow.part[SIM_PART_COMPUTE] - 1.85 / 1.33) <
                1e-9);
    assert_string_equal(sim_ipu_type_name(SIM_IPU_BOW), "bow");
    assert_int_equal(sim_ipu_type_parse("gc200"), SIM_IPU_GC200);
    assert_int_equal(sim_ipu_type_parse("mk3"), -1);
    sim_model_free(m);
}

/* A convolution too narrow for the AMP (a depthwise 3x3 uses 9 of its 16 inputs and 1 of
 * its 8 float32 outputs) runs at the vector units' rate, which the AMP's calibrated
 * efficiency does not touch; a dense one stays on the AMP and speeds up with it. */
static void
test_depthwise_on_vector_units(void **state)
{
    struct sim_model *dw = one_conv(1), *dense = one_conv(0);
    struct sim_prediction a, b, c, d;
    struct sim_cost_cfg k;

    (void)state;
    sim_cost_cfg_init(&k);
    predict(dw, &k, 1, &a, NULL, NULL);
    predict(dense, &k, 1, &c, NULL, NULL);
    k.efficiency *= 2;
    predict(dw, &k, 1, &b, NULL, NULL);
    predict(dense, &k, 1, &d, NULL, NULL);
    printf("compute per step: depthwise %.9g s and %.9g s, dense %.9g s and %.9g s (AMP "
           "efficiency x1, x2)\n", a.part[SIM_PART_COMPUTE], b.part[SIM_PART_COMPUTE],
           c.part[SIM_PART_COMPUTE], d.part[SIM_PART_COMPUTE]);
    assert_true(a.part[SIM_PART_COMPUTE] > 0);
    assert_true(a.part[SIM_PART_COMPUTE] == b.part[SIM_PART_COMPUTE]);
    assert_true(d.part[SIM_PART_COMPUTE] < c.part[SIM_PART_COMPUTE]);
    sim_model_free(dw);
    sim_model_free(dense);
}

/* Matrix products and convolutions have their own calibrated efficiencies
 * (docs/cost-model.md): doubling `matmul_efficiency` speeds up the MLP's Gemms and leaves
 * the convolution alone; doubling `efficiency` does the reverse. */
static void
test_matmul_efficiency_apart(void **state)
{
    struct sim_model *mlp_m = mlp(), *conv = one_conv(0);
    struct sim_prediction m1, m2, m3, c1, c2, c3;
    struct sim_cost_cfg k;

    (void)state;
    sim_cost_cfg_init(&k);
    predict(mlp_m, &k, 1, &m1, NULL, NULL);
    predict(conv, &k, 1, &c1, NULL, NULL);
    k.matmul_efficiency *= 2;
    predict(mlp_m, &k, 1, &m2, NULL, NULL);
    predict(conv, &k, 1, &c2, NULL, NULL);
    sim_cost_cfg_init(&k);
    k.efficiency *= 2;
    predict(mlp_m, &k, 1, &m3, NULL, NULL);
    predict(conv, &k, 1, &c3, NULL, NULL);
    printf("compute per step: MLP %.9g, %.9g, %.9g s; conv %.9g, %.9g, %.9g s (defaults, "
           "matmul_efficiency x2, efficiency x2)\n", m1.part[SIM_PART_COMPUTE],
           m2.part[SIM_PART_COMPUTE], m3.part[SIM_PART_COMPUTE], c1.part[SIM_PART_COMPUTE],
           c2.part[SIM_PART_COMPUTE], c3.part[SIM_PART_COMPUTE]);
    assert_true(m2.part[SIM_PART_COMPUTE] < m1.part[SIM_PART_COMPUTE]);
    assert_true(m3.part[SIM_PART_COMPUTE] == m1.part[SIM_PART_COMPUTE]);
    assert_true(c2.part[SIM_PART_COMPUTE] == c1.part[SIM_PART_COMPUTE]);
    assert_true(c3.part[SIM_PART_COMPUTE] < c1.part[SIM_PART_COMPUTE]);
    k.matmul_efficiency = 1.5;                  /* out of (0, 1]: refused at compile */
    {
        struct sim_compile_opts o;
        struct sim_exe *e = NULL;
        struct sim_err err;

        sim_compile_opts_init(&o);
        o.loss = "loss";
        o.micro_batch = 32;
        o.cost = k;
        assert_int_not_equal(sim_compile(mlp_m, &o, &e, &err), 0);
        assert_non_null(strstr(err.msg, "efficiencies"));
    }
    sim_model_free(mlp_m);
    sim_model_free(conv);
}

/* The same program, the same bits: at every ISA level this program runs at (tests/run.sh
 * runs it at each), and from one call to the next. The constant is the figure of the
 * model in docs/cost-model.md; a change to the model changes it (print and update). */
static void
test_deterministic(void **state)
{
    struct sim_model *m = mlp();
    struct sim_prediction a, b;

    (void)state;
    predict(m, NULL, 16, &a, NULL, NULL);
    predict(m, NULL, 16, &b, NULL, NULL);
    assert_memory_equal(&a.step_seconds, &b.step_seconds, sizeof(double));
    assert_memory_equal(a.part, b.part, sizeof a.part);
    printf("step %a s, compute %a s, host %a s\n", a.step_seconds, a.part[SIM_PART_COMPUTE],
           a.part[SIM_PART_HOST]);
    assert_true(a.step_seconds == STEP_BITS);
    sim_model_free(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_arithmetic),
        cmocka_unit_test(test_parts_respond),
        cmocka_unit_test(test_depthwise_on_vector_units),
        cmocka_unit_test(test_matmul_efficiency_apart),
        cmocka_unit_test(test_deterministic),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
