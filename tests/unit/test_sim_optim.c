/*
 * test_sim_optim.c — the optimizers of sim/exec/optim.c against their definitions computed here
 * in double: RMSprop (torch's: plain, centered with momentum; TensorFlow's), LAMB and
 * LAMBNoBias (per-tensor trust ratio, max_weight_norm), Adam and AdamW without bias
 * correction, clipping by the global gradient norm (clip_grad_norm_), parameter groups with
 * their own hyper-parameters; the optimizer state as named tensors (read, write, sizes,
 * errors), the memory plan's optimizer bytes per kind, and set_optimizer's refusals.
 * Not here: SGD/Adam/AdamW with bias correction (test_sim_train.c), PyTorch parity through
 * a daemon (python/tests/test_optimizers.py).
 *
 * The model: loss = ReduceSum(a * x) + ReduceSum(b * b), a (4) and b (3) trained, x (4) fed
 * per step: d loss / d a = x, d loss / d b = 2 b.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }
#define NA 4
#define NB 3
#define STEPS 3             /* device iterations per run; two runs */

static const float A0[NA] = { 0.5f, -1.0f, 2.0f, 0.25f };
static const float B0[NB] = { 1.5f, -0.5f, 0.75f };

static struct sim_model *
model(void)
{
    struct sim_ob *b = sim_ob_new(17);

    sim_ob_input(b, "x", F32, 1, DIMS(NA));
    sim_ob_initializer(b, "a", F32, 1, DIMS(NA), A0);
    sim_ob_initializer(b, "b", F32, 1, DIMS(NB), B0);
    sim_ob_node(b, "Mul", "ax", "a,x", "ax");
    sim_ob_node(b, "ReduceSum", "s1", "ax", "l1");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_node(b, "Mul", "bb", "b,b", "bb");
    sim_ob_node(b, "ReduceSum", "s2", "bb", "l2");
    sim_ob_attr_int(b, "keepdims", 0);
    sim_ob_node(b, "Add", "add", "l1,l2", "loss");
    sim_ob_output(b, "loss", F32);
    return test_ob_load(b);
}

static struct sim_exe *
compile_with(const struct sim_model *m, const struct sim_optimizer *opt)
{
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;

    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.optimizer = *opt;
    o.device_iterations = STEPS;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("compile: %s", err.msg);
    return e;
}

static void
feed_and_run(struct sim_exe *e, const float *x)
{
    long i = sim_exe_input_index(e, "x");
    struct sim_err err;

    assert_true(i >= 0);
    memcpy(sim_exe_input_buffer(e, (size_t)i), x, STEPS * NA * sizeof(float));
    if (sim_exe_run(e, &err) != 0)
        fail_msg("run: %s", err.msg);
}

/* ---- the reference, in double ---------------------------------------------------------- */

/* One tensor's state: weights, and the three state buffers. */
struct rt {
    int n;
    double p[NA], s1[NA], s2[NA], s3[NA];
};

struct hyper {
    double lr, wd, mu, b1, b2, eps, alpha;
};

