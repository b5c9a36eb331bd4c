/*
 * test_sim_xreduce.c — sim_exe_set_xreduce, the hook a Pod's daemons all-reduce gradients
 * through (sim.h): two executables of 2 replicas each, all-reducing over the collective
 * engine (pod/coll.h: gloo over loopback TCP, one thread per "daemon", the in-process
 * store), train to the same weights as one executable of 4 replicas fed the same global
 * batches, after 10 optimizer steps, for a multi-layer perceptron (the tutorial's shape)
 * and a network with BatchNormalization (whose statistics stay per replica).
 *
 * Two ways to sum, as the daemon offers them ([pod] sum): every replica's buffer passed to
 * pod_coll_allreduce_f32_multi, which sums ((g0 + g1) + g2) + g3 left to right as the
 * reference does: the weights are asserted bit-identical; and each executable summing its
 * replicas first, then gloo's ring over the sums, (g0 + g1) + (g2 + g3): the weights differ
 * by float rounding only, |a - b| <= 1e-5 (1 + |b|) after 10 steps is asserted (measured
 * maximum printed). The mean's 1/4 is a power of two, exact both ways. Each executable's
 * two copies of the weights are bit-identical (every rank gets the same bits).
 *
 * Also: a failing xreduce fails the run with its error and takes no optimizer step; the
 * argument checks; the simulated clock charges the all-reduce between executables at the
 * rate given (2(H-1)/H of the trainable bytes per device iteration).
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coll.h"
#include "ipuof/status.h"
#include "obload.h"
#include "onnx_build.h"
#include "sim.h"

#define F32 SIM_DTYPE_FLOAT
#define I64 SIM_DTYPE_INT64
#define DIMS(...) (const int64_t[]){ __VA_ARGS__ }
#define FLOATS(...) (const float[]){ __VA_ARGS__ }
#define B 4
#define STEPS 10
#define IN 18

/* x (B,2,3,3) -> Conv 1x1 -> BatchNorm -> GlobalAveragePool -> Flatten -> Gemm -> CE. */
static struct sim_model *
bn_model(void)
{
    struct sim_ob *b = sim_ob_new(15);
    float cw[4] = { 0.5f, -0.3f, 0.2f, 0.8f }, fw[6] = { 0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f };

    sim_ob_input(b, "x", F32, 4, DIMS(-1, 2, 3, 3));
    sim_ob_input(b, "labels", I64, 1, DIMS(-1));
    sim_ob_initializer(b, "conv.w", F32, 4, DIMS(2, 2, 1, 1), cw);
    sim_ob_initializer(b, "bn.scale", F32, 1, DIMS(2), FLOATS(1, 1));
    sim_ob_initializer(b, "bn.bias", F32, 1, DIMS(2), FLOATS(0, 0));
    sim_ob_initializer(b, "bn.mean", F32, 1, DIMS(2), FLOATS(0, 0));
    sim_ob_initializer(b, "bn.var", F32, 1, DIMS(2), FLOATS(1, 1));
    sim_ob_initializer(b, "fc.w", F32, 2, DIMS(3, 2), fw);
    sim_ob_initializer(b, "fc.b", F32, 1, DIMS(3), FLOATS(0, 0.1f, -0.1f));
    sim_ob_node(b, "Conv", "conv", "x,conv.w", "c");
    sim_ob_node(b, "BatchNormalization", "bn", "c,bn.scale,bn.bias,bn.mean,bn.var", "n");
    sim_ob_node(b, "GlobalAveragePool", "gap", "n", "g");
    sim_ob_node(b, "Flatten", "flat", "g", "f");
    sim_ob_node(b, "Gemm", "fc", "f,fc.w,fc.b", "logits");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_output(b, "logits", F32);
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "ce", "logits,labels", "loss");
    sim_ob_output(b, "loss", F32);
    return test_ob_load(b);
}

