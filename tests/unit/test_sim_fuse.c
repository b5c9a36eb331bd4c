/*
 * test_sim_fuse.c — the fusion pass (sim/compile/fuse.c) and the activation routines it shares with
 * the ops (sim/kernels/act.c): every pattern runs fused and unfused (IPUOF_SIM_FUSE=0) on the same
 * inputs and must give the same outputs bit for bit (on every CPU: the pointwise GEMM is cut
 * the same way fused or not, as OpenBLAS's Haswell and Zen kernels round an element by the
 * shape of its call), with the fused nodes gone from the schedule and the simulated clock
 * unchanged; since equal bits prove it only for this machine's OpenBLAS, cblas_sgemm is
 * interposed to check that both runs make the same GEMM calls. The patterns that must not
 * fuse (the convolution's output also a graph output or read twice, a Clip bound that is not a
 * constant, the activation on another IPU, a training compile) keep their nodes. Add ->
 * activation fuses too when the Add does not broadcast.
 * The convolutions cover every forward path: pointwise GEMM (its blocks split by rows too
 * when one small image would leave the pool idle), im2col GEMM (several images
 * and one image without bias, in place), the direct depthwise kernel and oneDNN (a 3x3
 * over 8 channels, a narrow depthwise 3x3).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "act.h"
#include "obload.h"
#include "onnx_build.h"
#include "sim.h"
#include "vmath.h"

#define F32 SIM_DTYPE_FLOAT

/* One convolution layer: input (n, c, h, w), m output channels, k x k kernel. */
struct conv_case {
    const char *name;
    int64_t n, c, h, w, m, k, stride, pad, group;
    bool bias;
};

static const struct conv_case convs[] = {
    { "pointwise", 2, 16, 30, 30, 24, 1, 1, 0, 1, true },
    { "im2col 3x3", 2, 4, 10, 10, 6, 3, 1, 1, 1, true },
    { "im2col, one image, no bias", 1, 3, 9, 9, 5, 3, 2, 1, 1, false },
    { "depthwise 3x3 wide", 2, 6, 20, 20, 6, 3, 1, 1, 6, true },
    { "oneDNN 3x3", 2, 8, 8, 8, 8, 3, 1, 1, 1, true },
    { "oneDNN depthwise", 2, 8, 12, 12, 8, 3, 1, 1, 8, true },
    { "grouped pointwise", 2, 8, 20, 20, 12, 1, 1, 0, 2, true },
    { "pointwise, one 7x7 image", 1, 16, 7, 7, 40, 1, 1, 0, 1, true },
    { "grouped 3x3", 3, 6, 9, 9, 6, 3, 1, 1, 3, false },
};

/* The activation after the convolution. */
enum { A_RELU, A_CLIP, A_LEAKY, A_HSIG, A_HSWISH, A_SIGMOID, A_ELU, A_SOFTPLUS, A_SILU,
       A_SILU_SWAP, A_HSWISH13, A_HSWISH13_SWAP, A_COUNT };
/* A_SILU and after: two nodes read the convolution (the activation and the Mul);
 * A_HSWISH13: HardSwish as opset 13 exports it, x * HardSigmoid(x; 1/6, 1/2) */
static const char *const act_names[A_COUNT] = { "Relu", "Clip", "LeakyRelu", "HardSigmoid",
                                                "HardSwish", "Sigmoid", "Elu", "Softplus",
                                                "SiLU (Mul(x, s))", "SiLU (Mul(s, x))",
                                                "HardSwish (Mul(x, h))",
                                                "HardSwish (Mul(h, x))" };

/* Deterministic values in about [-3, 3]. */
static float
val_at(size_t i, unsigned salt)
{
    return 3.0f * sinf((float)(i * 7 + salt * 13) * 0.37f);
}

