/*
 * test_sim_multi.c — a model over several simulated IPUs: placement by blocks and its
 * errors, the pipelined schedule read back from a recorded trace (ramp-up, steady state,
 * ramp-down), the simulated clock (pipelined against sharded, the tutorial's prediction),
 * the same weights whatever the strategy (the tutorial network, and a model with
 * BatchNormalization, and one with Dropout), the IPU threads (created once, joined at
 * free, stopped by a cancel), four IPUs working on different micro-batches in the same
 * step of a pipeline (the IPU threads' step log), the clock's trace replaying the works the
 * IPU threads ran (every strategy), and the memory plan (a model too big for one IPU that fits
 * pipelined over 4 IPUs or with its optimizer state off chip).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mnist_model.h"
#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define MIB ((uint64_t)1 << 20)

/* The tutorial's blocks B1..B4, one per IPU (torch names; mnist_model.c's node names). */
static const struct sim_block_opt tutorial_blocks[] = {
    { "/model/layer1/", -1, 0 }, { "/model/layer2/", -1, 1 }, { "/model/Flatten", -1, 2 },
    { "/model/layer3", -1, 2 }, { "/model/layer4/", -1, 3 }, { "/loss/", -1, 3 },
};
/* Auto-staging gives one stage per block: B3 and B4 are two blocks each here, so give
 * the stages explicitly to get the tutorial's four. */
static const struct sim_block_opt tutorial_stages[] = {
    { "/model/layer1/", 0, 0 }, { "/model/layer2/", 1, 1 }, { "/model/Flatten", 2, 2 },
    { "/model/layer3", 2, 2 }, { "/model/layer4/", 3, 3 }, { "/loss/", 3, 3 },
};

static struct sim_model *
load_bytes(void *bytes, size_t len)
{
    struct sim_model *m = NULL;
    struct sim_err err;

    if (sim_model_load(bytes, len, &m, &err) != 0)
        fail_msg("%s", err.msg);
    free(bytes);
    return m;
}

static struct sim_model *
tutorial(void)
{
    void *bytes;
    size_t len;

    assert_int_equal(mnist_model_build(7, &bytes, &len), 0);
    return load_bytes(bytes, len);
}

static void
train_opts(struct sim_compile_opts *o, unsigned B, unsigned A, unsigned D)
{
    sim_compile_opts_init(o);
    o->loss = "loss";
    o->micro_batch = B;
    o->gradient_accumulation = A;
    o->device_iterations = D;
    sim_optimizer_init(&o->optimizer, SIM_OPT_ADAMW);
    o->optimizer.lr = 0.001f;
}

/* Fills e's inputs with the tutorial's stand-in data (images in [0, 1), labels 0..9:
 * mnist_fill_inputs) and runs it once. */
static void
run_ok(struct sim_exe *e)
{
    assert_int_equal(mnist_fill_inputs(e), 0);
    test_run_ok(e);
}

/* Compiles and expects an error whose message contains want. */
static void
compile_fails(const struct sim_model *m, const struct sim_compile_opts *o, int code,
              const char *want)
{
    struct sim_exe *e = NULL;
    struct sim_err err;

    assert_int_equal(sim_compile(m, o, &e, &err), code);
    assert_null(e);
    printf("  %s\n", err.msg);
    if (strstr(err.msg, want) == NULL)
        fail_msg("the message lacks '%s'", want);
}

/* ---- placement --------------------------------------------------------------------- */

static void
test_placement_errors(void **state)
{
    struct sim_model *m = tutorial();
    struct sim_compile_opts o;
    struct sim_block_opt bad[6];
    struct sim_exe *e;
    struct sim_cost_report rep;

    (void)state;
    train_opts(&o, 8, 4, 1);
    o.blocks = tutorial_stages;
    o.n_blocks = 6;
    o.partition_ipus = 4;
    e = test_compile_ok(m, &o);
    assert_int_equal(sim_exe_ipu_count(e), 4);
    assert_int_equal(sim_exe_cost(e, &rep), IPUOF_E_INVAL);    /* before the first run */
    sim_exe_free(e);

    o.partition_ipus = 2;
    compile_fails(m, &o, IPUOF_E_INVAL, "partition has 2 IPUs");
    o.partition_ipus = 4;
    o.replicas = 2;
    compile_fails(m, &o, IPUOF_E_INVAL, "needs 8 IPUs (2 replicas x 4");
    o.replicas = 1;

    memcpy(bad, tutorial_stages, sizeof(bad));
    bad[5].prefix = "/loss/CrossEntropy"; /* the node is /loss/SoftmaxCrossEntropyLoss */
    o.blocks = bad;
    compile_fails(m, &o, IPUOF_E_INVAL, "matches no node");

    memcpy(bad, tutorial_stages, sizeof(bad));
    bad[0].stage = 2;       /* layer1 after layer2: activations would go backwards */
    bad[0].ipu = 2;
    compile_fails(m, &o, IPUOF_E_INVAL, "ascending");

    memcpy(bad, tutorial_stages, sizeof(bad));
    bad[3].ipu = 1;         /* stage 2 over IPUs 2 and 1 */
    compile_fails(m, &o, IPUOF_E_INVAL, "every node of a stage must be on one IPU");

    memcpy(bad, tutorial_stages, sizeof(bad));
    bad[2].stage = -1;
    compile_fails(m, &o, IPUOF_E_INVAL, "give every block a stage, or none");

    o.blocks = tutorial_stages;
    o.gradient_accumulation = 3;
    compile_fails(m, &o, IPUOF_E_INVAL, "gradient_accumulation is 3; raise it to 4");
    o.strategy = SIM_STRATEGY_SHARDED;      /* sharding has no such constraint */
    e = test_compile_ok(m, &o);
    sim_exe_free(e);
    o.strategy = SIM_STRATEGY_DEFAULT;
    o.gradient_accumulation = 4;

    o.location[SIM_LOC_OPTIMIZER] = 5;
    compile_fails(m, &o, IPUOF_E_INVAL, "location of the optimizer state is 5");
    o.location[SIM_LOC_OPTIMIZER] = SIM_LOC_ON_CHIP;

    /* inference: device iterations >= stages, and no optimizer state to place */
    o.loss = NULL;
    o.gradient_accumulation = 1;
    o.device_iterations = 2;
    compile_fails(m, &o, IPUOF_E_INVAL, "device_iterations is 2; raise it to 4");
    o.device_iterations = 4;
    o.location[SIM_LOC_OPTIMIZER] = SIM_LOC_OFF_CHIP;
    compile_fails(m, &o, IPUOF_E_INVAL, "inference model");
    o.location[SIM_LOC_OPTIMIZER] = SIM_LOC_ON_CHIP;
    e = test_compile_ok(m, &o);
    sim_exe_free(e);

    /* auto-staging: one stage per block, consecutive stages on one IPU */
    train_opts(&o, 8, 6, 1);
    o.blocks = tutorial_blocks;
    o.n_blocks = 6;
    e = test_compile_ok(m, &o);
    assert_int_equal(sim_exe_ipu_count(e), 4);
    sim_exe_free(e);
    o.gradient_accumulation = 5;            /* six stages */
    compile_fails(m, &o, IPUOF_E_INVAL, "pipeline stages (6)");
    sim_model_free(m);
}

