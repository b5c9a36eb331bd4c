/*
 * test_sim_train_grad.c — every op's gradient rule against central finite differences,
 * driven by tables with at least one case per differentiable op (ggml's gradient check),
 * one per op family in tests/util: gradcases_math.c (elementwise, activations, MatMul and
 * Gemm, losses, reductions), gradcases_layers.c (convolutions, pools, normalizations,
 * Dropout, Resize, recurrent layers) and gradcases_shape.c (Reshape to TopK).
 *
 * Each case builds a small graph whose differentiable operands are float initializers
 * (trainable weights), appends loss = ReduceSum(y * r) with r a fixed random frozen weight,
 * compiles it for training with SGD lr = 0 (so runs never change the weights) and compares
 * the gradient the executable applied (sim_exe_read_gradient) with
 * (loss(w + eps) - loss(w - eps)) / (2 eps) for every element of every weight. The error of
 * an element is |analytic - numeric| / (1 + |numeric|); the max per op is printed and must
 * stay under the case's tolerance. Inputs of ops with kinks (Relu, Abs, MaxPool, Clip) are
 * kept away from the kinks by more than eps. A case's random data is seeded by its op and
 * description, so cases may be added anywhere. Dropout cases restart the generator before
 * every run so each run draws the same mask.
 * test_tables_cover_every_op fails when an op with a backward rule has no case or does not
 * declare what its rule reads of the forward (bwd_reads: the memory plan frees the rest,
 * and the backward runs with those views NULL, so a wrong record fails its case here), or
 * when an op the training issue lists lacks a backward rule.
 * Not here: training runs, optimizers, losses' forward values (test_sim_train.c).
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

#include "gradcases.h"
#include "onnx_build.h"
#include "ops.h"
#include "sim.h"

/* The three tables, in the order they run. */
static const struct {
    const char *family;
    const struct gcase *cases;
    const size_t *n;
} tables[] = {
    {"math", gradcases_math, &gradcases_math_n},
    {"layers", gradcases_layers, &gradcases_layers_n},
    {"shape", gradcases_shape, &gradcases_shape_n},
};