/* Adds Conv "conv" x -> c of cc, with its weights. */
static void
add_conv(struct sim_ob *b, const struct conv_case *cc)
{
    int64_t dw[4] = { cc->m, cc->c / cc->group, cc->k, cc->k }, db[1] = { cc->m };
    size_t nw = (size_t)(dw[0] * dw[1] * dw[2] * dw[3]);
    float *w = malloc(nw * sizeof(float)), bias[64];
    int64_t pads[4] = { cc->pad, cc->pad, cc->pad, cc->pad };
    int64_t strides[2] = { cc->stride, cc->stride };

    assert_non_null(w);
    for (size_t i = 0; i < nw; i++)
        w[i] = 0.4f * val_at(i, 1);
    for (int64_t i = 0; i < cc->m; i++)
        bias[i] = 0.3f * val_at((size_t)i, 2);
    sim_ob_initializer(b, "w", F32, 4, dw, w);
    if (cc->bias)
        sim_ob_initializer(b, "b", F32, 1, db, bias);
    sim_ob_node(b, "Conv", "conv", cc->bias ? "x,w,b" : "x,w", "c");
    sim_ob_attr_ints(b, "pads", pads, 4);
    sim_ob_attr_ints(b, "strides", strides, 2);
    sim_ob_attr_int(b, "group", cc->group);
    free(w);
}

/* Adds activation a reading "c", writing "y". */
static void
add_act(struct sim_ob *b, int a)
{
    static const float lo = 0.0f, hi = 6.0f;

    switch (a) {
    case A_CLIP:
        sim_ob_initializer(b, "lo", F32, 0, NULL, &lo);
        sim_ob_initializer(b, "hi", F32, 0, NULL, &hi);
        sim_ob_node(b, "Clip", "act", "c,lo,hi", "y");
        break;
    case A_LEAKY:
        sim_ob_node(b, "LeakyRelu", "act", "c", "y");
        sim_ob_attr_float(b, "alpha", 0.1f);
        break;
    case A_HSIG:
        sim_ob_node(b, "HardSigmoid", "act", "c", "y");
        sim_ob_attr_float(b, "alpha", 0.25f);
        break;
    case A_SILU:
    case A_SILU_SWAP:
        sim_ob_node(b, "Sigmoid", "act", "c", "s");
        sim_ob_node(b, "Mul", "mul", a == A_SILU ? "c,s" : "s,c", "y");
        break;
    case A_HSWISH13:
    case A_HSWISH13_SWAP:
        sim_ob_node(b, "HardSigmoid", "act", "c", "s");
        sim_ob_attr_float(b, "alpha", 1.0f / 6.0f);
        sim_ob_node(b, "Mul", "mul", a == A_HSWISH13 ? "c,s" : "s,c", "y");
        break;
    default:
        sim_ob_node(b, act_names[a], "act", "c", "y");
        break;
    }
}

/* Conv cc -> activation a -> output y. */
static struct sim_model *
model_conv_act(const struct conv_case *cc, int a)
{
    struct sim_ob *b = sim_ob_new(14);
    int64_t dx[4] = { cc->n, cc->c, cc->h, cc->w };

    sim_ob_input(b, "x", F32, 4, dx);
    add_conv(b, cc);
    add_act(b, a);
    sim_ob_output(b, "y", F32);
    return test_ob_load(b);
}

/* ---- the GEMM calls of a run ------------------------------------------------------------
 * OpenBLAS's kernels for some CPUs (Haswell, Zen) round an element by the shape of the call
 * it is in, so two paths give the same bits on every CPU only when they make the same
 * calls. cblas_sgemm is defined here (the executable's definition comes before the shared
 * library's) and passes each call on to OpenBLAS's, recording its shape while `log_on`.
 * Calls come from pool threads in any order: the logs are compared sorted. */
struct gemm_call {
    int order, ta, tb, m, n, k, lda, ldb, ldc;
    float alpha, beta;
};

#define GEMM_LOG_MAX 4096
static struct gemm_call gemm_log[GEMM_LOG_MAX];
static size_t gemm_n;
static bool log_on;
static pthread_mutex_t gemm_mu = PTHREAD_MUTEX_INITIALIZER;

void
cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta,
            const enum CBLAS_TRANSPOSE tb, const blasint m, const blasint n, const blasint k,
            const float alpha, const float *a, const blasint lda, const float *b,
            const blasint ldb, const float beta, float *c, const blasint ldc)
{
    static void (*real)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE,
                        const enum CBLAS_TRANSPOSE, const blasint, const blasint,
                        const blasint, const float, const float *, const blasint,
                        const float *, const blasint, const float, float *, const blasint);

    pthread_mutex_lock(&gemm_mu);
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "cblas_sgemm");
    if (log_on && gemm_n < GEMM_LOG_MAX)
        gemm_log[gemm_n++] = (struct gemm_call){ order, ta, tb, m, n, k, lda, ldb, ldc,
                                                 alpha, beta };
    pthread_mutex_unlock(&gemm_mu);
    if (real == NULL)
        abort();
    real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static int
