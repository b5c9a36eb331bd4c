/*
 * test_sim_train.c — training runs: PyTorch golden values (tests/data/train_golden.txt,
 * written by tests/data/gen_train_golden.py) for an MLP with SGD (momentum, Nesterov,
 * weight decay), Adam and AdamW, a CNN with BatchNormalization (weights, running
 * statistics, and the inference executable built from the trained one) and an MSE loss
 * made of ordinary ops; each optimizer against its formula on a loss whose gradient is
 * known exactly, with hyper-parameters changed between runs; replica and accumulation
 * equivalence; per-replica running statistics updated once per micro-batch; Dropout
 * reproducibility from the seed; output modes and the [D][A][R][B] run layout; the time of
 * one training step of the tutorial's MNIST CNN (printed, not asserted).
 * Each comparison prints the max difference it saw.
 * Not here: gradient rules (test_sim_train_grad.c), loss values, weights API and errors
 * (test_sim_train_api.c).
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
#include <time.h>

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define I64 SIM_DTYPE_INT64
#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }

/* ---- golden values ------------------------------------------------------------------- */

struct golden {
    char name[96];
    int n;
    float *v;
};

static struct golden *gold;
static int n_gold;

static int
load_golden(void **state)
{
    const char *path = getenv("IPUOF_TRAIN_GOLDEN");
    char buf[512], *line = NULL;
    size_t cap = 0;
    FILE *f;

    (void)state;
    if (path == NULL) {
        /* tests/unit/test_sim_train.c -> tests/data/train_golden.txt */
        const char *src = __FILE__, *slash = strrchr(src, '/');
        int dir = slash != NULL ? (int)(slash - src) : 0;
        snprintf(buf, sizeof(buf), "%.*s/../data/train_golden.txt", dir, src);
        path = buf;
    }
    f = fopen(path, "r");
    if (f == NULL) {
        printf("cannot open %s\n", path);
        return -1;
    }
    while (getline(&line, &cap, f) > 0) {
        struct golden *g;
        char *p = line, *end;
        if (line[0] == '#')
            continue;
        gold = realloc(gold, (size_t)(n_gold + 1) * sizeof(*gold));
        if (gold == NULL)
            return -1;
        g = &gold[n_gold++];
        if (sscanf(p, "%95s %d", g->name, &g->n) != 2 || g->n < 0)
            return -1;
        g->v = malloc((size_t)g->n * sizeof(float) + 4);
        if (g->v == NULL)
            return -1;
        p = strchr(p, ' ') + 1;
        p = strchr(p, ' ');
        for (int i = 0; i < g->n; i++) {
            g->v[i] = strtof(p, &end);
            if (end == p)
                return -1;
            p = end;
        }
    }
    free(line);
    fclose(f);
    return 0;
}

static int
free_golden(void **state)
{
    (void)state;
    for (int i = 0; i < n_gold; i++)
        free(gold[i].v);
    free(gold);
    return 0;
}

static const struct golden *
G(const char *fmt, const char *tag)
{
    char name[128];

    snprintf(name, sizeof(name), fmt, tag);
    for (int i = 0; i < n_gold; i++)
        if (strcmp(gold[i].name, name) == 0)
            return &gold[i];
    fail_msg("golden value %s is missing", name);
    return NULL;
}

/* ---- helpers --------------------------------------------------------------------------- */

static void
set_input_f(struct sim_exe *e, const char *name, const float *v, size_t n)
{
    long i = sim_exe_input_index(e, name);
    struct sim_io_info info;

    assert_true(i >= 0);
    sim_exe_input_info(e, (size_t)i, &info);
    assert_int_equal(info.run_bytes, n * sizeof(float));
    memcpy(sim_exe_input_buffer(e, (size_t)i), v, n * sizeof(float));
}

/* Labels stored as floats in the golden file, written as int64. */
static void
set_input_labels(struct sim_exe *e, const char *name, const float *v, size_t n)
{
    long i = sim_exe_input_index(e, name);
    int64_t *dst;

    assert_true(i >= 0);
    dst = sim_exe_input_buffer(e, (size_t)i);
    for (size_t k = 0; k < n; k++)
        dst[k] = (int64_t)v[k];
}

static void
init_weight(struct sim_ob *b, const char *name, int rank, const int64_t *d, const float *v)
{
    sim_ob_initializer(b, name, F32, rank, d, v);
}

static double
max_diff(const float *a, const float *b, size_t n)
{
    double m = 0.0;

    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (!(d <= m))
            m = d;
    }
    return m;
}

/* Compares weight `name` of e with n expected values. */
static double
weight_diff(struct sim_exe *e, const char *name, const float *want, size_t n)
{
    float *got = malloc(n * sizeof(float) + 4);
    struct sim_err err;
    double d;

    assert_non_null(got);
    if (sim_exe_read_weight(e, name, got, n * sizeof(float), &err) != 0)
        fail_msg("%s", err.msg);
    d = max_diff(got, want, n);
    free(got);
    return d;
}

/* ---- models ---------------------------------------------------------------------------- */

/* x (B, 6) -> Gemm(8) -> Relu -> Gemm(3) = logits; loss = CrossEntropy(logits, y) */
static struct sim_model *
mlp_model(const char *tag, bool with_loss)
{
    struct sim_ob *b = sim_ob_new(17);

    sim_ob_input(b, "x", F32, 2, DIMS(-1, 6));
    if (with_loss)
        sim_ob_input(b, "y", I64, 1, DIMS(-1));
    init_weight(b, "0.weight", 2, DIMS(8, 6), G("%s.init.0.weight", tag)->v);
    init_weight(b, "0.bias", 1, DIMS(8), G("%s.init.0.bias", tag)->v);
    init_weight(b, "2.weight", 2, DIMS(3, 8), G("%s.init.2.weight", tag)->v);
    init_weight(b, "2.bias", 1, DIMS(3), G("%s.init.2.bias", tag)->v);
    sim_ob_node(b, "Gemm", "fc0", "x,0.weight,0.bias", "h");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "Relu", "act", "h", "h2");
    sim_ob_node(b, "Gemm", "fc2", "h2,2.weight,2.bias", "logits");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_output(b, "logits", F32);
    if (with_loss) {
        sim_ob_node(b, "SoftmaxCrossEntropyLoss", "ce", "logits,y", "loss");
        sim_ob_output(b, "loss", F32);
    }
    return test_ob_load(b);
}