/* The definitions (the sources are cited in sim/exec/optim.c), applied to one tensor. */
static void
ref_tensor(const struct sim_optimizer *o, const struct hyper *h, struct rt *r,
           const double *g0, double clip, int t)
{
    double g[NA], u[NA], w2 = 0, u2 = 0, trust = 1;
    bool bc = o->bias_correction != 0;
    double c1 = bc ? 1 - pow(h->b1, t) : 1, c2 = bc ? 1 - pow(h->b2, t) : 1;

    for (int i = 0; i < r->n; i++)
        g[i] = g0[i] * clip;
    for (int i = 0; i < r->n; i++) {
        double gi = g[i], d, var;
        switch (o->kind) {
        case SIM_OPT_ADAM:
        case SIM_OPT_ADAMW:
            if (o->kind == SIM_OPT_ADAMW)
                r->p[i] *= 1 - h->lr * h->wd;
            else
                gi += h->wd * r->p[i];
            r->s1[i] = h->b1 * r->s1[i] + (1 - h->b1) * gi;
            r->s2[i] = h->b2 * r->s2[i] + (1 - h->b2) * gi * gi;
            r->p[i] -= h->lr * (r->s1[i] / c1) / (sqrt(r->s2[i] / c2) + h->eps);
            break;
        case SIM_OPT_RMSPROP:
            gi += h->wd * r->p[i];
            r->s2[i] = h->alpha * r->s2[i] + (1 - h->alpha) * gi * gi;
            var = r->s2[i];
            if (o->centered) {
                r->s3[i] = h->alpha * r->s3[i] + (1 - h->alpha) * gi;
                var -= r->s3[i] * r->s3[i];
            }
            if (o->tf_variant) {       /* tf.raw_ops.ApplyRMSProp */
                r->s1[i] = h->mu * r->s1[i] + h->lr * gi / sqrt(var + h->eps);
                r->p[i] -= r->s1[i];
            } else {                   /* torch.optim.RMSprop */
                d = sqrt(var) + h->eps;
                if (h->mu > 0) {
                    r->s1[i] = h->mu * r->s1[i] + gi / d;
                    r->p[i] -= h->lr * r->s1[i];
                } else {
                    r->p[i] -= h->lr * gi / d;
                }
            }
            break;
        case SIM_OPT_LAMB:
            r->s1[i] = h->b1 * r->s1[i] + (1 - h->b1) * gi;
            r->s2[i] = h->b2 * r->s2[i] + (1 - h->b2) * gi * gi;
            u[i] = (r->s1[i] / c1) / (sqrt(r->s2[i] / c2) + h->eps) + h->wd * r->p[i];
            w2 += r->p[i] * r->p[i];
            u2 += u[i] * u[i];
            break;
        default:
            fail_msg("no reference for kind %d", o->kind);
        }
    }
    if (o->kind != SIM_OPT_LAMB)
        return;
    /* You et al. 2019, algorithm 2: phi(||w||) / ||u||, phi clipping at max_weight_norm */
    w2 = sqrt(w2);
    if (o->max_weight_norm > 0 && w2 > o->max_weight_norm)
        w2 = o->max_weight_norm;
    if (w2 > 0 && u2 > 0)
        trust = w2 / sqrt(u2);
    for (int i = 0; i < r->n; i++)
        r->p[i] -= h->lr * trust * u[i];
}

static void
hyper_of(const struct sim_optimizer *o, int g, struct hyper *h)
{
    if (g == 0)
        *h = (struct hyper){ o->lr, o->weight_decay, o->momentum, o->beta1, o->beta2, o->eps,
                             o->alpha };
    else
        *h = (struct hyper){ o->groups[g - 1].lr, o->groups[g - 1].weight_decay,
                             o->groups[g - 1].momentum, o->groups[g - 1].beta1,
                             o->groups[g - 1].beta2, o->groups[g - 1].eps,
                             o->groups[g - 1].alpha };
}

/* One reference step of both tensors (b in group gb), with clip_grad_norm_'s factor. */
static void
ref_step(const struct sim_optimizer *o, int gb, struct rt *a, struct rt *b, const float *x,
         int t)
{
    double ga[NA], gbv[NB], sum = 0, clip = 1;
    struct hyper h;

    for (int i = 0; i < NA; i++)
        sum += (ga[i] = x[i]) * x[i];
    for (int i = 0; i < NB; i++) {
        gbv[i] = 2 * b->p[i];
        sum += gbv[i] * gbv[i];
    }
    if (o->max_grad_norm > 0) {
        double coef = o->max_grad_norm / (sqrt(sum) + 1e-6);
        clip = coef < 1 ? coef : 1;
    }
    hyper_of(o, 0, &h);
    ref_tensor(o, &h, a, ga, clip, t);
    hyper_of(o, gb, &h);
    ref_tensor(o, &h, b, gbv, clip, t);
}

static const char *const B_NAME[] = { "b" };

/* Trains 2 runs of STEPS steps with o (b in its own group when grouped, whose lr is halved
 * between the runs through set_optimizer) against the reference; returns the largest
 * relative difference of the weights. */
