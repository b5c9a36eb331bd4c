/*
 * test_sim_train_api.c — the loss ops' forward values against hand-computed ones
 * (SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss with every reduction, weights,
 * ignore_index and log_prob; CtcLoss with ragged lengths, an impossible alignment and
 * zero_infinity), run in inference executables; the weights API (kinds, read, write,
 * gradients, copies, ONNX save checked by sim_model_load and, when python3-onnx is
 * installed, by onnx.checker; a buffer's shown copy, sim_exe_show_buffer; write stamps,
 * sim_exe_weight_written); the memory report of a training executable; and the errors:
 * loss not an output or not one value per replica, optimizer parameters out of range,
 * gradient_accumulation 0 or > 1 for inference, no trainable weight (ReduceMax on the path,
 * refused until it had a gradient rule, now compiles), CtcLoss limits, set_optimizer misuse, and labels out of range at
 * run time (an error naming the node, the label and the class count).
 * Not here: gradient rules (test_sim_train_grad.c), training numerics (test_sim_train.c).
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
#include <unistd.h>

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define I64 SIM_DTYPE_INT64
#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }
#define FLOATS(...) (const float[]){ __VA_ARGS__ }

/* Compiles for inference, runs and returns output i (borrowed from *e). */
static const float *
infer(struct sim_model *m, struct sim_exe **e, size_t out)
{
    struct sim_compile_opts o;

    sim_compile_opts_init(&o);
    *e = test_compile_ok(m, &o);
    test_run_ok(*e);
    return sim_exe_output_buffer(*e, out);
}

static double
check(const char *what, const float *got, const double *want, int n)
{
    double d = 0.0;

    for (int i = 0; i < n; i++)
        d = fmax(d, fabs(got[i] - want[i]));
    printf("%-58s max diff %.2e\n", what, d);
    assert_true(d < 2e-6);
    return d;
}

/* ---- loss values ------------------------------------------------------------------------ */

/* scores [[0, ln 2, ln 3], [1, 1, 1]]: softmax row 0 = (1, 2, 3) / 6, row 1 uniform */
static struct sim_model *
sce_model(const char *reduction, bool weights, bool ignore, bool log_prob)
{
    struct sim_ob *b = sim_ob_new(13);
    float s[6] = { 0.0f, (float)log(2.0), (float)log(3.0), 1.0f, 1.0f, 1.0f };

    sim_ob_initializer(b, "s", F32, 2, DIMS(2, 3), s);
    sim_ob_initializer(b, "lab", I64, 1, DIMS(2), DIMS(2, 0));
    sim_ob_initializer(b, "w", F32, 1, DIMS(3), FLOATS(1, 2, 4));
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "ce", weights ? "s,lab,w" : "s,lab",
                log_prob ? "loss,lp" : "loss");
    sim_ob_attr_str(b, "reduction", reduction);
    if (ignore)
        sim_ob_attr_int(b, "ignore_index", 2);
    sim_ob_output(b, "loss", F32);
    if (log_prob)
        sim_ob_output(b, "lp", F32);
    return test_ob_load(b);
}

static void
test_cross_entropy_values(void **state)
{
    const double l2 = log(2.0), l3 = log(3.0);
    struct {
        const char *what, *red;
        bool w, ii;
        int n;
        double want[2];
    } cases[] = {
        { "SoftmaxCrossEntropyLoss mean", "mean", false, false, 1, { (l2 + l3) / 2 } },
        { "SoftmaxCrossEntropyLoss sum", "sum", false, false, 1, { l2 + l3 } },
        { "SoftmaxCrossEntropyLoss none", "none", false, false, 2, { l2, l3 } },
        { "SoftmaxCrossEntropyLoss mean, weights (1, 2, 4)", "mean", true, false, 1,
          { (4 * l2 + l3) / 5 } },
        { "SoftmaxCrossEntropyLoss mean, ignore_index 2", "mean", false, true, 1, { l3 } },
        { "SoftmaxCrossEntropyLoss none, weights, ignore_index 2", "none", true, true, 2,
          { 0, l3 } },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sim_model *m = sce_model(cases[i].red, cases[i].w, cases[i].ii, false);
        struct sim_exe *e;
        check(cases[i].what, infer(m, &e, 0), cases[i].want, cases[i].n);
        sim_exe_free(e);
        sim_model_free(m);
    }
    {
        struct sim_model *m = sce_model("mean", false, false, true);
        struct sim_exe *e;
        const double want[6] = { -log(6.0), log(2.0 / 6), log(0.5), -l3, -l3, -l3 };
        infer(m, &e, 0);
        check("SoftmaxCrossEntropyLoss log_prob output", sim_exe_output_buffer(e, 1), want, 6);
        sim_exe_free(e);
        sim_model_free(m);
    }
}

