/*
 * test_sim_conv_dnnl.c — Conv's backward through oneDNN (conv_dnnl_bwd.c) against the
 * hand-written one (op_conv.c), on a training step of a small graph per shape.
 *
 * Each case is one convolution shape, taken from a branch of op_conv.c's backward rule (the
 * comment of each row says which side the rule picks). The graph
 *     a = Conv1x1(x, w0)                   x a graph input: its gradient is not wanted
 *     y1 = Conv(a, w1, b1); y2 = Conv(a, w2)   the case's shape, twice: a has two
 *                                          consumers whose input gradients accumulate
 *     loss = ReduceSum((y1 + y2) * r)      r a frozen random weight
 * is compiled for training (SGD, lr 0, gradient accumulation 2, so the weights' gradients
 * add over two micro-batches too) with IPUOF_SIM_CONV_BWD=own (the hand-written backward),
 * =dnnl (oneDNN's), =data (oneDNN's input gradient, the hand-written weight gradient) and
 * unset (op_conv.c's rule), the forward keeping its rule; each is run once and every
 * weight's applied gradient (sim_exe_read_gradient) is compared with the own run's:
 * max |other - own| / max |own| must stay under 1e-5: oneDNN's kernels sum in another
 * order than im2col + GEMM, and in another again at each instruction set (tests/run.sh runs
 * this test at every level the machine has; at most 1.22e-6 at avx512, avx2 and baseline).
 * The batch of 5 images does not split evenly over two pool threads (pieces of 3 and 2).
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
#define A_STEPS 2

struct ccase {
    const char *what;
    int64_t n, c, h, w, m, k, s, p, d, group;
};

static const struct ccase cases[] = {
    /* oneDNN's whole backward by the rule: 3x3 over 8 or more channels with 1 024 or more
     * output positions over the batch (1 280); depthwise 3x3, narrow and wide */
    { "3x3, 16 channels, 1280 positions", 5, 16, 16, 16, 16, 3, 1, 1, 1, 1 },
    { "depthwise 3x3, 12 wide", 5, 16, 12, 12, 16, 3, 1, 1, 1, 16 },
    { "depthwise 3x3, 40 wide", 5, 8, 20, 40, 8, 3, 1, 1, 1, 8 },
    /* oneDNN's input gradient, the own weight gradient by the rule: 3x3 layers with fewer
     * positions (500, and 180 with stride 2), depthwise 5x5 */
    { "3x3, 16 channels, 500 positions", 5, 16, 10, 10, 16, 3, 1, 1, 1, 1 },
    { "3x3 stride 2, 8 -> 24 channels", 5, 8, 11, 11, 24, 3, 2, 1, 1, 1 },
    { "depthwise 5x5 stride 2", 5, 8, 17, 17, 8, 5, 2, 2, 1, 8 },
    /* own kernels by the rule: a 7x7 stem over 3 channels, 3x3 over few channels,
     * grouped and dilated, pointwise (oneDNN must still agree when forced) */
    { "7x7 stem, stride 2, pad 3", 5, 3, 20, 20, 8, 7, 2, 3, 1, 1 },
    { "3x3 over 4 channels", 5, 4, 9, 9, 6, 3, 1, 0, 1, 1 },
    { "groups 2, dilation 2", 5, 8, 12, 12, 8, 3, 1, 2, 2, 2 },
    { "pointwise", 5, 16, 7, 7, 32, 1, 1, 0, 1, 1 },
};

static uint64_t rng_state;

/* In [-1, 1) (test_urand01, obload.h). */
static float
urand(void)
{
    return test_urand01(&rng_state) * 2.0f - 1.0f;
}

/* An initializer of urand() values (test_ob_init_rand, obload.h). */
static void
init_rand(struct sim_ob *b, const char *name, int rank, const int64_t *d)
{
    test_ob_init_rand(b, name, rank, d, &rng_state, 1.0f);
}

static void
conv_attrs(struct sim_ob *b, const struct ccase *cc)
{
    int64_t k[2] = { cc->k, cc->k }, s[2] = { cc->s, cc->s }, d[2] = { cc->d, cc->d };
    int64_t p[4] = { cc->p, cc->p, cc->p, cc->p };

    sim_ob_attr_ints(b, "kernel_shape", k, 2);
    sim_ob_attr_ints(b, "strides", s, 2);
    sim_ob_attr_ints(b, "dilations", d, 2);
    sim_ob_attr_ints(b, "pads", p, 4);
    sim_ob_attr_int(b, "group", cc->group);
}