gemm_cmp(const void *x, const void *y)
{
    return memcmp(x, y, sizeof(struct gemm_call));
}

/* Starts recording the GEMM calls (log_start), or stops and returns them sorted into
 * out[GEMM_LOG_MAX] (log_stop: their count). */
static void
log_start(void)
{
    pthread_mutex_lock(&gemm_mu);
    gemm_n = 0;
    log_on = true;
    pthread_mutex_unlock(&gemm_mu);
}

static size_t
log_stop(struct gemm_call *out)
{
    size_t n;

    pthread_mutex_lock(&gemm_mu);
    log_on = false;
    n = gemm_n;
    memcpy(out, gemm_log, n * sizeof(*out));
    pthread_mutex_unlock(&gemm_mu);
    assert_true(n < GEMM_LOG_MAX);
    qsort(out, n, sizeof(*out), gemm_cmp);
    return n;
}

/* Device iterations and strategy of the next compiles (test_pipelined changes them). */
static unsigned opt_iterations = 1;
static int opt_strategy = SIM_STRATEGY_DEFAULT;

/* Compiles m (inference, or training on output `loss`) with fusion on or off. */
static struct sim_exe *
compile(const struct sim_model *m, bool fuse, const char *loss)
{
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;

    setenv("IPUOF_SIM_FUSE", fuse ? "1" : "0", 1);
    sim_compile_opts_init(&o);
    o.loss = loss;
    o.partition_ipus = 4;
    o.device_iterations = opt_iterations;
    o.strategy = opt_strategy;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("%s", err.msg);
    unsetenv("IPUOF_SIM_FUSE");
    return e;
}

/* Fills every float input with val_at and runs once. */
static void
run(struct sim_exe *e)
{
    struct sim_err err;

    for (size_t i = 0; i < sim_exe_input_count(e); i++) {
        struct sim_io_info info;
        float *x = sim_exe_input_buffer(e, i);
        assert_int_equal(sim_exe_input_info(e, i, &info), 0);
        for (size_t k = 0; k < info.run_bytes / sizeof(float); k++)
            x[k] = val_at(k, 3 + (unsigned)i);
    }
    if (sim_exe_run(e, &err) != 0)
        fail_msg("%s", err.msg);
}

/* Runs m fused and unfused; checks that the outputs are the same bits from the same GEMM
 * calls, that `removed` nodes are gone and that the simulated time is the same. */
static void
check_pair(const struct sim_model *m, size_t removed, const char *what)
{
    static struct gemm_call gf[GEMM_LOG_MAX], gu[GEMM_LOG_MAX];
    struct sim_exe *f = compile(m, true, NULL), *u = compile(m, false, NULL);
    struct sim_cost_report cf, cu;
    size_t nf, nu;

    assert_int_equal(sim_exe_node_count(f) + removed, sim_exe_node_count(u));
    log_start();
    run(f);
    nf = log_stop(gf);
    log_start();
    run(u);
    nu = log_stop(gu);
    for (size_t i = 0; i < (nf > nu ? nf : nu); i++)
        if (i >= nf || i >= nu || gemm_cmp(&gf[i], &gu[i]) != 0)
            fail_msg("%s: the GEMM calls differ (%zu fused, %zu unfused): call %zu is "
                     "%dx%dx%d beta %g fused, %dx%dx%d beta %g unfused", what, nf, nu, i,
                     i < nf ? gf[i].m : 0, i < nf ? gf[i].n : 0, i < nf ? gf[i].k : 0,
                     i < nf ? gf[i].beta : 0.0, i < nu ? gu[i].m : 0, i < nu ? gu[i].n : 0,
                     i < nu ? gu[i].k : 0, i < nu ? gu[i].beta : 0.0);
    for (size_t o = 0; o < sim_exe_output_count(u); o++) {
        struct sim_io_info info;
        const float *a = sim_exe_output_buffer(f, o), *b = sim_exe_output_buffer(u, o);
        assert_int_equal(sim_exe_output_info(u, o, &info), 0);
        for (size_t k = 0; k < info.run_bytes / sizeof(float); k++)
            if (memcmp(&a[k], &b[k], sizeof(float)) != 0)
                fail_msg("%s: fused output %zu differs from the unfused one at %zu: %.9g, "
                         "unfused %.9g", what, o, k, a[k], b[k]);
    }
    assert_int_equal(sim_exe_cost(f, &cf), 0);
    assert_int_equal(sim_exe_cost(u, &cu), 0);
    if (fabs(cf.device_seconds - cu.device_seconds) > 1e-9 * cu.device_seconds)
        fail_msg("%s: simulated time %g fused, %g unfused", what, cf.device_seconds,
                 cu.device_seconds);
    sim_exe_free(f);
    sim_exe_free(u);
}