/* The generator's seed for case gc: FNV-1a of its op and description. */
static uint64_t
case_seed(const struct gcase *gc)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (const char *s = gc->op; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    h = (h ^ 0xffu) * 0x100000001b3ull;
    for (const char *s = gc->what; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h != 0 ? h : 1; /* xorshift never leaves 0 */
}

/* ---- harness ----------------------------------------------------------------------------- */

static struct sim_model *
load(struct sim_ob *b)
{
    struct sim_model *m = NULL;
    struct sim_err err;
    void *bytes;
    size_t len;

    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    if (sim_model_load(bytes, len, &m, &err) != 0)
        fail_msg("%s", err.msg);
    free(bytes);
    return m;
}

/* Builds the case, once to learn y's shape, then with the loss appended. */
static struct sim_model *
case_model(const struct gcase *gc, uint64_t seed)
{
    struct sim_ob *b = sim_ob_new(17);
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_model *m;
    struct sim_err err;
    int64_t dims[SIM_MAX_RANK];
    int dtype, rank;

    gc_reset(seed);
    gc->build(b);
    sim_ob_output(b, "y", F32);
    m = load(b);
    sim_ob_free(b);
    sim_compile_opts_init(&o);
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("%s (%s): %s", gc->op, gc->what, err.msg);
    assert_int_equal(sim_exe_tensor_info(e, "y", &dtype, &rank, dims), 0);
    sim_exe_free(e);
    sim_model_free(m);

    b = sim_ob_new(17);
    gc_reset(seed);
    gc->build(b);
    gc_fconst(b, "r", rank, dims, D_ANY);
    sim_ob_node(b, "Mul", "weigh", "y,r", "yr");
    sim_ob_node(b, "ReduceSum", "total", "yr", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    m = load(b);
    sim_ob_free(b);
    return m;
}

static float
run_loss(struct sim_exe *e, bool reseed)
{
    struct sim_err err;

    if (reseed)
        assert_int_equal(sim_exe_set_seed(e, 7, &err), 0);
    if (sim_exe_run(e, &err) != 0)
        fail_msg("%s", err.msg);
    return ((const float *)sim_exe_output_buffer(e, 0))[0];
}

/* Max error of one case over every element of every weight. */
static double
check_case(const struct gcase *gc, uint64_t seed)
{
    static const char *frozen[] = { "r" };
    struct sim_model *m = case_model(gc, seed);
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;
    double maxerr = 0.0;
    bool reseed = strcmp(gc->op, "Dropout") == 0;
    const char *const *params;
    int n_params;

    sim_compile_opts_init(&o);
    o.loss = "loss";
    sim_optimizer_init(&o.optimizer, SIM_OPT_SGD);
    o.optimizer.lr = 0.0f;
    o.frozen_weights = frozen;
    o.n_frozen_weights = 1;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("%s (%s): %s", gc->op, gc->what, err.msg);
    run_loss(e, reseed);
    params = gc_params(&n_params);
    for (int p = 0; p < n_params; p++) {
        long wi = sim_exe_weight_index(e, params[p]);
        struct sim_weight_info info;
        float *w, *grad;
        size_t n;
        assert_true(wi >= 0);
        sim_exe_weight_info(e, (size_t)wi, &info);
        if (info.kind != SIM_WEIGHT_TRAINABLE)
            fail_msg("%s (%s): weight '%s' is not trainable", gc->op, gc->what, params[p]);
        n = info.bytes / sizeof(float);
        w = malloc(info.bytes + 4);
        grad = malloc(info.bytes + 4);
        assert_non_null(w);
        assert_non_null(grad);
        run_loss(e, reseed);    /* the gradient at the unperturbed weights */
        assert_int_equal(sim_exe_read_gradient(e, params[p], grad, info.bytes, &err), 0);
        assert_int_equal(sim_exe_read_weight(e, params[p], w, info.bytes, &err), 0);
        for (size_t i = 0; i < n; i++) {
            float keep = w[i], lp, lm;
            double num, d;
            w[i] = keep + gc->eps;
            assert_int_equal(sim_exe_write_weight(e, params[p], w, info.bytes, &err), 0);
            lp = run_loss(e, reseed);
            w[i] = keep - gc->eps;
            assert_int_equal(sim_exe_write_weight(e, params[p], w, info.bytes, &err), 0);
            lm = run_loss(e, reseed);
            w[i] = keep;
            assert_int_equal(sim_exe_write_weight(e, params[p], w, info.bytes, &err), 0);
            num = ((double)lp - (double)lm) / (2.0 * gc->eps);
            d = fabs((double)grad[i] - num) / (1.0 + fabs(num));
            if (!(d <= gc->tol))
                printf("  %s (%s): d loss / d %s[%zu] = %.6g, central difference %.6g\n",
                       gc->op, gc->what, params[p], i, grad[i], num);
            if (!(d <= maxerr))
                maxerr = d;
        }
        free(w);
        free(grad);
    }
    sim_exe_free(e);
    sim_model_free(m);
    return maxerr;
}

/* Checks every case of table t, with the weights as the op's inputs and then through an
 * Identity (activations, which the plan frees before the backward step unless the op's
 * rule reads them: bwd_reads); fails when one is beyond its tolerance. */
static void
check_table(size_t t)
{
    int failed = 0;

    for (int via = 0; via < 2; via++) {
        gc_set_via_identity(via != 0);
        for (size_t c = 0; c < *tables[t].n; c++) {
            const struct gcase *gc = &tables[t].cases[c];
            double err = check_case(gc, case_seed(gc));
            bool ok = err <= gc->tol;
            printf("%-26s %-46s max error %.2e (tol %.0e) %s%s\n", gc->op, gc->what, err,
                   (double)gc->tol, ok ? "OK" : "NOT OK", via ? " (via Identity)" : "");
            failed += !ok;
        }
    }
    gc_set_via_identity(false);
    printf("%s: %zu cases, each twice\n", tables[t].family, *tables[t].n);
    assert_int_equal(failed, 0);
}

static void test_gradients_math(void **state) { (void)state; check_table(0); }
static void test_gradients_layers(void **state) { (void)state; check_table(1); }
static void test_gradients_shape(void **state) { (void)state; check_table(2); }

/* The ops the training issue requires gradients for. */
static const char *const required[] = {
    "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Sqrt", "Exp", "Log", "Pow", "Erf", "Clip",
    "MatMul", "Gemm", "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "Relu",
    "LeakyRelu", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "BatchNormalization",
    "LayerNormalization", "Dropout", "Reshape", "Flatten", "Transpose", "Concat", "Squeeze",
    "Unsqueeze", "Identity", "Gather", "Slice", "ReduceMean", "ReduceSum", "Cast",
    "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss", "CtcLoss", "HardSigmoid",
    "HardSwish", "Elu", "Softplus", "Pad", "Split", "ScatterND", "ReduceL1", "ReduceL2",
    "ReduceSumSquare", "ReduceLogSumExp", "ReduceProd", "Where", "Mod", "Expand", /* issue 19: */
    "InstanceNormalization", "Max", "Min", "PRelu", "Selu", "Celu", "Sign", "Round", "Tile",
    "DepthToSpace", "SpaceToDepth", "Trilu", "CumSum", "TopK", "ScatterElements", "ReduceMax",
    "ReduceMin", /* issue 27: */ "OneHot",
};

static void
check_covered(const struct sim_op *op, void *ud)
{
    int *missing = ud;
    bool found = false;

    if (op->backward == NULL)
        return;
    if (!(op->bwd_reads & SIM_BWD_DECL)) {
        printf("op %s has a backward rule but does not declare what it reads (bwd_reads)\n",
               op->name);
        (*missing)++;
    }
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (size_t c = 0; c < *tables[t].n; c++)
            found = found || strcmp(tables[t].cases[c].op, op->name) == 0;
    if (!found) {
        printf("op %s has a backward rule but no gradient-check case\n", op->name);
        (*missing)++;
    }
}

static void
test_tables_cover_every_op(void **state)
{
    int missing = 0;

    (void)state;
    sim_op_foreach(check_covered, &missing);
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        const struct sim_op *op = sim_op_find(required[i]);
        if (op == NULL)
            op = sim_op_find_in("ai.graphcore", required[i]);
        if (op == NULL || op->backward == NULL) {
            printf("op %s has no backward rule\n", required[i]);
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables_cover_every_op),
        cmocka_unit_test(test_gradients_math),
        cmocka_unit_test(test_gradients_layers),
        cmocka_unit_test(test_gradients_shape),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