/* ---- the schedule, from the trace ----------------------------------------------------- */

struct span {
    char name[32];
    unsigned tid;
    double ts, dur;
};

/* Reads the complete events of a trace this library wrote (one event per line). */
static struct span *
parse_trace(const char *json, size_t *n)
{
    size_t cap = 1024;
    struct span *s = malloc(cap * sizeof(*s));
    const char *p = json;

    assert_non_null(s);
    *n = 0;
    assert_non_null(strstr(json, "\"traceEvents\""));
    assert_non_null(strstr(json, "\"name\":\"IPU 3\""));
    while ((p = strstr(p, "{\"name\":\"")) != NULL) {
        struct span sp;
        if (sscanf(p, "{\"name\":\"%31[^\"]\",\"ph\":\"X\",\"pid\":0,\"tid\":%u,\"ts\":%lf,"
                   "\"dur\":%lf", sp.name, &sp.tid, &sp.ts, &sp.dur) == 4) {
            if (*n == cap) {
                cap *= 2;
                s = realloc(s, cap * sizeof(*s));
                assert_non_null(s);
            }
            s[(*n)++] = sp;
        }
        p++;
    }
    return s;
}

static const struct span *
find(const struct span *s, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s[i].name, name) == 0)
            return &s[i];
    fail_msg("no span %s in the trace", name);
    return NULL;
}

static bool
is_compute(const struct span *s)
{
    return (s->name[0] == 'F' || s->name[0] == 'B') && s->name[1] >= '0' && s->name[1] <= '9';
}

/* The start of the tick (bulk-synchronous step) x runs in: within a tick an IPU's spans
 * follow each other without a gap, and ticks are separated by a sync. */
static double
tick_of(const struct span *s, size_t n, const struct span *x)
{
    double start = 0;

    for (size_t i = 0; i < n; i++) {
        bool first = true;
        if (s[i].ts > x->ts + 1e-3 || s[i].ts < start)
            continue;
        for (size_t j = 0; j < n && first; j++)
            first = !(s[j].tid == s[i].tid && j != i &&
                      fabs(s[j].ts + s[j].dur - s[i].ts) < 1e-3);
        if (first)
            start = s[i].ts;
    }
    return start;
}

/* IPUs running a forward or backward in the tick of span x. */
static int
busy_in_tick(const struct span *s, size_t n, const struct span *x)
{
    double t = tick_of(s, n, x);
    unsigned seen = 0;
    int busy = 0;

    for (size_t i = 0; i < n; i++)
        if (is_compute(&s[i]) && !(seen >> s[i].tid & 1u) &&
            fabs(tick_of(s, n, &s[i]) - t) < 1e-3) {
            seen |= 1u << s[i].tid;
            busy++;
        }
    return busy;
}

static void
test_pipeline_schedule(void **state)
{
    struct sim_model *m = tutorial();
    struct sim_compile_opts o;
    struct sim_exe *e;
    struct sim_err err;
    char *json, name[32];
    size_t len, n;
    struct span *s;
    const struct span *last_b3, *last_b0, *upd;

    (void)state;
    train_opts(&o, 8, 10, 1);
    o.blocks = tutorial_stages;
    o.n_blocks = 6;
    o.profile = 1;
    e = test_compile_ok(m, &o);
    assert_int_equal(sim_exe_trace_json(e, &json, &len, &err), IPUOF_E_INVAL);
    run_ok(e);
    assert_int_equal(sim_exe_trace_json(e, &json, &len, &err), 0);
    assert_int_equal(strlen(json), len);
    s = parse_trace(json, &n);
    free(json);
    printf("  %zu spans\n", n);

    /* ramp-up: micro-batch 0 goes through the stages one tick after another, and until it
     * reaches the last stage not every IPU is busy */
    for (int st = 1; st < 4; st++) {
        const struct span *a, *b;
        snprintf(name, sizeof(name), "F%d.0", st - 1);
        a = find(s, n, name);
        snprintf(name, sizeof(name), "F%d.0", st);
        b = find(s, n, name);
        assert_int_equal(b->tid, (unsigned)st);
        assert_true(b->ts >= a->ts + a->dur);
        assert_int_equal(busy_in_tick(s, n, a), st);
    }
    /* backward in reverse stage order, each on its forward's IPU */
    for (int st = 3; st > 0; st--) {
        const struct span *a, *b;
        snprintf(name, sizeof(name), "B%d.0", st);
        a = find(s, n, name);
        snprintf(name, sizeof(name), "B%d.0", st - 1);
        b = find(s, n, name);
        assert_int_equal(a->tid, (unsigned)st);
        assert_true(b->ts >= a->ts + a->dur);
    }
    /* steady state: when B0.0 runs, every IPU is busy */
    {
        const struct span *b00 = find(s, n, "B0.0");
        assert_int_equal(busy_in_tick(s, n, b00), 4);
    }
    /* on each IPU the micro-batches come in order */
    for (int st = 0; st < 4; st++)
        for (int mb = 1; mb < 10; mb++) {
            char prev[32];
            snprintf(prev, sizeof(prev), "F%d.%d", st, mb - 1);
            snprintf(name, sizeof(name), "F%d.%d", st, mb);
            assert_true(find(s, n, name)->ts > find(s, n, prev)->ts);
            snprintf(prev, sizeof(prev), "B%d.%d", st, mb - 1);
            snprintf(name, sizeof(name), "B%d.%d", st, mb);
            assert_true(find(s, n, name)->ts > find(s, n, prev)->ts);
        }
    /* ramp-down: the last stage finishes first, the first stage last, then the update */
    last_b3 = find(s, n, "B3.9");
    last_b0 = find(s, n, "B0.9");
    assert_true(last_b3->ts + last_b3->dur <= last_b0->ts);
    assert_int_equal(busy_in_tick(s, n, last_b0), 1);
    upd = find(s, n, "weight-update");
    assert_true(upd->ts >= last_b0->ts + last_b0->dur);
    free(s);
    sim_exe_free(e);

    /* sharded: never two IPUs at once */
    o.strategy = SIM_STRATEGY_SHARDED;
    e = test_compile_ok(m, &o);
    run_ok(e);
    assert_int_equal(sim_exe_trace_json(e, &json, &len, &err), 0);
    s = parse_trace(json, &n);
    free(json);
    for (size_t i = 0; i < n; i++)
        if (is_compute(&s[i]))
            assert_int_equal(busy_in_tick(s, n, &s[i]), 1);
    free(s);
    sim_exe_free(e);

    /* without profiling there is no trace */
    o.profile = 0;
    e = test_compile_ok(m, &o);
    run_ok(e);
    assert_int_equal(sim_exe_trace_json(e, &json, &len, &err), IPUOF_E_INVAL);
    sim_exe_free(e);
    sim_model_free(m);
}