/* Every convolution path with every activation, and SiLU in both operand orders. */
static void
test_conv_act(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof(convs) / sizeof(convs[0]); c++) {
        for (int a = 0; a < A_COUNT; a++) {
            struct sim_model *m = model_conv_act(&convs[c], a);
            char what[128];
            snprintf(what, sizeof(what), "%s -> %s", convs[c].name, act_names[a]);
            check_pair(m, a >= A_SILU ? 2 : 1, what);
            sim_model_free(m);
        }
        printf("  %-30s fused = unfused, bit for bit, with each of %d activations\n",
               convs[c].name, A_COUNT);
    }
}

/* Sigmoid -> Mul(x, sigmoid(x)) without a convolution: one SiLU node, same bits. */
static void
test_silu_alone(void **state)
{
    for (int swap = 0; swap < 2; swap++) {
        struct sim_ob *b = sim_ob_new(13);
        int64_t dx[2] = { 8, 5000 };
        struct sim_model *m;
        (void)state;
        sim_ob_input(b, "x", F32, 2, dx);
        sim_ob_node(b, "Sigmoid", "sig", "x", "s");
        sim_ob_node(b, "Mul", "mul", swap ? "s,x" : "x,s", "y");
        sim_ob_output(b, "y", F32);
        m = test_ob_load(b);
        check_pair(m, 1, "Sigmoid -> Mul");
        sim_model_free(m);
    }
}

/* Add (same shapes) -> activation: one node, same bits; with broadcasting it stays. */
static void
test_add_act(void **state)
{
    static const int acts[] = { A_RELU, A_CLIP, A_HSWISH, A_SIGMOID };

    (void)state;
    for (size_t i = 0; i < sizeof(acts) / sizeof(acts[0]); i++)
        for (int bcast = 0; bcast < 2; bcast++) {
            struct sim_ob *b = sim_ob_new(14);
            int64_t dx[4] = { 2, 3, 50, 70 }, dr[4] = { 1, 3, 1, 70 };
            struct sim_model *m;
            char what[96];
            sim_ob_input(b, "x", F32, 4, dx);
            sim_ob_input(b, "r", F32, 4, bcast ? dr : dx);
            sim_ob_node(b, "Add", "add", "x,r", "c");
            add_act(b, acts[i]);
            sim_ob_output(b, "y", F32);
            m = test_ob_load(b);
            snprintf(what, sizeof(what), "Add%s -> %s", bcast ? " (broadcast)" : "",
                     act_names[acts[i]]);
            check_pair(m, bcast ? 0 : 1, what);
            sim_model_free(m);
        }
}

/* The host-time profile names a fused node after both ops. */
static void
test_node_names(void **state)
{
    static const struct { int act; const char *name; } cases[] = {
        { A_HSWISH, "Conv+HardSwish" }, { A_SILU, "Conv+SiLU" },
    };
    struct sim_node_time rows[4];

    (void)state;
    setenv("IPUOF_SIM_PROFILE", "1", 1);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sim_model *m = model_conv_act(&convs[1], cases[i].act);
        struct sim_exe *e = compile(m, true, NULL);
        run(e);
        assert_int_equal(sim_exe_node_times(e, rows, 4), 1);
        assert_string_equal(rows[0].op, cases[i].name);
        assert_int_equal(rows[0].calls[0], 1);
        sim_exe_free(e);
        sim_model_free(m);
    }
    {
        struct sim_ob *b = sim_ob_new(13);
        int64_t dx[2] = { 4, 300 };
        struct sim_model *m;
        struct sim_exe *e;
        sim_ob_input(b, "x", F32, 2, dx);
        sim_ob_input(b, "r", F32, 2, dx);
        sim_ob_node(b, "Add", "add", "x,r", "a");
        sim_ob_node(b, "Relu", "relu", "a", "c");
        sim_ob_node(b, "Sigmoid", "sig", "c", "s");
        sim_ob_node(b, "Mul", "mul", "c,s", "y");
        sim_ob_output(b, "y", F32);
        m = test_ob_load(b);
        e = compile(m, true, NULL);
        run(e);
        assert_int_equal(sim_exe_node_times(e, rows, 4), 2);
        assert_string_equal(rows[0].op, "Add+Relu");
        assert_string_equal(rows[1].op, "SiLU");
        sim_exe_free(e);
        sim_model_free(m);
    }
    unsetenv("IPUOF_SIM_PROFILE");
}