static const char *const mlp_weights[] = { "0.weight", "0.bias", "2.weight", "2.bias" };
static const size_t mlp_sizes[] = { 48, 8, 24, 3 };

static void
golden_mlp(const char *tag, const struct sim_optimizer *opt)
{
    struct sim_model *m = mlp_model(tag, true);
    struct sim_output_opt mode = { "loss", { SIM_OUTPUT_ALL, 0 } };
    struct sim_compile_opts o;
    struct sim_exe *e;
    double dl, dw = 0.0;
    char name[64];

    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.optimizer = *opt;
    o.device_iterations = 3;
    o.micro_batch = 8;
    o.output_modes = &mode;
    o.n_output_modes = 1;
    e = test_compile_ok(m, &o);
    set_input_f(e, "x", G("%s.x", tag)->v, 144);
    set_input_labels(e, "y", G("%s.y", tag)->v, 24);
    test_run_ok(e);
    dl = max_diff(sim_exe_output_buffer(e, (size_t)sim_exe_output_index(e, "loss")),
                  G("%s.loss", tag)->v, 3);
    for (int i = 0; i < 4; i++) {
        double d;
        snprintf(name, sizeof(name), "%%s.final.%s", mlp_weights[i]);
        d = weight_diff(e, mlp_weights[i], G(name, tag)->v, mlp_sizes[i]);
        dw = d > dw ? d : dw;
    }
    printf("%s vs torch.optim: max |loss diff| %.2e, max |weight diff| %.2e after 3 steps\n",
           tag, dl, dw);
    assert_true(dl < 1e-5);
    assert_true(dw < 1e-5);
    assert_int_equal(sim_exe_optimizer_steps(e), 3);
    sim_exe_free(e);
    sim_model_free(m);
}

/* IPUOF_SIM_PROFILE=1 at compile: every node's forward and backward counted once per
 * micro-batch and timed, the losses bit-identical to an executable compiled without it
 * (which reports no rows). */
static void
test_node_times(void **state)
{
    struct sim_model *m = mlp_model("mlp_sgd", true);
    struct sim_output_opt mode = { "loss", { SIM_OUTPUT_ALL, 0 } };
    struct sim_node_time rows[8];
    struct sim_compile_opts o;
    struct sim_exe *e[2];
    uint64_t ns = 0;
    size_t n;

    (void)state;
    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.device_iterations = 3;
    o.micro_batch = 8;
    o.output_modes = &mode;
    o.n_output_modes = 1;
    for (int i = 0; i < 2; i++) {
        if (i == 1)
            setenv("IPUOF_SIM_PROFILE", "1", 1);
        e[i] = test_compile_ok(m, &o);
        unsetenv("IPUOF_SIM_PROFILE");
        set_input_f(e[i], "x", G("%s.x", "mlp_sgd")->v, 144);
        set_input_labels(e[i], "y", G("%s.y", "mlp_sgd")->v, 24);
        test_run_ok(e[i]);
    }
    assert_int_equal(sim_exe_node_times(e[0], rows, 8), 0);
    n = sim_exe_node_times(e[1], rows, 8);
    assert_int_equal(n, 4);             /* fc0, act, fc2, ce */
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(rows[i].calls[0], 3);
        assert_int_equal(rows[i].calls[1], 3);
        assert_non_null(rows[i].op);
        ns += rows[i].ns[0] + rows[i].ns[1];
    }
    assert_string_equal(rows[0].op, "Gemm");
    assert_string_equal(rows[1].op, "Relu");
    assert_true(ns > 0);
    assert_memory_equal(sim_exe_output_buffer(e[0], (size_t)sim_exe_output_index(e[0], "loss")),
                        sim_exe_output_buffer(e[1], (size_t)sim_exe_output_index(e[1], "loss")),
                        3 * sizeof(float));
    sim_exe_free(e[0]);
    sim_exe_free(e[1]);
    sim_model_free(m);
}

static void
test_golden_mlp_sgd(void **state)
{
    struct sim_optimizer opt;

    (void)state;
    sim_optimizer_init(&opt, SIM_OPT_SGD);
    opt.lr = 0.1f;
    opt.momentum = 0.9f;
    opt.nesterov = 1;
    opt.weight_decay = 0.01f;
    golden_mlp("mlp_sgd", &opt);
}

static void
test_golden_mlp_adam(void **state)
{
    struct sim_optimizer opt;

    (void)state;
    sim_optimizer_init(&opt, SIM_OPT_ADAM);
    opt.lr = 0.01f;
    opt.weight_decay = 0.01f;
    golden_mlp("mlp_adam", &opt);
}

static void
test_golden_mlp_adamw(void **state)
{
    struct sim_optimizer opt;

    (void)state;
    sim_optimizer_init(&opt, SIM_OPT_ADAMW);
    opt.lr = 0.01f;
    golden_mlp("mlp_adamw", &opt);
}

/* x (B,1,6,6) -> Conv(2, 3x3) -> BatchNorm -> Relu -> Flatten -> Gemm(3) [-> CE loss] */
static struct sim_model *
cnn_model(bool with_loss)
{
    struct sim_ob *b = sim_ob_new(17);

    sim_ob_input(b, "x", F32, 4, DIMS(-1, 1, 6, 6));
    if (with_loss)
        sim_ob_input(b, "y", I64, 1, DIMS(-1));
    init_weight(b, "0.weight", 4, DIMS(2, 1, 3, 3), G("cnn.init.0.weight", "")->v);
    init_weight(b, "0.bias", 1, DIMS(2), G("cnn.init.0.bias", "")->v);
    init_weight(b, "1.weight", 1, DIMS(2), G("cnn.init.1.weight", "")->v);
    init_weight(b, "1.bias", 1, DIMS(2), G("cnn.init.1.bias", "")->v);
    init_weight(b, "1.running_mean", 1, DIMS(2), G("cnn.init.1.running_mean", "")->v);
    init_weight(b, "1.running_var", 1, DIMS(2), G("cnn.init.1.running_var", "")->v);
    init_weight(b, "4.weight", 2, DIMS(3, 32), G("cnn.init.4.weight", "")->v);
    init_weight(b, "4.bias", 1, DIMS(3), G("cnn.init.4.bias", "")->v);
    sim_ob_node(b, "Conv", "conv", "x,0.weight,0.bias", "c");
    sim_ob_node(b, "BatchNormalization", "bn",
                "c,1.weight,1.bias,1.running_mean,1.running_var", "n");
    sim_ob_attr_float(b, "momentum", 0.9f);     /* PyTorch's momentum 0.1 */
    if (with_loss)      /* exported in train() (the training model) or eval() */
        sim_ob_attr_int(b, "training_mode", 1);
    sim_ob_node(b, "Relu", "act", "n", "r");
    sim_ob_node(b, "Flatten", "flat", "r", "f");
    sim_ob_node(b, "Gemm", "fc", "f,4.weight,4.bias", "logits");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_output(b, "logits", F32);
    if (with_loss) {
        sim_ob_node(b, "SoftmaxCrossEntropyLoss", "ce", "logits,y", "loss");
        sim_ob_output(b, "loss", F32);
    }
    return test_ob_load(b);
}