/* x (B,18) -> Gemm(8) -> Relu -> Gemm(3) -> CE: the tutorial's classifier, smaller. */
static struct sim_model *
mlp_model(void)
{
    struct sim_ob *b = sim_ob_new(15);
    float w1[8 * IN], b1[8], w2[3 * 8], b2[3];

    for (int i = 0; i < 8 * IN; i++)
        w1[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
    for (int i = 0; i < 8; i++)
        b1[i] = 0.01f * (float)i;
    for (int i = 0; i < 24; i++)
        w2[i] = (float)((i * 11) % 7) / 7.0f - 0.45f;
    for (int i = 0; i < 3; i++)
        b2[i] = 0.0f;
    sim_ob_input(b, "x", F32, 2, DIMS(-1, IN));
    sim_ob_input(b, "labels", I64, 1, DIMS(-1));
    sim_ob_initializer(b, "fc1.w", F32, 2, DIMS(8, IN), w1);
    sim_ob_initializer(b, "fc1.b", F32, 1, DIMS(8), b1);
    sim_ob_initializer(b, "fc2.w", F32, 2, DIMS(3, 8), w2);
    sim_ob_initializer(b, "fc2.b", F32, 1, DIMS(3), b2);
    sim_ob_node(b, "Gemm", "fc1", "x,fc1.w,fc1.b", "h");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_node(b, "Relu", "relu", "h", "r");
    sim_ob_node(b, "Gemm", "fc2", "r,fc2.w,fc2.b", "logits");
    sim_ob_attr_int(b, "transB", 1);
    sim_ob_output(b, "logits", F32);
    sim_ob_node(b, "SoftmaxCrossEntropyLoss", "ce", "logits,labels", "loss");
    sim_ob_output(b, "loss", F32);
    return test_ob_load(b);
}

static struct sim_exe *
compile_r(const struct sim_model *m, unsigned replicas)
{
    struct sim_compile_opts o;
    struct sim_exe *e = NULL;
    struct sim_err err;

    sim_compile_opts_init(&o);
    o.loss = "loss";
    o.micro_batch = B;
    o.replicas = replicas;
    sim_optimizer_init(&o.optimizer, SIM_OPT_SGD);
    o.optimizer.lr = 0.1f;
    o.optimizer.momentum = 0.9f;
    if (sim_compile(m, &o, &e, &err) != 0)
        fail_msg("compile: %s", err.msg);
    return e;
}

/* The global batch of step s: replica g's rows, for the replicas first .. first + R - 1. */
static void
fill(struct sim_exe *e, unsigned step, unsigned first, unsigned R)
{
    float *x = sim_exe_input_buffer(e, (size_t)sim_exe_input_index(e, "x"));
    int64_t *l = sim_exe_input_buffer(e, (size_t)sim_exe_input_index(e, "labels"));

    for (unsigned r = 0; r < R; r++)
        for (unsigned i = 0; i < B; i++) {
            unsigned row = (first + r) * B + i, seed = step * 131 + row;
            for (unsigned k = 0; k < IN; k++)
                x[((size_t)r * B + i) * IN + k] =
                    (float)((seed * 7 + k * 13) % 29) / 29.0f - 0.5f + 0.01f * (float)(k % 3);
            l[r * B + i] = (int64_t)((seed * 5 + step) % 3);
        }
}

/* The weights of e, concatenated, into w (caller frees); their count in *n. */
static float *
weights(struct sim_exe *e, size_t *n)
{
    size_t total = 0, off = 0;
    float *w;
    struct sim_err err;

    for (size_t i = 0; i < sim_exe_weight_count(e); i++) {
        struct sim_weight_info wi;
        assert_int_equal(sim_exe_weight_info(e, i, &wi), 0);
        total += wi.bytes / sizeof(float);
    }
    w = calloc(total + 1, sizeof *w);
    assert_non_null(w);
    for (size_t i = 0; i < sim_exe_weight_count(e); i++) {
        struct sim_weight_info wi;
        assert_int_equal(sim_exe_weight_info(e, i, &wi), 0);
        assert_int_equal(sim_exe_read_weight(e, wi.name, w + off, wi.bytes, &err), 0);
        off += wi.bytes / sizeof(float);
    }
    *n = total;
    return w;
}

/* One "daemon": rank of 2, with its executable of 2 replicas. */
struct daemon_th {
    const struct pod_store *st;
    const char *prefix;
    int rank;
    int local_first;            /* sum the executable's replicas, then all-reduce */
    struct sim_exe *e;
    struct pod_coll *c;
    int rc;
    char err[1024];
    unsigned calls;
};

static int
xreduce_coll(void *ctx, float *g, unsigned R, size_t n, struct sim_err *err)
{
    struct daemon_th *d = ctx;
    const float *in[8];
    char why[512];
    int rc;

    d->calls++;
    assert_true(R <= 8);
    if (d->local_first) {
        for (unsigned r = 1; r < R; r++)
            for (size_t i = 0; i < n; i++)
                g[i] += g[(size_t)r * n + i];
        rc = pod_coll_allreduce_f32(d->c, g, n, why, sizeof why);
    } else {
        for (unsigned r = 0; r < R; r++)
            in[r] = g + (size_t)r * n;
        rc = pod_coll_allreduce_f32_multi(d->c, in, (int)R, g, n, why, sizeof why);
    }
    if (rc != 0) {
        err->code = IPUOF_E_IO;
        snprintf(err->msg, sizeof err->msg, "all-reduce across daemons: %s", why);
        return IPUOF_E_IO;
    }
    return 0;
}

static void *
daemon_main(void *arg)
{
    struct daemon_th *d = arg;
    struct sim_xreduce x = { xreduce_coll, d, 4 };
    struct sim_err err;

    d->rc = pod_coll_open(&d->c, d->st, d->prefix, d->rank, 2, "127.0.0.1", 20000, d->err,
                          sizeof d->err);
    if (d->rc != 0)
        return NULL;
    d->rc = sim_exe_set_xreduce(d->e, &x, &err);
    for (unsigned s = 0; s < STEPS && d->rc == 0; s++) {
        fill(d->e, s, 2 * (unsigned)d->rank, 2);
        d->rc = sim_exe_run(d->e, &err);
    }
    if (d->rc != 0)
        snprintf(d->err, sizeof d->err, "%s", err.msg);
    pod_coll_close(d->c);
    return NULL;
}

static void
compare_pod(struct sim_model *m, const char *what, const char *prefix, int local_first)
{
    struct sim_exe *ref = compile_r(m, 4);
    struct pod_store_mem *mem = pod_store_mem_new();
    struct pod_store st;
    struct daemon_th d[2];
    pthread_t th[2];
    struct sim_err err;
    float *wr, *w0, *w1;
    size_t nr, n0, n1;
    double maxd = 0.0;

    assert_non_null(mem);
    pod_store_mem_fill(mem, &st);
    for (unsigned s = 0; s < STEPS; s++) {
        fill(ref, s, 0, 4);
        if (sim_exe_run(ref, &err) != 0)
            fail_msg("reference run: %s", err.msg);
    }
    for (int r = 0; r < 2; r++) {
        memset(&d[r], 0, sizeof d[r]);
        d[r].st = &st;
        d[r].prefix = prefix;
        d[r].rank = r;
        d[r].local_first = local_first;
        d[r].e = compile_r(m, 2);
        assert_int_equal(pthread_create(&th[r], NULL, daemon_main, &d[r]), 0);
    }
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < 2; r++)
        if (d[r].rc != 0)
            fail_msg("daemon %d: %s", r, d[r].err);
    assert_int_equal(d[0].calls, STEPS);
    wr = weights(ref, &nr);
    w0 = weights(d[0].e, &n0);
    w1 = weights(d[1].e, &n1);
    assert_int_equal(nr, n0);
    assert_int_equal(nr, n1);
    for (size_t i = 0; i < nr; i++) {
        double diff = fabs((double)w0[i] - (double)wr[i]);
        if (diff > maxd)
            maxd = diff;
        if (diff > 1e-5 * (1.0 + fabs((double)wr[i])))
            fail_msg("%s: weight element %zu: 2 x 2 replicas %.9g, 1 x 4 replicas %.9g", what,
                     i, (double)w0[i], (double)wr[i]);
    }
    if (!local_first) /* the reference's order: the same bits */
        assert_memory_equal(w0, wr, nr * sizeof *wr);
    /* trainable weights are the same bits on both; running statistics are per replica */
    for (size_t i = 0, off = 0; i < sim_exe_weight_count(d[0].e); i++) {
        struct sim_weight_info wi;
        assert_int_equal(sim_exe_weight_info(d[0].e, i, &wi), 0);
        if (wi.kind == SIM_WEIGHT_TRAINABLE)
            assert_memory_equal(w0 + off, w1 + off, wi.bytes);
        off += wi.bytes / sizeof(float);
    }
    printf("%s, %s: 2 daemons x 2 replicas against 1 x 4 after %d steps: %zu weights, max "
           "|diff| %.3g\n", what, local_first ? "daemons' sums (ring)" : "every replica, left "
           "to right", STEPS, nr, maxd);
    free(wr);
    free(w0);
    free(w1);
    sim_exe_free(ref);
    sim_exe_free(d[0].e);
    sim_exe_free(d[1].e);
    pod_store_mem_free(mem);
}