/* Clip before opset 11 (bounds as attributes), and with only a constant max. */
static void
test_clip_forms(void **state)
{
    const struct conv_case *cc = &convs[1];
    int64_t dx[4] = { cc->n, cc->c, cc->h, cc->w };
    static const float hi = 1.5f;
    struct sim_model *m;
    struct sim_ob *b;

    (void)state;
    b = sim_ob_new(10);
    sim_ob_input(b, "x", F32, 4, dx);
    add_conv(b, cc);
    sim_ob_node(b, "Clip", "clip", "c", "y");
    sim_ob_attr_float(b, "min", -0.5f);
    sim_ob_attr_float(b, "max", 2.0f);
    sim_ob_output(b, "y", F32);
    m = test_ob_load(b);
    check_pair(m, 1, "Clip with attribute bounds");
    sim_model_free(m);

    b = sim_ob_new(13);
    sim_ob_input(b, "x", F32, 4, dx);
    sim_ob_initializer(b, "hi", F32, 0, NULL, &hi);
    add_conv(b, cc);
    sim_ob_node(b, "Clip", "clip", "c,,hi", "y");
    sim_ob_output(b, "y", F32);
    m = test_ob_load(b);
    check_pair(m, 1, "Clip with only a max");
    sim_model_free(m);
}

/* Two pipeline stages on two IPUs, each Conv -> Relu fused within its stage (the stages'
 * first nodes move when nodes leave the schedule), pipelined and sharded, four device
 * iterations. */
static void
test_pipelined(void **state)
{
    static const int strategies[] = { SIM_STRATEGY_PIPELINED, SIM_STRATEGY_SHARDED };
    int64_t dx[4] = { 2, 4, 9, 9 }, dw[4] = { 4, 4, 3, 3 }, pads[4] = { 1, 1, 1, 1 };
    float w[144];
    struct sim_model *m;
    struct sim_ob *b = sim_ob_new(14);

    (void)state;
    for (int i = 0; i < 144; i++)
        w[i] = 0.3f * val_at((size_t)i, 5);
    sim_ob_input(b, "x", F32, 4, dx);
    sim_ob_initializer(b, "w1", F32, 4, dw, w);
    sim_ob_initializer(b, "w2", F32, 4, dw, w);
    for (int k = 0; k < 2; k++) {
        sim_ob_node(b, "Conv", k ? "conv2" : "conv1", k ? "r1,w2" : "x,w1", k ? "c2" : "c1");
        sim_ob_attr_ints(b, "pads", pads, 4);
        sim_ob_attr_int(b, "__ipu_number", k);
        sim_ob_attr_int(b, "__pipeline_stage", k);
        sim_ob_node(b, "Relu", k ? "relu2" : "relu1", k ? "c2" : "c1", k ? "y" : "r1");
        sim_ob_attr_int(b, "__ipu_number", k);
        sim_ob_attr_int(b, "__pipeline_stage", k);
    }
    sim_ob_output(b, "y", F32);
    m = test_ob_load(b);
    opt_iterations = 4;
    for (size_t i = 0; i < sizeof(strategies) / sizeof(strategies[0]); i++) {
        opt_strategy = strategies[i];
        check_pair(m, 2, i == 0 ? "pipelined" : "sharded");
    }
    opt_iterations = 1;
    opt_strategy = SIM_STRATEGY_DEFAULT;
    sim_model_free(m);
}