static void
test_golden_cnn_bn(void **state)
{
    static const char *const names[] = { "0.weight", "0.bias", "1.weight", "1.bias",
                                          "1.running_mean", "1.running_var", "4.weight",
                                          "4.bias" };
    static const size_t sizes[] = { 18, 2, 2, 2, 2, 2, 96, 3 };
    struct sim_model *m = cnn_model(true), *mi = cnn_model(false);
    struct sim_output_opt mode = { "loss", { SIM_OUTPUT_ALL, 0 } };
    struct sim_compile_opts o;
    struct sim_exe *e, *inf = NULL, *inf2;
    struct sim_weight_info wi;
    struct sim_err err;
    double dl, dw = 0.0, de, de2;
    char name[64];

    (void)state;
    sim_compile_opts_init(&o);
    o.loss = "loss";
    sim_optimizer_init(&o.optimizer, SIM_OPT_SGD);
    o.optimizer.lr = 0.1f;
    o.device_iterations = 2;
    o.micro_batch = 4;
    o.output_modes = &mode;
    o.n_output_modes = 1;
    e = test_compile_ok(m, &o);
    assert_int_equal(sim_exe_weight_info(e, (size_t)sim_exe_weight_index(e, "1.running_var"),
                                         &wi), 0);
    assert_int_equal(wi.kind, SIM_WEIGHT_BUFFER);
    set_input_f(e, "x", G("cnn.x", "")->v, 2 * 4 * 36);
    set_input_labels(e, "y", G("cnn.y", "")->v, 8);
    test_run_ok(e);
    dl = max_diff(sim_exe_output_buffer(e, 1), G("cnn.loss", "")->v, 2);
    for (int i = 0; i < 8; i++) {
        double d;
        snprintf(name, sizeof(name), "cnn.final.%s", names[i]);
        d = weight_diff(e, names[i], G("%s", name)->v, sizes[i]);
        dw = d > dw ? d : dw;
    }
    printf("Conv-BatchNorm-Relu-Gemm vs torch (2 SGD steps): max |loss diff| %.2e, max "
           "|weight / running stat diff| %.2e\n", dl, dw);
    assert_true(dl < 1e-5);
    assert_true(dw < 1e-5);

    /* the inference model of the same module, with the trained weights (eval mode) */
    sim_compile_opts_init(&o);
    o.micro_batch = 4;
    if (sim_compile_inference_from(mi, &o, e, &inf, &err) != 0)
        fail_msg("%s", err.msg);
    set_input_f(inf, "x", G("cnn.x", "")->v, 4 * 36);
    test_run_ok(inf);
    de = max_diff(sim_exe_output_buffer(inf, 0), G("cnn.eval", "")->v, 12);
    /* the same through an inference executable compiled first, then updated */
    o.updatable_weights = 1;
    inf2 = test_compile_ok(mi, &o);
    if (sim_exe_copy_weights(inf2, e, &err) != 0)
        fail_msg("%s", err.msg);
    set_input_f(inf2, "x", G("cnn.x", "")->v, 4 * 36);
    test_run_ok(inf2);
    de2 = max_diff(sim_exe_output_buffer(inf2, 0), G("cnn.eval", "")->v, 12);
    printf("inference (running statistics) after training vs torch eval(): %.2e (new "
           "executable), %.2e (updated executable)\n", de, de2);
    assert_true(de < 1e-5);
    assert_true(de2 < 1e-5);
    sim_exe_free(inf);
    sim_exe_free(inf2);
    sim_exe_free(e);
    sim_model_free(m);
    sim_model_free(mi);
}

/* x (B,4) -> Gemm(2) = p; loss = ReduceMean(Pow(p - t, 2)) */
static void
test_golden_mse(void **state)
{
    struct sim_ob *b = sim_ob_new(17);
    struct sim_output_opt mode = { "loss", { SIM_OUTPUT_ALL, 0 } };
    struct sim_compile_opts o;
    struct sim_model *m;
    struct sim_exe *e;
    double dl, dw;

    (void)state;
    sim_ob_input(b, "x", F32, 2, DIMS(-1, 4));
    sim_ob_input(b, "t", F32, 2, DIMS(-1, 2));
    init_weight(b, "weight", 2, DIMS(2, 4), G("mse.init.%s", "weight")->v);
    init_weight(b, "bias", 1, DIMS(2), G("mse.init.%s", "bias")->v);
    sim_ob_node(b, "Gemm", "fc", "x,weight,bias", "p");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "Sub", "diff", "p,t", "d");
    sim_ob_node(b, "Constant", "two", "", "c2");
    sim_ob_attr_tensor(b, "value", F32, 0, NULL, (const float[]){ 2.0f });
    sim_ob_node(b, "Pow", "sq", "d,c2", "s");
    sim_ob_node(b, "ReduceMean", "mean", "s", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.optimizer.lr = 0.2f;
    o.device_iterations = 2;
    o.micro_batch = 5;
    o.output_modes = &mode;
    o.n_output_modes = 1;
    e = test_compile_ok(m, &o);
    set_input_f(e, "x", G("mse.%s", "x")->v, 40);
    set_input_f(e, "t", G("mse.%s", "t")->v, 20);
    test_run_ok(e);
    dl = max_diff(sim_exe_output_buffer(e, 0), G("mse.%s", "loss")->v, 2);
    dw = weight_diff(e, "weight", G("mse.final.%s", "weight")->v, 8);
    dw = fmax(dw, weight_diff(e, "bias", G("mse.final.%s", "bias")->v, 2));
    printf("MSE (Sub, Pow, ReduceMean) vs torch: max |loss diff| %.2e, max |weight diff| "
           "%.2e\n", dl, dw);
    assert_true(dl < 1e-5 && dw < 1e-5);
    sim_exe_free(e);
    sim_model_free(m);
}