static void
test_nll_values(void **state)
{
    const char *reds[] = { "none", "sum", "mean", "mean" };
    const double want[4][2] = { { 2, 2.5 }, { 4.5 }, { 2.25 }, { 2.3 } };
    const int n[4] = { 2, 1, 1, 1 };

    (void)state;
    for (int i = 0; i < 4; i++) {
        struct sim_ob *b = sim_ob_new(13);
        struct sim_model *m;
        struct sim_exe *e;
        char what[80];
        sim_ob_initializer(b, "lp", F32, 2, DIMS(2, 3), FLOATS(-1, -2, -3, -0.5, -1.5, -2.5));
        sim_ob_initializer(b, "lab", I64, 1, DIMS(2), DIMS(1, 2));
        sim_ob_initializer(b, "w", F32, 1, DIMS(3), FLOATS(1, 2, 3));
        sim_ob_node(b, "NegativeLogLikelihoodLoss", "nll", i == 3 ? "lp,lab,w" : "lp,lab",
                    "loss");
        sim_ob_attr_str(b, "reduction", reds[i]);
        sim_ob_output(b, "loss", F32);
        m = test_ob_load(b);
        snprintf(what, sizeof(what), "NegativeLogLikelihoodLoss %s%s", reds[i],
                 i == 3 ? ", weights (1, 2, 3)" : "");
        check(what, infer(m, &e, 0), want[i], n[i]);
        sim_exe_free(e);
        sim_model_free(m);
    }
}

/* log_probs all ln 0.5 over (T 2, N 3, C 2), blank 0: target "1" in 2 frames has 3
 * alignments (p 3/4), in 1 frame one (p 1/2); "1 1" needs 3 frames (p 0). */
static struct sim_model *
ctc_model(const char *reduction, bool zero_inf, int64_t tg_rank)
{
    struct sim_ob *b = sim_ob_new(13);
    float lp[12];

    for (int i = 0; i < 12; i++)
        lp[i] = (float)log(0.5);
    sim_ob_initializer(b, "lp", F32, 3, DIMS(2, 3, 2), lp);
    if (tg_rank == 2)
        sim_ob_initializer(b, "tg", I64, 2, DIMS(3, 2), DIMS(1, 0, 1, 0, 1, 1));
    else
        sim_ob_initializer(b, "tg", I64, 1, DIMS(4), DIMS(1, 1, 1, 1));
    sim_ob_initializer(b, "il", I64, 1, DIMS(3), DIMS(2, 1, 2));
    sim_ob_initializer(b, "tl", I64, 1, DIMS(3), DIMS(1, 1, 2));
    sim_ob_node(b, "CtcLoss", "ctc", "lp,tg,il,tl", "loss");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_attr_str(b, "reduction", reduction);
    sim_ob_attr_int(b, "zero_infinity", zero_inf);
    sim_ob_output(b, "loss", F32);
    return test_ob_load(b);
}

static void
test_ctc_values(void **state)
{
    const double a = -log(0.75), c = log(2.0);
    struct sim_model *m;
    struct sim_exe *e;
    const float *l;

    (void)state;
    m = ctc_model("sum", true, 2);
    check("CtcLoss sum, zero_infinity", infer(m, &e, 0), (const double[]){ a + c }, 1);
    sim_exe_free(e);
    sim_model_free(m);
    m = ctc_model("mean", true, 2);
    check("CtcLoss mean (per target length, then batch), zero_infinity", infer(m, &e, 0),
          (const double[]){ (a + c + 0.0 / 2) / 3 }, 1);
    sim_exe_free(e);
    sim_model_free(m);
    m = ctc_model("sum", false, 2);
    l = infer(m, &e, 0);
    printf("CtcLoss sum with an impossible alignment: %g\n", l[0]);
    assert_true(isinf(l[0]) && l[0] > 0);
    sim_exe_free(e);
    sim_model_free(m);
}

/* Targets holding the blank, computed as torch does; log_probs all ln 0.5 over (T 2, N 2,
 * C 2), blank 0. "1 0": extended b 1 b 0 b; position 3 (the target blank) may follow
 * position 1 directly (its label differs), so one alignment "1 0" (p 1/4). "0": extended
 * b 0 b, all of class 0; the paths (0,1) (1,1) (1,2) end at position 1 or 2 (p 3/4).
 * torch.nn.functional.ctc_loss gives the same: log 4 - log 0.75. */
static void
test_ctc_blank_in_target(void **state)
{
    struct sim_ob *b = sim_ob_new(6);
    struct sim_model *m;
    struct sim_exe *e;
    float lp[8];

    (void)state;
    for (int i = 0; i < 8; i++)
        lp[i] = (float)log(0.5);
    sim_ob_initializer(b, "lp", F32, 3, DIMS(2, 2, 2), lp);
    sim_ob_initializer(b, "tg", I64, 2, DIMS(2, 2), DIMS(1, 0, 0, 0));
    sim_ob_initializer(b, "il", I64, 1, DIMS(2), DIMS(2, 2));
    sim_ob_initializer(b, "tl", I64, 1, DIMS(2), DIMS(2, 1));
    sim_ob_node(b, "CtcLoss", "ctc", "lp,tg,il,tl", "loss");
    sim_ob_node_domain(b, "ai.graphcore");
    sim_ob_attr_str(b, "reduction", "sum");
    sim_ob_output(b, "loss", F32);
    m = test_ob_load(b);
    check("CtcLoss sum, targets holding the blank", infer(m, &e, 0),
          (const double[]){ log(4.0) - log(0.75) }, 1);
    sim_exe_free(e);
    sim_model_free(m);
}