/* ---- the simulated clock ---------------------------------------------------------------- */

static void
cost_of(const struct sim_model *m, struct sim_compile_opts *o, struct sim_cost_report *rep)
{
    struct sim_exe *e = test_compile_ok(m, o);

    run_ok(e);
    assert_int_equal(sim_exe_cost(e, rep), 0);
    sim_exe_free(e);
}

static void
test_clock(void **state)
{
    struct sim_model *m = tutorial();
    struct sim_compile_opts o;
    struct sim_cost_report pipe, pipe2, shard, one, off;

    (void)state;
    /* the tutorial's options: batch 40, accumulation 10, 10 device iterations, AdamW,
     * B1..B4 on four IPUs, pipelined: one call is 4000 samples */
    train_opts(&o, 40, 10, 10);
    o.cost.step_s = 0;          /* without a run's fixed cost every iteration costs the same */
    o.blocks = tutorial_stages;
    o.n_blocks = 6;
    cost_of(m, &o, &pipe);
    /* the rest compares strategies over two device iterations (the clock of every
     * iteration is the same) */
    o.device_iterations = 2;
    cost_of(m, &o, &pipe2);
    o.location[SIM_LOC_OPTIMIZER] = SIM_LOC_OFF_CHIP;
    cost_of(m, &o, &off);
    o.location[SIM_LOC_OPTIMIZER] = SIM_LOC_ON_CHIP;
    o.strategy = SIM_STRATEGY_SHARDED;
    cost_of(m, &o, &shard);
    o.blocks = NULL;
    o.n_blocks = 0;
    o.strategy = SIM_STRATEGY_DEFAULT;
    cost_of(m, &o, &one);
    printf("  tutorial, 4 IPUs pipelined: %.3f ms per call of 4000 samples = %.1f it/s "
           "(%.0f samples/s; the tutorial's README prints 16.9 and 16.7 it/s, its host's data "
           "loading included: docs/cost-model.md), busy %.2f %.2f %.2f %.2f, "
           "bottleneck stage %d\n", pipe.device_seconds * 1e3, 1.0 / pipe.device_seconds,
           pipe.samples_per_s, pipe.busy[0], pipe.busy[1], pipe.busy[2], pipe.busy[3],
           pipe.bottleneck_stage);
    printf("  per 2 device iterations: pipelined %.3f ms, sharded %.3f ms, one IPU %.3f ms, "
           "pipelined with the optimizer off chip %.3f ms\n", pipe2.device_seconds * 1e3,
           shard.device_seconds * 1e3, one.device_seconds * 1e3, off.device_seconds * 1e3);
    assert_int_equal(pipe.n_ipus, 4);
    assert_int_equal(one.n_ipus, 1);
    assert_true(pipe.device_seconds > 0 && isfinite(pipe.device_seconds));
    assert_true(fabs(pipe.samples_per_s * pipe.device_seconds - 4000) < 1e-6);
    assert_true(fabs(pipe2.device_seconds * 5 - pipe.device_seconds) < 0.01 * pipe.device_seconds);
    /* pipelining overlaps the stages: faster than sharding, every IPU busier */
    assert_true(pipe2.device_seconds < shard.device_seconds);
    for (int i = 0; i < 4; i++) {
        assert_true(pipe2.busy[i] > shard.busy[i]);
        assert_true(pipe2.busy[i] > 0 && pipe2.busy[i] <= 1);
    }
    /* the first conv layer has fewer FLOPs than the second: stage 1 is the bottleneck */
    assert_int_equal(pipe.bottleneck_stage, 1);
    /* streaming the optimizer state costs time */
    assert_true(off.device_seconds > pipe2.device_seconds);
    sim_model_free(m);
}

/* ---- the same numbers whatever the strategy --------------------------------------------- */

static float
max_weight_diff(struct sim_exe *a, struct sim_exe *b)
{
    struct sim_weight_info wi;
    struct sim_err err;
    float d = 0;

    assert_int_equal(sim_exe_weight_count(a), sim_exe_weight_count(b));
    for (size_t i = 0; i < sim_exe_weight_count(a); i++) {
        float *x, *y;
        assert_int_equal(sim_exe_weight_info(a, i, &wi), 0);
        x = malloc(wi.bytes);
        y = malloc(wi.bytes);
        assert_int_equal(sim_exe_read_weight(a, wi.name, x, wi.bytes, &err), 0);
        assert_int_equal(sim_exe_read_weight(b, wi.name, y, wi.bytes, &err), 0);
        for (size_t k = 0; k < wi.bytes / 4; k++)
            if (fabsf(x[k] - y[k]) > d)
                d = fabsf(x[k] - y[k]);
        free(x);
        free(y);
    }
    return d;
}

/* Trains 10 optimizer steps with every strategy; the weights agree with one IPU's. */
static void
same_weights(const struct sim_model *m, struct sim_compile_opts *o,
             const struct sim_block_opt *blocks, size_t n_blocks)
{
    static const int strategies[] = { SIM_STRATEGY_PIPELINED, SIM_STRATEGY_SHARDED,
                                      SIM_STRATEGY_PHASED };
    static const char *const names[] = { "pipelined", "sharded", "phased" };
    struct sim_exe *one, *e;

    o->blocks = NULL;
    o->n_blocks = 0;
    o->strategy = SIM_STRATEGY_DEFAULT;
    one = test_compile_ok(m, o);
    run_ok(one);
    assert_int_equal(sim_exe_optimizer_steps(one), 10);
    o->blocks = blocks;
    o->n_blocks = n_blocks;
    for (int i = 0; i < 3; i++) {
        float d;
        o->strategy = strategies[i];
        e = test_compile_ok(m, o);
        assert_int_equal(sim_exe_ipu_count(e), n_blocks > 2 ? 4 : 2);
        run_ok(e);
        d = max_weight_diff(one, e);
        printf("  %s: max |w - w(one IPU)| = %g after 10 steps\n", names[i], (double)d);
        assert_true(d <= 1e-5f);
        sim_exe_free(e);
    }
    sim_exe_free(one);
}