/* ---- optimizers against their formulas ------------------------------------------------- */

#define NW 4

/* loss = ReduceSum(w * x), x (4) fed per step: d loss / d w = x exactly. */
static struct sim_model *
linear_model(void)
{
    struct sim_ob *b = sim_ob_new(17);
    const float w0[NW] = { 0.5f, -1.0f, 2.0f, 0.25f };

    sim_ob_input(b, "x", F32, 1, DIMS(NW));
    init_weight(b, "w", 1, DIMS(NW), w0);
    sim_ob_node(b, "Mul", "m", "w,x", "wx");
    sim_ob_node(b, "ReduceSum", "s", "wx", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    return test_ob_load(b);
}

/* The reference: torch.optim's documented update, in double. */
struct ref {
    double p[NW], b[NW], m[NW], v[NW];
    int t;
    bool started;
};

static void
ref_step(struct ref *r, const struct sim_optimizer *o, const float *g)
{
    r->t++;
    for (int i = 0; i < NW; i++) {
        double gi = g[i];
        if (o->kind == SIM_OPT_SGD) {
            gi += o->weight_decay * r->p[i];
            if (o->momentum != 0.0f) {
                r->b[i] = r->started ? o->momentum * r->b[i] + (1.0 - o->dampening) * gi : gi;
                gi = o->nesterov ? gi + o->momentum * r->b[i] : r->b[i];
            }
            r->p[i] -= o->lr * gi;
            continue;
        }
        if (o->kind == SIM_OPT_ADAMW)
            r->p[i] -= o->lr * o->weight_decay * r->p[i];
        else
            gi += o->weight_decay * r->p[i];
        r->m[i] = o->beta1 * r->m[i] + (1.0 - o->beta1) * gi;
        r->v[i] = o->beta2 * r->v[i] + (1.0 - o->beta2) * gi * gi;
        r->p[i] -= o->lr * (r->m[i] / (1.0 - pow(o->beta1, r->t))) /
                   (sqrt(r->v[i] / (1.0 - pow(o->beta2, r->t))) + o->eps);
    }
    r->started = true;
}

/* Two runs of 3 steps, the learning rate (and weight decay) changed between them. */
static void
check_formula(const char *what, struct sim_optimizer opt)
{
    struct sim_model *m = linear_model();
    struct sim_compile_opts o;
    struct sim_exe *e;
    struct sim_err err;
    struct ref r = { { 0.5, -1.0, 2.0, 0.25 }, { 0 }, { 0 }, { 0 }, 0, false };
    float x[3 * NW], w[NW];
    double d = 0.0;

    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.optimizer = opt;
    o.device_iterations = 3;
    e = test_compile_ok(m, &o);
    for (int run_i = 0; run_i < 2; run_i++) {
        for (int i = 0; i < 3 * NW; i++)
            x[i] = (float)((i * 7 + run_i * 3) % 11) * 0.3f - 1.4f;
        set_input_f(e, "x", x, 3 * NW);
        test_run_ok(e);
        for (int s = 0; s < 3; s++)
            ref_step(&r, &opt, x + s * NW);
        assert_int_equal(sim_exe_read_weight(e, "w", w, sizeof(w), &err), 0);
        for (int i = 0; i < NW; i++)
            d = fmax(d, fabs(w[i] - r.p[i]) / (1.0 + fabs(r.p[i])));
        opt.lr *= 0.5f;
        opt.weight_decay *= 2.0f;
        if (sim_exe_set_optimizer(e, &opt, &err) != 0)
            fail_msg("%s", err.msg);
    }
    printf("%-44s vs its formula, 6 steps (lr changed after 3): max rel diff %.2e\n", what, d);
    assert_true(d < 2e-6);
    sim_exe_free(e);
    sim_model_free(m);
}

static void
test_optimizer_formulas(void **state)
{
    struct sim_optimizer o;

    (void)state;
    sim_optimizer_init(&o, SIM_OPT_SGD);
    o.lr = 0.1f;
    check_formula("SGD lr 0.1", o);
    o.momentum = 0.8f;
    o.dampening = 0.3f;
    o.weight_decay = 0.05f;
    check_formula("SGD momentum 0.8 dampening 0.3 wd 0.05", o);
    o.dampening = 0.0f;
    o.nesterov = 1;
    check_formula("SGD Nesterov momentum 0.8 wd 0.05", o);
    sim_optimizer_init(&o, SIM_OPT_ADAM);
    o.lr = 0.05f;
    check_formula("Adam defaults, lr 0.05", o);
    o.weight_decay = 0.1f;
    o.beta1 = 0.8f;
    o.beta2 = 0.9f;
    o.eps = 1e-3f;
    check_formula("Adam wd 0.1 (L2) betas (0.8, 0.9) eps 1e-3", o);
    sim_optimizer_init(&o, SIM_OPT_ADAMW);
    o.lr = 0.05f;
    check_formula("AdamW defaults (wd 0.01 decoupled), lr 0.05", o);
    o.weight_decay = 0.5f;
    check_formula("AdamW wd 0.5", o);
}

/* ---- replicas and accumulation --------------------------------------------------------- */

/* Trains the MLP of "mlp_adamw" on 3 x 8 samples per run with (A, R, B) and returns the
 * final weights (83 floats) after 2 runs. */
static void
train_mlp(unsigned A, unsigned R, unsigned B, const struct sim_optimizer *opt, int reduction,
          float *out)
{
    struct sim_model *m = mlp_model("mlp_adamw", true);
    struct sim_compile_opts o;
    struct sim_exe *e;
    struct sim_err err;
    size_t off = 0;

    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.optimizer = *opt;
    o.device_iterations = 3;
    o.gradient_accumulation = A;
    o.replicas = R;
    o.micro_batch = B;
    o.accumulation_reduction = reduction;
    e = test_compile_ok(m, &o);
    assert_int_equal(A * R * B, 8);
    for (int r = 0; r < 2; r++) {
        set_input_f(e, "x", G("%s.x", "mlp_adamw")->v, 144);
        set_input_labels(e, "y", G("%s.y", "mlp_adamw")->v, 24);
        test_run_ok(e);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(sim_exe_read_weight(e, mlp_weights[i], out + off,
                                             mlp_sizes[i] * sizeof(float), &err), 0);
        off += mlp_sizes[i];
    }
    sim_exe_free(e);
    sim_model_free(m);
}

static void
test_replica_equivalence(void **state)
{
    struct sim_optimizer opts[2];
    float one[83], many[83];

    (void)state;
    sim_optimizer_init(&opts[0], SIM_OPT_SGD);
    opts[0].lr = 0.2f;
    opts[0].momentum = 0.9f;
    sim_optimizer_init(&opts[1], SIM_OPT_ADAMW);
    opts[1].lr = 0.02f;
    for (int k = 0; k < 2; k++) {
        double d4, d2;
        train_mlp(1, 1, 8, &opts[k], SIM_REDUCE_MEAN, one);
        train_mlp(1, 4, 2, &opts[k], SIM_REDUCE_MEAN, many);
        d4 = max_diff(one, many, 83);
        train_mlp(1, 2, 4, &opts[k], SIM_REDUCE_MEAN, many);
        d2 = max_diff(one, many, 83);
        printf("%s, 6 steps: 4 replicas x B 2 vs 1 x B 8: %.2e; 2 x 4: %.2e\n",
               k == 0 ? "SGD momentum" : "AdamW", d4, d2);
        assert_true(d4 < 1e-5 && d2 < 1e-5);
    }
}

static void
test_accumulation_equivalence(void **state)
{
    struct sim_optimizer opt;
    float one[83], acc[83];
    double d, ds, dr;

    (void)state;
    sim_optimizer_init(&opt, SIM_OPT_ADAM);
    opt.lr = 0.02f;
    train_mlp(1, 1, 8, &opt, SIM_REDUCE_MEAN, one);
    train_mlp(4, 1, 2, &opt, SIM_REDUCE_MEAN, acc);
    d = max_diff(one, acc, 83);
    train_mlp(2, 2, 2, &opt, SIM_REDUCE_MEAN, acc);
    dr = max_diff(one, acc, 83);
    /* sum reduction over 4 steps of B 2 = mean over B 8 with 4 x the learning rate (SGD) */
    sim_optimizer_init(&opt, SIM_OPT_SGD);
    opt.lr = 0.4f;
    train_mlp(1, 1, 8, &opt, SIM_REDUCE_MEAN, one);
    opt.lr = 0.1f;
    train_mlp(4, 1, 2, &opt, SIM_REDUCE_SUM, acc);
    ds = max_diff(one, acc, 83);
    printf("A 4 x B 2 vs B 8 (Adam, mean): %.2e; A 2 x R 2 x B 2: %.2e; SGD sum with lr/4: "
           "%.2e\n", d, dr, ds);
    assert_true(d < 1e-5 && dr < 1e-5 && ds < 1e-5);
}

/* The MLP with its layers on IPUs 0, 1 and 1 (PopART's __ipu_number): sharded training
 * reaches the single-IPU weights, and each IPU reports the weights and optimizer state of
 * the layers it holds. */
static void
test_sharded_training(void **state)
{
    struct sim_ob *b = sim_ob_new(17);
    struct sim_optimizer opt;
    struct sim_compile_opts o;
    struct sim_mem_report r0, r1;
    struct sim_model *m;
    struct sim_exe *e;
    float one[83], sharded[83];
    size_t off = 0;
    double d;

    (void)state;
    sim_optimizer_init(&opt, SIM_OPT_ADAMW);
    opt.lr = 0.02f;
    train_mlp(1, 1, 8, &opt, SIM_REDUCE_MEAN, one);
    sim_ob_input(b, "x", F32, 2, DIMS(-1, 6));
    sim_ob_input(b, "y", I64, 1, DIMS(-1));
    init_weight(b, "0.weight", 2, DIMS(8, 6), G("%s.init.0.weight", "mlp_adamw")->v);
    init_weight(b, "0.bias", 1, DIMS(8), G("%s.init.0.bias", "mlp_adamw")->v);
    init_weight(b, "2.weight", 2, DIMS(3, 8), G("%s.init.2.weight", "mlp_adamw")->v);
    init_weight(b, "2.bias", 1, DIMS(3), G("%s.init.2.bias", "mlp_adamw")->v);
    sim_ob_node(b, "Gemm", "fc0", "x,0.weight,0.bias", "h");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_attr_int(b, "__ipu_number", 0);
    sim_ob_node(b, "Relu", "act", "h", "h2");
    sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_node(b, "Gemm", "fc2", "h2,2.weight,2.bias", "logits");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "ce", "logits,y", "loss");
    sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_output(b, "loss", F32);
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.optimizer = opt;
    o.device_iterations = 3;
    o.micro_batch = 8;
    e = test_compile_ok(m, &o);
    assert_int_equal(sim_exe_ipu_count(e), 2);
    for (int r = 0; r < 2; r++) {
        set_input_f(e, "x", G("%s.x", "mlp_adamw")->v, 144);
        set_input_labels(e, "y", G("%s.y", "mlp_adamw")->v, 24);
        test_run_ok(e);
    }
    for (int i = 0; i < 4; i++) {
        struct sim_err err;
        assert_int_equal(sim_exe_read_weight(e, mlp_weights[i], sharded + off,
                                             mlp_sizes[i] * sizeof(float), &err), 0);
        off += mlp_sizes[i];
    }
    d = max_diff(one, sharded, 83);
    sim_exe_memory(e, 0, &r0);
    sim_exe_memory(e, 1, &r1);
    printf("sharded over 2 IPUs vs 1 IPU (AdamW, 6 steps): %.2e; IPU 0 gradients %llu "
           "optimizer %llu, IPU 1 gradients %llu optimizer %llu\n", d,
           (unsigned long long)r0.gradients, (unsigned long long)r0.optimizer,
           (unsigned long long)r1.gradients, (unsigned long long)r1.optimizer);
    assert_true(d < 1e-6);
    assert_int_equal(r0.gradients, (48 + 8) * 4);
    assert_int_equal(r1.gradients, (24 + 3) * 4);
    assert_int_equal(r1.optimizer, 2 * (24 + 3) * 4);
    sim_exe_free(e);
    sim_model_free(m);
}