static double
check(const char *what, struct sim_optimizer o, bool grouped)
{
    struct sim_model *m = model();
    struct sim_exe *e;
    struct sim_err err;
    struct rt a = { .n = NA }, b = { .n = NB };
    float x[STEPS * NA], wa[NA], wb[NB];
    double d = 0;
    int t = 0;

    for (int i = 0; i < NA; i++)
        a.p[i] = A0[i];
    for (int i = 0; i < NB; i++)
        b.p[i] = B0[i];
    if (grouped) {
        o.n_groups = 1;
        o.groups[0] = (struct sim_opt_group){ o.lr * 3, o.weight_decay * 0.5f,
                                              o.momentum * 0.5f, 0, 0, 0.8f, 0.99f, 1e-6f,
                                              0.9f, B_NAME, 1 };
    }
    e = compile_with(m, &o);
    for (int run = 0; run < 2; run++) {
        for (int i = 0; i < STEPS * NA; i++)
            x[i] = (float)((i * 7 + run * 3) % 11) * 0.3f - 1.4f;
        feed_and_run(e, x);
        for (int s = 0; s < STEPS; s++)
            ref_step(&o, grouped ? 1 : 0, &a, &b, x + s * NA, ++t);
        assert_int_equal(sim_exe_read_weight(e, "a", wa, sizeof wa, &err), 0);
        assert_int_equal(sim_exe_read_weight(e, "b", wb, sizeof wb, &err), 0);
        for (int i = 0; i < NA; i++)
            d = fmax(d, fabs(wa[i] - a.p[i]) / (1 + fabs(a.p[i])));
        for (int i = 0; i < NB; i++)
            d = fmax(d, fabs(wb[i] - b.p[i]) / (1 + fabs(b.p[i])));
        o.groups[0].lr *= 0.5f;
        o.lr *= 0.75f;
        if (sim_exe_set_optimizer(e, &o, &err) != 0)
            fail_msg("%s", err.msg);
    }
    printf("%-52s 6 steps: max rel diff %.2e\n", what, d);
    assert_true(d < 3e-6);
    /* the weights moved: the test can fail */
    assert_true(fabs(wa[0] - A0[0]) > 1e-4 || fabs(wb[0] - B0[0]) > 1e-4);
    sim_exe_free(e);
    sim_model_free(m);
    return d;
}

static struct sim_optimizer
opt(int kind, float lr)
{
    struct sim_optimizer o;

    assert_int_equal(sim_optimizer_init(&o, kind), 0);
    o.lr = lr;
    return o;
}

static void
test_rmsprop(void **state)
{
    struct sim_optimizer o = opt(SIM_OPT_RMSPROP, 0.01f);

    (void)state;
    o.weight_decay = 0.01f;
    check("RMSprop", o, false);
    o.momentum = 0.5f;
    o.centered = 1;
    check("RMSprop centered, momentum 0.5", o, false);
    check("RMSprop centered, momentum, b in a group", o, true);
    o.tf_variant = 1;
    check("RMSprop TensorFlow's, centered, momentum", o, false);
    o.centered = 0;
    o.alpha = 0.9f;
    check("RMSprop TensorFlow's, momentum, alpha 0.9", o, true);
}

static void
test_lamb(void **state)
{
    struct sim_optimizer o = opt(SIM_OPT_LAMB, 0.02f);

    (void)state;
    check("LAMB", o, false);
    o.max_weight_norm = 1.2f;      /* below ||a|| (2.3): clips */
    check("LAMB max_weight_norm 1.2", o, true);
    o.bias_correction = 0;
    o.max_weight_norm = 0.0f;
    check("LAMBNoBias", o, false);
    o.weight_decay = 0.0f;
    check("LAMBNoBias without weight decay, groups", o, true);
}

static void
test_adam_without_bias_correction(void **state)
{
    struct sim_optimizer o = opt(SIM_OPT_ADAM, 0.02f);

    (void)state;
    o.bias_correction = 0;
    o.weight_decay = 0.05f;
    check("Adam, bias_correction=False", o, false);
    check("Adam, bias_correction=False, groups", o, true);
    o = opt(SIM_OPT_ADAMW, 0.02f);
    o.bias_correction = 0;
    check("AdamW, bias_correction=False", o, false);
    o.bias_correction = 1;
    check("AdamW (bias corrected), groups", o, true);
}

static void
test_clipping(void **state)
{
    struct sim_optimizer o = opt(SIM_OPT_ADAM, 0.02f);

    (void)state;
    o.max_grad_norm = 0.1f;        /* the norms here are ~3: every step clips */
    check("Adam, max_grad_norm 0.1", o, false);
    o = opt(SIM_OPT_RMSPROP, 0.01f);
    o.max_grad_norm = 1.0f;
    check("RMSprop, max_grad_norm 1", o, true);
    o = opt(SIM_OPT_LAMB, 0.01f);
    o.max_grad_norm = INFINITY;    /* inf: no clipping, as PopTorch's default */
    check("LAMB, max_grad_norm inf", o, false);
}

/* ---- groups, state, plan, refusals ---------------------------------------------------- */