static void
test_strategies_same_weights(void **state)
{
    struct sim_model *m = tutorial();
    struct sim_compile_opts o;

    (void)state;
    train_opts(&o, 8, 4, 10);
    same_weights(m, &o, tutorial_stages, 6);
    sim_model_free(m);
}

/* x [B,1,8,8] -> Conv 4x3x3 -> BatchNormalization -> Relu -> Flatten -> Gemm 10 -> loss,
 * in blocks "b1" (conv, bn) and "b2" (the rest). */
static struct sim_model *
bn_model(bool dropout)
{
    struct sim_ob *b = sim_ob_new(13);
    const int64_t dx[4] = { -1, 1, 8, 8 }, dy[1] = { -1 }, dw[4] = { 4, 1, 3, 3 };
    const int64_t d4[1] = { 4 }, dfc[2] = { 10, 144 }, d10[1] = { 10 };
    float w[144 * 10], ones[4] = { 1, 1, 1, 1 }, zeros[10] = { 0 };
    uint64_t s = 99;
    void *bytes;
    size_t len;

    mnist_uniform(&s, w, 36, 1.0f / 3);
    sim_ob_input(b, "x", F32, 4, dx);
    sim_ob_input(b, "y", SIM_DTYPE_INT64, 1, dy);
    sim_ob_initializer(b, "conv.w", F32, 4, dw, w);
    sim_ob_initializer(b, "bn.scale", F32, 1, d4, ones);
    sim_ob_initializer(b, "bn.bias", F32, 1, d4, zeros);
    sim_ob_initializer(b, "bn.mean", F32, 1, d4, zeros);
    sim_ob_initializer(b, "bn.var", F32, 1, d4, ones);
    mnist_uniform(&s, w, 1440, 1.0f / 12);
    sim_ob_initializer(b, "fc.w", F32, 2, dfc, w);
    sim_ob_initializer(b, "fc.b", F32, 1, d10, zeros);
    sim_ob_node(b, "Conv", "b1/conv", "x,conv.w", "c");
    sim_ob_node(b, "BatchNormalization", "b1/bn", "c,bn.scale,bn.bias,bn.mean,bn.var", "n");
    if (dropout) {      /* a mask per node and micro-batch, whatever the strategy */
        sim_ob_node(b, "Dropout", "b1/drop", "n", "nd");
        sim_ob_node(b, "Relu", "b2/relu", "nd", "r");
    } else {
        sim_ob_node(b, "Relu", "b2/relu", "n", "r");
    }
    sim_ob_node(b, "Flatten", "b2/flatten", "r", "f");
    sim_ob_node(b, "Gemm", "b2/fc", "f,fc.w,fc.b", "logits");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "b2/loss", "logits,y", "loss");
    sim_ob_output(b, "loss", F32);
    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    sim_ob_free(b);
    return load_bytes(bytes, len);
}

static void
test_batchnorm_same_weights(void **state)
{
    static const struct sim_block_opt blocks[] = { { "b1", -1, 0 }, { "b2", -1, 1 } };
    struct sim_model *m = bn_model(false);
    struct sim_compile_opts o;

    (void)state;
    train_opts(&o, 6, 2, 10);
    same_weights(m, &o, blocks, 2);
    sim_model_free(m);
}

/* Dropout on the first IPU, its result crossing to the second: the masks come from a
 * generator per node and micro-batch (not from a stream shared by the IPU threads of a
 * replica), so every strategy draws the same ones. */
static void
test_dropout_same_weights(void **state)
{
    static const struct sim_block_opt blocks[] = { { "b1", -1, 0 }, { "b2", -1, 1 } };
    struct sim_model *m = bn_model(true);
    struct sim_compile_opts o;

    (void)state;
    train_opts(&o, 6, 2, 10);
    same_weights(m, &o, blocks, 2);
    sim_model_free(m);
}

/* ---- replicas on their own threads ---------------------------------------------------- */

static int
thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *de;
    int n = 0;

    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* The thread count once it is want, or after about two seconds: a joined thread can stay
 * listed in /proc/self/task for a moment after pthread_join returns. */
static int
thread_count_settled(int want)
{
    const struct timespec ms = { 0, 1000 * 1000 };
    int n = thread_count();

    for (int i = 0; i < 2000 && n != want; i++) {
        nanosleep(&ms, NULL);
        n = thread_count();
    }
    return n;
}

struct bg_run {
    struct sim_exe *e;
    struct sim_err err;
    int rc;
};

static void *
bg_run(void *p)
{
    struct bg_run *b = p;

    b->rc = sim_exe_run(b->e, &b->err);
    return NULL;
}

static void
test_replica_threads(void **state)
{
    struct sim_model *m = tutorial();
    struct sim_compile_opts o;
    struct sim_exe *e;
    struct bg_run b;
    pthread_t th;
    int before, after;
    const struct timespec pause = { 0, 1000 * 1000 };
    static struct sim_step_rec steps[64];

    (void)state;
    train_opts(&o, 8, 2, 2);
    o.replicas = 4;
    e = test_compile_ok(m, &o);
    before = thread_count();
    run_ok(e);
    after = thread_count();
    printf("  threads: %d before the first run, %d after (4 replicas)\n", before, after);
    assert_int_equal(after, before + 4);        /* one per simulated IPU */
    run_ok(e);
    assert_int_equal(thread_count(), after);    /* created once per executable */
    assert_int_equal(sim_exe_optimizer_steps(e), 4);
    sim_exe_free(e);
    assert_int_equal(thread_count_settled(before), before);   /* joined when it is freed */

    /* a long run over four replica threads stops when cancelled (once it has started:
     * its first step logged; a cancel before a run is not the run's) */
    o.device_iterations = 500;
    e = test_compile_ok(m, &o);
    assert_int_equal(mnist_fill_inputs(e), 0);
    sim_exe_log_steps(e, steps, sizeof(steps) / sizeof(steps[0]));
    b.e = e;
    assert_int_equal(pthread_create(&th, NULL, bg_run, &b), 0);
    for (int i = 0; i < 60000 && sim_exe_logged_steps(e) == 0; i++)
        nanosleep(&pause, NULL);
    sim_exe_cancel(e);
    assert_int_equal(pthread_join(th, NULL), 0);
    printf("  %s\n", b.err.msg);
    assert_int_equal(b.rc, IPUOF_E_CANCELLED);
    assert_true(sim_exe_optimizer_steps(e) < 500);
    sim_exe_free(e);
    sim_model_free(m);
}