/* The case's model (caller frees). */
static struct sim_model *
case_model(const struct ccase *cc)
{
    struct sim_ob *b = sim_ob_new(13);
    int64_t oh = (cc->h + 2 * cc->p - cc->d * (cc->k - 1) - 1) / cc->s + 1;
    int64_t ow = (cc->w + 2 * cc->p - cc->d * (cc->k - 1) - 1) / cc->s + 1;
    struct sim_model *m = NULL;
    struct sim_err err;
    void *bytes;
    size_t len;

    rng_state = 0x2545f4914f6cdd1dull;
    assert_non_null(b);
    sim_ob_input(b, "x", F32, 4, (const int64_t[]){ cc->n, cc->c, cc->h, cc->w });
    init_rand(b, "w0", 4, (const int64_t[]){ cc->c, cc->c, 1, 1 });
    init_rand(b, "w1", 4, (const int64_t[]){ cc->m, cc->c / cc->group, cc->k, cc->k });
    init_rand(b, "b1", 1, (const int64_t[]){ cc->m });
    init_rand(b, "w2", 4, (const int64_t[]){ cc->m, cc->c / cc->group, cc->k, cc->k });
    init_rand(b, "r", 4, (const int64_t[]){ cc->n, cc->m, oh, ow });
    sim_ob_node(b, "Conv", "c0", "x,w0", "a");
    sim_ob_node(b, "Conv", "c1", "a,w1,b1", "y1");
    conv_attrs(b, cc);
    sim_ob_node(b, "Conv", "c2", "a,w2", "y2");
    conv_attrs(b, cc);
    sim_ob_node(b, "Add", "add", "y1,y2", "s");
    sim_ob_node(b, "Mul", "weigh", "s,r", "sr");
    sim_ob_node(b, "ReduceSum", "total", "sr", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    if (sim_model_load(bytes, len, &m, &err) != 0)
        fail_msg("%s: %s", cc->what, err.msg);
    free(bytes);
    sim_ob_free(b);
    return m;
}

static const char *const weights[] = { "w0", "w1", "b1", "w2" };
#define N_WEIGHTS (sizeof(weights) / sizeof(weights[0]))

/* Runs one training step of cc's model with the backward forced to `side` (NULL: the
 * rule's choice); grads[i] gets
 * weight i's applied gradient (malloc'd, caller frees), n[i] its element count. */
static void
train_once(const struct ccase *cc, const char *side, float *grads[N_WEIGHTS],
           size_t n[N_WEIGHTS])
{
    static const char *frozen[] = { "r" };
    struct sim_model *m = case_model(cc);
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_io_info info;
    struct sim_err err;
    float *in;

    if (side != NULL)
        setenv("IPUOF_SIM_CONV_BWD", side, 1);
    sim_compile_opts_init(&o);
    o.loss = "loss";
    sim_optimizer_init(&o.optimizer, SIM_OPT_SGD);
    o.optimizer.lr = 0.0f;
    o.gradient_accumulation = A_STEPS;
    o.frozen_weights = frozen;
    o.n_frozen_weights = 1;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("%s (%s): %s", cc->what, side ? side : "rule", err.msg);
    unsetenv("IPUOF_SIM_CONV_BWD");
    assert_int_equal(sim_exe_input_info(e, 0, &info), 0);
    in = sim_exe_input_buffer(e, 0);
    rng_state = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < info.run_bytes / sizeof(float); i++)
        in[i] = urand();
    if (sim_exe_run(e, &err) != 0)
        fail_msg("%s (%s): %s", cc->what, side ? side : "rule", err.msg);
    for (size_t i = 0; i < N_WEIGHTS; i++) {
        struct sim_weight_info wi;
        assert_int_equal(sim_exe_weight_info(e, (size_t)sim_exe_weight_index(e, weights[i]),
                                             &wi), 0);
        n[i] = wi.bytes / sizeof(float);
        grads[i] = malloc(wi.bytes);
        assert_non_null(grads[i]);
        assert_int_equal(sim_exe_read_gradient(e, weights[i], grads[i], wi.bytes, &err), 0);
    }
    sim_exe_free(e);
    sim_model_free(m);
}

static void
test_dnnl_backward_matches_own(void **state)
{
    static const char *const sides[] = { "dnnl", "data", NULL };
    double worst = 0.0;

    (void)state;
    unsetenv("IPUOF_SIM_CONV");
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const struct ccase *cc = &cases[c];
        float *own[N_WEIGHTS];
        size_t n[N_WEIGHTS];
        train_once(cc, "own", own, n);
        for (size_t sd = 0; sd < sizeof(sides) / sizeof(sides[0]); sd++) {
            const char *side = sides[sd] != NULL ? sides[sd] : "rule";
            float *oth[N_WEIGHTS];
            size_t n2[N_WEIGHTS];
            train_once(cc, sides[sd], oth, n2);
            for (size_t i = 0; i < N_WEIGHTS; i++) {
                double diff = 0.0, scale = 0.0, rel;
                assert_int_equal(n[i], n2[i]);
                for (size_t k = 0; k < n[i]; k++) {
                    diff = fmax(diff, fabs((double)oth[i][k] - (double)own[i][k]));
                    scale = fmax(scale, fabs((double)own[i][k]));
                }
                rel = diff / (scale > 0.0 ? scale : 1.0);
                printf("%-32s %-4s d%-3s max |%s - own| %.3e  max |own| %.3e  relative %.2e\n",
                       cc->what, side, weights[i], side, diff, scale, rel);
                assert_true(scale > 0.0);   /* the gradient is not trivially zero */
                if (rel > 1e-5)
                    fail_msg("%s, backward %s: gradient of %s differs by %.3e relative "
                             "(tolerance 1e-5)", cc->what, side, weights[i], rel);
                worst = fmax(worst, rel);
                free(oth[i]);
            }
        }
        for (size_t i = 0; i < N_WEIGHTS; i++)
            free(own[i]);
    }
    printf("worst relative difference %.2e (tolerance 1e-5)\n", worst);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dnnl_backward_matches_own),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