static void
test_xreduce_mlp(void **state)
{
    struct sim_model *m = mlp_model();

    (void)state;
    compare_pod(m, "MLP", "xr-mlp", 0);
    compare_pod(m, "MLP", "xr-mlp-ring", 1);
    sim_model_free(m);
}

static void
test_xreduce_batchnorm(void **state)
{
    struct sim_model *m = bn_model();

    (void)state;
    compare_pod(m, "BatchNorm", "xr-bn", 0);
    compare_pod(m, "BatchNorm", "xr-bn-ring", 1);
    sim_model_free(m);
}

static int
xreduce_fail(void *ctx, float *g, unsigned R, size_t n, struct sim_err *err)
{
    (void)ctx;
    (void)g;
    (void)R;
    (void)n;
    err->code = IPUOF_E_CLOSED;
    snprintf(err->msg, sizeof err->msg, "rank 1 (10.0.0.2:4000) closed the connection");
    return IPUOF_E_CLOSED;
}

static void
test_xreduce_failure(void **state)
{
    struct sim_model *m = mlp_model();
    struct sim_exe *e = compile_r(m, 2), *inf;
    struct sim_xreduce x = { xreduce_fail, NULL, 4 }, few = { xreduce_fail, NULL, 1 };
    struct sim_compile_opts o;
    struct sim_err err;
    float before[8 * IN], after[8 * IN];

    (void)state;
    assert_int_equal(sim_exe_set_xreduce(e, &few, &err), IPUOF_E_INVAL);
    assert_non_null(strstr(err.msg, "fewer than"));
    assert_int_equal(sim_exe_set_xreduce(e, &x, &err), 0);
    fill(e, 0, 0, 2);
    assert_int_equal(sim_exe_read_weight(e, "fc1.w", before, sizeof before, &err), 0);
    assert_int_equal(sim_exe_run(e, &err), IPUOF_E_CLOSED);
    assert_non_null(strstr(err.msg, "rank 1 (10.0.0.2:4000) closed the connection"));
    assert_int_equal(sim_exe_read_weight(e, "fc1.w", after, sizeof after, &err), 0);
    assert_memory_equal(before, after, sizeof before); /* no optimizer step */
    /* without the hook it trains again */
    assert_int_equal(sim_exe_set_xreduce(e, NULL, &err), 0);
    assert_int_equal(sim_exe_run(e, &err), 0);
    assert_int_equal(sim_exe_read_weight(e, "fc1.w", after, sizeof after, &err), 0);
    assert_true(memcmp(before, after, sizeof before) != 0);
    sim_compile_opts_init(&o);
    o.micro_batch = B;
    assert_int_equal(sim_compile(m, &o, &inf, &err), 0);
    assert_int_equal(sim_exe_set_xreduce(inf, &x, &err), IPUOF_E_INVAL);
    sim_exe_free(inf);
    sim_exe_free(e);
    sim_model_free(m);
}