/* ---- BatchNormalization running statistics --------------------------------------------- */

/* x (B, 2) -> BatchNormalization -> loss = ReduceSum(y * x2) with x2 = x */
static struct sim_model *
bn_model(void)
{
    struct sim_ob *b = sim_ob_new(15);
    const float one[2] = { 1, 1 }, zero[2] = { 0, 0 };

    sim_ob_input(b, "x", F32, 2, DIMS(-1, 2));
    init_weight(b, "scale", 1, DIMS(2), one);
    init_weight(b, "bias", 1, DIMS(2), zero);
    init_weight(b, "rmean", 1, DIMS(2), zero);
    init_weight(b, "rvar", 1, DIMS(2), one);
    sim_ob_node(b, "BatchNormalization", "bn", "x,scale,bias,rmean,rvar", "y");
    sim_ob_attr_float(b, "momentum", 0.75f);
    sim_ob_attr_int(b, "training_mode", 1);   /* as torch.onnx.export writes a train() one */
    sim_ob_node(b, "Mul", "m", "y,x", "yx");
    sim_ob_node(b, "ReduceSum", "s", "yx", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    return test_ob_load(b);
}

static void
test_bn_running_stats(void **state)
{
    struct sim_model *m = bn_model();
    struct sim_compile_opts o;
    struct sim_exe *e;
    struct sim_err err;
    float x[2 * 2 * 3 * 2], rm[2], rv[2];
    double want_m[2] = { 0, 0 }, want_v[2] = { 1, 1 }, d = 0.0;

    (void)state;
    for (int i = 0; i < 24; i++)
        x[i] = (float)((i * 5) % 7) - 2.5f + (float)(i % 2) * 0.5f;
    /* A = 3 micro-batches of B = 2 on each of R = 2 replicas: replica 0 updates its
     * statistics with micro-batches (a, r = 0) only, three times per step */
    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.optimizer.lr = 0.0f;
    o.gradient_accumulation = 3;
    o.replicas = 2;
    o.micro_batch = 2;
    e = test_compile_ok(m, &o);
    set_input_f(e, "x", x, 24);
    test_run_ok(e);
    for (int a = 0; a < 3; a++) {
        const float *mb = x + (a * 2 + 0) * 4;     /* [a][r = 0][B = 2][C = 2] */
        for (int c = 0; c < 2; c++) {
            double mean = (mb[c] + mb[2 + c]) / 2.0;
            double var_u = (mb[c] - mean) * (mb[c] - mean) +
                           (mb[2 + c] - mean) * (mb[2 + c] - mean);
            want_m[c] = 0.75 * want_m[c] + 0.25 * mean;
            want_v[c] = 0.75 * want_v[c] + 0.25 * var_u;   /* unbiased: / (2 - 1) */
        }
    }
    assert_int_equal(sim_exe_read_weight(e, "rmean", rm, sizeof(rm), &err), 0);
    assert_int_equal(sim_exe_read_weight(e, "rvar", rv, sizeof(rv), &err), 0);
    for (int c = 0; c < 2; c++)
        d = fmax(d, fmax(fabs(rm[c] - want_m[c]), fabs(rv[c] - want_v[c])));
    printf("running mean / var of replica 0 after 3 accumulation steps: max diff %.2e\n", d);
    assert_true(d < 1e-6);
    /* writing a buffer sets every replica's copy */
    assert_int_equal(sim_exe_write_weight(e, "rmean", (const float[]){ 3, 4 }, 8, &err), 0);
    assert_int_equal(sim_exe_read_weight(e, "rmean", rm, sizeof(rm), &err), 0);
    assert_true(rm[0] == 3 && rm[1] == 4);
    sim_exe_free(e);
    sim_model_free(m);
}

/* ---- Dropout and the seed ---------------------------------------------------------------- */

static void
dropout_train(uint64_t seed, float *w, bool reset)
{
    struct sim_ob *b = sim_ob_new(17);
    const float w0[12] = { 0.1f, 0.2f, -0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f, -0.9f, 1.0f,
                           0.3f, -0.2f };
    struct sim_compile_opts o;
    struct sim_model *m;
    struct sim_exe *e;
    struct sim_err err;
    float x[2 * 4 * 3];

    sim_ob_input(b, "x", F32, 2, DIMS(-1, 3));
    init_weight(b, "w", 2, DIMS(3, 4), w0);
    sim_ob_node(b, "MatMul", "mm", "x,w", "h");
    sim_ob_node(b, "Dropout", "drop", "h", "hd");
    sim_ob_node(b, "ReduceSum", "s", "hd", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.optimizer.lr = 0.1f;
    o.replicas = 2;
    o.micro_batch = 4;
    o.seed = seed;
    e = test_compile_ok(m, &o);
    for (int i = 0; i < 24; i++)
        x[i] = (float)(i % 5) * 0.25f;
    set_input_f(e, "x", x, 24);
    test_run_ok(e);
    if (reset)
        assert_int_equal(sim_exe_set_seed(e, seed, &err), 0);
    test_run_ok(e);
    assert_int_equal(sim_exe_read_weight(e, "w", w, 48, &err), 0);
    sim_exe_free(e);
    sim_model_free(m);
}

static void
test_dropout_seed(void **state)
{
    float a[12], b[12], c[12], d[12];

    (void)state;
    dropout_train(42, a, false);
    dropout_train(42, b, false);
    dropout_train(43, c, false);
    dropout_train(42, d, true);
    printf("Dropout: same seed -> identical weights (%s), other seed -> different (%s), "
           "restarted generator -> different second masks (%s)\n",
           memcmp(a, b, sizeof(a)) == 0 ? "yes" : "no",
           memcmp(a, c, sizeof(a)) != 0 ? "yes" : "no",
           memcmp(a, d, sizeof(a)) != 0 ? "yes" : "no");
    assert_memory_equal(a, b, sizeof(a));
    assert_memory_not_equal(a, c, sizeof(a));
    assert_memory_not_equal(a, d, sizeof(a));
}

/* ---- output modes and the run layout --------------------------------------------------- */

/* loss = ReduceMean(x * w) with w = 1 and lr 0: the loss of micro-batch (d, a, r) is the
 * mean of its x, which the test sets to 100 d + 10 a + r. */
static struct sim_exe *
modes_exe(struct sim_model **m, int kind, unsigned n)
{
    struct sim_ob *b = sim_ob_new(17);
    const float ones[2] = { 1, 1 };
    struct sim_output_opt mode = { "loss", { kind, n } };
    struct sim_compile_opts o;
    struct sim_exe *e;
    float *x;

    sim_ob_input(b, "x", F32, 2, DIMS(-1, 2));
    init_weight(b, "w", 1, DIMS(2), ones);
    sim_ob_node(b, "Mul", "m", "x,w", "xw");
    sim_ob_node(b, "ReduceMean", "s", "xw", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    *m = test_ob_load(b);
    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.optimizer.lr = 0.0f;
    o.device_iterations = 4;
    o.gradient_accumulation = 3;
    o.replicas = 2;
    o.micro_batch = 5;
    if (kind >= 0) {
        o.output_modes = &mode;
        o.n_output_modes = 1;
    }
    e = test_compile_ok(*m, &o);
    x = sim_exe_input_buffer(e, 0);
    for (unsigned d = 0; d < 4; d++)
        for (unsigned a = 0; a < 3; a++)
            for (unsigned r = 0; r < 2; r++)
                for (unsigned i = 0; i < 10; i++)
                    x[((d * 3 + a) * 2 + r) * 10 + i] = (float)(100 * d + 10 * a + r);
    test_run_ok(e);
    return e;
}

static void
test_output_modes(void **state)
{
    struct sim_model *m;
    struct sim_exe *e;
    struct sim_io_info info;
    struct sim_err err;
    const float *l;

    (void)state;
    e = modes_exe(&m, -1, 0);     /* default: Final for training */
    sim_exe_input_info(e, 0, &info);
    assert_int_equal(info.run_dims[0], 4 * 3 * 2 * 5);
    assert_int_equal(info.iterations, 12);
    assert_int_equal(sim_exe_check_input(e, 0, F32, 2, DIMS(100, 2), &err), IPUOF_E_SHAPE);
    assert_non_null(strstr(err.msg, "gradient_accumulation (3)"));
    sim_exe_output_info(e, 0, &info);
    assert_int_equal(info.mode.kind, SIM_OUTPUT_FINAL);
    assert_int_equal(info.run_dims[0], 2);
    l = sim_exe_output_buffer(e, 0);
    assert_true(l[0] == 320.0f && l[1] == 321.0f);
    sim_exe_free(e);
    sim_model_free(m);

    e = modes_exe(&m, SIM_OUTPUT_ALL, 0);
    sim_exe_output_info(e, 0, &info);
    assert_int_equal(info.run_dims[0], 24);
    l = sim_exe_output_buffer(e, 0);
    for (unsigned d = 0; d < 4; d++)
        for (unsigned a = 0; a < 3; a++)
            for (unsigned r = 0; r < 2; r++)
                assert_true(l[(d * 3 + a) * 2 + r] == (float)(100 * d + 10 * a + r));
    sim_exe_free(e);
    sim_model_free(m);

    e = modes_exe(&m, SIM_OUTPUT_SUM, 0);
    l = sim_exe_output_buffer(e, 0);
    /* sum over d and a of 100 d + 10 a + r = 12 r + 3 * 600 + 4 * 30 */
    assert_true(l[0] == 1920.0f && l[1] == 1932.0f);
    sim_exe_free(e);
    sim_model_free(m);

    e = modes_exe(&m, SIM_OUTPUT_EVERYN, 2);
    sim_exe_output_info(e, 0, &info);
    assert_int_equal(info.run_dims[0], 2 * 3 * 2);
    l = sim_exe_output_buffer(e, 0);
    for (unsigned k = 0; k < 2; k++)
        for (unsigned a = 0; a < 3; a++)
            for (unsigned r = 0; r < 2; r++)
                assert_true(l[(k * 3 + a) * 2 + r] == (float)(100 * (2 * k + 1) + 10 * a + r));
    printf("output modes with D 4, A 3, R 2: All [D][A][R], Final [R], Sum [R], EveryN(2) "
           "[D/2][A][R] as expected\n");
    sim_exe_free(e);
    sim_model_free(m);
}

/* ---- speed: the MNIST CNN of the pipelining tutorial ----------------------------------- */

static void
random_fill(float *v, size_t n, float scale, unsigned *seed)
{
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        v[i] = ((float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f) * scale;
    }
}

/*
 * Conv(1->10, k5) MaxPool 2 Relu Conv(10->20, k5) MaxPool 2 Relu Linear(320->256) Relu
 * Linear(256->10) CrossEntropy, batch 40, AdamW: prints the time of one training step
 * (forward, backward, optimizer), for comparison with PyTorch on the same machine. Not
 * asserted: the figure depends on the machine.
 */
static void
test_mnist_cnn_speed(void **state)
{
    static const int64_t wd[8][4] = { { 10, 1, 5, 5 }, { 10 }, { 20, 10, 5, 5 }, { 20 },
                                      { 256, 320 }, { 256 }, { 10, 256 }, { 10 } };
    static const int wr[8] = { 4, 1, 4, 1, 2, 1, 2, 1 };
    static const char *const wn[8] = { "c1.w", "c1.b", "c2.w", "c2.b", "l3.w", "l3.b",
                                       "l4.w", "l4.b" };
    struct sim_ob *b = sim_ob_new(13);
    struct sim_compile_opts o;
    struct sim_model *m;
    struct sim_exe *e;
    struct timespec t0, t1;
    unsigned seed = 1;
    const unsigned D = 10, runs = 5;
    float *x, *buf = malloc(81920 * sizeof(float));
    int64_t *y;
    double ms;

    (void)state;
    assert_non_null(buf);
    sim_ob_input(b, "x", F32, 4, DIMS(-1, 1, 28, 28));
    sim_ob_input(b, "y", I64, 1, DIMS(-1));
    for (int i = 0; i < 8; i++) {
        size_t n = 1;
        for (int k = 0; k < wr[i]; k++)
            n *= (size_t)wd[i][k];
        random_fill(buf, n, 0.05f, &seed);
        init_weight(b, wn[i], wr[i], wd[i], buf);
    }
    free(buf);
    sim_ob_initializer(b, "shape", I64, 1, DIMS(2), DIMS(-1, 320));
    sim_ob_node(b, "Conv", "c1", "x,c1.w,c1.b", "a1");
    sim_ob_node(b, "MaxPool", "p1", "a1", "a2");
    sim_ob_attr_ints(b, "kernel_shape", DIMS(2, 2), 2);
    sim_ob_attr_ints(b, "strides", DIMS(2, 2), 2);
    sim_ob_node(b, "Relu", "r1", "a2", "a3");
    sim_ob_node(b, "Conv", "c2", "a3,c2.w,c2.b", "a4");
    sim_ob_node(b, "MaxPool", "p2", "a4", "a5");
    sim_ob_attr_ints(b, "kernel_shape", DIMS(2, 2), 2);
    sim_ob_attr_ints(b, "strides", DIMS(2, 2), 2);
    sim_ob_node(b, "Relu", "r2", "a5", "a6");
    sim_ob_node(b, "Reshape", "view", "a6,shape", "a7");
    sim_ob_node(b, "Gemm", "l3", "a7,l3.w,l3.b", "a8");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "Relu", "r3", "a8", "a9");
    sim_ob_node(b, "Gemm", "l4", "a9,l4.w,l4.b", "logits");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "ce", "logits,y", "loss");
    sim_ob_output(b, "loss", F32);
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    o.loss = "loss";
    sim_optimizer_init(&o.optimizer, SIM_OPT_ADAMW);
    o.device_iterations = D;
    o.micro_batch = 40;
    e = test_compile_ok(m, &o);
    x = sim_exe_input_buffer(e, 0);
    y = sim_exe_input_buffer(e, 1);
    random_fill(x, (size_t)D * 40 * 784, 1.0f, &seed);
    for (unsigned i = 0; i < D * 40; i++)
        y[i] = (int64_t)((i * 7) % 10);
    test_run_ok(e);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (unsigned r = 0; r < runs; r++)
        test_run_ok(e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6) /
         (runs * D);
    printf("MNIST CNN, batch 40, AdamW: %.2f ms per training step, %.0f samples/s (loss "
           "%.3f)\n", ms, 40.0 / ms * 1e3, ((const float *)sim_exe_output_buffer(e, 0))[0]);
    assert_true(isfinite(((const float *)sim_exe_output_buffer(e, 0))[0]));
    sim_exe_free(e);
    sim_model_free(m);
}

/*
 * The per-gradient records (bwd_reads_for): h = Relu(x) + 1 is an activation without a
 * gradient (x is an input), so the rules of Mul(h, w1), Div(w2, h) and MatMul(h, w3) are
 * asked for their weight's gradient only and must read h; the plan keeps h to their
 * backward steps only through those records (a wrong one hands the rule a NULL h). loss =
 * sum(h w1) + sum(w2 / h) + sum(h W3): dw1 = h, dw2 = 1 / h, dW3[k][n] = sum_m h[m][k].
 */
static void
test_bwd_reads_per_gradient(void **state)
{
    static const float one[1] = { 1.0f }, w[6] = { 1, 2, 3, 4, 5, 6 };
    static const float w3[8] = { 1, 0, 1, 0, 0, 1, 0, 1 };
    struct sim_ob *b = sim_ob_new(17);
    struct sim_compile_opts o;
    struct sim_model *m;
    struct sim_exe *e;
    struct sim_err err;
    float h[6], g1[6], g2[6], g3[8], *x;

    (void)state;
    sim_ob_input(b, "x", F32, 2, DIMS(3, 2));
    init_weight(b, "one", 1, DIMS(1), one);
    init_weight(b, "w1", 2, DIMS(3, 2), w);
    init_weight(b, "w2", 2, DIMS(3, 2), w);
    init_weight(b, "w3", 2, DIMS(2, 4), w3);
    sim_ob_node(b, "Relu", "r", "x", "hr");
    sim_ob_node(b, "Add", "a", "hr,one", "h");
    sim_ob_node(b, "Mul", "m", "h,w1", "p1");
    sim_ob_node(b, "Div", "d", "w2,h", "p2");
    sim_ob_node(b, "MatMul", "mm", "h,w3", "p3");
    sim_ob_node(b, "ReduceSum", "s1", "p1", "l1");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_node(b, "ReduceSum", "s2", "p2", "l2");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_node(b, "ReduceSum", "s3", "p3", "l3");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_node(b, "Add", "t12", "l1,l2", "l12");
    sim_ob_node(b, "Add", "t", "l12,l3", "loss");
    sim_ob_output(b, "loss", F32);
    m = test_ob_load(b);
    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.optimizer.lr = 0.0f;
    o.frozen_weights = (const char *const[]){ "one" };
    o.n_frozen_weights = 1;
    e = test_compile_ok(m, &o);
    x = sim_exe_input_buffer(e, 0);
    for (int i = 0; i < 6; i++) {
        x[i] = (float)i - 2.5f;
        h[i] = (x[i] > 0.0f ? x[i] : 0.0f) + 1.0f;
    }
    test_run_ok(e);
    assert_int_equal(sim_exe_read_gradient(e, "w1", g1, sizeof(g1), &err), 0);
    assert_int_equal(sim_exe_read_gradient(e, "w2", g2, sizeof(g2), &err), 0);
    assert_int_equal(sim_exe_read_gradient(e, "w3", g3, sizeof(g3), &err), 0);
    for (int i = 0; i < 6; i++) {
        assert_true(g1[i] == h[i]);
        assert_true(fabsf(g2[i] - 1.0f / h[i]) <= 1e-6f);
    }
    for (int k = 0; k < 2; k++)
        for (int n = 0; n < 4; n++)
            assert_true(g3[k * 4 + n] == h[k] + h[2 + k] + h[4 + k]);
    sim_exe_free(e);
    sim_model_free(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_mlp_sgd),
        cmocka_unit_test(test_node_times),
        cmocka_unit_test(test_golden_mlp_adam),
        cmocka_unit_test(test_golden_mlp_adamw),
        cmocka_unit_test(test_golden_cnn_bn),
        cmocka_unit_test(test_golden_mse),
        cmocka_unit_test(test_optimizer_formulas),
        cmocka_unit_test(test_replica_equivalence),
        cmocka_unit_test(test_accumulation_equivalence),
        cmocka_unit_test(test_sharded_training),
        cmocka_unit_test(test_bn_running_stats),
        cmocka_unit_test(test_dropout_seed),
        cmocka_unit_test(test_output_modes),
        cmocka_unit_test(test_bwd_reads_per_gradient),
        cmocka_unit_test(test_mnist_cnn_speed),
    };

    return cmocka_run_group_tests(tests, load_golden, free_golden);
}