/* ---- a small training model -------------------------------------------------------------- */

/* x (B,2,3,3) -> Conv(2,1x1) -> BatchNorm -> GlobalAveragePool -> Flatten -> Gemm(3, W, b)
 * -> CE(labels); "frozen" scales the logits and is listed in frozen_weights. */
static struct sim_model *
small_model(bool with_loss)
{
    struct sim_ob *b = sim_ob_new(15);
    float cw[4] = { 0.5f, -0.3f, 0.2f, 0.8f }, fw[6] = { 0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f };

    sim_ob_input(b, "x", F32, 4, DIMS(-1, 2, 3, 3));
    if (with_loss)
        sim_ob_input(b, "labels", I64, 1, DIMS(-1));
    sim_ob_initializer(b, "conv.w", F32, 4, DIMS(2, 2, 1, 1), cw);
    sim_ob_initializer(b, "bn.scale", F32, 1, DIMS(2), FLOATS(1, 1));
    sim_ob_initializer(b, "bn.bias", F32, 1, DIMS(2), FLOATS(0, 0));
    sim_ob_initializer(b, "bn.mean", F32, 1, DIMS(2), FLOATS(0, 0));
    sim_ob_initializer(b, "bn.var", F32, 1, DIMS(2), FLOATS(1, 1));
    sim_ob_initializer(b, "fc.w", F32, 2, DIMS(3, 2), fw);
    sim_ob_initializer(b, "fc.b", F32, 1, DIMS(3), FLOATS(0, 0.1f, -0.1f));
    sim_ob_initializer(b, "frozen", F32, 0, NULL, FLOATS(2.0f));
    sim_ob_node(b, "Conv", "conv", "x,conv.w", "c");
    sim_ob_node(b, "BatchNormalization", "bn", "c,bn.scale,bn.bias,bn.mean,bn.var", "n");
    sim_ob_attr_int(b, "training_mode", 1);   /* as torch.onnx.export writes a train() one */
    sim_ob_node(b, "GlobalAveragePool", "gap", "n", "g");
    sim_ob_node(b, "Flatten", "flat", "g", "f");
    sim_ob_node(b, "Gemm", "fc", "f,fc.w,fc.b", "z");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "Mul", "scale", "z,frozen", "logits");
    sim_ob_output(b, "logits", F32);
    if (with_loss) {
        sim_ob_node(b, "SoftmaxCrossEntropyLoss", "ce", "logits,labels", "loss");
        sim_ob_output(b, "loss", F32);
    }
    return test_ob_load(b);
}

static const char *const frozen_names[] = { "frozen" };

static void
train_opts(struct sim_compile_opts *o, int kind)
{
    sim_compile_opts_init(o);
    o->loss = "loss";
    o->micro_batch = 4;
    o->frozen_weights = frozen_names;
    o->n_frozen_weights = 1;
    sim_optimizer_init(&o->optimizer, kind);
    o->optimizer.lr = 0.05f;
}

static void
fill_small(struct sim_exe *e, int64_t bad_label)
{
    float *x = sim_exe_input_buffer(e, (size_t)sim_exe_input_index(e, "x"));
    long li = sim_exe_input_index(e, "labels");

    for (int i = 0; i < 4 * 18; i++)
        x[i] = (float)((i * 7) % 13) * 0.1f - 0.6f;
    if (li >= 0) {
        int64_t *l = sim_exe_input_buffer(e, (size_t)li);
        for (int i = 0; i < 4; i++)
            l[i] = i % 3;
        l[3] = bad_label >= 0 ? bad_label : 1;
    }
}