/* Patterns that must not fuse: same node count fused and unfused, same outputs. */
static void
test_not_fused(void **state)
{
    const struct conv_case *cc = &convs[1];
    int64_t dx[4] = { cc->n, cc->c, cc->h, cc->w };
    struct sim_model *m;
    struct sim_ob *b;

    (void)state;
    /* the convolution's output is also a graph output */
    b = sim_ob_new(14);
    sim_ob_input(b, "x", F32, 4, dx);
    add_conv(b, cc);
    add_act(b, A_RELU);
    sim_ob_output(b, "y", F32);
    sim_ob_output(b, "c", F32);
    m = test_ob_load(b);
    check_pair(m, 0, "conv output is a graph output");
    sim_model_free(m);

    /* read twice: by the Relu and by an Add */
    b = sim_ob_new(14);
    sim_ob_input(b, "x", F32, 4, dx);
    add_conv(b, cc);
    add_act(b, A_RELU);
    sim_ob_node(b, "Add", "add", "c,y", "z");
    sim_ob_output(b, "z", F32);
    m = test_ob_load(b);
    check_pair(m, 0, "conv output read twice");
    sim_model_free(m);

    /* read by one node that is not an activation (one without params) */
    b = sim_ob_new(14);
    sim_ob_input(b, "x", F32, 4, dx);
    add_conv(b, cc);
    sim_ob_node(b, "Identity", "id", "c", "y");
    sim_ob_output(b, "y", F32);
    m = test_ob_load(b);
    check_pair(m, 0, "conv read by Identity");
    sim_model_free(m);

    /* a Clip bound that is a graph input */
    b = sim_ob_new(14);
    sim_ob_input(b, "x", F32, 4, dx);
    sim_ob_input(b, "hi", F32, 0, NULL);
    add_conv(b, cc);
    sim_ob_node(b, "Clip", "clip", "c,,hi", "y");
    sim_ob_output(b, "y", F32);
    m = test_ob_load(b);
    check_pair(m, 0, "Clip bound not a constant");
    sim_model_free(m);

    /* the Sigmoid's output read by another node besides the Mul */
    b = sim_ob_new(14);
    sim_ob_input(b, "x", F32, 4, dx);
    add_conv(b, cc);
    add_act(b, A_SILU);
    sim_ob_node(b, "Add", "add", "s,y", "z");
    sim_ob_output(b, "z", F32);
    m = test_ob_load(b);
    check_pair(m, 0, "sigmoid read twice");
    sim_model_free(m);

    /* the activation on another IPU */
    b = sim_ob_new(14);
    sim_ob_input(b, "x", F32, 4, dx);
    add_conv(b, cc);
    sim_ob_attr_int(b, "__ipu_number", 0);
    sim_ob_node(b, "Relu", "act", "c", "y");
    sim_ob_attr_int(b, "__ipu_number", 1);
    sim_ob_output(b, "y", F32);
    m = test_ob_load(b);
    check_pair(m, 0, "activation on another IPU");
    sim_model_free(m);

    /* training: every node stays (autodiff needs them) */
    b = sim_ob_new(14);
    sim_ob_input(b, "x", F32, 4, dx);
    add_conv(b, cc);
    add_act(b, A_HSWISH);
    sim_ob_node(b, "ReduceMean", "mean", "y", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    m = test_ob_load(b);
    {
        struct sim_exe *f = compile(m, true, "loss"), *u = compile(m, false, "loss");
        assert_int_equal(sim_exe_node_count(f), sim_exe_node_count(u));
        assert_int_equal(sim_exe_node_count(f), 3);
        sim_exe_free(f);
        sim_exe_free(u);
    }
    sim_model_free(m);
}

/* sim_act_range against the formulas the ops always used, lane by lane and in the tail,
 * in place and not. */
static void
test_act_range(void **state)
{
    enum { N = 203 };
    float x[N], y[N], z[N];

    (void)state;
    for (int i = 0; i < N; i++)
        x[i] = i == 0 ? -0.0f : i == 1 ? NAN : i == 2 ? 1e30f : i == 3 ? -1e30f : val_at(i, 9);
    for (int kind = SIM_ACT_RELU; kind < SIM_ACT_KINDS; kind++) {
        struct sim_act a = { kind, kind == SIM_ACT_CLIP ? -1.0f : 0.2f,
                             kind == SIM_ACT_CLIP ? 2.5f : 0.5f };
        sim_act_range(&a, x, y, 0, N);
        memcpy(z, x, sizeof(z));
        sim_act_range(&a, z, z, 0, N);
        assert_memory_equal(y, z, sizeof(y));
        for (int i = 0; i < N; i++) {
            float v = x[i], h = a.a * v + a.b, want, e;
            switch (kind) {
            case SIM_ACT_RELU: want = v < 0.0f ? 0.0f : v; break; /* PyTorch: NaN, -0 kept */
            case SIM_ACT_CLIP: want = v < a.a ? a.a : v; want = want > a.b ? a.b : want; break;
            case SIM_ACT_LEAKY: want = v >= 0.0f ? v : a.a * v; break;
            case SIM_ACT_HSIGMOID:
            case SIM_ACT_HSWISH:
                h = h < 0.0f ? 0.0f : h > 1.0f ? 1.0f : h;
                want = kind == SIM_ACT_HSWISH ? v * h : h;
                break;
            case SIM_ACT_ELU: want = v > 0.0f ? v : a.a * expm1f(v); break;
            case SIM_ACT_SOFTPLUS:
                want = v > 0.0f ? v + log1pf(expf(-v)) : log1pf(expf(v));
                break;
            default:
                /* Sigmoid and SiLU: vmath.h's exp, within the conformance tolerance */
                e = (float)(1.0 / (1.0 + exp(-(double)v)));
                want = kind == SIM_ACT_SILU ? v * e : e;
                if (isnan(v))
                    assert_true(isnan(y[i]));
                else if (fabsf(y[i] - want) > 1e-6f * (fabsf(want) > 1 ? fabsf(want) : 1))
                    fail_msg("%s(%g) = %g, want %g", sim_act_name(kind), v, y[i], want);
                continue;
            }
            if (memcmp(&y[i], &want, sizeof(float)) != 0 && !(isnan(y[i]) && isnan(want)))
                fail_msg("%s(%g) = %g, want %g", sim_act_name(kind), v, y[i], want);
        }
    }
}

/* Sigmoid and SiLU keep vmath.h's exp bit for bit (act.c drops the operations that cannot
 * change an exponent <= 0), and +0 below -87.34 (PyTorch's): a sweep over the float bit patterns of both signs, every value
 * once through the vector lanes and once through the scalar tail. */
static void
test_sigmoid_bits(void **state)
{
    enum { N = 4096 };
    static float x[N], y[N], t[N];
    const struct sim_act sig = { SIM_ACT_SIGMOID, 0, 0 }, silu = { SIM_ACT_SILU, 0, 0 };
    size_t checked = 0;

    (void)state;
    for (uint64_t base = 0; base < ((uint64_t)1 << 32); base += (uint64_t)N * 4099) {
        int k = 0;
        for (int i = 0; i < N; i++) {
            uint32_t bits = (uint32_t)(base + (uint64_t)i * 4099);
            memcpy(&x[i], &bits, sizeof(float));
            if (isnan(x[i]))
                x[i] = 0.0f;
        }
        for (int pass = 0; pass < 2; pass++) {
            const struct sim_act *a = pass ? &silu : &sig;
            sim_act_range(a, x, y, 0, N);
            for (int i = 0; i < N; i++)     /* one element at a time: the scalar tail */
                sim_act_range(a, x, t, i, i + 1);
            for (int i = 0; i < N; i++) {
                float v = x[i], e = sim_vexpf(v >= 0.0f ? -v : v);
                float want = (v >= 0.0f ? 1.0f : e) / (1.0f + e);
                want = v < -87.3365447505531f ? 0.0f : want;   /* +0 below the clamp */
                want = pass ? v * want : want;
                if (memcmp(&y[i], &want, sizeof(float)) != 0 ||
                    memcmp(&t[i], &want, sizeof(float)) != 0)
                    fail_msg("%s(%a): %a (lanes), %a (tail), want %a", sim_act_name(a->kind),
                             v, y[i], t[i], want);
                k++;
            }
        }
        checked += (size_t)k;
    }
    printf("  sigmoid and SiLU: %zu values, bit-identical to vmath.h's exp\n", checked);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_act_range),
        cmocka_unit_test(test_sigmoid_bits),
        cmocka_unit_test(test_conv_act),
        cmocka_unit_test(test_silu_alone),
        cmocka_unit_test(test_add_act),
        cmocka_unit_test(test_clip_forms),
        cmocka_unit_test(test_node_names),
        cmocka_unit_test(test_pipelined),
        cmocka_unit_test(test_not_fused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