/* A model over 4 IPUs runs on a thread per (replica, IPU), created at the first run and
 * joined at free; a long run over 2 x 4 IPU threads stops promptly when cancelled, and
 * the same executable then runs again. */
static void
test_ipu_threads(void **state)
{
    struct sim_model *m = tutorial();
    struct sim_compile_opts o;
    struct sim_exe *e;
    struct bg_run b;
    pthread_t th;
    int before, after;
    const struct timespec pause = { 0, 50 * 1000 * 1000 }, tick = { 0, 1000 * 1000 };
    struct timespec t0, t1;
    double waited;

    (void)state;
    train_opts(&o, 8, 4, 2);
    o.blocks = tutorial_stages;
    o.n_blocks = 6;
    o.strategy = SIM_STRATEGY_SHARDED;
    e = test_compile_ok(m, &o);
    before = thread_count();
    run_ok(e);
    after = thread_count();
    printf("  threads: %d before the first run, %d after (1 replica x 4 IPUs)\n", before,
           after);
    assert_int_equal(after, before + 4);
    run_ok(e);
    assert_int_equal(thread_count(), after);
    sim_exe_free(e);
    assert_int_equal(thread_count_settled(before), before);

    o.replicas = 2;
    o.device_iterations = 500;
    o.strategy = SIM_STRATEGY_PIPELINED;
    e = test_compile_ok(m, &o);
    assert_int_equal(mnist_fill_inputs(e), 0);
    b.e = e;
    assert_int_equal(pthread_create(&th, NULL, bg_run, &b), 0);
    /* until the run has started its threads, however slowly a loaded machine starts them */
    for (int i = 0; i < 10000 && thread_count() < before + 1 + 8; i++)
        nanosleep(&tick, NULL);
    nanosleep(&pause, NULL);
    assert_int_equal(thread_count(), before + 1 + 8);   /* bg_run's thread + 8 IPU threads */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sim_exe_cancel(e);
    assert_int_equal(pthread_join(th, NULL), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("  %s (stopped %.3f s after the cancel)\n", b.err.msg, waited);
    assert_int_equal(b.rc, IPUOF_E_CANCELLED);
    assert_true(sim_exe_optimizer_steps(e) < 500);
    /* the threads are parked, not gone, and the executable runs again */
    o.device_iterations = 2;
    sim_exe_free(e);
    assert_int_equal(thread_count_settled(before), before);
    e = test_compile_ok(m, &o);
    run_ok(e);
    assert_int_equal(sim_exe_optimizer_steps(e), 2);
    sim_exe_free(e);
    sim_model_free(m);
}

/* A model on one IPU runs as every other does (issue 18): each simulated IPU on a thread
 * of its own, the caller's thread only waiting, a one-replica run too, interpreting its
 * program: the step log has every micro-batch's forward (and backward when training) in
 * order, each replica's on one thread that is not the caller's. */
static void
test_one_ipu_threads(void **state)
{
    enum { A = 3, D = 2, CAP = 256 };
    struct sim_model *m = tutorial();
    struct sim_compile_opts o;
    struct sim_step_rec *log = calloc(CAP, sizeof(*log));
    unsigned long self = (unsigned long)pthread_self();

    (void)state;
    assert_non_null(log);
    for (int train = 1; train >= 0; train--)
        for (unsigned R = 1; R <= 2; R++) {
            struct sim_exe *e;
            unsigned long th[2] = { 0, 0 };
            size_t n, want = (size_t)R * D * A * (train ? 2 : 1);
            int before, after;
            if (train) {
                train_opts(&o, 8, A, D);
            } else {
                sim_compile_opts_init(&o);
                o.micro_batch = 8;
                o.device_iterations = D * A;
            }
            o.replicas = R;
            e = test_compile_ok(m, &o);
            sim_exe_log_steps(e, log, CAP);
            before = thread_count();
            run_ok(e);
            after = thread_count();
            n = sim_exe_logged_steps(e);
            printf("  %s, %u replica(s): %d threads after the first run (%d before), %zu "
                   "steps logged\n", train ? "training" : "inference", R, after, before, n);
            assert_int_equal(after, before + (int)R);   /* one per simulated IPU */
            assert_int_equal(n, want);
            for (size_t i = 0; i < n; i++) {
                const struct sim_step_rec *r = &log[i];
                assert_int_equal(r->ipu, 0);
                assert_int_equal(r->stage, 0);
                assert_true(r->thread != self);
                if (th[r->replica] == 0)
                    th[r->replica] = r->thread;
                assert_true(th[r->replica] == r->thread);
            }
            if (R == 2)
                assert_true(th[0] != th[1]);
            sim_exe_log_steps(e, NULL, 0);
            sim_exe_free(e);
            assert_int_equal(thread_count_settled(before), before);     /* joined */
        }
    free(log);
    sim_model_free(m);
}

/* sim_exe_idle (what the daemon's cache does to an executable nobody uses): the threads of
 * its simulated IPUs are joined, and its next run starts them again and gives the same
 * bytes, inference over 2 replicas and pipelined training alike. */
static void
test_idle_stops_threads(void **state)
{
    struct sim_model *m = tutorial();
    struct sim_compile_opts o;

    (void)state;
    for (int train = 0; train <= 1; train++) {
        struct sim_exe *e;
        struct sim_io_info info;
        void *first;
        int before, after;
        if (train) {
            train_opts(&o, 8, 4, 2);
            o.blocks = tutorial_stages;
            o.n_blocks = 6;
            o.strategy = SIM_STRATEGY_PIPELINED;
        } else {
            sim_compile_opts_init(&o);
            o.micro_batch = 8;
            o.device_iterations = 4;
            o.replicas = 2;
        }
        e = test_compile_ok(m, &o);
        sim_exe_idle(e);                    /* before any run: nothing to stop */
        before = thread_count();
        run_ok(e);
        after = thread_count();
        assert_true(after > before);
        assert_int_equal(sim_exe_output_info(e, 0, &info), 0);
        first = malloc(info.run_bytes);
        assert_non_null(first);
        memcpy(first, sim_exe_output_buffer(e, 0), info.run_bytes);
        sim_exe_idle(e);
        printf("  %s: %d threads while it holds its IPUs' threads, %d idle (%d before)\n",
               train ? "pipelined training" : "inference x 2 replicas", after,
               thread_count_settled(before), before);
        assert_int_equal(thread_count_settled(before), before);
        if (!train) {                       /* the same inputs give the same bytes */
            run_ok(e);
            assert_int_equal(thread_count(), after);
            assert_memory_equal(first, sim_exe_output_buffer(e, 0), info.run_bytes);
        } else {                            /* training goes on from its updated weights */
            run_ok(e);
            assert_int_equal(thread_count(), after);
        }
        free(first);
        sim_exe_free(e);
        assert_int_equal(thread_count_settled(before), before);
    }
    sim_model_free(m);
}

/* The tutorial pipelined over 4 IPUs, from the IPU threads' step log: in each step of the
 * steady state four distinct host threads, one per IPU, each ran the forward and the
 * backward of micro-batches no other IPU touched in that step; the numbers are those of
 * one IPU. */
static void
test_pipeline_concurrency(void **state)
{
    enum { A = 12, N = 4, CAP = 4096 };
    struct sim_model *m = tutorial();
    struct sim_compile_opts o;
    struct sim_exe *e, *one;
    struct sim_step_rec *log = calloc(CAP, sizeof(*log));
    size_t n;
    int steady = 0;

    (void)state;
    assert_non_null(log);
    train_opts(&o, 8, A, 2);
    one = test_compile_ok(m, &o);
    run_ok(one);
    o.blocks = tutorial_stages;
    o.n_blocks = 6;
    o.strategy = SIM_STRATEGY_PIPELINED;
    e = test_compile_ok(m, &o);
    sim_exe_log_steps(e, log, CAP);
    run_ok(e);
    n = sim_exe_logged_steps(e);
    /* every stage ran a forward and a backward of every micro-batch of both iterations */
    assert_int_equal(n, 2 * 2 * N * A);
    for (long long t = 2 * N - 1; t < A; t++) {
        unsigned long th[N];
        int fwd_mb[N], bwd_mb[N], seen = 0;
        for (int p = 0; p < N; p++)
            fwd_mb[p] = bwd_mb[p] = -1;
        for (size_t i = 0; i < n; i++) {
            const struct sim_step_rec *r = &log[i];
            if (r->iteration != 0 || r->step != t)
                continue;
            assert_true(r->ipu < N);
            assert_int_equal(r->stage, (int)r->ipu);
            if (fwd_mb[r->ipu] < 0 && bwd_mb[r->ipu] < 0) {
                th[r->ipu] = r->thread;
                seen++;
            } else {
                assert_true(th[r->ipu] == r->thread);   /* an IPU is one thread */
            }
            if (r->backward)
                bwd_mb[r->ipu] = (int)r->micro_batch;
            else
                fwd_mb[r->ipu] = (int)r->micro_batch;
        }
        assert_int_equal(seen, N);
        for (int p = 0; p < N; p++) {
            /* stage p: forward of t - p, backward of t - (2N - 1 - p) */
            assert_int_equal(fwd_mb[p], (int)t - p);
            assert_int_equal(bwd_mb[p], (int)t - (2 * N - 1 - p));
            for (int q = 0; q < p; q++) {
                assert_true(th[p] != th[q]);
                assert_true(fwd_mb[p] != fwd_mb[q] && fwd_mb[p] != bwd_mb[q]);
            }
        }
        steady++;
    }
    printf("  %d steady-state steps: 4 IPU threads, each on its own micro-batches\n", steady);
    assert_int_equal(steady, A - (2 * N - 1));
    assert_true(max_weight_diff(one, e) <= 1e-5f);
    sim_exe_log_steps(e, NULL, 0);
    sim_exe_free(e);
    sim_exe_free(one);
    free(log);
    sim_model_free(m);
}

/* The simulated clock replays the programs the IPU threads ran (sim/sched/program.h): for every
 * strategy, the trace's forward and backward spans are exactly the works the threads
 * logged (replica, IPU, stage, direction, device iteration, micro-batch), and each IPU's
 * spans follow one another in the order of the schedule steps the thread ran them in. */
static void
test_clock_replays_run(void **state)
{
    enum { A = 12, D = 2, R = 2, CAP = 8192 };
    static const int strategies[] = { SIM_STRATEGY_PIPELINED, SIM_STRATEGY_SHARDED,
                                      SIM_STRATEGY_PHASED };
    struct sim_model *m = tutorial();
    struct sim_step_rec *log = calloc(CAP, sizeof(*log));
    bool *used = calloc(CAP, sizeof(*used));

    (void)state;
    assert_non_null(log);
    assert_non_null(used);
    for (int si = 0; si < 3; si++) {
        struct sim_compile_opts o;
        struct sim_exe *e;
        struct sim_err err;
        char *json;
        const char *p;
        size_t len, n, spans = 0;
        long long last_step[R * 4], last_iter[R * 4];
        double last_ts[R * 4];
        train_opts(&o, 4, A, D);
        o.replicas = R;
        o.blocks = tutorial_stages;
        o.n_blocks = 6;
        o.strategy = strategies[si];
        o.profile = 1;
        e = test_compile_ok(m, &o);
        sim_exe_log_steps(e, log, CAP);
        run_ok(e);
        n = sim_exe_logged_steps(e);
        assert_int_equal(n, (size_t)R * D * A * 4 * 2);
        memset(used, 0, CAP * sizeof(*used));
        for (int t = 0; t < R * 4; t++) {
            last_step[t] = -1;
            last_iter[t] = -1;
            last_ts[t] = -1;
        }
        if (sim_exe_trace_json(e, &json, &len, &err) != 0)
            fail_msg("trace: %s", err.msg);
        for (p = json; (p = strstr(p, "{\"name\":\"")) != NULL; p++) {
            char dir;
            int stage, st2;
            long long mb, mb2, iter;
            unsigned tid;
            double ts, dur;
            size_t i;
            if (sscanf(p, "{\"name\":\"%c%d.%lld\",\"ph\":\"X\",\"pid\":0,\"tid\":%u,\"ts\":%lf,"
                       "\"dur\":%lf,\"args\":{\"stage\":%d,\"mb\":%lld,\"iter\":%lld", &dir,
                       &stage, &mb, &tid, &ts, &dur, &st2, &mb2, &iter) != 9 ||
                (dir != 'F' && dir != 'B'))
                continue;
            for (i = 0; i < n; i++) {
                const struct sim_step_rec *r = &log[i];
                if (!used[i] && r->replica * 4 + r->ipu == tid && r->stage == stage &&
                    r->backward == (dir == 'B') && r->iteration == (unsigned)iter &&
                    r->micro_batch == (unsigned)mb)
                    break;
            }
            if (i == n)
                fail_msg("strategy %d: the trace's %c%d.%lld (IPU %u, iteration %lld) is no "
                         "work the IPU threads ran", strategies[si], dir, stage, mb, tid, iter);
            used[i] = true;
            spans++;
            /* on one IPU the clock's spans come in the threads' step order */
            assert_true(ts >= last_ts[tid]);
            assert_true(iter > last_iter[tid] ||
                        (iter == last_iter[tid] && log[i].step >= last_step[tid]));
            last_ts[tid] = ts;
            last_iter[tid] = iter;
            last_step[tid] = log[i].step;
        }
        printf("  strategy %d: %zu trace spans = %zu works the IPU threads ran\n",
               strategies[si], spans, n);
        assert_int_equal(spans, n);
        free(json);
        sim_exe_log_steps(e, NULL, 0);
        sim_exe_free(e);
    }
    free(used);
    free(log);
    sim_model_free(m);
}

/* A pipelined run whose last stage fails halfway (a label out of range in one micro-batch
 * of one replica) stops every IPU thread of every replica with that error, the optimizer
 * steps of the iterations before it taken, and the executable trains again afterwards. */
static void
test_pipeline_failure(void **state)
{
    enum { B = 8, A = 6, D = 3, R = 2 };
    struct sim_model *m = tutorial();
    struct sim_compile_opts o;
    struct sim_exe *e;
    struct sim_io_info in;
    struct sim_err err;
    int64_t *labels = NULL;

    (void)state;
    train_opts(&o, B, A, D);
    o.replicas = R;
    o.blocks = tutorial_stages;
    o.n_blocks = 6;
    o.strategy = SIM_STRATEGY_PIPELINED;
    e = test_compile_ok(m, &o);
    assert_int_equal(mnist_fill_inputs(e), 0);
    for (size_t i = 0; i < sim_exe_input_count(e); i++) {
        assert_int_equal(sim_exe_input_info(e, i, &in), 0);
        if (in.dtype != F32)
            labels = sim_exe_input_buffer(e, i);
    }
    assert_non_null(labels);
    /* iteration 1, accumulation step 4, replica 1, sample 3 ([D][A][R][B] layout) */
    labels[((1 * A + 4) * R + 1) * B + 3] = 99;
    assert_int_equal(sim_exe_run(e, &err), IPUOF_E_INVAL);
    printf("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "label 99"));
    assert_non_null(strstr(err.msg, "device iteration 1"));
    assert_int_equal(sim_exe_optimizer_steps(e), 1);
    run_ok(e);
    assert_int_equal(sim_exe_optimizer_steps(e), 1 + D);
    sim_exe_free(e);
    sim_model_free(m);
}

/* Inference pipelined over 4 IPUs (stage k on micro-batch t - k in step t) and sharded
 * return the outputs of one IPU. */
static void
test_pipelined_inference(void **state)
{
    static const int strategies[] = { SIM_STRATEGY_PIPELINED, SIM_STRATEGY_SHARDED };
    struct sim_model *m = tutorial();
    struct sim_compile_opts o;
    struct sim_exe *one, *e;
    struct sim_io_info info;

    (void)state;
    sim_compile_opts_init(&o);
    o.micro_batch = 8;
    o.device_iterations = 7;
    o.replicas = 2;
    one = test_compile_ok(m, &o);
    run_ok(one);
    o.blocks = tutorial_stages;
    o.n_blocks = 6;
    for (int i = 0; i < 2; i++) {
        o.strategy = strategies[i];
        e = test_compile_ok(m, &o);
        run_ok(e);
        assert_int_equal(sim_exe_output_count(e), sim_exe_output_count(one));
        for (size_t j = 0; j < sim_exe_output_count(e); j++) {
            const float *x = sim_exe_output_buffer(one, j), *y = sim_exe_output_buffer(e, j);
            float d = 0;
            assert_int_equal(sim_exe_output_info(e, j, &info), 0);
            assert_int_equal(info.dtype, F32);
            for (size_t k = 0; k < info.run_bytes / 4; k++)
                d = fabsf(x[k] - y[k]) > d ? fabsf(x[k] - y[k]) : d;
            printf("  %s inference, output %zu: max |y - y(one IPU)| = %g\n",
                   i == 0 ? "pipelined" : "sharded", j, (double)d);
            assert_true(d <= 1e-5f);
        }
        sim_exe_free(e);
    }
    sim_exe_free(one);
    sim_model_free(m);
}

/* ---- memory --------------------------------------------------------------------------- */

#define BIG 4720    /* 4 square layers of 4720 x 4720 floats: 340 MiB of weights */

static struct sim_model *
big_mlp(void)
{
    struct sim_ob *b = sim_ob_new(13);
    const int64_t dx[2] = { 8, BIG }, dw[2] = { BIG, BIG };
    float *w = calloc((size_t)BIG * BIG, sizeof(float));
    char name[16], in[24], out[16];
    void *bytes;
    size_t len;

    assert_non_null(w);
    sim_ob_input(b, "x", F32, 2, dx);
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof(name), "w%d", i);
        sim_ob_initializer(b, name, F32, 2, dw, w);
    }
    free(w);
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof(name), "fc%d", i);
        if (i == 0)
            snprintf(in, sizeof(in), "x,w0");
        else
            snprintf(in, sizeof(in), "a%d,w%d", i - 1, i);
        snprintf(out, sizeof(out), "h%d", i);
        sim_ob_node(b, "MatMul", name, in, out);
        snprintf(name, sizeof(name), "act%d", i);
        snprintf(in, sizeof(in), "h%d", i);
        snprintf(out, sizeof(out), "a%d", i);
        sim_ob_node(b, "Relu", name, in, out);
    }
    sim_ob_node(b, "Mul", "lossmul", "a3,a3", "sq");
    sim_ob_node(b, "ReduceMean", "lossmean", "sq", "loss");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_output(b, "loss", F32);
    assert_int_equal(sim_ob_serialize(b, &bytes, &len), 0);
    sim_ob_free(b);
    return load_bytes(bytes, len);
}