static void
test_weights_api(void **state)
{
    struct sim_model *m = small_model(true), *mi = small_model(false);
    struct sim_compile_opts o;
    struct sim_exe *e, *inf, *plain;
    struct sim_weight_info wi;
    struct sim_err err;
    float w[6], g[6], two = 0.0f;
    const int kinds[] = { SIM_WEIGHT_TRAINABLE, SIM_WEIGHT_TRAINABLE, SIM_WEIGHT_TRAINABLE,
                          SIM_WEIGHT_BUFFER, SIM_WEIGHT_BUFFER, SIM_WEIGHT_TRAINABLE,
                          SIM_WEIGHT_TRAINABLE, SIM_WEIGHT_FROZEN };

    (void)state;
    train_opts(&o, SIM_OPT_SGD);
    e = test_compile_ok(m, &o);
    assert_true(sim_exe_is_training(e));
    assert_int_equal(sim_exe_weight_count(e), 8);
    for (size_t i = 0; i < 8; i++) {
        assert_int_equal(sim_exe_weight_info(e, i, &wi), 0);
        assert_int_equal(wi.kind, kinds[i]);
    }
    /* past the weights: SGD without momentum keeps its step count and the loss scale's
     * two scalars (automatic loss scaling's factor, the last step's scale) */
    assert_int_equal(sim_exe_weight_info(e, 8, &wi), 0);
    assert_string_equal(wi.name, "optimizer:step");
    assert_int_equal(wi.kind, SIM_WEIGHT_OPTIMIZER_STATE);
    assert_int_equal(sim_exe_weight_info(e, 9, &wi), 0);
    assert_string_equal(wi.name, "optimizer:loss_scale_update_factor");
    assert_true(wi.dtype == SIM_DTYPE_FLOAT && wi.bytes == sizeof(float));
    assert_int_equal(sim_exe_weight_info(e, 10, &wi), 0);
    assert_string_equal(wi.name, "optimizer:final_loss_scale");
    assert_int_equal(sim_exe_weight_info(e, 11, &wi), IPUOF_E_INVAL);
    assert_int_equal(sim_exe_weight_index(e, "fc.w"), 5);
    assert_int_equal(sim_exe_weight_index(e, "nope"), -1);
    /* before any run the gradient reads as zeros */
    assert_int_equal(sim_exe_read_gradient(e, "fc.w", g, sizeof(g), &err), 0);
    assert_true(g[0] == 0.0f && g[5] == 0.0f);
    fill_small(e, -1);
    test_run_ok(e);
    assert_int_equal(sim_exe_read_gradient(e, "fc.w", g, sizeof(g), &err), 0);
    assert_true(g[0] != 0.0f);
    assert_int_equal(sim_exe_read_gradient(e, "frozen", &two, 4, &err), IPUOF_E_INVAL);
    assert_int_equal(sim_exe_read_weight(e, "frozen", &two, 4, &err), 0);
    assert_true(two == 2.0f);
    assert_int_equal(sim_exe_read_weight(e, "fc.w", w, 5 * 4, &err), IPUOF_E_SHAPE);
    assert_non_null(strstr(err.msg, "24 bytes"));
    assert_int_equal(sim_exe_read_weight(e, "nope", w, 4, &err), IPUOF_E_NOTFOUND);
    /* write, then the trained model and an inference copy agree */
    for (int i = 0; i < 6; i++)
        w[i] = (float)i * 0.1f;
    assert_int_equal(sim_exe_write_weight(e, "fc.w", w, sizeof(w), &err), 0);
    assert_int_equal(sim_exe_read_weight(e, "fc.w", g, sizeof(g), &err), 0);
    assert_memory_equal(w, g, sizeof(w));
    sim_compile_opts_init(&o);
    o.micro_batch = 4;
    plain = test_compile_ok(mi, &o);
    assert_int_equal(sim_exe_weight_count(plain), 0);
    assert_int_equal(sim_exe_copy_weights(plain, e, &err), IPUOF_E_INVAL);
    assert_non_null(strstr(err.msg, "updatable_weights"));
    assert_int_equal(sim_exe_copy_weights(e, e, &err), IPUOF_E_INVAL);
    if (sim_compile_inference_from(mi, &o, e, &inf, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(sim_exe_weight_count(inf), 8);
    assert_int_equal(sim_exe_read_weight(inf, "fc.w", g, sizeof(g), &err), 0);
    assert_memory_equal(w, g, sizeof(w));
    o.loss = "loss";
    {
        struct sim_exe *none = NULL;
        assert_int_equal(sim_compile_inference_from(mi, &o, e, &none, &err), IPUOF_E_INVAL);
        assert_null(none);
    }
    sim_exe_free(plain);
    sim_exe_free(inf);
    sim_exe_free(e);
    sim_model_free(m);
    sim_model_free(mi);
}

/* Every replica's micro-batch of x differs (so do their running statistics). */
static void
fill_replicas(struct sim_exe *e, unsigned R)
{
    float *x = sim_exe_input_buffer(e, (size_t)sim_exe_input_index(e, "x"));
    int64_t *l = sim_exe_input_buffer(e, (size_t)sim_exe_input_index(e, "labels"));

    for (unsigned i = 0; i < R * 4 * 18; i++)
        x[i] = (float)((i * 7) % 13) * 0.1f - 0.6f + (float)(i / 72) * 0.5f;
    for (unsigned i = 0; i < R * 4; i++)
        l[i] = i % 3;
}

/* sim_exe_show_buffer (a Pod's daemons other than the first show the partition's replica
 * 0's buffers): reads, copies and saves take the shown copy; the executable's replicas
 * keep their own (a twin without it trains to the same bits); a run or a write ends it. */
static void
test_show_buffer(void **state)
{
    struct sim_model *m = small_model(true), *mi = small_model(false), *back = NULL;
    struct sim_compile_opts o, oi;
    struct sim_exe *e, *twin, *inf, *again;
    struct sim_err err;
    const float shown[2] = { 7.0f, -8.0f };
    float own[2], got[2], w[6];
    void *bytes;
    size_t len;

    (void)state;
    train_opts(&o, SIM_OPT_SGD);
    o.replicas = 2;
    e = test_compile_ok(m, &o);
    twin = test_compile_ok(m, &o);
    fill_replicas(e, 2);
    fill_replicas(twin, 2);
    test_run_ok(e);
    test_run_ok(twin);
    assert_int_equal(sim_exe_read_weight(e, "bn.mean", own, sizeof(own), &err), 0);
    assert_true(own[0] != 0.0f);
    assert_int_equal(sim_exe_show_buffer(e, "bn.mean", shown, sizeof(shown), &err), 0);
    assert_int_equal(sim_exe_read_weight(e, "bn.mean", got, sizeof(got), &err), 0);
    assert_memory_equal(got, shown, sizeof(got));
    assert_int_equal(sim_exe_read_weight(e, "bn.var", got, sizeof(got), &err), 0);
    assert_int_equal(sim_exe_read_weight(twin, "bn.var", own, sizeof(own), &err), 0);
    assert_memory_equal(got, own, sizeof(got));          /* only bn.mean is shown */
    /* an inference copy and a saved model take the shown copy */
    sim_compile_opts_init(&oi);
    oi.micro_batch = 4;
    if (sim_compile_inference_from(mi, &oi, e, &inf, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(sim_exe_read_weight(inf, "bn.mean", got, sizeof(got), &err), 0);
    assert_memory_equal(got, shown, sizeof(got));
    if (sim_exe_save_onnx(e, &bytes, &len, &err) != 0)
        fail_msg("%s", err.msg);
    if (sim_model_load(bytes, len, &back, &err) != 0)
        fail_msg("reloading the saved model: %s", err.msg);
    again = test_compile_ok(back, &o);
    assert_int_equal(sim_exe_read_weight(again, "bn.mean", got, sizeof(got), &err), 0);
    assert_memory_equal(got, shown, sizeof(got));
    /* refusals */
    assert_int_equal(sim_exe_show_buffer(e, "fc.w", w, sizeof(w), &err), IPUOF_E_INVAL);
    assert_non_null(strstr(err.msg, "not a buffer"));
    assert_int_equal(sim_exe_show_buffer(e, "bn.mean", shown, 4, &err), IPUOF_E_SHAPE);
    assert_int_equal(sim_exe_show_buffer(e, "nope", shown, 8, &err), IPUOF_E_NOTFOUND);
    /* the replicas kept their own copies: the next run gives the twin's bits, and the
     * host sees replica 0's again */
    test_run_ok(e);
    test_run_ok(twin);
    assert_int_equal(sim_exe_read_weight(e, "bn.mean", got, sizeof(got), &err), 0);
    assert_int_equal(sim_exe_read_weight(twin, "bn.mean", own, sizeof(own), &err), 0);
    assert_memory_equal(got, own, sizeof(got));
    assert_true(got[0] != shown[0]);
    /* a write ends it too */
    assert_int_equal(sim_exe_show_buffer(e, "bn.mean", shown, sizeof(shown), &err), 0);
    assert_int_equal(sim_exe_write_weight(e, "bn.mean", own, sizeof(own), &err), 0);
    assert_int_equal(sim_exe_read_weight(e, "bn.mean", got, sizeof(got), &err), 0);
    assert_memory_equal(got, own, sizeof(got));
    /* write stamps (sim_exe_weight_written): none but bn.mean's on e, none on the twin;
     * each write stamps later, optimizer state included; a copy stamps every copied
     * weight; runs and shows stamp nothing */
    {
        long mean = sim_exe_weight_index(e, "bn.mean"), fc = sim_exe_weight_index(e, "fc.w");
        long step = sim_exe_weight_index(e, "optimizer:step");
        int64_t steps = 5;
        uint64_t s1 = sim_exe_weight_written(e, (size_t)mean), s2, s3;
        assert_true(mean >= 0 && fc >= 0 && step >= (long)sim_exe_weight_count(e));
        assert_true(s1 > 0);
        for (size_t i = 0; i < sim_exe_weight_count(e) + 3; i++) {
            assert_int_equal(sim_exe_weight_written(twin, i), 0);
            if (i != (size_t)mean)
                assert_int_equal(sim_exe_weight_written(e, i), 0);
        }
        assert_int_equal(sim_exe_weight_written(e, 1000), 0);
        assert_int_equal(sim_exe_write_weight(e, "optimizer:step", &steps, sizeof(steps),
                                              &err), 0);
        s2 = sim_exe_weight_written(e, (size_t)step);
        assert_true(s2 > s1);
        assert_int_equal(sim_exe_copy_weights(twin, e, &err), 0);
        s3 = sim_exe_weight_written(twin, (size_t)fc);
        assert_true(s3 > 0 && sim_exe_weight_written(twin, (size_t)mean) > 0);
        assert_int_equal(sim_exe_weight_written(twin, (size_t)step), 0);  /* not copied */
        test_run_ok(e);
        assert_int_equal(sim_exe_weight_written(e, (size_t)fc), 0);
        assert_int_equal(sim_exe_weight_written(e, (size_t)mean), s1);
    }
    free(bytes);
    sim_exe_free(again);
    sim_exe_free(inf);
    sim_exe_free(twin);
    sim_exe_free(e);
    sim_model_free(back);
    sim_model_free(mi);
    sim_model_free(m);
}

static int
read_file(const char *path, void **buf, size_t *len)
{
    FILE *f = fopen(path, "rb");
    long n;

    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0) {
        if (f != NULL)
            fclose(f);
        return -1;
    }
    *buf = malloc((size_t)n + 1);
    if (*buf == NULL || fread(*buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        return -1;
    }
    *len = (size_t)n;
    fclose(f);
    return 0;
}

static void
test_save_onnx(void **state)
{
    struct sim_model *m = small_model(true), *back = NULL;
    struct sim_compile_opts o;
    struct sim_exe *e, *again;
    struct sim_err err;
    char path[] = "/tmp/sim_train_save_XXXXXX";
    float w1[6], w2[6], l1, l2;
    void *bytes;
    size_t len;
    int fd;

    (void)state;
    train_opts(&o, SIM_OPT_ADAMW);
    e = test_compile_ok(m, &o);
    fill_small(e, -1);
    for (int i = 0; i < 3; i++)
        test_run_ok(e);
    if (sim_exe_save_onnx(e, &bytes, &len, &err) != 0)
        fail_msg("%s", err.msg);
    if (sim_model_load(bytes, len, &back, &err) != 0)
        fail_msg("reloading the saved model: %s", err.msg);
    /* the saved model trains on from the trained weights: same next loss */
    again = test_compile_ok(back, &o);
    assert_int_equal(sim_exe_read_weight(e, "fc.w", w1, sizeof(w1), &err), 0);
    assert_int_equal(sim_exe_read_weight(again, "fc.w", w2, sizeof(w2), &err), 0);
    assert_memory_equal(w1, w2, sizeof(w1));
    assert_int_equal(sim_exe_read_weight(e, "bn.var", w1, 8, &err), 0);
    assert_int_equal(sim_exe_read_weight(again, "bn.var", w2, 8, &err), 0);
    assert_memory_equal(w1, w2, 8);
    assert_true(w1[0] != 1.0f);
    o.optimizer.lr = 0.0f;
    sim_exe_set_optimizer(e, &o.optimizer, &err);
    fill_small(e, -1);
    fill_small(again, -1);
    test_run_ok(e);
    test_run_ok(again);
    l1 = ((const float *)sim_exe_output_buffer(e, 1))[0];
    l2 = ((const float *)sim_exe_output_buffer(again, 1))[0];
    printf("saved ONNX (%zu bytes) reloaded: loss %.7g, trained executable %.7g\n", len, l2,
           l1);
    assert_true(fabsf(l1 - l2) < 1e-6f);
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, len), (ssize_t)len);
    close(fd);
    /* python3-onnx is a test dependency (make deps): its absence is a failure, not a skip.
     * The probe imports what the check uses: Debian's libonnx-testdata alone makes a bare
     * `import onnx` succeed. */
    if (system("/usr/bin/python3 -c 'import onnx.checker, onnx.numpy_helper' >/dev/null 2>&1") != 0)
        fail_msg("/usr/bin/python3 cannot import onnx.checker and onnx.numpy_helper: "
                 "install python3-onnx (make deps does)");
    {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "/usr/bin/python3 -c \"import onnx, onnx.numpy_helper as h; "
                 "m = onnx.load('%s'); onnx.checker.check_model(m); "
                 "w = {i.name: h.to_array(i) for i in m.graph.initializer}; "
                 "print('onnx.checker: ok;', len(w), 'initializers, fc.w[0] =', "
                 "w['fc.w'].ravel()[0])\"", path);
        assert_int_equal(system(cmd), 0);
    }
    {
        void *fbytes = NULL;
        size_t flen;
        assert_int_equal(read_file(path, &fbytes, &flen), 0);
        assert_int_equal(flen, len);
        free(fbytes);
    }
    unlink(path);
    free(bytes);
    sim_exe_free(again);
    sim_exe_free(e);
    sim_model_free(back);
    sim_model_free(m);
}

static void
test_memory_report(void **state)
{
    struct sim_model *m = small_model(true);
    struct sim_compile_opts o;
    struct sim_exe *adam, *sgd, *mom, *inf;
    struct sim_mem_report ra, rs, rm, ri;
    const uint64_t trainable = (4 + 2 + 2 + 6 + 3) * 4;

    (void)state;
    train_opts(&o, SIM_OPT_ADAM);
    o.replicas = 2;
    adam = test_compile_ok(m, &o);
    train_opts(&o, SIM_OPT_SGD);
    sgd = test_compile_ok(m, &o);
    o.optimizer.momentum = 0.9f;
    mom = test_compile_ok(m, &o);
    sim_compile_opts_init(&o);
    o.micro_batch = 4;
    inf = test_compile_ok(m, &o);
    assert_int_equal(sim_exe_ipu_count(adam), 2);
    sim_exe_memory(adam, 1, &ra);
    sim_exe_memory(sgd, 0, &rs);
    sim_exe_memory(mom, 0, &rm);
    sim_exe_memory(inf, 0, &ri);
    printf("memory: training (Adam) weights %llu activations %llu gradients %llu optimizer "
           "%llu total %llu; inference activations %llu\n", (unsigned long long)ra.weights,
           (unsigned long long)ra.activations, (unsigned long long)ra.gradients,
           (unsigned long long)ra.optimizer, (unsigned long long)ra.total,
           (unsigned long long)ri.activations);
    assert_int_equal(ra.replica, 1);
    assert_int_equal(ra.gradients, trainable);
    assert_int_equal(ra.optimizer, 2 * trainable);
    assert_int_equal(rs.optimizer, 0);
    assert_int_equal(rm.optimizer, trainable);
    assert_int_equal(ri.gradients, 0);
    assert_int_equal(ri.optimizer, 0);
    assert_int_equal(ra.total, ra.weights + ra.activations + ra.code + ra.gradients +
                     ra.optimizer);
    assert_true(ra.activations > ri.activations);
    assert_true(ra.weights >= trainable + 4 * 4 + 4);
    sim_exe_free(adam);
    sim_exe_free(sgd);
    sim_exe_free(mom);
    sim_exe_free(inf);
    sim_model_free(m);
}

/* ---- errors ------------------------------------------------------------------------------- */

static void
expect_compile_error(const struct sim_model *m, const struct sim_compile_opts *o, int code,
                     const char *needle)
{
    struct sim_exe *e = NULL;
    struct sim_err err = { 0 };
    int rc = sim_compile(m, o, &e, &err);

    if (rc != code || strstr(err.msg, needle) == NULL)
        fail_msg("expected error %d containing '%s', got %d: %s", code, needle, rc, err.msg);
    assert_null(e);
    printf("  refused: %s\n", err.msg);
}

static void
test_option_errors(void **state)
{
    struct sim_model *m = small_model(true);
    struct sim_compile_opts o;
    struct sim_optimizer bad;
    struct sim_err err;

    (void)state;
    train_opts(&o, SIM_OPT_SGD);
    o.loss = "nothing";
    expect_compile_error(m, &o, IPUOF_E_INVAL, "is not a graph output");
    o.loss = "logits";
    expect_compile_error(m, &o, IPUOF_E_INVAL, "one float per replica");
    train_opts(&o, SIM_OPT_SGD);
    o.gradient_accumulation = 0;
    expect_compile_error(m, &o, IPUOF_E_INVAL, "gradient_accumulation must be");
    sim_compile_opts_init(&o);
    o.micro_batch = 4;
    o.gradient_accumulation = 2;
    expect_compile_error(m, &o, IPUOF_E_INVAL, "an inference compile must use 1");
    train_opts(&o, SIM_OPT_SGD);
    o.accumulation_reduction = 7;
    expect_compile_error(m, &o, IPUOF_E_INVAL, "accumulation_reduction");
    {
        static const char *const all[] = { "conv.w", "bn.scale", "bn.bias", "fc.w", "fc.b",
                                           "frozen" };
        train_opts(&o, SIM_OPT_SGD);
        o.frozen_weights = all;
        o.n_frozen_weights = 6;
        {   /* every weight frozen: compiled, as PopTorch does, with an empty backward */
            struct sim_exe *e = test_compile_ok(m, &o);
            assert_true(sim_exe_is_training(e));
            sim_exe_free(e);
        }
        o.frozen_weights = (const char *const[]){ "missing" };
        o.n_frozen_weights = 1;
        expect_compile_error(m, &o, IPUOF_E_NOTFOUND, "frozen weight 'missing'");
    }
    /* optimizer ranges, at compile time and in sim_exe_set_optimizer */
    {
        struct {
            int kind;
            const char *field, *needle;
            float v;
        } bads[] = {
            { SIM_OPT_SGD, "lr", "learning rate", -1.0f },
            { SIM_OPT_SGD, "momentum", "momentum", -0.5f },
            { SIM_OPT_SGD, "weight_decay", "weight_decay", -0.1f },
            { SIM_OPT_SGD, "nesterov", "Nesterov", 0.0f },
            { SIM_OPT_ADAM, "beta1", "beta1", 1.0f },
            { SIM_OPT_ADAMW, "beta2", "beta2", -0.1f },
            { SIM_OPT_ADAM, "eps", "eps", 0.0f },
            { SIM_OPT_ADAM, "lr", "learning rate", NAN },
        };
        for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
            train_opts(&o, bads[i].kind);
            if (strcmp(bads[i].field, "lr") == 0) o.optimizer.lr = bads[i].v;
            if (strcmp(bads[i].field, "momentum") == 0) o.optimizer.momentum = bads[i].v;
            if (strcmp(bads[i].field, "weight_decay") == 0) o.optimizer.weight_decay = bads[i].v;
            if (strcmp(bads[i].field, "nesterov") == 0) o.optimizer.nesterov = 1;
            if (strcmp(bads[i].field, "beta1") == 0) o.optimizer.beta1 = bads[i].v;
            if (strcmp(bads[i].field, "beta2") == 0) o.optimizer.beta2 = bads[i].v;
            if (strcmp(bads[i].field, "eps") == 0) o.optimizer.eps = bads[i].v;
            expect_compile_error(m, &o, IPUOF_E_INVAL, bads[i].needle);
        }
        o.optimizer.kind = 9;
        expect_compile_error(m, &o, IPUOF_E_INVAL, "optimizer kind 9");
    }
    {
        struct sim_exe *e, *inf;
        train_opts(&o, SIM_OPT_SGD);
        e = test_compile_ok(m, &o);
        sim_optimizer_init(&bad, SIM_OPT_ADAM);
        assert_int_equal(sim_exe_set_optimizer(e, &bad, &err), IPUOF_E_INVAL);
        assert_non_null(strstr(err.msg, "compiled for SGD"));
        sim_optimizer_init(&bad, SIM_OPT_SGD);
        bad.momentum = 0.9f;
        assert_int_equal(sim_exe_set_optimizer(e, &bad, &err), IPUOF_E_INVAL);
        assert_non_null(strstr(err.msg, "momentum buffer"));
        bad.momentum = 0.0f;
        bad.lr = -2.0f;
        assert_int_equal(sim_exe_set_optimizer(e, &bad, &err), IPUOF_E_INVAL);
        bad.lr = 0.5f;
        assert_int_equal(sim_exe_set_optimizer(e, &bad, &err), 0);
        assert_int_equal(sim_exe_get_optimizer(e, &bad), 0);
        assert_true(bad.lr == 0.5f);
        sim_compile_opts_init(&o);
        o.micro_batch = 4;
        inf = test_compile_ok(m, &o);
        assert_int_equal(sim_exe_set_optimizer(inf, &bad, &err), IPUOF_E_INVAL);
        assert_int_equal(sim_exe_get_optimizer(inf, &bad), IPUOF_E_INVAL);
        assert_false(sim_exe_is_training(inf));
        sim_exe_free(inf);
        sim_exe_free(e);
    }
    sim_model_free(m);
}