static void
test_group_errors(void **state)
{
    static const char *const nope[] = { "nope" };
    static const char *const twice[] = { "b", "b" };
    struct sim_model *m = model();
    struct sim_optimizer o = opt(SIM_OPT_SGD, 0.1f);
    struct sim_compile_opts co;
    struct sim_exe *e = NULL;
    struct sim_err err;

    (void)state;
    sim_compile_opts_init(&co);
    co.loss = "loss";
    co.optimizer = o;
    co.optimizer.n_groups = 1;
    co.optimizer.groups[0] = (struct sim_opt_group){ .lr = 0.1f, .weights = nope,
                                                     .n_weights = 1 };
    assert_int_equal(sim_compile(m, &co, &e, &err), IPUOF_E_NOTFOUND);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "'nope'"));
    co.optimizer.groups[0].weights = twice;
    co.optimizer.groups[0].n_weights = 2;
    assert_int_equal(sim_compile(m, &co, &e, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "one group"));
    co.optimizer.n_groups = SIM_OPT_MAX_GROUPS + 1;
    assert_int_equal(sim_compile(m, &co, &e, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    co.optimizer.n_groups = 1;
    co.optimizer.groups[0].weights = B_NAME;
    co.optimizer.groups[0].n_weights = 1;
    co.optimizer.groups[0].lr = -1.0f;
    assert_int_equal(sim_compile(m, &co, &e, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "parameter group 1"));
    co.optimizer.groups[0].lr = 0.1f;
    co.optimizer.loss_scaling = 0.0f;
    assert_int_equal(sim_compile(m, &co, &e, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    co.optimizer.loss_scaling = 1.0f;
    co.optimizer.max_grad_norm = -1.0f;
    assert_int_equal(sim_compile(m, &co, &e, &err), IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);
    sim_model_free(m);
}

static void
test_state_tensors(void **state)
{
    struct sim_model *m = model();
    struct sim_optimizer o = opt(SIM_OPT_RMSPROP, 0.01f);
    struct sim_exe *e, *e2;
    struct sim_weight_info wi;
    struct sim_err err;
    float x[STEPS * NA], sq[NA], sq2[NA], mb[NA], ga[NA], wa[NA], wa2[NA], big[NA + 1];
    int64_t step = 0;
    long idx;

    (void)state;
    o.momentum = 0.9f;
    o.centered = 1;
    e = compile_with(m, &o);
    for (int i = 0; i < STEPS * NA; i++)
        x[i] = (float)i * 0.1f - 0.5f;
    feed_and_run(e, x);
    /* names, kinds, sizes */
    idx = sim_exe_weight_index(e, "optimizer:square_avg:a");
    assert_true(idx >= (long)sim_exe_weight_count(e));
    assert_int_equal(sim_exe_weight_info(e, (size_t)idx, &wi), 0);
    assert_int_equal(wi.kind, SIM_WEIGHT_OPTIMIZER_STATE);
    assert_int_equal(wi.bytes, sizeof sq);
    assert_int_equal(wi.rank, 1);
    assert_int_equal(sim_exe_read_weight(e, "optimizer:step", &step, sizeof step, &err), 0);
    assert_int_equal(step, STEPS);
    assert_int_equal(sim_exe_read_weight(e, "optimizer:square_avg:a", sq, sizeof sq, &err), 0);
    assert_int_equal(sim_exe_read_weight(e, "optimizer:momentum_buffer:a", mb, sizeof mb,
                                         &err), 0);
    assert_int_equal(sim_exe_read_weight(e, "optimizer:grad_avg:a", ga, sizeof ga, &err), 0);
    assert_true(sq[1] > 0.0f && mb[1] != 0.0f && ga[1] != 0.0f);
    /* errors */
    assert_int_equal(sim_exe_read_weight(e, "optimizer:exp_avg:a", sq2, sizeof sq2, &err),
                     IPUOF_E_NOTFOUND);
    printf("  refused: %s\n", err.msg);
    assert_int_equal(sim_exe_read_weight(e, "optimizer:square_avg:zz", sq2, sizeof sq2, &err),
                     IPUOF_E_NOTFOUND);
    assert_int_equal(sim_exe_write_weight(e, "optimizer:square_avg:a", big, sizeof big, &err),
                     IPUOF_E_SHAPE);
    printf("  refused: %s\n", err.msg);
    step = -1;
    assert_int_equal(sim_exe_write_weight(e, "optimizer:step", &step, sizeof step, &err),
                     IPUOF_E_INVAL);
    printf("  refused: %s\n", err.msg);

    /* a second executable given the first's weights and state goes on identically */
    e2 = compile_with(m, &o);
    {
        const char *names[] = { "a", "b", "optimizer:step", "optimizer:square_avg:a",
                                "optimizer:square_avg:b", "optimizer:momentum_buffer:a",
                                "optimizer:momentum_buffer:b", "optimizer:grad_avg:a",
                                "optimizer:grad_avg:b" };
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            float buf[NA];
            long k = sim_exe_weight_index(e, names[i]);
            assert_true(k >= 0);
            assert_int_equal(sim_exe_weight_info(e, (size_t)k, &wi), 0);
            assert_int_equal(sim_exe_read_weight(e, names[i], buf, wi.bytes, &err), 0);
            assert_int_equal(sim_exe_write_weight(e2, names[i], buf, wi.bytes, &err), 0);
        }
    }
    for (int i = 0; i < STEPS * NA; i++)
        x[i] = (float)i * -0.07f + 0.3f;
    feed_and_run(e, x);
    feed_and_run(e2, x);
    assert_int_equal(sim_exe_read_weight(e, "a", wa, sizeof wa, &err), 0);
    assert_int_equal(sim_exe_read_weight(e2, "a", wa2, sizeof wa2, &err), 0);
    assert_memory_equal(wa, wa2, sizeof wa);
    assert_int_equal(sim_exe_read_weight(e2, "optimizer:step", &step, sizeof step, &err), 0);
    assert_int_equal(step, 2 * STEPS);
    sim_exe_free(e);
    sim_exe_free(e2);
    sim_model_free(m);
}

static void
test_plan_and_set_optimizer(void **state)
{
    struct {
        int kind, centered;
        float mu;
        unsigned per_weight;
    } cases[] = {
        { SIM_OPT_SGD, 0, 0.0f, 0 }, { SIM_OPT_SGD, 0, 0.9f, 1 }, { SIM_OPT_ADAM, 0, 0, 2 },
        { SIM_OPT_LAMB, 0, 0, 2 }, { SIM_OPT_RMSPROP, 0, 0, 1 },
        { SIM_OPT_RMSPROP, 1, 0.9f, 3 }, { SIM_OPT_SGD, 2, 0.0f, 1 },
    };
    struct sim_model *m = model();
    struct sim_err err;

    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct sim_optimizer o = opt(cases[c].kind, 0.01f);
        struct sim_mem_report r;
        struct sim_exe *e;
        o.momentum = cases[c].mu;
        o.centered = cases[c].centered == 1;
        o.plan_momentum = cases[c].centered == 2;   /* (the SGD row: planned at 0) */
        e = compile_with(m, &o);
        assert_int_equal(sim_exe_memory(e, 0, &r), 0);
        printf("  kind %d centered %d momentum %.1f: optimizer state %llu bytes\n", o.kind,
               o.centered, (double)o.momentum, (unsigned long long)r.optimizer);
        assert_int_equal(r.optimizer, (uint64_t)(NA + NB) * 4 * cases[c].per_weight);
        if (o.plan_momentum) {     /* planned at momentum 0: it may become non-zero */
            o.momentum = 0.9f;
            o.plan_momentum = 0;
            assert_int_equal(sim_exe_set_optimizer(e, &o, &err), 0);
        }
        if (cases[c].kind == SIM_OPT_SGD && cases[c].mu == 0.0f && !o.plan_momentum &&
            cases[c].centered == 0) {
            o.momentum = 0.9f;     /* neither non-zero nor planned at compile */
            assert_int_equal(sim_exe_set_optimizer(e, &o, &err), IPUOF_E_INVAL);
            printf("  refused: %s\n", err.msg);
        }
        if (cases[c].kind == SIM_OPT_RMSPROP && !cases[c].centered) {
            o.centered = 1;        /* no grad_avg was planned */
            assert_int_equal(sim_exe_set_optimizer(e, &o, &err), IPUOF_E_INVAL);
            printf("  refused: %s\n", err.msg);
            o.centered = 0;
            o.momentum = 0.5f;     /* nor a momentum buffer */
            assert_int_equal(sim_exe_set_optimizer(e, &o, &err), IPUOF_E_INVAL);
            printf("  refused: %s\n", err.msg);
        }
        sim_exe_free(e);
    }
    sim_model_free(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsprop),
        cmocka_unit_test(test_lamb),
        cmocka_unit_test(test_adam_without_bias_correction),
        cmocka_unit_test(test_clipping),
        cmocka_unit_test(test_group_errors),
        cmocka_unit_test(test_state_tensors),
        cmocka_unit_test(test_plan_and_set_optimizer),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