static void
test_memory_fit(void **state)
{
    static const struct sim_block_opt blocks[] = {
        { "fc0", 0, 0 }, { "fc1", 1, 1 }, { "fc2", 2, 2 }, { "fc3", 3, 3 },
    };
    struct sim_model *m = big_mlp();
    struct sim_compile_opts o;
    struct sim_mem_report r;
    struct sim_exe *e;

    (void)state;
    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.gradient_accumulation = 4;
    sim_optimizer_init(&o.optimizer, SIM_OPT_ADAM);
    /* one IPU: 340 MiB of weights, as much of gradients, twice as much of Adam's state */
    compile_fails(m, &o, IPUOF_E_DEVICE_OOM, "IPU 0 (replica 0) needs");
    compile_fails(m, &o, IPUOF_E_DEVICE_OOM, "with the optimizer state off chip");
    compile_fails(m, &o, IPUOF_E_DEVICE_OOM, "split over at least 2 IPUs");

    /* the optimizer state off chip: fits, and the report says where it went */
    o.location[SIM_LOC_OPTIMIZER] = SIM_LOC_OFF_CHIP;
    e = test_compile_ok(m, &o);
    assert_int_equal(sim_exe_memory(e, 0, &r), 0);
    printf("  optimizer off chip: IPU 0 total %llu MiB, off chip %llu MiB\n",
           (unsigned long long)(r.total / MIB), (unsigned long long)(r.offchip / MIB));
    assert_int_equal(r.optimizer, 0);
    assert_int_equal(r.offchip, 2 * 4 * (uint64_t)BIG * BIG * 4);
    assert_true(r.total <= r.capacity);
    sim_exe_free(e);

    /* pipelined over four IPUs: a quarter each, plus the stashes of in-flight batches */
    o.location[SIM_LOC_OPTIMIZER] = SIM_LOC_ON_CHIP;
    o.blocks = blocks;
    o.n_blocks = 4;
    e = test_compile_ok(m, &o);
    assert_int_equal(sim_exe_ipu_count(e), 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(sim_exe_memory(e, i, &r), 0);
        printf("  pipelined, IPU %zu: total %llu MiB, stash %llu KiB, peak not always live "
               "%llu KiB\n", i, (unsigned long long)(r.total / MIB),
               (unsigned long long)(r.stash >> 10),
               (unsigned long long)(r.peak_not_always_live >> 10));
        assert_true(r.total <= r.capacity);
        assert_int_equal(r.offchip, 0);
        assert_true(r.peak_not_always_live > 0);
        /* stage i keeps min(A, 2(4-i)-1) micro-batches in flight: i = 3 keeps only one */
        if (i < 3)
            assert_true(r.stash > 0);
        else
            assert_int_equal(r.stash, 0);
    }
    sim_exe_free(e);

    /* serial phased on one IPU: only the running phase's weights on chip */
    {
        static const struct sim_block_opt phases[] = {
            { "fc0", 0, 0 }, { "fc1", 1, 0 }, { "fc2", 2, 0 }, { "fc3", 3, 0 },
        };
        uint64_t layer = (uint64_t)BIG * BIG * 4;
        o.blocks = phases;
        o.strategy = SIM_STRATEGY_PHASED;
        compile_fails(m, &o, IPUOF_E_DEVICE_OOM, "IPU 0 (replica 0) needs");
        o.location[SIM_LOC_OPTIMIZER] = SIM_LOC_OFF_CHIP;
        o.location[SIM_LOC_ACCUMULATORS] = SIM_LOC_OFF_CHIP;
        e = test_compile_ok(m, &o);
        assert_int_equal(sim_exe_ipu_count(e), 1);
        assert_int_equal(sim_exe_memory(e, 0, &r), 0);
        printf("  phased on one IPU: weights on chip %llu MiB, off chip %llu MiB\n",
               (unsigned long long)(r.weights / MIB), (unsigned long long)(r.offchip / MIB));
        assert_int_equal(r.weights, layer);
        assert_int_equal(r.offchip, 3 * layer + 4 * layer + 8 * layer);
        sim_exe_free(e);
    }
    sim_model_free(m);
}