/* The executable's own replicas summed: another executable contributing zeros. */
static int
xreduce_nothing(void *ctx, float *g, unsigned R, size_t n, struct sim_err *err)
{
    (void)ctx;
    (void)err;
    for (unsigned r = 1; r < R; r++)
        for (size_t i = 0; i < n; i++)
            g[i] += g[(size_t)r * n + i];
    return 0;
}

static void
test_xreduce_cost(void **state)
{
    struct sim_model *m = mlp_model();
    struct sim_exe *e = compile_r(m, 2);
    struct sim_xreduce x = { xreduce_nothing, NULL, 8, 25e9 }, bad = x;
    struct sim_cost_report r0, r1;
    struct sim_err err;
    double bytes = 0, want, got;

    (void)state;
    for (size_t i = 0; i < sim_exe_weight_count(e); i++) {
        struct sim_weight_info wi;
        assert_int_equal(sim_exe_weight_info(e, i, &wi), 0);
        if (wi.kind == SIM_WEIGHT_TRAINABLE)
            bytes += (double)wi.bytes;
    }
    fill(e, 0, 0, 2);
    assert_int_equal(sim_exe_run(e, &err), 0);
    assert_int_equal(sim_exe_cost(e, &r0), 0);
    bad.bytes_per_s = -1;
    assert_int_equal(sim_exe_set_xreduce(e, &bad, &err), IPUOF_E_INVAL);
    assert_int_equal(sim_exe_set_xreduce(e, &x, &err), 0);
    assert_int_equal(sim_exe_run(e, &err), 0);
    assert_int_equal(sim_exe_cost(e, &r1), 0);
    /* 8 replicas over executables of 2: a ring of 4, 2 x 3/4 of the bytes */
    want = 2.0 * 3.0 / 4.0 * bytes / 25e9;
    got = r1.device_seconds - r0.device_seconds;
    printf("cross-executable all-reduce of %.0f bytes at 25e9 B/s: %.4g s charged, %.4g s "
           "expected (device time %.4g s -> %.4g s)\n", bytes, got, want, r0.device_seconds,
           r1.device_seconds);
    assert_true(fabs(got - want) <= 1e-3 * want);
    /* rate 0: not charged */
    x.bytes_per_s = 0;
    assert_int_equal(sim_exe_set_xreduce(e, &x, &err), 0);
    assert_int_equal(sim_exe_run(e, &err), 0);
    assert_int_equal(sim_exe_cost(e, &r1), 0);
    assert_true(fabs(r1.device_seconds - r0.device_seconds) <= 1e-12);
    sim_exe_free(e);
    sim_model_free(m);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xreduce_mlp),
        cmocka_unit_test(test_xreduce_batchnorm),
        cmocka_unit_test(test_xreduce_failure),
        cmocka_unit_test(test_xreduce_cost),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