static void
test_graph_errors(void **state)
{
    struct sim_compile_opts o;
    struct sim_model *m;
    struct sim_ob *b;

    (void)state;
    /* a loss that depends on no weight */
    b = sim_ob_new(13);
    sim_ob_input(b, "x", F32, 1, DIMS(3));
    sim_ob_node(b, "ReduceSum", "s", "x", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    o.loss = "loss";
    {   /* trains nothing, as PopTorch's TrainingSession: the forward runs, loss = sum */
        struct sim_exe *e = test_compile_ok(m, &o);
        float *x = sim_exe_input_buffer(e, (size_t)sim_exe_input_index(e, "x"));
        x[0] = 1.0f;
        x[1] = 2.0f;
        x[2] = 4.5f;
        test_run_ok(e);
        check("loss of the input alone (no trainable weight)",
              sim_exe_output_buffer(e, 0), (const double[]){ 7.5 }, 1);
        sim_exe_free(e);
    }
    sim_model_free(m);
    /* ReduceMax between a weight and the loss: refused while it had no gradient rule (every
     * differentiable op has one now; autodiff.c keeps the refusal for one that does not) */
    b = sim_ob_new(13);
    sim_ob_input(b, "x", F32, 2, DIMS(2, 3));
    sim_ob_initializer(b, "w", F32, 1, DIMS(3), FLOATS(1, 2, 3));
    sim_ob_node(b, "Mul", "m", "x,w", "xw");
    sim_ob_node(b, "ReduceMax", "mx", "xw", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    m = test_ob_load(b);
    {
        struct sim_exe *e = NULL;
        struct sim_err err = { 0 };
        if (sim_compile(m, &o, &e, &err) != 0)
            fail_msg("ReduceMax in training: %s", err.msg);
        sim_exe_free(e);
    }
    sim_model_free(m);
    /* CtcLoss limits (PopTorch's) */
    m = ctc_model("none", false, 2);
    sim_compile_opts_init(&o);
    expect_compile_error(m, &o, IPUOF_E_UNSUPPORTED, "reduction \"none\"");
    sim_model_free(m);
    m = ctc_model("mean", false, 1);
    expect_compile_error(m, &o, IPUOF_E_UNSUPPORTED, "targets must be 2-D");
    sim_model_free(m);
}

static void
test_label_out_of_range(void **state)
{
    struct sim_model *m = small_model(true);
    struct sim_compile_opts o;
    struct sim_exe *e;
    struct sim_err err;
    float w0[6], w1[6];

    (void)state;
    train_opts(&o, SIM_OPT_SGD);
    o.device_iterations = 1;
    e = test_compile_ok(m, &o);
    assert_int_equal(sim_exe_read_weight(e, "fc.w", w0, sizeof(w0), &err), 0);
    fill_small(e, 7);
    assert_int_equal(sim_exe_run(e, &err), IPUOF_E_INVAL);
    printf("  refused at run time: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "'ce' (SoftmaxCrossEntropyLoss)"));
    assert_non_null(strstr(err.msg, "label 7"));
    assert_non_null(strstr(err.msg, "3 classes"));
    /* no step was taken, and the executable is still usable */
    assert_int_equal(sim_exe_optimizer_steps(e), 0);
    assert_int_equal(sim_exe_read_weight(e, "fc.w", w1, sizeof(w1), &err), 0);
    assert_memory_equal(w0, w1, sizeof(w0));
    fill_small(e, -1);
    test_run_ok(e);
    assert_int_equal(sim_exe_optimizer_steps(e), 1);
    sim_exe_free(e);
    sim_model_free(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cross_entropy_values),
        cmocka_unit_test(test_nll_values),
        cmocka_unit_test(test_ctc_values),
        cmocka_unit_test(test_ctc_blank_in_target),
        cmocka_unit_test(test_weights_api),
        cmocka_unit_test(test_show_buffer),
        cmocka_unit_test(test_save_onnx),
        cmocka_unit_test(test_memory_report),
        cmocka_unit_test(test_option_errors),
        cmocka_unit_test(test_graph_errors),
        cmocka_unit_test(test_label_out_of_range),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