/* The IPU threads are woken only for work they can run (issue 29): a thread waits for the
 * exchange its next step reads (or the buffer it writes to be read), woken by the thread
 * that moved it, not at every tick. Sharded and phased runs do one stage's work at a time:
 * a barrier per tick woke the 3 other IPU threads at each (3 wakes per work); now at most
 * one receive per work waits. Counts, not timings: the bound holds however loaded. */
static void
test_thread_wakes(void **state)
{
    enum { A = 12, D = 2, CAP = 8192 };
    static const int strategies[] = { SIM_STRATEGY_DEFAULT, SIM_STRATEGY_PIPELINED,
                                      SIM_STRATEGY_SHARDED, SIM_STRATEGY_PHASED };
    static const char *const names[] = { "single", "pipelined", "sharded", "phased" };
    struct sim_model *m = tutorial();
    struct sim_step_rec *log = calloc(CAP, sizeof(*log));
    struct sim_compile_opts o;
    bool over = false;

    (void)state;
    assert_non_null(log);
    for (unsigned R = 1; R <= 2; R++)
        for (int i = 0; i < 4; i++) {
            struct sim_exe *e;
            uint64_t wakes, polls;
            size_t works;
            train_opts(&o, 8, A, D);
            o.replicas = R;
            o.strategy = strategies[i];
            o.blocks = i > 0 ? tutorial_stages : NULL;
            o.n_blocks = i > 0 ? 6 : 0;
            e = test_compile_ok(m, &o);
            sim_exe_log_steps(e, log, CAP);
            run_ok(e);
            works = sim_exe_logged_steps(e);
            wakes = sim_exe_thread_wakes(e, &polls);
            printf("  %s, %u replica(s): %llu wakes (%llu timed out) for %zu works\n",
                   names[i], R, (unsigned long long)wakes, (unsigned long long)polls, works);
            assert_int_equal(works, (size_t)2 * R * D * A * (i > 0 ? 4 : 1));
            if (strategies[i] == SIM_STRATEGY_SHARDED || strategies[i] == SIM_STRATEGY_PHASED)
                over = over || wakes > works;
            sim_exe_log_steps(e, NULL, 0);
            sim_exe_free(e);
        }
    assert_false(over);     /* sharded and phased: at most one wake per work */
    free(log);
    sim_model_free(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_placement_errors),
        cmocka_unit_test(test_pipeline_schedule),
        cmocka_unit_test(test_clock),
        cmocka_unit_test(test_strategies_same_weights),
        cmocka_unit_test(test_batchnorm_same_weights),
        cmocka_unit_test(test_dropout_same_weights),
        cmocka_unit_test(test_replica_threads),
        cmocka_unit_test(test_ipu_threads),
        cmocka_unit_test(test_one_ipu_threads),
        cmocka_unit_test(test_idle_stops_threads),
        cmocka_unit_test(test_pipeline_concurrency),
        cmocka_unit_test(test_clock_replays_run),
        cmocka_unit_test(test_pipeline_failure),
        cmocka_unit_test(test_pipelined_inference),
        cmocka_unit_test(test_memory_fit),
        cmocka_unit_test(test_thread_wakes),
    };

    return cmocka_run_group_tests_name("sim_multi", tests, NULL, NULL);
}
